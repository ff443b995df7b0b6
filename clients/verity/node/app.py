"""Build and run one node process: key, chain, storage, roles, loop."""
from __future__ import annotations

import math

import logging
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import torch

from verity.chain import EventCursor
from verity.chain.client import connect_chain, devnet_key
from verity.chain.identity import chain_identity
from verity.chain.protocol import PROFILE_BITS, ROLE_REFEREE, ROLE_SOLVER, ROLE_VERIFIER, region_code, region_name
from verity.chain.views import read
from verity.errors import ProfileUnsupported, VerityError
from verity.node.auditor import AuditorRole
from verity.node.context import NodeContext
from verity.node.doctor import profile_names
from verity.node.dispute import PartyRole
from verity.node.faults import Faults
from verity.node.feasibility import Contention
from verity.node.keeper import Keeper
from verity.node.loop import NodeLoop
from verity.node.netprobe import NetworkObserver
from verity.node.referee import RefereeRole
from verity.node.snapshot import ChainBinding, SnapshotStore
from verity.node.statedir import StateDirClaim, bind_account
from verity.node.solver import SolverRole
from verity.node.verifier import VerifierRole
from verity.node.work import WorkPool
from verity.settings import Settings
from verity.storage import Storage
from verity.units import vrt

log = logging.getLogger("verity.node")

ROLE_BITS = {"solver": ROLE_SOLVER, "verifier": ROLE_VERIFIER, "referee": ROLE_REFEREE}
MAX_UINT = 2**256 - 1


class BadRoles(VerityError, ValueError):
    def __init__(self, roles: str):
        super().__init__(f"unknown roles {roles!r}: use a comma list of solver, verifier, referee")


def role_mask(roles: str) -> int:
    mask = 0
    for r in roles.split(","):
        if r.strip() not in ROLE_BITS:
            raise BadRoles(roles)
        mask |= ROLE_BITS[r.strip()]
    return mask


@dataclass
class NodeConfig:
    name: str
    roles: str = "solver,verifier,referee"
    account: int | None = None          # devnet test-account index
    private_key: str | None = None      # elsewhere: from an ape account / key file (never logged)
    stake: int = 1_000 * 10**18
    memory_mb: int = 4096
    # network declaration (NodeRegistry.declareNetwork; a region job draws only its region's nodes): None = leave what
    # the chain holds; region is a name of protocol.REGIONS or "none" (undeclared)
    region: str | None = None
    bandwidth_mbps: int | None = None
    sample_rate: float = 1.0
    workers: int = 2                    # concurrent training / re-execution jobs (plus one urgent lane)
    train_processes: int = 1            # processes (GPUs) one training task may spread its micro-batches over
    faults: list[str] = field(default_factory=list)
    settings: Settings = field(default_factory=Settings)
    # on-chain bits of the determinism profiles this machine passes (verity.node.doctor.served_profiles);
    # None: not checked (tests of the loop alone), every profile is worked on
    profiles: int | None = None
    # `node run --metrics-port / --metrics-addr`: serve Prometheus metrics there (node/metrics.py); None: off
    metrics_port: int | None = None
    metrics_addr: str = "127.0.0.1"
    log_json: bool = False              # `node run --log-json`: log lines are JSON objects (cli/common.py)

    @property
    def state_dir(self) -> Path:
        return Path(self.settings.state_dir) / "nodes" / self.name

    def key(self) -> str:
        if self.private_key:
            return self.private_key
        if self.account is None:
            raise VerityError("a node needs --account N (devnet test account) or a private key")
        return devnet_key(self.account)


@dataclass
class ServingContext(NodeContext):
    """A NodeContext that refuses a job's inputs when the job's profile is not one this node serves.

    Every computation (training, re-execution, audit, segment replay, a referee's step) starts by loading
    the job's manifest, so this is the one gate none of them can pass: a node of another hardware class
    would compute other bits and lose its stake (or a referee its seat's). Roles also decline such jobs
    up front (verifier, auditor); on-chain draws already skip nodes without the job's profile bit."""
    profiles: int | None = None   # None: not checked (commands that compute nothing); `node run` sets it
    memory_mb: int | None = None  # the memory this node declared; a solver declines tasks estimated above it
    speeds: dict | None = None    # FLOPs per ms per served profile (node/feasibility.doctor_speeds)

    def manifest(self, job_id: int, timeout: float | None = None):
        if job_id not in self._manifests and self.profiles is not None:
            bit = int(self.job(job_id).profileBit)
            if not bit & self.profiles:
                raise ProfileUnsupported(profile_name(bit), "this node did not pass it (verity node doctor), so it "
                                                            "takes, verifies and referees none of its jobs")
        return super().manifest(job_id, timeout)


def profile_name(bit: int) -> str:
    return next((name for name, b in PROFILE_BITS.items() if b == bit), f"bit {bit}")


