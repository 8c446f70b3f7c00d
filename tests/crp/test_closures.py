"""Closed arcs (live traffic at speed 0: ``gpuroute.crp.metric.CLOSED``, the named ``INF``) on the overlay:
distances and paths equal a Dijkstra on the graph with the closed arcs removed (scipy, parallel arcs
reduced to the cheapest), a reopened arc restores the customization bit for bit, a metric that carries
closures customizes to the same cliques as the update, and the traffic CSV's ``closed`` rows close arcs.
The GPU customization (``gpu`` marker) gives the CPU's cliques with closures."""
import numpy as np
import pytest
from naive import random_road_graph
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import dijkstra

from gpuroute import INF, Overlay, Partition
from gpuroute.crp import CLOSED, Metric, decode_turn_costs
from gpuroute.crp.metric import FORBIDDEN
from gpuroute.graph.errors import ParseError
from gpuroute.pipeline.customize import CustomizeConfig, read_traffic
from gpuroute.pipeline.customize import run as run_customize


def removed_oracle(g, cost, closed):
    """Node distances (int64 (n, n), INF unreachable) on the graph without the ``closed`` arcs."""
    keep = ~closed
    t, h, w = g.tail[keep].astype(np.int64), g.head[keep].astype(np.int64), cost[keep].astype(np.float64)
    order = np.lexsort((w, h, t))
    t, h, w = t[order], h[order], w[order]
    first = np.ones(t.size, bool)
    first[1:] = (t[1:] != t[:-1]) | (h[1:] != h[:-1])
    m = csr_matrix((w[first], (t[first], h[first])), shape=(g.n_nodes, g.n_nodes))
    d = dijkstra(m)
    out = np.full(d.shape, INF, np.int64)
    ok = np.isfinite(d)
    out[ok] = d[ok].astype(np.int64)
    return out


def _case(seed, n=50):
    rng = np.random.default_rng(seed)
    g, _ = random_road_graph(rng, n, one_way=0.3)
    ov = Overlay.build(g, Partition.build(g, cell_sizes=(5, 15, 35), seed=seed))
    cost = rng.integers(1, 60, g.n_arcs).astype(np.int64)
    ov.customize(cost, device="cpu")
    return rng, g, ov, cost


def _assert_exact(ov, g, cost, closed):
    want = removed_oracle(g, cost, closed)
    n = g.n_nodes
    for s in range(0, n, 3):
        got = ov.distances(np.full(n, s), np.arange(n))
        np.testing.assert_array_equal(got, want[s], err_msg=f"source {s}")
        for t in range(0, n, 7):
            r = ov.route(s, t)
            assert r.distance == want[s, t]
            if want[s, t] < INF and s != t:
                assert not closed[r.arcs].any(), (s, t)
                assert int(cost[r.arcs].sum()) == want[s, t]


