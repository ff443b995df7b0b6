"""The exact matmul's splitting and finishing in C, on the CPU: same bits as the torch path, fewer passes.

Why: matmul.split_into and matmul._finish are a dozen small torch kernels per
operand (max, min, frexp, integer ops, copies, in-place adds), each a pass
over memory and a Python dispatch; on the CPU they took more time than the
float64 GEMMs themselves (scripts/bench_portable_ops.py --step-breakdown gpt).
split_kernels.c does the same IEEE operations in one or two passes. It is
compiled once per machine with the system C compiler (`cc`, or $CC) into the
user cache (XDG_CACHE_HOME/verity/kernels/<source and flags hash>/), with
-ffp-contract=off and no fast-math, and loaded with ctypes; GCC builds
AVX-512, AVX2 and baseline clones and picks one per CPU at load time (any of
them gives the same bits: elementwise IEEE ops and an exact max).

Nothing depends on it being there: without a compiler, on other devices, or
with VERITY_PORTABLE_KERNELS=torch, matmul.py runs its torch code, which
gives the same bits (tests/engine/test_portable_kernels.py checks that on
every layout, with inf, NaN, zeros and subnormals).
"""
from __future__ import annotations

import ctypes
import hashlib
import logging
import math
import os
import subprocess
import tempfile
import threading
from pathlib import Path

import torch

log = logging.getLogger(__name__)

SOURCES = [Path(__file__).with_name(n) for n in ("split_kernels.c", "elementwise_kernels.c")]
FLAGS = ["-O3", "-std=gnu11", "-fPIC", "-shared", "-ffp-contract=off", "-fno-fast-math", "-fno-strict-aliasing"]
ENV_SWITCH = "VERITY_PORTABLE_KERNELS"        # "torch": never use the C kernels
BUILD_TIMEOUT_S = 120

_lock = threading.Lock()
_lib: ctypes.CDLL | None = None
_tried = False

_L, _P, _I = ctypes.c_long, ctypes.c_void_p, ctypes.c_int


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "verity" / "kernels"


def _build(compiler: str) -> Path:
    """Compile split_kernels.c (once per source, flags and compiler) and return the library's path."""
    src = b"".join(p.read_bytes() for p in SOURCES)
    key = hashlib.sha256(src + " ".join([compiler, *FLAGS]).encode()).hexdigest()[:16]
    lib = _cache_dir() / key / "libverity_split.so"
    if lib.exists():
        return lib
    lib.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=lib.parent)
    os.close(fd)
    try:
        subprocess.run([compiler, *FLAGS, "-o", tmp, *map(str, SOURCES), "-lm"], check=True, capture_output=True,
                       timeout=BUILD_TIMEOUT_S)
        os.replace(tmp, lib)                    # atomic: concurrent builders each install a whole file
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return lib


def _load() -> ctypes.CDLL | None:
    global _lib, _tried
    with _lock:
        if _tried:
            return _lib
        _tried = True
        try:
            lib = ctypes.CDLL(str(_build(os.environ.get("CC", "cc"))))
        except (OSError, subprocess.SubprocessError) as exc:
            detail = getattr(exc, "stderr", b"") or b""
            log.info("portable C kernels unavailable (%s %s); using the torch path, same bits, slower",
                     exc, detail.decode(errors="replace")[-400:])
            return None
        lib.verity_split.restype = _L
        lib.verity_split.argtypes = [_P, _L, _L, _L, _L, _L, _L, _L, _L, _L, _P, _L, _L, _L, _L, _I, _I, _P, _P]
        lib.verity_split_across.restype = _L
        lib.verity_split_across.argtypes = [_P, _L, _L, _L, _L, _L, _L, _L, _L, _P, _L, _L, _L, _I, _I, _P, _P, _P]
        lib.verity_finish.restype = None
        lib.verity_finish.argtypes = [_P, _L, _L, _L, _L, _L, _I, _L, _P]
        lib.verity_exp.restype = _I
        lib.verity_exp.argtypes = [_P, _P, _L, _P, _P, _I]
        lib.verity_erf.restype = _I
        lib.verity_erf.argtypes = [_P, _P, _L, _P, _P, _I, _P, _I]
        lib.verity_tree_sum.restype = None
        lib.verity_tree_sum.argtypes = [_P, _P, _L, _L, _L, _L, _P]
        _lib = lib
        return lib


