"""The local CIDv0 computation against CIDs a js-ipfs node gave for the same bytes."""

import random

import pytest

from verity.storage.unixfs import CHUNK_SIZE, MAX_LINKS, CidBuilder, cid_of_bytes, cid_of_file

# size -> CID of random.Random(size).randbytes(size), as `ipfs add --only-hash` reported it.
NODE_VECTORS = {
    0: "QmbFMke1KXqnYyBBWxB74N4c5SBnJMVAiMNRcGu6x1AwQH",
    5: "Qmf8uaZsxUg7mRGaN9tQNz421PucS8h4FNp1qKZaZ5vScG",
    CHUNK_SIZE: "Qmbd9VNLTfpBW2arj1AkAJnVRYBq1WEY6Uu6wLEiemGipi",
    CHUNK_SIZE + 1: "QmdkAszdeWKht9nXSzPKGUYvUqpMfm325GuCn1pZnTa9ja",
    3 * CHUNK_SIZE + 17: "QmTsG6ax9FLKFQRWnACt1VGDu8i1B2NtHjU8UDmLvdgMLT",
    MAX_LINKS * CHUNK_SIZE + 1: "QmWvAUzQsaCFMPzTTFKwGmTmijHZ5aVRwJqGwrSHF89cuy",  # two levels of links
}


@pytest.mark.parametrize("size", sorted(NODE_VECTORS))
def test_cid_of_bytes_matches_node_succeeds(size):
    assert cid_of_bytes(random.Random(size).randbytes(size)) == NODE_VECTORS[size]


def test_cid_builder_independent_of_piece_sizes_succeeds():
    size = 3 * CHUNK_SIZE + 17
    data = random.Random(size).randbytes(size)
    builder = CidBuilder()
    rng = random.Random(7)
    pos = 0
    while pos < size:
        step = rng.randint(1, 200_000)
        builder.update(data[pos : pos + step])
        pos += step
    assert builder.size == size
    assert builder.cid() == NODE_VECTORS[size]


def test_cid_of_file_matches_bytes_succeeds(tmp_path):
    size = CHUNK_SIZE + 1
    path = tmp_path / "blob"
    path.write_bytes(random.Random(size).randbytes(size))
    assert cid_of_file(path) == NODE_VECTORS[size]


def test_cid_of_bytes_one_flipped_bit_differs_succeeds():
    data = bytearray(random.Random(5).randbytes(5))
    data[0] ^= 1
    assert cid_of_bytes(bytes(data)) != NODE_VECTORS[5]
