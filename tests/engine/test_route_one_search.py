"""``/route`` with ONE search per leg: over the overlay (:meth:`gpuroute.engine.traffic.TrafficRouter.plan`,
one :func:`gpuroute.crp.phantom_search.search` per leg seeding every departure option, only the winning
paths unpacked) and over the hierarchy (:meth:`gpuroute.engine.Engine._plan`, one table per leg and one
unpacking per leg). Routes equal a brute-force dynamic program over every option pair (scipy's Dijkstra on
the turn-expanded graph per departure option), with ``continue_straight`` true and false, junction ties,
same-arc targets ahead and behind, unreachable legs and traffic updates; a counter checks the searches run
per request."""
from __future__ import annotations

import math

import numpy as np
import pytest
from crp_oracle import PEN, with_restrictions
from naive import random_road_graph
from phantoms import from_options, point
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import dijkstra
from turn_oracle import turn_graph

from gpuroute import ContractionHierarchy, Overlay, Partition, RoadGraph
from gpuroute.ch.query import CHQuery
from gpuroute.crp import overlay as overlay_module
from gpuroute.crp import phantom_search as ps
from gpuroute.crp import search as crp_search
from gpuroute.engine import Engine, EngineError
from gpuroute.engine.traffic import LegPath, TrafficRouter
from gpuroute.geo.snap import largest_scc_mask


# ------------------------------------------------------------------------------------------ oracles
def pair_costs(ov, opts_a, opts_b, tg):
    """Float cost of every (departure option, arrival option) pair of one leg on ``ov``'s metric: leave
    arc ``a`` at ``fa`` by an allowed turn and reach arc ``b`` (minus the part beyond ``fb``), or stay on
    the arc when ``b`` lies ahead (inf: unreachable)."""
    rows, cols, w, c = tg
    m = ov.graph.n_arcs
    out = np.full((len(opts_a), len(opts_b)), math.inf)
    for i, (a, fa) in enumerate(opts_a):
        sel = rows == a
        g = csr_matrix((np.concatenate([w, w[sel] + (1.0 - fa) * c[a] + 1.0]),
                        (np.concatenate([rows, np.full(int(sel.sum()), m)]), np.concatenate([cols, cols[sel]]))),
                       shape=(m + 1, m + 1))
        d = dijkstra(g, indices=m) - 1.0
        for j, (b, fb) in enumerate(opts_b):
            v = d[b] - (1.0 - fb) * c[b]
            if a == b and fa <= fb:
                v = min(v, (fb - fa) * c[a])
            out[i, j] = v
    return out


def brute_force(ov, opts, continue_straight):
    """The least route cost through the waypoints' options (the dynamic program over every pair)."""
    tg = turn_graph(ov)
    best = np.zeros(len(opts[0]))
    for i in range(len(opts) - 1):
        c = pair_costs(ov, opts[i], opts[i + 1], tg)
        dep = best if (i == 0 or continue_straight) else np.full(best.size, best.min())
        best = (dep[:, None] + c).min(axis=0)
    return float(best.min())


def plan_cost(ov, opts, plan, continue_straight, snap=None):
    """The plan's cost from its arcs alone (every turn allowed), checking its shape; the costs of ``snap``
    (a :class:`~gpuroute.engine.traffic.Snapshot`) or of ``ov``'s current metric."""
    tr = ov.turns
    c = np.asarray(ov.arc_cost if snap is None else snap.cost, dtype=np.float64)
    tc = ov.turn_cost if snap is None else snap.turn_cost
    total = 0.0
    assert len(plan) == len(opts) - 1
    for i, ((a, fa), (b, fb), path) in enumerate(plan):
        assert (a, fa) in opts[i] and (b, fb) in opts[i + 1]
        if continue_straight and i > 0:
            assert (a, fa) == plan[i - 1][1]  # leaves by the arc it arrived on
        if path is None:
            assert a == b and fa <= fb
            total += (fb - fa) * c[a]
            continue
        assert isinstance(path, LegPath)
        seq = np.concatenate([[a], np.asarray(path.arcs, dtype=np.int64), [b]])
        g = ov.graph
        assert (g.head[seq[:-1]] == g.tail[seq[1:]]).all()
        assert (np.asarray(path.nodes) == g.head[seq[:-1]]).all()
        tid = tr.turn_index(seq[:-1], seq[1:])
        assert (tid >= 0).all() and (tc[tid] >= 0).all()
        leg = (1.0 - fa) * c[a] + float(tc[tid].sum()) - (1.0 - fb) * c[b]
        assert path.distance == pytest.approx(leg, abs=1e-9)
        total += leg
    return total


