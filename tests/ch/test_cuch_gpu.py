"""CU-CH on the GPU (``gpuroute.ch.cuch_gpu``) against its numba twin (``gpuroute.ch.cuch``): the twins
must build the IDENTICAL hierarchy (every array of ``Hierarchy``) and the same per-iteration counts.

Carries the ``gpu`` marker: skipped cleanly where CuPy or a CUDA GPU is missing (CI).

How to read a failure: the step tests come first and each checks one step of one iteration against the
CPU function of the same name (``merge_csr`` / ``merge_csr_gpu``, ``score`` / ``score_gpu``, ``luby`` /
``luby_gpu``, ``shortcut_flags`` + ``emit_shortcuts`` / ``shortcuts_gpu``, ``core_apsp`` + ``core_arcs``
/ ``core_gpu``), every kernel form (group / wide SCORE, group / row SHORTCUT of 1, 2, 4 warps) included;
the whole-build tests then report the first iteration whose counts differ and the first array that
differs, also with each kernel form forced, EXTRACT's packed and index-array sorts, SELECT's exact
fallback, growing buffers, repeated builds and graphs without arcs. Run with ``-s`` to see the per-step
times of NY.
"""
from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from naive import graphs, random_road_graph

import gpuroute
from gpuroute.backend import gpu_available
from gpuroute.ch.cuch import (
    STEPS,
    build_cuch_cpu,
    core_apsp,
    core_arcs,
    emit_shortcuts,
    luby,
    merge_csr,
    pair_offsets,
    score,
    shortcut_flags,
)
from gpuroute.ch.hierarchy import Hierarchy

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")]

COUNTS = ("overlay_nodes", "overlay_arcs", "candidates", "selected", "shortcuts", "max_degree")


# ---------------------------------------------------------------------------------------------- helpers
@pytest.fixture(scope="module")
def cp():
    import cupy

    return cupy


@pytest.fixture(autouse=True)
def merge_every_iteration(monkeypatch):
    """EXTRACT by merging from the first iteration after G_0 on (the build merges only big overlays), so
    these small graphs exercise it; tests that want the sorts set ``MERGE_SORTED`` themselves."""
    from gpuroute.ch import cuch_gpu

    monkeypatch.setattr(cuch_gpu, "MERGE_MIN_ARCS", 0)


@pytest.fixture(scope="module")
def kern():
    from gpuroute.ch.cuch_gpu import Kernels

    return Kernels()


def assert_same_hierarchy(cpu, gpu):
    """Every array of the two hierarchies equal (dtype, shape, values); the message names the first
    array that differs and where."""
    for k in Hierarchy.ARRAYS:
        a, b = getattr(cpu, k), getattr(gpu, k)
        assert a.dtype == b.dtype, f"{k}: dtype {a.dtype} (CPU) != {b.dtype} (GPU)"
        assert a.shape == b.shape, f"{k}: shape {a.shape} (CPU) != {b.shape} (GPU)"
        if not np.array_equal(a, b):
            i = np.flatnonzero((a != b).ravel())
            raise AssertionError(f"{k}: {i.size} entries differ, first at flat index {i[0]}: "
                                 f"CPU {a.ravel()[i[0]]} != GPU {b.ravel()[i[0]]}")


def assert_same_counts(cpu_stats, gpu_stats):
    """The per-iteration counts agree; the message names the first iteration and count that differ."""
    for it in range(max(len(cpu_stats["selected"]), len(gpu_stats["selected"]))):
        for k in COUNTS:
            a = cpu_stats[k][it] if it < len(cpu_stats[k]) else None
            b = gpu_stats[k][it] if it < len(gpu_stats[k]) else None
            assert a == b, f"iteration {it}: {k} CPU {a} != GPU {b}"
    assert cpu_stats["iterations"] == gpu_stats["iterations"]
    assert cpu_stats["core_nodes"] == gpu_stats["core_nodes"]


