"""The README's Python examples run as written: every fenced ```python block of README.md, in README order,
in one shared namespace (later blocks use what earlier ones define: ``g``, ``s``, ``t``, ``r``, ``ch``),
in a temporary working directory (``ch.save("ny.ch")`` writes there).

Each block is one test (``test_readme_block[2-contraction-hierarchies-preprocess-once]``); running one
alone first runs the blocks before it. Each top-level statement runs on its own, under these rules, so
that nothing is skipped silently:

* ``device="gpu"`` in a statement: with a usable GPU it runs; without one it must raise
  ``GPUUnavailableError``, as the README's "Devices" paragraph promises.
* ``"local-cuda"`` in a statement (a Dask cluster of one worker per GPU): it and the statements after it in
  its block form a test of their own, skipped with the reason where there is no GPU or no dask-cuda.
* A statement that fails on a missing optional dependency (an ``ImportError`` for, or raised from one for,
  a module of one of the package's extras that is not installed) skips the rest of its block, naming it.

Inputs the README leaves implicit (``sources``, ``targets``, ``bound``, ``costs``, ``demands``, ...) come
from :data:`IMPLICIT`: small, fixed, valid for the graph at that point of the README, supplied right
before the first statement of their block that reads them, and forgotten when the block ends.

Every statement must then run without an error (the README's own asserts included), and a few cheap
checks against an oracle (:data:`CHECKS`) follow the blocks they name.
"""
from __future__ import annotations

import ast
import builtins
import importlib.util
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

import gpuroute
from gpuroute import GPUUnavailableError, gpu_available

README = Path(__file__).resolve().parents[1] / "README.md"

#: Modules of the package's optional extras (pyproject.toml); a README statement that needs a missing one
#: is skipped, naming it.
OPTIONAL_MODULES = {"cupy", "osmium", "pandas", "networkx", "matplotlib", "pandana", "kahip", "vrplib", "dask",
                    "distributed", "pyarrow", "starlette", "uvicorn", "orjson", "polyline", "shapely",
                    "contourpy", "geopandas", "dask_cuda"}

GPU_STATEMENT = re.compile(r"""device\s*=\s*["']gpu["']""")
DASK_CUDA_STATEMENT = re.compile(r"""["']local-cuda["']""")


# --------------------------------------------------------------------------------- the README's blocks
@dataclass
class Statement:
    code: str
    line: int  # in README.md
    reads: set[str]


@dataclass
class Part:
    """A run of statements of one block that share a requirement: one test."""

    block: int
    heading: str
    statements: list[Statement] = field(default_factory=list)
    needs: str | None = None  # None, or "dask-cuda"

    @property
    def id(self):
        slug = re.sub(r"[^a-z0-9]+", "-", self.heading.lower()).strip("-")[:40].rstrip("-")
        return f"{self.block}-{slug}" + (f"-{self.needs}" if self.needs else "")


def python_blocks(text):
    """``(heading, first code line, code)`` of every ```python block, in order (lines 1-based)."""
    out, heading, lines = [], "", text.splitlines()
    i = 0
    while i < len(lines):
        ln = lines[i]
        if ln.startswith("#"):
            heading = ln.lstrip("#").strip()
        if ln.strip() == "```python":
            j = i + 1
            while lines[j].strip() != "```":
                j += 1
            out.append((heading, i + 2, "\n".join(lines[i + 1:j])))
            i = j
        i += 1
    return out


def _reads(node):
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def parts():
    """The README's blocks, cut into :class:`Part` s at the first Dask/dask-cuda statement."""
    out = []
    for b, (heading, first, code) in enumerate(python_blocks(README.read_text()), start=1):
        src = code.splitlines()
        part = Part(b, heading)
        out.append(part)
        for node in ast.parse(code).body:
            text = "\n".join(src[node.lineno - 1:node.end_lineno])
            if DASK_CUDA_STATEMENT.search(text) and part.needs is None:
                part = Part(b, heading, needs="dask-cuda")
                out.append(part)
            part.statements.append(Statement(text, first + node.lineno - 1, _reads(node)))
    return [p for p in out if p.statements]


PARTS = parts()


# --------------------------------------------------------------------------------- implicit inputs
def _ch_inputs(ns):
    n = ns["ch"].n_nodes
    rng = np.random.default_rng(18)
    return {"sources": rng.integers(0, n, 50), "targets": rng.integers(0, n, 50),
            "bound": 20_000}  # 2 km on NY (0.1 m steps)


def _crp_inputs(ns):
    g = ns["g"]
    rng = np.random.default_rng(19)
    arcs = rng.integers(0, g.n_arcs, 20)
    return {"sources": rng.integers(0, g.n_nodes, 20), "targets": rng.integers(0, g.n_nodes, 20),
            "arc_ids": arcs, "new_costs": ns["ov"].arc_cost[arcs] * 2}


def _tour_inputs(ns):
    rng = np.random.default_rng(20)
    n = 12
    costs = rng.integers(10, 500, (n, n)).astype(np.int64)  # asymmetric
    np.fill_diagonal(costs, 0)
    demands = rng.integers(1, 6, n)
    demands[0] = 0  # the depot
    return {"costs": costs, "demands": demands, "capacity": 15}


def _access_inputs(ns):
    n = ns["ch"].n_nodes
    rng = np.random.default_rng(21)
    return {"node_ids": rng.integers(0, n, 200), "values": rng.integers(1, 100, 200).astype(np.float64),
            "poi_nodes": rng.integers(0, n, 30), "origins": rng.integers(0, n, 5),
            "destinations": rng.integers(0, n, 7), "sources": rng.integers(0, n, 8),
            "targets": rng.integers(0, n, 9)}


