"""submit/formats.py: the data people have (issue 24, item 4) — CSV/TSV and Parquet tables by column name, JSON
lines, image folders decoded with Pillow, text tokenized by a byte-level BPE or a supplied tokenizer.json — each read
into (x, y), and every bad row, line or file named. Real files written here; no chain."""
from __future__ import annotations

import csv
import hashlib
import json

import pytest
import torch

from verity.engine.data import load_shard
from verity.errors import ShardInvalid
from verity.submit import formats
from verity.submit.data import Reading, build_shards, read_source
from verity.submit.data import shard_meta


def _table(path, rows, header=("a", "b", "species"), delimiter=","):
    with path.open("w", newline="") as f:
        w = csv.writer(f, delimiter=delimiter)
        w.writerow(header)
        w.writerows(rows)
    return path


def test_csv_and_tsv_read_features_and_named_labels_by_column_succeeds(tmp_path):
    rows = [[1.5, 2, "setosa"], [0.5, -1, "virginica"], [3, 4e-3, "setosa"]]
    got = formats.read_table(_table(tmp_path / "t.csv", rows))
    assert got.x.tolist() == [[1.5, 2.0], [0.5, -1.0], [3.0, pytest.approx(4e-3)]]
    assert got.y.tolist() == [0, 1, 0] and got.classes == ["setosa", "virginica"]  # names: sorted, then numbered
    tsv = formats.read_table(_table(tmp_path / "t.tsv", rows, delimiter="\t"), features=["b"], label="species")
    assert tsv.x.tolist() == [[2.0], [-1.0], [pytest.approx(4e-3)]]
    ids = formats.read_table(_table(tmp_path / "i.csv", [[1, 2, 1], [3, 4, 0]], header=("a", "b", "y")))
    assert ids.y.tolist() == [1, 0]  # integer labels are the class ids


@pytest.mark.parametrize("rows, header, kw, message", [
    ([[1, "x1", "s"]], ("a", "b", "species"), {}, "row 2: column 'b' holds 'x1', not a number"),
    ([[1, 2, "s"], [1, "nan", "t"]], ("a", "b", "species"), {}, "row 3: column 'b' is 'nan'"),
    ([[1, 2, "s"], [1, 2]], ("a", "b", "species"), {}, "row 3: 2 cells, the header has 3"),
    ([[1, 2, "s"]], ("a", "b", "species"), {"label": "kind"}, "no label column 'kind' (columns: a, b, species)"),
    ([[1, 2, "s"]], ("a", "b", "species"), {"features": ["a", "z"]}, "no feature column 'z'"),
    ([[1, 2, "s"], [1, 2, ""]], ("a", "b", "species"), {}, "row 3: an empty label"),
    ([], ("a", "b", "species"), {}, "no data rows"),
])
def test_a_bad_table_names_its_row_or_column_fails(tmp_path, rows, header, kw, message):
    with pytest.raises(ShardInvalid) as err:
        formats.read_table(_table(tmp_path / "bad.csv", rows, header), **kw)
    assert err.value.reason == message and err.value.source.endswith("bad.csv")


def test_parquet_reads_like_a_csv_succeeds(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"a": [1.0, 2.0, 3.0], "b": [4, 5, 6], "label": ["x", "y", "x"]}), tmp_path / "t.parquet")
    got = formats.read_table(tmp_path / "t.parquet")
    assert got.x.tolist() == [[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]] and got.y.tolist() == [0, 1, 0]
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(ShardInvalid, match="not a readable Parquet file"):
        formats.read_table(tmp_path / "bad.parquet")


def test_jsonl_text_field_and_bad_lines_succeeds(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"text": "hello"}\n\n{"text": "world", "id": 2}\n')
    assert formats.read_jsonl_text(path) == "hello\nworld"
    path.write_text('{"text": "hello"}\n{"body": "x"}\n')
    with pytest.raises(ShardInvalid, match=r"line 2: no string field 'text'"):
        formats.read_jsonl_text(path)
    path.write_text('{"text": "hello"}\n{oops\n')
    with pytest.raises(ShardInvalid, match=r"line 2: not JSON"):
        formats.read_jsonl_text(path)


def _images(root, classes=("cats", "dogs"), n=3, mode="RGB"):
    from PIL import Image

    for c, name in enumerate(classes):
        (root / name).mkdir(parents=True)
        for i in range(n):
            Image.new(mode, (40, 30), (10 * i, 100 + 100 * c, 50) if mode == "RGB" else 40 * c).save(root / name / f"{i}.png")
    return root


