"""Units of the job views: why a task waits, the cancel rule (JobRegistry.cancelJob's), the advice
lines, the task table's round numbering and the loss plot (no chain: JobReport built by hand)."""
from __future__ import annotations

import io

import pytest
from rich.console import Console

from verity.job.advice import NodeFacts, advice, cancel_rule, countdown, task_reason
from verity.job.plot import figure
from verity.job.table import clock, render
from verity.job.view import JobReport, ReplicaRow, RoundMetric, TaskRow

A, B, C = "0x" + "aa" * 20, "0x" + "bb" * 20, "0x" + "cc" * 20
ZERO = "0x" + "00" * 20
NOW = 10_000


def report(tasks, **kw) -> JobReport:
    base = dict(job_id=3, status="active", current_round=0, rounds=3, shards=1, tasks=tasks, now=NOW,
                escrow=12 * 10**18, submitter=A, replication=2, ever_assigned=True, assignment_timeout=300)
    base.update(kw)
    return JobReport(**base)


def open_task(open_since=NOW - 10, replicas=None) -> TaskRow:
    reps = replicas if replicas is not None else [ReplicaRow(0, B, "assigned", NOW + 50), ReplicaRow(1, ZERO, "none")]
    return TaskRow(1, 0, 0, "train", "open", reps, open_since=open_since)


def text(renderable) -> str:
    out = io.StringIO()
    Console(file=out, width=250, color_system=None).print(renderable)
    return out.getvalue()


def test_countdown_formats_succeeds():
    assert [countdown(s) for s in (-3, 42, 185, 7800)] == ["0 s", "42 s", "3 min 05 s", "2 h 10 min"]


def test_task_reason_no_node_registered_succeeds():
    reason = task_reason(open_task(replicas=[ReplicaRow(0, ZERO, "none"), ReplicaRow(1, ZERO, "none")]), NOW,
                         NodeFacts(registered=0), 2)
    assert reason == "2 slot(s) empty for 10 s; no eligible node: no node is registered"


def test_task_reason_eligible_node_already_holds_the_task_succeeds():
    reason = task_reason(open_task(), NOW, NodeFacts(registered=1, eligible=[B]), 2)
    assert "1 slot(s) empty" in reason and "the 1 eligible node(s) hold or were banned from this task" in reason


def test_task_reason_banned_node_is_not_a_candidate_succeeds():
    facts = NodeFacts(registered=2, eligible=[B, C], banned={1: [C]})
    assert "no eligible node" in task_reason(open_task(), NOW, facts, 2)
    assert "1 eligible node(s), waiting for a node to call assign()" in task_reason(open_task(), NOW, NodeFacts(2, eligible=[B, C]), 2)


def test_task_reason_drawn_node_offline_succeeds():
    row = TaskRow(1, 0, 0, "train", "assigned", [ReplicaRow(0, B, "assigned", NOW + 90)])
    facts = NodeFacts(registered=1, liveness_window=600, last_seen={B: NOW - 700})
    reason = task_reason(row, NOW, facts, 1)
    assert reason.startswith("drawn node 0xbbbbbb… offline (last seen 11 min 40 s ago)")
    assert "waiting for 0xbbbbbb…'s result, 1 min 30 s left" in reason


def test_task_reason_overdue_and_challenge_window_succeeds():
    late = TaskRow(1, 0, 0, "train", "assigned", [ReplicaRow(0, B, "committed", NOW - 5), ReplicaRow(1, C, "revealed")])
    assert "0xbbbbbb…'s reveal is 5 s overdue; any node may reportLate" in task_reason(late, NOW, NodeFacts(), 2)
    revealed = TaskRow(1, 0, 0, "train", "revealed", [], challenge_deadline=NOW + 20)
    assert task_reason(revealed, NOW, NodeFacts(), 1) == "challenge window of the result, 20 s left"


def test_clock_challenge_window_reveal_grace_and_open_disputes_succeeds():
    def row(deadline, disputes=0):
        return TaskRow(1, 0, 0, "train", "revealed", [], challenge_deadline=deadline, reveal_grace=60,
                       open_disputes=disputes)

    assert clock(row(NOW + 20), NOW) == "challenge 20 s"
    assert clock(row(NOW - 20), NOW) == "challenge reveals 40 s"
    assert clock(row(NOW - 100, 2), NOW) == "2 dispute(s) open"
    assert clock(row(NOW - 100), NOW) == "challenge over"


