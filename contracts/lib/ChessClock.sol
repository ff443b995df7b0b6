// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @notice One party's chess clock: time used on finished turns, and when the running turn started (0 = stopped).
struct Clock {
    uint64 used;
    uint64 since;
}

/// @title ChessClock
/// @notice A clock runs only while the game awaits its owner's move; a party is out of time once a running clock
///         has used more than the allowance. Used for both parties of a dispute.
library ChessClock {
    /// @notice Starts the clock at `block.timestamp` (no-op when already running).
    function start(Clock storage c) internal {
        if (c.since == 0) c.since = uint64(block.timestamp);
    }

    /// @notice Stops the clock, adding the running turn to `used` (no-op when stopped).
    function stop(Clock storage c) internal {
        uint64 since = c.since;
        if (since == 0) return;
        c.used += uint64(block.timestamp) - since;
        c.since = 0;
    }

    /// @notice True while the clock runs (the game awaits this party).
    function running(Clock memory c) internal pure returns (bool) {
        return c.since != 0;
    }

    /// @notice Seconds used so far, the running turn included.
    function elapsed(Clock memory c) internal view returns (uint256) {
        return uint256(c.used) + (c.since == 0 ? 0 : block.timestamp - c.since);
    }

    /// @notice Seconds left of `allowance` (0 when spent).
    function remaining(Clock memory c, uint64 allowance) internal view returns (uint256) {
        uint256 used = elapsed(c);
        return used >= allowance ? 0 : allowance - used;
    }

    /// @notice True when the clock runs and has used more than `allowance`: the party can no longer move.
    function expired(Clock memory c, uint64 allowance) internal view returns (bool) {
        return c.since != 0 && elapsed(c) > allowance;
    }
}
