"""Who got paid, who was slashed, what the disputes decided, and whether every
token is accounted for — read back from the chain's events and balances."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from rich.table import Table

from verity.chain import EventCursor
from verity.chain.protocol import DisputeOutcome
from verity.chain.views import read

ZERO = "0x0000000000000000000000000000000000000000"


def _vrt(wei: int) -> str:
    return f"{wei / 1e18:,.2f}"


@dataclass
class Ledger:
    chain: object
    names: dict                      # address -> name
    paid: dict = field(default_factory=lambda: defaultdict(int))
    forfeited: dict = field(default_factory=lambda: defaultdict(int))  # pay burned: bundle unavailable (P10)
    rewards: dict = field(default_factory=lambda: defaultdict(int))
    slashed: dict = field(default_factory=lambda: defaultdict(int))
    late: dict = field(default_factory=lambda: defaultdict(int))
    minted: int = 0
    burned: int = 0
    holders: set = field(default_factory=set)
    disputes: dict = field(default_factory=dict)
    block: int = 0                   # every balance is read at this height (nodes keep working)

    def name(self, addr: str) -> str:
        return self.names.get(addr, addr[:10] + "…")

    def feed(self, ev) -> None:
        a = ev.args
        if ev.name == "Transfer":
            if a["from"] == ZERO:
                self.minted += a["value"]
            if a["to"] == ZERO:
                self.burned += a["value"]
            self.holders.update(x for x in (a["from"], a["to"]) if x != ZERO)
        elif ev.name == "PaymentSent" and ev.contract == "JobEscrow":  # the escrow pays every task payment at once
            self.paid[a["to"]] += a["amount"]
        elif ev.name == "PaymentForfeited":  # every accepted consumer found the result's bundle unavailable (P10)
            self.forfeited[a["node"]] += a["amount"]
        elif ev.name == "Credited":  # DisputeGame (winner share, bond back) and RefereePanel (referee rewards)
            self.rewards[a["to"]] += a["amount"]
        elif ev.name == "StakeSlashed":
            self.slashed[a["node"]] += a["amount"]
        elif ev.name == "ReplicaLate":
            self.late[a["node"]] += 1
        elif ev.name == "DisputeOpened":
            self.disputes[a["disputeId"]] = {"task": a["taskId"], "challenger": a["challenger"], "defender": a["defender"],
                                             "where": "", "votes": 0, "outcome": "open"}
        elif ev.name == "CheckpointPinpointed":
            self.disputes[a["disputeId"]]["where"] = f"checkpoint {a['index']}→{a['index'] + 1}"
        elif ev.name == "StepPinpointed":
            d = self.disputes[a["disputeId"]]
            d["where"] += f", step {a['step']}"
        elif ev.name == "VoteRevealed" and a["disputeId"] in self.disputes:
            self.disputes[a["disputeId"]]["votes"] += 1
        elif ev.name == "DisputeAbandoned" and a["disputeId"] in self.disputes:
            self.disputes[a["disputeId"]]["outcome"] = "abandoned (stale)"
        elif ev.name == "DisputeResolved":
            outcome = DisputeOutcome(a["outcome"])
            won = outcome in (DisputeOutcome.CHALLENGER_WINS, DisputeOutcome.DEFENDER_WINS)
            self.disputes[a["disputeId"]]["outcome"] = (f"{self.name(a['winner'])} wins" if won
                                                        else outcome.name.lower().replace("_", " "))

    def disputes_table(self) -> Table:
        t = Table(title="disputes (DESIGN §6: pinpoint the checkpoint, then the step, then a referee panel recomputes it)")
        wide = max((len(n) for n in self.names.values()), default=10)  # node names are never cut short
        for col in ("dispute", "task", "challenger", "defender", "pinpointed", "referee votes", "outcome"):
            t.add_column(col, **({"no_wrap": True, "min_width": wide} if col in ("challenger", "defender") else {}))
        for did, d in sorted(self.disputes.items()):
            t.add_row(str(did), str(d["task"]), self.name(d["challenger"]), self.name(d["defender"]), d["where"],
                      str(d["votes"]), d["outcome"])
        return t

    def nodes_table(self) -> Table:
        c = self.chain
        t = Table(title="nodes: payments and slashes (VRT)")
        for col in ("node", "paid for tasks", "pay forfeited", "dispute rewards", "slashed", "late", "stake now",
                    "done/won/lost"):
            t.add_column(col, **({"no_wrap": True, "min_width": max(map(len, self.names.values()), default=10)}
                                 if col == "node" else {}))
        for addr, name in self.names.items():
            n, r = read(c, c.registry, "getNode", addr), read(c, c.lens, "reputationOf", addr)
            t.add_row(name, _vrt(self.paid[addr]), _vrt(self.forfeited[addr]), _vrt(self.rewards[addr]),
                      _vrt(self.slashed[addr]), str(self.late[addr]), _vrt(n.stake),
                      f"{r.tasksCompleted}/{r.disputesWon}/{r.disputesLost}")
        return t

    def balances(self) -> dict:
        c = self.chain
        contracts = {c.escrow.address: "JobEscrow (escrow)", c.jobs.address: "JobRegistry",
                     c.registry.address: "NodeRegistry (stake)", c.game.address: "DisputeGame (open bonds)",
                     c.panel.address: "RefereePanel (paid out at once)", c.token.address: "VerityToken"}
        rows = defaultdict(int)
        for h in self.holders:
            rows[contracts.get(h, "accounts")] += c.call(c.token.functions.balanceOf(h), self.block)
        return rows

    def conservation_ok(self) -> bool:
        supply = self.chain.call(self.chain.token.functions.totalSupply(), self.block)
        return sum(self.balances().values()) == supply and self.minted - self.burned == supply

    def conservation_table(self) -> Table:
        supply = self.chain.call(self.chain.token.functions.totalSupply(), self.block)
        t = Table(title="token conservation")
        t.add_column("where")
        t.add_column("VRT", justify="right")
        rows = self.balances()
        for k, v in sorted(rows.items()):
            t.add_row(k, _vrt(v))
        t.add_row("burned (slashes, forfeited pay)", _vrt(self.burned))
        t.add_row("[bold]sum[/bold]", _vrt(sum(rows.values()) + self.burned))
        t.add_row("minted", _vrt(self.minted))
        ok = sum(rows.values()) == supply and self.minted - self.burned == supply
        t.caption = "conserved: every minted token is held or burned" if ok else "[red]NOT CONSERVED[/red]"
        return t


def ledger(chain, names: dict) -> Ledger:
    led = Ledger(chain, names, block=chain.block_number())
    cursor = EventCursor(chain.w3, chain.contracts, next_block=chain.deployments.start_block)
    for ev in cursor.poll(head=led.block):
        led.feed(ev)
    return led
