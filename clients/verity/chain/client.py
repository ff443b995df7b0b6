"""A small, explicit web3 client for one node: one key, local signing, decoded errors."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import requests
from eth_abi import decode as abi_decode
from eth_account import Account
from eth_utils import keccak
from web3 import HTTPProvider, Web3
from web3.exceptions import ContractCustomError, ContractLogicError, TimeExhausted, Web3RPCError
from web3.providers.rpc.utils import ExceptionRetryConfiguration

from verity.chain.deployments import Deployments
from verity.errors import VerityError

DEVNET_MNEMONIC = "test test test test test test test test test test test junk"
Account.enable_unaudited_hdwallet_features()


class TxFailed(VerityError):
    """A transaction or call reverted; `error` is the decoded custom error name."""

    def __init__(self, what: str, error: str, args: tuple = ()):
        self.what, self.error, self.args_ = what, error, args
        super().__init__(f"{what} reverted: {error}{args if args else ''}")


GWEI = 10**9


class FeeTooHigh(VerityError):
    """The chain asks more per gas than the operator's VERITY_MAX_FEE_GWEI allows: nothing was sent."""

    def __init__(self, what: str, asked: int, cap: int, kind: str):
        self.asked, self.cap = asked, cap
        super().__init__(f"{what}: not sent: the chain's {kind} is {asked / GWEI:g} gwei, above the "
                         f"VERITY_MAX_FEE_GWEI cap of {cap / GWEI:g} gwei (raise the cap or wait for cheaper blocks)")


class ChainUnreachable(VerityError, ConnectionError):
    """The RPC endpoint did not answer: refused, reset, timed out, or an HTTP 5xx/429. Without `reason`: at connect
    time (a hint to start the devnet); with it: a request of a running client (node/loop.py rides that out)."""

    def __init__(self, rpc_url: str, reason: str | None = None):
        self.rpc_url, self.reason = rpc_url, reason
        if reason is None:
            super().__init__(f"no EVM node answers at {rpc_url}; start one with `verity devnet up`")
        else:
            super().__init__(f"chain RPC at {rpc_url} did not answer: {reason}")


# Seconds to open a connection to the RPC endpoint (a partition drops packets: fail in this, not the read timeout).
CONNECT_TIMEOUT = 10.0


class _RpcProvider(HTTPProvider):
    """HTTPProvider whose transport failures surface as ChainUnreachable (a ConnectionError), so every read, event
    poll and transaction of a node sees an unreachable chain the same way, and a node rides it out (node/loop.py).

    web3 retries refused connections and HTTP errors a few times (about 1 s in all) but not read timeouts: an
    endpoint that accepts connections and then never answers (a paused or overloaded node) costs one timeout per
    request, and the node's loop does the longer backoff."""

    def make_request(self, method, params):
        try:
            return super().make_request(method, params)
        except requests.exceptions.HTTPError as exc:
            status = getattr(exc.response, "status_code", None)
            if status is not None and (status >= 500 or status == 429):
                raise ChainUnreachable(str(self.endpoint_uri), f"{method}: HTTP {status}") from exc
            raise
        except (requests.exceptions.ConnectionError, requests.exceptions.Timeout,
                requests.exceptions.ChunkedEncodingError) as exc:
            raise ChainUnreachable(str(self.endpoint_uri), f"{method}: {type(exc).__name__}: {_short(exc)}") from exc


def _short(exc: BaseException) -> str:
    """requests' messages nest urllib3's (`HTTPConnectionPool(...): Max retries exceeded ... (Caused by ...)`):
    keep the OS's reason (`[Errno 111] Connection refused`) or the timeout, else the start of the message."""
    text = str(exc)
    errno_reason = re.search(r"\[Errno -?\d+\][^\"')]*", text)
    if errno_reason:
        return errno_reason.group(0).strip()
    timed_out = re.search(r"(Read|Connect) timed out\. \((read|connect) timeout=[^)]*\)", text)
    return timed_out.group(0) if timed_out else text[:200]


def rpc_provider(rpc_url: str, timeout: float = 30.0) -> HTTPProvider:
    """The provider of every ChainClient: bounded connect and read timeouts, transport failures as ChainUnreachable."""
    retry = ExceptionRetryConfiguration(errors=(requests.exceptions.ConnectionError, requests.exceptions.HTTPError),
                                        retries=3, backoff_factor=0.125)
    return _RpcProvider(rpc_url, request_kwargs={"timeout": (min(CONNECT_TIMEOUT, timeout), timeout)},
                        exception_retry_configuration=retry)


def devnet_key(index: int) -> str:
    """Private key of ape/anvil test account `index` (the devnet mnemonic; never use elsewhere)."""
    acct = Account.from_mnemonic(DEVNET_MNEMONIC, account_path=f"m/44'/60'/0'/0/{index}")
    return acct.key.hex()


@dataclass(frozen=True)
class _ErrorAbi:
    name: str
    types: list[str]


