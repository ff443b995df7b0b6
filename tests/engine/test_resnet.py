"""The resnet family (engine/resnet.py, portable/resnet.py): config, parameters, native and portable passes,
portable training bits across threads and ATen ISA level, and the shape helpers the zoo, manifest and estimates use."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from pydantic import ValidationError

from verity.engine.models import _on_meta
from verity.engine.portable import layers as L
from verity.engine.portable.optim import PortableAdam
from verity.engine.portable.resnet import PortableResNet, channel_affine, group_norm, init_portable
from verity.engine.resnet import (ResNet, ResNetConfig, check_resnet_data, resnet_activation_stages,
                                  resnet_contraction_lengths, resnet_gemms, resnet_parameter_count, resnet_stage_order)

SMALL = dict(in_channels=3, height=9, width=7, num_classes=5, widths=[4, 8], blocks=2, groups=2)
ISOLATED = ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "OMP_NUM_THREADS", "VERITY_PORTABLE_KERNELS")


def _cfg(**kw) -> ResNetConfig:
    return ResNetConfig(**{**SMALL, **kw})


def _build(cfg: ResNetConfig, portable: bool = False) -> torch.nn.Module:
    with _on_meta():
        model = (PortableResNet if portable else ResNet)(cfg)
    return model.to_empty(device="cpu")


def _native(cfg: ResNetConfig, seed: int = 0) -> ResNet:
    model = _build(cfg)
    model.init_weights(torch.Generator().manual_seed(seed))
    return model


def _exact_inputs(shape, seed: int) -> torch.Tensor:
    """Small exact float32 values from integer draws (torch.randn's CPU kernel is vectorised per ISA)."""
    k = torch.randint(-(1 << 12), 1 << 12, shape, generator=torch.Generator().manual_seed(seed))
    return k.to(torch.float32) * (2.0 ** -11)


# --------------------------------------------------------------------------- config
def test_config_validates():
    c = _cfg()
    assert c.norm_eps == 1e-5 and c.widths == [4, 8]
    assert _cfg(widths=[3, 6], groups=8).widths == [3, 6]            # narrower than groups: one group per channel
    with pytest.raises(ValidationError, match=r"widths\[1\] = 6 is not a multiple of its GroupNorm groups"):
        _cfg(widths=[4, 6], groups=4)
    bad = [dict(widths=[]), dict(widths=[4] * 7), dict(widths=[2048]), dict(blocks=0), dict(blocks=9),
           dict(groups=0), dict(groups=65), dict(in_channels=17), dict(height=0), dict(width=513),
           dict(num_classes=1), dict(norm_eps=0.0), dict(blocks="2"), dict(extra=1)]
    for kw in bad:
        with pytest.raises(ValidationError):
            _cfg(**kw)
    with pytest.raises(ValidationError):                           # frozen
        c.blocks = 3


def test_parameter_names_shapes_and_no_buffers():
    model = _build(_cfg())
    names = [n for n, _ in model.named_parameters()]
    block = ["conv1.weight", "norm1.weight", "norm1.bias", "conv2.weight", "norm2.weight", "norm2.bias"]
    short = ["shortcut.conv.weight", "shortcut.norm.weight", "shortcut.norm.bias"]
    assert names == (["stem.conv.weight", "stem.norm.weight", "stem.norm.bias"]
                     + [f"stages.0.0.{n}" for n in block] + [f"stages.0.1.{n}" for n in block]
                     + [f"stages.1.0.{n}" for n in block + short] + [f"stages.1.1.{n}" for n in block]
                     + ["head.weight", "head.bias"])
    shapes = dict(model.named_parameters())
    assert shapes["stem.conv.weight"].shape == (4, 3, 3, 3) and shapes["stages.1.0.conv1.weight"].shape == (8, 4, 3, 3)
    assert shapes["stages.1.0.shortcut.conv.weight"].shape == (8, 4, 1, 1) and shapes["head.weight"].shape == (5, 8)
    assert list(model.buffers()) == []                              # GroupNorm: no running statistics
    assert sum(p.numel() for p in model.parameters()) == resnet_parameter_count(_cfg())
    portable = _build(_cfg(), portable=True)
    assert [(n, p.shape) for n, p in portable.named_parameters()] == [(n, p.shape) for n, p in model.named_parameters()]
    assert _build(_cfg(widths=[4], blocks=1)).stages[0][0].shortcut is None      # identity shortcut


def test_init_from_generator_only():
    state = torch.random.get_rng_state()
    a, b = _native(_cfg(), 3).state_dict(), _native(_cfg(), 3).state_dict()
    assert torch.equal(torch.random.get_rng_state(), state)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert torch.equal(a["stem.norm.weight"], torch.ones(4)) and torch.equal(a["stages.0.0.norm2.bias"], torch.zeros(4))
    bound = 1 / (4 * 9) ** 0.5
    w = a["stages.0.0.conv1.weight"]
    assert w.abs().max() <= bound and w.std() > bound / 3
    assert a["head.bias"].abs().max() <= 1 / 8 ** 0.5 and a["head.bias"].abs().max() > 0
    p = _build(_cfg(), portable=True)
    init_portable(p, torch.Generator().manual_seed(3))
    q = _build(_cfg(), portable=True)
    init_portable(q, torch.Generator().manual_seed(3))
    ps, qs = p.state_dict(), q.state_dict()
    assert list(ps) == list(a) and all(torch.equal(ps[k], qs[k]) for k in ps)
    assert ps["stages.0.0.conv1.weight"].abs().max() <= bound and torch.equal(ps["stem.norm.weight"], torch.ones(4))
    assert torch.equal(torch.random.get_rng_state(), state)


def test_native_forward_shape_and_per_sample():
    model = _native(_cfg())
    x = torch.randn(6, 3, 9, 7, generator=torch.Generator().manual_seed(1))
    out = model(x)
    assert out.shape == (6, 5) and torch.isfinite(out).all()
    # GroupNorm is per sample: a sample's logits do not depend on the rest of the batch
    assert torch.allclose(model(x[2:3]), out[2:3], atol=1e-6)
    assert _native(_cfg(height=1, width=1, widths=[2, 2, 2], groups=1))(torch.randn(2, 3, 1, 1)).shape == (2, 5)


# --------------------------------------------------------------------------- portable vs native
def _loss_and_grads(model, x, y, portable: bool):
    model.zero_grad(set_to_none=True)
    xl = x.clone().requires_grad_(True)
    logits = model(xl)
    loss = (L.cross_entropy if portable else F.cross_entropy)(logits, y)
    loss.backward()
    return logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters()} | {"x": xl.grad}


