"""PHAST on the GPU (gpuroute.ch.phast_gpu) against Dijkstra: one tree, batched trees (several passes),
predecessors, tables, paired distances, bounded one-to-all, uint32 results, CuPy in and out, the downward pass's
levels merged into phases; on oracle hierarchies (tests/naive.py's ``naive_ch``) with and without a core."""
from __future__ import annotations

import numpy as np
import pytest
from naive import naive_ch, random_road_graph

import gpuroute
from gpuroute import INF, INF_U32, config
from gpuroute.backend import gpu_available
from gpuroute.ch import ContractionHierarchy

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")]


def _case(seed, n=60, core_from=None, order="random"):
    rng = np.random.default_rng(seed)
    g, _ = random_road_graph(rng, n)
    o = rng.permutation(n) if order == "random" else None
    h = naive_ch(g, order=o, core_from=core_from)
    return g, ContractionHierarchy(h, graph=g, weight=g.default_weight)


@pytest.mark.parametrize("core_from", [None, 40, 0, 55])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_trees_tables_distances_within(seed, core_from, monkeypatch):
    monkeypatch.setattr(config, "CH_PHAST_BATCH_ITEMS", 7 * 60)  # several passes of 7 sources
    monkeypatch.setattr(config, "CH_PHAST_THREADS", 64)
    g, ch = _case(seed, core_from=core_from)
    n = g.n_nodes
    src = np.arange(n)
    ref_d, ref_p = gpuroute.sssp(g, src, algorithm="dijkstra", device="cpu", return_predecessors=True)
    d, p = ch.tree(src, device="gpu", return_predecessors=True)
    np.testing.assert_array_equal(d, ref_d)
    np.testing.assert_array_equal(p, ref_p)
    d1 = ch.tree(3, device="gpu")
    assert d1.shape == (n,)
    np.testing.assert_array_equal(d1, ref_d[3])
    d32 = ch.tree(src[:9], device="gpu", dtype="uint32")
    assert d32.dtype == np.uint32
    np.testing.assert_array_equal(d32, np.where(ref_d[:9] == INF, INF_U32, ref_d[:9]))
    S, T = np.array([5, 0, 17, 5]), np.array([1, 2, 3, 59, 0, 44])
    np.testing.assert_array_equal(ch.table(S, T, device="gpu"), ref_d[S][:, T])
    ps, pt = np.array([0, 4, 4, 9, 33]), np.array([9, 1, 2, 4, 33])
    np.testing.assert_array_equal(ch.distances(ps, pt, device="gpu"), ref_d[ps, pt])
    for bound in (0, 50, 10**6, 10**12):
        nodes, dist = ch.within(7, bound, device="gpu")
        want = np.flatnonzero(ref_d[7] <= bound)
        np.testing.assert_array_equal(nodes, want)
        np.testing.assert_array_equal(dist, ref_d[7][want])


@pytest.mark.parametrize("unroll, deep", [(1, 0), (4, 0), (4, 8), (4, 16)])
@pytest.mark.parametrize("core_from", [None, 40])
def test_level_pull_arcs_in_flight(unroll, deep, core_from, monkeypatch):
    """The per-level pull with one in-arc (``ph_level``) or 4 / 8 / 16 in flight a thread (``ph_level4`` on every
    level, ``ph_level8`` / ``ph_level16`` on those of mean in-degree >= 3: steps of U, then the rest under a guard,
    over nodes of every in-degree), on both passes (upward pulled, not from labels nor searched; the downward pass a
    launch a level; the core step's reached rows compacted): batched trees equal Dijkstra's; unknown settings are
    refused."""
    monkeypatch.setattr(config, "CH_PHAST_LEVEL_UNROLL", unroll)
    monkeypatch.setattr(config, "CH_PHAST_DEEP_UNROLL", deep)
    monkeypatch.setattr(config, "CH_PHAST_DEEP_DEGREE", 3)
    monkeypatch.setattr(config, "CH_PHAST_FROM_LABELS", False)
    monkeypatch.setattr(config, "CH_PHAST_MERGE_LEVELS", 1)
    monkeypatch.setattr(config, "CH_PHAST_BATCH_ITEMS", 33 * 90)  # passes of 33 sources: thread per item
    g, ch = _case(5, n=90, core_from=core_from)
    src = np.arange(g.n_nodes)
    ref = gpuroute.sssp(g, src, algorithm="dijkstra", device="cpu")
    np.testing.assert_array_equal(ch.tree(src, device="gpu"), ref)
    eng = ch._gpu_engine()
    assert {0, 1, 2, 3, 4, 5} <= set(np.diff(eng.down_fo_host).tolist())  # the U-steps and the guarded rest ran
    widths = {p[3] for p in eng._plan(eng.levels_down, 33, eng.down_fo_host)}
    assert widths == ({unroll, deep} if deep else {unroll})
    for name, bad in (("CH_PHAST_LEVEL_UNROLL", 3), ("CH_PHAST_DEEP_UNROLL", 4)):
        monkeypatch.setattr(config, name, bad)
        ch._gpu = None
        with pytest.raises(ValueError, match=f"{name} must be .*, got {bad}"):
            ch.tree(src[:40], device="gpu")
        monkeypatch.setattr(config, name, {"CH_PHAST_LEVEL_UNROLL": unroll, "CH_PHAST_DEEP_UNROLL": deep}[name])


