// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {JobStatus, TaskStatus, ReplicaStatus, DisputeOutcome} from "../types/VerityTypes.sol";

/// @notice A PostJobParams field is invalid.
error InvalidJobParameter(bytes32 field, uint256 value);

/// @notice The job does not exist or is not in the expected status.
error JobNotActive(uint256 jobId, JobStatus status);

/// @notice The job has not completed.
error JobNotCompleted(uint256 jobId, JobStatus status);

/// @notice Only the job's submitter may do this.
error NotSubmitter(uint256 jobId, address caller);

/// @notice The job cannot be cancelled now: work was assigned and no task waited past the assignment timeout.
error CancelNotAllowed(uint256 jobId);

/// @notice A task of the job is in a dispute or its challenge window; settle it (finalize/resolve) first.
error JobHasPendingTask(uint256 jobId, uint256 taskId, TaskStatus status);

/// @notice The task does not exist.
error TaskNotFound(uint256 taskId);

/// @notice The task is not in the status this call needs.
error UnexpectedTaskStatus(uint256 taskId, TaskStatus status);

/// @notice No empty slot or no eligible node could be drawn.
error NoEligibleNode(uint256 taskId);

/// @notice The randomness the task's slots are drawn from is not readable yet (its target block is not mined).
error DrawPending(uint256 taskId, uint256 requestId);

/// @notice A randomness source returned a request id that does not fit the task record's 64 bits.
error RequestIdTooLarge(uint256 requestId);

/// @notice The caller holds no replica slot in the expected status.
error NotReplica(uint256 taskId, address caller, ReplicaStatus expected);

/// @notice The slot index is out of range.
error InvalidSlot(uint256 taskId, uint8 slot);

/// @notice The slot is not in a status where it can be late.
error SlotNotLate(uint256 taskId, uint8 slot, ReplicaStatus status, uint64 deadline);

/// @notice The deadline has passed.
error DeadlinePassed(uint256 taskId, uint8 slot, uint64 deadline);

/// @notice Reveal opens only after every replica has committed.
error RevealNotOpen(uint256 taskId);

/// @notice commit is for replicated tasks, submitResult for optimistic ones.
error WrongVerificationMode(uint256 taskId, uint8 replication);

/// @notice The revealed values do not match the commitment.
error CommitmentMismatch(uint256 taskId, bytes32 expected, bytes32 actual);

/// @notice The trace length is not the task's.
error WrongTraceLength(uint256 taskId, uint32 expected, uint32 actual);

/// @notice A Merkle proof failed.
error InvalidProof(uint256 taskId, uint256 index, bytes32 leafHash);

/// @notice The challenge window, or the reveal grace after it, is still open; `deadline` is when both end.
error ChallengeWindowOpen(uint256 taskId, uint64 deadline);

/// @notice The challenge window has closed (for a challenge's reveal: the window plus the job's reveal grace).
error ChallengeWindowClosed(uint256 taskId, uint64 deadline);

/// @notice A challenge was committed after the candidate's challenge deadline.
error ChallengeCommittedLate(uint256 taskId, uint64 committedAt, uint64 deadline);

/// @notice The dispute refers to a candidate the task no longer has (its epoch moved on).
error StaleEpoch(uint256 taskId, uint32 current, uint32 given);

/// @notice Disputes against the task's candidate are still open; finalize waits for them.
error DisputesPending(uint256 taskId, uint32 openDisputes);

/// @notice Only the DisputeGame may call this.
error NotDisputeGame(address caller);

/// @notice No index holds this (job, round, index).
error TaskIndexNotFound(uint256 jobId, uint32 round, uint32 index);

/// @notice The DisputeGame is wired already and cannot be changed.
error DisputeGameAlreadySet(address game);

/// @notice A dispute hook got an outcome it cannot apply.
error UnexpectedOutcome(uint256 taskId, DisputeOutcome outcome);

/// @notice TaskMachine code runs only by the JobRegistry's delegatecall.
error NotDelegated();

/// @notice withdrawCommitted: the task is not Open, or its empty slot has not been empty for the assignment timeout.
error PartnerNotStarved(uint256 taskId, TaskStatus status, uint256 releasableAfter);

/// @notice commit, reveal in place of a commit, submitResult: the job's resultFloor after the slot's assignment has
///         not passed (fee checks are committed meanwhile, before any result is public).
error ResultTooEarly(uint256 taskId, uint8 slot, uint256 notBefore);

/// @notice decline: the decline grace (the first DECLINE_GRACE_BPS of the slot's execution window) has passed.
error DeclineTooLate(uint256 taskId, uint8 slot, uint256 graceEnd);

/// @notice reportUnavailable: the task has no input `index` (AGGREGATE: one per shard; a later round's TRAIN: one).
error NoSuchInput(uint256 taskId, uint32 index, uint32 inputs);

/// @notice A task's (`replica` false) or a replica slot's status change that StatusTable does not allow (issue 23).
error IllegalStatusTransition(uint256 taskId, bool replica, uint8 from, uint8 to);

/// @notice withdrawCommitted: the caller's slot has a reveal deadline (both slots committed before its partner was
///         reported late): it must reveal by then, or be reported late (issue 23 review).
error RevealRunning(uint256 taskId, uint8 slot, uint64 deadline);
