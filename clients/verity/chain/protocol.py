"""Protocol facts in Python: the ONE mirror of contracts/types/VerityTypes.sol for every client.

Enums (values exactly as Solidity's, names in UPPER_SNAKE), role / device / profile bits, the
three commitment encodings, the escrow formula and typed builders of the structs clients pass
to the contracts. tests/chain/test_protocol_module.py parses VerityTypes.sol and the compiled
ABIs and fails when this file and the contracts disagree. docs/protocol-v2.md is the design.
"""
from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple, Sequence

from eth_abi import encode
from eth_utils import keccak, to_checksum_address

__all__ = [
    "JobStatus", "TaskKind", "TaskStatus", "ReplicaStatus", "DisputePhase", "DisputeOutcome", "Verdict", "PanelPhase",
    "ROLE_SOLVER", "ROLE_VERIFIER", "ROLE_REFEREE", "DEVICE_CPU", "DEVICE_CUDA", "PROFILE_CPU_F32_STRICT",
    "PROFILE_CUDA_F32_STRICT", "PROFILE_PORTABLE_F32", "PROFILE_BITS", "BPS", "REFEREE_SLASH_REASONS",
    "replica_commitment", "challenge_commitment", "check_commitment", "fee_ticket", "fee_sampled",
    "vote_commitment", "escrow_for", "job_mismatches",
    "PostJobParams", "PinpointProof", "CONTRACTS",
]

# ---------------------------------------------------------------- constants (VerityTypes.sol)

ROLE_SOLVER = 1
ROLE_VERIFIER = 2
ROLE_REFEREE = 4

DEVICE_CPU = 0
DEVICE_CUDA = 1

PROFILE_CPU_F32_STRICT = 1
PROFILE_CUDA_F32_STRICT = 2
PROFILE_PORTABLE_F32 = 4
PROFILE_BITS = {"cpu-f32-strict": PROFILE_CPU_F32_STRICT, "cuda-f32-strict": PROFILE_CUDA_F32_STRICT,
                "portable-f32": PROFILE_PORTABLE_F32}

BPS = 10_000

# IRefereePanel.RefereeSlashed `reason`
REFEREE_SLASH_REASONS = {1: "did not commit", 2: "did not reveal", 3: "voted against the majority"}

# The deployment's contracts, in deploy order (docs/protocol-v2.md), as the deployments file names them.
CONTRACTS = ("VerityToken", "NodeRegistry", "BlockhashRandomness", "JobEscrow", "JobRegistry", "RefereePanel",
             "DisputeGame", "VerificationFees")


# ---------------------------------------------------------------- enums (value 0 = does not exist)


class JobStatus(IntEnum):
    NONE = 0
    ACTIVE = 1
    COMPLETED = 2
    CANCELLED = 3
    FAILED = 4  # declined for invalid inputs by FAIL_DECLINES distinct nodes (JobRegistryBase)


class TaskKind(IntEnum):
    NONE = 0
    TRAIN = 1
    AGGREGATE = 2


class TaskStatus(IntEnum):
    NONE = 0
    OPEN = 1
    ASSIGNED = 2
    REVEALED = 3   # a candidate result waits out its challenge window (replicas' agreement included)
    CONTESTED = 4  # two replicas revealed different results: one replica-vs-replica dispute
    ACCEPTED = 5
    CANCELLED = 6


class ReplicaStatus(IntEnum):
    NONE = 0
    ASSIGNED = 1
    COMMITTED = 2
    REVEALED = 3
    ACCEPTED = 4
    SLASHED = 5
    LATE = 6
    VOIDED = 7


class DisputePhase(IntEnum):
    NONE = 0
    BISECT0 = 1
    STEP_ROOTS = 2
    BISECT1 = 3
    JUDGING = 4  # the RefereePanel recomputes the pinpointed step
    RESOLVED = 5


class DisputeOutcome(IntEnum):
    NONE = 0
    CHALLENGER_WINS = 1
    DEFENDER_WINS = 2
    BOTH_LOSE = 3
    VOIDED = 4


class Verdict(IntEnum):
    NONE = 0
    FOR_A = 1
    FOR_B = 2
    NEITHER = 3
    NO_DECISION = 4


class PanelPhase(IntEnum):
    NONE = 0
    SEATING = 1
    COMMITTING = 2
    REVEALING = 3
    DECIDED = 4


# ---------------------------------------------------------------- commitments


def _b32(value) -> bytes:
    """bytes32 from bytes / HexBytes / 0x-hex; shorter values are left-padded (as Solidity reads them)."""
    if isinstance(value, str):
        value = bytes.fromhex(value.removeprefix("0x"))
    raw = bytes(value)
    if len(raw) > 32:
        raise ValueError(f"not a bytes32: {len(raw)} bytes")
    return raw.rjust(32, b"\0")


def _addr(value) -> str:
    return to_checksum_address(getattr(value, "address", value))


def replica_commitment(root, final_hash, salt, node) -> bytes:
    """JobRegistry.commit: keccak256(abi.encode(bytes32 root, bytes32 finalHash, bytes32 salt, address node))."""
    return keccak(encode(["bytes32", "bytes32", "bytes32", "address"],
                         [_b32(root), _b32(final_hash), _b32(salt), _addr(node)]))


