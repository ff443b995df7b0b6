"""The decoder family (engine/decoder.py, portable/decoder.py): config, names, native vs portable, RoPE table,
portable training bits across threads and ISA, manifest checks and the reference vector."""
import hashlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from pydantic import ValidationError

from verity.engine.checkpoint import initial_state
from verity.engine.decoder import DecoderConfig, rope_table
from verity.engine.determinism import deterministic
from verity.engine.estimate import estimate_step_flops, task_memory_breakdown
from verity.engine.models import DecoderSpec, build_model, count_parameters, init_model
from verity.engine.portable import decoder as PD
from verity.engine.portable.layers import cross_entropy
from verity.engine.portable.models import contraction_lengths
from verity.engine.reference import TASK, reference_manifest, reference_shard, run_reference
from verity.engine.trainer import Trainer
from verity.errors import ManifestInvalid

from engine_builders import TEXT, build_manifest

VECTORS = Path(__file__).resolve().parents[1] / "vectors"
HELPER = Path(__file__).with_name("_portable_task.py")
GPT2 = dict(vocab_size=50, block_size=16, n_layer=2, n_head=4, n_embd=32, positions="learned", norm="layernorm",
            activation="gelu_tanh", bias=True, tie_embeddings=True)
LLAMA = dict(vocab_size=50, block_size=16, n_layer=2, n_head=4, n_kv_head=2, n_embd=32, intermediate_size=48)
SHAPES = {"gpt2": GPT2, "llama": LLAMA, "gelu-untied": {**GPT2, "activation": "gelu", "tie_embeddings": False,
                                                        "positions": "rope", "norm": "rmsnorm", "n_kv_head": 1}}


def spec(**cfg) -> DecoderSpec:
    return DecoderSpec.model_validate({"arch": "decoder", "config": cfg})


# --------------------------------------------------------------------------- config and names
def test_config_defaults_and_validation():
    c = DecoderConfig(vocab_size=10, block_size=8, n_layer=1, n_head=4, n_embd=16)
    assert (c.positions, c.norm, c.activation, c.bias, c.tie_embeddings, c.n_kv_head) == \
        ("rope", "rmsnorm", "swiglu", False, False, None)
    assert DecoderConfig.model_validate_json('{"vocab_size": 10, "block_size": 8, "n_layer": 1, "n_head": 2, '
                                             '"n_embd": 8, "rope_theta": 500000}').rope_theta == 500000.0
    bad = [dict(n_kv_head=3), dict(n_embd=18), dict(n_embd=12, n_head=4),        # kv heads, multiple, odd rope head
           dict(rope_theta=0.0), dict(norm_eps=0.1), dict(activation="relu"), dict(block_size=8193),
           dict(intermediate_size=0), dict(unknown=1)]
    for b in bad:
        with pytest.raises(ValidationError):
            DecoderConfig(**{**dict(vocab_size=10, block_size=8, n_layer=1, n_head=4, n_embd=16), **b})
    DecoderConfig(vocab_size=10, block_size=8, n_layer=1, n_head=4, n_embd=12, positions="learned")  # odd head ok


def _names(cfg):
    with torch.device("meta"):
        return {k: tuple(v.shape) for k, v in build_model(spec(**cfg), "meta").state_dict().items()}


def test_state_dict_names_gpt2_shape():
    n = _names(GPT2)
    want = {"wte.weight": (50, 32), "wpe.weight": (16, 32), "ln_f.weight": (32,), "ln_f.bias": (32,)}
    for i in range(2):
        p = f"h.{i}."
        want.update({p + "ln_1.weight": (32,), p + "ln_1.bias": (32,), p + "ln_2.weight": (32,), p + "ln_2.bias": (32,)})
        for proj in "qkvo":
            want.update({p + f"attn.{proj}_proj.weight": (32, 32), p + f"attn.{proj}_proj.bias": (32,)})
        want.update({p + "mlp.up_proj.weight": (128, 32), p + "mlp.up_proj.bias": (128,),
                     p + "mlp.down_proj.weight": (32, 128), p + "mlp.down_proj.bias": (32,)})
    assert n == want and list(n)[:2] == ["wte.weight", "wpe.weight"]   # no lm_head: tied to wte


