"""Isochrones on engines with an overlay (:func:`gpuroute.engine.services.isochrone.search.search_turns`): the reachable pieces of
road are those of routes as ``/route`` drives them, turn costs paid and turn restrictions honoured, on the
overlay's current metric (``/customize``).

Oracle: scipy's Dijkstra on the turn-expanded graph (states = arcs, edges = the allowed turns at their
cost: penalty + cost of the out-arc) from a spare state joined to the successors of every arc of the
snapped origin (at the rest of that arc plus the turn): every arc's ENTRY cost (its label less its own
cost). Within contour ``C`` the reachable pieces are every arc ``b`` with ``entry(b) <= C`` from its tail
to ``min(1, (C - entry(b)) / c(b))`` and, on the origin's arcs, the piece from the origin on; the
pipeline's pieces (:func:`gpuroute.engine.services.isochrone.lattice.pieces_cpu`, the ones it marks on the lattice) must be
exactly these. Random graphs with per-turn costs, closed turns and restrictions; a forbidden turn that
cuts a street off; the shipped Monaco dataset before and after a traffic update, at a restricted turn,
and after a metric switch."""
from __future__ import annotations

import math

import numpy as np
import pytest

shapely = pytest.importorskip("shapely")

from crp_oracle import with_restrictions  # noqa: E402
from naive import random_road_graph  # noqa: E402
from phantoms import point  # noqa: E402
from scipy.sparse import csr_matrix  # noqa: E402
from scipy.sparse.csgraph import dijkstra  # noqa: E402
from shapely.geometry import Point, shape  # noqa: E402
from turn_oracle import turn_graph  # noqa: E402

import gpuroute.engine.services.isochrone as iso  # noqa: E402
from gpuroute import ContractionHierarchy, Overlay, Partition, RoadGraph, TurnRestrictions, config  # noqa: E402
from gpuroute.crp import FORBIDDEN  # noqa: E402
from gpuroute.crp.metric import RESTRICTED, Metric  # noqa: E402
from gpuroute.engine import Engine  # noqa: E402
from gpuroute.engine.services.isochrone import lattice, search  # noqa: E402
from gpuroute.geo import EARTH_RADIUS_M  # noqa: E402

#: Place du Casino, Port Hercule (lon, lat).
MONACO_ORIGINS = [(7.4282, 43.7396), (7.4233, 43.7347)]


# ----------------------------------------------------------------------------------- the oracle
def entry_oracle(rows, cols, tcost, m, seeds):
    """Label (cost standing at the arc's head) of every arc, inf where unreached: scipy Dijkstra on the
    turn graph ``(rows, cols, tcost)`` (allowed turns only) from a spare state ``m`` joined to the
    successors of each seed ``(arc, base)`` at ``base + turn cost``."""
    r, cc, ww = [rows], [cols], [tcost]
    for a, base in seeds:
        sel = rows == a
        r.append(np.full(int(sel.sum()), m))
        cc.append(cols[sel])
        ww.append(tcost[sel] + base)
    r, cc, ww = np.concatenate(r), np.concatenate(cc), np.concatenate(ww).astype(np.float64)
    order = np.lexsort((ww, cc, r))  # the cheapest of parallel edges (csr_matrix would add them)
    r, cc, ww = r[order], cc[order], ww[order]
    first = np.ones(r.size, dtype=bool)
    first[1:] = (r[1:] != r[:-1]) | (cc[1:] != cc[:-1])
    assert (ww[first] > 0).all()  # a zero would vanish from the sparse matrix
    g = csr_matrix((ww[first], (r[first], cc[first])), shape=(m + 1, m + 1))
    return dijkstra(g, indices=m)[:m]


def oracle_pieces(label, cost, origin_arcs, cus):
    """``(q, arc, lo, hi)`` of every reachable piece of every contour (``cus`` largest first)."""
    entry = label - cost
    q_, a_, lo_, hi_ = [], [], [], []
    for q, C in enumerate(cus):
        b = np.flatnonzero(entry <= C)
        q_.append(np.full(b.size, q))
        a_.append(b)
        lo_.append(np.zeros(b.size))
        hi_.append(np.minimum(1.0, (C - entry[b]) / cost[b]))
        for a, f in origin_arcs:
            q_.append([q])
            a_.append([a])
            lo_.append([f])
            hi_.append([min(1.0, f + C / cost[a])])
    return tuple(np.concatenate(x) for x in (q_, a_, lo_, hi_))


