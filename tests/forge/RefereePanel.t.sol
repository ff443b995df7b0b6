// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {PanelFixture} from "./base/PanelFixture.sol";
import {RefereePanel} from "../../contracts/RefereePanel.sol";
import {IVerityToken} from "../../contracts/interfaces/IVerityToken.sol";
import {INodeRegistry} from "../../contracts/interfaces/INodeRegistry.sol";
import {IRandomness} from "../../contracts/interfaces/IRandomness.sol";
import {IRefereePanel} from "../../contracts/interfaces/IRefereePanel.sol";
import {PanelRequest, PanelPhase, Verdict} from "../../contracts/types/VerityTypes.sol";
import {ZeroAddress, ParameterOutOfRange} from "../../contracts/errors/CommonErrors.sol";
import "../../contracts/errors/RefereePanelErrors.sol";

contract RefereePanelTest is PanelFixture {
    uint256 internal constant ID = 42;

    function _assertConserved() internal view {
        assertEq(token.balanceOf(address(panel)), 0, "the panel holds tokens at rest");
    }

    function _phase(uint256 id) internal view returns (PanelPhase) {
        return _panel(id).phase;
    }

    /// @dev Makes every referee but the first `keep` ineligible (all stake unbonding).
    function _onlyEligible(uint256 keep) internal {
        for (uint256 i = keep; i < referees.length; ++i) {
            vm.prank(referees[i]);
            registry.requestUnstake(NODE_STAKE);
        }
    }

    // ---------------------------------------------------------------- owner

    function test_constructor_zeroAddress_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(ZeroAddress.selector, bytes32("randomness")));
        new RefereePanel(IVerityToken(address(token)), INodeRegistry(address(registry)), IRandomness(address(0)));
    }

    function test_setGame_twice_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(GameAlreadySet.selector, address(game)));
        panel.setGame(address(1));
    }

    function test_setGame_zeroAddress_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(ZeroAddress.selector, bytes32("game")));
        panel.setGame(address(0));
    }

    function test_setters_notOwner_reverts() public {
        vm.startPrank(address(0xBAD));
        vm.expectRevert();
        panel.setGame(address(1));
        vm.expectRevert();
        panel.setPanelSize(5);
        vm.expectRevert();
        panel.setRefereeStake(1);
        vm.expectRevert();
        panel.setSlashes(1, 1);
        vm.expectRevert();
        panel.setWindows(1, 1);
        vm.stopPrank();
    }

    function test_setPanelSize_odd_succeeds() public {
        vm.expectEmit(true, false, false, true, address(panel));
        emit IRefereePanel.ParameterSet("panelSize", 7);
        panel.setPanelSize(7);
        assertEq(panel.panelSize(), 7, "size");
    }

    function test_setPanelSize_evenOrOutOfRange_reverts() public {
        uint8[3] memory bad = [0, 4, 9];
        for (uint256 i = 0; i < bad.length; ++i) {
            vm.expectRevert(abi.encodeWithSelector(ParameterOutOfRange.selector, bytes32("panelSize"), bad[i], 1, 7));
            panel.setPanelSize(bad[i]);
        }
    }

    function test_setRefereeStake_value_succeeds() public {
        panel.setRefereeStake(5e18);
        assertEq(panel.refereeStake(), 5e18, "stake");
    }

    function test_setRefereeStake_outOfRange_reverts() public {
        uint256[3] memory bad = [uint256(0), 1e18 - 1, 10e18 + 1];
        for (uint256 i = 0; i < bad.length; ++i) {
            vm.expectRevert(
                abi.encodeWithSelector(ParameterOutOfRange.selector, bytes32("refereeStake"), bad[i], 1e18, 10e18)
            );
            panel.setRefereeStake(bad[i]);
        }
    }

    function test_setSlashes_values_succeeds() public {
        panel.setSlashes(0, 10_000);
        assertEq(panel.noShowSlashBps(), 0, "no-show");
        assertEq(panel.wrongVoteSlashBps(), 10_000, "wrong vote");
    }

    function test_setSlashes_aboveBps_reverts() public {
        vm.expectRevert(
            abi.encodeWithSelector(ParameterOutOfRange.selector, bytes32("wrongVoteSlashBps"), 10_001, 0, 10_000)
        );
        panel.setSlashes(0, 10_001);
    }

    function test_setWindows_values_succeeds() public {
        panel.setWindows(10, 20);
        assertEq(panel.commitWindow(), 10, "commit");
        assertEq(panel.revealWindow(), 20, "reveal");
    }

    function test_setWindows_zeroOrTooLong_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(ParameterOutOfRange.selector, bytes32("revealWindow"), 0, 1, 7 days));
        panel.setWindows(1, 0);
        vm.expectRevert(
            abi.encodeWithSelector(ParameterOutOfRange.selector, bytes32("commitWindow"), 7 days + 1, 1, 7 days)
        );
        panel.setWindows(7 days + 1, 1);
    }

    // ---------------------------------------------------------------- open

    function test_open_snapshotsAndRequests_succeeds() public {
        vm.expectEmit(true, false, false, true, address(panel));
        emit IRefereePanel.PanelOpened(ID, 1);
        _open(ID);
        RefereePanel.Panel memory p = _panel(ID);
        assertTrue(p.phase == PanelPhase.Seating, "phase");
        assertEq(p.requestId, 1, "request");
        assertEq(randomness.targetOf(1), block.number + DELAY, "target");
        assertEq(p.seats.length, 3, "seats");
        assertEq(panel.rulesOf(ID).refereeStake, REF_STAKE, "stake snapshot");
        assertEq(p.openedAt, block.timestamp, "openedAt");
    }

    function test_open_notGame_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(NotGame.selector, address(this)));
        panel.open(ID, _request());
    }

    function test_open_twice_reverts() public {
        _open(ID);
        vm.expectRevert(abi.encodeWithSelector(PanelExists.selector, ID));
        _open(ID);
    }

    function test_open_equalClaims_reverts() public {
        PanelRequest memory r = _request();
        r.claimB = r.claimA;
        vm.expectRevert(abi.encodeWithSelector(ClaimsEqual.selector, ID, r.claimA));
        game.open(ID, r);
    }

    /// @notice P8: owner changes after open never reach an open panel.
    function test_open_parameterChangeAfterOpen_keepsSnapshot_succeeds() public {
        _open(ID);
        panel.setPanelSize(5);
        panel.setRefereeStake(5e18);
        panel.setSlashes(0, 0);
        panel.setWindows(10, 10);
        address[] memory seats = _seat(ID);
        assertEq(seats.length, 3, "size changed");
        assertEq(_locked(seats[0]), REF_STAKE, "stake changed");
        assertEq(_panel(ID).commitDeadline, block.timestamp + 60, "commit window changed");
        _vote(ID, _votes3(CLAIM_A, CLAIM_A, CLAIM_B));
        assertEq(_stake(seats[2]), NODE_STAKE - 5e18, "wrong-vote slash changed");
        _open(ID + 1);
        assertEq(_panel(ID + 1).seats.length, 5, "new panel ignores new size");
    }

    // ---------------------------------------------------------------- seat

    function test_seat_fillsPanelExcludingParties_succeeds() public {
        _open(ID);
        _rollToReady(ID);
        vm.expectEmit(true, false, false, false, address(panel));
        emit IRefereePanel.RefereesSeated(ID, new address[](3), 0);
        panel.seat(ID);
        RefereePanel.Panel memory p = _panel(ID);
        assertTrue(p.phase == PanelPhase.Committing, "phase");
        assertEq(p.commitDeadline, block.timestamp + 60, "deadline");
        for (uint256 i = 0; i < 3; ++i) {
            assertFalse(_isParty(p.seats[i]), "party seated");
            assertEq(_locked(p.seats[i]), REF_STAKE, "stake not locked");
            assertTrue(panel.voteOf(ID, p.seats[i]).seated, "vote record");
            for (uint256 j = 0; j < i; ++j) {
                assertNotEq(p.seats[i], p.seats[j], "referee seated twice");
            }
        }
    }

    function test_seat_notSeating_reverts() public {
        vm.expectRevert(
            abi.encodeWithSelector(PanelNotInPhase.selector, ID, PanelPhase.None, PanelPhase.Seating)
        );
        panel.seat(ID);
        _openAndSeat(ID);
        vm.expectRevert(
            abi.encodeWithSelector(PanelNotInPhase.selector, ID, PanelPhase.Committing, PanelPhase.Seating)
        );
        panel.seat(ID);
    }

    function test_seat_emptySeat_retries_succeeds() public {
        _onlyEligible(2);
        _open(ID);
        _rollToReady(ID);
        vm.expectEmit(true, false, false, true, address(panel));
        emit IRefereePanel.SeatingRetry(ID, 2);
        panel.seat(ID);
        RefereePanel.Panel memory p = _panel(ID);
        assertTrue(p.phase == PanelPhase.Seating, "phase");
        assertEq(p.requestId, 2, "new request");
        uint256 filled;
        for (uint256 i = 0; i < 3; ++i) {
            if (p.seats[i] != address(0)) ++filled;
        }
        assertEq(filled, 2, "filled seats kept");
        _addReferees(1);
        _nextEpoch(); // draws read the weights as the epoch began
        _seat(ID);
        assertTrue(_phase(ID) == PanelPhase.Committing, "not full after retry");
    }

    /// @dev Issue 9 (starved draws): a seating that found too few eligible referees used to end in NoDecision after
    ///      panelTimeout, releasing a cheater unslashed (its optimistic result stood). Now it waits and retries for
    ///      as long as it takes: days later it is still seating, seated referees stay, and once enough eligible
    ///      referees exist the panel fills and judges.
    function test_seat_starvedDraw_waitsAndRetriesNeverDecides_succeeds() public {
        _onlyEligible(2);
        _open(ID);
        _seat(ID);
        for (uint256 day = 1; day <= 3; ++day) {
            vm.warp(block.timestamp + 1 days);
            _seat(ID);
            RefereePanel.Panel memory p = _panel(ID);
            assertTrue(p.phase == PanelPhase.Seating, "gave up seating");
            assertTrue(p.verdict == Verdict.None, "decided without a panel");
        }
        assertTrue(game.verdictOf(ID) == Verdict.None, "the game heard a verdict");
        assertEq(_locked(referees[0]) + _locked(referees[1]), 2 * panel.refereeStake(), "seated referees kept");
        _addReferees(1);
        _nextEpoch(); // draws read the weights as the epoch began
        _seat(ID);
        assertTrue(_phase(ID) == PanelPhase.Committing, "not seated once a referee was eligible");
        _assertConserved();
    }

    /// @dev Size 7 with two full redraws: 3 parties + 21 ever seated exceed the registry's 16 exclusions; the list is
    ///      capped and the draw never reverts, never seats a party or one referee twice.
    function test_seat_exclusionCappedAtRegistryLimit_succeeds() public {
        panel.setPanelSize(7);
        _addReferees(16);
        _open(ID);
        for (uint256 round = 0; round < 3; ++round) {
            address[] memory seats = _seat(ID);
            assertTrue(_phase(ID) == PanelPhase.Committing, "not seated");
            for (uint256 i = 0; i < 7; ++i) {
                assertFalse(_isParty(seats[i]), "party seated");
                for (uint256 j = 0; j < i; ++j) {
                    assertNotEq(seats[i], seats[j], "referee seated twice");
                }
            }
            vm.warp(block.timestamp + 61);
            panel.advance(ID);
        }
        assertTrue(_panel(ID).verdict == Verdict.NoDecision, "verdict");
        assertEq(_panel(ID).unseated.length, 21, "unseated no-shows");
    }

    // ---------------------------------------------------------------- commitVote

    function test_commitVote_seated_succeeds() public {
        address[] memory seats = _openAndSeat(ID);
        bytes32 c = _commitment(ID, CLAIM_A, seats[0]);
        vm.expectEmit(true, true, false, false, address(panel));
        emit IRefereePanel.VoteCommitted(ID, seats[0]);
        vm.prank(seats[0]);
        panel.commitVote(ID, c);
        RefereePanel.Vote memory v = panel.voteOf(ID, seats[0]);
        assertTrue(v.committed, "committed");
        assertEq(v.commitment, c, "commitment");
        assertEq(_panel(ID).committed, 1, "count");
    }

    function test_commitVote_lastCommit_opensReveal_succeeds() public {
        address[] memory seats = _openAndSeat(ID);
        _commit(ID, seats[0], CLAIM_A);
        _commit(ID, seats[1], CLAIM_A);
        vm.expectEmit(true, false, false, true, address(panel));
        emit IRefereePanel.RevealOpened(ID, uint64(block.timestamp + 60));
        _commit(ID, seats[2], CLAIM_A);
        assertTrue(_phase(ID) == PanelPhase.Revealing, "phase");
    }

    function test_commitVote_notSeated_reverts() public {
        _openAndSeat(ID);
        vm.expectRevert(abi.encodeWithSelector(NotSeated.selector, ID, partyA));
        vm.prank(partyA);
        panel.commitVote(ID, bytes32(uint256(1)));
    }

    /// @notice P7: a zero commitment is rejected.
    function test_commitVote_zeroCommitment_reverts() public {
        address[] memory seats = _openAndSeat(ID);
        vm.expectRevert(abi.encodeWithSelector(ZeroCommitment.selector, ID, seats[0]));
        vm.prank(seats[0]);
        panel.commitVote(ID, bytes32(0));
    }

    function test_commitVote_twice_reverts() public {
        address[] memory seats = _openAndSeat(ID);
        _commit(ID, seats[0], CLAIM_A);
        vm.expectRevert(abi.encodeWithSelector(AlreadyCommitted.selector, ID, seats[0]));
        _commit(ID, seats[0], CLAIM_B);
    }

    function test_commitVote_afterDeadline_reverts() public {
        address[] memory seats = _openAndSeat(ID);
        uint64 deadline = _panel(ID).commitDeadline;
        vm.warp(deadline + 1);
        vm.expectRevert(abi.encodeWithSelector(WindowClosed.selector, ID, PanelPhase.Committing, deadline));
        _commit(ID, seats[0], CLAIM_A);
    }

    /// @dev Opens panel `id` for a task whose execution window is `work` seconds and seats it.
    function _openAndSeatWork(uint256 id, uint32 work) internal returns (address[] memory seats) {
        PanelRequest memory r = _request();
        r.workWindow = work;
        game.open(id, r);
        seats = _seat(id);
    }

    /// @notice Issue 25: a seated referee must fetch the checkpoint and recompute a step before it can commit, so its
    ///         window is the disputed task's execution window (what a solver had for every step of it); the rules'
    ///         window stays the floor and MAX_WORK_WINDOW the cap (how long one no-show can hold the dispute).
    function test_seat_commitWindow_isTheTasksExecutionWindow_succeeds() public {
        uint32[3] memory work = [uint32(300), 10, 5 hours];
        uint64[3] memory window = [uint64(300), 60, 1 hours];
        for (uint256 i = 0; i < work.length; ++i) {
            uint256 id = ID + i;
            PanelRequest memory r = _request();
            r.workWindow = work[i];
            game.open(id, r);
            _seat(id);
            assertEq(_panel(id).commitDeadline, block.timestamp + window[i], "commit window");
        }
        assertEq(panel.MAX_WORK_WINDOW(), 1 hours, "cap");
    }

    /// @notice Issue 25, the honest referee on a loaded host: one that commits in the last second of the task's
    ///         window is in time and nobody can unseat it before then; a seat still empty after it is slashed.
    function test_advance_commitWithinTheWorkWindow_notANoShow_succeeds() public {
        address[] memory seats = _openAndSeatWork(ID, 300);
        uint64 deadline = _panel(ID).commitDeadline;
        _commit(ID, seats[0], CLAIM_A);
        vm.warp(block.timestamp + 61); // the old 60-s window is over
        vm.expectRevert(abi.encodeWithSelector(NothingToAdvance.selector, ID, PanelPhase.Committing, deadline));
        panel.advance(ID);
        vm.warp(deadline);
        _commit(ID, seats[1], CLAIM_A);
        vm.warp(deadline + 1);
        vm.expectEmit(true, true, false, true, address(panel));
        emit IRefereePanel.RefereeSlashed(ID, seats[2], 1e18, 1);
        panel.advance(ID);
        assertEq(_stake(seats[1]), NODE_STAKE, "late-window committer slashed");
        assertEq(_stake(seats[2]), NODE_STAKE - 1e18, "no-show not slashed");
        _assertConserved();
    }

    function test_commitVote_notCommitting_reverts() public {
        _open(ID);
        vm.expectRevert(
            abi.encodeWithSelector(PanelNotInPhase.selector, ID, PanelPhase.Seating, PanelPhase.Committing)
        );
        panel.commitVote(ID, bytes32(uint256(1)));
    }

    // ---------------------------------------------------------------- revealVote

    /// @notice P7: nobody reveals before every seat committed.
    function test_revealVote_beforeAllCommitted_reverts() public {
        address[] memory seats = _openAndSeat(ID);
        _commit(ID, seats[0], CLAIM_A);
        _commit(ID, seats[1], CLAIM_A);
        vm.expectRevert(
            abi.encodeWithSelector(PanelNotInPhase.selector, ID, PanelPhase.Committing, PanelPhase.Revealing)
        );
        _reveal(ID, seats[0], CLAIM_A);
    }

    function test_revealVote_wrongSalt_reverts() public {
        address[] memory seats = _openAndSeat(ID);
        _vote3Commit(seats);
        bytes32 c = panel.voteOf(ID, seats[0]).commitment;
        vm.expectRevert(abi.encodeWithSelector(CommitmentMismatch.selector, ID, seats[0], c));
        vm.prank(seats[0]);
        panel.revealVote(ID, CLAIM_A, bytes32("other salt"));
    }

    /// @notice A referee copying another's commitment cannot reveal it (the commitment binds the referee).
    function test_revealVote_copiedCommitment_reverts() public {
        address[] memory seats = _openAndSeat(ID);
        _commit(ID, seats[0], CLAIM_A);
        bytes32 c = panel.voteOf(ID, seats[0]).commitment;
        vm.prank(seats[1]);
        panel.commitVote(ID, c);
        _commit(ID, seats[2], CLAIM_A);
        _reveal(ID, seats[0], CLAIM_A);
        vm.expectRevert(abi.encodeWithSelector(CommitmentMismatch.selector, ID, seats[1], c));
        vm.prank(seats[1]);
        panel.revealVote(ID, CLAIM_A, _salt(seats[0]));
    }

    function test_revealVote_twice_reverts() public {
        address[] memory seats = _openAndSeat(ID);
        _vote3Commit(seats);
        _reveal(ID, seats[0], CLAIM_A);
        vm.expectRevert(abi.encodeWithSelector(AlreadyRevealed.selector, ID, seats[0]));
        _reveal(ID, seats[0], CLAIM_A);
    }

    function test_revealVote_afterDeadline_reverts() public {
        address[] memory seats = _openAndSeat(ID);
        _vote3Commit(seats);
        uint64 deadline = _panel(ID).revealDeadline;
        vm.warp(deadline + 1);
        vm.expectRevert(abi.encodeWithSelector(WindowClosed.selector, ID, PanelPhase.Revealing, deadline));
        _reveal(ID, seats[0], CLAIM_A);
    }

    function test_revealVote_notSeated_reverts() public {
        address[] memory seats = _openAndSeat(ID);
        _vote3Commit(seats);
        vm.expectRevert(abi.encodeWithSelector(NotSeated.selector, ID, partyB));
        _reveal(ID, partyB, CLAIM_B);
    }

    function _vote3Commit(address[] memory seats) internal {
        for (uint256 i = 0; i < 3; ++i) {
            _commit(ID, seats[i], CLAIM_A);
        }
    }

    // ---------------------------------------------------------------- decision

    function test_revealVote_unanimous_paysMajority_succeeds() public {
        address[] memory seats = _openAndSeat(ID);
        bytes32[] memory votes = _votes3(CLAIM_B, CLAIM_B, CLAIM_B);
        for (uint256 i = 0; i < 3; ++i) {
            _commit(ID, seats[i], votes[i]);
        }
        _reveal(ID, seats[0], CLAIM_B);
        _reveal(ID, seats[1], CLAIM_B);
        vm.expectEmit(true, false, false, true, address(panel));
        emit IRefereePanel.PanelDecided(ID, uint8(Verdict.ForB), CLAIM_B);
        _reveal(ID, seats[2], CLAIM_B);
        assertTrue(game.verdictOf(ID) == Verdict.ForB, "verdict");
        for (uint256 i = 0; i < 3; ++i) {
            assertEq(_paid(seats[i]), REWARD / 3, "share");
            assertEq(_locked(seats[i]), 0, "still locked");
        }
        _assertConserved();
    }

    function test_revealVote_thirdValue_neither_succeeds() public {
        _openAndSeat(ID);
        _vote(ID, _votes3(CLAIM_X, CLAIM_A, CLAIM_X));
        assertTrue(game.verdictOf(ID) == Verdict.Neither, "verdict");
        assertEq(_panel(ID).majorityVote, CLAIM_X, "majority");
    }

    /// @notice P7: a vote against the majority is slashed and earns nothing.
    function test_revealVote_wrongVote_slashedAndUnpaid_succeeds() public {
        address[] memory seats = _openAndSeat(ID);
        uint256 burned = token.totalBurned();
        _vote(ID, _votes3(CLAIM_A, CLAIM_B, CLAIM_A));
        assertTrue(game.verdictOf(ID) == Verdict.ForA, "verdict");
        assertEq(_paid(seats[1]), 0, "wrong voter paid");
        assertEq(_stake(seats[1]), NODE_STAKE - 5e18, "wrong voter not slashed");
        assertEq(_locked(seats[1]), 0, "wrong voter rest locked");
        assertEq(_paid(seats[0]), REWARD / 2, "majority share");
        assertEq(_paid(seats[2]), REWARD / 2, "majority share");
        assertEq(token.totalBurned() - burned, 5e18, "slash not burned");
        assertEq(lens.reputationOf(seats[1]).disputesLost, 1, "reputation");
        _assertConserved();
    }

    /// @dev Issue 23 (item 4): without a majority the reward (the challenger's panel fee) goes to every referee
    ///      that revealed; v2 burned it and paid the panel nothing.
    function test_revealVote_noMajority_noDecision_paysTheRevealers_succeeds() public {
        address[] memory seats = _openAndSeat(ID);
        uint256 burned = token.totalBurned();
        _vote(ID, _votes3(CLAIM_A, CLAIM_B, CLAIM_X));
        assertTrue(game.verdictOf(ID) == Verdict.NoDecision, "verdict");
        for (uint256 i = 0; i < 3; ++i) {
            assertEq(_stake(seats[i]), NODE_STAKE, "slashed without a majority");
            assertEq(_locked(seats[i]), 0, "locked");
            assertEq(_paid(seats[i]), REWARD / 3, "a revealer unpaid without a majority");
        }
        assertEq(token.totalBurned() - burned, REWARD - 3 * (REWARD / 3), "only the dust burned");
        _assertConserved();
    }

    function test_revealVote_rewardNotReceived_reverts() public {
        address[] memory seats = _openAndSeat(ID);
        game.setReward(REWARD, 1);
        for (uint256 i = 0; i < 3; ++i) {
            _commit(ID, seats[i], CLAIM_A);
        }
        _reveal(ID, seats[0], CLAIM_A);
        _reveal(ID, seats[1], CLAIM_A);
        vm.expectRevert(abi.encodeWithSelector(RewardNotReceived.selector, ID, REWARD + 1, REWARD));
        _reveal(ID, seats[2], CLAIM_A);
    }

    /// @notice Fuzz: whatever the reward, size and number of wrong voters, no token is created or lost.
    function testFuzz_revealVote_rewardSplit_conservesTokens_succeeds(uint256 reward, uint8 sizeSeed, uint8 wrongSeed)
        public
    {
        uint8 size = uint8(2 * bound(sizeSeed, 0, 3) + 1);
        uint256 wrong = bound(wrongSeed, 0, size / 2);
        reward = bound(reward, 0, FAUCET);
        _addReferees(4);
        panel.setPanelSize(size);
        game.setReward(reward, 0);
        address[] memory seats = _openAndSeat(ID);
        bytes32[] memory votes = new bytes32[](size);
        for (uint256 i = 0; i < size; ++i) {
            votes[i] = i < wrong ? CLAIM_B : CLAIM_A;
        }
        uint256 burned = token.totalBurned();
        _vote(ID, votes);
        uint256 winners = size - wrong;
        uint256 paid;
        for (uint256 i = 0; i < size; ++i) {
            paid += _paid(seats[i]);
            assertEq(_paid(seats[i]), i < wrong ? 0 : reward / winners, "credit");
        }
        assertEq(token.balanceOf(address(panel)), 0, "all paid out or burned");
        assertEq(token.totalBurned() - burned, reward - paid + wrong * 5e18, "burned");
        assertLe(reward - paid, winners - 1, "remainder above rounding");
        _assertConserved();
    }

    // ---------------------------------------------------------------- advance

    function test_advance_nothingToAdvance_reverts() public {
        _open(ID);
        vm.expectRevert(abi.encodeWithSelector(NothingToAdvance.selector, ID, PanelPhase.Seating, 0));
        panel.advance(ID);
        _seat(ID);
        uint64 deadline = _panel(ID).commitDeadline;
        vm.warp(deadline);
        vm.expectRevert(abi.encodeWithSelector(NothingToAdvance.selector, ID, PanelPhase.Committing, deadline));
        panel.advance(ID);
    }

    /// @notice P7: a seat that does not commit is slashed and redrawn; the full panel still decides.
    function test_advance_commitNoShow_slashedAndRedrawn_succeeds() public {
        address[] memory seats = _openAndSeat(ID);
        _commit(ID, seats[0], CLAIM_A);
        _commit(ID, seats[1], CLAIM_A);
        vm.warp(block.timestamp + 61);
        vm.expectEmit(true, true, false, true, address(panel));
        emit IRefereePanel.RefereeSlashed(ID, seats[2], 1e18, 1);
        panel.advance(ID);
        RefereePanel.Panel memory p = _panel(ID);
        assertTrue(p.phase == PanelPhase.Seating, "phase");
        assertEq(p.redraws, 1, "redraws");
        assertEq(p.seats[2], address(0), "seat not emptied");
        assertEq(_stake(seats[2]), NODE_STAKE - 1e18, "no-show not slashed");
        assertEq(_locked(seats[2]), 0, "no-show rest locked");
        assertEq(lens.reputationOf(seats[2]).tasksLate, 1, "late not recorded");
        assertFalse(panel.voteOf(ID, seats[2]).seated, "still seated");
        address[] memory redrawn = _seat(ID);
        assertNotEq(redrawn[2], seats[2], "no-show redrawn");
        assertEq(redrawn[0], seats[0], "seat 0 moved");
        _commit(ID, redrawn[2], CLAIM_A);
        _reveal(ID, seats[0], CLAIM_A);
        _reveal(ID, seats[1], CLAIM_A);
        assertTrue(_phase(ID) == PanelPhase.Revealing, "decided without the full panel");
        _reveal(ID, redrawn[2], CLAIM_A);
        assertTrue(game.verdictOf(ID) == Verdict.ForA, "verdict");
        assertEq(_paid(redrawn[2]), REWARD / 3, "redrawn referee unpaid");
        _assertConserved();
    }

    /// @notice P7: a seat that does not reveal is slashed and redrawn; revealed votes stand.
    function test_advance_revealNoShow_slashedAndRedrawn_succeeds() public {
        address[] memory seats = _openAndSeat(ID);
        for (uint256 i = 0; i < 3; ++i) {
            _commit(ID, seats[i], CLAIM_A);
        }
        _reveal(ID, seats[0], CLAIM_A);
        vm.warp(block.timestamp + 61);
        panel.advance(ID);
        assertEq(_stake(seats[1]), NODE_STAKE - 1e18, "no-show 1 not slashed");
        assertEq(_stake(seats[2]), NODE_STAKE - 1e18, "no-show 2 not slashed");
        RefereePanel.Panel memory p = _panel(ID);
        assertEq(p.committed, 1, "committed count");
        assertEq(p.revealed, 1, "revealed count");
        address[] memory redrawn = _seat(ID);
        _commit(ID, redrawn[1], CLAIM_A);
        _commit(ID, redrawn[2], CLAIM_A);
        assertTrue(_phase(ID) == PanelPhase.Revealing, "reveal not reopened");
        _reveal(ID, redrawn[1], CLAIM_A);
        _reveal(ID, redrawn[2], CLAIM_A);
        assertTrue(game.verdictOf(ID) == Verdict.ForA, "verdict");
        assertEq(_paid(seats[0]), REWARD / 3, "early revealer unpaid");
    }

    /// @notice Attack: a colluder votes for the cheater (B), one honest referee votes A, one honest referee is kept
    ///         offline. 1:1 is no verdict; after the redraw the full panel decides for the honest party.
    function test_advance_colluderWithHonestNoShow_honestWins_succeeds() public {
        address[] memory seats = _openAndSeat(ID);
        (address colluder, address honest, address offline) = (seats[0], seats[1], seats[2]);
        _commit(ID, colluder, CLAIM_B);
        _commit(ID, honest, CLAIM_A);
        vm.warp(block.timestamp + 61);
        panel.advance(ID);
        assertEq(game.verdictCount(), 0, "verdict with a seat missing");
        address[] memory redrawn = _seat(ID);
        _commit(ID, redrawn[2], CLAIM_A);
        _reveal(ID, colluder, CLAIM_B);
        _reveal(ID, honest, CLAIM_A);
        _reveal(ID, redrawn[2], CLAIM_A);
        assertTrue(game.verdictOf(ID) == Verdict.ForA, "cheater won");
        assertEq(_stake(colluder), NODE_STAKE - 5e18, "colluder not slashed");
        assertEq(_stake(offline), NODE_STAKE - 1e18, "no-show not slashed");
        assertEq(_paid(colluder), 0, "colluder paid");
        assertEq(_paid(honest), REWARD / 2, "honest unpaid");
    }

    /// @notice Revealed votes already holding a majority of all seats decide at the reveal deadline.
    function test_advance_revealNoShowWithMajority_decides_succeeds() public {
        address[] memory seats = _openAndSeat(ID);
        for (uint256 i = 0; i < 3; ++i) {
            _commit(ID, seats[i], CLAIM_A);
        }
        _reveal(ID, seats[0], CLAIM_A);
        _reveal(ID, seats[1], CLAIM_A);
        vm.warp(block.timestamp + 61);
        panel.advance(ID);
        assertTrue(game.verdictOf(ID) == Verdict.ForA, "verdict");
        assertEq(_stake(seats[2]), NODE_STAKE - 1e18, "no-show not slashed");
        assertEq(_paid(seats[0]), REWARD / 2, "share");
        _assertConserved();
    }

    function test_advance_redrawLimit_noDecision_succeeds() public {
        address[] memory seats = _openAndSeat(ID);
        for (uint256 round = 0; round <= 2; ++round) {
            if (round == 0) {
                _commit(ID, seats[0], CLAIM_A);
                _commit(ID, seats[1], CLAIM_B);
            }
            vm.warp(block.timestamp + 61);
            panel.advance(ID);
            assertEq(_stake(seats[2]), NODE_STAKE - 1e18, "no-show not slashed");
            if (round < 2) seats = _seat(ID);
        }
        RefereePanel.Panel memory p = _panel(ID);
        assertTrue(p.verdict == Verdict.NoDecision, "verdict");
        assertEq(p.redraws, 2, "redraws");
        assertEq(_locked(seats[0]) + _locked(seats[1]), 0, "remaining seats locked");
        assertEq(_stake(seats[1]), NODE_STAKE, "committed seat slashed");
        _assertConserved();
    }

    function test_advance_decided_reverts() public {
        _openAndSeat(ID);
        _vote(ID, _votes3(CLAIM_A, CLAIM_A, CLAIM_A));
        vm.expectRevert(abi.encodeWithSelector(NothingToAdvance.selector, ID, PanelPhase.Decided, 0));
        panel.advance(ID);
    }

    // ---------------------------------------------------------------- cancel / withdraw

    function test_cancel_releasesUnslashed_succeeds() public {
        address[] memory seats = _openAndSeat(ID);
        _commit(ID, seats[0], CLAIM_A);
        vm.expectEmit(true, false, false, true, address(panel));
        emit IRefereePanel.PanelDecided(ID, 0, bytes32(0));
        game.cancel(ID, 0);
        assertTrue(_phase(ID) == PanelPhase.Decided, "phase");
        assertEq(game.verdictCount(), 0, "callback on cancel");
        for (uint256 i = 0; i < 3; ++i) {
            assertEq(_locked(seats[i]), 0, "locked");
            assertEq(_stake(seats[i]), NODE_STAKE, "slashed");
        }
    }

    /// @dev Issue 23 (item 4): a panel whose dispute went stale is paid the fee the game offers, shared by the seats
    ///      holding a commitment (they did their part); v2 released it unpaid.
    function test_cancel_seated_paysTheFeeToTheCommittedSeats_succeeds() public {
        address[] memory seats = _openAndSeat(ID);
        _commit(ID, seats[0], CLAIM_A);
        _commit(ID, seats[2], CLAIM_A);
        uint256 used = game.cancel(ID, 3e18);
        assertEq(used, 3e18, "used");
        assertEq(_paid(seats[0]), 1.5e18, "a committed seat's part");
        assertEq(_paid(seats[2]), 1.5e18, "a committed seat's part");
        assertEq(_paid(seats[1]), 0, "a seat without a commitment paid");
        _assertConserved();
    }

    /// @dev Seats that never committed take none of the fee (advance would have slashed them).
    function test_cancel_noCommitment_takesNoFee_succeeds() public {
        _openAndSeat(ID);
        assertEq(game.cancel(ID, 3e18), 0, "uncommitted seats took the fee");
    }

    /// @dev A panel still seating has done no work: it takes none of the fee.
    function test_cancel_seating_takesNoFee_succeeds() public {
        _open(ID);
        assertEq(game.cancel(ID, 3e18), 0, "a seating panel took the fee");
    }

    function test_cancel_notGame_reverts() public {
        _open(ID);
        vm.expectRevert(abi.encodeWithSelector(NotGame.selector, address(this)));
        panel.cancel(ID, 0);
    }

    function test_cancel_notLive_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(PanelNotLive.selector, ID, PanelPhase.None));
        game.cancel(ID, 0);
        _open(ID);
        game.cancel(ID, 0);
        vm.expectRevert(abi.encodeWithSelector(PanelNotLive.selector, ID, PanelPhase.Decided));
        game.cancel(ID, 0);
    }

    /// @dev Issue 23 (cheaper disputes): the last reveal pays every majority referee in its own transaction.
    function test_revealVote_last_paysRefereesAtOnce_succeeds() public {
        address[] memory seats = _openAndSeat(ID);
        _vote(ID, _votes3(CLAIM_A, CLAIM_A, CLAIM_A));
        for (uint256 i = 0; i < seats.length; ++i) {
            assertEq(_paid(seats[i]), REWARD / 3, "paid in the deciding reveal");
        }
        _assertConserved();
    }
}
