"""``avoid_polygons`` / ``avoid_ways`` (:mod:`gpuroute.engine.avoid`) on the shipped Monaco built with OSRM's
car.lua: routes, tables and trips avoid every arc whose segment meets the polygon and every arc of the
ways, combined with ``exclude=``; bad input is ``InvalidValue`` naming the field, over HTTP a 400.

Oracles: the avoided arcs by brute force (shapely's vectorised ``intersects`` of the polygon with every
arc's segment; the way ids read from the arc attribute), the turn-aware Dijkstra (``tests/turn_oracle.py``)
on the overlay's current turn graph without the turns into those arcs, between the phantoms of a segment
index built on the arcs that are left."""
from __future__ import annotations

import json
import warnings
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pytest

pytest.importorskip("osmium")
pytest.importorskip("lupa", reason="lupa (pip install 'gpuroute[lua]') runs OSRM's Lua profiles")
shapely = pytest.importorskip("shapely")

from phantoms import point  # noqa: E402
from turn_oracle import phantom_cost, route_arcs, turn_graph  # noqa: E402

from gpuroute import config  # noqa: E402
from gpuroute.engine import Engine, EngineError  # noqa: E402
from gpuroute.engine.exclude import excluder  # noqa: E402
from gpuroute.geo.segments import SegmentIndex  # noqa: E402

MONACO = Path(__file__).resolve().parents[2] / "src" / "gpuroute" / "datasets" / "data" / "monaco.osm.pbf"
#: Two points across Monaco whose plain route runs through the town (the pairs below are derived from it).
PAIRS = [[(7.4186, 43.7307), (7.4265, 43.7402)], [(7.4130, 43.7310), (7.4230, 43.7370)],
         [(7.4200, 43.7330), (7.4290, 43.7420)]]


@pytest.fixture(scope="module")
def engine(monaco_car_dir):
    return Engine.open(monaco_car_dir)  # the session's Monaco with OSRM's car.lua (tests/conftest.py)


def _box(x, y, d=0.0003):
    return {"type": "Polygon", "coordinates": [[[x - d, y - d], [x + d, y - d], [x + d, y + d], [x - d, y + d],
                                                [x - d, y - d]]]}


def _inside(e, geojson):
    """Brute force: the arcs whose segment intersects the polygon (every arc, vectorised)."""
    g = e.graph
    c = np.asarray(g.coords, dtype=np.float64)
    lines = shapely.linestrings(np.stack([c[g.tail], c[g.head]], axis=1))
    return np.asarray(shapely.intersects(shapely.geometry.shape(geojson), lines), dtype=bool)


