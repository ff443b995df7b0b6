"""The layers of the model zoo as portable float32 ops, each with a hand-written backward.

Why hand-written: torch's own backward formulas for these layers reduce with
native sums (a broadcast bias or normaliser, softmax's row sum, layer norm's
statistics, embedding's scatter-add, col2im's overlap-add), whose order
depends on ISA level, threads and device. Every reduction here is a
fixed-tree sum (reduce.tree_sum) or an exact GEMM (matmul.exact_matmul),
every transcendental function comes from transcendental.py, and everything
else is a separate, correctly rounded elementwise op (add, sub, mul, div,
sqrt), a max, a comparison or pure data movement (gather, pad, slicing,
sorting integers). So a forward and backward pass built from these layers
and from portable.linear / portable.matmul gives the same bits on every CPU
and GPU. Double backward is not supported (once_differentiable).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

from verity.engine.portable import transcendental as T
from verity.engine.portable.autograd import linear
from verity.engine.portable.bits import f32, require_f32, sqrt_f32, where_f32
from verity.engine.portable.matmul import DEFAULT_SCHEME
from verity.engine.portable.reduce import tree_mean, tree_sum

SQRT_HALF = f32(math.sqrt(0.5))
INV_SQRT_2PI = f32(1.0 / math.sqrt(2.0 * math.pi))


# --------------------------------------------------------------------------- softmax family
def _row_softmax_parts(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(z, e, s) along the last dim: z = x - max (exact max), e = exp(z), s = fixed-tree sum of e."""
    z = x - x.amax(-1, keepdim=True)                      # max is exact in any order; the subtraction rounds once
    e = T.exp(z)                                          # exp(-inf) = 0: masked entries drop out
    return z, e, tree_sum(e, -1, keepdim=True)


class SoftmaxFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        _, e, s = _row_softmax_parts(x)
        y = e / s                                         # tensor / tensor: IEEE division everywhere
        ctx.save_for_backward(y)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        dot = tree_sum(g * y, -1, keepdim=True)
        return (g - dot) * y


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dim (rows may hold -inf, but not only -inf)."""
    require_f32("x", x)
    return SoftmaxFn.apply(x)


class CrossEntropyFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        z, e, s = _row_softmax_parts(x)
        lse = T.log(s)                                    # log-sum-exp of the shifted row, >= 0
        nll = lse - z.gather(1, y.unsqueeze(1))           # -log softmax at the target
        ctx.save_for_backward(e, s, y)
        return tree_mean(nll.squeeze(1))

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        e, s, y = ctx.saved_tensors
        grad = e / s                                      # softmax
        target = torch.arange(grad.shape[1], device=grad.device) == y.unsqueeze(1)
        grad = where_f32(target, grad - 1.0, grad)        # minus the one-hot target (no scatter kernel)
        return grad.mul_(g * f32(1.0 / e.shape[0])), None  # d mean / d nll_i = 1/N, rounded as tree_mean does


def cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of logits (..., C) against int64 class indices (...), like F.cross_entropy."""
    require_f32("logits", logits)
    if target.dtype != torch.int64:
        raise TypeError(f"target must be int64 class indices, got {target.dtype}")
    x = logits.reshape(-1, logits.shape[-1])
    y = target.reshape(-1)
    if x.shape[0] != y.shape[0] or x.shape[0] == 0:
        raise ValueError(f"logits {tuple(logits.shape)} and target {tuple(target.shape)} do not match")
    return CrossEntropyFn.apply(x, y)


# --------------------------------------------------------------------------- masking
class MaskFillFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, keep, value):
        ctx.save_for_backward(keep)
        return where_f32(keep, x, value)

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (keep,) = ctx.saved_tensors
        return where_f32(keep, g, 0.0), None, None        # masked_fill's own backward: +0.0 where filled


