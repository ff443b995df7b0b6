"""`verity job list` from the event index (issue 26): ids, submitters, status, round and escrow come from the jobs'
events (the unconfirmed tail included); the chain is asked only for what no event carries, one getJob per row shown."""
from __future__ import annotations

import io
from types import SimpleNamespace

from eth_account import Account
from rich.console import Console

from fake_chain import NODE_A, NODE_B, FakeChain
from verity.chain.client import devnet_key
from verity.cli.job import jobs_table
from verity.index import open_source
from verity.job.listing import job_lines

VRT = 10**18
NOW = 100_000
ACCOUNT_3 = Account.from_key(devnet_key(3)).address


class _Call:
    def __init__(self, name: str, args: tuple):
        self.name, self.args = name, args
        self.abi = {"outputs": [{"name": "", "type": "tuple"}]}   # one output, given back as the fake returns it


class _Functions:
    def __getattr__(self, name: str):
        return lambda *args: _Call(name, args)


class _Views:
    """The chain client at the edge of this unit: it knows each job's record and the time, and notes every call."""

    def __init__(self, records: dict[int, SimpleNamespace]):
        self.records, self.asked = records, []
        self.jobs = self.escrow = SimpleNamespace(functions=_Functions())
        self.deployments = SimpleNamespace(chain_id=31337)

    def call(self, fn: _Call):
        self.asked.append((fn.name, *fn.args))
        assert fn.name == "getJob", f"job list asked the chain for {fn.name}, which the events carry"
        return self.records[fn.args[0]]

    def now(self) -> int:
        return NOW


def _record(rounds: int, posted_at: int) -> SimpleNamespace:
    return SimpleNamespace(rounds=rounds, shards=2, replication=3, paymentPerTask=VRT, postedAt=posted_at)


def _deployment(tmp_path):
    chain = FakeChain()
    chain.mine(("JobRegistry", "JobPosted", {"jobId": 1, "submitter": NODE_A}),
               ("JobEscrow", "EscrowDeposited", {"jobId": 1, "from": NODE_A, "amount": 10 * VRT}))
    chain.mine(("JobRegistry", "JobPosted", {"jobId": 2, "submitter": ACCOUNT_3}),
               ("JobEscrow", "EscrowDeposited", {"jobId": 2, "from": ACCOUNT_3, "amount": 5 * VRT}),
               ("JobEscrow", "PaymentSent", {"jobId": 1, "to": NODE_B, "amount": 2 * VRT}),
               ("JobRegistry", "RoundAdvanced", {"jobId": 1, "round": 1}))
    chain.mine(("JobEscrow", "EscrowBurned", {"jobId": 1, "amount": VRT}),
               ("JobRegistry", "JobCompleted", {"jobId": 1}),
               ("JobEscrow", "EscrowRefunded", {"jobId": 2, "to": ACCOUNT_3, "amount": 5 * VRT}),
               ("JobRegistry", "JobCancelled", {"jobId": 2, "refund": 5 * VRT}))
    chain.mine(("JobRegistry", "JobPosted", {"jobId": 3, "submitter": NODE_A}),     # not indexed yet: the live tail
               ("JobEscrow", "EscrowDeposited", {"jobId": 3, "from": NODE_A, "amount": 3 * VRT}),
               ("JobEscrow", "PaymentSent", {"jobId": 3, "to": NODE_B, "amount": VRT}))
    ix = open_source(chain, tmp_path)
    ix.sync(confirmations=1)
    views = _Views({1: _record(2, NOW - 7200), 2: _record(1, NOW - 185), 3: _record(2, NOW - 42)})
    return ix, views


def _rows(table) -> tuple[str, dict[str, list[str]]]:
    """The table's title and its rows by job id, each as its cells."""
    out = io.StringIO()
    Console(file=out, width=250, color_system=None).print(table)
    lines = out.getvalue().splitlines()
    rows = {}
    for line in lines:
        cells = [c.strip() for c in line.strip("│").split("│")]
        if line.startswith("│") and cells[0].isdigit():
            rows[cells[0]] = cells
    return lines[0].strip(), rows


def test_jobLines_statusRoundAndEscrow_fromEvents_succeeds(tmp_path):
    ix, _ = _deployment(tmp_path)
    lines = job_lines(ix.live_events())
    assert [(x.status, x.round, x.escrow, x.submitter) for x in (lines[1], lines[2], lines[3])] == [
        ("completed", 1, 7 * VRT, NODE_A), ("cancelled", 0, 0, ACCOUNT_3), ("active", 0, 2 * VRT, NODE_A)]


def test_jobsTable_readsTheIndex_andOneGetJobPerRowShown_succeeds(tmp_path):
    ix, views = _deployment(tmp_path)
    title, rows = _rows(jobs_table(views, ix))
    assert views.asked == [("getJob", 3), ("getJob", 2), ("getJob", 1)]   # no jobCount, no escrowOf
    assert title == "jobs 1..3 of 3" and list(rows) == ["3", "2", "1"]
    assert rows["3"][1:7] == ["active", "1/2", "2", "3", "1", "2 VRT"] and rows["3"][8] == "42 s ago"
    assert rows["2"][1:3] == ["cancelled", "1/1"] and rows["2"][6] == "0 VRT"
    assert rows["2"][7] == f"{ACCOUNT_3[:10]}… (--account 3)"              # the devnet signer hint, as before
    assert rows["1"][1:3] == ["completed", "2/2"] and rows["1"][6] == "7 VRT" and rows["1"][8] == "2 h 00 min ago"


def test_jobsTable_filtersBeforeAskingTheChain_succeeds(tmp_path):
    ix, views = _deployment(tmp_path)
    assert list(_rows(jobs_table(views, ix, status="active"))[1]) == ["3"] and views.asked == [("getJob", 3)]
    views.asked.clear()
    assert list(_rows(jobs_table(views, ix, submitter=ACCOUNT_3.lower()))[1]) == ["2"]
    assert views.asked == [("getJob", 2)]
    assert _rows(jobs_table(views, ix, last=1)) == ("jobs 3..3 of 3", {"3": _rows(jobs_table(views, ix))[1]["3"]})
