// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

/// @notice The token as the protocol contracts see it: an ERC-20 they can burn from their own balance.
interface IVerityToken is IERC20 {
    /// @notice Burns `amount` of the caller's tokens.
    function burn(uint256 amount) external;
}
