"""A model card beside downloaded weights: what the model is, where it came from, how well it did,
and a loader that needs only torch and safetensors.

For `model.safetensors` `verity job download` writes `model.card.md`, `model.config.json` (the same
facts, machine-readable) and `model_load.py` (the architecture's source from the model zoo, the config,
the vocabulary for text models, and `load()`)."""
from __future__ import annotations

import inspect
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from verity.engine import decoder, models, resnet

ARCH_SOURCES = {  # what each architecture's forward pass needs from verity.engine.models
    "mlp": ["MLP"],
    "cnn": ["CNN"],
    "resnet": ["norm_groups", "ConvNorm", "BasicBlock", "ResNet"],   # from verity.engine.resnet
    "gpt": ["CausalSelfAttention", "FeedForward", "Block", "GPT"],
    # from verity.engine.decoder (its RoPE table in software Decimal arithmetic, as training computed it)
    "decoder": ["kv_heads", "ffn_size", "_sin_cos", "_to_f32", "rope_table", "_rope_on", "rotate_half", "apply_rope",
                "repeat_kv", "RMSNorm", "_norm", "DecoderAttention", "DecoderMLP", "DecoderBlock", "Decoder"],
}
_DECODER_PREAMBLE = '''from decimal import ROUND_HALF_EVEN, Context, Decimal, localcontext
from functools import lru_cache

_PREC, _SPLIT = {prec}, {split}
_PI = Decimal("{pi}")


'''


@dataclass
class CardFacts:
    job_id: int
    manifest: object                  # verity.engine.manifest.Manifest
    manifest_cid: str
    model_hash: str                   # 0x… state hash committed on chain
    result_cid: str | None = None     # the final AGGREGATE's result bundle
    chain_id: int | None = None
    vocab: str | None = None          # text models: token id = position in this string
    metrics: list = field(default_factory=list)  # RoundMetric per finished round (0-based rounds)


def card_paths(weights: Path) -> dict[str, Path]:
    stem = weights.with_suffix("")
    return {"card": stem.with_name(stem.name + ".card.md"), "config": stem.with_name(stem.name + ".config.json"),
            "loader": stem.with_name(stem.name + "_load.py")}


def config_doc(f: CardFacts) -> dict:
    m = f.manifest
    last = f.metrics[-1] if f.metrics else None
    return {
        "job": f.job_id, "chain_id": f.chain_id, "manifest_cid": f.manifest_cid, "model_hash": f.model_hash,
        "result_cid": f.result_cid, "name": m.name, "model": m.model.model_dump(mode="json"),
        "data": m.data.model_dump(mode="json"), "vocab": f.vocab,
        "training": {"optimizer": m.optimizer.model_dump(mode="json"), "batch_size": m.batch_size,
                     "steps_per_round": m.steps_per_round, "rounds": m.rounds, "shards": len(m.shards),
                     "checkpoint_interval": m.checkpoint_interval, "aggregation": m.aggregation.model_dump(mode="json"),
                     "determinism": m.determinism},
        "metrics": [dict(asdict(x), round=x.round + 1) for x in f.metrics],
        "final": None if last is None else {"round": last.round + 1, "loss": last.loss, "accuracy": last.accuracy},
    }


def _example(m, vocab: str | None) -> str:
    c = m.model.config
    if m.model.arch == "mlp":
        return f"torch.zeros(1, {c.in_features})"
    if m.model.arch in ("cnn", "resnet"):
        return f"torch.zeros(1, {c.in_channels}, {c.height}, {c.width})"
    return "encode(VOCAB[:4])" if vocab else f"torch.zeros(1, {min(4, c.block_size)}, dtype=torch.long)"


def _forward_only(source: str) -> str:
    """A zoo class without its `init_weights` (the last method; loaded weights replace it)."""
    cut = source.find("\n    @torch.no_grad()\n    def init_weights")
    return source if cut < 0 else source[:cut + 1]


