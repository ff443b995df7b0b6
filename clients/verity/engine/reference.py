"""Short reference tasks whose roots any machine can compare with tests/vectors/<profile>.json.

One task per architecture (digits MLP, digits CNN and ResNet, char GPT, char Llama-shaped decoder), each a few steps
of `run_task`,
the very call a node makes, so a matching root says this process trains like the machine that
recorded the vector. Inputs are built here, offline: sklearn's bundled 8x8 digits and a short
fixed text, shuffled with explicit generators. `verity node doctor` and scripts/make_vectors.py
run them; the engine tests build their manifests and shards from the same functions, so the
roots they check are the ones recorded.
"""
from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

import torch

from verity.engine.checkpoint import initial_state
from verity.engine.data import Shard, load_shard
from verity.engine.datasets import char_corpus, digits, make_shards
from verity.engine.determinism import ANY_DEVICE, PROFILES, get_profile, job_device
from verity.engine.manifest import Manifest, load_manifest
from verity.engine.portable import ckernels
from verity.engine.runner import run_task
from verity.engine.state import TaskRef
from verity.errors import VerityError

CID = "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG"   # a well-formed CID: the tasks never fetch a shard
TEXT = ("To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer "
        "the slings and arrows of outrageous fortune, or to take arms against a sea of troubles. ") * 8
# arch: (steps, checkpoint interval); enough steps that every op's backward and the optimizer state matter
SCHEDULES = {"mlp": (12, 4), "cnn": (6, 3), "gpt": (4, 2), "decoder": (4, 2), "resnet": (4, 2)}
LM_ARCHES = ("gpt", "decoder")   # trained on the char text (the rest on digits)
ARCHES = tuple(SCHEDULES)
TASK = TaskRef(9, 0, 1)
SAMPLES = 539   # digits shard-000 holds 539 samples


def manifest_doc(arch: str = "mlp", **overrides) -> dict:
    """A valid manifest document for `arch`; `overrides` replace top-level fields."""
    models = {
        "mlp": ({"arch": "mlp", "config": {"in_features": 64, "hidden": [64], "out_features": 10}},
                {"task": "classification", "x_shape": [64], "x_dtype": "float32", "num_classes": 10}),
        "cnn": ({"arch": "cnn", "config": {"in_channels": 1, "height": 8, "width": 8, "channels": [8, 16], "num_classes": 10}},
                {"task": "classification", "x_shape": [1, 8, 8], "x_dtype": "float32", "num_classes": 10}),
        "gpt": ({"arch": "gpt", "config": {"vocab_size": len(set(TEXT)), "block_size": 32, "n_layer": 2, "n_head": 2, "n_embd": 32}},
                {"task": "lm", "x_shape": [32], "x_dtype": "int64", "y_shape": [32], "vocab_size": len(set(TEXT))}),
        "resnet": ({"arch": "resnet", "config": {"in_channels": 1, "height": 8, "width": 8, "widths": [8, 16],
                                                 "blocks": 1, "groups": 4, "num_classes": 10}},
                   {"task": "classification", "x_shape": [1, 8, 8], "x_dtype": "float32", "num_classes": 10}),
        # Llama-shaped: rope, rmsnorm, swiglu, no biases, grouped-query attention (2 kv heads for 4), untied head
        "decoder": ({"arch": "decoder", "config": {"vocab_size": len(set(TEXT)), "block_size": 32, "n_layer": 2,
                                                   "n_head": 4, "n_kv_head": 2, "n_embd": 32, "positions": "rope",
                                                   "norm": "rmsnorm", "activation": "swiglu"}},
                    {"task": "lm", "x_shape": [32], "x_dtype": "int64", "y_shape": [32], "vocab_size": len(set(TEXT))}),
    }
    if arch not in models:
        raise ValueError(f"unknown reference arch {arch!r} (known: {', '.join(models)})")
    model, data = models[arch]
    doc = {
        "schema_version": 1, "model": model, "init": {"seed": 7}, "data": data,
        "shards": [{"cid": CID, "samples": SAMPLES}] * 3,
        "optimizer": {"name": "adam", "lr": 0.003}, "batch_size": 32,
        "steps_per_round": 40, "rounds": 2, "checkpoint_interval": 10,
    }
    doc.update(overrides)
    return doc


def build_manifest(arch: str = "mlp", **overrides) -> Manifest:
    return load_manifest(json.dumps(manifest_doc(arch, **overrides)).encode())


def digits_shards(image: bool = False) -> dict[str, bytes]:
    x, y = digits(image=image)
    return make_shards(x, y, task="classification", n_shards=3, eval_fraction=0.1, seed=0)


def char_shards() -> dict[str, bytes]:
    x, y, vocab = char_corpus(TEXT, 32, 8)
    return make_shards(x, y, task="lm", n_shards=2, eval_fraction=0.1, seed=0, vocab=vocab)