def test_task_reason_reveal_grace_disputes_and_candidate_succeeds():
    grace = TaskRow(1, 0, 0, "train", "revealed", [], challenge_deadline=NOW - 5, reveal_grace=30)
    assert "challenges committed in time may be revealed for 25 s" in task_reason(grace, NOW, NodeFacts(), 2)
    disputed = TaskRow(1, 0, 0, "train", "revealed", [], dispute="#3 step 14", challenge_deadline=NOW - 60,
                       reveal_grace=30, open_disputes=1)
    assert task_reason(disputed, NOW, NodeFacts(), 2) == \
        "challenge window of the result over; 1 dispute(s) against it open (#3 step 14)"
    done = TaskRow(1, 0, 0, "train", "revealed", [], challenge_deadline=NOW - 60, reveal_grace=30, candidate=B)
    assert task_reason(done, NOW, NodeFacts(), 2) == \
        "challenge window of the result of 0xbbbbbb… (it won a dispute) over; waiting for a node to call finalize()"


@pytest.mark.parametrize("tasks, kw, allowed, wait, why", [
    ([open_task()], dict(ever_assigned=False), True, 0, "no slot was ever assigned"),
    ([open_task(open_since=NOW - 300)], {}, True, 0, "task 1 has had an empty slot for 5 min 00 s"),
    ([open_task(open_since=NOW - 100)], {}, False, 200, "allowed in 3 min 20 s if task 1 stays unassigned"),
    ([TaskRow(1, 0, 0, "train", "revealed", [], open_disputes=2)], dict(ever_assigned=False), False, None,
     "task 1 is in 2 open dispute(s)"),
    ([TaskRow(1, 0, 0, "train", "contested", [])], dict(ever_assigned=False), False, None, "task 1 is in a dispute"),
    ([TaskRow(1, 0, 0, "train", "revealed", [])], dict(ever_assigned=False), True, 0, "no slot was ever assigned"),
    ([TaskRow(1, 0, 0, "train", "assigned", [])], {}, False, None, "every task of round 1 has its nodes"),
    ([open_task()], dict(status="completed"), False, None, "the job is completed"),
])
def test_cancel_rule_mirrors_cancelJob_succeeds(tasks, kw, allowed, wait, why):
    rule = cancel_rule(report(tasks, **kw))
    assert (rule.allowed, rule.wait_s) == (allowed, wait)
    assert rule.why.startswith(why)


def test_advice_names_reasons_and_the_cancel_command_succeeds():
    rep = report([open_task(open_since=NOW - 400)], submitter="0xa0Ee7A142d267C1f36714E4a8F75612F20a79720")  # account 9
    rep.tasks[0].reason = "1 slot(s) empty for 6 min 40 s; no eligible node: no node is registered"
    lines = advice(rep)
    assert lines[0] == "task 1 (round 1, train) open: 1 slot(s) empty for 6 min 40 s; no eligible node: no node is registered"
    assert lines[1] == ("cancel now (task 1 has had an empty slot for 6 min 40 s): "
                        "`verity job cancel 3 --account 9` refunds 12 VRT")


def test_advice_completed_job_with_escrow_says_reclaim_succeeds():
    lines = advice(report([], status="completed", escrow=4 * 10**18, submitter=B))
    assert lines == ["`verity job reclaim 3 --key-file FILE` returns 4 VRT of unspent escrow"]


def test_advice_ended_job_with_a_pot_says_reclaim_returns_it_succeeds():
    """Issue 24: an ended job's verification pot is the submitter's once the fee claim grace is over."""
    rep = report([], status="cancelled", submitter=B)
    rep.pot, rep.now = 12 * 10**17, 1_000
    assert advice(rep) == ["`verity job reclaim 3 --key-file FILE` returns 1.2 VRT left in the verification pot "
                           "(after the fee claim grace it starts)"]
    rep.pot_refundable_at = 1_300
    assert advice(rep)[-1].endswith("(in 300 s)")
    rep.now = 1_300
    assert advice(rep)[-1].endswith("(now)")
    rep.status = "active"
    assert not any("verification pot" in line for line in advice(rep))


