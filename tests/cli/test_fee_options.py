"""Verification-fee options of `verity job submit` and `ape run submit` (P5: a job poster funds a pot so
verifiers are paid for looking): their checks, the pot formula, the funds check, and what the submitter is
told when funding fails after the job is posted. No chain: these run on every machine."""
from __future__ import annotations

import json
import os
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from verity.chain.client import TxFailed
from verity.submit.prepare import (FeeTerms, JobSpec, PotNotFunded, check_funds, fund_pot_web3, plan_job,
                           verification_pot)
from verity.submit.options import BadJobSpec, fee_rate_bps, to_wei, validate_spec, verification_fee_of

VRT = 10**18
SMALL = dict(shards=2, rounds=1, steps=10, k=10)  # 3 tasks: two TRAIN and the round's AGGREGATE


# ---------------------------------------------------------------- option checks


BAD = [  # (JobSpec fields, the option the error must name)
    (dict(verification_fee=0.0), "--verification-fee"),
    (dict(verification_fee=-0.5), "--verification-fee"),
    (dict(verification_fee=float("nan")), "--verification-fee"),
    (dict(verification_fee=float("inf")), "--verification-fee"),
    (dict(verification_fee=1e-19), "--verification-fee"),  # below one wei
    (dict(checks_per_task=0), "--checks-per-task"),
    (dict(checks_per_task=9), "--checks-per-task"),  # VerificationFees.MAX_CHECKS is 8
    (dict(checks_per_task=-1, verification_fee=None), "--checks-per-task"),  # a typo even without a pot
    (dict(fee_sample_rate=0.0), "--fee-sample-rate"),
    (dict(fee_sample_rate=1.01), "--fee-sample-rate"),
    (dict(fee_sample_rate=-0.5), "--fee-sample-rate"),
    (dict(fee_sample_rate=float("nan")), "--fee-sample-rate"),
    (dict(fee_sample_rate=0.00004), "--fee-sample-rate"),  # rounds to 0 basis points: fund() would revert
]


@pytest.mark.parametrize("fields, option", BAD, ids=[f"{k}={v}" for f, _ in BAD for k, v in list(f.items())[:1]])
def test_fee_option_out_of_range_names_the_option_fails(fields, option):
    spec = JobSpec(**{**SMALL, "verification_fee": 0.1, **fields})
    with pytest.raises(BadJobSpec, match=f"^{option}: "):
        validate_spec(spec)
    with pytest.raises(BadJobSpec, match=f"^{option}: "):
        plan_job(spec)  # the check runs before shards or manifest are built, let alone uploaded


@pytest.mark.parametrize("fields", [dict(checks_per_task=1), dict(checks_per_task=8), dict(fee_sample_rate=1.0),
                                    dict(fee_sample_rate=0.0001), dict(verification_fee=1e-18), dict(verification_fee=None)])
def test_fee_option_at_its_bounds_is_accepted_succeeds(fields):
    validate_spec(JobSpec(**{**SMALL, "verification_fee": 0.1, **fields}))


def test_verification_fee_defaults_to_a_tenth_of_the_payment_succeeds():
    assert verification_fee_of(1.0, None, False) == 0.1 and to_wei(verification_fee_of(1.0, None, False)) == 10**17
    assert to_wei(verification_fee_of(1.5, None, False)) == 15 * 10**16
    assert verification_fee_of(1.0, 0.3, False) == 0.3  # given: used as is
    assert verification_fee_of(1.0, None, True) is None  # --no-verification-fee: no pot


def test_no_verification_fee_with_a_fee_is_refused_fails():
    with pytest.raises(BadJobSpec, match="^--no-verification-fee: give --verification-fee or --no-verification-fee"):
        verification_fee_of(1.0, 0.2, True)


def test_fee_sample_rate_is_stored_in_basis_points_succeeds():
    assert [fee_rate_bps(r) for r in (1.0, 0.5, 0.25, 0.3333, 0.0001)] == [10_000, 5_000, 2_500, 3_333, 1]