def assert_same_pieces(got, want):
    """Two sets of pieces ``(q, arc, lo, hi)`` are equal (costs up to float rounding)."""
    got = [np.asarray(x) for x in got]
    want = [np.asarray(x) for x in want]
    assert got[0].size == want[0].size, f"{got[0].size} pieces drawn, the oracle has {want[0].size}"
    og = np.lexsort((np.round(got[3], 9), np.round(got[2], 9), got[1], got[0]))
    ow = np.lexsort((np.round(want[3], 9), np.round(want[2], 9), want[1], want[0]))
    np.testing.assert_array_equal(got[0][og], want[0][ow])
    np.testing.assert_array_equal(got[1][og], want[1][ow])
    np.testing.assert_allclose(got[2][og], want[2][ow], atol=1e-9)
    np.testing.assert_allclose(got[3][og], want[3][ow], atol=1e-9)


def drawn(engine, coord, contours, metric="duration"):
    """The pieces the engine draws for an isochrone (contours in s or m): ``(pieces, origin, Request,
    Metric)``."""
    met = iso.metric_of(engine, metric)
    origin = point(engine.segments.snap(*coord))
    cus = sorted((c / met.scale for c in contours), reverse=True)
    req = search.Request(met, engine._head, origin.arcs, cus, origin.lon, origin.lat)
    return lattice.pieces_cpu(iso.graph_arrays(engine), met, req), origin, req, met


def expected(ov, origin, cus, *, cost=None, tcost_of=None):
    """The oracle's pieces on the overlay's current metric (or arc costs ``cost`` with the allowed turns
    of ``tcost_of(cost)``)."""
    rows, cols, tc, c = turn_graph(ov)
    if cost is not None:
        rows, cols, tc = tcost_of(cost)
        c = cost
    seeds = [(a, (1.0 - f) * c[a]) for a, f in origin.arcs]
    label = entry_oracle(rows, cols, tc, ov.graph.n_arcs, seeds)
    return oracle_pieces(label, c, origin.arcs, cus), label


def graph_rules(ov, penalty=None):
    """``tcost_of(cost)``: the turns the graph's restrictions allow, each at ``penalty + cost`` of its
    out-arc (no penalty: a length)."""
    tr = ov.turns
    m = ov.graph.n_arcs
    in_arc = np.repeat(np.arange(m), np.diff(np.asarray(tr.first)))
    ok = np.asarray(tr.kind) != RESTRICTED
    out = np.asarray(tr.out_arc, dtype=np.int64)

    def tcost_of(cost):
        pen = 0.0 if penalty is None else penalty[ok]
        return in_arc[ok], out[ok], cost[out[ok]] + pen

    return tcost_of


# ----------------------------------------------------------------------------------- random graphs
def random_engine(seed, n=80):
    """An engine with an overlay on a random graph with restrictions, customized for travel times with
    type penalties, random per-turn penalties and some closed turns (a time in deciseconds)."""
    rng = np.random.default_rng(seed)
    g, _ = random_road_graph(rng, n, one_way=0.3)
    g = with_restrictions(g, rng, 15)
    ch = ContractionHierarchy.build(g, "travel_time", progress=False)
    ov = Overlay.build(g, Partition.build(g, cell_sizes=(8, 32)))
    T = ov.turns.n_turns
    tcost = rng.integers(0, 30, T)
    tcost[rng.random(T) < 0.1] = FORBIDDEN
    ov.customize(Metric(g.weight("travel_time"), [0, 7, 3, 40], turn_cost=tcost, name="time-turns", units="ds"))
    return Engine(g, ch, overlay=ov), rng


