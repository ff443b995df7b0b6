// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Fixture} from "./base/Fixture.sol";
import {
    PostJobParams,
    Job,
    Node,
    TaskStatus,
    ROLE_SOLVER,
    ROLE_REFEREE,
    REGION_EUROPE,
    REGION_NORTH_AMERICA,
    REGION_ASIA,
    MAX_REGION
} from "../../contracts/types/VerityTypes.sol";
import {ParameterOutOfRange} from "../../contracts/errors/CommonErrors.sol";
import {NodeNotRegistered} from "../../contracts/errors/NodeRegistryErrors.sol";
import {InvalidJobParameter} from "../../contracts/errors/JobRegistryErrors.sol";
import {INodeRegistry} from "../../contracts/interfaces/INodeRegistry.sol";

/// @dev forge's cheatcode that makes an account's storage cold again (not in base/Vm.sol): each measurement below pays
///      cold reads and writes, as a transaction would.
interface VmCool {
    function cool(address target) external;
}

/// @notice Issue 9 item 4, "declared bandwidth/region": a node declares its region and bandwidth (declareNetwork), a
///         job may ask for a region and a bandwidth minimum, and the job's replica draws weigh only stake declared
///         in that region and bandwidth tier. A node with a region sits in its region's class family and in the
///         region-any one, so a job without network requirements reads exactly what it read before.
contract NetworkDrawsTest is Fixture {
    uint256 internal constant SYBIL_STAKE = 900_000e18; // 900x an honest node's stake, each
    uint32 internal constant MEMORY = 16_000; // the Fixture's nodes

    /// @dev Read by forge with -vv (measured gas, docs/gas.md).
    event log_named_uint(string key, uint256 val);

    function _sybil(uint256 i, uint8 region, uint32 bandwidthMbps) internal returns (address node) {
        node = address(uint160(0x5B0000 + i));
        token.mint(node, SYBIL_STAKE);
        vm.startPrank(node);
        token.approve(address(registry), type(uint256).max);
        registry.register(ROLE_SOLVER | ROLE_REFEREE, 0, MEMORY, 1, 3, MULTIADDR);
        registry.stake(SYBIL_STAKE - registry.MIN_REGISTRATION_STAKE());
        registry.heartbeat(); // registering is not a check-in: drawn only after one
        if (region != 0 || bandwidthMbps != 0) registry.declareNetwork(region, bandwidthMbps);
        vm.stopPrank();
        _nextEpoch();
    }

    function _isSybil(address node) internal pure returns (bool) {
        return uint160(node) >= 0x5B0000 && uint160(node) < 0x5C0000;
    }

    function _declare(address node, uint8 region, uint32 bandwidthMbps) internal {
        vm.prank(node);
        registry.declareNetwork(region, bandwidthMbps);
        _nextEpoch();
    }

    function _draw(bytes32 seed, uint8 region, uint32 minBandwidthMbps) internal view returns (address) {
        return _solverDrawn(seed, 0, 1_000, 1, region, minBandwidthMbps, 1, new address[](0));
    }

    function _cell(uint32 memoryMb, uint32 bandwidthMbps) internal view returns (uint256) {
        return lens.memoryTier(memoryMb) + registry.MEMORY_TIERS() * lens.bandwidthTier(bandwidthMbps);
    }

    // ---------------------------------------------------------------- declareNetwork

    function test_declareNetwork_unknownRegion_reverts() public {
        _addNodes(1);
        vm.expectRevert(abi.encodeWithSelector(ParameterOutOfRange.selector, bytes32("region"), 7, 0, MAX_REGION));
        vm.prank(nodes[0]);
        registry.declareNetwork(7, 100);
    }

    function test_declareNetwork_unregistered_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(NodeNotRegistered.selector, address(this)));
        registry.declareNetwork(REGION_EUROPE, 100);
    }

    function test_declareNetwork_recordsAndEmits_succeeds() public {
        _addNodes(1);
        vm.expectEmit(true, false, false, true, address(registry));
        emit INodeRegistry.NetworkDeclared(nodes[0], REGION_ASIA, 250);
        _declare(nodes[0], REGION_ASIA, 250);
        assertEq(registry.getNode(nodes[0]).region, REGION_ASIA, "region");
        assertEq(registry.getNode(nodes[0]).bandwidthMbps, 250, "bandwidth");
    }

    /// @dev A region moves the weight between region families; the region-any family keeps it throughout, and a new
    ///      bandwidth moves it between cells.
    function test_declareNetwork_movesWeightBetweenRegionsAndTiers_succeeds() public {
        _addNodes(1);
        address node = nodes[0];
        (uint256 w, uint256 rw) = lens.weightsOf(node);
        uint256 plain = _cell(MEMORY, 0);
        uint256 fast = _cell(MEMORY, 1_000);
        _declare(node, REGION_EUROPE, 1_000);
        assertEq(lens.classWeight(ROLE_SOLVER, REGION_EUROPE, 1, false, fast), w, "in Europe's family");
        assertEq(lens.classWeight(ROLE_REFEREE, REGION_EUROPE, 1, false, fast), rw, "both roles");
        assertEq(lens.classWeight(ROLE_SOLVER, 0, 1, false, fast), w, "and in the region-any family");
        assertEq(lens.classWeight(ROLE_SOLVER, 0, 1, false, plain), 0, "left its undeclared cell");
        _declare(node, REGION_NORTH_AMERICA, 50);
        uint256 slow = _cell(MEMORY, 50);
        assertEq(lens.classWeight(ROLE_SOLVER, REGION_EUROPE, 1, false, fast), 0, "left Europe");
        assertEq(lens.classWeight(ROLE_SOLVER, REGION_NORTH_AMERICA, 1, false, slow), w, "in North America");
        assertEq(lens.classWeight(ROLE_SOLVER, 0, 1, false, fast), 0, "left the 1 Gbit/s cell");
        assertEq(lens.classWeight(ROLE_SOLVER, 0, 1, false, slow), w, "in the 10 Mbit/s cell");
        _declare(node, 0, 0);
        assertEq(lens.classWeight(ROLE_SOLVER, REGION_NORTH_AMERICA, 1, false, slow), 0, "undeclared");
        assertEq(lens.classWeight(ROLE_SOLVER, 0, 1, false, plain), w, "back where it started");
        (uint256 w2,) = lens.weightsOf(node);
        assertEq(w2, w, "the weight itself never changed");
    }

    /// @dev updateNode (a new memory tier) moves the weight in the region family too, not only in the region-any one.
    function test_updateNode_keepsRegionFamily_succeeds() public {
        _addNodes(1);
        address node = nodes[0];
        _declare(node, REGION_ASIA, 100);
        (uint256 w,) = lens.weightsOf(node);
        vm.prank(node);
        registry.updateNode(ROLE_SOLVER, 0, 64_000, 1, 1, MULTIADDR);
        assertEq(lens.classWeight(ROLE_SOLVER, REGION_ASIA, 1, false, _cell(MEMORY, 100)), 0, "old cell");
        assertEq(lens.classWeight(ROLE_SOLVER, REGION_ASIA, 1, false, _cell(64_000, 100)), w, "new cell");
        assertEq(lens.classWeight(ROLE_SOLVER, 0, 1, false, _cell(64_000, 100)), w, "region-any too");
    }

    /// @dev A node that leaves and registers again starts undeclared: its old region holds none of its weight.
    function test_reRegister_startsUndeclared_succeeds() public {
        _addNodes(2);
        address node = nodes[0];
        _declare(node, REGION_EUROPE, 100);
        vm.startPrank(node);
        registry.leave();
        vm.warp(block.timestamp + registry.unbondingPeriod());
        registry.withdraw();
        registry.register(ROLE_SOLVER, 0, MEMORY, 1, 1, MULTIADDR);
        vm.stopPrank();
        assertEq(registry.getNode(node).region, 0, "undeclared");
        assertEq(lens.classWeight(ROLE_SOLVER, REGION_EUROPE, 1, false, _cell(MEMORY, 100)), 0, "Europe empty");
    }

    // ---------------------------------------------------------------- draws

    /// @dev The starvation attack, by region: 16 huge identities in another region and 16 that declared none. A
    ///      Europe job's every task (10 jobs) gets two European replicas; the attackers' stake absorbs nothing (the draw
    ///      costs the same gas with them as without them).
    function test_draw_regionJob_outOfRegionStakeAbsorbsNothing_succeeds() public {
        _addNodes(4);
        for (uint256 k = 0; k < 4; ++k) {
            _declare(nodes[k], REGION_EUROPE, 100);
        }
        _draw("warm", REGION_EUROPE, 0);
        uint256 g = gasleft();
        address alone = _draw("seed", REGION_EUROPE, 0);
        uint256 gasWithout = g - gasleft();
        for (uint256 i = 0; i < 16; ++i) {
            _sybil(i, REGION_NORTH_AMERICA, 10_000);
            _sybil(100 + i, 0, 10_000);
        }
        g = gasleft();
        address attacked = _draw("seed", REGION_EUROPE, 0);
        uint256 gasWith = g - gasleft();
        assertEq(attacked, alone, "the same node: the draw never saw the attackers");
        assertLe(gasWith, gasWithout + 50, "as fast as with no attacker"); // (+50: the test's own memory grew)
        emit log_named_uint("region draw gas, 4 nodes in region", gasWithout);
        for (uint256 j = 0; j < 10; ++j) {
            PostJobParams memory p = _params(1, 1, 2);
            p.region = REGION_EUROPE;
            uint256 taskId = views.taskOf(_post(p), 0, 0);
            assertEq(uint8(_status(taskId)), uint8(TaskStatus.Assigned), "both replicas drawn");
            assertFalse(_isSybil(_replica(taskId, 0).node) || _isSybil(_replica(taskId, 1).node), "a European pair");
            _heartbeatAll();
        }
    }

    /// @dev Never a node of another region or an undeclared one, however heavy; a region nobody declared draws nobody.
    function testFuzz_draw_regionJob_onlyThatRegion_succeeds(bytes32 seed) public {
        for (uint256 i = 0; i < 6; ++i) {
            _sybil(i, uint8(i + 1 == REGION_EUROPE ? 0 : i + 1), 1_000); // every other region, and undeclared
        }
        _addNodes(1);
        _declare(nodes[0], REGION_EUROPE, 10);
        assertEq(_draw(seed, REGION_EUROPE, 0), nodes[0], "the only European");
        assertEq(_draw(seed, REGION_ASIA, 0), address(0x5B0000 + 3), "the only Asian");
        vm.prank(address(0x5B0000 + 3));
        registry.declareNetwork(0, 1_000);
        assertEq(_draw(seed, REGION_ASIA, 0), address(0), "nobody left in Asia");
    }

    /// @dev A bandwidth minimum rounds up to a tier floor (0, 10, 100, 1 000, 10 000 Mbit/s); isEligible agrees with
    ///      the trees read.
    function test_draw_bandwidthFloors_succeeds() public {
        address slow = _sybil(1, 0, 50); // the 10 Mbit/s tier
        address mid = _sybil(2, 0, 100); // the 100 Mbit/s tier
        address fast = _sybil(3, REGION_ASIA, 20_000); // the 10 000 Mbit/s tier
        assertEq(lens.bandwidthTier(50), 1, "10 tier");
        assertEq(lens.bandwidthTier(100), 2, "100 tier");
        assertEq(lens.bandwidthTier(20_000), 4, "top tier");
        bool[3] memory seen;
        for (uint256 s = 0; s < 40; ++s) {
            address a = _draw(bytes32(s), 0, 50); // rounds up to 100
            assertTrue(a == mid || a == fast, "50 Mbit/s reads the 100 tier up");
            assertEq(_draw(bytes32(s), 0, 1_000), fast, "1 Gbit/s: only the fastest");
            address b = _draw(bytes32(s), 0, 10);
            seen[b == slow ? 0 : b == mid ? 1 : 2] = true;
        }
        assertTrue(seen[0] && seen[1] && seen[2], "10 Mbit/s: every tier");
        assertFalse(registry.isEligible(slow, ROLE_SOLVER, 0, 1_000, 1, 0, 50, 1), "below the rounded floor");
        assertTrue(registry.isEligible(slow, ROLE_SOLVER, 0, 1_000, 1, 0, 10, 1), "at the floor");
        assertTrue(registry.isEligible(fast, ROLE_SOLVER, 0, 1_000, 1, REGION_ASIA, 10_000, 1), "top tier, its region");
        assertFalse(registry.isEligible(fast, ROLE_SOLVER, 0, 1_000, 1, REGION_EUROPE, 0, 1), "another region");
        assertFalse(registry.isEligible(mid, ROLE_SOLVER, 0, 1_000, 1, REGION_ASIA, 0, 1), "undeclared region");
        assertTrue(registry.isEligible(mid, ROLE_SOLVER, 0, 1_000, 1, 0, 0, 1), "a job with no network requirement");
    }

    /// @dev A job with no network requirement (region 0, bandwidth 0) draws somebody whatever the nodes declared, and
    ///      its family (region-any) holds every node's weight exactly once.
    function testFuzz_draw_noNetworkRequirement_unchanged_succeeds(bytes32 seed, uint8 r, uint32 bw) public {
        _addNodes(4);
        _declare(nodes[1], uint8(bound(r, 0, MAX_REGION)), bw);
        _declare(nodes[2], REGION_EUROPE, 0);
        address a = _solverDrawn(seed, 0, 1_000, 1, 0, 0, 1, new address[](0));
        assertTrue(a != address(0), "somebody");
        (uint256 solverTotal,) = lens.totalWeights();
        uint256 sum;
        for (uint256 c = 0; c < registry.MEMORY_TIERS() * registry.BANDWIDTH_TIERS(); ++c) {
            sum += lens.classWeight(ROLE_SOLVER, 0, 1, false, c);
        }
        assertEq(sum, solverTotal, "the region-any family holds every node's weight once");
    }

    /// @dev The job's region and bandwidth are validated, stored, and bind its replicas (a referee draw ignores them).
    function test_postJob_networkRequirements_succeeds() public {
        PostJobParams memory p = _params(1, 1, 2);
        p.region = MAX_REGION + 1;
        vm.expectRevert(abi.encodeWithSelector(InvalidJobParameter.selector, bytes32("region"), MAX_REGION + 1));
        _postOnly(p);
        p.region = REGION_ASIA;
        p.minBandwidthMbps = 10_001;
        vm.expectRevert(abi.encodeWithSelector(InvalidJobParameter.selector, bytes32("minBandwidthMbps"), 10_001));
        _postOnly(p);
        p.minBandwidthMbps = 100;
        _addNodes(3); // undeclared: never this job's replicas
        address a1 = _sybil(1, REGION_ASIA, 100);
        address a2 = _sybil(2, REGION_ASIA, 1_000);
        _sybil(3, REGION_ASIA, 99); // too slow
        uint256 jobId = _post(p);
        Job memory job = views.getJob(jobId);
        assertEq(job.region, REGION_ASIA, "region stored");
        assertEq(job.minBandwidthMbps, 100, "bandwidth stored");
        uint256 taskId = views.taskOf(jobId, 0, 0);
        address r0 = _replica(taskId, 0).node;
        address r1 = _replica(taskId, 1).node;
        assertTrue((r0 == a1 && r1 == a2) || (r0 == a2 && r1 == a1), "the two fast Asian nodes");
        address ref = registry.drawReferee("ref", 0, 1_000, 1, 1, new address[](0));
        assertTrue(ref != address(0), "referees come from every region");
    }

    // ---------------------------------------------------------------- gas (docs/gas.md, "Network classes")

    function _cool() internal {
        VmCool(address(vm)).cool(address(registry));
    }

    /// @dev What a region costs: a node with a region writes its weight into twice the trees (its region's family and
    ///      the region-any one); a draw reads one family either way.
    function test_gas_regionWeightUpdateAndDraw_succeeds() public {
        _addNodes(8); // both roles, two profiles, CPU: 4 trees per weight update, 8 with a region
        for (uint256 k = 0; k < 4; ++k) {
            _declare(nodes[k], REGION_EUROPE, 100);
        }
        _cool();
        uint256 g = gasleft();
        vm.prank(nodes[4]);
        registry.stake(1e18);
        uint256 plain = g - gasleft();
        _cool();
        g = gasleft();
        vm.prank(nodes[0]);
        registry.stake(1e18);
        uint256 regional = g - gasleft();
        emit log_named_uint("stake() weight update, no region (4 trees)", plain);
        emit log_named_uint("stake() weight update, with a region (8 trees)", regional);
        assertGt(regional, plain, "a region costs writes");
        assertLe(regional, 2 * plain, "at most twice");
        _cool();
        g = gasleft();
        vm.prank(nodes[5]);
        registry.declareNetwork(REGION_ASIA, 1_000);
        emit log_named_uint("declareNetwork (4 trees out, 8 in)", g - gasleft());
        _cool();
        g = gasleft();
        address a = _solverDrawn("gas", 0, 1_000, 1, 0, 0, 1, new address[](0));
        emit log_named_uint("drawSolver, no region (9 nodes' family, 1 cell)", g - gasleft());
        _cool();
        g = gasleft();
        address b = _draw("gas", REGION_EUROPE, 100);
        emit log_named_uint("drawSolver, Europe >= 100 Mbit/s (4 nodes, 1 cell)", g - gasleft());
        assertTrue(a != address(0) && b != address(0), "both drew");
    }

    /// @dev The widest draw: weight in every one of the 55 cells of a family, 16 exclusions.
    function test_gas_drawAcrossEveryCell_succeeds() public {
        uint256 i;
        address[] memory ex = new address[](16);
        for (uint256 b = 0; b < 5; ++b) {
            for (uint256 t = 0; t < 11; ++t) {
                address node = _sybil(i, REGION_EUROPE, b == 0 ? 0 : uint32(10 ** b));
                vm.prank(node);
                registry.updateNode(ROLE_SOLVER, 0, t == 0 ? 0 : uint32(1024 << (t - 1)), 1, 1, MULTIADDR);
                if (i < 16) ex[i] = node;
                ++i;
            }
        }
        _cool();
        uint256 g = gasleft();
        address a = _solverDrawn("wide", 0, 0, 1, REGION_EUROPE, 0, 1, ex);
        emit log_named_uint("drawSolver over 55 cells, 16 exclusions", g - gasleft());
        assertTrue(a != address(0), "drew");
    }

    // ---------------------------------------------------------------- fuzz: trees hold exactly the eligible weight

    /// @dev Random declarations, moves, and a leave (the last node moves into the leaver's slot): every class family's
    ///      cells sum to the weights of the nodes eligible for it (7 regions x 3 profiles x CUDA-only or not).
    /// forge-config: default.fuzz.runs = 48
    function testFuzz_classTotals_equalEligibleWeights_succeeds(uint256 entropy) public {
        uint256 count = bound(entropy, 3, 7);
        address[] memory xs = new address[](count);
        for (uint256 i = 0; i < count; ++i) {
            uint256 e = uint256(keccak256(abi.encode(entropy, i)));
            xs[i] = _sybil(i, uint8(e % (MAX_REGION + 1)), uint32((e >> 8) % 30_000));
            vm.prank(xs[i]);
            registry.updateNode(uint8(1 + (e >> 40) % 7), uint8((e >> 48) % 2), uint32((e >> 56) % 100_000), 1,
                uint32(1 + (e >> 80) % 7), MULTIADDR);
            if ((e >> 96) % 3 == 0) _declare(xs[i], uint8((e >> 100) % (MAX_REGION + 1)), uint32((e >> 110) % 200));
        }
        vm.startPrank(xs[0]); // the first node leaves: the last one moves into slot 1
        registry.leave();
        vm.warp(block.timestamp + registry.unbondingPeriod());
        registry.withdraw();
        vm.stopPrank();
        for (uint256 i = 1; i < count; ++i) {
            vm.prank(xs[i]);
            registry.heartbeat();
        }
        for (uint8 region = 0; region <= MAX_REGION; ++region) {
            for (uint32 bit = 1; bit <= 4; bit <<= 1) {
                _checkFamily(xs, region, bit, false);
                _checkFamily(xs, region, bit, true);
            }
        }
    }

    function _checkFamily(address[] memory xs, uint8 region, uint32 bit, bool cuda) internal view {
        uint256 expected;
        for (uint256 i = 1; i < xs.length; ++i) {
            Node memory n = registry.getNode(xs[i]);
            if (region != 0 && n.region != region) continue;
            if ((n.profiles & bit) == 0 || (cuda && n.deviceClass != 1)) continue;
            (uint256 w,) = lens.weightsOf(xs[i]);
            expected += w;
        }
        uint256 sum;
        for (uint256 c = 0; c < 55; ++c) {
            sum += lens.classWeight(ROLE_SOLVER, region, bit, cuda, c);
        }
        assertEq(sum, expected, "family total == eligible weight");
    }
}
