"""Unit tests of job preparation (storage faked: CIDs computed locally, nothing uploaded)."""
from __future__ import annotations

import json
from unittest import mock

import pytest
from eth_utils import keccak

from verity.cid import cid_to_digest
from verity.engine.checkpoint import initial_state
from verity.engine.manifest import load_manifest
from verity.storage import cid_of_bytes
from verity.submit import BadJobSpec, JobSpec, prepare_job


def _storage():
    s = mock.Mock()
    s.put_bytes.side_effect = cid_of_bytes
    return s


def test_prepared_digits_job_has_a_valid_manifest_and_matching_post_params():
    storage = _storage()
    p = prepare_job(JobSpec(shards=3, rounds=2, steps=20, k=10), storage)
    m = load_manifest(p.manifest_bytes)
    assert len(m.shards) == 3 and sum(s.samples for s in m.shards) + m.eval_shard.samples == 1797
    assert m.data.x_shape == [64] and m.model.config.out_features == 10
    uploaded = [c.args[0] for c in storage.put_bytes.call_args_list]
    assert cid_of_bytes(uploaded[-1]) == p.manifest_cid and uploaded[-1] == p.manifest_bytes
    params = p.post_params()
    assert params[0] == cid_to_digest(p.manifest_cid) and params[1] == keccak(p.manifest_bytes)
    assert params[2] == initial_state(m).hash
    assert params[3:7] == (3, 2, 20, 10)
    assert p.escrow() == 10**18 * 2 * (3 + 1) * 2
    assert json.loads(p.manifest_bytes)["shards"][0]["cid"] == cid_of_bytes(uploaded[0])


@pytest.mark.parametrize("spec, field", [(JobSpec(replication=3), "replication"),
                                         (JobSpec(dataset="/nonexistent.npz"), "dataset"),
                                         (JobSpec(model="rnn"), "model")])
def test_bad_job_specs_name_the_field_and_upload_nothing(spec, field):
    storage = _storage()
    with pytest.raises(BadJobSpec, match=f"job spec {field}"):
        prepare_job(spec, storage)
    assert not storage.put_bytes.called