def usable(x: torch.Tensor) -> ctypes.CDLL | None:
    """The library, if x may use it (on the CPU, kernels not switched off), else None."""
    return prepare() if x.device.type == "cpu" else None


enabled = os.environ.get(ENV_SWITCH) != "torch"   # read once; tests flip this flag to compare both paths


def prepare() -> ctypes.CDLL | None:
    """The library, compiled (once per machine) and loaded on the first call; None when switched off or unavailable.
    Called ahead of a timed run (the doctor's ms per step, which feasibility estimates use): the compile is no step."""
    if not enabled:
        return None
    return _lib if _tried else _load()


def _merged_dims(t: torch.Tensor, lead: int) -> list[list[int]]:
    """t's first `lead` dims (those of size > 1), outermost first, in groups of neighbours that flatten."""
    groups: list[list[int]] = []
    for d in reversed([d for d in range(lead) if t.shape[d] != 1]):
        inner = groups[-1][0] if groups else None
        if inner is not None and t.stride(d) == t.stride(inner) * t.shape[inner]:
            groups[-1].insert(0, d)
        else:
            groups.append([d])
    return groups[::-1]


def _group_strides(t: torch.Tensor, groups: list[list[int]]) -> list[tuple[int, int]] | None:
    """[(size, stride)] of t's dims grouped as `groups` ([(1, 0)] for none); None if a group does not flatten in t."""
    out = []
    for g in groups:
        for outer, inner in zip(g, g[1:]):
            if t.stride(outer) != t.stride(inner) * t.shape[inner]:
                return None
        out.append((math.prod(t.shape[d] for d in g), t.stride(g[-1])))
    return out or [(1, 0)]


def _batched(t: torch.Tensor, lead: int) -> tuple[int, int] | None:
    """(P, batch stride) when t's first `lead` dims flatten into one strided batch dim, else None."""
    groups = _merged_dims(t, lead)
    return _group_strides(t, groups)[0] if len(groups) <= 1 else None


def split_into(lib: ctypes.CDLL, x: torch.Tensor, dim: int, bits: int, out: list[torch.Tensor]):
    """matmul.split_into in C: returns (handled, bad mask or None); handled False leaves the work to torch."""
    lines_last = dim == -1                     # rows of x are the lines; else its columns
    L = x.shape[-2] if lines_last else x.shape[-1]
    K = x.shape[-1] if lines_last else x.shape[-2]
    lead = x.dim() - 2
    if lead == 0:                                    # the common case, without the batch bookkeeping
        gx = go = [(1, 0)]
    else:
        groups = _merged_dims(x, lead)               # at most two batch groups: Q outer, P inner
        gx, go = _group_strides(x, groups), _group_strides(out[0], groups)
        if len(groups) > 2 or go is None:
            return False, None
    if x.numel() == 0 or (len(out) > 1 and any(o.stride() != out[0].stride() for o in out)):
        return False, None
    (Q, qx), (P, sb) = gx if len(gx) == 2 else [(1, 0), gx[0]]
    qo, ob = (go[0][1], go[1][1]) if len(go) == 2 else (0, go[0][1])
    sl, sk = (x.stride(-2), x.stride(-1)) if lines_last else (x.stride(-1), x.stride(-2))
    ol, ok = (out[0].stride(-2), out[0].stride(-1)) if lines_last else (out[0].stride(-1), out[0].stride(-2))
    os_ = (out[1].data_ptr() - out[0].data_ptr()) // 8 if len(out) > 1 else 0
    if len(out) > 2 and any(o.data_ptr() - out[0].data_ptr() != s * os_ * 8 for s, o in enumerate(out)):
        return False, None
    amax = torch.empty(Q * P * L, dtype=torch.float32)
    bad = torch.empty(Q * P * L, dtype=torch.uint8)
    if sk != 1 and sl == 1 and ol == 1:
        sigmas = torch.empty(L, dtype=torch.float64)
        nbad = lib.verity_split_across(x.data_ptr(), Q, qx, qo, P, L, K, sb, sk, out[0].data_ptr(), os_, ob, ok,
                                       len(out), bits, amax.data_ptr(), bad.data_ptr(), sigmas.data_ptr())
    else:
        nbad = lib.verity_split(x.data_ptr(), Q, qx, qo, P, L, K, sb, sl, sk, out[0].data_ptr(), os_, ob, ol, ok,
                                len(out), bits, amax.data_ptr(), bad.data_ptr())
    if not nbad:
        return True, None
    shape = list(x.shape)
    shape[dim] = 1
    return True, bad.view(torch.bool).reshape(shape)


