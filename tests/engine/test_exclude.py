"""OSRM's ``exclude=`` (:mod:`gpuroute.engine.exclude`) on the shipped Monaco built with OSRM's own car.lua
(its ``excludable``: toll, motorway, ferry; Monaco has arcs of all three): routes, tables, trips, nearest
and isochrones avoid the excluded classes, snapping skips excluded directions, undeclared combinations
are osrm-routed's ``InvalidValue``, an engine without an overlay answers ``NotImplemented``, and the
excluded customization follows ``/customize`` and is cached per metric.

Oracles: a turn-aware Dijkstra (``tests/turn_oracle.py``) on the overlay's current turn graph with every
turn into an excluded arc removed (the graph without the excluded arcs); snapping by brute force over
every segment's projection; the profile's own ``excludable`` read by the Lua runtime; isochrone pieces
from scipy's Dijkstra on the same reduced turn graph."""
from __future__ import annotations

import shutil
import types
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("osmium")
pytest.importorskip("lupa", reason="lupa (pip install 'gpuroute[lua]') runs OSRM's Lua profiles")

from osrm_peer import osrm_bin_dir, osrm_profiles_dir  # noqa: E402
from phantoms import point, points  # noqa: E402
from scipy.sparse import csr_matrix  # noqa: E402
from scipy.sparse.csgraph import dijkstra  # noqa: E402
from turn_oracle import phantom_cost, route_arcs, turn_graph  # noqa: E402

from gpuroute import config  # noqa: E402
from gpuroute.engine import Engine, EngineError  # noqa: E402
from gpuroute.engine.dataset import drop_traffic  # noqa: E402
from gpuroute.engine.exclude import NO_EXCLUDE, UNSUPPORTED, Excluder, excluder  # noqa: E402
from gpuroute.geo.segments import SegmentIndex  # noqa: E402
from gpuroute.io.lua_profile import LuaProfile  # noqa: E402

MONACO = Path(__file__).resolve().parents[2] / "src" / "gpuroute" / "datasets" / "data" / "monaco.osm.pbf"
SERVICES = ("route", "table", "trip", "nearest", "isochrone")


@pytest.fixture(scope="module")
def car_lua():
    return osrm_profiles_dir(osrm_bin_dir(required=False)) / "car.lua"


@pytest.fixture(scope="module")
def dataset(car_lua, monaco_car_dir):
    return monaco_car_dir  # the session's Monaco with car_lua (tests/conftest.py)


@pytest.fixture(scope="module")
def engine(dataset):
    return Engine.open(dataset)


def _bit(e, name):
    return 1 << list(e.graph.meta["classes"]).index(name)


def _excluded(e, name):
    return (np.asarray(e.graph.arc_attrs["classes"], dtype=np.int64) & _bit(e, name)) != 0


def _reduced(ov, excluded):
    """The oracle's turn graph of ``ov``'s current metric without the turns into excluded arcs."""
    rows, cols, w, c = turn_graph(ov)
    keep = ~excluded[cols]
    return rows[keep], cols[keep], w[keep], c


def _random_points(e, k, seed):
    s = e.segments
    rng = np.random.default_rng(seed)
    pick = rng.choice(s.n_segments, k)
    f = rng.uniform(0.3, 0.7, k)
    return list(zip((s.lon_u[pick] + f * (s.lon_v[pick] - s.lon_u[pick])).tolist(),
                    (s.lat_u[pick] + f * (s.lat_v[pick] - s.lat_u[pick])).tolist(), strict=True))


def _pairs_using(e, excluded, want, seed, routable=None):
    """Up to ``want`` random point pairs whose plain route uses an excluded arc (from a bounded search over
    800 random pairs); with ``routable`` (a class name) only pairs that have a route excluding it."""
    pts = _random_points(e, 1600, seed)
    out = []
    for i in range(0, len(pts), 2):
        c = pts[i:i + 2]
        r = e.route(c, overview="false", annotations=["nodes"])["routes"][0]
        if not excluded[route_arcs(e, r)].any():
            continue
        if routable is not None:
            try:
                e.route(c, overview="false", exclude=routable)
            except EngineError as err:
                assert err.code == "NoRoute"
                continue
        out.append((c, r))
        if len(out) == want:
            break
    return out


