"""Hub-label queries on the GPU (gpuroute.ch.labels_gpu, labels.cu) against Dijkstra and the numba twin
(label merges on the CPU): paired distances and tables, 32- and 64-bit label distances, with and without a
core; and PHAST whose upward pass is the sources' forward labels (phast.cu ph_label_up). Without a GPU,
NumPy emulations of both schemes (a warp a query, lanes striding over the forward label, each lane's binary
search resuming where its last one ended; a label written into the distances, then the core step and the
downward sweep) are checked against Dijkstra, so CI keeps the layouts and the claims honest."""
from __future__ import annotations

import numpy as np
import pytest
from naive import naive_ch, random_road_graph, scipy_dijkstra

import gpuroute
from gpuroute import INF, INF_U32, RoadGraph, config
from gpuroute.backend import gpu_available
from gpuroute.ch import ContractionHierarchy, query

gpu_only = pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")


def _case(seed, n=60, core_from=None):
    rng = np.random.default_rng(seed)
    g, _ = random_road_graph(rng, n)
    h = naive_ch(g, order=rng.permutation(n), core_from=core_from)
    return g, ContractionHierarchy(h, graph=g, weight=g.default_weight)


def warp_meet(lab, s, t, lanes=32):
    """The kernel's hl_meet, lane by lane, on label ids ``s != t``."""
    node, hub, dist = lab.node, lab.hub, lab.dist
    a0, a1 = int(node[s, 0]), int(node[s + 1, 0])
    b0, b1 = int(node[t, 1]), int(node[t + 1, 1])
    best = INF
    for lane in range(lanes):
        lo = b0
        i = a0 + lane
        while i < a1 and lo < b1:
            x = hub[i]
            lo += int(np.searchsorted(hub[lo:b1], x, side="left"))  # the lower bound, from the last one
            if lo < b1 and hub[lo] == x:
                best = min(best, int(dist[i]) + int(dist[lo]))
            i += lanes
    return best


@pytest.mark.parametrize("core_from", [None, 40])
@pytest.mark.parametrize("lanes", [32, 3])
def test_emulated_warp_scheme_equals_the_cpu_merge(core_from, lanes):
    g, ch = _case(5, core_from=core_from)
    lab = ch.hub_labels()
    D = scipy_dijkstra(g, np.arange(g.n_nodes))
    for s in range(0, g.n_nodes, 3):
        for t in range(g.n_nodes):
            if s == t:
                continue
            got = warp_meet(lab, int(lab.node_lid[s]), int(lab.node_lid[t]), lanes)
            assert got == D[s, t], (s, t)


def phast_from_label(ch, s):
    """PHAST with the upward pass replaced by ``s``'s forward label (the kernel ph_label_up), then the core
    step and the downward sweep over the hierarchy's levels, top first (as phast_gpu runs them)."""
    h, lab = ch.h, ch.hub_labels()
    n = h.n_nodes
    d = np.full(n, INF, dtype=np.int64)
    v = int(lab.node_lid[s])
    a0, a1 = int(lab.node[v, 0]), int(lab.node[v + 1, 0])
    d[lab.lid_node[lab.hub[a0:a1]]] = lab.dist[a0:a1]
    core = h.core.astype(np.int64)
    in_core = np.zeros(n, bool)
    in_core[core] = True
    if core.size:
        D = np.asarray(h.core_dist, dtype=np.int64)
        da = d[core]
        ok = (da[:, None] < INF) & (D < INF)
        cand = np.where(ok, da[:, None] + np.where(ok, D, 0), INF).min(axis=0)
        d[core] = np.minimum(d[core], cand)
    heads = np.repeat(np.arange(n), np.diff(h.down_first_out))
    tails = h.down_tail.astype(np.int64)
    w = h.down_weight.astype(np.int64)
    keep = ~(in_core[heads] & in_core[tails])
    rest = np.flatnonzero(~in_core)
    for lvl in sorted(set(h.level[rest].tolist()), reverse=True):
        sel = keep & (h.level[heads] == lvl) & ~in_core[heads]
        for t, hd, ww in zip(tails[sel], heads[sel], w[sel], strict=True):
            if d[t] < INF and d[t] + ww < d[hd]:
                d[hd] = d[t] + ww
    return d


@pytest.mark.parametrize("core_from", [None, 40, 0])
def test_phast_from_labels_emulated(core_from):
    """The claim the label upward pass rests on: a source's forward label, the core step and the downward
    sweep give every distance (the highest node of a shortest path is in the label, exactly)."""
    g, ch = _case(7, n=70, core_from=core_from)
    D = scipy_dijkstra(g, np.arange(g.n_nodes))
    for s in range(g.n_nodes):
        np.testing.assert_array_equal(phast_from_label(ch, s), D[s])


