// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @title Verity shared types
/// @notice Enums and structs shared by the registry, the job registry and the dispute game.
///         Every enum reserves value 0 for "does not exist".

/// @dev Node role bits (NodeRegistry.roles).
uint8 constant ROLE_SOLVER = 1;
uint8 constant ROLE_VERIFIER = 2;
uint8 constant ROLE_REFEREE = 4;

/// @dev Device classes a node can declare; a job requiring CUDA only draws CUDA nodes.
uint8 constant DEVICE_CPU = 0;
uint8 constant DEVICE_CUDA = 1;

/// @dev Determinism profile bits (NodeRegistry.profiles; a job names exactly one bit).
uint32 constant PROFILE_CPU_F32_STRICT = 1;
uint32 constant PROFILE_CUDA_F32_STRICT = 2;

uint256 constant BPS = 10_000;

enum JobStatus {
    None,
    Active,
    Completed,
    Cancelled
}

enum TaskKind {
    None,
    Train,
    Aggregate
}

/// @dev Open: some replica slot is empty. Assigned: all slots filled, commit/reveal running.
///      Revealed: one result is waiting out its challenge window (optimistic).
///      Contested: results differ or a verifier challenged; the DisputeGame owns the task.
enum TaskStatus {
    None,
    Open,
    Assigned,
    Revealed,
    Contested,
    Accepted,
    Cancelled
}

/// @dev Voided: released by a dispute that could not be adjudicated (no referee); not slashed.
enum ReplicaStatus {
    None,
    Assigned,
    Committed,
    Revealed,
    Accepted,
    Slashed,
    Late,
    Voided
}

/// @notice What a submitter passes to JobRegistry.postJob.
/// @dev Windows of 0 take the registry's defaults.
struct PostJobParams {
    bytes32 manifestCid; // sha2-256 digest of the manifest's CIDv0
    bytes32 manifestHash; // keccak256 of the manifest bytes
    bytes32 initialStateHash; // round-0 input state hash (h_0 of every round-0 shard task)
    uint32 shards;
    uint32 rounds;
    uint32 stepsPerRound;
    uint32 checkpointInterval; // k; stepsPerRound % k == 0
    uint256 paymentPerTask; // paid to each accepted replica of each task
    uint8 replication; // 1 = optimistic, 2 = commit-reveal replicated
    uint256 stakePerReplica; // stake locked by each replica while it holds the task
    uint8 deviceClass;
    uint32 minMemoryMb;
    uint32 profileBit; // exactly one bit of the profile mask
    uint64 executionWindow;
    uint64 revealWindow;
    uint64 challengeWindow;
}

struct Job {
    address submitter;
    JobStatus status;
    uint8 replication;
    uint8 deviceClass;
    bool everAssigned;
    uint32 shards;
    uint32 rounds;
    uint32 currentRound;
    uint32 acceptedInRound;
    uint32 stepsPerRound;
    uint32 checkpointInterval;
    uint32 minMemoryMb;
    uint32 profileBit;
    uint64 executionWindow;
    uint64 revealWindow;
    uint64 challengeWindow;
    uint64 postedAt;
    bytes32 manifestCid;
    bytes32 manifestHash;
    bytes32 roundInput;
    bytes32 modelHash;
    bytes32 modelCid;
    uint256 paymentPerTask;
    uint256 stakePerReplica;
    uint256 escrow; // tokens still held for this job (not yet credited or refunded)
}

struct Task {
    uint256 jobId;
    uint32 round;
    uint32 index;
    uint32 n; // trace length: stepsPerRound / k for TRAIN, 1 for AGGREGATE
    TaskKind kind;
    TaskStatus status;
    uint64 createdAt;
    uint64 openSince; // when a slot last became empty without refill (0 when all filled)
    uint64 challengeDeadline;
    uint32 drawNonce;
    bytes32 inputHash;
    bytes32 finalHash;
    bytes32 resultCid;
}

struct Replica {
    address node;
    ReplicaStatus status;
    uint64 deadline; // commit/submit deadline while Assigned, reveal deadline while Committed, 0 = waiting
    bytes32 commitment;
    bytes32 root;
    bytes32 finalHash;
    bytes32 resultCid;
}

/// @notice Everything the DisputeGame needs to know about a task, in one read.
struct TaskContext {
    uint256 jobId;
    TaskKind kind;
    TaskStatus status;
    uint32 n;
    uint32 k; // steps per checkpoint segment (1 for AGGREGATE)
    uint64 challengeDeadline;
    bytes32 inputHash;
    uint256 stakePerReplica;
    uint8 replication;
    uint8 deviceClass;
    uint32 minMemoryMb;
    uint32 profileBit;
}

struct Node {
    uint8 roles;
    uint8 deviceClass;
    uint32 memoryMb;
    uint32 throughput;
    uint32 profiles;
    uint16 slot; // 1-based position in the selection trees (0 = not registered)
    uint64 registeredAt;
    uint64 lastSeen; // last heartbeat or accepted work
    uint64 unbondingEnds;
    uint256 stake;
    uint256 locked;
    uint256 pendingUnstake;
    string multiaddr;
}

struct Reputation {
    uint32 tasksCompleted;
    uint32 tasksLate;
    uint32 disputesWon;
    uint32 disputesLost;
    uint256 totalSlashed;
}

enum DisputePhase {
    None,
    Bisect0, // level 0: checkpoint trace
    StepRoots, // both parties submit a per-step root for the pinpointed segment
    Bisect1, // level 1: per-step trace of the segment
    AwaitingPanel, // no eligible referee yet; drawPanel retries until panelTimeout
    Voting, // referees commit then reveal h_{s+1}
    Resolved
}

enum DisputeOutcome {
    None,
    ChallengerWins,
    DefenderWins,
    BothLose,
    Voided
}

/// @notice One-transaction pinpointing: proofs of both parties' leaves at `index` (equal) and `index + 1` (different).
struct PinpointProof {
    uint32 index;
    bytes32 agreed;
    bytes32 claimA;
    bytes32 claimB;
    bytes32[] proofAgreedA;
    bytes32[] proofClaimA;
    bytes32[] proofAgreedB;
    bytes32[] proofClaimB;
}
