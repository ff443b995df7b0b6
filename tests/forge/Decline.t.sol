// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Fixture} from "./base/Fixture.sol";
import {IJobRegistry} from "../../contracts/interfaces/IJobRegistry.sol";
import {TaskStatus, ReplicaStatus} from "../../contracts/types/VerityTypes.sol";
import {DeclineTooLate, NotReplica} from "../../contracts/errors/JobRegistryErrors.sol";

/// @notice Issue 9 (a poster burns honest stake / poisoned jobs cycle for ever): a drawn node that found a job's
///         inputs invalid, or could not do the work in the window, had no way out but to be reported late and
///         slashed. Now it declines within the first quarter of its execution window: unslashed, never drawn for
///         that task again (so a poisoned task cannot come back to it), and the slot is drawn again.
contract DeclineTest is Fixture {
    function setUp() public override {
        super.setUp();
        _addNodes(8);
        _post(_params(1, 1, 2));
        assertEq(uint8(_status(1)), uint8(TaskStatus.Assigned), "drawn");
    }

    function _grace() internal view returns (uint256) {
        return (uint256(views.getJob(1).executionWindow) * jobs.DECLINE_GRACE_BPS()) / 10_000;
    }

    function test_decline_withinGrace_unslashedBannedAndRedrawn_succeeds() public {
        address node = _replica(1, 0).node;
        address partner = _replica(1, 1).node;
        uint256 freeBefore = registry.freeStake(node);
        uint256 stakeBefore = registry.getNode(node).stake;
        vm.warp(block.timestamp + _grace());
        vm.expectEmit(true, true, false, true, address(jobs));
        emit IJobRegistry.ReplicaDeclined(1, node, 0, "time 181/116 s");
        vm.prank(node);
        jobs.decline(1, false, "time 181/116 s"); // the node's note reaches the poster in the event (issue 24)
        assertEq(registry.freeStake(node), freeBefore + views.getJob(1).stakePerReplica, "stake released");
        assertEq(registry.getNode(node).stake, stakeBefore, "not slashed");
        assertEq(lens.reputationOf(node).tasksLate, 0, "not counted late");
        assertEq(uint8(_replica(1, 0).status), uint8(ReplicaStatus.Voided), "slot emptied");
        assertEq(uint8(_status(1)), uint8(TaskStatus.Open), "slot to be drawn again");
        assertEq(views.bannedOf(1)[0], node, "never drawn for this task again");
        _draw(1);
        assertEq(uint8(_status(1)), uint8(TaskStatus.Assigned), "redrawn");
        assertTrue(_replica(1, 0).node != node && _replica(1, 1).node != node, "the decliner came back");
        // A decliner cannot use its decline to re-roll its partner (e.g. to seat a second identity of its own
        // beside it): only the declined slot is drawn again.
        assertEq(_replica(1, 1).node, partner, "the partner's slot was redrawn");
    }

    /// @dev Review: the task's ban count (a uint8 in the task's word) saturates instead of reverting, so a 256th ban
    ///      (here: a decline with the count set to 255 in storage) still lands, and the decliner is still banned.
    function test_decline_banCountSaturated_stillBans_succeeds() public {
        address first = _replica(1, 0).node;
        vm.warp(block.timestamp + _grace());
        vm.prank(first);
        jobs.decline(1, false, "invalid");
        assertEq(views.getTask(1).bannedCount, 1, "one ban counted");
        // JobRegistry storage: _tasks at slot 8; the count is the byte at offset 30 of the task's second word
        bytes32 at = bytes32(uint256(keccak256(abi.encode(uint256(1), uint256(8)))) + 1);
        uint256 word = uint256(vm.load(address(jobs), at));
        assertEq((word >> 240) & 0xff, 1, "the layout this test writes");
        vm.store(address(jobs), at, bytes32(word | (uint256(0xff) << 240)));
        assertEq(views.getTask(1).bannedCount, 255, "count at its ceiling");
        _draw(1);
        address second = _replica(1, 0).node;
        assertTrue(second != first, "redrawn");
        vm.warp(block.timestamp + _grace());
        vm.prank(second);
        jobs.decline(1, false, "invalid"); // reverted with an arithmetic overflow before the count saturated
        assertEq(views.getTask(1).bannedCount, 255, "saturated");
        assertTrue(views.isBanned(1, second), "the 256th decliner is banned");
        assertEq(uint8(_status(1)), uint8(TaskStatus.Open), "its slot is drawn again");
    }

    /// @dev Past the grace the node accepted the window: declining is refused (the late rule applies).
    function test_decline_afterGrace_reverts() public {
        address node = _replica(1, 1).node;
        uint256 graceEnd = block.timestamp + _grace();
        vm.warp(graceEnd + 1);
        vm.expectRevert(abi.encodeWithSelector(DeclineTooLate.selector, 1, uint8(1), graceEnd));
        vm.prank(node);
        jobs.decline(1, false, bytes32(0));
    }

    /// @dev A committed replica made its choice: it cannot walk out of the reveal by declining.
    function test_decline_afterCommit_reverts() public {
        address node = _replica(1, 0).node;
        _commit(1, node, _honest(INPUT, 4));
        vm.expectRevert(abi.encodeWithSelector(NotReplica.selector, 1, node, ReplicaStatus.Assigned));
        vm.prank(node);
        jobs.decline(1, false, bytes32(0));
    }

    function test_decline_byStranger_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(NotReplica.selector, 1, address(0xBAD), ReplicaStatus.Assigned));
        vm.prank(address(0xBAD));
        jobs.decline(1, false, bytes32(0));
    }
}
