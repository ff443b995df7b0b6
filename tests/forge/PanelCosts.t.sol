// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {DisputeFixture} from "./base/DisputeFixture.sol";
import {DisputePhase, DisputeOutcome, Verdict} from "../../contracts/types/VerityTypes.sol";
import {ParameterOutOfRange} from "../../contracts/errors/CommonErrors.sol";
import {ChallengeAlreadyOpen} from "../../contracts/errors/DisputeGameErrors.sol";

/// @notice Issue 23, item 4 ("panels cost who opens them"): a challenger holds one open challenge per task, and a
///         challenge that reaches a panel pays the panel's fee out of its bond whenever the loser's slashed stake
///         does not: a verdict without a majority, a stale dispute whose seated panel is cancelled or decides anyway.
///         In v2 one identity opened 12 challenges on one task, and panels that ended without a loser paid their
///         referees nothing.
contract PanelCostsTest is DisputeFixture {
    uint256 internal constant BOND = 10e18;

    /// @dev Two verifiers challenge an optimistic cheater; v2's challenge reaches Judging (its panel seated when
    ///      `seated`), then v1 wins on the clock, which makes v2's dispute stale. Returns v1, v2 and v2's dispute.
    function _staleJudging(bool seated) internal returns (address v1, address v2, uint256 id2) {
        address solver = _optimistic(hC);
        v1 = _other(solver, address(0), address(0));
        v2 = _other(solver, v1, address(0));
        uint256 id1 = _challenge(v1, hH);
        id2 = _challenge(v2, hH);
        _toJudgingAt2(id2, v2, solver);
        mock.setSeated(id2, seated);
        _revealLeaf(id1, v1, 0, hH, 2);
        vm.warp(block.timestamp + game.clockAllowance() + 1);
        game.timeout(id1); // v1 wins: its result is the new claim, id2 is stale
    }

    /// @dev hH with a made-up final: another trace that disagrees with the claim.
    function _madeUp(uint256 i) internal view returns (bytes32[] memory h) {
        h = new bytes32[](hH.length);
        for (uint256 j = 0; j < h.length; ++j) {
            h[j] = hH[j];
        }
        h[h.length - 1] = keccak256(abi.encode("made up", i));
    }

    /// @dev The throwaway-panel attack: one identity opens challenge after challenge against one task. v2 let it
    ///      open 12 (36 referee seats); now the second one reverts while the first is open.
    function test_challengeOptimistic_secondOpenChallengeOfOneChallenger_reverts() public {
        address solver = _optimistic(hC);
        address v = _other(solver, address(0), address(0));
        uint256 first = _challenge(v, hH);
        bytes32[] memory h = _madeUp(1);
        _commitChallenge(v, h, "again");
        vm.roll(block.number + 1);
        vm.expectRevert(abi.encodeWithSelector(ChallengeAlreadyOpen.selector, taskId, v, first));
        _revealChallenge(v, h, "again");
        assertEq(game.openChallengeOf(taskId, v), first, "the first challenge is the open one");
        // Another identity may still challenge: the bound is per challenger, and each one locks its own stake.
        address w = _other(solver, v, address(0));
        assertGt(_challenge(w, h), first, "a second challenger opens");
    }

    /// @dev Once its challenge is settled, a challenger may challenge the task's new claim again.
    function test_challengeOptimistic_afterSettlement_opensAgain_succeeds() public {
        address solver = _optimistic(hC);
        address v = _other(solver, address(0), address(0));
        uint256 id = _challenge(v, hH);
        _toJudgingAt2(id, v, solver);
        _decide(id, Verdict.ForB); // v lost: the claim stands, v's challenge is closed
        assertEq(game.openChallengeOf(taskId, v), 0, "closed on settlement");
        assertGt(_challenge(v, _madeUp(2)), id, "challenges again");
    }

    /// @dev A challenge left open against a replaced claim does not hold its challenger back from the new claim;
    ///      abandoning it later leaves the new one listed.
    function test_challengeOptimistic_staleOpenChallenge_doesNotBlockTheNewClaim_succeeds() public {
        address solver = _optimistic(hC);
        address v1 = _other(solver, address(0), address(0));
        address v2 = _other(solver, v1, address(0));
        uint256 id1 = _challenge(v1, hH);
        uint256 id2 = _challenge(v2, _madeUp(4));
        _revealLeaf(id1, v1, 0, hH, 2);
        vm.warp(block.timestamp + game.clockAllowance() + 1);
        game.timeout(id1); // v1's result is the new claim; v2's challenge is stale but still open
        uint256 id3 = _challenge(v2, _madeUp(5));
        assertEq(game.openChallengeOf(taskId, v2), id3, "the new challenge is the open one");
        game.abandon(id2);
        assertEq(game.openChallengeOf(taskId, v2), id3, "abandoning the stale one keeps the new one");
        assertTrue(_conserved(), "conserved");
    }

    /// @dev A panel without a majority used to pay its referees nothing; now the challenger's bond pays the fee.
    function test_onVerdict_noDecision_refereesPaidTheFeeFromTheBond_succeeds() public {
        address solver = _optimistic(hC);
        address v = _other(solver, address(0), address(0));
        uint256 id = _challenge(v, hH);
        _toJudgingAt2(id, v, solver);
        uint256 fee = game.panelFee();
        assertGt(fee, 0, "a fee by default");
        _recordBalances();
        uint256 reward = _decide(id, Verdict.NoDecision);
        assertEq(reward, fee, "v2 paid 0 to a panel that found no majority");
        assertEq(_paidSince(v), BOND - fee, "the fee came out of the bond");
        assertEq(uint8(disputeLens.getDispute(id).outcome), uint8(DisputeOutcome.Voided), "voided");
        assertTrue(_conserved(), "conserved");
        assertTrue(_gameSolvent(), "solvent");
    }

    /// @dev A panel in which nobody revealed (every seat a no-show through its redraws) is owed nothing: the fee
    ///      would only be burned (found in review: the honest challenger paid for the referees' failure).
    function test_onVerdict_noDecisionWithoutReveals_chargesNoFee_succeeds() public {
        address solver = _optimistic(hC);
        address v = _other(solver, address(0), address(0));
        uint256 id = _challenge(v, hH);
        _toJudgingAt2(id, v, solver);
        mock.setNoReveals(id, true);
        _recordBalances();
        assertEq(_decide(id, Verdict.NoDecision), 0, "paid a panel nobody sat on");
        assertEq(_paidSince(v), BOND, "the whole bond back");
        assertTrue(_conserved(), "conserved");
    }

    /// @dev A winning challenger's referees are paid from the loser's stake; the bond tops up only a share below the fee.
    function test_onVerdict_challengerWins_bondPaysOnlyTheShortfall_succeeds() public {
        address solver = _optimistic(hC);
        address v = _other(solver, address(0), address(0));
        game.setShares(5_000, 1); // a referee share of the pot (0.01 VRT) below the fee
        uint256 id = _challenge(v, hH);
        _toJudgingAt2(id, v, solver);
        uint256 share = (TASK_STAKE * game.refereeShareBps()) / 10_000;
        uint256 fee = game.panelFee();
        _recordBalances();
        uint256 reward = _decide(id, Verdict.ForA);
        uint256 topUp = share >= fee ? 0 : fee - share;
        assertGt(topUp, 0, "the shortfall case");
        assertEq(reward, share + topUp, "referees' pay");
        assertEq(_paidSince(v), BOND - topUp + (TASK_STAKE * game.winnerShareBps()) / 10_000, "bond and win");
        assertTrue(_conserved(), "conserved");
    }

    /// @dev A stale challenge whose panel was seated pays the fee when the panel is cancelled (part of its bond).
    function test_abandon_seatedPanel_paysTheFeeFromTheBond_succeeds() public {
        (, address v2, uint256 id2) = _staleJudging(true);
        uint256 fee = game.panelFee();
        uint256 held = token.balanceOf(address(mock));
        _recordBalances();
        game.abandon(id2);
        assertTrue(mock.cancelled(id2), "panel cancelled");
        assertEq(token.balanceOf(address(mock)) - held, fee, "the seated panel got the fee");
        assertEq(_paidSince(v2), BOND - fee, "the rest of the bond back");
        assertEq(game.openChallengeOf(taskId, v2), 0, "closed");
        assertTrue(_conserved(), "conserved");
        assertTrue(_gameSolvent(), "solvent");
    }

    /// @dev A stale verdict slashes nobody, but the referees who judged are paid the fee from the bond.
    function test_onVerdict_stale_paysOnlyTheFee_succeeds() public {
        (address v1, address v2, uint256 id2) = _staleJudging(false);
        _recordBalances();
        uint256 reward = _decide(id2, Verdict.ForA);
        assertEq(reward, game.panelFee(), "the fee, no share of a slash");
        assertEq(_paidSince(v2), BOND - reward, "bond less the fee");
        assertEq(views.getTask(taskId).candidate, v1, "candidate unchanged");
        assertTrue(_conserved(), "conserved");
    }

    function test_setPanelFee_bounds_succeedsAndReverts() public {
        game.setPanelFee(0);
        assertEq(game.panelFee(), 0, "zero allowed");
        game.setPanelFee(1e18);
        vm.expectRevert(abi.encodeWithSelector(ParameterOutOfRange.selector, bytes32("panelFee"), 1e18 + 1, 0, 1e18));
        game.setPanelFee(1e18 + 1);
    }
}
