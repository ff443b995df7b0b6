"""Deploy the contracts onto a running devnet by running `ape run deploy`, the user's own path.

Next to `<dir>/<chain id>.json` the devnet keeps `<chain id>.chain.json`, the
identity (chain id, genesis hash) of the chain those contracts live on, so a
deployments file is never reused against a new chain (`deploy_for_chain`).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from verity.errors import VerityError

REPO = Path(__file__).resolve().parents[3]


class DeployFailed(VerityError):
    def __init__(self, code: int, tail: str):
        super().__init__(f"`ape run deploy` exited with {code}:\n{tail}")


def tool_env(rpc_url: str | None = None, extra: dict | None = None) -> dict:
    """Environment for ape and forge: solc-js front, node binaries, the devnet's anvil."""
    env = dict(os.environ)
    env.update(extra or {})
    env["SOLCX_BINARY_PATH"] = str(REPO / "anvil" / "solc-bin")
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), str(REPO / "anvil" / "node_modules" / ".bin"), env.get("PATH", "")])
    if rpc_url:
        env["APE_FOUNDRY_HOST"] = rpc_url  # ape connects to the devnet's anvil instead of starting one
    return env


def ape_run(script: str, args: list[str], *, rpc_url: str, env: dict | None = None, timeout: float = 600,
            capture: bool = True) -> subprocess.CompletedProcess:
    ape = Path(sys.executable).parent / "ape"
    cmd = [str(ape), "run", script, *args, "--network", "ethereum:local:foundry"]
    return subprocess.run(cmd, cwd=REPO, env=tool_env(rpc_url, env), timeout=timeout, text=True,
                          stdout=subprocess.PIPE if capture else None, stderr=subprocess.STDOUT if capture else None)


def drop_stale_build(root: Path = REPO) -> bool:
    """Make ape's next compile a full one when a contract source is newer than its build manifest. Its incremental
    compile once kept old contract types after edits to a contract and to a types file it imports (the 32-host lab
    deployed a RefereePanel without its new constant, .build/__local__.json holding the new source text beside the
    old ABI and bytecode); a clean clone, as in CI, never has a manifest to go stale. Returns True if it dropped one."""
    manifest = root / ".build" / "__local__.json"
    if not manifest.exists():
        return False
    built = manifest.stat().st_mtime
    if any(p.stat().st_mtime > built for p in (root / "contracts").rglob("*.sol")):
        manifest.unlink()
        return True
    return False


def deploy(rpc_url: str, deployments_dir: Path, *, chain_id: int = 31337, force: bool = False) -> str:
    """Deploy (unless a live deployment is recorded there already) and write `<dir>/<chain id>.json`.

    The script mints faucet tokens to ape's 10 test accounts; `verity devnet faucet` serves all 20."""
    drop_stale_build()
    args = ["--out", str(deployments_dir / f"{chain_id}.json")] + (["--force"] if force else [])
    proc = ape_run("deploy", args, rpc_url=rpc_url)
    if proc.returncode != 0:
        raise DeployFailed(proc.returncode, "\n".join(proc.stdout.splitlines()[-15:]))
    return proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""


def deploy_for_chain(rpc_url: str, deployments_dir: Path, identity: dict, *, new_chain: bool) -> tuple[str, bool]:
    """`deploy` onto the chain `identity` names; a deployments file of another chain (or any,
    when `new_chain`) is moved to `<chain id>.json.old` and the contracts deployed afresh.

    Returns the script's last line and whether the old file was set aside."""
    from verity.chain.identity import same_chain

    chain_id = int(identity["chain_id"])
    path, marker = deployments_dir / f"{chain_id}.json", deployments_dir / f"{chain_id}.chain.json"
    try:
        recorded = json.loads(marker.read_text())
    except (OSError, ValueError):
        recorded = None
    stale = new_chain or (recorded is not None and not same_chain(recorded, identity))
    set_aside = stale and path.exists()
    if set_aside:
        os.replace(path, path.with_name(f"{path.name}.old"))
    marker.unlink(missing_ok=True)  # until the deployment below is written
    line = deploy(rpc_url, deployments_dir, chain_id=chain_id, force=stale)
    deployments_dir.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps(identity) + "\n")
    return line, set_aside
