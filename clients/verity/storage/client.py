"""Content storage over the IPFS HTTP RPC API (`/api/v0`), Kubo or js-ipfs.

Every call has a timeout, transient failures are retried with exponential
backoff, downloads are size-checked before they start and capped while they
stream, and every byte fetched (or added) is checked against its CIDv0,
computed locally (`verity.storage.unixfs`), so a node cannot hand back
content that differs from what the CID names.
"""

from __future__ import annotations

import io
import itertools
import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import ipfshttpclient
import requests
from ipfshttpclient import exceptions as ipfs_exc
from ipfshttpclient import multipart

from verity.cid import validate_cid
from verity.storage.errors import (
    CidNotFound,
    ContentMismatch,
    InvalidJson,
    NodeUnreachable,
    ObjectTooLarge,
    StorageRequestFailed,
)
from verity.storage.unixfs import CHUNK_SIZE, CidBuilder

T = TypeVar("T")

# Explicit import settings, so a node configured otherwise still gives CIDv0 defaults.
ADD_OPTS = {
    "cid-version": "0",
    "raw-leaves": "false",
    "chunker": f"size-{CHUNK_SIZE}",
    "hash": "sha2-256",
    "trickle": "false",
    "pin": "true",
    "progress": "false",
}
_READ_SIZE = 1 << 20
FETCH_WORKERS = 32  # blocks fetched at a time before a `cat` (Storage._make_local; scripts/bench_storage.py)
_NOT_FOUND_HINTS = ("not found", "deadline exceeded", "timed out", "timeout", "aborted")


class _Transient(Exception):
    """Internal: a failure worth retrying (connection reset, 5xx without a message)."""


def to_multiaddr(addr: str) -> str:
    """Accept a multiaddr (`/ip4/127.0.0.1/tcp/5001/http`) or a URL (`http://host:5001`)."""
    if addr.startswith("/"):
        return addr
    url = urlsplit(addr if "://" in addr else f"http://{addr}")
    host, port = url.hostname or "127.0.0.1", url.port or (443 if url.scheme == "https" else 5001)
    proto = "ip6" if ":" in host else "ip4" if host.replace(".", "").isdigit() else "dns"
    return f"/{proto}/{host}/tcp/{port}/{'https' if url.scheme == 'https' else 'http'}"


