"""Auditor role: re-execute fee-sampled tasks before their result is public, commit blind, claim the fee (P5).

"Looking pays" (contracts/VerificationFees.sol). A job's submitter funds a verification pot; a verifier
whose private ticket samples a task re-executes it while no result of it is public, commits
keccak(taskId, finalHash, salt, me) (`commitCheck`, accepted only while the task is Open or Assigned,
no replica Committed or Revealed, and no drawn slot past its result floor: no result public or pending), and once the task is Accepted with that result claims `feePerCheck`,
revealing its epoch key. Copying a published result earns nothing: by then the commitment is refused.

Tickets come from the node's fee key chain (verity.node.keychain): anchored once at start (and again
before it runs out), its key k_e for the task's creation epoch e decides `fee_sampled(k_e, taskId,
rateBps)`. Tasks created in or before the anchor epoch have no ticket.

One work item per sampled task, kind "audit", key `audit:<taskId>`:

    watching   re-execute (WorkPool, in the background) -> persist the result -> persist a salt
               -> commitCheck (still blind) ------------------------------------------> committed
               the result went public first: "too late: result public before our check"  -> done
               a slot passed its result floor first: "too late: a result may be pending ..."  -> done
    committed  wait for Accepted and epoch >= e + 2 (the contract's reveal delay), then claim a fee slot:
               "result differs from the accepted one" (the watch flow challenges it) | "task cancelled"
               | "not claimed: EpochOutOfOrder / ChecksExhausted / ClaimWindowClosed / PotEmpty / ..."
               claimed: wait for the task's claim window to close (the first claim opens it for
               CLAIM_WINDOW_EPOCHS; a lower ticket claimed in it displaces the highest held), then collect:
               "fee paid" | "not paid: a lower ticket took the slot"

Claims go in epoch order (the contract refuses an epoch older than the chain's lastEpoch), so a claim
waits while an older epoch's check is still open (computing, or waiting for its task), for at most MAX_DEFER_EPOCHS
(less than the claim window, so a claim deferred behind an older one still lands in the window another verifier's
claim opened; and a job's pot stays claimable for CLAIM_GRACE_EPOCHS = 4 after it closes).

Only jobs under a determinism profile this node serves are checked (`profiles`, the doctor's mask):
on another hardware class the re-execution would give other bits and the fee would never be paid.

The item stores the result under the keys VerifierRole's watch items use (RESULT_KEYS): when the task's candidate is
published later, the watch item copies it instead of re-executing. Nothing of it is added to IPFS (compute_result's
publish=False): a copier can read no fee check's result; a watch item that challenges publishes it at its reveal.
"""
from __future__ import annotations

import logging
import secrets
import time

from verity.chain import TxFailed
from verity.chain.protocol import ROLE_SOLVER, ReplicaStatus, TaskStatus, check_commitment, fee_sampled
from verity.errors import VerityError
from verity.node.compute import compute_result
from verity.node.context import NodeContext
from verity.node.faults import copy_from_pins
from verity.node.keychain import KeyChain, chain_seed, find_chain, head
from verity.node.loop import SAVE_AND_GO_ON
from verity.node.phases import Phase
from verity.node.sampling import load_or_create_key
from verity.node.snapshot import Snapshot, WorkItem

log = logging.getLogger("verity.node.auditor")

KIND = "audit"
# what a re-execution leaves in an item's data, shared with watch items (verity.node.verifier); "unpublished" is what
# compute_result kept back: nothing of a fee check is added to IPFS unless a challenge reveals it
RESULT_KEYS = ("final", "trace", "root", "cid", "unpublished")
REVEAL_DELAY_EPOCHS = 2   # VerificationFees.REVEAL_DELAY_EPOCHS: k_e may be revealed from epoch e + 2
CLAIM_WINDOW_EPOCHS = 2   # VerificationFees.CLAIM_WINDOW_EPOCHS: a task's fee slots are decided this long after its first claim
MAX_DEFER_EPOCHS = 1      # a claim waits at most this long past e + 2 for older epochs' claims (< CLAIM_WINDOW_EPOCHS)
CLAIMED, PAID = 1, 2      # VerificationFees.claimStateOf states
ANCHOR_MARGIN = 16        # re-anchor when the chain covers fewer epochs than this beyond the current one
CHECK_EVERY = 60.0        # seconds between checks that the anchored chain still covers what is coming
MAX_UNFUNDED = 10_000     # tasks remembered (in memory) whose job was not funded yet when they were created
TOO_LATE = "too late: result public before our check"
PAST_FLOOR = "too late: a result may be pending (a slot passed its result floor) before our check"
# contract errors after which this check can never be paid (the verdict names the error)
FINAL_ERRORS = frozenset({"EpochOutOfOrder", "ChecksExhausted", "ClaimWindowClosed", "PotEmpty", "NotSampled", "BadEpochKey",
                          "CommitmentMismatch", "NotFunded", "ResultMismatch"})

