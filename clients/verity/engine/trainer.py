"""The training loop of one task, nanoGPT-style: a model, an optimizer, a
shard, and `train_step`. Batches come from a generator seeded from
(job, round, task, step), so any step can be replayed from its state alone.

In a module job (manifest `modules`) a task trains only its modules
(engine/modules.py): every other parameter has requires_grad False, so it is
loaded and left bitwise unchanged, autograd stops before frozen leading
layers, and the optimizer (hence gradients and optim/ state) covers the
trained parameters alone. A step-0 state's outer/ tensors (the outer
optimizer's momentum) are carried unchanged while the trainer is at step 0, so
h_0 is the input state's hash; later states do not hold them.

Micro-batches (manifest `micro_batches` = M > 1, docs/engine.md "Several
devices in one node"): the step's `batch_size` indices, drawn exactly as for
M = 1, are split into M consecutive equal chunks; g_m is the gradient of
(loss of chunk m) * (1/M) over the trained parameters, computed on its own; the
step's gradient is (((g_0 + g_1) + g_2) + ... + g_{M-1}), one rounded float32
add per term, in that order; then the optimizer steps. M is a power of two, so
the 1/M scale is exact: g_m is exactly the chunk's gradient over M (outside the
subnormal range) however a kernel places the scale. Because the sum's order is
part of the step, the chunks may be computed anywhere (engine/parallel.py
spreads them over processes) with the same bits. M = 1 runs the plain step,
unchanged.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from verity.engine.checkpoint import optimizer_keys
from verity.engine.determinism import ANY_DEVICE, get_profile, is_portable, job_device
from verity.engine.data import Shard
from verity.engine.manifest import Manifest
from verity.engine.models import build_model
from verity.engine.modules import set_trainable, trained_in_order
from verity.engine.outer import OUTER_PREFIX
from verity.engine.portable.layers import cross_entropy as portable_cross_entropy
from verity.engine.portable.optim import PortableAdam, PortableSGD
from verity.engine.state import TaskRef, TrainState, state_hash, step_generator
from verity.errors import ProfileUnsupported


def make_optimizer(manifest: Manifest, model: torch.nn.Module,
                   params: list[torch.nn.Parameter] | None = None) -> torch.optim.Optimizer:
    """The job's optimizer over `params` (default: every parameter of `model`, in order)."""
    o = manifest.optimizer
    params = list(model.parameters()) if params is None else params
    if is_portable(manifest.determinism):  # separate elementwise ops, same state keys (portable/optim.py)
        if o.name == "sgd":
            return PortableSGD(params, lr=o.lr, momentum=o.momentum, weight_decay=o.weight_decay)
        return PortableAdam(params, lr=o.lr, betas=o.betas, eps=o.eps, weight_decay=o.weight_decay,
                            decoupled=o.name == "adamw")
    # foreach/fused off: one plain, readable per-parameter loop on every device.
    if o.name == "sgd":
        return torch.optim.SGD(params, lr=o.lr, momentum=o.momentum, weight_decay=o.weight_decay, foreach=False)
    cls = torch.optim.AdamW if o.name == "adamw" else torch.optim.Adam
    return cls(params, lr=o.lr, betas=o.betas, eps=o.eps, weight_decay=o.weight_decay, foreach=False, fused=False)


def loss_fn(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))


def micro_batch_count(manifest: Manifest) -> int:
    """M, the micro-batches of one step (manifest `micro_batches`, absent = 1), checked again here
    because a manifest built in Python with model_copy skips the validators."""
    m = manifest.micro_batches or 1
    if m < 1 or m & (m - 1) or manifest.batch_size % m:
        raise ValueError(f"micro_batches {m} must be a power of two dividing batch_size ({manifest.batch_size})")
    return m


def sum_in_order(grads: list[list[torch.Tensor | None]]) -> list[torch.Tensor | None]:
    """The step's gradient from the micro-batch gradients grads[m][i] (m = 0..M-1, i over the trained
    parameters): (((g_0 + g_1) + g_2) + ...) per parameter, left to right. A None (no gradient reached
    that parameter in that micro-batch) is skipped, not read as zero: adding +0.0 would turn a -0.0 into
    +0.0. Every caller (one process or several, engine/parallel.py) sums through here."""
    out: list[torch.Tensor | None] = []
    for i in range(len(grads[0])):
        acc = None
        for g in grads:
            if g[i] is not None:
                acc = g[i].clone() if acc is None else acc.add_(g[i])
        out.append(acc)
    return out


def loss_for(portable: bool):
    """The training loss of a profile: native cross-entropy, or the portable one (fixed-tree mean)."""
    return portable_cross_entropy if portable else loss_fn


