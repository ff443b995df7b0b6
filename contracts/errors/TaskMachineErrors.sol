// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {JobStatus, TaskStatus, ReplicaStatus, DisputeOutcome} from "../types/VerityTypes.sol";

/// @title ITaskMachineErrors
/// @notice The errors only TaskMachine code reverts with, declared again so that the JobRegistry's ABI (the one
///         clients load; the registry runs TaskMachine's code by delegatecall) names every error a registry call can
///         revert with. Each is the same signature (so the same selector) as its declaration in JobRegistryErrors.sol
///         and CommonErrors.sol; tests/forge/JobRegistry.t.sol checks that they match.
interface ITaskMachineErrors {
    /// @notice commit, reveal in place of a commit, submitResult: the job's resultFloor after the slot's assignment
    ///         has not passed.
    error ResultTooEarly(uint256 taskId, uint8 slot, uint256 notBefore);
    /// @notice decline: the decline grace (the first DECLINE_GRACE_BPS of the slot's execution window) has passed.
    error DeclineTooLate(uint256 taskId, uint8 slot, uint256 graceEnd);
    /// @notice withdrawCommitted: the task is not Open, or its empty slot has not been empty for the assignment
    ///         timeout.
    error PartnerNotStarved(uint256 taskId, TaskStatus status, uint256 releasableAfter);
    /// @notice The job cannot be cancelled now: work was assigned and no task waited past the assignment timeout.
    error CancelNotAllowed(uint256 jobId);

    /// @notice A challenge was committed after the candidate's challenge deadline.
    error ChallengeCommittedLate(uint256 taskId, uint64 committedAt, uint64 deadline);

    /// @notice The challenge window has closed (for a challenge's reveal: the window plus the job's reveal grace).
    error ChallengeWindowClosed(uint256 taskId, uint64 deadline);

    /// @notice The challenge window, or the reveal grace after it, is still open; `deadline` is when both end.
    error ChallengeWindowOpen(uint256 taskId, uint64 deadline);

    /// @notice The revealed values do not match the commitment.
    error CommitmentMismatch(uint256 taskId, bytes32 expected, bytes32 actual);

    /// @notice The deadline has passed.
    error DeadlinePassed(uint256 taskId, uint8 slot, uint64 deadline);

    /// @notice Disputes against the task's candidate are still open; finalize waits for them.
    error DisputesPending(uint256 taskId, uint32 openDisputes);

    /// @notice A Merkle proof failed.
    error InvalidProof(uint256 taskId, uint256 index, bytes32 leafHash);

    /// @notice The slot index is out of range.
    error InvalidSlot(uint256 taskId, uint8 slot);

    /// @notice A task of the job is in a dispute or its challenge window; settle it (finalize/resolve) first.
    error JobHasPendingTask(uint256 jobId, uint256 taskId, TaskStatus status);

    /// @notice The job has not completed.
    error JobNotCompleted(uint256 jobId, JobStatus status);

    /// @notice TaskMachine code runs only by the JobRegistry's delegatecall.
    error NotDelegated();

    /// @notice Only the DisputeGame may call this.
    error NotDisputeGame(address caller);

    /// @notice Only the job's submitter may do this.
    error NotSubmitter(uint256 jobId, address caller);

    /// @notice Reveal opens only after every replica has committed.
    error RevealNotOpen(uint256 taskId);

    /// @notice The slot is not in a status where it can be late.
    error SlotNotLate(uint256 taskId, uint8 slot, ReplicaStatus status, uint64 deadline);

    /// @notice The dispute refers to a candidate the task no longer has (its epoch moved on).
    error StaleEpoch(uint256 taskId, uint32 current, uint32 given);

    /// @notice A dispute hook got an outcome it cannot apply.
    error UnexpectedOutcome(uint256 taskId, DisputeOutcome outcome);

    /// @notice The trace length is not the task's.
    error WrongTraceLength(uint256 taskId, uint32 expected, uint32 actual);

    /// @notice commit is for replicated tasks, submitResult for optimistic ones.
    error WrongVerificationMode(uint256 taskId, uint8 replication);

    /// @notice There is nothing to withdraw.
    error NothingToWithdraw(address account);
}
