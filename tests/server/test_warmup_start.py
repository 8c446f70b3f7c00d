"""What a start with numba's cache filled costs (issue 20: start to first answer <= 1 s): the cache check that
decides whether ``gpuroute warmup`` / ``build`` compile in child processes and whether ``serve`` says it compiles,
the CPU paths warmed up where a GPU served the warm-up, and the start's phase stamps (``GPUROUTE_START_TRACE``).

Oracles: numba's own index files (a warm-up writes them; a kernel with an index for this source is in the cache),
the command lines and environments of the child processes, the JSON lines the stamps write."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import write_grid_dimacs

from gpuroute.cli import warmup as cli_warmup
from gpuroute.server import warmup as W

SRC = str(Path(W.__file__).parents[2])
K = 5  # a K x K grid of two-way streets


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    from gpuroute.pipeline import build_dataset

    d = tmp_path_factory.mktemp("sgrid")
    gr = write_grid_dimacs(d, "S", K, 3.0)
    out = d / "s.ds"
    build_dataset(str(gr), out, cell_sizes=[16])
    return out


def _env(cache=None):
    """This environment with ``src`` first on the path; ``cache``: numba's cache there (None: as it is here)."""
    env = {k: v for k, v in os.environ.items() if k != "GPUROUTE_START_TRACE"}
    env["PYTHONPATH"] = os.pathsep.join([SRC, env.get("PYTHONPATH", "")])
    if cache is not None:
        env["NUMBA_CACHE_DIR"] = str(cache)
    return env


_STATE = ("import json; from gpuroute.server import warmup as W; W.import_kernel_modules(); "
          "print(json.dumps(W.cache_state()))")


def _state(cache):
    r = subprocess.run([sys.executable, "-c", _STATE], capture_output=True, text=True, env=_env(cache), timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_a_filled_cache_lacks_nothing_and_an_empty_one_everything(dataset, tmp_path):
    """``cache_state()["missing"]``: every loaded kernel with an empty cache; none once the warm-up filled the cache,
    although most kernels have no index of their own (those the services never call from Python) -- before, those
    counted as missing, so ``gpuroute warmup`` started its child processes and ``serve`` said it compiled at every
    start. Oracle: the index files the warm-up wrote (a kernel with one is cached; the warm-up compiled nothing more
    on a second run)."""
    cache = tmp_path / "cache"
    empty = _state(cache)
    assert empty["kernels"] > 0 and empty["missing"] == empty["kernels"] and empty["cached"] == 0
    r = subprocess.run([sys.executable, "-m", "gpuroute.cli.main", "warmup", str(dataset), "--services", "nearest",
                        "--jobs", "1", "--json"], capture_output=True, text=True, env=_env(cache), timeout=600)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.splitlines()[-1])["compiled"]["nearest"]  # it compiled into the empty cache
    index = list(cache.rglob("*.nbi"))
    filled = _state(cache)
    assert filled["kernels"] == empty["kernels"]
    assert 0 < filled["cached"] <= len(index)
    assert filled["missing"] == 0 and filled["stale"] == 0
    assert filled["cached"] + filled["absent"] == filled["kernels"]


def test_warmup_compiles_in_children_only_while_the_cache_is_empty(dataset, tmp_path):
    """``gpuroute warmup --jobs 2``: into an empty cache the services compile in child processes (the report's
    ``children``); on the cache they filled it starts none and compiles nothing. Before, a filled cache still
    started a child per service (7 processes opening the dataset: the 5.8 s filled-cache warm-up of the H100
    host); asked after opening the dataset (which caches kernels of its own), an empty cache looked filled."""
    cache = tmp_path / "cache"
    cmd = [sys.executable, "-m", "gpuroute.cli.main", "warmup", str(dataset), "--services", "nearest,customize",
           "--jobs", "2", "--json"]
    reports = []
    for _ in range(2):
        r = subprocess.run(cmd, capture_output=True, text=True, env=_env(cache), timeout=900)
        assert r.returncode == 0, r.stderr
        reports.append(json.loads(r.stdout.splitlines()[-1]))
    first, second = reports
    assert set(first["children"]) == {"nearest", "customize"}
    assert first["compiled"]["nearest"]  # what the child compiled
    assert second["children"] == {} and second["compiled_here"] == {"nearest": 0, "customize": 0}


