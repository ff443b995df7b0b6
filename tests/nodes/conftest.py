"""Fixtures for node tests: a real devnet (anvil + ticker + js-ipfs via `verity.devnet.services`), one
`ape run deploy` per session that every test starts from (an anvil snapshot), and real `verity node run` processes."""
from __future__ import annotations

import os
import shutil

import pytest

from node_builders import CLOCK_ALLOWANCE, Net
from node_zygote import NodeLauncher
from verity.chain.governance import apply_parameters
from verity.devnet import services
from verity.devnet.deploy import deploy
from verity.devnet.ticker import rpc_call
from verity.settings import Settings


# Nodes train on one intra-op thread each, as `verity demo` and `verity lab` start them: three nodes and a test
# session share two cores, and on one thread the doctor times its steps by the thread's CPU clock, which that load
# does not inflate (engine/reference.cpu_clock_is_step_time).
NODE_ENV = {"OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="session")
def devnet(tmp_path_factory):
    directory = tmp_path_factory.mktemp("devnet")
    # ports the OS picks (0 = no preference): both xdist workers start a devnet at the same moment when the scenario
    # tier begins, and both saw 8545 free and raced for it ("Address already in use")
    record = services.up(directory, ipfs_nodes=1, block_interval=0.5,  # draws wait 3 blocks (P4)
                         settings=Settings(anvil_port=0, ipfs_api_port=0))
    yield record
    services.down(directory)


@pytest.fixture(scope="session")
def deployed(devnet, tmp_path_factory):
    """One `ape run deploy` per test session (per xdist worker), with the tests' short windows applied through the
    Timelock, kept as an anvil snapshot: each test reverts the chain to it (`net`), so every test starts from the
    same fresh deployment without paying for the deploy and the governance calls again (about 10 s a test under
    CI's load). tests/nodes/test_deployment_sealed.py still runs the deploy itself, and checks what it leaves."""
    root = tmp_path_factory.mktemp("deployed")
    deploy(devnet["rpc_url"], root / "deployments", force=True)
    owner = Net(devnet["rpc_url"], devnet["ipfs_api"], root, dict(os.environ)).client(0)
    # The Timelock's admin: one devnet clock jump past the delay applies all four.
    apply_parameters(owner, [
        (owner.game, owner.game.functions.setClockAllowance(CLOCK_ALLOWANCE)),
        # commit, reveal: a panel moves on as soon as every seat voted, so only a no-show waits these out; a referee
        # recomputing a portable-f32 step under CI's load took 13 s of a 15 s window here and was unseated
        (owner.panel, owner.panel.functions.setWindows(45, 45)),
        # execution, reveal (= grace), challenge: a verifier re-executing a portable-f32 task under CI's load took 14 s
        # of a 10 s window here; the window costs nothing when nobody checks (wait_job skips it: node_clock.py)
        (owner.jobs, owner.jobs.functions.setDefaultWindows(120, 30, 60)),
        (owner.jobs, owner.jobs.functions.setAssignmentTimeout(5)),
    ])
    state = {"dir": root / "deployments", "snapshot": rpc_call(devnet["rpc_url"], "evm_snapshot")}
    yield state


@pytest.fixture(scope="session")
def node_launcher():
    """Node processes forked from one zygote per worker (tests/nodes/node_zygote.py): a node start costs a fork, not
    the 5 s of CPU its imports take."""
    launcher = NodeLauncher(dict(os.environ, **NODE_ENV), enabled=os.environ.get("VERITY_TEST_ZYGOTE", "1") != "0")
    yield launcher
    launcher.close()


@pytest.fixture
def net(devnet, deployed, node_launcher, tmp_path, request):
    """A fresh deployment (owner: test account 0) with short devnet windows for tests: the chain is reverted to the
    session's deployment snapshot (anvil consumes a snapshot on revert, so a new one is taken at once)."""
    if not rpc_call(devnet["rpc_url"], "evm_revert", [deployed["snapshot"]]):
        raise RuntimeError(f"anvil could not revert to the deployment snapshot {deployed['snapshot']}")
    deployed["snapshot"] = rpc_call(devnet["rpc_url"], "evm_snapshot")
    root = tmp_path
    shutil.copytree(deployed["dir"], root / "deployments")
    env = dict(os.environ, **NODE_ENV, VERITY_RPC_URL=devnet["rpc_url"], VERITY_IPFS_API=devnet["ipfs_api"],
               VERITY_DEPLOYMENTS_DIR=str(root / "deployments"), VERITY_STATE_DIR=str(root / "state"),
               VERITY_DEVNET_DIR=str(root / "no-devnet"), VERITY_IPFS_TIMEOUT="4", VERITY_IPFS_RETRIES="1")
    n = Net(devnet["rpc_url"], devnet["ipfs_api"], root, env, launcher=node_launcher)
    forked, fresh = node_launcher.forked, node_launcher.fresh
    yield n
    n.stop()
    request.node.user_properties += [("chain_seconds_skipped", n.skipped),
                                     ("nodes_forked", node_launcher.forked - forked),
                                     ("nodes_fresh", node_launcher.fresh - fresh)]

