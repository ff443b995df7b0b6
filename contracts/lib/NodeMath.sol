// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Math} from "@openzeppelin/contracts/utils/math/Math.sol";
import {BPS} from "../types/VerityTypes.sol";

/// @title NodeMath
/// @notice The pure rules of a node's selection weight, shared by NodeRegistry (which applies them) and NodeLens (which
///         shows them): memory and bandwidth tiers, and the reputation and promptness factors.
library NodeMath {
    /// @notice Memory tiers: a node sits in the tier of the largest floor (MB) its declared memory reaches.
    uint256 internal constant MEMORY_TIERS = 11;
    /// @notice Bandwidth tiers (floors 0, 10, 100, 1 000, 10 000 Mbit/s).
    uint256 internal constant BANDWIDTH_TIERS = 5;
    /// @notice Floor of the reputation factor, in basis points.
    uint256 internal constant MIN_REPUTATION_BPS = 1_000;
    /// @notice Probation: phantom tasks in the reputation factor's denominator.
    uint256 internal constant PROBATION_TASKS = 9;

    /// @notice The memory tier of `memoryMb`: the largest tier whose floor it reaches.
    function memoryTier(uint32 memoryMb) internal pure returns (uint256 tier) {
        while (tier + 1 < MEMORY_TIERS && memoryMb >= tierFloor(tier + 1)) ++tier;
    }

    /// @notice The bandwidth tier of `bandwidthMbps`: the largest tier whose floor (0, 10, 100, 1 000, 10 000 Mbit/s)
    ///         it reaches.
    function bandwidthTier(uint32 bandwidthMbps) internal pure returns (uint256 tier) {
        while (tier + 1 < BANDWIDTH_TIERS && bandwidthMbps >= bandwidthFloor(tier + 1)) ++tier;
    }

    /// @notice Floors of the memory tiers, MB: 0, then 1 GiB doubling up to 512 GiB. Rounding a requirement up to a
    ///         floor leaves out at most the nodes with less than twice the requirement.
    function tierFloor(uint256 tier) internal pure returns (uint256) {
        return tier == 0 ? 0 : 1024 << (tier - 1);
    }

    /// @notice Floors of the bandwidth tiers, Mbit/s: 0, then 10 multiplying by 10 up to 10 000.
    function bandwidthFloor(uint256 tier) internal pure returns (uint256) {
        return tier == 0 ? 0 : 10 ** tier;
    }

    /// @notice Reputation factor in basis points: (c+1)/(c+1+late+4*lost+PROBATION_TASKS), floored at
    ///         MIN_REPUTATION_BPS (c = tasks completed).
    /// @dev INVARIANT: a fresh identity's factor is the floor and no identity's is below it, so abandoning a
    ///      penalised identity for a new one never raises the weight a stake earns (docs/contracts.md, "Probation").
    function reputationBps(uint256 completed, uint256 late, uint256 disputesLost) internal pure returns (uint256) {
        uint256 good = completed + 1;
        uint256 f = (good * BPS) / (good + late + 4 * disputesLost + PROBATION_TASKS);
        return f < MIN_REPUTATION_BPS ? MIN_REPUTATION_BPS : f;
    }

    /// @notice The stake a node's selection weight counts (issue 23, "weight is what a node can take"): its bonded
    ///         stake, capped by its free stake rounded up to the next power of two above it. Stake locked by work
    ///         cannot soak up draws (a busy node weighs at most twice what it can still lock), and the cap moves only
    ///         when the free stake crosses a power of two, so a lock rewrites the trees rarely (an idle 1,000-VRT
    ///         node can lock 410 VRT before its weight moves; unlocks wait for the node's heartbeat). Never above the bonded stake: splitting a
    ///         stake over identities still never raises its weight.
    function weightBase(uint256 bonded, uint256 free) internal pure returns (uint256) {
        if (free == 0) return 0;
        uint256 cap = 2 << Math.log2(free); // in (free, 2 * free]
        return cap < bonded ? cap : bonded;
    }

    /// @notice The tree key of an eligibility class: role | region | profile bit | CUDA-only | cell; `key >> 8` is the
    ///         class family (every cell of it).
    function classKey(uint8 role, uint8 region, uint32 profileBit, bool cudaOnly, uint256 cell)
        internal
        pure
        returns (uint256)
    {
        return (uint256(role) << 48) | (uint256(region) << 40) | (uint256(profileBit) << 16) | (cudaOnly ? 1 << 8 : 0)
            | cell;
    }

    /// @notice Promptness factor in basis points: BPS - usedWindowBps / 2, from 100 % (commits at once, or no commit
    ///         yet) down to 50 % (commits at its deadlines). Abandoning a slow identity never pays: a fresh one is on
    ///         probation (MIN_REPUTATION_BPS), far below the 50 % floor of this factor.
    function promptnessBps(uint256 usedWindowBps) internal pure returns (uint256) {
        return BPS - usedWindowBps / 2;
    }
}
