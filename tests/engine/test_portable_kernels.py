"""The C fast paths of the portable ops (verity.engine.portable.ckernels) give the torch path's bits.

Every comparison runs the same call twice in one process, once with the C kernels and once with
`ckernels.enabled = False` (the torch code, which is also what CUDA runs), and compares bit
patterns: splitting (rows and columns, every stride pattern exact_matmul meets, one to three
slices, rows with inf and NaN, zeros and subnormals), finishing, exp, erf, tanh, log, fixed-tree
sums, whole exact matmuls and a whole GPT training step.
"""
from __future__ import annotations

import hashlib

import pytest
import torch

from verity.engine.portable import ckernels
from verity.engine.portable import reduce as R
from verity.engine.portable import transcendental as T
from verity.engine.portable.matmul import SCHEMES, exact_matmul

pytestmark = pytest.mark.skipif(ckernels.usable(torch.zeros(1)) is None,
                                reason="no C compiler here: the torch path runs (tests/engine/test_portable_ops.py)")


def _both(fn, *args):
    """(C result, torch-path result) of fn(*args)."""
    saved = ckernels.enabled
    try:
        ckernels.enabled = True
        fast = fn(*args)
        ckernels.enabled = False
        slow = fn(*args)
    finally:
        ckernels.enabled = saved
    return fast, slow


def _bits(t: torch.Tensor) -> bytes:
    return t.detach().contiguous().view(torch.int32 if t.dtype == torch.float32 else torch.int64).numpy().tobytes()


def _assert_same(fn, *args):
    fast, slow = _both(fn, *args)
    assert fast.shape == slow.shape and fast.dtype == slow.dtype
    assert _bits(fast) == _bits(slow)


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _awkward(shape, g):
    """Values spanning many binades, with a row of zeros, subnormals, an inf and a NaN."""
    x = torch.randn(shape, generator=g) * torch.exp(torch.randn(shape, generator=g) * 3)
    flat = x.view(-1, shape[-1])
    flat[0] = 0.0
    flat[1] = torch.randn(shape[-1], generator=g) * 1e-41
    if flat.shape[0] > 3:
        flat[2, shape[-1] // 2] = float("inf")
        flat[3, 0] = float("nan")
    return x


def _qkv(g, B=3, T_=5, H=2, hd=4):
    """Attention's q, k, v: views into one (B, T, 3C) tensor, batch dims that do not flatten."""
    qkv = torch.randn(B, T_, 3 * H * hd, generator=g)
    q, k, v = qkv.split(H * hd, dim=2)
    return [t.view(B, T_, H, hd).transpose(1, 2) for t in (q, k, v)]


OPERANDS = {
    "row-major": lambda g: (torch.randn(33, 70, generator=g), torch.randn(70, 12, generator=g)),
    "weight-transposed": lambda g: (torch.randn(33, 70, generator=g), torch.randn(12, 70, generator=g).T),
    "a-transposed": lambda g: (torch.randn(70, 33, generator=g).T, torch.randn(70, 12, generator=g)),
    "awkward-a": lambda g: (_awkward((33, 70), g), torch.randn(70, 12, generator=g)),
    "awkward-b": lambda g: (torch.randn(12, 33, generator=g), _awkward((33, 70), g)),
    "awkward-b-transposed": lambda g: (torch.randn(12, 70, generator=g), _awkward((33, 70), g).T),
    "batched": lambda g: (torch.randn(3, 4, 17, 9, generator=g), torch.randn(3, 4, 9, 11, generator=g)),
    "broadcast": lambda g: (torch.randn(17, 9, generator=g), torch.randn(5, 9, 11, generator=g)),
    "attention-scores": lambda g: (lambda q, k, v: (q, k.transpose(-2, -1)))(*_qkv(g)),
    "attention-values": lambda g: (lambda q, k, v: (torch.randn(3, 2, 5, 5, generator=g), v))(*_qkv(g)),
    "one-element": lambda g: (torch.randn(1, 1, generator=g), torch.randn(1, 1, generator=g)),
}


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
@pytest.mark.parametrize("case", sorted(OPERANDS))
def test_exact_matmul_c_path_gives_torch_bits(scheme, case):
    a, b = OPERANDS[case](_gen(len(case)))
    _assert_same(lambda x, y: exact_matmul(x, y, scheme), a, b)


def test_scheme_1_or_2_takes_scheme_2_past_its_limit():
    """The profile's scheme: one GEMM while each operand keeps >= 20 bits, the exact 2-GEMM scheme beyond."""
    s = SCHEMES["1|2"]
    limit = SCHEMES["1"].max_contraction()
    assert s.resolve(limit) is s and s.resolve(limit + 1) is SCHEMES["2"]
    assert s.widths(limit) == SCHEMES["1"].widths(limit) and s.widths(limit + 1) == SCHEMES["2"].widths(limit + 1)
    g = _gen(5)
    for k in (limit, limit + 1):
        a, b = torch.randn(3, k, generator=g), torch.randn(k, 2, generator=g)
        want = exact_matmul(a, b, "1" if k == limit else "2")
        assert _bits(exact_matmul(a, b, "1|2")) == _bits(want)


def _elementwise_inputs():
    g = _gen(7)
    special = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1e-45, -1e-45, 1e-40, 3.4e38,
                            -3.4e38, 88.7, 88.72, 89.0, 89.5, -87.3, -103.9, -104.0, -150.0, 0.5, 1.0, -1.0, 3.99,
                            4.0, 4.01, 0.625, 0.9999999])
    u = torch.rand(20000, generator=g)
    return {"normal": torch.randn(5000, generator=g), "wide": torch.randn(5000, generator=g) * 50,
            "special": special, "mixed": torch.cat([special, torch.randn(300, generator=g)]),
            "tiny": torch.randn(300, generator=g) * 1e-38, "exp-scaling-range": (u - 0.5) * 260,
            "matrix": torch.randn(64, 33, generator=g) * 4, "erf-branches": (u - 0.5) * 12}


