"""The model zoo's forward passes on portable ops, for the portable-f32 profile.

Each class subclasses its native counterpart in verity.engine.models and
overrides only `forward`: parameters, their names, shapes and the checkpoint
layout are exactly the native model's, so states, checkpoints and the
manifest are shared, and only the arithmetic differs. Every op is a
portable op (exact GEMM, fixed-tree reduction, transcendental functions from
basic IEEE ops, hand-written backward; see portable/layers.py) or exact
(ReLU, masking, reshapes, gathers), so a training step gives the same bits
whatever the thread count, ATen ISA level, BLAS or device.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn

from verity.engine import models as native
from verity.engine.portable.autograd import linear, matmul, tanh
from verity.engine.portable.bits import f32
from verity.engine.portable.layers import conv2d, embedding, gelu, layer_norm, mask_fill, softmax

ACTIVATIONS = {"relu": torch.relu, "gelu": gelu, "tanh": tanh}   # relu (and its backward) is exact
# The Ozaki scheme of every GEMM in the profile (matmul.SCHEMES): part of what the profile
# computes, so changing it changes every portable-f32 trace.
SCHEME = "1|2"


def _linear(layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    return linear(x, layer.weight, layer.bias, SCHEME)


def _layer_norm(ln: nn.LayerNorm, x: torch.Tensor) -> torch.Tensor:
    return layer_norm(x, ln.weight, ln.bias, ln.eps)


class PortableMLP(native.MLP):
    def __init__(self, cfg: native.MLPConfig):
        super().__init__(cfg)
        self.act = ACTIVATIONS[cfg.activation]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.flatten(1)
        for i, layer in enumerate(self.layers):
            x = _linear(layer, x)
            if i < len(self.layers) - 1:
                x = self.act(x)
        return x


class PortableCNN(native.CNN):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for conv in self.convs:
            if conv.stride[0] != conv.stride[1] or conv.padding[0] != conv.padding[1]:
                raise ValueError("portable conv2d needs square stride and padding")
            x = torch.relu(conv2d(x, conv.weight, conv.bias, conv.stride[0], conv.padding[0], SCHEME))
        return _linear(self.head, x.flatten(1))


def _attention(attn: native.CausalSelfAttention, x: torch.Tensor) -> torch.Tensor:
    B, T, C = x.size()
    q, k, v = _linear(attn.c_attn, x).split(C, dim=2)
    q, k, v = (t.view(B, T, attn.n_head, C // attn.n_head).transpose(1, 2) for t in (q, k, v))
    att = matmul(q, k.transpose(-2, -1), SCHEME) * f32(1.0 / math.sqrt(k.size(-1)))
    causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
    att = softmax(mask_fill(att, causal, float("-inf")))
    y = matmul(att, v, SCHEME).transpose(1, 2).contiguous().view(B, T, C)
    return _linear(attn.c_proj, y)


class PortableGPT(native.GPT):
    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        B, T = idx.shape
        # positions as a (B, T) index: the gradient of wpe then accumulates over the batch in
        # embedding's fixed order, not in a native broadcast-sum
        pos = torch.arange(T, device=idx.device).expand(B, T)
        x = embedding(idx, self.wte.weight) + embedding(pos, self.wpe.weight)
        for block in self.h:
            x = x + _attention(block.attn, _layer_norm(block.ln_1, x))
            h = _layer_norm(block.ln_2, x)
            x = x + _linear(block.mlp.c_proj, gelu(_linear(block.mlp.c_fc, h)))
        return linear(_layer_norm(self.ln_f, x), self.lm_head.weight, None, SCHEME)


from verity.engine.portable.decoder import PortableDecoder  # noqa: E402  (it reads SCHEME from here)
from verity.engine.portable.resnet import PortableResNet  # noqa: E402  (so does it)

ZOO: dict[str, type[nn.Module]] = {"mlp": PortableMLP, "cnn": PortableCNN, "resnet": PortableResNet,
                                   "gpt": PortableGPT, "decoder": PortableDecoder}


def contraction_lengths(spec, batch_size: int, x_shape: list[int]) -> dict[str, int]:
    """The longest GEMM contraction of a training step, by cause, for the manifest check.

    Exact float64 slice GEMMs need k <= SCHEMES[SCHEME].max_contraction(); in a step k is a
    layer width (forward and input gradients), the sequence length or head size (attention),
    or the number of rows a weight gradient sums over (batch x positions).
    """
    c = spec.config
    if spec.arch == "mlp":
        return {"model.config": max(c.in_features, *c.hidden, c.out_features), "batch_size": batch_size}
    if spec.arch == "cnn":
        chans, h, w, widths, rows = [c.in_channels, *c.channels], c.height, c.width, [c.num_classes], batch_size
        for a, b in zip(chans, chans[1:]):
            h, w = (h + 1) // 2, (w + 1) // 2
            widths += [a * 9, b]
            rows = max(rows, batch_size * h * w)
        return {"model.config": max(*widths, chans[-1] * h * w), "batch_size": rows}
    if spec.arch == "resnet":
        from verity.engine.resnet import resnet_contraction_lengths
        return resnet_contraction_lengths(c, batch_size)
    T = x_shape[0]
    if spec.arch == "decoder":   # layer widths (forward and input gradients), attention's T and head size
        from verity.engine.decoder import ffn_size, kv_heads
        hd = c.n_embd // c.n_head
        widths = (c.n_embd, c.n_head * hd, kv_heads(c) * hd, ffn_size(c), c.vocab_size, T, hd)
        return {"model.config": max(widths), "batch_size": batch_size * T}
    return {"model.config": max(4 * c.n_embd, 3 * c.n_embd, c.vocab_size, T), "batch_size": batch_size * T}
