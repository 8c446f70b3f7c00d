"""The GPU twin of /match's transition searches (gpuroute.engine.match_gpu, match_search.cu) against the CPU twin
(gpuroute.engine.match_hmm.transitions), bit for bit: its numba emulation (the kernel's layout and loop, one job
after another) and the .cu file itself compiled for the host by g++ (every thread of every launch in turn) on
Monaco's traces (car.lua) and on random small graphs with ties and forbidden turns, with scratch so small that
searches stop, run again with more room, and the last ones on the CPU twin; the batched pipeline with the twin's
tables answers byte for byte as with the CPU's lazy pass. The ``gpu`` tests run the real kernel."""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from match_traces import make_trace

from gpuroute import config
from gpuroute.backend import GPUUnavailableError, gpu_available
from gpuroute.engine import match_gpu as G
from gpuroute.engine import match_hmm as H
from gpuroute.engine.services import match as M


# ------------------------------------------------------------------------------------------ inputs
@pytest.fixture(scope="module")
def car_dir(request):
    """Monaco built with car.lua: the session's (tests/conftest.py's ``monaco_car_dir``), or the dataset directory
    ``$GPUROUTE_TEST_MONACO_CAR`` names (the device script's: benchmarks/match.py built it already)."""
    d = os.environ.get("GPUROUTE_TEST_MONACO_CAR")
    return Path(d) if d else request.getfixturevalue("monaco_car_dir")


@pytest.fixture(scope="module")
def car_engine(car_dir):
    """An engine over :func:`car_dir`, saved traffic dropped, up to 1,000 trace points a request."""
    from gpuroute.engine import Engine
    from gpuroute.engine.dataset import drop_traffic

    drop_traffic(car_dir)
    e = Engine.open(car_dir)
    e.limits["max_locations_map_matching"] = 1000
    return e


@pytest.fixture(scope="module")
def batch(car_engine):
    """12 Monaco traces (car.lua), sigma 5-20 m, 1-10 s sampling, up to 40 points."""
    rng = np.random.default_rng(27)
    out = []
    for s, dt in ((5.0, 1.0), (10.0, 5.0), (20.0, 10.0), (10.0, 2.0)) * 3:
        c, ts, _ = make_trace(car_engine, rng, s, dt, min_m=500.0, max_m=3000.0, max_points=40)
        out.append({"coords": c, "timestamps": ts, "radiuses": [s] * len(c)})
    return out


def _monaco_jobs(engine, batch):
    """The transition jobs of ``batch``'s consecutive points, as :meth:`services.match._Tables._search` makes
    them: ``(jobs, opts, net)``."""
    from gpuroute.engine.algorithms import metric_snapshot
    from gpuroute.engine.params import MatchParams

    recs = [MatchParams.from_kwargs(b["coords"], limits=engine.limits, timestamps=b["timestamps"],
                                    radiuses=b["radiuses"]) for b in batch]
    t = M.Traces(recs, 5.0)
    allc = M._candidates(M.candidate_index(engine), t)
    tables = M._Tables(engine, allc, None, metric_snapshot(engine), "cpu")
    seen = {}

    def spy(jobs, opts, net, out, ok, *rest):
        seen["args"] = (jobs, opts, net)
        out[:] = 0.0

    p = np.flatnonzero(t.ptrace[:-1] == t.ptrace[1:])
    cols = M._pairs(t, p, p + 1, M._max_speed(engine))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(M, "transitions", spy)
        mp.setattr(M, "transition_chunk", lambda lo, hi, step, jobs, opts, net, out, ok, ws: spy(jobs, opts, net,
                                                                                                 out, ok))
        tables._search(cols)
    return seen["args"]


def _out_size(jobs):
    job_s, job_pair, t0, t1, _, _, off, s0 = jobs
    ns = np.zeros(t0.size, dtype=np.int64)
    np.maximum.at(ns, job_pair, job_s - s0[job_pair] + 1)
    return int((off + ns * (t1 - t0)).max()) if t0.size else 0


def _cpu(jobs, opts, net):
    out = np.full(_out_size(jobs), np.nan)
    ok = np.ones(jobs[0].size, dtype=np.bool_)
    H.transitions(jobs, opts, net, out, ok, H.new_scratch(2, net[3].size))
    return out, ok


def _twin(run, jobs, opts, net, **kw):
    out = np.full(_out_size(jobs), np.nan)
    ok = np.zeros(jobs[0].size, dtype=np.bool_)
    stats = {}
    run(jobs, opts, net, out, ok, stats=stats, **kw)
    return out, ok, stats


