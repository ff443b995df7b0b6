"""Fixtures for node tests: a real devnet (anvil + ticker + js-ipfs via `verity.devnet.services`),
a fresh deployment per test through `ape run deploy`, and real `verity node run` processes."""
from __future__ import annotations

import os

import pytest

from node_builders import Net
from verity.devnet import services
from verity.devnet.deploy import deploy


@pytest.fixture(scope="session")
def devnet(tmp_path_factory):
    directory = tmp_path_factory.mktemp("devnet")
    record = services.up(directory, ipfs_nodes=1, block_interval=0.5)  # draws wait 3 blocks (P4)
    yield record
    services.down(directory)


@pytest.fixture
def net(devnet, tmp_path):
    """A fresh deployment (owner: test account 0) with short devnet windows for tests."""
    root = tmp_path
    deploy(devnet["rpc_url"], root / "deployments", force=True)
    env = dict(os.environ, VERITY_RPC_URL=devnet["rpc_url"], VERITY_IPFS_API=devnet["ipfs_api"],
               VERITY_DEPLOYMENTS_DIR=str(root / "deployments"), VERITY_STATE_DIR=str(root / "state"),
               VERITY_DEVNET_DIR=str(root / "no-devnet"), VERITY_IPFS_TIMEOUT="4", VERITY_IPFS_RETRIES="1")
    n = Net(devnet["rpc_url"], devnet["ipfs_api"], root, env)
    owner = n.client(0)
    owner.transact(owner.game.functions.setClockAllowance(15))
    owner.transact(owner.panel.functions.setWindows(15, 15))                # commit, reveal
    owner.transact(owner.jobs.functions.setDefaultWindows(120, 10, 10))      # execution, reveal (= grace), challenge
    owner.transact(owner.jobs.functions.setAssignmentTimeout(5))
    yield n
    n.stop()


