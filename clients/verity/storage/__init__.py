"""Verified, bounded content storage on IPFS (HTTP RPC API; Kubo or js-ipfs)."""

from verity.storage.client import ADD_OPTS, Storage, canonical_json, to_multiaddr
from verity.storage.errors import (
    CidNotFound,
    ContentMismatch,
    InvalidJson,
    NodeUnreachable,
    ObjectTooLarge,
    StorageError,
    StorageRequestFailed,
)
from verity.storage.unixfs import CHUNK_SIZE, CidBuilder, cid_of_bytes, cid_of_file

__all__ = [
    "ADD_OPTS",
    "CHUNK_SIZE",
    "CidBuilder",
    "CidNotFound",
    "ContentMismatch",
    "InvalidJson",
    "NodeUnreachable",
    "ObjectTooLarge",
    "Storage",
    "StorageError",
    "StorageRequestFailed",
    "canonical_json",
    "cid_of_bytes",
    "cid_of_file",
    "to_multiaddr",
]
