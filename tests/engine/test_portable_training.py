"""Training under the portable-f32 profile: same traces whatever the threads or ATen ISA level.

The cross-configuration test runs MLP, CNN and GPT tasks through run_task (what a
node calls) in separate processes; the other tests check the pieces the models and
the trainer use against native torch and float64, and that the portable model
learns as well as the native strict profile.
"""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from verity.engine import TaskRef, evaluate, initial_state, load_shard, replay_segment, run_task
from verity.engine.determinism import apply_profile, check_environment, job_device
from verity.engine.manifest import load_manifest
from verity.engine.models import build_model, init_model
from verity.engine.portable import init as PI
from verity.engine.portable import layers as L
from verity.engine.portable.optim import PortableAdam, PortableSGD, pow_int
from verity.engine.trainer import Trainer, loss_fn, loss_for
from verity.errors import ManifestInvalid
from verity.cpu import widest_aten_capability

from engine_builders import build_manifest, char_shards, manifest_doc

HELPER = Path(__file__).with_name("_portable_task.py")
VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "portable-f32.json"   # what `verity node doctor` compares
CONFIGS = {
    "threads1": ({}, 1),
    "threads2": ({}, 2),
    "aten-default": ({"ATEN_CPU_CAPABILITY": "default"}, 1),
    # MKL's fastest branch for this CPU and ATen's widest kernels (AVX-512 where the CPU has it: ATen would run
    # AVX-512 kernels on a CPU without them and die of SIGILL)
    "mkl-auto-widest": ({"MKL_CBWR": "AUTO", "ATEN_CPU_CAPABILITY": widest_aten_capability()}, 1),
    # the torch code of every C fast path (what CUDA and machines without a C compiler run)
    "torch-kernels": ({"VERITY_PORTABLE_KERNELS": "torch"}, 2),
}
ISOLATED = ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "OMP_NUM_THREADS", "VERITY_PORTABLE_KERNELS")


