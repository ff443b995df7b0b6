"""Cost of the portable ops (verity.engine.portable) against their native torch counterparts.

    python scripts/bench_portable_ops.py [--threads 1] [--device cpu|cuda] [--repeat 7]
    python scripts/bench_portable_ops.py --step-breakdown gpt [--steps 5]

Times matmuls of the model zoo's shapes (digits MLP, the small CNN's
convolutions as im2col matmuls, a small GPT's projections, weight gradients
and attention scores) natively and with each exact-matmul scheme, and
exp/log/tanh/erf/sum on 1e6 elements. Prints a table and writes
bench/out/portable_ops.json: {op: {"shape", "native_ms", "portable_ms",
"ratio", "scheme_ms": {scheme: ms}}} with ratio = portable / native for the
scheme portable-f32's models use (portable.models.SCHEME). Best of --repeat timings, each averaged over enough calls to
last ~0.1 s, native and portable alternating, so a busy machine inflates
the numbers and skews the ratios less.

--step-breakdown ARCH instead runs portable-f32 train steps of the
`bench_engine.py --profiles` workload (mlp, cnn or gpt; one thread) with
every function of verity.engine.portable and torch's GEMM entry points
wrapped, and prints the exclusive thread CPU ms per step of each (time
inside a function minus time in the wrapped functions it calls): where a
portable step's time goes. The wrappers add a few microseconds per call.
"""
from __future__ import annotations

import argparse
import collections
import functools
import importlib
import json
import platform
import sys
import time
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from verity.engine import portable as P
from verity.engine.portable.matmul import SCHEMES
from verity.engine.portable.models import SCHEME as PROFILE_SCHEME  # what portable-f32's models use

OUT = Path(__file__).resolve().parents[1] / "bench" / "out" / "portable_ops.json"

MATMULS = {   # name -> (a shape, b shape)
    "mlp 64x64@64x128": ((64, 64), (64, 128)),
    "cnn conv1 im2col 1024x9@9x8": ((1024, 9), (9, 8)),
    "cnn conv2 im2col 256x72@72x16": ((256, 72), (72, 16)),
    "cnn conv 32x32 img 16384x144@144x32": ((16384, 144), (144, 32)),
    "gpt proj 256x128@128x512": ((256, 128), (128, 512)),
    "gpt mlp-out 256x512@512x128": ((256, 512), (512, 128)),
    "gpt weight-grad 512x256@256x128": ((512, 256), (256, 128)),
    "gpt attention 32x(64x32@32x64)": ((32, 64, 32), (32, 32, 64)),
}
ELEMENTWISE = {"exp": (P.exp, torch.exp), "log": (P.log, torch.log), "tanh": (P.tanh, torch.tanh),
               "erf": (P.erf, torch.erf), "sum": (P.sum, torch.sum)}


