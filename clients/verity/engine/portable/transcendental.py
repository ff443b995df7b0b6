"""exp, log, tanh and erf from IEEE basic operations in a fixed order, no autograd.

libm, SLEEF's vectorised routines and CUDA's intrinsics each round
differently, so `torch.exp` gives different bits per ISA level and device.
Here every function is range reduction with exact power-of-two scaling
(bits.scale_f32_, torch.frexp) followed by a polynomial evaluated Horner-style,
each multiply and each add a separate float32 tensor op. Eager torch runs
every op as its own kernel, so nothing can be contracted into an FMA, and
IEEE float32 add, subtract, multiply and divide are correctly rounded on every
CPU and GPU: the same inputs give the same bits everywhere. Ops run in place
on this module's own intermediates (same arithmetic, far fewer allocations);
selections are bits.where_f32 (torch.where's bits by integer ops, faster).
Odd functions are evaluated on |x| and given x's sign with copysign (IEEE
round-to-nearest is symmetric, so this is what evaluating on x would give).

Coefficients: exp, log and tanh use the Cephes single-precision minimax
polynomials (S. Moshier); erf on |x| < 1 uses Cephes' erff polynomial, and on
1 <= |x| < 4 a degree-12 least-squares fit of erf at Chebyshev nodes in
t = (|x| - 2.5) * 2/3, made for this module. Measured maximum errors against
float64 (tests/engine/test_portable_ops.py): exp 0.89 ulp, log 0.76, tanh 2.25,
erf 2.54.

Special values: NaN in gives the one canonical NaN out (bits.canonical_nan_);
exp(+inf) = inf, exp(-inf) = 0, overflow inf, deep underflow 0; log(0) = -inf,
log(x < 0) = NaN, log(+inf) = inf; tanh and erf saturate to +-1 and keep the
sign of zero. Subnormal results are produced, not flushed (torch's default);
torch.set_flush_denormal(True) would change them, so a portable profile must
leave it off.
"""
from __future__ import annotations

import torch

from verity.engine.portable import bits, ckernels
from verity.engine.portable.bits import f32, require_f32, scale_f32_


def horner(t: torch.Tensor, coefs: tuple[float, ...]) -> torch.Tensor:
    """coefs[0]*t**n + ... + coefs[n] as a new tensor: one mul and one add op per step, never fused."""
    p = torch.mul(t, coefs[0])
    p.add_(coefs[1])
    for c in coefs[2:]:
        p.mul_(t)
        p.add_(c)
    return p


LOG2E = f32(1.4426950408889634)
LN2_HI = 0.693359375              # 355/512: n * LN2_HI is exact for |n| < 2**15
LN2_LO = f32(-2.12194440e-4)
EXP_X_LO, EXP_X_HI = -104.0, 89.0  # beyond these exp is 0 or inf in float32 (reached naturally)
EXP_P = tuple(f32(c) for c in (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3,
                                4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1))


def exp(x: torch.Tensor) -> torch.Tensor:
    """e**x: x = n*ln2 + r with |r| <= ln2/2, e**r by polynomial, times 2**n exactly.

    Scaling: y = e**r is in [0.7, 1.5] (or NaN), so y * 2**floor(n/2) is
    exact and scale_f32_'s result is y * 2**n rounded once. When every n is
    in [-126, 127] (checked on the CPU with two reductions), 2**n is a normal
    float32 and one multiply rounds y * 2**n once too: the same bits, fewer
    ops (the common case outside softmax's masked entries).
    """
    require_f32("x", x)
    lib = ckernels.usable(x)
    if lib is not None and x.is_contiguous() and x.numel() > 0:
        return ckernels.exp(lib, x, (LOG2E, LN2_HI, LN2_LO, EXP_X_LO, EXP_X_HI), EXP_P)
    r = torch.clamp(x, EXP_X_LO, EXP_X_HI)   # NaN stays NaN (and then poisons every step)
    n = torch.mul(r, LOG2E).round_()         # round half to even: the same everywhere
    t = torch.mul(n, LN2_HI)                 # exact
    r.sub_(t)
    torch.mul(n, LN2_LO, out=t)
    r.sub_(t)
    z = torch.mul(r, r, out=t)
    y = horner(r, EXP_P)
    y.mul_(z)
    y.add_(r)
    y.add_(1.0)
    if bits.may_sync(n) and n.numel() > 0 and n.amin().item() >= -126.0 and n.amax().item() <= 127.0:
        y.mul_(bits.pow2_f32(n))             # the same bits as scale_f32_: see below
    else:
        scale_f32_(y, n)                     # overflow gives inf, deep underflow 0, as IEEE says
    return bits.canonical_nan_(x, y)


SQRT_HALF = f32(0.70710678118654752)
LOG_P = tuple(f32(c) for c in (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1,
                                -1.2420140846e-1, 1.4249322787e-1, -1.6668057665e-1,
                                2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1))


