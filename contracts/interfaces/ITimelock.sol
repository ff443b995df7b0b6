// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @notice What the Timelock reads from the NodeRegistry: how long a leaving node waits for its stake.
interface IUnbondingPeriod {
    /// @notice Seconds between a node's requestUnstake and its withdraw.
    function unbondingPeriod() external view returns (uint64);
}

/// @notice The owner of every protocol contract after deployment: owner calls wait out a delay longer than the
///         registry's unbonding period, so a node that disagrees with a queued change can leave before it applies.
interface ITimelock {
    /// @notice The admin queued `data` for `target`; it may execute from `eta` on (later if the unbonding period
    ///         grows meanwhile).
    event CallQueued(bytes32 indexed id, address indexed target, bytes data, uint256 eta);
    /// @notice A queued call was executed.
    event CallExecuted(bytes32 indexed id, address indexed target, bytes data);
    /// @notice The admin cancelled a queued call.
    event CallCancelled(bytes32 indexed id);
    /// @notice The admin changed (only through a queued call to setAdmin).
    event AdminChanged(address indexed previousAdmin, address indexed newAdmin);

    /// @notice Queues `data` for `target`; returns the call's id (callId(target, data)).
    function queue(address target, bytes calldata data) external returns (bytes32 id);
    /// @notice Executes a queued call whose delay has passed; returns the target's return data.
    function execute(address target, bytes calldata data) external returns (bytes memory result);
    /// @notice Drops a queued call.
    function cancel(bytes32 id) external;
    /// @notice The delay a call queued now waits: max(MIN_DELAY, unbondingPeriod + MIN_MARGIN).
    function delay() external view returns (uint256);
    /// @notice First timestamp at which queued call `id` may execute (reverts if it is not queued).
    function readyAt(bytes32 id) external view returns (uint256);
    /// @notice The id of the call `data` to `target`.
    function callId(address target, bytes calldata data) external pure returns (bytes32);
}
