"""CPU CH queries (gpuroute.ch.query, gpuroute.ch.phast) against the CPU Dijkstra oracle, on naive_ch
hierarchies of random graphs with and without a core."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from naive import graphs, naive_ch, random_road_graph

import gpuroute
from gpuroute import INF, RoadGraph
from gpuroute.ch import ContractionHierarchy, Hierarchy, phast, query
from gpuroute.ch.phast import table_cpu, tree_cpu, within_cpu
from gpuroute.ch.query import CHQuery, distances_cpu

PROPERTY = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def oracle(g, weight):
    """All-pairs distances int64 (n, n) by the CPU Dijkstra."""
    return np.atleast_2d(gpuroute.sssp(g, np.arange(g.n_nodes), weight=weight, algorithm="dijkstra", device="cpu"))


def check_path(g, res, s, t, expected):
    """``res`` has the expected distance and a path of graph arcs from ``s`` to ``t`` summing to it."""
    assert res.distance == expected
    assert res.method == "ch" and res.device == "cpu"
    assert res.unit == g.units[res.weight]
    if expected == INF:
        assert res.nodes.size == 0 and res.arcs.size == 0 and not res.reachable
        return
    assert res.nodes.dtype == np.int32 and res.arcs.dtype == np.int32
    assert res.nodes[0] == s and res.nodes[-1] == t
    assert res.arcs.size == res.nodes.size - 1
    np.testing.assert_array_equal(g.tail[res.arcs], res.nodes[:-1])
    np.testing.assert_array_equal(g.head[res.arcs], res.nodes[1:])
    assert int(g.weight(res.weight).astype(np.int64)[res.arcs].sum()) == expected


@st.composite
def hierarchies(draw, max_nodes=30):
    """``(graph, weight, Hierarchy)``: a random graph, a random contraction order, and a core of the
    top ranks (none, some, or every node) in half the examples."""
    g, _ = draw(graphs(max_nodes=max_nodes))
    n = g.n_nodes
    weight = draw(st.sampled_from(g.weight_names))
    order = np.random.default_rng(draw(st.integers(0, 2**32 - 1))).permutation(n)
    core_from = draw(st.one_of(st.none(), st.integers(0, n)))
    return g, weight, naive_ch(g, weight, order=order, core_from=core_from)


def facade(g, weight, h):
    return ContractionHierarchy(h, graph=g, weight=weight)


# ---------------------------------------------------------------------------------------------- property tests
@PROPERTY
@given(ghw=hierarchies(), data=st.data())
def test_route_matches_dijkstra(ghw, data):
    g, weight, h = ghw
    n = g.n_nodes
    d = oracle(g, weight)
    q = CHQuery(facade(g, weight, h))
    pairs = data.draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), min_size=1, max_size=25))
    for s, t in pairs:  # one query object: its buffers must be reset between queries
        check_path(g, q.route(s, t), s, t, int(d[s, t]))


@PROPERTY
@given(ghw=hierarchies())
def test_route_every_pair_without_stalling(ghw):
    g, weight, h = ghw
    d = oracle(g, weight)
    q = CHQuery(facade(g, weight, h), stall=False)
    for s in range(g.n_nodes):
        for t in range(g.n_nodes):
            check_path(g, q.route(s, t), s, t, int(d[s, t]))


@PROPERTY
@given(ghw=hierarchies(), stall=st.booleans())
def test_distances_tree_table_match_dijkstra(ghw, stall):
    g, weight, h = ghw
    n = g.n_nodes
    d = oracle(g, weight)
    nodes = np.arange(n)
    src, dst = np.repeat(nodes, n), np.tile(nodes, n)
    np.testing.assert_array_equal(distances_cpu(h, src, dst, stall=stall), d.ravel())
    np.testing.assert_array_equal(tree_cpu(h, nodes), d)
    np.testing.assert_array_equal(table_cpu(h, nodes, nodes, stall=stall), d)
    rng = np.random.default_rng(n)
    s, t = rng.integers(0, n, 7), rng.integers(0, n, 5)  # repeats included
    np.testing.assert_array_equal(table_cpu(h, s, t, stall=stall), d[np.ix_(s, t)])


@PROPERTY
@given(ghw=hierarchies(), data=st.data())
def test_within_matches_dijkstra(ghw, data):
    g, weight, h = ghw
    d = oracle(g, weight)
    s = data.draw(st.integers(0, g.n_nodes - 1), label="source")
    finite = d[s][d[s] < INF]
    bounds = {0, 1, int(finite.max()), int(np.median(finite)), INF - 1, INF, 10**30}
    bounds |= {int(finite.max()) - 1, data.draw(st.integers(0, int(finite.max()) + 1), label="bound")}
    for b in sorted(x for x in bounds if x >= 0):
        nodes, dist = within_cpu(h, s, b)
        want = np.flatnonzero((d[s] <= b) & (d[s] < INF))
        assert nodes.dtype == np.int32 and dist.dtype == np.int64
        np.testing.assert_array_equal(nodes, want)
        np.testing.assert_array_equal(dist, d[s, want])


# ---------------------------------------------------------------------------------------------- fixed cases
def two_islands():
    """Nodes 0-1-2 (a one-way chain 0 -> 1 -> 2 plus 2 -> 0) and 3 <-> 4, no arc between the islands."""
    t = [0, 1, 2, 3, 4]
    h = [1, 2, 0, 4, 3]
    return RoadGraph.from_arcs(5, t, h, {"distance": [5, 7, 11, 2, 3]}, units={"distance": "m"})


@pytest.mark.parametrize("core_from", [None, 0, 2, 4])
def test_unreachable_pairs_are_inf(core_from):
    g = two_islands()
    h = naive_ch(g, order=[4, 0, 3, 2, 1], core_from=core_from)
    ch = facade(g, "distance", h)
    d = oracle(g, "distance")
    assert d[0, 3] == INF
    res = ch.route(0, 4)
    check_path(g, res, 0, 4, INF)
    check_path(g, ch.route(2, 1), 2, 1, 16)
    check_path(g, ch.route(4, 4), 4, 4, 0)
    assert ch.route(4, 4).nodes.tolist() == [4]
    np.testing.assert_array_equal(ch.distances([0, 3, 1, 4], [3, 0, 0, 3]), [INF, INF, 18, 3])
    np.testing.assert_array_equal(ch.tree([0, 3]), d[[0, 3]])
    np.testing.assert_array_equal(ch.table([0, 1, 4], [2, 3]), d[np.ix_([0, 1, 4], [2, 3])])
    nodes, dist = ch.within(3, INF)
    assert nodes.tolist() == [3, 4] and dist.tolist() == [0, 2]


def test_ids_out_of_range_raise_index_error():
    g = two_islands()
    ch = facade(g, "distance", naive_ch(g, core_from=3))
    for call in (lambda: ch.route(0, 5), lambda: ch.route(-1, 0), lambda: ch.distances([0, 5], [1, 1]),
                 lambda: ch.tree([5]), lambda: ch.table([0], [-1]), lambda: ch.within(5, 10),
                 lambda: distances_cpu(ch.h, [7], [0]), lambda: tree_cpu(ch.h, [9]),
                 lambda: table_cpu(ch.h, [9], [0]), lambda: within_cpu(ch.h, 5, 1)):
        with pytest.raises(IndexError):
            call()
    with pytest.raises(TypeError):
        ch.route(0.5, 1)
    with pytest.raises(ValueError):
        distances_cpu(ch.h, [0, 1], [1])
    with pytest.raises(ValueError):
        within_cpu(ch.h, 0, -1)
    with pytest.raises(ValueError):
        CHQuery(ContractionHierarchy(ch.h)).route(0, 1)  # no graph


def test_broken_hierarchy_is_reported():
    # 0 -> 1 -> 2 with 1 contracted first: the shortcut 0 -> 2 via 1 stays, its half 0 -> 1 is dropped
    g = RoadGraph.from_arcs(3, [0, 1], [1, 2], {"distance": [4, 6]})
    h = Hierarchy.from_arcs(3, [1, 0, 2], [1, 0, 2], [1, 0], [2, 2], [6, 10], [-1, 1], [1, -1])
    for labels in (False, True):
        with pytest.raises(ValueError, match="broken hierarchy"):
            CHQuery(facade(g, "distance", h), labels=labels).route(0, 2)


def test_parallel_chunks(monkeypatch):
    """Tiny chunk sizes so that small inputs run several chunks (each with its own buffers)."""
    monkeypatch.setattr(query, "_MIN_PAIRS_PER_WORKER", 1)
    monkeypatch.setattr(query, "_LABEL_SCRATCH", 16)
    monkeypatch.setattr(phast, "_MIN_PER_CHUNK", 1)
    rng = np.random.default_rng(3)
    g, _ = random_road_graph(rng, 40, one_way=0.3)
    d = oracle(g, "distance")
    for core_from in (None, 25):
        h = naive_ch(g, order=rng.permutation(40), core_from=core_from)
        s, t = rng.integers(0, 40, 300), rng.integers(0, 40, 300)
        np.testing.assert_array_equal(distances_cpu(h, s, t), d[s, t])
        np.testing.assert_array_equal(distances_cpu(h, s, t, labels=True), d[s, t])
        np.testing.assert_array_equal(tree_cpu(h, s[:30]), d[s[:30]])
        np.testing.assert_array_equal(table_cpu(h, s[:30], t[:20]), d[np.ix_(s[:30], t[:20])])


def test_empty_inputs():
    g = two_islands()
    h = naive_ch(g)
    assert distances_cpu(h, [], []).shape == (0,)
    assert tree_cpu(h, np.zeros(0, dtype=np.int64)).shape == (0, 5)
    assert table_cpu(h, [], [1, 2]).shape == (0, 2)
    assert table_cpu(h, [1], []).shape == (1, 0)


@pytest.mark.parametrize("core_from", [None, 3])
def test_weights_beyond_32_bits(core_from):
    """Shortcuts over arcs of the largest weight pass 2^31: the 64-bit layout gives the same answers."""
    big = 2**31 - 1
    g = RoadGraph.from_arcs(5, [0, 1, 2, 3, 4, 1], [1, 2, 3, 4, 0, 0], {"distance": [big, big, big, big, 1, 7]})
    h = naive_ch(g, order=[1, 2, 3, 0, 4], core_from=core_from)
    assert h.up_weight.max() >= 2**31 or h.down_weight.max() >= 2**31
    assert query.prepared(h).nw.dtype == np.int64
    d = oracle(g, "distance")
    ch = facade(g, "distance", h)
    for s in range(5):
        for t in range(5):
            check_path(g, ch.route(s, t), s, t, int(d[s, t]))
    nodes = np.arange(5)
    np.testing.assert_array_equal(distances_cpu(h, np.repeat(nodes, 5), np.tile(nodes, 5)), d.ravel())
    q = CHQuery(ch, labels=True)
    assert query.hub_labels(h).dist.dtype == np.int64
    for s in range(5):
        for t in range(5):
            check_path(g, q.route(s, t), s, t, int(d[s, t]))
    np.testing.assert_array_equal(distances_cpu(h, np.repeat(nodes, 5), np.tile(nodes, 5), labels=True), d.ravel())
    np.testing.assert_array_equal(tree_cpu(h, nodes), d)
    np.testing.assert_array_equal(table_cpu(h, nodes, nodes), d)
    got, dist = within_cpu(h, 0, 3 * big)
    want = np.flatnonzero(d[0] <= 3 * big)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(dist, d[0, want])


# ---------------------------------------------------------------------------------------------- path unpacking
@PROPERTY
@given(ghw=hierarchies())
def test_expansions_are_the_unpacked_shortcuts(ghw):
    """``Prepared.expand`` holds, for every shortcut with an offset, its arcs as unpack() gives them."""
    from gpuroute.ch.hierarchy import unpack

    g, weight, h = ghw
    p = query.prepared(h)
    n = h.n_nodes
    owner = np.repeat(np.arange(n), np.diff(p.rec[:, 0]))
    kind = (np.arange(p.nw.shape[0]) >= np.repeat(p.rec[:-1, 1], np.diff(p.rec[:, 0]))).astype(int)
    order = p.order.astype(np.int64)
    for j in range(p.nw.shape[0]):
        mid, off = int(p.unp[j, 0]), int(p.unp[j, 1])
        if mid < 0:
            continue
        x = int(p.nw[j, 0])
        tail, head = (owner[j], x) if kind[j] == 0 else (x, owner[j])
        want = unpack(h, int(order[tail]), int(order[head]), mid, -1, [])
        if off < 0:
            assert len(want) > query._EXPAND_MAX_ARCS
            continue
        k = int(p.expand[off])
        assert p.expand[off + 1:off + 1 + k].tolist() == want


@pytest.mark.parametrize("cap", [1, 2, 3, 1000])
def test_route_with_any_expansion_cap(monkeypatch, cap):
    """Paths unpack the same whether shortcuts come from ``expand`` or through their halves."""
    monkeypatch.setattr(query, "_EXPAND_MAX_ARCS", cap)
    rng = np.random.default_rng(cap)
    g, _ = random_road_graph(rng, 40, one_way=0.3)
    d = oracle(g, "distance")
    for core_from in (None, 25):
        ch = facade(g, "distance", naive_ch(g, order=rng.permutation(40), core_from=core_from))
        for labels in (False, True):
            q = CHQuery(ch, labels=labels)
            for s, t in zip(rng.integers(0, 40, 200), rng.integers(0, 40, 200), strict=True):
                check_path(g, q.route(int(s), int(t)), int(s), int(t), int(d[s, t]))


def test_cyclic_shortcut_is_reported():
    """A shortcut whose halves lead back to itself (a broken hierarchy) neither hangs the layout nor
    the labels; a path through it is refused."""
    g = RoadGraph.from_arcs(3, [1, 2], [2, 1], {"distance": [5, 5]})
    # 0 -> 2 via 1 (halves 0 -> 1, 1 -> 2), but 0 -> 1 is a shortcut via 2 (halves 0 -> 2, 2 -> 1)
    h = Hierarchy.from_arcs(3, [0, 1, 2], [0, 1, 2], [0, 0, 1, 2], [2, 1, 2, 1], [10, 5, 5, 5], [1, 2, -1, -1],
                            [-1, -1, 0, 1])
    assert query.prepared(h).expand.size == 0
    for labels in (False, True):
        with pytest.raises(ValueError, match="broken hierarchy"):
            CHQuery(facade(g, "distance", h), labels=labels).route(0, 2)


# ---------------------------------------------------------------------------------------------- hub labels
@PROPERTY
@given(ghw=hierarchies())
def test_labels_route_and_distances_match_dijkstra(ghw):
    g, weight, h = ghw
    n = g.n_nodes
    d = oracle(g, weight)
    q = CHQuery(facade(g, weight, h), labels=True)
    for s in range(n):
        for t in range(n):
            check_path(g, q.route(s, t), s, t, int(d[s, t]))
    nodes = np.arange(n)
    np.testing.assert_array_equal(distances_cpu(h, np.repeat(nodes, n), np.tile(nodes, n), labels=True), d.ravel())
    lab = query.hub_labels(h)
    for side in range(2):  # each label ascending and holding its own node at distance 0
        for v in range(n):
            a, b = lab.node[v, side], lab.node[v + 1, side]
            hubs = lab.hub[a:b]
            assert np.all(np.diff(hubs) > 0)
            i = int(np.flatnonzero(hubs == v)[0])
            assert lab.dist[a + i] == 0


@PROPERTY
@given(ghw=hierarchies())
def test_core_ch_is_a_hierarchy_of_the_core(ghw):
    """The core's own hierarchy: its arcs are core pairs weighing ``core_dist``, and its up-down paths
    give every core distance."""
    g, weight, h = ghw
    c = h.core.size
    if c == 0:
        return
    D = np.ascontiguousarray(h.core_dist)
    order, arcs = query._core_ch(D, query._core_sparse(D))
    assert sorted(order.tolist()) == list(range(c))
    r = np.empty(c, dtype=np.int64)
    r[order] = np.arange(c)
    a, b = arcs[:, 0], arcs[:, 1]
    assert np.all(a != b) and np.all(D[a, b] < INF)
    up = np.full((c, c), INF, dtype=np.int64)  # up[x, y]: shortest path x -> y going up only
    dn = np.full((c, c), INF, dtype=np.int64)  # dn[x, y]: shortest path x -> y going down only
    np.fill_diagonal(up, 0)
    np.fill_diagonal(dn, 0)
    for x in sorted(range(c), key=lambda v: -r[v]):  # from the top: up[x] from the higher nodes' up rows
        for i in np.flatnonzero((a == x) & (r[b] > r[a])):
            y = b[i]
            up[x] = np.minimum(up[x], np.where(up[y] < INF, up[y] + D[x, y], INF))
    for y in sorted(range(c), key=lambda v: -r[v]):  # dn[:, y] from the higher nodes' columns
        for i in np.flatnonzero((b == y) & (r[a] > r[b])):
            x = a[i]
            dn[:, y] = np.minimum(dn[:, y], np.where(dn[:, x] < INF, dn[:, x] + D[x, y], INF))
    via = np.where((up[:, :, None] < INF) & (dn[None, :, :] < INF), up[:, :, None] + dn[None, :, :], INF)
    np.testing.assert_array_equal(via.min(axis=1), D)


def test_labels_are_used_once_built():
    rng = np.random.default_rng(5)
    g, _ = random_road_graph(rng, 30, one_way=0.3)
    d = oracle(g, "distance")
    h = naive_ch(g, order=rng.permutation(30), core_from=20)
    ch = facade(g, "distance", h)
    q, q_no = CHQuery(ch), CHQuery(ch, labels=False)
    check_path(g, q.route(3, 7), 3, 7, int(d[3, 7]))
    assert q._lab is None
    lab = query.hub_labels(h)
    assert query.hub_labels(h) is lab
    for s, t in [(3, 7), (7, 3), (0, 29), (5, 5)]:
        check_path(g, q.route(s, t), s, t, int(d[s, t]))
        check_path(g, q_no.route(s, t), s, t, int(d[s, t]))
        check_path(g, ch.route(s, t), s, t, int(d[s, t]))
    assert q._lab is lab and q_no._lab is None
    s, t = rng.integers(0, 30, 100), rng.integers(0, 30, 100)
    for labels in (None, True, False):
        np.testing.assert_array_equal(distances_cpu(h, s, t, labels=labels), d[s, t])


def test_facade_hub_labels_opt_in():
    """``ContractionHierarchy.hub_labels()`` builds the labels once; afterwards ``route`` and ``distances``
    answer from them with the same results as the search (oracle: Dijkstra)."""
    from naive import random_road_graph

    from gpuroute.ch import ContractionHierarchy

    g, _ = random_road_graph(np.random.default_rng(21), 50)
    ch = ContractionHierarchy.build(g, method="cu-ch", device="cpu", progress=False)
    d = oracle(g, g.default_weight)
    pairs = np.random.default_rng(2).integers(0, 50, (200, 2))
    before = ch.distances(pairs[:, 0], pairs[:, 1], device="cpu")
    lab = ch.hub_labels()
    assert ch.hub_labels() is lab
    np.testing.assert_array_equal(before, d[pairs[:, 0], pairs[:, 1]])
    np.testing.assert_array_equal(ch.distances(pairs[:, 0], pairs[:, 1], device="cpu"), before)
    for s, t in pairs[:40]:
        check_path(g, ch.route(int(s), int(t)), int(s), int(t), int(d[s, t]))