@pytest.mark.parametrize("seed", range(5))
def test_random_graphs_pieces_equal_the_turn_aware_oracle(seed):
    e, rng = random_engine(seed)
    ov, g = e.overlay, e.graph
    assert turn_graph(ov)[2].size < ov.turns.n_turns  # some turns are closed
    n_reached = 0
    for _ in range(3):
        v = int(rng.integers(0, g.n_nodes))
        coord = tuple(g.coords[v] + rng.uniform(-3e-4, 3e-4, 2))
        contours = [float(x) for x in rng.uniform(5.0, 60.0, 2)]  # seconds
        got, origin, req, met = drawn(e, coord, contours)
        assert met.scale == pytest.approx(0.1)
        want, label = expected(ov, origin, req.cus)
        assert_same_pieces(got, want)
        n_reached += int(np.isfinite(label).sum())
    assert n_reached > 20


def test_search_grows_a_full_heap():
    """A heap too small for the search (one entry) is grown and the search run again: the same pieces."""
    from gpuroute.engine.services.isochrone import search as it

    e, rng = random_engine(11)
    g = e.graph
    coord = tuple(g.coords[3])
    want, origin, req, _ = drawn(e, coord, [45.0, 20.0])
    st = it._turn_scratch  # this thread's buffers, sized for this graph by the search above
    st.hd, st.hn = np.empty(1), np.empty(1, dtype=np.int64)
    got, *_ = drawn(e, coord, [45.0, 20.0])
    assert st.hd.shape[0] > 1 and (st.label == np.inf).all()
    assert_same_pieces(got, want)
    assert_same_pieces(got, expected(e.overlay, origin, req.cus)[0])


@pytest.mark.parametrize("seed", range(3))
def test_random_graphs_distance_lengths_with_restrictions(seed):
    """``metric="distance"`` on an overlay of a time: the graph's lengths, no turn costs, the graph's
    restrictions (the metric's closed turns are the time metric's, not the road's)."""
    e, rng = random_engine(seed)
    ov, g = e.overlay, e.graph
    length = g.weight("distance").astype(np.float64)
    for _ in range(3):
        v = int(rng.integers(0, g.n_nodes))
        coord = tuple(g.coords[v] + rng.uniform(-3e-4, 3e-4, 2))
        contours = [float(x) for x in rng.uniform(100.0, 1500.0, 2)]  # metres
        got, origin, req, met = drawn(e, coord, contours, "distance")
        assert met.scale == pytest.approx(0.1)  # decimetres
        want, _ = expected(ov, origin, req.cus, cost=length, tcost_of=graph_rules(ov))
        assert_same_pieces(got, want)


def test_random_graph_duration_after_a_switch_to_distance():
    """Once ``/customize`` switched the overlay to a length, ``metric="duration"`` searches the graph's
    travel times with its restrictions (this graph has no turn durations)."""
    e, rng = random_engine(7)
    ov, g = e.overlay, e.graph
    e.customize(metric="distance")
    tt = g.weight("travel_time").astype(np.float64)
    for _ in range(3):
        v = int(rng.integers(0, g.n_nodes))
        coord = tuple(g.coords[v] + rng.uniform(-3e-4, 3e-4, 2))
        got, origin, req, _ = drawn(e, coord, [37.3, 12.9])
        want, _ = expected(ov, origin, req.cus, cost=tt, tcost_of=graph_rules(ov))
        assert_same_pieces(got, want)


# ----------------------------------------------------------------------------------- a forbidden turn
def _deg(east_m, north_m, lon0=7.40, lat0=43.70):
    k = math.pi / 180.0 * EARTH_RADIUS_M
    return lon0 + east_m / (k * math.cos(math.radians(lat0))), lat0 + north_m / k


def junction_engines():
    """A two-way main road A - B - C and a two-way side street B - D (each 500 m, 40 s), with and without
    the restriction "no turn from A -> B onto B -> D": ``(restricted, free)`` overlay engines. From A the
    side street is then reached only by a U-turn at C (120 s, 1500 m to B -> D)."""
    xy = np.array([_deg(0, 0), _deg(500, 0), _deg(1000, 0), _deg(500, 500)])
    tail = np.array([0, 1, 1, 2, 1, 3])
    head = np.array([1, 0, 2, 1, 3, 1])
    weights = {"travel_time": np.full(6, 400), "distance": np.full(6, 500)}
    units = {"travel_time": "ds", "distance": "m"}
    out = []
    for turns in (TurnRestrictions([0], [4], [0]), None):  # input positions: A -> B, B -> D
        g = RoadGraph.from_arcs(4, tail, head, weights, units=units, coords=xy, name="junction", turns=turns)
        ch = ContractionHierarchy.build(g, "travel_time", progress=False)
        ov = Overlay.build(g, Partition.build(g, cell_sizes=(2,)))
        ov.customize("time")
        out.append(Engine(g, ch, overlay=ov))
    return out


