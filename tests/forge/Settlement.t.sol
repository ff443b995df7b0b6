// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Test} from "./base/Test.sol";
import {Settlement} from "../../contracts/lib/Settlement.sol";
import {SharesExceedBps} from "../../contracts/errors/DisputeGameErrors.sol";

/// @notice Settlement arithmetic: nothing created or lost, for every pot and share.
contract SettlementTest is Test {
    function split(uint256 pot, uint256 w, uint256 r, bool hasWinner)
        external
        pure
        returns (uint256, uint256, uint256)
    {
        return Settlement.split(pot, w, r, hasWinner);
    }

    function test_split_winner_succeeds() public pure {
        (uint256 toWinner, uint256 toReferees, uint256 toBurn) = Settlement.split(100e18, 5_000, 2_500, true);
        assertEq(toWinner, 50e18, "winner");
        assertEq(toReferees, 25e18, "referees");
        assertEq(toBurn, 25e18, "burn");
    }

    function test_split_noWinner_burnsWinnerShare_succeeds() public pure {
        (uint256 toWinner, uint256 toReferees, uint256 toBurn) = Settlement.split(100e18, 5_000, 2_500, false);
        assertEq(toWinner, 0, "no winner");
        assertEq(toReferees, 25e18, "referees still paid");
        assertEq(toBurn, 75e18, "burn");
    }

    function test_split_dustIsBurned_succeeds() public pure {
        (uint256 toWinner, uint256 toReferees, uint256 toBurn) = Settlement.split(3, 3_333, 3_333, true);
        assertEq(toWinner + toReferees + toBurn, 3, "sum");
        assertEq(toBurn, 3, "all dust burned");
    }

    function test_split_sharesOverBps_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(SharesExceedBps.selector, 6_000, 5_000));
        this.split(1, 6_000, 5_000, true);
    }

    /// @dev Conservation and bounds for every input.
    function testFuzz_split_conserves_succeeds(uint256 pot, uint256 w, uint256 r, bool hasWinner) public pure {
        pot = bound(pot, 0, 1e36);
        w = bound(w, 0, 10_000);
        r = bound(r, 0, 10_000 - w);
        (uint256 toWinner, uint256 toReferees, uint256 toBurn) = Settlement.split(pot, w, r, hasWinner);
        assertEq(toWinner + toReferees + toBurn, pot, "toWinner + toReferees + toBurn == pot");
        assertEq(toWinner, hasWinner ? (pot * w) / 10_000 : 0, "winner share");
        assertEq(toReferees, (pot * r) / 10_000, "referee share");
        assertLe(toWinner, pot, "winner <= pot");
    }
}