def canonical_json(obj: Any) -> bytes:
    """The bytes `put_json` stores: sorted keys, no whitespace, UTF-8."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


class Storage:
    """A bounded, verifying client of one IPFS node.

    timeout: seconds any single request may wait for an answer or for the
        next piece of a download (a CID nobody has fails after this long);
        a download may also take `size / min_rate` seconds in all.
    retries: extra attempts after a transient failure (backoff * 2**i apart).
    max_bytes: default cap on any download; `max_json_bytes` for JSON.
    """

    def __init__(
        self,
        api_addr: str = "/ip4/127.0.0.1/tcp/5001/http",
        *,
        timeout: float = 30.0,
        retries: int = 3,
        backoff: float = 0.5,
        max_bytes: int = 2 << 30,
        max_json_bytes: int = 4 << 20,
        min_rate: float = 256 * 1024,
    ) -> None:
        self.api_addr = to_multiaddr(api_addr)
        self.timeout, self.retries, self.backoff = float(timeout), int(retries), float(backoff)
        self.max_bytes, self.max_json_bytes, self.min_rate = int(max_bytes), int(max_json_bytes), float(min_rate)
        self._ipfs = ipfshttpclient.Client(self.api_addr, timeout=self.timeout)
        self._http = self._ipfs._client  # the raw /api/v0 requester (see docs/storage.md)

    @classmethod
    def from_settings(cls, settings: Any = None) -> Storage:
        from verity.settings import Settings

        s = settings or Settings()
        return cls(
            s.ipfs_api,
            timeout=s.ipfs_timeout,
            retries=s.ipfs_retries,
            backoff=s.ipfs_backoff,
            max_bytes=s.max_download_bytes,
            max_json_bytes=s.max_json_bytes,
            min_rate=s.min_download_rate,
        )

    def __repr__(self) -> str:
        return f"Storage({self.api_addr!r}, timeout={self.timeout:g})"

    def close(self) -> None:
        self._ipfs.close()

    def __enter__(self) -> Storage:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ calls
    def _call(self, command: str, fn: Callable[[float], T], *, timeout: float | None = None,
              cid: str | None = None, retries: int | None = None) -> T:
        """Run `fn(timeout)`, mapping client errors and retrying transient ones."""
        timeout = self.timeout if timeout is None else float(timeout)
        retries = self.retries if retries is None else retries
        for attempt in range(retries + 1):
            try:
                try:
                    return fn(timeout)
                except ipfs_exc.TimeoutError as exc:
                    if cid is not None:
                        raise CidNotFound(cid, self.api_addr, timeout) from exc
                    raise _Transient(f"no answer within {timeout:g} s") from exc
                except (ipfs_exc.ConnectionError, ipfs_exc.ProtocolError) as exc:
                    raise _Transient(_reason(exc)) from exc
                except ipfs_exc.ErrorResponse as exc:
                    message = str(exc.args[0]) if exc.args else str(exc)
                    if cid is not None and any(h in message.lower() for h in _NOT_FOUND_HINTS):
                        raise CidNotFound(cid, self.api_addr, timeout, message) from exc
                    raise StorageRequestFailed(self.api_addr, command, message) from exc
                except ipfs_exc.StatusError as exc:
                    raise _Transient(_reason(exc)) from exc
            except _Transient as exc:
                if attempt == retries:
                    raise NodeUnreachable(self.api_addr, f"{command}: {exc}") from exc.__cause__
                time.sleep(self.backoff * 2**attempt)
        raise AssertionError("unreachable")

    def _request(self, path: str, args: tuple[str, ...] = (), opts: dict[str, str] | None = None,
                 timeout: float | None = None, **kwargs: Any) -> Any:
        return self._http.request(path, args, opts=opts or {}, decoder="json", timeout=timeout, **kwargs)

    # ------------------------------------------------------------- node info
    def ping(self, *, timeout: float | None = None) -> dict[str, Any]:
        """The node's `/version` answer; raises NodeUnreachable (no retries)."""
        res = self._call("version", lambda t: self._request("/version", timeout=t), timeout=timeout, retries=0)
        return dict(res[0] if isinstance(res, list) else res)

    def is_up(self, *, timeout: float = 2.0) -> bool:
        try:
            self.ping(timeout=timeout)
        except NodeUnreachable:
            return False
        return True

    def node_id(self) -> dict[str, Any]:
        res = self._call("id", lambda t: self._request("/id", timeout=t))
        return dict(res[0] if isinstance(res, list) else res)

    def peer_id(self) -> str:
        return str(self.node_id()["ID"])

    def peer_multiaddr(self) -> str:
        """This node's swarm address (with /p2p/<id>) for other nodes to dial.

        A TCP/IPv4 address that is not loopback wins; on a loopback-only devnet
        the loopback one is returned.
        """
        info = self.node_id()
        addrs = [a for a in info.get("Addresses") or [] if "/tcp/" in a and "/ws" not in a]
        if not addrs:
            raise StorageRequestFailed(self.api_addr, "id", "the node reports no TCP swarm address")
        addrs.sort(key=lambda a: (not a.startswith("/ip4/"), a.startswith("/ip4/127.")))
        addr = addrs[0]
        return addr if "/p2p/" in addr else f"{addr}/p2p/{info['ID']}"

    def connect_peer(self, multiaddr: str, *, timeout: float | None = None, retries: int | None = None) -> None:
        """Dial another node (`/swarm/connect`; ipfshttpclient's own wrapper is broken)."""
        self._call("swarm/connect", lambda t: self._request("/swarm/connect", (multiaddr,), timeout=t),
                   timeout=timeout, retries=retries)

    def peers(self) -> list[str]:
        res = self._call("swarm/peers", lambda t: self._request("/swarm/peers", timeout=t))
        item = res[0] if isinstance(res, list) else res
        out = []
        for p in item.get("Peers") or []:
            addr, peer = str(p.get("Addr", "")), str(p.get("Peer", ""))
            out.append(addr if "/p2p/" in addr else f"{addr}/p2p/{peer}")
        return out

    # ------------------------------------------------------------------- put
    def _add(self, chunks: Callable[[CidBuilder], Iterator[bytes]], what: str) -> str:
        built: list[CidBuilder] = []

        def attempt(timeout: float) -> Any:
            builder = CidBuilder()
            built.append(builder)
            body, headers = multipart.stream_bytes(chunks(builder), chunk_size=_READ_SIZE)
            return self._request("/add", opts=ADD_OPTS, data=body, headers=headers, timeout=timeout)

        res = self._call("add", attempt)
        items = res if isinstance(res, list) else [res]
        cid = str(items[-1]["Hash"])
        expected = built[-1].cid()
        if cid != expected:
            raise ContentMismatch(expected, cid, f"{what}: the node stored it under another CID "
                                                 f"(does it honour CIDv0 import defaults?)")
        return cid

    def put_bytes(self, data: bytes) -> str:
        """Add and pin `data`; returns its CIDv0 (checked against a local computation)."""
        data = bytes(data)

        def chunks(builder: CidBuilder) -> Iterator[bytes]:
            for i in range(0, len(data), _READ_SIZE):
                piece = data[i : i + _READ_SIZE]
                builder.update(piece)
                yield piece

        return self._add(chunks, "put_bytes")

    def put_file(self, path: str | os.PathLike[str]) -> str:
        """Add and pin a file, streamed from disk; returns its CIDv0."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(path)

        def chunks(builder: CidBuilder) -> Iterator[bytes]:
            with open(path, "rb") as fh:
                while piece := fh.read(_READ_SIZE):
                    builder.update(piece)
                    yield piece

        return self._add(chunks, f"put_file({path})")

    def put_json(self, obj: Any) -> str:
        """Add `obj` as canonical JSON (see `canonical_json`), at most `max_json_bytes`."""
        data = canonical_json(obj)
        if len(data) > self.max_json_bytes:
            raise ObjectTooLarge("<json to add>", len(data), self.max_json_bytes)
        return self.put_bytes(data)

    def pin(self, cid: str, *, timeout: float | None = None) -> None:
        """Pin `cid` on this node (fetching it from peers if needed, within the timeout)."""
        validate_cid(cid)
        self._call("pin/add", lambda t: self._request("/pin/add", (cid,), opts=_server_timeout(t), timeout=t),
                   timeout=timeout, cid=cid)

    def pins(self, *, timeout: float | None = None) -> list[str]:
        """Every CID this node pins directly or recursively (`pin/ls`; Kubo's {"Keys": ...} or js-ipfs's stream)."""
        res = self._call("pin/ls", lambda t: self._request("/pin/ls", opts={"type": "recursive"}, timeout=t),
                         timeout=timeout)
        found: list[str] = []
        for part in res if isinstance(res, list) else [res]:
            if "Keys" in part:
                found.extend(part["Keys"])
            elif "Cid" in part:
                found.append(part["Cid"] if isinstance(part["Cid"], str) else part["Cid"]["/"])
        return found

    def holds(self, cid: str, *, timeout: float = 5.0) -> bool:
        """This node pins `cid` recursively, so it holds every block of it: a fetch would not touch the network.
        `pin/ls <cid>` answers from the local repo on Kubo and js-ipfs alike; js-ipfs 0.66 has no offline
        `block/stat` (it searches the network until its timeout), so a block cached unpinned counts as not held."""
        validate_cid(cid)
        try:
            res = self._call("pin/ls", lambda t: self._request("/pin/ls", (cid,), opts={"type": "recursive"},
                                                                timeout=t), timeout=timeout)
        except StorageRequestFailed as exc:
            if "not pinned" in exc.reason:
                return False
            raise
        return any(cid in part.get("Keys", {}) for part in (res if isinstance(res, list) else [res]))

    # ------------------------------------------------------------------- get
    def size(self, cid: str, *, timeout: float | None = None) -> int:
        """File size in bytes from the root block (`files/stat`), before any download."""
        return int(self._stat(cid, timeout)["Size"])

    def _stat(self, cid: str, timeout: float | None) -> dict:
        """The root block's `files/stat` answer (Size; Blocks: its links, absent on some nodes)."""
        validate_cid(cid)
        res = self._call("files/stat", lambda t: self._request("/files/stat", (f"/ipfs/{cid}",),
                                                                  opts=_server_timeout(t), timeout=t),
                         timeout=timeout, cid=cid)
        return res[0] if isinstance(res, list) else res

    def _fetch(self, cid: str, limit: int, timeout: float | None, sink: Callable[[bytes], Any],
               reset: Callable[[], Any]) -> int:
        timeout = self.timeout if timeout is None else float(timeout)
        stat = self._stat(cid, timeout)
        size = int(stat["Size"])
        if size > limit:
            raise ObjectTooLarge(cid, size, limit)
        budget = timeout + size / self.min_rate

        def attempt(t: float) -> CidBuilder:
            reset()
            builder = CidBuilder()
            deadline = time.monotonic() + budget
            if int(stat.get("Blocks", 1)):  # the root links to other blocks (absent: the node does not say)
                self._make_local(cid, limit, deadline, t)
            opts = {"length": str(limit + 1), **_server_timeout(_left(deadline))}
            stream = self._http.request("/cat", (cid,), opts=opts, stream=True, decoder="none", timeout=t)
            try:
                for piece in stream:
                    if builder.size + len(piece) > limit:
                        raise ObjectTooLarge(cid, builder.size + len(piece), limit)
                    builder.update(piece)
                    sink(piece)
                    if time.monotonic() > deadline:
                        raise CidNotFound(cid, self.api_addr, budget, f"slow: {builder.size} of {size} bytes")
            except requests.exceptions.RequestException as exc:
                if "timed out" in str(exc).lower() or isinstance(exc, requests.exceptions.Timeout):
                    raise CidNotFound(cid, self.api_addr, t, f"stalled after {builder.size} of {size} bytes") from exc
                raise ipfs_exc.ConnectionError(exc) from exc
            finally:
                stream.close()
            return builder

        builder = self._call("cat", attempt, timeout=timeout, cid=cid)
        actual = builder.cid()
        if actual != cid:
            raise ContentMismatch(cid, actual)
        return builder.size

    def _make_local(self, cid: str, limit: int, deadline: float, t: float) -> None:
        """Bring every block of `cid` into the local node before `cat` reads them. js-ipfs 0.66 exits (an unhandled
        rejection in its UnixFS exporter) when a `cat` is cut short, by its timeout or by the client hanging up,
        while it still wants a block from its peers: one slow peer took six nodes' IPFS daemons down in the 32-host
        lab run. `block/stat` (one block) and `refs` of a local block end cleanly when cut short; FETCH_WORKERS of
        them at a time keep a fetch near a `cat`'s speed (scripts/bench_storage.py; `refs -r` and `dag/export`
        fetch one block per round trip). Walked level by level from the root (`files/stat` fetched it); the bytes
        and blocks fetched are counted, so a root that understates its file cannot make this node fetch more than
        a file of `limit` bytes holds."""
        max_blocks = 8 + 2 * (limit // CHUNK_SIZE + 1)  # a CIDv0 file: one leaf per chunk, 1 node per 174 links
        cap = limit + limit // 64 + 65536               # plus a few dozen bytes of framing per block
        seen, frontier, fetched = {cid}, [cid], 0
        pool = ThreadPoolExecutor(FETCH_WORKERS)
        try:
            while frontier:
                children = [c for links in pool.map(lambda c: self._links(c, deadline), frontier) for c in links]
                frontier = [c for c in dict.fromkeys(children) if c not in seen]
                seen.update(frontier)
                if len(seen) > max_blocks:
                    raise ObjectTooLarge(cid, fetched, limit)
                # a sliding window of FETCH_WORKERS fetches, counted as each ends: past the cap, at most the ones
                # still in flight land
                todo, running = iter(frontier), set()
                while True:
                    running |= {pool.submit(self._fetch_block, c, deadline)
                                for c in itertools.islice(todo, FETCH_WORKERS - len(running))}
                    if not running:
                        break
                    done, running = wait(running, return_when=FIRST_COMPLETED)
                    fetched += sum(f.result() for f in done)
                    if fetched > cap:
                        raise ObjectTooLarge(cid, fetched, limit)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    def _links(self, block: str, deadline: float) -> list[str]:
        """The CIDs a local block links to (`refs`, not recursive)."""
        res = self._call("refs", lambda t: self._request("/refs", (block,), opts=_server_timeout(t), timeout=t),
                         timeout=_left(deadline), cid=block)
        rows = res if isinstance(res, list) else [res]
        missing = [r["Err"] for r in rows if r.get("Err")]
        if missing:
            raise CidNotFound(block, self.api_addr, _left(deadline), missing[0])
        return [r["Ref"] for r in rows if r.get("Ref")]

    def _fetch_block(self, block: str, deadline: float) -> int:
        """Fetch one block into the local node (`block/stat`); its size in bytes."""
        res = self._call("block/stat", lambda t: self._request("/block/stat", (block,), opts=_server_timeout(t),
                                                               timeout=t), timeout=_left(deadline), cid=block)
        return int((res[0] if isinstance(res, list) else res)["Size"])

    def get_bytes(self, cid: str, max_bytes: int | None = None, *, timeout: float | None = None) -> bytes:
        """Fetch and verify the content of `cid`, at most `max_bytes` (default: `self.max_bytes`)."""
        validate_cid(cid)
        buf = io.BytesIO()

        def reset() -> None:
            buf.seek(0)
            buf.truncate()

        self._fetch(cid, self.max_bytes if max_bytes is None else max_bytes, timeout, buf.write, reset)
        return buf.getvalue()  # CPython hands over BytesIO's own buffer: no second copy of the download

    def get_file(self, cid: str, dest: str | os.PathLike[str], max_bytes: int | None = None, *,
                 timeout: float | None = None) -> Path:
        """Fetch and verify `cid` into `dest` atomically: on any failure `dest` is untouched."""
        validate_cid(cid)
        dest = Path(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.{uuid.uuid4().hex[:8]}.part")
        try:
            with open(tmp, "wb") as fh:

                def reset() -> None:
                    fh.seek(0)
                    fh.truncate()

                self._fetch(cid, self.max_bytes if max_bytes is None else max_bytes, timeout, fh.write, reset)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, dest)
        finally:
            tmp.unlink(missing_ok=True)
        return dest

    def get_json(self, cid: str, max_bytes: int | None = None, *, timeout: float | None = None) -> Any:
        data = self.get_bytes(cid, self.max_json_bytes if max_bytes is None else max_bytes, timeout=timeout)
        try:
            return json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InvalidJson(cid, str(exc)) from None


def _left(deadline: float) -> float:
    """Seconds until `deadline` (a monotonic time), at least one: a request needs a positive timeout."""
    return max(1.0, deadline - time.monotonic())


def _server_timeout(seconds: float) -> dict[str, str]:
    """The node gives up too (Kubo's global `timeout` option; js-ipfs honours it as well)."""
    return {"timeout": f"{max(1, int(seconds * 1000))}ms"}


def _reason(exc: BaseException) -> str:
    text = str(exc.__cause__ or exc)
    if "refused" in text.lower():
        return "connection refused"
    return text if len(text) <= 200 else text[:200] + "…"
