"""The positional Merkle tree of docs/protocol.md, identical to the Solidity one.

leaf_j = keccak256(abi.encode(uint256 j, bytes32 h_j)); the leaf level is
padded with the zero word (not a hashed leaf) to the next power of two; a
parent is keccak256(abi.encode(bytes32 left, bytes32 right)). One leaf is its
own root. A proof lists siblings from the leaf level up.
"""
from __future__ import annotations

from eth_abi import encode
from eth_hash.auto import keccak

ZERO = b"\x00" * 32


def leaf(j: int, h: bytes) -> bytes:
    return keccak(encode(["uint256", "bytes32"], [j, h]))


def node(left: bytes, right: bytes) -> bytes:
    return keccak(left + right)  # abi.encode of two bytes32 is their concatenation


def levels(hashes: list[bytes]) -> list[list[bytes]]:
    if not hashes:
        raise ValueError("a trace has at least one hash")
    level = [leaf(j, h) for j, h in enumerate(hashes)]
    level += [ZERO] * ((1 << (len(level) - 1).bit_length()) - len(level))
    out = [level]
    while len(level) > 1:
        level = [node(level[i], level[i + 1]) for i in range(0, len(level), 2)]
        out.append(level)
    return out


def root(hashes: list[bytes]) -> bytes:
    return levels(hashes)[-1][0]


def proof(hashes: list[bytes], j: int) -> list[bytes]:
    if not 0 <= j < len(hashes):
        raise IndexError(f"index {j} outside a trace of {len(hashes)} hashes")
    out = []
    for level in levels(hashes)[:-1]:
        out.append(level[j ^ 1])
        j //= 2
    return out


def verify(root_: bytes, j: int, h: bytes, proof_: list[bytes]) -> bool:
    acc = leaf(j, h)
    for sibling in proof_:
        acc = node(acc, sibling) if j % 2 == 0 else node(sibling, acc)
        j //= 2
    return j == 0 and acc == root_