# ------------------------------------------------------------------------------------ declarations
def test_the_profiles_excludable_is_what_the_engine_declares(engine, car_lua):
    """meta["excludable"] holds car.lua's own sets (read by the Lua runtime); /health's info lists them."""
    prof = LuaProfile(car_lua)
    want = [sorted(set(s)) for s in prof.excludable]
    assert want and engine.graph.meta["excludable"] == want
    info = engine.info["exclude"]
    assert info["excludable"] == want and info["supported"] is True
    assert info["classes"] == list(engine.graph.meta["classes"])
    assert all(row["exclude"] for row in engine.capabilities if row["service"] != "customize")
    for name in ("toll", "motorway", "ferry"):  # the shipped Monaco has every declared class
        assert _excluded(engine, name).any(), name


@pytest.mark.parametrize("value", ["toll,motorway", "motorway,toll", "banana", "motorway,banana", ["tunnel"]])
def test_undeclared_combinations_are_invalid_value_on_every_service(engine, value):
    """osrm-routed: classes unknown, or whose union is not a declared set -> InvalidValue "Exclude flag
    combination is not supported." (checked before the coordinates, as its CheckAlgorithms)."""
    bad = [(999.0, 0.0), (999.0, 0.0)]  # the exclude is refused before these are looked at
    calls = {"route": lambda: engine.route(bad, exclude=value), "table": lambda: engine.table(bad, exclude=value),
             "trip": lambda: engine.trip(bad, exclude=value), "nearest": lambda: engine.nearest(bad[0], exclude=value),
             "isochrone": lambda: engine.isochrone(bad[0], 60, exclude=value)}
    for service in SERVICES:
        with pytest.raises(EngineError) as ei:
            calls[service]()
        assert ei.value.code == "InvalidValue" and UNSUPPORTED in str(ei.value), service


def test_names_in_any_order_and_repeated_are_the_declared_set(engine):
    """The union of the names is what counts (OSRM ORs the class bits)."""
    pts = _random_points(engine, 2, 3)
    a = engine.route(pts, exclude="motorway", overview="false")
    b = engine.route(pts, exclude=["motorway", "motorway"], overview="false")
    assert a == b


def test_an_engine_without_an_overlay_answers_not_implemented(engine):
    plain = Engine(engine.graph, engine.ch)
    with pytest.raises(EngineError) as ei:
        plain.route(_random_points(engine, 2, 1), exclude="motorway")
    assert ei.value.code == "NotImplemented" and NO_EXCLUDE in str(ei.value)
    assert plain.info["exclude"]["supported"] is False
    assert not any(row["exclude"] for row in plain.capabilities)
    assert plain.route(_random_points(engine, 2, 1), exclude=[])["code"] == "Ok"  # nothing to exclude


def test_a_graph_without_declared_combinations_refuses_every_class():
    """A profile without ``excludable`` (or a graph without classes): every exclude is InvalidValue."""
    g = types.SimpleNamespace(meta={"classes": ["toll"]}, arc_attrs={"classes": np.array([1, 0], np.uint8)})
    ex = Excluder(types.SimpleNamespace(graph=g, _traffic=object()))
    with pytest.raises(EngineError, match="not a combination the profile declares") as ei:
        ex.resolve("toll")
    assert ei.value.code == "InvalidValue"
    assert ex.info()["supported"] is False


# ------------------------------------------------------------------------------------ routes
@pytest.mark.parametrize("name", ["motorway"])
def test_routes_equal_the_oracle_without_the_excluded_arcs(engine, name):
    """Pairs whose plain route uses the class: with exclude=class no excluded arc appears in the route's
    node annotation and the weight is the turn-aware optimum of the graph without the excluded arcs
    (between the phantoms the masked snapping gives); NoRoute exactly where the oracle has none."""
    excluded = _excluded(engine, name)
    ov = engine.overlay
    tg = _reduced(ov, excluded)
    scale = engine._traffic.snapshot().scale
    index = excluder(engine).resolve(name).segments()
    pairs = _pairs_using(engine, excluded, 8, seed=11)
    assert len(pairs) >= 4, f"too few routes over {name} arcs to test"
    routed = 0
    for c, _ in pairs:
        sp = [point(index.snap(*p)) for p in c]
        want = phantom_cost(ov, sp[0], sp[1], tg)
        try:
            r = engine.route(c, overview="false", annotations=["nodes"], exclude=name)["routes"][0]
        except EngineError as e:
            assert e.code == "NoRoute" and not np.isfinite(want), (c, e)
            continue
        arcs = route_arcs(engine, r)
        assert not excluded[arcs].any(), (c, name)
        assert r["weight"] == pytest.approx(want * scale, abs=0.051), c
        routed += 1
    assert routed >= 4