@pytest.mark.gpu
@gpu_only
@pytest.mark.parametrize("core_from", [None, 40, 0])
def test_gpu_phast_from_labels(core_from, monkeypatch):
    """With labels built, GPU trees (one source and batched passes) come from the labels and equal
    Dijkstra; switched off (config.CH_PHAST_FROM_LABELS) they search as before."""
    monkeypatch.setattr(config, "CH_PHAST_BATCH_ITEMS", 7 * 70)  # several passes of 7 sources
    g, ch = _case(8, n=70, core_from=core_from)
    D = scipy_dijkstra(g, np.arange(g.n_nodes))
    ch.hub_labels()
    eng = ch._gpu_engine()
    assert eng._up_plan(1)[0][0] == "labels" and eng._up_plan(7)[0][0] == "labels"
    for s in range(g.n_nodes):
        np.testing.assert_array_equal(ch.tree(s, device="gpu"), D[s])
    np.testing.assert_array_equal(ch.tree(np.arange(g.n_nodes), device="gpu"), D)
    S, T = np.array([3, 9, 60]), np.arange(g.n_nodes)
    monkeypatch.setattr(config, "CH_LABELS_TABLE_MAX_TARGETS", 0)  # a PHAST table, from the labels
    np.testing.assert_array_equal(ch.table(S, T, device="gpu"), D[S])
    monkeypatch.setattr(config, "CH_PHAST_FROM_LABELS", False)
    assert eng._up_plan(1)[0][0] != "labels"
    np.testing.assert_array_equal(ch.tree(np.arange(g.n_nodes), device="gpu"), D)


@pytest.mark.gpu
@gpu_only
@pytest.mark.parametrize("core_from", [None, 40, 0])
@pytest.mark.parametrize("seed", [0, 1])
def test_gpu_labels_equal_dijkstra(seed, core_from, monkeypatch):
    g, ch = _case(seed, core_from=core_from)
    n = g.n_nodes
    D = scipy_dijkstra(g, np.arange(n))
    ch.hub_labels()
    rng = np.random.default_rng(seed)
    s, t = rng.integers(0, n, 5000), rng.integers(0, n, 5000)
    s[:60], t[:60] = np.arange(60), np.arange(60)  # s == t
    got = ch.distances(s, t, device="gpu")
    assert ch._gpu_lab is not None and ch._gpu is None  # answered by the labels, not PHAST
    np.testing.assert_array_equal(got, D[s, t])
    np.testing.assert_array_equal(got, ch.distances(s, t, device="cpu"))
    S, T = rng.integers(0, n, 37), rng.integers(0, n, 41)
    np.testing.assert_array_equal(ch.table(S, T, device="gpu"), D[S][:, T])
    t32 = ch.table(S, T, device="gpu", dtype="uint32")
    np.testing.assert_array_equal(t32, np.where(D[S][:, T] == INF, INF_U32, D[S][:, T]))
    monkeypatch.setattr(config, "CH_LABELS_TABLE_MAX_TARGETS", 10)  # beyond it: PHAST sweeps
    np.testing.assert_array_equal(ch.table(S, T, device="gpu"), D[S][:, T])
    assert ch._gpu is not None
    import cupy as cp

    c = ch.distances(cp.asarray(s), cp.asarray(t), device="gpu")
    assert isinstance(c, cp.ndarray) and np.array_equal(c.get(), D[s, t])
    assert ch.distances(np.zeros(0, np.int64), np.zeros(0, np.int64), device="gpu").shape == (0,)


@pytest.mark.gpu
@gpu_only
@pytest.mark.parametrize("core_from", [None, 3])
def test_gpu_labels_beyond_32_bits(core_from):
    """Label distances beyond 2^31 (int64 labels, the 64-bit kernels)."""
    big = 2**31 - 1
    g = RoadGraph.from_arcs(5, [0, 1, 2, 3, 4, 1], [1, 2, 3, 4, 0, 0], {"distance": [big, big, big, big, 1, 7]})
    ch = ContractionHierarchy(naive_ch(g, order=[1, 2, 3, 0, 4], core_from=core_from), graph=g, weight="distance")
    assert ch.hub_labels().dist.dtype == np.int64
    D = scipy_dijkstra(g, np.arange(5))
    nodes = np.arange(5)
    np.testing.assert_array_equal(ch.distances(np.repeat(nodes, 5), np.tile(nodes, 5), device="gpu"), D.ravel())
    np.testing.assert_array_equal(ch.table(nodes, nodes, device="gpu"), D)


@pytest.mark.gpu
@pytest.mark.slow
@gpu_only
def test_gpu_labels_on_ny():
    """NY (DIMACS distances, CU-CH): 20,000 random pairs and a 50 x 300 table equal the CPU's labels and
    CH searches."""
    from gpuroute import datasets

    g = datasets.load("ny")
    ch = ContractionHierarchy.build(g, progress=False)
    rng = np.random.default_rng(3)
    s, t = rng.integers(0, g.n_nodes, 20000), rng.integers(0, g.n_nodes, 20000)
    want = query.distances_cpu(ch.h, s, t, labels=False)
    ch.hub_labels()
    np.testing.assert_array_equal(ch.distances(s, t, device="gpu"), want)
    S, T = rng.integers(0, g.n_nodes, 50), rng.integers(0, g.n_nodes, 300)
    np.testing.assert_array_equal(ch.table(S, T, device="gpu"), ch.table(S, T, device="cpu"))
    src = rng.integers(0, g.n_nodes, 5)  # PHAST from the labels on a real hierarchy (core 983)
    ref = gpuroute.sssp(g, src, device="cpu")
    np.testing.assert_array_equal(ch.tree(src, device="gpu"), ref)
    for i, x in enumerate(src):
        np.testing.assert_array_equal(ch.tree(int(x), device="gpu"), ref[i])
