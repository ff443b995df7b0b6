"""A local js-ipfs node (npm `ipfs` 0.66.1) serving the Kubo-compatible /api/v0 RPC.

Layout of `node_dir`: `repo/` (IPFS_PATH), `node.json` (the init config),
`ipfs.log` (daemon output), `daemon.pid` (pid and kernel start time).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from verity.devnet.process import ProcessId, ServiceError, free_port, port_is_free, spawn
from verity.devnet.tools import jsipfs_bin, tool_env

LOOPBACK = "127.0.0.1"


class IpfsNode:
    """One js-ipfs daemon on loopback ports (free ones picked for any port not given)."""

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
        self.node_dir = Path(node_dir).resolve()
        self.api_port = api_port or free_port()
        self.swarm_port = swarm_port or free_port()
        self.gateway_port = gateway_port or free_port()
        self.rpc_port = rpc_port or free_port()
        self.start_timeout, self.stop_timeout = start_timeout, stop_timeout
        self.die_with_parent = die_with_parent
        self._proc: subprocess.Popen[bytes] | None = None
        self._pid: ProcessId | None = None

    # ---------------------------------------------------------------- paths
    @property
    def repo_path(self) -> Path:
        return self.node_dir / "repo"

    @property
    def log_path(self) -> Path:
        return self.node_dir / "ipfs.log"

    @property
    def _pid_path(self) -> Path:
        return self.node_dir / "daemon.pid"

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

    @property
    def pid(self) -> int | None:
        return self._pid.pid if self._pid else None

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
    def _recorded(self) -> ProcessId | None:
        try:
            pid, started = map(int, self._pid_path.read_text().split())
        except (OSError, ValueError):
            return None
        return ProcessId(pid, started)

    def _clean_stale(self) -> None:
        """Remove what a killed daemon leaves behind; js-ipfs won't start while they exist."""
        for name in ("repo.lock", "api"):
            path = self.repo_path / name
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        self._pid_path.unlink(missing_ok=True)

    def running(self) -> bool:
        return self._pid is not None and self._pid.alive()

    def start(self) -> IpfsNode:
        if self.running():
            return self
        previous = self._recorded()
        if previous is not None and previous.alive():
            raise ServiceError(f"IPFS node {self.node_dir}", f"already running as pid {previous.pid}")
        self.node_dir.mkdir(parents=True, exist_ok=True)
        busy = [p for p in (self.api_port, self.swarm_port, self.gateway_port, self.rpc_port) if not port_is_free(p)]
        if busy:
            raise ServiceError(f"IPFS node {self.node_dir}", f"port(s) {busy} already in use")
        self._clean_stale()
        cmd = [jsipfs_bin(), "daemon", "--enable-preload=false", "--offline"]
        if (self.repo_path / "config").is_file():
            self._rewrite_config()
        else:
            config_path = self.node_dir / "node.json"
            config_path.write_text(json.dumps(self._init_config(), indent=2))
            cmd += ["--init-profile", "test", "--init-config", str(config_path)]
        env = tool_env() | {"IPFS_PATH": str(self.repo_path), "DEBUG": ""}
        self._proc = spawn(cmd, self.log_path, env=env, die_with_parent=self.die_with_parent)
        self._pid = ProcessId.of(self._proc.pid) if self._proc.poll() is None else None
        if self._pid is not None:
            self._pid_path.write_text(f"{self._pid.pid} {self._pid.started}\n")
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        url = f"{self.api_url}/api/v0/id"
        while True:
            if self._proc is not None and self._proc.poll() is not None:
                raise ServiceError(f"IPFS node {self.node_dir}", f"daemon exited with code {self._proc.returncode}",
                                   self.log_path)
            try:
                with urllib.request.urlopen(urllib.request.Request(url, method="POST"), timeout=2) as res:
                    if res.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise ServiceError(f"IPFS node {self.node_dir}", f"API did not answer within {self.start_timeout:g} s",
                                   self.log_path)
            time.sleep(0.1)

    def stop(self) -> None:
        """SIGTERM, SIGKILL after `stop_timeout`; then clear a lock a kill left behind."""
        target = self._pid or self._recorded()
        if target is not None:
            target.stop(self.stop_timeout, self._proc)
        self._proc, self._pid = None, None
        self._clean_stale()

    def kill(self) -> None:
        """SIGKILL without cleanup, as a crash would (tests use it)."""
        if self._pid is not None:
            import os
            import signal

            os.killpg(self._pid.pid, signal.SIGKILL)
            if self._proc is not None:
                self._proc.wait(timeout=10)
            self._proc, self._pid = None, None

    def detach(self) -> None:
        """Forget the child handle (the daemon keeps running; `stop()` still finds it by pid file)."""
        if self._proc is not None:
            self._proc.returncode = 0  # suppress "still running" warnings; we no longer reap it
        self._proc = None

    def __enter__(self) -> IpfsNode:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def storage(self, **kwargs: Any):  # -> verity.storage.Storage
        from verity.storage import Storage

        return Storage(self.api_multiaddr, **kwargs)

    def info(self) -> dict[str, Any]:
        """What services.json records about this node."""
        return {
            "dir": str(self.node_dir),
            "api": self.api_multiaddr,
            "api_port": self.api_port,
            "swarm_port": self.swarm_port,
            "gateway_port": self.gateway_port,
            "rpc_port": self.rpc_port,
            "peer_id": self.peer_id if (self.repo_path / "config").is_file() else None,
            "swarm": self.swarm_multiaddr if (self.repo_path / "config").is_file() else None,
            "pid": self.pid,
            "started": self._pid.started if self._pid else None,
            "log": str(self.log_path),
        }

    @classmethod
    def from_info(cls, info: dict[str, Any], **kwargs: Any) -> IpfsNode:
        node = cls(info["dir"], info["api_port"], info["swarm_port"], info["gateway_port"], info["rpc_port"], **kwargs)
        if info.get("pid") and info.get("started"):
            pid = ProcessId(int(info["pid"]), int(info["started"]))
            node._pid = pid if pid.alive() else None
        return node
