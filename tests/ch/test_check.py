"""``check_hierarchy``: valid hierarchies pass (the trivial all-pairs hierarchy under random ranks, with
and without a core; the oracle contraction ``naive_ch`` of tests/naive.py; the builders' hierarchies),
and each kind of corruption is caught with a message naming it. Oracle for the distances:
``gpuroute.sssp`` on the CPU (and scipy for the sweep itself)."""
from __future__ import annotations

import numpy as np
import pytest
from naive import naive_ch, random_road_graph, scipy_dijkstra

from gpuroute import INF, RoadGraph, sssp
from gpuroute.ch import ContractionHierarchy, Hierarchy
from gpuroute.ch.check import check_hierarchy, phast_distances
from gpuroute.ch.hierarchy import find_arc

SEEDS = range(8)


def graph_of(seed, n=None):
    """A random road graph and a random permutation of its nodes (a rank, or a contraction order)."""
    rng = np.random.default_rng(seed)
    g, _ = random_road_graph(rng, int(rng.integers(2, 26)) if n is None else n)
    return g, rng.permutation(g.n_nodes)


def oracle(g, weight=None, order=None, n_core=0):
    """``naive_ch`` with the last ``n_core`` nodes of ``order`` left as the core."""
    return naive_ch(g, weight, order=order, core_from=g.n_nodes - n_core if n_core else None)


def all_pairs_hierarchy(graph, weight=None, *, rank=None, n_core=0):
    """The trivial valid hierarchy of a small graph: every pair ``(u, v)`` with a finite shortest distance
    is an arc, weighing that distance.

    An arc is the graph's arc ``u -> v`` when that arc is tight (``mid = -1``), else a shortcut via the
    canonical predecessor of ``v`` in the shortest-path tree of ``u`` (whose halves are again arcs of this
    hierarchy and weigh less). Levels are the ranks; with ``n_core``, the ``n_core`` highest-ranked nodes
    form the core (all of level ``n - n_core``, ``core_dist`` their distances). O(n^2) arcs: a reference
    for tests on graphs of a few dozen nodes.

    Parameters
    ----------
    graph : RoadGraph
    weight : str, optional
    rank : array_like of int, shape (n,), optional
        Any permutation (default: node order).
    n_core : int

    Returns
    -------
    Hierarchy
    """
    n = graph.n_nodes
    wname = graph.default_weight if weight is None else weight
    w = graph.weight(wname).astype(np.int64)
    rank = np.arange(n) if rank is None else np.asarray(rank, dtype=np.int64)
    if n == 0:
        return Hierarchy.from_arcs(0, rank, [], [], [], [], [], [])
    dist, pred = sssp(graph, np.arange(n), weight=wname, return_predecessors=True, device="cpu")
    dist = np.asarray(dist, dtype=np.int64).reshape(n, n)
    pred = np.asarray(pred, dtype=np.int64).reshape(n, n)
    graph_arc = {}
    for a in range(graph.n_arcs):
        graph_arc[int(graph.tail[a]), int(graph.head[a])] = a
    tail, head, wt, mid, arc = [], [], [], [], []
    for u in range(n):
        for v in np.flatnonzero(dist[u] < INF):
            v = int(v)
            if v == u:
                continue
            a = graph_arc.get((u, v))
            tight = a is not None and w[a] == dist[u, v]
            tail.append(u)
            head.append(v)
            wt.append(int(dist[u, v]))
            mid.append(-1 if tight else int(pred[u, v]))
            arc.append(a if tight else -1)
    level = rank.copy()
    core = core_dist = None
    if n_core:
        core = np.argsort(rank)[n - n_core:]
        level = np.where(rank >= n - n_core, n - n_core, rank)
        core_dist = dist[np.ix_(core, core)]
    return Hierarchy.from_arcs(n, rank, level, tail, head, wt, mid, arc, core=core, core_dist=core_dist)