def mask_fill(x: torch.Tensor, keep: torch.Tensor, value: float) -> torch.Tensor:
    """x.masked_fill(~keep, value) with the same bits forward and backward (bits.where_f32: a bit
    select, not torch's unvectorised bool-mask loop)."""
    require_f32("x", x)
    return MaskFillFn.apply(x, keep, value)


# --------------------------------------------------------------------------- layer norm
class LayerNormFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, b, eps):
        d = x - tree_mean(x, -1, keepdim=True)
        var = tree_mean(d * d, -1, keepdim=True)
        r = sqrt_f32(var + eps)                           # correctly rounded, whatever library torch.sqrt uses
        r = torch.ones_like(r) / r                        # a division op, not a reciprocal approximation
        xhat = d * r
        y = xhat * w if w is not None else xhat.clone()
        if b is not None:
            y = y + b
        ctx.save_for_backward(xhat, r, w)
        ctx.has_w, ctx.has_b = w is not None, b is not None
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        xhat, r, w = ctx.saved_tensors
        n = xhat.shape[-1]
        gw = tree_sum((g * xhat).reshape(-1, n), 0) if ctx.has_w and ctx.needs_input_grad[1] else None
        gb = tree_sum(g.reshape(-1, n), 0) if ctx.has_b and ctx.needs_input_grad[2] else None
        gx = None
        if ctx.needs_input_grad[0]:
            gh = g * w if ctx.has_w else g
            # dx = r * (gh - mean(gh) - xhat * mean(gh * xhat))
            c = tree_mean(gh * xhat, -1, keepdim=True)
            gx = gh - tree_mean(gh, -1, keepdim=True)
            gx.sub_(xhat * c)
            gx.mul_(r)
        return gx, gw, gb, None


def layer_norm(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, eps: float) -> torch.Tensor:
    """Layer norm over the last dim: (x - mean) / sqrt(var + eps) * weight + bias, biased variance."""
    require_f32("x", x)
    return LayerNormFn.apply(x, weight, bias, f32(eps))


# --------------------------------------------------------------------------- GELU
class GeluFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        c = T.erf(x * SQRT_HALF)
        c.add_(1.0)
        c.mul_(0.5)                                       # Phi(x), exact halving
        ctx.save_for_backward(x, c)
        return x * c

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        x, c = ctx.saved_tensors
        pdf = x * x
        pdf.mul_(-0.5)                                    # exact
        pdf = T.exp(pdf)
        pdf.mul_(INV_SQRT_2PI)
        pdf.mul_(x)                                       # x * phi(x)
        return g * pdf.add_(c)                            # d/dx x*Phi(x) = Phi(x) + x*phi(x)


def gelu(x: torch.Tensor) -> torch.Tensor:
    """The exact (erf) GELU, x * Phi(x), as F.gelu's default."""
    require_f32("x", x)
    return GeluFn.apply(x)


# --------------------------------------------------------------------------- embedding
def segment_sum_rows(index: torch.Tensor, src: torch.Tensor, num_rows: int) -> torch.Tensor:
    """out[r] = sum of src[i] over index[i] == r, in a fixed order: (num_rows, C).

    Why not index_add_: its accumulation order is whatever the kernel's
    (sequential on CPU, sorted atomics on CUDA). Here the rows are stably
    sorted by index (a permutation that is unique), then a segmented
    Hillis-Steele scan adds, at level d, the row 2**d places back when it
    belongs to the same segment: ceil(log2 N) elementwise adds whose pattern
    depends only on the indices. The last row of each segment holds its sum.
    """
    n = index.shape[0]
    out = src.new_zeros(num_rows, src.shape[1])
    if n == 0:
        return out
    order = torch.sort(index, stable=True).indices
    keys = index[order]
    x = src[order]
    off = 1
    while off < n:
        same = (keys[off:] == keys[:-off]).unsqueeze(1)
        x = torch.cat([x[:off], x[off:] + where_f32(same, x[:-off], 0.0)])   # torch.where's bits, faster
        off *= 2
    last = torch.ones(n, dtype=torch.bool, device=index.device)
    last[:-1] = keys[1:] != keys[:-1]
    return out.index_copy_(0, keys[last], x[last])        # each row written once


class EmbeddingFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, idx, w):
        ctx.save_for_backward(idx)
        ctx.rows = w.shape[0]
        return w.index_select(0, idx.reshape(-1)).reshape(*idx.shape, w.shape[1])  # a gather: exact

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (idx,) = ctx.saved_tensors
        return None, segment_sum_rows(idx.reshape(-1), g.reshape(-1, g.shape[-1]), ctx.rows)


def embedding(idx: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """weight[idx] with a fixed-order gradient accumulation."""
    require_f32("weight", weight)
    if idx.dtype != torch.int64:
        raise TypeError(f"embedding indices must be int64, got {idx.dtype}")
    return EmbeddingFn.apply(idx, weight)


# --------------------------------------------------------------------------- convolution
def _conv_out(size: int, k: int, stride: int, pad: int) -> int:
    return (size + 2 * pad - k) // stride + 1


class Im2ColFn(torch.autograd.Function):
    """(B, C, H, W) -> (B, Ho*Wo, C*kh*kw), columns ordered (c, i, j) like a conv weight's flattening.

    Forward is pure data movement (pad and strided slices). Backward adds the
    kh*kw slices back into the padded image one kernel offset at a time, in a
    fixed order; within one offset the positions are distinct, so each add is
    elementwise. (F.fold's overlap-add order differs between CPU and CUDA.)
    """

    @staticmethod
    def forward(ctx, x, kh, kw, stride, pad):
        B, C, H, W = x.shape
        ho, wo = _conv_out(H, kh, stride, pad), _conv_out(W, kw, stride, pad)
        xp = F.pad(x, (pad, pad, pad, pad))
        cols = torch.stack([xp[:, :, i:i + stride * (ho - 1) + 1:stride, j:j + stride * (wo - 1) + 1:stride]
                            for i in range(kh) for j in range(kw)], dim=2)       # (B, C, kh*kw, ho, wo)
        ctx.geom = (B, C, H, W, kh, kw, stride, pad, ho, wo)
        return cols.reshape(B, C * kh * kw, ho * wo).transpose(1, 2).contiguous()

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        if not ctx.needs_input_grad[0]:
            return None, None, None, None, None
        B, C, H, W, kh, kw, stride, pad, ho, wo = ctx.geom
        cols = g.transpose(1, 2).reshape(B, C, kh * kw, ho, wo)
        gp = g.new_zeros(B, C, H + 2 * pad, W + 2 * pad)
        for i in range(kh):
            for j in range(kw):
                gp[:, :, i:i + stride * (ho - 1) + 1:stride, j:j + stride * (wo - 1) + 1:stride].add_(cols[:, :, i * kw + j])
        return gp[:, :, pad:pad + H, pad:pad + W].contiguous(), None, None, None, None


def conv2d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, stride: int, padding: int,
           scheme: str = DEFAULT_SCHEME) -> torch.Tensor:
    """A 2-D convolution (square stride and padding, no dilation or groups) as im2col + exact GEMM."""
    require_f32("x", x)
    require_f32("weight", weight)
    if x.dim() != 4 or weight.dim() != 4 or x.shape[1] != weight.shape[1]:
        raise ValueError(f"conv2d needs x (B, C, H, W) and weight (O, C, kh, kw), got {tuple(x.shape)} "
                         f"and {tuple(weight.shape)}")
    B, _, H, W = x.shape
    O, _, kh, kw = weight.shape
    ho, wo = _conv_out(H, kh, stride, padding), _conv_out(W, kw, stride, padding)
    cols = Im2ColFn.apply(x, kh, kw, stride, padding)
    y = linear(cols, weight.reshape(O, -1), bias, scheme)                        # (B, ho*wo, O)
    return y.transpose(1, 2).reshape(B, O, ho, wo)
