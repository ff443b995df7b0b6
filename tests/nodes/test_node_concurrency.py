"""Unit tests: a long computation never blocks the node's other duties, and Ctrl-C stops it within seconds.

The real SolverRole and NodeLoop run against a fake chain (mocks only at the edge: task/replica reads and
transactions) with a WorkPool of real threads; `compute_result` is replaced by a gated fake."""
from __future__ import annotations

import logging
import signal
import threading
import time
from types import SimpleNamespace

import pytest

from verity.chain.protocol import ReplicaStatus, TaskStatus
from verity.node import solver as solver_mod
from verity.node.compute import Result
from verity.node.loop import NodeLoop
from verity.node.phases import Phase
from verity.node.snapshot import Snapshot, SnapshotStore, WorkItem
from verity.node.solver import SolverRole
from verity.node.work import WorkPool
from verity.storage import cid_of_bytes

ME = "0x" + "ab" * 20


class _Functions:
    def __getattr__(self, name):
        return lambda *args: (name, args)


class _FakeChain:
    """Records transactions; a commit / reveal moves our replica of that task like the contract would. The partner
    replica commits right after ours (so ours is the first to commit and reveals once both have)."""

    def __init__(self, replicas, partners):
        self.replicas, self.partners, self.sent = replicas, partners, []
        self.jobs = SimpleNamespace(functions=_Functions())

    def transact(self, call):
        name, args = call
        self.sent.append((name, args[0]))
        if name in ("commit", "reveal"):
            self.replicas[args[0]].status = ReplicaStatus.COMMITTED if name == "commit" else ReplicaStatus.REVEALED
        if name == "commit":
            self.partners[args[0]].status = ReplicaStatus.COMMITTED

    def now(self):
        return int(time.time())


class _FakeCtx:
    def __init__(self, work):
        from verity.node.faults import Faults

        self.me, self.work, self.faults = ME, work, Faults()
        self.reps = {t: SimpleNamespace(node=ME, status=ReplicaStatus.ASSIGNED, deadline=0) for t in (1, 2)}
        self.partners = {t: SimpleNamespace(node="0x" + "cd" * 20, status=ReplicaStatus.ASSIGNED, deadline=0)
                         for t in (1, 2)}
        self.chain = _FakeChain(self.reps, self.partners)

    storage = SimpleNamespace(timeout=30.0)

    def task(self, tid):
        return SimpleNamespace(jobId=1, index=0, kind=1, status=TaskStatus.ASSIGNED)   # kind 1: TRAIN

    def shard(self, job_id, index, timeout=None):  # the inputs the solver fetches within the decline grace
        return None

    def replicas(self, tid):
        return [self.reps[tid], self.partners[tid]]

    def job(self, job_id):
        return SimpleNamespace(replication=2, executionWindow=120, resultFloor=0)

    def unavailable_inputs(self, task):  # P10: every input was fetched (nothing to report before the result)
        return []

    def manifest(self, job_id, timeout=None):  # what the solver checks before training (node/feasibility.py)
        from verity.engine.reference import build_manifest

        return build_manifest("mlp")


class _Cursor:
    next_block = 0

    def poll(self):
        return []


@pytest.fixture
def long_task_1(monkeypatch):
    """compute_result: task 1 trains until released, any other task at once."""
    release, started = threading.Event(), threading.Event()

    def fake_compute(ctx, tid, task, label="solve", publish=True):
        if tid == 1:
            started.set()
            assert release.wait(20), "test never released the long task"
        trace = [bytes([tid]) * 32, bytes([tid + 1]) * 32]
        return Result(trace, b"\x00" * 32, cid_of_bytes(bytes([tid])), 1)

    monkeypatch.setattr(solver_mod, "compute_result", fake_compute)
    yield release, started
    release.set()


def _node(tmp_path, work):
    ctx = _FakeCtx(work)
    snap = Snapshot()
    for tid in (1, 2):
        key = f"task:{tid}:0"
        snap.items[key] = WorkItem(key=key, kind="solve", phase=Phase.ASSIGNED, task_id=tid)
    beats = []
    loop = NodeLoop(_Cursor(), SnapshotStore(tmp_path), snap, [SolverRole(ctx)], poll_interval=0.01,
                    periodic=[lambda s: beats.append(time.monotonic())], work=work, stop_grace=1.0)
    return ctx, snap, loop, beats


