"""Submit options of a job's network requirements (submit/network.py): `--region` and `--min-bandwidth-mbps` land in
the manifest (left out of its bytes when unset, so earlier manifests keep their CIDs) and from there in the postJob
parameters; each bad value names the option a user typed, before anything is uploaded or spent."""
from __future__ import annotations

import json

import pytest

from verity.chain.protocol import MAX_BANDWIDTH_FLOOR_MBPS, REGION_ASIA, REGION_EUROPE, REGIONS, job_mismatches
from verity.engine.manifest import load_manifest, manifest_bytes
from verity.errors import ManifestInvalid
from verity.submit.prepare import JobSpec, plan_job
from verity.submit.options import BadJobSpec


def test_region_and_bandwidth_land_in_the_manifest_and_the_job_succeeds():
    prepared = plan_job(JobSpec(shards=2, region="asia", min_bandwidth_mbps=100))
    m = load_manifest(prepared.manifest_bytes)
    assert (m.hardware.region, m.hardware.min_bandwidth_mbps) == ("asia", 100)
    p = prepared.post_params()
    assert (p.region, p.minBandwidthMbps) == (REGION_ASIA, 100)
    assert job_mismatches(p, m) == []  # what the node checks before training


def test_plain_job_manifest_has_no_network_fields_and_asks_for_none_succeeds():
    prepared = plan_job(JobSpec(shards=2))
    hardware = json.loads(prepared.manifest_bytes)["hardware"]
    assert "region" not in hardware and "min_bandwidth_mbps" not in hardware
    p = prepared.post_params()
    assert (p.region, p.minBandwidthMbps) == (0, 0)


def test_manifest_without_network_fields_keeps_its_bytes_succeeds():
    """Unset, the fields are left out of the canonical bytes (earlier manifests keep their CID); set, they round-trip."""
    plain = load_manifest(plan_job(JobSpec(shards=2)).manifest_bytes)
    doc = json.loads(manifest_bytes(plain))
    assert "region" not in doc["hardware"] and "min_bandwidth_mbps" not in doc["hardware"]
    asked = load_manifest(plan_job(JobSpec(shards=2, region="europe", min_bandwidth_mbps=10)).manifest_bytes)
    raw = manifest_bytes(asked)
    assert load_manifest(raw) == asked and b'"region":"europe"' in raw and b'"min_bandwidth_mbps":10' in raw
    assert asked.model_copy(update={"hardware": plain.hardware}) == plain  # nothing else differs


@pytest.mark.parametrize("fields, option, why", [
    ({"region": "mars"}, "--region", "'mars' is not a region"),
    ({"region": "Europe"}, "--region", "is not a region"),
    ({"min_bandwidth_mbps": -1}, "--min-bandwidth-mbps", "not in 0..10000"),
    ({"min_bandwidth_mbps": 10_001}, "--min-bandwidth-mbps", "not in 0..10000"),
])
def test_bad_network_option_names_the_option_fails(fields, option, why):
    with pytest.raises(BadJobSpec) as err:
        plan_job(JobSpec(shards=2, **fields))
    assert str(err.value).startswith(option) and why in str(err.value)


@pytest.mark.parametrize("hardware, field", [({"region": "atlantis"}, "hardware.region"),
                                             ({"min_bandwidth_mbps": 0}, "hardware.min_bandwidth_mbps"),
                                             ({"min_bandwidth_mbps": MAX_BANDWIDTH_FLOOR_MBPS + 1},
                                              "hardware.min_bandwidth_mbps")])
def test_manifest_refuses_unknown_region_or_bandwidth_out_of_range_fails(hardware, field):
    doc = json.loads(plan_job(JobSpec(shards=2)).manifest_bytes)
    doc["hardware"].update(hardware)
    with pytest.raises(ManifestInvalid) as err:
        load_manifest(json.dumps(doc).encode())
    assert err.value.field == field


@pytest.mark.parametrize("field, value", [("region", REGION_EUROPE), ("minBandwidthMbps", 10)])
def test_job_mismatches_names_a_differing_network_requirement_fails(field, value):
    """A job posted with other network filters than its manifest's is declined as unusable input."""
    prepared = plan_job(JobSpec(shards=2, region="asia", min_bandwidth_mbps=100))
    wrong = job_mismatches(prepared.post_params()._replace(**{field: value}), load_manifest(prepared.manifest_bytes))
    assert len(wrong) == 1 and wrong[0].startswith(f"{field}: job {value}, manifest ")


def test_every_region_name_and_the_top_bandwidth_floor_are_accepted_succeeds():
    for name, code in REGIONS.items():
        assert plan_job(JobSpec(shards=2, region=name)).post_params().region == code
    top = plan_job(JobSpec(shards=2, min_bandwidth_mbps=MAX_BANDWIDTH_FLOOR_MBPS))
    assert load_manifest(top.manifest_bytes).hardware.min_bandwidth_mbps == top.post_params().minBandwidthMbps
