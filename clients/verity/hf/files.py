"""Published weights in, weights the ecosystem loads out.

`read_init_from(path)` (the submit commands' `--init-from`): a Hugging Face model directory (`config.json` and
`model.safetensors`, GPT-2 or Llama), a `.safetensors` file with its `config.json` beside it, or a model this
project downloaded (`verity job download` writes `<stem>.config.json` beside `<stem>.safetensors`). It returns the
zoo model spec and the initial weights as a plain safetensors file in the zoo's names: the job uploads that file and
names its CID in `init.weights`, and its state hash is the job's initialStateHash on chain, like any checkpoint's.
Half-precision files are widened to float32. Nothing is unpickled; sizes and the element count are capped before
any tensor is built.

`write_hf_dir(out, manifest, tensors, tokenizer, vocab)` (`verity job download --format hf`): `config.json`,
`model.safetensors` and the tokenizer, which transformers' AutoModelForCausalLM and AutoTokenizer load.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from pydantic import TypeAdapter, ValidationError

from verity.engine.models import MAX_STATE_FILE_BYTES, ModelSpec
from verity.engine.modules import parameter_shapes
from verity.engine.tensorfile import atomic_write, read_safetensors, safetensors_bytes
from verity.hf.configs import HFUnsupported, from_hf_config, to_hf_config
from verity.hf.weights import from_hf, to_hf

MAX_CONFIG_BYTES = 1 << 20
MAX_WEIGHTS_BYTES = MAX_STATE_FILE_BYTES   # float32 at the zoo's parameter cap, plus a header
_SPEC = TypeAdapter(ModelSpec)


@dataclass(frozen=True)
class InitFrom:
    spec: dict          # {"arch": ..., "config": {...}} for the manifest
    weights: bytes      # the initial model: a safetensors file (zoo names, or this project's own checkpoint)
    source: str         # what it came from, for messages
    tokenizer: Path | None = None   # a tokenizer.json beside the weights, if any

    @property
    def name(self) -> str:
        """A short name for the job's title: the model directory, or the weights file."""
        path = Path(self.source)
        return path.parent.name if path.name == "model.safetensors" and path.parent.name else path.name


def _read_bytes(path: Path, cap: int, what: str) -> bytes:
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise HFUnsupported(str(path), f"cannot read the {what} ({exc.strerror})") from None
    if size > cap:
        raise HFUnsupported(str(path), f"{size:,} bytes exceed the {what} cap of {cap:,}")
    return path.read_bytes()