def _run(tmp: Path, env_extra: dict, threads: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ISOLATED}
    env.update(env_extra)
    proc = subprocess.run([sys.executable, str(HELPER), str(tmp), "--threads", str(threads)],
                          capture_output=True, text=True, timeout=180, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_portable_traces_identical_across_threads_and_isa(tmp_path):
    runs = {name: _run(tmp_path / name, env, threads) for name, (env, threads) in CONFIGS.items()}
    assert runs["aten-default"]["capability"] == "DEFAULT" and runs["threads1"]["capability"] != "DEFAULT"
    assert runs["threads2"]["threads"] == 2 and runs["threads1"]["threads"] == 1   # the profile left them alone
    base = runs["threads1"]["tasks"]
    assert set(base) == {"mlp", "cnn", "gpt", "decoder", "resnet"}
    for arch, t in base.items():
        assert len(t["trace"]) >= 3 and len(set(t["trace"])) == len(t["trace"]), arch   # the state moved
    for name, run in runs.items():
        differing = [arch for arch in base if run["tasks"][arch] != base[arch]]
        assert not differing, f"portable traces differ under {name}: {differing}"
    recorded = {arch: t["root"] for arch, t in json.loads(VECTORS.read_text())["tasks"].items()}
    assert {arch: t["root"] for arch, t in base.items()} == recorded, \
        "portable roots differ from tests/vectors/portable-f32.json: the bits changed (or rerun scripts/make_vectors.py)"


# --------------------------------------------------------------------------- profile and manifest
def test_manifest_accepts_portable_on_cpu_and_cuda_jobs():
    for device in ("cpu", "cuda"):
        m = build_manifest("mlp", determinism="portable-f32", hardware={"device_class": device, "min_memory_mb": 1024})
        assert m.determinism == "portable-f32" and job_device(check_environment(m.determinism), device) == device
    with pytest.raises(ManifestInvalid, match="hardware.device_class"):
        load_manifest(json.dumps(manifest_doc(determinism="cpu-f32-strict",
                                              hardware={"device_class": "cuda", "min_memory_mb": 1024})).encode())


def test_manifest_refuses_portable_jobs_beyond_exact_gemm_length():
    big = {"batch_size": 4097}                                    # 4097 x 32 positions > 131072 rows per weight grad
    assert build_manifest("gpt", **big).determinism == "cpu-f32-strict"
    with pytest.raises(ManifestInvalid, match="portable-f32 sums at most 131072") as e:
        build_manifest("gpt", determinism="portable-f32", **big)
    assert e.value.field == "batch_size"
    wide = {"model": {"arch": "mlp", "config": {"in_features": 200000, "hidden": [4], "out_features": 10}},
            "data": {"task": "classification", "x_shape": [400, 500], "x_dtype": "float32", "num_classes": 10}}
    with pytest.raises(ManifestInvalid) as e:
        build_manifest("mlp", determinism="portable-f32", **wide)
    assert e.value.field == "model.config"


def test_portable_profile_pins_settings_but_not_threads():
    torch.set_num_threads(2)
    torch.use_deterministic_algorithms(False)
    p = apply_profile("portable-f32")
    assert p.portable and torch.get_num_threads() == 2
    assert torch.are_deterministic_algorithms_enabled()
    assert torch.get_float32_matmul_precision() == "highest" and not torch.backends.cuda.matmul.allow_tf32


# --------------------------------------------------------------------------- layers vs float64
def _grad_err(fp, fn, inputs, seed=0):
    """max |portable - float64| and |native float32 - float64| over the output and the input
    gradients, each relative to the reference's max |value|."""
    outs = {}
    for key, f, dt in (("p", fp, torch.float32), ("n", fn, torch.float32), ("ref", fn, torch.float64)):
        leaves = [x.to(dt).clone().requires_grad_(True) if x.is_floating_point() else x for x in inputs]
        y = f(*leaves)
        y.backward(torch.randn(y.shape, generator=torch.Generator().manual_seed(seed + 1), dtype=torch.float64).to(dt))
        outs[key] = [y.detach().double()] + [x.grad.double() for x in leaves if x.is_floating_point()]
    return {k: max(((a - r).abs().max() / r.abs().max()).item() for a, r in zip(outs[k], outs["ref"])) for k in ("p", "n")}


LAYER_CASES = {
    "softmax_causal": (lambda x: L.softmax(x.masked_fill(~torch.ones(9, 9, dtype=torch.bool).tril(), float("-inf"))),
                       lambda x: F.softmax(x.masked_fill(~torch.ones(9, 9, dtype=torch.bool).tril(), float("-inf")), -1),
                       lambda: [torch.randn(3, 9, 9) * 3]),
    "cross_entropy": (L.cross_entropy, lambda x, y: F.cross_entropy(x, y),
                      lambda: [torch.randn(37, 11) * 4, torch.randint(0, 11, (37,))]),
    "layer_norm": (lambda x, w, b: L.layer_norm(x, w, b, 1e-5), lambda x, w, b: F.layer_norm(x, (24,), w, b, 1e-5),
                   lambda: [torch.randn(5, 7, 24) * 2 + 1, torch.randn(24), torch.randn(24)]),
    "gelu": (L.gelu, F.gelu, lambda: [torch.randn(1000) * 3]),
    "embedding": (lambda i, w: L.embedding(i, w), lambda i, w: F.embedding(i, w),
                  lambda: [torch.randint(0, 13, (6, 40)), torch.randn(13, 8)]),
    "conv2d": (lambda x, w, b: L.conv2d(x, w, b, 2, 1), lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1),
               lambda: [torch.randn(4, 3, 9, 8), torch.randn(5, 3, 3, 3), torch.randn(5)]),
}


@pytest.mark.parametrize("name", list(LAYER_CASES))
def test_layer_forward_and_backward_as_accurate_as_native(name):
    fp, fn, make = LAYER_CASES[name]
    torch.manual_seed(3)
    err = _grad_err(fp, fn, make())
    assert err["p"] < 1e-5 and err["p"] <= 4 * err["n"] + 1e-6, err


