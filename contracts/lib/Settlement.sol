// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {BPS} from "../types/VerityTypes.sol";
import {SharesExceedBps} from "../errors/DisputeGameErrors.sol";

/// @title Settlement
/// @notice How a dispute's slashed pot is split: the winner's share (only if there is a winner), the referees'
///         share, and the rest burned. Nothing is created or lost: toWinner + toReferees + toBurn == pot.
library Settlement {
    /// @notice Splits `pot` by basis points; rounding dust is burned.
    /// @param pot Tokens slashed from the losers (and a losing challenger's bond).
    /// @param winnerShareBps Winner's share; ignored when `hasWinner` is false.
    /// @param refereeShareBps Referees' share.
    /// @param hasWinner False for BothLose / Voided: the winner's share is burned.
    function split(uint256 pot, uint256 winnerShareBps, uint256 refereeShareBps, bool hasWinner)
        internal
        pure
        returns (uint256 toWinner, uint256 toReferees, uint256 toBurn)
    {
        // INVARIANT: the shares never exceed the pot, so the burn cannot underflow.
        if (winnerShareBps + refereeShareBps > BPS) revert SharesExceedBps(winnerShareBps, refereeShareBps);
        if (hasWinner) toWinner = (pot * winnerShareBps) / BPS;
        toReferees = (pot * refereeShareBps) / BPS;
        toBurn = pot - toWinner - toReferees;
    }
}
