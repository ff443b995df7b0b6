"""Hugging Face tensor names and layouts <-> the zoo's, for GPT-2 and Llama.

Both directions are a table of (ours, theirs, how): `how` is "same" (copy), "t" (GPT-2's Conv1D stores a
linear layer's weight transposed), or a slice of GPT-2's fused `c_attn` (q, k, v side by side). A file whose
names or shapes do not match the config fails on the first mismatch, named (`HFUnsupported`), before anything
is uploaded.
"""
from __future__ import annotations

import torch

from verity.hf.configs import HFUnsupported, hf_family

_GPT2_IGNORED = (".attn.bias", ".attn.masked_bias")  # causal-mask buffers older GPT-2 files carry


def _gpt2_table(arch: str, c) -> list[tuple[str, str, str]]:
    """(our name, GPT-2 name without its `transformer.` prefix, how) for every tensor."""
    nanogpt = arch == "gpt"
    out = [("wte.weight", "wte.weight", "same"), ("wpe.weight", "wpe.weight", "same")]
    for i in range(c.n_layer):
        h = f"h.{i}."
        for ln in ("ln_1", "ln_2"):
            out += [(h + ln + ".weight", h + ln + ".weight", "same"), (h + ln + ".bias", h + ln + ".bias", "same")]
        if nanogpt:
            out += [(h + "attn.c_attn.weight", h + "attn.c_attn.weight", "t"),
                    (h + "attn.c_attn.bias", h + "attn.c_attn.bias", "same"),
                    (h + "attn.c_proj.weight", h + "attn.c_proj.weight", "t"),
                    (h + "attn.c_proj.bias", h + "attn.c_proj.bias", "same"),
                    (h + "mlp.c_fc.weight", h + "mlp.c_fc.weight", "t"), (h + "mlp.c_fc.bias", h + "mlp.c_fc.bias", "same"),
                    (h + "mlp.c_proj.weight", h + "mlp.c_proj.weight", "t"),
                    (h + "mlp.c_proj.bias", h + "mlp.c_proj.bias", "same")]
            continue
        for j, p in enumerate(("q", "k", "v")):
            out += [(h + f"attn.{p}_proj.weight", h + "attn.c_attn.weight", f"qkv{j}t"),
                    (h + f"attn.{p}_proj.bias", h + "attn.c_attn.bias", f"qkv{j}")]
        out += [(h + "attn.o_proj.weight", h + "attn.c_proj.weight", "t"), (h + "attn.o_proj.bias", h + "attn.c_proj.bias", "same"),
                (h + "mlp.up_proj.weight", h + "mlp.c_fc.weight", "t"), (h + "mlp.up_proj.bias", h + "mlp.c_fc.bias", "same"),
                (h + "mlp.down_proj.weight", h + "mlp.c_proj.weight", "t"),
                (h + "mlp.down_proj.bias", h + "mlp.c_proj.bias", "same")]
    out += [("ln_f.weight", "ln_f.weight", "same"), ("ln_f.bias", "ln_f.bias", "same")]
    if nanogpt or not c.tie_embeddings:
        out.append(("lm_head.weight", "lm_head.weight", "same"))
    return out


def _llama_table(c) -> list[tuple[str, str, str]]:
    out = [("wte.weight", "model.embed_tokens.weight", "same")]
    for i in range(c.n_layer):
        h, l = f"h.{i}.", f"model.layers.{i}."
        out += [(h + "ln_1.weight", l + "input_layernorm.weight", "same"),
                (h + "ln_2.weight", l + "post_attention_layernorm.weight", "same")]
        for p in ("q", "k", "v", "o"):
            out.append((h + f"attn.{p}_proj.weight", l + f"self_attn.{p}_proj.weight", "same"))
            if c.bias:
                out.append((h + f"attn.{p}_proj.bias", l + f"self_attn.{p}_proj.bias", "same"))
        for p in ("gate", "up", "down"):
            out.append((h + f"mlp.{p}_proj.weight", l + f"mlp.{p}_proj.weight", "same"))
            if c.bias:
                out.append((h + f"mlp.{p}_proj.bias", l + f"mlp.{p}_proj.bias", "same"))
    out.append(("ln_f.weight", "model.norm.weight", "same"))
    if not c.tie_embeddings:
        out.append(("lm_head.weight", "lm_head.weight", "same"))
    return out


