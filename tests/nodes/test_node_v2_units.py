"""Unit tests of the node's v2 duties against fakes (no chain, no IPFS): per-kind phase tables, the verifier's
two-step challenge (commit, then reveal on a later tick), the keeper's finalize rule and panel chores, and a
referee that never fails on a party's missing or malformed data (P9)."""
from __future__ import annotations

import json
import logging
from types import SimpleNamespace

import pytest

from verity.chain.protocol import PanelPhase, ReplicaStatus, TaskKind, TaskStatus, challenge_commitment, vote_commitment
from verity.engine import merkle
from verity.engine.checkpoint import checkpoint_bytes, initial_state
from verity.engine.manifest import load_manifest
from verity.engine.runner import replay_segment
from verity.engine.state import TaskRef
from verity.cid import cid_to_digest
from verity.node import keeper as keeper_mod
from verity.node import referee as referee_mod
from verity.node import verifier as verifier_mod
from verity.node.compute import UNAVAILABLE_VOTE, Result, referee_vote
from verity.node.context import NodeContext
from verity.node.keeper import Keeper
from verity.node.loop import SAVE_AND_GO_ON
from verity.node.phases import INITIAL, TABLES, IllegalTransition, Phase
from verity.node.referee import RefereeRole
from verity.node.snapshot import Snapshot, WorkItem
from verity.node.verifier import VerifierRole, watch_key
from verity.storage import cid_of_bytes
from verity.storage.errors import CidNotFound, NodeUnreachable
from verity.submit.prepare import JobSpec, plan_job

ME, SOLVER, OTHER = "0x" + "ab" * 20, "0x" + "cd" * 20, "0x" + "ef" * 20
ZERO = "0x" + "00" * 20


# ---------------------------------------------------------------- phase tables


def test_phase_tables_allow_each_kinds_path_succeeds():
    snap = Snapshot()
    paths = {"watch": [Phase.CHALLENGE_COMMITTED, Phase.DISPUTING, Phase.LOST],
             "seat": [Phase.VOTE_COMMITTED, Phase.VOTE_REVEALED, Phase.DONE],
             "dispute": [Phase.LOST],
             "solve": [Phase.TRAINED, Phase.COMMITTED, Phase.REVEALED, Phase.DISPUTING, Phase.DONE]}
    for kind, path in paths.items():
        item = WorkItem(key=f"{kind}:1", kind=kind, phase=INITIAL[kind])
        for dst in path:
            snap.move(item, dst)
        assert item.phase == path[-1]
    assert set(TABLES) == set(INITIAL)


@pytest.mark.parametrize("kind, src, dst", [
    ("watch", Phase.WATCHING, Phase.DISPUTING),            # a challenge revealed that was never committed
    ("watch", Phase.CHALLENGE_COMMITTED, Phase.WATCHING),  # committing twice
    ("watch", Phase.WATCHING, Phase.LOST),                 # nothing is at stake before the reveal
    ("seat", Phase.SEATED, Phase.VOTE_REVEALED),           # revealing a vote never committed
    ("seat", Phase.VOTE_REVEALED, Phase.VOTE_COMMITTED),
    ("solve", Phase.REVEALED, Phase.CHALLENGE_COMMITTED),  # another kind's phase
    ("dispute", Phase.DISPUTING, Phase.VOTE_COMMITTED),
])
def test_phase_tables_refuse_illegal_transitions_fails(kind, src, dst):
    item = WorkItem(key="x", kind=kind, phase=src)
    with pytest.raises(IllegalTransition, match=f"{src.value} -> {dst.value} for a {kind} item"):
        Snapshot().move(item, dst)


def test_abandoned_watch_before_a_challenge_ends_done_and_after_it_lost_succeeds():
    snap = Snapshot()
    w = WorkItem(key="watch:1:0", kind="watch", phase=Phase.CHALLENGE_COMMITTED)
    d = WorkItem(key="watch:2:0", kind="watch", phase=Phase.DISPUTING)
    snap.abandon(w, "x")
    snap.abandon(d, "y")
    assert (w.phase, d.phase) == (Phase.DONE, Phase.LOST)


# ---------------------------------------------------------------- fakes


class _Call(tuple):
    """(function name, args), equal to the plain tuple, that also remembers which contract it was built on."""

    contract: str


class _Functions:
    def __init__(self, contract: str):
        self._contract = contract

    def __getattr__(self, name):
        def build(*args):
            call = _Call((name, args))
            call.contract = self._contract
            return call
        return build


class _Contract:
    def __init__(self, name):
        self.name, self.functions, self.abi = name, _Functions(name), []
        self.events = None  # process_receipt is not faked: the verifier falls back to the DisputeOpened event


class _Chain:
    def __init__(self):
        self.time, self.block, self.sent, self.views, self.reads = 1_000, 10, [], {}, []
        self.jobs, self.game, self.panel = _Contract("jobs"), _Contract("game"), _Contract("panel")
        self.dispute_lens = _Contract("dispute_lens")
        self.escrow, self.randomness, self.registry = _Contract("escrow"), _Contract("randomness"), _Contract("registry")

    def transact(self, call, gas=None):
        self.block += 1
        self.sent.append(call)
        return {"blockNumber": self.block}

    def call(self, call):
        self.reads.append(call)
        name, args = call
        return self.views[name](*args) if name in self.views else 0

    def now(self):
        return self.time

    def block_number(self):
        return self.block


