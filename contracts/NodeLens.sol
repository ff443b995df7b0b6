// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {NodeMath} from "./lib/NodeMath.sol";
import {ROLE_SOLVER, ROLE_REFEREE, Reputation} from "./types/VerityTypes.sol";

/// @notice What NodeLens reads from the registry.
interface INodeStorage {
    function extsload(bytes32 slot) external view returns (bytes32);
    function WEIGHT_UNIT() external view returns (uint256);
}

/// @title NodeLens
/// @notice Read-only views of NodeRegistry's selection state (weights, factors, reputation, tiers, trees), kept out of the
///         registry so that its room goes to rules (issue 23, "room to grow"). Stateless: deploy one for any registry.
/// @dev Reads the registry's storage through `extsload` at the slots `forge inspect NodeRegistry storageLayout` gives
///      (NODES_SLOT ...); tests/forge/NodeLens.t.sol checks every view against the registry's own behaviour, so a
///      layout change that forgets this contract fails there.
contract NodeLens {
    /// @dev NodeRegistry storage slots: _nodes, _trees, _weights, _totals (two words).
    uint256 internal constant NODES_SLOT = 5;
    uint256 internal constant TREES_SLOT = 6;
    uint256 internal constant WEIGHTS_SLOT = 7;
    uint256 internal constant TOTALS_SLOT = 8;
    /// @dev PackedSumTree.INITIAL_HEIGHT: a tree that never grew.
    uint256 internal constant INITIAL_HEIGHT = 5;

    INodeStorage public immutable registry;

    constructor(address registry_) {
        registry = INodeStorage(registry_);
    }

    /// @notice Current selection weights of `node` as a solver and as a referee (the same in each of its trees), in wei
    ///         of weighted stake floored to the registry's WEIGHT_UNIT.
    function weightsOf(address node) external view returns (uint256 solverWeight, uint256 refereeWeight) {
        uint256 slot = (_word(_nodeSlot(node)) >> 112) & type(uint16).max; // NodeRecord.slot
        uint256 base = uint256(keccak256(abi.encode(slot, WEIGHTS_SLOT)));
        uint256 unit = registry.WEIGHT_UNIT();
        return (_word(base) * unit, _word(base + 1) * unit);
    }

    /// @notice Sums of every node's solver and referee weight (each node counted once per role), in wei.
    function totalWeights() external view returns (uint256 solverTotal, uint256 refereeTotal) {
        uint256 unit = registry.WEIGHT_UNIT();
        return (_word(TOTALS_SLOT) * unit, _word(TOTALS_SLOT + 1) * unit);
    }

    /// @notice Total weight (wei) of one eligibility class's tree in `region`'s family (0: the region-any family;
    ///         `cell`: memory tier + MEMORY_TIERS * bandwidth tier; a node that declared no bandwidth is in cell = its
    ///         memory tier). Live: the draws of this epoch read the tree as the epoch began.
    function classWeight(uint8 role, uint8 region, uint32 profileBit, bool cudaOnly, uint256 cell)
        external
        view
        returns (uint256)
    {
        return (_tree(NodeMath.classKey(role, region, profileBit, cudaOnly, cell)) & type(uint64).max) * registry.WEIGHT_UNIT();
    }

    /// @notice Current capacities of the solver and referee trees of one eligibility class of the region-any family
    ///         (`tier`: the cell; a tree grows a level, x4, when a weighted slot needs it).
    function treeCapacities(uint32 profileBit, bool cudaOnly, uint256 tier)
        external
        view
        returns (uint256 solverCapacity, uint256 refereeCapacity)
    {
        return (
            _capacity(_tree(NodeMath.classKey(ROLE_SOLVER, 0, profileBit, cudaOnly, tier))),
            _capacity(_tree(NodeMath.classKey(ROLE_REFEREE, 0, profileBit, cudaOnly, tier)))
        );
    }

    /// @notice The memory tier of `memoryMb`: the largest tier whose floor it reaches.
    function memoryTier(uint32 memoryMb) external pure returns (uint256) {
        return NodeMath.memoryTier(memoryMb);
    }

    /// @notice The bandwidth tier of `bandwidthMbps`: the largest tier whose floor (0, 10, 100, 1 000, 10 000 Mbit/s)
    ///         it reaches.
    function bandwidthTier(uint32 bandwidthMbps) external pure returns (uint256) {
        return NodeMath.bandwidthTier(bandwidthMbps);
    }

    /// @notice Reputation factor of `node` in basis points (NodeMath.reputationBps).
    function reputationFactorBps(address node) external view returns (uint256) {
        uint256 base = _nodeSlot(node);
        uint256 w0 = _word(base);
        uint256 w1 = _word(base + 1);
        // NodeRecord: tasksCompleted at bit 192 and tasksLate at 224 of word 0; disputesLost at 160 of word 1.
        return NodeMath.reputationBps(uint32(w0 >> 192), uint32(w0 >> 224), uint32(w1 >> 160));
    }

    /// @notice The reputation counters of `node`: tasks completed and late, disputes won and lost, total slashed.
    function reputationOf(address node) external view returns (Reputation memory) {
        uint256 base = _nodeSlot(node);
        uint256 w0 = _word(base);
        uint256 w1 = _word(base + 1);
        // NodeRecord word 0: tasksCompleted at bit 192, tasksLate at 224; word 1: disputesWon at 128, disputesLost at
        // 160; word 3: totalSlashed at 128.
        return Reputation(
            uint32(w0 >> 192), uint32(w0 >> 224), uint32(w1 >> 128), uint32(w1 >> 160), _word(base + 3) >> 128
        );
    }

    /// @notice Promptness factor of `node` in basis points (NodeMath.promptnessBps).
    function promptnessFactorBps(address node) external view returns (uint256) {
        return NodeMath.promptnessBps(uint16(_word(_nodeSlot(node) + 1) >> 192)); // NodeRecord.usedWindowBps
    }

    function _nodeSlot(address node) internal pure returns (uint256) {
        return uint256(keccak256(abi.encode(node, NODES_SLOT)));
    }

    /// @dev Header word of a tree: total (bits 0..63), grownHeight (64..71), then its epoch snapshot.
    function _tree(uint256 key) internal view returns (uint256) {
        return _word(uint256(keccak256(abi.encode(key, TREES_SLOT))));
    }

    function _capacity(uint256 header) internal pure returns (uint256) {
        uint256 h = uint8(header >> 64);
        if (h == 0) h = INITIAL_HEIGHT;
        return 1 << (2 * (h + 1));
    }

    function _word(uint256 slot) internal view returns (uint256) {
        return uint256(registry.extsload(bytes32(slot)));
    }
}