def test_verity_job_submit_refuses_both_fee_flags_before_any_chain_fails(tmp_path):
    """Nothing listens at the configured RPC URL: the option error comes first, as one line."""
    from verity.cli import app

    env = {**os.environ, "VERITY_RPC_URL": "http://127.0.0.1:1", "VERITY_STATE_DIR": str(tmp_path / "state"),
           "VERITY_DEVNET_DIR": str(tmp_path / "devnet"), "COLUMNS": "400", "NO_COLOR": "1"}
    result = CliRunner().invoke(app, ["job", "submit", "--verification-fee", "0.2", "--no-verification-fee"], env=env)
    assert result.exit_code == 1, (result.stdout, result.stderr, result.exception)
    assert result.stderr.strip().splitlines() == [
        "error: --no-verification-fee: give --verification-fee or --no-verification-fee, not both"]


# ---------------------------------------------------------------- the pot


def test_pot_pays_every_fee_slot_of_every_task_succeeds():
    assert verification_pot(10**17, 2, 4, 3) == 10**17 * 2 * (4 + 1) * 3
    assert verification_pot(7, 1, 1, 1) == 7 * 1 * 2 * 1
    assert verification_pot(5, 8, 32, 2) == 5 * 8 * 33 * 2


def test_prepared_job_fee_terms_follow_the_options_succeeds():
    p = plan_job(JobSpec(shards=3, rounds=2, steps=10, k=10, payment=2.0, verification_fee=0.25, checks_per_task=3,
                         fee_sample_rate=0.5))
    assert p.fee_terms() == FeeTerms(amount=25 * 10**16 * 3 * (3 + 1) * 2, feePerCheck=25 * 10**16, checksPerTask=3,
                                     rateBps=5_000)
    assert p.pot() == 6 * VRT and p.escrow() == 2 * VRT * 2 * 4 * 2 + VRT  # the pot is on top of the escrow (+ bond)
    assert p.pot_text() == ("6 VRT verification pot (0.25 VRT x 3 checks x 8 tasks, verifiers sampled at 50%)")


def test_prepared_job_without_a_fee_funds_no_pot_succeeds():
    p = plan_job(JobSpec(**SMALL))  # library default: no pot unless asked
    assert p.fee_terms() is None and p.pot() == 0 and p.pot_text() == "no verification pot"
    one = plan_job(JobSpec(**SMALL, verification_fee=0.1, checks_per_task=1))
    assert one.pot_text() == "0.3 VRT verification pot (0.1 VRT x 1 check x 3 tasks, every verifier sampled)"
    q = plan_job(JobSpec(**SMALL, verification_fee=0.1))
    assert q.pot_text() == "0.6 VRT verification pot (0.1 VRT x 2 checks x 3 tasks, every verifier sampled)"


# ---------------------------------------------------------------- funds check


