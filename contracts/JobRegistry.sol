// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {IJobRegistry} from "./interfaces/IJobRegistry.sol";
import {IJobEscrow} from "./interfaces/IJobEscrow.sol";
import {INodeRegistry} from "./interfaces/INodeRegistry.sol";
import {IVerityToken} from "./interfaces/IVerityToken.sol";
import {IRandomness} from "./interfaces/IRandomness.sol";
import {JobRegistryBase} from "./JobRegistryBase.sol";
import {TaskMachine} from "./TaskMachine.sol";
import {JobViews} from "./JobViews.sol";
import {
    Job,
    JobStatus,
    Task,
    TaskKind,
    TaskStatus,
    Replica,
    ReplicaStatus,
    TaskContext,
    Claim,
    DisputeOutcome,
    PostJobParams,
    DEVICE_CUDA,
    MAX_REGION,
    MAX_BANDWIDTH_FLOOR_MBPS,
    BPS
} from "./types/VerityTypes.sol";
import {ZeroAddress, ParameterOutOfRange, NothingToWithdraw} from "./errors/CommonErrors.sol";
import {
    InvalidJobParameter,
    UnexpectedTaskStatus,
    NoEligibleNode,
    DrawPending,
    TaskIndexNotFound,
    TaskNotFound,
    DisputeGameAlreadySet,
    NoSuchInput,
    NotReplica,
    JobNotCompleted,
    NotSubmitter,
    PartnerNotStarved,
    RevealRunning
} from "./errors/JobRegistryErrors.sol";
import {ITaskMachineErrors} from "./errors/TaskMachineErrors.sol";

