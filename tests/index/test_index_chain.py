"""The event index against a real anvil with a real deployment: it matches a full rescan, resumes, holds back
unconfirmed blocks while live_events still sees them, rewinds a reorg, and a restarted chain gets a new file."""
from __future__ import annotations

import pytest
from web3 import Web3

from verity.chain.client import ChainClient, devnet_key
from verity.chain.deployments import load_deployments
from verity.chain.events import EventCursor
from verity.devnet.anvil import Anvil
from verity.devnet.deploy import deploy
from verity.devnet.ticker import rpc_call
from verity.index import open_index

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def deployment(anvil, tmp_path_factory):
    root = tmp_path_factory.mktemp("index-deployed")
    deploy(anvil.rpc_url, root, force=True)
    return load_deployments(31337, root / "31337.json")


@pytest.fixture
def chain(anvil, deployment):
    c = ChainClient(anvil.rpc_url, devnet_key(0), deployment)
    snapshot = rpc_call(anvil.rpc_url, "evm_snapshot")
    yield c
    rpc_call(anvil.rpc_url, "evm_revert", [snapshot])


def _pay(c: ChainClient, to: str, amount: int = 1) -> None:
    c.transact(c.token.functions.transfer(to, amount))


def _rescan(c: ChainClient) -> list:
    return EventCursor(c.w3, c.contracts, next_block=c.deployments.start_block).poll()


RECIPIENT = Web3.to_checksum_address("0x" + "5e" * 20)


def test_sync_matchesAFullRescan_andResumesFromItsHead_succeeds(chain, tmp_path):
    ix = open_index(chain, tmp_path)
    first = ix.sync(confirmations=0)
    assert first > 0 and ix.head == chain.block_number()
    _pay(chain, RECIPIENT, 3)
    _pay(chain, RECIPIENT, 2**70)                    # beyond 64 bits
    head_before = ix.head
    assert ix.sync(confirmations=0) == 2 and ix.head == head_before + 2
    assert ix.events() == _rescan(chain)              # same events, same args (types included), same order
    paid = ix.events(address=RECIPIENT, names=["Transfer"])
    assert [e.args["value"] for e in paid] == [3, 2**70] and paid[0].args["to"] == RECIPIENT
    ix.close()
    again = open_index(chain, tmp_path)
    assert again.path == ix.path and again.sync(confirmations=0) == 0 and len(again.events()) == first + 2


def test_sync_holdsBackUnconfirmedBlocks_whileLiveEventsSeeThem_succeeds(chain, tmp_path):
    ix = open_index(chain, tmp_path)
    ix.sync(confirmations=0)
    _pay(chain, RECIPIENT, 5)
    _pay(chain, RECIPIENT, 6)
    ix.sync(confirmations=2)                          # both transfers are 1 and 0 blocks deep
    assert ix.head == chain.block_number() - 2 and ix.events(address=RECIPIENT) == []
    live = ix.live_events(address=RECIPIENT)
    assert [e.args["value"] for e in live] == [5, 6] and all(e.id is None for e in live)
    rpc_call(chain.rpc_url, "anvil_mine", ["0x2"])
    ix.sync(confirmations=2)
    assert [e.args["value"] for e in ix.events(address=RECIPIENT)] == [5, 6]


def test_sync_afterAReorg_dropsTheLostBlocks_succeeds(chain, tmp_path):
    ix = open_index(chain, tmp_path)
    ix.sync(confirmations=0)
    fork = rpc_call(chain.rpc_url, "evm_snapshot")
    _pay(chain, RECIPIENT, 7)
    ix.sync(confirmations=0)
    assert len(ix.events(address=RECIPIENT)) == 1
    rpc_call(chain.rpc_url, "evm_revert", [fork])    # the block with the payment is gone; another takes its height
    other = Web3.to_checksum_address("0x" + "0f" * 20)
    _pay(chain, other, 8)
    _pay(chain, other, 9)
    ix.sync(confirmations=0)
    assert ix.events(address=RECIPIENT) == [] and [e.args["value"] for e in ix.events(address=other)] == [8, 9]
    assert ix.events() == _rescan(chain)


def test_open_restartedChain_getsANewIndexFile_succeeds(chain, deployment, tmp_path):
    old = open_index(chain, tmp_path)
    old.sync(confirmations=0)
    restarted = Anvil(tmp_path / "anvil2")             # same chain id, a new genesis block
    restarted.start()
    try:
        fresh = open_index(ChainClient(restarted.rpc_url, None, deployment), tmp_path)
        assert fresh.path != old.path and fresh.path.parent == old.path.parent
        assert fresh.events() == [] and len(old.events()) > 0
        assert fresh.path.name.startswith("31337-") and old.path.name.split("-")[1] != fresh.path.name.split("-")[1]
    finally:
        restarted.stop()


def test_cli_indexSyncAndStatus_reportWhatWasIndexed_succeeds(chain, deployment, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from verity.chain.deployments import save_deployments
    from verity.cli import app

    save_deployments(deployment, tmp_path / "deployments" / "31337.json")
    for key, value in {"VERITY_RPC_URL": chain.rpc_url, "VERITY_DEPLOYMENTS_DIR": str(tmp_path / "deployments"),
                       "VERITY_STATE_DIR": str(tmp_path / "state"), "VERITY_DEVNET_DIR": str(tmp_path / "devnet"),
                       "VERITY_INDEX_CONFIRMATIONS": "0"}.items():
        monkeypatch.setenv(key, value)
    _pay(chain, RECIPIENT, 4)
    synced = CliRunner().invoke(app, ["index", "sync"])
    assert synced.exit_code == 0, synced.output
    expected = len(_rescan(chain))
    assert f"indexed {expected} events" in synced.output and str(tmp_path / "state" / "index") in synced.output
    again = CliRunner().invoke(app, ["index", "sync"])
    assert again.exit_code == 0 and "indexed 0 events in 0 blocks" in again.output
    shown = CliRunner().invoke(app, ["index", "status"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0 and f"block {chain.block_number()}" in shown.output and str(expected) in shown.output
