"""Fixtures for CLI tests: the node tests' real devnet and fresh deployment (`devnet`, `net`,
reused from tests/nodes/conftest.py), and `verity` run as a user would (typer's CliRunner with the
deployment's environment)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

NODES = Path(__file__).resolve().parents[1] / "nodes"
sys.path.insert(0, str(NODES))  # node_builders, as tests/nodes/conftest.py imports it
_spec = importlib.util.spec_from_file_location("nodes_conftest", NODES / "conftest.py")
_nodes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_nodes)
devnet, deployed, net, node_launcher = _nodes.devnet, _nodes.deployed, _nodes.net, _nodes.node_launcher


@pytest.fixture
def verity(net):
    """Builder: `verity("job", "show", "1")` runs the CLI in-process against `net`'s deployment and
    returns click's Result (stdout, stderr, exit_code)."""
    from verity.cli import app

    runner = CliRunner()
    env = dict(net.env, COLUMNS="400", NO_COLOR="1")

    def run(*args: str):
        return runner.invoke(app, list(args), env=env)

    return run