def reference_manifest(profile: str, arch: str) -> Manifest:
    """The reference task of `arch` under `profile` (a native class runs on its own device; portable on CPU)."""
    if arch not in SCHEDULES:
        raise ValueError(f"unknown reference arch {arch!r} (known: {', '.join(ARCHES)})")
    steps, k = SCHEDULES[arch]
    device = get_profile(profile).device
    extra = {"hardware": {"device_class": device, "min_memory_mb": 1024}} if device not in ("cpu", ANY_DEVICE) else {}
    return build_manifest(arch, determinism=profile, steps_per_round=steps, checkpoint_interval=k,
                          optimizer={"name": "adamw" if arch in LM_ARCHES else "adam", "lr": 0.003, "weight_decay": 0.01},
                          **extra)


@lru_cache(maxsize=None)
def _shard_bytes(arch: str) -> bytes:
    return char_shards()["shard-000"] if arch in LM_ARCHES else digits_shards(image=arch in ("cnn", "resnet"))["shard-000"]


def reference_shard(arch: str, manifest: Manifest) -> Shard:
    return load_shard(_shard_bytes(arch), manifest.data, samples=None if arch in LM_ARCHES else SAMPLES)


def run_reference(profile: str, arch: str, workdir: Path) -> tuple[str, float]:
    """(root hex, ms per training step) of the reference task `arch` under `profile`.

    `workdir` must not hold an earlier run of the task: run_task would resume from its checkpoints
    (same root, but no steps to time). Pins the profile's settings like any job (run_task applies it);
    the caller owns restoring them (`determinism.deterministic`)."""
    m = reference_manifest(profile, arch)
    if get_profile(profile).portable:
        ckernels.prepare()                                  # a first run's compile is not a training step
    r = run_task(m, initial_state(m), reference_shard(arch, m), TASK, Path(workdir) / f"{profile}-{arch}")
    cpu = cpu_clock_is_step_time(m) and r.timings["train_cpu"] > 0
    seconds = r.timings["train_cpu"] if cpu else r.timings["train"]   # the step loop alone
    return r.root.hex(), round(1000.0 * seconds / m.steps_per_round, 3)


def cpu_clock_is_step_time(manifest: Manifest) -> bool:
    """Whether a step's time is better read from the training thread's CPU clock than from the wall clock: on a CPU
    with one intra-op thread every cycle of the step is that thread's, and its CPU time leaves out the time spent
    waiting for a core another process holds. A doctor timed on a loaded machine (a test session, other jobs) read
    the wall clock up to ~50x slow, cached it, and its node then declined every task as too long. With more threads
    or a GPU the wall clock it is."""
    device = job_device(get_profile(manifest.determinism), manifest.hardware.device_class)
    return device == "cpu" and torch.get_num_threads() == 1


# ------------------------------------------------------------------ speed calibration (timing only, no vectors)
# arch: (model config, data section, batch size) of a task ~10-100x the reference's FLOPs per step. With the
# reference task it gives two points per family, so a node's time estimate is overhead + FLOPs / rate for that family
# (engine/estimate.StepSpeed) instead of the slowest tiny task's rate (24x too pessimistic for a user's default GPT).
CAL_VOCAB = 64
CALIBRATION = {
    "mlp": ({"arch": "mlp", "config": {"in_features": 784, "hidden": [512, 512], "out_features": 10}},
            {"task": "classification", "x_shape": [784], "x_dtype": "float32", "num_classes": 10}, 64),
    "cnn": ({"arch": "cnn", "config": {"in_channels": 1, "height": 28, "width": 28, "channels": [16, 32],
                                       "num_classes": 10}},
            {"task": "classification", "x_shape": [1, 28, 28], "x_dtype": "float32", "num_classes": 10}, 32),
    "resnet": ({"arch": "resnet", "config": {"in_channels": 1, "height": 28, "width": 28, "widths": [16, 32],
                                             "blocks": 1, "groups": 8, "num_classes": 10}},
               {"task": "classification", "x_shape": [1, 28, 28], "x_dtype": "float32", "num_classes": 10}, 16),
    "gpt": ({"arch": "gpt", "config": {"vocab_size": CAL_VOCAB, "block_size": 64, "n_layer": 4, "n_head": 4,
                                       "n_embd": 128}},
            {"task": "lm", "x_shape": [64], "x_dtype": "int64", "y_shape": [64], "vocab_size": CAL_VOCAB}, 8),
    "decoder": ({"arch": "decoder", "config": {"vocab_size": CAL_VOCAB, "block_size": 64, "n_layer": 4, "n_head": 4,
                                               "n_kv_head": 2, "n_embd": 128}},
                {"task": "lm", "x_shape": [64], "x_dtype": "int64", "y_shape": [64], "vocab_size": CAL_VOCAB}, 8),
}
CAL_SAMPLES = 256
CAL_WARMUP, CAL_STEPS = 2, 5