def _fake_read(c, contract, fn, *args):
    return c.views[fn](*args)


class _Ctx:
    def __init__(self, chain):
        from verity.node.faults import Faults
        from verity.node.work import WorkPool

        self.chain, self.me, self.work, self.faults = chain, ME, WorkPool(inline=True), Faults()
        self.tasks, self.disputes = {}, {}

    def task(self, tid):
        return self.tasks[tid]

    def dispute(self, did):
        return self.disputes[did]


TRACE = [bytes([i]) * 32 for i in range(3)]
WRONG = [TRACE[0], TRACE[1], b"\x99" * 32]
CID = cid_of_bytes(b"our bundle")


@pytest.fixture
def verifier(monkeypatch):
    chain = _Chain()
    ctx = _Ctx(chain)
    monkeypatch.setattr(verifier_mod, "read", _fake_read)
    monkeypatch.setattr(verifier_mod, "compute_result",
                        lambda *a, **k: Result(list(TRACE), merkle.root(TRACE), CID, 10))
    ctx.tasks[7] = SimpleNamespace(status=TaskStatus.REVEALED, epoch=0, jobId=1, openDisputes=0)
    claim = SimpleNamespace(defender=SOLVER, coDefender=OTHER, root=merkle.root(WRONG), finalHash=WRONG[-1],
                            resultCid=b"\x01" * 32, epoch=0, challengeDeadline=1_100, revealGrace=50)
    chain.views["claimOf"] = lambda tid: claim
    # reveal_spread=0: reveals at the first tick after the deadline (the spread has its own tests below)
    return SimpleNamespace(role=VerifierRole(ctx, reveal_spread=0), ctx=ctx, chain=chain, claim=claim, snap=Snapshot())


def _window(v, tid=7):
    v.role.on_event(v.snap, SimpleNamespace(name="ChallengeWindowOpened", contract="JobRegistry",
                                            args={"taskId": tid, "deadline": 0}))


def _tick(v):
    for item in list(v.snap.open_items()):
        v.role.advance(v.snap, item)


# ---------------------------------------------------------------- verifier


def test_verifier_persists_salt_commits_then_reveals_on_a_later_tick_succeeds(verifier):
    v = verifier
    _window(v)
    item = v.snap.items[watch_key(7, 0)]
    _tick(v)  # re-executes
    assert "final" in item.data and not v.chain.sent
    # differs: the salt is set, and the loop persists it before anything is sent and calls again in the same tick
    assert v.role.advance(v.snap, item) == SAVE_AND_GO_ON
    assert "salt" in item.data and not v.chain.sent
    _tick(v)
    salt = bytes.fromhex(item.data["salt"][2:])
    expected = challenge_commitment(7, merkle.root(TRACE), TRACE[-1], cid_to_digest(CID), salt, ME)
    assert v.chain.sent == [("commitChallenge", (expected,))] and item.phase == Phase.CHALLENGE_COMMITTED
    v.chain.block += 1  # a block was mined since
    _tick(v)
    assert item.phase == Phase.CHALLENGE_COMMITTED and v.chain.sent[-1][0] == "commitChallenge"  # commits still open
    v.chain.time = 1_101  # the commit window closed: nobody can copy the revealed claim into a commitment now
    _tick(v)  # a later tick, a later block, inside the reveal grace: the reveal
    name, args = v.chain.sent[-1]
    assert name == "challengeOptimistic" and args[0] == 7 and args[2] == TRACE[-1] and args[3] == 2
    assert args[4] == cid_to_digest(CID) and args[5] == salt and item.phase == Phase.DISPUTING
    v.role.on_event(v.snap, SimpleNamespace(name="DisputeOpened", contract="DisputeGame",
                                            args={"disputeId": 3, "taskId": 7, "challenger": ME, "defender": SOLVER}))
    assert item.dispute_id == 3
    v.ctx.disputes[3] = SimpleNamespace(phase=5, outcome=1)  # Resolved, challenger wins
    _tick(v)
    assert item.phase == Phase.DONE and item.data["outcome"] == "challenger_wins"


def test_verifier_reExecuting_readsNothingUntilItsResultIsIn_succeeds(verifier, monkeypatch):
    """A re-execution takes minutes at load; its item read the task and its claim twice a second meanwhile."""
    import threading

    from verity.node.work import WorkPool

    v = verifier
    release = threading.Event()

    def slow_result(*a, **k):
        release.wait(30)
        return Result(list(TRACE), merkle.root(TRACE), CID, 10)
    monkeypatch.setattr(verifier_mod, "compute_result", slow_result)
    v.ctx.work = WorkPool()
    reads = _counting_task_reads(v.ctx)
    _window(v)
    reads.clear()
    _tick(v)  # starts the re-execution
    started_reads = len(reads)
    for _ in range(5):
        _tick(v)
    assert len(reads) == started_reads and not v.chain.reads  # nothing read while it runs
    release.set()
    item = v.snap.items[watch_key(7, 0)]
    for _ in range(100):
        _tick(v)
        if "final" in item.data:
            break
        threading.Event().wait(0.05)
    assert "final" in item.data and len(reads) > started_reads  # the result is in: the candidate is read again
    v.ctx.work.close(1.0)