def log(x: torch.Tensor) -> torch.Tensor:
    """Natural log: x = m * 2**e with m in [sqrt(1/2), sqrt(2)), log(m) by polynomial in m-1."""
    require_f32("x", x)
    ok = (x > 0).logical_and_(x < float("inf"))        # False for NaN too
    m, e = torch.frexp(bits.where_f32(ok, x, 1.0))      # exact; subnormals handled by frexp
    e = e.to(torch.float32)
    low = (m < SQRT_HALF).to(torch.float32)
    e.sub_(low)
    t = torch.mul(m, low)
    m.add_(t)                                           # 2m or m, exact
    m.sub_(1.0)                                         # exact (Sterbenz)
    z = torch.mul(m, m, out=t)
    y = horner(m, LOG_P)
    y.mul_(m)
    y.mul_(z)
    y.add_(torch.mul(e, LN2_LO, out=low))
    y.sub_(torch.mul(z, 0.5, out=low))
    y.add_(m)
    y.add_(torch.mul(e, LN2_HI, out=low))               # e * LN2_HI is exact
    if not bits.may_sync(y) or not bool(ok.all()):
        special = torch.full_like(x, float("nan"))
        special.masked_fill_(x == 0, float("-inf"))
        special.masked_fill_(x == float("inf"), float("inf"))
        y = bits.where_f32(ok, y, special)
    return y


TANH_SMALL = 0.625
TANH_P = tuple(f32(c) for c in (-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2,
                                 1.33314422036e-1, -3.33332819422e-1))


def tanh(x: torch.Tensor) -> torch.Tensor:
    """tanh: odd polynomial for |x| < 0.625, else (e**2|x| - 1) / (e**2|x| + 1); sign from x."""
    require_f32("x", x)
    z = torch.abs(x)
    s = exp(torch.add(z, z).clamp_(max=88.0))           # e**88 is finite; the ratio is then exactly 1
    big = torch.sub(s, 1.0)
    big.div_(s.add_(1.0))                               # tensor / tensor: IEEE division everywhere
    zz = torch.mul(z, z, out=s)
    small = horner(zz, TANH_P)
    small.mul_(zz)
    small.mul_(z)
    small.add_(z)
    out = bits.where_f32(z < TANH_SMALL, small, big)
    out.copysign_(x)                                    # odd function; keeps the sign of zero
    return bits.canonical_nan_(x, out)


ERF_SMALL_P = tuple(f32(c) for c in (7.853861353153693e-5, -8.010193625184903e-4,
                                      5.188327685732524e-3, -2.685381193529856e-2,
                                      1.128358514861418e-1, -3.761262582423300e-1,
                                      1.128379165726710e0))
ERF_MID_CENTER, ERF_MID_INV_HALF = 2.5, f32(2.0 / 3.0)
ERF_SAT = 4.0                                           # erf(x) rounds to 1 in float32 below 4
ERF_MID_P = tuple(f32(c) for c in (
    -0.0011300180340185761, 0.001851567649282515, 0.0034260996617376804, -0.010797660797834396,
    0.0074836257845163345, 0.009810791350901127, -0.032164327800273895, 0.04632207006216049,
    -0.043602194637060165, 0.02819584496319294, -0.012255907990038395, 0.003266968997195363,
    0.9995930790901184))


def erf(x: torch.Tensor) -> torch.Tensor:
    """erf: |x|*P(x**2) for |x| < 1, a polynomial in (|x|-2.5)*2/3 on [1, 4), 1 beyond; sign from x."""
    require_f32("x", x)
    lib = ckernels.usable(x)
    if lib is not None and x.is_contiguous() and x.numel() > 0:
        return ckernels.erf(lib, x, (ERF_MID_CENTER, ERF_MID_INV_HALF, ERF_SAT), ERF_SMALL_P, ERF_MID_P)
    z = torch.abs(x)
    # Each element takes one of the two branches; on the CPU a branch no element takes is skipped
    # (elementwise, so the other elements' bits are the same). NaN takes the mid branch either way.
    need_small = need_mid = True
    if bits.may_sync(x) and z.numel() > 0:
        need_mid = not z.amax().item() < 1.0                    # NaN propagates, and needs the mid branch
        need_small = not z.amin().item() >= 1.0                 # (True with NaN too: harmless)
    t = torch.mul(z, z) if need_small else torch.empty_like(z)
    out = None
    if need_small:
        small = horner(t, ERF_SMALL_P)
        out = small.mul_(z)
    if need_mid:
        torch.sub(z, ERF_MID_CENTER, out=t)
        t.mul_(ERF_MID_INV_HALF)
        mid = horner(t, ERF_MID_P)
        mid.clamp_(max=1.0)
        mid = bits.where_f32(z >= ERF_SAT, 1.0, mid)
        out = bits.where_f32(z < 1.0, small, mid) if need_small else mid
    out.copysign_(x)
    return bits.canonical_nan_(x, out)
