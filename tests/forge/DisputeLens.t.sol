// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {DisputeFixture} from "./base/DisputeFixture.sol";
import {DisputeGame} from "../../contracts/DisputeGame.sol";
import {DisputeLens} from "../../contracts/DisputeLens.sol";
import {Merkle} from "../../contracts/lib/Merkle.sol";
import {DisputePhase, DisputeOutcome} from "../../contracts/types/VerityTypes.sol";

/// @notice DisputeLens decodes the game's storage words (issue 23, "room to grow": the views left the game). Every
///         field of a dispute driven to judging is checked against what the test knows it holds, so a layout change
///         in DisputeGame that forgets the lens fails here.
contract DisputeLensTest is DisputeFixture {
    function test_getDispute_everyFieldOfAJudgedDispute_succeeds() public {
        uint256 before = block.timestamp;
        uint256 id = _toJudging();
        DisputeLens.Dispute memory d = disputeLens.getDispute(id);
        assertEq(d.taskId, taskId, "taskId");
        assertEq(uint8(d.phase), uint8(DisputePhase.Judging), "phase");
        assertEq(uint8(d.outcome), uint8(DisputeOutcome.None), "outcome");
        assertFalse(d.optimistic, "a replicated contest");
        assertEq(d.level, 1, "level: the step traces");
        assertEq(d.epoch, views.getTask(taskId).epoch, "epoch");
        assertEq(d.n, 4, "n");
        assertEq(d.k, 2, "k");
        assertEq(d.segment, 2, "segment pinpointed");
        assertEq(d.step, 0, "step pinpointed");
        assertEq(d.lo, 0, "lo");
        assertEq(d.hi, 1, "hi");
        assertEq(d.winnerShareBps, game.winnerShareBps(), "winner share");
        assertEq(d.refereeShareBps, game.refereeShareBps(), "referee share");
        assertEq(d.allowance, game.clockAllowance(), "allowance");
        assertGt(d.phaseAt + 1, before, "phaseAt");
        assertEq(d.taskStake, TASK_STAKE, "task stake");
        assertEq(d.bond, 0, "no bond in a contest");
        assertEq(d.coDefender, address(0), "no co-defender");
        assertEq(d.sides[0].party, honest, "A");
        assertEq(d.sides[1].party, cheater, "B");
        assertEq(d.sides[0].root, Merkle.rootOf(hH), "A root");
        assertEq(d.sides[1].root, Merkle.rootOf(hC), "B root");
        assertEq(d.sides[0].stepRoot, Merkle.rootOf(sH), "A step root");
        assertEq(d.sides[1].stepRoot, Merkle.rootOf(sC), "B step root");
        assertEq(d.sides[0].finalHash, hH[4], "A final");
        assertEq(d.sides[1].finalHash, hC[4], "B final");
        assertEq(d.sides[0].claim, sH[1], "A claim at hi");
        assertEq(d.sides[1].claim, sC[1], "B claim at hi");
        assertEq(d.agreed, sH[0], "agreed leaf at lo");
        assertEq(disputeLens.disputedStep(id), 2 * 2 + 0, "segment * k + step");
    }
}