def test_verifier_reveal_waits_for_a_later_block_succeeds(verifier):
    v = verifier
    _window(v)
    for _ in range(3):
        _tick(v)
    item = v.snap.items[watch_key(7, 0)]
    v.chain.block = item.data["commit_block"]  # still the commitment's block
    _tick(v)
    assert [n for n, _ in v.chain.sent] == ["commitChallenge"] and item.phase == Phase.CHALLENGE_COMMITTED


@pytest.mark.parametrize("who", ["defender", "coDefender"])
def test_verifier_never_challenges_its_own_claim_succeeds(verifier, who):
    v = verifier
    setattr(v.claim, who, ME)
    _window(v)
    _tick(v)
    assert v.snap.items[watch_key(7, 0)].phase == Phase.DONE and not v.chain.sent


def test_verifier_agreeing_or_late_sends_nothing_succeeds(verifier):
    v = verifier
    v.claim.finalHash, v.claim.resultCid = TRACE[-1], cid_to_digest(CID)  # our bundle: same bytes (P10)
    _window(v)
    _tick(v), _tick(v)
    assert v.snap.items[watch_key(7, 0)].data["verdict"] == "agrees; bundle served by us too" and not v.chain.sent
    v.claim.finalHash, v.chain.time = WRONG[-1], 1_101  # a new epoch, now past the commit deadline
    v.ctx.tasks[7].epoch = 1
    _window(v)
    _tick(v)
    assert v.snap.items[watch_key(7, 1)].data["verdict"] == "too late to challenge" and not v.chain.sent


def test_verifier_keys_windows_by_epoch_and_drops_a_replaced_candidate_succeeds(verifier):
    v = verifier
    _window(v)
    _window(v)  # the same window seen twice (a re-read event range): one item
    assert [k for k in v.snap.items] == [watch_key(7, 0)]
    for _ in range(3):
        _tick(v)
    v.ctx.tasks[7].epoch = 1  # the candidate was replaced before our reveal
    _tick(v)
    old = v.snap.items[watch_key(7, 0)]
    assert old.phase == Phase.DONE and "replaced" in old.data["verdict"]
    assert [n for n, _ in v.chain.sent] == ["commitChallenge"]
    _window(v)
    assert v.snap.items[watch_key(7, 1)].phase == Phase.WATCHING
    _tick(v)
    assert "final" in v.snap.items[watch_key(7, 1)].data  # reuses the earlier re-execution


def test_verifier_misses_the_reveal_grace_and_gives_up_succeeds(verifier):
    v = verifier
    _window(v)
    for _ in range(3):
        _tick(v)
    v.chain.time, v.chain.block = 1_151, v.chain.block + 1
    _tick(v)
    item = v.snap.items[watch_key(7, 0)]
    assert item.phase == Phase.DONE and "missed" in item.data["verdict"]


# ---------------------------------------------------------------- verifier: held challenges (issue 25)


def _committed(v):
    """Window seen, re-executed, salt persisted, challenge committed; a block mined since."""
    _window(v)
    for _ in range(3):
        _tick(v)
    item = v.snap.items[watch_key(7, 0)]
    assert item.phase == Phase.CHALLENGE_COMMITTED
    v.chain.block += 1
    return item


def _other_dispute(v, did=21, final=TRACE[-1], epoch=0, phase=1, outcome=0):
    """Another challenger's dispute against task 7 (announced by its DisputeOpened event)."""
    v.ctx.disputes[did] = SimpleNamespace(phase=phase, outcome=outcome, epoch=epoch, finals=[final, WRONG[-1]])
    v.role.on_event(v.snap, SimpleNamespace(name="DisputeOpened", contract="DisputeGame",
                                            args={"disputeId": did, "taskId": 7, "challenger": OTHER,
                                                  "defender": SOLVER}))


def test_verifier_holdsItsReveal_behindAnotherDisputeForTheSameFinal_thenRevealsAfterItLost_succeeds(verifier):
    """Four verifiers used to open four games against one wrong result; one is enough while it is undecided. If it
    ends without replacing the candidate (a sybil that threw it), the held challenge is revealed in the fresh grace."""
    v = verifier
    item = _committed(v)
    _other_dispute(v)
    v.chain.time = 1_101
    _tick(v)
    assert [n for n, _ in v.chain.sent] == ["commitChallenge"] and item.data["held"] == 21
    v.chain.time = 1_400  # far past the first grace; the other game still runs (the claim cannot be accepted)
    _tick(v)
    assert item.phase == Phase.CHALLENGE_COMMITTED and len(v.chain.sent) == 1
    v.ctx.disputes[21].phase, v.ctx.disputes[21].outcome = 5, 2  # Resolved: defender wins (the sybil threw it)
    v.claim.revealGrace = 1_400 + 50 - 1_100  # the contract's fresh grace after that settlement
    _tick(v)
    assert v.chain.sent[-1][0] == "challengeOptimistic" and item.phase == Phase.DISPUTING


