"""A local anvil (foundry 1.7.1, from the repo's npm toolchain) on auto-mine.

Layout of `state_dir`: `anvil.log`, `anvil.pid`, `states/` (anvil's on-disk
cache of old block states, at most `PERSISTED_STATES` of them), and
`anvil-state.json` when
`persist=True` (anvil's `--state`: loaded at start, written on SIGTERM, so a
devnet keeps its contracts across down/up; while it runs, the devnet's block
ticker saves it every second, atomically, for the case of a SIGKILL). Tests
run without it: a fresh chain per session.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from verity.devnet.process import ManagedProcess
from verity.devnet.ticker import BlockTicker, rpc_call
from verity.devnet.tools import anvil_bin, tool_env

DEV_MNEMONIC = "test test test test test test test test test test test junk"
CHAIN_ID = 31337
# Old block states anvil may keep on disk once its in-memory window is full.
# Unbounded (anvil's default) it wrote a full state per block into
# ~/.foundry/anvil/tmp and never removed it when stopped: ~5 GB per test run,
# until the disk filled. Our clients read only recent blocks, which stay in memory.
PERSISTED_STATES = 64


def state_spill_args(directory: str | Path, states: int = PERSISTED_STATES) -> list[str]:
    """anvil arguments that keep its spilled block states in `directory`, at most `states` of them (also used for
    the anvil ape's foundry provider starts: tests/conftest.py, scripts/gas_report.py)."""
    return ["--cache-path", str(directory), "--max-persisted-states", str(states)]


def bound_ape_anvil_states() -> Path:
    """Make ape's foundry provider start anvil with bounded, private state spill (its command has no such option);
    returns the directory, removed at interpreter exit."""
    import atexit
    import shutil
    import tempfile

    from ape_foundry.provider import FoundryProvider

    directory = Path(tempfile.mkdtemp(prefix="verity-ape-anvil-"))
    atexit.register(shutil.rmtree, directory, True)
    build = FoundryProvider.build_command
    FoundryProvider.build_command = lambda self: [*build(self), *state_spill_args(directory)]
    return directory


class Anvil(ManagedProcess):
    """anvil on 127.0.0.1:`port` (a free one if not given), auto-mine, fixed mnemonic.

    block_interval: if set, a `BlockTicker` thread mines an empty block that
    often while this object runs the chain; `stop()` stops both.
    """

    _kind = "anvil"
    _endpoint = "RPC"
    _log_file = "anvil.log"
    _pid_file = "anvil.pid"
    _port_attrs = ("port",)

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
        persisted_states: int = PERSISTED_STATES,
    ) -> None:
        super().__init__(state_dir, start_timeout=start_timeout, stop_timeout=stop_timeout,
                         die_with_parent=die_with_parent)
        self._pick_ports({"port": port})
        self.accounts, self.mnemonic, self.chain_id = accounts, mnemonic, chain_id
        self.balance_eth, self.persist, self.block_interval = balance_eth, persist, block_interval
        self.persisted_states = persisted_states
        self.ticker: BlockTicker | None = None

    @property
    def state_dir(self) -> Path:
        return self.directory

    @property
    def states_dir(self) -> Path:
        """Where anvil spills old block states (bounded; removed with the devnet's directory)."""
        return self.state_dir / "states"

    @property
    def rpc_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def state_path(self) -> Path:
        return self.state_dir / "anvil-state.json"

    def __repr__(self) -> str:
        return f"Anvil({self.rpc_url!r}, pid={self.pid})"

    def command(self) -> list[str]:
        cmd = [
            anvil_bin(), "--host", "127.0.0.1", "--port", str(self.port),
            "--chain-id", str(self.chain_id), "--accounts", str(self.accounts),
            "--mnemonic", self.mnemonic, "--balance", str(self.balance_eth),
            *state_spill_args(self.states_dir, self.persisted_states),
        ]  # no --block-time: auto-mine (see module docs of verity.devnet.ticker)
        if self.persist:
            cmd += ["--state", str(self.state_path)]  # no --state-interval: it rewrites the file in place
        return cmd

    def _env(self) -> dict[str, str]:
        return tool_env()

    def _answers(self) -> bool:
        try:
            return int(rpc_call(self.rpc_url, "eth_chainId", timeout=2), 16) == self.chain_id
        except (OSError, ValueError, RuntimeError):
            return False

    def start(self) -> Anvil:
        super().start()
        if self.block_interval and (self.ticker is None or not self.ticker.running):
            self.ticker = BlockTicker(self.rpc_url, self.block_interval).start()
        return self

    def rpc(self, method: str, params: list[Any] | None = None) -> Any:
        return rpc_call(self.rpc_url, method, params)

    def block_number(self) -> int:
        return int(self.rpc("eth_blockNumber"), 16)

    def stop(self) -> None:
        if self.ticker is not None:
            self.ticker.stop()
            self.ticker = None
        super().stop()  # SIGTERM lets anvil write --state

    def info(self) -> dict[str, Any]:
        return {
            "dir": str(self.state_dir),
            "rpc_url": self.rpc_url,
            "port": self.port,
            "chain_id": self.chain_id,
            "accounts": self.accounts,
            "mnemonic": self.mnemonic,
            "persist": self.persist,
            **self._process_info(),
        }

    @classmethod
    def from_info(cls, info: dict[str, Any], **kwargs: Any) -> Anvil:
        return cls(info["dir"], info["port"], accounts=info["accounts"], mnemonic=info["mnemonic"],
                   chain_id=info["chain_id"], persist=info.get("persist", False), **kwargs)._adopt(info)
