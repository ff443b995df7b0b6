"""Verifier role: watch every candidate result, re-execute a sample, challenge wrong ones.

Every ChallengeWindowOpened (an optimistic result, the replicas' agreed result, or a dispute
winner's result after the candidate changed) is one work item keyed by task and epoch
(`watch:<task>:<epoch>`). The claim compared with is `jobs.claimOf(task)`. A challenge is two
transactions (P6): the salt is persisted first, then `commitChallenge(c)` (by the claim's
challengeDeadline), then, on a later tick and so in a later block, `challengeOptimistic(...)`
(by challengeDeadline + revealGrace). The commitment binds our address, so a copier gains nothing.

Sampling policy (P5, node side): a verifier re-executes a claim (task, epoch) with probability
`sample_rate`, decided by a private lottery, keccak(key, taskId, epoch) with a key only this node
holds (verity.node.sampling): fixed per claim (a restart doesn't re-roll), unknowable to a solver
even one that reads this code. With V verifiers a wrong result escapes with probability (1 - p)^V
(p = 1 on the devnet: every result checked). A claim on a task this node re-executed for a verification fee
(verity.node.auditor) is checked whatever the draw: the result costs nothing more, and a verifier that stays silent
on a wrong result it already holds lets it be paid (issue 23).

Reveal timing: a challenge is revealed only once the claim's commit window has closed (in the
reveal grace after challengeDeadline). Revealed earlier, its (root, final, cid) could be committed
by a copier before the deadline, and a defender's own sybil copying it could have the defender
concede to it first, taking back the winner's share the honest challenger should get.

Held challenges (issue 25): each verifier that re-executed a wrong result used to open its own game
against it (four games for one result at 32 hosts, each with its bisection and referee panel). Now a
verifier reveals at a random point in the first `reveal_spread` of the grace, and holds its reveal
while another challenger's dispute for the same final hash is undecided. The contract lets a challenge
committed in the window be revealed while any dispute of the claim is open, and for a fresh grace
after a settlement that left the claim standing (TaskMachine `revealHold`), so a cheater's sybil that
challenges with the right result and throws its game only delays the held challengers: they reveal
after it and win (tests/forge/HeldChallenge.t.sol). When the other challenger wins, the claim is
replaced and the held challenge ends unrevealed, with nothing posted or lost.

Profiles: a node re-executes only jobs under a determinism profile it serves (`profiles`, the doctor's
mask; verity.node.doctor). On another hardware class it would compute other bits, challenge an honest
result and lose its bond: such a claim's item ends at once with the verdict "not checked: profile …".

TEST-ONLY: with `--fault sybil-challenge` (verity/node/faults.py) the node skips re-execution and challenges every
candidate with a claim built to lose (`_sybil_claim`), to test that such a sybil cannot shut honest challenges out.
"""
from __future__ import annotations

import logging
import secrets

from eth_utils import keccak

from verity.chain import TxFailed
from verity.chain.protocol import PROFILE_BITS, DisputeOutcome, DisputePhase, TaskStatus, challenge_commitment
from verity.chain.views import read
from verity.cid import cid_to_digest, digest_to_cid
from verity.engine import merkle
from verity.node.auditor import RESULT_KEYS, audit_key
from verity.node.compute import compute_result, published
from verity.node.context import InputRejected, NodeContext
from verity.node.loop import SAVE_AND_GO_ON
from verity.node.phases import Phase
from verity.node.sampling import load_or_create_key, sampled
from verity.node.snapshot import Snapshot, WorkItem
from verity.storage.errors import StorageError

log = logging.getLogger("verity.node.verifier")

# Share of the reveal grace over which verifiers spread their reveals (each at its own random point), so that one
# that reveals later sees an earlier one's dispute for the same result and holds instead of opening a second game.
REVEAL_SPREAD = 0.25


def watch_key(task_id: int, epoch: int) -> str:
    return f"watch:{task_id}:{epoch}"


def _b(hexstr: str) -> bytes:
    return bytes.fromhex(hexstr.removeprefix("0x"))


def _same(a: str, b: str) -> bool:
    return a.lower() == b.lower()


