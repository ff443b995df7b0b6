// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Fixture} from "./base/Fixture.sol";
import {IJobRegistry} from "../../contracts/interfaces/IJobRegistry.sol";
import {TaskStatus, ReplicaStatus, PostJobParams} from "../../contracts/types/VerityTypes.sol";
import {PartnerNotStarved, NotReplica} from "../../contracts/errors/JobRegistryErrors.sol";

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
        assertEq(uint8(_replica(1, slot).status), uint8(ReplicaStatus.Voided), "slot emptied");
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
        vm.expectRevert(abi.encodeWithSelector(PartnerNotStarved.selector, 1, TaskStatus.Assigned, uint256(0) + jobs.assignmentTimeout()));
        vm.prank(only);
        jobs.withdrawCommitted(1);
    }
}
