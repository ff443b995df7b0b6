// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @title IJobEscrow
/// @notice Holds every job's escrow; only the JobRegistry moves it. Payments are sent to the payee at once (push):
///         a payee needs no transaction of its own to be paid.
/// @dev Submitters approve the escrow (not the registry) for a job's escrow. Conservation:
///      token.balanceOf(escrow) == totalEscrow.
interface IJobEscrow {
    /// @notice `amount` was pulled from `from` into job `jobId`'s escrow.
    event EscrowDeposited(uint256 indexed jobId, address indexed from, uint256 amount);
    /// @notice `amount` of job `jobId`'s escrow was sent to `to`.
    event PaymentSent(uint256 indexed jobId, address indexed to, uint256 amount);
    /// @notice The rest of job `jobId`'s escrow, `amount`, went back to `to`.
    event EscrowRefunded(uint256 indexed jobId, address indexed to, uint256 amount);
    /// @notice `amount` of job `jobId`'s escrow was burned (a payment forfeited for unavailable data, P10).
    event EscrowBurned(uint256 indexed jobId, uint256 amount);
    /// @notice The owner wired the JobRegistry (once).
    event JobsSet(address indexed jobs);

    /// @notice Pulls `amount` from `from` into job `jobId`'s escrow (JobRegistry only).
    function deposit(uint256 jobId, address from, uint256 amount) external;
    /// @notice Sends `amount` of job `jobId`'s escrow to `to` (JobRegistry only).
    function pay(uint256 jobId, address to, uint256 amount) external;
    /// @notice Burns `amount` of job `jobId`'s escrow (JobRegistry only).
    function burn(uint256 jobId, uint256 amount) external;
    /// @notice Sends what is left of job `jobId`'s escrow to `to`; returns it (JobRegistry only).
    function refund(uint256 jobId, address to) external returns (uint256 amount);

    /// @notice Tokens still held for job `jobId`.
    function escrowOf(uint256 jobId) external view returns (uint256);
}
