"""The DiLoCo outer optimizer of AGGREGATE tasks: the formula (recomputed here in numpy float64),
momentum carried in the state and its hash, and TRAIN tasks whose round input holds momentum."""
import numpy as np
import pytest
import torch

from verity.engine.aggregate import aggregate_states, run_aggregate
from verity.engine.checkpoint import checkpoint_bytes, initial_state, layout, load_checkpoint
from verity.engine.data import load_shard
from verity.engine.outer import momentum_name, outer_update
from verity.engine.runner import replay_segment, run_task
from verity.engine.state import TaskRef, TrainState
from verity.engine.trainer import Trainer
from verity.errors import StateInvalid

from engine_builders import CID, build_manifest, build_module_manifest, outer

SAMPLES = [539, 270]
SHARDS = [{"cid": CID, "samples": n} for n in SAMPLES]
PARAMS = ["layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias"]


def _job(**agg):
    return build_manifest("mlp", shards=SHARDS, steps_per_round=4, checkpoint_interval=2, aggregation=outer(**agg))


def _finals(m, shard, start, rnd):
    out = []
    for i in range(len(m.shards)):
        t = Trainer(m, shard, TaskRef(2, rnd, i))
        t.load(start)
        for _ in range(m.steps_per_round):
            t.train_step()
        out.append(t.snapshot())
    return out


def _by_hand(prev, finals, lr, mom, nesterov):
    """The outer step in numpy float64 from the docs' formula: {param: (new, v)} as float32 arrays."""
    out = {}
    wa, wb = map(float, SAMPLES)
    for n in PARAMS:
        p = prev.tensors[f"model/{n}"].numpy().astype(np.float64)
        a, b = (f.tensors[f"model/{n}"].numpy().astype(np.float64) for f in finals)
        merged = (a * wa + b * wb) / (wa + wb)
        v_prev = prev.tensors.get(momentum_name(n))
        v_prev = np.zeros_like(p) if v_prev is None else v_prev.numpy().astype(np.float64)
        delta = p - merged
        v = v_prev * mom + delta
        new = p - (v * mom + delta) * lr if nesterov else p - v * lr
        out[n] = (new.astype(np.float32), v.astype(np.float32))
    return out


@pytest.fixture(scope="module")
def shard(digits_bytes):
    return load_shard(digits_bytes["shard-000"], _job().data)


@pytest.mark.parametrize("nesterov", [True, False])
def test_outer_two_rounds_match_float64_by_hand(shard, nesterov):
    m = _job(lr=0.7, momentum=0.9, nesterov=nesterov)
    s0 = initial_state(m)
    start = s0
    for rnd in range(2):
        finals = _finals(m, shard, start, rnd)
        agg = aggregate_states(m, finals, SAMPLES, start)
        want = _by_hand(start, finals, 0.7, 0.9, nesterov)
        for n, (new, v) in want.items():
            assert agg.tensors[f"model/{n}"].numpy().tobytes() == new.tobytes(), (rnd, n)
            assert agg.tensors[momentum_name(n)].numpy().tobytes() == v.tobytes(), (rnd, n)
        assert set(agg.tensors) == {f"model/{n}" for n in PARAMS} | {momentum_name(n) for n in PARAMS}
        if rnd == 1:
            assert start.tensors[momentum_name(PARAMS[0])].abs().sum() > 0   # round 1 used round 0's momentum
        start = agg


def test_outer_round0_momentum_is_zero(shard):
    m = _job()
    s0 = initial_state(m)
    finals = _finals(m, shard, s0, 0)
    zeros = TrainState({**s0.tensors, **{momentum_name(n): torch.zeros_like(s0.tensors[f"model/{n}"]) for n in PARAMS}})
    a, b = aggregate_states(m, finals, SAMPLES, s0), aggregate_states(m, finals, SAMPLES, zeros)
    assert a.hash == b.hash
    for n in PARAMS:
        merged = (finals[0].tensors[f"model/{n}"].double() * SAMPLES[0]
                  + finals[1].tensors[f"model/{n}"].double() * SAMPLES[1]) / sum(SAMPLES)
        assert torch.equal(a.tensors[momentum_name(n)], (s0.tensors[f"model/{n}"].double() - merged).float())


def test_outer_update_formula_small_numbers():
    prev, merged, v_prev = torch.tensor([1.0]), torch.tensor([0.5], dtype=torch.float64), torch.tensor([2.0])
    new, v = outer_update(prev, merged, v_prev, lr=0.5, momentum=0.5, nesterov=True)
    assert v.item() == 1.5 and new.item() == 1.0 - 0.5 * (0.5 + 0.5 * 1.5)          # delta 0.5
    new, v = outer_update(prev, merged, v_prev, lr=0.5, momentum=0.5, nesterov=False)
    assert v.item() == 1.5 and new.item() == 1.0 - 0.5 * 1.5
    new, v = outer_update(prev, merged, None, lr=1.0, momentum=0.9, nesterov=False)
    assert v.item() == 0.5 and new.item() == 0.5                                    # lr 1, round 0: plain averaging


