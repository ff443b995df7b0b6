// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {DisputeFixture} from "./base/DisputeFixture.sol";
import {DisputeOutcome, PostJobParams, WORK_WINDOW_CAP} from "../../contracts/types/VerityTypes.sol";
import {ClockNotExpired} from "../../contracts/errors/DisputeGameErrors.sol";

/// @notice Each party's chess clock is at least the disputed task's execution window, capped at WORK_WINDOW_CAP
///         (issue 25): at 32 hosts on 2 cores, honest challengers that replayed their segment at load 30 ran past
///         the 120-s allowance and were slashed on time while the cheater kept its result.
contract DisputeClocksTest is DisputeFixture {
    /// @dev An optimistic task with execution window `window`, its solver's wrong result, and an honest challenge.
    function _disputeWithWindow(uint64 window) internal returns (uint256 id, address solver, address verifier) {
        PostJobParams memory p = _params(1, 1, 1);
        p.executionWindow = window;
        jobId = _post(p);
        taskId = views.taskOf(jobId, 0, 0);
        solver = _replica(taskId, 0).node;
        _submit(taskId, solver, hC);
        verifier = _other(solver, address(0), address(0));
        id = _challenge(verifier, hH);
    }

    function test_challenge_clockIsTheTasksExecutionWindow_slowHonestPartyNotTimedOut_succeeds() public {
        (uint256 id,, address verifier) = _disputeWithWindow(600);
        assertEq(disputeLens.getDispute(id).allowance, 600, "the task's execution window");
        // The cheater answers at once; the honest challenger replays its segment slowly on a loaded host.
        _revealLeaf(id, _replica(taskId, 0).node, 0, hC, 2);
        vm.warp(block.timestamp + game.clockAllowance() + 60);
        vm.expectRevert(abi.encodeWithSelector(ClockNotExpired.selector, id));
        game.timeout(id);
        _revealLeaf(id, verifier, 0, hH, 2);
        assertEq(uint8(disputeLens.getDispute(id).outcome), uint8(DisputeOutcome.None), "still in play");
    }

    function test_challenge_clockCappedAtTheWorkWindowCap_succeeds() public {
        (uint256 id,,) = _disputeWithWindow(5 hours);
        assertEq(disputeLens.getDispute(id).allowance, WORK_WINDOW_CAP, "a silent party holds at most the cap");
        vm.warp(block.timestamp + WORK_WINDOW_CAP + 1);
        game.timeout(id);
        assertEq(uint8(disputeLens.getDispute(id).outcome), uint8(DisputeOutcome.BothLose), "both silent: both lose");
    }

    function test_challenge_shortWindow_keepsTheClockAllowance_succeeds() public {
        (uint256 id,,) = _disputeWithWindow(60);
        assertEq(disputeLens.getDispute(id).allowance, game.clockAllowance(), "the allowance is the floor");
    }

    /// @dev The game keeps each clock beside its party in one storage word (issue 23, cheaper disputes): a party's
    ///      finished turns still count against its allowance, so slow moves add up to a timeout.
    function test_clock_turnsAddUpAcrossMoves_slowPartyTimesOut_succeeds() public {
        (uint256 id, address solver, address verifier) = _disputeWithWindow(60);
        uint256 allowance = game.clockAllowance();
        _revealLeaf(id, solver, 0, hC, 2);
        vm.warp(block.timestamp + allowance - 40);
        _revealLeaf(id, verifier, 0, hH, 2);
        assertEq(disputeLens.getDispute(id).sides[0].clock.used, allowance - 40, "the challenger's first turn counted");
        require(disputeLens.getDispute(id).mid == 3, "a second leaf is requested");
        _revealLeaf(id, solver, 0, hC, 3);
        vm.warp(block.timestamp + 41);
        (uint256 left,) = disputeLens.clocksRemaining(id);
        assertEq(left, 0, "both turns together ran past the allowance");
        game.timeout(id);
        assertEq(uint8(disputeLens.getDispute(id).outcome), uint8(DisputeOutcome.DefenderWins), "out of time");
    }
}
