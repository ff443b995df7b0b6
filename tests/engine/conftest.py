"""Fixtures for engine tests; the builders live in engine_builders.py."""
from __future__ import annotations

import pytest

from verity.engine.checkpoint import initial_state
from verity.engine.data import load_shard

from engine_builders import build_manifest, digits_shards


@pytest.fixture(scope="session")
def digits_bytes() -> dict[str, bytes]:
    return digits_shards()


@pytest.fixture
def mlp_task(digits_bytes):
    """(manifest, shard 0, eval shard, round-0 input state) for the digits MLP."""
    m = build_manifest("mlp")
    return (m, load_shard(digits_bytes["shard-000"], m.data, samples=539),
            load_shard(digits_bytes["eval"], m.data), initial_state(m))


@pytest.fixture(autouse=True)
def _restore_torch_settings():
    """run_task pins process-wide torch settings; leave other test folders as found."""
    from verity.engine.determinism import _restore, _snapshot
    saved = _snapshot()
    yield
    _restore(saved)
