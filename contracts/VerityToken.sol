// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {ERC20Burnable} from "@openzeppelin/contracts/token/ERC20/extensions/ERC20Burnable.sol";
import {Ownable} from "@openzeppelin/contracts/access/Ownable.sol";

/// @title VerityToken
/// @notice ERC-20 (18 decimals) for job payment, node stake and rewards.
/// @dev The owner mints (devnet faucet), never more than MAX_SUPPLY in all (burned tokens do not free room).
///      Burns are counted so that sum(balances) + totalBurned == totalMinted holds at all times.
contract VerityToken is ERC20, ERC20Burnable, Ownable {
    /// @notice Most tokens that can ever be minted: 10^9 VRT.
    uint256 public constant MAX_SUPPLY = 1_000_000_000e18;

    /// @notice A mint would take the tokens ever minted past MAX_SUPPLY.
    error SupplyCapExceeded(uint256 requested, uint256 remaining);

    /// @notice Tokens ever minted.
    uint256 public totalMinted;
    /// @notice Tokens ever burned (slashes, burn shares).
    uint256 public totalBurned;

    constructor() ERC20("Verity", "VRT") Ownable(msg.sender) {}

    /// @notice Mints `amount` to `to` (devnet faucet; owner only).
    function mint(address to, uint256 amount) external onlyOwner {
        // INVARIANT: totalMinted <= MAX_SUPPLY, so no owner can inflate the supply without bound.
        if (amount > MAX_SUPPLY - totalMinted) revert SupplyCapExceeded(amount, MAX_SUPPLY - totalMinted);
        _mint(to, amount);
    }

    /// @dev Every supply change passes here; count it.
    function _update(address from, address to, uint256 value) internal override {
        super._update(from, to, value);
        if (from == address(0)) totalMinted += value;
        if (to == address(0)) totalBurned += value;
    }
}
