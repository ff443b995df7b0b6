"""Parts of the devnet manager that need no full devnet: help texts, the owner sweep, the
ticker's exit with its anvil and its atomic state saves, chain identity and restore, faucet input."""
import json
import subprocess
import threading
import time

import click
import pytest
import typer
from typer.testing import CliRunner
from web3 import HTTPProvider, Web3

from verity.chain.identity import chain_identity, identity_at, same_chain
from verity.cli.devnet import app as devnet_app
from verity.devnet import Anvil, services
from verity.devnet.chainstate import start_chain
from verity.devnet.faucet import FaucetRefused, to_wei
from verity.devnet.owned import owner_env
from verity.devnet.process import ProcessId
from verity.devnet.ticker import BlockTicker, rpc_call, save_state

ADDRESS = "0x0000000000000000000000000000000000000042"


@pytest.mark.parametrize("app", [devnet_app, services.app], ids=["verity devnet", "python -m verity.devnet.services"])
def test_every_devnet_option_has_help_succeeds(app):
    group = typer.main.get_command(app)
    missing = [f"{name} {param.opts[0]}" for name, cmd in group.commands.items() for param in cmd.params
               if isinstance(param, click.Option) and param.name != "help" and not (param.help or "").strip()]
    assert missing == []
    assert all((cmd.help or "").strip() for cmd in group.commands.values())


def test_down_stops_process_only_its_mark_names_succeeds(tmp_path):
    mine, other = tmp_path / "devnet", tmp_path / "other"
    procs = [subprocess.Popen(["sleep", "60"], env=owner_env(d), start_new_session=True) for d in (mine, other)]
    try:
        stopped = services.down(mine)
        assert stopped["strays"] == [procs[0].pid]
        assert procs[0].wait(timeout=5) is not None
        assert procs[1].poll() is None  # another devnet's process is left alone
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_ticker_exits_when_its_anvil_is_gone_succeeds():
    chain = subprocess.Popen(["sleep", "60"])
    ticker = BlockTicker("http://127.0.0.1:9", 0.05, ProcessId.of(chain.pid)).start()
    time.sleep(0.3)
    assert ticker.running
    chain.kill()
    chain.wait()
    deadline = time.monotonic() + 5
    while ticker.running and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not ticker.running


@pytest.mark.integration
def test_chain_identity_names_genesis_succeeds(anvil_rpc_url):
    w3 = Web3(HTTPProvider(anvil_rpc_url))
    ident = chain_identity(w3)
    assert ident == identity_at(anvil_rpc_url)
    assert ident["chain_id"] == 31337 and len(ident["genesis_hash"]) == 66
    assert ident["genesis_hash"] == w3.eth.get_block(0)["hash"].to_0x_hex()
    assert same_chain(ident, dict(ident, genesis_hash=ident["genesis_hash"].upper().replace("0X", "0x")))
    assert not same_chain(ident, dict(ident, genesis_hash="0x" + "00" * 32))
    assert not same_chain(ident, None)


@pytest.mark.parametrize("args, option", [
    (["--account", "20"], "--account"),
    (["--account", "1", "--address", "0x" + "11" * 20], "--account/--address"),
    ([], "--account/--address"),
    (["--account", "1", "--amount", "lots"], "--amount"),
    (["--account", "1", "--eth", "-1"], "--eth"),
    (["--account", "1"], "--dir"),  # no devnet recorded there
])
def test_faucet_bad_input_names_option_fails(tmp_path, args, option):
    res = CliRunner().invoke(devnet_app, ["faucet", *args, "--dir", str(tmp_path)], env={"COLUMNS": "300"})
    assert res.exit_code == 1
    assert f"error: {option}:" in res.output


def test_to_wei_decimals_succeeds():
    assert to_wei("--amount", "2.5") == 25 * 10**17
    assert to_wei("--amount", "0") == 0
    with pytest.raises(FaucetRefused, match="--amount"):
        to_wei("--amount", "1e-19")


@pytest.mark.integration
def test_save_state_never_leaves_half_a_file_succeeds(anvil_rpc_url, tmp_path):
    path = tmp_path / "anvil-state.json"
    save_state(anvil_rpc_url, path)
    done, torn, reads = threading.Event(), [], 0

    def keep_saving():
        for _ in range(40):
            rpc_call(anvil_rpc_url, "evm_mine")
            save_state(anvil_rpc_url, path)
        done.set()

    saver = threading.Thread(target=keep_saving)
    saver.start()
    while not done.is_set():
        try:
            json.loads(path.read_bytes())
        except ValueError as exc:
            torn.append(str(exc))
        reads += 1
    saver.join()
    assert torn == [] and reads > 40
    saved = json.loads(path.read_bytes())
    assert int(saved["block"]["number"], 16) == int(rpc_call(anvil_rpc_url, "eth_blockNumber"), 16)


@pytest.mark.integration
def test_start_chain_keeps_saved_chain_then_new_on_request_succeeds(tmp_path):
    def persisted():
        return Anvil(tmp_path / "anvil", accounts=2, persist=True)

    first = persisted()
    try:
        started = start_chain(first)
        assert started["status"] == "new" and "first start" in started["reason"]
        first.rpc("anvil_setBalance", [ADDRESS, "0x1234"])
    finally:
        first.stop()  # SIGTERM: anvil writes its state
    second = persisted()
    try:
        kept = start_chain(second)
        assert kept["status"] == "kept" and kept["reason"] is None
        assert kept["genesis_hash"] == started["genesis_hash"]
        assert second.rpc("eth_getBalance", [ADDRESS, "latest"]) == "0x1234"
    finally:
        second.stop()
    time.sleep(1.1)  # a genesis block of another second
    third = persisted()
    try:
        fresh = start_chain(third, new_chain=True)
        assert fresh["status"] == "new" and "asked for a new chain" in fresh["reason"]
        assert fresh["genesis_hash"] != started["genesis_hash"]
        assert third.rpc("eth_getBalance", [ADDRESS, "latest"]) == "0x0"
    finally:
        third.stop()
    assert list((tmp_path / "anvil").glob("anvil-state.json.discarded-*"))
