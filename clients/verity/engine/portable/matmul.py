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
  "1|2": "1" while it keeps >= 20 bits per operand (k <= 8192), else "2" (the
       portable-f32 profile's; the choice depends on k only).
On the CPU the splitting and finishing run in C (ckernels.py), same bits.
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

import functools
import math
import threading
from dataclasses import dataclass

import torch

from verity.engine.portable import bits, ckernels
from verity.engine.portable.bits import require_f32

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
    fallback: str | None = None     # the scheme a contraction too long for this one uses instead

    def resolve(self, k: int) -> Scheme:
        """The scheme that computes a contraction of length k: this one, or its fallback where this one
        would keep fewer than min_bits bits per operand."""
        if self.fallback is not None and k > _own_max_contraction(self):
            return SCHEMES[self.fallback]
        return self

    def widths(self, k: int) -> tuple[int, int]:
        """(beta_a, beta_b): bits per slice, the widest the exactness condition allows for k."""
        return self.resolve(k)._own_widths(k)

    def _own_widths(self, k: int) -> tuple[int, int]:
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
        if self.resolve(k) is not self:
            return self.resolve(k).error_bound(k)
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
        return SCHEMES[self.fallback].max_contraction() if self.fallback else _own_max_contraction(self)


@functools.cache
def _own_max_contraction(scheme: Scheme) -> int:
    """The largest k the scheme's own exactness condition accepts (without its fallback)."""
    lo, hi = 1, 1 << 40
    while lo < hi:
        mid = (lo + hi + 1) // 2
        try:
            scheme._own_widths(mid)
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
    # the portable-f32 profile's: "1" where it keeps >= 20 bits per operand (k <= 8192), else "2"
    "1|2": Scheme("1|2", 1, 1, ((1, 1),), fallback="2"),
}
DEFAULT_SCHEME = "2"


def get_scheme(name: str) -> Scheme:
    if name not in SCHEMES:
        raise ValueError(f"unknown exact-matmul scheme {name!r} (known: {', '.join(SCHEMES)})")
    return SCHEMES[name]


def _exponents(x: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor | None, bool]:
    """(frexp exponent e of max|x| along dim, keepdim; bad mask or None; whether any row/column is bad).

    max|x| = max(max x, -min x): exact, order-free and NaN-propagating (two
    reductions: measured 15x faster here than torch.aminmax). A bad
    (non-finite) row or column gets e = 0. On the CPU one max over the row
    maxima tells whether any is bad (NaN and inf propagate), and the mask is
    built only then (None otherwise); on accelerators `any bad` is taken as
    True so that no host sync is needed: the fixups then run unconditionally
    and give the same bits.
    """
    amax = torch.maximum(torch.amax(x, dim=dim, keepdim=True), torch.amin(x, dim=dim, keepdim=True).neg_())
    any_bad = not bits.may_sync(x) or (amax.numel() > 0 and not math.isfinite(amax.max().item()))
    bad = None
    if any_bad:
        bad = ~torch.isfinite(amax)
        amax.masked_fill_(bad, 0.0)
    _, e = torch.frexp(amax)                                   # max|x| < 2**e; e = 0 for an all-zero row
    return e, bad, any_bad


def _sigma_bits(e: torch.Tensor, quantum_shift: int) -> torch.Tensor:
    """The int64 bit pattern of 1.5 * 2**(e + quantum_shift) as float64 (exact; see bits.pow2_f64):
    biased exponent in bits 52..62, the 0.5 of the 1.5 in bit 51."""
    return e.to(torch.int64).mul_(1 << 52).add_(((1023 + quantum_shift) << 52) | (1 << 51))


