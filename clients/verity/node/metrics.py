"""Prometheus metrics of one node (`verity node run --metrics-port`; docs/nodes.md, metrics and logs).

`NodeMetrics` owns its own CollectorRegistry (never prometheus_client's global one, so several nodes in one process
and the tests never collide) and labels every series with the node's name. The loop feeds it on its own thread:
after every tick the work items of the snapshot and the WorkPool's queues are counted, the chain's view of the node
(stake, locks, balance, reputation) is read again at most every `chain_refresh_s` seconds, and the events the loop
reads anyway count earnings, slashes and missed deadlines. A scrape only reads what is there (it never calls the
chain). Nothing here may stop a node: every update catches its own errors, logs the first of each kind and goes on.
"""
from __future__ import annotations

import dataclasses
import functools
import logging
import time
from typing import Any, Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from verity.errors import VerityError
from verity.node.loop import NodeLoop
from verity.node.phases import TABLES

log = logging.getLogger("verity.node.metrics")

CHAIN_REFRESH_S = 30.0   # stake, locks, balance and reputation are read from the chain at most this often
WEI = 10**18
TICK_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
STEP_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
LEFT_BUCKETS = (0, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400)
MBPS_BUCKETS = (1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 10000)
RTT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
# events naming this node that move tokens to it: (contract, event) -> earned_vrt_total's `source`
EARNINGS = {("JobEscrow", "PaymentSent"): "task", ("DisputeGame", "Credited"): "dispute",
            ("RefereePanel", "Credited"): "referee", ("VerificationFees", "FeePaid"): "fee"}


class MetricsUnavailable(VerityError, OSError):
    def __init__(self, addr: str, port: int, why: str):
        super().__init__(f"--metrics-port {port}: cannot serve metrics on {addr}:{port} ({why}); pick another port "
                         "or leave --metrics-port out")


def _guarded(fn: Callable) -> Callable:
    """An update that never raises: its first failure is logged with the traceback, later ones at debug level."""
    @functools.wraps(fn)
    def safe(self: "NodeMetrics", *args, **kwargs):
        try:
            return fn(self, *args, **kwargs)
        except Exception as exc:  # noqa: BLE001 — metrics must never stop the node
            first = fn.__name__ not in self._failed
            self._failed.add(fn.__name__)
            log.log(logging.WARNING if first else logging.DEBUG, "metrics: %s failed (%s: %s)%s", fn.__name__,
                    type(exc).__name__, exc, "; ignored from now on" if first else "", exc_info=first)
            return None
    return safe


def error_source(exc: BaseException, endpoints: dict | None = None) -> tuple[str | None, str]:
    """("ipfs" | "rpc" | None, an error class name) of an exception that failed a tick or a work item: an
    unreachable endpoint as the loop tells it (loop.transport_failure, by URL for plain HTTP errors), else a storage
    error or ipfshttpclient's is the IPFS node's, a chain error (TxFailed, ChainUnreachable), web3's or its HTTP
    transport's is the RPC endpoint's. The error itself or what it was raised from (a few causes deep) decides, and
    names the class (the error's own when nothing names a service)."""
    from verity.node import loop
    from verity.storage.errors import StorageError

    unreachable = getattr(loop, "transport_failure", None)
    service = unreachable(exc, endpoints) if unreachable is not None else None
    if service in ("chain", "ipfs"):
        return ("rpc" if service == "chain" else "ipfs"), type(exc).__name__
    seen, e = 0, exc
    while e is not None and seen < 5:
        module = type(e).__module__ or ""
        if isinstance(e, StorageError) or module.startswith("ipfshttpclient"):
            return "ipfs", type(e).__name__
        if module.startswith(("verity.chain", "web3", "eth_", "requests", "urllib3")):
            return "rpc", type(e).__name__
        e, seen = e.__cause__ or e.__context__, seen + 1
    return None, type(exc).__name__


