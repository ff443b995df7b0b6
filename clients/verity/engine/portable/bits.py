"""Exact bit-level helpers shared by the portable ops.

Scaling by a power of two is exact in IEEE arithmetic (barring overflow or
underflow), but `torch.ldexp` is implemented as `x * pow(2, e)` and `pow` is
a library call whose result we would rather not trust across devices. These
helpers build the power of two from its exponent bits with integer ops only,
which every device evaluates identically.
"""
from __future__ import annotations

import struct

import torch


def f32(value: float) -> float:
    """`value` rounded to the nearest float32, returned as a Python float.

    Constants passed to torch as Python scalars are converted to float32 by
    the kernel; pre-rounding them makes that conversion exact, so no device
    or code path can round them differently.
    """
    return struct.unpack("<f", struct.pack("<f", value))[0]


def pow2_f64(e: torch.Tensor) -> torch.Tensor:
    """2**e as float64, exactly, for integer-valued tensors with -1022 <= e <= 1023.

    Builds the IEEE bit pattern (biased exponent times 2**52, an integer
    multiply) and reinterprets it; no library call is involved.
    """
    return ((e.to(torch.int64) + 1023) * (1 << 52)).view(torch.float64)


def pow2_f32(e: torch.Tensor) -> torch.Tensor:
    """2**e as float32, exactly, for integer-valued tensors with -126 <= e <= 127."""
    return ((e + 127).to(torch.int32) * (1 << 23)).view(torch.float32)


def scale_f32_(x: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    """x *= 2**n in place, for float32 x and integer-valued float32 n in [-252, 254].

    The factor is applied in two exact halves, so only the last multiply can
    round (when the result is subnormal or overflows), and it rounds the same
    way everywhere. `n` is overwritten. NaN in x stays NaN whatever n holds.
    """
    half = torch.mul(n, 0.5).floor_()
    n.sub_(half)
    x.mul_(pow2_f32(half))
    return x.mul_(pow2_f32(n))


def may_sync(t: torch.Tensor) -> bool:
    """Whether reading a flag back from t's device is cheap (CPU), so rare-case work can be skipped.

    On accelerators a bool() of a device tensor stalls the stream, so the
    rare-case fixups (non-finite inputs) run unconditionally there instead;
    both paths give the same bits (tests/engine/test_portable_ops.py checks
    this by forcing the accelerator path on CPU).
    """
    return t.device.type == "cpu"


def canonical_nan_(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """Where x is NaN, set out to the one NaN bit pattern torch fills for float('nan').

    NaN payloads and signs that arithmetic propagates differ between x86, ARM
    and CUDA; a filled constant does not.
    """
    nan = torch.isnan(x)
    if not may_sync(out) or bool(nan.any()):
        out.masked_fill_(nan, float("nan"))
    return out


def require_f32(name: str, t: torch.Tensor) -> None:
    """Portable ops are defined for float32 only: anything else is a caller bug."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype != torch.float32:
        raise TypeError(f"{name} must be float32 (portable ops are float32 in, float32 out), got {t.dtype}")