@pytest.mark.parametrize("core_from", [None, 40, 0])
@pytest.mark.parametrize("labels", [True, False])
def test_rows_not_filled(core_from, labels, monkeypatch):
    """``config.CH_PHAST_NO_FILL``: passes of 45 sources (a thread an item) from hub labels (the core's rows filled,
    a bit a labelled item: "mask") or pulled upward level by level ("sources") over rows holding garbage (a small
    value, and the previous pass's rows): trees, tables and distances equal Dijkstra's, as with the fill."""
    monkeypatch.setattr(config, "CH_PHAST_BATCH_ITEMS", 45 * 90)  # two passes of 45 for 90 sources
    monkeypatch.setattr(config, "CH_PHAST_FROM_LABELS", labels)
    monkeypatch.setattr(config, "CH_PHAST_MERGE_LEVELS", 1)
    g, ch = _case(8, n=90, core_from=core_from)
    if labels:
        ch.hub_labels()
    src = np.arange(g.n_nodes)
    ref = gpuroute.sssp(g, src, algorithm="dijkstra", device="cpu")
    for no_fill in (True, False):
        monkeypatch.setattr(config, "CH_PHAST_NO_FILL", no_fill)
        eng = ch._gpu_engine()
        _, d, _ = eng._pass(45)
        assert eng._pass_start[0] == (("mask" if labels else "sources") if no_fill else "fill")
        with eng.stream:
            d.fill(3)  # garbage that a read of an unwritten row would carry into the trees
        np.testing.assert_array_equal(ch.tree(src, device="gpu"), ref)
        S, T = src[::2], np.array([1, 5, 89, 0])
        np.testing.assert_array_equal(ch.table(S, T, device="gpu"), ref[S][:, T])
        np.testing.assert_array_equal(ch.distances(S, S[::-1], device="gpu"), ref[S, S[::-1]])


@pytest.mark.parametrize("core_from", [None, 30, 0])
@pytest.mark.parametrize("up_search", [True, False])
def test_one_source_upward_search(core_from, up_search, monkeypatch):
    """One source runs the one-block upward search (or, switched off, the per-level pull): every single
    source's tree equals Dijkstra's."""
    monkeypatch.setattr(config, "CH_PHAST_UP_SEARCH", up_search)
    g, ch = _case(11, n=80, core_from=core_from)
    ref = gpuroute.sssp(g, np.arange(g.n_nodes), algorithm="dijkstra", device="cpu")
    for s in range(g.n_nodes):
        np.testing.assert_array_equal(ch.tree(s, device="gpu"), ref[s])


@pytest.mark.parametrize("core_from", [None, 40, 0])
@pytest.mark.parametrize("merge, cost", [(0, None), (1, None), (3, None), (1000, None), (0, (1e6, 0.0)),
                                         (0, (0.5, 2.0))])