def test_check_funds_counts_the_pot_on_top_of_the_escrow_fails():
    # escrow 1 x 2 x 3 = 6 VRT + the 1 VRT poster bond, pot 0.5 x 2 x 3 = 3 VRT
    p = plan_job(JobSpec(**SMALL, verification_fee=0.5))
    assert (p.escrow(), p.pot()) == (7 * VRT, 3 * VRT)
    check_funds(10 * VRT, p, "0xabc")  # exactly enough
    with pytest.raises(BadJobSpec, match=r"^--verification-fee: the escrow \(7 VRT\) and the verification pot "
                                         r"\(3 VRT\) come to 10 VRT but 0xabc holds 9.5 VRT .*--no-verification-fee"):
        check_funds(10 * VRT - VRT // 2, p, "0xabc")
    with pytest.raises(BadJobSpec, match=r"^--payment: the escrow is 7 VRT \(plus a 3 VRT verification pot\) but "
                                         r"0xabc holds 6 VRT "):
        check_funds(6 * VRT, p, "0xabc")


# ---------------------------------------------------------------- funding after postJob


class _FakeChain:
    """Records what fund_pot_web3 sends; `fail_on` names a call that reverts (unit test only)."""

    def __init__(self, fail_on: str | None = None):
        self.sent, self.fail_on = [], fail_on
        self.fees = SimpleNamespace(address="0xFee5", functions=SimpleNamespace(
            fund=lambda *a: ("fund", *a)))
        self.token = SimpleNamespace(functions=SimpleNamespace(approve=lambda *a: ("approve", *a),
                                                               balanceOf=lambda a: ("balanceOf", a)))
        self.address = "0xSubmitter"

    def call(self, fn):
        assert fn == ("balanceOf", self.address)
        return 10**6 * VRT

    def transact(self, call):
        if call[0] == self.fail_on:
            raise TxFailed(call[0], "WrongJobStatus", (7, 3))
        self.sent.append(call)
        return {"status": 1}


def test_fund_pot_approves_then_funds_with_the_terms_succeeds():
    p = plan_job(JobSpec(**SMALL, verification_fee=0.1, checks_per_task=4, fee_sample_rate=0.2))
    chain = _FakeChain()
    assert fund_pot_web3(chain, 7, p) == 10**17 * 4 * 3
    assert chain.sent == [("approve", "0xFee5", 10**17 * 4 * 3), ("fund", 7, 10**17 * 4 * 3, 10**17, 4, 2_000)]


def test_fund_pot_without_a_fee_sends_nothing_succeeds():
    chain = _FakeChain()
    assert fund_pot_web3(chain, 7, plan_job(JobSpec(**SMALL))) == 0 and chain.sent == []


@pytest.mark.parametrize("fail_on", ["approve", "fund"])
def test_fund_pot_failure_says_the_job_is_posted_and_how_to_fund_it_fails(fail_on):
    p = plan_job(JobSpec(**SMALL, verification_fee=0.1))
    with pytest.raises(PotNotFunded) as info:
        fund_pot_web3(_FakeChain(fail_on), 7, p)
    msg = str(info.value)
    assert info.value.job_id == 7 and msg.startswith("job 7 is posted, but funding its verification pot failed (")
    assert "WrongJobStatus" in msg and "runs without verification fees" in msg
    assert f"approve {6 * 10**17} wei of VRT to VerificationFees at 0xFee5" in msg
    assert f"VerificationFees.fund(7, {6 * 10**17}, {10**17}, 2, 10000)" in msg


def test_verity_job_submit_unfunded_pot_exits_1_with_the_posted_job_id_fails(monkeypatch, tmp_path):
    """The CLI's branch for a pot that failed after postJob: the job line, the record, one error line, exit 1.
    The chain and IPFS are stand-ins (unit test); tests/cli/test_submit_fees_devnet.py funds a real pot."""
    import verity.chain.client
    import verity.submit.prepare
    from verity.cli import app
    from verity.submit.fit import NetworkFit

    chain = _FakeChain(fail_on="fund")
    monkeypatch.setattr(verity.chain.client, "connect_chain", lambda url, key: chain)
    monkeypatch.setattr(verity.submit.prepare, "fees_address_web3", lambda c, p: c.fees.address)
    monkeypatch.setattr(verity.submit.prepare, "upload_job", lambda p, storage: p)
    monkeypatch.setattr(verity.submit.prepare, "post_job_web3", lambda c, p: 7)
    monkeypatch.setattr(verity.submit.prepare, "check_chain_web3", lambda c, p: NetworkFit(1, 4096, 1))
    env = {**os.environ, "VERITY_RPC_URL": "http://127.0.0.1:1", "VERITY_STATE_DIR": str(tmp_path / "state"),
           "VERITY_DEVNET_DIR": str(tmp_path / "devnet"), "COLUMNS": "400", "NO_COLOR": "1"}
    out = tmp_path / "job.json"
    result = CliRunner().invoke(app, ["job", "submit", "--shards", "2", "--rounds", "1", "--steps", "10", "-k", "10",
                                      "--out", str(out), "--wait"], env=env)
    assert result.exit_code == 1, (result.stdout, result.stderr, result.exception)
    assert "posted job 7: 7 VRT in escrow, verification pot NOT funded, submitter 0xSubmitter" in result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: job 7 is posted, but funding its verification pot failed")
    assert "VerificationFees.fund(7, 600000000000000000, 100000000000000000, 2, 10000)" in lines[0]
    assert json.loads(out.read_text())["verification_pot"] == 0  # the record says what was funded: nothing
    assert chain.sent == [("approve", "0xFee5", 6 * 10**17)]  # --wait was not followed after the failure
