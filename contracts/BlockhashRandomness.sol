// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {IRandomness} from "./interfaces/IRandomness.sol";
import {SELECTION_EPOCH_BLOCKS, MIN_DRAW_BLOCKS} from "./types/VerityTypes.sol";
import {ParameterOutOfRange} from "./errors/CommonErrors.sol";
import {UnknownRequest, RandomnessNotReady, RequestNotStale} from "./errors/RandomnessErrors.sol";

/// @title BlockhashRandomness
/// @notice Two-phase randomness from the hash of a block mined `delay` blocks after the request
///         (docs/protocol-v2.md, "Randomness"). Whoever triggers a draw cannot pick the block that decides it.
///         A value is readable only while the chain is still in its target block's selection epoch
///         (SELECTION_EPOCH_BLOCKS): the node weights every draw reads were fixed when that epoch began, before the
///         value could be known. A target leaves at least MIN_DRAW_BLOCKS blocks of its epoch after it (else it is the
///         next epoch's first block); a request whose epoch ended unread is stale and is renewed.
/// @dev Residual bias: the proposer of the target block may withhold it; a rollup sequencer chooses its hashes; a
///      value nobody read in its epoch is renewed, so a party that alone can land the draw may let it lapse once.
contract BlockhashRandomness is IRandomness {
    /// @notice Depth of the EVM's readable block-hash window.
    uint256 public constant HASH_WINDOW = 256;
    /// @notice Blocks per selection epoch (VerityTypes.SELECTION_EPOCH_BLOCKS): a value is readable only inside its
    ///         target block's epoch.
    uint256 public constant EPOCH_BLOCKS = SELECTION_EPOCH_BLOCKS;
    /// @notice Largest accepted delay (keeps a target inside a reasonable horizon).
    uint64 public constant MAX_DELAY = 1_000_000;

    /// @notice Blocks between a request (or renewal) and its target block.
    uint64 public immutable delay;
    /// @notice Number of requests (ids 1..requestCount).
    uint256 public requestCount;
    /// @dev Target block of each request, four to a word (key id >> 2, 64-bit lane id & 3; 0 = unknown id): three
    ///      requests in four write a word that is already nonzero (issue 23, cheaper disputes: a word per request
    ///      was a fresh 20,000-gas write for every panel and every task's draw).
    mapping(uint256 => uint256) internal _targets;

    constructor(uint64 delay_) {
        if (delay_ == 0 || delay_ > MAX_DELAY) revert ParameterOutOfRange("delay", delay_, 1, MAX_DELAY);
        delay = delay_;
    }

    /// @inheritdoc IRandomness
    function request() external returns (uint256 requestId) {
        requestId = ++requestCount;
        uint64 target = _targetFrom(block.number);
        _setTarget(requestId, target);
        emit RandomnessRequested(requestId, msg.sender, target);
    }

    /// @inheritdoc IRandomness
    function renew(uint256 requestId) external {
        uint64 target = _target(requestId);
        // INVARIANT: a readable value never changes; only a request whose epoch ended unread gets a new target.
        if (!_stale(target)) revert RequestNotStale(requestId, target, block.number);
        target = _targetFrom(block.number);
        _setTarget(requestId, target);
        emit RandomnessRenewed(requestId, target);
    }

    /// @inheritdoc IRandomness
    function isReady(uint256 requestId) external view returns (bool) {
        return _ready(_target(requestId));
    }

    /// @inheritdoc IRandomness
    function isStale(uint256 requestId) external view returns (bool) {
        return _stale(_target(requestId));
    }

    /// @inheritdoc IRandomness
    function valueOf(uint256 requestId) external view returns (bytes32) {
        uint64 target = _target(requestId);
        // INVARIANT: the value is read only from a mined target block whose hash the EVM still returns.
        if (!_ready(target)) revert RandomnessNotReady(requestId, target, block.number);
        return keccak256(abi.encode(blockhash(target), requestId));
    }

    /// @notice Target block of a request (0 = unknown id).
    function targetOf(uint256 requestId) public view returns (uint64) {
        return uint64(_targets[requestId >> 2] >> ((requestId & 3) * 64));
    }

    function _setTarget(uint256 requestId, uint64 target) internal {
        uint256 shift = (requestId & 3) * 64;
        uint256 key = requestId >> 2;
        _targets[key] = (_targets[key] & ~(uint256(type(uint64).max) << shift)) | (uint256(target) << shift);
    }

    function _target(uint256 requestId) internal view returns (uint64 target) {
        target = targetOf(requestId);
        if (target == 0) revert UnknownRequest(requestId);
    }

    /// @dev `delay` blocks after `blockNumber`, or the next epoch's first block if fewer than MIN_DRAW_BLOCKS blocks of
    ///      the target's epoch would follow it.
    function _targetFrom(uint256 blockNumber) internal view returns (uint64) {
        uint256 target = blockNumber + delay;
        if (SELECTION_EPOCH_BLOCKS - 1 - (target % SELECTION_EPOCH_BLOCKS) < MIN_DRAW_BLOCKS) {
            target = (target / SELECTION_EPOCH_BLOCKS + 1) * SELECTION_EPOCH_BLOCKS;
        }
        return uint64(target);
    }

    /// @dev Mined and still in its epoch (an epoch of SELECTION_EPOCH_BLOCKS <= HASH_WINDOW keeps the hash readable).
    function _ready(uint64 target) internal view returns (bool) {
        return block.number > target && block.number / SELECTION_EPOCH_BLOCKS == target / SELECTION_EPOCH_BLOCKS;
    }

    function _stale(uint64 target) internal view returns (bool) {
        return block.number / SELECTION_EPOCH_BLOCKS > target / SELECTION_EPOCH_BLOCKS;
    }
}