def test_table_numbers_rounds_from_one_and_keeps_replaced_replicas_succeeds():
    row = TaskRow(7, 1, 0, "train", "accepted", [ReplicaRow(0, B, "late", fined=10**18, current=False),
                                                  ReplicaRow(0, C, "accepted")])
    rep = report([row], current_round=1, metrics=[RoundMetric(0, 0.5, 0.8), RoundMetric(1, 0.25, 0.9)])
    out = text(render(rep, {B: "solver-4", C: "solver-1"}))
    assert "round 2/3" in out
    assert "│ 7    │ 2     │ 1" in out
    assert "solver-4:late −1 VRT, solver-1:accepted" in out
    metric_rows = [line for line in out.splitlines() if "0.2500" in line or "0.5000" in line]
    assert metric_rows[0].split("│")[1].strip() == "1" and metric_rows[1].split("│")[1].strip() == "2"


def test_table_without_metrics_says_no_data_yet_succeeds():
    assert "no data yet" in text(render(report([])))


def test_plot_without_data_says_no_data_yet_succeeds():
    fig, what = figure(report([]))
    assert what == "no data yet"
    assert [t.get_text() for t in fig.axes[0].texts] == ["no data yet"]


def test_plot_numbers_rounds_as_the_table_succeeds():
    from verity.job.plot import CheckpointLoss

    rep = report([], metrics=[RoundMetric(0, 2.0, 0.5), RoundMetric(1, 1.0, 0.7)])
    cps = [CheckpointLoss(0, 0, 0.0, 2.3), CheckpointLoss(0, 0, 0.5, 2.1), CheckpointLoss(0, 0, 1.0, 2.05),
           CheckpointLoss(1, 0, 0.5, 1.5), CheckpointLoss(1, 0, 1.0, 1.1)]
    fig, what = figure(rep, cps)
    ax = fig.axes[0]
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    assert list(lines["global model"].get_xdata()) == [1, 2]          # the table's round 1 and 2
    assert list(lines["shard 1 checkpoints"].get_xdata()) == [0.0, 0.5, 1.0]  # round 1's training: x from 0 to 1
    assert list(ax.get_xticks()) == [0, 1, 2, 3]
    assert ax.get_ylim()[0] == 0 and ax.get_ylim()[1] >= 2.3
    assert fig.axes[1].get_ylim() == (0.0, 1.0)
    assert what == "2 round(s), 5 checkpoint(s)"


def test_plot_samples_at_most_the_cap_of_checkpoints_per_task_succeeds():
    from verity.job.plot import _picks

    assert _picks(2, 8) == [0, 1, 2]
    assert _picks(100, 4) == [0, 25, 50, 75, 100]


def test_table_names_drawn_nodes_in_reasons_succeeds():
    row = TaskRow(1, 0, 0, "train", "assigned", [ReplicaRow(0, B, "assigned", NOW + 30)], reason="")
    rep = report([row], replication=1)
    row.reason = task_reason(row, NOW, NodeFacts(registered=1), 1)
    out = text(render(rep, {B: "solver-2"}))
    assert "task 1 (round 1, train) assigned: waiting for solver-2's result, 30 s left" in out
    assert "│ solver-2:assigned │ result 30 s" in out


