"""Loss and accuracy of a state on an eval shard (for demos and job reports)."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from verity.engine.data import Shard
from verity.engine.determinism import is_portable
from verity.engine.manifest import Manifest
from verity.engine.models import build_model
from verity.engine.state import TrainState
from verity.engine.trainer import loss_for


@dataclass(frozen=True)
class EvalResult:
    loss: float       # mean cross-entropy per prediction
    accuracy: float   # fraction of correct argmax predictions (tokens, for lm)
    samples: int


@torch.no_grad()
def evaluate(manifest: Manifest, state: TrainState, shard: Shard, batch_size: int = 512,
             device: str = "cpu") -> EvalResult:
    portable = is_portable(manifest.determinism)
    model = build_model(manifest.model, device, portable)
    model.load_state_dict(state.model_tensors())
    model.eval()
    total_loss, correct, count = 0.0, 0, 0
    for i in range(0, len(shard), batch_size):
        x, y = shard.x[i:i + batch_size].to(device), shard.y[i:i + batch_size].to(device)
        logits = model(x)
        total_loss += float(loss_for(portable)(logits, y)) * y.numel()
        correct += int((logits.argmax(-1) == y).sum())
        count += y.numel()
    return EvalResult(total_loss / count, correct / count, len(shard))
