// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @notice An address argument was the zero address.
/// @param what Which argument.
error ZeroAddress(bytes32 what);

/// @notice An owner-set parameter was outside its allowed range.
/// @param name The parameter's name.
/// @param value The rejected value.
/// @param min Smallest allowed value.
/// @param max Largest allowed value.
error ParameterOutOfRange(bytes32 name, uint256 value, uint256 min, uint256 max);

/// @notice The caller is not an authorized protocol contract.
error NotProtocol(address caller);

/// @notice There is nothing to withdraw.
error NothingToWithdraw(address account);
