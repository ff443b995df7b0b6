"""P6 through real node processes: a copied challenge earns the copier nothing.

A solver flips a bit (replication 1) and an honest verifier node challenges it. The test itself plays a copier: a
funded test account registered and staked as a verifier that watches the chain. As soon as the honest verifier's
ChallengeCommitted appears it commits the same commitment from its own account, and as soon as the honest
challengeOptimistic is mined it sends the identical calldata from its own account. The commitment binds the
challenger's address, so the copied commitment stands for the honest verifier and the copied reveal reverts; the
honest verifier wins and is paid, the copier is in no dispute and is paid nothing."""
from __future__ import annotations

import time

import pytest
from hexbytes import HexBytes

from node_builders import conserved, register_account, revert_error, send_calldata
from verity.chain import EventCursor
from verity.chain.protocol import ROLE_VERIFIER, DisputeOutcome, TaskStatus, challenge_commitment
from verity.chain.views import read

pytestmark = pytest.mark.integration

TRAIN = 1  # shard 0 of round 0
COPIER = 6  # a funded test account no node uses
STAKE = 1_000 * 10**18


def _copy_the_honest_challenge(net, copier, honest: str, timeout: float = 120.0):
    """Watch the chain as the nodes do; copy the honest commitment at once, then its reveal calldata once mined.
    Returns (honest ChallengeCommitted, copied commit receipt, honest DisputeOpened, honest reveal tx)."""
    cursor = EventCursor(copier.w3, copier.contracts, next_block=copier.deployments.start_block)
    committed = copied_commit = None
    deadline = time.monotonic() + timeout
    while True:
        for ev in cursor.poll():
            if ev.name == "ChallengeCommitted" and ev.args["challenger"] == honest and committed is None:
                committed = ev
                copied_commit = copier.transact(copier.game.functions.commitChallenge(ev.args["commitment"]))
            elif ev.name == "DisputeOpened" and ev.args["challenger"] == honest:
                assert committed is not None, "a dispute opened before any commitment was seen"
                return committed, copied_commit, ev, copier.w3.eth.get_transaction(HexBytes(ev.tx_hash))
        crashed = [n.name for n in net.nodes if n.proc.poll() is not None]
        assert not crashed, f"node(s) {crashed} exited"
        assert time.monotonic() < deadline, f"no challenge by the honest verifier within {timeout} s"
        time.sleep(0.1)


def test_copied_commitment_and_reveal_earn_the_copier_nothing_succeeds(net):
    solver = net.start_node("flipper", 1, roles="solver", faults=["bitflip@step=15"])
    honest = net.start_node("verifier", 2, roles="verifier")
    for i in (3, 4, 5):
        net.start_node(f"referee-{i}", i, roles="referee")
    net.wait_registered(5)
    copier = register_account(net, COPIER, ROLE_VERIFIER, STAKE)  # a verifier too: only the binding can stop it
    balance = copier.call(copier.token.functions.balanceOf(copier.address))
    job_id = net.post(shards=1, rounds=1, steps=20, k=10, replication=1, challenge_window=12, execution_window=60)

    committed, copied_commit, opened, reveal = _copy_the_honest_challenge(net, copier, honest.address)
    assert copied_commit["status"] == 1  # anyone may commit any value: the record stands for its first committer
    if copied_commit["blockNumber"] < opened.block:  # the usual case: the copy landed before the honest reveal
        record = copier.call(copier.game.functions.commitments(committed.args["commitment"]),
                             copied_commit["blockNumber"])
        assert record[0] == committed.block  # ... and did not move the honest commitment's time
    game = copier.game.address
    copied_reveal = send_calldata(copier, game, reveal["input"])
    assert copied_reveal["status"] == 0
    _, args = copier.game.decode_function_input(reveal["input"])
    values = (args["taskId"], args["root"], args["finalHash"], args["resultCid"], args["salt"])
    assert challenge_commitment(*values, honest.address) == bytes(committed.args["commitment"])
    error, details = revert_error(copier, game, reveal["input"], copied_reveal["blockNumber"])
    assert (error, bytes(details[0])) == ("ChallengeNotCommitted", challenge_commitment(*values, copier.address))

    # The revealed claim is public now. Committing it under the copier's own address comes too late: the honest
    # verifier revealed only once the claim's commit window had closed (so a defender's sybil cannot copy the
    # winning claim and be conceded to first).
    salt = b"\x07" * 32
    copier.transact(copier.game.functions.commitChallenge(challenge_commitment(*values[:4], salt, copier.address)))
    time.sleep(1.5)  # the reveal must land in a later block (the devnet mines every 0.5 s)
    own = copier.game.encode_abi("challengeOptimistic", args=[args["taskId"], args["root"], args["finalHash"], args["n"],
                                                              args["resultCid"], salt, args["proof0"], args["proofN"]])
    late = send_calldata(copier, game, own)
    assert late["status"] == 0
    error, details = revert_error(copier, game, own, late["blockNumber"])
    task_id, committed_at, claim_deadline = details
    assert error == "ChallengeCommittedLate" and task_id == TRAIN and committed_at > claim_deadline
    assert copier.w3.eth.get_block(opened.block)["timestamp"] > claim_deadline  # the honest reveal came after it
    net.wait_job(job_id, timeout=300)

    events = net.events()
    c = net.client()
    copies = [e for e in events if e.name == "ChallengeCommitted" and e.args["challenger"] == copier.address]
    assert [bytes(e.args["commitment"]) for e in copies][0] == bytes(committed.args["commitment"]) and len(copies) == 2
    disputes = [e.args for e in events if e.name == "DisputeOpened"]
    assert not any(copier.address in (d["challenger"], d["defender"]) for d in disputes)
    ours = [d for d in disputes if d["taskId"] == TRAIN]
    assert len(ours) == 1 and ours[0]["challenger"] == honest.address and ours[0]["defender"] == solver.address
    did = opened.args["disputeId"]
    resolved = [e.args for e in events if e.name == "DisputeResolved" and e.args["disputeId"] == did]
    assert len(resolved) == 1 and DisputeOutcome(resolved[0]["outcome"]) == DisputeOutcome.CHALLENGER_WINS
    assert resolved[0]["winner"] == honest.address and resolved[0]["loser"] == solver.address
    task = read(c, c.jobs, "getTask", TRAIN)
    assert TaskStatus(task.status) == TaskStatus.ACCEPTED and task.candidate == honest.address

    credited = {"Credited", "PaymentSent"}  # a dispute reward paid by the game / a task payment sent by the escrow
    paid = [e for e in events if e.name in credited and e.args["to"] == honest.address]
    assert {e.contract for e in paid} >= {"DisputeGame", "JobEscrow"}  # the game's reward and the task's payment
    assert not any(e.name in credited and e.args["to"] == copier.address for e in events)
    node = read(c, c.registry, "getNode", copier.address)
    rep = read(c, c.lens, "reputationOf", copier.address)
    assert (node.stake, node.locked) == (STAKE, 0)
    assert rep.totalSlashed == 0 and rep.disputesWon == rep.disputesLost == 0
    # no bond posted, nothing gained: the game, the panel and the escrow pay at once, so nothing is held for it either
    assert c.call(c.token.functions.balanceOf(copier.address)) == balance
    conserved(c)
