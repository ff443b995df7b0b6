"""Deploy the contracts onto a running devnet by running `ape run deploy`, the user's own path."""
from __future__ import annotations

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


def deploy(rpc_url: str, deployments_dir: Path, *, chain_id: int = 31337, force: bool = False) -> str:
    """Deploy (unless a live deployment is recorded there already) and write `<dir>/<chain id>.json`."""
    args = ["--out", str(deployments_dir / f"{chain_id}.json")] + (["--force"] if force else [])
    proc = ape_run("deploy", args, rpc_url=rpc_url)
    if proc.returncode != 0:
        raise DeployFailed(proc.returncode, "\n".join(proc.stdout.splitlines()[-15:]))
    return proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
