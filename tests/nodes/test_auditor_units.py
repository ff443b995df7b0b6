"""Unit tests of verification fees on the node side (P5, "looking pays") against fakes (no chain, no IPFS):
the fee key chain against VerificationFees' rule (keccak^gap(k_e) == the chain's last key), the sampling decision,
and the auditor's phases (result persisted, then salt persisted, then commitCheck; too late once a result is public;
claim only an accepted, equal result from epoch e + 2, in epoch order)."""
from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
from eth_utils import keccak

from verity.chain import TxFailed
from verity.chain.protocol import (BPS, ROLE_SOLVER, ROLE_VERIFIER, ReplicaStatus, TaskStatus, check_commitment, fee_sampled,
                                   fee_ticket)
from verity.engine import merkle
from verity.node import auditor as auditor_mod
from verity.node import keychain
from verity.node import verifier as verifier_mod
from verity.node.auditor import TOO_LATE, AuditorRole, audit_key
from verity.node.compute import Result
from verity.node.keychain import N, KeyChain, chain_seed, epoch_key, find_chain, hash_n, head
from verity.node.loop import SAVE_AND_GO_ON
from verity.node.phases import IllegalTransition, Phase
from verity.node.sampling import load_or_create_key
from verity.node.snapshot import Snapshot, WorkItem
from verity.node.verifier import VerifierRole, watch_key
from verity.storage import cid_of_bytes

ME, SOLVER = "0x" + "ab" * 20, "0x" + "cd" * 20
EPOCH = 30
SEED = keccak(b"a test seed")
ZERO32 = b"\0" * 32


def contract_advance(last_key: bytes, last_epoch: int, anchor_epoch: int, e: int, key: bytes) -> bool:
    """VerificationFees._advanceChain's acceptance rule, written out independently of verity.node.keychain."""
    if e <= anchor_epoch or e < last_epoch:
        return False
    h = key
    for _ in range(e - last_epoch):
        h = keccak(h)
    return h == last_key


# ---------------------------------------------------------------- key chain


