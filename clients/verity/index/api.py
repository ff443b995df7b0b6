"""The Index object: one SQLite file per chain (chain id + genesis hash) and deployment, synced from the chain,
queried by job, address and event name."""
from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Iterable, Optional

from verity.chain.events import DecodedEvent
from verity.index import queries, store
from verity.index.sync import ChainSource, Progress, Source, cursor, db_deriver, sync

SUFFIXES = (".sqlite", ".sqlite3", ".db")


class Index:
    def __init__(self, db: sqlite3.Connection, path: Path, source: Source):
        self.db, self.path, self.source = db, path, source

    @property
    def head(self) -> int:
        """The last indexed block (start block - 1 while nothing is indexed)."""
        return cursor(self.db)[0] - 1

    def sync(self, confirmations: Optional[int] = None, *, progress: Optional[Progress] = None) -> int:
        """Index every block up to head - confirmations (default: the VERITY_INDEX_CONFIRMATIONS setting); returns
        the events added. `progress(blocks done, blocks to do, events added)` after each batch."""
        if confirmations is None:
            from verity.settings import Settings

            confirmations = Settings().index_confirmations
        return sync(self.db, self.source, max(0, int(confirmations)), progress)

    def events(self, job_id: Optional[int] = None, address: Optional[str] = None,
               names: Optional[Iterable[str]] = None, after_id: int = 0,
               job_ids: Optional[Iterable[int]] = None) -> list[DecodedEvent]:
        """Indexed events matching every given filter, in chain order; each carries its row `id` (for after_id).
        `job_ids`: events derived to any of these jobs (without `job_id`'s dispute slashes), in one lookup."""
        return queries.select(self.db, job_id, address, names, after_id, job_ids)

    def live_events(self, job_id: Optional[int] = None, address: Optional[str] = None,
                    names: Optional[Iterable[str]] = None, after_id: int = 0,
                    job_ids: Optional[Iterable[int]] = None) -> list[DecodedEvent]:
        """`events(...)` plus the same filters over the blocks not indexed yet, read from the chain now (the
        unconfirmed tail, `id` None), so an answer is as fresh as the chain's head."""
        names = None if names is None else list(names)
        job_ids = None if job_ids is None else list(job_ids)
        with self.db:
            self.db.execute("BEGIN")   # one snapshot: the rows and the head they reach
            stored = queries.select(self.db, job_id, address, names, after_id, job_ids)
            head = self.head
        tail = self.source.events(head + 1, self.source.head())
        return stored + queries.matching(tail, db_deriver(self.db), job_id, address, names, job_ids)

    def live_count(self) -> int:
        """How many events the deployment has now: the indexed rows (one COUNT) plus the unconfirmed tail's. A
        cheap "did anything happen?" for a page that polls (the explorer's event streams)."""
        with self.db:
            self.db.execute("BEGIN")
            stored = int(self.db.execute("SELECT count(*) FROM events").fetchone()[0])
            head = self.head
        return stored + len(self.source.events(head + 1, self.source.head()))

    def latest_events(self, n: int) -> list[DecodedEvent]:
        """The last `n` events of the deployment, unconfirmed tail included, in chain order (an overview's feed)."""
        with self.db:
            self.db.execute("BEGIN")
            rows = self.db.execute("SELECT id, contract, name, args, block, log_index, tx_hash FROM events "
                                   "ORDER BY block DESC, log_index DESC LIMIT ?", (int(n),)).fetchall()
            head = self.head
        stored = [queries.event_of(r) for r in reversed(rows)]
        return (stored + self.source.events(head + 1, self.source.head()))[-int(n):] if n > 0 else []

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> "Index":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def default_dir() -> Path:
    from verity.settings import Settings

    return Path(Settings().state_dir) / "index"


def open_source(source: Source, path: Optional[Path] = None) -> Index:
    """An Index over any Source (the chain, or a fake in unit tests and the benchmark). `path`: a directory (the file
    is named for the chain there) or a file ending in .sqlite/.sqlite3/.db (which must be of this chain, or
    IndexOfAnotherChain)."""
    identity = source.identity()
    if path is None:
        path = default_dir() / store.file_name(identity)
    elif Path(path).suffix not in SUFFIXES and not Path(path).is_file():
        path = Path(path) / store.file_name(identity)
    path = Path(path)
    db = store.connect(path)
    try:
        store.check_identity(db, path, identity, source.start_block)
    except BaseException:
        db.close()
        raise
    return Index(db, path, source)


def open_index(chain, path: Optional[Path] = None) -> Index:
    """The index of `chain`'s deployment (a verity.chain.ChainClient), by default under
    Settings().state_dir / "index"; call `sync()` before reading."""
    return open_source(ChainSource(chain), path)
