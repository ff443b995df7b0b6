"""`verity demo --scenario modules`: the digits MLP split into two modules trained by different nodes each round.

The model's first layer ("body") and its classifier ("head") are modules; shard tasks 0 and 2 train the body, 1 and
3 the head (round-robin), each with the other module loaded read-only and frozen. AGGREGATE merges each module from
the two tasks that trained it and the next round starts from the merged model. The cheater (solver-4, bit flip at
step 15) lands on whichever task it is drawn for, so it cheats on one module, and is caught like any other.
After the job this prints which node trained which module in each round, which module each dispute was about,
and the memory a module task needs against a whole-model task (engine/estimate.py).
"""
from __future__ import annotations

from rich.table import Table

MODULES = "body=layers.0.;head=layers.1."
JOB_ARGS = ["--shards", "4", "--rounds", "3", "--steps", "60", "-k", "10", "--replication", "2",
            "--payment", "1", "--stake", "10", "--lr", "0.01", "--modules", MODULES]
ACCURACY_GOAL = 0.80  # each module sees half the shards per round: it learns, more slowly than whole-model tasks


def plan_of(manifest) -> list[list[str]]:
    return [list(entry) for entry in manifest.module_plan]


def trainers_table(chain, job_id: int, manifest, names: dict) -> Table:
    """Round × shard task: the module(s) it trained and the nodes whose result was accepted (or still held it)."""
    from verity.chain.protocol import ReplicaStatus
    from verity.chain.views import read

    t = Table(title="who trained which module")
    t.add_column("round")
    for i, entry in enumerate(plan_of(manifest)):
        t.add_column(f"shard {i + 1}: {'+'.join(entry)}")
    job = read(chain, chain.jobs, "getJob", job_id)
    for r in range(int(job.currentRound) + 1):
        cells = []
        for i in range(len(manifest.shards)):
            try:
                tid = chain.call(chain.jobs.functions.taskOf(job_id, r, i))
            except Exception:  # noqa: BLE001 — a round not created yet
                cells.append("—")
                continue
            reps = read(chain, chain.jobs, "getReplicas", tid)
            accepted = [names.get(x.node, x.node[:10]) for x in reps if ReplicaStatus(x.status) == ReplicaStatus.ACCEPTED]
            cells.append(", ".join(accepted) or "—")
        t.add_row(str(r + 1), *cells)
    return t


def dispute_modules(led, chain, manifest) -> list[str]:
    """One line per dispute: which module the disputed task trained, who cheated, how it ended."""
    from verity.chain.protocol import TaskKind
    from verity.chain.views import read

    plan = plan_of(manifest)
    lines = []
    for did, d in sorted(led.disputes.items()):
        task = read(chain, chain.jobs, "getTask", d["task"])
        what = ("the AGGREGATE" if TaskKind(task.kind) == TaskKind.AGGREGATE
                else f"module {'+'.join(plan[int(task.index)])} (round {int(task.round) + 1}, shard {int(task.index) + 1})")
        lines.append(f"dispute {did} on {what}: {led.name(d['challenger'])} vs {led.name(d['defender'])} — "
                     f"{d.get('outcome', 'open')}")
    return lines


def memory_table(manifest) -> Table:
    """Estimated bytes of each module task against the same task training the whole model."""
    from verity.engine.estimate import estimate_task_memory
    from verity.engine.manifest import validate_manifest

    whole = validate_manifest(manifest.model_copy(update={"modules": None, "module_plan": None}))
    full = estimate_task_memory(whole, 0)
    t = Table(title="memory per task (engine/estimate.py)")
    for col in ("task", "trains", "estimated", "vs whole model"):
        t.add_column(col)
    t.add_row("whole model", "everything", f"{full / 1024:,.0f} KiB", "1.00×")
    seen = set()
    for i, entry in enumerate(plan_of(manifest)):
        key = tuple(entry)
        if key in seen:
            continue
        seen.add(key)
        need = estimate_task_memory(manifest, i)
        t.add_row(f"shard {i + 1}", "+".join(entry), f"{need / 1024:,.0f} KiB", f"{need / full:.2f}×")
    return t
