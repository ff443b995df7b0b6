// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {DisputeFixture} from "./base/DisputeFixture.sol";
import {DisputeGame} from "../../contracts/DisputeGame.sol";
import {IDisputeGame} from "../../contracts/interfaces/IDisputeGame.sol";
import {Merkle} from "../../contracts/lib/Merkle.sol";
import {
    TaskStatus,
    ReplicaStatus,
    DisputePhase,
    DisputeOutcome,
    PinpointProof
} from "../../contracts/types/VerityTypes.sol";
import "../../contracts/errors/DisputeGameErrors.sol";

/// @notice Replicated disputes: public path, bisection, clocks, panel votes, both-lose, void.
contract DisputeGameTest is DisputeFixture {
    function test_publicPath_honestWins_succeeds() public {
        uint256 id = _toVoting();
        assertEq(game.disputedStep(id), 4, "global step = 2*2 + 0");
        address[] memory panel = game.panelOf(id);
        assertEq(panel.length, 3, "panel of 3");
        for (uint256 i = 0; i < panel.length; ++i) {
            assertTrue(panel[i] != honest && panel[i] != cheater, "referee not a party");
        }
        _allVote(id, _same(sH[1], 3));
        uint256 burned = token.totalBurned();
        game.resolve(id);

        DisputeGame.Dispute memory d = game.getDispute(id);
        assertEq(uint8(d.outcome), uint8(DisputeOutcome.ChallengerWins), "honest (A) wins");
        assertEq(uint8(_status(taskId)), uint8(TaskStatus.Accepted), "task accepted");
        assertEq(jobs.getTask(taskId).finalHash, hH[4], "honest final");
        assertEq(uint8(_replica(taskId, 1).status), uint8(ReplicaStatus.Slashed), "cheater slashed");
        assertEq(registry.getNode(cheater).stake, NODE_STAKE - TASK_STAKE, "100% task stake");
        assertEq(game.credits(honest), TASK_STAKE / 2, "winner share");
        uint256 each = (TASK_STAKE / 4) / 3;
        assertEq(game.credits(panel[0]), each, "referee share");
        assertEq(token.totalBurned() - burned, TASK_STAKE - TASK_STAKE / 2 - 3 * each, "rest burned");
        assertEq(jobs.credits(honest), PAYMENT, "winner paid for the task");
        assertEq(registry.reputationOf(cheater).disputesLost, 1, "lost++");
        assertEq(registry.reputationOf(honest).disputesWon, 1, "won++");
        for (uint256 i = 0; i < panel.length; ++i) {
            assertEq(registry.getNode(panel[i]).locked, TASK_STAKE * _aggSlots(panel[i]), "referee unlocked");
        }
        assertEq(registry.getNode(honest).locked, TASK_STAKE * _aggSlots(honest), "honest unlocked");
        assertTrue(_conserved(), "conserved");
        vm.prank(honest);
        game.withdraw();
        assertEq(game.credits(honest), 0, "withdrawn");
    }

    function _aggSlots(address node) internal view returns (uint256 c) {
        uint256 agg = jobs.taskOf(jobId, 0, 1);
        if (_replica(agg, 0).node == node) ++c;
        if (_replica(agg, 1).node == node) ++c;
    }

    function test_openDispute_emitsAndRequestsMid_succeeds() public {
        _contested();
        vm.expectEmit(true, true, true, true, address(game));
        emit IDisputeGame.DisputeOpened(1, taskId, cheater, honest);
        vm.prank(cheater);
        uint256 id = game.openDispute(taskId);
        DisputeGame.Dispute memory d = game.getDispute(id);
        assertEq(d.mid, 2, "mid of [0,4]");
        assertEq(uint8(d.phase), uint8(DisputePhase.Bisect0), "bisect");
        assertEq(game.disputeOfTask(taskId), id, "open dispute");
    }

    function test_bisection_bothLevels_reachesPanel_succeeds() public {
        _contested();
        vm.prank(honest);
        uint256 id = game.openDispute(taskId);
        // level 0: [0,4] mid 2 agree -> [2,4] mid 3 differ -> [2,3]
        _revealLeaf(id, honest, 0, hH, 2);
        _revealLeaf(id, cheater, 0, hC, 2);
        assertEq(game.getDispute(id).mid, 3, "mid 3");
        _revealLeaf(id, cheater, 0, hC, 3);
        _revealLeaf(id, honest, 0, hH, 3);
        DisputeGame.Dispute memory d = game.getDispute(id);
        assertEq(uint8(d.phase), uint8(DisputePhase.StepRoots), "step roots");
        assertEq(d.segment, 2, "segment 2");
        _submitStepRoot(id, cheater, sC);
        _submitStepRoot(id, honest, sH);
        // level 1: [0,2] mid 1 differs -> [0,1]
        _revealLeaf(id, honest, 1, sH, 1);
        _revealLeaf(id, cheater, 1, sC, 1);
        d = game.getDispute(id);
        assertEq(uint8(d.phase), uint8(DisputePhase.Voting), "voting");
        assertEq(d.step, 0, "step 0");
        assertEq(d.claims[0], sH[1], "claim A");
    }

    function test_timeout_silentPartyLoses_succeeds() public {
        _contested();
        vm.prank(honest);
        uint256 id = game.openDispute(taskId);
        _revealLeaf(id, honest, 0, hH, 2);
        vm.expectRevert(abi.encodeWithSelector(ClockNotExpired.selector, id));
        game.timeout(id);
        vm.warp(block.timestamp + game.clockAllowance() + 1);
        game.timeout(id);
        assertEq(uint8(game.getDispute(id).outcome), uint8(DisputeOutcome.ChallengerWins), "silent cheater loses");
        assertEq(uint8(_status(taskId)), uint8(TaskStatus.Accepted), "accepted");
        assertEq(game.credits(honest), TASK_STAKE / 2, "winner share");
        assertTrue(_conserved(), "conserved");
    }

    function test_timeout_bothSilent_bothLose_succeeds() public {
        _contested();
        uint256 id = game.openDispute(taskId);
        vm.warp(block.timestamp + game.clockAllowance() + 1);
        _heartbeatAll();
        game.timeout(id);
        assertEq(uint8(game.getDispute(id).outcome), uint8(DisputeOutcome.BothLose), "both lose");
        assertEq(registry.getNode(honest).stake, NODE_STAKE - TASK_STAKE, "A slashed");
        assertEq(registry.getNode(cheater).stake, NODE_STAKE - TASK_STAKE, "B slashed");
        assertEq(uint8(_status(taskId)), uint8(TaskStatus.Assigned), "redrawn");
        address a = _replica(taskId, 0).node;
        address b = _replica(taskId, 1).node;
        assertTrue(a != honest && a != cheater && b != honest && b != cheater, "losers excluded");
        assertTrue(_conserved(), "conserved");
    }

    function test_panelVote_neitherMatches_bothLose_succeeds() public {
        uint256 id = _toVoting();
        _allVote(id, _same(keccak256("third answer"), 3));
        game.resolve(id);
        assertEq(uint8(game.getDispute(id).outcome), uint8(DisputeOutcome.BothLose), "both lose");
        assertEq(uint8(_status(taskId)), uint8(TaskStatus.Assigned), "redrawn");
        assertEq(jobs.bannedOf(taskId)[0] == honest || jobs.bannedOf(taskId)[1] == honest, true, "banned");
        assertTrue(_conserved(), "conserved");
    }

    function test_panelVote_silentRefereeSlashed_succeeds() public {
        uint256 id = _toVoting();
        address[] memory panel = game.panelOf(id);
        _vote(id, panel[0], sC[1]);
        _vote(id, panel[1], sC[1]);
        vm.warp(block.timestamp + game.voteCommitWindow() + 1);
        _revealVote(id, panel[0], sC[1]);
        _revealVote(id, panel[1], sC[1]);
        vm.expectRevert(abi.encodeWithSelector(VotingNotOver.selector, id, game.getDispute(id).revealDeadline));
        game.resolve(id);
        vm.warp(game.getDispute(id).revealDeadline + 1);
        game.resolve(id);
        assertEq(uint8(game.getDispute(id).outcome), uint8(DisputeOutcome.DefenderWins), "majority decides");
        uint256 penalty = (game.refereeStake() * game.refereeSlashBps()) / 10_000;
        assertEq(registry.getNode(panel[2]).stake, NODE_STAKE - penalty, "silent referee slashed");
        assertEq(game.credits(panel[2]), 0, "silent referee unpaid");
        assertEq(game.credits(panel[0]), (TASK_STAKE / 4) / 2, "revealers share");
        assertTrue(_conserved(), "conserved");
    }

    function test_noReferee_voided_succeeds() public {
        // Only two solver-only nodes: no referee can ever be drawn.
        game.setPanel(3, NODE_STAKE + 1, 1_000);
        uint256 id = _toVotingOrPending();
        assertEq(uint8(game.getDispute(id).phase), uint8(DisputePhase.AwaitingPanel), "awaiting panel");
        vm.expectRevert(abi.encodeWithSelector(NoEligibleReferee.selector, id));
        game.drawPanel(id);
        vm.expectRevert(abi.encodeWithSelector(PanelTimeoutNotReached.selector, id, game.getDispute(id).panelDeadline));
        game.resolve(id);
        vm.warp(block.timestamp + game.panelTimeout() + 1);
        _heartbeatAll();
        game.resolve(id);
        assertEq(uint8(game.getDispute(id).outcome), uint8(DisputeOutcome.Voided), "voided");
        assertEq(registry.getNode(honest).stake, NODE_STAKE, "nobody slashed");
        assertEq(registry.getNode(cheater).locked, TASK_STAKE * _slotsOf(cheater), "unlocked");
        assertTrue(_conserved(), "conserved");
    }

    function _slotsOf(address node) internal view returns (uint256 c) {
        if (_replica(taskId, 0).node == node) ++c;
        if (_replica(taskId, 1).node == node) ++c;
    }

    function _toVotingOrPending() internal returns (uint256 id) {
        _contested();
        vm.prank(honest);
        id = game.openDisputeWithPinpoint(taskId, _pp(hH, hC, 2));
        _submitStepRoot(id, honest, sH);
        _submitStepRoot(id, cheater, sC);
        game.pinpoint(id, _pp(sH, sC, 0));
    }

    // ---------------------------------------------------------------- reverts

    function test_openDispute_notContested_reverts() public {
        jobId = _post(_params(1, 1, 2));
        vm.expectRevert(abi.encodeWithSelector(TaskNotDisputable.selector, 1, TaskStatus.Assigned));
        game.openDispute(1);
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
        vm.prank(honest);
        vm.expectRevert(abi.encodeWithSelector(NotRequestedIndex.selector, id, uint8(0), uint32(2), uint32(1)));
        game.revealLeaf(id, 0, 1, hH[1], Merkle.proofOf(hH, 1));
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

    function test_commitVote_notReferee_reverts() public {
        uint256 id = _toVoting();
        vm.expectRevert(abi.encodeWithSelector(NotReferee.selector, id, address(this)));
        game.commitVote(id, "c");
    }

    function test_commitVote_afterWindow_reverts() public {
        uint256 id = _toVoting();
        address r = game.panelOf(id)[0];
        vm.warp(block.timestamp + game.voteCommitWindow() + 1);
        uint64 deadline = game.getDispute(id).commitDeadline;
        vm.prank(r);
        vm.expectRevert(abi.encodeWithSelector(VoteCommitClosed.selector, id, deadline));
        game.commitVote(id, "c");
    }

    function test_revealVote_beforeOpen_reverts() public {
        uint256 id = _toVoting();
        address r = game.panelOf(id)[0];
        _vote(id, r, sH[1]);
        DisputeGame.Dispute memory d = game.getDispute(id);
        vm.prank(r);
        vm.expectRevert(abi.encodeWithSelector(VoteRevealNotOpen.selector, id, d.commitDeadline, d.revealDeadline));
        game.revealVote(id, sH[1], "salt");
    }

    function test_revealVote_mismatch_reverts() public {
        uint256 id = _toVoting();
        address r = game.panelOf(id)[0];
        _vote(id, r, sH[1]);
        vm.warp(block.timestamp + game.voteCommitWindow() + 1);
        vm.prank(r);
        vm.expectRevert(abi.encodeWithSelector(VoteMismatch.selector, id, r));
        game.revealVote(id, sC[1], "salt");
    }

    function test_resolve_wrongPhase_reverts() public {
        _contested();
        uint256 id = game.openDispute(taskId);
        vm.expectRevert(abi.encodeWithSelector(WrongPhase.selector, id, DisputePhase.Bisect0));
        game.resolve(id);
    }

    function test_setParameters_succeedsAndReverts() public {
        game.setClockAllowance(60);
        game.setChallengerBond(1e18);
        game.setPanel(5, 1e18, 500);
        game.setVoteWindows(10, 20, 30);
        game.setShares(6_000, 3_000);
        assertEq(game.panelSize(), 5, "panel");
        assertEq(game.winnerShareBps(), 6_000, "winner");
        vm.expectRevert();
        game.setPanel(4, 1e18, 500);
        vm.expectRevert();
        game.setShares(6_000, 5_000);
        vm.expectRevert();
        game.setClockAllowance(0);
    }
}
