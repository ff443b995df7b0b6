"""A node rides out RPC and IPFS outages (issue 25 item 5): the classifier of transport failures, the loop's capped
backoff and its two log lines, catching up on the events of the outage, background work kept running, and bugs
still halting the node. No chain, no IPFS: fake cursors, handlers, sleep and clock."""
from __future__ import annotations

import http.server
import logging
import random
import threading
import time

import pytest
import requests
from web3.exceptions import RequestTimedOut

from verity.chain.client import ChainUnreachable, TxFailed
from verity.chain.events import DecodedEvent
from verity.node.loop import NodeHalted, NodeLoop, OutageTooLong, transport_failure
from verity.node.phases import Phase
from verity.node.snapshot import Snapshot, SnapshotStore, WorkItem
from verity.node.work import WorkPool
from verity.storage.errors import CidNotFound, NodeUnreachable

RPC = "http://127.0.0.1:8545"
IPFS = "/ip4/127.0.0.1/tcp/5001/http"


# ---- the classifier ---------------------------------------------------------------------------------------------

def _http_error(status: int, url: str = RPC) -> requests.exceptions.HTTPError:
    response = requests.models.Response()
    response.status_code = status
    response.url = url
    return requests.exceptions.HTTPError(f"{status} Server Error", response=response,
                                         request=requests.Request("POST", url).prepare())


@pytest.mark.parametrize("exc, service", [
    (requests.exceptions.ConnectionError("Max retries exceeded (Caused by NewConnectionError(...))"), "network"),
    (requests.exceptions.ReadTimeout("Read timed out. (read timeout=30)"), "network"),
    (RequestTimedOut("Request timed out."), "chain"),
    (ConnectionRefusedError(111, "Connection refused"), "network"),
    (ConnectionResetError(104, "Connection reset by peer"), "network"),
    (TimeoutError("timed out"), "network"),
    (_http_error(503), "chain"),
    (_http_error(429), "chain"),
    (ChainUnreachable(RPC, "eth_blockNumber: ReadTimeout"), "chain"),
    (NodeUnreachable(IPFS, "cat: connection refused"), "ipfs"),
])
def test_transport_failures_are_outages(exc, service):
    assert transport_failure(exc, {"chain": RPC, "ipfs": IPFS}) == service


def test_a_requests_error_is_attributed_to_the_endpoint_its_url_names():
    request = requests.Request("POST", "http://127.0.0.1:5001/api/v0/cat").prepare()
    exc = requests.exceptions.ConnectionError("refused", request=request)
    assert transport_failure(exc, {"chain": RPC, "ipfs": IPFS}) == "ipfs"
    assert transport_failure(_http_error(502), {"chain": RPC, "ipfs": IPFS}) == "chain"
    assert transport_failure(_http_error(502), {}) == "network"


@pytest.mark.parametrize("exc", [
    ValueError("bad manifest"), KeyError("missing"), RuntimeError("a bug"), ZeroDivisionError(),
    _http_error(404), _http_error(400),
    TxFailed("commit", "AlreadyCommitted"),
    BrokenPipeError(32, "Broken pipe"),  # a worker's pipe as often as a socket
    FileNotFoundError(2, "No such file"),
])
def test_other_failures_are_not_outages(exc):
    assert transport_failure(exc, {"chain": RPC}) is None


def test_a_cid_nobody_serves_is_not_an_outage_even_when_raised_from_a_timeout():
    try:
        try:
            raise TimeoutError("no answer")
        except TimeoutError as cause:
            raise CidNotFound("QmX", IPFS, 30.0) from cause
    except CidNotFound as exc:
        assert transport_failure(exc) is None


# ---- the loop ---------------------------------------------------------------------------------------------------

