// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @notice The node is not registered.
error NodeNotRegistered(address node);

/// @notice The node is already registered.
error NodeAlreadyRegistered(address node);

/// @notice As many nodes are registered as slot numbers exist (uint16); the selection trees themselves never fill.
error RegistryFull(uint256 maxNodes);

/// @notice The bonded stake (stake - pendingUnstake) would be `bonded`: neither 0 (leaving) nor at least `minimum`.
error BelowMinimumStake(address node, uint256 bonded, uint256 minimum);

/// @notice A node cannot leave while work holds part of its stake.
error StakeStillLocked(address node, uint256 locked);

/// @notice All of the node's stake is already unbonding; `withdraw` after `availableAt` deregisters it.
error AlreadyLeaving(address node, uint64 availableAt);

/// @notice Roles must be a non-empty subset of SOLVER|VERIFIER|REFEREE.
error InvalidRoles(uint8 roles);

/// @notice Unknown device class.
error InvalidDeviceClass(uint8 deviceClass);

/// @notice The IPFS multiaddr is empty or too long.
error InvalidMultiaddr(uint256 length, uint256 maxLength);

/// @notice A stake amount of zero.
error ZeroAmount();

/// @notice The node's free stake (stake - locked - pendingUnstake) does not cover `requested`.
error InsufficientFreeStake(address node, uint256 free, uint256 requested);

/// @notice Unlock or slash of more than is locked.
error InsufficientLockedStake(address node, uint256 locked, uint256 requested);

/// @notice Nothing is unbonding.
error NothingUnbonding(address node);

/// @notice The unbonding period has not elapsed.
error StillUnbonding(address node, uint64 availableAt);

/// @notice The set of protocol contracts was sealed at deployment; it can no longer change.
error ProtocolsSealed();
/// @notice evictOffline: the node sent a heartbeat or finished work within the liveness window (until `liveUntil`).
error NodeStillLive(address node, uint256 liveUntil);
