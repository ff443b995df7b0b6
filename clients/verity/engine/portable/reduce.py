"""Sums and means in one fixed pairwise order, from elementwise adds only, no autograd.

Why: torch.sum's order depends on the SIMD width of the kernel ATen picked
(AVX2, AVX-512, default), on how threads split the reduced dimension and, on
CUDA, on the launch configuration, so the same floats add up to different
bits. Here the reduced dimension is padded with zeros to a power of two and
halved repeatedly: element i is added to element i + half, each level one
elementwise tensor add. Every add is IEEE float32, correctly rounded, and
the tree depends only on the length, so every device gives the same bits.
Adding the padding zeros is exact (except that -0.0 + 0.0 is +0.0, which is
deterministic too).
"""
from __future__ import annotations

import torch

from verity.engine.portable import ckernels
from verity.engine.portable.bits import f32, require_f32


def _normalize_dim(x: torch.Tensor, dim: int) -> int:
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise TypeError(f"dim must be an int or None, got {dim!r}")
    nd = max(x.dim(), 1)
    if not -nd <= dim < nd:
        raise ValueError(f"dim {dim} out of range for a tensor of {x.dim()} dims")
    return dim % nd


def tree_sum(x: torch.Tensor, dim: int | None = None, keepdim: bool = False) -> torch.Tensor:
    """Sum over `dim` (all elements when None) in the fixed pairwise order."""
    require_f32("x", x)
    if dim is None:
        out = tree_sum(x.reshape(-1), 0)
        return out.reshape([1] * x.dim()) if keepdim else out
    if x.dim() == 0:
        _normalize_dim(x, dim)
        return x.clone()
    d = _normalize_dim(x, dim)
    n = x.shape[d]
    if n == 0:
        return torch.zeros_like(x.narrow(d, 0, 0).sum(d, keepdim=keepdim))
    lib = ckernels.usable(x)
    if lib is not None and x.is_contiguous():
        out = ckernels.tree_sum(lib, x, d)
        return out if keepdim else out.squeeze(d)
    p = 1 << (n - 1).bit_length()
    if p != n:
        pad_shape = list(x.shape)
        pad_shape[d] = p - n
        x = torch.cat([x, x.new_zeros(pad_shape)], dim=d)
    while p > 1:
        p //= 2
        x = x.narrow(d, 0, p) + x.narrow(d, p, p)              # out of place: measured faster than add_ here
    return x if keepdim else x.squeeze(d)


def count(x: torch.Tensor, dim: int | None) -> int:
    """How many elements a reduction over `dim` combines."""
    return x.numel() if dim is None else (x.shape[_normalize_dim(x, dim)] if x.dim() else 1)


def tree_mean(x: torch.Tensor, dim: int | None = None, keepdim: bool = False) -> torch.Tensor:
    """tree_sum times 1/n rounded to float32.

    A multiply, not a division: torch's CUDA division by a Python scalar is
    itself a multiply by the reciprocal while the CPU divides, so only the
    multiply is the same op everywhere. Exact when n is a power of two.
    """
    n = count(x, dim)
    if n == 0:
        raise ValueError("mean of an empty reduction is undefined")
    return tree_sum(x, dim, keepdim) * f32(1.0 / n)
