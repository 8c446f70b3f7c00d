"""``gpuroute warmup`` and the warm-up at the end of ``gpuroute build`` (issue 20, deliverable 4: no compiling
at serve time): the kernels go into the cache folder the user chose, a folder that cannot be written is
refused naming it, and ``build`` warms up unless told not to.

Oracle: the files numba writes (``*.nbi`` index, ``*.nbc`` code) under the chosen folder; the warm-up's own
report of what numba compiled (:class:`gpuroute.server.warmup.CompileLog`)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import write_grid_dimacs

from gpuroute.cli import warmup as cli_warmup
from gpuroute.cli.main import main

K = 6  # a K x K grid of two-way streets, 0.001 degree apart


@pytest.fixture(scope="module")
def grid_gr(tmp_path_factory):
    """A DIMACS travel-time graph with coordinates (``.gr`` + ``.co``)."""
    return write_grid_dimacs(tmp_path_factory.mktemp("wgrid"), "W", K, 2.0)


@pytest.fixture(scope="module")
def dataset(grid_gr, tmp_path_factory):
    from gpuroute.pipeline import build_dataset

    out = tmp_path_factory.mktemp("wds") / "w.ds"
    build_dataset(str(grid_gr), out, cell_sizes=[16])
    return out


def test_warmup_compiles_into_the_chosen_cache_dir(dataset, tmp_path):
    """``--cache-dir DIR`` (numba's NUMBA_CACHE_DIR) receives the compiled kernels; the report names the folder
    and what was compiled. In a child process: the folder is read when a kernel module is imported."""
    cache = tmp_path / "nb cache"  # created, with a space in its name
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(cli_warmup.__file__).parents[2]), env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-m", "gpuroute.cli.main", "warmup", str(dataset), "--cache-dir", str(cache),
                        "--services", "nearest", "--jobs", "1", "--json"], capture_output=True, text=True, env=env,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["cache"].startswith(str(cache)) and list(rep["services"]) == ["nearest"]
    assert rep["failed"] == []
    assert rep["compiled"]["nearest"], "an empty cache: nearest's kernels were compiled"
    index = list(cache.rglob("*.nbi"))
    code = list(cache.rglob("*.nbc"))
    assert index and code
    # the snapping kernel nearest compiled is among the files (its module's folder, its name)
    assert any("segments" in p.name for p in index), sorted(p.name for p in index)[:10]
    assert "compiling nearest" in r.stderr


def test_a_cache_dir_that_cannot_be_written_is_refused_naming_it(tmp_path, capsys):
    blocker = tmp_path / "a file"
    blocker.write_text("not a folder")
    bad = blocker / "cache"
    assert main(["warmup", "--cache-dir", str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "not writable" in err and "--cache-dir" in err
    assert os.environ.get("NUMBA_CACHE_DIR") != str(bad)  # nothing changed


def test_unknown_service_and_bad_jobs(dataset, capsys):
    assert main(["warmup", str(dataset), "--jobs", "0"]) == 2
    assert "--jobs 0" in capsys.readouterr().err
    assert main(["warmup", str(dataset), "--services", "route,teleport", "--jobs", "1"]) == 2
    err = capsys.readouterr().err
    assert "teleport" in err and "route" in err


def _fake_warm(calls):
    def fake(spec, *, services=None, jobs=1, prog="x"):
        calls.append((str(spec), prog))
        return {"seconds": 0.5, "services": {"route": 0.5}, "failed": [], "compiled": {"route": [("f", "int64", 0.1, 0.1)]},
                "children": {}, "dataset": spec, "open_seconds": 0.0}
    return fake


def test_build_runs_the_warm_up_unless_told_not_to(grid_gr, tmp_path, monkeypatch, capsys):
    """``gpuroute build`` ends with the warm-up on the directory it wrote; ``--no-warmup`` and
    ``GPUROUTE_BUILD_WARMUP=0`` skip it; another value of the variable is refused before building."""
    calls = []
    monkeypatch.setattr(cli_warmup, "warm_dataset", _fake_warm(calls))
    monkeypatch.setenv("GPUROUTE_BUILD_WARMUP", "1")
    out = tmp_path / "a.ds"
    assert main(["build", str(grid_gr), "-o", str(out), "--cell-sizes", "16"]) == 0
    assert calls == [(str(out), "gpuroute build")]
    assert "warm-up" in capsys.readouterr().out
    assert main(["build", str(grid_gr), "-o", str(tmp_path / "b.ds"), "--cell-sizes", "16", "--no-warmup",
                 "--json"]) == 0
    assert len(calls) == 1 and "warmup" not in json.loads(capsys.readouterr().out)
    monkeypatch.setenv("GPUROUTE_BUILD_WARMUP", "0")
    assert main(["build", str(grid_gr), "-o", str(tmp_path / "c.ds"), "--cell-sizes", "16"]) == 0
    assert len(calls) == 1
    monkeypatch.setenv("GPUROUTE_BUILD_WARMUP", "yes")
    assert main(["build", str(grid_gr), "-o", str(tmp_path / "d.ds"), "--cell-sizes", "16"]) == 2
    assert "GPUROUTE_BUILD_WARMUP='yes'" in capsys.readouterr().err
    assert not (tmp_path / "d.ds").exists() and len(calls) == 1


def test_serve_says_it_compiles_when_the_cache_lacks_kernels(monkeypatch, capsys):
    """``gpuroute serve`` with kernels missing from numba's cache says so, naming the port, before its warm-up;
    with a full cache it says nothing more."""
    import socket

    from gpuroute.cli import serve
    from gpuroute.server import warmup as W

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    try:
        monkeypatch.setattr(W, "cache_state", lambda: {"kernels": 300, "missing": 290, "folders": ["/x"]})
        serve._say_compiling(sock)
        err = capsys.readouterr().err
        assert "lacks compiled code for 290 of the 300 kernels" in err and str(sock.getsockname()[1]) in err
        assert "gpuroute warmup" in err
        monkeypatch.setattr(W, "cache_state", lambda: {"kernels": 300, "missing": 0, "folders": ["/x"]})
        serve._say_compiling(sock)
        assert capsys.readouterr().err == ""
    finally:
        sock.close()
