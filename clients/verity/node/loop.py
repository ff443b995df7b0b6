"""The node's main loop: read events, advance work items, persist, repeat.

Roles plug in as handlers. Each handler sees every decoded event (to create or
update its work items) and is asked to advance each open item it owns. A
failing tick is retried on the next one; after `max_failures` consecutive
failing ticks the node stops with a clear message instead of spinning.
"""
from __future__ import annotations

import logging
import signal
import time
from dataclasses import dataclass, field
from typing import Protocol

from verity.errors import ProfileUnsupported, VerityError
from verity.node.snapshot import Snapshot, SnapshotStore, WorkItem

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
    _stop: bool = False

    def request_stop(self, *_):
        self._stop = True

    def run(self, *, until=None, max_seconds: float | None = None) -> None:
        signal.signal(signal.SIGTERM, self.request_stop)
        signal.signal(signal.SIGINT, self.request_stop)
        started = time.monotonic()
        failures = 0
        while not self._stop:
            try:
                self.tick()
                failures = 0
            except Exception as exc:  # noqa: BLE001 — a daemon survives a bad tick; N in a row stop it
                failures += 1
                expected = isinstance(exc, (VerityError, OSError))  # OSError: the RPC or IPFS node went away
                log.warning("tick failed (%d/%d): %s: %s", failures, self.max_failures, type(exc).__name__, exc,
                            exc_info=not expected)
                if failures >= self.max_failures:
                    raise NodeHalted(failures, exc) from exc
            if until is not None and until(self.snap):
                return
            if max_seconds is not None and time.monotonic() - started > max_seconds:
                return
            time.sleep(self.poll_interval)

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
            for handler in self.handlers:
                if item.kind in handler.kinds:
                    try:
                        handler.advance(self.snap, item)
                    except Exception as exc:  # noqa: BLE001 — one bad item must not take the node down
                        self._item_failed(item, exc)
                    finally:
                        self.store.save(self.snap)

    def _item_failed(self, item, exc: Exception) -> None:
        """Bad inputs (a ValueError: malformed manifest, wrong hash, bad shard, …) or an
        unsupported profile end the item at once; anything else is retried a bounded
        number of times. Either way one bad job never stops the node."""
        item.attempts += 1
        permanent = isinstance(exc, (ValueError, ProfileUnsupported))
        log.warning("%s: %s: %s (attempt %d%s)", item.key, type(exc).__name__, exc, item.attempts,
                    ", giving up" if permanent else "", exc_info=not isinstance(exc, (VerityError, OSError)))
        if permanent or item.attempts >= self.item_attempts:
            self.snap.abandon(item, f"{type(exc).__name__}: {exc}")