/// @title JobRegistry
/// @notice Posts jobs (escrow held by JobEscrow), splits them into rounds of TRAIN tasks plus one AGGREGATE task,
///         draws replicas from the NodeRegistry, and answers every view of jobs, tasks, replicas and claims. The task
///         state machine (commit-reveal, optimistic submission, challenge windows, dispute outcomes, acceptance,
///         rounds, late reports, cancellation) is TaskMachine's code, run here by delegatecall on this storage.
/// @dev Lifecycle: docs/protocol-v2.md "Task lifecycle". Split for EIP-170 size; one address, one ABI for clients.
///      External calls go only to the protocol's own token, NodeRegistry, JobEscrow, TaskMachine and (to read
///      `sparedDefender` while settling) the DisputeGame (no callbacks).
contract JobRegistry is IJobRegistry, ITaskMachineErrors, JobRegistryBase {
    /// @notice The task state machine's code (deployed by this constructor, run only by delegatecall).
    address public immutable machine;
    /// @notice The views' code (JobViews, deployed by this constructor), run by delegatecall from the fallback.
    address public immutable views;

    constructor(IVerityToken token_, INodeRegistry registry_, IJobEscrow escrow_, IRandomness randomness_)
        JobRegistryBase(token_, registry_, escrow_, randomness_)
    {
        machine = address(new TaskMachine(token_, registry_, escrow_, randomness_));
        views = address(new JobViews(token_, registry_, escrow_, randomness_));
    }

    // ---------------------------------------------------------------- owner

    /// @notice Wires the DisputeGame, once. Setting the current value again is a no-op.
    function setDisputeGame(address game) external onlyOwner {
        if (game == address(0)) revert ZeroAddress("game");
        if (game == disputeGame) return;
        // INVARIANT: the game that slashes and settles can never be swapped under live disputes.
        if (disputeGame != address(0)) revert DisputeGameAlreadySet(disputeGame);
        disputeGame = game;
        emit DisputeGameSet(game);
    }

    /// @notice Sets the default execution, reveal and challenge windows (seconds), each at least its minimum
    ///         (`minWindows`).
    function setDefaultWindows(uint64 execution, uint64 revealSeconds, uint64 challenge) external onlyOwner {
        _checkDefaults(execution, revealSeconds, challenge);
        defaultExecutionWindow = execution;
        defaultRevealWindow = revealSeconds;
        defaultChallengeWindow = challenge;
        emit ParameterSet("executionWindow", execution);
        emit ParameterSet("revealWindow", revealSeconds);
        emit ParameterSet("challengeWindow", challenge);
    }

    /// @notice Sets the chain's block time (seconds, 1..MAX_BLOCK_SECONDS): the minimum windows and the decline grace
    ///         follow it. The default windows must already fit the new minimums (set them first).
    function setBlockSeconds(uint64 value) external onlyOwner {
        if (value == 0 || value > MAX_BLOCK_SECONDS) revert ParameterOutOfRange("blockSeconds", value, 1, MAX_BLOCK_SECONDS);
        blockSeconds = value;
        _checkDefaults(defaultExecutionWindow, defaultRevealWindow, defaultChallengeWindow);
        emit ParameterSet("blockSeconds", value);
    }

    /// @notice Sets the assignment timeout (seconds).
    function setAssignmentTimeout(uint64 value) external onlyOwner {
        _checkRange("assignmentTimeout", value, 1);
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

    /// @notice Posts a job, has the escrow pull paymentPerTask * replication * (shards + 1) * rounds + POSTER_BOND from
    ///         the caller (approve the JobEscrow), creates round 0's shard tasks and requests their replicas' draws (`assign`).
    /// @return jobId The new job's id.
    function postJob(PostJobParams calldata p) external returns (uint256 jobId) {
        _validate(p);
        uint256 amount = _escrowFor(p.paymentPerTask, p.replication, p.shards, p.rounds);
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
        uint64 execution = p.executionWindow == 0 ? defaultExecutionWindow : p.executionWindow;
        // INVARIANT: the floor leaves a replica at least half its window to commit in (issue 23).
        if (p.resultFloor > execution / 2) revert InvalidJobParameter("resultFloor", p.resultFloor);
        (job.executionWindow, job.resultFloor) = (uint32(execution), p.resultFloor); // execution <= MAX_WINDOW
        job.revealWindow = p.revealWindow == 0 ? defaultRevealWindow : p.revealWindow;
        job.challengeWindow = p.challengeWindow == 0 ? defaultChallengeWindow : p.challengeWindow;
        job.postedAt = uint64(block.timestamp);
        job.region = p.region;
        job.minBandwidthMbps = p.minBandwidthMbps;
        // INVARIANT: a node is late-slashed at the rate in force when it could see the job, never at a later one.
        job.lateSlashBps = uint16(lateSlashBps); // <= BPS (setLateSlashBps)
        job.paysCredit = p.paymentPerTask >= CREDITED_PAYMENT; // beside the draw's filters: read with them
        job.manifestCid = p.manifestCid;
        job.manifestHash = p.manifestHash;
        job.roundInput = p.initialStateHash;
        job.paymentPerTask = p.paymentPerTask;
        job.stakePerReplica = p.stakePerReplica;
        emit JobPosted(jobId, msg.sender, p.manifestCid, p.manifestHash, amount);
        escrow.deposit(jobId, msg.sender, amount);
        _createRoundTasks(jobId);
    }

    /// @notice Cancels an active job and refunds all escrow not yet credited (TaskMachine.cancelJob).
    function cancelJob(uint256 jobId) external {
        jobId;
        _run();
    }

    /// @notice Returns the unspent escrow of a completed job to its submitter.
    function reclaimEscrow(uint256 jobId) external {
        Job storage job = _jobs[jobId];
        if (job.status != JobStatus.Completed) revert JobNotCompleted(jobId, job.status);
        if (msg.sender != job.submitter) revert NotSubmitter(jobId, msg.sender);
        uint256 amount = escrow.refund(jobId, msg.sender);
        if (amount == 0) revert NothingToWithdraw(msg.sender);
        emit EscrowReclaimed(jobId, amount);
    }

    // ---------------------------------------------------------------- solvers

    /// @notice Draws nodes into the empty slots of an Open task from the randomness requested when they emptied
    ///         (anyone, once `randomness.isReady(task.drawRequest)`). A stale request is renewed instead. Slots left
    ///         empty (no eligible node) get a fresh request; if none could be filled the call reverts.
    function assign(uint256 taskId) external {
        Task storage t = _activeTask(taskId);
        if (t.status != TaskStatus.Open) revert UnexpectedTaskStatus(taskId, t.status);
        uint256 requestId = t.drawRequest;
        if (randomness.isStale(requestId)) {
            randomness.renew(requestId);
            return;
        }
        // INVARIANT (P4): slots are drawn only from a value fixed after the request: the same nodes in any block.
        if (!randomness.isReady(requestId)) revert DrawPending(taskId, requestId);
        (uint256 filled, bool full) = _fillSlots(taskId, randomness.valueOf(requestId));
        if (filled == 0) revert NoEligibleNode(taskId);
        if (!full) _requestDraw(taskId);
    }

    /// @notice Commits keccak256(abi.encode(root, finalHash, resultCid, msg.sender)) for a replicated task
    ///         (TaskMachine.commit).
    function commit(uint256 taskId, bytes32 commitment) external {
        (taskId, commitment);
        _run();
    }

    /// @notice Reveals a committed result, or the last replica's result in place of its commit; an agreeing
    ///         partner's commitment is revealed with it (TaskMachine.reveal).
    function reveal(
        uint256 taskId,
        bytes32 root,
        bytes32 finalHash,
        uint32 n,
        bytes32 resultCid,
        bytes32[] calldata proof0,
        bytes32[] calldata proofN
    ) external {
        (taskId, root, finalHash, n, resultCid, proof0, proofN);
        _run();
    }

    /// @notice Submits the result of an optimistic task (TaskMachine.submitResult).
    function submitResult(
        uint256 taskId,
        bytes32 root,
        bytes32 finalHash,
        uint32 n,
        bytes32 resultCid,
        bytes32[] calldata proof0,
        bytes32[] calldata proofN
    ) external {
        (taskId, root, finalHash, n, resultCid, proof0, proofN);
        _run();
    }

    /// @notice Accepts a Revealed task once its window and grace passed with no open dispute (TaskMachine.finalize).
    function finalize(uint256 taskId) external {
        taskId;
        _run();
    }

    /// @notice A drawn replica declines its slot early, unslashed; `invalidInputs` counts towards failing the job;
    ///         `reason` is the node's own short ASCII note, emitted for the poster to read (TaskMachine.decline).
    function decline(uint256 taskId, bool invalidInputs, bytes32 reason) external {
        (taskId, invalidInputs, reason);
        _run();
    }

    /// @notice Releases the caller's stake from a task it committed to when another slot has stayed empty for over
    ///         `assignmentTimeout` (no eligible node could be drawn): its lock has no deadline, so without this only
    ///         the poster's cancelJob could free it. Unslashed: it did its part. Its slot is drawn again later.
    ///         Runs in JobRegistry itself (TaskMachine is near the size limit).
    function withdrawCommitted(uint256 taskId) external {
        Task storage t = _activeTask(taskId);
        Job storage job = _jobs[t.jobId];
        // INVARIANT: a replica can leave only a task starved of a partner, never one whose reveal is running.
        uint256 since = t.filledAt > t.openSince ? t.filledAt : t.openSince;
        if (t.status != TaskStatus.Open || block.timestamp <= since + assignmentTimeout) {
            revert PartnerNotStarved(taskId, t.status, since + assignmentTimeout);
        }
        uint8 slot = _slotOf(taskId, msg.sender, ReplicaStatus.Committed, job.replication);
        // A committed replica waiting for its partner has no deadline; one with a reveal deadline (both committed,
        // then the partner was reported late) must reveal or be reported late itself (found in review).
        uint64 deadline = _replicas[taskId][slot].deadline;
        if (deadline != 0) revert RevealRunning(taskId, slot, deadline);
        _setReplicaStatus(taskId, _replicas[taskId][slot], ReplicaStatus.Voided);
        // Then cleared as a slot drawn again is (a committed slot shares nothing): the withdrawer did its part and is
        // drawn like any other node, so a task whose other slot fills just after this still fills (found by CI).
        delete _replicas[taskId][slot];
        emit ReplicaWithdrawn(taskId, msg.sender, slot);
        registry.unlock(msg.sender, job.stakePerReplica);
    }

    /// @notice P10: the caller, holding a slot of consumer task `taskId` that has not yet given its result, found input
    ///         `index` unavailable: no accepted replica's bundle could be fetched and checked, so it recomputed it.
    ///         Inputs: an AGGREGATE's are its round's shard tasks (index = shard); a later round's TRAIN task has one,
    ///         the previous AGGREGATE (index 0). An input's payment is burned when every accepted holder of its
    ///         consumer reported it (every consumer task, for an AGGREGATE): see TaskMachine._advance.
    function reportUnavailable(uint256 taskId, uint32 index) external {
        Task storage t = _activeTask(taskId);
        Job storage job = _jobs[t.jobId];
        uint32 inputs = t.kind == TaskKind.Aggregate ? job.shards : (t.round > 0 ? 1 : 0);
        if (index >= inputs) revert NoSuchInput(taskId, index, inputs);
        // INVARIANT (P10): only a holder whose result is still to come reports, so it speaks before its result counts.
        uint8 slot = _holderSlot(taskId, job.replication);
        uint256 mask = _reportedBy(taskId, slot, msg.sender) | (uint256(1) << index);
        _unavailable[taskId][slot] = (uint256(uint160(msg.sender)) << 32) | mask;
        emit InputUnavailable(taskId, msg.sender, slot, index);
    }

    /// @notice Reports a replica past its deadline (TaskMachine.reportLate).
    function reportLate(uint256 taskId, uint8 slot) external {
        (taskId, slot);
        _run();
    }

    // ---------------------------------------------------------------- dispute hooks

    /// @inheritdoc IJobRegistry
    function onChallenge(uint256 taskId, uint32 epoch, uint64 committedAt) external {
        (taskId, epoch, committedAt);
        _run();
    }

    /// @inheritdoc IJobRegistry
    function onDisputeSettled(
        uint256 taskId,
        uint32 epoch,
        DisputeOutcome outcome,
        address challenger,
        bytes32 root,
        bytes32 finalHash,
        bytes32 resultCid
    ) external {
        (taskId, epoch, outcome, challenger, root, finalHash, resultCid);
        _run();
    }

    // ---------------------------------------------------------------- views

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
        c.executionWindow = job.executionWindow;
    }

    /// @inheritdoc IJobRegistry
    function claimOf(uint256 taskId) external view returns (Claim memory c) {
        Task storage t = _tasks[taskId];
        if (t.status != TaskStatus.Revealed) revert UnexpectedTaskStatus(taskId, t.status);
        c.epoch = t.epoch;
        c.challengeDeadline = t.challengeDeadline;
        c.revealGrace = _windowEnd(t) - t.challengeDeadline;
        if (t.candidate != address(0)) {
            c.defender = t.candidate;
            c.root = t.candidateRoot;
            c.finalHash = t.finalHash;
            c.resultCid = t.resultCid;
            return c;
        }
        uint8 s = _revealedSlot(taskId);
        ReplicaRecord storage tr = _traceOf(taskId, s);
        c.defender = _replicas[taskId][s].node;
        c.root = tr.commitOrRoot;
        c.finalHash = tr.finalHash;
        c.resultCid = _cidOf(taskId, s);
        if (s == 0 && _jobs[t.jobId].replication == 2 && _replicas[taskId][1].status == ReplicaStatus.Revealed) {
            ReplicaRecord storage o = _traceOf(taskId, 1);
            if (o.commitOrRoot == c.root && o.finalHash == c.finalHash) c.coDefender = _replicas[taskId][1].node;
        }
    }

    /// @notice Any other call runs in JobViews' code (IJobViews and the other views of jobs, tasks and replicas).
    ///         JobViews has no fallback, so an unknown selector reverts there; tests/chain/test_protocol_module.py
    ///         checks that every TaskMachine function has a stub here and JobViews' functions are all views.
    fallback() external {
        _delegate(views);
    }

    // ---------------------------------------------------------------- internals

    /// @dev Runs the same call in TaskMachine's code on this contract's storage and returns (or reverts) with its
    ///      result. msg.sender is kept, so TaskMachine's own access checks apply.
    function _run() private {
        _delegate(machine);
    }

    /// @dev Runs the same call in `target`'s code on this contract's storage and returns (or reverts) with its result.
    function _delegate(address target) private {
        assembly {
            calldatacopy(0, 0, calldatasize())
            let ok := delegatecall(gas(), target, 0, calldatasize(), 0, 0)
            returndatacopy(0, 0, returndatasize())
            if iszero(ok) { revert(0, returndatasize()) }
            return(0, returndatasize())
        }
    }

    /// @dev Draws a node for every empty slot from `value`. Returns how many were filled and whether the task is now
    ///      fully Assigned.
    function _fillSlots(uint256 taskId, bytes32 value) internal returns (uint256 filled, bool full) {
        Task storage t = _tasks[taskId];
        Job storage job = _jobs[t.jobId];
        full = true;
        for (uint8 s = 0; s < job.replication; ++s) {
            ReplicaRecord storage r = _replicas[taskId][s];
            if (!_isEmpty(r.status)) continue;
            (address node, bool credited) = _drawSolver(taskId, s, value);
            if (node == address(0)) {
                full = false;
                continue;
            }
            uint64 deadline = uint64(block.timestamp) + job.executionWindow;
            if (r.status != ReplicaStatus.None) {
                // A slot drawn again: forget the previous holder's data (a fresh slot is all zero already).
                _unshare(r, _replicas[taskId][s ^ 1]);
                delete _replicas[taskId][s];
            }
            r.node = node;
            _setReplicaStatus(taskId, r, ReplicaStatus.Assigned);
            r.deadline = uint48(deadline);
            r.credited = credited;
            job.everAssigned = true;
            ++filled;
            emit TaskAssigned(taskId, node, s, deadline);
            registry.lock(node, job.stakePerReplica);
        }
        if (full) {
            _setTaskStatus(taskId, t, TaskStatus.Assigned);
            t.openSince = 0;
        } else if (filled != 0) {
            // A slot is still empty: a node just drawn waits the full timeout for it before withdrawCommitted lets it
            // leave (found by CI). openSince stays: the poster's cancel counts from when a slot first emptied, so a
            // node that withdraws and is drawn again cannot hold the cancel off (found in review).
            t.filledAt = uint64(block.timestamp);
        }
    }

    /// @dev Seed = keccak(value, taskId, slot, nonce): the nonce separates redraws of one slot from the same value.
    ///      A node ever banned from the task (older than the exclusion ring) is never taken: the slot is drawn again
    ///      with the next nonce, at most BANNED_REDRAWS times, then left empty for the next request.
    function _drawSolver(uint256 taskId, uint8 slot, bytes32 value) internal returns (address, bool credited) {
        Task storage t = _tasks[taskId];
        Job storage job = _jobs[t.jobId];
        address[] memory exclude = _exclusions(taskId);
        for (uint256 i = 0; i < BANNED_REDRAWS; ++i) {
            bytes32 seed = keccak256(abi.encode(value, taskId, slot, t.drawNonce));
            ++t.drawNonce;
            // Replicas only: a job's region and bandwidth bind its solvers; referees and verifiers come from every
            // region (docs/contracts.md, "Network classes").
            (address node, uint256 eligibleBps) = registry.drawSolver(
                seed,
                job.deviceClass,
                job.minMemoryMb,
                job.profileBit,
                job.region,
                job.minBandwidthMbps,
                job.stakePerReplica,
                exclude
            );
            // INVARIANT: a node banned from a task (late, lost, declined) is never drawn for it again.
            if (node == address(0) || !_everBanned[taskId][node]) {
                // Issue 23, reputation that cannot be bought: the task will count toward the node's reputation only
                // if the draw was open to others (its classes hold OPEN_CLASS_BPS of all solver weight: not a class
                // of one party's own), the job pays at least CREDITED_PAYMENT a task, and another party posted it.
                credited = eligibleBps >= OPEN_CLASS_BPS && job.paysCredit && node != job.submitter;
                return (node, credited);
            }
            uint256 n = exclude.length; // room for BANNED_REDRAWS more was reserved: exclude it from the next draw
            assembly ("memory-safe") {
                mstore(exclude, add(n, 1))
            }
            exclude[n] = node;
        }
        return (address(0), false);
    }

    /// @dev Other slots' nodes, this slot's previous node, and the task's banned ring.
    function _exclusions(uint256 taskId) internal view returns (address[] memory ex) {
        uint8 replication = _jobs[_tasks[taskId].jobId].replication;
        ex = new address[](uint256(replication) + MAX_BANNED + BANNED_REDRAWS); // the redraws' room at the end
        uint256 c = 0;
        for (uint8 s = 0; s < replication; ++s) {
            address node = _replicas[taskId][s].node;
            if (node != address(0)) ex[c++] = node;
        }
        // the ring's filled entries only (most tasks have none: one read instead of MAX_BANNED cold ones)
        uint256 banned = _tasks[taskId].bannedCount;
        for (uint256 b = 0; b < banned && b < MAX_BANNED; ++b) {
            ex[c++] = _banned[taskId][b];
        }
        assembly ("memory-safe") {
            mstore(ex, c)
        }
    }

    function _validate(PostJobParams calldata p) internal view {
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
        if (p.stakePerReplica < MIN_TASK_STAKE) revert InvalidJobParameter("stakePerReplica", p.stakePerReplica);
        if (p.deviceClass > DEVICE_CUDA) revert InvalidJobParameter("deviceClass", p.deviceClass);
        if (p.region > MAX_REGION) revert InvalidJobParameter("region", p.region);
        if (p.minBandwidthMbps > MAX_BANDWIDTH_FLOOR_MBPS) {
            revert InvalidJobParameter("minBandwidthMbps", p.minBandwidthMbps);
        }
        if (p.profileBit == 0 || (p.profileBit & (p.profileBit - 1)) != 0) {
            revert InvalidJobParameter("profileBit", p.profileBit);
        }
        // INVARIANT: no job can set a window an honest node cannot meet (0 takes the default, itself >= the minimum):
        // a 1-second execution window had every drawn solver reported late and slashed (issue 9), and a 30-second
        // one on a 12-second chain left no block to decline in (issue 23).
        (uint64 execution, uint64 revealSeconds, uint64 challenge) = _minWindows();
        _checkWindow("executionWindow", p.executionWindow, execution);
        _checkWindow("revealWindow", p.revealWindow, revealSeconds);
        _checkWindow("challengeWindow", p.challengeWindow, challenge);
    }

    /// @dev A job's window: 0 (the default) or within [least, MAX_WINDOW].
    function _checkWindow(bytes32 name, uint64 value, uint64 least) internal pure {
        if (value > MAX_WINDOW || (value != 0 && value < least)) revert InvalidJobParameter(name, value);
    }

    /// @dev Default windows: each within its minimum and MAX_WINDOW.
    function _checkDefaults(uint64 execution, uint64 revealSeconds, uint64 challenge) internal view {
        (uint64 minExecution, uint64 minReveal, uint64 minChallenge) = _minWindows();
        _checkRange("executionWindow", execution, minExecution);
        _checkRange("revealWindow", revealSeconds, minReveal);
        _checkRange("challengeWindow", challenge, minChallenge);
    }

    function _checkRange(bytes32 name, uint64 value, uint64 least) internal pure {
        if (value < least || value > MAX_WINDOW) revert ParameterOutOfRange(name, value, least, MAX_WINDOW);
    }

    /// @dev The slot the caller holds with its result still to come (Assigned or Committed).
    function _holderSlot(uint256 taskId, uint8 replication) internal view returns (uint8) {
        for (uint8 s = 0; s < replication; ++s) {
            ReplicaRecord storage r = _replicas[taskId][s];
            if (r.node != msg.sender) continue;
            if (r.status == ReplicaStatus.Assigned || r.status == ReplicaStatus.Committed) return s;
        }
        revert NotReplica(taskId, msg.sender, ReplicaStatus.Assigned);
    }
}
