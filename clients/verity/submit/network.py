"""Network requirements of a job (issue 9 item 4): `--region` and `--min-bandwidth-mbps`.

They land in the manifest (`hardware.region`, `hardware.min_bandwidth_mbps`, left out of its bytes when unset so
earlier manifests keep their CIDs) and from there, and only there, in the postJob parameters: a node compares the
job on-chain with its manifest (protocol.job_mismatches) and declines one that disagrees. The draw weighs only
stake declared in that region and bandwidth tier (NodeRegistry.declareNetwork; `verity node register --region`).
"""
from __future__ import annotations

from verity.chain.protocol import MAX_BANDWIDTH_FLOOR_MBPS, REGIONS

HELP = {
    "region": f"draw the replicas only from nodes that declared this region ({', '.join(REGIONS)}); "
              "referees and verifiers still come from every region",
    "min_bandwidth_mbps": "draw the replicas only from nodes that declared at least this bandwidth (Mbit/s), rounded "
                          f"up to a tier floor (10, 100, 1000, {MAX_BANDWIDTH_FLOOR_MBPS}); 0 = any",
}

OPTION_OF = {"hardware.region": "region", "hardware.min_bandwidth_mbps": "min_bandwidth_mbps"}


def validate_network(spec) -> None:
    """The options alone (before any data is loaded)."""
    from verity.submit.options import BadJobSpec

    if spec.region and spec.region not in REGIONS:
        raise BadJobSpec("region", f"{spec.region!r} is not a region ({', '.join(REGIONS)})")
    if not 0 <= spec.min_bandwidth_mbps <= MAX_BANDWIDTH_FLOOR_MBPS:
        raise BadJobSpec("min_bandwidth_mbps", f"{spec.min_bandwidth_mbps} is not in 0..{MAX_BANDWIDTH_FLOOR_MBPS}")


def add_network(doc: dict, spec) -> None:
    """Write the options into a manifest document being built by plan_job (nothing when unset)."""
    if spec.region:
        doc["hardware"]["region"] = spec.region
    if spec.min_bandwidth_mbps:
        doc["hardware"]["min_bandwidth_mbps"] = spec.min_bandwidth_mbps
