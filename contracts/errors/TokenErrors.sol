// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @notice Only the token's minter (fixed at construction) may mint.
/// @param caller The account that tried.
/// @param minter The token's minter.
error NotMinter(address caller, address minter);

/// @notice A mint would take the tokens ever minted past MAX_SUPPLY.
/// @param requested The amount asked for.
/// @param remaining What may still be minted.
error SupplyCapExceeded(uint256 requested, uint256 remaining);

/// @notice The DevnetFaucet can only be deployed on the devnet (anvil, chain id 31337).
/// @param chainId The chain it was deployed on.
error NotADevnet(uint256 chainId);

/// @notice One drip asks for more than the faucet hands out per call.
/// @param amount The amount asked for.
/// @param maxDrip The most one drip mints (DevnetFaucet.MAX_DRIP).
error DripTooLarge(uint256 amount, uint256 maxDrip);
