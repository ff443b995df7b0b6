// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Fixture} from "./base/Fixture.sol";
import {INodeRegistry} from "../../contracts/interfaces/INodeRegistry.sol";
import {Node, ROLE_SOLVER} from "../../contracts/types/VerityTypes.sol";
import "../../contracts/errors/NodeRegistryErrors.sol";

/// @notice Issue 9, "no fixed capacity": registering costs the minimum stake, leaving frees the slot, and the
///         selection trees grow instead of filling up. Each attack is replayed first, then the rules around it.
contract CapacityTest is Fixture {
    address internal proto = address(0x9807);
    uint256 internal min;

    function setUp() public override {
        super.setUp();
        registry.setProtocol(proto, true);
        min = registry.MIN_REGISTRATION_STAKE();
    }

    /// @dev A throwaway identity holding exactly the minimum: the cheapest registration there is.
    function _minNode(uint256 i) internal returns (address node) {
        node = address(uint160(0xA0000 + i));
        token.mint(node, min);
        vm.startPrank(node);
        token.approve(address(registry), min);
        registry.register(ROLE_SOLVER, 0, 16_000, 1, 1, MULTIADDR);
        registry.heartbeat(); // registering is not a check-in: weighted from its first heartbeat
        vm.stopPrank();
    }

    function _leaveAndWithdraw(address node) internal {
        vm.prank(node);
        registry.leave();
        vm.warp(block.timestamp + registry.unbondingPeriod());
        vm.prank(node);
        registry.withdraw();
    }

    function _sumOfWeights() internal view returns (uint256 solver, uint256 referee) {
        for (uint256 i = 0; i < registry.nodeCount(); ++i) {
            (uint256 s, uint256 r) = lens.weightsOf(registry.nodeList(i));
            solver += s;
            referee += r;
        }
    }

    function _assertListCoherent() internal view {
        for (uint256 i = 0; i < registry.nodeCount(); ++i) {
            assertEq(registry.getNode(registry.nodeList(i)).slot, i + 1, "slot i+1 holds nodeList[i]");
        }
        (uint256 s, uint256 r) = _sumOfWeights();
        (uint256 ts, uint256 tr) = lens.totalWeights();
        assertEq(ts, s, "solver total = sum of registered weights");
        assertEq(tr, r, "referee total = sum of registered weights");
    }

    // ---------------------------------------------------------------- the attack

    /// @dev The attack: 1,018 empty registrations used to fill the fixed 1024-slot tree and lock every later node
    ///      out (RegistryFull). An empty registration now reverts, and past any capacity the registry keeps
    ///      accepting: 4,100 minimum-stake identities in (past the 4-way tree's first 4,096 slots, so it grows a
    ///      level), then an honest node registers and is drawn.
    function test_register_pastFormerCapacity_neverLocksOut_succeeds() public {
        vm.expectRevert(); // ERC20InsufficientAllowance: no stake, no slot
        registry.register(ROLE_SOLVER, 0, 16_000, 1, 1, MULTIADDR);
        vm.pauseGasMetering(); // 4,100 registrations exceed one test's gas limit; their gas is not what is tested
        for (uint256 i = 0; i < 4_100; ++i) {
            _minNode(i);
        }
        vm.resumeGasMetering();
        assertEq(registry.nodeCount(), 4_100, "all admitted");
        (uint256 solverCap,) = lens.treeCapacities(1, false, lens.memoryTier(16_000)); // the sybils' class
        assertEq(solverCap, 16_384, "the solver tree grew one level (4-way: 4,096 -> 16,384 slots)");
        assertEq(token.balanceOf(address(registry)), 4_100 * min, "each slot cost the minimum");
        address honest = _newNode(0, ROLE_SOLVER, 1_000_000e18 - 1);
        assertEq(registry.getNode(honest).slot, 4_101, "honest node admitted");
        // Its stake outweighs the 4,100 sybils 24:1, so most seeds draw it; the draw walks the grown tree.
        uint256 hits;
        for (uint256 s = 0; s < 20; ++s) {
            if (_solverDrawn(bytes32(s), 0, 0, 1, 0, 0, 1, new address[](0)) == honest) ++hits;
        }
        assertGt(hits, 15, "grown tree draws by stake");
        _assertListCoherent();
    }

    function test_register_withoutMinimumStake_reverts() public {
        address poor = address(0xB00);
        token.mint(poor, min - 1);
        vm.startPrank(poor);
        token.approve(address(registry), type(uint256).max);
        vm.expectRevert(); // ERC20InsufficientBalance
        registry.register(ROLE_SOLVER, 0, 1, 1, 1, MULTIADDR);
        vm.stopPrank();
        assertEq(registry.getNode(poor).slot, 0, "not registered");
    }

    function test_register_pullsMinimumStake_succeeds() public {
        address node = _minNode(0);
        Node memory n = registry.getNode(node);
        assertEq(n.stake, min, "stake");
        assertEq(token.balanceOf(node), 0, "pulled");
        (uint256 w,) = lens.weightsOf(node);
        assertEq(w, (min * registry.MIN_REPUTATION_BPS()) / 10_000, "weighted from its first check-in");
    }

    // ---------------------------------------------------------------- the minimum

    function test_requestUnstake_belowMinimum_reverts() public {
        address node = _newNode(0, ROLE_SOLVER, 100e18);
        vm.prank(node);
        vm.expectRevert(abi.encodeWithSelector(BelowMinimumStake.selector, node, min - 1, min));
        registry.requestUnstake(100e18 - min + 1);
        vm.prank(node);
        registry.requestUnstake(100e18 - min); // down to the minimum exactly
        assertEq(registry.freeStake(node), min, "minimum stays bonded");
    }

    /// @dev The attack on leaving: unbond everything, re-bond a few wei, withdraw, and hold a slot for nothing.
    function test_stake_leavingNodeTopUpBelowMinimum_reverts() public {
        address node = _minNode(0);
        vm.prank(node);
        registry.leave();
        vm.prank(node);
        vm.expectRevert(abi.encodeWithSelector(BelowMinimumStake.selector, node, 1, min));
        registry.stake(1);
    }

    /// @dev Staking the minimum again while leaving cancels the exit: the later withdraw keeps the node.
    function test_stake_whileLeavingCancelsExit_succeeds() public {
        address node = _newNode(0, ROLE_SOLVER, 50e18);
        vm.prank(node);
        registry.leave();
        vm.prank(node);
        registry.stake(min);
        vm.warp(block.timestamp + registry.unbondingPeriod());
        vm.prank(node);
        registry.withdraw();
        assertEq(registry.getNode(node).slot, 1, "still registered");
        assertEq(registry.getNode(node).stake, min, "the new stake stays");
    }

    // ---------------------------------------------------------------- leaving

    function test_leave_freesSlotAndNewNodeReusesIt_succeeds() public {
        _addNodes(3);
        address leaver = nodes[0];
        address last = nodes[2];
        (uint256 lastSolver, uint256 lastReferee) = lens.weightsOf(last);
        uint256 before = token.balanceOf(leaver);
        uint64 availableAt = uint64(block.timestamp) + registry.unbondingPeriod();
        vm.expectEmit(true, false, false, true, address(registry));
        emit INodeRegistry.UnstakeRequested(leaver, NODE_STAKE, availableAt);
        vm.prank(leaver);
        registry.leave();
        assertEq(registry.getNode(leaver).slot, 1, "registered until withdraw");
        vm.warp(block.timestamp + registry.unbondingPeriod());
        vm.expectEmit(true, false, false, true, address(registry));
        emit INodeRegistry.NodeLeft(leaver, 1);
        vm.prank(leaver);
        registry.withdraw();

        assertEq(token.balanceOf(leaver) - before, NODE_STAKE, "whole stake returned");
        assertEq(registry.getNode(leaver).slot, 0, "deregistered");
        assertEq(registry.rolesOf(leaver), 0, "no roles");
        assertEq(registry.nodeCount(), 2, "count");
        assertEq(registry.nodeList(0), last, "last node moved into the freed slot");
        assertEq(registry.getNode(last).slot, 1, "moved node's slot");
        (uint256 s, uint256 r) = lens.weightsOf(last);
        assertEq(s, lastSolver, "moved solver weight");
        assertEq(r, lastReferee, "moved referee weight");
        _assertListCoherent();

        address fresh = _newNode(7, ROLE_SOLVER, NODE_STAKE);
        assertEq(registry.getNode(fresh).slot, 3, "reuses the freed slot count");
        assertEq(registry.nodeCount(), 3, "count");
        _assertListCoherent();
        assertEq(token.balanceOf(address(registry)), 3 * NODE_STAKE, "registry holds exactly the stakes");
    }

    function test_leave_lastNode_succeeds() public {
        _addNodes(2);
        _leaveAndWithdraw(nodes[1]);
        assertEq(registry.nodeCount(), 1, "count");
        assertEq(registry.nodeList(0), nodes[0], "first node stays");
        _assertListCoherent();
    }

    function test_leave_whileLocked_reverts() public {
        _addNodes(1);
        vm.prank(proto);
        registry.lock(nodes[0], 1e18);
        vm.prank(nodes[0]);
        vm.expectRevert(abi.encodeWithSelector(StakeStillLocked.selector, nodes[0], 1e18));
        registry.leave();
    }

    function test_leave_twice_reverts() public {
        _addNodes(1);
        vm.prank(nodes[0]);
        registry.leave();
        uint64 at = uint64(block.timestamp) + registry.unbondingPeriod();
        vm.prank(nodes[0]);
        vm.expectRevert(abi.encodeWithSelector(AlreadyLeaving.selector, nodes[0], at));
        registry.leave();
    }

    function test_leave_unregistered_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(NodeNotRegistered.selector, address(this)));
        registry.leave();
    }

    /// @dev A node slashed to nothing has nothing to unbond: leave frees its slot at once.
    function test_leave_afterFullSlash_deregistersAtOnce_succeeds() public {
        _addNodes(2);
        vm.startPrank(proto);
        registry.lock(nodes[0], NODE_STAKE);
        registry.slash(nodes[0], NODE_STAKE, proto);
        vm.stopPrank();
        vm.prank(nodes[0]);
        registry.leave();
        assertEq(registry.getNode(nodes[0]).slot, 0, "deregistered");
        assertEq(registry.nodeCount(), 1, "count");
        _assertListCoherent();
    }

    /// @dev Unbonding the whole stake with requestUnstake is leaving too: withdraw deregisters.
    function test_requestUnstake_everything_leaves_succeeds() public {
        _addNodes(2);
        vm.prank(nodes[0]);
        registry.requestUnstake(NODE_STAKE);
        vm.warp(block.timestamp + registry.unbondingPeriod());
        vm.prank(nodes[0]);
        registry.withdraw();
        assertEq(registry.getNode(nodes[0]).slot, 0, "deregistered");
        _assertListCoherent();
    }

    function test_leave_thenRegisterAgain_keepsReputation_succeeds() public {
        _addNodes(2);
        vm.prank(proto);
        registry.recordDispute(nodes[0], false);
        _leaveAndWithdraw(nodes[0]);
        vm.startPrank(nodes[0]);
        registry.register(ROLE_SOLVER, 0, 16_000, 100, 3, MULTIADDR);
        vm.stopPrank();
        assertEq(registry.getNode(nodes[0]).slot, 2, "new slot at the end");
        assertEq(registry.getNode(nodes[0]).stake, min, "minimum pulled again");
        assertEq(lens.reputationOf(nodes[0]).disputesLost, 1, "history kept");
        _assertListCoherent();
    }

    /// @dev Neither a leaving node (all stake unbonding) nor one that left is ever drawn, over many seeds.
    function test_draw_neverReturnsLeaver_succeeds() public {
        _addNodes(5);
        address leaver = nodes[1];
        vm.prank(leaver);
        registry.leave();
        for (uint256 s = 0; s < 64; ++s) {
            assertNotEq(_solverDrawn(bytes32(s), 0, 0, 1, 0, 0, 1, new address[](0)), leaver, "leaving");
            assertNotEq(registry.drawReferee(bytes32(s), 0, 0, 1, 1, new address[](0)), leaver, "leaving");
        }
        vm.warp(block.timestamp + registry.unbondingPeriod());
        vm.prank(leaver);
        registry.withdraw();
        _heartbeatAll_registered();
        for (uint256 s = 0; s < 64; ++s) {
            address d = _solverDrawn(bytes32(s), 0, 0, 1, 0, 0, 1, new address[](0));
            assertNotEq(d, leaver, "left");
            assertTrue(d != address(0), "others still drawn");
        }
        _assertListCoherent();
    }

    function _heartbeatAll_registered() internal {
        for (uint256 i = 0; i < registry.nodeCount(); ++i) {
            vm.prank(registry.nodeList(i));
            registry.heartbeat();
        }
    }

    /// @dev Random leaves, re-registrations and stakes keep slots dense, weights summing to the totals, and tokens
    ///      conserved (the registry holds exactly the sum of stakes).
    function testFuzz_leaveAndJoin_keepsRegistryCoherent_succeeds(uint256 seed) public {
        _addNodes(6);
        for (uint256 k = 0; k < 8; ++k) {
            uint256 r = uint256(keccak256(abi.encode(seed, k)));
            uint256 count = registry.nodeCount();
            if (r % 3 != 0 && count > 1) {
                _leaveAndWithdraw(registry.nodeList((r >> 8) % count));
            } else {
                _newNode(100 + k, uint8(1 + (r >> 16) % 7), min + (r >> 24) % 1_000e18);
            }
            _assertListCoherent();
            uint256 staked;
            for (uint256 i = 0; i < registry.nodeCount(); ++i) {
                staked += registry.getNode(registry.nodeList(i)).stake;
            }
            assertEq(token.balanceOf(address(registry)), staked, "tokens conserved");
        }
    }
}
