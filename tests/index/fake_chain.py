"""A chain at the edge of the index's unit tests: blocks of DecodedEvents with hashes, reorgs by replacing blocks."""
from __future__ import annotations

from verity.chain.events import DecodedEvent

GAME = "0x" + "6a" * 20
NODE_A, NODE_B = "0x" + "aa" * 20, "0x" + "bb" * 20


class FakeChain:
    def __init__(self, genesis: str = "0x" + "11" * 32, chain_id: int = 31337, start_block: int = 1):
        self.genesis, self.chain_id, self.start_block = genesis, chain_id, start_block
        self.blocks: dict[int, tuple[str, list[DecodedEvent]]] = {0: (genesis, [])}
        self.event_reads: list[tuple[int, int]] = []

    def identity(self) -> dict:
        return {"chain_id": self.chain_id, "genesis_hash": self.genesis, "contracts": {"DisputeGame": GAME}}

    def mine(self, *events: tuple, fork: str = "") -> int:
        """A new block holding `events` given as (contract, name, args) or (contract, name, args, tx)."""
        n = self.head() + 1
        evs = [DecodedEvent(e[0], e[1], dict(e[2]), n, i, e[3] if len(e) > 3 else f"0x{n:04x}{i:04x}")
               for i, e in enumerate(events)]
        self.blocks[n] = (f"0x{fork}{n:060x}", evs)
        return n

    def drop_from(self, n: int) -> None:
        for b in [b for b in self.blocks if b >= n]:
            del self.blocks[b]

    def head(self) -> int:
        return max(self.blocks)

    def block_hash(self, number: int) -> str:
        return self.blocks[number][0]

    def events(self, start: int, end: int) -> list[DecodedEvent]:
        self.event_reads.append((start, end))
        return [ev for b in range(start, end + 1) if b in self.blocks for ev in self.blocks[b][1]]
