"""Unit tests of the solver's two ways out of a slot (issue 9): a committed solver whose partner slot nobody fills
leaves the task (TaskMachine.withdrawCommitted) once the slot has been empty for the assignment timeout, and not
before (stuck locks); a solver that cannot use a job's inputs declines its slot (TaskMachine.decline). And its
first move after training: commit, or, as the last replica to commit, reveal at once.

The real SolverRole against a fake chain (mocks only at the edge: reads and transactions)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from verity.chain.protocol import ReplicaStatus, TaskKind, TaskStatus
from verity.node.phases import Phase
from verity.node.snapshot import Snapshot, WorkItem
from verity.node.solver import SolverRole

ME = "0x" + "ab" * 20
NOW, TIMEOUT = 10_000, 300


class _Functions:
    def __getattr__(self, name):
        return lambda *args: (name, args)


class _Chain:
    def __init__(self):
        self.sent = []
        self.calls = []
        self.jobs = SimpleNamespace(functions=_Functions())

    def transact(self, call):
        self.sent.append(call[0])
        self.calls.append(call)

    def call(self, call):
        assert call[0] == "assignmentTimeout"
        return TIMEOUT

    def now(self):
        return NOW


class _Ctx:
    def __init__(self, task_status, open_since):
        self.me, self.chain = ME, _Chain()
        self._task = SimpleNamespace(jobId=1, status=task_status, openSince=open_since)
        self._reps = [SimpleNamespace(node=ME, status=ReplicaStatus.COMMITTED, deadline=0),
                      SimpleNamespace(node="0x" + "00" * 20, status=ReplicaStatus.NONE, deadline=0)]

    def task(self, tid):
        return self._task

    def replicas(self, tid):
        return self._reps

    def unavailable_inputs(self, task):
        return []

    def job(self, job_id):
        return SimpleNamespace(replication=2, executionWindow=120, resultFloor=0)


def _committed_item() -> tuple[Snapshot, WorkItem]:
    item = WorkItem(key="task:1:0", kind="solve", phase=Phase.COMMITTED, task_id=1, slot=0,
                    data={"trace": ["0x" + "11" * 32, "0x" + "22" * 32], "root": "0x" + "33" * 32,
                          "cid": "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG"})
    snap = Snapshot()
    snap.items[item.key] = item
    return snap, item


def test_partner_slot_empty_past_the_timeout_withdraws_and_gives_up_the_task():
    ctx = _Ctx(TaskStatus.OPEN, open_since=NOW - TIMEOUT - 1)
    snap, item = _committed_item()
    SolverRole(ctx).advance(snap, item)
    assert ctx.chain.sent == ["withdrawCommitted"]
    assert item.phase == Phase.LOST and "partner slot" in item.data["reason"]


@pytest.mark.parametrize("status, open_since", [(TaskStatus.OPEN, NOW - TIMEOUT), (TaskStatus.ASSIGNED, 0),
                                                (TaskStatus.OPEN, 0)])
def test_partner_still_possible_waits(status, open_since):
    """Within the timeout, or once the partner is drawn, the committed replica waits for the reveal."""
    ctx = _Ctx(status, open_since)
    snap, item = _committed_item()
    SolverRole(ctx).advance(snap, item)
    assert ctx.chain.sent == [] and item.phase == Phase.COMMITTED


class _RefusingChain(_Chain):
    def transact(self, call):
        from verity.chain import TxFailed

        self.sent.append(call[0])
        raise TxFailed("decline", "DeclineTooLate", (1, 0, 123))


def test_decline_sends_the_call_and_survives_a_refusal(caplog):
    ctx = _Ctx(TaskStatus.ASSIGNED, 0)
    item = WorkItem(key="task:1:0", kind="solve", phase=Phase.ASSIGNED, task_id=1, slot=0)
    SolverRole(ctx).decline(item, "ShardInvalid: bad header")
    # the poster's inputs: counts towards failing the job; the note (32 ASCII bytes) is the start of `why`
    assert ctx.chain.calls == [("decline", (1, True, b"ShardInvalid: bad header".ljust(32, b"\0")))]
    SolverRole(ctx).decline(item, "CapacityExceeded: 9 GB needed", invalid_inputs=False, note="memory 9700/4096 MB")
    # our own limits never count against the poster; the note says why in numbers
    assert ctx.chain.calls[-1] == ("decline", (1, False, b"memory 9700/4096 MB".ljust(32, b"\0")))
    ctx.chain = _RefusingChain()
    with caplog.at_level("INFO", logger="verity.node"):
        SolverRole(ctx).decline(item, "ShardInvalid: bad header")  # past the grace: logged, never raised
    assert ctx.chain.sent == ["decline"]
    assert [r.levelname for r in caplog.records if "could not decline task 1" in r.getMessage()] == ["WARNING"]


def _trained(ctx: _Ctx, partner: ReplicaStatus) -> tuple[Snapshot, WorkItem]:
    ctx._reps[0].status, ctx._reps[1].status = ReplicaStatus.ASSIGNED, partner
    snap, item = _committed_item()
    item.phase = Phase.TRAINED
    return snap, item


def test_last_to_commit_reveals_instead_of_committing():
    """Every other slot committed: nothing is left to copy, so the result is revealed in one transaction."""
    from verity.cid import cid_to_digest
    from verity.engine import merkle

    ctx = _Ctx(TaskStatus.ASSIGNED, 0)
    snap, item = _trained(ctx, ReplicaStatus.COMMITTED)
    SolverRole(ctx).advance(snap, item)
    trace = [bytes.fromhex(h[2:]) for h in item.data["trace"]]
    assert ctx.chain.calls == [("reveal", (1, b"\x33" * 32, trace[-1], 1, cid_to_digest(item.data["cid"]),
                                           merkle.proof(trace, 0), merkle.proof(trace, 1)))]
    assert item.phase == Phase.REVEALED


@pytest.mark.parametrize("partner", [ReplicaStatus.ASSIGNED, ReplicaStatus.NONE])
def test_first_to_commit_commits_its_result_and_cid(partner):
    from verity.chain.protocol import replica_commitment
    from verity.cid import cid_to_digest

    ctx = _Ctx(TaskStatus.ASSIGNED if partner == ReplicaStatus.ASSIGNED else TaskStatus.OPEN, 0)
    snap, item = _trained(ctx, partner)
    SolverRole(ctx).advance(snap, item)
    expected = replica_commitment(b"\x33" * 32, b"\x22" * 32, cid_to_digest(item.data["cid"]), ME)
    assert ctx.chain.calls == [("commit", (1, expected))] and item.phase == Phase.COMMITTED


class _FetchCtx:
    """A drawn solver whose input fetch failed: the job's window, the storage timeout, the poster's CIDs."""

    def __init__(self, now):
        from verity.cid import cid_to_digest

        self.chain = SimpleNamespace(now=lambda: now)
        self.storage = SimpleNamespace(timeout=2.0)
        self._job = SimpleNamespace(executionWindow=400, manifestCid=cid_to_digest(MANIFEST_CID))
        self._manifest = SimpleNamespace(shards=[SimpleNamespace(cid=SHARD_CID)], init=SimpleNamespace(weights=None))

    def job(self, job_id):
        return self._job

    def manifest(self, job_id):
        return self._manifest


MANIFEST_CID = "QmTgGsizN2jkuNMC9H12Nwmy7Ducw7SPTksHKmigxnLDdP"
SHARD_CID = "QmeuwDDP9aQL9WMAZpbHVnZYTXcLd76LHgBA5ahssxpZXg"
OTHER_CID = "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG"
# assigned at 1,000 with a 400-s window: deadline 1,400, decline grace until 1,000 + 25 % of 400 = 1,100
TASK, REP = SimpleNamespace(jobId=1), SimpleNamespace(deadline=1_400)


def _unreachable(now, cid):
    from verity.storage import CidNotFound

    item = WorkItem(key="task:1:0", kind="solve", phase=Phase.ASSIGNED, task_id=1)
    SolverRole(_FetchCtx(now))._unreachable(item, TASK, REP, CidNotFound(cid, "/ip4/127.0.0.1/tcp/5001/http", 2.0))


def test_unreachable_input_is_retried_while_the_grace_leaves_room():
    from verity.storage import CidNotFound

    with pytest.raises(CidNotFound):  # 100 s of grace left: another fetch and a decline still fit
        _unreachable(1_000, SHARD_CID)
    with pytest.raises(CidNotFound):  # 11 s left > 2 fetches of 2 s + the decline's 6 s
        _unreachable(1_089, SHARD_CID)


@pytest.mark.parametrize("cid, poster", [(SHARD_CID, True), (MANIFEST_CID, True), (OTHER_CID, False)])
def test_unreachable_input_near_the_grace_end_is_declined_blaming_only_the_posters_cids(cid, poster):
    from verity.node.solver import InputsUnreachable

    with pytest.raises(InputsUnreachable, match="of task 1: not retrievable .* 9 s of the decline grace left") as err:
        _unreachable(1_091, cid)
    assert isinstance(err.value, ValueError)  # the loop ends the item and declines the slot
    assert err.value.invalid_inputs is poster  # another solver's missing output never counts against the poster


@pytest.mark.parametrize("floor, sent", [(30, []), (20, ["commit"])])
def test_a_result_waits_for_the_jobs_result_floor(floor, sent):
    """Issue 23: drawn at NOW - 20 (deadline NOW + 100 of a 120-s window), a trained replica holds its result,
    uploads included, until `resultFloor` after its draw; then it commits as before."""
    ctx = _Ctx(TaskStatus.ASSIGNED, 0)
    ctx.job = lambda job_id: SimpleNamespace(replication=2, executionWindow=120, resultFloor=floor)
    snap, item = _trained(ctx, ReplicaStatus.ASSIGNED)
    ctx._reps[0].deadline = NOW + 100
    SolverRole(ctx).advance(snap, item)
    assert ctx.chain.sent == sent
    assert item.phase == (Phase.TRAINED if not sent else Phase.COMMITTED)
    assert item.data.get("floor") == (NOW + 10 if not sent else None)


def test_first_input_fetch_waits_only_what_the_decline_grace_leaves_and_an_unreachable_shard_is_declined_in_time():
    """Netlab, 16 hosts: a solver back from a partition fetched its shard with the storage's own timeout, outlasted
    the 30-s decline grace of a 120-s window, could not decline (DeclineTooLate) and was fined as late. The first
    fetch of a drawn task's inputs now waits at most half of what the grace leaves after the decline's transaction,
    so a shard that does not come is declined, unslashed, while the grace lasts."""
    from verity.node.solver import InputsUnreachable
    from verity.storage import CidNotFound

    class Ctx(_FetchCtx):
        def __init__(self, now):
            super().__init__(now)
            self.storage = SimpleNamespace(timeout=30.0)   # the default: one wait outlasts what is left
            self.waited = []

        def shard(self, job_id, index, timeout=None):
            self.waited.append(timeout)
            raise CidNotFound(SHARD_CID, "/ip4/127.0.0.1/tcp/5001/http", timeout)

    ctx = Ctx(1_060)   # 40 s of the grace left (it ends at 1,100)
    task = SimpleNamespace(jobId=1, index=0, kind=TaskKind.TRAIN)
    item = WorkItem(key="task:1:0", kind="solve", phase=Phase.ASSIGNED, task_id=1)
    role = SolverRole(ctx)
    with pytest.raises(CidNotFound):
        role._fetch_inputs(task, REP)
    assert ctx.waited == [pytest.approx((40 - 6) / 2)]   # not the storage's 30 s
    with pytest.raises(InputsUnreachable, match="decline grace left"):   # after that one wait: declined in time
        role._unreachable(item, task, REP, CidNotFound(SHARD_CID, "/ip4/127.0.0.1/tcp/5001/http", ctx.waited[0]))
    ctx.chain = SimpleNamespace(now=lambda: 1_000)   # 100 s left: the storage's own timeout
    ctx.waited.clear()
    with pytest.raises(CidNotFound):
        role._fetch_inputs(task, REP)
    assert ctx.waited == [30.0]
    role._fetch_inputs(SimpleNamespace(jobId=1, index=0, kind=TaskKind.AGGREGATE), REP)   # fetched by the task
    assert ctx.waited == [30.0]


def test_a_slot_first_seen_after_the_grace_is_done_not_declined_into_a_late_report():
    """Netlab, 32 hosts: a node switched off for a minute was drawn meanwhile and first saw its slot with 0 s of the
    grace left; it fetched for 1 s, declined (reverted: DeclineTooLate) and was fined as late, although its inputs
    were fine. Once no decline can land, the node fetches with the storage's own timeout and keeps retrying (the
    loop counts attempts): it does the task in its window."""
    from verity.storage import CidNotFound

    class Ctx(_FetchCtx):
        def __init__(self, now):
            super().__init__(now)
            self.storage = SimpleNamespace(timeout=30.0)
            self.waited = []

        def shard(self, job_id, index, timeout=None):
            self.waited.append(timeout)
            raise CidNotFound(SHARD_CID, "/ip4/127.0.0.1/tcp/5001/http", timeout)

    task = SimpleNamespace(jobId=1, index=0, kind=TaskKind.TRAIN)
    for now in (1_100, 1_101, 1_200):   # the grace ends at 1,100: over, just over, long past
        ctx = Ctx(now)
        role = SolverRole(ctx)
        item = WorkItem(key="task:1:0", kind="solve", phase=Phase.ASSIGNED, task_id=1)
        with pytest.raises(CidNotFound):
            role._fetch_inputs(task, REP)
        assert ctx.waited == [30.0]
        for _ in range(2):
            with pytest.raises(CidNotFound):   # retried, never InputsUnreachable (a decline that cannot land)
                role._unreachable(item, task, REP, CidNotFound(SHARD_CID, "/ip4/127.0.0.1/tcp/5001/http", 30.0))
        assert item.data["fetched_s"] == 60.0


@pytest.mark.parametrize("fetched, blamed", [(1.0, False), (14.0, False), (15.0, True), (30.0, True)])
def test_a_decline_blames_the_posters_inputs_only_after_a_fair_fetch(fetched, blamed):
    """Same run: the node saw another slot with 7 s of the grace left, fetched for 1 s and declined it as invalid
    inputs: a bet on the poster's inputs, lost (0.33 VRT) when other replicas trained on them. A prompt node's first
    fetch waits min(storage timeout, (grace - decline tx) / 2) = 30 s here; a decline blames the inputs only after
    fetches of at least half of that, else it declines without blaming them (no bet)."""
    from verity.node.solver import InputsUnreachable
    from verity.storage import CidNotFound

    ctx = _FetchCtx(1_092)   # 8 s of the grace left: a decline still lands
    ctx.storage = SimpleNamespace(timeout=30.0)
    item = WorkItem(key="task:1:0", kind="solve", phase=Phase.ASSIGNED, task_id=1)
    with pytest.raises(InputsUnreachable) as err:
        SolverRole(ctx)._unreachable(item, TASK, REP, CidNotFound(SHARD_CID, "/ip4/127.0.0.1/tcp/5001/http", fetched))
    assert err.value.invalid_inputs is blamed
    assert ("too short to blame the inputs" in str(err.value)) is not blamed
    assert "the poster's input" in str(err.value)


def test_a_prompt_node_on_a_short_window_still_blames_unreachable_poster_inputs():
    """A 30-s window has a 7-s decline grace, less than the 6 s kept for the decline's transaction plus a fetch: a node
    drawn 2 s ago fetches for the 1-s minimum and still declines blaming the poster's inputs (the poisoned-job path:
    tests/nodes/test_faults.py), since that is all a prompt node could ever fetch in such a grace."""
    from verity.node.solver import InputsUnreachable
    from verity.storage import CidNotFound

    ctx = _FetchCtx(1_372)   # drawn at 1,370 with a 30-s window: deadline 1,400, grace until 1,377
    ctx._job.executionWindow = 30
    task = SimpleNamespace(jobId=1, index=0, kind=TaskKind.TRAIN)
    role = SolverRole(ctx)
    assert role._fetch_timeout(task, REP) == 1.0
    item = WorkItem(key="task:1:0", kind="solve", phase=Phase.ASSIGNED, task_id=1)
    with pytest.raises(InputsUnreachable) as err:
        role._unreachable(item, task, REP, CidNotFound(SHARD_CID, "/ip4/127.0.0.1/tcp/5001/http", 1.0))
    assert err.value.invalid_inputs is True
