"""Each download is capped at what the object it fetches can be, and holds one copy in memory.

Tried: a 600 MiB shard over the 512 MiB cap was downloaded whole before being refused
(1.5 GB peak). Here a manifest that lists a shard of 10 samples gets a real IPFS object
of 539 samples: it is refused from its size alone, before any byte is fetched."""
from __future__ import annotations

import json
import os
import tracemalloc
from pathlib import Path

import pytest

from verity.engine.checkpoint import checkpoint_bytes, checkpoint_cap, initial_state
from verity.engine.data import shard_cap
from verity.engine.datasets import digits, make_shards
from verity.engine.manifest import load_manifest
from verity.node.context import NodeContext
from verity.storage import ObjectTooLarge

pytestmark = pytest.mark.integration
MiB = 1 << 20
MLP = {"arch": "mlp", "config": {"in_features": 64, "hidden": [64], "out_features": 10}}
DATA = {"task": "classification", "x_shape": [64], "x_dtype": "float32", "num_classes": 10}


def _manifest(shard_cid: str, samples: int):
    return load_manifest(json.dumps({
        "schema_version": 1, "model": MLP, "init": {"seed": 1}, "data": DATA,
        "shards": [{"cid": shard_cid, "samples": samples}], "optimizer": {"name": "sgd", "lr": 0.1},
        "batch_size": 8, "steps_per_round": 4, "rounds": 1, "checkpoint_interval": 2}).encode())


class _Counting:
    """The real storage client, recording how many bytes each download streamed."""

    def __init__(self, storage):
        self.storage, self.fetched = storage, []

    def get_bytes(self, cid, max_bytes=None, **kw):
        self.fetched.append(max_bytes)
        return self.storage.get_bytes(cid, max_bytes, **kw)


def _context(storage, tmp_path: Path, manifest) -> NodeContext:
    ctx = NodeContext(chain=None, storage=storage, state_dir=tmp_path)
    ctx._manifests[1] = manifest
    return ctx


def test_shardDownload_largerThanManifestSays_failsBeforeFetching(storage, tmp_path):
    x, y = digits()
    shard = make_shards(x, y, task="classification", n_shards=3, eval_fraction=0.1, seed=0)["shard-000"]
    cid = storage.put_bytes(shard)
    m = _manifest(cid, samples=10)
    assert len(shard) > shard_cap(m.data, 10)
    with pytest.raises(ObjectTooLarge):
        _context(storage, tmp_path, m).shard(1, 0)


def test_shardDownload_exactSize_succeeds(storage, tmp_path):
    x, y = digits()
    shard = make_shards(x, y, task="classification", n_shards=3, eval_fraction=0.1, seed=0)["shard-000"]
    m = _manifest(storage.put_bytes(shard), samples=539)
    counting = _Counting(storage)
    got = _context(counting, tmp_path, m).shard(1, 0)
    assert len(got) == 539
    assert counting.fetched == [shard_cap(m.data, 539)] and shard_cap(m.data, 539) < 2 * len(shard)


def test_checkpointDownload_overModelCap_fails(storage, tmp_path):
    m = _manifest("QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG", samples=10)
    good = checkpoint_bytes(initial_state(m), m)
    assert len(good) <= checkpoint_cap(m)
    cid = storage.put_bytes(good + b"\0" * (checkpoint_cap(m) + 1 - len(good)))
    with pytest.raises(ObjectTooLarge):
        _context(storage, tmp_path, m).state_bytes(cid, initial_state(m).hash, m)


def test_getBytes_holdsOneCopy_succeeds(storage):
    """Peak Python memory of a 24 MiB download stays well under two copies of it."""
    size = 24 * MiB
    cid = storage.put_bytes(os.urandom(size))
    tracemalloc.start()
    try:
        data = storage.get_bytes(cid)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(data) == size
    assert peak < 1.5 * size, f"peak {peak / MiB:.1f} MiB for a {size / MiB:.0f} MiB download"
