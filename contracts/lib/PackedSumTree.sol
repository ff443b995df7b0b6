// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @title PackedSumTree
/// @notice Growable 4-ary sum tree of 64-bit weights, four child sums packed in each storage word, for stake-weighted
///         sampling whose cost barely grows with the number of slots.
/// @dev Slots are 1-based (slot 0 is never valid); leaf index s = slot - 1. Level 0 words hold four leaf weights
///      (leaves 4i..4i+3 in word i); a word at level l > 0 holds the sums of the four level l-1 words below it. The
///      top level `height` has one word, whose four lanes sum to `total`. Capacity is 4^(height+1) leaves.
///
///      Why packed and 4-ary: a search reads one word per level and every first read in a transaction is cold
///      (2,100 gas). A binary Fenwick tree over 16,384 slots reads 14 words per search; this tree reads 7. The second
///      search of a transaction shares the top words with the first (warm), and with 4-way words it parts from the
///      first search's path later in the walk, so draws grow far less from 10 to 10,000 nodes (docs/gas.md).
///
///      Why 64 bits: a lane must hold any partial sum, so the total must fit in 64 bits; callers weigh in units
///      that make that true (NodeRegistry weighs stake in gwei: MAX_SUPPLY 10^9 VRT = 10^18 gwei < 2^64).
///      `set` reverts `SumTreeOverflow` rather than wrap.
///
///      Growth: with every weight inside the capacity, the old top word's lanes sum to the total; a new top word
///      whose lane 0 holds that total (and whose other lanes are empty) is then exact, so growing writes one word per
///      new level and never moves a weight.
library PackedSumTree {
    /// @notice Height of a tree that never grew: capacity 4^6 = 4,096 slots. A search reads height + 1 words, each
    ///         cold at first: starting at 4,096 rather than 1,024 costs a small registry one more read per search
    ///         (still 6 against the binary Fenwick tree's 10 at 1,024) and keeps draws within +10 % from 10 to 10,000
    ///         nodes (docs/gas.md, "No fixed capacity").
    uint256 internal constant INITIAL_HEIGHT = 5;
    uint256 internal constant LANE_BITS = 64;
    uint256 internal constant LANE_MASK = type(uint64).max;

    /// @notice A weight or the total would not fit in a 64-bit lane.
    error SumTreeOverflow(uint256 total);

    struct Tree {
        uint64 total;
        uint8 grownHeight; // 0 until the first growth; read it through height()
        mapping(uint256 => uint256) words; // key: level << 64 | index
    }

    /// @notice Top level of the tree (its capacity is 4^(height+1) slots).
    function height(Tree storage t) internal view returns (uint256 h) {
        h = t.grownHeight;
        if (h == 0) h = INITIAL_HEIGHT;
    }

    /// @notice Current capacity: every slot with nonzero weight is <= it.
    function capacity(Tree storage t) internal view returns (uint256) {
        return 1 << (2 * (height(t) + 1));
    }

    /// @notice Weight of `slot` (a slot beyond the capacity reads an empty word: 0).
    function weightOf(Tree storage t, uint256 slot) internal view returns (uint256) {
        uint256 s = slot - 1;
        return _lane(t.words[_key(0, s >> 2)], s & 3);
    }

    /// @notice Sets the weight of `slot` (>= 1) to `newWeight`, growing the tree as often as `slot` needs.
    function set(Tree storage t, uint256 slot, uint256 newWeight) internal {
        uint256 s = slot - 1;
        uint256 h = height(t);
        // Words beyond the capacity were never written: a slot there reads 0.
        uint256 old = _lane(t.words[_key(0, s >> 2)], s & 3);
        if (old == newWeight) return;
        // Adding (2^256 - old + new) mod 2^256 in unchecked arithmetic adds new - old to every sum on the path.
        uint256 total = uint256(t.total) + newWeight - old;
        // INVARIANT: every lane holds a partial sum <= total < 2^64, so changing a lane within a word never carries
        // into (or borrows from) the next lane.
        if (total > LANE_MASK) revert SumTreeOverflow(total);
        // A slot beyond the capacity has weight 0, so only a rising weight can need room.
        if ((s >> (2 * (h + 1))) != 0) h = _grow(t, s, h);
        t.total = uint64(total);
        unchecked {
            uint256 delta = newWeight - old;
            for (uint256 level = 0; level <= h; ++level) {
                t.words[_key(level, s >> (2 * (level + 1)))] += delta << (LANE_BITS * ((s >> (2 * level)) & 3));
            }
        }
    }

    /// @notice Moves the weight of slot `from` to the empty slot `to` (the total is unchanged).
    /// @dev Both paths are written only below the first word they share; in that word the weight moves from one lane
    ///      to the other (no change if the lanes are the same), and every word above keeps its sums. Requires
    ///      weightOf(to) == 0.
    function move(Tree storage t, uint256 from, uint256 to) internal {
        uint256 w = weightOf(t, from);
        if (w == 0 || from == to) return;
        uint256 f = from - 1;
        uint256 d = to - 1;
        uint256 h = height(t);
        if ((d >> (2 * (h + 1))) != 0) h = _grow(t, d, h);
        for (uint256 level = 0; level <= h; ++level) {
            uint256 fk = _key(level, f >> (2 * (level + 1)));
            uint256 dk = _key(level, d >> (2 * (level + 1)));
            uint256 fShift = LANE_BITS * ((f >> (2 * level)) & 3);
            uint256 dShift = LANE_BITS * ((d >> (2 * level)) & 3);
            if (fk == dk) {
                if (fShift != dShift) t.words[fk] = t.words[fk] - (w << fShift) + (w << dShift);
                return;
            }
            t.words[fk] -= w << fShift;
            t.words[dk] += w << dShift;
        }
    }

    /// @notice Sum of the weights of slots 1..slot.
    function prefix(Tree storage t, uint256 slot) internal view returns (uint256 sum) {
        uint256 h = height(t);
        // Leaves with index < slot: at each level, the lanes left of the path to leaf `slot`.
        if ((slot >> (2 * (h + 1))) != 0) return t.total;
        for (uint256 level = 0; level <= h; ++level) {
            uint256 lanes = (slot >> (2 * level)) & 3;
            if (lanes == 0) continue;
            uint256 word = t.words[_key(level, slot >> (2 * (level + 1)))];
            for (uint256 l = 0; l < lanes; ++l) {
                sum += _lane(word, l);
            }
        }
    }

    /// @notice The slot whose cumulative interval [prefix(slot-1), prefix(slot)) contains `target`.
    /// @dev Requires target < total. Reads one word per level: height + 1 reads.
    function find(Tree storage t, uint256 target) internal view returns (uint256) {
        uint256 idx = 0;
        for (uint256 level = height(t) + 1; level > 0;) {
            --level;
            uint256 word = t.words[_key(level, idx)];
            uint256 lane = 0;
            for (uint256 v = word & LANE_MASK; lane < 3 && target >= v; v = _lane(word, lane)) {
                target -= v;
                ++lane;
            }
            idx = (idx << 2) | lane;
        }
        return idx + 1;
    }

    /// @dev Adds levels until leaf `s` fits. Each new top word holds the old total in lane 0.
    function _grow(Tree storage t, uint256 s, uint256 h) private returns (uint256) {
        uint256 total = t.total;
        do {
            ++h;
            t.words[_key(h, 0)] = total;
        } while ((s >> (2 * (h + 1))) != 0);
        t.grownHeight = uint8(h);
        return h;
    }

    function _lane(uint256 word, uint256 lane) private pure returns (uint256) {
        return (word >> (LANE_BITS * lane)) & LANE_MASK;
    }

    function _key(uint256 level, uint256 index) private pure returns (uint256) {
        return (level << 64) | index;
    }
}
