"""Errors of the storage layer; each builds its own message from the facts."""

from __future__ import annotations

from verity.errors import VerityError


class StorageError(VerityError):
    """Base of every storage error."""


class NodeUnreachable(StorageError, ConnectionError):
    """The IPFS HTTP RPC API did not answer."""

    def __init__(self, api_addr: str, reason: str):
        self.api_addr, self.reason = api_addr, reason
        super().__init__(
            f"IPFS node at {api_addr} is not reachable ({reason}); start the local nodes with "
            f"`verity devnet up`, or point VERITY_IPFS_API at a running node (Kubo or js-ipfs)"
        )


class CidNotFound(StorageError, LookupError):
    """No content for a CID arrived within the timeout (nobody has it, or it stalled)."""

    def __init__(self, cid: str, api_addr: str, timeout: float, reason: str = "no data"):
        self.cid, self.api_addr, self.timeout, self.reason = cid, api_addr, timeout, reason
        super().__init__(f"{cid} not retrievable through {api_addr} within {timeout:g} s ({reason})")


class ObjectTooLarge(StorageError, ValueError):
    """An object is bigger than the caller's bound; nothing was kept."""

    def __init__(self, cid: str, size: int, limit: int):
        self.cid, self.size, self.limit = cid, size, limit
        super().__init__(f"{cid} is {size} bytes or more, over the limit of {limit} bytes")


class ContentMismatch(StorageError, ValueError):
    """Bytes do not hash to the CID they were fetched (or added) under."""

    def __init__(self, expected: str, actual: str, what: str = "fetched content"):
        self.expected, self.actual, self.what = expected, actual, what
        super().__init__(f"{what}: expected CID {expected}, got {actual}")


class StorageRequestFailed(StorageError, RuntimeError):
    """The node answered a request with an error."""

    def __init__(self, api_addr: str, command: str, reason: str):
        self.api_addr, self.command, self.reason = api_addr, command, reason
        super().__init__(f"IPFS node at {api_addr}: {command} failed: {reason}")


class InvalidJson(StorageError, ValueError):
    """An object fetched as JSON does not parse."""

    def __init__(self, cid: str, reason: str):
        self.cid, self.reason = cid, reason
        super().__init__(f"{cid} is not valid UTF-8 JSON: {reason}")
