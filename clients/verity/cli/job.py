"""`verity job …`: list jobs, follow a job's rounds, tasks, replicas and disputes, cancel or reclaim
its escrow, and download its model with a model card."""
from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from verity.cli.common import console, fail, settings
from verity.errors import VerityError
from verity.job.table import render  # noqa: F401  (demo.py and scripts/submit.py import it from here)

app = typer.Typer(no_args_is_help=True, help="List, inspect, follow, cancel and download jobs.")
JobId = Annotated[int, typer.Argument(help="on-chain job id")]
Plot = Annotated[Optional[Path], typer.Option("--plot", help="also write the loss curve (rounds and checkpoints) as a PNG here")]
Account = Annotated[Optional[int], typer.Option("--account", "-a", help="sign as devnet test account N (ape test accounts)")]
KeyFile = Annotated[Optional[Path], typer.Option("--key-file", help="sign with the hex private key in this file (mode 600)")]


class StatusFilter(str, Enum):
    active = "active"
    completed = "completed"
    cancelled = "cancelled"
    failed = "failed"  # declined for invalid inputs by FAIL_DECLINES nodes: refunded minus the poster bond


def _storage():
    from verity.storage import Storage

    return Storage.from_settings(settings())


def _chain(account: int | None = None, key_file: Path | None = None, sign: bool = False):
    from verity.chain.client import connect_chain, devnet_key

    key = None
    if key_file is not None:
        from verity.node.keyfile import read_key_file

        key = read_key_file(key_file)
    elif account is not None:
        key = devnet_key(account)
    elif sign:
        raise VerityError("sign as the job's submitter: pass --account N (devnet test account) or --key-file FILE")
    return connect_chain(settings().rpc_url, key)


def reader(job_id: int, chain=None):
    from verity.job.view import JobReader

    return JobReader(chain or _chain(), _storage(), job_id)


def _plot(r, rep, out: Path) -> None:
    from verity.job.plot import checkpoint_losses, plot

    what = plot(rep, out, checkpoint_losses(r, rep) if rep.metrics else [])
    console.print(f"wrote {out} ({what})")


@app.command("list")
def list_jobs(status: Annotated[Optional[StatusFilter], typer.Option(help="only jobs with this status")] = None,
              submitter: Annotated[Optional[str], typer.Option(help="only jobs posted by this address")] = None,
              last: Annotated[int, typer.Option(min=1, help="look at the newest N jobs")] = 20) -> None:
    """The newest jobs on this deployment: status, round, size, escrow left, submitter, age."""
    from verity.index import open_index

    try:
        c = _chain()
        with open_index(c) as ix:
            ix.sync()
            t = jobs_table(c, ix, status.value if status else None, submitter, last)
    except VerityError as exc:
        fail(exc)
    console.print(t)


def jobs_table(c, ix, status: str | None = None, submitter: str | None = None, last: int = 20) -> Table:
    """`job list`'s table of the newest `last` jobs. Ids, submitters, status, round and escrow come from the event
    index (`verity.job.listing`, synced by the caller); the chain is asked once for its time and once per row shown
    (`getJob`) for what no event carries: rounds, shards, replication, payment and post time."""
    from verity.chain.views import read
    from verity.job.advice import countdown, signer_hint
    from verity.job.listing import JOB_EVENTS, JobLine, job_lines

    posted = {int(e.args["jobId"]): e.args["submitter"] for e in ix.live_events(names=["JobPosted"])}
    count = max(posted, default=0)
    newest = [j for j in range(count, max(0, count - last), -1)
              if not submitter or str(posted.get(j, "")).lower() == submitter.lower()]
    lines = job_lines(ix.live_events(job_ids=newest, names=JOB_EVENTS))
    now = c.now()
    t = Table(title=f"jobs {max(1, count - last + 1)}..{count} of {count}" if count else "no jobs posted yet")
    for col in ("job", "status", "round", "shards", "replication", "payment/task", "escrow left", "submitter", "posted"):
        t.add_column(col)
    for job_id in newest:
        line = lines.get(job_id) or JobLine(job_id, posted.get(job_id, ""))
        if status and line.status != status:
            continue
        j = read(c, c.jobs, "getJob", job_id)
        hint = signer_hint(line.submitter, c.deployments.chain_id)
        who = line.submitter[:10] + "…" + (f" ({hint})" if hint.startswith("--account") else "")
        t.add_row(str(job_id), line.status, f"{min(line.round + 1, j.rounds)}/{j.rounds}", str(j.shards),
                  str(j.replication), f"{j.paymentPerTask / 1e18:g}", f"{line.escrow / 1e18:g} VRT", who,
                  f"{countdown(now - j.postedAt)} ago")
    return t


