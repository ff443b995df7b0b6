"""Unit tests of the event index (verity.index) on tmp SQLite files, fed by a fake chain (tests/index/fake_chain.py)."""
from __future__ import annotations

import sqlite3

import pytest

from fake_chain import GAME, NODE_A, NODE_B, FakeChain
from verity.index import IndexOfAnotherChain, open_source, store
from verity.index import sync as sync_mod
from verity.index.codec import dump_args, load_args
from verity.job.history import JobHistory


def _job(chain: FakeChain, job: int, task: int, dispute: int, node: str = NODE_A) -> None:
    """One job's life: a task, a replica, a dispute resolved with a slash in the same transaction, a payment."""
    chain.mine(("JobRegistry", "JobPosted", {"jobId": job, "submitter": NODE_B}),
               ("JobRegistry", "TaskCreated", {"taskId": task, "jobId": job, "round": 0, "index": 0}))
    chain.mine(("JobRegistry", "TaskAssigned", {"taskId": task, "node": node, "slot": 0, "deadline": 9}))
    chain.mine(("DisputeGame", "DisputeOpened", {"disputeId": dispute, "taskId": task, "challenger": NODE_B,
                                                 "defender": node}))
    chain.mine(("DisputeGame", "StepPinpointed", {"disputeId": dispute, "step": 14}))
    tx = f"0x{'ee' * 31}{dispute:02x}"
    chain.mine(("NodeRegistry", "StakeSlashed", {"node": node, "to": GAME, "amount": 5 * 10**18}, tx),
               ("DisputeGame", "DisputeResolved", {"disputeId": dispute, "taskId": task, "outcome": 1}, tx),
               ("JobEscrow", "PaymentSent", {"jobId": job, "to": node, "amount": 7}))


def test_codec_bytesAndBigIntsAndAddresses_roundTrip_succeeds():
    args = {"reason": b"\x00time 181/116 s", "amount": 2**255 + 1, "small": -(2**63) - 1, "ok": True,
            "node": "0x" + "Ab" * 20, "referees": [NODE_A, NODE_B], "multiaddr": "/ip4/1.2.3.4", "root": b""}
    back = load_args(dump_args(args))
    assert back == args
    assert type(back["reason"]) is bytes and type(back["amount"]) is int and type(back["root"]) is bytes


def test_sync_storesConfirmedBlocksOnly_andResumesWithoutRereading_succeeds(tmp_path):
    chain = FakeChain()
    _job(chain, 1, 10, 100)
    for _ in range(3):
        chain.mine()
    ix = open_source(chain, tmp_path)
    assert ix.sync(confirmations=2) == 8 and ix.head == chain.head() - 2
    chain.mine(("JobEscrow", "PaymentSent", {"jobId": 1, "to": NODE_A, "amount": 1}))
    chain.event_reads.clear()
    assert ix.sync(confirmations=2) == 0                       # the new block is not 2 deep yet
    assert ix.sync(confirmations=0) == 1
    assert chain.event_reads == [(ix.head - 2, ix.head - 2), (ix.head - 1, ix.head)]  # only unread blocks
    ix.close()
    reopened = open_source(chain, tmp_path)
    assert reopened.head == chain.head() and reopened.sync(0) == 0 and len(reopened.events()) == 9


def test_sync_crashMidBatch_leavesNoHalfBatch_andRereads_succeeds(tmp_path, monkeypatch):
    chain = FakeChain()
    _job(chain, 1, 10, 100)
    ix = open_source(chain, tmp_path)

    def crash(db, stored):
        raise RuntimeError("power cut")

    monkeypatch.setattr(sync_mod, "_write_addresses", crash)   # after the events, before the cursor
    with pytest.raises(RuntimeError):
        ix.sync(confirmations=0)
    assert ix.db.execute("SELECT COUNT(*) FROM events").fetchone()[0] == 0
    assert ix.db.execute("SELECT COUNT(*) FROM tasks").fetchone()[0] == 0 and ix.head == chain.start_block - 1
    monkeypatch.undo()
    assert ix.sync(confirmations=0) == 8
    keys = [e.key for e in ix.events()]
    assert len(keys) == len(set(keys)) == 8


def test_events_byJob_followsTasksAndDisputes_andSlashesOfItsResolvingTx_succeeds(tmp_path):
    chain = FakeChain()
    _job(chain, 1, 10, 100, NODE_A)
    _job(chain, 2, 20, 200, NODE_B)
    chain.mine(("NodeRegistry", "StakeSlashed", {"node": NODE_A, "to": GAME, "amount": 3}))  # in no dispute's tx
    ix = open_source(chain, tmp_path)
    ix.sync(0)
    names = [e.name for e in ix.events(job_id=1)]
    assert names == ["JobPosted", "TaskCreated", "TaskAssigned", "DisputeOpened", "StepPinpointed", "StakeSlashed",
                     "DisputeResolved", "PaymentSent"]
    slashes = [e for e in ix.events(job_id=2) if e.name == "StakeSlashed"]
    assert [s.args["node"] for s in slashes] == [NODE_B]
    # JobHistory fed from the index = fed from every event
    every = [e for b in sorted(chain.blocks) for e in chain.blocks[b][1]]
    full, indexed = JobHistory(1, GAME), JobHistory(1, GAME)
    full.feed(every)
    indexed.feed(ix.events(job_id=1))
    assert indexed.disputes == full.disputes == {10: "#100 challenger wins"}
    assert indexed._fines == full._fines and indexed._fines[(10, NODE_A)] == 5 * 10**18


