"""`verity devnet faucet`: VRT (and ETH) for any devnet account.

VRT is minted by the token's owner, which on the devnet is a test account of
the dev mnemonic (the deployer, account 0); ETH is added with anvil's
`anvil_setBalance`, so it works for any address and costs nobody anything.
"""
from __future__ import annotations

from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from verity.errors import VerityError

WEI = 10**18


class FaucetRefused(VerityError, ValueError):
    """Bad input to the faucet, or a chain on which it cannot mint."""

    def __init__(self, what: str, reason: str):
        self.what, self.reason = what, reason
        super().__init__(f"{what}: {reason}")


def to_wei(option: str, amount: str) -> int:
    """`amount` tokens (decimal, 18 decimals) as wei; refuses negative or unparsable input."""
    try:
        value = Decimal(amount) * WEI
    except InvalidOperation:
        raise FaucetRefused(option, f"{amount!r} is not a number") from None
    if not value.is_finite():
        raise FaucetRefused(option, f"{amount!r} is not a finite number")
    if value > Decimal(10) ** 30:
        raise FaucetRefused(option, f"{amount!r} is more than the devnet hands out at once (10^12)")
    if value < 0 or value != value.to_integral_value():
        raise FaucetRefused(option, f"{amount!r} must be a non-negative amount with at most 18 decimals")
    return int(value)


def devnet_address(index: int) -> str:
    from eth_account import Account

    from verity.chain.client import devnet_key

    return Account.from_key(devnet_key(index)).address


def fund(rpc_url: str, deployments_file: Path, to: str, *, vrt_wei: int, eth_wei: int,
         accounts: int = 20) -> dict[str, Any]:
    """Mint `vrt_wei` VRT to `to` and add `eth_wei` ETH; returns `to`'s balances afterwards."""
    from web3 import Web3

    from verity.chain.client import ChainClient, devnet_key
    from verity.chain.deployments import load_deployments
    from verity.devnet.ticker import rpc_call

    if not Web3.is_address(to):
        raise FaucetRefused("--address", f"{to!r} is not an Ethereum address")
    to = Web3.to_checksum_address(to)
    try:
        chain_id = int(rpc_call(rpc_url, "eth_chainId", timeout=5), 16)
    except OSError:
        from verity.chain.client import ChainUnreachable

        raise ChainUnreachable(rpc_url) from None
    reader = ChainClient(rpc_url, None, load_deployments(chain_id, deployments_file))
    owner = reader.call(reader.token.functions.owner())
    index = next((i for i in range(accounts) if devnet_address(i) == owner), None)
    if index is None:
        raise FaucetRefused("faucet", f"the token owner {owner} is not one of the {accounts} devnet accounts")
    client = ChainClient(rpc_url, devnet_key(index), reader.deployments)
    if vrt_wei:
        client.transact(client.token.functions.mint(to, vrt_wei))
    if eth_wei:
        balance = client.w3.eth.get_balance(to)
        try:
            rpc_call(rpc_url, "anvil_setBalance", [to, hex(balance + eth_wei)])
        except RuntimeError as exc:
            raise FaucetRefused("--eth", f"this chain cannot set balances ({exc}); is it an anvil devnet?") from None
    return {"address": to, "vrt": client.call(client.token.functions.balanceOf(to)),
            "eth": client.w3.eth.get_balance(to)}
