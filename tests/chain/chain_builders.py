"""Builders for the on-chain integration tests (tests/chain) and scripts/gas_report.py.

Plain Python over ape objects: no pytest here, so the gas script can reuse it. Protocol facts (enums, role
bits, commitment encodings, struct field order) come from verity.chain.protocol, never copied here.

- `System`  — the contracts deployed and wired by an owner (scripts/deploy.py's wiring; the DevnetFaucet mints,
              the owner keeps the setters: no Timelock here), token accounting.
- `Nodes`   — funds, registers and stakes accounts with roles.
- `Trace`   — a synthetic trace h_0..h_n (random 32-byte hashes) with its Merkle root and proofs.
- `Poster`  — posts jobs (escrow approved to JobEscrow), fulfils draws (`assign` once the randomness is readable, P4),
              reads `TaskAssigned`, drives commit/reveal and submitResult.
- `challenge` / `seat_panel` / `vote` — an optimistic challenge (commit, then reveal in a later block) and a panel.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from eth_hash.auto import keccak

from verity.chain.protocol import (  # noqa: F401  (re-exported for the tests)
    PROFILE_CPU_F32_STRICT, ROLE_REFEREE, ROLE_SOLVER, ROLE_VERIFIER, DisputeOutcome, DisputePhase, JobStatus,
    PanelPhase, PinpointProof, PostJobParams, ReplicaStatus, TaskKind, TaskStatus, Verdict, challenge_commitment,
    escrow_for, replica_commitment, vote_commitment,
)
from verity.chain.deployments import merged_abi
from verity.engine import merkle

E18 = 10**18
PROFILE_CPU = PROFILE_CPU_F32_STRICT
RANDOMNESS_DELAY = 2  # blocks, as on the devnet (scripts/deploy.py)
FEE_EPOCH = 30  # seconds per VerificationFees sampling epoch, as on the devnet (scripts/deploy.py)


def rand32() -> bytes:
    return os.urandom(32)


def h32(value) -> bytes:
    """bytes32 from ape/web3 return values (HexBytes, str, bytes)."""
    if isinstance(value, str):
        return bytes.fromhex(value.removeprefix("0x")).rjust(32, b"\0")
    return bytes(value).rjust(32, b"\0")


def trace_cid(trace: "Trace") -> bytes:
    """A stand-in result CID for `trace`: equal traces get equal CIDs, as deterministic bundles do."""
    return keccak(b"cid" + trace.final)


def aggregate_input(finals: list[bytes]) -> bytes:
    """h_0 of a round's AGGREGATE task (verity.engine.aggregate's encoding)."""
    from verity.engine.aggregate import aggregate_input_hash

    return aggregate_input_hash(finals)


# ---------------------------------------------------------------- traces


def fast_levels(hashes: list[bytes]) -> list[list[bytes]]:
    """verity.engine.merkle.levels without eth_abi (abi.encode(uint256, bytes32) is two 32-byte words):
    ~1 s per 2^20 leaves instead of ~10 s. tests/chain/test_merkle_encoding.py checks they agree."""
    level = [keccak(j.to_bytes(32, "big") + h) for j, h in enumerate(hashes)]
    level += [merkle.ZERO] * ((1 << (len(level) - 1).bit_length()) - len(level))
    out = [level]
    while len(level) > 1:
        level = [keccak(level[i] + level[i + 1]) for i in range(0, len(level), 2)]
        out.append(level)
    return out


@dataclass
class Trace:
    """h_0..h_n; Merkle levels computed once (verity.engine.merkle's encoding)."""

    hashes: list[bytes]
    _levels: list[list[bytes]] | None = field(default=None, repr=False)

    @classmethod
    def random(cls, h0: bytes, n: int) -> Trace:
        return cls([h0] + [rand32() for _ in range(n)])

    def diverging(self, at: int) -> Trace:
        """A trace equal to this one up to index at-1 and different from `at` on."""
        return Trace(self.hashes[:at] + [rand32() for _ in range(len(self.hashes) - at)])

    @property
    def n(self) -> int:
        return len(self.hashes) - 1

    @property
    def levels(self) -> list[list[bytes]]:
        if self._levels is None:
            self._levels = fast_levels(self.hashes)
        return self._levels

    @property
    def root(self) -> bytes:
        return self.levels[-1][0]

    @property
    def final(self) -> bytes:
        return self.hashes[-1]

    def proof(self, j: int) -> list[bytes]:
        out = []
        for level in self.levels[:-1]:
            out.append(level[j ^ 1])
            j //= 2
        return out

    def pinpoint(self, other: Trace, i: int) -> PinpointProof:
        """PinpointProof at leaves i (equal) and i+1 (different), with self as party A."""
        assert self.hashes[i] == other.hashes[i] and self.hashes[i + 1] != other.hashes[i + 1]
        return PinpointProof(i, self.hashes[i], self.hashes[i + 1], other.hashes[i + 1],
                             self.proof(i), self.proof(i + 1), other.proof(i), other.proof(i + 1))


# ---------------------------------------------------------------- system


def with_delegate_errors(instance, project):
    """`instance` with what its delegatecall targets add to its ABI (deployments.merged_abi: their errors, so
    `reverts(jobs.ChallengeWindowOpen)` works, and JobViews' views, so `jobs.getJob(1)` does)."""
    from ape import chain
    from ape.contracts import ContractInstance
    from ethpm_types import ContractType

    def abi_of(name: str) -> list[dict] | None:
        container = getattr(project, name, None)
        if container is None:
            return None
        return [i.model_dump(mode="json", by_alias=True, exclude_none=True) for i in container.contract_type.abi]

    doc = instance.contract_type.model_dump(mode="json", by_alias=True)
    doc["abi"] = merged_abi(instance.contract_type.name, abi_of)
    merged = ContractType.model_validate(doc)
    chain.contracts.cache_contract_type(instance.address, merged)  # ape decodes reverts by the callee's type
    return ContractInstance(instance.address, merged)


@dataclass
class System:
    owner: object
    token: object
    registry: object
    randomness: object
    escrow: object
    jobs: object
    panel: object
    game: object
    fees: object
    faucet: object
    lens: object = None
    dispute_lens: object = None

    @classmethod
    def deploy(cls, project, owner, liveness: int = 30 * 24 * 3600, randomness_delay: int = RANDOMNESS_DELAY) -> System:
        """The contracts in protocol order, wired as scripts/deploy.py wires them (docs/protocol-v2.md): the
        DevnetFaucet deploys the token (ape's anvil is chain 31337). Unlike the deployment, the owner keeps the
        setters (no Timelock), so tests and the gas report set parameters directly; the Timelock path is covered
        by tests/forge/Timelock.t.sol and tests/nodes/test_deployment_sealed.py."""
        faucet = owner.deploy(project.DevnetFaucet)
        token = project.VerityToken.at(faucet.token())
        registry = owner.deploy(project.NodeRegistry, token)
        lens = owner.deploy(project.NodeLens, registry)
        randomness = owner.deploy(project.BlockhashRandomness, randomness_delay)
        escrow = owner.deploy(project.JobEscrow, token)
        jobs = with_delegate_errors(owner.deploy(project.JobRegistry, token, registry, escrow, randomness), project)
        panel = owner.deploy(project.RefereePanel, token, registry, randomness)
        game = owner.deploy(project.DisputeGame, token, registry, jobs, panel)
        dispute_lens = owner.deploy(project.DisputeLens, game)
        fees = owner.deploy(project.VerificationFees, token, registry, jobs, FEE_EPOCH)
        escrow.setJobs(jobs, sender=owner)
        jobs.setDisputeGame(game, sender=owner)
        panel.setGame(game, sender=owner)
        for protocol in (jobs, game, panel):
            registry.setProtocol(protocol, True, sender=owner)
        registry.sealProtocols(sender=owner)
        # Tests move the clock by minutes; keep every node live unless a test says otherwise.
        registry.setLivenessWindow(liveness, sender=owner)
        return cls(owner, token, registry, randomness, escrow, jobs, panel, game, fees, faucet, lens, dispute_lens)

    @property
    def contracts(self) -> list:
        return [self.token, self.registry, self.randomness, self.escrow, self.jobs, self.panel, self.game, self.fees]

    def fund(self, account, amount: int) -> None:
        """Drips `amount` to `account` from the DevnetFaucet (the token's only minter), MAX_DRIP at a time."""
        step = self.faucet.MAX_DRIP()
        while amount > 0:
            self.faucet.drip(account, min(amount, step), sender=self.owner)
            amount -= step

    def conservation(self, holders) -> dict:
        """Token accounting: balances of every holder + contract, supply, minted, burned."""
        addrs = {a.address if hasattr(a, "address") else a for a in holders}
        addrs |= {c.address for c in self.contracts}
        total = sum(self.token.balanceOf(a) for a in addrs)
        return {
            "sum_balances": total,
            "supply": self.token.totalSupply(),
            "minted": self.token.totalMinted(),
            "burned": self.token.totalBurned(),
        }

    def escrow_backed(self) -> None:
        """JobEscrow holds exactly the open escrow: payments leave it at once (IJobEscrow's conservation)."""
        e = self.escrow
        assert self.token.balanceOf(e) == e.totalEscrow()

    def panel_backed(self) -> None:
        """The panel holds no tokens at rest: referee rewards are paid, and slashes burned, as they are taken."""
        assert self.token.balanceOf(self.panel) == 0


class Nodes:
    """Builder: `nodes.add(accounts, roles=..., stake=...)` funds, registers and stakes each account."""

    def __init__(self, system: System):
        self.s = system
        self.all: list = []

    def add(self, accts, roles: int = ROLE_SOLVER | ROLE_VERIFIER | ROLE_REFEREE, stake: int = 1_000 * E18,
            memory_mb: int = 4096, profiles: int = PROFILE_CPU, device: int = 0, extra: int = 0) -> list:
        out = []
        for a in accts:
            self.s.fund(a, stake + extra)
            self.s.token.approve(self.s.registry, 2**256 - 1, sender=a)
            self.s.token.approve(self.s.game, 2**256 - 1, sender=a)  # optimistic challenger bonds
            # register pulls MIN_REGISTRATION_STAKE (approved above); the top-up brings the stake to `stake`
            self.s.registry.register(roles, device, memory_mb, 100, profiles, f"/ip4/127.0.0.1/tcp/{4001 + len(self.all)}",
                                     sender=a)
            top_up = stake - self.s.registry.MIN_REGISTRATION_STAKE()
            if top_up > 0:
                self.s.registry.stake(top_up, sender=a)
            self.s.registry.heartbeat(sender=a)  # registering is not a check-in: drawn only after one
            self.all.append(a)
            out.append(a)
        next_epoch(self.s)
        return out


def next_epoch(system: System) -> None:
    """Mines to the next selection epoch's first block: draws read the weights as their epoch began, so nodes
    registered (or stakes changed) in this epoch are drawn from the next one on."""
    from ape import chain

    epoch = system.randomness.EPOCH_BLOCKS()
    head = chain.blocks.head.number
    chain.mine(epoch - head % epoch)


def mine_to_draw(system: System, request_id: int) -> None:
    """Mines past a randomness request's target block, renewing it first if its epoch ended unread (as the
    keepers' assign and seat do)."""
    from ape import chain

    if system.randomness.isStale(request_id):
        system.randomness.renew(request_id, sender=system.owner)
    target = system.randomness.targetOf(request_id)
    if chain.blocks.head.number <= target:
        chain.mine(target - chain.blocks.head.number + 1)


@dataclass
class Job:
    id: int
    params: PostJobParams
    receipt: object  # postJob's (JobPosted, TaskCreated, DrawRequested)
    replication: int
    shards: int
    rounds: int
    n: int
    draws: list = field(default_factory=list)  # the assign() receipts that drew round 0 (TaskAssigned)


class Poster:
    """Builder: posts jobs for one submitter and drives tasks through commit/reveal."""

    def __init__(self, system: System, account, by_address: dict):
        self.s = system
        self.account = account
        self.by_address = by_address  # address -> ape account (to send as the drawn node)
        self.cids: dict[tuple[int, str, bytes], bytes] = {}

    def params(self, shards=1, rounds=1, replication=2, steps=8, k=2, payment=10 * E18, stake=100 * E18,
               initial: bytes | None = None, memory_mb=0, profile=PROFILE_CPU, windows=(0, 0, 0), device=0,
               result_floor=0) -> PostJobParams:
        return PostJobParams(rand32(), rand32(), initial or rand32(), shards, rounds, steps, k, payment, replication,
                             stake, device, memory_mb, profile, *windows, resultFloor=result_floor)

    def post(self, draw: bool = True, **kw) -> Job:
        """postJob; then (draw=True) fulfils each round-0 task's draw as a keeper would. A task nobody is eligible
        for stays Open (its assign() reverts NoEligibleNode and leaves no receipt)."""
        p = self.params(**kw)
        escrow = p.escrow()
        self.s.fund(self.account, escrow)
        self.s.token.approve(self.s.escrow, escrow, sender=self.account)  # JobEscrow pulls it at postJob
        receipt = self.s.jobs.postJob(p, sender=self.account)
        job_id = self.s.jobs.jobCount()
        job = Job(job_id, p, receipt, p.replication, p.shards, p.rounds, p.n)
        if draw:
            for i in range(p.shards):
                r = self.draw(self.s.jobs.taskOf(job_id, 0, i), required=False)
                if r is not None:
                    job.draws.append(r)
        return job

    def draw(self, task_id: int, required: bool = True):
        """Mines past the task's randomness target block, then assign() (P4: two-phase draws); returns the receipt,
        or None when `required` is False and no node was eligible."""
        from ape import chain
        from ape.exceptions import ContractLogicError

        mine_to_draw(self.s, self.s.jobs.getTask(task_id).drawRequest)
        if not required:
            try:  # a dry run first: a reverting transaction would be sent, mined and traced by ape
                self.s.jobs.assign.call(task_id, sender=self.account)
            except ContractLogicError:
                return None
        return self.s.jobs.assign(task_id, sender=self.account)

    # -------------------------------------------------------- reading state

    def replicas(self, task_id: int) -> list:
        return list(self.s.jobs.getReplicas(task_id))

    def node_of(self, task_id: int, slot: int):
        """The account holding the slot; an empty slot of an Open task is drawn first, as a keeper would."""
        node = self.s.jobs.getReplica(task_id, slot).node
        if int(node, 16) == 0 and self.s.jobs.getTask(task_id).status == TaskStatus.OPEN:
            self.draw(task_id)
            node = self.s.jobs.getReplica(task_id, slot).node
        return self.by_address[node]

    def assigned(self, *receipts) -> dict[int, dict[int, str]]:
        """{taskId: {slot: node}} from the receipts' TaskAssigned events."""
        out: dict[int, dict[int, str]] = {}
        for receipt in receipts:
            for ev in receipt.events.filter(self.s.jobs.TaskAssigned):
                out.setdefault(ev.taskId, {})[ev.slot] = ev.node
        return out

    # -------------------------------------------------------- moves

    def commit(self, task_id: int, slot: int, trace: Trace, cid: bytes | None = None):
        node = self.node_of(task_id, slot)
        cid = cid or trace_cid(trace)
        self.cids[(task_id, node.address, trace.root)] = cid  # the root too: task ids repeat across deployments
        return self.s.jobs.commit(task_id, replica_commitment(trace.root, trace.final, cid, node.address), sender=node)

    def reveal(self, task_id: int, slot: int, trace: Trace, cid: bytes | None = None):
        """A Committed slot's reveal (its committed CID unless `cid`), or the last slot's reveal in place of its
        commit; either reveals a Committed partner whose commitment is the same result."""
        node = self.node_of(task_id, slot)
        cid = cid or self.cids.get((task_id, node.address, trace.root)) or trace_cid(trace)
        return self.s.jobs.reveal(task_id, trace.root, trace.final, trace.n, cid, trace.proof(0),
                                  trace.proof(trace.n), sender=node)

    def submit(self, task_id: int, trace: Trace, cid: bytes | None = None):
        node = self.node_of(task_id, 0)
        return self.s.jobs.submitResult(task_id, trace.root, trace.final, trace.n, cid or rand32(), trace.proof(0),
                                        trace.proof(trace.n), sender=node)

    def run_replicated(self, task_id: int, traces: list[Trace], cids: list[bytes] | None = None) -> list:
        """Replication 2 as nodes run it: slot 0 commits; slot 1, the last to commit, reveals in place of its commit
        (which reveals slot 0 too when slot 0 committed the same result); slot 0 reveals only if still Committed.
        Returns the receipts in order (the last one opened the window or made the task Contested)."""
        cids = cids or [None] * len(traces)
        receipts = [self.commit(task_id, 0, traces[0], cids[0]), self.reveal(task_id, 1, traces[1], cids[1])]
        if self.s.jobs.getReplica(task_id, 0).status == ReplicaStatus.COMMITTED:
            receipts.append(self.reveal(task_id, 0, traces[0], cids[0]))
        return receipts


# ---------------------------------------------------------------- disputes


@dataclass
class Contest:
    """A Contested replicated task: slot 0 honest (trace H), slot 1 cheating (trace C, diverging at checkpoint
    `diverge`), plus the per-step traces of segment diverge-1 that split at step `step` (leaf step+1 differs)."""

    job: Job
    task_id: int
    honest: object
    cheater: object
    H: Trace
    C: Trace
    sH: Trace
    sC: Trace
    segment: int
    step: int
    poster: Poster | None = None


def contest(poster: Poster, n: int = 8, k: int = 4, diverge: int = 5, step: int = 2, shards: int = 1,
            **post) -> Contest:
    """Posts a 1-round, replication-2 job and runs its shard 0 to Contested."""
    job = poster.post(shards=shards, rounds=1, replication=2, steps=n * k, k=k, **post)
    s = poster.s
    task_id = s.jobs.taskOf(job.id, 0, 0)
    initial = h32(s.jobs.getTask(task_id).inputHash)
    H = Trace.random(initial, n)
    C = H.diverging(diverge)
    seg = diverge - 1
    sH = Trace([H.hashes[seg]] + [rand32() for _ in range(k - 1)] + [H.hashes[seg + 1]])
    sC = Trace(sH.hashes[: step + 1] + [rand32() for _ in range(k - 1 - step)] + [C.hashes[seg + 1]])
    honest, cheater = poster.node_of(task_id, 0), poster.node_of(task_id, 1)
    poster.run_replicated(task_id, [H, C])
    return Contest(job, task_id, honest, cheater, H, C, sH, sC, seg, step, poster)


def mine_past(chain, deadline: int) -> None:
    """Mine one block whose timestamp is just past `deadline`."""
    chain.mine(deltatime=max(0, int(deadline) - chain.blocks.head.timestamp + 1))


def finalize_after_window(system: System, chain, task_id: int, sender):
    """A Revealed task: mine past challengeDeadline + its reveal hold + the job's revealWindow (reveal grace), then
    finalize."""
    t = system.jobs.getTask(task_id)
    mine_past(chain, t.challengeDeadline + t.revealHold + system.jobs.getJob(t.jobId).revealWindow)
    return system.jobs.finalize(task_id, sender=sender)


def paid_in(system: System, receipt) -> dict[str, int]:
    """What JobEscrow sent in `receipt`, summed per payee: payments are pushed (PaymentSent), so the receipt that
    settles a task is where its payees' balances grow."""
    paid: dict[str, int] = {}
    for e in receipt.events.filter(system.escrow.PaymentSent):
        paid[e.to] = paid.get(e.to, 0) + e.amount
    return paid


def accept_aggregate(system: System, chain, poster: Poster, job_id: int, rnd: int = 0):
    """Runs round `rnd`'s AGGREGATE honestly to acceptance (drawn, submitted or committed and revealed by every slot,
    finalized after its window). P10: accepting it settles its shards' payments. Returns (finalize receipt, the
    nodes paid for the shards in payment order: the last AGGREGATE's own replicas, paid after them, left out)."""
    job = system.jobs.getJob(job_id)
    agg = system.jobs.taskOf(job_id, rnd, job.shards)
    trace = Trace([h32(system.jobs.getTask(agg).inputHash), rand32()])
    if job.replication == 1:
        poster.submit(agg, trace)
    else:
        poster.run_replicated(agg, [trace] * job.replication)
    receipt = finalize_after_window(system, chain, agg, poster.account)
    paid = [e.to for e in receipt.events.filter(system.escrow.PaymentSent)]
    own = job.replication if rnd + 1 == job.rounds else 0
    return receipt, paid[:len(paid) - own]


@dataclass
class Challenge:
    """A committed optimistic challenge: what `challengeOptimistic` must reveal."""

    task_id: int
    challenger: object
    trace: Trace
    cid: bytes
    salt: bytes
    commit_receipt: object = None

    @property
    def commitment(self) -> bytes:
        return challenge_commitment(self.task_id, self.trace.root, self.trace.final, self.cid, self.salt,
                                    self.challenger.address)

    def reveal_args(self) -> tuple:
        t = self.trace
        return (self.task_id, t.root, t.final, t.n, self.cid, self.salt, t.proof(0), t.proof(t.n))


def commit_challenge(system: System, challenger, task_id: int, trace: Trace, cid: bytes | None = None) -> Challenge:
    """Step 1 of a challenge: commitChallenge(keccak(taskId, root, final, cid, salt, challenger))."""
    ch = Challenge(task_id, challenger, trace, cid or rand32(), rand32())
    ch.commit_receipt = system.game.commitChallenge(ch.commitment, sender=challenger)
    return ch


def reveal_challenge(system: System, ch: Challenge, sender=None):
    """Step 2, in a later block: challengeOptimistic(...) (as the challenger, or as `sender` to test copying)."""
    return system.game.challengeOptimistic(*ch.reveal_args(), sender=sender or ch.challenger)


def challenge(system: System, chain, challenger, task_id: int, trace: Trace, cid: bytes | None = None):
    """Commit, mine a block, reveal; returns (dispute id, Challenge, reveal receipt)."""
    ch = commit_challenge(system, challenger, task_id, trace, cid)
    chain.mine()
    r = reveal_challenge(system, ch)
    return opened(system, r), ch, r


def opened(system: System, receipt) -> int:
    """The dispute id a receipt's DisputeOpened event names."""
    return [e.disputeId for e in receipt.events.filter(system.game.DisputeOpened)][0]


# ---------------------------------------------------------------- referee panel


def seat_panel(system: System, chain, dispute_id: int, sender=None):
    """After the step was pinpointed (the game opened the panel): mine past the randomness target, seat()."""
    mine_to_draw(system, system.panel.panelOf(dispute_id).requestId)
    return system.panel.seat(dispute_id, sender=sender or system.owner)


def seats(system: System, dispute_id: int) -> list[str]:
    return [a for a in system.panel.panelOf(dispute_id).seats if int(a, 16)]


def vote(system: System, dispute_id: int, ballots: dict, reveal: bool | set = True) -> list:
    """Seated referees commit `ballots[referee]` on the panel, then reveal (all, or only those in `reveal`)."""
    panel = system.panel
    salts = {r: rand32() for r in ballots}
    out = [panel.commitVote(dispute_id, vote_commitment(dispute_id, v, salts[r], r.address), sender=r)
           for r, v in ballots.items()]
    for r, v in ballots.items():
        if reveal is True or r in reveal:
            out.append(panel.revealVote(dispute_id, v, salts[r], sender=r))
    return out
