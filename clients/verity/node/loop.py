"""The node's main loop: read events, advance work items, persist, repeat.

Roles plug in as handlers. Each handler sees every decoded event (to create or
update its work items) and is asked to advance each open item it owns; long
computations run in the WorkPool (verity/node/work.py), so a tick never waits
for training. A tick fails as a whole when the chain or IPFS node is gone
(also when that surfaces inside an item, which then keeps its retries): that is
an outage (`transport_failure`), not a bug, so the node keeps running, backs off
(1 s doubling to `backoff_cap`, with jitter), logs one line when the outage
starts and one when it ends, and resumes from its snapshot's block (the event
cursor re-reads every block it had not fully handled); background work keeps
running meanwhile. Outages never count as failed ticks; only `max_outage`
seconds of one (None: no limit) stop the node (OutageTooLong). Any other
failure counts: after `max_failures` consecutive failed ticks the node stops
with NodeHalted, and any successful tick resets the count. SIGINT/SIGTERM:
stop taking work, say what is in flight, give it `stop_grace` seconds, save
the snapshot, return.
"""
from __future__ import annotations

import errno
import logging
import random
import signal
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Protocol

import requests
import urllib3.exceptions
from ipfshttpclient import exceptions as ipfs_exc
from web3.exceptions import ProviderConnectionError, RequestTimedOut

from verity.errors import CapacityExceeded, ManifestInvalid, ProfileUnsupported, VerityError
from verity.node.phases import TERMINAL, Phase
from verity.node.snapshot import Snapshot, SnapshotStore, WorkItem
from verity.node.work import WorkPool

log = logging.getLogger("verity.node")


class NodeHalted(VerityError):
    def __init__(self, failures: int, last: BaseException, message: str | None = None):
        self.failures, self.last = failures, last
        super().__init__(message or f"node stopped after {failures} consecutive failed ticks; last error: {last}")


class OutageTooLong(NodeHalted):
    def __init__(self, service: str, where: str, seconds: float, limit: float, last: BaseException):
        super().__init__(0, last, f"node stopped: {service} at {where} unreachable for {seconds:.0f} s, over the "
                                  f"VERITY_MAX_OUTAGE limit of {limit:g} s; last error: {last}; "
                                  f"a restart resumes from the saved snapshot")


@dataclass
class Outage:
    """An endpoint that stopped answering: since when (the loop's clock), how many ticks it failed."""
    service: str        # "chain" | "ipfs" | "network" (a transport error that names neither)
    where: str
    since: float
    resume_block: int   # the first block not fully handled when it started: where catching up begins
    tries: int = 0
    reminded: float = 0.0


class Handler(Protocol):
    kinds: tuple[str, ...]

    def on_event(self, snap: Snapshot, event) -> None: ...

    def advance(self, snap: Snapshot, item: WorkItem) -> str | None: ...  # SAVE_AND_GO_ON: again, this tick


