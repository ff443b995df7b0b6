// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Test} from "./base/Test.sol";
import {ChessClock, Clock} from "../../contracts/lib/ChessClock.sol";

/// @notice The chess clock library: a clock runs only while its party is awaited.
contract ChessClockTest is Test {
    using ChessClock for Clock;

    Clock internal c;

    function setUp() public {
        vm.warp(1_000);
    }

    function test_start_fromStopped_runs_succeeds() public {
        assertFalse(c.running(), "stopped");
        c = c.started();
        assertTrue(c.running(), "running");
        assertEq(c.since, 1_000, "since now");
        vm.warp(1_030);
        assertEq(c.elapsed(), 30, "elapsed while running");
        assertEq(c.remaining(100), 70, "remaining");
    }

    function test_start_whenRunning_keepsStart_succeeds() public {
        c = c.started();
        vm.warp(1_010);
        c = c.started();
        assertEq(c.since, 1_000, "not restarted");
    }

    function test_stop_accumulatesUsed_succeeds() public {
        c = c.started();
        vm.warp(1_040);
        c = c.stopped();
        assertEq(c.used, 40, "used");
        assertFalse(c.running(), "stopped");
        vm.warp(2_000);
        assertEq(c.elapsed(), 40, "a stopped clock does not move");
        c = c.stopped();
        assertEq(c.used, 40, "stop twice is a no-op");
        c = c.started();
        vm.warp(2_005);
        assertEq(c.elapsed(), 45, "turns add up");
    }

    function test_expired_onlyWhenRunningAndOver_succeeds() public {
        c = c.started();
        vm.warp(1_100);
        assertFalse(c.expired(100), "at the allowance: still in time");
        vm.warp(1_101);
        assertTrue(c.expired(100), "over the allowance");
        assertEq(c.remaining(100), 0, "nothing left");
        c = c.stopped();
        assertFalse(c.expired(100), "a stopped clock is never out: the game awaits the other party");
    }

    function testFuzz_elapsed_sumOfTurns_succeeds(uint32 t1, uint32 gap, uint32 t2, uint64 allowance) public {
        c = c.started();
        vm.warp(block.timestamp + t1);
        c = c.stopped();
        vm.warp(block.timestamp + gap);
        c = c.started();
        vm.warp(block.timestamp + t2);
        uint256 total = uint256(t1) + t2;
        assertEq(c.elapsed(), total, "elapsed");
        assertEq(c.remaining(allowance), total >= allowance ? 0 : allowance - total, "remaining");
        assertEq(c.expired(allowance), total > allowance, "expired");
    }
}
