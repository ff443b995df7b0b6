// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {JobStatus, TaskStatus} from "../types/VerityTypes.sol";

/// @notice Only the job's submitter may fund or refund its verification fees.
error NotSubmitter(uint256 jobId, address caller);

/// @notice The job is not in the status this call needs.
error WrongJobStatus(uint256 jobId, JobStatus status);

/// @notice A fee configuration value is out of range (checksPerTask 1..MAX_CHECKS, rateBps 1..BPS, fee > 0).
error InvalidFeeConfig(bytes32 name, uint256 value);

/// @notice The job has no verification fees funded.
error NotFunded(uint256 jobId);

/// @notice Only a registered, staked verifier may anchor a key chain or commit a check.
error NotVerifier(address caller);

/// @notice The verifier has no key chain anchored.
error NoKeyChain(address verifier);

/// @notice The task's result is already public: a check committed now could be copied.
error ResultPublic(uint256 taskId, TaskStatus status);

/// @notice A replica of the task cannot be paid for checking its own result.
error OwnTask(uint256 taskId, address verifier);

/// @notice Nothing committed for (task, verifier), or the opening does not match the commitment.
error CommitmentMismatch(uint256 taskId, address verifier);

/// @notice The task is not accepted yet (or never will be).
error TaskNotAccepted(uint256 taskId, TaskStatus status);

/// @notice The committed result is not the accepted one: no fee.
error ResultMismatch(uint256 taskId, bytes32 committed, bytes32 accepted);

/// @notice The task's epoch key may not be revealed before epoch `allowedFrom` (later tasks of its epoch still run).
error KeyRevealTooEarly(uint256 taskId, uint64 epoch, uint64 allowedFrom);

/// @notice The task's epoch is not after the chain's anchor, or before an epoch already claimed.
error EpochOutOfOrder(uint256 taskId, uint64 epoch, uint64 anchorEpoch, uint64 lastEpoch);

/// @notice The revealed key does not hash to the chain's last key in the right number of steps.
error BadEpochKey(address verifier, uint64 epoch);

/// @notice The verifier's ticket for the task is above the job's sampling rate: it was not sampled.
error NotSampled(uint256 taskId, address verifier, uint64 ticket);

/// @notice The verifier already claimed this task's fee, or the task's fee slots are taken.
error AlreadyClaimed(uint256 taskId, address verifier);

/// @notice Every fee slot of the task is paid out already.
error ChecksExhausted(uint256 taskId, uint8 checksPerTask);

/// @notice The job's fee pot is empty.
error PotEmpty(uint256 jobId);

/// @notice A refund must wait for the claim grace after the job closed.
error ClaimGraceRunning(uint256 jobId, uint64 refundableAt);

/// @notice The task's claim window (opened by its first claim) has closed: its fee slots are decided.
error ClaimWindowClosed(uint256 taskId, uint64 closedAt);

/// @notice The task's fee slots are not decided yet (no claim, or its claim window is still open), or already paid.
error NothingToCollect(uint256 taskId, uint64 claimClosesAt);

/// @notice A check of the task comes too late: a slot of it has passed its result floor (`notBefore`), so a result
///         may be pending and readable (0: a replica already committed one).
error CheckTooLate(uint256 taskId, uint64 notBefore);
