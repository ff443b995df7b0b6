"""Verifier role: watch optimistic results, re-execute a sample, challenge wrong ones.

Sampling policy: a verifier re-executes each optimistic result with
probability `sample_rate`, decided by keccak(verifier, taskId) so the choice is
fixed per task (a restart doesn't re-roll) yet unknown to the solver. With V
independent verifiers a wrong result escapes with probability (1 - p)^V; the
catch probability is 1 - (1 - p)^V (p = 1 on the devnet: every result checked).
"""
from __future__ import annotations

import logging

from eth_utils import keccak

from verity.chain.views import ReplicaStatus, TaskStatus
from verity.cid import cid_to_digest
from verity.node.compute import compute_result
from verity.node.context import NodeContext
from verity.node.phases import Phase
from verity.node.snapshot import Snapshot, WorkItem

log = logging.getLogger("verity.node.verifier")


def sampled(verifier: str, task_id: int, rate: float) -> bool:
    draw = int.from_bytes(keccak(bytes.fromhex(verifier[2:]) + task_id.to_bytes(32, "big"))[:8], "big")
    return draw < rate * 2**64


def catch_probability(rate: float, verifiers: int) -> float:
    return 1.0 - (1.0 - rate) ** verifiers


class VerifierRole:
    kinds = ("watch",)

    def __init__(self, ctx: NodeContext, sample_rate: float = 1.0):
        self.ctx, self.sample_rate = ctx, sample_rate

    def on_event(self, snap: Snapshot, ev) -> None:
        if ev.name != "ChallengeWindowOpened":
            return
        tid = int(ev.args["taskId"])
        key = f"watch:{tid}"
        if key in snap.items:
            return
        if sampled(self.ctx.me, tid, self.sample_rate):
            snap.items[key] = WorkItem(key=key, kind="watch", phase=Phase.WATCHING, task_id=tid)
        else:
            snap.items[key] = WorkItem(key=key, kind="watch", phase=Phase.DONE, task_id=tid,
                                       data={"verdict": "not sampled"})
            log.info("task %d: verdict: not sampled (rate %g)", tid, self.sample_rate)

    def advance(self, snap: Snapshot, item: WorkItem) -> None:
        ctx, c = self.ctx, self.ctx.chain
        task = ctx.task(item.task_id)
        if TaskStatus(task.status) != TaskStatus.REVEALED:
            snap.move(item, Phase.DONE, verdict="not checked: result already settled")
            log.info("task %d: verdict: none, the result was settled (%s) before we checked it",
                     item.task_id, TaskStatus(task.status).name.lower())
            return
        rep = next(r for r in ctx.replicas(item.task_id) if ReplicaStatus(r.status) == ReplicaStatus.REVEALED)
        if rep.node.lower() == ctx.me.lower():
            snap.move(item, Phase.DONE)  # our own result
            return
        if "final" not in item.data:
            res = ctx.work.poll(item.key, lambda: compute_result(ctx, item.task_id, task, label="verify"),
                                what=f"re-executing task {item.task_id}")
            if res is None:
                item.data["computing"] = "re-executing"
                return
            item.data.pop("computing", None)
            item.data.update(final="0x" + res.final.hex(), trace=["0x" + h.hex() for h in res.trace],
                             root="0x" + res.root.hex(), cid=res.result_cid)
            return  # persist before acting on it
        if bytes.fromhex(item.data["final"][2:]) == bytes(rep.finalHash):
            snap.move(item, Phase.DONE, verdict="agrees")
            log.info("task %d: verdict: agrees with the solver's final %s", item.task_id, item.data["final"][:10])
            return
        if ctx.chain.now() > int(task.challengeDeadline):
            snap.move(item, Phase.DONE, verdict="too late to challenge")
            log.warning("task %d: verdict: differs (ours %s, solver's 0x%s) but the challenge window has closed",
                        item.task_id, item.data["final"][:10], bytes(rep.finalHash).hex()[:8])
            return
        from verity.engine import merkle

        trace = [bytes.fromhex(h[2:]) for h in item.data["trace"]]
        n = len(trace) - 1
        c.transact(c.game.functions.challengeOptimistic(
            item.task_id, bytes.fromhex(item.data["root"][2:]), trace[-1], n, cid_to_digest(item.data["cid"]),
            merkle.proof(trace, 0), merkle.proof(trace, n)))
        snap.move(item, Phase.DISPUTING)
        log.info("challenged task %d: our final %s differs from the solver's", item.task_id, item.data["final"][:10])

    # the dispute itself is played by PartyRole (we are its challenger)