def local_names() -> dict[str, str]:
    """address -> name of every node run from this machine's state dir (`verity node run --name`): tables name them."""
    from verity.node.statedir import node_names

    return node_names(settings().state_dir)


@app.command()
def show(job_id: JobId, plot_to: Plot = None) -> None:
    """One snapshot of the job: tasks, replicas (replaced ones too), clocks, why tasks wait, metrics."""
    try:
        r = reader(job_id)
        rep = r.report()
        console.print(render(rep, local_names()))
        if plot_to:
            _plot(r, rep, plot_to)
    except VerityError as exc:
        fail(exc)


@app.command()
def watch(job_id: JobId, plot_to: Plot = None,
          timeout: Annotated[float, typer.Option(min=0, help="give up after this many seconds (exit 1, with advice)")] = 3600.0,
          interval: Annotated[float, typer.Option(min=0.2, help="seconds between refreshes (≥ 0.2)")] = 1.0) -> None:
    """Live table until the job completes or is cancelled; on timeout, says what it waits for."""
    from verity.job.table import follow_live
    from verity.job.view import advice

    try:
        r = reader(job_id)
        rep = follow_live(r, timeout, interval, names=local_names())
        if plot_to:
            _plot(r, rep, plot_to)
    except VerityError as exc:
        fail(exc)
    if rep.status == "active":
        for line in advice(rep):
            console.print(line, markup=False)
        fail(VerityError(f"job {job_id} still active after {timeout:.0f} s"))


def _hint(account: int | None, key_file: Path | None) -> str:
    """How this command was signed, to repeat in a follow-up command it prints."""
    return f"--account {account}" if account is not None else f"--key-file {key_file}"


def _escrow_action(action: str, job_id: int, account, key_file, c=None) -> tuple:
    """Send cancelJob / reclaimEscrow as the submitter; a revert becomes a one-line reason."""
    from verity.chain import TxFailed
    from verity.job.advice import refusal

    c = c or _chain(account, key_file, sign=True)
    r = reader(job_id, c)
    amount = r.escrow()
    before = c.call(c.token.functions.balanceOf(c.address))
    fn = c.jobs.functions.cancelJob(job_id) if action == "cancel" else c.jobs.functions.reclaimEscrow(job_id)
    try:
        c.transact(fn)
    except TxFailed as exc:
        raise refusal(action, r.report(metrics=False), exc.error, c.address) from None
    return c.address, amount, before, c.call(c.token.functions.balanceOf(c.address))


@app.command()
def cancel(job_id: JobId, account: Account = None, key_file: KeyFile = None) -> None:
    """Cancel an active job and refund its escrow: allowed before any assignment, or once a slot stayed empty past the assignment timeout (`job show` says when). Its verification pot is closed with it and refunded by `job reclaim` after the fee claim grace."""
    from verity.job.pot import settle_pot

    try:
        c = _chain(account, key_file, sign=True)
        who, amount, before, after = _escrow_action("cancel", job_id, account, key_file, c)
    except VerityError as exc:
        fail(exc)
    console.print(f"[green]cancelled[/green] job {job_id}: refunded {amount / 1e18:g} VRT to {who} "
                  f"(balance {before / 1e18:,.2f} → {after / 1e18:,.2f} VRT)")
    try:
        line = settle_pot(c, job_id, _hint(account, key_file))
    except VerityError as exc:  # the job is cancelled either way: say what is left to do with its pot
        line = f"verification pot: {exc}; `verity job reclaim {job_id} {_hint(account, key_file)}` tries again"
    if line:
        console.print(line, markup=False)


@app.command()
def reclaim(job_id: JobId, account: Account = None, key_file: KeyFile = None) -> None:
    """Take back the unspent escrow of a completed job (payments of replaced or slashed replicas), and the rest of an ended job's verification pot once its fee claim grace is over."""
    from verity.job.pot import settle_pot

    try:
        c = _chain(account, key_file, sign=True)
    except VerityError as exc:
        fail(exc)
    refused = None
    try:
        who, amount, before, after = _escrow_action("reclaim", job_id, account, key_file, c)
        console.print(f"[green]reclaimed[/green] {amount / 1e18:g} VRT of job {job_id} to {who} "
                      f"(balance {before / 1e18:,.2f} → {after / 1e18:,.2f} VRT)")
    except VerityError as exc:
        refused = exc
    try:
        line = settle_pot(c, job_id, _hint(account, key_file))
    except VerityError as exc:
        line = f"verification pot: {exc}"
    if line:
        console.print(line, markup=False)
    if refused is not None and line is None:
        fail(refused)


