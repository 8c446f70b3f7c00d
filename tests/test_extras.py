"""Every optional import names the extra to install (gpuroute.extras.require): each public entry point that
needs an optional package raises MissingExtraError (an ImportError) naming the package and
``pip install 'gpuroute[extra]'`` when that package is missing (simulated by a None entry in sys.modules)."""
from __future__ import annotations

import ast
import sys
from pathlib import Path

import numpy as np
import pytest
from naive import naive_ch, random_road_graph

import gpuroute
from gpuroute.extras import EXTRAS, MissingExtraError, require

SRC = Path(gpuroute.__file__).parent


def missing(monkeypatch, *modules):
    for m in modules:
        for name in [k for k in sys.modules if k == m or k.startswith(m + ".")]:
            monkeypatch.delitem(sys.modules, name)
        monkeypatch.setitem(sys.modules, m, None)


def assert_names_extra(excinfo, package, extra):
    msg = str(excinfo.value)
    assert isinstance(excinfo.value, ImportError)
    assert package in msg and f"pip install 'gpuroute[{extra}]'" in msg, msg


def test_require_names_the_extra(monkeypatch):
    missing(monkeypatch, "pandas")
    with pytest.raises(MissingExtraError) as e:
        require("pandas", "something")
    assert_names_extra(e, "pandas", "accessibility")
    assert e.value.extra == "accessibility" and e.value.module == "pandas"


def test_travel_time_matrix_without_pandas(monkeypatch):
    rng = np.random.default_rng(2)
    g, _ = random_road_graph(rng, 30)
    ch = gpuroute.ContractionHierarchy(naive_ch(g, order=rng.permutation(30), core_from=25), graph=g,
                                       weight="distance")
    missing(monkeypatch, "pandas")
    with pytest.raises(ImportError) as e:
        gpuroute.accessibility.travel_time_matrix(ch, [0, 1], [2, 3], device="cpu")
    assert_names_extra(e, "pandas", "accessibility")


def test_osm_partition_tours_distributed_without_their_packages(monkeypatch, tmp_path):
    missing(monkeypatch, "osmium", "kahip", "vrplib", "distributed")
    for name in ("x.osm.pbf", "x.tsp"):
        (tmp_path / name).write_bytes(b"")
    with pytest.raises(ImportError) as e:
        gpuroute.load_osm(tmp_path / "x.osm.pbf")
    assert_names_extra(e, "osmium", "osm")
    rng = np.random.default_rng(3)
    g, _ = random_road_graph(rng, 40)
    with pytest.raises(ImportError) as e:
        gpuroute.Partition.build(g, method="kahip", cell_sizes=[8, 32])
    assert_names_extra(e, "kahip", "crp")
    with pytest.raises(ImportError) as e:
        gpuroute.tours.read_tsplib(tmp_path / "x.tsp")
    assert_names_extra(e, "vrplib", "tours")
    from gpuroute import distributed

    with pytest.raises(ImportError) as e:
        with distributed.connect("local"):
            pass
    assert_names_extra(e, "distributed", "dask")


def test_no_bare_optional_import_in_the_package():
    """An optional package is imported through extras.require, except after a require of the same package
    in the same function, or inside a try/except ImportError fallback (geopandas -> a plain DataFrame)."""
    optional = set(EXTRAS) - {"cupy"}  # CuPy has its own path: GPUUnavailableError with the reason
    bad = []
    for path in SRC.rglob("*.py"):
        if path.name == "extras.py" or path.parts[-2] == "server":  # the serve CLI checks the serve extra
            continue
        tree = ast.parse(path.read_text())
        guarded = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Try) and any(
                    isinstance(h.type, ast.Name) and h.type.id in ("ImportError", "ModuleNotFoundError")
                    for h in node.handlers):
                guarded.update(id(n) for b in node.body for n in ast.walk(b))
        for fn in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.Module))]:
            required = {a.value.split(".")[0] for n in ast.walk(fn) if isinstance(n, ast.Call)
                        and getattr(n.func, "id", getattr(n.func, "attr", None)) in ("require", "_require")
                        for a in n.args[:1] if isinstance(a, ast.Constant) and isinstance(a.value, str)}
            if any(isinstance(n, ast.Call) and getattr(n.func, "id", None) == "_require" for n in ast.walk(fn)):
                required.add("distributed")
            for n in ast.walk(fn):
                if isinstance(n, ast.Import):
                    names = [a.name.split(".")[0] for a in n.names]
                elif isinstance(n, ast.ImportFrom) and n.level == 0 and n.module:
                    names = [n.module.split(".")[0]]
                else:
                    continue
                for name in names:
                    if name in optional and name not in required and id(n) not in guarded:
                        bad.append(f"{path.relative_to(SRC)}:{n.lineno} imports {name}")
    assert not bad, "bare optional imports (use gpuroute.extras.require): " + "; ".join(sorted(set(bad)))