def test_a_cache_with_other_kernels_only_still_compiles_in_children(dataset, tmp_path):
    """A cache holding some kernels but not the services' (``gpuroute build``'s own stages compiled into it, or
    another service warmed up alone) looks filled to the index check: the probe service, warmed up first in the
    process, compiles, so the others compile in child processes. Before, the build's warm-up compiled every service
    in one process (110 s instead of ~70 s for Monaco on 2 cores)."""
    cache = tmp_path / "cache"
    base = [sys.executable, "-m", "gpuroute.cli.main", "warmup", str(dataset), "--json"]
    r = subprocess.run(base + ["--services", "customize", "--jobs", "1"], capture_output=True, text=True,
                       env=_env(cache), timeout=900)
    assert r.returncode == 0, r.stderr
    r = subprocess.run(base + ["--services", "nearest,table", "--jobs", "2"], capture_output=True, text=True,
                       env=_env(cache), timeout=900)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout.splitlines()[-1])
    assert f"{cli_warmup.PROBE_SERVICE} compiled" in r.stderr
    assert set(rep["children"]) == {"table"}  # the probe compiled nearest here
    assert rep["compiled_here"]["nearest"] > 0 and rep["compiled"]["table"]


def test_stale_indexes_count_as_missing(monkeypatch):
    """A kernel whose index is of another source or numba (stale) is missing, whatever the others; absent indexes
    count only while no kernel is cached (an empty cache)."""
    kernels = [object() for _ in range(5)]
    monkeypatch.setattr(W, "_cached_dispatchers", lambda: kernels)
    states = {}
    monkeypatch.setattr(W, "_index_state", lambda d: (states[id(d)], "/c"))
    for got, want in ((["cached", "cached", "stale", "absent", "absent"], 1),
                      (["absent"] * 5, 5), (["stale", "absent", "absent", "absent", "absent"], 5),
                      (["cached"] * 2 + ["absent"] * 3, 0)):
        states.update({id(k): s for k, s in zip(kernels, got, strict=True)})
        st = W.cache_state()
        assert st["missing"] == want, got
        assert (st["cached"], st["stale"], st["absent"]) == tuple(got.count(s) for s in ("cached", "stale", "absent"))


def _fake_run(calls, report):
    def run(cmd, **kwargs):
        calls.append((cmd, dict(kwargs.get("env") or os.environ)))
        return subprocess.CompletedProcess(cmd, 0, json.dumps(report) + "\n", "")
    return run


def test_a_gpu_warm_up_warms_the_cpu_paths_in_a_child(dataset, monkeypatch, capsys):
    """Where a GPU served the warm-up, the CPU paths (what ``serve --workers N`` > 1, the default, runs: its workers
    cannot share a CUDA context) are warmed up too, in child processes with ``GPUROUTE_DISABLE_GPU=1``, one per
    service; without a GPU nothing more runs."""
    calls = []
    child = {"seconds": 1.5, "services": {"nearest": 0.1}, "compiled": {"nearest": [{"function": "f"}]}, "failed": []}
    monkeypatch.setattr(subprocess, "run", _fake_run(calls, child))
    monkeypatch.setattr(cli_warmup, "gpu_served", lambda: True)
    monkeypatch.setattr(W, "cache_state", lambda: {"kernels": 3, "cached": 3, "stale": 0, "absent": 0, "missing": 0,
                                                   "folders": []})  # no compiling children of the GPU warm-up
    rep = cli_warmup.warm_dataset(str(dataset), services=["nearest", "route"], jobs=2)
    assert len(calls) == 2
    assert sorted(cmd[cmd.index("--services") + 1] for cmd, _ in calls) == ["nearest", "route"]
    for cmd, env in calls:
        assert env.get("GPUROUTE_DISABLE_GPU") == "1"
        assert cmd[cmd.index("warmup") + 1] == str(dataset) and "--json" in cmd
    assert rep["cpu_paths"]["compiled"] == {"route": 1, "nearest": 1} and rep["failed"] == []
    assert "the CPU paths" in capsys.readouterr().err
    calls.clear()
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: subprocess.CompletedProcess(cmd, 1, "", "boom"))
    rep = cli_warmup.warm_dataset(str(dataset), services=["nearest"], jobs=1)
    assert rep["cpu_paths"]["compiled"] == {"nearest": None} and rep["failed"] == [
        "nearest on the CPU: the child process failed"]
    monkeypatch.setattr(subprocess, "run", _fake_run(calls, child))
    calls.clear()
    monkeypatch.setattr(cli_warmup, "gpu_served", lambda: False)
    rep = cli_warmup.warm_dataset(str(dataset), services=["nearest"], jobs=1)
    assert calls == [] and "cpu_paths" not in rep


