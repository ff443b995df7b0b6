"""Everything a node's roles share: chain, storage, caches of job inputs.

Every input fetched from IPFS is checked against what the chain pinned: the
manifest against its keccak256, states against their committed hashes, result
bundles against the revealed roots. Nothing fetched is ever unpickled.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from eth_utils import keccak

from verity.chain import ChainClient
from verity.chain.protocol import job_mismatches
from verity.chain.views import read
from verity.cid import digest_to_cid
from verity.engine import merkle
from verity.engine.checkpoint import checkpoint_bytes, checkpoint_cap, initial_state
from verity.engine.data import Shard, load_shard, shard_cap
from verity.engine.manifest import Manifest, load_manifest
from verity.errors import VerityError
from verity.node.faults import Faults
from verity.node.work import WorkPool
from verity.storage import Storage

MAX_BUNDLE_BYTES = 4 << 20


class InputRejected(VerityError, ValueError):
    def __init__(self, what: str, why: str):
        super().__init__(f"rejected {what}: {why}")


@dataclass
class Bundle:
    """A validated result bundle (docs/protocol.md)."""
    trace: list[bytes]
    checkpoints: dict[int, str]
    k: int
    raw: dict

    @property
    def final_cid(self) -> str:
        return self.checkpoints[len(self.trace) - 1]


def dispute_view(d, dispute_id: int):
    d.disputeId = dispute_id
    sides = getattr(d, "sides", None)
    if sides is not None:
        d.parties = [x.party for x in sides]
        d.roots = [x.root for x in sides]
        d.finals = [x.finalHash for x in sides]
        d.resultCids = [x.resultCid for x in sides]
        d.claims = [x.claim for x in sides]
        d.moved = [bool(x.moved) for x in sides]
    return d


@dataclass
class NodeContext:
    chain: ChainClient
    storage: Storage
    state_dir: Path
    faults: Faults = field(default_factory=Faults)
    work: WorkPool = field(default_factory=lambda: WorkPool(inline=True))  # `node run` passes a threaded pool
    _manifests: dict = field(default_factory=dict)
    _shards: dict = field(default_factory=dict)

    @property
    def me(self) -> str:
        return self.chain.address

    # ------------------------------------------------------------ chain reads
    def job(self, job_id: int):
        return read(self.chain, self.chain.jobs, "getJob", job_id)

    def task(self, task_id: int):
        return read(self.chain, self.chain.jobs, "getTask", task_id)

    def replicas(self, task_id: int) -> list:
        return read(self.chain, self.chain.jobs, "getReplicas", task_id)

    def dispute(self, dispute_id: int):
        """The dispute record, with per-party lists (`parties`, `roots`, `finals`, `resultCids`, `claims`, `moved`:
        index 0 = A, the challenger; 1 = B, the defender) derived from its `sides`."""
        return dispute_view(read(self.chain, self.chain.game, "getDispute", dispute_id), dispute_id)

    # ------------------------------------------------------------ inputs
    def manifest(self, job_id: int) -> Manifest:
        if job_id not in self._manifests:
            job = self.job(job_id)
            raw = self.storage.get_bytes(digest_to_cid(job.manifestCid), max_bytes=1 << 20)
            if keccak(raw) != bytes(job.manifestHash):
                raise InputRejected(f"manifest of job {job_id}", "keccak256 differs from the on-chain manifestHash")
            m = load_manifest(raw)
            wrong = job_mismatches(job, m)
            if wrong:
                raise InputRejected(f"job {job_id}", "on-chain parameters differ from its manifest: " + "; ".join(wrong))
            self._manifests[job_id] = m
        return self._manifests[job_id]

    def shard(self, job_id: int, index: int) -> Shard:
        key = (job_id, index)
        if key not in self._shards:
            m = self.manifest(job_id)
            ref = m.shards[index]
            data = self.storage.get_bytes(ref.cid, max_bytes=shard_cap(m.data, ref.samples))
            self._shards[key] = load_shard(data, m.data, samples=ref.samples, source=f"shard {index} of job {job_id}")
        return self._shards[key]

    def bundle(self, result_cid: bytes, root: bytes | None = None) -> Bundle:
        raw = self.storage.get_json(digest_to_cid(result_cid), max_bytes=MAX_BUNDLE_BYTES)
        try:
            trace = [bytes.fromhex(h[2:]) for h in raw["trace"]]
            checkpoints = {int(j): str(c) for j, c in raw["checkpoints"].items()}
            k = int(raw["k"])
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InputRejected(f"result bundle {digest_to_cid(result_cid)}", f"malformed: {exc}") from None
        if any(len(h) != 32 for h in trace) or not 1 < len(trace) <= 1 << 20:
            raise InputRejected(f"result bundle {digest_to_cid(result_cid)}", "bad trace")
        if root is not None and merkle.root(trace) != bytes(root):
            raise InputRejected(f"result bundle {digest_to_cid(result_cid)}", "trace does not match the committed root")
        return Bundle(trace, checkpoints, k, raw)

    def state_bytes(self, cid: str, expected_hash: bytes, manifest: Manifest) -> bytes:
        from verity.engine.checkpoint import load_checkpoint

        data = self.storage.get_bytes(cid, max_bytes=checkpoint_cap(manifest))
        load_checkpoint(data, manifest, expected_hash=bytes(expected_hash), source=cid)  # validates shape/dtype/hash
        return data

    def round_input(self, task) -> bytes:
        """The step-0 state every shard task of `task.round` starts from, checked against `task.inputHash`."""
        m = self.manifest(task.jobId)
        if task.round == 0:
            weights = self.storage.get_bytes(m.init.weights, max_bytes=checkpoint_cap(m)) if m.init.weights else None
            state = initial_state(m, weights)
            if state.hash != bytes(task.inputHash):
                raise InputRejected(f"round 0 input of job {task.jobId}", "initial state hash differs from the chain's")
            return checkpoint_bytes(state, m)
        prev = self.task(self.chain.call(self.chain.jobs.functions.taskOf(task.jobId, task.round - 1, len(m.shards))))
        bundle = self.bundle(prev.resultCid)
        return self.state_bytes(bundle.final_cid, prev.finalHash, m)

    def shard_finals(self, task) -> tuple[list[bytes], list[bytes]]:
        """The accepted final states of the round's shard tasks, in shard order (AGGREGATE inputs)."""
        m = self.manifest(task.jobId)
        states, hashes = [], []
        for i in range(len(m.shards)):
            t = self.task(self.chain.call(self.chain.jobs.functions.taskOf(task.jobId, task.round, i)))
            bundle = self.bundle(t.resultCid)
            states.append(self.state_bytes(bundle.final_cid, t.finalHash, m))
            hashes.append(bytes(t.finalHash))
        return states, hashes

    def workdir(self, *parts) -> Path:
        path = self.state_dir.joinpath(*map(str, parts))
        path.mkdir(parents=True, exist_ok=True)
        return path

