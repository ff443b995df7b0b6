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
    "REGION_EUROPE", "REGION_NORTH_AMERICA", "REGION_SOUTH_AMERICA", "REGION_ASIA", "REGION_AFRICA", "REGION_OCEANIA",
    "MAX_REGION", "REGIONS", "region_code", "region_name", "MAX_BANDWIDTH_FLOOR_MBPS", "BANDWIDTH_TIER_FLOORS_MBPS",
    "bandwidth_tier", "SELECTION_EPOCH_BLOCKS", "MIN_DRAW_BLOCKS", "min_windows", "decline_grace",
    "replica_commitment", "challenge_commitment", "check_commitment", "fee_ticket", "fee_sampled",
    "vote_commitment", "escrow_for", "job_mismatches",
    "PostJobParams", "PinpointProof", "CONTRACTS", "DEVNET_ONLY_CONTRACTS", "DEVNET_CHAIN_ID",
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
# Selection epochs (issue 23): a draw reads the weights as its epoch began; a random value is readable only in its
# target block's epoch, whose last MIN_DRAW_BLOCKS blocks a target never falls in.
SELECTION_EPOCH_BLOCKS = 32
MIN_DRAW_BLOCKS = 8

# Network regions (NodeRegistry.declareNetwork, PostJobParams.region): 0 = undeclared (a node) / any (a job).
REGION_EUROPE = 1
REGION_NORTH_AMERICA = 2
REGION_SOUTH_AMERICA = 3
REGION_ASIA = 4
REGION_AFRICA = 5
REGION_OCEANIA = 6
MAX_REGION = 6
# The names a manifest's `hardware.region` and the `--region` options take.
REGIONS = {"europe": REGION_EUROPE, "north-america": REGION_NORTH_AMERICA, "south-america": REGION_SOUTH_AMERICA,
           "asia": REGION_ASIA, "africa": REGION_AFRICA, "oceania": REGION_OCEANIA}

# Bandwidth tiers (NodeLens.bandwidthTier, NodeMath.bandwidthTier): a node sits in the tier of the largest floor its declared Mbit/s
# reach; a job's minimum rounds UP to a floor (asking 50 draws only nodes of >= 100 Mbit/s), at most the top one.
BANDWIDTH_TIER_FLOORS_MBPS = (0, 10, 100, 1_000, 10_000)
MAX_BANDWIDTH_FLOOR_MBPS = 10_000


def region_code(name: str | None) -> int:
    """The on-chain code of a region name ('' or None: 0, any/undeclared); KeyError names the unknown one."""
    if not name:
        return 0
    try:
        return REGIONS[name]
    except KeyError:
        raise KeyError(f"{name!r} is not a region ({', '.join(REGIONS)})") from None


def region_name(code: int) -> str:
    """The name of an on-chain region code ('' for 0)."""
    return next((n for n, c in REGIONS.items() if c == int(code)), "" if int(code) == 0 else f"region {int(code)}")


def bandwidth_tier(mbps: int) -> int:
    """The tier a node declaring `mbps` sits in (NodeLens.bandwidthTier, NodeMath.bandwidthTier)."""
    return max(t for t, floor in enumerate(BANDWIDTH_TIER_FLOORS_MBPS) if int(mbps) >= floor)

# IRefereePanel.RefereeSlashed `reason`
REFEREE_SLASH_REASONS = {1: "did not commit", 2: "did not reveal", 3: "voted against the majority"}

# The deployment's contracts, in deploy order (docs/protocol-v2.md), as the deployments file names them. On the
# devnet the DevnetFaucet deploys the token (its only minter) in one transaction; the Timelock comes last and owns
# every Ownable contract once the wiring is done (issue 9, governance).
CONTRACTS = ("VerityToken", "DevnetFaucet", "NodeRegistry", "NodeLens", "BlockhashRandomness", "JobEscrow",
             "JobRegistry", "RefereePanel", "DisputeGame", "DisputeLens", "VerificationFees", "Timelock")
