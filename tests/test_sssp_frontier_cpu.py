"""CPU twins of the frontier-based GPU SSSP methods (gpuroute.sssp._cpu_frontier).

Distances are compared with scipy's Dijkstra, predecessors with the canonical rule computed here
independently, and the per-phase statistics with properties every method must have (and with the
relations between methods that are theorems; see the comments).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.sparse.csgraph import dijkstra

from gpuroute.graph.constants import INF, NO_PREDECESSOR
from gpuroute.graph.road_graph import RoadGraph
from gpuroute.sssp import _cpu
from gpuroute.sssp._cpu_frontier import (
    adaptive_cpu,
    crauser_cpu,
    crauser_economic_cpu,
    default_delta,
    delta_stepping_cpu,
    martin_cpu,
    near_far_cpu,
    selection_cpu,
)

# (name, function, variants, options)
METHODS = [
    ("selection", selection_cpu, [None], {}),
    ("adaptive", adaptive_cpu, [None], {}),
    ("adaptive-allnode", adaptive_cpu, [None], {"up": 0.0, "down": 0.0}),
    ("martin", martin_cpu, [None, "successor", "predecessor"], {}),
    ("crauser", crauser_cpu, [None, "successor", "predecessor"], {}),
    ("crauser-economic", crauser_economic_cpu, [None, "successor", "predecessor"], {}),
    ("delta-stepping", delta_stepping_cpu, [None], {}),
    ("delta-stepping-3", delta_stepping_cpu, [None], {"delta": 3}),
    ("near-far", near_far_cpu, [None], {}),
    ("near-far-3", near_far_cpu, [None], {"delta": 3}),
]

SETTLE = {"martin": martin_cpu, "crauser": crauser_cpu, "economic": crauser_economic_cpu}

HYP = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ------------------------------------------------------------------------------------------ helpers
def scipy_dist(g, sources):
    ref = np.atleast_2d(dijkstra(g.to_scipy(), indices=np.asarray(sources)))
    out = np.full(ref.shape, INF, dtype=np.int64)
    fin = np.isfinite(ref)
    out[fin] = ref[fin].astype(np.int64)
    return out


def canonical_pred(g, dist, source):
    """pred[v] = smallest tail u of a tight in-arc (u, v); -1 for the source and unreachable nodes."""
    w = g.weight()
    pred = np.full(g.n_nodes, NO_PREDECESSOR, dtype=np.int64)
    for a in range(g.n_arcs):
        u, v = int(g.tail[a]), int(g.head[a])
        if v == source or dist[u] == INF or dist[v] == INF:
            continue
        if dist[u] + int(w[a]) == dist[v] and (pred[v] == NO_PREDECESSOR or u < pred[v]):
            pred[v] = u
    return pred


def check_stats(stats, dist, k):
    ph = stats["phases"]
    assert ph.shape == (k,) and ph.dtype.kind == "i"
    assert len(stats["updated"]) == k and len(stats["frontier"]) == k
    n = dist.shape[1]
    for i in range(k):
        upd, fr = stats["updated"][i], stats["frontier"][i]
        assert upd.dtype.kind == "i" and fr.dtype.kind == "i"
        assert ph[i] == len(upd) == len(fr) >= 1
        assert fr[0] == 1  # every method starts from the source alone
        assert (fr >= 1).all() and (fr <= n).all()  # no phase runs on an empty frontier
        assert (upd >= 0).all() and (upd <= n).all()
        reachable = int((dist[i] != INF).sum())
        assert upd.sum() >= reachable - 1  # each reachable non-source node improves at least once


def run_all_and_check(g, sources):
    sources = np.asarray(sources, dtype=np.int64)
    ref = scipy_dist(g, sources)
    preds = [canonical_pred(g, ref[i], int(s)) for i, s in enumerate(sources)]
    for name, fn, variants, opts in METHODS:
        for variant in variants:
            dist, pred, stats = fn(g, None, sources, True, variant, **opts)
            assert dist.dtype == np.int64 and dist.shape == (sources.size, g.n_nodes)
            np.testing.assert_array_equal(dist, ref, err_msg=f"{name}/{variant}")
            assert pred.dtype == np.int32
            for i in range(sources.size):
                np.testing.assert_array_equal(pred[i], preds[i], err_msg=f"{name}/{variant} pred")
            check_stats(stats, dist, sources.size)
            d2, p2, _ = fn(g, None, sources, False, variant, **opts)
            assert p2 is None
            np.testing.assert_array_equal(d2, ref)


def same_stats(a, b):
    np.testing.assert_array_equal(a["phases"], b["phases"])
    for x, y in zip(a["updated"], b["updated"], strict=True):
        np.testing.assert_array_equal(x, y)
    for x, y in zip(a["frontier"], b["frontier"], strict=True):
        np.testing.assert_array_equal(x, y)


@st.composite
def graphs(draw, max_n=60):
    """Random raw arc lists (self-loops and parallel arcs included), weights 1..20, plus 1-3 sources."""
    n = draw(st.integers(1, max_n))
    m = draw(st.integers(0, 4 * n))
    tail = draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m))
    head = draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m))
    w = draw(st.lists(st.integers(1, 20), min_size=m, max_size=m))
    dup = draw(st.lists(st.integers(0, max(m - 1, 0)), max_size=5)) if m else []
    for a in dup:  # parallel copies with other weights
        tail.append(tail[a])
        head.append(head[a])
        w.append(draw(st.integers(1, 20)))
    loops = draw(st.lists(st.integers(0, n - 1), max_size=3))
    for v in loops:
        tail.append(v)
        head.append(v)
        w.append(draw(st.integers(1, 20)))
    g = RoadGraph.from_arcs(n, np.array(tail, dtype=np.int64), np.array(head, dtype=np.int64),
                            np.array(w, dtype=np.int64))
    sources = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=3))
    return g, np.array(sources, dtype=np.int64)


# ------------------------------------------------------------------------------------------ tests
@HYP
@given(graphs())
def test_random_graphs_match_scipy(case):
    g, sources = case
    run_all_and_check(g, sources)


@HYP
@given(graphs(), st.sampled_from([(0.0, 0.0), (0.05, 0.0), (0.1, 0.05), (0.5, 0.5), (1.0, 0.2), (2.0, 1.0)]))
def test_selection_adaptive_match_conventional(case, thresholds):
    """Selection and adaptive phases update exactly the nodes of the conventional method (seed 001)."""
    g, sources = case
    up, down = thresholds
    sel = selection_cpu(g, None, sources, False, None)
    ada = adaptive_cpu(g, None, sources, False, None, up=up, down=down)
    np.testing.assert_array_equal(sel[0], ada[0])
    same_stats(sel[2], ada[2])
    w = g.weight()
    for i, s in enumerate(sources):
        d = np.empty(g.n_nodes, dtype=np.int64)
        assert _cpu.bellman_ford_cpu(g.first_out, g.head, w, int(s), d) == sel[2]["phases"][i]
        np.testing.assert_array_equal(d, sel[0][i])
        upd, fr = sel[2]["updated"][i], sel[2]["frontier"][i]
        assert upd[-1] == 0  # the last phase finds nothing to update
        np.testing.assert_array_equal(fr[1:], upd[:-1])  # NRa of phase p = nodes updated in phase p-1
        assert sel[2]["selection"][i].all()
        if up == 0.0 and down == 0.0:  # switches to all-node phases after phase 1 and never back
            flags = ada[2]["selection"][i]
            assert flags[0] and not flags[1:].any()


@HYP
@given(graphs())
def test_settle_methods_phase_relations(case):
    """Seed 002 methods: successor == predecessor statistics; Martín phases = distinct distances;
    phases(general) <= phases(economic) <= phases(Martín).

    The last relation is a theorem: for a settled set S let step(S) be the next settled set. Then
    step_M(S) ⊆ step_E(S) ⊆ step_G(S) (Δ_M <= Δ_E <= Δ_G), and step_E, step_G are monotone in S
    (a node settled from S has d(u) <= Δ(S), and every tentative value created by relaxing nodes of
    T \\ S is >= Δ(S)), so by induction S^M_i ⊆ S^E_i ⊆ S^G_i. Martín and economic stop at the first
    phase whose settled set contains every reachable node; general stops no later.
    """
    g, sources = case
    res = {}
    for name, fn in SETTLE.items():
        succ = fn(g, None, sources, False, "successor")
        pred = fn(g, None, sources, False, "predecessor")
        same_stats(succ[2], pred[2])
        assert succ[2]["variant"] == "successor" and pred[2]["variant"] == "predecessor"
        res[name] = succ
    dist = res["martin"][0]
    for i in range(sources.size):
        finite = dist[i][dist[i] != INF]
        assert res["martin"][2]["phases"][i] == np.unique(finite).size
        for name in ("martin", "economic"):  # every reachable node is settled exactly once
            assert res[name][2]["frontier"][i].sum() == finite.size
        assert res["crauser"][2]["frontier"][i].sum() <= finite.size
        # Martín settles exactly the nodes at the minimum distance: frontier sizes = level sizes
        _, level_sizes = np.unique(finite, return_counts=True)
        np.testing.assert_array_equal(res["martin"][2]["frontier"][i], level_sizes)
    pg, pe, pm = (res[k][2]["phases"] for k in ("crauser", "economic", "martin"))
    assert (pg <= pe).all() and (pe <= pm).all()


@HYP
@given(graphs(), st.sampled_from([1, 2, 3, 7, 20, 50, 1000]))
def test_bucket_methods_any_delta(case, delta):
    g, sources = case
    ref = scipy_dist(g, sources)
    for fn in (delta_stepping_cpu, near_far_cpu):
        dist, _, stats = fn(g, None, sources, False, None, delta=delta)
        np.testing.assert_array_equal(dist, ref)
        check_stats(stats, dist, sources.size)
        assert stats["delta"] == delta
    ds = delta_stepping_cpu(g, None, sources, False, None, delta=delta)[2]
    light = [~h for h in ds["heavy"]]
    for i in range(sources.size):
        # a heavy phase only ever follows a light phase (it closes a bucket)
        h = ds["heavy"][i]
        assert not h[0] and not (h[1:] & h[:-1]).any()
        assert light[i].sum() >= 1


@HYP
@given(graphs())
def test_bucket_methods_one_bucket_is_selection(case):
    """With Δ larger than any distance (and every arc light), Δ-stepping and near-far process one bucket
    whose phases are exactly the selection (frontier Bellman-Ford) phases."""
    g, sources = case
    big = int(g.weight().sum()) + 21 if g.n_arcs else 1
    sel = selection_cpu(g, None, sources, False, None)[2]
    for fn in (delta_stepping_cpu, near_far_cpu):
        stats = fn(g, None, sources, False, None, delta=big)[2]
        same_stats(sel, stats)


UNREACHABLE = {
    "no-arcs": (5, [], [], []),
    "two-components": (6, [0, 1, 2, 3, 4], [1, 2, 0, 4, 5], [3, 4, 5, 1, 1]),
    "source-is-sink": (4, [1, 2, 3], [0, 0, 0], [2, 2, 2]),
    "one-way-chain": (5, [0, 1, 3], [1, 2, 4], [7, 7, 1]),
    "isolated-middle": (5, [0, 0, 1, 4], [1, 4, 4, 1], [5, 20, 1, 1]),
    "single-node": (1, [0], [0], [3]),
}


@pytest.mark.parametrize("name", sorted(UNREACHABLE))
def test_unreachable_nodes(name):
    n, t, h, w = UNREACHABLE[name]
    g = RoadGraph.from_arcs(n, np.array(t, dtype=np.int64), np.array(h, dtype=np.int64),
                            np.array(w, dtype=np.int64))
    run_all_and_check(g, np.arange(n, dtype=np.int64))
    dist = martin_cpu(g, None, np.array([0]), False, None)[0]
    assert n == 1 or (dist == INF).any()


def test_crauser_general_stops_with_only_sinks_left():
    """General variant: Δ = ∞ once every unsettled reached node has no out-arc; those nodes keep their
    (final) tentative distance and the run stops early."""
    g = RoadGraph.from_arcs(4, np.array([0, 0, 0]), np.array([1, 2, 3]), np.array([5, 6, 7]))
    dist, pred, stats = crauser_cpu(g, None, np.array([0]), True, None)
    np.testing.assert_array_equal(dist[0], [0, 5, 6, 7])
    np.testing.assert_array_equal(pred[0], [-1, 0, 0, 0])
    assert stats["phases"][0] == 1
    assert martin_cpu(g, None, np.array([0]), False, None)[2]["phases"][0] == 4


def test_empty_source_list():
    g = RoadGraph.from_arcs(3, np.array([0, 1]), np.array([1, 2]), np.array([1, 1]))
    for _, fn, _, opts in METHODS:
        dist, pred, stats = fn(g, None, np.zeros(0, dtype=np.int64), True, None, **opts)
        assert dist.shape == (0, 3) and pred.shape == (0, 3)
        assert stats["phases"].shape == (0,) and stats["updated"] == []


def test_errors():
    g = RoadGraph.from_arcs(3, np.array([0, 1]), np.array([1, 2]), np.array([1, 1]))
    src = np.array([0])
    for fn in (martin_cpu, crauser_cpu, crauser_economic_cpu):
        with pytest.raises(ValueError, match="variant"):
            fn(g, None, src, False, "sideways")
    for fn in (selection_cpu, adaptive_cpu, delta_stepping_cpu, near_far_cpu):
        with pytest.raises(ValueError, match="variant"):
            fn(g, None, src, False, "successor")
    for fn in (delta_stepping_cpu, near_far_cpu):
        for bad in (0, -3, 2.5, True):
            with pytest.raises(ValueError, match="delta"):
                fn(g, None, src, False, None, delta=bad)
    with pytest.raises(ValueError, match="down <= up"):
        adaptive_cpu(g, None, src, False, None, up=0.1, down=0.2)
    with pytest.raises(TypeError, match="unexpected option"):
        martin_cpu(g, None, src, False, None, delta=3)
    with pytest.raises(KeyError):
        selection_cpu(g, "nope", src, False, None)


def test_default_delta():
    g = RoadGraph.from_arcs(4, np.array([0, 1, 2, 3]), np.array([1, 2, 3, 0]), np.array([10, 10, 10, 10]))
    assert default_delta(g) == 320  # 32 * mean weight 10 / mean degree 1
    assert default_delta(RoadGraph.from_arcs(2, np.array([], dtype=np.int64), np.array([], dtype=np.int64),
                                             np.array([], dtype=np.int64))) == 1


@pytest.mark.slow
def test_ny_two_sources():
    from gpuroute import datasets

    g = datasets.load("ny")
    sources = np.array([0, 123_456], dtype=np.int64)
    ref = scipy_dist(g, sources)
    w = g.weight()
    pred_ref = _cpu.canonical_predecessors_many(g.rev_first_out, g.rev_tail, g.rev_arc, w, ref, sources)
    res = {}
    for name, fn, variants, opts in METHODS:
        if name == "adaptive-allnode":
            continue  # an all-node scan per phase: seconds on NY for nothing new
        for variant in variants[-2:]:
            dist, pred, stats = fn(g, None, sources, True, variant, **opts)
            np.testing.assert_array_equal(dist, ref, err_msg=f"{name}/{variant}")
            np.testing.assert_array_equal(pred, pred_ref, err_msg=f"{name}/{variant}")
            check_stats(stats, dist, sources.size)
            res[name, variant] = stats
    same_stats(res["selection", None], res["adaptive", None])
    for name in SETTLE:
        key = "crauser-economic" if name == "economic" else name
        same_stats(res[key, "successor"], res[key, "predecessor"])
    pg = res["crauser", "successor"]["phases"]
    pe = res["crauser-economic", "successor"]["phases"]
    pm = res["martin", "successor"]["phases"]
    assert (pg <= pe).all() and (pe <= pm).all()
