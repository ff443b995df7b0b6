// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @title SumTree
/// @notice Fixed-capacity Fenwick (binary indexed) tree of weights for stake-weighted sampling.
/// @dev Slots are 1-based. CAPACITY is a power of two, so an update and a search each take exactly
///      log2(CAPACITY) = 10 steps whatever the number of registered nodes: O(log n) gas, bounded.
library SumTree {
    uint256 internal constant CAPACITY = 1024;

    struct Tree {
        uint256 total;
        mapping(uint256 => uint256) fen; // Fenwick partial sums, index 1..CAPACITY
        mapping(uint256 => uint256) weight; // exact weight of each slot
    }

    /// @notice Sets the weight of `slot` to `newWeight`.
    function set(Tree storage t, uint256 slot, uint256 newWeight) internal {
        uint256 old = t.weight[slot];
        if (old == newWeight) return;
        t.weight[slot] = newWeight;
        if (newWeight > old) {
            uint256 delta = newWeight - old;
            t.total += delta;
            for (uint256 i = slot; i <= CAPACITY; i += i & (~i + 1)) {
                t.fen[i] += delta;
            }
        } else {
            uint256 delta = old - newWeight;
            t.total -= delta;
            for (uint256 i = slot; i <= CAPACITY; i += i & (~i + 1)) {
                t.fen[i] -= delta;
            }
        }
    }

    /// @notice Sum of the weights of slots 1..slot.
    function prefix(Tree storage t, uint256 slot) internal view returns (uint256 sum) {
        for (uint256 i = slot; i > 0; i -= i & (~i + 1)) {
            sum += t.fen[i];
        }
    }

    /// @notice The slot whose cumulative interval [prefix(slot-1), prefix(slot)) contains `target`.
    /// @dev Requires target < total. Walks down from the highest power of two: log2(CAPACITY) reads.
    function find(Tree storage t, uint256 target) internal view returns (uint256) {
        uint256 pos = 0;
        uint256 remaining = target;
        for (uint256 step = CAPACITY; step > 0; step >>= 1) {
            uint256 next = pos + step;
            if (next <= CAPACITY) {
                uint256 v = t.fen[next];
                if (v <= remaining) {
                    pos = next;
                    remaining -= v;
                }
            }
        }
        return pos + 1;
    }
}
