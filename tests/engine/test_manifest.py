import json

import pytest

from verity.engine.manifest import MAX_MANIFEST_BYTES, load_manifest, manifest_bytes, manifest_schema
from verity.errors import ManifestInvalid

from engine_builders import CID, build_manifest, manifest_doc


@pytest.mark.parametrize("arch", ["mlp", "cnn", "gpt"])
def test_load_manifest_valid_succeeds(arch):
    m = build_manifest(arch)
    assert m.schema_version == 1 and m.n_checkpoints == 4
    assert load_manifest(manifest_bytes(m)) == m  # canonical bytes round-trip


BAD = [
    ("extra field", {"surprise": 1}, "surprise"),
    ("schema version", {"schema_version": 2}, "schema_version"),
    ("negative batch", {"batch_size": 0}, "batch_size"),
    ("huge batch", {"batch_size": 1 << 20}, "batch_size"),
    ("lr as string", {"optimizer": {"name": "adam", "lr": "0.1"}}, "optimizer"),
    ("lr zero", {"optimizer": {"name": "sgd", "lr": 0}}, "optimizer"),
    ("unknown optimizer", {"optimizer": {"name": "lion", "lr": 0.1}}, "optimizer"),
    ("short cid", {"shards": [{"cid": "QmShort", "samples": 1}]}, "shards.0.cid"),
    ("cidv1", {"shards": [{"cid": "bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi", "samples": 1}]}, "shards.0.cid"),
    ("bad base58", {"shards": [{"cid": "Qm" + "0" * 44, "samples": 1}]}, "shards.0.cid"),
    ("no shards", {"shards": []}, "shards"),
    ("zero samples", {"shards": [{"cid": CID, "samples": 0}]}, "shards.0.samples"),
    ("k does not divide", {"checkpoint_interval": 7}, "checkpoint_interval"),
    ("both inits", {"init": {"seed": 1, "weights": CID}}, "init"),
    ("no init", {"init": {}}, "init"),
    ("trim for mean", {"aggregation": {"rule": "mean", "trim": 0.1}}, "aggregation"),
    ("trim too big", {"aggregation": {"rule": "trimmed_mean", "trim": 0.5}}, "aggregation.trim"),
    ("cuda on cpu hw", {"determinism": "cuda-f32-strict"}, "hardware.device_class"),
    ("unknown profile", {"determinism": "gpu-fast"}, "determinism"),
    ("replication 0", {"verification": {"replication": 0}}, "verification.replication"),
    ("window too short", {"verification": {"replication": 1, "challenge_window": 1}}, "verification.challenge_window"),
    ("model/data mismatch", {"data": {"task": "classification", "x_shape": [65], "x_dtype": "float32", "num_classes": 10}},
     "model.config.in_features"),
    ("too many params", {"model": {"arch": "mlp", "config": {"in_features": 64, "hidden": [16384] * 8, "out_features": 10}}},
     "model.config"),
]


@pytest.mark.parametrize("why,patch,field", BAD, ids=[b[0] for b in BAD])
def test_load_manifest_schema_violation_reverts(why, patch, field):
    with pytest.raises(ManifestInvalid) as e:
        load_manifest(json.dumps(manifest_doc(**patch)).encode())
    assert e.value.field.startswith(field), str(e.value)
    assert field.split(".")[0] in str(e.value)


def test_load_manifest_document_level_refusals():
    for data in (b"\xff\xfe", b"[1, 2]", b"{\"a\": 1, \"a\": 2}", b" " * (MAX_MANIFEST_BYTES + 1)):
        with pytest.raises(ManifestInvalid):
            load_manifest(data)


def test_schema_export_is_strict_and_committed():
    from pathlib import Path
    schema = manifest_schema()
    assert schema["additionalProperties"] is False
    committed = json.loads((Path(__file__).parents[2] / "docs" / "manifest.schema.json").read_text())
    assert committed == schema, "run: verity data schema -o docs/manifest.schema.json"
