"""Every event the explorer reads comes through here (one place to switch to the indexer, `verity.index`).

Today: `verity.chain.EventCursor` over the deployment's contracts, one cursor per chain client that only polls the
blocks it has not read yet (past logs in bounded ranges, then from the last block read), and the job and node filters
below. With the indexer: `open_index(chain).live_events(job_id=…)` / `(address=…)` return the same `DecodedEvent`s
in chain order."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

from verity.chain import EventCursor
from verity.chain.events import DecodedEvent

__all__ = ["all_events", "job_events", "node_events", "head_block", "reset"]

# Events that name a node by one of these arguments belong to that node's history.
NODE_ARGS = ("node", "to", "challenger", "defender", "winner", "loser", "referee", "verifier", "party", "submitter")


@dataclass
class _Feed:
    cursor: EventCursor
    events: list[DecodedEvent] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def read(self) -> list[DecodedEvent]:
        with self.lock:
            self.events.extend(self.cursor.poll())
            return list(self.events)


_feeds: dict[int, _Feed] = {}
_feeds_lock = threading.Lock()


def _feed(chain) -> _Feed:
    with _feeds_lock:
        feed = _feeds.get(id(chain))
        if feed is None or feed.cursor.w3 is not chain.w3:
            feed = _feeds[id(chain)] = _Feed(EventCursor(chain.w3, chain.contracts,
                                                         next_block=chain.deployments.start_block))
        return feed


def reset(chain) -> None:
    """Forget what was read from `chain` (tests that revert the chain)."""
    with _feeds_lock:
        _feeds.pop(id(chain), None)


def head_block(chain) -> int:
    return int(chain.w3.eth.block_number)


def all_events(chain, after: int | None = None) -> list[DecodedEvent]:
    """Every event of the deployment in chain order; with `after`, only those of blocks after it."""
    events = _feed(chain).read()
    return events if after is None else [e for e in events if e.block > after]


def job_events(chain, job_id: int) -> list[DecodedEvent]:
    """The events of one job in chain order: those naming the job, its tasks or its disputes, and the slashes, credits
    and referee rulings in the transactions that resolved its disputes."""
    events = all_events(chain)
    tasks = {e.args["taskId"] for e in events if e.name == "TaskCreated" and e.args["jobId"] == job_id}
    disputes = {e.args["disputeId"] for e in events if e.name == "DisputeOpened" and e.args["taskId"] in tasks}
    txs = {e.tx_hash for e in events if e.name in ("DisputeResolved", "DisputeAbandoned", "PanelDecided")
           and e.args.get("disputeId") in disputes}
    out = []
    for e in events:
        a = e.args
        if (a.get("jobId") == job_id or ("taskId" in a and a["taskId"] in tasks)
                or ("disputeId" in a and a["disputeId"] in disputes)
                or (e.tx_hash in txs and e.name in ("StakeSlashed", "Credited", "RefereeSlashed"))):
            out.append(e)
    return out


def node_events(chain, address: str) -> list[DecodedEvent]:
    """The events that name `address` as a node, payee, party, referee or verifier, in chain order (and the
    RefereesSeated events whose panel holds it)."""
    want = address.lower()
    out = []
    for e in all_events(chain):
        a = e.args
        if any(str(a.get(k, "")).lower() == want for k in NODE_ARGS) or \
                (e.name == "RefereesSeated" and want in {str(r).lower() for r in a["referees"]}):
            out.append(e)
    return out
