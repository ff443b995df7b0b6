"""Chores any node does for the network: draw open slots once their randomness is readable
(`assign`, P4 two-phase draws), report missed deadlines, finalize candidates the contract says
are ready (`finalizable`: window and reveal grace passed, no open dispute), seat and advance the
referee panels of disputes this node is part of, heartbeat. There is nothing to withdraw: JobEscrow, DisputeGame
and RefereePanel pay task payments, rewards and returned bonds into the payee's wallet in the transaction that
settles them (only unbonded stake waits for `verity node unstake --withdraw`). It also times its chain
round trips and re-declares a bandwidth the node's own fetches do not reach (node/netprobe.py).

Anyone may call these functions; when several nodes race, one transaction wins and the
others revert harmlessly (logged at debug level).

Every node watches every task of the network, so a chore round must not read every task: with 32 nodes and 30 live
tasks, reading each task's record and replicas every 2 s was about a thousand calls a second on one chain. After a
look the keeper knows the next chain time a chore could fall due (a replica's deadline, the challenge window's end)
and does not read the task again before then, unless an event names it; `QUIET_MAX_S` of chain time bounds the wait
(a state change that no event announced). Open tasks and panels are read every round.
"""
from __future__ import annotations

import logging
import time

from verity.chain import TxFailed
from verity.chain.protocol import PanelPhase, ReplicaStatus, TaskStatus
from verity.chain.views import read
from verity.node.context import NodeContext
from verity.node.netprobe import demote_if_overstated
from verity.node.snapshot import Snapshot

log = logging.getLogger("verity.node.keeper")
MAX_WATCHED = 10_000
QUIET_MAX_S = 30  # chain seconds a watched task goes unread at most when nothing names it
TASK_EVENTS = ("TaskCreated", "DrawRequested", "TaskReopened", "ReplicaLate", "TaskAssigned", "ChallengeWindowOpened",
               "TaskContested", "CandidateReplaced")


