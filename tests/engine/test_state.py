import hashlib

import pytest
import torch

from verity.engine.checkpoint import checkpoint_bytes, initial_state, load_checkpoint
from verity.engine.state import TaskRef, TrainState, serialize_state, state_hash
from verity.engine.tensorfile import safetensors_bytes
from verity.engine.trainer import Trainer
from verity.errors import HashMismatch, StateInvalid

from engine_builders import build_manifest

TASK = TaskRef(job=3, round=1, index=2)


@pytest.fixture
def trained(mlp_task):
    """A state after 3 Adam steps: params, exp_avg, exp_avg_sq, step tensors."""
    m, shard, _, s0 = mlp_task
    t = Trainer(m, shard, TASK)
    t.load(s0)
    for _ in range(3):
        t.train_step()
    return m, t.snapshot()


def test_state_hash_is_sha256_of_serialisation(trained):
    _, s = trained
    assert s.hash == hashlib.sha256(serialize_state(s.tensors, s.step, s.task)).digest()
    assert serialize_state(s.tensors, s.step, s.task)[:12] == b"verity-state"


def test_state_hash_every_single_bit_flip_changes_it(trained):
    _, s = trained
    names = sorted(s.tensors)
    assert any("exp_avg_sq" in n for n in names) and any(n.endswith("/step") for n in names)
    for name in names:
        t = s.tensors[name]
        raw = t.view(torch.int32) if t.dtype == torch.float32 else t.view(torch.int64)
        for elem in {0, raw.numel() // 2, raw.numel() - 1}:
            for bit in (0, 1, 22, 23, 30, 31):
                flipped = {k: v.clone() for k, v in s.tensors.items()}
                r = flipped[name].view(raw.dtype).view(-1)
                r[elem] ^= (1 << bit) if bit < 31 else -(1 << 31)
                assert state_hash(flipped, s.step, s.task) != s.hash, (name, elem, bit)


def test_state_hash_binds_step_and_task(trained):
    _, s = trained
    assert state_hash(s.tensors, s.step + 1, s.task) != s.hash
    assert state_hash(s.tensors, s.step, TaskRef(3, 1, 3)) != s.hash
    assert state_hash(s.tensors, s.step, TaskRef(4, 1, 2)) != s.hash
    renamed = dict(s.tensors)
    renamed["model/extra"] = torch.zeros(0)
    assert state_hash(renamed, s.step, s.task) != s.hash


def test_step0_state_independent_of_task():
    with pytest.raises(ValueError):
        TrainState({}, step=0, task=TASK)
    with pytest.raises(ValueError):
        TrainState({}, step=1, task=None)


def test_initial_state_reproducible_from_seed():
    m = build_manifest("gpt")
    assert initial_state(m).hash == initial_state(m).hash
    assert initial_state(m).hash != initial_state(build_manifest("gpt", init={"seed": 8})).hash


def test_load_checkpoint_roundtrip_succeeds(trained):
    m, s = trained
    data = checkpoint_bytes(s, m)
    back = load_checkpoint(data, m, expected_hash=s.hash)
    assert back.hash == s.hash and back.step == 3 and back.task == TASK


def test_load_checkpoint_tampered_refused(trained):
    m, s = trained
    data = bytearray(checkpoint_bytes(s, m))
    data[-1] ^= 1
    with pytest.raises(StateInvalid, match="state_hash in the metadata"):
        load_checkpoint(bytes(data), m)
    with pytest.raises(HashMismatch):
        load_checkpoint(checkpoint_bytes(s, m), m, expected_hash=b"\x00" * 32)


def test_load_checkpoint_other_model_refused(trained):
    m, s = trained
    other = build_manifest("mlp", model={"arch": "mlp", "config": {"in_features": 64, "hidden": [32], "out_features": 10}})
    with pytest.raises(StateInvalid):
        load_checkpoint(checkpoint_bytes(s, m), other)


def test_initial_state_from_weights_file():
    m = build_manifest("mlp", init={"weights": "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG"})
    seeded = initial_state(build_manifest("mlp"))
    plain = safetensors_bytes(seeded.model_tensors(), {})
    assert initial_state(m, plain).hash == seeded.hash
    assert initial_state(m, checkpoint_bytes(seeded, m)).hash == seeded.hash
    bad = dict(seeded.model_tensors())
    bad["layers.0.weight"] = torch.zeros(3, 3)
    with pytest.raises(StateInvalid, match="layers.0.weight"):
        initial_state(m, safetensors_bytes(bad, {}))
    with pytest.raises(StateInvalid, match="pass its bytes"):
        initial_state(m)
