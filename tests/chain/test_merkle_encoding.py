"""The builders' fast Merkle levels agree with verity.engine.merkle (the protocol's reference)."""
import pytest

from chain_builders import Trace, rand32
from verity.engine import merkle


@pytest.mark.parametrize("count", [1, 2, 3, 5, 8, 33])
def test_fast_levels_match_reference(count):
    hashes = [rand32() for _ in range(count)]
    t = Trace(hashes)
    assert t.root == merkle.root(hashes)
    for j in range(count):
        assert t.proof(j) == merkle.proof(hashes, j)
        assert merkle.verify(t.root, j, hashes[j], t.proof(j))