@pytest.mark.parametrize("seed", range(3))
def test_closed_arcs_are_removed_and_reopening_restores(seed):
    rng, g, ov, cost = _case(seed)
    before = (ov._state.arc_cost.copy(), ov._state.turn_cost.copy(), ov._state.clique.copy())
    ids = rng.choice(g.n_arcs, g.n_arcs // 4, replace=False)
    ov.update(ids, np.full(ids.size, CLOSED, np.int64), device="cpu")
    closed = np.zeros(g.n_arcs, bool)
    closed[ids] = True
    assert (ov.arc_cost[ids] == INF).all() and ov.metric.closed is not None
    assert (ov.turn_cost[np.isin(ov.turns.out_arc, ids)] == FORBIDDEN).all()
    _assert_exact(ov, g, cost, closed)
    # some reopened at a new cost, the rest closed: still the oracle of the graph without them
    half = ids[: ids.size // 2]
    cost2 = cost.copy()
    cost2[half] = cost[half] + 3
    ov.update(half, cost2[half], device="cpu")
    closed[half] = False
    _assert_exact(ov, g, cost2, closed)
    # everything back to its cost: the customization is the one before, bit for bit
    ov.update(ids, cost[ids], device="cpu")
    assert ov.metric.closed is None
    for x, y in zip((ov._state.arc_cost, ov._state.turn_cost, ov._state.clique), before, strict=True):
        np.testing.assert_array_equal(x, y)


def test_a_metric_with_closures_customizes_as_the_update():
    rng, g, ov, cost = _case(7)
    ids = rng.choice(g.n_arcs, 12, replace=False)
    ov.update(ids, np.full(ids.size, CLOSED, np.int64), device="cpu")
    upd = ov._state.clique.copy()
    arc = cost.copy()
    arc[ids] = CLOSED
    met = Metric(arc, name="closed")
    assert met.arc_cost.dtype == np.int64 and met.closed.sum() == 12
    ref = Overlay.build(g, ov.partition)
    ref.customize(met, device="cpu")
    np.testing.assert_array_equal(ref._state.clique, upd)
    tc = decode_turn_costs(met, ref.turns)
    assert (tc[np.isin(ref.turns.out_arc, ids)] == FORBIDDEN).all()
    # without closures a metric keeps its int32 costs (and its fingerprint)
    assert Metric(cost, name="x").arc_cost.dtype == np.int32


def test_bad_costs_are_still_refused():
    _, g, ov, _ = _case(1, 12)
    for bad in (0, -1, 2**31, INF - 1):
        with pytest.raises(ValueError, match="CLOSED"):
            ov.update([0], np.array([bad], np.int64), device="cpu")
    with pytest.raises(ValueError, match="CLOSED"):
        Metric(np.array([1, INF - 1] + [1] * (g.n_arcs - 2), np.int64))


def test_traffic_csv_closed_rows(tmp_path):
    rng, g, ov, cost = _case(3, 40)
    ids = rng.choice(g.n_arcs, 8, replace=False)
    p = tmp_path / "t.csv"
    p.write_text("arc_id,cost\n" + "".join(f"{a},{'Closed' if k % 2 else 'closed'}\n" for k, a in enumerate(ids))
                 + f"{int(ids[0])},{int(cost[ids[0]])}\n")  # listed again: its last cost reopens it
    got_ids, got = read_traffic(p, g.n_arcs)
    assert (got[:-1] == CLOSED).all() and got[-1] == cost[ids[0]]
    out = run_customize(CustomizeConfig(g, ov.partition, metric=Metric(cost, name="c"), traffic=p, device="cpu",
                                        output=tmp_path / "ov"))
    closed = np.zeros(g.n_arcs, bool)
    closed[ids[1:]] = True
    _assert_exact(out.overlay, g, cost, closed)
    back = Overlay.load(tmp_path / "ov", graph=g)  # saved with the closures, read back with them
    np.testing.assert_array_equal(back._state.clique, out.overlay._state.clique)
    _assert_exact(back, g, cost, closed)
    bad = tmp_path / "bad.csv"
    bad.write_text("0,5\n1,0\n")
    with pytest.raises(ParseError, match=r"bad.csv:2: .*write .closed."):
        read_traffic(bad)


def gpu_available():
    from gpuroute.backend import probe_gpu

    return probe_gpu()[0]


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")
@pytest.mark.parametrize("seed", range(3))
def test_gpu_closures_equal_cpu(seed):
    rng, g, ov, cost = _case(seed)
    ids = rng.choice(g.n_arcs, g.n_arcs // 4, replace=False)
    shut = np.full(ids.size, CLOSED, np.int64)
    ov.update(ids, shut, device="cpu")
    want = ov._state.clique.copy()
    ov.customize(cost, device="gpu")
    ov.update(ids, shut, device="gpu")  # the decoder on the device: turns into a closed arc forbidden
    np.testing.assert_array_equal(ov._state.clique, want)
    met = ov.metric
    ov.customize(met, device="gpu")  # a whole customization of a metric with closures
    np.testing.assert_array_equal(ov._state.clique, want)
    closed = np.zeros(g.n_arcs, bool)
    closed[ids] = True
    _assert_exact(ov, g, cost, closed)
    ov.update(ids, cost[ids], device="gpu")  # reopened on the device
    ref = Overlay.build(g, ov.partition)
    ref.customize(cost, device="cpu")
    np.testing.assert_array_equal(ov._state.clique, ref._state.clique)
