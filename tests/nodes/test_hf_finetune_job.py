"""Issue 24, your model and your data, through real nodes: a small Llama-shaped decoder saved by transformers (a
local safetensors start, no hub) is fine-tuned on a JSONL corpus with `verity job submit --init-from`, trained,
verified and paid; `verity job download --format hf` gives a directory transformers loads, whose logits equal
Verity's own forward of the verified final model; `verity verify` names the job either download is the final
model of, and refuses a file one bit off."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from verity.job.view import JobReader

from node_builders import conserved

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.integration

NOTES = ["the solver trains the shard and commits the trace.", "a verifier replays one step when the hashes differ.",
         "the referee recomputes the disputed step and the loser pays.", "shards and checkpoints live on ipfs.",
         "the submitter posts a job, the escrow pays the accepted replicas."]


def _tiny_llama(root, vocab: str):
    from verity.hf.files import char_tokenizer_json

    cfg = transformers.LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                   tie_word_embeddings=False)
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(cfg).save_pretrained(root, safe_serialization=True)
    (root / "tokenizer.json").write_bytes(char_tokenizer_json(vocab))


def _run(net, *args, timeout=300):
    proc = subprocess.run([sys.executable, "-m", "verity", *args], env=net.env, cwd=net.root, text=True,
                          timeout=timeout, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.returncode == 0, proc.stdout[-3000:]
    return proc.stdout


def test_llama_fine_tuned_from_local_safetensors_on_jsonl_loads_in_transformers_succeeds(net):
    for i in (1, 2, 3):
        net.start_node(f"solver-{i}", i)
    net.wait_registered(3)
    corpus = net.root / "notes.jsonl"
    corpus.write_text("".join(json.dumps({"id": i, "text": NOTES[i % len(NOTES)]}) + "\n" for i in range(60)))
    vocab = "".join(sorted(set("\n".join(NOTES)))) + "!?"      # the start's vocabulary covers the corpus, and more
    start = net.root / "tiny-llama"
    _tiny_llama(start, vocab)
    out = _run(net, "job", "submit", "--init-from", str(start), "--dataset", str(corpus), "--block", "16",
               "--shards", "2", "--rounds", "2", "--steps", "20", "-k", "10", "--lr", "0.003", "--account", "9",
               "--yes")
    job_id = int(out.split("posted job ", 1)[1].split(":")[0])
    net.wait_job(job_id, timeout=600)
    c = net.client()
    reader = JobReader(c, net.storage(), job_id)
    m = reader.manifest
    assert m.model.arch == "decoder" and m.model.config.positions == "rope" and m.init.weights is not None
    assert m.data.vocab_size == len(vocab) and m.data.tokenizer_cid is not None  # the start's own tokenizer
    first, last = reader.metric(0), reader.metric(1)
    assert last.loss < first.loss, (first, last)
    assert not [e for e in net.events() if e.name in ("ReplicaDeclined", "DisputeOpened")]

    hf_dir = net.root / "tuned"
    _run(net, "job", "download", str(job_id), "--format", "hf", "--out", str(hf_dir))
    hf = transformers.AutoModelForCausalLM.from_pretrained(hf_dir).eval()
    tok = transformers.AutoTokenizer.from_pretrained(hf_dir)
    ids = torch.tensor([tok(NOTES[2][:16])["input_ids"]])
    assert ids.tolist()[0] == [vocab.index(ch) for ch in NOTES[2][:16]]

    from verity.engine.checkpoint import load_checkpoint
    from verity.engine.models import build_model

    final = load_checkpoint(reader.round_model(1), m, source="final")
    ours = build_model(m.model, "cpu", portable=True)
    ours.load_state_dict(final.model_tensors())
    with torch.no_grad():
        torch.testing.assert_close(hf(ids).logits, ours.eval()(ids), rtol=1e-4, atol=1e-5)
    # issue 26 item 3: `verity verify` names the job a downloaded model (either format) is the final model of
    _run(net, "job", "download", str(job_id), "-o", str(net.root / "tuned.safetensors"))
    for model in (net.root / "tuned.safetensors", hf_dir):
        out = _run(net, "verify", str(model))
        assert f"is the final model of job {job_id}" in out and "trace root 0x" in out, out
        assert "disputes: none on any of its tasks" in out, out
    forged = net.root / "forged.safetensors"
    data = bytearray((net.root / "tuned.safetensors").read_bytes())
    data[-1] ^= 1   # one bit of the last tensor
    forged.write_bytes(bytes(data))
    proc = subprocess.run([sys.executable, "-m", "verity", "verify", str(forged)], env=net.env, cwd=net.root, text=True,
                          timeout=300, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.returncode == 1 and proc.stdout.startswith("not verified: "), proc.stdout
    assert "is not the accepted final model of the 1 completed job(s)" in proc.stdout, proc.stdout
    total, minted, burned = conserved(c)
    assert total == minted - burned
