"""`verity data …`: build shards, inspect them, print the manifest schema."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from verity.submit import options as opts
from verity.errors import VerityError

app = typer.Typer(no_args_is_help=True, help="Dataset shards and the job manifest schema.")
D = opts.JobSpec()  # the reading options' defaults, shared with the submit commands
console = Console()


def _fail(e: VerityError) -> None:
    from rich.markup import escape

    from verity.submit.data import one_line

    console.print(f"[red]error:[/red] {escape(str(e) if isinstance(e, opts.BadJobSpec) else one_line(e))}")
    raise typer.Exit(1)


@app.command()
def shard(
    out: Annotated[Path, typer.Option("--out", "-o", help="output directory (must be empty or absent); pass it to `verity job submit --dataset`")],
    source: Annotated[str, typer.Argument(help="'digits' (sklearn, bundled), a .npz / .safetensors with x and y, a "
                                               ".csv / .tsv / .parquet table, a .txt or .jsonl corpus, or an image "
                                               "folder (one sub-directory per class)")] = opts.DATASET,
    shards: Annotated[int, typer.Option("--shards", "-n", help=f"number of shards, 1..{opts.MAX_SHARDS} (the most a job may have)")] = opts.SHARDS,
    eval_fraction: Annotated[float, typer.Option(help=opts.HELP["eval_fraction"])] = opts.EVAL_FRACTION,
    seed: Annotated[int, typer.Option(help="shuffle seed")] = opts.SEED,
    image: Annotated[bool, typer.Option(help="digits as (1, 8, 8) images for the cnn")] = False,
    block: Annotated[int, typer.Option(help=opts.HELP["block"])] = opts.BLOCK,
    stride: Annotated[Optional[int], typer.Option(min=1, help="text: window stride (default: block)")] = None,
    features: Annotated[str, typer.Option(help=opts.HELP["features"])] = D.features,
    label: Annotated[str, typer.Option(help=opts.HELP["label"])] = D.label,
    text_field: Annotated[str, typer.Option(help=opts.HELP["text_field"])] = D.text_field,
    image_size: Annotated[int, typer.Option(help=opts.HELP["image_size"])] = D.image_size,
    tokenizer: Annotated[str, typer.Option(help=opts.HELP["tokenizer"])] = D.tokenizer,
    vocab_size: Annotated[int, typer.Option(help=opts.HELP["vocab_size"])] = D.vocab_size,
) -> None:
    """Split a local dataset into N shards (+ an eval shard) and write index.json (and tokenizer.json for a
    tokenized text). A bad row, line or file is one error line naming it; nothing is written then."""
    from verity.engine import datasets
    from verity.submit.data import Reading, build_shards, read_source

    try:
        for field, value, lo, hi in (("shards", shards, 1, opts.MAX_SHARDS), ("eval_fraction", eval_fraction, 0.0, 0.9),
                                     ("block", block, 1, 4096)):
            if not lo <= value <= hi:
                raise opts.BadJobSpec(field, f"{value} is not in {lo}..{hi}")
        reading = Reading(block=block, stride=stride, image=image, features=features, label=label,
                          text_field=text_field, image_size=image_size, tokenizer=tokenizer, vocab_size=vocab_size)
        src = read_source(source, reading)
        built = build_shards(src, shards, eval_fraction=eval_fraction, seed=seed, source=Path(source).name)
        index = datasets.write_shards(out, built)
        if src.tokens is not None:
            (out / "tokenizer.json").write_bytes(src.tokens.tokenizer)
    except VerityError as e:
        _fail(e)
    except OSError as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(1)
    table = Table("file", "samples", "sha256")
    for entry in [*index["shards"], *([index["eval"]] if index["eval"] else [])]:
        table.add_row(entry["file"], str(entry["samples"]), entry["sha256"][:16] + "…")
    console.print(table)
    console.print(f"manifest data section: {json.dumps(index['data'])}")
    if src.tokens is not None:
        console.print(f"wrote {out / 'tokenizer.json'} ({src.tokens.vocab_size} tokens, sha256 {src.tokens.sha256})")
    console.print(f"wrote {out / 'index.json'}")


@app.command()
def inspect(path: Annotated[Path, typer.Argument(help="a shard file")]) -> None:
    """Validate a shard against its own metadata and print it."""
    from verity.engine.data import ShardMeta, load_shard
    from verity.engine.tensorfile import read_safetensors
    from verity.errors import ShardInvalid

    data = path.read_bytes()
    try:
        _, md = read_safetensors(data, str(path), ShardInvalid, max_bytes=1 << 31, max_elements=1 << 30)
        meta = ShardMeta.model_validate_json(md.get("verity", "{}"))
        load_shard(data, meta.spec(), source=str(path))
    except (VerityError, ValueError) as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(1)
    console.print_json(meta.model_dump_json())


@app.command()
def schema(out: Annotated[Optional[Path], typer.Option("--out", "-o", help="write the schema here instead of stdout")] = None) -> None:
    """Print (or write) the JSON schema of the job manifest."""
    from verity.engine.manifest import manifest_schema

    text = json.dumps(manifest_schema(), indent=1) + "\n"
    if out is None:
        typer.echo(text, nl=False)
    else:
        out.write_text(text)
        console.print(f"wrote {out}")


@app.command()
def check(path: Annotated[Path, typer.Argument(help="a manifest JSON file")]) -> None:
    """Validate a job manifest."""
    from verity.engine.manifest import load_manifest

    try:
        m = load_manifest(path.read_bytes())
    except VerityError as e:
        _fail(e)
    console.print(f"[green]ok[/green]: {m.model.arch}, {len(m.shards)} shards × {m.rounds} rounds, "
                  f"{m.steps_per_round} steps/round, k = {m.checkpoint_interval}, profile {m.determinism}")
