"""Merged phases of the downward sweep (gpuroute.ch.phast.merge_phases, shared by PHAST's GPU pass and RPHAST):
the merged in-arcs are the shortest in-phase paths, the phase boundaries follow the rule asked (m levels a phase, or
the cost model at its extremes), and the merged sweep (its CPU twin ``sweep_phases``, in each order a phase's
parallel launch allows) gives bit for bit the distances of the unmerged sweep and of Dijkstra, on PHAST's GPU layout
(``phast_gpu.host_layout``, built without a GPU) over random hierarchies with and without a core, and on NY."""
from __future__ import annotations

import importlib.util
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from naive import naive_ch, random_road_graph, scipy_dijkstra

import gpuroute
from gpuroute import INF, config
from gpuroute.ch.phast import _core_step, _flat, _upward, merge_phases, phase_cost, sweep_phases
from gpuroute.ch.phast_gpu import host_layout, merged_down
from gpuroute.ch.query import prepared

DINF = 0xFFFFFFFF


def _hierarchy(seed, n=70, core_from=None):
    rng = np.random.default_rng(seed)
    g, _ = random_road_graph(rng, n)
    return g, naive_ch(g, order=rng.permutation(n), core_from=core_from)


def _lb(lay):
    return np.array([lo for lo, _ in lay.levels_down] + [lay.n], dtype=np.int64)


def _starts(h, lay, sources):
    """What the downward pass starts from, (k, n) int64 over the layout's ids: the upward search and the core step
    of the CPU twin (tree_cpu's), by rank, moved to the layout."""
    p = prepared(h)
    rec, nw, core_pos, core_dist = _flat(p)
    n = h.n_nodes
    out = np.empty((len(sources), n), dtype=np.int64)
    hk, hn = np.empty(p.heap_cap, np.int64), np.empty(p.heap_cap, np.int32)
    entries = np.empty(max(h.core.size, 1), np.int32)
    for i, s in enumerate(sources):
        d = np.full(n, INF, dtype=np.int64)
        ne = _upward(rec, nw, core_pos, int(p.rank[s]), d, hk, hn, entries, INF)
        _core_step(p.core, core_pos, core_dist, d, entries, ne, INF)
        out[i, lay.pos] = d[p.rank]  # node v: layout id pos[v], rank rank[v]
    return out


def _sweep(bounds, fo, tl, w, starts, order):
    out = starts.copy()
    for row in out:
        sweep_phases(bounds, fo.astype(np.int64), tl.astype(np.int32), w.astype(np.int64), row, order)
    return out


# the cost model at its extremes (launches and arcs' latency cost nothing: every level its own phase; a launch costs a second and
# the bytes and arcs nothing: one phase), the defaults for 1 and 300 sources, and m levels a phase
_RULES = [dict(levels=1), dict(levels=2), dict(levels=3), dict(levels=1000),
          dict(levels=0, k=1), dict(levels=0, k=300), dict(levels=0, k=1, cost=phase_cost(step_us=0.0, iter_us=0.0)),
          dict(levels=0, k=1, cost=phase_cost(step_us=1e6, bytes_per_us=1e30, iter_us=0.0)),
          dict(levels=0, k=4, cost=phase_cost(step_us=3.0, iter_us=0.5), max_levels=2)]


