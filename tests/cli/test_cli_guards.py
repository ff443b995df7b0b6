"""Bad options are refused before anything touches the disk or a chain, and nothing a user
types ends in a Python traceback (found by trying the CLI as a new user)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from verity.chain.deployments import DeploymentOfAnotherChain, check_deployment_chain
from verity.node.statedir import NameBound, bind_account


def _verity(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "VERITY_STATE_DIR": str(tmp_path / "state"), "VERITY_DEVNET_DIR": str(tmp_path / "devnet"),
           "VERITY_ANVIL_PORT": "1", "VERITY_IPFS_API_PORT": "1", "COLUMNS": "200"}
    env.pop("VERITY_RPC_URL", None)
    env.pop("VERITY_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "verity", *args], capture_output=True, text=True, env=env,
                          timeout=120, cwd=tmp_path)


@pytest.mark.parametrize("args, option", [
    (["--name", "../../etc", "--account", "7"], "--name"),
    (["--name", "", "--account", "7"], "--name"),
    (["--name", "a", "--account", "25"], "--account"),
    (["--name", "a", "--account", "-2"], "--account"),
    (["--name", "a", "--account", "1", "--stake", "nan"], "--stake"),
    (["--name", "a", "--account", "1", "--stake", "inf"], "--stake"),
    (["--name", "a", "--account", "1", "--stake", "-5"], "--stake"),
    (["--name", "a", "--account", "1", "--roles", "solver,banana"], "banana"),
])
def test_nodeRegister_badOption_failsBeforeAnything(tmp_path, args, option):
    res = _verity(tmp_path, "node", "register", *args)
    assert res.returncode == 1, res.stdout + res.stderr
    assert option in res.stderr and "Traceback" not in res.stderr + res.stdout
    assert not (tmp_path / "state").exists() and not (tmp_path / "etc").exists()  # nothing written anywhere


def test_cli_unexpectedError_isOneLineNotTraceback(tmp_path):
    res = _verity(tmp_path, "data", "inspect", str(tmp_path / "no-such-file.safetensors"))
    assert res.returncode == 1
    assert "Traceback" not in res.stderr + res.stdout
    assert "error:" in res.stderr and "no-such-file" in res.stderr


def test_cli_noDevnet_usesConfiguredPortNot8545(tmp_path):
    res = _verity(tmp_path, "job", "list")
    assert res.returncode == 1 and "http://127.0.0.1:1" in res.stderr and "8545" not in res.stderr, res.stderr


@pytest.mark.parametrize("amount", ["nan", "inf", "-inf", "1e400"])
def test_faucet_nonFiniteOrHugeAmount_fails(amount):
    from verity.devnet.faucet import FaucetRefused, to_wei

    with pytest.raises(FaucetRefused, match="--amount"):
        to_wei("--amount", amount)


def test_bindAccount_checkOnly_writesNothing_succeeds(tmp_path):
    bind_account(tmp_path / "n", "n", "0xAA", record=False)
    assert not (tmp_path / "n" / "account").exists()  # a command that then fails leaves the name free
    bind_account(tmp_path / "n", "n", "0xAA")
    with pytest.raises(NameBound):
        bind_account(tmp_path / "n", "n", "0xBB", record=False)


def _w3(genesis: str, chain_id: int = 31337):
    return SimpleNamespace(eth=SimpleNamespace(chain_id=chain_id, get_block=lambda n: {"hash": bytes.fromhex(genesis)}))


def test_checkDeploymentChain_anotherChainSameId_fails(tmp_path):
    (tmp_path / "31337.json").write_text("{}")
    (tmp_path / "31337.chain.json").write_text(json.dumps({"chain_id": 31337, "genesis_hash": "0x" + "11" * 32}))
    check_deployment_chain(_w3("11" * 32), 31337, "http://x", tmp_path / "31337.json")  # ours: fine
    with pytest.raises(DeploymentOfAnotherChain, match="another devnet on that port"):
        check_deployment_chain(_w3("22" * 32), 31337, "http://x", tmp_path / "31337.json")



def test_checkDeploymentChain_genesisInTheDeploymentsFile_refusesAForkWithTheSameId(tmp_path):
    """`ape run deploy` on a public chain records the genesis in the deployments file itself: a fork or another
    network answering with the same chain id (11155420, OP Sepolia) is refused, without any devnet marker."""
    from verity.chain.deployments import Deployments

    dep = Deployments(chain_id=11155420, deployer="0x" + "11" * 20, contracts={}, genesis_hash="0x" + "33" * 32)
    check_deployment_chain(_w3("33" * 32, 11155420), 11155420, "http://x", tmp_path / "11155420.json", dep=dep)
    with pytest.raises(DeploymentOfAnotherChain, match="or a fork"):
        check_deployment_chain(_w3("44" * 32, 11155420), 11155420, "http://x", tmp_path / "11155420.json", dep=dep)
    # a file without the field (written before issue 25) and no marker: nothing to compare, as before
    old = dep.model_copy(update={"genesis_hash": None})
    check_deployment_chain(_w3("44" * 32, 11155420), 11155420, "http://x", tmp_path / "11155420.json", dep=old)

def test_loadDeployments_v1FileWithoutEscrowPanel_failsWithRedeployHint(tmp_path):
    from verity.chain.deployments import DeploymentOutdated, load_deployments

    v1 = {"version": 1, "chain_id": 31337, "deployer": "0x" + "11" * 20,
          "contracts": {n: {"address": "0x" + "22" * 20, "abi": []}
                        for n in ("VerityToken", "NodeRegistry", "JobRegistry", "DisputeGame")}}
    (tmp_path / "31337.json").write_text(json.dumps(v1))
    with pytest.raises(DeploymentOutdated, match="BlockhashRandomness, JobEscrow, RefereePanel.*redeploy"):
        load_deployments(31337, tmp_path / "31337.json")


@pytest.mark.parametrize("delay", [0.3, 1.0, 2.5])
def test_cli_ctrlC_whileStarting_isOneLineNotTraceback(tmp_path, delay):
    """Issue 24: Ctrl-C while `verity` still imports torch, web3 and typer (or once the command runs) prints
    `interrupted` and exits 130, never a traceback; the delays land in the imports and in the command."""
    import signal
    import time

    env = {**os.environ, "VERITY_STATE_DIR": str(tmp_path / "state"), "VERITY_DEVNET_DIR": str(tmp_path / "devnet")}
    env.pop("VERITY_DEBUG", None)
    proc = subprocess.Popen([sys.executable, "-m", "verity", "data", "schema"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert "Traceback" not in out + err, err
    if proc.returncode == 130:
        assert "interrupted" in err, err
    elif proc.returncode == 0:  # the command had finished, its whole output written, when the signal came
        assert json.loads(out)["title"] == "Manifest"
    else:  # killed by SIGINT (the shell shows 130 too): it came during the interpreter's shutdown, the pipe's
        # unflushed output lost with it, or after a KeyboardInterrupt passed through a builtin eval() of a string
        # (typer evaluates annotations so; CPython 3.11 then ends the process by SIGINT even when it was handled).
        # Never a crash (CI once saw -11), a traceback or half a message
        assert proc.returncode == -signal.SIGINT, (proc.returncode, err)
        assert out in ("", None) or json.loads(out)["title"] == "Manifest", out



def test_ctrlC_insideAnImport_waitsForTheImportThenInterrupts(tmp_path):
    """A Ctrl-C that lands while a module is being imported must not leave it half made (torch then aborted through
    pybind11, numpy lost `ndarray`, CI saw a segfault): the entry point's handler raises KeyboardInterrupt only once
    the import is over. Python's default handler raises it inside the import, and this test fails."""
    (tmp_path / "slow_module.py").write_text(
        "import time\n"
        "started = time.monotonic()\n"
        "while time.monotonic() - started < 1.5:\n"
        "    pass\n"
        "done = True\n")
    script = (
        "import os, signal, sys, threading, time\n"
        "from verity.entry import interrupt_outside_imports\n"
        "signal.signal(signal.SIGINT, interrupt_outside_imports)\n"
        "threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()\n"
        "try:\n"
        "    import slow_module\n"
        "    while True:\n"
        "        time.sleep(0.01)\n"
        "except KeyboardInterrupt:\n"
        "    m = sys.modules.get('slow_module')\n"
        "    print('imported' if getattr(m, 'done', False) else 'half made')\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "imported", proc.stdout + proc.stderr

def test_devnet_up_says_out_loud_when_a_busy_port_was_replaced_succeeds():
    """Issue 26: a busy VERITY_ANVIL_PORT silently became another port; `devnet up` now names both."""
    from verity.cli.devnet import replaced_ports
    from verity.settings import Settings

    s = Settings(anvil_port=8545, ipfs_api_port=5001)
    record = {"anvil": {"port": 40123}, "ipfs": [{"api_port": 5001}]}
    (line,) = replaced_ports(record, s)
    assert "port 8545 (VERITY_ANVIL_PORT) is busy: anvil listens on 40123" in line
    assert replaced_ports({"anvil": {"port": 8545}, "ipfs": [{"api_port": 5001}]}, s) == []
    assert replaced_ports({"anvil": {"port": 40123}}, Settings(anvil_port=0)) == []   # no preference: nothing replaced
