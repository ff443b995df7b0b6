"""Builders for engine tests (imported by conftest, the tests and _task.py).

The manifests and shards are the engine's reference-task builders (verity.engine.reference), so the
roots these tests see are the ones tests/vectors/ records."""
from __future__ import annotations

from verity.engine.reference import CID, TEXT, build_manifest, char_shards, digits_shards, manifest_doc

__all__ = ["CID", "TEXT", "build_manifest", "char_shards", "digits_shards", "manifest_doc"]
