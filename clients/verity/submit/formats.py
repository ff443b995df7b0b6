"""Data people have, read on the submitter's machine into (x, y) tensors (issue 24, item 4).

- **tables**: CSV, TSV (`.csv`, `.tsv`) and Parquet (`.parquet`): feature columns and a label column by name
  (`--features a,b,c`, default every column but the label; `--label y`, default the last column). Features must be
  numbers; labels are class ids 0, 1, … or names (sorted, then numbered). A bad cell names its row and column.
- **JSON lines** (`.jsonl`): one object per line, its text in `--text-field` (default `text`); the texts, joined by
  newlines, are a language-modelling corpus like a `.txt`. A bad line names its number.
- **image folders**: a directory with one sub-directory per class (sorted names are the class ids), PNG or JPEG
  files decoded with Pillow and resized to `--image-size` (square, bilinear, RGB or grayscale by the first image).
  A file Pillow cannot decode names its path.
- **text** (`.txt`, `.jsonl`): characters (`--tokenizer char`, the default: token id = position in the sorted
  characters) or the `tokenizers` library: `--tokenizer bpe` trains a byte-level BPE of `--vocab-size` on the corpus
  (deterministic: same corpus, same merges), or `--tokenizer PATH` loads a `tokenizer.json`. The tokenizer file's
  sha256 goes into the manifest (`data.tokenizer_sha256`), the file beside the shards.

Every reader is bounded (MAX_INPUT_BYTES, MAX_ROWS, MAX_IMAGES) and never executes anything from the input.
"""
from __future__ import annotations

import csv
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import torch

from verity.errors import ShardInvalid

MAX_INPUT_BYTES = 2 << 30      # a table, corpus or image folder read whole on the submitter's machine
MAX_ROWS = 10_000_000
MAX_IMAGES = 1_000_000
MAX_IMAGE_SIDE = 512
MAX_SOURCE_PIXELS = 40_000_000  # an input image larger than this is refused from its header, before it is decoded
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
TABLE_SUFFIXES = (".csv", ".tsv", ".parquet")
BPE_SPECIAL = "<|endoftext|>"


@dataclass
class Labelled:
    x: torch.Tensor      # float32 [N, ...]
    y: torch.Tensor      # int64 [N]
    classes: list[str]   # class names in id order


def _check_size(path: Path) -> None:
    size = path.stat().st_size
    if size > MAX_INPUT_BYTES:
        raise ShardInvalid(str(path), f"{size:,} bytes exceed the input cap of {MAX_INPUT_BYTES:,}")


def _labels(values: list[str], where) -> tuple[torch.Tensor, list[str]]:
    """Class ids from label cells: integers 0..k-1 kept, anything else numbered in sorted order."""
    if all(v.strip().isdigit() for v in values):
        ids = [int(v) for v in values]
        return torch.tensor(ids, dtype=torch.int64), [str(i) for i in range(max(ids) + 1)]
    for i, v in enumerate(values):
        if not v.strip():
            raise ShardInvalid(*where(i, "an empty label"))
    names = sorted(set(values))
    index = {n: i for i, n in enumerate(names)}
    return torch.tensor([index[v] for v in values], dtype=torch.int64), names


def read_table(path: Path, features: list[str] | None = None, label: str | None = None) -> Labelled:
    """Features and labels of a CSV, TSV or Parquet file, chosen by column name."""
    path = Path(path)
    _check_size(path)
    if path.suffix == ".parquet":
        header, rows = _parquet_rows(path)
    else:
        header, rows = _csv_rows(path, "\t" if path.suffix == ".tsv" else ",")
    label = label or header[-1]
    if label not in header:
        raise ShardInvalid(str(path), f"no label column {label!r} (columns: {', '.join(header)})")
    features = features or [c for c in header if c != label]
    missing = [c for c in features if c not in header]
    if missing or not features:
        raise ShardInvalid(str(path), f"no feature column {missing[0]!r}" if missing else "no feature columns")
    fi, li = [header.index(c) for c in features], header.index(label)
    first = 2 if path.suffix != ".parquet" else 1  # the row number a person sees (a CSV's header is line 1)

    def where(i, what):
        return str(path), f"row {first + i}: {what}"

    x = torch.empty((len(rows), len(fi)), dtype=torch.float32)
    for i, row in enumerate(rows):
        for j, col in enumerate(fi):
            cell = row[col]
            try:
                value = float(cell)
            except (TypeError, ValueError):
                raise ShardInvalid(*where(i, f"column {features[j]!r} holds {str(cell)[:40]!r}, not a number")) from None
            if value != value or value in (float("inf"), float("-inf")):
                raise ShardInvalid(*where(i, f"column {features[j]!r} is {cell!r}"))
            x[i, j] = value
    y, classes = _labels([str(row[li]) if row[li] is not None else "" for row in rows], where)
    return Labelled(x, y, classes)


