"""`ape run submit`: post a training job — shards and manifest to IPFS, escrow on-chain.

    ape run submit                                             # digits MLP, 4 shards x 3 rounds, on the devnet
    ape run submit --dataset corpus.txt --model gpt --steps 100 --wait
    ape run submit --dataset shards/                           # a directory written by `verity data shard`

On the devnet network (ethereum:local:foundry, the default) it talks to the anvil
that `verity devnet up` recorded, whatever its port ($VERITY_RPC_URL overrides).
Signs with an ape account (--account ALIAS), or ape test account N on the devnet
(--test-account N, default 0). Every option is checked, and the shards and manifest
built and validated, before anything is uploaded or any token approved. Without
ape: `verity job submit` takes the same job options. After postJob it funds the job's
verification pot (--verification-fee, --checks-per-task, --fee-sample-rate; --no-verification-fee
skips it); if that fails the job stays posted, unfunded, and the command exits 1 saying how to fund it.
"""
import os
import sys
from pathlib import Path

import click

from verity.errors import VerityError
from verity.submit.fit import network_fit, registered_nodes
from verity.submit.prepare import JobSpec, PotNotFunded, check_funds, check_windows, plan_job, summary, upload_job
from verity.submit.wait import still_running
from verity.submit.modules import HELP as PARALLEL_HELP
from verity.submit.network import HELP as NETWORK_HELP
from verity.submit.options import HELP as OPTION_HELP, BadJobSpec, check_writable, parse_model_config, verification_fee_of

HELP = {**OPTION_HELP, **PARALLEL_HELP, **NETWORK_HELP}

D = JobSpec()  # the defaults, shared with `verity job submit` and `verity data shard`
DEVNET_NETWORK = "ethereum:local:foundry"


def _devnet_rpc(network: str) -> str | None:
    """The devnet's RPC URL when `network` is the local foundry network, else None (ape's own settings)."""
    parts = (network.split(":") + ["", "", ""])[:3]
    if (parts[0] or "ethereum", parts[1] or "local", parts[2] or "foundry") != ("ethereum", "local", "foundry"):
        return None
    from verity.chain.client import ChainUnreachable, connect_chain
    from verity.chain.deployments import DeploymentMissing
    from verity.cli.common import settings

    rpc_url = settings().rpc_url
    try:
        connect_chain(rpc_url)  # answers, and a deployment is recorded for its chain id
    except (ChainUnreachable, DeploymentMissing) as exc:
        raise BadJobSpec("network", str(exc)) from None
    return rpc_url


def _sender(alias: str | None, test_account: int):
    from ape import accounts

    if alias:
        if alias not in list(accounts.aliases):
            known = ", ".join(accounts.aliases) or "none; add one with `ape accounts import`"
            raise BadJobSpec("alias", f"no ape account {alias!r} (known: {known})")
        return accounts.load(alias)
    test_accounts = accounts.test_accounts
    if not 0 <= test_account < len(test_accounts):
        raise BadJobSpec("test_account", f"{test_account} is not in 0..{len(test_accounts) - 1}")
    return test_accounts[test_account]


def _contracts(chain_id: int, provider, fees: bool):
    """Token, JobEscrow, JobRegistry, NodeRegistry and (with a verification pot, else None) VerificationFees of the
    deployment recorded for this chain, which must hold their code."""
    from ape import Contract

    from verity.chain.deployments import load_deployments

    names = ("VerityToken", "JobEscrow", "JobRegistry", "NodeRegistry")
    dep = load_deployments(chain_id)
    for name in names:
        if not provider.get_code(dep.contracts[name].address):
            raise BadJobSpec("network", f"chain {chain_id} at {provider.connection_str} has no {name} at "
                                        f"{dep.contracts[name].address}: not the devnet's chain (`verity devnet status`)")
    found = tuple(Contract(dep.contracts[n].address, abi=dep.contracts[n].abi) for n in names)
    if not fees:
        return (*found, None)
    fee_dep = dep.contracts.get("VerificationFees")
    if fee_dep is None or not provider.get_code(fee_dep.address):
        raise BadJobSpec("verification_fee", f"the deployment on chain {chain_id} has no VerificationFees contract "
                                             "(redeploy, or pass --no-verification-fee)")
    return (*found, Contract(fee_dep.address, abi=fee_dep.abi))


def _fund_pot(fees, token, job_id: int, prepared, sender) -> int:
    """Approve the pot to VerificationFees and fund the posted job's pot (0 without one); a failure is PotNotFunded."""
    terms = prepared.fee_terms()
    if terms is None:
        return 0
    try:
        token.approve(fees.address, terms.amount, sender=sender)  # VerificationFees pulls the pot at fund
        fees.fund(job_id, *terms, sender=sender)
    except Exception as exc:  # noqa: BLE001 - whatever failed, the job is posted: say so, with the way to fund it
        raise PotNotFunded(job_id, terms, fees.address, (str(exc).splitlines() or [type(exc).__name__])[0]) from exc
    return terms.amount


