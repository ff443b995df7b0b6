// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Job, Task, Replica, TaskContext, Claim, DisputeOutcome} from "../types/VerityTypes.sol";

/// @title IJobRegistry
/// @notice Jobs, tasks, replica assignment, commit-reveal, acceptance, rounds and payments.
interface IJobRegistry {
    /// @notice A job was posted and its escrow pulled.
    event JobPosted(
        uint256 indexed jobId, address indexed submitter, bytes32 manifestCid, bytes32 manifestHash, uint256 escrow
    );
    /// @notice A task was created (kind: 1 = TRAIN, 2 = AGGREGATE).
    event TaskCreated(
        uint256 indexed taskId, uint256 indexed jobId, uint32 round, uint32 index, uint8 kind, bytes32 inputHash
    );
    /// @notice The task's empty slots will be drawn from randomness request `requestId` (call `assign` once ready).
    event DrawRequested(uint256 indexed taskId, uint256 requestId);
    /// @notice A node was drawn into a replica slot; it must commit (or submit) before `deadline`.
    event TaskAssigned(uint256 indexed taskId, address indexed node, uint8 slot, uint64 deadline);
    /// @notice A replica committed.
    event ResultCommitted(uint256 indexed taskId, address indexed node, uint8 slot);
    /// @notice A replica revealed (or, with replication 1, submitted) its result.
    event ResultRevealed(
        uint256 indexed taskId,
        address indexed node,
        uint8 slot,
        bytes32 root,
        bytes32 finalHash,
        bytes32 resultCid,
        uint32 n
    );
    /// @notice Every replica committed; reveals are due by `deadline`.
    event RevealOpened(uint256 indexed taskId, uint64 deadline);
    /// @notice A candidate result (optimistic, agreed replicas, a lone replica, or a dispute winner) waits out a window.
    event ChallengeWindowOpened(uint256 indexed taskId, uint64 deadline);
    /// @notice Two replicas revealed different traces: one replica-vs-replica dispute follows in the DisputeGame.
    event TaskContested(uint256 indexed taskId);
    /// @notice The task's result is final.
    event TaskAccepted(uint256 indexed taskId, bytes32 finalHash, bytes32 resultCid);
    /// @notice A dispute ended without an acceptable result; the task's slots are drawn again.
    event TaskReopened(uint256 indexed taskId);
    /// @notice A replica missed its deadline and was slashed `slashed` (burned).
    event ReplicaLate(uint256 indexed taskId, address indexed node, uint8 slot, uint256 slashed);
    /// @notice A drawn replica declined its slot within the decline grace (inputs it cannot use, work it cannot do
    ///         in time); its stake was released unslashed, it is not drawn for this task again, the slot is redrawn.
    ///         `reason`: the node's own short ASCII note (`time 181/116 s`, `memory 9700/4096 MB`), unchecked.
    event ReplicaDeclined(uint256 indexed taskId, address indexed node, uint8 slot, bytes32 reason);
    /// @notice A committed replica whose partner slot stayed empty past the assignment timeout left the task; its
    ///         stake was released unslashed and its slot is drawn again.
    event ReplicaWithdrawn(uint256 indexed taskId, address indexed node, uint8 slot);
    /// @notice The job moved to round `round`, whose shard tasks start from `inputHash`.
    event RoundAdvanced(uint256 indexed jobId, uint32 round, bytes32 inputHash);
    /// @notice The job finished; `modelHash` / `modelCid` are the last AGGREGATE's result.
    event JobCompleted(uint256 indexed jobId, bytes32 modelHash, bytes32 modelCid);
    /// @notice The submitter cancelled the job and got `refund` back.
    event JobCancelled(uint256 indexed jobId, uint256 refund);
    /// @notice FAIL_DECLINES distinct nodes declined `taskId` for invalid inputs: the job ended, the decliners shared
    ///         the poster bond and `refund` went back to the poster.
    event JobFailed(uint256 indexed jobId, uint256 indexed taskId, uint256 refund);
    /// @notice The submitter of a completed job took back the unspent escrow.
    event EscrowReclaimed(uint256 indexed jobId, uint256 amount);
    /// @notice The owner wired the DisputeGame.
    event DisputeGameSet(address indexed game);
    /// @notice The owner changed a parameter.
    event ParameterSet(bytes32 indexed name, uint256 value);

