"""The node's persisted snapshot: event cursor and in-flight work.

Written atomically after every transition, read on start. New fields must
have defaults so an older snapshot still loads after an upgrade.
"""
from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from pydantic import BaseModel, Field

from verity.node.phases import Phase, TERMINAL, allowed, check_transition

SNAPSHOT_VERSION = 1
log = logging.getLogger("verity.node")


class ChainBinding(BaseModel):
    """Which chain a snapshot's cursor and items belong to: a restarted devnet (new genesis) or a
    new deployment reuses chain id and block numbers, and must never be mistaken for the old one."""
    chain_id: int
    genesis_hash: str
    contracts: dict[str, str]      # name -> "address@deployment block"


class WorkItem(BaseModel):
    key: str                     # "task:<id>:<slot>", "watch:<id>:<epoch>", "dispute:<id>", "seat:<id>"
    kind: str                    # solve | watch | dispute | seat
    phase: Phase
    task_id: int = 0
    slot: int = 0
    dispute_id: int = 0
    data: dict = Field(default_factory=dict)   # phase-specific facts (root, salt, cids, …)
    updated_at: float = Field(default_factory=time.time)
    attempts: int = 0


class Snapshot(BaseModel):
    version: int = SNAPSHOT_VERSION
    address: str = ""
    chain_id: int = 0
    chain: ChainBinding | None = None
    next_block: int = 0
    items: dict[str, WorkItem] = Field(default_factory=dict)
    last_heartbeat: float = 0.0          # wall time of the last heartbeat sent
    last_heartbeat_chain: int = 0        # chain time of the last heartbeat sent (chain time may run ahead of wall)
    active_tasks: list[int] = Field(default_factory=list)   # tasks the keeper watches for deadlines
    active_panels: list[int] = Field(default_factory=list)  # disputes whose referee panel the keeper seats/advances

    def open_items(self) -> list[WorkItem]:
        return [i for i in self.items.values() if i.phase not in TERMINAL]

    def move(self, item: WorkItem, dst: Phase, **data) -> None:
        check_transition(item.key, item.phase, dst, item.kind)
        item.phase = dst
        item.data.update(data)
        item.updated_at = time.time()
        item.attempts = 0

    def abandon(self, item: WorkItem, reason: str) -> None:
        """Give an item up (inputs invalid, retries exhausted): LOST where the table allows it, else DONE."""
        dst = Phase.LOST if Phase.LOST in allowed(item.kind, item.phase) else Phase.DONE
        self.move(item, dst, abandoned=reason[:500])

    def bind(self, binding: ChainBinding) -> "Snapshot":
        """This snapshot if it belongs to `binding`'s chain, else a fresh one (same account) with a warning
        naming what is dropped. A snapshot from before bindings existed is adopted as it is."""
        if self.chain is None or self.chain == binding:
            self.chain, self.chain_id = binding, binding.chain_id
            return self
        what = "genesis block" if self.chain.genesis_hash != binding.genesis_hash else "contract deployment"
        stale = [i.key for i in self.open_items()]
        log.warning("the chain was restarted or redeployed since this node last ran (%s differs): dropping %d stale "
                    "work item(s)%s and reading events from the new deployment on", what, len(stale),
                    f" ({', '.join(stale[:10])}{', …' if len(stale) > 10 else ''})" if stale else "")
        return Snapshot(address=self.address, chain=binding, chain_id=binding.chain_id)


class SnapshotStore:
    def __init__(self, state_dir: Path):
        self.path = Path(state_dir) / "snapshot.json"
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def load(self) -> Snapshot:
        if not self.path.exists():
            return Snapshot()
        return Snapshot.model_validate_json(self.path.read_bytes())

    def save(self, snap: Snapshot) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "wb") as fh:
            fh.write(snap.model_dump_json(indent=1).encode())
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
