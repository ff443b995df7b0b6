// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Node} from "../types/VerityTypes.sol";

/// @title INodeRegistry
/// @notice Nodes, their stake, reputation and stake-weighted selection.
interface INodeRegistry {
    /// @notice A node registered.
    event NodeRegistered(
        address indexed node,
        uint8 roles,
        uint8 deviceClass,
        uint32 memoryMb,
        uint32 throughput,
        uint32 profiles,
        string multiaddr
    );
    /// @notice A node changed its declaration.
    event NodeUpdated(
        address indexed node,
        uint8 roles,
        uint8 deviceClass,
        uint32 memoryMb,
        uint32 throughput,
        uint32 profiles,
        string multiaddr
    );
    /// @notice A node declared its network (NodeRegistry.declareNetwork): region (0 = undeclared) and bandwidth.
    event NetworkDeclared(address indexed node, uint8 region, uint32 bandwidthMbps);
    /// @notice A node added stake.
    event Staked(address indexed node, uint256 amount, uint256 totalStake);
    /// @notice A node started unbonding `amount`; withdrawable at `availableAt`.
    event UnstakeRequested(address indexed node, uint256 amount, uint64 availableAt);
    /// @notice A node withdrew unbonded stake.
    event Withdrawn(address indexed node, uint256 amount);
    /// @notice A node left: its stake was empty, its slot went to the node that was last (nodeList has no holes).
    event NodeLeft(address indexed node, uint16 slot);
    /// @notice A node proved liveness.
    event Heartbeat(address indexed node, uint64 at);
    /// @notice A protocol contract locked part of a node's stake.
    event StakeLocked(address indexed node, address indexed by, uint256 amount);
    /// @notice A protocol contract unlocked part of a node's stake.
    event StakeUnlocked(address indexed node, address indexed by, uint256 amount);
    /// @notice Locked stake was slashed and sent to `to`.
    event StakeSlashed(address indexed node, address indexed to, uint256 amount);
    /// @notice A reputation counter changed.
    event ReputationUpdated(
        address indexed node, uint32 tasksCompleted, uint32 tasksLate, uint32 disputesWon, uint32 disputesLost
    );
    /// @notice The owner (de)authorized a protocol contract.
    event ProtocolSet(address indexed account, bool authorized);
    /// @notice The set of protocol contracts is sealed (NodeRegistry.sealProtocols): it never changes again.
    event ProtocolsFixed();
    /// @notice The owner changed a parameter.
    event ParameterSet(bytes32 indexed name, uint256 value);

    /// @notice Locks `amount` of `node`'s free stake (protocol only).
    function lock(address node, uint256 amount) external;
    /// @notice Unlocks `amount` of `node`'s locked stake (protocol only).
    function unlock(address node, uint256 amount) external;
    /// @notice Slashes `amount` of `node`'s locked stake and transfers it to `to` (protocol only).
    function slash(address node, uint256 amount, address to) external;
    /// @notice unlock(node, amount) for an accepted task, refreshing the node's liveness; the task counts toward its
    ///         reputation only if `credited` (issue 23, reputation that cannot be bought: JobRegistry credits work
    ///         drawn from an open class and paid by another poster), and `usedBps` (the share of its window the
    ///         node used before its result, 0..BPS; above BPS: none) enters its promptness average. Protocol only.
    function unlockCompleted(address node, uint256 amount, bool credited, uint256 usedBps) external;
    /// @notice Counts a missed deadline (protocol only).
    function recordLate(address node) external;
    /// @notice Counts a dispute outcome (protocol only).
    function recordDispute(address node, bool won) external;

    /// @notice Stake-weighted draw of an eligible solver for a job's requirements, region (0 = any) and minimum
    ///         bandwidth in Mbit/s (0 = any; rounded up to a bandwidth tier floor) included: only stake declared in that
    ///         region and tier is weighed. address(0) if none found within MAX_DRAWS. `eligibleBps`: the weight of
    ///         the classes the draw read over every solver's weight, both as they are now, in basis points.
    function drawSolver(
        bytes32 seed,
        uint8 deviceClass,
        uint32 minMemoryMb,
        uint32 profileBit,
        uint8 region,
        uint32 minBandwidthMbps,
        uint256 minFreeStake,
        address[] memory exclude
    ) external view returns (address node, uint256 eligibleBps);
    /// @notice Stake-weighted draw of an eligible referee; address(0) if none found within MAX_DRAWS.
    function drawReferee(
        bytes32 seed,
        uint8 deviceClass,
        uint32 minMemoryMb,
        uint32 profileBit,
        uint256 minFreeStake,
        address[] memory exclude
    ) external view returns (address);

    /// @notice The node's declared roles bitmask (0 if unregistered).
    function rolesOf(address node) external view returns (uint8);
    /// @notice stake - locked - pendingUnstake.
    function freeStake(address node) external view returns (uint256);
    /// @notice Full node record.
    function getNode(address node) external view returns (Node memory);
}
