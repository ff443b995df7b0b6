"""`ape run submit`: post a training job — shards and manifest to IPFS, escrow on-chain.

    ape run submit --network ethereum:local:foundry                 # digits MLP, 4 shards x 3 rounds
    ape run submit --dataset corpus.txt --model gpt --steps 100 --wait

Signs with an ape account (--account ALIAS), or ape test account N on the devnet
(--test-account N, default 0). With --wait, follows the job until the final
model is downloaded and verified.
"""
import json
import time
from pathlib import Path

import click
from ape import Contract, accounts, chain
from ape.cli import ConnectedProviderCommand

from verity.chain.deployments import load_deployments
from verity.errors import VerityError
from verity.settings import Settings
from verity.storage import Storage
from verity.submit import JobSpec, prepare_job


def _contract(dep, name):
    c = dep.contracts[name]
    return Contract(c.address, abi=c.abi)


def _storage() -> Storage:
    from verity.cli.common import settings

    return Storage.from_settings(settings())


@click.command(cls=ConnectedProviderCommand)
@click.option("--model", default="mlp", show_default=True, type=click.Choice(["mlp", "cnn", "gpt"]))
@click.option("--model-config", default=None, help="JSON model config (default: sized to the data)")
@click.option("--dataset", default="digits", show_default=True, help="'digits' (bundled), an .npz/.safetensors (x, y) pair, or a .txt corpus")
@click.option("--shards", default=4, show_default=True)
@click.option("--rounds", default=3, show_default=True)
@click.option("--steps", default=40, show_default=True, help="training steps per round")
@click.option("-k", "--checkpoint-interval", "k", default=10, show_default=True)
@click.option("--replication", default=2, show_default=True, type=click.IntRange(1, 2))
@click.option("--payment", default=1.0, show_default=True, help="VRT per accepted replica of each task")
@click.option("--stake", default=10.0, show_default=True, help="VRT each replica locks")
@click.option("--aggregation", default="mean", show_default=True, type=click.Choice(["mean", "median", "trimmed_mean"]))
@click.option("--trim", default=0.0, show_default=True)
@click.option("--batch-size", default=32, show_default=True)
@click.option("--optimizer", default="adam", show_default=True, type=click.Choice(["sgd", "adam", "adamw"]))
@click.option("--lr", default=0.01, show_default=True)
@click.option("--seed", default=0, show_default=True)
@click.option("--challenge-window", default=60, show_default=True, help="seconds (replication 1)")
@click.option("--account", "alias", default=None, help="ape account alias")
@click.option("--test-account", default=0, show_default=True, help="ape test account index (devnet)")
@click.option("--wait/--no-wait", default=False, help="follow the job until the final model is downloaded")
@click.option("--timeout", default=1800.0, show_default=True, help="--wait gives up after this many seconds")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="write {job_id, manifest_cid, …} as JSON here")
def cli(network, model, model_config, dataset, shards, rounds, steps, k, replication, payment, stake, aggregation,
        trim, batch_size, optimizer, lr, seed, challenge_window, alias, test_account, wait, timeout, out):
    spec = JobSpec(model=model, model_config=json.loads(model_config) if model_config else None, dataset=dataset,
                   shards=shards, rounds=rounds, steps=steps, k=k, replication=replication, payment=payment,
                   stake=stake, aggregation=aggregation, trim=trim, batch_size=batch_size, optimizer=optimizer,
                   lr=lr, seed=seed, challenge_window=challenge_window)
    sender = accounts.load(alias) if alias else accounts.test_accounts[test_account]
    try:
        storage = _storage()
        prepared = prepare_job(spec, storage)
        dep = load_deployments(chain.chain_id)
    except VerityError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"manifest {prepared.manifest_cid} ({len(prepared.manifest_bytes)} bytes), {shards} shards uploaded")
    token, jobs = _contract(dep, "VerityToken"), _contract(dep, "JobRegistry")
    escrow = prepared.escrow()
    if token.balanceOf(sender.address) < escrow:
        raise click.ClickException(f"{sender.address} holds {token.balanceOf(sender.address) / 1e18:g} VRT; the escrow is {escrow / 1e18:g} VRT")
    token.approve(jobs.address, escrow, sender=sender)
    receipt = jobs.postJob(prepared.post_params(), sender=sender)
    job_id = int(next(iter(receipt.decode_logs(jobs.JobPosted))).jobId)
    click.echo(f"posted job {job_id}: {escrow / 1e18:g} VRT in escrow, tx {receipt.txn_hash}")
    record = {"job_id": job_id, "manifest_cid": prepared.manifest_cid, "escrow": escrow, "submitter": sender.address,
              "initial_hash": "0x" + prepared.initial_hash.hex()}
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(record, indent=1))
    if wait:
        _wait(job_id, timeout)


def _wait(job_id: int, timeout: float) -> None:
    from rich.live import Live

    from verity.chain.client import connect_chain
    from verity.cli.common import console, settings
    from verity.cli.job import render
    from verity.jobview import JobReader

    s = settings()
    reader = JobReader(connect_chain(s.rpc_url), Storage.from_settings(s), job_id)
    deadline = time.monotonic() + timeout
    with Live(render(rep := reader.report()), console=console, refresh_per_second=2) as live:
        while rep.status == "active" and time.monotonic() < deadline:
            time.sleep(1.0)
            rep = reader.report()
            live.update(render(rep))
    if rep.status != "completed":
        raise click.ClickException(f"job {job_id} ended {rep.status!r} (or timed out)")
    model = reader.round_model(rep.rounds - 1)
    path = Settings().state_dir / "jobs" / str(job_id) / "model.safetensors"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(model)
    click.echo(f"final model (result bundle {rep.model_cid}) verified against the on-chain hash, saved to {path}")
