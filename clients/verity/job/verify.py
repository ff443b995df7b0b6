"""`verity verify MODEL`: is this file the accepted final model of a completed job on this chain?

A model `verity job download` wrote is the last AGGREGATE's checkpoint: its state hash (engine/state.py, over every
tensor, the step and the task) is recomputed from the bytes, never read from the file's metadata, and compared with
each completed job's on-chain `modelHash`. A `--format hf` directory is turned back into the zoo's tensors
(verity/hf/weights.py) for each completed job whose model exports to the same config.json, and hashed the same way
(a final state holds the model alone unless the job runs an outer optimizer, whose momentum an export leaves out).
The answer names the job, its manifest, the final task's trace root, the replicas that agreed on it and the disputes
that settled its tasks, or says in one line why the file is no job's model.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from verity.chain.protocol import ReplicaStatus, TaskStatus
from verity.chain.views import read
from verity.engine.models import MAX_STATE_FILE_BYTES
from verity.engine.state import TaskRef, TrainState
from verity.engine.tensorfile import read_safetensors
from verity.errors import StateInvalid, VerityError

MAX_JOBS_SCANNED = 10_000       # newest first: a chain with more completed jobs needs --job
MAX_MODEL_BYTES = MAX_STATE_FILE_BYTES


class NotVerified(VerityError):
    """The file is not the accepted final model of any completed job this command looked at."""


@dataclass
class Verdict:
    job_id: int
    name: str
    manifest_cid: str
    model_hash: str
    model_cid: str
    final_task: int
    root: str
    replicas: list[str]                                  # nodes whose accepted result is the final state
    disputes: dict[int, str] = field(default_factory=dict)   # task id -> "step 14, challenger won"

    def lines(self, path: str) -> list[str]:
        out = [f"verified: {path} is the final model of job {self.job_id} ({self.name})",
               f"  model hash {self.model_hash}, result {self.model_cid}, manifest {self.manifest_cid}",
               f"  final AGGREGATE task {self.final_task}: trace root {self.root}, accepted from "
               f"{', '.join(self.replicas) or 'its candidate'}"]
        if self.disputes:
            out += [f"  disputes: task {t}: {d}" for t, d in sorted(self.disputes.items())]
        else:
            out.append("  disputes: none on any of its tasks")
        return out


def _file_hash(data: bytes, source: str) -> bytes:
    """The state hash of a Verity checkpoint, recomputed from its tensors, step and task."""
    tensors, md = read_safetensors(data, source, StateInvalid, max_bytes=MAX_MODEL_BYTES, max_elements=MAX_MODEL_BYTES // 4,
                                   dtypes={"F32", "I64"})
    try:
        step = int(md["step"])
        task = None if step == 0 else TaskRef(int(md["job"]), int(md["round"]), int(md["index"]))
    except (KeyError, ValueError):
        raise StateInvalid(source, "not a Verity checkpoint (no step/job/round/index metadata): verify the file "
                                   "`verity job download` wrote, or a --format hf directory") from None
    return TrainState(tensors, step, task).hash


def _hf_hash(directory: Path, manifest) -> bytes | None:
    """The final-state hash a --format hf directory stands for under `manifest`, or None when its model is not the
    one that job exports (another config)."""
    from verity.hf.configs import HFUnsupported, to_hf_config
    from verity.hf.weights import from_hf
    from verity.engine.modules import parameter_shapes

    try:
        config = json.loads((directory / "config.json").read_text())
        if {k: config.get(k) for k in to_hf_config(manifest.model.arch, manifest.model.config)} != \
                to_hf_config(manifest.model.arch, manifest.model.config):
            return None
        data = (directory / "model.safetensors").read_bytes()
        tensors, _ = read_safetensors(data, str(directory), HFUnsupported, max_bytes=MAX_MODEL_BYTES,
                                      max_elements=MAX_MODEL_BYTES // 4, dtypes={"F32"})
        ours = from_hf(manifest.model.arch, manifest.model.config, tensors, parameter_shapes(manifest.model),
                       str(directory))
    except (OSError, ValueError, HFUnsupported):
        return None
    return TrainState({f"model/{k}": v for k, v in ours.items()}).hash


def verify_model(path: Path, chain, storage, job_id: int | None = None) -> Verdict:
    """The job whose accepted final model `path` is (see the module doc), or NotVerified saying why not."""
    from verity.cid import digest_to_cid
    from verity.job.view import JobReader

    path = Path(path)
    hf = path.is_dir()
    if hf and not (path / "config.json").exists():
        raise NotVerified(f"{path}: a directory without config.json is neither a download nor a --format hf export")
    want = None
    if not hf:
        if path.stat().st_size > MAX_MODEL_BYTES:
            raise NotVerified(f"{path}: {path.stat().st_size:,} bytes, more than any job's model")
        want = _file_hash(path.read_bytes(), str(path))
    count = int(chain.call(chain.jobs.functions.jobCount()))
    ids = [job_id] if job_id is not None else list(range(count, max(0, count - MAX_JOBS_SCANNED), -1))
    completed = 0
    for jid in ids:
        if not 1 <= jid <= count:
            raise NotVerified(f"job {jid} does not exist on this chain (jobs 1..{count})")
        job = read(chain, chain.jobs, "getJob", jid)
        model_hash = bytes(job.modelHash)
        if not int.from_bytes(model_hash, "big"):
            continue
        completed += 1
        reader = JobReader(chain, storage, jid)
        got = _hf_hash(path, reader.manifest) if hf else want
        if got != model_hash:
            continue
        return _verdict(reader, job, digest_to_cid)
    where = f"job {job_id}" if job_id is not None else f"the {completed} completed job(s) of the newest {len(ids)}"
    what = f"state hash 0x{want.hex()}" if want is not None else "its weights"
    raise NotVerified(f"{path}: {what} is not the accepted final model of {where} on chain {chain.w3.eth.chain_id}")


def _verdict(reader, job, digest_to_cid) -> Verdict:
    c = reader.chain
    rounds, shards = int(job.rounds), len(reader.manifest.shards)
    final_task = reader._task_id(rounds - 1, shards)
    task = read(c, c.jobs, "getTask", final_task)
    replicas = read(c, c.jobs, "getReplicas", final_task)
    agreed = [r for r in replicas if ReplicaStatus(r.status) == ReplicaStatus.ACCEPTED
              and bytes(r.finalHash) == bytes(job.modelHash)]
    if TaskStatus(task.status) != TaskStatus.ACCEPTED:   # a completed job's last AGGREGATE always is
        raise NotVerified(f"job {reader.job_id}'s final task {final_task} is {TaskStatus(task.status).name.lower()}")
    reader.tasks(job)   # feeds the job's events into its history: its disputes
    return Verdict(reader.job_id, reader.manifest.name, digest_to_cid(job.manifestCid), "0x" + bytes(job.modelHash).hex(),
                   digest_to_cid(job.modelCid), final_task, "0x" + bytes(agreed[0].root).hex() if agreed else "?",
                   [r.node for r in agreed], dict(reader.history.disputes))