def _arc(g, u, v):
    return int(np.flatnonzero((g.tail == u) & (g.head == v))[0])


@pytest.mark.parametrize("metric, contour", [("duration", 100.0), ("distance", 1200.0)])
def test_a_forbidden_turn_cuts_the_street_off(metric, contour):
    restricted, free = junction_engines()
    origin = _deg(20, 3)  # on A - B, 20 m from A
    d = Point(*_deg(500, 500))
    c = Point(*_deg(1000, 0))
    polys = {}
    for name, e in (("restricted", restricted), ("free", free)):
        res = e.isochrone(origin, [contour], metric=metric)
        polys[name] = shape(res["features"][0]["geometry"])
        assert polys[name].is_valid and polys[name].covers(c)  # straight on: C reached either way
    assert polys["free"].covers(d)
    assert not polys["restricted"].covers(d), "the side street beyond the forbidden turn is inside"
    assert polys["restricted"].area < 0.8 * polys["free"].area
    # the pieces: the side street is not reached at all (D is reached from nowhere else)
    g = restricted.graph
    side = {_arc(g, 1, 3), _arc(g, 3, 1)}
    (q, arcs, lo, hi), origin_p, *_ = drawn(restricted, origin, [contour], metric)
    assert {a for a, _ in origin_p.arcs} == {_arc(g, 0, 1), _arc(g, 1, 0)}
    assert not side & set(arcs.tolist())
    (q, arcs, lo, hi), *_ = drawn(free, origin, [contour], metric)
    assert hi[arcs == _arc(g, 1, 3)].max() == 1.0


# ----------------------------------------------------------------------------------- Monaco
@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    pytest.importorskip("osmium")
    from gpuroute.pipeline import build_dataset

    d = tmp_path_factory.mktemp("ds") / "monaco"
    build_dataset("monaco", d, cell_sizes=(64, 1024))
    return d


@pytest.fixture
def monaco(dataset):
    """A fresh engine on the dataset (customizations do not leak between tests)."""
    return Engine.open(dataset)


def _local(lon, lat, lon0, lat0):
    k = math.pi / 180 * EARTH_RADIUS_M
    return np.column_stack([(np.asarray(lon) - lon0) * k * math.cos(math.radians(lat0)),
                            (np.asarray(lat) - lat0) * k])


def _polygon_m(feature, lon0, lat0):
    return shapely.transform(shape(feature["geometry"]), lambda xy: _local(xy[:, 0], xy[:, 1], lon0, lat0))


def _segments(g, pieces, q):
    """Local-metre segments (k, 2, 2) of the pieces of contour ``q``."""
    qq, a, lo, hi = pieces
    s = qq == q
    a, lo, hi = a[s], lo[s], hi[s]
    t, h = g.coords[g.tail[a]], g.coords[g.head[a]]
    return np.stack([t + lo[:, None] * (h - t), t + hi[:, None] * (h - t)], axis=1)


def test_monaco_pieces_equal_the_oracle_and_lie_inside(monaco):
    e = monaco
    g = e.graph
    for coord in MONACO_ORIGINS:
        res = e.isochrone(coord, [300, 600])
        got, origin, req, _ = drawn(e, coord, [300, 600])
        want, _ = expected(e.overlay, origin, req.cus)
        assert_same_pieces(got, want)
        for q, f in enumerate(res["features"]):
            poly = _polygon_m(f, origin.lon, origin.lat).buffer(1.0)
            seg = _segments(g, want, q)
            ends = _local(seg[:, :, 0].ravel(), seg[:, :, 1].ravel(), origin.lon, origin.lat)
            assert shapely.covers(poly, shapely.points(ends)).all()


