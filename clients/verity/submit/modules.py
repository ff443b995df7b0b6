"""Submit options for module-parallel jobs, the outer optimizer and the declared per-step budget.

`--modules "embed=wte.,wpe.;body=h.;head=ln_f.,lm_head."` names groups of parameters by name prefix;
`--module-plan "embed,body;head;…"` says which modules each shard task trains (default: round-robin, shard i
trains module i mod M). `--outer-lr` turns each round's merged update into a DiLoCo pseudo-gradient applied with
Nesterov momentum `--outer-momentum`. `--step-budget-ms` declares the work per step, so nodes can check the
execution window covers it (docs/nodes.md, feasible windows). The manifest's own validation (engine/manifest.py)
checks the rest (prefixes match, modules disjoint, every module trained) and is reported against these options.
"""
from __future__ import annotations

import math
import re

from verity.chain.protocol import BPS, DECLINE_GRACE_BPS, min_windows
from verity.submit.options import BadJobSpec, MIN_EXECUTION_WINDOW

_NAME = re.compile(r"^[a-z0-9_-]{1,64}$")

HELP = {
    "modules": "module-parallel training: 'name=prefix,prefix;name=prefix' (parameter-name prefixes, e.g. "
               "'body=net.0.;head=net.2.'); each shard task trains only its modules, the rest stays frozen",
    "module_plan": "modules each shard task trains, one entry per shard: 'a;b;a,b;…' (default: round-robin, "
                   "shard i trains module i mod the number of modules)",
    "outer_lr": "outer optimizer (DiLoCo): learning rate applied to each round's merged update (0 = plain "
                "aggregation)",
    "outer_momentum": "outer optimizer: Nesterov momentum, 0 ≤ m < 1",
    "step_budget_ms": "declared milliseconds per training step on the job's hardware class; sets the execution "
                      "window when none is given, and nodes decline a window shorter than steps × budget (0 = none)",
}


def parse_modules(text: str) -> list[dict]:
    """'a=p1,p2;b=p3' → [{"name": "a", "params": ["p1", "p2"]}, …]; [] for ''."""
    if not text.strip():
        return []
    out, seen = [], set()
    for part in text.split(";"):
        name, sep, prefixes = part.partition("=")
        name = name.strip()
        params = [p.strip() for p in prefixes.split(",") if p.strip()]
        if not sep or not _NAME.match(name) or not params:
            raise BadJobSpec("modules", f"{part.strip()!r} is not name=prefix[,prefix…] (names: a-z 0-9 _ -)")
        if name in seen:
            raise BadJobSpec("modules", f"module {name!r} is named twice")
        seen.add(name)
        out.append({"name": name, "params": params})
    return out


def parse_plan(text: str, modules: list[dict], shards: int) -> list[list[str]]:
    """One list of module names per shard task; round-robin over `modules` when `text` is empty."""
    names = [m["name"] for m in modules]
    if not text.strip():
        if shards < len(names):
            raise BadJobSpec("module_plan", f"{shards} shards cannot train {len(names)} modules round-robin: "
                                            "give --module-plan or more --shards")
        return [[names[i % len(names)]] for i in range(shards)]
    plan = [[n.strip() for n in entry.split(",") if n.strip()] for entry in text.split(";")]
    if len(plan) != shards:
        raise BadJobSpec("module_plan", f"{len(plan)} entries for {shards} shards (one per shard task)")
    for entry in plan:
        unknown = [n for n in entry if n not in names]
        if not entry or unknown:
            raise BadJobSpec("module_plan", f"entry {';'.join(entry) or '(empty)'!r}: "
                                            f"{'unknown module ' + repr(unknown[0]) if unknown else 'names no module'}")
    return plan


def validate_parallel(spec) -> None:
    """The options alone (before any data is loaded)."""
    if spec.module_plan and not spec.modules:
        raise BadJobSpec("module_plan", "needs --modules")
    parse_modules(spec.modules)
    if not (math.isfinite(spec.outer_lr) and 0 <= spec.outer_lr <= 10):
        raise BadJobSpec("outer_lr", f"{spec.outer_lr:g} is not in [0, 10] (0 = no outer optimizer)")
    if not (math.isfinite(spec.outer_momentum) and 0 <= spec.outer_momentum < 1):
        raise BadJobSpec("outer_momentum", f"{spec.outer_momentum:g} is not in [0, 1)")
    if not 0 <= spec.step_budget_ms <= 3_600_000:
        raise BadJobSpec("step_budget_ms", f"{spec.step_budget_ms} is not in 0..3600000")


