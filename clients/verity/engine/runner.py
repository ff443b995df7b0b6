"""Run a TRAIN task: T steps, a checkpoint every k, the trace h_0…h_n and its root.

    result = run_task(manifest, input_state, shard, TaskRef(job, round, index), workdir,
                      on_checkpoint=upload)

Checkpoints are snapshotted on the training thread (one memcpy), then hashed
and written (tmp + fsync + rename) on a writer thread and handed to
`on_checkpoint` on a callback thread, so hashing, disk and uploads stay off
the critical path. After a
crash (even `kill -9`) the same call resumes from the last complete
checkpoint in `workdir` and ends with the same trace. `replay_segment` and
`recompute_step` serve disputes: the per-step hashes g_0…g_k of one segment,
and one step from an agreed state.

`run_task(..., workers=W)` spreads each step's micro-batches (manifest
`micro_batches`) over W processes or GPUs of this node (engine/parallel.py):
this process is rank 0 and writes every checkpoint; the trace is the same as
with W = 1, bit for bit. A resumed run starts fresh helpers from the last
complete checkpoint.
"""
from __future__ import annotations

import datetime
import hashlib
import json
import queue
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from verity.errors import HashMismatch, StateInvalid, VerityError, WorkdirConflict
from verity.engine import merkle
from verity.engine.checkpoint import load_checkpoint, write_checkpoint
from verity.engine.data import Shard
from verity.engine.determinism import apply_profile
from verity.engine.manifest import Manifest, manifest_bytes
from verity.engine.parallel import DEFAULT_TIMEOUT, DataParallel, check_workers
from verity.engine.state import TaskRef, TrainState
from verity.engine.tensorfile import atomic_write
from verity.engine.trainer import Trainer


@dataclass(frozen=True)
class Checkpoint:
    """Handed to `on_checkpoint` once the file is durably on disk."""
    task: TaskRef
    index: int        # trace index j
    step: int         # j * k
    hash: bytes       # h_j
    path: Path
    resumed: bool     # found on disk from an earlier (interrupted) run


@dataclass
class TaskResult:
    task: TaskRef
    k: int
    steps: int
    trace: list[bytes]
    root: bytes
    checkpoints: list[Path]
    final: TrainState | None = field(default=None, repr=False)
    # seconds: train (the step loop), snapshot + blocked (engine work on the
    # training thread), writer (hash + write + fsync + callback, background),
    # workers_start (workers > 1: starting the helper processes)
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def final_hash(self) -> bytes:
        return self.trace[-1]

    def bundle(self, checkpoint_cids: dict[int, str]) -> dict:
        """The result bundle of docs/protocol.md, given the checkpoint CIDs."""
        n = len(self.trace) - 1
        return {"version": 1, "job": self.task.job, "round": self.task.round, "index": self.task.index,
                "k": self.k, "steps": self.steps, "trace": ["0x" + h.hex() for h in self.trace],
                "checkpoints": {str(j): cid for j, cid in sorted(checkpoint_cids.items())},
                "final": checkpoint_cids[n]}


def checkpoint_path(workdir: Path, j: int) -> Path:
    return workdir / f"ckpt-{j:06d}.safetensors"