@click.command()
@click.option("--network", default=DEVNET_NETWORK, show_default=True,
              help="ape network choice; on ethereum:local:foundry, the devnet's recorded anvil, whatever its port")
@click.option("--model", default=D.model, show_default=True, help=HELP["model"])
@click.option("--model-config", default=None, help=HELP["model_config"])
@click.option("--dataset", default=D.dataset, show_default=True, help=HELP["dataset"])
@click.option("--shards", default=None, type=int, help=HELP["shards"])
@click.option("--init-from", default=D.init_from, help=HELP["init_from"])
@click.option("--rounds", default=D.rounds, show_default=True, help=HELP["rounds"])
@click.option("--steps", default=D.steps, show_default=True, help=HELP["steps"])
@click.option("-k", "--checkpoint-interval", "k", default=D.k, show_default=True, help=HELP["k"])
@click.option("--replication", default=D.replication, show_default=True, help=HELP["replication"])
@click.option("--payment", default=D.payment, show_default=True, help=HELP["payment"])
@click.option("--stake", default=D.stake, show_default=True, help=HELP["stake"])
@click.option("--aggregation", default=D.aggregation, show_default=True, help=HELP["aggregation"])
@click.option("--trim", default=D.trim, show_default=True, help=HELP["trim"])
@click.option("--batch-size", default=D.batch_size, show_default=True, help=HELP["batch_size"])
@click.option("--optimizer", default=D.optimizer, show_default=True, help=HELP["optimizer"])
@click.option("--lr", default=D.lr, show_default=True, help=HELP["lr"])
@click.option("--seed", default=D.seed, show_default=True, help=HELP["seed"])
@click.option("--eval-fraction", default=D.eval_fraction, show_default=True, help=HELP["eval_fraction"])
@click.option("--block", default=D.block, show_default=True, help=HELP["block"])
@click.option("--features", default=D.features, help=HELP["features"])
@click.option("--label", default=D.label, help=HELP["label"])
@click.option("--text-field", default=D.text_field, show_default=True, help=HELP["text_field"])
@click.option("--image-size", default=D.image_size, show_default=True, help=HELP["image_size"])
@click.option("--tokenizer", default=D.tokenizer, show_default=True, help=HELP["tokenizer"])
@click.option("--vocab-size", default=D.vocab_size, show_default=True, help=HELP["vocab_size"])
@click.option("--challenge-window", default=D.challenge_window, show_default=True, help=HELP["challenge_window"])
@click.option("--execution-window", default=D.execution_window, show_default=True, type=click.IntRange(min=0),
              help=HELP["execution_window"])