@pytest.mark.parametrize("core_from", [None, 45, 0])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_merged_arcs_are_the_shortest_in_phase_paths(seed, core_from):
    g, h = _hierarchy(seed, core_from=core_from)
    lay = host_layout(h)
    fo, tl, w = (a.astype(np.int64) for a in lay.down)
    lb = _lb(lay)
    n, c = lay.n, lay.c
    for rule in _RULES:
        bounds, mfo, mtl, mw = merge_phases(c, lb, fo, tl, w, **rule)
        assert bounds[0] == c and bounds[-1] == n and set(bounds.tolist()) <= set(lb.tolist())
        if rule.get("levels", 0) >= 1:
            assert np.array_equal(bounds, np.append(lb[:-1][::rule["levels"]], lb[-1]))
        if "max_levels" in rule:
            assert all(np.count_nonzero((lb >= a) & (lb < b)) <= rule["max_levels"]
                       for a, b in zip(bounds[:-1], bounds[1:], strict=True))
        cost = rule.get("cost")
        if cost is not None and cost[0] == 0:
            assert np.array_equal(bounds, lb)  # a launch costs nothing: nothing merged
        if cost is not None and cost[0] == 1e6:
            assert bounds.size == min(2, lb.size)  # a launch costs everything: one phase
        phase = np.searchsorted(bounds, np.arange(n), side="right") - 1
        assert mfo[c] == 0 and mfo[-1] == mtl.size
        for v in range(c, n):
            tails = mtl[mfo[v]:mfo[v + 1]]
            assert len(set(tails.tolist())) == tails.size  # the lightest arc per tail
            assert np.all(tails < v) and np.all(phase[tails[tails >= c]] <= phase[v])
            # the in-phase paths into v: dist[x] = shortest path x -> ... -> v whose inner nodes are in v's phase
            best = {}
            for a in range(fo[v], fo[v + 1]):
                best[int(tl[a])] = min(best.get(int(tl[a]), INF), int(w[a]))
            inner = sorted((u for u in list(best) if u >= c and phase[u] == phase[v]), reverse=True)
            while inner:  # tails have lower ids: expand from the highest id down (a topological order)
                u = inner.pop(0)
                for a in range(fo[u], fo[u + 1]):
                    x = int(tl[a])
                    new = best[u] + int(w[a])
                    if x not in best and x >= c and phase[x] == phase[v]:
                        inner.append(x)
                        inner.sort(reverse=True)
                    best[x] = min(best.get(x, INF), new)
            assert dict(zip(tails.tolist(), mw[mfo[v]:mfo[v + 1]].tolist(), strict=True)) == best


@pytest.mark.parametrize("core_from", [None, 45, 0])
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_merged_sweep_equals_unmerged_and_dijkstra(seed, core_from):
    g, h = _hierarchy(seed, core_from=core_from)
    lay = host_layout(h)
    n = lay.n
    S = np.arange(n)
    ref = scipy_dijkstra(g, S)
    starts = _starts(h, lay, S)
    want = _sweep(_lb(lay), *lay.down, starts, 0)
    np.testing.assert_array_equal(want[:, lay.pos], ref)  # the unmerged sweep is PHAST
    for rule in _RULES:
        bounds, mfo, mtl, mw = merge_phases(lay.c, _lb(lay), *(a.astype(np.int64) for a in lay.down), **rule)
        for order in (0, 1, 2):
            np.testing.assert_array_equal(_sweep(bounds, mfo, mtl, mw, starts, order), want,
                                          err_msg=f"{rule}, order {order}")


@pytest.mark.parametrize("k", [1, 5, 64])
def test_merged_down_for_the_launcher(k, monkeypatch):
    """What GPUHierarchy launches (phases and lanes of rph_level, 32-bit arcs) for a pass of k sources, as the
    config asks; the same distances as the unmerged sweep (PHAST's merged downward pass on the host)."""
    g, h = _hierarchy(7, n=90, core_from=70)
    lay = host_layout(h)
    starts = _starts(h, lay, np.arange(lay.n))
    want = _sweep(_lb(lay), *lay.down, starts, 0)
    for merge in (0, 1, 3):
        monkeypatch.setattr(config, "CH_PHAST_MERGE_LEVELS", merge)
        phases, (fo, tl, w) = merged_down(lay, k)
        assert fo.dtype == np.int32 and tl.dtype == np.int32 and w.dtype == np.uint32
        bounds = np.array([lo for lo, _, _ in phases] + [lay.n], dtype=np.int64)
        assert phases[0][0] == lay.c and all(a[1] == b[0] for a, b in zip(phases, phases[1:], strict=False))
        for lo, hi, lg in phases:
            mean = (int(fo[hi]) - int(fo[lo])) / (hi - lo)
            lanes = 1 << lg
            assert lanes <= 32 and (k >= config.CH_PHAST_LANES_MAX_K and lg == 0
                                    or lanes >= min(mean, 32) and (lanes == 1 or lanes / 2 < mean))
        np.testing.assert_array_equal(_sweep(bounds, fo, tl, w, starts, 1), want)


def test_merge_phases_errors():
    _, h = _hierarchy(0)
    lay = host_layout(h)
    args = (lay.c, _lb(lay), *(a.astype(np.int64) for a in lay.down))
    with pytest.raises(ValueError, match="levels merged must be >= 0"):
        merge_phases(*args, levels=-1)
    with pytest.raises(ValueError, match="sources of a pass must be >= 1"):
        merge_phases(*args, k=0)
    with pytest.raises(ValueError, match="bytes_per_us > 0"):
        phase_cost(bytes_per_us=0)