def audit_key(task_id: int) -> str:
    return f"{KIND}:{task_id}"


def _b(hexstr: str) -> bytes:
    return bytes.fromhex(hexstr.removeprefix("0x"))


def _same(a: str, b: str) -> bool:
    return str(a).lower() == str(b).lower()


class AuditorRole:
    kinds = (KIND,)

    def __init__(self, ctx: NodeContext, profiles: int | None = None):
        self.ctx = ctx
        self.profiles = profiles  # on-chain bits of the profiles we serve; None: unchecked, every profile
        self._job_bits: dict[int, int] = {}
        self._key: bytes | None = None
        self._chain: KeyChain | None = None
        self._epoch_seconds = 0
        self._next_check = 0.0
        self._solver: bool | None = None  # registry role, read once
        self._unfunded: dict[int, set[int]] = {}  # job id -> tasks created before its pot was funded

    def _may_solve(self) -> bool:
        """Whether the registry may draw us as a replica (solver role): then a check waits for the task's draw."""
        if self._solver is None:
            c = self.ctx.chain
            self._solver = bool(int(c.call(c.registry.functions.rolesOf(self.ctx.me))) & ROLE_SOLVER)
        return self._solver

    def serves(self, job_id: int) -> bool:
        if self.profiles is None:
            return True
        if job_id not in self._job_bits:
            self._job_bits[job_id] = int(self.ctx.job(job_id).profileBit)
        if not self._job_bits[job_id] & self.profiles:
            return False
        from verity.node.feasibility import unverified_family
        return unverified_family(self.ctx, job_id) is None

    # ------------------------------------------------------------------ key chain
    def _sampling_key(self) -> bytes:
        if self._key is None:
            self._key = load_or_create_key(self.ctx.state_dir)
        return self._key

    def epoch_seconds(self) -> int:
        if not self._epoch_seconds:
            c = self.ctx.chain
            self._epoch_seconds = int(c.call(c.fees.functions.epochSeconds()))
        return self._epoch_seconds

    def current_epoch(self) -> int:
        return self.ctx.chain.now() // self.epoch_seconds()

    def _chain_on_chain(self):
        c = self.ctx.chain
        last_key, last_epoch, anchor_epoch = c.call(c.fees.functions.chainOf(self.ctx.me))
        return bytes(last_key), int(last_epoch), int(anchor_epoch)

    def ensure_chain(self) -> KeyChain | None:
        """Our anchored key chain, anchoring one when the chain on-chain is not ours or covers fewer than
        ANCHOR_MARGIN epochs beyond the current one. None (logged) when the contract refuses the anchor."""
        current = self.current_epoch()
        if self._chain is not None and current + ANCHOR_MARGIN <= self._chain.last_epoch:
            return self._chain
        key = self._sampling_key()
        chain = find_chain(key, *self._chain_on_chain())
        if chain is not None and current + ANCHOR_MARGIN <= chain.last_epoch:
            self._chain = chain
            return chain
        renewed = chain is not None
        seed = chain_seed(key, current)  # generation = this epoch: find_chain recognises it after a restart
        c = self.ctx.chain
        try:
            c.transact(c.fees.functions.anchor(head(seed)))
        except TxFailed as exc:
            log.warning("cannot anchor our fee key chain (%s): no verification fees until it is anchored", exc)
            return None
        chain = find_chain(key, *self._chain_on_chain())
        if chain is None:
            raise VerityError("anchored our fee key chain but chainOf does not show it (another sender with our key?)")
        self._chain = chain
        log.info("fee key chain anchored in epoch %d (%s): tickets for tasks created in epochs %d..%d",
                 chain.anchor_epoch, "renewed before it ran out" if renewed else "first anchor",
                 chain.anchor_epoch + 1, chain.last_epoch)
        return chain

    def __call__(self, snap: Snapshot) -> None:
        """Periodic (every tick, cheap between checks): anchor at start, re-anchor before the chain runs out."""
        if time.monotonic() < self._next_check:
            return
        self._next_check = time.monotonic() + CHECK_EVERY
        self.ensure_chain()

    # ------------------------------------------------------------------ events
    def on_event(self, snap: Snapshot, ev) -> None:
        if ev.name == "TaskCreated" and ev.contract == "JobRegistry":
            self._task_created(snap, int(ev.args["taskId"]), int(ev.args["jobId"]))
        elif ev.name == "FeesFunded" and ev.contract == "VerificationFees":
            for tid in sorted(self._unfunded.pop(int(ev.args["jobId"]), ())):
                self._task_created(snap, tid, int(ev.args["jobId"]))

    def _task_created(self, snap: Snapshot, tid: int, job_id: int) -> None:
        key = audit_key(tid)
        if key in snap.items:
            return
        if not self.serves(job_id):
            log.debug("task %d: no fee check: job %d's profile is not one this node serves", tid, job_id)
            return
        c = self.ctx.chain
        balance, fee, rate_bps, _, _ = c.call(c.fees.functions.potOf(job_id))
        if int(fee) == 0:
            if sum(map(len, self._unfunded.values())) < MAX_UNFUNDED:
                self._unfunded.setdefault(job_id, set()).add(tid)  # a FeesFunded later still makes it count
            log.debug("task %d: job %d has no verification fees (yet)", tid, job_id)
            return
        if int(balance) < int(fee):
            log.info("task %d: no fee check: job %d's verification pot is spent", tid, job_id)
            return
        task = self.ctx.task(tid)
        if TaskStatus(task.status) not in (TaskStatus.OPEN, TaskStatus.ASSIGNED):
            log.info("task %d: no fee check: already %s", tid, TaskStatus(task.status).name.lower())
            return
        e = int(task.createdAt) // self.epoch_seconds()
        chain = self.ensure_chain()
        if chain is None:
            log.info("task %d: no fee check: our fee key chain is not anchored", tid)
            return
        if not chain.covers(e):
            log.info("task %d: no fee ticket: created in epoch %d, our key chain serves epochs %d..%d (anchored "
                     "in epoch %d: tasks of that epoch or earlier have no ticket)", tid, e, chain.anchor_epoch + 1,
                     chain.last_epoch, chain.anchor_epoch)
            return
        if not fee_sampled(chain.key(e), tid, int(rate_bps)):
            log.info("task %d: not sampled for a fee (rate %d bps, epoch %d)", tid, int(rate_bps), e)
            return
        snap.items[key] = WorkItem(key=key, kind=KIND, phase=Phase.WATCHING, task_id=tid,
                                   data={"job": job_id, "fee_epoch": e, "anchor": chain.anchor_epoch, "fee": int(fee)})
        log.info("task %d: sampled for a verification fee (epoch %d, %d bps): re-executing it before its result is "
                 "public", tid, e, int(rate_bps))

    # ------------------------------------------------------------------ work
    def advance(self, snap: Snapshot, item: WorkItem) -> str | None:
        if item.phase == Phase.WATCHING:
            return self._check(snap, item)
        elif item.phase == Phase.COMMITTED:
            self._claim(snap, item)

    def _done(self, snap: Snapshot, item: WorkItem, verdict: str, level=logging.INFO, **data) -> None:
        snap.move(item, Phase.DONE, verdict=verdict, **data)
        log.log(level, "task %d: fee check verdict: %s", item.task_id, verdict)

    def _public(self, task, replicas) -> bool:
        """Whether a result of the task can be read (the contract's ResultPublic rule)."""
        return (TaskStatus(task.status) not in (TaskStatus.OPEN, TaskStatus.ASSIGNED)
                or any(ReplicaStatus(r.status) == ReplicaStatus.REVEALED for r in replicas))

    def _pending(self, item: WorkItem, task, replicas) -> bool:
        """Whether a result of the task may be pending (the contract's CheckTooLate rule): a replica committed one, or
        a drawn slot passed its result floor, so a check now could be a copy of a result read from the mempool."""
        if any(ReplicaStatus(r.status) == ReplicaStatus.COMMITTED for r in replicas):
            return True
        assigned = [int(r.deadline) for r in replicas if ReplicaStatus(r.status) == ReplicaStatus.ASSIGNED]
        if not assigned:
            return False
        if "floor_after_deadline" not in item.data:  # the job's window and floor are fixed: read once per item
            job = self.ctx.job(int(task.jobId))
            item.data["floor_after_deadline"] = int(job.resultFloor) - int(job.executionWindow)
        return self.ctx.chain.now() >= min(assigned) + int(item.data["floor_after_deadline"])

    def _result(self, snap: Snapshot, item: WorkItem, task) -> None:
        """Re-execute the task in the background (or copy an earlier item's result of it); the loop persists
        the result before `_check` acts on it."""
        for other in snap.items.values():
            if other is not item and other.task_id == item.task_id and other.kind in (KIND, "watch") \
                    and "final" in other.data:
                item.data.update({k: other.data[k] for k in RESULT_KEYS if k in other.data})
                return
        ctx = self.ctx
        if ctx.faults.copy_result:  # TEST-ONLY (--fault copy-result): never re-executes, checks with what it finds
            found = copy_from_pins(ctx, task, item)
            if found is not None:
                item.data.update(final=found["trace"][-1], trace=found["trace"], root=found["root"], cid=found["cid"])
            return
        res = ctx.work.poll(item.key, lambda: compute_result(ctx, item.task_id, task, label="audit", publish=False),
                            what=f"re-executing task {item.task_id} for a verification fee")
        if res is None:
            item.data["computing"] = "re-executing"
            return
        item.data.pop("computing", None)
        item.data.update(final="0x" + res.final.hex(), trace=["0x" + h.hex() for h in res.trace],
                         root="0x" + res.root.hex(), cid=res.result_cid, unpublished=res.unpublished)

    def _check(self, snap: Snapshot, item: WorkItem) -> str | None:
        ctx, c = self.ctx, self.ctx.chain
        task = ctx.task(item.task_id)
        if TaskStatus(task.status) == TaskStatus.CANCELLED:
            return self._done(snap, item, "task cancelled")
        replicas = ctx.replicas(item.task_id)
        if any(_same(r.node, ctx.me) for r in replicas):
            return self._done(snap, item, "our own task")  # OwnTask: a replica is never paid to check itself
        if self._public(task, replicas):
            return self._done(snap, item, TOO_LATE)
        if self._pending(item, task, replicas):
            return self._done(snap, item, PAST_FLOOR)
        if "final" not in item.data and not self.serves(int(task.jobId)):
            return self._done(snap, item, "not checked: the job's profile is not one this node serves")
        if "final" not in item.data and "computing" not in item.data and TaskStatus(task.status) == TaskStatus.OPEN \
                and self._may_solve():
            return  # its slots are still being drawn and one may become ours: never re-execute our own task
        if "final" not in item.data:
            return self._result(snap, item, task)  # computing, or just computed: persisted before we act on it
        if "salt" not in item.data:
            item.data["salt"] = "0x" + secrets.token_bytes(32).hex()
            # persisted before the commitment goes out (a crash never leaves a commitment we cannot open), then the
            # loop calls us again in the same tick: a blind check must land before any reveal
            return SAVE_AND_GO_ON
        commitment = check_commitment(item.task_id, _b(item.data["final"]), _b(item.data["salt"]), ctx.me)
        if bytes(c.call(c.fees.functions.checkOf(item.task_id, ctx.me))) != commitment:  # not sent before a crash
            try:
                receipt = c.transact(c.fees.functions.commitCheck(item.task_id, commitment))
            except TxFailed as exc:
                if exc.error == "ResultPublic":
                    return self._done(snap, item, TOO_LATE)
                if exc.error == "CheckTooLate":
                    return self._done(snap, item, PAST_FLOOR)
                if exc.error == "OwnTask":
                    return self._done(snap, item, "our own task")
                raise
            block = int(receipt["blockNumber"])
        else:
            block = c.block_number()
        snap.move(item, Phase.COMMITTED, commitment="0x" + commitment.hex(), commit_block=block)
        log.info("task %d: blind check committed (our final %s, block %d); the fee is claimable once the task is "
                 "accepted and epoch %d began", item.task_id, item.data["final"][:10], block,
                 int(item.data["fee_epoch"]) + REVEAL_DELAY_EPOCHS)

    def _accepted_final(self, task, replicas) -> bytes:
        """VerificationFees.acceptedFinal: an Accepted replica's final hash, else the task's (a dispute winner's)."""
        for r in replicas:
            if ReplicaStatus(r.status) == ReplicaStatus.ACCEPTED:
                return bytes(r.finalHash)
        return bytes(task.finalHash)

    def _older_waiting(self, snap: Snapshot, item: WorkItem) -> bool:
        """Whether a check of an older epoch is still open and unclaimed (computing, or committed and waiting for its
        task); one that claimed already only waits to collect."""
        e = int(item.data["fee_epoch"])
        return any(o is not item and o.kind == KIND and int(o.data["fee_epoch"]) < e and "claimed" not in o.data
                   for o in snap.open_items())

    def _claim(self, snap: Snapshot, item: WorkItem) -> None:
        ctx, c = self.ctx, self.ctx.chain
        tid, e = item.task_id, int(item.data["fee_epoch"])
        if "claimed" in item.data:
            return self._collect(snap, item)
        task = ctx.task(tid)
        status = TaskStatus(task.status)
        if status == TaskStatus.CANCELLED:
            return self._done(snap, item, "task cancelled")
        if status != TaskStatus.ACCEPTED:
            return  # still running, in its window or disputed
        replicas = ctx.replicas(tid)
        accepted = self._accepted_final(task, replicas)
        if accepted != _b(item.data["final"]):
            return self._done(snap, item, "result differs from the accepted one", logging.WARNING,
                              accepted="0x" + accepted.hex())
        current = self.current_epoch()
        if current < e + REVEAL_DELAY_EPOCHS:
            return  # our key for epoch e may not be revealed yet
        state = int(c.call(c.fees.functions.claimStateOf(tid, ctx.me)))
        if state == PAID:
            return self._done(snap, item, "fee paid")  # claimed and collected before a crash
        if state == CLAIMED:
            item.data["claimed"] = c.block_number()  # claimed before a crash
            return
        _, last_epoch, anchor_epoch = self._chain_on_chain()
        if anchor_epoch != int(item.data["anchor"]) or e <= anchor_epoch or e < last_epoch:
            return self._done(snap, item, "not claimed: EpochOutOfOrder", logging.WARNING, chain_last_epoch=last_epoch,
                              chain_anchor_epoch=anchor_epoch)
        if self._older_waiting(snap, item) and current < e + REVEAL_DELAY_EPOCHS + MAX_DEFER_EPOCHS:
            return  # an older epoch's claim first: claiming this one would make it EpochOutOfOrder
        chain = self._chain if self._chain is not None and self._chain.anchor_epoch == anchor_epoch else None
        if chain is None:
            chain = find_chain(self._sampling_key(), *self._chain_on_chain())
        if chain is None or chain.anchor_epoch != anchor_epoch:
            return self._done(snap, item, "not claimed: the key chain on-chain is not ours", logging.WARNING)
        try:
            receipt = c.transact(c.fees.functions.claim(tid, chain.key(e), _b(item.data["final"]),
                                                        _b(item.data["salt"])))
        except TxFailed as exc:
            if exc.error == "AlreadyClaimed":
                item.data["claimed"] = c.block_number()
                return
            if exc.error in FINAL_ERRORS:
                return self._done(snap, item, f"not claimed: {exc.error}", logging.WARNING)
            raise  # e.g. KeyRevealTooEarly on a lagging clock: retried
        item.data["claimed"] = int(receipt["blockNumber"])
        log.info("task %d: fee slot claimed (block %d); the slots go to the lowest tickets claimed by chain time %d",
                 tid, item.data["claimed"], int(c.call(c.fees.functions.claimClosesAt(tid))))

    def _collect(self, snap: Snapshot, item: WorkItem) -> None:
        """After the task's claim window: paid if our claim still holds a slot (collecting it if nobody has)."""
        ctx, c = self.ctx, self.ctx.chain
        tid = item.task_id
        if int(c.call(c.fees.functions.claimStateOf(tid, ctx.me))) == PAID:
            return self._done(snap, item, "fee paid")
        if c.now() < int(c.call(c.fees.functions.claimClosesAt(tid))):
            return  # lower tickets may still claim
        if not any(_same(slot[0], ctx.me) for slot in c.call(c.fees.functions.slotsOf(tid))):
            return self._done(snap, item, "not paid: a lower ticket took the slot")
        try:
            receipt = c.transact(c.fees.functions.collect(tid))
        except TxFailed as exc:
            if exc.error == "NothingToCollect":
                return  # collected by another holder just now: the next tick reads PAID
            raise
        self._done(snap, item, "fee paid", collect_block=int(receipt["blockNumber"]))