class Trainer:
    def __init__(self, manifest: Manifest, shard: Shard, task: TaskRef, device: str = "cpu"):
        profile = get_profile(manifest.determinism)
        if device == ANY_DEVICE:  # a device-agnostic profile: the job's device class decides
            device = job_device(profile, manifest.hardware.device_class)
            if device == "cuda" and not torch.cuda.is_available():
                raise ProfileUnsupported(profile.name, "the job asks for CUDA and no CUDA device is available")
        self.manifest, self.task, self.device = manifest, task, torch.device(device)
        self.model = build_model(manifest.model, self.device, profile.portable)
        self.loss = loss_for(profile.portable)
        self._names = trained_in_order(manifest, task.index if manifest.modules is not None else None)
        if manifest.modules is not None:
            set_trainable(manifest, self.model, task.index)
        self.opt = self._optimizer()
        self.micro_batches = micro_batch_count(manifest)
        self.x, self.y = shard.x.to(self.device), shard.y.to(self.device)
        self.step = 0
        self._carried: dict[str, torch.Tensor] = {}   # a step-0 state's outer/ tensors, see the module doc

    def _optimizer(self) -> torch.optim.Optimizer:
        params = dict(self.model.named_parameters())
        return make_optimizer(self.manifest, self.model, [params[n] for n in self._names])

    def load(self, state: TrainState) -> None:
        if state.task is not None and state.task != self.task:
            raise ValueError(f"state belongs to {state.task}, not {self.task}")
        self.model.load_state_dict(state.model_tensors(), strict=True)
        self._carried = ({k: v for k, v in state.tensors.items() if k.startswith(OUTER_PREFIX)}
                         if state.step == 0 else {})
        self.opt = self._optimizer()  # fresh, then fill in the saved state
        saved = {}
        for i, name in enumerate(self._names):
            # clone: load_state_dict keeps same-device tensors as they are, and the
            # optimizer updates its state in place, which would corrupt `state`.
            entry = {k: state.tensors[f"optim/{name}/{k}"].clone() for k in optimizer_keys(self.manifest)
                     if f"optim/{name}/{k}" in state.tensors}
            if entry:
                saved[i] = entry
        if saved:
            sd = self.opt.state_dict()
            self.opt.load_state_dict({"state": saved, "param_groups": sd["param_groups"]})
        self.step = state.step

    def tensors(self) -> dict[str, torch.Tensor]:
        """The live state tensors by state name (views, not copies)."""
        out = {f"model/{k}": v for k, v in self.model.state_dict().items()}
        if self.step == 0:
            out.update(self._carried)
        params = dict(self.model.named_parameters())
        for name in self._names:
            for key, v in self.opt.state.get(params[name], {}).items():
                if not isinstance(v, torch.Tensor):
                    raise TypeError(f"optimizer state {name}/{key} is {type(v).__name__}, not a tensor")
                out[f"optim/{name}/{key}"] = v
        return out

    def snapshot(self) -> TrainState:
        """A detached CPU copy of the state, safe to hash and write in another thread."""
        copy = {k: v.detach().to("cpu", copy=True) for k, v in self.tensors().items()}
        return TrainState(copy, self.step, self.task if self.step else None)

    def hash(self) -> bytes:
        return state_hash(self.tensors(), self.step, self.task if self.step else None)

    def batch_indices(self) -> torch.Tensor:
        """The sample indices of the step self.step -> self.step + 1 (from the step's own generator)."""
        g = step_generator(self.task, self.step)
        return torch.randint(len(self.x), (self.manifest.batch_size,), generator=g).to(self.device)

    def trained_parameters(self) -> list[torch.nn.Parameter]:
        """The trained parameters, in the optimizer's order."""
        params = dict(self.model.named_parameters())
        return [params[n] for n in self._names]

    def micro_grads(self, idx: torch.Tensor, which: range) -> tuple[list[list[torch.Tensor | None]], torch.Tensor]:
        """The gradients g_m (one list per micro-batch m in `which`, one contiguous tensor or None per trained
        parameter) of loss(chunk m) * (1/M), and the scaled losses' sum in order (for reporting only)."""
        M = self.micro_batches
        b = len(idx) // M
        scale = 1.0 / M  # a power of two: exact in float32 whatever the kernel does with it
        params = self.trained_parameters()
        out, total = [], None
        for m in which:
            chunk = idx[m * b:(m + 1) * b]
            loss = self.loss(self.model(self.x[chunk]), self.y[chunk]) * scale
            grads = torch.autograd.grad(loss, params, allow_unused=True)
            out.append([None if g is None else g.contiguous() for g in grads])
            loss = loss.detach()
            total = loss if total is None else total + loss
        return out, total

    def apply_grads(self, grads: list[torch.Tensor | None]) -> None:
        """Take the optimizer step with the step's gradient (one entry per trained parameter) and advance."""
        for p, g in zip(self.trained_parameters(), grads, strict=True):
            p.grad = g
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        self.step += 1
        self._carried = {}

    def train_step(self) -> torch.Tensor:
        """One step; returns its loss (with micro-batches: the sum in order of the scaled chunk losses)."""
        idx = self.batch_indices()
        if self.micro_batches > 1:
            grads, loss = self.micro_grads(idx, range(self.micro_batches))
            self.apply_grads(sum_in_order(grads))
            return loss
        loss = self.loss(self.model(self.x[idx]), self.y[idx])
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        self.step += 1
        self._carried = {}
        return loss.detach()