def test_verifier_heldBehindADisputeThatWon_endsWithoutRevealing_succeeds(verifier):
    v = verifier
    item = _committed(v)
    _other_dispute(v)
    v.chain.time = 1_101
    _tick(v)
    v.ctx.disputes[21].phase, v.ctx.disputes[21].outcome = 5, 1  # challenger wins: its result is the new candidate
    v.ctx.tasks[7].epoch = 1
    _tick(v)
    assert item.phase == Phase.DONE and [n for n, _ in v.chain.sent] == ["commitChallenge"]


@pytest.mark.parametrize("final, epoch, phase", [(b"\x77" * 32, 0, 1), (TRACE[-1], 1, 1), (TRACE[-1], 0, 5)],
                         ids=["another-final", "stale-epoch", "resolved"])
def test_verifier_doesNotHold_behindADisputeForAnotherResult_orAnEndedOne_succeeds(verifier, final, epoch, phase):
    """A sybil's challenge built to lose (another final), a game about an older candidate, or one already decided
    holds nothing back: our own challenge is revealed."""
    v = verifier
    item = _committed(v)
    _other_dispute(v, final=final, epoch=epoch, phase=phase)
    v.chain.time = 1_101
    _tick(v)
    assert v.chain.sent[-1][0] == "challengeOptimistic" and "held" not in item.data
    assert item.data["others"] == []  # never read again: it can no longer hold us


def test_verifier_revealsPastTheGrace_whileAnotherDisputeOfTheClaimIsOpen_succeeds(verifier):
    """The contract accepts a reveal while any challenge of the claim is undecided: not a missed window."""
    v = verifier
    item = _committed(v)
    v.ctx.tasks[7].openDisputes = 1  # e.g. a sybil's losing challenge (another final: nothing to hold behind)
    v.chain.time = 1_151
    _tick(v)
    assert v.chain.sent[-1][0] == "challengeOptimistic" and item.phase == Phase.DISPUTING


def test_verifier_revealsAtItsOwnRandomPointInTheSpread_succeeds(verifier, monkeypatch):
    v = verifier
    v.role.reveal_spread = 0.5  # grace 50: somewhere in [1_100, 1_125]
    monkeypatch.setattr(verifier_mod.secrets, "randbelow", lambda n: n - 1)  # the latest point the spread allows
    item = _committed(v)
    v.chain.time = 1_124
    _tick(v)
    assert item.data["reveal_at"] == 1_125 and len(v.chain.sent) == 1
    v.chain.time = 1_125
    _tick(v)
    assert v.chain.sent[-1][0] == "challengeOptimistic"


def test_verifier_sybilFault_revealsAtOnce_neitherSpreadNorHeld_succeeds(verifier):
    """TEST-ONLY `sybil-challenge` plays a cheater's sybil pre-empting honest challenges (P1 scenario tests): it reveals
    before the deadline, at once, beside any other dispute; the held-challenge rules must not tame it."""
    v = verifier
    v.role.reveal_spread = 1.0
    item = _committed(v)
    _other_dispute(v)  # another sybil's challenge with the same claim, still open
    v.ctx.faults.sybil_challenge = True
    _tick(v)
    assert v.chain.time < 1_100 and v.chain.sent[-1][0] == "challengeOptimistic" and "held" not in item.data


# ---------------------------------------------------------------- keeper


def _keeper(monkeypatch):
    chain = _Chain()
    ctx = _Ctx(chain)
    ctx.replicas = lambda tid: []
    monkeypatch.setattr(keeper_mod, "read", _fake_read)
    k = Keeper(ctx, interval=0, heartbeat_every=1e9)
    return k, ctx, chain


@pytest.mark.parametrize("now, open_disputes, finalized", [(1_150, 0, False), (1_151, 1, False), (1_151, 0, True)])
def test_keeper_finalizes_only_after_window_plus_grace_with_no_open_dispute_succeeds(monkeypatch, now, open_disputes,
                                                                                     finalized):
    k, ctx, chain = _keeper(monkeypatch)
    ctx.tasks[4] = SimpleNamespace(status=TaskStatus.REVEALED, epoch=0, openDisputes=open_disputes)
    # JobRegistry.finalizable, as the contract computes it (the keeper asks; it does not copy the rule)
    chain.views["finalizable"] = lambda tid: (open_disputes == 0 and chain.time > 1_150, 1_150)
    chain.time = now
    snap = Snapshot(active_tasks=[4], last_heartbeat=1e18)
    k(snap)
    assert (("finalize", (4,)) in chain.sent) == finalized


def _counting_task_reads(ctx):
    """Wraps ctx.task: the returned list gets the id of every task read."""
    reads, task = [], ctx.task
    ctx.task = lambda tid: reads.append(tid) or task(tid)
    return reads


def test_keeper_readsARevealedTask_againOnlyAtItsWindowEndOrOnAnEvent_succeeds(monkeypatch):
    """32 nodes each reading every live task every 2 s was a thousand calls a second on the lab's chain: a task
    whose next chore (finalize) is due at its window's end is not read before then, unless an event names it."""
    from verity.chain.events import DecodedEvent

    k, ctx, chain = _keeper(monkeypatch)
    reads = _counting_task_reads(ctx)
    ctx.tasks[4] = SimpleNamespace(status=TaskStatus.REVEALED, epoch=0, openDisputes=0)
    chain.views.update(finalizable=lambda tid: (chain.time > 1_020, 1_020))
    snap = Snapshot(active_tasks=[4], last_heartbeat=1e18)
    for t in (1_000, 1_010, 1_020):
        chain.time = t
        k(snap)
    assert reads == [4]  # one look, then nothing is due before 1_021
    k.on_event(snap, DecodedEvent("JobRegistry", "ChallengeWindowOpened", {"taskId": 4, "deadline": 1_020}, 11, 0, "0x"))
    k(snap)
    assert reads == [4, 4]  # an event about it: looked at again at once
    chain.time = 1_021
    k(snap)
    assert reads == [4, 4, 4] and ("finalize", (4,)) in chain.sent