def finish(lib: ctypes.CDLL, terms: list[torch.Tensor], out: torch.Tensor) -> bool:
    """matmul._finish's sum and rounding in C, into the contiguous float32 `out`; False leaves it to torch."""
    first = terms[0]
    lead = first.dim() - 2
    b = _batched(first, lead)
    if (b is None or first.stride(-1) != 1 or any(t.shape != first.shape or t.stride() != first.stride()
                                                   for t in terms) or out.shape != first.shape):
        return False
    ts = (terms[1].data_ptr() - first.data_ptr()) // 8 if len(terms) > 1 else 0
    if any(t.data_ptr() - first.data_ptr() != i * ts * 8 for i, t in enumerate(terms)):
        return False
    M, N = first.shape[-2], first.shape[-1]
    lib.verity_finish(first.data_ptr(), b[0], M, N, b[1], first.stride(-2), len(terms), ts, out.data_ptr())
    return True


_constants: dict[tuple[float, ...], torch.Tensor] = {}


def _f32s(values: tuple[float, ...]) -> torch.Tensor:
    """The float32 tensor of these (already float32-exact) constants, built once."""
    t = _constants.get(values)
    if t is None:
        t = _constants[values] = torch.tensor(values, dtype=torch.float32)
    return t


def exp(lib: ctypes.CDLL, x: torch.Tensor, consts: tuple[float, ...], poly: tuple[float, ...]) -> torch.Tensor:
    """transcendental.exp in C, for a contiguous CPU x; a new contiguous tensor."""
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    c, p = _f32s(consts), _f32s(poly)
    if lib.verity_exp(x.data_ptr(), out.data_ptr(), x.numel(), c.data_ptr(), p.data_ptr(), len(poly)):
        raise ValueError(f"elementwise_kernels.c's EXP_DEGREE is not len(EXP_P) = {len(poly)}")
    return out


def erf(lib: ctypes.CDLL, x: torch.Tensor, consts: tuple[float, ...], small: tuple[float, ...],
        mid: tuple[float, ...]) -> torch.Tensor:
    """transcendental.erf in C, for a contiguous CPU x; a new contiguous tensor."""
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    c, ps, pm = _f32s(consts), _f32s(small), _f32s(mid)
    if lib.verity_erf(x.data_ptr(), out.data_ptr(), x.numel(), c.data_ptr(), ps.data_ptr(), len(small),
                      pm.data_ptr(), len(mid)):
        raise ValueError(f"elementwise_kernels.c's ERF degrees are not {len(small)} and {len(mid)}")
    return out


def tree_sum(lib: ctypes.CDLL, x: torch.Tensor, d: int) -> torch.Tensor:
    """reduce.tree_sum of a contiguous CPU x over dim d (length >= 1), keepdim."""
    n = x.shape[d]
    outer, inner = math.prod(x.shape[:d]), math.prod(x.shape[d + 1:])
    p = 1 << (n - 1).bit_length()
    shape = list(x.shape)
    shape[d] = 1
    out = torch.empty(shape, dtype=torch.float32)
    scratch = _scratch_f32(p * inner)
    lib.verity_tree_sum(x.data_ptr(), out.data_ptr(), outer, n, inner, p, scratch.data_ptr())
    return out


_scratch_store = threading.local()


def _scratch_f32(numel: int) -> torch.Tensor:
    """A float32 scratch buffer of at least numel elements for this thread, reused across calls."""
    t = getattr(_scratch_store, "buf", None)
    if t is None or t.numel() < numel:
        t = torch.empty(max(numel, 1), dtype=torch.float32)
        _scratch_store.buf = t
    return t
