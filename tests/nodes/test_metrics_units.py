"""Unit tests of a node's Prometheus metrics (verity/node/metrics.py) and JSON log lines (no chain, no IPFS, no node
processes)."""
from __future__ import annotations

import json
import logging
import sys
import urllib.request
from types import SimpleNamespace

import pytest
from prometheus_client import REGISTRY

from verity.chain.client import TxFailed
from verity.chain.events import DecodedEvent
from verity.cli.common import JsonFormatter
from verity.node.loop import NodeLoop
from verity.node.metrics import MeasuredLoop, MetricsUnavailable, NodeMetrics, error_source
from verity.node.phases import Phase
from verity.node.snapshot import Snapshot, SnapshotStore, WorkItem
from verity.storage.errors import CidNotFound

ME = "0x00000000000000000000000000000000000000aa"
OTHER = "0x00000000000000000000000000000000000000bb"


def _value(m: NodeMetrics, name: str, **labels) -> float | None:
    return m.registry.get_sample_value(name, {"node": "n1", **labels})


def _snapshot() -> Snapshot:
    snap = Snapshot()
    for key, kind, phase in (("task:1:0", "solve", Phase.ASSIGNED), ("task:2:0", "solve", Phase.ASSIGNED),
                             ("task:3:1", "solve", Phase.COMMITTED), ("task:4:0", "solve", Phase.LOST),
                             ("watch:5:0", "watch", Phase.WATCHING), ("seat:7", "seat", Phase.VOTE_COMMITTED)):
        snap.items[key] = WorkItem(key=key, kind=kind, phase=phase)
    return snap


def _event(contract: str, name: str, **args) -> DecodedEvent:
    return DecodedEvent(contract, name, args, 1, 0, "0x")


def test_metricsServer_servesNodeMetricsAfterUpdates_succeeds():
    m = NodeMetrics("n1", ME, "solver,verifier")
    port = m.serve(0)  # an ephemeral port on 127.0.0.1
    try:
        m.observe_snapshot(_snapshot())
        m.tick_done(0.2)
        m.trained("solve", 3.0, 30, contention=2.5)
        m.result_sent(42.0)
        m.item_failed("solve", CidNotFound("bafy", "/ip4/127.0.0.1/tcp/5001", 5.0))
        m.tick_failed(TxFailed("commit", "TooLate"))
        m.on_event(None, _event("JobEscrow", "PaymentSent", jobId=1, to=ME, amount=2 * 10**18))
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    finally:
        m.stop()
    for name in ("verity_node_info", "verity_node_work_items", "verity_node_work_queue_depth",
                 "verity_node_work_backlog_seconds", "verity_node_tick_seconds_bucket", "verity_node_tick_failures_total",
                 "verity_node_item_failures_total", "verity_node_rpc_errors_total", "verity_node_ipfs_errors_total",
                 "verity_node_train_step_seconds_bucket", "verity_node_result_seconds_left_bucket",
                 "verity_node_deadlines_missed_total", "verity_node_earned_vrt_total", "verity_node_slashed_vrt_total",
                 "verity_node_forfeited_vrt_total", "verity_node_balance_vrt", "verity_node_stake_vrt",
                 "verity_node_locked_stake_vrt", "verity_node_unbonding_vrt",
                 "verity_node_tasks_completed", "verity_node_tasks_late", "verity_node_total_slashed_vrt",
                 "verity_node_promptness_factor", "verity_node_chain_read_timestamp_seconds"):
        assert f"\n{name}" in text, f"{name} not served"
    assert "unwithdrawn" not in text  # DisputeGame and RefereePanel pay at once: no credits left to withdraw
    assert 'verity_node_work_items{kind="solve",node="n1",phase="assigned"} 2.0' in text
    assert 'verity_node_earned_vrt_total{node="n1",source="task"} 2.0' in text
    assert 'verity_node_contention_factor{node="n1"} 2.5' in text
    assert 'verity_node_rpc_errors_total{kind="TxFailed",node="n1"} 1.0' in text
    assert 'verity_node_ipfs_errors_total{kind="CidNotFound",node="n1"} 1.0' in text
    assert 'verity_node_info{address="%s",node="n1",roles="solver,verifier"} 1.0' % ME in text
    assert REGISTRY.get_sample_value("verity_node_tick_failures_total") is None  # never the global registry


