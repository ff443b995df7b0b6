"""Module-parallel training: manifest rules, what a module task trains and holds, replay,
and the per-module AGGREGATE (the outer optimizer is in test_outer.py)."""
import itertools
import json

import pytest
import torch

from verity.engine.aggregate import aggregate_states, run_aggregate
from verity.engine.checkpoint import checkpoint_bytes, initial_state, layout, load_checkpoint
from verity.engine.data import load_shard
from verity.engine.manifest import load_manifest, manifest_bytes
from verity.engine.modules import module_params, trained_in_order, trained_params, trainers_of
from verity.engine.portable.autograd import linear
from verity.engine.runner import advance, recompute_step, replay_segment, run_task
from verity.engine.state import TaskRef, TrainState
from verity.engine.trainer import Trainer
from verity.errors import HashMismatch, ManifestInvalid, StateInvalid

from engine_builders import CID, build_manifest, build_module_manifest, char_shards, module_manifest_doc

SAMPLES = [539, 270, 130]
SHARDS = [{"cid": CID, "samples": n} for n in SAMPLES]
BODY = ["layers.1.bias", "layers.1.weight"]
HEAD = ["layers.2.bias", "layers.2.weight"]
FROZEN = ["layers.0.bias", "layers.0.weight"]


# --------------------------------------------------------------------------- manifest
M = [{"name": "a", "params": ["layers.1."]}, {"name": "b", "params": ["layers.2."]}]
BAD = [
    ("modules without plan", {"module_plan": None}, "module_plan"),
    ("plan without modules", {"modules": None}, "modules"),
    ("prefix matches nothing", {"modules": [{"name": "a", "params": ["layers.9."]}, M[1]]}, "modules.0.params.0"),
    ("modules overlap", {"modules": [M[0], {"name": "b", "params": ["layers.2.", "layers.1.w"]}]}, "modules.1.params.1"),
    ("module trained by no task", {"modules": M, "module_plan": [["a"]] * 3}, "modules.1"),
    ("plan length", {"modules": M, "module_plan": [["a", "b"]] * 2}, "module_plan"),
    ("empty plan entry", {"modules": M, "module_plan": [["a", "b"], [], ["a"]]}, "module_plan.1"),
    ("module twice in an entry", {"modules": M, "module_plan": [["a", "b", "a"], ["a"], ["b"]]}, "module_plan.0"),
    ("undefined module", {"modules": M, "module_plan": [["a", "c"], ["a"], ["b"]]}, "module_plan.0.1"),
    ("module name charset", {"modules": [{"name": "Body", "params": ["layers.1."]}, M[1]]}, "modules.0.name"),
    ("module name too long", {"modules": [{"name": "a" * 65, "params": ["layers.1."]}, M[1]]}, "modules.0.name"),
    ("duplicate module names", {"modules": [M[0], {"name": "a", "params": ["layers.2."]}]}, "modules.1.name"),
    ("no prefixes", {"modules": [{"name": "a", "params": []}, M[1]]}, "modules.0.params"),
    ("too many prefixes", {"modules": [{"name": "a", "params": ["layers.1."] * 65}, M[1]]}, "modules.0.params"),
    ("too many modules", {"modules": [{"name": f"m{i}", "params": ["layers."]} for i in range(65)]}, "modules"),
    ("outer lr 0", {"aggregation": {"rule": "mean", "outer": {"lr": 0, "momentum": 0.9}}}, "aggregation.outer.lr"),
    ("outer momentum 1", {"aggregation": {"rule": "mean", "outer": {"lr": 0.7, "momentum": 1.0}}},
     "aggregation.outer.momentum"),
    ("outer extra field", {"aggregation": {"outer": {"lr": 0.7, "momentum": 0.9, "beta": 1}}}, "aggregation.outer.beta"),
]


@pytest.mark.parametrize("why,patch,field", BAD, ids=[b[0] for b in BAD])
def test_load_manifest_module_rule_violated_reverts(why, patch, field):
    doc = {k: v for k, v in module_manifest_doc("mlp", **patch).items() if v is not None}
    with pytest.raises(ManifestInvalid) as e:
        load_manifest(json.dumps(doc).encode())
    assert e.value.field == field, str(e.value)


