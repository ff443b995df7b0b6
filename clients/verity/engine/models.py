"""The model zoo: every architecture a job may name, built from a pydantic config.

Submitters never ship code: a manifest says `{"arch": "gpt", "config": {...}}`
and solvers build the model from this file. Models are built on the meta
device (no memory, no RNG touched) and then either filled by `init_weights`
from an explicit `torch.Generator` or loaded from a weights file. No layer
here is stochastic (no dropout), so the only randomness in training is the
batch sampling in `runner.py`, driven by per-step generators.
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Annotated, Literal, Union

import torch
import torch.nn as nn
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict, Field, model_validator
from torch.overrides import TorchFunctionMode

from verity.engine.decoder import Decoder, DecoderConfig  # noqa: F401  (the decoder family lives in decoder.py)
from verity.engine.resnet import ResNet, ResNetConfig  # noqa: F401  (and the ResNet family in resnet.py)

MAX_PARAMETERS = 200_000_000  # a job may not ask solvers to allocate more
# a float32 state at that cap as a safetensors file, header included: the most a model file read from the network or
# a disk may hold (verity.hf.files, verity.job.verify)
MAX_STATE_FILE_BYTES = 4 * MAX_PARAMETERS + (16 << 20)


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


# --------------------------------------------------------------------------- MLP
class MLPConfig(_Config):
    in_features: int = Field(ge=1, le=1 << 20)
    hidden: list[Annotated[int, Field(ge=1, le=16384)]] = Field(default_factory=list, max_length=8)
    out_features: int = Field(ge=1, le=65536)
    activation: Literal["relu", "gelu", "tanh"] = "relu"


_ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu, "tanh": torch.tanh}


def _init_fan_in(layer: nn.Module, g: torch.Generator) -> None:
    # PyTorch's default bound U(-1/sqrt(fan_in), 1/sqrt(fan_in)), but from our generator.
    fan_in = layer.weight[0].numel()
    bound = 1.0 / math.sqrt(fan_in)
    layer.weight.uniform_(-bound, bound, generator=g)
    if layer.bias is not None:
        layer.bias.uniform_(-bound, bound, generator=g)


class MLP(nn.Module):
    def __init__(self, cfg: MLPConfig):
        super().__init__()
        dims = [cfg.in_features, *cfg.hidden, cfg.out_features]
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims, dims[1:]))
        self.act = _ACTIVATIONS[cfg.activation]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.flatten(1)
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = self.act(x)
        return x

    @torch.no_grad()
    def init_weights(self, g: torch.Generator) -> None:
        for layer in self.layers:
            _init_fan_in(layer, g)


# --------------------------------------------------------------------------- CNN
class CNNConfig(_Config):
    in_channels: int = Field(ge=1, le=16)
    height: int = Field(ge=1, le=512)
    width: int = Field(ge=1, le=512)
    channels: list[Annotated[int, Field(ge=1, le=512)]] = Field(min_length=1, max_length=6)
    num_classes: int = Field(ge=1, le=65536)


class CNN(nn.Module):
    """3x3 convolutions with stride 2 (downsampling without pooling layers,
    whose CUDA backward passes are not deterministic), ReLU, then a linear head."""

    def __init__(self, cfg: CNNConfig):
        super().__init__()
        chans = [cfg.in_channels, *cfg.channels]
        self.convs = nn.ModuleList(nn.Conv2d(a, b, 3, stride=2, padding=1) for a, b in zip(chans, chans[1:]))
        h, w = cfg.height, cfg.width
        for _ in cfg.channels:
            h, w = (h + 1) // 2, (w + 1) // 2
        self.head = nn.Linear(chans[-1] * h * w, cfg.num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for conv in self.convs:
            x = F.relu(conv(x))
        return self.head(x.flatten(1))

    @torch.no_grad()
    def init_weights(self, g: torch.Generator) -> None:
        for layer in [*self.convs, self.head]:
            _init_fan_in(layer, g)


# --------------------------------------------------------------------------- GPT
class GPTConfig(_Config):
    vocab_size: int = Field(ge=2, le=65536)
    block_size: int = Field(ge=1, le=4096)
    n_layer: int = Field(ge=1, le=48)
    n_head: int = Field(ge=1, le=64)
    n_embd: int = Field(ge=1, le=4096)
    bias: bool = True

    @model_validator(mode="after")
    def _heads_divide(self) -> "GPTConfig":
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd ({self.n_embd}) must be a multiple of n_head ({self.n_head})")
        return self


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.n_head = cfg.n_head
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=cfg.bias)
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd, bias=cfg.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        # Explicit attention rather than scaled_dot_product_attention: the fused
        # CUDA kernels have non-deterministic backward passes.
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        att = F.softmax(att.masked_fill(~causal, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class FeedForward(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd, bias=cfg.bias)
        self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd, bias=cfg.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(F.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.mlp = FeedForward(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """A small decoder-only LM after nanoGPT (no dropout, untied head)."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.h = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        T = idx.size(1)
        pos = torch.arange(T, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))  # (B, T, vocab) logits

    @torch.no_grad()
    def init_weights(self, g: torch.Generator) -> None:
        proj_std = 0.02 / math.sqrt(2 * self.cfg.n_layer)  # GPT-2's scaled residual init
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                p.normal_(0.0, proj_std, generator=g)
            elif name.startswith("ln") or ".ln_" in name:
                p.fill_(1.0 if name.endswith("weight") else 0.0)
            elif name.endswith("weight"):
                p.normal_(0.0, 0.02, generator=g)
            else:
                p.zero_()