    /// @notice A task's candidate result changed (a dispute winner now waits out its own window); `epoch` is new.
    event CandidateReplaced(uint256 indexed taskId, address indexed candidate, bytes32 finalHash, uint32 epoch);

    /// @notice Registers an optimistic challenge against the task's current candidate (DisputeGame only).
    /// @dev Reverts unless the task is Revealed at `epoch`, `committedAt <= challengeDeadline` and
    ///      `block.timestamp <= challengeDeadline + revealGrace`. Counts one more open dispute (finalize waits).
    function onChallenge(uint256 taskId, uint32 epoch, uint64 committedAt) external;
    /// @notice Settles a dispute about the task (DisputeGame only); a no-op when `epoch` is stale.
    /// @dev Replicated contest (task Contested; A and B are the two replicas):
    ///        ChallengerWins / DefenderWins: the loser's replica is Slashed, the winner's result becomes the candidate
    ///        with a fresh challenge window (P3: a winner is not thereby proven right). BothLose: both Slashed, slots
    ///        redrawn. Voided: both released (Voided), slots redrawn.
    ///      Optimistic challenge (task Revealed; A is the challenger, B the claim's defender):
    ///        ChallengerWins: the claim's replicas (or previous candidate) are Slashed and banned; `challenger` with
    ///        (root, finalHash, resultCid) becomes the candidate with a fresh window; epoch++, openDisputes = 0.
    ///        DefenderWins / Voided: one fewer open dispute. BothLose: the claim is rejected too; slots redrawn.
    ///      The game has already slashed the losers' stakes and released a challenger's stake it locked itself
    ///      (Voided); the registry releases replica stakes it locked (a voided contest unlocks both replicas), and a
    ///      winning challenger's locked task stake is from then on the registry's to release or pay.
    ///      A co-defender the game spared (`IDisputeGame.sparedDefender`, set only during this call) is Voided and
    ///      unlocked, unpaid and unbanned.
    function onDisputeSettled(
        uint256 taskId,
        uint32 epoch,
        DisputeOutcome outcome,
        address challenger,
        bytes32 root,
        bytes32 finalHash,
        bytes32 resultCid
    ) external;

    /// @notice What the DisputeGame needs to know about a task.
    function taskContext(uint256 taskId) external view returns (TaskContext memory);
    /// @notice The result a challenge would dispute now (reverts unless the task is Revealed).
    function claimOf(uint256 taskId) external view returns (Claim memory);
}

/// @notice The registry's views of jobs, tasks and replicas: JobViews' code, reached through JobRegistry's fallback
///         (issue 23, room to grow: the registry's own code goes to rules). Callers hold the registry's address.
interface IJobViews {
    /// @notice The job record.
    function getJob(uint256 jobId) external view returns (Job memory);
    /// @notice The task record.
    function getTask(uint256 taskId) external view returns (Task memory);
    /// @notice The task's replica slots (length = the job's replication).
    function getReplicas(uint256 taskId) external view returns (Replica[] memory);
    /// @notice The task's epoch: bumps whenever its candidate result changes (disputes of an older epoch are stale).
    ///         The game reads it on every move (issue 23, cheaper disputes: `getTask` cost ~27k gas, this ~5k).
    function epochOf(uint256 taskId) external view returns (uint32);
    /// @notice One replica slot of a task.
    function getReplica(uint256 taskId, uint8 slot) external view returns (Replica memory);
    /// @notice The task id of (jobId, round, index); index == shards is the round's AGGREGATE task.
    function taskOf(uint256 jobId, uint32 round, uint32 index) external view returns (uint256 taskId);
    /// @notice Whether `finalize(taskId)` would accept the task now, and when its window and reveal grace end.
    function finalizable(uint256 taskId) external view returns (bool ready, uint64 windowEnd);
    /// @notice Escrow a job with these parameters needs.
    function escrowFor(uint256 paymentPerTask, uint8 replication, uint32 shards, uint32 rounds)
        external
        pure
        returns (uint256);
    /// @notice Whether `node` was ever banned from `taskId`.
    function isBanned(uint256 taskId, address node) external view returns (bool);
    /// @notice The task's invalid-inputs decliners.
    function invalidDeclinersOf(uint256 taskId) external view returns (address[] memory);
    /// @notice The most recent bans of a task.
    function bannedOf(uint256 taskId) external view returns (address[4] memory);
}
