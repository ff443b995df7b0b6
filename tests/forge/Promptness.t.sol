// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Fixture} from "./base/Fixture.sol";
import {ROLE_SOLVER} from "../../contracts/types/VerityTypes.sol";
import {NotProtocol} from "../../contracts/errors/CommonErrors.sol";

/// @notice Issue 9, scheduling by measured performance: besides completed, late and lost work (the reputation
///         factor), a node's weight reflects how much of its execution windows it uses before committing. Each
///         accepted result moves an average by 1/PROMPTNESS_SMOOTHING by the share its commit used (recorded on
///         acceptance since issue 23: one registry call per replica); the factor runs from 100 % (commits at once)
///         to 50 % (commits at its deadlines).
contract PromptnessTest is Fixture {
    function setUp() public override {
        super.setUp();
        _addNodes(4);
    }

    /// @dev Both replicas of a replicated task commit: `fastSlot` at once, the other after `slowShare` of the window.
    function _commitPair(uint256 taskId, uint8 fastSlot, uint256 slowShareBps) internal {
        uint256 window = views.getJob(views.getTask(taskId).jobId).executionWindow;
        _commit(taskId, _replica(taskId, fastSlot).node, _honest(INPUT, 4));
        vm.warp(block.timestamp + (window * slowShareBps) / 10_000);
        _commit(taskId, _replica(taskId, 1 - fastSlot).node, _honest(INPUT, 4));
    }

    function test_commit_promptNodeOutweighsSlowNode_succeeds() public {
        uint256 taskId = views.taskOf(_post(_params(1, 1, 2)), 0, 0);
        address fast = _replica(taskId, 0).node;
        address slow = _replica(taskId, 1).node;
        assertEq(lens.promptnessFactorBps(fast), 10_000, "no commit yet: full factor");
        _commitPair(taskId, 0, 10_000); // the slow replica commits at its deadline
        assertEq(lens.promptnessFactorBps(slow), 10_000, "recorded on acceptance, not at the commit");
        _reveal(taskId, fast, _honest(INPUT, 4)); // reveals the slow replica's equal commitment too
        _finalizeAfterWindow(taskId);
        assertEq(lens.promptnessFactorBps(fast), 10_000, "committed at once");
        assertEq(lens.promptnessFactorBps(slow), 10_000 - 10_000 / 8 / 2, "one sample: 1/8 of the way to 50 %");
        _heartbeatAll();
        (uint256 wFast,) = lens.weightsOf(fast);
        (uint256 wSlow,) = lens.weightsOf(slow);
        assertEq(wSlow * 10_000, wFast * lens.promptnessFactorBps(slow), "same stake and reputation: weight ratio");
    }

    /// @dev The average converges to the share used and never leaves 0..10 000: always at the deadline -> 50 %.
    function testFuzz_promptness_staysInRangeAndConverges_succeeds(uint256 used) public {
        address proto = address(0x9807);
        registry.setProtocol(proto, true);
        address node = nodes[0];
        vm.startPrank(proto);
        used = used % 10_001; // TaskMachine._checkOnTime's share is within 0..BPS
        for (uint256 i = 0; i < 80; ++i) {
            registry.unlockCompleted(node, 0, false, used);
        }
        vm.stopPrank();
        uint256 share = used;
        uint256 f = lens.promptnessFactorBps(node);
        assertLe(5_000, f, "floor");
        assertLe(f, 10_000, "ceiling");
        uint256 want = 10_000 - share / 2;
        assertLe(f > want ? f - want : want - f, 8, "converged to the share used");
    }

    /// @dev A candidate's acceptance (no window of its own) passes more than BPS: the average does not move.
    function test_unlockCompleted_noPromptness_leavesTheAverage_succeeds() public {
        address proto = address(0x9807);
        registry.setProtocol(proto, true);
        vm.startPrank(proto);
        registry.unlockCompleted(nodes[0], 0, false, 10_000);
        uint256 f = lens.promptnessFactorBps(nodes[0]);
        registry.unlockCompleted(nodes[0], 0, false, type(uint256).max);
        vm.stopPrank();
        assertEq(lens.promptnessFactorBps(nodes[0]), f, "unchanged");
    }

    function test_unlockCompleted_notProtocol_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(NotProtocol.selector, address(this)));
        registry.unlockCompleted(nodes[0], 0, false, 0);
    }
}