def test_metricsServer_portTaken_raisesMetricsUnavailable():
    a, b = NodeMetrics("n1"), NodeMetrics("n2")
    port = a.serve(0)
    try:
        with pytest.raises(MetricsUnavailable, match=f"--metrics-port {port}"):
            b.serve(port)
    finally:
        a.stop()


def test_snapshotGauges_reflectTheSnapshot_succeeds():
    m = NodeMetrics("n1", ME)
    snap = _snapshot()
    m.observe_snapshot(snap)
    assert _value(m, "verity_node_work_items", kind="solve", phase="assigned") == 2
    assert _value(m, "verity_node_work_items", kind="solve", phase="committed") == 1
    assert _value(m, "verity_node_work_items", kind="solve", phase="lost") == 1
    assert _value(m, "verity_node_work_items", kind="watch", phase="watching") == 1
    assert _value(m, "verity_node_work_items", kind="seat", phase="vote_committed") == 1
    assert _value(m, "verity_node_work_items", kind="dispute", phase="disputing") == 0  # every series, from the start
    snap.items["task:1:0"].phase = Phase.TRAINED
    del snap.items["seat:7"]
    m.observe_snapshot(snap)
    assert _value(m, "verity_node_work_items", kind="solve", phase="assigned") == 1
    assert _value(m, "verity_node_work_items", kind="solve", phase="trained") == 1
    assert _value(m, "verity_node_work_items", kind="seat", phase="vote_committed") == 0


def test_workPoolGauges_queueRunningBacklog_succeeds():
    pool = SimpleNamespace(depth=lambda: {"long": (3, 2), "urgent": (0, 1)}, backlog_seconds=lambda: 95.5)
    m = NodeMetrics("n1")
    m.observe_work(pool)
    assert _value(m, "verity_node_work_queue_depth", lane="long") == 3
    assert _value(m, "verity_node_work_running", lane="long") == 2
    assert _value(m, "verity_node_work_running", lane="urgent") == 1
    assert _value(m, "verity_node_work_backlog_seconds") == 95.5


def test_workPoolDepth_countsQueuedAndRunningPerLane_succeeds():
    from verity.node.work import Job, WorkPool

    pool = WorkPool(inline=True)
    pool._jobs = {"a": Job("a", "a", lambda: None, "long", started=1.0), "b": Job("b", "b", lambda: None, "long"),
                  "c": Job("c", "c", lambda: None, "urgent")}
    assert pool.depth() == {"long": (1, 1), "urgent": (1, 0)}


def test_events_countEarningsSlashesAndMissedDeadlinesOfThisNodeOnly_succeeds():
    m = NodeMetrics("n1", ME)
    for ev in (_event("JobEscrow", "PaymentSent", jobId=1, to=ME, amount=3 * 10**18),
               _event("JobEscrow", "PaymentSent", jobId=1, to=OTHER, amount=10**18),
               _event("DisputeGame", "Credited", to=ME.upper().replace("0X", "0x"), amount=10**18),
               _event("RefereePanel", "Credited", to=ME, amount=10**17),
               _event("VerificationFees", "FeePaid", taskId=1, jobId=1, verifier=ME, amount=5 * 10**17, epoch=0),
               _event("NodeRegistry", "StakeSlashed", node=ME, to=OTHER, amount=7 * 10**18),
               _event("NodeRegistry", "StakeSlashed", node=OTHER, to=ME, amount=10**18),
               _event("JobRegistry", "PaymentForfeited", taskId=1, node=ME, amount=10**18),
               _event("JobRegistry", "ReplicaLate", taskId=1, node=ME, slot=0, slashed=0),
               _event("JobRegistry", "ReplicaLate", taskId=2, node=OTHER, slot=1, slashed=0)):
        m.on_event(None, ev)
    assert _value(m, "verity_node_earned_vrt_total", source="task") == 3
    assert _value(m, "verity_node_earned_vrt_total", source="dispute") == 1
    assert _value(m, "verity_node_earned_vrt_total", source="referee") == pytest.approx(0.1)
    assert _value(m, "verity_node_earned_vrt_total", source="fee") == pytest.approx(0.5)
    assert _value(m, "verity_node_slashed_vrt_total") == 7
    assert _value(m, "verity_node_forfeited_vrt_total") == 1
    assert _value(m, "verity_node_deadlines_missed_total") == 1