def _tick_until(loop, predicate, timeout=10.0) -> int:
    ticks, deadline = 0, time.monotonic() + timeout
    while not predicate(loop.snap):
        assert time.monotonic() < deadline, f"not reached after {ticks} ticks: {loop.snap.items}"
        loop.tick()
        ticks += 1
        time.sleep(0.01)
    return ticks


def test_long_training_does_not_block_heartbeats_or_another_task_succeeds(tmp_path, long_task_1):
    release, started = long_task_1
    ctx, snap, loop, beats = _node(tmp_path, WorkPool(long_threads=2))
    ticks = _tick_until(loop, lambda s: s.items["task:2:0"].phase == Phase.REVEALED)
    first = snap.items["task:1:0"]
    assert started.is_set() and first.phase == Phase.ASSIGNED and first.data["computing"] == "training"
    assert snap.items["task:2:0"].phase == Phase.REVEALED
    assert ("commit", 2) in ctx.chain.sent and ("reveal", 2) in ctx.chain.sent
    assert len(beats) == ticks >= 3  # the periodic duties (heartbeat, keeper) ran on every tick meanwhile
    assert SnapshotStore(tmp_path).load().items["task:1:0"].data["computing"] == "training"  # shown by `node status`

    release.set()
    _tick_until(loop, lambda s: s.items["task:1:0"].phase == Phase.REVEALED)
    assert snap.items["task:1:0"].phase == Phase.REVEALED and "computing" not in snap.items["task:1:0"].data
    assert [n for n, t in ctx.chain.sent if t == 1] == ["commit", "reveal"]  # each sent exactly once


def test_training_readsNothingOfItsTaskUntilDone_succeeds(tmp_path, long_task_1):
    """Minutes of training at load read the task and its replicas twice a second; now nothing until it ends."""
    release, started = long_task_1
    ctx, snap, loop, _ = _node(tmp_path, WorkPool(long_threads=2))
    reads, task = [], ctx.task
    ctx.task = lambda tid: reads.append(tid) or task(tid)
    _tick_until(loop, lambda s: started.is_set())
    before = reads.count(1)
    for _ in range(10):
        loop.tick()
    assert reads.count(1) == before
    release.set()
    _tick_until(loop, lambda s: s.items["task:1:0"].phase == Phase.REVEALED)
    assert reads.count(1) > before


def test_stop_request_names_the_work_in_flight_and_returns_within_seconds_succeeds(tmp_path, long_task_1, caplog):
    release, started = long_task_1
    ctx, snap, loop, _ = _node(tmp_path, WorkPool(long_threads=1))
    caplog.set_level(logging.INFO, logger="verity.node")
    threading.Thread(target=lambda: (started.wait(10), loop.request_stop(signal.SIGINT)), daemon=True).start()
    t0 = time.monotonic()
    loop.run(max_seconds=15)
    assert time.monotonic() - t0 < 5  # the long task is still running: it is left, not waited for
    text = caplog.text
    assert "SIGINT: stopping; finishing training task 1 (running)" in text
    assert "left unfinished: training task 1" in text and "stopped; snapshot saved" in text
    assert SnapshotStore(tmp_path).load().items["task:1:0"].phase == Phase.ASSIGNED  # a restart trains it again
    assert not [s for s in ctx.chain.sent if s[1] == 1]


def test_work_pool_hands_back_results_and_errors_by_key_succeeds():
    pool = WorkPool(long_threads=1, urgent_threads=1)
    gate = threading.Event()
    assert pool.poll("a", lambda: gate.wait(5) and 41 + 1, what="slow") is None
    assert pool.poll("b", lambda: 1 / 0, what="broken", urgent=True) is None  # urgent lane: not behind "a"
    deadline = time.monotonic() + 5
    while pool.busy("b") and time.monotonic() < deadline:
        try:
            pool.poll("b", lambda: None, what="broken")
        except ZeroDivisionError:
            break
        time.sleep(0.01)
    else:
        pytest.fail("the urgent job never finished while the long one was running")
    assert pool.poll("a", lambda: None, what="slow") is None and pool.in_flight() == ["slow (running)"]
    gate.set()
    while (result := pool.poll("a", lambda: None, what="slow")) is None:
        time.sleep(0.01)
    assert result == 42 and not pool.busy("a")
