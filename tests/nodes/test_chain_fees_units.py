"""Unit test of ChainClient's EIP-1559 fee cap (issue 25 item 4; the RPC faked at the edge): an operator's
VERITY_MAX_FEE_GWEI holds every transaction's bid and tip to the cap, and a base fee above the cap sends nothing."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
from eth_account import Account

from verity.chain.client import GWEI, ChainClient, FeeTooHigh
from verity.settings import Settings

KEY = "0x" + "11" * 32


class _Eth:
    chain_id = 31337

    def __init__(self, base_fee: int):
        self.base_fee, self.sent = base_fee, []

    def get_transaction_count(self, address, block):
        return 3

    def get_block(self, which):
        return {"baseFeePerGas": self.base_fee}

    def send_raw_transaction(self, raw):
        self.sent.append(Account.recover_transaction(raw))
        return b"\x01" * 32

    def wait_for_transaction_receipt(self, tx_hash, timeout, poll_latency):
        return {"status": 1, "blockNumber": 7}


class _Fn:
    """What web3's build_transaction gives on an EIP-1559 chain: maxFeePerGas = 2 x base fee + tip."""
    fn_name = "heartbeat"

    def __init__(self, eth: _Eth, tip: int = 2 * GWEI):
        self.eth, self.tip, self.built = eth, tip, []

    def build_transaction(self, params):
        tx = {"to": "0x" + "22" * 20, "value": 0, "gas": 50_000, "maxFeePerGas": 2 * self.eth.base_fee + self.tip,
              "maxPriorityFeePerGas": self.tip, "nonce": params["nonce"], "chainId": params["chainId"], "data": b""}
        self.built.append(tx)
        return tx


def _client(base_fee: int, cap_gwei: float):
    c = object.__new__(ChainClient)  # no RPC: only what transact() touches
    c.account = Account.from_key(KEY)
    c.address, c.receipt_timeout, c.max_fee_wei = c.account.address, 1, int(cap_gwei * GWEI) or None
    c.w3 = SimpleNamespace(eth=_Eth(base_fee))
    return c


def test_bid_and_tip_are_held_to_the_operators_cap_succeeds():
    c = _client(base_fee=10 * GWEI, cap_gwei=15)
    fn = _Fn(c.w3.eth, tip=20 * GWEI)
    c.transact(fn)
    tx = fn.built[0]
    assert tx["maxFeePerGas"] == 15 * GWEI and tx["maxPriorityFeePerGas"] == 15 * GWEI   # 40 and 20 gwei asked
    assert len(c.w3.eth.sent) == 1


def test_no_cap_keeps_web3s_bid_succeeds():
    c = _client(base_fee=10 * GWEI, cap_gwei=0)
    fn = _Fn(c.w3.eth)
    c.transact(fn)
    assert fn.built[0]["maxFeePerGas"] == 22 * GWEI and fn.built[0]["maxPriorityFeePerGas"] == 2 * GWEI


def test_base_fee_above_the_cap_sends_nothing_and_says_so_fails():
    c = _client(base_fee=30 * GWEI, cap_gwei=25)
    with pytest.raises(FeeTooHigh, match=r"heartbeat: not sent: the chain's base fee is 30 gwei, above the "
                                         r"VERITY_MAX_FEE_GWEI cap of 25 gwei"):
        c.transact(_Fn(c.w3.eth))
    assert c.w3.eth.sent == []


def test_the_cap_is_a_setting_read_from_the_environment_succeeds(monkeypatch):
    monkeypatch.setenv("VERITY_MAX_FEE_GWEI", "12.5")
    assert Settings().max_fee_gwei == 12.5
    monkeypatch.setenv("VERITY_MAX_FEE_GWEI", "-1")
    with pytest.raises(ValueError):
        Settings()