def test_snapping_skips_excluded_segments(engine):
    """Coordinates on motorway segments: nearest (any component) and the route's waypoints (largest one)
    snap to the nearest segment with a direction that is not excluded, by brute force over every segment's
    projection; the phantom lists only usable directions."""
    excluded = _excluded(engine, "motorway")
    g = engine.graph
    rng = np.random.default_rng(5)
    on = np.flatnonzero(excluded)[rng.choice(int(excluded.sum()), 12, replace=False)]
    f = rng.uniform(0.2, 0.8, on.size)
    c = g.coords
    pts = np.stack([c[g.tail[on], 0] + f * (c[g.head[on], 0] - c[g.tail[on], 0]),
                    c[g.tail[on], 1] + f * (c[g.head[on], 1] - c[g.tail[on], 1])], axis=1)
    for component in ("any", "largest"):
        full = SegmentIndex.of(g, component)
        ok_f = ~excluded[full.forward_arc]
        ok_r = (full.reverse_arc >= 0) & ~excluded[np.maximum(full.reverse_arc, 0)]
        usable = np.flatnonzero(ok_f | ok_r)
        for lon, lat in pts.tolist():
            p = full.project(lon, lat, usable)
            best = float(p["distance"].min())
            if component == "any":
                w = engine.nearest((lon, lat), exclude="motorway")["waypoints"][0]
            else:  # routes, tables, trips and isochrones snap to the largest component
                w = engine.table([(lon, lat)], exclude="motorway")["sources"][0]
            assert w["distance"] == pytest.approx(best, abs=0.05), (component, lon, lat)
            plain = engine.nearest((lon, lat))["waypoints"][0] if component == "any" else None
            assert plain is None or plain["distance"] <= best  # it lies on an excluded segment
        ph = points(excluder(engine).resolve("motorway").segments(component).snap_many([tuple(x) for x in pts]))
        assert all(not excluded[a] for p in ph for a, _ in p.all_arcs)


def test_one_excluded_direction_snaps_with_the_other():
    """A two-way segment with its forward direction excluded keeps the reverse one (osrm-routed's
    CheckSegmentExclude per direction); both excluded: the segment is skipped."""
    from gpuroute import RoadGraph

    coords = np.array([[7.40, 43.70], [7.41, 43.70], [7.40, 43.71]])
    g = RoadGraph.from_arcs(3, [0, 1, 0, 2], [1, 0, 2, 0], {"d": [800, 800, 1100, 1100]}, coords=coords,
                            coord_system="lonlat")
    fwd01 = int(np.flatnonzero((g.tail == 0) & (g.head == 1))[0])
    rev10 = int(np.flatnonzero((g.tail == 1) & (g.head == 0))[0])
    mask = np.ones(g.n_arcs, dtype=bool)
    mask[fwd01] = False
    idx = SegmentIndex(g, component="any", arc_mask=mask)
    p = point(idx.snap(7.405, 43.7001))
    assert p.all_arcs == [(rev10, pytest.approx(0.5, abs=0.01))]
    p1 = point(idx.snap_many([(7.405, 43.7001), (7.405, 43.7001)]))  # the batched path agrees
    assert p1.all_arcs == p.all_arcs
    mask[rev10] = False
    p2 = point(SegmentIndex(g, component="any", arc_mask=mask).snap(7.405, 43.7001))
    assert {int(g.tail[a]) + int(g.head[a]) for a, _ in p2.all_arcs} == {2}  # the 0-2 segment
    with pytest.raises(ValueError, match="arc_mask"):
        SegmentIndex(g, arc_mask=np.ones(3, dtype=bool))


# ------------------------------------------------------------------------------------ table, trip
def test_table_cells_equal_routes_with_the_same_exclude(engine):
    excluded = _excluded(engine, "motorway")
    pts = [p for c, _ in _pairs_using(engine, excluded, 3, seed=21, routable="motorway") for p in c] + _random_points(engine, 2, 22)
    t = engine.table(pts, annotations=("duration", "distance"), exclude="motorway")
    plain = engine.table(pts, annotations=("duration",))
    differs = 0
    for i in range(len(pts)):
        for j in range(len(pts)):
            d, l = t["durations"][i][j], t["distances"][i][j]
            try:
                r = engine.route([pts[i], pts[j]], overview="false", exclude="motorway")["routes"][0]
            except EngineError as e:
                assert e.code == "NoRoute" and d is None, (i, j)
                continue
            assert d == pytest.approx(r["duration"], abs=0.11) and l == pytest.approx(r["distance"], abs=0.11), (i, j)
            differs += plain["durations"][i][j] is not None and d > plain["durations"][i][j] + 0.1
    assert differs >= 1


