"""`verity devnet faucet`: VRT (and ETH) for any devnet account.

VRT comes from the DevnetFaucet contract, the devnet token's only minter: anyone
may call its `drip`, at most MAX_DRIP per call (larger amounts take several
drips), within the token's MAX_SUPPLY. The drip is sent from test account 0 of
the dev mnemonic, which only pays the gas. ETH is added with anvil's
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


def fund(rpc_url: str, deployments_file: Path, to: str, *, vrt_wei: int, eth_wei: int) -> dict[str, Any]:
    """Drip `vrt_wei` VRT to `to` and add `eth_wei` ETH; returns `to`'s balances afterwards."""
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
    client = ChainClient(rpc_url, devnet_key(0), load_deployments(chain_id, deployments_file))
    faucet = client.contracts.get("DevnetFaucet")
    if faucet is None:
        raise FaucetRefused("faucet", f"the deployment of chain {chain_id} has no DevnetFaucet (only a devnet has one)")
    token = client.token
    room = int(client.call(token.functions.MAX_SUPPLY())) - int(client.call(token.functions.totalMinted()))
    if vrt_wei > room:
        raise FaucetRefused("--amount", f"{vrt_wei / WEI:,.0f} VRT is more than the supply cap leaves "
                                        f"({room / WEI:,.0f})")
    max_drip = int(client.call(faucet.functions.MAX_DRIP()))
    left = vrt_wei
    while left:
        step = min(left, max_drip)
        client.transact(faucet.functions.drip(to, step))
        left -= step
    if eth_wei:
        balance = client.w3.eth.get_balance(to)
        try:
            rpc_call(rpc_url, "anvil_setBalance", [to, hex(balance + eth_wei)])
        except RuntimeError as exc:
            raise FaucetRefused("--eth", f"this chain cannot set balances ({exc}); is it an anvil devnet?") from None
    return {"address": to, "vrt": client.call(client.token.functions.balanceOf(to)),
            "eth": client.w3.eth.get_balance(to)}
