"""A service whose picked port is taken while it starts is started again on other ports."""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path

import pytest

from verity.devnet.process import ManagedProcess, PortTaken

# Like js-ipfs: on its first start it reports EADDRINUSE and hangs; later starts listen. Either way it runs until the
# test stops it (the sleeps only bound a leaked one; it also dies with the test process).
FAKE = """
import pathlib, socket, sys, time
marker = pathlib.Path(sys.argv[2])
if not marker.exists():
    marker.write_text("taken")
    print("listen EADDRINUSE: address already in use 127.0.0.1:" + sys.argv[1], flush=True)
    time.sleep(120)
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); print("ready", flush=True)
time.sleep(120)
"""


class FakeDaemon(ManagedProcess):
    _kind, _endpoint, _log_file, _pid_file = "fake daemon", "port", "fake.log", "fake.pid"
    _port_attrs = ("port",)

    def __init__(self, directory: Path, port: int | None = None) -> None:
        super().__init__(directory, start_timeout=30, stop_timeout=5, die_with_parent=True)
        self._pick_ports({"port": port})
        self.starts: list[int] = []

    def command(self) -> list[str]:
        self.starts.append(self.port)
        return [sys.executable, "-c", FAKE, str(self.port), str(self.directory / "first-start")]

    def _answers(self) -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", self.port)) == 0


def test_start_pickedPortTakenWhileStarting_startsAgainOnAnotherPort_succeeds(tmp_path):
    daemon = FakeDaemon(tmp_path / "d")
    began = time.monotonic()
    try:
        daemon.start()
        assert len(daemon.starts) == 2 and daemon.starts[0] != daemon.starts[1]
        assert daemon.port == daemon.starts[1] and daemon._answers()
        assert time.monotonic() - began < daemon.start_timeout  # seen in the log, not waited out
    finally:
        daemon.stop()


def test_start_givenPortTakenWhileStarting_reportsTheTakenPort_fails(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    daemon = FakeDaemon(tmp_path / "d", port=port)
    with pytest.raises(PortTaken, match="was taken while it started"):
        daemon.start()  # the caller's port: no second start on another one
    assert daemon.starts == [port] and not daemon.running()


def test_start_givenPortListenedOn_failsBeforeSpawning_fails(tmp_path):
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        daemon = FakeDaemon(tmp_path / "d", port=other.getsockname()[1])
        with pytest.raises(PortTaken, match="already in use"):
            daemon.start()
    assert daemon.starts == []
