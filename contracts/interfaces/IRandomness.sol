// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @title IRandomness
/// @notice Two-phase randomness: a consumer requests, and only later reads a value nobody could know when the
///         request was made. Whoever triggers a draw can therefore not pick a favourable block for it.
/// @dev The default implementation (BlockhashRandomness) uses the hash of a block `delay` blocks after the request;
///      a chain with a VRF or a beacon can replace it behind this interface. Residual bias: docs/protocol-v2.md.
interface IRandomness {
    /// @notice `requester` asked for randomness `requestId`, available from block `targetBlock + 1`.
    event RandomnessRequested(uint256 indexed requestId, address indexed requester, uint64 targetBlock);
    /// @notice A stale request (its target's epoch ended before its value was read) now targets `targetBlock`.
    event RandomnessRenewed(uint256 indexed requestId, uint64 targetBlock);

    /// @notice Requests a random value; returns its id.
    function request() external returns (uint256 requestId);
    /// @notice True once the value can be read (target block mined, and the chain still in the target's epoch).
    function isReady(uint256 requestId) external view returns (bool);
    /// @notice True when the value can no longer be read (the target's epoch ended): renew it.
    function isStale(uint256 requestId) external view returns (bool);
    /// @notice The value; reverts unless isReady.
    function valueOf(uint256 requestId) external view returns (bytes32);
    /// @notice Re-targets a stale request to a future block (anyone).
    function renew(uint256 requestId) external;
}