class _Writer:
    """Two background threads. The writer hashes and writes snapshots
    atomically, in order, holding at most two in memory (back-pressure on the
    training thread). The notifier calls `on_checkpoint` for each written file,
    in order, from an unbounded queue of small records, so a slow upload never
    stalls training; `close` waits for both."""

    def __init__(self, workdir: Path, manifest: Manifest, task: TaskRef,
                 on_checkpoint: Callable[[Checkpoint], None] | None):
        self.workdir, self.manifest, self.task, self.cb = workdir, manifest, task, on_checkpoint
        self.hashes: dict[int, bytes] = {}
        self.busy = 0.0
        self.error: BaseException | None = None
        self.q: queue.Queue = queue.Queue(maxsize=2)
        self.notes: queue.Queue = queue.Queue()
        self.threads = [threading.Thread(target=self._write, name="verity-checkpoint-writer", daemon=True),
                        threading.Thread(target=self._notify, name="verity-checkpoint-callback", daemon=True)]
        for t in self.threads:
            t.start()

    def _write(self) -> None:
        while (item := self.q.get()) is not None:
            j, state = item
            if self.error is not None:
                continue
            t0 = time.perf_counter()
            try:
                path = checkpoint_path(self.workdir, j)
                atomic_write(path, lambda f: write_checkpoint(f, state, self.manifest))  # hashes the state
                self.hashes[j] = state.hash
                self.notes.put(Checkpoint(self.task, j, state.step, state.hash, path, resumed=False))
            except BaseException as e:  # surfaced on the training thread
                self.error = e
            self.busy += time.perf_counter() - t0
        self.notes.put(None)

    def _notify(self) -> None:
        while (ckpt := self.notes.get()) is not None:
            if self.error is None and self.cb is not None:
                try:
                    self.cb(ckpt)
                except BaseException as e:
                    self.error = e

    def submit(self, j: int, state: TrainState) -> None:
        self._raise()
        self.q.put((j, state))

    def close(self) -> dict[int, bytes]:
        self.q.put(None)
        for t in self.threads:
            t.join()
        self._raise()
        return self.hashes

    def _raise(self) -> None:
        if self.error is not None:
            raise self.error


def _claim_workdir(workdir: Path, manifest: Manifest, task: TaskRef, input_hash: bytes) -> None:
    ident = {"job": task.job, "round": task.round, "index": task.index, "input": input_hash.hex(),
             "manifest": hashlib.sha256(manifest_bytes(manifest)).hexdigest()}
    workdir.mkdir(parents=True, exist_ok=True)
    marker = workdir / "task.json"
    if marker.exists():
        if json.loads(marker.read_text()) != ident:
            raise WorkdirConflict(str(workdir), f"holds another task or input than {ident}")
    else:
        atomic_write(marker, lambda f: f.write(json.dumps(ident).encode()))


def _resume_prefix(workdir: Path, manifest: Manifest, task: TaskRef, input_hash: bytes) -> list[TrainState]:
    """The longest prefix of complete, valid checkpoints j = 0, 1, … on disk."""
    k, out = manifest.checkpoint_interval, []
    for j in range(manifest.n_checkpoints + 1):
        path = checkpoint_path(workdir, j)
        if not path.exists():
            break
        try:
            state = load_checkpoint(path.read_bytes(), manifest, source=str(path))
        except VerityError:
            break  # torn or foreign: recompute from here
        if state.step != j * k or (j > 0 and state.task != task) or (j == 0 and state.hash != input_hash):
            break
        out.append(state)
    return out