def test_history_keeps_replaced_late_and_slashed_replicas_with_their_fines_succeeds():
    from types import SimpleNamespace as NS

    from verity.chain.events import DecodedEvent
    from verity.job.history import JobHistory

    game, jobs = "0x" + "99" * 20, "0x" + "98" * 20
    D = "0x" + "dd" * 20

    def ev(name, tx="0x01", **args):
        return DecodedEvent("", name, args, 0, 0, tx)

    h = JobHistory(4, game)
    h.feed([ev("TaskCreated", taskId=9, jobId=3, round=0, index=0),          # another job's task: ignored
            ev("TaskCreated", taskId=10, jobId=4, round=1, index=0),
            ev("TaskAssigned", taskId=10, node=B, slot=0, deadline=5), ev("TaskAssigned", taskId=10, node=C, slot=1, deadline=5),
            ev("ReplicaLate", tx="0x02", taskId=10, node=B, slot=0, slashed=10**18),
            ev("StakeSlashed", tx="0x02", node=B, to=jobs, amount=10**18),     # the late slash: counted once
            ev("TaskAssigned", taskId=10, node=D, slot=0, deadline=9),
            ev("DisputeOpened", taskId=10, disputeId=2, challenger=D, defender=C),
            ev("StepPinpointed", disputeId=2, step=14)])
    assert h.disputes == {10: "#2 step 14"}
    h.feed([ev("StakeSlashed", tx="0x03", node=C, to=game, amount=10 * 10**18),
            ev("StakeSlashed", tx="0x03", node=A, to=game, amount=10**17),     # a silent referee, not a replica
            ev("DisputeResolved", tx="0x03", taskId=10, disputeId=2, winner=D, loser=C, outcome=1)])
    current = [NS(node=D, status=4, deadline=0), NS(node=C, status=5, deadline=0)]  # accepted, slashed
    rows = h.replicas(10, current)
    assert [(r.slot, r.node, r.status, r.fined, r.current) for r in rows] == [
        (0, B, "late", 10**18, False), (0, D, "accepted", 0, True), (1, C, "slashed", 10 * 10**18, True)]
    assert h.disputes[10] == "#2 challenger wins" and set(h.tasks) == {10}
    # v2: several challenges per task; one opened against a replaced candidate is abandoned as stale.
    h.feed([ev("DisputeOpened", taskId=10, disputeId=5, challenger=B, defender=D),
            ev("DisputeAbandoned", taskId=10, disputeId=5, epoch=1)])
    assert h.disputes[10] == "#2 challenger wins, #5 abandoned (stale)"


def test_declines_show_the_nodes_own_notes_in_the_task_reason_succeeds():
    """Issue 24: every node declined a user's GPT job ("about 181 s of training … 116 s left") and `job watch` said
    only "no eligible node" for 10 minutes. The decline's on-chain note now reaches the reason line."""
    from verity.chain.events import DecodedEvent
    from verity.chain.protocol import decline_note
    from verity.job.history import JobHistory
    from types import SimpleNamespace as NS

    def ev(name, **args):
        return DecodedEvent("", name, args, 0, 0, "0x01")

    h = JobHistory(4, "0x" + "99" * 20)
    h.feed([ev("TaskCreated", taskId=10, jobId=4, round=0, index=0),
            ev("TaskAssigned", taskId=10, node=B, slot=0, deadline=5),
            ev("ReplicaDeclined", taskId=10, node=B, slot=0, reason=decline_note("time 181/116 s")),
            ev("TaskAssigned", taskId=10, node=C, slot=0, deadline=9),
            ev("ReplicaDeclined", taskId=10, node=C, slot=0, reason=decline_note("memory 9700/4096 MB\x07\xff"))])
    rows = h.replicas(10, [NS(node=C, status=7, deadline=0)])  # the slot's record: C, Voided
    assert [(r.node, r.status, r.note, r.current) for r in rows] == [
        (B, "declined", "time 181/116 s", False), (C, "declined", "memory 9700/4096 MB??", True)]
    assert h.declines(10) == {B: "time 181/116 s", C: "memory 9700/4096 MB??"}  # non-ASCII bytes read as '?'
    row = TaskRow(10, 0, 0, "train", "open", rows, open_since=NOW - 30)
    reason = task_reason(row, NOW, NodeFacts(registered=2, eligible=[B, C], banned={10: [B, C]}), 2)
    assert reason.endswith("declined by 0xbbbbbb…: time 181/116 s; declined by 0xcccccc…: memory 9700/4096 MB??")
    assert "no eligible node: the 2 eligible node(s) hold or were banned from this task" in reason


def test_decline_note_is_32_printable_ascii_bytes_succeeds():
    from verity.chain.protocol import decline_note, read_decline_note

    assert decline_note("time 181/116 s") == b"time 181/116 s" + b"\0" * 18
    long = decline_note("ManifestInvalid: manifest field 'model.config.n_embd': must be a multiple of n_head")
    assert len(long) == 32 and read_decline_note(long) == "ManifestInvalid: manifest field "
    assert read_decline_note(decline_note("naïve\n")) == "na?ve?" and read_decline_note(b"\0" * 32) == ""


