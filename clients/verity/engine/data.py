"""Dataset shards: a safetensors file with two tensors and one metadata record.

Format `verity-shard` version 1 (docs/engine.md):
- tensor `x`: (samples, *x_shape), float32 or int64;
- tensor `y`: (samples, *y_shape), int64 (class ids, or next-token ids for lm);
- `__metadata__`: {"format": "verity-shard", "verity": JSON of `ShardMeta`}.
`load_shard` checks all of it against the manifest's `DataSpec` and never
writes anything; `shard_bytes` is the only writer.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from verity.errors import ShardInvalid
from verity.engine.manifest import DataSpec
from verity.engine.tensorfile import MAX_HEADER_BYTES, read_safetensors, safetensors_bytes

SHARD_FORMAT = "verity-shard"
SHARD_VERSION = 1
MAX_SHARD_BYTES = 512 * 1024 * 1024
MAX_SHARD_ELEMENTS = 128 * 1024 * 1024
SHARD_HEADER_BYTES = 16 * 1024  # tensor entries and ShardMeta, vocabulary aside
_TORCH = {"float32": torch.float32, "int64": torch.int64}


class ShardMeta(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
    version: Literal[1] = SHARD_VERSION
    task: Literal["classification", "lm"]
    samples: int = Field(ge=1)
    x_dtype: Literal["float32", "int64"]
    x_shape: list[int]
    y_dtype: Literal["int64"] = "int64"
    y_shape: list[int] = Field(default_factory=list)
    num_classes: int | None = None
    vocab: str | None = None  # lm: the characters, token id = position
    source: str = Field(default="", max_length=256)
    vocab_size: int | None = None        # lm with a tokenizer (no `vocab`): its vocabulary size
    tokenizer_sha256: str | None = None  # lm with a tokenizer: its tokenizer.json's sha256

    def spec(self) -> DataSpec:
        """The manifest `data` section this shard satisfies."""
        return DataSpec(task=self.task, x_shape=self.x_shape, x_dtype=self.x_dtype, y_shape=self.y_shape,
                        num_classes=self.num_classes, vocab_size=len(self.vocab) if self.vocab else self.vocab_size,
                        tokenizer_sha256=self.tokenizer_sha256)


@dataclass(frozen=True)
class Shard:
    x: torch.Tensor
    y: torch.Tensor
    meta: ShardMeta

    def __len__(self) -> int:
        return self.meta.samples


def shard_bytes(x: torch.Tensor, y: torch.Tensor, meta: ShardMeta) -> bytes:
    return safetensors_bytes({"x": x.contiguous(), "y": y.contiguous()},
                             {"format": SHARD_FORMAT, "verity": meta.model_dump_json(exclude=_unset_tokenizer(meta))})


def _unset_tokenizer(meta: ShardMeta) -> set[str]:
    """The tokenizer fields are written only when set: a character or classification shard keeps the bytes (and the
    CID) it had before they existed."""
    return {k for k in ("vocab_size", "tokenizer_sha256") if getattr(meta, k) is None}


def shard_cap(spec: DataSpec, samples: int) -> int:
    """The most bytes a valid shard of `samples` samples under `spec` can take: its tensor
    data exactly, plus the largest header the reader accepts. Downloads use it as their cap,
    so an oversized object is refused before a byte of it is fetched."""
    x_item = _TORCH[spec.x_dtype].itemsize
    per_sample = math.prod(spec.x_shape) * x_item + math.prod(spec.y_shape) * _TORCH[spec.y_dtype].itemsize
    header = SHARD_HEADER_BYTES + 12 * (spec.vocab_size or 0)  # a vocabulary symbol is at most 12 JSON bytes
    return min(MAX_SHARD_BYTES, samples * per_sample + 8 + min(header, MAX_HEADER_BYTES))


def load_shard(data: bytes, spec: DataSpec, *, samples: int | None = None, source: str = "<bytes>",
               max_bytes: int = MAX_SHARD_BYTES, max_elements: int = MAX_SHARD_ELEMENTS) -> Shard:
    """Validate shard bytes against the manifest's data spec (and the sample
    count the manifest lists for it) and return the tensors."""
    tensors, md = read_safetensors(data, source, ShardInvalid, max_bytes=max_bytes,
                                   max_elements=max_elements, dtypes={"F32", "I64"})
    if md.get("format") != SHARD_FORMAT:
        raise ShardInvalid(source, f"metadata format is {md.get('format')!r}, expected {SHARD_FORMAT!r}")
    try:
        meta = ShardMeta.model_validate_json(md.get("verity", ""))
    except ValidationError as e:
        err = e.errors()[0]
        raise ShardInvalid(source, f"metadata field {'.'.join(map(str, err['loc']))}: {err['msg']}") from None
    if set(tensors) != {"x", "y"}:
        raise ShardInvalid(source, f"expected tensors x and y, found {sorted(tensors)}")
    x, y = tensors["x"], tensors["y"]
    n = meta.samples
    if samples is not None and n != samples:
        raise ShardInvalid(source, f"holds {n} samples, the manifest says {samples}")
    for name, t, dt, shape in (("x", x, spec.x_dtype, spec.x_shape), ("y", y, spec.y_dtype, spec.y_shape)):
        if t.dtype != _TORCH[dt]:
            raise ShardInvalid(source, f"tensor {name} has dtype {t.dtype}, the manifest says {dt}")
        if list(t.shape) != [n, *shape]:
            raise ShardInvalid(source, f"tensor {name} has shape {list(t.shape)}, expected {[n, *shape]}")
    if meta.task != spec.task:
        raise ShardInvalid(source, f"task is {meta.task}, the manifest says {spec.task}")
    if x.is_floating_point() and not torch.isfinite(x).all():
        raise ShardInvalid(source, "tensor x contains NaN or inf")
    hi = spec.num_classes if spec.task == "classification" else spec.vocab_size
    for name, t in (("y", y), ("x", x)) if spec.task == "lm" else (("y", y),):
        if t.numel() and (int(t.min()) < 0 or int(t.max()) >= hi):
            raise ShardInvalid(source, f"tensor {name} has ids outside [0, {hi})")
    if spec.task == "lm" and spec.tokenizer_sha256 is not None:
        if meta.tokenizer_sha256 != spec.tokenizer_sha256 or meta.vocab_size != spec.vocab_size or meta.vocab:
            raise ShardInvalid(source, f"tokenized with {meta.tokenizer_sha256 or 'characters'} ({meta.vocab_size} "
                                       f"tokens), the manifest says {spec.tokenizer_sha256} ({spec.vocab_size})")
    elif spec.task == "lm" and (meta.vocab is None or len(meta.vocab) != spec.vocab_size):
        raise ShardInvalid(source, f"vocabulary of {len(meta.vocab or '')} symbols, the manifest says {spec.vocab_size}")
    return Shard(x=x, y=y, meta=meta)
