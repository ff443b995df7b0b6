"""Will the job run, what will it cost, and how long will it take? Answered before anything is uploaded or spent
(issue 24, jobs that always fit: a user's default GPT job was posted, declined by every node for a window too short,
and never ran).

The job's largest task is estimated with the rules a node applies (engine/estimate.py): its memory, and its training
time on a REFERENCE node (REFERENCE_SPEEDS: one core of a 2-vCPU Xeon development machine under portable-f32, fitted
by scripts/bench_estimate.py, which checks such estimates within ±30 % of measured runs; a native profile or a GPU is
faster). Then:

- **windows**: a solver SLOW_NODE times slower than the reference, keeping its own SAFETY margin (node/feasibility.py),
  must finish the largest task inside the execution window after START_S for seeing the draw, fetching the inputs and
  committing. Without `--execution-window` the job gets the chain's default or, when that is too short, the window it
  needs (said out loud); a window given shorter than that is refused with the numbers and the flag that fixes it.
- **memory**: the manifest's `hardware.min_memory_mb` becomes the task's need (at least the manifest's 1,024 MB
  default), so nodes that could not hold the task are never drawn; when solvers of the job's profile are registered
  and none declared that much, the job is refused with both numbers (`network_fit`). With no solver registered yet it
  is posted, with a warning: a job may wait for its network.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from verity.chain.protocol import ROLE_SOLVER
from verity.engine.estimate import StepSpeed, estimate_task_memory, estimate_task_seconds
from verity.engine.manifest import Manifest
from verity.submit.options import MAX_WINDOW, BadJobSpec

# scripts/bench_estimate.py, portable-f32, one thread: mlp, cnn, gpt on the 2-vCPU Intel Xeon development machine
# (2026-12-03); decoder and resnet on a 2-vCPU AMD EPYC one (2026-12-04, where gpt measured 8,073,358 FLOPs/ms: ~30 %
# slower, so their windows err long)
REFERENCE_SPEEDS = {"mlp": StepSpeed(1.602, 11_208_689), "cnn": StepSpeed(2.793, 8_771_965),
                    "gpt": StepSpeed(15.754, 11_710_877), "decoder": StepSpeed(34.758, 7_504_402),
                    "resnet": StepSpeed(12.665, 4_431_794)}
SLOW_NODE = 2.0     # a node this many times slower than the reference still fits the window chosen
NODE_SAFETY = 1.5   # node/feasibility.SAFETY: the margin a node keeps on its own estimate
START_S = 20        # from the draw to training: see the assignment, fetch the inputs; then hash and commit
MANIFEST_MIN_MEMORY_MB = 1024  # engine/manifest.Hardware.min_memory_mb's default
MAX_NODES_READ = 256           # nodes read from the registry for the memory check (bounded: a registry may be large)
MIB = 1 << 20


@dataclass(frozen=True)
class JobFit:
    task_seconds: float   # the largest shard task's training time on the reference node
    memory_mb: int        # the largest shard task's memory (engine/estimate.py), MB, rounded up
    window_s: int         # the execution window that task needs (SLOW_NODE, NODE_SAFETY, START_S)

    def text(self) -> str:
        return (f"largest task: about {self.task_seconds:,.1f} s of training on a reference node and "
                f"{self.memory_mb:,} MB; it needs an execution window of {self.window_s:,} s")


def job_fit(manifest: Manifest) -> JobFit:
    """The job's largest shard task, estimated (module jobs: each task's own modules)."""
    seconds = max(estimate_task_seconds(manifest, i, REFERENCE_SPEEDS) or 0.0 for i in range(len(manifest.shards)))
    memory = max(estimate_task_memory(manifest, i) for i in range(len(manifest.shards)))
    return JobFit(seconds, math.ceil(memory / MIB), window_needed(seconds))


def window_needed(task_seconds: float) -> int:
    """The execution window a task of `task_seconds` on the reference node needs."""
    return math.ceil(task_seconds * SLOW_NODE * NODE_SAFETY) + START_S


def min_memory_mb(fit: JobFit) -> int:
    """The manifest's `hardware.min_memory_mb`: the task's need, and never below the manifest's default."""
    return max(MANIFEST_MIN_MEMORY_MB, fit.memory_mb)


def choose_execution_window(fit: JobFit, given: int, default: int, step_budget_ms: int = 0) -> tuple[int, str]:
    """(the executionWindow to post, 0 = the chain's default; a line saying what was chosen, '' if nothing to say).
    Refuses a given window (or a declared per-step budget's window) shorter than the job needs."""
    if given:
        if given < fit.window_s:
            raise BadJobSpec("execution_window", f"{given} s is too short: {fit.text()} (a node half as fast as the "
                                                 f"reference, with its x{NODE_SAFETY:g} margin); "
                                                 f"--execution-window {fit.window_s} or more, or fewer --steps")
        return given, ""
    if step_budget_ms:
        return 0, ""  # the declared budget sets the window (submit/modules.execution_window_for) and nodes check it
    if fit.window_s <= default:
        return 0, ""
    if fit.window_s > MAX_WINDOW:
        raise BadJobSpec("steps", f"{fit.text()}, over the registry's maximum of {MAX_WINDOW:,} s: fewer --steps "
                                  "per round, or a smaller model")
    return fit.window_s, (f"execution window {fit.window_s:,} s (the chain's default {default:,} s is too short: "
                          f"{fit.text()})")


@dataclass(frozen=True)
class NetworkFit:
    solvers: int         # registered solvers serving the job's profile and device
    largest_mb: int      # the most memory one of them declared (0: none)
    eligible: int        # of them, those that can hold the task (memory) — the draw also asks for free stake

    def warning(self, profile: str) -> str:
        if self.solvers == 0:
            return (f"warning: no registered solver serves {profile} on this device class yet; the job waits until "
                    "one joins (or cancel it with `verity job cancel`)")
        return ""


def network_fit(nodes: list, fit: JobFit, profile_bit: int, device_class: int) -> NetworkFit:
    """`nodes`: the registry's node records (getNode: roles, deviceClass, memoryMb, profiles). Refuses a job no
    registered solver could hold when solvers of its profile exist."""
    serving = [n for n in nodes if int(n.roles) & ROLE_SOLVER and int(n.profiles) & profile_bit
               and int(n.deviceClass) == device_class]
    largest = max((int(n.memoryMb) for n in serving), default=0)
    need = min_memory_mb(fit)
    out = NetworkFit(len(serving), largest, sum(1 for n in serving if int(n.memoryMb) >= need))
    if serving and not out.eligible:
        raise BadJobSpec("model_config", f"its largest task needs about {fit.memory_mb:,} MB, but the largest of the "
                                         f"{len(serving)} registered solver(s) of this profile declares {largest:,} MB "
                                         "(a smaller model or --batch-size, or module-parallel --modules)")
    return out


def registered_nodes(count: int, node_at, record_of) -> list:
    """The first MAX_NODES_READ node records: `node_at(i)` an address of the registry's list, `record_of(addr)` its
    getNode record (the callers read them through web3 or ape)."""
    return [record_of(node_at(i)) for i in range(min(int(count), MAX_NODES_READ))]
