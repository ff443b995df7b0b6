"""`ape run deploy`: deploy and wire Verity's contracts, write the deployments file.

Safe to run twice: if the deployments file for this chain points at contracts
that still have code, nothing is deployed again (pass --force to redeploy).
On a local network the deployer also mints faucet tokens to the test accounts.
"""
from pathlib import Path

import click
from ape import accounts, chain, project
from ape.cli import ConnectedProviderCommand

from verity.chain.deployments import DeployedContract, Deployments, default_path, save_deployments

FAUCET = 1_000_000 * 10**18


def _abi(contract_container) -> list[dict]:
    return [item.model_dump(mode="json", by_alias=True, exclude_none=True) for item in contract_container.contract_type.abi]


def _still_deployed(path: Path) -> bool:
    if not path.is_file():
        return False
    dep = Deployments.model_validate_json(path.read_bytes())
    return dep.chain_id == chain.chain_id and all(
        len(chain.provider.get_code(c.address)) > 0 for c in dep.contracts.values()
    )


def _deployer(alias: str | None):
    return accounts.load(alias) if alias else accounts.test_accounts[0]


@click.command(cls=ConnectedProviderCommand)
@click.option("--account", "alias", default=None, help="ape account alias (default: test account 0, devnet only)")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="deployments file (default .verity/deployments/<chain id>.json)")
@click.option("--faucet-accounts", default=10, show_default=True, help="test accounts to mint faucet tokens to (local networks only)")
@click.option("--force", is_flag=True, help="deploy again even if a live deployment exists")
def cli(network, alias, out, faucet_accounts, force):
    path = out or default_path(chain.chain_id)
    if not force and _still_deployed(path):
        click.echo(f"Verity already deployed on chain {chain.chain_id}: {path}")
        return
    owner = _deployer(alias)
    start_block = chain.blocks.head.number
    token = owner.deploy(project.VerityToken)
    registry = owner.deploy(project.NodeRegistry, token.address)
    jobs = owner.deploy(project.JobRegistry, token.address, registry.address)
    game = owner.deploy(project.DisputeGame, token.address, registry.address, jobs.address)
    registry.setProtocol(jobs.address, True, sender=owner)
    registry.setProtocol(game.address, True, sender=owner)
    jobs.setDisputeGame(game.address, sender=owner)

    if chain.chain_id == 31337:  # the devnet: fund the well-known test accounts
        for acct in accounts.test_accounts[:faucet_accounts]:
            token.mint(acct.address, FAUCET, sender=owner)

    deployed = {}
    for name, instance in (("VerityToken", token), ("NodeRegistry", registry), ("JobRegistry", jobs), ("DisputeGame", game)):
        deployed[name] = DeployedContract(
            address=instance.address,
            abi=_abi(getattr(project, name)),
            block=start_block,
        )
    save_deployments(Deployments(chain_id=chain.chain_id, deployer=owner.address, contracts=deployed), path)
    click.echo(f"deployed Verity on chain {chain.chain_id}: " + ", ".join(f"{n}={c.address}" for n, c in deployed.items()))
    click.echo(f"wrote {path}")
