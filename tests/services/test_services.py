import json
import os
import signal
import subprocess
import sys
import time

import pytest

from verity.devnet import services
from verity.devnet.process import ProcessId
from verity.settings import Settings
from verity.storage import Storage

pytestmark = pytest.mark.integration

AUTO_PORTS = Settings(anvil_port=0, ipfs_api_port=0, block_interval=0.5)


def _crash(info):
    """SIGKILL a recorded service and wait until the kernel has it dead."""
    process = ProcessId(info["pid"], info["started"])
    os.kill(process.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while process.alive() and time.monotonic() < deadline:
        time.sleep(0.05)


def test_up_idempotent_down_after_crash_succeeds(tmp_path):
    state = tmp_path / "devnet"
    try:
        first = services.up(state, ipfs_nodes=1, settings=AUTO_PORTS)
        record = json.loads((state / "services.json").read_text())
        assert record["rpc_url"] == first["rpc_url"] and record["ipfs_api"] == first["ipfs"][0]["api"]
        assert services.status(state)["running"]

        again = services.up(state, ipfs_nodes=1, settings=AUTO_PORTS)  # no second set
        assert [again[k]["pid"] for k in ("anvil", "ticker")] == [first[k]["pid"] for k in ("anvil", "ticker")]
        assert again["ipfs"][0]["pid"] == first["ipfs"][0]["pid"]

        _crash(first["ipfs"][0])
        assert not services.status(state)["running"]
        healed = services.up(state, ipfs_nodes=1, settings=AUTO_PORTS)
        assert healed["ipfs"][0]["pid"] != first["ipfs"][0]["pid"]
        assert healed["ipfs"][0]["api"] == first["ipfs"][0]["api"]  # same address for clients
        assert healed["anvil"]["pid"] == first["anvil"]["pid"]
        assert Storage(healed["ipfs_api"], timeout=5).is_up()
        assert services.client_env(state) == {"VERITY_RPC_URL": first["rpc_url"], "VERITY_IPFS_API": healed["ipfs_api"]}

        _crash(healed["ipfs"][0])  # crash again; `down` must clean up after it
        assert (state / "ipfs-0" / "repo" / "repo.lock").exists()
    finally:
        stopped = services.down(state)
    assert stopped["anvil"] and stopped["ticker"] and stopped["ipfs"][0]["was_running"] is False
    assert not ProcessId(healed["anvil"]["pid"], healed["anvil"]["started"]).alive()
    assert not (state / "services.json").exists()
    assert not (state / "ipfs-0" / "repo" / "repo.lock").exists()
    assert services.status(state) == {"running": False, "dir": str(state)}


def test_cli_status_without_services_exits_nonzero_succeeds(tmp_path):
    res = subprocess.run([sys.executable, "-m", "verity.devnet.services", "status", "--dir", str(tmp_path)],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 1 and json.loads(res.stdout)["running"] is False
