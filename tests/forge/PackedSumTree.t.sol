// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Test} from "./base/Test.sol";
import {PackedSumTree} from "../../contracts/lib/PackedSumTree.sol";

/// @dev Exposes the library on one tree, beside a naive array of the same weights.
contract PackedSumTreeHarness {
    using PackedSumTree for PackedSumTree.Tree;

    PackedSumTree.Tree internal _tree;
    mapping(uint256 => uint256) public naive;
    /// @notice The epoch stamp writes are made in (the registry's _stamp: epoch + 1).
    uint256 public epoch = 1;

    function setEpoch(uint256 ep) external {
        epoch = ep;
    }

    function set(uint256 slot, uint256 w) external {
        _tree.set(slot, w, epoch);
        naive[slot] = w;
    }

    function move(uint256 from, uint256 to) external {
        _tree.move(from, to, epoch);
        naive[to] = naive[from];
        naive[from] = 0;
    }

    function prefix(uint256 slot) external view returns (uint256) {
        return _tree.prefix(slot, 0);
    }

    function find(uint256 target) external view returns (uint256) {
        return _tree.find(target, 0);
    }

    function total() external view returns (uint256) {
        return _tree.total;
    }

    function capacity() external view returns (uint256) {
        return _tree.capacity();
    }

    function weight(uint256 slot) external view returns (uint256) {
        return _tree.weightOf(slot, 0);
    }

    function prefixAt(uint256 slot, uint256 at) external view returns (uint256) {
        return _tree.prefix(slot, at);
    }

    function findAt(uint256 target, uint256 at) external view returns (uint256) {
        return _tree.find(target, at);
    }

    function totalAt(uint256 at) external view returns (uint256) {
        return _tree.totalAt(at);
    }

    function weightAt(uint256 slot, uint256 at) external view returns (uint256) {
        return _tree.weightOf(slot, at);
    }
}