@dataclass
class NodeLoop:
    cursor: object                 # verity.chain.EventCursor
    store: SnapshotStore
    snap: Snapshot
    handlers: list
    poll_interval: float = 0.5
    max_failures: int = 20
    item_attempts: int = 8
    periodic: list = field(default_factory=list)   # callables run every tick (heartbeat, …)
    work: WorkPool = field(default_factory=lambda: WorkPool(inline=True))
    stop_grace: float = 5.0
    failures: int = 0                               # consecutive failed ticks (outages never count)
    # outages (RPC or IPFS endpoint unreachable): backoff between ticks, an optional limit, the endpoints to name
    backoff_start: float = 1.0
    backoff_cap: float = 30.0
    max_outage: float | None = None                 # seconds; None: ride out any outage
    endpoints: dict = field(default_factory=dict)   # {"chain": rpc url, "ipfs": api multiaddr}
    sleep: Callable[[float], object] | None = None  # tests inject a fake; default: a wait a stop request ends
    clock: Callable[[], float] = time.monotonic
    rng: random.Random = field(default_factory=random.Random)
    outage: Outage | None = None
    _wake: threading.Event = field(default_factory=threading.Event)
    _stop: bool = False
    _force: bool = False

    def request_stop(self, signum=None, _frame=None):
        if self._stop:  # a second Ctrl-C: no more waiting
            self._force = True
            raise KeyboardInterrupt
        self._stop = True
        self._wake.set()  # cut short a backoff wait
        busy = self.work.in_flight()
        log.warning("%s: stopping; finishing %s, then saving the snapshot (Ctrl-C again to stop at once)",
                    signal.Signals(signum).name if signum else "stop requested",
                    "; ".join(busy) if busy else "the current tick (nothing computing)")

    def run(self, *, until=None, max_seconds: float | None = None) -> None:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self.request_stop)
            signal.signal(signal.SIGINT, self.request_stop)
        started = time.monotonic()
        try:
            while not self._stop:
                delay = self.tick_guarded()
                if until is not None and until(self.snap):
                    return
                if max_seconds is not None and time.monotonic() - started > max_seconds:
                    return
                if not self._stop:
                    (self.sleep or self._wake.wait)(delay)
        finally:
            self.shutdown()

    def tick_guarded(self) -> float:
        """One tick; returns the seconds to wait before the next. An unreachable endpoint is an outage: backoff,
        no failure counted (OutageTooLong past `max_outage`); other failures count, NodeHalted at `max_failures`."""
        resume = max(self.cursor.next_block, self.snap.next_block)
        try:
            self.tick()
            self.failures = 0
            self._outage_over()
            return self.poll_interval
        except Exception as exc:  # noqa: BLE001 — a daemon survives a bad tick; N in a row stop it
            service = transport_failure(exc, self.endpoints)
            if service is not None:
                return self._outage_tick(service, exc, resume)
            self._outage_over()  # it answered, though the tick failed for another reason
            self.failures += 1
            expected = isinstance(exc, (VerityError, OSError))  # OSError: the RPC or IPFS node went away
            log.warning("tick failed (%d/%d in a row): %s: %s", self.failures, self.max_failures, type(exc).__name__,
                        exc, exc_info=not expected)
            if self.failures >= self.max_failures:
                raise NodeHalted(self.failures, exc) from exc
            return self.poll_interval

    def _outage_tick(self, service: str, exc: BaseException, resume: int) -> float:
        """A tick failed for an unreachable endpoint: log the outage's start once (a reminder every
        OUTAGE_REMINDER_S), stop past `max_outage`, else return the next backoff (capped, jittered down)."""
        now = self.clock()
        o = self.outage
        if o is not None and o.service != service:  # one endpoint is back, another is gone
            self._outage_over()
            o = None
        if o is None:
            where = (getattr(exc, "rpc_url", None) or getattr(exc, "api_addr", None) or self.endpoints.get(service)
                     or " / ".join(str(v) for v in self.endpoints.values()) or "?")
            o = self.outage = Outage(service, str(where), now, resume, reminded=now)
            log.warning("%s unreachable at %s: %s; retrying, backing off up to %g s", SERVICE_NAMES[service],
                        o.where, exc, self.backoff_cap)
        elif now - o.reminded >= OUTAGE_REMINDER_S:
            o.reminded = now
            log.warning("%s at %s still unreachable after %.0f s (%d tries): %s", SERVICE_NAMES[service], o.where,
                        now - o.since, o.tries + 1, exc)
        else:
            log.debug("%s still unreachable: %s", SERVICE_NAMES[service], exc)
        o.tries += 1
        if self.max_outage is not None and now - o.since >= self.max_outage:
            raise OutageTooLong(SERVICE_NAMES[service], o.where, now - o.since, self.max_outage, exc) from exc
        delay = min(self.backoff_cap, self.backoff_start * 2 ** min(o.tries - 1, 32))
        return delay * (1.0 - BACKOFF_JITTER * self.rng.random())

    def _outage_over(self) -> None:
        o, self.outage = self.outage, None
        if o is not None:
            log.warning("%s back after %.0f s; catching up from block %d", SERVICE_NAMES[o.service],
                        self.clock() - o.since, o.resume_block)

    def shutdown(self) -> None:
        left = self.work.close(0.0 if self._force else self.stop_grace)
        if left:
            log.warning("left unfinished: %s; their items stay in their phase and a restart resumes them "
                        "(training from its last checkpoint)", "; ".join(left))
        self.store.save(self.snap)
        if self._stop:
            log.info("stopped; snapshot saved at block %d", self.snap.next_block)

    def tick(self) -> None:
        self.cursor.next_block = resume = max(self.cursor.next_block, self.snap.next_block)
        try:
            events = self.cursor.poll()
            for event in events:
                for handler in self.handlers:
                    handler.on_event(self.snap, event)
        except BaseException:
            # the range was not fully handled (the chain went away mid-range, a handler failed): read all of it
            # again next tick (handlers are idempotent) rather than resume past events nobody handled
            self.cursor.next_block = resume
            raise
        # persist the cursor only after every event of the range has been handled
        self.snap.next_block = self.cursor.next_block
        self.store.save(self.snap)
        for fn in self.periodic:
            fn(self.snap)
        for item in list(self.snap.open_items()):
            if self._stop:
                return
            for handler in self.handlers:
                if item.kind in handler.kinds:
                    try:
                        if handler.advance(self.snap, item) is SAVE_AND_GO_ON and item.phase not in TERMINAL:
                            self.store.save(self.snap)  # what it decided (a salt, a vote) is on disk before it acts
                            handler.advance(self.snap, item)
                    except Exception as exc:  # noqa: BLE001 — one bad item must not take the node down
                        if transport_failure(exc, self.endpoints) is not None:
                            raise  # not this item's fault: fails the tick (an outage), the item keeps its retries
                        self._item_failed(item, exc, handler)
                    finally:
                        if item.phase in TERMINAL:
                            self.work.forget(item.key)
                        self.store.save(self.snap)

    def _item_failed(self, item, exc: Exception, handler=None) -> None:
        """Bad inputs (a ValueError: malformed manifest, wrong hash, bad shard, …) or an
        unsupported profile end the item at once; anything else is retried a bounded
        number of times. Either way one bad job never stops the node. A solve item that ends
        for bad inputs, a profile or work this node cannot do (CapacityExceeded), or that runs out of retries
        before it started, declines its slot on-chain (unslashed, within the decline grace)."""
        item.attempts += 1
        item.data.pop("computing", None)
        permanent = isinstance(exc, (ValueError, ProfileUnsupported, CapacityExceeded))
        giving_up = permanent or item.attempts >= self.item_attempts
        # a slot given up unstarted is declined too (within the grace, unslashed) rather than left to a late report
        declined = item.kind == "solve" and (permanent or (giving_up and item.phase == Phase.ASSIGNED))
        # declining work this node cannot do or inputs it cannot use, for one of Verity's own reasons, is routine
        # (INFO; the decline's own line follows); retries that ran out, a failure that declines nothing or a bare
        # ValueError (perhaps a bug: its traceback goes with it) stay a warning
        routine = declined and permanent and isinstance(exc, VerityError) and hasattr(handler, "decline")
        log.log(logging.INFO if routine else logging.WARNING, "%s: %s: %s (attempt %d%s)", item.key,
                type(exc).__name__, exc, item.attempts, ", giving up" if giving_up else "",
                exc_info=not isinstance(exc, (VerityError, OSError)))
        if declined and hasattr(handler, "decline"):
            # a ValueError is the poster's inputs (manifest, shard, hash); an unsupported profile, work this node
            # cannot hold or retries that ran out are ours, and must not count towards failing the poster's job
            invalid = permanent and isinstance(exc, ValueError) and getattr(exc, "invalid_inputs", True)
            handler.decline(item, f"{type(exc).__name__}: {exc}", invalid_inputs=invalid, note=decline_note_of(exc))
        if giving_up:
            self.snap.abandon(item, f"{'declined: ' if declined else ''}{type(exc).__name__}: {exc}")