def _csv_rows(path: Path, delimiter: str) -> tuple[list[str], list[list[str]]]:
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.reader(f, delimiter=delimiter)
        try:
            header = next(reader)
        except StopIteration:
            raise ShardInvalid(str(path), "empty file: no header row") from None
        rows = []
        while True:
            try:
                row = next(reader)
            except StopIteration:
                break
            except csv.Error as exc:  # a field over csv's size limit, a NUL byte, a broken quote
                raise ShardInvalid(str(path), f"row {reader.line_num}: {exc}") from None
            if not row:
                continue
            if len(row) != len(header):
                raise ShardInvalid(str(path), f"row {reader.line_num}: {len(row)} cells, the header has {len(header)}")
            rows.append(row)
            if len(rows) > MAX_ROWS:
                raise ShardInvalid(str(path), f"more than {MAX_ROWS:,} rows")
    if not rows:
        raise ShardInvalid(str(path), "no data rows")
    return header, rows


def _parquet_rows(path: Path) -> tuple[list[str], list[list]]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises many kinds for a bad file
        raise ShardInvalid(str(path), f"not a readable Parquet file: {str(exc).splitlines()[0]}") from None
    if table.num_rows > MAX_ROWS or table.num_rows == 0:
        raise ShardInvalid(str(path), f"{table.num_rows:,} rows (1..{MAX_ROWS:,})")
    header = list(table.column_names)
    columns = [table.column(c).to_pylist() for c in header]
    return header, [list(r) for r in zip(*columns)]


def read_jsonl_text(path: Path, field: str = "text") -> str:
    """The texts of a JSON-lines file (`field` of each object), joined by newlines."""
    path = Path(path)
    _check_size(path)
    texts = []
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as exc:
                raise ShardInvalid(str(path), f"line {n}: not JSON ({exc.msg})") from None
            if not isinstance(obj, dict) or not isinstance(obj.get(field), str):
                raise ShardInvalid(str(path), f"line {n}: no string field {field!r}")
            texts.append(obj[field])
    if not texts:
        raise ShardInvalid(str(path), "no lines with text")
    return "\n".join(texts)


