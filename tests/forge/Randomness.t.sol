// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Test} from "./base/Test.sol";
import {PanelFixture, VmPanel} from "./base/PanelFixture.sol";
import {BlockhashRandomness} from "../../contracts/BlockhashRandomness.sol";
import {RefereePanel} from "../../contracts/RefereePanel.sol";
import {PanelPhase, SELECTION_EPOCH_BLOCKS, MIN_DRAW_BLOCKS} from "../../contracts/types/VerityTypes.sol";
import {ParameterOutOfRange} from "../../contracts/errors/CommonErrors.sol";
import {UnknownRequest, RandomnessNotReady, RequestNotStale} from "../../contracts/errors/RandomnessErrors.sol";
import {SeatingRandomnessPending} from "../../contracts/errors/RefereePanelErrors.sol";

contract RandomnessTest is Test {
    event RandomnessRequested(uint256 indexed requestId, address indexed requester, uint64 targetBlock);
    event RandomnessRenewed(uint256 indexed requestId, uint64 targetBlock);

    uint64 internal constant DELAY = 5;
    VmPanel internal constant vmx = VmPanel(address(uint160(uint256(keccak256("hevm cheat code")))));
    BlockhashRandomness internal rnd;

    /// @dev 10_000 = 312 * 32 + 16: a request here targets 10_005, and the epoch ends at 10_015.
    uint256 internal constant EPOCH_END = 10_015;

    function setUp() public {
        vm.roll(10_000);
        rnd = new BlockhashRandomness(DELAY);
    }

    function _request() internal returns (uint256 id, uint64 target) {
        id = rnd.request();
        target = rnd.targetOf(id);
    }

    // ---------------------------------------------------------------- constructor

    function test_constructor_zeroDelay_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(ParameterOutOfRange.selector, bytes32("delay"), 0, 1, 1_000_000));
        new BlockhashRandomness(0);
    }

    function test_constructor_delayTooLarge_reverts() public {
        vm.expectRevert(
            abi.encodeWithSelector(ParameterOutOfRange.selector, bytes32("delay"), 1_000_001, 1, 1_000_000)
        );
        new BlockhashRandomness(1_000_001);
    }

    // ---------------------------------------------------------------- request

    function test_request_targetsDelayAhead_succeeds() public {
        vm.expectEmit(true, true, false, true, address(rnd));
        emit RandomnessRequested(1, address(this), uint64(block.number) + DELAY);
        (uint256 id, uint64 target) = _request();
        assertEq(id, 1, "first id");
        assertEq(target, block.number + DELAY, "target");
        (uint256 id2,) = _request();
        assertEq(id2, 2, "ids increment");
        assertEq(rnd.requestCount(), 2, "count");
    }

    /// @dev Targets are packed four to a word: requests made in different blocks keep their own, and renewing one
    ///      leaves its neighbours in the word as they were.
    function test_request_packedTargets_independent_succeeds() public {
        uint64[6] memory targets;
        for (uint256 i = 0; i < 6; ++i) {
            vm.roll(10_000 + i);
            (uint256 id, uint64 target) = _request();
            assertEq(id, i + 1, "ids 1..6");
            assertTrue(target >= 10_000 + i + DELAY, "own target, at least the delay ahead");
            targets[i] = target;
        }
        assertEq(rnd.targetOf(7), 0, "an unknown id has no target");
        vm.roll(EPOCH_END + 1); // the next epoch: every request is stale
        rnd.renew(3);
        uint64 renewed = rnd.targetOf(3);
        (, uint64 fresh) = _request(); // a request in the same block targets the same block
        assertEq(renewed, fresh, "renewed target");
        for (uint256 i = 0; i < 6; ++i) {
            if (i != 2) assertEq(rnd.targetOf(i + 1), targets[i], "a neighbour's target moved");
        }
    }

    function test_request_nearEpochEnd_targetsNextEpochStart_succeeds() public {
        vm.roll(10_005); // + DELAY = 10_010: only 5 blocks of the epoch would follow it
        (, uint64 target) = _request();
        assertEq(target, EPOCH_END + 1, "the next epoch's first block");
    }

    /// @notice Every target is at least `delay` ahead, leaves MIN_DRAW_BLOCKS blocks of its epoch after it to land the
    ///         draw, and waits at most one epoch's tail longer than `delay`.
    function testFuzz_request_targetLeavesDrawBlocksInItsEpoch_succeeds(uint256 blockNumber) public {
        vm.roll(bound(blockNumber, 1, 1e12));
        (, uint64 target) = _request();
        assertTrue(target >= block.number + DELAY, "at least delay ahead");
        assertLe(target, block.number + DELAY + MIN_DRAW_BLOCKS, "no longer than the epoch's tail");
        assertTrue(SELECTION_EPOCH_BLOCKS - 1 - target % SELECTION_EPOCH_BLOCKS >= MIN_DRAW_BLOCKS, "blocks to draw in");
    }

    // ---------------------------------------------------------------- isReady / isStale

    function test_isReady_window_succeeds() public {
        (uint256 id, uint64 target) = _request();
        assertFalse(rnd.isReady(id), "ready at request");
        vm.roll(target);
        assertFalse(rnd.isReady(id), "ready in the target block itself");
        vm.roll(target + 1);
        assertTrue(rnd.isReady(id), "not ready after target");
        vm.roll(EPOCH_END);
        assertTrue(rnd.isReady(id), "not ready at the epoch's last block");
        vm.roll(EPOCH_END + 1);
        assertFalse(rnd.isReady(id), "ready in the next epoch: the weights a draw reads there changed after the value");
    }

    function test_isStale_window_succeeds() public {
        (uint256 id,) = _request();
        assertFalse(rnd.isStale(id), "stale at request");
        vm.roll(EPOCH_END);
        assertFalse(rnd.isStale(id), "stale inside the epoch");
        vm.roll(EPOCH_END + 1);
        assertTrue(rnd.isStale(id), "not stale once its epoch ended");
    }

    function testFuzz_isReady_exclusiveWithStale_succeeds(uint256 blocks) public {
        (uint256 id, uint64 target) = _request();
        vm.roll(block.number + bound(blocks, 0, 2_000));
        bool ready = rnd.isReady(id);
        bool stale = rnd.isStale(id);
        assertFalse(ready && stale, "ready and stale");
        assertEq(ready || stale, block.number > target, "pending iff target not mined");
    }

    function test_isReady_unknownId_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(UnknownRequest.selector, 7));
        rnd.isReady(7);
    }

    function test_isStale_unknownId_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(UnknownRequest.selector, 0));
        rnd.isStale(0);
    }

    // ---------------------------------------------------------------- valueOf

    function test_valueOf_targetHashOnly_succeeds() public {
        (uint256 id, uint64 target) = _request();
        vm.roll(target + 1);
        vmx.setBlockhash(target, keccak256("target block"));
        bytes32 v = rnd.valueOf(id);
        assertEq(v, keccak256(abi.encode(keccak256("target block"), id)), "value formula");
        // Reading later, after other blocks' hashes changed, gives the same value.
        vm.roll(EPOCH_END);
        vmx.setBlockhash(target + 1, keccak256("other"));
        vmx.setBlockhash(EPOCH_END - 1, keccak256("other 2"));
        vm.prevrandao(keccak256("randao"));
        vm.warp(block.timestamp + 1_000);
        assertEq(rnd.valueOf(id), v, "value moved with the reading block");
        // Only the target's hash decides it.
        vmx.setBlockhash(target, keccak256("another target"));
        assertTrue(rnd.valueOf(id) != v, "target hash ignored");
    }

    function test_valueOf_distinctIdsSameTarget_succeeds() public {
        (uint256 a,) = _request();
        (uint256 b,) = _request();
        vm.roll(block.number + DELAY + 1);
        assertTrue(rnd.valueOf(a) != rnd.valueOf(b), "same value for two requests");
    }

    function test_valueOf_pending_reverts() public {
        (uint256 id, uint64 target) = _request();
        vm.roll(target);
        vm.expectRevert(abi.encodeWithSelector(RandomnessNotReady.selector, id, target, target));
        rnd.valueOf(id);
    }

    function test_valueOf_stale_reverts() public {
        (uint256 id, uint64 target) = _request();
        vm.roll(EPOCH_END + 1);
        vm.expectRevert(abi.encodeWithSelector(RandomnessNotReady.selector, id, target, EPOCH_END + 1));
        rnd.valueOf(id);
    }

    function test_valueOf_unknownId_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(UnknownRequest.selector, 1));
        rnd.valueOf(1);
    }

    // ---------------------------------------------------------------- renew

    function test_renew_stale_succeeds() public {
        (uint256 id, uint64 target) = _request();
        vm.roll(target + 300);
        uint64 next = uint64(block.number) + DELAY;
        vm.expectEmit(true, false, false, true, address(rnd));
        emit RandomnessRenewed(id, next);
        vm.prank(address(0xBEEF)); // anyone
        rnd.renew(id);
        assertEq(rnd.targetOf(id), next, "new target");
        assertFalse(rnd.isReady(id), "ready before the new target");
        assertFalse(rnd.isStale(id), "still stale");
        vm.roll(next + 1);
        assertEq(rnd.valueOf(id), keccak256(abi.encode(blockhash(next), id)), "value from the new target");
    }

    function test_renew_pending_reverts() public {
        (uint256 id, uint64 target) = _request();
        vm.expectRevert(abi.encodeWithSelector(RequestNotStale.selector, id, target, block.number));
        rnd.renew(id);
    }

    function test_renew_ready_reverts() public {
        (uint256 id, uint64 target) = _request();
        vm.roll(EPOCH_END);
        vm.expectRevert(abi.encodeWithSelector(RequestNotStale.selector, id, target, EPOCH_END));
        rnd.renew(id);
    }

    function test_renew_unknownId_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(UnknownRequest.selector, 3));
        rnd.renew(3);
    }
}

