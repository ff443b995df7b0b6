"""The resnet family's forward pass on portable ops, for the portable-f32 profile.

PortableResNet subclasses verity.engine.resnet.ResNet and overrides only `forward` (same parameters, names and
checkpoint layout; see portable/models.py). Every op is portable or exact:

  conv           im2col + exact GEMM (layers.conv2d), square stride and padding
  GroupNorm      layers.layer_norm without affine over (B, G, C/G*H*W), then ChannelAffineFn: a per-channel scale
                 and shift whose parameter gradients are fixed-tree sums over (B, H, W). A broadcast parameter in
                 plain torch autograd would not do: its backward is a native sum over the broadcast dims.
  ReLU           exact forward and backward
  residual add   elementwise; the gradient of a block input used twice (conv1 and the shortcut) is one IEEE add
                 of two tensors, the same bits in either order
  pool           autograd.mean over the flattened H*W (fixed-tree sum, copy-only backward times f32(1/n))
  head           autograd.linear (exact GEMMs, tree_sum bias gradient)
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
from torch.autograd.function import once_differentiable

from verity.engine import resnet as native
from verity.engine.portable.autograd import linear, mean
from verity.engine.portable.bits import require_f32
from verity.engine.portable.layers import conv2d, layer_norm
from verity.engine.portable.reduce import tree_sum


def _per_channel_sum(t: torch.Tensor) -> torch.Tensor:
    """(B, C, H, W) -> (C,): for each channel the fixed-tree sum over the B*H*W values in (b, h, w) order."""
    C = t.shape[1]
    return tree_sum(t.transpose(0, 1).reshape(C, -1).contiguous(), -1)


class ChannelAffineFn(torch.autograd.Function):
    """y = x * w[c] + b[c] on (B, C, H, W): two correctly rounded elementwise ops forward; backward gx = g * w[c],
    gw[c] = tree_sum of g * x over (B, H, W), gb[c] = tree_sum of g over (B, H, W)."""

    @staticmethod
    def forward(ctx, x, w, b):
        shape = (1, -1) + (1,) * (x.dim() - 2)
        ctx.save_for_backward(x, w)
        return x * w.reshape(shape) + b.reshape(shape)

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        shape = (1, -1) + (1,) * (x.dim() - 2)
        gx = g * w.reshape(shape) if ctx.needs_input_grad[0] else None
        gw = _per_channel_sum(g * x) if ctx.needs_input_grad[1] else None
        gb = _per_channel_sum(g) if ctx.needs_input_grad[2] else None
        return gx, gw, gb


def channel_affine(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    require_f32("x", x)
    require_f32("weight", weight)
    require_f32("bias", bias)
    if x.dim() < 2 or tuple(weight.shape) != (x.shape[1],) or tuple(bias.shape) != (x.shape[1],):
        raise ValueError(f"channel_affine needs x (B, C, ...) and weight, bias (C,), got {tuple(x.shape)}, "
                         f"{tuple(weight.shape)}, {tuple(bias.shape)}")
    return ChannelAffineFn.apply(x.contiguous(), weight, bias)


def group_norm(x: torch.Tensor, num_groups: int, weight: torch.Tensor | None, bias: torch.Tensor | None,
               eps: float) -> torch.Tensor:
    """F.group_norm on portable ops: layer norm (biased variance, no affine) over each sample's group of
    C/G channels x H x W, then the per-channel affine."""
    B, C = x.shape[:2]
    if C % num_groups:
        raise ValueError(f"{C} channels do not split into {num_groups} groups")
    xhat = layer_norm(x.contiguous().reshape(B, num_groups, -1), None, None, eps).reshape(x.shape)
    if weight is None and bias is None:
        return xhat
    if weight is None or bias is None:
        raise ValueError("group_norm needs both weight and bias, or neither")
    return channel_affine(xhat, weight, bias)


def _scheme() -> str:
    """portable/models.py's SCHEME, the profile's one Ozaki scheme; imported at call time so that portable/models.py
    can import this module at its top for the zoo (no import cycle in either order)."""
    from verity.engine.portable.models import SCHEME
    return SCHEME


def _conv(conv: nn.Conv2d, x: torch.Tensor) -> torch.Tensor:
    if conv.stride[0] != conv.stride[1] or conv.padding[0] != conv.padding[1]:
        raise ValueError("portable conv2d needs square stride and padding")
    return conv2d(x, conv.weight, conv.bias, conv.stride[0], conv.padding[0], _scheme())


def _norm(norm: nn.GroupNorm, x: torch.Tensor) -> torch.Tensor:
    return group_norm(x, norm.num_groups, norm.weight, norm.bias, norm.eps)


def _conv_norm(m: native.ConvNorm, x: torch.Tensor) -> torch.Tensor:
    return _norm(m.norm, _conv(m.conv, x))


def _block(block: native.BasicBlock, x: torch.Tensor) -> torch.Tensor:
    h = torch.relu(_norm(block.norm1, _conv(block.conv1, x)))
    h = _norm(block.norm2, _conv(block.conv2, h))
    return torch.relu(h + (x if block.shortcut is None else _conv_norm(block.shortcut, x)))


class PortableResNet(native.ResNet):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(_conv_norm(self.stem, x))
        for stage in self.stages:
            for block in stage:
                x = _block(block, x)
        return linear(mean(x.flatten(2), -1), self.head.weight, self.head.bias, _scheme())


@torch.no_grad()
def init_portable(model: native.ResNet, g: torch.Generator) -> None:
    """Portable initial weights (portable/init.py's uniform_ draws) in the native init's order and distributions:
    fan-in uniform for convs and the head (bias too), GroupNorm weight 1 and bias 0. (uniform_ imported here so
    that portable/init.py may import this module at its top.)"""
    from verity.engine.portable.init import uniform_
    for m in model.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            bound = 1.0 / math.sqrt(m.weight[0].numel())       # Python float ops: IEEE double everywhere
            uniform_(m.weight, bound, g)
            if m.bias is not None:
                uniform_(m.bias, bound, g)
        elif isinstance(m, nn.GroupNorm):
            m.weight.fill_(1.0)
            m.bias.zero_()


__all__ = ["PortableResNet", "init_portable", "group_norm", "channel_affine", "ChannelAffineFn"]
