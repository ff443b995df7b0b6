"""Issue 25 item 4: the same deploy and the same clients on a public chain, through ape's networks.

A real OP-stack or Arbitrum testnet cannot be reached from these machines, so an anvil answers in its place with the
network's chain id (11155420 OP Sepolia, 421614 Arbitrum Sepolia) and its block time in the block timestamps (2 s and
12 s; blocks are mined quickly so confirmations arrive), at the URL the ape-config.yaml entry reads from the
environment. `ape run deploy --network optimism:sepolia:node` then goes through the ape-optimism / ape-arbitrum
ecosystem and ape's node provider exactly as it would against the public RPC endpoint."""
from __future__ import annotations

import json
import subprocess

import pytest

from verity.chain.identity import identity_at
from verity.devnet import Anvil, BlockTicker
from verity.devnet.deploy import REPO, tool_env

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("network, chain_id, env_var, block_seconds", [
    ("optimism:sepolia:node", 11155420, "VERITY_OP_SEPOLIA_RPC", 2),
    ("arbitrum:sepolia:node", 421614, "VERITY_ARB_SEPOLIA_RPC", 12),
])
def test_ape_run_deploy_on_a_public_network_records_its_genesis_and_fits_windows_to_its_blocks_succeeds(
        tmp_path, network, chain_id, env_var, block_seconds):
    chain = Anvil(tmp_path / "anvil", chain_id=chain_id).start()
    ticker = None
    try:
        chain.rpc("anvil_setBlockTimestampInterval", [block_seconds])
        chain.rpc("anvil_mine", [hex(20), hex(block_seconds)])   # a history to measure the block time from
        ticker = BlockTicker(chain.rpc_url, 0.2).start()          # confirmations for ape's node provider
        out = tmp_path / "deployments" / f"{chain_id}.json"
        proc = subprocess.run([str(REPO / ".venv" / "bin" / "ape"), "run", "deploy", "--network", network,
                               "--out", str(out)], cwd=REPO, env=tool_env(extra={env_var: chain.rpc_url}),
                              text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=400)
        assert proc.returncode == 0, proc.stdout[-3000:]
        record = json.loads(out.read_text())
        identity = identity_at(chain.rpc_url)
        assert record["chain_id"] == chain_id
        assert record["genesis_hash"].lower().removeprefix("0x") == identity["genesis_hash"].removeprefix("0x")
        assert "DevnetFaucet" not in record["contracts"]   # a public chain: the deployer minted the genesis supply

        # the clients, pointed at the chain by VERITY_RPC_URL alone, read what the deploy fitted to its block time
        from verity.chain.client import ChainClient
        from verity.chain.deployments import check_deployment_chain, load_deployments

        dep = load_deployments(chain_id, out)
        c = ChainClient(chain.rpc_url, None, dep)
        check_deployment_chain(c.w3, chain_id, chain.rpc_url, out, dep=dep)
        jobs = c.jobs.functions
        assert c.call(jobs.blockSeconds()) == block_seconds
        execution, reveal, challenge = (c.call(jobs.defaultExecutionWindow()), c.call(jobs.defaultRevealWindow()),
                                        c.call(jobs.defaultChallengeWindow()))
        assert execution >= c.call(jobs.MIN_EXECUTION_BLOCKS()) * block_seconds
        assert reveal >= c.call(jobs.MIN_REVEAL_BLOCKS()) * block_seconds
        assert challenge >= c.call(jobs.MIN_CHALLENGE_BLOCKS()) * block_seconds
        # the decline grace (a quarter of the execution window) is several blocks, whatever the block time
        assert execution * c.call(jobs.DECLINE_GRACE_BPS()) // 10_000 >= 4 * block_seconds
        cli = subprocess.run([str(REPO / ".venv" / "bin" / "verity"), "job", "list"], cwd=tmp_path, text=True,
                             env=tool_env(extra={"VERITY_RPC_URL": chain.rpc_url,
                                                 "VERITY_DEPLOYMENTS_DIR": str(out.parent)}),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
        assert cli.returncode == 0, cli.stdout[-2000:]
    finally:
        if ticker is not None:
            ticker.stop()
        chain.stop()