# ------------------------------------------------------------------------------------------ graphs
def _overlay(seed, n=45):
    rng = np.random.default_rng(seed)
    g, _ = random_road_graph(rng, n, one_way=0.25)
    g = with_restrictions(g, rng, 8)
    ov = Overlay.build(g, Partition.build(g, cell_sizes=(5, 15), seed=seed))
    ov.customize((rng.integers(1, 60, g.n_arcs), PEN))
    return rng, g, ov


def _reverse(g, a):
    u, v = int(g.tail[a]), int(g.head[a])
    lo, hi = int(g.first_out[v]), int(g.first_out[v + 1])
    hit = np.flatnonzero(np.asarray(g.head[lo:hi]) == u)
    return lo + int(hit[0]) if hit.size else -1


def _on_arc(g, a, f):
    """A waypoint inside arc ``a`` at ``f``: the arc, and its reverse where the road is two-way."""
    r = _reverse(g, a)
    return [(int(a), float(f))] + ([(r, 1.0 - float(f))] if r >= 0 else [])


def _at_node(g, v):
    """A waypoint on node ``v``: every arc leaving it (at 0) and entering it (at 1), a junction's ties."""
    out = [(int(a), 0.0) for a in range(int(g.first_out[v]), int(g.first_out[v + 1]))]
    into = [(int(a), 1.0) for a in np.flatnonzero(np.asarray(g.head) == v)]
    return out + into


def _waypoints(rng, g, k):
    opts = []
    while len(opts) < k:
        r = rng.random()
        if r < 0.3:
            v = int(rng.integers(0, g.n_nodes))
            o = _at_node(g, v)
            if not o:
                continue
        elif r < 0.55 and opts and opts[-1][0][1] not in (0.0, 1.0):  # the same arc again: ahead or behind
            a = opts[-1][0][0]
            o = _on_arc(g, a, float(rng.choice([0.05, 0.5, 0.95])))
        else:
            o = _on_arc(g, int(rng.integers(0, g.n_arcs)), float(rng.choice([0.25, 0.5, 0.8])))
        opts.append(o)
    return opts


def _stubs(opts):
    return from_options(opts)


# ------------------------------------------------------------------------------------------ overlay
@pytest.mark.parametrize("continue_straight", [True, False])
@pytest.mark.parametrize("seed", range(5))
def test_overlay_plan_equals_brute_force(seed, continue_straight):
    rng, g, ov = _overlay(seed)
    router = TrafficRouter(g, ov)
    checked = 0
    for phase in ("built", "traffic"):
        if phase == "traffic":
            arcs = rng.integers(0, g.n_arcs, 20)
            ov.update(arcs, rng.integers(1, 300, arcs.size))
        for _ in range(6):
            opts = _waypoints(rng, g, int(rng.integers(2, 6)))
            want = brute_force(ov, opts, continue_straight)
            if not math.isfinite(want):
                with pytest.raises(EngineError) as ei:
                    router.plan(_stubs(opts), continue_straight)
                assert ei.value.code == "NoRoute"
                continue
            with ps.SEARCHES.counting() as n:
                plan, snap = router.plan(_stubs(opts), continue_straight)
            assert snap.metric is ov.metric
            got = plan_cost(ov, opts, plan, continue_straight)
            # the search chooses in 1/1024 units: the plan costs at most a few of them more than the optimum
            assert want - 1e-6 <= got <= want + 0.01 * len(opts)
            assert n["overlay_search"] == len(opts) - 1
            assert n["overlay_unpack"] == sum(p is not None for _, _, p in plan)
            checked += 1
    assert checked >= 6


