"""Typed reads of on-chain structs: web3 returns tuples, these name the fields."""
from __future__ import annotations

from enum import IntEnum
from types import SimpleNamespace


class JobStatus(IntEnum):
    NONE, ACTIVE, COMPLETED, CANCELLED = range(4)


class TaskKind(IntEnum):
    NONE, TRAIN, AGGREGATE = range(3)


class TaskStatus(IntEnum):
    NONE, OPEN, ASSIGNED, REVEALED, CONTESTED, ACCEPTED, CANCELLED = range(7)


class ReplicaStatus(IntEnum):
    NONE, ASSIGNED, COMMITTED, REVEALED, ACCEPTED, SLASHED, LATE, VOIDED = range(8)


class DisputePhase(IntEnum):
    NONE, BISECT0, STEP_ROOTS, BISECT1, AWAITING_PANEL, VOTING, RESOLVED = range(7)


class DisputeOutcome(IntEnum):
    NONE, CHALLENGER_WINS, DEFENDER_WINS, BOTH_LOSE, VOIDED = range(5)


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