class ErrorDecoder:
    """Maps 4-byte selectors of every custom error in the ABIs to readable names."""

    def __init__(self, abis: list[list[dict]]):
        self._errors: dict[bytes, _ErrorAbi] = {}
        for abi in abis:
            for item in abi:
                if item.get("type") != "error":
                    continue
                types = [_abi_type(i) for i in item.get("inputs", [])]
                sig = f"{item['name']}({','.join(types)})"
                self._errors[keccak(text=sig)[:4]] = _ErrorAbi(item["name"], types)

    def decode(self, data: str | bytes) -> tuple[str, tuple]:
        raw = bytes.fromhex(data[2:] if isinstance(data, str) and data.startswith("0x") else data) if isinstance(data, str) else bytes(data)
        err = self._errors.get(raw[:4])
        if err is None:
            return (f"unknown error 0x{raw[:4].hex()}", ())
        try:
            return err.name, tuple(abi_decode(err.types, raw[4:]))
        except Exception:  # malformed payload: still name the error
            return err.name, ()


def _abi_type(inp: dict) -> str:
    if inp["type"].startswith("tuple"):
        inner = ",".join(_abi_type(c) for c in inp["components"])
        return f"({inner}){inp['type'][5:]}"
    return inp["type"]


def connect_chain(rpc_url: str, private_key: str | None = None, *, timeout: float = 30.0,
                  max_fee_gwei: float | None = None) -> "ChainClient":
    """A client for the deployment recorded for whatever chain answers at `rpc_url`; `timeout`: seconds one
    request may wait for its answer; `max_fee_gwei`: the operator's cap on maxFeePerGas (default: the
    VERITY_MAX_FEE_GWEI setting; 0 = none)."""
    from verity.chain.deployments import check_deployment_chain, load_deployments
    from verity.settings import Settings

    if max_fee_gwei is None:
        max_fee_gwei = Settings().max_fee_gwei

    w3 = Web3(HTTPProvider(rpc_url, request_kwargs={"timeout": 10}))
    try:
        chain_id = w3.eth.chain_id
    except OSError:  # requests.ConnectionError and friends: nobody answers
        raise ChainUnreachable(rpc_url) from None
    dep = load_deployments(chain_id)
    check_deployment_chain(w3, chain_id, rpc_url, dep=dep)
    return ChainClient(rpc_url, private_key, dep, timeout=timeout, max_fee_wei=int(max_fee_gwei * GWEI))


