// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Fixture} from "./base/Fixture.sol";
import {ROLE_SOLVER} from "../../contracts/types/VerityTypes.sol";
import {NotProtocol} from "../../contracts/errors/CommonErrors.sol";

/// @notice Issue 9, scheduling by measured performance: besides completed, late and lost work (the reputation
///         factor), a node's weight reflects how much of its execution windows it uses before committing. Each
///         commit moves an average by 1/PROMPTNESS_SMOOTHING; the factor runs from 100 % (commits at once) to 50 %
///         (commits at its deadlines).
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
        assertEq(lens.promptnessFactorBps(fast), 10_000, "committed at once");
        assertEq(lens.promptnessFactorBps(slow), 10_000 - 10_000 / 8 / 2, "one sample: 1/8 of the way to 50 %");
        _heartbeatAll();
        (uint256 wFast,) = lens.weightsOf(fast);
        (uint256 wSlow,) = lens.weightsOf(slow);
        assertEq(wSlow * 10_000, wFast * lens.promptnessFactorBps(slow), "same stake and reputation: weight ratio");
    }

    /// @dev The average converges to the share used and never leaves 0..10 000: always at the deadline -> 50 %.
    function testFuzz_recordPromptness_staysInRangeAndConverges_succeeds(uint256 used) public {
        address proto = address(0x9807);
        registry.setProtocol(proto, true);
        address node = nodes[0];
        vm.startPrank(proto);
        for (uint256 i = 0; i < 80; ++i) {
            registry.recordPromptness(node, used); // above 10 000 counts as the whole window
        }
        vm.stopPrank();
        uint256 share = used > 10_000 ? 10_000 : used;
        uint256 f = lens.promptnessFactorBps(node);
        assertLe(5_000, f, "floor");
        assertLe(f, 10_000, "ceiling");
        uint256 want = 10_000 - share / 2;
        assertLe(f > want ? f - want : want - f, 8, "converged to the share used");
    }

    function test_recordPromptness_notProtocol_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(NotProtocol.selector, address(this)));
        registry.recordPromptness(nodes[0], 0);
    }
}