@pytest.mark.parametrize("fn", ["exp", "erf", "tanh", "log"])
def test_transcendental_c_path_gives_torch_bits(fn):
    f = getattr(T, fn)
    for name, x in _elementwise_inputs().items():
        x = x.abs() if fn == "log" else x
        fast, slow = _both(f, x)
        assert _bits(fast) == _bits(slow), name


@pytest.mark.parametrize("shape,dim", [((7, 13, 5), 1), ((7, 13, 5), 0), ((7, 13, 5), 2), ((512, 128), -1),
                                       ((512, 128), 0), ((3, 1, 4), 1), ((33,), 0), ((2, 4, 16, 16), -1)])
def test_tree_sum_c_path_gives_torch_bits(shape, dim):
    g = _gen(sum(shape))
    x = torch.randn(shape, generator=g) * torch.exp(torch.randn(shape, generator=g) * 3)
    for keepdim in (False, True):
        _assert_same(lambda t: R.tree_sum(t, dim, keepdim=keepdim), x)
    _assert_same(lambda t: R.tree_mean(t, dim), x)
    x.view(-1)[3] = float("nan")
    _assert_same(lambda t: R.tree_sum(t, dim), x)


def test_gpt_training_step_c_path_gives_torch_bits():
    """A whole portable-f32 GPT step (forward, backward, AdamW) from the same state: same new state."""
    from verity.engine import TaskRef, initial_state, load_shard
    from verity.engine.determinism import deterministic
    from verity.engine.reference import reference_manifest, reference_shard
    from verity.engine.trainer import Trainer

    m = reference_manifest("portable-f32", "gpt")

    def step():
        with deterministic(m.determinism):
            t = Trainer(m, reference_shard("gpt", m), TaskRef(9, 0, 1), "cpu")
            t.load(initial_state(m))
            t.train_step()
            t.train_step()
            h = hashlib.sha256()
            for name, p in sorted(t.model.state_dict().items()):
                h.update(name.encode() + _bits(p))
            return torch.tensor(list(h.digest()), dtype=torch.int64)

    fast, slow = _both(step)
    assert torch.equal(fast, slow)


def test_kernels_build_into_the_cache_once(tmp_path, monkeypatch):
    """A second build with the same source, flags and compiler reuses the cached library."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    first = ckernels._build("cc")
    mtime = first.stat().st_mtime_ns
    assert first.is_relative_to(tmp_path) and ckernels._build("cc") == first and first.stat().st_mtime_ns == mtime


def test_no_compiler_falls_back_to_torch(tmp_path, monkeypatch):
    """Without a working compiler the loader says so once and the torch path runs."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("CC", str(tmp_path / "no-such-compiler"))
    monkeypatch.setattr(ckernels, "_tried", False)
    monkeypatch.setattr(ckernels, "_lib", None)
    assert ckernels.usable(torch.zeros(1)) is None
    x = torch.randn(100, generator=_gen(3))
    assert _bits(T.exp(x)) == _bits(_both(T.exp, x)[1])
