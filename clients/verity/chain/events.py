"""Event reading: past logs in bounded block ranges, then polling from a cursor."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from web3 import Web3
from web3._utils.events import get_event_data
from eth_utils import event_abi_to_log_topic

MAX_RANGE = 2_000  # blocks per eth_getLogs request


@dataclass
class DecodedEvent:
    contract: str
    name: str
    args: dict
    block: int
    log_index: int
    tx_hash: str
    id: int | None = field(default=None, compare=False, repr=False)  # the row id in the index (verity.index), if from it

    @property
    def key(self) -> tuple[int, int]:
        return (self.block, self.log_index)


@dataclass
class EventCursor:
    """Reads every event of a set of contracts from `next_block` on.

    `poll()` returns the events of blocks [next_block, head] in chain order,
    asking for at most MAX_RANGE blocks per request, and advances the cursor.
    The caller persists `next_block` only after it has handled the events, so a
    crash re-reads (handlers must be idempotent) instead of skipping.
    """

    w3: Web3
    contracts: dict  # name -> web3 contract
    next_block: int = 0
    _topics: dict = field(default_factory=dict, init=False)

    def __post_init__(self):
        for name, contract in self.contracts.items():
            for item in contract.abi:
                if item.get("type") == "event":
                    self._topics[(contract.address.lower(), event_abi_to_log_topic(item))] = (name, item)

    def poll(self, head: int | None = None) -> list[DecodedEvent]:
        head = self.w3.eth.block_number if head is None else head
        out: list[DecodedEvent] = []
        addresses = [c.address for c in self.contracts.values()]
        start = self.next_block
        while start <= head:
            end = min(start + MAX_RANGE - 1, head)
            logs = self.w3.eth.get_logs({"fromBlock": start, "toBlock": end, "address": addresses})
            out.extend(self._decode(logs))
            start = end + 1
        self.next_block = head + 1
        out.sort(key=lambda e: e.key)
        return out

    def _decode(self, logs: Iterable) -> Iterable[DecodedEvent]:
        for log in logs:
            if not log["topics"]:
                continue
            entry = self._topics.get((log["address"].lower(), bytes(log["topics"][0])))
            if entry is None:
                continue
            name, abi = entry
            data = get_event_data(self.w3.codec, abi, log)
            yield DecodedEvent(name, data["event"], dict(data["args"]), int(log["blockNumber"]), int(log["logIndex"]), log["transactionHash"].hex())