class _Clock:
    """A fake monotonic clock that the fake sleep advances; ticks themselves take `tick_s`."""

    def __init__(self, tick_s: float = 0.0):
        self.now, self.sleeps, self.tick_s = 1000.0, [], tick_s

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class _Cursor:
    """A chain whose head grows by one block a tick; `script` says per poll: "ok", "outage" (ChainUnreachable),
    "ipfs" (NodeUnreachable) or "bug" (RuntimeError). Polls past the script succeed."""

    def __init__(self, script, events_at=None):
        self.script, self.polls, self.next_block, self.head = list(script), 0, 10, 9
        self.events_at = events_at or {}  # block -> event name

    def poll(self):
        self.polls += 1
        self.head += 1
        step = self.script[self.polls - 1] if self.polls <= len(self.script) else "ok"
        if step == "outage":
            raise ChainUnreachable(RPC, "eth_blockNumber: ConnectionError: [Errno 111] Connection refused")
        if step == "ipfs":
            raise NodeUnreachable(IPFS, "cat: connection refused")
        if step == "bug":
            raise RuntimeError("a bug in a handler")
        out = [DecodedEvent("JobRegistry", self.events_at[b], {}, b, 0, "0x")
               for b in range(self.next_block, self.head + 1) if b in self.events_at]
        self.next_block = self.head + 1
        return out


class _Recorder:
    kinds = ("solve",)

    def __init__(self):
        self.events = []

    def on_event(self, snap, event):
        self.events.append((event.block, event.name))

    def advance(self, snap, item):
        pass


def _loop(tmp_path, cursor, clock, handlers=(), **kw):
    kw.setdefault("max_failures", 3)
    return NodeLoop(cursor, SnapshotStore(tmp_path), Snapshot(), list(handlers), poll_interval=0.5, sleep=clock.sleep,
                    clock=clock, rng=random.Random(7), endpoints={"chain": RPC, "ipfs": IPFS}, **kw)


def _outage_lines(caplog):
    messages = [r.getMessage() for r in caplog.records]
    return [m for m in messages if "unreachable at" in m or " back after " in m]


def test_an_outage_backs_off_capped_logs_start_and_end_once_and_never_halts(tmp_path, caplog):
    clock = _Clock()
    cursor = _Cursor(["ok"] + ["outage"] * 9 + ["ok"] * 3)
    loop = _loop(tmp_path, cursor, clock)
    with caplog.at_level(logging.INFO, logger="verity.node"):
        loop.run(until=lambda snap: cursor.polls >= 13)
    assert cursor.polls == 13 and loop.failures == 0 and loop.outage is None  # 9 failed ticks > max_failures=3
    backoff = clock.sleeps[1:10]
    expected = [1, 2, 4, 8, 16, 30, 30, 30, 30]
    assert all(0.9 * e <= got <= e for got, e in zip(backoff, expected, strict=True)), backoff
    assert len(set(backoff[5:])) > 1  # jittered: nodes that lost the same endpoint do not retry in step
    assert clock.sleeps[0] == clock.sleeps[10] == 0.5  # the poll interval before and after
    lines = _outage_lines(caplog)
    assert len(lines) == 2, lines
    assert lines[0] == (f"chain RPC unreachable at {RPC}: chain RPC at {RPC} did not answer: eth_blockNumber: "
                        "ConnectionError: [Errno 111] Connection refused; retrying, backing off up to 30 s")
    # catching up from the first block the outage left unread: the snapshot's (block 10 was read by the first tick)
    assert lines[1] == f"chain RPC back after {sum(backoff):.0f} s; catching up from block 11"
    assert not [r for r in caplog.records if "tick failed" in r.getMessage()]


def test_a_long_outage_says_once_in_a_while_that_it_is_still_on(tmp_path, caplog):
    clock = _Clock()
    loop = _loop(tmp_path, _Cursor(["outage"] * 40), clock)
    with caplog.at_level(logging.WARNING, logger="verity.node"):
        for _ in range(40):
            clock.sleep(loop.tick_guarded())
    still = [r.getMessage() for r in caplog.records if "still unreachable after" in r.getMessage()]
    assert 1 <= len(still) <= 2 and loop.failures == 0  # ~1100 s of 30-s waits: one reminder per 600 s


def test_a_bug_still_halts_after_max_failures_and_outages_in_between_do_not_count(tmp_path):
    clock = _Clock()
    cursor = _Cursor(["bug", "bug", "outage", "outage", "outage", "outage", "bug"])
    with pytest.raises(NodeHalted, match="3 consecutive failed ticks; last error: a bug in a handler"):
        _loop(tmp_path, cursor, clock).run()
    assert cursor.polls == 7


