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
uint32 constant PROFILE_PORTABLE_F32 = 4; // same bits on any CPU or GPU (docs/engine.md, "Portable profile")

uint256 constant BPS = 10_000;

/// @dev Longest wait a task's own execution window can buy the parties of its dispute (their chess clocks) and its
///      referees (their commit window): whoever had the execution window for every step can replay one in it.
uint64 constant WORK_WINDOW_CAP = 1 hours;

/// @dev Selection epochs (issue 23, "draws fixed at request time"): a draw reads the node weights as they stood when
///      its epoch began (NodeRegistry), and a random value is readable only inside its target block's epoch
///      (BlockhashRandomness), so nothing a party changes once the value is known reaches the draw. A target leaves
///      at least MIN_DRAW_BLOCKS blocks of its epoch to land the draw; otherwise it moves to the next epoch's first
///      block. A weight change takes effect within one epoch (32 blocks: 6.4 min at 12 s, 64 s at 2 s).
uint256 constant SELECTION_EPOCH_BLOCKS = 32;
uint256 constant MIN_DRAW_BLOCKS = 8;

/// @dev Network regions a node may declare (NodeRegistry.declareNetwork) and a job may ask for (PostJobParams.region).
///      0 = undeclared (a node) or any region (a job); a region job draws only nodes that declared that region.
uint8 constant REGION_EUROPE = 1;
uint8 constant REGION_NORTH_AMERICA = 2;
uint8 constant REGION_SOUTH_AMERICA = 3;
uint8 constant REGION_ASIA = 4;
uint8 constant REGION_AFRICA = 5;
uint8 constant REGION_OCEANIA = 6;
uint8 constant MAX_REGION = 6;

/// @dev Highest bandwidth tier floor, Mbit/s (NodeRegistry floors 0, 10, 100, 1 000, 10 000): the most a job may ask
///      for (PostJobParams.minBandwidthMbps); a larger minimum would read no tier.
uint32 constant MAX_BANDWIDTH_FLOOR_MBPS = 10_000;

enum JobStatus {
    None,
    Active,
    Completed,
    Cancelled,
    Failed // declined for invalid inputs by FAIL_DECLINES distinct nodes: refunded minus the poster bond
}

enum TaskKind {
    None,
    Train,
    Aggregate
}

/// @dev Open: some replica slot is empty. Assigned: all slots filled, commit/reveal running.
///      Revealed: a candidate result (the replicas' agreed result, a single replica's, or a dispute winner's)
///      waits out its challenge window; verifiers may open any number of disputes against it meanwhile.
///      Contested: two replicas revealed different results; the DisputeGame runs one replica-vs-replica dispute.
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
    uint8 region; // 0 = any; else only nodes that declared this region are drawn as replicas (REGION_*)
    uint32 minBandwidthMbps; // 0 = any; rounds up to a bandwidth tier floor (NodeRegistry.bandwidthTier)
    // Seconds after its assignment before a replica may commit or submit a result: the job's declared work, <= half
    // the execution window. A fee check must be committed before any result is public; a solver that fabricates and
    // submits at once would otherwise shut every fee check out (issue 23). 0 = none.
    uint32 resultFloor;
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
    uint32 executionWindow; // <= MAX_WINDOW (7 days)
    uint32 resultFloor; // PostJobParams.resultFloor (shares executionWindow's slot: read together by _checkOnTime)
    uint64 revealWindow;
    uint64 challengeWindow;
    uint64 postedAt;
    uint8 region; // PostJobParams.region: the replicas' draws read only this region's classes (0 = any)
    uint32 minBandwidthMbps; // PostJobParams.minBandwidthMbps (0 = any)
    uint16 lateSlashBps; // JobRegistry.lateSlashBps when posted: a later owner change never reaches this job's nodes
    bool paysCredit; // paymentPerTask >= CREDITED_PAYMENT: its accepted tasks may count toward reputation
    bytes32 manifestCid;
    bytes32 manifestHash;
    bytes32 roundInput;
    bytes32 modelHash;
    bytes32 modelCid;
    uint256 paymentPerTask;
    uint256 stakePerReplica; // (the job's escrow is held by JobEscrow: escrowOf(jobId))
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
    uint8 bannedCount; // nodes banned from the task so far (JobRegistryBase._ban; the ring keeps the last MAX_BANNED)
    uint64 challengeDeadline; // last second a challenge may be committed (reveals until + the job's revealWindow)
    uint32 drawNonce;
    uint32 epoch; // bumps whenever the candidate result changes; disputes opened at an older epoch are stale
    uint32 openDisputes; // live optimistic disputes against the current candidate (finalize waits for 0)
    uint32 revealHold; // seconds the reveal grace starts after challengeDeadline: the last settlement that left the
    // claim standing (issue 25: a challenger that held its reveal behind a same-result dispute may reveal after it)
    uint64 drawRequest; // randomness request the empty slots will be drawn from (P4; kept after the draw)
    address candidate; // a challenger whose result won a dispute and now waits out its own window (0 = replicas')
    uint64 filledAt; // the last draw that filled a slot while another stayed empty (withdrawCommitted waits from it)
    bytes32 inputHash;
    bytes32 finalHash;
    bytes32 resultCid;
    bytes32 candidateRoot; // trace root of `candidate`'s result
}

