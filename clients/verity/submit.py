"""Prepare a training job: shards and manifest to IPFS, the postJob parameters.

Used by `ape run submit` (scripts/submit.py, signing with an ape account), by
the demo and by the tests (signing with web3). The chain side is a single
`postJob` after an `approve` of the escrow.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from eth_utils import keccak
from web3.logs import DISCARD

from verity.cid import cid_to_digest
from verity.engine import datasets
from verity.engine.checkpoint import initial_state
from verity.engine.data import MAX_SHARD_ELEMENTS, ShardMeta
from verity.engine.tensorfile import read_safetensors
from verity.engine.manifest import load_manifest
from verity.errors import ShardInvalid, VerityError
from verity.storage import Storage

PROFILE_BITS = {"cpu-f32-strict": 1, "cuda-f32-strict": 2}
TOKEN = 10**18


class BadJobSpec(VerityError, ValueError):
    def __init__(self, field_: str, why: str):
        super().__init__(f"job spec {field_}: {why}")


@dataclass
class JobSpec:
    model: str = "mlp"                 # mlp | cnn | gpt
    model_config: dict | None = None   # default: sized to the dataset
    dataset: str = "digits"            # 'digits', a .npz/.safetensors (x, y) pair, or a .txt corpus
    shards: int = 4
    rounds: int = 3
    steps: int = 40                    # steps per round
    k: int = 10                        # checkpoint interval
    replication: int = 2
    payment: float = 1.0               # VRT per accepted replica of each task
    stake: float = 10.0                # VRT locked by each replica
    aggregation: str = "mean"
    trim: float = 0.0
    batch_size: int = 32
    optimizer: str = "adam"
    lr: float = 0.01
    seed: int = 0
    eval_fraction: float = 0.15
    block: int = 32                    # text: characters per sample
    challenge_window: int = 60         # seconds (optimistic mode)
    execution_window: int = 0          # 0 = the contract's default
    reveal_window: int = 0
    name: str = ""


@dataclass
class PreparedJob:
    manifest_doc: dict
    manifest_bytes: bytes
    manifest_cid: str
    initial_hash: bytes
    eval_cid: str | None
    spec: JobSpec
    shard_cids: list[str] = field(default_factory=list)

    def post_params(self) -> tuple:
        """PostJobParams in field order (see contracts/types/VerityTypes.sol)."""
        s = self.spec
        return (cid_to_digest(self.manifest_cid), keccak(self.manifest_bytes), self.initial_hash,
                s.shards, s.rounds, s.steps, s.k, int(s.payment * TOKEN), s.replication, int(s.stake * TOKEN),
                0, 1024, PROFILE_BITS["cpu-f32-strict"], s.execution_window, s.reveal_window,
                s.challenge_window if s.replication == 1 else 0)

    def escrow(self) -> int:
        s = self.spec
        return int(s.payment * TOKEN) * s.replication * (s.shards + 1) * s.rounds


def _load_dataset(spec: JobSpec):
    if spec.dataset == "digits":
        x, y = datasets.digits(image=spec.model == "cnn")
        return x, y, "classification", None
    path = Path(spec.dataset)
    if not path.is_file():
        raise BadJobSpec("dataset", f"{spec.dataset!r} is neither 'digits' nor an existing file")
    if path.suffix == ".txt":
        x, y, vocab = datasets.char_corpus(path.read_text(encoding="utf-8"), spec.block, spec.block // 2 or 1)
        return x, y, "lm", vocab
    x, y = datasets.array_pair(path)
    return x, y, "classification", None


def _default_model(spec: JobSpec, data: dict) -> dict:
    if spec.model_config is not None:
        return {"arch": spec.model, "config": spec.model_config}
    if spec.model == "mlp":
        return {"arch": "mlp", "config": {"in_features": math.prod(data["x_shape"]), "hidden": [64], "out_features": data["num_classes"]}}
    if spec.model == "cnn":
        c, h, w = data["x_shape"]
        return {"arch": "cnn", "config": {"in_channels": c, "height": h, "width": w, "channels": [8, 16], "num_classes": data["num_classes"]}}
    return {"arch": "gpt", "config": {"vocab_size": data["vocab_size"], "block_size": data["x_shape"][0],
                                      "n_layer": 2, "n_head": 2, "n_embd": 64}}


def _shard_meta(name: str, data: bytes) -> ShardMeta:
    """The metadata `make_shards` embedded (it validated every shard already)."""
    header = read_safetensors(data, name, ShardInvalid, max_bytes=len(data), max_elements=MAX_SHARD_ELEMENTS * 4)[1]
    return ShardMeta.model_validate_json(header["verity"])


def prepare_job(spec: JobSpec, storage: Storage) -> PreparedJob:
    """Shard the data, upload shards and manifest; nothing touches the chain."""
    if spec.replication not in (1, 2):
        raise BadJobSpec("replication", f"{spec.replication} (v1 supports 1 = optimistic, 2 = commit-reveal)")
    if spec.model not in ("mlp", "cnn", "gpt"):
        raise BadJobSpec("model", f"{spec.model!r} is not in the zoo (mlp, cnn, gpt)")
    x, y, task, vocab = _load_dataset(spec)
    built = datasets.make_shards(x, y, task=task, n_shards=spec.shards, eval_fraction=spec.eval_fraction,
                                 seed=spec.seed, vocab=vocab, source=Path(spec.dataset).name)
    metas = {name: _shard_meta(name, data) for name, data in built.items()}
    data_section = metas["shard-000"].spec().model_dump(mode="json", exclude_none=True)
    shard_cids = [storage.put_bytes(built[f"shard-{i:03d}"]) for i in range(spec.shards)]
    eval_cid = storage.put_bytes(built["eval"]) if "eval" in built else None
    doc = {
        "schema_version": 1, "name": spec.name or f"{spec.model} on {Path(spec.dataset).name}",
        "model": _default_model(spec, data_section), "init": {"seed": spec.seed}, "data": data_section,
        "shards": [{"cid": c, "samples": metas[f"shard-{i:03d}"].samples} for i, c in enumerate(shard_cids)],
        "optimizer": {"name": spec.optimizer, "lr": spec.lr}, "batch_size": spec.batch_size,
        "steps_per_round": spec.steps, "rounds": spec.rounds, "checkpoint_interval": spec.k,
        "aggregation": {"rule": spec.aggregation, "trim": spec.trim},
        "verification": {"replication": spec.replication, "challenge_window": max(60, spec.challenge_window)},
    }
    if eval_cid:
        doc["eval_shard"] = {"cid": eval_cid, "samples": metas["eval"].samples}
    raw = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    manifest = load_manifest(raw)  # the same validation every node applies
    initial = initial_state(manifest)
    cid = storage.put_bytes(raw)
    return PreparedJob(doc, raw, cid, initial.hash, eval_cid, spec, shard_cids)


def post_job_web3(chain, prepared: PreparedJob) -> int:
    """Approve the escrow and post the job with a web3 ChainClient; returns the job id."""
    c = chain
    c.transact(c.token.functions.approve(c.jobs.address, prepared.escrow()))
    receipt = c.transact(c.jobs.functions.postJob(prepared.post_params()))
    for ev in c.jobs.events.JobPosted().process_receipt(receipt, errors=DISCARD):  # other contracts' logs
        return int(ev["args"]["jobId"])
    raise VerityError("postJob succeeded but emitted no JobPosted event")
