"""The demo's verdict on honest nodes (verity.demo.honest_conflicts), on a hand-built ledger."""
from __future__ import annotations

from collections import defaultdict
from types import SimpleNamespace

from verity import demo


def _ledger(disputes: dict, slashed: dict):
    names = {f"0x{i}": n for i, n in enumerate(["solver-1", "solver-2", "solver-4", "verifier-1"])}
    led = SimpleNamespace(names=names, disputes=disputes, slashed=defaultdict(int, slashed))
    led.name = lambda a: names.get(a, a)
    return led


def test_a_cheater_caught_is_no_honest_conflict():
    led = _ledger({1: {"challenger": "0x3", "defender": "0x2"}, 2: {"challenger": "0x2", "defender": "0x0"}},
                  {"0x2": 20 * 10**18})
    assert demo.honest_conflicts(led) == []


def test_a_dispute_between_honest_nodes_and_an_honest_slash_are_reported():
    led = _ledger({1: {"challenger": "0x3", "defender": "0x1"}}, {"0x1": 10 * 10**18, "0x2": 20 * 10**18})
    assert demo.honest_conflicts(led) == ["dispute 1: verifier-1 vs solver-2", "solver-2 slashed 10 VRT"]


def test_the_demo_job_is_portable_and_one_honest_node_runs_other_kernels():
    assert demo.PROFILE == "portable-f32" and demo.JOB_ARGS[-2:] == ["--profile", "portable-f32"]
    other = [n for n, env in demo.NODE_ENV.items() if env.get("ATEN_CPU_CAPABILITY") == "default"]
    assert other and not set(other) & demo.CHEATERS


def test_the_modules_scenario_posts_a_portable_module_job_with_its_own_goal():
    import pytest

    from verity import demo_modules
    from verity.errors import VerityError

    args, goal = demo.scenario_args("modules")
    assert args[args.index("--modules") + 1] == demo_modules.MODULES and args[-2:] == ["--profile", "portable-f32"]
    assert goal == demo_modules.ACCURACY_GOAL and demo.scenario_args("main") == (demo.JOB_ARGS, demo.ACCURACY_GOAL)
    with pytest.raises(VerityError, match="unknown demo scenario 'pipeline'"):
        demo.scenario_args("pipeline")


def test_the_modules_memory_table_compares_each_module_task_with_the_whole_model():
    from rich.console import Console

    from verity import demo_modules
    from verity.engine.estimate import estimate_task_memory
    from verity.engine.manifest import load_manifest
    from verity.submit.prepare import JobSpec, plan_job

    m = load_manifest(plan_job(JobSpec(modules=demo_modules.MODULES, shards=4)).manifest_bytes)
    console = Console(record=True, width=200)
    console.print(demo_modules.memory_table(m))
    rows = [" ".join(line.strip("│ ").split()) for line in console.export_text().splitlines() if "shard" in line]
    head = estimate_task_memory(m, 1)
    assert [r.split(" │ ")[:2] for r in rows] == [["shard 1", "body"], ["shard 2", "head"]]  # each module once
    assert rows[1].split(" │ ")[2] == f"{head / 1024:,.0f} KiB"
