"""Issue 24 items 2 and 3: start from published weights (Hugging Face GPT-2 and Llama files, built here from tiny
random configs: no hub downloads) and give back weights transformers loads, with logits equal to Verity's own
forward (native and portable-f32) within float32 tolerance."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch
from pydantic import TypeAdapter

transformers = pytest.importorskip("transformers")

from verity.engine.models import ModelSpec, build_model, init_model  # noqa: E402
from verity.engine.tensorfile import read_safetensors  # noqa: E402
from verity.errors import StateInvalid  # noqa: E402
from verity.hf.configs import HFUnsupported, hf_family, to_hf_config  # noqa: E402
from verity.hf.files import char_tokenizer_json, read_init_from, write_hf_dir  # noqa: E402

VOCAB, BLOCK = 61, 24
SPEC = TypeAdapter(ModelSpec)


def _llama(tmp_path, **overrides):
    cfg = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=BLOCK,
                                   rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False, **overrides)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).eval()
    model.save_pretrained(tmp_path, safe_serialization=True)
    return model


def _gpt2(tmp_path, **overrides):
    cfg = transformers.GPT2Config(vocab_size=VOCAB, n_positions=BLOCK, n_embd=32, n_layer=2, n_head=4,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, **overrides)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(cfg).eval()
    model.save_pretrained(tmp_path, safe_serialization=True)
    return model


def _ids(n=3, t=BLOCK):
    return torch.randint(VOCAB, (n, t), generator=torch.Generator().manual_seed(5))


def _ours(start, portable=False):
    spec = SPEC.validate_python(start.spec)
    model = build_model(spec, "cpu", portable)
    tensors, _ = read_safetensors(start.weights, "init", StateInvalid, max_bytes=1 << 30, max_elements=1 << 28)
    model.load_state_dict(tensors, strict=True)
    return model.eval()


@pytest.mark.parametrize("family", ["llama", "gpt2"])
@pytest.mark.parametrize("portable", [False, True], ids=["native", "portable"])
def test_init_from_hf_gives_transformers_logits(tmp_path, family, portable):
    hf = (_llama if family == "llama" else _gpt2)(tmp_path)
    start = read_init_from(tmp_path)
    assert start.spec["arch"] == "decoder"
    ids = _ids()
    with torch.no_grad():
        want = hf(ids).logits
        got = _ours(start, portable)(ids)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_init_from_reads_half_precision_weights(tmp_path):
    hf = _llama(tmp_path)
    hf.to(torch.bfloat16).save_pretrained(tmp_path, safe_serialization=True)
    start = read_init_from(tmp_path / "model.safetensors")   # a file with its config.json beside it
    tensors, _ = read_safetensors(start.weights, "init", StateInvalid, max_bytes=1 << 30, max_elements=1 << 28)
    assert {t.dtype for t in tensors.values()} == {torch.float32}


def _shapes(spec_doc):
    from verity.engine.modules import parameter_shapes
    return parameter_shapes(SPEC.validate_python(spec_doc))


@pytest.mark.parametrize("shape", ["llama", "gpt2", "nanogpt"])
def test_download_format_hf_loads_in_transformers_with_equal_logits(tmp_path, shape):
    config = {"vocab_size": VOCAB, "block_size": BLOCK, "n_layer": 2, "n_head": 4, "n_embd": 32}
    if shape == "llama":
        spec = {"arch": "decoder", "config": {**config, "n_kv_head": 2, "intermediate_size": 40}}
    elif shape == "gpt2":
        spec = {"arch": "decoder", "config": {**config, "positions": "learned", "norm": "layernorm",
                                              "activation": "gelu_tanh", "bias": True, "tie_embeddings": True}}
    else:
        spec = {"arch": "gpt", "config": config}
    model = init_model(SPEC.validate_python(spec), seed=3).eval()

    manifest = SimpleNamespace(model=SPEC.validate_python(spec))  # the model section is all write_hf_dir reads
    paths = write_hf_dir(tmp_path, manifest, model.state_dict(), None, None)
    assert [p.name for p in paths] == ["config.json", "model.safetensors"]
    hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    ids = _ids()
    with torch.no_grad():
        torch.testing.assert_close(hf(ids).logits, model(ids), rtol=1e-4, atol=1e-5)
    # and back: the exported directory is an --init-from start; a decoder comes back with the same tensors, nanoGPT
    # as the decoder that computes it (learned positions, LayerNorm, exact GELU, untied head)
    back = _ours(read_init_from(tmp_path))
    if shape == "nanogpt":
        with torch.no_grad():
            torch.testing.assert_close(back(ids), model(ids), rtol=1e-4, atol=1e-5)
        return
    assert back.state_dict().keys() == model.state_dict().keys()
    for name, t in model.state_dict().items():
        assert torch.equal(back.state_dict()[name], t), name


def test_char_tokenizer_loads_in_transformers(tmp_path):
    vocab = "\n ,.abcdefghijklmnopqrstuvwxyz"
    (tmp_path / "tokenizer.json").write_bytes(char_tokenizer_json(vocab))
    tok = transformers.PreTrainedTokenizerFast(tokenizer_file=str(tmp_path / "tokenizer.json"))
    text = "a cab,\nbad."
    assert tok(text)["input_ids"] == [vocab.index(ch) for ch in text]
    assert tok.decode(tok(text)["input_ids"]) == text


def test_mismatched_file_names_the_first_mismatch(tmp_path):
    _llama(tmp_path)
    doc = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**doc, "num_hidden_layers": 3}))
    with pytest.raises(HFUnsupported, match=r"'model.layers.2.input_layernorm.weight' is missing"):
        read_init_from(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({**doc, "intermediate_size": 50}))
    with pytest.raises(HFUnsupported, match=r"'model.layers.0.mlp.gate_proj.weight' has shape \[48, 32\]; "
                                            r"the config needs \[50, 32\]"):
        read_init_from(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({**doc, "rope_scaling": {"type": "linear", "factor": 2.0}}))
    with pytest.raises(HFUnsupported, match="rope_scaling"):
        read_init_from(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({**doc, "model_type": "mistral"}))
    with pytest.raises(HFUnsupported, match="model_type 'mistral'"):
        read_init_from(tmp_path)


def test_pickled_and_missing_files_are_refused(tmp_path):
    (tmp_path / "pytorch_model.bin").write_bytes(b"\x80\x04junk")
    with pytest.raises(HFUnsupported, match="only safetensors"):
        read_init_from(tmp_path)
    with pytest.raises(HFUnsupported, match="pickled"):
        read_init_from(tmp_path / "pytorch_model.bin")
    (tmp_path / "model.safetensors").write_bytes(b"\x80\x04junk")
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2", "vocab_size": 5, "n_positions": 4,
                                                      "n_embd": 4, "n_layer": 1, "n_head": 1}))
    with pytest.raises(HFUnsupported, match="pickle data refused"):
        read_init_from(tmp_path)
    with pytest.raises(HFUnsupported, match="no such file"):
        read_init_from(tmp_path / "nothing")


def test_models_no_transformers_class_computes_are_refused():
    mixed = SPEC.validate_python({"arch": "decoder", "config": {"vocab_size": 5, "block_size": 4, "n_layer": 1,
                                                                "n_head": 1, "n_embd": 4, "positions": "learned"}})
    with pytest.raises(HFUnsupported, match="mixes GPT-2 and Llama parts"):
        to_hf_config(mixed.arch, mixed.config)
    mlp = SPEC.validate_python({"arch": "mlp", "config": {"in_features": 4, "out_features": 2}})
    with pytest.raises(HFUnsupported, match="no transformers class for a mlp"):
        hf_family(mlp.arch, mlp.config)
