// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {DisputeFixture} from "./base/DisputeFixture.sol";
import {DisputeGame} from "../../contracts/DisputeGame.sol";
import {DisputeLens} from "../../contracts/DisputeLens.sol";
import {IDisputeGame} from "../../contracts/interfaces/IDisputeGame.sol";
import {Merkle} from "../../contracts/lib/Merkle.sol";
import {
    TaskStatus,
    ReplicaStatus,
    DisputePhase,
    DisputeOutcome,
    Verdict,
    Claim,
    PanelRequest,
    ROLE_SOLVER
} from "../../contracts/types/VerityTypes.sol";
import "../../contracts/errors/DisputeGameErrors.sol";
import {
    ChallengeWindowClosed,
    ChallengeCommittedLate,
    UnexpectedTaskStatus,
    DisputesPending
} from "../../contracts/errors/JobRegistryErrors.sol";

/// @notice Optimistic challenges: commit-reveal (P6), concurrent challenges (P1), candidates (P3), co-defenders (P2),
///         stale disputes, snapshots (P8), and token conservation on every settlement path.
contract OptimisticDisputeTest is DisputeFixture {
    uint256 internal constant BOND = 10e18;

    function _finalizeLater() internal {
        vm.warp(block.timestamp + 1_000);
        jobs.finalize(taskId);
    }

    // ---------------------------------------------------------------- the two basic outcomes

    function test_challengeOptimistic_honestChallengerWins_succeeds() public {
        address solver = _optimistic(hC);
        address verifier = _other(solver, address(0), address(0));
        uint256 vBefore = token.balanceOf(verifier);
        uint256 vLocked = registry.getNode(verifier).locked;
        uint256 id = _challenge(verifier, hH);
        assertEq(vBefore - token.balanceOf(verifier), BOND, "bond posted");
        assertEq(registry.getNode(verifier).locked - vLocked, TASK_STAKE, "task stake locked");
        assertEq(views.getTask(taskId).openDisputes, 1, "counted");
        assertEq(uint8(_status(taskId)), uint8(TaskStatus.Revealed), "still a candidate under challenge");
        _toJudgingAt2(id, verifier, solver);
        _recordBalances();
        uint256 reward = _decide(id, Verdict.ForA);
        assertEq(uint8(disputeLens.getDispute(id).outcome), uint8(DisputeOutcome.ChallengerWins), "challenger wins");
        assertEq(reward, TASK_STAKE / 4, "referees");
        assertEq(_paidSince(verifier), BOND + TASK_STAKE / 2, "bond back + winner share");
        assertEq(registry.getNode(solver).stake, NODE_STAKE - TASK_STAKE, "solver slashed");
        assertEq(uint8(_replica(taskId, 0).status), uint8(ReplicaStatus.Slashed), "solver's replica slashed");
        // P3: the challenger's result is the new candidate, its stake held by the registry.
        assertEq(views.getTask(taskId).candidate, verifier, "candidate");
        assertEq(views.getTask(taskId).epoch, 1, "new epoch");
        assertEq(registry.getNode(verifier).locked - vLocked, TASK_STAKE, "stake stays locked as the candidate's");
        assertEq(game.totalBonds(), 0, "no bond held");
        assertTrue(_conserved(), "conserved");
        assertTrue(_gameSolvent(), "solvent");
        _recordBalances();
        _finalizeLater();
        assertEq(uint8(_status(taskId)), uint8(TaskStatus.Accepted), "accepted");
        assertEq(views.getTask(taskId).finalHash, hH[4], "challenger's result");
        assertEq(views.getTask(taskId).resultCid, _cid(hH), "challenger's cid");
        assertEq(_paidSince(verifier), 0, "P10: paid only once the AGGREGATE is accepted");
        uint256 agg = _acceptAggregate(jobId, 0);
        assertEq(_paidBesides(verifier, agg), PAYMENT, "challenger paid for the task");
        assertEq(_paidBesides(solver, agg), 0, "overturned solver unpaid");
    }

    function test_challengeOptimistic_wrongChallengerLosesBond_succeeds() public {
        address solver = _optimistic(hH);
        address verifier = _other(solver, address(0), address(0));
        uint256 id = _challenge(verifier, hC);
        // The honest solver (B) answers; the challenger goes silent.
        game.pinpoint(id, _pp(hC, hH, 2));
        _submitStepRoot(id, solver, sH);
        vm.warp(block.timestamp + game.clockAllowance() + 1);
        _recordBalances();
        game.timeout(id);
        assertEq(uint8(disputeLens.getDispute(id).outcome), uint8(DisputeOutcome.DefenderWins), "defender wins");
        uint256 pot = TASK_STAKE + BOND;
        assertEq(_paidSince(solver), pot / 2, "winner share of stake + bond");
        assertEq(_paidSince(verifier), 0, "bond lost");
        assertEq(registry.getNode(verifier).stake, NODE_STAKE - TASK_STAKE, "challenger stake slashed");
        assertEq(views.getTask(taskId).openDisputes, 0, "no open dispute");
        assertTrue(_conserved(), "conserved");
        assertTrue(_gameSolvent(), "solvent");
        _recordBalances();
        _finalizeLater();
        assertEq(_paidSince(solver), 0, "P10: paid only once the AGGREGATE is accepted");
        uint256 agg = _acceptAggregate(jobId, 0);
        assertEq(_paidBesides(solver, agg), PAYMENT, "solver paid");
        assertEq(_paidBesides(verifier, agg), 0, "wrong challenger unpaid");
    }

    // ---------------------------------------------------------------- P6: commit-reveal

    function test_challengeOptimistic_copiedCalldata_p6_reverts() public {
        address solver = _optimistic(hC);
        address verifier = _other(solver, address(0), address(0));
        address copier = _other(solver, verifier, address(0));
        _commitChallenge(verifier, hH, "salt");
        vm.roll(block.number + 1);
        // The copier sees the reveal in the mempool and sends it first from its own address.
        bytes32 copied = _challengeCommitment(copier, hH, "salt");
        vm.expectRevert(abi.encodeWithSelector(ChallengeNotCommitted.selector, copied));
        _revealChallenge(copier, hH, "salt");
        uint256 id = _revealChallenge(verifier, hH, "salt");
        assertEq(disputeLens.getDispute(id).sides[0].party, verifier, "the committer is party A");
    }

    function test_commitChallenge_copiedCommit_p6_earnsNothing_succeeds() public {
        address solver = _optimistic(hC);
        address verifier = _other(solver, address(0), address(0));
        address copier = _other(solver, verifier, address(0));
        bytes32 c = _challengeCommitment(verifier, hH, "salt");
        _recordBalances();
        // The copier front-runs the commitment itself ...
        vm.prank(copier);
        game.commitChallenge(c);
        (uint64 atBlock,) = game.commitments(c);
        vm.warp(block.timestamp + 5);
        vm.roll(block.number + 1);
        // ... which neither blocks nor delays the victim's own commit ...
        _commitChallenge(verifier, hH, "salt");
        (uint64 stillAt,) = game.commitments(c);
        assertEq(stillAt, atBlock, "first record kept");
        vm.roll(block.number + 1);
        // ... and cannot be revealed by the copier: the commitment binds the verifier's address.
        vm.expectRevert(
            abi.encodeWithSelector(ChallengeNotCommitted.selector, _challengeCommitment(copier, hH, "salt"))
        );
        _revealChallenge(copier, hH, "salt");
        uint256 id = _revealChallenge(verifier, hH, "salt");
        assertEq(disputeLens.getDispute(id).sides[0].party, verifier, "victim challenges");
        assertEq(_paidSince(copier), 0, "copier earns nothing");
        (uint64 used,) = game.commitments(c);
        assertEq(used, 0, "commitment consumed");
    }

    function test_commitChallenge_recordsBlockAndTime_succeeds() public {
        address solver = _optimistic(hC);
        address verifier = _other(solver, address(0), address(0));
        bytes32 c = _challengeCommitment(verifier, hH, "salt");
        vm.expectEmit(true, true, true, true, address(game));
        emit IDisputeGame.ChallengeCommitted(verifier, c);
        vm.prank(verifier);
        game.commitChallenge(c);
        (uint64 atBlock, uint64 atTime) = game.commitments(c);
        assertEq(atBlock, block.number, "block");
        assertEq(atTime, block.timestamp, "time");
    }

    function test_challengeOptimistic_sameBlock_reverts() public {
        address solver = _optimistic(hC);
        address verifier = _other(solver, address(0), address(0));
        _commitChallenge(verifier, hH, "salt");
        vm.expectRevert(
            abi.encodeWithSelector(
                ChallengeCommitTooRecent.selector, _challengeCommitment(verifier, hH, "salt"), uint64(block.number)
            )
        );
        _revealChallenge(verifier, hH, "salt");
    }

    function test_challengeOptimistic_notCommitted_reverts() public {
        address solver = _optimistic(hC);
        address verifier = _other(solver, address(0), address(0));
        vm.expectRevert(
            abi.encodeWithSelector(ChallengeNotCommitted.selector, _challengeCommitment(verifier, hH, "other"))
        );
        _revealChallenge(verifier, hH, "other");
    }

    function test_challengeOptimistic_reusedCommitment_reverts() public {
        address solver = _optimistic(hC);
        address verifier = _other(solver, address(0), address(0));
        _challenge(verifier, hH);
        vm.expectRevert(
            abi.encodeWithSelector(ChallengeNotCommitted.selector, _challengeCommitment(verifier, hH, "salt"))
        );
        _revealChallenge(verifier, hH, "salt");
    }

    function test_challengeOptimistic_committedLate_reverts() public {
        address solver = _optimistic(hC);
        address verifier = _other(solver, address(0), address(0));
        uint64 deadline = views.getTask(taskId).challengeDeadline;
        vm.warp(deadline + 1);
        _commitChallenge(verifier, hH, "salt");
        vm.roll(block.number + 1);
        vm.expectRevert(abi.encodeWithSelector(ChallengeCommittedLate.selector, taskId, deadline + 1, deadline));
        _revealChallenge(verifier, hH, "salt");
    }

    function test_challengeOptimistic_revealedAfterGrace_reverts() public {
        address solver = _optimistic(hC);
        address verifier = _other(solver, address(0), address(0));
        _commitChallenge(verifier, hH, "salt");
        vm.roll(block.number + 1);
        Claim memory claim = jobs.claimOf(taskId);
        uint64 end = claim.challengeDeadline + claim.revealGrace;
        vm.warp(end + 1);
        vm.expectRevert(abi.encodeWithSelector(ChallengeWindowClosed.selector, taskId, end));
        _revealChallenge(verifier, hH, "salt");
    }

    // ---------------------------------------------------------------- other reverts

    function test_challengeOptimistic_notVerifier_reverts() public {
        _optimistic(hC);
        address solverOnly = _newNode(99, ROLE_SOLVER, NODE_STAKE);
        _commitChallenge(solverOnly, hH, "salt");
        vm.roll(block.number + 1);
        vm.expectRevert(abi.encodeWithSelector(NotVerifier.selector, solverOnly));
        _revealChallenge(solverOnly, hH, "salt");
    }

    function test_challengeOptimistic_sameResult_reverts() public {
        address solver = _optimistic(hH);
        address verifier = _other(solver, address(0), address(0));
        _commitChallenge(verifier, hH, "salt");
        vm.roll(block.number + 1);
        vm.expectRevert(abi.encodeWithSelector(NoDisagreement.selector, taskId, hH[4]));
        _revealChallenge(verifier, hH, "salt");
    }

    function test_challengeOptimistic_ownClaim_reverts() public {
        address solver = _optimistic(hC);
        _commitChallenge(solver, hH, "salt");
        vm.roll(block.number + 1);
        vm.expectRevert(abi.encodeWithSelector(ChallengerIsDefender.selector, taskId, solver));
        _revealChallenge(solver, hH, "salt");
    }

    function test_challengeOptimistic_badProof_reverts() public {
        address solver = _optimistic(hC);
        address verifier = _other(solver, address(0), address(0));
        bytes32 root = Merkle.rootOf(hH);
        bytes32 cid = _cid(hH);
        vm.prank(verifier);
        game.commitChallenge(keccak256(abi.encode(taskId, root, hH[4], cid, bytes32("salt"), verifier)));
        vm.roll(block.number + 1);
        bytes32[] memory p0 = Merkle.proofOf(hH, 0);
        bytes32[] memory p4 = Merkle.proofOf(hH, 3);
        vm.prank(verifier);
        vm.expectRevert(abi.encodeWithSelector(InvalidDisputeProof.selector, 0, uint8(0), 4, hH[4]));
        game.challengeOptimistic(taskId, root, hH[4], 4, cid, "salt", p0, p4);
    }

    function test_challengeOptimistic_notRevealed_reverts() public {
        jobId = _post(_params(1, 1, 1));
        taskId = views.taskOf(jobId, 0, 0);
        address verifier = _other(_replica(taskId, 0).node, address(0), address(0));
        _commitChallenge(verifier, hH, "salt");
        vm.roll(block.number + 1);
        vm.expectRevert(abi.encodeWithSelector(UnexpectedTaskStatus.selector, taskId, TaskStatus.Assigned));
        _revealChallenge(verifier, hH, "salt");
    }

    // ---------------------------------------------------------------- P1: concurrent challenges

    /// @dev The cheater's own sybil challenges first and goes silent; the honest verifier's concurrent challenge
    ///      still runs, nothing is accepted meanwhile, and the honest verifier wins (here on the cheater's clock).
    function test_challengeOptimistic_sybilGoesSilent_p1_honestStillWins_succeeds() public {
        address solver = _optimistic(hC);
        address sybil = _other(solver, address(0), address(0));
        address verifier = _other(solver, sybil, address(0));
        uint256 sybilId = _challenge(sybil, hX);
        uint256 id = _challenge(verifier, hH);
        assertEq(views.getTask(taskId).openDisputes, 2, "both challenges count");
        // The cheater answers its sybil; the sybil goes silent.
        _revealLeaf(sybilId, solver, 0, hC, 2);
        // The honest verifier plays on; the cheater stops answering it.
        game.pinpoint(id, _pp(hH, hC, 2));
        _submitStepRoot(id, verifier, sH);
        vm.warp(block.timestamp + game.clockAllowance() + 1);
        game.timeout(sybilId);
        assertEq(uint8(disputeLens.getDispute(sybilId).outcome), uint8(DisputeOutcome.DefenderWins), "sybil lost on time");
        assertEq(views.getTask(taskId).openDisputes, 1, "honest challenge still open");
        // Windows long past: the candidate still cannot be accepted.
        vm.expectRevert(abi.encodeWithSelector(DisputesPending.selector, taskId, uint32(1)));
        jobs.finalize(taskId);
        game.timeout(id);
        assertEq(uint8(disputeLens.getDispute(id).outcome), uint8(DisputeOutcome.ChallengerWins), "honest verifier wins");
        assertEq(views.getTask(taskId).candidate, verifier, "honest candidate");
        assertEq(registry.getNode(solver).stake, NODE_STAKE - TASK_STAKE, "cheater slashed");
        assertEq(registry.getNode(sybil).stake, NODE_STAKE - TASK_STAKE, "sybil slashed");
        assertTrue(_conserved(), "conserved");
        assertTrue(_gameSolvent(), "solvent");
    }

    /// @dev Same attack, but the honest verifier plays its game in time: it wins.
    function test_challengeOptimistic_sybilFirst_p1_honestChallengeWins_succeeds() public {
        address solver = _optimistic(hC);
        address sybil = _other(solver, address(0), address(0));
        address verifier = _other(solver, sybil, address(0));
        uint256 sybilId = _challenge(sybil, hX);
        uint256 id = _challenge(verifier, hH);
        _revealLeaf(sybilId, solver, 0, hC, 2);
        _toJudgingAt2(id, verifier, solver);
        vm.warp(block.timestamp + game.clockAllowance() + 1);
        game.timeout(sybilId);
        assertEq(uint8(disputeLens.getDispute(sybilId).outcome), uint8(DisputeOutcome.DefenderWins), "sybil lost on time");
        assertEq(registry.getNode(sybil).stake, NODE_STAKE - TASK_STAKE, "sybil slashed");
        _decide(id, Verdict.ForA);
        assertEq(uint8(disputeLens.getDispute(id).outcome), uint8(DisputeOutcome.ChallengerWins), "honest verifier wins");
        assertEq(views.getTask(taskId).candidate, verifier, "honest result is the candidate");
        assertEq(registry.getNode(solver).stake, NODE_STAKE - TASK_STAKE, "cheater slashed");
        assertTrue(_conserved(), "conserved");
        assertTrue(_gameSolvent(), "solvent");
        _finalizeLater();
        assertEq(views.getTask(taskId).finalHash, hH[4], "honest result accepted");
    }

    // ---------------------------------------------------------------- P3: a winner is only a candidate

    /// @dev A challenger right at the first divergence but poisoned later beats the cheater; its result is only a
    ///      candidate, which an honest second challenger then disputes and beats. The honest verifier's earlier
    ///      challenge against the cheater went stale and is abandoned with its bond back.
    function test_candidate_poisonedWinner_p3_honestSecondChallengeWins_succeeds() public {
        address solver = _optimistic(hC);
        address poisoned = _other(solver, address(0), address(0));
        address verifier = _other(solver, poisoned, address(0));
        uint256 first = _challenge(poisoned, hP);
        uint256 early = _challenge(verifier, hH);
        // Poisoned vs cheater: they diverge at checkpoint 3, where the poisoned trace is still right.
        game.pinpoint(first, _pp(hP, hC, 2));
        _submitStepRoot(first, poisoned, sH);
        _submitStepRoot(first, solver, sC);
        game.pinpoint(first, _pp(sH, sC, 0));
        _decide(first, Verdict.ForA);
        assertEq(views.getTask(taskId).candidate, poisoned, "poisoned result is only a candidate");
        assertEq(uint8(_status(taskId)), uint8(TaskStatus.Revealed), "fresh window");
        assertEq(views.getTask(taskId).epoch, 1, "epoch 1");

        // The honest challenge against the old claim is stale.
        uint256 vLocked = registry.getNode(verifier).locked;
        vm.prank(verifier);
        vm.expectRevert(abi.encodeWithSelector(StaleDispute.selector, early, uint32(0), uint32(1)));
        game.pinpoint(early, _pp(hH, hC, 2));
        vm.expectEmit(true, true, true, true, address(game));
        emit IDisputeGame.DisputeAbandoned(early, taskId, 0);
        _recordBalances();
        game.abandon(early);
        assertEq(uint8(disputeLens.getDispute(early).outcome), uint8(DisputeOutcome.Voided), "voided");
        assertEq(_paidSince(verifier), BOND, "bond back");
        assertEq(vLocked - registry.getNode(verifier).locked, TASK_STAKE, "stake released");
        assertEq(registry.getNode(verifier).stake, NODE_STAKE, "not slashed");

        // The honest verifier challenges the candidate: they diverge at checkpoint 4.
        uint256 second = _challenge(verifier, hH);
        assertEq(disputeLens.getDispute(second).sides[1].party, poisoned, "candidate defends");
        assertEq(disputeLens.getDispute(second).epoch, 1, "against epoch 1");
        bytes32[] memory s3H = _steps(hH[3], keccak256("honest step 7"), hH[4]);
        bytes32[] memory s3P = _steps(hH[3], keccak256("poisoned step 7"), hP[4]);
        game.pinpoint(second, _pp(hH, hP, 3));
        _submitStepRoot(second, verifier, s3H);
        _submitStepRoot(second, poisoned, s3P);
        game.pinpoint(second, _pp(s3H, s3P, 0));
        assertEq(disputeLens.disputedStep(second), 6, "global step 3*2 + 0");
        _decide(second, Verdict.ForA);
        assertEq(views.getTask(taskId).candidate, verifier, "honest candidate");
        assertEq(registry.getNode(poisoned).stake, NODE_STAKE - TASK_STAKE, "poisoned candidate slashed");
        assertTrue(_conserved(), "conserved");
        assertTrue(_gameSolvent(), "solvent");
        _recordBalances();
        _finalizeLater();
        assertEq(views.getTask(taskId).finalHash, hH[4], "honest result accepted");
        assertEq(_paidSince(verifier), 0, "P10: paid only once the AGGREGATE is accepted");
        uint256 agg = _acceptAggregate(jobId, 0);
        assertEq(_paidBesides(verifier, agg), PAYMENT, "honest verifier paid");
        assertEq(_paidBesides(poisoned, agg), 0, "overturned candidate unpaid");
    }

    // ---------------------------------------------------------------- P2: co-defender

    /// @dev Two colluding replicas agree on a wrong trace: the co-defender moves for B. Fate follows claims: B's step
    ///      root is the co-defender's claim, so the step-level loss slashes it alone (tests/forge/CoDefender.t.sol).
    function test_coDefender_movesForDefender_p2_submitterSlashed_succeeds() public {
        jobId = _post(_params(1, 1, 2));
        taskId = views.taskOf(jobId, 0, 0);
        address defender = _replica(taskId, 0).node;
        address co = _replica(taskId, 1).node;
        _runReplicated(taskId, hC, hC);
        assertEq(uint8(_status(taskId)), uint8(TaskStatus.Revealed), "agreement still waits out a window");
        address verifier = _other(defender, co, address(0));
        uint256 id = _challenge(verifier, hH);
        assertEq(disputeLens.getDispute(id).coDefender, co, "co-defender stored");
        game.pinpoint(id, _pp(hH, hC, 2));
        _submitStepRoot(id, co, sC);
        bytes32 root = Merkle.rootOf(sC);
        bytes32[] memory p0 = Merkle.proofOf(sC, 0);
        bytes32[] memory p2 = Merkle.proofOf(sC, 2);
        vm.prank(defender);
        vm.expectRevert(abi.encodeWithSelector(AlreadyMoved.selector, id, defender));
        game.submitStepRoot(id, root, p0, p2);
        _submitStepRoot(id, verifier, sH);
        game.pinpoint(id, _pp(sH, sC, 0));
        PanelRequest memory r = mock.requestOf(id);
        assertEq(r.parties[2], co, "co-defender kept off the panel");
        _recordBalances();
        uint256 reward = _decide(id, Verdict.ForA);
        uint256 pot = TASK_STAKE;
        assertEq(reward, pot / 4, "referees' share of the submitter's stake");
        assertEq(_paidSince(verifier), BOND + pot / 2, "winner share of the submitter's stake");
        assertEq(registry.getNode(defender).stake, NODE_STAKE, "defender made no step-level claim: not slashed");
        assertEq(registry.getNode(co).stake, NODE_STAKE - TASK_STAKE, "co-defender (step root) slashed");
        assertEq(lens.reputationOf(co).disputesLost, 1, "co-defender lost++");
        assertTrue(_conserved(), "conserved");
        assertTrue(_gameSolvent(), "solvent");
    }

    /// @dev Two honest replicas: either may answer (one honest replica suffices); the member that moved earns the
    ///      winner's share.
    function test_coDefender_answersAlone_p2_defendersWin_succeeds() public {
        jobId = _post(_params(1, 1, 2));
        taskId = views.taskOf(jobId, 0, 0);
        address defender = _replica(taskId, 0).node;
        address co = _replica(taskId, 1).node;
        _runReplicated(taskId, hH, hH);
        address verifier = _other(defender, co, address(0));
        uint256 id = _challenge(verifier, hC);
        _revealLeaf(id, co, 0, hH, 2);
        vm.warp(block.timestamp + game.clockAllowance() + 1);
        _recordBalances();
        game.timeout(id);
        assertEq(uint8(disputeLens.getDispute(id).outcome), uint8(DisputeOutcome.DefenderWins), "defenders win");
        uint256 toWinner = (TASK_STAKE + BOND) / 2;
        assertEq(_paidSince(co), toWinner, "the member that moved");
        assertEq(_paidSince(defender), 0, "the idle member");
        assertEq(registry.getNode(verifier).stake, NODE_STAKE - TASK_STAKE, "wrong challenger slashed");
        assertTrue(_conserved(), "conserved");
        _recordBalances();
        _finalizeLater();
        assertEq(_paidSince(defender) + _paidSince(co), 0, "P10: paid only once the AGGREGATE is accepted");
        uint256 agg = _acceptAggregate(jobId, 0);
        assertEq(_paidBesides(defender, agg), PAYMENT, "defender paid");
        assertEq(_paidBesides(co, agg), PAYMENT, "co-defender paid");
    }

    // ---------------------------------------------------------------- stale disputes

    function test_abandon_staleDispute_releasesChallengerWithBond_succeeds() public {
        address solver = _optimistic(hC);
        address v1 = _other(solver, address(0), address(0));
        address v2 = _other(solver, v1, address(0));
        uint256 id1 = _challenge(v1, hH);
        uint256 id2 = _challenge(v2, hH);
        uint256 locked2 = registry.getNode(v2).locked;
        _revealLeaf(id1, v1, 0, hH, 2);
        _revealLeaf(id2, v2, 0, hH, 2);
        vm.warp(block.timestamp + game.clockAllowance() + 1);
        game.timeout(id1); // the silent cheater loses to v1: new candidate, id2 is stale
        assertEq(views.getTask(taskId).candidate, v1, "v1 candidate");
        vm.expectRevert(abi.encodeWithSelector(StaleDispute.selector, id2, uint32(0), uint32(1)));
        game.timeout(id2);
        uint256 burned = token.totalBurned();
        _recordBalances();
        game.abandon(id2);
        assertEq(token.totalBurned(), burned, "nothing burned");
        assertEq(_paidSince(v2), BOND, "bond back");
        assertEq(locked2 - registry.getNode(v2).locked, TASK_STAKE, "stake released");
        assertEq(registry.getNode(v2).stake, NODE_STAKE, "nobody slashed");
        assertEq(uint8(disputeLens.getDispute(id2).phase), uint8(DisputePhase.Resolved), "resolved");
        assertFalse(mock.cancelled(id2), "no panel to cancel");
        vm.expectRevert(abi.encodeWithSelector(WrongPhase.selector, id2, DisputePhase.Resolved));
        game.abandon(id2);
        assertTrue(_conserved(), "conserved");
        assertTrue(_gameSolvent(), "solvent");
    }

    function test_abandon_staleWhileJudging_cancelsPanel_succeeds() public {
        address solver = _optimistic(hC);
        address v1 = _other(solver, address(0), address(0));
        address v2 = _other(solver, v1, address(0));
        uint256 id1 = _challenge(v1, hH);
        uint256 id2 = _challenge(v2, hH);
        _toJudgingAt2(id2, v2, solver);
        _revealLeaf(id1, v1, 0, hH, 2);
        vm.warp(block.timestamp + game.clockAllowance() + 1);
        game.timeout(id1);
        _recordBalances();
        game.abandon(id2);
        assertTrue(mock.cancelled(id2), "panel cancelled");
        assertEq(_paidSince(v2), BOND, "bond back");
        assertTrue(_conserved(), "conserved");
    }

    // ---------------------------------------------------------------- P8: snapshots

    function test_setChallengerBond_midDispute_p8_snapshotHolds_succeeds() public {
        address solver = _optimistic(hC);
        address verifier = _other(solver, address(0), address(0));
        uint256 id = _challenge(verifier, hH);
        game.setChallengerBond(50e18);
        game.setShares(1_000, 9_000);
        game.setClockAllowance(30);
        _toJudgingAt2(id, verifier, solver);
        _recordBalances();
        uint256 reward = _decide(id, Verdict.ForA);
        assertEq(disputeLens.getDispute(id).bond, BOND, "bond snapshot");
        assertEq(_paidSince(verifier), BOND + TASK_STAKE / 2, "old bond back + old winner share");
        assertEq(reward, TASK_STAKE / 4, "old referee share");
        assertTrue(_conserved(), "conserved");
    }

    // ---------------------------------------------------------------- conservation

    /// @dev Every verdict, with or without a co-defender, any shares and bond: conservation and exact accounting.
    function testFuzz_optimistic_tokensConserved_succeeds(uint8 v, bool withCo, uint16 wBps, uint16 rBps, uint64 bond)
        public
    {
        uint256 w = bound(wBps, 0, 10_000);
        uint256 r = bound(rBps, 0, 10_000 - w);
        uint256 b = bound(bond, 1e18, 100e18); // the bond's on-chain range
        game.setShares(w, r);
        game.setChallengerBond(b);
        Verdict verdict = Verdict(bound(v, 1, 4));
        address defender;
        address co;
        if (withCo) {
            jobId = _post(_params(1, 1, 2));
            taskId = views.taskOf(jobId, 0, 0);
            defender = _replica(taskId, 0).node;
            co = _replica(taskId, 1).node;
            _runReplicated(taskId, hC, hC);
        } else {
            defender = _optimistic(hC);
        }
        address verifier = _other(defender, co, address(0));
        uint256 id = _challenge(verifier, hH);
        _toJudgingAt2(id, verifier, defender);
        uint256 burned = token.totalBurned();
        _recordBalances();
        uint256 reward = _decide(id, verdict);
        uint256 stakes = TASK_STAKE; // with a co-defender, only B's step-root submitter (the defender) answers
        uint256 pot = verdict == Verdict.ForA
            ? stakes
            : verdict == Verdict.ForB ? TASK_STAKE + b : verdict == Verdict.Neither ? stakes + TASK_STAKE + b : 0;
        uint256 toWinner = verdict == Verdict.ForA || verdict == Verdict.ForB ? (pot * w) / 10_000 : 0;
        // issue 23 (item 4): a challenger that did not lose pays its panel the fee beyond the referees' share
        uint256 share = (pot * r) / 10_000;
        assertEq(reward, share + _topUp(verdict, share), "referees");
        assertEq(token.totalBurned() - burned, pot - toWinner - share, "burn");
        toWinner += verdict == Verdict.ForA || verdict == Verdict.NoDecision ? b - _topUp(verdict, share) : 0;
        assertEq(
            _paidSince(verifier) + _paidSince(defender) + (co == address(0) ? 0 : _paidSince(co)),
            toWinner,
            "credits"
        );
        assertTrue(_gameSolvent(), "solvent");
        assertTrue(_conserved(), "conserved");
    }
}