def loader_source(f: CardFacts, weights_name: str) -> str:
    m = f.manifest
    arch = m.model.arch
    source = {"decoder": decoder, "resnet": resnet}.get(arch, models)
    classes = "\n\n".join(_forward_only(inspect.getsource(getattr(source, name))) for name in ARCH_SOURCES[arch])
    if arch == "decoder":
        classes = _DECODER_PREAMBLE.format(prec=decoder._PREC, split=decoder._SPLIT, pi=decoder._PI) + classes
    text = "" if arch not in ("gpt", "decoder") else '''

def encode(text: str) -> torch.Tensor:
    """Characters -> a (1, len) batch of token ids."""
    return torch.tensor([[VOCAB.index(ch) for ch in text]])


def decode(ids) -> str:
    return "".join(VOCAB[int(i)] for i in ids)
'''
    return f'''"""Load {weights_name} (Verity job {f.job_id}, {arch}) in plain PyTorch: needs torch and safetensors only.
Run `python {card_paths(Path(weights_name))["loader"].name}` to load it and run one forward pass."""
from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import load_file

CONFIG = {m.model.config.model_dump(mode="json")!r}
VOCAB = {f.vocab!r}
_ACTIVATIONS = {{"relu": F.relu, "gelu": F.gelu, "tanh": torch.tanh}}


{classes}

def load(path: str | Path = Path(__file__).with_name({weights_name!r})) -> nn.Module:
    """The trained model in eval mode (the file's `model/…` tensors; `optim/…` is optimizer state)."""
    model = {ARCH_SOURCES[arch][-1]}(SimpleNamespace(**CONFIG))
    tensors = load_file(str(path))
    model.load_state_dict({{k[len("model/"):]: v for k, v in tensors.items() if k.startswith("model/")}})
    return model.eval()
{text}

if __name__ == "__main__":
    model = load()
    print(model)
    with torch.no_grad():
        print("output shape", tuple(model({_example(m, f.vocab)}).shape))
'''


def card_markdown(f: CardFacts, weights_name: str) -> str:
    doc, m = config_doc(f), f.manifest
    fin = doc["final"]
    final = "no held-out eval shard in this job" if m.eval_shard is None else "no finished round yet" if fin is None else \
        f"loss {fin['loss']:.4f}" + (f", accuracy {fin['accuracy']:.3f}" if fin["accuracy"] is not None else "") + \
        f" (round {fin['round']}, held-out eval shard)"
    loader = card_paths(Path(weights_name))["loader"].name
    lines = [
        f"# {m.name or f'Verity job {f.job_id}'} — {m.model.arch}", "",
        f"Trained on Verity (verifiable training) as job {f.job_id}" + (f" on chain {f.chain_id}" if f.chain_id else "") +
        ": every shard step replicated or checked, the result accepted on chain.", "",
        "| | |", "|---|---|",
        f"| weights | `{weights_name}` (verity-checkpoint v1: `model/…` tensors + `optim/…` optimizer state) |",
        f"| model hash | `{f.model_hash}` (state hash accepted on chain) |",
        f"| manifest CID | `{f.manifest_cid}` |",
        f"| result bundle CID | `{f.result_cid or '-'}` |",
        f"| final metrics | {final} |", "",
        "## Config", "", "```json", json.dumps({"model": doc["model"], "data": doc["data"], "training": doc["training"]}, indent=1),
        "```", "",
    ]
    if f.vocab is not None:
        lines += ["## Vocabulary", "", f"{len(f.vocab)} characters; token id = position:", "", "```",
                  json.dumps(f.vocab), "```", ""]
    if f.metrics:
        lines += ["## Held-out metrics per round", "", "| round | loss | accuracy |", "|---|---|---|"]
        lines += [f"| {x.round + 1} | {x.loss:.4f} | {'-' if x.accuracy is None else f'{x.accuracy:.3f}'} |" for x in f.metrics]
        lines.append("")
    lines += [
        "## Load it in plain PyTorch", "",
        f"`{loader}` holds the architecture (from Verity's model zoo), its config{', the vocabulary' if f.vocab else ''} "
        "and `load()`:", "",
        "```python", f"from {loader[:-3]} import load", "model = load()   # torch.nn.Module in eval mode", "```", "",
        "or by hand, with the classes from that file:", "", "```python",
        "from safetensors.torch import load_file",
        f"tensors = load_file({weights_name!r})",
        'state_dict = {k[len("model/"):]: v for k, v in tensors.items() if k.startswith("model/")}',
        f"model = {ARCH_SOURCES[m.model.arch][-1]}(SimpleNamespace(**CONFIG)); model.load_state_dict(state_dict)", "```", "",
    ]
    return "\n".join(lines)


def write_model_card(weights: Path, facts: CardFacts) -> list[Path]:
    """Write the card, config and loader beside `weights`; returns their paths."""
    paths = card_paths(weights)
    paths["card"].write_text(card_markdown(facts, weights.name))
    paths["config"].write_text(json.dumps(config_doc(facts), indent=1))
    paths["loader"].write_text(loader_source(facts, weights.name))
    return list(paths.values())