def calibration_manifest(profile: str, arch: str) -> Manifest:
    """The timing task of `arch` under `profile` (CALIBRATION): never compared with vectors, only timed."""
    model, data, batch = CALIBRATION[arch]
    device = get_profile(profile).device
    extra = {"hardware": {"device_class": device, "min_memory_mb": 1024}} if device not in ("cpu", ANY_DEVICE) else {}
    return build_manifest(arch, model=model, data=data, batch_size=batch, determinism=profile,
                          shards=[{"cid": CID, "samples": CAL_SAMPLES}], steps_per_round=CAL_STEPS,
                          checkpoint_interval=1, **extra)


def calibration_shard(manifest: Manifest) -> Shard:
    """Random inputs of the calibration task's shapes from an explicit generator (their values do not change the
    time)."""
    from verity.engine.data import ShardMeta, shard_bytes

    g, d = torch.Generator().manual_seed(0), manifest.data
    if d.task == "lm":
        x = torch.randint(CAL_VOCAB, (CAL_SAMPLES, *d.x_shape), generator=g)
        y = torch.randint(CAL_VOCAB, (CAL_SAMPLES, *d.y_shape), generator=g)
        vocab = "".join(chr(0x30 + i) for i in range(CAL_VOCAB))
        meta = ShardMeta(task="lm", samples=CAL_SAMPLES, x_dtype="int64", x_shape=list(d.x_shape),
                         y_shape=list(d.y_shape), vocab=vocab)
    else:
        x = torch.rand(CAL_SAMPLES, *d.x_shape, generator=g)
        y = torch.randint(d.num_classes, (CAL_SAMPLES,), generator=g)
        meta = ShardMeta(task="classification", samples=CAL_SAMPLES, x_dtype="float32", x_shape=list(d.x_shape),
                         num_classes=d.num_classes)
    return load_shard(shard_bytes(x, y, meta), manifest.data, samples=CAL_SAMPLES)


def time_calibration(profile: str, arch: str) -> float:
    """Milliseconds per training step of the calibration task of `arch` under `profile`: the median of CAL_STEPS
    steps after CAL_WARMUP (the caller pins the profile, as for run_reference)."""
    import time

    from verity.engine.determinism import apply_profile
    from verity.engine.trainer import Trainer

    m = calibration_manifest(profile, arch)
    device = apply_profile(m.determinism).device
    trainer = Trainer(m, calibration_shard(m), TASK, device)
    trainer.load(initial_state(m))
    for _ in range(CAL_WARMUP):
        trainer.train_step()
    times = []
    clock = time.thread_time if cpu_clock_is_step_time(m) else time.perf_counter
    for _ in range(CAL_STEPS):  # the median step: one step slowed by another process does not move it
        if device == "cuda":
            torch.cuda.synchronize()
        start = clock()
        trainer.train_step()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(clock() - start)
    return round(1000.0 * sorted(times)[CAL_STEPS // 2], 3)


# ------------------------------------------------------------------ vector files
HEX_ROOT = re.compile(r"[0-9a-f]{64}")


class VectorsInvalid(VerityError, ValueError):
    """A reference vector file that cannot be compared with (unreadable, not JSON, wrong shape)."""

    def __init__(self, path: Path | str, reason: str):
        self.path, self.reason = str(path), reason
        super().__init__(f"reference vectors {path}: {reason} (rewrite it with scripts/make_vectors.py)")


def vector_doc(profile: str, roots: dict[str, str]) -> dict:
    """The vector file of `profile`: who recorded it (torch build, the profile's pins) and each task's root."""
    return {"profile": profile, "torch": torch.__version__, "pins": get_profile(profile).pins(),
            "tasks": {arch: {"root": roots[arch]} for arch in ARCHES}}


def read_vectors(path: Path, profile: str) -> dict:
    """The vector file at `path` for `profile`, checked for shape; VectorsInvalid saying what is wrong."""
    try:
        doc = json.loads(Path(path).read_text())
    except OSError as exc:
        raise VectorsInvalid(path, f"unreadable: {exc.strerror or exc}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise VectorsInvalid(path, f"not JSON: {exc}") from None
    if not isinstance(doc, dict) or not {"profile", "torch", "pins", "tasks"} <= set(doc):
        raise VectorsInvalid(path, "expected an object with profile, torch, pins and tasks")
    if doc["profile"] != profile or profile not in PROFILES:
        raise VectorsInvalid(path, f"records profile {doc['profile']!r}, expected {profile!r}")
    tasks = doc["tasks"]
    # a subset: a native class's vectors come from a machine of that class, and a family added later waits for one
    # (a node then declines that family's jobs under the profile: node/feasibility.py)
    if not isinstance(tasks, dict) or not tasks or not set(tasks) <= set(ARCHES):
        raise VectorsInvalid(path, f"tasks must be some of {', '.join(ARCHES)}")
    for arch, t in tasks.items():
        if not isinstance(t, dict) or not isinstance(t.get("root"), str) or not HEX_ROOT.fullmatch(t["root"]):
            raise VectorsInvalid(path, f"tasks.{arch}.root must be 64 lowercase hex digits")
    if not isinstance(doc["pins"], dict):
        raise VectorsInvalid(path, "pins must be an object")
    return doc
