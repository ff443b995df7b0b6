// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {PanelRequest, Verdict} from "../types/VerityTypes.sol";

/// @title IRefereePanel
/// @notice Seats a stake-weighted random panel with two-phase randomness, runs commit-reveal voting on one training
///         step's output, redraws no-shows, and passes a verdict back to the game (docs/protocol-v2.md).
interface IRefereePanel {
    /// @notice The game asked for a panel; seats are drawn once randomness `requestId` is ready.
    event PanelOpened(uint256 indexed disputeId, uint256 requestId);
    /// @notice The seats are filled (the whole current panel); votes are committed until `commitDeadline`.
    event RefereesSeated(uint256 indexed disputeId, address[] referees, uint64 commitDeadline);
    /// @notice Some seat could not be filled; new randomness `requestId` was requested for another try.
    event SeatingRetry(uint256 indexed disputeId, uint256 requestId);
    /// @notice A referee committed its vote.
    event VoteCommitted(uint256 indexed disputeId, address indexed referee);
    /// @notice Every seat committed: votes are revealed until `revealDeadline`.
    event RevealOpened(uint256 indexed disputeId, uint64 revealDeadline);
    /// @notice A referee revealed its vote (its recomputed h_{s+1}).
    event VoteRevealed(uint256 indexed disputeId, address indexed referee, bytes32 vote);
    /// @notice A referee lost `amount` (reason 1 = did not commit, 2 = did not reveal, 3 = voted against the majority).
    event RefereeSlashed(uint256 indexed disputeId, address indexed referee, uint256 amount, uint8 reason);
    /// @notice The panel decided (verdict: 1 for A, 2 for B, 3 neither, 4 no decision).
    event PanelDecided(uint256 indexed disputeId, uint8 verdict, bytes32 majorityVote);
    /// @notice `amount` was paid to `to` (a token transfer in the same transaction).
    event Credited(address indexed to, uint256 amount);
    /// @notice The owner changed a parameter (applies to panels opened afterwards).
    event ParameterSet(bytes32 indexed name, uint256 value);

    /// @notice Starts a panel for `disputeId` (game only).
    function open(uint256 disputeId, PanelRequest calldata r) external;
    /// @notice Ends a panel whose dispute went stale: referees are released unslashed (game only). The game has sent
    ///         the whole `fee` first; the seats holding a commitment are paid equal parts of it, the rest goes back to
    ///         the game, and the panel returns what it paid (`used`, 0 when no seat committed).
    function cancel(uint256 disputeId, uint256 fee) external returns (uint256 used);
    /// @notice Seats of the panel of `disputeId` holding a revealed vote.
    function revealedCount(uint256 disputeId) external view returns (uint256);
}

/// @notice What a RefereePanel calls back on the game that opened it.
interface IPanelGame {
    /// @notice The panel decided `v` about `disputeId`. The game settles the parties, transfers the referees' share
    ///         of the pot (or at least the dispute's panel fee) to the panel and returns that amount (the panel splits it
    ///         among the majority voters, or among every referee that revealed when there is no majority).
    function onVerdict(uint256 disputeId, Verdict v) external returns (uint256 refereeReward);

    /// @notice The addresses never seated on the panel of `disputeId`: A, B and B's co-defender (or 0). Read when seats
    ///         are drawn, so the panel does not keep a copy (issue 23, cheaper disputes).
    function partiesOf(uint256 disputeId) external view returns (address[3] memory);

    /// @notice The claims the panel of `disputeId` tells apart (A's and B's post-state hash of the disputed step):
    ///         read when it decides, so the panel does not keep a copy (issue 23, cheaper disputes).
    function claimsOf(uint256 disputeId) external view returns (bytes32 claimA, bytes32 claimB);
}