/// @notice The packed 4-ary sum tree against a naive sum: prefix sums and searches stay exact across growths and moves.
contract PackedSumTreeTest is Test {
    PackedSumTreeHarness internal h;

    function setUp() public {
        h = new PackedSumTreeHarness();
    }

    function _checkAgainstNaive(uint256[] memory slots) internal view {
        // Prefix at every touched slot and its neighbours, and find at each interval's two ends.
        uint256 maxSlot = 1;
        for (uint256 i = 0; i < slots.length; ++i) {
            if (slots[i] > maxSlot) maxSlot = slots[i];
        }
        uint256 sum;
        for (uint256 i = 0; i < slots.length; ++i) {
            uint256 s = slots[i];
            uint256 p;
            for (uint256 j = 0; j < slots.length; ++j) {
                if (slots[j] <= s && _firstIndex(slots, slots[j]) == j) p += h.naive(slots[j]);
            }
            assertEq(h.prefix(s), p, "prefix");
            uint256 w = h.naive(s);
            if (w > 0 && _firstIndex(slots, s) == i) {
                assertEq(h.find(p - w), s, "find: interval start");
                assertEq(h.find(p - 1), s, "find: interval end");
                sum += w;
            }
        }
        assertEq(h.total(), sum, "total");
        assertEq(h.prefix(maxSlot * 2), sum, "prefix past the end");
        assertTrue(h.capacity() >= maxSlot || h.naive(maxSlot) == 0, "capacity covers every weight");
    }

    function _firstIndex(uint256[] memory a, uint256 v) internal pure returns (uint256) {
        for (uint256 i = 0; i < a.length; ++i) {
            if (a[i] == v) return i;
        }
        return type(uint256).max;
    }

    function test_set_beyondCapacity_growsAsOftenAsNeeded_succeeds() public {
        assertEq(h.capacity(), 4_096, "initial");
        h.set(3, 5);
        h.set(10_000, 7); // 4096 -> 16384: one new level
        assertEq(h.capacity(), 16_384, "grown");
        assertEq(h.prefix(9_999), 5, "prefix below");
        assertEq(h.prefix(10_000), 12, "prefix at");
        assertEq(h.find(4), 3, "first");
        assertEq(h.find(5), 10_000, "second");
        assertEq(h.find(11), 10_000, "second, last unit");
        h.set(10_000, 0);
        assertEq(h.capacity(), 16_384, "never shrinks");
        assertEq(h.find(4), 3, "after removal");
    }

    function test_move_keepsSumsAndFind_succeeds() public {
        h.set(1, 4);
        h.set(6, 3);
        h.set(1_500, 9);
        h.set(6, 0);
        h.move(1_500, 6);
        assertEq(h.weight(6), 9, "moved weight");
        assertEq(h.weight(1_500), 0, "source empty");
        assertEq(h.total(), 13, "total unchanged");
        assertEq(h.prefix(5), 4, "prefix before");
        assertEq(h.prefix(6), 13, "prefix at");
        assertEq(h.prefix(1_500), 13, "prefix after");
        assertEq(h.find(4), 6, "find moved");
    }

    /// @dev Random weights on random slots up to 5,000 (two growths), then random moves into emptied slots,
    ///      each step checked against the naive sums.
    function testFuzz_setAndMove_matchNaiveSums_succeeds(uint256 seed) public {
        uint256[] memory slots = new uint256[](12);
        for (uint256 i = 0; i < slots.length; ++i) {
            uint256 r = uint256(keccak256(abi.encode(seed, i)));
            slots[i] = 1 + (r % 5_000);
            h.set(slots[i], (r >> 64) % 1e15);
        }
        _checkAgainstNaive(slots);
        for (uint256 k = 0; k < 4; ++k) {
            uint256 r = uint256(keccak256(abi.encode(seed, "move", k)));
            uint256 from = slots[r % slots.length];
            uint256 to = slots[(r >> 8) % slots.length];
            if (from == to) continue;
            h.set(to, 0);
            h.move(from, to);
            _checkAgainstNaive(slots);
        }
        for (uint256 k = 0; k < 4; ++k) {
            uint256 r = uint256(keccak256(abi.encode(seed, "reset", k)));
            h.set(slots[r % slots.length], (r >> 64) % 1e15);
            _checkAgainstNaive(slots);
        }
    }

    function test_set_totalPast56Bits_reverts() public {
        uint256 full = (1 << 56) - 1;
        h.set(1, full - 1);
        vm.expectRevert(abi.encodeWithSelector(PackedSumTree.SumTreeOverflow.selector, full + 1));
        h.set(2, 2);
        h.set(2, 1); // exactly 2^56 - 1 fits
        assertEq(h.total(), full, "full");
        assertEq(h.find(full - 1), 2, "last unit");
        h.set(5, 0);
        assertEq(h.weight(4), 0, "the stamp never leaks into a lane");
    }

    /// @dev Weights written in epoch stamp 1, then sets, growths and moves in stamp 2: reads at stamp 2 return the tree
    ///      exactly as stamp 1 left it (prefix at every touched slot, find at each interval's ends, total), live reads
    ///      the current one, and a stamp with no write (3) reads the live tree.
    function testFuzz_snapshot_readsTheTreeAsTheEpochBegan_succeeds(uint256 seed) public {
        // Slots 0..9 get weights in stamp 1; slots 10..15 (some beyond the capacity: growth) only in stamp 2.
        uint256[] memory slots = new uint256[](16);
        for (uint256 i = 0; i < slots.length; ++i) {
            uint256 r = uint256(keccak256(abi.encode(seed, i)));
            slots[i] = 1 + (r % (i < 10 ? 3_000 : 20_000));
            if (i < 10) h.set(slots[i], (r >> 64) % 1e15);
        }
        uint256[] memory before = new uint256[](slots.length);
        uint256[] memory prefixes = new uint256[](slots.length);
        for (uint256 i = 0; i < slots.length; ++i) {
            before[i] = h.naive(slots[i]);
            prefixes[i] = h.prefix(slots[i]);
        }
        uint256 totalBefore = h.total();
        h.setEpoch(2);
        for (uint256 k = 0; k < 6; ++k) {
            uint256 r = uint256(keccak256(abi.encode(seed, "epoch 2", k)));
            uint256 slot = slots[10 + k];
            h.set(slots[(r >> 8) % 10], (r >> 64) % 1e15);
            uint256 from = slots[(r >> 32) % 10];
            if (from != slot && h.naive(slot) == 0) h.move(from, slot);
            else h.set(slot, (r >> 128) % 1e15);
        }
        for (uint256 i = 0; i < slots.length; ++i) {
            assertEq(h.weightAt(slots[i], 2), before[i], "weight as the epoch began");
            assertEq(h.prefixAt(slots[i], 2), prefixes[i], "prefix as the epoch began");
            assertEq(h.weightAt(slots[i], 0), h.naive(slots[i]), "live weight");
            if (before[i] != 0) {
                assertEq(h.findAt(prefixes[i] - before[i], 2), slots[i], "find: interval start");
                assertEq(h.findAt(prefixes[i] - 1, 2), slots[i], "find: interval end");
            }
        }
        assertEq(h.totalAt(2), totalBefore, "total as the epoch began");
        _checkAgainstNaive(slots);
        for (uint256 i = 0; i < slots.length; ++i) {
            assertEq(h.prefixAt(slots[i], 3), h.prefix(slots[i]), "an epoch without writes reads the live tree");
        }
        assertEq(h.totalAt(3), h.total(), "live total");
    }

    function test_move_intoSlotBeyondCapacity_grows_succeeds() public {
        h.set(7, 11);
        h.move(7, 70_000);
        assertEq(h.capacity(), 262_144, "grown for the destination");
        assertEq(h.weight(70_000), 11, "moved");
        assertEq(h.weight(7), 0, "source empty");
        assertEq(h.find(10), 70_000, "find");
        assertEq(h.prefix(69_999), 0, "prefix before");
    }

    function test_move_sameWordAndSameAncestor_succeeds() public {
        h.set(1, 3);
        h.set(2, 5);
        h.set(2, 0);
        h.move(1, 2); // same level-0 word, lanes 0 -> 1
        assertEq(h.prefix(1), 0, "lane 0 empty");
        assertEq(h.prefix(2), 3, "lane 1");
        h.move(2, 5); // next word, same level-1 word
        assertEq(h.find(0), 5, "find after");
        assertEq(h.prefix(4), 0, "nothing before");
        assertEq(h.total(), 3, "total");
    }
}