def test_image_folder_one_class_per_directory_resized_succeeds(tmp_path):
    got = formats.read_image_folder(_images(tmp_path / "imgs"), size=16)
    assert got.x.shape == (6, 3, 16, 16) and got.x.dtype == torch.float32 and 0 <= got.x.min() <= got.x.max() <= 1
    assert got.y.tolist() == [0, 0, 0, 1, 1, 1] and got.classes == ["cats", "dogs"]
    assert got.x[3, 1, 0, 0] == pytest.approx(200 / 255)  # green channel of a dog, untouched by the resize
    gray = formats.read_image_folder(_images(tmp_path / "gray", mode="L"), size=8)
    assert gray.x.shape == (6, 1, 8, 8)
    (tmp_path / "imgs" / "dogs" / "broken.jpg").write_bytes(b"not a jpeg")
    with pytest.raises(ShardInvalid) as err:
        formats.read_image_folder(tmp_path / "imgs", size=16)
    assert err.value.source.endswith("dogs/broken.jpg") and "not a readable image" in err.value.reason


def test_bpe_is_deterministic_and_its_hash_binds_the_shards_succeeds(tmp_path):
    text = " ".join(f"the quick brown fox {i % 13} jumps over the lazy dog" for i in range(400))
    a, b = formats.train_bpe(text, 300), formats.train_bpe(text, 300)
    assert a == b  # the same corpus gives the same tokenizer.json, byte for byte
    tokens = formats.tokenize(text, 16, a)
    assert tokens.vocab_size == 300 and tokens.sha256 == hashlib.sha256(a).hexdigest()
    assert tokens.x.shape[1] == 16 and torch.equal(tokens.x[:, 1:], tokens.y[:, :-1])
    assert int(tokens.x.max()) < 300
    (tmp_path / "c.txt").write_text(text)
    src = read_source(str(tmp_path / "c.txt"), Reading(block=16, tokenizer="bpe", vocab_size=300))
    shards = build_shards(src, 2, eval_fraction=0.1, seed=0, source="c.txt")
    meta = shard_meta("shard-000", shards["shard-000"])
    spec = meta.spec()
    assert spec.vocab_size == 300 and spec.tokenizer_sha256 == tokens.sha256 and meta.vocab is None
    load_shard(shards["shard-000"], spec, samples=meta.samples)
    # a shard tokenized otherwise (characters) is refused against this manifest
    chars = read_source(str(tmp_path / "c.txt"), Reading(block=16))
    other = build_shards(chars, 2, eval_fraction=0.1, seed=0, source="c.txt")["shard-000"]
    with pytest.raises(ShardInvalid, match="tokenized with characters"):
        load_shard(other, spec)


def test_a_supplied_tokenizer_json_is_used_and_a_bad_one_refused_succeeds(tmp_path):
    text = "abc abd abe " * 200
    (tmp_path / "tok.json").write_bytes(formats.train_bpe(text, 270))
    (tmp_path / "c.jsonl").write_text("\n".join(json.dumps({"text": t}) for t in text.split("e ")))
    src = read_source(str(tmp_path / "c.jsonl"), Reading(block=8, tokenizer=str(tmp_path / "tok.json")))
    # a small corpus runs out of merges before 270: the vocabulary is what the file holds
    assert 257 <= src.tokens.vocab_size <= 270 and src.tokens.tokenizer == (tmp_path / "tok.json").read_bytes()
    (tmp_path / "bad.json").write_text('{"model": 3}')
    with pytest.raises(ShardInvalid) as err:
        read_source(str(tmp_path / "c.jsonl"), Reading(block=8, tokenizer=str(tmp_path / "bad.json")))
    assert err.value.source == "--tokenizer"
    with pytest.raises(ShardInvalid, match="257..65536"):
        formats.train_bpe(text, 100)


def test_character_shards_keep_their_bytes_succeeds():
    """A character or classification shard is written exactly as before the tokenizer fields existed (its CID is
    unchanged): the fields appear only when set."""
    from verity.engine.reference import char_shards, digits_shards

    for data in (char_shards()["shard-000"], digits_shards()["shard-000"]):
        header = json.loads(data[8:8 + int.from_bytes(data[:8], "little")])["__metadata__"]["verity"]
        assert "tokenizer_sha256" not in header and "vocab_size" not in header


def test_a_malformed_csv_line_or_a_decompression_bomb_is_named_fails(tmp_path):
    from PIL import Image

    (tmp_path / "huge.csv").write_text("a,y\n1,0\n" + "2" * 200_000 + ",1\n")  # a field over csv's size limit
    with pytest.raises(ShardInvalid, match=r"^shard .*huge.csv: row 3: field larger than field limit"):
        formats.read_table(tmp_path / "huge.csv")
    root = _images(tmp_path / "imgs")
    Image.new("1", (7_000, 7_000)).save(root / "cats" / "bomb.png")  # a few KB on disk, 49 Mpx decoded
    with pytest.raises(ShardInvalid) as err:
        formats.read_image_folder(root, size=8)
    assert err.value.source.endswith("cats/bomb.png") and err.value.reason.startswith("7000x7000 pixels, over 40,000,000")