class NodeMetrics:
    """The metrics of one node; `serve` exposes them over HTTP. Also a loop handler (`kinds` is empty: it owns no
    work items, it only counts events)."""
    kinds: tuple[str, ...] = ()

    def __init__(self, node: str, address: str = "", roles: str = "", *, chain_refresh_s: float = CHAIN_REFRESH_S,
                 clock: Callable[[], float] = time.monotonic):
        self.node, self.address, self.roles = node, address.lower(), roles
        self.chain_refresh_s, self.clock = chain_refresh_s, clock
        self.registry = CollectorRegistry()
        self._failed: set[str] = set()
        self._chain_read_at: float | None = None
        self._server = None
        self._items_seen: set[tuple[str, str]] = {(k, p.value) for k, t in TABLES.items()
                                                  for src, dsts in t.items() for p in (src, *dsts)}
        r = self.registry

        def metric(cls, name, doc, labels=(), **kw):
            return cls(f"verity_node_{name}", doc, ["node", *labels], registry=r, **kw)

        self.info = metric(Gauge, "info", "1, labelled with the node's account and roles", ("address", "roles"))
        self.work_items = metric(Gauge, "work_items", "work items in the node's snapshot by kind (solve, watch, audit, "
                                 "dispute, seat) and phase; done and lost are the ended ones", ("kind", "phase"))
        self.queue_depth = metric(Gauge, "work_queue_depth", "computations queued in the WorkPool, not started yet, "
                                  "by lane (long: training and re-execution; urgent: referee steps, replays)", ("lane",))
        self.running = metric(Gauge, "work_running", "computations running in the WorkPool, by lane", ("lane",))
        self.backlog = metric(Gauge, "work_backlog_seconds", "expected seconds of long-lane work still to do (what a "
                              "new task would wait behind)").labels(node)
        self.tick_seconds = metric(Histogram, "tick_seconds", "duration of one loop tick (events, periodic duties, "
                                   "advancing every open item)", buckets=TICK_BUCKETS).labels(node)
        self.tick_failures = metric(Counter, "tick_failures", "loop ticks that failed, outages of the RPC or IPFS "
                                    "endpoint included").labels(node)
        self.item_failures = metric(Counter, "item_failures", "failed attempts to advance a work item, by kind "
                                    "(retried a bounded number of times)", ("kind",))
        self.rpc_errors = metric(Counter, "rpc_errors", "chain RPC errors (unreachable endpoint, failed "
                                 "transaction or call) that failed a tick or a work item, by error class", ("kind",))
        self.ipfs_errors = metric(Counter, "ipfs_errors", "IPFS errors (unreachable node, CID not found, bad "
                                  "content) that failed a tick or a work item, by error class", ("kind",))
        self.step_seconds = metric(Histogram, "train_step_seconds", "seconds per training step of each task trained "
                                   "here (mean over the steps it ran), by work (solve, verify, audit, recover)",
                                   ("work",), buckets=STEP_BUCKETS)
        self.contention = metric(Gauge, "contention_factor", "how much longer than their CPU time this node's "
                                 "recent training steps took (>= 1; its time estimates are scaled by it)").labels(node)
        self.seconds_left = metric(Histogram, "result_seconds_left", "seconds left before the slot's deadline when "
                                   "this node committed, revealed or submitted its result (negative: late)",
                                   buckets=LEFT_BUCKETS).labels(node)
        self.deadlines_missed = metric(Counter, "deadlines_missed", "replicas of this node reported late "
                                       "(ReplicaLate events seen since the node started)").labels(node)
        self.earned = metric(Counter, "earned_vrt", "VRT paid to this node since it started, by source "
                             "(task payments, dispute and referee rewards, verification fees)", ("source",))
        self.slashed = metric(Counter, "slashed_vrt", "VRT of this node's stake slashed since it started "
                              "(StakeSlashed events)").labels(node)
        self.forfeited = metric(Counter, "forfeited_vrt", "task payments this node forfeited since it started "
                                "(PaymentForfeited events)").labels(node)
        self.balance = metric(Gauge, "balance_vrt", "the account's VRT balance (read from the chain)").labels(node)
        self.stake = metric(Gauge, "stake_vrt", "VRT staked in the NodeRegistry").labels(node)
        self.locked = metric(Gauge, "locked_stake_vrt", "stake locked by work in flight (tasks, challenges, seats)"
                             ).labels(node)
        self.unbonding = metric(Gauge, "unbonding_vrt", "stake unbonding (verity node unstake)").labels(node)
        self.tasks_completed = metric(Gauge, "tasks_completed", "tasks completed over the node's life (its on-chain "
                                      "reputation)").labels(node)
        self.tasks_late = metric(Gauge, "tasks_late", "tasks reported late over the node's life (its on-chain "
                                 "reputation)").labels(node)
        self.total_slashed = metric(Gauge, "total_slashed_vrt", "VRT slashed over the node's life (its on-chain "
                                    "reputation)").labels(node)
        self.promptness = metric(Gauge, "promptness_factor", "the promptness factor the draws weigh this node by "
                                 "(1 = on time; lower when it used more of its windows)").labels(node)
        self.fetch_rate = metric(Histogram, "input_fetch_mbps", "Mbit/s of each fetch of a task input this node's "
                                 "IPFS node did not hold (256 KiB or more; node/netprobe.py)", buckets=MBPS_BUCKETS
                                 ).labels(node)
        self.fetch_median = metric(Gauge, "input_fetch_median_mbps", "median rate of the last counted input fetches, "
                                   "what the bandwidth verdict reads (set once 5 were counted)").labels(node)
        self.chain_rtt = metric(Histogram, "chain_round_trip_seconds", "seconds from sending a chain request to its "
                                "answer, by kind (call: one RPC read; transaction: sent until its receipt)",
                                ("kind",), buckets=RTT_BUCKETS)
        self.demotions = metric(Counter, "bandwidth_demotions", "re-declarations of a lower bandwidth because this "
                                "node's measured fetch rate did not reach its declared tier").labels(node)
        self.declared_bandwidth = metric(Gauge, "declared_bandwidth_mbps", "the bandwidth this node declared on-chain "
                                         "(declareNetwork)").labels(node)
        self.chain_read = metric(Gauge, "chain_read_timestamp_seconds", "unix time of the last read of the gauges "
                                 "above from the chain").labels(node)
        if address or roles:
            self.info.labels(node, self.address, roles).set(1)
        for lane in ("long", "urgent"):  # every series from the start (rate() and absent() need no first event)
            self.queue_depth.labels(node, lane)
            self.running.labels(node, lane)
        for source in EARNINGS.values():
            self.earned.labels(node, source)

    # --- serving -------------------------------------------------------------------------------------------
    def serve(self, port: int, addr: str = "127.0.0.1") -> int:
        """Serve /metrics on addr:port from a daemon thread; returns the port (the one picked when `port` is 0)."""
        try:
            self._server, _thread = start_http_server(port, addr, registry=self.registry)
        except OSError as exc:
            raise MetricsUnavailable(addr, port, exc.strerror or str(exc)) from exc
        return int(self._server.server_address[1])

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    # --- the loop ------------------------------------------------------------------------------------------
    @_guarded
    def bind(self, address: str, roles: str = "") -> None:
        self.address, self.roles = address.lower(), roles or self.roles
        self.info.clear()
        self.info.labels(self.node, self.address, self.roles).set(1)

    @_guarded
    def tick_done(self, seconds: float) -> None:
        self.tick_seconds.observe(seconds)

    @_guarded
    def tick_failed(self, exc: BaseException, endpoints: dict | None = None) -> None:
        self.tick_failures.inc()
        self._count_error(exc, endpoints)

    @_guarded
    def item_failed(self, kind: str, exc: BaseException, endpoints: dict | None = None) -> None:
        self.item_failures.labels(self.node, kind).inc()
        self._count_error(exc, endpoints)

    def _count_error(self, exc: BaseException, endpoints: dict | None) -> None:
        source, kind = error_source(exc, endpoints)
        if source == "rpc":
            self.rpc_errors.labels(self.node, kind).inc()
        elif source == "ipfs":
            self.ipfs_errors.labels(self.node, kind).inc()

    @_guarded
    def observe_snapshot(self, snap) -> None:
        counts: dict[tuple[str, str], int] = {}
        for item in list(snap.items.values()):
            key = (item.kind, item.phase.value)
            counts[key] = counts.get(key, 0) + 1
        self._items_seen |= set(counts)
        for kind, phase in self._items_seen:
            self.work_items.labels(self.node, kind, phase).set(counts.get((kind, phase), 0))

    @_guarded
    def observe_work(self, pool) -> None:
        depth = pool.depth() if hasattr(pool, "depth") else {}
        for lane, (queued, running) in depth.items():
            self.queue_depth.labels(self.node, lane).set(queued)
            self.running.labels(self.node, lane).set(running)
        if hasattr(pool, "backlog_seconds"):
            self.backlog.set(pool.backlog_seconds())

    @_guarded
    def refresh_chain(self, chain, address: str | None = None, *, force: bool = False) -> None:
        """Read stake, locks, balance and reputation, unless they were read less than chain_refresh_s ago."""
        now = self.clock()
        if not force and self._chain_read_at is not None and now - self._chain_read_at < self.chain_refresh_s:
            return
        self._chain_read_at = now  # also after a failure: a gone RPC endpoint is not asked again every tick
        from verity.chain.views import read

        from web3 import Web3

        me = Web3.to_checksum_address(address or self.address)   # self.address is lower-case, for event matching
        node = read(chain, chain.registry, "getNode", me)
        self.stake.set(int(node.stake) / WEI)
        self.declared_bandwidth.set(int(node.bandwidthMbps))
        self.locked.set(int(node.locked) / WEI)
        self.unbonding.set(int(node.pendingUnstake) / WEI)
        self.balance.set(chain.call(chain.token.functions.balanceOf(me)) / WEI)
        rep = read(chain, chain.lens, "reputationOf", me)
        self.tasks_completed.set(int(rep.tasksCompleted))
        self.tasks_late.set(int(rep.tasksLate))
        self.total_slashed.set(int(rep.totalSlashed) / WEI)
        self.promptness.set(chain.call(chain.lens.functions.promptnessFactorBps(me)) / 10_000)
        self.chain_read.set(time.time())

    def on_event(self, snap, ev) -> None:
        self._on_event(ev)

    def advance(self, snap, item) -> None:  # owns no items
        return None

    @_guarded
    def _on_event(self, ev) -> None:
        args, me = ev.args, self.address
        if not me:
            return
        source = EARNINGS.get((ev.contract, ev.name))
        if source is not None:
            to = args.get("to", args.get("verifier", ""))
            if str(to).lower() == me:
                self.earned.labels(self.node, source).inc(int(args["amount"]) / WEI)
        elif ev.name == "StakeSlashed" and str(args.get("node", "")).lower() == me:
            self.slashed.inc(int(args["amount"]) / WEI)
        elif ev.name == "PaymentForfeited" and str(args.get("node", "")).lower() == me:
            self.forfeited.inc(int(args["amount"]) / WEI)
        elif ev.name == "ReplicaLate" and str(args.get("node", "")).lower() == me:
            self.deadlines_missed.inc()

    # --- the work ------------------------------------------------------------------------------------------
    @_guarded
    def trained(self, work: str, train_seconds: float, steps: int, contention: float | None = None) -> None:
        """One task's training: `steps` steps run here (resumed ones excluded) in `train_seconds`; `contention`:
        the node's load factor after it (node/feasibility.Contention)."""
        if steps > 0:
            self.step_seconds.labels(self.node, work).observe(train_seconds / steps)
        if contention is not None:
            self.contention.set(contention)

    @_guarded
    def result_sent(self, seconds_left: float | Callable[[], float]) -> None:
        """A result committed, revealed in place of a commit, or submitted, with `seconds_left` before the slot's
        deadline (a callable is evaluated here, so a failed chain read stays in the metrics path)."""
        self.seconds_left.observe(float(seconds_left() if callable(seconds_left) else seconds_left))

    @_guarded
    def fetch_observed(self, mbps: float, median_mbps: float | None) -> None:
        self.fetch_rate.observe(mbps)
        if median_mbps is not None:
            self.fetch_median.set(median_mbps)

    @_guarded
    def chain_round_trip(self, kind: str, seconds: float) -> None:
        self.chain_rtt.labels(self.node, kind).observe(seconds)

    @_guarded
    def demoted(self) -> None:
        self.demotions.inc()

    def measure(self, loop: NodeLoop, chain=None) -> "MeasuredLoop":
        """The same loop (its fields as build_loop set them), measured; these metrics also count the events it
        reads. `chain`: where the stake and reputation gauges are read (None: not read)."""
        kept = {f.name: getattr(loop, f.name) for f in dataclasses.fields(loop) if f.init}
        kept["handlers"] = [*loop.handlers, self]
        return MeasuredLoop(**{**kept, "metrics": self, "chain": chain})

    def after_tick(self, loop: NodeLoop, seconds: float, chain=None) -> None:
        self.tick_done(seconds)
        self.observe_snapshot(loop.snap)
        self.observe_work(loop.work)
        if chain is not None:
            self.refresh_chain(chain)


@dataclasses.dataclass
class MeasuredLoop(NodeLoop):
    """The node loop, measured: tick durations and failures, failed work items (and their RPC / IPFS errors), and
    after each tick the snapshot's items, the WorkPool's queues and (at most every chain_refresh_s) the chain's
    view of the node. The metrics' own errors never reach the loop."""
    metrics: Any = None          # NodeMetrics
    chain: Any = None            # ChainClient the chain gauges are read from (None: not read)

    def tick(self) -> None:
        started = time.monotonic()
        try:
            super().tick()
        except Exception as exc:
            self.metrics.tick_failed(exc, getattr(self, "endpoints", None))
            raise
        finally:
            self.metrics.after_tick(self, time.monotonic() - started, self.chain)

    def _item_failed(self, item, exc: Exception, handler=None) -> None:
        self.metrics.item_failed(item.kind, exc, getattr(self, "endpoints", None))
        super()._item_failed(item, exc, handler)