def _table(arch: str, c) -> list[tuple[str, str, str]]:
    return _llama_table(c) if hf_family(arch, c) == "llama" else _gpt2_table(arch, c)


def _qkv_slice(t: torch.Tensor, j: int) -> torch.Tensor:
    width = t.shape[-1] // 3
    return t[..., j * width:(j + 1) * width]


def from_hf(arch: str, c, tensors: dict[str, torch.Tensor], expected: dict[str, tuple[int, ...]],
            source: str) -> dict[str, torch.Tensor]:
    """The zoo's state dict (float32, contiguous) from a Hugging Face file's tensors; `expected` is the zoo model's
    {name: shape}. Refuses the first missing, unexpected or misshaped tensor."""
    family = hf_family(arch, c)
    theirs = {}
    for name, t in tensors.items():
        if family == "gpt2":
            name = name.removeprefix("transformer.")
            if name.endswith(_GPT2_IGNORED):
                continue
        theirs[name] = t
    if family == "gpt2" and "lm_head.weight" in theirs and c.tie_embeddings:
        del theirs["lm_head.weight"]  # a tied head saved anyway: the embedding is the head
    out, used = {}, set()
    for ours, name, how in _table(arch, c):
        if ours not in expected:  # e.g. a decoder without biases reading GPT-2's: refused below as unexpected
            continue
        if name not in theirs:
            raise HFUnsupported(source, f"tensor {name!r} is missing (the config needs it for {ours!r})")
        t = theirs[name]
        used.add(name)
        if how.startswith("qkv"):
            t = _qkv_slice(t, int(how[3]))
        if how.endswith("t"):
            t = t.t()
        if tuple(t.shape) != tuple(expected[ours]):
            raise HFUnsupported(source, f"tensor {name!r} has shape {list(theirs[name].shape)}; the config "
                                        f"needs {list(expected[ours])} for {ours!r}")
        out[ours] = t.to(torch.float32).contiguous()
    extra = sorted(set(theirs) - used)
    if extra:
        raise HFUnsupported(source, f"tensor {extra[0]!r} is not part of the model the config describes")
    missing = sorted(set(expected) - set(out))
    if missing:
        raise HFUnsupported(source, f"the model needs {missing[0]!r}, which this file cannot provide")
    return out


def to_hf(arch: str, c, model: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A Hugging Face state dict (their names and layouts, float32) from the zoo model's tensors. GPT-2 always has
    biases: a decoder without them exports zeros, which compute the same logits."""
    family = hf_family(arch, c)
    out: dict[str, torch.Tensor] = {}
    qkv: dict[str, list] = {}
    for ours, name, how in _table(arch, c):
        t = model.get(ours)  # None: a bias this decoder does not have
        if how.startswith("qkv"):
            qkv.setdefault(name, [None, None, None])[int(how[3])] = t
            continue
        if t is None:
            out[name] = None  # filled with zeros below, once the shape is known
            continue
        out[name] = (t.t() if how.endswith("t") else t).contiguous()
    for name, parts in qkv.items():
        if name.endswith(".weight"):
            out[name] = torch.cat([p.t() for p in parts], dim=1).contiguous()
        else:
            width = out[name.removesuffix(".bias") + ".weight"].shape[1]
            out[name] = torch.cat(parts) if all(p is not None for p in parts) else torch.zeros(width)
    for name, t in list(out.items()):
        if t is None:  # a missing bias (GPT-2 family only): zeros of the matching layer's output width
            stem = name.removesuffix(".bias")
            weight = out.get(stem + ".weight")
            width = weight.shape[0] if "ln_" in stem else weight.shape[1]
            out[name] = torch.zeros(width)
    if family == "gpt2":
        out = {("lm_head.weight" if n == "lm_head.weight" else "transformer." + n): t for n, t in out.items()}
    return {n: t.to(torch.float32).contiguous() for n, t in out.items()}