def test_outer_momentum_bound_by_state_hash(shard):
    m = _job()
    s0 = initial_state(m)
    agg = aggregate_states(m, _finals(m, shard, s0, 0), SAMPLES, s0)
    name = momentum_name("layers.1.bias")
    bumped = dict(agg.tensors)
    bumped[name] = agg.tensors[name].clone()
    bumped[name][0] = torch.nextafter(bumped[name][0], torch.tensor(1.0))
    assert TrainState(bumped).hash != agg.hash
    assert TrainState({k: v for k, v in agg.tensors.items() if k != name}).hash != agg.hash
    other = aggregate_states(_job(momentum=0.5), _finals(m, shard, s0, 0), SAMPLES, s0)
    assert other.hash != agg.hash
    # the hyperparameters reach the model too, not only the momentum
    assert not torch.equal(other.tensors["model/layers.1.bias"], agg.tensors["model/layers.1.bias"])


def test_outer_momentum_in_checkpoints_only_at_step0(shard):
    m = _job()
    s0 = initial_state(m)
    agg = aggregate_states(m, _finals(m, shard, s0, 0), SAMPLES, s0)
    assert load_checkpoint(checkpoint_bytes(agg, m), m, expected_hash=agg.hash).hash == agg.hash
    partial = TrainState({k: v for k, v in agg.tensors.items() if k != momentum_name("layers.0.bias")})
    with pytest.raises(StateInvalid, match="all or none"):
        load_checkpoint(checkpoint_bytes(partial, m), m)
    t = Trainer(m, shard, TaskRef(2, 1, 0))
    t.load(agg)
    t.train_step()
    late = t.snapshot()
    assert not any(k.startswith("outer/") for k in late.tensors)
    smuggled = TrainState({**late.tensors, momentum_name("layers.0.bias"): agg.tensors[momentum_name("layers.0.bias")]},
                          late.step, late.task)
    with pytest.raises(StateInvalid, match="step-0"):
        load_checkpoint(checkpoint_bytes(smuggled, m), m)
    plain = build_manifest("mlp", shards=SHARDS, steps_per_round=4, checkpoint_interval=2)
    assert not any(k.startswith("outer/") for k in layout(plain))
    with pytest.raises(StateInvalid, match="unexpected tensor 'outer/"):
        load_checkpoint(checkpoint_bytes(agg, m), plain)
    wrong = TrainState({**agg.tensors, momentum_name("layers.0.bias"): torch.zeros(3)})
    with pytest.raises(StateInvalid, match="expected torch.float32 \\[64\\]"):
        load_checkpoint(checkpoint_bytes(wrong, m), m)


def test_train_task_from_state_with_momentum(shard, tmp_path):
    """h_0 is the full input hash (momentum included), checkpoint 0 holds it, later ones do not."""
    m = _job()
    s0 = initial_state(m)
    agg = aggregate_states(m, _finals(m, shard, s0, 0), SAMPLES, s0)
    task = TaskRef(2, 1, 1)
    r = run_task(m, checkpoint_bytes(agg, m), shard, task, tmp_path, expected_input_hash=agg.hash)
    assert r.trace[0] == agg.hash
    ck0 = load_checkpoint(r.checkpoints[0].read_bytes(), m)
    assert ck0.hash == agg.hash and any(k.startswith("outer/") for k in ck0.tensors)
    assert not any(k.startswith("outer/") for k in r.final.tensors)
    g = replay_segment(m, r.checkpoints[0].read_bytes(), shard, task)
    assert g[0] == r.trace[0] and g[-1] == r.trace[1]
    # the momentum does not influence training: same trace after h_0 without it
    bare = TrainState({k: v for k, v in agg.tensors.items() if k.startswith("model/")})
    assert run_task(m, bare, shard, task, tmp_path / "bare").trace[1:] == r.trace[1:]


def test_outer_needs_round_input(shard):
    m = _job()
    s0 = initial_state(m)
    finals = _finals(m, shard, s0, 0)
    with pytest.raises(StateInvalid, match="round_input"):
        aggregate_states(m, finals, SAMPLES)
    with pytest.raises(StateInvalid, match="round_input"):
        run_aggregate(m, [checkpoint_bytes(f, m) for f in finals], [f.hash for f in finals])
    r = run_aggregate(m, [checkpoint_bytes(f, m) for f in finals], [f.hash for f in finals],
                      checkpoint_bytes(s0, m), s0.hash)
    assert r.state.hash == aggregate_states(m, finals, SAMPLES, s0).hash


def test_outer_with_modules_only_trained_params(digits_bytes):
    """Module job + outer: momentum for the job's trained parameters; the frozen layer stays the round input's."""
    m = build_module_manifest(shards=[{"cid": CID, "samples": n} for n in (539, 270, 130)], steps_per_round=2,
                              checkpoint_interval=1, aggregation=outer())
    shard = load_shard(digits_bytes["shard-000"], m.data)
    s0 = initial_state(m)
    finals = _finals(m, shard, s0, 0)
    agg = aggregate_states(m, finals, [539, 270, 130], s0)
    assert {k for k in agg.tensors if k.startswith("outer/")} == {
        momentum_name(n) for n in ("layers.1.weight", "layers.1.bias", "layers.2.weight", "layers.2.bias")}
    assert torch.equal(agg.tensors["model/layers.0.weight"], s0.tensors["model/layers.0.weight"])
    assert load_checkpoint(checkpoint_bytes(agg, m), m).hash == agg.hash
