// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Test} from "./base/Test.sol";
import {DevnetFaucet} from "../../contracts/DevnetFaucet.sol";
import {VerityToken} from "../../contracts/VerityToken.sol";
import {NotADevnet, NotMinter, DripTooLarge, SupplyCapExceeded} from "../../contracts/errors/TokenErrors.sol";

/// @notice Issue 9 (minting only through a devnet-only faucet): the faucet exists only on chain 31337, it alone
///         mints the devnet token, anyone may drip a bounded amount, and the supply cap still holds.
contract DevnetFaucetTest is Test {
    DevnetFaucet internal faucet;
    VerityToken internal token;
    address internal alice = address(0xA11CE);
    address internal stranger = address(0x5778);

    function setUp() public {
        vm.chainId(31337);
        faucet = new DevnetFaucet();
        token = faucet.token();
    }

    function test_constructor_onDevnet_isTheTokensMinter_succeeds() public view {
        assertEq(token.minter(), address(faucet), "faucet mints");
        assertEq(token.totalMinted(), 0, "nothing minted at deployment");
    }

    /// @dev The faucet (and so a token anyone can mint) cannot be deployed on a public chain or a testnet.
    function test_constructor_otherChains_reverts() public {
        uint256[4] memory ids = [uint256(1), 10, 8453, 11155111];
        for (uint256 i = 0; i < ids.length; ++i) {
            vm.chainId(ids[i]);
            vm.expectRevert(abi.encodeWithSelector(NotADevnet.selector, ids[i]));
            new DevnetFaucet();
        }
    }

    function testFuzz_constructor_anyOtherChain_reverts(uint64 id) public {
        vm.assume(id != 31337 && id != 0);
        vm.chainId(id);
        vm.expectRevert(abi.encodeWithSelector(NotADevnet.selector, uint256(id)));
        new DevnetFaucet();
    }

    function test_drip_byAnyone_succeeds() public {
        vm.expectEmit(true, true, false, true, address(faucet));
        emit DevnetFaucet.Dripped(alice, stranger, 1_000e18);
        vm.prank(stranger);
        faucet.drip(alice, 1_000e18);
        assertEq(token.balanceOf(alice), 1_000e18, "balance");
        assertEq(token.totalMinted(), 1_000e18, "minted");
    }

    /// @dev scripts/deploy.py funds each test account with 10^6 VRT in one drip.
    function test_drip_deployFaucetAmountFits_succeeds() public {
        faucet.drip(alice, 1_000_000e18);
        faucet.drip(alice, faucet.MAX_DRIP());
        assertEq(token.balanceOf(alice), 1_000_000e18 + faucet.MAX_DRIP(), "balance");
    }

    function test_drip_overMaxDrip_reverts() public {
        uint256 max = faucet.MAX_DRIP();
        vm.expectRevert(abi.encodeWithSelector(DripTooLarge.selector, max + 1, max));
        faucet.drip(alice, max + 1);
    }

    /// @dev Only the faucet mints: not its deployer (this test), not anyone else.
    function test_mint_notTheFaucet_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(NotMinter.selector, address(this), address(faucet)));
        token.mint(alice, 1);
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(NotMinter.selector, stranger, address(faucet)));
        token.mint(stranger, 1);
        assertEq(token.totalMinted(), 0, "nothing minted");
    }

    /// @dev Many drips cannot pass MAX_SUPPLY: the token's cap binds the faucet too.
    function test_drip_pastTheCap_reverts() public {
        uint256 max = faucet.MAX_DRIP();
        uint256 cap = token.MAX_SUPPLY();
        for (uint256 i = 0; i < cap / max; ++i) {
            faucet.drip(alice, max);
        }
        assertEq(token.totalMinted(), cap, "minted up to the cap");
        vm.expectRevert(abi.encodeWithSelector(SupplyCapExceeded.selector, uint256(1), uint256(0)));
        faucet.drip(alice, 1);
    }

    function testFuzz_drip_conserves_succeeds(uint96 a, uint96 b) public {
        uint256 x = bound(a, 0, faucet.MAX_DRIP());
        uint256 y = bound(b, 0, faucet.MAX_DRIP());
        faucet.drip(alice, x);
        vm.prank(alice);
        faucet.drip(stranger, y);
        assertEq(token.balanceOf(alice) + token.balanceOf(stranger), token.totalMinted(), "sum");
        assertEq(token.totalMinted(), x + y, "minted");
    }
}