def _chain(fail: bool = False):
    """A ChainClient stand-in for `refresh_chain`: every read it makes, with fixed answers (or a failure)."""
    calls = []

    def fn(name, value):
        def call(*args):
            return SimpleNamespace(name=name, value=value, args=args)
        return call

    def do_call(x):
        calls.append(x.name)
        if fail:
            raise ConnectionError("rpc gone")
        return x.value

    functions = SimpleNamespace(balanceOf=fn("balanceOf", 5 * 10**18), promptnessFactorBps=fn("promptness", 9_000))
    contract = SimpleNamespace(functions=functions)
    return SimpleNamespace(registry=contract, token=contract, game=contract, panel=contract, lens=contract,
                           call=do_call, calls=calls)


def test_refreshChain_readsAtMostEveryInterval_succeeds(monkeypatch):
    import verity.chain.views as views

    node = SimpleNamespace(stake=1000 * 10**18, locked=40 * 10**18, pendingUnstake=0, bandwidthMbps=100)
    rep = SimpleNamespace(tasksCompleted=12, tasksLate=2, totalSlashed=3 * 10**18)
    monkeypatch.setattr(views, "read", lambda c, contract, fn, *a: node if fn == "getNode" else rep)
    now = [100.0]
    m = NodeMetrics("n1", ME, chain_refresh_s=30, clock=lambda: now[0])
    chain = _chain()
    m.refresh_chain(chain)
    assert _value(m, "verity_node_stake_vrt") == 1000 and _value(m, "verity_node_locked_stake_vrt") == 40
    assert _value(m, "verity_node_balance_vrt") == 5
    assert _value(m, "verity_node_tasks_late") == 2 and _value(m, "verity_node_tasks_completed") == 12
    assert _value(m, "verity_node_promptness_factor") == pytest.approx(0.9)
    assert _value(m, "verity_node_declared_bandwidth_mbps") == 100
    reads = len(chain.calls)
    now[0] += 10
    m.refresh_chain(chain)
    assert len(chain.calls) == reads  # not again within 30 s
    now[0] += 25
    m.refresh_chain(chain)
    assert len(chain.calls) == 2 * reads


def test_failingUpdates_neverRaise_loggedOnce_succeeds(caplog):
    m = NodeMetrics("n1", ME, clock=iter(range(0, 10_000, 100)).__next__)
    broken = SimpleNamespace(items=None)  # not a snapshot
    with caplog.at_level(logging.DEBUG, logger="verity.node.metrics"):
        m.observe_snapshot(broken)
        m.observe_snapshot(broken)
        m.refresh_chain(_chain(fail=True))
        m.refresh_chain(_chain(fail=True))
        m.result_sent(lambda: 1 / 0)  # the deadline's chain read failed
        m.observe_work(SimpleNamespace(depth=lambda: {"long": None}))
        m.on_event(None, _event("JobEscrow", "PaymentSent", to=ME))  # no amount
        m.trained("solve", "slow", 3)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert sorted(r.getMessage().split()[1] for r in warnings) == sorted(
        ["observe_snapshot", "refresh_chain", "result_sent", "observe_work", "_on_event", "trained"])