def read_image_folder(directory: Path, size: int = 32) -> Labelled:
    """One class per sub-directory; every PNG or JPEG decoded and resized to size x size, values in [0, 1]."""
    from PIL import Image, UnidentifiedImageError

    directory = Path(directory)
    if not 1 <= size <= MAX_IMAGE_SIDE:
        raise ShardInvalid(str(directory), f"image size {size} is not in 1..{MAX_IMAGE_SIDE}")
    classes = sorted(d.name for d in directory.iterdir() if d.is_dir() and not d.name.startswith("."))
    if len(classes) < 2:
        raise ShardInvalid(str(directory), "an image folder needs at least 2 class sub-directories")
    files = [(f, c) for c, name in enumerate(classes) for f in sorted((directory / name).iterdir())
             if f.suffix.lower() in IMAGE_SUFFIXES]
    if not files or len(files) > MAX_IMAGES:
        raise ShardInvalid(str(directory), f"{len(files):,} PNG/JPEG images (1..{MAX_IMAGES:,})")
    mode, pixels, total = None, [], 0
    for f, _ in files:
        total += f.stat().st_size
        if total > MAX_INPUT_BYTES:
            raise ShardInvalid(str(directory), f"images exceed the input cap of {MAX_INPUT_BYTES:,} bytes")
        try:
            with Image.open(f) as im:
                if im.width * im.height > MAX_SOURCE_PIXELS:
                    raise ShardInvalid(str(f), f"{im.width}x{im.height} pixels, over {MAX_SOURCE_PIXELS:,}: "
                                               "resize it first")
                im.draft(None, (size, size))  # JPEG: decode near the target size
                mode = mode or ("L" if im.mode in ("L", "1", "I;16") else "RGB")
                im = im.convert(mode).resize((size, size), Image.Resampling.BILINEAR)
                pixels.append(torch.frombuffer(bytearray(im.tobytes()), dtype=torch.uint8))
        except ShardInvalid:
            raise
        except (UnidentifiedImageError, Image.DecompressionBombError, OSError, ValueError) as exc:
            raise ShardInvalid(str(f), f"not a readable image: {exc}") from None
    channels = 1 if mode == "L" else 3
    x = torch.stack(pixels).view(len(files), size, size, channels).permute(0, 3, 1, 2).float() / 255.0
    y = torch.tensor([c for _, c in files], dtype=torch.int64)
    return Labelled(x.contiguous(), y, classes)


@dataclass
class Tokens:
    x: torch.Tensor        # int64 [N, block]
    y: torch.Tensor        # int64 [N, block]: x shifted by one token
    vocab_size: int
    tokenizer: bytes       # tokenizer.json
    sha256: str            # of `tokenizer`


def train_bpe(text: str, vocab_size: int) -> bytes:
    """A byte-level BPE trained on `text` (the `tokenizers` library; the same text gives the same merges)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    if not 257 <= vocab_size <= 65536:
        raise ShardInvalid("--vocab-size", f"{vocab_size} is not in 257..65536 (256 bytes and at least one merge)")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[BPE_SPECIAL], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([text], trainer=trainer)
    return tok.to_str().encode()


def tokenize(text: str, block: int, tokenizer: bytes, stride: int | None = None) -> Tokens:
    """Windows of `block` token ids of `text` under `tokenizer` (a tokenizer.json's bytes)."""
    from tokenizers import Tokenizer

    try:
        tok = Tokenizer.from_str(tokenizer.decode())
    except Exception as exc:  # noqa: BLE001 - the library raises its own kinds for a bad file
        raise ShardInvalid("--tokenizer", f"not a tokenizer.json the tokenizers library reads: {exc}") from None
    vocab = tok.get_vocab_size()
    if not 2 <= vocab <= 65536:
        raise ShardInvalid("--tokenizer", f"a vocabulary of {vocab} tokens (2..65536)")
    ids = torch.tensor(tok.encode(text).ids, dtype=torch.int64)
    starts = range(0, len(ids) - block, stride or block)
    if len(starts) == 0:
        raise ShardInvalid("<text>", f"{len(ids)} tokens are too few for windows of {block}")
    x = torch.stack([ids[i:i + block] for i in starts])
    y = torch.stack([ids[i + 1:i + block + 1] for i in starts])
    return Tokens(x, y, vocab, tokenizer, hashlib.sha256(tokenizer).hexdigest())


def text_of(path: Path, text_field: str = "text") -> str:
    """A `.txt` corpus or the texts of a `.jsonl` file."""
    path = Path(path)
    if path.suffix == ".jsonl":
        return read_jsonl_text(path, text_field)
    _check_size(path)
    return path.read_text(encoding="utf-8")


def tokenizer_bytes(choice: str, text: str, vocab_size: int) -> bytes | None:
    """None for `char`; a trained BPE for `bpe`; else the tokenizer.json at path `choice`."""
    if choice == "char":
        return None
    if choice == "bpe":
        return train_bpe(text, vocab_size)
    path = Path(choice)
    if not path.is_file():
        raise ShardInvalid("--tokenizer", f"{choice!r} is neither char, bpe nor a tokenizer.json file")
    if path.stat().st_size > 64 << 20:
        raise ShardInvalid(str(path), "a tokenizer.json over 64 MB")
    return path.read_bytes()
