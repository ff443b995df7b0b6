"""Engine overhead: a task run by the engine vs a plain torch loop of the same steps.

    python scripts/bench_engine.py [--steps 1000] [--device cpu|cuda] [--ipfs /ip4/127.0.0.1/tcp/5001/http]
    python scripts/bench_engine.py --repro-check [--device cuda]
    python scripts/bench_engine.py --profiles [--profile-steps 20] [--repeats 2] [--device cpu|cuda]
                                   [--portable-threads 2]

For a ~2M-parameter MLP and the small transformer, and k in {10, 100, 1000},
runs the plain loop and the engine (per-step RNG, hashing, a checkpoint every
k steps written with fsync, and, with --ipfs, each checkpoint uploaded through
verity.storage from the checkpoint callback), alternating, and reports wall
time, the ratio engine / plain and peak RSS. Writes bench/out/engine.json.
--profiles instead times Trainer.train_step for each family (an MLP, a CNN, a
GroupNorm ResNet, the nanoGPT decoder, and the decoder family in Llama and GPT-2
shapes) under the native profile and under portable-f32, one thread, and writes
bench/out/profiles.json: {"mlp"|"cnn"|"resnet"|"gpt"|"llama"|"gpt2": {"native_ms_per_step",
"portable_ms_per_step", "ratio", the same as thread CPU time ("..._cpu_ms_per_step",
"cpu_ratio"), samples or tokens per second of each, the measuring process's peak RSS and
the nodes' memory estimate of the task, ...}}.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from verity.engine import TaskRef, initial_state, load_manifest, load_shard, run_task
from verity.engine.data import ShardMeta, shard_bytes
from verity.engine.datasets import char_corpus
from verity.engine.determinism import apply_profile, environment_fingerprint
from verity.engine.trainer import Trainer, loss_fn

CID = "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG"
console = Console()


def _text() -> str:
    from sklearn import datasets
    parts = [datasets.load_digits().DESCR, datasets.load_iris().DESCR, datasets.load_wine().DESCR,
             datasets.load_breast_cancer().DESCR, datasets.load_diabetes().DESCR]
    return "\n".join(parts)


def workloads(steps: int, k: int, device: str) -> dict:
    """name -> (manifest, shard) for the two benchmark models."""
    profile = "cuda-f32-strict" if device == "cuda" else "cpu-f32-strict"
    common = {"schema_version": 1, "init": {"seed": 1}, "optimizer": {"name": "adam", "lr": 1e-3},
              "steps_per_round": steps, "rounds": 1, "checkpoint_interval": k, "determinism": profile,
              "hardware": {"device_class": device, "min_memory_mb": 1024}}
    g = torch.Generator().manual_seed(0)
    x = torch.rand(4096, 784, generator=g)
    y = torch.randint(0, 10, (4096,), generator=g)
    mlp_meta = ShardMeta(task="classification", samples=4096, x_dtype="float32", x_shape=[784], num_classes=10)
    mlp = dict(common, model={"arch": "mlp", "config": {"in_features": 784, "hidden": [1024, 1024], "out_features": 10}},
               data=mlp_meta.spec().model_dump(mode="json"), shards=[{"cid": CID, "samples": 4096}], batch_size=64)
    tx, ty, vocab = char_corpus(_text(), 64, 16)
    lm_meta = ShardMeta(task="lm", samples=len(tx), x_dtype="int64", x_shape=[64], y_shape=[64], vocab=vocab)
    gpt = dict(common, model={"arch": "gpt", "config": {"vocab_size": len(vocab), "block_size": 64, "n_layer": 4,
                                                        "n_head": 4, "n_embd": 128}},
               data=lm_meta.spec().model_dump(mode="json"), shards=[{"cid": CID, "samples": len(tx)}], batch_size=8)
    out = {}
    for name, doc, (sx, sy, meta) in (("mlp-2M", mlp, (x, y, mlp_meta)), ("gpt-small", gpt, (tx, ty, lm_meta))):
        m = load_manifest(json.dumps(doc).encode())
        out[name] = (m, load_shard(shard_bytes(sx, sy, meta), m.data))
    return out


class PeakRSS:
    """Samples this process's resident set size every 5 ms while active."""

    def __enter__(self):
        self.page = os.sysconf("SC_PAGE_SIZE")
        self.start = self.peak = self._rss()
        self.stop = threading.Event()
        self.t = threading.Thread(target=self._loop, daemon=True)
        self.t.start()
        return self

    def _rss(self) -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * self.page

    def _loop(self):
        while not self.stop.wait(0.005):
            self.peak = max(self.peak, self._rss())

    def __exit__(self, *exc):
        self.stop.set()
        self.t.join()
        self.peak = max(self.peak, self._rss())


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def plain_loop(m, shard, device: str) -> float:
    """What a researcher would write: one generator, no hashing, no checkpoints."""
    t = Trainer(m, shard, TaskRef(1, 0, 0), device)  # same model, optimizer, data on device
    t.load(initial_state(m))
    g = torch.Generator().manual_seed(0)
    _sync(device)
    start = time.perf_counter()
    for _ in range(m.steps_per_round):
        idx = torch.randint(len(t.x), (m.batch_size,), generator=g).to(t.device)
        loss = loss_fn(t.model(t.x[idx]), t.y[idx])
        t.opt.zero_grad(set_to_none=True)
        loss.backward()
        t.opt.step()
    _sync(device)
    return time.perf_counter() - start


