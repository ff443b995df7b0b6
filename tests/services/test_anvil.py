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
