// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Fixture, VmState} from "./base/Fixture.sol";

/// @notice Issue 23, "draws fixed at request time", as a property over 1,000 draws: a party holding N of M equal stakes
///         that sees each draw's value and may nudge its identities' weights before the draw (unstake, stake,
///         heartbeat) gets every slot of a task, or a referee majority, exactly as often as without nudging, and
///         as often as fixed weights give it within sampling error. On v2 the same grinding won both replica slots
///         with 4 of 12 stakes and a referee majority with 2 of 8, 30 times in 30.
contract FixedDrawsTest is Fixture {
    VmState internal constant vmx = VmState(address(uint160(uint256(keccak256("hevm cheat code")))));
    uint256 internal constant DRAWS = 1_000;
    uint256 internal constant NUDGES = 3;

    address[] internal attacker;

    /// @dev M equal honest-looking stakes, the first N of them the attacker's (all on probation: equal weights).
    function _network(uint256 n, uint256 m) internal {
        _addNodes(m);
        for (uint256 i = 0; i < n; ++i) {
            attacker.push(nodes[i]);
        }
    }

    function test_draws_replicaPairUnderNudging_fixedWeightOdds_succeeds() public {
        _network(4, 12);
        // Both of 2 distinct slots from 4 of 12 equal weights: 4/12 * 3/11 = 1/11.
        (uint256 plain, uint256 ground) = _trials(2, 2, false);
        _assertOdds(plain, ground, 1, 11, "both replica slots");
    }

    function test_draws_refereeMajorityUnderNudging_fixedWeightOdds_succeeds() public {
        _network(2, 8);
        // At least 2 of 3 seats from 2 of 8 equal weights: both seated, C(6,1) / C(8,3) = 6/56.
        (uint256 plain, uint256 ground) = _trials(3, 2, true);
        _assertOdds(plain, ground, 6, 56, "a referee majority");
    }

    /// @notice The slot-moving variant of re-grinding: with the value known, a leaving identity withdraws (the last
    ///         node, a heavy one, moves into its slot) and a fresh identity registers into the freed last slot, whose
    ///         weight the epoch's snapshot still holds. Neither the fresh identity nor the moved node is drawn until
    ///         the next epoch; then the moved node is drawn by its own weight again.
    function test_draws_slotTakenThisEpoch_inheritsNoWeight_succeeds() public {
        _addNodes(4);
        address leaver = _newNode(10, ALL_ROLES, NODE_STAKE);
        address heavy = _newNode(11, ALL_ROLES, 100 * NODE_STAKE); // the last slot: ~96 % of the weight
        vm.prank(leaver);
        registry.leave();
        vm.warp(block.timestamp + registry.unbondingPeriod() + 1);
        _heartbeatAll();
        vm.prank(heavy);
        registry.heartbeat();
        _nextEpoch();
        uint256 lastSlot = registry.getNode(heavy).slot;
        vm.prank(leaver);
        registry.withdraw(); // deregisters: `heavy` moves into the leaver's slot
        address fresh = address(0xF2E5);
        token.mint(fresh, NODE_STAKE);
        vm.startPrank(fresh);
        token.approve(address(registry), type(uint256).max);
        registry.register(ALL_ROLES, 0, 16_000, 100, 3, MULTIADDR);
        registry.heartbeat(); // registering is not a check-in: drawn only after one
        vm.stopPrank();
        assertEq(registry.getNode(fresh).slot, lastSlot, "the fresh identity took the heavy node's old slot");
        uint256 freshDrawn;
        uint256 heavyDrawn;
        for (uint256 i = 0; i < 50; ++i) {
            address d = _solverDrawn(keccak256(abi.encode(i)), 0, 1_000, 1, 0, 0, 1, new address[](0));
            if (d == fresh) ++freshDrawn;
            if (d == heavy) ++heavyDrawn;
        }
        assertEq(freshDrawn, 0, "a slot taken after the epoch began lent its snapshot weight");
        assertEq(heavyDrawn, 0, "a node moved this epoch was drawn by another slot's snapshot weight");
        _nextEpoch();
        for (uint256 i = 0; i < 50; ++i) {
            if (_solverDrawn(keccak256(abi.encode(i)), 0, 1_000, 1, 0, 0, 1, new address[](0)) == heavy) {
                ++heavyDrawn;
            }
        }
        assertGt(heavyDrawn, 40, "the moved node is drawn by its own weight from the next epoch");
    }

    /// @dev Over DRAWS values: `plain` counts the draws in which the attacker holds at least `need` of `slots`
    ///      without acting; `ground` those in which it does after trying NUDGES weight changes per value.
    function _trials(uint256 slots, uint256 need, bool referee) internal returns (uint256 plain, uint256 ground) {
        for (uint256 i = 0; i < DRAWS; ++i) {
            bytes32 value = keccak256(abi.encode("value", i));
            bool won = _held(value, slots, referee) >= need;
            if (won) ++plain;
            for (uint256 k = 1; k <= NUDGES && !won; ++k) {
                uint256 snap = vmx.snapshotState();
                _nudge(attacker[(i + k) % attacker.length], k);
                won = _held(value, slots, referee) >= need;
                vmx.revertToState(snap);
            }
            if (won) ++ground;
        }
    }

    function _nudge(address node, uint256 k) internal {
        uint256 amount = k * registry.WEIGHT_UNIT() * 10; // on probation weight = stake / 10
        vm.startPrank(node);
        if (k % 3 == 1) registry.requestUnstake(amount);
        if (k % 3 == 2) registry.stake(amount);
        if (k % 3 == 0) registry.heartbeat();
        vm.stopPrank();
    }

    /// @dev How many of `slots` distinct draws from `value` (each excluding the earlier picks, as assign and seat
    ///      do) land on the attacker's identities.
    function _held(bytes32 value, uint256 slots, bool referee) internal view returns (uint256 count) {
        address[] memory picked = new address[](slots);
        for (uint256 s = 0; s < slots; ++s) {
            address[] memory exclude = new address[](s);
            for (uint256 j = 0; j < s; ++j) {
                exclude[j] = picked[j];
            }
            bytes32 seed = keccak256(abi.encode(value, s));
            picked[s] = referee
                ? registry.drawReferee(seed, 0, 1_000, 1, 1, exclude)
                : _solverDrawn(seed, 0, 1_000, 1, 0, 0, 1, exclude);
            for (uint256 a = 0; a < attacker.length; ++a) {
                if (picked[s] == attacker[a]) ++count;
            }
        }
    }

    /// @dev Nudging changes nothing, and the rate is the fixed-weight probability num/den within 4 standard errors.
    function _assertOdds(uint256 plain, uint256 ground, uint256 num, uint256 den, string memory what) internal pure {
        what = string.concat(what, " won in ", vm.toString(ground), " of 1000 draws with nudging, ", vm.toString(plain));
        what = string.concat(what, " without (fixed weights: ", vm.toString((DRAWS * num) / den), ")");
        assertEq(ground, plain, string.concat(what, ": nudges after the value changed the outcome"));
        uint256 expected = (DRAWS * num) / den;
        uint256 sd = _sqrt((DRAWS * num * (den - num)) / (den * den));
        assertTrue(ground <= expected + 4 * sd, string.concat(what, ": won more often than fixed weights allow"));
        assertTrue(ground + 4 * sd >= expected, string.concat(what, ": won less often than fixed weights give"));
    }

    function _sqrt(uint256 x) internal pure returns (uint256 y) {
        y = x;
        uint256 z = (x + 1) / 2;
        while (z < y) {
            y = z;
            z = (x / z + z) / 2;
        }
    }
}
