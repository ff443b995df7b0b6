"""The training state, its canonical serialisation (version 1) and its hash.

A state is: named tensors (model parameters and buffers under `model/…`,
optimizer state under `optim/<param>/<key>`), the step counter, and the RNG
identity. The per-step RNG is a pure function of (job, round, task, step)
(`step_seed`), so the state records that identity instead of generator
bytes; a step-0 state records none of it, which is what makes h_0 of every
shard task equal the round's input hash (docs/protocol.md).

Serialisation v1 (all integers little-endian unless noted):

    magic     b"verity-state" (12 bytes) ‖ version u32 (= 1)
    step      u64
    job       32 bytes, uint256 big-endian      ┐ all zero when step == 0
    round     u32                               │
    task      u32                               │
    rng       32 bytes = step_seed(job, round, task, step)  ┘
    count     u32
    count × entry, entries sorted by the UTF-8 bytes of their names:
        name_len u16 ‖ name ‖ dtype_len u8 ‖ dtype ("F32", "I64", …)
        ‖ ndim u8 ‖ ndim × dim u64 ‖ nbytes u64 ‖ data (C order, little-endian)

The state hash is sha256 of those bytes (`state_hash`, streamed, no copy).
"""
from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass, field
from typing import Iterable

import torch

from verity.engine.tensorfile import CODES, tensor_bytes

STATE_VERSION = 1
MAGIC = b"verity-state"
ZERO32 = b"\x00" * 32


@dataclass(frozen=True)
class TaskRef:
    """A shard task: on-chain job id, round, and shard index within the round."""
    job: int
    round: int
    index: int


def step_seed(task: TaskRef, step: int) -> bytes:
    """Seed of the generator used for the update step -> step + 1."""
    msg = b"verity/step-rng/v1" + task.job.to_bytes(32, "big") + struct.pack(">IIQ", task.round, task.index, step)
    return hashlib.sha256(msg).digest()


def step_generator(task: TaskRef, step: int) -> torch.Generator:
    return torch.Generator(device="cpu").manual_seed(int.from_bytes(step_seed(task, step)[:8], "little"))


@dataclass
class TrainState:
    tensors: dict[str, torch.Tensor]
    step: int = 0
    task: TaskRef | None = None  # None exactly when step == 0
    _hash: bytes | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if (self.step == 0) != (self.task is None):
            raise ValueError("a state records its task identity exactly when step > 0")

    @property
    def hash(self) -> bytes:
        if self._hash is None:
            self._hash = state_hash(self.tensors, self.step, self.task)
        return self._hash

    def model_tensors(self) -> dict[str, torch.Tensor]:
        return {k.removeprefix("model/"): v for k, v in self.tensors.items() if k.startswith("model/")}


def _header(step: int, task: TaskRef | None, count: int) -> bytes:
    if task is None:
        ident = ZERO32 + struct.pack("<II", 0, 0) + ZERO32
    else:
        ident = task.job.to_bytes(32, "big") + struct.pack("<II", task.round, task.index) + step_seed(task, step)
    return MAGIC + struct.pack("<IQ", STATE_VERSION, step) + ident + struct.pack("<I", count)


def _entry(name: str, t: torch.Tensor) -> bytes:
    n, d = name.encode(), CODES[t.dtype].encode()
    return (struct.pack("<H", len(n)) + n + struct.pack("<B", len(d)) + d + struct.pack("<B", t.dim())
            + struct.pack(f"<{t.dim()}Q", *t.shape) + struct.pack("<Q", t.numel() * t.element_size()))


def _chunks(tensors: dict[str, torch.Tensor], step: int, task: TaskRef | None) -> Iterable[bytes | memoryview]:
    names = sorted(tensors, key=str.encode)
    yield _header(step, task, len(names))
    for name in names:
        yield _entry(name, tensors[name])
        yield tensor_bytes(tensors[name])


def serialize_state(tensors: dict[str, torch.Tensor], step: int, task: TaskRef | None) -> bytes:
    """The canonical bytes (for reference and tests; hashing streams them instead)."""
    return b"".join(bytes(c) for c in _chunks(tensors, step, task))


def state_hash(tensors: dict[str, torch.Tensor], step: int, task: TaskRef | None) -> bytes:
    h = hashlib.sha256()
    for chunk in _chunks(tensors, step, task):
        h.update(chunk)
    return h.digest()
