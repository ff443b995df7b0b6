"""Builders for node tests: a real devnet (anvil + ticker + js-ipfs via `verity.devnet.services`),
a fresh deployment per test through `ape run deploy`, and real `verity node run` processes."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from verity.chain import ChainClient, EventCursor
from verity.chain.client import devnet_key
from verity.chain.deployments import load_deployments
from verity.chain.protocol import JobStatus
from verity.chain.views import checked_in_nodes, read
from verity.devnet.ticker import rpc_call
from verity.storage import Storage
from verity.submit.prepare import JobSpec, post_job_web3, prepare_job

from node_clock import WindowSkipper
from node_zygote import NodeLauncher

SUBMITTER = 9  # test account that posts jobs (funded by the deploy script)
# The dispute clock the `deployed` fixture (conftest.py) applies. A dispute party's chess clock must survive CI's load: in
# tests/nodes/test_end_to_end.py's bitflip dispute each party used 4-7 s of its clock under two busy background
# processes here, and on CI's machine (pytest's two workers beside forge's invariant campaign) an honest party once
# ran out of a 15 s clock and was slashed. Production's default is 120 s.
CLOCK_ALLOWANCE = 30


@dataclass
class Node:
    name: str
    account: int
    proc: subprocess.Popen
    log: Path
    args: list
    env: dict
    killed: bool = False  # set when a test kills it on purpose

    @cached_property
    def address(self) -> str:  # read at every look of the window skipper
        from eth_account import Account

        return Account.from_key(devnet_key(self.account)).address

    def kill(self) -> None:
        self.killed = True
        self.proc.kill()
        self.proc.wait(timeout=10)

    def pause(self) -> None:
        """Freezes the node (SIGSTOP; its lanes are threads of the same process): it misses blocks as an offline
        node would, and catches up on resume() with no start-up time on the critical path."""
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.proc.pid, signal.SIGCONT)

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


@dataclass
class Net:
    """One fresh deployment on the shared devnet, plus the node processes of one test."""
    rpc_url: str
    ipfs_api: str
    root: Path
    env: dict
    nodes: list = field(default_factory=list)
    skipped: int = 0  # chain seconds jumped over by wait_job (node_clock.WindowSkipper)
    launcher: NodeLauncher | None = None  # None: every node a fresh `python -m verity` process

    def client(self, account: int | None = None) -> ChainClient:
        dep = load_deployments(31337, self.root / "deployments" / "31337.json")
        return ChainClient(self.rpc_url, devnet_key(account) if account is not None else None, dep)

    def storage(self) -> Storage:
        return Storage(self.ipfs_api, timeout=10, retries=1)

    def start_node(self, name: str, account: int, roles: str = "solver,referee", faults=(), extra_env=None,
                   options=()) -> Node:
        """`options`: more `verity node run` options, e.g. ("--sample-rate", "0")."""
        args = [sys.executable, "-m", "verity", "node", "run", "--name", name, "--account", str(account), "--roles", roles,
                *options]
        for f in faults:
            args += ["--fault", f]
        log = self.root / f"{name}.log"
        env = dict(self.env, **(extra_env or {}))
        if faults:
            env["VERITY_ENABLE_FAULTS"] = "1"  # --fault is refused without it
        node = Node(name, account, self._spawn(args, env, log), log, args, env)
        self.nodes.append(node)
        return node

    def restart(self, node: Node) -> Node:
        node.killed = False
        node.proc = self._spawn(node.args, node.env, node.log)
        return node

    def _spawn(self, args: list, env: dict, log: Path):
        if self.launcher is not None:
            return self.launcher.start(args, env, log)  # forked from the worker's zygote where it can be
        return subprocess.Popen(args, env=env, stdout=open(log, "ab"), stderr=subprocess.STDOUT, start_new_session=True)

    def wait_registered(self, count: int, timeout: float = 120) -> None:
        """Until `count` nodes registered and checked in (drawable: registering alone is not a check-in)."""
        c = self.client()
        deadline = time.monotonic() + timeout
        while c.call(c.registry.functions.nodeCount()) < count or checked_in_nodes(c) < count:
            dead = [n.name for n in self.nodes if not n.killed and n.proc.poll() is not None]
            assert not dead, f"node(s) {dead} exited:\n" + "\n".join(n.text()[-2000:] for n in self.nodes if n.name in dead)
            assert time.monotonic() < deadline, "nodes did not register and check in in time"
            time.sleep(0.5)

    def post(self, **spec) -> int:
        prepared = prepare_job(JobSpec(**spec), self.storage())
        return post_job_web3(self.client(SUBMITTER), prepared)

    def wait_job(self, job_id: int, timeout: float = 240, status=JobStatus.COMPLETED, skip_windows: bool = True):
        """Waits for the job to reach `status`. skip_windows: move the chain clock past a window once every node is
        only waiting for it (node_clock.WindowSkipper); a test about a wait itself passes False (real time)."""
        c = self.client()
        deadline = time.monotonic() + timeout
        skipper = WindowSkipper(self.rpc_url, Path(self.env["VERITY_STATE_DIR"])) if skip_windows else None
        while True:
            job = read(c, c.jobs, "getJob", job_id)
            if JobStatus(job.status) == status:
                return job
            assert JobStatus(job.status) == JobStatus.ACTIVE, f"job {job_id} ended {JobStatus(job.status).name}"
            crashed = [n for n in self.nodes if not n.killed and n.proc.poll() is not None]
            assert not crashed, "node process(es) died:\n" + "\n".join(f"--- {n.name}\n{n.text()[-3000:]}" for n in crashed)
            if time.monotonic() > deadline:
                logs = "\n".join(f"--- {n.name}\n{n.text()[-3000:]}" for n in self.nodes)
                raise AssertionError(f"job {job_id} still {JobStatus(job.status).name} after {timeout} s\n{logs}")
            if skipper is not None:
                self.skipped += skipper.step(c, self.nodes)
            time.sleep(0.5)

    def next_epoch(self) -> None:
        """Mine to the next selection epoch's first block (anvil_mine): draws read the weights as their epoch began,
        so a node that registered in this epoch is drawn from the next one (issue 23)."""
        from verity.chain.protocol import SELECTION_EPOCH_BLOCKS

        head = int(rpc_call(self.rpc_url, "eth_blockNumber", []), 16)
        rpc_call(self.rpc_url, "anvil_mine", [hex(SELECTION_EPOCH_BLOCKS - head % SELECTION_EPOCH_BLOCKS)])

    def advance_clock(self, seconds: int) -> None:
        """Move the chain clock `seconds` ahead now (a test that knows nobody acts meanwhile, e.g. with the party that
        would paused); counted in `skipped`."""
        if seconds > 0:
            rpc_call(self.rpc_url, "evm_increaseTime", [int(seconds)])
            rpc_call(self.rpc_url, "evm_mine")
            self.skipped += int(seconds)

    def wait_until(self, predicate, timeout: float, what: str):
        """`wait_for` that skips windows the way wait_job does, for a test waiting on something other than the job's
        end (the test body must be passive meanwhile: it is not a party the skipper sees)."""
        c, skipper = self.client(), WindowSkipper(self.rpc_url, Path(self.env["VERITY_STATE_DIR"]))

        def ready():
            if value := predicate():
                return value
            self.skipped += skipper.step(c, self.nodes)
            return None
        return wait_for(ready, timeout, what)

    def events(self) -> list:
        c = self.client()
        return EventCursor(c.w3, c.contracts, next_block=c.deployments.start_block).poll()

    def stop(self) -> None:
        for n in self.nodes:
            if n.proc.poll() is None:
                n.proc.send_signal(signal.SIGTERM)
                n.proc.send_signal(signal.SIGCONT)  # a paused node handles its SIGTERM once it runs
        for n in self.nodes:
            try:
                n.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                n.proc.kill()


def conserved(c: ChainClient) -> tuple[int, int, int]:
    """(sum of balances of every holder, minted, burned), all read at one block height (nodes keep moving
    tokens meanwhile); the sum must equal totalSupply = minted − burned (verity.lab.ledger, which the lab's runs use)."""
    from verity.lab.ledger import token_conservation

    t = token_conservation(c)
    return t["total"], t["minted"], t["burned"]


def post_raw(net: Net, manifest: bytes, initial_hash: bytes, **spec) -> int:
    """Post a job whose manifest bytes are given as-is (to test what nodes do with bad ones)."""
    from verity.submit.prepare import PreparedJob

    storage = net.storage()
    prepared = PreparedJob({}, manifest, storage.put_bytes(manifest), initial_hash, None, JobSpec(**spec))
    return post_job_web3(net.client(SUBMITTER), prepared)


def warp_to(c: ChainClient, t: int) -> None:
    """Chain time to at least `t` (the devnet's 30 s fee epochs; waiting them out would double a test's runtime)."""
    gap = t - c.now()
    if gap > 0:
        c.w3.provider.make_request("evm_increaseTime", [gap + 1])
        c.w3.provider.make_request("evm_mine", [])


def wait_for(predicate, timeout: float, what: str, poll: float = 0.5):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(poll)


def register_account(net: Net, account: int, roles: int, stake: int = 1_000 * 10**18) -> ChainClient:
    """A client for funded test account `account`, registered with role bits `roles` and staked, for a test that
    plays an adversary itself (no node process). Like a node, it approves the registry (stake) and the DisputeGame
    (a challenger's bond)."""
    c = net.client(account)
    for spender in (c.registry.address, c.game.address):
        c.transact(c.token.functions.approve(spender, 2**256 - 1))
    c.transact(c.registry.functions.register(roles, 0, 1024, 100, 1, "/ip4/127.0.0.1/tcp/4001"))  # pulls the minimum
    minimum = c.call(c.registry.functions.MIN_REGISTRATION_STAKE())
    if stake > minimum:
        c.transact(c.registry.functions.stake(stake - minimum))
    c.transact(c.registry.functions.heartbeat())  # registering is not a check-in: drawn only after one
    return c


def send_calldata(c: ChainClient, to: str, data, gas: int = 3_000_000) -> dict:
    """Sign and send raw calldata from `c`'s account with explicit gas (no estimate, so a call that reverts is still
    mined, as a copier's transaction would be); returns the receipt whatever its status."""
    tx = {"to": to, "data": data, "gas": gas, "gasPrice": c.w3.eth.gas_price, "nonce": c.next_nonce(),
          "chainId": c.w3.eth.chain_id, "value": 0}
    tx_hash = c.w3.eth.send_raw_transaction(c.account.sign_transaction(tx).raw_transaction)
    return c.w3.eth.wait_for_transaction_receipt(tx_hash, timeout=60, poll_latency=0.05)


def revert_error(c: ChainClient, to: str, data, block: int) -> tuple[str, tuple]:
    """(name, args) of the custom error that `data` sent from `c`'s account to `to` reverts with at `block`
    (replayed with eth_call); fails the test if it does not revert."""
    from web3.exceptions import ContractCustomError

    try:
        c.w3.eth.call({"from": c.address, "to": to, "data": data}, block)
    except ContractCustomError as exc:
        return c.errors.decode(exc.data)
    raise AssertionError(f"the call to {to} from {c.address} does not revert at block {block}")
