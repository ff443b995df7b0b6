// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @title SumTree
/// @notice Growable Fenwick (binary indexed) tree of weights for stake-weighted sampling.
/// @dev Slots are 1-based (slot 0 is never valid). The capacity is a power of two that starts at INITIAL_CAPACITY and
///      doubles whenever a slot beyond it gets weight: with every weight inside 1..C, each power-of-two index holds
///      the whole total, so doubling writes one node (fen[2C] = total) and leaves the entries in (C, 2C) at their
///      correct value, zero. An update walks up to the capacity and a search walks down from it: log2(capacity)
///      storage reads, with capacity = max(INITIAL_CAPACITY, the smallest power of two >= the highest slot ever
///      weighted). INITIAL_CAPACITY is 1024 rather than something small because a search's cost is that many cold
///      reads (2,100 gas each): a small registry pays what the former fixed tree cost, and only registries past 1024
///      nodes pay one more read per doubling (measured and discussed in docs/gas.md, "No fixed capacity").
library SumTree {
    /// @notice Capacity of a tree that never grew.
    uint256 internal constant INITIAL_CAPACITY = 1024;

    struct Tree {
        uint256 total;
        uint256 grownCapacity; // 0 until the first doubling; read it through capacity()
        mapping(uint256 => uint256) fen; // Fenwick partial sums, index 1..capacity
        mapping(uint256 => uint256) weight; // exact weight of each slot
    }

    /// @notice Current capacity: every slot with nonzero weight is <= it.
    function capacity(Tree storage t) internal view returns (uint256 cap) {
        cap = t.grownCapacity;
        if (cap == 0) cap = INITIAL_CAPACITY;
    }

    /// @notice Sets the weight of `slot` (>= 1) to `newWeight`, doubling the capacity as often as `slot` needs.
    function set(Tree storage t, uint256 slot, uint256 newWeight) internal {
        uint256 old = t.weight[slot];
        if (old == newWeight) return;
        t.weight[slot] = newWeight;
        uint256 cap = capacity(t);
        if (newWeight > old) {
            // A slot beyond the capacity has weight 0, so only a rising weight can need room.
            if (slot > cap) cap = _grow(t, slot, cap);
            uint256 delta = newWeight - old;
            t.total += delta;
            for (uint256 i = slot; i <= cap; i += i & (~i + 1)) {
                t.fen[i] += delta;
            }
        } else {
            uint256 delta = old - newWeight;
            t.total -= delta;
            for (uint256 i = slot; i <= cap; i += i & (~i + 1)) {
                t.fen[i] -= delta;
            }
        }
    }

    /// @notice Moves the weight of slot `from` to the empty slot `to` (the total is unchanged).
    /// @dev Both update paths end at the capacity; from the first index they share, the -w and +w cancel, so only
    ///      the two paths below that index are written. Requires weight[to] == 0 and 1 <= to, from.
    function move(Tree storage t, uint256 from, uint256 to) internal {
        uint256 w = t.weight[from];
        if (w == 0 || from == to) return;
        t.weight[from] = 0;
        t.weight[to] = w;
        uint256 i = from;
        uint256 j = to;
        // Always advance the smaller index: neither can skip the first index common to both paths.
        while (i != j) {
            if (i < j) {
                t.fen[i] -= w;
                i += i & (~i + 1);
            } else {
                t.fen[j] += w;
                j += j & (~j + 1);
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
    /// @dev Requires target < total. Walks down from half the capacity (fen[capacity] is the total, which never
    ///      fits under target): log2(capacity) reads.
    function find(Tree storage t, uint256 target) internal view returns (uint256) {
        uint256 pos = 0;
        uint256 remaining = target;
        for (uint256 step = capacity(t) >> 1; step > 0; step >>= 1) {
            uint256 v = t.fen[pos + step];
            if (v <= remaining) {
                pos += step;
                remaining -= v;
            }
        }
        return pos + 1;
    }

    /// @dev Doubles `cap` until it holds `slot`. Every weight lies in 1..cap, so each new power-of-two node is the
    ///      total (before the caller adds its delta).
    function _grow(Tree storage t, uint256 slot, uint256 cap) private returns (uint256) {
        uint256 total = t.total;
        do {
            cap <<= 1;
            t.fen[cap] = total;
        } while (slot > cap);
        t.grownCapacity = cap;
        return cap;
    }
}
