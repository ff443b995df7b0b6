"""node/netprobe.py and node/locality.py (issue 25, "scheduling measured, not declared"): a node's fetches of task
inputs say what bandwidth it can claim; one that declared a higher tier re-declares the tier they reach (once per
cooldown, remembered across restarts), and a drawn solver counts the time to fetch the inputs it does not hold.
Fake chain and storage at the edges; the integration twin (a real js-ipfs node) is in tests/storage."""
from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from verity.chain.protocol import TaskKind
from verity.engine.reference import build_manifest
from verity.errors import CapacityExceeded
from verity.node import netprobe
from verity.node.feasibility import check_task_fits
from verity.node.locality import TaskInput, bytes_to_fetch, fetch_seconds, train_inputs
from verity.node.metrics import NodeMetrics
from verity.node.netprobe import (DEMOTE_COOLDOWN_S, MAX_AGE_S, MIN_FETCH_BYTES, WINDOW, NetworkObserver,
                                  bandwidth_verdict, demote_if_overstated, tier_floor)

MB = 1_000_000
ME = "0x" + "ab" * 20


def _rate(mbps: float, size: int = 4 * MB) -> tuple[int, float]:
    """(bytes, seconds) of one fetch of `size` bytes at `mbps` Mbit/s."""
    return size, size * 8 / (mbps * 1e6)


# --- the verdict (pure) -----------------------------------------------------------------------------------------
def test_bandwidth_verdict_below_the_declared_tier_demotes_to_the_tier_reached_succeeds():
    v = bandwidth_verdict(1000, [40, 42, 45, 38, 50, 44, 41])
    assert v.demote and v.measured_mbps == 42 and v.claim_mbps == 10 and v.fetches == 7
    assert v.reason() == "declared 1000 Mbit/s, measured median 42 Mbit/s over 7 fetches"
    assert bandwidth_verdict(100, [3, 4, 5, 6, 7]).claim_mbps == 0   # below the lowest floor: tier 0


def test_bandwidth_verdict_within_or_above_the_declared_tier_keeps_the_declaration_succeeds():
    assert not bandwidth_verdict(500, [150] * 5).demote             # 500 and 150 share the 100 tier
    assert bandwidth_verdict(10, [900] * 9).claim_mbps == 10         # never promoted: raising a claim is the operator's
    assert not bandwidth_verdict(0, [1] * 5).demote                  # nothing declared, nothing to overstate


def test_bandwidth_verdict_needs_five_fetches_and_ignores_an_outlier_succeeds():
    few = bandwidth_verdict(1000, [1, 1, 1, 1])
    assert not few.demote and few.measured_mbps is None
    assert not bandwidth_verdict(1000, [2000, 1500, 1, 1200, 1100]).demote   # one slow source is not the link
    assert [tier_floor(x) for x in (0, 9.9, 10, 99, 100, 12_000)] == [0, 0, 10, 10, 100, 10_000]


# --- the observer: what counts, what is kept, what a restart remembers -----------------------------------------
def test_observer_counts_only_big_fetches_keeps_the_last_window_and_survives_a_restart_succeeds(tmp_path):
    now = [1_000_000.0]
    obs = NetworkObserver.load(tmp_path, clock=lambda: now[0])
    obs.fetched(MIN_FETCH_BYTES - 1, 0.001)     # too small to mean anything
    obs.fetched(MIN_FETCH_BYTES, 0.0)           # no duration
    assert obs.record.fetches == [] and not obs.unjudged and not (tmp_path / "network.json").exists()
    for _ in range(WINDOW + 3):
        obs.fetched(*_rate(42))
    assert len(obs.record.fetches) == WINDOW and obs.median_mbps() == pytest.approx(42)
    back = NetworkObserver.load(tmp_path, clock=lambda: now[0])
    assert back.record == obs.record and back.unjudged   # a restart judges what it remembers once
    now[0] += MAX_AGE_S
    back.fetched(*_rate(5))
    assert back.rates_mbps() == [pytest.approx(5)]      # a week-old link says nothing about this one


# --- demotion against a fake chain ------------------------------------------------------------------------------
class _Chain:
    def __init__(self, region: int, mbps: int):
        self.node = SimpleNamespace(region=region, bandwidthMbps=mbps)
        self.sent: list[tuple] = []
        self.registry = SimpleNamespace(functions=SimpleNamespace(declareNetwork=lambda r, b: ("declareNetwork", r, b)))

    def transact(self, fn):
        self.sent.append(fn)
        self.node.bandwidthMbps = fn[2]


