"""Chain access for the off-chain clients: deployments, transactions, events, protocol facts.

Nodes talk to the contracts with web3.py and a local key (one process, one key);
`ape` deploys the contracts and drives the `ape run submit` script. Both read the
same deployments file written by `ape run deploy`.
"""
from verity.chain.client import ChainClient, TxFailed
from verity.chain.deployments import Deployments, load_deployments
from verity.chain.events import EventCursor

__all__ = ["ChainClient", "TxFailed", "Deployments", "load_deployments", "EventCursor"]
