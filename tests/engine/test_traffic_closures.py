"""Road closures by live traffic on a Monaco dataset: a speed of 0 (``{"from", "to", "speed_kmh": 0}``, as
``osrm-customize`` reads 0 in its segment-speed file) or ``{"arc", "cost": "closed"}`` closes an arc. Oracle:
the turn-aware Dijkstra of tests/turn_oracle.py on the metric BEFORE the closure with every turn into a
closed arc removed (the graph without the arc). Routes and table cells equal it, a waypoint reachable only
through closed arcs answers NoRoute and a null cell, isochrones reach what it reaches, waypoints do not
snap onto a closed direction (osrm-routed's ``HasValidEdge``), a later positive speed (or dropping the
saved traffic) reopens, closures survive a restart, and ``POST /customize`` with speed 0 answers Ok."""
from __future__ import annotations

import contextlib
import io
import math
import warnings

import numpy as np
import pytest

pytest.importorskip("osmium")

from phantoms import point, random_points  # noqa: E402
from turn_oracle import phantom_cost, route_arcs, turn_graph  # noqa: E402

from gpuroute.cli.main import main  # noqa: E402
from gpuroute.crp import CLOSED  # noqa: E402
from gpuroute.engine import Engine, EngineError  # noqa: E402
from gpuroute.engine.services import isochrone as iso  # noqa: E402
from gpuroute.engine.services.isochrone import lattice, search  # noqa: E402

_points = random_points


@pytest.fixture
def dataset(monaco_overlay_dir):
    return monaco_overlay_dir


@pytest.fixture
def engine(overlay_engine):
    return overlay_engine


def _without(tg, closed):
    """The oracle's turn graph (taken before the closure) without the turns into (or out of) closed arcs."""
    rows, cols, w, c = tg
    keep = ~(closed[rows] | closed[cols])
    return rows[keep], cols[keep], w[keep], c


def _snapped(e, pts):
    idx = e._snap_index()
    return (idx if idx is not None else e.segments).snap_many(pts)


def _speed0(e, arcs, speed=0):
    ids = np.asarray(e.graph.node_ids, dtype=np.int64)
    g = e.graph
    return [{"from": int(ids[g.tail[a]]), "to": int(ids[g.head[a]]), "speed_kmh": speed} for a in arcs]


def _inner_arcs(e, pts):
    r = e.route(pts, annotations=["nodes"], overview="false")["routes"][0]
    arcs = np.asarray(route_arcs(e, r), dtype=np.int64)
    return arcs[1:-1]  # the arcs between the waypoints' own