def test_gpu_served_reads_the_probe_without_starting_it(monkeypatch):
    """``gpu_served()``: True only where this process probed a usable GPU; it never probes (no CuPy import)."""
    from gpuroute import backend

    backend.probe_gpu.cache_clear()
    try:
        assert cli_warmup.gpu_served() is False
        assert backend.probe_gpu.cache_info().currsize == 0  # not probed by asking
        monkeypatch.setenv("GPUROUTE_DISABLE_GPU", "1")
        backend.probe_gpu()
        assert cli_warmup.gpu_served() is False
    finally:
        backend.probe_gpu.cache_clear()


def test_start_stamps_are_json_lines_of_the_process(tmp_path, monkeypatch):
    """``GPUROUTE_START_TRACE=FILE``: each stamp appends one JSON line (phase, pid, the monotonic clock, CPU, the
    fields given); unset, nothing is written; a file that cannot be written is refused naming it."""
    import time

    path = tmp_path / "trace.jsonl"
    monkeypatch.delenv(cli_warmup.START_TRACE_ENV, raising=False)
    cli_warmup.start_stamp("cli")
    assert not path.exists()
    monkeypatch.setenv(cli_warmup.START_TRACE_ENV, str(path))
    t0 = time.monotonic()
    cli_warmup.start_stamp("cli")
    cli_warmup.start_stamp("warmed", services={"route": 0.5})
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["phase"] for r in recs] == ["cli", "warmed"]
    assert all(r["pid"] == os.getpid() for r in recs)
    assert t0 <= recs[0]["monotonic"] <= recs[1]["monotonic"] <= time.monotonic()
    assert 0 < recs[0]["cpu"] <= recs[1]["cpu"] and recs[1]["services"] == {"route": 0.5}
    monkeypatch.setenv(cli_warmup.START_TRACE_ENV, str(tmp_path / "no such folder" / "t"))
    with pytest.raises(cli_warmup.CLIError, match="no such folder"):
        cli_warmup.start_stamp("cli")


def test_serve_stamps_its_phases_in_order(dataset, tmp_path):
    """``gpuroute serve DIR`` with ``GPUROUTE_START_TRACE`` stamps every phase of its start, in order, before it
    answers (``benchmarks/serve_start.py`` reads them); the warm-up's stamp carries its services."""
    import signal
    import socket
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    trace = tmp_path / "trace.jsonl"
    env = _env()  # this run's cache: the other tests filled it (a bare one: the server compiles first)
    env["GPUROUTE_START_TRACE"] = str(trace)
    p = subprocess.Popen([sys.executable, "-m", "gpuroute.cli", "serve", str(dataset), "--workers", "1", "--port",
                          str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 600
        while True:
            assert p.poll() is None, p.stderr.read()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=60) as r:
                    assert r.status == 200
                    break
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(0.1)
    finally:
        p.send_signal(signal.SIGINT)
        err = p.communicate(timeout=60)[1]
    recs = [json.loads(line) for line in trace.read_text().splitlines()]
    assert [r["phase"] for r in recs] == ["cli", "bound", "imports", "cache_checked", "loaded", "app", "warmed",
                                          "serving"]
    assert {r["pid"] for r in recs} == {p.pid}
    assert [r["monotonic"] for r in recs] == sorted(r["monotonic"] for r in recs)
    warmed = recs[6]
    assert {"route", "nearest", "table"} <= set(warmed["services"]) and set(warmed["services_cpu"]) == set(
        warmed["services"])
    assert recs[-1]["workers"] == 1
    # it says what it compiled at start exactly when its warm-up compiled something
    assert ("functions numba's cache lacked" in err) == (sum(warmed["compiled"].values()) > 0), err


@pytest.mark.parametrize("preset", [None, "3"])
def test_the_command_line_starts_no_blas_threads(preset):
    """Importing the command line (``gpuroute serve`` and every other command) loads NumPy with one OpenBLAS
    thread unless ``OPENBLAS_NUM_THREADS`` says otherwise: no threads that spin after loading (gpuroute calls no
    BLAS). Oracle: the process's own thread list (``/proc/self/task``) and its environment."""
    if not os.path.isdir("/proc/self/task"):
        pytest.skip("no /proc: the thread count is Linux's")
    env = _env()
    env.pop("OPENBLAS_NUM_THREADS", None)
    if preset is not None:
        env["OPENBLAS_NUM_THREADS"] = preset
    code = ("import os, gpuroute.cli.main, numpy; print(os.environ['OPENBLAS_NUM_THREADS'], "
            "len(os.listdir('/proc/self/task')))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    value, threads = r.stdout.split()
    assert value == (preset or "1")
    if preset is None:
        assert int(threads) == 1
