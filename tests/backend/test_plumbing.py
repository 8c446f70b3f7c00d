"""The shared GPU plumbing, checked without a GPU: the flag layout is declared once (the header) and
mirrored once (flags.py); every kernel file includes the header and compiles with it inlined; the rule
numbers of the settling family agree between the twins; no module imports another's private names."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import gpuroute
from gpuroute.backend import flags
from gpuroute.backend.kernels import COMMON_HEADER, PACKAGE_DIR, kernel_source
from gpuroute.sssp.settle import options as settle_options

SRC = Path(gpuroute.__file__).resolve().parent


def _enum(text, names):
    out = {}
    for name in names:
        m = re.search(rf"\b{name}\s*=\s*(\d+)", text)
        assert m, f"{name} not found"
        out[name] = int(m.group(1))
    return out


def test_flag_layout_mirrors_the_header():
    hdr = Path(COMMON_HEADER).read_text()
    e = _enum(hdr, ["F_CH0", "F_CH1", "F_DONE", "F_PHASES", "F_OVF", "F_MODE", "F_FARPAR", "N_FLAGS"])
    assert e == {"F_CH0": flags.FLAG_CHANGED0, "F_CH1": flags.FLAG_CHANGED1, "F_DONE": flags.FLAG_DONE,
                 "F_PHASES": flags.FLAG_PHASES, "F_OVF": flags.FLAG_OVERFLOW, "F_MODE": flags.FLAG_MODE,
                 "F_FARPAR": flags.FLAG_FARPAR, "N_FLAGS": flags.N_FLAGS}
    assert int(re.search(r"#define DINF (0x[0-9A-Fa-f]+)u", hdr).group(1), 16) == flags.DINF == gpuroute.INF_U32


def test_every_kernel_file_uses_the_one_header():
    """The flag layout was declared four times on main; now only the header declares it."""
    cu = sorted(SRC.rglob("*.cu"))
    assert len(cu) >= 7
    for f in cu:
        text = f.read_text()
        assert '#include "gpuroute_common.cuh"' in text, f
        assert not re.search(r"enum\s*\{\s*F_", text), f"{f} declares the flag layout again"
        assert "#define DINF" not in text, f
        src = kernel_source(str(f.relative_to(PACKAGE_DIR)))
        assert "#include" not in src.split("extern")[0].replace("#pragma", "") or "gpuroute_common" not in src
        assert "__device__ __forceinline__ unsigned int sat_add" in src


def test_settle_rules_agree_between_twins():
    """Main had the Crauser rule numbers swapped between the CPU twin and the kernel."""
    cu = (SRC / "sssp" / "settle" / "settle.cu").read_text()
    e = _enum(cu, ["RULE_MARTIN", "RULE_GENERAL", "RULE_ECONOMIC"])
    assert e == {"RULE_MARTIN": settle_options.RULE_MARTIN, "RULE_GENERAL": settle_options.RULE_GENERAL,
                 "RULE_ECONOMIC": settle_options.RULE_ECONOMIC}
    assert settle_options.RULES == {"martin": 0, "crauser": 1, "crauser-economic": 2}


def _imports(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                yield node.module or "", node.level, alias.name


@pytest.mark.parametrize("path", sorted(SRC.rglob("*.py")), ids=lambda p: str(p.relative_to(SRC)))
def test_no_private_names_imported_across_modules(path):
    """Main imported private names (``_Base``, ``_i32``, ``_finish``, ...) across modules: a module's
    private names are its own (the GPU plumbing is public under ``backend``)."""
    def private(mod, lvl, name):
        if mod == "__future__":
            return False
        if lvl == 1 and mod == "" and name.startswith("_") and not name.startswith("__"):
            return not (path.parent / f"{name}.py").exists()  # a package's own private submodule is fine
        if name.startswith("_") and not name.startswith("__"):
            return True
        # a private module is its package's: siblings (level 1) may use it, other packages may not
        return lvl != 1 and any(part.startswith("_") for part in mod.split("."))

    bad = [f"{'.' * lvl}{mod}: {name}" for mod, lvl, name in _imports(path) if private(mod, lvl, name)]
    assert not bad, f"{path.relative_to(SRC)} imports private names {bad}"


def test_no_caches_written_into_the_graph():
    """GPU buffers and derived structures were cached in ``graph.__dict__`` by five modules on main."""
    offenders = []
    for path in SRC.rglob("*.py"):
        if re.search(r"__dict__\s*(\[|\.setdefault)", path.read_text()):
            offenders.append(str(path.relative_to(SRC)))
    assert not offenders, offenders


def test_io_and_datasets_do_not_import_each_other_both_ways():
    io_mods = [p for p in (SRC / "io").glob("*.py")]
    for p in io_mods:
        for mod, _, name in _imports(p):
            assert "datasets" not in mod and name != "datasets", p
