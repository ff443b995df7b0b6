"""Event arguments as JSON that decodes back to what web3 gave: bytes tagged (`{"$bytes": "0x…"}`), ints exact at
any size (JSON numbers, never floats), addresses as their checksum strings, arrays as lists."""
from __future__ import annotations

import json
from typing import Any

BYTES_TAG = "$bytes"


def _plain(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return {BYTES_TAG: "0x" + bytes(value).hex()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    raise TypeError(f"an event argument of type {type(value).__name__} has no JSON form here: {value!r}")


def _tagged(obj: dict) -> Any:
    if len(obj) == 1 and BYTES_TAG in obj:
        return bytes.fromhex(obj[BYTES_TAG][2:])
    return obj


def dump_args(args: dict) -> str:
    return json.dumps(_plain(dict(args)), separators=(",", ":"))


def load_args(text: str) -> dict:
    return json.loads(text, object_hook=_tagged)


def address_values(args: dict) -> set[str]:
    """Every address-valued argument (arrays of addresses too), lowercase: what `event_addresses` holds."""
    out: set[str] = set()
    for value in args.values():
        for v in (value if isinstance(value, (list, tuple)) else (value,)):
            if isinstance(v, str) and len(v) == 42 and v[:2] in ("0x", "0X"):
                try:
                    int(v[2:], 16)
                except ValueError:
                    continue
                out.add(v.lower())
    return out