def test_trip_legs_avoid_the_excluded_class(engine):
    excluded = _excluded(engine, "motorway")
    pts = [p for c, _ in _pairs_using(engine, excluded, 2, seed=31, routable="motorway") for p in c]
    try:
        res = engine.trip(pts, annotations=["nodes"], overview="false", exclude="motorway")
    except EngineError as e:  # a point cut off without the motorway: the table says so too
        assert e.code == "NoTrips"
        t = engine.table(pts, exclude="motorway")["durations"]
        assert any(x is None for row in t for x in row)
        return
    trip = res["trips"][0]
    ids = np.asarray(engine.graph.node_ids, dtype=np.int64)
    g = engine.graph
    pair = {(int(u), int(v)): k for k, (u, v) in enumerate(zip(ids[g.tail], ids[g.head], strict=True))}
    for leg in trip["legs"]:
        n = leg["annotation"]["nodes"]
        assert not any(excluded[pair[(u, v)]] for u, v in zip(n[:-1], n[1:], strict=True))
    order = sorted(range(len(pts)), key=lambda i: res["waypoints"][i]["waypoint_index"])
    legs = [engine.route([pts[a], pts[b]], overview="false", continue_straight=False, exclude="motorway")
            ["routes"][0]["weight"] for a, b in zip(order, order[1:] + order[:1], strict=True)]
    assert trip["weight"] == pytest.approx(sum(legs), abs=0.06 * len(legs))


