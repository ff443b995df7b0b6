"""What `verity job list` reads from the event index instead of asking the chain job by job: each job's submitter,
status, current round and the escrow JobEscrow still holds for it. A job's rounds, shards, replication, payment and
post time are in no event (the manifest's numbers live in the job's record; a block's time is not in its logs), so
the list still reads `getJob` for each row it shows."""
from __future__ import annotations

from dataclasses import dataclass

# the events that move a job's status, round or escrow (JobRegistry's and JobEscrow's; every one carries jobId)
JOB_EVENTS = ("JobPosted", "RoundAdvanced", "JobCompleted", "JobCancelled", "JobFailed",
              "EscrowDeposited", "PaymentSent", "EscrowBurned", "EscrowRefunded")
_ENDED = {"JobCompleted": "completed", "JobCancelled": "cancelled", "JobFailed": "failed"}


@dataclass
class JobLine:
    job_id: int
    submitter: str = ""
    status: str = "active"
    round: int = 0      # the current round, from 0 (RoundAdvanced)
    escrow: int = 0     # wei JobEscrow holds for the job: deposits less payments and burns, 0 once refunded


def job_lines(events) -> dict[int, JobLine]:
    """job id -> its JobLine, from its JOB_EVENTS in chain order (other events are skipped)."""
    out: dict[int, JobLine] = {}
    for ev in events:
        if ev.name not in JOB_EVENTS:
            continue
        a = ev.args
        line = out.setdefault(int(a["jobId"]), JobLine(int(a["jobId"])))
        if ev.name == "JobPosted":
            line.submitter = a["submitter"]
        elif ev.name == "RoundAdvanced":
            line.round = int(a["round"])
        elif ev.name in _ENDED:
            line.status = _ENDED[ev.name]
        elif ev.name == "EscrowDeposited":
            line.escrow += int(a["amount"])
        elif ev.name in ("PaymentSent", "EscrowBurned"):
            line.escrow -= int(a["amount"])
        else:  # EscrowRefunded: JobEscrow.refund pays out all that is left
            line.escrow = 0
    return out