class _Cursor:
    def __init__(self, batches):
        self.next_block, self.batches = 0, list(batches)

    def poll(self):
        batch = self.batches.pop(0) if self.batches else []
        if isinstance(batch, BaseException):
            raise batch
        self.next_block += 1
        return batch


class _Failing:
    kinds = ("solve",)

    def on_event(self, snap, ev):
        pass

    def advance(self, snap, item):
        raise CidNotFound("bafyX", "/ip4/127.0.0.1/tcp/5001", 5.0)


def test_measuredLoop_countsTicksItemFailuresAndEvents_failureStillRaises(tmp_path):
    snap = Snapshot(items={"task:1:0": WorkItem(key="task:1:0", kind="solve", phase=Phase.ASSIGNED, task_id=1)})
    paid = _event("JobEscrow", "PaymentSent", jobId=1, to=ME, amount=10**18)
    plain = NodeLoop(_Cursor([[paid], TxFailed("eth_getLogs", "boom")]), SnapshotStore(tmp_path), snap, [_Failing()],
                     poll_interval=0.0)
    m = NodeMetrics("n1", ME)
    loop = m.measure(plain)
    assert isinstance(loop, MeasuredLoop) and loop.handlers[-1] is m and plain.handlers == [loop.handlers[0]]
    loop.tick()
    assert _value(m, "verity_node_item_failures_total", kind="solve") == 1
    assert _value(m, "verity_node_ipfs_errors_total", kind="CidNotFound") == 1
    assert _value(m, "verity_node_earned_vrt_total", source="task") == 1
    assert _value(m, "verity_node_work_items", kind="solve", phase="assigned") == 1
    assert snap.items["task:1:0"].attempts == 1  # the loop's own handling still ran
    with pytest.raises(TxFailed):
        loop.tick()
    assert _value(m, "verity_node_tick_failures_total") == 1
    assert _value(m, "verity_node_rpc_errors_total", kind="TxFailed") == 1
    assert _value(m, "verity_node_tick_seconds_count") == 2


def test_errorSource_namesTheService_succeeds():
    assert error_source(CidNotFound("bafy", "/ip4/127.0.0.1/tcp/5001", 1.0)) == ("ipfs", "CidNotFound")
    assert error_source(TxFailed("commit", "TooLate")) == ("rpc", "TxFailed")
    try:
        try:
            raise CidNotFound("bafy", "x", 1.0)
        except CidNotFound as inner:
            raise RuntimeError("wrapped") from inner
    except RuntimeError as exc:
        assert error_source(exc) == ("ipfs", "CidNotFound")  # the class of the error that names the service
    assert error_source(ValueError("bad manifest")) == (None, "ValueError")


def _record(msg="task %d accepted", args=(7,), exc_info=None, **extra) -> logging.LogRecord:
    rec = logging.getLogger("verity.node.solver").makeRecord("verity.node.solver", logging.INFO, __file__, 1, msg,
                                                            args, exc_info, extra=extra)
    return rec


def test_jsonFormatter_oneObjectPerLineWithExtraFields_succeeds():
    line = JsonFormatter("n1").format(_record(task_id=7, job_id=3, slot=0))
    assert "\n" not in line
    out = json.loads(line)
    assert out["msg"] == "task 7 accepted" and out["level"] == "INFO" and out["logger"] == "verity.node.solver"
    assert out["node"] == "n1" and (out["task_id"], out["job_id"], out["slot"]) == (7, 3, 0)
    assert out["ts"].endswith("Z") and "T" in out["ts"]
    assert not {"args", "msecs", "pathname", "levelno"} & set(out)


