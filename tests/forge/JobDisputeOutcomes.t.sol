// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Fixture} from "./base/Fixture.sol";
import {JobRegistryBase} from "../../contracts/JobRegistryBase.sol";
import {IJobRegistry} from "../../contracts/interfaces/IJobRegistry.sol";
import {Merkle} from "../../contracts/lib/Merkle.sol";
import {
    Job,
    JobStatus,
    Task,
    TaskKind,
    TaskStatus,
    Replica,
    ReplicaStatus,
    Claim,
    DisputeOutcome,
    PostJobParams
} from "../../contracts/types/VerityTypes.sol";
import "../../contracts/errors/JobRegistryErrors.sol";

/// @notice The registry's side of disputes, with the hooks called as the DisputeGame (the test also moves the
///         parties' stakes the way the game does): P1 open disputes and reveal grace, P2 agreement as a claim, P3
///         winners as candidates with epochs, stale epochs, reopening, cancellation with a candidate, and an attacker
///         fuzz over any order of outcomes. Tokens are conserved across the escrow throughout.
contract JobDisputeOutcomesTest is Fixture {
    function setUp() public override {
        super.setUp();
        _addNodes(5);
    }

    function _assertConserved() internal view {
        assertEq(_tokensHeld(), token.totalMinted(), "tokens conserved");
        assertEq(token.balanceOf(address(escrow)), escrow.totalEscrow(), "escrow solvent");
        assertEq(token.balanceOf(address(jobs)), 0, "the registry holds no tokens");
    }

    function _one(bytes32 x) internal pure returns (bytes32[] memory a) {
        a = new bytes32[](1);
        a[0] = x;
    }

    function _optimisticTask() internal returns (uint256 jobId, uint256 taskId, address solver) {
        jobId = _post(_params(1, 1, 1));
        taskId = views.taskOf(jobId, 0, 0);
        solver = _replica(taskId, 0).node;
        _submit(taskId, solver, _trace(INPUT, 4, "wrong", 3));
    }

    function _contestedTask() internal returns (uint256 taskId, address a, address b) {
        uint256 jobId = _post(_params(1, 1, 2));
        taskId = views.taskOf(jobId, 0, 0);
        a = _replica(taskId, 0).node;
        b = _replica(taskId, 1).node;
        _runReplicated(taskId, _honest(INPUT, 4), _trace(INPUT, 4, "bad", 3));
    }

    /// @dev A node none of a, b, c (and not banned for nothing: any registered node).
    function _outsider(address a, address b, address c) internal view returns (address) {
        for (uint256 i = 0; i < nodes.length; ++i) {
            if (nodes[i] != a && nodes[i] != b && nodes[i] != c) return nodes[i];
        }
        revert("no outsider");
    }

    /// @dev What the game does when a challenge opens: lock the challenger's task stake, then register it.
    function _openChallenge(uint256 taskId, address challenger) internal {
        vm.startPrank(address(game));
        registry.lock(challenger, TASK_STAKE);
        jobs.onChallenge(taskId, views.getTask(taskId).epoch, uint64(block.timestamp));
        vm.stopPrank();
    }

    /// @dev The game's stake moves for a settled dispute, then the registry hook.
    function _settle(uint256 taskId, DisputeOutcome o, address challenger, address[] memory slashed, bytes32[] memory h)
        internal
    {
        vm.startPrank(address(game));
        for (uint256 i = 0; i < slashed.length; ++i) {
            registry.slash(slashed[i], TASK_STAKE, address(game));
        }
        uint256 n = h.length - 1;
        jobs.onDisputeSettled(
            taskId,
            views.getTask(taskId).epoch,
            o,
            challenger,
            Merkle.rootOf(h),
            h[n],
            keccak256(abi.encode("cid", h[n]))
        );
        vm.stopPrank();
    }

    function _list(address a) internal pure returns (address[] memory l) {
        l = new address[](1);
        l[0] = a;
    }

    function _list(address a, address b) internal pure returns (address[] memory l) {
        l = new address[](2);
        (l[0], l[1]) = (a, b);
    }

    function _isBanned(uint256 taskId, address node) internal view returns (bool) {
        address[4] memory b = views.bannedOf(taskId);
        for (uint256 i = 0; i < 4; ++i) {
            if (b[i] == node) return true;
        }
        return false;
    }

    function test_finalize_p1OpenDisputePending_reverts() public {
        (, uint256 taskId, address solver) = _optimisticTask();
        _openChallenge(taskId, _outsider(solver, address(0), address(0)));
        Task memory t = views.getTask(taskId);
        vm.warp(uint256(t.challengeDeadline) + jobs.defaultRevealWindow() + 1);
        vm.expectRevert(abi.encodeWithSelector(DisputesPending.selector, taskId, uint32(1)));
        jobs.finalize(taskId);
    }

    function test_onChallenge_p1EveryChallengeCounts_succeeds() public {
        (uint256 jobId, uint256 taskId, address solver) = _optimisticTask();
        address c1 = _outsider(solver, address(0), address(0));
        address c2 = _outsider(solver, c1, address(0));
        _openChallenge(taskId, c1);
        vm.prank(address(game));
        registry.lock(c2, TASK_STAKE);
        vm.expectEmit(true, false, false, true, address(jobs));
        emit JobRegistryBase.OpenDisputesChanged(taskId, 0, 2);
        vm.prank(address(game));
        jobs.onChallenge(taskId, 0, uint64(block.timestamp));
        assertEq(views.getTask(taskId).openDisputes, 2, "both count");
        assertEq(uint8(_status(taskId)), uint8(TaskStatus.Revealed), "still a claim in its window");
        bytes32[] memory h = _honest(INPUT, 4);
        _settle(taskId, DisputeOutcome.DefenderWins, c1, _list(c1), h); // a lost challenge ...
        vm.warp(uint256(views.getTask(taskId).challengeDeadline) + jobs.defaultRevealWindow() + 1);
        vm.expectRevert(abi.encodeWithSelector(DisputesPending.selector, taskId, uint32(1)));
        jobs.finalize(taskId); // ... does not end the others (P1)
        vm.prank(address(game));
        registry.unlock(c2, TASK_STAKE); // a voided challenger gets its stake back from the game
        _settle(taskId, DisputeOutcome.Voided, c2, new address[](0), h);
        assertEq(views.getTask(taskId).openDisputes, 0, "none open");
        // A challenge committed in the window and held behind these may still be revealed for one grace (issue 25).
        uint64 end = uint64(block.timestamp) + uint64(jobs.defaultRevealWindow());
        vm.expectRevert(abi.encodeWithSelector(ChallengeWindowOpen.selector, taskId, end));
        jobs.finalize(taskId);
        vm.warp(end + 1);
        _recordBalances();
        jobs.finalize(taskId);
        assertEq(_paidSince(solver), 0, "P10: paid only once the AGGREGATE is accepted");
        uint256 agg = _acceptAggregate(jobId, 0);
        assertEq(_paidBesides(solver, agg), PAYMENT, "the claim stood");
        _assertConserved();
    }

    function test_onChallenge_p1RevealAtGraceEnd_succeeds() public {
        (, uint256 taskId, address solver) = _optimisticTask();
        uint64 deadline = views.getTask(taskId).challengeDeadline;
        uint256 end = uint256(deadline) + jobs.defaultRevealWindow();
        vm.warp(end);
        vm.expectRevert(abi.encodeWithSelector(ChallengeWindowOpen.selector, taskId, uint64(end)));
        jobs.finalize(taskId); // nobody can finalize in the block where a committed challenge is still revealable
        vm.prank(address(game));
        jobs.onChallenge(taskId, 0, deadline);
        assertEq(views.getTask(taskId).openDisputes, 1, "counted");
        solver;
    }

    function test_onChallenge_p1RevealAfterGrace_reverts() public {
        (, uint256 taskId,) = _optimisticTask();
        uint64 deadline = views.getTask(taskId).challengeDeadline;
        uint64 end = deadline + uint64(jobs.defaultRevealWindow());
        vm.warp(uint256(end) + 1);
        vm.prank(address(game));
        vm.expectRevert(abi.encodeWithSelector(ChallengeWindowClosed.selector, taskId, end));
        jobs.onChallenge(taskId, 0, deadline);
        jobs.finalize(taskId);
    }

    function test_onChallenge_p1CommittedAfterDeadline_reverts() public {
        (, uint256 taskId,) = _optimisticTask();
        uint64 deadline = views.getTask(taskId).challengeDeadline;
        vm.warp(uint256(deadline) + 1);
        vm.prank(address(game));
        vm.expectRevert(abi.encodeWithSelector(ChallengeCommittedLate.selector, taskId, deadline + 1, deadline));
        jobs.onChallenge(taskId, 0, deadline + 1);
    }

    function test_onChallenge_p3StaleEpoch_reverts() public {
        (, uint256 taskId,) = _optimisticTask();
        vm.prank(address(game));
        vm.expectRevert(abi.encodeWithSelector(StaleEpoch.selector, taskId, uint32(0), uint32(1)));
        jobs.onChallenge(taskId, 1, uint64(block.timestamp));
    }

    function test_onChallenge_notRevealed_reverts() public {
        uint256 jobId = _post(_params(1, 1, 1));
        uint256 taskId = views.taskOf(jobId, 0, 0);
        vm.prank(address(game));
        vm.expectRevert(abi.encodeWithSelector(UnexpectedTaskStatus.selector, taskId, TaskStatus.Assigned));
        jobs.onChallenge(taskId, 0, uint64(block.timestamp));
    }

    function test_onDisputeSettled_p3WinnerBecomesCandidate_succeeds() public {
        (, uint256 taskId, address solver) = _optimisticTask();
        address c = _outsider(solver, address(0), address(0));
        _openChallenge(taskId, c);
        bytes32[] memory h = _honest(INPUT, 4);
        vm.expectEmit(true, true, false, true, address(jobs));
        emit IJobRegistry.CandidateReplaced(taskId, c, h[4], 1);
        vm.expectEmit(true, false, false, true, address(jobs));
        emit IJobRegistry.ChallengeWindowOpened(taskId, uint64(block.timestamp) + jobs.defaultChallengeWindow());
        _settle(taskId, DisputeOutcome.ChallengerWins, c, new address[](0), h);
        vm.prank(address(game));
        registry.slash(solver, TASK_STAKE, address(game)); // (the game slashes before it settles; order is immaterial)
        Task memory t = views.getTask(taskId);
        assertEq(uint8(t.status), uint8(TaskStatus.Revealed), "a winner is only a candidate");
        assertEq(t.candidate, c, "candidate");
        assertEq(t.candidateRoot, Merkle.rootOf(h), "root");
        assertEq(t.finalHash, h[4], "final");
        assertEq(t.epoch, 1, "epoch++");
        assertEq(t.openDisputes, 0, "old disputes are stale");
        assertEq(uint8(_replica(taskId, 0).status), uint8(ReplicaStatus.Slashed), "defender slashed");
        assertTrue(_isBanned(taskId, solver), "defender banned");
        Claim memory claim = jobs.claimOf(taskId);
        assertEq(claim.defender, c, "the candidate defends now");
        assertEq(claim.coDefender, address(0), "alone");
        assertEq(claim.root, Merkle.rootOf(h), "its root");
        assertEq(claim.epoch, 1, "claim epoch");
        vm.expectRevert(
            abi.encodeWithSelector(
                ChallengeWindowOpen.selector, taskId, t.challengeDeadline + jobs.defaultRevealWindow()
            )
        );
        jobs.finalize(taskId);
    }

    function test_finalize_p3CandidatePaidOnAcceptance_succeeds() public {
        (uint256 jobId, uint256 taskId, address solver) = _optimisticTask();
        address c = _outsider(solver, address(0), address(0));
        _openChallenge(taskId, c);
        bytes32[] memory h = _honest(INPUT, 4);
        _settle(taskId, DisputeOutcome.ChallengerWins, c, _list(solver), h);
        assertEq(registry.getNode(c).locked, TASK_STAKE, "the registry now holds the candidate's stake");
        _recordBalances();
        _finalizeAfterWindow(taskId);
        assertEq(uint8(_status(taskId)), uint8(TaskStatus.Accepted), "accepted");
        assertEq(views.getTask(taskId).resultCid, keccak256(abi.encode("cid", h[4])), "candidate's cid");
        assertEq(_paidSince(c), 0, "P10: paid only once the AGGREGATE is accepted");
        assertEq(_paidSince(solver), 0, "defender unpaid");
        assertEq(lens.reputationOf(c).tasksCompleted, 0, "a candidate was not drawn: no reputation (its pay is the slash)");
        assertEq(registry.getNode(c).locked, 0, "its stake released");
        uint256 agg = views.taskOf(jobId, 0, 1);
        assertEq(views.getTask(agg).inputHash, keccak256(abi.encode(_one(h[4]))), "the round goes on from it");
        for (uint256 i = 0; i < nodes.length; ++i) {
            if (nodes[i] != _replica(agg, 0).node) assertEq(registry.getNode(nodes[i]).locked, 0, "locked = work");
        }
        _assertConserved();
        _acceptAggregate(jobId, 0);
        assertEq(_paidBesides(c, agg), PAYMENT, "candidate paid");
        assertEq(_paidBesides(solver, agg), 0, "defender unpaid");
        _assertConserved();
    }

    function test_onDisputeSettled_p3StaleEpochNoop_succeeds() public {
        (uint256 jobId, uint256 taskId, address solver) = _optimisticTask();
        address c = _outsider(solver, address(0), address(0));
        address d = _outsider(solver, c, address(0));
        _openChallenge(taskId, c);
        _openChallenge(taskId, d);
        bytes32[] memory h = _honest(INPUT, 4);
        _settle(taskId, DisputeOutcome.ChallengerWins, c, _list(solver), h);
        // d's dispute was about epoch 0: whatever it decides, the candidate stands.
        vm.prank(address(game));
        jobs.onDisputeSettled(taskId, 0, DisputeOutcome.ChallengerWins, d, bytes32("r"), bytes32("f"), bytes32("c"));
        Task memory t = views.getTask(taskId);
        assertEq(t.candidate, c, "candidate unchanged");
        assertEq(t.epoch, 1, "epoch unchanged");
        vm.prank(address(game));
        registry.unlock(d, TASK_STAKE); // the game abandons the stale dispute
        _finalizeAfterWindow(taskId);
        uint256 agg = views.taskOf(jobId, 0, 1);
        bytes32[] memory ha = _honest(keccak256(abi.encode(_one(h[4]))), 1);
        _draw(agg);
        _submit(agg, _replica(agg, 0).node, ha);
        _finalizeAfterWindow(agg);
        assertEq(uint8(views.getJob(jobId).status), uint8(JobStatus.Completed), "completed");
        vm.prank(address(game));
        jobs.onDisputeSettled(taskId, 0, DisputeOutcome.BothLose, d, 0, 0, 0); // still a no-op, no revert
        assertEq(uint8(_status(taskId)), uint8(TaskStatus.Accepted), "accepted stays");
        _assertConserved();
    }

    function test_onDisputeSettled_p3CandidateReplacedByNext_succeeds() public {
        (uint256 jobId, uint256 taskId, address solver) = _optimisticTask();
        address c = _outsider(solver, address(0), address(0));
        address d = _outsider(solver, c, address(0));
        _openChallenge(taskId, c);
        _settle(taskId, DisputeOutcome.ChallengerWins, c, _list(solver), _trace(INPUT, 4, "c", 2));
        _openChallenge(taskId, d);
        bytes32[] memory h = _honest(INPUT, 4);
        _settle(taskId, DisputeOutcome.ChallengerWins, d, _list(c), h);
        Task memory t = views.getTask(taskId);
        assertEq(t.candidate, d, "next candidate");
        assertEq(t.epoch, 2, "epoch 2");
        assertTrue(_isBanned(taskId, c), "previous candidate banned");
        _recordBalances();
        _finalizeAfterWindow(taskId);
        assertEq(_paidSince(d), 0, "P10: paid only once the AGGREGATE is accepted");
        uint256 agg = _acceptAggregate(jobId, 0);
        assertEq(_paidBesides(d, agg), PAYMENT, "last candidate paid");
        assertEq(_paidBesides(c, agg), 0, "overturned candidate unpaid");
        assertEq(registry.getNode(c).locked, 0, "its stake went with its loss");
        _assertConserved();
    }

    function test_onDisputeSettled_p2SybilPairOverturned_succeeds() public {
        uint256 jobId = _post(_params(1, 1, 2));
        uint256 taskId = views.taskOf(jobId, 0, 0);
        address a = _replica(taskId, 0).node;
        address b = _replica(taskId, 1).node;
        bytes32[] memory wrong = _trace(INPUT, 4, "sybil", 2);
        _runReplicated(taskId, wrong, wrong); // two identities of one owner agree on a wrong trace
        Claim memory claim = jobs.claimOf(taskId);
        assertEq(claim.coDefender, b, "both stand behind it");
        address c = _outsider(a, b, address(0));
        _openChallenge(taskId, c);
        bytes32[] memory h = _honest(INPUT, 4);
        _settle(taskId, DisputeOutcome.ChallengerWins, c, _list(a, b), h);
        assertEq(uint8(_replica(taskId, 0).status), uint8(ReplicaStatus.Slashed), "a slashed");
        assertEq(uint8(_replica(taskId, 1).status), uint8(ReplicaStatus.Slashed), "b slashed");
        assertTrue(_isBanned(taskId, a) && _isBanned(taskId, b), "both banned");
        assertEq(_replica(taskId, 1).finalHash, wrong[4], "the sharer's view keeps its value");
        _recordBalances();
        _finalizeAfterWindow(taskId);
        assertEq(_paidSince(c), 0, "P10: paid only once the AGGREGATE is accepted");
        assertEq(escrow.escrowOf(jobId), PAYMENT * 4 + jobs.POSTER_BOND(), "nothing paid before the AGGREGATE");
        uint256 agg = _acceptAggregate(jobId, 0);
        assertEq(_paidBesides(c, agg), PAYMENT, "challenger paid once");
        assertEq(_paidBesides(a, agg) + _paidBesides(b, agg), 0, "sybils unpaid");
        assertEq(
            escrow.escrowOf(jobId), PAYMENT + jobs.POSTER_BOND(), "one replica payment of the shard stays in escrow"
        );
        _assertConserved();
    }

    function test_onDisputeSettled_p3ContestWinnerWaitsWindow_succeeds() public {
        (uint256 taskId, address a, address b) = _contestedTask();
        vm.prank(address(game));
        registry.slash(b, TASK_STAKE, address(game));
        vm.expectEmit(true, true, false, true, address(jobs));
        emit IJobRegistry.CandidateReplaced(taskId, a, _honest(INPUT, 4)[4], 1);
        _settle(taskId, DisputeOutcome.ChallengerWins, a, new address[](0), _honest(INPUT, 4));
        assertEq(uint8(_status(taskId)), uint8(TaskStatus.Revealed), "winner waits out a window (P3)");
        assertEq(uint8(_replica(taskId, 0).status), uint8(ReplicaStatus.Revealed), "winner stays Revealed");
        assertEq(uint8(_replica(taskId, 1).status), uint8(ReplicaStatus.Slashed), "loser slashed");
        assertTrue(_isBanned(taskId, b), "loser banned");
        assertEq(views.getTask(taskId).epoch, 1, "epoch++");
        Claim memory claim = jobs.claimOf(taskId);
        assertEq(claim.defender, a, "winner defends");
        assertEq(claim.coDefender, address(0), "no co-defender");
        _recordBalances();
        _finalizeAfterWindow(taskId);
        assertEq(_paidSince(a), 0, "P10: paid only once the AGGREGATE is accepted");
        uint256 agg = _acceptAggregate(views.getTask(taskId).jobId, 0);
        assertEq(_paidBesides(a, agg), PAYMENT, "winner paid");
        assertEq(_paidBesides(b, agg), 0, "loser unpaid");
        _assertConserved();
    }

    function test_onDisputeSettled_p3ContestDefenderWins_succeeds() public {
        (uint256 taskId, address a, address b) = _contestedTask();
        // b opened the dispute (party A) and lost.
        _settle(taskId, DisputeOutcome.DefenderWins, b, _list(b), _trace(INPUT, 4, "bad", 3));
        assertEq(uint8(_replica(taskId, 1).status), uint8(ReplicaStatus.Slashed), "challenger slashed");
        assertEq(jobs.claimOf(taskId).defender, a, "defender's result is the claim");
        assertEq(uint8(_status(taskId)), uint8(TaskStatus.Revealed), "with a fresh window");
    }

    function test_onDisputeSettled_contestNotReplica_reverts() public {
        (uint256 taskId, address a, address b) = _contestedTask();
        address c = _outsider(a, b, address(0));
        vm.prank(address(game));
        vm.expectRevert(abi.encodeWithSelector(NotReplica.selector, taskId, c, ReplicaStatus.Revealed));
        jobs.onDisputeSettled(taskId, 0, DisputeOutcome.ChallengerWins, c, 0, 0, 0);
    }

    function test_onDisputeSettled_contestBothLoseReopens_succeeds() public {
        (uint256 taskId, address a, address b) = _contestedTask();
        _settle(taskId, DisputeOutcome.BothLose, a, _list(a, b), _honest(INPUT, 4));
        _draw(taskId);
        Task memory t = views.getTask(taskId);
        assertEq(uint8(t.status), uint8(TaskStatus.Assigned), "drawn again");
        assertEq(t.epoch, 1, "epoch++");
        assertTrue(_isBanned(taskId, a) && _isBanned(taskId, b), "both banned");
        Replica memory r0 = _replica(taskId, 0);
        Replica memory r1 = _replica(taskId, 1);
        assertTrue(r0.node != a && r0.node != b && r1.node != a && r1.node != b, "fresh nodes");
        assertEq(r0.root, 0, "fresh slot");
        _assertConserved();
    }

    function test_onDisputeSettled_contestVoidedReleases_succeeds() public {
        (uint256 taskId, address a, address b) = _contestedTask();
        vm.expectEmit(true, false, false, false, address(jobs));
        emit IJobRegistry.TaskReopened(taskId);
        _settle(taskId, DisputeOutcome.Voided, a, new address[](0), _honest(INPUT, 4));
        assertEq(registry.getNode(a).locked, 0, "a released");
        assertEq(registry.getNode(b).locked, 0, "b released");
        assertEq(registry.getNode(a).stake, NODE_STAKE, "a unslashed");
        _draw(taskId);
        assertEq(uint8(_status(taskId)), uint8(TaskStatus.Assigned), "drawn again");
    }

    function test_onDisputeSettled_bothLoseAgainstCandidateReopens_succeeds() public {
        (uint256 jobId, uint256 taskId, address solver) = _optimisticTask();
        address c = _outsider(solver, address(0), address(0));
        address d = _outsider(solver, c, address(0));
        _openChallenge(taskId, c);
        _settle(taskId, DisputeOutcome.ChallengerWins, c, _list(solver), _trace(INPUT, 4, "c", 2));
        _openChallenge(taskId, d);
        _settle(taskId, DisputeOutcome.BothLose, d, _list(c, d), _trace(INPUT, 4, "d", 2));
        assertEq(uint8(_status(taskId)), uint8(TaskStatus.Open), "waits for its draw (P4)");
        _draw(taskId);
        Task memory t = views.getTask(taskId);
        assertEq(t.candidate, address(0), "candidate cleared");
        assertEq(t.finalHash, 0, "its result cleared");
        assertEq(t.epoch, 2, "epoch++");
        assertEq(uint8(t.status), uint8(TaskStatus.Assigned), "drawn again");
        assertTrue(_isBanned(taskId, c), "candidate banned");
        address fresh = _replica(taskId, 0).node;
        assertTrue(fresh != solver && fresh != c, "a fresh solver");
        _submit(taskId, fresh, _honest(INPUT, 4));
        _recordBalances();
        _finalizeAfterWindow(taskId);
        assertEq(_paidSince(fresh), 0, "P10: paid only once the AGGREGATE is accepted");
        uint256 agg = _acceptAggregate(jobId, 0);
        assertEq(_paidBesides(fresh, agg), PAYMENT, "paid");
        // d lost its challenge (BothLose) but is not banned from the task: it may be the fresh solver, paid for that.
        assertEq(_paidBesides(c, agg), 0, "the banned candidate unpaid");
        assertEq(_paidBesides(d, agg), fresh == d ? PAYMENT : 0, "the losing challenger unpaid for its challenge");
        _assertConserved();
    }

    /// @dev Agreeing replicas share one stored trace; when only the slot holding it is drawn again, the other slot's
    ///      view must keep its own values.
    function test_onDisputeSettled_reopenOneSlotKeepsSharedView_succeeds() public {
        uint256 jobId = _post(_params(1, 1, 2));
        uint256 taskId = views.taskOf(jobId, 0, 0);
        address a = _replica(taskId, 0).node;
        address b = _replica(taskId, 1).node;
        bytes32[] memory wrong = _trace(INPUT, 4, "sybil", 2);
        _runReplicated(taskId, wrong, wrong);
        address c = _outsider(a, b, address(0));
        address d = _outsider(a, b, c);
        address e;
        for (uint256 i = 0; i < nodes.length; ++i) {
            if (nodes[i] != a && nodes[i] != b && nodes[i] != c && nodes[i] != d) e = nodes[i];
        }
        _openChallenge(taskId, c);
        _settle(taskId, DisputeOutcome.ChallengerWins, c, _list(a, b), _honest(INPUT, 4));
        _openChallenge(taskId, d);
        uint256 free = registry.freeStake(e);
        vm.prank(address(game));
        registry.lock(e, free); // e busy elsewhere: only d can be drawn
        _settle(taskId, DisputeOutcome.BothLose, d, _list(c, d), _trace(INPUT, 4, "d", 2));
        _draw(taskId);
        assertEq(uint8(_status(taskId)), uint8(TaskStatus.Open), "one slot left empty");
        Replica memory fresh = _replica(taskId, 0);
        Replica memory old = _replica(taskId, 1);
        assertEq(fresh.node, d, "slot 0 drawn again");
        assertEq(fresh.root, 0, "fresh slot");
        assertEq(old.node, b, "slot 1 kept");
        assertEq(uint8(old.status), uint8(ReplicaStatus.Slashed), "slashed");
        assertEq(old.root, Merkle.rootOf(wrong), "its root survives the redraw");
        assertEq(old.finalHash, wrong[4], "its final survives");
        assertEq(old.resultCid, keccak256(abi.encode("cid", wrong[4])), "its cid survives");
    }

    function test_onDisputeSettled_noOutcome_reverts() public {
        (, uint256 taskId,) = _optimisticTask();
        vm.prank(address(game));
        vm.expectRevert(abi.encodeWithSelector(UnexpectedOutcome.selector, taskId, DisputeOutcome.None));
        jobs.onDisputeSettled(taskId, 0, DisputeOutcome.None, address(1), 0, 0, 0);
    }

    function test_cancelJob_releasesCandidateStake_succeeds() public {
        // 5 nodes, 600-token stake: five shards fill every node, the sixth starves.
        uint256 jobId = _post(_withStake(_params(6, 1, 1), 600e18));
        uint256 taskId = views.taskOf(jobId, 0, 0);
        address solver = _replica(taskId, 0).node;
        _submit(taskId, solver, _trace(INPUT, 4, "wrong", 3));
        address c = _newNode(50, ALL_ROLES, NODE_STAKE);
        vm.startPrank(address(game));
        registry.lock(c, 600e18);
        jobs.onChallenge(taskId, 0, uint64(block.timestamp));
        registry.slash(solver, 600e18, address(game));
        bytes32[] memory h = _honest(INPUT, 4);
        jobs.onDisputeSettled(taskId, 0, DisputeOutcome.ChallengerWins, c, Merkle.rootOf(h), h[4], 0);
        vm.stopPrank();
        vm.warp(block.timestamp + jobs.assignmentTimeout() + 1);
        uint256 before = token.balanceOf(submitter);
        vm.prank(submitter);
        jobs.cancelJob(jobId);
        assertEq(registry.getNode(c).locked, 0, "candidate's stake released");
        assertEq(token.balanceOf(submitter) - before, PAYMENT * 7 + jobs.POSTER_BOND(), "full refund");
        assertEq(uint8(_status(taskId)), uint8(TaskStatus.Cancelled), "cancelled");
        for (uint256 i = 0; i < nodes.length; ++i) {
            assertEq(registry.getNode(nodes[i]).locked, 0, "nothing stays locked");
        }
        vm.prank(address(game));
        jobs.onDisputeSettled(taskId, 1, DisputeOutcome.BothLose, c, 0, 0, 0); // cancelling made it stale
        assertEq(registry.getNode(c).locked, 0, "never unlocked twice");
        _assertConserved();
    }

    // ---------------------------------------------------------------- attacker fuzz: any order of outcomes

    /// @dev Drives one task through random results and dispute outcomes (the game's stake moves simulated as the
    ///      game makes them, stale disputes abandoned), then checks that every node's locked stake is exactly its
    ///      live work on the registry's side (held slots and candidacies), and that tokens are conserved.
    function testFuzz_disputeOutcomes_lockedStakeIsLiveWork_succeeds(uint256 seed, bool replicated) public {
        _addNodes(5);
        uint256 jobId = _post(_params(1, 1, replicated ? 2 : 1));
        uint256 taskId = views.taskOf(jobId, 0, 0);
        for (uint256 step = 0; step < 10; ++step) {
            uint256 r = uint256(keccak256(abi.encode(seed, step)));
            TaskStatus st = _status(taskId);
            if (st == TaskStatus.Assigned) {
                _produce(taskId, replicated, r);
            } else if (st == TaskStatus.Contested) {
                _settleContestAsGame(taskId, r);
            } else if (st == TaskStatus.Revealed) {
                if (r % 5 == 0) {
                    _finalizeAfterWindow(taskId);
                    break;
                }
                _challengeAsGame(taskId, r);
            } else {
                break; // Open (nobody eligible) or Accepted
            }
            _assertLockedIsLiveWork(taskId);
        }
        if (_status(taskId) == TaskStatus.Revealed) _finalizeAfterWindow(taskId);
        _assertLockedIsLiveWork(taskId);
        _assertConserved();
    }

    function _produce(uint256 taskId, bool replicated, uint256 r) internal {
        bytes32[] memory h = (r >> 8) % 2 == 0 ? _honest(INPUT, 4) : _trace(INPUT, 4, bytes32(r), 2);
        if (!replicated) {
            _submit(taskId, _replica(taskId, 0).node, h);
            return;
        }
        bytes32[] memory h1 = (r >> 16) % 3 == 0 ? _trace(INPUT, 4, bytes32(r >> 1), 3) : h;
        _runReplicated(taskId, h, h1);
    }

    function _settleContestAsGame(uint256 taskId, uint256 r) internal {
        address a = _replica(taskId, 0).node;
        address b = _replica(taskId, 1).node;
        (address ch, address other) = (r >> 8) % 2 == 0 ? (a, b) : (b, a);
        DisputeOutcome o = DisputeOutcome(1 + (r % 4));
        vm.startPrank(address(game));
        if (o == DisputeOutcome.ChallengerWins || o == DisputeOutcome.BothLose) {
            registry.slash(other, TASK_STAKE, address(game));
        }
        if (o == DisputeOutcome.DefenderWins || o == DisputeOutcome.BothLose) {
            registry.slash(ch, TASK_STAKE, address(game));
        }
        jobs.onDisputeSettled(taskId, views.getTask(taskId).epoch, o, ch, 0, 0, 0);
        vm.stopPrank();
    }

    function _challengeAsGame(uint256 taskId, uint256 r) internal {
        Claim memory claim = jobs.claimOf(taskId);
        address ch = _freeOutsider(taskId, claim, address(0));
        if (ch == address(0)) return;
        _openChallenge(taskId, ch);
        address late = address(0);
        if ((r >> 12) % 3 == 0) {
            late = _freeOutsider(taskId, claim, ch); // a second challenge against the same claim
            if (late != address(0)) _openChallenge(taskId, late);
        }
        _settleChallengeAsGame(taskId, claim, ch, DisputeOutcome(1 + (r % 4)), r);
        if (late == address(0)) return;
        if (views.getTask(taskId).epoch != claim.epoch || _status(taskId) != TaskStatus.Revealed) {
            vm.startPrank(address(game)); // stale: a no-op for the registry; the game abandons it
            jobs.onDisputeSettled(taskId, claim.epoch, DisputeOutcome.ChallengerWins, late, 0, 0, 0);
            registry.unlock(late, TASK_STAKE);
            vm.stopPrank();
        } else {
            _settleChallengeAsGame(taskId, claim, late, DisputeOutcome.DefenderWins, r >> 1);
        }
    }

    function _settleChallengeAsGame(uint256 taskId, Claim memory claim, address ch, DisputeOutcome o, uint256 r)
        internal
    {
        vm.startPrank(address(game));
        if (o == DisputeOutcome.ChallengerWins || o == DisputeOutcome.BothLose) {
            registry.slash(claim.defender, TASK_STAKE, address(game));
            if (claim.coDefender != address(0)) registry.slash(claim.coDefender, TASK_STAKE, address(game));
        }
        if (o == DisputeOutcome.DefenderWins || o == DisputeOutcome.BothLose) {
            registry.slash(ch, TASK_STAKE, address(game));
        }
        if (o == DisputeOutcome.Voided) registry.unlock(ch, TASK_STAKE);
        bytes32[] memory h = _trace(INPUT, 4, bytes32(r), 1);
        jobs.onDisputeSettled(taskId, claim.epoch, o, ch, Merkle.rootOf(h), h[4], bytes32(r));
        vm.stopPrank();
    }

    /// @dev A node that can lock a task stake and is neither a claim party, a replica of the task, banned, nor `not`.
    function _freeOutsider(uint256 taskId, Claim memory claim, address not) internal view returns (address) {
        for (uint256 i = 0; i < nodes.length; ++i) {
            address n = nodes[i];
            if (n == claim.defender || n == claim.coDefender || n == not || _isBanned(taskId, n)) continue;
            if (n == _replica(taskId, 0).node || (_isReplicated(taskId) && n == _replica(taskId, 1).node)) continue;
            if (registry.freeStake(n) >= TASK_STAKE) return n;
        }
        return address(0);
    }

    function _isReplicated(uint256 taskId) internal view returns (bool) {
        return views.getJob(views.getTask(taskId).jobId).replication == 2;
    }

    /// @dev locked(node) == stake x (slots it holds Assigned/Committed/Revealed + candidacies not yet accepted), over
    ///      every task (the AGGREGATE included).
    function _assertLockedIsLiveWork(uint256) internal view {
        uint256 count = jobs.taskCount();
        for (uint256 i = 0; i < nodes.length; ++i) {
            uint256 live;
            for (uint256 t = 1; t <= count; ++t) {
                Replica[] memory reps = views.getReplicas(t);
                for (uint256 s = 0; s < reps.length; ++s) {
                    ReplicaStatus rs = reps[s].status;
                    bool holds =
                        rs == ReplicaStatus.Assigned || rs == ReplicaStatus.Committed || rs == ReplicaStatus.Revealed;
                    if (holds && reps[s].node == nodes[i]) ++live;
                }
                Task memory task = views.getTask(t);
                if (task.status == TaskStatus.Revealed && task.candidate == nodes[i]) ++live;
            }
            assertEq(registry.getNode(nodes[i]).locked, live * TASK_STAKE, "locked stake == live work");
        }
    }

    function _withStake(PostJobParams memory p, uint256 s) internal pure returns (PostJobParams memory) {
        p.stakePerReplica = s;
        return p;
    }
}
