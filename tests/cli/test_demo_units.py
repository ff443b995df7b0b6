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
