"""A node compares the on-chain job with its manifest before training (verity.chain.protocol.job_mismatches)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from verity.chain.protocol import job_mismatches
from verity.engine.manifest import load_manifest
from verity.submit.prepare import JobSpec, plan_job


@pytest.fixture(scope="module")
def prepared():
    return plan_job(JobSpec(shards=2, rounds=3, steps=20, k=10, replication=2))


def _job(prepared, **changes):
    """The Job struct fields the check reads, as the submit path posts them (ABI field names)."""
    p = prepared.post_params()
    fields = dict(shards=p.shards, rounds=p.rounds, stepsPerRound=p.stepsPerRound, checkpointInterval=p.checkpointInterval,
                  replication=p.replication, profileBit=p.profileBit, deviceClass=p.deviceClass, minMemoryMb=p.minMemoryMb,
                  region=p.region, minBandwidthMbps=p.minBandwidthMbps, challengeWindow=p.challengeWindow)
    fields.update(changes)
    return SimpleNamespace(**fields)


def test_job_mismatches_submitted_job_matches_its_manifest_succeeds(prepared):
    assert job_mismatches(_job(prepared), load_manifest(prepared.manifest_bytes)) == []


@pytest.mark.parametrize("field, value", [("shards", 3), ("rounds", 1), ("stepsPerRound", 40), ("checkpointInterval", 5),
                                          ("replication", 1), ("profileBit", 2), ("deviceClass", 1),
                                          ("minMemoryMb", 1),  # a smaller minimum would draw nodes too small for it
                                          ("region", 1), ("minBandwidthMbps", 100),  # the draw's network filters
                                          ("challengeWindow", 1)])  # v2: the manifest said 60, the chain 1
def test_job_mismatches_each_differing_parameter_named(prepared, field, value):
    wrong = job_mismatches(_job(prepared, **{field: value}), load_manifest(prepared.manifest_bytes))
    assert len(wrong) == 1 and wrong[0].startswith(f"{field}: job {value}, manifest ")


@pytest.mark.parametrize("profile, bit, device", [("portable-f32", 4, 0), ("cuda-f32-strict", 2, 1),
                                                  ("cpu-f32-strict", 1, 0)])
def test_submitted_profile_is_in_the_manifest_and_the_job_succeeds(profile, bit, device):
    """--profile reaches both the manifest and the posted job's profile bit, so nodes of that class draw it."""
    p = plan_job(JobSpec(shards=2, rounds=1, steps=10, k=10, profile=profile))
    m = load_manifest(p.manifest_bytes)
    assert m.determinism == profile
    assert (p.post_params().profileBit, p.post_params().deviceClass) == (bit, device)
    assert job_mismatches(_job(p), m) == []


def test_unknown_profile_refused_before_anything_is_built():
    from verity.submit.options import BadJobSpec

    with pytest.raises(BadJobSpec, match="--profile: 'gpu-fast' is not one of"):
        plan_job(JobSpec(shards=2, profile="gpu-fast"))


def test_submit_profile_names_are_the_engine_profiles():
    from verity.engine.determinism import PROFILES
    from verity.submit.options import PROFILE_NAMES

    assert PROFILE_NAMES == tuple(PROFILES)