def test_a_successful_tick_after_an_outage_resets_nothing_it_did_not_count(tmp_path):
    clock = _Clock()
    loop = _loop(tmp_path, _Cursor(["bug", "outage", "bug", "ok", "bug"]), clock)
    counts = []
    for _ in range(5):
        loop.tick_guarded()
        counts.append(loop.failures)
    assert counts == [1, 1, 2, 0, 1]


def test_max_outage_stops_the_node_with_a_clear_message(tmp_path):
    clock = _Clock()
    loop = _loop(tmp_path, _Cursor(["ok"] + ["outage"] * 50), clock, max_outage=120)
    with pytest.raises(OutageTooLong, match=f"chain RPC at {RPC} unreachable for 1[2-9][0-9] s, over the "
                                            "VERITY_MAX_OUTAGE limit of 120 s"):
        loop.run()
    assert loop.snap.next_block == 11  # saved where it stood: a restart resumes there
    assert SnapshotStore(tmp_path).load().next_block == 11


def test_an_ipfs_outage_after_a_chain_outage_is_its_own_outage(tmp_path, caplog):
    clock = _Clock()
    loop = _loop(tmp_path, _Cursor(["outage", "outage", "ipfs", "ipfs", "ok"]), clock)
    with caplog.at_level(logging.WARNING, logger="verity.node"):
        for _ in range(5):
            clock.sleep(loop.tick_guarded())
    lines = _outage_lines(caplog)
    assert [line.split(" ")[0] + " " + ("start" if "unreachable" in line else "end") for line in lines] == [
        "chain start", "chain end", "IPFS start", "IPFS end"]
    assert lines[2].startswith(f"IPFS node unreachable at {IPFS}: IPFS node at {IPFS} is not reachable")
    assert clock.sleeps[:4] == pytest.approx([1, 2, 1, 2], rel=0.1)  # the backoff starts over


def test_events_of_the_outage_are_handled_once_after_it(tmp_path):
    clock = _Clock()
    cursor = _Cursor(["ok", "outage", "outage", "outage", "ok", "ok"], events_at={10: "A", 11: "B", 12: "C", 13: "D"})
    rec = _Recorder()
    loop = _loop(tmp_path, cursor, clock, handlers=[rec])
    for _ in range(6):
        clock.sleep(loop.tick_guarded())
    assert rec.events == [(10, "A"), (11, "B"), (12, "C"), (13, "D")]
    assert loop.snap.next_block == cursor.head + 1 == SnapshotStore(tmp_path).load().next_block


def test_a_range_whose_handling_was_cut_by_an_outage_is_read_again_not_skipped(tmp_path):
    """The cursor had read blocks 10..12 when a handler found the chain gone: those blocks are read again
    (handlers are idempotent), none is skipped."""
    clock = _Clock()

    class Head:  # a fixed chain of three blocks with one event each
        def __init__(self):
            self.next_block, self.polls = 10, 0

        def poll(self):
            self.polls += 1
            out = [DecodedEvent("JobRegistry", n, {}, b, 0, "0x") for b, n in ((10, "A"), (11, "B"), (12, "C"))
                   if b >= self.next_block]
            self.next_block = 13
            return out

    class Flaky(_Recorder):
        def __init__(self):
            super().__init__()
            self.fail = 1

        def on_event(self, snap, event):
            if event.name == "B" and self.fail:
                self.fail -= 1
                raise ChainUnreachable(RPC, "eth_call: ReadTimeout")
            super().on_event(snap, event)

    cursor, rec = Head(), Flaky()
    loop = _loop(tmp_path, cursor, clock, handlers=[rec])
    loop.tick_guarded()
    assert loop.outage is not None and cursor.next_block == 10 and loop.snap.next_block == 0
    loop.tick_guarded()
    assert loop.outage is None and loop.snap.next_block == 13
    assert rec.events == [(10, "A"), (10, "A"), (11, "B"), (12, "C")]  # A twice (idempotent), nothing missed