def _same_bits(a, b):
    assert a.shape == b.shape
    assert a.tobytes() == b.tobytes(), f"{int((a.view(np.int64) != b.view(np.int64)).sum())} cells differ"


def _random_case(seed, n=40, k=3, ties=False):
    """A random turn-expanded network of ``n * k`` arcs (integer costs where ``ties``: many equal labels; some turns
    forbidden, some penalised, a negative least penalty) and jobs between random candidates of 1-2 options each."""
    rng = np.random.default_rng(seed)
    m = n * k
    head = rng.integers(0, n, m)
    tail = np.repeat(np.arange(n), k)
    order = np.argsort(tail, kind="stable")
    deg = np.bincount(tail, minlength=n)
    fo = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(deg, out=fo[1:])
    cost = (rng.integers(1, 3, m) if ties else rng.uniform(1.0, 30.0, m)).astype(np.float64)
    length = np.round(cost * rng.uniform(5.0, 12.0, m), 1)
    tdeg = deg[head]
    first = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(tdeg, out=first[1:])
    out_arc = np.concatenate([order[fo[h]:fo[h + 1]] for h in head]).astype(np.int64)
    pen = rng.choice([0.0, 0.0, 0.0, 1.0, -0.5], out_arc.size) if ties else rng.uniform(-0.5, 3.0, out_arc.size)
    tcost = pen + cost[out_arc]
    tcost[rng.random(out_arc.size) < 0.1] = -1.0
    ok = tcost >= 0
    minpen = float(min(0.0, (tcost[ok] - cost[out_arc[ok]]).min()))
    # candidates: 1-2 options (arc, fraction), grouped into points of 2-5 candidates
    C = 60
    nopt = rng.integers(1, 3, C)
    ostart = np.zeros(C + 1, dtype=np.int64)
    np.cumsum(nopt, out=ostart[1:])
    oarc = rng.integers(0, m, int(ostart[-1])).astype(np.int64)
    frac = rng.choice([0.0, 0.5, 1.0], oarc.size) if ties else rng.random(oarc.size)
    cuts = np.unique(np.concatenate([[0, C], rng.integers(1, C, 18)]))
    P = cuts.size - 2
    s0, s1, t0, t1 = cuts[:-2], cuts[1:-1], cuts[1:-1], cuts[2:]
    bound = np.where(rng.random(P) < 0.3, np.inf, rng.uniform(1.0, 8.0, P) * cost.mean())
    lmax = rng.uniform(2.0, 30.0, P) * length.mean()
    ns = s1 - s0
    size = ns * (t1 - t0)
    off = np.zeros(P + 1, dtype=np.int64)
    np.cumsum(size, out=off[1:])
    job_pair = np.repeat(np.arange(P, dtype=np.int64), ns)
    job_s = np.concatenate([np.arange(a, b) for a, b in zip(s0, s1, strict=True)]).astype(np.int64)
    jobs = (job_s, job_pair, t0.astype(np.int64), t1.astype(np.int64), bound, lmax, off[:-1].copy(),
            s0.astype(np.int64))
    opts = (ostart, oarc, frac.astype(np.float64))
    net = (first, out_arc, tcost, cost, length, minpen)
    return jobs, opts, net


# ------------------------------------------------------------------------------------------ the emulation
@pytest.mark.parametrize("seed, ties", [(0, False), (1, True), (2, True), (3, False)])
def test_emulation_equals_the_cpu_twin_on_random_graphs(seed, ties, monkeypatch):
    """Random networks (ties: integer costs, fractions on quarter points, equal penalties), forbidden turns,
    unbounded and bounded pairs: the same ``out`` bit for bit; then with 4 hash slots a search (rounds, and the
    searches that fit no room up to 16 slots on the CPU twin)."""
    jobs, opts, net = _random_case(seed, ties=ties)
    want, want_ok = _cpu(jobs, opts, net)
    assert np.isfinite(want).sum() > 20 and np.isinf(want).sum() > 0
    got, ok, st = _twin(G._emulate, jobs, opts, net)
    _same_bits(got, want)
    assert (ok == want_ok).all() and st["rounds"] >= 1 and st["cpu_jobs"] == 0
    monkeypatch.setattr(config, "SERVE_MATCH_GPU_HASH_SLOTS", 4)
    monkeypatch.setattr(config, "SERVE_MATCH_GPU_MAX_HASH_SLOTS", 16)
    monkeypatch.setattr(config, "SERVE_MATCH_GPU_SCRATCH_BYTES", 4 * 36 * 7)  # 7 searches a launch
    got, ok, st = _twin(G._emulate, jobs, opts, net)
    _same_bits(got, want)
    assert (ok == want_ok).all()
    assert st["rounds"] == 2 and st["cpu_jobs"] > 0 and st["launches"] > 2


