"""`ape run deploy`: deploy and wire Verity's contracts (protocol v2), hand them to the Timelock, write the
deployments file.

Safe to run twice: if the deployments file for this chain points at contracts
that still have code, nothing is deployed again (pass --force to redeploy).
On the devnet (chain 31337) the DevnetFaucet deploys the token and is its only minter; the script drips faucet
tokens to the test accounts. On any other chain the token's minter is the deployer account, for a one-time genesis
distribution (docs/contracts.md, Governance). Either way the Timelock owns every Ownable contract at the end.
"""
from pathlib import Path

import click
from ape import accounts, chain, project
from ape.cli import ConnectedProviderCommand

from verity.chain.deployments import (merged_abi, DeployedContract, Deployments, default_path, missing_contracts,
                                     save_deployments)
from verity.chain.governance import TIMELOCKED
from verity.chain.protocol import CONTRACTS, DEVNET_CHAIN_ID, MIN_CLOCK_BLOCKS

FAUCET = 1_000_000 * 10**18  # per test account, one drip (DevnetFaucet.MAX_DRIP is 10^7 VRT)
DEVNET_RANDOMNESS_DELAY = 2  # the devnet ticker mines a block every interval
DEVNET_FEE_EPOCH = 30  # seconds; a public chain uses at least its longest execution window (an hour or more)