def arcs_of(h):
    """Every arc of ``h`` as a list of ``(tail, head, weight, mid, arc)``."""
    out = []
    for u in range(h.n_nodes):
        for k in range(h.up_first_out[u], h.up_first_out[u + 1]):
            out.append((u, int(h.up_head[k]), int(h.up_weight[k]), int(h.up_mid[k]), int(h.up_arc[k])))
        for k in range(h.down_first_out[u], h.down_first_out[u + 1]):
            out.append((int(h.down_tail[k]), u, int(h.down_weight[k]), int(h.down_mid[k]), int(h.down_arc[k])))
    return out


def rebuild(h, arcs, **changes):
    """``Hierarchy.from_arcs`` of ``arcs`` with ``h``'s rank/level/core (or ``changes``)."""
    kw = {"rank": h.rank, "level": h.level, "core": h.core if h.core.size else None,
          "core_dist": h.core_dist if h.core.size else None}
    kw.update(changes)
    t, hd, w, m, a = (list(c) for c in zip(*arcs, strict=True)) if arcs else ([], [], [], [], [])
    return Hierarchy.from_arcs(h.n_nodes, kw["rank"], kw["level"], t, hd, w, m, a, core=kw["core"],
                               core_dist=kw["core_dist"])


def edited(h, **arrays):
    """A copy of ``h`` with some arrays replaced (no re-sorting: corrupts on purpose)."""
    a = {k: np.array(v, copy=True) for k, v in h.arrays().items()}
    a.update(arrays)
    return Hierarchy(**a)


# ---------------------------------------------------------------------------------------------- valid
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("n_core", [0, 1, 4])
def test_all_pairs_hierarchy_passes(seed, n_core):
    g, rank = graph_of(seed)
    n_core = min(n_core, g.n_nodes)
    h = all_pairs_hierarchy(g, rank=rank, n_core=n_core)
    r = check_hierarchy(h, g, samples=g.n_nodes)
    assert r["nodes"] == g.n_nodes and r["core"] == n_core
    assert r["sources"] == g.n_nodes and r["distances"] == g.n_nodes ** 2
    assert r["up_arcs"] + r["down_arcs"] == r["shortcuts"] + r["graph_arcs"]
    # every pair at a finite distance is an arc
    d = scipy_dijkstra(g, np.arange(g.n_nodes))
    assert r["up_arcs"] + r["down_arcs"] == int(((d < INF) & ~np.eye(g.n_nodes, dtype=bool)).sum())


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("n_core", [0, 3])
@pytest.mark.parametrize("weight", ["distance", "travel_time"])
def test_oracle_contraction_passes(seed, n_core, weight):
    g, order = graph_of(seed)
    n_core = min(n_core, g.n_nodes)
    h = oracle(g, weight, order, n_core)
    r = check_hierarchy(h, g, weight=weight, samples=5, seed=seed)
    assert r["sources"] == min(5, g.n_nodes)
    # the sweep itself agrees with Dijkstra from every node
    np.testing.assert_array_equal(phast_distances(h, np.arange(g.n_nodes)),
                                  scipy_dijkstra(g, np.arange(g.n_nodes), weight))


def test_facade_and_graph_taken_from_it():
    g, order = graph_of(1, 15)
    ch = ContractionHierarchy(oracle(g, order=order), graph=g, weight="distance", method="sequential")
    r = check_hierarchy(ch)
    assert r["sources"] == 15 and r["graph_arcs"] > 0
    assert check_hierarchy(ch, samples=0)["sources"] == 0
    # without a graph, only the hierarchy's own rules are checked
    r = check_hierarchy(ch.h)
    assert r["sources"] == 0 and r["graph_arcs"] == 0


def test_builders_pass_when_present():
    """The builders of the tree (sequential CH, CU-CH CPU twin) on a random graph."""
    from gpuroute.ch.cuch import build_cuch_cpu
    from gpuroute.ch.sequential import build_sequential

    g, _ = graph_of(3, 40)
    h, _, _ = build_sequential(g, "distance", progress=False)
    assert check_hierarchy(h, g, samples=40)["sources"] == 40
    h, _, _ = build_cuch_cpu(g, "distance", K=8, progress=False)
    assert check_hierarchy(h, g, samples=40)["core"] == h.core.size


