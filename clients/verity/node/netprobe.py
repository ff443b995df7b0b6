"""This node's network, measured, against what it declared (issue 25, "scheduling measured, not declared").

NodeRegistry.declareNetwork takes a node's word for its bandwidth, and a job asking for a bandwidth tier is drawn
only from nodes that declared it. The chain checks nothing; a node that overstates is late, and lateness costs it
(reputation, weight, fines). So the node checks itself: `NetworkObserver` records the rate of its own fetches of
task inputs over the network (not those its IPFS node already held) and the round-trip times of its chain calls and
transactions; `bandwidth_verdict` says what bandwidth the fetches let it claim; `demote_if_overstated` (the keeper's
chore round) re-declares that when it is a lower tier than the declared one. Never upwards: that is the operator's
call. VERITY_SELF_DEMOTE=0 logs the verdict and keeps the declaration.
"""
from __future__ import annotations

import logging
import statistics
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field

from verity.chain.protocol import BANDWIDTH_TIER_FLOORS_MBPS, bandwidth_tier
from verity.chain.views import read
from verity.engine.tensorfile import atomic_write

log = logging.getLogger("verity.node.netprobe")

MIN_FETCH_BYTES = 256 << 10     # a smaller fetch is mostly lookup and round trips: it says nothing about bandwidth
MIN_FETCHES = 5                 # counted fetches before any verdict
WINDOW = 15                     # the verdict reads the median of the last WINDOW counted fetches
MAX_AGE_S = 7 * 86_400          # older fetches are not judged
DEMOTE_COOLDOWN_S = 3_600.0     # at most one re-declaration (or, self-demotion off, one warning) an hour
FILE = "network.json"


@dataclass(frozen=True)
class Verdict:
    declared_mbps: int
    measured_mbps: float | None   # median rate of the counted fetches; None: fewer than MIN_FETCHES
    fetches: int
    claim_mbps: int               # what the node can honestly declare: the declared value, or a lower tier's floor

    @property
    def demote(self) -> bool:
        return self.claim_mbps < self.declared_mbps

    def reason(self) -> str:
        return (f"declared {self.declared_mbps} Mbit/s, measured median {self.measured_mbps:.0f} Mbit/s over "
                f"{self.fetches} fetches")


def tier_floor(mbps: float) -> int:
    """The floor of the bandwidth tier `mbps` reaches (NodeMath.bandwidthTier): 0, 10, 100, 1000 or 10000."""
    return BANDWIDTH_TIER_FLOORS_MBPS[bandwidth_tier(int(mbps))]


def bandwidth_verdict(declared_mbps: int, rates_mbps: Sequence[float]) -> Verdict:
    """What a node that declared `declared_mbps` can claim after fetching at `rates_mbps`: the declaration while the
    median rate reaches its tier's floor (or fewer than MIN_FETCHES rates tell), else the floor of the tier the
    median reaches. Draws read tiers only, so a median inside the declared tier changes nothing."""
    if len(rates_mbps) < MIN_FETCHES:
        return Verdict(declared_mbps, None, len(rates_mbps), declared_mbps)
    measured = statistics.median(rates_mbps)
    reached = tier_floor(measured)
    return Verdict(declared_mbps, measured, len(rates_mbps),
                   reached if reached < tier_floor(declared_mbps) else declared_mbps)


class Fetch(BaseModel):
    size: int        # bytes
    seconds: float   # wall time of the whole fetch (lookup, stat and transfer: what a deadline sees)
    at: float        # unix time

    @property
    def mbps(self) -> float:
        return self.size * 8 / self.seconds / 1e6


class NetworkRecord(BaseModel):
    """<state dir>/network.json: what a restart must not forget. New fields need defaults."""
    fetches: list[Fetch] = Field(default_factory=list)
    last_demotion: float | None = None   # unix time of the last re-declaration (or warning); None: never


