"""The node's main loop: read events, advance work items, persist, repeat.

Roles plug in as handlers. Each handler sees every decoded event (to create or
update its work items) and is asked to advance each open item it owns; long
computations run in the WorkPool (verity/node/work.py), so a tick never waits
for training. A tick fails as a whole when the chain or IPFS node is gone
(also when that surfaces inside an item, which then keeps its retries); after
`max_failures` consecutive failed ticks the node stops with NodeHalted, and
any successful tick resets the count. SIGINT/SIGTERM: stop taking work, say
what is in flight, give it `stop_grace` seconds, save the snapshot, return.
"""
from __future__ import annotations

import logging
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Protocol

import requests

from verity.errors import CapacityExceeded, ManifestInvalid, ProfileUnsupported, VerityError
from verity.node.phases import TERMINAL, Phase
from verity.node.snapshot import Snapshot, SnapshotStore, WorkItem
from verity.node.work import WorkPool

log = logging.getLogger("verity.node")


class NodeHalted(VerityError):
    def __init__(self, failures: int, last: BaseException):
        super().__init__(f"node stopped after {failures} consecutive failed ticks; last error: {last}")


class Handler(Protocol):
    kinds: tuple[str, ...]

    def on_event(self, snap: Snapshot, event) -> None: ...

    def advance(self, snap: Snapshot, item: WorkItem) -> None: ...


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
    failures: int = 0                               # consecutive failed ticks
    _stop: bool = False
    _force: bool = False

    def request_stop(self, signum=None, _frame=None):
        if self._stop:  # a second Ctrl-C: no more waiting
            self._force = True
            raise KeyboardInterrupt
        self._stop = True
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
                self.tick_guarded()
                if until is not None and until(self.snap):
                    return
                if max_seconds is not None and time.monotonic() - started > max_seconds:
                    return
                time.sleep(self.poll_interval)
        finally:
            self.shutdown()

    def tick_guarded(self) -> None:
        """One tick; counts consecutive failures and raises NodeHalted at `max_failures`."""
        try:
            self.tick()
            self.failures = 0
        except Exception as exc:  # noqa: BLE001 — a daemon survives a bad tick; N in a row stop it
            self.failures += 1
            expected = isinstance(exc, (VerityError, OSError))  # OSError: the RPC or IPFS node went away
            log.warning("tick failed (%d/%d in a row): %s: %s", self.failures, self.max_failures, type(exc).__name__,
                        exc, exc_info=not expected)
            if self.failures >= self.max_failures:
                raise NodeHalted(self.failures, exc) from exc

    def shutdown(self) -> None:
        left = self.work.close(0.0 if self._force else self.stop_grace)
        if left:
            log.warning("left unfinished: %s; their items stay in their phase and a restart resumes them "
                        "(training from its last checkpoint)", "; ".join(left))
        self.store.save(self.snap)
        if self._stop:
            log.info("stopped; snapshot saved at block %d", self.snap.next_block)

    def tick(self) -> None:
        self.cursor.next_block = max(self.cursor.next_block, self.snap.next_block)
        events = self.cursor.poll()
        for event in events:
            for handler in self.handlers:
                handler.on_event(self.snap, event)
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
                        handler.advance(self.snap, item)
                    except SERVICE_GONE:
                        raise  # not this item's fault: fails the tick, the item keeps its retries
                    except Exception as exc:  # noqa: BLE001 — one bad item must not take the node down
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
        log.warning("%s: %s: %s (attempt %d%s)", item.key, type(exc).__name__, exc, item.attempts,
                    ", giving up" if permanent or item.attempts >= self.item_attempts else "", exc_info=not isinstance(exc, (VerityError, OSError)))
        giving_up = permanent or item.attempts >= self.item_attempts
        # a slot given up unstarted is declined too (within the grace, unslashed) rather than left to a late report
        declined = item.kind == "solve" and (permanent or (giving_up and item.phase == Phase.ASSIGNED))
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


# the chain's or the IPFS node's endpoint does not answer (NodeUnreachable and ChainUnreachable are ConnectionErrors)
SERVICE_GONE = (ConnectionError, requests.exceptions.ConnectionError)
