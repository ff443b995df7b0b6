"""`verity job list/show/watch/cancel/reclaim/download` run as a user would, against a real anvil +
js-ipfs devnet with freshly deployed contracts (fixtures from tests/nodes)."""
from __future__ import annotations

import pytest
from eth_account import Account

from node_builders import SUBMITTER
from verity.chain.client import devnet_key
from verity.chain.governance import apply_parameter
from verity.chain.protocol import DEVICE_CPU, POSTER_BOND, PROFILE_PORTABLE_F32, ROLE_SOLVER, escrow_for
from verity.chain.views import JobStatus, read

pytestmark = pytest.mark.integration
SUBMITTER_ADDR = Account.from_key(devnet_key(SUBMITTER)).address
TINY = dict(shards=1, rounds=1, steps=10, k=10)


def balance(c, addr: str) -> int:
    return c.call(c.token.functions.balanceOf(addr))


def one_line_error(result) -> str:
    """A refusal: exit 1, one `error:` line on stderr, no traceback."""
    assert result.exit_code == 1, (result.exit_code, result.stdout, result.stderr, result.exception)
    assert "Traceback" not in result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def warp(net, seconds: int) -> None:
    """Move chain time forward (this test module's own devnet)."""
    w3 = net.client().w3
    w3.provider.make_request("evm_increaseTime", [seconds])
    w3.provider.make_request("evm_mine", [])


def draw_round0(net, *job_ids: int) -> None:
    """Fulfil each job's round-0 draws as a node's keeper would (P4: assign() once the randomness is readable;
    no node process runs in these tests). A draw that finds nobody eligible reverts and leaves the task Open."""
    import time

    from verity.chain import TxFailed

    c = net.client(0)
    for job_id in job_ids:
        tid = c.call(c.jobs.functions.taskOf(job_id, 0, 0))
        rid = read(c, c.jobs, "getTask", tid).drawRequest
        for _ in range(40):  # the devnet mines a block a second; the value is readable 3 blocks after the request
            if c.call(c.randomness.functions.isReady(rid)):
                break
            time.sleep(0.25)
        try:
            c.transact(c.jobs.functions.assign(tid))
        except TxFailed:
            pass


def register_solver(net, account: int) -> str:
    c = net.client(account)
    c.transact(c.token.functions.approve(c.registry.address, 2**256 - 1))
    c.transact(c.registry.functions.register(ROLE_SOLVER, DEVICE_CPU, 4096, 100, PROFILE_PORTABLE_F32,
                                             "/ip4/127.0.0.1/tcp/4001"))
    c.transact(c.registry.functions.stake(1000 * 10**18))
    c.transact(c.registry.functions.heartbeat())  # registering is not a check-in: drawn only after one
    net.next_epoch()  # draws read the weights as their epoch began: drawable from the next one
    return c.address


def test_list_show_watch_and_cancel_an_unassigned_job_succeeds(net, verity):
    job_id = net.post(**TINY, replication=1)
    c = net.client()
    escrow = c.call(c.escrow.functions.escrowOf(job_id))  # JobEscrow holds every job's escrow
    # payment 1 × replication 1 × (1 shard + 1 agg) × 1 round + the 1 VRT poster bond
    assert escrow == 3 * 10**18 == escrow_for(10**18, 1, 1, 1)

    listed = verity("job", "list")
    assert listed.exit_code == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if line.startswith(f"│ {job_id} "))
    assert "active" in row and "3 VRT" in row and f"(--account {SUBMITTER})" in row

    shown = verity("job", "show", str(job_id))
    assert shown.exit_code == 0, shown.stderr
    assert "open: 1 slot(s) empty" in shown.stdout and "no eligible node: no node is registered" in shown.stdout
    assert f"cancel now (no slot was ever assigned): `verity job cancel {job_id} --account {SUBMITTER}` refunds 3 VRT" in shown.stdout

    watched = verity("job", "watch", str(job_id), "--timeout", "2", "--interval", "0.5")
    assert f"job {job_id} still active after 2 s" in one_line_error(watched)
    assert "no eligible node: no node is registered" in watched.stdout.split("global model per round")[-1]
    assert f"`verity job cancel {job_id} --account {SUBMITTER}`" in watched.stdout

    assert "pass --account N" in one_line_error(verity("job", "cancel", str(job_id)))
    wrong = one_line_error(verity("job", "cancel", str(job_id), "--account", "1"))
    assert f"cannot cancel job {job_id}: it was posted by {SUBMITTER_ADDR}" in wrong and f"--account {SUBMITTER}" in wrong

    before = balance(c, SUBMITTER_ADDR)
    done = verity("job", "cancel", str(job_id), "--account", str(SUBMITTER))
    assert done.exit_code == 0, done.stderr
    assert f"cancelled job {job_id}: refunded 3 VRT to {SUBMITTER_ADDR}" in done.stdout
    assert balance(c, SUBMITTER_ADDR) - before == escrow
    assert JobStatus(read(c, c.jobs, "getJob", job_id).status) == JobStatus.CANCELLED

    again = one_line_error(verity("job", "cancel", str(job_id), "--account", str(SUBMITTER)))
    assert again.endswith(f"cannot cancel job {job_id}: it is cancelled")
    reclaim = one_line_error(verity("job", "reclaim", str(job_id), "--account", str(SUBMITTER)))
    assert f"cannot reclaim job {job_id}: it is cancelled; reclaim returns the unspent escrow of a completed job" in reclaim
    assert "no job 99 on this deployment" in one_line_error(verity("job", "show", "99"))