def decline_note_of(exc: Exception) -> str:
    """The short note a decline puts on-chain (32 ASCII bytes): the numbers of a capacity refusal, the manifest field
    of an invalid job, else the error's kind."""
    if isinstance(exc, CapacityExceeded):
        return exc.note
    if isinstance(exc, ManifestInvalid):
        return f"invalid manifest: {exc.field}"
    return f"{type(exc).__name__}: {exc}"


SERVICE_NAMES = {"chain": "chain RPC", "ipfs": "IPFS node", "network": "chain RPC or IPFS node"}
# What `advance` returns when it persisted a decision in the item and its next step (a transaction) is urgent: the loop
# saves the snapshot and advances the item again in the same tick, instead of after every other item and the next
# tick's chores (seconds to tens of seconds at load; a referee's vote missed the panel's window by that)
SAVE_AND_GO_ON = "save-and-go-on"
OUTAGE_REMINDER_S = 600.0   # while an outage lasts, one "still unreachable" line this often
BACKOFF_JITTER = 0.1        # a backoff wait is its capped value minus up to this fraction

# errnos of a network that does not carry the request (an OSError that is not a ConnectionError subclass)
_NET_ERRNOS = {errno.ECONNREFUSED, errno.ECONNRESET, errno.ECONNABORTED, errno.ETIMEDOUT, errno.EHOSTUNREACH,
               errno.ENETUNREACH, errno.ENETDOWN, errno.EHOSTDOWN, errno.ENETRESET}


