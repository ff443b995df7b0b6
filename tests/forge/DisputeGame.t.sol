// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {DisputeFixture} from "./base/DisputeFixture.sol";
import {Fixture} from "./base/Fixture.sol";
import {DisputeGame} from "../../contracts/DisputeGame.sol";
import {DisputeLens} from "../../contracts/DisputeLens.sol";
import {IDisputeGame} from "../../contracts/interfaces/IDisputeGame.sol";
import {Merkle} from "../../contracts/lib/Merkle.sol";
import {
    TaskStatus,
    ReplicaStatus,
    DisputePhase,
    DisputeOutcome,
    PinpointProof,
    PanelRequest,
    PostJobParams,
    PanelPhase,
    Verdict
} from "../../contracts/types/VerityTypes.sol";
import {ParameterOutOfRange} from "../../contracts/errors/CommonErrors.sol";
import "../../contracts/errors/DisputeGameErrors.sol";

/// @notice Replicated contests: bisection, clocks (P8), the panel hand-off and every verdict's settlement.
contract DisputeGameTest is DisputeFixture {
    // ---------------------------------------------------------------- bisection and panel hand-off

    function test_openDispute_emitsAndRequestsMid_succeeds() public {
        _contested();
        vm.expectEmit(true, true, true, true, address(game));
        emit IDisputeGame.DisputeOpened(1, taskId, cheater, honest);
        vm.prank(cheater);
        uint256 id = game.openDispute(taskId);
        DisputeLens.Dispute memory d = disputeLens.getDispute(id);
        assertEq(d.mid, 2, "mid of [0,4]");
        assertEq(uint8(d.phase), uint8(DisputePhase.Bisect0), "bisect");
        assertEq(game.disputeOfTask(taskId), id, "open contest");
        assertEq(d.epoch, views.getTask(taskId).epoch, "epoch snapshot");
        assertEq(d.coDefender, address(0), "no co-defender in a contest");
    }

    function test_bisection_bothLevels_opensPanel_succeeds() public {
        _contested();
        vm.prank(honest);
        uint256 id = game.openDispute(taskId);
        // level 0: [0,4] mid 2 agree -> [2,4] mid 3 differ -> [2,3]
        _revealLeaf(id, honest, 0, hH, 2);
        _revealLeaf(id, cheater, 0, hC, 2);
        assertEq(disputeLens.getDispute(id).mid, 3, "mid 3");
        _revealLeaf(id, cheater, 0, hC, 3);
        _revealLeaf(id, honest, 0, hH, 3);
        DisputeLens.Dispute memory d = disputeLens.getDispute(id);
        assertEq(uint8(d.phase), uint8(DisputePhase.StepRoots), "step roots");
        assertEq(d.segment, 2, "segment 2");
        _submitStepRoot(id, cheater, sC);
        _submitStepRoot(id, honest, sH);
        // level 1: [0,2] mid 1 differs -> [0,1]
        assertFalse(mock.opened(id), "no panel yet");
        _revealLeaf(id, honest, 1, sH, 1);
        _revealLeaf(id, cheater, 1, sC, 1);
        d = disputeLens.getDispute(id);
        assertEq(uint8(d.phase), uint8(DisputePhase.Judging), "judging");
        assertEq(disputeLens.disputedStep(id), 4, "global step = 2*2 + 0");
        assertTrue(mock.opened(id), "panel opened");
        PanelRequest memory r = mock.requestOf(id);
        assertEq(r.claimA, sH[1], "claim A");
        assertEq(r.claimB, sC[1], "claim B");
        assertEq(r.parties[0], honest, "A excluded");
        assertEq(r.parties[1], cheater, "B excluded");
        assertEq(r.parties[2], address(0), "no co-defender");
        assertEq(r.minMemoryMb, 1_000, "memory from the job");
        assertEq(r.profileBit, 1, "profile from the job");
        assertEq(r.workWindow, jobs.defaultExecutionWindow(), "referees get the task's execution window (issue 25)");
        (uint256 a, uint256 b) = disputeLens.clocksRemaining(id);
        vm.warp(block.timestamp + 1_000);
        (uint256 a2, uint256 b2) = disputeLens.clocksRemaining(id);
        assertEq(a, a2, "clock A stopped while judging");
        assertEq(b, b2, "clock B stopped while judging");
    }

    /// @dev Equal finals over different roots: every requested leaf may agree; only a pinpoint can go on.
    function test_bisection_equalFinals_waitsForPinpoint_succeeds() public {
        bytes32[] memory hE = _honest(INPUT, 4);
        hE[1] = keccak256("hidden divergence");
        jobId = _post(_params(1, 1, 2));
        taskId = views.taskOf(jobId, 0, 0);
        honest = _replica(taskId, 0).node;
        cheater = _replica(taskId, 1).node;
        _runReplicated(taskId, hH, hE);
        assertEq(uint8(_status(taskId)), uint8(TaskStatus.Contested), "contested");
        vm.prank(honest);
        uint256 id = game.openDispute(taskId);
        _revealLeaf(id, honest, 0, hH, 2);
        _revealLeaf(id, cheater, 0, hE, 2);
        _revealLeaf(id, honest, 0, hH, 3);
        _revealLeaf(id, cheater, 0, hE, 3);
        DisputeLens.Dispute memory d = disputeLens.getDispute(id);
        assertEq(d.mid, 0, "nothing requested");
        assertEq(uint8(d.phase), uint8(DisputePhase.Bisect0), "still bisecting");
        bytes32[] memory proof = Merkle.proofOf(hH, 3);
        vm.prank(honest);
        vm.expectRevert(abi.encodeWithSelector(NotRequestedIndex.selector, id, uint8(0), uint32(0), uint32(3)));
        game.revealLeaf(id, 0, 3, hH[3], proof);
        game.pinpoint(id, _pp(hH, hE, 0));
        assertEq(uint8(disputeLens.getDispute(id).phase), uint8(DisputePhase.StepRoots), "pinpointed segment 0");
        assertEq(disputeLens.getDispute(id).segment, 0, "segment 0");
    }

    /// @dev Issue 23 (cheaper disputes): opening with the pinpoint stores no level-0 root (level 0 ends in that
    ///      transaction); the lens shows each party's root from its replica, and a wrong proof still fails against it.
    function test_openDisputeWithPinpoint_rootsFromReplicas_succeeds() public {
        _contested();
        PinpointProof memory bad = _pp(hH, hC, 2);
        bad.proofClaimB = Merkle.proofOf(hH, 3); // proves A's leaf, not B's, against B's root
        vm.prank(honest);
        vm.expectRevert();
        game.openDisputeWithPinpoint(taskId, bad);
        vm.prank(honest);
        uint256 id = game.openDisputeWithPinpoint(taskId, _pp(hH, hC, 2));
        DisputeLens.Dispute memory d = disputeLens.getDispute(id);
        assertEq(d.sides[0].root, Merkle.rootOf(hH), "A's root, from its replica");
        assertEq(d.sides[1].root, Merkle.rootOf(hC), "B's root, from its replica");
        assertEq(uint8(d.phase), uint8(DisputePhase.StepRoots), "level 0 done");
    }

    // ---------------------------------------------------------------- verdicts

    function test_onVerdict_forA_challengerWins_succeeds() public {
        uint256 id = _toJudging();
        uint256 lockedHonest = registry.getNode(honest).locked;
        uint256 burned = token.totalBurned();
        _recordBalances();
        uint256 reward = _decide(id, Verdict.ForA);

        DisputeLens.Dispute memory d = disputeLens.getDispute(id);
        assertEq(uint8(d.outcome), uint8(DisputeOutcome.ChallengerWins), "honest (A) wins");
        assertEq(uint8(d.phase), uint8(DisputePhase.Resolved), "resolved");
        assertEq(reward, TASK_STAKE / 4, "referees' share to the panel");
        assertEq(_paidSince(honest), TASK_STAKE / 2, "winner share paid at once");
        assertEq(token.totalBurned() - burned, TASK_STAKE / 4, "rest burned");
        assertEq(registry.getNode(cheater).stake, NODE_STAKE - TASK_STAKE, "loser slashed its task stake");
        assertEq(registry.getNode(honest).locked, lockedHonest, "winner replica stays locked");
        assertEq(uint8(_replica(taskId, 1).status), uint8(ReplicaStatus.Slashed), "cheater slashed");
        assertEq(lens.reputationOf(cheater).disputesLost, 1, "lost++");
        assertEq(lens.reputationOf(honest).disputesWon, 1, "won++");
        // P3: the winner's result is only a candidate with a fresh window.
        assertEq(uint8(_status(taskId)), uint8(TaskStatus.Revealed), "candidate, not accepted");
        assertEq(views.getTask(taskId).epoch, d.epoch + 1, "new epoch");
        assertEq(game.disputeOfTask(taskId), 0, "contest closed");
        assertTrue(_conserved(), "conserved");
        assertTrue(_gameSolvent(), "game solvent");

        vm.warp(block.timestamp + 1_000);
        _recordBalances();
        jobs.finalize(taskId);
        assertEq(uint8(_status(taskId)), uint8(TaskStatus.Accepted), "accepted after the window");
        assertEq(_paidSince(honest), 0, "P10: paid only once the AGGREGATE is accepted");
        assertEq(uint8(_replica(taskId, 0).status), uint8(ReplicaStatus.Accepted), "winner released on acceptance");
        uint256 agg = _acceptAggregate(jobId, 0);
        assertEq(_paidBesides(honest, agg), PAYMENT, "winner paid for the task");
        assertEq(_paidBesides(cheater, agg), 0, "loser unpaid");
        assertTrue(_conserved(), "conserved after acceptance");
    }

    function test_onVerdict_forB_defenderWins_succeeds() public {
        uint256 id = _toJudging();
        _recordBalances();
        uint256 reward = _decide(id, Verdict.ForB);
        assertEq(uint8(disputeLens.getDispute(id).outcome), uint8(DisputeOutcome.DefenderWins), "B wins");
        assertEq(reward, TASK_STAKE / 4, "referees");
        assertEq(_paidSince(cheater), TASK_STAKE / 2, "B paid");
        assertEq(registry.getNode(honest).stake, NODE_STAKE - TASK_STAKE, "A slashed");
        assertEq(uint8(_replica(taskId, 0).status), uint8(ReplicaStatus.Slashed), "A's replica slashed");
        assertTrue(_conserved(), "conserved");
        assertTrue(_gameSolvent(), "game solvent");
    }

    function test_onVerdict_neither_bothLose_succeeds() public {
        uint256 id = _toJudging();
        uint256 burned = token.totalBurned();
        _recordBalances();
        uint256 reward = _decide(id, Verdict.Neither);
        assertEq(uint8(disputeLens.getDispute(id).outcome), uint8(DisputeOutcome.BothLose), "both lose");
        assertEq(reward, (2 * TASK_STAKE) / 4, "referees' share of both stakes");
        assertEq(token.totalBurned() - burned, 2 * TASK_STAKE - reward, "no winner: the rest burned");
        assertEq(_paidSince(honest) + _paidSince(cheater), 0, "nobody paid");
        assertEq(registry.getNode(honest).stake, NODE_STAKE - TASK_STAKE, "A slashed");
        assertEq(registry.getNode(cheater).stake, NODE_STAKE - TASK_STAKE, "B slashed");
        assertTrue(_status(taskId) == TaskStatus.Assigned || _status(taskId) == TaskStatus.Open, "redrawn");
        assertTrue(_conserved(), "conserved");
        assertTrue(_gameSolvent(), "game solvent");
    }

    function test_onVerdict_noDecision_voided_succeeds() public {
        uint256 id = _toJudging();
        uint256 lockedHonest = registry.getNode(honest).locked;
        uint256 lockedCheater = registry.getNode(cheater).locked;
        uint256 burned = token.totalBurned();
        uint256 reward = _decide(id, Verdict.NoDecision);
        assertEq(uint8(disputeLens.getDispute(id).outcome), uint8(DisputeOutcome.Voided), "voided");
        assertEq(reward, 0, "no referee reward");
        assertEq(token.totalBurned(), burned, "nothing burned");
        assertEq(registry.getNode(honest).stake, NODE_STAKE, "A not slashed");
        assertEq(registry.getNode(cheater).stake, NODE_STAKE, "B not slashed");
        assertEq(registry.getNode(honest).locked, lockedHonest - TASK_STAKE, "A released (by the registry)");
        assertEq(registry.getNode(cheater).locked, lockedCheater - TASK_STAKE, "B released (by the registry)");
        assertTrue(_conserved(), "conserved");
    }

    function test_onVerdict_notPanel_reverts() public {
        uint256 id = _toJudging();
        vm.expectRevert(abi.encodeWithSelector(NotPanel.selector, address(this)));
        game.onVerdict(id, Verdict.ForA);
    }

    function test_onVerdict_notJudging_reverts() public {
        _contested();
        uint256 id = game.openDispute(taskId);
        vm.expectRevert(abi.encodeWithSelector(WrongPhase.selector, id, DisputePhase.Bisect0));
        _decide(id, Verdict.ForA);
    }

    function test_onVerdict_none_reverts() public {
        uint256 id = _toJudging();
        vm.expectRevert(abi.encodeWithSelector(InvalidVerdict.selector, id, Verdict.None));
        _decide(id, Verdict.None);
    }

    function test_onVerdict_twice_reverts() public {
        uint256 id = _toJudging();
        _decide(id, Verdict.ForA);
        vm.expectRevert(abi.encodeWithSelector(WrongPhase.selector, id, DisputePhase.Resolved));
        _decide(id, Verdict.ForA);
    }

    // ---------------------------------------------------------------- clocks (P8)

    function test_timeout_silentPartyLoses_succeeds() public {
        _contested();
        vm.prank(honest);
        uint256 id = game.openDispute(taskId);
        _revealLeaf(id, honest, 0, hH, 2);
        vm.expectRevert(abi.encodeWithSelector(ClockNotExpired.selector, id));
        game.timeout(id);
        vm.warp(block.timestamp + game.clockAllowance() + 1);
        uint256 burned = token.totalBurned();
        _recordBalances();
        game.timeout(id);
        assertEq(uint8(disputeLens.getDispute(id).outcome), uint8(DisputeOutcome.ChallengerWins), "silent cheater loses");
        assertEq(_paidSince(honest), TASK_STAKE / 2, "winner share");
        assertEq(token.totalBurned() - burned, TASK_STAKE / 2, "no panel: its share is burned too");
        assertEq(mock.opens(), 0, "no panel involved");
        assertTrue(_conserved(), "conserved");
    }

    function test_timeout_bothSilent_bothLose_succeeds() public {
        _contested();
        uint256 id = game.openDispute(taskId);
        vm.warp(block.timestamp + game.clockAllowance() + 1);
        _heartbeatAll();
        game.timeout(id);
        assertEq(uint8(disputeLens.getDispute(id).outcome), uint8(DisputeOutcome.BothLose), "both lose");
        assertEq(registry.getNode(honest).stake, NODE_STAKE - TASK_STAKE, "A slashed");
        assertEq(registry.getNode(cheater).stake, NODE_STAKE - TASK_STAKE, "B slashed");
        assertTrue(_conserved(), "conserved");
        assertTrue(_gameSolvent(), "game solvent");
    }

    function test_revealLeaf_ownClockExpired_p8_reverts() public {
        _contested();
        vm.prank(honest);
        uint256 id = game.openDispute(taskId);
        _revealLeaf(id, honest, 0, hH, 2);
        vm.warp(block.timestamp + game.clockAllowance() + 1);
        bytes32[] memory proof = Merkle.proofOf(hC, 2);
        vm.prank(cheater);
        vm.expectRevert(abi.encodeWithSelector(ClockExpired.selector, id, uint8(1)));
        game.revealLeaf(id, 0, 2, hC[2], proof);
        game.timeout(id);
        assertEq(uint8(disputeLens.getDispute(id).outcome), uint8(DisputeOutcome.ChallengerWins), "late party lost");
    }

    function test_submitStepRoot_ownClockExpired_p8_reverts() public {
        _contested();
        vm.prank(honest);
        uint256 id = game.openDisputeWithPinpoint(taskId, _pp(hH, hC, 2));
        _submitStepRoot(id, honest, sH);
        vm.warp(block.timestamp + game.clockAllowance() + 1);
        bytes32 root = Merkle.rootOf(sC);
        bytes32[] memory p0 = Merkle.proofOf(sC, 0);
        bytes32[] memory p2 = Merkle.proofOf(sC, 2);
        vm.prank(cheater);
        vm.expectRevert(abi.encodeWithSelector(ClockExpired.selector, id, uint8(1)));
        game.submitStepRoot(id, root, p0, p2);
    }

    function test_pinpoint_clockExpired_p8_reverts() public {
        _contested();
        uint256 id = game.openDispute(taskId);
        vm.warp(block.timestamp + game.clockAllowance() + 1);
        PinpointProof memory p = _pp(hH, hC, 2);
        vm.expectRevert(abi.encodeWithSelector(ClockExpired.selector, id, uint8(0)));
        game.pinpoint(id, p);
    }

    /// @dev P8: owner changes after the dispute opened change nothing about it.
    function test_setParameters_midDispute_p8_snapshotHolds_succeeds() public {
        _contested();
        vm.prank(honest);
        uint256 id = game.openDispute(taskId);
        uint64 allowance = game.clockAllowance();
        game.setClockAllowance(7 days);
        game.setShares(9_000, 1_000);
        _revealLeaf(id, honest, 0, hH, 2);
        vm.warp(block.timestamp + allowance + 1);
        _recordBalances();
        game.timeout(id); // still the old allowance
        assertEq(_paidSince(honest), (TASK_STAKE * 5_000) / 10_000, "old winner share");
        DisputeLens.Dispute memory d = disputeLens.getDispute(id);
        assertEq(d.allowance, allowance, "allowance snapshot");
        assertEq(d.winnerShareBps, 5_000, "share snapshot");
        // A dispute opened now gets the new rules.
        game.setClockAllowance(30);
        assertEq(game.clockAllowance(), 30, "new allowance");
    }

    function test_clocksRemaining_onlyAwaitedRuns_succeeds() public {
        _contested();
        vm.prank(honest);
        uint256 id = game.openDispute(taskId);
        _revealLeaf(id, honest, 0, hH, 2);
        vm.warp(block.timestamp + 50);
        (uint256 a, uint256 b) = disputeLens.clocksRemaining(id);
        assertEq(a, game.clockAllowance(), "A moved at once: its clock stopped");
        assertEq(b, game.clockAllowance() - 50, "B's clock runs");
    }

    // ---------------------------------------------------------------- reverts

    function test_openDispute_notContested_reverts() public {
        jobId = _post(_params(1, 1, 2));
        uint256 t = views.taskOf(jobId, 0, 0);
        vm.expectRevert(abi.encodeWithSelector(TaskNotDisputable.selector, t, TaskStatus.Assigned));
        game.openDispute(t);
    }

    function test_openDispute_twice_reverts() public {
        _contested();
        uint256 id = game.openDispute(taskId);
        vm.expectRevert(abi.encodeWithSelector(DisputeAlreadyOpen.selector, taskId, id));
        game.openDispute(taskId);
    }

    function test_pinpoint_notDivergence_reverts() public {
        _contested();
        uint256 id = game.openDispute(taskId);
        vm.expectRevert(abi.encodeWithSelector(NotADivergence.selector, id, uint32(0)));
        game.pinpoint(id, _pp(hH, hC, 0));
    }

    function test_pinpoint_badProof_reverts() public {
        _contested();
        uint256 id = game.openDispute(taskId);
        PinpointProof memory p = _pp(hH, hC, 2);
        p.agreed = keccak256("forged");
        vm.expectRevert(abi.encodeWithSelector(InvalidDisputeProof.selector, id, uint8(0), 2, p.agreed));
        game.pinpoint(id, p);
    }

    function test_pinpoint_outOfRange_reverts() public {
        _contested();
        uint256 id = game.openDispute(taskId);
        PinpointProof memory p = _pp(hH, hC, 2);
        p.index = 4;
        vm.expectRevert(abi.encodeWithSelector(IndexOutOfRange.selector, id, 4, 3));
        game.pinpoint(id, p);
    }

    function test_revealLeaf_wrongIndex_reverts() public {
        _contested();
        uint256 id = game.openDispute(taskId);
        bytes32[] memory proof = Merkle.proofOf(hH, 1);
        vm.prank(honest);
        vm.expectRevert(abi.encodeWithSelector(NotRequestedIndex.selector, id, uint8(0), uint32(2), uint32(1)));
        game.revealLeaf(id, 0, 1, hH[1], proof);
    }

    function test_revealLeaf_notParty_reverts() public {
        _contested();
        uint256 id = game.openDispute(taskId);
        bytes32[] memory proof = Merkle.proofOf(hH, 2);
        vm.expectRevert(abi.encodeWithSelector(NotParty.selector, id, address(this)));
        game.revealLeaf(id, 0, 2, hH[2], proof);
    }

    function test_revealLeaf_twice_reverts() public {
        _contested();
        uint256 id = game.openDispute(taskId);
        _revealLeaf(id, honest, 0, hH, 2);
        bytes32[] memory proof = Merkle.proofOf(hH, 2);
        vm.prank(honest);
        vm.expectRevert(abi.encodeWithSelector(AlreadyMoved.selector, id, honest));
        game.revealLeaf(id, 0, 2, hH[2], proof);
    }

    function test_revealLeaf_badProof_reverts() public {
        _contested();
        uint256 id = game.openDispute(taskId);
        bytes32[] memory proof = Merkle.proofOf(hH, 2);
        vm.prank(cheater);
        vm.expectRevert(abi.encodeWithSelector(InvalidDisputeProof.selector, id, uint8(0), 2, hH[1]));
        game.revealLeaf(id, 0, 2, hH[1], proof);
    }

    function test_submitStepRoot_wrongPhase_reverts() public {
        _contested();
        uint256 id = game.openDispute(taskId);
        vm.expectRevert(abi.encodeWithSelector(WrongPhase.selector, id, DisputePhase.Bisect0));
        _submitStepRoot(id, honest, sH);
    }

    function test_submitStepRoot_wrongEndpoint_reverts() public {
        _contested();
        vm.prank(honest);
        uint256 id = game.openDisputeWithPinpoint(taskId, _pp(hH, hC, 2));
        // The cheater's step trace must end at the cheater's own checkpoint claim.
        vm.expectRevert(abi.encodeWithSelector(InvalidDisputeProof.selector, id, uint8(1), 2, hC[3]));
        _submitStepRoot(id, cheater, sH);
    }

    function test_timeout_wrongPhase_reverts() public {
        uint256 id = _toJudging();
        vm.expectRevert(abi.encodeWithSelector(WrongPhase.selector, id, DisputePhase.Judging));
        game.timeout(id);
    }

    function test_abandon_notStale_reverts() public {
        _contested();
        uint256 id = game.openDispute(taskId);
        vm.expectRevert(abi.encodeWithSelector(DisputeNotStale.selector, id, disputeLens.getDispute(id).epoch));
        game.abandon(id);
    }

    function test_setParameters_succeedsAndReverts() public {
        game.setClockAllowance(60);
        game.setChallengerBond(1e18);
        game.setShares(6_000, 3_000);
        assertEq(game.clockAllowance(), 60, "allowance");
        assertEq(game.challengerBond(), 1e18, "bond");
        assertEq(game.winnerShareBps(), 6_000, "winner");
        assertEq(game.refereeShareBps(), 3_000, "referees");
        vm.expectRevert(abi.encodeWithSelector(ParameterOutOfRange.selector, bytes32("shares"), 11_000, 0, 10_000));
        game.setShares(6_000, 5_000);
        vm.expectRevert(abi.encodeWithSelector(ParameterOutOfRange.selector, bytes32("clockAllowance"), 0, 30, 7 days));
        game.setClockAllowance(0);
        // issue 23: v2 took 1 s, in which no party can land a move (the timeout decided every dispute)
        vm.expectRevert(abi.encodeWithSelector(ParameterOutOfRange.selector, bytes32("clockAllowance"), 29, 30, 7 days));
        game.setClockAllowance(29);
        vm.expectRevert(
            abi.encodeWithSelector(ParameterOutOfRange.selector, bytes32("clockAllowance"), 7 days + 1, 30, 7 days)
        );
        game.setClockAllowance(7 days + 1);
        game.setClockAllowance(30);
        game.setClockAllowance(7 days);
        uint256[3] memory badBonds = [uint256(0), 1e18 - 1, 100e18 + 1];
        for (uint256 i = 0; i < badBonds.length; ++i) {
            vm.expectRevert(
                abi.encodeWithSelector(ParameterOutOfRange.selector, bytes32("challengerBond"), badBonds[i], 1e18, 100e18)
            );
            game.setChallengerBond(badBonds[i]);
        }
        vm.prank(honest);
        vm.expectRevert();
        game.setChallengerBond(0);
    }

    // ---------------------------------------------------------------- conservation

    /// @dev Every verdict, any shares and stake: the pot is exactly credited, paid to the panel, or burned.
    function testFuzz_onVerdict_tokensConserved_succeeds(uint16 winnerBps, uint16 refBps, uint96 stake, uint8 v)
        public
    {
        uint256 w = bound(winnerBps, 0, 10_000);
        uint256 r = bound(refBps, 0, 10_000 - w);
        game.setShares(w, r);
        uint256 stakeAmt = bound(stake, 1e18, 500e18); // MIN_TASK_STAKE..
        Verdict verdict = Verdict(bound(v, 1, 4));
        PostJobParams memory p = _params(1, 1, 2);
        p.stakePerReplica = stakeAmt;
        jobId = _post(p);
        taskId = views.taskOf(jobId, 0, 0);
        honest = _replica(taskId, 0).node;
        cheater = _replica(taskId, 1).node;
        _runReplicated(taskId, hH, hC);
        vm.prank(honest);
        uint256 id = game.openDisputeWithPinpoint(taskId, _pp(hH, hC, 2));
        _submitStepRoot(id, honest, sH);
        _submitStepRoot(id, cheater, sC);
        game.pinpoint(id, _pp(sH, sC, 0));
        uint256 burned = token.totalBurned();
        _recordBalances();
        uint256 reward = _decide(id, verdict);
        uint256 pot = verdict == Verdict.Neither ? 2 * stakeAmt : (verdict == Verdict.NoDecision ? 0 : stakeAmt);
        uint256 toWinner = verdict == Verdict.ForA || verdict == Verdict.ForB ? (pot * w) / 10_000 : 0;
        assertEq(reward, (pot * r) / 10_000, "referees");
        assertEq(_paidSince(honest) + _paidSince(cheater), toWinner, "winner");
        assertEq(token.totalBurned() - burned, pot - toWinner - reward, "burn");
        assertTrue(_gameSolvent(), "game holds only open bonds");
        assertTrue(_conserved(), "conserved");
    }
}