def engine_run(m, shard, workdir: Path, storage) -> tuple[float, list, int]:
    s0 = initial_state(m)
    uploads = []

    def upload(c):
        if storage is not None:
            uploads.append(storage.put_file(c.path))

    _sync(m.hardware.device_class)
    start = time.perf_counter()
    r = run_task(m, s0, shard, TaskRef(1, 0, 0), workdir, on_checkpoint=upload)
    _sync(m.hardware.device_class)
    return time.perf_counter() - start, r, len(uploads)


def open_storage(addr: str | None):
    if addr is None:
        return None, "no --ipfs: checkpoints not uploaded"
    try:
        from verity.storage import Storage
    except ImportError:
        return None, "verity.storage absent: upload skipped"
    s = Storage(addr)
    if not s.is_up():
        return None, f"no IPFS node answers at {addr}: upload skipped"
    return s, f"uploads through verity.storage to {addr}"


def bench(args) -> dict:
    storage, note = open_storage(args.ipfs)
    console.print(f"[dim]{note}[/dim]")
    rows = []
    for k in args.k:
        for name, (m, shard) in workloads(max(args.steps, k), k, args.device).items():
            apply_profile(m.determinism)
            if args.warmup and k == args.k[0]:
                plain_loop(m, shard, args.device)
            plains, engines, p_peak, e_peak, e_growth = [], [], 0, 0, 0
            for rep in range(args.repeats):  # alternate the order; keep the fastest of each (least disturbed)
                for which in (("plain", "engine") if rep % 2 == 0 else ("engine", "plain")):
                    if which == "plain":
                        with PeakRSS() as mem:
                            plains.append(plain_loop(m, shard, args.device))
                        p_peak = max(p_peak, mem.peak)
                    else:
                        with tempfile.TemporaryDirectory() as d, PeakRSS() as mem:
                            t, r, n_up = engine_run(m, shard, Path(d), storage)
                        engines.append(t)
                        timings = r.timings
                        e_peak, e_growth = max(e_peak, mem.peak), max(e_growth, mem.peak - mem.start)
            plain, eng = min(plains), min(engines)
            n_params = sum(t.numel() for t in initial_state(m).tensors.values())
            rows.append({"model": name, "params": n_params, "k": k, "steps": m.steps_per_round,
                         "checkpoints": len(r.trace), "uploads": n_up, "repeats": args.repeats,
                         "plain_s": round(plain, 3), "engine_s": round(eng, 3), "ratio": round(eng / plain, 4),
                         "plain_all_s": [round(x, 3) for x in plains], "engine_all_s": [round(x, 3) for x in engines],
                         "plain_peak_rss_mb": round(p_peak / 2**20, 1),
                         "engine_peak_rss_mb": round(e_peak / 2**20, 1),
                         "engine_rss_growth_mb": round(e_growth / 2**20, 1),
                         # engine work on the training thread, from the last engine run (noise-free view)
                         "engine_thread_overhead": round((timings["snapshot"] + timings["blocked"]) / timings["train"], 4),
                         "timings_s": timings})
            console.print(rows[-1])
    return {"device": args.device, "note": note, "env": environment_fingerprint(),
            "host": {"machine": platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version()},
            "rows": rows}


def show(result: dict) -> str:
    table = Table(title=f"engine vs plain torch loop ({result['device']}, {result['note']})")
    cols = ["model", "params", "k", "steps", "checkpoints", "plain_s", "engine_s", "ratio",
            "engine_thread_overhead", "engine_peak_rss_mb"]
    for c in cols:
        table.add_column(c, justify="right")
    md = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in result["rows"]:
        table.add_row(*[str(r[c]) for c in cols])
        md.append("| " + " | ".join(str(r[c]) for c in cols) + " |")
    console.print(table)
    return "\n".join(md)