def serve_profiles(ctx: ServingContext, cfg: NodeConfig, mask: int, speeds: dict | None = None) -> None:
    """From now on the node registers, takes and checks only jobs under the profiles in `mask`, and declines
    tasks it cannot hold in `cfg.memory_mb` or finish in time at `speeds` (node/feasibility.py)."""
    cfg.profiles = ctx.profiles = mask
    ctx.memory_mb, ctx.speeds = cfg.memory_mb, speeds
    ctx.contention = Contention()   # scales the doctor's CPU-clock speeds by this machine's load (feasibility)


def connect(cfg: NodeConfig, work: WorkPool | None = None) -> ServingContext:
    s = cfg.settings
    chain = connect_chain(s.rpc_url, cfg.key(), timeout=s.rpc_timeout)
    storage = Storage.from_settings(s)
    ctx = ServingContext(chain, storage, cfg.state_dir, Faults.parse(cfg.faults), profiles=cfg.profiles)
    ctx.train_processes = cfg.train_processes
    if work is not None:
        ctx.work = work
    return ctx


def check_name(ctx: NodeContext, cfg: NodeConfig, *, record: bool = False) -> None:
    """Refuse, before any transaction, a node name already bound to another account; with
    `record`, bind a new name to this account (done only once the command succeeded or holds its locks)."""
    legacy = SnapshotStore(cfg.state_dir).load().address if (cfg.state_dir / "snapshot.json").exists() else ""
    bind_account(cfg.state_dir, cfg.name, ctx.me, legacy, record=record)


def claim_state_dir(ctx: NodeContext, cfg: NodeConfig) -> StateDirClaim:
    """The locks `node run` holds while it runs: one process per state dir and per account."""
    check_name(ctx, cfg)
    return StateDirClaim(cfg.settings.state_dir, cfg.state_dir, cfg.name, ctx.me,
                         on_acquired=lambda: check_name(ctx, cfg, record=True))


def chain_binding(ctx: NodeContext) -> ChainBinding:
    dep = ctx.chain.deployments
    return ChainBinding(**chain_identity(ctx.chain.w3),  # chain id + genesis hash: a restarted devnet differs
                        contracts={name: f"{c.address.lower()}@{c.block}" for name, c in sorted(dep.contracts.items())})


def ensure_registered(ctx: NodeContext, cfg: NodeConfig) -> None:
    """Register (or update) the node and top its stake up to `cfg.stake`; idempotent.

    The profile mask is `cfg.profiles`, what the doctor found this machine passes: registering a profile
    it computes differently would have draws hand it jobs it then loses stake on. A node whose mask
    changed since it registered (another machine, torch build or ATen level) updates it."""
    c = ctx.chain
    mask = role_mask(cfg.roles)
    device = 1 if torch.cuda.is_available() else 0
    profiles = cfg.profiles
    if not profiles:
        raise VerityError("no determinism profile checked for this node: run `verity node doctor` to see which "
                          "profiles this machine passes")
    addr = ctx.storage.peer_multiaddr() if ctx.storage.is_up() else "/ip4/127.0.0.1/tcp/4001"
    node = read(c, c.registry, "getNode", ctx.me)
    # register pulls the registry's minimum stake, so an unregistered node needs at least that much
    target = cfg.stake if node.slot != 0 else max(cfg.stake, c.call(c.registry.functions.MIN_REGISTRATION_STAKE()))
    need = max(0, target - node.stake)
    balance = c.call(c.token.functions.balanceOf(ctx.me))
    if balance < need:  # checked before registering, so a failed top-up leaves nothing behind
        raise VerityError(f"{ctx.me} holds {vrt(balance)}, {vrt(need)} are needed to stake --stake "
                          f"{vrt(cfg.stake)}; on the devnet: `verity devnet faucet --address {ctx.me} "
                          f"--amount {math.ceil((need - balance) / 10**18)}`")
    for spender in (c.registry.address, c.game.address):  # register's minimum stake and top-ups; a challenger's bond
        if c.call(c.token.functions.allowance(ctx.me, spender)) < 2**255:
            c.transact(c.token.functions.approve(spender, MAX_UINT))
    if node.slot == 0:
        c.transact(c.registry.functions.register(mask, device, cfg.memory_mb, 100, profiles, addr))
        log.info("%s registered as %s serving %s", ctx.me, cfg.roles, ", ".join(profile_names(profiles)))
    elif node.roles != mask or int(node.profiles) != profiles:
        c.transact(c.registry.functions.updateNode(mask, device, cfg.memory_mb, 100, profiles, addr))
        log.info("%s updated: roles %s, profiles %s", ctx.me, cfg.roles, ", ".join(profile_names(profiles)))
    node = read(c, c.registry, "getNode", ctx.me)
    declare_network(ctx, cfg, node)
    need = max(0, cfg.stake - node.stake)  # what register did not already pull
    if need > 0:
        c.transact(c.registry.functions.stake(need))
        log.info("%s staked %g VRT", ctx.me, need / 1e18)