def test_load_manifest_modules_valid_succeeds():
    for arch in ("mlp", "gpt"):
        m = build_module_manifest(arch, aggregation={"rule": "median", "outer": {"lr": 0.7, "momentum": 0.9}})
        assert load_manifest(manifest_bytes(m)) == m
        assert m.aggregation.outer.nesterov is True
    # a frozen backbone: one module, trained by every task
    m = build_module_manifest(modules=[{"name": "head", "params": ["layers.2."]}], module_plan=[["head"]] * 3)
    assert trained_params(m) == frozenset(HEAD)


def test_manifest_bytes_unset_new_fields_left_out():
    """Earlier manifests keep their canonical bytes (and so their CID and hash)."""
    m = build_manifest("mlp")
    doc = json.loads(manifest_bytes(m))
    assert "modules" not in doc and "module_plan" not in doc and "outer" not in doc["aggregation"]
    assert "step_budget_ms" not in doc["hardware"]
    assert "region" not in doc["hardware"] and "min_bandwidth_mbps" not in doc["hardware"]
    assert "micro_batches" not in doc
    old = m.model_dump(mode="json")
    for key in ("modules", "module_plan"):
        del old[key]
    del old["aggregation"]["outer"]
    del old["hardware"]["step_budget_ms"]
    del old["hardware"]["region"], old["hardware"]["min_bandwidth_mbps"]  # network requirements (issue 9 item 4)
    del old["micro_batches"]  # micro-batches of a step (issue 24 item 6)
    assert manifest_bytes(m) == json.dumps(old, sort_keys=True, separators=(",", ":")).encode()


def test_trained_params_resolves_plan():
    m = build_module_manifest(shards=SHARDS)
    assert trained_params(m, 0) == frozenset(HEAD)
    assert trained_params(m, 1) == frozenset(BODY + HEAD)
    assert trained_params(m, 2) == frozenset(BODY)
    assert trained_params(m) == frozenset(BODY + HEAD)                      # the job: layers.0 frozen
    assert trained_in_order(m, 1) == ["layers.1.weight", "layers.1.bias", "layers.2.weight", "layers.2.bias"]
    assert module_params(m) == {"body": ("layers.1.weight", "layers.1.bias"),
                                "head": ("layers.2.weight", "layers.2.bias")}
    assert trainers_of(m, "head") == [0, 1] and trainers_of(m, "body") == [1, 2]
    with pytest.raises(ValueError, match="outside the module plan"):
        trained_params(m, 3)
    whole = build_manifest("mlp")
    assert trained_params(whole, 0) == trained_params(whole) == frozenset(
        ["layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias"])


def test_layout_per_task_optimizer_state():
    m = build_module_manifest(shards=SHARDS)
    optim = {i: {k.split("/")[1] for k in layout(m, i) if k.startswith("optim/")} for i in (0, 1, 2, None)}
    assert optim == {0: set(HEAD), 1: set(BODY + HEAD), 2: set(BODY), None: set(BODY + HEAD)}
    assert {k for k in layout(m, 0) if k.startswith("model/")} == {f"model/{n}" for n in FROZEN + BODY + HEAD}


# --------------------------------------------------------------------------- training
@pytest.fixture(scope="module")
def mlp_job(digits_bytes):
    m = build_module_manifest(shards=SHARDS, steps_per_round=8, checkpoint_interval=4)
    return m, load_shard(digits_bytes["shard-000"], m.data), initial_state(m)


