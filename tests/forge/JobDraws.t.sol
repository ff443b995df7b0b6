// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Fixture} from "./base/Fixture.sol";
import {VmPanel} from "./base/PanelFixture.sol";
import {IJobRegistry} from "../../contracts/interfaces/IJobRegistry.sol";
import {Task, TaskStatus, PostJobParams, SELECTION_EPOCH_BLOCKS} from "../../contracts/types/VerityTypes.sol";
import {DrawPending, UnexpectedTaskStatus} from "../../contracts/errors/JobRegistryErrors.sol";

/// @notice P4 for replica slots: a task's slots are drawn in two phases. Whatever empties them (posting, the finalize
///         that completes a round, a late report, a lost dispute) only requests randomness; `assign` (anyone) draws
///         later from the value of a block mined after the request. Neither the party whose transaction triggers
///         the draw nor whoever calls `assign` can choose the nodes by choosing a block.
contract JobDrawsTest is Fixture {
    VmPanel internal constant vmx = VmPanel(address(uint160(uint256(keccak256("hevm cheat code")))));

    function setUp() public override {
        super.setUp();
        _addNodes(8);
    }

    function _target(uint256 taskId) internal view returns (uint256) {
        return randomness.targetOf(views.getTask(taskId).drawRequest);
    }

    function test_postJob_p4RequestsInsteadOfDrawing_succeeds() public {
        vm.expectEmit(true, false, false, true, address(jobs));
        emit IJobRegistry.DrawRequested(1, 1);
        _postOnly(_params(1, 1, 2));
        Task memory t = views.getTask(1);
        assertEq(uint8(t.status), uint8(TaskStatus.Open), "open until drawn");
        assertEq(t.drawRequest, 1, "request stored");
        assertEq(_replica(1, 0).node, address(0), "slot 0 drawn at post");
        assertEq(_replica(1, 1).node, address(0), "slot 1 drawn at post");
        assertEq(_target(1), block.number + 2, "target: delay blocks ahead");
    }

    function test_assign_beforeTarget_reverts() public {
        _postOnly(_params(1, 1, 2));
        vm.roll(_target(1)); // the target block itself: its hash is not known inside it
        vm.expectRevert(abi.encodeWithSelector(DrawPending.selector, 1, 1));
        jobs.assign(1);
    }

    function test_assign_notOpen_reverts() public {
        _post(_params(1, 1, 2));
        vm.expectRevert(abi.encodeWithSelector(UnexpectedTaskStatus.selector, 1, TaskStatus.Assigned));
        jobs.assign(1);
    }

    /// @notice Once requested, the nodes do not depend on the block in which anyone calls assign, nor on its
    ///         prevrandao, timestamp or caller.
    function test_assign_p4SameNodesInAnyLaterBlock_succeeds() public {
        _postOnly(_params(1, 1, 2));
        uint256 target = _target(1);
        uint256 snap = vmx.snapshotState();
        vm.roll(target + 1);
        jobs.assign(1);
        (address a0, address a1) = (_replica(1, 0).node, _replica(1, 1).node);
        vmx.revertToState(snap);
        vm.roll(target - target % SELECTION_EPOCH_BLOCKS + SELECTION_EPOCH_BLOCKS - 1); // the epoch's last block
        vm.warp(block.timestamp + 90);
        vm.prevrandao(keccak256("chosen by the caller"));
        vmx.setBlockhash(target + 1, keccak256("another parent"));
        vmx.setBlockhash(block.number - 1, keccak256("another parent 2"));
        vm.prank(address(0xCA11E4));
        jobs.assign(1);
        assertEq(_replica(1, 0).node, a0, "slot 0 depends on the assigning block");
        assertEq(_replica(1, 1).node, a1, "slot 1 depends on the assigning block");
        assertTrue(a0 != address(0) && a1 != address(0) && a0 != a1, "two distinct nodes");
    }

    /// @notice The attack of issue 8: the party whose finalize completes a round simulated the next block and waited
    ///         for a prevrandao that drew its own identities into both AGGREGATE slots. Now the finalize only
    ///         requests: under any prevrandao and timestamp the AGGREGATE gets the nodes that the target block's
    ///         hash (unknown when finalizing) decides.
    function test_finalize_p4LastFinalizerCannotChooseAggregateSlots_succeeds() public {
        uint256 jobId = _post(_params(1, 1, 2));
        bytes32[] memory h = _honest(INPUT, 4);
        _runReplicated(1, h, h);
        Task memory t = views.getTask(1);
        vm.warp(uint256(t.challengeDeadline) + views.getJob(jobId).revealWindow + 1);
        uint256 snap = vmx.snapshotState();
        address[2] memory first = _finalizeAndDrawAggregate(jobId, keccak256("randao A"));
        vmx.revertToState(snap);
        vm.warp(block.timestamp + 7);
        address[2] memory second = _finalizeAndDrawAggregate(jobId, keccak256("randao B, ground by the finalizer"));
        assertEq(first[0], second[0], "slot 0 followed the finalizer's prevrandao");
        assertEq(first[1], second[1], "slot 1 followed the finalizer's prevrandao");
    }

    function _finalizeAndDrawAggregate(uint256 jobId, bytes32 randao) internal returns (address[2] memory drawn) {
        vm.prevrandao(randao);
        jobs.finalize(1);
        uint256 agg = views.taskOf(jobId, 0, 1);
        assertEq(uint8(_status(agg)), uint8(TaskStatus.Open), "aggregate drawn inside the finalize");
        uint256 target = _target(agg);
        vm.roll(target + 1);
        vmx.setBlockhash(target, keccak256("the target block's hash"));
        jobs.assign(agg);
        drawn = [_replica(agg, 0).node, _replica(agg, 1).node];
    }

    function test_assign_staleRequest_renews_succeeds() public {
        _postOnly(_params(1, 1, 2));
        uint256 target = _target(1);
        vm.roll(target + 257);
        jobs.assign(1);
        assertEq(uint8(_status(1)), uint8(TaskStatus.Open), "drawn from a stale request");
        assertEq(_target(1), block.number + 2, "not renewed");
        _draw(1);
        assertEq(uint8(_status(1)), uint8(TaskStatus.Assigned), "not drawn after renewal");
    }

    /// @notice A slot nobody is eligible for gets a fresh request; the filled slot keeps its node.
    function test_assign_partialFill_requestsAgain_succeeds() public {
        PostJobParams memory p = _params(1, 1, 2);
        p.minMemoryMb = 64_000;
        _postOnly(p);
        _bigNode(0xB16); // in the next epoch: the draw's request is renewed
        _rollToDraw(1);
        vm.expectEmit(true, false, false, true, address(jobs));
        emit IJobRegistry.DrawRequested(1, 2);
        jobs.assign(1);
        assertEq(uint8(_status(1)), uint8(TaskStatus.Open), "one slot still empty");
        assertEq(views.getTask(1).drawRequest, 2, "fresh request for the empty slot");
        address only = _replica(1, 0).node == address(0) ? _replica(1, 1).node : _replica(1, 0).node;
        assertEq(only, address(0xB16), "the eligible node drawn");
        _bigNode(0xB17);
        _draw(1);
        assertEq(uint8(_status(1)), uint8(TaskStatus.Assigned), "second slot drawn");
    }

    /// @notice Issue 23 (high), written against v2 first: with the value known, a party with sybil solvers nudged
    ///         one sybil's weight (requestUnstake of a few gwei), simulated `assign`, and repeated until its sybils
    ///         held both slots (on v2 this setup found such a nudge: 3 of 11 stakes took both slots). Now `assign`
    ///         reads the weights as the epoch began: no nudge of any kind (unstake, stake, heartbeat, a new
    ///         declaration, a fresh heavy sybil registered) moves either slot.
    function test_assign_weightNudgeAfterValue_cannotRegrindSlots_succeeds() public {
        address[3] memory sybils = [_newNode(100, ALL_ROLES, NODE_STAKE), _newNode(101, ALL_ROLES, NODE_STAKE),
            _newNode(102, ALL_ROLES, NODE_STAKE)]; // 3 of 11 solver stakes
        _postOnly(_params(1, 1, 2));
        vm.roll(_target(1) + 1);
        (address a0, address a1) = _slotsAfter(sybils, 0, 0);
        uint256 moved;
        for (uint256 nudge = 1; nudge <= 64; ++nudge) {
            for (uint256 kind = 0; kind < 5; ++kind) {
                (address b0, address b1) = _slotsAfter(sybils, nudge, kind);
                if (b0 != a0 || b1 != a1) ++moved;
            }
        }
        assertEq(moved, 0, "nudges after the value moved a slot (of 320 tried)");
    }

    /// @dev The slots `assign` fills after sybil 0 changes its weight by `nudge` units in one of five ways.
    function _slotsAfter(address[3] memory sybils, uint256 nudge, uint256 kind) internal returns (address, address) {
        uint256 snap = vmx.snapshotState();
        if (nudge > 0) {
            uint256 amount = nudge * 10 * registry.WEIGHT_UNIT(); // on probation weight = stake / 10
            vm.startPrank(sybils[0]);
            if (kind == 0) registry.requestUnstake(amount);
            if (kind == 1) registry.stake(amount);
            if (kind == 2) registry.heartbeat();
            if (kind == 3) registry.updateNode(ALL_ROLES, 0, uint32(16_000 + nudge * 1_000), 100, 3, MULTIADDR);
            vm.stopPrank();
            if (kind == 4) _heavySybil(nudge);
        }
        jobs.assign(1);
        (address b0, address b1) = (_replica(1, 0).node, _replica(1, 1).node);
        vmx.revertToState(snap);
        return (b0, b1);
    }

    /// @dev A fresh identity staking 100 honest stakes, registered after the value is known (no epoch roll).
    function _heavySybil(uint256 i) internal {
        address node = address(uint160(0x5EB000 + i));
        token.mint(node, 100 * NODE_STAKE);
        vm.startPrank(node);
        token.approve(address(registry), type(uint256).max);
        registry.register(ALL_ROLES, 0, 16_000, 100, 3, MULTIADDR);
        registry.stake(100 * NODE_STAKE - registry.MIN_REGISTRATION_STAKE());
        registry.heartbeat(); // registering is not a check-in: drawn only after one
        vm.stopPrank();
    }
}
