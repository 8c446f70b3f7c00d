"""CU-CH on the CPU (``gpuroute.ch.cuch.build_cuch_cpu``): CH distances against Dijkstra, the hierarchy's
invariants, determinism, parameter checks, and a slow run on DIMACS NY.

The CH query here is written independently of gpuroute's query code: a full upward Dijkstra from ``s``
over the ``up`` arcs and a full backward Dijkstra from ``t`` over the ``down`` arcs (core pairs are
hierarchy arcs, so nothing else is needed); ``dist(s, t) = min_v up_s(v) + down_t(v)``. For NY the core
pairs are left out of the searches and joined by ``core_dist`` instead (the same answer, far fewer arc
relaxations in Python).
"""
from __future__ import annotations

import heapq
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from naive import graphs, random_road_graph

import gpuroute
from gpuroute import INF
from gpuroute.backend import GPUUnavailableError, gpu_available
from gpuroute.ch.cuch import (
    build_cuch_cpu,
    cuch_params,
    emit_shortcuts,
    luby,
    merge_csr,
    n_candidates,
    pair_offsets,
    score,
    shortcut_flags,
)
from gpuroute.ch.hierarchy import Hierarchy, find_arc, unpack

BIG = 1 << 60  # stands for INF in sums (two of them still fit in int64)


# ---------------------------------------------------------------------------------------------- helpers
def _dijkstra(first, nbr, wt, src, skip=None):
    """Plain heapq Dijkstra over a CSR (``first``, ``nbr``, ``wt``); arcs ``a`` with ``skip[a]`` unused.
    Returns a dict node -> distance."""
    dist = {src: 0}
    heap = [(0, src)]
    done = set()
    while heap:
        d, u = heapq.heappop(heap)
        if u in done:
            continue
        done.add(u)
        for a in range(first[u], first[u + 1]):
            if skip is not None and skip[a]:
                continue
            v = int(nbr[a])
            nd = d + int(wt[a])
            if nd < dist.get(v, INF):
                dist[v] = nd
                heapq.heappush(heap, (nd, v))
    return dist


def upward(h, s, with_core_pairs=True):
    skip = None if with_core_pairs else _core_pair_mask(h, h.up_first_out, h.up_head)
    return _dijkstra(h.up_first_out, h.up_head, h.up_weight, s, skip)


def downward(h, t, with_core_pairs=True):
    skip = None if with_core_pairs else _core_pair_mask(h, h.down_first_out, h.down_tail)
    return _dijkstra(h.down_first_out, h.down_tail, h.down_weight, t, skip)


def _core_pair_mask(h, first, other):
    is_core = np.zeros(h.n_nodes, dtype=bool)
    is_core[h.core] = True
    owner = np.repeat(np.arange(h.n_nodes), np.diff(first))
    return is_core[owner] & is_core[other]


def ch_table(h, sources, targets):
    """CH distances (len(sources), len(targets)) by full upward/downward searches over all arcs."""
    n = h.n_nodes
    F = np.full((len(sources), n), BIG, dtype=np.int64)
    B = np.full((len(targets), n), BIG, dtype=np.int64)
    for i, s in enumerate(sources):
        for v, d in upward(h, int(s)).items():
            F[i, v] = d
    for j, t in enumerate(targets):
        for v, d in downward(h, int(t)).items():
            B[j, v] = d
    D = (F[:, None, :] + B[None, :, :]).min(axis=2)
    return np.where(D >= BIG, INF, D)


def ch_distance_core(h, s, t):
    """One CH distance with the core as one dense step: min(meeting below the core, up_s(a) +
    core_dist[a, b] + down_t(b))."""
    f = upward(h, s, with_core_pairs=False)
    b = downward(h, t, with_core_pairs=False)
    best = min((f[v] + b[v] for v in f.keys() & b.keys()), default=INF)
    c = h.core.size
    if c:
        fa = np.array([f.get(int(v), BIG) for v in h.core], dtype=np.int64)
        bb = np.array([b.get(int(v), BIG) for v in h.core], dtype=np.int64)
        cd = np.where(h.core_dist == INF, BIG, h.core_dist)
        via = int((fa[:, None] + cd + bb[None, :]).min())
        if via < BIG:
            best = min(best, via)
    return best


