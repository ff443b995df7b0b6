"""Pages rendered from fixed data: full node names (never cut short), the task table, inline SVG curves, the dispute
trail with its step and votes, payments and the conservation line; the overview and node sections; the stream's
section digests."""
from __future__ import annotations

import re

from explorer_fixtures import (CHALLENGER, DEFENDER, NAMES, REFEREES, dispute_events, job_report, node_status)

from verity.explorer.app import Explorer, digest, points
from verity.explorer.charts import curve_svg
from verity.explorer.data import Conservation, JobPage, NodeMoney, NodePage, NodeRow, Overview, TaskLine
from verity.explorer.trail import build_trails

LONG = NAMES[REFEREES[2]]


def explorer() -> Explorer:
    return Explorer(chain=None, storage=None, names=NAMES)


def job_page(resolved: bool = True) -> JobPage:
    trails = build_trails(dispute_events(resolved))
    money = {DEFENDER: NodeMoney(paid=4 * 10**18, rewards=5 * 10**18), CHALLENGER: NodeMoney(slashed=10 * 10**18)}
    return JobPage(job_report(), "digits-mlp", list(trails.values()), money, [(40, DEFENDER, 4 * 10**18)],
                   [(36, CHALLENGER, 10 * 10**18, "lost dispute 1 (task 2)")],
                   Conservation(deposited=17 * 10**18, paid=4 * 10**18, refunded=6 * 10**18, held=7 * 10**18), 30)


def text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_renderJob_tasksCurvesTrailMoney_succeeds():
    s = explorer().render_job(job_page())
    assert list(s) == ["s-jobhead", "s-tasks", "s-curves", "s-disputes", "s-money"]
    assert "Job 1 · digits-mlp" in s["s-jobhead"]
    tasks = text(s["s-tasks"])
    assert "solver-4" in tasks and "solver-1" in tasks and LONG in tasks   # names in full
    assert "−10.00 VRT" in tasks and "(empty)" in tasks and "#1 step 14" in tasks
    assert s["s-curves"].count("<svg") == 2 and s["s-curves"].count("<circle") == 4 and "0.933" in s["s-curves"]
    trail = text(s["s-disputes"])
    assert "checkpoint 1→2, step 14" in trail and "defender wins" in trail
    assert trail.count("for the defender") >= 3   # two votes and the panel's verdict
    assert "committed" in trail                    # the third referee committed, revealed nothing
    assert 'href="/node/' + DEFENDER + '"' in s["s-disputes"]
    money = text(s["s-money"])
    assert "conserved: escrow in = paid out + refunded + burned + held" in money and "lost dispute 1" in money


def test_renderJob_brokenConservation_saysSo_succeeds():
    page = job_page()
    page.conservation = Conservation(deposited=10, paid=3, held=6)
    assert "NOT CONSERVED" in explorer().render_job(page)["s-money"]


def test_renderJob_noDisputeNoMetrics_succeeds():
    page = job_page()
    page.trails, page.report.metrics = [], []
    s = explorer().render_job(page)
    assert "no dispute" in s["s-disputes"] and "no finished round yet" in s["s-curves"]


def test_renderOverview_nodesClassesJobsThroughput_succeeds():
    nodes = [NodeRow(DEFENDER, "solver,referee", 1000 * 10**18, 10 * 10**18, "cpu", 4096, ["portable-f32"], "europe", 100, 95),
             NodeRow(REFEREES[2], "verifier,referee", 500 * 10**18, 0, "cpu", 2048, [], "undeclared", 0, 0)]
    ov = Overview(100, 42, nodes, 1500 * 10**18, 10 * 10**18, [("portable-f32", "cpu", "solver", 1, 1000 * 10**18)],
                  [(1, "active", 1, 2, 7 * 10**18)], {"active": 1}, 12, 30, dispute_events()[:3])
    s = explorer().render_overview(ov)
    assert LONG in s["s-nodes"] and DEFENDER in s["s-nodes"] and "5 s ago" in text(s["s-nodes"])
    assert "never" in s["s-nodes"]
    summary = text(s["s-summary"])
    assert "1,500.00 VRT" in summary and "12 tasks/h" in summary and "1 active" in summary and "portable-f32" in summary
    assert 'href="/job/1"' in s["s-jobs"] and "TaskCreated" in s["s-recent"]


def test_renderNode_earningsFactorsDisputesTasks_succeeds():
    trail = build_trails(dispute_events())[1]
    page = NodePage(DEFENDER, node_status(), [trail], [], [TaskLine(2, 1, 1, 1, "train", 1, "accepted", "accepted", 12)],
                    won=1, lost=0)
    s = explorer().render_node(page)
    head = text(s["s-nodehead"])
    assert "solver-1" in head and "100.0%" in head and "95.0%" in head and "3 won / 0 lost" in head
    earn = text(s["s-earnings"])
    assert "12.00" in earn and "7.00" in earn and "5.00" in earn    # earned; task payments, dispute rewards
    assert "pending" not in earn and "withdrawn" not in earn           # paid at once: nothing held to withdraw
    assert "won" in s["s-nodedisputes"] and "solver-4" in s["s-nodedisputes"]
    assert 'href="/job/1"' in s["s-nodetasks"]


def test_curveSvg_singlePointAndDigest_succeeds():
    svg = curve_svg([(1, 0.5)], "loss")
    assert svg.startswith("<svg") and "nan" not in svg
    assert points(job_report().metrics, "accuracy") == [(1, 0.896), (2, 0.933)]
    assert digest("a") != digest("b") and len(digest("a")) == 12


def test_nodeHtml_unknownAddressShownInFull_succeeds():
    other = "0x" + "de" * 20
    assert other in explorer().node_html(other) and "(nobody)" in explorer().node_html("0x" + "00" * 20)
