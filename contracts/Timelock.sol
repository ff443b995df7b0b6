// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {ITimelock, IUnbondingPeriod} from "./interfaces/ITimelock.sol";
import {ZeroAddress} from "./errors/CommonErrors.sol";
import {
    NotTimelockAdmin,
    NotTimelockSelf,
    CallAlreadyQueued,
    CallNotQueued,
    CallNotReady,
    TargetHasNoCode
} from "./errors/TimelockErrors.sol";

/// @title Timelock
/// @notice Owns JobRegistry, DisputeGame, RefereePanel, NodeRegistry and JobEscrow after deployment
///         (scripts/deploy.py), so every owner parameter setter waits out a public delay (issue 9, governance).
/// @dev The admin (the deployer) queues a call, and may execute it once `readyAt` has passed, or cancel it. The delay
///      is max(MIN_DELAY, registry.unbondingPeriod() + MIN_MARGIN), read when the call is queued and again when it
///      executes (the later of the two wins), so a node that sees a change coming (CallQueued) can request unstake
///      and withdraw before the change applies, even if the unbonding period is raised in the meantime.
///      A call is identified by (target, data): the same call cannot be queued twice at once.
contract Timelock is ITimelock {
    /// @notice The shortest delay of any queued call.
    uint256 public constant MIN_DELAY = 2 days;
    /// @notice Time on top of the unbonding period for a node to see the queued call, finish or leave its tasks and
    ///         request unstake.
    uint256 public constant MIN_MARGIN = 1 days;

    /// @notice The registry whose unbonding period the delay follows.
    IUnbondingPeriod public immutable registry;
    /// @notice Who queues, executes and cancels (the deployer; changed only by a queued call to setAdmin).
    address public admin;

    /// @notice A queued call: when it was queued and its eta as computed then (eta 0: not queued).
    struct Queued {
        uint64 queuedAt;
        uint64 eta;
    }

    /// @notice Queued calls by id (callId(target, data)).
    mapping(bytes32 => Queued) public queued;

    modifier onlyAdmin() {
        if (msg.sender != admin) revert NotTimelockAdmin(msg.sender);
        _;
    }

    /// @param registry_ The NodeRegistry (its unbondingPeriod sets the delay).
    constructor(IUnbondingPeriod registry_) {
        if (address(registry_) == address(0)) revert ZeroAddress("registry");
        registry = registry_;
        admin = msg.sender;
        emit AdminChanged(address(0), msg.sender);
    }

    /// @inheritdoc ITimelock
    function delay() public view returns (uint256) {
        uint256 d = uint256(registry.unbondingPeriod()) + MIN_MARGIN;
        return d > MIN_DELAY ? d : MIN_DELAY;
    }

    /// @inheritdoc ITimelock
    function callId(address target, bytes calldata data) public pure returns (bytes32) {
        return keccak256(abi.encode(target, data));
    }

    /// @inheritdoc ITimelock
    function readyAt(bytes32 id) public view returns (uint256) {
        Queued memory q = queued[id];
        if (q.eta == 0) revert CallNotQueued(id);
        uint256 byCurrentDelay = uint256(q.queuedAt) + delay();
        return byCurrentDelay > q.eta ? byCurrentDelay : q.eta;
    }

    /// @inheritdoc ITimelock
    function queue(address target, bytes calldata data) external onlyAdmin returns (bytes32 id) {
        if (target.code.length == 0) revert TargetHasNoCode(target);
        id = callId(target, data);
        if (queued[id].eta != 0) revert CallAlreadyQueued(id, queued[id].eta);
        uint256 eta = block.timestamp + delay();
        queued[id] = Queued(uint64(block.timestamp), uint64(eta));
        emit CallQueued(id, target, data, eta);
    }

    /// @inheritdoc ITimelock
    function execute(address target, bytes calldata data) external onlyAdmin returns (bytes memory result) {
        bytes32 id = callId(target, data);
        uint256 ready = readyAt(id);
        // INVARIANT: no owner call applies before every node could have unbonded and left since it was announced.
        if (block.timestamp < ready) revert CallNotReady(id, ready, block.timestamp);
        delete queued[id];
        bool ok;
        (ok, result) = target.call(data);
        if (!ok) {
            // The target's own error (e.g. ParameterOutOfRange), so clients decode it; the call stays queued.
            assembly ("memory-safe") {
                revert(add(result, 32), mload(result))
            }
        }
        emit CallExecuted(id, target, data);
    }

    /// @inheritdoc ITimelock
    function cancel(bytes32 id) external onlyAdmin {
        if (queued[id].eta == 0) revert CallNotQueued(id);
        delete queued[id];
        emit CallCancelled(id);
    }

    /// @notice Hands the admin role to `newAdmin`; only as a queued call of this timelock (so it waits the delay).
    /// @param newAdmin The new admin.
    function setAdmin(address newAdmin) external {
        if (msg.sender != address(this)) revert NotTimelockSelf(msg.sender);
        if (newAdmin == address(0)) revert ZeroAddress("admin");
        address previous = admin;
        admin = newAdmin;
        emit AdminChanged(previous, newAdmin);
    }
}