# Deployed on the devnet (chain 31337) only: DevnetFaucet's constructor reverts on any other chain.
DEVNET_ONLY_CONTRACTS = ("DevnetFaucet",)
DEVNET_CHAIN_ID = 31337


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


def replica_commitment(root, final_hash, result_cid, node) -> bytes:
    """JobRegistry.commit: keccak256(abi.encode(bytes32 root, bytes32 finalHash, bytes32 resultCid, address node)).
    No salt: a trace root cannot be guessed without the training, and an unsalted commitment lets one reveal of
    the same result reveal every replica that committed it (JobRegistry.reveal)."""
    return keccak(encode(["bytes32", "bytes32", "bytes32", "address"],
                         [_b32(root), _b32(final_hash), _b32(result_cid), _addr(node)]))


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
MIN_TASK_STAKE = 10**18  # JobRegistryBase.MIN_TASK_STAKE: the least stakePerReplica a job may ask (1 VRT)
# DisputeGame.MIN_CLOCK_BLOCKS: a party's clock allowance is at least this many blocks of the chain's block time
MIN_CLOCK_BLOCKS = 5
FAIL_DECLINES = 3  # JobRegistryBase.FAIL_DECLINES: distinct invalid-input declines of one task that fail its job
DECLINE_GRACE_BPS = 2_500  # JobRegistryBase.DECLINE_GRACE_BPS: the share of a slot's window it may decline in
# JobRegistryBase's minimum windows: seconds floors, and blocks of JobRegistry.blockSeconds (issue 23)
MIN_WINDOW_SECONDS = {"execution": 30, "reveal": 5, "challenge": 3}
MIN_WINDOW_BLOCKS = {"execution": 16, "reveal": 4, "challenge": 3}


def min_windows(block_seconds: int) -> dict[str, int]:
    """JobRegistryBase._minWindows: each window's seconds floor or its blocks of the chain's block time, the longer."""
    return {k: max(MIN_WINDOW_SECONDS[k], MIN_WINDOW_BLOCKS[k] * int(block_seconds)) for k in MIN_WINDOW_SECONDS}


def decline_grace(window: int) -> int:
    """TaskMachine.decline: seconds after assignment a slot may be declined in, DECLINE_GRACE_BPS of its window (at
    least 4 blocks: a window is at least MIN_WINDOW_BLOCKS["execution"] blocks of the chain's block time)."""
    return int(window) * DECLINE_GRACE_BPS // BPS


DECLINE_NOTE_BYTES = 32  # TaskMachine.decline's `reason`: a bytes32 the node fills with a short ASCII note


def decline_note(text: str) -> bytes:
    """`decline(taskId, invalidInputs, reason)`'s reason: `text` as printable ASCII, cut to 32 bytes, zero-padded."""
    raw = "".join(ch if " " <= ch <= "~" else "?" for ch in str(text)).encode("ascii")[:DECLINE_NOTE_BYTES]
    return raw.ljust(DECLINE_NOTE_BYTES, b"\0")


def read_decline_note(reason: bytes) -> str:
    """A ReplicaDeclined event's reason as text: the node wrote it and nothing checks it, so anything but printable
    ASCII reads as '?' and trailing zero bytes are dropped."""
    return "".join(chr(b) if 0x20 <= b <= 0x7E else "?" for b in bytes(reason).rstrip(b"\0"))


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
    region: int = 0  # REGION_*: the replicas come only from nodes that declared it (0 = any region)
    minBandwidthMbps: int = 0  # rounded up to a bandwidth tier floor by the draw (0 = any)
    resultFloor: int = 0  # seconds after its assignment before a replica may commit or submit (<= half the window)

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
        "region": REGIONS.get(manifest.hardware.region or "", 0),  # the draw's filters: where and how fast
        "minBandwidthMbps": manifest.hardware.min_bandwidth_mbps or 0,
        "challengeWindow": manifest.verification.challenge_window,  # the window a verifier counts on is the chain's
    }
    return [f"{name}: job {int(getattr(job, name))}, manifest {want}"
            for name, want in expected.items() if int(getattr(job, name)) != want]
