"""Writing chain events into the index: batches of at most MAX_RANGE blocks (one eth_getLogs each), each batch's events,
derived ids, addresses and the advanced cursor in ONE transaction, so a crash re-reads a batch instead of skipping or
doubling it; only blocks at least `confirmations` deep; a reorg deeper than that is found by the stored block hashes
and the blocks after the newest surviving one are dropped and read again."""
from __future__ import annotations

import sqlite3
from typing import Callable, Optional, Protocol

from verity.chain.events import MAX_RANGE, DecodedEvent, EventCursor
from verity.index.codec import address_values, dump_args
from verity.index.derive import Deriver

BATCH_BLOCKS = MAX_RANGE   # blocks per batch (transaction)
CHECKPOINTS_KEPT = 64      # batch-end block hashes kept to find how deep a reorg went

Progress = Callable[[int, int, int], None]  # (blocks done, blocks to do, events added)


class Source(Protocol):
    """Where events come from: the chain (ChainSource) or, in unit tests and the benchmark, a fake."""

    start_block: int

    def identity(self) -> dict: ...
    def head(self) -> int: ...
    def block_hash(self, number: int) -> str: ...
    def events(self, start: int, end: int) -> list[DecodedEvent]: ...


class ChainSource:
    """A deployment's contracts on the chain a ChainClient talks to."""

    def __init__(self, chain):
        self.chain = chain
        self.start_block = int(chain.deployments.start_block)

    def identity(self) -> dict:
        from verity.chain.identity import chain_identity

        return {**chain_identity(self.chain.w3),
                "contracts": {name: c.address for name, c in self.chain.contracts.items()}}

    def head(self) -> int:
        return int(self.chain.w3.eth.block_number)

    def block_hash(self, number: int) -> str:
        from verity.chain.identity import _hex

        return _hex(self.chain.w3.eth.get_block(number)["hash"])

    def events(self, start: int, end: int) -> list[DecodedEvent]:
        return EventCursor(self.chain.w3, self.chain.contracts, next_block=start).poll(head=end)


def db_deriver(db: sqlite3.Connection) -> Deriver:
    def task_job(task_id: int) -> Optional[int]:
        row = db.execute("SELECT job_id FROM tasks WHERE task_id = ?", (task_id,)).fetchone()
        return row[0] if row else None

    def dispute_task(dispute_id: int) -> Optional[int]:
        row = db.execute("SELECT task_id FROM disputes WHERE dispute_id = ?", (dispute_id,)).fetchone()
        return row[0] if row else None

    return Deriver(task_job, dispute_task)


def cursor(db: sqlite3.Connection) -> tuple[int, Optional[int], Optional[str]]:
    """(next block to read, last indexed block or None, its hash)."""
    return db.execute("SELECT next_block, last_block, last_hash FROM cursor").fetchone()


def _write_events(db: sqlite3.Connection, events: list[DecodedEvent]) -> list[tuple[int, DecodedEvent]]:
    deriver = db_deriver(db)
    first = db.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM events").fetchone()[0]
    rows, stored = [], []
    for i, ev in enumerate(events):
        ids = deriver.ids(ev)
        rows.append((first + i, ev.block, ev.log_index, ev.tx_hash, ev.contract, ev.name, dump_args(ev.args),
                     ids.job_id, ids.task_id, ids.dispute_id))
        stored.append((first + i, ev))
    db.executemany("INSERT INTO events (id, block, log_index, tx_hash, contract, name, args, job_id, task_id, "
                   "dispute_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    db.executemany("INSERT OR IGNORE INTO tasks (task_id, job_id, block) VALUES (?, ?, ?)",
                   [(t, j, deriver.blocks[("task", t)]) for t, j in deriver.new_tasks.items()])
    db.executemany("INSERT OR IGNORE INTO disputes (dispute_id, task_id, block) VALUES (?, ?, ?)",
                   [(d, t, deriver.blocks[("dispute", d)]) for d, t in deriver.new_disputes.items()])
    return stored


def _write_addresses(db: sqlite3.Connection, stored: list[tuple[int, DecodedEvent]]) -> None:
    db.executemany("INSERT OR IGNORE INTO event_addresses (address, event) VALUES (?, ?)",
                   [(a, i) for i, ev in stored for a in address_values(ev.args)])


def write_batch(db: sqlite3.Connection, start: int, end: int, end_hash: str, events: list[DecodedEvent]) -> Optional[int]:
    """Store the events of blocks [start, end] and move the cursor past `end`, all or nothing. None (nothing written)
    when the cursor is no longer at `start` (another process indexed these blocks meanwhile)."""
    with db:
        db.execute("BEGIN IMMEDIATE")
        if cursor(db)[0] != start:
            return None
        stored = _write_events(db, sorted(events, key=lambda e: e.key))
        _write_addresses(db, stored)
        db.execute("INSERT OR REPLACE INTO checkpoints (block, hash) VALUES (?, ?)", (end, end_hash))
        db.execute("DELETE FROM checkpoints WHERE block NOT IN "
                   "(SELECT block FROM checkpoints ORDER BY block DESC LIMIT ?)", (CHECKPOINTS_KEPT,))
        db.execute("UPDATE cursor SET next_block = ?, last_block = ?, last_hash = ?", (end + 1, end, end_hash))
        return len(stored)


def rewind(db: sqlite3.Connection, keep_upto: int) -> int:
    """Drop everything stored from block keep_upto + 1 on; returns the events dropped."""
    with db:
        db.execute("BEGIN IMMEDIATE")
        db.execute("DELETE FROM event_addresses WHERE event IN (SELECT id FROM events WHERE block > ?)", (keep_upto,))
        dropped = db.execute("DELETE FROM events WHERE block > ?", (keep_upto,)).rowcount
        for table in ("tasks", "disputes", "checkpoints"):
            db.execute(f"DELETE FROM {table} WHERE block > ?", (keep_upto,))
        kept = db.execute("SELECT block, hash FROM checkpoints WHERE block = ?", (keep_upto,)).fetchone()
        db.execute("UPDATE cursor SET next_block = ?, last_block = ?, last_hash = ?",
                   (keep_upto + 1, *(kept or (None, None))))
        return dropped


def check_reorg(db: sqlite3.Connection, source: Source) -> Optional[int]:
    """If the last indexed block's hash changed, rewind to the newest stored batch end the chain still has (or to the
    start) and return the block kept; None when nothing changed."""
    _, last, last_hash = cursor(db)
    head = source.head()   # below the last indexed block: the chain was reverted (anvil's evm_revert) or reorged
    if last is None or (last <= head and source.block_hash(last) == last_hash):
        return None
    keep = source.start_block - 1
    for block, stored_hash in db.execute("SELECT block, hash FROM checkpoints ORDER BY block DESC").fetchall():
        if block <= head and source.block_hash(block) == stored_hash:
            keep = block
            break
    rewind(db, keep)
    return keep


def sync(db: sqlite3.Connection, source: Source, confirmations: int, progress: Optional[Progress] = None) -> int:
    """Index every block up to head - confirmations; returns the events added."""
    check_reorg(db, source)
    target = source.head() - confirmations
    start, added = cursor(db)[0], 0
    first = start
    while start <= target:
        end = min(start + BATCH_BLOCKS - 1, target)
        before = source.block_hash(end)
        events = source.events(start, end)
        if source.block_hash(end) != before:   # a reorg while reading: read the batch again
            continue
        n = write_batch(db, start, end, before, events)
        if n is not None:
            added += n
        start = cursor(db)[0]
        if progress is not None:
            progress(min(start, target + 1) - first, target + 1 - first, added)
    return added
