import hashlib

import pytest

from verity.cid import InvalidCid, cid_to_digest, digest_to_cid, is_cid, validate_cid
from verity.errors import VerityError

EMPTY_FILE_CID = "QmbFMke1KXqnYyBBWxB74N4c5SBnJMVAiMNRcGu6x1AwQH"  # `ipfs add` of an empty file
EMPTY_FILE_BLOCK = bytes.fromhex("0a0408021800")


def test_cid_to_digest_known_vector_succeeds():
    assert cid_to_digest(EMPTY_FILE_CID) == hashlib.sha256(EMPTY_FILE_BLOCK).digest()


@pytest.mark.parametrize("seed", range(20))
def test_digest_round_trip_succeeds(seed):
    digest = hashlib.sha256(bytes([seed])).digest()
    cid = digest_to_cid(digest)
    assert validate_cid(cid) == cid and len(cid) == 46 and cid.startswith("Qm")
    assert cid_to_digest(cid) == digest


def test_digest_to_cid_accepts_hex_succeeds():
    digest = cid_to_digest(EMPTY_FILE_CID)
    assert digest_to_cid("0x" + digest.hex()) == EMPTY_FILE_CID
    assert digest_to_cid(digest.hex()) == EMPTY_FILE_CID


def test_digest_with_leading_zero_bytes_round_trips_succeeds():
    digest = b"\0\0" + b"\x01" * 30
    assert cid_to_digest(digest_to_cid(digest)) == digest


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "Qm",
        EMPTY_FILE_CID[:-1],
        EMPTY_FILE_CID + "a",
        "bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi",  # CIDv1
        EMPTY_FILE_CID[:10] + "0" + EMPTY_FILE_CID[11:],  # '0' is not base58
        "Zm" + EMPTY_FILE_CID[2:],
        None,
        b"Qm",
    ],
)
def test_validate_cid_rejects_non_cidv0_reverts(bad):
    with pytest.raises(InvalidCid) as info:
        validate_cid(bad)
    assert isinstance(info.value, VerityError) and isinstance(info.value, ValueError)
    assert not is_cid(bad)


@pytest.mark.parametrize("bad", [b"\x01" * 31, b"\x01" * 33, "0x1234", "zz" * 32])
def test_digest_to_cid_wrong_digest_reverts(bad):
    with pytest.raises(InvalidCid):
        digest_to_cid(bad)
