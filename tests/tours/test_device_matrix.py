"""tsp on a matrix that is already on the GPU (issue 23, item 3: the matrix never leaves the device from the
hierarchy's table to the tour search).

On the CPU the device is the emulator of tests/tours/cuda_emu.py (CuPy on NumPy, the .cu kernels compiled
with g++): its arrays log every copy to the host (``get``, ``asnumpy``) and every upload, and NumPy's
conversions are wrapped to log an implicit conversion of a device array (real CuPy refuses those). The
search on a device matrix must copy no (n, n) array either way, and give the CPU twin's candidate lists and
nearest-neighbour start, entry for entry. The gpu-marked tests run the same on a real GPU."""
from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import numpy as np
import pytest

from gpuroute import config
from gpuroute.backend import gpu_available
from gpuroute.tours import budget, gpu, tour_cost, tsp, warm_up
from gpuroute.tours import local_search as ls

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="the CUDA emulator needs g++")
needs_gpu = pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")


def sibling(name):
    spec = importlib.util.spec_from_file_location(f"_dm_{name}", Path(__file__).with_name(f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def matrix(rng, n, kind):
    if kind == "float":
        return rng.random((n, n)) * 100.0
    if kind == "int":
        return rng.integers(0, 1000, (n, n)).astype(np.float64)
    c = rng.integers(0, 3, (n, n)).astype(np.float64)  # "ties": many equal keys, and -0.0 among the zeros
    c[rng.random((n, n)) < 0.2] = -0.0
    return c


@pytest.fixture
def emu(monkeypatch):
    """The emulated device, with small blocks (multi-block paths on tiny inputs)."""
    warm_up("cpu")  # numba's kernels compiled before any wrapping below
    mod = sibling("cuda_emu")
    mod.install(monkeypatch)
    for k in ("TOUR_GPU_THREADS", "TOUR_GPU_CAND_THREADS"):
        monkeypatch.setattr(config, k, 64)
    monkeypatch.setattr(config, "TOUR_GPU_EVAL_MAX_BLOCKS", 2)
    yield mod
    mod.Transfers.log_to(None)


def watch_transfers(emu, monkeypatch):
    """Log every copy between host and emulated device (``emu.Transfers``), NumPy's implicit conversions of
    a device array, and host (numba) tour code called with a device array. Returns the log."""
    events = []
    emu.Transfers.log_to(events)
    for name in ("asarray", "array", "ascontiguousarray", "asanyarray"):
        real = getattr(np, name)

        def conv(a, *args, _real=real, _name=name, **kw):
            if isinstance(a, emu.FakeArray):
                events.append((f"implicit {_name}", tuple(a.shape), str(a.dtype)))
            return _real(a, *args, **kw)

        monkeypatch.setattr(np, name, conv)
    for name in ("candidate_lists_paced", "nearest_neighbour_paced", "candidate_lists", "candidate_rows",
                 "nearest_neighbour_tour", "tour_cost"):
        real = getattr(ls, name)

        def host(*args, _real=real, _name=name):
            for a in args:
                if isinstance(a, emu.FakeArray):
                    events.append((f"host {_name}", tuple(a.shape), str(a.dtype)))
            return _real(*args)

        monkeypatch.setattr(ls, name, host)
    return events


def matrix_copies(events, n):
    """The logged copies of an (n, n) array (either way) and the implicit / host-code uses of one."""
    return [e for e in events if len(e[1]) == 2 and e[1][0] == n and e[1][1] == n]


# ------------------------------------------------------------------------------------ host side (CPU)
@pytest.mark.parametrize("kind", ["float", "int", "ties"])
@pytest.mark.parametrize("n,K", [(5, 4), (40, 10), (130, 7)])
def test_device_candidate_rows_equal_the_cpu_lists(n, K, kind):
    """candidate_rows_xp (the device's sort, here with NumPy's stable sort) gives the CPU twin's lists entry
    for entry, ties to the lower index, in any chunking of the rows."""
    c = matrix(np.random.default_rng(n + K), n, kind)
    want = ls.candidate_lists(c, K)
    ct = np.ascontiguousarray(c.T)
    got = np.concatenate([gpu.candidate_rows_xp(np, c, ct, K, lo, min(n, lo + 17)) for lo in range(0, n, 17)])
    assert got.dtype == np.int32 and np.array_equal(got, want)


# ------------------------------------------------------------------------------------ emulated device
@needs_gxx
@pytest.mark.parametrize("kind,n", [("ties", 37), ("int", 37), ("ties", 150)])  # 150 > 64 threads: strided rows
@pytest.mark.parametrize("first,last", [(0, -1), (3, -1), (2, 9), (4, 4)])
def test_nearest_neighbour_kernel_equals_the_cpu_start(emu, first, last, kind, n):
    c = matrix(np.random.default_rng(7), n, kind)
    g = gpu.GPUTourSearch(emu.fake_cupy().asarray(c))
    tour, complete = g.nearest_neighbour(first, last)
    assert complete and np.array_equal(tour, ls.nearest_neighbour_tour(c, first, last))


@needs_gxx
def test_nearest_neighbour_kernel_out_of_time_keeps_a_valid_path(emu):
    """A device-clock budget that ends before the first step: the stops not placed follow in index
    order and the end stays last (nearest_neighbour_paced's rule)."""
    n = 30
    c = matrix(np.random.default_rng(1), n, "int")
    g = gpu.GPUTourSearch(emu.fake_cupy().asarray(c))
    tour, complete = g.nearest_neighbour(5, 9, budget_s=1e-9)
    assert not complete and tour[0] == 5 and tour[-1] == 9 and sorted(tour.tolist()) == list(range(n))
    assert tour[1:-1].tolist() == [v for v in range(n) if v not in (5, 9)]


@needs_gxx
@pytest.mark.parametrize("chunk", [1, 100, 1 << 22])
def test_candidates_paced_on_the_device_equal_the_cpu_lists(emu, chunk, monkeypatch):
    monkeypatch.setattr(config, "TOUR_GPU_CAND_SORT_KEYS", chunk)
    n, K = 23, 6
    c = matrix(np.random.default_rng(3), n, "ties")
    g = gpu.GPUTourSearch(emu.fake_cupy().asarray(c))
    nbr = g.candidates_paced(K, budget.Deadline(60.0))
    assert g.K == K and nbr is g.nbr and np.array_equal(nbr.get(), ls.candidate_lists(c, K))


@needs_gxx
def test_candidates_paced_stops_at_the_deadline(emu, monkeypatch):
    """One row a chunk and a deadline already passed: nothing is sorted and nothing kept."""
    monkeypatch.setattr(config, "TOUR_GPU_CAND_SORT_KEYS", 1)
    c = matrix(np.random.default_rng(3), 20, "int")
    g = gpu.GPUTourSearch(emu.fake_cupy().asarray(c))
    dl = budget.Deadline(1e-9)
    while dl.left() > 0:
        pass
    assert g.candidates_paced(5, dl) is None and g.nbr is None


@needs_gxx
@pytest.mark.parametrize("hood,n", [("candidates", 30), ("full", 12)])
@pytest.mark.parametrize("variant", ["closed", "path", "int"])
def test_tsp_on_a_device_matrix_never_copies_it_to_the_host(emu, hood, n, variant, monkeypatch):
    """tsp(device="gpu") of a device matrix: checked, reduced, searched on the device; no (n, n) array
    is copied to the host, uploaded, converted by NumPy or read by host code (before: np.asarray of the
    matrix in the checks, the candidate lists and the start on the host, then the upload of the host copy).
    The tour is valid and its cost is the host oracle's."""
    monkeypatch.setattr(config, "TOUR_GPU_NEIGHBOURHOOD", hood)
    rng = np.random.default_rng(n)
    xy = rng.uniform(0, 1000, (n, 2))
    c = np.hypot(*(xy[:, None, :] - xy[None, :, :]).transpose(2, 0, 1)) * rng.uniform(1.0, 1.3, (n, n))
    if variant == "int":
        c = np.rint(c).astype(np.int64)
    start, end = (2, 7) if variant == "path" else (None, None)
    d = emu.fake_cupy().asarray(c)
    events = watch_transfers(emu, monkeypatch)
    r = tsp(d, start=start, end=end, device="gpu", time_limit=1.0, seed=0)  # (the emulator is slow)
    assert matrix_copies(events, n) == []
    assert any(e[0] == "get" for e in events)  # the log does see the tours coming back
    assert r.device == "gpu" and sorted(r.tour.tolist()) == list(range(n))
    if variant == "path":
        assert r.tour[0] == 2 and r.tour[-1] == 7
    want = tour_cost(c, r.tour, r.closed)
    assert r.cost == (want if variant == "int" else pytest.approx(want, rel=1e-12))
    assert r.stats["neighbourhood"].startswith(hood)


@needs_gxx
def test_tsp_on_a_device_matrix_equals_the_host_matrix_search(emu, monkeypatch):
    """The same search either way: with the whole time limit reserved for the final polish (no ILS round,
    nothing depends on the clock), a device matrix and its host copy give the same tour (candidate lists,
    start, descent and polish identical)."""
    n = 50
    c = np.random.default_rng(11).integers(1, 500, (n, n))
    monkeypatch.setattr(config, "TOUR_POLISH_RESERVE", 1.0)  # the whole limit reserved: no ILS round
    host = tsp(c, device="gpu", time_limit=600.0, seed=0)
    dev = tsp(emu.fake_cupy().asarray(c), device="gpu", time_limit=600.0, seed=0)
    assert host.stats["rounds"] == dev.stats["rounds"] == 0
    assert host.stats["complete"] and dev.stats["complete"] and host.stats["moves"] > 0
    assert np.array_equal(host.tour, dev.tour) and host.cost == dev.cost


@needs_gxx
def test_a_device_matrix_on_the_cpu_is_copied_once(emu, monkeypatch):
    """device="cpu" (or "auto" below TOUR_GPU_AUTO_MIN_N): one explicit copy to the host, then the CPU
    search (the documented exception)."""
    n = 30
    c = np.random.default_rng(2).integers(1, 500, (n, n))
    d = emu.fake_cupy().asarray(c)
    events = watch_transfers(emu, monkeypatch)
    r = tsp(d, device="auto", time_limit=0.1, seed=0)
    assert r.device == "cpu" and [e[0] for e in matrix_copies(events, n)] == ["get"]
    assert r.cost == tour_cost(c, r.tour)


@needs_gxx
@pytest.mark.parametrize("bad,match", [
    (lambda c: c.__setitem__((3, 4), np.nan) or c, r"costs must be finite; costs\[3, 4\] = nan"),
    (lambda c: c.__setitem__((5, 1), -2.0) or c, r"costs must be non-negative; costs\[5, 1\] = -2.0"),
    (lambda c: c[:, :7], r"square \(n, n\) matrix, got shape \(8, 7\)"),
])
def test_a_bad_device_matrix_is_refused_on_the_device(emu, bad, match, monkeypatch):
    c = bad(np.ones((8, 8)))
    d = emu.fake_cupy().asarray(c)
    events = watch_transfers(emu, monkeypatch)
    with pytest.raises(ValueError, match=match):
        tsp(d, device="gpu", time_limit=0.1)
    assert matrix_copies(events, 8) == []


# ------------------------------------------------------------------------------------ a real GPU
@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("kind", ["ties", "float"])
def test_device_lists_and_start_equal_the_cpu_on_the_gpu(kind):
    import cupy as cp

    n, K = 300, 10
    c = matrix(np.random.default_rng(5), n, kind)
    g = gpu.GPUTourSearch(cp.asarray(c))
    assert np.array_equal(g.candidates_paced(K, budget.Deadline(60.0)).get(), ls.candidate_lists(c, K))
    for first, last in ((0, -1), (4, 17)):
        tour, complete = g.nearest_neighbour(first, last)
        assert complete and np.array_equal(tour, ls.nearest_neighbour_tour(c, first, last))


@pytest.mark.gpu
@needs_gpu
def test_tsp_on_a_cupy_matrix_on_the_gpu(monkeypatch):
    """A CuPy matrix: searched on the GPU without NumPy ever converting it (CuPy would raise) and without
    cupy.asnumpy; the tour is valid and its cost the host oracle's."""
    import cupy as cp

    calls = []
    real = cp.asnumpy
    monkeypatch.setattr(cp, "asnumpy", lambda a, *x, **k: calls.append(a.shape) or real(a, *x, **k))
    n = 1200
    rng = np.random.default_rng(0)
    xy = rng.uniform(0, 10_000, (n, 2))
    c = np.rint(np.hypot(*(xy[:, None, :] - xy[None, :, :]).transpose(2, 0, 1))).astype(np.int64)
    r = tsp(cp.asarray(c), device="gpu", time_limit=1.0, seed=0)
    assert r.device == "gpu" and sorted(r.tour.tolist()) == list(range(n))
    assert r.cost == tour_cost(c, r.tour) and [s for s in calls if s == (n, n)] == []


# ------------------------------------------------------------------------------------ the engine's hand-off
@needs_gxx
def test_the_table_phantom_step_can_leave_its_costs_on_the_device(emu, monkeypatch):
    """combine(d on the device, to_host=False) (engine/table.cu, emulated): the costs stay on the device,
    equal to the CPU twin's, and nothing (S, T) is copied to the host; to_host=True copies as before."""
    import gpuroute.backend.kernels as kernels
    import gpuroute.engine.table_combine as tc
    from gpuroute.engine.table_combine import combine

    monkeypatch.setattr(tc, "load_module", kernels.load_module)  # the emulator's (imported by name there)
    rng = np.random.default_rng(4)
    S, T, ko, kt, U, V = 15, 15, 2, 3, 6, 7
    d = rng.integers(0, 20, (U, V)).astype(np.float64)
    d[rng.random((U, V)) < 0.2] = np.inf
    sa, ta = rng.integers(0, 6, (S, ko)), rng.integers(0, 6, (T, kt))
    sa[rng.random((S, ko)) < 0.25] = -1
    ta[rng.random((T, kt)) < 0.25] = -1
    sf, tf = rng.integers(0, 5, (S, ko)) / 4.0, rng.integers(0, 5, (T, kt)) / 4.0
    ws = rng.integers(1, 9, (S, ko)).astype(np.float64)
    sc = np.where(sa >= 0, rng.integers(0, 6, (S, ko)).astype(np.float64), np.inf)
    tc = np.where(ta >= 0, rng.integers(0, 6, (T, kt)).astype(np.float64), np.inf)
    si, ti = rng.integers(0, U, (S, ko)), rng.integers(0, V, (T, kt))
    args = (si, ti, sc, tc, sa, ta, sf, tf, ws)
    want = combine(d, *args)
    dd = emu.fake_cupy().asarray(d)
    events = watch_transfers(emu, monkeypatch)
    got = combine(dd, *args, to_host=False)
    assert all(isinstance(x, emu.FakeArray) for x in got)
    assert [e for e in events if e[1] == (S, T)] == []
    for g, w in zip(got, want, strict=True):
        assert np.array_equal(g.get(), w)
    host = combine(dd, *args)
    assert not isinstance(host[0], emu.FakeArray) and np.array_equal(host[0], want[0])


@needs_gxx
@pytest.mark.parametrize("roundtrip,fixed", [(True, (False, False)), (False, (True, True)), (True, (False, True))])
def test_the_trip_order_on_a_device_matrix(emu, roundtrip, fixed, monkeypatch):
    """services.trip.tour on a device matrix (the trip's hand-off): completed on the device, searched there
    (tsp on the GPU, emulated), the order valid for OSRM's source/destination rules; no (n, n) copy."""
    from gpuroute.engine.services import trip as trip_service

    monkeypatch.setattr(config, "TOUR_GPU_AUTO_MIN_N", 10)
    monkeypatch.setattr(config, "SERVE_TRIP_TIME_MAX_S", 1.0)
    monkeypatch.setattr(config, "SERVE_TRIP_TIME_MIN_S", 1.0)
    n = 16
    rng = np.random.default_rng(9)
    c = rng.uniform(10, 500, (n, n))
    np.fill_diagonal(c, 0.0)
    assert trip_service.tour_on_device(n) and not trip_service.tour_on_device(config.TOUR_EXACT_MAX_N)
    d = emu.fake_cupy().asarray(c)
    events = watch_transfers(emu, monkeypatch)
    order = trip_service.tour(d, roundtrip, *fixed)
    assert matrix_copies(events, n) == []
    assert sorted(order) == list(range(n))
    if fixed == (True, True):
        assert order[0] == 0 and order[-1] == n - 1
    elif fixed == (False, True):
        assert order[0] == n - 1


@needs_gxx
def test_the_trip_order_refuses_unreachable_legs_on_the_device(emu, monkeypatch):
    from gpuroute.engine.osrm import EngineError
    from gpuroute.engine.services import trip as trip_service

    n = 14
    c = np.random.default_rng(1).uniform(1, 9, (n, n))
    c[3, 5] = np.inf
    with pytest.raises(EngineError, match="No trip visiting all destinations possible"):
        trip_service.tour(emu.fake_cupy().asarray(c), True, False, False)


def test_a_trip_past_the_exact_size_asks_for_its_matrix_on_the_device_when_the_tour_runs_there(monkeypatch):
    """Engine.trip with the tour search on the GPU (tour_on_device) asks the table search for its matrix
    with on_device=True (and not otherwise); on this machine the hierarchy's table runs on the CPU, so the
    matrix is a NumPy one and the trip is answered as always."""
    pytest.importorskip("osmium")
    pytest.importorskip("polyline")
    from gpuroute.engine import Engine, algorithms
    from gpuroute.engine.services import trip as trip_service

    asked = []
    real = algorithms.CH.many_to_many

    def spy(self, *a, **k):
        asked.append(k.get("on_device"))
        return real(self, *a, **k)

    monkeypatch.setattr(algorithms.CH, "many_to_many", spy)
    eng = Engine.open("monaco")
    g = eng.graph
    rng = np.random.default_rng(0)
    coords = [tuple(map(float, g.coords[v])) for v in rng.choice(g.n_nodes, 14, replace=False)]
    for on in (False, True):
        monkeypatch.setattr(trip_service, "tour_on_device", lambda n, _on=on: _on)
        res = eng.trip(coords, time_limit=0.05)
        assert res["code"] == "Ok" and asked[-1] is on


@pytest.mark.gpu
@needs_gpu
def test_engine_trip_hands_the_gpu_table_to_the_gpu_tour(monkeypatch):
    """On a GPU: Engine.trip past TOUR_GPU_AUTO_MIN_N stops gives tsp the hierarchy's CuPy matrix (never a
    host copy) and answers a valid trip."""
    pytest.importorskip("osmium")
    pytest.importorskip("polyline")
    import gpuroute.tours as tours
    from gpuroute.backend import is_cupy_array
    from gpuroute.engine import Engine

    monkeypatch.setattr(config, "TOUR_GPU_AUTO_MIN_N", 16)
    seen = []
    real = tours.tsp

    def spy(m, **k):
        seen.append(is_cupy_array(m))
        return real(m, **k)

    monkeypatch.setattr(tours, "tsp", spy)
    eng = Engine.open("monaco")
    g = eng.graph
    rng = np.random.default_rng(0)
    coords = [tuple(map(float, g.coords[v])) for v in rng.choice(g.n_nodes, 20, replace=False)]
    res = eng.trip(coords, time_limit=0.5)
    assert res["code"] == "Ok" and seen == [True]
    assert sorted(w["waypoint_index"] for w in res["waypoints"]) == list(range(20))