/// @notice The result a challenge disputes: the task's current candidate and who stands behind it.
/// @dev `coDefender` is a second replica that revealed the identical trace: it may move for the defender. Fate follows
///      claims: both are slashed for a lost checkpoint-level claim (both committed it); for a lost step-level claim
///      only the member that submitted B's step root is (the other is released unpaid).
struct Claim {
    address defender;
    address coDefender;
    bytes32 root;
    bytes32 finalHash;
    bytes32 resultCid;
    uint32 epoch;
    uint64 challengeDeadline;
    uint64 revealGrace; // challenges committed by challengeDeadline may be revealed until challengeDeadline + revealGrace
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
    uint32 executionWindow; // seconds a replica has to do the task's work (the job's window)
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
    uint8 region; // declared with NodeRegistry.declareNetwork (0 = undeclared)
    uint32 bandwidthMbps; // declared with NodeRegistry.declareNetwork (0 = undeclared)
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
    Judging, // the RefereePanel recomputes step s; it calls back DisputeGame.onVerdict
    Resolved
}

/// @dev Voided: no verdict (no quorum, no panel, or the dispute went stale); nobody is slashed.
enum DisputeOutcome {
    None,
    ChallengerWins,
    DefenderWins,
    BothLose,
    Voided
}

/// @dev What a referee panel decided about step s: ForA / ForB = a majority of all seats recomputed that party's
///      h_{s+1}; Neither = a majority recomputed a third value (both parties shown wrong); NoDecision = no value
///      reached a majority of the seats, or the panel could not be seated (nobody is slashed for the dispute).
enum Verdict {
    None,
    ForA,
    ForB,
    Neither,
    NoDecision
}

/// @dev Seating: waiting for randomness, then seat() fills empty seats. Committing: seated referees commit.
///      Revealing: every seat committed; referees reveal. Decided: the verdict was passed to the game.
enum PanelPhase {
    None,
    Seating,
    Committing,
    Revealing,
    Decided
}

/// @notice What the DisputeGame asks a RefereePanel to judge.
struct PanelRequest {
    bytes32 claimA; // party A's h_{s+1}
    bytes32 claimB; // party B's h_{s+1}
    address[3] parties; // never seated: A, B and B's co-defender (or 0)
    uint8 deviceClass;
    uint32 minMemoryMb;
    uint32 profileBit;
    uint32 workWindow; // the task's execution window: a referee recomputing one of its steps gets as long to commit
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
