"""Run short portable-f32 tasks (MLP, CNN, GPT) in a fresh process; print one JSON line.

    python _portable_task.py WORKDIR --threads N [--arch mlp cnn gpt]

The caller sets ATEN_CPU_CAPABILITY (or not) in the environment. The profile
leaves the thread count alone, so what --threads sets is what the task runs
with. Output: {"capability", "threads", "tasks": {arch: {"trace": [hex], "root": hex}}}.
"""
import argparse
import json
from pathlib import Path

import torch

from verity.engine import initial_state, run_task
from verity.engine.reference import ARCHES, TASK, reference_manifest, reference_shard


def task(arch: str, workdir: Path) -> dict:
    """The reference task of verity.engine.reference (what `verity node doctor` runs), with its whole trace."""
    m = reference_manifest("portable-f32", arch)
    r = run_task(m, initial_state(m), reference_shard(arch, m), TASK, workdir / arch)
    return {"trace": [h.hex() for h in r.trace], "root": r.root.hex()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("workdir", type=Path)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--arch", nargs="+", default=list(ARCHES))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    tasks = {arch: task(arch, args.workdir) for arch in args.arch}
    print(json.dumps({"capability": torch.backends.cpu.get_cpu_capability(), "threads": torch.get_num_threads(),
                      "tasks": tasks}), flush=True)


if __name__ == "__main__":
    main()