def run_task(manifest: Manifest, input_state: bytes | TrainState, shard: Shard, task: TaskRef, workdir: Path, *,
             on_checkpoint: Callable[[Checkpoint], None] | None = None,
             expected_input_hash: bytes | None = None, workers: int = 1,
             worker_timeout: datetime.timedelta = DEFAULT_TIMEOUT) -> TaskResult:
    """Train one shard task from the round's input state; see the module doc.

    workers > 1: data-parallel over that many processes (W must divide the manifest's micro_batches; a job
    without micro-batches is refused); `worker_timeout` bounds start-up and every exchange, and a failed
    helper raises parallel.WorkerFailed after all helpers are stopped."""
    check_workers(manifest, workers)
    profile = apply_profile(manifest.determinism)
    k, n = manifest.checkpoint_interval, manifest.n_checkpoints
    start = input_state if isinstance(input_state, TrainState) else load_checkpoint(
        input_state, manifest, expected_hash=expected_input_hash, source="round input")
    if start.step != 0:
        raise StateInvalid("round input", f"must be a step-0 state, found step {start.step}")
    if expected_input_hash is not None and start.hash != expected_input_hash:
        raise HashMismatch("round input", expected_input_hash, start.hash)
    workdir = Path(workdir)
    _claim_workdir(workdir, manifest, task, start.hash)

    done = _resume_prefix(workdir, manifest, task, start.hash)
    trace = [s.hash for s in done]
    for j, s in enumerate(done):
        if on_checkpoint is not None:
            on_checkpoint(Checkpoint(task, j, s.step, s.hash, checkpoint_path(workdir, j), resumed=True))
    trainer = Trainer(manifest, shard, task, profile.device)
    trainer.load(done[-1] if done else start)
    writer = _Writer(workdir, manifest, task, on_checkpoint)
    last = done[-1] if done else start
    t = {"train": 0.0, "train_cpu": 0.0, "snapshot": 0.0, "blocked": 0.0}
    todo = range(max(len(done), 1), n + 1)
    dp: DataParallel | None = None
    trained = False
    try:
        if not done:
            writer.submit(0, start)
        if workers > 1 and todo:
            t0 = time.perf_counter()
            dp = DataParallel(manifest, shard, task, trainer, last, len(todo) * k, workers, workdir,
                              timeout=worker_timeout)
            t["workers_start"] = time.perf_counter() - t0   # helpers importing torch and building the model
        step = dp.train_step if dp is not None else trainer.train_step
        one_thread = dp is None and torch.get_num_threads() == 1   # train_cpu stays 0 otherwise (other threads work)
        for j in todo:
            t0, c0 = time.perf_counter(), time.thread_time()
            for _ in range(k):
                step()
            t1 = time.perf_counter()
            if one_thread:   # this thread's CPU is the step's: what waiting for a busy core does not add
                t["train_cpu"] += time.thread_time() - c0
            last = trainer.snapshot()
            t2 = time.perf_counter()
            writer.submit(j, last)
            t3 = time.perf_counter()
            t["train"] += t1 - t0
            t["snapshot"] += t2 - t1
            t["blocked"] += t3 - t2
        trained = True
    finally:
        try:
            t0 = time.perf_counter()
            hashes = writer.close()
            t["blocked"] += time.perf_counter() - t0
            if dp is not None and trained:
                dp.finish(last.hash)   # every rank ended in rank 0's state (hashed by the writer already)
        finally:
            if dp is not None:
                dp.close()
    t["writer"] = writer.busy
    trace += [hashes[j] for j in sorted(hashes)]
    result = TaskResult(task, k, manifest.steps_per_round, trace, merkle.root(trace),
                        [checkpoint_path(workdir, j) for j in range(n + 1)], final=last,
                        timings={key: round(v, 4) for key, v in t.items()})
    summary = {"trace": ["0x" + h.hex() for h in trace], "root": "0x" + result.root.hex()}
    atomic_write(workdir / "result.json", lambda f: f.write(json.dumps(summary).encode()))
    return result


def _trainer_at(manifest: Manifest, state: bytes | TrainState, shard: Shard, task: TaskRef) -> Trainer:
    profile = apply_profile(manifest.determinism)
    if not isinstance(state, TrainState):
        state = load_checkpoint(state, manifest, source="dispute state")
    trainer = Trainer(manifest, shard, task, profile.device)
    trainer.load(state)
    return trainer


def replay_segment(manifest: Manifest, checkpoint: bytes | TrainState, shard: Shard, task: TaskRef) -> list[bytes]:
    """The k + 1 per-step hashes g_0…g_k of the segment starting at `checkpoint`
    (g_0 is the checkpoint's own hash)."""
    trainer = _trainer_at(manifest, checkpoint, shard, task)
    hashes = [trainer.hash()]
    for _ in range(manifest.checkpoint_interval):
        trainer.train_step()
        hashes.append(trainer.hash())
    return hashes


def advance(manifest: Manifest, state: bytes | TrainState, shard: Shard, task: TaskRef, steps: int) -> TrainState:
    """The state `steps` steps after `state` (e.g. the agreed state of a step
    dispute, from the checkpoint that opens its segment)."""
    trainer = _trainer_at(manifest, state, shard, task)
    for _ in range(steps):
        trainer.train_step()
    return trainer.snapshot()


def recompute_step(manifest: Manifest, state: bytes | TrainState, shard: Shard, task: TaskRef) -> TrainState:
    """The state one step after `state` (what a referee recomputes)."""
    return advance(manifest, state, shard, task, 1)