def test_merged_weight_overflow_is_refused():
    """A merged arc is a sum of weights: one that does not fit the GPU's 32 bits is refused before any launch."""
    g = gpuroute.RoadGraph.from_arcs(4, [0, 1, 2], [1, 2, 3], {"w": [2**31 - 1] * 3})
    h = naive_ch(g, order=np.array([3, 2, 1, 0]))
    lay = host_layout(h)
    assert len(lay.levels_down) >= 2
    with pytest.raises(OverflowError, match="merged downward arc"):
        merged_down(lay, 1, merge=1000)


@pytest.mark.slow
def test_ny_merged_sweeps_equal_dijkstra():
    """NY (CU-CH on the CPU): the merged sweep for 1 and 256 sources by the cost model and 4 levels a phase, in
    every order, equal to the unmerged sweep and to Dijkstra; the same for RPHAST's selection of 1,000 targets."""
    from gpuroute.ch import ContractionHierarchy
    from gpuroute.ch.rphast import rphast_cpu, select_targets

    g = gpuroute.datasets.load("ny")
    ch = ContractionHierarchy.build(g, device="cpu", progress=False)
    h = ch.h
    lay = host_layout(h)
    rng = np.random.default_rng(23)
    S = rng.integers(0, g.n_nodes, 3)
    ref = gpuroute.sssp(g, S, device="cpu")
    starts = _starts(h, lay, S)
    want = _sweep(_lb(lay), *lay.down, starts, 0)
    np.testing.assert_array_equal(want[:, lay.pos], ref)
    for k, merge, orders in ((1, 0, (0, 1, 2)), (256, 0, (1,)), (1, 4, (1,))):
        phases, arcs = merged_down(lay, k, merge)
        bounds = np.array([lo for lo, _, _ in phases] + [lay.n], dtype=np.int64)
        assert len(phases) < len(lay.levels_down)  # the cost model merges the top levels
        for order in orders:
            np.testing.assert_array_equal(_sweep(bounds, *arcs, starts, order), want)
    T = rng.choice(g.n_nodes, 1000, replace=False)
    sel = select_targets(h, T)
    got = rphast_cpu(h, sel, S)
    np.testing.assert_array_equal(got, ref[:, T])
    for m in (0, 4):
        lb, fo, tl, w = sel.merged(m)
        assert lb.size - 1 < sel.n_levels
        rstart = starts[:, lay.pos[sel.node]]  # the upward pass and the core step, restricted to the selection
        for order in (0, 1):
            np.testing.assert_array_equal(_sweep(lb, fo, tl, w, rstart, order)[:, sel.target_rid], got)


