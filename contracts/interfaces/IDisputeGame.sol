// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {DisputePhase} from "../types/VerityTypes.sol";

/// @title IDisputeGame
/// @notice Events and the settlement-time view of the dispute game (docs/protocol-v2.md).
interface IDisputeGame {
    /// @notice A challenger committed `commitment` = keccak256(abi.encode(taskId, root, finalHash, resultCid, salt,
    ///         challenger)); it reveals the challenge in a later block.
    event ChallengeCommitted(address indexed challenger, bytes32 indexed commitment);
    /// @notice A dispute started: `challenger` is party A, `defender` party B.
    event DisputeOpened(
        uint256 indexed disputeId, uint256 indexed taskId, address indexed challenger, address defender
    );
    /// @notice The dispute entered `phase` at `at`.
    event DisputePhaseChanged(uint256 indexed disputeId, DisputePhase phase, uint64 at);
    /// @notice Level 0 narrowed to checkpoint segment [index, index+1].
    event CheckpointPinpointed(uint256 indexed disputeId, uint32 index, bytes32 agreed, bytes32 claimA, bytes32 claimB);
    /// @notice Both parties must reveal their leaf `index` at `level` before their clocks run out.
    event LeafRequested(uint256 indexed disputeId, uint8 level, uint32 index);
    /// @notice A party (or the defender's co-defender, for B) revealed a requested leaf.
    event LeafRevealed(uint256 indexed disputeId, address indexed party, uint8 level, uint32 index, bytes32 leafHash);
    /// @notice A party committed to its per-step trace of the pinpointed segment.
    event StepRootSubmitted(uint256 indexed disputeId, address indexed party, bytes32 stepRoot);
    /// @notice Level 1 narrowed to global step `step` (= segment * k + s): the referee panel recomputes it.
    event StepPinpointed(uint256 indexed disputeId, uint32 step, bytes32 agreed, bytes32 claimA, bytes32 claimB);
    /// @notice The dispute ended (outcome: 1 challenger wins, 2 defender wins, 3 both lose, 4 voided).
    event DisputeResolved(
        uint256 indexed disputeId, uint256 indexed taskId, address winner, address loser, uint8 outcome
    );
    /// @notice The dispute went stale (its task's candidate changed): nobody slashed, the challenger released.
    event DisputeAbandoned(uint256 indexed disputeId, uint256 indexed taskId, uint32 epoch);
    /// @notice `amount` was paid to `to` (a token transfer in the same transaction).
    event Credited(address indexed to, uint256 amount);
    /// @notice The owner changed a parameter (applies to disputes opened afterwards).
    event ParameterSet(bytes32 indexed name, uint256 value);

    /// @notice While the game calls `IJobRegistry.onDisputeSettled`: the co-defender member of a losing B side that
    ///         the game did not slash, because the other member alone made B's losing step-level claim (it submitted
    ///         B's step root); the job registry releases its replica (Voided, stake unlocked, not paid). 0 otherwise.
    function sparedDefender() external view returns (address);
}