def _audit_of(snap: Snapshot, task_id: int) -> WorkItem | None:
    """This node's fee check of the task (verity.node.auditor), if it made one."""
    return snap.items.get(audit_key(task_id))


class VerifierRole:
    kinds = ("watch",)

    def __init__(self, ctx: NodeContext, sample_rate: float = 1.0, profiles: int | None = None,
                 reveal_spread: float = REVEAL_SPREAD):
        self.ctx, self.sample_rate, self.reveal_spread = ctx, sample_rate, reveal_spread
        self.profiles = profiles  # on-chain bits of the profiles we serve; None: unchecked, every profile
        self._key: bytes | None = None
        self._job_bits: dict[int, int] = {}

    def unserved_profile(self, job_id: int) -> str | None:
        """The job's profile when this node does not serve it (None: it does)."""
        if self.profiles is None:
            return None
        if job_id not in self._job_bits:
            self._job_bits[job_id] = int(self.ctx.job(job_id).profileBit)
        bit = self._job_bits[job_id]
        if bit & self.profiles:
            from verity.node.feasibility import unverified_family
            return unverified_family(self.ctx, job_id)   # a family without a verified root: not checked either
        return next((name for name, b in PROFILE_BITS.items() if b == bit), f"bit {bit}")

    def _sampled(self, task_id: int, epoch: int) -> bool:
        if self.sample_rate >= 1.0:
            return True  # every claim: no key needed
        if self._key is None:
            self._key = load_or_create_key(self.ctx.state_dir)
        return sampled(self._key, task_id, epoch, self.sample_rate)

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
        elif ev.name == "DisputeOpened" and ev.contract == "DisputeGame":
            tid, did = int(ev.args["taskId"]), int(ev.args["disputeId"])
            for item in snap.open_items():  # another challenger's game: one we may hold our reveal behind
                if item.kind == "watch" and item.task_id == tid and did not in item.data.get("others", []):
                    item.data["others"] = [*item.data.get("others", []), did]

    def _window_opened(self, snap: Snapshot, tid: int) -> None:
        task = self.ctx.task(tid)
        if TaskStatus(task.status) != TaskStatus.REVEALED:
            return  # already settled (or contested) by the time we read it: a later window gets its own event
        epoch = int(task.epoch)
        key = watch_key(tid, epoch)
        if key in snap.items:
            return
        if (profile := self.unserved_profile(int(task.jobId))) is not None:
            snap.items[key] = WorkItem(key=key, kind="watch", phase=Phase.DONE, task_id=tid,
                                       data={"epoch": epoch, "verdict": f"not checked: profile {profile} not served"})
            log.info("task %d: verdict: not checked (job profile %s is not one this node serves)", tid, profile)
            return
        audited = _audit_of(snap, tid) is not None
        if audited or self._sampled(tid, epoch):
            # a task this node re-executed for a fee (or is re-executing) is checked whatever the sampling draw: the
            # result is ours already, and a wrong candidate it would not challenge is paid like a right one
            snap.items[key] = WorkItem(key=key, kind="watch", phase=Phase.WATCHING, task_id=tid,
                                       data={"epoch": epoch, **({"audited": True} if audited else {})})
            log.info("task %d epoch %d: challenge window open; checking the candidate result%s", tid, epoch,
                     " (re-executed for its verification fee)" if audited else "")
        else:
            snap.items[key] = WorkItem(key=key, kind="watch", phase=Phase.DONE, task_id=tid,
                                       data={"epoch": epoch, "verdict": "not sampled"})
            log.info("task %d: verdict: not sampled (rate %g)", tid, self.sample_rate)

    # ------------------------------------------------------------------ work
    def advance(self, snap: Snapshot, item: WorkItem) -> str | None:
        if item.phase == Phase.WATCHING:
            return self._check(snap, item)
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
            if other.kind in ("watch", "audit") and other.task_id == item.task_id and "final" in other.data \
                    and other is not item:  # an audit item (verity.node.auditor) re-executed it before it was public
                item.data.update({k: other.data[k] for k in RESULT_KEYS if k in other.data})
                return True
        audit = _audit_of(snap, item.task_id)
        if audit is not None and audit.phase == Phase.WATCHING:
            item.data["computing"] = "re-executing (for the verification fee)"
            return False  # the audit's own re-execution is under way: one computation, not two
        if item.data.get("audited") and not self._sampled(item.task_id, int(item.data.get("epoch", 0))):
            snap.move(item, Phase.DONE, verdict="not sampled (the fee check ended without a result)")
            return False
        ctx = self.ctx
        res = ctx.work.poll(item.key, lambda: compute_result(ctx, item.task_id, task, label="verify", publish=False),
                            what=f"re-executing task {item.task_id}")
        if res is None:
            item.data["computing"] = "re-executing"
            return False
        item.data.pop("computing", None)
        item.data.update(final="0x" + res.final.hex(), trace=["0x" + h.hex() for h in res.trace],
                         root="0x" + res.root.hex(), cid=res.result_cid, unpublished=res.unpublished)
        return False

    def _check(self, snap: Snapshot, item: WorkItem) -> str | None:
        ctx, c = self.ctx, self.ctx.chain
        if "final" not in item.data and ctx.work.running(item.key):
            return  # re-executing: nothing to read before it ends (then the candidate is read again), not twice a second
        task = self._current(snap, item, "not checked")
        if task is None:
            return
        claim = read(c, c.jobs, "claimOf", item.task_id)
        if _same(claim.defender, ctx.me) or _same(claim.coDefender, ctx.me):
            snap.move(item, Phase.DONE, verdict="our own result")
            return
        if "final" not in item.data and (profile := self.unserved_profile(int(task.jobId))) is not None:
            snap.move(item, Phase.DONE, verdict=f"not checked: profile {profile} not served")  # e.g. after a restart
            return
        if ctx.faults.sybil_challenge and "final" not in item.data:  # TEST-ONLY (--fault sybil-challenge)
            item.data.update(self._sybil_claim(item, claim))  # the salt step below persists it before any send
        if "final" not in item.data and not self._result(snap, item, task):
            return  # computing, or just computed: persist the result before acting on it
        if _b(item.data["final"]) == bytes(claim.finalHash):
            verdict = self._agreed_bundle(item, claim)
            snap.move(item, Phase.DONE, verdict=verdict)
            log.info("task %d epoch %s: verdict: %s (the candidate's final %s)", item.task_id,
                     item.data.get("epoch"), verdict, item.data["final"][:10])
            return
        if c.now() > int(claim.challengeDeadline):
            snap.move(item, Phase.DONE, verdict="too late to challenge")
            log.warning("task %d: verdict: differs (ours %s, candidate's 0x%s) but the challenge window has closed",
                        item.task_id, item.data["final"][:10], bytes(claim.finalHash).hex()[:8])
            return
        if "salt" not in item.data:
            item.data["salt"] = "0x" + secrets.token_bytes(32).hex()
            # persisted before the commitment goes out (a crash can't leave a commitment we can't open), then the loop
            # calls us again in the same tick
            return SAVE_AND_GO_ON
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

    def _sybil_claim(self, item: WorkItem, claim) -> dict:
        """TEST-ONLY (--fault sybil-challenge; unreachable without it): a cheater's sybil pre-empting honest
        challenges (P1) with a claim built to lose, made without re-executing anything.

        The candidate's own trace with its last leaf replaced: a challenge the contract accepts (leaf 0 is the task
        input, leaf n differs from the candidate's final, both proved against the new root) that agrees with the
        candidate up to its last checkpoint. Its bundle (the candidate's checkpoints but the last) is published, so
        the defender can pinpoint the divergence from public data at once."""
        theirs = self.ctx.bundle(bytes(claim.resultCid), bytes(claim.root))
        trace = list(theirs.trace)
        n = len(trace) - 1
        trace[-1] = keccak(b"verity:sybil-challenge" + trace[-1])
        bundle = {key: theirs.raw[key] for key in ("version", "job", "round", "index", "k", "steps")
                  if key in theirs.raw}
        bundle.update(trace=["0x" + h.hex() for h in trace],
                      checkpoints={str(j): c for j, c in sorted(theirs.checkpoints.items()) if j < n})
        log.warning("TEST-ONLY sybil-challenge: task %d epoch %s: challenging the candidate with a claim built to lose",
                    item.task_id, item.data.get("epoch"))
        return {"final": "0x" + trace[-1].hex(), "trace": ["0x" + h.hex() for h in trace],
                "root": "0x" + merkle.root(trace).hex(), "cid": self.ctx.storage.put_json(bundle), "sybil": True}

    def _agreed_bundle(self, item: WorkItem, claim) -> str:
        """The verdict on a claim whose final we reproduced: is its bundle available (P10)?

        Bundles are deterministic, so when our bundle's CID is the claim's our node already holds and serves the
        same bytes. Otherwise the claimed bundle is fetched and checked against the claim's root; when that fails,
        nothing on-chain can challenge it (root and final are right): consumers fall back to other replicas'
        bundles or recompute (NodeContext.accepted_final). Our IPFS node being unreachable propagates (retried)."""
        theirs = bytes(claim.resultCid)
        if cid_to_digest(item.data["cid"]) == theirs:
            return "agrees; bundle served by us too"
        try:
            bundle = self.ctx.bundle(theirs, bytes(claim.root))
            if bundle.trace[-1] != bytes(claim.finalHash):
                raise InputRejected(f"result bundle {digest_to_cid(theirs)}", "its trace ends at another final hash")
        except ConnectionError:
            raise
        except (StorageError, InputRejected) as exc:
            log.warning("task %d epoch %s: the result agrees but its claimed bundle %s is unavailable or malformed "
                        "(consumers will fall back to other replicas or recompute): %s: %s", item.task_id,
                        item.data.get("epoch"), digest_to_cid(theirs), type(exc).__name__, exc)
            return "agrees, but the claimed bundle is unavailable or malformed"
        return "agrees"

    def _reveal(self, snap: Snapshot, item: WorkItem) -> None:
        ctx, c = self.ctx, self.ctx.chain
        task = self._current(snap, item, "challenge not revealed")
        if task is None:
            return
        if c.block_number() <= int(item.data.get("commit_block", 0)):
            return  # the reveal must land in a later block than the commitment
        claim = read(c, c.jobs, "claimOf", item.task_id)
        deadline, grace = int(claim.challengeDeadline), int(claim.revealGrace)
        sybil = ctx.faults.sybil_challenge  # TEST-ONLY: a cheater's sybil pre-empts; it never waits or holds
        if c.now() <= deadline and not sybil:
            return  # commits still open: a claim revealed now could be copied into a copier's commitment
        if not sybil and (ahead := self._ahead(item)) is not None:
            if item.data.get("held") != ahead:
                item.data["held"] = ahead
                log.info("task %d epoch %s: holding our challenge behind dispute %d (same final %s): revealed only "
                         "if it ends without replacing the candidate", item.task_id, item.data.get("epoch"), ahead,
                         item.data["final"][:10])
            return
        if c.now() > deadline + grace and int(task.openDisputes) == 0:
            snap.move(item, Phase.DONE, verdict="challenge reveal window missed")
            log.warning("task %d: the challenge's reveal window closed before we could reveal it", item.task_id)
            return
        if "reveal_at" not in item.data:  # our own random point in the grace (kept across restarts)
            item.data["reveal_at"] = deadline + secrets.randbelow(int(grace * self.reveal_spread) + 1)
        if c.now() < int(item.data["reveal_at"]) and "held" not in item.data and not sybil:
            return  # another verifier's reveal before ours shows up as its dispute, and we hold behind it
        trace = [_b(h) for h in item.data["trace"]]
        n = len(trace) - 1
        if not published(ctx, item):  # commits closed: our bundle may be read now (uploading: a later tick)
            return
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

    def _ahead(self, item: WorkItem) -> int | None:
        """Another challenger's undecided dispute against this claim (our epoch) for our final hash, if any. A dispute
        that can never hold us (decided, another epoch or another final) is dropped, so it is not read again."""
        for did in list(item.data.get("others", [])):
            d = self.ctx.dispute(did)
            if DisputePhase(d.phase) == DisputePhase.RESOLVED or int(d.epoch) != int(item.data.get("epoch", -1)) \
                    or bytes(d.finals[0]) != _b(item.data["final"]):
                item.data["others"].remove(did)
            elif DisputePhase(d.phase) != DisputePhase.NONE:
                return did
        return None

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
