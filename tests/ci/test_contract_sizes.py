"""scripts/contract_sizes.py: docs/contracts.md's size table is generated from forge's artifacts, and a stale table or
a contract over the project's 20,480-byte bar fails the check (scripts/forge_test.sh runs it after forge test)."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "contract_sizes.py"
spec = importlib.util.spec_from_file_location("contract_sizes", SCRIPT)
contract_sizes = importlib.util.module_from_spec(spec)
spec.loader.exec_module(contract_sizes)


def artifact(out: Path, source: str, name: str, runtime: int, init: int) -> None:
    folder = out / f"{Path(source).name}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps({
        "metadata": {"settings": {"compilationTarget": {source: name}}},
        "deployedBytecode": {"object": "0x" + "60" * runtime},
        "bytecode": {"object": "0x" + "61" * init},
    }))


@pytest.fixture
def build(tmp_path):
    out = tmp_path / "out"
    artifact(out, "contracts/NodeRegistry.sol", "NodeRegistry", 20_375, 20_743)
    artifact(out, "contracts/VerityToken.sol", "VerityToken", 2_535, 3_163)
    artifact(out, "contracts/lib/Merkle.sol", "Merkle", 85, 135)           # a library: not deployed on its own
    artifact(out, "contracts/interfaces/IRandomness.sol", "IRandomness", 0, 0)  # deploys nothing
    artifact(out, "tests/forge/Fixture.sol", "Fixture", 9_000, 9_100)      # not a protocol contract
    doc = tmp_path / "contracts.md"
    doc.write_text(f"# sizes\n\n{contract_sizes.BEGIN}\nold table\n{contract_sizes.END}\n\nafter\n")
    return out, doc


def test_sizes_protocolContractsOnly_largestFirst(build):
    out, _ = build
    found = contract_sizes.sizes(out)
    assert found == {"NodeRegistry": (20_375, 20_743), "VerityToken": (2_535, 3_163)}
    rows = contract_sizes.table(found).splitlines()
    assert rows[2] == "| NodeRegistry | 20,375 | 4,201 | 105 | 20,743 |"
    assert rows[3].startswith("| VerityToken | 2,535 |")


def test_check_staleTable_failsUntilWritten(build, capsys):
    out, doc = build
    assert contract_sizes.main(["--check", "--out", str(out), "--doc", str(doc)]) == 1
    assert "differs from the build" in capsys.readouterr().err
    assert contract_sizes.main(["--write", "--out", str(out), "--doc", str(doc)]) == 0
    assert doc.read_text().endswith(f"{contract_sizes.END}\n\nafter\n")
    assert contract_sizes.main(["--check", "--out", str(out), "--doc", str(doc)]) == 0


def test_check_contractOverTheBar_fails(build, capsys):
    out, doc = build
    artifact(out, "contracts/DisputeGame.sol", "DisputeGame", contract_sizes.BAR + 1, 21_000)
    assert contract_sizes.main(["--write", "--out", str(out), "--doc", str(doc)]) == 0
    assert contract_sizes.main(["--check", "--out", str(out), "--doc", str(doc)]) == 1
    assert "DisputeGame is 20,481 B, over the project's bar of 20,480 B" in capsys.readouterr().err


def test_check_noBuild_saysSo(tmp_path, capsys):
    assert contract_sizes.main(["--check", "--out", str(tmp_path / "none")]) == 2
    assert "run `forge build` first" in capsys.readouterr().err