class Keeper:
    kinds: tuple[str, ...] = ()

    def __init__(self, ctx: NodeContext, *, interval: float = 2.0, heartbeat_every: float = 30.0):
        self.ctx, self.interval, self.heartbeat_every = ctx, interval, heartbeat_every
        self._last = 0.0
        # Draws requested since we started: checked every tick (not every `interval`), so a task waits only for
        # its target block, not for the next chore round. Memory only: after a restart the chore round's
        # Open-task check covers them.
        self._draws: dict[int, int] = {}
        self._liveness: int | None = None  # the registry's livenessWindow, read at the first heartbeat check
        self._next_look: dict[int, int] = {}  # task id -> chain time before which none of its chores can be due

    def on_event(self, snap: Snapshot, ev) -> None:
        if "taskId" in ev.args:  # its state moved: look at it next round
            self._next_look.pop(int(ev.args["taskId"]), None)
        if ev.name in TASK_EVENTS and ev.contract == "JobRegistry":
            tid = int(ev.args["taskId"])
            if tid not in snap.active_tasks and len(snap.active_tasks) < MAX_WATCHED:
                snap.active_tasks.append(tid)
            if ev.name == "DrawRequested" and len(self._draws) < MAX_WATCHED:
                self._draws[tid] = int(ev.args["requestId"])
        elif ev.name == "TaskAccepted":
            tid = int(ev.args["taskId"])
            if tid in snap.active_tasks:
                snap.active_tasks.remove(tid)
        elif ev.name in ("PanelOpened", "SeatingRetry") and ev.contract == "RefereePanel":
            did = int(ev.args["disputeId"])
            # our own disputes' panels (a party item exists by now: DisputeOpened came first)
            if f"dispute:{did}" in snap.items and did not in snap.active_panels:
                snap.active_panels.append(did)
        elif ev.name == "PanelDecided" and ev.contract == "RefereePanel":
            did = int(ev.args["disputeId"])
            if did in snap.active_panels:
                snap.active_panels.remove(did)

    def advance(self, snap, item) -> None:  # owns no work items
        pass

    def __call__(self, snap: Snapshot) -> None:
        self._fulfil_draws()
        if time.monotonic() - self._last < self.interval:
            return
        self._last = time.monotonic()
        c = self.ctx.chain
        now = self._round_trip("call", c.now)
        for tid in list(snap.active_tasks):
            if now >= self._next_look.get(tid, 0):
                self._guard(self._task, snap, tid, now)
        for did in list(snap.active_panels):
            self._guard(self._panel, snap, did, now)
        if self._heartbeat_due(snap, now):
            self._round_trip("transaction", lambda: self._try(c.registry.functions.heartbeat()))
            snap.last_heartbeat, snap.last_heartbeat_chain = time.time(), now
        self._judge_bandwidth()

    def _round_trip(self, kind: str, fn):
        """fn(); its wall time goes to the node's NetworkObserver (node/netprobe.py) as a chain round trip."""
        started = time.monotonic()
        result = fn()
        network = getattr(self.ctx, "network", None)
        if network is not None:
            network.chain_round_trip(kind, time.monotonic() - started)
        return result

    def _judge_bandwidth(self) -> None:
        """node/netprobe.py: re-declare a lower bandwidth when new fetches measured less than the declared tier."""
        network = getattr(self.ctx, "network", None)
        if network is None:
            return
        try:
            demote_if_overstated(self.ctx, network)
        except TxFailed as exc:
            log.warning("could not re-declare the measured bandwidth: %s", exc)

    def _heartbeat_due(self, snap: Snapshot, now: int) -> bool:
        """Every `heartbeat_every` s of wall time, and whenever half the registry's liveness window has passed in
        chain time since the last one: chain time may run ahead of the wall clock (irregular blocks, a devnet's
        clock jumps), and a node the registry thinks offline is left out of draws."""
        if time.time() - snap.last_heartbeat > self.heartbeat_every:
            return True
        if self._liveness is None:
            c = self.ctx.chain
            self._liveness = int(c.call(c.registry.functions.livenessWindow()))
        return self._liveness > 0 and now - snap.last_heartbeat_chain > self._liveness // 2

    def _task(self, snap: Snapshot, tid: int, now: int) -> None:
        ctx, c = self.ctx, self.ctx.chain
        task = ctx.task(tid)
        status = TaskStatus(task.status)
        if status in (TaskStatus.ACCEPTED, TaskStatus.CANCELLED, TaskStatus.NONE):
            snap.active_tasks.remove(tid)
            self._next_look.pop(tid, None)
            return
        due = [now + QUIET_MAX_S]  # chain times at which a chore of this task can fall due
        if status == TaskStatus.OPEN:
            due.append(now)  # read every round until drawn
            if self._drawable(int(task.drawRequest)):
                self._try(c.jobs.functions.assign(tid))  # a stale request is renewed by assign() itself
        for slot, r in enumerate(ctx.replicas(tid)):
            if ReplicaStatus(r.status) in (ReplicaStatus.ASSIGNED, ReplicaStatus.COMMITTED) and r.deadline:
                if now > int(r.deadline):
                    log.info("task %d slot %d missed its deadline: reporting", tid, slot)
                    self._try(c.jobs.functions.reportLate(tid, slot))
                    due.append(now)
                else:
                    due.append(int(r.deadline) + 1)
        if status == TaskStatus.REVEALED:
            # the contract's own rule (window, grace, disputes)
            ready, window_end = c.call(c.jobs.functions.finalizable(tid))
            if ready and self._try(c.jobs.functions.finalize(tid)):
                log.info("task %d finalized (window and reveal grace passed, no open dispute)", tid)
            if ready:
                due.append(now)
            elif int(window_end) >= now:
                due.append(int(window_end) + 1)
            # else open disputes hold it: their end is an event (OpenDisputesChanged) that names the task
        self._next_look[tid] = min(due)

    def _panel(self, snap: Snapshot, did: int, now: int) -> None:
        c = self.ctx.chain
        panel = read(c, c.panel, "panelOf", did)
        phase = PanelPhase(panel.phase)
        if phase in (PanelPhase.DECIDED, PanelPhase.NONE):
            snap.active_panels.remove(did)
        elif phase == PanelPhase.SEATING:
            if self._drawable(int(panel.requestId)):
                self._try(c.panel.functions.seat(did))  # a stale request is renewed by seat() itself
        elif phase == PanelPhase.COMMITTING and now > int(panel.commitDeadline):
            self._try(c.panel.functions.advance(did))
        elif phase == PanelPhase.REVEALING and now > int(panel.revealDeadline):
            self._try(c.panel.functions.advance(did))

    def _fulfil_draws(self) -> None:
        """assign() each freshly requested draw as soon as its value is readable (one attempt: a revert means
        another keeper drew first, or nobody was eligible, which the chore round retries)."""
        for tid, rid in list(self._draws.items()):
            try:
                if not self._drawable(rid):
                    continue
            except TxFailed as exc:
                log.debug("draw of task %d: %s", tid, exc)
            del self._draws[tid]
            if self._try(self.ctx.chain.jobs.functions.assign(tid)):
                log.info("task %d: drew its empty slots (randomness request %d)", tid, rid)

    def _drawable(self, request_id: int) -> bool:
        """The request's value is readable (or stale, so the draw call renews it): worth a transaction."""
        r = self.ctx.chain.randomness.functions
        return self.ctx.chain.call(r.isReady(request_id)) or self.ctx.chain.call(r.isStale(request_id))

    @staticmethod
    def _guard(chore, snap: Snapshot, key: int, now: int) -> None:
        """A view that reverts because the state moved between two reads (claimOf of a task accepted meanwhile)
        skips this chore until the next round; it never fails the node's tick."""
        try:
            chore(snap, key, now)
        except TxFailed as exc:
            log.debug("%s %d: %s", chore.__name__, key, exc)

    def _try(self, fn) -> bool:
        try:
            self.ctx.chain.transact(fn)
            return True
        except TxFailed as exc:
            log.debug("%s", exc)
            return False
