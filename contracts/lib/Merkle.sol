// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @title Merkle
/// @notice The trace commitment of docs/protocol.md (verity-merkle-v1):
///         leaf_j = keccak256(abi.encode(uint256 j, bytes32 h_j)); leaves padded with the zero word up to a power
///         of two; node = keccak256(abi.encode(left, right)); a single leaf is its own root.
library Merkle {
    /// @notice Largest tree depth accepted (2^32 leaves is far beyond any trace).
    uint256 internal constant MAX_DEPTH = 32;

    /// @notice Hash of trace entry `h` at position `index`.
    function leaf(uint256 index, bytes32 h) internal pure returns (bytes32) {
        return keccak256(abi.encode(index, h));
    }

    /// @notice Parent of two nodes.
    function node(bytes32 left, bytes32 right) internal pure returns (bytes32) {
        return keccak256(abi.encode(left, right));
    }

    /// @notice True iff `proof` shows that trace entry `h` sits at `index` under `root`.
    /// @dev The index must fit in the proof's depth, so one proof cannot serve two indexes.
    function verify(bytes32 expectedRoot, uint256 index, bytes32 h, bytes32[] memory siblingsProof) internal pure returns (bool) {
        uint256 depth = siblingsProof.length;
        if (depth > MAX_DEPTH || (index >> depth) != 0) return false;
        bytes32 acc = leaf(index, h);
        uint256 idx = index;
        for (uint256 i = 0; i < depth; ++i) {
            acc = (idx & 1) == 0 ? node(acc, siblingsProof[i]) : node(siblingsProof[i], acc);
            idx >>= 1;
        }
        return acc == expectedRoot;
    }

    /// @notice Root over the trace `hashes` (reference implementation, used by tests and views).
    function rootOf(bytes32[] memory hashes) internal pure returns (bytes32) {
        uint256 count = hashes.length;
        if (count == 0) return bytes32(0);
        uint256 width = 1;
        while (width < count) width <<= 1;
        bytes32[] memory level = new bytes32[](width);
        for (uint256 i = 0; i < count; ++i) {
            level[i] = leaf(i, hashes[i]);
        }
        while (width > 1) {
            width >>= 1;
            for (uint256 i = 0; i < width; ++i) {
                level[i] = node(level[2 * i], level[2 * i + 1]);
            }
        }
        return level[0];
    }

    /// @notice Proof for position `index` over the trace `hashes` (reference implementation for tests).
    function proofOf(bytes32[] memory hashes, uint256 index) internal pure returns (bytes32[] memory siblings) {
        uint256 count = hashes.length;
        uint256 width = 1;
        uint256 depth = 0;
        while (width < count) {
            width <<= 1;
            ++depth;
        }
        bytes32[] memory level = new bytes32[](width);
        for (uint256 i = 0; i < count; ++i) {
            level[i] = leaf(i, hashes[i]);
        }
        siblings = new bytes32[](depth);
        uint256 idx = index;
        for (uint256 d = 0; d < depth; ++d) {
            siblings[d] = level[idx ^ 1];
            width >>= 1;
            for (uint256 i = 0; i < width; ++i) {
                level[i] = node(level[2 * i], level[2 * i + 1]);
            }
            idx >>= 1;
        }
    }
}