def test_events_byAddressNamesAndAfterId_succeeds(tmp_path):
    chain = FakeChain()
    _job(chain, 1, 10, 100, NODE_A)
    _job(chain, 2, 20, 200, NODE_B)
    chain.mine(("RefereePanel", "RefereesSeated", {"disputeId": 200, "referees": [NODE_A], "commitDeadline": 1}))
    ix = open_source(chain, tmp_path)
    ix.sync(0)
    touching = ix.events(address=NODE_A.upper().replace("0X", "0x"))   # any case
    assert [e.name for e in touching] == ["TaskAssigned", "DisputeOpened", "StakeSlashed", "PaymentSent",
                                          "RefereesSeated"]                # an address in an array too
    assert touching[-1].args["referees"] == [NODE_A]
    paid = ix.events(address=NODE_A, names=["PaymentSent"])
    assert [(e.args["jobId"], e.args["amount"]) for e in paid] == [(1, 7)]
    seated = ix.events(job_id=2, names=["RefereesSeated"])       # dispute 200 -> task 20 -> job 2
    assert len(seated) == 1 and ix.events(after_id=seated[0].id) == []
    assert len(ix.events(after_id=seated[0].id - 1)) == 1


def test_events_bySeveralJobs_oneLookupIndexedAndLive_succeeds(tmp_path):
    """`job_ids` (`verity job list`): the events derived to any of several jobs, the unconfirmed tail included."""
    chain = FakeChain()
    for job in (1, 2, 3):
        _job(chain, job, 10 * job, 100 * job)
    ix = open_source(chain, tmp_path)
    ix.sync(confirmations=3)               # job 3's last blocks stay out of the file
    paid = ix.live_events(job_ids=[3, 1], names=["JobPosted", "PaymentSent"])
    assert [(e.name, e.args["jobId"], e.id is None) for e in paid] == [
        ("JobPosted", 1, False), ("PaymentSent", 1, False), ("JobPosted", 3, False), ("PaymentSent", 3, True)]
    # a task's or dispute's events count for its job; a dispute slash (no job id of its own) does not
    assert {e.name for e in ix.events(job_ids=[2])} == {"JobPosted", "TaskCreated", "TaskAssigned", "DisputeOpened",
                                                        "StepPinpointed", "DisputeResolved", "PaymentSent"}
    assert ix.live_events(job_ids=[]) == [] and ix.live_events(job_ids=[4]) == []


def test_readers_readTheIndexTheyAreGiven_withTheLiveTail_succeeds(tmp_path):
    """`job show`'s JobReader and `node status`'s earnings read an open Index when handed one (scripts/bench_index.py
    times them so); by default each opens the chain's own."""
    from types import SimpleNamespace

    from verity.job.view import JobReader
    from verity.node.status import earning_events

    chain = FakeChain()
    _job(chain, 1, 10, 100, NODE_A)
    ix = open_source(chain, tmp_path)
    ix.sync(confirmations=2)
    assert [(e.name, e.args["amount"], e.id) for e in earning_events(None, NODE_A, ix)] == [("PaymentSent", 7, None)]
    get_job = SimpleNamespace(abi={"outputs": [{"name": "", "type": "tuple"}]})
    views = SimpleNamespace(game=SimpleNamespace(address=GAME), call=lambda fn: SimpleNamespace(status=1),
                            jobs=SimpleNamespace(functions=SimpleNamespace(getJob=lambda job_id: get_job)))
    reader = JobReader(views, None, 1, index=ix)
    assert reader.events() == ix.live_events(job_id=1) and reader.events()[-1].name == "PaymentSent"