def test_merged_downward_phases(core_from, merge, cost, monkeypatch):
    """The downward pass with its levels merged into phases (config.CH_PHAST_MERGE_LEVELS: m levels a phase, or 0:
    the cost model, here also at a step so dear that everything merges and at a cheap one), one rph_level launch a
    phase with the lanes of its mean degree: one tree (upward searched, by levels, from hub labels), batches of
    several passes and tables, equal to Dijkstra; the launches are the phases'."""
    from gpuroute.ch.phast_gpu import host_layout, merged_down

    monkeypatch.setattr(config, "CH_PHAST_MERGE_LEVELS", merge)
    monkeypatch.setattr(config, "CH_PHAST_BATCH_ITEMS", 7 * 60)  # passes of 7 sources
    monkeypatch.setattr(config, "CH_PHAST_THREADS", 64)
    if cost is not None:
        monkeypatch.setattr(config, "CH_PHASE_STEP_US", cost[0])
        monkeypatch.setattr(config, "CH_PHASE_ITER_US", cost[1])
    g, ch = _case(4, core_from=core_from)
    n = g.n_nodes
    ref = gpuroute.sssp(g, np.arange(n), algorithm="dijkstra", device="cpu")
    for up_search in (True, False):
        monkeypatch.setattr(config, "CH_PHAST_UP_SEARCH", up_search)
        for s in (0, 7, 33, n - 1):
            np.testing.assert_array_equal(ch.tree(s, device="gpu"), ref[s])
    eng = ch._gpu_engine()
    if merge != 1:
        phases, _ = merged_down(host_layout(ch.h), 1)
        assert eng.down_launches == len(phases)
        if cost is not None and cost[0] == 1e6:
            assert len(phases) == min(1, len(eng.levels_down))
    np.testing.assert_array_equal(ch.tree(np.arange(n), device="gpu"), ref)
    T = np.array([1, 2, 3, 59, 0, 44])
    np.testing.assert_array_equal(ch.table(np.arange(0, n, 3), T, device="gpu"), ref[::3][:, T])
    ch.hub_labels()
    for s in (3, 21):
        np.testing.assert_array_equal(ch.tree(s, device="gpu"), ref[s])
    np.testing.assert_array_equal(ch.tree(np.arange(n), device="gpu"), ref)


def test_cupy_in_cupy_out():
    import cupy as cp

    g, ch = _case(5)
    src = cp.asarray([1, 2, 3])
    d = ch.tree(src, device="gpu")
    assert isinstance(d, cp.ndarray) and d.shape == (3, g.n_nodes)
    np.testing.assert_array_equal(d.get(), gpuroute.sssp(g, [1, 2, 3], device="cpu"))
    t = ch.table(src, cp.asarray([0, 1]), device="gpu")
    assert isinstance(t, cp.ndarray)


def test_gpu_overflow_and_bad_ids():
    g = gpuroute.RoadGraph.from_arcs(4, [0, 1, 2], [1, 2, 3], {"w": [2**31 - 1] * 3})
    ch = ContractionHierarchy(naive_ch(g), graph=g, weight="w")
    with pytest.raises(OverflowError):
        ch.tree(0, device="gpu")
    with pytest.raises(IndexError, match="sources\\[1\\] = 4"):
        ch.tree([0, 4], device="gpu")


@pytest.mark.slow
def test_ny_sequential_and_cuch_trees():
    """A real hierarchy: NY contracted by CU-CH on the GPU; trees and tables equal Dijkstra."""
    g = gpuroute.datasets.load("ny")
    ch = ContractionHierarchy.build(g, method="cu-ch", device="gpu")
    rng = np.random.default_rng(9)
    src = rng.integers(0, g.n_nodes, 6)
    ref = gpuroute.sssp(g, src, device="cpu")
    np.testing.assert_array_equal(ch.tree(src, device="gpu"), ref)
    T = rng.integers(0, g.n_nodes, 50)
    np.testing.assert_array_equal(ch.table(src, T, device="gpu"), ref[:, T])
    for i, s in enumerate(src):  # one source: the one-block upward search
        np.testing.assert_array_equal(ch.tree(int(s), device="gpu"), ref[i])
    keep = config.CH_PHAST_MERGE_LEVELS
    for merge in (1, 4, 0):  # the downward pass a launch a level, 4 levels a phase, the cost model's phases
        config.CH_PHAST_MERGE_LEVELS = merge
        try:
            for i, s in enumerate(src[:3]):
                np.testing.assert_array_equal(ch.tree(int(s), device="gpu"), ref[i])
            np.testing.assert_array_equal(ch.tree(src, device="gpu"), ref)
        finally:
            config.CH_PHAST_MERGE_LEVELS = keep