def test_segment_sum_is_a_fixed_order_not_index_add():
    idx = torch.tensor([3, 0, 3, 3, 1, 3, 0, 3, 3])
    src = torch.tensor([[1e8], [1.0], [1.0], [-1e8], [2.0], [1.0], [5.0], [1.0], [0.5]])
    out = L.segment_sum_rows(idx, src, 5)
    assert out[:, 0].tolist() == [6.0, 2.0, 0.0, 0.0, 0.0]
    # row 3 gathers v = [1e8, 1, -1e8, 1, 1, 0.5] (stable order); the segmented scan's last element is
    # ((v5 + v4) + (v3 + v2)) + (v1 + v0) = 0 in float32, where a sequential loop (index_add_ on a CPU)
    # gives 2.5: the order is the scan's, fixed by the indices alone
    v = [torch.tensor(x, dtype=torch.float32) for x in (1e8, 1.0, -1e8, 1.0, 1.0, 0.5)]
    assert (((v[5] + v[4]) + (v[3] + v[2])) + (v[1] + v[0])).item() == 0.0
    assert torch.zeros(5, 1).index_add_(0, idx, src)[3].item() == 2.5


def test_portable_init_distributions_and_no_global_rng():
    g = torch.Generator().manual_seed(5)
    u = PI.uniform_(torch.empty(20000), 0.3, g)
    assert u.abs().max() <= 0.3 and abs(u.mean()) < 0.01 and abs(u.std() - 0.3 / math.sqrt(3)) < 0.005
    z = PI.normal_(torch.empty(20001), 0.02, g)
    assert torch.isfinite(z).all() and abs(z.mean()) < 0.001 and abs(z.std() - 0.02) < 0.0005
    m = build_manifest("gpt", determinism="portable-f32")
    state = torch.random.get_rng_state()
    a = init_model(m.model, seed=3, portable=True).state_dict()
    assert torch.equal(torch.random.get_rng_state(), state)
    b = init_model(m.model, seed=3, portable=True).state_dict()
    native = init_model(m.model, seed=3).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a) and list(a) == list(native)
    assert abs(a["wte.weight"].std() - native["wte.weight"].std()) < 0.002


def test_portable_gpt_trains_on_char_shard():
    m = build_manifest("gpt", determinism="portable-f32")
    t = Trainer(m, load_shard(char_shards()["shard-000"], m.data), TaskRef(1, 0, 0), "any")
    t.load(initial_state(m))
    losses = [float(t.train_step()) for _ in range(30)]
    assert sum(losses[-5:]) / 5 < 0.8 * sum(losses[:5]) / 5, losses


# --------------------------------------------------------------------------- optimizers vs torch.optim
OPTIMS = {
    "sgd": (lambda ps: PortableSGD(ps, lr=0.1), lambda ps: torch.optim.SGD(ps, lr=0.1, foreach=False)),
    "sgd-momentum-wd": (lambda ps: PortableSGD(ps, lr=0.05, momentum=0.9, weight_decay=0.01),
                        lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=0.01, foreach=False)),
    "adam-l2": (lambda ps: PortableAdam(ps, lr=0.01, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.01, decoupled=False),
                lambda ps: torch.optim.Adam(ps, lr=0.01, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.01, foreach=False)),
    "adamw": (lambda ps: PortableAdam(ps, lr=0.01, betas=(0.8, 0.999), eps=1e-6, weight_decay=0.1, decoupled=True),
              lambda ps: torch.optim.AdamW(ps, lr=0.01, betas=(0.8, 0.999), eps=1e-6, weight_decay=0.1, foreach=False)),
}


