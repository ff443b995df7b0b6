"""Verifier role: watch every candidate result, re-execute a sample, challenge wrong ones.

Every ChallengeWindowOpened (an optimistic result, the replicas' agreed result, or a dispute
winner's result after the candidate changed) is one work item keyed by task and epoch
(`watch:<task>:<epoch>`). The claim compared with is `jobs.claimOf(task)`. A challenge is two
transactions (P6): the salt is persisted first, then `commitChallenge(c)` (by the claim's
challengeDeadline), then, on a later tick and so in a later block, `challengeOptimistic(...)`
(by challengeDeadline + revealGrace). The commitment binds our address, so a copier gains nothing.

Sampling policy: a verifier re-executes each task with probability `sample_rate`, decided by
keccak(verifier, taskId) so the choice is fixed per task (a restart doesn't re-roll) yet unknown
to the solver. With V independent verifiers a wrong result escapes with probability (1 - p)^V;
the catch probability is 1 - (1 - p)^V (p = 1 on the devnet: every result checked).
"""
from __future__ import annotations

import logging
import secrets

from eth_utils import keccak

from verity.chain import TxFailed
from verity.chain.protocol import DisputeOutcome, DisputePhase, TaskStatus, challenge_commitment
from verity.chain.views import read
from verity.cid import cid_to_digest
from verity.engine import merkle
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


def watch_key(task_id: int, epoch: int) -> str:
    return f"watch:{task_id}:{epoch}"


def _b(hexstr: str) -> bytes:
    return bytes.fromhex(hexstr.removeprefix("0x"))


def _same(a: str, b: str) -> bool:
    return a.lower() == b.lower()


