"""Everything a node's roles share: chain, storage, caches of job inputs.

Every input fetched from IPFS is checked against what the chain pinned: the
manifest against its keccak256, states against their committed hashes, result
bundles against the revealed roots. Nothing fetched is ever unpickled.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from eth_utils import keccak

from verity.chain import ChainClient
from verity.chain.protocol import TaskKind, job_mismatches
from verity.chain.views import read
from verity.cid import InvalidCid, cid_to_digest, digest_to_cid
from verity.engine import merkle
from verity.engine.checkpoint import checkpoint_bytes, checkpoint_cap, initial_state
from verity.engine.data import Shard, load_shard, shard_cap
from verity.engine.manifest import Manifest, load_manifest
from verity.errors import HashMismatch, StateInvalid, VerityError
from verity.node.faults import Faults
from verity.node.work import WorkPool
from verity.storage import Storage
from verity.storage.errors import StorageError

log = logging.getLogger("verity.node.context")

MAX_BUNDLE_BYTES = 4 << 20
ZERO32 = b"\0" * 32


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
    _served: dict = field(default_factory=dict)  # (task id, finalHash) -> (cid digest, root) that served it last
    _recomputed: set = field(default_factory=set)  # accepted task ids no network source yielded (P10: reported)
    # processes (GPUs on CUDA) one training task may use: run_task(workers=...) with the most of them that divide
    # the job's micro_batches (engine/parallel.py); the trace is the same with any number
    train_processes: int = 1
    # verity.node.metrics.NodeMetrics when `node run --metrics-port` serves metrics (training step times, results'
    # margins); None: nothing is measured
    metrics: object | None = None
    # verity.node.netprobe.NetworkObserver when `node run` measures its fetches of task inputs (rate, self-demotion);
    # None: nothing is measured
    network: object | None = None

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
        return dispute_view(read(self.chain, self.chain.dispute_lens, "getDispute", dispute_id), dispute_id)

    # ------------------------------------------------------------ inputs
    def manifest(self, job_id: int, timeout: float | None = None) -> Manifest:
        """The job's manifest, checked against the chain (cached). `timeout`: seconds the fetch may wait (default:
        the storage's), for a caller that must decide within a deadline."""
        if job_id not in self._manifests:
            job = self.job(job_id)
            raw = self.storage.get_bytes(digest_to_cid(job.manifestCid), max_bytes=1 << 20, timeout=timeout)
            if keccak(raw) != bytes(job.manifestHash):
                raise InputRejected(f"manifest of job {job_id}", "keccak256 differs from the on-chain manifestHash")
            m = load_manifest(raw)
            wrong = job_mismatches(job, m)
            if wrong:
                raise InputRejected(f"job {job_id}", "on-chain parameters differ from its manifest: " + "; ".join(wrong))
            self._manifests[job_id] = m
        return self._manifests[job_id]

    def shard(self, job_id: int, index: int, timeout: float | None = None) -> Shard:
        key = (job_id, index)
        if key not in self._shards:
            m = self.manifest(job_id, timeout)
            ref = m.shards[index]
            data = self.input_bytes(ref.cid, shard_cap(m.data, ref.samples), timeout)
            self._shards[key] = load_shard(data, m.data, samples=ref.samples, source=f"shard {index} of job {job_id}")
        return self._shards[key]

    def input_bytes(self, cid: str, max_bytes: int, timeout: float | None = None) -> bytes:
        """storage.get_bytes of a task input (shard, weights, checkpoint); with `network`, a fetch of what this
        node's IPFS node did not hold is timed into it (node/netprobe.py)."""
        if self.network is None:
            return self.storage.get_bytes(cid, max_bytes=max_bytes, timeout=timeout)
        held = self.storage.holds(cid)
        started = time.monotonic()
        data = self.storage.get_bytes(cid, max_bytes=max_bytes, timeout=timeout)
        if not held:
            self.network.fetched(len(data), time.monotonic() - started)
        return data

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

        data = self.input_bytes(cid, checkpoint_cap(manifest))
        load_checkpoint(data, manifest, expected_hash=bytes(expected_hash), source=cid)  # validates shape/dtype/hash
        return data

    def round_input(self, task) -> bytes:
        """The step-0 state every shard task of `task.round` starts from, checked against `task.inputHash`."""
        m = self.manifest(task.jobId)
        if task.round == 0:
            weights = self.input_bytes(m.init.weights, checkpoint_cap(m)) if m.init.weights else None
            state = initial_state(m, weights)
            if state.hash != bytes(task.inputHash):
                raise InputRejected(f"round 0 input of job {task.jobId}", "initial state hash differs from the chain's")
            return checkpoint_bytes(state, m)
        prev_id = self.chain.call(self.chain.jobs.functions.taskOf(task.jobId, task.round - 1, len(m.shards)))
        return self.accepted_final(prev_id, self.task(prev_id), m)

    def aggregate_inputs(self, task) -> dict:
        """What an AGGREGATE of `task.round` reads besides the finals: for jobs with modules or an outer optimizer,
        the round's input state (frozen tensors, the pseudo-gradient's base, the outer momentum), bound on-chain as
        the inputHash of the round's TRAIN tasks; nothing otherwise (engine.aggregate.needs_round_input)."""
        from verity.engine.aggregate import needs_round_input

        m = self.manifest(task.jobId)
        if not needs_round_input(m):
            return {}
        first = self.task(self.chain.call(self.chain.jobs.functions.taskOf(task.jobId, task.round, 0)))
        return {"round_input": self.round_input(first), "round_input_hash": bytes(first.inputHash)}

    def shard_finals(self, task) -> tuple[list[bytes], list[bytes]]:
        """The accepted final states of the round's shard tasks, in shard order (AGGREGATE inputs)."""
        m = self.manifest(task.jobId)
        states, hashes = [], []
        for i in range(len(m.shards)):
            tid = self.chain.call(self.chain.jobs.functions.taskOf(task.jobId, task.round, i))
            t = self.task(tid)
            states.append(self.accepted_final(tid, t, m))
            hashes.append(bytes(t.finalHash))
        return states, hashes

    # ------------------------------------------------------------ accepted results (P10)
    def accepted_final(self, task_id: int, task, manifest: Manifest) -> bytes:
        """The final state bytes of an accepted task, from whichever source yields them (P10).

        Acceptance on-chain does not prove the accepted bundle is retrievable: a replica paid for its task may never
        upload it. Bundles are deterministic and checkpoints content-addressed, so any replica that revealed the
        same final hash, or our own recomputation, yields the same state. Tried in order, each checked (trace
        against its committed root where known, the final state against the accepted finalHash): the source that
        served last time, the task's resultCid, every replica's resultCid whose finalHash is the accepted one (at
        most replication + 1 network sources), then one local recomputation. A missing or malformed source is
        logged and skipped; our own IPFS node being unreachable (ConnectionError) propagates, to be retried."""
        final = bytes(task.finalHash)
        key = (int(task_id), final)
        failures = 0
        for what, digest, root in self._bundle_sources(task_id, task, key):
            try:
                data = self._final_from_bundle(digest, root, final, manifest)
            except ConnectionError:
                raise
            except (StorageError, InputRejected, StateInvalid, HashMismatch, InvalidCid) as exc:
                failures += 1
                log.warning("task %s: final state not available from %s (%s): %s: %s", task_id, what,
                            digest_to_cid(digest), type(exc).__name__, exc)
                continue
            self._served[key] = (digest, root)
            if failures:
                log.warning("task %s: final state served by %s (%s) after %d unusable source(s)", task_id, what,
                            digest_to_cid(digest), failures)
            return data
        log.warning("task %s: no network source yields the accepted final 0x%s; recomputing it", task_id,
                    final.hex()[:8])
        data, digest, root = self._recompute_final(task_id, task, final, manifest)
        self._served[key] = (digest, root)
        self._recomputed.add(int(task_id))
        log.warning("task %s: final state served by our own recomputation (%s, now held by our node)", task_id,
                    digest_to_cid(digest))
        return data

    def unavailable_inputs(self, task) -> list[int]:
        """P10: the indices of `task`'s inputs whose accepted bundle no network source yielded, so that we recomputed
        them (JobRegistry.reportUnavailable's numbering: an AGGREGATE's inputs are its round's shards; a later round's
        TRAIN task has one, the previous AGGREGATE). An input is paid only if some accepted consumer found it."""
        shards = len(self.manifest(task.jobId).shards)
        task_of = self.chain.jobs.functions.taskOf
        if TaskKind(task.kind) == TaskKind.AGGREGATE:
            ids = [self.chain.call(task_of(task.jobId, task.round, i)) for i in range(shards)]
        elif int(task.round) > 0:
            ids = [self.chain.call(task_of(task.jobId, task.round - 1, shards))]
        else:
            ids = []
        return [i for i, tid in enumerate(ids) if int(tid) in self._recomputed]

    def _bundle_sources(self, task_id: int, task, key) -> list[tuple[str, bytes, bytes | None]]:
        """(label, cid digest, root or None) of each distinct network source to try: at most replication + 1."""
        final = key[1]
        replicas = list(self.replicas(task_id))
        matching = [(i, r) for i, r in enumerate(replicas) if bytes(r.finalHash) == final]
        own_cid = bytes(task.resultCid)
        own_root = next((bytes(r.root) for _, r in matching if bytes(r.resultCid) == own_cid), None)
        candidate_root = bytes(getattr(task, "candidateRoot", None) or ZERO32)
        if own_root is None and candidate_root != ZERO32:
            own_root = candidate_root  # a challenger's result won: its root is the task's candidateRoot
        sources = [("the source that served it before", *self._served[key])] if key in self._served else []
        sources.append(("the task's resultCid", own_cid, own_root))
        sources += [(f"replica {i}'s resultCid", bytes(r.resultCid), bytes(r.root)) for i, r in matching]
        distinct, seen = [], set()
        for what, digest, root in sources:
            if digest != ZERO32 and digest not in seen:  # a zero cid: nothing revealed
                seen.add(digest)
                distinct.append((what, digest, root))
        return distinct[:len(replicas) + 1]

    def _final_from_bundle(self, digest: bytes, root: bytes | None, final: bytes, manifest: Manifest) -> bytes:
        bundle = self.bundle(digest, root)
        if bundle.trace[-1] != final:
            raise InputRejected(f"result bundle {digest_to_cid(digest)}", "its trace ends at a different final hash")
        try:
            final_cid = bundle.final_cid
        except KeyError:
            raise InputRejected(f"result bundle {digest_to_cid(digest)}", "no checkpoint for the final state") from None
        return self.state_bytes(final_cid, final, manifest)

    def _recompute_final(self, task_id: int, task, final: bytes, manifest: Manifest) -> tuple[bytes, bytes, bytes]:
        """Recompute the task (deterministic) and take its final state from the bundle it stored on our node."""
        from verity.node.compute import compute_result  # compute.py imports this module

        res = compute_result(self, task_id, task, label="recover")
        if bytes(res.final) != final:
            raise InputRejected(f"recomputed result of task {task_id}",
                                f"final 0x{bytes(res.final).hex()} differs from the accepted 0x{final.hex()}")
        digest = cid_to_digest(res.result_cid)
        try:
            data = self._final_from_bundle(digest, bytes(res.root), final, manifest)
        except ConnectionError:
            raise
        except (StorageError, StateInvalid, HashMismatch, InvalidCid) as exc:  # e.g. a checkpoint not stored
            raise InputRejected(f"recomputed result of task {task_id}",
                                f"its own bundle does not yield the final state: {type(exc).__name__}: {exc}") from None
        return data, digest, bytes(res.root)

    def workdir(self, *parts) -> Path:
        path = self.state_dir.joinpath(*map(str, parts))
        path.mkdir(parents=True, exist_ok=True)
        return path