def profile_workloads(device: str) -> dict:
    """name -> (doc without "determinism"/"hardware", shard bytes) for the --profiles comparison:
    the MLP and GPT of `workloads` and a CNN on 28x28 images."""
    g = torch.Generator().manual_seed(0)
    x, y = torch.rand(2048, 784, generator=g), torch.randint(0, 10, (2048,), generator=g)
    common = {"schema_version": 1, "init": {"seed": 1}, "optimizer": {"name": "adam", "lr": 1e-3},
              "steps_per_round": 1, "rounds": 1, "checkpoint_interval": 1}
    out = {}
    mlp_meta = ShardMeta(task="classification", samples=2048, x_dtype="float32", x_shape=[784], num_classes=10)
    out["mlp"] = (dict(common, model={"arch": "mlp", "config": {"in_features": 784, "hidden": [1024, 1024],
                                                                "out_features": 10}},
                       data=mlp_meta.spec().model_dump(mode="json"), shards=[{"cid": CID, "samples": 2048}],
                       batch_size=64), shard_bytes(x, y, mlp_meta))
    img = x.reshape(2048, 1, 28, 28)
    cnn_meta = ShardMeta(task="classification", samples=2048, x_dtype="float32", x_shape=[1, 28, 28], num_classes=10)
    out["cnn"] = (dict(common, model={"arch": "cnn", "config": {"in_channels": 1, "height": 28, "width": 28,
                                                                "channels": [16, 32], "num_classes": 10}},
                       data=cnn_meta.spec().model_dump(mode="json"), shards=[{"cid": CID, "samples": 2048}],
                       batch_size=64), shard_bytes(img, y, cnn_meta))
    tx, ty, vocab = char_corpus(_text(), 64, 16)
    lm_meta = ShardMeta(task="lm", samples=len(tx), x_dtype="int64", x_shape=[64], y_shape=[64], vocab=vocab)
    out["gpt"] = (dict(common, model={"arch": "gpt", "config": {"vocab_size": len(vocab), "block_size": 64,
                                                                "n_layer": 4, "n_head": 4, "n_embd": 128}},
                       data=lm_meta.spec().model_dump(mode="json"), shards=[{"cid": CID, "samples": len(tx)}],
                       batch_size=8), shard_bytes(tx, ty, lm_meta))
    # the decoder family in its two shapes, at the GPT's size: Llama (RoPE, RMSNorm, SwiGLU, 2 kv heads) and GPT-2
    # (learned positions, LayerNorm, tanh GELU, biases, tied embeddings)
    decoder = {"vocab_size": len(vocab), "block_size": 64, "n_layer": 4, "n_head": 4, "n_embd": 128}
    for name, shape in (("llama", {"n_kv_head": 2, "intermediate_size": 344}),
                        ("gpt2", {"positions": "learned", "norm": "layernorm", "activation": "gelu_tanh", "bias": True,
                                  "tie_embeddings": True})):
        out[name] = (dict(common, model={"arch": "decoder", "config": {**decoder, **shape}},
                          data=lm_meta.spec().model_dump(mode="json"), shards=[{"cid": CID, "samples": len(tx)}],
                          batch_size=8), shard_bytes(tx, ty, lm_meta))
    rgb = torch.rand(512, 3, 32, 32, generator=g)
    rgb_meta = ShardMeta(task="classification", samples=512, x_dtype="float32", x_shape=[3, 32, 32], num_classes=10)
    out["resnet"] = (dict(common, model={"arch": "resnet", "config": {"in_channels": 3, "height": 32, "width": 32,
                                                                      "widths": [16, 32, 64], "blocks": 1, "groups": 8,
                                                                      "num_classes": 10}},
                          data=rgb_meta.spec().model_dump(mode="json"), shards=[{"cid": CID, "samples": 512}],
                          batch_size=32), shard_bytes(rgb, y[:512], rgb_meta))
    return out


def _per_second(doc: dict, ms: float) -> tuple[str, float]:
    """Samples (classifiers) or tokens (language models) per second at `ms` per step."""
    if doc["data"]["task"] == "lm":
        return "tokens_per_s", round(1000.0 * doc["batch_size"] * doc["data"]["x_shape"][0] / ms, 1)
    return "samples_per_s", round(1000.0 * doc["batch_size"] / ms, 1)


