"""Fixtures for on-chain integration tests: builders over one deployment per module.

ape's pytest plugin starts its own anvil (tests/conftest.py sets APE_FOUNDRY_HOST=auto)
and snapshots/reverts the chain around every test, so the module-scoped deployment and
nodes are shared while each test starts from the same state.
"""
from __future__ import annotations

import pytest

from chain_builders import Nodes, Poster, System


@pytest.fixture(scope="module")
def owner(accounts):
    return accounts[0]


@pytest.fixture(scope="module")
def submitter(accounts):
    return accounts[1]


@pytest.fixture(scope="module")
def extra_accounts(accounts):
    """Builder: `extra_accounts(n)` generates n more funded (ETH) test accounts."""
    made = []

    def make(n: int) -> list:
        out = []
        for _ in range(n):
            a = accounts.generate_test_account()
            a.balance = 100 * 10**18
            out.append(a)
        made.extend(out)
        return out

    return make


@pytest.fixture(scope="module")
def system(project, owner) -> System:
    """The contracts, deployed and wired (scripts/deploy.py's wiring, no Timelock), every node kept live."""
    return System.deploy(project, owner)


@pytest.fixture(scope="module")
def nodes(system) -> Nodes:
    """Builder: `nodes.add(accts, roles=..., stake=...)` funds, registers and stakes accounts."""
    return Nodes(system)


@pytest.fixture(scope="module")
def poster(system, submitter, nodes) -> Poster:
    """Builder: posts jobs as `submitter` and drives the drawn nodes' commit/reveal/submit."""
    return Poster(system, submitter, _AddressBook(nodes))


class _AddressBook(dict):
    """address -> account over every node the `nodes` builder registered (looked up lazily)."""

    def __init__(self, nodes: Nodes):
        super().__init__()
        self._nodes = nodes

    def __missing__(self, address):
        for a in self._nodes.all:
            if a.address.lower() == str(address).lower():
                return a
        raise KeyError(address)


@pytest.fixture
def conserved(system, accounts, nodes):
    """`conserved(*extra)` asserts token conservation over all test accounts, nodes and contracts."""

    def check(*extra):
        acc = system.conservation([*accounts, *nodes.all, *extra])
        assert acc["sum_balances"] == acc["supply"], acc
        assert acc["minted"] - acc["supply"] == acc["burned"], acc
        return acc

    return check
