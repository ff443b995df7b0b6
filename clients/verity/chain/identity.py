"""Which chain a client talks to: chain id + genesis block hash.

A devnet restarted without its saved state keeps chain id 31337 but gets a new
genesis block (anvil stamps it with its start time), so the pair tells a
restarted chain from the old one. `verity devnet up` records it in the devnet's
`services.json` (`record["chain"]`); a client that stored it compares with
`same_chain(stored, chain_identity(w3))` before trusting its cursor or snapshot.
"""
from __future__ import annotations

from typing import Any


def _hex(value: Any) -> str:
    """A block hash as lowercase 0x-hex, whether web3 gave HexBytes/bytes or the RPC a string."""
    if isinstance(value, str):
        return value.lower() if value.startswith("0x") else "0x" + value.lower()
    return "0x" + bytes(value).hex()


def chain_identity(w3: Any) -> dict[str, Any]:
    """`{"chain_id": int, "genesis_hash": "0x…"}` of the chain a web3.py `Web3` is connected to."""
    genesis = w3.eth.get_block(0)
    return {"chain_id": int(w3.eth.chain_id), "genesis_hash": _hex(genesis["hash"])}


def identity_at(rpc_url: str, timeout: float = 5.0) -> dict[str, Any]:
    """`chain_identity` over plain JSON-RPC (no web3 import), for the devnet manager."""
    from verity.devnet.ticker import rpc_call

    chain_id = int(rpc_call(rpc_url, "eth_chainId", timeout=timeout), 16)
    genesis = rpc_call(rpc_url, "eth_getBlockByNumber", ["0x0", False], timeout=timeout)
    return {"chain_id": chain_id, "genesis_hash": _hex(genesis["hash"])}


def same_chain(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    """True when both identities name the same chain (same id and genesis block)."""
    return bool(a and b) and int(a["chain_id"]) == int(b["chain_id"]) and (
        _hex(a["genesis_hash"]) == _hex(b["genesis_hash"]))
