// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Ownable} from "@openzeppelin/contracts/access/Ownable.sol";
import {TransientGuard} from "./lib/TransientGuard.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

import {IJobEscrow} from "./interfaces/IJobEscrow.sol";
import {IVerityToken} from "./interfaces/IVerityToken.sol";
import {ZeroAddress} from "./errors/CommonErrors.sol";
import {NotJobs, JobsAlreadySet, InsufficientEscrow, DepositMismatch} from "./errors/JobEscrowErrors.sol";

/// @title JobEscrow
/// @notice The job side's only token holder: every job's escrow. The JobRegistry decides, the escrow moves tokens:
///         deposits on postJob, payments sent to the payee once an accepted result's consumer found it available
///         (P10), burns of forfeited payments, refunds on cancel or reclaim.
/// @dev Conservation: token.balanceOf(this) == totalEscrow (tokens sent here directly are the only excess, and they
///      are never paid out). Payments are pushed: the token is the system's own ERC20, with no transfer hooks, so a
///      payee can neither re-enter nor make a payment revert (the zero address is refused first).
contract JobEscrow is IJobEscrow, Ownable, TransientGuard {
    using SafeERC20 for IERC20;

    /// @notice The escrowed token.
    IERC20 public immutable token;
    /// @notice The JobRegistry allowed to deposit, pay and refund (wired once).
    address public jobs;
    /// @inheritdoc IJobEscrow
    mapping(uint256 => uint256) public escrowOf;
    /// @notice Sum of every job's escrow.
    uint256 public totalEscrow;

    modifier onlyJobs() {
        // INVARIANT: only the wired JobRegistry moves escrow (jobs == 0 before wiring: nobody matches).
        if (msg.sender != jobs || msg.sender == address(0)) revert NotJobs(msg.sender);
        _;
    }

    /// @param token_ The escrowed token.
    constructor(IERC20 token_) Ownable(msg.sender) {
        if (address(token_) == address(0)) revert ZeroAddress("token");
        token = token_;
    }

    /// @notice Wires the JobRegistry; once only.
    /// @param jobs_ The JobRegistry.
    function setJobs(address jobs_) external onlyOwner {
        if (jobs_ == address(0)) revert ZeroAddress("jobs");
        // INVARIANT: the registry that decides payments can never be swapped under live escrows.
        if (jobs != address(0)) revert JobsAlreadySet(jobs);
        jobs = jobs_;
        emit JobsSet(jobs_);
    }

    /// @inheritdoc IJobEscrow
    function deposit(uint256 jobId, address from, uint256 amount) external onlyJobs nonReentrant {
        escrowOf[jobId] += amount;
        totalEscrow += amount;
        emit EscrowDeposited(jobId, from, amount);
        uint256 before = token.balanceOf(address(this));
        token.safeTransferFrom(from, address(this), amount);
        uint256 received = token.balanceOf(address(this)) - before;
        // INVARIANT: the books grow by exactly what arrived (balance == totalEscrow).
        if (received != amount) revert DepositMismatch(amount, received);
    }

    /// @inheritdoc IJobEscrow
    function pay(uint256 jobId, address to, uint256 amount) external onlyJobs {
        if (to == address(0)) revert ZeroAddress("to");
        uint256 available = escrowOf[jobId];
        // INVARIANT: a job pays only from its own escrow.
        if (amount > available) revert InsufficientEscrow(jobId, available, amount);
        escrowOf[jobId] = available - amount;
        totalEscrow -= amount;
        emit PaymentSent(jobId, to, amount);
        token.safeTransfer(to, amount);
    }

    /// @inheritdoc IJobEscrow
    function burn(uint256 jobId, uint256 amount) external onlyJobs {
        uint256 available = escrowOf[jobId];
        // INVARIANT: a job burns only from its own escrow; the books shrink by exactly what is burned.
        if (amount > available) revert InsufficientEscrow(jobId, available, amount);
        escrowOf[jobId] = available - amount;
        totalEscrow -= amount;
        emit EscrowBurned(jobId, amount);
        IVerityToken(address(token)).burn(amount);
    }

    /// @inheritdoc IJobEscrow
    function refund(uint256 jobId, address to) external onlyJobs nonReentrant returns (uint256 amount) {
        if (to == address(0)) revert ZeroAddress("to");
        amount = escrowOf[jobId];
        escrowOf[jobId] = 0;
        totalEscrow -= amount;
        emit EscrowRefunded(jobId, to, amount);
        if (amount > 0) token.safeTransfer(to, amount);
    }
}
