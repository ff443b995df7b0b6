"""The safetensors reader accepts every valid file and refuses the rest as invalid input.

A header of 640, 896, 1,152 or 1,408 bytes makes a file start with `80 02`…`80 05`,
the bytes a pickle starts with; those files were refused as "pickle" and every CNN
job with the default optimizer failed on every node."""
from __future__ import annotations

import io
import json
import pickle
import random
import zipfile

import pytest
import torch

from engine_builders import build_manifest, digits_shards
from verity.engine.checkpoint import checkpoint_bytes, initial_state, load_checkpoint
from verity.engine.data import load_shard
from verity.engine.runner import checkpoint_path, run_task
from verity.engine.state import TaskRef
from verity.engine.tensorfile import read_safetensors, safetensors_bytes
from verity.errors import StateInvalid

CAPS = dict(max_bytes=1 << 20, max_elements=1 << 16)
MODELS = ("mlp", "cnn", "gpt")
OPTIMIZERS = ({"name": "sgd", "lr": 0.05, "momentum": 0.9}, {"name": "adam", "lr": 0.003},
              {"name": "adamw", "lr": 0.003, "weight_decay": 0.01})


def _with_header_size(size: int) -> bytes:
    """A valid safetensors file whose JSON header is exactly `size` bytes (size % 8 == 0)."""
    tensors = {"w": torch.arange(6, dtype=torch.float32).reshape(2, 3)}
    empty = safetensors_bytes(tensors, {"pad": ""})
    unpadded = len(empty[8:8 + int.from_bytes(empty[:8], "little")].rstrip(b" "))
    data = safetensors_bytes(tensors, {"pad": "x" * (size - unpadded)})
    assert int.from_bytes(data[:8], "little") == size
    return data


FULL_SWEEP = range(128, 4104, 8)


def _header_sizes() -> list[int]:
    """Header sizes where the reader's framing changes, plus a fixed-seed sample of the rest: the smallest header,
    every size whose first byte is 0x80 (a pickle's first byte) with a protocol-like second byte, each carry of the
    8-byte length's low bytes, and the largest of the full sweep (`-m full_sweep` runs all 497 sizes)."""
    boundaries = {128, 4096}
    boundaries |= {s for s in FULL_SWEEP if s % 256 == 128}                        # 0x80 0xNN: pickle-like openings
    boundaries |= {s + d for s in (256, 512, 1024, 2048, 4096) for d in (-8, 0, 8) if s + d in FULL_SWEEP}
    rest = sorted(set(FULL_SWEEP) - boundaries)
    return sorted(boundaries | set(random.Random(0x5EED).sample(rest, 16)))


@pytest.mark.parametrize("size", _header_sizes())
def test_readSafetensors_headerSizeBoundaries_succeeds(size):
    _check_header_size(size)


@pytest.mark.full_sweep
@pytest.mark.parametrize("size", FULL_SWEEP)
def test_readSafetensors_everyHeaderSize_succeeds(size):
    _check_header_size(size)


def _check_header_size(size: int) -> None:
    data = _with_header_size(size)
    tensors, meta = read_safetensors(data, "f", StateInvalid, **CAPS)
    assert torch.equal(tensors["w"], torch.arange(6, dtype=torch.float32).reshape(2, 3))
    assert len(meta["pad"]) > 0


@pytest.mark.parametrize("size", [640, 896, 1152, 1408])
def test_readSafetensors_headerThatLooksLikePickle_succeeds(size):
    data = _with_header_size(size)
    assert data[0] == 0x80 and data[1] in (2, 3, 4, 5)  # the exact bytes the old sniff refused
    read_safetensors(data, "f", StateInvalid, **CAPS)


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_readSafetensors_pickle_fails(protocol):
    with pytest.raises(StateInvalid, match="pickle data refused"):
        read_safetensors(pickle.dumps({"w": [1.0] * 300}, protocol=protocol), "f", StateInvalid, **CAPS)


def test_readSafetensors_zip_fails():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("data.pkl", b"x")
    with pytest.raises(StateInvalid, match="zip archive"):
        read_safetensors(buf.getvalue(), "f", StateInvalid, **CAPS)


def _raw(entry: dict, data: bytes = b"\0" * 24) -> bytes:
    header = json.dumps({"w": entry}).encode()
    return len(header).to_bytes(8, "little") + header + data


@pytest.mark.parametrize("entry", [
    {"dtype": "F32", "shape": [2, 3], "data_offsets": 24},
    {"dtype": "F32", "shape": [2, 3], "data_offsets": {"a": 0}},
    {"dtype": "F32", "shape": [2, 3], "data_offsets": [0]},
    {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, "24"]},
    {"dtype": "F32", "shape": [2, 3], "data_offsets": [24, 0]},
    {"dtype": "F32", "shape": "2x3", "data_offsets": [0, 24]},
    {"dtype": "F32", "shape": [2, True], "data_offsets": [0, 24]},
    {"dtype": ["F32"], "shape": [2, 3], "data_offsets": [0, 24]},
    {"dtype": "F32", "shape": [2, 3]},
])
def test_readSafetensors_malformedHeader_failsAsInvalidInput(entry):
    """Refused with the input's own error (a ValueError: permanent), never a TypeError a node would retry."""
    with pytest.raises(StateInvalid):
        read_safetensors(_raw(entry), "f", StateInvalid, **CAPS)


def _shard(arch: str, m):
    if arch == "gpt":
        from engine_builders import char_shards
        return load_shard(char_shards()["shard-000"], m.data)
    return load_shard(digits_shards(image=arch == "cnn")["shard-000"], m.data, samples=539)


@pytest.mark.parametrize("arch", MODELS)
@pytest.mark.parametrize("opt", OPTIMIZERS, ids=lambda o: o["name"])
def test_runTask_everyModelAndOptimizer_checkpointsReadBack_succeeds(arch, opt, tmp_path):
    """A real task per model x optimizer: round input in as bytes, every checkpoint read back
    through the same validation a node uses on downloaded states."""
    m = build_manifest(arch, optimizer=opt, steps_per_round=4, checkpoint_interval=2)
    start = initial_state(m)
    res = run_task(m, checkpoint_bytes(start, m), _shard(arch, m), TaskRef(1, 0, 0), tmp_path,
                   expected_input_hash=start.hash)
    assert len(res.trace) == 3 and res.trace[0] == start.hash and len(set(res.trace)) == 3
    for j, h in enumerate(res.trace):
        state = load_checkpoint(checkpoint_path(tmp_path, j).read_bytes(), m, expected_hash=h, source=f"ckpt {j}")
        assert state.step == 2 * j
