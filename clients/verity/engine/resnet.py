"""ResNet-style image classifiers (basic blocks, GroupNorm, no pooling layers): the zoo's `resnet` family.

Kept in its own file; the zoo (models.py), the manifest's cross-checks, the estimates and the portable
profile reach it through the functions at the bottom:

    ResNetConfig, ResNet                     the config and the native model
    check_resnet_data(cfg, data)             manifest cross-check: (field, message) or None
    resnet_contraction_lengths(cfg, batch)   portable-f32's longest exact-GEMM contraction, by cause
    resnet_gemms(cfg)                        (stage prefix, weight, forward FLOPs per sample), forward order
    resnet_stage_order(cfg)                  stage prefixes in forward order
    resnet_activation_stages(cfg)            (stage prefixes, elements per sample kept for backward)

The portable forward pass is verity.engine.portable.resnet.PortableResNet.
"""
from __future__ import annotations

import math
from typing import Annotated

import torch
import torch.nn as nn
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict, Field, model_validator


# This module imports nothing from models.py, so that models.py can import it at its top for the zoo.
class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)     # models._Config's settings


def _init_fan_in(layer: nn.Module, g: torch.Generator) -> None:
    """models._init_fan_in: PyTorch's default bound U(-1/sqrt(fan_in), 1/sqrt(fan_in)), from our generator."""
    bound = 1.0 / math.sqrt(layer.weight[0].numel())
    layer.weight.uniform_(-bound, bound, generator=g)
    if layer.bias is not None:
        layer.bias.uniform_(-bound, bound, generator=g)


class ResNetConfig(_Config):
    in_channels: int = Field(ge=1, le=16)
    height: int = Field(ge=1, le=512)
    width: int = Field(ge=1, le=512)
    num_classes: int = Field(ge=2, le=65536)
    widths: list[Annotated[int, Field(ge=1, le=1024)]] = Field(min_length=1, max_length=6)   # channels per stage
    blocks: int = Field(ge=1, le=8)                                                          # basic blocks per stage
    groups: int = Field(ge=1, le=64)                     # GroupNorm groups (a narrower layer: one per channel)
    norm_eps: float = Field(default=1e-5, gt=0.0, le=1.0)

    @model_validator(mode="after")
    def _groups_divide(self) -> "ResNetConfig":
        for s, w in enumerate(self.widths):
            if w % norm_groups(self.groups, w):
                raise ValueError(f"widths[{s}] = {w} is not a multiple of its GroupNorm groups "
                                 f"min(groups, width) = {norm_groups(self.groups, w)}")
        return self


def norm_groups(groups: int, channels: int) -> int:
    """The GroupNorm groups of a layer with `channels` channels: `groups`, or one per channel when narrower."""
    return min(groups, channels)


def _out(size: int) -> int:
    """Output size of a stride-2 conv (3x3 pad 1, or 1x1 pad 0): ceil(size / 2)."""
    return (size + 1) // 2


class ConvNorm(nn.Module):
    """conv (no bias) then GroupNorm: the stem and a block's shortcut projection."""

    def __init__(self, c_in: int, c_out: int, kernel: int, stride: int, groups: int, eps: float):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, kernel, stride=stride, padding=kernel // 2, bias=False)
        self.norm = nn.GroupNorm(norm_groups(groups, c_out), c_out, eps=eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.conv(x))


class BasicBlock(nn.Module):
    """relu(norm2(conv2(relu(norm1(conv1(x))))) + shortcut(x)); conv1 carries the stride, and the shortcut is the
    identity, or a strided 1x1 conv + GroupNorm when the shape changes."""

    def __init__(self, c_in: int, c_out: int, stride: int, groups: int, eps: float):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.norm1 = nn.GroupNorm(norm_groups(groups, c_out), c_out, eps=eps)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, stride=1, padding=1, bias=False)
        self.norm2 = nn.GroupNorm(norm_groups(groups, c_out), c_out, eps=eps)
        self.shortcut = ConvNorm(c_in, c_out, 1, stride, groups, eps) if stride != 1 or c_in != c_out else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.norm1(self.conv1(x)))
        h = self.norm2(self.conv2(h))
        return F.relu(h + (x if self.shortcut is None else self.shortcut(x)))


