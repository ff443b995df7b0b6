// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @title PackedSumTree
/// @notice Growable 4-ary sum tree of 56-bit weights, four child sums packed in each storage word, for stake-weighted
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
///      Why 56 bits: a lane must hold any partial sum, so the total must fit in 56 bits (four lanes and a 32-bit
///      epoch stamp fill a word); callers weigh in units that make that true (NodeRegistry weighs stake in
///      micro-VRT: MAX_SUPPLY 10^9 VRT = 10^15 micro-VRT < 2^56).
///      `set` reverts `SumTreeOverflow` rather than wrap.
///
///      Epoch snapshots (issue 23, "draws fixed at request time"): every write names the current epoch stamp
///      (epoch + 1 >= 1). The first write of a word in an epoch copies the word's lanes as they were into `snaps`,
///      and the stamp rides in the word's top 32 bits; the tree's total and height are kept the same way in its
///      header. A read `at` stamp e therefore returns the tree exactly as it stood when epoch e began, whatever was
///      written since, for one extra read per word written this epoch; `at` = 0 reads the live tree. A draw reads
///      at its own epoch's stamp, and BlockhashRandomness makes a value readable only inside its target block's
///      epoch, so a weight changed after the value is known is never seen by that draw.
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
    uint256 internal constant LANE_BITS = 56;
    uint256 internal constant LANE_MASK = (1 << 56) - 1;
    /// @dev The four lanes of a word; bits 224..255 hold the stamp of the epoch that last wrote it.
    uint256 internal constant LANES_MASK = (1 << 224) - 1;
    uint256 internal constant STAMP_SHIFT = 224;

    /// @notice A weight or the total would not fit in a lane.
    error SumTreeOverflow(uint256 total);

    struct Tree {
        uint64 total;
        uint8 grownHeight; // 0 until the first growth; read it through height()
        uint64 snapTotal; // total and grownHeight as they were when epoch `stamp` began
        uint8 snapHeight;
        uint32 stamp; // epoch stamp of the last write (0: never written)
        mapping(uint256 => uint256) words; // key: level << 64 | index; lanes | stamp << STAMP_SHIFT
        mapping(uint256 => uint256) snaps; // a word's lanes as they were when the epoch of its stamp began
    }

    /// @notice Top level of the tree at stamp `at` (0: now); its capacity is 4^(height+1) slots.
    function height(Tree storage t, uint256 at) internal view returns (uint256 h) {
        h = (at != 0 && t.stamp == at) ? t.snapHeight : t.grownHeight;
        if (h == 0) h = INITIAL_HEIGHT;
    }

    /// @notice Sum of every weight at stamp `at` (0: now).
    function totalAt(Tree storage t, uint256 at) internal view returns (uint256) {
        return (at != 0 && t.stamp == at) ? t.snapTotal : t.total;
    }

    /// @notice Current capacity: every slot with nonzero weight is <= it.
    function capacity(Tree storage t) internal view returns (uint256) {
        return 1 << (2 * (height(t, 0) + 1));
    }

    /// @notice Weight of `slot` at stamp `at` (0: now); a slot beyond the capacity reads an empty word: 0.
    function weightOf(Tree storage t, uint256 slot, uint256 at) internal view returns (uint256) {
        uint256 s = slot - 1;
        return _lane(_read(t, _key(0, s >> 2), at), s & 3);
    }

    /// @notice Sets the weight of `slot` (>= 1) to `newWeight` in epoch stamp `ep` (>= 1, never decreasing), growing
    ///         the tree as often as `slot` needs.
    function set(Tree storage t, uint256 slot, uint256 newWeight, uint256 ep) internal {
        uint256 s = slot - 1;
        // Words beyond the capacity were never written: a slot there reads 0.
        uint256 old = weightOf(t, slot, 0);
        if (old == newWeight) return;
        // Adding (2^256 - old + new) mod 2^256 in unchecked arithmetic adds new - old to every sum on the path.
        uint256 total = uint256(t.total) + newWeight - old;
        // INVARIANT: every lane holds a partial sum <= total < 2^56, so changing a lane within a word never carries
        // into (or borrows from) the next lane or the stamp.
        if (total > LANE_MASK) revert SumTreeOverflow(total);
        uint256 h = _begin(t, ep);
        // A slot beyond the capacity has weight 0, so only a rising weight can need room.
        if ((s >> (2 * (h + 1))) != 0) h = _grow(t, s, h, ep);
        t.total = uint64(total);
        unchecked {
            uint256 delta = newWeight - old;
            for (uint256 level = 0; level <= h; ++level) {
                uint256 key = _key(level, s >> (2 * (level + 1)));
                _write(t, key, _read(t, key, 0) + (delta << (LANE_BITS * ((s >> (2 * level)) & 3))), ep);
            }
        }
    }

    /// @notice Moves the weight of slot `from` to the empty slot `to` in epoch stamp `ep` (the total is unchanged).
    /// @dev Both paths are written only below the first word they share; in that word the weight moves from one lane
    ///      to the other (no change if the lanes are the same), and every word above keeps its sums. Requires
    ///      weightOf(to) == 0.
    function move(Tree storage t, uint256 from, uint256 to, uint256 ep) internal {
        uint256 w = weightOf(t, from, 0);
        if (w == 0 || from == to) return;
        uint256 h = _begin(t, ep);
        if (((to - 1) >> (2 * (h + 1))) != 0) h = _grow(t, to - 1, h, ep);
        for (uint256 level = 0; level <= h; ++level) {
            if (_moveAt(t, level, from - 1, to - 1, w, ep)) return;
        }
    }

    /// @notice Sum of the weights of slots 1..slot at stamp `at` (0: now).
    function prefix(Tree storage t, uint256 slot, uint256 at) internal view returns (uint256 sum) {
        uint256 h = height(t, at);
        // Leaves with index < slot: at each level, the lanes left of the path to leaf `slot`.
        if ((slot >> (2 * (h + 1))) != 0) return totalAt(t, at);
        for (uint256 level = 0; level <= h; ++level) {
            uint256 lanes = (slot >> (2 * level)) & 3;
            if (lanes == 0) continue;
            uint256 word = _read(t, _key(level, slot >> (2 * (level + 1))), at);
            for (uint256 l = 0; l < lanes; ++l) {
                sum += _lane(word, l);
            }
        }
    }

    /// @notice The slot whose cumulative interval [prefix(slot-1), prefix(slot)) at stamp `at` contains `target`.
    /// @dev Requires target < totalAt(at). Reads one word per level (two where this epoch wrote it).
    function find(Tree storage t, uint256 target, uint256 at) internal view returns (uint256) {
        uint256 idx = 0;
        for (uint256 level = height(t, at) + 1; level > 0;) {
            --level;
            uint256 word = _read(t, _key(level, idx), at);
            uint256 lane = 0;
            for (uint256 v = word & LANE_MASK; lane < 3 && target >= v; v = _lane(word, lane)) {
                target -= v;
                ++lane;
            }
            idx = (idx << 2) | lane;
        }
        return idx + 1;
    }

    /// @dev First write of epoch `ep`: keeps the total and height as the epoch found them. Returns the height.
    function _begin(Tree storage t, uint256 ep) private returns (uint256) {
        if (t.stamp != ep) {
            t.snapTotal = t.total;
            t.snapHeight = t.grownHeight;
            t.stamp = uint32(ep);
        }
        return height(t, 0);
    }

    /// @dev Adds levels until leaf `s` fits. Each new top word holds the old total in lane 0.
    function _grow(Tree storage t, uint256 s, uint256 h, uint256 ep) private returns (uint256) {
        uint256 total = t.total;
        do {
            ++h;
            _write(t, _key(h, 0), total, ep);
        } while ((s >> (2 * (h + 1))) != 0);
        t.grownHeight = uint8(h);
        return h;
    }

    /// @dev One level of `move` (leaf indexes f -> d): true once the two paths share the level's word.
    function _moveAt(Tree storage t, uint256 level, uint256 f, uint256 d, uint256 w, uint256 ep)
        private
        returns (bool)
    {
        uint256 fk = _key(level, f >> (2 * (level + 1)));
        uint256 dk = _key(level, d >> (2 * (level + 1)));
        f = w << (LANE_BITS * ((f >> (2 * level)) & 3)); // the weight in f's lane
        d = w << (LANE_BITS * ((d >> (2 * level)) & 3)); // and in d's
        if (fk == dk) {
            if (f != d) _shift(t, fk, f, d, ep);
            return true;
        }
        _shift(t, fk, f, 0, ep);
        _shift(t, dk, 0, d, ep);
        return false;
    }

    /// @dev Word `key` loses `out` and gains `into` (lane-shifted weights) in epoch `ep`.
    function _shift(Tree storage t, uint256 key, uint256 out, uint256 into, uint256 ep) private {
        _write(t, key, _read(t, key, 0) - out + into, ep);
    }

    /// @dev The lanes of word `key` at stamp `at`: its snapshot if epoch `at` wrote it, else the word (0: now).
    function _read(Tree storage t, uint256 key, uint256 at) private view returns (uint256) {
        uint256 w = t.words[key];
        if (at != 0 && (w >> STAMP_SHIFT) == at) return t.snaps[key];
        return w & LANES_MASK;
    }

    /// @dev Writes `lanes` (mod 2^224) into word `key` in epoch `ep`, first keeping the word's old lanes as the
    ///      epoch's snapshot if this epoch has not written it yet.
    function _write(Tree storage t, uint256 key, uint256 lanes, uint256 ep) private {
        uint256 w = t.words[key];
        if ((w >> STAMP_SHIFT) != ep) t.snaps[key] = w & LANES_MASK;
        t.words[key] = (lanes & LANES_MASK) | (ep << STAMP_SHIFT);
    }

    function _lane(uint256 word, uint256 lane) private pure returns (uint256) {
        return (word >> (LANE_BITS * lane)) & LANE_MASK;
    }

    function _key(uint256 level, uint256 index) private pure returns (uint256) {
        return (level << 64) | index;
    }
}
