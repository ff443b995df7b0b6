"""Module-parallel memory and the outer optimizer's convergence, measured (issue 11).

    python scripts/bench_modules.py --memory [--steps 10] [--repeats 2] [--out bench/out/modules.json]
    python scripts/bench_modules.py --outer [--rounds 12] [--local-steps 20] [--outer-lr 0.7 1.0]
                                    [--targets 2.6 2.4 2.3] [--out bench/out/outer.json]

--memory: one TRAIN task of a char GPT (6 layers, n_embd 256, block 64, batch 16, adamw,
cpu-f32-strict, one thread) training the whole model, then each module of a four-module plan
(embed = wte.+wpe., lower = h.0-2, upper = h.3-5, head = ln_f.+lm_head.). Each configuration runs
in a fresh subprocess (this script with a hidden flag), so one task's allocator high-water mark
never hides another's: the child builds manifest, shard and input state, records its RSS, runs
run_task, and reports ru_maxrss (peak) and peak - setup (what the task itself added). It also
reports torch's own view of the task's tensors from one extra step: saved-for-backward bytes
(autograd's saved_tensors_hooks, parameters excluded), gradient and optimizer-state bytes; and
estimate.estimate_task_memory. Configurations alternate order over repeats; the smallest of each
figure is kept. Writes bench/out/modules.json.

--outer: convergence of a text GPT job (every sklearn dataset description, about 43 KB of
English, every 8th 1 KB chunk held out for evaluation): S = 4 shards, R rounds of H local steps,
each round run as nodes run it (run_task per shard from the round input, run_aggregate on the
finals' checkpoint bytes, its state the next round input), once with the plain weighted mean and
once per outer lr with aggregation.outer (momentum 0.9, Nesterov: DiLoCo's values). Same init,
shards and batch seeds in every variant. Held-out loss after each round; rounds each variant
needs to reach the mean's final loss and fixed thresholds. Writes bench/out/outer.json.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from verity.engine import TaskRef, evaluate, initial_state, load_manifest, load_shard, run_aggregate, run_task
from verity.engine.datasets import make_shards
from verity.engine.determinism import environment_fingerprint
from verity.engine.estimate import estimate_task_memory
from verity.engine.manifest import DataSpec
from verity.engine.modules import trained_params
from verity.engine.trainer import Trainer

CID = "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG"   # well-formed; no shard is ever fetched
MB = 2**20
console = Console(width=160)   # tables stay whole in logs and pipes

MEMORY_MODEL = {"block_size": 64, "n_layer": 6, "n_head": 4, "n_embd": 256}
MODULES = [{"name": "embed", "params": ["wte.", "wpe."]},
           {"name": "lower", "params": ["h.0.", "h.1.", "h.2."]},
           {"name": "upper", "params": ["h.3.", "h.4.", "h.5."]},
           {"name": "head", "params": ["ln_f.", "lm_head."]}]
OUTER_MODEL = {"block_size": 64, "n_layer": 2, "n_head": 4, "n_embd": 128}


# ------------------------------------------------------------------ data
def corpus() -> str:
    """Every dataset description bundled with sklearn (no download), in name order: real prose
    that varies, unlike a repeated sentence, and fixed for a given sklearn version."""
    files = sorted((p for p in resources.files("sklearn.datasets.descr").iterdir() if p.name.endswith(".rst")),
                   key=lambda p: p.name)
    return "\n".join(p.read_text(encoding="utf-8") for p in files)


def windows(ids: torch.Tensor, block: int, stride: int) -> tuple[torch.Tensor, torch.Tensor]:
    starts = range(0, len(ids) - block, stride)
    return (torch.stack([ids[i:i + block] for i in starts]), torch.stack([ids[i + 1:i + block + 1] for i in starts]))


def split_corpus(text: str, block: int, stride: int, chunk: int = 1024, every: int = 8):
    """(train x, y, eval x, y, vocab): every `every`-th `chunk` characters are held out whole, so no
    eval window overlaps a training window; training windows never cross a held-out chunk."""
    vocab = "".join(sorted(set(text)))
    ids = torch.tensor([vocab.index(c) for c in text], dtype=torch.int64)
    train, held = [], []
    seg_start = 0
    for j, start in enumerate(range(0, len(ids), chunk)):
        if j % every == every - 1:
            if start > seg_start:
                train.append(ids[seg_start:start])
            held.append(ids[start:start + chunk])
            seg_start = start + chunk
    train.append(ids[seg_start:])
    tr = [windows(s, block, stride) for s in train if len(s) > block]
    ev = [windows(s, block, block // 2) for s in held if len(s) > block]
    cat = lambda parts, i: torch.cat([p[i] for p in parts])  # noqa: E731
    return cat(tr, 0), cat(tr, 1), cat(ev, 0), cat(ev, 1), vocab


def gpt_doc(model: dict, vocab: str, samples: list[int], *, batch: int, steps: int, k: int, rounds: int,
            lr: float, modules: bool = False, outer: dict | None = None) -> dict:
    """A manifest document for a char GPT over shards of `samples` windows each."""
    doc = {"schema_version": 1, "name": "bench-modules", "init": {"seed": 1},
           "model": {"arch": "gpt", "config": dict(model, vocab_size=len(vocab))},
           "data": {"task": "lm", "x_shape": [model["block_size"]], "x_dtype": "int64",
                    "y_shape": [model["block_size"]], "vocab_size": len(vocab)},
           "shards": [{"cid": CID, "samples": n} for n in samples],
           "optimizer": {"name": "adamw", "lr": lr, "weight_decay": 0.01}, "batch_size": batch,
           "steps_per_round": steps, "rounds": rounds, "checkpoint_interval": k, "determinism": "cpu-f32-strict"}
    if modules:
        doc["modules"] = MODULES
        doc["module_plan"] = [[m["name"]] for m in MODULES]
    if outer is not None:
        doc["aggregation"] = {"rule": "mean", "outer": outer}
    return doc


# ------------------------------------------------------------------ --memory
def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _maxrss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024   # Linux reports KiB


def _torch_view(m, shard, state, index: int) -> dict:
    """Bytes of one training step as torch sees them: tensors autograd saves for backward (parameters
    excluded, storages counted once), then the gradients and optimizer state the step leaves."""
    t = Trainer(m, shard, TaskRef(1, 0, index))
    t.load(state)
    params = {p.untyped_storage().data_ptr() for p in t.model.parameters()}
    saved: dict[int, int] = {}

    def pack(x: torch.Tensor):
        s = x.untyped_storage()
        if s.data_ptr() not in params:
            saved[s.data_ptr()] = s.nbytes()
        return x

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
        t.train_step()
    grads = sum(p.grad.nbytes for p in t.model.parameters() if p.grad is not None)
    optim = sum(v.nbytes for st in t.opt.state.values() for v in st.values() if isinstance(v, torch.Tensor))
    return {"saved_for_backward_mb": round(sum(saved.values()) / MB, 1), "grads_mb": round(grads / MB, 1),
            "optimizer_mb": round(optim / MB, 1)}


def memory_child(spec: dict) -> dict:
    """One configuration in this (fresh) process; see the module doc."""
    from verity.engine.datasets import char_corpus
    x, y, vocab = char_corpus(corpus(), MEMORY_MODEL["block_size"], 16)
    n = len(MODULES)
    m = load_manifest(json.dumps(gpt_doc(MEMORY_MODEL, vocab, [len(x)] * n, batch=spec["batch"],
                                         steps=spec["steps"], k=spec["k"], rounds=1, lr=1e-3,
                                         modules=spec["index"] is not None)).encode())
    shard = load_shard(make_shards(x, y, task="lm", n_shards=1, vocab=vocab)["shard-000"], m.data)
    s0 = initial_state(m)
    index = spec["index"] or 0
    gc.collect()
    setup_rss, setup_peak = _rss(), _maxrss()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as d:
        run_task(m, s0, shard, TaskRef(1, 0, index), Path(d))
    wall = time.perf_counter() - t0
    peak = _maxrss()
    trained = trained_params(m, spec["index"])
    out = {"vocab_size": len(vocab), "trained_params": sum(s0.tensors[f"model/{p}"].numel() for p in trained),
           "trained_tensors": len(trained),
           "setup_rss_mb": round(setup_rss / MB, 1), "setup_peak_mb": round(setup_peak / MB, 1),
           "peak_rss_mb": round(peak / MB, 1), "train_delta_mb": round((peak - setup_rss) / MB, 1),
           "estimate_mb": round(estimate_task_memory(m, index) / MB, 1), "task_s": round(wall, 2)}
    out.update(_torch_view(m, shard, s0, index))
    return out


def bench_memory(args) -> dict:
    configs = {"whole": None, **{mod["name"]: i for i, mod in enumerate(MODULES)}}
    runs: dict[str, list[dict]] = {name: [] for name in configs}
    for rep in range(args.repeats):
        order = list(configs) if rep % 2 == 0 else list(reversed(configs))
        for name in order:
            spec = {"index": configs[name], "steps": args.steps, "k": args.k, "batch": args.batch}
            p = subprocess.run([sys.executable, __file__, "--_memory-child", json.dumps(spec)],
                               capture_output=True, text=True, check=False)
            if p.returncode != 0:
                raise RuntimeError(f"memory child {name} failed ({p.returncode}):\n{p.stderr[-4000:]}")
            runs[name].append(json.loads(p.stdout.strip().splitlines()[-1]))
            console.print(name, runs[name][-1])
    tasks = {}
    for name, rs in runs.items():
        best = dict(rs[0])
        for key in ("peak_rss_mb", "train_delta_mb", "setup_rss_mb", "task_s"):
            best[key] = min(r[key] for r in rs)
        best["all_train_delta_mb"] = [r["train_delta_mb"] for r in rs]
        tasks[name] = best
    w = tasks["whole"]
    ratios = {name: {k: round(t[k] / w[k], 3) for k in
                     ("train_delta_mb", "peak_rss_mb", "estimate_mb", "saved_for_backward_mb", "trained_params")}
              for name, t in tasks.items()}
    model = dict(MEMORY_MODEL, vocab_size=tasks["whole"]["vocab_size"], batch_size=args.batch, steps=args.steps,
                 checkpoint_interval=args.k,
                 optimizer="adamw", determinism="cpu-f32-strict", threads=1,
                 params=tasks["whole"]["trained_params"])
    return {"model": model, "modules": MODULES, "repeats": args.repeats, "tasks": tasks,
            "ratio_vs_whole": ratios, "env": environment_fingerprint()}


def show_memory(result: dict) -> str:
    cols = ["task", "trained_params", "peak_rss_mb", "train_delta_mb", "saved_for_backward_mb", "grads_mb",
            "optimizer_mb", "estimate_mb", "delta_ratio", "estimate_ratio"]
    rows = []
    for name, t in result["tasks"].items():
        r = result["ratio_vs_whole"][name]
        rows.append([name] + [str(t[c]) for c in cols[1:8]] + [str(r["train_delta_mb"]), str(r["estimate_mb"])])
    m = result["model"]
    title = (f"TRAIN task memory, whole model vs one module (gpt {m['n_layer']}x{m['n_embd']}, {m['params']:,} params, "
             f"batch {m['batch_size']}x{m['block_size']}, {m['steps']} steps, adamw, 1 thread)")
    return _table(title, cols, rows)


# ------------------------------------------------------------------ --outer
def _variants(lrs: list[float]) -> dict[str, dict | None]:
    out: dict[str, dict | None] = {"mean": None}
    for i, lr in enumerate(lrs):
        out["outer" if i == 0 else f"outer_lr{lr:g}"] = {"lr": lr, "momentum": 0.9, "nesterov": True}
    return out


def run_job(m, shards, eval_shard, workdir: Path, job: int) -> list[float]:
    """Held-out loss of the round input of every round 0..R (R = m.rounds), training as nodes do."""
    state = initial_state(m)
    losses = [evaluate(m, state, eval_shard).loss]
    for r in range(m.rounds):
        finals, hashes = [], []
        for i, shard in enumerate(shards):
            d = workdir / f"r{r}-t{i}"
            res = run_task(m, state, shard, TaskRef(job, r, i), d)
            finals.append(res.checkpoints[-1].read_bytes())
            hashes.append(res.final_hash)
            for f in d.iterdir():   # keep the disk small: only the final's bytes are needed
                f.unlink()
            d.rmdir()
        state = run_aggregate(m, finals, hashes, round_input=state, round_input_hash=state.hash).state
        losses.append(evaluate(m, state, eval_shard).loss)
        console.print(f"  round {r + 1}: held-out loss {losses[-1]:.4f}")
    return losses


def rounds_to(losses: list[float], target: float) -> int | None:
    return next((r for r, v in enumerate(losses) if v <= target), None)


def bench_outer(args) -> dict:
    tx, ty, ex, ey, vocab = split_corpus(corpus(), OUTER_MODEL["block_size"], args.stride)
    parts = make_shards(tx, ty, task="lm", n_shards=args.shards, seed=0, vocab=vocab)
    names = sorted(parts)
    evb = make_shards(ex, ey, task="lm", n_shards=1, seed=0, vocab=vocab)["shard-000"]
    spec = DataSpec(task="lm", x_shape=[tx.shape[1]], x_dtype="int64", y_shape=[tx.shape[1]], vocab_size=len(vocab))
    samples = [len(load_shard(parts[n], spec)) for n in names]
    curves, walls = {}, {}
    for name, outer in _variants(args.outer_lr).items():
        doc = gpt_doc(OUTER_MODEL, vocab, samples, batch=args.batch, steps=args.local_steps,
                      k=args.local_steps, rounds=args.rounds, lr=args.lr, outer=outer)
        m = load_manifest(json.dumps(doc).encode())
        shards = [load_shard(parts[n], m.data, samples=k) for n, k in zip(names, samples)]
        eval_shard = load_shard(evb, m.data)
        console.print(f"[bold]{name}[/bold] outer={outer}")
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as d:
            curves[name] = run_job(m, shards, eval_shard, Path(d), job=11)
        walls[name] = round(time.perf_counter() - t0, 1)
    final_mean = curves["mean"][-1]
    targets = {"mean_final": final_mean, **{f"{t:g}": t for t in args.targets}}
    rows = [{"round": r, **{f"{n}_loss": round(c[r], 4) for n, c in curves.items()}}
            for r in range(args.rounds + 1)]
    return {"config": {"model": OUTER_MODEL, "vocab": len(vocab), "params": sum(
                t.numel() for t in initial_state(m).tensors.values()), "shards": args.shards,
                "shard_samples": [len(s) for s in shards], "eval_samples": len(eval_shard),
                "rounds": args.rounds, "local_steps": args.local_steps, "batch_size": args.batch,
                "inner": {"name": "adamw", "lr": args.lr, "weight_decay": 0.01},
                "variants": _variants(args.outer_lr), "stride": args.stride, "corpus_chars": len(corpus()),
                "determinism": "cpu-f32-strict", "wall_s": walls},
            "rounds": rows,
            # label -> {"loss": the target, variant: first round at or below it (None: never)}
            "rounds_to_target": {label: {"loss": round(t, 4), **{n: rounds_to(c, t) for n, c in curves.items()}}
                                 for label, t in targets.items()},
            "env": environment_fingerprint()}


def show_outer(result: dict) -> str:
    variants = list(result["config"]["variants"])
    cols = ["round"] + [f"{v}_loss" for v in variants]
    md = _table("held-out loss after each round (round 0 = init)", cols,
                [[str(r[c]) for c in cols] for r in result["rounds"]])
    md2 = _table("rounds to reach a held-out loss (None: not within the run)", ["target", "loss"] + variants,
                 [[label, str(v["loss"])] + [str(v[n]) for n in variants]
                  for label, v in result["rounds_to_target"].items()])
    return md + "\n\n" + md2


# ------------------------------------------------------------------ output
def _table(title: str, cols: list[str], rows: list[list[str]]) -> str:
    """Print a rich table and return the same as markdown (for docs)."""
    table = Table(title=title)
    for c in cols:
        table.add_column(c, justify="right")
    md = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in rows:
        table.add_row(*row)
        md.append("| " + " | ".join(row) + " |")
    console.print(table)
    return "\n".join(md)


def _write(path: Path, result: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1) + "\n")
    console.print(f"wrote {path}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--memory", action="store_true", help="peak memory of whole-model vs module TRAIN tasks")
    mode.add_argument("--outer", action="store_true", help="rounds to a held-out loss: plain mean vs outer step")
    mode.add_argument("--_memory-child", dest="child", help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=None, help="JSON output (default bench/out/modules.json|outer.json)")
    ap.add_argument("--steps", type=int, default=10, help="--memory: training steps per task")
    ap.add_argument("--k", type=int, default=5, help="--memory: checkpoint interval")
    ap.add_argument("--batch", type=int, default=16, help="batch size (sequences)")
    ap.add_argument("--repeats", type=int, default=2, help="--memory: runs per configuration (min kept)")
    ap.add_argument("--shards", type=int, default=4, help="--outer: shard tasks per round (S)")
    ap.add_argument("--rounds", type=int, default=12, help="--outer: rounds (R)")
    ap.add_argument("--local-steps", type=int, default=20, help="--outer: steps per round (H)")
    ap.add_argument("--lr", type=float, default=3e-3, help="--outer: inner adamw lr")
    ap.add_argument("--stride", type=int, default=16, help="--outer: training window stride (characters)")
    ap.add_argument("--outer-lr", type=float, nargs="+", default=[0.7, 1.0],
                    help="--outer: outer lrs to run (the first is reported as 'outer')")
    ap.add_argument("--targets", type=float, nargs="*", default=[2.6, 2.4, 2.3], help="--outer: fixed loss thresholds")
    args = ap.parse_args()
    if args.child is not None:
        print(json.dumps(memory_child(json.loads(args.child))))
        return 0
    t0 = time.perf_counter()
    if args.memory:
        result = bench_memory(args)
        result["markdown"] = show_memory(result)
    else:
        result = bench_outer(args)
        result["markdown"] = show_outer(result)
    result["wall_s"] = round(time.perf_counter() - t0, 1)
    console.print(f"wall time {result['wall_s']} s")
    _write(args.out or Path("bench/out/modules.json" if args.memory else "bench/out/outer.json"), result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
