// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @notice No randomness request has id `requestId`.
/// @param requestId The unknown id.
error UnknownRequest(uint256 requestId);

/// @notice The value of `requestId` cannot be read: its target block is not mined yet, or its hash is no longer
///         readable (its epoch ended: stale, renew it).
/// @param requestId The request.
/// @param targetBlock The block whose hash decides the value.
/// @param blockNumber The current block.
error RandomnessNotReady(uint256 requestId, uint64 targetBlock, uint256 blockNumber);

/// @notice Only a stale request (its target's epoch ended) can be renewed.
/// @param requestId The request.
/// @param targetBlock The block whose hash decides the value.
/// @param blockNumber The current block.
error RequestNotStale(uint256 requestId, uint64 targetBlock, uint256 blockNumber);
