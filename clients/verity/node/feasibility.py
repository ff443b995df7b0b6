"""Before a drawn solver trains: can this node do the task in time, and does the job's window cover the work its
own manifest declares? (issue 9, feasible windows)

Run once when a slot is assigned, well inside the decline grace (the first DECLINE_GRACE_BPS of the window), so a
task that does not fit is declined unslashed instead of being trained, missed and reported late:

1. **declared work** — `hardware.step_budget_ms` is the poster's per-step budget on the job's hardware class.
   steps_per_round × budget must fit in the execution window after the decline grace. A job whose window is
   shorter than the work its own manifest declares is the poster's fault: `ManifestInvalid`, declined as
   invalid inputs (three such refusals fail the job and take the poster's bond).
2. **memory** — `estimate_task_memory(manifest, index)` (engine/estimate.py: parameters, gradients and optimizer
   state of the task's modules, activations, data, snapshots) must fit in the memory this node declared.
3. **time** — steps × (overhead + `estimate_step_flops(manifest, index)` / rate) at this node's measured speed for
   the job's family under its profile (the doctor times a reference and a larger calibration task of each family:
   engine/estimate.StepSpeed), times SAFETY, after the work already running or queued on this node (its backlog),
   must fit before the slot's deadline. scripts/bench_estimate.py checks the estimate against measured runs.
   The doctor times steps by the training thread's CPU clock, which a loaded machine does not inflate (a wall
   clock read under load once said 50x and was cached); this node's own recent training then says how much
   slower than its CPU time a step runs here now (`Contention`), and the estimate is scaled by that.

4. **fetch** — the task's inputs this node's IPFS node does not already hold (node/locality.py), at the rate its own
   fetches measured (node/netprobe.py; its declared bandwidth until enough were measured), add to the time of 3: a
   node that would fetch past the deadline declines, one that holds the inputs counts nothing for them.

2, 3 and 4 are this node's limits, not the poster's: `CapacityExceeded`, declined without blame. A module task
needs memory only for its own modules, so a node too small for the whole model still takes module tasks.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass

from verity.chain.protocol import BPS, DECLINE_GRACE_BPS
from verity.engine.estimate import StepSpeed, fit_speed
from verity.errors import CapacityExceeded, ManifestInvalid

log = logging.getLogger("verity.node.solver")

MIB = 1 << 20
SAFETY = 1.5  # estimated training time × this must fit in the time left: fetches, hashing and the commit need room


class Contention:
    """How much longer than its CPU time this node's recent training took on the wall clock (>= 1): other processes
    holding the cores. Fed each finished task's timings (run_task: `train` wall, `train_cpu` this thread's CPU); a
    moving average, so a burst fades. 1.0 until a task long enough to tell (MIN_CPU_S) has run."""

    MIN_CPU_S = 0.2
    CAP = 20.0

    def __init__(self, weight: float = 0.5):
        self.weight, self.factor = weight, 1.0

    def observe(self, timings: dict, concurrent: int = 1) -> None:
        """`concurrent`: this node's own training tasks running beside this one (itself included). The backlog
        already adds their estimates up as if they ran one after another, so the slowdown they cause each other
        is not counted twice: k tasks each at 1/r speed finish their CPU seconds in r/k of that time."""
        wall, cpu = float(timings.get("train", 0.0)), float(timings.get("train_cpu", 0.0))
        if cpu < self.MIN_CPU_S:
            return   # too short to tell (and 0 for a GPU or a multi-process task: their clocks differ)
        ratio = min(max(wall / cpu / max(1, concurrent), 1.0), self.CAP)
        self.factor = (1 - self.weight) * self.factor + self.weight * ratio


@dataclass(frozen=True)
class Fit:
    memory_bytes: int
    seconds: float | None  # None: this node has no speed measurement for the job's profile
    fetch_seconds: float = 0.0
    contention: float = 1.0  # the load factor `seconds` includes (1.0: an idle machine)


def doctor_speeds(checks: dict) -> dict[str, dict[str, StepSpeed]]:
    """profile -> arch -> StepSpeed for each served profile, each family fitted from the doctor's two timed tasks of
    it (its reference task and its calibration task: engine/estimate.fit_speed). A family without a calibration
    timing (an older cache) gets its reference task's own rate, no overhead. `checks`: run_doctor's result."""
    from verity.engine.estimate import estimate_step_flops
    from verity.engine.reference import calibration_manifest, reference_manifest

    speeds: dict[str, dict[str, StepSpeed]] = {}
    for profile, check in checks.items():
        if not check.ok:
            continue
        fitted = {}
        for arch, t in check.tasks.items():
            if t.ms_per_step <= 0 or not t.matches:   # unrecorded for this profile: not served (check_task_fits)
                continue
            small = (estimate_step_flops(reference_manifest(profile, arch), 0), t.ms_per_step)
            large = (estimate_step_flops(calibration_manifest(profile, arch), 0), t.cal_ms_per_step)
            fitted[arch] = fit_speed(small, large) if t.cal_ms_per_step > 0 else fit_speed((0, 0), small)
        if fitted:
            speeds[profile] = fitted
    return speeds


def check_declared_window(manifest, execution_window: int) -> None:
    """The poster's own declaration against the chain's window (rule 1)."""
    budget = manifest.hardware.step_budget_ms
    if budget is None:
        return
    usable = execution_window * (BPS - DECLINE_GRACE_BPS) / BPS
    declared = manifest.steps_per_round * budget / 1000
    if declared > usable:
        raise ManifestInvalid("hardware.step_budget_ms",
                              f"{manifest.steps_per_round} steps x {budget} ms = {declared:.0f} s of declared work, "
                              f"but the job's execution window leaves {usable:.0f} s after the decline grace")


def check_task_fits(manifest, index: int, *, execution_window: int, seconds_left: float, memory_mb: int,
                    speeds: dict | None, aggregate: bool = False, backlog_s: float = 0.0,
                    contention: float = 1.0, fetch_s: float = 0.0) -> Fit:
    """Raise ManifestInvalid (the poster's window contradicts its manifest) or CapacityExceeded (this node cannot
    hold or finish the task in time, after `backlog_s` seconds of work it already runs or queued); return the
    estimates otherwise. `speeds`: doctor_speeds' result (profile -> arch -> StepSpeed); `contention`: this node's
    Contention factor (its steps run that much slower than their CPU time now); `fetch_s`: seconds to fetch the
    inputs this node does not hold (locality.fetch_seconds)."""
    from verity.engine.estimate import estimate_task_memory, estimate_task_seconds

    check_declared_window(manifest, execution_window)
    if aggregate:  # merging: every final, the round input and the output in float32, and a float64 stack
        from verity.engine.modules import parameter_shapes
        model = 4 * sum(math.prod(s) for s in parameter_shapes(manifest.model).values())
        need = (len(manifest.shards) + 2) * model + 2 * model
    else:
        need = estimate_task_memory(manifest, index)
    if need > memory_mb * MIB:
        raise CapacityExceeded(f"task {index}", f"needs about {need / MIB:,.0f} MB (engine/estimate.py), "
                                                f"this node declared {memory_mb:,} MB",
                               note=f"memory {math.ceil(need / MIB)}/{memory_mb} MB")
    seconds = None
    family = (speeds or {}).get(manifest.determinism)
    if family and not aggregate and manifest.model.arch not in family:
        raise CapacityExceeded(f"task {index}", f"this node has no verified {manifest.model.arch} reference under "
                                                f"{manifest.determinism} (tests/vectors records none, or its root "
                                                "differs here): its bits could not be trusted in a dispute",
                               note=f"no {manifest.model.arch} vector")
    if family and not aggregate:
        seconds = estimate_task_seconds(manifest, index, family)
        seconds = seconds * max(1.0, contention) if seconds is not None else None
    if seconds is not None or fetch_s > 0:
        check_time_left(index, seconds, fetch_s, backlog_s, seconds_left, contention)
    return Fit(need, seconds, fetch_s, max(1.0, contention) if seconds is not None else 1.0)


def check_time_left(index: int, seconds: float | None, fetch_s: float, backlog_s: float, seconds_left: float,
                    contention: float) -> None:
    """Rules 3 and 4: training (x SAFETY), fetching and the backlog must end before the deadline."""
    total = (seconds or 0.0) * SAFETY + fetch_s + backlog_s
    if total <= seconds_left:
        return
    queued = f" after {backlog_s:,.0f} s of work already running or queued here" if backlog_s >= 1 else ""
    loaded = f", x{contention:.1f} for this machine's load" if contention >= 1.05 else ""
    training = (f"about {seconds:,.0f} s of training at this node's measured speed (x{SAFETY} margin{loaded})"
                if seconds is not None else "")
    fetching = f"{fetch_s:,.0f} s to fetch the inputs it does not hold" if fetch_s > 0 else ""
    raise CapacityExceeded(f"task {index}", f"{' + '.join(p for p in (training, fetching) if p)}{queued}, "
                                            f"{seconds_left:,.0f} s left in the window",
                           note=f"time {math.ceil(total)}/{int(seconds_left)} s")


def unverified_family(ctx, job_id: int) -> str | None:
    """"<arch> under <profile>" when this node serves the job's profile but has no verified reference root for the
    job's model family under it (tests/vectors records none for a native class, or its root differs here): its bits
    could differ from the class's, so it neither trains (check_task_fits declines), nor checks, nor audits such jobs.
    None: verified, or the node has no doctor speeds (a bare context)."""
    speeds = getattr(ctx, "speeds", None)
    if not speeds:
        return None
    m = ctx.manifest(job_id)
    family = speeds.get(m.determinism)
    if family is None or m.model.arch in family:
        return None
    return f"{m.model.arch} under {m.determinism}"
