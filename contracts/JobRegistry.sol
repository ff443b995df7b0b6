// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Ownable} from "@openzeppelin/contracts/access/Ownable.sol";
import {ReentrancyGuard} from "@openzeppelin/contracts/utils/ReentrancyGuard.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

import {IJobRegistry} from "./interfaces/IJobRegistry.sol";
import {INodeRegistry} from "./interfaces/INodeRegistry.sol";
import {IVerityToken} from "./interfaces/IVerityToken.sol";
import {Merkle} from "./lib/Merkle.sol";
import {
    Job,
    JobStatus,
    Task,
    TaskKind,
    TaskStatus,
    Replica,
    ReplicaStatus,
    TaskContext,
    PostJobParams,
    DEVICE_CUDA,
    BPS
} from "./types/VerityTypes.sol";
import {ZeroAddress, ParameterOutOfRange, NothingToWithdraw} from "./errors/CommonErrors.sol";
import "./errors/JobRegistryErrors.sol";

/// @title JobRegistry
/// @notice Posts jobs with escrow, splits them into rounds of TRAIN tasks plus one AGGREGATE task, draws replicas
///         from the NodeRegistry, runs commit-reveal (replication 2) or optimistic submission (replication 1),
///         accepts results, advances rounds and credits payments (pull).
/// @dev Lifecycle and encodings: docs/protocol.md. Every loop is bounded by MAX_SHARDS or MAX_REPLICATION.
contract JobRegistry is IJobRegistry, Ownable, ReentrancyGuard {
    using SafeERC20 for IERC20;

    /// @notice Maximum shards per job.
    uint32 public constant MAX_SHARDS = 32;
    /// @notice Maximum rounds per job.
    uint32 public constant MAX_ROUNDS = 256;
    /// @notice Maximum replicas per task (v1: 2; a dispute is a two-party game).
    uint8 public constant MAX_REPLICATION = 2;
    /// @notice Maximum checkpoints per trace and steps per checkpoint segment (keeps proofs <= 20 deep).
    uint32 public constant MAX_TRACE = 1 << 20;
    /// @notice Nodes remembered per task as "never again for this task" (late or dispute losers); a ring buffer.
    uint8 public constant MAX_BANNED = 4;
    /// @notice Largest value accepted for any window or timeout.
    uint64 public constant MAX_WINDOW = 7 days;

    /// @notice Payment, escrow and stake token.
    IVerityToken public immutable token;
    /// @notice Node registry (stake, reputation, selection).
    INodeRegistry public immutable registry;
    /// @notice The DisputeGame allowed to call the dispute hooks.
    address public disputeGame;

    /// @notice Default seconds a replica has from assignment to commit (or submit, with replication 1).
    uint64 public defaultExecutionWindow = 120;
    /// @notice Default seconds each replica has to reveal once all replicas committed.
    uint64 public defaultRevealWindow = 60;
    /// @notice Default seconds a single result can be challenged.
    uint64 public defaultChallengeWindow = 30;
    /// @notice Seconds a slot may stay empty before the submitter may cancel the job.
    uint64 public assignmentTimeout = 300;
    /// @notice Share of the task stake burned when a replica misses a deadline, in basis points.
    uint256 public lateSlashBps = 1_000;

    /// @notice Number of jobs posted (ids run 1..jobCount).
    uint256 public jobCount;
    /// @notice Number of tasks created (ids run 1..taskCount).
    uint256 public taskCount;
    /// @notice Payment credits waiting to be withdrawn.
    mapping(address => uint256) public credits;
    /// @notice Sum of all credits (for accounting checks).
    uint256 public totalCredits;
    /// @notice Sum of all job escrows.
    uint256 public totalEscrow;

    mapping(uint256 => Job) internal _jobs;
    mapping(uint256 => Task) internal _tasks;
    /// @dev Storage form of a replica slot (getReplicas / getReplica rebuild the public Replica struct).
    ///      `sharesTrace` / `sharesCid`: this slot revealed the same (root, finalHash) / resultCid as the other slot,
    ///      which stores them; this one leaves them zero (saves fresh slots when replicas agree). Set only when the
    ///      other slot has already revealed, i.e. on a task's last reveal; with equal finals the task is then accepted
    ///      at once and neither slot is ever drawn again, so the other slot's values stay in place.
    struct ReplicaRecord {
        address node;
        ReplicaStatus status;
        uint64 deadline;
        bool sharesTrace;
        bool sharesCid;
        bytes32 commitment;
        bytes32 root;
        bytes32 finalHash;
        bytes32 resultCid;
    }

    mapping(uint256 => ReplicaRecord[MAX_REPLICATION]) internal _replicas;
    mapping(uint256 => mapping(uint32 => mapping(uint32 => uint256))) internal _taskIds;
    mapping(uint256 => address[MAX_BANNED]) internal _banned;
    mapping(uint256 => uint8) internal _bannedCount;

    modifier onlyDisputeGame() {
        if (msg.sender != disputeGame || msg.sender == address(0)) revert NotDisputeGame(msg.sender);
        _;
    }

    constructor(IVerityToken token_, INodeRegistry registry_) Ownable(msg.sender) {
        if (address(token_) == address(0)) revert ZeroAddress("token");
        if (address(registry_) == address(0)) revert ZeroAddress("registry");
        token = token_;
        registry = registry_;
    }

    // ---------------------------------------------------------------- owner

    /// @notice Wires the DisputeGame. Setting the current value again is a no-op.
    function setDisputeGame(address game) external onlyOwner {
        if (game == address(0)) revert ZeroAddress("game");
        if (game == disputeGame) return;
        disputeGame = game;
        emit DisputeGameSet(game);
    }

    /// @notice Sets the default execution, reveal and challenge windows (seconds).
    function setDefaultWindows(uint64 execution, uint64 revealSeconds, uint64 challenge) external onlyOwner {
        _checkWindow("executionWindow", execution);
        _checkWindow("revealWindow", revealSeconds);
        _checkWindow("challengeWindow", challenge);
        defaultExecutionWindow = execution;
        defaultRevealWindow = revealSeconds;
        defaultChallengeWindow = challenge;
        emit ParameterSet("executionWindow", execution);
        emit ParameterSet("revealWindow", revealSeconds);
        emit ParameterSet("challengeWindow", challenge);
    }

    /// @notice Sets the assignment timeout (seconds).
    function setAssignmentTimeout(uint64 value) external onlyOwner {
        _checkWindow("assignmentTimeout", value);
        assignmentTimeout = value;
        emit ParameterSet("assignmentTimeout", value);
    }

    /// @notice Sets the late slash in basis points of the task stake.
    function setLateSlashBps(uint256 value) external onlyOwner {
        if (value > BPS) revert ParameterOutOfRange("lateSlashBps", value, 0, BPS);
        lateSlashBps = value;
        emit ParameterSet("lateSlashBps", value);
    }

    // ---------------------------------------------------------------- submitter

    /// @notice Posts a job, pulls escrow = paymentPerTask * replication * (shards + 1) * rounds, creates round 0's
    ///         shard tasks and draws their replicas.
    /// @return jobId The new job's id.
    function postJob(PostJobParams calldata p) external nonReentrant returns (uint256 jobId) {
        _validate(p);
        uint256 escrow = p.paymentPerTask * p.replication * (uint256(p.shards) + 1) * p.rounds;
        jobId = ++jobCount;
        Job storage job = _jobs[jobId];
        job.submitter = msg.sender;
        job.status = JobStatus.Active;
        job.replication = p.replication;
        job.deviceClass = p.deviceClass;
        job.shards = p.shards;
        job.rounds = p.rounds;
        job.stepsPerRound = p.stepsPerRound;
        job.checkpointInterval = p.checkpointInterval;
        job.minMemoryMb = p.minMemoryMb;
        job.profileBit = p.profileBit;
        job.executionWindow = p.executionWindow == 0 ? defaultExecutionWindow : p.executionWindow;
        job.revealWindow = p.revealWindow == 0 ? defaultRevealWindow : p.revealWindow;
        job.challengeWindow = p.challengeWindow == 0 ? defaultChallengeWindow : p.challengeWindow;
        job.postedAt = uint64(block.timestamp);
        job.manifestCid = p.manifestCid;
        job.manifestHash = p.manifestHash;
        job.roundInput = p.initialStateHash;
        job.paymentPerTask = p.paymentPerTask;
        job.stakePerReplica = p.stakePerReplica;
        job.escrow = escrow;
        totalEscrow += escrow;
        emit JobPosted(jobId, msg.sender, p.manifestCid, p.manifestHash, escrow);
        IERC20(address(token)).safeTransferFrom(msg.sender, address(this), escrow);
        _createRoundTasks(jobId);
    }

    /// @notice Cancels an active job and refunds all escrow not yet credited. Allowed (a) before any slot was ever
    ///         assigned or (b) when a task of the current round has had an empty slot for over `assignmentTimeout`.
    ///         Tasks in a challenge window or dispute must be settled first.
    function cancelJob(uint256 jobId) external nonReentrant {
        Job storage job = _jobs[jobId];
        if (job.status != JobStatus.Active) revert JobNotActive(jobId, job.status);
        if (msg.sender != job.submitter) revert NotSubmitter(jobId, msg.sender);
        bool starved = false;
        uint32 round = job.currentRound;
        for (uint32 i = 0; i <= job.shards; ++i) {
            uint256 taskId = _taskIds[jobId][round][i];
            if (taskId == 0) continue;
            Task storage t = _tasks[taskId];
            if (t.status == TaskStatus.Revealed || t.status == TaskStatus.Contested) {
                revert JobHasPendingTask(jobId, taskId, t.status);
            }
            if (t.status == TaskStatus.Open && block.timestamp > uint256(t.openSince) + assignmentTimeout) {
                starved = true;
            }
        }
        if (job.everAssigned && !starved) revert CancelNotAllowed(jobId);
        for (uint32 i = 0; i <= job.shards; ++i) {
            uint256 taskId = _taskIds[jobId][round][i];
            if (taskId == 0 || _tasks[taskId].status == TaskStatus.Accepted) continue;
            _tasks[taskId].status = TaskStatus.Cancelled;
            _releaseAll(taskId, job.replication, job.stakePerReplica);
        }
        uint256 refund = job.escrow;
        job.escrow = 0;
        totalEscrow -= refund;
        job.status = JobStatus.Cancelled;
        emit JobCancelled(jobId, refund);
        IERC20(address(token)).safeTransfer(job.submitter, refund);
    }

    /// @notice Returns the unspent escrow of a completed job to its submitter.
    function reclaimEscrow(uint256 jobId) external nonReentrant {
        Job storage job = _jobs[jobId];
        if (job.status != JobStatus.Completed) revert JobNotCompleted(jobId, job.status);
        if (msg.sender != job.submitter) revert NotSubmitter(jobId, msg.sender);
        uint256 amount = job.escrow;
        if (amount == 0) revert NothingToWithdraw(msg.sender);
        job.escrow = 0;
        totalEscrow -= amount;
        emit EscrowReclaimed(jobId, amount);
        IERC20(address(token)).safeTransfer(msg.sender, amount);
    }

    // ---------------------------------------------------------------- solvers

    /// @notice Draws nodes into the empty slots of an Open task (permissionless retry).
    function assign(uint256 taskId) external nonReentrant {
        Task storage t = _activeTask(taskId);
        if (t.status != TaskStatus.Open) revert UnexpectedTaskStatus(taskId, t.status);
        if (_fillSlots(taskId) == 0) revert NoEligibleNode(taskId);
    }

    /// @notice Commits keccak256(abi.encode(root, finalHash, salt, msg.sender)) for a replicated task.
    function commit(uint256 taskId, bytes32 commitment) external {
        Task storage t = _activeTask(taskId);
        Job storage job = _jobs[t.jobId];
        if (job.replication < 2) revert WrongVerificationMode(taskId, job.replication);
        if (t.status != TaskStatus.Open && t.status != TaskStatus.Assigned) {
            revert UnexpectedTaskStatus(taskId, t.status);
        }
        uint8 slot = _slotOf(taskId, msg.sender, ReplicaStatus.Assigned, job.replication);
        ReplicaRecord storage r = _replicas[taskId][slot];
        if (block.timestamp > r.deadline) revert DeadlinePassed(taskId, slot, r.deadline);
        r.commitment = commitment;
        r.status = ReplicaStatus.Committed;
        r.deadline = 0;
        emit ResultCommitted(taskId, msg.sender, slot);
        if (_allAtLeastCommitted(taskId, job.replication)) {
            uint64 deadline = uint64(block.timestamp) + job.revealWindow;
            for (uint8 s = 0; s < job.replication; ++s) {
                _replicas[taskId][s].deadline = deadline;
            }
            emit RevealOpened(taskId, deadline);
        }
    }

    /// @notice Reveals a committed result once every replica has committed. Proves leaf 0 == the task's input hash
    ///         and leaf n == finalHash. The last reveal accepts the task (equal finals) or contests it.
    function reveal(
        uint256 taskId,
        bytes32 root,
        bytes32 finalHash,
        uint32 n,
        bytes32 resultCid,
        bytes32 salt,
        bytes32[] calldata proof0,
        bytes32[] calldata proofN
    ) external nonReentrant {
        (uint8 slot, uint8 replication) = _checkReveal(taskId, root, finalHash, salt);
        _checkTrace(taskId, root, finalHash, n, proof0, proofN);
        _recordResult(taskId, slot, root, finalHash, resultCid);
        _settleReveals(taskId, replication);
    }

    /// @notice Submits the result of an optimistic task (replication 1); opens its challenge window.
    function submitResult(
        uint256 taskId,
        bytes32 root,
        bytes32 finalHash,
        uint32 n,
        bytes32 resultCid,
        bytes32[] calldata proof0,
        bytes32[] calldata proofN
    ) external {
        Task storage t = _activeTask(taskId);
        Job storage job = _jobs[t.jobId];
        if (job.replication != 1) revert WrongVerificationMode(taskId, job.replication);
        if (t.status != TaskStatus.Assigned) revert UnexpectedTaskStatus(taskId, t.status);
        ReplicaRecord storage r = _replicas[taskId][0];
        if (r.node != msg.sender || r.status != ReplicaStatus.Assigned) {
            revert NotReplica(taskId, msg.sender, ReplicaStatus.Assigned);
        }
        if (block.timestamp > r.deadline) revert DeadlinePassed(taskId, 0, r.deadline);
        _checkTrace(taskId, root, finalHash, n, proof0, proofN);
        _recordResult(taskId, 0, root, finalHash, resultCid);
        _openChallengeWindow(taskId, job.challengeWindow);
    }

    /// @notice Accepts a Revealed task once its challenge window has passed (anyone).
    function finalize(uint256 taskId) external nonReentrant {
        Task storage t = _activeTask(taskId);
        if (t.status != TaskStatus.Revealed) revert UnexpectedTaskStatus(taskId, t.status);
        if (block.timestamp <= t.challengeDeadline) revert ChallengeWindowOpen(taskId, t.challengeDeadline);
        uint8 s = _revealedSlot(taskId);
        _accept(taskId, _traceOf(taskId, s).finalHash, _cidOf(taskId, s));
    }

    /// @notice Reports a replica past its commit/submit/reveal deadline (anyone): burns `lateSlashBps` of its task
    ///         stake, unlocks the rest, counts late++, and draws the slot again. If another replica already revealed,
    ///         that result waits out a challenge window instead (so a newcomer can't copy it).
    function reportLate(uint256 taskId, uint8 slot) external nonReentrant {
        Task storage t = _activeTask(taskId);
        Job storage job = _jobs[t.jobId];
        if (slot >= job.replication) revert InvalidSlot(taskId, slot);
        if (t.status != TaskStatus.Open && t.status != TaskStatus.Assigned) {
            revert UnexpectedTaskStatus(taskId, t.status);
        }
        ReplicaRecord storage r = _replicas[taskId][slot];
        bool pending = r.status == ReplicaStatus.Assigned || r.status == ReplicaStatus.Committed;
        if (!pending || r.deadline == 0 || block.timestamp <= r.deadline) {
            revert SlotNotLate(taskId, slot, r.status, r.deadline);
        }
        address node = r.node;
        uint256 slashed = (job.stakePerReplica * lateSlashBps) / BPS;
        r.status = ReplicaStatus.Late;
        r.deadline = 0;
        _ban(taskId, node);
        emit ReplicaLate(taskId, node, slot, slashed);

        if (slashed > 0) registry.slash(node, slashed, address(this));
        registry.unlock(node, job.stakePerReplica - slashed);
        registry.recordLate(node);
        if (slashed > 0) token.burn(slashed);

        bool otherRevealed = false;
        for (uint8 s = 0; s < job.replication; ++s) {
            ReplicaRecord storage o = _replicas[taskId][s];
            if (o.status == ReplicaStatus.Revealed) otherRevealed = true;
            // A partner still inside its reveal window waits for the new replica to commit.
            if (o.status == ReplicaStatus.Committed && o.deadline >= block.timestamp) o.deadline = 0;
        }
        if (otherRevealed) {
            _openChallengeWindow(taskId, job.challengeWindow);
        } else {
            _fillSlots(taskId);
        }
    }

    /// @notice Withdraws the caller's payment credits.
    function withdrawPayment() external nonReentrant {
        uint256 amount = credits[msg.sender];
        if (amount == 0) revert NothingToWithdraw(msg.sender);
        credits[msg.sender] = 0;
        totalCredits -= amount;
        emit PaymentWithdrawn(msg.sender, amount);
        IERC20(address(token)).safeTransfer(msg.sender, amount);
    }

    // ---------------------------------------------------------------- dispute hooks

    /// @inheritdoc IJobRegistry
    function onChallenge(uint256 taskId) external onlyDisputeGame {
        Task storage t = _activeTask(taskId);
        if (t.status != TaskStatus.Revealed) revert UnexpectedTaskStatus(taskId, t.status);
        if (block.timestamp > t.challengeDeadline) revert ChallengeWindowClosed(taskId, t.challengeDeadline);
        t.status = TaskStatus.Contested;
        emit TaskContested(taskId);
    }

    /// @inheritdoc IJobRegistry
    function onDisputeResolved(uint256 taskId, address winner, address loser, bytes32 finalHash, bytes32 resultCid)
        external
        onlyDisputeGame
    {
        Task storage t = _activeTask(taskId);
        if (t.status != TaskStatus.Contested) revert UnexpectedTaskStatus(taskId, t.status);
        Job storage job = _jobs[t.jobId];
        bool winnerIsReplica = false;
        for (uint8 s = 0; s < job.replication; ++s) {
            ReplicaRecord storage r = _replicas[taskId][s];
            if (r.status != ReplicaStatus.Revealed) continue;
            if (r.node == loser) {
                r.status = ReplicaStatus.Slashed;
                _ban(taskId, loser);
            } else if (r.node == winner) {
                winnerIsReplica = true;
            }
        }
        if (!winnerIsReplica) {
            // An optimistic challenger won: its result is the task's, and it is paid for the work.
            _credit(job, winner);
            registry.recordCompleted(winner);
        }
        _accept(taskId, finalHash, resultCid);
    }

    /// @inheritdoc IJobRegistry
    function onDisputeBothLost(uint256 taskId) external onlyDisputeGame {
        _reopen(taskId, ReplicaStatus.Slashed);
    }

    /// @inheritdoc IJobRegistry
    function onDisputeVoided(uint256 taskId) external onlyDisputeGame {
        _reopen(taskId, ReplicaStatus.Voided);
    }

    // ---------------------------------------------------------------- views

    /// @inheritdoc IJobRegistry
    function getJob(uint256 jobId) external view returns (Job memory) {
        return _jobs[jobId];
    }

    /// @inheritdoc IJobRegistry
    function getTask(uint256 taskId) external view returns (Task memory t) {
        t = _tasks[taskId];
        (t.finalHash, t.resultCid) = _taskResult(taskId);
    }

    /// @inheritdoc IJobRegistry
    function getReplicas(uint256 taskId) external view returns (Replica[] memory reps) {
        uint8 replication = _jobs[_tasks[taskId].jobId].replication;
        reps = new Replica[](replication);
        for (uint8 s = 0; s < replication; ++s) {
            reps[s] = _replicaView(taskId, s);
        }
    }

    /// @notice One replica slot of a task.
    function getReplica(uint256 taskId, uint8 slot) external view returns (Replica memory) {
        return _replicaView(taskId, slot);
    }

    /// @notice The task id of (jobId, round, index); index == shards is the round's AGGREGATE task.
    function taskOf(uint256 jobId, uint32 round, uint32 index) external view returns (uint256 taskId) {
        taskId = _taskIds[jobId][round][index];
        if (taskId == 0) revert TaskIndexNotFound(jobId, round, index);
    }

    /// @notice Escrow a job with these parameters needs.
    function escrowFor(uint256 paymentPerTask, uint8 replication, uint32 shards, uint32 rounds)
        external
        pure
        returns (uint256)
    {
        return paymentPerTask * replication * (uint256(shards) + 1) * rounds;
    }

    /// @notice Nodes that may never be drawn again for this task (late or dispute losers).
    function bannedOf(uint256 taskId) external view returns (address[MAX_BANNED] memory) {
        return _banned[taskId];
    }

    /// @inheritdoc IJobRegistry
    function taskContext(uint256 taskId) external view returns (TaskContext memory c) {
        Task storage t = _tasks[taskId];
        if (t.status == TaskStatus.None) revert TaskNotFound(taskId);
        Job storage job = _jobs[t.jobId];
        c.jobId = t.jobId;
        c.kind = t.kind;
        c.status = t.status;
        c.n = t.n;
        c.k = t.kind == TaskKind.Train ? job.checkpointInterval : 1;
        c.challengeDeadline = t.challengeDeadline;
        c.inputHash = t.inputHash;
        c.stakePerReplica = job.stakePerReplica;
        c.replication = job.replication;
        c.deviceClass = job.deviceClass;
        c.minMemoryMb = job.minMemoryMb;
        c.profileBit = job.profileBit;
    }

    // ---------------------------------------------------------------- internals: validation

    function _checkWindow(bytes32 name, uint64 value) internal pure {
        if (value == 0 || value > MAX_WINDOW) revert ParameterOutOfRange(name, value, 1, MAX_WINDOW);
    }

    function _validate(PostJobParams calldata p) internal pure {
        if (p.manifestCid == bytes32(0)) revert InvalidJobParameter("manifestCid", 0);
        if (p.shards == 0 || p.shards > MAX_SHARDS) revert InvalidJobParameter("shards", p.shards);
        if (p.rounds == 0 || p.rounds > MAX_ROUNDS) revert InvalidJobParameter("rounds", p.rounds);
        if (p.checkpointInterval == 0 || p.checkpointInterval > MAX_TRACE) {
            revert InvalidJobParameter("checkpointInterval", p.checkpointInterval);
        }
        if (p.stepsPerRound == 0 || p.stepsPerRound % p.checkpointInterval != 0) {
            revert InvalidJobParameter("stepsPerRound", p.stepsPerRound);
        }
        if (p.stepsPerRound / p.checkpointInterval > MAX_TRACE) {
            revert InvalidJobParameter("stepsPerRound", p.stepsPerRound);
        }
        if (p.paymentPerTask == 0) revert InvalidJobParameter("paymentPerTask", 0);
        if (p.replication == 0 || p.replication > MAX_REPLICATION) {
            revert InvalidJobParameter("replication", p.replication);
        }
        if (p.stakePerReplica == 0) revert InvalidJobParameter("stakePerReplica", 0);
        if (p.deviceClass > DEVICE_CUDA) revert InvalidJobParameter("deviceClass", p.deviceClass);
        if (p.profileBit == 0 || (p.profileBit & (p.profileBit - 1)) != 0) {
            revert InvalidJobParameter("profileBit", p.profileBit);
        }
        if (p.executionWindow > MAX_WINDOW) revert InvalidJobParameter("executionWindow", p.executionWindow);
        if (p.revealWindow > MAX_WINDOW) revert InvalidJobParameter("revealWindow", p.revealWindow);
        if (p.challengeWindow > MAX_WINDOW) revert InvalidJobParameter("challengeWindow", p.challengeWindow);
    }

    function _activeTask(uint256 taskId) internal view returns (Task storage t) {
        t = _tasks[taskId];
        if (t.status == TaskStatus.None) revert TaskNotFound(taskId);
        Job storage job = _jobs[t.jobId];
        if (job.status != JobStatus.Active) revert JobNotActive(t.jobId, job.status);
    }

    /// @dev Caller holds a Committed slot whose reveal window is open, and the commitment opens to these values.
    function _checkReveal(uint256 taskId, bytes32 root, bytes32 finalHash, bytes32 salt)
        internal
        view
        returns (uint8 slot, uint8 replication)
    {
        Task storage t = _activeTask(taskId);
        replication = _jobs[t.jobId].replication;
        if (replication < 2) revert WrongVerificationMode(taskId, replication);
        if (t.status != TaskStatus.Assigned) revert UnexpectedTaskStatus(taskId, t.status);
        slot = _slotOf(taskId, msg.sender, ReplicaStatus.Committed, replication);
        ReplicaRecord storage r = _replicas[taskId][slot];
        if (r.deadline == 0) revert RevealNotOpen(taskId);
        if (block.timestamp > r.deadline) revert DeadlinePassed(taskId, slot, r.deadline);
        bytes32 expected = keccak256(abi.encode(root, finalHash, salt, msg.sender));
        if (expected != r.commitment) revert CommitmentMismatch(taskId, r.commitment, expected);
    }

    function _checkTrace(
        uint256 taskId,
        bytes32 root,
        bytes32 finalHash,
        uint32 n,
        bytes32[] calldata proof0,
        bytes32[] calldata proofN
    ) internal view {
        Task storage t = _tasks[taskId];
        if (n != t.n) revert WrongTraceLength(taskId, t.n, n);
        if (!Merkle.verify(root, 0, t.inputHash, proof0)) revert InvalidProof(taskId, 0, t.inputHash);
        if (!Merkle.verify(root, n, finalHash, proofN)) revert InvalidProof(taskId, n, finalHash);
    }

    // ---------------------------------------------------------------- internals: slots

    function _isEmpty(ReplicaStatus s) internal pure returns (bool) {
        return s == ReplicaStatus.None || s == ReplicaStatus.Late || s == ReplicaStatus.Slashed
            || s == ReplicaStatus.Voided;
    }

    function _slotOf(uint256 taskId, address node, ReplicaStatus expected, uint8 replication)
        internal
        view
        returns (uint8)
    {
        for (uint8 s = 0; s < replication; ++s) {
            ReplicaRecord storage r = _replicas[taskId][s];
            if (r.node == node && r.status == expected) return s;
        }
        revert NotReplica(taskId, node, expected);
    }

    function _revealedSlot(uint256 taskId) internal view returns (uint8) {
        uint8 replication = _jobs[_tasks[taskId].jobId].replication;
        for (uint8 s = 0; s < replication; ++s) {
            if (_replicas[taskId][s].status == ReplicaStatus.Revealed) return s;
        }
        revert NotReplica(taskId, address(0), ReplicaStatus.Revealed);
    }

    function _allAtLeastCommitted(uint256 taskId, uint8 replication) internal view returns (bool) {
        for (uint8 s = 0; s < replication; ++s) {
            ReplicaStatus st = _replicas[taskId][s].status;
            if (st != ReplicaStatus.Committed && st != ReplicaStatus.Revealed) return false;
        }
        return true;
    }

    function _ban(uint256 taskId, address node) internal {
        uint8 c = _bannedCount[taskId];
        _banned[taskId][c % MAX_BANNED] = node;
        _bannedCount[taskId] = c + 1;
    }

    /// @dev Draws a node for every empty slot. Returns how many were filled; sets Open/Assigned accordingly.
    function _fillSlots(uint256 taskId) internal returns (uint256 filled) {
        Task storage t = _tasks[taskId];
        Job storage job = _jobs[t.jobId];
        bool anyEmpty = false;
        for (uint8 s = 0; s < job.replication; ++s) {
            ReplicaRecord storage r = _replicas[taskId][s];
            if (!_isEmpty(r.status)) continue;
            address node = _drawSolver(taskId, s);
            if (node == address(0)) {
                anyEmpty = true;
                continue;
            }
            uint64 deadline = uint64(block.timestamp) + job.executionWindow;
            if (r.status != ReplicaStatus.None) {
                // A slot drawn again: forget the previous holder's data (a fresh slot is all zero already).
                delete _replicas[taskId][s];
            }
            r.node = node;
            r.status = ReplicaStatus.Assigned;
            r.deadline = deadline;
            job.everAssigned = true;
            ++filled;
            emit TaskAssigned(taskId, node, s, deadline);
            registry.lock(node, job.stakePerReplica);
        }
        if (anyEmpty) {
            t.status = TaskStatus.Open;
            if (t.openSince == 0) t.openSince = uint64(block.timestamp);
        } else {
            t.status = TaskStatus.Assigned;
            t.openSince = 0;
        }
    }

    /// @dev Seed = keccak(prevrandao, taskId, slot, nonce): unknown before the drawing transaction's block.
    function _drawSolver(uint256 taskId, uint8 slot) internal returns (address) {
        Task storage t = _tasks[taskId];
        Job storage job = _jobs[t.jobId];
        bytes32 seed = keccak256(abi.encode(block.prevrandao, taskId, slot, t.drawNonce));
        ++t.drawNonce;
        return registry.drawSolver(
            seed, job.deviceClass, job.minMemoryMb, job.profileBit, job.stakePerReplica, _exclusions(taskId)
        );
    }

    /// @dev Other slots' nodes, this slot's previous node, and the task's banned ring.
    function _exclusions(uint256 taskId) internal view returns (address[] memory ex) {
        uint8 replication = _jobs[_tasks[taskId].jobId].replication;
        ex = new address[](uint256(replication) + MAX_BANNED);
        uint256 c = 0;
        for (uint8 s = 0; s < replication; ++s) {
            address node = _replicas[taskId][s].node;
            if (node != address(0)) ex[c++] = node;
        }
        for (uint8 b = 0; b < MAX_BANNED; ++b) {
            address node = _banned[taskId][b];
            if (node != address(0)) ex[c++] = node;
        }
        assembly ("memory-safe") {
            mstore(ex, c)
        }
    }

    /// @dev Unlocks every replica still holding the task's stake and marks it Voided (job cancelled).
    function _releaseAll(uint256 taskId, uint8 replication, uint256 stakeAmount) internal {
        for (uint8 s = 0; s < replication; ++s) {
            ReplicaRecord storage r = _replicas[taskId][s];
            ReplicaStatus st = r.status;
            if (st == ReplicaStatus.Assigned || st == ReplicaStatus.Committed || st == ReplicaStatus.Revealed) {
                r.status = ReplicaStatus.Voided;
                registry.unlock(r.node, stakeAmount);
            }
        }
    }

    // ---------------------------------------------------------------- internals: results

    /// @dev The record that holds slot `s`'s revealed root and finalHash: its own, or the other slot's if shared.
    function _traceOf(uint256 taskId, uint8 s) internal view returns (ReplicaRecord storage r) {
        r = _replicas[taskId][s];
        if (r.sharesTrace) r = _replicas[taskId][s ^ 1];
    }

    /// @dev Slot `s`'s revealed resultCid: its own, or the other slot's if shared.
    function _cidOf(uint256 taskId, uint8 s) internal view returns (bytes32) {
        ReplicaRecord storage r = _replicas[taskId][s];
        return r.sharesCid ? _replicas[taskId][s ^ 1].resultCid : r.resultCid;
    }

    function _replicaView(uint256 taskId, uint8 s) internal view returns (Replica memory) {
        ReplicaRecord storage r = _replicas[taskId][s];
        ReplicaRecord storage tr = _traceOf(taskId, s);
        return Replica(r.node, r.status, r.deadline, r.commitment, tr.root, tr.finalHash, _cidOf(taskId, s));
    }

    /// @dev An accepted task's result: that of an Accepted replica, else the task record's (set when an optimistic
    ///      challenger won, zero before acceptance).
    function _taskResult(uint256 taskId) internal view returns (bytes32, bytes32) {
        uint8 replication = _jobs[_tasks[taskId].jobId].replication;
        for (uint8 s = 0; s < replication; ++s) {
            if (_replicas[taskId][s].status != ReplicaStatus.Accepted) continue;
            return (_traceOf(taskId, s).finalHash, _cidOf(taskId, s));
        }
        return (_tasks[taskId].finalHash, _tasks[taskId].resultCid);
    }

    function _recordResult(uint256 taskId, uint8 slot, bytes32 root, bytes32 finalHash, bytes32 resultCid) internal {
        ReplicaRecord storage r = _replicas[taskId][slot];
        // slot ^ 1 is the other slot (replication <= 2; with replication 1 it is never Revealed).
        _storeResult(r, _replicas[taskId][slot ^ 1], root, finalHash, resultCid);
        r.status = ReplicaStatus.Revealed;
        r.deadline = 0;
        emit ResultRevealed(taskId, msg.sender, slot, root, finalHash, resultCid, _tasks[taskId].n);
    }

    /// @dev Writes r's result, or only marks it shared where it equals that of the already revealed other slot `o`.
    function _storeResult(
        ReplicaRecord storage r,
        ReplicaRecord storage o,
        bytes32 root,
        bytes32 finalHash,
        bytes32 resultCid
    ) internal {
        bool otherRevealed = o.status == ReplicaStatus.Revealed;
        if (otherRevealed && o.root == root && o.finalHash == finalHash) {
            r.sharesTrace = true;
        } else {
            r.root = root;
            r.finalHash = finalHash;
        }
        if (otherRevealed && o.resultCid == resultCid) r.sharesCid = true;
        else r.resultCid = resultCid;
    }

    function _openChallengeWindow(uint256 taskId, uint64 window) internal {
        Task storage t = _tasks[taskId];
        uint64 deadline = uint64(block.timestamp) + window;
        t.status = TaskStatus.Revealed;
        t.challengeDeadline = deadline;
        emit ChallengeWindowOpened(taskId, deadline);
    }

    /// @dev After a reveal: once every replica revealed, accept (finals agree) or contest.
    function _settleReveals(uint256 taskId, uint8 replication) internal {
        bytes32 first = _traceOf(taskId, 0).finalHash;
        for (uint8 s = 0; s < replication; ++s) {
            if (_replicas[taskId][s].status != ReplicaStatus.Revealed) return;
            if (_traceOf(taskId, s).finalHash != first) {
                _tasks[taskId].status = TaskStatus.Contested;
                emit TaskContested(taskId);
                return;
            }
        }
        _accept(taskId, first, _cidOf(taskId, 0));
    }

    function _credit(Job storage job, address to) internal {
        uint256 amount = job.paymentPerTask;
        job.escrow -= amount;
        totalEscrow -= amount;
        credits[to] += amount;
        totalCredits += amount;
        emit PaymentCredited(to, amount);
    }

    /// @dev Accepts the task: pays and releases every Revealed replica with this final hash, then advances the job.
    function _accept(uint256 taskId, bytes32 finalHash, bytes32 resultCid) internal {
        Task storage t = _tasks[taskId];
        Job storage job = _jobs[t.jobId];
        t.status = TaskStatus.Accepted;
        emit TaskAccepted(taskId, finalHash, resultCid);
        bool inReplica = false;
        for (uint8 s = 0; s < job.replication; ++s) {
            ReplicaRecord storage r = _replicas[taskId][s];
            if (r.status != ReplicaStatus.Revealed || _traceOf(taskId, s).finalHash != finalHash) continue;
            r.status = ReplicaStatus.Accepted;
            inReplica = true;
            _credit(job, r.node);
            registry.unlockCompleted(r.node, job.stakePerReplica);
        }
        // The result is read from an Accepted replica (_taskResult); only an optimistic challenger's is stored here.
        if (!inReplica) {
            t.finalHash = finalHash;
            t.resultCid = resultCid;
        }
        _advance(t, finalHash, resultCid);
    }

    function _reopen(uint256 taskId, ReplicaStatus mark) internal {
        Task storage t = _activeTask(taskId);
        if (t.status != TaskStatus.Contested) revert UnexpectedTaskStatus(taskId, t.status);
        Job storage job = _jobs[t.jobId];
        for (uint8 s = 0; s < job.replication; ++s) {
            ReplicaRecord storage r = _replicas[taskId][s];
            if (r.status != ReplicaStatus.Revealed) continue;
            r.status = mark;
            _ban(taskId, r.node);
            // Slashed replicas lost their stake in the DisputeGame; voided ones get it back.
            if (mark == ReplicaStatus.Voided) registry.unlock(r.node, job.stakePerReplica);
        }
        t.challengeDeadline = 0;
        emit TaskReopened(taskId);
        _fillSlots(taskId);
    }

    // ---------------------------------------------------------------- internals: rounds

    function _createRoundTasks(uint256 jobId) internal {
        Job storage job = _jobs[jobId];
        uint32 n = job.stepsPerRound / job.checkpointInterval;
        for (uint32 i = 0; i < job.shards; ++i) {
            _createTask(jobId, job.currentRound, i, TaskKind.Train, job.roundInput, n);
        }
    }

    function _createTask(uint256 jobId, uint32 round, uint32 index, TaskKind kind, bytes32 inputHash, uint32 n)
        internal
    {
        uint256 taskId = ++taskCount;
        Task storage t = _tasks[taskId];
        t.jobId = jobId;
        t.round = round;
        t.index = index;
        t.n = n;
        t.kind = kind;
        t.status = TaskStatus.Open;
        t.createdAt = uint64(block.timestamp);
        t.inputHash = inputHash;
        _taskIds[jobId][round][index] = taskId;
        emit TaskCreated(taskId, jobId, round, index, uint8(kind), inputHash);
        _fillSlots(taskId);
    }

    /// @dev Called on every acceptance: completes a round's shards into an AGGREGATE, or an AGGREGATE into the next
    ///      round or the job's end.
    function _advance(Task storage t, bytes32 finalHash, bytes32 resultCid) internal {
        uint256 jobId = t.jobId;
        Job storage job = _jobs[jobId];
        if (t.kind == TaskKind.Train) {
            if (++job.acceptedInRound < job.shards) return;
            bytes32[] memory finals = new bytes32[](job.shards);
            for (uint32 i = 0; i < job.shards; ++i) {
                (finals[i],) = _taskResult(_taskIds[jobId][t.round][i]);
            }
            _createTask(jobId, t.round, job.shards, TaskKind.Aggregate, keccak256(abi.encode(finals)), 1);
            return;
        }
        if (t.round + 1 < job.rounds) {
            job.currentRound = t.round + 1;
            job.acceptedInRound = 0;
            job.roundInput = finalHash;
            emit RoundAdvanced(jobId, job.currentRound, finalHash);
            _createRoundTasks(jobId);
        } else {
            job.status = JobStatus.Completed;
            job.modelHash = finalHash;
            job.modelCid = resultCid;
            emit JobCompleted(jobId, finalHash, resultCid);
        }
    }
}