# ---------------------------------------------------------------------------------------------- corruptions
@pytest.fixture
def valid():
    """(graph, hierarchy with a core of 4) on 20 nodes."""
    g, order = graph_of(5, 20)
    h = oracle(g, order=order, n_core=4)
    check_hierarchy(h, g)
    return g, h


def test_rank_not_a_permutation(valid):
    g, h = valid
    rank = h.rank.copy()
    rank[0] = rank[1]
    with pytest.raises(ValueError, match=r"rank is not a permutation: nodes \d+ and \d+ both have rank"):
        check_hierarchy(edited(h, rank=rank), g)


def test_swapped_ranks(valid):
    """Two ranks swapped (order kept consistent): arcs now go the wrong way."""
    g, h = valid
    u, v = int(h.order[0]), int(h.order[h.n_nodes - 5])
    rank, order = h.rank.copy(), h.order.copy()
    rank[u], rank[v] = rank[v], rank[u]
    order[rank[u]], order[rank[v]] = u, v
    with pytest.raises(ValueError, match=r"(up|down) arc \d+ \(\d+ -> \d+\) does not go from (lower|higher)"):
        check_hierarchy(edited(h, rank=rank, order=order), g)


def test_order_not_inverse(valid):
    g, h = valid
    order = h.order.copy()
    order[[0, 1]] = order[[1, 0]]
    with pytest.raises(ValueError, match="order is not the inverse of rank"):
        check_hierarchy(edited(h, order=order), g)


def test_changed_shortcut_weight(valid):
    g, h = valid
    k = int(np.flatnonzero(h.up_mid >= 0)[0])
    w = h.up_weight.copy()
    w[k] += 1
    with pytest.raises(ValueError, match=rf"shortcut \d+ -> \d+ via \d+ \(up arc {k}\) weighs {w[k]}, but its halves"):
        check_hierarchy(edited(h, up_weight=w), g)


def test_dropped_half(valid):
    g, h = valid
    arcs = arcs_of(h)
    u, v, _, m, _ = next(a for a in arcs if a[3] >= 0 and not (a[0] in h.core and a[1] in h.core))
    rest = [a for a in arcs if (a[0], a[1]) != (u, m)]
    assert find_arc(h, u, m) is not None
    with pytest.raises(ValueError, match=rf"shortcut {u} -> {v} via {m} \((up|down) arc \d+\) has no half {u} -> {m}"):
        check_hierarchy(rebuild(h, rest), g)


def test_wrong_level(valid):
    g, h = valid
    core = set(h.core.tolist())
    u, v = next((a[0], a[1]) for a in arcs_of(h) if a[0] not in core and a[1] not in core)
    hi, lo = (u, v) if h.rank[u] > h.rank[v] else (v, u)
    level = h.level.copy()
    level[hi] = level[lo]
    with pytest.raises(ValueError, match=rf"breaks the levels: node {hi} \(rank \d+\) has level {level[lo]}, not above "
                                         rf"node {lo}'s level"):
        check_hierarchy(edited(h, level=level), g)


def test_core_node_of_another_level(valid):
    g, h = valid
    level = h.level.copy()
    level[h.core[2]] += 1
    with pytest.raises(ValueError, match=rf"core node {h.core[2]} has level \d+, not the core level"):
        check_hierarchy(edited(h, level=level), g)


def test_wrong_core_dist_entry(valid):
    g, h = valid
    cd = h.core_dist.copy()
    i, j = np.argwhere((cd < INF) & ~np.eye(cd.shape[0], dtype=bool))[0]
    cd[i, j] -= 1
    with pytest.raises(ValueError, match=rf"core_dist\[{i}, {j}\] = {cd[i, j]} \(core nodes"):
        check_hierarchy(edited(h, core_dist=cd), g)
    cd = h.core_dist.copy()
    cd[1, 1] = 7
    with pytest.raises(ValueError, match=r"core_dist\[1, 1\] = 7 .* expected 0"):
        check_hierarchy(edited(h, core_dist=cd), g)


