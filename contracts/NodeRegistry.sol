// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Ownable} from "@openzeppelin/contracts/access/Ownable.sol";
import {ReentrancyGuard} from "@openzeppelin/contracts/utils/ReentrancyGuard.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";

import {INodeRegistry} from "./interfaces/INodeRegistry.sol";
import {SumTree} from "./lib/SumTree.sol";
import {
    Node,
    Reputation,
    ROLE_SOLVER,
    ROLE_VERIFIER,
    ROLE_REFEREE,
    DEVICE_CPU,
    DEVICE_CUDA,
    BPS
} from "./types/VerityTypes.sol";
import {ZeroAddress, ParameterOutOfRange, NotProtocol} from "./errors/CommonErrors.sol";
import "./errors/NodeRegistryErrors.sol";

/// @title NodeRegistry
/// @notice Registers nodes (roles, hardware, determinism profiles, IPFS address), holds their stake,
///         keeps reputation, and draws solvers and referees stake-weighted from two Fenwick sum trees.
/// @dev Membership costs stake and ends (issue 9, "no fixed capacity"): `register` pulls MIN_REGISTRATION_STAKE; a
///      node's bonded stake (stake - pendingUnstake) is either 0 (leaving) or at least that minimum, except where a
///      slash cut it; a node that unbonds everything (`leave`, or `requestUnstake` of all of it) is deregistered by
///      the `withdraw` that empties its stake, and the last node moves into its slot, so slots 1..nodeCount are
///      always the registered nodes. The trees double their capacity when a slot needs it.
/// @dev Selection weight = (stake - pendingUnstake) * reputationFactor / BPS. The weight is linear in stake,
///      so splitting a stake over many identities never raises the chance of being drawn. Weights change only on
///      stake, unstake, slash, heartbeat, declaration updates and reputation penalties; lock/unlock leave them
///      alone (the free-stake filter at draw time handles busy nodes), which keeps the task lifecycle cheap.
contract NodeRegistry is INodeRegistry, Ownable, ReentrancyGuard {
    using SafeERC20 for IERC20;
    using SumTree for SumTree.Tree;
    using SafeCast for uint256;

    /// @dev Storage form of a node (getNode / reputationOf rebuild the public Node and Reputation structs).
    ///      Packed so that the hot paths write slots that are already nonzero: lock/unlock touch the stake slot,
    ///      recordCompleted one slot (lastSeen + tasksCompleted), recordDispute the registeredAt slot. Amounts are
    ///      uint128 (checked on stake), far above any token supply.
    struct NodeRecord {
        // slot 0: declaration, liveness, task counters
        uint8 roles;
        uint8 deviceClass;
        uint32 memoryMb;
        uint32 throughput;
        uint32 profiles;
        uint16 slot; // 1-based position in the selection trees and nodeList (0 = not registered)
        uint64 lastSeen;
        uint32 tasksCompleted;
        uint32 tasksLate;
        // slot 1: times, dispute counters
        uint64 registeredAt;
        uint64 unbondingEnds;
        uint32 disputesWon;
        uint32 disputesLost;
        // slot 2: stake and its locked part
        uint128 stake;
        uint128 locked;
        // slot 3
        uint128 pendingUnstake;
        uint128 totalSlashed;
        string multiaddr;
    }

    /// @notice Maximum random draws (without replacement) per selection.
    uint256 public constant MAX_DRAWS = 16;
    /// @notice Maximum addresses a caller may exclude from one draw.
    uint256 public constant MAX_EXCLUDE = 16;
    /// @notice Maximum length of a node's IPFS multiaddr.
    uint256 public constant MAX_MULTIADDR_LENGTH = 256;
    /// @notice Stake `register` pulls from the caller; bonded stake may not fall below it except to 0 (leaving).
    uint256 public constant MIN_REGISTRATION_STAKE = 10e18;
    /// @notice Most nodes registered at once: slots are uint16 (Node.slot). The selection trees themselves grow
    ///         without bound.
    uint256 public constant MAX_NODES = type(uint16).max;
    /// @notice Floor of the reputation factor, in basis points.
    uint256 public constant MIN_REPUTATION_BPS = 1_000;
    /// @notice Probation: phantom tasks in the reputation factor's denominator, so a fresh identity (no history)
    ///         starts at (0+1)/(0+1+9) = MIN_REPUTATION_BPS and earns weight only by completing work.
    uint256 public constant PROBATION_TASKS = 9;
    /// @notice Largest value accepted for the time parameters.
    uint256 public constant MAX_PERIOD = 30 days;

    /// @notice The staking token.
    IERC20 public immutable token;

    /// @notice Seconds between requestUnstake and withdraw.
    uint64 public unbondingPeriod = 300;
    /// @notice A node is live if it sent a heartbeat or finished work within this many seconds.
    uint64 public livenessWindow = 600;

    /// @notice Contracts allowed to lock, unlock, slash and record reputation.
    mapping(address => bool) public isProtocol;
    /// @notice Once true, the set of protocol contracts is fixed for good (scripts/deploy.py seals it).
    bool public protocolsSealed;
    /// @notice Registered nodes, in slot order (slot i+1 holds nodeList[i]); a node that leaves is replaced by the
    ///         last one, so the list has no holes.
    address[] public nodeList;

    mapping(address => NodeRecord) internal _nodes;
    SumTree.Tree internal _solverTree;
    SumTree.Tree internal _refereeTree;

    modifier onlyProtocol() {
        if (!isProtocol[msg.sender]) revert NotProtocol(msg.sender);
        _;
    }

    modifier onlyRegistered() {
        if (_nodes[msg.sender].slot == 0) revert NodeNotRegistered(msg.sender);
        _;
    }

    constructor(IERC20 token_) Ownable(msg.sender) {
        if (address(token_) == address(0)) revert ZeroAddress("token");
        token = token_;
    }

    // ---------------------------------------------------------------- owner

    /// @notice Authorizes (or removes) a protocol contract, until the set is sealed. Setting the current value again
    ///         is a no-op.
    function setProtocol(address account, bool authorized) external onlyOwner {
        // INVARIANT: after deployment no owner can make itself (or a contract it wrote) able to lock or slash stake.
        if (protocolsSealed) revert ProtocolsSealed();
        if (account == address(0)) revert ZeroAddress("account");
        if (isProtocol[account] == authorized) return;
        isProtocol[account] = authorized;
        emit ProtocolSet(account, authorized);
    }

    /// @notice Fixes the protocol contracts for good: no later call can add or remove one (issue 9, governance).
    function sealProtocols() external onlyOwner {
        if (protocolsSealed) revert ProtocolsSealed();
        protocolsSealed = true;
        emit ProtocolsFixed();
    }

    /// @notice Sets the unbonding period in seconds.
    function setUnbondingPeriod(uint64 value) external onlyOwner {
        if (value > MAX_PERIOD) revert ParameterOutOfRange("unbondingPeriod", value, 0, MAX_PERIOD);
        unbondingPeriod = value;
        emit ParameterSet("unbondingPeriod", value);
    }

    /// @notice Sets the liveness window in seconds.
    function setLivenessWindow(uint64 value) external onlyOwner {
        if (value == 0 || value > MAX_PERIOD) revert ParameterOutOfRange("livenessWindow", value, 1, MAX_PERIOD);
        livenessWindow = value;
        emit ParameterSet("livenessWindow", value);
    }

    // ---------------------------------------------------------------- nodes

    /// @notice Registers the caller as a node, pulling MIN_REGISTRATION_STAKE (transferFrom: approve it first) into
    ///         its stake.
    /// @param roles Bitmask of SOLVER=1, VERIFIER=2, REFEREE=4.
    /// @param deviceClass 0 = CPU, 1 = CUDA.
    /// @param memoryMb Memory available for training, in MiB.
    /// @param throughput Measured throughput score (informational).
    /// @param profiles Supported determinism profiles bitmask (bit 0 cpu-f32-strict, bit 1 cuda-f32-strict).
    /// @param multiaddr IPFS multiaddr of the node (1..MAX_MULTIADDR_LENGTH bytes).
    function register(
        uint8 roles,
        uint8 deviceClass,
        uint32 memoryMb,
        uint32 throughput,
        uint32 profiles,
        string calldata multiaddr
    ) external nonReentrant {
        NodeRecord storage n = _nodes[msg.sender];
        if (n.slot != 0) revert NodeAlreadyRegistered(msg.sender);
        if (nodeList.length >= MAX_NODES) revert RegistryFull(MAX_NODES);
        _validateDeclaration(roles, deviceClass, multiaddr);
        nodeList.push(msg.sender);
        n.slot = uint16(nodeList.length); // <= MAX_NODES
        n.registeredAt = uint64(block.timestamp);
        n.lastSeen = uint64(block.timestamp);
        // INVARIANT: taking a slot costs the minimum stake (a returning node left with an empty stake, so this is
        // all of its stake now).
        n.stake = (uint256(n.stake) + MIN_REGISTRATION_STAKE).toUint128();
        _declare(n, roles, deviceClass, memoryMb, throughput, profiles, multiaddr);
        _syncWeight(msg.sender);
        emit NodeRegistered(msg.sender, roles, deviceClass, memoryMb, throughput, profiles, multiaddr);
        emit Staked(msg.sender, MIN_REGISTRATION_STAKE, n.stake);
        token.safeTransferFrom(msg.sender, address(this), MIN_REGISTRATION_STAKE);
    }

    /// @notice Updates the caller's declaration (same fields as register).
    function updateNode(
        uint8 roles,
        uint8 deviceClass,
        uint32 memoryMb,
        uint32 throughput,
        uint32 profiles,
        string calldata multiaddr
    ) external onlyRegistered {
        _validateDeclaration(roles, deviceClass, multiaddr);
        _declare(_nodes[msg.sender], roles, deviceClass, memoryMb, throughput, profiles, multiaddr);
        _syncWeight(msg.sender);
        emit NodeUpdated(msg.sender, roles, deviceClass, memoryMb, throughput, profiles, multiaddr);
    }

    /// @notice Adds `amount` tokens (pulled with transferFrom) to the caller's stake; the bonded stake after it must
    ///         reach MIN_REGISTRATION_STAKE (so a leaving node cannot keep its slot for a few wei).
    function stake(uint256 amount) external nonReentrant onlyRegistered {
        if (amount == 0) revert ZeroAmount();
        NodeRecord storage n = _nodes[msg.sender];
        n.stake = (uint256(n.stake) + amount).toUint128();
        uint256 bonded = uint256(n.stake) - n.pendingUnstake;
        if (bonded < MIN_REGISTRATION_STAKE) revert BelowMinimumStake(msg.sender, bonded, MIN_REGISTRATION_STAKE);
        _syncWeight(msg.sender);
        emit Staked(msg.sender, amount, n.stake);
        token.safeTransferFrom(msg.sender, address(this), amount);
    }

    /// @notice Starts unbonding `amount` of free stake; restarts the unbonding clock for the whole pending amount.
    ///         The bonded stake left must be 0 (the node is leaving: `withdraw` then deregisters it) or at least
    ///         MIN_REGISTRATION_STAKE.
    function requestUnstake(uint256 amount) external onlyRegistered {
        if (amount == 0) revert ZeroAmount();
        NodeRecord storage n = _nodes[msg.sender];
        uint256 free = _free(n);
        if (amount > free) revert InsufficientFreeStake(msg.sender, free, amount);
        uint256 bonded = uint256(n.stake) - n.pendingUnstake - amount;
        // INVARIANT: a registered node holds the minimum or is on its way out.
        if (bonded != 0 && bonded < MIN_REGISTRATION_STAKE) {
            revert BelowMinimumStake(msg.sender, bonded, MIN_REGISTRATION_STAKE);
        }
        _startUnbonding(msg.sender, n, amount);
    }

    /// @notice Leaves the registry: unbonds all of the caller's stake, and the `withdraw` after the unbonding period
    ///         returns it and frees the slot (at once if nothing is staked, e.g. after a full slash). Reverts while
    ///         any stake is locked by work. Staking MIN_REGISTRATION_STAKE again before `withdraw` cancels leaving.
    function leave() external onlyRegistered {
        NodeRecord storage n = _nodes[msg.sender];
        if (n.locked != 0) revert StakeStillLocked(msg.sender, n.locked);
        if (n.stake == 0) {
            _deregister(msg.sender, n);
            return;
        }
        uint256 amount = uint256(n.stake) - n.pendingUnstake; // locked == 0: all of it is free
        if (amount == 0) revert AlreadyLeaving(msg.sender, n.unbondingEnds);
        _startUnbonding(msg.sender, n, amount);
    }

    /// @notice Withdraws all unbonded stake once the unbonding period has passed; a node whose stake this empties is
    ///         deregistered (its slot goes to the last node).
    function withdraw() external nonReentrant onlyRegistered {
        NodeRecord storage n = _nodes[msg.sender];
        uint256 amount = n.pendingUnstake;
        if (amount == 0) revert NothingUnbonding(msg.sender);
        if (block.timestamp < n.unbondingEnds) revert StillUnbonding(msg.sender, n.unbondingEnds);
        // INVARIANT: pendingUnstake <= stake - locked, so locked stake never leaves.
        n.pendingUnstake = 0;
        n.stake -= uint128(amount);
        n.unbondingEnds = 0;
        _syncWeight(msg.sender);
        emit Withdrawn(msg.sender, amount);
        // INVARIANT: locked <= stake == 0, so a node leaves with nothing locked and nothing left behind.
        if (n.stake == 0) _deregister(msg.sender, n);
        token.safeTransfer(msg.sender, amount);
    }

    /// @notice Proves liveness and refreshes the caller's selection weight.
    function heartbeat() external onlyRegistered {
        _nodes[msg.sender].lastSeen = uint64(block.timestamp);
        _syncWeight(msg.sender);
        emit Heartbeat(msg.sender, uint64(block.timestamp));
    }

    // ---------------------------------------------------------------- protocol

    /// @inheritdoc INodeRegistry
    function lock(address node, uint256 amount) external onlyProtocol {
        NodeRecord storage n = _nodes[node];
        if (n.slot == 0) revert NodeNotRegistered(node);
        uint256 free = _free(n);
        if (amount > free) revert InsufficientFreeStake(node, free, amount);
        n.locked += uint128(amount); // amount <= free stake < 2^128
        emit StakeLocked(node, msg.sender, amount);
    }

    /// @inheritdoc INodeRegistry
    function unlock(address node, uint256 amount) external onlyProtocol {
        _unlock(node, amount);
    }

    /// @inheritdoc INodeRegistry
    function unlockCompleted(address node, uint256 amount) external onlyProtocol {
        _unlock(node, amount);
        _recordCompleted(node);
    }

    /// @inheritdoc INodeRegistry
    function slash(address node, uint256 amount, address to) external nonReentrant onlyProtocol {
        if (to == address(0)) revert ZeroAddress("to");
        NodeRecord storage n = _nodes[node];
        if (amount > n.locked) revert InsufficientLockedStake(node, n.locked, amount);
        n.locked -= uint128(amount); // amount <= locked <= stake
        n.stake -= uint128(amount);
        n.totalSlashed += uint128(amount);
        _syncWeight(node);
        emit StakeSlashed(node, to, amount);
        token.safeTransfer(to, amount);
    }

    /// @inheritdoc INodeRegistry
    function recordCompleted(address node) external onlyProtocol {
        _recordCompleted(node);
    }

    function _recordCompleted(address node) internal {
        NodeRecord storage n = _nodes[node];
        ++n.tasksCompleted;
        // Accepted work counts as liveness; the weight (out of probation) grows on the node's next heartbeat, so
        // the task path does not pay for two tree updates.
        n.lastSeen = uint64(block.timestamp);
        _emitReputation(node, n);
    }

    /// @inheritdoc INodeRegistry
    function recordLate(address node) external onlyProtocol {
        NodeRecord storage n = _nodes[node];
        ++n.tasksLate;
        _syncWeight(node);
        _emitReputation(node, n);
    }

    /// @inheritdoc INodeRegistry
    function recordDispute(address node, bool won) external onlyProtocol {
        NodeRecord storage n = _nodes[node];
        if (won) {
            ++n.disputesWon;
        } else {
            ++n.disputesLost;
            _syncWeight(node);
        }
        _emitReputation(node, n);
    }

    // ---------------------------------------------------------------- selection

    /// @inheritdoc INodeRegistry
    function drawSolver(
        bytes32 seed,
        uint8 deviceClass,
        uint32 minMemoryMb,
        uint32 profileBit,
        uint256 minFreeStake,
        address[] memory exclude
    ) external view returns (address) {
        return _drawFrom(_solverTree, ROLE_SOLVER, seed, deviceClass, minMemoryMb, profileBit, minFreeStake, exclude);
    }

    /// @inheritdoc INodeRegistry
    function drawReferee(
        bytes32 seed,
        uint8 deviceClass,
        uint32 minMemoryMb,
        uint32 profileBit,
        uint256 minFreeStake,
        address[] memory exclude
    ) external view returns (address) {
        return _drawFrom(_refereeTree, ROLE_REFEREE, seed, deviceClass, minMemoryMb, profileBit, minFreeStake, exclude);
    }

    /// @notice True iff `node` passes every hard filter of a draw for `role`.
    function isEligible(
        address node,
        uint8 role,
        uint8 deviceClass,
        uint32 minMemoryMb,
        uint32 profileBit,
        uint256 minFreeStake
    ) public view returns (bool) {
        NodeRecord storage n = _nodes[node];
        if (n.slot == 0 || (n.roles & role) == 0) return false;
        if (deviceClass != DEVICE_CPU && n.deviceClass != deviceClass) return false;
        if (n.memoryMb < minMemoryMb) return false;
        if (profileBit == 0 || (n.profiles & profileBit) != profileBit) return false;
        if (block.timestamp > uint256(n.lastSeen) + livenessWindow) return false;
        return _free(n) >= minFreeStake && _free(n) > 0;
    }

    // ---------------------------------------------------------------- views

    /// @inheritdoc INodeRegistry
    function rolesOf(address node) external view returns (uint8) {
        return _nodes[node].roles;
    }

    /// @inheritdoc INodeRegistry
    function freeStake(address node) external view returns (uint256) {
        return _free(_nodes[node]);
    }

    /// @inheritdoc INodeRegistry
    function getNode(address node) external view returns (Node memory) {
        NodeRecord storage n = _nodes[node];
        return Node({
            roles: n.roles,
            deviceClass: n.deviceClass,
            memoryMb: n.memoryMb,
            throughput: n.throughput,
            profiles: n.profiles,
            slot: n.slot,
            registeredAt: n.registeredAt,
            lastSeen: n.lastSeen,
            unbondingEnds: n.unbondingEnds,
            stake: n.stake,
            locked: n.locked,
            pendingUnstake: n.pendingUnstake,
            multiaddr: n.multiaddr
        });
    }

    /// @inheritdoc INodeRegistry
    function reputationOf(address node) external view returns (Reputation memory) {
        NodeRecord storage n = _nodes[node];
        return Reputation(n.tasksCompleted, n.tasksLate, n.disputesWon, n.disputesLost, n.totalSlashed);
    }

    /// @notice Number of registered nodes.
    function nodeCount() external view returns (uint256) {
        return nodeList.length;
    }

    /// @notice Current capacities of the solver and referee trees (each doubles when a weighted slot needs it).
    function treeCapacities() external view returns (uint256 solverCapacity, uint256 refereeCapacity) {
        return (_solverTree.capacity(), _refereeTree.capacity());
    }

    /// @notice Reputation factor of `node` in basis points: (c+1)/(c+1+late+4*lost+PROBATION_TASKS), floored at
    ///         MIN_REPUTATION_BPS (c = tasks completed).
    /// @dev INVARIANT: a fresh identity's factor is the floor and no identity's is below it, so abandoning a
    ///      penalised identity for a new one never raises the weight a stake earns (docs/contracts.md, "Probation").
    function reputationFactorBps(address node) public view returns (uint256) {
        NodeRecord storage n = _nodes[node];
        uint256 good = uint256(n.tasksCompleted) + 1;
        uint256 f = (good * BPS) / (good + n.tasksLate + 4 * uint256(n.disputesLost) + PROBATION_TASKS);
        return f < MIN_REPUTATION_BPS ? MIN_REPUTATION_BPS : f;
    }

    /// @notice Current selection weights of `node` in the solver and referee trees.
    function weightsOf(address node) external view returns (uint256 solverWeight, uint256 refereeWeight) {
        uint256 slot = _nodes[node].slot;
        return (_solverTree.weight[slot], _refereeTree.weight[slot]);
    }

    /// @notice Total weights of the solver and referee trees.
    function totalWeights() external view returns (uint256 solverTotal, uint256 refereeTotal) {
        return (_solverTree.total, _refereeTree.total);
    }

    // ---------------------------------------------------------------- internals

    function _free(NodeRecord storage n) internal view returns (uint256) {
        return uint256(n.stake) - n.locked - n.pendingUnstake;
    }

    function _startUnbonding(address node, NodeRecord storage n, uint256 amount) internal {
        n.pendingUnstake += uint128(amount); // amount <= free stake < 2^128
        uint64 availableAt = uint64(block.timestamp) + unbondingPeriod;
        n.unbondingEnds = availableAt;
        _syncWeight(node);
        emit UnstakeRequested(node, amount, availableAt);
    }

    /// @dev Frees `node`'s slot (its stake is 0, so are its weights): the last node moves into it, weights and all,
    ///      and the list shrinks by one. Reputation counters stay with the address.
    function _deregister(address node, NodeRecord storage n) internal {
        uint256 slot = n.slot;
        uint256 last = nodeList.length;
        if (slot != last) {
            address moved = nodeList[last - 1];
            nodeList[slot - 1] = moved;
            _nodes[moved].slot = uint16(slot);
            _solverTree.move(last, slot);
            _refereeTree.move(last, slot);
        }
        nodeList.pop();
        n.slot = 0;
        n.roles = 0; // rolesOf: 0 if unregistered
        emit NodeLeft(node, uint16(slot));
    }

    function _unlock(address node, uint256 amount) internal {
        NodeRecord storage n = _nodes[node];
        if (amount > n.locked) revert InsufficientLockedStake(node, n.locked, amount);
        n.locked -= uint128(amount); // amount <= locked
        emit StakeUnlocked(node, msg.sender, amount);
    }

    function _emitReputation(address node, NodeRecord storage n) internal {
        emit ReputationUpdated(node, n.tasksCompleted, n.tasksLate, n.disputesWon, n.disputesLost);
    }

    function _validateDeclaration(uint8 roles, uint8 deviceClass, string calldata multiaddr) internal pure {
        if (roles == 0 || roles > (ROLE_SOLVER | ROLE_VERIFIER | ROLE_REFEREE)) revert InvalidRoles(roles);
        if (deviceClass > DEVICE_CUDA) revert InvalidDeviceClass(deviceClass);
        uint256 len = bytes(multiaddr).length;
        if (len == 0 || len > MAX_MULTIADDR_LENGTH) revert InvalidMultiaddr(len, MAX_MULTIADDR_LENGTH);
    }

    function _declare(
        NodeRecord storage n,
        uint8 roles,
        uint8 deviceClass,
        uint32 memoryMb,
        uint32 throughput,
        uint32 profiles,
        string calldata multiaddr
    ) internal {
        n.roles = roles;
        n.deviceClass = deviceClass;
        n.memoryMb = memoryMb;
        n.throughput = throughput;
        n.profiles = profiles;
        n.multiaddr = multiaddr;
    }

    /// @dev Recomputes the node's weight in both trees from its stake, pending unstake, roles and reputation.
    function _syncWeight(address node) internal {
        NodeRecord storage n = _nodes[node];
        uint256 slot = n.slot;
        if (slot == 0) return;
        uint256 w = ((uint256(n.stake) - n.pendingUnstake) * reputationFactorBps(node)) / BPS;
        _solverTree.set(slot, (n.roles & ROLE_SOLVER) != 0 ? w : 0);
        _refereeTree.set(slot, (n.roles & ROLE_REFEREE) != 0 ? w : 0);
    }

    /// @dev Hard filters of one draw.
    struct Requirements {
        uint8 role;
        uint8 deviceClass;
        uint32 minMemoryMb;
        uint32 profileBit;
        uint256 minFreeStake;
    }

    /// @dev Slots cut out of the sampling space, sorted by slot, with their cumulative start and weight.
    struct Rejected {
        uint256[] starts;
        uint256[] weights;
        uint256[] slots;
        uint256 count;
        uint256 removed;
    }

    function _drawFrom(
        SumTree.Tree storage tree,
        uint8 role,
        bytes32 seed,
        uint8 deviceClass,
        uint32 minMemoryMb,
        uint32 profileBit,
        uint256 minFreeStake,
        address[] memory exclude
    ) internal view returns (address) {
        return _draw(tree, seed, Requirements(role, deviceClass, minMemoryMb, profileBit, minFreeStake), exclude);
    }

    /// @dev Stake-weighted sampling without replacement over the nodes rejected so far: every rejected (or excluded)
    ///      slot's interval is cut out of the sampling space, so MAX_DRAWS attempts examine MAX_DRAWS distinct nodes.
    ///      Cost: MAX_DRAWS * (log2(capacity) reads + |rejected|); the capacity is 1024 up to 1024 nodes, then
    ///      doubles with the node count (SumTree).
    function _draw(SumTree.Tree storage tree, bytes32 seed, Requirements memory req, address[] memory exclude)
        internal
        view
        returns (address)
    {
        if (exclude.length > MAX_EXCLUDE) revert ParameterOutOfRange("exclude", exclude.length, 0, MAX_EXCLUDE);
        uint256 cap = exclude.length + MAX_DRAWS;
        Rejected memory rej = Rejected(new uint256[](cap), new uint256[](cap), new uint256[](cap), 0, 0);
        for (uint256 i = 0; i < exclude.length; ++i) {
            uint256 slot = _nodes[exclude[i]].slot;
            if (slot != 0 && tree.weight[slot] != 0) _reject(tree, rej, slot);
        }
        uint256 total = tree.total;
        for (uint256 attempt = 0; attempt < MAX_DRAWS; ++attempt) {
            if (rej.removed >= total) return address(0);
            uint256 u = uint256(keccak256(abi.encode(seed, attempt))) % (total - rej.removed);
            for (uint256 j = 0; j < rej.count; ++j) {
                if (rej.starts[j] > u) break;
                u += rej.weights[j];
            }
            uint256 slot = tree.find(u);
            address candidate = nodeList[slot - 1];
            if (isEligible(candidate, req.role, req.deviceClass, req.minMemoryMb, req.profileBit, req.minFreeStake)) {
                return candidate;
            }
            _reject(tree, rej, slot);
        }
        return address(0);
    }

    /// @dev Inserts `slot` into the sorted rejected list (no duplicates).
    function _reject(SumTree.Tree storage tree, Rejected memory rej, uint256 slot) internal view {
        uint256 count = rej.count;
        uint256 pos = count;
        for (uint256 j = 0; j < count; ++j) {
            if (rej.slots[j] == slot) return;
            if (rej.slots[j] > slot) {
                pos = j;
                break;
            }
        }
        for (uint256 j = count; j > pos; --j) {
            rej.starts[j] = rej.starts[j - 1];
            rej.weights[j] = rej.weights[j - 1];
            rej.slots[j] = rej.slots[j - 1];
        }
        uint256 w = tree.weight[slot];
        rej.starts[pos] = tree.prefix(slot - 1);
        rej.weights[pos] = w;
        rej.slots[pos] = slot;
        rej.count = count + 1;
        rej.removed += w;
    }
}
