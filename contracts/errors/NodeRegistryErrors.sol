// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @notice The node is not registered.
error NodeNotRegistered(address node);

/// @notice The node is already registered.
error NodeAlreadyRegistered(address node);

/// @notice All selection-tree slots are taken.
error RegistryFull(uint256 capacity);

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