def test_core_must_hold_the_top_ranks():
    g, rank = graph_of(2, 12)
    h = all_pairs_hierarchy(g, rank=rank)
    low = int(h.order[0])
    level = h.level.copy()
    level[low] = h.n_nodes  # all core nodes one level
    core = np.array([low])
    with pytest.raises(ValueError, match=rf"core node {low} has rank 0: the 1 core nodes must hold the highest ranks"):
        check_hierarchy(edited(h, core=core, core_dist=np.zeros((1, 1), dtype=np.int64), level=level), g)


def test_wrong_graph_arc_id(valid):
    g, h = valid
    k = int(np.flatnonzero(h.up_arc >= 0)[0])
    arc = h.up_arc.copy()
    arc[k] = (arc[k] + 1) % g.n_arcs
    with pytest.raises(ValueError, match=rf"up arc {k} \(\d+ -> \d+, weight \d+\) names graph arc {arc[k]}, which is"):
        check_hierarchy(edited(h, up_arc=arc), g)
    arc[k] = g.n_arcs
    with pytest.raises(ValueError, match=rf"names graph arc {g.n_arcs}, outside the graph's arc range"):
        check_hierarchy(edited(h, up_arc=arc), g)


def test_shortcut_and_arc_at_once(valid):
    g, h = valid
    k = int(np.flatnonzero(h.down_arc >= 0)[0])
    mid = h.down_mid.copy()
    mid[k] = 0 if h.down_tail[k] != 0 else 1
    with pytest.raises(ValueError, match=rf"down arc {k} .* exactly one must be >= 0"):
        check_hierarchy(edited(h, down_mid=mid), g)


def test_missing_shortcut_caught_by_distances():
    """A path 0 - 1 - 2 with 1 contracted first: without the shortcut 0 -> 2 every structural rule holds,
    but the hierarchy no longer finds d(0, 2)."""
    g = RoadGraph.from_arcs(3, [0, 1, 1, 2], [1, 0, 2, 1], {"distance": [3, 3, 4, 4]})
    h = oracle(g, order=[1, 0, 2])
    assert find_arc(h, 0, 2) == (0, 2, 1, -1)
    check_hierarchy(h, g)
    rest = [a for a in arcs_of(h) if (a[0], a[1]) != (0, 2)]
    with pytest.raises(ValueError, match="distance from node 0 to node 2: the hierarchy gives INF, Dijkstra 7"):
        check_hierarchy(rebuild(h, rest), g)


def test_another_graph_refused(valid):
    g, h = valid
    ch = ContractionHierarchy(h, graph=g, weight="distance")
    g2 = RoadGraph(g.first_out, g.head, {"distance": g.weight("distance") + 1, "travel_time": g.weight("travel_time")})
    with pytest.raises(ValueError, match=f"built from another graph \\(fingerprint {g.fingerprint()}"):
        check_hierarchy(ch, g2)
    small = RoadGraph.from_arcs(3, [0], [1], {"distance": [1]})
    with pytest.raises(ValueError, match="the hierarchy has 20 nodes, the graph"):
        check_hierarchy(h, small)


def test_broken_csr_named(valid):
    g, h = valid
    fo = h.up_first_out.copy()
    fo[-1] += 1
    with pytest.raises(ValueError, match="up_first_out is not a CSR"):
        check_hierarchy(edited(h, up_first_out=fo), g)
    head = h.up_head.copy()
    head[0] = h.n_nodes
    with pytest.raises(ValueError, match=rf"up arc 0: up_head {h.n_nodes} is outside the node range"):
        check_hierarchy(edited(h, up_head=head), g)