class VerifierRole:
    kinds = ("watch",)

    def __init__(self, ctx: NodeContext, sample_rate: float = 1.0):
        self.ctx, self.sample_rate = ctx, sample_rate

    # ------------------------------------------------------------------ events
    def on_event(self, snap: Snapshot, ev) -> None:
        if ev.name == "ChallengeWindowOpened":
            self._window_opened(snap, int(ev.args["taskId"]))
        elif ev.name == "DisputeOpened" and ev.contract == "DisputeGame" and _same(ev.args["challenger"], self.ctx.me):
            tid, did = int(ev.args["taskId"]), int(ev.args["disputeId"])
            for item in snap.open_items():  # our challenge's dispute (the reveal's receipt usually told us already)
                if item.kind == "watch" and item.task_id == tid and item.phase in (Phase.CHALLENGE_COMMITTED,
                                                                                   Phase.DISPUTING):
                    item.dispute_id = item.dispute_id or did

    def _window_opened(self, snap: Snapshot, tid: int) -> None:
        task = self.ctx.task(tid)
        if TaskStatus(task.status) != TaskStatus.REVEALED:
            return  # already settled (or contested) by the time we read it: a later window gets its own event
        epoch = int(task.epoch)
        key = watch_key(tid, epoch)
        if key in snap.items:
            return
        if sampled(self.ctx.me, tid, self.sample_rate):
            snap.items[key] = WorkItem(key=key, kind="watch", phase=Phase.WATCHING, task_id=tid, data={"epoch": epoch})
            log.info("task %d epoch %d: challenge window open; checking the candidate result", tid, epoch)
        else:
            snap.items[key] = WorkItem(key=key, kind="watch", phase=Phase.DONE, task_id=tid,
                                       data={"epoch": epoch, "verdict": "not sampled"})
            log.info("task %d: verdict: not sampled (rate %g)", tid, self.sample_rate)

    # ------------------------------------------------------------------ work
    def advance(self, snap: Snapshot, item: WorkItem) -> None:
        if item.phase == Phase.WATCHING:
            self._check(snap, item)
        elif item.phase == Phase.CHALLENGE_COMMITTED:
            self._reveal(snap, item)
        elif item.phase == Phase.DISPUTING:
            self._follow(snap, item)

    def _current(self, snap: Snapshot, item: WorkItem, what: str):
        """The task if its candidate is still the one this item watches (Revealed at our epoch); else ends the item."""
        task = self.ctx.task(item.task_id)
        epoch = int(item.data.get("epoch", task.epoch))
        if TaskStatus(task.status) != TaskStatus.REVEALED or int(task.epoch) != epoch:
            state = TaskStatus(task.status).name.lower()
            snap.move(item, Phase.DONE, verdict=f"{what}: the candidate was settled or replaced ({state}, "
                                                f"epoch {int(task.epoch)})")
            log.info("task %d epoch %d: %s: candidate settled or replaced (%s)", item.task_id, epoch, what, state)
            return None
        return task

    def _result(self, snap: Snapshot, item: WorkItem, task) -> bool:
        """Re-execute once per task: True when an earlier epoch's item of the task already holds the result (copied
        now); False while computing or when it just finished (the loop persists it before we act on it)."""
        for other in snap.items.values():
            if other.kind == "watch" and other.task_id == item.task_id and "final" in other.data and other is not item:
                item.data.update({k: other.data[k] for k in ("final", "trace", "root", "cid")})
                return True
        ctx = self.ctx
        res = ctx.work.poll(item.key, lambda: compute_result(ctx, item.task_id, task, label="verify"),
                            what=f"re-executing task {item.task_id}")
        if res is None:
            item.data["computing"] = "re-executing"
            return False
        item.data.pop("computing", None)
        item.data.update(final="0x" + res.final.hex(), trace=["0x" + h.hex() for h in res.trace],
                         root="0x" + res.root.hex(), cid=res.result_cid)
        return False

    def _check(self, snap: Snapshot, item: WorkItem) -> None:
        ctx, c = self.ctx, self.ctx.chain
        task = self._current(snap, item, "not checked")
        if task is None:
            return
        claim = read(c, c.jobs, "claimOf", item.task_id)
        if _same(claim.defender, ctx.me) or _same(claim.coDefender, ctx.me):
            snap.move(item, Phase.DONE, verdict="our own result")
            return
        if "final" not in item.data and not self._result(snap, item, task):
            return  # computing, or just computed: persist the result before acting on it
        if _b(item.data["final"]) == bytes(claim.finalHash):
            snap.move(item, Phase.DONE, verdict="agrees")
            log.info("task %d epoch %s: verdict: agrees with the candidate's final %s", item.task_id,
                     item.data.get("epoch"), item.data["final"][:10])
            return
        if c.now() > int(claim.challengeDeadline):
            snap.move(item, Phase.DONE, verdict="too late to challenge")
            log.warning("task %d: verdict: differs (ours %s, candidate's 0x%s) but the challenge window has closed",
                        item.task_id, item.data["final"][:10], bytes(claim.finalHash).hex()[:8])
            return
        if "salt" not in item.data:
            item.data["salt"] = "0x" + secrets.token_bytes(32).hex()
            return  # persisted before the commitment goes out: a crash can't leave a commitment we can't open
        commitment = challenge_commitment(item.task_id, _b(item.data["root"]), _b(item.data["final"]),
                                          cid_to_digest(item.data["cid"]), _b(item.data["salt"]), ctx.me)
        try:
            receipt = c.transact(c.game.functions.commitChallenge(commitment))
            block = int(receipt["blockNumber"])
        except TxFailed as exc:
            if "already" not in str(exc).lower():  # e.g. a resend after a crash: the commitment is on-chain already
                raise
            block = c.block_number()
        snap.move(item, Phase.CHALLENGE_COMMITTED, commitment="0x" + commitment.hex(), commit_block=block)
        log.info("task %d epoch %s: our final %s differs from the candidate's 0x%s: challenge committed (block %d)",
                 item.task_id, item.data.get("epoch"), item.data["final"][:10], bytes(claim.finalHash).hex()[:8], block)

    def _reveal(self, snap: Snapshot, item: WorkItem) -> None:
        ctx, c = self.ctx, self.ctx.chain
        task = self._current(snap, item, "challenge not revealed")
        if task is None:
            return
        if c.block_number() <= int(item.data.get("commit_block", 0)):
            return  # the reveal must land in a later block than the commitment
        claim = read(c, c.jobs, "claimOf", item.task_id)
        if c.now() > int(claim.challengeDeadline) + int(claim.revealGrace):
            snap.move(item, Phase.DONE, verdict="challenge reveal window missed")
            log.warning("task %d: the challenge's reveal window closed before we could reveal it", item.task_id)
            return
        trace = [_b(h) for h in item.data["trace"]]
        n = len(trace) - 1
        receipt = c.transact(c.game.functions.challengeOptimistic(
            item.task_id, _b(item.data["root"]), trace[-1], n, cid_to_digest(item.data["cid"]), _b(item.data["salt"]),
            merkle.proof(trace, 0), merkle.proof(trace, n)))
        did = 0
        try:
            for ev in c.game.events.DisputeOpened().process_receipt(receipt, errors=_DISCARD):
                did = int(ev["args"]["disputeId"])
        except Exception:  # noqa: BLE001 — the DisputeOpened event tells us too
            pass
        item.dispute_id = item.dispute_id or did
        snap.move(item, Phase.DISPUTING)
        log.info("challenged task %d epoch %s (dispute %s): our final %s differs from the candidate's", item.task_id,
                 item.data.get("epoch"), did or "?", item.data["final"][:10])

    def _follow(self, snap: Snapshot, item: WorkItem) -> None:
        """The dispute itself is played by PartyRole (we are its challenger); here we only record how it ended."""
        if not item.dispute_id:
            task = self.ctx.task(item.task_id)
            if TaskStatus(task.status) != TaskStatus.REVEALED or int(task.epoch) != int(item.data.get("epoch", -1)):
                snap.move(item, Phase.DONE, verdict="dispute ended (task moved on)")
            return
        d = self.ctx.dispute(item.dispute_id)
        if DisputePhase(d.phase) != DisputePhase.RESOLVED:
            return
        outcome = DisputeOutcome(d.outcome)
        if outcome == DisputeOutcome.CHALLENGER_WINS:
            snap.move(item, Phase.DONE, verdict="challenge won: our result is the candidate now", outcome="challenger_wins")
        elif outcome == DisputeOutcome.VOIDED:
            snap.move(item, Phase.DONE, verdict="challenge voided or abandoned", outcome="voided")
        else:
            snap.move(item, Phase.LOST, verdict="challenge lost", outcome=outcome.name.lower())
        log.info("task %d: our challenge (dispute %d) ended: %s", item.task_id, item.dispute_id, outcome.name.lower())


try:  # web3's log-processing mode that skips logs of other events in the receipt
    from web3.logs import DISCARD as _DISCARD
except ImportError:  # pragma: no cover
    _DISCARD = None