def assert_cpu_gpu_same(graph, weight=None, **opt):
    from gpuroute.ch.cuch_gpu import build_cuch_gpu

    hc, sc, pc = build_cuch_cpu(graph, weight, progress=False, **opt)
    hg, sg, pg = build_cuch_gpu(graph, weight, **opt)
    assert pc == pg
    assert_same_counts(sc, sg)
    assert_same_hierarchy(hc, hg)
    return hc, sc, hg, sg


def overlay_cpu(graph, weight=None):
    w = graph.weight(weight).astype(np.int64)
    m = graph.n_arcs
    return merge_csr(graph.n_nodes, graph.tail.astype(np.int64), graph.head.astype(np.int64), w,
                     np.full(m, -1, dtype=np.int64), np.arange(m, dtype=np.int64))


def overlay_gpu(cp, kern, graph, weight=None):
    from gpuroute.ch.cuch_gpu import merge_csr_gpu

    m = graph.n_arcs
    return merge_csr_gpu(cp, kern, graph.n_nodes, cp.asarray(graph.tail, dtype=cp.int32),
                         cp.asarray(graph.head, dtype=cp.int32), cp.asarray(graph.weight(weight), dtype=cp.int64),
                         cp.full(m, -1, dtype=cp.int32), cp.arange(m, dtype=cp.int32))


OV_NAMES = ("ffo", "ftail", "fhead", "fw", "fmid", "farc", "bfo", "btail", "bw")


def assert_same_overlay(ov_cpu, ov_gpu):
    for name, a, b in zip(OV_NAMES, ov_cpu, ov_gpu.arrays(), strict=True):
        b = b.get()
        assert a.shape == b.shape, f"overlay {name}: shape {a.shape} (CPU) != {b.shape} (GPU)"
        assert np.array_equal(a, b.astype(np.int64)), f"overlay {name} differs"


def hub_graph(seed=0, spokes=300, n_in=40):
    """A random road graph plus a hub with ``spokes`` out-arcs and ``n_in`` in-arcs: its out-arcs exceed
    a group's shared-memory share (the global-memory path) and its in-degree needs 32-lane groups."""
    g, _ = random_road_graph(np.random.default_rng(seed), 500, neighbours=3, one_way=0.3)
    rng = np.random.default_rng(seed + 1)
    t = np.concatenate((g.tail, np.zeros(spokes, np.int32), rng.choice(np.arange(1, 500), n_in, replace=False)))
    h = np.concatenate((g.head, rng.choice(np.arange(1, 500), spokes, replace=False), np.zeros(n_in, np.int32)))
    w = np.concatenate((g.weight("distance"), rng.integers(100, 5000, spokes + n_in)))
    return gpuroute.RoadGraph.from_arcs(500, t, h, {"distance": w})


# ---------------------------------------------------------------------------------------------- steps
@pytest.mark.parametrize("pack", [True, False])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_merge_csr_gpu(cp, kern, monkeypatch, seed, pack):
    """EXTRACT's merge on random arc lists with many parallel arcs, ties in weight and loops (packed keys
    and an index array)."""
    from gpuroute.ch import cuch_gpu
    from gpuroute.ch.cuch_gpu import merge_csr_gpu

    monkeypatch.setattr(cuch_gpu, "PACK_KEYS", pack)

    rng = np.random.default_rng(seed)
    n, m = 50, 2000
    t = rng.integers(0, n, m)
    h = rng.integers(0, n, m)
    w = rng.integers(1, 6, m)
    mid = np.where(rng.random(m) < 0.5, -1, rng.integers(0, n, m))
    arc = np.where(mid < 0, np.arange(m), -1)
    ov_c = merge_csr(n, t, h, w, mid, arc)
    ov_g = merge_csr_gpu(cp, kern, n, cp.asarray(t, dtype=cp.int32), cp.asarray(h, dtype=cp.int32),
                         cp.asarray(w, dtype=cp.int64), cp.asarray(mid, dtype=cp.int32), cp.asarray(arc, dtype=cp.int32))
    assert_same_overlay(ov_c, ov_g)


