"""The shards of a job, built in memory from `--dataset`: the bundled digits, an (x, y)
array pair, a table (CSV, TSV, Parquet), a text corpus (.txt, .jsonl), an image folder (submit/formats.py),
or a directory written by `verity data shard` (read as-is).

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
    tokenizer: bytes | None = None  # tokenizer.json of a tokenized text job (its sha256 is in every shard's meta)

    @property
    def eval_meta(self) -> ShardMeta | None:
        return self.metas[-1] if self.eval is not None else None


@dataclass(frozen=True)
class Reading:
    """How a source file is read (submit/formats.py); the defaults read what `--dataset` always read."""
    model: str = "mlp"
    block: int = 32
    stride: int | None = None
    image: bool = False          # digits as (1, 8, 8) images
    features: str = ""           # tables: comma-separated feature columns ('' = every column but the label)
    label: str = ""              # tables: the label column ('' = the last)
    text_field: str = "text"     # .jsonl
    image_size: int = 32         # image folders
    tokenizer: str = "char"      # text: char | bpe | a tokenizer.json path
    vocab_size: int = 512        # --tokenizer bpe


@dataclass
class Source:
    x: object
    y: object
    task: str
    vocab: str | None = None
    tokens: object = None        # formats.Tokens of a tokenized text


def read_source(dataset: str, r: Reading) -> Source:
    """(x, y) of `dataset` by its kind: digits, .npz/.safetensors, .csv/.tsv/.parquet, .txt/.jsonl, an image
    folder (one sub-directory per class)."""
    from verity.submit import formats

    if dataset == "digits":
        x, y = datasets.digits(image=r.image or r.model in ("cnn", "resnet"))
        return Source(x, y, "classification")
    path = Path(dataset)
    if path.is_dir():
        got = formats.read_image_folder(path, r.image_size)
        return Source(got.x, got.y, "classification")
    if not path.is_file():
        raise BadJobSpec("dataset", f"{dataset!r} is neither 'digits', a file, an image folder nor a "
                                    "`verity data shard` directory")
    suffix = path.suffix.lower()
    if suffix in (".txt", ".jsonl"):
        text = formats.text_of(path, r.text_field)
        tok = formats.tokenizer_bytes(r.tokenizer, text, r.vocab_size)
        if tok is None:
            x, y, vocab = datasets.char_corpus(text, r.block, r.stride)
            return Source(x, y, "lm", vocab=vocab)
        tokens = formats.tokenize(text, r.block, tok, r.stride)
        return Source(tokens.x, tokens.y, "lm", tokens=tokens)
    if suffix in formats.TABLE_SUFFIXES:
        features = [c.strip() for c in r.features.split(",") if c.strip()] or None
        got = formats.read_table(path, features, r.label or None)
        return Source(got.x, got.y, "classification")
    x, y = datasets.array_pair(path)
    return Source(x, y, "classification")


def build_shards(src: Source, n_shards: int, *, eval_fraction: float, seed: int, source: str) -> dict[str, bytes]:
    """`make_shards` of a read source, its tokenizer recorded in every shard's metadata."""
    t = src.tokens
    return datasets.make_shards(src.x, src.y, task=src.task, n_shards=n_shards, eval_fraction=eval_fraction,
                                seed=seed, vocab=src.vocab, source=source,
                                vocab_size=t.vocab_size if t is not None else None,
                                tokenizer_sha256=t.sha256 if t is not None else None)


def shard_meta(name: str, data: bytes, *, check: bool = True) -> ShardMeta:
    """The metadata a shard carries; with `check`, the tensors are validated against it
    (`make_shards` did that already for the shards it built)."""
    header = read_safetensors(data, name, ShardInvalid, max_bytes=len(data), max_elements=MAX_SHARD_ELEMENTS * 4)[1]
    meta = ShardMeta.model_validate_json(header.get("verity", "{}"))
    if check:
        load_shard(data, meta.spec(), samples=meta.samples, source=name)
    return meta


def load_job_data(dataset: str, shards: int | None, *, eval_fraction: float, seed: int, reading: Reading) -> JobData:
    try:
        path = Path(dataset)
        if dataset != "digits" and ((path / INDEX).is_file() or path.name == INDEX):
            return _from_shard_dir(path if path.is_dir() else path.parent, shards)
        return _build(dataset, shards or SHARDS, eval_fraction=eval_fraction, seed=seed, reading=reading)
    except BadJobSpec:
        raise
    except (VerityError, ValueError) as exc:  # ShardInvalid, pydantic's ValidationError
        raise BadJobSpec(_option_for(exc), one_line(exc)) from None
    except OSError as exc:
        raise BadJobSpec("dataset", f"cannot read {exc.filename or dataset}: {exc.strerror}") from None


def _option_for(exc: Exception) -> str:
    """The option a reading error is about: the tokenizer's own (`--tokenizer`, `--vocab-size`), else --dataset."""
    where = getattr(exc, "source", "") or ""
    return {"--tokenizer": "tokenizer", "--vocab-size": "vocab_size"}.get(where, "dataset")


def one_line(exc: Exception) -> str:
    if isinstance(exc, ShardInvalid):  # an input file (its row, line or path named) or a tokenizer option
        return exc.reason if exc.source.startswith("--") else f"{exc.source}: {exc.reason}"
    return " ".join(str(exc).split("\n")[:2]).strip() if not isinstance(exc, VerityError) else str(exc)


def _build(dataset: str, n_shards: int, *, eval_fraction: float, seed: int, reading: Reading) -> JobData:
    src = read_source(dataset, reading)
    if src.task == "classification" and len(src.y):
        low, high = int(src.y.min()), int(src.y.max())
        if low < 0:
            raise BadJobSpec("dataset", f"labels must be class ids 0, 1, …; found {low}")
        if high < 1:
            raise BadJobSpec("dataset", f"labels span {high + 1} class; a classifier needs at least 2")
    name = Path(dataset).name
    built = build_shards(src, n_shards, eval_fraction=eval_fraction, seed=seed, source=name)
    names = [f"shard-{i:03d}" for i in range(n_shards)] + (["eval"] if "eval" in built else [])
    metas = [shard_meta(n, built[n], check=False) for n in names]
    tokenizer = src.tokens.tokenizer if src.tokens is not None else None
    return JobData([built[n] for n in names[:n_shards]], built.get("eval"), metas, name, tokenizer)


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
    return JobData(blobs[:n], blobs[n] if len(blobs) > n else None, metas, directory.name,
                   _shard_dir_tokenizer(directory, metas[0]))


def _shard_dir_tokenizer(directory: Path, meta: ShardMeta) -> bytes | None:
    """The tokenizer.json `verity data shard` wrote beside tokenized shards, checked against their sha256."""
    if meta.tokenizer_sha256 is None:
        return None
    path = directory / "tokenizer.json"
    if not path.is_file():
        raise BadJobSpec("dataset", f"the shards in {directory} were tokenized, but it holds no tokenizer.json")
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != meta.tokenizer_sha256:
        raise BadJobSpec("dataset", f"{path} is not the tokenizer the shards name (sha256 {meta.tokenizer_sha256})")
    return data
