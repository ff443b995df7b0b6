"""A node's time estimate against the time the task really takes, per model family (issue 24, jobs that fit).

    python scripts/bench_estimate.py [--profile portable-f32] [--threads 1] [--fresh] [--out bench/out/estimate.json]

Runs `verity node doctor`'s timing for the profile (cached like a node's; --fresh retimes), fits each family's
StepSpeed from it (node/feasibility.doctor_speeds), then for each workload below, the first being what a newcomer's
default job posts, trains one task exactly as a node does (`run_task`: per-step RNG, checkpoints hashed and written)
and compares the node's estimate (engine/estimate.estimate_task_seconds) with the task's measured wall time.
Each workload runs once to warm up and once measured. Prints a table and writes JSON:
{"profile", "threads", "speeds": {arch: {overhead_ms, flops_per_ms}}, "workloads": {name: {"estimate_s",
"measured_s", "ratio", "old_estimate_s", "old_ratio", ...}}}. `old_*`: the previous rule (the slowest reference
task's FLOPs per ms for every family), kept side by side.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from verity.engine import TaskRef, initial_state, load_manifest, load_shard, run_task
from verity.engine.datasets import char_corpus, digits, make_shards
from verity.engine.estimate import estimate_step_flops, estimate_task_seconds
from verity.engine.reference import reference_manifest
from verity.node.doctor import ResultCache, run_doctor
from verity.node.feasibility import doctor_speeds

CID = "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG"
GOAL = 0.30   # |estimate / measured - 1| for tasks of at least MIN_GOAL_S
MIN_GOAL_S = 1.0


def _text() -> str:
    from sklearn import datasets
    return "\n".join([datasets.load_digits().DESCR, datasets.load_iris().DESCR, datasets.load_wine().DESCR])


def workloads() -> dict:
    """name -> (model, x, y, task, steps, k, batch, vocab). The first of each family is the submit commands'
    default model for that data (submit.py `_default_model`, 40 steps, k 10, batch 32)."""
    g = torch.Generator().manual_seed(0)
    xd, yd = digits()
    xi, yi = digits(image=True)
    xt, yt, voc = char_corpus(_text(), 32)
    xt2, yt2, voc2 = char_corpus(_text(), 64)
    return {
        "mlp default (digits)": ({"arch": "mlp", "config": {"in_features": 64, "hidden": [64], "out_features": 10}},
                                 xd, yd, "classification", 40, 10, 32, None),
        "mlp 784-1024-1024": ({"arch": "mlp", "config": {"in_features": 784, "hidden": [1024, 1024], "out_features": 10}},
                              torch.rand(4096, 784, generator=g), torch.randint(0, 10, (4096,), generator=g),
                              "classification", 40, 10, 64, None),
        "cnn default (digits)": ({"arch": "cnn", "config": {"in_channels": 1, "height": 8, "width": 8, "channels": [8, 16],
                                                            "num_classes": 10}}, xi, yi, "classification", 40, 10, 32, None),
        "cnn 28x28 16-32": ({"arch": "cnn", "config": {"in_channels": 1, "height": 28, "width": 28, "channels": [16, 32],
                                                       "num_classes": 10}},
                            torch.rand(2048, 1, 28, 28, generator=g), torch.randint(0, 10, (2048,), generator=g),
                            "classification", 40, 10, 32, None),
        "gpt default (own text)": ({"arch": "gpt", "config": {"vocab_size": len(voc), "block_size": 32, "n_layer": 2,
                                                              "n_head": 2, "n_embd": 64}}, xt, yt, "lm", 40, 10, 32, voc),
        "gpt 4x128, block 64": ({"arch": "gpt", "config": {"vocab_size": len(voc2), "block_size": 64, "n_layer": 4,
                                                           "n_head": 4, "n_embd": 128}}, xt2, yt2, "lm", 20, 10, 16, voc2),
        "resnet default (digits)": ({"arch": "resnet", "config": {"in_channels": 1, "height": 8, "width": 8,
                                                                  "widths": [16, 32], "blocks": 1, "groups": 8,
                                                                  "num_classes": 10}}, xi, yi, "classification", 40, 10,
                                    32, None),
        "resnet 28x28 16-32-64": ({"arch": "resnet", "config": {"in_channels": 1, "height": 28, "width": 28,
                                                                "widths": [16, 32, 64], "blocks": 1, "groups": 8,
                                                                "num_classes": 10}},
                                  torch.rand(1024, 1, 28, 28, generator=g), torch.randint(0, 10, (1024,), generator=g),
                                  "classification", 20, 10, 16, None),
        "llama default (own text)": ({"arch": "decoder", "config": {"vocab_size": len(voc), "block_size": 32,
                                                                    "n_layer": 2, "n_head": 4, "n_kv_head": 2,
                                                                    "n_embd": 64, "intermediate_size": 176}},
                                     xt, yt, "lm", 40, 10, 32, voc),
        "gpt2-shaped 4x128, block 64": ({"arch": "decoder", "config": {
            "vocab_size": len(voc2), "block_size": 64, "n_layer": 4, "n_head": 4, "n_embd": 128, "positions": "learned",
            "norm": "layernorm", "activation": "gelu_tanh", "bias": True, "tie_embeddings": True}},
            xt2, yt2, "lm", 20, 10, 16, voc2),
    }


def build(profile: str, model, x, y, task, steps, k, batch, vocab):
    shards = make_shards(x, y, task=task, n_shards=4, seed=0, vocab=vocab)
    data = {"task": task, "x_shape": list(x.shape[1:]), "x_dtype": str(x.dtype).removeprefix("torch.")}
    if task == "classification":
        data["num_classes"] = int(y.max()) + 1
    else:
        data.update({"y_shape": list(y.shape[1:]), "vocab_size": len(vocab)})
    doc = {"schema_version": 1, "model": model, "init": {"seed": 1}, "data": data,
           "shards": [{"cid": CID, "samples": 1}], "optimizer": {"name": "adam", "lr": 1e-3},
           "batch_size": batch, "steps_per_round": steps, "rounds": 1, "checkpoint_interval": k,
           "determinism": profile}
    probe = load_manifest(json.dumps(doc).encode())
    samples = len(load_shard(shards["shard-000"], probe.data))
    doc["shards"] = [{"cid": CID, "samples": samples}]
    m = load_manifest(json.dumps(doc).encode())
    return m, load_shard(shards["shard-000"], m.data, samples=samples)


def measure(m, shard) -> float:
    with tempfile.TemporaryDirectory(prefix="verity-bench-") as tmp:
        start = time.perf_counter()
        run_task(m, initial_state(m), shard, TaskRef(1, 0, 0), Path(tmp))
        return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="portable-f32")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--fresh", action="store_true", help="retime the doctor's tasks even when cached")
    ap.add_argument("--out", type=Path, default=Path("bench/out/estimate.json"))
    args = ap.parse_args()
    console = Console()
    torch.set_num_threads(args.threads)
    checks = run_doctor([args.profile], threads=args.threads, cache=ResultCache(), fresh=args.fresh)
    if not checks[args.profile].ok:
        raise SystemExit(f"this machine does not serve {args.profile}: {checks[args.profile].reason}")
    speeds = doctor_speeds(checks)[args.profile]
    old_rate = min(estimate_step_flops(reference_manifest(args.profile, a), 0) / t.ms_per_step
                   for a, t in checks[args.profile].tasks.items())
    rows = {}
    for name, w in workloads().items():
        m, shard = build(args.profile, *w)
        torch.set_num_threads(args.threads)
        measure(m, shard)                 # warm-up: allocator, portable kernels, page cache
        measured = measure(m, shard)
        est = estimate_task_seconds(m, 0, speeds)
        old = estimate_step_flops(m, 0) * m.steps_per_round / old_rate / 1000
        rows[name] = {"arch": m.model.arch, "steps": m.steps_per_round, "flops_per_step": estimate_step_flops(m, 0),
                      "measured_s": round(measured, 3), "estimate_s": round(est, 3), "ratio": round(est / measured, 3),
                      "old_estimate_s": round(old, 3), "old_ratio": round(old / measured, 3),
                      "within_goal": abs(est / measured - 1) <= GOAL if measured >= MIN_GOAL_S else None}
        console.print(f"{name}: measured {measured:.2f} s, estimate {est:.2f} s ({est / measured:.2f}x), "
                      f"old rule {old:.2f} s ({old / measured:.1f}x)")
    table = Table(title=f"task time: estimate vs measured ({args.profile}, {args.threads} thread(s))")
    for col in ("workload", "measured s", "estimate s", "estimate/measured", "old rule s", "old/measured"):
        table.add_column(col, justify="left" if col == "workload" else "right")
    for name, r in rows.items():
        table.add_row(name, f"{r['measured_s']:.2f}", f"{r['estimate_s']:.2f}", f"{r['ratio']:.2f}",
                      f"{r['old_estimate_s']:.2f}", f"{r['old_ratio']:.1f}")
    console.print(table)
    judged = [r for r in rows.values() if r["within_goal"] is not None]
    console.print(f"within ±{GOAL:.0%} of the measured time: {sum(r['within_goal'] for r in judged)} of {len(judged)} "
                  f"tasks of at least {MIN_GOAL_S:g} s")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"profile": args.profile, "threads": args.threads,
                                    "speeds": {a: s.to_json() for a, s in speeds.items()},
                                    "goal": GOAL, "workloads": rows}, indent=2))
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
