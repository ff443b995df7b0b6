"""A drawn training task's inputs: which this node's IPFS node already holds, how long the rest take to fetch, and
whom to dial for them (issue 25: tasks prefer hosts that already hold their inputs).

A solver counts the fetch into its feasibility check (node/feasibility.py): a node that would need longer than the
window declines inside the grace, one that holds the inputs counts nothing for them, so the task settles on a host
that holds them. Sizes are the manifest's caps (a shard's tensors exactly, a checkpoint's layout), so no byte is
fetched to estimate them.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from verity.chain.views import read
from verity.cid import digest_to_cid
from verity.engine.checkpoint import checkpoint_cap
from verity.engine.data import shard_cap
from verity.storage.errors import StorageError

log = logging.getLogger("verity.node.solver")

MAX_DIALS = 4          # holders dialled before the first fetch
DIAL_TIMEOUT_S = 1.0   # each: the dial runs inside the decline grace
ZERO = "0x" + "0" * 40


@dataclass(frozen=True)
class TaskInput:
    what: str
    cid: str | None   # None: known only after a fetch (a later round's input whose bundle is not held here)
    size: int         # bytes, at most


def fetch_seconds(nbytes: int, mbps: float | None) -> float:
    """Seconds to fetch `nbytes` at `mbps` Mbit/s; 0 when there is nothing to fetch or no rate to go by."""
    return nbytes * 8 / (mbps * 1e6) if nbytes and mbps else 0.0


def train_inputs(ctx, task, manifest) -> list[TaskInput]:
    """A TRAIN task's shard and round input (round 0: the initial weights, if not a seed; later: the previous
    round's aggregate final state, whose CID its result bundle names)."""
    ref = manifest.shards[int(task.index)]
    inputs = [TaskInput(f"shard {int(task.index)}", ref.cid, shard_cap(manifest.data, ref.samples))]
    if int(task.round) > 0:
        inputs.append(TaskInput(f"round {int(task.round)} input", _round_input_cid(ctx, task, manifest),
                                checkpoint_cap(manifest)))
    elif manifest.init.weights:
        inputs.append(TaskInput("initial weights", manifest.init.weights, checkpoint_cap(manifest)))
    return inputs


def _round_input_cid(ctx, task, manifest) -> str | None:
    c = ctx.chain
    prev = ctx.task(c.call(c.jobs.functions.taskOf(task.jobId, int(task.round) - 1, len(manifest.shards))))
    if not ctx.storage.holds(digest_to_cid(bytes(prev.resultCid))):
        return None
    return ctx.bundle(bytes(prev.resultCid)).final_cid   # held: read from the local repo


def bytes_to_fetch(storage, inputs: list[TaskInput]) -> int:
    """The bytes of `inputs` this node's IPFS node does not hold."""
    return sum(i.size for i in inputs if i.cid is None or not storage.holds(i.cid))


def input_holders(ctx, task) -> list[str]:
    """Accounts likely to hold a TRAIN task's inputs: the submitter (round 0), else the previous round's replicas of
    the same shard (they fetched it) and of its aggregate (they published the round input)."""
    job = ctx.job(task.jobId)
    if int(task.round) == 0:
        return [str(job.submitter)]
    c, f = ctx.chain, ctx.chain.jobs.functions.taskOf
    prev = (c.call(f(task.jobId, int(task.round) - 1, int(task.index))),
            c.call(f(task.jobId, int(task.round) - 1, int(job.shards))))
    return [str(r.node) for tid in prev for r in ctx.replicas(tid)]


def dial_holders(ctx, task) -> int:
    """Connect this node's IPFS node to the registered multiaddrs of `input_holders` (at most MAX_DIALS, each within
    DIAL_TIMEOUT_S), so the first fetch need not wait for a DHT lookup; returns how many answered."""
    holders: dict[str, str] = {}   # lower-case -> the address as the chain spelled it first
    for account in input_holders(ctx, task):
        holders.setdefault(account.lower(), account)
    others = [a for key, a in holders.items() if key not in (ZERO, ctx.me.lower())]
    dialled = 0
    for account in others[:MAX_DIALS]:
        node = read(ctx.chain, ctx.chain.registry, "getNode", account)
        if not int(node.slot) or not node.multiaddr:
            continue
        try:
            ctx.storage.connect_peer(node.multiaddr, timeout=DIAL_TIMEOUT_S, retries=0)
            dialled += 1
        except StorageError as exc:
            log.debug("task input holder %s at %s: %s", account, node.multiaddr, exc)
    return dialled
