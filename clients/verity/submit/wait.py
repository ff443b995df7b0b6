"""After a job is posted: its record for `--out`, and `--wait` (follow it to a verified final model)."""
from __future__ import annotations

import json
from pathlib import Path

from verity.errors import VerityError
from verity.submit.prepare import PreparedJob


class JobNotDone(VerityError):
    def __init__(self, job_id: int, status: str, timeout: float):
        why = f"still active after {timeout:.0f} s (--timeout)" if status == "active" else f"ended {status}"
        super().__init__(f"job {job_id} {why}")


def job_record(job_id: int, prepared: PreparedJob, submitter: str) -> dict:
    return {"job_id": job_id, "manifest_cid": prepared.manifest_cid, "escrow": prepared.escrow(),
            "submitter": submitter, "initial_hash": "0x" + prepared.initial_hash.hex()}


def write_record(out: Path | None, record: dict) -> None:
    if out is not None:
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(record, indent=1))


def follow(chain, storage, job_id: int, timeout: float, state_dir: Path, interval: float = 1.0) -> Path:
    """Live task table until the job completes; then the final model, verified against the
    on-chain hash, saved under `<state dir>/jobs/<id>/`. Otherwise raises JobNotDone below
    the last table, which shows `jobview.advice` (what the job waits for, how to cancel it)."""
    from verity.job.table import follow_live
    from verity.job.view import JobReader

    reader = JobReader(chain, storage, job_id)
    rep = follow_live(reader, timeout, interval)
    if rep.status != "completed":
        raise JobNotDone(job_id, rep.status, timeout)
    model = reader.round_model(rep.rounds - 1)
    path = Path(state_dir) / "jobs" / str(job_id) / "model.safetensors"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(model)
    return path


def still_running(job_id: int) -> str:
    """What the submit commands say when Ctrl-C stops `--wait`: the job is on-chain and goes on without us."""
    return (f"stopped following job {job_id}; it keeps running on the network: `verity job watch {job_id}` follows "
            f"it, `verity job download {job_id}` fetches the model once it completes")
