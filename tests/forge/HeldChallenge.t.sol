// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {DisputeFixture} from "./base/DisputeFixture.sol";
import {DisputeOutcome, TaskStatus, Verdict, Claim, PostJobParams} from "../../contracts/types/VerityTypes.sol";
import {ChallengeWindowClosed, ChallengeWindowOpen} from "../../contracts/errors/JobRegistryErrors.sol";

/// @notice Held challenges (issue 25): a verifier that committed in the window may hold its reveal while a dispute
///         for the same result runs, and reveal after that dispute ends without replacing the claim. Verifiers then
///         need not each open a game against one wrong result, and a cheater's sybil that challenges with the right
///         result and throws its game cannot shut the held challengers out (P1 still holds).
contract HeldChallengeTest is DisputeFixture {
    /// @dev The sybil challenges with the honest result and throws its game (silent at level 0) long after the
    ///      window; the honest verifier, committed in time and holding, reveals after the sybil lost and wins.
    function test_challengeOptimistic_heldBehindThrownSybil_revealsAfterItAndWins_succeeds() public {
        address solver = _optimistic(hC);
        address sybil = _other(solver, address(0), address(0));
        address verifier = _other(solver, sybil, address(0));
        uint256 sybilId = _challenge(sybil, hH);
        _commitChallenge(verifier, hH, "held");
        vm.roll(block.number + 1);
        Claim memory before = jobs.claimOf(taskId);
        _revealLeaf(sybilId, solver, 0, hC, 2);
        vm.warp(block.timestamp + game.clockAllowance() + 1);
        assertGt(block.timestamp, before.challengeDeadline + before.revealGrace, "the first grace is long over");
        game.timeout(sybilId);
        assertEq(uint8(disputeLens.getDispute(sybilId).outcome), uint8(DisputeOutcome.DefenderWins), "sybil threw");
        // A fresh grace from the settlement: nobody can accept the cheater's result inside it ...
        Claim memory held = jobs.claimOf(taskId);
        uint64 end = uint64(block.timestamp) + uint64(jobs.defaultRevealWindow());
        assertEq(held.challengeDeadline, before.challengeDeadline, "commits still close at the old deadline");
        assertEq(held.challengeDeadline + held.revealGrace, end, "reveals until a grace after the settlement");
        vm.expectRevert(abi.encodeWithSelector(ChallengeWindowOpen.selector, taskId, end));
        jobs.finalize(taskId);
        // ... and the held challenge is revealed in it and beats the cheater.
        uint256 id = _revealChallenge(verifier, hH, "held");
        _toJudgingAt2(id, verifier, solver);
        _decide(id, Verdict.ForA);
        assertEq(uint8(disputeLens.getDispute(id).outcome), uint8(DisputeOutcome.ChallengerWins), "honest wins");
        assertEq(views.getTask(taskId).candidate, verifier, "honest result is the candidate");
        assertEq(registry.getNode(solver).stake, NODE_STAKE - TASK_STAKE, "cheater slashed");
        assertEq(registry.getNode(sybil).stake, NODE_STAKE - TASK_STAKE, "sybil slashed");
        // The new claim's window is a plain one again.
        Claim memory next = jobs.claimOf(taskId);
        assertEq(next.revealGrace, jobs.defaultRevealWindow(), "no hold carried into the new claim");
        assertTrue(_conserved(), "conserved");
        assertTrue(_gameSolvent(), "solvent");
    }

    /// @dev While another challenge of the claim is undecided, a challenge committed in the window may be revealed
    ///      however late (the claim cannot be accepted meanwhile anyway).
    function test_challengeOptimistic_revealedPastGraceWhileAnotherIsOpen_succeeds() public {
        address solver = _optimistic(hC);
        address sybil = _other(solver, address(0), address(0));
        address verifier = _other(solver, sybil, address(0));
        _challenge(sybil, hH);
        _commitChallenge(verifier, hH, "held");
        Claim memory claim = jobs.claimOf(taskId);
        vm.warp(claim.challengeDeadline + claim.revealGrace + 100);
        vm.roll(block.number + 1);
        _revealChallenge(verifier, hH, "held");
        assertEq(views.getTask(taskId).openDisputes, 2, "both count");
    }

    /// @dev The fresh grace is bounded: a challenge still held after it can no longer be revealed, and the claim
    ///      is then accepted.
    function test_challengeOptimistic_heldPastTheFreshGrace_reverts() public {
        address solver = _optimistic(hH);
        address wrong = _other(solver, address(0), address(0));
        address verifier = _other(solver, wrong, address(0));
        uint256 wrongId = _challenge(wrong, hC);
        _commitChallenge(verifier, hC, "held");
        vm.roll(block.number + 1);
        _revealLeaf(wrongId, solver, 0, hH, 2);
        vm.warp(block.timestamp + game.clockAllowance() + 1);
        game.timeout(wrongId);
        uint64 end = uint64(block.timestamp) + uint64(jobs.defaultRevealWindow());
        vm.warp(end + 1);
        vm.expectRevert(abi.encodeWithSelector(ChallengeWindowClosed.selector, taskId, end));
        _revealChallenge(verifier, hC, "held");
        jobs.finalize(taskId);
        assertEq(uint8(_status(taskId)), uint8(TaskStatus.Accepted), "accepted after the fresh grace");
    }

    /// @dev A dispute that ends before the challenge deadline leaves the window as it was.
    function test_settlement_beforeTheDeadline_keepsThePlainGrace_succeeds() public {
        PostJobParams memory p = _params(1, 1, 1);
        p.challengeWindow = uint64(game.clockAllowance()) * 4;
        jobId = _post(p);
        taskId = views.taskOf(jobId, 0, 0);
        address solver = _replica(taskId, 0).node;
        _submit(taskId, solver, hH);
        address wrong = _other(solver, address(0), address(0));
        uint256 wrongId = _challenge(wrong, hC);
        _revealLeaf(wrongId, solver, 0, hH, 2);
        vm.warp(block.timestamp + game.clockAllowance() + 1);
        game.timeout(wrongId);
        Claim memory claim = jobs.claimOf(taskId);
        assertTrue(block.timestamp < claim.challengeDeadline, "settled inside the window");
        assertEq(claim.revealGrace, jobs.defaultRevealWindow(), "plain grace");
    }
}
