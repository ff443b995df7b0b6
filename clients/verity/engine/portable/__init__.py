"""Portable float32 ops: results that depend only on the inputs, never on ISA level, BLAS,
thread count or device (issue 10, the op layer of the portable profile).

Float32 in, float32 out, the same torch code on CPU and CUDA:
  matmul, linear   exact by construction (Ozaki splitting into float64 slices
                   whose GEMMs are exact), one rounding to float32 (matmul.py)
  sum, mean        fixed pairwise tree of elementwise adds (reduce.py)
  exp, log, tanh, erf
                   range reduction with exact power-of-two scaling and
                   Horner polynomials of separate mul/add ops (transcendental.py)
Each has a backward built from the same pieces (autograd.py). What each op
costs against its native counterpart: scripts/bench_portable_ops.py.

The portable-f32 profile (determinism.py) trains with these: layers.py
(softmax, cross-entropy, layer norm, GELU, embedding, conv2d), models.py (the
zoo's forward passes), init.py (initial weights), optim.py (SGD, Adam, AdamW).

Process-wide caveat: torch.set_flush_denormal(True) changes subnormal results;
a portable profile must leave it off.
"""
from verity.engine.portable.autograd import erf, exp, linear, log, matmul, mean, sum, tanh  # noqa: A004
from verity.engine.portable.matmul import DEFAULT_SCHEME, SCHEMES, exact_matmul

__all__ = ["matmul", "linear", "sum", "mean", "exp", "log", "tanh", "erf",
           "exact_matmul", "SCHEMES", "DEFAULT_SCHEME"]