def all_arcs(h):
    """Every hierarchy arc as arrays ``(tail, head, weight, mid, arc)``."""
    ut = np.repeat(np.arange(h.n_nodes), np.diff(h.up_first_out))
    dh = np.repeat(np.arange(h.n_nodes), np.diff(h.down_first_out))
    return (np.concatenate((ut, h.down_tail)), np.concatenate((h.up_head, dh)),
            np.concatenate((h.up_weight, h.down_weight)), np.concatenate((h.up_mid, h.down_mid)),
            np.concatenate((h.up_arc, h.down_arc)))


def arc_weight(h, u, v):
    """Weight of the hierarchy arc ``u -> v`` (the one find_arc returns), or None."""
    if find_arc(h, u, v) is None:
        return None
    if h.rank[v] > h.rank[u]:
        lo, hi = h.up_first_out[u], h.up_first_out[u + 1]
        return int(h.up_weight[lo + int(np.flatnonzero(h.up_head[lo:hi] == v)[0])])
    lo, hi = h.down_first_out[v], h.down_first_out[v + 1]
    return int(h.down_weight[lo + int(np.flatnonzero(h.down_tail[lo:hi] == u)[0])])


def check_invariants(graph, h, weight=None):
    """Every structural property of a CU-CH hierarchy (module doc of gpuroute.ch.hierarchy)."""
    n = graph.n_nodes
    w = graph.weight(weight).astype(np.int64)
    assert np.array_equal(np.sort(h.rank), np.arange(n))
    assert np.array_equal(h.order[h.rank], np.arange(n))
    # the core: the last ranks, ascending ids, one level above every contracted node
    c = h.core.size
    assert np.array_equal(h.core, np.sort(h.core))
    assert np.array_equal(h.order[n - c:], h.core)
    is_core = np.zeros(n, dtype=bool)
    is_core[h.core] = True
    if c:
        assert (h.level[h.core] == h.core_level).all()
        assert (h.level[~is_core] < h.core_level).all()
    # within a level, ranks follow node ids
    lv = h.level[h.order]
    assert (np.diff(lv) >= 0).all(), "ranks must follow the contraction iterations"
    same = lv[1:] == lv[:-1]
    assert (h.order[1:][same] > h.order[:-1][same]).all()
    t, hd, wt, mid, arc = all_arcs(h)
    assert (t != hd).all()
    # levels: outside the core the higher-rank end has the higher level (so U_l was independent)
    both_core = is_core[t] & is_core[hd]
    hi = np.where(h.rank[hd] > h.rank[t], hd, t)
    lo = np.where(h.rank[hd] > h.rank[t], t, hd)
    assert (h.level[hi][~both_core] > h.level[lo][~both_core]).all()
    assert not (h.level[t] == h.level[hd])[~both_core].any()
    # arcs of the graph are the graph's arcs
    g_arc = arc >= 0
    assert (mid[g_arc] == -1).all()
    assert np.array_equal(graph.tail[arc[g_arc]], t[g_arc])
    assert np.array_equal(graph.head[arc[g_arc]], hd[g_arc])
    assert np.array_equal(w[arc[g_arc]], wt[g_arc])
    # every shortcut = its two halves; unpacking gives a path of graph arcs of the same weight
    for i in range(t.size):
        if mid[i] >= 0:
            assert find_arc(h, int(t[i]), int(mid[i])) is not None
            assert find_arc(h, int(mid[i]), int(hd[i])) is not None
            assert arc_weight(h, int(t[i]), int(mid[i])) + arc_weight(h, int(mid[i]), int(hd[i])) == wt[i]
            if not (is_core[t[i]] and is_core[hd[i]]):
                assert h.rank[mid[i]] < min(h.rank[t[i]], h.rank[hd[i]])
        path = unpack(h, int(t[i]), int(hd[i]), int(mid[i]), int(arc[i]), [])
        assert int(w[path].sum()) == wt[i]
        assert graph.tail[path[0]] == t[i] and graph.head[path[-1]] == hd[i]
        assert all(graph.head[a] == graph.tail[b] for a, b in zip(path[:-1], path[1:], strict=False))
    # the core's distances are the graph's
    if c:
        d = gpuroute.sssp(graph, h.core, weight=weight, device="cpu")
        assert np.array_equal(h.core_dist, d[:, h.core])
        assert (np.diag(h.core_dist) == 0).all()
        # and every finite pair is a hierarchy arc of that weight
        for a in range(c):
            for b in range(c):
                if a != b and h.core_dist[a, b] != INF:
                    assert arc_weight(h, int(h.core[a]), int(h.core[b])) == h.core_dist[a, b]


