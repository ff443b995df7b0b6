"""Long computations off the main loop, so a node's duties never block each other.

Training, re-execution and replays run in daemon worker threads; the main
loop keeps ticking (events, heartbeats, votes, dispute moves, new tasks) and
picks a result up on a later tick with `poll(key, fn)`. Two lanes: `long`
(training a task, re-executing one) and `urgent` (a referee's step, a party's
segment replay), so a vote never waits behind a training run. Chain
transactions stay on the main thread (one nonce owner). Nothing here is
persisted: after a crash the item is still in its phase and `poll` simply
starts the computation again (training resumes from its last checkpoint).
Torch's process-wide settings are pinned by the engine's one profile for
every job, so concurrent jobs see the same settings.
"""
from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from verity.errors import VerityError

log = logging.getLogger("verity.node.work")
MAX_QUEUED = 32  # per lane; beyond it a job is offered again on a later tick


class Cancelled(VerityError):
    def __init__(self, what: str):
        super().__init__(f"{what}: stopped because the node is shutting down (a restart resumes it)")


@dataclass
class Job:
    key: str
    what: str
    fn: Callable[[], Any]
    lane: str
    done: threading.Event = field(default_factory=threading.Event)
    started: float = 0.0
    estimate_s: float = 0.0  # expected seconds of work (0 = unknown): what a new slot would wait behind
    result: Any = None
    error: BaseException | None = None


class WorkPool:
    def __init__(self, long_threads: int = 2, urgent_threads: int = 1, *, inline: bool = False):
        self.inline = inline
        self.stopping = threading.Event()
        self._jobs: dict[str, Job] = {}
        self._queues = {"long": queue.Queue(), "urgent": queue.Queue()}
        self._threads = []
        if not inline:
            for lane, count in (("long", long_threads), ("urgent", urgent_threads)):
                for i in range(max(1, count)):
                    t = threading.Thread(target=self._serve, args=(lane,), name=f"verity-{lane}-{i}", daemon=True)
                    t.start()
                    self._threads.append(t)

    def poll(self, key: str, fn: Callable[[], Any], *, what: str, urgent: bool = False,
             estimate_s: float | None = None) -> Any:
        """`fn()`'s result once it finished (its exception re-raised here); None while it is
        queued or running. The first call for `key` submits it; `estimate_s`, its expected seconds, counts in
        `backlog_seconds` until it finishes."""
        if self.inline:
            return fn()
        job = self._jobs.get(key)
        if job is None:
            lane = "urgent" if urgent else "long"
            if self.stopping.is_set() or self._queues[lane].qsize() >= MAX_QUEUED:
                return None
            job = self._jobs[key] = Job(key, what, fn, lane, estimate_s=float(estimate_s or 0.0))
            self._queues[lane].put(job)
            log.info("%s: started in the background (%s lane)", what, lane)
            return None
        if not job.done.is_set():
            return None
        del self._jobs[key]
        if job.error is not None:
            raise job.error
        log.info("%s: finished in %.1f s", job.what, time.monotonic() - job.started)
        return job.result

    def backlog_seconds(self, now: float | None = None) -> float:
        """Expected seconds of long-lane work still to do (running jobs: their estimate less the time they ran;
        queued ones: all of it): a new task starts only behind it. The node's cores are shared by its lanes, so the
        work adds up whatever the number of threads. Jobs posted without an estimate count nothing."""
        now = time.monotonic() if now is None else now
        left = 0.0
        for job in list(self._jobs.values()):
            if job.lane == "long" and not job.done.is_set() and job.estimate_s:
                left += max(0.0, job.estimate_s - (now - job.started if job.started else 0.0))
        return left

    def depth(self) -> dict[str, tuple[int, int]]:
        """Per lane: (jobs queued, not started yet; jobs running) — what the node's metrics show."""
        out = {lane: [0, 0] for lane in self._queues}
        for job in list(self._jobs.values()):
            if not job.done.is_set():
                out[job.lane][1 if job.started else 0] += 1
        return {lane: (q, r) for lane, (q, r) in out.items()}

    def busy(self, key: str) -> bool:
        return key in self._jobs

    def running(self, key: str) -> bool:
        """Queued or computing, its result not in yet (`busy` also counts a result that waits for its `poll`)."""
        job = self._jobs.get(key)
        return job is not None and not job.done.is_set()

    def forget(self, key: str) -> None:
        """Drop the jobs of an item that ended meanwhile (`key` and `key:…`); results that come are discarded."""
        for k in [k for k in self._jobs if k == key or k.startswith(key + ":")]:
            del self._jobs[k]

    def in_flight(self) -> list[str]:
        return [j.what + (" (running)" if j.started else " (queued)") for j in self._jobs.values() if not j.done.is_set()]

    def close(self, timeout: float) -> list[str]:
        """Stop taking jobs, give running ones `timeout` seconds (training stops at its next
        checkpoint), and return what was left unfinished; daemon threads end with the process."""
        self.stopping.set()
        for q in self._queues.values():
            while True:
                try:
                    q.get_nowait().done.set()
                except queue.Empty:
                    break
        deadline = time.monotonic() + timeout
        for job in list(self._jobs.values()):
            job.done.wait(max(0.0, deadline - time.monotonic()))
        return [j.what for j in self._jobs.values() if j.started and not j.done.is_set()]

    def _serve(self, lane: str) -> None:
        q = self._queues[lane]
        while True:
            job = q.get()
            if self.stopping.is_set() or job.done.is_set():
                job.done.set()
                continue
            job.started = time.monotonic()
            try:
                job.result = job.fn()
            except BaseException as exc:  # noqa: BLE001 — handed to the main loop by poll()
                job.error = exc
            job.done.set()
