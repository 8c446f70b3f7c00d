"""Point-to-point shortest paths and path helpers (gpuroute.query) against oracles."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from naive import graphs, naive_dijkstra, random_road_graph, raw_arcs, scipy_dijkstra

import gpuroute
from gpuroute import INF, RoadGraph
from gpuroute.geo import haversine_m as great_circle_m
from gpuroute.query import extract_path, path_arcs, path_length, shortest_path

#: The CPU methods (``"gpu-sssp"`` is tested with the GPU suite).
METHODS = ("dijkstra", "bidirectional", "astar")

PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check_path(graph, res, source, target, expected):
    """The result's distance is ``expected`` and its nodes/arcs form a path that sums to it."""
    assert res.distance == expected
    w = graph.weight(res.weight).astype(np.int64)
    if expected == INF:
        assert res.nodes.size == 0 and res.arcs.size == 0
        assert not res.reachable
        return
    assert res.nodes.dtype == np.int32 and res.arcs.dtype == np.int32
    assert res.nodes[0] == source and res.nodes[-1] == target
    assert res.arcs.size == res.nodes.size - 1
    np.testing.assert_array_equal(graph.tail[res.arcs], res.nodes[:-1])
    np.testing.assert_array_equal(graph.head[res.arcs], res.nodes[1:])
    assert int(w[res.arcs].sum()) == expected
    assert path_length(graph, res.nodes, res.weight) == expected
    assert len(set(res.nodes.tolist())) == res.nodes.size  # simple path


# ---------------------------------------------------------------------------------------------- NY
@pytest.fixture(scope="module")
def ny():
    return gpuroute.datasets.load("ny")


@pytest.mark.slow
@pytest.mark.parametrize("method", METHODS)
def test_shortest_path_ny_matches_scipy(ny, method):
    rng = np.random.default_rng(20240601)
    src = rng.integers(0, ny.n_nodes, 24)
    dst = rng.integers(0, ny.n_nodes, 24)
    oracle = scipy_dijkstra(ny, src)
    for i, (s, t) in enumerate(zip(src.tolist(), dst.tolist(), strict=True)):
        res = shortest_path(ny, s, t, method=method)
        assert res.method == method and res.weight == "distance"
        check_path(ny, res, s, t, int(oracle[i, t]))
        assert 0 < res.settled <= ny.n_nodes


@pytest.mark.slow
def test_goal_directed_methods_settle_fewer_nodes_on_ny(ny):
    rng = np.random.default_rng(7)
    tot = {m: 0 for m in METHODS}
    for s, t in rng.integers(0, ny.n_nodes, (10, 2)).tolist():
        for m in METHODS:
            tot[m] += shortest_path(ny, s, t, method=m).settled
    assert tot["astar"] < tot["dijkstra"]
    assert tot["bidirectional"] < tot["dijkstra"]


# ---------------------------------------------------------------------------------------------- random graphs
@pytest.mark.parametrize("method", METHODS)
@PROPERTY
@given(gr=graphs(), data=st.data())
def test_shortest_path_random_matches_naive(method, gr, data):
    g, raw = gr
    s = data.draw(st.integers(0, g.n_nodes - 1), label="source")
    for wname in g.weight_names:
        dist = naive_dijkstra(g.n_nodes, raw_arcs(raw, wname), s)
        targets = {data.draw(st.integers(0, g.n_nodes - 1), label="target") for _ in range(3)}
        for t in targets:
            res = shortest_path(g, s, t, weight=wname, method=method)
            assert res.weight == wname and res.unit == g.units[wname]
            check_path(g, res, s, t, dist[t])


