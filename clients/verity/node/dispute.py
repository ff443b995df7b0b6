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
from verity.chain.protocol import DisputeOutcome, DisputePhase, ReplicaStatus
from verity.engine import merkle
from verity.node.compute import segment_hashes
from verity.node.context import NodeContext
from verity.node.phases import Phase
from verity.node.snapshot import Snapshot, WorkItem

log = logging.getLogger("verity.node.dispute")
MOVE_GAS = 3_000_000


def first_divergence(a: list[bytes], b: list[bytes], lo: int, hi: int) -> int | None:
    """Smallest i in [lo, hi) with a[i] == b[i] and a[i+1] != b[i+1]."""
    for i in range(lo, hi):
        if a[i] == b[i] and a[i + 1] != b[i + 1]:
            return i
    return None


def pinpoint_proof(i: int, a: list[bytes], b: list[bytes]) -> tuple:
    """The PinpointProof struct as web3 wants it (a tuple in field order)."""
    return (i, a[i], a[i + 1], b[i + 1], merkle.proof(a, i), merkle.proof(a, i + 1), merkle.proof(b, i), merkle.proof(b, i + 1))


def _has_fn(contract, name: str) -> bool:
    return any(i.get("type") == "function" and i.get("name") == name for i in contract.abi)


def open_dispute(ctx: NodeContext, task_id: int, my_trace: list[bytes]) -> None:
    """Open the replica-vs-replica dispute of a Contested task, pinpointing at once when the other trace is public.
    Both replicas try; the first one wins and the other's transaction reverts harmlessly."""
    c = ctx.chain
    if _has_fn(c.game, "disputeOfTask") and c.call(c.game.functions.disputeOfTask(task_id)):
        return
    other = next((r for r in ctx.replicas(task_id)
                  if r.node.lower() != ctx.me.lower() and ReplicaStatus(r.status) == ReplicaStatus.REVEALED), None)
    try:
        theirs = ctx.bundle(other.resultCid, other.root).trace if other is not None else None
    except ConnectionError:
        raise
    except Exception as exc:  # noqa: BLE001 — the other party's data is its business
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


def _parties(d) -> list[str]:
    return [a.lower() for a in d.parties]


def party_index(d, me: str) -> int | None:
    """0 for the challenger (A), 1 for the defender (B) or B's co-defender (who plays B's moves); None otherwise."""
    me = me.lower()
    parties = _parties(d)
    if me == parties[0]:
        return 0
    if me == parties[1] or me == str(getattr(d, "coDefender", "") or "").lower():
        return 1
    return None


