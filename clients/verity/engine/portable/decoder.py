"""The decoder family (engine/decoder.py) on portable ops, and the ops it needs beyond portable/layers.py.

New ops, each with a hand-written backward where anything reduces (see portable/layers.py for why):
  rms_norm    statistics by tree_mean, the weight gradient by tree_sum over rows (as LayerNormFn)
  silu        x * sigmoid(x) with the portable exp and an IEEE division
  gelu_tanh   Hugging Face's "gelu_new" from the portable tanh
  repeat_kv   grouped-query attention's head copies; the backward sums the n_rep copies with tree_sum
RoPE is elementwise with the constant (cos, sin) table of engine/decoder.rope_table, the very table the native
forward uses (computed in software, the same bits everywhere), so plain torch ops do: its backward multiplies
by the same constants and moves halves around, nothing reduces.
"""
from __future__ import annotations

import math

import torch
from torch.autograd.function import once_differentiable

from verity.engine import decoder as native
from verity.engine.portable import transcendental as T
from verity.engine.portable.autograd import linear, matmul
from verity.engine.portable.bits import f32, require_f32, sqrt_f32
from verity.engine.portable.layers import embedding, gelu, layer_norm, mask_fill, softmax
from verity.engine.portable.reduce import tree_mean, tree_sum


# --------------------------------------------------------------------------- RMS norm
class RMSNormFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, eps):
        ms = tree_mean(x * x, -1, keepdim=True)
        r = sqrt_f32(ms + eps)                            # correctly rounded
        r = torch.ones_like(r) / r                        # a division op, not a reciprocal approximation
        xhat = x * r
        y = xhat * w
        ctx.save_for_backward(xhat, r, w)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        xhat, r, w = ctx.saved_tensors
        n = xhat.shape[-1]
        gw = tree_sum((g * xhat).reshape(-1, n), 0) if ctx.needs_input_grad[1] else None
        gx = None
        if ctx.needs_input_grad[0]:
            gh = g * w
            # dx = r * (gh - xhat * mean(gh * xhat))
            c = tree_mean(gh * xhat, -1, keepdim=True)
            gx = gh - xhat * c
            gx.mul_(r)
        return gx, gw, None


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """x / sqrt(mean(x**2) + eps) * weight over the last dim."""
    require_f32("x", x)
    require_f32("weight", weight)
    return RMSNormFn.apply(x, weight, f32(eps))


# --------------------------------------------------------------------------- activations
class SiluFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        e = T.exp(-x)                                     # inf for x < -88: s = 0, y = -0.0
        s = torch.ones_like(x) / e.add_(1.0)              # sigmoid, tensor / tensor: IEEE division
        ctx.save_for_backward(x, s)
        return x * s

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        x, s = ctx.saved_tensors
        d = 1.0 - s
        d.mul_(x)
        d.add_(1.0)
        d.mul_(s)                                         # s * (1 + x * (1 - s))
        return g * d


def silu(x: torch.Tensor) -> torch.Tensor:
    """x * sigmoid(x) (F.silu)."""
    require_f32("x", x)
    return SiluFn.apply(x)


GELU_C = f32(math.sqrt(2.0 / math.pi))
GELU_A = f32(0.044715)
GELU_3A = f32(3.0 * 0.044715)


class GeluTanhFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x2 = x * x
        u = x2 * GELU_A
        u.mul_(x)
        u.add_(x)
        u.mul_(GELU_C)                                    # sqrt(2/pi) * (x + 0.044715 x^3)
        t = T.tanh(u)
        ctx.save_for_backward(x, x2, t)
        y = t + 1.0
        y.mul_(x)
        return y.mul_(0.5)                                # 0.5 * x * (1 + t), exact halving

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        x, x2, t = ctx.saved_tensors
        # d/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
        du = x2 * GELU_3A
        du.add_(1.0)
        du.mul_(GELU_C)
        sech2 = t * t
        sech2 = 1.0 - sech2
        du.mul_(sech2)
        du.mul_(x)
        d = t + 1.0
        d.add_(du)
        d.mul_(0.5)
        return g * d


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): Hugging Face's gelu_new, F.gelu(approximate="tanh")."""
    require_f32("x", x)
    return GeluTanhFn.apply(x)


