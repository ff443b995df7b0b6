"""Hugging Face `config.json` <-> the zoo's decoder config, for the GPT-2 and Llama families.

`from_hf_config` reads a published model's config (model_type "gpt2" or "llama") into a zoo model spec
(`{"arch": "decoder", "config": {...}}`), refusing any option the decoder does not compute the same way (a rope
scaling, attention scaled by layer index, a different head size, ...) with the option's name.
`to_hf_config` is the way back, for `verity job download --format hf`: a decoder or the nanoGPT-style `gpt`
becomes a GPT2LMHeadModel or a LlamaForCausalLM config, or `HFUnsupported` says why none fits.
"""
from __future__ import annotations

from verity.errors import VerityError

# transformers' GPT-2 activation names -> the decoder's
_GPT2_ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu"}


class HFUnsupported(VerityError):
    """A Hugging Face config or weights file the decoder cannot take, or a model no transformers class loads."""

    def __init__(self, source: str, why: str):
        self.source, self.why = source, why
        super().__init__(f"{source}: {why}")


def _require(doc: dict, source: str, key: str, allowed, default=None) -> None:
    value = doc.get(key, default)
    if value not in allowed:
        raise HFUnsupported(source, f"{key} = {value!r} is not supported (the decoder computes {allowed[0]!r})")


def _int(doc: dict, source: str, key: str) -> int:
    value = doc.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise HFUnsupported(source, f"{key} must be a positive integer, found {value!r}")
    return value


def from_hf_config(doc: dict, source: str = "config.json") -> dict:
    """A zoo model spec for a Hugging Face GPT-2 or Llama config (the parsed config.json)."""
    if not isinstance(doc, dict):
        raise HFUnsupported(source, "a config.json holds a JSON object")
    kind = doc.get("model_type")
    if kind == "gpt2":
        return {"arch": "decoder", "config": _from_gpt2(doc, source)}
    if kind == "llama":
        return {"arch": "decoder", "config": _from_llama(doc, source)}
    raise HFUnsupported(source, f"model_type {kind!r} is not one the decoder family loads (gpt2, llama)")


def _from_gpt2(doc: dict, source: str) -> dict:
    act = doc.get("activation_function", "gelu_new")
    if act not in _GPT2_ACTIVATIONS:
        raise HFUnsupported(source, f"activation_function = {act!r} is not supported ({', '.join(_GPT2_ACTIVATIONS)})")
    _require(doc, source, "scale_attn_weights", (True,), True)
    _require(doc, source, "scale_attn_by_inverse_layer_idx", (False,), False)
    _require(doc, source, "reorder_and_upcast_attn", (False,), False)
    n_embd = _int(doc, source, "n_embd")
    inner = doc.get("n_inner")
    return {"vocab_size": _int(doc, source, "vocab_size"), "block_size": _int(doc, source, "n_positions"),
            "n_layer": _int(doc, source, "n_layer"), "n_head": _int(doc, source, "n_head"), "n_embd": n_embd,
            "intermediate_size": 4 * n_embd if inner is None else _int(doc, source, "n_inner"),
            "positions": "learned", "norm": "layernorm", "norm_eps": float(doc.get("layer_norm_epsilon", 1e-5)),
            "activation": _GPT2_ACTIVATIONS[act], "bias": True,
            "tie_embeddings": bool(doc.get("tie_word_embeddings", True))}


def _from_llama(doc: dict, source: str) -> dict:
    _require(doc, source, "hidden_act", ("silu",), "silu")
    _require(doc, source, "rope_scaling", (None,), None)
    if doc.get("attention_bias", False) != doc.get("mlp_bias", False):
        raise HFUnsupported(source, "attention_bias and mlp_bias differ (the decoder's `bias` sets both)")
    hidden, heads = _int(doc, source, "hidden_size"), _int(doc, source, "num_attention_heads")
    head_dim = doc.get("head_dim")
    if head_dim is not None and heads * head_dim != hidden:
        raise HFUnsupported(source, f"head_dim = {head_dim} is not hidden_size / num_attention_heads "
                                    f"({hidden} / {heads})")
    return {"vocab_size": _int(doc, source, "vocab_size"), "block_size": _int(doc, source, "max_position_embeddings"),
            "n_layer": _int(doc, source, "num_hidden_layers"), "n_head": heads,
            "n_kv_head": doc.get("num_key_value_heads") or heads, "n_embd": hidden,
            "intermediate_size": _int(doc, source, "intermediate_size"), "positions": "rope",
            "rope_theta": float(doc.get("rope_theta", 10000.0)), "norm": "rmsnorm",
            "norm_eps": float(doc.get("rms_norm_eps", 1e-6)), "activation": "swiglu",
            "bias": bool(doc.get("attention_bias", False)), "tie_embeddings": bool(doc.get("tie_word_embeddings", False))}


def hf_family(arch: str, c) -> str:
    """"gpt2" or "llama": the transformers class that computes what this zoo model computes, or HFUnsupported."""
    if arch == "gpt":
        return "gpt2"
    if arch != "decoder":
        raise HFUnsupported("--format hf", f"no transformers class for a {arch} model (decoder and gpt models export)")
    if c.positions == "learned" and c.norm == "layernorm" and c.activation in ("gelu", "gelu_tanh") \
            and (c.n_kv_head or c.n_head) == c.n_head:
        return "gpt2"
    if c.positions == "rope" and c.norm == "rmsnorm" and c.activation == "swiglu":
        return "llama"
    raise HFUnsupported("--format hf", f"this decoder ({c.positions} positions, {c.norm}, {c.activation}) mixes "
                                       "GPT-2 and Llama parts: no transformers class computes it")


def to_hf_config(arch: str, c) -> dict:
    """The config.json of the transformers model that computes zoo model (arch, config `c`)."""
    family = hf_family(arch, c)
    if arch == "gpt":  # nanoGPT: exact GELU, untied head, LayerNorm eps 1e-5
        return {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": c.vocab_size,
                "n_positions": c.block_size, "n_embd": c.n_embd, "n_layer": c.n_layer, "n_head": c.n_head,
                "n_inner": 4 * c.n_embd, "activation_function": "gelu", "layer_norm_epsilon": 1e-5,
                "tie_word_embeddings": False, "torch_dtype": "float32", **_NO_DROPOUT_GPT2}
    inner = c.intermediate_size or 4 * c.n_embd
    if family == "gpt2":
        return {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": c.vocab_size,
                "n_positions": c.block_size, "n_embd": c.n_embd, "n_layer": c.n_layer, "n_head": c.n_head,
                "n_inner": inner, "activation_function": "gelu_new" if c.activation == "gelu_tanh" else "gelu",
                "layer_norm_epsilon": c.norm_eps, "tie_word_embeddings": c.tie_embeddings, "torch_dtype": "float32",
                **_NO_DROPOUT_GPT2}
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": c.vocab_size,
            "hidden_size": c.n_embd, "intermediate_size": inner, "num_hidden_layers": c.n_layer,
            "num_attention_heads": c.n_head, "num_key_value_heads": c.n_kv_head or c.n_head,
            "head_dim": c.n_embd // c.n_head, "max_position_embeddings": c.block_size, "hidden_act": "silu",
            "rms_norm_eps": c.norm_eps, "rope_theta": c.rope_theta, "rope_scaling": None,
            "attention_bias": c.bias, "mlp_bias": c.bias, "tie_word_embeddings": c.tie_embeddings,
            "attention_dropout": 0.0, "torch_dtype": "float32"}


_NO_DROPOUT_GPT2 = {"resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}
