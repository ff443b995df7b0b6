"""Exact float32 matrix products by error-free splitting (Ozaki scheme), no autograd.

Why: a float32 GEMM's bits depend on the BLAS's blocking, on FMA use and on
how threads split k, so two honest machines disagree. Here every row of `a`
and every column of `b` gets a power-of-two quantum from its max |value|
(torch.frexp, exact) and is cut into float64 slices, each an integer of at
most beta bits times that quantum (the Ozaki / Rump extraction; see split).
A slice GEMM then sums k products that are integers below
2**(beta_a + beta_b) times one common power of two; with
beta_a + beta_b + ceil(log2(g*k)) <= 53 (g products summed in one group)
every partial sum, in any order, is such an integer below 2**53, i.e. exact
in float64. Whatever BLAS, blocking, FMA use or thread split computes it, the
result is the same. The groups are combined in one fixed order in float64
and rounded once to float32. The same code runs on CPU and CUDA (float64
GEMMs never use TF32).

Schemes (SCHEMES; `DEFAULT_SCHEME` is "2"):
  "2": the operand with fewer elements ("a" here) in two slices of
       beta_a = W//3 bits, the other in one slice of W - beta_a bits,
       W = 53 - ceil(log2 k); products A1@B and A2@B: 2 GEMMs, about 30
       bits per operand at k = 128.
  "3": two slices of beta = (53 - ceil(log2 2k))//2 bits each; A1@B1 and
       A1@B2 + A2@B1 kept, A2@B2 dropped: 3 GEMMs, 44 bits at k = 128.
  "1": one slice each, W//2 bits: 1 GEMM, 23 bits at k = 128.
Error bound (error_bound): each element is rounded to its operand's last
quantum, half of which is at most 2**-Ba * max|a_i.| (Ba = slices_a * beta_a
bits kept; likewise Bb for b), and scheme "3" drops A2@B2, at most
2**-Ba * max|a_i.| * max|b_.j| per product. With u = 2**-24,
    |out_ij - (a@b)_ij| <= u * |(a@b)_ij| * (1 + 2**-28)
                           + 1.01 * k * E * max|a_i.| * max|b_.j|,
    E = 2**-Ba + 2**-Bb (+ 2**-Ba for scheme "3").
Only elements far below their row's or column's max (more than 2**(Ba-24))
lose low bits, deterministically. Measured against float64
(tests/engine/test_portable_ops.py; 256x128 @ 128x512): on N(0,1) data the
max relative error is 6.4e-8 for "2", 6.0e-8 for "3" (about 1 ulp) and
9.2e-6 for "1", native float32 7.5e-6; with every element scaled by
exp(2*N(0,1)) (rows spanning ~20 binades) the max error relative to |a|@|b|
is 4.1e-6 for "2", 5.7e-8 for "3" and 6.1e-4 for "1", native 1.1e-6.

Non-finite inputs: an output element whose row of `a` or column of `b` holds
inf or NaN is NaN (native IEEE would sometimes give +-inf); overflow of a
finite result gives +-inf as the float32 rounding does.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from verity.engine.portable import bits
from verity.engine.portable.bits import pow2_f64, require_f32

MIN_BITS = 24          # each operand keeps at least a full float32 mantissa below its row/column max


@dataclass(frozen=True)
class Scheme:
    """How many slices each operand gets and which slice products are kept.

    `pairs` lists (slice of a, slice of b), 1-based; pairs whose products
    share one quantum (same s*beta_a + t*beta_b) are summed exactly in one
    group, so a group of g pairs needs beta_a + beta_b + ceil(log2(g*k)) <= 53.
    """
    name: str
    slices_a: int
    slices_b: int
    pairs: tuple[tuple[int, int], ...]

    def widths(self, k: int) -> tuple[int, int]:
        """(beta_a, beta_b): bits per slice, the widest the exactness condition allows for k."""
        if k < 1:
            raise ValueError(f"contraction length must be positive, got {k}")
        group = max(sum(1 for s, t in self.pairs if s + t == g) for g in {s + t for s, t in self.pairs})
        width = 53 - (group * k - 1).bit_length()
        if self.slices_a == self.slices_b:
            beta_a = beta_b = width // 2
        else:   # one operand in more slices: share the width so both keep about as many bits
            beta_a = width // (self.slices_a + 1)
            beta_b = width - beta_a
        if min(self.slices_a * beta_a, self.slices_b * beta_b) < self.min_bits:
            raise ValueError(f"contraction length {k} is too large for exact float64 slice GEMMs "
                             f"with scheme {self.name!r} (each operand would keep fewer than "
                             f"{self.min_bits} bits); split the contraction into chunks")
        return beta_a, beta_b

    def error_bound(self, k: int) -> float:
        """k * E of the module docstring: bound on |out - a@b| beyond u*|a@b|, per max|a_i|*max|b_j|."""
        beta_a, beta_b = self.widths(k)
        bits_a, bits_b = self.slices_a * beta_a, self.slices_b * beta_b
        e = 2.0 ** -bits_a + 2.0 ** -bits_b
        for s in range(1, self.slices_a + 1):                  # dropped products: |A_s| <= 2**(ea-(s-1)beta_a-1)
            for t in range(1, self.slices_b + 1):              # for s > 1, and 2**ea <= 2*max|a_i.|
                if (s, t) not in self.pairs:
                    e += 4.0 * 2.0 ** (-(s - 1) * beta_a - (s > 1) - (t - 1) * beta_b - (t > 1))
        return 1.01 * k * e

    @property
    def min_bits(self) -> int:
        """Bits each operand must keep; the one-GEMM scheme trades 4 of them for its speed."""
        return MIN_BITS if len(self.pairs) > 1 else MIN_BITS - 4

    def max_contraction(self) -> int:
        """The largest k `widths` accepts."""
        lo, hi = 1, 1 << 40
        while lo < hi:
            mid = (lo + hi + 1) // 2
            try:
                self.widths(mid)
                lo = mid
            except ValueError:
                hi = mid - 1
        return lo


SCHEMES = {
    # default: two slices of the smaller operand, one wide slice of the other; 2 GEMMs, ~30 bits each at k=128
    "2": Scheme("2", 2, 1, ((1, 1), (2, 1))),
    # two slices each, the lo*lo product dropped; 3 GEMMs, ~2*22 bits per operand at k=128
    "3": Scheme("3", 2, 2, ((1, 1), (1, 2), (2, 1))),
    # one slice each: 1 GEMM, ~23 bits per operand at k=128 (float32-like only for narrow-range rows)
    "1": Scheme("1", 1, 1, ((1, 1),)),
}
DEFAULT_SCHEME = "2"


def get_scheme(name: str) -> Scheme:
    if name not in SCHEMES:
        raise ValueError(f"unknown exact-matmul scheme {name!r} (known: {', '.join(SCHEMES)})")
    return SCHEMES[name]


def _prepare(x: torch.Tensor, dim: int):
    """(own float64 copy with non-finite values zeroed, frexp exponent of max|x| along dim, bad mask)."""
    hi = torch.amax(x, dim=dim, keepdim=True)                  # exact, order-free, NaN-propagating
    amax = torch.maximum(hi, torch.amin(x, dim=dim, keepdim=True).neg_())
    bad = ~torch.isfinite(amax)
    x64 = x.to(torch.float64, copy=True)
    if not bits.may_sync(x) or bool(bad.any()):                # no host sync on accelerators
        x64.masked_fill_(~torch.isfinite(x64), 0.0)
        amax.masked_fill_(bad, 0.0)
    _, e = torch.frexp(amax)                                   # max|x| < 2**e; e = 0 for an all-zero row
    return x64, e, bad


def split(x: torch.Tensor, dim: int, bits: int, slices: int):
    """(list of float64 slices summing to about x, bad mask), along rows (dim=-1) or columns (dim=-2).

    With 2**e > max|x| over the slice of `dim` (torch.frexp: exact), slice s
    is what remains of x rounded to a multiple of 2**(e - s*bits): an integer
    of at most `bits` bits (one more for rounding up) times that quantum, so
    every product of slices is an integer times one power of two. Rounding
    to a quantum is the add-and-subtract trick: adding sigma = 1.5 *
    2**(52 + e - s*bits) puts the quantum at sigma's last bit, so the add
    rounds there (IEEE round-to-nearest-even on every device) and the
    subtract is exact. `bad` marks rows/columns holding inf or NaN (zeroed).
    """
    rest, e, bad = _prepare(x, dim)
    sigma = pow2_f64(e + (52 - bits)) * 1.5
    parts = []
    for s in range(1, slices + 1):
        if s < slices:
            part = torch.add(rest, sigma)
            part.sub_(sigma)
            rest.sub_(part)                                    # exact: x has 24 significant bits
            sigma = sigma * 2.0 ** -bits                        # exact: the next quantum
        else:
            part = rest.add_(sigma).sub_(sigma)                # the last slice reuses the copy
        parts.append(part)
    return parts, bad


def exact_matmul(a: torch.Tensor, b: torch.Tensor, scheme: str = DEFAULT_SCHEME) -> torch.Tensor:
    """a @ b for float32 a (..., m, k) and b (..., k, n), batch dims broadcast as torch.matmul.

    For a scheme with more slices on one side, the operand with fewer
    elements takes the extra slices: the GEMM work is the same either way,
    the splitting work is not. The choice depends on the shapes only (and
    is the same for linear's flattened x as for matmul's batched x).
    """
    require_f32("a", a)
    require_f32("b", b)
    sch = get_scheme(scheme)
    if a.dim() < 2 or b.dim() < 2:
        raise ValueError(f"exact_matmul needs at least 2-D operands, got {tuple(a.shape)} and {tuple(b.shape)}")
    if a.device != b.device:
        raise ValueError(f"operands on different devices: {a.device} and {b.device}")
    k = a.shape[-1]
    if b.shape[-2] != k:
        raise ValueError(f"shapes {tuple(a.shape)} and {tuple(b.shape)} cannot be multiplied "
                         f"({k} != {b.shape[-2]})")
    if k == 0:
        return torch.matmul(a, b)                              # all zeros, no arithmetic
    beta_a, beta_b = sch.widths(k)
    pairs = sch.pairs
    if sch.slices_a > sch.slices_b and a.numel() > b.numel():  # give b the extra slices
        a_parts, bad_a = split(a, -1, beta_b, sch.slices_b)
        b_parts, bad_b = split(b, -2, beta_a, sch.slices_a)
        beta_a, beta_b = beta_b, beta_a
        pairs = tuple((t, s) for s, t in pairs)
    else:
        a_parts, bad_a = split(a, -1, beta_a, sch.slices_a)
        b_parts, bad_b = split(b, -2, beta_b, sch.slices_b)
    if len(b_parts) == 1 and len(a_parts) > 1:                 # every pair is (s, 1): one GEMM on stacked rows
        m = a.shape[-2]
        both = torch.matmul(torch.cat(a_parts, dim=-2), b_parts[0])
        return _finish(_add_in_order([both[..., s * m:(s + 1) * m, :] for s in range(len(a_parts))]), bad_a, bad_b)
    if len(a_parts) == 1 and len(b_parts) > 1:                 # every pair is (1, t): stacked columns
        n = b.shape[-1]
        both = torch.matmul(a_parts[0], torch.cat(b_parts, dim=-1))
        return _finish(_add_in_order([both[..., t * n:(t + 1) * n] for t in range(len(b_parts))]), bad_a, bad_b)
    groups: dict[int, list[tuple[int, int]]] = {}
    for s, t in pairs:                                         # same quantum 2**-(s*beta_a + t*beta_b)
        groups.setdefault(s * beta_a + t * beta_b, []).append((s, t))
    sums = []
    for q in sorted(groups):                                   # most significant group first: a fixed order
        g = None
        for s, t in groups[q]:
            x, y = a_parts[s - 1], b_parts[t - 1]
            if g is None:
                g = torch.matmul(x, y)                         # exact: every partial sum fits 53 bits
            elif g.dim() == 2 and x.dim() == 2 and y.dim() == 2:
                g = torch.addmm(g, x, y)                       # still exact: same quantum, bounded sum
            else:
                g.add_(torch.matmul(x, y))                     # exact likewise
        sums.append(g)
    return _finish(_add_in_order(sums), bad_a, bad_b)


def _add_in_order(terms: list[torch.Tensor]) -> torch.Tensor:
    """terms[0] + terms[1] + ... in float64, left to right: the fixed order of the roundings."""
    if len(terms) == 1:
        return terms[0]
    c = terms[0] + terms[1]
    for t in terms[2:]:
        c.add_(t)
    return c


def _finish(c: torch.Tensor, bad_a: torch.Tensor, bad_b: torch.Tensor) -> torch.Tensor:
    """Round once to float32; NaN where a row of a or a column of b held inf or NaN."""
    out = c.to(torch.float32)                                  # the one float32 rounding
    if not bits.may_sync(out) or bool(bad_a.any()) or bool(bad_b.any()):
        out.masked_fill_(bad_a | bad_b, float("nan"))
    return out