@pytest.mark.parametrize("which", ["random", "hub", "ny"])
def test_steps_first_iteration(cp, kern, which):
    """One iteration step by step: G_0, SCORE for every group size, Luby, SHORTCUT (1 and 2 hops)."""
    from gpuroute.ch.cuch_gpu import group_size, luby_gpu, mean_weight, score_gpu, shortcuts_gpu

    if which == "random":
        graph = random_road_graph(np.random.default_rng(5), 400, neighbours=4, one_way=0.3)[0]
    elif which == "hub":
        graph = hub_graph()
    else:
        graph = gpuroute.datasets.load("ny")
    n = graph.n_nodes
    ov_c = overlay_cpu(graph)
    ov_g = overlay_gpu(cp, kern, graph)
    assert_same_overlay(ov_c, ov_g)
    ffo, ftail, fhead, fw, fmid, farc, bfo, btail, bw = ov_c
    nodes = np.arange(n, dtype=np.int64)
    mean_w = mean_weight(ov_g.arrays()[3])
    assert mean_w == (max(1, int(fw.sum()) // fw.size) if fw.size else 1)
    cost_c = score(nodes, ffo, fhead, fw, bfo, btail, bw, np.int64(mean_w))
    gs_needed = group_size(int(np.diff(bfo).max()))
    for gs in (8, 16, 32, "wide"):  # any group size gives the same costs (lanes stride over the in-arcs)
        cost_g = score_gpu(cp, kern, ov_g, cp.arange(n, dtype=cp.int32), gs).get()
        bad = np.flatnonzero(cost_c != cost_g)
        assert bad.size == 0, (f"SCORE gs={gs}: {bad.size} nodes differ, first {bad[0]}: CPU {cost_c[bad[0]]} "
                               f"GPU {cost_g[bad[0]]} (in {bfo[bad[0] + 1] - bfo[bad[0]]}, out "
                               f"{ffo[bad[0] + 1] - ffo[bad[0]]})")
    # Luby over a third of the nodes, with many equal costs (ids break the ties)
    rng = np.random.default_rng(3)
    cand = np.sort(rng.choice(n, n // 3, replace=False)).astype(np.int64)
    cost_of = rng.integers(-5, 5, n).astype(np.int64)
    for rounds in (1, 2, 3):
        sel_c = luby(n, cand, cost_of, ffo, fhead, bfo, btail, rounds)
        sel_g = luby_gpu(cp, kern, ov_g, n, cp.asarray(cand, dtype=cp.int32), cp.asarray(cost_of), rounds).get()
        assert np.array_equal(sel_c, sel_g), f"Luby rounds={rounds}: {sel_c.size} (CPU) vs {sel_g.size} (GPU) selected"
    # SHORTCUT around the 2-round selection, with the group size of the build and with every other
    off = pair_offsets(sel_c, ffo, bfo)
    flags = shortcut_flags(sel_c, off, ffo, fhead, fw, bfo, btail, bw)
    want = sorted(zip(*(a.tolist() for a in emit_shortcuts(sel_c, off, flags, ffo, fhead, fw, bfo, btail, bw)),
                      strict=True))
    for gs in sorted({gs_needed, 8, 32}) + ["rows1", "rows2", "rows4"]:
        got = shortcuts_gpu(cp, kern, ov_g, cp.asarray(sel_c, dtype=cp.int32), gs)
        got = sorted(zip(*(a.get().tolist() for a in got), strict=True))
        assert got == want, f"SHORTCUT gs={gs}: {len(want)} (CPU) vs {len(got)} (GPU) shortcuts"


@pytest.mark.parametrize("c_nodes", [1, 7, 200])
def test_core_apsp(cp, kern, c_nodes):
    """APSP and the core pairs' middles on a whole (small) graph taken as the core."""
    from gpuroute.ch.cuch_gpu import core_gpu

    graph = random_road_graph(np.random.default_rng(c_nodes), c_nodes, neighbours=3, one_way=0.3)[0]
    ov_c = overlay_cpu(graph)
    ffo, ftail, fhead, fw, fmid, farc, bfo, btail, bw = ov_c
    core = np.arange(c_nodes, dtype=np.int64)
    dist_c = core_apsp(core, ffo, fhead, fw, bfo, btail, bw)
    arcs_c = core_arcs(core, dist_c, ffo, fhead, fw, fmid, farc, bfo, btail, bw)
    dist_g, blocks = core_gpu(cp, kern, overlay_gpu(cp, kern, graph), c_nodes, cp.arange(c_nodes, dtype=cp.int32))
    assert np.array_equal(dist_c, dist_g.get())
    arcs_g = np.stack([a.get().astype(np.int64) for a in blocks[0]])
    by_pair_c = np.lexsort((arcs_c[1], arcs_c[0]))
    by_pair_g = np.lexsort((arcs_g[1], arcs_g[0]))
    assert np.array_equal(arcs_c[:, by_pair_c], arcs_g[:, by_pair_g])


# ---------------------------------------------------------------------------------------------- whole builds
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("K,C,rounds", [(1, 0.3, 2), (5, 0.1, 2), (20, 1.0, 1), (50, 0.3, 3), (10_000, 0.3, 2)])
def test_random_graphs_match_cpu(seed, K, C, rounds):
    graph = random_road_graph(np.random.default_rng(seed), 600, neighbours=4, one_way=0.3)[0]
    for weight in ("distance", "travel_time"):
        assert_cpu_gpu_same(graph, weight, K=K, C=C, luby_rounds=rounds)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gr=graphs(max_nodes=60), K=st.sampled_from([1, 3, 10, 1000]), C=st.sampled_from([0.1, 0.3, 1.0]))
def test_hypothesis_graphs_match_cpu(gr, K, C):
    graph, _ = gr
    assert_cpu_gpu_same(graph, K=K, C=C)


def test_hub_graph_matches_cpu():
    """Degrees beyond the shared-memory cache and 32-lane groups in the whole build."""
    assert_cpu_gpu_same(hub_graph(), K=30)


@pytest.mark.parametrize("score_mode,shortcut_mode,wpr,pack,merge", [
    ("group", "group", 0, True, True), ("wide", "rows", 1, True, False), ("group", "rows", 2, False, True),
    ("wide", "rows", 4, True, True), ("wide", "group", 0, False, False)])
def test_kernel_forms_match_cpu(monkeypatch, score_mode, shortcut_mode, wpr, pack, merge):
    """Every form of SCORE (group / wide), SHORTCUT (group / rows of 1, 2, 4 warps) and EXTRACT's order
    (packed keys / an index array; by merging the old arcs' order with the sorted shortcuts / by sorting
    every arc) in whole builds."""
    from gpuroute.ch import cuch_gpu

    monkeypatch.setattr(cuch_gpu, "MERGE_SORTED", merge)
    monkeypatch.setattr(cuch_gpu, "SCORE_MODE", score_mode)
    monkeypatch.setattr(cuch_gpu, "SHORTCUT_MODE", shortcut_mode)
    monkeypatch.setattr(cuch_gpu, "ROWS_WPR", wpr)
    monkeypatch.setattr(cuch_gpu, "PACK_KEYS", pack)
    graph = random_road_graph(np.random.default_rng(21), 700, neighbours=4, one_way=0.3)[0]
    assert_cpu_gpu_same(graph, K=10, C=0.3)
    assert_cpu_gpu_same(hub_graph(3), K=30, C=1.0, luby_rounds=1)


def test_no_arcs_matches_cpu():
    graph = gpuroute.RoadGraph.from_arcs(7, np.zeros(0, np.int32), np.zeros(0, np.int32),
                                         {"distance": np.zeros(0, np.int32)})
    for K in (1, 3, 100):
        assert_cpu_gpu_same(graph, K=K)


def test_buffers_grow(monkeypatch):
    """The hierarchy-arc buffers and the info rows start tiny and grow; one node per iteration."""
    from gpuroute.ch import cuch_gpu

    monkeypatch.setattr(cuch_gpu, "HBUF_ARCS_PER_ARC", 0)
    monkeypatch.setattr(cuch_gpu, "INFO_ROWS", 2)
    graph = random_road_graph(np.random.default_rng(4), 120, neighbours=4, one_way=0.3)[0]
    hc, sc, hg, sg = assert_cpu_gpu_same(graph, K=1, C=0.001)
    assert sg["iterations"] == 120 and sg["core_nodes"] == 0
    assert_cpu_gpu_same(graph, K=10, C=0.3)


@pytest.mark.parametrize("seed", [0, 1])
def test_exact_select_fallback_matches_cpu(monkeypatch, seed):
    """SELECT's exact path (taken when a cost leaves int32) gives the same hierarchy."""
    from gpuroute.ch import cuch_gpu

    monkeypatch.setattr(cuch_gpu, "FORCE_EXACT_SELECT", True)
    graph = random_road_graph(np.random.default_rng(seed), 500, neighbours=4, one_way=0.3)[0]
    assert_cpu_gpu_same(graph, K=20, C=0.3, luby_rounds=2)
    assert_cpu_gpu_same(hub_graph(seed), K=30)


def test_repeat_builds_identical():
    """Two GPU builds of one graph: identical arrays (nothing depends on timing or atomics' order)."""
    from gpuroute.ch.cuch_gpu import build_cuch_gpu

    graph = random_road_graph(np.random.default_rng(11), 800, neighbours=4, one_way=0.3)[0]
    h1 = build_cuch_gpu(graph, K=40)[0]
    h2 = build_cuch_gpu(graph, K=40)[0]
    assert_same_hierarchy(h1, h2)


def test_facade_gpu():
    from gpuroute.ch import ContractionHierarchy

    graph = random_road_graph(np.random.default_rng(9), 300)[0]
    ch_g = ContractionHierarchy.build(graph, method="cu-ch", device="gpu", K=20)
    ch_c = ContractionHierarchy.build(graph, method="cu-ch", device="cpu", K=20, progress=False)
    assert_same_hierarchy(ch_c.h, ch_g.h)
    assert ch_g.stats["device"] == "gpu" and ch_g.params == ch_c.params


def _times_table(sc, sg):
    rows = [f"{'step':>9} {'CPU s':>8} {'GPU s':>8}"]
    for step in STEPS + ("apsp",):
        key = f"time_{step}_s"
        rows.append(f"{step:>9} {sc['totals'][key]:8.3f} {sg['totals'][key]:8.3f}")
    return "\n".join(rows)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ny", "ny-time"])
def test_ny_matches_cpu(name):
    from gpuroute.ch.cuch_gpu import build_cuch_gpu

    graph = gpuroute.datasets.load(name)
    build_cuch_gpu(random_road_graph(np.random.default_rng(0), 50)[0], K=5)  # kernels compiled
    build_cuch_cpu(random_road_graph(np.random.default_rng(0), 50)[0], K=5, progress=False)  # numba compiled
    t0 = time.perf_counter()
    hg, sg, _ = build_cuch_gpu(graph)
    t_gpu = time.perf_counter() - t0
    t0 = time.perf_counter()
    hc, sc, _ = build_cuch_cpu(graph, progress=False)
    t_cpu = time.perf_counter() - t0
    print(f"\nCU-CH on {name}: GPU {t_gpu:.2f} s, CPU {t_cpu:.2f} s; {sg['iterations']} iterations, core "
          f"{sg['core_nodes']}, {sg['totals']['shortcuts']:,} shortcuts\n{_times_table(sc, sg)}")
    print("GPU per iteration (ms): " + "; ".join(
        f"{i}: " + "/".join(f"{sg[f'time_{s}_s'][i] * 1e3:.1f}" for s in STEPS) for i in range(sg["iterations"])))
    assert_same_counts(sc, sg)
    assert_same_hierarchy(hc, hg)
