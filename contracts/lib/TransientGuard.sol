// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @title TransientGuard
/// @notice Reentrancy guard in transient storage (EIP-1153), as OpenZeppelin's ReentrancyGuardTransient, in fewer
///         bytes (NodeRegistry has little room under the project's 20,480-byte bar).
/// @dev Issue 23, cheaper disputes: the storage guard paid a cold read and a write per guarded call (about 2,000 gas
///      net of the refund); a transient one pays about 300. It also keeps no storage slot, so the contracts' layouts
///      start at their own variables (DisputeLens and NodeLens name the slots they read).
abstract contract TransientGuard {
    /// @notice A guarded function was entered again before it returned (OpenZeppelin's error, same selector).
    error ReentrancyGuardReentrantCall();

    // The flag lives in the last transient slot, `not(0)` = 2^256 - 1 (two bytes of code where a hashed slot takes
    // 33): the compiler allocates a contract's own transient variables from slot 0 up (DisputeGame.sparedDefender).

    modifier nonReentrant() {
        _enter();
        _;
        _exit();
    }

    function _enter() private {
        assembly ("memory-safe") {
            if tload(not(0)) {
                mstore(0, 0x3ee5aeb5) // ReentrancyGuardReentrantCall()
                revert(0x1c, 0x04)
            }
            tstore(not(0), 1)
        }
    }

    function _exit() private {
        assembly ("memory-safe") {
            tstore(not(0), 0)
        }
    }
}
