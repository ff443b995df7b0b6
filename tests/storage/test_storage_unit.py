"""Storage against a fake /api/v0 transport: verification, bounds, retries, errors."""

from __future__ import annotations

import random

import pytest
from ipfshttpclient import exceptions as ipfs_exc

from verity.cid import InvalidCid
from verity.errors import VerityError
from verity.storage import (
    CHUNK_SIZE,
    CidNotFound,
    ContentMismatch,
    NodeUnreachable,
    ObjectTooLarge,
    Storage,
    StorageRequestFailed,
    cid_of_bytes,
)
from verity.storage.client import FETCH_WORKERS

DATA = random.Random(1).randbytes(300_000)  # two chunks
CID = cid_of_bytes(DATA)


class FakeStream:
    def __init__(self, pieces):
        self.pieces = pieces
        self.closed = False

    def __iter__(self):
        yield from self.pieces

    def close(self):
        self.closed = True


class FakeNode:
    """Answers /files/stat, /dag/export, /refs, /cat and /add like a node holding `content` (which it may misreport;
    `missing`: a block its peers never send)."""

    def __init__(self, content: bytes = DATA, *, stat_size: int | None = None, add_cid: str | None = None,
                 missing: str | None = None, block_size: int = CHUNK_SIZE + 14, stat_blocks: int | None = None):
        self.content, self.stat_size, self.add_cid, self.missing = content, stat_size, add_cid, missing
        self.block_size, self.stat_blocks = block_size, stat_blocks
        self.streams: list[FakeStream] = []
        self.calls: list[str] = []
        self.failures: list[BaseException] = []  # raised (then dropped) by the next calls

    def request(self, path, args=(), *, opts=None, decoder=None, timeout=None, stream=False, data=None, headers=None):
        self.calls.append(path)
        if self.failures:
            raise self.failures.pop(0)
        if path == "/files/stat":
            size = len(self.content) if self.stat_size is None else self.stat_size
            blocks = 0 if len(self.content) <= CHUNK_SIZE else -(-len(self.content) // CHUNK_SIZE)
            blocks = blocks if self.stat_blocks is None else self.stat_blocks
            return [{"Size": size, "Hash": args[0][6:], "Type": "file", "Blocks": blocks}]
        if path == "/cat":
            return self._stream(self.content[: int(opts["length"])])
        if path == "/refs":  # the root links to one leaf per chunk; a leaf links to nothing
            leaves = -(-len(self.content) // CHUNK_SIZE)
            return [{"Ref": f"QmLeaf{i}", "Err": ""} for i in range(leaves)] if args[0].startswith("Qm") and \
                not args[0].startswith("QmLeaf") else []
        if path == "/block/stat":
            if args[0] == self.missing:
                raise ipfs_exc.ErrorResponse(f"Want for {self.missing} aborted", None)
            return [{"Key": args[0], "Size": self.block_size}]
        if path == "/add":
            received = b"".join(data)
            content = received[received.index(b"\r\n\r\n") + 4 : received.rindex(b"\r\n--")]
            return [{"Hash": self.add_cid or cid_of_bytes(content)}]
        if path == "/version":
            return [{"Version": "fake"}]
        raise AssertionError(path)


    def _stream(self, body: bytes) -> FakeStream:
        self.streams.append(FakeStream([body[i : i + 65536] for i in range(0, len(body), 65536)]))
        return self.streams[-1]


def make_storage(node: FakeNode, **kwargs) -> Storage:
    storage = Storage("/ip4/127.0.0.1/tcp/1/http", timeout=1, retries=2, backoff=0.001, **kwargs)
    storage._http = node
    return storage


def test_get_bytes_verified_succeeds():
    node = FakeNode()
    assert make_storage(node).get_bytes(CID) == DATA
    # every block is brought in before the cat (js-ipfs exits when a cat is cut short waiting on a peer)
    assert node.calls == ["/files/stat", "/refs", "/block/stat", "/block/stat", "/refs", "/refs", "/cat"]
    assert all(s.closed for s in node.streams)


def test_get_one_block_object_is_one_cat_succeeds():
    node = FakeNode(DATA[:1000])
    assert make_storage(node).get_bytes(cid_of_bytes(DATA[:1000])) == DATA[:1000]
    assert node.calls == ["/files/stat", "/cat"]  # the root, read by files/stat, is the whole object


def test_get_with_a_block_nobody_sends_is_not_found_before_any_cat_reverts():
    node = FakeNode(missing="QmLeaf1")
    with pytest.raises(CidNotFound, match="Want for QmLeaf1 aborted"):
        make_storage(node).get_bytes(CID)
    assert "/cat" not in node.calls


def test_get_dag_with_more_blocks_than_its_limit_allows_fetches_none_reverts():
    """A root that understates its size cannot make the node fetch the DAG it links to: a file of at most `limit`
    bytes has at most about limit / CHUNK_SIZE blocks."""
    node = FakeNode(bytes(40 * CHUNK_SIZE), stat_size=1000)  # claims 1,000 bytes, links to 40 chunks
    with pytest.raises(ObjectTooLarge) as info:
        make_storage(node).get_bytes(CID, max_bytes=100_000)
    assert info.value.limit == 100_000
    assert "/block/stat" not in node.calls and "/cat" not in node.calls


def test_get_blocks_bigger_than_chunks_stop_within_one_window_reverts():
    """Blocks larger than a chunk (no CIDv0 file of ours has them) are counted as they land: past the cap, only the
    fetches already in flight finish."""
    node = FakeNode(bytes(40 * CHUNK_SIZE), stat_size=1000, block_size=1 << 20)
    with pytest.raises(ObjectTooLarge):
        make_storage(node).get_bytes(CID, max_bytes=20 * CHUNK_SIZE)  # 50 blocks allowed, a 5.1 MiB cap
    assert node.calls.count("/block/stat") < 6 + FETCH_WORKERS and "/cat" not in node.calls


def test_get_bytes_tampered_content_reverts():
    tampered = bytearray(DATA)
    tampered[123_456] ^= 0xFF
    with pytest.raises(ContentMismatch) as info:
        make_storage(FakeNode(bytes(tampered))).get_bytes(CID)
    assert info.value.expected == CID and info.value.actual == cid_of_bytes(bytes(tampered))
    assert isinstance(info.value, VerityError)


def test_get_file_tampered_content_writes_nothing_reverts(tmp_path):
    dest = tmp_path / "out" / "ckpt.safetensors"
    with pytest.raises(ContentMismatch):
        make_storage(FakeNode(DATA[:-1] + b"x")).get_file(CID, dest)
    assert not dest.exists()
    assert list(dest.parent.iterdir()) == []  # no temporary file left behind


def test_get_file_keeps_previous_file_on_failure_succeeds(tmp_path):
    dest = tmp_path / "ckpt"
    dest.write_bytes(b"old")
    with pytest.raises(ContentMismatch):
        make_storage(FakeNode(DATA[:-1] + b"x")).get_file(CID, dest)
    assert dest.read_bytes() == b"old"
    make_storage(FakeNode()).get_file(CID, dest)
    assert dest.read_bytes() == DATA


def test_get_declared_too_large_reverts_before_download():
    node = FakeNode()
    with pytest.raises(ObjectTooLarge) as info:
        make_storage(node).get_bytes(CID, max_bytes=len(DATA) - 1)
    assert info.value.size == len(DATA) and info.value.limit == len(DATA) - 1
    assert "/cat" not in node.calls


def test_get_lying_stat_capped_while_streaming_reverts(tmp_path):
    node = FakeNode(stat_size=10, stat_blocks=0)  # the root claims 10 bytes in one block, the stream carries more
    with pytest.raises(ObjectTooLarge):
        make_storage(node).get_file(CID, tmp_path / "x", max_bytes=100_000)
    assert list(tmp_path.iterdir()) == []


def test_get_transient_failures_retried_succeeds():
    node = FakeNode()
    node.failures = [ipfs_exc.ConnectionError("reset"), ipfs_exc.ProtocolError("eof")]
    assert make_storage(node).get_bytes(CID) == DATA


def test_node_down_after_retries_reverts():
    node = FakeNode()
    node.failures = [ipfs_exc.ConnectionError("refused")] * 3
    with pytest.raises(NodeUnreachable) as info:
        make_storage(node).get_bytes(CID)
    assert "verity devnet up" in str(info.value) and "/tcp/1/" in str(info.value)
    assert len(node.calls) == 3


def test_timeout_is_cid_not_found_without_retry_reverts():
    node = FakeNode()
    node.failures = [ipfs_exc.TimeoutError("read timed out")]
    with pytest.raises(CidNotFound) as info:
        make_storage(node).get_bytes(CID)
    assert info.value.cid == CID and isinstance(info.value, LookupError)
    assert node.calls == ["/files/stat"]


def test_node_error_response_reverts():
    node = FakeNode()
    node.failures = [ipfs_exc.ErrorResponse("this dag node is a directory", None)]
    with pytest.raises(StorageRequestFailed):
        make_storage(node).get_bytes(CID)


def test_invalid_cid_reverts():
    with pytest.raises(InvalidCid):
        make_storage(FakeNode()).get_bytes("QmNotACid")


def test_put_bytes_returns_verified_cid_succeeds():
    assert make_storage(FakeNode()).put_bytes(DATA) == CID


def test_put_node_reports_other_cid_reverts():
    with pytest.raises(ContentMismatch):
        make_storage(FakeNode(add_cid=cid_of_bytes(b"other"))).put_bytes(DATA)


def test_json_round_trip_and_cap_succeeds():
    obj = {"b": [1, 2, {"x": "é"}], "a": None}
    storage = make_storage(FakeNode())
    cid = storage.put_json(obj)
    node = FakeNode(b'{"a":null,"b":[1,2,{"x":"\xc3\xa9"}]}')
    assert cid == cid_of_bytes(node.content)
    assert make_storage(node).get_json(cid) == obj
    with pytest.raises(ObjectTooLarge):
        make_storage(FakeNode(), max_json_bytes=10).put_json(obj)
    with pytest.raises(ObjectTooLarge):
        make_storage(node, max_json_bytes=10).get_json(cid)