def test_epoch_keys_hash_to_the_anchored_head_and_to_each_other_succeeds():
    anchor = 1_000
    top = hash_n(SEED, N)
    assert head(SEED) == top
    last_key, last_epoch = top, anchor
    for e in (anchor + 1, anchor + 2, anchor + 2, anchor + 57, anchor + N // 2, anchor + N):  # claims in epoch order
        k = epoch_key(SEED, anchor, e)
        assert hash_n(k, e - anchor) == top
        assert contract_advance(last_key, last_epoch, anchor, e, k)
        last_key, last_epoch = k, e
    assert epoch_key(SEED, anchor, anchor + N) == SEED  # why the seed is derived, never the sampling key itself


def test_a_wrong_epochs_key_is_refused_by_the_contract_rule_fails():
    anchor = 10
    assert not contract_advance(head(SEED), anchor, anchor, anchor + 3, epoch_key(SEED, anchor, anchor + 2))
    assert not contract_advance(head(SEED), anchor, anchor, anchor + 2, epoch_key(SEED, anchor, anchor + 3))
    assert not contract_advance(head(SEED), anchor, anchor, anchor, head(SEED))  # the anchor epoch has no key


@pytest.mark.parametrize("e", [0, 999, 1_000, 1_000 + N + 1])
def test_epoch_key_outside_the_chain_raises_fails(e):
    with pytest.raises(ValueError, match="outside the key chain anchored in epoch 1000"):
        epoch_key(SEED, 1_000, e)


def test_bad_seeds_and_generations_raise_fails():
    with pytest.raises(ValueError, match="32 bytes"):
        head(b"short")
    with pytest.raises(ValueError, match="32 bytes"):
        chain_seed(b"short", 1)
    with pytest.raises(ValueError, match=">= 0"):
        chain_seed(SEED, -1)


def test_key_chain_caches_so_a_later_epoch_costs_at_most_a_checkpoint_gap_succeeds(monkeypatch):
    calls = []
    real = keychain.keccak
    monkeypatch.setattr(keychain, "keccak", lambda b: calls.append(1) or real(b))
    chain = KeyChain(keccak(b"another seed"), 0)
    first = chain.key(5)
    assert len(calls) == N - 5
    calls.clear()
    assert chain.key(5) == first and not calls                      # cached
    later = chain.key(6)                                              # a preimage of key(5): walked down again
    assert len(calls) <= keychain.CHECKPOINT_EVERY and keccak(later) == first
    calls.clear()
    chain.key(4)                                                      # an older epoch: from the nearest key below
    assert len(calls) <= keychain.CHECKPOINT_EVERY


def test_seeds_are_per_generation_and_never_the_sampling_key_succeeds():
    key = keccak(b"sampling key")
    seeds = {chain_seed(key, g) for g in (0, 1, 2)}
    assert len(seeds) == 3 and key not in seeds
    # a renewed chain shares no key with the old one (it would make every future ticket public)
    old, new = KeyChain(chain_seed(key, 0), 0), KeyChain(chain_seed(key, 5_000), 5_000)
    assert {old.key(e) for e in range(5_001, 5_011)}.isdisjoint({new.key(e) for e in range(5_001, 5_011)})


def test_find_chain_recognises_our_chain_from_the_sampling_key_alone_succeeds():
    key, anchor = keccak(b"sampling key"), 700
    seed = chain_seed(key, anchor - 1)  # the anchor transaction crossed an epoch boundary
    assert find_chain(key, head(seed), anchor, anchor).seed == seed
    claimed = epoch_key(seed, anchor, anchor + 9)
    assert find_chain(key, claimed, anchor + 9, anchor).key(anchor + 9) == claimed
    assert find_chain(keccak(b"someone else"), head(seed), anchor, anchor) is None
    assert find_chain(key, ZERO32, 0, 0) is None
    assert find_chain(key, head(chain_seed(key, anchor - 5)), anchor, anchor) is None  # not a generation we use


def test_fee_sampling_follows_the_rate_succeeds():
    k = epoch_key(SEED, 0, 3)
    assert all(fee_sampled(k, t, BPS) for t in range(1, 200))
    assert not any(fee_sampled(k, t, 0) for t in range(1, 200))
    half = [fee_sampled(k, t, 5_000) for t in range(1, 401)]
    assert 150 < sum(half) < 250
    for t in range(1, 50):
        assert fee_sampled(k, t, 2_500) == (fee_ticket(k, t) * BPS < 2_500 << 64)
    # the ticket is private: another epoch's key draws other tasks
    assert half != [fee_sampled(epoch_key(SEED, 0, 4), t, 5_000) for t in range(1, 401)]


# ---------------------------------------------------------------- fakes


class _Functions:
    def __getattr__(self, name):
        return lambda *args: (name, args)


class _Contract:
    def __init__(self, name):
        self.name, self.functions = name, _Functions()


class _Fees:
    """The state of VerificationFees the auditor reads, with the contract's rules for anchor and claim."""

    def __init__(self, chain):
        self.c = chain
        self.pots = {}          # job -> [balance, feePerCheck, rateBps, checksPerTask, closedAt]
        self.chains = {}        # verifier -> (lastKey, lastEpoch, anchorEpoch)
        self.checks, self.claims, self.checks_paid = {}, {}, {}   # claims: (task, verifier) -> 1 claimed / 2 paid
        self.closes, self.slots = {}, {}                           # task -> claim window close; task -> [(v, t)]

    def epoch(self):
        return self.c.time // EPOCH

    def view(self, name, args):
        if name == "epochSeconds":
            return EPOCH
        if name == "potOf":
            return tuple(self.pots.get(args[0], (0, 0, 0, 0, 0)))
        if name == "chainOf":
            return self.chains.get(args[0], (ZERO32, 0, 0))
        if name == "checkOf":
            return self.checks.get(args, ZERO32)
        if name == "claimStateOf":
            return self.claims.get(tuple(args), 0)
        if name == "claimClosesAt":
            return self.closes.get(args[0], 0)
        if name == "slotsOf":
            return list(self.slots.get(args[0], []))
        if name == "checksPaid":
            return self.checks_paid.get(args[0], 0)
        raise AssertionError(f"unexpected view {name}")

    def send(self, name, args):
        if name == "anchor":
            self.chains[ME] = (args[0], self.epoch(), self.epoch())
        elif name == "commitCheck":
            tid, commitment = args
            task = self.c.ctx.tasks[tid]
            if TaskStatus(task.status) not in (TaskStatus.OPEN, TaskStatus.ASSIGNED) or any(
                    r.status == ReplicaStatus.REVEALED for r in self.c.ctx.reps.get(tid, [])):
                raise TxFailed("commitCheck", "ResultPublic", (tid, task.status))
            self.checks[(tid, ME)] = commitment
        elif name == "claim":
            tid, key, final, salt = args
            task = self.c.ctx.tasks[tid]
            e = task.createdAt // EPOCH
            if self.checks.get((tid, ME)) != check_commitment(tid, final, salt, ME):
                raise TxFailed("claim", "CommitmentMismatch", (tid, ME))
            if self.epoch() < e + 2:
                raise TxFailed("claim", "KeyRevealTooEarly", (tid, e, e + 2))
            last_key, last_epoch, anchor = self.chains[ME]
            if not contract_advance(last_key, last_epoch, anchor, e, key):
                raise TxFailed("claim", "EpochOutOfOrder" if e <= anchor or e < last_epoch else "BadEpochKey")
            pot = self.pots[task.jobId]
            if not fee_sampled(key, tid, pot[2]):
                raise TxFailed("claim", "NotSampled")
            if self.closes.get(tid) and self.c.time >= self.closes[tid]:
                raise TxFailed("claim", "ClaimWindowClosed", (tid, self.closes[tid]))
            self.chains[ME] = (key, e, anchor)
            self.closes.setdefault(tid, self.c.time + 2 * EPOCH)
            self.claims[(tid, ME)] = 1
            self.slots.setdefault(tid, []).append((ME, 0))
            pot[0] -= pot[1]
        elif name == "collect":
            tid = args[0]
            if not self.slots.get(tid) or self.c.time < self.closes.get(tid, 0):
                raise TxFailed("collect", "NothingToCollect", (tid, self.closes.get(tid, 0)))
            for v, _ in self.slots.pop(tid):
                self.claims[(tid, v)] = 2
                self.checks_paid[tid] = self.checks_paid.get(tid, 0) + 1
        else:
            raise AssertionError(f"unexpected transaction {name}")


class _Chain:
    def __init__(self):
        self.time, self.block, self.sent, self.fail = 100 * EPOCH + 5, 10, [], {}
        self.fees, self.jobs, self.registry = _Contract("fees"), _Contract("jobs"), _Contract("registry")
        self.roles = ROLE_SOLVER | ROLE_VERIFIER  # our registry roles (rolesOf)
        self.state = _Fees(self)
        self.ctx = None

    def call(self, call):
        if call[0] == "rolesOf":
            return self.roles
        return self.state.view(*call)

    def transact(self, call, gas=None):
        name, args = call
        if name in self.fail:
            raise self.fail[name]
        self.state.send(name, args)
        self.block += 1
        self.sent.append(call)
        return {"blockNumber": self.block}

    def now(self):
        return self.time

    def block_number(self):
        return self.block


class _Ctx:
    def __init__(self, chain, state_dir):
        from verity.node.faults import Faults
        from verity.node.work import WorkPool

        self.chain, self.me, self.state_dir = chain, ME, state_dir
        self.work, self.faults = WorkPool(inline=True), Faults()
        self.tasks, self.reps = {}, {}
        self.jobs = {1: SimpleNamespace(executionWindow=600, resultFloor=30)}
        chain.ctx = self

    def job(self, jid):
        return self.jobs[jid]

    def task(self, tid):
        return self.tasks[tid]

    def replicas(self, tid):
        return self.reps.get(tid, [])


TRACE = [bytes([i]) * 32 for i in range(3)]
CID = cid_of_bytes(b"our bundle")


@pytest.fixture
def fees(monkeypatch, tmp_path):
    chain = _Chain()
    ctx = _Ctx(chain, tmp_path)
    computed, published = [], []
    # computed: re-executions that keep their result back; published: those that would add it to IPFS at once
    monkeypatch.setattr(auditor_mod, "compute_result", lambda c, tid, task, label, publish: (
        published if publish else computed).append((tid, label)) or Result(list(TRACE), merkle.root(TRACE), CID, 10))
    chain.state.pots[1] = [10 * 10**18, 10**18, BPS, 2, 0]
    role = AuditorRole(ctx)
    return SimpleNamespace(role=role, ctx=ctx, chain=chain, state=chain.state, snap=Snapshot(), computed=computed,
                           published=published)


def _anchored(f):
    """Anchor (the first tick) and move to the next epoch, where new tasks have tickets."""
    f.role(f.snap)
    f.chain.time += EPOCH
    return f.state.chains[ME][2]


def _created(f, tid=7, job=1, status=TaskStatus.OPEN):
    f.ctx.tasks[tid] = SimpleNamespace(jobId=job, status=status, createdAt=f.chain.time, finalHash=ZERO32)
    f.role.on_event(f.snap, SimpleNamespace(name="TaskCreated", contract="JobRegistry",
                                            args={"taskId": tid, "jobId": job}))
    return f.snap.items.get(audit_key(tid))


def _tick(f):
    for item in list(f.snap.open_items()):
        f.role.advance(f.snap, item)


def _names(f):
    return [name for name, _ in f.chain.sent]


def _to_committed(f, tid=7):
    item = _created(f, tid, status=TaskStatus.ASSIGNED)
    for _ in range(3):
        _tick(f)
    assert item.phase == Phase.COMMITTED
    return item


def _accept(f, tid=7, final=TRACE[-1]):
    f.ctx.tasks[tid].status = TaskStatus.ACCEPTED
    f.ctx.reps[tid] = [SimpleNamespace(node=SOLVER, status=ReplicaStatus.ACCEPTED, finalHash=final)]


# ---------------------------------------------------------------- anchoring


def test_first_tick_anchors_the_head_of_a_derived_chain_once_succeeds(fees):
    f = fees
    f.role(f.snap)
    key = load_or_create_key(f.ctx.state_dir)
    epoch = f.chain.time // EPOCH
    assert f.chain.sent == [("anchor", (head(chain_seed(key, epoch)),))]
    f.role._next_check = 0
    f.role(f.snap)
    assert _names(f) == ["anchor"]  # covered: nothing more
    restarted = AuditorRole(f.ctx)  # a restart finds its chain on-chain from the sampling key alone
    restarted(f.snap)
    assert _names(f) == ["anchor"] and restarted._chain.anchor_epoch == epoch


def test_a_foreign_or_nearly_spent_chain_is_anchored_anew_succeeds(fees):
    f = fees
    f.state.chains[ME] = (keccak(b"not ours"), 50, 50)
    f.role(f.snap)
    assert _names(f) == ["anchor"]
    f.chain.time += (N - auditor_mod.ANCHOR_MARGIN + 1) * EPOCH  # fewer than the margin's epochs left
    f.role._next_check = 0
    f.role(f.snap)
    assert _names(f) == ["anchor", "anchor"] and f.chain.sent[0] != f.chain.sent[1]  # a new generation's head


def test_a_refused_anchor_is_logged_and_leaves_no_chain_fails(fees, caplog):
    f = fees
    f.chain.fail["anchor"] = TxFailed("anchor", "NotVerifier", (ME,))
    with caplog.at_level(logging.WARNING):
        f.role(f.snap)
    assert f.role._chain is None and "cannot anchor" in caplog.text
    assert _created(f) is None


# ---------------------------------------------------------------- sampling at TaskCreated


def test_task_of_the_anchor_epoch_has_no_ticket_succeeds(fees, caplog):
    f = fees
    f.role(f.snap)  # anchored in this very epoch
    with caplog.at_level(logging.INFO):
        assert _created(f) is None
    assert "no fee ticket" in caplog.text


def test_unfunded_job_is_ignored_until_funded_succeeds(fees):
    f = fees
    _anchored(f)
    f.state.pots.pop(1)
    assert _created(f) is None
    f.state.pots[1] = [10**18, 10**18, BPS, 1, 0]
    f.role.on_event(f.snap, SimpleNamespace(name="FeesFunded", contract="VerificationFees",
                                            args={"jobId": 1, "amount": 10**18}))
    assert f.snap.items[audit_key(7)].phase == Phase.WATCHING


def test_sampling_decision_follows_the_private_ticket_succeeds(fees, caplog):
    f = fees
    _anchored(f)
    f.state.pots[1][2] = 5_000
    chain = f.role._chain
    e = f.chain.time // EPOCH
    with caplog.at_level(logging.INFO):
        for tid in range(1, 41):
            _created(f, tid)
    made = {i.task_id for i in f.snap.items.values()}
    assert made == {t for t in range(1, 41) if fee_sampled(chain.key(e), t, 5_000)}
    assert 0 < len(made) < 40 and "not sampled for a fee" in caplog.text


def test_a_spent_pot_gets_no_item_succeeds(fees):
    f = fees
    _anchored(f)
    f.state.pots[1][0] = 10**18 - 1
    assert _created(f) is None and not f.computed


def test_a_task_already_past_open_gets_no_item_succeeds(fees):
    f = fees
    _anchored(f)
    assert _created(f, status=TaskStatus.REVEALED) is None


# ---------------------------------------------------------------- phases


def test_result_then_salt_are_persisted_before_the_blind_commit_succeeds(fees):
    f = fees
    _anchored(f)
    item = _created(f, status=TaskStatus.ASSIGNED)
    _tick(f)
    assert item.data["final"] == "0x" + TRACE[-1].hex() and "salt" not in item.data and _names(f) == ["anchor"]
    assert set(item.data) >= {"final", "trace", "root", "cid"} and f.computed == [(7, "audit")]
    assert f.published == []  # a fee check's result is never added to IPFS (a copier could read it)
    # the salt is set, and the loop saves it before anything is sent and calls again in the same tick
    assert f.role.advance(f.snap, item) == SAVE_AND_GO_ON
    assert "salt" in item.data and _names(f) == ["anchor"]
    _tick(f)
    expected = check_commitment(7, TRACE[-1], bytes.fromhex(item.data["salt"][2:]), ME)
    assert f.chain.sent[-1] == ("commitCheck", (7, expected)) and item.phase == Phase.COMMITTED


def test_a_commit_sent_before_a_crash_is_not_sent_again_succeeds(fees):
    f = fees
    _anchored(f)
    item = _created(f, status=TaskStatus.ASSIGNED)
    _tick(f), _tick(f)
    salt = bytes.fromhex(item.data["salt"][2:])
    f.state.checks[(7, ME)] = check_commitment(7, TRACE[-1], salt, ME)  # mined, then the node crashed
    f.ctx.reps[7] = []
    _tick(f)
    assert item.phase == Phase.COMMITTED and _names(f) == ["anchor"]


def test_a_result_public_before_our_commit_is_too_late_succeeds(fees):
    f = fees
    _anchored(f)
    item = _created(f, status=TaskStatus.ASSIGNED)
    _tick(f), _tick(f)
    f.ctx.reps[7] = [SimpleNamespace(node=SOLVER, status=ReplicaStatus.REVEALED, finalHash=TRACE[-1])]
    _tick(f)
    assert (item.phase, item.data["verdict"]) == (Phase.DONE, TOO_LATE) and "commitCheck" not in _names(f)


def test_a_result_public_revert_is_too_late_not_an_error_succeeds(fees):
    f = fees
    _anchored(f)
    item = _created(f, status=TaskStatus.ASSIGNED)
    _tick(f), _tick(f)
    f.chain.fail["commitCheck"] = TxFailed("commitCheck", "ResultPublic", (7, 3))  # revealed in the same block
    _tick(f)
    assert (item.phase, item.data["verdict"]) == (Phase.DONE, TOO_LATE)


def test_an_open_task_waits_for_its_draw_and_our_own_slot_is_never_computed_succeeds(fees):
    f = fees
    _anchored(f)
    item = _created(f)  # Open: its slots are drawn a few blocks later
    _tick(f), _tick(f)
    assert item.phase == Phase.WATCHING and not f.computed  # no re-execution before we know who solves it
    f.ctx.tasks[7].status = TaskStatus.ASSIGNED
    f.ctx.reps[7] = [SimpleNamespace(node=ME, status=ReplicaStatus.ASSIGNED, finalHash=ZERO32)]
    _tick(f)
    assert item.data["verdict"] == "our own task" and not f.computed


def test_a_verifier_only_node_checks_an_open_task_at_once_succeeds(fees):
    f = fees
    f.chain.roles = ROLE_VERIFIER  # never drawn as a replica: no reason to wait for the draw
    _anchored(f)
    item = _created(f)
    _tick(f)
    assert f.computed == [(7, "audit")] and "final" in item.data


def test_our_own_task_is_not_checked_succeeds(fees):
    f = fees
    _anchored(f)
    item = _created(f, status=TaskStatus.ASSIGNED)
    f.ctx.reps[7] = [SimpleNamespace(node=ME, status=ReplicaStatus.ASSIGNED, finalHash=ZERO32)]
    _tick(f)
    assert item.data["verdict"] == "our own task" and not f.computed


def test_claim_waits_for_acceptance_and_epoch_e_plus_2_then_collects_after_the_window_succeeds(fees):
    f = fees
    _anchored(f)
    item = _to_committed(f)
    e = item.data["fee_epoch"]
    _tick(f)
    assert item.phase == Phase.COMMITTED and _names(f)[-1] == "commitCheck"  # not accepted yet
    _accept(f)
    f.chain.time = (e + 1) * EPOCH + 29
    _tick(f)
    assert item.phase == Phase.COMMITTED and _names(f)[-1] == "commitCheck"  # key not revealable before e + 2
    f.chain.time = (e + 2) * EPOCH
    balance = f.state.pots[1][0]
    _tick(f)
    assert item.phase == Phase.COMMITTED and "claimed" in item.data  # a slot held until the window closes
    name, (tid, key, final, _) = f.chain.sent[-1]
    assert (name, tid, final) == ("claim", 7, TRACE[-1]) and key == f.role._chain.key(e)
    assert f.state.pots[1][0] == balance - 10**18 and f.state.chains[ME][:2] == (key, e)
    f.chain.time = f.state.closes[7] - 1
    _tick(f)
    assert item.phase == Phase.COMMITTED and _names(f)[-1] == "claim"  # lower tickets may still claim
    f.chain.time = f.state.closes[7]
    _tick(f)
    assert (item.phase, item.data["verdict"]) == (Phase.DONE, "fee paid") and _names(f)[-1] == "collect"


def _claimable(f):
    """A committed check of task 7, accepted with its result, at the first second its key may be revealed."""
    _anchored(f)
    item = _to_committed(f)
    _accept(f)
    f.chain.time = (item.data["fee_epoch"] + 2) * EPOCH
    return item


def test_a_claim_displaced_by_a_lower_ticket_is_not_paid_succeeds(fees):
    f = fees
    item = _claimable(f)
    _tick(f)
    assert "claimed" in item.data
    f.state.slots[7] = [("0x" + "ef" * 20, 0)]  # another verifier's lower ticket took the one slot
    f.chain.time = f.state.closes[7]
    _tick(f)
    assert item.data["verdict"] == "not paid: a lower ticket took the slot" and _names(f)[-1] == "claim"


def test_a_claim_made_before_a_crash_is_collected_succeeds(fees):
    f = fees
    item = _claimable(f)
    f.state.claims[(7, ME)] = 1  # claimed, then crashed before the item recorded it
    f.state.slots[7], f.state.closes[7] = [(ME, 0)], f.chain.time + 2 * EPOCH
    _tick(f)
    assert "claimed" in item.data and "claim" not in _names(f)
    f.chain.time = f.state.closes[7]
    _tick(f)
    assert item.data["verdict"] == "fee paid" and _names(f)[-1] == "collect"


def test_a_slot_past_its_result_floor_ends_the_check_unsent_succeeds(fees):
    """Issue 23: a check lands before every drawn slot's result floor, so no result can be pending (read from the
    mempool and copied); past it the auditor sends nothing and says why."""
    f = fees
    _anchored(f)
    item = _created(f, status=TaskStatus.ASSIGNED)
    drawn = f.chain.time
    f.ctx.reps[7] = [SimpleNamespace(node=SOLVER, status=ReplicaStatus.ASSIGNED, finalHash=ZERO32,
                                     deadline=drawn + 600)]
    f.chain.time = drawn + 30  # the floor: the solver's result may land in the next block
    sent = len(f.chain.sent)
    for _ in range(3):
        _tick(f)
    assert item.data["verdict"] == auditor_mod.PAST_FLOOR and len(f.chain.sent) == sent


def test_a_replica_commit_ends_the_check_unsent_succeeds(fees):
    f = fees
    _anchored(f)
    item = _created(f, status=TaskStatus.ASSIGNED)
    f.ctx.reps[7] = [SimpleNamespace(node=SOLVER, status=ReplicaStatus.COMMITTED, finalHash=ZERO32, deadline=0)]
    sent = len(f.chain.sent)
    _tick(f)
    assert item.data["verdict"] == auditor_mod.PAST_FLOOR and len(f.chain.sent) == sent


def test_a_different_accepted_result_is_not_claimed_fails(fees):
    f = fees
    _anchored(f)
    item = _to_committed(f)
    _accept(f, final=b"\x99" * 32)
    f.chain.time += 3 * EPOCH
    _tick(f)
    assert item.data["verdict"] == "result differs from the accepted one" and _names(f)[-1] == "commitCheck"


def test_a_cancelled_task_ends_the_check_succeeds(fees):
    f = fees
    _anchored(f)
    item = _to_committed(f)
    f.ctx.tasks[7].status = TaskStatus.CANCELLED
    _tick(f)
    assert item.data["verdict"] == "task cancelled"


def test_claims_go_in_epoch_order_succeeds(fees):
    f = fees
    _anchored(f)
    old = _to_committed(f, 7)
    f.chain.time += EPOCH
    new = _to_committed(f, 8)
    e_old, e_new = old.data["fee_epoch"], new.data["fee_epoch"]
    assert e_new == e_old + 1
    _accept(f, 8)
    f.chain.time = (e_new + 2) * EPOCH
    _tick(f)
    assert new.phase == Phase.COMMITTED  # the older epoch's task may still be accepted: it claims first
    f.chain.time = (e_new + 2 + auditor_mod.MAX_DEFER_EPOCHS) * EPOCH
    _tick(f)
    assert "claimed" in new.data  # waited long enough: the younger fee is not risked any longer
    assert auditor_mod.MAX_DEFER_EPOCHS < auditor_mod.CLAIM_WINDOW_EPOCHS  # a deferred claim lands in the window
    f.chain.time = f.state.closes[8]
    _tick(f)
    assert new.data["verdict"] == "fee paid"
    _accept(f, 7)
    sent = len(f.chain.sent)
    _tick(f)
    assert old.data["verdict"] == "not claimed: EpochOutOfOrder" and len(f.chain.sent) == sent  # nothing sent


def test_claims_in_order_pay_both_succeeds(fees):
    f = fees
    _anchored(f)
    old = _to_committed(f, 7)
    f.chain.time += EPOCH
    new = _to_committed(f, 8)
    _accept(f, 7), _accept(f, 8)
    f.chain.time = (new.data["fee_epoch"] + 2) * EPOCH
    _tick(f)
    assert "claimed" in old.data and "claimed" in new.data  # a claimed older check defers nothing
    f.chain.time = max(f.state.closes[7], f.state.closes[8])
    _tick(f)
    assert old.data["verdict"] == new.data["verdict"] == "fee paid"
    assert [args[0] for name, args in f.chain.sent if name == "claim"] == [7, 8]


@pytest.mark.parametrize("error", ["ChecksExhausted", "ClaimWindowClosed", "PotEmpty", "EpochOutOfOrder"])
def test_final_claim_errors_become_verdicts_succeeds(fees, error):
    f = fees
    _anchored(f)
    item = _to_committed(f)
    _accept(f)
    f.chain.time += 3 * EPOCH
    f.chain.fail["claim"] = TxFailed("claim", error, (7,))
    _tick(f)
    assert item.data["verdict"] == f"not claimed: {error}"


def test_an_unexpected_claim_error_is_raised_for_a_retry_fails(fees):
    f = fees
    _anchored(f)
    item = _to_committed(f)
    _accept(f)
    f.chain.time += 3 * EPOCH
    f.chain.fail["claim"] = TxFailed("claim", "KeyRevealTooEarly", (7, 1, 3))
    with pytest.raises(TxFailed, match="KeyRevealTooEarly"):
        f.role.advance(f.snap, item)
    assert item.phase == Phase.COMMITTED


def test_audit_phase_table_refuses_skipping_the_commit_fails():
    item = WorkItem(key=audit_key(1), kind="audit", phase=Phase.COMMITTED)
    with pytest.raises(IllegalTransition, match="committed -> watching for a audit item"):
        Snapshot().move(item, Phase.WATCHING)
    with pytest.raises(IllegalTransition, match="watching -> lost"):
        Snapshot().move(WorkItem(key=audit_key(2), kind="audit", phase=Phase.WATCHING), Phase.LOST)


# ---------------------------------------------------------------- shared re-execution


def test_a_watch_item_reuses_the_audit_items_result_succeeds(fees, monkeypatch):
    f = fees
    _anchored(f)
    item = _created(f, status=TaskStatus.ASSIGNED)
    _tick(f)
    monkeypatch.setattr(verifier_mod, "compute_result", lambda *a, **k: pytest.fail("re-executed twice"))
    monkeypatch.setattr(verifier_mod, "read", lambda c, contract, fn, *args: SimpleNamespace(
        defender=SOLVER, coDefender=SOLVER, finalHash=TRACE[-1], resultCid=bytes.fromhex("00" * 32), root=ZERO32))
    verifier = VerifierRole(f.ctx)
    watch = WorkItem(key=watch_key(7, 0), kind="watch", phase=Phase.WATCHING, task_id=7, data={"epoch": 0})
    f.snap.items[watch.key] = watch
    f.ctx.tasks[7].status, f.ctx.tasks[7].epoch = TaskStatus.REVEALED, 0
    monkeypatch.setattr(VerifierRole, "_agreed_bundle", lambda self, it, claim: "agrees")
    verifier.advance(f.snap, watch)
    assert {k: watch.data[k] for k in ("final", "trace", "root", "cid")} == \
        {k: item.data[k] for k in ("final", "trace", "root", "cid")}
    assert watch.data["verdict"] == "agrees"


def _window_opened(f, verifier, tid=7, epoch=0):
    f.ctx.tasks[tid].status, f.ctx.tasks[tid].epoch = TaskStatus.REVEALED, epoch
    verifier.on_event(f.snap, SimpleNamespace(name="ChallengeWindowOpened", contract="JobRegistry",
                                              args={"taskId": tid}))
    return f.snap.items[watch_key(tid, epoch)]


def test_an_unsampled_verifier_that_audited_a_wrong_result_challenges_it_succeeds(fees, monkeypatch):
    """Issue 23: two fee-paid verifiers at sampling rate 0 re-executed all 4 tasks, committed the right finals before
    any result was public, then let 4 of 4 fabricated results through: the watch item ended "not sampled" from its
    private draw alone. A node holding its own different final now challenges."""
    f = fees
    _anchored(f)
    audit = _to_committed(f)  # re-executed before the result was public: TRACE[-1]
    monkeypatch.setattr(verifier_mod, "compute_result", lambda *a, **k: pytest.fail("re-executed twice"))
    fabricated = b"\x99" * 32
    claim = SimpleNamespace(defender=SOLVER, coDefender=SOLVER, finalHash=fabricated, challengeDeadline=f.chain.time + 60,
                            resultCid=bytes(32), root=ZERO32)
    monkeypatch.setattr(verifier_mod, "read", lambda c, contract, fn, *args: claim)
    f.chain.game = _Contract("game")
    f.state.send = lambda name, args: None  # the game's commitChallenge: accepted
    verifier = VerifierRole(f.ctx, sample_rate=0.0)
    watch = _window_opened(f, verifier)
    assert watch.phase == Phase.WATCHING and watch.data["audited"]
    for _ in range(2):  # the salt is persisted first, then the commitment goes out
        verifier.advance(f.snap, watch)
    assert watch.phase == Phase.CHALLENGE_COMMITTED
    assert watch.data["final"] == audit.data["final"] == "0x" + TRACE[-1].hex()
    assert f.chain.sent[-1][0] == "commitChallenge"


def test_an_unsampled_verifier_waits_for_its_running_audit_then_ends_without_one(fees, monkeypatch):
    f = fees
    _anchored(f)
    audit = _created(f, status=TaskStatus.ASSIGNED)
    monkeypatch.setattr(verifier_mod, "compute_result", lambda *a, **k: pytest.fail("re-executed twice"))
    monkeypatch.setattr(verifier_mod, "read", lambda c, contract, fn, *args: SimpleNamespace(
        defender=SOLVER, coDefender=SOLVER, finalHash=b"\x99" * 32, challengeDeadline=f.chain.time + 60))
    verifier = VerifierRole(f.ctx, sample_rate=0.0)
    watch = _window_opened(f, verifier)
    verifier.advance(f.snap, watch)  # the audit is still re-executing: wait for it, start nothing
    assert watch.phase == Phase.WATCHING and watch.data["computing"].startswith("re-executing")
    f.snap.move(audit, Phase.DONE, verdict="too late: result public before our check")
    verifier.advance(f.snap, watch)  # the audit ended without a result: unsampled, nothing to compare
    assert watch.phase == Phase.DONE and watch.data["verdict"].startswith("not sampled")


def test_an_unsampled_verifier_without_an_audit_does_not_check(fees):
    f = fees
    f.ctx.tasks[7] = SimpleNamespace(jobId=1, status=TaskStatus.REVEALED, epoch=0)
    watch = _window_opened(f, VerifierRole(f.ctx, sample_rate=0.0))
    assert watch.phase == Phase.DONE and watch.data["verdict"] == "not sampled"