@pytest.mark.parametrize("kw", [dict(), dict(widths=[6, 12, 9], blocks=1, groups=3, height=11, width=10)])
def test_portable_forward_and_gradients_match_native(kw):
    cfg = _cfg(**kw)
    nat = _native(cfg, 5)
    por = _build(cfg, portable=True)
    por.load_state_dict(nat.state_dict())
    with torch.no_grad():                                            # a non-trivial GroupNorm affine
        for (_, a), (_, b) in zip(nat.named_parameters(), por.named_parameters()):
            if a.dim() == 1:
                a.add_(torch.randn(a.shape, generator=torch.Generator().manual_seed(a.numel())) * 0.3)
                b.copy_(a)
    g = torch.Generator().manual_seed(2)
    x = torch.randn(7, cfg.in_channels, cfg.height, cfg.width, generator=g) * 2 + 0.5
    y = torch.randint(0, cfg.num_classes, (7,), generator=g)
    out_n, grads_n = _loss_and_grads(nat, x, y, False)
    out_p, grads_p = _loss_and_grads(por, x, y, True)
    assert (out_p - out_n).abs().max() <= 1e-5 * max(1.0, out_n.abs().max().item())
    assert grads_p.keys() == grads_n.keys()
    for k in grads_n:
        scale = grads_n[k].abs().max().item()
        assert scale > 0, k
        assert (grads_p[k] - grads_n[k]).abs().max().item() <= 2e-4 * scale + 1e-7, k


def test_group_norm_matches_native_with_affine_gradients():
    g = torch.Generator().manual_seed(4)
    x = torch.randn(5, 12, 6, 7, generator=g) * 3 + 1
    w, b = torch.randn(12, generator=g), torch.randn(12, generator=g)
    up = torch.randn(5, 12, 6, 7, generator=g)
    res = {}
    for key, fn, dt in (("p", lambda *a: group_norm(*a[:1], 4, *a[1:], 1e-5), torch.float32),
                        ("n", lambda *a: F.group_norm(a[0], 4, a[1], a[2], 1e-5), torch.float32),
                        ("ref", lambda *a: F.group_norm(a[0], 4, a[1], a[2], 1e-5), torch.float64)):
        leaves = [t.to(dt).clone().requires_grad_(True) for t in (x, w, b)]
        out = fn(*leaves)
        out.backward(up.to(dt))
        res[key] = [out.detach().double()] + [t.grad.double() for t in leaves]
    for i, name in enumerate(["out", "x", "weight", "bias"]):
        ref = res["ref"][i]
        err_p = ((res["p"][i] - ref).abs().max() / ref.abs().max()).item()
        err_n = ((res["n"][i] - ref).abs().max() / ref.abs().max()).item()
        assert err_p < 1e-5 and err_p <= 4 * err_n + 1e-6, (name, err_p, err_n)
    assert torch.allclose(group_norm(x, 4, None, None, 1e-5), F.group_norm(x, 4, None, None, 1e-5), atol=1e-5)


