// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Fixture} from "./base/Fixture.sol";
import {PostJobParams, TaskStatus, ROLE_SOLVER, ROLE_REFEREE} from "../../contracts/types/VerityTypes.sol";
import {NodeStillLive} from "../../contracts/errors/NodeRegistryErrors.sol";

/// @notice Issue 9, "starved draws": identities with large stake but ineligible declarations (0 MB memory, another
///         profile, a CPU declared for CUDA jobs) absorbed the draws, because filters applied after sampling: with 16
///         of them only 1 of 20 jobs got both replicas. Now a node's weight sits in the trees of its eligibility
///         classes (role, profile, CUDA-only, memory tier) and a draw reads only the classes that meet its
///         requirements, so ineligible weight absorbs nothing.
contract EligibleDrawsTest is Fixture {
    uint256 internal constant SYBIL_STAKE = 900_000e18; // 900x an honest node's stake, each

    function _sybil(uint256 i, uint8 device, uint32 memoryMb, uint32 profiles) internal returns (address node) {
        node = address(uint160(0x5B0000 + i));
        token.mint(node, SYBIL_STAKE);
        vm.startPrank(node);
        token.approve(address(registry), type(uint256).max);
        registry.register(ROLE_SOLVER | ROLE_REFEREE, device, memoryMb, 1, profiles, MULTIADDR);
        registry.stake(SYBIL_STAKE - registry.MIN_REGISTRATION_STAKE());
        registry.heartbeat(); // registering is not a check-in: drawn only after one
        vm.stopPrank();
        _nextEpoch();
    }

    function _isSybil(address node) internal pure returns (bool) {
        return uint160(node) >= 0x5B0000 && uint160(node) < 0x5C0000;
    }

    /// @dev The attack of the issue: 16 huge ineligible identities of each kind, 8 honest nodes, 20 jobs. Every
    ///      task gets both replicas, every one of them honest. (The 40 replicas lock 100 VRT each and stay locked: 8
    ///      honest nodes of 1,000 VRT hold them with room whatever the draws; 4 would be exactly full.)
    function test_draw_ineligibleHeavyIdentities_absorbNothing_succeeds() public {
        _addNodes(8);
        for (uint256 i = 0; i < 16; ++i) {
            _sybil(i, 0, 0, 1); // 0 MB memory
            _sybil(100 + i, 0, 16_000, 4); // another profile (portable-f32)
            _sybil(200 + i, 0, 16_000, 2); // declares cuda-f32-strict on a CPU
        }
        for (uint256 j = 0; j < 20; ++j) {
            uint256 jobId = _post(_params(1, 1, 2));
            uint256 taskId = views.taskOf(jobId, 0, 0);
            assertEq(uint8(_status(taskId)), uint8(TaskStatus.Assigned), "both replicas drawn");
            assertFalse(_isSybil(_replica(taskId, 0).node) || _isSybil(_replica(taskId, 1).node), "an honest pair");
            for (uint256 k = 0; k < nodes.length; ++k) {
                vm.prank(nodes[k]);
                registry.heartbeat(); // stay live across the jobs
            }
            jobId;
        }
    }

    /// @dev A CUDA job reads only the trees of CUDA nodes: CPU identities declaring the CUDA profile are never met.
    function test_draw_cudaJob_readsOnlyCudaNodes_succeeds() public {
        for (uint256 i = 0; i < 8; ++i) {
            _sybil(i, 0, 16_000, 2); // CPU nodes claiming cuda-f32-strict
        }
        address gpu = _sybil(50, 1, 80_000, 2);
        for (uint256 s = 0; s < 30; ++s) {
            address drawn = _solverDrawn(bytes32(s), 1, 1_000, 2, 0, 0, 1, new address[](0));
            assertEq(drawn, gpu, "the only CUDA node");
        }
    }

    /// @dev More heavy CPU nodes claiming the CUDA profile than a draw's rejections (MAX_DRAWS), and one GPU node at
    ///      the minimum stake (1/90,000 of each CPU node's): a draw that sampled the any-device trees would spend its
    ///      MAX_DRAWS attempts rejecting CPU nodes and seat nobody; reading only the CUDA-only trees, it seats the GPU
    ///      node every time.
    function test_draw_cudaJob_heavyCpuNodesBeyondMaxDraws_stillDrawsTheGpuNode_succeeds() public {
        address cpu;
        for (uint256 i = 0; i < registry.MAX_DRAWS() + 4; ++i) {
            cpu = _sybil(i, 0, 16_000, 2); // CPU nodes claiming cuda-f32-strict
        }
        address gpu = address(0x6B0001);
        token.mint(gpu, registry.MIN_REGISTRATION_STAKE());
        vm.startPrank(gpu);
        token.approve(address(registry), type(uint256).max);
        registry.register(ROLE_SOLVER | ROLE_REFEREE, 1, 80_000, 1, 2, MULTIADDR); // stake: the minimum only
        registry.heartbeat(); // registering is not a check-in: drawn only after one
        vm.stopPrank();
        _nextEpoch();
        (uint256 gpuWeight,) = lens.weightsOf(gpu);
        (uint256 cpuWeight,) = lens.weightsOf(cpu);
        assertGt(cpuWeight, 10_000 * gpuWeight, "each CPU node outweighs the GPU node");
        assertFalse(registry.isEligible(cpu, ROLE_SOLVER, 1, 1_000, 2, 0, 0, 1), "a CPU node: not for CUDA work");
        for (uint256 s = 0; s < 30; ++s) {
            address drawn = _solverDrawn(bytes32(s), 1, 1_000, 2, 0, 0, 1, new address[](0));
            assertEq(drawn, gpu, "the only CUDA node, however light");
        }
    }

    /// @dev A requirement rounds up to a tier floor (1 GiB doubling): every node in the trees read has at least the
    ///      requirement. The price: a node with less than twice the requirement may be left out (documented).
    function test_draw_memoryRequirement_roundsUpToATierFloor_succeeds() public {
        address small = _sybil(1, 0, 6_000, 1); // tier 4 GiB
        address big = _sybil(2, 0, 9_000, 1); // tier 8 GiB
        assertEq(lens.memoryTier(6_000), 3, "4 GiB tier");
        assertEq(lens.memoryTier(9_000), 4, "8 GiB tier");
        for (uint256 s = 0; s < 20; ++s) {
            assertEq(_solverDrawn(bytes32(s), 0, 5_000, 1, 0, 0, 1, new address[](0)), big, "5,000 MB: 8 GiB tier up");
        }
        uint256 seen;
        for (uint256 s = 0; s < 20; ++s) {
            if (_solverDrawn(bytes32(s), 0, 4_000, 1, 0, 0, 1, new address[](0)) == small) ++seen;
        }
        assertGt(seen, 0, "4,000 MB: both tiers");
    }

    /// @dev An offline node's weight can be removed by anyone; its heartbeat restores it.
    function test_evictOffline_removesWeightUntilHeartbeat_succeeds() public {
        address node = _sybil(1, 0, 16_000, 1);
        vm.expectRevert(abi.encodeWithSelector(NodeStillLive.selector, node, block.timestamp + registry.livenessWindow()));
        registry.evictOffline(node);
        vm.warp(block.timestamp + registry.livenessWindow() + 1);
        registry.evictOffline(node);
        (uint256 s, uint256 r) = lens.weightsOf(node);
        assertEq(s + r, 0, "weightless");
        assertEq(lens.classWeight(ROLE_SOLVER, 0, 1, false, lens.memoryTier(16_000)), 0, "out of its tree");
        vm.prank(node);
        registry.heartbeat();
        (s,) = lens.weightsOf(node);
        assertEq(lens.classWeight(ROLE_SOLVER, 0, 1, false, lens.memoryTier(16_000)), s, "back");
        assertGt(s, 0, "weighted again");
    }

    /// @dev Issue 25: an operator stopping its node signs it off (`evictOffline` on itself, while live): no draw
    ///      returns it, not even one in the epoch whose weights still hold it, and its accepted work does not sign it
    ///      back on; its heartbeat does. Before, it was drawn, and fined as late, for the rest of its liveness window.
    function test_evictOffline_self_signsOffUntilItsHeartbeat_succeeds() public {
        address node = _sybil(1, 0, 16_000, 1); // 900x an honest node's stake: drawn nearly always while on
        assertEq(_solverDrawn(bytes32(0), 0, 1_000, 1, 0, 0, 1, new address[](0)), node, "drawn while on");
        vm.prank(node);
        registry.evictOffline(node);
        assertEq(registry.getNode(node).lastSeen, 0, "signed off");
        (uint256 s, uint256 r) = lens.weightsOf(node);
        assertEq(s + r, 0, "weightless");
        for (uint256 i = 0; i < 20; ++i) {
            assertNotEq(_solverDrawn(bytes32(i), 0, 1_000, 1, 0, 0, 1, new address[](0)), node, "drawn while off");
        }
        vm.prank(address(jobs));
        registry.unlockCompleted(node, 0, true, 5_000); // a task it held is accepted meanwhile
        assertEq(registry.getNode(node).lastSeen, 0, "accepted work signed it back on");
        _nextEpoch();
        assertNotEq(_solverDrawn(bytes32(0), 0, 1_000, 1, 0, 0, 1, new address[](0)), node, "drawn after an epoch");
        vm.prank(node);
        registry.heartbeat();
        _nextEpoch();
        assertEq(_solverDrawn(bytes32(0), 0, 1_000, 1, 0, 0, 1, new address[](0)), node, "back after its heartbeat");
    }

    /// @dev A new declaration moves the weight out of the old classes into the new ones.
    function test_updateNode_movesWeightBetweenClasses_succeeds() public {
        address node = _sybil(1, 0, 16_000, 1);
        uint256 tier = lens.memoryTier(16_000);
        (uint256 w,) = lens.weightsOf(node);
        assertEq(lens.classWeight(ROLE_SOLVER, 0, 1, false, tier), w, "cpu-f32-strict class");
        vm.prank(node);
        registry.updateNode(ROLE_SOLVER, 1, 64_000, 1, 4, MULTIADDR); // now a CUDA node serving portable-f32
        uint256 newTier = lens.memoryTier(64_000);
        assertEq(lens.classWeight(ROLE_SOLVER, 0, 1, false, tier), 0, "left the old class");
        assertEq(lens.classWeight(ROLE_REFEREE, 0, 1, false, tier), 0, "and the old referee class");
        assertEq(lens.classWeight(ROLE_SOLVER, 0, 4, false, newTier), w, "any-device portable class");
        assertEq(lens.classWeight(ROLE_SOLVER, 0, 4, true, newTier), w, "CUDA-only portable class");
        assertEq(lens.classWeight(ROLE_REFEREE, 0, 4, false, newTier), 0, "no longer a referee");
    }
}
