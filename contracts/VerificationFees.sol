// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {TransientGuard} from "./lib/TransientGuard.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

import {IJobViews} from "./interfaces/IJobRegistry.sol";
import {INodeRegistry} from "./interfaces/INodeRegistry.sol";
import {Job, Task, Replica, JobStatus, TaskStatus, ReplicaStatus, ROLE_VERIFIER, BPS} from "./types/VerityTypes.sol";
import {ZeroAddress, ParameterOutOfRange} from "./errors/CommonErrors.sol";
import "./errors/VerificationFeesErrors.sol";

/// @title VerificationFees
/// @notice Looking pays (P5, second half): a verifier that re-executed a task and committed its result blind, before
///         any result of the task was public, earns a fee from the job's verification pot once the task is accepted
///         with that result, if its private ticket for the task was below the job's sampling rate
///         (docs/protocol-v2.md, "Verification fees").
/// @dev Tickets. A verifier anchors a hash chain: head = keccak^N(seed), with N >= the epochs it will serve. Its key
///      for epoch e is k_e with keccak^(e - anchorEpoch)(k_e) == head: nobody else can compute k_e before it is
///      revealed, and it cannot choose k_e after anchoring (P5: "derived from something only the verifier holds until
///      it acts"). Its ticket for a task created in epoch e is keccak(k_e, taskId); the contract checks it at the
///      claim. k_e is revealed only from epoch e + 2: every task whose ticket it decides was created in epoch e, and
///      by then the solvers drawn at creation have had at least one whole epoch (>= the execution windows the
///      deployment serves) to commit. A claim moves the chain to (k_e, e): a verifier claims its epochs in order.
///      Blindness. `commitCheck` takes keccak(abi.encode(taskId, finalHash, salt, verifier)) only while no result of
///      the task is public (task Open or Assigned, no replica Revealed): a verifier that did not re-execute cannot
///      know the hash to commit, so copying a published result earns nothing.
///      Slots by ticket (issue 23, item 6). A task's first valid claim opens its claim window (CLAIM_WINDOW_EPOCHS);
///      every valid claim in it holds a fee slot, reserved from the pot, and once the task's checksPerTask slots are
///      held a lower ticket displaces the highest. After the window `collect` pays the holders. A fee goes to the
///      lowest tickets among the verifiers that claimed, not to the fastest: a solver's own verifier identities win
///      slots in proportion to their share of the sampled verifiers that claim.
///      Conservation: token.balanceOf(this) == sum of pots + fees reserved by held slots; each pot only pays fees
///      and its submitter's refund.
contract VerificationFees is TransientGuard {
    using SafeERC20 for IERC20;

    /// @notice Most fee slots per task.
    uint8 public constant MAX_CHECKS = 8;
    /// @notice Most chain steps one claim may hash (a chain is re-anchored before it grows past this).
    uint64 public constant MAX_EPOCH_GAP = 20_000;
    /// @notice Epochs after its creation epoch before a task's epoch key may be revealed.
    uint64 public constant REVEAL_DELAY_EPOCHS = 2;
    /// @notice Epochs after a job closed during which its fees can still be claimed (then the submitter refunds).
    uint64 public constant CLAIM_GRACE_EPOCHS = 4;
    /// @notice Epochs a task's claim window stays open after its first claim (a verifier deferring a claim for an
    ///         older epoch's, up to one epoch, still lands in it).
    uint64 public constant CLAIM_WINDOW_EPOCHS = 2;
    /// @notice claimStateOf states.
    uint8 public constant CLAIMED = 1;
    uint8 public constant PAID = 2;

    /// @notice A job's verification pot; its terms are fixed by the first `fund` (P8: rules fixed when they apply).
    struct Pot {
        uint256 balance;
        uint256 feePerCheck;
        uint16 rateBps; // a verifier is sampled for a task iff ticket * BPS < rateBps * 2^64
        uint8 checksPerTask;
        uint64 closedAt; // when `close` saw the job no longer Active (0 = not yet)
    }

    /// @notice A task's claims: its claim window's close, its job, creation epoch and the fee its slots pay, how
    ///         many slots are held now and how many were paid (one storage word, written by the first claim).
    struct Claims {
        uint40 closesAt;
        uint40 epoch;
        uint64 jobId;
        uint96 fee;
        uint8 held;
        uint8 paid;
    }

    /// @notice A held fee slot: the verifier and its ticket for the task.
    struct Slot {
        address verifier;
        uint64 ticket;
    }

    /// @notice A verifier's key chain: the last key known on-chain and its epoch.
    struct KeyChain {
        bytes32 lastKey;
        uint64 lastEpoch;
        uint64 anchorEpoch;
    }

    IERC20 public immutable token;
    INodeRegistry public immutable registry;
    IJobViews public immutable jobs;
    /// @notice Length of a sampling epoch in seconds.
    uint64 public immutable epochSeconds;

    mapping(uint256 => Pot) public potOf;
    mapping(address => KeyChain) public chainOf;
    /// @notice Blind check commitments, by task and verifier.
    mapping(uint256 => mapping(address => bytes32)) public checkOf;
    /// @notice A verifier's claim of a task's fee (one per verifier and task): 0 none, CLAIMED (a slot held, or
    ///         displaced by a lower ticket), PAID (collected).
    mapping(uint256 => mapping(address => uint8)) public claimStateOf;
    /// @dev Each task's claims (closesAt 0: no claim yet).
    mapping(uint256 => Claims) internal _claims;
    /// @dev The fee slots a task's claims hold (the first Claims.held of them), until `collect` pays them.
    mapping(uint256 => Slot[MAX_CHECKS]) internal _slots;

    event FeesFunded(uint256 indexed jobId, uint256 amount, uint256 feePerCheck, uint8 checksPerTask, uint16 rateBps);
    event KeyChainAnchored(address indexed verifier, bytes32 head, uint64 anchorEpoch);
    event CheckCommitted(uint256 indexed taskId, address indexed verifier);
    event CheckClaimed(uint256 indexed taskId, address indexed verifier, uint64 ticket, uint64 claimClosesAt);
    event CheckDisplaced(uint256 indexed taskId, address indexed verifier, address indexed by);
    event FeePaid(uint256 indexed taskId, uint256 indexed jobId, address indexed verifier, uint256 amount, uint64 epoch);
    event PotClosed(uint256 indexed jobId, uint64 refundableAt);
    event PotRefunded(uint256 indexed jobId, address indexed submitter, uint256 amount);

    constructor(IERC20 token_, INodeRegistry registry_, IJobViews jobs_, uint64 epochSeconds_) {
        if (address(token_) == address(0)) revert ZeroAddress("token");
        if (address(registry_) == address(0)) revert ZeroAddress("registry");
        if (address(jobs_) == address(0)) revert ZeroAddress("jobs");
        if (epochSeconds_ == 0 || epochSeconds_ > 30 days) {
            revert ParameterOutOfRange("epochSeconds", epochSeconds_, 1, 30 days);
        }
        token = token_;
        registry = registry_;
        jobs = jobs_;
        epochSeconds = epochSeconds_;
    }

    // ---------------------------------------------------------------- submitters

    /// @notice Adds `amount` to the job's pot (its submitter, while the job is Active). The first call fixes the
    ///         terms: `feePerCheck` per matching blind check, at most `checksPerTask` per task, verifiers sampled at
    ///         `rateBps`; later calls only top up and must repeat the same terms.
    function fund(uint256 jobId, uint256 amount, uint256 feePerCheck, uint8 checksPerTask, uint16 rateBps)
        external
        nonReentrant
    {
        Job memory job = jobs.getJob(jobId);
        if (job.submitter != msg.sender) revert NotSubmitter(jobId, msg.sender);
        if (job.status != JobStatus.Active) revert WrongJobStatus(jobId, job.status);
        if (amount == 0) revert InvalidFeeConfig("amount", 0);
        Pot storage pot = potOf[jobId];
        if (pot.feePerCheck == 0) {
            if (feePerCheck == 0 || feePerCheck > type(uint96).max) revert InvalidFeeConfig("feePerCheck", feePerCheck);
            if (checksPerTask == 0 || checksPerTask > MAX_CHECKS) {
                revert InvalidFeeConfig("checksPerTask", checksPerTask);
            }
            if (rateBps == 0 || rateBps > BPS) revert InvalidFeeConfig("rateBps", rateBps);
            (pot.feePerCheck, pot.checksPerTask, pot.rateBps) = (feePerCheck, checksPerTask, rateBps);
        } else if (feePerCheck != pot.feePerCheck || checksPerTask != pot.checksPerTask || rateBps != pot.rateBps) {
            // INVARIANT (P8): a pot's terms never change once funded.
            revert InvalidFeeConfig("terms", feePerCheck);
        }
        pot.balance += amount;
        token.safeTransferFrom(msg.sender, address(this), amount);
        emit FeesFunded(jobId, amount, feePerCheck, checksPerTask, rateBps);
    }

    /// @notice Starts the claim grace of a job that is no longer Active (anyone).
    function close(uint256 jobId) external {
        Pot storage pot = potOf[jobId];
        if (pot.feePerCheck == 0) revert NotFunded(jobId);
        Job memory job = jobs.getJob(jobId);
        if (job.status == JobStatus.Active) revert WrongJobStatus(jobId, job.status);
        if (pot.closedAt == 0) {
            pot.closedAt = uint64(block.timestamp);
            emit PotClosed(jobId, refundableAt(jobId));
        }
    }

    /// @notice Returns what is left of the pot to the submitter once the claim grace after `close` has passed.
    function refund(uint256 jobId) external nonReentrant {
        Pot storage pot = potOf[jobId];
        Job memory job = jobs.getJob(jobId);
        if (job.submitter != msg.sender) revert NotSubmitter(jobId, msg.sender);
        uint64 at = refundableAt(jobId);
        // INVARIANT: a fee that can still be claimed is never refunded.
        if (pot.closedAt == 0 || block.timestamp < at) revert ClaimGraceRunning(jobId, at);
        uint256 amount = pot.balance;
        pot.balance = 0;
        if (amount != 0) token.safeTransfer(msg.sender, amount);
        emit PotRefunded(jobId, msg.sender, amount);
    }

    // ---------------------------------------------------------------- verifiers

    /// @notice Anchors (or re-anchors) the caller's key chain at `head`; its keys serve tasks created after this epoch.
    function anchor(bytes32 head) external {
        _onlyVerifier(msg.sender);
        if (head == bytes32(0)) revert InvalidFeeConfig("head", 0);
        uint64 e = currentEpoch();
        chainOf[msg.sender] = KeyChain({lastKey: head, lastEpoch: e, anchorEpoch: e});
        emit KeyChainAnchored(msg.sender, head, e);
    }

    /// @notice Commits a blind check of `taskId`: keccak256(abi.encode(taskId, finalHash, salt, msg.sender)), only
    ///         while no result of the task is public or pending: before the result floor of every drawn slot (the
    ///         job's declared work after its draw). A later commit replaces an earlier one (still blind).
    function commitCheck(uint256 taskId, bytes32 commitment) external {
        _onlyVerifier(msg.sender);
        if (commitment == bytes32(0)) revert CommitmentMismatch(taskId, msg.sender);
        if (chainOf[msg.sender].lastKey == bytes32(0)) revert NoKeyChain(msg.sender);
        Task memory t = jobs.getTask(taskId);
        if (potOf[t.jobId].feePerCheck == 0) revert NotFunded(t.jobId);
        Replica[] memory reps = jobs.getReplicas(taskId);
        // INVARIANT (P5): a check is committed blind: no result of the task can be read yet.
        if (t.status != TaskStatus.Open && t.status != TaskStatus.Assigned) revert ResultPublic(taskId, t.status);
        Job memory job = jobs.getJob(t.jobId);
        for (uint256 s = 0; s < reps.length; ++s) {
            ReplicaStatus st = reps[s].status;
            if (st == ReplicaStatus.Revealed) revert ResultPublic(taskId, t.status);
            // INVARIANT (issue 23): nor pending. A result leaves a slot only from its floor on (TaskMachine), so a
            // check lands before every drawn slot's floor, strictly: a copier cannot read a pending submitResult or
            // reveal from the mempool and land its check ahead of it in the same block.
            if (st == ReplicaStatus.Committed) revert CheckTooLate(taskId, 0);
            if (st == ReplicaStatus.Assigned) {
                uint64 notBefore = reps[s].deadline - job.executionWindow + job.resultFloor;
                if (block.timestamp >= notBefore) revert CheckTooLate(taskId, notBefore);
            }
            // INVARIANT: a replica is never paid for checking its own task.
            if (reps[s].node == msg.sender) revert OwnTask(taskId, msg.sender);
        }
        checkOf[taskId][msg.sender] = commitment;
        emit CheckCommitted(taskId, msg.sender);
    }

    /// @notice Claims a fee slot for a blind check that matched the accepted result, revealing the epoch key that
    ///         makes the caller's ticket for the task. The first claim opens the task's claim window; a claim holds a
    ///         slot while the task has a free one, else displaces the highest ticket held if its own is lower.
    function claim(uint256 taskId, bytes32 epochKey, bytes32 finalHash, bytes32 salt) external nonReentrant {
        Task memory t = jobs.getTask(taskId);
        Pot storage pot = potOf[t.jobId];
        if (pot.feePerCheck == 0) revert NotFunded(t.jobId);
        if (claimStateOf[taskId][msg.sender] != 0) revert AlreadyClaimed(taskId, msg.sender);
        bytes32 c = checkOf[taskId][msg.sender];
        if (c == bytes32(0) || c != keccak256(abi.encode(taskId, finalHash, salt, msg.sender))) {
            revert CommitmentMismatch(taskId, msg.sender);
        }
        if (t.status != TaskStatus.Accepted) revert TaskNotAccepted(taskId, t.status);
        Replica[] memory reps = jobs.getReplicas(taskId);
        for (uint256 s = 0; s < reps.length; ++s) {
            // INVARIANT: a replica is never paid for checking its own task (also one drawn after it committed a check).
            if (reps[s].node == msg.sender) revert OwnTask(taskId, msg.sender);
        }
        bytes32 accepted = _acceptedFinal(reps, t);
        // INVARIANT (P5): only a check that reproduced the accepted result is paid.
        if (finalHash != accepted) revert ResultMismatch(taskId, finalHash, accepted);
        uint64 e = epochOf(t.createdAt);
        _advanceChain(taskId, e, epochKey);
        uint64 ticket = ticketOf(epochKey, taskId);
        // INVARIANT (P5): only a verifier its private ticket sampled is paid.
        if (uint256(ticket) * BPS >= uint256(pot.rateBps) << 64) revert NotSampled(taskId, msg.sender, ticket);
        Claims memory cl = _claims[taskId];
        if (cl.closesAt == 0) {
            // timestamps and epochs < 2^40, job ids < 2^64 (sequential), pot.feePerCheck < 2^96 (fund)
            uint256 closes = block.timestamp + CLAIM_WINDOW_EPOCHS * epochSeconds;
            cl = Claims(uint40(closes), uint40(e), uint64(t.jobId), uint96(pot.feePerCheck), 0, 0);
        } else if (block.timestamp >= cl.closesAt) {
            revert ClaimWindowClosed(taskId, cl.closesAt);
        }
        claimStateOf[taskId][msg.sender] = CLAIMED;
        cl.held = _hold(taskId, t.jobId, pot, cl.held, ticket);
        _claims[taskId] = cl;
        emit CheckClaimed(taskId, msg.sender, ticket, cl.closesAt);
    }

    /// @notice Pays the holders of a task's fee slots once its claim window has closed (anyone).
    function collect(uint256 taskId) external nonReentrant {
        Claims storage cl = _claims[taskId];
        (uint40 closes, uint256 held) = (cl.closesAt, cl.held);
        if (closes == 0 || block.timestamp < closes || held == 0) revert NothingToCollect(taskId, closes);
        (cl.held, cl.paid) = (0, uint8(held)); // INVARIANT: a task's slots are paid once
        (uint256 jobId, uint256 fee, uint64 epoch) = (cl.jobId, cl.fee, cl.epoch);
        Slot[MAX_CHECKS] storage slots = _slots[taskId];
        for (uint256 i = 0; i < held; ++i) {
            address v = slots[i].verifier;
            delete slots[i];
            claimStateOf[taskId][v] = PAID;
            token.safeTransfer(v, fee);
            emit FeePaid(taskId, jobId, v, fee, epoch);
        }
    }

    /// @notice The fee slots a task's claims hold now (verifiers and their tickets; empty once collected).
    function slotsOf(uint256 taskId) external view returns (Slot[] memory held) {
        held = new Slot[](_claims[taskId].held);
        for (uint256 i = 0; i < held.length; ++i) {
            held[i] = _slots[taskId][i];
        }
    }

    /// @notice When the task's claim window closes (0: no claim yet).
    function claimClosesAt(uint256 taskId) external view returns (uint64) {
        return _claims[taskId].closesAt;
    }

    /// @notice Fees paid for the task.
    function checksPaid(uint256 taskId) external view returns (uint8) {
        return _claims[taskId].paid;
    }

    // ---------------------------------------------------------------- views

    function currentEpoch() public view returns (uint64) {
        return uint64(block.timestamp) / epochSeconds;
    }

    function epochOf(uint64 timestamp) public view returns (uint64) {
        return timestamp / epochSeconds;
    }

    /// @notice A verifier's lottery number for a task, from its epoch key: sampled iff below rateBps/BPS of 2^64.
    function ticketOf(bytes32 epochKey, uint256 taskId) public pure returns (uint64) {
        return uint64(bytes8(keccak256(abi.encode(epochKey, taskId))));
    }

    /// @notice The earliest time `refund` can succeed (0 while the job has not been closed).
    function refundableAt(uint256 jobId) public view returns (uint64) {
        uint64 closedAt = potOf[jobId].closedAt;
        if (closedAt == 0) return 0;
        return (epochOf(closedAt) + REVEAL_DELAY_EPOCHS + CLAIM_GRACE_EPOCHS) * epochSeconds;
    }

    /// @notice The accepted task's final hash: an Accepted replica's, else the task record's (a dispute winner's).
    function acceptedFinal(uint256 taskId, Task memory t) public view returns (bytes32) {
        return _acceptedFinal(jobs.getReplicas(taskId), t);
    }

    function _acceptedFinal(Replica[] memory reps, Task memory t) internal pure returns (bytes32) {
        for (uint256 s = 0; s < reps.length; ++s) {
            if (reps[s].status == ReplicaStatus.Accepted) return reps[s].finalHash;
        }
        return t.finalHash;
    }

    // ---------------------------------------------------------------- internals

    function _onlyVerifier(address who) internal view {
        if (registry.rolesOf(who) & ROLE_VERIFIER == 0 || registry.getNode(who).stake == 0) revert NotVerifier(who);
    }

    /// @dev Puts the caller's claim with `ticket` in a fee slot of the task, `held` of which are taken: a free one
    ///      (its fee reserved from the pot), else the slot of the highest ticket held, if `ticket` is lower (the
    ///      reserved fee passes to it). Returns how many are held now.
    function _hold(uint256 taskId, uint256 jobId, Pot storage pot, uint8 held, uint64 ticket)
        internal
        returns (uint8)
    {
        Slot[MAX_CHECKS] storage slots = _slots[taskId];
        // INVARIANT: at most checksPerTask fees per task, and never more than the pot holds.
        if (held < pot.checksPerTask) {
            if (pot.balance < pot.feePerCheck) revert PotEmpty(jobId);
            pot.balance -= pot.feePerCheck;
            slots[held] = Slot(msg.sender, ticket);
            return held + 1;
        }
        uint256 worst = 0;
        for (uint256 i = 1; i < held; ++i) {
            if (slots[i].ticket > slots[worst].ticket) worst = i;
        }
        // INVARIANT (issue 23): the slots go to the lowest tickets that claimed in the window, not the earliest.
        if (ticket >= slots[worst].ticket) revert ChecksExhausted(taskId, pot.checksPerTask);
        emit CheckDisplaced(taskId, slots[worst].verifier, msg.sender);
        slots[worst] = Slot(msg.sender, ticket);
        return held;
    }

    /// @dev Checks `epochKey` is the caller's key for epoch `e` and moves the chain to it.
    function _advanceChain(uint256 taskId, uint64 e, bytes32 epochKey) internal {
        uint64 allowedFrom = e + REVEAL_DELAY_EPOCHS;
        // INVARIANT (P5): a key is revealed only once every task it decides has had its execution epoch.
        if (currentEpoch() < allowedFrom) revert KeyRevealTooEarly(taskId, e, allowedFrom);
        KeyChain storage ch = chainOf[msg.sender];
        if (ch.lastKey == bytes32(0)) revert NoKeyChain(msg.sender);
        // INVARIANT: a key anchored in (or after) the task's epoch decides nothing for it; claims go in epoch order.
        if (e <= ch.anchorEpoch || e < ch.lastEpoch) revert EpochOutOfOrder(taskId, e, ch.anchorEpoch, ch.lastEpoch);
        uint64 gap = e - ch.lastEpoch;
        if (gap > MAX_EPOCH_GAP) revert BadEpochKey(msg.sender, e);
        bytes32 h = epochKey;
        for (uint64 i = 0; i < gap; ++i) {
            h = keccak256(abi.encodePacked(h));
        }
        if (h != ch.lastKey) revert BadEpochKey(msg.sender, e);
        (ch.lastKey, ch.lastEpoch) = (epochKey, e);
    }
}