def test_monaco_traffic_update_shrinks_the_isochrone(monaco):
    """Arcs within 400 m of the origin five times slower: the 5-minute isochrone shrinks to what the
    oracle says on the new costs; roads reached before and now far beyond the contour fall outside."""
    e = monaco
    g = e.graph
    coord = MONACO_ORIGINS[0]
    C = 300.0
    before = e.isochrone(coord, [C])["features"][0]
    _, origin, req, _ = drawn(e, coord, [C])
    old_pieces, old_label = expected(e.overlay, origin, req.cus)
    xy = _local(g.coords[:, 0], g.coords[:, 1], origin.lon, origin.lat)
    near = np.flatnonzero(np.hypot(*xy.T) < 400.0)
    arcs = np.flatnonzero(np.isin(g.tail, near) | np.isin(g.head, near))
    cost = np.asarray(e.overlay.arc_cost)
    e.customize([{"arc": int(a), "cost": int(5 * cost[a])} for a in arcs])
    after = e.isochrone(coord, [C])["features"][0]
    got, origin, req, _ = drawn(e, coord, [C])
    want, label = expected(e.overlay, origin, req.cus)
    assert_same_pieces(got, want)
    p0 = _polygon_m(before, origin.lon, origin.lat)
    p1 = _polygon_m(after, origin.lon, origin.lat)
    assert p1.area < 0.7 * p0.area
    # every reachable piece inside, roads beyond the new reach (and far from it) outside
    seg = _segments(g, want, 0)
    ends = _local(seg[:, :, 0].ravel(), seg[:, :, 1].ravel(), origin.lon, origin.lat)
    assert shapely.covers(p1.buffer(1.0), shapely.points(ends)).all()
    net = shapely.multilinestrings(shapely.linestrings(
        _local(seg[:, :, 0].ravel(), seg[:, :, 1].ravel(), origin.lon, origin.lat).reshape(-1, 2, 2)))
    arrive_old = np.full(g.n_nodes, np.inf)
    np.minimum.at(arrive_old, g.head, old_label)
    arrive = np.full(g.n_nodes, np.inf)
    np.minimum.at(arrive, g.head, label)
    lost = np.flatnonzero((arrive_old <= C * 10) & (arrive > C * 10 + 300))  # 30 s beyond the new reach
    pts = shapely.points(xy[lost])
    away = shapely.distance(net, pts) > config.SERVE_ISOCHRONE_BUFFER_M + 10.0
    assert away.sum() > 20
    assert shapely.covers(p0, pts[away]).mean() > 0.9  # they were inside before
    out = ~shapely.covers(p1, pts[away])
    assert out.mean() >= 0.9, f"only {out.mean():.0%} of the roads now beyond reach are outside"


def test_monaco_restricted_turn(monaco):
    """At a restricted turn ``a -> b`` (origin on ``a`` just before it): within the cost of going straight
    onto ``b`` and along it, the unrestricted search would cover all of ``b``; the engine covers what
    the detour leaves, as the oracle says."""
    e = monaco
    g, ov = e.graph, e.overlay
    tr = ov.turns
    in_arc = np.repeat(np.arange(g.n_arcs), np.diff(np.asarray(tr.first)))
    rows, cols, tc, c = turn_graph(ov)
    free_tc = np.asarray(ov.turn_cost, dtype=np.float64).copy()
    restricted = np.flatnonzero(np.asarray(tr.kind) == RESTRICTED)
    free_tc[restricted] = c[np.asarray(tr.out_arc)[restricted]]
    found = 0
    for t in restricted:
        a, b = int(in_arc[t]), int(tr.out_arc[t])
        if g.tail[a] == g.head[b] or c[a] < 20:  # a U-turn; a short in-arc
            continue
        p = g.coords[g.tail[a]] + 0.8 * (g.coords[g.head[a]] - g.coords[g.tail[a]])
        origin = point(e.segments.snap(*p))
        if not any(x == a for x, _ in origin.arcs):
            continue
        fa = dict(origin.arcs)[a]
        C = ((1.0 - fa) * c[a] + c[b] + 0.5) * 0.1  # seconds: straight onto b and to its end
        got, origin, req, met = drawn(e, tuple(p), [C])
        want, label = expected(ov, origin, req.cus)
        assert_same_pieces(got, want)
        seeds = [(x, (1.0 - f) * c[x]) for x, f in origin.arcs]
        free_label = entry_oracle(in_arc, np.asarray(tr.out_arc, dtype=np.int64), free_tc, g.n_arcs, seeds)
        assert free_label[b] - c[b] <= (1.0 - fa) * c[a] + 1e-9  # unrestricted: b entered at once
        qa, aa, lo, hi = got
        cover = hi[(aa == b) & (lo == 0)]
        if cover.size == 0 or cover.max() < 1.0:
            found += 1  # the restriction keeps (part of) b out of reach
            res = e.isochrone(tuple(p), [C])
            assert res["features"][0]["geometry"]["type"] in ("Polygon", "MultiPolygon")
        if found >= 3:
            break
    assert found >= 1


