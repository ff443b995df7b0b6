// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @title IDisputeGame
/// @notice Events of the dispute game (docs/protocol.md).
interface IDisputeGame {
    /// @notice A dispute started: `challenger` is party A, `defender` party B.
    event DisputeOpened(
        uint256 indexed disputeId, uint256 indexed taskId, address indexed challenger, address defender
    );
    /// @notice Level 0 narrowed to checkpoint segment [index, index+1].
    event CheckpointPinpointed(uint256 indexed disputeId, uint32 index, bytes32 agreed, bytes32 claimA, bytes32 claimB);
    /// @notice Both parties must reveal their leaf `index` at `level` before their clocks run out.
    event LeafRequested(uint256 indexed disputeId, uint8 level, uint32 index);
    /// @notice A party revealed a requested leaf.
    event LeafRevealed(uint256 indexed disputeId, address indexed party, uint8 level, uint32 index, bytes32 leafHash);
    /// @notice A party committed to its per-step trace of the pinpointed segment.
    event StepRootSubmitted(uint256 indexed disputeId, address indexed party, bytes32 stepRoot);
    /// @notice Level 1 narrowed to global step `step` (= segment * k + s): referees recompute it.
    event StepPinpointed(uint256 indexed disputeId, uint32 step, bytes32 agreed, bytes32 claimA, bytes32 claimB);
    /// @notice No eligible referee yet; anyone may retry drawPanel until `deadline`, then the dispute is voided.
    event PanelPending(uint256 indexed disputeId, uint64 deadline);
    /// @notice The referee panel was drawn; votes are committed until `commitDeadline`, revealed until `revealDeadline`.
    event RefereesDrawn(uint256 indexed disputeId, address[] referees, uint64 commitDeadline, uint64 revealDeadline);
    /// @notice A referee committed its vote.
    event VoteCommitted(uint256 indexed disputeId, address indexed referee);
    /// @notice A referee revealed its vote (its computed h_{s+1}).
    event VoteRevealed(uint256 indexed disputeId, address indexed referee, bytes32 vote);
    /// @notice The dispute ended (outcome: 1 challenger wins, 2 defender wins, 3 both lose, 4 voided).
    event DisputeResolved(
        uint256 indexed disputeId, uint256 indexed taskId, address winner, address loser, uint8 outcome
    );
    /// @notice `amount` was credited to `to` (pull).
    event Credited(address indexed to, uint256 amount);
    /// @notice `to` withdrew its credits.
    event CreditWithdrawn(address indexed to, uint256 amount);
    /// @notice The owner changed a parameter.
    event ParameterSet(bytes32 indexed name, uint256 value);
}
