// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Fixture} from "./base/Fixture.sol";
import {IJobRegistry} from "../../contracts/interfaces/IJobRegistry.sol";
import {Merkle} from "../../contracts/lib/Merkle.sol";
import {
    PostJobParams,
    Job,
    JobStatus,
    Task,
    TaskKind,
    TaskStatus,
    Replica,
    ReplicaStatus,
    Claim,
    DisputeOutcome
} from "../../contracts/types/VerityTypes.sol";
import {TaskMachine} from "../../contracts/TaskMachine.sol";
import {ITaskMachineErrors} from "../../contracts/errors/TaskMachineErrors.sol";
import {ZeroAddress, ParameterOutOfRange, NothingToWithdraw} from "../../contracts/errors/CommonErrors.sol";
import "../../contracts/errors/JobRegistryErrors.sol";
import {Ownable} from "@openzeppelin/contracts/access/Ownable.sol";

/// @notice Unit tests of JobRegistry entry points: posting, commit/reveal/submit (P2), finalize and the challenge
///         window with its reveal grace (P1), late reports, parameters.
contract JobRegistryTest is Fixture {
    function setUp() public override {
        super.setUp();
        _addNodes(4);
    }

    // ---------------------------------------------------------------- postJob

    function test_postJob_pullsEscrowAndDraws_succeeds() public {
        uint256 before = token.balanceOf(submitter);
        uint256 jobId = _post(_params(2, 2, 2));
        uint256 amount = PAYMENT * 2 * 3 * 2 + jobs.POSTER_BOND();
        assertEq(before - token.balanceOf(submitter), amount, "escrow pulled");
        Job memory job = views.getJob(jobId);
        assertEq(escrow.escrowOf(jobId), amount, "job escrow");
        assertEq(token.balanceOf(address(jobs)), 0, "the registry holds no tokens");
        assertTrue(job.everAssigned, "assigned");
        for (uint32 i = 0; i < 2; ++i) {
            uint256 taskId = views.taskOf(jobId, 0, i);
            assertEq(taskId, i + 1, "sequential ids");
            Task memory t = views.getTask(taskId);
            assertEq(uint8(t.kind), uint8(TaskKind.Train), "kind");
            assertEq(t.inputHash, INPUT, "input");
            assertEq(t.n, 4, "n");
            assertEq(uint8(t.status), uint8(TaskStatus.Assigned), "status");
            Replica memory a = _replica(taskId, 0);
            Replica memory b = _replica(taskId, 1);
            assertNotEq(a.node, b.node, "distinct replicas");
            assertEq(registry.getNode(a.node).locked > 0, true, "stake locked");
        }
    }

    function test_postJob_emitsJobPosted_succeeds() public {
        PostJobParams memory p = _params(1, 1, 1);
        vm.expectEmit(true, true, false, true, address(jobs));
        emit IJobRegistry.JobPosted(1, submitter, p.manifestCid, p.manifestHash, PAYMENT * 2 + jobs.POSTER_BOND());
        _post(p);
    }

    function test_postJob_invalidParams_reverts() public {
        PostJobParams memory p = _params(0, 1, 1);
        vm.expectRevert(abi.encodeWithSelector(InvalidJobParameter.selector, bytes32("shards"), 0));
        _postOnly(p);
        p = _params(33, 1, 1);
        vm.expectRevert(abi.encodeWithSelector(InvalidJobParameter.selector, bytes32("shards"), 33));
        _postOnly(p);
        p = _params(1, 0, 1);
        vm.expectRevert(abi.encodeWithSelector(InvalidJobParameter.selector, bytes32("rounds"), 0));
        _postOnly(p);
        p = _params(1, 1, 3);
        vm.expectRevert(abi.encodeWithSelector(InvalidJobParameter.selector, bytes32("replication"), 3));
        _postOnly(p);
        p = _params(1, 1, 1);
        p.stepsPerRound = 7;
        vm.expectRevert(abi.encodeWithSelector(InvalidJobParameter.selector, bytes32("stepsPerRound"), 7));
        _postOnly(p);
        p = _params(1, 1, 1);
        p.checkpointInterval = 0;
        vm.expectRevert(abi.encodeWithSelector(InvalidJobParameter.selector, bytes32("checkpointInterval"), 0));
        _postOnly(p);
        p = _params(1, 1, 1);
        p.profileBit = 3;
        vm.expectRevert(abi.encodeWithSelector(InvalidJobParameter.selector, bytes32("profileBit"), 3));
        _postOnly(p);
        p = _params(1, 1, 1);
        p.manifestCid = 0;
        vm.expectRevert(abi.encodeWithSelector(InvalidJobParameter.selector, bytes32("manifestCid"), 0));
        _postOnly(p);
        p = _params(1, 1, 1);
        p.paymentPerTask = 0;
        vm.expectRevert(abi.encodeWithSelector(InvalidJobParameter.selector, bytes32("paymentPerTask"), 0));
        _postOnly(p);
        p = _params(1, 1, 1);
        p.stakePerReplica = 0;
        vm.expectRevert(abi.encodeWithSelector(InvalidJobParameter.selector, bytes32("stakePerReplica"), 0));
        _postOnly(p);
        // Issue 23, "panels cost who opens them": in v2 a poster set a 1-wei task stake on its own job and opened
        // challenges against it (12 panels, 36 seats, 360 VRT of referee stake locked, referee pay 0). A dispute
        // slashes its loser's task stake: now each one costs its loser at least 1 VRT.
        p.stakePerReplica = 1;
        vm.expectRevert(abi.encodeWithSelector(InvalidJobParameter.selector, bytes32("stakePerReplica"), 1));
        _postOnly(p);
        p.stakePerReplica = 1e18 - 1;
        vm.expectRevert(abi.encodeWithSelector(InvalidJobParameter.selector, bytes32("stakePerReplica"), 1e18 - 1));
        _postOnly(p);
        p.stakePerReplica = 1e18;
        _postOnly(p);
        p = _params(1, 1, 1);
        p = _params(1, 1, 1);
        p.deviceClass = 2;
        vm.expectRevert(abi.encodeWithSelector(InvalidJobParameter.selector, bytes32("deviceClass"), 2));
        _postOnly(p);
        p = _params(1, 1, 1);
        p.revealWindow = 8 days;
        vm.expectRevert(abi.encodeWithSelector(InvalidJobParameter.selector, bytes32("revealWindow"), 8 days));
        _postOnly(p);
    }

    function testFuzz_postJob_escrowFormula_succeeds(uint64 pay, uint8 shards, uint8 rounds, bool rep2) public {
        uint256 payment = bound(pay, 1, 1e18);
        uint32 s = uint32(bound(shards, 1, 32));
        uint32 r = uint32(bound(rounds, 1, 256));
        uint8 rep = rep2 ? 2 : 1;
        PostJobParams memory p = _params(s, r, rep);
        p.paymentPerTask = payment;
        p.stakePerReplica = NODE_STAKE + 1; // nobody eligible: keeps the fuzz run cheap
        uint256 before = token.balanceOf(submitter);
        uint256 jobId = _postOnly(p);
        uint256 expected = payment * rep * (uint256(s) + 1) * r + jobs.POSTER_BOND();
        assertEq(before - token.balanceOf(submitter), expected, "pulled");
        assertEq(escrow.escrowOf(jobId), expected, "stored");
        assertEq(views.escrowFor(payment, rep, s, r), expected, "view");
        assertEq(token.balanceOf(address(escrow)), escrow.totalEscrow(), "held");
    }

    // ---------------------------------------------------------------- commit / reveal

    function _replicatedTask() internal returns (uint256 taskId, address a, address b, bytes32[] memory h) {
        _post(_params(1, 1, 2));
        taskId = 1;
        a = _replica(taskId, 0).node;
        b = _replica(taskId, 1).node;
        h = _honest(INPUT, 4);
    }

    function test_commit_notReplica_reverts() public {
        (uint256 taskId,,, bytes32[] memory h) = _replicatedTask();
        vm.expectRevert(abi.encodeWithSelector(NotReplica.selector, taskId, address(this), ReplicaStatus.Assigned));
        jobs.commit(taskId, _commitment(h, address(this)));
    }

    function test_commit_twice_reverts() public {
        (uint256 taskId, address a,, bytes32[] memory h) = _replicatedTask();
        _commit(taskId, a, h);
        vm.prank(a);
        vm.expectRevert(abi.encodeWithSelector(NotReplica.selector, taskId, a, ReplicaStatus.Assigned));
        jobs.commit(taskId, 0);
    }

    function test_commit_afterDeadline_reverts() public {
        (uint256 taskId, address a,, bytes32[] memory h) = _replicatedTask();
        uint64 deadline = _replica(taskId, 0).deadline;
        vm.warp(deadline + 1);
        vm.prank(a);
        vm.expectRevert(abi.encodeWithSelector(DeadlinePassed.selector, taskId, uint8(0), deadline));
        jobs.commit(taskId, _commitment(h, a));
    }

    function test_commit_optimisticTask_reverts() public {
        _post(_params(1, 1, 1));
        address a = _replica(1, 0).node;
        vm.prank(a);
        vm.expectRevert(abi.encodeWithSelector(WrongVerificationMode.selector, 1, uint8(1)));
        jobs.commit(1, 0);
    }

    function test_commit_unknownTask_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(TaskNotFound.selector, 99));
        jobs.commit(99, 0);
    }

    function test_reveal_beforeAllCommitted_reverts() public {
        (uint256 taskId, address a,, bytes32[] memory h) = _replicatedTask();
        _commit(taskId, a, h);
        vm.expectRevert(abi.encodeWithSelector(RevealNotOpen.selector, taskId));
        _reveal(taskId, a, h);
    }

    function test_reveal_otherThanCommitted_reverts() public {
        (uint256 taskId, address a, address b, bytes32[] memory h) = _replicatedTask();
        _commit(taskId, a, h);
        _commit(taskId, b, h);
        bytes32 root = Merkle.rootOf(h);
        bytes32 expected = keccak256(abi.encode(root, h[4], bytes32("other cid"), a));
        vm.prank(a);
        vm.expectRevert(abi.encodeWithSelector(CommitmentMismatch.selector, taskId, _commitment(h, a), expected));
        jobs.reveal(taskId, root, h[4], 4, "other cid", Merkle.proofOf(h, 0), Merkle.proofOf(h, 4));
    }

    function test_reveal_wrongInput_reverts() public {
        (uint256 taskId, address a, address b,) = _replicatedTask();
        bytes32[] memory bad = _honest(keccak256("other input"), 4);
        _commit(taskId, a, bad);
        _commit(taskId, b, bad);
        vm.expectRevert(abi.encodeWithSelector(InvalidProof.selector, taskId, 0, INPUT));
        _reveal(taskId, a, bad);
    }

    function test_reveal_wrongLength_reverts() public {
        (uint256 taskId, address a, address b,) = _replicatedTask();
        bytes32[] memory shortTrace = _honest(INPUT, 3);
        _commit(taskId, a, shortTrace);
        _commit(taskId, b, shortTrace);
        vm.expectRevert(abi.encodeWithSelector(WrongTraceLength.selector, taskId, uint32(4), uint32(3)));
        _reveal(taskId, a, shortTrace);
    }

    function test_reveal_afterDeadline_reverts() public {
        (uint256 taskId, address a, address b, bytes32[] memory h) = _replicatedTask();
        _commit(taskId, a, h);
        _commit(taskId, b, h);
        uint64 deadline = _replica(taskId, 0).deadline;
        vm.warp(deadline + 1);
        vm.expectRevert(abi.encodeWithSelector(DeadlinePassed.selector, taskId, uint8(0), deadline));
        _reveal(taskId, a, h);
    }

    function test_reveal_p2EqualTracesOpenWindow_succeeds() public {
        (uint256 taskId, address a, address b, bytes32[] memory h) = _replicatedTask();
        _recordBalances();
        _commit(taskId, a, h);
        _commit(taskId, b, h);
        vm.expectEmit(true, false, false, true, address(jobs));
        emit IJobRegistry.ChallengeWindowOpened(taskId, uint64(block.timestamp) + jobs.defaultChallengeWindow());
        _reveal(taskId, a, h); // b committed the same result: revealed with it
        assertEq(uint8(_status(taskId)), uint8(TaskStatus.Revealed), "agreement is a claim, not finality");
        assertEq(uint8(_replica(taskId, 0).status), uint8(ReplicaStatus.Revealed), "replica 0 waits");
        assertEq(uint8(_replica(taskId, 1).status), uint8(ReplicaStatus.Revealed), "replica 1 waits");
        assertEq(_replica(taskId, 1).root, Merkle.rootOf(h), "shared root read back");
        assertEq(jobs.claimOf(taskId).coDefender, b, "b stands behind the claim it committed");
        assertEq(_paidSince(a), 0, "nobody paid yet");
        assertEq(registry.getNode(a).locked, TASK_STAKE, "stake still locked");
        assertEq(jobs.taskCount(), 1, "no AGGREGATE yet");
        vm.prank(b);
        vm.expectRevert(abi.encodeWithSelector(UnexpectedTaskStatus.selector, taskId, TaskStatus.Revealed));
        jobs.reveal(taskId, Merkle.rootOf(h), h[4], 4, _resultCid(h), Merkle.proofOf(h, 0), Merkle.proofOf(h, 4));
    }

    function test_reveal_lastToCommitRevealsForBoth_succeeds() public {
        (uint256 taskId, address a, address b, bytes32[] memory h) = _replicatedTask();
        _commit(taskId, a, h);
        vm.expectEmit(true, false, false, true, address(jobs));
        emit IJobRegistry.ChallengeWindowOpened(taskId, uint64(block.timestamp) + jobs.defaultChallengeWindow());
        _reveal(taskId, b, h); // two transactions for the whole agreement
        assertEq(uint8(_status(taskId)), uint8(TaskStatus.Revealed), "agreement waits out its window");
        assertEq(uint8(_replica(taskId, 0).status), uint8(ReplicaStatus.Revealed), "a revealed by b's reveal");
        assertEq(uint8(_replica(taskId, 1).status), uint8(ReplicaStatus.Revealed), "b revealed");
        assertEq(jobs.claimOf(taskId).defender, a, "the claim");
        assertEq(jobs.claimOf(taskId).coDefender, b, "both stand behind it");
        _finalizeAfterWindow(taskId);
        assertEq(uint8(_replica(taskId, 0).status), uint8(ReplicaStatus.Accepted), "a accepted");
        assertEq(uint8(_replica(taskId, 1).status), uint8(ReplicaStatus.Accepted), "b accepted");
    }

    /// @dev Attack: a lazy last replica guesses (or copies an old) result instead of training. Its reveal matches
    ///      nothing, so the partner's reveal window opens, the partner reveals, and the replicas are Contested.
    function test_reveal_lastToCommitWrongGuess_contested() public {
        (uint256 taskId, address a, address b, bytes32[] memory h) = _replicatedTask();
        _commit(taskId, a, h);
        bytes32[] memory guess = _trace(INPUT, 4, "guess", 1);
        vm.expectEmit(true, false, false, true, address(jobs));
        emit IJobRegistry.RevealOpened(taskId, uint64(block.timestamp) + jobs.defaultRevealWindow());
        _reveal(taskId, b, guess);
        assertEq(uint8(_status(taskId)), uint8(TaskStatus.Assigned), "a must reveal");
        assertEq(uint8(_replica(taskId, 0).status), uint8(ReplicaStatus.Committed), "a not revealed by a guess");
        assertEq(_replica(taskId, 0).deadline, uint64(block.timestamp) + jobs.defaultRevealWindow(), "a's window");
        _reveal(taskId, a, h);
        assertEq(uint8(_status(taskId)), uint8(TaskStatus.Contested), "different traces");
    }

    function test_reveal_zeroFinal_reverts() public {
        (uint256 taskId, address a, address b, bytes32[] memory h) = _replicatedTask();
        _commit(taskId, a, h);
        bytes32[] memory z = _honest(INPUT, 4);
        z[4] = 0; // a trace its owner built to end in zero: a zero final would read as "not revealed"
        vm.expectRevert(abi.encodeWithSelector(InvalidProof.selector, taskId, uint32(4), bytes32(0)));
        _reveal(taskId, b, z);
    }

    /// @dev The revealed slot's commitment slot holds its root now; the view still shows both.
    function test_getReplica_afterOneRevealForBoth_showsRootAndCommitment_succeeds() public {
        (uint256 taskId, address a, address b, bytes32[] memory h) = _replicatedTask();
        _commit(taskId, a, h);
        assertEq(_replica(taskId, 0).commitment, _commitment(h, a), "committed");
        assertEq(_replica(taskId, 0).root, bytes32(0), "no root before the reveal");
        _reveal(taskId, b, h);
        for (uint8 s = 0; s < 2; ++s) {
            Replica memory r = _replica(taskId, s);
            assertEq(r.root, Merkle.rootOf(h), "root");
            assertEq(r.finalHash, h[4], "final");
            assertEq(r.resultCid, _resultCid(h), "cid");
            assertEq(r.commitment, _commitment(h, s == 0 ? a : b), "commitment: the hash of what it revealed");
        }
    }

    function test_reveal_uncommittedWhilePartnerUncommitted_reverts() public {
        (uint256 taskId, address a,, bytes32[] memory h) = _replicatedTask();
        vm.expectRevert(abi.encodeWithSelector(RevealNotOpen.selector, taskId));
        _reveal(taskId, a, h); // b's result is not fixed yet: revealing now would show it to b
    }

    function test_reveal_lastToCommitAfterDeadline_reverts() public {
        (uint256 taskId, address a, address b, bytes32[] memory h) = _replicatedTask();
        _commit(taskId, a, h);
        uint64 deadline = _replica(taskId, 1).deadline;
        vm.warp(deadline + 1);
        vm.expectRevert(abi.encodeWithSelector(DeadlinePassed.selector, taskId, uint8(1), deadline));
        _reveal(taskId, b, h);
    }

    function test_reveal_notReplica_reverts() public {
        (uint256 taskId, address a,, bytes32[] memory h) = _replicatedTask();
        _commit(taskId, a, h);
        vm.expectRevert(abi.encodeWithSelector(NotReplica.selector, taskId, address(this), ReplicaStatus.Committed));
        jobs.reveal(taskId, Merkle.rootOf(h), h[4], 4, _resultCid(h), Merkle.proofOf(h, 0), Merkle.proofOf(h, 4));
    }

    function test_finalize_p2AgreeingReplicasWaitWindow_succeeds() public {
        (uint256 taskId, address a, address b, bytes32[] memory h) = _replicatedTask();
        _runReplicated(taskId, h, h);
        uint256 end = uint256(views.getTask(taskId).challengeDeadline) + jobs.defaultRevealWindow();
        vm.warp(end);
        vm.expectRevert(abi.encodeWithSelector(ChallengeWindowOpen.selector, taskId, uint64(end)));
        jobs.finalize(taskId);
        vm.warp(end + 1);
        _recordBalances();
        jobs.finalize(taskId);
        assertEq(uint8(_status(taskId)), uint8(TaskStatus.Accepted), "accepted");
        assertEq(uint8(_replica(taskId, 0).status), uint8(ReplicaStatus.Accepted), "replica 0 accepted");
        assertEq(uint8(_replica(taskId, 1).status), uint8(ReplicaStatus.Accepted), "replica 1 accepted");
        assertEq(_paidSince(a) + _paidSince(b), 0, "P10: paid only once the AGGREGATE is accepted");
        assertEq(lens.reputationOf(a).tasksCompleted, 1, "completed++");
        // Only the new AGGREGATE task's stake (if this node was drawn for it) stays locked.
        assertLe(registry.getNode(a).locked, TASK_STAKE, "unlocked");
        assertEq(views.getTask(taskId).finalHash, h[4], "result");
        assertEq(views.getTask(taskId + 1).inputHash, keccak256(abi.encode(_finals1(h[4]))), "aggregate input");
        uint256 agg = _acceptAggregate(views.getTask(taskId).jobId, 0);
        assertEq(_paidBesides(a, agg), PAYMENT, "a paid");
        assertEq(_paidBesides(b, agg), PAYMENT, "b paid");
    }

    function test_reveal_p2EqualFinalsDifferentRoots_contests_succeeds() public {
        (uint256 taskId,,, bytes32[] memory h) = _replicatedTask();
        bytes32[] memory other = _trace(INPUT, 4, "other", 2);
        other[4] = h[4]; // same final, different path
        _runReplicated(taskId, h, other);
        assertEq(uint8(_status(taskId)), uint8(TaskStatus.Contested), "a different trace is a disagreement");
    }

    function test_reveal_differentFinals_contests_succeeds() public {
        (uint256 taskId,,, bytes32[] memory h) = _replicatedTask();
        _runReplicated(taskId, h, _trace(INPUT, 4, "bad", 2));
        assertEq(uint8(_status(taskId)), uint8(TaskStatus.Contested), "contested");
    }

    function test_claimOf_p2AgreeingReplicasCoDefend_succeeds() public {
        (uint256 taskId, address a, address b, bytes32[] memory h) = _replicatedTask();
        _runReplicated(taskId, h, h);
        Claim memory c = jobs.claimOf(taskId);
        assertEq(c.defender, a, "defender = first replica");
        assertEq(c.coDefender, b, "co-defender = the identical trace");
        assertEq(c.root, Merkle.rootOf(h), "root");
        assertEq(c.finalHash, h[4], "final");
        assertEq(c.resultCid, keccak256(abi.encode("cid", h[4])), "cid");
        assertEq(c.epoch, 0, "epoch");
        assertEq(c.challengeDeadline, views.getTask(taskId).challengeDeadline, "deadline");
        assertEq(c.revealGrace, jobs.defaultRevealWindow(), "grace");
    }

    function test_claimOf_notRevealed_reverts() public {
        (uint256 taskId,,,) = _replicatedTask();
        vm.expectRevert(abi.encodeWithSelector(UnexpectedTaskStatus.selector, taskId, TaskStatus.Assigned));
        jobs.claimOf(taskId);
    }

    function _finals1(bytes32 f) internal pure returns (bytes32[] memory a) {
        a = new bytes32[](1);
        a[0] = f;
    }

    // ---------------------------------------------------------------- optimistic

    function test_submitResult_notSolver_reverts() public {
        _post(_params(1, 1, 1));
        vm.expectRevert(abi.encodeWithSelector(NotReplica.selector, 1, address(this), ReplicaStatus.Assigned));
        _submit(1, address(this), _honest(INPUT, 4));
    }

    function test_submitResult_replicatedTask_reverts() public {
        _post(_params(1, 1, 2));
        address a = _replica(1, 0).node;
        vm.expectRevert(abi.encodeWithSelector(WrongVerificationMode.selector, 1, uint8(2)));
        _submit(1, a, _honest(INPUT, 4));
    }

    function test_finalize_insideWindow_reverts() public {
        _post(_params(1, 1, 1));
        _submit(1, _replica(1, 0).node, _honest(INPUT, 4));
        uint64 end = views.getTask(1).challengeDeadline + jobs.defaultRevealWindow();
        vm.expectRevert(abi.encodeWithSelector(ChallengeWindowOpen.selector, 1, end));
        jobs.finalize(1);
    }

    function test_finalize_p1InsideRevealGrace_reverts() public {
        _post(_params(1, 1, 1));
        _submit(1, _replica(1, 0).node, _honest(INPUT, 4));
        uint64 deadline = views.getTask(1).challengeDeadline;
        vm.warp(deadline + 1); // commits are closed, but a committed challenge may still be revealed
        vm.expectRevert(abi.encodeWithSelector(ChallengeWindowOpen.selector, 1, deadline + jobs.defaultRevealWindow()));
        jobs.finalize(1);
    }

    function test_submitResult_optimisticClaim_succeeds() public {
        _post(_params(1, 1, 1));
        address solver = _replica(1, 0).node;
        bytes32[] memory h = _honest(INPUT, 4);
        _submit(1, solver, h);
        Claim memory c = jobs.claimOf(1);
        assertEq(c.defender, solver, "defender");
        assertEq(c.coDefender, address(0), "no co-defender");
        assertEq(c.finalHash, h[4], "final");
        _recordBalances();
        _finalizeAfterWindow(1);
        assertEq(_paidSince(solver), 0, "P10: paid only once the AGGREGATE is accepted");
        uint256 agg = _acceptAggregate(1, 0);
        assertEq(_paidBesides(solver, agg), PAYMENT, "paid");
        assertEq(registry.getNode(solver).locked, 0, "unlocked");
    }

    /// @notice The lens keepers read: `finalizable` says "ready" exactly when `finalize` would accept.
    function test_finalizable_matchesFinalizeRule_succeeds() public {
        _post(_params(1, 1, 1));
        (bool ready, uint64 end) = views.finalizable(1);
        assertFalse(ready, "ready before any result");
        assertEq(end, 0, "window end before any result");
        _submit(1, _replica(1, 0).node, _honest(INPUT, 4));
        (ready, end) = views.finalizable(1);
        assertEq(end, views.getTask(1).challengeDeadline + jobs.defaultRevealWindow(), "window end");
        assertFalse(ready, "ready inside the window");
        vm.prank(address(game));
        jobs.onChallenge(1, 0, uint64(block.timestamp)); // committed in time, revealed now
        vm.warp(end);
        (ready,) = views.finalizable(1);
        assertFalse(ready, "ready at the window's last second");
        vm.warp(end + 1);
        (ready,) = views.finalizable(1);
        assertFalse(ready, "ready with a dispute open");
        vm.expectRevert(abi.encodeWithSelector(DisputesPending.selector, 1, 1));
        jobs.finalize(1);
    }

    function test_finalizable_afterWindow_thenFinalizeAccepts_succeeds() public {
        _post(_params(1, 1, 1));
        _submit(1, _replica(1, 0).node, _honest(INPUT, 4));
        (, uint64 end) = views.finalizable(1);
        vm.warp(end + 1);
        (bool ready,) = views.finalizable(1);
        assertTrue(ready, "not ready after the window");
        jobs.finalize(1);
        assertEq(uint8(_status(1)), uint8(TaskStatus.Accepted), "accepted");
        (ready,) = views.finalizable(1);
        assertFalse(ready, "ready once accepted");
    }

    function test_finalize_notRevealed_reverts() public {
        _post(_params(1, 1, 1));
        vm.expectRevert(abi.encodeWithSelector(UnexpectedTaskStatus.selector, 1, TaskStatus.Assigned));
        jobs.finalize(1);
    }

    // ---------------------------------------------------------------- late

    function test_reportLate_beforeDeadline_reverts() public {
        _post(_params(1, 1, 2));
        Replica memory r = _replica(1, 0);
        vm.expectRevert(abi.encodeWithSelector(SlotNotLate.selector, 1, uint8(0), r.status, r.deadline));
        jobs.reportLate(1, 0);
    }

    /// @dev Issue 9 (governance): the owner raises the late slash to 100 % after a node accepted a job at 10 %; the
    ///      node is late and loses the job's 10 %, not the new rate (the rate is the job's, fixed when it was posted).
    function test_reportLate_afterLateSlashRaised_usesTheJobsRate_succeeds() public {
        uint256 atPosting = jobs.lateSlashBps();
        _post(_params(1, 1, 2));
        assertEq(views.getJob(1).lateSlashBps, atPosting, "snapshotted at posting");
        jobs.setLateSlashBps(10_000);
        address late = _replica(1, 0).node;
        _commit(1, _replica(1, 1).node, _honest(INPUT, 4));
        vm.warp(_replica(1, 0).deadline + 1);
        _heartbeatAll();
        uint256 slash = (TASK_STAKE * atPosting) / 10_000;
        vm.expectEmit(true, true, false, true, address(jobs));
        emit IJobRegistry.ReplicaLate(1, late, 0, slash);
        jobs.reportLate(1, 0);
        assertEq(registry.getNode(late).stake, NODE_STAKE - slash, "slashed at the job's rate");
        _post(_params(1, 1, 2));
        assertEq(views.getJob(2).lateSlashBps, 10_000, "a later job takes the new rate");
    }

    function test_reportLate_invalidSlot_reverts() public {
        _post(_params(1, 1, 1));
        vm.expectRevert(abi.encodeWithSelector(InvalidSlot.selector, 1, uint8(1)));
        jobs.reportLate(1, 1);
    }

    function test_reportLate_slashesAndRedraws_succeeds() public {
        _post(_params(1, 1, 2));
        address late = _replica(1, 0).node;
        address partner = _replica(1, 1).node;
        _commit(1, partner, _honest(INPUT, 4));
        vm.warp(_replica(1, 0).deadline + 1);
        _heartbeatAll();
        uint256 burnedBefore = token.totalBurned();
        uint256 slash = (TASK_STAKE * jobs.lateSlashBps()) / 10_000;
        vm.expectEmit(true, true, false, true, address(jobs));
        emit IJobRegistry.ReplicaLate(1, late, 0, slash);
        jobs.reportLate(1, 0);
        assertEq(uint8(_status(1)), uint8(TaskStatus.Open), "open until the new draw (P4)");
        _draw(1);
        assertEq(token.totalBurned() - burnedBefore, slash, "burned");
        assertEq(registry.getNode(late).locked, 0, "unlocked");
        assertEq(registry.getNode(late).stake, NODE_STAKE - slash, "slashed");
        assertEq(lens.reputationOf(late).tasksLate, 1, "late++");
        Replica memory fresh = _replica(1, 0);
        assertNotEq(fresh.node, late, "late node not redrawn");
        assertNotEq(fresh.node, partner, "partner not redrawn");
        assertEq(uint8(fresh.status), uint8(ReplicaStatus.Assigned), "reassigned");
        assertEq(views.bannedOf(1)[0], late, "banned");
    }

    function testFuzz_reportLate_slashSplit_succeeds(uint16 bps, uint96 stakeAmt) public {
        uint256 slashBps = bound(bps, 0, 10_000);
        uint256 taskStake = bound(stakeAmt, 1e18, NODE_STAKE); // MIN_TASK_STAKE..
        jobs.setLateSlashBps(slashBps);
        PostJobParams memory p = _params(1, 1, 1);
        p.stakePerReplica = taskStake;
        _post(p);
        address late = _replica(1, 0).node;
        uint256 stakeBefore = registry.getNode(late).stake;
        uint256 burnedBefore = token.totalBurned();
        vm.warp(_replica(1, 0).deadline + 1);
        jobs.reportLate(1, 0);
        uint256 slash = (taskStake * slashBps) / 10_000;
        assertEq(stakeBefore - registry.getNode(late).stake, slash, "stake cut");
        assertEq(token.totalBurned() - burnedBefore, slash, "burned");
        assertEq(registry.getNode(late).locked, 0, "rest unlocked");
        assertEq(token.balanceOf(address(registry)), _sumStakes(), "registry balance");
    }

    function _sumStakes() internal view returns (uint256 sum) {
        for (uint256 i = 0; i < nodes.length; ++i) {
            sum += registry.getNode(nodes[i]).stake;
        }
    }

    // ---------------------------------------------------------------- assign / cancel / reclaim

    function test_assign_notOpen_reverts() public {
        _post(_params(1, 1, 2));
        vm.expectRevert(abi.encodeWithSelector(UnexpectedTaskStatus.selector, 1, TaskStatus.Assigned));
        jobs.assign(1);
    }

    function test_assign_noEligible_reverts() public {
        PostJobParams memory p = _params(1, 1, 2);
        p.stakePerReplica = NODE_STAKE + 1;
        _post(p);
        vm.expectRevert(abi.encodeWithSelector(NoEligibleNode.selector, 1));
        jobs.assign(1);
    }

    function test_assign_afterNewNode_succeeds() public {
        PostJobParams memory p = _params(1, 1, 1);
        p.minMemoryMb = 64_000;
        _post(p);
        assertEq(uint8(_status(1)), uint8(TaskStatus.Open), "open");
        address big = _bigNode(0xB16); // in the next epoch: the draw's request is renewed
        _draw(1);
        assertEq(_replica(1, 0).node, big, "assigned");
        assertEq(uint8(_status(1)), uint8(TaskStatus.Assigned), "assigned status");
    }

    function test_cancelJob_beforeAssignment_refunds_succeeds() public {
        PostJobParams memory p = _params(2, 1, 2);
        p.stakePerReplica = NODE_STAKE + 1;
        uint256 before = token.balanceOf(submitter);
        uint256 jobId = _post(p);
        vm.prank(submitter);
        jobs.cancelJob(jobId);
        assertEq(token.balanceOf(submitter), before, "full refund");
        assertEq(uint8(views.getJob(jobId).status), uint8(JobStatus.Cancelled), "cancelled");
        assertEq(uint8(_status(1)), uint8(TaskStatus.Cancelled), "task cancelled");
    }

    function test_cancelJob_whileAssigned_reverts() public {
        uint256 jobId = _post(_params(1, 1, 2));
        vm.prank(submitter);
        vm.expectRevert(abi.encodeWithSelector(CancelNotAllowed.selector, jobId));
        jobs.cancelJob(jobId);
    }

    function test_cancelJob_notSubmitter_reverts() public {
        uint256 jobId = _post(_params(1, 1, 2));
        vm.expectRevert(abi.encodeWithSelector(NotSubmitter.selector, jobId, address(this)));
        jobs.cancelJob(jobId);
    }

    function test_cancelJob_starvedTask_unlocksAndRefunds_succeeds() public {
        // 4 nodes, 3 shards x 2 replicas: at most 4 slots can be filled with a 600-token task stake.
        PostJobParams memory p = _params(3, 1, 2);
        p.stakePerReplica = 600e18;
        uint256 jobId = _post(p);
        assertEq(uint8(_status(3)), uint8(TaskStatus.Open), "starved task");
        vm.warp(block.timestamp + jobs.assignmentTimeout() + 1);
        uint256 before = token.balanceOf(submitter);
        vm.prank(submitter);
        jobs.cancelJob(jobId);
        assertEq(token.balanceOf(submitter) - before, PAYMENT * 2 * 4 + jobs.POSTER_BOND(), "refund");
        for (uint256 i = 0; i < nodes.length; ++i) {
            assertEq(registry.getNode(nodes[i]).locked, 0, "unlocked");
        }
    }

    function test_cancelJob_p1OpenDispute_reverts() public {
        PostJobParams memory p = _params(5, 1, 1); // 4 nodes, 600-token stake: the fifth shard starves
        p.stakePerReplica = 600e18;
        uint256 jobId = _post(p);
        uint256 t1 = views.taskOf(jobId, 0, 0);
        _submit(t1, _replica(t1, 0).node, _honest(INPUT, 4));
        vm.prank(address(game));
        jobs.onChallenge(t1, 0, uint64(block.timestamp));
        vm.warp(block.timestamp + jobs.assignmentTimeout() + 1);
        vm.prank(submitter);
        vm.expectRevert(abi.encodeWithSelector(JobHasPendingTask.selector, jobId, t1, TaskStatus.Revealed));
        jobs.cancelJob(jobId);
    }

    function test_cancelJob_contested_reverts() public {
        PostJobParams memory p = _params(3, 1, 2); // 4 nodes, 600-token stake: the third shard starves
        p.stakePerReplica = 600e18;
        uint256 jobId = _post(p);
        uint256 t1 = views.taskOf(jobId, 0, 0);
        _runReplicated(t1, _honest(INPUT, 4), _trace(INPUT, 4, "bad", 2));
        vm.warp(block.timestamp + jobs.assignmentTimeout() + 1);
        vm.prank(submitter);
        vm.expectRevert(abi.encodeWithSelector(JobHasPendingTask.selector, jobId, t1, TaskStatus.Contested));
        jobs.cancelJob(jobId);
    }

    function test_reclaimEscrow_notCompleted_reverts() public {
        uint256 jobId = _post(_params(1, 1, 2));
        vm.prank(submitter);
        vm.expectRevert(abi.encodeWithSelector(JobNotCompleted.selector, jobId, JobStatus.Active));
        jobs.reclaimEscrow(jobId);
    }

    function test_reclaimEscrow_nothingLeft_reverts() public {
        uint256 jobId = _post(_params(1, 1, 1));
        _runRoundHonest(jobId, 0);
        vm.prank(submitter);
        jobs.reclaimEscrow(jobId); // every payment was made: only the poster bond comes back
        vm.prank(submitter);
        vm.expectRevert(abi.encodeWithSelector(NothingToWithdraw.selector, submitter));
        jobs.reclaimEscrow(jobId);
    }

    function test_taskOf_unknown_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(TaskIndexNotFound.selector, 5, uint32(0), uint32(0)));
        views.taskOf(5, 0, 0);
    }

    // ---------------------------------------------------------------- owner / hooks

    function test_setDisputeGame_idempotent_succeeds() public {
        jobs.setDisputeGame(address(game));
        assertEq(jobs.disputeGame(), address(game), "same");
    }

    function test_setDisputeGame_secondGame_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(DisputeGameAlreadySet.selector, address(game)));
        jobs.setDisputeGame(address(0xBEEF));
    }

    function test_setDisputeGame_zero_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(ZeroAddress.selector, bytes32("game")));
        jobs.setDisputeGame(address(0));
    }

    function test_setParameters_succeeds() public {
        jobs.setDefaultWindows(35, 20, 30);
        jobs.setAssignmentTimeout(40);
        jobs.setLateSlashBps(500);
        assertEq(jobs.defaultExecutionWindow(), 35, "exec");
        assertEq(jobs.defaultRevealWindow(), 20, "reveal");
        assertEq(jobs.defaultChallengeWindow(), 30, "challenge");
        assertEq(jobs.assignmentTimeout(), 40, "timeout");
        assertEq(jobs.lateSlashBps(), 500, "bps");
    }

    function test_setParameters_outOfRange_reverts() public {
        vm.expectRevert(
            abi.encodeWithSelector(ParameterOutOfRange.selector, bytes32("lateSlashBps"), 10_001, 0, 10_000)
        );
        jobs.setLateSlashBps(10_001);
        vm.expectRevert(abi.encodeWithSelector(ParameterOutOfRange.selector, bytes32("executionWindow"), 0, 30, 7 days));
        jobs.setDefaultWindows(0, 1, 1);
        vm.prank(submitter);
        vm.expectRevert(abi.encodeWithSelector(Ownable.OwnableUnauthorizedAccount.selector, submitter));
        jobs.setAssignmentTimeout(1);
    }

    /// @dev Issue 9 (a poster burns honest stake): a job with a 1-second execution window had its drawn solvers
    ///      reported late and slashed before they could commit. No job, and no default, can be that short now.
    function test_windowsBelowTheMinimum_reverts() public {
        PostJobParams memory p = _params(1, 1, 2);
        p.executionWindow = 1;
        vm.expectRevert(abi.encodeWithSelector(InvalidJobParameter.selector, bytes32("executionWindow"), 1));
        jobs.postJob(p);
        p.executionWindow = jobs.MIN_EXECUTION_WINDOW();
        p.revealWindow = 1;
        vm.expectRevert(abi.encodeWithSelector(InvalidJobParameter.selector, bytes32("revealWindow"), 1));
        jobs.postJob(p);
        vm.expectRevert(
            abi.encodeWithSelector(ParameterOutOfRange.selector, bytes32("executionWindow"), 29, 30, 7 days)
        );
        jobs.setDefaultWindows(29, 5, 1);
        vm.expectRevert(abi.encodeWithSelector(ParameterOutOfRange.selector, bytes32("revealWindow"), 4, 5, 7 days));
        jobs.setDefaultWindows(30, 4, 1);
    }

    function test_hooks_notDisputeGame_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(NotDisputeGame.selector, address(this)));
        jobs.onChallenge(1, 0, 0);
        vm.expectRevert(abi.encodeWithSelector(NotDisputeGame.selector, address(this)));
        jobs.onDisputeSettled(1, 0, DisputeOutcome.ChallengerWins, address(this), 0, 0, 0);
    }

    function test_machine_directCall_reverts() public {
        TaskMachine machine = TaskMachine(jobs.machine());
        vm.expectRevert(abi.encodeWithSelector(NotDelegated.selector));
        machine.finalize(1);
        vm.prank(address(game));
        vm.expectRevert(abi.encodeWithSelector(NotDelegated.selector));
        machine.onDisputeSettled(1, 0, DisputeOutcome.ChallengerWins, address(this), 0, 0, 0);
    }

    /// @dev The registry's ABI repeats TaskMachine's errors; each must keep its domain file's selector.
    function test_abi_delegatedErrorsMatch_succeeds() public pure {
        _sameSelector(ITaskMachineErrors.CancelNotAllowed.selector, CancelNotAllowed.selector);
        _sameSelector(ITaskMachineErrors.ChallengeCommittedLate.selector, ChallengeCommittedLate.selector);
        _sameSelector(ITaskMachineErrors.ChallengeWindowClosed.selector, ChallengeWindowClosed.selector);
        _sameSelector(ITaskMachineErrors.ChallengeWindowOpen.selector, ChallengeWindowOpen.selector);
        _sameSelector(ITaskMachineErrors.CommitmentMismatch.selector, CommitmentMismatch.selector);
        _sameSelector(ITaskMachineErrors.DeadlinePassed.selector, DeadlinePassed.selector);
        _sameSelector(ITaskMachineErrors.DisputesPending.selector, DisputesPending.selector);
        _sameSelector(ITaskMachineErrors.InvalidProof.selector, InvalidProof.selector);
        _sameSelector(ITaskMachineErrors.InvalidSlot.selector, InvalidSlot.selector);
        _sameSelector(ITaskMachineErrors.JobHasPendingTask.selector, JobHasPendingTask.selector);
        _sameSelector(ITaskMachineErrors.JobNotCompleted.selector, JobNotCompleted.selector);
        _sameSelector(ITaskMachineErrors.NotDelegated.selector, NotDelegated.selector);
        _sameSelector(ITaskMachineErrors.NotDisputeGame.selector, NotDisputeGame.selector);
        _sameSelector(ITaskMachineErrors.NotSubmitter.selector, NotSubmitter.selector);
        _sameSelector(ITaskMachineErrors.RevealNotOpen.selector, RevealNotOpen.selector);
        _sameSelector(ITaskMachineErrors.SlotNotLate.selector, SlotNotLate.selector);
        _sameSelector(ITaskMachineErrors.StaleEpoch.selector, StaleEpoch.selector);
        _sameSelector(ITaskMachineErrors.UnexpectedOutcome.selector, UnexpectedOutcome.selector);
        _sameSelector(ITaskMachineErrors.WrongTraceLength.selector, WrongTraceLength.selector);
        _sameSelector(ITaskMachineErrors.WrongVerificationMode.selector, WrongVerificationMode.selector);
        _sameSelector(ITaskMachineErrors.NothingToWithdraw.selector, NothingToWithdraw.selector);
        _sameSelector(ITaskMachineErrors.PartnerNotStarved.selector, PartnerNotStarved.selector);
        _sameSelector(ITaskMachineErrors.DeclineTooLate.selector, DeclineTooLate.selector);
        _sameSelector(ITaskMachineErrors.ResultTooEarly.selector, ResultTooEarly.selector);
    }

    function _sameSelector(bytes4 a, bytes4 b) internal pure {
        assertEq(bytes32(a), bytes32(b), "selector drift");
    }
}