class ResNet(nn.Module):
    """A ResNet of basic blocks for (B, C, H, W) float images; logits (B, num_classes).

    stem: 3x3 conv (stride 1) + GroupNorm + ReLU; then one stage per entry of `widths`, each `blocks` basic
    blocks, the first block of every stage after the first halving H and W with a stride-2 conv; then a global
    average pool and a linear head.

    Determinism: downsampling is by strided convolutions, never pooling layers (CUDA's pooling backward is not
    deterministic), and normalisation is GroupNorm, not BatchNorm: its statistics are per sample (over a group of
    channels and H, W), so a sample's output does not depend on the rest of the batch or on how the batch is split,
    there are no running statistics (no buffers: training and evaluation compute the same function and the state is
    the parameters alone), and no dropout. The only randomness in training is the batch sampling.
    """

    def __init__(self, cfg: ResNetConfig):
        super().__init__()
        self.cfg = cfg
        g, eps = cfg.groups, cfg.norm_eps
        self.stem = ConvNorm(cfg.in_channels, cfg.widths[0], 3, 1, g, eps)
        stages, c_in = [], cfg.widths[0]
        for s, c_out in enumerate(cfg.widths):
            blocks = []
            for b in range(cfg.blocks):
                stride = 2 if s > 0 and b == 0 else 1
                blocks.append(BasicBlock(c_in, c_out, stride, g, eps))
                c_in = c_out
            stages.append(nn.ModuleList(blocks))
        self.stages = nn.ModuleList(stages)
        self.head = nn.Linear(cfg.widths[-1], cfg.num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.stem(x))
        for stage in self.stages:
            for block in stage:
                x = block(x)
        return self.head(x.mean((2, 3)))

    @torch.no_grad()
    def init_weights(self, g: torch.Generator) -> None:
        """Fan-in uniform U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for convs and the head (its bias too), GroupNorm
        weight 1 and bias 0, module by module in named_parameters order."""
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                _init_fan_in(m, g)
            elif isinstance(m, nn.GroupNorm):
                m.weight.fill_(1.0)
                m.bias.zero_()


# --------------------------------------------------------------------------- shapes, for the lead's wiring
def _layout(cfg: ResNetConfig):
    """Every block in forward order: (prefix, c_in, c_out, stride, h_out, w_out, has shortcut conv)."""
    h, w, c_in, out = cfg.height, cfg.width, cfg.widths[0], []
    for s, c_out in enumerate(cfg.widths):
        for b in range(cfg.blocks):
            stride = 2 if s > 0 and b == 0 else 1
            if stride == 2:
                h, w = _out(h), _out(w)
            out.append((f"stages.{s}.{b}.", c_in, c_out, stride, h, w, stride != 1 or c_in != c_out))
            c_in = c_out
    return out


def resnet_stage_order(cfg: ResNetConfig) -> list[str]:
    """Parameter-name prefixes in forward order: the stem, every block, the head."""
    return ["stem."] + [p for p, *_ in _layout(cfg)] + ["head."]


def resnet_gemms(cfg: ResNetConfig) -> list[tuple[str, str | None, int]]:
    """(stage prefix, weight parameter, forward FLOPs per sample) of every convolution and the head, in forward
    order (a convolution is a GEMM of C_in*k*k by C_out at every output position; multiply-adds count 2)."""
    hw = cfg.height * cfg.width
    out = [("stem.", "stem.conv.weight", 2 * cfg.in_channels * 9 * cfg.widths[0] * hw)]
    for p, a, b, _, h, w, proj in _layout(cfg):
        out.append((p, p + "conv1.weight", 2 * a * 9 * b * h * w))
        out.append((p, p + "conv2.weight", 2 * b * 9 * b * h * w))
        if proj:
            out.append((p, p + "shortcut.conv.weight", 2 * a * b * h * w))
    return out + [("head.", "head.weight", 2 * cfg.widths[-1] * cfg.num_classes)]