def check_distances(graph, h, weight=None):
    n = graph.n_nodes
    nodes = np.arange(n)
    want = gpuroute.sssp(graph, nodes, weight=weight, device="cpu")
    got = ch_table(h, nodes, nodes)
    assert np.array_equal(got, want)


def same_hierarchy(a, b):
    for k in Hierarchy.ARRAYS:
        x, y = getattr(a, k), getattr(b, k)
        assert x.dtype == y.dtype and np.array_equal(x, y), k


# ---------------------------------------------------------------------------------------------- tests
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gr=graphs(max_nodes=40), K=st.sampled_from([1, 2, 5, 20, 1000]), C=st.sampled_from([0.1, 0.3, 1.0]),
       rounds=st.sampled_from([1, 2, 3]))
def test_distances_and_invariants_random(gr, K, C, rounds):
    graph, _ = gr
    h, stats, params = build_cuch_cpu(graph, C=C, K=K, luby_rounds=rounds, progress=False)
    assert params == {"C": C, "K": K, "luby_rounds": rounds}
    check_invariants(graph, h)
    check_distances(graph, h)
    n = graph.n_nodes
    assert stats["core_nodes"] == h.core.size == (n if K > n else h.core.size)
    assert h.core.size < K
    assert stats["iterations"] == len(stats["selected"]) == (h.core_level if h.core.size else h.n_levels)
    assert sum(stats["selected"]) + h.core.size == n
    for i in range(stats["iterations"]):
        assert stats["overlay_nodes"][i] >= K
        assert stats["candidates"][i] == n_candidates(stats["overlay_nodes"][i], *cuch_params(C)[1:])
        assert 1 <= stats["selected"][i] <= stats["candidates"][i]


@pytest.mark.parametrize("weight", ["distance", "travel_time"])
@pytest.mark.parametrize("K,C", [(1, 0.3), (5, 0.1), (20, 1.0), (10_000, 0.3)])
def test_fixed_graphs(weight, K, C):
    graph, _ = random_road_graph(np.random.default_rng(7), 150, neighbours=4, one_way=0.3)
    h, stats, _ = build_cuch_cpu(graph, weight, C=C, K=K, progress=False)
    check_invariants(graph, h, weight)
    check_distances(graph, h, weight)
    if K == 10_000:
        assert stats["iterations"] == 0 and h.core.size == 150 and h.n_up + h.n_down > 0
    if K == 1:
        assert h.core.size == 0 and h.core_level == -1 and h.core_dist.shape == (0, 0)
    # the core step gives the same distances as searching through the core pairs
    rng = np.random.default_rng(1)
    for s, t in rng.integers(0, 150, (20, 2)):
        assert ch_distance_core(h, int(s), int(t)) == ch_table(h, [s], [t])[0, 0]


def test_deterministic():
    graph, _ = random_road_graph(np.random.default_rng(3), 300, neighbours=4, one_way=0.3)
    a, sa, _ = build_cuch_cpu(graph, K=30, progress=False)
    b, sb, _ = build_cuch_cpu(graph, K=30, progress=False)
    same_hierarchy(a, b)
    for k in ("overlay_nodes", "overlay_arcs", "candidates", "selected", "shortcuts", "max_degree"):
        assert sa[k] == sb[k]


def test_thread_count_does_not_matter():
    import numba

    graph, _ = random_road_graph(np.random.default_rng(4), 300, neighbours=4, one_way=0.3)
    a, _, _ = build_cuch_cpu(graph, K=30, progress=False)
    old = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        b, _, _ = build_cuch_cpu(graph, K=30, progress=False)
    finally:
        numba.set_num_threads(old)
    same_hierarchy(a, b)


def test_tiny_graphs():
    # one node, no arcs
    g = gpuroute.RoadGraph.from_arcs(1, [], [], {"distance": np.zeros(0, dtype=np.int64)})
    h, stats, _ = build_cuch_cpu(g, K=1, progress=False)
    assert stats["iterations"] == 1 and h.core.size == 0 and h.rank.tolist() == [0]
    h, stats, _ = build_cuch_cpu(g, K=2, progress=False)
    assert stats["iterations"] == 0 and h.core.tolist() == [0] and h.core_dist.tolist() == [[0]]
    # a path 0 -> 1 -> 2 contracted fully: the middle first (lowest cost), then the ends
    g = gpuroute.RoadGraph.from_arcs(3, [0, 1], [1, 2], {"distance": [5, 7]})
    h, stats, _ = build_cuch_cpu(g, K=1, C=1.0, progress=False)
    check_invariants(g, h)
    check_distances(g, h)