class NetworkObserver:
    """The measurements of one node. `metrics`: its NodeMetrics (None: nothing exported)."""

    def __init__(self, path: Path, record: NetworkRecord | None = None, *, self_demote: bool = True,
                 metrics=None, clock=time.time):
        self.path, self.record = Path(path), record or NetworkRecord()
        self.self_demote, self.metrics, self.clock = self_demote, metrics, clock
        self.unjudged = bool(self.record.fetches)   # fetches the verdict has not read yet (a restart judges once)
        self._lock = threading.Lock()   # training threads fetch round inputs while the loop fetches shards

    @classmethod
    def load(cls, state_dir: Path, **kwargs) -> "NetworkObserver":
        path = Path(state_dir) / FILE
        record = NetworkRecord.model_validate_json(path.read_bytes()) if path.exists() else None
        return cls(path, record, **kwargs)

    def fetched(self, size: int, seconds: float) -> None:
        """An input of `size` bytes came over the network in `seconds`; kept (and saved) when big enough to count."""
        if size < MIN_FETCH_BYTES or seconds <= 0:
            return
        fetch = Fetch(size=size, seconds=seconds, at=self.clock())
        with self._lock:
            self.record.fetches = [*self.record.fetches, fetch][-WINDOW:]
            self.unjudged = True
            self._save()
        if self.metrics is not None:
            self.metrics.fetch_observed(fetch.mbps, self.median_mbps())

    def chain_round_trip(self, kind: str, seconds: float) -> None:
        """`kind`: "call" (one RPC read) or "transaction" (sent until its receipt)."""
        if self.metrics is not None:
            self.metrics.chain_round_trip(kind, seconds)

    def rates_mbps(self) -> list[float]:
        """The rates of the kept fetches younger than MAX_AGE_S (a link upgraded since no longer drags the median)."""
        now = self.clock()
        return [f.mbps for f in self.record.fetches if now - f.at < MAX_AGE_S]

    def median_mbps(self) -> float | None:
        rates = self.rates_mbps()
        return statistics.median(rates) if len(rates) >= MIN_FETCHES else None

    def verdict(self, declared_mbps: int) -> Verdict:
        return bandwidth_verdict(declared_mbps, self.rates_mbps())

    def due(self) -> bool:
        """New fetches to judge, and the cooldown since the last re-declaration is over."""
        last = self.record.last_demotion
        return self.unjudged and (last is None or self.clock() >= last + DEMOTE_COOLDOWN_S)

    def demoted(self, redeclared: bool) -> None:
        """An overstatement was found: re-declared (`redeclared`) or, self-demotion off, warned about."""
        with self._lock:
            self.record.last_demotion = self.clock()
            self._save()
        if redeclared and self.metrics is not None:
            self.metrics.demoted()

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, lambda fh: fh.write(self.record.model_dump_json(indent=1).encode()))


def demote_if_overstated(ctx, network: NetworkObserver) -> Verdict | None:
    """Judge new fetches against the chain's declaration; re-declare the claim (keeping the region) when it is a
    lower tier. None when nothing was due."""
    if not network.due():
        return None
    network.unjudged = False
    c = ctx.chain
    node = read(c, c.registry, "getNode", ctx.me)
    verdict = network.verdict(int(node.bandwidthMbps))
    if not verdict.demote:
        return verdict
    if network.self_demote:
        c.transact(c.registry.functions.declareNetwork(int(node.region), verdict.claim_mbps))
        log.warning("%s: re-declared %d Mbit/s so draws stop handing it jobs it would be late on", verdict.reason(),
                    verdict.claim_mbps)
    else:
        log.warning("%s: it would be late on jobs asking for its tier; VERITY_SELF_DEMOTE=0 keeps the declaration "
                    "(re-declare %d Mbit/s with `verity node register --bandwidth-mbps`)", verdict.reason(),
                    verdict.claim_mbps)
    network.demoted(redeclared=network.self_demote)
    return verdict