def test_keeper_readsATask_atItsReplicaDeadline_thenReportsLate_succeeds(monkeypatch):
    k, ctx, chain = _keeper(monkeypatch)
    reads = _counting_task_reads(ctx)
    ctx.tasks[4] = SimpleNamespace(status=TaskStatus.ASSIGNED, epoch=0, openDisputes=0)
    ctx.replicas = lambda tid: [SimpleNamespace(status=ReplicaStatus.ASSIGNED, deadline=1_100),
                                SimpleNamespace(status=ReplicaStatus.COMMITTED, deadline=1_200)]
    snap = Snapshot(active_tasks=[4], last_heartbeat=1e18)
    for t in (1_000, 1_029, 1_100):
        chain.time = t
        k(snap)
    assert reads == [4, 4]  # the first look, then the quiet bound (1_030) came before the deadline
    assert not [c for c in chain.sent if c[0] == "reportLate"]
    chain.time = 1_101
    k(snap)
    assert reads == [4, 4, 4] and ("reportLate", (4, 0)) in chain.sent


def test_keeper_stillLooksAtAQuietTask_withinQuietMax_succeeds(monkeypatch):
    """A state change that no event announced (the keeper missed it, or none exists) is seen within QUIET_MAX_S."""
    k, ctx, chain = _keeper(monkeypatch)
    reads = _counting_task_reads(ctx)
    ctx.tasks[4] = SimpleNamespace(status=TaskStatus.REVEALED, epoch=0, openDisputes=1)
    chain.views.update(finalizable=lambda tid: (False, 900))  # window over, a dispute open
    snap = Snapshot(active_tasks=[4], last_heartbeat=1e18)
    chain.time = 1_000
    k(snap)
    chain.time = 1_000 + keeper_mod.QUIET_MAX_S - 1
    k(snap)
    assert reads == [4]
    chain.time = 1_000 + keeper_mod.QUIET_MAX_S
    k(snap)
    assert reads == [4, 4]


@pytest.mark.parametrize("chain_since, beats", [(299, False), (301, True)])
def test_keeper_heartbeats_when_chain_time_ran_half_the_liveness_window_ahead_succeeds(monkeypatch, chain_since,
                                                                                          beats):
    """A chain whose clock runs ahead of the wall (irregular blocks, a devnet's clock jump) must not see the node
    offline: a heartbeat goes out once half of livenessWindow passed in chain time, whatever the wall clock says."""
    k, ctx, chain = _keeper(monkeypatch)
    chain.views["livenessWindow"] = lambda: 600
    chain.time = 10_000
    snap = Snapshot(last_heartbeat=1e18, last_heartbeat_chain=10_000 - chain_since)  # wall: not due for ages
    k(snap)
    assert (("heartbeat", ()) in chain.sent) == beats
    assert snap.last_heartbeat_chain == (10_000 if beats else 10_000 - chain_since)


@pytest.mark.parametrize("ready, stale, assigned", [(False, False, False), (True, False, True), (False, True, True)])
def test_keeper_assigns_an_open_task_only_once_its_draw_is_readable_succeeds(monkeypatch, ready, stale, assigned):
    k, ctx, chain = _keeper(monkeypatch)
    ctx.tasks[4] = SimpleNamespace(status=TaskStatus.OPEN, epoch=0, openDisputes=0, drawRequest=11)
    chain.views.update(isReady=lambda rid: rid == 11 and ready, isStale=lambda rid: rid == 11 and stale)
    k(Snapshot(active_tasks=[4], last_heartbeat=1e18))
    assert (("assign", (4,)) in chain.sent) == assigned  # stale: assign() renews the request itself


def test_keeper_draws_a_requested_task_on_the_first_tick_its_value_is_readable_succeeds(monkeypatch):
    k, ctx, chain = _keeper(monkeypatch)
    k.interval = 1e9  # the chore round never runs again: only the per-tick draw check can assign
    ctx.tasks[4] = SimpleNamespace(status=TaskStatus.OPEN, epoch=0, openDisputes=0, drawRequest=11)
    ready = {11: False}
    chain.views.update(isReady=lambda rid: ready[rid], isStale=lambda rid: False)
    snap = Snapshot(last_heartbeat=1e18)
    k(snap)  # first chore round (nothing known yet)
    k.on_event(snap, SimpleNamespace(name="DrawRequested", contract="JobRegistry", args={"taskId": 4, "requestId": 11}))
    k(snap)
    assert ("assign", (4,)) not in chain.sent  # target block not mined yet
    ready[11] = True
    k(snap)
    k(snap)
    assert chain.sent.count(("assign", (4,))) == 1  # once, as soon as readable


