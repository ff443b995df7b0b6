// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @notice Only the wired JobRegistry may move escrow.
/// @param caller The rejected caller.
error NotJobs(address caller);

/// @notice The JobRegistry is wired already (setJobs is once only).
/// @param jobs The registry wired before.
error JobsAlreadySet(address jobs);

/// @notice A payment exceeds what is left of the job's escrow.
/// @param jobId The job.
/// @param available Escrow left for the job.
/// @param requested The payment asked for.
error InsufficientEscrow(uint256 jobId, uint256 available, uint256 requested);

/// @notice The escrow received a different amount than the deposit named (a fee-on-transfer token).
/// @param expected The deposit's amount.
/// @param received What the escrow's balance grew by.
error DepositMismatch(uint256 expected, uint256 received);