def test_cancel_closes_the_verification_pot_and_reclaim_refunds_it_after_the_grace_succeeds(net, verity):
    """Issue 24: a cancelled job's verification pot stayed in VerificationFees (1.2 VRT in the trial) and no command
    returned it. `job cancel` now closes it and says when it can be refunded; `job reclaim` refunds it then."""
    job_id = net.post(**TINY, replication=1)
    c = net.client()
    sub = net.client(SUBMITTER)  # funded as `verity job submit` does after posting (fund_pot_web3)
    pot = 12 * 10**17  # the trial's 1.2 VRT
    sub.transact(sub.token.functions.approve(sub.fees.address, pot))
    sub.transact(sub.fees.functions.fund(job_id, pot, 10**17, 2, 1_000))
    assert c.call(c.fees.functions.potOf(job_id))[0] == pot
    done = verity("job", "cancel", str(job_id), "--account", str(SUBMITTER))
    assert done.exit_code == 0, done.stderr
    out = " ".join(done.stdout.split())
    assert f"verification pot: {pot / 1e18:g} VRT left, refundable from" in out
    assert f"`verity job reclaim {job_id} --account {SUBMITTER}`" in out
    shown = verity("job", "show", str(job_id))
    assert shown.exit_code == 0, shown.stderr
    assert f"returns {pot / 1e18:g} VRT left in the verification pot (in " in " ".join(shown.stdout.split())
    early = verity("job", "reclaim", str(job_id), "--account", str(SUBMITTER))
    assert early.exit_code == 0, early.stderr  # the pot's wait is news, not an error
    assert "refundable from" in early.stdout
    warp(net, c.call(c.fees.functions.refundableAt(job_id)) - c.now() + 1)
    before = balance(c, SUBMITTER_ADDR)
    paid = verity("job", "reclaim", str(job_id), "--account", str(SUBMITTER))
    assert paid.exit_code == 0, paid.stderr
    assert f"refunded the verification pot: {pot / 1e18:g} VRT to {SUBMITTER_ADDR}" in " ".join(paid.stdout.split())
    assert balance(c, SUBMITTER_ADDR) - before == pot
    again = one_line_error(verity("job", "reclaim", str(job_id), "--account", str(SUBMITTER)))
    assert f"cannot reclaim job {job_id}: it is cancelled" in again  # nothing left: the escrow refusal stands


