"""Docs cite only what is in the repository: every file path and .md named in README.md
and docs/*.md exists (relative to the repository root or to the citing document)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# a path under one of the repository's top-level folders, or any *.md name
CITE = re.compile(r"(?<![\w/.~$-])((?:docs|scripts|tests|clients|contracts|anvil|\.ci)/[\w./*-]*[\w*]|[\w-]+\.md)\b")


def _exists(ref: str, doc: Path) -> bool:
    ref = ref.rstrip(".")
    for base in (ROOT, doc.parent):
        if "*" in ref:
            if list(base.glob(ref)):
                return True
        elif (base / ref).exists():
            return True
    return False


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_docs_citeOnlyRepositoryFiles_succeeds(doc):
    text = doc.read_text()
    missing = sorted({m for m in CITE.findall(text) if not _exists(m, doc)})
    assert not missing, f"{doc.relative_to(ROOT)} cites files not in the repository: {missing}"


def test_docs_designSectionsCited_exist():
    design = (ROOT / "docs" / "design.md").read_text()
    sections = set(re.findall(r"^## (\d+)\.", design, re.M))
    for path in [*DOCS, *ROOT.glob("clients/**/*.py"), *ROOT.glob("scripts/*.py")]:
        for sec in re.findall(r"DESIGN §(\d+)", path.read_text()):
            assert sec in sections, f"{path.relative_to(ROOT)} cites DESIGN §{sec}, not a section of docs/design.md"


def test_readme_settings_table_names_every_setting_succeeds():
    """Every Settings field is documented in README's Settings table as its environment variable."""
    from verity.settings import Settings

    text = (ROOT / "README.md").read_text()
    table = text.split("## Settings", 1)[1].split("\n## ", 1)[0]
    missing = [f"VERITY_{name.upper()}" for name in Settings.model_fields if f"`VERITY_{name.upper()}`" not in table]
    assert not missing, f"README's Settings table lacks {missing}"