def split_into(x: torch.Tensor, dim: int, bits: int, out: list[torch.Tensor]) -> torch.Tensor | None:
    """Write the float64 slices of x along rows (dim=-1) or columns (dim=-2) into `out`; return the bad mask.

    With 2**e > max|x| over the slice of `dim` (torch.frexp: exact), slice s
    is what remains of x rounded to a multiple of 2**(e - s*bits): an integer
    of at most `bits` bits (one more for rounding up) times that quantum, so
    every product of slices is an integer times one power of two. Rounding
    to a quantum is the add-and-subtract trick: adding sigma = 1.5 *
    2**(52 + e - s*bits) puts the quantum at sigma's last bit, so the add
    rounds there (IEEE round-to-nearest-even on every device) and the
    subtract is exact. Rows/columns holding inf or NaN are zeroed (and
    marked in `bad`).

    `bad` is None when no row/column is bad (see _exponents).
    `out` holds one float64 tensor of x's shape per slice, possibly views of
    one stacked buffer in any memory layout (the slice GEMMs are exact, so
    the layout is free). x is copied into the first slice's buffer and the
    rest x - slice_1 - ... kept in the last slice's buffer, which is rounded
    in place at the end: every pass is a same-dtype in-place op (measured
    faster here than mixed float32/float64 ops, which torch does not
    vectorise).
    """
    lib = ckernels.usable(x)
    if lib is not None:
        done, bad = ckernels.split_into(lib, x, dim, bits, out)
        if done:
            return bad
    e, bad, any_bad = _exponents(x, dim)
    first, last = out[0], out[-1]
    first.copy_(x)                                             # exact
    if any_bad:
        first.masked_fill_(~torch.isfinite(first), 0.0)
    if len(out) > 1:
        last.copy_(first if any_bad else x)
    sig = _sigma_bits(e, 52 - bits)
    step = bits << 52                                          # sigma * 2**-bits: the next quantum (exact)
    for s, part in enumerate(out):
        sigma = sig.view(torch.float64)
        if s < len(out) - 1:
            if s > 0:
                part.copy_(last)
            part.add_(sigma).sub_(sigma)
            last.sub_(part)                                    # exact: x has 24 significant bits
        else:
            last.add_(sigma).sub_(sigma)
        sig = sig - step
    return bad


def _e_shape(x: torch.Tensor, dim: int) -> list[int]:
    """The shape of a keepdim reduction of x over dim."""
    shape = list(x.shape)
    shape[dim] = 1
    return shape


def split(x: torch.Tensor, dim: int, bits: int, slices: int) -> tuple[list[torch.Tensor], torch.Tensor]:
    """(list of `slices` new float64 tensors summing to about x, bad mask); see split_into."""
    parts = [torch.empty(x.shape, dtype=torch.float64, device=x.device) for _ in range(slices)]
    bad = split_into(x, dim, bits, parts)
    if bad is None:
        bad = torch.zeros(_e_shape(x, dim), dtype=torch.bool, device=x.device)
    return parts, bad


