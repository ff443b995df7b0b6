"""The `verity` command: one typer sub-app per noun, joined here."""
import typer

from verity.cli.data import app as data_app

app = typer.Typer(no_args_is_help=True, help="Verity: verifiable ML training.")
app.add_typer(data_app, name="data")
