import itertools

import pytest
import torch

from verity.engine.aggregate import aggregate_input_hash, aggregate_states, run_aggregate
from verity.engine.checkpoint import checkpoint_bytes, initial_state
from verity.engine.state import TaskRef, TrainState
from verity.engine.trainer import Trainer
from verity.errors import HashMismatch

from engine_builders import build_manifest

RULES = [{"rule": "mean"}, {"rule": "median"}, {"rule": "trimmed_mean", "trim": 0.25}]


@pytest.fixture(scope="module")
def finals(digits_bytes):
    """Final states of 4 shard tasks (steps 10) with distinct sample weights."""
    from verity.engine.data import load_shard
    m = build_manifest("mlp", steps_per_round=10, checkpoint_interval=5)
    shard = load_shard(digits_bytes["shard-000"], m.data)
    out = []
    for i in range(4):
        t = Trainer(m, shard, TaskRef(1, 0, i))
        t.load(initial_state(m))
        for _ in range(10):
            t.train_step()
        out.append(t.snapshot())
    return out


@pytest.mark.parametrize("agg", RULES, ids=[r["rule"] for r in RULES])
def test_aggregate_states_order_independent(finals, agg):
    m = build_manifest("mlp", aggregation=agg)
    samples = [100, 200, 300, 457]
    hashes = set()
    for perm in itertools.permutations(range(4)):
        s = aggregate_states(m, [finals[i] for i in perm], [samples[i] for i in perm])
        hashes.add(s.hash)
        assert s.step == 0 and s.task is None and not any(k.startswith("optim/") for k in s.tensors)
    assert len(hashes) == 1


def test_aggregate_rules_compute_what_they_say():
    m = build_manifest("mlp")
    vals = [1.0, 2.0, 4.0, 100.0]
    states = [TrainState({"model/w": torch.full((2,), v)}) for v in vals]
    w = [1, 1, 1, 1]
    mean = aggregate_states(m, states, [1, 1, 1, 5])
    assert torch.allclose(mean.tensors["model/w"], torch.tensor(507.0 / 8))
    med = aggregate_states(build_manifest("mlp", aggregation={"rule": "median"}), states, w)
    assert med.tensors["model/w"].tolist() == [3.0, 3.0]
    trim = aggregate_states(build_manifest("mlp", aggregation={"rule": "trimmed_mean", "trim": 0.25}), states, w)
    assert trim.tensors["model/w"].tolist() == [3.0, 3.0]
    assert mean.tensors["model/w"].dtype == torch.float32


def test_run_aggregate_trace_and_hash_checks(finals):
    m = build_manifest("mlp", shards=[{"cid": "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG", "samples": 539}] * 4,
                       steps_per_round=10, checkpoint_interval=5)
    blobs = [checkpoint_bytes(s, m) for s in finals]
    hashes = [s.hash for s in finals]
    r = run_aggregate(m, blobs, hashes)
    assert r.trace[0] == aggregate_input_hash(hashes) and r.trace[1] == r.state.hash
    assert run_aggregate(m, blobs, hashes).trace == r.trace
    with pytest.raises(HashMismatch):
        run_aggregate(m, blobs, hashes[::-1])