@pytest.fixture
def chain(monkeypatch):
    c = _Chain(region=2, mbps=1000)
    monkeypatch.setattr(netprobe, "read", lambda client, contract, fn, *a: c.node)
    return c


def _observer(tmp_path, now, rates, **kw) -> NetworkObserver:
    obs = NetworkObserver.load(tmp_path, clock=lambda: now[0], **kw)
    for mbps in rates:
        obs.fetched(*_rate(mbps))
    return obs


def test_demote_redeclares_the_tier_reached_keeping_the_region_once_per_cooldown_succeeds(tmp_path, chain, caplog):
    now = [1_000_000.0]
    ctx = SimpleNamespace(chain=chain, me=ME)
    obs = _observer(tmp_path, now, [40, 42, 45, 38, 50, 44, 41])
    with caplog.at_level(logging.WARNING, logger="verity.node.netprobe"):
        assert demote_if_overstated(ctx, obs).claim_mbps == 10
    assert chain.sent == [("declareNetwork", 2, 10)]
    assert ("declared 1000 Mbit/s, measured median 42 Mbit/s over 7 fetches: re-declared 10 Mbit/s so draws stop "
            "handing it jobs it would be late on") in caplog.text
    assert demote_if_overstated(ctx, obs) is None           # nothing new to judge
    chain.node.bandwidthMbps = 1000                         # the operator's restart re-declares the old claim
    restarted = _observer(tmp_path, now, [3] * 9)
    assert demote_if_overstated(ctx, restarted) is None     # within the cooldown, remembered across the restart
    now[0] += DEMOTE_COOLDOWN_S
    assert demote_if_overstated(ctx, restarted).claim_mbps == 0   # median of the last WINDOW fetches: 3 Mbit/s
    assert chain.sent[-1] == ("declareNetwork", 2, 0)


def test_demote_with_self_demotion_off_only_warns_succeeds(tmp_path, chain, caplog):
    ctx = SimpleNamespace(chain=chain, me=ME)
    obs = _observer(tmp_path, [0.0], [20] * 5, self_demote=False)
    with caplog.at_level(logging.WARNING, logger="verity.node.netprobe"):
        assert demote_if_overstated(ctx, obs).demote
    assert chain.sent == [] and "VERITY_SELF_DEMOTE=0 keeps the declaration" in caplog.text


def test_observer_feeds_the_nodes_metrics_succeeds(tmp_path, chain):
    metrics = NodeMetrics("n1", ME)
    obs = _observer(tmp_path, [0.0], [42] * 5, metrics=metrics)
    obs.chain_round_trip("transaction", 0.3)
    demote_if_overstated(SimpleNamespace(chain=chain, me=ME), obs)
    value = lambda name, **labels: metrics.registry.get_sample_value(name, {"node": "n1", **labels})  # noqa: E731
    assert value("verity_node_input_fetch_mbps_count") == 5
    assert value("verity_node_input_fetch_median_mbps") == pytest.approx(42)
    assert value("verity_node_chain_round_trip_seconds_count", kind="transaction") == 1
    assert value("verity_node_bandwidth_demotions_total") == 1


# --- locality and the fetch term of the feasibility check -------------------------------------------------------
def test_fetch_time_counts_only_inputs_not_held_succeeds():
    m = build_manifest("mlp")
    inputs = train_inputs(SimpleNamespace(), SimpleNamespace(index=0, round=0), m)
    assert [i.what for i in inputs] == ["shard 0"] and inputs[0].cid == m.shards[0].cid   # a seed: no weights
    held = SimpleNamespace(holds=lambda cid: cid == "held")
    inputs = [TaskInput("shard", "held", 50 * MB), TaskInput("round input", "away", 30 * MB),
              TaskInput("round input", None, 20 * MB)]   # its bundle not held: counted as fetched
    assert bytes_to_fetch(held, inputs) == 50 * MB
    assert fetch_seconds(50 * MB, 10) == pytest.approx(40) and fetch_seconds(50 * MB, None) == 0
    assert fetch_seconds(0, 10) == 0


