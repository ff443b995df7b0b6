// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Ownable} from "@openzeppelin/contracts/access/Ownable.sol";
import {TransientGuard} from "./lib/TransientGuard.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";

import {INodeRegistry} from "./interfaces/INodeRegistry.sol";
import {PackedSumTree} from "./lib/PackedSumTree.sol";
import {NodeMath} from "./lib/NodeMath.sol";
import {
    Node,
    ROLE_SOLVER,
    ROLE_VERIFIER,
    ROLE_REFEREE,
    DEVICE_CPU,
    DEVICE_CUDA,
    MAX_REGION,
    BPS,
    SELECTION_EPOCH_BLOCKS
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
/// @dev Eligibility classes (issue 9, "draws that cannot be starved"): a node's weight sits in one Fenwick tree per
///      (role, profile it serves, CUDA-only or any device, memory tier), so a draw weighs only stake eligible for its
///      requirements. A draw for (role, profile, device, minMemoryMb) samples the trees of that role and profile, of
///      CUDA nodes for a CUDA job or of all nodes otherwise, and of every memory tier whose floor is at least
///      minMemoryMb (the requirement rounds up to a tier floor: MEMORY_TIER_MB). A declaration that makes a node
///      ineligible (another profile, too little memory, a CPU for a CUDA job) puts its weight in trees the draw never
///      reads. Only free stake and liveness are still checked after sampling; an offline node's weight can be
///      removed by anyone (`evictOffline`).
/// @dev Network classes (issue 9, "declared bandwidth/region"): a class's tier is a cell, memory tier +
///      MEMORY_TIERS * bandwidth tier (declareNetwork; BANDWIDTH_TIERS floors 0, 10, 100, 1 000, 10 000 Mbit/s), and
///      a node that declared a region sits in that region's class family as well as in the region-any family
///      (region 0). A job with no region reads the region-any family (what every draw read before regions
///      existed); a region job reads only its region's family, so stake declared elsewhere, or not declared, absorbs
///      none of its draws. A bandwidth requirement rounds up to a tier floor, as memory does.
/// @dev Selection weight = weightBase * reputationFactor * promptnessFactor / BPS^2, kept in whole micro-VRT
///      (WEIGHT_UNIT) so the packed trees' 56-bit lanes hold every sum. weightBase is the bonded stake (stake -
///      pendingUnstake) capped by the free stake rounded up to a power of two (NodeMath.weightBase): never above
///      the bonded stake, so splitting a stake over many identities never raises the chance of being drawn, and at
///      most twice the free stake, so stake locked by work cannot soak up draws (issue 23). Weights change on
///      stake, unstake, slash, heartbeat, declaration updates, reputation penalties, and a lock that moves the free
///      stake below a power of two (rare for an idle node: the task lifecycle stays cheap). An unlock leaves the
///      weight low until the node's next heartbeat (as completed work does): a weight may lag below what the node
///      can take, never above. The free-stake filter at draw time still rejects a node that cannot lock a job's
///      task stake.
/// @dev Draws fixed before their value is known (issue 23): every tree, and the map of trees with weight, is read as
///      it stood when the current selection epoch (SELECTION_EPOCH_BLOCKS) began, and BlockhashRandomness makes a
///      value readable only inside its target block's epoch. A node that took its slot this epoch (registered, or
///      moved by a leaving node) is not drawn until the next, so a slot's snapshot weight always belongs to the node
///      in it. What a party can still do after seeing the value is make its own nodes ineligible (liveness, free
///      stake, declaration): that only ever gives its draws away.
contract NodeRegistry is INodeRegistry, Ownable, TransientGuard {
    using SafeERC20 for IERC20;
    using PackedSumTree for PackedSumTree.Tree;
    using SafeCast for uint256;

    /// @dev Storage form of a node (getNode rebuilds the public Node struct; NodeLens.reputationOf the Reputation one).
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
        uint16 usedWindowBps; // moving average of the share of its execution window a node used before committing
        uint8 region; // declareNetwork: REGION_* (0 = undeclared)
        uint32 bandwidthMbps; // declareNetwork: Mbit/s (0 = undeclared)
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
    uint256 public constant MIN_REPUTATION_BPS = NodeMath.MIN_REPUTATION_BPS;
    /// @notice Probation: phantom tasks in the reputation factor's denominator, so a fresh identity (no history)
    ///         starts at (0+1)/(0+1+9) = MIN_REPUTATION_BPS and earns weight only by completing work.
    uint256 public constant PROBATION_TASKS = NodeMath.PROBATION_TASKS;
    /// @notice Largest value accepted for the time parameters.
    uint256 public constant MAX_PERIOD = 30 days;
    /// @notice Promptness: each commit's share of the execution window used moves the node's average by 1/this.
    uint256 public constant PROMPTNESS_SMOOTHING = 8;
    /// @notice Memory tiers: a node sits in the tier of the largest floor (MB) its declared memory reaches; a draw
    ///         reads the tiers whose floor is at least the job's minimum (rounding the requirement up to a floor).
    uint256 public constant MEMORY_TIERS = NodeMath.MEMORY_TIERS;
    /// @notice Selection weights are kept in whole micro-VRT of weighted stake (the trees' 56-bit lanes hold any sum:
    ///         the 10^9 VRT supply cap is 10^15 micro-VRT < 2^56); NodeLens returns them in wei (multiples of this).
    uint256 public constant WEIGHT_UNIT = 1e12;
    /// @notice Bandwidth tiers (floors 0, 10, 100, 1 000, 10 000 Mbit/s): a node sits in the tier of the largest floor
    ///         its declared bandwidth reaches; a draw reads the tiers whose floor is at least the job's minimum.
    uint256 public constant BANDWIDTH_TIERS = NodeMath.BANDWIDTH_TIERS;
    /// @notice Profile bits a node may serve (PROFILE_CPU_F32_STRICT, PROFILE_CUDA_F32_STRICT, PROFILE_PORTABLE_F32).
    uint32 public constant PROFILE_MASK = 7;

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
    /// @dev One tree per eligibility class (_classKey); a node's weight for a role is the same in each of its trees.
    mapping(uint256 => PackedSumTree.Tree) internal _trees;
    /// @dev Each node's current weight per role (by slot: solver, referee), and their sums (views, invariants).
    mapping(uint256 => uint256[2]) internal _weights;
    uint256[2] internal _totals;
    /// @dev Per (role, region, profile, CUDA-only) class family: bit c set iff the tree of cell c (memory tier +
    ///      MEMORY_TIERS * bandwidth tier, < 55) has weight, so a draw reads only the totals of trees that can yield a
    ///      node.
    ///      Packed as live bits | snapshot bits << 64 | epoch stamp << 128, the snapshot being the map as it was
    ///      when the stamp's epoch began (as in PackedSumTree).
    mapping(uint256 => uint256) internal _tiersWithWeight;
    /// @dev Epoch stamp (_stamp) in which each slot got its current node; a draw skips a slot taken this epoch.
    mapping(uint256 => uint256) internal _slotSince;

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
        _slotSince[nodeList.length] = _stamp();
        n.registeredAt = uint64(block.timestamp);
        // INVARIANT: registering is not a check-in: a node is drawn only after its first heartbeat (a registered
        // node that never started would otherwise be drawn, and fined, for a whole liveness window).
        n.lastSeen = 0;
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
        NodeRecord storage n = _nodes[msg.sender];
        _setWeights(n, 0, 0); // out of the classes of the old declaration, into those of the new one
        _declare(n, roles, deviceClass, memoryMb, throughput, profiles, multiaddr);
        _syncWeight(msg.sender);
        emit NodeUpdated(msg.sender, roles, deviceClass, memoryMb, throughput, profiles, multiaddr);
    }

    /// @notice Declares the caller's network: its region (REGION_* of VerityTypes.sol, 0 = undeclared) and bandwidth
    ///         in Mbit/s. Moves its weight into the classes of the new declaration: a region job draws only nodes
    ///         that declared its region, a bandwidth floor only nodes whose bandwidth tier reaches it.
    /// @param region 0..MAX_REGION (1 Europe, 2 North America, 3 South America, 4 Asia, 5 Africa, 6 Oceania).
    /// @param bandwidthMbps Sustained bandwidth, Mbit/s.
    function declareNetwork(uint8 region, uint32 bandwidthMbps) external onlyRegistered {
        if (region > MAX_REGION) revert ParameterOutOfRange("region", region, 0, MAX_REGION);
        NodeRecord storage n = _nodes[msg.sender];
        _setWeights(n, 0, 0); // out of the classes of the old declaration, into those of the new one
        n.region = region;
        n.bandwidthMbps = bandwidthMbps;
        _syncWeight(msg.sender);
        emit NetworkDeclared(msg.sender, region, bandwidthMbps);
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

    /// @notice Removes an offline node's weight from every tree (anyone; the node's next heartbeat restores it), so
    ///         a node that stopped heartbeating stops costing draws attempts. Reverts while the node is live, unless
    ///         the node evicts itself: it signs off (an operator stopping it) and is not drawn until its next
    ///         heartbeat, instead of being drawn, and fined as late, for the rest of its liveness window (issue 25).
    function evictOffline(address node) external {
        NodeRecord storage n = _nodes[node];
        if (n.slot == 0) revert NodeNotRegistered(node);
        uint256 liveUntil = uint256(n.lastSeen) + livenessWindow;
        if (node == msg.sender) n.lastSeen = 0;
        else if (block.timestamp <= liveUntil) revert NodeStillLive(node, liveUntil);
        _setWeights(n, 0, 0);
    }

    // ---------------------------------------------------------------- protocol

    /// @inheritdoc INodeRegistry
    function lock(address node, uint256 amount) external onlyProtocol {
        NodeRecord storage n = _nodes[node];
        if (n.slot == 0) revert NodeNotRegistered(node);
        uint256 bonded = uint256(n.stake) - n.pendingUnstake;
        uint256 free = bonded - n.locked;
        if (amount > free) revert InsufficientFreeStake(node, free, amount);
        n.locked += uint128(amount); // amount <= free stake < 2^128
        // the weight moves only when the free stake falls below a power of two (NodeMath.weightBase)
        if (NodeMath.weightBase(bonded, free - amount) != NodeMath.weightBase(bonded, free)) _syncWeight(node);
        emit StakeLocked(node, msg.sender, amount);
    }

    /// @inheritdoc INodeRegistry
    function unlock(address node, uint256 amount) external onlyProtocol {
        _unlock(node, amount);
    }

    /// @inheritdoc INodeRegistry
    function unlockCompleted(address node, uint256 amount, bool credited, uint256 usedBps) external onlyProtocol {
        _unlock(node, amount);
        NodeRecord storage n = _nodes[node];
        if (credited) ++n.tasksCompleted;
        if (usedBps <= BPS) {
            // INVARIANT: the average stays within 0..BPS (a convex combination of values in it).
            n.usedWindowBps =
                uint16((uint256(n.usedWindowBps) * (PROMPTNESS_SMOOTHING - 1) + usedBps) / PROMPTNESS_SMOOTHING);
        }
        // Accepted work counts as liveness; the weight (out of probation) grows on the node's next heartbeat, so
        // the task path does not pay for two tree updates. A node that signed off stays off until it heartbeats.
        if (n.lastSeen != 0) n.lastSeen = uint64(block.timestamp);
        _emitReputation(node, n);
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
        uint8 region,
        uint32 minBandwidthMbps,
        uint256 minFreeStake,
        address[] memory exclude
    ) external view returns (address node, uint256 eligibleBps) {
        (node, eligibleBps) = _draw(
            seed,
            Requirements(ROLE_SOLVER, deviceClass, minMemoryMb, profileBit, region, minBandwidthMbps, minFreeStake),
            exclude
        );
        // The classes' share of all solver weight (issue 23, reputation: only work drawn from an open class counts),
        // live over live: weight taken out after the epoch began (requestUnstake) leaves both, not only the total.
        uint256 all = _totals[0];
        if (all != 0) eligibleBps = (eligibleBps * BPS) / all;
    }

    /// @inheritdoc INodeRegistry
    function drawReferee(
        bytes32 seed,
        uint8 deviceClass,
        uint32 minMemoryMb,
        uint32 profileBit,
        uint256 minFreeStake,
        address[] memory exclude
    ) external view returns (address node) {
        (node,) = _draw(seed, Requirements(ROLE_REFEREE, deviceClass, minMemoryMb, profileBit, 0, 0, minFreeStake), exclude);
    }

    /// @notice True iff `node` passes every hard filter of a draw for `role`, region (0 = any) and minimum bandwidth
    ///         included (a node qualifies for a bandwidth minimum iff its tier reaches the minimum rounded up to a
    ///         tier floor: exactly the trees the draw reads).
    function isEligible(
        address node,
        uint8 role,
        uint8 deviceClass,
        uint32 minMemoryMb,
        uint32 profileBit,
        uint8 region,
        uint32 minBandwidthMbps,
        uint256 minFreeStake
    ) external view returns (bool) {
        return _eligible(
            node, Requirements(role, deviceClass, minMemoryMb, profileBit, region, minBandwidthMbps, minFreeStake)
        );
    }

    function _eligible(address node, Requirements memory req) internal view returns (bool) {
        NodeRecord storage n = _nodes[node];
        if (n.slot == 0 || (n.roles & req.role) == 0) return false;
        if (req.deviceClass != DEVICE_CPU && n.deviceClass != req.deviceClass) return false;
        if (n.memoryMb < req.minMemoryMb) return false;
        if (req.profileBit == 0 || (n.profiles & req.profileBit) != req.profileBit) return false;
        if (req.region != 0 && n.region != req.region) return false;
        if (
            req.minBandwidthMbps != 0
                && NodeMath.bandwidthTier(n.bandwidthMbps) < _firstBandwidthTier(req.minBandwidthMbps)
        ) {
            return false;
        }
        if (_offline(n)) return false;
        return _free(n) >= req.minFreeStake && _free(n) > 0;
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
            multiaddr: n.multiaddr,
            region: n.region,
            bandwidthMbps: n.bandwidthMbps
        });
    }

    /// @notice One word of this contract's storage, for NodeLens (which knows the layout: `forge inspect NodeRegistry
    ///         storageLayout`) to show the weights and trees without their views taking room here.
    function extsload(bytes32 slot) external view returns (bytes32 value) {
        assembly ("memory-safe") {
            value := sload(slot)
        }
    }

    /// @notice Number of registered nodes.
    function nodeCount() external view returns (uint256) {
        return nodeList.length;
    }

    // ---------------------------------------------------------------- internals

    /// @dev Whether the node has not checked in within the liveness window, or never since it registered.
    function _offline(NodeRecord storage n) internal view returns (bool) {
        return n.lastSeen == 0 || block.timestamp > uint256(n.lastSeen) + livenessWindow;
    }

    /// @dev The current selection epoch's stamp: epoch + 1, so that 0 means "never written" in every stamped map.
    function _stamp() internal view returns (uint256) {
        return block.number / SELECTION_EPOCH_BLOCKS + 1;
    }

    /// @dev Flips the bit of `key`'s cell in its family's map of trees with weight, keeping the map as the epoch
    ///      found it on the epoch's first change.
    function _flipTier(uint256 key, uint256 ep) internal {
        uint256 tiers = _tiersWithWeight[key >> 8];
        uint256 live = tiers & type(uint64).max;
        uint256 snap = tiers >> 128 == ep ? (tiers >> 64) & type(uint64).max : live;
        _tiersWithWeight[key >> 8] = (live ^ (1 << (key & 0xff))) | (snap << 64) | (ep << 128);
    }

    function _listed(address node, address[] memory list) internal pure returns (bool) {
        for (uint256 i = 0; i < list.length; ++i) {
            if (list[i] == node) return true;
        }
        return false;
    }

    function _free(NodeRecord storage n) internal view returns (uint256) {
        return uint256(n.stake) - n.locked - n.pendingUnstake;
    }

    /// @dev The stake the node's weight counts: bonded, capped by free stake (NodeMath.weightBase).
    function _base(NodeRecord storage n) internal view returns (uint256) {
        return NodeMath.weightBase(uint256(n.stake) - n.pendingUnstake, _free(n));
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
            _slotSince[slot] = _stamp();
            _moveClasses(_nodes[moved], last, slot);
        }
        nodeList.pop();
        n.slot = 0;
        n.roles = 0; // rolesOf: 0 if unregistered
        n.region = 0; // a later registration starts undeclared (declareNetwork again)
        n.bandwidthMbps = 0;
        emit NodeLeft(node, uint16(slot));
    }

    function _unlock(address node, uint256 amount) internal {
        NodeRecord storage n = _nodes[node];
        if (amount > n.locked) revert InsufficientLockedStake(node, n.locked, amount);
        n.locked -= uint128(amount); // amount <= locked; the weight this frees comes back on the next heartbeat
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

    /// @dev Recomputes the node's weights from its stake, pending unstake, roles and reputation and writes them into
    ///      the trees of its classes.
    function _syncWeight(address node) internal {
        NodeRecord storage n = _nodes[node];
        if (n.slot == 0) return;
        uint256 w = (
            _base(n) * NodeMath.reputationBps(n.tasksCompleted, n.tasksLate, n.disputesLost)
                * NodeMath.promptnessBps(n.usedWindowBps)
        ) / (BPS * BPS * WEIGHT_UNIT);
        if (_offline(n)) w = 0; // out until its next heartbeat
        _setWeights(n, (n.roles & ROLE_SOLVER) != 0 ? w : 0, (n.roles & ROLE_REFEREE) != 0 ? w : 0);
    }

    /// @dev Writes the node's solver and referee weights into every tree of its current declaration.
    function _setWeights(NodeRecord storage n, uint256 solverWeight, uint256 refereeWeight) internal {
        uint256 slot = n.slot;
        uint256 ep = _stamp();
        uint256[2] storage w = _weights[slot];
        uint256[2] memory next = [solverWeight, refereeWeight];
        for (uint256 r = 0; r < 2; ++r) {
            if (w[r] == next[r]) continue;
            _totals[r] = _totals[r] - w[r] + next[r];
            w[r] = next[r];
            uint256[] memory keys = _classKeys(n, r == 0 ? ROLE_SOLVER : ROLE_REFEREE);
            for (uint256 k = 0; k < keys.length; ++k) {
                PackedSumTree.Tree storage tree = _trees[keys[k]];
                bool had = tree.total != 0;
                tree.set(slot, next[r], ep);
                if (had != (tree.total != 0)) _flipTier(keys[k], ep);
            }
        }
    }

    /// @dev Moves the weights of `node` (at slot `from`) to the empty slot `to`, in every tree and in _weights.
    function _moveClasses(NodeRecord storage n, uint256 from, uint256 to) internal {
        uint256 ep = _stamp();
        for (uint256 r = 0; r < 2; ++r) {
            uint256[] memory keys = _classKeys(n, r == 0 ? ROLE_SOLVER : ROLE_REFEREE);
            for (uint256 k = 0; k < keys.length; ++k) {
                _trees[keys[k]].move(from, to, ep);
            }
        }
        _weights[to] = _weights[from];
        delete _weights[from];
    }

    /// @dev The trees a node with this declaration sits in for `role`: one per served profile, and for a CUDA node
    ///      also the CUDA-only tree of each, all at the node's cell, in the region-any family and, for a node that
    ///      declared a region, that region's family too (at most 3 * 2 * 2 = 12).
    function _classKeys(NodeRecord storage n, uint8 role) internal view returns (uint256[] memory keys) {
        keys = new uint256[](12);
        uint256 count = 0;
        uint256 cell = _cell(n);
        uint256 region = uint256(n.region) << 40;
        bool cuda = n.deviceClass == DEVICE_CUDA;
        for (uint32 bit = 1; bit <= PROFILE_MASK; bit <<= 1) {
            if ((n.profiles & bit) == 0) continue;
            for (uint256 c = 0; c < (cuda ? 2 : 1); ++c) {
                uint256 key = NodeMath.classKey(role, 0, bit, c == 1, cell);
                keys[count++] = key;
                if (region != 0) keys[count++] = key | region;
            }
        }
        assembly ("memory-safe") {
            mstore(keys, count)
        }
    }

    /// @dev The cell of a node's declaration in every family it is in: memory tier + MEMORY_TIERS * bandwidth tier.
    function _cell(NodeRecord storage n) internal view returns (uint256) {
        return NodeMath.memoryTier(n.memoryMb) + MEMORY_TIERS * NodeMath.bandwidthTier(n.bandwidthMbps);
    }

    /// @dev The first bandwidth tier a draw for `minBandwidthMbps` reads (BANDWIDTH_TIERS: none).
    function _firstBandwidthTier(uint32 minBandwidthMbps) internal pure returns (uint256 first) {
        while (first < BANDWIDTH_TIERS && NodeMath.bandwidthFloor(first) < minBandwidthMbps) ++first;
    }

    /// @dev Hard filters of one draw.
    struct Requirements {
        uint8 role;
        uint8 deviceClass;
        uint32 minMemoryMb;
        uint32 profileBit;
        uint8 region; // 0 = any
        uint32 minBandwidthMbps; // 0 = any
        uint256 minFreeStake;
    }

    /// @dev Slots cut out of one tree's sampling space, sorted by slot, with their cumulative start and weight.
    struct Rejected {
        uint256[] starts;
        uint256[] weights;
        uint256[] slots;
        uint256 count;
        uint256 removed;
    }

    /// @dev The trees a draw reads: the role's, region's (region-any for 0) and profile's, CUDA-only for a CUDA job,
    ///      at every cell whose memory and bandwidth floors are at least the job's minimums. A profile mask other
    ///      than one served bit, or an unknown region, reads nothing.
    function _drawKeys(Requirements memory req) internal view returns (uint256[] memory keys) {
        uint32 bit = req.profileBit;
        if (bit == 0 || (bit & (bit - 1)) != 0 || bit > PROFILE_MASK || req.region > MAX_REGION) {
            return new uint256[](0);
        }
        uint256 first = 0;
        while (first < MEMORY_TIERS && NodeMath.tierFloor(first) < req.minMemoryMb) ++first;
        uint256 base = NodeMath.classKey(req.role, req.region, bit, req.deviceClass == DEVICE_CUDA, 0);
        // The cells a node may sit in (memory tier >= first, bandwidth tier >= the job's), those with weight only.
        uint256 row = ((1 << MEMORY_TIERS) - 1) & ~((1 << first) - 1);
        uint256 live = 0;
        for (uint256 b = _firstBandwidthTier(req.minBandwidthMbps); b < BANDWIDTH_TIERS; ++b) {
            live |= row << (MEMORY_TIERS * b);
        }
        uint256 tiers = _tiersWithWeight[base >> 8];
        // The map as this epoch began (the live bits if this epoch has not changed it).
        live &= (tiers >> 128 == _stamp() ? tiers >> 64 : tiers) & type(uint64).max;
        keys = new uint256[](MEMORY_TIERS * BANDWIDTH_TIERS);
        uint256 count = 0;
        // Ascending cells (bandwidth tier, then memory tier): the order the sampling walks the trees in.
        for (uint256 cell = 0; live != 0; ++cell) {
            if (live & 1 != 0) keys[count++] = base | cell;
            live >>= 1;
        }
        assembly ("memory-safe") {
            mstore(keys, count)
        }
    }

    /// @dev The sampling space of one draw: its trees, what each has left after rejections, and the sum.
    struct DrawState {
        uint256[] keys;
        Rejected[] rej;
        uint256[] totals;
        uint256 left;
        uint256 cap; // most rejections one draw can make: exclusions + MAX_DRAWS
        uint256 at; // the epoch stamp whose snapshot the draw reads (_stamp)
        uint256 eligible; // the trees' live weight (reputation credit compares it with the live role total)
    }

    /// @dev Stake-weighted sampling without replacement over the eligible classes' trees: a tree is picked in
    ///      proportion to the weight it has left, then a node in it; every rejected (or excluded) slot's interval is
    ///      cut out of its tree's sampling space, so MAX_DRAWS attempts examine MAX_DRAWS distinct (node, tree)
    ///      pairs. Only free stake and liveness can reject a sampled node. Cost: the trees' totals, then MAX_DRAWS *
    ///      (log2(capacity) reads + |rejected|) at most.
    /// @dev Returns the node drawn (0: none) and the live weight of the trees the draw read.
    function _draw(bytes32 seed, Requirements memory req, address[] memory exclude)
        internal
        view
        returns (address, uint256 eligible)
    {
        if (exclude.length > MAX_EXCLUDE) revert ParameterOutOfRange("exclude", exclude.length, 0, MAX_EXCLUDE);
        DrawState memory st = _drawState(req, exclude);
        eligible = st.eligible;
        for (uint256 attempt = 0; attempt < MAX_DRAWS; ++attempt) {
            if (st.left == 0) return (address(0), eligible);
            (uint256 k, uint256 slot) = _sample(st, uint256(keccak256(abi.encode(seed, attempt))) % st.left);
            // INVARIANT: the node drawn is the one whose weight the snapshot holds at that slot, and never excluded.
            if (slot <= nodeList.length && _slotSince[slot] != st.at) {
                address candidate = nodeList[slot - 1];
                if (_eligible(candidate, req) && !_listed(candidate, exclude)) return (candidate, eligible);
            }
            _rejectIn(st, k, slot);
        }
        return (address(0), eligible);
    }

    function _drawState(Requirements memory req, address[] memory exclude)
        internal
        view
        returns (DrawState memory st)
    {
        st.keys = _drawKeys(req);
        uint256 len = st.keys.length;
        st.rej = new Rejected[](len); // each tree's lists are allocated at its first rejection (_reject)
        st.totals = new uint256[](len);
        st.cap = exclude.length + MAX_DRAWS;
        st.at = _stamp();
        for (uint256 k = 0; k < len; ++k) {
            st.totals[k] = _trees[st.keys[k]].totalAt(st.at);
            st.left += st.totals[k];
            st.eligible += _trees[st.keys[k]].total;
        }
        if (len == 0) return st;
        // Every key is of one family, and a node sits in one cell of a family: an excluded node is cut out of that
        // cell's tree only, if the draw reads it (one lookup per exclusion, not one per tree and exclusion).
        uint256 family = st.keys[0] & ~uint256(0xff);
        for (uint256 i = 0; i < exclude.length; ++i) {
            NodeRecord storage x = _nodes[exclude[i]];
            uint256 slot = x.slot;
            if (slot == 0) continue;
            uint256 key = family | _cell(x);
            for (uint256 k = 0; k < len; ++k) {
                if (st.keys[k] != key) continue;
                if (_trees[key].weightOf(slot, st.at) != 0) _rejectIn(st, k, slot);
                break;
            }
        }
    }

    /// @dev The tree and slot that point `u` (< st.left) of the remaining sampling space falls on.
    function _sample(DrawState memory st, uint256 u) internal view returns (uint256 k, uint256 slot) {
        while (u >= st.totals[k]) u -= st.totals[k++];
        Rejected memory r = st.rej[k];
        for (uint256 j = 0; j < r.count; ++j) {
            if (r.starts[j] > u) break;
            u += r.weights[j];
        }
        slot = _trees[st.keys[k]].find(u, st.at);
    }

    function _rejectIn(DrawState memory st, uint256 k, uint256 slot) internal view {
        Rejected memory r = st.rej[k];
        uint256 before = r.removed;
        _reject(_trees[st.keys[k]], r, slot, st.cap, st.at);
        st.totals[k] -= r.removed - before;
        st.left -= r.removed - before;
    }

    /// @dev Inserts `slot` into the sorted rejected list (no duplicates), allocating the lists (`cap` entries) at the
    ///      tree's first rejection.
    function _reject(PackedSumTree.Tree storage tree, Rejected memory rej, uint256 slot, uint256 cap, uint256 at)
        internal
        view
    {
        if (rej.slots.length == 0) {
            rej.starts = new uint256[](cap);
            rej.weights = new uint256[](cap);
            rej.slots = new uint256[](cap);
        }
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
        uint256 w = tree.weightOf(slot, at);
        rej.starts[pos] = tree.prefix(slot - 1, at);
        rej.weights[pos] = w;
        rej.slots[pos] = slot;
        rej.count = count + 1;
        rej.removed += w;
    }
}