/// @notice P4 at the panel: seats come from the value of a request made before anyone could know it, so neither the
///         opener nor whoever calls seat() can pick them by picking a block.
contract PanelRandomnessTest is PanelFixture {
    uint256 internal constant ID = 42;

    function test_seat_drawsFromRequestValue_succeeds() public {
        _open(ID);
        _rollToReady(ID);
        RefereePanel.Panel memory p = _panel(ID);
        bytes32 value = randomness.valueOf(p.requestId);
        address[] memory exclude = new address[](16);
        (exclude[0], exclude[1], exclude[2]) = (partyA, partyB, coDefender);
        address first = registry.drawReferee(keccak256(abi.encode(value, ID, 0, 1)), 0, 1_000, 1, REF_STAKE, exclude);
        panel.seat(ID);
        assertEq(_panel(ID).seats[0], first, "seat 0 not drawn from the request's value");
    }

    /// @notice P4: once requested, the seats do not depend on the block in which anyone calls seat.
    function test_seat_sameSeatsInAnyLaterBlock_succeeds() public {
        _open(ID);
        uint64 target = _target(ID);
        uint256 snap = vmx.snapshotState();
        vm.roll(target + 1);
        panel.seat(ID);
        address[] memory early = _panel(ID).seats;
        vmx.revertToState(snap);
        vm.roll(target - target % SELECTION_EPOCH_BLOCKS + SELECTION_EPOCH_BLOCKS - 1); // the epoch's last block
        vm.warp(block.timestamp + 30);
        vm.prevrandao(keccak256("chosen by the caller"));
        vmx.setBlockhash(target + 1, keccak256("another parent"));
        vmx.setBlockhash(block.number - 1, keccak256("another parent 2"));
        vm.prank(partyB);
        panel.seat(ID);
        address[] memory late = _panel(ID).seats;
        for (uint256 i = 0; i < 3; ++i) {
            assertEq(late[i], early[i], "seat depends on the seating block");
        }
    }

    function test_seat_staleRequest_renews_succeeds() public {
        _open(ID);
        uint64 target = _target(ID);
        vm.roll(target + 257);
        panel.seat(ID);
        assertTrue(_panel(ID).phase == PanelPhase.Seating, "seated from a stale request");
        assertEq(_target(ID), block.number + DELAY, "not renewed");
        vm.expectRevert(abi.encodeWithSelector(SeatingRandomnessPending.selector, ID, 1));
        panel.seat(ID);
        _seat(ID);
        assertTrue(_panel(ID).phase == PanelPhase.Committing, "not seated after renewal");
    }

    function test_seat_pendingRandomness_reverts() public {
        _open(ID);
        vm.roll(_target(ID));
        vm.expectRevert(abi.encodeWithSelector(SeatingRandomnessPending.selector, ID, 1));
        panel.seat(ID);
    }

    /// @notice Issue 23 (high), written against v2 first: a party owning sybil referees that saw the value re-rolled
    ///         the panel for free by nudging one sybil's weight until its sybils held a majority (on v2 a nudge of at
    ///         most 128 units did it here). Now seat() reads the weights as the epoch began: no nudge moves a seat.
    function test_seat_weightNudgeAfterValue_cannotRegrindSeats_succeeds() public {
        address[3] memory sybils = [address(0x5B1), address(0x5B2), address(0x5B3)];
        for (uint256 i = 0; i < 3; ++i) {
            _register(sybils[i]);
        }
        _addReferees(10); // sybils hold 3 of 16 referee stakes
        _open(ID);
        _rollToReady(ID);
        uint256 honestCount = _sybilSeats(sybils, 0);
        uint256 changed;
        for (uint256 nudge = 1; nudge <= 128; ++nudge) {
            if (_sybilSeats(sybils, nudge) != honestCount) ++changed;
        }
        assertTrue(honestCount < 2, "pick another setup: sybils already win without grinding");
        assertEq(changed, 0, "nudges after the value changed the sybils' seats (of 128 tried)");
    }

    function _sybilSeats(address[3] memory sybils, uint256 nudge) internal returns (uint256 count) {
        uint256 snap = vmx.snapshotState();
        if (nudge > 0) {
            uint256 unit = registry.WEIGHT_UNIT(); // read before the prank, which binds the next call
            vm.prank(sybils[0]);
            registry.requestUnstake(nudge * 10 * unit); // on probation weight = stake / 10, in gwei
        }
        panel.seat(ID);
        address[] memory seats = _panel(ID).seats;
        for (uint256 i = 0; i < seats.length; ++i) {
            if (seats[i] == sybils[0] || seats[i] == sybils[1] || seats[i] == sybils[2]) ++count;
        }
        vmx.revertToState(snap);
    }
}
