"""The deterministic training engine (no chain involved). See docs/engine.md.

Nodes call, in order of a task's life:
    load_manifest → initial_state / load_checkpoint → load_shard → run_task
    → (disputes) replay_segment / recompute_step → (AGGREGATE) run_aggregate.
Before accepting a task a node estimates it: estimate_task_memory / estimate_step_flops.
"""
from verity.engine.aggregate import (AggregateResult, aggregate_input_hash, aggregate_states, needs_round_input,
                                     run_aggregate)
from verity.engine.checkpoint import checkpoint_bytes, initial_state, load_checkpoint
from verity.engine.data import Shard, load_shard
from verity.engine.determinism import apply_profile, check_environment, deterministic
from verity.engine.estimate import estimate_step_flops, estimate_task_memory
from verity.engine.evaluate import EvalResult, evaluate
from verity.engine.manifest import Manifest, load_manifest, manifest_bytes, manifest_schema
from verity.engine.runner import Checkpoint, TaskResult, advance, recompute_step, replay_segment, run_task
from verity.engine.state import TaskRef, TrainState, state_hash

__all__ = [
    "AggregateResult", "aggregate_input_hash", "aggregate_states", "needs_round_input", "run_aggregate",
    "estimate_step_flops", "estimate_task_memory",
    "checkpoint_bytes", "initial_state", "load_checkpoint", "Shard", "load_shard",
    "apply_profile", "check_environment", "deterministic", "EvalResult", "evaluate",
    "Manifest", "load_manifest", "manifest_bytes", "manifest_schema",
    "Checkpoint", "TaskResult", "advance", "recompute_step", "replay_segment", "run_task",
    "TaskRef", "TrainState", "state_hash",
]