def test_liveEvents_includeTheUnconfirmedTail_withTheSameFilters_succeeds(tmp_path):
    chain = FakeChain()
    _job(chain, 1, 10, 100, NODE_A)
    ix = open_source(chain, tmp_path)
    ix.sync(confirmations=3)               # the dispute's last blocks stay out
    assert "DisputeResolved" not in [e.name for e in ix.events(job_id=1)]
    live = ix.live_events(job_id=1)
    assert [e.name for e in live][-3:] == ["StakeSlashed", "DisputeResolved", "PaymentSent"]
    assert [e.id is None for e in live].count(True) == 5       # blocks 3..5, StepPinpointed via dispute 100 too
    assert [e.name for e in ix.live_events(address=NODE_A, names=["PaymentSent"])] == ["PaymentSent"]
    assert ix.live_events(job_id=2) == []
    # the explorer's "did anything happen?": a COUNT of the rows plus the tail, equal to reading them all
    assert ix.live_count() == len(ix.live_events()) == 8
    chain.mine(("JobEscrow", "PaymentSent", {"jobId": 1, "to": NODE_B, "amount": 1}))
    assert ix.live_count() == 9
    # an overview's feed: the last events, unconfirmed tail included, in chain order
    assert ix.latest_events(3) == ix.live_events()[-3:]
    assert ix.latest_events(20) == ix.live_events() and ix.latest_events(0) == []


def test_sync_reorgDeeperThanConfirmations_dropsAndRereadsTheLostBlocks_succeeds(tmp_path, monkeypatch):
    monkeypatch.setattr(sync_mod, "BATCH_BLOCKS", 2)   # several batch ends to fall back on
    chain = FakeChain()
    _job(chain, 1, 10, 100, NODE_A)
    ix = open_source(chain, tmp_path)
    ix.sync(0)
    chain.drop_from(4)                                   # blocks 4 and 5 replaced by another branch
    chain.mine(("JobEscrow", "PaymentSent", {"jobId": 1, "to": NODE_B, "amount": 99}), fork="f")
    chain.mine(fork="f")
    ix.sync(0)
    assert [e.name for e in ix.events(job_id=1)] == ["JobPosted", "TaskCreated", "TaskAssigned", "DisputeOpened",
                                                     "PaymentSent"]
    assert ix.events(names=["PaymentSent"])[0].args["to"] == NODE_B
    assert ix.db.execute("SELECT COUNT(*) FROM disputes").fetchone()[0] == 1


def test_open_anotherGenesis_getsItsOwnFile_andAForeignFileIsRefused_reverts(tmp_path):
    old, new = FakeChain(genesis="0x" + "11" * 32), FakeChain(genesis="0x" + "22" * 32)
    _job(old, 1, 10, 100)
    a = open_source(old, tmp_path)
    a.sync(0)
    b = open_source(new, tmp_path)
    assert b.path != a.path and b.path.parent == a.path.parent and "31337-22222222" in b.path.name
    assert b.events() == [] and b.head == 0
    with pytest.raises(IndexOfAnotherChain, match="genesis_hash"):
        open_source(new, a.path)
    assert len(open_source(old, a.path).events()) == 8      # the old file is untouched


def test_migrate_v1File_toLatest_backfillsAddresses_succeeds(tmp_path):
    path = tmp_path / "old.sqlite"
    db = store.connect(path, upto=1)
    assert db.execute("PRAGMA user_version").fetchone()[0] == 1
    db.execute("INSERT INTO meta VALUES ('identity', ?), ('start_block', '1')", (store.identity_key(FakeChain().identity()),))
    db.execute("INSERT INTO cursor (one, next_block, last_block, last_hash) VALUES (1, 3, 2, '0xab')")
    db.execute("INSERT INTO events (id, block, log_index, tx_hash, contract, name, args, job_id) VALUES "
               "(1, 2, 0, '0x01', 'JobEscrow', 'PaymentSent', ?, 1)", (dump_args({"jobId": 1, "to": NODE_A, "amount": 3}),))
    db.close()
    ix = open_source(FakeChain(), path)
    assert ix.db.execute("PRAGMA user_version").fetchone()[0] == len(store.MIGRATIONS) == 2
    assert [e.args["amount"] for e in ix.events(address=NODE_A)] == [3]
    assert ix.db.execute("SELECT block, hash FROM checkpoints").fetchall() == [(2, "0xab")]


def test_open_fileFromANewerClient_reverts(tmp_path):
    path = tmp_path / "new.sqlite"
    sqlite3.connect(path).execute("PRAGMA user_version = 99")
    with pytest.raises(store.IndexTooNew):
        open_source(FakeChain(), path)


def test_sync_chainRevertedBelowTheIndexedHead_rewinds_succeeds(tmp_path):
    """anvil's evm_revert (the node tests' per-test snapshot) leaves the index past the chain's head."""
    chain = FakeChain()
    _job(chain, 1, 10, 100, NODE_A)
    ix = open_source(chain, tmp_path)
    ix.sync(0)
    chain.drop_from(3)
    assert ix.sync(0) == 3 and ix.head == 2     # no checkpoint survived: read again from the start
    assert [e.name for e in ix.events()] == ["JobPosted", "TaskCreated", "TaskAssigned"]
    chain.mine(("JobEscrow", "PaymentSent", {"jobId": 1, "to": NODE_B, "amount": 1}), fork="f")
    assert ix.sync(0) == 1 and ix.events(job_id=1)[-1].name == "PaymentSent"