def test_keeper_seats_and_advances_panels_and_withdraws_nothing_succeeds(monkeypatch):
    k, ctx, chain = _keeper(monkeypatch)
    panels = {1: SimpleNamespace(phase=PanelPhase.SEATING, requestId=9, commitDeadline=0, revealDeadline=0),
              2: SimpleNamespace(phase=PanelPhase.COMMITTING, requestId=0, commitDeadline=999, revealDeadline=0),
              3: SimpleNamespace(phase=PanelPhase.REVEALING, requestId=0, commitDeadline=0, revealDeadline=2_000),
              4: SimpleNamespace(phase=PanelPhase.DECIDED, requestId=0, commitDeadline=0, revealDeadline=0)}
    chain.views.update(panelOf=lambda did: panels[did], isReady=lambda rid: rid == 9, isStale=lambda rid: False)
    snap = Snapshot(active_panels=[1, 2, 3, 4], last_heartbeat=1e18)
    k(snap)
    assert ("seat", (1,)) in chain.sent and ("advance", (2,)) in chain.sent and ("advance", (3,)) not in chain.sent
    assert snap.active_panels == [1, 2, 3]
    # JobEscrow, DisputeGame and RefereePanel pay at once: the keeper neither reads credits nor withdraws anything
    assert not [c for c in chain.sent if c[0] == "withdraw"]
    assert not [c for c in chain.reads if c[0] == "credits"]


# ---------------------------------------------------------------- referee seat


def _seated(monkeypatch, vote=lambda ctx, task, d: b"\x42" * 32, views=None):
    """A referee seated in dispute 5 (task 7) of a panel that is committing until 2_000; `views` records reads."""
    chain = _Chain()
    ctx = _Ctx(chain)
    monkeypatch.setattr(referee_mod, "read", _fake_read)
    monkeypatch.setattr(referee_mod, "referee_vote", vote)
    ctx.disputes[5] = SimpleNamespace(taskId=7)
    ctx.tasks[7] = SimpleNamespace()
    panel = SimpleNamespace(phase=PanelPhase.COMMITTING, verdict=0, majorityVote=b"\0" * 32, commitDeadline=2_000,
                            revealDeadline=3_000)
    seat = SimpleNamespace(seated=True, committed=False, revealed=False)
    seen = views if views is not None else []
    chain.views.update(panelOf=lambda did: seen.append("panelOf") or panel,
                       voteOf=lambda did, who: seen.append("voteOf") or seat)
    role, snap = RefereeRole(ctx), Snapshot()
    role.on_event(snap, SimpleNamespace(name="RefereesSeated", contract="RefereePanel",
                                        args={"disputeId": 5, "referees": [OTHER, ME.upper().replace("0X", "0x")],
                                              "commitDeadline": 2_000}))
    return SimpleNamespace(chain=chain, ctx=ctx, panel=panel, seat=seat, role=role, snap=snap)


def test_referee_commits_when_committing_and_reveals_when_revealing_succeeds(monkeypatch):
    r = _seated(monkeypatch)
    chain, panel, seat, role, snap = r.chain, r.panel, r.seat, r.role, r.snap
    item = snap.items["seat:5"]
    assert item.phase == Phase.SEATED and snap.active_panels == [5]
    role.advance(snap, item)  # compute and persist first
    assert "vote" in item.data and "salt" in item.data and not chain.sent
    role.advance(snap, item)
    salt = bytes.fromhex(item.data["salt"][2:])
    assert chain.sent == [("commitVote", (5, vote_commitment(5, b"\x42" * 32, salt, ME)))]
    seat.committed = True
    role.advance(snap, item)  # still Committing: other seats have not committed
    assert len(chain.sent) == 1 and item.phase == Phase.VOTE_COMMITTED
    panel.phase = PanelPhase.REVEALING
    role.advance(snap, item)
    assert chain.sent[-1] == ("revealVote", (5, b"\x42" * 32, salt)) and item.phase == Phase.VOTE_REVEALED
    panel.phase = PanelPhase.DECIDED
    role.advance(snap, item)
    assert item.phase == Phase.DONE


def test_referee_commitsItsVote_inTheTickThatComputedIt_afterSavingIt_succeeds(monkeypatch, tmp_path):
    """The vote and its salt go to disk first (a crash must not leave a commitment we cannot open), then the commitment
    out in the same loop tick: waiting for the next tick (every other item and the keeper's chores first) cost a
    referee 12 s of a 60-s window at load and its seat (docs/network-lab.md, eleventh stop)."""
    from verity.node.loop import NodeLoop
    from verity.node.snapshot import SnapshotStore

    r = _seated(monkeypatch)
    chain, role, snap = r.chain, r.role, r.snap
    store = SnapshotStore(tmp_path)
    on_disk_when_sent = []
    send = chain.transact
    chain.transact = lambda call, gas=None: (on_disk_when_sent.append(store.load().items["seat:5"].data.get("salt")),
                                             send(call, gas))[1]
    cursor = SimpleNamespace(next_block=0, poll=lambda: [])
    NodeLoop(cursor, store, snap, [role], poll_interval=0.01).tick()
    item = snap.items["seat:5"]
    salt = bytes.fromhex(item.data["salt"][2:])
    assert chain.sent == [("commitVote", (5, vote_commitment(5, b"\x42" * 32, salt, ME)))]  # one tick
    assert on_disk_when_sent == [item.data["salt"]] and item.phase == Phase.VOTE_COMMITTED


