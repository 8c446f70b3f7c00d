"""The README's layout table matches the tree (issue 19): every module of each package folder under
``src/gpuroute/`` is named in its row, and every module a row names exists."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "src" / "gpuroute"
#: Private helpers and package markers a row need not name.
UNNAMED = {"__init__.py", "__main__.py", "_text.py", "_kernels.py"}


def _rows():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    part = text.split("## Layout", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in part.splitlines():
        m = re.match(r"\|\s*`([^`]+)`\s*\|(.*)\|\s*$", line)
        if m:
            rows[m.group(1)] = m.group(2)
    return rows


ROWS = _rows()
FOLDERS = sorted(p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists())


def _modules(folder):
    d = PKG / folder
    return sorted(p.name for p in d.iterdir()
                  if p.is_file() and p.suffix in (".py", ".cu", ".cuh", ".lua") and p.name not in UNNAMED)


def _named(row, name):
    """Whether ``name`` (or its stem) is a word of one of the row's code spans (`` `stages.py` ``,
    `` `dimacs` ``, `` `phast.py` / `phast.cu` ``)."""
    stem = name.rsplit(".", 1)[0]
    words = {w for span in re.findall(r"`([^`]+)`", row) for w in re.split(r"[^\w.]+", span)}
    words |= {w.rsplit(".", 1)[0] for w in words}
    return name in words or stem in words


@pytest.mark.parametrize("folder", FOLDERS)
def test_every_module_is_in_its_row(folder):
    row = ROWS.get(f"{folder}/")
    assert row is not None, f"README's layout has no row for {folder}/"
    missing = [n for n in _modules(folder) if not _named(row, n)]
    assert not missing, f"{folder}/: README's layout row does not name {missing}"


@pytest.mark.parametrize("folder", FOLDERS)
def test_every_named_module_exists(folder):
    row = ROWS.get(f"{folder}/", "")
    here = {p.name for p in (PKG / folder).rglob("*") if p.is_file()}
    named = set(re.findall(r"`([\w/]+\.(?:py|cu|cuh|lua))(?!\w)", row))
    gone = sorted(n for n in named if n.rsplit("/", 1)[-1] not in here)
    assert not gone, f"{folder}/: README's layout row names {gone}, which are not in src/gpuroute/{folder}/"


def test_every_folder_row_is_a_folder():
    gone = [k for k in ROWS if k.endswith("/") and not k.startswith(("tests", "benchmarks", "docs"))
            and not (PKG / k).is_dir()]
    assert not gone, gone