class ChainClient:
    """web3 contracts of one deployment, signing with one local key.

    Transactions are sent one at a time (receipts awaited with a bound) so a
    node's actions are ordered and never double-sent. The nonce is the chain's
    pending count read at send time, not a local counter, so other processes
    using the same key (a stake top-up while the node runs) never desynchronise
    it; a send that still races one of them ("nonce too low") is retried once.
    """

    max_fee_wei: int | None = None   # EIP-1559 cap on maxFeePerGas (cap_fees); None: web3's own bid

    def __init__(self, rpc_url: str, private_key: str | None, deployments: Deployments, *, receipt_timeout: float = 60.0,
                 timeout: float = 30.0, max_fee_wei: int | None = None):
        self.rpc_url = rpc_url
        self.max_fee_wei = max_fee_wei or None
        self.w3 = Web3(rpc_provider(rpc_url, timeout))
        if not self.w3.is_connected():
            raise ChainUnreachable(rpc_url)
        # no key: a throwaway one, for read-only use (views, events)
        self.account = Account.from_key(private_key) if private_key else Account.create()
        self.address: str = self.account.address
        self.deployments = deployments
        self.receipt_timeout = receipt_timeout
        self.contracts = {
            name: self.w3.eth.contract(address=Web3.to_checksum_address(c.address), abi=c.abi)
            for name, c in deployments.contracts.items()
        }
        self.errors = ErrorDecoder([c.abi for c in deployments.contracts.values()])

    # Contracts by role, so callers read `client.jobs.functions.…`.
    @property
    def token(self):
        return self.contracts["VerityToken"]

    @property
    def registry(self):
        return self.contracts["NodeRegistry"]

    @property
    def jobs(self):
        return self.contracts["JobRegistry"]

    @property
    def game(self):
        return self.contracts["DisputeGame"]

    @property
    def escrow(self):
        """JobEscrow: every job's escrow (`escrowOf(jobId)`); task payments are sent at once (`PaymentSent`)."""
        return self.contracts["JobEscrow"]

    @property
    def panel(self):
        """RefereePanel: seats, votes (`seat`, `commitVote`, `revealVote`, `advance`); referee rewards are paid at once
        (`Credited`)."""
        return self.contracts["RefereePanel"]

    @property
    def lens(self):
        """NodeLens: read-only views of the registry's selection state (`weightsOf`, the factors, tiers, trees)."""
        return self.contracts["NodeLens"]

    @property
    def dispute_lens(self):
        """DisputeLens: read-only views of the game's disputes (`getDispute`, `clocksRemaining`, `disputedStep`)."""
        return self.contracts["DisputeLens"]

    @property
    def randomness(self):
        """BlockhashRandomness (IRandomness): the two-phase random values of replica draws and referee panels."""
        return self.contracts["BlockhashRandomness"]

    @property
    def fees(self):
        """VerificationFees: per-job verification pots, verifiers' key chains, blind checks and fee claims (P5)."""
        return self.contracts["VerificationFees"]

    def now(self) -> int:
        return int(self.w3.eth.get_block("latest")["timestamp"])

    def block_number(self) -> int:
        return int(self.w3.eth.block_number)

    def call(self, fn, block: int | str = "latest") -> Any:
        """A view call; pass `block` to read several values at one consistent height."""
        try:
            return fn.call({"from": self.address}, block_identifier=block)
        except ContractCustomError as exc:
            name, args = self.errors.decode(exc.data)
            raise TxFailed(fn.fn_name, name, args) from None
        except ContractLogicError as exc:
            raise TxFailed(fn.fn_name, str(exc)) from None

    def transact(self, fn, *, gas: int | None = None) -> dict:
        """Sign, send and await one transaction; raise TxFailed with the decoded error."""
        try:
            return self._send(fn, gas)
        except _NonceRace:
            return self._send(fn, gas)  # another sender with our key took that nonce: once more, fresh

    def _send(self, fn, gas: int | None) -> dict:
        what = fn.fn_name
        try:
            tx = fn.build_transaction({"from": self.address, "nonce": self.next_nonce(), "chainId": self.w3.eth.chain_id})
        except ContractCustomError as exc:
            name, args = self.errors.decode(exc.data)
            raise TxFailed(what, name, args) from None
        except ContractLogicError as exc:
            raise TxFailed(what, str(exc)) from None
        self.cap_fees(tx, what)
        if gas is not None:
            tx["gas"] = gas
        else:  # estimate + margin: later state can cost more than the estimate
            tx["gas"] = int(tx["gas"] * 1.25) + EPOCH_HEADROOM_GAS
        signed = self.account.sign_transaction(tx)
        try:
            tx_hash = self.w3.eth.send_raw_transaction(signed.raw_transaction)
        except (Web3RPCError, ValueError) as exc:
            if any(m in str(exc).lower() for m in NONCE_RACE_MESSAGES):
                raise _NonceRace(str(exc)) from None
            raise
        try:
            receipt = self.w3.eth.wait_for_transaction_receipt(tx_hash, timeout=self.receipt_timeout, poll_latency=0.05)
        except TimeExhausted:
            raise VerityError(f"{what}: no receipt for {tx_hash.hex()} after {self.receipt_timeout:.0f} s") from None
        if receipt["status"] != 1:
            raise TxFailed(what, f"status 0 in block {receipt['blockNumber']}")
        return receipt

    def cap_fees(self, tx: dict, what: str = "transaction") -> None:
        """Hold an EIP-1559 transaction's bid (web3's default: twice the base fee plus the tip) to the operator's cap,
        the tip too; refuse, before anything is signed or sent, when the chain's base fee is already above the cap:
        such a transaction would wait unmined, and the node's deadlines with it. A legacy gasPrice is held the same
        way."""
        cap = self.max_fee_wei
        if not cap:
            return
        if "maxFeePerGas" not in tx:
            if int(tx.get("gasPrice", 0)) > cap:
                raise FeeTooHigh(what, int(tx["gasPrice"]), cap, "gas price")
            return
        base = int(self.w3.eth.get_block("latest").get("baseFeePerGas") or 0)
        if base > cap:
            raise FeeTooHigh(what, base, cap, "base fee")
        tx["maxFeePerGas"] = min(int(tx["maxFeePerGas"]), cap)
        tx["maxPriorityFeePerGas"] = min(int(tx.get("maxPriorityFeePerGas", 0)), tx["maxFeePerGas"])

    def next_nonce(self) -> int:
        """The chain's count of our transactions, pending ones included."""
        return int(self.w3.eth.get_transaction_count(self.address, "pending"))


# Gas above the estimate (x 1.25) every transaction may use: a weight change that lands in a new selection epoch
# first keeps each written tree word's snapshot (NodeRegistry, issue 23: about 5k gas a word, 22k the first time
# ever), which an estimate made in the previous epoch did not pay; six words per tree, one or two trees per role.
# Unused gas is not charged.
EPOCH_HEADROOM_GAS = 300_000

NONCE_RACE_MESSAGES = ("nonce too low", "already known", "replacement transaction underpriced", "nonce has already been used")


class _NonceRace(VerityError):
    """The nonce we read was taken by another sender with the same key before our transaction arrived."""

    def __init__(self, detail: str):
        super().__init__(f"another sender using this key took our nonce twice in a row ({detail})")