def test_monaco_duration_after_metric_switch_and_distance(monaco):
    """After ``/customize`` switched to ``distance``, duration isochrones search the graph's travel times
    (restrictions honoured); distance isochrones search the lengths, with the restrictions."""
    e = monaco
    g, ov = e.graph, e.overlay
    e.customize(metric="distance")
    tt = g.weight("travel_time").astype(np.float64)
    length = g.weight("distance").astype(np.float64)
    coord = MONACO_ORIGINS[1]
    got, origin, req, _ = drawn(e, coord, [240.0])
    want, _ = expected(ov, origin, req.cus, cost=tt, tcost_of=graph_rules(ov))
    assert_same_pieces(got, want)
    got, origin, req, _ = drawn(e, coord, [1500.0, 700.0], "distance")
    want, _ = expected(ov, origin, req.cus, cost=length, tcost_of=graph_rules(ov))
    assert_same_pieces(got, want)


def test_capabilities_say_turn_and_traffic_aware(monaco, monkeypatch):
    """Turn- and traffic-aware; the lattice drawn on the GPU where one is usable (the search on the CPU),
    on the CPU with ``config.SERVE_ISOCHRONE_DEVICE = "cpu"``."""
    from gpuroute.backend import gpu_available

    e = monaco
    row = next(r for r in e.capabilities if r["service"] == "isochrone")
    gpu = bool(gpu_available())
    assert row["traffic_aware"] is True and row["turn_aware"] is True and row["device"] == ("gpu" if gpu else "cpu")
    assert ("on the GPU" in row["note"]) is gpu
    monkeypatch.setattr(config, "SERVE_ISOCHRONE_DEVICE", "cpu")
    row = next(r for r in e.capabilities if r["service"] == "isochrone")
    assert row["device"] == "cpu" and "on the GPU" not in row["note"]
    plain = Engine(e.graph, e.ch)
    row = next(r for r in plain.capabilities if r["service"] == "isochrone")
    assert row["traffic_aware"] is False and row["turn_aware"] is False


# ----------------------------------------------------------------------------------- a profile's turn costs
def profile_engine(seed):
    """An engine on a random graph with per-turn costs as a Lua profile gives them (a weight that is not a
    time, turn weights, turn durations in deciseconds, closed turns) and restrictions, its overlay
    customized for the profile's weight (as ``gpuroute build --profile`` does)."""
    from gpuroute import Unit
    from gpuroute.graph.turn_costs import TurnCosts, n_turns_of
    from gpuroute.pipeline.customize import profile_metric

    rng = np.random.default_rng(seed)
    g0, _ = random_road_graph(rng, 80, one_way=0.3)
    g0 = with_restrictions(g0, rng, 10)
    T = n_turns_of(g0.first_out, g0.head)
    dur = rng.integers(0, 40, T)
    dur[rng.random(T) < 0.15] = -1  # closed by the profile
    weight = np.where(dur < 0, -1, dur + rng.integers(0, 20, T))
    weights = dict(g0.weights, weight=g0.weight("travel_time") + rng.integers(0, 30, g0.n_arcs))
    units = dict(g0.units, weight=Unit("routability/10", "other", 0.1))
    g = RoadGraph(g0.first_out, g0.head, weights, units=units, coords=g0.coords, name="profiled", turns=g0.turns,
                  turn_costs=TurnCosts(dur, weight, meta={"weight_name": "routability"}))
    ch = ContractionHierarchy.build(g, "weight", progress=False)
    ov = Overlay.build(g, Partition.build(g, cell_sizes=(8, 32)))
    ov.customize(profile_metric(g, "weight", turns=ov.turns))
    return Engine(g, ch, overlay=ov), rng


