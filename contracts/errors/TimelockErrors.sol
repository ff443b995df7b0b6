// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @notice Only the timelock's admin may queue, execute or cancel.
/// @param caller The account that tried.
error NotTimelockAdmin(address caller);

/// @notice Only the timelock itself (a queued call, after its delay) may change the admin.
/// @param caller The account that tried.
error NotTimelockSelf(address caller);

/// @notice This call (target and data) is already queued; cancel it or wait for it.
/// @param id The call's id.
/// @param eta When it becomes executable (as computed when it was queued).
error CallAlreadyQueued(bytes32 id, uint256 eta);

/// @notice No queued call has this id (never queued, executed or cancelled).
/// @param id The call's id.
error CallNotQueued(bytes32 id);

/// @notice The call's delay has not passed yet (the delay follows the registry's current unbonding period).
/// @param id The call's id.
/// @param readyAt First timestamp at which it may execute.
/// @param nowTs The current block timestamp.
error CallNotReady(bytes32 id, uint256 readyAt, uint256 nowTs);

/// @notice The call's target has no code (a typo'd address would otherwise "succeed" doing nothing).
/// @param target The address.
error TargetHasNoCode(address target);