def test_state_dict_names_llama_shape():
    n = _names(LLAMA)
    want = {"wte.weight": (50, 32), "ln_f.weight": (32,), "lm_head.weight": (50, 32)}
    for i in range(2):
        p = f"h.{i}."
        want.update({p + "ln_1.weight": (32,), p + "ln_2.weight": (32,),
                     p + "attn.q_proj.weight": (32, 32), p + "attn.k_proj.weight": (16, 32),
                     p + "attn.v_proj.weight": (16, 32), p + "attn.o_proj.weight": (32, 32),
                     p + "mlp.gate_proj.weight": (48, 32), p + "mlp.up_proj.weight": (48, 32),
                     p + "mlp.down_proj.weight": (32, 48)})
    assert n == want


def test_init_weights_gpt2_style_and_portable_init():
    m = init_model(spec(**GPT2), 3)
    sd = m.state_dict()
    assert torch.equal(sd["h.0.ln_1.weight"], torch.ones(32)) and not sd["h.0.attn.q_proj.bias"].any()
    assert 0.015 < sd["wte.weight"].std().item() < 0.025
    assert sd["h.1.mlp.down_proj.weight"].std().item() < 0.02 / math.sqrt(4) * 1.3
    p = init_model(spec(**LLAMA), 3, portable=True).state_dict()
    q = init_model(spec(**LLAMA), 3, portable=True).state_dict()
    assert all(torch.equal(p[k], q[k]) for k in p) and torch.equal(p["ln_f.weight"], torch.ones(32))


# --------------------------------------------------------------------------- native vs portable
def _pair(cfg, seed=5):
    s = spec(**cfg)
    native = init_model(s, seed)
    portable = build_model(s, "cpu", portable=True)
    portable.load_state_dict(native.state_dict())
    idx = torch.randint(0, cfg["vocab_size"], (3, cfg["block_size"]), generator=torch.Generator().manual_seed(seed))
    return native, portable, idx


@pytest.mark.parametrize("shape", list(SHAPES))
def test_portable_forward_and_backward_match_native(shape):
    native, portable, idx = _pair(SHAPES[shape])
    y, yp = native(idx), portable(idx)
    assert yp.dtype == torch.float32 and yp.shape == (3, 16, 50)
    torch.testing.assert_close(yp, y, rtol=1e-5, atol=1e-5)
    target = torch.randint(0, 50, (3, 16), generator=torch.Generator().manual_seed(9))
    F.cross_entropy(y.flatten(0, 1), target.flatten()).backward()
    cross_entropy(yp, target).backward()
    scale = max(p.grad.abs().max().item() for p in native.parameters())
    for (name, p), q in zip(native.named_parameters(), portable.parameters()):
        err = (p.grad - q.grad).abs().max().item()
        assert err <= 1e-5 * max(p.grad.abs().max().item(), 1e-3 * scale), (name, err)


