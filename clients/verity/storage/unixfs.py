"""Local computation of the CIDv0 that `ipfs add` gives with default settings.

Defaults shared by Kubo and js-ipfs: CIDv0 (dag-pb, sha2-256), fixed-size
chunks of 256 KiB, balanced layout with at most 174 links per node, no raw
leaves. Every block is a dag-pb PBNode whose Data is a UnixFS `File` message:
- a leaf holds its chunk: `{Type: File, Data: chunk, filesize: len(chunk)}`;
- an inner node holds no data, one link per child (`Name: ""`, `Tsize`: the
  child's cumulative size) and `{Type: File, filesize, blocksizes: [...]}`.
A file of at most one chunk is a single leaf. The builder is streaming: it
keeps 32 bytes and two sizes per chunk, so memory stays small for any file.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from verity.cid import b58encode

CHUNK_SIZE = 256 * 1024
MAX_LINKS = 174
_FILE = 2  # UnixFS Data.DataType.File


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field_bytes(field: int, payload: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def _field_varint(field: int, value: int) -> bytes:
    return _varint(field << 3) + _varint(value)


@dataclass(frozen=True)
class _Node:
    digest: bytes  # sha2-256 of the block
    tsize: int  # block size + children's tsize (cumulative size)
    filesize: int  # bytes of file content below this node


def _leaf(chunk: bytes) -> tuple[_Node, bytes]:
    unixfs = _field_varint(1, _FILE)
    if chunk:
        unixfs += _field_bytes(2, chunk)
    unixfs += _field_varint(3, len(chunk))
    block = _field_bytes(1, unixfs)
    return _Node(hashlib.sha256(block).digest(), len(block), len(chunk)), block


def _parent(children: list[_Node]) -> _Node:
    links = b"".join(
        _field_bytes(2, _field_bytes(1, b"\x12\x20" + c.digest) + _field_bytes(2, b"") + _field_varint(3, c.tsize))
        for c in children
    )
    filesize = sum(c.filesize for c in children)
    unixfs = _field_varint(1, _FILE) + _field_varint(3, filesize)
    unixfs += b"".join(_field_varint(4, c.filesize) for c in children)
    block = links + _field_bytes(1, unixfs)
    return _Node(hashlib.sha256(block).digest(), len(block) + sum(c.tsize for c in children), filesize)


def _cid(node: _Node) -> str:
    return b58encode(b"\x12\x20" + node.digest)


class CidBuilder:
    """Feed bytes in any pieces; `cid()` gives the CIDv0 `ipfs add` would give."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._leaves: list[_Node] = []
        self.size = 0

    def update(self, data: bytes) -> None:
        self.size += len(data)
        self._buf += data
        while len(self._buf) >= CHUNK_SIZE:
            self._leaves.append(_leaf(bytes(self._buf[:CHUNK_SIZE]))[0])
            del self._buf[:CHUNK_SIZE]

    def cid(self) -> str:
        level = list(self._leaves)
        if self._buf or not level:
            level.append(_leaf(bytes(self._buf))[0])
        while len(level) > 1:
            level = [_parent(level[i : i + MAX_LINKS]) for i in range(0, len(level), MAX_LINKS)]
        return _cid(level[0])


def cid_of_bytes(data: bytes) -> str:
    builder = CidBuilder()
    builder.update(data)
    return builder.cid()


def cid_of_file(path: str | Path, read_size: int = 4 * CHUNK_SIZE) -> str:
    builder = CidBuilder()
    with open(path, "rb") as fh:
        while piece := fh.read(read_size):
            builder.update(piece)
    return builder.cid()