def test_cancel_waits_for_a_starved_slot_and_offline_late_replicas_show_succeeds(net, verity):
    owner, c = net.client(0), net.client()
    apply_parameter(owner, owner.jobs, owner.jobs.functions.setAssignmentTimeout(120))  # through the Timelock
    solo = register_solver(net, 1)  # registered and staked, but no process runs it
    starved = net.post(**TINY, replication=2)                          # slot 1: solo; slot 2: nobody left
    waiting = net.post(**TINY, replication=1, execution_window=3600)   # solo, never runs
    late = net.post(**TINY, replication=1, execution_window=60)        # solo, will miss its deadline
    draw_round0(net, starved, waiting, late)

    shown = verity("job", "show", str(starved)).stdout
    assert "no eligible node: the 1 eligible node(s) hold or were banned from this task" in shown
    assert "cancel: allowed in" in shown and "if task" in shown
    refused = one_line_error(verity("job", "cancel", str(starved), "--account", str(SUBMITTER)))
    assert f"cannot cancel job {starved}: allowed in" in refused and "a slot must stay empty for 120 s" in refused

    warp(net, 700)  # past the liveness window (600 s), the assignment timeout and `late`'s deadline
    shown = verity("job", "show", str(waiting)).stdout
    assert f"drawn node {solo[:8]}… offline (last seen" in shown and f"waiting for {solo[:8]}…'s result" in shown
    tid = c.call(c.jobs.functions.taskOf(late, 0, 0))
    owner.transact(owner.jobs.functions.reportLate(tid, 0))  # what any node's keeper does
    shown = verity("job", "show", str(late)).stdout
    assert f"{solo[:8]}…:late −1 VRT" in shown  # 10 % of the 10 VRT task stake, burned
    assert "no eligible node: none of the 1 registered node(s) is a live solver" in shown
    assert "(1 offline: no heartbeat for 10 min 00 s)" in shown

    refused = one_line_error(verity("job", "cancel", str(waiting), "--account", str(SUBMITTER)))
    assert "every task of round 1 has its nodes" in refused
    locked = read(c, c.registry, "getNode", solo).locked
    before = balance(c, SUBMITTER_ADDR)
    done = verity("job", "cancel", str(starved), "--account", str(SUBMITTER))
    assert done.exit_code == 0, done.stderr
    assert balance(c, SUBMITTER_ADDR) - before == 4 * 10**18 + POSTER_BOND  # 1 × 2 replicas × 2 tasks × 1 round + bond
    assert locked - read(c, c.registry, "getNode", solo).locked == 10 * 10**18  # solo's slot released


@pytest.mark.slow
def test_completed_job_plots_downloads_with_card_and_reclaims_the_bond_once(net, verity, tmp_path):
    for i in (1, 2):
        net.start_node(f"solver-{i}", i)
    net.wait_registered(2)
    job_id = net.post(shards=1, rounds=2, steps=10, k=5, replication=2)
    job = net.wait_job(job_id)

    shown = verity("job", "show", str(job_id), "--plot", str(tmp_path / "loss.png"))
    assert shown.exit_code == 0, shown.stderr
    assert f"wrote {tmp_path / 'loss.png'} (2 round(s), 6 checkpoint(s))" in shown.stdout  # steps 0, 5, 10 of each round
    assert (tmp_path / "loss.png").stat().st_size > 10_000
    rounds = [line.split("│")[1].strip() for line in shown.stdout.split("global model per round")[1].splitlines()
              if line.startswith("│")]
    assert rounds == ["1", "2"]

    out = tmp_path / "dl" / "model.safetensors"
    got = verity("job", "download", str(job_id), "-o", str(out))
    assert got.exit_code == 0, got.stderr
    card = (tmp_path / "dl" / "model.card.md").read_text()
    from verity.cid import digest_to_cid

    assert f"| manifest CID | `{digest_to_cid(job.manifestCid)}` |" in card
    assert f"`0x{bytes(job.modelHash).hex()}`" in card and "(round 2, held-out eval shard)" in card
    assert (tmp_path / "dl" / "model_load.py").is_file() and (tmp_path / "dl" / "model.config.json").is_file()

    bond = verity("job", "reclaim", str(job_id), "--account", str(SUBMITTER))  # every task paid: the poster bond
    assert bond.exit_code == 0 and f"reclaimed 1 VRT of job {job_id}" in " ".join(bond.stdout.split()), bond.stdout
    nothing = one_line_error(verity("job", "reclaim", str(job_id), "--account", str(SUBMITTER)))
    assert f"cannot reclaim job {job_id}: no unspent escrow is left" in nothing
    watched = verity("job", "watch", str(job_id), "--timeout", "5")
    assert watched.exit_code == 0 and f"job {job_id}: completed" in watched.stdout
