"""Process settings, read from the environment (prefix `VERITY_`), defaults pointing at the devnet.

Example: `VERITY_IPFS_API=/dns/ipfs.example/tcp/5001/https VERITY_RPC_URL=https://… verity node run`.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="VERITY_", extra="ignore")

    # chain
    rpc_url: str = ""        # default: the devnet's anvil on 127.0.0.1:<anvil_port>
    chain_id: int = 31337
    rpc_timeout: float = Field(30.0, gt=0, description="seconds one RPC request may wait for its answer")
    # a running node rides out an unreachable RPC or IPFS endpoint (backing off up to 30 s); past this many seconds
    # of one outage it stops instead (0: never)
    max_outage: float = Field(0.0, ge=0, description="seconds of one RPC/IPFS outage before a node stops; 0 = never")
    # EIP-1559: the most a transaction may bid per gas (maxFeePerGas), in gwei; above it nothing is sent (0: no cap)
    max_fee_gwei: float = Field(0.0, ge=0, description="cap on a transaction's maxFeePerGas in gwei; 0 = none")
    # a node whose fetches of task inputs run below its declared bandwidth tier re-declares the tier they reach
    # (node/netprobe.py); False: it only logs the verdict
    self_demote: bool = Field(True, description="re-declare a lower bandwidth when the measured rate says so")
    # the event index (verity.index, docs/indexer.md) stores blocks this deep only; readers get newer ones live
    index_confirmations: int = Field(2, ge=0, description="blocks below the head before the index stores a block")

    # storage (IPFS HTTP RPC API: a multiaddr or http(s) URL; Kubo in production)
    ipfs_api: str = ""       # default: the devnet's IPFS node on 127.0.0.1:<ipfs_api_port>
    ipfs_timeout: float = Field(30.0, gt=0, description="seconds a request may wait for an answer or the next bytes")
    ipfs_retries: int = Field(3, ge=0, description="extra attempts after a transient failure")
    ipfs_backoff: float = Field(0.5, ge=0, description="first retry delay; doubles each attempt")
    max_download_bytes: int = Field(2 << 30, gt=0, description="cap on any single download")
    max_json_bytes: int = Field(4 << 20, gt=0, description="cap on manifests, result bundles and other JSON")
    min_download_rate: float = Field(256 * 1024, gt=0, description="bytes/s a download must average")

    # local state and devnet
    state_dir: Path = Path(".verity")
    devnet_dir: Path = Path(".verity/devnet")
    anvil_port: int = 8545
    ipfs_api_port: int = 5001
    devnet_accounts: int = 20
    devnet_mnemonic: str = "test test test test test test test test test test test junk"
    block_interval: float = Field(1.0, ge=0, description="seconds between empty blocks on the devnet; 0 = none")

    @model_validator(mode="after")
    def _devnet_addresses(self) -> "Settings":
        """Unset service addresses follow the devnet's configured ports (one place for the rule)."""
        if not self.rpc_url:
            self.rpc_url = f"http://127.0.0.1:{self.anvil_port}"
        if not self.ipfs_api:
            self.ipfs_api = f"/ip4/127.0.0.1/tcp/{self.ipfs_api_port}/http"
        return self