@pytest.mark.parametrize("seed", range(2))
def test_profile_turn_durations_and_closed_turns(seed):
    """The overlay routes by the profile's weight (not a time): duration isochrones search the graph's
    travel times (live: speed updates of /customize change them, tests/engine/test_traffic_speeds.py) plus the
    profile's turn durations, its closed turns and the restrictions forbidden; distance isochrones the
    lengths with the same turns forbidden. Switched to the profile's durations, duration isochrones follow
    the overlay."""
    e, rng = profile_engine(seed)
    g, ov = e.graph, e.overlay
    tc = g.turn_costs
    assert not e._traffic.snapshot().is_time
    row = next(r for r in e.capabilities if r["service"] == "isochrone")
    assert row["turn_aware"] is True and row["traffic_aware"] is True
    closed = np.asarray(tc.forbidden) | (np.asarray(ov.turns.kind) == RESTRICTED)
    pen = np.where(closed, 0, tc.duration).astype(np.float64)
    in_arc = np.repeat(np.arange(g.n_arcs), np.diff(np.asarray(ov.turns.first)))
    out = np.asarray(ov.turns.out_arc, dtype=np.int64)

    def rules(cost):
        return in_arc[~closed], out[~closed], cost[out[~closed]] + pen[~closed]

    def lengths(cost):
        return in_arc[~closed], out[~closed], cost[out[~closed]]

    tt = g.weight("travel_time").astype(np.float64)
    length = g.weight("distance").astype(np.float64)
    coords = [tuple(g.coords[int(v)] + rng.uniform(-3e-4, 3e-4, 2)) for v in rng.integers(0, g.n_nodes, 3)]
    for coord in coords:
        got, origin, req, met = drawn(e, coord, [51.7, 19.3])
        assert met.name == "travel_time"
        want, _ = expected(ov, origin, req.cus, cost=tt, tcost_of=rules)
        assert_same_pieces(got, want)
        got, origin, req, _ = drawn(e, coord, [900.0], "distance")
        want, _ = expected(ov, origin, req.cus, cost=length, tcost_of=lengths)
        assert_same_pieces(got, want)
    e.customize(metric="duration")
    assert next(r for r in e.capabilities if r["service"] == "isochrone")["traffic_aware"] is True
    for coord in coords:
        got, origin, req, met = drawn(e, coord, [51.7, 19.3])
        assert met.name == "duration"
        want, _ = expected(ov, origin, req.cus)  # the overlay's costs ...
        assert_same_pieces(got, want)
        want, _ = expected(ov, origin, req.cus, cost=tt, tcost_of=rules)  # ... which are the profile's durations
        assert_same_pieces(got, want)


def test_hierarchy_and_turn_searches_keep_their_own_buffers(monkeypatch):
    """One thread answers isochrones of a hierarchy engine and of an overlay engine on another graph in
    turn: each search keeps its own per-thread buffers, so the hierarchy's pieces after a turn search are
    those before it (the two searches once shared one buffer object, and the bounded Dijkstra then wrote
    into the turn search's smaller arrays). The Dijkstra gives up early here, for the hierarchy's PHAST."""
    from gpuroute import config

    monkeypatch.setattr(config, "SERVE_ISOCHRONE_DIJKSTRA_MIN_NODES", 1)
    monkeypatch.setattr(config, "SERVE_ISOCHRONE_DIJKSTRA_FRACTION", 0.01)
    small, _ = random_engine(3, n=20)
    big, _ = random_engine(4, n=300)
    plain = Engine(big.graph, big.ch)  # no overlay: the bounded Dijkstra of the hierarchy, then PHAST
    coord = tuple(big.graph.coords[7])
    before = drawn(plain, coord, [600.0, 300.0])[0]
    drawn(small, tuple(small.graph.coords[5]), [45.0, 20.0])  # the turn-aware search, on a smaller graph
    assert_same_pieces(drawn(plain, coord, [600.0, 300.0])[0], before)