# --------------------------------------------------------------------------- grouped-query heads
class RepeatKVFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, n_rep):
        B, H, Tn, D = x.shape
        ctx.n_rep = n_rep
        return x[:, :, None].expand(B, H, n_rep, Tn, D).reshape(B, H * n_rep, Tn, D)

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        B, HR, Tn, D = g.shape
        g = g.reshape(B, HR // ctx.n_rep, ctx.n_rep, Tn, D)
        return tree_sum(g.contiguous(), 2), None         # the n_rep copies in a fixed pairwise order


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """engine/decoder.repeat_kv with a fixed-order backward."""
    require_f32("x", x)
    return x if n_rep == 1 else RepeatKVFn.apply(x, n_rep)


# --------------------------------------------------------------------------- the model
def _linear(layer: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    from verity.engine.portable.models import SCHEME   # lazy: portable/models.py imports this module
    return linear(x, layer.weight, layer.bias, SCHEME)


def _norm(ln: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    if isinstance(ln, native.RMSNorm):
        return rms_norm(x, ln.weight, ln.eps)
    return layer_norm(x, ln.weight, ln.bias, ln.eps)


def _attention(attn: native.DecoderAttention, x: torch.Tensor, rope) -> torch.Tensor:
    from verity.engine.portable.models import SCHEME
    B, Tn, _ = x.size()
    q = _linear(attn.q_proj, x).view(B, Tn, attn.n_head, attn.head_dim).transpose(1, 2)
    k = _linear(attn.k_proj, x).view(B, Tn, attn.n_kv_head, attn.head_dim).transpose(1, 2)
    v = _linear(attn.v_proj, x).view(B, Tn, attn.n_kv_head, attn.head_dim).transpose(1, 2)
    if rope is not None:
        q, k = native.apply_rope(q, *rope), native.apply_rope(k, *rope)   # elementwise with constants
    n_rep = attn.n_head // attn.n_kv_head
    k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)
    att = matmul(q, k.transpose(-2, -1), SCHEME) * f32(1.0 / math.sqrt(attn.head_dim))
    causal = torch.ones(Tn, Tn, dtype=torch.bool, device=x.device).tril()
    att = softmax(mask_fill(att, causal, float("-inf")))
    y = matmul(att, v, SCHEME).transpose(1, 2).contiguous().view(B, Tn, attn.n_head * attn.head_dim)
    return _linear(attn.o_proj, y)


_ACT = {"gelu": gelu, "gelu_tanh": gelu_tanh}


def _mlp(mlp: native.DecoderMLP, x: torch.Tensor) -> torch.Tensor:
    if mlp.activation == "swiglu":
        return _linear(mlp.down_proj, silu(_linear(mlp.gate_proj, x)) * _linear(mlp.up_proj, x))
    return _linear(mlp.down_proj, _ACT[mlp.activation](_linear(mlp.up_proj, x)))


class PortableDecoder(native.Decoder):
    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        from verity.engine.portable.models import SCHEME
        B, Tn = idx.shape
        x = embedding(idx, self.wte.weight)
        if self.cfg.positions == "learned":
            # a (B, T) index: wpe's gradient accumulates over the batch in embedding's fixed order
            pos = torch.arange(Tn, device=idx.device).expand(B, Tn)
            x = x + embedding(pos, self.wpe.weight)
        rope = self.rope(Tn, idx.device)
        for block in self.h:
            x = x + _attention(block.attn, _norm(block.ln_1, x), rope)
            x = x + _mlp(block.mlp, _norm(block.ln_2, x))
        # tied: wte.weight's gradient is embedding's plus this GEMM's, two portable terms added once by autograd
        return linear(_norm(self.ln_f, x), self.head_weight(), None, SCHEME)