def test_task_whose_inputs_take_longer_than_the_window_to_fetch_is_declined_fails():
    m = build_manifest("mlp")
    fits = dict(execution_window=120, seconds_left=90, memory_mb=1 << 20, speeds=None)
    assert check_task_fits(m, 0, fetch_s=89, **fits).fetch_seconds == 89
    with pytest.raises(CapacityExceeded, match="91 s to fetch the inputs it does not hold, 90 s left") as err:
        check_task_fits(m, 0, fetch_s=91, **fits)
    assert err.value.note == "time 91/90 s"


def test_solver_that_holds_the_inputs_accepts_and_one_that_must_fetch_them_declines_succeeds(monkeypatch):
    """The same task, drawn by two nodes whose fetches measured 2 Mbit/s (both declared 1000): the one holding the
    inputs fits, the other would spend 800 s of a 400-s window fetching them and declines inside the grace."""
    import verity.node.locality as locality
    import verity.node.solver as solver

    m = build_manifest("mlp")
    monkeypatch.setattr(solver, "read", lambda c, contract, fn, *a: SimpleNamespace(bandwidthMbps=1000))
    monkeypatch.setattr(locality, "train_inputs", lambda ctx, task, manifest: [TaskInput("shard", "big", 200 * MB)])

    def ctx(holds: bool):
        return SimpleNamespace(chain=SimpleNamespace(now=lambda: 1_000, registry=None), me=ME, memory_mb=1 << 20,
                               job=lambda job_id: SimpleNamespace(executionWindow=400), work=None,
                               manifest=lambda job_id, timeout=None: m,
                               storage=SimpleNamespace(timeout=30.0, holds=lambda cid: holds),
                               network=SimpleNamespace(median_mbps=lambda: 2.0))

    task, rep = SimpleNamespace(jobId=1, index=0, kind=TaskKind.TRAIN), SimpleNamespace(deadline=1_400)
    assert solver.SolverRole(ctx(holds=True))._fits(7, task, rep)["memory_mb"] >= 0
    with pytest.raises(CapacityExceeded, match="800 s to fetch the inputs it does not hold, 400 s left"):
        solver.SolverRole(ctx(holds=False))._fits(7, task, rep)


def test_dial_holders_dials_each_registered_holder_once_and_rides_out_a_dead_one_succeeds(monkeypatch):
    """Round 1 of shard 0: the previous round's replicas of shard 0 and of the aggregate, deduplicated, without this
    node, empty slots and unregistered accounts; a holder that does not answer is skipped."""
    import verity.node.locality as locality
    from verity.storage import NodeUnreachable

    nodes = {"0xA": "/ip4/10.0.0.1/tcp/4001/p2p/A", "0xB": "/ip4/10.0.0.2/tcp/4001/p2p/B", "0xC": "", ME: "/me",
             "0xE": "/ip4/10.0.0.5/tcp/4001/p2p/E"}
    monkeypatch.setattr(locality, "read", lambda c, contract, fn, account: SimpleNamespace(
        slot=int(account in nodes), multiaddr=nodes.get(account, "")))
    replicas = {10: ["0xA", "0xB"], 11: ["0xa", ME, locality.ZERO, "0xC", "0xD", "0xE"]}   # shard 0; aggregate
    dialled = []

    def connect(addr, timeout, retries):
        dialled.append(addr)
        if addr.endswith("/B"):
            raise NodeUnreachable("/ip4/127.0.0.1/tcp/5001/http", "swarm/connect: no answer within 1 s")

    ctx = SimpleNamespace(me=ME, job=lambda job_id: SimpleNamespace(shards=4, submitter="0xS"),
                          chain=SimpleNamespace(jobs=SimpleNamespace(functions=SimpleNamespace(
                              taskOf=lambda job, rnd, index: 10 if index == 0 else 11)), call=lambda x: x,
                              registry=None),
                          replicas=lambda tid: [SimpleNamespace(node=a) for a in replicas[tid]],
                          storage=SimpleNamespace(connect_peer=connect))
    assert locality.dial_holders(ctx, SimpleNamespace(jobId=1, round=1, index=0)) == 1
    # 0xa is 0xA; 0xC has no multiaddr, 0xD no registration; 0xE is past MAX_DIALS (4 holders)
    assert dialled == [nodes["0xA"], nodes["0xB"]]
