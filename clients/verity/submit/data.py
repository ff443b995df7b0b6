"""The shards of a job, built in memory from `--dataset`: the bundled digits, an (x, y)
array pair, a text corpus, or a directory written by `verity data shard` (read as-is).

Nothing is uploaded here; every problem is a `BadJobSpec` naming the option.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from verity.engine import datasets
from verity.engine.data import MAX_SHARD_BYTES, MAX_SHARD_ELEMENTS, ShardMeta, load_shard
from verity.engine.tensorfile import read_safetensors
from verity.errors import ShardInvalid, VerityError
from verity.submit.options import SHARDS, BadJobSpec

INDEX = "index.json"


@dataclass
class JobData:
    shards: list[bytes]          # shard-000, shard-001, … in order
    eval: bytes | None
    metas: list[ShardMeta]       # one per shard, then the eval shard's
    source: str                  # a name for the manifest

    @property
    def eval_meta(self) -> ShardMeta | None:
        return self.metas[-1] if self.eval is not None else None


def shard_meta(name: str, data: bytes, *, check: bool = True) -> ShardMeta:
    """The metadata a shard carries; with `check`, the tensors are validated against it
    (`make_shards` did that already for the shards it built)."""
    header = read_safetensors(data, name, ShardInvalid, max_bytes=len(data), max_elements=MAX_SHARD_ELEMENTS * 4)[1]
    meta = ShardMeta.model_validate_json(header.get("verity", "{}"))
    if check:
        load_shard(data, meta.spec(), samples=meta.samples, source=name)
    return meta


def load_job_data(dataset: str, shards: int | None, *, model: str, eval_fraction: float, seed: int,
                  block: int) -> JobData:
    try:
        path = Path(dataset)
        if dataset != "digits" and (path.is_dir() or path.name == INDEX):
            return _from_shard_dir(path if path.is_dir() else path.parent, shards)
        return _build(dataset, shards or SHARDS, model=model, eval_fraction=eval_fraction, seed=seed, block=block)
    except BadJobSpec:
        raise
    except (VerityError, ValueError) as exc:  # ShardInvalid, pydantic's ValidationError
        raise BadJobSpec("dataset", _one_line(exc)) from None
    except OSError as exc:
        raise BadJobSpec("dataset", f"cannot read {exc.filename or dataset}: {exc.strerror}") from None


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split("\n")[:2]).strip() if not isinstance(exc, VerityError) else str(exc)


def _build(dataset: str, n_shards: int, *, model: str, eval_fraction: float, seed: int, block: int) -> JobData:
    vocab = None
    if dataset == "digits":
        x, y = datasets.digits(image=model == "cnn")
        task = "classification"
    else:
        path = Path(dataset)
        if not path.is_file():
            raise BadJobSpec("dataset", f"{dataset!r} is neither 'digits', a file nor a `verity data shard` directory")
        if path.suffix == ".txt":
            x, y, vocab = datasets.char_corpus(path.read_text(encoding="utf-8"), block)
            task = "lm"
        else:
            x, y = datasets.array_pair(path)
            task = "classification"
    if task == "classification" and len(y):
        low, high = int(y.min()), int(y.max())
        if low < 0:
            raise BadJobSpec("dataset", f"labels must be class ids 0, 1, …; found {low}")
        if high < 1:
            raise BadJobSpec("dataset", f"labels span {high + 1} class; a classifier needs at least 2")
    built = datasets.make_shards(x, y, task=task, n_shards=n_shards, eval_fraction=eval_fraction, seed=seed,
                                 vocab=vocab, source=Path(dataset).name)
    names = [f"shard-{i:03d}" for i in range(n_shards)] + (["eval"] if "eval" in built else [])
    metas = [shard_meta(n, built[n], check=False) for n in names]
    return JobData([built[n] for n in names[:n_shards]], built.get("eval"), metas, Path(dataset).name)


def _from_shard_dir(directory: Path, shards: int | None) -> JobData:
    index_path = directory / INDEX
    if not index_path.is_file():
        raise BadJobSpec("dataset", f"{directory} has no {INDEX} (write one with `verity data shard`)")
    try:
        index = json.loads(index_path.read_text(encoding="utf-8"))
        entries = list(index["shards"])
        files = [e["file"] for e in entries] + ([index["eval"]["file"]] if index.get("eval") else [])
    except (ValueError, KeyError, TypeError) as exc:
        raise BadJobSpec("dataset", f"{index_path} is not a `verity data shard` index ({exc})") from None
    if shards is not None and shards != len(entries):
        raise BadJobSpec("shards", f"{shards}, but {directory} holds {len(entries)} shards (omit --shards)")
    blobs, metas = [], []
    for entry, name in zip([*entries, index.get("eval")], files):
        file = directory / Path(name).name  # never outside the directory
        data = file.read_bytes()
        if len(data) > MAX_SHARD_BYTES:
            raise BadJobSpec("dataset", f"{file} holds {len(data)} bytes, over the shard cap {MAX_SHARD_BYTES}")
        if entry.get("sha256") and hashlib.sha256(data).hexdigest() != entry["sha256"]:
            raise BadJobSpec("dataset", f"{file} does not match the sha256 in {INDEX}")
        blobs.append(data)
        metas.append(shard_meta(file.name, data))
    specs = {m.spec().model_dump_json() for m in metas}
    if len(specs) != 1:
        raise BadJobSpec("dataset", f"the shards in {directory} disagree on shape, dtype or classes")
    n = len(entries)
    return JobData(blobs[:n], blobs[n] if len(blobs) > n else None, metas, directory.name)
