// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {DisputeFixture} from "./base/DisputeFixture.sol";
import {DisputeGame} from "../../contracts/DisputeGame.sol";
import {Merkle} from "../../contracts/lib/Merkle.sol";
import {
    DisputePhase, DisputeOutcome, Verdict, PostJobParams, TaskStatus, ReplicaStatus
} from "../../contracts/types/VerityTypes.sol";
import "../../contracts/errors/DisputeGameErrors.sol";

/// @notice Fate follows claims: two replicas that revealed the same trace defend it together (either moves at the
///         checkpoint level, both answer for it), but B's step root is the claim of the member that submitted it:
///         it alone moves for B at level 1 and alone answers for B's step-level loss (verdict or clock). The attack
///         these tests pin down: a malicious member, a sybil challenger and a bogus step root must not cost the
///         honest member its stake.
contract CoDefenderTest is DisputeFixture {
    uint256 internal constant BOND = 10e18;

    address internal defender; // replica slot 0: party B
    address internal co; // replica slot 1: B's co-defender
    address internal sybil; // the challenger (party A)
    bytes32[] internal sBogus; // segment 2 from the agreed checkpoint to the HONEST checkpoint 3, wrong at step 0
    bytes32[] internal sX; // the sybil's segment 2: right at step 0, ends at its wrong checkpoint 3 (hC[3])

    function setUp() public override {
        super.setUp();
        sBogus = _steps(hH[2], keccak256("bogus step 5"), hH[3]);
        sX = _steps(hH[2], sH[1], hC[3]);
    }

    // ---------------------------------------------------------------- helpers

    /// @dev Both replicas reveal `h` (the task stays Revealed with a co-defender); checkpoint interval `k`.
    function _pair(bytes32[] memory h, uint32 k) internal {
        PostJobParams memory p = _params(1, 1, 2);
        p.checkpointInterval = k;
        p.stepsPerRound = 4 * k;
        jobId = _post(p);
        taskId = views.taskOf(jobId, 0, 0);
        defender = _replica(taskId, 0).node;
        co = _replica(taskId, 1).node;
        _runReplicated(taskId, h, h);
        require(_status(taskId) == TaskStatus.Revealed, "not revealed");
        sybil = _other(defender, co, address(0));
    }

    /// @dev The attack up to Judging: honest pair (hH), the sybil challenges with hC, the malicious member `m`
    ///      (the co-defender or the defender) front-runs B's step root with sBogus; level 1 narrows to step 0 (sybil right, m's bogus leaf wrong).
    function _attackToJudging(bool coIsMalicious) internal returns (uint256 id, address m, address h) {
        _pair(hH, 2);
        (m, h) = coIsMalicious ? (co, defender) : (defender, co);
        id = _challenge(sybil, hC);
        game.pinpoint(id, _pp(hC, hH, 2));
        _submitStepRoot(id, m, sBogus);
        // The honest member's own (honest) step root comes second: B has moved.
        bytes32 root = Merkle.rootOf(sH);
        bytes32[] memory p0 = Merkle.proofOf(sH, 0);
        bytes32[] memory p2 = Merkle.proofOf(sH, 2);
        vm.prank(h);
        vm.expectRevert(abi.encodeWithSelector(AlreadyMoved.selector, id, h));
        game.submitStepRoot(id, root, p0, p2);
        _submitStepRoot(id, sybil, sX);
        assertEq(disputeLens.getDispute(id).stepRootBy, m == defender ? 1 : 2, "submitter recorded");
        _revealLeaf(id, sybil, 1, sX, 1);
        _revealLeaf(id, m, 1, sBogus, 1);
        require(disputeLens.getDispute(id).phase == DisputePhase.Judging, "not judging");
    }

    function _assertAccounting() internal view {
        assertTrue(_conserved(), "conserved");
        assertTrue(_gameSolvent(), "solvent");
        assertEq(game.sparedDefender(), address(0), "spared only during the settlement call");
    }

    // ---------------------------------------------------------------- the attack

    /// @dev The malicious co-defender submits a bogus step root; the panel rightly rules for the sybil's step: only
    ///      the co-defender is slashed, the honest defender keeps its stake.
    function test_coDefender_bogusStepRoot_sybilWins_honestDefenderNotSlashed_succeeds() public {
        (uint256 id,, address h) = _attackToJudging(true);
        _recordBalances();
        uint256 reward = _decide(id, Verdict.ForA);
        assertEq(uint8(disputeLens.getDispute(id).outcome), uint8(DisputeOutcome.ChallengerWins), "sybil's step wins");
        assertEq(registry.getNode(h).stake, NODE_STAKE, "honest member not slashed");
        assertEq(lens.reputationOf(h).disputesLost, 0, "honest member: no lost dispute");
        assertEq(registry.getNode(co).stake, NODE_STAKE - TASK_STAKE, "attacker's member slashed");
        assertEq(reward, TASK_STAKE / 4, "referees' share of one stake");
        assertEq(_paidSince(sybil), BOND + TASK_STAKE / 2, "bond back + winner share of one stake");
        assertEq(_paidSince(h), 0, "honest member not paid by the game");
        _assertAccounting();
    }

    /// @dev Same attack with the roles swapped: the malicious member is party B itself.
    function test_coDefender_bogusStepRootByDefender_honestCoDefenderNotSlashed_succeeds() public {
        (uint256 id, address m, address h) = _attackToJudging(false);
        assertEq(h, co, "honest co-defender");
        assertEq(m, defender, "malicious defender");
        _decide(id, Verdict.ForA);
        assertEq(registry.getNode(co).stake, NODE_STAKE, "honest co-defender not slashed");
        assertEq(registry.getNode(defender).stake, NODE_STAKE - TASK_STAKE, "malicious defender slashed");
        _assertAccounting();
    }

    /// @dev The panel finds neither step right: A and the submitter lose, the other member does not.
    function test_coDefender_bogusStepRoot_neither_onlySubmitterAndSybilSlashed_succeeds() public {
        (uint256 id,, address h) = _attackToJudging(true);
        uint256 burned = token.totalBurned();
        uint256 reward = _decide(id, Verdict.Neither);
        assertEq(uint8(disputeLens.getDispute(id).outcome), uint8(DisputeOutcome.BothLose), "both lose");
        assertEq(registry.getNode(h).stake, NODE_STAKE, "honest member not slashed");
        assertEq(registry.getNode(co).stake, NODE_STAKE - TASK_STAKE, "submitter slashed");
        assertEq(registry.getNode(sybil).stake, NODE_STAKE - TASK_STAKE, "sybil slashed");
        uint256 pot = 2 * TASK_STAKE + BOND;
        assertEq(reward, pot / 4, "referees");
        assertEq(token.totalBurned() - burned, pot - reward, "rest burned");
        _assertAccounting();
    }

    /// @dev At level 1 B's leaves come from the submitter's step trace: the other member cannot move for B.
    function test_revealLeaf_level1ByNonSubmitter_reverts() public {
        _pair(hH, 2);
        uint256 id = _challenge(sybil, hC);
        game.pinpoint(id, _pp(hC, hH, 2));
        _submitStepRoot(id, co, sBogus);
        _submitStepRoot(id, sybil, sX);
        bytes32[] memory proof = Merkle.proofOf(sBogus, 1);
        vm.prank(defender);
        vm.expectRevert(abi.encodeWithSelector(NotStepRootSubmitter.selector, id, defender));
        game.revealLeaf(id, 1, 1, sBogus[1], proof);
        _revealLeaf(id, co, 1, sBogus, 1);
        assertEq(uint8(disputeLens.getDispute(id).phase), uint8(DisputePhase.Bisect1), "awaits A");
    }

    // ---------------------------------------------------------------- losing on the clock

    /// @dev Checkpoint level: either member could have answered, neither did: both lose their stake.
    function test_timeout_checkpointLevelBSilent_bothMembersSlashed_succeeds() public {
        _pair(hC, 2);
        uint256 id = _challenge(sybil, hH);
        _revealLeaf(id, sybil, 0, hH, 2);
        vm.warp(block.timestamp + game.clockAllowance() + 1);
        _recordBalances();
        game.timeout(id);
        assertEq(uint8(disputeLens.getDispute(id).outcome), uint8(DisputeOutcome.ChallengerWins), "B lost on time");
        assertEq(registry.getNode(defender).stake, NODE_STAKE - TASK_STAKE, "defender slashed");
        assertEq(registry.getNode(co).stake, NODE_STAKE - TASK_STAKE, "co-defender slashed");
        assertEq(_paidSince(sybil), BOND + TASK_STAKE, "winner share of both stakes");
        _assertAccounting();
    }

    /// @dev Step roots awaited and neither member submitted B's: both lose their stake.
    function test_timeout_noStepRootFromB_bothMembersSlashed_succeeds() public {
        _pair(hC, 2);
        uint256 id = _challenge(sybil, hH);
        game.pinpoint(id, _pp(hH, hC, 2));
        _submitStepRoot(id, sybil, sH);
        vm.warp(block.timestamp + game.clockAllowance() + 1);
        game.timeout(id);
        assertEq(registry.getNode(defender).stake, NODE_STAKE - TASK_STAKE, "defender slashed");
        assertEq(registry.getNode(co).stake, NODE_STAKE - TASK_STAKE, "co-defender slashed");
        _assertAccounting();
    }

    /// @dev After the malicious member's step root, it goes silent at level 1 (the honest member cannot move there):
    ///      only the submitter loses on the clock.
    function test_timeout_afterStepRoot_onlySubmitterSlashed_succeeds() public {
        _pair(hH, 2);
        uint256 id = _challenge(sybil, hC);
        game.pinpoint(id, _pp(hC, hH, 2));
        _submitStepRoot(id, co, sBogus);
        _submitStepRoot(id, sybil, sX);
        _revealLeaf(id, sybil, 1, sX, 1);
        vm.warp(block.timestamp + game.clockAllowance() + 1);
        _recordBalances();
        game.timeout(id);
        assertEq(uint8(disputeLens.getDispute(id).outcome), uint8(DisputeOutcome.ChallengerWins), "B lost on time");
        assertEq(registry.getNode(defender).stake, NODE_STAKE, "non-submitter not slashed");
        assertEq(registry.getNode(co).stake, NODE_STAKE - TASK_STAKE, "submitter slashed");
        assertEq(_paidSince(sybil), BOND + TASK_STAKE / 2, "winner share of one stake");
        _assertAccounting();
    }

    // ---------------------------------------------------------------- checkpoint-level verdicts (k == 1)

    /// @dev k == 1: the pinpointed checkpoint is the judged step; both members asserted the same wrong leaf.
    function test_onVerdict_checkpointLevelClaim_bothMembersSlashed_succeeds() public {
        _pair(hC, 1);
        uint256 id = _challenge(sybil, hH);
        game.pinpoint(id, _pp(hH, hC, 2));
        assertEq(uint8(disputeLens.getDispute(id).phase), uint8(DisputePhase.Judging), "judged at level 0");
        uint256 reward = _decide(id, Verdict.ForA);
        assertEq(registry.getNode(defender).stake, NODE_STAKE - TASK_STAKE, "defender slashed");
        assertEq(registry.getNode(co).stake, NODE_STAKE - TASK_STAKE, "co-defender slashed");
        assertEq(reward, (2 * TASK_STAKE) / 4, "referees' share of both stakes");
        _assertAccounting();
    }

    // ---------------------------------------------------------------- winner share when B wins

    /// @dev Neither member moved (a third party pinpointed, k == 1): both share the winner's share equally.
    function test_onVerdict_forBNoMember_moved_sharedEqually_succeeds() public {
        _pair(hH, 1);
        uint256 id = _challenge(sybil, hC);
        game.pinpoint(id, _pp(hC, hH, 2));
        _recordBalances();
        _decide(id, Verdict.ForB);
        uint256 toWinner = (TASK_STAKE + BOND) / 2;
        assertEq(_paidSince(co), toWinner / 2, "co-defender's half");
        assertEq(_paidSince(defender), toWinner - toWinner / 2, "defender's half");
        _assertAccounting();
    }

    /// @dev Both members made moves: equal parts.
    function test_onVerdict_forBBothMoved_sharedEqually_succeeds() public {
        _pair(hH, 2);
        uint256 id = _challenge(sybil, hC);
        _revealLeaf(id, defender, 0, hH, 2);
        _revealLeaf(id, sybil, 0, hC, 2);
        _revealLeaf(id, co, 0, hH, 3);
        _revealLeaf(id, sybil, 0, hC, 3);
        _submitStepRoot(id, defender, sH);
        _submitStepRoot(id, sybil, sC);
        _revealLeaf(id, defender, 1, sH, 1);
        _revealLeaf(id, sybil, 1, sC, 1);
        assertEq(disputeLens.getDispute(id).movedB, 3, "both moved");
        _recordBalances();
        _decide(id, Verdict.ForB);
        uint256 toWinner = (TASK_STAKE + BOND) / 2;
        assertEq(_paidSince(co), toWinner / 2, "co-defender's half");
        assertEq(_paidSince(defender), toWinner - toWinner / 2, "defender's half");
        assertEq(lens.reputationOf(co).disputesWon, 1, "co won++");
        _assertAccounting();
    }

    /// @dev Only the co-defender moved: it alone earns the winner's share.
    function test_onVerdict_forBOnlyCoDefenderMoved_coDefenderPaid_succeeds() public {
        _pair(hH, 2);
        uint256 id = _challenge(sybil, hC);
        game.pinpoint(id, _pp(hC, hH, 2));
        _submitStepRoot(id, co, sH);
        _submitStepRoot(id, sybil, sX);
        game.pinpoint(id, _pp(sX, sH, 1));
        _recordBalances();
        _decide(id, Verdict.ForB);
        assertEq(_paidSince(co), (TASK_STAKE + BOND) / 2, "mover paid");
        assertEq(_paidSince(defender), 0, "idle member not paid");
        assertEq(lens.reputationOf(defender).disputesWon, 0, "idle member: no win recorded");
        _assertAccounting();
    }

    // ---------------------------------------------------------------- conservation

    /// @dev Either member submits B's (honest) step root; every verdict, any shares and bond: exact accounting, and
    ///      the member that did not submit is never slashed.
    function testFuzz_coDefender_stepLevel_tokensConserved_succeeds(
        bool coSubmits,
        uint8 v,
        uint16 wBps,
        uint16 rBps,
        uint64 bond
    ) public {
        uint256 w = bound(wBps, 0, 10_000);
        uint256 r = bound(rBps, 0, 10_000 - w);
        uint256 b = bound(bond, 1e18, 100e18); // the bond's on-chain range
        game.setShares(w, r);
        game.setChallengerBond(b);
        Verdict verdict = Verdict(bound(v, 1, 4));
        _pair(hH, 2);
        (address m, address other) = coSubmits ? (co, defender) : (defender, co);
        uint256 id = _challenge(sybil, hC);
        game.pinpoint(id, _pp(hC, hH, 2));
        _submitStepRoot(id, m, sH);
        _submitStepRoot(id, sybil, sX);
        game.pinpoint(id, _pp(sX, sH, 1));
        uint256 burned = token.totalBurned();
        _recordBalances();
        uint256 reward = _decide(id, verdict);
        uint256 pot = verdict == Verdict.ForA
            ? TASK_STAKE
            : verdict == Verdict.ForB ? TASK_STAKE + b : verdict == Verdict.Neither ? 2 * TASK_STAKE + b : 0;
        uint256 toWinner = verdict == Verdict.ForA || verdict == Verdict.ForB ? (pot * w) / 10_000 : 0;
        // issue 23 (item 4): a challenger that did not lose pays its panel the fee beyond the referees' share
        uint256 share = (pot * r) / 10_000;
        assertEq(reward, share + _topUp(verdict, share), "referees");
        assertEq(token.totalBurned() - burned, pot - toWinner - share, "burn");
        toWinner += verdict == Verdict.ForA || verdict == Verdict.NoDecision ? b - _topUp(verdict, share) : 0;
        assertEq(_paidSince(sybil) + _paidSince(m) + _paidSince(other), toWinner, "credits");
        assertEq(_paidSince(other), 0, "the idle member earns nothing");
        assertEq(registry.getNode(other).stake, NODE_STAKE, "non-submitter never slashed");
        _assertAccounting();
    }

    // ---------------------------------------------------------------- the job registry releases the spared member

    /// @dev ChallengerWins at step level: the spared member's replica is Voided, its stake unlocked, and it is not
    ///      paid when the new candidate is accepted.
    function test_onDisputeSettled_sparedMember_voidedAndUnlocked_succeeds() public {
        (uint256 id,, address h) = _attackToJudging(true);
        uint256 locked = registry.getNode(h).locked;
        _decide(id, Verdict.ForA);
        assertEq(uint8(_replica(taskId, 0).status), uint8(ReplicaStatus.Voided), "spared replica voided");
        assertEq(uint8(_replica(taskId, 1).status), uint8(ReplicaStatus.Slashed), "submitter's replica slashed");
        assertEq(locked - registry.getNode(h).locked, TASK_STAKE, "spared stake unlocked");
        assertEq(registry.getNode(h).stake, NODE_STAKE, "not slashed");
        assertEq(views.getTask(taskId).candidate, sybil, "sybil's result is only a candidate");
        vm.warp(block.timestamp + 1_000);
        _recordBalances();
        jobs.finalize(taskId);
        assertEq(_paidSince(h), 0, "spared member not paid");
        _assertAccounting();
    }

    /// @dev BothLose at step level: the task is reopened; the spared member is released, the submitter slashed.
    function test_onDisputeSettled_sparedMemberOnBothLose_voidedAndUnlocked_succeeds() public {
        (uint256 id,, address h) = _attackToJudging(false);
        uint256 locked = registry.getNode(h).locked;
        _decide(id, Verdict.Neither);
        assertEq(uint8(_replica(taskId, 1).status) == uint8(ReplicaStatus.Voided)
            || _replica(taskId, 1).node != h, true, "spared replica voided or its slot redrawn");
        assertEq(locked - registry.getNode(h).locked, TASK_STAKE, "spared stake unlocked");
        assertEq(registry.getNode(h).stake, NODE_STAKE, "not slashed");
        _assertAccounting();
    }

    /// @dev Timeout after the submitter's step root: the other member is released too.
    function test_onDisputeSettled_sparedMemberOnTimeout_unlocked_succeeds() public {
        _pair(hH, 2);
        uint256 id = _challenge(sybil, hC);
        game.pinpoint(id, _pp(hC, hH, 2));
        _submitStepRoot(id, co, sBogus);
        _submitStepRoot(id, sybil, sX);
        _revealLeaf(id, sybil, 1, sX, 1);
        uint256 locked = registry.getNode(defender).locked;
        vm.warp(block.timestamp + game.clockAllowance() + 1);
        game.timeout(id);
        assertEq(uint8(_replica(taskId, 0).status), uint8(ReplicaStatus.Voided), "spared replica voided");
        assertEq(locked - registry.getNode(defender).locked, TASK_STAKE, "spared stake unlocked");
        _assertAccounting();
    }

    /// @dev Both members answer at the checkpoint level: nobody is spared, both replicas Slashed.
    function test_onDisputeSettled_checkpointLevel_nobodySpared_succeeds() public {
        _pair(hC, 1);
        uint256 id = _challenge(sybil, hH);
        game.pinpoint(id, _pp(hH, hC, 2));
        _decide(id, Verdict.ForA);
        assertEq(uint8(_replica(taskId, 0).status), uint8(ReplicaStatus.Slashed), "defender slashed");
        assertEq(uint8(_replica(taskId, 1).status), uint8(ReplicaStatus.Slashed), "co-defender slashed");
        _assertAccounting();
    }
}
