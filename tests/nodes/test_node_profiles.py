"""A node registers only the determinism profiles `verity node doctor` finds it passes, and updates its
on-chain mask when that changes: on ATen's default kernels a real `verity node run` process serves
portable-f32 alone (the x86-64-avx2 class pins AVX2 kernels); restarted with AVX2 kernels the same
node adds cpu-f32-strict with updateNode. Real anvil, IPFS and node processes (tests/nodes/conftest.py)."""
from __future__ import annotations

import signal

import pytest

from node_builders import wait_for
from verity.chain.protocol import PROFILE_CPU_F32_STRICT, PROFILE_PORTABLE_F32
from verity.chain.views import read


def _served(node, nth: int) -> str | None:
    """The profiles named by the node's `nth` "serving profiles:" line (one per start), or None before it."""
    lines = [line for line in node.text().splitlines() if line.startswith("serving profiles:")]
    return lines[nth - 1] if len(lines) >= nth else None


def test_nodeRun_atenDefault_registersPortableOnlyThenUpdates_succeeds(net, tmp_path):
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "ATEN_CPU_CAPABILITY": "default"}
    node = net.start_node("portable-1", 3, roles="solver,verifier,referee", extra_env=env)
    net.wait_registered(1, timeout=180)
    c = net.client()
    assert int(read(c, c.registry, "getNode", node.address).profiles) == PROFILE_PORTABLE_F32, node.text()[-3000:]
    assert "serving profiles: portable-f32" in node.text()

    node.proc.send_signal(signal.SIGTERM)
    node.proc.wait(timeout=30)
    node.env = {k: v for k, v in node.env.items() if k != "ATEN_CPU_CAPABILITY"}
    net.restart(node)
    # what the restarted node's doctor found (the second "serving profiles" line of its log)
    served = wait_for(lambda: _served(node, 2) or node.proc.poll() is not None, timeout=180,
                      what="the restarted node's profile check")
    assert served and "portable-f32" in served, node.text()[-3000:]
    if "cpu-f32-strict" not in served:  # e.g. an AMD EPYC: other bits than the Intel-recorded class vectors
        assert "profile cpu-f32-strict: not served: roots differ from the vectors" in " ".join(node.text().split())
        assert int(read(c, c.registry, "getNode", node.address).profiles) == PROFILE_PORTABLE_F32
        pytest.skip("this CPU computes other cpu-f32-strict bits than the recorded x86-64-avx2 class: on its AVX2 "
                    "kernels the node still serves portable-f32 alone, so there is no mask change to check")
    both = PROFILE_CPU_F32_STRICT | PROFILE_PORTABLE_F32
    wait_for(lambda: int(read(c, c.registry, "getNode", node.address).profiles) == both or node.proc.poll() is not None,
             timeout=180, what="the restarted node's profile mask")
    assert int(read(c, c.registry, "getNode", node.address).profiles) == both, node.text()[-3000:]
    assert int(c.call(c.registry.functions.nodeCount())) == 1                       # updated, not registered again
