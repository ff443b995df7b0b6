"""Unit test of ChainClient's nonce handling (the RPC faked at the edge): the nonce is the chain's pending
count at send time, and a send that raced another process using the same key is retried once."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
from eth_account import Account
from web3.exceptions import Web3RPCError

from verity.chain.client import ChainClient
from verity.errors import VerityError

KEY = "0x" + "11" * 32


class _Eth:
    def __init__(self, pending: list[int], races: int):
        self.pending, self.races, self.sent, self.chain_id = pending, races, [], 31337

    def get_transaction_count(self, address, block):
        assert block == "pending"
        return self.pending.pop(0)

    def send_raw_transaction(self, raw):
        self.sent.append(raw)
        if self.races:
            self.races -= 1
            raise Web3RPCError("{'code': -32003, 'message': 'nonce too low'}")
        return b"\x01" * 32

    def wait_for_transaction_receipt(self, tx_hash, timeout, poll_latency):
        return {"status": 1, "blockNumber": 7}


class _Fn:
    fn_name = "heartbeat"

    def __init__(self):
        self.nonces = []

    def build_transaction(self, params):
        self.nonces.append(params["nonce"])
        return {"to": "0x" + "22" * 20, "value": 0, "gas": 50_000, "gasPrice": 1, "nonce": params["nonce"],
                "chainId": params["chainId"], "data": b""}


def _client(pending, races):
    c = object.__new__(ChainClient)  # no RPC: only what transact() touches
    c.account = Account.from_key(KEY)
    c.address, c.receipt_timeout = c.account.address, 1
    c.w3 = SimpleNamespace(eth=_Eth(pending, races))
    return c


def test_nonce_is_read_from_the_chain_for_every_transaction_succeeds():
    c, fn = _client(pending=[5, 9], races=0), _Fn()
    c.transact(fn)
    c.transact(fn)  # another process sent 3 transactions with our key in between
    assert fn.nonces == [5, 9]


def test_nonce_race_is_retried_once_with_a_fresh_nonce_succeeds():
    c, fn = _client(pending=[5, 6], races=1), _Fn()
    assert c.transact(fn)["status"] == 1
    assert fn.nonces == [5, 6] and len(c.w3.eth.sent) == 2


def test_nonce_race_twice_in_a_row_fails_with_a_clear_error():
    c = _client(pending=[5, 6], races=2)
    with pytest.raises(VerityError, match="another sender using this key took our nonce twice in a row"):
        c.transact(_Fn())