def test_speed_zero_closes_the_arcs_a_route_took(engine):
    e = engine
    pts = _points(e, 2, 11)
    tg0 = turn_graph(e.overlay)  # the metric before: the oracle's
    inner = _inner_arcs(e, pts)
    assert inner.size >= 2
    shut = inner[inner.size // 3: max(inner.size // 3 + 1, 2 * inner.size // 3)]
    out = e.customize(_speed0(e, shut))
    assert out["code"] == "Ok" and out["arcs"] == shut.size
    assert (np.asarray(e.overlay.arc_cost)[shut] == CLOSED).all()
    closed = np.zeros(e.graph.n_arcs, bool)
    closed[shut] = True
    r = e.route(pts, annotations=["nodes"], overview="false")["routes"][0]
    assert not closed[np.asarray(route_arcs(e, r), dtype=np.int64)].any()
    ps = _snapped(e, pts)
    want = phantom_cost(e.overlay, point(ps, 0), point(ps, 1), _without(tg0, closed))
    snap = e._traffic.snapshot()
    assert r["weight"] / snap.scale == pytest.approx(want, abs=0.6)
    # reopened by a positive speed: the arcs are routable again (their cost the speed's duration)
    e.customize(_speed0(e, shut, speed=50))
    assert not (np.asarray(e.overlay.arc_cost)[shut] == CLOSED).any() and e.overlay.metric.closed is None


def _isolate(e, pts, i):
    """The arcs to close so that point ``i`` is reached from nowhere: every arc into the two ends of its
    segment but the segment's own."""
    g = e.graph
    p = point(e.segments.snap_many(pts), i)
    own = {a for a, _ in p.arcs}
    ends = {int(g.tail[a]) for a in own} | {int(g.head[a]) for a in own}
    into = np.flatnonzero(np.isin(g.head, list(ends)))
    return np.array([a for a in into if a not in own], dtype=np.int64)


def test_table_cells_and_no_route_through_closed_arcs(engine):
    e = engine
    pts = _points(e, 6, 4)
    tg0 = turn_graph(e.overlay)
    shut = _isolate(e, pts, 0)
    assert e.customize([{"arc": int(a), "cost": "closed"} for a in shut])["code"] == "Ok"
    closed = np.zeros(e.graph.n_arcs, bool)
    closed[shut] = True
    tg = _without(tg0, closed)
    tb = e.table(pts, annotations=["duration"])
    ps = _snapped(e, pts)
    ph = [point(ps, i) for i in range(len(pts))]
    scale = e._traffic.snapshot().scale
    for i in range(len(pts)):
        for j in range(len(pts)):
            want = phantom_cost(e.overlay, ph[i], ph[j], tg)
            got = tb["durations"][i][j]
            if math.isinf(want):
                assert got is None, (i, j)
            else:
                assert got is not None and got / scale == pytest.approx(want, abs=0.6), (i, j)
    assert all(tb["durations"][i][0] is None for i in range(1, len(pts)))  # point 0 is cut off
    with pytest.raises(EngineError) as ei:
        e.route([pts[1], pts[0]])
    assert ei.value.code == "NoRoute"
    e.route([pts[0], pts[1]])  # leaving it is open


def test_snapping_skips_closed_directions(engine):
    """osrm-routed's HasValidEdge: a segment with one closed direction snaps with the other only; with both
    closed it is no candidate (routes and /nearest snap elsewhere)."""
    e = engine
    g = e.graph
    seg = e.segments
    two_way = np.flatnonzero((seg.reverse_arc >= 0) & (seg.length_m > 30))
    k = int(two_way[len(two_way) // 2])
    pts = [(float((seg.lon_u[k] + seg.lon_v[k]) / 2), float((seg.lat_u[k] + seg.lat_v[k]) / 2))]
    p = point(seg.snap_many(pts), 0, index=seg)
    fw, rv = int(seg.forward_arc[k]), int(seg.reverse_arc[k])
    assert p.segment == k and {a for a, _ in p.arcs} == {fw, rv}
    e.customize([{"arc": fw, "cost": "closed"}])
    q = point(_snapped(e, pts), 0)
    assert [a for a, _ in q.arcs] == [rv]  # the same place, the open direction only
    assert q.lon == pytest.approx(p.lon) and q.lat == pytest.approx(p.lat)
    e.customize([{"arc": rv, "cost": "closed"}])
    q = point(_snapped(e, pts), 0)
    assert not {fw, rv} & {a for a, _ in q.arcs} and q.distance > p.distance
    ids = np.asarray(g.node_ids, dtype=np.int64)
    pair = {int(ids[seg.u[k]]), int(ids[seg.v[k]])}
    near = e.nearest(pts[0], number=5)["waypoints"]
    assert near and all(set(w["nodes"]) != pair for w in near)
    e.customize([{"arc": fw, "cost": 100}])  # reopened: snaps there again
    assert [a for a, _ in point(_snapped(e, pts), 0).arcs] == [fw]


def test_isochrone_reach_avoids_closed_arcs(engine):
    e = engine
    g = e.graph
    coord = (7.4282, 43.7396)
    C = 240.0
    tg0 = turn_graph(e.overlay)
    origin = point(e.segments.snap(*coord))
    own = {a for a, _ in origin.arcs}
    xy = np.column_stack([(g.coords[:, 0] - origin.lon) * 80_000.0, (g.coords[:, 1] - origin.lat) * 111_000.0])
    ring = np.flatnonzero((np.hypot(*xy.T) > 150.0) & (np.hypot(*xy.T) < 300.0))
    shut = np.array([a for a in np.flatnonzero(np.isin(g.head, ring)) if a not in own][::2], dtype=np.int64)
    e.customize([{"arc": int(a), "cost": "closed"} for a in shut])
    closed = np.zeros(g.n_arcs, bool)
    closed[shut] = True
    met = iso.metric_of(e, "duration")
    cus = [C / met.scale]
    req = search.Request(met, e._head, origin.arcs, cus, origin.lon, origin.lat)
    q, arcs, _, _ = lattice.pieces_cpu(iso.graph_arrays(e), met, req)
    got = set(np.asarray(arcs)[np.asarray(q) == 0].tolist()) - own
    want = _reach(_without(tg0, closed), origin, cus[0], m=g.n_arcs) - own
    assert got == want
    assert not closed[list(got)].any()
    assert want < _reach(tg0, origin, cus[0], m=g.n_arcs) - own  # the closure took something out of reach


def _reach(tg, origin, bound, m):
    """Arcs entered within ``bound`` from ``origin``: scipy Dijkstra on the turn graph ``tg``."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import dijkstra

    rows, cols, w, c = tg
    r, cc, ww = [rows], [cols], [w]
    for a, f in origin.arcs:
        sel = rows == a
        r.append(np.full(int(sel.sum()), m))
        cc.append(cols[sel])
        ww.append(w[sel] + (1.0 - f) * c[a])
    r, cc, ww = np.concatenate(r), np.concatenate(cc), np.concatenate(ww)
    order = np.lexsort((ww, cc, r))
    r, cc, ww = r[order], cc[order], ww[order]
    first = np.ones(r.size, bool)
    first[1:] = (r[1:] != r[:-1]) | (cc[1:] != cc[:-1])
    label = dijkstra(csr_matrix((ww[first], (r[first], cc[first])), shape=(m + 1, m + 1)), indices=m)[:m]
    return set(np.flatnonzero(label - c <= bound).tolist())


def test_closures_survive_a_restart_and_reset_reopens(engine, dataset):
    e = engine
    pts = _points(e, 2, 11)
    inner = _inner_arcs(e, pts)
    shut = inner[: max(1, inner.size // 2)]
    e.customize(_speed0(e, shut))
    r1 = e.route(pts, overview="false")["routes"][0]
    e2 = Engine.open(dataset)  # the saved traffic (traffic.npz) again
    assert (np.asarray(e2.overlay.arc_cost)[shut] == CLOSED).all()
    np.testing.assert_array_equal(e2.overlay._state.clique, e.overlay._state.clique)
    r2 = e2.route(pts, overview="false")["routes"][0]
    assert r2["weight"] == r1["weight"] and r2["distance"] == r1["distance"]
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["customize", str(dataset), "--reset"]) == 0
    e3 = Engine.open(dataset)
    assert e3.overlay.metric.closed is None


def test_http_customize_speed_zero(engine):
    pytest.importorskip("starlette")
    pytest.importorskip("httpx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient
    from gpuroute.server import create_app

    e = engine
    pts = _points(e, 2, 11)
    inner = _inner_arcs(e, pts)
    shut = inner[: max(1, inner.size // 2)]
    with TestClient(create_app(e, allow_customize=True)) as client:
        r = client.post("/customize", json={"updates": _speed0(e, shut)})
        assert r.status_code == 200, r.text
        assert r.json()["code"] == "Ok"
        url = "/route/v1/driving/" + ";".join(f"{lon:.7f},{lat:.7f}" for lon, lat in pts) + \
            "?annotations=nodes&overview=false"
        got = client.get(url)
        assert got.status_code == 200, got.text
        arcs = np.asarray(route_arcs(e, got.json()["routes"][0]), dtype=np.int64)
        assert not np.isin(arcs, shut).any()
        bad = client.post("/customize", json={"updates": [{**_speed0(e, shut[:1])[0], "speed_kmh": -1}]})
        assert bad.status_code == 400 and "speed_kmh" in bad.json()["message"]


def test_distance_isochrone_avoids_closed_arcs(engine):
    """An isochrone of another quantity than the overlay's metric (distance on a time metric) searches the
    graph's own lengths: a closed road is closed there too."""
    e = engine
    g = e.graph
    coord = (7.4233, 43.7347)
    met0 = iso.metric_of(e, "distance")
    first, out_arc, tcost = met0.turns
    rows = np.repeat(np.arange(g.n_arcs), np.diff(first))
    ok = tcost >= 0
    tg0 = (rows[ok], np.asarray(out_arc)[ok], np.asarray(tcost)[ok] + 0.0, np.asarray(met0.w, dtype=np.float64))
    origin = point(e.segments.snap(*coord))
    own = {a for a, _ in origin.arcs}
    bound = 800.0 / met0.scale
    shut = np.array(sorted(_reach(tg0, origin, bound, g.n_arcs) - own)[::3], dtype=np.int64)
    e.customize([{"arc": int(a), "cost": "closed"} for a in shut])
    closed = np.zeros(g.n_arcs, bool)
    closed[shut] = True
    met = iso.metric_of(e, "distance")
    req = search.Request(met, e._head, origin.arcs, [bound], origin.lon, origin.lat)
    q, arcs, _, _ = lattice.pieces_cpu(iso.graph_arrays(e), met, req)
    got = set(np.asarray(arcs)[np.asarray(q) == 0].tolist()) - own
    assert got == _reach(_without(tg0, closed), origin, bound, g.n_arcs) - own
    assert not closed[list(got)].any()
