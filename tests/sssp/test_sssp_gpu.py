"""Every GPU SSSP algorithm x variant against the CPU Dijkstra (distances and canonical predecessors).

Carries the ``gpu`` marker: skipped cleanly where CuPy or a CUDA GPU is missing (CI), run on the H100.
"""
from __future__ import annotations

import os

import numpy as np
import pytest
from conftest import shared_data

import gpuroute
from gpuroute import INF, NO_PREDECESSOR, RoadGraph
from gpuroute.backend import gpu_available
from gpuroute.sssp.api import release

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")]


def host(a):
    """A NumPy view of a result (GPU results are NumPy for NumPy sources, CuPy for CuPy sources)."""
    return a.get() if hasattr(a, "get") else np.asarray(a)

# (algorithm, variant, options)
GPU_CASES = [
    ("conventional", None, {}),  # fused device loop
    ("conventional", None, {"nodes_per_thread": 4}),
    ("conventional", None, {"chase": 1}),
    ("conventional", None, {"chase": 8}),
    ("conventional", None, {"pipelined": False}),  # the host checks each replay before the next
    ("conventional", None, {"mode": "graph"}),  # the seed's two kernels, device-side loop
    ("conventional", None, {"mode": "host"}),  # the seed's loop: flag read back every phase
    ("selection", None, {}),
    ("adaptive", None, {}),
    ("adaptive", "time", {}),  # device clock, calibrated thresholds
    ("adaptive", "time", {"up_us": 0.0, "down_us": 0.0}),  # never the queue: fc_step1 alone
    ("adaptive", "time", {"up_us": 1e-3, "down_us": 1e-3}),  # leaves the queue after 4 phases, never back
    ("adaptive", "time", {"up_us": 1e9, "down_us": 1e9}),  # queue phases throughout
    ("adaptive", "time-host", {}),  # the seed's host-timed loop
    ("adaptive", "count", {}),
    ("adaptive", "count", {"frac": 0.0}),  # no queue phase: the all-node step fc_step1
    ("adaptive", "count", {"frac": 0.05}),  # switching both ways
    ("adaptive", "count", {"frac": 0.05, "pipelined": False}),
    ("adaptive", "count", {"frac": 1.0}),  # queue phases throughout
    ("martin", "successor", {}),
    ("martin", "predecessor", {}),
    ("crauser", "successor", {}),
    ("crauser", "predecessor", {}),
    ("crauser-economic", "successor", {}),
    ("crauser-economic", "predecessor", {}),
    ("near-far", None, {}),
    ("near-far", None, {"delta": float("inf")}),
    ("near-far", None, {"frac": 0.0}),  # every phase one thread per node
    ("near-far", None, {"frac": 0.01, "delta_factor": 2}),
    ("near-far", None, {"loop": "persistent"}),
    ("cell-bf", None, {}),  # one cell on the small graphs
    ("cell-bf", None, {"threads": 32, "nodes_per_thread": 2}),  # cells of 64 nodes
    ("cell-bf", None, {"threads": 32, "nodes_per_thread": 1, "reps": 1}),
    ("cell-bf", None, {"threads": 64, "nodes_per_thread": 3, "max_in": 1}),  # in-arcs beyond the registers
    ("cell-bf", None, {"threads": 32, "rounds_per_graph": 6, "pipelined": False}),
    ("cell-bf", None, {"threads": 32, "reps": 3, "order": "grow"}),
    ("cell-bf", None, {"threads": 32, "loop": "rounds"}),
    ("cell-bf", None, {"threads": 32, "nodes_per_thread": 2, "loop": "async"}),
    ("cell-bf", None, {"threads": 64, "nodes_per_thread": 3, "max_in": 1, "loop": "rounds"}),
]
FAST_CASES = [c for c in GPU_CASES if c[0] not in ("martin",)]


def _random_graph(seed, n=300, deg=3, wmax=20):
    rng = np.random.default_rng(seed)
    m = n * deg
    tail = rng.integers(0, n, m)
    head = rng.integers(0, n, m)
    w = rng.integers(1, wmax + 1, m)
    return RoadGraph.from_arcs(n, tail, head, {"distance": w})


def check_against_dijkstra(graph, sources, alg, variant, opts):
    ref_d, ref_p = gpuroute.sssp(graph, sources, algorithm="dijkstra", device="cpu", return_predecessors=True)
    d, p = gpuroute.sssp(graph, sources, algorithm=alg, variant=variant, device="gpu",
                         return_predecessors=True, **opts)
    assert d.dtype == np.int64 and p.dtype == np.int32
    np.testing.assert_array_equal(d, ref_d, err_msg=f"{alg}/{variant}/{opts}: distances differ")
    np.testing.assert_array_equal(p, ref_p, err_msg=f"{alg}/{variant}/{opts}: predecessors differ")


