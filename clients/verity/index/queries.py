"""Reading the index: events by job, by address, by name, after an id; in chain order. The same filters over the
unconfirmed tail (events not stored yet) run in memory (`matching`)."""
from __future__ import annotations

import sqlite3
from typing import Iterable, Optional

from verity.chain.events import DecodedEvent
from verity.index.codec import address_values, load_args
from verity.index.derive import Deriver

# A job's events: those derived to it, and the StakeSlashed of every transaction that resolved one of its disputes
# (a dispute slash names only node and recipient; JobHistory charges it to the task the transaction resolved).
_JOB = ("e.id IN (SELECT id FROM events WHERE job_id = :job UNION SELECT s.id FROM events s WHERE s.name = "
        "'StakeSlashed' AND s.tx_hash IN (SELECT tx_hash FROM events WHERE job_id = :job AND name = 'DisputeResolved'))")
_ADDRESS = "e.id IN (SELECT event FROM event_addresses WHERE address = :address)"


def event_of(row) -> DecodedEvent:
    """A DecodedEvent from a row (id, contract, name, args, block, log_index, tx_hash)."""
    return DecodedEvent(row[1], row[2], load_args(row[3]), row[4], row[5], row[6], id=row[0])


def select(db: sqlite3.Connection, job_id: Optional[int] = None, address: Optional[str] = None,
           names: Optional[Iterable[str]] = None, after_id: int = 0,
           job_ids: Optional[Iterable[int]] = None) -> list[DecodedEvent]:
    where, params = ["e.id > :after"], {"after": int(after_id)}
    if job_id is not None:
        where.append(_JOB)
        params["job"] = int(job_id)
    if job_ids is not None:
        job_ids = [int(j) for j in job_ids]
        where.append(f"e.job_id IN ({', '.join(f':j{i}' for i in range(len(job_ids)))})")
        params.update({f"j{i}": j for i, j in enumerate(job_ids)})
    if address is not None:
        where.append(_ADDRESS)
        params["address"] = address.lower()
    if names is not None:
        names = list(names)
        where.append(f"e.name IN ({', '.join(f':n{i}' for i in range(len(names)))})")
        params.update({f"n{i}": n for i, n in enumerate(names)})
    sql = (f"SELECT e.id, e.contract, e.name, e.args, e.block, e.log_index, e.tx_hash FROM events e "
           f"WHERE {' AND '.join(where)} ORDER BY e.block, e.log_index")
    return [event_of(r) for r in db.execute(sql, params)]


def matching(events: list[DecodedEvent], deriver: Deriver, job_id: Optional[int] = None,
             address: Optional[str] = None, names: Optional[Iterable[str]] = None,
             job_ids: Optional[Iterable[int]] = None) -> list[DecodedEvent]:
    """`select`'s filters over events not in the index (chain order in, chain order out)."""
    ids = [deriver.ids(ev) for ev in events]
    names = None if names is None else set(names)
    job_ids = None if job_ids is None else {int(j) for j in job_ids}
    slash_txs = {ev.tx_hash for ev, i in zip(events, ids) if ev.name == "DisputeResolved" and i.job_id == job_id}
    out = []
    for ev, i in zip(events, ids):
        if job_id is not None and i.job_id != job_id and not (ev.name == "StakeSlashed" and ev.tx_hash in slash_txs):
            continue
        if job_ids is not None and i.job_id not in job_ids:
            continue
        if address is not None and address.lower() not in address_values(ev.args):
            continue
        if names is not None and ev.name not in names:
            continue
        out.append(ev)
    return out
