"""CPU twins of the GPU SSSP families (gpuroute.sssp.{bellman_ford,settle,buckets}.cpu), run through the
public API (``sssp_full(..., device="cpu")``) so that options and the stats layout are those users see.

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

import gpuroute
from gpuroute.graph.constants import INF, NO_PREDECESSOR
from gpuroute.graph.road_graph import RoadGraph
from gpuroute.sssp.bellman_ford.cpu import conventional_one
from gpuroute.sssp.bellman_ford.options import KIND_QUEUE, KIND_SCAN, KIND_SCAN_BUILD
from gpuroute.sssp.common import mean_weight_delta
from gpuroute.sssp.dijkstra import canonical_predecessors_many


def run(g, name, sources, want_pred=False, variant=None, **opts):
    """``(dist, pred, stats)`` of one algorithm on the CPU through the public API."""
    res = gpuroute.sssp_full(g, np.asarray(sources, dtype=np.int64), algorithm=name, variant=variant,
                             return_predecessors=want_pred, device="cpu", **opts)
    return res.dist, res.pred, res.stats


# (label, algorithm, variants, options): the methods whose stats have per-phase frontiers
METHODS = [
    ("selection", "selection", [None], {}),
    ("martin", "martin", [None, "successor", "predecessor"], {}),
    ("crauser", "crauser", [None, "successor", "predecessor"], {}),
    ("crauser-economic", "crauser-economic", [None, "successor", "predecessor"], {}),
    ("delta-stepping", "delta-stepping", [None], {}),
    ("delta-stepping-3", "delta-stepping", [None], {"delta": 3}),
    ("near-far", "near-far", [None], {}),
    ("near-far-3", "near-far", [None], {"delta": 3}),
]
#: adaptive: per-phase counts of processed nodes, no frontier list (it is the counts)
ADAPTIVE = [("adaptive-count", [None, "count"], {}), ("adaptive-allnode", ["count"], {"frac": 0.0}),
            ("adaptive-queue", ["count"], {"frac": 1.0}), ("adaptive-time", ["time", "time-host"], {})]

SETTLE = ("martin", "crauser", "crauser-economic")

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
    for label, name, variants, opts in METHODS + [(a, "adaptive", v, o) for a, v, o in ADAPTIVE]:
        for variant in variants:
            dist, pred, stats = run(g, name, sources, True, variant, **opts)
            assert dist.dtype == np.int64 and dist.shape == (sources.size, g.n_nodes)
            np.testing.assert_array_equal(dist, ref, err_msg=f"{label}/{variant}")
            assert pred.dtype == np.int32
            for i in range(sources.size):
                np.testing.assert_array_equal(pred[i], preds[i], err_msg=f"{label}/{variant} pred")
            if name == "adaptive":
                check_adaptive(stats, dist, sources.size)
            else:
                check_stats(stats, dist, sources.size)
            d2, p2, _ = run(g, name, sources, False, variant, **opts)
            assert p2 is None
            np.testing.assert_array_equal(d2, ref)


def check_adaptive(stats, dist, k):
    """Adaptive (seed 001 Alg. 4 with the GPU's switch rules): the processed counts start with the source
    and end with an empty phase; the phase kinds follow the switch rule from those counts."""
    assert stats["phases"].shape == (k,)
    p = stats["params"]
    thr = int(np.ceil(p["frac"] * dist.shape[1])) if p["switch"] == "count" else None
    for i in range(k):
        proc, kinds = stats["updated"][i], stats["extra"]["modes"][i]
        assert stats["phases"][i] == len(proc) == len(kinds) >= 2
        assert proc[0] == 1 and proc[-1] == 0 and (proc[:-1] >= 1).all()
        assert set(np.unique(kinds)) <= {KIND_SCAN, KIND_SCAN_BUILD, KIND_QUEUE}
        assert kinds[0] == KIND_QUEUE  # the seed starts in selection
        assert stats["extra"]["queue_phases"][i] == int((kinds == KIND_QUEUE).sum())
        if thr is None:
            continue
        on_queue, prev = True, 1
        for q in range(len(proc)):  # replay the count switch: build(p) = processed(p-1) < thr
            build = prev < thr
            want = KIND_QUEUE if on_queue else (KIND_SCAN_BUILD if build else KIND_SCAN)
            assert kinds[q] == want, (q, kinds, proc, thr)
            on_queue = build if (on_queue or build) else False
            prev = proc[q]


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
@given(graphs(), st.sampled_from([0.0, 0.01, 0.05, 0.5, 1.0]))
def test_selection_adaptive_match_conventional(case, frac):
    """Selection and adaptive phases process exactly the nodes of the conventional method (seed 001),
    whatever the switch does: adaptive phase p processes the nodes selection phase p + 1 relaxes."""
    g, sources = case
    sel = run(g, "selection", sources)
    ada = run(g, "adaptive", sources, variant="count", frac=frac)
    np.testing.assert_array_equal(sel[0], ada[0])
    w = g.weight()
    for i, s in enumerate(sources):
        d = np.empty(g.n_nodes, dtype=np.int64)
        assert conventional_one(g.first_out, g.head, w, int(s), d) == sel[2]["phases"][i]
        np.testing.assert_array_equal(d, sel[0][i])
        upd, fr = sel[2]["updated"][i], sel[2]["frontier"][i]
        assert upd[-1] == 0  # the last phase finds nothing to update
        np.testing.assert_array_equal(fr[1:], upd[:-1])  # NRa of phase p = nodes updated in phase p-1
        proc = ada[2]["updated"][i]
        np.testing.assert_array_equal(proc[:-1], fr)
        assert proc[-1] == 0
        kinds = ada[2]["extra"]["modes"][i]
        if frac == 0.0:  # never builds a queue: the source phase, then all-node scans
            assert kinds[0] == KIND_QUEUE and (kinds[1:] == KIND_SCAN).all()
        if frac == 1.0 and g.n_nodes > 1:  # always builds (every count < n): every phase on the queue
            assert (kinds == KIND_QUEUE).all()


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
    for name in SETTLE:
        succ = run(g, name, sources, variant="successor")
        pred = run(g, name, sources, variant="predecessor")
        same_stats(succ[2], pred[2])
        assert succ[2]["variant"] == "successor" and pred[2]["variant"] == "predecessor"
        res[name] = succ
    dist = res["martin"][0]
    for i in range(sources.size):
        finite = dist[i][dist[i] != INF]
        assert res["martin"][2]["phases"][i] == np.unique(finite).size
        for name in ("martin", "crauser-economic"):  # every reachable node is settled exactly once
            assert res[name][2]["frontier"][i].sum() == finite.size
        assert res["crauser"][2]["frontier"][i].sum() <= finite.size
        # Martín settles exactly the nodes at the minimum distance: frontier sizes = level sizes
        _, level_sizes = np.unique(finite, return_counts=True)
        np.testing.assert_array_equal(res["martin"][2]["frontier"][i], level_sizes)
    pg, pe, pm = (res[k][2]["phases"] for k in ("crauser", "crauser-economic", "martin"))
    assert (pg <= pe).all() and (pe <= pm).all()


@HYP
@given(graphs(), st.sampled_from([1, 2, 3, 7, 20, 50, 1000]))
def test_bucket_methods_any_delta(case, delta):
    g, sources = case
    ref = scipy_dist(g, sources)
    for name in ("delta-stepping", "near-far"):
        dist, _, stats = run(g, name, sources, delta=delta)
        np.testing.assert_array_equal(dist, ref)
        check_stats(stats, dist, sources.size)
        assert stats["params"]["delta"] == delta
    ds = run(g, "delta-stepping", sources, delta=delta)[2]
    light = [~h for h in ds["extra"]["heavy"]]
    for i in range(sources.size):
        # a heavy phase only ever follows a light phase (it closes a bucket)
        h = ds["extra"]["heavy"][i]
        assert not h[0] and not (h[1:] & h[:-1]).any()
        assert light[i].sum() >= 1


@HYP
@given(graphs())
def test_bucket_methods_one_bucket_is_selection(case):
    """With Δ larger than any distance (and every arc light), Δ-stepping and near-far process one bucket
    whose phases are exactly the selection (frontier Bellman-Ford) phases."""
    g, sources = case
    big = int(g.weight().sum()) + 21 if g.n_arcs else 1
    sel = run(g, "selection", sources)[2]
    for name in ("delta-stepping", "near-far"):
        stats = run(g, name, sources, delta=big)[2]
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
    dist = run(g, "martin", [0])[0]
    assert n == 1 or (dist == INF).any()


def test_crauser_general_stops_with_only_sinks_left():
    """General variant: Δ = ∞ once every unsettled reached node has no out-arc; those nodes keep their
    (final) tentative distance and the run stops early."""
    g = RoadGraph.from_arcs(4, np.array([0, 0, 0]), np.array([1, 2, 3]), np.array([5, 6, 7]))
    dist, pred, stats = run(g, "crauser", [0], True)
    np.testing.assert_array_equal(dist[0], [0, 5, 6, 7])
    np.testing.assert_array_equal(pred[0], [-1, 0, 0, 0])
    assert stats["phases"][0] == 1
    assert run(g, "martin", [0])[2]["phases"][0] == 4


def test_empty_source_list():
    g = RoadGraph.from_arcs(3, np.array([0, 1]), np.array([1, 2]), np.array([1, 1]))
    for _, name, _, opts in METHODS:
        dist, pred, stats = run(g, name, np.zeros(0, dtype=np.int64), True, **opts)
        assert dist.shape == (0, 3) and pred.shape == (0, 3)
        assert stats["phases"].shape == (0,) and stats["updated"] is None


def test_errors():
    g = RoadGraph.from_arcs(3, np.array([0, 1]), np.array([1, 2]), np.array([1, 1]))
    src = [0]
    for name in SETTLE:
        with pytest.raises(ValueError, match="variant"):
            run(g, name, src, variant="sideways")
    for name in ("selection", "adaptive", "delta-stepping", "near-far"):
        with pytest.raises(ValueError, match="variant"):
            run(g, name, src, variant="successor")
    for name in ("delta-stepping", "near-far"):
        for bad in (0, -3, 2.5, True):
            with pytest.raises(ValueError, match="delta"):
                run(g, name, src, delta=bad)
    with pytest.raises(ValueError, match="down_us <= up_us"):
        run(g, "adaptive", src, variant="time", up_us=0.1, down_us=0.2)
    with pytest.raises(TypeError, match="time switch"):
        run(g, "adaptive", src, variant="count", up_us=5.0)
    with pytest.raises(TypeError, match="count switch"):
        run(g, "adaptive", src, variant="time", frac=0.1)
    with pytest.raises(ValueError, match="frac"):
        run(g, "adaptive", src, frac=1.5)
    with pytest.raises(TypeError, match="unexpected option"):
        run(g, "martin", src, delta=3)
    with pytest.raises(KeyError):
        gpuroute.sssp(g, src, weight="nope", algorithm="selection", device="cpu")


def test_default_delta_is_one_rule_for_both_twins():
    """On main the CPU twins used 32 x mean weight / mean degree and the GPU 64 x mean weight: one rule
    now (config.SSSP_DELTA_FACTOR x mean arc weight), reported in params by both twins."""
    g = RoadGraph.from_arcs(4, np.array([0, 1, 2, 3]), np.array([1, 2, 3, 0]), np.array([10, 10, 10, 10]))
    assert mean_weight_delta(g, None) == 640  # 64 x mean weight 10
    assert run(g, "near-far", [0])[2]["params"]["delta"] == 640
    assert run(g, "delta-stepping", [0])[2]["params"]["delta"] == 640
    assert run(g, "near-far", [0], delta_factor=2)[2]["params"]["delta"] == 20
    assert mean_weight_delta(RoadGraph.from_arcs(2, np.array([], dtype=np.int64), np.array([], dtype=np.int64),
                                                 np.array([], dtype=np.int64)), None) == 1


@pytest.mark.slow
def test_ny_two_sources():
    from gpuroute import datasets

    g = datasets.load("ny")
    sources = np.array([0, 123_456], dtype=np.int64)
    ref = scipy_dist(g, sources)
    w = g.weight()
    pred_ref = canonical_predecessors_many(g.rev_first_out, g.rev_tail, g.rev_arc, w, ref, sources)
    res = {}
    for label, name, variants, opts in METHODS + [("adaptive-count", "adaptive", ["count"], {})]:
        for variant in variants[-2:]:
            dist, pred, stats = run(g, name, sources, True, variant, **opts)
            np.testing.assert_array_equal(dist, ref, err_msg=f"{label}/{variant}")
            np.testing.assert_array_equal(pred, pred_ref, err_msg=f"{label}/{variant}")
            if name == "adaptive":
                check_adaptive(stats, dist, sources.size)
            else:
                check_stats(stats, dist, sources.size)
            res[label, variant] = stats
    for i in range(sources.size):  # adaptive processes what selection relaxes, phase by phase
        np.testing.assert_array_equal(res["adaptive-count", "count"]["updated"][i][:-1],
                                      res["selection", None]["frontier"][i])
    for name in SETTLE:
        same_stats(res[name, "successor"], res[name, "predecessor"])
    pg = res["crauser", "successor"]["phases"]
    pe = res["crauser-economic", "successor"]["phases"]
    pm = res["martin", "successor"]["phases"]
    assert (pg <= pe).all() and (pe <= pm).all()