class PartyRole:
    """Plays the disputes this node is a party to: challenger (A), defender (B) or B's co-defender."""

    kinds = ("dispute",)

    def __init__(self, ctx: NodeContext):
        self.ctx = ctx

    def on_event(self, snap: Snapshot, ev) -> None:
        if ev.name != "DisputeOpened" or ev.contract != "DisputeGame":
            return
        me = self.ctx.me.lower()
        did, tid = int(ev.args["disputeId"]), int(ev.args["taskId"])
        key = f"dispute:{did}"
        if key in snap.items:
            return
        if me in (ev.args["challenger"].lower(), ev.args["defender"].lower()):
            role = "challenger" if ev.args["challenger"].lower() == me else "defender"
        elif str(getattr(self.ctx.dispute(did), "coDefender", "") or "").lower() == me:
            role = "co-defender"  # the event names only B; B's co-defender shares its fate and may move for it
        else:
            return
        # where our own checkpoints of the task are (a replica's solve folder, or a verifier's re-execution)
        label = "solve" if any(k.startswith(f"task:{tid}:") for k in snap.items) else "verify"
        snap.items[key] = WorkItem(key=key, kind="dispute", phase=Phase.DISPUTING, task_id=tid, dispute_id=did,
                                   data={"label": label, "role": role})
        log.info("dispute %d on task %d: we are a party (%s)", did, tid, role)

    def advance(self, snap: Snapshot, item: WorkItem) -> None:
        ctx, c = self.ctx, self.ctx.chain
        d = ctx.dispute(item.dispute_id)
        phase = DisputePhase(d.phase)
        p = party_index(d, ctx.me)
        if phase == DisputePhase.RESOLVED:
            outcome = DisputeOutcome(d.outcome)
            won = (outcome == DisputeOutcome.CHALLENGER_WINS and p == 0) or (outcome == DisputeOutcome.DEFENDER_WINS and p == 1)
            by = int(getattr(d, "stepRootBy", 0) or 0)
            spared = p == 1 and not won and by not in (0, self._member(d))  # fate follows the step-level claims
            ok = won or spared or outcome == DisputeOutcome.VOIDED
            snap.move(item, Phase.DONE if ok else Phase.LOST, outcome=outcome.name.lower(), **({"spared": True} if spared else {}))
            log.info("dispute %d resolved: %s (we %s)", item.dispute_id, outcome.name.lower(),
                     "won" if won else "were spared: our partner made B's step-level claims" if spared else "did not win")
            return
        if p is None:
            snap.move(item, Phase.DONE, outcome="not a party")
            return
        task = ctx.task(item.task_id)
        if int(task.epoch) != int(d.epoch):
            # the task's candidate changed since the dispute opened: end it (nobody slashed, challenger released)
            log.info("dispute %d is stale (epoch %d, task now %d): abandoning it", item.dispute_id, int(d.epoch),
                     int(task.epoch))
            self._try(c.game.functions.abandon(item.dispute_id))
            return
        if ctx.faults.silent_in_dispute:
            return
        self._claim_timeout(d, p, item)
        if phase in (DisputePhase.BISECT0, DisputePhase.BISECT1):
            self._bisect(d, p, item)
        elif phase == DisputePhase.STEP_ROOTS and not self._moved(d, p):
            self._step_root(d, p, item, task)
        elif phase == DisputePhase.JUDGING and item.dispute_id not in snap.active_panels:
            snap.active_panels.append(item.dispute_id)  # the keeper seats and advances the panel

    # ------------------------------------------------------------------ moves
    def _member(self, d) -> int:
        """Our B-side member bit: 1 = the defender, 2 = its co-defender (0 for A)."""
        me = self.ctx.me.lower()
        if me == _parties(d)[1]:
            return 1
        return 2 if me == str(getattr(d, "coDefender", "") or "").lower() else 0

    @staticmethod
    def _moved(d, p) -> bool:
        moved = getattr(d, "moved", None)
        return bool(moved[p]) if moved is not None else False

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
            except ConnectionError:
                raise
            except Exception as exc:  # noqa: BLE001 — a party's missing bundle: bisect interactively
                log.info("dispute %d: public pinpoint not possible (%s); bisecting", item.dispute_id, exc)
        if self._moved(d, p):
            return
        if level == 1 and p == 1 and int(getattr(d, "stepRootBy", 0) or 0) not in (0, self._member(d)):
            return  # B's level-1 leaves are the step-root submitter's claims: only it moves for B now
        mid = int(d.mid)
        if level == 0:
            leaves = self._my_trace(d, p)
        elif "steps" in item.data:
            leaves = [bytes.fromhex(h[2:]) for h in item.data["steps"]]
        else:  # a co-defender whose partner submitted the step root: our own replay is the same trace
            leaves = self._segment(d, p, item, self.ctx.task(item.task_id))
            if leaves is None:
                return
        self._try(c.game.functions.revealLeaf(item.dispute_id, level, mid, leaves[mid], merkle.proof(leaves, mid)))

    def _segment(self, d, p, item: WorkItem, task) -> list[bytes] | None:
        label, segment = item.data.get("label", "solve"), int(d.segment)
        steps = self.ctx.work.poll(
            f"{item.key}:segment:{segment}", urgent=True, what=f"replaying segment {segment} for dispute {item.dispute_id}",
            fn=lambda: segment_hashes(self.ctx, item.task_id, task, segment, self._my_trace(d, p), d.resultCids[p],
                                      label=label))
        if steps is None:
            return None  # replaying; the clock keeps running, so this lane never queues behind training
        item.data["steps"] = ["0x" + h.hex() for h in steps]
        return steps

    def _step_root(self, d, p, item: WorkItem, task) -> None:
        steps = self._segment(d, p, item, task)
        if steps is None:
            return
        k = len(steps) - 1
        self._try(self.ctx.chain.game.functions.submitStepRoot(item.dispute_id, merkle.root(steps),
                                                               merkle.proof(steps, 0), merkle.proof(steps, k)))

    def _claim_timeout(self, d, p, item: WorkItem) -> None:
        if DisputePhase(d.phase) not in (DisputePhase.BISECT0, DisputePhase.STEP_ROOTS, DisputePhase.BISECT1):
            return
        c = self.ctx.chain
        remaining = c.call(c.dispute_lens.functions.clocksRemaining(item.dispute_id))
        if remaining[1 - p] == 0:
            self._try(c.game.functions.timeout(item.dispute_id))

    def _try(self, fn) -> None:
        try:
            # explicit gas: the estimate is made before the other party's move lands; if it lands first, ours
            # becomes the move that narrows the game or opens the panel, which costs far more than estimated
            self.ctx.chain.transact(fn, gas=MOVE_GAS)
        except TxFailed as exc:  # someone else moved first (the other party, or B's co-defender); re-read next tick
            log.debug("%s", exc)
