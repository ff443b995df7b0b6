"""Unit tests of how a node's earnings are read back (`verity node status`, the demo's ledger) against fakes.

JobEscrow pushes every task payment into the payee's wallet (PaymentSent), and DisputeGame and RefereePanel pay
dispute and referee rewards the same way (Credited): no contract holds anything for the node to withdraw."""
from __future__ import annotations

from types import SimpleNamespace

from verity import demo_report
from verity.node import status as status_mod

ME, OTHER = "0x" + "ab" * 20, "0x" + "cd" * 20


class _Functions:
    """A contract's functions: each call is (contract, name, args); `missing` are not in its ABI."""

    def __init__(self, contract: str, missing: tuple[str, ...] = ()):
        self._contract, self._missing = contract, missing

    def __getattr__(self, name):
        if name in self._missing:
            raise AttributeError(f"{self._contract} has no function {name}")  # web3's ABIFunctionNotFound is one
        return lambda *args: (self._contract, name, args)


class _Chain:
    def __init__(self, views: dict):
        self.views, self.reads = views, []
        self.w3, self.deployments = None, SimpleNamespace(start_block=0)
        for name in ("escrow", "game", "panel"):  # none of them keeps credits to withdraw
            setattr(self, name, SimpleNamespace(functions=_Functions(name, missing=("credits", "withdraw"))))
        for name in ("registry", "lens", "token", "fees"):
            setattr(self, name, SimpleNamespace(functions=_Functions(name)))
        self.contracts = {"VerificationFees": self.fees}

    def call(self, call):
        self.reads.append(call)
        contract, name, args = call
        return self.views[(contract, name)](*args)

    def now(self):
        return 1_000


def _ev(name: str, contract: str, **args):
    return SimpleNamespace(name=name, contract=contract, args=args)


def test_read_status_counts_sent_payments_and_credited_rewards_as_earned_succeeds(monkeypatch):
    events = [_ev("PaymentSent", "JobEscrow", jobId=1, to=ME, amount=3),
              _ev("PaymentSent", "JobEscrow", jobId=1, to=OTHER, amount=7),       # someone else's payment
              _ev("Credited", "DisputeGame", to="0x" + ME[2:].upper(), amount=5),  # mixed case
              _ev("Credited", "RefereePanel", to=ME, amount=11),
              _ev("FeePaid", "VerificationFees", taskId=4, jobId=2, verifier=ME, amount=13, epoch=0),
              _ev("FeePaid", "VerificationFees", taskId=4, jobId=2, verifier=OTHER, amount=13, epoch=0),
              _ev("EscrowRefunded", "JobEscrow", jobId=1, to=ME, amount=100)]      # a refund is not an earning
    monkeypatch.setattr(status_mod, "earning_events", lambda chain, address, index=None: events)  # the index's answer
    monkeypatch.setattr(status_mod, "read", lambda c, contract, fn, *args: SimpleNamespace(slot=1))
    chain = _Chain({("lens", "weightsOf"): lambda who: (1, 1),
                    ("lens", "reputationFactorBps"): lambda who: 10_000,
                    ("lens", "promptnessFactorBps"): lambda who: 10_000,
                    ("token", "balanceOf"): lambda who: 42})
    st = status_mod.read_status(chain, ME)
    assert (st.earned, st.balance) == (3 + 13 + 5 + 11, 42)
    assert not hasattr(st, "unwithdrawn")  # nothing is held for withdraw: every earning is already in the balance
    # issue 26: by source (task payments and fees; dispute and referee rewards) and by job (task payments and fees)
    assert st.by_source == {"tasks": 3, "fees": 13, "disputes": 5, "referee": 11}
    assert st.by_job == {1: 3, 2: 13}
    st.node = SimpleNamespace(slot=1, lastSeen=0, roles=1, stake=0, locked=0, pendingUnstake=0, deviceClass=0,
                              memoryMb=1024, region=0, bandwidthMbps=0)
    st.reputation = SimpleNamespace(tasksCompleted=2, tasksLate=0, disputesWon=1, disputesLost=0, totalSlashed=0)
    rows = dict(st.rows())
    assert rows["  paid"] == "0.00 VRT task payments, 0.00 VRT verification fees (in the balance)"
    assert rows["  rewards"] == "0.00 VRT dispute rewards, 0.00 VRT referee pay (in the balance)"
    assert "withdraw" not in rows["earnings"] and rows["  by job"].startswith("job 2: ")


def test_ledger_counts_the_escrows_sent_payments_as_task_pay_succeeds():
    led = demo_report.Ledger(chain=None, names={ME: "me"})
    for ev in (_ev("PaymentSent", "JobEscrow", jobId=1, to=ME, amount=3),
               _ev("PaymentSent", "JobEscrow", jobId=2, to=ME, amount=4),
               _ev("Credited", "DisputeGame", to=ME, amount=5)):
        led.feed(ev)
    assert (led.paid[ME], led.rewards[ME]) == (7, 5)
