"""A node's network declaration (issue 9 item 4): `verity node register/run --region --bandwidth-mbps` call
NodeRegistry.declareNetwork only when the chain holds something else; `verity node status` shows the declaration."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from verity.chain.protocol import REGION_EUROPE, REGION_OCEANIA, bandwidth_tier, region_code, region_name
from verity.node.app import NodeConfig, declare_network, network_declaration
from verity.node.status import NodeStatus


def _node(region=0, bandwidth=0):
    return SimpleNamespace(region=region, bandwidthMbps=bandwidth)


@pytest.mark.parametrize("region, bandwidth, chain, want", [
    (None, None, _node(REGION_EUROPE, 100), None),                      # nothing asked: nothing sent
    ("europe", 100, _node(REGION_EUROPE, 100), None),                   # already declared
    ("europe", None, _node(0, 100), (REGION_EUROPE, 100)),              # bandwidth kept
    (None, 1_000, _node(REGION_OCEANIA, 100), (REGION_OCEANIA, 1_000)),  # region kept
    ("none", None, _node(REGION_EUROPE, 100), (0, 100)),                # undeclare
])
def test_network_declaration_only_when_the_chain_differs_succeeds(region, bandwidth, chain, want):
    cfg = NodeConfig(name="n", region=region, bandwidth_mbps=bandwidth)
    assert network_declaration(cfg, chain) == want


def test_declare_network_sends_declare_network_succeeds():
    sent = []
    registry = SimpleNamespace(functions=SimpleNamespace(declareNetwork=lambda r, b: ("declareNetwork", r, b)))
    ctx = SimpleNamespace(me="0xabc", chain=SimpleNamespace(registry=registry, transact=sent.append))
    declare_network(ctx, NodeConfig(name="n", region="oceania", bandwidth_mbps=250), _node())
    declare_network(ctx, NodeConfig(name="n"), _node())  # no option: no transaction
    assert sent == [("declareNetwork", REGION_OCEANIA, 250)]


def test_region_names_and_tiers_succeeds():
    assert region_code("") == 0 and region_code("europe") == REGION_EUROPE and region_name(REGION_EUROPE) == "europe"
    assert region_name(0) == ""
    with pytest.raises(KeyError, match="'mars' is not a region"):
        region_code("mars")
    assert [bandwidth_tier(x) for x in (0, 9, 10, 99, 100, 999, 1_000, 10_000, 2**32 - 1)] == [0, 0, 1, 1, 2, 2, 3, 4, 4]


def test_status_shows_region_and_bandwidth_succeeds():
    node = SimpleNamespace(slot=1, roles=1, lastSeen=0, stake=0, locked=0, pendingUnstake=0, deviceClass=0,
                           memoryMb=4096, region=REGION_EUROPE, bandwidthMbps=250)
    rep = SimpleNamespace(tasksCompleted=0, tasksLate=0, disputesWon=0, disputesLost=0, totalSlashed=0)
    rows = dict(NodeStatus("0xabc", node, rep, 0, 0, 0).rows())
    assert rows["region / bandwidth"].startswith("europe / 250 Mbit/s")
    rows = dict(NodeStatus("0xabc", SimpleNamespace(**{**vars(node), "region": 0, "bandwidthMbps": 0}), rep, 0, 0,
                           0).rows())
    assert rows["region / bandwidth"].startswith("undeclared / 0 Mbit/s")


def test_node_cli_refuses_an_unknown_region_naming_the_option_fails():
    from verity.cli.node import BadNodeOption, _check_options
    from verity.settings import Settings

    with pytest.raises(BadNodeOption, match="^--region: 'mars' is not a region"):
        _check_options("n", None, None, 1.0, "solver", Settings(), "mars")
    _check_options("n", None, None, 1.0, "solver", Settings(), "none")  # undeclared is a choice
