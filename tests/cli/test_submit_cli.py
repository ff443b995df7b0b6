"""`verity job submit` and `ape run submit` run as a user would, against a devnet of this module
(real anvil + js-ipfs + `ape run deploy`) whose anvil is NOT on 8545 — where a decoy chain listens
when the port is free, as another program's anvil would."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from eth_account import Account
from typer.testing import CliRunner

from verity.chain import ChainClient
from verity.chain.protocol import POSTER_BOND
from verity.chain.client import devnet_key
from verity.chain.deployments import load_deployments
from verity.chain.views import read
from verity.cid import cid_to_digest, digest_to_cid
from verity.devnet import Anvil, services
from verity.devnet.deploy import REPO, deploy, tool_env
from verity.devnet.process import port_is_free
from verity.engine.manifest import load_manifest
from verity.settings import Settings
from verity.storage import Storage

pytestmark = pytest.mark.integration
SUBMITTER = 9
ADDR = Account.from_key(devnet_key(SUBMITTER)).address
CLEARED = ("VERITY_RPC_URL", "VERITY_IPFS_API", "VERITY_DEPLOYMENTS_DIR", "APE_FOUNDRY_HOST")


@dataclass
class Devnet:
    dir: Path
    record: dict
    env: dict  # a user's environment: only the devnet dir says where the services are

    def client(self) -> ChainClient:
        return ChainClient(self.record["rpc_url"], None, load_deployments(31337, self.dir / "deployments" / "31337.json"))

    def spent_state(self) -> tuple:
        """What a submit would change: jobs, the submitters' tokens and allowances (submitters approve JobEscrow)."""
        c = self.client()
        fns = c.token.functions
        return (c.call(c.jobs.functions.jobCount()),
                *[c.call(fns.balanceOf(a)) for a in (ADDR, Account.from_key(devnet_key(0)).address)],
                c.call(fns.allowance(ADDR, c.escrow.address)))


@pytest.fixture(scope="module")
def off_port_devnet(tmp_path_factory):
    root = tmp_path_factory.mktemp("submit-devnet")
    decoy = Anvil(root / "decoy", 8545).start() if port_is_free(8545) else None  # same chain id, no contracts
    record = services.up(root / "devnet", ipfs_nodes=1, block_interval=0,
                         settings=Settings(anvil_port=0, ipfs_api_port=0))
    try:
        assert not record["rpc_url"].endswith(":8545") and not port_is_free(8545)
        deploy(record["rpc_url"], root / "devnet" / "deployments")
        env = {k: v for k, v in os.environ.items() if k not in CLEARED}
        env.update(VERITY_DEVNET_DIR=str(root / "devnet"), VERITY_STATE_DIR=str(root / "state"),
                   VERITY_IPFS_TIMEOUT="5", VERITY_IPFS_RETRIES="1", COLUMNS="400", NO_COLOR="1")
        yield Devnet(root / "devnet", record, env)
    finally:
        services.down(root / "devnet")
        if decoy is not None:
            decoy.stop()


def test_ape_run_deploy_writes_the_seven_wired_contracts_succeeds(off_port_devnet):
    """`ape run deploy` (the devnet's deploy): every v2 contract listed, wired once, errors decodable by name."""
    from verity.chain.protocol import CONTRACTS

    c = off_port_devnet.client()
    assert list(c.deployments.contracts) == list(CONTRACTS) and c.deployments.version == 2
    call = c.call
    assert call(c.escrow.functions.jobs()) == c.jobs.address
    assert call(c.jobs.functions.escrow()) == c.escrow.address
    assert call(c.jobs.functions.disputeGame()) == c.game.address
    assert call(c.panel.functions.game()) == c.game.address
    assert call(c.panel.functions.randomness()) == c.randomness.address
    assert call(c.game.functions.panel()) == c.panel.address and call(c.game.functions.jobs()) == c.jobs.address
    assert call(c.randomness.functions.delay()) == 2  # blocks: the devnet ticker mines one every interval
    for protocol in (c.jobs, c.game, c.panel):
        assert call(c.registry.functions.isProtocol(protocol.address))
    # Errors raised by code the JobRegistry runs by delegatecall are in its listed ABI.
    errors = {i["name"] for i in c.deployments.contracts["JobRegistry"].abi if i.get("type") == "error"}
    assert {"ChallengeWindowOpen", "DisputesPending", "NotSubmitter", "CancelNotAllowed"} <= errors


