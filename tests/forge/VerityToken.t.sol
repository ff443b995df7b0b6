// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Test} from "./base/Test.sol";
import {VerityToken} from "../../contracts/VerityToken.sol";
import {Ownable} from "@openzeppelin/contracts/access/Ownable.sol";

contract VerityTokenTest is Test {
    VerityToken internal token;
    address internal alice = address(0xA11CE);

    function setUp() public {
        token = new VerityToken();
    }

    function test_metadata_is18Decimals_succeeds() public view {
        assertEq(token.decimals(), 18, "decimals");
        assertEq(keccak256(bytes(token.symbol())), keccak256("VRT"), "symbol");
    }

    function test_mint_byOwner_succeeds() public {
        token.mint(alice, 5e18);
        assertEq(token.balanceOf(alice), 5e18, "balance");
        assertEq(token.totalMinted(), 5e18, "minted");
    }

    function test_mint_notOwner_reverts() public {
        vm.prank(alice);
        vm.expectRevert(abi.encodeWithSelector(Ownable.OwnableUnauthorizedAccount.selector, alice));
        token.mint(alice, 1);
    }

    /// @dev Issue 9 (an owner who can mint without a cap): the tokens ever minted stop at MAX_SUPPLY, and burning
    ///      does not make room again.
    function test_mint_pastTheCap_reverts() public {
        uint256 cap = token.MAX_SUPPLY();
        token.mint(alice, cap - 1);
        vm.expectRevert(abi.encodeWithSelector(VerityToken.SupplyCapExceeded.selector, uint256(2), uint256(1)));
        token.mint(alice, 2);
        token.mint(alice, 1);
        assertEq(token.totalMinted(), cap, "minted up to the cap");
        vm.prank(alice);
        token.burn(5e18);
        vm.expectRevert(abi.encodeWithSelector(VerityToken.SupplyCapExceeded.selector, uint256(1), uint256(0)));
        token.mint(alice, 1);
    }

    function test_burn_countsBurned_succeeds() public {
        token.mint(alice, 5e18);
        vm.prank(alice);
        token.burn(2e18);
        assertEq(token.totalBurned(), 2e18, "burned");
        assertEq(token.totalSupply() + token.totalBurned(), token.totalMinted(), "conservation");
    }

    function testFuzz_mintBurnTransfer_conserves_succeeds(uint96 minted, uint96 burned, uint96 moved) public {
        uint256 m = bound(minted, 1, token.MAX_SUPPLY());
        uint256 b = bound(burned, 0, m);
        uint256 t = bound(moved, 0, m - b);
        token.mint(alice, m);
        vm.startPrank(alice);
        token.burn(b);
        token.transfer(address(0xB0B), t);
        vm.stopPrank();
        assertEq(token.balanceOf(alice) + token.balanceOf(address(0xB0B)) + token.totalBurned(), token.totalMinted(), "sum");
    }
}
