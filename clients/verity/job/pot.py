"""A job's verification pot (VerificationFees): what the submitter funded for blind checks and what is left of it.

The contract returns the rest only to the submitter, and only after a grace in which fees earned before the job
ended can still be claimed: `close` starts that grace once the job is no longer active (anyone may call it), and
`refund` pays out after `refundableAt`. `verity job cancel` closes the pot with the cancel; `verity job reclaim`
closes it if needed and refunds it once it can (issue 24: a cancelled job's pot used to stay in the contract).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from verity.chain.protocol import JobStatus
from verity.chain.views import read


@dataclass(frozen=True)
class Pot:
    balance: int       # wei left in the pot
    closed_at: int     # when `close` ran (0: not yet)
    refundable_at: int  # earliest `refund` (0 while not closed)


def pot_of(c, job_id: int) -> Pot | None:
    """The job's pot, or None when the deployment has no VerificationFees or the job was posted without one."""
    if "VerificationFees" not in c.contracts:
        return None
    balance, fee, _rate, _checks, closed_at = c.call(c.fees.functions.potOf(job_id))
    if int(fee) == 0:
        return None
    return Pot(int(balance), int(closed_at), int(c.call(c.fees.functions.refundableAt(job_id))))


def settle_pot(c, job_id: int, hint: str) -> str | None:
    """Closes the pot of a job that is no longer active and refunds it to the caller (the submitter) once its claim
    grace is over. Returns a line for the user, or None when there is nothing to say (no pot, an active job, or an
    empty pot already closed). `hint`: how to sign again (`--account N` / `--key-file FILE`)."""
    pot = pot_of(c, job_id)
    if pot is None or (pot.balance == 0 and pot.closed_at):
        return None
    job = read(c, c.jobs, "getJob", job_id)
    if JobStatus(job.status) == JobStatus.ACTIVE:
        return None
    if not pot.closed_at:
        c.transact(c.fees.functions.close(job_id))
        pot = pot_of(c, job_id)
    if str(job.submitter).lower() != c.address.lower():
        return None  # only the submitter is refunded: the caller's own refusal (NotSubmitter) says so
    amount = f"{pot.balance / 1e18:g} VRT"
    wait = pot.refundable_at - c.now()
    if wait > 0:
        at = time.strftime("%H:%M:%S", time.localtime(time.time() + wait))
        return (f"verification pot: {amount} left, refundable from {at} (in {wait} s: fees earned before the job "
                f"ended can be claimed until then): `verity job reclaim {job_id} {hint}`")
    c.transact(c.fees.functions.refund(job_id))
    return f"refunded the verification pot: {amount} to {c.address}"