# --------------------------------------------------------------------------- zoo
class MLPSpec(_Config):
    arch: Literal["mlp"]
    config: MLPConfig


class CNNSpec(_Config):
    arch: Literal["cnn"]
    config: CNNConfig


class GPTSpec(_Config):
    arch: Literal["gpt"]
    config: GPTConfig


class DecoderSpec(_Config):
    arch: Literal["decoder"]
    config: DecoderConfig


class ResNetSpec(_Config):
    arch: Literal["resnet"]
    config: ResNetConfig


ModelSpec = Annotated[Union[MLPSpec, CNNSpec, ResNetSpec, GPTSpec, DecoderSpec], Field(discriminator="arch")]
AnySpec = Union[MLPSpec, CNNSpec, ResNetSpec, GPTSpec, DecoderSpec]
ZOO: dict[str, type[nn.Module]] = {"mlp": MLP, "cnn": CNN, "resnet": ResNet, "gpt": GPT, "decoder": Decoder}


def _zoo(portable: bool) -> dict[str, type[nn.Module]]:
    if not portable:
        return ZOO
    from verity.engine.portable.models import ZOO as PORTABLE_ZOO  # lazy: it subclasses this module's models
    return PORTABLE_ZOO


def build_model(spec: AnySpec, device: str | torch.device = "cpu",
                portable: bool = False) -> nn.Module:
    """The model with *uninitialised* storage on `device`: call `init_weights`
    or `load_state_dict` before use. Built on meta first so that construction
    neither allocates twice nor draws from the global RNG. `portable`: the same
    parameters, forward on verity.engine.portable ops (profile portable-f32)."""
    with _on_meta():
        model = _zoo(portable)[spec.arch](spec.config)
    return model.to_empty(device=device)


class _SkipRandomInit(TorchFunctionMode):
    """Meta tensors hold no values, so the layers' random initialisers are no-ops on them here. Left to torch, a meta
    tensor's `normal_` (nn.Embedding's init) runs through torch's Python reference ops, whose first call imports
    torch._dynamo: 2.3 s of CPU in every process that built a GPT, node start-up included (it validates the
    reference GPT manifest)."""
    _SKIPPED = frozenset({"normal_", "uniform_"})  # nn.init's and Tensor's, matched by name

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if getattr(func, "__name__", None) in self._SKIPPED:
            target = args[0] if args else kwargs.get("tensor")  # nn.init passes everything by keyword
            if isinstance(target, torch.Tensor) and target.is_meta:
                return target
        return func(*args, **kwargs)


@contextmanager
def _on_meta():
    """Build modules on the meta device without running their random initialisers."""
    with torch.device("meta"), _SkipRandomInit():
        yield


def init_model(spec: AnySpec, seed: int, portable: bool = False) -> nn.Module:
    """A CPU model initialised from `seed` alone. Native init: same bits for the same
    torch build and ISA level; `portable`: same bits on every machine (portable/init.py)."""
    model = build_model(spec, "cpu", portable)
    g = torch.Generator(device="cpu").manual_seed(seed)
    if portable:
        from verity.engine.portable.init import init_weights
        init_weights(model, g)
    else:
        model.init_weights(g)
    return model


def count_parameters(spec: AnySpec) -> int:
    with _on_meta():
        model = ZOO[spec.arch](spec.config)
    return sum(p.numel() for p in model.parameters())