def test_download_fetches_the_jobs_tokenizer_and_checks_its_hash_succeeds():
    """`job download` writes a tokenized job's tokenizer.json beside the weights, only if it is the one the manifest
    names (a stand-in reader: the IPFS node may serve anything)."""
    import hashlib
    from types import SimpleNamespace as NS

    from verity.cli.job import _tokenizer
    from verity.errors import VerityError

    good = b'{"model": {"type": "BPE"}}'
    data = NS(tokenizer_cid="QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG",
              tokenizer_sha256=hashlib.sha256(good).hexdigest())
    caps = []

    def reader(served):
        def get_bytes(cid, max_bytes):
            caps.append(max_bytes)
            return served
        return NS(manifest=NS(data=data), storage=NS(get_bytes=get_bytes))

    assert _tokenizer(reader(good)) == good and caps == [64 << 20]  # a bounded download
    with pytest.raises(VerityError, match="is not the one the manifest names"):
        _tokenizer(reader(b'{"model": "other"}'))
    assert _tokenizer(NS(manifest=NS(data=NS(tokenizer_cid=None)))) is None  # a character or classification job


def test_job_show_names_the_nodes_run_from_this_machine_never_their_address_succeeds(tmp_path, monkeypatch):
    """Issue 26: four solvers read as "0x70997970…" in `job show`; a node run here under --name is shown by it."""
    from verity.cli.job import local_names

    for name, address in (("solver-with-a-long-name-1", B), ("verifier-1", C)):
        (tmp_path / "nodes" / name).mkdir(parents=True)
        (tmp_path / "nodes" / name / "account").write_text(address + "\n")
    monkeypatch.setenv("VERITY_STATE_DIR", str(tmp_path))
    names = local_names()
    assert names == {B: "solver-with-a-long-name-1", C: "verifier-1"}
    shown = text(render(report([open_task()]), names))
    assert "solver-with-a-long-name-1" in shown and B[:8] + "…" not in shown
    assert B[:8] + "…" in text(render(report([open_task()])))   # an unknown node: its short address


def test_devnet_address_table_equals_the_accounts_derived_from_the_mnemonic_succeeds():
    """The `--account N` hints' table (issue 26: deriving it cost each first `job show`/`job list` ~380 ms) is the
    devnet mnemonic's first 20 accounts, derived here the slow way, so it cannot drift from the mnemonic."""
    from verity.chain.client import DEVNET_MNEMONIC
    from verity.devnet.anvil import DEV_MNEMONIC
    from verity.job.advice import DEVNET_ADDRESSES, derive_devnet_accounts
    from verity.settings import Settings

    assert DEV_MNEMONIC == DEVNET_MNEMONIC == Settings.model_fields["devnet_mnemonic"].default
    assert len(DEVNET_ADDRESSES) == Settings.model_fields["devnet_accounts"].default == 20
    assert derive_devnet_accounts(20) == {a: i for i, a in enumerate(DEVNET_ADDRESSES)}


def test_devnet_accounts_up_to_twenty_never_derive_succeeds(monkeypatch):
    """The common path (20 accounts or fewer) reads the table; only more accounts than it holds are derived."""
    from verity.job import advice as adv

    def derive(count):
        raise AssertionError(f"derived {count} accounts")

    monkeypatch.setattr(adv, "derive_devnet_accounts", derive)
    adv.devnet_accounts.cache_clear()
    try:
        accounts = adv.devnet_accounts()
        assert len(accounts) == 20 and accounts[adv.DEVNET_ADDRESSES[19]] == 19
        assert adv.devnet_accounts(3) == {a: i for i, a in enumerate(adv.DEVNET_ADDRESSES[:3])}
        assert adv.devnet_accounts(0) == {}
        assert adv.signer_hint("0x70997970C51812dc3A010C7d01b50e0d17dc79C8") == "--account 1"
        assert adv.signer_hint("0x70997970C51812dc3A010C7d01b50e0d17dc79C8", 1) == "--key-file FILE"
        assert adv.signer_hint(A, 31337) == "--key-file FILE"
        with pytest.raises(AssertionError, match="derived 21 accounts"):
            adv.devnet_accounts(21)
    finally:
        adv.devnet_accounts.cache_clear()
