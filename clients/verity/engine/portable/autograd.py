"""The portable ops with autograd: backward passes built from the same portable pieces.

Why: a portable forward is not enough when training, since torch's own
backward formulas would reintroduce native GEMMs (grad_a = g @ b^T,
grad_b = a^T @ g), native reductions (bias gradients, broadcast batch dims)
and native transcendental functions. Each torch.autograd.Function here
computes its gradient with exact_matmul, tree_sum or basic elementwise ops
in a fixed order. Weight gradients of a broadcast 2-D operand are one exact
GEMM over the flattened batch (exact, not a sum of per-batch rounded
products). Double backward is not supported (once_differentiable).
"""
from __future__ import annotations

import math

import torch
from torch.autograd.function import once_differentiable

from verity.engine.portable import transcendental as T
from verity.engine.portable.bits import f32, require_f32
from verity.engine.portable.matmul import DEFAULT_SCHEME, exact_matmul
from verity.engine.portable.reduce import count, tree_sum


def sum_to(grad: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """Reduce a broadcast gradient back to `shape` with fixed-order sums."""
    while grad.dim() > len(shape):
        grad = tree_sum(grad, 0)
    for d, size in enumerate(shape):
        if size == 1 and grad.shape[d] != 1:
            grad = tree_sum(grad, d, keepdim=True)
    return grad


def _grad_a(g: torch.Tensor, a: torch.Tensor, b: torch.Tensor, scheme: str) -> torch.Tensor:
    """dL/da for c = a @ b, both at least 2-D."""
    if a.dim() == 2 and b.dim() > 2:          # a broadcast over b's batch: one GEMM over (batch, n)
        m, n, k = g.shape[-2], g.shape[-1], a.shape[-1]
        gf = g.reshape(-1, m, n).permute(1, 0, 2).reshape(m, -1)
        bf = b.expand(*g.shape[:-2], k, n).reshape(-1, k, n).permute(0, 2, 1).reshape(-1, k)
        return exact_matmul(gf, bf, scheme)
    return sum_to(exact_matmul(g, b.transpose(-1, -2), scheme), a.shape)


def _grad_b(g: torch.Tensor, a: torch.Tensor, b: torch.Tensor, scheme: str) -> torch.Tensor:
    """dL/db for c = a @ b, both at least 2-D."""
    if b.dim() == 2 and a.dim() > 2:          # b broadcast over a's batch: one GEMM over (batch, m)
        k, n = a.shape[-1], g.shape[-1]
        return exact_matmul(a.reshape(-1, k).transpose(0, 1), g.reshape(-1, n), scheme)
    return sum_to(exact_matmul(a.transpose(-1, -2), g, scheme), b.shape)


class MatMulFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b, scheme):
        ctx.save_for_backward(a, b)
        ctx.scheme = scheme
        return exact_matmul(a, b, scheme)

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        ga = _grad_a(g, a, b, ctx.scheme) if ctx.needs_input_grad[0] else None
        gb = _grad_b(g, a, b, ctx.scheme) if ctx.needs_input_grad[1] else None
        return ga, gb, None


class LinearFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, b, scheme):
        ctx.save_for_backward(x, w)
        ctx.scheme, ctx.has_bias = scheme, b is not None
        x2 = x.reshape(-1, x.shape[-1])
        y = exact_matmul(x2, w.transpose(0, 1), scheme)
        if b is not None:
            y = y + b
        return y.reshape(*x.shape[:-1], w.shape[0])

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        g2 = g.reshape(-1, w.shape[0])
        x2 = x.reshape(-1, x.shape[-1])
        gx = exact_matmul(g2, w, ctx.scheme).reshape(x.shape) if ctx.needs_input_grad[0] else None
        gw = exact_matmul(g2.transpose(0, 1), x2, ctx.scheme) if ctx.needs_input_grad[1] else None
        gb = tree_sum(g2, 0) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return gx, gw, gb, None


class SumFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim, keepdim):
        ctx.shape, ctx.dim, ctx.keepdim = x.shape, dim, keepdim
        return tree_sum(x, dim, keepdim)

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        if ctx.dim is None:
            g = g.reshape([1] * len(ctx.shape))
        elif not ctx.keepdim and len(ctx.shape) > 0:
            g = g.unsqueeze(ctx.dim)
        return g.expand(ctx.shape).contiguous(), None, None      # copies, no arithmetic


class ExpFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = T.exp(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y


class LogFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return T.log(x)

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g / x                                              # tensor / tensor: IEEE division


class TanhFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = T.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        d = y * y
        d = 1.0 - d
        return g * d


TWO_OVER_SQRT_PI = f32(2.0 / math.sqrt(math.pi))


class ErfFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return T.erf(x)

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        t = x * x
        t = T.exp(-t)
        d = g * TWO_OVER_SQRT_PI
        return d * t


def matmul(a: torch.Tensor, b: torch.Tensor, scheme: str = DEFAULT_SCHEME) -> torch.Tensor:
    """torch.matmul's shapes (1-D operands, broadcast batch dims), exact by construction."""
    require_f32("a", a)
    require_f32("b", b)
    if a.dim() == 0 or b.dim() == 0:
        raise ValueError("both arguments to matmul need to be at least 1-D")
    a2 = a.unsqueeze(0) if a.dim() == 1 else a
    b2 = b.unsqueeze(-1) if b.dim() == 1 else b
    out = MatMulFn.apply(a2, b2, scheme)
    if b.dim() == 1:
        out = out.squeeze(-1)
    if a.dim() == 1:
        out = out.squeeze(-2 if b.dim() > 1 else -1)
    return out


def linear(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None,
           scheme: str = DEFAULT_SCHEME) -> torch.Tensor:
    """x @ w^T + b like torch.nn.functional.linear: x (..., k), w (n, k), b (n,) or None."""
    require_f32("x", x)
    require_f32("w", w)
    if b is not None:
        require_f32("b", b)
    if x.dim() < 1 or w.dim() != 2 or x.shape[-1] != w.shape[1]:
        raise ValueError(f"linear needs x (..., k) and w (n, k), got {tuple(x.shape)} and {tuple(w.shape)}")
    if b is not None and tuple(b.shape) != (w.shape[0],):
        raise ValueError(f"bias must have shape ({w.shape[0]},), got {tuple(b.shape)}")
    return LinearFn.apply(x, w, b, scheme)


def sum(x: torch.Tensor, dim: int | None = None, keepdim: bool = False) -> torch.Tensor:  # noqa: A001
    """Fixed-order pairwise sum (reduce.tree_sum) with a copy-only backward."""
    return SumFn.apply(x, dim, keepdim)


def mean(x: torch.Tensor, dim: int | None = None, keepdim: bool = False) -> torch.Tensor:
    """sum / n as sum * f32(1/n) (see reduce.tree_mean); backward is g * f32(1/n) spread out."""
    n = count(x, dim)
    if n == 0:
        raise ValueError("mean of an empty reduction is undefined")
    return SumFn.apply(x, dim, keepdim) * f32(1.0 / n)


def exp(x: torch.Tensor) -> torch.Tensor:
    return ExpFn.apply(x)


def log(x: torch.Tensor) -> torch.Tensor:
    return LogFn.apply(x)


def tanh(x: torch.Tensor) -> torch.Tensor:
    return TanhFn.apply(x)


def erf(x: torch.Tensor) -> torch.Tensor:
    return ErfFn.apply(x)