def execution_window_for(spec) -> int:
    """The execution window to post: the one given, else (with a declared budget) one the declared work fits in
    after the decline grace, plus MIN_EXECUTION_WINDOW for fetching and committing; 0 = the registry's default."""
    if spec.execution_window or not spec.step_budget_ms:
        return spec.execution_window
    work = spec.steps * spec.step_budget_ms / 1000
    return max(MIN_EXECUTION_WINDOW, math.ceil(work * BPS / (BPS - DECLINE_GRACE_BPS)) + MIN_EXECUTION_WINDOW)


# The automatic result floor of a job with a verification pot: a fee auditor's time from the draw to its blind check
# on-chain. RESULT_FLOOR_BASE covers what is not the training: seeing the draw, fetching the inputs, starting the
# task, one transaction (measured: 2 s on a quiet devnet beside five nodes; over 4 s on a loaded 2-core CI machine,
# where tests/nodes/test_fee_check_race.py posts 15 s: a poster on a busy network raises it with --result-floor);
# the work is the declared one (steps x --step-budget-ms) or else the estimated FLOPs at REFERENCE_FLOPS_PER_S (a
# fast core: the floor is a lower bound of an honest node's time, not an estimate of it); and at least
# RESULT_FLOOR_BLOCKS blocks, so the check has blocks to land in on a slow chain.
RESULT_FLOOR_BASE = 4
REFERENCE_FLOPS_PER_S = 10e9
RESULT_FLOOR_BLOCKS = 3


def result_floor_for(spec, block_seconds: int = 1, step_flops: int = 0) -> int:
    """The result floor to post (PostJobParams.resultFloor): the one given, else 0 without a verification pot, else
    RESULT_FLOOR_BASE plus the work (declared, else `step_flops` x steps at REFERENCE_FLOPS_PER_S), at least
    RESULT_FLOOR_BLOCKS blocks, capped at half the execution window (the chain's minimum window when the registry's
    default is taken; the default is no shorter). A fee check is paid only if committed before any result is
    public: the floor is its time to land."""
    if spec.result_floor is not None:
        return spec.result_floor
    if spec.verification_fee is None:
        return 0
    if spec.step_budget_ms:
        work = spec.steps * spec.step_budget_ms / 1000
    else:
        work = spec.steps * step_flops / REFERENCE_FLOPS_PER_S
    floor = max(RESULT_FLOOR_BASE + round(work), RESULT_FLOOR_BLOCKS * int(block_seconds))
    window = execution_window_for(spec) or min_windows(block_seconds)["execution"]
    return min(floor, window // 2)


def add_parallel(doc: dict, spec) -> None:
    """Write the options into a manifest document being built by plan_job."""
    modules = parse_modules(spec.modules)
    if modules:
        doc["modules"] = modules
        doc["module_plan"] = parse_plan(spec.module_plan, modules, len(doc["shards"]))
    if spec.outer_lr:
        doc["aggregation"]["outer"] = {"lr": spec.outer_lr, "momentum": spec.outer_momentum, "nesterov": True}
    if spec.step_budget_ms:
        doc["hardware"]["step_budget_ms"] = spec.step_budget_ms


def smallest_task_mb(manifest) -> int:
    """The memory (MB, rounded up) of the job's smallest task: the job-wide minimum posted on-chain, so a node too small
    for the whole model is still drawn, and declines the tasks it cannot hold (node/feasibility.py)."""
    from verity.engine.estimate import estimate_task_memory

    need = min(estimate_task_memory(manifest, i) for i in range(len(manifest.shards)))
    return max(1, math.ceil(need / (1 << 20)))


OPTION_OF = {"modules": "modules", "module_plan": "module_plan", "aggregation.outer": "outer_lr",
             "hardware.step_budget_ms": "step_budget_ms"}