@PROPERTY
@given(gr=graphs())
def test_astar_potential_is_consistent(gr):
    """h(u) - h(v) <= w(u, v) on every arc, for every target: A* settles each node once, exactly."""
    from gpuroute.query.p2p import _astar_factor

    g, _ = gr
    planar = g.coord_system == "planar"
    for wname in g.weight_names:
        w = g.weight(wname).astype(np.int64)
        k = _astar_factor(g, wname, g.weight(wname))
        x, y = g.coords[:, 0], g.coords[:, 1]
        for t in range(0, g.n_nodes, max(1, g.n_nodes // 4)):
            d = np.hypot(x - x[t], y - y[t]) if planar else great_circle_m(x, y, x[t], y[t])
            h = np.floor(k * d).astype(np.int64)
            assert h[t] == 0
            assert np.all(h[g.tail] - h[g.head] <= w)


def test_unreachable_target_gives_inf_and_empty_path():
    g = RoadGraph.from_arcs(4, [0, 1, 3], [1, 0, 2], {"distance": [5, 7, 1]},
                            coords=[[0.0, 0.0], [0.001, 0.0], [0.002, 0.0], [0.003, 0.0]])
    for m in METHODS:
        for s, t in [(0, 2), (2, 3), (1, 3)]:
            res = shortest_path(g, s, t, method=m)
            assert res.distance == INF and res.nodes.size == 0 and res.arcs.size == 0
            assert not res.reachable
        check_path(g, shortest_path(g, 1, 0, method=m), 1, 0, 7)
        check_path(g, shortest_path(g, 3, 2, method=m), 3, 2, 1)


def test_same_source_and_target():
    g, _ = random_road_graph(np.random.default_rng(1), 10)
    for m in METHODS:
        res = shortest_path(g, 4, 4, method=m)
        assert res.distance == 0
        np.testing.assert_array_equal(res.nodes, [4])
        assert res.arcs.size == 0


def test_shortest_path_prefers_light_path_over_few_arcs():
    # 0 -> 3 directly costs 10; 0 -> 1 -> 2 -> 3 costs 3. All three methods must take the long way.
    g = RoadGraph.from_arcs(4, [0, 0, 1, 2], [3, 1, 2, 3], {"distance": [10, 1, 1, 1]},
                            coords=[[0, 0], [0.001, 0.001], [0.002, 0.001], [0.003, 0]])
    for m in METHODS:
        res = shortest_path(g, 0, 3, method=m)
        check_path(g, res, 0, 3, 3)
        np.testing.assert_array_equal(res.nodes, [0, 1, 2, 3])


def test_shortest_path_errors():
    g, _ = random_road_graph(np.random.default_rng(2), 8)
    with pytest.raises(ValueError, match="unknown method"):
        shortest_path(g, 0, 1, method="dfs")
    with pytest.raises(IndexError, match="target 8"):
        shortest_path(g, 0, 8)
    with pytest.raises(IndexError, match="source -1"):
        shortest_path(g, -1, 0)
    with pytest.raises(TypeError):
        shortest_path(g, 0.5, 1)
    with pytest.raises(KeyError, match="nope"):
        shortest_path(g, 0, 1, weight="nope")
    with pytest.raises(ValueError):
        shortest_path(g, 0, 1, device="tpu")
    if not gpuroute.gpu_available():
        with pytest.raises(gpuroute.GPUUnavailableError):
            shortest_path(g, 0, 1, device="gpu")
        with pytest.raises(ValueError, match="runs on the GPU"):
            shortest_path(g, 0, 1, method="gpu-sssp", device="auto")
    else:
        r = shortest_path(g, 0, 1, device="gpu")
        assert r.method == "gpu-sssp" and r.device == "gpu"
        assert r.distance == shortest_path(g, 0, 1, device="cpu").distance
        with pytest.raises(ValueError, match="runs on the CPU"):
            shortest_path(g, 0, 1, method="astar", device="gpu")
    nocoords = RoadGraph.from_arcs(2, [0], [1], {"distance": [3]})
    with pytest.raises(ValueError, match="coordinates"):
        shortest_path(nocoords, 0, 1, method="astar")
    assert shortest_path(nocoords, 0, 1, method="bidirectional").distance == 3


# ---------------------------------------------------------------------------------------------- helpers
@PROPERTY
@given(gr=graphs(min_nodes=2), data=st.data())
def test_extract_path_from_sssp_tree(gr, data):
    g, _ = gr
    s = data.draw(st.integers(0, g.n_nodes - 1))
    dist, pred = gpuroute.sssp(g, s, device="cpu", return_predecessors=True)
    for t in range(g.n_nodes):
        p = extract_path(pred, s, t)
        assert p.dtype == np.int32
        if dist[t] == INF:
            assert p.size == 0
        else:
            assert p[0] == s and p[-1] == t
            assert path_length(g, p) == dist[t]
            arcs = path_arcs(g, p)
            np.testing.assert_array_equal(g.tail[arcs], p[:-1])


def test_extract_path_detects_malformed_pred():
    # 1 -> 2 -> 1 ... never reaches source 0: a cycle
    with pytest.raises(ValueError, match="cycle"):
        extract_path(np.array([-1, 2, 1, 1]), 0, 3)
    # 3 -> 1 -> -1 before reaching source 0
    with pytest.raises(ValueError, match="before reaching source"):
        extract_path(np.array([-1, -1, 0, 1]), 0, 3)
    with pytest.raises(ValueError, match="before reaching source"):
        extract_path(np.array([-1, 7, 0, 1]), 0, 3)
    # a cycle through the target itself
    with pytest.raises(ValueError, match="cycle"):
        extract_path(np.array([-1, 1]), 0, 1)
    np.testing.assert_array_equal(extract_path(np.array([-1, 0, 1, -1]), 0, 2), [0, 1, 2])
    assert extract_path(np.array([-1, 0, 1, -1]), 0, 3).size == 0
    np.testing.assert_array_equal(extract_path(np.array([-1, 0]), 1, 1), [1])
    with pytest.raises(IndexError):
        extract_path(np.array([-1, 0]), 0, 2)
    with pytest.raises(ValueError, match="1-D"):
        extract_path(np.zeros((2, 2), dtype=np.int32), 0, 1)


def test_path_arcs_and_length():
    g = RoadGraph.from_arcs(4, [0, 1, 2, 1, 1], [1, 2, 3, 2, 0],
                            {"distance": [4, 9, 2, 6, 1], "t": [1, 1, 1, 1, 1]})
    # parallel arcs 1->2 (9, 6) were reduced to 6
    assert path_length(g, [0, 1, 2, 3]) == 12
    assert path_length(g, [0, 1, 2, 3], weight="t") == 3
    assert path_length(g, [2]) == 0
    arcs = path_arcs(g, [0, 1, 0])
    np.testing.assert_array_equal(g.tail[arcs], [0, 1])
    np.testing.assert_array_equal(g.head[arcs], [1, 0])
    assert path_arcs(g, [3]).size == 0
    with pytest.raises(ValueError, match="no arc 2 -> 1"):
        path_length(g, [0, 1, 2, 1])
    with pytest.raises(ValueError, match="empty path"):
        path_length(g, [])
    with pytest.raises(IndexError):
        path_arcs(g, [0, 9])


def test_path_arcs_picks_lightest_parallel_arc():
    # The constructor keeps parallel arcs (only from_arcs reduces them).
    g = RoadGraph([0, 2, 2], [1, 1], {"distance": [7, 3]})
    assert path_length(g, [0, 1]) == 3
    res = shortest_path(g, 0, 1, method="dijkstra")
    check_path(g, res, 0, 1, 3)


def test_device_auto_means_the_same_as_in_sssp(monkeypatch):
    """device='auto' is the GPU when usable and the method runs there, else the CPU -- the rule of sssp();
    the result says where it ran. On main shortest_path treated 'auto' as the CPU while sssp treated it as
    GPU-if-present, and `gpuroute route` printed 'bidirectional on gpu' for a CPU search."""
    from gpuroute import backend

    g, _ = random_road_graph(np.random.default_rng(3), 12)
    r = shortest_path(g, 0, 5, method="bidirectional")  # a CPU method: CPU under 'auto' on any machine
    assert r.device == "cpu" and r.method == "bidirectional"
    monkeypatch.setattr(backend, "probe_gpu", lambda: (False, "test: no GPU"))
    r = shortest_path(g, 0, 5)  # method None, no GPU: bidirectional on the CPU
    assert (r.method, r.device) == ("bidirectional", "cpu")
    assert backend.resolve_device("auto") == "cpu"
    monkeypatch.setattr(backend, "probe_gpu", lambda: (True, ""))
    assert backend.resolve_device("auto") == "gpu"
    assert backend.resolve_device("auto", gpu_implemented=False) == "cpu"
