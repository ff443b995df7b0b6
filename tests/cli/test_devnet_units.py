"""`verity devnet up/status` without a devnet (issue 26): a preferred port the devnet does not listen on is said out
loud with the right reason, and the nodes table names the nodes this machine runs."""
from __future__ import annotations

import io
from types import SimpleNamespace

from rich.console import Console

from verity.cli.devnet import nodes_table, replaced_ports
from verity.node.statedir import node_names
from verity.settings import Settings

NAMED, OTHER = "0x" + "aB" * 20, "0x" + "cd" * 20


def _record(anvil: int, ipfs: int) -> dict:
    return {"dir": "/tmp/devnet", "anvil": {"port": anvil}, "ipfs": [{"api_port": ipfs}]}


def test_replacedPorts_busyPreferredPort_saysBusy_succeeds():
    s = Settings(anvil_port=8545, ipfs_api_port=5001)
    anvil, ipfs = replaced_ports(_record(40123, 40124), s, before=None)
    assert anvil.startswith("port 8545 (VERITY_ANVIL_PORT) is busy: anvil listens on 40123 instead")
    assert ipfs.startswith("port 5001 (VERITY_IPFS_API_PORT) is busy: IPFS API listens on 40124 instead")
    # a restart whose recorded port was taken meanwhile, and the preferred one too: busy, said so
    assert replaced_ports(_record(40999, 5001), s, before=_record(40123, 5001))[0].startswith("port 8545 (VERITY_")


def test_replacedPorts_recordedPortKeptAfterTheSettingChanged_isNotCalledBusy_succeeds():
    """A restart keeps the port services.json recorded (devnet/services.py `_port`): with VERITY_ANVIL_PORT changed
    since, the preferred port was never tried, so it is not "busy"."""
    s = Settings(anvil_port=9545, ipfs_api_port=5001)
    (line,) = replaced_ports(_record(8545, 5001), s, before=_record(8545, 5001))
    assert "busy" not in line
    assert line == ("anvil keeps port 8545 recorded in /tmp/devnet/services.json (VERITY_ANVIL_PORT is 9545: "
                    "`verity devnet down` then `up` moves it there)")
    assert replaced_ports(_record(9545, 5001), s, before=_record(8545, 5001)) == []   # it got the preferred one


def test_nodesTable_namesLocalNodesFirst_addressAloneForOthers_succeeds(tmp_path):
    (tmp_path / "nodes" / "solver-1").mkdir(parents=True)
    (tmp_path / "nodes" / "solver-1" / "account").write_text(NAMED.lower() + "\n")   # any case: looked up by address
    node = SimpleNamespace(roles=1, stake=100 * 10**18, locked=0)
    rep = SimpleNamespace(tasksCompleted=3, tasksLate=0, disputesWon=1, disputesLost=0)
    out = io.StringIO()
    Console(file=out, width=300, color_system=None).print(nodes_table([(NAMED, node, rep), (OTHER, node, rep)],
                                                                      node_names(tmp_path)))
    rows = [line for line in out.getvalue().splitlines() if "0x" in line]
    assert rows[0].split("│")[1].strip() == f"solver-1 ({NAMED})"
    assert rows[1].split("│")[1].strip() == OTHER
