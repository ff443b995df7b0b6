"""Safe safetensors I/O shared by shards, checkpoints and weights files.

`read_safetensors` validates the header *before* any tensor is materialised:
the byte cap, pickle/zip sniffing (Verity never unpickles), header size,
allowed dtypes, shapes, offsets that tile the buffer exactly, and an element
cap. `write_safetensors` streams tensors straight to a file (no intermediate
bytes object) and is what the runner's background writer uses.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import BinaryIO, Callable

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load as _st_load

from verity.errors import VerityError

DTYPES = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64, "I32": torch.int32, "U8": torch.uint8}
CODES = {v: k for k, v in DTYPES.items()}
# Half-precision dtypes published weights come in: read only where a caller allows them (verity/hf/), never in
# shards or checkpoints.
HALF_DTYPES = {"F16": torch.float16, "BF16": torch.bfloat16}
_ITEMSIZE = {k: v.itemsize for k, v in {**DTYPES, **HALF_DTYPES}.items()}
MAX_HEADER_BYTES = 1 << 20


def _safetensors_shaped(data: bytes) -> bool:
    """An 8-byte little-endian header length that fits the buffer, then a JSON object."""
    if len(data) < 9:
        return False
    n = int.from_bytes(data[:8], "little")
    return 0 < n <= min(MAX_HEADER_BYTES, len(data) - 8) and data[8:9] == b"{"


def _sniff(data: bytes) -> str | None:
    """Name a known non-safetensors format, for a clearer refusal. Only consulted when
    the buffer is not safetensors-shaped: a valid header of 640, 896, 1,152 … bytes
    starts with `80 02`, `80 03` … — the bytes a pickle starts with."""
    if _safetensors_shaped(data):
        return None
    if data[:1] == b"\x80" and data[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return "pickle data refused (Verity never unpickles)"
    if data[:4] == b"PK\x03\x04":
        return "zip archive (torch.save / npz?) refused: only safetensors is accepted"
    return None


def _is_count(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _entry_error(info) -> str | None:
    """Why a header entry is malformed (types checked before any arithmetic), or None."""
    if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
        return "malformed header entry (needs exactly dtype, shape, data_offsets)"
    if not isinstance(info["dtype"], str):
        return f"dtype must be a string, not {type(info['dtype']).__name__}"
    shape, offsets = info["shape"], info["data_offsets"]
    if not isinstance(shape, list) or len(shape) > 8 or not all(_is_count(d) for d in shape):
        return f"bad shape {shape!r} (a list of at most 8 non-negative integers)"
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(_is_count(o) for o in offsets):
        return f"bad data_offsets {offsets!r} (a list of two non-negative integers)"
    if offsets[0] > offsets[1]:
        return f"data_offsets {offsets} run backwards"
    return None


def read_safetensors(
    data: bytes,
    source: str,
    error: Callable[[str, str], VerityError],
    *,
    max_bytes: int,
    max_elements: int,
    dtypes: set[str] = frozenset(DTYPES),
) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Tensors and `__metadata__` of a safetensors buffer, or `error(source, reason)`."""
    if len(data) > max_bytes:
        raise error(source, f"{len(data)} bytes exceed the cap of {max_bytes}")
    if (why := _sniff(data)) is not None:
        raise error(source, why)
    if len(data) < 8:
        raise error(source, "not a safetensors file (shorter than its 8-byte header length)")
    n = int.from_bytes(data[:8], "little")
    if n > min(MAX_HEADER_BYTES, len(data) - 8):
        raise error(source, f"not a safetensors file (header length {n} impossible for {len(data)} bytes)")
    try:
        header = json.loads(data[8:8 + n])
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise error(source, "not a safetensors file (header is not JSON)") from None
    if not isinstance(header, dict):
        raise error(source, "not a safetensors file (header is not an object)")
    meta = header.pop("__metadata__", None) or {}
    if not isinstance(meta, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
        raise error(source, "__metadata__ must map strings to strings")
    spans, elements = [], 0
    for name, info in header.items():
        if (why := _entry_error(info)) is not None:
            raise error(source, f"tensor {name!r}: {why}")
        dt, shape, (start, end) = info["dtype"], info["shape"], info["data_offsets"]
        if dt not in dtypes:
            raise error(source, f"tensor {name!r}: dtype {dt} not allowed (allowed: {sorted(dtypes)})")
        count = math.prod(shape)
        elements += count
        if elements > max_elements:
            raise error(source, f"more than {max_elements} elements in total (tensor {name!r} has {count})")
        if end - start != count * _ITEMSIZE[dt]:
            raise error(source, f"tensor {name!r}: offsets {start}..{end} do not match shape {shape} {dt}")
        spans.append((start, end))
    spans.sort()
    pos = 0
    for start, end in spans:
        if start != pos:
            raise error(source, "tensor data offsets overlap or leave gaps")
        pos = end
    if pos != len(data) - 8 - n:
        raise error(source, f"tensor data is {len(data) - 8 - n} bytes, header describes {pos}")
    try:
        tensors = _st_load(data)
    except SafetensorError as e:
        raise error(source, f"safetensors refused the file: {e}") from None
    return tensors, meta


def tensor_bytes(t: torch.Tensor) -> memoryview:
    """The little-endian C-order bytes of a CPU tensor, without a copy."""
    t = t.detach()
    if t.device.type != "cpu" or not t.is_contiguous():
        t = t.to("cpu").contiguous()
    arr = t.numpy()
    if arr.dtype.byteorder == ">":  # pragma: no cover - no big-endian hosts in sight
        arr = arr.byteswap().view(arr.dtype.newbyteorder("<"))
    return memoryview(np.ascontiguousarray(arr)).cast("B")


def write_safetensors(f: BinaryIO, tensors: dict[str, torch.Tensor], metadata: dict[str, str]) -> None:
    """Write a safetensors file to an open binary file, tensors in name order."""
    header: dict[str, object] = {"__metadata__": metadata}
    offset = 0
    names = sorted(tensors)
    for name in names:
        t = tensors[name]
        size = t.numel() * t.element_size()
        header[name] = {"dtype": CODES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # data starts 8-byte aligned, as the reference writer does
    f.write(len(raw).to_bytes(8, "little"))
    f.write(raw)
    for name in names:
        f.write(tensor_bytes(tensors[name]))


def safetensors_bytes(tensors: dict[str, torch.Tensor], metadata: dict[str, str]) -> bytes:
    import io
    buf = io.BytesIO()
    write_safetensors(buf, tensors, metadata)
    return buf.getvalue()


def atomic_write(path: Path, write: Callable[[BinaryIO], None]) -> None:
    """tmp file + fsync + rename + fsync(dir): after a crash `path` is either
    absent or complete, never torn."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
