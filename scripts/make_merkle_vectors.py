"""Write tests/vectors/merkle.json: positional Merkle trees of DESIGN §5.

leaf_j = keccak256(abi.encode(uint256 j, bytes32 h_j)); pad with bytes32(0) to a
power of two; node = keccak256(abi.encode(left, right)). This independent,
minimal implementation produces the vectors that both forge (Solidity) and
pytest (verity.engine.merkle) are checked against.
"""
import hashlib
import json
from pathlib import Path

from eth_abi import encode
from eth_hash.auto import keccak


def leaf(j: int, h: bytes) -> bytes:
    return keccak(encode(["uint256", "bytes32"], [j, h]))


def tree(hashes: list[bytes]) -> list[list[bytes]]:
    level = [leaf(j, h) for j, h in enumerate(hashes)]
    size = 1
    while size < len(level):
        size *= 2
    level += [b"\x00" * 32] * (size - len(level))
    levels = [level]
    while len(level) > 1:
        level = [keccak(encode(["bytes32", "bytes32"], [level[i], level[i + 1]])) for i in range(0, len(level), 2)]
        levels.append(level)
    return levels


def proof(levels: list[list[bytes]], j: int) -> list[bytes]:
    out = []
    for level in levels[:-1]:
        out.append(level[j ^ 1])
        j //= 2
    return out


def main() -> None:
    cases = []
    for n_leaves in (1, 2, 3, 4, 5, 8, 11, 17):
        hashes = [hashlib.sha256(f"verity-vector-{n_leaves}-{j}".encode()).digest() for j in range(n_leaves)]
        levels = tree(hashes)
        cases.append({
            "hashes": ["0x" + h.hex() for h in hashes],
            "root": "0x" + levels[-1][0].hex(),
            "proofs": [["0x" + p.hex() for p in proof(levels, j)] for j in range(n_leaves)],
        })
    out = Path(__file__).resolve().parents[1] / "tests" / "vectors" / "merkle.json"
    out.write_text(json.dumps({"scheme": "verity-merkle-v1", "cases": cases}, indent=1) + "\n")
    print(f"wrote {len(cases)} cases to {out}")


if __name__ == "__main__":
    main()
