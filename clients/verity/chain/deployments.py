"""The deployments file: contract addresses and ABIs per chain id.

Written by `ape run deploy` (scripts/deploy.py), read by every client, so nodes
need neither ape nor the build folder at run time.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from verity.errors import VerityError

class DeploymentMissing(VerityError, FileNotFoundError):
    def __init__(self, path: Path, chain_id: int | None = None):
        where = f" for chain {chain_id}" if chain_id is not None else ""
        super().__init__(f"no Verity deployment{where} at {path}; run `ape run deploy` (or `verity devnet up`) first")


class DeployedContract(BaseModel):
    model_config = ConfigDict(extra="forbid")
    address: str
    abi: list[dict]
    block: int = 0


# Contracts whose code a deployed contract runs by delegatecall (JobRegistry runs TaskMachine's and JobViews'): their
# custom errors revert from the caller's address, so the deployments file lists them in the caller's ABI.
DELEGATES: dict[str, tuple[str, ...]] = {"JobRegistry": ("TaskMachine", "JobViews")}
# Delegates whose functions are the caller's too (JobRegistry's fallback runs JobViews' views): merged as well.
FUNCTION_DELEGATES: dict[str, tuple[str, ...]] = {"JobRegistry": ("JobViews",)}


def merged_abi(name: str, abi_of) -> list[dict]:
    """`name`'s ABI (JSON dicts) with its delegates' errors and its function delegates' functions added (each once).
    `abi_of(contract_name)` gives a compiled contract's ABI as JSON dicts, or None if it is not compiled."""
    def key(item: dict) -> tuple:
        return item.get("type"), item.get("name"), tuple(x["type"] for x in item.get("inputs", []))

    abi = list(abi_of(name) or [])
    have = {key(i) for i in abi}
    for delegate in DELEGATES.get(name, ()):
        kinds = ("error", "function") if delegate in FUNCTION_DELEGATES.get(name, ()) else ("error",)
        for item in abi_of(delegate) or []:
            if item.get("type") in kinds and key(item) not in have:
                have.add(key(item))
                abi.append(item)
    return abi


class DeploymentOutdated(VerityError, LookupError):
    def __init__(self, path, missing: list[str]):
        super().__init__(f"the deployment in {path} lacks {', '.join(missing)} (an older protocol version); redeploy with "
                         "`verity devnet up` (which redeploys an outdated devnet deployment) or `ape run deploy --force`")


class Deployments(BaseModel):
    model_config = ConfigDict(extra="forbid")
    version: int = 2  # 2: protocol v2 (docs/protocol-v2.md); VerificationFees since 2026-11-30, Timelock (and the
    # devnet's DevnetFaucet) since 2026-12-01: missing_contracts tells an older file apart
    chain_id: int
    deployer: str
    contracts: dict[str, DeployedContract]
    # the chain's genesis block hash (`ape run deploy` records it since issue 25): a chain id names a network, the
    # genesis tells a testnet from a fork or a restarted devnet with the same id; None in files written before
    genesis_hash: str | None = None

    @property
    def start_block(self) -> int:
        """First block worth scanning for events (the earliest deployment)."""
        return min((c.block for c in self.contracts.values()), default=0)


def default_path(chain_id: int, root: Path | None = None) -> Path:
    """`$VERITY_DEPLOYMENTS_DIR/<chain id>.json`, by default inside the devnet dir,
    so every process of one devnet (and no other) reads the same file."""
    if root is None:
        from verity.settings import Settings

        root = Path(os.environ.get("VERITY_DEPLOYMENTS_DIR") or Settings().devnet_dir / "deployments")
    return Path(root) / f"{chain_id}.json"


def load_deployments(chain_id: int, path: Path | None = None) -> Deployments:
    path = path or default_path(chain_id)
    if not path.is_file():
        raise DeploymentMissing(path, chain_id)
    dep = Deployments.model_validate_json(path.read_bytes())
    if dep.chain_id != chain_id:
        raise VerityError(f"deployments file {path} is for chain {dep.chain_id}, connected to chain {chain_id}")
    missing = missing_contracts(dep)
    if missing:
        raise DeploymentOutdated(path, missing)
    return dep


def missing_contracts(dep: Deployments) -> list[str]:
    """The protocol's contracts (verity.chain.protocol.CONTRACTS) a deployments file does not list; the devnet-only
    DevnetFaucet counts only on the devnet (no other chain can have one)."""
    from verity.chain.protocol import CONTRACTS, DEVNET_CHAIN_ID, DEVNET_ONLY_CONTRACTS

    needed = [n for n in CONTRACTS if dep.chain_id == DEVNET_CHAIN_ID or n not in DEVNET_ONLY_CONTRACTS]
    return [n for n in needed if n not in dep.contracts]


class DeploymentOfAnotherChain(VerityError, LookupError):
    def __init__(self, path: Path, rpc_url: str, recorded: str, actual: str):
        super().__init__(f"the deployments in {path} belong to the chain with genesis {recorded[:12]}…, but the chain "
                         f"at {rpc_url} has genesis {actual[:12]}… (another devnet on that port, or a fork?); start "
                         f"yours with `verity devnet up`, point VERITY_RPC_URL at the chain it was deployed on, or "
                         f"deploy on this one (`ape run deploy --network …`)")


def check_deployment_chain(w3, chain_id: int, rpc_url: str, path: Path | None = None,
                           dep: Deployments | None = None) -> None:
    """Refuse a chain with the same id but another genesis block than the deployment's: the same addresses would be
    someone else's. The genesis comes from the deployments file itself (`dep.genesis_hash`), or for a file without
    one from the devnet's `<chain id>.chain.json` marker beside it."""
    from verity.chain.identity import chain_identity, same_chain

    path = path or default_path(chain_id)
    if dep is not None and dep.genesis_hash:
        recorded = {"chain_id": dep.chain_id, "genesis_hash": dep.genesis_hash}
    else:
        try:
            recorded = json.loads(path.with_name(f"{chain_id}.chain.json").read_text())
        except (OSError, ValueError):
            return  # no record (a deployment made by hand, or an older devnet): nothing to compare
        path = path.with_name(f"{chain_id}.chain.json")
    actual = chain_identity(w3)
    if not same_chain(recorded, actual):
        raise DeploymentOfAnotherChain(path, rpc_url, str(recorded.get("genesis_hash")), actual["genesis_hash"])


def save_deployments(dep: Deployments, path: Path) -> None:
    """Write atomically: a crash mid-write never leaves a truncated file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(dep.model_dump(), indent=1))
    os.replace(tmp, path)
