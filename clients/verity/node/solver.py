"""Solver role: train assigned tasks, commit-reveal (or submit), see them accepted.

After the reveal (or an optimistic submit) the task is Revealed: the result waits out its challenge
window (agreement is not finality) and the keeper finalizes it; meanwhile verifiers may challenge
it and we defend (as defender, or as the other replica's co-defender: PartyRole plays both). If the
two replicas' results differ the task is Contested: we open the replica-vs-replica dispute; its
winner's result becomes the candidate with a fresh window, and is accepted only after that.
"""
from __future__ import annotations

import logging

from verity.chain.protocol import ReplicaStatus, TaskStatus, decline_grace, replica_commitment
from verity.chain.views import read
from verity.node.compute import compute_result, published
from verity.node.context import InputRejected, NodeContext
from verity.node.dispute import open_dispute
from verity.node.faults import copy_from_pins
from verity.node.phases import Phase
from verity.node.snapshot import Snapshot, WorkItem
from verity.storage import CidNotFound

log = logging.getLogger("verity.node.solver")

# Seconds a decline's transaction is given to land before the grace ends (a few blocks of a 2-s chain; a 12-s chain
# needs windows whose grace holds several blocks, issue 23).
DECLINE_TX_SECONDS = 6


def _last_to_commit(ctx: NodeContext, task_id: int, task, slot: int) -> bool:
    """TaskMachine.reveal's rule for an uncommitted replica: every slot is filled and every other one committed,
    so no other result can still change and ours may be revealed in place of a commit."""
    if TaskStatus(task.status) != TaskStatus.ASSIGNED:
        return False
    return all(ReplicaStatus(r.status) == ReplicaStatus.COMMITTED
               for s, r in enumerate(ctx.replicas(task_id)) if s != slot)


def _b(hexstr: str) -> bytes:
    return bytes.fromhex(hexstr[2:] if hexstr.startswith("0x") else hexstr)


def _h(b: bytes) -> str:
    return "0x" + bytes(b).hex()


class InputsUnreachable(InputRejected):
    """An input of an assigned task stayed unreachable until the decline grace nearly ended: a ValueError, so the
    loop ends the item and declines the slot (node/loop.py) instead of retrying into a late report and its slash.
    `invalid_inputs`: the CID is the poster's (manifest, shard, initial weights), so the refusal counts towards
    failing the job; another solver's output (a previous round's state) is not the poster's fault."""

    def __init__(self, task_id: int, exc: CidNotFound, *, poster: bool, grace_left: float, hurried: bool = False):
        self.invalid_inputs = poster and not hurried   # a hurried fetch blames nobody (no bet on the inputs)
        whose = "the poster's" if poster else "an earlier task's"
        why = f" after {exc.timeout:.0f} s of fetching, too short to blame the inputs" if poster and hurried else ""
        super().__init__(f"{whose} input {exc.cid} of task {task_id}",
                         f"not retrievable ({exc.reason}) with {grace_left:.0f} s of the decline grace left{why}")


def _result_sent(ctx: NodeContext, rep) -> None:
    """Metrics (`node run --metrics-port`): the seconds our slot's deadline had left when the result went out."""
    metrics = getattr(ctx, "metrics", None)
    if metrics is not None and int(rep.deadline):
        metrics.result_sent(lambda: int(rep.deadline) - ctx.chain.now())  # read and observed inside the metrics' guard


def decline_grace_end(ctx: NodeContext, task, rep) -> int:
    """TaskMachine.decline's bound: the slot may be declined until DECLINE_GRACE_BPS of its window has passed."""
    window = int(ctx.job(task.jobId).executionWindow)
    return int(rep.deadline) - window + decline_grace(window)


def _poster_cids(ctx: NodeContext, task) -> set[str]:
    """The CIDs the poster published for this job: its manifest and, once the manifest is in, the shards and the
    initial weights it names."""
    from verity.cid import digest_to_cid

    cids = {digest_to_cid(ctx.job(task.jobId).manifestCid)}
    try:
        m = ctx.manifest(task.jobId)
    except Exception:  # noqa: BLE001 — the manifest itself is what is missing
        return cids
    cids.update(ref.cid for ref in m.shards)
    if m.init.weights:
        cids.add(m.init.weights)
    return cids