def test_jsonFormatter_tracebackAndOddValues_stayOneJsonLine_succeeds():
    try:
        raise RuntimeError("boom\nsecond line")
    except RuntimeError:
        rec = _record("failed: %s", ("x",), exc_info=sys.exc_info(), path=object())
    out = json.loads(JsonFormatter().format(rec))
    assert "RuntimeError: boom" in out["exc"] and "node" not in out and isinstance(out["path"], str)


def test_setupLogging_logJson_writesJsonLinesToNodeLog_succeeds(tmp_path):
    from verity.cli.common import setup_logging

    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        setup_logging("info", tmp_path / "node.log", "n1", json_lines=True)
        logging.getLogger("verity.node").info("assigned task %d slot %d", 4, 1, extra={"task_id": 4})
        for h in logging.getLogger().handlers:
            h.flush()
        lines = (tmp_path / "node.log").read_text().splitlines()
    finally:
        for h in root.handlers[:]:
            root.removeHandler(h)
            h.close()
        for h in saved[0]:
            root.addHandler(h)
        root.setLevel(saved[1])
    assert [json.loads(x)["task_id"] for x in lines] == [4]


def test_nodeRunHelp_showsMetricsAndJsonLogOptions_succeeds():
    from typer.testing import CliRunner

    from verity.cli import app

    res = CliRunner().invoke(app, ["node", "run", "--help"], env={"COLUMNS": "200", "TERMINAL_WIDTH": "200"})
    assert res.exit_code == 0, res.output
    for option in ("--metrics-port", "--metrics-addr", "--log-json"):
        assert option in res.output
    assert "Prometheus" in res.output


def test_computeResult_timesTheStepsTrainedHere_succeeds(tmp_path, monkeypatch):
    """Seconds per step = the run's training time over the steps it trained (a checkpoint resumed from disk and the
    step-0 state count none)."""
    import threading

    import verity.node.compute as compute_mod
    from verity.node.compute import compute_result
    from verity.node.faults import Faults

    def run_task(m, start, shard, ref, workdir, *, on_checkpoint, expected_input_hash):
        for j, resumed in ((0, True), (1, True), (2, False), (3, False)):
            path = workdir / f"ckpt-{j}"
            path.write_bytes(b"%d" % j)
            on_checkpoint(SimpleNamespace(index=j, path=path, resumed=resumed))
        return SimpleNamespace(trace=[bytes([j]) * 32 for j in range(4)], timings={"train": 4.0})

    monkeypatch.setattr(compute_mod, "run_task", run_task)
    m = NodeMetrics("n1", ME)
    ctx = SimpleNamespace(manifest=lambda job: SimpleNamespace(checkpoint_interval=10),
                          workdir=lambda *parts: tmp_path, shard=lambda job, index: None, round_input=lambda task: b"",
                          storage=None, faults=Faults(), work=SimpleNamespace(stopping=threading.Event()), metrics=m)
    task = SimpleNamespace(jobId=1, round=0, index=0, kind=0, inputHash=b"\0" * 32, n=3)
    compute_result(ctx, 5, task, label="verify", publish=False)
    assert _value(m, "verity_node_train_step_seconds_count", work="verify") == 1
    assert _value(m, "verity_node_train_step_seconds_sum", work="verify") == pytest.approx(4.0 / 20)


def test_startMetrics_offByDefault_servesOnTheConfiguredPort_succeeds():
    from verity.node.app import NodeConfig, start_metrics

    ctx = SimpleNamespace(me=ME, metrics=None)
    assert start_metrics(ctx, NodeConfig(name="n1")) is None and ctx.metrics is None
    m = start_metrics(ctx, NodeConfig(name="n1", roles="solver", metrics_port=0))
    try:
        assert ctx.metrics is m and m._server.server_address[0] == "127.0.0.1"
        text = urllib.request.urlopen(f"http://127.0.0.1:{m._server.server_address[1]}/metrics", timeout=10).read()
        assert b'verity_node_info{address="%s",node="n1",roles="solver"} 1.0' % ME.encode() in text
    finally:
        m.stop()
