"""P5, node side: a verifier's sampling is a private lottery (verity.node.sampling). Unit tests, no services."""
from __future__ import annotations

import os

import pytest
from eth_utils import keccak

from verity.errors import VerityError
from verity.node.sampling import catch_probability, load_or_create_key, sampled

TASKS = range(1, 6001)
RATE = 0.3


def _v1_sampled(verifier: str, task_id: int, rate: float) -> bool:
    """v1's public lottery: anyone who knew the verifier's address could compute it."""
    draw = int.from_bytes(keccak(bytes.fromhex(verifier[2:]) + task_id.to_bytes(32, "big"))[:8], "big")
    return draw < rate * 2**64


def test_key_is_created_private_once_and_reread_succeeds(tmp_path):
    key = load_or_create_key(tmp_path)
    path = tmp_path / "sampling.key"
    assert len(key) == 32 and path.stat().st_mode & 0o777 == 0o600
    assert load_or_create_key(tmp_path) == key  # a restart never re-rolls a decision
    assert load_or_create_key(tmp_path / "other") != key


@pytest.mark.parametrize("content, mode, why", [("ab" * 32, 0o644, "readable by others"),
                                                ("zz" * 32, 0o600, "32-byte hex"),
                                                ("ab" * 16, 0o600, "32-byte hex")])
def test_bad_key_file_refused_fails(tmp_path, content, mode, why):
    path = tmp_path / "sampling.key"
    path.write_text(content)
    os.chmod(path, mode)
    with pytest.raises(VerityError, match=why):
        load_or_create_key(tmp_path)


def test_sampling_is_fixed_per_claim_and_matches_its_rate_succeeds(tmp_path):
    key = load_or_create_key(tmp_path)
    assert sampled(key, 5, 0, RATE) == sampled(key, 5, 0, RATE)
    share = sum(sampled(key, t, 0, RATE) for t in TASKS) / len(TASKS)
    assert 0.27 < share < 0.33
    again = sum(sampled(key, t, 0, RATE) == sampled(key, t, 1, RATE) for t in TASKS) / len(TASKS)
    assert 0.53 < again < 0.63  # a new epoch is a new, independent draw (0.3^2 + 0.7^2 = 0.58 agree by chance)
    assert all(sampled(key, t, 0, 1.0) for t in range(50)) and not any(sampled(key, t, 0, 0.0) for t in range(50))


def test_solver_that_knows_the_code_cannot_pick_unchecked_tasks_succeeds(tmp_path):
    """The attack v1 allowed: the solver computes which tasks the verifier skips and cheats only there. It knows this
    code and the verifier's address; it does not know the key. Whatever it predicts, the tasks it picks are checked at
    the sampling rate (with v1's public lottery it would have been caught on none of them)."""
    verifier = "0x" + "11" * 20
    key = load_or_create_key(tmp_path)
    picked = [t for t in TASKS if not _v1_sampled(verifier, t, RATE)]  # "nobody checks these", per the public formula
    assert not any(_v1_sampled(verifier, t, RATE) for t in picked)  # v1: cheating there was never caught
    caught = sum(sampled(key, t, 0, RATE) for t in picked) / len(picked)
    assert 0.26 < caught < 0.34  # now: caught at the rate, as on any other task
    guessed_key = keccak(verifier.encode())  # or any key derived from public data
    picked = [t for t in TASKS if not sampled(guessed_key, t, 0, RATE)]
    assert 0.26 < sum(sampled(key, t, 0, RATE) for t in picked) / len(picked) < 0.34


def test_catch_probability_matches_independent_verifiers_succeeds(tmp_path):
    keys = [load_or_create_key(tmp_path / f"v{i}") for i in range(4)]
    caught = sum(any(sampled(k, t, 0, RATE) for k in keys) for t in TASKS) / len(TASKS)
    assert catch_probability(RATE, 4) == pytest.approx(1 - 0.7**4)
    assert abs(caught - catch_probability(RATE, 4)) < 0.03
    assert catch_probability(0.5, 4) == pytest.approx(0.9375)
