// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Fixture} from "./base/Fixture.sol";
import {IJobRegistry} from "../../contracts/interfaces/IJobRegistry.sol";
import {TaskStatus, ReplicaStatus, PostJobParams} from "../../contracts/types/VerityTypes.sol";
import {PartnerNotStarved, NotReplica, RevealRunning} from "../../contracts/errors/JobRegistryErrors.sol";

/// @notice Issue 9 (stuck locks): a replica that committed to a replicated task whose other slot nobody eligible
///         can fill had no deadline and stayed locked (3,000 VRT after 30 days) unless the poster cancelled. Now it
///         can leave by itself once the empty slot has waited out the assignment timeout: unslashed, and the slot
///         is drawn again.
contract StuckLocksTest is Fixture {
    address internal only;

    function setUp() public override {
        super.setUp();
        _addNodes(4); // 16 GB each
        PostJobParams memory p = _params(1, 1, 2);
        p.minMemoryMb = 64_000; // only one node can serve it
        _postOnly(p);
        _bigNode(0xB16);
        _draw(1);
        only = _replica(1, 0).node == address(0) ? _replica(1, 1).node : _replica(1, 0).node;
        assertEq(only, address(0xB16), "the one eligible node drawn");
        _commit(1, only, _honest(INPUT, 4));
    }

    function _slot() internal view returns (uint8) {
        return _replica(1, 0).node == only ? 0 : 1;
    }

    /// @dev The attack shape: nobody will ever fill the partner slot. Before the fix the commit held its stake for
    ///      good; now, once the slot has been empty for the assignment timeout, it leaves unslashed.
    function test_committedReplica_partnerNeverDrawn_withdrawsUnslashed_succeeds() public {
        uint256 freeBefore = registry.freeStake(only);
        assertEq(uint8(_status(1)), uint8(TaskStatus.Open), "partner slot still empty");
        assertEq(_replica(1, _slot()).deadline, 0, "a committed replica waiting for its partner has no deadline");
        vm.warp(block.timestamp + jobs.assignmentTimeout() + 1);
        uint8 slot = _slot();
        vm.expectEmit(true, true, false, true, address(jobs));
        emit IJobRegistry.ReplicaWithdrawn(1, only, slot);
        vm.prank(only);
        jobs.withdrawCommitted(1);
        assertEq(registry.freeStake(only), freeBefore + views.getJob(1).stakePerReplica, "stake released in full");
        assertEq(lens.reputationOf(only).totalSlashed, 0, "not slashed");
        assertEq(lens.reputationOf(only).tasksLate, 0, "not counted late");
        assertEq(uint8(_replica(1, slot).status), uint8(ReplicaStatus.None), "slot cleared: drawn again like any slot");
        assertEq(_replica(1, slot).node, address(0), "its node may be drawn again");
        assertEq(uint8(_status(1)), uint8(TaskStatus.Open), "the task keeps drawing");
    }

    function test_withdrawCommitted_beforeTimeout_reverts() public {
        uint256 after_ = uint256(views.getTask(1).openSince) + jobs.assignmentTimeout();
        vm.warp(after_);
        vm.expectRevert(abi.encodeWithSelector(PartnerNotStarved.selector, 1, TaskStatus.Open, after_));
        vm.prank(only);
        jobs.withdrawCommitted(1);
    }

    function test_withdrawCommitted_byStranger_reverts() public {
        vm.warp(block.timestamp + jobs.assignmentTimeout() + 1);
        vm.expectRevert(abi.encodeWithSelector(NotReplica.selector, 1, address(0xBAD), ReplicaStatus.Committed));
        vm.prank(address(0xBAD));
        jobs.withdrawCommitted(1);
    }

    /// @dev Once the partner is drawn the reveal runs on its clock: the committed replica cannot walk away from it.
    function test_withdrawCommitted_onceAssigned_reverts() public {
        _bigNode(0xB17);
        _draw(1);
        assertEq(uint8(_status(1)), uint8(TaskStatus.Assigned), "partner drawn");
        vm.warp(block.timestamp + jobs.assignmentTimeout() + 1);
        uint256 since = views.getTask(1).filledAt; // the set-up's draw filled one slot and left the other empty
        vm.expectRevert(abi.encodeWithSelector(PartnerNotStarved.selector, 1, TaskStatus.Assigned, since + jobs.assignmentTimeout()));
        vm.prank(only);
        jobs.withdrawCommitted(1);
    }

    /// @dev Found by a clean-clone CI run (test_killed_solver_is_reported_late_and_its_task_reassigned, 1 in 5 runs):
    ///      a replica left its starved task a second before the draw that filled the other slot landed; the
    ///      withdrawer stayed excluded from the task as that slot's old holder, so with 3 nodes (one dead) the task
    ///      could never fill again and the job hung until the poster cancelled. A withdrawn slot is now cleared,
    ///      as a slot drawn again is: its node is drawn like any other. Before: the task stayed Open, half filled.
    function test_withdrawnReplica_isDrawnAgain_andTheTaskFills_succeeds() public {
        _bigNode(0xB17);
        uint256 jobId = _postOnly(_bigOnlyParams());
        uint256 taskId = views.taskOf(jobId, 0, 0);
        _draw(taskId); // the two big nodes: one per slot
        (address dead, address waiting) = (_replica(taskId, 0).node, _replica(taskId, 1).node);
        _commit(taskId, waiting, _honest(INPUT, 4));
        vm.warp(uint256(_replica(taskId, 0).deadline) + 1);
        jobs.reportLate(taskId, 0); // the killed node: banned, its slot drawn again
        vm.warp(block.timestamp + jobs.assignmentTimeout() + 1); // the draw is slow: the waiting replica leaves
        vm.prank(waiting);
        jobs.withdrawCommitted(taskId);
        address fresh = _bigNode(0xB18);
        _draw(taskId);
        assertEq(uint8(_status(taskId)), uint8(TaskStatus.Assigned), "both slots filled: the withdrawer drawn again");
        assertEq(_replica(taskId, 0).node, fresh, "the new node in the dead one's slot");
        assertEq(_replica(taskId, 1).node, waiting, "the withdrawer back in its slot");
        assertTrue(dead != waiting, "two nodes");
    }

    /// @dev The other half of the same race: a node drawn into one slot of a task whose other slot has been empty
    ///      for long could withdraw at once (the task's openSince was the old one), before the draw for the other
    ///      slot could land. A draw that leaves a slot empty now starts the new holder's own wait (filledAt). Before:
    ///      the withdrawal passed.
    function test_withdrawCommitted_freshHolderOfAHalfFilledTask_reverts() public {
        uint256 jobId = _postOnly(_bigOnlyParams());
        uint256 taskId = views.taskOf(jobId, 0, 0);
        vm.warp(block.timestamp + jobs.assignmentTimeout() + 1); // the task has waited long with both slots empty
        _draw(taskId); // one eligible node: one slot filled
        assertEq(uint8(_status(taskId)), uint8(TaskStatus.Open), "half filled");
        _commit(taskId, only, _honest(INPUT, 4));
        uint256 until = block.timestamp + jobs.assignmentTimeout();
        assertEq(uint256(views.getTask(taskId).filledAt) + jobs.assignmentTimeout(), until, "its own wait started");
        vm.expectRevert(abi.encodeWithSelector(PartnerNotStarved.selector, taskId, TaskStatus.Open, until));
        vm.prank(only);
        jobs.withdrawCommitted(taskId);
    }

    function _bigOnlyParams() internal pure returns (PostJobParams memory p) {
        p = _params(1, 1, 2);
        p.minMemoryMb = 64_000;
    }

    /// @dev Review of the fix above: had a partial fill restarted the task's openSince, the one eligible node could
    ///      withdraw and be drawn again in a loop (the draw's value is public before `assign`), each time holding
    ///      off the poster's cancel for another assignment timeout. The fresh holder's wait is its own (filledAt);
    ///      the cancel still counts from when the slot first emptied.
    function test_cancelJob_withdrawerDrawnAgain_stillCancels_succeeds() public {
        vm.warp(block.timestamp + jobs.assignmentTimeout() + 1);
        vm.prank(only);
        jobs.withdrawCommitted(1);
        _draw(1); // the only eligible node, drawn again into one slot
        assertEq(_replica(1, 0).node, only, "drawn again");
        assertEq(uint8(_status(1)), uint8(TaskStatus.Open), "half filled");
        vm.prank(submitter);
        jobs.cancelJob(1); // v1 of the fix: CancelNotAllowed (openSince was reset by the partial fill)
        assertEq(registry.getNode(only).locked, 0, "its stake released");
    }

    /// @dev Review: both slots committed, the partner was reported late, and the task went back to Open: the slot
    ///      left has a reveal deadline, so its holder must reveal (or be reported late), not leave unslashed.
    function test_withdrawCommitted_revealDeadlineRunning_reverts() public {
        _bigNode(0xB17);
        uint256 jobId = _postOnly(_bigOnlyParams());
        uint256 taskId = views.taskOf(jobId, 0, 0);
        _draw(taskId);
        (address a, address b) = (_replica(taskId, 0).node, _replica(taskId, 1).node);
        _commit(taskId, a, _honest(INPUT, 4));
        _commit(taskId, b, _honest(INPUT, 4)); // both committed: reveal deadlines
        uint64 deadline = _replica(taskId, 0).deadline;
        assertTrue(deadline != 0, "a reveal deadline");
        vm.warp(uint256(_replica(taskId, 1).deadline) + 1);
        jobs.reportLate(taskId, 1); // b never reveals
        assertEq(uint8(_status(taskId)), uint8(TaskStatus.Open), "reopened");
        vm.warp(block.timestamp + jobs.assignmentTimeout() + 1);
        vm.expectRevert(abi.encodeWithSelector(RevealRunning.selector, taskId, 0, deadline));
        vm.prank(a);
        jobs.withdrawCommitted(taskId);
    }
}