def test_module_task_freezes_other_params_bitwise(mlp_job, tmp_path):
    m, shard, s0 = mlp_job
    r = run_task(m, s0, shard, TaskRef(3, 0, 0), tmp_path)                   # task 0 trains the head only
    final = r.final
    for n in FROZEN + BODY:
        assert torch.equal(final.tensors[f"model/{n}"], s0.tensors[f"model/{n}"]), n
        assert final.tensors[f"model/{n}"].numpy().tobytes() == s0.tensors[f"model/{n}"].numpy().tobytes()
    for n in HEAD:
        assert not torch.equal(final.tensors[f"model/{n}"], s0.tensors[f"model/{n}"]), n
    assert {k.split("/")[1] for k in final.tensors if k.startswith("optim/")} == set(HEAD)
    assert len({k for k in final.tensors if k.startswith("optim/")}) == 3 * len(HEAD)   # exp_avg, exp_avg_sq, step
    # no gradients or optimizer state exist for the frozen parameters
    t = Trainer(m, shard, TaskRef(3, 0, 0))
    t.load(s0)
    seen = {}
    for i, layer in enumerate(t.model.layers):
        layer.register_forward_hook(lambda mod, inp, out, i=i: seen.__setitem__(i, out.requires_grad))
    t.train_step()
    assert seen == {0: False, 1: False, 2: True}                           # autograd starts at the head
    params = dict(t.model.named_parameters())
    assert all(params[n].grad is None and not params[n].requires_grad for n in FROZEN + BODY)
    assert all(params[n].grad is not None for n in HEAD)
    assert {id(p) for g in t.opt.param_groups for p in g["params"]} == {id(params[n]) for n in HEAD}


def test_module_task_replayable(mlp_job, tmp_path):
    m, shard, s0 = mlp_job
    task = TaskRef(3, 0, 2)                                                 # the body: frozen input layer and head
    r = run_task(m, s0, shard, task, tmp_path)
    for j in (0, 1):
        g = replay_segment(m, r.checkpoints[j].read_bytes(), shard, task)
        assert g[0] == r.trace[j] and g[-1] == r.trace[j + 1]
    mid = advance(m, r.checkpoints[1].read_bytes(), shard, task, 2)
    nxt = recompute_step(m, checkpoint_bytes(mid, m), shard, task)
    assert replay_segment(m, r.checkpoints[1].read_bytes(), shard, task)[3] == nxt.hash
    assert advance(m, s0, shard, task, 8).hash == r.final_hash


def test_load_checkpoint_optim_of_another_task_refused(mlp_job):
    m, shard, s0 = mlp_job
    t = Trainer(m, shard, TaskRef(3, 0, 1))                                 # trains body and head
    t.load(s0)
    t.train_step()
    st = t.snapshot()
    assert load_checkpoint(checkpoint_bytes(st, m), m).hash == st.hash
    forged = TrainState(st.tensors, st.step, TaskRef(3, 0, 0))              # task 0 has no body optimizer state
    with pytest.raises(StateInvalid, match="unexpected tensor 'optim/layers.1"):
        load_checkpoint(checkpoint_bytes(forged, m), m)
    with pytest.raises(StateInvalid, match="outside the module plan"):
        load_checkpoint(checkpoint_bytes(TrainState(st.tensors, st.step, TaskRef(3, 0, 7)), m), m)


def test_portable_gpt_module_tasks_train_and_replay(tmp_path):
    """portable-f32: autograd stops at frozen leading blocks (task 0), and frozen weights in
    the middle get no gradient while their inputs still do (task 2 trains the embeddings)."""
    m = build_module_manifest("gpt", determinism="portable-f32", steps_per_round=2, checkpoint_interval=1,
                              batch_size=4)
    shard = load_shard(char_shards()["shard-000"], m.data)
    s0 = initial_state(m)
    for index, changed in ((0, "top"), (2, "emb")):
        task = TaskRef(4, 0, index)
        r = run_task(m, s0, shard, task, tmp_path / str(index))
        mods = module_params(m)
        for name, params in mods.items():
            for n in params:
                same = torch.equal(r.final.tensors[f"model/{n}"], s0.tensors[f"model/{n}"])
                assert same == (name != changed), (index, n)
        assert {k.split("/")[1] for k in r.final.tensors if k.startswith("optim/")} == set(mods[changed])
        g = replay_segment(m, r.checkpoints[1].read_bytes(), shard, task)
        assert g == [r.trace[1], r.trace[2]]