# ---------------------------------------------------------------------------------------------- the launcher, emulated
def _rphast_test_module():
    spec = importlib.util.spec_from_file_location("_t_rphast_for_phast", Path(__file__).parent / "test_rphast.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("merge", [0, 3])
@pytest.mark.parametrize("k", [1, 3, 40])
def test_down_pass_launcher_on_the_emulated_kernel(merge, k, monkeypatch, tmp_path):
    """GPUHierarchy's merged downward pass (its plan, uploads, grids and the arguments of rph_level) on rphast.cu
    compiled for the CPU (tests/tours/cuda_emu.py): the rows it leaves equal the CPU twin's sweep."""
    if shutil.which("g++") is None:
        pytest.skip("the CUDA emulator needs g++")
    import gpuroute.backend.kernels as kernels
    from gpuroute.ch import phast_gpu

    t = _rphast_test_module()
    emu = t._sibling("cuda_emu")
    emu.install(monkeypatch)
    cp = sys.modules["cupy"]
    cp.uint32 = np.uint32
    monkeypatch.setattr(cp.cuda.Device, "synchronize", lambda self: None, raising=False)
    header = Path(kernels.COMMON_HEADER).read_text()
    barrier = re.search(r"__device__ __forceinline__ void grid_barrier\(.*?\n}\n", header, re.S).group(0)
    cu = tmp_path / "rphast.cu"
    cu.write_text('#include "gpuroute_common.cuh"\n' + t._PRELUDE + barrier
                  + t._cu_text().replace('#include "gpuroute_common.cuh"', ""))
    mod = emu.FakeModule(*emu.build(cu))
    monkeypatch.setattr(phast_gpu, "load_module", lambda relpath, options=(), cooperative=False: mod)
    monkeypatch.setattr(config, "CH_PHAST_MERGE_LEVELS", merge)
    monkeypatch.setattr(config, "CH_PHAST_MERGE_MAX_K", 0)  # merged at every pass size (k = 40 too)
    g, h = _hierarchy(5, n=60, core_from=50)
    lay = host_layout(h)
    n = lay.n
    S = np.random.default_rng(k).integers(0, n, k)
    starts = _starts(h, lay, S)
    want = _sweep(_lb(lay), *lay.down, starts, 0)
    eng = object.__new__(phast_gpu.GPUHierarchy)  # the parts of a GPUHierarchy the downward pass reads
    eng.cp, eng.layout, eng.levels_down, eng.down_fo_host = cp, lay, lay.levels_down, lay.down[0]
    eng.down = tuple(cp.asarray(a) for a in lay.down)
    eng.tpb, eng.flags, eng._merged, eng.k_lanes = 64, cp.zeros(8, dtype=np.int32), {}, None
    plan, arcs = eng._down_plan(k)
    assert [p[0] for p in plan] == ["lanes"] * len(plan) and len(plan) <= len(lay.levels_down)
    d = cp.asarray(np.where(starts == INF, DINF, starts).T.ravel().astype(np.uint32))  # node-major rows
    eng._launch_plan(plan, k, arcs, d)
    got = np.asarray(d).reshape(n, k).T.astype(np.int64)
    np.testing.assert_array_equal(np.where(got == DINF, INF, got), want)
    np.testing.assert_array_equal(np.where(got == DINF, INF, got)[:, lay.pos], scipy_dijkstra(g, S))
    assert not np.asarray(eng.flags).any()  # no overflow flagged


def _plan_only_engine(lay, monkeypatch):
    """The parts of a GPUHierarchy that :meth:`_down_plan` reads, with NumPy standing in for CuPy (plans only)."""
    from types import SimpleNamespace

    from gpuroute.ch import phast_gpu

    monkeypatch.setattr(phast_gpu, "load_module",
                        lambda relpath, options=(), cooperative=False: SimpleNamespace(get_function=lambda name: name))
    eng = object.__new__(phast_gpu.GPUHierarchy)
    eng.cp = SimpleNamespace(asarray=np.asarray, zeros=np.zeros,
                             cuda=SimpleNamespace(Device=lambda: SimpleNamespace(synchronize=lambda: None)))
    eng.layout, eng.levels_down, eng.down_fo_host, eng.down = lay, lay.levels_down, lay.down[0], lay.down
    eng.tpb, eng._merged, eng.k_lanes = 64, {}, None
    return eng


@pytest.mark.parametrize("merge", [0, 3])
def test_down_plan_merges_only_small_passes(merge, monkeypatch):
    """config.CH_PHAST_MERGE_MAX_K: a pass of at most that many sources gets merged phases (fewer launches than
    levels, the merged arcs), a larger one a launch per level over the hierarchy's own downward arcs (the plan
    of CH_PHAST_MERGE_LEVELS = 1); 0: merged at every size; a negative bound is refused."""
    monkeypatch.setattr(config, "CH_PHAST_MERGE_LEVELS", merge)
    monkeypatch.setattr(config, "CH_PHAST_MERGE_MAX_K", 16)
    g, h = _hierarchy(5, n=60, core_from=50)
    lay = host_layout(h)
    eng = _plan_only_engine(lay, monkeypatch)
    assert len(lay.levels_down) > 3
    per_level = eng._plan(lay.levels_down, 17, lay.down[0])
    for k in (1, 2, 16, 17, 256, 1000):
        plan, arcs = eng._down_plan(k)
        if k <= 16:
            assert [p[0] for p in plan] == ["lanes"] * len(plan) and len(plan) < len(lay.levels_down)
            assert arcs is not eng.down
        else:
            assert plan == eng._plan(lay.levels_down, k, lay.down[0]) and arcs is eng.down
            assert [p[1:3] for p in plan] == [p[1:3] for p in per_level]
    monkeypatch.setattr(config, "CH_PHAST_MERGE_MAX_K", 0)
    plan, arcs = eng._down_plan(1000)
    assert [p[0] for p in plan] == ["lanes"] * len(plan) and arcs is not eng.down
    monkeypatch.setattr(config, "CH_PHAST_MERGE_MAX_K", -1)
    with pytest.raises(ValueError, match="CH_PHAST_MERGE_MAX_K"):
        eng._down_plan(1)
