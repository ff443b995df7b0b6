"""Data-parallel training over several processes or GPUs of one node, bit for bit.

A step with M micro-batches (manifest `micro_batches`, engine/trainer.py) is
defined as: split the step's batch into M equal chunks, take the gradient g_m
of each chunk's loss times 1/M, sum (((g_0 + g_1) + g_2) + ...) in that
order, step the optimizer. The order of the sum is part of the definition, so
the chunks may be computed by different processes: with W workers (W divides
M), rank r computes g_m for m in [r*M/W, (r+1)*M/W), each on its own (never
accumulated locally), every rank receives every g_m (an all-gather: a copy of
the float32 bits, no arithmetic), and every rank sums them through
`trainer.sum_in_order`, exactly as one process does. So every rank takes the
same optimizer step, holds the same state, and the trace equals the
single-process trace bit for bit whenever each chunk's gradient is
reproducible on its own: always under portable-f32 (any thread count, device
or ISA); under a native profile when every worker satisfies the profile's
pins (cpu-f32-strict: one thread each; cuda-f32-strict: the same GPU class).
No all-reduce is used anywhere: its reduction order belongs to the backend.

Shape of a run (`run_task(..., workers=W)`): the calling process is rank 0;
it starts W-1 helper processes (`helper_main`, `python -c ...`), hands
each the manifest, shard, task, starting state and step count over its stdin
(JSON and safetensors, as a node reads them from the network: nothing is
unpickled; a pipe from the parent, never a file anyone else could write), and
keeps that pipe open: a helper whose stdin reaches EOF (rank 0 died, even by
`kill -9`) exits at once. Rendezvous is a `FileStore` with a fresh name in the
workdir, and gloo talks over 127.0.0.1 only, so nothing listens off the
machine. Backend: gloo on CPU, NCCL on CUDA (helper r uses another GPU of
the node than rank 0's). Rank 0 alone writes checkpoints and the trace;
helpers only train. At the end every rank reports its final state hash and
rank 0 refuses (WorkerFailed) on any difference. Resume after a crash is
rank 0's: it picks the last complete checkpoint as today and starts fresh
helpers from it.

Failures are bounded: start-up (helpers importing torch, building the
model) waits at most `timeout`, polling the helpers so one that exits is
reported at once with the tail of its log (`worker-<r>.log` in the
workdir); a helper dying mid-run closes its sockets and rank 0's next
exchange fails within a fraction of a second; a helper that hangs is cut off
by the process group's timeout. Every error stops all helpers (SIGTERM, then
SIGKILL) before it reaches the caller.

Threads: each process runs torch with `threads` intra-op threads (default:
the caller's count divided by W, at least 1; a profile that pins threads,
like cpu-f32-strict's 1, keeps its pin). Portable ops give the same bits
with any count; the point is not to oversubscribe the node's cores.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import struct
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import torch

from verity.engine.data import Shard, load_shard, shard_bytes
from verity.engine.determinism import apply_profile, get_profile
from verity.engine.manifest import Manifest, load_manifest, manifest_bytes
from verity.engine.state import TaskRef, TrainState
from verity.engine.trainer import Trainer, micro_batch_count, sum_in_order
from verity.engine.tensorfile import read_safetensors, safetensors_bytes
from verity.errors import StateInvalid, VerityError

DEFAULT_TIMEOUT = datetime.timedelta(minutes=30)
LOOPBACK = "127.0.0.1"
_HELPER_EXIT_ORPHANED = 70   # a helper's exit code when rank 0's pipe closed under it
# how a helper starts (not `-m verity.engine.parallel`: the package imports this module first, and runpy warns)
_HELPER_CODE = "from verity.engine.parallel import helper_main; helper_main()"


class WorkerFailed(VerityError, RuntimeError):
    """A data-parallel helper process failed, hung or disagreed; every helper has been stopped."""

    def __init__(self, rank: int, reason: str, log: str = ""):
        self.rank, self.reason, self.log = rank, reason, log
        tail = f"\n--- last lines of its log ---\n{log}" if log else ""
        super().__init__(f"data-parallel worker {rank}: {reason}{tail}")


def check_workers(manifest: Manifest, workers: int) -> int:
    """W itself, if W processes can share the job's steps: 1 always; otherwise W must divide M (so each rank
    gets whole micro-batches, the same number each). A job with M = 1 has nothing to split: refused (a
    silent fallback to one process would hide that the operator's setting does nothing)."""
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    m = micro_batch_count(manifest)
    if workers > 1 and (m == 1 or m % workers):
        raise ValueError(f"{workers} workers cannot share this job's steps: its micro_batches is {m} "
                         f"(workers must divide micro_batches; use workers=1, or at most gcd(workers, {m}))")
    return workers


def usable_workers(manifest: Manifest, wanted: int) -> int:
    """The most workers <= `wanted` that this job's steps can be split over (a power of two dividing M):
    what an operator's "up to N devices" setting becomes for one job."""
    m, w = micro_batch_count(manifest), 1
    while w * 2 <= wanted and m % (w * 2) == 0:
        w *= 2
    return w


def make_group(store, rank: int, world: int, backend: str, timeout: datetime.timedelta):
    """A process group object of its own (no torch.distributed default group, so the calling process may
    run other tasks or its own distributed code meanwhile). gloo binds to 127.0.0.1 only."""
    import torch.distributed as dist
    if backend == "gloo":
        opts = dist.ProcessGroupGloo._Options()
        opts._devices = [dist.ProcessGroupGloo.create_device(hostname=LOOPBACK)]
        opts._timeout = timeout
        return dist.ProcessGroupGloo(store, rank, world, opts)
    if backend == "nccl":
        opts = dist.ProcessGroupNCCL.Options()
        opts._timeout = timeout
        return dist.ProcessGroupNCCL(store, rank, world, opts)
    raise ValueError(f"unknown backend {backend!r}")


class StepExchange:
    """One rank's part of the data-parallel step (see the module doc); identical code on every rank."""

    def __init__(self, trainer: Trainer, group, rank: int, world: int):
        self.trainer, self.group, self.rank, self.world = trainer, group, rank, world
        self.M = trainer.micro_batches
        if self.M % world:
            raise ValueError(f"{world} workers do not divide micro_batches ({self.M})")
        self.per = self.M // world
        self.params = trainer.trained_parameters()
        for p in self.params:
            if p.dtype != torch.float32:
                raise TypeError(f"data-parallel steps exchange float32 gradients, a parameter is {p.dtype}")
        self.sizes = [p.numel() for p in self.params]
        self.width = sum(self.sizes) + len(self.params)   # the gradients, then one presence flag per parameter

    def _pack(self, grads: list[list[torch.Tensor | None]]) -> torch.Tensor:
        """[per, width] float32: each micro-batch's gradients flattened in parameter order (zeros where None),
        then 1.0/0.0 per parameter for whether it had a gradient at all (None is skipped by the sum, not added)."""
        dev = self.params[0].device if self.params else torch.device("cpu")
        rows = []
        for g in grads:
            parts = [x.reshape(-1) if x is not None else torch.zeros(n, device=dev) for x, n in zip(g, self.sizes)]
            parts.append(torch.tensor([0.0 if x is None else 1.0 for x in g], device=dev))
            rows.append(torch.cat(parts))
        return torch.stack(rows)

    def _unpack(self, row: torch.Tensor) -> list[torch.Tensor | None]:
        out, at = [], 0
        present = row[sum(self.sizes):].tolist()
        for p, n, flag in zip(self.params, self.sizes, present):
            out.append(row[at:at + n].view(p.shape) if flag == 1.0 else None)
            at += n
        return out

    def all_gather(self, local: torch.Tensor) -> list[torch.Tensor]:
        out = [torch.empty_like(local) for _ in range(self.world)]
        self.group.allgather([out], [local]).wait()
        return out

    def train_step(self) -> torch.Tensor:
        """One step on this rank; returns this rank's share of the step loss (reporting only)."""
        t = self.trainer
        idx = t.batch_indices()
        grads, loss = t.micro_grads(idx, range(self.rank * self.per, (self.rank + 1) * self.per))
        rows = torch.cat(self.all_gather(self._pack(grads)))   # [M, width], micro-batch m at row m
        t.apply_grads(sum_in_order([self._unpack(rows[m]) for m in range(self.M)]))
        return loss

    def final_hashes(self, own: bytes) -> list[bytes]:
        """Every rank's final state hash, by rank (one small all-gather)."""
        dev = self.params[0].device if self.params else torch.device("cpu")
        mine = torch.tensor(list(own), dtype=torch.uint8, device=dev)
        return [bytes(x.cpu().tolist()) for x in self.all_gather(mine)]


def _devices(device: torch.device, workers: int) -> list[str]:
    """The torch device of each rank: all "cpu", or distinct GPUs with rank 0 on the caller's own."""
    if device.type != "cuda":
        return [str(device)] * workers
    own = device.index if device.index is not None else torch.cuda.current_device()
    others = [i for i in range(torch.cuda.device_count()) if i != own]
    if len(others) < workers - 1:
        raise ValueError(f"{workers} workers need {workers} GPUs, this node has {torch.cuda.device_count()}")
    return [f"cuda:{own}"] + [f"cuda:{i}" for i in others[:workers - 1]]


def _helper_command(rank: int, world: int, store_path: Path) -> list[str]:
    """The helper's command line (the workdir is in it, so `ps` shows which task a helper serves)."""
    return [sys.executable, "-c", _HELPER_CODE, "--rank", str(rank), "--world", str(world), "--store", str(store_path)]


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


class DataParallel:
    """Rank 0's side of a data-parallel run: starts the helpers, steps with them, stops them.

        with DataParallel(manifest, shard, task, trainer, state, steps, workers, workdir) as dp:
            for _ in range(steps): dp.train_step()
            dp.finish(final_hash)

    `state` is the state `trainer` was loaded from (helpers start from it), `steps` how many steps follow.
    Leaving the block without `finish` (an exception) stops every helper."""

    def __init__(self, manifest: Manifest, shard: Shard, task: TaskRef, trainer: Trainer, state: TrainState,
                 steps: int, workers: int, workdir: Path, *, timeout: datetime.timedelta = DEFAULT_TIMEOUT,
                 threads: int | None = None):
        check_workers(manifest, workers)
        self.workers, self.workdir, self.timeout = workers, Path(workdir), timeout
        self.procs: list[subprocess.Popen] = []
        self.group = self.exchange = None
        self.store_path = self.workdir / f"rendezvous-{uuid.uuid4().hex}"
        devices = _devices(trainer.device, workers)
        self.backend = "nccl" if trainer.device.type == "cuda" else "gloo"
        pinned = get_profile(manifest.determinism).num_threads
        self.threads = pinned or threads or max(1, torch.get_num_threads() // workers)
        self._saved_threads = torch.get_num_threads()
        torch.set_num_threads(self.threads)
        payload = _encode_inputs(manifest, shard, task, state, {"steps": steps, "threads": self.threads,
                                                                   "timeout": timeout.total_seconds(),
                                                                   "backend": self.backend})
        try:
            import torch.distributed as dist
            self.store = dist.FileStore(str(self.store_path), workers)
            for r in range(1, workers):   # all started first: each imports torch while the others do
                self._spawn(r)
            for r in range(1, workers):
                self._send(r, _frame(json.dumps({"device": devices[r]}).encode()) + payload)
            self._await_ready()
            self.group = make_group(self.store, 0, workers, self.backend, timeout)
            self.exchange = StepExchange(trainer, self.group, 0, workers)
        except BaseException:
            self.close()
            raise

    def log_path(self, rank: int) -> Path:
        return self.workdir / f"worker-{rank}.log"

    def _spawn(self, rank: int) -> None:
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])   # the directory holding the verity package
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        with open(self.log_path(rank), "wb") as log:
            self.procs.append(subprocess.Popen(_helper_command(rank, self.workers, self.store_path),
                                               stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, env=env,
                                               cwd=str(self.workdir)))

    def _send(self, rank: int, data: bytes) -> None:
        proc = self.procs[rank - 1]
        try:
            proc.stdin.write(data)
            proc.stdin.flush()   # the pipe stays open: its EOF tells the helper that rank 0 is gone
        except (BrokenPipeError, OSError):
            self._raise_dead(proc, rank, "exited before reading its inputs")

    def _raise_dead(self, proc: subprocess.Popen, rank: int, what: str) -> None:
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        raise WorkerFailed(rank, f"{what} (exit code {proc.returncode})", _tail(self.log_path(rank)))

    def _await_ready(self) -> None:
        """Wait until every helper has built its model and loaded the state, noticing one that exits."""
        deadline = time.monotonic() + self.timeout.total_seconds()
        keys = [f"ready/{r}" for r in range(1, self.workers)]
        while not self.store.check(keys):
            for r, p in enumerate(self.procs, start=1):
                if p.poll() is not None:
                    self._raise_dead(p, r, "exited during start-up")
            if time.monotonic() > deadline:
                raise WorkerFailed(0, f"helpers not ready after {self.timeout}")
            time.sleep(0.05)

    def train_step(self) -> torch.Tensor:
        try:
            return self.exchange.train_step()
        except RuntimeError as e:   # gloo/NCCL: a peer closed its connection, or the timeout passed
            self._explain(e)
            raise

    def _explain(self, err: BaseException) -> None:
        """Turn a collective's failure into WorkerFailed naming the helper that died, if one did."""
        time.sleep(0.2)   # let a dying helper finish exiting, so its exit code is known
        for r, p in enumerate(self.procs, start=1):
            if p.poll() is not None:
                raise WorkerFailed(r, f"exited during training (exit code {p.returncode}): {err}",
                                   _tail(self.log_path(r))) from err
        raise WorkerFailed(0, f"the step exchange failed: {err}") from err

    def finish(self, final_hash: bytes) -> None:
        """Check that every rank ended in the same state, then wait for the helpers to exit cleanly."""
        try:
            hashes = self.exchange.final_hashes(final_hash)
        except RuntimeError as e:
            self._explain(e)
            raise
        for r, h in enumerate(hashes):
            if h != final_hash:
                raise WorkerFailed(r, f"ended in state {h.hex()}, rank 0 in {final_hash.hex()} (not deterministic "
                                      "across processes: a profile pin differs between them?)")
        deadline = time.monotonic() + 60
        for r, p in enumerate(self.procs, start=1):
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise WorkerFailed(r, "did not exit after the last step") from None
            if p.returncode != 0:
                raise WorkerFailed(r, f"exit code {p.returncode} after the last step", _tail(self.log_path(r)))

    def close(self) -> None:
        """Stop every helper (a no-op for those already gone) and drop the group; idempotent."""
        for p in self.procs:
            if p.stdin is not None and not p.stdin.closed:
                try:
                    p.stdin.close()   # EOF: the helper's watchdog exits
                except OSError:
                    pass
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.exchange = self.group = None
        self.store = None
        torch.set_num_threads(self._saved_threads)
        try:
            self.store_path.unlink(missing_ok=True)
        except OSError:
            pass

    def __enter__(self) -> "DataParallel":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ----------------------------------------------------------------------------------------------- helper side
