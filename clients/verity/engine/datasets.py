"""Turn local data into shards: sklearn digits, an (x, y) array pair, or a
character-level text corpus. Everything is built and validated in memory;
`write_shards` writes only once every shard passed `load_shard`.
"""
from __future__ import annotations

import json
import hashlib
from pathlib import Path

import numpy as np
import torch

from verity.errors import ShardInvalid
from verity.engine.data import MAX_SHARD_BYTES, MAX_SHARD_ELEMENTS, ShardMeta, load_shard, shard_bytes
from verity.engine.tensorfile import atomic_write, read_safetensors

try:  # the storage layer computes CIDv0s locally; optional for the engine
    from verity.storage import cid_of_bytes as _cid_of_bytes
except ImportError:  # pragma: no cover
    _cid_of_bytes = None


def digits(image: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """sklearn's bundled 8x8 handwritten digits (no download), x scaled to [0, 1]."""
    from sklearn.datasets import load_digits
    d = load_digits()
    x = torch.tensor(d.data, dtype=torch.float32) / 16.0
    return (x.view(-1, 1, 8, 8) if image else x), torch.tensor(d.target, dtype=torch.int64)


def array_pair(path: Path) -> tuple[torch.Tensor, torch.Tensor]:
    """x and y from a `.npz` (loaded with allow_pickle=False) or a safetensors file."""
    src = str(path)
    data = path.read_bytes()
    if len(data) > MAX_SHARD_BYTES * 4:
        raise ShardInvalid(src, f"{len(data)} bytes exceed the input cap")
    if path.suffix == ".npz":
        import io
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
        except ValueError as e:  # object arrays need pickle: refused
            raise ShardInvalid(src, f"refused: {e}") from None
        except Exception as e:
            raise ShardInvalid(src, f"not a readable .npz: {e}") from None
        tensors = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in arrays.items()}
    else:
        tensors, _ = read_safetensors(data, src, ShardInvalid, max_bytes=MAX_SHARD_BYTES * 4,
                                      max_elements=MAX_SHARD_ELEMENTS * 4)
    if set(tensors) != {"x", "y"}:
        raise ShardInvalid(src, f"expected arrays x and y, found {sorted(tensors)}")
    x, y = tensors["x"], tensors["y"]
    if x.dtype == torch.bool or x.is_complex():
        raise ShardInvalid(src, f"x must hold numbers, found {x.dtype}")
    x = x.to(torch.float32)  # features (uint8 pixels, float64, …) are float32 in a classification shard
    if y.is_floating_point() or y.dtype == torch.bool:
        raise ShardInvalid(src, f"y must hold integer class ids, found {y.dtype}")
    return x, y.to(torch.int64)


def char_corpus(text: str, block: int, stride: int | None = None) -> tuple[torch.Tensor, torch.Tensor, str]:
    """Character-level windows: x = text[i:i+block], y = text[i+1:i+block+1]."""
    vocab = "".join(sorted(set(text)))
    ids = torch.tensor([vocab.index(c) for c in text], dtype=torch.int64)
    starts = range(0, len(ids) - block, stride or block)
    if len(starts) == 0:
        raise ShardInvalid("<text>", f"{len(ids)} characters are too few for windows of {block}")
    x = torch.stack([ids[i:i + block] for i in starts])
    y = torch.stack([ids[i + 1:i + block + 1] for i in starts])
    return x, y, vocab


def make_shards(x: torch.Tensor, y: torch.Tensor, *, task: str, n_shards: int, eval_fraction: float = 0.0,
                seed: int = 0, vocab: str | None = None, num_classes: int | None = None,
                source: str = "", vocab_size: int | None = None, tokenizer_sha256: str | None = None) -> dict[str, bytes]:
    """Shuffle with an explicit generator, cut an eval shard, split the rest
    into `n_shards` near-equal shards. Every shard is validated before return."""
    if len(x) != len(y):
        raise ShardInvalid(source, f"x has {len(x)} samples, y has {len(y)}")
    if x.is_floating_point() and not torch.isfinite(x).all():
        raise ShardInvalid(source, "x contains NaN or inf")
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed))
    x, y = x[perm], y[perm]
    n_eval = int(round(len(x) * eval_fraction))
    if len(x) - n_eval < n_shards:
        raise ShardInvalid(source, f"{len(x) - n_eval} training samples cannot fill {n_shards} shards")
    if task == "classification":
        num_classes = num_classes or int(y.max()) + 1
    else:
        num_classes = None
    parts = {"eval": (x[:n_eval], y[:n_eval])} if n_eval else {}
    for i, idx in enumerate(torch.arange(n_eval, len(x)).tensor_split(n_shards)):
        parts[f"shard-{i:03d}"] = (x[idx], y[idx])
    out = {}
    for name, (px, py) in parts.items():
        meta = ShardMeta(task=task, samples=len(px), x_dtype=str(px.dtype).removeprefix("torch."),
                         x_shape=list(px.shape[1:]), y_shape=list(py.shape[1:]),
                         num_classes=num_classes, vocab=vocab, source=f"{source} {name}"[:256],
                         vocab_size=None if vocab else vocab_size, tokenizer_sha256=tokenizer_sha256)
        data = shard_bytes(px, py, meta)
        load_shard(data, meta.spec(), samples=len(px), source=name)  # refuse to emit what we would reject
        out[name] = data
    return out


def write_shards(out_dir: Path, shards: dict[str, bytes]) -> dict:
    """Write `<name>.safetensors` files and an `index.json` (names, samples,
    sha256, and the manifest `data` section). Refuses a non-empty directory."""
    if out_dir.exists() and any(out_dir.iterdir()):
        raise ShardInvalid(str(out_dir), "output directory is not empty")
    out_dir.mkdir(parents=True, exist_ok=True)
    index: dict = {"shards": [], "eval": None, "data": None}
    for name, data in shards.items():
        meta = ShardMeta.model_validate_json(read_safetensors(data, name, ShardInvalid, max_bytes=len(data),
                                                              max_elements=MAX_SHARD_ELEMENTS * 4)[1]["verity"])
        atomic_write(out_dir / f"{name}.safetensors", lambda f, d=data: f.write(d))
        entry = {"file": f"{name}.safetensors", "samples": meta.samples, "sha256": hashlib.sha256(data).hexdigest()}
        if _cid_of_bytes is not None:
            entry["cid"] = _cid_of_bytes(data)  # what `ipfs add` will answer: paste into the manifest
        if name == "eval":
            index["eval"] = entry
        else:
            index["shards"].append(entry)
        index["data"] = meta.spec().model_dump(mode="json", exclude_none=True)
    atomic_write(out_dir / "index.json", lambda f: f.write(json.dumps(index, indent=1).encode()))
    return index
