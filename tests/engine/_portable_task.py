"""Run short portable-f32 tasks (MLP, CNN, GPT) in a fresh process; print one JSON line.

    python _portable_task.py WORKDIR --threads N [--arch mlp cnn gpt]

The caller sets ATEN_CPU_CAPABILITY (or not) in the environment. The profile
leaves the thread count alone, so what --threads sets is what the task runs
with. Output: {"capability", "threads", "tasks": {arch: {"trace": [hex], "root": hex}}}.
"""
import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from engine_builders import build_manifest, char_shards, digits_shards  # noqa: E402

from verity.engine import TaskRef, initial_state, load_shard, run_task  # noqa: E402

# short schedules: enough steps that every op's backward and the optimizer state matter
SCHEDULES = {"mlp": (12, 4), "cnn": (6, 3), "gpt": (4, 2)}   # arch: (steps, checkpoint interval)


def task(arch: str, workdir: Path) -> dict:
    steps, k = SCHEDULES[arch]
    m = build_manifest(arch, determinism="portable-f32", steps_per_round=steps, checkpoint_interval=k,
                       optimizer={"name": "adamw" if arch == "gpt" else "adam", "lr": 0.003, "weight_decay": 0.01})
    if arch == "gpt":
        shard = load_shard(char_shards()["shard-000"], m.data)
    else:
        shard = load_shard(digits_shards(image=arch == "cnn")["shard-000"], m.data, samples=539)
    r = run_task(m, initial_state(m), shard, TaskRef(9, 0, 1), workdir / arch)
    return {"trace": [h.hex() for h in r.trace], "root": r.root.hex()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("workdir", type=Path)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--arch", nargs="+", default=["mlp", "cnn", "gpt"])
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    tasks = {arch: task(arch, args.workdir) for arch in args.arch}
    print(json.dumps({"capability": torch.backends.cpu.get_cpu_capability(), "threads": torch.get_num_threads(),
                      "tasks": tasks}), flush=True)


if __name__ == "__main__":
    main()
