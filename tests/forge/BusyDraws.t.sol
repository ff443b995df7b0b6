// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Fixture} from "./base/Fixture.sol";
import {PostJobParams, TaskStatus, ROLE_SOLVER, ROLE_REFEREE} from "../../contracts/types/VerityTypes.sol";

/// @notice Issue 23, item 2 ("busy heavy identities starve draws"): selection weight counted locked stake and the
///         free-stake filter ran after sampling, so 17 heavy identities kept busy by the attacker's own job soaked up
///         every attempt of a draw (MAX_DRAWS = 16): measured on main, 0 of 20 honest jobs got both replicas. Now a
///         node's weight is capped by its free stake (rounded up to a power of two, NodeMath.weightBase), so stake
///         locked by work weighs at most twice what the node can still lock.
contract BusyDrawsTest is Fixture {
    uint256 internal constant SYBIL_STAKE = 900_000e18; // 900x an honest node's stake, each
    uint256 internal constant SYBILS = 17; // one more than MAX_DRAWS
    uint256 internal constant LEFT_FREE = TASK_STAKE - 1e18; // what each busy sybil keeps: just short of a task

    address[] internal sybils;

    function _sybil(uint256 i) internal returns (address node) {
        node = address(uint160(0x5D0000 + i));
        token.mint(node, SYBIL_STAKE);
        vm.startPrank(node);
        token.approve(address(registry), type(uint256).max);
        registry.register(ROLE_SOLVER | ROLE_REFEREE, 0, 16_000, 1, 1, MULTIADDR);
        registry.stake(SYBIL_STAKE - registry.MIN_REGISTRATION_STAKE());
        registry.heartbeat(); // registering is not a check-in: drawn only after one
        vm.stopPrank();
        sybils.push(node);
    }

    function _isSybil(address node) internal pure returns (bool) {
        return uint160(node) >= 0x5D0000 && uint160(node) < 0x5E0000;
    }

    function _heartbeatEveryone() internal {
        _heartbeatAll();
        for (uint256 i = 0; i < sybils.length; ++i) {
            vm.prank(sybils[i]);
            registry.heartbeat();
        }
    }

    /// @dev The attacker's own job: one shard per sybil, a task stake only a sybil can lock, leaving each sybil
    ///      LEFT_FREE (short of an honest job's task stake, so the free-stake filter rejects it). Returns how many
    ///      sybils it keeps busy.
    function _keepSybilsBusy() internal returns (uint256 busy) {
        PostJobParams memory p = _params(uint32(SYBILS), 1, 1);
        p.stakePerReplica = SYBIL_STAKE - LEFT_FREE;
        uint256 jobId = _postOnly(p);
        for (uint256 attempt = 0; attempt < 4; ++attempt) {
            for (uint32 i = 0; i < SYBILS; ++i) {
                uint256 taskId = views.taskOf(jobId, 0, i);
                if (_status(taskId) == TaskStatus.Open) _tryDraw(taskId);
            }
            _nextEpoch();
            _heartbeatEveryone();
        }
        for (uint256 i = 0; i < sybils.length; ++i) {
            if (registry.freeStake(sybils[i]) == LEFT_FREE) ++busy;
        }
    }

    /// @dev The attack of the issue: 8 honest nodes of 1,000 VRT, 17 sybils of 900,000 VRT busy in the attacker's
    ///      job, 20 honest jobs of replication 2. Every honest job gets both replicas, all honest.
    function test_draw_busyHeavyIdentities_absorbNothing_succeeds() public {
        _addNodes(8);
        for (uint256 i = 0; i < SYBILS; ++i) {
            _sybil(i);
        }
        _nextEpoch();
        _heartbeatEveryone();
        uint256 busy = _keepSybilsBusy();
        assertEq(busy, SYBILS, "every sybil is busy in the attacker's job");
        uint256 full;
        for (uint256 j = 0; j < 20; ++j) {
            uint256 taskId = views.taskOf(_post(_params(1, 1, 2)), 0, 0);
            if (_status(taskId) != TaskStatus.Assigned) continue;
            assertFalse(_isSybil(_replica(taskId, 0).node) || _isSybil(_replica(taskId, 1).node), "an honest pair");
            ++full;
            _heartbeatEveryone();
        }
        // main (weight = bonded stake): 0 of 20 jobs got both replicas
        assertEq(full, 20, "honest jobs with both replicas, of 20 (main: 0)");
        (uint256 sybilWeight,) = lens.weightsOf(sybils[0]);
        assertLe(sybilWeight, 2 * LEFT_FREE, "a busy node weighs at most twice its free stake");
    }

    /// @dev The cap moves only when the free stake crosses a power of two: an idle 1,000-VRT node locks 400 VRT of
    ///      tasks without a tree write (its weight stays its bonded stake), and one more lock that takes its free
    ///      stake below 2^69 wei (~590 VRT) cuts its weight to that power of two, at the next epoch's draws. The unlock
    ///      leaves it there until the node's next heartbeat.
    function test_weight_lockBelowAPowerOfTwo_capsTheWeight_succeeds() public {
        _addNodes(1);
        address node = nodes[0];
        (uint256 idle,) = lens.weightsOf(node);
        vm.startPrank(address(jobs));
        registry.lock(node, 400e18);
        (uint256 w,) = lens.weightsOf(node);
        assertEq(w, idle, "600 VRT free: the cap (2^70 wei) is above the bonded stake");
        registry.lock(node, 20e18);
        (w,) = lens.weightsOf(node);
        uint256 capped = (uint256(1) << 69) * idle / NODE_STAKE;
        assertLe(w, capped, "580 VRT free: capped at 2^69 wei");
        assertGt(w + registry.WEIGHT_UNIT(), capped, "580 VRT free: weighs 2^69 wei");
        registry.unlock(node, 420e18);
        vm.stopPrank();
        (w,) = lens.weightsOf(node);
        assertLe(w, capped, "an unlock leaves the weight low (finalize writes no tree)");
        vm.prank(node);
        registry.heartbeat();
        (w,) = lens.weightsOf(node);
        assertEq(w, idle, "unlocked, after a heartbeat: back to its bonded stake");
    }
}