def test_channel_affine_gradients_are_fixed_tree_sums():
    g = torch.Generator().manual_seed(6)
    x = torch.randn(3, 4, 5, 5, generator=g)
    w, b = torch.randn(4, generator=g).requires_grad_(True), torch.randn(4, generator=g).requires_grad_(True)
    xl = x.clone().requires_grad_(True)
    up = torch.randn(3, 4, 5, 5, generator=g)
    channel_affine(xl, w, b).backward(up)
    from verity.engine.portable.reduce import tree_sum
    assert torch.equal(b.grad, tree_sum(up.transpose(0, 1).reshape(4, -1).contiguous(), -1))
    assert torch.equal(w.grad, tree_sum((up * x).transpose(0, 1).reshape(4, -1).contiguous(), -1))
    assert torch.equal(xl.grad, up * w.detach().reshape(1, 4, 1, 1))
    with pytest.raises(ValueError):
        channel_affine(x, w[:3], b)


# --------------------------------------------------------------------------- portable training bits
TRAIN_CFG = dict(in_channels=3, height=12, width=10, num_classes=4, widths=[4, 8], blocks=1, groups=2)


def _train_digest(threads: int, steps: int = 3) -> dict:
    """A few PortableAdam steps of a PortableResNet from portable init on exact inputs: sha256 of the parameters."""
    torch.set_num_threads(threads)
    cfg = ResNetConfig(**TRAIN_CFG)
    model = _build(cfg, portable=True)
    init_portable(model, torch.Generator().manual_seed(11))
    opt = PortableAdam(model.parameters(), lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, decoupled=True)
    x = _exact_inputs((16, 3, 12, 10), 1)
    y = torch.randint(0, 4, (16,), generator=torch.Generator().manual_seed(2))
    losses = []
    for s in range(steps):
        xb, yb = x[s % 2 * 8:(s % 2 + 1) * 8], y[s % 2 * 8:(s % 2 + 1) * 8]
        opt.zero_grad(set_to_none=True)
        loss = L.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    h = hashlib.sha256()
    for _, p in model.named_parameters():
        h.update(p.detach().contiguous().numpy().tobytes())
    return {"digest": h.hexdigest(), "losses": losses, "threads": torch.get_num_threads(),
            "capability": torch.backends.cpu.get_cpu_capability()}


def _subprocess_digest(env_extra: dict, threads: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ISOLATED}
    env.update(env_extra)
    code = (f"import sys, json; sys.path.insert(0, {str(Path(__file__).parent)!r}); import test_resnet; "
            f"print(json.dumps(test_resnet._train_digest({threads})))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_portable_training_bits_identical_across_threads():
    saved = torch.get_num_threads()
    try:
        one, two = _train_digest(1), _train_digest(2)
    finally:
        torch.set_num_threads(saved)
    assert one["threads"] == 1 and two["threads"] == 2
    assert one["digest"] == two["digest"] and one["losses"] == two["losses"]
    assert len(set(one["losses"])) == len(one["losses"])               # the state moved


def test_portable_training_bits_identical_across_isa_levels_and_kernels():
    """Fresh processes: the widest ATen kernels, ATen's default (no SIMD) build, and the torch code of every C fast
    path (what CUDA runs). Native training of the same task differs across these (checked by hand on AVX2)."""
    base = _subprocess_digest({}, 2)
    default = _subprocess_digest({"ATEN_CPU_CAPABILITY": "default"}, 1)
    torch_kernels = _subprocess_digest({"VERITY_PORTABLE_KERNELS": "torch"}, 2)
    assert default["capability"] == "DEFAULT" and base["capability"] != "DEFAULT"
    assert default["digest"] == base["digest"] and default["losses"] == base["losses"]
    assert torch_kernels["digest"] == base["digest"]
    assert _train_digest(1)["digest"] == base["digest"]                # and this process's own run


def test_portable_resnet_fits_a_batch():
    cfg = ResNetConfig(**TRAIN_CFG)
    model = _build(cfg, portable=True)
    init_portable(model, torch.Generator().manual_seed(1))
    opt = PortableAdam(model.parameters(), lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, decoupled=False)
    x = _exact_inputs((8, 3, 12, 10), 3)
    y = torch.arange(8) % 4
    losses = []
    for _ in range(25):
        opt.zero_grad(set_to_none=True)
        loss = L.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0], losses