def test_portable_linear_frozen_weight_no_grad():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 7, generator=g, requires_grad=True)
    w = torch.randn(3, 7, generator=g)
    b = torch.randn(3, generator=g, requires_grad=True)
    linear(x, w, b).square().sum().backward()
    assert w.grad is None and x.grad is not None and b.grad is not None
    x2, w2 = x.detach().clone().requires_grad_(True), w.clone().requires_grad_(True)
    linear(x2, w2, b.detach()).square().sum().backward()
    assert torch.equal(x2.grad, x.grad)


# --------------------------------------------------------------------------- aggregation
@pytest.fixture(scope="module")
def round0(mlp_job):
    """Finals of the three module tasks of round 0."""
    m, shard, s0 = mlp_job
    finals = []
    for i in range(3):
        t = Trainer(m, shard, TaskRef(3, 0, i))
        t.load(s0)
        for _ in range(m.steps_per_round):
            t.train_step()
        finals.append(t.snapshot())
    return finals


def test_aggregate_per_module_order_independent(mlp_job, round0):
    m, _, s0 = mlp_job
    hashes = set()
    for perm in itertools.permutations(range(3)):
        s = aggregate_states(m, [round0[i] for i in perm], [SAMPLES[i] for i in perm], s0)
        hashes.add(s.hash)
    assert len(hashes) == 1
    assert s.step == 0 and not any(k.startswith(("optim/", "outer/")) for k in s.tensors)


def test_aggregate_module_merged_from_its_trainers_only(mlp_job, round0):
    m, _, s0 = mlp_job
    s = aggregate_states(m, round0, SAMPLES, s0)

    def mean_of(tasks, n):                                                  # two inputs: order cannot matter
        (a, b) = tasks
        wa, wb = float(SAMPLES[a]), float(SAMPLES[b])
        x = round0[a].tensors[f"model/{n}"].double() * wa + round0[b].tensors[f"model/{n}"].double() * wb
        return (x / (wa + wb)).float()

    for n in HEAD:
        assert torch.equal(s.tensors[f"model/{n}"], mean_of((0, 1), n)), n
    for n in BODY:
        assert torch.equal(s.tensors[f"model/{n}"], mean_of((1, 2), n)), n
        assert not torch.equal(s.tensors[f"model/{n}"], mean_of((0, 1), n))  # task 0's untouched body left out
    for n in FROZEN:
        assert torch.equal(s.tensors[f"model/{n}"], s0.tensors[f"model/{n}"]), n


def test_run_aggregate_module_job_needs_round_input(mlp_job, round0):
    m, _, s0 = mlp_job
    blobs, hashes = [checkpoint_bytes(f, m) for f in round0], [f.hash for f in round0]
    with pytest.raises(StateInvalid, match="round_input"):
        run_aggregate(m, blobs, hashes)                                     # the old call
    with pytest.raises(StateInvalid, match="round_input"):
        aggregate_states(m, round0, SAMPLES)
    r = run_aggregate(m, blobs, hashes, checkpoint_bytes(s0, m), s0.hash)
    assert r.state.hash == aggregate_states(m, round0, SAMPLES, s0).hash
    assert run_aggregate(m, blobs, hashes, s0, s0.hash).trace == r.trace
    with pytest.raises(HashMismatch):
        run_aggregate(m, blobs, hashes, checkpoint_bytes(s0, m), round0[0].hash)
    with pytest.raises(StateInvalid, match="not shard index"):
        run_aggregate(m, blobs[::-1], hashes[::-1], s0, s0.hash)


def test_whole_model_aggregate_ignores_round_input(digits_bytes):
    m = build_manifest("mlp", steps_per_round=4, checkpoint_interval=2)
    shard = load_shard(digits_bytes["shard-000"], m.data)
    s0 = initial_state(m)
    finals = []
    for i in range(3):
        t = Trainer(m, shard, TaskRef(1, 0, i))
        t.load(s0)
        t.train_step()
        finals.append(t.snapshot())
    assert aggregate_states(m, finals, [1, 2, 3]).hash == aggregate_states(m, finals, [1, 2, 3], s0).hash
