"""tests/explorer: the explorer's unit tests (fixed data) and its browser tests against a live devnet job.

The browser tests reuse tests/nodes' devnet and node builders (`net`): this folder's path is put beside
tests/nodes on sys.path, the way pytest's rootdir-relative import puts tests/nodes there for its own tests, and
that conftest's fixtures are imported here under another module name."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
NODES = HERE.parent / "nodes"
for path in (HERE, NODES):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

_spec = importlib.util.spec_from_file_location("nodes_conftest", NODES / "conftest.py")
_nodes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_nodes)
devnet, deployed, node_launcher, net = _nodes.devnet, _nodes.deployed, _nodes.node_launcher, _nodes.net
