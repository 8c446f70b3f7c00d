"""gpuroute.sssp on the CPU: every algorithm against scipy (real networks) and a naive Dijkstra (random
graphs with parallel arcs and self-loops), canonical predecessors, and the input rules."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import shared_data
from hypothesis import HealthCheck, given, settings
from naive import canonical_predecessors, graphs, naive_dijkstra, raw_arcs, scipy_dijkstra

import gpuroute
from gpuroute import INF, NO_PREDECESSOR, GraphError, RoadGraph

CPU_ALGORITHMS = ["dijkstra", "conventional"]
PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check_predecessors(graph, dist, pred, sources, weight=None):
    """Every pred[v] != -1 closes a tight arc and is the smallest such tail; -1 exactly at sources and
    unreachable nodes."""
    wm = graph.to_scipy(weight)
    assert pred.dtype == np.int32 and pred.shape == dist.shape
    for i, s in enumerate(np.atleast_1d(sources)):
        d, p = dist[i], pred[i]
        assert p[s] == NO_PREDECESSOR
        has = p != NO_PREDECESSOR
        np.testing.assert_array_equal(has, (d != INF) & (np.arange(d.size) != s))
        v = np.flatnonzero(has)
        u = p[v].astype(np.int64)
        if v.size:
            w_uv = np.asarray(wm[u, v]).ravel()  # 0 where there is no arc u -> v
            assert np.all(w_uv > 0)
            np.testing.assert_array_equal(d[u] + w_uv, d[v])
        np.testing.assert_array_equal(p, canonical_predecessors(graph, d, s, weight))


# ---------------------------------------------------------------------------------------------- real networks
@pytest.fixture(scope="module")
def ny():
    return gpuroute.datasets.load("ny")


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", CPU_ALGORITHMS)
def test_sssp_ny_matches_scipy(ny, algorithm):
    src = np.array([0, 123_456, ny.n_nodes - 1])
    dist, pred = gpuroute.sssp(ny, src, algorithm=algorithm, device="cpu", return_predecessors=True)
    assert dist.dtype == np.int64 and dist.shape == (3, ny.n_nodes)
    np.testing.assert_array_equal(dist, scipy_dijkstra(ny, src))
    check_predecessors(ny, dist, pred, src)


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", CPU_ALGORITHMS)
def test_sssp_bay_matches_scipy(algorithm):
    bay = gpuroute.load_dimacs(shared_data("dimacs9", "USA-road-d.BAY.gr.gz"))
    src = np.array([5, bay.n_nodes // 2])
    dist, pred = gpuroute.sssp(bay, src, algorithm=algorithm, device="cpu", return_predecessors=True)
    np.testing.assert_array_equal(dist, scipy_dijkstra(bay, src))
    check_predecessors(bay, dist, pred, src)


# ---------------------------------------------------------------------------------------------- random graphs
@pytest.mark.parametrize("algorithm", CPU_ALGORITHMS)
@PROPERTY
@given(gr=graphs())
def test_sssp_random_matches_naive_dijkstra_on_raw_arcs(algorithm, gr):
    g, raw = gr
    sources = np.arange(g.n_nodes)
    for wname in g.weight_names:
        want = np.array([naive_dijkstra(g.n_nodes, raw_arcs(raw, wname), s) for s in sources], dtype=np.int64)
        dist, pred = gpuroute.sssp(g, sources, weight=wname, algorithm=algorithm, device="cpu",
                                   return_predecessors=True)
        np.testing.assert_array_equal(dist, want)
        check_predecessors(g, dist, pred, sources, wname)
        # scalar source: 1-D results, same values
        d0 = gpuroute.sssp(g, 0, weight=wname, algorithm=algorithm, device="cpu")
        assert d0.shape == (g.n_nodes,)
        np.testing.assert_array_equal(d0, want[0])


def test_canonical_predecessor_breaks_ties_by_smallest_tail():
    # two tight in-arcs into 3: from 2 (0->2->3 = 2) and from 1 (0->1->3 = 2): pred[3] must be 1
    g = RoadGraph.from_arcs(4, [0, 0, 2, 1], [2, 1, 3, 3], {"distance": [1, 1, 1, 1]})
    for alg in CPU_ALGORITHMS:
        dist, pred = gpuroute.sssp(g, 0, algorithm=alg, device="cpu", return_predecessors=True)
        np.testing.assert_array_equal(dist, [0, 1, 1, 2])
        np.testing.assert_array_equal(pred, [-1, 0, 0, 1])


def test_unreachable_nodes():
    g = RoadGraph.from_arcs(3, [0], [1], {"distance": [4]})
    for alg in CPU_ALGORITHMS:
        dist, pred = gpuroute.sssp(g, [1, 0], algorithm=alg, device="cpu", return_predecessors=True)
        np.testing.assert_array_equal(dist, [[INF, 0, INF], [0, 4, INF]])
        np.testing.assert_array_equal(pred, [[-1, -1, -1], [-1, 0, -1]])


# ---------------------------------------------------------------------------------------------- bad inputs
@pytest.fixture
def small():
    return RoadGraph.from_arcs(3, [0, 1], [1, 2], {"distance": [1, 2]})


@pytest.mark.parametrize("algorithm", CPU_ALGORITHMS)
def test_source_out_of_range(small, algorithm):
    with pytest.raises(IndexError, match="source 3"):
        gpuroute.sssp(small, 3, algorithm=algorithm, device="cpu")
    with pytest.raises(IndexError, match="source -1"):
        gpuroute.sssp(small, [0, -1], algorithm=algorithm, device="cpu")


def test_empty_graph():
    g = RoadGraph.from_arcs(0, [], [], {"distance": []})
    with pytest.raises(GraphError, match="empty"):
        gpuroute.sssp(g, 0, device="cpu")


def test_unknown_weight(small):
    with pytest.raises(KeyError, match="travel_time"):
        gpuroute.sssp(small, 0, weight="travel_time", device="cpu")


def test_unknown_algorithm(small):
    with pytest.raises(ValueError, match="unknown algorithm"):
        gpuroute.sssp(small, 0, algorithm="floyd", device="cpu")


@pytest.mark.skipif(gpuroute.gpu_available(), reason="this machine has a GPU")
def test_gpu_without_gpu(small):
    with pytest.raises(gpuroute.GPUUnavailableError):
        gpuroute.sssp(small, 0, device="gpu")