def _read_json(path: Path) -> dict:
    try:
        doc = json.loads(_read_bytes(path, MAX_CONFIG_BYTES, "config"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise HFUnsupported(str(path), f"not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise HFUnsupported(str(path), "a config holds a JSON object")
    return doc


def _spec(doc: dict, source: str):
    try:
        return _SPEC.validate_python(doc)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise HFUnsupported(source, f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}") from None


def _locate(path: Path) -> tuple[Path, Path]:
    """(weights file, its config) for a directory or a weights file."""
    if path.is_dir():
        if (path / "model.safetensors.index.json").exists() and not (path / "model.safetensors").exists():
            raise HFUnsupported(str(path), "sharded weights (model.safetensors.index.json) are not supported yet: "
                                           "save the model as one model.safetensors")
        weights = path / "model.safetensors"
        if not weights.exists():
            raise HFUnsupported(str(path), "holds no model.safetensors (only safetensors weights are read)")
        return weights, path / "config.json"
    if path.suffix != ".safetensors":
        raise HFUnsupported(str(path), "give a model directory or a .safetensors file (nothing else is read: "
                                       "pickled .bin/.pt files are refused)")
    own = path.with_name(path.stem + ".config.json")   # `verity job download`'s model card config
    return path, own if own.exists() else path.with_name("config.json")


def read_init_from(path: str | Path) -> InitFrom:
    """The model spec and initial weights of `--init-from PATH` (see the module doc)."""
    path = Path(path).expanduser()
    if not path.exists():
        raise HFUnsupported(str(path), "no such file or directory")
    weights_path, config_path = _locate(path)
    if not config_path.exists():
        raise HFUnsupported(str(weights_path), f"no {config_path.name} beside it (the config says what the tensors are)")
    doc = _read_json(config_path)
    data = _read_bytes(weights_path, MAX_WEIGHTS_BYTES, "weights")
    tokenizer = weights_path.with_name("tokenizer.json")
    tokenizer = tokenizer if tokenizer.exists() else None
    if "model" in doc and "manifest_cid" in doc:   # this project's download: the zoo spec and a zoo checkpoint
        spec = _spec(doc["model"], str(config_path))
        _check_own(data, spec, str(weights_path))
        own_tok = weights_path.with_name(weights_path.stem + ".tokenizer.json")
        return InitFrom(spec.model_dump(mode="json"), data, str(weights_path), own_tok if own_tok.exists() else tokenizer)
    spec_doc = from_hf_config(doc, str(config_path))
    spec = _spec(spec_doc, str(config_path))
    shapes = parameter_shapes(spec)
    elements = sum(int(torch.Size(s).numel()) for s in shapes.values())
    tensors, _ = read_safetensors(data, str(weights_path), HFUnsupported, max_bytes=MAX_WEIGHTS_BYTES,
                                  max_elements=max(elements, 1) * 2 + (1 << 20), dtypes={"F32", "F16", "BF16"})
    ours = from_hf(spec.arch, spec.config, tensors, shapes, str(weights_path))
    return InitFrom(spec.model_dump(mode="json"), safetensors_bytes(ours, {"source": "huggingface"}),
                    str(weights_path), tokenizer)


def _check_own(data: bytes, spec, source: str) -> None:
    """A downloaded model's names and shapes against its own config (its hash is checked when the job is built)."""
    shapes = parameter_shapes(spec)
    elements = sum(int(torch.Size(s).numel()) for s in shapes.values())
    tensors, _ = read_safetensors(data, source, HFUnsupported, max_bytes=MAX_WEIGHTS_BYTES,
                                  max_elements=elements * 4 + (1 << 20), dtypes={"F32", "I64"})
    for name, shape in shapes.items():
        t = tensors.get(f"model/{name}", tensors.get(name))
        if t is None:
            raise HFUnsupported(source, f"tensor {name!r} is missing")
        if tuple(t.shape) != tuple(shape):
            raise HFUnsupported(source, f"tensor {name!r} has shape {list(t.shape)}; the config needs {list(shape)}")


# ------------------------------------------------------------------ out: --format hf
def char_tokenizer_json(vocab: str) -> bytes:
    """A `tokenizers` tokenizer for a character vocabulary (token id = position in `vocab`): every character is
    one token, nothing is normalised."""
    from tokenizers import Regex, Tokenizer, decoders
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Split

    tok = Tokenizer(WordLevel({ch: i for i, ch in enumerate(vocab)}, unk_token=vocab[0]))
    tok.pre_tokenizer = Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    return tok.to_str().encode()


def write_hf_dir(out: Path, manifest, model: dict[str, torch.Tensor], tokenizer: bytes | None,
                 vocab: str | None) -> list[Path]:
    """Write config.json, model.safetensors and the tokenizer into `out` (a directory); returns the paths."""
    arch, c = manifest.model.arch, manifest.model.config
    config = to_hf_config(arch, c)   # refuses a model no transformers class computes, before anything is written
    tensors = to_hf(arch, c, model)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"config": out / "config.json", "weights": out / "model.safetensors"}
    atomic_write(paths["config"], lambda f: f.write(json.dumps(config, indent=1, sort_keys=True).encode()))
    atomic_write(paths["weights"], lambda f: f.write(safetensors_bytes(tensors, {"format": "pt"})))
    if tokenizer is None and vocab:
        tokenizer = char_tokenizer_json(vocab)
    if tokenizer is not None:
        paths["tokenizer"] = out / "tokenizer.json"
        paths["tokenizer_config"] = out / "tokenizer_config.json"
        atomic_write(paths["tokenizer"], lambda f: f.write(tokenizer))
        tok_config = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": c.block_size,
                      "clean_up_tokenization_spaces": False}
        atomic_write(paths["tokenizer_config"], lambda f: f.write(json.dumps(tok_config, indent=1).encode()))
    return list(paths.values())
