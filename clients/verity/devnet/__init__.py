"""Managers of the local services: anvil (+ block ticker) and js-ipfs nodes."""

from verity.devnet.anvil import CHAIN_ID, DEV_MNEMONIC, Anvil
from verity.devnet.ipfs import IpfsNode
from verity.devnet.process import ServiceError, free_port
from verity.devnet.ticker import BlockTicker

__all__ = ["CHAIN_ID", "DEV_MNEMONIC", "Anvil", "BlockTicker", "IpfsNode", "ServiceError", "free_port"]
