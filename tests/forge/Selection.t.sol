// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Fixture} from "./base/Fixture.sol";
import {ROLE_SOLVER, ROLE_VERIFIER, ROLE_REFEREE} from "../../contracts/types/VerityTypes.sol";
import {ParameterOutOfRange} from "../../contracts/errors/CommonErrors.sol";

/// @notice Stake-weighted selection: filters, exclusion, without-replacement retries, linear weights.
contract SelectionTest is Fixture {
    address internal proto = address(0x9807);

    function setUp() public override {
        super.setUp();
        registry.setProtocol(proto, true);
    }

    function _draw(bytes32 seed, uint256 minFree, address[] memory ex) internal view returns (address) {
        return _solverDrawn(seed, 0, 1_000, 1, 0, 0, minFree, ex);
    }

    function test_drawSolver_empty_returnsZero_succeeds() public view {
        assertEq(_draw("s", 1, new address[](0)), address(0), "none");
    }

    function test_drawSolver_onlyEligibleAmongMany_succeeds() public {
        _addNodes(12);
        // Make all but node 7 ineligible in different ways.
        for (uint256 i = 0; i < 12; ++i) {
            if (i == 7) continue;
            vm.prank(proto);
            registry.lock(nodes[i], NODE_STAKE); // no free stake
        }
        for (uint256 s = 0; s < 8; ++s) {
            assertEq(_draw(bytes32(s), 1, new address[](0)), nodes[7], "the only eligible node");
        }
    }

    function test_drawSolver_excludeRespected_succeeds() public {
        _addNodes(3);
        address[] memory ex = new address[](2);
        ex[0] = nodes[0];
        ex[1] = nodes[2];
        for (uint256 s = 0; s < 8; ++s) {
            assertEq(_draw(bytes32(s), 1, ex), nodes[1], "excluded two of three");
        }
        address[] memory all = new address[](3);
        all[0] = nodes[0];
        all[1] = nodes[1];
        all[2] = nodes[2];
        assertEq(_draw("x", 1, all), address(0), "all excluded");
    }

    function test_drawSolver_tooManyExcluded_reverts() public {
        address[] memory ex = new address[](17);
        vm.expectRevert(abi.encodeWithSelector(ParameterOutOfRange.selector, bytes32("exclude"), 17, 0, 16));
        _draw("x", 1, ex);
    }

    function test_drawSolver_hardwareFilters_succeeds() public {
        address cpu = _newNode(0, ROLE_SOLVER, NODE_STAKE);
        address cuda = address(0xC0DA);
        token.mint(cuda, NODE_STAKE);
        vm.startPrank(cuda);
        token.approve(address(registry), type(uint256).max);
        registry.register(ROLE_SOLVER, 1, 80_000, 1, 2, MULTIADDR);
        registry.stake(NODE_STAKE - registry.MIN_REGISTRATION_STAKE());
        registry.heartbeat(); // registering is not a check-in: drawn only after one
        vm.stopPrank();
        _nextEpoch(); // draws read the weights as the epoch began
        address[] memory none = new address[](0);
        assertEq(_solverDrawn("a", 1, 0, 2, 0, 0, 1, none), cuda, "cuda job -> cuda node");
        assertEq(_solverDrawn("a", 0, 20_000, 2, 0, 0, 1, none), cuda, "memory filter");
        assertEq(_solverDrawn("a", 0, 0, 1, 0, 0, 1, none), cpu, "profile filter");
        assertEq(_solverDrawn("a", 0, 0, 1, 0, 0, NODE_STAKE + 1, none), address(0), "stake filter");
    }

    function test_drawReferee_roleFilter_succeeds() public {
        address solverOnly = _newNode(0, ROLE_SOLVER, NODE_STAKE);
        address referee = _newNode(1, ROLE_REFEREE | ROLE_VERIFIER, NODE_STAKE);
        address[] memory none = new address[](0);
        for (uint256 s = 0; s < 6; ++s) {
            assertEq(registry.drawReferee(bytes32(s), 0, 0, 1, 1, none), referee, "referee tree");
            assertEq(_solverDrawn(bytes32(s), 0, 0, 1, 0, 0, 1, none), solverOnly, "solver tree");
        }
    }

    function test_drawSolver_livenessFilter_succeeds() public {
        _addNodes(2);
        vm.warp(block.timestamp + registry.livenessWindow() + 1);
        assertEq(_draw("a", 1, new address[](0)), address(0), "stale nodes");
        vm.prank(nodes[1]);
        registry.heartbeat();
        assertEq(_draw("a", 1, new address[](0)), nodes[1], "live node");
    }

    /// @dev Frequencies over many seeds follow stake: a node with 3x the stake is drawn about 3x as often.
    function test_drawSolver_stakeWeighted_succeeds() public {
        address small = _newNode(0, ROLE_SOLVER, 100e18);
        address big = _newNode(1, ROLE_SOLVER, 300e18);
        uint256 bigCount;
        for (uint256 s = 0; s < 400; ++s) {
            if (_draw(bytes32(s), 1, new address[](0)) == big) ++bigCount;
        }
        assertGt(bigCount, 260, "big drawn ~75%");
        assertLe(bigCount, 340, "big drawn ~75%");
        small;
    }

    /// @dev Splitting a stake over identities leaves the total weight of the holder unchanged. Each part holds at
    ///      least MIN_REGISTRATION_STAKE (registration requires it; the lower bound was 1e18 before it existed).
    function testFuzz_weight_linearInStake_succeeds(uint96 stakeAmt, uint8 parts) public {
        uint256 total = bound(stakeAmt, 8 * registry.MIN_REGISTRATION_STAKE(), 900_000e18);
        uint256 k = bound(parts, 1, 8);
        address whole = _newNode(0, ROLE_SOLVER, total);
        (uint256 wWhole,) = lens.weightsOf(whole);
        uint256 wSplit;
        uint256 each = total / k;
        for (uint256 i = 0; i < k; ++i) {
            address part = _newNode(1 + i, ROLE_SOLVER, each);
            (uint256 w,) = lens.weightsOf(part);
            wSplit += w;
        }
        assertLe(wSplit, wWhole, "split never heavier");
        (uint256 solverTotal,) = lens.totalWeights();
        assertEq(solverTotal, wWhole + wSplit, "tree total");
    }

    function test_drawSolver_gasBoundedWith1000Nodes_succeeds() public {
        // The walk is log2(capacity) reads whatever the node count: compare 4 vs 200 nodes.
        _addNodes(4);
        uint256 g0 = gasleft();
        _draw("g", 1, new address[](0));
        uint256 small = g0 - gasleft();
        _addNodes(196);
        g0 = gasleft();
        _draw("g", 1, new address[](0));
        uint256 large = g0 - gasleft();
        assertLe(large, small + 20_000, "O(log capacity), not O(n)");
    }
}