def resnet_activation_stages(cfg: ResNetConfig) -> list[tuple[tuple[str, ...], int]]:
    """(parameter prefixes of a stage, elements per sample it keeps for backward), in forward order; an upper
    bound in the convention of estimate.py's cnn (a conv counts its im2col columns C_in*k*k*H_out*W_out):
    conv + GroupNorm keeps the columns and 2 normalised copies (normalised, and the affine's input), each ReLU
    its output; the head its pooled input and 2 x classes (logits and softmax)."""
    hw = cfg.height * cfg.width
    out = [(("stem.",), cfg.in_channels * 9 * hw + 3 * cfg.widths[0] * hw)]
    for p, a, b, _, h, w, proj in _layout(cfg):
        n = b * h * w
        e = a * 9 * h * w + 3 * n          # conv1 columns, norm1 (2), relu
        e += b * 9 * h * w + 2 * n         # conv2 columns, norm2 (2)
        e += n                             # relu of the sum
        if proj:
            e += a * h * w + 2 * n         # 1x1 conv columns, its norm (2)
        out.append(((p,), e))
    return out + [(("head.",), cfg.widths[-1] + 2 * cfg.num_classes)]


def resnet_contraction_lengths(cfg: ResNetConfig, batch_size: int) -> dict[str, int]:
    """The longest GEMM contraction of a portable-f32 training step, by the manifest field to blame.

    A conv of C_in -> C_out with a k x k kernel is im2col + GEMM: forward contracts C_in*k*k, its input gradient
    C_out, its weight gradient batch*H_out*W_out rows; the head contracts widths[-1] forward, num_classes for its
    input gradient and batch rows for its weight gradient. GroupNorm and the pool are fixed-tree sums, no GEMM.
    """
    widths = [cfg.in_channels * 9, cfg.widths[0], cfg.widths[-1], cfg.num_classes]
    rows = max(batch_size, batch_size * cfg.height * cfg.width)            # the stem, at full resolution
    for _, a, b, _, h, w, proj in _layout(cfg):
        widths += [a * 9, b * 9, b] + ([a] if proj else [])
        rows = max(rows, batch_size * h * w)
    return {"model.config": max(widths), "batch_size": rows}


def check_resnet_data(cfg: ResNetConfig, data) -> tuple[str, str] | None:
    """The manifest cross-check of a resnet against its data spec: (field, message) for ManifestInvalid, or None."""
    if data.task != "classification" or data.x_dtype != "float32":
        return "data.task", "resnet needs float32 classification data"
    if list(data.x_shape) != [cfg.in_channels, cfg.height, cfg.width]:
        return "data.x_shape", f"{data.x_shape} != [in_channels, height, width] of the resnet"
    if cfg.num_classes != data.num_classes:
        return "model.config.num_classes", f"{cfg.num_classes} != data.num_classes ({data.num_classes})"
    return None


def resnet_parameter_count(cfg: ResNetConfig) -> int:
    """Parameters of a config, counted from the shapes (no model built)."""
    n = cfg.in_channels * 9 * cfg.widths[0] + 2 * cfg.widths[0]
    for _, a, b, _, _, _, proj in _layout(cfg):
        n += a * 9 * b + b * 9 * b + 4 * b + ((a * b + 2 * b) if proj else 0)
    return n + cfg.widths[-1] * cfg.num_classes + cfg.num_classes


__all__ = ["ResNetConfig", "ResNet", "BasicBlock", "ConvNorm", "norm_groups", "check_resnet_data",
           "resnet_contraction_lengths", "resnet_gemms", "resnet_stage_order", "resnet_activation_stages",
           "resnet_parameter_count"]
