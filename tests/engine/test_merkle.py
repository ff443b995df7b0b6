import json
from pathlib import Path

import pytest

from verity.engine import merkle

VECTORS = json.loads((Path(__file__).parents[1] / "vectors" / "merkle.json").read_text())


def _b(h: str) -> bytes:
    return bytes.fromhex(h.removeprefix("0x"))


@pytest.mark.parametrize("case", VECTORS["cases"], ids=lambda c: f"{len(c['hashes'])}-leaves")
def test_root_and_proofs_match_vectors(case):
    hashes = [_b(h) for h in case["hashes"]]
    root = merkle.root(hashes)
    assert root == _b(case["root"])
    for j, expected in enumerate(case["proofs"]):
        p = merkle.proof(hashes, j)
        assert p == [_b(s) for s in expected]
        assert merkle.verify(root, j, hashes[j], p)


def test_verify_rejects_wrong_leaf_index_or_hash():
    hashes = [_b(h) for h in VECTORS["cases"][4]["hashes"]]
    root, p = merkle.root(hashes), merkle.proof(hashes, 2)
    assert not merkle.verify(root, 3, hashes[2], p)
    assert not merkle.verify(root, 2, hashes[1], p)
    assert not merkle.verify(root, 2 + (1 << len(p)), hashes[2], p)


def test_empty_trace_and_out_of_range_proof_refused():
    with pytest.raises(ValueError):
        merkle.root([])
    with pytest.raises(IndexError):
        merkle.proof([b"\x01" * 32], 1)