def _npz(path: Path, labels: list[int]) -> str:
    np.savez(path, x=np.random.default_rng(0).random((len(labels), 4), dtype=np.float32), y=np.asarray(labels))
    return str(path)


BAD_INPUTS = [  # (args, the option the error must name)
    (["--shards", "0"], "--shards"),
    (["--shards", "-2"], "--shards"),
    (["--payment", "-1"], "--payment"),
    (["--stake", "-10"], "--stake"),
    (["--payment", "1000000"], "--payment"),  # an escrow over the account's balance
    (["--model-config", '{"in_features": 64,'], "--model-config"),
    (["--account", "25"], "--account"),
    (["--key-file", "{tmp}/no-such-key"], "--key-file"),
    (["--model", "gpt"], "--model"),  # a language model on the digits
    (["--model-config", '{"in_features": 64, "hidden": [8], "out_features": 4}'], "--model-config"),  # 10 classes
    (["--dataset", "{tmp}/labels.npz"], "--dataset"),  # a label of -1
    (["--out", "{tmp}/a-file/job.json"], "--out"),
    (["--out", "/proc/verity/job.json"], "--out"),
    (["--init-from", "{tmp}/no-such-model"], "--init-from"),
    (["--init-from", "{tmp}/labels.npz"], "--init-from"),  # not safetensors: never unpickled, refused by name
    (["--init-from", "{tmp}", "--model-config", "{}"], "--init-from"),
]


@pytest.mark.parametrize("args, option", BAD_INPUTS, ids=[" ".join(a)[:40] for a, _ in BAD_INPUTS])
def test_verity_job_submit_bad_input_names_the_option_and_spends_nothing_fails(off_port_devnet, tmp_path, args, option):
    from verity.cli import app

    _npz(tmp_path / "labels.npz", [0, 1, 2, -1] * 10)
    (tmp_path / "a-file").write_text("not a folder")
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    if "--account" not in args and "--key-file" not in args:
        args += ["--account", str(SUBMITTER)]
    before = off_port_devnet.spent_state()
    result = CliRunner().invoke(app, ["job", "submit", "--shards", "2", "--rounds", "1", "--steps", "10", "-k", "10",
                                      *args], env=off_port_devnet.env)
    assert result.exit_code == 1, (result.stdout, result.stderr, result.exception)
    assert isinstance(result.exception, SystemExit) and "Traceback" not in result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {option}: "), result.stderr
    assert "posted job" not in result.stdout and "uploaded" not in result.stdout
    assert off_port_devnet.spent_state() == before


