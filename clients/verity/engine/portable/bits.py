"""Exact bit-level helpers shared by the portable ops.

Scaling by a power of two is exact in IEEE arithmetic (barring overflow or
underflow), but `torch.ldexp` is implemented as `x * pow(2, e)` and `pow` is
a library call whose result we would rather not trust across devices. These
helpers build the power of two from its exponent bits with integer ops only,
which every device evaluates identically.
"""
from __future__ import annotations

import math
import struct

import torch


def f32(value: float) -> float:
    """`value` rounded to the nearest float32, returned as a Python float.

    Constants passed to torch as Python scalars are converted to float32 by
    the kernel; pre-rounding them makes that conversion exact, so no device
    or code path can round them differently.
    """
    return struct.unpack("<f", struct.pack("<f", value))[0]


def sqrt_f32(x: torch.Tensor) -> torch.Tensor:
    """sqrt of a float32 tensor, correctly rounded, whatever library torch.sqrt dispatches to.

    Why: on the CPU torch.sqrt runs MKL's vector math (vsSqrt), whose float32
    results depend on MKL's code branch and so on the CPU: measured here (Intel
    Xeon, 4M random inputs) 0 results differ from the correctly rounded ones
    with MKL_CBWR=AVX2, 23,120 on MKL's AVX-512 branch and 674,474 with
    MKL_CBWR=COMPATIBLE; the portable-f32 vectors recorded on an AMD EPYC
    differed from this Intel machine's through it. Here the float32 input is
    widened exactly, its float64 square root taken and rounded once to float32.
    That is the correctly rounded float32 root even if the float64 root is off
    by a few float64 ulps: with x = N * 4**q, N an integer in [2**46, 2**48),
    a float32 rounding boundary of sqrt(N) is M = R + 1/2 (R an integer), and
    |N - M**2| >= 1/4 makes |sqrt(N) - M| > 2**-27, i.e. more than 2**-50
    relative, far above float64's error. NaN in gives NaN out; inputs are >= 0
    wherever the portable ops call it.
    """
    return torch.sqrt(x.to(torch.float64)).to(torch.float32)


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
    if may_sync(out) and not has_nan(x):
        return out
    return out.masked_fill_(torch.isnan(x), float("nan"))


def has_nan(x: torch.Tensor) -> bool:
    """Whether x holds a NaN, read back to the host: one max reduction (max propagates NaN), measured
    ~20x faster here than isnan(x).any(), which writes a full bool tensor first."""
    return x.numel() > 0 and math.isnan(x.amax().item())


def require_f32(name: str, t: torch.Tensor) -> None:
    """Portable ops are defined for float32 only: anything else is a caller bug."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype != torch.float32:
        raise TypeError(f"{name} must be float32 (portable ops are float32 in, float32 out), got {t.dtype}")


def _int_bits(v: torch.Tensor | float) -> torch.Tensor | int:
    """A float32 tensor's bits as an int32 view, or a Python float's float32 bits as a signed int."""
    if isinstance(v, torch.Tensor):
        require_f32("operand", v)
        return v.view(torch.int32)
    return struct.unpack("<i", struct.pack("<f", v))[0]


def where_f32(mask: torch.Tensor, a: torch.Tensor | float, b: torch.Tensor | float) -> torch.Tensor:
    """torch.where(mask, a, b) for float32 tensors (or Python floats, as float32), bit for bit, faster.

    Why: in this torch build every elementwise op with a bool operand
    (where, masked_fill, mask * x) runs an unvectorised loop, ~4 ns per
    element (measured: 1.0 ms for 512x512, against 0.18 ms here). This
    selects by integer ops on the bit patterns instead: with m = -mask (all
    ones or zero), ((a ^ b) & m) ^ b is a where m is set and b elsewhere.
    A pure copy of bits, like torch.where itself, so NaN payloads and signed
    zeros come through unchanged. Broadcasts like torch.where. Needs a bool
    mask and at least one tensor operand.
    """
    if mask.dtype != torch.bool:
        raise TypeError(f"mask must be bool, got {mask.dtype}")
    ai, bi = _int_bits(a), _int_bits(b)
    if not isinstance(ai, torch.Tensor) and not isinstance(bi, torch.Tensor):
        raise TypeError("where_f32 needs at least one tensor operand")
    m = mask.view(torch.uint8).to(torch.int32).neg_()          # 0 -> 0, 1 -> -1 (all 32 bits set)
    if isinstance(ai, torch.Tensor):
        out = torch.bitwise_and(torch.bitwise_xor(ai, bi), m)
    else:
        out = torch.bitwise_and(torch.bitwise_xor(bi, ai), m)
    if isinstance(bi, torch.Tensor) and broadcast_shape(out.shape, bi.shape) != tuple(out.shape):
        out = out.expand(broadcast_shape(out.shape, bi.shape)).contiguous()
    if isinstance(bi, torch.Tensor) or bi != 0:
        out ^= bi
    return out.view(torch.float32)


def broadcast_shape(a, b) -> tuple[int, ...]:
    """torch.broadcast_shapes(a, b) as a tuple, without its cost in the common cases (equal, or one
    empty): torch's version runs through its Python reference implementation (~30 us a call)."""
    a, b = tuple(a), tuple(b)
    if a == b or not b:
        return a
    if not a:
        return b
    return tuple(torch.broadcast_shapes(a, b))
