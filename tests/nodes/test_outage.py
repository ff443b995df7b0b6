"""A running node rides out a chain outage (issue 25 item 5): anvil frozen (SIGSTOP: connections are accepted and
never answered, so every request times out, as in a partition) for longer than the node's RPC timeout, then thawed.
The node logs the outage's start and end, keeps running and keeps ticking; its Prometheus endpoint (issue 25 item 6)
answers throughout and counts the outage's failed ticks."""
from __future__ import annotations

import os
import re
import signal
import socket
import time
import urllib.request

from node_builders import wait_for


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _metric(port: int, name: str) -> float:
    """The sum of `name`'s samples on the node's /metrics page."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return sum(float(v) for v in re.findall(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M))


def test_node_rides_out_a_frozen_chain_and_catches_up_succeeds(net, devnet):
    port = _free_port()
    node = net.start_node("s1", 1, roles="solver", extra_env={"VERITY_RPC_TIMEOUT": "2"},
                          options=("--metrics-port", str(port)))
    net.wait_registered(1)
    wait_for(lambda: "running as" in node.text(), 60, "the node's loop to start")
    wait_for(lambda: _metric(port, "verity_node_stake_vrt") > 0, 60, "the stake gauge read from the chain")
    assert _metric(port, "verity_node_tick_failures_total") == 0
    anvil = devnet["anvil"]["pid"]
    os.kill(anvil, signal.SIGSTOP)
    try:
        wait_for(lambda: "chain RPC unreachable at" in node.text(), 30, "the outage's start line")
        time.sleep(4)  # a few backoff rounds
        assert node.proc.poll() is None, node.text()[-3000:]
        assert _metric(port, "verity_node_tick_failures_total") >= 1   # scraped while the chain is away
    finally:
        os.kill(anvil, signal.SIGCONT)
    wait_for(lambda: "chain RPC back after" in node.text(), 60, "the outage's end line")
    head = net.client().block_number()
    time.sleep(3)  # still ticking: no halt, no failed ticks
    text = node.text()
    assert node.proc.poll() is None, text[-3000:]
    assert "consecutive failed ticks" not in text, text[-3000:]
    assert text.count("chain RPC unreachable at") == 1 and text.count("chain RPC back after") == 1, text[-3000:]
    assert net.client().block_number() >= head