/// @notice The game with the real RefereePanel: a pinpointed step is seated, voted on and settled end to end.
contract DisputeGameRealPanelTest is Fixture {
    function setUp() public override {
        super.setUp();
        vm.roll(1_000);
        _addNodes(8);
    }

    function _vote(uint256 id, address referee, bytes32 vote) internal {
        vm.prank(referee);
        panel.commitVote(id, keccak256(abi.encode(id, vote, bytes32("salt"), referee)));
    }

    function test_onVerdict_realPanel_majorityDecides_succeeds() public {
        bytes32[] memory hH = _honest(INPUT, 4);
        bytes32[] memory hC = _trace(INPUT, 4, "bad", 3);
        bytes32[] memory sH = new bytes32[](3);
        bytes32[] memory sC = new bytes32[](3);
        (sH[0], sH[1], sH[2]) = (hH[2], keccak256("honest step 5"), hH[3]);
        (sC[0], sC[1], sC[2]) = (hH[2], keccak256("bad step 5"), hC[3]);
        uint256 jobId = _post(_params(1, 1, 2));
        uint256 taskId = views.taskOf(jobId, 0, 0);
        address honest = _replica(taskId, 0).node;
        address cheater = _replica(taskId, 1).node;
        _runReplicated(taskId, hH, hC);

        PinpointProof memory p;
        (p.index, p.agreed, p.claimA, p.claimB) = (2, hH[2], hH[3], hC[3]);
        (p.proofAgreedA, p.proofClaimA) = (Merkle.proofOf(hH, 2), Merkle.proofOf(hH, 3));
        (p.proofAgreedB, p.proofClaimB) = (Merkle.proofOf(hC, 2), Merkle.proofOf(hC, 3));
        vm.prank(honest);
        uint256 id = game.openDisputeWithPinpoint(taskId, p);
        vm.prank(honest);
        game.submitStepRoot(id, Merkle.rootOf(sH), Merkle.proofOf(sH, 0), Merkle.proofOf(sH, 2));
        vm.prank(cheater);
        game.submitStepRoot(id, Merkle.rootOf(sC), Merkle.proofOf(sC, 0), Merkle.proofOf(sC, 2));
        (p.index, p.agreed, p.claimA, p.claimB) = (0, sH[0], sH[1], sC[1]);
        (p.proofAgreedA, p.proofClaimA) = (Merkle.proofOf(sH, 0), Merkle.proofOf(sH, 1));
        (p.proofAgreedB, p.proofClaimB) = (Merkle.proofOf(sC, 0), Merkle.proofOf(sC, 1));
        game.pinpoint(id, p);
        assertEq(uint8(disputeLens.getDispute(id).phase), uint8(DisputePhase.Judging), "judging");

        vm.roll(block.number + 5);
        panel.seat(id);
        address[] memory seats = panel.panelOf(id).seats;
        for (uint256 i = 0; i < seats.length; ++i) {
            assertTrue(seats[i] != honest && seats[i] != cheater, "parties never seated");
            _vote(id, seats[i], sH[1]);
        }
        _recordBalances();
        for (uint256 i = 0; i < seats.length; ++i) {
            vm.prank(seats[i]);
            panel.revealVote(id, sH[1], "salt");
        }
        assertEq(uint8(disputeLens.getDispute(id).outcome), uint8(DisputeOutcome.ChallengerWins), "honest wins");
        assertEq(_paidSince(honest), TASK_STAKE / 2, "winner share");
        uint256 toReferees;
        for (uint256 i = 0; i < seats.length; ++i) {
            assertEq(_paidSince(seats[i]), (TASK_STAKE / 4) / seats.length, "a referee's share");
            toReferees += _paidSince(seats[i]);
        }
        assertEq(toReferees, ((TASK_STAKE / 4) / seats.length) * seats.length, "referees paid");
        assertEq(token.balanceOf(address(panel)), 0, "the panel keeps nothing");
        assertEq(registry.getNode(cheater).stake, NODE_STAKE - TASK_STAKE, "cheater slashed");
        assertEq(_tokensHeld(), token.totalMinted(), "conserved");
    }

    /// @dev Two verifiers challenge a fabricated result: v1 answers its first request, v2's dispute goes on to a
    ///      seated real panel.
    function _twoChallengesOneSeated()
        internal
        returns (uint256 id1, uint256 id2, address v2, address[] memory seats)
    {
        bytes32[] memory hH = _honest(INPUT, 4);
        bytes32[] memory hC = _trace(INPUT, 4, "bad", 3);
        uint256 taskId = views.taskOf(_post(_params(1, 1, 1)), 0, 0);
        address solver = _replica(taskId, 0).node;
        _submit(taskId, solver, hC);
        address v1 = nodes[0] == solver ? nodes[1] : nodes[0];
        v2 = nodes[2] == solver ? nodes[3] : nodes[2];
        id1 = _challengeAs(taskId, v1, hH);
        id2 = _challengeAs(taskId, v2, hH);
        vm.prank(v1);
        game.revealLeaf(id1, 0, 2, hH[2], Merkle.proofOf(hH, 2));
        _challengeToJudging(id2, v2, solver, hH, hC);
        vm.roll(block.number + 5);
        panel.seat(id2);
        seats = panel.panelOf(id2).seats;
    }

    /// @dev v1 beats the silent cheater on the clock: a new candidate, so every other dispute of the task is stale.
    function _staleBy(uint256 id1) internal {
        vm.warp(block.timestamp + game.clockAllowance() + 1);
        game.timeout(id1);
        assertEq(uint8(disputeLens.getDispute(id1).outcome), uint8(DisputeOutcome.ChallengerWins), "v1 wins on time");
    }

    /// @dev A challenge judged by a seated real panel goes stale: abandon cancels the panel, referees are released
    ///      unslashed and unpaid, the challenger gets its bond back.
    function test_abandon_realPanelSeated_releasesReferees_succeeds() public {
        (uint256 id1, uint256 id2, address v2, address[] memory seats) = _twoChallengesOneSeated();
        uint256 lockedSeat0 = registry.getNode(seats[0]).locked;
        _staleBy(id1);
        _recordBalances();
        game.abandon(id2);
        assertEq(uint8(panel.panelOf(id2).phase), uint8(PanelPhase.Decided), "panel cancelled");
        assertEq(lockedSeat0 - registry.getNode(seats[0]).locked, panel.refereeStake(), "referee released");
        assertEq(registry.getNode(seats[0]).stake, NODE_STAKE, "referee unslashed");
        // issue 23 (item 4): only seats that did their part (hold a commitment) share the fee; these never committed
        // (their window passed), so the stale challenger keeps its whole bond
        for (uint256 i = 0; i < seats.length; ++i) {
            if (seats[i] != v2) assertEq(_paidSince(seats[i]), 0, "no-shows paid");
        }
        assertEq(_paidSince(v2), game.challengerBond(), "bond back");
        assertEq(token.balanceOf(address(panel)), 0, "the panel returned the unused fee");
        assertEq(_tokensHeld(), token.totalMinted(), "conserved");
    }

    /// @dev Review (pay at once): a stale challenge judged by a real panel whose seats all committed. The game sends the
    ///      panel the whole fee, the panel pays each committed seat an equal part and returns the rounding rest, the
    ///      challenger gets its bond less what the seats were paid; neither contract keeps a wei.
    function test_abandon_realPanelCommitted_paysSeatsReturnsRest_succeeds() public {
        (uint256 id1, uint256 id2, address v2, address[] memory seats) = _twoChallengesOneSeated();
        for (uint256 i = 0; i < seats.length; ++i) {
            _vote(id2, seats[i], keccak256("a vote"));
        }
        uint256 fee = disputeLens.getDispute(id2).fee;
        assertGt(fee % seats.length, 0, "a fee that does not split evenly");
        _staleBy(id1);
        _recordBalances();
        game.abandon(id2);
        uint256 part = fee / seats.length;
        for (uint256 i = 0; i < seats.length; ++i) {
            if (seats[i] != v2) assertEq(_paidSince(seats[i]), part, "a committed seat's part of the fee");
        }
        assertEq(_paidSince(v2), game.challengerBond() - part * seats.length, "bond less what the seats were paid");
        assertEq(token.balanceOf(address(panel)), 0, "the panel returned the rest");
        assertEq(token.balanceOf(address(game)), game.totalBonds(), "the game holds only open bonds");
        assertEq(_tokensHeld(), token.totalMinted(), "conserved");
    }

    /// @dev Issue 23 (item 4), found in review: a real panel whose every seat is a no-show through its redraws ends
    ///      NoDecision with nobody to pay; the honest challenger keeps its whole bond (it used to pay the fee, burned).
    function test_onVerdict_realPanelAllNoShows_chargesNoFee_succeeds() public {
        bytes32[] memory hH = _honest(INPUT, 4);
        bytes32[] memory hC = _trace(INPUT, 4, "bad", 3);
        uint256 jobId = _post(_params(1, 1, 1));
        uint256 taskId = views.taskOf(jobId, 0, 0);
        address solver = _replica(taskId, 0).node;
        _submit(taskId, solver, hC);
        address v = nodes[0] == solver ? nodes[1] : nodes[0];
        uint256 id = _challengeAs(taskId, v, hH);
        panel.setPanelSize(1); // one referee per round: the fixture's nodes cover three rounds of no-shows
        _challengeToJudging(id, v, solver, hH, hC);
        _recordBalances();
        for (uint256 round = 0; round < 20 && panel.panelOf(id).phase != PanelPhase.Decided; ++round) {
            if (panel.panelOf(id).phase == PanelPhase.Seating) {
                uint256 requestId = panel.panelOf(id).requestId;
                if (randomness.isStale(requestId)) randomness.renew(requestId);
                uint256 target = randomness.targetOf(requestId);
                if (block.number <= target) vm.roll(target + 1);
                panel.seat(id); // a retry draws again from a fresh value
                continue;
            }
            vm.warp(panel.panelOf(id).commitDeadline + 1); // the task's execution window (issue 25)
            panel.advance(id);
        }
        assertEq(uint8(panel.panelOf(id).verdict), uint8(Verdict.NoDecision), "no decision");
        assertEq(uint8(disputeLens.getDispute(id).outcome), uint8(DisputeOutcome.Voided), "voided");
        assertEq(_paidSince(v), game.challengerBond(), "the honest challenger paid for the no-shows");
        for (uint256 i = 0; i < nodes.length; ++i) {
            if (nodes[i] != v) assertEq(_paidSince(nodes[i]), 0, "nobody to pay");
        }
        assertEq(_tokensHeld(), token.totalMinted(), "conserved");
    }

    /// @dev Plays optimistic challenge `id` (challenger `v` with trace hH, defender `solver` with hC, diverging at
    ///      checkpoint 3, step 1 of its segment) to Judging: the real panel opens.
    function _challengeToJudging(uint256 id, address v, address solver, bytes32[] memory hH, bytes32[] memory hC)
        internal
    {
        PinpointProof memory p;
        (p.index, p.agreed, p.claimA, p.claimB) = (2, hH[2], hH[3], hC[3]);
        (p.proofAgreedA, p.proofClaimA) = (Merkle.proofOf(hH, 2), Merkle.proofOf(hH, 3));
        (p.proofAgreedB, p.proofClaimB) = (Merkle.proofOf(hC, 2), Merkle.proofOf(hC, 3));
        game.pinpoint(id, p);
        bytes32[] memory sH = new bytes32[](3);
        bytes32[] memory sC = new bytes32[](3);
        (sH[0], sH[1], sH[2]) = (hH[2], keccak256("honest step 5"), hH[3]);
        (sC[0], sC[1], sC[2]) = (hH[2], keccak256("bad step 5"), hC[3]);
        vm.prank(v);
        game.submitStepRoot(id, Merkle.rootOf(sH), Merkle.proofOf(sH, 0), Merkle.proofOf(sH, 2));
        vm.prank(solver);
        game.submitStepRoot(id, Merkle.rootOf(sC), Merkle.proofOf(sC, 0), Merkle.proofOf(sC, 2));
        (p.index, p.agreed, p.claimA, p.claimB) = (0, sH[0], sH[1], sC[1]);
        (p.proofAgreedA, p.proofClaimA) = (Merkle.proofOf(sH, 0), Merkle.proofOf(sH, 1));
        (p.proofAgreedB, p.proofClaimB) = (Merkle.proofOf(sC, 0), Merkle.proofOf(sC, 1));
        game.pinpoint(id, p);
    }

    function _challengeAs(uint256 taskId, address who, bytes32[] memory h) internal returns (uint256 id) {
        bytes32 root = Merkle.rootOf(h);
        bytes32 cid = keccak256("cid");
        vm.startPrank(who);
        token.approve(address(game), type(uint256).max);
        game.commitChallenge(keccak256(abi.encode(taskId, root, h[4], cid, bytes32("s"), who)));
        vm.roll(block.number + 1);
        id = game.challengeOptimistic(taskId, root, h[4], 4, cid, "s", Merkle.proofOf(h, 0), Merkle.proofOf(h, 4));
        vm.stopPrank();
    }
}