# ------------------------------------------------------------------------------------ isochrone
def test_isochrone_pieces_avoid_the_excluded_class(engine):
    """The pieces an isochrone draws with exclude=motorway are the oracle's on the turn graph without the
    motorway (scipy Dijkstra from the snapped origin's arcs), and none lies on a motorway arc."""
    shapely = pytest.importorskip("shapely")
    import gpuroute.engine.services.isochrone as iso
    from gpuroute.engine.services.isochrone import lattice, search

    assert shapely
    excluded = _excluded(engine, "motorway")
    ex = excluder(engine).resolve("motorway")
    g = engine.graph
    m = g.n_arcs
    mot = np.flatnonzero(excluded)
    coord = tuple(g.coords[g.tail[mot[len(mot) // 2]]].tolist())  # where a motorway starts
    base = iso.metric_of(engine, "duration")
    met = ex.isochrone_metric(base)
    origin = point(ex.segments().snap(*coord))
    cus = [300.0 / met.scale, 120.0 / met.scale]
    req = search.Request(met, engine._head, origin.arcs, cus, origin.lon, origin.lat)
    q, arc, lo, hi = lattice.pieces_cpu(iso.graph_arrays(engine), met, req)
    assert arc.size and not excluded[arc].any()
    # oracle: the base metric's allowed turns less those into motorways; labels from a spare state m
    # joined to the successors of the origin's arcs
    first, out_arc, tcost = base.turns
    c = np.asarray(base.w, dtype=np.float64)
    rows = np.repeat(np.arange(m), np.diff(np.asarray(first)))
    keep = (np.asarray(tcost) >= 0) & ~excluded[out_arc]
    rows, cols, w = rows[keep], np.asarray(out_arc)[keep], np.asarray(tcost, dtype=np.float64)[keep]
    r, cc, ww = [rows], [cols], [w]
    for a, f in origin.arcs:
        sel = rows == a
        r.append(np.full(int(sel.sum()), m))
        cc.append(cols[sel])
        ww.append(w[sel] + (1.0 - f) * c[a])
    r, cc, ww = np.concatenate(r), np.concatenate(cc), np.concatenate(ww)
    o = np.lexsort((ww, cc, r))
    r, cc, ww = r[o], cc[o], ww[o]
    first_e = np.r_[True, (r[1:] != r[:-1]) | (cc[1:] != cc[:-1])]
    assert (ww[first_e] > 0).all()
    label = dijkstra(csr_matrix((ww[first_e], (r[first_e], cc[first_e])), shape=(m + 1, m + 1)), indices=m)[:m]
    entry = label - c
    for k, C in enumerate(cus):
        want = set(np.flatnonzero(entry <= C).tolist()) | {a for a, _ in origin.arcs}
        assert set(arc[q == k].tolist()) == want, k
    assert (entry[excluded] == np.inf).all()
    res = engine.isochrone(coord, [300, 120], exclude="motorway")
    assert res["code"] == "Ok" and len(res["features"]) == 2
    assert res["waypoints"][0]["location"] == pytest.approx([round(origin.lon, 6), round(origin.lat, 6)], abs=1e-6)


# ------------------------------------------------------------------------------------ traffic and cache
@pytest.fixture
def fresh(dataset, tmp_path):
    """An engine on a copy of the dataset (its customizations are saved in its own directory)."""
    d = tmp_path / "copy"
    shutil.copytree(dataset, d)
    drop_traffic(d)
    return Engine.open(d)


def test_excluded_routes_follow_traffic_and_are_cached_per_metric(fresh):
    """The first request of a combination customizes once, the next ones hit the cache; a /customize makes
    the entry stale, the next request customizes again on the new metric and equals the oracle there; the
    overlay's own metric never sees the exclusion."""
    e = fresh
    xr = excluder(e)
    excluded = _excluded(e, "motorway")
    (c, _), = _pairs_using(e, excluded, 1, seed=41, routable="motorway")
    base_state = e.overlay._state
    r1 = e.route(c, overview="false", annotations=["nodes"], exclude="motorway")["routes"][0]
    assert xr.stats["customizations"] == 1
    assert e.route(c, overview="false", exclude="motorway")["routes"][0]["weight"] == r1["weight"]
    assert xr.stats["customizations"] == 1 and xr.stats["hits"] >= 1
    assert e.overlay._state is base_state  # not installed
    out = np.asarray(e.overlay.turns.out_arc)
    assert (np.asarray(e.overlay.turn_cost)[excluded[out]] >= 0).any()  # the live metric enters motorways
    # a jam on the middle of the excluded route
    arcs = route_arcs(e, r1)
    jam = arcs[len(arcs) // 2]
    cost = int(e.overlay.arc_cost[jam])
    e.customize([{"arc": int(jam), "cost": cost * 200}])
    r2 = e.route(c, overview="false", annotations=["nodes"], exclude="motorway")["routes"][0]
    assert xr.stats["customizations"] == 2
    index = xr.resolve("motorway").segments()
    sp = [point(index.snap(*p)) for p in c]
    want = phantom_cost(e.overlay, sp[0], sp[1], _reduced(e.overlay, excluded))
    assert r2["weight"] == pytest.approx(want * e._traffic.snapshot().scale, abs=0.051)
    assert r2["weight"] > r1["weight"]
    assert not excluded[route_arcs(e, r2)].any()


def test_the_cache_keeps_the_configured_number_of_combinations(engine, monkeypatch):
    """config.SERVE_EXCLUDE_CACHE entries: with 1, alternating combinations customize every time; with 3,
    once each."""
    pts = _random_points(engine, 2, 51)
    for keep, want in ((1, 4), (3, 2)):
        monkeypatch.setattr(config, "SERVE_EXCLUDE_CACHE", keep)
        e = Engine(engine.graph, engine.ch, overlay=engine.overlay)  # its own excluder, the same overlay
        for name in ("toll", "motorway", "toll", "motorway"):
            try:
                e.route(pts, overview="false", exclude=name)
            except EngineError as err:
                assert err.code == "NoRoute"
        assert excluder(e).stats["customizations"] == want, keep


# ------------------------------------------------------------------------------------ HTTP
def test_http_exclude_and_health(engine):
    pytest.importorskip("starlette")
    pytest.importorskip("httpx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient
    from gpuroute.server import create_app

    pts = _random_points(engine, 2, 61)
    url = "/route/v1/driving/" + ";".join(f"{x:.6f},{y:.6f}" for x, y in pts) + "?overview=false"
    with TestClient(create_app(engine)) as client:
        h = client.get("/health").json()
        assert h["exclude"]["excludable"] == [["toll"], ["motorway"], ["ferry"]]
        ok = client.get(url + "&exclude=motorway")
        assert ok.status_code == 200 and ok.json()["code"] == "Ok"
        assert ok.json()["routes"][0]["weight"] == engine.route(pts, overview="false",
                                                                 exclude="motorway")["routes"][0]["weight"]
        bad = client.get(url + "&exclude=toll,motorway")
        assert bad.status_code == 400 and bad.json()["code"] == "InvalidValue"
        assert bad.json()["message"].startswith(UNSUPPORTED)
        t = client.get("/table/v1/driving/" + ";".join(f"{x:.6f},{y:.6f}" for x, y in pts) + "?exclude=ferry")
        assert t.status_code == 200 and t.json()["code"] == "Ok"
        n = client.get(f"/nearest/v1/driving/{pts[0][0]:.6f},{pts[0][1]:.6f}?exclude=toll")
        assert n.status_code == 200 and n.json()["code"] == "Ok"
