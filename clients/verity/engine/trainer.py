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

    def train_step(self) -> torch.Tensor:
        g = step_generator(self.task, self.step)
        idx = torch.randint(len(self.x), (self.manifest.batch_size,), generator=g).to(self.device)
        loss = self.loss(self.model(self.x[idx]), self.y[idx])
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        self.step += 1
        self._carried = {}
        return loss.detach()