def test_one_metric_per_request(monkeypatch):
    """A customization landing between a route's legs changes nothing of that route: every leg is searched,
    unpacked and priced on the metric the route started with (the snapshot it returns)."""
    rng, g, ov = _overlay(8)
    router = TrafficRouter(g, ov)
    search = ps.search_leg  # a leg's search (seeds, search, choice: one compiled call)
    for _ in range(4):
        opts = _waypoints(rng, g, 4)
        want = brute_force(ov, opts, True)
        if not math.isfinite(want):
            continue
        before = ov.metric
        hit = {"n": 0}

        def search_then_customize(*a, hit=hit, **kw):
            out = search(*a, **kw)
            if hit["n"] == 0:  # traffic arrives while the route runs
                ov.update(np.arange(g.n_arcs), np.asarray(ov.arc_cost) * 3 + 7)
            hit["n"] += 1
            return out

        monkeypatch.setattr(ps, "search_leg", search_then_customize)
        plan, snap = router.plan(_stubs(opts), True)
        monkeypatch.setattr(ps, "search_leg", search)
        assert ov.metric is not before and snap.metric is before and hit["n"] == 3
        got = plan_cost(ov, opts, plan, True, snap)
        assert want - 1e-6 <= got <= want + 0.04
        ov.customize(before)  # back (a new state of the same costs)


def test_same_arc_ahead_and_behind():
    """On one arc: a target ahead stays on the arc (no path); one behind leaves the arc and comes back."""
    rng, g, ov = _overlay(21)
    router = TrafficRouter(g, ov)
    tg = turn_graph(ov)
    seen = set()
    for a in rng.permutation(g.n_arcs)[:40]:
        a = int(a)
        for fa, fb in ((0.2, 0.7), (0.7, 0.2)):
            opts = [[(a, fa)], [(a, fb)]]  # one direction only (a bearing or an approach)
            want = pair_costs(ov, opts[0], opts[1], tg)[0, 0]
            if not math.isfinite(want):
                with pytest.raises(EngineError):
                    router.plan(_stubs(opts), True)
                continue
            plan, _ = router.plan(_stubs(opts), True)
            got = plan_cost(ov, opts, plan, True)
            assert want - 1e-6 <= got <= want + 0.01
            path = plan[0][2]
            if fa <= fb:
                assert path is None
                seen.add("ahead")
            else:
                assert path is not None and path.arcs.size >= 1
                seen.add("behind")
    assert seen == {"ahead", "behind"}


def test_unreachable_leg_is_no_route():
    """Two components: a leg between them has no route (and nothing is searched past that leg)."""
    xy = np.array([[7.42, 43.73], [7.421, 43.73], [7.422, 43.73], [7.43, 43.74], [7.431, 43.74], [7.432, 43.74]])
    t = np.array([0, 1, 1, 2, 3, 4, 4, 5])
    h = np.array([1, 0, 2, 1, 4, 3, 5, 4])
    g = RoadGraph.from_arcs(6, t, h, {"travel_time": np.full(8, 10)}, units={"travel_time": "ds"}, coords=xy)
    ov = Overlay.build(g, Partition.build(g, cell_sizes=(2,)))
    ov.customize()
    router = TrafficRouter(g, ov)
    a01, a34 = 0, int(np.flatnonzero((np.asarray(g.tail) == 3) & (np.asarray(g.head) == 4))[0])
    for cs in (True, False):
        with ps.SEARCHES.counting() as n, pytest.raises(EngineError) as ei:
            router.plan(_stubs([_on_arc(g, a01, 0.5), _on_arc(g, a01, 0.9), _on_arc(g, a34, 0.5),
                                _on_arc(g, a34, 0.7)]), cs)
        assert ei.value.code == "NoRoute"
        assert n["overlay_search"] == 2  # the second leg found nothing: the third is not searched
        plan, _ = router.plan(_stubs([[(a01, 0.5)], [(a01, 0.2)]]), cs)  # one direction, behind: go round
        assert plan[0][2] is not None and plan[0][2].distance == pytest.approx(0.5 * 10 + 10 + 0.2 * 10)


