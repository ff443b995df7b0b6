// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {ERC20Burnable} from "@openzeppelin/contracts/token/ERC20/extensions/ERC20Burnable.sol";
import {ZeroAddress} from "./errors/CommonErrors.sol";
import {NotMinter, SupplyCapExceeded} from "./errors/TokenErrors.sol";

/// @title VerityToken
/// @notice ERC-20 (18 decimals) for job payment, node stake and rewards.
/// @dev One minter, fixed in the constructor, with no owner and no way to change it (issue 9, governance):
///      - on the devnet (chain 31337) the minter is the DevnetFaucet, which deploys this token itself and mints
///        for anyone who asks (devnet tokens are worth nothing);
///      - on any other chain the minter is the deployer account, for a one-time genesis distribution (stake for the
///        first nodes, payment for the first posters); after it, the deployer should mint nothing more, and
///        everyone can check what it minted from the Transfer events and `totalMinted`.
///      Either way no more than MAX_SUPPLY is ever minted (burned tokens do not free room). Burned tokens are what
///      was minted and is no longer supplied (totalMinted - totalSupply): sum(balances) + totalBurned == totalMinted
///      holds at all times, and a burn writes no counter of its own (issue 23, cheaper disputes: a stored
///      `totalBurned` cost every slash a write, 20,000 gas the first time).
contract VerityToken is ERC20, ERC20Burnable {
    /// @notice Most tokens that can ever be minted: 10^9 VRT.
    uint256 public constant MAX_SUPPLY = 1_000_000_000e18;

    /// @notice The one account that may mint (the DevnetFaucet on the devnet, the deployer elsewhere).
    address public immutable minter;

    /// @notice Tokens ever minted.
    uint256 public totalMinted;

    /// @param minter_ The only account that may ever mint.
    constructor(address minter_) ERC20("Verity", "VRT") {
        if (minter_ == address(0)) revert ZeroAddress("minter");
        minter = minter_;
    }

    /// @notice Mints `amount` to `to` (the minter only).
    function mint(address to, uint256 amount) external {
        // INVARIANT: only the account fixed at construction mints; nobody can add or swap a minter.
        if (msg.sender != minter) revert NotMinter(msg.sender, minter);
        // INVARIANT: totalMinted <= MAX_SUPPLY, so not even the minter can inflate the supply without bound.
        if (amount > MAX_SUPPLY - totalMinted) revert SupplyCapExceeded(amount, MAX_SUPPLY - totalMinted);
        _mint(to, amount);
    }

    /// @notice Tokens ever burned (slashes, burn shares): minted and no longer supplied.
    function totalBurned() external view returns (uint256) {
        return totalMinted - totalSupply();
    }

    /// @dev Every supply change passes here; count mints.
    function _update(address from, address to, uint256 value) internal override {
        super._update(from, to, value);
        if (from == address(0)) totalMinted += value;
    }
}
