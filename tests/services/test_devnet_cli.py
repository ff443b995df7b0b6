"""`verity devnet up | faucet | down` run as a user runs them: crash, restart, new chain, no leftovers."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from verity.chain.client import ChainClient
from verity.chain.deployments import load_deployments
from verity.devnet.faucet import devnet_address
from verity.devnet.owned import owned_pids
from verity.devnet.process import ProcessId
from verity.devnet.ticker import rpc_call

pytestmark = pytest.mark.integration

VERITY = str(Path(sys.executable).parent / "verity")
WEI = 10**18


def _env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VERITY_RPC_URL", "VERITY_IPFS_API", "VERITY_DEPLOYMENTS_DIR")}
    return env | {"VERITY_DEVNET_DIR": str(root / "devnet"), "VERITY_STATE_DIR": str(root / "state"),
                  "VERITY_ANVIL_PORT": "0", "VERITY_IPFS_API_PORT": "0", "VERITY_BLOCK_INTERVAL": "0.5",
                  "COLUMNS": "400"}  # one line per message


def _verity(env: dict[str, str], *args: str, ok: bool = True) -> str:
    res = subprocess.run([VERITY, "devnet", *args], env=env, capture_output=True, text=True, timeout=300)
    assert (res.returncode == 0) == ok, f"verity devnet {' '.join(args)} → {res.returncode}\n{res.stdout}\n{res.stderr}"
    return res.stdout + res.stderr


def _record(devnet: Path) -> dict:
    return json.loads((devnet / "services.json").read_text())


def _vrt_of_19(record: dict, devnet: Path) -> int:
    client = ChainClient(record["rpc_url"], None, load_deployments(31337, devnet / "deployments" / "31337.json"))
    return client.call(client.token.functions.balanceOf(devnet_address(19)))


def _wait_gone(process: ProcessId, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while process.alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    return not process.alive()


def _assert_nothing_left(devnet: Path, pids: list[ProcessId]) -> None:
    assert not [p for p in pids if p.alive()]
    assert list(owned_pids(devnet)) == []
    marked = [p for p in Path("/proc").iterdir() if p.name.isdigit() and str(devnet) in _cmdline(p)]
    assert marked == []


def _cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def test_devnet_faucet_sigkill_restart_new_chain_down_succeeds(tmp_path):
    env, devnet = _env(tmp_path), (tmp_path / "devnet").resolve()
    seen: list[ProcessId] = []
    try:
        out = _verity(env, "up")
        assert "starting a NEW chain: no saved chain state" in out
        first = _record(devnet)
        seen += [ProcessId(first[k]["pid"], first[k]["started"]) for k in ("anvil", "ticker")]
        before = _vrt_of_19(first, devnet)
        out = _verity(env, "faucet", "--account", "19", "--amount", "2.5")
        assert "funded account 19" in out
        assert _vrt_of_19(first, devnet) == before + 25 * WEI // 10

        time.sleep(2.5)  # the ticker saves the chain's state every second
        anvil, ticker = seen
        os.kill(anvil.pid, signal.SIGKILL)
        assert _wait_gone(anvil) and _wait_gone(ticker)  # the ticker never outlives its anvil
        out = _verity(env, "up")
        assert "kept the chain saved in" in out and "NEW chain" not in out
        kept = _record(devnet)
        seen += [ProcessId(kept[k]["pid"], kept[k]["started"]) for k in ("anvil", "ticker")]
        assert kept["chain"]["genesis_hash"] == first["chain"]["genesis_hash"] and kept["chain"]["status"] == "kept"
        assert _vrt_of_19(kept, devnet) == before + 25 * WEI // 10
        assert not (devnet / "deployments" / "31337.json.old").exists()
        seen += [ProcessId(n["pid"], n["started"]) for n in kept["ipfs"]]

        head = int(rpc_call(kept["rpc_url"], "eth_blockNumber"), 16)
        _verity(env, "down")
        _assert_nothing_left(devnet, seen)
        saved = json.loads((devnet / "anvil" / "anvil-state.json").read_text())
        assert int(saved["block"]["number"], 16) >= head  # written at shutdown

        with open(devnet / "anvil" / "anvil-state.json", "r+b") as fh:
            fh.truncate(3000)  # as a kill in the middle of a write would leave it
        out = _verity(env, "up")
        assert "starting a NEW chain: the saved state could not be loaded" in out
        fresh = _record(devnet)
        seen += [ProcessId(fresh[k]["pid"], fresh[k]["started"]) for k in ("anvil", "ticker")]
        assert fresh["chain"]["genesis_hash"] != first["chain"]["genesis_hash"]
        assert list((devnet / "anvil").glob("anvil-state.json.unreadable-*"))
        assert (devnet / "deployments" / "31337.json.old").exists()  # never reused against the new chain
        marker = json.loads((devnet / "deployments" / "31337.chain.json").read_text())
        assert marker["genesis_hash"] == fresh["chain"]["genesis_hash"]
        assert _vrt_of_19(fresh, devnet) == 0  # the old chain's faucet mint is gone with it
    finally:
        _verity(env, "down")
    _assert_nothing_left(devnet, seen)