def network_declaration(cfg: NodeConfig, node) -> tuple[int, int] | None:
    """The (region code, Mbit/s) to declare, or None when the chain already holds what was asked (an option not
    given keeps the declared value)."""
    if cfg.region is None and cfg.bandwidth_mbps is None:
        return None
    region = int(node.region) if cfg.region is None else (0 if cfg.region == "none" else region_code(cfg.region))
    bandwidth = int(node.bandwidthMbps) if cfg.bandwidth_mbps is None else int(cfg.bandwidth_mbps)
    return None if (region, bandwidth) == (int(node.region), int(node.bandwidthMbps)) else (region, bandwidth)


def declare_network(ctx: NodeContext, cfg: NodeConfig, node) -> None:
    """declareNetwork when the options ask for another region or bandwidth than the chain holds (idempotent)."""
    want = network_declaration(cfg, node)
    if want is not None:
        ctx.chain.transact(ctx.chain.registry.functions.declareNetwork(*want))
        log.info("%s declared region %s, %d Mbit/s", ctx.me, region_name(want[0]) or "none", want[1])


def drop_workdirs(state_dir: Path) -> None:
    for label in ("solve", "verify", "audit"):
        if (state_dir / label).is_dir():
            shutil.rmtree(state_dir / label)
            log.info("removed %s: local checkpoints of the previous chain", state_dir / label)


def start_metrics(ctx: NodeContext, cfg: NodeConfig):
    """Serve the node's Prometheus metrics on cfg.metrics_addr:cfg.metrics_port (MetricsUnavailable when it cannot
    listen there) and hand them to the context, so that the work feeds them; None when off. `NodeMetrics.measure`
    then measures the loop build_loop made."""
    if cfg.metrics_port is None:
        return None
    from verity.node.metrics import NodeMetrics

    metrics = NodeMetrics(cfg.name, ctx.me, cfg.roles)
    port = metrics.serve(cfg.metrics_port, cfg.metrics_addr)
    ctx.metrics = metrics
    log.info("serving Prometheus metrics on http://%s:%d/metrics", cfg.metrics_addr, port)
    return metrics


def build_loop(ctx: NodeContext, cfg: NodeConfig) -> NodeLoop:
    ctx.faults.install()
    # measured fetch rates and chain round trips; a bandwidth the fetches do not reach is re-declared lower
    # (node/netprobe.py; VERITY_SELF_DEMOTE=0: only logged)
    ctx.network = NetworkObserver.load(cfg.state_dir, self_demote=cfg.settings.self_demote,
                                       metrics=getattr(ctx, "metrics", None))
    roles = set(r.strip() for r in cfg.roles.split(","))
    handlers: list = [Keeper(ctx)]
    if "solver" in roles:
        handlers.append(SolverRole(ctx))
    if "verifier" in roles:
        handlers.append(VerifierRole(ctx, cfg.sample_rate, profiles=cfg.profiles))
        handlers.append(AuditorRole(ctx, profiles=cfg.profiles))  # verification fees (P5): blind checks of fee-sampled tasks
    if "referee" in roles:
        handlers.append(RefereeRole(ctx))
    handlers.append(PartyRole(ctx))  # anyone staked may end up a party
    store = SnapshotStore(cfg.state_dir)
    loaded = store.load()
    snap = loaded.bind(chain_binding(ctx))
    if snap is not loaded:  # another chain: its task ids mean other tasks now, so old work folders must go
        drop_workdirs(cfg.state_dir)
    snap.address = ctx.me
    store.save(snap)
    cursor = EventCursor(ctx.chain.w3, ctx.chain.contracts, next_block=max(snap.next_block, ctx.chain.deployments.start_block))
    periodic = [handlers[0]] + [h for h in handlers if isinstance(h, AuditorRole)]  # keeper; fee key chain anchor
    s = cfg.settings
    return NodeLoop(cursor, store, snap, handlers, periodic=periodic, work=ctx.work,
                    endpoints={"chain": s.rpc_url, "ipfs": getattr(getattr(ctx, "storage", None), "api_addr", s.ipfs_api)},
                    max_outage=s.max_outage or None)  # VERITY_MAX_OUTAGE; 0: ride out any outage


def sign_off(ctx: NodeContext) -> bool:
    """A node stopping on purpose signs itself off (NodeRegistry.evictOffline on itself): it is not drawn, and then
    fined as late, while it is away (issue 25: a node switched off for a minute was drawn twice meanwhile); the
    check-in of its next start signs it back on. Slots it already holds stay its own. Best effort: a stop never
    fails on it (the chain may be what went away); then the liveness window ends the draws."""
    c = ctx.chain
    try:
        c.transact(c.registry.functions.evictOffline(ctx.me))
    except Exception as exc:  # noqa: BLE001 — any failure leaves the node as drawable as before, nothing worse
        log.warning("could not sign off (%s: %s): draws may still pick this node until its liveness window "
                    "passes", type(exc).__name__, exc)
        return False
    log.info("signed off: not drawn until the node runs again")
    return True