def _frame(data: bytes) -> bytes:
    return struct.pack("<Q", len(data)) + data


def _encode_inputs(manifest: Manifest, shard: Shard, task: TaskRef, state: TrainState, extra: dict) -> bytes:
    """A helper's inputs in the formats a node reads from the network, each checked again on the helper's side:
    a JSON header (the canonical manifest, the task, the state's step and task, run settings), the shard file and
    the state's tensors as safetensors. (The device is framed first, per helper.)"""
    ref = lambda t: [t.job, t.round, t.index]  # noqa: E731
    head = {"manifest": manifest_bytes(manifest).decode(), "task": ref(task), "step": state.step,
            "state_task": ref(state.task) if state.task else None, "samples": shard.meta.samples, **extra}
    return (_frame(json.dumps(head).encode()) + _frame(shard_bytes(shard.x, shard.y, shard.meta))
            + _frame(safetensors_bytes(state.tensors, {})))


def _read_frame(stream) -> bytes:
    head = stream.read(8)
    if len(head) != 8:
        raise SystemExit("no inputs on stdin (helpers are started by run_task(..., workers=W))")
    (n,) = struct.unpack("<Q", head)
    data = stream.read(n)
    if len(data) != n:
        raise SystemExit(f"truncated inputs on stdin ({len(data)} of {n} bytes)")
    return data


