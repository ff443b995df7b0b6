"""What `verity node status` shows about one account, read from the chain, and the unbonding rule
`node unstake --withdraw` checks before it sends anything."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from types import SimpleNamespace

from verity.chain import ChainClient
from verity.chain.protocol import ROLE_REFEREE, ROLE_SOLVER, ROLE_VERIFIER, region_name
from verity.chain.views import read
from verity.errors import VerityError
from verity.units import duration, vrt

ROLE_NAMES = {ROLE_SOLVER: "solver", ROLE_VERIFIER: "verifier", ROLE_REFEREE: "referee"}


class NotWithdrawable(VerityError, RuntimeError):
    def __init__(self, amount: int, available_at: int, now: int):
        when = datetime.fromtimestamp(available_at, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        super().__init__(f"too early: {vrt(amount)} is unbonding and becomes withdrawable at {when} "
                         f"(chain time; in {age(available_at - now)}); run `verity node unstake --withdraw` then")


class NothingUnbonding(VerityError, RuntimeError):
    def __init__(self, address: str):
        super().__init__(f"{address} has no stake unbonding; start with `verity node unstake --name …` "
                         "(optionally --amount)")


age = duration


def role_names(mask: int) -> str:
    return ",".join(name for bit, name in ROLE_NAMES.items() if mask & bit) or "none"


@dataclass
class NodeStatus:
    address: str
    node: SimpleNamespace
    reputation: SimpleNamespace
    now: int
    balance: int
    earned: int           # every task payment (JobEscrow), fee and dispute/referee reward ever paid into the wallet
    # (solver weight, referee weight, reputation factor bps, promptness factor bps): what the draws weigh
    selection: tuple[int, int, int, int] | None = None
    # earned by source ("tasks", "fees", "disputes", "referee") and by job (task payments and fees), wei
    by_source: dict[str, int] | None = None
    by_job: dict[int, int] | None = None

    @property
    def registered(self) -> bool:
        return self.node.slot != 0

    def rows(self) -> list[tuple[str, str]]:
        n, r = self.node, self.reputation
        if not self.registered:
            return [("registered", "no"), ("balance", vrt(self.balance))]
        seen = f"{age(self.now - n.lastSeen)} ago" if n.lastSeen else \
            "signed off (stopped) or never checked in: not drawn until `verity node run` checks in"
        rows = [("roles", role_names(n.roles)), ("last seen", seen), ("balance", vrt(self.balance)),
                ("stake", vrt(n.stake)), ("locked stake", vrt(n.locked)),
                ("earnings", f"{vrt(self.earned)} (paid into the wallet when earned)"),
                *self._earning_rows(),
                ("reputation", f"{r.tasksCompleted} tasks done, {r.tasksLate} late, disputes {r.disputesWon} won / "
                               f"{r.disputesLost} lost, {vrt(r.totalSlashed)} slashed")]
        if n.pendingUnstake:
            left = int(n.unbondingEnds) - self.now
            rows.append(("unbonding", f"{vrt(n.pendingUnstake)}, " + (f"withdrawable in {age(left)}" if left > 0
                                                                      else "withdrawable now (unstake --withdraw)")))
        rows.append(("device / memory", f"{'gpu' if n.deviceClass else 'cpu'} / {n.memoryMb} MB"))
        region = region_name(n.region) or "undeclared"
        rows.append(("region / bandwidth", f"{region} / {int(n.bandwidthMbps)} Mbit/s "
                                           "(verity node register --region --bandwidth-mbps)"))
        if self.selection is not None:
            ws, wr, rep, prompt = self.selection
            rows.append(("selection weight", f"{vrt(ws)} as solver, {vrt(wr)} as referee (stake x reputation "
                                             f"{rep / 100:.1f}% x promptness {prompt / 100:.1f}%; heartbeats "
                                             "refresh it)"))
        return rows


    def _earning_rows(self) -> list[tuple[str, str]]:
        """Earnings by source (task payments and fees; dispute and referee rewards) and by job."""
        if not self.by_source:
            return []
        s = self.by_source
        rows = [("  paid", f"{vrt(s.get('tasks', 0))} task payments, {vrt(s.get('fees', 0))} verification fees "
                            "(in the balance)"),
                ("  rewards", f"{vrt(s.get('disputes', 0))} dispute rewards, {vrt(s.get('referee', 0))} referee pay "
                              "(in the balance)")]
        if self.by_job:
            top = sorted(self.by_job.items(), key=lambda kv: (-kv[1], kv[0]))
            text = ", ".join(f"job {j}: {vrt(a)}" for j, a in top[:EARNING_JOBS_SHOWN])
            more = len(top) - EARNING_JOBS_SHOWN
            rows.append(("  by job", text + (f", and {more} more job(s)" if more > 0 else "")))
        return rows


EARNING_JOBS_SHOWN = 5
_SOURCES = {("JobEscrow", "PaymentSent"): "tasks", ("VerificationFees", "FeePaid"): "fees",
            ("DisputeGame", "Credited"): "disputes", ("RefereePanel", "Credited"): "referee"}


def earning_events(c: ChainClient, address: str, index=None) -> list:
    """The events that may pay `address` (PaymentSent, FeePaid, Credited naming it), from the event index (synced
    first; the unconfirmed tail read live), not a rescan of the chain. `index`: an open Index (default: the chain's,
    opened and closed here)."""
    if index is None:
        from verity.index import open_index

        with open_index(c) as ix:
            return earning_events(c, address, ix)
    index.sync()
    return index.live_events(address=address, names=sorted({name for _, name in _SOURCES}))


def tally_earnings(events, address: str) -> tuple[int, dict[str, int], dict[int, int]]:
    """(earned, by source, by job) of `address` from events in any order (others' events are skipped)."""
    earned, by_source, by_job = 0, {}, {}
    for ev in events:
        # PaymentSent: JobEscrow pushed a task payment into the wallet; FeePaid: a verification fee transferred;
        # Credited: DisputeGame or RefereePanel paid a dispute or referee reward (or a returned bond) into the wallet
        source = _SOURCES.get((ev.contract, ev.name))
        to = ev.args.get("verifier") if source == "fees" else ev.args.get("to")
        if source is None or str(to).lower() != address.lower():
            continue
        amount = int(ev.args["amount"])
        earned += amount
        by_source[source] = by_source.get(source, 0) + amount
        if "jobId" in ev.args:
            by_job[int(ev.args["jobId"])] = by_job.get(int(ev.args["jobId"]), 0) + amount
    return earned, by_source, by_job


def read_status(c: ChainClient, address: str, index=None) -> NodeStatus:
    """`index`: an open event Index to read the earnings from (default: the chain's; see earning_events)."""
    earned, by_source, by_job = tally_earnings(earning_events(c, address, index), address)
    lens = c.lens.functions
    ws, wr = c.call(lens.weightsOf(address))
    selection = (int(ws), int(wr), int(c.call(lens.reputationFactorBps(address))),
                 int(c.call(lens.promptnessFactorBps(address))))
    return NodeStatus(address, read(c, c.registry, "getNode", address), read(c, c.lens, "reputationOf", address),
                      c.now(), c.call(c.token.functions.balanceOf(address)), earned, selection,
                      by_source, by_job)


def check_withdrawable(c: ChainClient, address: str) -> int:
    """The unbonded amount `withdraw()` would pay now; NotWithdrawable / NothingUnbonding otherwise."""
    n = read(c, c.registry, "getNode", address)
    if not n.pendingUnstake:
        raise NothingUnbonding(address)
    now = c.now()
    if now < int(n.unbondingEnds):
        raise NotWithdrawable(int(n.pendingUnstake), int(n.unbondingEnds), now)
    return int(n.pendingUnstake)
