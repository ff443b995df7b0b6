"""The work itself: compute a task's result, the per-step hashes of a segment, one step.

Shared by solvers (their own results), verifiers (re-execution), parties in a
dispute (per-step roots) and referees (the one disputed step).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from eth_utils import keccak

from verity.chain.protocol import TaskKind
from verity.engine import merkle
from verity.engine.aggregate import run_aggregate
from verity.engine.checkpoint import checkpoint_bytes
from verity.engine.parallel import usable_workers
from verity.engine.runner import checkpoint_path, replay_segment, run_task
from verity.engine.state import TaskRef
from verity.node.context import InputRejected, NodeContext
from verity.node.snapshot import WorkItem
from verity.node.work import Cancelled
from verity.storage import canonical_json, cid_of_bytes, cid_of_file

log = logging.getLogger("verity.node.referee")


@dataclass
class Result:
    trace: list[bytes]
    root: bytes
    result_cid: str
    k: int
    # what compute_result(publish=False) kept back: {"files": [paths], "bundle": {...}}; `publish` adds them at reveal
    unpublished: dict | None = None

    @property
    def n(self) -> int:
        return len(self.trace) - 1

    @property
    def final(self) -> bytes:
        return self.trace[-1]

    def proofs(self) -> tuple[list[bytes], list[bytes]]:
        return merkle.proof(self.trace, 0), merkle.proof(self.trace, self.n)


def task_ref(task) -> TaskRef:
    return TaskRef(int(task.jobId), int(task.round), int(task.index))


def compute_result(ctx: NodeContext, task_id: int, task, *, label: str = "solve", publish: bool = True) -> Result:
    """Run the task (TRAIN or AGGREGATE) and name its checkpoints and bundle by CID.

    publish=True adds them to our IPFS node at once. publish=False (solvers, verifiers, auditors: issue 23) only
    computes the CIDs, so nothing of the result can be read, listed among our pins or announced before our own
    commitment is final; `publish` adds the kept files and bundle when the result is revealed."""
    m = ctx.manifest(task.jobId)
    workdir = ctx.workdir(label, task_id)
    held: list[str] = []  # files to add at reveal (publish=False)

    def put(path) -> str:
        if ctx.faults.withhold_checkpoint:  # TEST-ONLY: named, never added
            return cid_of_file(path)
        if publish:
            return ctx.storage.put_file(path)
        held.append(str(path))
        return cid_of_file(path)

    if TaskKind(task.kind) == TaskKind.AGGREGATE:
        states, hashes = ctx.shard_finals(task)
        agg = run_aggregate(m, states, hashes, **ctx.aggregate_inputs(task))
        path = workdir / "aggregate.safetensors"
        path.write_bytes(checkpoint_bytes(agg.state, m))
        trace, k, cids = agg.trace, 1, {1: put(path)}
    else:
        shard = ctx.shard(task.jobId, task.index)
        cids: dict[int, str] = {}
        fresh = [0]  # checkpoints trained now (not resumed from disk): the steps the metrics time

        def store(ck):
            fresh[0] += bool(ck.index and not getattr(ck, "resumed", False))
            if ctx.work.stopping.is_set():  # shutting down: stop training at this checkpoint (it is on disk)
                raise Cancelled(f"{label} task {task_id}")
            if ctx.faults.corrupt_checkpoint:  # TEST-ONLY: a malformed file where the checkpoint should be
                cids[ck.index] = ctx.storage.put_bytes(b"verity:corrupt checkpoint %d of task %d" % (ck.index, task_id))
                return
            cids[ck.index] = put(ck.path)

        if ctx.faults.lazy:
            trace = [bytes(task.inputHash)] * (int(task.n) + 1)
            cids = {j: cid_of_bytes(b"lazy") for j in range(len(trace))}
        else:
            procs = getattr(ctx, "train_processes", 1)   # `node run --train-processes`: same trace with any number
            w = usable_workers(m, procs) if procs > 1 else 1
            res = run_task(m, ctx.round_input(task), shard, task_ref(task), workdir,
                           on_checkpoint=store, expected_input_hash=bytes(task.inputHash),
                           **({"workers": w} if w > 1 else {}))
            trace = res.trace
            if hasattr(ctx, "contention"):  # how much slower than its CPU time a step runs here now (feasibility)
                running = ctx.work.depth().get("long", (0, 1))[1] if hasattr(ctx.work, "depth") else 1
                ctx.contention.observe(res.timings, concurrent=running)
            if getattr(ctx, "metrics", None) is not None:  # seconds per step (`node run --metrics-port`)
                ctx.metrics.trained(label, res.timings.get("train", 0.0), fresh[0] * m.checkpoint_interval,
                                    ctx.contention.factor if hasattr(ctx, "contention") else None)
        k = m.checkpoint_interval
    bundle = {"version": 1, "job": int(task.jobId), "round": int(task.round), "index": int(task.index),
              "k": k, "steps": k * (len(trace) - 1), "trace": ["0x" + h.hex() for h in trace],
              "checkpoints": {str(j): c for j, c in sorted(cids.items())}, "final": cids[len(trace) - 1]}
    if publish:
        return Result(trace, merkle.root(trace), ctx.storage.put_json(bundle), k)
    return Result(trace, merkle.root(trace), cid_of_bytes(canonical_json(bundle)), k,
                  unpublished={"files": held, "bundle": bundle})


def publish(ctx: NodeContext, unpublished: dict, result_cid: str) -> str:
    """Add what compute_result(publish=False) kept back: every checkpoint file, then the bundle, which must come
    out under the CID the commitment named (returned). Idempotent (adding again pins the same CIDs), so a reveal
    retried after a crash publishes again harmlessly."""
    for path in unpublished["files"]:
        ctx.storage.put_file(path)
    cid = ctx.storage.put_json(unpublished["bundle"])
    if cid != result_cid:
        raise RuntimeError(f"the published bundle is {cid}, not the committed {result_cid}")
    return cid


def published(ctx: NodeContext, item: WorkItem) -> bool:
    """Whether the result `item` holds (data "cid", and "unpublished" from compute_result(publish=False)) is on our
    IPFS node, so its reveal may go out. The upload runs in the WorkPool's urgent lane (a reveal waits on it) and the
    loop keeps its other duties meanwhile: False while it runs. Once in, "unpublished" is dropped from the item, so
    a failed reveal transaction does not upload it all again."""
    kept = item.data.get("unpublished")
    if not kept:
        return True
    done = ctx.work.poll(f"{item.key}:publish", lambda: publish(ctx, kept, item.data["cid"]), urgent=True,
                         what=f"publishing task {item.task_id}'s result")
    if done is None:
        return False
    del item.data["unpublished"]
    return True


def segment_hashes(ctx: NodeContext, task_id: int, task, segment: int, own_trace: list[bytes],
                   result_cid: bytes, label: str = "solve") -> list[bytes]:
    """g_0…g_k of checkpoint segment `segment` of our own result (replayed, faults included)."""
    if TaskKind(task.kind) == TaskKind.AGGREGATE:
        return list(own_trace)  # k = 1: the segment is the whole trace
    m = ctx.manifest(task.jobId)
    if ctx.faults.lazy:
        return [own_trace[segment]] * (m.checkpoint_interval + 1)
    local = checkpoint_path(ctx.workdir(label, task_id), segment)
    if local.exists():
        start = local.read_bytes()
    else:
        start = ctx.state_bytes(ctx.bundle(result_cid).checkpoints[segment], own_trace[segment], m)
    return replay_segment(m, start, ctx.shard(task.jobId, task.index), task_ref(task))


# What a referee votes when neither party's bundle yields the agreed checkpoint h_s: a fixed value no party can
# have claimed, so the panel still decides (Neither: both parties lose) instead of waiting for data that never comes.
UNAVAILABLE_VOTE = keccak(b"verity:unavailable")


def _agreed_start(ctx: NodeContext, dispute, segment: int, m) -> bytes | None:
    """The state of checkpoint `segment` (agreed by both parties), from whichever party's bundle yields it.

    A party's missing or malformed data (no bundle, no such checkpoint, a bad checkpoint file, a hash that does
    not match its own trace) is that party's fault and permanent: it is logged once and the other party is tried.
    Only an unreachable IPFS or chain node (a ConnectionError) propagates, to be retried as transient."""
    for p, (cid_digest, root) in enumerate(zip(dispute.resultCids, dispute.roots)):
        try:
            b = ctx.bundle(cid_digest, root)
            if not 0 <= segment < len(b.trace):
                raise InputRejected(f"party {p}'s bundle", f"no checkpoint {segment} in a trace of {len(b.trace)}")
            if segment not in b.checkpoints:
                raise InputRejected(f"party {p}'s bundle", f"checkpoint {segment} is missing")
            return ctx.state_bytes(b.checkpoints[segment], b.trace[segment], m)
        except ConnectionError:
            raise  # our own IPFS node is gone: transient, the tick fails and is retried
        except Exception as exc:  # noqa: BLE001 — anything a party's data can cause is permanent for that party
            log.warning("dispute %s: party %d's checkpoint %d is unusable (permanent, not retried): %s: %s",
                        getattr(dispute, "disputeId", "?"), p, segment, type(exc).__name__, exc)
    return None


def referee_vote(ctx: NodeContext, task, dispute) -> bytes:
    """Recompute the disputed step from the agreed state h_s: our h_{s+1}.

    Never fails because of a party's data (P9): when h_s cannot be obtained from either party, the vote is
    UNAVAILABLE_VOTE."""
    if TaskKind(task.kind) == TaskKind.AGGREGATE:
        states, hashes = ctx.shard_finals(task)
        return run_aggregate(ctx.manifest(task.jobId), states, hashes, **ctx.aggregate_inputs(task)).trace[1]
    m = ctx.manifest(task.jobId)
    segment = int(dispute.segment)
    step = int(dispute.step) % m.checkpoint_interval  # the step inside the segment (global: segment * k + s)
    start = _agreed_start(ctx, dispute, segment, m)
    if start is None:
        log.warning("dispute %s: neither party's checkpoint %d is retrievable; voting the no-data value",
                    getattr(dispute, "disputeId", "?"), segment)
        return UNAVAILABLE_VOTE
    hashes = replay_segment(m, start, ctx.shard(task.jobId, task.index), task_ref(task))
    return hashes[step + 1]
