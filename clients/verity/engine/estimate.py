"""Rough memory and compute of one TRAIN task, from its manifest alone.

Why: a node should decline a task it cannot hold before it commits to it,
and a module job's tasks differ (a task training the head of a frozen model
needs no gradients or optimizer state for the rest). Nothing is allocated:
shapes come from the meta-device model. Estimates, not measurements: they
aim to be an upper bound for the engine's own tensors, not for the framework
(CUDA context, allocator slack, torch itself).

Memory (bytes), float32 = 4 bytes, P = every parameter, Pt = the parameters
task `index` trains (modules.trained_params), S = optimizer slots per trained
parameter (sgd: 0, or 1 with momentum; adam/adamw: 2):

    parameters   4 · P
    gradients    4 · Pt
    optimizer    4 · S · Pt
    outer        4 · Pj  only in step-0 states of jobs with aggregation.outer (Pj = trained by the job)
    activations  4 · batch_size · A · (2 for portable-f32, whose ops keep float64 GEMM slices
                 and more intermediates, else 1); A = elements kept per sample for backward:
                   mlp  in + 2·Σhidden + 2·out + 2·max width
                   cnn  Σ_layers (C_in·9·H_out·W_out + 2·C_out·H_out·W_out) + flattened + 2·classes
                   resnet  as cnn per convolution, plus 2 normalised copies per GroupNorm and each ReLU's output
                        (engine/resnet.resnet_activation_stages)
                   gpt  T · (4·C + n_layer · (16·C + 3·n_head·T) + 3·vocab)
                   decoder  as gpt with the block's 16·C replaced by its real widths: 4·C (norms) + 4·Cq + 2·Ckv
                        (+ Cq + Ckv with rope) + 2·I (gelu) or 4·I (swiglu); Cq = n_embd, Ckv = n_kv_head·head size
                 counted from the first stage (layer, block, embeddings, head) with a trained parameter: frozen
                 stages before it save nothing for backward (a head-only task keeps only the head's)
    data         the shard on the device: samples · (∏x_shape · 4|8 + ∏y_shape · 8)
    checkpoints  3 · (state bytes): the runner keeps up to two snapshots queued for the
                 writer and one being hashed and written

estimate_task_memory is the sum of all of them (task_memory_breakdown gives each).

FLOPs of one step (multiply-adds count 2): every GEMM forward, plus its input
gradient when a parameter of its stage (layer or block) or an earlier one trains, plus its weight gradient when its
weight trains (so a task training only the last layers costs little more than
a forward). Elementwise work is left out. portable-f32 computes each product as
two float64 GEMMs: on hardware where float64 is slower, scale accordingly.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from verity.engine.checkpoint import optimizer_keys
from verity.engine.decoder import ffn_size, kv_heads
from verity.engine.resnet import resnet_activation_stages, resnet_gemms, resnet_stage_order
from verity.engine.determinism import is_portable
from verity.engine.manifest import Manifest
from verity.engine.modules import parameter_shapes, trained_params

F32 = 4
SNAPSHOT_COPIES = 3


def _numel(shapes: dict[str, tuple[int, ...]], names) -> int:
    return sum(math.prod(shapes[n]) for n in names)


def _check_index(manifest: Manifest, index: int) -> None:
    if not 0 <= index < len(manifest.shards):
        raise ValueError(f"task index {index} outside the job's shards (0..{len(manifest.shards) - 1})")


def _activation_stages(manifest: Manifest) -> list[tuple[tuple[str, ...], int]]:
    """(parameter prefixes of a stage, elements per sample it keeps for backward), in forward order; the sum over
    every stage is A of the module doc."""
    spec, c = manifest.model, manifest.model.config
    if spec.arch == "mlp":
        dims = [c.in_features, *c.hidden, c.out_features]
        out = [((f"layers.{i}.",), (dims[0] if i == 0 else 0) + 2 * b) for i, b in enumerate(dims[1:])]
        prefixes, last = out[-1]
        return out[:-1] + [(prefixes, last + 2 * max(dims))]
    if spec.arch == "cnn":
        chans, h, w, out = [c.in_channels, *c.channels], c.height, c.width, []
        for i, (a, b) in enumerate(zip(chans, chans[1:])):
            h, w = (h + 1) // 2, (w + 1) // 2
            out.append(((f"convs.{i}.",), a * 9 * h * w + 2 * b * h * w))
        return out + [(("head.",), chans[-1] * h * w + 2 * c.num_classes)]
    if spec.arch == "resnet":
        return resnet_activation_stages(c)
    T, C = manifest.data.x_shape[0], c.n_embd
    if spec.arch == "gpt":
        return ([(("wte.", "wpe."), T * 4 * C)]
                + [((f"h.{i}.",), T * (16 * C + 3 * c.n_head * T)) for i in range(c.n_layer)]
                + [(("ln_f.", "lm_head."), T * 3 * c.vocab_size)])
    if spec.arch == "decoder":
        # per block: 2 norms in and out (4C), q k v (Cq + 2Ckv), their roped copies, the repeated k v (2Cq),
        # attention's output (Cq), the MLP (gelu: up and its activation, 2I; swiglu: gate, up, silu, product, 4I),
        # the scores, their softmax and mask (3 n_head T)
        cq, ckv, inner = C, kv_heads(c) * (C // c.n_head), ffn_size(c)
        rope = cq + ckv if c.positions == "rope" else 0
        block = 4 * C + cq + 2 * ckv + rope + 2 * cq + cq + (4 if c.activation == "swiglu" else 2) * inner
        return ([(("wte.", "wpe."), T * 4 * C)]
                + [((f"h.{i}.",), T * (block + 3 * c.n_head * T)) for i in range(c.n_layer)]
                + [(("ln_f.", "lm_head."), T * 3 * c.vocab_size)])
    raise ValueError(f"no activation estimate for arch {spec.arch!r}")


def _activation_elements(manifest: Manifest, trained: frozenset[str] | None = None) -> int:
    """A: elements per sample kept for the backward pass (see the module doc), counting only the stages from the
    first one with a trained parameter on: autograd saves nothing for frozen stages before it."""
    stages = _activation_stages(manifest)
    first = 0
    if trained is not None:
        first = next((i for i, (prefixes, _) in enumerate(stages)
                      if any(n.startswith(prefixes) for n in trained)), len(stages))
    return sum(e for _, e in stages[first:])


def _data_bytes(manifest: Manifest, index: int) -> int:
    d = manifest.data
    samples = manifest.shards[index].samples
    x = math.prod(d.x_shape) * (4 if d.x_dtype == "float32" else 8)
    return samples * (x + math.prod(d.y_shape) * 8)


def task_memory_breakdown(manifest: Manifest, index: int) -> dict[str, int]:
    """Bytes per component for shard task `index` (see the module doc for each formula)."""
    _check_index(manifest, index)
    shapes = parameter_shapes(manifest.model)
    trained = trained_params(manifest, index if manifest.modules is not None else None)
    p_all, p_t = _numel(shapes, shapes), _numel(shapes, trained)
    slots = sum(1 for k in optimizer_keys(manifest) if k != "step")
    outer = _numel(shapes, trained_params(manifest)) if manifest.aggregation.outer is not None else 0
    state = F32 * (p_all + slots * p_t)
    factor = 2 if is_portable(manifest.determinism) else 1
    return {
        "parameters": F32 * p_all,
        "gradients": F32 * p_t,
        "optimizer": F32 * slots * p_t,
        "outer": F32 * outer,
        "activations": F32 * manifest.batch_size * _activation_elements(manifest, trained) * factor,
        "data": _data_bytes(manifest, index),
        "checkpoints": SNAPSHOT_COPIES * state,
    }


def estimate_task_memory(manifest: Manifest, index: int) -> int:
    """Bytes shard task `index` needs (sum of task_memory_breakdown): decline the task if it exceeds
    what the node can hold."""
    return sum(task_memory_breakdown(manifest, index).values())


def _gemms(manifest: Manifest) -> list[tuple[str, str | None, int]]:
    """(stage prefix, weight parameter or None, forward FLOPs per sample), in forward order."""
    spec, c = manifest.model, manifest.model.config
    if spec.arch == "mlp":
        dims = [c.in_features, *c.hidden, c.out_features]
        return [(f"layers.{i}.", f"layers.{i}.weight", 2 * a * b) for i, (a, b) in enumerate(zip(dims, dims[1:]))]
    if spec.arch == "cnn":
        chans, h, w, out = [c.in_channels, *c.channels], c.height, c.width, []
        for i, (a, b) in enumerate(zip(chans, chans[1:])):
            h, w = (h + 1) // 2, (w + 1) // 2
            out.append((f"convs.{i}.", f"convs.{i}.weight", 2 * a * 9 * b * h * w))
        return out + [("head.", "head.weight", 2 * chans[-1] * h * w * c.num_classes)]
    if spec.arch == "resnet":
        return resnet_gemms(c)
    T, C = manifest.data.x_shape[0], c.n_embd
    out = []
    if spec.arch == "gpt":
        for i in range(c.n_layer):
            s = f"h.{i}."
            out += [(s, s + "attn.c_attn.weight", 2 * T * C * 3 * C), (s, None, 2 * 2 * T * T * C),
                    (s, s + "attn.c_proj.weight", 2 * T * C * C), (s, s + "mlp.c_fc.weight", 2 * T * C * 4 * C),
                    (s, s + "mlp.c_proj.weight", 2 * T * 4 * C * C)]
        return out + [("lm_head.", "lm_head.weight", 2 * T * C * c.vocab_size)]
    if spec.arch == "decoder":
        cq, ckv, inner = C, kv_heads(c) * (C // c.n_head), ffn_size(c)
        for i in range(c.n_layer):
            s = f"h.{i}."
            a, m = s + "attn.", s + "mlp."
            out += [(s, a + "q_proj.weight", 2 * T * C * cq), (s, a + "k_proj.weight", 2 * T * C * ckv),
                    (s, a + "v_proj.weight", 2 * T * C * ckv), (s, None, 2 * 2 * T * T * cq),   # scores, @ v
                    (s, a + "o_proj.weight", 2 * T * cq * C)]
            if c.activation == "swiglu":
                out.append((s, m + "gate_proj.weight", 2 * T * C * inner))
            out += [(s, m + "up_proj.weight", 2 * T * C * inner), (s, m + "down_proj.weight", 2 * T * inner * C)]
        head = "wte.weight" if c.tie_embeddings else "lm_head.weight"
        return out + [("lm_head.", head, 2 * T * C * c.vocab_size)]
    raise ValueError(f"no FLOP estimate for arch {spec.arch!r}")


def _stage_order(manifest: Manifest) -> list[str]:
    """Parameter-name prefixes in forward order (what runs before what)."""
    c = manifest.model.config
    if manifest.model.arch == "mlp":
        return [f"layers.{i}." for i in range(len(c.hidden) + 1)]
    if manifest.model.arch == "cnn":
        return [f"convs.{i}." for i in range(len(c.channels))] + ["head."]
    if manifest.model.arch == "resnet":
        return resnet_stage_order(c)
    if manifest.model.arch in ("gpt", "decoder"):   # a tied decoder's head weight is wte.weight (stage "wte.")
        return ["wte.", "wpe."] + [f"h.{i}." for i in range(c.n_layer)] + ["ln_f.", "lm_head."]
    raise ValueError(f"no stage order for arch {manifest.model.arch!r}")


def estimate_step_flops(manifest: Manifest, index: int) -> int:
    """Rough FLOPs of one training step of shard task `index` (see the module doc)."""
    _check_index(manifest, index)
    trained = trained_params(manifest, index if manifest.modules is not None else None)
    stages = _stage_order(manifest)
    first = min((i for i, s in enumerate(stages) if any(n.startswith(s) for n in trained)), default=len(stages))
    live = set(stages[first:])   # a GEMM in these stages (or after) needs its input gradient
    total = 0
    for stage, weight, f in _gemms(manifest):
        total += f
        if stage in live:
            total += f
        if weight is not None and weight in trained:
            total += f
    return manifest.batch_size * total


# ------------------------------------------------------------------ time, from a node's own measurements
@dataclass(frozen=True)
class StepSpeed:
    """One family's step time on one machine under one profile: `overhead_ms` per step whatever its size (op
    dispatch, sampling, the portable ops' fixed costs) plus FLOPs at `flops_per_ms`. Fitted by `fit_speed` from the
    doctor's two timed tasks of the family (engine/reference.py: the reference task and a larger calibration task).
    """
    overhead_ms: float
    flops_per_ms: float

    def step_ms(self, flops: float) -> float:
        return self.overhead_ms + flops / self.flops_per_ms

    def to_json(self) -> dict:
        return {"overhead_ms": round(self.overhead_ms, 3), "flops_per_ms": round(self.flops_per_ms)}


def fit_speed(small: tuple[float, float], large: tuple[float, float]) -> StepSpeed:
    """The line through (FLOPs, ms per step) of a small and a large task of one family; when timing noise makes the
    large task no slower per extra FLOP (a non-positive slope), its own rate with no overhead (conservative)."""
    (f0, ms0), (f1, ms1) = small, large
    if f1 <= 0 or ms1 <= 0:
        raise ValueError(f"a calibration point needs positive FLOPs and time, got ({f1}, {ms1})")
    if f1 > f0 and ms1 > ms0:
        rate = (f1 - f0) / (ms1 - ms0)
        overhead = ms0 - f0 / rate
        if overhead >= 0:
            return StepSpeed(overhead, rate)
    return StepSpeed(0.0, f1 / ms1)


def estimate_task_seconds(manifest: Manifest, index: int, speeds: dict[str, StepSpeed]) -> float | None:
    """Seconds of training for shard task `index` at `speeds` (arch -> StepSpeed: one profile's, from the doctor),
    or None when the family has no measurement. steps x (overhead + FLOPs / rate); checked against measured runs by
    scripts/bench_estimate.py."""
    speed = speeds.get(manifest.model.arch)
    if speed is None:
        return None
    # the fixed per-step cost is paid once per micro-batch (manifest `micro_batches`: M forward and backward passes of
    # batch/M samples, then the ordered sum): a poster must not make a step M times slower than nodes estimate it
    extra = speed.overhead_ms * ((manifest.micro_batches or 1) - 1)
    return manifest.steps_per_round * (speed.step_ms(estimate_step_flops(manifest, index)) + extra) / 1000.0
