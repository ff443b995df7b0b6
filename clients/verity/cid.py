"""CIDv0 <-> bytes32 conversion.

On-chain, a CID is stored as the bytes32 sha2-256 digest of a CIDv0
(`Qm…` = base58btc(0x12 0x20 ‖ digest)); see docs/protocol.md.
"""

from __future__ import annotations

from verity.errors import VerityError

_ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_INDEX = {c: i for i, c in enumerate(_ALPHABET)}
_MULTIHASH_PREFIX = b"\x12\x20"  # sha2-256, 32-byte digest
CIDV0_LENGTH = 46


class InvalidCid(VerityError, ValueError):
    """A string is not a CIDv0, or a digest is not 32 bytes."""

    def __init__(self, value: object, reason: str) -> None:
        self.value = value
        self.reason = reason
        super().__init__(f"invalid CID {value!r}: {reason}")


def b58encode(data: bytes) -> str:
    n = int.from_bytes(data, "big")
    out = []
    while n:
        n, r = divmod(n, 58)
        out.append(_ALPHABET[r])
    pad = len(data) - len(data.lstrip(b"\0"))
    return "1" * pad + "".join(reversed(out))


def b58decode(text: str) -> bytes:
    n = 0
    for ch in text:
        if ch not in _INDEX:
            raise ValueError(f"character {ch!r} is not base58btc")
        n = n * 58 + _INDEX[ch]
    body = n.to_bytes((n.bit_length() + 7) // 8, "big")
    pad = len(text) - len(text.lstrip("1"))
    return b"\0" * pad + body


def validate_cid(cid: object) -> str:
    """Return `cid` unchanged if it is a CIDv0 (`Qm` + 44 base58 chars), else raise InvalidCid."""
    if not isinstance(cid, str):
        raise InvalidCid(cid, f"expected str, got {type(cid).__name__}")
    if len(cid) != CIDV0_LENGTH or not cid.startswith("Qm"):
        raise InvalidCid(cid, f"a CIDv0 is 'Qm' + 44 base58 characters ({CIDV0_LENGTH} in all)")
    try:
        raw = b58decode(cid)
    except ValueError as exc:
        raise InvalidCid(cid, str(exc)) from None
    if len(raw) != 34 or not raw.startswith(_MULTIHASH_PREFIX):
        raise InvalidCid(cid, "not a sha2-256 multihash")
    return cid


def is_cid(value: object) -> bool:
    try:
        validate_cid(value)
    except InvalidCid:
        return False
    return True


def cid_to_digest(cid: str) -> bytes:
    """The 32-byte sha2-256 digest inside a CIDv0 (what goes on-chain as bytes32)."""
    return b58decode(validate_cid(cid))[2:]


def digest_to_cid(digest: bytes | str) -> str:
    """The CIDv0 of a 32-byte sha2-256 digest (bytes or 0x-hex, as read from a contract)."""
    if isinstance(digest, str):
        text = digest[2:] if digest.startswith(("0x", "0X")) else digest
        try:
            digest = bytes.fromhex(text)
        except ValueError:
            raise InvalidCid(digest, "not a hex string") from None
    if not isinstance(digest, (bytes, bytearray)) or len(digest) != 32:
        raise InvalidCid(digest, "a digest is exactly 32 bytes")
    return b58encode(_MULTIHASH_PREFIX + bytes(digest))
