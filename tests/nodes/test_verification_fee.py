"""P5 "looking pays" through real node processes: a verifier paid for a blind check made before the result was public.

A verifier-only node starts first and anchors its fee key chain. A job is posted in a later epoch (its tasks have
tickets) and its submitter funds a verification pot sampling every verifier (rateBps 10000). With no solver yet, the
task stays Open: the verifier re-executes it and commits its check blind. Only then does a solver start; it runs the
task (replication 1, optimistic) and the task is accepted. From epoch e + 2 the verifier reveals its epoch key and
claims: it is paid feePerCheck for the result it committed, which is the accepted one, and the fee contract still
holds exactly what its pots hold."""
from __future__ import annotations

import json

import pytest
from hexbytes import HexBytes

from node_builders import SUBMITTER, conserved, wait_for, warp_to
from verity.chain import EventCursor
from verity.chain.protocol import ReplicaStatus, TaskStatus, check_commitment
from verity.chain.views import read

pytestmark = pytest.mark.integration

FEE = 10**18
POT = 5 * FEE
CHECKS = 2
RATE_BPS = 10_000
ZERO32 = b"\0" * 32


def _accepted_final(c, tid: int) -> bytes:
    task = read(c, c.jobs, "getTask", tid)
    for r in read(c, c.jobs, "getReplicas", tid):
        if ReplicaStatus(r.status) == ReplicaStatus.ACCEPTED:
            return bytes(r.finalHash)
    return bytes(task.finalHash)


def test_a_blind_check_made_before_the_result_was_public_is_paid_succeeds(net):
    verifier = net.start_node("auditor", 2, roles="verifier")
    net.wait_registered(1)
    c = net.client()
    epoch_s = c.call(c.fees.functions.epochSeconds())
    chain = wait_for(lambda: (ch := c.call(c.fees.functions.chainOf(verifier.address)))[0] != ZERO32 and ch, 60,
                     "the verifier's fee key chain anchor")
    anchor_epoch = chain[2]
    warp_to(c, (anchor_epoch + 1) * epoch_s)  # tasks of the anchor epoch have no ticket

    job_id = net.post(shards=1, rounds=1, steps=20, k=10, replication=1, challenge_window=12, execution_window=60)
    sub = net.client(SUBMITTER)
    sub.transact(sub.token.functions.approve(sub.fees.address, POT))
    sub.transact(sub.fees.functions.fund(job_id, POT, FEE, CHECKS, RATE_BPS))
    train = c.call(c.jobs.functions.taskOf(job_id, 0, 0))
    created = read(c, c.jobs, "getTask", train).createdAt
    e = created // epoch_s
    assert e > anchor_epoch

    # no solver yet: the task is Open, nothing of it is public, and the verifier checks it blind
    wait_for(lambda: c.call(c.fees.functions.checkOf(train, verifier.address)) != ZERO32, 90, "the blind check",
             poll=0.25)
    assert TaskStatus(read(c, c.jobs, "getTask", train).status) == TaskStatus.OPEN
    balance = c.call(c.token.functions.balanceOf(verifier.address))  # registered and staked long before

    net.start_node("solver", 1, roles="solver")
    net.wait_until(lambda: TaskStatus(read(c, c.jobs, "getTask", train).status) == TaskStatus.ACCEPTED, 120,
                   "the task's acceptance")
    warp_to(c, (e + 2) * epoch_s)  # the key for epoch e may be revealed from e + 2

    def seen(name):
        crashed = [n.name for n in net.nodes if n.proc.poll() is not None]
        assert not crashed, f"node(s) {crashed} exited:\n" + "\n".join(n.text()[-3000:] for n in net.nodes)
        return [ev for ev in net.events() if ev.name == name and ev.args["taskId"] == train]
    claimed = wait_for(lambda: seen("CheckClaimed"), 60, "the verifier's fee claim")
    assert [ev.args["verifier"] for ev in claimed] == [verifier.address]
    warp_to(c, int(c.call(c.fees.functions.claimClosesAt(train))))  # lower tickets could claim until then
    fee_paid = wait_for(lambda: seen("FeePaid"), 60, "the fee's collect after the claim window")
    assert [(ev.args["verifier"], ev.args["amount"], ev.args["jobId"], ev.args["epoch"]) for ev in fee_paid] == \
        [(verifier.address, FEE, job_id, e)]

    # the claim opened the blind commitment with the accepted result
    tx = c.w3.eth.get_transaction(HexBytes(claimed[0].tx_hash))
    fn, args = c.fees.decode_function_input(tx["input"])
    assert fn.fn_name == "claim" and args["taskId"] == train
    assert bytes(args["finalHash"]) == _accepted_final(c, train)
    assert check_commitment(train, args["finalHash"], args["salt"], verifier.address) == \
        bytes(c.call(c.fees.functions.checkOf(train, verifier.address)))
    committed = [ev for ev in net.events() if ev.name == "CheckCommitted" and ev.args["taskId"] == train]
    revealed = [ev for ev in net.events() if ev.name == "ResultRevealed" and ev.args["taskId"] == train]
    assert committed and revealed and committed[0].block < revealed[0].block  # blind: before any result was public

    # the verifier earned exactly its fees; the fee contract holds exactly what its pots hold (P5 conservation)
    block = c.block_number()
    events = EventCursor(c.w3, {"VerificationFees": c.fees}, next_block=c.deployments.start_block).poll(head=block)
    ours = [ev.args["amount"] for ev in events if ev.name == "FeePaid" and ev.args["verifier"] == verifier.address]
    assert c.call(c.token.functions.balanceOf(verifier.address), block) - balance == sum(ours) >= FEE
    pot = c.call(c.fees.functions.potOf(job_id), block)
    held = sum(len(c.call(c.fees.functions.slotsOf(t), block)) for t in
               {ev.args["taskId"] for ev in events if ev.name == "CheckClaimed"}) * FEE  # windows still open
    assert pot[0] + held == POT - sum(ev.args["amount"] for ev in events if ev.name == "FeePaid")
    assert c.call(c.token.functions.balanceOf(c.fees.address), block) == pot[0] + held
    conserved(c)

    snapshot = net.root / "state" / "nodes" / "auditor" / "snapshot.json"
    verdict = wait_for(lambda: json.loads(snapshot.read_text())["items"].get(f"audit:{train}", {}).get("data", {})
                       .get("verdict"), 10, "the audit item's verdict")
    assert verdict == "fee paid"