@pytest.mark.parametrize("name", list(OPTIMS))
def test_portable_optimizer_follows_torch_optim(name):
    mk_p, mk_n = OPTIMS[name]
    g = torch.Generator().manual_seed(1)
    p0 = torch.randn(50, 7, generator=g)
    grads = [torch.randn(50, 7, generator=g) for _ in range(6)]
    a, b = p0.clone().requires_grad_(True), p0.clone().requires_grad_(True)
    oa, ob = mk_p([a]), mk_n([b])
    for gr in grads:
        a.grad, b.grad = gr.clone(), gr.clone()
        oa.step()
        ob.step()
    assert torch.allclose(a, b, rtol=1e-5, atol=1e-6) and not torch.equal(a, p0)
    sa, sb = oa.state[a], ob.state[b]
    assert list(sa) == list(sb)                                          # same state keys, same order
    for k in sa:
        assert sa[k].dtype == sb[k].dtype and sa[k].shape == sb[k].shape and sa[k].device == sb[k].device
        assert torch.allclose(sa[k], sb[k], rtol=1e-5, atol=1e-7), k


def test_pow_int_is_binary_powering():
    assert pow_int(0.999, 0) == 1.0 and pow_int(0.9, 1) == 0.9
    assert pow_int(0.9, 3) == (0.9 * (0.9 * 0.9)) and math.isclose(pow_int(0.999, 1000), 0.999 ** 1000, rel_tol=1e-13)
    with pytest.raises(ValueError):
        pow_int(0.9, -1)


# --------------------------------------------------------------------------- the trainer and runner paths
def test_portable_trainer_uses_portable_model_loss_optimizer():
    m = build_manifest("gpt", determinism="portable-f32")
    shard = load_shard(char_shards()["shard-000"], m.data)
    tr = Trainer(m, shard, TaskRef(1, 0, 0), "any")
    assert type(tr.model).__name__ == "PortableGPT" and isinstance(tr.opt, PortableAdam)
    assert tr.loss is L.cross_entropy and loss_for(False) is loss_fn and tr.device.type == "cpu"
    native = build_model(m.model, "meta")
    assert [n for n, _ in tr.model.named_parameters()] == [n for n, _ in native.named_parameters()]


def test_portable_replay_matches_trace(tmp_path, digits_bytes):
    m = build_manifest("mlp", determinism="portable-f32", steps_per_round=8, checkpoint_interval=4,
                       optimizer={"name": "sgd", "lr": 0.1, "momentum": 0.9})
    shard = load_shard(digits_bytes["shard-000"], m.data, samples=539)
    r = run_task(m, initial_state(m), shard, TaskRef(2, 0, 0), tmp_path)
    g = replay_segment(m, r.checkpoints[1].read_bytes(), shard, TaskRef(2, 0, 0))
    assert g[0] == r.trace[1] and g[-1] == r.trace[2]


def _held_out_accuracy(m, state, digits_bytes) -> float:
    correct = n = 0
    for name in ("shard-001", "shard-002", "eval"):
        e = evaluate(m, state, load_shard(digits_bytes[name], m.data))
        correct += round(e.accuracy * e.samples)
        n += e.samples
    return 100.0 * correct / n


def test_portable_mlp_learns_like_native_strict(tmp_path, digits_bytes):
    acc, roots = {}, {}
    for prof in ("cpu-f32-strict", "portable-f32"):
        m = build_manifest("mlp", determinism=prof, steps_per_round=300, checkpoint_interval=300)
        shard = load_shard(digits_bytes["shard-000"], m.data, samples=539)
        r = run_task(m, initial_state(m), shard, TaskRef(3, 0, 0), tmp_path / prof)
        acc[prof], roots[prof] = _held_out_accuracy(m, r.final, digits_bytes), r.root
    assert roots["portable-f32"] != roots["cpu-f32-strict"]         # really two different code paths
    assert acc["cpu-f32-strict"] > 85.0, acc                          # the schedule learns at all
    assert math.isclose(acc["portable-f32"], acc["cpu-f32-strict"], abs_tol=1.0), acc
