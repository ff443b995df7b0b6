"""The index file: SQLite in WAL mode, its schema as an ordered list of migration steps (PRAGMA user_version counts
the steps applied), and the identity check that keeps one chain's rows out of another's file."""
from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Callable

from verity.errors import VerityError
from verity.index.codec import address_values, load_args


class IndexOfAnotherChain(VerityError, ValueError):
    def __init__(self, path: Path, field: str, stored, actual):
        super().__init__(f"the index {path} belongs to another chain or deployment ({field}: {stored!r} there, "
                         f"{actual!r} here); open it with the default path (one file per chain) or delete it")


class IndexTooNew(VerityError, RuntimeError):
    def __init__(self, path: Path, version: int):
        super().__init__(f"the index {path} has schema version {version}, newer than this client's "
                         f"{len(MIGRATIONS)}; upgrade verity or delete the file (it is rebuilt from the chain)")


def _v1(db: sqlite3.Connection) -> None:
    """Events with their job, task and dispute, the task -> job and dispute -> task maps, and the cursor."""
    db.executescript("""
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE cursor (one INTEGER PRIMARY KEY CHECK (one = 1), next_block INTEGER NOT NULL,
                             last_block INTEGER, last_hash TEXT);
        CREATE TABLE events (
            id INTEGER PRIMARY KEY, block INTEGER NOT NULL, log_index INTEGER NOT NULL, tx_hash TEXT NOT NULL,
            contract TEXT NOT NULL, name TEXT NOT NULL, args TEXT NOT NULL,
            job_id INTEGER, task_id INTEGER, dispute_id INTEGER, UNIQUE (block, log_index));
        CREATE INDEX events_job ON events (job_id) WHERE job_id IS NOT NULL;
        CREATE INDEX events_task ON events (task_id) WHERE task_id IS NOT NULL;
        CREATE INDEX events_dispute ON events (dispute_id) WHERE dispute_id IS NOT NULL;
        CREATE INDEX events_tx ON events (tx_hash);
        CREATE INDEX events_name ON events (name);
        CREATE TABLE tasks (task_id INTEGER PRIMARY KEY, job_id INTEGER NOT NULL, block INTEGER NOT NULL);
        CREATE TABLE disputes (dispute_id INTEGER PRIMARY KEY, task_id INTEGER NOT NULL, block INTEGER NOT NULL);
    """)


def _v2(db: sqlite3.Connection) -> None:
    """Every address an event names, so "events touching address A" is an index lookup; filled for the rows a v1
    file already holds; and the hashes of recent batch ends, to find how deep a reorg went."""
    db.executescript("""
        CREATE TABLE event_addresses (address TEXT NOT NULL, event INTEGER NOT NULL REFERENCES events (id),
                                      PRIMARY KEY (address, event)) WITHOUT ROWID;
        CREATE TABLE checkpoints (block INTEGER PRIMARY KEY, hash TEXT NOT NULL);
    """)
    rows = db.execute("SELECT id, args FROM events").fetchall()
    db.executemany("INSERT OR IGNORE INTO event_addresses (address, event) VALUES (?, ?)",
                   [(a, i) for i, args in rows for a in address_values(load_args(args))])
    last = db.execute("SELECT last_block, last_hash FROM cursor").fetchone()
    if last and last[0] is not None:
        db.execute("INSERT INTO checkpoints (block, hash) VALUES (?, ?)", last)


# Append only: a released step never changes (files in the field ran it); a schema change is a new step.
MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [_v1, _v2]


def migrate(db: sqlite3.Connection, path: Path, upto: int | None = None) -> int:
    """Apply the steps a file lacks, each in its own transaction with its version bump; returns the version."""
    upto = len(MIGRATIONS) if upto is None else upto
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version > len(MIGRATIONS):
        raise IndexTooNew(path, version)
    for step in range(version, upto):
        with db:
            db.execute("BEGIN IMMEDIATE")
            if db.execute("PRAGMA user_version").fetchone()[0] != step:  # another process migrated meanwhile
                continue
            MIGRATIONS[step](db)
            db.execute(f"PRAGMA user_version = {step + 1}")
    return db.execute("PRAGMA user_version").fetchone()[0]


def connect(path: Path, upto: int | None = None) -> sqlite3.Connection:
    """Open (creating) and migrate; autocommit mode, every write in an explicit transaction."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, isolation_level=None, timeout=30.0, check_same_thread=False)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")   # WAL: a power cut may lose the last batch, never corrupt; it is re-read
    db.execute("PRAGMA foreign_keys = ON")
    migrate(db, path, upto)
    return db


def identity_key(identity: dict) -> str:
    """What the file is for, as one string: chain id, genesis hash and each contract's address."""
    return json.dumps({"chain_id": int(identity["chain_id"]), "genesis_hash": identity["genesis_hash"].lower(),
                       "contracts": {k: v.lower() for k, v in sorted(identity["contracts"].items())}},
                      sort_keys=True)


def file_name(identity: dict) -> str:
    """`<chain id>-<genesis prefix>-<deployment digest>.sqlite`: a restarted devnet (same chain id, new genesis) or a
    redeployment gets its own file."""
    digest = hashlib.sha256(identity_key(identity).encode()).hexdigest()[:8]
    return f"{int(identity['chain_id'])}-{identity['genesis_hash'].lower()[2:10]}-{digest}.sqlite"


def check_identity(db: sqlite3.Connection, path: Path, identity: dict, start_block: int) -> None:
    """A new file records the identity; an existing one must match it field by field, or nothing is read."""
    key = identity_key(identity)
    with db:
        db.execute("BEGIN IMMEDIATE")
        stored = dict(db.execute("SELECT key, value FROM meta").fetchall())
        if not stored:
            db.executemany("INSERT INTO meta (key, value) VALUES (?, ?)",
                           [("identity", key), ("start_block", str(start_block))])
            db.execute("INSERT INTO cursor (one, next_block) VALUES (1, ?)", (start_block,))
            return
    if stored.get("identity") != key:
        have, want = json.loads(stored.get("identity") or "{}"), json.loads(key)
        field = next((f for f in ("chain_id", "genesis_hash", "contracts") if have.get(f) != want[f]), "identity")
        raise IndexOfAnotherChain(path, field, have.get(field), want[field])