def test_emulation_equals_the_cpu_twin_on_monaco(car_engine, batch, monkeypatch):
    """Monaco's transition jobs of 12 traces (car.lua's turn costs and U-turn penalties): the same ``out`` bit for
    bit, first room and then a first room so small that most searches run again (four times) and the largest on
    the CPU twin."""
    jobs, opts, net = _monaco_jobs(car_engine, batch)
    assert jobs[0].size > 500
    want, want_ok = _cpu(jobs, opts, net)
    got, ok, st = _twin(G._emulate, jobs, opts, net)
    _same_bits(got, want)
    assert (ok == want_ok).all() and st["cpu_jobs"] == 0
    assert st["pops"] > 10 * jobs[0].size and st["turns"] > st["pops"]
    monkeypatch.setattr(config, "SERVE_MATCH_GPU_HASH_SLOTS", 32)
    monkeypatch.setattr(config, "SERVE_MATCH_GPU_MAX_HASH_SLOTS", 512)
    got, ok, st = _twin(G._emulate, jobs, opts, net)
    _same_bits(got, want)
    assert st["rounds"] == 3 and 0 < st["cpu_jobs"] < jobs[0].size


def _lazy_everywhere(monkeypatch):
    """Every batch of bounded searches takes the lazy pass's branch (where the GPU's tables replace it), whatever
    numba's thread count (on a 16-core host a small batch would take the eager CPU tables instead)."""
    monkeypatch.setattr(M, "_lazy", lambda tables, traces: tables is not None and tables.how == "search")
    monkeypatch.setattr(config, "SERVE_MATCH_GPU_MIN_TRACES", 2)


def test_batched_match_with_the_emulated_twin_answers_byte_for_byte(car_engine, batch, monkeypatch):
    """A batch whose Viterbi would search its own tables (the CPU's lazy pass) gets every table from the twin
    instead (the emulation standing for the GPU) and runs the Viterbi over them: the same answers, byte for byte
    (JSON), as the CPU's lazy pass; ``device="cpu"``, or fewer traces than ``SERVE_MATCH_GPU_MIN_TRACES``, keep the
    CPU's."""
    _lazy_everywhere(monkeypatch)
    monkeypatch.setattr(config, "SERVE_MATCH_TRANSITIONS_DEVICE", "cpu")  # the CPU's lazy pass, GPU or not
    want = car_engine.match_many(batch, overview="simplified", tidy=True)
    calls = []

    def emulated(device):
        calls.append(device)
        return None if device == "cpu" else G._Emulated()

    monkeypatch.setattr(M, "_gpu_backend", emulated)
    seen = []
    real = G._transitions
    monkeypatch.setattr(G, "_transitions", lambda kern, *a, **k: (seen.append(kern.device), real(kern, *a, **k))[1])
    got = car_engine.match_many(batch, overview="simplified", tidy=True)
    assert seen and set(seen) == {"emulated"} and calls
    assert json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True)
    assert sum(r["code"] == "Ok" for r in got) >= 10
    seen.clear()
    car_engine.match_many(batch[:3], overview="false", device="cpu")
    assert not seen
    monkeypatch.setattr(config, "SERVE_MATCH_GPU_MIN_TRACES", len(batch) + 1)  # too few traces: the CPU's
    car_engine.match_many(batch, overview="false")
    assert not seen


def test_the_device_setting(monkeypatch):
    """``config.SERVE_MATCH_TRANSITIONS_DEVICE``: a bad value is named; ``"cpu"`` and a request's ``device="cpu"``
    keep the CPU's searches; ``"gpu"`` without a GPU says why."""
    monkeypatch.setattr(config, "SERVE_MATCH_TRANSITIONS_DEVICE", "cuda")
    with pytest.raises(ValueError, match="SERVE_MATCH_TRANSITIONS_DEVICE"):
        M._gpu_backend("auto")
    assert M._gpu_backend("cpu") is None
    monkeypatch.setattr(config, "SERVE_MATCH_TRANSITIONS_DEVICE", "cpu")
    assert M._gpu_backend("auto") is None and M._gpu_backend("gpu") is None
    monkeypatch.setattr(config, "SERVE_MATCH_TRANSITIONS_DEVICE", "auto")
    if not gpu_available():
        assert M._gpu_backend("auto") is None
        monkeypatch.setattr(config, "SERVE_MATCH_TRANSITIONS_DEVICE", "gpu")
        with pytest.raises(GPUUnavailableError):
            M._gpu_backend("auto")


