"""verity.devnet.deploy.drop_stale_build: a contract newer than ape's manifest forces a full compile."""
from __future__ import annotations

import os

from verity.devnet.deploy import drop_stale_build


def _tree(tmp_path, source_age: float, manifest_age: float):
    (tmp_path / "contracts" / "types").mkdir(parents=True)
    (tmp_path / ".build").mkdir()
    source = tmp_path / "contracts" / "types" / "Types.sol"
    source.write_text("// a type the contracts import\n")
    manifest = tmp_path / ".build" / "__local__.json"
    manifest.write_text("{}")
    now = 1_800_000_000
    os.utime(source, (now - source_age, now - source_age))
    os.utime(manifest, (now - manifest_age, now - manifest_age))
    return manifest


def test_a_source_edited_after_the_build_drops_the_manifest(tmp_path):
    manifest = _tree(tmp_path, source_age=10, manifest_age=100)   # edited 90 s after the last compile
    assert drop_stale_build(tmp_path) is True
    assert not manifest.exists()


def test_a_build_newer_than_every_source_is_kept(tmp_path):
    manifest = _tree(tmp_path, source_age=100, manifest_age=10)
    assert drop_stale_build(tmp_path) is False
    assert manifest.exists()


def test_no_manifest_nothing_to_drop(tmp_path):
    (tmp_path / "contracts").mkdir()
    assert drop_stale_build(tmp_path) is False