@click.option("--result-floor", default=None, type=int, help=HELP["result_floor"])
@click.option("--name", default=D.name, help=HELP["name"])
@click.option("--profile", default=D.profile, show_default=True, help=HELP["profile"])
@click.option("--verification-fee", default=None, type=float, help=HELP["verification_fee"])
@click.option("--checks-per-task", default=D.checks_per_task, show_default=True, help=HELP["checks_per_task"])
@click.option("--fee-sample-rate", default=D.fee_sample_rate, show_default=True, help=HELP["fee_sample_rate"])
@click.option("--no-verification-fee", is_flag=True, default=False, help=HELP["no_verification_fee"])
@click.option("--modules", default=D.modules, help=HELP["modules"])
@click.option("--module-plan", default=D.module_plan, help=HELP["module_plan"])
@click.option("--outer-lr", default=D.outer_lr, show_default=True, help=HELP["outer_lr"])
@click.option("--outer-momentum", default=D.outer_momentum, show_default=True, help=HELP["outer_momentum"])
@click.option("--step-budget-ms", default=D.step_budget_ms, show_default=True, help=HELP["step_budget_ms"])
@click.option("--region", default=D.region, help=HELP["region"])
@click.option("--min-bandwidth-mbps", default=D.min_bandwidth_mbps, show_default=True, help=HELP["min_bandwidth_mbps"])
@click.option("--account", "alias", default=None, help="ape account alias to sign with (default: --test-account)")
@click.option("--test-account", default=0, show_default=True, help="ape test account index (devnet only)")
@click.option("--wait/--no-wait", default=False, help=HELP["wait"])
@click.option("--timeout", default=1800.0, show_default=True, type=click.FloatRange(min=0), help=HELP["timeout"])
@click.option("--out", type=click.Path(path_type=Path), default=None, help=HELP["out"])
@click.option("--yes", "-y", is_flag=True, default=False, help=HELP["yes"])
@click.option("--dry-run", is_flag=True, default=False, help=HELP["dry_run"])
def cli(network, model, model_config, init_from, dataset, shards, rounds, steps, k, replication, payment, stake, aggregation,
        trim, batch_size, optimizer, lr, seed, eval_fraction, block, features, label, text_field, image_size, tokenizer,
        vocab_size, challenge_window, execution_window, result_floor,
        name, profile, verification_fee, checks_per_task, fee_sample_rate, no_verification_fee, modules, module_plan,
        outer_lr, outer_momentum, step_budget_ms, region, min_bandwidth_mbps, alias, test_account, wait, timeout, out,
        yes, dry_run):
    """Post a training job (shards and manifest to IPFS, escrow on-chain)."""
    from verity.cli.common import settings
    from verity.storage import Storage

    try:
        check_writable("out", out)
        spec = JobSpec(model=model, model_config=parse_model_config(model_config), init_from=init_from,
                       dataset=dataset, shards=shards,
                       rounds=rounds, steps=steps, k=k, replication=replication, payment=payment, stake=stake,
                       aggregation=aggregation, trim=trim, batch_size=batch_size, optimizer=optimizer, lr=lr,
                       seed=seed, eval_fraction=eval_fraction, block=block, challenge_window=challenge_window,
                       execution_window=execution_window, result_floor=result_floor, features=features, label=label,
                       text_field=text_field, image_size=image_size, tokenizer=tokenizer, vocab_size=vocab_size, name=name, profile=profile, verification_fee=verification_fee_of(payment, verification_fee, no_verification_fee),
                       checks_per_task=checks_per_task, fee_sample_rate=fee_sample_rate, modules=modules,
                       module_plan=module_plan, outer_lr=outer_lr, outer_momentum=outer_momentum,
                       step_budget_ms=step_budget_ms, region=region, min_bandwidth_mbps=min_bandwidth_mbps)
        sender = _sender(alias, test_account)
        rpc_url = _devnet_rpc(network)
        prepared = plan_job(spec)
    except VerityError as exc:
        raise click.ClickException(str(exc)) from None
    from ape import networks

    provider_settings = None
    if rpc_url:  # ape-foundry reads APE_FOUNDRY_HOST before its settings; never start a second anvil
        os.environ["APE_FOUNDRY_HOST"] = rpc_url
        provider_settings = {"host": rpc_url, "manage_process": False}
    with networks.parse_network_choice(network, provider_settings=provider_settings) as provider:
        try:
            token, escrow_contract, jobs, registry, fees = _contracts(provider.chain_id, provider, prepared.pot() > 0)
            check_funds(token.balanceOf(sender.address), prepared, sender.address)
            check_windows(prepared, jobs.blockSeconds(), jobs.defaultExecutionWindow(),  # this chain's minimums
                          jobs.defaultRevealWindow())
            params = prepared.post_params()
            network_fit_ = network_fit(registered_nodes(registry.nodeCount(), registry.nodeList, registry.getNode),
                                       prepared.fit, int(params.profileBit), int(params.deviceClass))
            for line in summary(prepared, network_fit_):
                click.echo(line)
            if dry_run:
                click.echo("dry run: nothing uploaded, nothing spent")
                return
            if not yes and sys.stdin.isatty() and not click.confirm("post this job?", default=True):
                raise click.ClickException("not posted: nothing uploaded, nothing spent")
            upload_job(prepared, Storage.from_settings(settings()))
        except VerityError as exc:
            raise click.ClickException(str(exc)) from None
        click.echo(f"manifest {prepared.manifest_cid} ({len(prepared.manifest_bytes)} bytes), "
                   f"{prepared.spec.shards} shards uploaded")
        escrow = prepared.escrow()
        token.approve(escrow_contract.address, escrow, sender=sender)  # JobEscrow pulls the escrow at postJob
        receipt = jobs.postJob(prepared.post_params(), sender=sender)
        job_id = int(next(iter(receipt.decode_logs(jobs.JobPosted))).jobId)
        unfunded = None
        try:
            pot = _fund_pot(fees, token, job_id, prepared, sender)
        except PotNotFunded as exc:
            pot, unfunded = 0, exc
        funded = prepared.pot_status(pot, unfunded is not None)
        click.echo(f"posted job {job_id}: {escrow / 1e18:g} VRT in escrow, {funded}, tx {receipt.txn_hash}")
        from verity.submit.wait import job_record, write_record

        write_record(out, {**job_record(job_id, prepared, sender.address), "verification_pot": pot})
        if unfunded is not None:
            raise click.ClickException(str(unfunded))
        if wait:
            _wait(provider.uri, job_id, timeout)


def _wait(rpc_url: str, job_id: int, timeout: float) -> None:
    from verity.chain.client import connect_chain
    from verity.cli.common import settings
    from verity.storage import Storage
    from verity.submit.wait import follow

    s = settings()
    try:
        path = follow(connect_chain(rpc_url), Storage.from_settings(s), job_id, timeout, s.state_dir)
    except VerityError as exc:
        raise click.ClickException(str(exc)) from None
    except KeyboardInterrupt:
        raise click.ClickException(still_running(job_id)) from None
    click.echo(f"final model verified against the on-chain hash, saved to {path}")
