import time

import pytest

from verity.devnet import CHAIN_ID, Anvil, free_port
from verity.devnet.process import port_is_free
from verity.devnet.ticker import rpc_call

pytestmark = pytest.mark.integration


def test_anvil_fixture_answers_succeeds(anvil, anvil_rpc_url):
    assert int(rpc_call(anvil_rpc_url, "eth_chainId"), 16) == CHAIN_ID
    accounts = rpc_call(anvil_rpc_url, "eth_accounts")
    assert len(accounts) == 20
    assert accounts[0].lower() == "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266"  # first key of the dev mnemonic
    assert rpc_call(anvil_rpc_url, "anvil_getAutomine") is True


def test_block_ticker_mines_over_time_succeeds(anvil, block_ticker):
    before = anvil.block_number()
    t_before = int(rpc_call(anvil.rpc_url, "eth_getBlockByNumber", ["latest", False])["timestamp"], 16)
    ticker = block_ticker(0.3)
    time.sleep(1.6)
    ticker.stop()
    after = anvil.block_number()
    t_after = int(rpc_call(anvil.rpc_url, "eth_getBlockByNumber", ["latest", False])["timestamp"], 16)
    assert after - before >= 3 and ticker.errors == 0
    assert t_after > t_before  # the chain clock moved without transactions
    time.sleep(0.5)
    assert anvil.block_number() == after  # stopped means stopped


def test_anvil_stop_cleans_up_succeeds(tmp_path):
    port = free_port()
    chain = Anvil(tmp_path / "anvil", port, accounts=3, block_interval=0.2).start()
    pid = chain.pid
    assert len(chain.rpc("eth_accounts")) == 3
    time.sleep(0.5)
    assert chain.ticker is not None and chain.ticker.mined >= 1
    chain.stop()
    assert not chain.running() and chain.ticker is None
    assert port_is_free(port)
    assert not (tmp_path / "anvil" / "anvil.pid").exists()
    with pytest.raises(OSError):
        rpc_call(chain.rpc_url, "eth_chainId", timeout=1)
    import os

    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_anvil_spills_old_states_into_its_own_bounded_directory_succeeds(tmp_path):
    """anvil's default wrote a full state per block into ~/.foundry/anvil/tmp and never removed it:
    ~5 GB per test run, until the disk filled. Ours spill into the chain's directory, at most N of them."""
    from web3 import Web3

    from verity.devnet.anvil import PERSISTED_STATES

    assert 0 < PERSISTED_STATES <= 256
    chain = Anvil(tmp_path / "anvil", accounts=2, persisted_states=8).start()
    try:
        w3 = Web3(Web3.HTTPProvider(chain.rpc_url))
        a = w3.eth.accounts
        for _ in range(800):  # one block each: past anvil's in-memory window (~640 here), so states spill
            w3.eth.send_transaction({"from": a[0], "to": a[1], "value": 1})
        spilled = list((tmp_path / "anvil" / "states").rglob("*.json"))
        assert 0 < len(spilled) <= 8, len(spilled)  # it did spill (~160 states), and kept at most 8
        assert chain.rpc("eth_getBalance", [a[1], "latest"]) is not None
    finally:
        chain.stop()
