"""A local js-ipfs node (npm `ipfs` 0.66.1) serving the Kubo-compatible /api/v0 RPC.

Layout of `node_dir`: `repo/` (IPFS_PATH), `node.json` (the init config),
`ipfs.log` (daemon output), `daemon.pid` (pid and kernel start time).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from verity.devnet.process import ManagedProcess
from verity.devnet.tools import jsipfs_bin, tool_env

LOOPBACK = "127.0.0.1"


class IpfsNode(ManagedProcess):
    """One js-ipfs daemon on loopback ports (free ones picked for any port not given)."""

    _kind = "IPFS node"
    _endpoint = "API"
    _log_file = "ipfs.log"
    _pid_file = "daemon.pid"
    _ready_marker = b"Daemon is ready"
    _port_attrs = ("api_port", "swarm_port", "gateway_port", "rpc_port")

    def __init__(
        self,
        node_dir: str | Path,
        api_port: int | None = None,
        swarm_port: int | None = None,
        gateway_port: int | None = None,
        rpc_port: int | None = None,
        *,
        start_timeout: float = 60.0,
        stop_timeout: float = 10.0,
        die_with_parent: bool = True,
    ) -> None:
        super().__init__(node_dir, start_timeout=start_timeout, stop_timeout=stop_timeout,
                         die_with_parent=die_with_parent)
        self._pick_ports({"api_port": api_port, "swarm_port": swarm_port, "gateway_port": gateway_port,
                          "rpc_port": rpc_port})

    # ---------------------------------------------------------------- paths
    @property
    def node_dir(self) -> Path:
        return self.directory

    @property
    def repo_path(self) -> Path:
        return self.node_dir / "repo"

    @property
    def api_multiaddr(self) -> str:
        return f"/ip4/{LOOPBACK}/tcp/{self.api_port}/http"

    @property
    def api_url(self) -> str:
        return f"http://{LOOPBACK}:{self.api_port}"

    @property
    def peer_id(self) -> str:
        return str(self._read_config()["Identity"]["PeerID"])

    @property
    def swarm_multiaddr(self) -> str:
        return f"/ip4/{LOOPBACK}/tcp/{self.swarm_port}/p2p/{self.peer_id}"

    def __repr__(self) -> str:
        return f"IpfsNode({str(self.node_dir)!r}, api={self.api_port}, swarm={self.swarm_port}, pid={self.pid})"

    # --------------------------------------------------------------- config
    def _addresses(self) -> dict[str, Any]:
        return {
            "API": f"/ip4/{LOOPBACK}/tcp/{self.api_port}",
            "Gateway": f"/ip4/{LOOPBACK}/tcp/{self.gateway_port}",
            "RPC": f"/ip4/{LOOPBACK}/tcp/{self.rpc_port}",
            "Swarm": [f"/ip4/{LOOPBACK}/tcp/{self.swarm_port}"],
            "Announce": [],
            "NoAnnounce": [],
            "Delegates": [],
        }

    def _init_config(self) -> dict[str, Any]:
        return {
            "Addresses": self._addresses(),
            "Bootstrap": [],
            "Discovery": {"MDNS": {"Enabled": False}, "webRTCStar": {"Enabled": False}},
        }

    def _read_config(self) -> dict[str, Any]:
        return json.loads((self.repo_path / "config").read_text())

    def _rewrite_config(self) -> None:
        """An existing repo keeps its identity and blocks, but gets this node's ports."""
        config = self._read_config()
        config.update(self._init_config(), Addresses={**config.get("Addresses", {}), **self._addresses()})
        (self.repo_path / "config").write_text(json.dumps(config, indent=2))

    # ------------------------------------------------------------ lifecycle
    def _prepare(self) -> None:
        self._cleanup()
        if (self.repo_path / "config").is_file():
            self._rewrite_config()
        else:
            (self.node_dir / "node.json").write_text(json.dumps(self._init_config(), indent=2))

    def command(self) -> list[str]:
        cmd = [jsipfs_bin(), "daemon", "--enable-preload=false", "--offline"]
        if not (self.repo_path / "config").is_file():
            cmd += ["--init-profile", "test", "--init-config", str(self.node_dir / "node.json")]
        return cmd

    def _env(self) -> dict[str, str]:
        return tool_env() | {"IPFS_PATH": str(self.repo_path), "DEBUG": ""}

    def _answers(self) -> bool:
        request = urllib.request.Request(f"{self.api_url}/api/v0/id", method="POST")
        try:
            with urllib.request.urlopen(request, timeout=2) as res:
                return res.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def _cleanup(self) -> None:
        """Remove what a killed daemon leaves behind; js-ipfs won't start while they exist."""
        for name in ("repo.lock", "api"):
            path = self.repo_path / name
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        super()._cleanup()

    def kill(self) -> None:
        """SIGKILL without cleanup, as a crash would (tests use it)."""
        if self._pid is not None:
            os.killpg(self._pid.pid, signal.SIGKILL)
            if self._proc is not None:
                self._proc.wait(timeout=10)
            self._proc, self._pid = None, None

    def storage(self, **kwargs: Any):  # -> verity.storage.Storage
        from verity.storage import Storage

        return Storage(self.api_multiaddr, **kwargs)

    def info(self) -> dict[str, Any]:
        """What services.json records about this node."""
        initialised = (self.repo_path / "config").is_file()
        return {
            "dir": str(self.node_dir),
            "api": self.api_multiaddr,
            "api_port": self.api_port,
            "swarm_port": self.swarm_port,
            "gateway_port": self.gateway_port,
            "rpc_port": self.rpc_port,
            "peer_id": self.peer_id if initialised else None,
            "swarm": self.swarm_multiaddr if initialised else None,
            **self._process_info(),
        }

    @classmethod
    def from_info(cls, info: dict[str, Any], **kwargs: Any) -> IpfsNode:
        return cls(info["dir"], info["api_port"], info["swarm_port"], info["gateway_port"], info["rpc_port"],
                   **kwargs)._adopt(info)
