"""Owner parameter changes through the Timelock (issue 9, governance).

After `ape run deploy` the Timelock owns every Ownable protocol contract (TIMELOCKED), so an owner setter is no
longer a transaction of the deployer but a call it queues in the Timelock and executes once the delay has passed:
max(MIN_DELAY, NodeRegistry.unbondingPeriod + MIN_MARGIN), two days at least. A node that disagrees with a queued
change sees `CallQueued` and has time to unbond and leave before it applies.

`apply_parameter` queues a change (or finds it already queued) and executes it once ready. Off the devnet it cannot
wait two days, so it raises `ParameterChangeQueued` with the time from which running it again executes the change.
On the devnet (chain 31337) it moves anvil's clock past the delay (`evm_increaseTime` + `evm_mine`) and executes at
once. Nodes measure every deadline by block time (`ChainClient.now()`), so that jump ages every registered node's
liveness and every open task's deadlines by two days: running nodes would be reported late and slashed. The jump is
therefore refused while any node is registered (`ClockJumpRefused`); the devnet's callers (the demo, the node and CLI
test fixtures) set their parameters right after deployment, before any node starts.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from verity.errors import VerityError

# The contracts the deployment hands to the Timelock: every contract with OZ Ownable's onlyOwner setters.
TIMELOCKED = ("NodeRegistry", "JobEscrow", "JobRegistry", "RefereePanel", "DisputeGame")


@dataclass(frozen=True)
class QueuedChange:
    """A call waiting in the Timelock: which setter on which contract, its id, and when it may execute."""
    what: str
    target: str
    data: bytes
    id: bytes
    ready_at: int

    def when(self) -> str:
        return datetime.fromtimestamp(self.ready_at, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


class ParameterChangeQueued(VerityError, RuntimeError):
    """Off the devnet: the changes are queued but not applied; run the same call again after their time."""

    def __init__(self, pending: list[QueuedChange], now: int):
        self.pending, self.now = pending, now
        lines = "; ".join(f"{p.what} executable from {p.when()} (eta {p.ready_at}, in {p.ready_at - now} s, "
                          f"id 0x{p.id.hex()})" for p in pending)
        super().__init__(f"queued in the Timelock, not applied yet: {lines}; run the same command again after that "
                         "time to execute (only the devnet can move its clock past the delay)")


class ClockJumpRefused(VerityError, RuntimeError):
    """The devnet has registered nodes: jumping the chain clock past the delay would make their work late."""

    def __init__(self, nodes: int, seconds: int):
        self.nodes, self.seconds = nodes, seconds
        super().__init__(f"applying this parameter now needs a {seconds} s jump of the devnet clock, and {nodes} "
                         "node(s) are registered: their liveness and task deadlines run on block time, so the jump would "
                         "make them late; set parameters before nodes start (or pass allow_with_nodes=True)")


class NotTimelockAdmin(VerityError, PermissionError):
    def __init__(self, who: str, admin: str):
        super().__init__(f"{who} is not the Timelock's admin ({admin}); only it may queue and execute owner calls")


def _contract(owner, contract):
    return owner.contracts[contract] if isinstance(contract, str) else contract


def queue_change(owner, contract, call) -> QueuedChange:
    """Queue `call` (a web3 ContractFunction of `contract`, e.g. `owner.jobs.functions.setAssignmentTimeout(5)`)
    in the Timelock, unless that very call is queued already; returns it with its current `readyAt`."""
    contract = _contract(owner, contract)
    timelock = owner.contracts["Timelock"]
    if call.address != contract.address:
        raise VerityError(f"{call.fn_name} is a call to {call.address}, not to the contract {contract.address}")
    admin = owner.call(timelock.functions.admin())
    if admin.lower() != owner.address.lower():
        raise NotTimelockAdmin(owner.address, admin)
    data = bytes.fromhex(contract.encode_abi(call.fn_name, args=list(call.args))[2:])
    call_id = bytes(owner.call(timelock.functions.callId(contract.address, data)))
    _, eta = owner.call(timelock.functions.queued(call_id))
    if eta == 0:
        owner.transact(timelock.functions.queue(contract.address, data))
    what = f"{call.fn_name}{tuple(call.args)}"
    return QueuedChange(what, contract.address, data, call_id, int(owner.call(timelock.functions.readyAt(call_id))))


def execute_change(owner, change: QueuedChange) -> dict:
    """Execute a queued change whose delay has passed (TxFailed 'CallNotReady' before); returns the receipt."""
    timelock = owner.contracts["Timelock"]
    return owner.transact(timelock.functions.execute(change.target, change.data))


def advance_devnet_clock(owner, seconds: int) -> None:
    """anvil only: move block time forward `seconds` and mine a block at the new time."""
    for method, params in (("evm_increaseTime", [int(seconds)]), ("evm_mine", [])):
        answer = owner.w3.provider.make_request(method, params)
        if isinstance(answer, dict) and answer.get("error"):
            raise VerityError(f"{method} failed ({answer['error']}); is this an anvil devnet?")


def apply_parameters(owner, changes: list[tuple], *, allow_with_nodes: bool = False) -> list[dict]:
    """Apply owner calls [(contract, call), ...] through the Timelock: queue each, then execute each once ready.

    On the devnet (chain 31337) the clock is moved past a change's delay when it is not ready yet (the first jump
    covers every change queued with it; refused while nodes are registered, unless `allow_with_nodes`); elsewhere
    nothing executes until every change is ready: ParameterChangeQueued says when. Returns the execute receipts, in
    order."""
    from verity.chain.protocol import DEVNET_CHAIN_ID

    queued = [queue_change(owner, contract, call) for contract, call in changes]
    devnet = owner.w3.eth.chain_id == DEVNET_CHAIN_ID
    now = owner.now()
    waiting = [q for q in queued if q.ready_at > now]
    if waiting and not devnet:
        raise ParameterChangeQueued(waiting, now)
    receipts = []
    for q in queued:
        # re-read: a change earlier in the list may have raised the unbonding period, and with it this one's delay
        ready_at, now = int(owner.call(owner.contracts["Timelock"].functions.readyAt(q.id))), owner.now()
        if ready_at > now:
            if not devnet:
                raise ParameterChangeQueued([QueuedChange(q.what, q.target, q.data, q.id, ready_at)], now)
            nodes = int(owner.call(owner.contracts["NodeRegistry"].functions.nodeCount()))
            if nodes and not allow_with_nodes:
                raise ClockJumpRefused(nodes, ready_at - now)
            advance_devnet_clock(owner, ready_at - now)
        receipts.append(execute_change(owner, q))
    return receipts


def apply_parameter(owner, contract, call, *, allow_with_nodes: bool = False) -> dict:
    """Apply one owner call through the Timelock (see apply_parameters); returns the execute receipt.

    `owner` is a ChainClient of the Timelock's admin (the deployer), `contract` a contract of its deployment (or
    its name), `call` the setter call built from it: `apply_parameter(owner, owner.jobs,
    owner.jobs.functions.setDefaultWindows(120, 10, 10))`."""
    return apply_parameters(owner, [(contract, call)], allow_with_nodes=allow_with_nodes)[0]