# ------------------------------------------------------------------------------------------ the .cu on the host
_HOST_SHIM = """
#include <cmath>
#include <cstring>
struct ms_idx_t { unsigned int x; };
static ms_idx_t blockIdx, threadIdx, blockDim;
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __longlong_as_double(long long x) { double d; std::memcpy(&d, &x, sizeof d); return d; }
#define __global__
#define __device__
#define __forceinline__ inline
"""
_C_TYPES = {"i64": np.int64, "int": np.int32, "double": np.float64}


def _signature():
    import re
    from pathlib import Path

    text = (Path(G.__file__).parent / "match_search.cu").read_text()
    (name, params), = re.findall(r'extern "C" __global__ void (\w+)\(([^)]*)\)', text)
    sig = []
    for p in params.split(","):
        p = " ".join(p.replace("__restrict__", " ").replace("const ", " ").split())
        ptr = "*" in p
        typ = p.replace("*", " ").rsplit(" ", 2)[0] if ptr else p.rsplit(" ", 1)[0]
        sig.append((" ".join(typ.split()), ptr))
    return text, name, params, sig


@pytest.fixture(scope="module")
def host_kernel(tmp_path_factory):
    """match_search.cu compiled for the host by g++ (the shared header replaced by :data:`_HOST_SHIM`), with a
    ``launch_match_search(grid, block, ...)`` that runs every block and thread in turn."""
    import ctypes
    import re
    import shutil
    import subprocess

    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("needs a C++ compiler (g++ or clang++) to run the .cu kernel on the host")
    text, name, params, sig = _signature()
    assert '#include "gpuroute_common.cuh"' in text
    names = ", ".join(re.findall(r"\w+", p)[-1] for p in params.split(","))
    code = text.replace('#include "gpuroute_common.cuh"', _HOST_SHIM, 1) + (
        f'\nextern "C" void launch_{name}(unsigned int grid, unsigned int block, {params}) {{\n'
        f"    blockDim.x = block;\n    for (unsigned int b = 0; b < grid; ++b)\n"
        f"        for (unsigned int t = 0; t < block; ++t) {{ blockIdx.x = b; threadIdx.x = t; {name}({names}); }}\n}}\n")
    d = tmp_path_factory.mktemp("match_search_host")
    src, lib = d / "match_search_host.cpp", d / "match_search_host.so"
    src.write_text(code)
    out = subprocess.run([cxx, "-std=c++17", "-O1", "-ffp-contract=off", "-Wall", "-Werror", "-shared", "-fPIC",
                          "-o", str(lib), str(src)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    fn = getattr(ctypes.CDLL(str(lib)), f"launch_{name}")
    fn.restype = None
    fn.argtypes = [ctypes.c_uint, ctypes.c_uint] + [
        ctypes.c_void_p if ptr else (ctypes.c_longlong if typ == "i64" else ctypes.c_double if typ == "double"
                                     else ctypes.c_int) for typ, ptr in sig]
    return fn, sig


class _HostLaunches(G._Device):
    """The GPU launcher (:class:`gpuroute.engine.match_gpu._Device`: its argument list, scalar types, grid) over
    NumPy arrays: each launch checked against the kernel's parameters in the .cu file and run by the .cu file
    compiled for the host."""

    device = "checked"
    host = staticmethod(np.asarray)

    def __init__(self, fn, sig):
        self.xp = np
        self.threads = 8
        self.launches = 0

        def launch(grid, block, args):
            assert len(args) == len(sig), f"{len(args)} arguments, the kernel takes {len(sig)}"
            for i, (arg, (typ, ptr)) in enumerate(zip(args, sig, strict=True)):
                want = _C_TYPES[typ]
                if ptr:
                    assert isinstance(arg, np.ndarray) and arg.dtype == want and arg.flags.c_contiguous, \
                        f"argument {i}: {typ}* expected, got {getattr(arg, 'dtype', type(arg))}"
                else:
                    assert isinstance(arg, np.generic) and arg.dtype == want, \
                        f"argument {i}: {typ} expected, got {type(arg).__name__}"
            assert grid[0] * block[0] >= int(args[0])
            self.launches += 1
            fn(grid[0], block[0], *[x.ctypes.data if isinstance(x, np.ndarray) else x.item() for x in args])

        self.k = {"match_search": launch}

    def upload(self, x):
        return np.ascontiguousarray(x)

    def timer(self):
        return G._WallTimer()


@pytest.mark.parametrize("seed, ties", [(0, False), (1, True), (2, True)])
def test_the_cu_kernel_compiled_for_the_host_on_random_graphs(seed, ties, host_kernel, monkeypatch):
    jobs, opts, net = _random_case(seed, ties=ties)
    want, want_ok = _cpu(jobs, opts, net)
    kern = _HostLaunches(*host_kernel)
    run = lambda *a, **k: G._transitions(kern, *a, k.get("stats"))  # noqa: E731
    got, ok, _ = _twin(run, jobs, opts, net)
    _same_bits(got, want)
    monkeypatch.setattr(config, "SERVE_MATCH_GPU_HASH_SLOTS", 4)
    monkeypatch.setattr(config, "SERVE_MATCH_GPU_MAX_HASH_SLOTS", 16)
    got, ok, st = _twin(run, jobs, opts, net)
    _same_bits(got, want)
    assert (ok == want_ok).all() and st["rounds"] == 2 and st["cpu_jobs"] > 0 and kern.launches >= 3


def test_the_cu_kernel_compiled_for_the_host_on_monaco(car_engine, batch, host_kernel):
    jobs, opts, net = _monaco_jobs(car_engine, batch[:4])
    want, _ = _cpu(jobs, opts, net)
    kern = _HostLaunches(*host_kernel)
    got, _, _ = _twin(lambda *a, **k: G._transitions(kern, *a, k.get("stats")), jobs, opts, net)
    _same_bits(got, want)


# ------------------------------------------------------------------------------------------ the GPU
def _need_gpu():
    if not gpu_available():
        pytest.skip("needs CuPy and a CUDA GPU")


@pytest.mark.gpu
def test_gpu_equals_the_cpu_twin(car_engine, batch, monkeypatch):
    _need_gpu()
    for seed, ties in ((0, False), (1, True), (2, True)):
        jobs, opts, net = _random_case(seed, ties=ties)
        want, want_ok = _cpu(jobs, opts, net)
        got, ok, _ = _twin(G.transitions, jobs, opts, net)
        _same_bits(got, want)
    jobs, opts, net = _monaco_jobs(car_engine, batch)
    want, want_ok = _cpu(jobs, opts, net)
    got, ok, st = _twin(G.transitions, jobs, opts, net)
    _same_bits(got, want)
    assert (ok == want_ok).all() and st["device"] == "gpu" and st["kernel_s"] > 0
    monkeypatch.setattr(config, "SERVE_MATCH_GPU_HASH_SLOTS", 32)
    monkeypatch.setattr(config, "SERVE_MATCH_GPU_MAX_HASH_SLOTS", 512)
    got, ok, st = _twin(G.transitions, jobs, opts, net)
    _same_bits(got, want)
    assert st["rounds"] == 3 and st["cpu_jobs"] > 0


@pytest.mark.gpu
def test_gpu_batched_match_answers_byte_for_byte(car_dir, batch, monkeypatch):
    """The batched pipeline with the GPU's tables answers as the CPU's lazy pass, byte for byte, before and after
    a traffic update (a new metric snapshot: the network uploaded again)."""
    _need_gpu()
    from gpuroute.engine import Engine
    from gpuroute.engine.dataset import drop_traffic

    _lazy_everywhere(monkeypatch)
    kw = {"overview": "simplified", "tidy": True}
    drop_traffic(car_dir)
    e = Engine.open(car_dir)
    e.limits["max_locations_map_matching"] = 1000

    def both():
        monkeypatch.setattr(config, "SERVE_MATCH_TRANSITIONS_DEVICE", "cpu")
        want = e.match_many(batch, **kw)
        monkeypatch.setattr(config, "SERVE_MATCH_TRANSITIONS_DEVICE", "gpu")
        G.totals(reset=True)
        got = e.match_many(batch, **kw)
        tot = G.totals()
        assert tot["jobs"] > 0 and tot["net_uploads"] <= 1  # the network uploaded once per metric snapshot
        assert json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True)
        return got

    try:
        before = both()
        cost = np.asarray(e.overlay.arc_cost)
        arcs = np.arange(0, e.graph.n_arcs, 5)[:2000]
        e.customize([{"arc": int(a), "cost": int(cost[a]) * 3 + 1} for a in arcs])
        after = both()
        assert json.dumps(after, sort_keys=True) != json.dumps(before, sort_keys=True)
    finally:
        drop_traffic(car_dir)