def _read_payload(stream) -> dict:
    """The inputs _encode_inputs framed (after the device), decoded and validated like network inputs."""
    p = json.loads(_read_frame(stream))
    p.update(json.loads(_read_frame(stream)))
    manifest = load_manifest(p["manifest"].encode())
    shard = load_shard(_read_frame(stream), manifest.data, samples=p["samples"], source="rank 0's shard")
    state = _read_frame(stream)
    tensors, _ = read_safetensors(state, "rank 0's state", StateInvalid, max_bytes=len(state),
                                  max_elements=max(1, len(state) // 4))
    return {**p, "manifest": manifest, "shard": shard, "task": TaskRef(*p["task"]), "tensors": tensors,
            "state_task": TaskRef(*p["state_task"]) if p["state_task"] else None,
            "timeout": datetime.timedelta(seconds=p["timeout"])}


def _watch_parent(fd: int) -> None:
    """Exit at once when rank 0's end of the pipe closes (it finished, failed, or was killed). Raw reads on the
    descriptor: a daemon thread parked in the buffered reader would hold its lock at interpreter shutdown."""
    def watch() -> None:
        while os.read(fd, 4096):
            pass
        os._exit(_HELPER_EXIT_ORPHANED)
    threading.Thread(target=watch, name="verity-parent-watch", daemon=True).start()


def helper_main(argv: list[str] | None = None) -> None:
    """A helper rank: train the same steps as rank 0 in lockstep, write nothing, report the final hash."""
    ap = argparse.ArgumentParser(prog="verity-parallel-helper", description=__doc__.splitlines()[0])
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--store", type=Path, required=True)
    args = ap.parse_args(argv)
    if not 1 <= args.rank < args.world:
        raise SystemExit(f"--rank must be in 1..{args.world - 1} (rank 0 is the process that runs the task)")
    p = _read_payload(sys.stdin.buffer)   # rank 0 writes exactly this much, so nothing is left buffered
    _watch_parent(sys.stdin.fileno())

    import torch.distributed as dist
    apply_profile(p["manifest"].determinism)
    torch.set_num_threads(p["threads"])
    if p["device"].startswith("cuda"):
        torch.cuda.set_device(torch.device(p["device"]))
    trainer = Trainer(p["manifest"], p["shard"], p["task"], p["device"])
    trainer.load(TrainState(p["tensors"], p["step"], p["state_task"]))
    store = dist.FileStore(str(args.store), args.world)
    store.set(f"ready/{args.rank}", b"1")
    group = make_group(store, args.rank, args.world, p["backend"], p["timeout"])
    exchange = StepExchange(trainer, group, args.rank, args.world)
    for _ in range(p["steps"]):
        exchange.train_step()
    exchange.final_hashes(trainer.hash())