# --------------------------------------------------------------------------- helpers for the zoo and estimates
def test_stage_helpers_are_consistent_with_the_parameters():
    cfg = _cfg()
    names = [n for n, _ in _build(cfg).named_parameters()]
    order = resnet_stage_order(cfg)
    assert order == ["stem.", "stages.0.0.", "stages.0.1.", "stages.1.0.", "stages.1.1.", "head."]
    assert all(sum(n.startswith(p) for p in order) == 1 for n in names)        # each parameter in exactly one stage
    gemms = resnet_gemms(cfg)
    assert [s for s, *_ in gemms] == sorted([s for s, *_ in gemms], key=order.index)   # forward order
    conv_weights = [n for n in names if n.endswith("conv.weight") or n.endswith("conv1.weight")
                    or n.endswith("conv2.weight") or n == "head.weight"]
    assert [w for _, w, _ in gemms] == conv_weights and all(f > 0 for *_, f in gemms)
    stages = resnet_activation_stages(cfg)
    assert [p for ps, _ in stages for p in ps] == order and all(e > 0 for _, e in stages)
    # hand count: stem 3x3 conv 3->4 at 9x7 positions; stage 1 downsamples to 5x4
    assert gemms[0] == ("stem.", "stem.conv.weight", 2 * 3 * 9 * 4 * 63)
    assert ("stages.1.0.", "stages.1.0.shortcut.conv.weight", 2 * 4 * 8 * 20) in gemms
    assert gemms[-1] == ("head.", "head.weight", 2 * 8 * 5)


def _native_flops(cfg: ResNetConfig) -> int:
    """Forward multiply-adds x 2 of every conv and the head, from the conv layers themselves via forward hooks."""
    model = _native(cfg)
    total = 0

    def hook(mod, inp, out):
        nonlocal total
        k = mod.weight[0].numel()
        total += 2 * k * out.numel()

    for m in model.modules():
        if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)):
            m.register_forward_hook(hook)
    model(torch.zeros(1, cfg.in_channels, cfg.height, cfg.width))
    return total


def test_flops_grow_with_blocks_and_match_the_layers():
    prev = 0
    for blocks in (1, 2, 3):
        cfg = _cfg(blocks=blocks)
        f = sum(x for *_, x in resnet_gemms(cfg))
        assert f == _native_flops(cfg) and f > prev
        a = sum(e for _, e in resnet_activation_stages(cfg))
        assert a > 0
        prev = f
    cfg = ResNetConfig(in_channels=3, height=32, width=32, num_classes=10, widths=[16, 32, 64], blocks=1, groups=8)
    assert sum(x for *_, x in resnet_gemms(cfg)) == _native_flops(cfg)


def test_contraction_lengths():
    cfg = ResNetConfig(in_channels=3, height=32, width=32, num_classes=10, widths=[16, 32, 64], blocks=1, groups=8)
    k = resnet_contraction_lengths(cfg, 32)
    assert k == {"model.config": 64 * 9, "batch_size": 32 * 32 * 32}
    wide = ResNetConfig(in_channels=3, height=4, width=4, num_classes=5000, widths=[8], blocks=1, groups=8)
    assert resnet_contraction_lengths(wide, 2) == {"model.config": 5000, "batch_size": 2 * 16}


def test_check_resnet_data():
    cfg = _cfg()
    ok = SimpleNamespace(task="classification", x_dtype="float32", x_shape=[3, 9, 7], num_classes=5)
    assert check_resnet_data(cfg, ok) is None
    assert check_resnet_data(cfg, SimpleNamespace(**{**vars(ok), "x_dtype": "int64"}))[0] == "data.task"
    assert check_resnet_data(cfg, SimpleNamespace(**{**vars(ok), "task": "lm"}))[0] == "data.task"
    assert check_resnet_data(cfg, SimpleNamespace(**{**vars(ok), "x_shape": [3, 7, 9]}))[0] == "data.x_shape"
    assert check_resnet_data(cfg, SimpleNamespace(**{**vars(ok), "x_shape": [63 * 3]}))[0] == "data.x_shape"
    assert check_resnet_data(cfg, SimpleNamespace(**{**vars(ok), "num_classes": 6}))[0] == "model.config.num_classes"
