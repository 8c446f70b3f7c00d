"""Customizable Route Planning on the real networks: every distance equals Dijkstra on the same metric --
plain Dijkstra (scipy, parallel arcs reduced to the lightest) for metrics without turn costs on graphs
without restrictions, and Dijkstra on the turn-expanded (arc-based) graph otherwise -- after full
customization and after a traffic update. KaHIP runs in its "fast" mode here to keep CI short."""
import numpy as np
import pytest
import scipy.sparse as sp
from conftest import shared_data
from naive import scipy_dijkstra
from scipy.sparse.csgraph import dijkstra

import gpuroute
from gpuroute import INF, Overlay, Partition, config
from gpuroute.crp import FORBIDDEN


def expanded_oracle(ov, sources):
    """Distances (k, n) by scipy Dijkstra on the arc-based graph: a state per arc plus a super source;
    a turn's edge costs the overlay's decoded turn cost (forbidden turns left out)."""
    g = ov.graph
    m = g.n_arcs
    tr = ov.turns
    tc = ov.turn_cost
    ok = tc != FORBIDDEN
    tin = tr.in_arc()[ok]
    tout = tr.out_arc[ok]
    # csgraph treats a stored 0 as "no edge" only in dense input; costs are >= 1 here anyway
    out = np.full((len(sources), g.n_nodes), INF, dtype=np.int64)
    for i, s in enumerate(sources):
        b = np.arange(g.first_out[s], g.first_out[s + 1])
        rows = np.concatenate([tin, np.full(b.size, m)])
        cols = np.concatenate([tout, b])
        vals = np.concatenate([tc[ok], ov.arc_cost[b]]).astype(np.float64)
        A = sp.csr_matrix((vals, (rows, cols)), shape=(m + 1, m + 1))
        d = dijkstra(A, indices=m)[:m]
        nd = np.full(g.n_nodes, np.inf)
        np.minimum.at(nd, g.head, d)
        nd[s] = 0
        fin = np.isfinite(nd)
        out[i, fin] = nd[fin].astype(np.int64)
    return out


def check_sources(ov, sources, expected, rng, n_routes=5, n_targets=300):
    """Paired distances from each source to ``n_targets`` random targets (all of them on small graphs)
    and ``n_routes`` routes with their paths, against the oracle's rows."""
    n = ov.graph.n_nodes
    for i, s in enumerate(sources):
        tg = np.arange(n) if n <= n_targets else rng.integers(0, n, n_targets)
        got = ov.distances(np.full(tg.size, s), tg)
        np.testing.assert_array_equal(got, expected[i][tg], err_msg=f"{ov.graph.name} source {s}")
        for t in rng.integers(0, n, n_routes):
            r = ov.route(int(s), int(t))
            assert r.distance == expected[i][t]
            if r.distance != INF and s != t:
                a = r.arcs.astype(np.int64)
                cost = int(ov.arc_cost[a[0]])
                if a.size > 1:
                    cost += int(ov.turn_cost[ov.turns.turn_index(a[:-1], a[1:])].sum())
                assert cost == r.distance


@pytest.fixture
def fast_kahip(monkeypatch):
    monkeypatch.setattr(config, "CRP_KAHIP_MODE", "fast")


@pytest.mark.slow
def test_ny_plain_metric_and_traffic(fast_kahip):
    g = gpuroute.datasets.load("ny")
    ov = Overlay.build(g, Partition.build(g))
    ov.customize()
    rng = np.random.default_rng(0)
    src = rng.integers(0, g.n_nodes, 3)
    check_sources(ov, src, scipy_dijkstra(g, src), rng)
    ids = rng.integers(0, g.n_arcs, 1000)
    ov.update(ids, ov.arc_cost[ids] * 3)
    w = ov.arc_cost.copy()
    g2 = gpuroute.RoadGraph(g.first_out, g.head, {"traffic": w.astype(np.int32)}, coords=g.coords)
    check_sources(ov, src, scipy_dijkstra(g2, src), rng)


@pytest.mark.slow
def test_ny_time_with_uturn_penalty(fast_kahip):
    g = gpuroute.datasets.load("ny-time")
    ov = Overlay.build(g, Partition.build(g))
    ov.customize("time-uturn")
    rng = np.random.default_rng(1)
    src = rng.integers(0, g.n_nodes, 2)
    check_sources(ov, src, expanded_oracle(ov, src), rng)


@pytest.mark.slow
def test_bay(fast_kahip):
    path = shared_data("dimacs9", "USA-road-d.BAY.gr.gz")
    g = gpuroute.load_dimacs(path)
    ov = Overlay.build(g, Partition.build(g))
    ov.customize()
    rng = np.random.default_rng(2)
    src = rng.integers(0, g.n_nodes, 2)
    check_sources(ov, src, scipy_dijkstra(g, src), rng)


@pytest.mark.slow
def test_chicago_tntp(fast_kahip):
    path = shared_data("tntp", "ChicagoRegional_net.tntp.gz")
    g = gpuroute.load_tntp(path)
    ov = Overlay.build(g, Partition.build(g, cell_sizes=(128, 1024)))
    ov.customize()
    rng = np.random.default_rng(3)
    src = rng.integers(0, g.n_nodes, 4)
    check_sources(ov, src, scipy_dijkstra(g, src), rng)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["andorra.osm.pbf", "Helsinki.osm.pbf"])
def test_osm_extracts_with_restrictions(fast_kahip, name):
    path = shared_data("osm", name)
    g = gpuroute.load_osm(path, profile="car-basic", progress=False)
    ov = Overlay.build(g, Partition.build(g, cell_sizes=(64, 512, 4096)))
    rng = np.random.default_rng(4)
    src = rng.integers(0, g.n_nodes, 3)
    for metric in ("time-uturn", "distance"):
        ov.customize(metric)
        check_sources(ov, src, expanded_oracle(ov, src), rng)
    ids = rng.integers(0, g.n_arcs, 200)
    ov.update(ids, ov.arc_cost[ids] + 50)
    check_sources(ov, src, expanded_oracle(ov, src), rng)