# ------------------------------------------------------------------------------------------ engines
@pytest.fixture(scope="module")
def engines():
    rng = np.random.default_rng(5)
    g, _ = random_road_graph(rng, 70, one_way=0.2)
    g = with_restrictions(g, rng, 10)
    ov = Overlay.build(g, Partition.build(g, cell_sizes=(6, 20), seed=1))
    ov.customize()
    ch = ContractionHierarchy.build(g, "travel_time", progress=False)
    return Engine(g, ch, overlay=ov), Engine(g, ch)


def _far_nodes(e, rng, k):
    """``k`` node coordinates of the snapping component, no two consecutive ones joined by an arc (no
    leg stays on one segment)."""
    g = e.graph
    ok = np.flatnonzero(largest_scc_mask(g))
    adj = set(zip(np.asarray(g.tail).tolist(), np.asarray(g.head).tolist(), strict=True))
    while True:
        v = rng.choice(ok, k)
        if all(v[i] != v[i + 1] and (int(v[i]), int(v[i + 1])) not in adj and (int(v[i + 1]), int(v[i])) not in adj
               for i in range(k - 1)):
            return [g.coords[int(x)].tolist() for x in v]


@pytest.mark.parametrize("k", [2, 3, 5])
def test_one_search_per_leg_overlay(engines, monkeypatch, k):
    """The issue's "done when": a route through k coordinates runs k - 1 overlay searches and unpacks
    k - 1 paths; no point-to-point search runs (the entry points themselves are counted)."""
    e, _ = engines
    calls = {"targets": 0, "unpack": 0}
    # the entry points: a leg's search (ps._targets, or the compiled call that holds it) and a path's unpacking
    # (the query object's, or the compiled call of numbering and unpacking)
    targets, leg_search = ps._targets, ps._leg_search
    unpacked, unpack_chain = overlay_module.OverlayQuery._unpacked, ps._unpack_chain

    def count_targets(*a):
        calls["targets"] += 1
        return targets(*a)

    def count_leg_search(*a):
        calls["targets"] += 1
        return leg_search(*a)

    def count_unpack(self, *a):
        calls["unpack"] += 1
        return unpacked(self, *a)

    def count_unpack_chain(*a):
        calls["unpack"] += 1
        return unpack_chain(*a)

    leg_path, one_leg = ps._unpack_leg_path, ps._one_leg

    def count_leg_path(*a):
        calls["unpack"] += 1
        return leg_path(*a)

    def count_one_leg(*a):  # a two-point route's search and (unless a same-arc leg) unpacking
        got = one_leg(*a)
        calls["targets"] += 1
        calls["unpack"] += int(got[0] == 0 and got[1] and not got[4])
        return got

    def forbidden(*a, **kw):
        raise AssertionError("a point-to-point overlay search ran on the route path")

    monkeypatch.setattr(ps, "_targets", count_targets)
    monkeypatch.setattr(ps, "_leg_search", count_leg_search)
    monkeypatch.setattr(overlay_module.OverlayQuery, "_unpacked", count_unpack)
    monkeypatch.setattr(ps, "_unpack_chain", count_unpack_chain)
    monkeypatch.setattr(ps, "_unpack_leg_path", count_leg_path)
    monkeypatch.setattr(ps, "_one_leg", count_one_leg)
    monkeypatch.setattr(overlay_module.OverlayQuery, "route_arcs", forbidden)
    monkeypatch.setattr(crp_search, "bidir_states", forbidden)
    monkeypatch.setattr(crp_search, "bidir", forbidden)
    rng = np.random.default_rng(k)
    for cs in (True, False):
        for _ in range(3):
            pts = _far_nodes(e, rng, k)
            calls.update(targets=0, unpack=0)
            with ps.SEARCHES.counting() as n:
                e.route(pts, overview="full", continue_straight=cs)
            assert calls == {"targets": k - 1, "unpack": k - 1}
            assert n["overlay_search"] == k - 1 and n["overlay_unpack"] == k - 1