def _scratch(shape, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A new contiguous tensor of uninitialised memory, without deterministic mode's fill.

    Under torch.use_deterministic_algorithms (which every profile sets)
    torch.empty fills new memory with NaN so that a read of uninitialised
    memory is reproducible; for the multi-megabyte float64 slice buffers that
    fill cost more than the splitting arithmetic (measured: 80 us against
    10 us for 4 MB). Only for buffers this module writes completely before
    reading: split_into writes every element of every slice, _finish copies
    into every element of its result.
    """
    shape = tuple(shape)
    numel = math.prod(shape)
    storage = torch.UntypedStorage(numel * dtype.itemsize, device=device)
    return torch.empty(0, dtype=dtype, device=device).set_(storage, 0, shape)


_workspaces = threading.local()


def _workspace(role: str, shape, device: torch.device) -> torch.Tensor:
    """A float64 buffer for one exact_matmul call, reused by the next call on this thread.

    On the CPU the slice buffers and the GEMM's output are dead once
    exact_matmul returns (its result is a new float32 tensor), so each role
    ("a", "b", "c") keeps one storage per thread, grown as needed: no
    allocation, no page faults, and the memory is still in cache. Other
    devices allocate (their caching allocators already reuse memory).
    """
    if device.type != "cpu":
        return _scratch(shape, torch.float64, device)
    shape = tuple(shape)
    nbytes = math.prod(shape) * 8
    store = getattr(_workspaces, role, None)
    if store is None or store.nbytes() < nbytes:
        store = torch.UntypedStorage(max(nbytes, 8))
        setattr(_workspaces, role, store)
    return torch.empty(0, dtype=torch.float64).set_(store, 0, shape)


def _slices_a(a: torch.Tensor, bits: int, slices: int):
    """a's slices as row blocks of one row-major (..., slices*m, k) buffer:
    (stacked, [slice views], bad mask or None)."""
    m = a.shape[-2]
    buf = _workspace("a", (*a.shape[:-2], slices * m, a.shape[-1]), a.device)
    parts = [buf[..., s * m:(s + 1) * m, :] for s in range(slices)] if slices > 1 else [buf]
    return buf, parts, split_into(a, -1, bits, parts)


def _slices_b(b: torch.Tensor, bits: int, slices: int):
    """b's slices as column blocks of one (..., k, slices*n) buffer: (stacked, [slice views], bad mask or None).

    Stored transposed ((..., slices*n, k) contiguous) when b's columns are
    contiguous (a weight w used as w.T), else row-major: MKL's float64 GEMM
    ran fastest with a row-major first and a transposed second operand on
    the GPT step's shapes (8 % less GEMM time), but a transposing copy of b
    costs about what that gains.
    """
    n = b.shape[-1]
    if b.stride(-2) == 1 and b.shape[-1] > 1:
        buf = _workspace("b", (*b.shape[:-2], slices * n, b.shape[-2]), b.device).mT
    else:
        buf = _workspace("b", (*b.shape[:-2], b.shape[-2], slices * n), b.device)
    parts = [buf[..., s * n:(s + 1) * n] for s in range(slices)] if slices > 1 else [buf]
    return buf, parts, split_into(b, -2, bits, parts)


def exact_matmul(a: torch.Tensor, b: torch.Tensor, scheme: str = DEFAULT_SCHEME) -> torch.Tensor:
    """a @ b for float32 a (..., m, k) and b (..., k, n), batch dims broadcast as torch.matmul.

    For a scheme with more slices on one side, the operand with fewer
    elements takes the extra slices: the GEMM work is the same either way,
    the splitting work is not. The choice depends on the shapes only (and
    is the same for linear's flattened x as for matmul's batched x). When
    one side has a single slice, the other side's slices are stacked (rows
    of a, or columns of b) so that all products are one GEMM.
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
    sch = sch.resolve(k)
    beta_a, beta_b = sch.widths(k)
    pairs, slices_a, slices_b = sch.pairs, sch.slices_a, sch.slices_b
    if slices_a > slices_b and a.numel() > b.numel():          # give b the extra slices
        beta_a, beta_b = beta_b, beta_a
        slices_a, slices_b = slices_b, slices_a
        pairs = tuple((t, s) for s, t in pairs)
    buf_a, a_parts, bad_a = _slices_a(a, beta_a, slices_a)
    buf_b, b_parts, bad_b = _slices_b(b, beta_b, slices_b)
    if slices_a == 1 or slices_b == 1:                         # one GEMM on stacked rows or columns
        both = _workspace("c", (*bits.broadcast_shape(buf_a.shape[:-2], buf_b.shape[:-2]),
                                buf_a.shape[-2], buf_b.shape[-1]), a.device)
        torch.matmul(buf_a, buf_b, out=both)
    if slices_a == slices_b == 1:
        terms = [both]
    elif slices_b == 1:                                        # every pair is (s, 1): rows of a stacked
        m = a.shape[-2]
        terms = [both[..., s * m:(s + 1) * m, :] for s in range(slices_a)]
    elif slices_a == 1:                                        # every pair is (1, t): columns of b stacked
        n = b.shape[-1]
        terms = [both[..., t * n:(t + 1) * n] for t in range(slices_b)]
    else:
        groups: dict[int, list[tuple[int, int]]] = {}
        for s, t in pairs:                                     # same quantum 2**-(s*beta_a + t*beta_b)
            groups.setdefault(s * beta_a + t * beta_b, []).append((s, t))
        terms = []
        for q in sorted(groups):                               # most significant group first: a fixed order
            g = None
            for s, t in groups[q]:
                x, y = a_parts[s - 1], b_parts[t - 1]
                if g is None:
                    g = torch.matmul(x, y)                     # exact: every partial sum fits 53 bits
                else:
                    g.add_(torch.matmul(x, y))                 # still exact: same quantum, bounded sum
            terms.append(g)
    return _finish(terms, bad_a, bad_b)


def _finish(terms: list[torch.Tensor], bad_a: torch.Tensor | None, bad_b: torch.Tensor | None) -> torch.Tensor:
    """terms[0] + terms[1] + ... in float64, left to right (the fixed order of the roundings), rounded
    once to float32; NaN where a row of a or a column of b held inf or NaN.

    The terms are this module's own GEMM outputs, so the adds run in place
    (measured faster than a new tensor or an add that stores float32).
    """
    shape = bits.broadcast_shape(terms[0].shape, terms[-1].shape)
    out = _scratch(shape, torch.float32, terms[0].device)
    lib = ckernels.usable(out)
    if lib is not None and ckernels.finish(lib, terms, out):
        pass
    elif len(terms) == 1:
        out.copy_(terms[0])                                    # the one float32 rounding
    else:
        c = terms[0]                                           # a GEMM output of our own: add in place
        for t in terms[1:]:
            c.add_(t)
        out.copy_(c)
    if bad_a is not None or bad_b is not None:
        bad = bad_a if bad_b is None else bad_b if bad_a is None else bad_a | bad_b
        out.masked_fill_(bad, float("nan"))
    return out