def test_native_matches_huggingface_formulas():
    """RoPE as Llama's rotate_half, GQA head j reads kv head j // n_rep, gelu_new, RMSNorm: one block by hand."""
    cfg = {**LLAMA, "n_layer": 1}
    m = init_model(spec(**cfg), 1)
    x = torch.randn(2, 16, 32, generator=torch.Generator().manual_seed(2))
    blk = m.h[0]
    h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * blk.ln_1.weight
    q = (h @ blk.attn.q_proj.weight.T).view(2, 16, 4, 8).transpose(1, 2)
    k = (h @ blk.attn.k_proj.weight.T).view(2, 16, 2, 8).transpose(1, 2)
    v = (h @ blk.attn.v_proj.weight.T).view(2, 16, 2, 8).transpose(1, 2)
    pos = torch.arange(16, dtype=torch.float64)
    freqs = torch.outer(pos, 10000.0 ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 8))
    emb = torch.cat([freqs, freqs], -1)
    cos, sin = emb.cos().float(), emb.sin().float()

    def rot(t):
        return t * cos + torch.cat([-t[..., 4:], t[..., :4]], -1) * sin
    q, k = rot(q), rot(k)
    k, v = k[:, [0, 0, 1, 1]], v[:, [0, 0, 1, 1]]
    att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    y = x + att.transpose(1, 2).reshape(2, 16, 32) @ blk.attn.o_proj.weight.T
    torch.testing.assert_close(blk.attn(blk.ln_1(x), m.rope(16, x.device)) + x, y, rtol=1e-5, atol=1e-5)
    t = torch.randn(1000, generator=torch.Generator().manual_seed(3)) * 4
    gelu_new = 0.5 * t * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (t + 0.044715 * torch.pow(t, 3.0))))
    torch.testing.assert_close(PD.gelu_tanh(t), gelu_new, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(PD.silu(t), F.silu(t), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("fn, ref", [(PD.silu, F.silu), (PD.gelu_tanh, lambda x: F.gelu(x, approximate="tanh"))])
def test_portable_activation_gradients(fn, ref):
    """As accurate as torch's own float32 op against float64 (as test_portable_training's layer cases)."""
    x = (torch.randn(4096, generator=torch.Generator().manual_seed(4)) * 5).requires_grad_(True)
    xn, x64 = x.detach().clone().requires_grad_(True), x.detach().double().requires_grad_(True)
    fn(x).sum().backward()
    ref(xn).sum().backward()
    ref(x64).sum().backward()
    err_p, err_n = ((g.double() - x64.grad).abs().max().item() for g in (x.grad, xn.grad))
    assert err_p <= 4 * err_n + 1e-6, (err_p, err_n)


def test_portable_rms_norm_and_repeat_kv_gradients():
    g = torch.Generator().manual_seed(6)
    x, w = torch.randn(5, 7, 24, generator=g, dtype=torch.float64) * 2, torch.randn(24, generator=g, dtype=torch.float64)
    leaves = [x.float().requires_grad_(True), w.float().requires_grad_(True)]
    ref = [x.clone().requires_grad_(True), w.clone().requires_grad_(True)]
    gy = torch.randn(5, 7, 24, generator=g, dtype=torch.float64)
    PD.rms_norm(leaves[0], leaves[1], 1e-5).backward(gy.float())
    (ref[0] * torch.rsqrt(ref[0].pow(2).mean(-1, keepdim=True) + 1e-5) * ref[1]).backward(gy)
    for a, b in zip(leaves, ref):
        torch.testing.assert_close(a.grad.double(), b.grad, rtol=1e-5, atol=1e-5)
    kv = torch.randn(2, 3, 5, 4, generator=g).requires_grad_(True)
    out = PD.repeat_kv(kv, 4)
    assert torch.equal(out[:, 5], kv[:, 1].detach())          # head 5 reads kv head 5 // 4
    go = torch.randn(out.shape, generator=g)
    out.backward(go)
    torch.testing.assert_close(kv.grad, go.view(2, 3, 4, 5, 4).sum(2), rtol=1e-6, atol=1e-6)


# --------------------------------------------------------------------------- RoPE table
def test_rope_table_close_to_float64_and_bitwise_pinned():
    cos, sin = rope_table(1024, 64, 10000.0)
    i = torch.arange(32, dtype=torch.float64)
    f = torch.outer(torch.arange(1024, dtype=torch.float64), 10000.0 ** (-2 * i / 64))
    f = torch.cat([f, f], -1)
    for t, r in ((cos, f.cos()), (sin, f.sin())):
        assert t.dtype == torch.float32 and t.shape == (1024, 64)
        assert ((t.double() - r).abs() <= 2.0 ** -24 * r.abs() + 1e-12).all()    # within half an ulp (+ f64 noise)
    assert torch.equal(cos[:, :32], cos[:, 32:]) and torch.equal(sin[0], torch.zeros(64))
    rope_table.cache_clear()
    c2, s2 = rope_table(64, 16, 10000.0)
    # the recorded bits: a change here changes every rope job's trace
    assert hashlib.sha256(c2.numpy().tobytes() + s2.numpy().tobytes()).hexdigest() == \
        "8425ceac5be0bb4ad82b3057c71009dd1093362adb353a42bc459fd80ef062b8"
    assert torch.equal(c2, rope_table(64, 16, 10000.0)[0])                # cached, and the same bits again


# --------------------------------------------------------------------------- portable training bits
def _step_state(threads: int) -> dict:
    m = reference_manifest("portable-f32", "decoder")
    old = torch.get_num_threads()
    try:
        with deterministic("portable-f32"):
            torch.set_num_threads(threads)
            tr = Trainer(m, reference_shard("decoder", m), TASK, "cpu")
            tr.load(initial_state(m))
            tr.train_step()
            tr.train_step()
            return {k: v.clone() for k, v in tr.model.state_dict().items()}
    finally:
        torch.set_num_threads(old)


def test_portable_steps_bitwise_equal_across_threads():
    a, b = _step_state(1), _step_state(2)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_portable_reference_root_under_default_aten_kernels(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "OMP_NUM_THREADS")}
    env["ATEN_CPU_CAPABILITY"] = "default"
    proc = subprocess.run([sys.executable, str(HELPER), str(tmp_path), "--threads", "2", "--arch", "decoder"],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    recorded = json.loads((VECTORS / "portable-f32.json").read_text())["tasks"]["decoder"]["root"]
    assert out["capability"] == "DEFAULT" and out["tasks"]["decoder"]["root"] == recorded


def test_reference_vector_matches_in_process(tmp_path):
    with deterministic("portable-f32"):
        root, ms = run_reference("portable-f32", "decoder", tmp_path)
    assert root == json.loads((VECTORS / "portable-f32.json").read_text())["tasks"]["decoder"]["root"] and ms > 0


# --------------------------------------------------------------------------- manifest and estimates
GPT2_SMALL = {"arch": "decoder", "config": {"vocab_size": 50257, "block_size": 1024, "n_layer": 12, "n_head": 12,
                                            "n_embd": 768, "positions": "learned", "norm": "layernorm",
                                            "activation": "gelu_tanh", "bias": True, "tie_embeddings": True}}
LM_DATA = {"task": "lm", "x_shape": [1024], "x_dtype": "int64", "y_shape": [1024], "vocab_size": 50257}


def test_gpt2_small_validates_and_counts_124m_without_allocating():
    for profile in ("cpu-f32-strict", "portable-f32"):
        m = build_manifest("decoder", model=GPT2_SMALL, data=LM_DATA, batch_size=8, determinism=profile)
    assert count_parameters(m.model) == 124_439_808                 # GPT-2 small, tied
    assert estimate_step_flops(m, 0) > 0 and task_memory_breakdown(m, 0)["parameters"] == 4 * 124_439_808
    assert contraction_lengths(m.model, 8, [1024]) == {"model.config": 50257, "batch_size": 8192}
    untied = {**GPT2_SMALL, "config": {**GPT2_SMALL["config"], "tie_embeddings": False}}
    assert count_parameters(spec(**untied["config"])) == 124_439_808 + 50257 * 768


def test_manifest_cross_checks_for_decoder():
    small = {"arch": "decoder", "config": {**LLAMA, "vocab_size": len(set(TEXT)) + 5, "block_size": 32}}
    m = build_manifest("decoder", model=small)                       # the model's vocab may exceed the data's
    assert m.model.config.vocab_size > m.data.vocab_size
    with pytest.raises(ManifestInvalid, match="row for every token id") as e:
        build_manifest("decoder", model={**small, "config": {**small["config"], "vocab_size": 10}})
    assert e.value.field == "model.config.vocab_size"
    with pytest.raises(ManifestInvalid, match="exceeds block_size"):
        build_manifest("decoder", model={**small, "config": {**small["config"], "block_size": 16}})
    with pytest.raises(ManifestInvalid, match="decoder needs lm data"):
        build_manifest("decoder", data={"task": "classification", "x_shape": [64], "x_dtype": "float32",
                                        "num_classes": 10})


def test_estimates_count_real_widths():
    base = build_manifest("decoder")
    wide = build_manifest("decoder", model={"arch": "decoder", "config": {
        **base.model.config.model_dump(), "n_kv_head": 4, "activation": "gelu"}})
    tied = build_manifest("decoder", model={"arch": "decoder", "config": {
        **base.model.config.model_dump(), "tie_embeddings": True}})
    assert estimate_step_flops(wide, 0) != estimate_step_flops(base, 0) > 0
    assert estimate_step_flops(tied, 0) == estimate_step_flops(base, 0)   # same GEMMs, the head's weight is wte
