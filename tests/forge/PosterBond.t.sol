// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Fixture} from "./base/Fixture.sol";
import {IJobRegistry} from "../../contracts/interfaces/IJobRegistry.sol";
import {JobStatus, TaskStatus, ReplicaStatus} from "../../contracts/types/VerityTypes.sol";

/// @notice Issue 9 (poisoned jobs cycle for ever): a job whose inputs no node can use was refused by every honest
///         node, and it stayed active, redrawn for ever, its poster risking nothing. Now every poster deposits
///         POSTER_BOND with the escrow; when FAIL_DECLINES distinct drawn nodes decline one task for invalid inputs
///         and no drawn node still holds a slot of it (issue 23), the job is Failed: the decliners share the bond,
///         the rest of the escrow goes back to the poster. Each such refusal bets its share from its own stake,
///         burned if the task is completed from the inputs it refused. Declines for capacity never fail a job.
contract PosterBondTest is Fixture {
    function setUp() public override {
        super.setUp();
        _addNodes(10);
    }

    /// @dev The drawn replica in `slot` declines task 1; the slot is drawn again when the job is still active.
    function _declineSlot(uint256 taskId, uint8 slot, bool invalid) internal returns (address node) {
        node = _replica(taskId, slot).node;
        vm.prank(node);
        jobs.decline(taskId, invalid, bytes32(0));
        if (views.getJob(1).status == JobStatus.Active) _draw(taskId);
    }

    function test_escrowFor_includesPosterBond_succeeds() public view {
        assertEq(views.escrowFor(5, 2, 3, 4), 5 * 2 * 4 * 4 + jobs.POSTER_BOND(), "payments + bond");
    }

    function test_decline_invalidInputsByThreeNodes_failsJobAndPaysBond_succeeds() public {
        uint256 held = _tokensHeld();
        uint256 posterBefore = token.balanceOf(submitter);
        _post(_params(1, 1, 2));
        uint256 escrowed = escrow.escrowOf(1);
        address a = _declineSlot(1, 0, true);
        address b = _declineSlot(1, 1, true);
        assertEq(uint8(views.getJob(1).status), uint8(JobStatus.Active), "two refusals are not proof");
        address c = _replica(1, 0).node;
        vm.prank(c);
        jobs.decline(1, true, bytes32(0));
        // Issue 23: the node drawn into slot 1 may still find the inputs usable.
        assertEq(uint8(views.getJob(1).status), uint8(JobStatus.Active), "a drawn node still holds a slot");
        address d = _replica(1, 1).node;
        uint256 bond = jobs.POSTER_BOND();
        uint256 share = bond / jobs.FAIL_DECLINES();
        _recordBalances();
        vm.expectEmit(true, true, false, true, address(jobs));
        emit IJobRegistry.JobFailed(1, 1, escrowed - 3 * share);
        vm.prank(d);
        jobs.decline(1, true, bytes32(0));
        assertEq(uint8(views.getJob(1).status), uint8(JobStatus.Failed), "failed: every drawn node refused");
        assertEq(uint8(_status(1)), uint8(TaskStatus.Cancelled), "its tasks ended");
        assertEq(_paidSince(a), share, "decliner a paid");
        assertEq(_paidSince(b), share, "decliner b paid");
        assertEq(_paidSince(c), share, "decliner c paid");
        assertEq(_paidSince(d), 0, "only the first FAIL_DECLINES refusals share the bond");
        assertEq(escrow.escrowOf(1), 0, "nothing left in escrow");
        assertEq(token.balanceOf(submitter), posterBefore - 3 * share, "poster refunded all but the bond shares");
        address[4] memory all = [a, b, c, d];
        for (uint256 i = 0; i < 4; ++i) {
            assertEq(registry.freeStake(all[i]), registry.getNode(all[i]).stake, "every refusal's bet released");
        }
        assertEq(_tokensHeld(), held, "tokens conserved");
    }

    /// @notice Issue 23: a refusal for invalid inputs bets its share of the poster bond from its own stake. When the
    ///         task is then completed from the very inputs it refused, the bet is burned; a capacity refusal bets
    ///         nothing.
    function test_decline_invalidThenTaskCompleted_burnsTheBet_succeeds() public {
        uint256 held = _tokensHeld();
        _post(_params(1, 1, 2));
        uint256 bet = jobs.POSTER_BOND() / jobs.FAIL_DECLINES();
        uint256 stake = registry.getNode(_replica(1, 0).node).stake;
        address liar = _declineSlot(1, 0, true);
        assertEq(registry.freeStake(liar), stake - bet, "the bet stays locked");
        address busy = _declineSlot(1, 1, false);
        assertEq(registry.freeStake(busy), stake, "a capacity refusal bets nothing");
        bytes32[] memory h = _honest(INPUT, 4);
        _runReplicated(1, h, h);
        _finalizeAfterWindow(1);
        assertEq(uint8(_status(1)), uint8(TaskStatus.Accepted), "completed from the refused inputs");
        assertEq(registry.getNode(liar).stake, stake - bet, "the bet is burned");
        assertEq(registry.freeStake(liar), stake - bet, "and nothing else stays locked");
        assertEq(registry.getNode(busy).stake, stake, "the capacity refusal lost nothing");
        assertEq(_tokensHeld(), held, "tokens conserved");
    }

    /// @notice A job cancelled (or failed on another task) before the refused task is completed releases the bet.
    function test_decline_invalidThenJobCancelled_releasesTheBet_succeeds() public {
        _post(_params(1, 1, 2));
        uint256 stake = registry.getNode(_replica(1, 0).node).stake;
        address refuser = _replica(1, 0).node;
        vm.prank(refuser);
        jobs.decline(1, true, bytes32(0));
        vm.warp(block.timestamp + jobs.assignmentTimeout() + 1); // slot 0 empty past the timeout: starved
        vm.prank(submitter);
        jobs.cancelJob(1);
        assertEq(registry.freeStake(refuser), stake, "the bet is released");
        assertEq(registry.getNode(refuser).stake, stake, "nothing burned");
    }

    /// @dev A replica that committed shows the inputs were usable: refusals by the other slot cannot fail the job.
    function test_decline_invalidAfterPartnerCommitted_doesNotFail_succeeds() public {
        _post(_params(1, 1, 2));
        _commit(1, _replica(1, 0).node, _honest(INPUT, 4));
        for (uint256 i = 0; i < 3; ++i) {
            _declineSlot(1, 1, true);
        }
        assertEq(uint8(views.getJob(1).status), uint8(JobStatus.Active), "still active");
        assertEq(uint8(_replica(1, 0).status), uint8(ReplicaStatus.Committed), "the committed replica keeps its slot");
    }

    /// @dev Capacity refusals (the node cannot do the work) say nothing about the poster's inputs.
    function test_decline_capacityOnly_neverFailsJob_succeeds() public {
        _post(_params(1, 1, 2));
        for (uint256 i = 0; i < 4; ++i) {
            _declineSlot(1, uint8(i % 2), false);
        }
        assertEq(uint8(views.getJob(1).status), uint8(JobStatus.Active), "still active");
    }

    /// @dev A node declining twice would be one refusal counted twice; it is banned from the task after its first
    ///      decline, so it is never drawn to decline again.
    function test_decline_sameNodeTwice_impossible_succeeds() public {
        _post(_params(1, 1, 2));
        address a = _declineSlot(1, 0, true);
        assertTrue(views.isBanned(1, a), "banned");
        assertTrue(_replica(1, 0).node != a && _replica(1, 1).node != a, "redrawn elsewhere");
    }

    /// @dev A completed job returns the bond with the unspent escrow.
    function test_reclaim_afterCompletion_returnsBond_succeeds() public {
        _post(_params(1, 1, 2));
        _runRoundHonest(1, 0);
        assertEq(uint8(views.getJob(1).status), uint8(JobStatus.Completed), "completed");
        uint256 before = token.balanceOf(submitter);
        vm.prank(submitter);
        jobs.reclaimEscrow(1);
        assertEq(token.balanceOf(submitter), before + jobs.POSTER_BOND(), "bond returned");
    }

    /// @dev Found by the invariant handler: the poster's own node commits garbage, so the third invalid decline
    ///      cannot fail the job; before the fix the list was full and no later decline counted, so once that node
    ///      left (withdrawCommitted) the job could never fail and the poster cancelled with its bond.
    function test_decline_afterCommittedPartnerLeaves_stillFailsJob_succeeds() public {
        _addNodes(8);
        _post(_params(1, 1, 2));
        uint256 taskId = 1;
        address sybil = _replica(taskId, 0).node; // the poster's own node: commits garbage, never reveals
        vm.prank(sybil);
        jobs.commit(taskId, keccak256("garbage"));
        // Three honest nodes drawn into slot 1 decline for invalid inputs: the job does not fail (a replica committed).
        for (uint256 i = 0; i < 3; ++i) {
            vm.prank(_replica(taskId, 1).node);
            jobs.decline(taskId, true, bytes32(0));
            _draw(taskId);
        }
        assertEq(uint8(views.getJob(1).status), uint8(JobStatus.Active), "committed partner: no failure (by design)");
        // The slot-1 holder declines too; the task starves (no one else is drawn quickly enough) and the sybil leaves.
        vm.prank(_replica(taskId, 1).node);
        jobs.decline(taskId, true, bytes32(0));
        vm.warp(block.timestamp + jobs.assignmentTimeout() + 1);
        vm.prank(sybil);
        jobs.withdrawCommitted(taskId);
        _heartbeatAll();
        // Now no replica committed and 4 distinct nodes declined for invalid inputs: two more honest refusals.
        _draw(taskId);
        uint256 declines;
        for (uint8 s = 0; s < 2; ++s) {
            if (_replica(taskId, s).status != ReplicaStatus.Assigned) continue;
            vm.prank(_replica(taskId, s).node);
            jobs.decline(taskId, true, bytes32(0));
            ++declines;
            if (views.getJob(1).status != JobStatus.Active) break;
        }
        // FAIL_DECLINES distinct invalid declines are on record and nobody holds a commit now: the refusal that leaves
        // no drawn node in the task fails the job (before the fix it never could).
        assertEq(declines, 2, "the second fresh refusal, leaving no drawn node, fails the job");
        assertEq(uint8(views.getJob(1).status), uint8(JobStatus.Failed), "poisoned job never fails after the dodge");
    }
}
