import io
import pickle

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from verity.cli import app
from verity.engine.data import ShardMeta, load_shard, shard_bytes
from verity.engine.datasets import write_shards
from verity.errors import ShardInvalid

from engine_builders import build_manifest, char_shards

SPEC = build_manifest("mlp").data


def _shard(x=None, y=None, **meta) -> bytes:
    x = torch.rand(5, 64) if x is None else x
    y = torch.arange(5) % 10 if y is None else y
    fields = dict(task="classification", samples=len(x), x_dtype="float32", x_shape=[64], num_classes=10)
    fields.update(meta)
    return shard_bytes(x, y, ShardMeta.model_construct(**fields))


def _refused(data: bytes, match: str, **kw):
    with pytest.raises(ShardInvalid, match=match):
        load_shard(data, SPEC, **kw)


def test_load_shard_valid_succeeds():
    s = load_shard(_shard(), SPEC, samples=5)
    assert s.x.shape == (5, 64) and len(s) == 5


def test_load_shard_pickle_refused():
    _refused(pickle.dumps({"x": np.zeros(3)}), "pickle")
    buf = io.BytesIO()
    torch.save({"x": torch.zeros(3)}, buf)
    _refused(buf.getvalue(), "zip")


def test_load_shard_garbage_refused():
    _refused(b"", "not a safetensors")
    _refused(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}", "not a safetensors")
    _refused(_shard()[:-4], "tensor data")


def test_load_shard_wrong_dtype_refused():
    _refused(_shard(x=torch.rand(5, 64, dtype=torch.float64)), "dtype F64 not allowed")
    _refused(_shard(x=torch.zeros(5, 64, dtype=torch.int64)), "dtype torch.int64")


def test_load_shard_wrong_shape_refused():
    _refused(_shard(x=torch.rand(5, 65)), r"shape \[5, 65\]")
    _refused(_shard(x=torch.rand(5, 8, 8)), "shape")
    _refused(_shard(), "holds 5 samples, the manifest says 6", samples=6)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_load_shard_non_finite_refused(bad):
    x = torch.rand(5, 64)
    x[3, 7] = bad
    _refused(_shard(x=x), "NaN or inf")


def test_load_shard_oversized_refused():
    data = _shard()
    _refused(data, "exceed the cap", max_bytes=len(data) - 1)
    _refused(data, "elements", max_elements=5 * 64)


def test_load_shard_labels_and_metadata_checked():
    _refused(_shard(y=torch.tensor([0, 1, 2, 3, 10])), r"outside \[0, 10\)")
    _refused(_shard(task="lm"), "task is lm")
    _refused(_shard(samples=4), "shape")


def test_load_shard_lm_roundtrip_succeeds():
    shards = char_shards()
    spec = build_manifest("gpt").data
    s = load_shard(shards["shard-000"], spec)
    assert s.x.dtype == torch.int64 and s.y.shape == s.x.shape and len(s.meta.vocab) == spec.vocab_size
    assert torch.equal(s.x[:, 1:], s.y[:, :-1])


def test_write_shards_nonempty_dir_refused(tmp_path):
    (tmp_path / "keep").write_text("x")
    with pytest.raises(ShardInvalid, match="not empty"):
        write_shards(tmp_path, {"shard-000": _shard()})


@pytest.mark.parametrize("case", ["nan", "pickle", "mismatch", "short-text"])
def test_cli_shard_bad_input_writes_nothing(tmp_path, case):
    src, out = tmp_path / "in.npz", tmp_path / "out"
    if case == "nan":
        np.savez(src, x=np.full((10, 4), np.nan, np.float32), y=np.zeros(10, np.int64))
    elif case == "pickle":
        np.savez(src, x=np.array([{"a": 1}] * 10, dtype=object), y=np.zeros(10, np.int64))
    elif case == "mismatch":
        np.savez(src, x=np.zeros((10, 4), np.float32), y=np.zeros(9, np.int64))
    else:
        src = tmp_path / "in.txt"
        src.write_text("tiny")
    r = CliRunner().invoke(app, ["data", "shard", str(src), "-o", str(out), "-n", "2"])
    assert r.exit_code == 1, r.output
    assert "error" in r.output
    assert not out.exists()


def test_cli_shard_digits_and_inspect_succeeds(tmp_path):
    out = tmp_path / "digits"
    r = CliRunner().invoke(app, ["data", "shard", "digits", "-o", str(out), "-n", "4", "--eval-fraction", "0.2"])
    assert r.exit_code == 0, r.output
    files = sorted(p.name for p in out.iterdir())
    assert files == ["eval.safetensors", "index.json", *[f"shard-00{i}.safetensors" for i in range(4)]]
    r = CliRunner().invoke(app, ["data", "inspect", str(out / "shard-001.safetensors")])
    assert r.exit_code == 0 and '"samples"' in r.output