@pytest.mark.parametrize("alg,variant,opts", GPU_CASES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gpu_random_graphs(alg, variant, opts, seed, monkeypatch):
    monkeypatch.setattr(gpuroute.config, "SSSP_THREADS_PER_BLOCK", 64)  # several blocks even on tiny graphs
    monkeypatch.setattr(gpuroute.config, "SSSP_PHASES_PER_GRAPH", 4)  # several graph replays
    g = _random_graph(seed)
    check_against_dijkstra(g, [0, 7, 150], alg, variant, opts)


@pytest.mark.parametrize("alg,variant,opts", GPU_CASES)
def test_gpu_unreachable_and_sentinels(alg, variant, opts):
    # two components: 0->1->2 and 3<->4
    g = RoadGraph.from_arcs(5, [0, 1, 3, 4], [1, 2, 4, 3], {"distance": [5, 7, 1, 1]})
    d, p = gpuroute.sssp(g, 0, algorithm=alg, variant=variant, device="gpu", return_predecessors=True, **opts)
    assert list(d) == [0, 5, 12, INF, INF]
    assert list(p) == [NO_PREDECESSOR, 0, 1, NO_PREDECESSOR, NO_PREDECESSOR]


@pytest.fixture(scope="module")
def ny():
    return gpuroute.datasets.load("ny")


@pytest.mark.slow
@pytest.mark.parametrize("alg,variant,opts", FAST_CASES)
def test_gpu_ny(ny, alg, variant, opts):
    check_against_dijkstra(ny, [0, 123456], alg, variant, opts)


@pytest.mark.slow
def test_gpu_ny_martin(ny):
    check_against_dijkstra(ny, [4242], "martin", "successor", {})


@pytest.mark.slow
@pytest.mark.parametrize("alg,variant,opts", [("conventional", None, {}), ("selection", None, {}),
                                              ("near-far", None, {}), ("crauser", "successor", {})])
def test_gpu_bay(alg, variant, opts):
    g = gpuroute.load_dimacs(shared_data("dimacs9", "USA-road-d.BAY.gr.gz"))
    check_against_dijkstra(g, [0, 200000], alg, variant, opts)


@pytest.mark.parametrize("opts", [{}, {"frac": 0.02}, {"loop": "persistent"}, {"delta": float("inf")}])
def test_gpu_batched_many_sources(ny, opts):
    rng = np.random.default_rng(5)
    src = rng.integers(0, ny.n_nodes, 70)
    ref_d, ref_p = gpuroute.sssp(ny, src, device="cpu", return_predecessors=True)
    got_d, got_p = gpuroute.sssp(ny, src, algorithm="near-far", device="gpu", return_predecessors=True, batch=32,
                                 **opts)  # three passes, the last one padded
    np.testing.assert_array_equal(got_d, ref_d)
    np.testing.assert_array_equal(got_p, ref_p)


@pytest.mark.parametrize("mode", ["host", "graph", "fused"])
def test_gpu_conventional_distances_only_large(mode):
    # 32-bit keys (no predecessors) on a graph large enough that a read-back racing the kernels shows
    g = _random_graph(11, n=400_000, deg=3, wmax=1000)
    ref = gpuroute.sssp(g, [3], device="cpu")
    got = gpuroute.sssp(g, [3], algorithm="conventional", device="gpu", mode=mode)
    np.testing.assert_array_equal(got, ref)


def test_gpu_cupy_in_cupy_out(ny):
    import cupy as cp

    d = gpuroute.sssp(ny, cp.asarray([0]), algorithm="selection", device="gpu")
    assert isinstance(d, cp.ndarray) and d.shape == (1, ny.n_nodes)


def test_gpu_overflow_is_an_error():
    # a path whose length exceeds 2^32 - 2 cannot be represented by 32-bit device distances
    n = 4
    w = [2 ** 31 - 1] * 3
    g = RoadGraph.from_arcs(n, [0, 1, 2], [1, 2, 3], {"distance": w})
    with pytest.raises(OverflowError):
        gpuroute.sssp(g, 0, algorithm="selection", device="gpu")


def test_phase_statistics(ny):
    res = gpuroute.sssp_full(ny, [0], algorithm="selection", device="gpu", phase_times=True)
    upd = res.stats["updated"][0]
    times = res.stats["times_us"][0]
    assert res.stats["phases"][0] == len(upd) > 100
    assert len(times) == len(upd) and np.all(times > 0)
    assert upd.sum() >= ny.n_nodes * 0.9  # every reached node is updated at least once


if os.environ.get("GPUROUTE_GPU_STRICT"):
    def test_gpu_really_present():
        assert gpu_available()


@pytest.mark.parametrize("threads", [32, 256])
def test_cell_bf_overflow_is_an_error_not_a_wrong_distance(threads, monkeypatch):
    # 2^30 + 2^30 reaches the kernel's 2^31 - 1 limit: inside a cell (pull) and across cells (boundary arcs)
    n = 70
    w = [2 ** 30] * (n - 1)
    g = RoadGraph.from_arcs(n, np.arange(n - 1), np.arange(1, n), {"distance": w})
    with pytest.raises(OverflowError, match="2\\^31"):
        gpuroute.sssp(g, 0, algorithm="cell-bf", device="gpu", threads=threads)
    # just below the limit is exact
    g2 = RoadGraph.from_arcs(3, [0, 1], [1, 2], {"distance": [2 ** 30, 2 ** 30 - 2]})
    d = gpuroute.sssp(g2, 0, algorithm="cell-bf", device="gpu", threads=threads)
    assert list(d) == [0, 2 ** 30, 2 ** 31 - 2]


@pytest.mark.parametrize("frac", [0.0, 0.001, 0.01, 1.0, "calibrated"])
def test_adaptive_count_switches_on_the_counted_frontier(ny, frac, monkeypatch):
    opts = {"frac": frac}
    release(ny)  # solvers built under another config must not answer
    if frac == "calibrated":
        # the real probes run (and capture the phase graph the solver then replays), but report queue
        # phases as cheaper, so the solver must switch at config.ADAPTIVE_FRONTIER_FRACTION: the switch
        # parameters are read from device memory, not frozen into the graph when the probes captured it
        from gpuroute.sssp.bellman_ford.gpu import AdaptiveFusedGPU

        probes = AdaptiveFusedGPU.calibrate
        monkeypatch.setattr(AdaptiveFusedGPU, "calibrate", lambda self: (probes(self), (10.0, 1.0))[1])
        monkeypatch.setattr(gpuroute.config, "SSSP_ADAPTIVE_FRONTIER_FRACTION", 0.01)
        frac, opts = 0.01, {}
        ny = gpuroute.datasets.load("ny")  # a fresh graph object: no cached solver
    res = gpuroute.sssp_full(ny, [5], algorithm="adaptive", variant="count", device="gpu", **opts)
    if not opts:
        assert res.stats["params"]["t_all_us"] == 10.0
    phases = int(res.stats["phases"][0])
    q = res.stats["extra"]["queue_phases"][0]
    upd = np.asarray(res.stats["updated"][0])
    assert len(upd) == phases and upd[-1] == 0  # the last phase finds nothing to process
    if frac == 0.0:
        assert q == 0 and (res.stats["extra"]["modes"][0] == 0).all()  # every phase fc_step1 on all nodes
    else:
        # phase p builds the next queue iff phase p - 1 processed fewer than thr nodes (phase 0: the
        # source alone, counted as 1); phase p + 1 runs on the queue iff phase p built it
        thr = int(np.ceil(frac * ny.n_nodes))
        prev = np.concatenate([[1], upd[:-1]])
        build = prev < thr
        on_queue = np.concatenate([[True], build[:-1]])
        want = np.where(on_queue, 2, np.where(build, 1, 0))
        np.testing.assert_array_equal(res.stats["extra"]["modes"][0], want)
        assert q == int(on_queue.sum())
        if frac == 1.0:
            assert q == phases
        else:
            assert 1 < q < phases
    np.testing.assert_array_equal(host(res.dist[0]), gpuroute.sssp(ny, 5, algorithm="dijkstra", device="cpu"))


@pytest.mark.parametrize("up,down", [(0.0, 0.0), (1e-3, 1e-3), (1e9, 1e9), (None, None)])
def test_adaptive_time_switches_on_device_phase_times(ny, up, down):
    opts = {} if up is None else {"up_us": up, "down_us": down}
    res = gpuroute.sssp_full(ny, [5], algorithm="adaptive", variant="time", device="gpu", phase_times=True, **opts)
    phases = int(res.stats["phases"][0])
    modes = res.stats["extra"]["modes"][0]
    times = res.stats["times_us"][0]
    par = res.stats["params"]
    assert len(times) == phases > 100 and np.all(times > 0)
    if par["down_us"] == 0.0:  # the queue regime is never entered: fc_step1 alone
        assert (modes == 0).all()
    elif up == 1e-3:  # every mean exceeds 1 ns: the lead of phase 3 leaves the queue regime, phase 4 drains it
        assert list(modes[:5]) == [2, 2, 2, 2, 2] and np.all(modes[5:] == 0)
    elif up == 1e9:  # no mean reaches 1000 s: queue phases throughout
        assert len(modes) == phases and np.all(modes == 2)
    else:  # calibrated: thresholds from the probes' all-node phase time on this GPU
        assert modes[0] == 2 and 0 < par["down_us"] <= par["up_us"]
        assert par["t_queue_us"] < par["t_all_us"]
        # a switch is followed by at least 4 phases of the new regime (the measured pair is the new one)
        regime = modes[1:] == 2  # phase p builds iff phase p + 1 runs on the queue
        flips = np.flatnonzero(np.diff(regime.astype(int)))
        assert np.all(np.diff(flips) >= 4)
    np.testing.assert_array_equal(host(res.dist[0]), gpuroute.sssp(ny, 5, algorithm="dijkstra", device="cpu"))


def _time_rule_on_host(d_ns, up_ns, down_ns):
    """Seed 001 Alg. 4 as fa_phase applies it, replayed from the phase durations the device measured:
    the expected kind of every phase (0 all-node, 1 all-node + build, 2 queue)."""
    n = len(d_ns)
    start = np.concatenate([[0], np.cumsum(d_ns)])
    bflag, since, on_queue, kinds = 1, 0, True, []
    for ph in range(n):
        kinds.append(2 if on_queue else (1 if bflag else 0))
        since += 1
        nb = bflag
        if ph >= 2 and since >= 4:
            mean = (int(start[ph]) - int(start[ph - 2])) // 2
            if bflag and mean > up_ns:
                nb = 0
            elif not bflag and mean < down_ns:
                nb = 1
        if nb != bflag:
            since = 0
        on_queue, bflag = bool(bflag), nb
    return np.asarray(kinds)


def test_adaptive_time_rule_matches_the_seed_rule_replayed_on_host(ny):
    # thresholds inside the range of NY's queue-phase times, so that the regime switches both ways
    probe = gpuroute.sssp_full(ny, [5], algorithm="adaptive", variant="time", device="gpu", phase_times=True,
                               up_us=1e9, down_us=1e9)
    up = float(np.median(probe.stats["times_us"][0]))
    res = gpuroute.sssp_full(ny, [5], algorithm="adaptive", variant="time", device="gpu", phase_times=True,
                             up_us=up, down_us=0.94 * up)
    modes = res.stats["extra"]["modes"][0]
    d_ns = np.rint(np.asarray(res.stats["times_us"][0]) * 1e3).astype(np.int64)
    want = _time_rule_on_host(d_ns, round(up * 1e3), round(0.94 * up * 1e3))
    np.testing.assert_array_equal(modes, want)
    assert 0 < res.stats["extra"]["queue_phases"][0] < res.stats["phases"][0]
    np.testing.assert_array_equal(host(res.dist[0]), gpuroute.sssp(ny, 5, algorithm="dijkstra", device="cpu"))


def test_fused_conventional_phase_times_from_the_device_clock(ny):
    res = gpuroute.sssp_full(ny, [0], algorithm="conventional", device="gpu", phase_times=True)
    times = res.stats["times_us"][0]
    upd = res.stats["updated"][0]
    assert len(times) == len(upd) == res.stats["phases"][0] > 100
    assert np.all(times > 0) and times.sum() < 1e6  # under a second in all


@pytest.mark.parametrize("max_blocks", [1, 3])
def test_cell_bf_async_blocks_owning_several_cells(max_blocks, monkeypatch):
    # a grid smaller than the cell count: each block polls and relaxes several cells (reloading them)
    monkeypatch.setattr(gpuroute.config, "CELL_ASYNC_MAX_BLOCKS", max_blocks)
    g = _random_graph(4, n=2000, deg=3, wmax=50)
    res = gpuroute.sssp_full(g, [17], algorithm="cell-bf", device="gpu", threads=32, loop="async",
                             return_predecessors=True)
    assert res.stats["params"]["loop"] == "async" and res.stats["params"]["n_cells"] > 3 * max_blocks
    ref_d, ref_p = gpuroute.sssp(g, [17], algorithm="dijkstra", device="cpu", return_predecessors=True)
    np.testing.assert_array_equal(host(res.dist), ref_d)
    np.testing.assert_array_equal(host(res.pred), ref_p)


@pytest.mark.slow
@pytest.mark.parametrize("loop", ["async", "rounds"])
def test_cell_bf_ny_both_loops(ny, loop):
    res = gpuroute.sssp_full(ny, [4242, 100000], algorithm="cell-bf", device="gpu", loop=loop)
    assert res.stats["params"]["loop"] == loop
    np.testing.assert_array_equal(host(res.dist), gpuroute.sssp(ny, [4242, 100000], device="cpu"))
