// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @notice One party's chess clock: time used on finished turns, and when the running turn started (0 = stopped).
///         The memory form: DisputeGame keeps the two fields beside the party in one storage word.
struct Clock {
    uint64 used;
    uint64 since;
}

/// @title ChessClock
/// @notice A clock runs only while the game awaits its owner's move; a party is out of time once a running clock
///         has used more than the allowance. Used for both parties of a dispute.
library ChessClock {
    /// @notice The clock started at `block.timestamp` (unchanged when already running).
    function started(Clock memory c) internal view returns (Clock memory) {
        if (c.since == 0) c.since = uint64(block.timestamp);
        return c;
    }

    /// @notice The clock stopped, the running turn added to `used` (unchanged when stopped).
    function stopped(Clock memory c) internal view returns (Clock memory) {
        uint64 since = c.since;
        if (since == 0) return c;
        c.used += uint64(block.timestamp) - since;
        c.since = 0;
        return c;
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