def _ms_per_step(m, shard, device: str, steps: int, warmup: int, threads: int = 1,
                 pinned: bool = True) -> tuple[float, float]:
    """Mean (wall ms, this thread's CPU ms) of Trainer.train_step (sampling, forward, backward,
    update) after `warmup` steps. On a shared machine the thread's CPU time is the steadier figure
    (other processes stretch wall time far more); at one thread on the CPU both measure the same work.
    pinned=False: plain torch (deterministic algorithms, no hardware-class check or pins)."""
    if pinned:
        apply_profile(m.determinism)
    else:
        torch.use_deterministic_algorithms(True)
    torch.set_num_threads(threads)               # the portable profile leaves threads alone: compare at one
    t = Trainer(m, shard, TaskRef(1, 0, 0), device)
    t.load(initial_state(m))
    for _ in range(warmup):
        t.train_step()
    _sync(device)
    start, cpu = time.perf_counter(), time.thread_time()
    for _ in range(steps):
        t.train_step()
    _sync(device)
    return 1000.0 * (time.perf_counter() - start) / steps, 1000.0 * (time.thread_time() - cpu) / steps


# --profiles runs each measurement in its own process: MKL reads MKL_CBWR once, at its start, and each kind
# of run needs its own branch. name -> (profile or None for plain torch, environment)
PROFILE_RUNS = {
    # the native class as it pins itself: MKL's vendor-neutral COMPATIBLE branch, ATen's AVX2 kernels
    "native": ("cpu-f32-strict", {"MKL_CBWR": "COMPATIBLE", "ATEN_CPU_CAPABILITY": "avx2"}),
    # portable-f32 at MKL's and ATen's fastest for this CPU (its bits do not depend on either)
    "portable": ("portable-f32", {"MKL_CBWR": "AUTO", "ATEN_CPU_CAPABILITY": "avx512"}),
    # plain torch as it comes, no class (bits differ between machines): MKL's and ATen's fastest, oneDNN on
    "native_fastest": (None, {"MKL_CBWR": "AUTO", "ATEN_CPU_CAPABILITY": "avx512"}),
    # portable-f32 in a node that also serves cpu-f32-strict (one MKL branch per process: COMPATIBLE)
    "portable_compatible_blas": ("portable-f32", {"MKL_CBWR": "COMPATIBLE", "ATEN_CPU_CAPABILITY": "avx2"}),
}


def profile_worker(kind: str, arch: str, device: str, steps: int, threads: int) -> dict:
    """One measurement of --profiles, in this (child) process: {"wall", "cpu"} ms per step."""
    profile, _ = PROFILE_RUNS[kind]
    doc, data = profile_workloads(device)[arch]
    native = "cuda-f32-strict" if device == "cuda" else "cpu-f32-strict"
    hw = {"device_class": device, "min_memory_mb": 1024}
    m = load_manifest(json.dumps(dict(doc, determinism=profile or native, hardware=hw)).encode())
    shard = load_shard(data, m.data)
    wall, cpu = _ms_per_step(m, shard, device, steps, warmup=3, threads=threads, pinned=profile is not None)
    import resource

    from verity.engine.estimate import estimate_task_memory

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024   # Linux: KiB; the whole process, torch included
    return {"wall": wall, "cpu": cpu, "peak_rss_mb": round(peak / 2**20, 1),
            "estimated_task_mb": round(estimate_task_memory(m, 0) / 2**20, 1)}