# ---------------------------------------------------------------------------------------------- steps
def overlay0(graph, weight=None):
    """G_0 as merge_csr builds it, and as a dict (u, v) -> weight."""
    w = graph.weight(weight).astype(np.int64)
    m = graph.n_arcs
    ov = merge_csr(graph.n_nodes, graph.tail.astype(np.int64), graph.head.astype(np.int64), w,
                   np.full(m, -1, dtype=np.int64), np.arange(m, dtype=np.int64))
    arcs = {(int(u), int(v)): int(x) for u, v, x in zip(graph.tail, graph.head, w, strict=True)}
    return ov, arcs


def naive_cost(arcs, v):
    """SCORE's cost of ``v`` written out from the spec (module doc of gpuroute.ch.cuch)."""
    out = {b: x for (a, b), x in arcs.items() if a == v}
    inn = {a: x for (a, b), x in arcs.items() if b == v}

    def deg(y):
        return sum(1 for a, b in arcs if a == y) + sum(1 for a, b in arcs if b == y)

    needed = sum(1 for u, wu in inn.items() for w, ww in out.items()
                 if u != w and not arcs.get((u, w), INF) <= wu + ww)
    d = len(inn) + len(out)
    ed = needed - d
    maxnbr = max((deg(y) for y in set(inn) | set(out)), default=0)
    s = sum(inn.values()) + sum(out.values())
    mx = max(list(inn.values()) + list(out.values()), default=0)
    mean_w = max(1, sum(arcs.values()) // len(arcs)) if arcs else 1
    return 64 * ed + 16 * d + 4 * maxnbr + (16 * s) // (max(d, 1) * mean_w) + (16 * mx) // mean_w


def naive_shortcuts(arcs, sel):
    """SHORTCUT's candidate shortcuts {(u, w, L, v)} written out from the spec."""
    out = {}
    for (a, b), x in arcs.items():
        out.setdefault(a, {})[b] = x
    found = set()
    for v in sel:
        for (u, b), wu in arcs.items():
            if b != v:
                continue
            for w, ww in out.get(v, {}).items():
                if u == w:
                    continue
                L = wu + ww
                if arcs.get((u, w), INF) <= L:
                    continue
                if any(x not in (u, w) and w in out.get(x, {}) and wx + out[x][w] < L
                       for x, wx in out.get(u, {}).items()):
                    continue
                found.add((u, w, L, int(v)))
    return found


def shortcuts_of(ov, sel):
    ffo, ftail, fhead, fw, fmid, farc, bfo, btail, bw = ov
    sel = np.asarray(sel, dtype=np.int64)
    off = pair_offsets(sel, ffo, bfo)
    flags = shortcut_flags(sel, off, ffo, fhead, fw, bfo, btail, bw)
    st_, sh, sw, sm = emit_shortcuts(sel, off, flags, ffo, fhead, fw, bfo, btail, bw)
    res = list(zip(st_.tolist(), sh.tolist(), sw.tolist(), sm.tolist(), strict=True))
    assert len(res) == len(set(res))
    return set(res)


def naive_luby(n, cand, key, arcs, rounds):
    nbrs = {v: set() for v in range(n)}
    for a, b in arcs:
        nbrs[a].add(b)
        nbrs[b].add(a)
    state = dict.fromkeys(cand, "undecided")
    for _ in range(rounds):
        new = {v for v in cand if state[v] == "undecided"
               and all(key[x] > key[v] for x in nbrs[v] if state.get(x) in ("undecided", "selected"))}
        for v in new:
            state[v] = "selected"
        for v in cand:
            if state[v] == "undecided" and nbrs[v] & new:
                state[v] = "excluded"
    return sorted(v for v in cand if state[v] == "selected")


@settings(max_examples=60, deadline=None)
@given(gr=graphs(max_nodes=30), seed=st.integers(0, 2**31), rounds=st.sampled_from([1, 2, 3]))
def test_steps_match_the_spec(gr, seed, rounds):
    """SCORE, Luby and SHORTCUT each against a literal transcription of the spec."""
    graph, _ = gr
    n = graph.n_nodes
    ov, arcs = overlay0(graph)
    ffo, ftail, fhead, fw, fmid, farc, bfo, btail, bw = ov
    assert {(int(a), int(b)): int(x) for a, b, x in zip(ftail, fhead, fw, strict=True)} == arcs
    nodes = np.arange(n, dtype=np.int64)
    mean_w = max(1, int(fw.sum()) // fw.size) if fw.size else 1
    cost = score(nodes, ffo, fhead, fw, bfo, btail, bw, np.int64(mean_w))
    assert cost.tolist() == [naive_cost(arcs, v) for v in range(n)]
    rng = np.random.default_rng(seed)
    cand = np.sort(rng.choice(n, size=int(rng.integers(1, n + 1)), replace=False)).astype(np.int64)
    cost_of = rng.integers(-3, 3, n).astype(np.int64)  # many ties: the id breaks them
    sel = luby(n, cand, cost_of, ffo, fhead, bfo, btail, rounds)
    key = {v: (int(cost_of[v]), v) for v in range(n)}
    assert sel.tolist() == naive_luby(n, cand.tolist(), key, arcs, rounds)
    assert not any(a in set(sel.tolist()) and b in set(sel.tolist()) for a, b in arcs)
    assert shortcuts_of(ov, sel) == naive_shortcuts(arcs, sel.tolist())


def test_witness_rules():
    """The witness rules of sec. 3.4 on hand-made overlays (u = 0, v = 1, w = 2 or 3)."""
    def ov(t, h, w):
        g = gpuroute.RoadGraph.from_arcs(4, t, h, {"distance": w})
        return overlay0(g)[0]

    # 0 -> 1 -> 2 (5 + 5) and 0 -> 2 of weight 10: a 1-hop witness (<=): no shortcut
    assert shortcuts_of(ov([0, 1, 0], [1, 2, 2], [5, 5, 10]), [1]) == set()
    # ... of weight 11: the shortcut (0, 2, 10, via 1)
    assert shortcuts_of(ov([0, 1, 0], [1, 2, 2], [5, 5, 11]), [1]) == {(0, 2, 10, 1)}
    # two equal paths 0 -> 1 -> 3 and 0 -> 2 -> 3: a 2-hop witness must be strictly shorter, so 1 and 2
    # contracted together both keep their shortcut
    o = ov([0, 1, 0, 2], [1, 3, 2, 3], [4, 4, 4, 4])
    assert shortcuts_of(o, [1, 2]) == {(0, 3, 8, 1), (0, 3, 8, 2)}
    # 0 -> 2 -> 3 strictly shorter (3 + 4 < 4 + 4) witnesses 0 -> 1 -> 3, not the other way round
    o = ov([0, 1, 0, 2], [1, 3, 2, 3], [4, 4, 3, 4])
    assert shortcuts_of(o, [1, 2]) == {(0, 3, 7, 2)}
    assert shortcuts_of(o, [1]) == set()
    # no pair (u, u): 0 <-> 1 <-> 2 two-way, contracting 1 gives 0 -> 2 and 2 -> 0 only
    o = ov([0, 1, 1, 2], [1, 0, 2, 1], [1, 1, 1, 1])
    assert shortcuts_of(o, [1]) == {(0, 2, 2, 1), (2, 0, 2, 1)}
    # merging keeps the lightest parallel arc, an arc of the graph before a shortcut of its weight,
    # then the smaller middle
    res = merge_csr(3, np.array([0, 0, 0, 0, 1]), np.array([2, 2, 2, 2, 1]), np.array([9, 8, 8, 8, 1]),
                    np.array([-1, 5, -1, 4, -1]), np.array([7, -1, 3, -1, 2]))
    ffo, ftail, fhead, fw, fmid, farc = res[:6]
    assert (ftail.tolist(), fhead.tolist(), fw.tolist(), fmid.tolist(), farc.tolist()) == ([0], [2], [8], [-1], [3])
    assert ffo.tolist() == [0, 1, 1, 1] and res[6].tolist() == [0, 0, 0, 1]


def test_luby_independence_and_selection_fraction():
    graph, _ = random_road_graph(np.random.default_rng(11), 400, neighbours=4, one_way=0.2)
    for C in (0.1, 0.3, 1.0):
        h, stats, _ = build_cuch_cpu(graph, C=C, K=50, luby_rounds=1, progress=False)
        check_invariants(graph, h)
        assert stats["candidates"][0] == -(-400 * round(C * 10) // 10)
    # more Luby rounds select at least as many nodes in the first iteration
    _, s1, _ = build_cuch_cpu(graph, C=0.3, K=50, luby_rounds=1, progress=False)
    _, s3, _ = build_cuch_cpu(graph, C=0.3, K=50, luby_rounds=3, progress=False)
    assert s3["selected"][0] >= s1["selected"][0]


def test_params():
    with pytest.raises(ValueError, match="C"):
        build_cuch_cpu(random_road_graph(np.random.default_rng(0), 5)[0], C=0.0)
    for bad in ({"C": 1.5}, {"C": "x"}, {"K": 0}, {"K": 2.5}, {"luby_rounds": 0}):
        with pytest.raises(ValueError):
            cuch_params(**bad)
    params, num, den = cuch_params()
    assert params == {"C": 0.3, "K": 1025, "luby_rounds": 2} and (num, den) == (3, 10)
    assert n_candidates(10, 3, 10) == 3 and n_candidates(11, 3, 10) == 4 and n_candidates(1, 1, 10) == 1
    with pytest.raises(KeyError):
        build_cuch_cpu(random_road_graph(np.random.default_rng(0), 5)[0], "nope")


def test_facade_cpu():
    from gpuroute.ch import ContractionHierarchy

    graph, _ = random_road_graph(np.random.default_rng(5), 120)
    ch = ContractionHierarchy.build(graph, method="cu-ch", device="cpu", K=10, C=0.3, progress=False)
    h, _, params = build_cuch_cpu(graph, K=10, C=0.3, progress=False)
    same_hierarchy(ch.h, h)
    assert ch.params == params and ch.stats["device"] == "cpu"


@pytest.mark.skipif(gpu_available(), reason="checks the error raised without a GPU")
def test_gpu_twin_needs_a_gpu():
    from gpuroute.ch.cuch_gpu import build_cuch_gpu

    with pytest.raises(GPUUnavailableError):
        build_cuch_gpu(random_road_graph(np.random.default_rng(0), 5)[0])


@pytest.mark.slow
def test_ny():
    graph = gpuroute.datasets.load("ny")
    build_cuch_cpu(random_road_graph(np.random.default_rng(0), 30)[0], K=5, progress=False)  # compiled
    t0 = time.perf_counter()
    h, stats, _ = build_cuch_cpu(graph, progress=False)
    dt = time.perf_counter() - t0
    tot = stats["totals"]
    print(f"\nCU-CH CPU on NY: {dt:.2f} s, {stats['iterations']} iterations, core {stats['core_nodes']}, "
          f"{tot['shortcuts']:,} shortcuts found, {h.n_shortcuts:,} hierarchy shortcuts (core pairs included), "
          f"up {h.n_up:,} down {h.n_down:,}; steps: "
          + ", ".join(f"{k[5:-2]} {v:.2f} s" for k, v in tot.items() if k.startswith("time_")))
    assert 0 < stats["core_nodes"] < 1025 and stats["iterations"] > 10
    # The work, counted by the build itself, in place of a wall-time bound (< 60 s) that failed at random
    # on a loaded machine. SCORE and SHORTCUT scan every overlay arc once per iteration, so the sum of the
    # overlay sizes is the build's work. Measured on NY: 52 iterations, 11.7 overlay arcs per arc in all,
    # 1.58 shortcuts per arc, 3.78 hierarchy arcs per arc (the core's pairs included), degree <= 184; a
    # selection that stalls (many thin iterations) or a shortcut blow-up breaks these bounds on any machine.
    m = graph.n_arcs
    assert stats["iterations"] <= 100 and sum(stats["overlay_arcs"]) <= 20 * m
    assert tot["shortcuts"] <= 2.5 * m and stats["hierarchy_arcs"] <= 6 * m and max(stats["max_degree"]) <= 400
    assert sum(stats["selected"]) + stats["core_nodes"] == graph.n_nodes
    rng = np.random.default_rng(2024)
    src = rng.integers(0, graph.n_nodes, 50)
    dst = rng.integers(0, graph.n_nodes, 50)
    want = gpuroute.sssp(graph, src, device="cpu")
    for i, (s, t) in enumerate(zip(src, dst, strict=True)):
        assert ch_distance_core(h, int(s), int(t)) == want[i, t]
    d = gpuroute.sssp(graph, h.core[:20], device="cpu")
    assert np.array_equal(h.core_dist[:20], d[:, h.core])
