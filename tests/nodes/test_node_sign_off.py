"""A node stopped on purpose signs itself off, so that draws skip it while it is away (issue 25: in the 32-host lab
a node switched off for a minute was drawn twice meanwhile, and fined); its next start checks in again. Real anvil,
IPFS and `verity node run` processes (tests/nodes/conftest.py)."""
from __future__ import annotations

import signal

from node_builders import wait_for
from verity.chain.views import checked_in_nodes, read


def test_a_node_stopped_with_sigterm_signs_off_and_its_restart_signs_it_back_on(net):
    node = net.start_node("leaving-1", 2)
    net.wait_registered(1, timeout=180)
    c = net.client()
    assert int(read(c, c.registry, "getNode", node.address).lastSeen) != 0   # checked in: drawable

    node.proc.send_signal(signal.SIGTERM)
    assert node.proc.wait(timeout=60) == 0, node.text()[-3000:]
    assert "signed off: not drawn until the node runs again" in " ".join(node.text().split()), node.text()[-3000:]
    assert int(read(c, c.registry, "getNode", node.address).lastSeen) == 0
    assert checked_in_nodes(c) == 0

    net.restart(node)
    wait_for(lambda: checked_in_nodes(c) == 1 or node.proc.poll() is not None, timeout=180,
             what="the restarted node's check-in")
    assert checked_in_nodes(c) == 1, node.text()[-3000:]
    assert int(c.call(c.registry.functions.nodeCount())) == 1                   # the same registration, back on