def block_seconds_of_chain(sample: int = 20) -> int:
    """The chain's block time in whole seconds (at least 1), from the last `sample` blocks: the devnet mines a block per
    transaction and one a second, so it reads 1; a 12-second chain reads 12."""
    head = chain.blocks.head
    if head.number < 2:
        return 1
    first = chain.blocks[max(0, head.number - sample)]
    return max(1, -(-(head.timestamp - first.timestamp) // max(1, head.number - first.number)))


def fit_windows_to_block_time(owner, jobs, game, block_seconds: int) -> None:
    """JobRegistry.setBlockSeconds, first raising any default window below the new minimums, then the game's clock
    allowance to at least MIN_CLOCK_BLOCKS blocks (a no-op at 1 s)."""
    if block_seconds <= 1:
        return
    b = block_seconds
    windows = (max(jobs.defaultExecutionWindow(), jobs.MIN_EXECUTION_BLOCKS() * b),
               max(jobs.defaultRevealWindow(), jobs.MIN_REVEAL_BLOCKS() * b),
               max(jobs.defaultChallengeWindow(), jobs.MIN_CHALLENGE_BLOCKS() * b))
    jobs.setDefaultWindows(*windows, sender=owner)
    jobs.setBlockSeconds(b, sender=owner)
    if game.clockAllowance() < MIN_CLOCK_BLOCKS * b:
        game.setClockAllowance(MIN_CLOCK_BLOCKS * b, sender=owner)


def deploy_system(owner, randomness_delay: int = DEVNET_RANDOMNESS_DELAY, fee_epoch: int = DEVNET_FEE_EPOCH,
                  block_seconds: int = 1) -> dict:
    """Deploys the contracts in protocol order (CONTRACTS), wires them (docs/protocol-v2.md), then hands every
    Ownable one to the Timelock; name -> instance, in CONTRACTS order.

    tests/chain/chain_builders.py (System.deploy) does the same wiring for the chain tests, without the Timelock."""
    deployed = {}
    if chain.chain_id == DEVNET_CHAIN_ID:  # the faucet deploys the token, itself its only minter
        deployed["DevnetFaucet"] = owner.deploy(project.DevnetFaucet)
        token = project.VerityToken.at(deployed["DevnetFaucet"].token())
    else:  # the deployer mints the genesis distribution
        token = owner.deploy(project.VerityToken, owner.address)
    registry = owner.deploy(project.NodeRegistry, token.address)
    lens = owner.deploy(project.NodeLens, registry.address)  # read-only views of the registry's weights and trees
    randomness = owner.deploy(project.BlockhashRandomness, randomness_delay)
    escrow = owner.deploy(project.JobEscrow, token.address)
    jobs = owner.deploy(project.JobRegistry, token.address, registry.address, escrow.address, randomness.address)
    panel = owner.deploy(project.RefereePanel, token.address, registry.address, randomness.address)
    game = owner.deploy(project.DisputeGame, token.address, registry.address, jobs.address, panel.address)
    dispute_lens = owner.deploy(project.DisputeLens, game.address)  # read-only views of disputes and their clocks
    fees = owner.deploy(project.VerificationFees, token.address, registry.address, jobs.address, fee_epoch)
    escrow.setJobs(jobs.address, sender=owner)
    jobs.setDisputeGame(game.address, sender=owner)
    panel.setGame(game.address, sender=owner)
    fit_windows_to_block_time(owner, jobs, game, block_seconds)  # minimum windows and decline grace in blocks (issue 23)
    for protocol in (jobs, game, panel):
        registry.setProtocol(protocol.address, True, sender=owner)
    registry.sealProtocols(sender=owner)  # no owner can add a "protocol" that slashes stake (issue 9, governance)
    timelock = owner.deploy(project.Timelock, registry.address)
    deployed.update({"VerityToken": token, "NodeRegistry": registry, "NodeLens": lens, "BlockhashRandomness": randomness,
                     "JobEscrow": escrow, "JobRegistry": jobs, "RefereePanel": panel, "DisputeGame": game,
                     "DisputeLens": dispute_lens,
                     "VerificationFees": fees, "Timelock": timelock})
    hand_to_timelock(owner, deployed, timelock)
    return {name: deployed[name] for name in CONTRACTS if name in deployed}


def hand_to_timelock(owner, deployed: dict, timelock) -> None:
    """Last step of a deployment, after every wiring call: the Timelock becomes the owner of every Ownable
    contract, so each owner setter from now on waits out its delay (issue 9, governance)."""
    ownable = {name for name, c in deployed.items() if "transferOwnership" in _method_names(c)}
    if ownable != set(TIMELOCKED):  # a new Ownable contract must be named in TIMELOCKED (and the docs) first
        raise click.ClickException(f"Ownable contracts {sorted(ownable)} differ from governance.TIMELOCKED "
                                   f"{sorted(TIMELOCKED)}")
    for name in TIMELOCKED:
        deployed[name].transferOwnership(timelock.address, sender=owner)


def _method_names(instance) -> set[str]:
    return {item.name for item in instance.contract_type.abi if item.type == "function"}


def _abi(contract_container) -> list[dict]:
    return [item.model_dump(mode="json", by_alias=True, exclude_none=True) for item in contract_container.contract_type.abi]


def _abi_with_delegates(name: str) -> list[dict]:
    """`name`'s ABI with what its delegatecall targets add (their errors; JobViews' functions too)."""
    def abi_of(contract: str) -> list[dict] | None:
        container = getattr(project, contract, None)
        return _abi(container) if container is not None else None

    return merged_abi(name, abi_of)


def _still_deployed(path: Path) -> bool:
    """A deployments file of this chain naming every v2 contract, each still holding code."""
    if not path.is_file():
        return False
    dep = Deployments.model_validate_json(path.read_bytes())
    return dep.chain_id == chain.chain_id and not missing_contracts(dep) and all(
        len(chain.provider.get_code(c.address)) > 0 for c in dep.contracts.values()
    )


def _deployer(alias: str | None):
    return accounts.load(alias) if alias else accounts.test_accounts[0]


@click.command(cls=ConnectedProviderCommand)
@click.option("--account", "alias", default=None, help="ape account alias (default: test account 0, devnet only)")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="deployments file (default .verity/deployments/<chain id>.json)")
@click.option("--faucet-accounts", default=10, show_default=True, help="test accounts to drip faucet tokens to (devnet only)")
@click.option("--force", is_flag=True, help="deploy again even if a live deployment exists")
@click.option("--randomness-delay", default=DEVNET_RANDOMNESS_DELAY, show_default=True,
              help="BlockhashRandomness: blocks between a randomness request (replica draws, referee panels) and the block whose hash decides it")
@click.option("--fee-epoch", default=DEVNET_FEE_EPOCH, show_default=True,
              help="VerificationFees: seconds per sampling epoch (at least the longest execution window on a public chain)")
@click.option("--block-seconds", type=click.IntRange(1, 60), default=None,
              help="JobRegistry: the chain's block time, seconds (default: measured from the last 20 blocks; the "
                   "minimum windows and the decline grace are blocks of it)")
def cli(network, alias, out, faucet_accounts, force, randomness_delay, fee_epoch, block_seconds):
    path = out or default_path(chain.chain_id)
    if not force and _still_deployed(path):
        click.echo(f"Verity already deployed on chain {chain.chain_id}: {path}")
        return
    owner = _deployer(alias)
    start_block = chain.blocks.head.number
    block_seconds = block_seconds or (1 if chain.chain_id == DEVNET_CHAIN_ID else block_seconds_of_chain())
    deployed = deploy_system(owner, randomness_delay, fee_epoch, block_seconds)
    if "DevnetFaucet" in deployed:  # the devnet: fund the well-known test accounts
        for acct in accounts.test_accounts[:faucet_accounts]:
            deployed["DevnetFaucet"].drip(acct.address, FAUCET, sender=owner)

    contracts = {name: DeployedContract(address=instance.address, abi=_abi_with_delegates(name), block=start_block)
                 for name, instance in deployed.items()}
    genesis = chain.blocks[0].hash  # per-chain record: chain id AND genesis (a fork or restarted chain differs)
    save_deployments(Deployments(chain_id=chain.chain_id, deployer=owner.address, contracts=contracts,
                                 genesis_hash=genesis.hex() if isinstance(genesis, bytes) else str(genesis)), path)
    click.echo(f"deployed Verity on chain {chain.chain_id}: " + ", ".join(f"{n}={c.address}" for n, c in contracts.items()))
    click.echo(f"wrote {path}")
