// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Ownable} from "@openzeppelin/contracts/access/Ownable.sol";

import {IJobRegistry} from "./interfaces/IJobRegistry.sol";
import {IJobEscrow} from "./interfaces/IJobEscrow.sol";
import {INodeRegistry} from "./interfaces/INodeRegistry.sol";
import {IVerityToken} from "./interfaces/IVerityToken.sol";
import {IRandomness} from "./interfaces/IRandomness.sol";
import {Job, Task, TaskKind, TaskStatus, JobStatus, ReplicaStatus} from "./types/VerityTypes.sol";
import {ZeroAddress} from "./errors/CommonErrors.sol";
import {
    TaskNotFound, JobNotActive, NotReplica, RequestIdTooLarge, IllegalStatusTransition
} from "./errors/JobRegistryErrors.sol";
import {StatusTable} from "./lib/StatusTable.sol";

/// @title JobRegistryBase
/// @notice The job side's storage and the helpers both halves of the registry use: JobRegistry (jobs, assignment,
///         parameters, every view) and TaskMachine (the task state machine, run by delegatecall on this storage).
/// @dev Both contracts inherit exactly this layout and declare no other storage (their own addresses are
///      immutables), so TaskMachine code run by JobRegistry's delegatecall reads and writes JobRegistry's state.
abstract contract JobRegistryBase is Ownable {
    /// @notice Maximum shards per job.
    uint32 public constant MAX_SHARDS = 32;
    /// @notice Maximum rounds per job.
    uint32 public constant MAX_ROUNDS = 256;
    /// @notice Maximum replicas per task (a dispute is a two-party game).
    uint8 public constant MAX_REPLICATION = 2;
    /// @notice Maximum checkpoints per trace and steps per checkpoint segment (keeps proofs <= 20 deep).
    uint32 public constant MAX_TRACE = 1 << 20;
    /// @notice Most recent bans of a task passed to each draw as exclusions (a ring buffer); older bans still hold
    ///         (`_everBanned`), a draw that lands on one draws again.
    uint8 public constant MAX_BANNED = 4;
    /// @notice Draws per empty slot before it waits for the next request, when the drawn nodes were banned.
    uint8 public constant BANNED_REDRAWS = 4;
    /// @notice Share of its execution window (from assignment) in which a drawn replica may decline unslashed: at
    ///         least 4 blocks, since a window is at least MIN_EXECUTION_BLOCKS (16) blocks of `blockSeconds`.
    uint256 public constant DECLINE_GRACE_BPS = 2_500;
    /// @notice Shortest execution window a job may have (or the registry default), seconds: a drawn node must be
    ///         able to fetch the inputs, decline within the grace or train and commit before it can be late. Also at
    ///         least MIN_EXECUTION_BLOCKS blocks of `blockSeconds` (windows that fit the chain, issue 23).
    uint64 public constant MIN_EXECUTION_WINDOW = 30;
    uint64 public constant MIN_EXECUTION_BLOCKS = 16;
    /// @notice Shortest reveal window, seconds, and blocks: a committed node must be able to send its reveal.
    uint64 public constant MIN_REVEAL_WINDOW = 5;
    uint64 public constant MIN_REVEAL_BLOCKS = 4;
    /// @notice Shortest challenge window, seconds, and blocks: a challenge must be able to land at all (a 1-second
    ///         window made a job's results final unchallengeable). What a verifier needs to re-execute is the job's
    ///         own choice above it (the client's default is 60 s).
    uint64 public constant MIN_CHALLENGE_WINDOW = 3;
    uint64 public constant MIN_CHALLENGE_BLOCKS = 3;
    /// @notice Largest `blockSeconds`.
    uint64 public constant MAX_BLOCK_SECONDS = 60;
    /// @notice Distinct nodes that must decline one task for invalid inputs (none of its replicas having committed)
    ///         before the job is failed: one honest refusal is not proof, three drawn by stake are (issue 9).
    uint8 public constant FAIL_DECLINES = 3;
    /// @notice Bond every poster deposits with its escrow (1 VRT). Returned with the unspent escrow, except when the
    ///         job is failed for invalid inputs: then it is split among the nodes that declined it, paying for the
    ///         fetches and checks the poster's bad inputs cost them.
    uint256 public constant POSTER_BOND = 1e18;
    /// @dev The least stake a job may ask of each replica (1 VRT; issue 23, "panels cost who opens them"): a dispute
    ///      over a task slashes its loser's task stake, so a self-dispute on a 1-wei-stake job seated three referees
    ///      for free. (Internal: clients mirror it, protocol.MIN_TASK_STAKE; JobRegistry has no room for a getter.)
    uint256 internal constant MIN_TASK_STAKE = 1e18;
    /// @notice Issue 23, reputation that cannot be bought: an accepted task counts toward its node's reputation only
    ///         if the node was drawn from classes holding at least this share of all solver weight (basis points): a
    ///         class that only one party's identities serve does not, unless that party holds a third of the whole
    ///         network's weight (on probation, 5 times the weight of everyone else: docs/protocol-v2.md).
    uint256 public constant OPEN_CLASS_BPS = 3_333;
    /// @notice ... and only if the job pays at least this much per accepted task (tiny self-paid jobs do not count).
    uint256 public constant CREDITED_PAYMENT = 1e17;
    /// @dev unlockCompleted's `usedBps` for an acceptance with no promptness to record (a candidate had no window).
    uint256 internal constant NO_PROMPTNESS = type(uint256).max;
    /// @dev What each of a task's first FAIL_DECLINES invalid-inputs refusals bets from its stake (its share of the
    ///      bond; every task stake covers it: MIN_TASK_STAKE >= DECLINE_BET).
    uint256 internal constant DECLINE_BET = POSTER_BOND / FAIL_DECLINES;
    /// @notice Largest value accepted for any window or timeout.
    uint64 public constant MAX_WINDOW = 7 days;

    /// @notice Stake token (late slashes are burned).
    IVerityToken public immutable token;
    /// @notice Node registry (stake, reputation, selection).
    INodeRegistry public immutable registry;
    /// @notice Holds every job's escrow and every payment credit.
    IJobEscrow public immutable escrow;
    /// @notice Two-phase randomness every replica draw comes from (P4).
    IRandomness public immutable randomness;

    /// @notice The DisputeGame allowed to call the dispute hooks (wired once).
    address public disputeGame;
    /// @notice Default seconds a replica has from assignment to commit (or submit, with replication 1).
    uint64 public defaultExecutionWindow = 120;
    /// @notice Default seconds each replica has to reveal once all replicas committed; also a challenge's reveal
    ///         grace after the challenge deadline.
    uint64 public defaultRevealWindow = 60;
    /// @notice Default seconds a candidate result can be challenged.
    uint64 public defaultChallengeWindow = 30;
    /// @notice Seconds a slot may stay empty before the submitter may cancel the job.
    uint64 public assignmentTimeout = 300;
    /// @notice Share of the task stake burned when a replica misses a deadline, in basis points.
    uint256 public lateSlashBps = 1_000;
    /// @notice The chain's block time, seconds (1..MAX_BLOCK_SECONDS; the deployment sets it): the minimum windows and
    ///         the decline grace are at least a number of blocks of it, so they fit the chain they run on.
    uint64 public blockSeconds = 1;
    /// @notice Number of jobs posted (ids run 1..jobCount).
    uint256 public jobCount;
    /// @notice Number of tasks created (ids run 1..taskCount).
    uint256 public taskCount;

    mapping(uint256 => Job) internal _jobs;
    mapping(uint256 => Task) internal _tasks;

    /// @dev Storage form of a replica slot (getReplicas / getReplica rebuild the public Replica struct).
    ///      `sharesTrace` / `sharesCid`: this slot revealed the same (root, finalHash) / resultCid as the other slot,
    ///      which stores them; this one leaves them zero (saves fresh slots when replicas agree). Set only on a
    ///      task's last reveal; before a slot holding shared values is drawn again they are copied into the sharer
    ///      (_unshare), so every view stays correct. `commitOrRoot` holds the commitment while the slot is
    ///      Committed and the trace root once it revealed (the commitment is spent then): rewriting a used slot
    ///      costs 2.9k gas where a fresh one costs 22.1k (docs/gas.md). A slot has revealed iff it shares a trace
    ///      or its finalHash is set (a revealed final is never zero: _checkTrace).
    struct ReplicaRecord {
        address node;
        ReplicaStatus status;
        uint48 deadline; // seconds (uint48 reaches past the year 8,000,000; the view widens it to uint64)
        bool sharesTrace;
        bool sharesCid;
        bool credited; // its acceptance counts toward the node's reputation (JobRegistry._drawSolver)
        uint16 usedBps; // promptness: share of its window used before its result (_checkOnTime), recorded on acceptance
        bytes32 commitOrRoot;
        bytes32 finalHash;
        bytes32 resultCid;
    }

    mapping(uint256 => ReplicaRecord[MAX_REPLICATION]) internal _replicas;
    mapping(uint256 => mapping(uint32 => mapping(uint32 => uint256))) internal _taskIds;
    mapping(uint256 => address[MAX_BANNED]) internal _banned;
    /// @dev Every node ever banned from a task (late, lost, declined). The ring above only keeps the draw's exclusion
    ///      list short; this set is what a draw checks, so a ban never rotates out (issue 9).
    mapping(uint256 => mapping(address => bool)) internal _everBanned;
    /// @dev The distinct nodes that declined a task for invalid inputs (at most FAIL_DECLINES: the job fails then).
    mapping(uint256 => address[]) internal _invalidDecliners;
    /// @dev P10: what a consumer task's slot holder reported unavailable (reportUnavailable), per slot:
    ///      uint160(reporter) << 32 | bitmask of input indices. The reporter is stored so a report never outlives its
    ///      holder: a redrawn slot's new node starts from an empty mask.
    mapping(uint256 => uint256[MAX_REPLICATION]) internal _unavailable;
    /// @dev P10: the inputs a consumer task's accepted result found unavailable (AND of its accepted holders' masks;
    ///      written only when nonzero).
    mapping(uint256 => uint32) internal _inputVerdict;

    /// @notice The number of live disputes against the task's candidate at `epoch` changed to `openDisputes`.
    event OpenDisputesChanged(uint256 indexed taskId, uint32 epoch, uint32 openDisputes);
    /// @notice P10: `node`, holding slot `slot` of consumer task `taskId`, found input `input` unavailable (no
    ///         accepted replica's bundle could be fetched and checked; it recomputed the input).
    event InputUnavailable(uint256 indexed taskId, address indexed node, uint8 slot, uint32 input);
    /// @notice P10: `node`'s payment for accepted task `taskId` was burned: every accepted holder of the task that
    ///         consumed it reported its bundle unavailable.
    event PaymentForfeited(uint256 indexed taskId, address indexed node, uint256 amount);

    constructor(IVerityToken token_, INodeRegistry registry_, IJobEscrow escrow_, IRandomness randomness_)
        Ownable(msg.sender)
    {
        if (address(token_) == address(0)) revert ZeroAddress("token");
        if (address(registry_) == address(0)) revert ZeroAddress("registry");
        if (address(escrow_) == address(0)) revert ZeroAddress("escrow");
        if (address(randomness_) == address(0)) revert ZeroAddress("randomness");
        token = token_;
        registry = registry_;
        escrow = escrow_;
        randomness = randomness_;
    }

    // ---------------------------------------------------------------- tasks and slots

    function _activeTask(uint256 taskId) internal view returns (Task storage t) {
        t = _tasks[taskId];
        if (t.status == TaskStatus.None) revert TaskNotFound(taskId);
        Job storage job = _jobs[t.jobId];
        if (job.status != JobStatus.Active) revert JobNotActive(t.jobId, job.status);
    }

    function _escrowFor(uint256 paymentPerTask, uint8 replication, uint32 shards, uint32 rounds)
        internal
        pure
        returns (uint256)
    {
        return paymentPerTask * replication * (uint256(shards) + 1) * rounds + POSTER_BOND;
    }

    /// @dev The one place a task's status changes (StatusTable.TASK).
    function _setTaskStatus(uint256 taskId, Task storage t, TaskStatus to) internal {
        _checkTransition(StatusTable.TASK, taskId, false, uint8(t.status), uint8(to));
        t.status = to;
    }

    /// @dev The one place a replica slot's status changes (StatusTable.REPLICA).
    function _setReplicaStatus(uint256 taskId, ReplicaRecord storage r, ReplicaStatus to) internal {
        _checkTransition(StatusTable.REPLICA, taskId, true, uint8(r.status), uint8(to));
        r.status = to;
    }

    function _checkTransition(uint256 table, uint256 taskId, bool replica, uint8 from, uint8 to) private pure {
        // INVARIANT (issue 23): statuses move only along their transition table.
        if (!StatusTable.allows(table, from, to)) revert IllegalStatusTransition(taskId, replica, from, to);
    }

    function _isEmpty(ReplicaStatus s) internal pure returns (bool) {
        return
            s == ReplicaStatus.None || s == ReplicaStatus.Late || s == ReplicaStatus.Slashed
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

    function _ban(uint256 taskId, address node) internal {
        // The count rides in the task's own word (issue 23, cheaper disputes: a mapping of its own was a fresh word
        // in the settlement of every lost contest).
        Task storage t = _tasks[taskId];
        uint8 c = t.bannedCount;
        _banned[taskId][c % MAX_BANNED] = node;
        // Saturates (review): a 256th ban must not revert the decline, report or settlement that makes it; the ring
        // needs only min(count, MAX_BANNED) and `_everBanned` keeps every ban.
        if (c != type(uint8).max) t.bannedCount = c + 1;
        _everBanned[taskId][node] = true;
    }

    /// @dev The one way a slot gets (re)drawn: the task is Open and asks for randomness now; `assign` draws its empty
    ///      slots later, from a value nobody knew when the request was made (P4). Whoever triggers the request
    ///      (posting, the finalize that ends a round, a late report, a lost dispute) cannot pick the block that decides
    ///      the draw, and whoever calls `assign` gets the same nodes in any block.
    function _requestDraw(uint256 taskId) internal {
        Task storage t = _tasks[taskId];
        _setTaskStatus(taskId, t, TaskStatus.Open);
        if (t.openSince == 0) t.openSince = uint64(block.timestamp);
        uint256 requestId = randomness.request();
        if (requestId > type(uint64).max) revert RequestIdTooLarge(requestId);
        t.drawRequest = uint64(requestId);
        emit IJobRegistry.DrawRequested(taskId, requestId);
    }

    /// @dev P10: the inputs `node` reported unavailable while holding slot `s` of `taskId` (0 for a report by an
    ///      earlier holder of the slot).
    function _reportedBy(uint256 taskId, uint8 s, address node) internal view returns (uint32) {
        uint256 rec = _unavailable[taskId][s];
        return address(uint160(rec >> 32)) == node ? uint32(rec) : 0;
    }

    // ---------------------------------------------------------------- results

    /// @dev A replica's commitment to its result (protocol.replica_commitment): what `commit` stores, what a reveal
    ///      must open, and what the views show for a revealed slot.
    function _resultCommitment(bytes32 root, bytes32 finalHash, bytes32 resultCid, address node)
        internal
        pure
        returns (bytes32)
    {
        return keccak256(abi.encode(root, finalHash, resultCid, node));
    }

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

    /// @dev Before `r` is cleared for a new holder: the other slot `o` keeps its own copy of what it shared with r.
    function _unshare(ReplicaRecord storage r, ReplicaRecord storage o) internal {
        if (o.sharesTrace) {
            o.commitOrRoot = r.commitOrRoot;
            o.finalHash = r.finalHash;
            o.sharesTrace = false;
        }
        if (o.sharesCid) {
            o.resultCid = r.resultCid;
            o.sharesCid = false;
        }
    }

    /// @dev An accepted task's result: that of an Accepted replica, else the task record's (a candidate's; zero while
    ///      the replicas hold the claim).
    function _taskResult(uint256 taskId) internal view returns (bytes32, bytes32) {
        uint8 replication = _jobs[_tasks[taskId].jobId].replication;
        for (uint8 s = 0; s < replication; ++s) {
            if (_replicas[taskId][s].status != ReplicaStatus.Accepted) continue;
            return (_traceOf(taskId, s).finalHash, _cidOf(taskId, s));
        }
        return (_tasks[taskId].finalHash, _tasks[taskId].resultCid);
    }

    /// @dev The shortest execution, reveal and challenge windows: each its seconds floor or its blocks of
    ///      `blockSeconds`, whichever is longer (clients compute the same from the public constants and blockSeconds:
    ///      verity.chain.protocol.min_windows).
    function _minWindows() internal view returns (uint64 execution, uint64 reveal, uint64 challenge) {
        uint64 b = blockSeconds;
        execution = _atLeast(MIN_EXECUTION_WINDOW, MIN_EXECUTION_BLOCKS * b);
        reveal = _atLeast(MIN_REVEAL_WINDOW, MIN_REVEAL_BLOCKS * b);
        challenge = _atLeast(MIN_CHALLENGE_WINDOW, MIN_CHALLENGE_BLOCKS * b);
    }

    function _atLeast(uint64 a, uint64 b) internal pure returns (uint64) {
        return a > b ? a : b;
    }

    /// @dev The last second of a Revealed task's challenge window plus the reveal grace after it, or after the last
    ///      settlement that left the claim standing (`revealHold`): `finalize` accepts only after it (TaskMachine) and
    ///      `JobRegistry.finalizable` reports it, so keepers never copy the rule.
    function _windowEnd(Task storage t) internal view returns (uint64) {
        return t.challengeDeadline + t.revealHold + _jobs[t.jobId].revealWindow;
    }

    /// @dev The one transition into Revealed: the current claim waits out a fresh challenge window.
    function _openChallengeWindow(uint256 taskId, uint64 window) internal {
        Task storage t = _tasks[taskId];
        uint64 deadline = uint64(block.timestamp) + window;
        _setTaskStatus(taskId, t, TaskStatus.Revealed);
        t.challengeDeadline = deadline;
        t.revealHold = 0;
        emit IJobRegistry.ChallengeWindowOpened(taskId, deadline);
    }

    // ---------------------------------------------------------------- rounds

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
        t.createdAt = uint64(block.timestamp);
        t.inputHash = inputHash;
        _taskIds[jobId][round][index] = taskId;
        emit IJobRegistry.TaskCreated(taskId, jobId, round, index, uint8(kind), inputHash);
        _requestDraw(taskId);
    }
}
