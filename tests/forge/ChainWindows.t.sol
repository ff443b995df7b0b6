// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Fixture, VmState} from "./base/Fixture.sol";
import {PostJobParams} from "../../contracts/types/VerityTypes.sol";
import {ParameterOutOfRange} from "../../contracts/errors/CommonErrors.sol";
import {InvalidJobParameter, DeclineTooLate} from "../../contracts/errors/JobRegistryErrors.sol";

/// @notice Issue 23, "windows that fit the chain": the minimum windows and the decline grace are blocks of the
///         chain's block time as well as seconds. Written against v2 first: on a chain with 12-second blocks a
///         30-second window's decline grace was 7.5 s, shorter than one block, so no decline could land (0 of 16 in
///         the trial) and honest nodes were slashed for work they could not refuse.
contract ChainWindowsTest is Fixture {
    VmState internal constant vmx = VmState(address(uint160(uint256(keccak256("hevm cheat code")))));

    function setUp() public override {
        super.setUp();
        _addNodes(4);
    }

    /// @dev A 12-second chain: defaults that fit it, then its block time.
    function _twelveSecondChain() internal {
        jobs.setDefaultWindows(16 * 12, 4 * 12, 3 * 12);
        jobs.setBlockSeconds(12);
    }

    function test_minWindows_followBlockSeconds_succeeds() public {
        _assertMins(30, 5, 3, "1-second blocks: the seconds floors");
        jobs.setDefaultWindows(120, 60, 30);
        jobs.setBlockSeconds(2);
        _assertMins(32, 8, 6, "a 2-second L2: 16, 4 and 3 blocks");
        jobs.setDefaultWindows(192, 48, 36);
        jobs.setBlockSeconds(12);
        _assertMins(192, 48, 36, "a 12-second chain");
    }

    function _assertMins(uint256 e, uint256 r, uint256 c, string memory what) internal {
        // What the registry enforces: a window one second shorter reverts, the minimum itself is a valid default.
        jobs.setDefaultWindows(uint64(e), uint64(r), uint64(c));
        vm.expectRevert(abi.encodeWithSelector(ParameterOutOfRange.selector, bytes32("executionWindow"), e - 1, e, 7 days));
        jobs.setDefaultWindows(uint64(e - 1), uint64(r), uint64(c));
        vm.expectRevert(abi.encodeWithSelector(ParameterOutOfRange.selector, bytes32("revealWindow"), r - 1, r, 7 days));
        jobs.setDefaultWindows(uint64(e), uint64(r - 1), uint64(c));
        vm.expectRevert(abi.encodeWithSelector(ParameterOutOfRange.selector, bytes32("challengeWindow"), c - 1, c, 7 days));
        jobs.setDefaultWindows(uint64(e), uint64(r), uint64(c - 1));
        what;
    }

    /// @notice The clock allowance has a floor in blocks too: on main 30 s passed on a 12-s chain, 2.5 blocks for
    ///         all of a party's moves (open or answer, step root, leaf or pinpoint), so a party could time out for
    ///         want of blocks. Now at least MIN_CLOCK_BLOCKS (5) blocks of the chain's block time.
    function test_setClockAllowance_belowFiveBlocks_reverts() public {
        _twelveSecondChain();
        vm.expectRevert(abi.encodeWithSelector(ParameterOutOfRange.selector, bytes32("clockAllowance"), 30, 60, 7 days));
        game.setClockAllowance(30);
        game.setClockAllowance(60); // 5 blocks of 12 s
        assertEq(game.clockAllowance(), 60, "5 blocks");
    }

    function test_setBlockSeconds_outOfRange_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(ParameterOutOfRange.selector, bytes32("blockSeconds"), 0, 1, 60));
        jobs.setBlockSeconds(0);
        vm.expectRevert(abi.encodeWithSelector(ParameterOutOfRange.selector, bytes32("blockSeconds"), 61, 1, 60));
        jobs.setBlockSeconds(61);
    }

    /// @notice The registry's defaults (120 s execution) do not fit 12-second blocks (192 s): the block time is
    ///         refused until the defaults are raised, so no default ever sits below a minimum.
    function test_setBlockSeconds_defaultsTooShort_reverts() public {
        vm.expectRevert(
            abi.encodeWithSelector(ParameterOutOfRange.selector, bytes32("executionWindow"), 120, 192, 7 days)
        );
        jobs.setBlockSeconds(12);
    }

    /// @notice The v2 attack's job, a 30-second window on a 12-second chain, cannot be posted; nor a 1-second
    ///         challenge window on any chain (v2 accepted it: results final before a challenge could land).
    function test_postJob_windowsBelowTheChainsMinimum_reverts() public {
        PostJobParams memory p = _params(1, 1, 2);
        p.challengeWindow = 1;
        vm.prank(submitter);
        vm.expectRevert(abi.encodeWithSelector(InvalidJobParameter.selector, bytes32("challengeWindow"), 1));
        jobs.postJob(p);
        _twelveSecondChain();
        p = _params(1, 1, 2);
        p.executionWindow = 30;
        vm.prank(submitter);
        vm.expectRevert(abi.encodeWithSelector(InvalidJobParameter.selector, bytes32("executionWindow"), 30));
        jobs.postJob(p);
        p.executionWindow = 191;
        vm.prank(submitter);
        vm.expectRevert(abi.encodeWithSelector(InvalidJobParameter.selector, bytes32("executionWindow"), 191));
        jobs.postJob(p);
    }

    /// @notice On a 12-second chain a drawn node can decline in each of the four blocks after its assignment
    ///         (grace 48 s = 4 blocks = 25 % of the 192-s minimum window), and not after.
    function test_decline_twelveSecondBlocks_landsInEachGraceBlock_succeeds() public {
        _twelveSecondChain();
        uint256 taskId = views.taskOf(_post(_params(1, 1, 2)), 0, 0);
        address node = _replica(taskId, 0).node;
        uint256 assignedAt = block.timestamp;
        uint256 landed;
        for (uint256 k = 1; k <= 4; ++k) {
            uint256 snap = vmx.snapshotState();
            vm.roll(block.number + k);
            vm.warp(assignedAt + 12 * k);
            vm.prank(node);
            jobs.decline(taskId, false, bytes32(0));
            ++landed;
            vmx.revertToState(snap);
        }
        assertEq(landed, 4, "declines landed in the 4 blocks after assignment (v2: 0 of them)");
        vm.roll(block.number + 5);
        vm.warp(assignedAt + 12 * 5);
        vm.prank(node);
        vm.expectRevert(abi.encodeWithSelector(DeclineTooLate.selector, taskId, 0, assignedAt + 48));
        jobs.decline(taskId, false, bytes32(0));
    }
}