def transport_failure(exc: BaseException, endpoints: dict | None = None) -> str | None:
    """Which endpoint an exception says is unreachable ("chain", "ipfs", or "network" when it names neither), or None
    when it is anything else (a bug, a revert, bad inputs, a CID nobody serves: those keep their own handling).

    Unreachable: refused, reset or timed-out connections, DNS failures, HTTP 5xx and 429, the chain client's
    ChainUnreachable and the storage client's NodeUnreachable. Only the exception itself is looked at, not what
    it was raised from: a CidNotFound raised from a timeout is the content's absence, not an outage."""
    from verity.chain.client import ChainUnreachable
    from verity.storage.errors import NodeUnreachable

    if isinstance(exc, NodeUnreachable) or isinstance(exc, (ipfs_exc.ConnectionError, ipfs_exc.TimeoutError,
                                                            ipfs_exc.ProtocolError)):
        return "ipfs"
    if isinstance(exc, (ChainUnreachable, ProviderConnectionError, RequestTimedOut)):
        return "chain"
    if isinstance(exc, requests.exceptions.HTTPError):
        status = getattr(getattr(exc, "response", None), "status_code", None)
        return _by_url(exc, endpoints) if status is not None and (status >= 500 or status == 429) else None
    if isinstance(exc, (requests.exceptions.ConnectionError, requests.exceptions.Timeout,
                        requests.exceptions.ChunkedEncodingError)):
        return _by_url(exc, endpoints)
    if isinstance(exc, (urllib3.exceptions.ProtocolError, urllib3.exceptions.TimeoutError,
                        urllib3.exceptions.NewConnectionError, urllib3.exceptions.MaxRetryError)):
        return "network"
    if isinstance(exc, BrokenPipeError):
        return None  # a local pipe (a worker process) as often as a socket: not evidence of an outage
    if isinstance(exc, (ConnectionError, TimeoutError, socket.gaierror)):
        return "network"
    if isinstance(exc, OSError) and exc.errno in _NET_ERRNOS:
        return "network"
    return None


def _by_url(exc: BaseException, endpoints: dict | None) -> str:
    """The endpoint a requests exception's URL belongs to (by host and port), else "network"."""
    from urllib.parse import urlsplit

    url = getattr(getattr(exc, "request", None), "url", None)
    if not url:
        return "network"
    target = urlsplit(url)
    for service, where in (endpoints or {}).items():
        where = str(where)
        if where.startswith("/"):  # a multiaddr: /ip4/HOST/tcp/PORT/http
            parts = where.split("/")
            host, port = (parts[2], parts[4]) if len(parts) > 4 else ("", "")
        else:
            u = urlsplit(where if "://" in where else f"http://{where}")
            host, port = u.hostname or "", str(u.port or (443 if u.scheme == "https" else 80))
        if target.hostname == host and str(target.port or (443 if target.scheme == "https" else 80)) == port:
            return service
    return "network"