def _partner_starved(ctx: NodeContext, task, rep) -> bool:
    """JobRegistry.withdrawCommitted's rule: the task is Open, its empty slot has waited out the assignment timeout
    since it emptied and since the last draw that left it empty, and our committed slot has no reveal deadline."""
    if TaskStatus(task.status) != TaskStatus.OPEN or not int(task.openSince) or int(rep.deadline):
        return False
    c = ctx.chain
    since = max(int(task.openSince), int(getattr(task, "filledAt", 0)))
    return c.now() > since + int(c.call(c.jobs.functions.assignmentTimeout()))


class SolverRole:
    kinds = ("solve",)

    def __init__(self, ctx: NodeContext):
        self.ctx = ctx

    def on_event(self, snap: Snapshot, ev) -> None:
        if ev.name == "TaskAssigned" and ev.args["node"].lower() == self.ctx.me.lower():
            tid, slot = int(ev.args["taskId"]), int(ev.args["slot"])
            key = f"task:{tid}:{slot}"
            old = snap.items.get(key)
            if old is not None and old.phase not in (Phase.ASSIGNED, Phase.TRAINED) and self._holds(tid, slot):
                # drawn again into a slot we withdrew from (JobRegistry.withdrawCommitted clears the slot, so its
                # node may be drawn again): a fresh item, or the slot would be reported late and slashed; also when
                # a crash lost the item's move to LOST (it still says committed while the slot is Assigned again)
                del snap.items[key]
                log.info("task %d slot %d: drawn again after withdrawing", tid, slot)
            if key not in snap.items:
                snap.items[key] = WorkItem(key=key, kind="solve", phase=Phase.ASSIGNED, task_id=tid, slot=slot)
                log.info("assigned task %d slot %d", tid, slot, extra={"task_id": tid, "slot": slot})

    def _holds(self, task_id: int, slot: int) -> bool:
        """The slot is ours on-chain now and waits for its result (Assigned): a TaskAssigned read again after a
        restart for a slot that ended since is not."""
        reps = self.ctx.replicas(task_id)
        if slot >= len(reps):
            return False
        rep = reps[slot]
        return str(rep.node).lower() == self.ctx.me.lower() and ReplicaStatus(rep.status) == ReplicaStatus.ASSIGNED

    def decline(self, item: WorkItem, why: str, invalid_inputs: bool = True, note: str = "") -> None:
        """Give the slot back (JobRegistry.decline: unslashed within the first quarter of the execution window,
        never drawn for this task again) when this node cannot use the job's inputs (`invalid_inputs`: the
        poster's fault; FAIL_DECLINES such refusals of one task fail the job) or cannot do the work (False); past
        the grace the contract refuses and the slot is freed only when reported late. `note` (default: the start of
        `why`) goes on-chain in the ReplicaDeclined event, where `job show` and `job watch` show it to the poster."""
        from verity.chain import TxFailed
        from verity.chain.protocol import decline_note

        c = self.ctx.chain
        try:
            c.transact(c.jobs.functions.decline(item.task_id, bool(invalid_inputs), decline_note(note or why)))
            log.info("declined task %d slot %s (%s): %s", item.task_id, item.slot,   # routine: a node's own choice
                      "invalid inputs" if invalid_inputs else "cannot do the work", why)
        except TxFailed as exc:
            log.warning("could not decline task %d slot %s (%s): %s; the slot is freed when reported late",
                      item.task_id, item.slot, exc, why)

    def _past_floor(self, item: WorkItem, task, rep) -> bool:
        """TaskMachine._checkOnTime's floor: a result is committed, revealed in place of a commit or submitted no
        earlier than the job's resultFloor after the slot's assignment (fee checks are committed meanwhile, while no
        result is public). True once the chain's clock has passed it."""
        job = self.ctx.job(task.jobId)
        not_before = int(rep.deadline) - int(job.executionWindow) + int(job.resultFloor)
        if self.ctx.chain.now() >= not_before:
            return True
        if "floor" not in item.data:
            item.data["floor"] = not_before
            log.info("task %d: result ready; held until the job's result floor (%d s after our draw), so that paid "
                     "checks are committed first", item.task_id, int(job.resultFloor))
        return False

    def _fits(self, task_id: int, task, rep) -> dict:
        """node/feasibility.py: the job's declared work fits its window, and this node can hold and finish the task,
        its inputs' fetch included (ManifestInvalid / CapacityExceeded otherwise). A context without the node's
        memory and speeds (a bare NodeContext) checks only the declared window."""
        from verity.chain.protocol import TaskKind
        from verity.node.feasibility import check_declared_window, check_task_fits

        ctx = self.ctx
        m = ctx.manifest(task.jobId, timeout=self._fetch_timeout(task, rep))
        window = int(ctx.job(task.jobId).executionWindow)
        memory_mb = getattr(ctx, "memory_mb", None)
        if memory_mb is None:
            check_declared_window(m, window)
            return {}
        backlog = ctx.work.backlog_seconds() if hasattr(ctx.work, "backlog_seconds") else 0.0
        fit = check_task_fits(m, int(task.index), execution_window=window,
                              seconds_left=max(0, int(rep.deadline) - ctx.chain.now()), memory_mb=memory_mb,
                              speeds=getattr(ctx, "speeds", None), aggregate=TaskKind(task.kind) == TaskKind.AGGREGATE,
                              backlog_s=backlog, contention=ctx.contention.factor if hasattr(ctx, "contention") else 1.0,
                              fetch_s=self._fetch_seconds(task, m))
        log.info("task %d fits: about %.0f MB%s%s", task_id, fit.memory_bytes / (1 << 20),
                 f", {fit.seconds:.1f} s of training" + (f" (x{fit.contention:.2f} load)" if fit.contention > 1 else "")
                 if fit.seconds else "",
                 f", {fit.fetch_seconds:.1f} s of fetching" if fit.fetch_seconds else "")
        return {"memory_mb": round(fit.memory_bytes / (1 << 20)), "seconds": fit.seconds}

    def _fetch_seconds(self, task, manifest) -> float:
        """node/locality.py: seconds to fetch the task's inputs this node's IPFS node does not hold, at its measured
        fetch rate (its declared bandwidth until enough fetches were measured); 0 for an aggregate (its inputs are
        other replicas' results, fetched by the task) and without a NetworkObserver."""
        from verity.chain.protocol import TaskKind
        from verity.node.locality import bytes_to_fetch, fetch_seconds, train_inputs

        ctx = self.ctx
        if getattr(ctx, "network", None) is None or TaskKind(task.kind) != TaskKind.TRAIN:
            return 0.0
        declared = int(read(ctx.chain, ctx.chain.registry, "getNode", ctx.me).bandwidthMbps)
        return fetch_seconds(bytes_to_fetch(ctx.storage, train_inputs(ctx, task, manifest)),
                             ctx.network.median_mbps() or declared)

    def _fetch_timeout(self, task, rep) -> float:
        """Half of what the decline grace leaves after the decline's own transaction. With the storage's own timeout
        (30 s by default, against a 30-s grace for a 120-s window) one fetch from a node just back from a partition
        outlasted the grace, the decline reverted (DeclineTooLate) and the node was fined as late (netlab, 16
        hosts). A CidNotFound goes to `_unreachable`, which declines in time. Once no decline can land any more (a
        node drawn while it was away sees its slot late), the storage's own timeout: the node does the task."""
        until_end = decline_grace_end(self.ctx, task, rep) - self.ctx.chain.now()
        if until_end <= 0:
            return float(self.ctx.storage.timeout)
        return max(1.0, min(float(self.ctx.storage.timeout), (until_end - DECLINE_TX_SECONDS) / 2))

    def _fair_fetch_s(self, task) -> float:
        """The first fetch a node that looked at its slot when drawn waits (`_fetch_timeout` at the draw): refusing
        the poster's inputs is a bet (its stake against theirs, TaskMachine.decline), and a node only bets on fetches
        that waited at least half of that."""
        grace = decline_grace(int(self.ctx.job(task.jobId).executionWindow))
        return min(float(self.ctx.storage.timeout), (grace - DECLINE_TX_SECONDS) / 2)

    def _fetch_inputs(self, task, rep) -> None:
        """A training task's shard, waiting at most `_fetch_timeout`. Cached: training reads it from the context."""
        from verity.chain.protocol import TaskKind

        if TaskKind(task.kind) != TaskKind.TRAIN:
            return   # an aggregate's inputs are other replicas' results, fetched (and reported) by the task itself
        self.ctx.shard(task.jobId, int(task.index), timeout=self._fetch_timeout(task, rep))

    def _dial_holders(self, task) -> None:
        """Before a training task's first fetch, connect to the nodes likely to hold its inputs (node/locality.py);
        only a measured node (`node run`: the context has a NetworkObserver), not a bare context."""
        from verity.chain.protocol import TaskKind
        from verity.node.locality import dial_holders

        if getattr(self.ctx, "network", None) is not None and TaskKind(task.kind) == TaskKind.TRAIN:
            dial_holders(self.ctx, task)

    def _unreachable(self, item: WorkItem, task, rep, exc: CidNotFound) -> None:
        """An input did not arrive: retried (the loop counts attempts) while the decline grace leaves room for
        another fetch and the decline's transaction; then InputsUnreachable, so the slot is declined unslashed
        rather than missed. A poster that publishes inputs nobody can fetch pays for it (its bond, once
        FAIL_DECLINES nodes said so), never the solvers it drew.

        A node that first saw its slot late in the grace (drawn while it was stopped or catching up: netlab, 32
        hosts, a node switched off for a minute) fetched too briefly to judge the inputs: it declines without
        blaming them (no bet to lose, `_fair_fetch_s`), and once no decline can land it keeps fetching (the loop
        retries) and does the task in its window instead of giving up into a late report."""
        left = decline_grace_end(self.ctx, task, rep) - self.ctx.chain.now()
        fetched = item.data["fetched_s"] = float(item.data.get("fetched_s", 0.0)) + float(exc.timeout)
        if left > 2 * exc.timeout + DECLINE_TX_SECONDS or left <= 0:
            raise exc
        raise InputsUnreachable(item.task_id, exc, poster=exc.cid in _poster_cids(self.ctx, task),
                                grace_left=max(0, left), hurried=fetched < self._fair_fetch_s(task) / 2) from exc

    def _report_unavailable(self, task_id: int, task) -> None:
        """P10: before our result counts, say which inputs no accepted replica's bundle yielded (we recomputed them).
        The input's payment is burned when every accepted holder of this task says so. Idempotent on-chain (a bit
        mask), so a retry after a crash repeats it harmlessly."""
        c = self.ctx.chain
        for index in self.ctx.unavailable_inputs(task):
            c.transact(c.jobs.functions.reportUnavailable(task_id, index))
            log.warning("task %d: reported input %d unavailable (no accepted bundle could be fetched; recomputed)",
                        task_id, index)

    def advance(self, snap: Snapshot, item: WorkItem) -> None:
        ctx, c = self.ctx, self.ctx.chain
        if item.phase == Phase.ASSIGNED and ctx.work.running(item.key):
            return  # training: the task and its replicas are read again once it is done, not twice a second meanwhile
        task = ctx.task(item.task_id)
        rep = ctx.replicas(item.task_id)[item.slot]
        status = ReplicaStatus(rep.status)
        if rep.node.lower() != ctx.me.lower() or status in (ReplicaStatus.SLASHED, ReplicaStatus.LATE, ReplicaStatus.VOIDED):
            snap.move(item, Phase.LOST, reason=f"replica {status.name.lower()}")
            return
        if status == ReplicaStatus.ACCEPTED:
            snap.move(item, Phase.DONE)
            log.info("task %d accepted", item.task_id, extra={"task_id": item.task_id, "job_id": int(task.jobId),
                                                              "slot": item.slot})
            return
        replication = int(ctx.job(task.jobId).replication)

        if item.phase == Phase.ASSIGNED:
            if status != ReplicaStatus.ASSIGNED:
                return  # on-chain state is ahead of ours only if data was lost: wait for the slot to resolve
            if ctx.faults.decline_invalid:  # TEST-ONLY (--fault decline-invalid): refuses whatever the inputs
                self.decline(item, "TEST-ONLY decline-invalid")
                snap.move(item, Phase.LOST, reason="declined (TEST-ONLY decline-invalid)")
                return
            if ctx.faults.copy_result:  # TEST-ONLY (--fault copy-result): never trains, commits what it can find
                found = copy_from_pins(ctx, task, item)
                if found is not None:
                    snap.move(item, Phase.TRAINED, **found)
                return
            try:
                if "fit" not in item.data:  # once, inside the decline grace: raises (and the loop declines) if not
                    self._dial_holders(task)
                    item.data["fit"] = self._fits(item.task_id, task, rep)
                if "inputs" not in item.data:  # once: the poster's inputs, fetched within the decline grace
                    self._fetch_inputs(task, rep)
                    item.data["inputs"] = True
                # nothing is published before our commitment is final: a copier finds no bundle to commit
                res = ctx.work.poll(item.key, lambda: compute_result(ctx, item.task_id, task, publish=False),
                                    what=f"training task {item.task_id}",
                                    estimate_s=(item.data["fit"] or {}).get("seconds"))
            except CidNotFound as exc:
                self._unreachable(item, task, rep, exc)
            if res is None:
                item.data["computing"] = "training"
                return  # still training: the loop goes on with every other duty meanwhile
            item.data.pop("computing", None)
            snap.move(item, Phase.TRAINED, trace=[_h(h) for h in res.trace], root=_h(res.root),
                      cid=res.result_cid, unpublished=res.unpublished)
            return

        d = item.data
        trace = [_b(h) for h in d["trace"]]
        root, final = _b(d["root"]), trace[-1]
        n = len(trace) - 1
        from verity.cid import cid_to_digest
        from verity.engine import merkle

        cid = cid_to_digest(d["cid"])
        if item.phase == Phase.TRAINED:
            if status == ReplicaStatus.ASSIGNED and not self._past_floor(item, task, rep):
                return  # nothing of our result leaves us (not even to IPFS) before the job's result floor
            # submitted (replication 1) or revealed in place of a commit (the last replica to commit): public now
            public_now = status == ReplicaStatus.ASSIGNED and (
                replication == 1 or _last_to_commit(ctx, item.task_id, task, item.slot))
            if public_now and not published(ctx, item):
                return  # uploading; the unavailability reports below go out once, with the result
            if status == ReplicaStatus.ASSIGNED:
                self._report_unavailable(item.task_id, task)
            if replication == 1:
                if status == ReplicaStatus.ASSIGNED:
                    c.transact(c.jobs.functions.submitResult(item.task_id, root, final, n, cid,
                                                             merkle.proof(trace, 0), merkle.proof(trace, n)))
                    _result_sent(ctx, rep)
                snap.move(item, Phase.REVEALED)
            elif public_now:
                # every other result is fixed: reveal in place of a commit (one transaction; it also reveals a
                # partner that committed this same result, so agreeing replicas need no further reveal)
                c.transact(c.jobs.functions.reveal(item.task_id, root, final, n, cid,
                                                   merkle.proof(trace, 0), merkle.proof(trace, n)))
                _result_sent(ctx, rep)
                snap.move(item, Phase.REVEALED)
            else:
                if status == ReplicaStatus.ASSIGNED:
                    c.transact(c.jobs.functions.commit(item.task_id, replica_commitment(root, final, cid, ctx.me)))
                    _result_sent(ctx, rep)
                snap.move(item, Phase.COMMITTED)
            return

        if item.phase == Phase.COMMITTED:
            if status == ReplicaStatus.REVEALED:  # the last replica to commit revealed our identical result too
                if not published(ctx, item):  # our copy serves the same bytes (P10)
                    return
                snap.move(item, Phase.REVEALED)
                return
            reps = ctx.replicas(item.task_id)
            all_committed = all(ReplicaStatus(r.status) in (ReplicaStatus.COMMITTED, ReplicaStatus.REVEALED) for r in reps)
            if all_committed or (rep.deadline and ctx.chain.now() > int(rep.deadline)):
                if not published(ctx, item):  # every commitment is final: nothing left to copy
                    return
                c.transact(c.jobs.functions.reveal(item.task_id, root, final, n, cid,
                                                   merkle.proof(trace, 0), merkle.proof(trace, n)))
                snap.move(item, Phase.REVEALED)
            elif _partner_starved(ctx, task, rep):
                # nobody eligible took the other slot for the whole assignment timeout: our lock has no deadline,
                # so leave (unslashed) rather than hold the stake until the poster cancels (issue 9)
                c.transact(c.jobs.functions.withdrawCommitted(item.task_id))
                snap.move(item, Phase.LOST, reason="withdrew: the partner slot stayed empty")
                log.warning("task %d: the partner slot stayed empty past the assignment timeout; withdrew our "
                            "commitment and its stake", item.task_id)
            return

        if item.phase in (Phase.REVEALED, Phase.DISPUTING):
            tstatus = TaskStatus(task.status)
            if tstatus == TaskStatus.CONTESTED and item.phase == Phase.REVEALED:
                if replication > 1:
                    open_dispute(ctx, item.task_id, trace)
                snap.move(item, Phase.DISPUTING)  # the dispute work item (created from DisputeOpened) plays it
            elif tstatus == TaskStatus.OPEN:
                snap.move(item, Phase.LOST, reason="task reopened")
            elif tstatus in (TaskStatus.ACCEPTED, TaskStatus.CANCELLED):
                snap.move(item, Phase.DONE, reason=f"task {tstatus.name.lower()}")
            elif tstatus == TaskStatus.REVEALED and not item.data.get("waiting"):
                item.data["waiting"] = True  # the keeper finalizes it once the window and grace passed
                log.info("task %d revealed: waiting out the challenge window (epoch %d)", item.task_id, int(task.epoch))