def test_referee_recomputing_readsNothingUntilTheVoteIsIn_succeeds(monkeypatch):
    """Inside the panel's 60-s commit window a referee's recomputation competes for the CPU; its item read the panel,
    its seat, the dispute and the task twice a second meanwhile."""
    import threading

    from verity.node.work import WorkPool

    release, views = threading.Event(), []
    r = _seated(monkeypatch, vote=lambda ctx, task, d: release.wait(30) and b"\x42" * 32, views=views)
    ctx, role, snap = r.ctx, r.role, r.snap
    ctx.work = WorkPool()
    item = snap.items["seat:5"]
    role.advance(snap, item)  # starts the recomputation
    started = len(views)
    for _ in range(5):
        role.advance(snap, item)
    assert len(views) == started
    release.set()
    for _ in range(100):
        role.advance(snap, item)
        if "vote" in item.data:
            break
        threading.Event().wait(0.05)
    assert item.data.get("vote") == "0x" + "42" * 32 and len(views) > started
    ctx.work.close(1.0)


# ---------------------------------------------------------------- referee vote with bad party data (P9)


class _Storage:
    def __init__(self, blobs: dict, down: bool = False):
        self.blobs, self.down = blobs, down

    def _get(self, cid):
        if self.down:
            raise NodeUnreachable("http://ipfs", "connection refused")
        if cid not in self.blobs:
            raise CidNotFound(cid, "http://ipfs", 1.0)
        return self.blobs[cid]

    def get_bytes(self, cid, max_bytes=None, timeout=None):
        return self._get(cid)

    def get_json(self, cid, max_bytes=None):
        return json.loads(self._get(cid))


@pytest.fixture(scope="module")
def job():
    p = plan_job(JobSpec(shards=1, rounds=1, steps=20, k=10))
    m = load_manifest(p.manifest_bytes)
    start = checkpoint_bytes(initial_state(m), m)
    blobs = {cid_of_bytes(b): b for b in p.blobs}
    shard_cid = m.shards[0].cid
    return SimpleNamespace(m=m, start=start, h0=initial_state(m).hash, blobs=blobs, shard_cid=shard_cid)


def _party(blobs, h0, checkpoints: dict):
    """A bundle whose trace starts at h0 (agreed), with the given checkpoint CIDs; returns (cid digest, root)."""
    trace = [h0, b"\x01" * 32, b"\x02" * 32]
    doc = json.dumps({"version": 1, "k": 10, "trace": ["0x" + h.hex() for h in trace],
                      "checkpoints": {str(j): c for j, c in checkpoints.items()}}).encode()
    blobs[cid_of_bytes(doc)] = doc
    return cid_to_digest(cid_of_bytes(doc)), merkle.root(trace)


def _vote(tmp_path, job, parties, *, down=False):
    blobs = dict(job.blobs)
    built = [_party(blobs, job.h0, cps(blobs)) for cps in parties]
    ctx = NodeContext(chain=None, storage=_Storage(blobs, down), state_dir=tmp_path)
    ctx._manifests[1] = job.m
    dispute = SimpleNamespace(disputeId=8, segment=0, step=3, resultCids=[b[0] for b in built], roots=[b[1] for b in built])
    task = SimpleNamespace(kind=TaskKind.TRAIN, jobId=1, round=0, index=0)
    return referee_vote(ctx, task, dispute)


def _no_checkpoint(blobs):
    return {}


def _garbage_checkpoint(blobs):
    blobs[cid_of_bytes(b"not a checkpoint")] = b"not a checkpoint"
    return {0: cid_of_bytes(b"not a checkpoint")}


def _unfetchable_checkpoint(blobs):
    return {0: cid_of_bytes(b"nobody has this")}


def _good_checkpoint(job):
    def cps(blobs):
        blobs[cid_of_bytes(job.start)] = job.start
        return {0: cid_of_bytes(job.start)}
    return cps


