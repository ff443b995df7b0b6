"""A party's side of the dispute game (DESIGN §6): pinpoint, reveal, step roots, clocks.

The node plays from on-chain state each tick, so a crash or a lost
transaction is simply retried: it answers whatever the game awaits from it.
Checkpoint level: one-transaction pinpointing from the two public traces; if
the other party withholds its bundle, interactive bisection (reveal the
requested leaf). Step level: submit our per-step root, then bisect.
"""
from __future__ import annotations

import logging

from verity.chain import TxFailed
from verity.chain.views import DisputeOutcome, DisputePhase, ReplicaStatus, read
from verity.engine import merkle
from verity.errors import VerityError
from verity.node.compute import segment_hashes
from verity.node.context import NodeContext
from verity.node.phases import Phase
from verity.node.snapshot import Snapshot, WorkItem

log = logging.getLogger("verity.node.dispute")


def first_divergence(a: list[bytes], b: list[bytes], lo: int, hi: int) -> int | None:
    """Smallest i in [lo, hi) with a[i] == b[i] and a[i+1] != b[i+1]."""
    for i in range(lo, hi):
        if a[i] == b[i] and a[i + 1] != b[i + 1]:
            return i
    return None


def pinpoint_proof(i: int, a: list[bytes], b: list[bytes]) -> tuple:
    """The PinpointProof struct as web3 wants it (a tuple in field order)."""
    return (i, a[i], a[i + 1], b[i + 1], merkle.proof(a, i), merkle.proof(a, i + 1), merkle.proof(b, i), merkle.proof(b, i + 1))


def open_dispute(ctx: NodeContext, task_id: int, my_trace: list[bytes]) -> None:
    """Open the dispute on a contested task, pinpointing at once when the other trace is public."""
    c = ctx.chain
    if c.call(c.game.functions.disputeOfTask(task_id)):
        return
    other = next((r for r in ctx.replicas(task_id)
                  if r.node.lower() != ctx.me.lower() and ReplicaStatus(r.status) == ReplicaStatus.REVEALED), None)
    try:
        theirs = ctx.bundle(other.resultCid, other.root).trace if other is not None else None
    except VerityError as exc:
        log.info("task %d: other trace unavailable (%s); opening for interactive bisection", task_id, exc)
        theirs = None
    i = first_divergence(my_trace, theirs, 0, len(my_trace) - 1) if theirs and len(theirs) == len(my_trace) else None
    try:
        if i is None:
            c.transact(c.game.functions.openDispute(task_id))
        else:
            c.transact(c.game.functions.openDisputeWithPinpoint(task_id, pinpoint_proof(i, my_trace, theirs)))
        log.info("opened dispute on task %d%s", task_id, f" pinpointed at checkpoint {i}" if i is not None else "")
    except TxFailed as exc:  # the other party opened it first: fine
        log.info("task %d: open dispute: %s", task_id, exc)


