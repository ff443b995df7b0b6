"""A local anvil (foundry 1.7.1, from the repo's npm toolchain) on auto-mine.

Layout of `state_dir`: `anvil.log`, `anvil.pid`, and `anvil-state.json` when
`persist=True` (anvil's `--state`: loaded at start, written at shutdown, so a
devnet keeps its deployed contracts across down/up). Tests run without it: a
fresh chain per session.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

from verity.devnet.process import ProcessId, ServiceError, free_port, port_is_free, spawn
from verity.devnet.ticker import BlockTicker, rpc_call
from verity.devnet.tools import anvil_bin, tool_env

DEV_MNEMONIC = "test test test test test test test test test test test junk"
CHAIN_ID = 31337


class Anvil:
    """anvil on 127.0.0.1:`port` (a free one if not given), auto-mine, fixed mnemonic.

    block_interval: if set, a `BlockTicker` thread mines an empty block that
    often while this object runs the chain; `stop()` stops both.
    """

    def __init__(
        self,
        state_dir: str | Path,
        port: int | None = None,
        *,
        accounts: int = 20,
        mnemonic: str = DEV_MNEMONIC,
        chain_id: int = CHAIN_ID,
        balance_eth: int = 10_000,
        persist: bool = False,
        block_interval: float | None = None,
        start_timeout: float = 30.0,
        stop_timeout: float = 10.0,
        die_with_parent: bool = True,
    ) -> None:
        self.state_dir = Path(state_dir).resolve()
        self.port = port or free_port()
        self.accounts, self.mnemonic, self.chain_id = accounts, mnemonic, chain_id
        self.balance_eth, self.persist, self.block_interval = balance_eth, persist, block_interval
        self.start_timeout, self.stop_timeout, self.die_with_parent = start_timeout, stop_timeout, die_with_parent
        self.ticker: BlockTicker | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._pid: ProcessId | None = None

    @property
    def rpc_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.state_dir / "anvil.log"

    @property
    def state_path(self) -> Path:
        return self.state_dir / "anvil-state.json"

    @property
    def _pid_path(self) -> Path:
        return self.state_dir / "anvil.pid"

    @property
    def pid(self) -> int | None:
        return self._pid.pid if self._pid else None

    def __repr__(self) -> str:
        return f"Anvil({self.rpc_url!r}, pid={self.pid})"

    def command(self) -> list[str]:
        cmd = [
            anvil_bin(), "--host", "127.0.0.1", "--port", str(self.port),
            "--chain-id", str(self.chain_id), "--accounts", str(self.accounts),
            "--mnemonic", self.mnemonic, "--balance", str(self.balance_eth),
        ]  # no --block-time: auto-mine (see module docs of verity.devnet.ticker)
        if self.persist:
            cmd += ["--state", str(self.state_path)]
        return cmd

    def running(self) -> bool:
        return self._pid is not None and self._pid.alive()

    def _recorded(self) -> ProcessId | None:
        try:
            pid, started = map(int, self._pid_path.read_text().split())
        except (OSError, ValueError):
            return None
        return ProcessId(pid, started)

    def start(self) -> Anvil:
        if not self.running():
            previous = self._recorded()
            if previous is not None and previous.alive():
                raise ServiceError(f"anvil {self.state_dir}", f"already running as pid {previous.pid}")
            if not port_is_free(self.port):
                raise ServiceError(f"anvil {self.state_dir}", f"port {self.port} already in use")
            self.state_dir.mkdir(parents=True, exist_ok=True)
            self._proc = spawn(self.command(), self.log_path, env=tool_env(), die_with_parent=self.die_with_parent)
            self._pid = ProcessId.of(self._proc.pid) if self._proc.poll() is None else None
            if self._pid is not None:
                self._pid_path.write_text(f"{self._pid.pid} {self._pid.started}\n")
            try:
                self._wait_ready()
            except BaseException:
                self.stop()
                raise
        if self.block_interval and (self.ticker is None or not self.ticker.running):
            self.ticker = BlockTicker(self.rpc_url, self.block_interval).start()
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        while True:
            if self._proc is not None and self._proc.poll() is not None:
                raise ServiceError(f"anvil {self.state_dir}", f"exited with code {self._proc.returncode}",
                                   self.log_path)
            try:
                if int(rpc_call(self.rpc_url, "eth_chainId", timeout=2), 16) == self.chain_id:
                    return
            except (OSError, ValueError, RuntimeError):
                pass
            if time.monotonic() > deadline:
                raise ServiceError(f"anvil {self.state_dir}", f"RPC did not answer within {self.start_timeout:g} s",
                                   self.log_path)
            time.sleep(0.1)

    def rpc(self, method: str, params: list[Any] | None = None) -> Any:
        return rpc_call(self.rpc_url, method, params)

    def block_number(self) -> int:
        return int(self.rpc("eth_blockNumber"), 16)

    def stop(self) -> None:
        if self.ticker is not None:
            self.ticker.stop()
            self.ticker = None
        target = self._pid or self._recorded()
        if target is not None:
            target.stop(self.stop_timeout, self._proc)  # SIGTERM lets anvil write --state
        self._proc, self._pid = None, None
        self._pid_path.unlink(missing_ok=True)

    def detach(self) -> None:
        if self._proc is not None:
            self._proc.returncode = 0
        self._proc = None

    def __enter__(self) -> Anvil:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def info(self) -> dict[str, Any]:
        return {
            "dir": str(self.state_dir),
            "rpc_url": self.rpc_url,
            "port": self.port,
            "chain_id": self.chain_id,
            "accounts": self.accounts,
            "mnemonic": self.mnemonic,
            "persist": self.persist,
            "pid": self.pid,
            "started": self._pid.started if self._pid else None,
            "log": str(self.log_path),
        }

    @classmethod
    def from_info(cls, info: dict[str, Any], **kwargs: Any) -> Anvil:
        node = cls(info["dir"], info["port"], accounts=info["accounts"], mnemonic=info["mnemonic"],
                   chain_id=info["chain_id"], persist=info.get("persist", False), **kwargs)
        if info.get("pid") and info.get("started"):
            pid = ProcessId(int(info["pid"]), int(info["started"]))
            node._pid = pid if pid.alive() else None
        return node
