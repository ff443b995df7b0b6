"""The `decoder` family: decoder-only transformers of GPT-2 and Llama shapes from one config.

GPT-2: learned positions, LayerNorm with biases, tanh GELU ("gelu_new"), biases on every linear layer, tied
embeddings. Llama: rotary positions (RoPE), RMSNorm, SwiGLU, no biases, grouped-query attention (n_kv_head <
n_head), an untied head. The state_dict names follow one fixed scheme (docs/engine.md, "The decoder family")
that weight converters are written against: wte, wpe, h.{i}.ln_1, h.{i}.attn.{q,k,v,o}_proj, h.{i}.ln_2,
h.{i}.mlp.{gate,up,down}_proj, ln_f, lm_head (absent when tied: the logits use wte.weight, so no state dict ever
holds one tensor under two names).

Like the rest of the zoo (models.py): built on the meta device, filled by `init_weights` from an explicit
generator, no dropout, explicit attention (scaled_dot_product_attention's CUDA backward is nondeterministic).
portable/decoder.py has the same model on portable ops. The classes read their config only by attribute and
need nothing outside this file but torch, so model_card.py can ship them in a plain-PyTorch loader.
"""
from __future__ import annotations

import math
from decimal import ROUND_HALF_EVEN, Context, Decimal, localcontext
from functools import lru_cache
from typing import Literal

