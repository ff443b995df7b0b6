"""Every option and argument of `verity …` and `ape run submit` says what it is for,
and the TEST-ONLY fault injection stays out of sight unless enabled."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
import typer.main

ROOT = Path(__file__).resolve().parents[2]
BUILTIN = {"help", "install_completion", "show_completion"}


def _commands(cmd: click.Command, path: str):
    yield path, cmd
    if isinstance(cmd, click.Group):
        for name, sub in cmd.commands.items():
            yield from _commands(sub, f"{path} {name}")


def _undocumented(cmd: click.Command) -> list[str]:
    return [p.name for p in cmd.params
            if p.name not in BUILTIN and not getattr(p, "hidden", False) and not (getattr(p, "help", None) or "").strip()]


def _verity() -> click.Command:
    from verity.cli import app

    return typer.main.get_command(app)


def test_verityCli_everyParameterHasHelp_succeeds():
    missing = {path: names for path, cmd in _commands(_verity(), "verity") if (names := _undocumented(cmd))}
    assert not missing, f"parameters without help text: {missing}"


def test_verityCli_everyCommandHasHelp_succeeds():
    missing = [path for path, cmd in _commands(_verity(), "verity") if not (cmd.help or "").strip()]
    assert not missing, f"commands without a description: {missing}"


def test_apeRunSubmit_everyOptionHasHelp_succeeds():
    spec = importlib.util.spec_from_file_location("verity_submit_script", ROOT / "scripts" / "submit.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    ours = [p for p in module.cli.params if p.name not in BUILTIN and p.name != "network" and p.name != "verbosity"]
    assert ours, "scripts/submit.py defines no options"
    assert not _undocumented(click.Command("x", params=ours)), "ape run submit options without help text"


def _verity_help(*args: str, **env: str) -> str:
    full = {k: v for k, v in os.environ.items() if k != "VERITY_ENABLE_FAULTS"} | env
    res = subprocess.run([sys.executable, "-m", "verity", *args, "--help"], capture_output=True, text=True,
                         env={**full, "COLUMNS": "200"}, timeout=60)
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_nodeRun_faultOption_hiddenByDefault_succeeds():
    assert "--fault" not in _verity_help("node", "run")
    assert "--fault" in _verity_help("node", "run", VERITY_ENABLE_FAULTS="1")


def test_verity_version_succeeds():
    from verity import __version__

    res = subprocess.run([sys.executable, "-m", "verity", "--version"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and res.stdout.strip() == f"verity {__version__}"


def test_verityCli_helpImportsNoTorch_succeeds():
    """`verity --help` and every command's option parsing come before any training: the CLI's modules leave torch
    (seconds of import) to the commands that train or check models."""
    code = "import sys, verity.cli; print(','.join(m for m in ('torch', 'verity.engine') if m in sys.modules))"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "", f"importing verity.cli imported {res.stdout.strip()}"