def timed(fns: dict, repeat: int, device: str) -> dict:
    """{name: best-of-`repeat` mean ms per call}; the functions alternate within each repeat,
    so a machine busy with other work slows them alike."""
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    calls = {}
    for name, fn in fns.items():
        fn()
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        calls[name] = max(1, min(1000, int(0.1 / max(time.perf_counter() - t0, 1e-6))))
    best = {name: float("inf") for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(calls[name]):
                fn()
            sync()
            best[name] = min(best[name], (time.perf_counter() - t0) / calls[name])
    return {name: t * 1e3 for name, t in best.items()}


def run(repeat: int, device: str) -> dict:
    g = torch.Generator().manual_seed(0)
    results = {}
    with torch.no_grad():
        for name, (sa, sb) in MATMULS.items():
            a, b = torch.randn(sa, generator=g).to(device), torch.randn(sb, generator=g).to(device)
            fns = {"native": lambda: torch.matmul(a, b)}
            fns.update({s: (lambda s=s: P.matmul(a, b, scheme=s)) for s in sorted(SCHEMES)})
            ms = timed(fns, repeat, device)
            native = ms.pop("native")
            results[name] = {"shape": [list(sa), list(sb)], "native_ms": native,
                             "portable_ms": ms[PROFILE_SCHEME], "ratio": ms[PROFILE_SCHEME] / native,
                             "scheme_ms": ms}
        x = (torch.rand(1_000_000, generator=g) * 8 - 4).to(device)
        for name, (fp, fn) in ELEMENTWISE.items():
            arg = x.abs() + 0.01 if name == "log" else x
            ms = timed({"native": lambda: fn(arg), "portable": lambda: fp(arg)}, repeat, device)
            results[f"{name} 1e6"] = {"shape": [1_000_000], "native_ms": ms["native"],
                                      "portable_ms": ms["portable"], "ratio": ms["portable"] / ms["native"]}
    return results


def step_breakdown(arch: str, steps: int) -> dict:
    """{function: exclusive thread CPU ms per portable train step}, plus "step" (the whole step)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_engine import profile_workloads

    from verity.engine import TaskRef, initial_state, load_manifest, load_shard
    from verity.engine.determinism import apply_profile
    from verity.engine.portable.optim import PortableAdam
    from verity.engine.trainer import Trainer

    excl, stack = collections.Counter(), []

    def wrap(name, f):
        @functools.wraps(f)
        def timed_call(*a, **k):
            now = time.thread_time()
            if stack:
                excl[stack[-1][0]] += now - stack[-1][1]
            stack.append([name, now])
            try:
                return f(*a, **k)
            finally:
                now = time.thread_time()
                done, since = stack.pop()
                excl[done] += now - since
                if stack:
                    stack[-1][1] = now
        return timed_call

    mods = [importlib.import_module(f"verity.engine.portable.{m}")
            for m in ("matmul", "reduce", "transcendental", "layers", "autograd", "bits", "models")]
    for mod in mods:
        for n, f in list(vars(mod).items()):
            if isinstance(f, type) and issubclass(f, torch.autograd.Function) and f is not torch.autograd.Function:
                f.forward = staticmethod(wrap(f"{n}.forward", f.forward))
                f.backward = staticmethod(wrap(f"{n}.backward", f.backward))
            elif (callable(f) and getattr(f, "__module__", None) == mod.__name__ and not isinstance(f, type)
                  and n not in ("f32", "require_f32", "get_scheme", "may_sync")):
                w = wrap(f"{mod.__name__.rsplit('.', 1)[-1]}.{n}", f)
                for other in mods:
                    if getattr(other, n, None) is f:
                        setattr(other, n, w)
    saved = {n: getattr(torch, n) for n in ("matmul", "mm", "bmm")}
    for n, f in saved.items():
        setattr(torch, n, wrap(f"torch.{n} (float64 GEMMs)", f))
    PortableAdam.step = wrap("PortableAdam.step", PortableAdam.step)
    try:
        doc, data = profile_workloads("cpu")[arch]
        m = load_manifest(json.dumps(dict(doc, determinism="portable-f32",
                                          hardware={"device_class": "cpu", "min_memory_mb": 1024})).encode())
        apply_profile(m.determinism)
        torch.set_num_threads(1)
        t = Trainer(m, load_shard(data, m.data), TaskRef(1, 0, 0), "cpu")
        t.load(initial_state(m))
        t.train_step()
        excl.clear()
        start = time.thread_time()
        for _ in range(steps):
            t.train_step()
        total = time.thread_time() - start
    finally:
        for n, f in saved.items():
            setattr(torch, n, f)
    out = {"step": 1e3 * total / steps}
    out.update({k: 1e3 * v / steps for k, v in excl.most_common()})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--step-breakdown", choices=("mlp", "cnn", "gpt"), default=None,
                    help="exclusive CPU ms per portable function in train steps of this bench_engine model")
    ap.add_argument("--steps", type=int, default=5, help="steps timed with --step-breakdown")
    args = ap.parse_args()
    if args.step_breakdown:
        ms = step_breakdown(args.step_breakdown, args.steps)
        step = ms.pop("step")
        print(f"portable-f32 {args.step_breakdown} step: {step:.1f} ms thread CPU time (instrumented)")
        for name, v in ms.items():
            print(f"  {name:40s} {v:8.2f} ms {100 * v / step:5.1f} %")
        return
    torch.set_num_threads(args.threads)
    results = run(args.repeat, args.device)
    table = Table(title=f"portable vs native, {args.device}, {args.threads} thread(s), portable-f32's scheme {PROFILE_SCHEME}")
    for col in ("op", "native ms", "portable ms", "ratio", *[f"scheme {s} ms" for s in sorted(SCHEMES)]):
        table.add_column(col, justify="left" if col == "op" else "right")
    for name, r in results.items():
        extra = [f"{r['scheme_ms'][s]:.3f}" for s in sorted(SCHEMES)] if "scheme_ms" in r else [""] * len(SCHEMES)
        table.add_row(name, f"{r['native_ms']:.3f}", f"{r['portable_ms']:.3f}", f"{r['ratio']:.1f}x", *extra)
    Console(width=150).print(table)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"device": args.device, "threads": args.threads, "torch": torch.__version__,
                               "machine": platform.processor() or platform.machine(),
                               "cpu_capability": torch.backends.cpu.get_cpu_capability(),
                               "profile_scheme": PROFILE_SCHEME, "ops": results}, indent=2) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