import torch
import torch.nn as nn
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Config(BaseModel):   # models._Config's settings (defined here: models.py imports this module)
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class DecoderConfig(_Config):
    vocab_size: int = Field(ge=2, le=65536)
    block_size: int = Field(ge=1, le=8192)
    n_layer: int = Field(ge=1, le=48)
    n_head: int = Field(ge=1, le=64)
    n_kv_head: int | None = Field(default=None, ge=1, le=64)        # None: n_head (no grouped-query attention)
    n_embd: int = Field(ge=1, le=8192)
    intermediate_size: int | None = Field(default=None, ge=1, le=32768)   # None: 4 * n_embd
    positions: Literal["learned", "rope"] = "rope"
    rope_theta: float = Field(default=10000.0, gt=0, le=1e7)
    norm: Literal["layernorm", "rmsnorm"] = "rmsnorm"
    norm_eps: float = Field(default=1e-5, ge=1e-12, le=1e-2)
    activation: Literal["gelu", "gelu_tanh", "swiglu"] = "swiglu"
    bias: bool = False             # every linear layer's bias and LayerNorm's (RMSNorm has none)
    tie_embeddings: bool = False   # logits from wte.weight, no lm_head

    @model_validator(mode="after")
    def _shapes(self) -> "DecoderConfig":
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd ({self.n_embd}) must be a multiple of n_head ({self.n_head})")
        if self.n_kv_head is not None and self.n_head % self.n_kv_head:
            raise ValueError(f"n_kv_head ({self.n_kv_head}) must divide n_head ({self.n_head})")
        if self.positions == "rope" and (self.n_embd // self.n_head) % 2:
            raise ValueError(f"rope needs an even head size, got n_embd / n_head = {self.n_embd // self.n_head}")
        if 4 * self.n_embd > 32768 and self.intermediate_size is None:
            raise ValueError("intermediate_size defaults to 4 * n_embd, above 32768: give it")
        return self


def kv_heads(cfg) -> int:
    return cfg.n_kv_head or cfg.n_head


def ffn_size(cfg) -> int:
    return cfg.intermediate_size or 4 * cfg.n_embd


# --------------------------------------------------------------------------- RoPE table
_PREC = 40
_PI = Decimal("3.14159265358979323846264338327950288419716939937510582097494459230781640628620899863")
_SPLIT = 64     # position p = _SPLIT * q + r: angles of r and of _SPLIT * q by series, combined by angle addition


def _sin_cos(x: Decimal) -> tuple[Decimal, Decimal]:
    """(sin x, cos x) to ~_PREC digits: x = n * pi/2 + r with |r| <= pi/4, Taylor series of r, quadrant by n."""
    half_pi = _PI / 2
    n = int((x / half_pi).to_integral_value(rounding=ROUND_HALF_EVEN))
    r = x - n * half_pi
    r2, eps = r * r, Decimal(10) ** -(_PREC + 2)
    s = term = r                                  # sin: r - r^3/3! + ...
    k = 1
    while abs(term) > eps:
        term = -term * r2 / ((k + 1) * (k + 2))
        s += term
        k += 2
    c = term = Decimal(1)                         # cos: 1 - r^2/2! + ...
    k = 0
    while abs(term) > eps:
        term = -term * r2 / ((k + 1) * (k + 2))
        c += term
        k += 2
    return ((s, c), (c, -s), (-s, -c), (-c, s))[n % 4]


def _to_f32(d: Decimal) -> float:
    """d rounded to the nearest float32 (ties to even), once: scaled to a 24-bit integer in Decimal, rounded there."""
    if d == 0:
        return 0.0
    scale = 24 - math.frexp(float(d))[1]          # 2**23 <= |d| * 2**scale < 2**24 (2**24 when it rounds up)
    m = (d * (Decimal(2) ** scale if scale >= 0 else Decimal(1) / Decimal(2) ** -scale))
    return math.ldexp(int(m.to_integral_value(rounding=ROUND_HALF_EVEN)), -scale)


@lru_cache(maxsize=16)
def rope_table(block_size: int, head_dim: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos, sin), each float32 (block_size, head_dim): Hugging Face Llama's table (non-interleaved: the columns
    are cat(freqs, freqs), freqs[p, i] = p * theta**(-2i/head_dim) for i < head_dim/2), each entry the exact value
    rounded to float32 once.

    Why Decimal: the table is an input to every forward pass, so its bits are part of what a job computes.
    torch's cos/sin (and pow, exp) are library calls whose float32 and float64 results differ between SLEEF,
    libm, MKL and CUDA builds, and Hugging Face computes the angles in float32 (p * inv_freq rounds, by up to
    p * 2**-24 rad). Python's `decimal` is software arithmetic, identical on every machine: inv_freq by Decimal
    exp/ln, sin/cos of p * inv_freq by series at 40 digits (positions split p = 64q + r and joined by angle
    addition: 64 + block/64 series per frequency instead of block), then one rounding to float32. Native and
    portable forwards use this same table. Cached per (block_size, head_dim, theta); 1024 x 64 takes ~0.3 s.
    """
    if head_dim % 2:
        raise ValueError(f"rope needs an even head size, got {head_dim}")
    half = head_dim // 2
    cos = [[0.0] * head_dim for _ in range(block_size)]
    sin = [[0.0] * head_dim for _ in range(block_size)]
    with localcontext(Context(prec=_PREC, rounding=ROUND_HALF_EVEN)):
        ln_theta = Decimal(theta).ln()            # Decimal(float) is the float's exact binary value
        for i in range(half):
            w = (-(Decimal(2 * i) / head_dim) * ln_theta).exp()
            low = [_sin_cos(w * r) for r in range(min(_SPLIT, block_size))]
            high = [_sin_cos(w * (_SPLIT * q)) for q in range((block_size + _SPLIT - 1) // _SPLIT)]
            for p in range(block_size):
                (s1, c1), (s2, c2) = high[p // _SPLIT], low[p % _SPLIT]
                c, s = _to_f32(c1 * c2 - s1 * s2), _to_f32(s1 * c2 + c1 * s2)
                cos[p][i] = cos[p][i + half] = c
                sin[p][i] = sin[p][i + half] = s
    return torch.tensor(cos, dtype=torch.float32), torch.tensor(sin, dtype=torch.float32)


@lru_cache(maxsize=16)
def _rope_on(block_size: int, head_dim: int, theta: float, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    cos, sin = rope_table(block_size, head_dim, theta)
    return cos.to(device), sin.to(device)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x (..., T, head_dim) rotated as Hugging Face Llama's apply_rotary_pos_emb: x * cos + rotate_half(x) * sin."""
    return x * cos + rotate_half(x) * sin


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """(B, n_kv, T, hd) -> (B, n_kv * n_rep, T, hd): head j reads kv head j // n_rep (Hugging Face's repeat_kv)."""
    if n_rep == 1:
        return x
    B, H, T, D = x.shape
    return x[:, :, None].expand(B, H, n_rep, T, D).reshape(B, H * n_rep, T, D)


