"""A node compares the on-chain job with its manifest before training (verity.chain.protocol.job_mismatches)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from verity.chain.protocol import job_mismatches
from verity.engine.manifest import load_manifest
from verity.submit import JobSpec, plan_job


@pytest.fixture(scope="module")
def prepared():
    return plan_job(JobSpec(shards=2, rounds=3, steps=20, k=10, replication=2))


def _job(prepared, **changes):
    """The Job struct fields the check reads, as the submit path posts them (ABI field names)."""
    p = prepared.post_params()
    fields = dict(shards=p.shards, rounds=p.rounds, stepsPerRound=p.stepsPerRound, checkpointInterval=p.checkpointInterval,
                  replication=p.replication, profileBit=p.profileBit, deviceClass=p.deviceClass)
    fields.update(changes)
    return SimpleNamespace(**fields)


def test_job_mismatches_submitted_job_matches_its_manifest_succeeds(prepared):
    assert job_mismatches(_job(prepared), load_manifest(prepared.manifest_bytes)) == []


@pytest.mark.parametrize("field, value", [("shards", 3), ("rounds", 1), ("stepsPerRound", 40), ("checkpointInterval", 5),
                                          ("replication", 1), ("profileBit", 2), ("deviceClass", 1)])
def test_job_mismatches_each_differing_parameter_named(prepared, field, value):
    wrong = job_mismatches(_job(prepared, **{field: value}), load_manifest(prepared.manifest_bytes))
    assert len(wrong) == 1 and wrong[0].startswith(f"{field}: job {value}, manifest ")
