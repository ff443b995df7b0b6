"""Storage against a fake /api/v0 transport: verification, bounds, retries, errors."""

from __future__ import annotations

import random

import pytest
from ipfshttpclient import exceptions as ipfs_exc

from verity.cid import InvalidCid
from verity.errors import VerityError
from verity.storage import (
    CidNotFound,
    ContentMismatch,
    NodeUnreachable,
    ObjectTooLarge,
    Storage,
    StorageRequestFailed,
    cid_of_bytes,
)

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
    """Answers /files/stat, /cat and /add like a node holding `content` (which it may misreport)."""

    def __init__(self, content: bytes = DATA, *, stat_size: int | None = None, add_cid: str | None = None):
        self.content, self.stat_size, self.add_cid = content, stat_size, add_cid
        self.calls: list[str] = []
        self.failures: list[BaseException] = []  # raised (then dropped) by the next calls

    def request(self, path, args=(), *, opts=None, decoder=None, timeout=None, stream=False, data=None, headers=None):
        self.calls.append(path)
        if self.failures:
            raise self.failures.pop(0)
        if path == "/files/stat":
            size = len(self.content) if self.stat_size is None else self.stat_size
            return [{"Size": size, "Hash": args[0][6:], "Type": "file"}]
        if path == "/cat":
            limit = int(opts["length"])
            body = self.content[:limit]
            return FakeStream([body[i : i + 65536] for i in range(0, len(body), 65536)])
        if path == "/add":
            received = b"".join(data)
            content = received[received.index(b"\r\n\r\n") + 4 : received.rindex(b"\r\n--")]
            return [{"Hash": self.add_cid or cid_of_bytes(content)}]
        if path == "/version":
            return [{"Version": "fake"}]
        raise AssertionError(path)


def make_storage(node: FakeNode, **kwargs) -> Storage:
    storage = Storage("/ip4/127.0.0.1/tcp/1/http", timeout=1, retries=2, backoff=0.001, **kwargs)
    storage._http = node
    return storage


def test_get_bytes_verified_succeeds():
    node = FakeNode()
    assert make_storage(node).get_bytes(CID) == DATA
    assert node.calls == ["/files/stat", "/cat"]


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
    node = FakeNode(stat_size=10)  # the root claims 10 bytes, the stream carries more
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