def challenge_commitment(task_id: int, root, final_hash, result_cid, salt, challenger) -> bytes:
    """DisputeGame.commitChallenge: keccak256(abi.encode(uint256 taskId, bytes32 root, bytes32 finalHash,
    bytes32 resultCid, bytes32 salt, address challenger)); a copier's address makes another commitment."""
    return keccak(encode(["uint256", "bytes32", "bytes32", "bytes32", "bytes32", "address"],
                         [int(task_id), _b32(root), _b32(final_hash), _b32(result_cid), _b32(salt), _addr(challenger)]))


def check_commitment(task_id: int, final_hash, salt, verifier) -> bytes:
    """VerificationFees.commitCheck: keccak256(abi.encode(uint256 taskId, bytes32 finalHash, bytes32 salt,
    address verifier)); committed blind, opened by `claim`."""
    return keccak(encode(["uint256", "bytes32", "bytes32", "address"],
                         [int(task_id), _b32(final_hash), _b32(salt), _addr(verifier)]))


def fee_ticket(epoch_key, task_id: int) -> int:
    """VerificationFees.ticketOf: the first 8 bytes of keccak256(abi.encode(bytes32 epochKey, uint256 taskId))."""
    return int.from_bytes(keccak(encode(["bytes32", "uint256"], [_b32(epoch_key), int(task_id)]))[:8], "big")


def fee_sampled(epoch_key, task_id: int, rate_bps: int) -> bool:
    """VerificationFees.claim's sampling rule: ticket * BPS < rateBps * 2^64."""
    return fee_ticket(epoch_key, task_id) * BPS < int(rate_bps) << 64


def vote_commitment(dispute_id: int, vote, salt, referee) -> bytes:
    """RefereePanel.commitVote: keccak256(abi.encode(uint256 disputeId, bytes32 vote, bytes32 salt, address referee))."""
    return keccak(encode(["uint256", "bytes32", "bytes32", "address"],
                         [int(dispute_id), _b32(vote), _b32(salt), _addr(referee)]))


# ---------------------------------------------------------------- escrow


POSTER_BOND = 10**18  # JobRegistryBase.POSTER_BOND: deposited with every job's escrow (1 VRT)
FAIL_DECLINES = 3  # JobRegistryBase.FAIL_DECLINES: distinct invalid-input declines of one task that fail its job
DECLINE_GRACE_BPS = 2_500  # JobRegistryBase.DECLINE_GRACE_BPS: the share of a slot's window it may decline in


def escrow_for(payment: int, replication: int, shards: int, rounds: int) -> int:
    """A job's escrow: every replica of every task (shards TRAIN + 1 AGGREGATE per round) paid once, plus the
    poster bond (returned with the unspent escrow unless the job is failed for invalid inputs)."""
    return int(payment) * int(replication) * (int(shards) + 1) * int(rounds) + POSTER_BOND


# ---------------------------------------------------------------- structs (ABI field order)


class PostJobParams(NamedTuple):
    """JobRegistry.postJob's argument; a tuple in ABI field order (web3 and ape take it as is).
    Windows of 0 take the registry's defaults."""

    manifestCid: bytes
    manifestHash: bytes
    initialStateHash: bytes
    shards: int
    rounds: int
    stepsPerRound: int
    checkpointInterval: int
    paymentPerTask: int
    replication: int
    stakePerReplica: int
    deviceClass: int = DEVICE_CPU
    minMemoryMb: int = 0
    profileBit: int = PROFILE_CPU_F32_STRICT
    executionWindow: int = 0
    revealWindow: int = 0
    challengeWindow: int = 0

    def escrow(self) -> int:
        return escrow_for(self.paymentPerTask, self.replication, self.shards, self.rounds)

    @property
    def n(self) -> int:
        """Trace length of a TRAIN task."""
        return self.stepsPerRound // self.checkpointInterval


class PinpointProof(NamedTuple):
    """DisputeGame's one-transaction pinpointing: both parties' leaves at `index` (equal) and `index + 1`."""

    index: int
    agreed: bytes
    claimA: bytes
    claimB: bytes
    proofAgreedA: Sequence[bytes]
    proofClaimA: Sequence[bytes]
    proofAgreedB: Sequence[bytes]
    proofClaimB: Sequence[bytes]

    def as_abi(self) -> tuple:
        """A plain tuple with list proofs (what eth_abi encodes)."""
        return (int(self.index), _b32(self.agreed), _b32(self.claimA), _b32(self.claimB),
                *[[_b32(x) for x in p] for p in self[4:]])


def job_mismatches(job, manifest) -> list[str]:
    """What an on-chain Job says differently from the manifest it points to (empty = they agree).

    A node runs this before training: a job whose parameters disagree with its manifest would train in full and then
    revert at reveal (trace length) or be disputed, so it is declined as unusable input instead."""
    expected = {
        "shards": len(manifest.shards),
        "rounds": manifest.rounds,
        "stepsPerRound": manifest.steps_per_round,
        "checkpointInterval": manifest.checkpoint_interval,
        "replication": manifest.verification.replication,
        "profileBit": PROFILE_BITS.get(manifest.determinism, 0),  # 0: a profile with no on-chain bit
        "deviceClass": DEVICE_CUDA if manifest.hardware.device_class == "cuda" else DEVICE_CPU,
        "minMemoryMb": manifest.hardware.min_memory_mb,  # the draw's filter: a job must not admit smaller nodes
    }
    return [f"{name}: job {int(getattr(job, name))}, manifest {want}"
            for name, want in expected.items() if int(getattr(job, name)) != want]
