// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {NodeMath} from "../../contracts/lib/NodeMath.sol";
import {Fixture} from "./base/Fixture.sol";
import {NodeRegistry} from "../../contracts/NodeRegistry.sol";
import {INodeRegistry} from "../../contracts/interfaces/INodeRegistry.sol";
import {Node, Reputation, ROLE_SOLVER, ROLE_VERIFIER, ROLE_REFEREE} from "../../contracts/types/VerityTypes.sol";
import {ZeroAddress, ParameterOutOfRange, NotProtocol} from "../../contracts/errors/CommonErrors.sol";
import "../../contracts/errors/NodeRegistryErrors.sol";
import {Ownable} from "@openzeppelin/contracts/access/Ownable.sol";

contract NodeRegistryTest is Fixture {
    address internal alice;
    address internal proto = address(0x9807);

    function setUp() public override {
        super.setUp();
        alice = _newNode(0, ALL_ROLES, NODE_STAKE);
        registry.setProtocol(proto, true);
    }

    // ---------------------------------------------------------------- register / update

    function test_register_storesDeclaration_succeeds() public view {
        Node memory n = registry.getNode(alice);
        assertEq(n.roles, ALL_ROLES, "roles");
        assertEq(n.memoryMb, 16_000, "memory");
        assertEq(n.profiles, 3, "profiles");
        assertEq(n.slot, 1, "slot");
        assertEq(n.stake, NODE_STAKE, "stake");
        assertEq(registry.nodeCount(), 1, "count");
    }

    function test_register_emitsEvent_succeeds() public {
        address bob = address(0xB0B);
        uint256 min = registry.MIN_REGISTRATION_STAKE();
        token.mint(bob, min);
        vm.prank(bob);
        token.approve(address(registry), min);
        vm.expectEmit(true, false, false, true, address(registry));
        emit INodeRegistry.NodeRegistered(bob, ROLE_SOLVER, 1, 8_000, 7, 2, MULTIADDR);
        vm.expectEmit(true, false, false, true, address(registry));
        emit INodeRegistry.Staked(bob, min, min);
        vm.prank(bob);
        registry.register(ROLE_SOLVER, 1, 8_000, 7, 2, MULTIADDR);
    }

    function test_register_twice_reverts() public {
        vm.prank(alice);
        vm.expectRevert(abi.encodeWithSelector(NodeAlreadyRegistered.selector, alice));
        registry.register(ROLE_SOLVER, 0, 1, 1, 1, MULTIADDR);
    }

    function test_register_badRoles_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(InvalidRoles.selector, uint8(0)));
        registry.register(0, 0, 1, 1, 1, MULTIADDR);
        vm.expectRevert(abi.encodeWithSelector(InvalidRoles.selector, uint8(8)));
        registry.register(8, 0, 1, 1, 1, MULTIADDR);
    }

    function test_register_badDevice_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(InvalidDeviceClass.selector, uint8(2)));
        registry.register(ROLE_SOLVER, 2, 1, 1, 1, MULTIADDR);
    }

    function test_register_badMultiaddr_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(InvalidMultiaddr.selector, uint256(0), uint256(256)));
        registry.register(ROLE_SOLVER, 0, 1, 1, 1, "");
        bytes memory long = new bytes(257);
        vm.expectRevert(abi.encodeWithSelector(InvalidMultiaddr.selector, uint256(257), uint256(256)));
        registry.register(ROLE_SOLVER, 0, 1, 1, 1, string(long));
    }

    function test_updateNode_changesRolesAndWeights_succeeds() public {
        (uint256 s0, uint256 r0) = lens.weightsOf(alice);
        assertGt(s0, 0, "solver weight");
        assertGt(r0, 0, "referee weight");
        vm.prank(alice);
        registry.updateNode(ROLE_VERIFIER, 1, 32_000, 9, 2, "/ip4/10.0.0.1/tcp/1");
        (uint256 s1, uint256 r1) = lens.weightsOf(alice);
        assertEq(s1, 0, "no solver weight");
        assertEq(r1, 0, "no referee weight");
        assertEq(registry.getNode(alice).deviceClass, 1, "device");
    }

    function test_updateNode_unregistered_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(NodeNotRegistered.selector, address(this)));
        registry.updateNode(ROLE_SOLVER, 0, 1, 1, 1, MULTIADDR);
    }

    // ---------------------------------------------------------------- stake

    function test_stake_zero_reverts() public {
        vm.prank(alice);
        vm.expectRevert(ZeroAmount.selector);
        registry.stake(0);
    }

    function test_stake_unregistered_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(NodeNotRegistered.selector, address(this)));
        registry.stake(1);
    }

    function test_requestUnstake_moreThanFree_reverts() public {
        vm.prank(proto);
        registry.lock(alice, 600e18);
        vm.prank(alice);
        vm.expectRevert(abi.encodeWithSelector(InsufficientFreeStake.selector, alice, 400e18, 401e18));
        registry.requestUnstake(401e18);
    }

    function test_requestUnstake_zero_reverts() public {
        vm.prank(alice);
        vm.expectRevert(ZeroAmount.selector);
        registry.requestUnstake(0);
    }

    function test_withdraw_afterUnbonding_succeeds() public {
        vm.prank(alice);
        registry.requestUnstake(300e18);
        vm.warp(block.timestamp + registry.unbondingPeriod());
        uint256 before = token.balanceOf(alice);
        vm.prank(alice);
        registry.withdraw();
        assertEq(token.balanceOf(alice) - before, 300e18, "withdrawn");
        assertEq(registry.getNode(alice).stake, 700e18, "stake");
    }

    function test_withdraw_beforeUnbonding_reverts() public {
        vm.prank(alice);
        registry.requestUnstake(300e18);
        uint64 at = uint64(block.timestamp) + registry.unbondingPeriod();
        vm.prank(alice);
        vm.expectRevert(abi.encodeWithSelector(StillUnbonding.selector, alice, at));
        registry.withdraw();
    }

    function test_withdraw_nothingPending_reverts() public {
        vm.prank(alice);
        vm.expectRevert(abi.encodeWithSelector(NothingUnbonding.selector, alice));
        registry.withdraw();
    }

    function test_heartbeat_refreshesLiveness_succeeds() public {
        vm.warp(block.timestamp + 1_000);
        assertFalse(registry.isEligible(alice, ROLE_SOLVER, 0, 1, 1, 0, 0, 1), "stale");
        vm.prank(alice);
        registry.heartbeat();
        assertTrue(registry.isEligible(alice, ROLE_SOLVER, 0, 1, 1, 0, 0, 1), "live");
    }

    /// @dev Issue 25: a node registered and never started was drawn 5 times and fined while its status showed
    ///      "promptness 100 %": registering counted as a check-in for a whole liveness window. Now only a heartbeat
    ///      (or accepted work) does, also for a node that returns after leaving.
    function test_register_isNotACheckIn_drawnOnlyAfterHeartbeat_succeeds() public {
        address idle = address(0x1D1E);
        token.mint(idle, 100 * NODE_STAKE);
        vm.startPrank(idle);
        token.approve(address(registry), type(uint256).max);
        registry.register(ALL_ROLES, 0, 16_000, 100, 3, MULTIADDR);
        registry.stake(100 * NODE_STAKE - registry.MIN_REGISTRATION_STAKE()); // 100x alice: drawn ~99 % if live
        vm.stopPrank();
        _nextEpoch();
        assertFalse(registry.isEligible(idle, ROLE_SOLVER, 0, 1, 1, 0, 0, 1), "registered, never checked in");
        (uint256 solverWeight, uint256 refereeWeight) = lens.weightsOf(idle);
        assertEq(solverWeight + refereeWeight, 0, "no weight before its first heartbeat");
        for (uint256 i = 0; i < 50; ++i) {
            assertEq(_solverDrawn(keccak256(abi.encode(i)), 0, 1, 1, 0, 0, 0, new address[](0)), alice, "only alice");
        }
        vm.prank(idle);
        registry.heartbeat();
        _nextEpoch();
        assertTrue(registry.isEligible(idle, ROLE_SOLVER, 0, 1, 1, 0, 0, 1), "live after its heartbeat");
        uint256 idleDrawn;
        for (uint256 i = 0; i < 50; ++i) {
            if (_solverDrawn(keccak256(abi.encode(i)), 0, 1, 1, 0, 0, 0, new address[](0)) == idle) ++idleDrawn;
        }
        assertGt(idleDrawn, 40, "drawn by its stake once it checked in");
        // a node that leaves and registers again right after its last heartbeat starts unseen too
        vm.startPrank(idle);
        registry.leave();
        vm.warp(block.timestamp + registry.unbondingPeriod());
        registry.heartbeat();
        registry.withdraw(); // deregisters
        registry.register(ALL_ROLES, 0, 16_000, 100, 3, MULTIADDR);
        vm.stopPrank();
        _nextEpoch();
        assertFalse(registry.isEligible(idle, ROLE_SOLVER, 0, 1, 1, 0, 0, 1), "returned, not checked in since");
    }

    function test_heartbeat_unregistered_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(NodeNotRegistered.selector, address(this)));
        registry.heartbeat();
    }

    // ---------------------------------------------------------------- protocol

    function test_lock_notProtocol_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(NotProtocol.selector, address(0xBAD)));
        vm.prank(address(0xBAD));
        registry.lock(alice, 1);
    }

    function test_lock_moreThanFree_reverts() public {
        vm.prank(proto);
        vm.expectRevert(abi.encodeWithSelector(InsufficientFreeStake.selector, alice, NODE_STAKE, NODE_STAKE + 1));
        registry.lock(alice, NODE_STAKE + 1);
    }

    function test_lock_unregistered_reverts() public {
        vm.prank(proto);
        vm.expectRevert(abi.encodeWithSelector(NodeNotRegistered.selector, address(0xBAD)));
        registry.lock(address(0xBAD), 1);
    }

    function test_unlock_moreThanLocked_reverts() public {
        vm.prank(proto);
        vm.expectRevert(abi.encodeWithSelector(InsufficientLockedStake.selector, alice, 0, 1));
        registry.unlock(alice, 1);
    }

    function test_slash_movesTokensAndCounts_succeeds() public {
        vm.startPrank(proto);
        registry.lock(alice, 100e18);
        registry.slash(alice, 40e18, proto);
        vm.stopPrank();
        assertEq(token.balanceOf(proto), 40e18, "to");
        Node memory n = registry.getNode(alice);
        assertEq(n.stake, NODE_STAKE - 40e18, "stake");
        assertEq(n.locked, 60e18, "locked");
        assertEq(lens.reputationOf(alice).totalSlashed, 40e18, "totalSlashed");
    }

    function test_slash_moreThanLocked_reverts() public {
        vm.prank(proto);
        vm.expectRevert(abi.encodeWithSelector(InsufficientLockedStake.selector, alice, 0, 1));
        registry.slash(alice, 1, proto);
    }

    function test_slash_toZero_reverts() public {
        vm.prank(proto);
        vm.expectRevert(abi.encodeWithSelector(ZeroAddress.selector, bytes32("to")));
        registry.slash(alice, 1, address(0));
    }

    function test_record_updatesReputationAndWeight_succeeds() public {
        (uint256 w0,) = lens.weightsOf(alice);
        vm.startPrank(proto);
        registry.unlockCompleted(alice, 0, true, type(uint256).max);
        registry.recordLate(alice);
        registry.recordDispute(alice, true);
        registry.recordDispute(alice, false);
        vm.stopPrank();
        Reputation memory r = lens.reputationOf(alice);
        assertEq(r.tasksCompleted, 1, "completed");
        assertEq(r.tasksLate, 1, "late");
        assertEq(r.disputesWon, 1, "won");
        assertEq(r.disputesLost, 1, "lost");
        // factor = 2 / (2 + 1 + 4 + 9 probation) = 1250 bps; w0 was the fresh identity's 1000 bps
        assertEq(lens.reputationFactorBps(alice), 1250, "factor");
        (uint256 w1,) = lens.weightsOf(alice);
        assertEq(w1, (w0 * 1250) / 1000, "weight");
    }

    function test_reputationFactor_floored_succeeds() public {
        vm.startPrank(proto);
        for (uint256 i = 0; i < 5; ++i) {
            registry.recordDispute(alice, false);
        }
        vm.stopPrank();
        assertEq(lens.reputationFactorBps(alice), registry.MIN_REPUTATION_BPS(), "floor");
    }

    function test_record_notProtocol_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(NotProtocol.selector, address(this)));
        registry.recordLate(alice);
    }

    // ---------------------------------------------------------------- owner

    function test_setProtocol_idempotent_succeeds() public {
        registry.setProtocol(proto, true);
        assertTrue(registry.isProtocol(proto), "still set");
        registry.setProtocol(proto, false);
        assertFalse(registry.isProtocol(proto), "unset");
    }

    function test_setProtocol_notOwner_reverts() public {
        vm.prank(alice);
        vm.expectRevert(abi.encodeWithSelector(Ownable.OwnableUnauthorizedAccount.selector, alice));
        registry.setProtocol(alice, true);
    }

    function test_setProtocol_zero_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(ZeroAddress.selector, bytes32("account")));
        registry.setProtocol(address(0), true);
    }

    function test_setParameters_succeeds() public {
        registry.setUnbondingPeriod(10);
        registry.setLivenessWindow(20);
        assertEq(registry.unbondingPeriod(), 10, "unbonding");
        assertEq(registry.livenessWindow(), 20, "liveness");
    }

    function test_setParameters_outOfRange_reverts() public {
        vm.expectRevert(
            abi.encodeWithSelector(ParameterOutOfRange.selector, bytes32("livenessWindow"), 0, 1, 30 days)
        );
        registry.setLivenessWindow(0);
        vm.expectRevert(
            abi.encodeWithSelector(ParameterOutOfRange.selector, bytes32("unbondingPeriod"), 31 days, 0, 30 days)
        );
        registry.setUnbondingPeriod(31 days);
    }

    // ---------------------------------------------------------------- fuzz: stake accounting

    function testFuzz_stakeAccounting_freeNeverNegative_succeeds(uint96 add, uint96 lockAmt, uint96 unstakeAmt, uint96 cut)
        public
    {
        uint256 extra = bound(add, 1, 500_000e18);
        vm.prank(alice);
        registry.stake(extra);
        uint256 total = NODE_STAKE + extra;
        uint256 locked = bound(lockAmt, 0, total);
        vm.prank(proto);
        registry.lock(alice, locked);
        uint256 free = total - locked;
        // The bonded stake left after an unstake is 0 (leaving) or at least the minimum (it could be anything before
        // MIN_REGISTRATION_STAKE existed); slashing below stays possible.
        uint256 pending = bound(unstakeAmt, 0, free);
        uint256 min = registry.MIN_REGISTRATION_STAKE();
        if (pending != total && total - pending < min) pending = total - min > free ? free : total - min;
        if (total - pending != 0 && total - pending < min) pending = 0;
        if (pending > 0) {
            vm.prank(alice);
            registry.requestUnstake(pending);
        }
        uint256 slashAmt = bound(cut, 0, locked);
        vm.prank(proto);
        registry.slash(alice, slashAmt, proto);
        Node memory n = registry.getNode(alice);
        assertEq(n.stake, total - slashAmt, "stake");
        assertEq(n.locked, locked - slashAmt, "locked");
        assertEq(registry.freeStake(alice), total - locked - pending, "free");
        assertEq(token.balanceOf(address(registry)), n.stake, "registry holds stake");
        (uint256 w,) = lens.weightsOf(alice);
        uint256 unit = registry.WEIGHT_UNIT(); // weights are kept in whole gwei
        uint256 base = NodeMath.weightBase(n.stake - pending, registry.freeStake(alice)); // capped by free stake
        assertEq(w, (base * registry.MIN_REPUTATION_BPS()) / 10_000 / unit * unit, "weight = weightBase x probation");
        if (pending > 0) {
            vm.warp(block.timestamp + registry.unbondingPeriod());
            vm.prank(alice);
            registry.withdraw();
            assertEq(registry.getNode(alice).stake, total - slashAmt - pending, "after withdraw");
            assertLe(registry.getNode(alice).locked, registry.getNode(alice).stake, "locked <= stake");
        }
    }
}