def _run_worker(kind: str, arch: str, args, threads: int = 1) -> dict:
    env = {**os.environ, **PROFILE_RUNS[kind][1]}
    cmd = [sys.executable, __file__, "--profile-worker", kind, arch, "--device", args.device,
           "--profile-steps", str(args.profile_steps), "--worker-threads", str(threads)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"--profiles worker {kind} {arch} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_profiles(args) -> dict:
    """ms/step of each model per PROFILE_RUNS kind, one thread, each run in its own process, the kinds'
    order rotated over the repeats, the fastest of each kept (native and portable side by side in one run)."""
    kinds = list(PROFILE_RUNS) if args.device == "cpu" else ["native", "portable"]
    out = {}
    for name, (doc, _) in profile_workloads(args.device).items():
        if args.families and name not in args.families.split(","):
            continue
        wall = {k: [] for k in kinds}
        cpu = {k: [] for k in kinds}
        peak = {k: 0.0 for k in kinds}
        for rep in range(args.repeats):
            for kind in kinds[rep % len(kinds):] + kinds[:rep % len(kinds)]:
                r = _run_worker(kind, name, args)
                wall[kind].append(r["wall"])
                cpu[kind].append(r["cpu"])
                peak[kind] = max(peak[kind], r["peak_rss_mb"])
                estimated = r["estimated_task_mb"]
        best = {k: min(v) for k, v in wall.items()}
        cbest = {k: min(v) for k, v in cpu.items()}
        res = {"native_ms_per_step": round(best["native"], 3), "portable_ms_per_step": round(best["portable"], 3),
               "ratio": round(best["portable"] / best["native"], 2),
               "native_cpu_ms_per_step": round(cbest["native"], 3),
               "portable_cpu_ms_per_step": round(cbest["portable"], 3),
               "cpu_ratio": round(cbest["portable"] / cbest["native"], 2),
               "native_" + _per_second(doc, best["native"])[0]: _per_second(doc, best["native"])[1],
               "portable_" + _per_second(doc, best["portable"])[0]: _per_second(doc, best["portable"])[1],
               # peak resident memory of the measuring process (torch and the shard included) and the nodes' own
               # estimate of the task's memory (engine/estimate.py), side by side
               "native_peak_rss_mb": peak["native"], "portable_peak_rss_mb": peak["portable"],
               "estimated_task_mb": estimated}
        if "native_fastest" in best:
            res.update({"native_fastest_ms_per_step": round(best["native_fastest"], 3),
                        "ratio_vs_fastest": round(best["portable"] / best["native_fastest"], 2),
                        "portable_compatible_blas_ms_per_step": round(best["portable_compatible_blas"], 3),
                        "ratio_compatible_blas": round(best["portable_compatible_blas"] / best["native"], 2)})
        if args.portable_threads > 1:            # a separate figure: portable with more intra-op threads
            walls = [_run_worker("portable", name, args, threads=args.portable_threads)["wall"]
                     for _ in range(args.repeats)]
            res.update({"portable_threads": args.portable_threads,
                        "portable_threads_ms_per_step": round(min(walls), 3),
                        "portable_threads_ratio_vs_native_1_thread": round(min(walls) / best["native"], 2)})
        res.update({"native_profile": "cuda-f32-strict" if args.device == "cuda" else "cpu-f32-strict",
                    "device": args.device, "threads": 1, "batch_size": doc["batch_size"], "model": doc["model"],
                    "steps": args.profile_steps, "environments": {k: PROFILE_RUNS[k][1] for k in kinds},
                    "all_ms": {k: [round(v, 3) for v in wall[k]] for k in kinds},
                    "all_cpu_ms": {k: [round(v, 3) for v in cpu[k]] for k in kinds}})
        out[name] = res
        console.print(name, {k: v for k, v in res.items() if k not in ("all_ms", "all_cpu_ms", "model")})
    return out


def repro_check(args) -> int:
    ok = True
    for name, (m, shard) in workloads(max(args.steps, args.k[0]), args.k[0], args.device).items():
        roots = []
        for _ in range(2):
            with tempfile.TemporaryDirectory() as d:
                roots.append(run_task(m, initial_state(m), shard, TaskRef(1, 0, 0), Path(d)).root.hex())
        same = roots[0] == roots[1]
        ok &= same
        console.print(f"{name} [{m.determinism}] root {roots[0][:16]}… vs {roots[1][:16]}… "
                      + ("[green]identical[/green]" if same else "[red]DIFFERENT[/red]"))
    return 0 if ok else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--k", type=int, nargs="+", default=[10, 100, 1000])
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--ipfs", default=None, help="IPFS HTTP API multiaddr for checkpoint uploads")
    ap.add_argument("--repro-check", action="store_true", help="run each task twice and compare roots")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--no-warmup", dest="warmup", action="store_false")
    ap.add_argument("--out", type=Path, default=Path("bench/out/engine.json"))
    ap.add_argument("--profiles", action="store_true",
                    help="ms/step native vs portable-f32 for mlp, cnn, gpt (one thread); writes bench/out/profiles.json")
    ap.add_argument("--profile-steps", type=int, default=20, help="timed steps per run with --profiles")
    ap.add_argument("--families", default="", help="with --profiles, only these workloads (comma-separated: "
                                                   "mlp,cnn,resnet,gpt,llama,gpt2; default all)")
    ap.add_argument("--portable-threads", type=int, default=0,
                    help="with --profiles, also time portable-f32 at this many threads (a separate figure)")
    ap.add_argument("--profile-worker", nargs=2, metavar=("KIND", "ARCH"), help=argparse.SUPPRESS)
    ap.add_argument("--worker-threads", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.profile_worker:
        kind, arch = args.profile_worker
        print(json.dumps(profile_worker(kind, arch, args.device, args.profile_steps, args.worker_threads)))
        return 0
    if args.repro_check:
        return repro_check(args)
    if args.profiles:
        out = args.out if args.out != Path("bench/out/engine.json") else Path("bench/out/profiles.json")
        result = bench_profiles(args)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1) + "\n")
        console.print(f"wrote {out}")
        return 0
    result = bench(args)
    result["markdown"] = show(result)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    console.print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
