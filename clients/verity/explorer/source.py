"""Every event the explorer reads comes through here: the local index (`verity.index`, docs/indexer.md), synced
before each read, with the blocks it has not indexed yet read live from the chain (`live_events`), in chain order.

One Index per chain client, used under a lock (the pages read from a thread pool)."""
from __future__ import annotations

import threading

from verity.chain.events import DecodedEvent

__all__ = ["all_events", "event_count", "job_events", "latest_events", "named_events", "node_events", "head_block",
           "close"]


class _Feed:
    def __init__(self, chain):
        from verity.index import open_index

        self.index, self.lock = open_index(chain), threading.Lock()

    def read(self, **filters) -> list[DecodedEvent]:
        with self.lock:
            self.index.sync()
            return self.index.live_events(**filters)


_feeds: dict[int, tuple[object, _Feed]] = {}
_feeds_lock = threading.Lock()


def _feed(chain) -> _Feed:
    with _feeds_lock:
        held = _feeds.get(id(chain))
        if held is None or held[0] is not chain:
            held = _feeds[id(chain)] = (chain, _Feed(chain))
        return held[1]


def close(chain) -> None:
    """Close the index `chain`'s pages read (the explorer's shutdown, tests)."""
    with _feeds_lock:
        held = _feeds.pop(id(chain), None)
    if held is not None:
        with held[1].lock:
            held[1].index.close()


def head_block(chain) -> int:
    return int(chain.w3.eth.block_number)


def event_count(chain) -> int:
    """How many events the deployment has now (a COUNT, not a read of them all): what the event streams poll."""
    feed = _feed(chain)
    with feed.lock:
        feed.index.sync()
        return feed.index.live_count()


def named_events(chain, names: list[str]) -> list[DecodedEvent]:
    """The events with these names, in chain order (an index lookup, not a read of every event)."""
    return _feed(chain).read(names=names)


def latest_events(chain, n: int) -> list[DecodedEvent]:
    feed = _feed(chain)
    with feed.lock:
        feed.index.sync()
        return feed.index.latest_events(n)


def all_events(chain, after: int | None = None) -> list[DecodedEvent]:
    """Every event of the deployment in chain order; with `after`, only those of blocks after it."""
    events = _feed(chain).read()
    return events if after is None else [e for e in events if e.block > after]


def job_events(chain, job_id: int) -> list[DecodedEvent]:
    """The events of one job in chain order (those the index files under the job: its own, its tasks' and its
    disputes', and the slashes of the transactions that resolved its disputes), plus the credits (dispute rewards,
    bonds back) of those transactions."""
    feed = _feed(chain)
    events = feed.read(job_id=job_id)
    resolving = {e.tx_hash for e in events if e.name == "DisputeResolved"}
    if resolving:
        credits = [e for e in feed.read(names=["Credited"]) if e.tx_hash in resolving]
        events = sorted(events + credits, key=lambda e: e.key)
    return events


def node_events(chain, address: str) -> list[DecodedEvent]:
    """The events that name `address` (as node, payee, party, referee, verifier, …), in chain order."""
    return _feed(chain).read(address=address)