def test_an_outage_inside_an_item_keeps_the_item_and_its_retries(tmp_path):
    clock = _Clock()

    class Chainy(_Recorder):
        def advance(self, snap, item):
            raise requests.exceptions.ReadTimeout("Read timed out. (read timeout=30)")  # not a ConnectionError

    loop = _loop(tmp_path, _Cursor([]), clock, handlers=[Chainy()])
    loop.snap.items["task:1:0"] = WorkItem(key="task:1:0", kind="solve", phase=Phase.ASSIGNED, task_id=1)
    for _ in range(12):  # past item_attempts and max_failures
        clock.sleep(loop.tick_guarded())
    item = loop.snap.items["task:1:0"]
    assert item.phase == Phase.ASSIGNED and item.attempts == 0 and loop.failures == 0 and loop.outage is not None


def test_training_in_the_background_survives_an_outage_and_its_commit_goes_out_after_it(tmp_path):
    """A training task keeps running while the chain is away; the loop picks its result up and commits once the
    chain answers again (the solver's advance reads the chain before it polls the pool, as here)."""
    clock = _Clock()
    pool = WorkPool(long_threads=1)
    release, chain_up = threading.Event(), {"up": True}
    commits = []

    class Solver(_Recorder):
        def advance(self, snap, item):
            if not chain_up["up"]:
                raise ChainUnreachable(RPC, "eth_call: ConnectionError: [Errno 111] Connection refused")
            res = pool.poll(item.key, lambda: release.wait(10) and "trained", what="training task 1")
            if res is None:
                return
            commits.append(res)
            snap.move(item, Phase.TRAINED)

    loop = _loop(tmp_path, _Cursor([]), clock, handlers=[Solver()], work=pool)
    loop.snap.items["task:1:0"] = WorkItem(key="task:1:0", kind="solve", phase=Phase.ASSIGNED, task_id=1)
    try:
        loop.tick_guarded()  # training starts in the background
        assert pool.in_flight() and not commits
        chain_up["up"] = False
        for _ in range(5):
            loop.tick_guarded()
        release.set()  # training finishes during the outage
        deadline = time.monotonic() + 10
        while pool.in_flight() and time.monotonic() < deadline:
            time.sleep(0.01)
        loop.tick_guarded()
        assert not commits and loop.outage is not None  # nothing sent while the chain is away
        chain_up["up"] = True
        loop.tick_guarded()
        assert commits == ["trained"] and loop.snap.items["task:1:0"].phase == Phase.TRAINED and loop.outage is None
    finally:
        pool.close(1.0)


def test_a_stop_request_ends_a_backoff_wait_at_once(tmp_path):
    loop = NodeLoop(_Cursor(["outage"] * 10), SnapshotStore(tmp_path), Snapshot(), [], backoff_start=30.0)
    threading.Timer(0.3, loop.request_stop).start()
    started = time.monotonic()
    loop.run()  # not the main thread's signal handlers: a Timer calls request_stop
    assert time.monotonic() - started < 5 and loop.outage is not None


# ---- the chain client's provider ----------------------------------------------------------------------------------

class _Status(http.server.BaseHTTPRequestHandler):
    status = 503

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(self.status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("status, outage", [(503, True), (429, True), (404, False)])
def test_the_chain_providers_http_errors(status, outage):
    from web3 import Web3

    from verity.chain.client import rpc_provider

    handler = type("H", (_Status,), {"status": status})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        w3 = Web3(rpc_provider(f"http://127.0.0.1:{server.server_port}", timeout=5))
        with pytest.raises(Exception) as info:
            w3.eth.block_number
        assert (transport_failure(info.value) is not None) is outage
        if outage:
            assert isinstance(info.value, ChainUnreachable) and f"HTTP {status}" in str(info.value)
    finally:
        server.shutdown()
        server.server_close()


def test_the_chain_provider_reports_a_refused_connection_as_chain_unreachable():
    import socket

    from web3 import Web3

    from verity.chain.client import rpc_provider

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ChainUnreachable, match=r"eth_blockNumber: ConnectionError: \[Errno 111\] Connection refused"):
        Web3(rpc_provider(f"http://127.0.0.1:{port}", timeout=5)).eth.block_number
