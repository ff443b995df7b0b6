// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {DisputePhase, TaskStatus, Verdict} from "../types/VerityTypes.sol";

/// @notice The dispute is not in the phase this move needs.
error WrongPhase(uint256 disputeId, DisputePhase phase);

/// @notice The phase change is not in the game's transition table.
error IllegalTransition(uint256 disputeId, DisputePhase from, DisputePhase to);

/// @notice The replicated contest of the task already has a dispute in progress.
error DisputeAlreadyOpen(uint256 taskId, uint256 disputeId);

/// @notice The task is not in a status that can be disputed this way.
error TaskNotDisputable(uint256 taskId, TaskStatus status);

/// @notice The challenger's result has the claim's final hash: nothing to dispute.
error NoDisagreement(uint256 taskId, bytes32 finalHash);

/// @notice The caller lacks the VERIFIER role.
error NotVerifier(address caller);

/// @notice The caller is not a party of the dispute (nor the defender's co-defender).
error NotParty(uint256 disputeId, address caller);

/// @notice The caller stands behind the claim it tries to challenge.
error ChallengerIsDefender(uint256 taskId, address caller);

/// @notice At level 1 only the B-side member that submitted B's step root moves for B (its step trace, its claims).
error NotStepRootSubmitter(uint256 disputeId, address caller);

/// @notice The party has already made this move.
error AlreadyMoved(uint256 disputeId, address party);

/// @notice A Merkle proof failed.
error InvalidDisputeProof(uint256 disputeId, uint8 level, uint256 index, bytes32 leafHash);

/// @notice The pinpointed leaves do not agree at i or do not differ at i+1.
error NotADivergence(uint256 disputeId, uint32 index);

/// @notice Index outside the level's trace.
error IndexOutOfRange(uint256 disputeId, uint256 index, uint256 max);

/// @notice The revealed index is not the one the game requested.
error NotRequestedIndex(uint256 disputeId, uint8 level, uint32 requested, uint32 given);

/// @notice No party's clock has run out yet.
error ClockNotExpired(uint256 disputeId);

/// @notice The clock of party `party` (0 = A, 1 = B) ran out: the move is too late, claim the timeout instead.
error ClockExpired(uint256 disputeId, uint8 party);

/// @notice The dispute was opened against an older candidate of its task (epoch `epoch`, now `current`).
error StaleDispute(uint256 disputeId, uint32 epoch, uint32 current);

/// @notice abandon: the dispute's epoch is still the task's.
error DisputeNotStale(uint256 disputeId, uint32 epoch);

/// @notice No challenge commitment `commitment` exists (or it was used).
error ChallengeNotCommitted(bytes32 commitment);

/// @notice The challenge commitment was made in this block; reveal it in a later one.
error ChallengeCommitTooRecent(bytes32 commitment, uint64 blockNumber);

/// @notice Only the referee panel may call.
error NotPanel(address caller);

/// @notice The verdict is not one the game can settle.
error InvalidVerdict(uint256 disputeId, Verdict verdict);

/// @notice The winner's and the referees' shares add up to more than the pot.
error SharesExceedBps(uint256 winnerShareBps, uint256 refereeShareBps);

/// @notice The challenger already holds an open challenge of this task (issue 23: one at a time per challenger).
error ChallengeAlreadyOpen(uint256 taskId, address challenger, uint256 disputeId);