#: Inputs the README leaves implicit, by the start of the block's heading.
IMPLICIT = {"Contraction hierarchies": _ch_inputs, "Customizable Route Planning": _crp_inputs,
            "Tours": _tour_inputs, "Accessibility": _access_inputs}


# --------------------------------------------------------------------------------- oracle checks
def _check_sssp(ns):
    g, s, t = ns["g"], ns["s"], ns["t"]
    assert ns["r"].distance == gpuroute.sssp(g, s, device="cpu")[t]


def _check_ch(ns):
    ch, g = ns["ch"], ns["g"]
    want = gpuroute.sssp(g, ns["sources"][:5], device="cpu")
    np.testing.assert_array_equal(ch.table(ns["sources"][:5], ns["targets"]), want[:, ns["targets"]])
    assert ns["r"].distance == gpuroute.sssp(g, ns["s"], device="cpu")[ns["t"]]


def _check_tours(ns):
    c, res, sol = ns["costs"], ns["res"], ns["sol"]  # res: the open path 0 -> ... -> 5
    n = c.shape[0]
    assert res.tour[0] == 0 and res.tour[-1] == 5 and sorted(res.tour.tolist()) == list(range(n))
    assert res.cost == sum(int(c[a, b]) for a, b in zip(res.tour[:-1], res.tour[1:], strict=True))
    assert sorted(np.concatenate(sol.routes).tolist()) == list(range(1, n))
    assert all(ns["demands"][x].sum() <= ns["capacity"] for x in sol.routes)


#: Checks run after a block (by the start of its heading), against an independent computation.
CHECKS = {"Python": _check_sssp, "Contraction hierarchies": _check_ch, "Tours": _check_tours}


def _by_heading(table, heading):
    return next((v for k, v in table.items() if heading.startswith(k)), None)


# --------------------------------------------------------------------------------- running
class Runner:
    """Runs the parts in README order in one namespace; remembers what each part did."""

    def __init__(self, workdir):
        self.ns = {"__name__": "readme"}
        self.workdir = workdir
        self.done = {}  # part index -> None (ran) or the exception / skip it ended with
        self.implicit = set()

    def run_upto(self, k):
        for i in range(k + 1):
            if i not in self.done:
                try:
                    self._run(PARTS[i])
                    self.done[i] = None
                except BaseException as e:  # noqa: B036 (pytest's skip and fail outcomes included)
                    self.done[i] = e
        return self.done[k]

    def _run(self, part):
        if part.needs == "dask-cuda":
            if not gpu_available():
                pytest.skip(f"README line {part.statements[0].line}: a local-cuda Dask cluster needs a GPU")
            if importlib.util.find_spec("dask_cuda") is None:
                pytest.skip(f"README line {part.statements[0].line}: a local-cuda Dask cluster needs dask-cuda")
        first = PARTS.index(part) == 0 or PARTS[PARTS.index(part) - 1].block != part.block
        provide = _by_heading(IMPLICIT, part.heading)
        if first:
            for name in self.implicit:
                self.ns.pop(name, None)
            self.implicit = set()
        cwd = os.getcwd()
        os.chdir(self.workdir)
        try:
            for st in part.statements:
                missing = {x for x in st.reads if x not in self.ns and not hasattr(builtins, x)}
                if missing and provide is not None:
                    try:
                        given = provide(self.ns)
                    except KeyError as e:
                        pytest.fail(f"README line {st.line}: its implicit inputs need {e} from an earlier block, "
                                    "which failed")
                    self.ns.update({k: v for k, v in given.items() if k not in self.ns or k in missing})
                    self.implicit |= set(given)
                self._statement(st)
        finally:
            os.chdir(cwd)
        last = PARTS.index(part) == len(PARTS) - 1 or PARTS[PARTS.index(part) + 1].block != part.block
        check = _by_heading(CHECKS, part.heading)
        if last and check is not None:
            check(self.ns)

    def _statement(self, st):
        code = compile("\n" * (st.line - 1) + st.code, str(README), "exec")
        if GPU_STATEMENT.search(st.code) and not gpu_available():
            with pytest.raises(GPUUnavailableError):
                exec(code, self.ns)
            return
        try:
            exec(code, self.ns)
        except ImportError as e:
            top = _missing_optional_module(e)
            if top is None:
                raise
            pytest.skip(f"README line {st.line} needs {top!r} (an optional extra), not installed: the rest "
                        f"of its block is not run ({e})")


def _installed(module):
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # blocked, or None in sys.modules
        return False


def _missing_optional_module(e):
    """The optional module whose absence ``e`` (or an import error it was raised from) reports, or None."""
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        top = (getattr(e, "name", None) or "").split(".")[0]
        if isinstance(e, ImportError) and top in OPTIONAL_MODULES and not _installed(top):
            return top
        e = e.__cause__ or e.__context__
    return None


@pytest.fixture(scope="module")
def runner(tmp_path_factory):
    return Runner(tmp_path_factory.mktemp("readme"))


def test_the_readme_has_python_examples():
    assert len({p.block for p in PARTS}) >= 5, [p.id for p in PARTS]


@pytest.mark.parametrize("k", range(len(PARTS)), ids=[p.id for p in PARTS])
def test_readme_block(runner, k):
    outcome = runner.run_upto(k)
    if outcome is not None:
        raise outcome