class PartyRole:
    """Plays the disputes this node is a party to (solver defender, or challenger)."""

    kinds = ("dispute",)

    def __init__(self, ctx: NodeContext):
        self.ctx = ctx

    def on_event(self, snap: Snapshot, ev) -> None:
        if ev.name != "DisputeOpened":
            return
        me = self.ctx.me.lower()
        if me not in (ev.args["challenger"].lower(), ev.args["defender"].lower()):
            return
        did = int(ev.args["disputeId"])
        key = f"dispute:{did}"
        if key not in snap.items:
            label = "verify" if ev.args["challenger"].lower() == me and self._optimistic(did) else "solve"
            snap.items[key] = WorkItem(key=key, kind="dispute", phase=Phase.DISPUTING, task_id=int(ev.args["taskId"]),
                                       dispute_id=did, data={"label": label})
            log.info("dispute %d on task %d: we are a party", did, int(ev.args["taskId"]))

    def _optimistic(self, did: int) -> bool:
        return bool(self.ctx.dispute(did).optimistic)

    def advance(self, snap: Snapshot, item: WorkItem) -> None:
        ctx, c = self.ctx, self.ctx.chain
        d = ctx.dispute(item.dispute_id)
        phase = DisputePhase(d.phase)
        p = [a.lower() for a in d.parties].index(ctx.me.lower())
        if phase == DisputePhase.RESOLVED:
            outcome = DisputeOutcome(d.outcome)
            won = (outcome == DisputeOutcome.CHALLENGER_WINS and p == 0) or (outcome == DisputeOutcome.DEFENDER_WINS and p == 1)
            snap.move(item, Phase.DONE if won or outcome == DisputeOutcome.VOIDED else Phase.LOST, outcome=outcome.name.lower())
            log.info("dispute %d resolved: %s (we %s)", item.dispute_id, outcome.name.lower(), "won" if won else "did not win")
            return
        if ctx.faults.silent_in_dispute:
            return
        self._claim_timeout(d, p, item)
        if phase in (DisputePhase.BISECT0, DisputePhase.BISECT1):
            self._bisect(d, p, item)
        elif phase == DisputePhase.STEP_ROOTS and not d.moved[p]:
            self._step_root(d, p, item)
        elif phase == DisputePhase.AWAITING_PANEL:
            self._try(c.game.functions.drawPanel(item.dispute_id))
            if ctx.chain.now() > int(d.panelDeadline):
                self._try(c.game.functions.resolve(item.dispute_id))
        elif phase == DisputePhase.VOTING:
            if d.revealedVotes == len(read(c, c.game, "panelOf", item.dispute_id)) or ctx.chain.now() > int(d.revealDeadline):
                self._try(c.game.functions.resolve(item.dispute_id))

    # ------------------------------------------------------------------ moves
    def _my_trace(self, d, p) -> list[bytes]:
        return self.ctx.bundle(d.resultCids[p], d.roots[p]).trace

    def _bisect(self, d, p, item: WorkItem) -> None:
        c, level = self.ctx.chain, int(d.level)
        if level == 0 and not item.data.get("pinpoint_tried"):
            item.data["pinpoint_tried"] = True
            try:
                a = self.ctx.bundle(d.resultCids[0], d.roots[0]).trace
                b = self.ctx.bundle(d.resultCids[1], d.roots[1]).trace
                i = first_divergence(a, b, int(d.lo), int(d.hi))
                if i is not None:
                    self._try(c.game.functions.pinpoint(item.dispute_id, pinpoint_proof(i, a, b)))
                    return
            except VerityError as exc:
                log.info("dispute %d: public pinpoint not possible (%s); bisecting", item.dispute_id, exc)
        if d.moved[p]:
            return
        mid = int(d.mid)
        leaves = self._my_trace(d, p) if level == 0 else [bytes.fromhex(h[2:]) for h in item.data["steps"]]
        c.transact(c.game.functions.revealLeaf(item.dispute_id, level, mid, leaves[mid], merkle.proof(leaves, mid)))

    def _step_root(self, d, p, item: WorkItem) -> None:
        c = self.ctx.chain
        task = self.ctx.task(item.task_id)
        label, segment = item.data.get("label", "solve"), int(d.segment)
        steps = self.ctx.work.poll(
            f"{item.key}:segment:{segment}", urgent=True, what=f"replaying segment {segment} for dispute {item.dispute_id}",
            fn=lambda: segment_hashes(self.ctx, item.task_id, task, segment, self._my_trace(d, p), d.resultCids[p],
                                      label=label))
        if steps is None:
            return  # replaying; the clock keeps running, so this lane never queues behind training
        item.data["steps"] = ["0x" + h.hex() for h in steps]
        k = len(steps) - 1
        c.transact(c.game.functions.submitStepRoot(item.dispute_id, merkle.root(steps), merkle.proof(steps, 0), merkle.proof(steps, k)))

    def _claim_timeout(self, d, p, item: WorkItem) -> None:
        if DisputePhase(d.phase) not in (DisputePhase.BISECT0, DisputePhase.STEP_ROOTS, DisputePhase.BISECT1):
            return
        c = self.ctx.chain
        remaining = c.call(c.game.functions.clocksRemaining(item.dispute_id))
        if remaining[1 - p] == 0 and d.clockSince[1 - p] != 0:
            self._try(c.game.functions.timeout(item.dispute_id))

    def _try(self, fn) -> None:
        try:
            self.ctx.chain.transact(fn)
        except TxFailed as exc:  # someone else moved first; the next tick re-reads the game
            log.debug("%s", exc)
