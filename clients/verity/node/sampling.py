"""Which candidate results a verifier re-executes: a private, fixed-per-claim lottery (P5, node side).

v1 sampled with keccak(verifier address, taskId): public inputs, so a solver that read this code
knew in advance which of its tasks a given verifier would skip, and cheated exactly there. Now
the lottery is keyed by a secret only the verifier holds:

    ticket = keccak(key || taskId || epoch)    sampled iff ticket[:8] < rate * 2^64

`key` is 32 random bytes created once per node (`<state dir>/sampling.key`, mode 0600) and never
sent anywhere, so nobody else can compute a ticket, while a restart re-reads the same key and
never re-rolls a decision. The epoch is part of the ticket: a dispute winner's result (a new
candidate, epoch + 1) is a new claim and gets its own draw.

What a solver that knows the code can do: nothing better than guess. Each of V verifiers checks a
claim independently with probability p, so a wrong result escapes with probability (1 - p)^V
and is caught with probability 1 - (1 - p)^V (`catch_probability`), whichever tasks the solver
picks to cheat on (tests/nodes/test_sampling.py plays that solver).

Not built yet (docs/protocol-v2.md, residual risks): an on-chain check of a ticket (needed only
to pay a verification fee), and the fee itself.
"""
from __future__ import annotations

from pathlib import Path

from eth_utils import keccak

from verity.node.keyfile import create_key_file, read_key_file

KEY_FILE = "sampling.key"


def load_or_create_key(state_dir: Path) -> bytes:
    """This node's sampling key: `state_dir/sampling.key`, created (0600) on first use; refused (VerityError) if
    others can read it or it is not 32 hex bytes."""
    path = Path(state_dir) / KEY_FILE
    if not path.exists():
        create_key_file(path)
    return bytes.fromhex(read_key_file(path)[2:])


def ticket(key: bytes, task_id: int, epoch: int) -> int:
    """The claim's lottery number in [0, 2^64)."""
    return int.from_bytes(keccak(key + task_id.to_bytes(32, "big") + epoch.to_bytes(32, "big"))[:8], "big")


def sampled(key: bytes, task_id: int, epoch: int, rate: float) -> bool:
    """True if this verifier re-executes the claim (task, epoch); fixed per claim, unknowable without `key`."""
    return ticket(key, task_id, epoch) < rate * 2**64


def catch_probability(rate: float, verifiers: int) -> float:
    """Probability that at least one of `verifiers` independent verifiers, each sampling at `rate`, checks a claim."""
    return 1.0 - (1.0 - rate) ** verifiers