def _around_mid_arc(e, route):
    """A small box around the middle arc of a one-leg route (annotated with nodes)."""
    arcs = route_arcs(e, route)
    mid = arcs[len(arcs) // 2]
    c = e.graph.coords
    x, y = (c[e.graph.tail[mid]] + c[e.graph.head[mid]]) / 2
    return _box(float(x), float(y)), mid


def _oracle(e, pts, excluded):
    """The turn-aware optimum (in the route's weight unit) without the excluded arcs, between the phantoms
    of an index of the arcs left (the engine's component); inf when none."""
    ov = e.overlay
    rows, cols, w, c = turn_graph(ov)
    keep = ~excluded[cols]
    index = SegmentIndex(e.graph, component=e.segments.component, arc_mask=~excluded)
    sp = [point(index.snap(*p)) for p in pts]
    return phantom_cost(ov, sp[0], sp[1], (rows[keep], cols[keep], w[keep], c)) * e._traffic.snapshot().scale


def _check_route(e, pts, excluded, **kw):
    r = e.route(pts, overview="false", annotations=["nodes"], **kw)["routes"][0]
    assert not excluded[route_arcs(e, r)].any(), (pts, kw)
    assert r["weight"] == pytest.approx(_oracle(e, pts, excluded), abs=0.051), (pts, kw)
    return r


# ------------------------------------------------------------------------------------ routes
@pytest.mark.parametrize("k", range(len(PAIRS)))
def test_a_polygon_around_a_street_of_the_route_is_avoided(engine, k):
    """The box around the plain route's middle arc: no arc meeting the box is used, and the weight is the
    oracle's without those arcs (and above the plain one)."""
    pts = PAIRS[k]
    plain = engine.route(pts, overview="false", annotations=["nodes"])["routes"][0]
    poly, mid = _around_mid_arc(engine, plain)
    inside = _inside(engine, poly)
    assert inside[mid] and inside.sum() >= 2
    r = _check_route(engine, pts, inside, avoid_polygons=poly)
    assert r["weight"] > plain["weight"]
    # a shapely geometry is the same request
    r2 = engine.route(pts, overview="false", annotations=["nodes"],
                      avoid_polygons=shapely.geometry.shape(poly))["routes"][0]
    assert r2["weight"] == r["weight"]


def test_a_multipolygon_avoids_both_parts(engine):
    e, pts = engine, PAIRS[0]
    plain = e.route(pts, overview="false", annotations=["nodes"])["routes"][0]
    a, _ = _around_mid_arc(e, plain)
    first = e.route(pts, overview="false", annotations=["nodes"], avoid_polygons=a)["routes"][0]
    b, _ = _around_mid_arc(e, first)
    multi = {"type": "MultiPolygon", "coordinates": [a["coordinates"], b["coordinates"]]}
    inside = _inside(e, a) | _inside(e, b)
    assert (inside & ~_inside(e, a)).any()
    _check_route(e, pts, inside, avoid_polygons=multi)


def test_avoid_ways_leaves_out_every_arc_of_the_way(engine):
    e, pts = engine, PAIRS[1]
    plain = e.route(pts, overview="false", annotations=["nodes"])["routes"][0]
    way_of = np.asarray(e.graph.arc_attrs["way_id"], dtype=np.int64)
    used = way_of[route_arcs(e, plain)]
    wid = int(used[len(used) // 2])
    r = _check_route(e, pts, way_of == wid, avoid_ways=[wid])
    assert wid not in set(way_of[route_arcs(e, r)].tolist())


def test_avoid_combines_with_exclude(engine):
    """exclude=motorway and a box on that route's middle street: the union of both is avoided."""
    e, pts = engine, PAIRS[2]
    motorway = (np.asarray(e.graph.arc_attrs["classes"], dtype=np.int64)
                & (1 << list(e.graph.meta["classes"]).index("motorway"))) != 0
    r1 = e.route(pts, overview="false", annotations=["nodes"], exclude="motorway")["routes"][0]
    poly, _ = _around_mid_arc(e, r1)
    way_of = np.asarray(e.graph.arc_attrs["way_id"], dtype=np.int64)
    wid = int(way_of[route_arcs(e, r1)[0]])
    union = motorway | _inside(e, poly) | (way_of == wid)
    r = _check_route(e, pts, union, exclude="motorway", avoid_polygons=poly, avoid_ways=[wid])
    assert r["weight"] >= r1["weight"]


def test_the_same_avoid_is_customized_once(engine):
    """A small LRU keyed by the avoided-arc set: the same box twice (written with its vertices in another
    order) customizes once; an avoid covering no arc customizes nothing."""
    e = Engine(engine.graph, engine.ch, overlay=engine.overlay)  # its own excluder, the same overlay
    pts = PAIRS[0]
    plain = e.route(pts, overview="false", annotations=["nodes"])["routes"][0]
    poly, _ = _around_mid_arc(e, plain)
    e.route(pts, overview="false", avoid_polygons=poly)
    ring = poly["coordinates"][0]
    again = {"type": "Polygon", "coordinates": [ring[2:-1] + ring[:3]]}
    e.route(pts, overview="false", avoid_polygons=again)
    e.route(pts, overview="false", avoid_polygons=_box(0.0, 0.0))  # the sea off Africa
    assert excluder(e).stats["customizations"] == 1


# ------------------------------------------------------------------------------------ table, trip
def test_table_cells_equal_routes_with_the_same_avoid(engine):
    e = engine
    plain = e.route(PAIRS[0], overview="false", annotations=["nodes"])["routes"][0]
    poly, _ = _around_mid_arc(e, plain)
    pts = PAIRS[0] + PAIRS[2]
    t = e.table(pts, annotations=("duration", "distance"), avoid_polygons=poly)
    for i in range(len(pts)):
        for j in range(len(pts)):
            r = e.route([pts[i], pts[j]], overview="false", avoid_polygons=poly)["routes"][0]
            assert t["durations"][i][j] == pytest.approx(r["duration"], abs=0.11), (i, j)
            assert t["distances"][i][j] == pytest.approx(r["distance"], abs=0.11), (i, j)
    assert t["durations"][0][1] > e.table(pts[:2])["durations"][0][1]


def test_trip_legs_avoid_the_ways(engine):
    e = engine
    plain = e.route(PAIRS[1], overview="false", annotations=["nodes"])["routes"][0]
    way_of = np.asarray(e.graph.arc_attrs["way_id"], dtype=np.int64)
    used = way_of[route_arcs(e, plain)]
    wid = int(used[len(used) // 2])
    t = e.trip(PAIRS[1] + PAIRS[2][:1], overview="false", annotations=["nodes"], avoid_ways=[wid])
    for leg in t["trips"][0]["legs"]:
        arcs = route_arcs(e, {"legs": [leg]})
        assert wid not in set(way_of[arcs].tolist())


def test_isochrone_takes_the_avoid(engine):
    """A ring (a polygon with a hole) around the origin: every road crossing it is avoided, so a 10-minute
    isochrone stays inside the hole (up to its band and cell, under 100 m), while without the avoid it
    reaches far past the ring."""
    o = PAIRS[0][0]
    outer, hole = _box(*o, 0.004)["coordinates"][0], _box(*o, 0.0015)["coordinates"][0]
    ring = {"type": "Polygon", "coordinates": [outer, hole[::-1]]}
    inner = shapely.Polygon(hole)
    a = shapely.geometry.shape(engine.isochrone(o, [600])["features"][0]["geometry"])
    b = shapely.geometry.shape(engine.isochrone(o, [600], avoid_polygons=ring)["features"][0]["geometry"])
    assert not a.within(shapely.Polygon(outer))
    assert b.area > 0 and b.within(inner.buffer(0.001))


# ------------------------------------------------------------------------------------ errors
@pytest.mark.parametrize("value, why", [
    ({"type": "Point", "coordinates": [7.42, 43.73]}, "expected Polygon"),
    ({"type": "Polygon", "coordinates": [[[7.41, 43.73], [7.42, 43.74], [7.42, 43.73], [7.41, 43.74],
                                          [7.41, 43.73]]]}, "not valid (Self-intersection"),
    ({"type": "Polygon", "coordinates": [[[7.41, 43.73], [7.42, 43.74], [7.42, 43.73]]]}, "at least 4"),
    ({"type": "Polygon", "coordinates": [[[7.41, 43.73], [7.42, 43.74], [7.42, 43.73], [7.41, 43.74]]]},
     "not closed"),
    ({"type": "Polygon", "coordinates": [[[7.41, 93], [7.42, 43.74], [7.42, 43.73], [7.41, 93]]]}, "lon/lat"),
    ({"type": "Polygon", "coordinates": [[["a", 1]]]}, "not a position"),
    ("POLYGON((0 0, 1 0, 1 1, 0 0))", "expected a GeoJSON"),
])
def test_bad_polygons_are_invalid_value(engine, value, why):
    for call in (lambda: engine.route(PAIRS[0], avoid_polygons=value),
                 lambda: engine.table(PAIRS[0], avoid_polygons=value)):
        with pytest.raises(EngineError) as ei:
            call()
        assert ei.value.code == "InvalidValue" and ei.value.message.startswith("avoid_polygons: ")
        assert why in ei.value.message


def test_limits_and_unknown_ways(engine, monkeypatch):
    monkeypatch.setattr(config, "SERVE_AVOID_MAX_VERTICES", 4)
    with pytest.raises(EngineError, match="avoid_polygons: 5 positions, over the limit of 4"):
        engine.route(PAIRS[0], avoid_polygons=_box(7.42, 43.73))
    monkeypatch.setattr(config, "SERVE_AVOID_MAX_POLYGONS", 1)
    multi = {"type": "MultiPolygon", "coordinates": [_box(7.42, 43.73)["coordinates"]] * 2}
    with pytest.raises(EngineError, match="avoid_polygons: 2 polygons, over the limit of 1"):
        engine.isochrone(PAIRS[0][0], [1], avoid_polygons=multi)
    monkeypatch.setattr(config, "SERVE_AVOID_MAX_WAYS", 2)
    way = int(engine.graph.arc_attrs["way_id"][0])
    with pytest.raises(EngineError, match="avoid_ways: 3 way ids, over the limit of 2"):
        engine.trip(PAIRS[0], avoid_ways=[way] * 3)
    with pytest.raises(EngineError, match="avoid_ways: way 1 is not in the graph") as ei:
        engine.route(PAIRS[0], avoid_ways=[way, 1])
    assert ei.value.code == "InvalidValue"


# ------------------------------------------------------------------------------------ HTTP
def test_http_avoid(engine, monkeypatch):
    pytest.importorskip("starlette")
    pytest.importorskip("httpx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient
    from gpuroute.server import create_app

    pts = PAIRS[0]
    plain = engine.route(pts, overview="false", annotations=["nodes"])["routes"][0]
    poly, _ = _around_mid_arc(engine, plain)
    way = int(engine.graph.arc_attrs["way_id"][route_arcs(engine, plain)[0]])
    want = engine.route(pts, overview="false", avoid_polygons=poly, avoid_ways=[way])["routes"][0]["weight"]
    loc = ";".join(f"{x},{y}" for x, y in pts)
    url = f"/route/v1/driving/{loc}?overview=false"
    bowtie = {"type": "Polygon", "coordinates": [[[7.41, 43.73], [7.42, 43.74], [7.42, 43.73], [7.41, 43.74],
                                                  [7.41, 43.73]]]}
    with TestClient(create_app(engine)) as client:
        ok = client.get(url + "&avoid_polygons=" + quote(json.dumps(poly)) + f"&avoid_ways={way}")
        assert ok.status_code == 200, ok.text
        assert ok.json()["routes"][0]["weight"] == want
        post = client.post(f"/route/v1/driving/{loc}", json={"overview": "false", "avoid_polygons": poly,
                                                             "avoid_ways": [way]})
        assert post.status_code == 200, post.text
        assert post.json()["routes"][0]["weight"] == want
        t = client.post(f"/table/v1/driving/{loc}", json={"avoid_polygons": json.dumps(poly)})
        assert t.status_code == 200 and t.json()["code"] == "Ok"
        monkeypatch.setattr(config, "SERVE_AVOID_MAX_VERTICES", 4)
        for q in ("{not json", "null", "[1,2]", quote(json.dumps(bowtie)), quote(json.dumps(poly))):
            bad = client.get(url + "&avoid_polygons=" + q)
            assert bad.status_code == 400 and bad.json()["code"] == "InvalidValue", (q, bad.text)
            assert bad.json()["message"].startswith("avoid_polygons: "), bad.json()
        bad = client.post(f"/trip/v1/driving/{loc}", json={"avoid_polygons": {"type": "LineString"}})
        assert bad.status_code == 400 and "avoid_polygons" in bad.json()["message"]
        for v in ("x1", "1"):
            bad = client.get(url + "&avoid_ways=" + v)
            assert bad.status_code == 400 and bad.json()["code"] == "InvalidValue"
            assert bad.json()["message"].startswith("avoid_ways: ")
        nearest = client.get(f"/nearest/v1/driving/{pts[0][0]},{pts[0][1]}?avoid_ways={way}")
        assert nearest.status_code == 400 and nearest.json()["code"] == "InvalidOptions"
