"""`verity job submit`: post a training job without ape — the job options of `ape run submit`,
signed with web3 by a devnet test account (--account N) or a key file (--key-file).

Every option is checked and the shards and manifest are built and validated before
anything is uploaded or any token approved; a bad option is one `error: --option: …` line.
After postJob the job's verification pot is funded (unless --no-verification-fee); if that
fails the job stays posted, unfunded, and the command exits 1 saying how to fund it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from verity.errors import VerityError
from verity.submit.modules import HELP as PARALLEL_HELP
from verity.submit.network import HELP as NETWORK_HELP
from verity.submit.options import HELP as OPTION_HELP, BadJobSpec, JobSpec

HELP = {**OPTION_HELP, **PARALLEL_HELP, **NETWORK_HELP}

D = JobSpec()  # the defaults, shared with `ape run submit` and `verity data shard`


def _opt(field: str, *decls: str, **kw):
    return typer.Option(*decls, help=HELP[field], **kw)


def _error(exc: BaseException) -> None:
    typer.echo(f"error: {exc}", err=True)  # plain: one line, never re-wrapped or read as markup
    raise typer.Exit(1)


def signer_key(account: int | None, key_file: Path | None, devnet_accounts: int) -> str:
    from verity.chain.client import devnet_key
    from verity.node.keyfile import read_key_file

    if key_file is not None:
        if account is not None:
            raise BadJobSpec("key_file", "give --account or --key-file, not both")
        try:
            return read_key_file(key_file)
        except VerityError as exc:
            raise BadJobSpec("key_file", str(exc)) from None
    index = 0 if account is None else account
    if not 0 <= index < devnet_accounts:
        raise BadJobSpec("account", f"{index} is not a devnet test account (0..{devnet_accounts - 1})")
    return devnet_key(index)


def confirm_post(yes: bool) -> None:
    """Ask a terminal before anything is uploaded or spent; --yes, or no terminal (a script, a pipe, CI), goes on."""
    import sys

    if yes or not sys.stdin.isatty():
        return
    if not typer.confirm("post this job?", default=True):
        typer.echo("not posted: nothing uploaded, nothing spent")
        raise typer.Exit(1)


def submit(
    model: Annotated[str, _opt("model")] = D.model,
    model_config: Annotated[Optional[str], _opt("model_config")] = None,
    init_from: Annotated[str, _opt("init_from")] = D.init_from,
    dataset: Annotated[str, _opt("dataset")] = D.dataset,
    shards: Annotated[Optional[int], _opt("shards")] = None,
    rounds: Annotated[int, _opt("rounds")] = D.rounds,
    steps: Annotated[int, _opt("steps")] = D.steps,
    k: Annotated[int, _opt("k", "-k", "--checkpoint-interval")] = D.k,
    replication: Annotated[int, _opt("replication")] = D.replication,
    payment: Annotated[float, _opt("payment")] = D.payment,
    stake: Annotated[float, _opt("stake")] = D.stake,
    aggregation: Annotated[str, _opt("aggregation")] = D.aggregation,
    trim: Annotated[float, _opt("trim")] = D.trim,
    batch_size: Annotated[int, _opt("batch_size")] = D.batch_size,
    optimizer: Annotated[str, _opt("optimizer")] = D.optimizer,
    lr: Annotated[float, _opt("lr")] = D.lr,
    seed: Annotated[int, _opt("seed")] = D.seed,
    eval_fraction: Annotated[float, _opt("eval_fraction")] = D.eval_fraction,
    block: Annotated[int, _opt("block")] = D.block,
    features: Annotated[str, _opt("features")] = D.features,
    label: Annotated[str, _opt("label")] = D.label,
    text_field: Annotated[str, _opt("text_field")] = D.text_field,
    image_size: Annotated[int, _opt("image_size")] = D.image_size,
    tokenizer: Annotated[str, _opt("tokenizer")] = D.tokenizer,
    vocab_size: Annotated[int, _opt("vocab_size")] = D.vocab_size,
    challenge_window: Annotated[int, _opt("challenge_window")] = D.challenge_window,
    execution_window: Annotated[int, _opt("execution_window", min=0)] = D.execution_window,
    result_floor: Annotated[Optional[int], _opt("result_floor", "--result-floor")] = None,
    name: Annotated[str, _opt("name")] = D.name,
    profile: Annotated[str, _opt("profile")] = D.profile,
    verification_fee: Annotated[Optional[float], _opt("verification_fee")] = None,
    checks_per_task: Annotated[int, _opt("checks_per_task")] = D.checks_per_task,
    fee_sample_rate: Annotated[float, _opt("fee_sample_rate")] = D.fee_sample_rate,
    no_verification_fee: Annotated[bool, _opt("no_verification_fee", "--no-verification-fee")] = False,
    modules: Annotated[str, _opt("modules")] = D.modules,
    module_plan: Annotated[str, _opt("module_plan")] = D.module_plan,
    outer_lr: Annotated[float, _opt("outer_lr")] = D.outer_lr,
    outer_momentum: Annotated[float, _opt("outer_momentum")] = D.outer_momentum,
    step_budget_ms: Annotated[int, _opt("step_budget_ms")] = D.step_budget_ms,
    region: Annotated[str, _opt("region")] = D.region,
    min_bandwidth_mbps: Annotated[int, _opt("min_bandwidth_mbps")] = D.min_bandwidth_mbps,
    account: Annotated[Optional[int], typer.Option(
        "--account", "-a", help="devnet test-account index to sign with (default 0)")] = None,
    key_file: Annotated[Optional[Path], typer.Option(
        "--key-file", help="file holding the submitter's hex private key (mode 600); for non-devnet chains")] = None,
    wait: Annotated[bool, typer.Option("--wait/--no-wait", help=HELP["wait"])] = False,
    timeout: Annotated[float, _opt("timeout", min=0)] = 1800.0,
    out: Annotated[Optional[Path], _opt("out")] = None,
    yes: Annotated[bool, _opt("yes", "--yes", "-y")] = False,
    dry_run: Annotated[bool, _opt("dry_run", "--dry-run")] = False,
) -> None:
    """Post a training job: shards and manifest to IPFS, escrow on-chain (no ape needed)."""
    from verity.chain.client import connect_chain
    from verity.cli.common import console, settings
    from verity.storage import Storage
    from verity.submit.prepare import (PotNotFunded, check_chain_web3, check_funds, fees_address_web3, fund_pot_web3,
                                       plan_job, post_job_web3, summary, upload_job)
    from verity.submit.options import check_writable, parse_model_config, verification_fee_of
    from verity.submit.wait import follow, job_record, still_running, write_record

    s = settings()
    try:
        check_writable("out", out)
        spec = JobSpec(model=model, model_config=parse_model_config(model_config), init_from=init_from,
                       dataset=dataset, shards=shards,
                       rounds=rounds, steps=steps, k=k, replication=replication, payment=payment, stake=stake,
                       aggregation=aggregation, trim=trim, batch_size=batch_size, optimizer=optimizer, lr=lr,
                       seed=seed, eval_fraction=eval_fraction, block=block, challenge_window=challenge_window,
                       execution_window=execution_window, features=features, label=label, text_field=text_field,
                       image_size=image_size, tokenizer=tokenizer, vocab_size=vocab_size,
                       result_floor=result_floor, name=name, profile=profile, verification_fee=verification_fee_of(payment, verification_fee, no_verification_fee),
                       checks_per_task=checks_per_task, fee_sample_rate=fee_sample_rate, modules=modules,
                       module_plan=module_plan, outer_lr=outer_lr, outer_momentum=outer_momentum,
                       step_budget_ms=step_budget_ms, region=region, min_bandwidth_mbps=min_bandwidth_mbps)
        chain = connect_chain(s.rpc_url, signer_key(account, key_file, s.devnet_accounts))
        with console.status("checking the job, building shards and manifest…"):
            prepared = plan_job(spec)
        check_funds(chain.call(chain.token.functions.balanceOf(chain.address)), prepared, chain.address)
        fees_address_web3(chain, prepared)
        for line in summary(prepared, check_chain_web3(chain, prepared)):
            typer.echo(line)
        if dry_run:
            typer.echo("dry run: nothing uploaded, nothing spent")
            return
        confirm_post(yes)
        with console.status("uploading shards and manifest…"):
            upload_job(prepared, Storage.from_settings(s))
        typer.echo(f"manifest {prepared.manifest_cid} ({len(prepared.manifest_bytes)} bytes), "
                   f"{prepared.spec.shards} shards uploaded")
        job_id = post_job_web3(chain, prepared)
        unfunded = None
        try:
            pot = fund_pot_web3(chain, job_id, prepared)
        except PotNotFunded as exc:
            pot, unfunded = 0, exc
        funded = prepared.pot_status(pot, unfunded is not None)
        typer.echo(f"posted job {job_id}: {prepared.escrow() / 1e18:g} VRT in escrow, {funded}, submitter {chain.address}")
        write_record(out, {**job_record(job_id, prepared, chain.address), "verification_pot": pot})
        if unfunded is not None:
            raise unfunded
        if wait:
            try:
                path = follow(chain, Storage.from_settings(s), job_id, timeout, s.state_dir)
            except KeyboardInterrupt:
                typer.echo(still_running(job_id), err=True)
                raise typer.Exit(130) from None
            typer.echo(f"final model verified against the on-chain hash, saved to {path}")
    except VerityError as exc:
        _error(exc)
