// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {VerityToken} from "./VerityToken.sol";
import {NotADevnet, DripTooLarge} from "./errors/TokenErrors.sol";

/// @title DevnetFaucet
/// @notice The only minter of the devnet's VerityToken: anyone may ask it for tokens, a bounded amount per call.
/// @dev It exists only on the devnet: its constructor reverts on any chain but anvil's (31337), and it deploys the
///      token itself with itself as the token's fixed minter, so a faucet-minted token cannot exist elsewhere.
///      On any other chain scripts/deploy.py deploys VerityToken directly, its minter the deployer (a one-time
///      genesis distribution; see VerityToken).
///      Anyone may drip, by design: devnet tokens are worth nothing, the devnet's accounts are test keys, and a
///      node operator or a test funds its own fresh address without asking the deployer. MAX_DRIP per call keeps
///      one typo from draining the cap; the token's MAX_SUPPLY bounds everything minted, faucet or not.
contract DevnetFaucet {
    /// @notice The devnet's chain id (anvil's default).
    uint256 public constant DEVNET_CHAIN_ID = 31337;
    /// @notice Most one drip mints: 10^7 VRT, 1% of MAX_SUPPLY (deploy.py funds each test account 10^6 VRT).
    uint256 public constant MAX_DRIP = 10_000_000e18;

    /// @notice The token this faucet deployed and alone mints.
    VerityToken public immutable token;

    /// @notice `amount` VRT was minted to `to`, at `by`'s request.
    event Dripped(address indexed to, address indexed by, uint256 amount);

    constructor() {
        // INVARIANT: a faucet (and so a token anyone can mint) exists only on the devnet.
        if (block.chainid != DEVNET_CHAIN_ID) revert NotADevnet(block.chainid);
        token = new VerityToken(address(this));
    }

    /// @notice Mints `amount` (at most MAX_DRIP) to `to`; anyone may call it, on the devnet only.
    /// @param to Who receives the tokens.
    /// @param amount Token wei to mint (the token's MAX_SUPPLY still bounds the total).
    function drip(address to, uint256 amount) external {
        // INVARIANT: no single call mints more than MAX_DRIP.
        if (amount > MAX_DRIP) revert DripTooLarge(amount, MAX_DRIP);
        token.mint(to, amount);
        emit Dripped(to, msg.sender, amount);
    }
}