def _vocab(r) -> str | None:
    """Text models: the characters behind the token ids, from the eval shard (or shard 1) metadata."""
    if r.manifest.data.task != "lm":
        return None
    shard = r.eval_shard()
    if shard is None:
        from verity.engine.data import load_shard, shard_cap

        ref = r.manifest.shards[0]
        shard = load_shard(r.storage.get_bytes(ref.cid, max_bytes=shard_cap(r.manifest.data, ref.samples)), r.manifest.data, samples=ref.samples, source="shard 1")
    return shard.meta.vocab


def _write_hf(r, data: bytes, out: Path) -> None:
    """`download --format hf`: the verified final model as a transformers model directory."""
    from verity.engine.checkpoint import load_checkpoint
    from verity.hf.files import write_hf_dir

    state = load_checkpoint(data, r.manifest, source="final model")
    vocab = _vocab(r) if r.manifest.data.tokenizer_cid is None else None
    for p in write_hf_dir(out, r.manifest, state.model_tensors(), _tokenizer(r), vocab):
        console.print(f"wrote {p}")
    console.print(f"load it with transformers: AutoModelForCausalLM.from_pretrained({str(out)!r}) "
                  f"(state hash 0x{state.hash.hex()[:16]}… verified against the chain)")


def _tokenizer(r) -> bytes | None:
    """The job's tokenizer.json (manifest `data.tokenizer_cid`), checked against `data.tokenizer_sha256`."""
    import hashlib

    d = r.manifest.data
    if d.tokenizer_cid is None:
        return None
    data = r.storage.get_bytes(d.tokenizer_cid, max_bytes=64 << 20)
    if hashlib.sha256(data).hexdigest() != d.tokenizer_sha256:
        raise VerityError(f"the tokenizer at {d.tokenizer_cid} is not the one the manifest names "
                          f"(sha256 {d.tokenizer_sha256})")
    return data


@app.command()
def download(job_id: JobId,
             out: Annotated[Optional[Path], typer.Option("--out", "-o", help="where to write the weights: a safetensors "
                                                         "file (default model.safetensors), or with --format hf a "
                                                         "directory (default model-hf)")] = None,
             card: Annotated[bool, typer.Option(help="also write a model card, config and plain-PyTorch loader beside it")] = True,
             fmt: Annotated[str, typer.Option("--format", help="verity: the checkpoint as trained, with a model card | "
                                                             "hf: config.json, model.safetensors and the tokenizer, "
                                                             "for transformers' AutoModelForCausalLM / AutoTokenizer "
                                                             "(decoder and gpt models)")] = "verity") -> None:
    """Download the job's final model (verified against the on-chain hash) and its model card."""
    from verity.cid import digest_to_cid
    from verity.engine.tensorfile import atomic_write
    from verity.model_card import CardFacts, write_model_card

    if fmt not in ("verity", "hf"):
        fail(VerityError(f"--format: {fmt!r} is not verity or hf"))
    try:
        r = reader(job_id)
        job = r.job()
        if not int.from_bytes(bytes(job.modelHash), "big"):
            raise VerityError(f"job {job_id} has no final model yet (status {r.report(metrics=False).status})")
        if fmt == "hf":
            from verity.hf.configs import hf_family

            hf_family(r.manifest.model.arch, r.manifest.model.config)  # refuse before downloading anything
        data = r.round_model(int(job.rounds) - 1)
        if fmt == "hf":
            _write_hf(r, data, out or Path("model-hf"))
            return
        out = out or Path("model.safetensors")
        out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(out, lambda f: f.write(data))
        written = []
        if card:
            facts = CardFacts(job_id, r.manifest, digest_to_cid(job.manifestCid), "0x" + bytes(job.modelHash).hex(),
                              digest_to_cid(job.modelCid), r.chain.deployments.chain_id, _vocab(r), r.report().metrics)
            written = write_model_card(out, facts)
        tokenizer = _tokenizer(r)
        if tokenizer is not None:  # a BPE or supplied tokenizer: what turns the model's token ids back into text
            path = out.with_name(out.with_suffix("").name + ".tokenizer.json")
            atomic_write(path, lambda f: f.write(tokenizer))
            written.append(path)
    except VerityError as exc:
        fail(exc)
    console.print(f"wrote {out} ({len(data)} bytes, hash 0x{bytes(job.modelHash).hex()[:16]}…)")
    for p in written:
        console.print(f"wrote {p}")