def _verity(*args: str, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "verity", *args], env=env, cwd=cwd, text=True, timeout=300,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def test_verity_job_submit_posts_a_verity_data_shard_directory_succeeds(off_port_devnet, tmp_path):
    net = off_port_devnet
    shard = _verity("data", "shard", "-o", str(tmp_path / "shards"), "-n", "3", env=net.env, cwd=tmp_path)
    assert shard.returncode == 0, shard.stdout
    jobs, balance, *_ = net.spent_state()
    out = tmp_path / "record" / "job.json"
    proc = _verity("job", "submit", "--dataset", str(tmp_path / "shards"), "--rounds", "1", "--steps", "10", "-k", "10",
                   "--account", str(SUBMITTER), "--out", str(out), env=net.env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout
    record = json.loads(out.read_text())
    assert record["job_id"] == jobs + 1 and f"posted job {jobs + 1}" in proc.stdout
    c = net.client()
    job = read(c, c.jobs, "getJob", record["job_id"])
    assert job.submitter == ADDR and job.shards == 3 and bytes(job.manifestCid) == cid_to_digest(record["manifest_cid"])
    assert record["escrow"] == 1 * 2 * (3 + 1) * 1 * 10**18 + POSTER_BOND  # payments and the bond
    assert record["verification_pot"] == 10**17 * 2 * (3 + 1) * 1  # default: 10 % of the payment x 2 checks x tasks
    assert net.spent_state()[1] == balance - record["escrow"] - record["verification_pot"]
    assert c.call(c.escrow.functions.escrowOf(record["job_id"])) == record["escrow"]  # JobEscrow pulled it
    index = json.loads((tmp_path / "shards" / "index.json").read_text())
    with Storage(net.record["ipfs_api"], timeout=10, retries=1) as storage:
        manifest = load_manifest(storage.get_bytes(record["manifest_cid"]))
    assert [s.cid for s in manifest.shards] == [e["cid"] for e in index["shards"]]


def test_ape_run_submit_reaches_the_devnet_anvil_off_port_8545_succeeds(off_port_devnet, tmp_path):
    """ape-config.yaml says 8545, where another chain listens; the devnet record wins."""
    net = off_port_devnet
    jobs = net.spent_state()[0]
    out = tmp_path / "job.json"
    env = {k: v for k, v in tool_env(None, net.env).items() if k != "APE_FOUNDRY_HOST"}
    cmd = [str(Path(sys.executable).parent / "ape"), "run", "submit", "--shards", "2", "--rounds", "1", "--steps", "10",
           "-k", "10", "--test-account", "8", "--out", str(out)]
    proc = subprocess.run(cmd, cwd=REPO, env=env, text=True, timeout=300, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.returncode == 0, proc.stdout[-3000:]
    record = json.loads(out.read_text())
    c = net.client()
    assert record["job_id"] == jobs + 1 and c.call(c.jobs.functions.jobCount()) == jobs + 1
    assert read(c, c.jobs, "getJob", record["job_id"]).submitter == Account.from_key(devnet_key(8)).address


def test_verity_job_submit_wait_times_out_with_advice_fails(off_port_devnet, tmp_path):
    """No node serves this devnet: --wait gives up after --timeout, says what the job waits for."""
    proc = subprocess.run([sys.executable, "-m", "verity", "job", "submit", "--shards", "1", "--rounds", "1", "--steps", "10",
                           "-k", "10", "--account", str(SUBMITTER), "--wait", "--timeout", "2"], env=off_port_devnet.env,
                          cwd=tmp_path, text=True, timeout=300, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert "posted job" in proc.stdout and "cancel" in proc.stdout, proc.stdout
    assert proc.stderr.strip().splitlines()[-1].endswith("still active after 2 s (--timeout)"), proc.stderr


def test_verity_job_submit_dry_run_prints_cost_fit_and_time_and_spends_nothing_succeeds(off_port_devnet, tmp_path):
    """Issue 24: before anything is uploaded or spent, the cost, the largest task's fit and a rough time to finish."""
    before = off_port_devnet.spent_state()
    proc = _verity("job", "submit", "--shards", "2", "--rounds", "1", "--steps", "10", "-k", "10", "--account",
                   str(SUBMITTER), "--dry-run", env=off_port_devnet.env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout
    lines = proc.stdout.strip().splitlines()
    assert lines[0].startswith("cost: 7 VRT escrow (6 VRT of payments for 3 tasks x 2 replicas, 1 VRT poster bond")
    assert lines[1].startswith("fit: largest task: about ") and "posted with the chain's default execution window" in lines[1]
    assert lines[2].startswith("warning: no registered solver serves portable-f32")  # this devnet runs no node
    assert lines[3].startswith("expected: about ") and lines[-1] == "dry run: nothing uploaded, nothing spent"
    assert "uploaded" not in proc.stdout.replace("nothing uploaded", "") and off_port_devnet.spent_state() == before


def test_verity_job_submit_window_too_short_for_the_task_is_refused_with_the_numbers_fails(off_port_devnet, tmp_path):
    """A window the job's own largest task cannot fit is refused before anything is spent, naming the flag and the
    window that fits; without the flag the same job is posted with that window (said out loud)."""
    big = ["--model-config", '{"in_features": 64, "hidden": [1024, 1024], "out_features": 10}', "--steps", "3000",
           "-k", "100", "--shards", "1", "--rounds", "1", "--account", str(SUBMITTER)]
    before = off_port_devnet.spent_state()
    proc = _verity("job", "submit", *big, "--execution-window", "60", env=off_port_devnet.env, cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stdout, proc.stdout
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("error: --execution-window: 60 s is too short: largest task: about "), last
    needed = int(last.rsplit("--execution-window ", 1)[1].split()[0])
    assert needed > 60 and off_port_devnet.spent_state() == before
    chosen = _verity("job", "submit", *big, "--dry-run", env=off_port_devnet.env, cwd=tmp_path)
    assert chosen.returncode == 0, chosen.stdout
    assert needed > 120  # the devnet registry's default execution window: too short, so the job gets its own
    assert f"execution window {needed} s (the chain's default 120 s is too short" in chosen.stdout
    assert f"posted with an execution window of {needed:,} s" in chosen.stdout


def test_verity_job_submit_posts_a_csv_table_and_a_bpe_tokenized_jsonl_succeeds(off_port_devnet, tmp_path):
    """Issue 24, data people have: a CSV by column names and a JSON-lines corpus under a byte-level BPE, posted as a
    user would; the tokenizer is uploaded with the job and its sha256 is in the manifest."""
    import hashlib

    net = off_port_devnet
    common = ["--shards", "2", "--rounds", "1", "--steps", "10", "-k", "10", "--account", str(SUBMITTER), "--yes"]
    with (tmp_path / "flowers.csv").open("w") as f:
        f.write("petal,sepal,colour,species\n")
        f.writelines(f"{i % 3 + 0.1 * (i % 7)},{i % 5},{i % 2},{['iris', 'rose', 'tulip'][i % 3]}\n" for i in range(90))
    csv_job = _verity("job", "submit", "--dataset", str(tmp_path / "flowers.csv"), "--features", "petal,sepal",
                      "--label", "species", *common, env=net.env, cwd=tmp_path)
    assert csv_job.returncode == 0, csv_job.stdout
    (tmp_path / "notes.jsonl").write_text("\n".join(json.dumps({"text": f"note {i}: the fox jumps over dog {i % 11}"})
                                                    for i in range(400)))
    lm_job = _verity("job", "submit", "--model", "gpt", "--dataset", str(tmp_path / "notes.jsonl"), "--tokenizer",
                     "bpe", "--vocab-size", "300", "--block", "16", *common, env=net.env, cwd=tmp_path)
    assert lm_job.returncode == 0, lm_job.stdout
    c = net.client()
    with Storage(net.record["ipfs_api"], timeout=10, retries=1) as storage:
        manifests = []
        for proc in (csv_job, lm_job):
            job_id = int(proc.stdout.split("posted job ", 1)[1].split(":")[0])
            cid = digest_to_cid(bytes(read(c, c.jobs, "getJob", job_id).manifestCid))
            manifests.append(load_manifest(storage.get_bytes(cid)))
        table, lm = manifests
        assert table.data.x_shape == [2] and table.data.num_classes == 3 and table.model.config.in_features == 2
        tokenizer = storage.get_bytes(lm.data.tokenizer_cid)
    assert lm.data.tokenizer_sha256 == hashlib.sha256(tokenizer).hexdigest()
    assert lm.data.vocab_size == lm.model.config.vocab_size <= 300 and lm.data.x_shape == [16]


def test_verity_job_submit_bad_table_row_names_it_and_spends_nothing_fails(off_port_devnet, tmp_path):
    (tmp_path / "bad.csv").write_text("a,b,y\n1,2,0\n1,x1,1\n")
    before = off_port_devnet.spent_state()
    proc = _verity("job", "submit", "--dataset", str(tmp_path / "bad.csv"), "--shards", "1", "--account",
                   str(SUBMITTER), env=off_port_devnet.env, cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stdout, proc.stdout
    assert proc.stdout.strip().splitlines()[-1] == (f"error: --dataset: {tmp_path / 'bad.csv'}: row 3: column 'b' "
                                                    "holds 'x1', not a number")
    assert off_port_devnet.spent_state() == before
