"""Why a task waits, when its job may be cancelled, and what the submitter can do — computed
from chain facts a `JobReader` collected (no chain access here, so every rule is unit-testable).

The cancel rule mirrors `JobRegistry.cancelJob`: allowed while the job is active and (a) no slot was
ever assigned or (b) a task of the current round has had an empty slot for over `assignmentTimeout`;
never while a task of the round is Contested or has open disputes against its candidate.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from verity.chain.protocol import SELECTION_EPOCH_BLOCKS
from verity.errors import VerityError
from verity.units import duration

WAITING = ("open", "assigned", "revealed", "contested")
EMPTY_SLOT = ("none", "late", "slashed")  # JobRegistry._isEmpty: the slot is drawn again


countdown = duration  # deadlines and windows read as durations


def short(addr: str, names: dict | None = None) -> str:
    return (names or {}).get(addr) or addr[:8] + "…"


@dataclass
class NodeFacts:
    """What the registry says about the nodes that matter for one job, read at `now`."""
    registered: int = 0
    liveness_window: int = 600
    last_seen: dict = field(default_factory=dict)   # address -> lastSeen of drawn nodes
    eligible: list = field(default_factory=list)    # addresses passing isEligible for the job's requirements
    offline: int = 0                                # registered nodes past the liveness window
    banned: dict = field(default_factory=dict)      # task id -> addresses that may not take it again


@dataclass
class CancelRule:
    allowed: bool
    wait_s: int | None   # seconds until it may become allowed (None: not by waiting alone)
    why: str


def _replica_wait(row, r, now: int, nodes: NodeFacts, replication: int, names) -> str:
    who = short(r.node, names)
    if r.status == "committed" and not r.deadline:
        return f"{who} committed; waiting for the other replica to commit"
    what = {"assigned": "commit" if replication > 1 else "result", "committed": "reveal"}.get(r.status)
    if what is None:
        return ""
    seen = nodes.last_seen.get(r.node)
    offline = seen is not None and now > seen + nodes.liveness_window
    gone = f"drawn node {who} offline (last seen {countdown(now - seen)} ago); " if offline else ""
    if r.deadline > now:
        then = ", then it is reported late and the slot drawn again" if offline else ""
        return f"{gone}waiting for {who}'s {what}, {countdown(r.deadline - now)} left{then}"
    return f"{gone}{who}'s {what} is {countdown(now - r.deadline)} overdue; any node may reportLate it and redraw the slot"


def task_reason(row, now: int, nodes: NodeFacts, replication: int, stake_vrt: float = 0.0,
                names: dict | None = None) -> str:
    """One line saying why a waiting task has not moved on, and what it waits for."""
    current = [r for r in row.replicas if r.current]
    if row.status == "open":
        held = {r.node for r in current if r.status not in EMPTY_SLOT}
        excluded = held | set(nodes.banned.get(row.task_id, ()))
        free = [n for n in nodes.eligible if n not in excluded]
        empty = sum(1 for r in current if r.status in EMPTY_SLOT) or replication - len(held)
        since = f"{empty} slot(s) empty for {countdown(now - row.open_since)}" if row.open_since else f"{empty} slot(s) empty"
        drawn = [p for r in current if r.status in ("assigned", "committed")
                 and (p := _replica_wait(row, r, now, nodes, replication, names))]
        if free:
            why = (f"{len(free)} eligible node(s), waiting for a node to call assign() (a node is drawn from the "
                   f"selection epoch after it registered or changed its stake: at most {SELECTION_EPOCH_BLOCKS} blocks)")
        elif nodes.registered == 0:
            why = "no eligible node: no node is registered"
        elif not nodes.eligible:
            off = f" ({nodes.offline} offline: no heartbeat for {countdown(nodes.liveness_window)})" if nodes.offline else ""
            why = (f"no eligible node: none of the {nodes.registered} registered node(s) is a live solver with the job's "
                   f"device, memory, profile and {stake_vrt:g} VRT free stake{off}")
        else:
            why = f"no eligible node: the {len(nodes.eligible)} eligible node(s) hold or were banned from this task"
        return "; ".join([since, why, *drawn, *declined_notes(row, names)])
    if row.status == "assigned":
        parts = [p for r in current if (p := _replica_wait(row, r, now, nodes, replication, names))]
        return "; ".join([*parts, *declined_notes(row, names)]) or "all replicas in; waiting for the task to settle"
    if row.status == "revealed":
        return _revealed_reason(row, now, names)
    if row.status == "contested":
        return f"in dispute {row.dispute}".strip()
    return ""


def declined_notes(row, names: dict | None = None, most: int = 3) -> list[str]:
    """`declined by solver-1: time 181/116 s` for each node that declined the task (their own notes, from the
    ReplicaDeclined events), the last `most` of them, and how many more."""
    gone = [r for r in row.replicas if r.status == "declined"]
    out = [f"declined by {short(r.node, names)}: {r.note or 'no reason given'}" for r in gone[-most:]]
    if len(gone) > most:
        out.insert(0, f"{len(gone) - most} more decline(s)")
    return out


def _revealed_reason(row, now: int, names) -> str:
    """A candidate result waiting out its challenge window (v2: replicated agreement too), then finalize()
    once challenges committed in time can no longer be revealed and no dispute against it is open."""
    whose = f"result of {short(row.candidate, names)} (it won a dispute)" if row.candidate else "result"
    disputes, grace = row.open_disputes, row.reveal_grace
    if now <= row.challenge_deadline:
        what = f"challenge window of the {whose}, {countdown(row.challenge_deadline - now)} left"
    elif now <= row.challenge_deadline + grace:
        what = (f"challenge window of the {whose} closed; challenges committed in time may be revealed for "
                f"{countdown(row.challenge_deadline + grace - now)}")
    elif not disputes:
        return f"challenge window of the {whose} over; waiting for a node to call finalize()"
    else:
        what = f"challenge window of the {whose} over"
    if disputes:
        what += f"; {disputes} dispute(s) against it open ({row.dispute})" if row.dispute else \
            f"; {disputes} dispute(s) against it open"
    return what


def cancel_rule(rep) -> CancelRule:
    """Whether `cancelJob` would succeed in the next block (JobRegistry.cancelJob's rule)."""
    if rep.status != "active":
        return CancelRule(False, None, f"the job is {rep.status}")
    now, timeout = rep.now, rep.assignment_timeout
    current = [t for t in rep.tasks if t.round == rep.current_round]
    # JobRegistry.cancelJob: a Contested task, or a Revealed one with open disputes, must settle first
    pending = [t for t in current if t.status == "contested" or (t.status == "revealed" and t.open_disputes)]
    if pending:
        t = pending[0]
        what = "a dispute" if t.status == "contested" else f"{t.open_disputes} open dispute(s)"
        return CancelRule(False, None, f"task {t.task_id} is in {what}; it must settle first")
    if not rep.ever_assigned:
        return CancelRule(True, 0, "no slot was ever assigned")
    opened = sorted((t for t in current if t.status == "open" and t.open_since), key=lambda t: t.open_since)
    if opened:
        t = opened[0]
        # cancelJob needs block.timestamp > openSince + timeout; the next block is at least now + 1
        if now >= t.open_since + timeout:
            return CancelRule(True, 0, f"task {t.task_id} has had an empty slot for {countdown(now - t.open_since)}")
        wait = t.open_since + timeout - now
        return CancelRule(False, wait, f"allowed in {countdown(wait)} if task {t.task_id} stays unassigned "
                                       f"(a slot must stay empty for {timeout} s)")
    return CancelRule(False, None, f"every task of round {rep.current_round + 1} has its nodes; cancelling is allowed "
                                   f"only before any assignment or after a slot stays empty for {timeout} s")


# The first 20 accounts of the devnet mnemonic (verity.chain.client.DEVNET_MNEMONIC, m/44'/60'/0'/0/i: anvil's and
# ape's test accounts), checksummed, in index order. Deriving them in pure Python costs ~380 ms a process, paid by the
# first `job show`/`job list` on chain 31337 for its `--account N` hints; tests/cli/test_job_units.py derives them and
# checks this table.
DEVNET_ADDRESSES = (
    "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",  # 0
    "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",  # 1
    "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC",  # 2
    "0x90F79bf6EB2c4f870365E785982E1f101E93b906",  # 3
    "0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65",  # 4
    "0x9965507D1a55bcC2695C58ba16FB37d819B0A4dc",  # 5
    "0x976EA74026E726554dB657fA54763abd0C3a0aa9",  # 6
    "0x14dC79964da2C08b23698B3D3cc7Ca32193d9955",  # 7
    "0x23618e81E3f5cdF7f54C3d65f7FBc0aBf5B21E8f",  # 8
    "0xa0Ee7A142d267C1f36714E4a8F75612F20a79720",  # 9
    "0xBcd4042DE499D14e55001CcbB24a551F3b954096",  # 10
    "0x71bE63f3384f5fb98995898A86B02Fb2426c5788",  # 11
    "0xFABB0ac9d68B0B445fB7357272Ff202C5651694a",  # 12
    "0x1CBd3b2770909D4e10f157cABC84C7264073C9Ec",  # 13
    "0xdF3e18d64BC6A983f673Ab319CCaE4f1a57C7097",  # 14
    "0xcd3B766CCDd6AE721141F452C550Ca635964ce71",  # 15
    "0x2546BcD3c84621e976D8185a91A922aE77ECEc30",  # 16
    "0xbDA5747bFD65F08deb54cb465eB87D40e51B197E",  # 17
    "0xdD2FD4581271e230360230F9337D5c0430Bf44C0",  # 18
    "0x8626f6940E2eb28930eFb4CeF49B2d1F2C9C1199",  # 19
)


def derive_devnet_accounts(count: int) -> dict:
    """address -> index of the first `count` devnet test accounts, derived from the mnemonic (slow: ~19 ms each)."""
    from eth_account import Account

    from verity.chain.client import devnet_key

    return {Account.from_key(devnet_key(i)).address: i for i in range(count)}


@lru_cache(maxsize=None)
def devnet_accounts(count: int = 20) -> dict:
    """address -> index of the devnet test accounts (the public mnemonic; for hints only). Up to 20 from
    `DEVNET_ADDRESSES`; more are derived."""
    if 0 <= count <= len(DEVNET_ADDRESSES):
        return {a: i for i, a in enumerate(DEVNET_ADDRESSES[:count])}
    return derive_devnet_accounts(count)


def signer_hint(address: str, chain_id: int | None = None) -> str:
    """`--account N` when `address` is a devnet test account (chain 31337), else `--key-file FILE`."""
    if chain_id in (None, 31337):
        idx = devnet_accounts().get(address)
        if idx is not None:
            return f"--account {idx}"
    return "--key-file FILE"


def advice(rep) -> list[str]:
    """What a job waits for and what its submitter can do about it, one line each (for `job watch`,
    `ape run submit --wait` and `job show`)."""
    lines = [f"task {t.task_id} (round {t.round + 1}, {t.kind}) {t.status}: {t.reason}"
             for t in rep.tasks if t.status in WAITING and t.reason and t.round == rep.current_round]
    escrow = f"{rep.escrow / 1e18:g} VRT"
    hint = signer_hint(rep.submitter, rep.chain_id) if rep.submitter else "--account N"
    if rep.status == "active":
        rule = rep.cancel or cancel_rule(rep)
        if rule.allowed:
            lines.append(f"cancel now ({rule.why}): `verity job cancel {rep.job_id} {hint}` refunds {escrow}")
        elif rule.wait_s is not None:
            lines.append(f"cancel: {rule.why}; then `verity job cancel {rep.job_id} {hint}` refunds {escrow}")
        else:
            lines.append(f"cannot cancel now: {rule.why}")
    elif rep.status == "completed" and rep.escrow:
        lines.append(f"`verity job reclaim {rep.job_id} {hint}` returns {escrow} of unspent escrow")
    if rep.status != "active" and getattr(rep, "pot", 0):
        when = ("now" if rep.pot_refundable_at and rep.now >= rep.pot_refundable_at
                else f"in {rep.pot_refundable_at - rep.now} s" if rep.pot_refundable_at
                else "after the fee claim grace it starts")
        lines.append(f"`verity job reclaim {rep.job_id} {hint}` returns {rep.pot / 1e18:g} VRT left in the "
                     f"verification pot ({when})")
    return lines


class JobActionRefused(VerityError):
    """`cancel` or `reclaim` would revert; the message says why, from the chain's facts."""

    def __init__(self, action: str, job_id: int, reason: str):
        self.action, self.job_id, self.reason = action, job_id, reason
        super().__init__(f"cannot {action} job {job_id}: {reason}")


def refusal(action: str, rep, error: str, caller: str) -> JobActionRefused:
    """Explain a reverted cancelJob / reclaimEscrow (`error`: the decoded custom error's name)."""
    hint = signer_hint(rep.submitter, rep.chain_id)
    escrow = f"{rep.escrow / 1e18:g} VRT"
    if error == "NotSubmitter":
        reason = f"it was posted by {rep.submitter}, not {caller}; sign as the submitter ({hint})"
    elif action == "cancel" and error == "JobNotActive":
        reason = f"it is {rep.status}" + (f"; `verity job reclaim {rep.job_id} {hint}` returns {escrow} of unspent escrow"
                                          if rep.status == "completed" and rep.escrow else "")
    elif action == "cancel":
        rule = cancel_rule(rep)
        reason = rule.why if rule.allowed is False else f"{error} (the chain refused; try again)"
    elif error == "JobNotCompleted":
        reason = f"it is {rep.status}; reclaim returns the unspent escrow of a completed job" + \
            (f" (to stop an active job: `verity job cancel {rep.job_id} {hint}`)" if rep.status == "active" else "")
    elif error == "NothingToWithdraw":
        reason = "no unspent escrow is left (every payment of the job was paid out, burned or refunded)"
    else:
        reason = error
    return JobActionRefused(action, rep.job_id, reason)