@pytest.mark.parametrize("k", [2, 4])
def test_one_table_and_one_unpacking_per_leg_hierarchy(engines, monkeypatch, k):
    """Over the hierarchy: k - 1 table calls and k - 1 path unpackings, and the route's weight is the
    brute-force dynamic program's over every option pair (one CH distance per pair)."""
    _, ech = engines
    calls = {"table": 0, "route": 0}
    table, route = CHQuery.table, CHQuery.route

    def count_table(self, *a):
        calls["table"] += 1
        return table(self, *a)

    def count_route(self, *a):
        calls["route"] += 1
        return route(self, *a)

    monkeypatch.setattr(CHQuery, "table", count_table)
    monkeypatch.setattr(CHQuery, "route", count_route)
    g = ech.graph
    w = np.asarray(g.weight("travel_time"), dtype=np.float64)
    head, tail = np.asarray(g.head), np.asarray(g.tail)
    rng = np.random.default_rng(10 + k)
    for cs in (True, False):
        for _ in range(3):
            pts = _far_nodes(ech, rng, k)
            calls.update(table=0, route=0)
            with ps.SEARCHES.counting() as n:
                r = ech.route(pts, overview="false", continue_straight=cs)["routes"][0]
            assert calls == {"table": k - 1, "route": k - 1}
            assert n["ch_table"] == k - 1 and n["ch_unpack"] == k - 1
            # the oracle: every pair by its own CH distance (the old plan), the same dynamic program
            opts = [point(ech.segments.snap(*p)).all_arcs for p in pts]
            best = np.zeros(len(opts[0]))
            for i in range(k - 1):
                c = np.full((len(opts[i]), len(opts[i + 1])), math.inf)
                for x, (a, fa) in enumerate(opts[i]):
                    for y, (b, fb) in enumerate(opts[i + 1]):
                        if a == b and fa <= fb:
                            c[x, y] = (fb - fa) * w[a]
                            continue
                        d = route(ech._query(), int(head[a]), int(tail[b])).distance
                        if d < np.iinfo(np.int64).max:
                            c[x, y] = (1.0 - fa) * w[a] + d + fb * w[b]
                dep = best if (i == 0 or cs) else np.full(best.size, best.min())
                best = (dep[:, None] + c).min(axis=0)
            assert r["weight"] == pytest.approx(best.min() * 0.1, abs=0.05 * k)


def test_ch_query_table_equals_the_hierarchy_table(engines):
    """The hierarchy's leg table (:meth:`gpuroute.ch.query.CHQuery.table`, serial, this thread's buffers)
    equals the bucket many-to-many table, repeated nodes and a node to itself included."""
    _, ech = engines
    g = ech.graph
    rng = np.random.default_rng(4)
    q = ech.ch.query()
    for _ in range(5):
        s = rng.integers(0, g.n_nodes, int(rng.integers(1, 6)))
        t = np.concatenate([rng.integers(0, g.n_nodes, int(rng.integers(1, 6))), s[:1]])
        np.testing.assert_array_equal(q.table(s, t), ech.ch.table(s, t, device="cpu"))
    with pytest.raises(IndexError, match="targets"):
        q.table([0], [g.n_nodes])
