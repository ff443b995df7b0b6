"""Typed reads of on-chain structs: web3 returns tuples, these name the fields."""
from __future__ import annotations

from types import SimpleNamespace

# The enums live in verity.chain.protocol (the one mirror of VerityTypes.sol); re-exported for old imports.
from verity.chain.protocol import (  # noqa: F401
    DisputeOutcome, DisputePhase, JobStatus, PanelPhase, ReplicaStatus, TaskKind, TaskStatus, Verdict,
)


def _name(value, abi_item: dict):
    comps = abi_item.get("components")
    if comps is None:
        return value
    kind = abi_item["type"]
    if kind.endswith("]"):  # array of structs
        inner = dict(abi_item, type=kind[: kind.rindex("[")])
        return [_name(v, inner) for v in value]
    return SimpleNamespace(**{c["name"]: _name(v, c) for c, v in zip(comps, value)})


def read(client, contract, fn_name: str, *args):
    """Call a view and return structs as attribute namespaces (`task.status`, …)."""
    fn = getattr(contract.functions, fn_name)(*args)
    value = client.call(fn)
    outputs = fn.abi["outputs"]
    if len(outputs) == 1:
        return _name(value, outputs[0])
    return tuple(_name(v, o) for v, o in zip(value, outputs))


def checked_in_nodes(client) -> int:
    """Registered nodes that have checked in (a heartbeat or accepted work) since they registered: the ones draws can
    pick. Registering alone is not a check-in (NodeRegistry._offline). One call per node: for tests and the lab."""
    count = client.call(client.registry.functions.nodeCount())
    nodes = (client.call(client.registry.functions.nodeList(i)) for i in range(count))
    return sum(1 for node in nodes if read(client, client.registry, "getNode", node).lastSeen != 0)
