"""`verity job submit` and `ape run submit` fund the job's verification pot on a real devnet (anvil + js-ipfs +
`ape run deploy`): VerificationFees.potOf holds the amount and terms the options asked for, the submitter paid
escrow + pot, and a pot over the balance is refused before anything is spent. One fresh deployment (the `net`
fixture of tests/cli/conftest.py, on the session's shared devnet) serves every step, since each deploy is slow."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from eth_account import Account

from verity.chain.client import devnet_key
from verity.devnet.deploy import REPO, tool_env
from verity.submit.prepare import JobSpec, PotNotFunded, fund_pot_web3, plan_job

pytestmark = pytest.mark.integration
SUBMITTER, APE_SUBMITTER = 9, 8
ADDR = Account.from_key(devnet_key(SUBMITTER)).address
VRT = 10**18
SMALL = ["--shards", "2", "--rounds", "1", "--steps", "10", "-k", "10"]  # 3 tasks, escrow 1 x 2 x 3 = 6 VRT + the 1 VRT poster bond


def _pot(c, job_id: int) -> tuple:
    """potOf(jobId): (balance, feePerCheck, rateBps, checksPerTask, closedAt)."""
    return tuple(c.call(c.fees.functions.potOf(job_id)))


def test_submit_funds_the_verification_pot_with_the_options_terms_succeeds(net, verity, tmp_path):
    c = net.client()
    balance = lambda a=ADDR: c.call(c.token.functions.balanceOf(a))  # noqa: E731
    jobs, before = c.call(c.jobs.functions.jobCount()), balance()

    # Defaults: 0.1 x --payment per check, 2 checks per task, every verifier sampled.
    out = tmp_path / "job.json"
    res = verity("job", "submit", *SMALL, "--account", str(SUBMITTER), "--out", str(out))
    assert res.exit_code == 0, (res.stdout, res.stderr, res.exception)
    job = jobs + 1
    assert (f"posted job {job}: 7 VRT in escrow, 0.6 VRT verification pot (0.1 VRT x 2 checks x 3 tasks, every "
            f"verifier sampled), submitter {ADDR}") in res.stdout
    assert _pot(c, job) == (6 * 10**17, 10**17, 10_000, 2, 0)
    record = json.loads(out.read_text())
    assert record["job_id"] == job and record["verification_pot"] == 6 * 10**17 and record["escrow"] == 7 * VRT
    assert balance() == before - 7 * VRT - 6 * 10**17  # escrow and pot, nothing else
    assert c.call(c.token.functions.allowance(ADDR, c.fees.address)) == 0  # the pot was pulled in full
    assert balance(c.fees.address) == 6 * 10**17

    # Every term given: 0.25 VRT x 3 checks x 3 tasks, half the verifiers sampled.
    mid = balance()
    res = verity("job", "submit", *SMALL, "--account", str(SUBMITTER), "--verification-fee", "0.25",
                 "--checks-per-task", "3", "--fee-sample-rate", "0.5")
    assert res.exit_code == 0, (res.stdout, res.stderr, res.exception)
    assert "2.25 VRT verification pot (0.25 VRT x 3 checks x 3 tasks, verifiers sampled at 50%)" in res.stdout
    assert _pot(c, job + 1) == (225 * 10**16, 25 * 10**16, 5_000, 3, 0)
    assert balance() == mid - 7 * VRT - 225 * 10**16

    # --no-verification-fee: the escrow only, the pot stays unfunded.
    mid = balance()
    res = verity("job", "submit", *SMALL, "--account", str(SUBMITTER), "--no-verification-fee")
    assert res.exit_code == 0, (res.stdout, res.stderr, res.exception)
    assert f"posted job {job + 2}: 7 VRT in escrow, no verification pot, submitter" in res.stdout
    assert _pot(c, job + 2) == (0, 0, 0, 0, 0) and balance() == mid - 7 * VRT

    # The escrow fits the balance, escrow + pot does not: refused naming the fee, nothing spent or posted.
    mid, fee_funds = balance(), balance(c.fees.address)
    res = verity("job", "submit", *SMALL, "--account", str(SUBMITTER), "--verification-fee", str(mid / VRT))
    assert res.exit_code == 1, (res.stdout, res.stderr, res.exception)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --verification-fee: the escrow (7 VRT) and the "
                                                   "verification pot ("), res.stderr
    assert "uploaded" not in res.stdout and "posted job" not in res.stdout
    assert c.call(c.jobs.functions.jobCount()) == job + 2 and balance() == mid and balance(c.fees.address) == fee_funds

    # A job that is no longer Active cannot be funded: the real revert becomes PotNotFunded with the way to fund it.
    signer = net.client(SUBMITTER)
    signer.transact(signer.jobs.functions.cancelJob(job + 2))
    with pytest.raises(PotNotFunded, match=rf"^job {job + 2} is posted, but funding .*WrongJobStatus.*"
                                           rf"VerificationFees\.fund\({job + 2}, 600000000000000000, "
                                           rf"100000000000000000, 2, 10000\)"):
        fund_pot_web3(signer, job + 2, plan_job(JobSpec(shards=2, rounds=1, steps=10, k=10, verification_fee=0.1)))
    assert _pot(c, job + 2)[0] == 0

    # `ape run submit` takes the same options and funds the same way.
    ape_addr = Account.from_key(devnet_key(APE_SUBMITTER)).address
    ape_before, out = balance(ape_addr), tmp_path / "ape-job.json"
    env = {k: v for k, v in tool_env(None, net.env).items() if k != "APE_FOUNDRY_HOST"}
    cmd = [str(Path(sys.executable).parent / "ape"), "run", "submit", *SMALL, "--test-account", str(APE_SUBMITTER),
           "--verification-fee", "0.2", "--checks-per-task", "1", "--fee-sample-rate", "0.25", "--out", str(out)]
    proc = subprocess.run(cmd, cwd=REPO, env=env, text=True, timeout=300, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "0.6 VRT verification pot (0.2 VRT x 1 check x 3 tasks, verifiers sampled at 25%)" in proc.stdout
    record = json.loads(out.read_text())
    assert record["job_id"] == job + 3 and record["verification_pot"] == 6 * 10**17
    assert _pot(c, job + 3) == (6 * 10**17, 2 * 10**17, 2_500, 1, 0)
    assert balance(ape_addr) == ape_before - 7 * VRT - 6 * 10**17
