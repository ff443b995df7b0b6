"""Chores any node does for the network: fill open slots, report missed deadlines,
finalize optimistic results, heartbeat, withdraw earned credits.

Anyone may call these functions; when several nodes race, one transaction wins
and the others revert harmlessly (logged at debug level).
"""
from __future__ import annotations

import logging
import time

from verity.chain import TxFailed
from verity.chain.views import ReplicaStatus, TaskStatus
from verity.node.context import NodeContext
from verity.node.snapshot import Snapshot

log = logging.getLogger("verity.node.keeper")
MAX_WATCHED = 10_000


class Keeper:
    kinds: tuple[str, ...] = ()

    def __init__(self, ctx: NodeContext, *, interval: float = 2.0, heartbeat_every: float = 30.0):
        self.ctx, self.interval, self.heartbeat_every = ctx, interval, heartbeat_every
        self._last = 0.0

    def on_event(self, snap: Snapshot, ev) -> None:
        if ev.name in ("TaskCreated", "TaskReopened", "ReplicaLate", "TaskAssigned"):
            tid = int(ev.args["taskId"])
            if tid not in snap.active_tasks and len(snap.active_tasks) < MAX_WATCHED:
                snap.active_tasks.append(tid)
        elif ev.name == "TaskAccepted":
            tid = int(ev.args["taskId"])
            if tid in snap.active_tasks:
                snap.active_tasks.remove(tid)

    def advance(self, snap, item) -> None:  # owns no work items
        pass

    def __call__(self, snap: Snapshot) -> None:
        if time.monotonic() - self._last < self.interval:
            return
        self._last = time.monotonic()
        ctx, c = self.ctx, self.ctx.chain
        now = c.now()
        for tid in list(snap.active_tasks):
            task = ctx.task(tid)
            status = TaskStatus(task.status)
            if status in (TaskStatus.ACCEPTED, TaskStatus.CANCELLED, TaskStatus.NONE):
                snap.active_tasks.remove(tid)
                continue
            if status == TaskStatus.OPEN:
                self._try(c.jobs.functions.assign(tid))
            for slot, r in enumerate(ctx.replicas(tid)):
                if ReplicaStatus(r.status) in (ReplicaStatus.ASSIGNED, ReplicaStatus.COMMITTED) and r.deadline and now > int(r.deadline):
                    log.info("task %d slot %d missed its deadline: reporting", tid, slot)
                    self._try(c.jobs.functions.reportLate(tid, slot))
            if status == TaskStatus.REVEALED and task.challengeDeadline and now > int(task.challengeDeadline):
                self._try(c.jobs.functions.finalize(tid))
        if time.time() - snap.last_heartbeat > self.heartbeat_every:
            self._try(c.registry.functions.heartbeat())
            snap.last_heartbeat = time.time()
        if c.call(c.jobs.functions.credits(ctx.me)):
            self._try(c.jobs.functions.withdrawPayment())
        if c.call(c.game.functions.credits(ctx.me)):
            self._try(c.game.functions.withdraw())

    def _try(self, fn) -> None:
        try:
            self.ctx.chain.transact(fn)
        except TxFailed as exc:
            log.debug("%s", exc)