def test_referee_votes_no_data_when_neither_party_yields_the_agreed_checkpoint_succeeds(tmp_path, job, caplog):
    caplog.set_level(logging.WARNING, logger="verity.node.referee")
    for parties in ([_no_checkpoint, _garbage_checkpoint], [_unfetchable_checkpoint, _no_checkpoint]):
        caplog.clear()
        assert _vote(tmp_path, job, parties) == UNAVAILABLE_VOTE
        assert sum("permanent" in r.getMessage() for r in caplog.records) == 2  # once per party, not retried
        assert any("no-data value" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("bad", [_no_checkpoint, _garbage_checkpoint, _unfetchable_checkpoint])
def test_referee_recomputes_from_the_other_partys_checkpoint_succeeds(tmp_path, job, bad):
    from verity.engine.data import load_shard

    shard = load_shard(job.blobs[job.shard_cid], job.m.data, samples=job.m.shards[0].samples, source="shard")
    expected = replay_segment(job.m, job.start, shard, TaskRef(1, 0, 0))[4]
    assert _vote(tmp_path, job, [bad, _good_checkpoint(job)]) == expected
    assert _vote(tmp_path, job, [_good_checkpoint(job), bad]) == expected


def test_referee_vote_with_ipfs_down_raises_to_be_retried_fails(tmp_path, job):
    with pytest.raises(ConnectionError):
        _vote(tmp_path, job, [_good_checkpoint(job), _no_checkpoint], down=True)


def test_corrupt_checkpoint_fault_parses_succeeds():
    from verity.node.faults import Faults

    f = Faults.parse(["corrupt-checkpoint", "bitflip@step=3"])
    assert f.corrupt_checkpoint and f.bitflip_step == 3 and not f.withhold_checkpoint


# ---------------------------------------------------------------- dispute parties


def _dispute(phase=1, outcome=0, epoch=0, co=OTHER, moved=(False, False)):
    from verity.node.context import dispute_view

    sides = [SimpleNamespace(party=p, moved=m, root=b"\0" * 32, finalHash=b"\0" * 32, resultCid=b"\0" * 32,
                             claim=b"\0" * 32) for p, m in zip((ME, SOLVER), moved)]
    return dispute_view(SimpleNamespace(taskId=7, phase=phase, outcome=outcome, epoch=epoch, coDefender=co,
                                        level=0, lo=0, hi=2, mid=1, segment=0, step=0, sides=sides), 3)


def test_party_index_counts_the_co_defender_as_b_succeeds():
    from verity.node.dispute import party_index

    d = _dispute()
    assert (party_index(d, ME), party_index(d, SOLVER), party_index(d, OTHER.upper().replace("0X", "0x"))) == (0, 1, 1)
    assert party_index(d, "0x" + "12" * 20) is None and party_index(_dispute(co=ZERO), OTHER) is None
    assert d.parties == [ME, SOLVER] and d.moved == [False, False] and d.disputeId == 3


def _party_role(monkeypatch, me, dispute, task_epoch=0):
    from verity.node.dispute import PartyRole

    chain = _Chain()
    ctx = _Ctx(chain)
    ctx.me = me
    ctx.disputes[3] = dispute
    ctx.tasks[7] = SimpleNamespace(epoch=task_epoch, status=TaskStatus.REVEALED)
    ctx.faults.silent_in_dispute = True  # moves are not what these tests look at
    role, snap = PartyRole(ctx), Snapshot()
    role.on_event(snap, SimpleNamespace(name="DisputeOpened", contract="DisputeGame",
                                        args={"disputeId": 3, "taskId": 7, "challenger": ME, "defender": SOLVER}))
    return role, snap, chain


def test_co_defender_plays_the_dispute_and_shares_bs_fate_succeeds(monkeypatch):
    role, snap, chain = _party_role(monkeypatch, OTHER, _dispute())
    item = snap.items["dispute:3"]
    assert item.data["role"] == "co-defender"
    role.ctx.disputes[3] = _dispute(phase=5, outcome=2)  # defender wins
    role.advance(snap, item)
    assert item.phase == Phase.DONE and item.data["outcome"] == "defender_wins"
    role2, snap2, _ = _party_role(monkeypatch, OTHER, _dispute(phase=5, outcome=1))  # challenger wins: B and co-defender lose
    role2.advance(snap2, snap2.items["dispute:3"])
    assert snap2.items["dispute:3"].phase == Phase.LOST
    spared = _dispute(phase=5, outcome=1)
    spared.stepRootBy = 1  # the defender made B's step-level claims: its co-defender is spared
    role4, snap4, _ = _party_role(monkeypatch, OTHER, spared)
    role4.advance(snap4, snap4.items["dispute:3"])
    assert snap4.items["dispute:3"].phase == Phase.DONE and snap4.items["dispute:3"].data["spared"]
    _, snap3, _ = _party_role(monkeypatch, "0x" + "12" * 20, _dispute())
    assert "dispute:3" not in snap3.items  # not a party


def test_party_abandons_a_stale_dispute_succeeds(monkeypatch):
    role, snap, chain = _party_role(monkeypatch, ME, _dispute(epoch=0), task_epoch=1)
    role.advance(snap, snap.items["dispute:3"])
    assert chain.sent == [("abandon", (3,))]
    role2, snap2, chain2 = _party_role(monkeypatch, ME, _dispute(epoch=1), task_epoch=1)
    role2.advance(snap2, snap2.items["dispute:3"])
    assert chain2.sent == []


def test_only_bs_step_root_submitter_moves_for_b_at_level_1_succeeds(monkeypatch):
    d = _dispute(phase=3)  # Bisect1
    d.level, d.stepRootBy = 1, 1  # the defender submitted B's step root
    role, snap, chain = _party_role(monkeypatch, OTHER, d)  # we are the co-defender
    role.ctx.faults.silent_in_dispute = False
    chain.views["clocksRemaining"] = lambda did: (10, 10)
    item = snap.items["dispute:3"]
    item.data["pinpoint_tried"] = True
    role.advance(snap, item)
    assert chain.sent == []
    d.stepRootBy = 2  # we submitted it: we answer the leaf request
    item.data["steps"] = ["0x" + bytes([i]).hex() * 32 for i in range(3)]
    role.advance(snap, item)
    assert [name for name, _ in chain.sent] == ["revealLeaf"]
