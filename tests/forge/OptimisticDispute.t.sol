// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {DisputeFixture} from "./base/DisputeFixture.sol";
import {DisputeGame} from "../../contracts/DisputeGame.sol";
import {Merkle} from "../../contracts/lib/Merkle.sol";
import {
    TaskStatus,
    ReplicaStatus,
    DisputePhase,
    DisputeOutcome,
    ROLE_SOLVER,
    PostJobParams
} from "../../contracts/types/VerityTypes.sol";
import "../../contracts/errors/DisputeGameErrors.sol";
import {ChallengeWindowClosed} from "../../contracts/errors/JobRegistryErrors.sol";

/// @notice Optimistic challenges by verifiers, and fuzzed settlement arithmetic.
contract OptimisticDisputeTest is DisputeFixture {
    address internal solver;
    address internal verifier;

    function _optimistic(bytes32[] memory solverTrace) internal {
        jobId = _post(_params(1, 1, 1));
        taskId = jobs.taskOf(jobId, 0, 0);
        solver = _replica(taskId, 0).node;
        verifier = solver == nodes[0] ? nodes[1] : nodes[0];
        _submit(taskId, solver, solverTrace);
    }

    function _challenge(bytes32[] memory h) internal returns (uint256 id) {
        vm.prank(verifier);
        id = game.challengeOptimistic(
            taskId, Merkle.rootOf(h), h[4], 4, keccak256("verifier cid"), Merkle.proofOf(h, 0), Merkle.proofOf(h, 4)
        );
    }

    function test_challengeOptimistic_honestChallengerWins_succeeds() public {
        _optimistic(hC);
        uint256 vBefore = token.balanceOf(verifier);
        uint256 id = _challenge(hH);
        assertEq(vBefore - token.balanceOf(verifier), game.challengerBond(), "bond posted");
        assertEq(uint8(_status(taskId)), uint8(TaskStatus.Contested), "contested");
        game.pinpoint(id, _pp(hH, hC, 2));
        _submitStepRoot(id, verifier, sH);
        _submitStepRoot(id, solver, sC);
        game.pinpoint(id, _pp(sH, sC, 0));
        _allVote(id, _same(sH[1], game.panelOf(id).length));
        game.resolve(id);
        assertEq(uint8(game.getDispute(id).outcome), uint8(DisputeOutcome.ChallengerWins), "challenger wins");
        assertEq(game.credits(verifier), game.challengerBond() + TASK_STAKE / 2, "bond back + winner share");
        assertEq(jobs.credits(verifier), PAYMENT, "challenger paid for the task");
        assertEq(jobs.getTask(taskId).finalHash, hH[4], "challenger's result accepted");
        assertEq(jobs.getTask(taskId).resultCid, keccak256("verifier cid"), "challenger's cid");
        assertEq(uint8(_replica(taskId, 0).status), uint8(ReplicaStatus.Slashed), "solver slashed");
        assertEq(game.totalBonds(), 0, "no bond held");
        assertTrue(_conserved(), "conserved");
    }

    function test_challengeOptimistic_wrongChallengerLosesBond_succeeds() public {
        _optimistic(hH);
        uint256 id = _challenge(hC);
        // The honest solver (B) answers; the challenger goes silent.
        vm.prank(verifier);
        game.pinpoint(id, _pp(hC, hH, 2));
        _submitStepRoot(id, solver, sH);
        vm.warp(block.timestamp + game.clockAllowance() + 1);
        _heartbeatAll();
        game.timeout(id);
        assertEq(uint8(game.getDispute(id).outcome), uint8(DisputeOutcome.DefenderWins), "defender wins");
        uint256 pot = TASK_STAKE + game.challengerBond();
        assertEq(game.credits(solver), pot / 2, "winner share of stake + bond");
        assertEq(game.credits(verifier), 0, "bond lost");
        assertEq(registry.getNode(verifier).stake, NODE_STAKE - TASK_STAKE, "challenger stake slashed");
        assertEq(jobs.credits(solver), PAYMENT, "solver paid");
        assertTrue(_conserved(), "conserved");
    }

    function test_challengeOptimistic_notVerifier_reverts() public {
        _optimistic(hC);
        address solverOnly = _newNode(99, ROLE_SOLVER, NODE_STAKE);
        bytes32 root = Merkle.rootOf(hH);
        bytes32[] memory p0 = Merkle.proofOf(hH, 0);
        bytes32[] memory p4 = Merkle.proofOf(hH, 4);
        vm.prank(solverOnly);
        vm.expectRevert(abi.encodeWithSelector(NotVerifier.selector, solverOnly));
        game.challengeOptimistic(taskId, root, hH[4], 4, 0, p0, p4);
    }

    function test_challengeOptimistic_sameResult_reverts() public {
        _optimistic(hH);
        vm.expectRevert(abi.encodeWithSelector(NoDisagreement.selector, taskId, hH[4]));
        _challenge(hH);
    }

    function test_challengeOptimistic_afterWindow_reverts() public {
        _optimistic(hC);
        uint64 deadline = jobs.getTask(taskId).challengeDeadline;
        vm.warp(deadline + 1);
        vm.expectRevert(abi.encodeWithSelector(ChallengeWindowClosed.selector, taskId, deadline));
        _challenge(hH);
    }

    function test_challengeOptimistic_badProof_reverts() public {
        _optimistic(hC);
        bytes32 root = Merkle.rootOf(hH);
        bytes32[] memory p0 = Merkle.proofOf(hH, 0);
        bytes32[] memory p4 = Merkle.proofOf(hH, 3);
        vm.prank(verifier);
        vm.expectRevert(abi.encodeWithSelector(InvalidDisputeProof.selector, 0, uint8(0), 4, hH[4]));
        game.challengeOptimistic(taskId, root, hH[4], 4, 0, p0, p4);
    }

    function test_challengeOptimistic_notRevealed_reverts() public {
        jobId = _post(_params(1, 1, 1));
        vm.expectRevert(abi.encodeWithSelector(TaskNotDisputable.selector, 1, TaskStatus.Assigned));
        vm.prank(nodes[0]);
        game.challengeOptimistic(1, 0, 0, 4, 0, new bytes32[](0), new bytes32[](0));
    }

    /// @dev Every slashed token ends up credited to the winner, credited to revealing referees, or burned.
    function testFuzz_settlement_splitsPot_succeeds(uint16 winnerBps, uint16 refBps, uint96 taskStake, uint8 silent)
        public
    {
        uint256 w = bound(winnerBps, 0, 10_000);
        uint256 r = bound(refBps, 0, 10_000 - w);
        game.setShares(w, r);
        uint256 stakeAmt = bound(taskStake, 1, 500e18);
        uint256 silentCount = bound(silent, 0, 2);
        jobId = _post(_withStake(stakeAmt));
        taskId = 1;
        honest = _replica(1, 0).node;
        cheater = _replica(1, 1).node;
        _runReplicated(1, hH, hC);
        vm.prank(honest);
        uint256 id = game.openDisputeWithPinpoint(1, _pp(hH, hC, 2));
        _submitStepRoot(id, honest, sH);
        _submitStepRoot(id, cheater, sC);
        game.pinpoint(id, _pp(sH, sC, 0));
        address[] memory panel = game.panelOf(id);
        for (uint256 i = 0; i < panel.length; ++i) {
            _vote(id, panel[i], sH[1]);
        }
        for (uint256 i = silentCount; i < panel.length; ++i) {
            _revealVote(id, panel[i], sH[1]);
        }
        vm.warp(block.timestamp + game.voteCommitWindow() + game.voteRevealWindow() + 1);
        uint256 burned = token.totalBurned();
        game.resolve(id);
        uint256 revealed = panel.length - silentCount;
        uint256 each = ((stakeAmt * r) / 10_000) / revealed;
        uint256 penalty = (game.refereeStake() * game.refereeSlashBps()) / 10_000;
        assertEq(game.credits(honest), (stakeAmt * w) / 10_000, "winner");
        assertEq(game.credits(panel[panel.length - 1]), each, "referee");
        assertEq(
            token.totalBurned() - burned,
            stakeAmt - (stakeAmt * w) / 10_000 - each * revealed + penalty * silentCount,
            "burn"
        );
        assertEq(token.balanceOf(address(game)), game.totalCredits() + game.totalBonds(), "game holds credits");
        assertTrue(_conserved(), "conserved");
    }

    function _withStake(uint256 stakeAmt) internal pure returns (PostJobParams memory p) {
        p = _params(1, 1, 2);
        p.stakePerReplica = stakeAmt;
    }
}