# --------------------------------------------------------------------------- layers
class RMSNorm(nn.Module):
    """x / sqrt(mean(x**2) + eps) * weight over the last dim (Llama's; no bias)."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def _norm(cfg) -> nn.Module:
    if cfg.norm == "rmsnorm":
        return RMSNorm(cfg.n_embd, cfg.norm_eps)
    return nn.LayerNorm(cfg.n_embd, eps=cfg.norm_eps, bias=cfg.bias)


class DecoderAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.n_head, self.n_kv_head, self.head_dim = cfg.n_head, kv_heads(cfg), cfg.n_embd // cfg.n_head
        self.q_proj = nn.Linear(cfg.n_embd, self.n_head * self.head_dim, bias=cfg.bias)
        self.k_proj = nn.Linear(cfg.n_embd, self.n_kv_head * self.head_dim, bias=cfg.bias)
        self.v_proj = nn.Linear(cfg.n_embd, self.n_kv_head * self.head_dim, bias=cfg.bias)
        self.o_proj = nn.Linear(self.n_head * self.head_dim, cfg.n_embd, bias=cfg.bias)

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None) -> torch.Tensor:
        B, T, _ = x.size()
        q = self.q_proj(x).view(B, T, self.n_head, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.n_kv_head, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.n_kv_head, self.head_dim).transpose(1, 2)
        if rope is not None:
            q, k = apply_rope(q, *rope), apply_rope(k, *rope)
        n_rep = self.n_head // self.n_kv_head
        k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_dim))
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        att = F.softmax(att.masked_fill(~causal, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, self.n_head * self.head_dim)
        return self.o_proj(y)


class DecoderMLP(nn.Module):
    """down(act(up(x))) for gelu / gelu_tanh; down(silu(gate(x)) * up(x)) for swiglu."""

    def __init__(self, cfg):
        super().__init__()
        self.activation, inner = cfg.activation, ffn_size(cfg)
        if cfg.activation == "swiglu":
            self.gate_proj = nn.Linear(cfg.n_embd, inner, bias=cfg.bias)
        self.up_proj = nn.Linear(cfg.n_embd, inner, bias=cfg.bias)
        self.down_proj = nn.Linear(inner, cfg.n_embd, bias=cfg.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.activation == "swiglu":
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
        approximate = "tanh" if self.activation == "gelu_tanh" else "none"
        return self.down_proj(F.gelu(self.up_proj(x), approximate=approximate))


class DecoderBlock(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln_1 = _norm(cfg)
        self.attn = DecoderAttention(cfg)
        self.ln_2 = _norm(cfg)
        self.mlp = DecoderMLP(cfg)

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x), rope)
        return x + self.mlp(self.ln_2(x))


class Decoder(nn.Module):
    """Pre-norm decoder-only LM: GPT-2 and Llama shapes (DecoderConfig). idx (B, T) int64 -> logits (B, T, vocab)."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        if cfg.positions == "learned":
            self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.h = nn.ModuleList(DecoderBlock(cfg) for _ in range(cfg.n_layer))
        self.ln_f = _norm(cfg)
        if not cfg.tie_embeddings:
            self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)

    def rope(self, T: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The first T rows of the (cos, sin) table on `device`, or None for learned positions."""
        c = self.cfg
        if c.positions != "rope":
            return None
        cos, sin = _rope_on(c.block_size, c.n_embd // c.n_head, float(c.rope_theta), str(device))
        return cos[:T], sin[:T]

    def head_weight(self) -> torch.Tensor:
        return self.wte.weight if self.cfg.tie_embeddings else self.lm_head.weight

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        T = idx.size(1)
        x = self.wte(idx)
        if self.cfg.positions == "learned":
            x = x + self.wpe(torch.arange(T, device=idx.device))
        rope = self.rope(T, idx.device)
        for block in self.h:
            x = block(x, rope)
        return F.linear(self.ln_f(x), self.head_weight())   # (B, T, vocab) logits

    @torch.no_grad()
    def init_weights(self, g: torch.Generator) -> None:
        """GPT-2's init from `g`, in named_parameters() order: weights and embeddings N(0, 0.02), o_proj and
        down_proj N(0, 0.02 / sqrt(2 n_layer)), biases 0, norm weights 1."""
        for name, p, std in init_plan(self):
            if std is None:
                p.fill_(1.0 if name.endswith("weight") and _is_norm(name) else 0.0)
            else:
                p.normal_(0.0, std, generator=g)


def _is_norm(name: str) -> bool:
    return name.startswith("ln_") or ".ln_" in name


def init_plan(model: Decoder):
    """(name, parameter, std) in named_parameters() order: std None for a constant (norm weight 1, else 0)."""
    proj_std = 0.02 / math.sqrt(2 * model.cfg.n_layer)   # GPT-2's scaled residual init
    for name, p in model.named_parameters():
        if _is_norm(name) or name.endswith(".bias"):
            yield name, p, None
        elif name.endswith(("o_proj.weight", "down_proj.weight")):
            yield name, p, proj_std
        else:
            yield name, p, 0.02
