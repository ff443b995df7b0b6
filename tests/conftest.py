"""Root fixtures: real services for integration tests, started lazily, always stopped.

A test that asks for `ipfs_node`, `ipfs_pair`, `storage` or `anvil` gets real
processes (js-ipfs and anvil from anvil/node_modules), started once per
session in a temporary directory and stopped at session end, also after a
failure or Ctrl-C (fixture teardown, an atexit hook, and a parent-death
signal on every child). Mark such tests `@pytest.mark.integration`.
"""

from __future__ import annotations

import atexit
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# pytest-xdist workers inherit COLUMNS=80 / LINES=24 from the controller; a rich Console created at import would
# then keep width 80 even where a test runs the CLI with COLUMNS=400. Tests set the width they need themselves.
for _var in ("COLUMNS", "LINES"):
    os.environ.pop(_var, None)

from verity.devnet import Anvil, BlockTicker, IpfsNode
from verity.devnet.anvil import bound_ape_anvil_states
from verity.storage import Storage

REPO_ROOT = Path(__file__).resolve().parents[1]
NODE_BIN = REPO_ROOT / "anvil" / "node_modules" / ".bin"

# At import, before collection: ape's pytest plugin connects its provider (and starts
# anvil from PATH, per ape-config.yaml) as soon as collection finishes.
os.environ["PATH"] = f"{NODE_BIN}{os.pathsep}{os.environ.get('PATH', '')}"
# ape's own anvil takes a free port ("auto"), never a devnet's 8545 that may be running beside the tests;
# its compiler is the solc-js front.
os.environ.setdefault("APE_FOUNDRY_HOST", "auto")
os.environ.setdefault("SOLCX_BINARY_PATH", str(REPO_ROOT / "anvil" / "solc-bin"))
# ...and it spills old block states into a private, bounded directory, not ~/.foundry/anvil/tmp (never cleaned).
bound_ape_anvil_states()

_running: list[IpfsNode | Anvil | BlockTicker] = []


def _stop_all() -> None:
    while _running:
        service = _running.pop()
        try:
            service.stop()
        except Exception:  # noqa: BLE001 — best effort at interpreter exit
            pass


atexit.register(_stop_all)


def _started(service):
    _running.append(service)
    return service


def _stop(service) -> None:
    if service in _running:
        _running.remove(service)
    service.stop()


@pytest.fixture(scope="session")
def services_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("services")


@pytest.fixture(scope="session")
def ipfs_node(services_dir: Path) -> Iterator[IpfsNode]:
    """One js-ipfs node on free loopback ports."""
    node = _started(IpfsNode(services_dir / "ipfs-0"))
    node.start()
    yield node
    _stop(node)


@pytest.fixture(scope="session")
def ipfs_pair(ipfs_node: IpfsNode, services_dir: Path) -> Iterator[tuple[IpfsNode, IpfsNode]]:
    """Two js-ipfs nodes, the second swarm-connected to the first (`ipfs_node` is the first)."""
    second = _started(IpfsNode(services_dir / "ipfs-1"))
    second.start()
    with second.storage(timeout=10) as client:
        client.connect_peer(ipfs_node.swarm_multiaddr)
    yield ipfs_node, second
    _stop(second)


@pytest.fixture
def storage(ipfs_node: IpfsNode) -> Iterator[Storage]:
    """A Storage client of `ipfs_node` with short test bounds."""
    with Storage(ipfs_node.api_multiaddr, timeout=10, retries=1, backoff=0.1) as client:
        yield client


@pytest.fixture(scope="session")
def anvil(services_dir: Path) -> Iterator[Anvil]:
    """A real anvil (auto-mine, chain id 31337, 20 dev accounts); `anvil.rpc_url` to connect."""
    chain = _started(Anvil(services_dir / "anvil"))
    chain.start()
    yield chain
    _stop(chain)


@pytest.fixture(scope="session")
def anvil_rpc_url(anvil: Anvil) -> str:
    return anvil.rpc_url


@pytest.fixture
def block_ticker(anvil: Anvil) -> Iterator[Callable[[float], BlockTicker]]:
    """Builder: `block_ticker(interval)` mines an empty block every `interval` s until the test ends."""
    made: list[BlockTicker] = []

    def make(interval: float = 1.0) -> BlockTicker:
        ticker = BlockTicker(anvil.rpc_url, interval).start()
        made.append(ticker)
        return ticker

    yield make
    for ticker in made:
        ticker.stop()


def pytest_configure(config: pytest.Config) -> None:
    # ipfshttpclient 0.7.0 passes urllib3's deprecated `strict`; harmless, and not ours to fix.
    config.addinivalue_line("filterwarnings", "ignore:The 'strict' parameter is no longer needed:FutureWarning")


# Fixtures that start real services (here, in tests/nodes/conftest.py and ape's own chain fixtures).
SERVICE_FIXTURES = frozenset({"anvil", "anvil_rpc_url", "block_ticker", "ipfs_node", "ipfs_pair", "storage",
                              "devnet", "deployed", "net", "accounts", "project", "chain", "networks"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tiers (scripts/test_all.sh runs them in this order, README "Other commands"): a test that uses a service
    fixture is `integration` even where its module forgot to say so, and one that runs node processes (`net`) is also
    `scenario`; everything else is a unit test. `full_sweep` items run only when asked for by name (`-m full_sweep`):
    their test modules keep a boundary-and-sample version of the same check in the default run."""
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        if used & SERVICE_FIXTURES and item.get_closest_marker("integration") is None:
            item.add_marker(pytest.mark.integration)
        if "net" in used:
            item.add_marker(pytest.mark.scenario)
    if "full_sweep" not in (config.getoption("markexpr", "") or ""):
        kept = [item for item in items if item.get_closest_marker("full_sweep") is None]
        if len(kept) != len(items):
            config.hook.pytest_deselected(items=[i for i in items if i.get_closest_marker("full_sweep")])
            items[:] = kept


def pytest_terminal_summary(terminalreporter):
    """One line for the CI log: how node scenarios started their nodes and how much waiting the clock skipped."""
    totals: dict[str, int] = {}
    for report in (r for reports in terminalreporter.stats.values() for r in reports):
        if getattr(report, "when", "") == "teardown":
            for key, value in report.user_properties:
                if key in ("chain_seconds_skipped", "nodes_forked", "nodes_fresh"):
                    totals[key] = totals.get(key, 0) + int(value)
    if totals:
        terminalreporter.write_line(
            f"node scenarios: {totals.get('nodes_forked', 0)} nodes forked from the zygote, "
            f"{totals.get('nodes_fresh', 0)} started fresh; {totals.get('chain_seconds_skipped', 0)} s of chain windows "
            "skipped once every node was only waiting (tests/nodes/node_clock.py)")
