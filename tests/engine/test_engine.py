"""The OSRM-compatible engine on the shipped Monaco extract: route durations against a Dijkstra oracle
with partial arcs computed here, tables against routes, every OSRM field, geometries, errors; and a
hand-made graph for exact partial-arc arithmetic and unreachable pairs."""
import json
import math
import threading

import numpy as np
import pytest

pytest.importorskip("osmium")
polyline = pytest.importorskip("polyline")

from scipy.sparse.csgraph import dijkstra  # noqa: E402

from gpuroute.ch.api import ContractionHierarchy  # noqa: E402
from gpuroute.engine import ERROR_CODES, Engine, EngineError  # noqa: E402
from gpuroute.geo import EARTH_RADIUS_M  # noqa: E402
from gpuroute.geo.segments import SegmentIndex  # noqa: E402
from gpuroute.geo.snap import largest_scc_mask  # noqa: E402
from gpuroute.graph.road_graph import RoadGraph  # noqa: E402

MODIFIERS = {"uturn", "sharp right", "right", "slight right", "straight", "slight left", "left", "sharp left"}
TYPES = {"depart", "arrive", "turn", "new name", "continue"}


@pytest.fixture(scope="module")
def engine():
    return Engine.open("monaco")


@pytest.fixture(scope="module")
def g(engine):
    return engine.graph


def points(g, k, seed, jitter_m=40.0):
    rng = np.random.default_rng(seed)
    m = largest_scc_mask(g)
    nodes = rng.choice(np.flatnonzero(m), k)
    j = jitter_m / 111_000
    return [(float(g.coords[v, 0] + rng.uniform(-j, j) / math.cos(math.radians(43.73))),
             float(g.coords[v, 1] + rng.uniform(-j, j))) for v in nodes]


def brute_phantom(g, lon, lat):
    """The usable (arc, fraction along the arc) pairs of the nearest segment of the largest component,
    by projecting onto every arc (independent of gpuroute.geo.segments)."""
    m = largest_scc_mask(g)
    arcs = np.flatnonzero(m[g.tail] & m[g.head])
    c = g.coords
    k = math.pi / 180 * EARTH_RADIUS_M
    ax, ay = (c[g.tail[arcs], 0] - lon) * k * math.cos(math.radians(lat)), (c[g.tail[arcs], 1] - lat) * k
    bx, by = (c[g.head[arcs], 0] - lon) * k * math.cos(math.radians(lat)), (c[g.head[arcs], 1] - lat) * k
    dx, dy = bx - ax, by - ay
    ll = np.where(dx * dx + dy * dy > 0, dx * dx + dy * dy, 1.0)
    t = np.clip(-(ax * dx + ay * dy) / ll, 0, 1)
    d = np.hypot(ax + t * dx, ay + t * dy)
    i = int(np.argmin(d))
    u, v = int(g.tail[arcs[i]]), int(g.head[arcs[i]])
    out = [(int(arcs[i]), float(t[i]))]
    back = [j for j in range(arcs.size) if g.tail[arcs[j]] == v and g.head[arcs[j]] == u]
    out += [(int(arcs[j]), 1.0 - float(t[i])) for j in back]
    return out


def oracle_ds(g, src, dst):
    """Fastest source -> target cost in deciseconds: scipy Dijkstra between the arcs' ends plus partial
    arcs, and the same-arc case."""
    w = g.weight("travel_time").astype(np.float64)
    a_nodes = sorted({int(g.head[a]) for a, _ in src})
    dist = dijkstra(g.to_scipy("travel_time"), indices=a_nodes)
    best = math.inf
    for a, fa in src:
        row = dist[a_nodes.index(int(g.head[a]))]
        for b, fb in dst:
            best = min(best, (1 - fa) * w[a] + row[g.tail[b]] + fb * w[b])
            if a == b and fa <= fb:
                best = min(best, (fb - fa) * w[a])
    return best


# ---------------------------------------------------------------- exactness
def test_route_duration_equals_the_oracle(engine, g):
    pts = points(g, 40, 11)
    for s, t in zip(pts[::2], pts[1::2], strict=True):
        r = engine.route([s, t], overview="false")
        want = oracle_ds(g, brute_phantom(g, *s), brute_phantom(g, *t)) / 10
        assert r["routes"][0]["duration"] == pytest.approx(want, abs=0.051)
        assert r["routes"][0]["weight"] == r["routes"][0]["duration"]


def test_table_equals_routes(engine, g):
    pts = points(g, 6, 12)
    tb = engine.table(pts, annotations=["duration", "distance"])
    assert len(tb["durations"]) == 6 and all(len(row) == 6 for row in tb["durations"])
    for i in range(6):
        assert tb["durations"][i][i] == 0.0 and tb["distances"][i][i] == 0.0
        for j in range(6):
            if i != j:
                r = engine.route([pts[i], pts[j]], overview="false")["routes"][0]
                assert tb["durations"][i][j] == pytest.approx(r["duration"], abs=0.051)
                assert tb["distances"][i][j] == pytest.approx(r["distance"], abs=0.051)
    sub = engine.table(pts, sources=[1, 4], destinations=[0, 5, 2])
    assert [[sub["durations"][a][b] for b in range(3)] for a in range(2)] == \
        [[tb["durations"][i][j] for j in (0, 5, 2)] for i in (1, 4)]
    assert "distances" not in sub and len(sub["sources"]) == 2 and len(sub["destinations"]) == 3
    scaled = engine.table(pts[:3], scale_factor=2)
    assert np.allclose(scaled["durations"], 2 * np.array(tb["durations"])[:3, :3], atol=0.11)


def test_table_at_junctions_equals_the_oracle(engine, g):
    """Coordinates exactly on junction nodes snap to every arc there (ties): the options the table drops
    as dominated must not change a duration."""
    rng = np.random.default_rng(5)
    deg = np.diff(g.first_out)
    nodes = rng.choice(np.flatnonzero(deg >= 3), 8, replace=False)
    pts = [tuple(map(float, g.coords[v])) for v in nodes]
    tb = engine.table(pts)
    for i in range(len(pts)):
        for j in range(len(pts)):
            want = oracle_ds(g, brute_phantom(g, *pts[i]), brute_phantom(g, *pts[j])) / 10 if i != j else 0.0
            assert tb["durations"][i][j] == pytest.approx(want, abs=0.051), (i, j)


def test_via_waypoints(engine, g):
    a, b, c = points(g, 3, 13)
    legs = [engine.route([a, b], overview="false")["routes"][0], engine.route([b, c], overview="false")["routes"][0]]
    free = engine.route([a, b, c], continue_straight=False, overview="false")["routes"][0]
    straight = engine.route([a, b, c], overview="false")["routes"][0]
    assert len(free["legs"]) == 2
    # U-turns allowed at b: each leg is its own fastest route
    assert free["duration"] == pytest.approx(legs[0]["duration"] + legs[1]["duration"], abs=0.11)
    assert straight["duration"] >= free["duration"] - 0.11
    for rt in (free, straight):
        assert rt["duration"] == pytest.approx(sum(leg["duration"] for leg in rt["legs"]), abs=0.11)


# ---------------------------------------------------------------- a hand-made graph
@pytest.fixture(scope="module")
def tiny():
    """A two-way street 0-1-2 due east (about 80.5 m a step at 43.7 N) with a one-way 2 -> 3 further
    east, and a separate two-way street 4-5 two kilometres north (unreachable)."""
    lon = [7.400, 7.401, 7.402, 7.403, 7.400, 7.401]
    lat = [43.7, 43.7, 43.7, 43.7, 43.718, 43.718]
    tail = [0, 1, 1, 2, 2, 4, 5]
    head = [1, 0, 2, 1, 3, 5, 4]
    tt = [100, 100, 200, 200, 50, 100, 100]
    gr = RoadGraph.from_arcs(6, tail, head, {"travel_time": tt, "distance": [80] * 7},
                             units={"travel_time": "ds", "distance": "m"}, coords=np.column_stack([lon, lat]),
                             node_ids=np.arange(100, 106), name="tiny",
                             meta={"way_names": ["Rue A", "Rue B"]},
                             arc_attrs={"name_id": np.array([0, 0, 0, 0, 1, -1, -1], dtype=np.int32)})
    ch = ContractionHierarchy.build(gr, "travel_time", method="sequential", progress=False)
    return Engine(gr, ch, segments=SegmentIndex(gr, component="any"))


def test_partial_arcs_exact(tiny):
    step = 7.401 - 7.400
    # 30 % along 0 -> 1 to 50 % along 1 -> 2: 0.7 x 10 s + 0.5 x 20 s
    r = tiny.route([(7.400 + 0.3 * step, 43.7001), (7.401 + 0.5 * step, 43.7001)], steps=True)
    rt = r["routes"][0]
    assert rt["duration"] == pytest.approx(17.0)
    assert rt["legs"][0]["summary"] == "Rue A"
    assert r["waypoints"][0]["name"] == "Rue A"
    # the same arc, target ahead: 40 % of 10 s; target behind: turn around on the two-way street
    assert tiny.route([(7.4002, 43.7), (7.4006, 43.7)])["routes"][0]["duration"] == pytest.approx(4.0)
    assert tiny.route([(7.4006, 43.7), (7.4002, 43.7)])["routes"][0]["duration"] == pytest.approx(4.0)
    # the one-way 2 -> 3: from 80 % back to 20 % there is no way (the street ends at 3)
    with pytest.raises(EngineError) as ei:
        tiny.route([(7.4028, 43.7), (7.4022, 43.7)])
    assert ei.value.code == "NoRoute"
    # onto the one-way: 20 % along 1 -> 2 (0.8 x 20 s), then half of 2 -> 3 (0.5 x 5 s)
    r = tiny.route([(7.4012, 43.7), (7.4025, 43.7)], steps=True)
    assert r["routes"][0]["duration"] == pytest.approx(18.5)
    steps = r["routes"][0]["legs"][0]["steps"]
    assert [s["maneuver"]["type"] for s in steps] == ["depart", "new name", "arrive"]
    assert [s["name"] for s in steps] == ["Rue A", "Rue B", "Rue B"]
    assert steps[0]["maneuver"]["bearing_after"] == 90 and steps[1]["maneuver"]["modifier"] == "straight"


def test_unreachable_and_fallback(tiny):
    a, b = (7.4005, 43.7), (7.4005, 43.718)
    with pytest.raises(EngineError) as ei:
        tiny.route([a, b])
    assert ei.value.code == "NoRoute"
    tb = tiny.table([a, b], annotations="duration,distance")
    assert tb["durations"] == [[0.0, None], [None, 0.0]] and tb["distances"][0][1] is None
    fb = tiny.table([a, b], fallback_speed=10)
    assert fb["durations"][0][1] == pytest.approx(0.018 * math.pi / 180 * EARTH_RADIUS_M / 10, abs=0.1)
    assert fb["fallback_speed_cells"] == [[0, 1], [1, 0]]
    json.dumps(tb, allow_nan=False)


# ---------------------------------------------------------------- OSRM shapes
def test_route_fields(engine, g):
    a, b, c = points(g, 3, 14)
    r = engine.route([a, b, c], steps=True, annotations=True, overview="full")
    json.dumps(r, allow_nan=False)
    assert r["code"] == "Ok" and len(r["routes"]) == 1 and len(r["waypoints"]) == 3
    rt = r["routes"][0]
    assert {"geometry", "legs", "weight_name", "weight", "duration", "distance"} <= set(rt)
    assert isinstance(rt["geometry"], str) and rt["weight_name"] == "travel_time"
    for wp in r["waypoints"]:
        assert set(wp) == {"hint", "distance", "name", "location"}
        assert isinstance(wp["hint"], str) and isinstance(wp["name"], str) and wp["distance"] >= 0
        assert len(wp["location"]) == 2 and all(isinstance(x, float) for x in wp["location"])
    osm_ids = set(g.node_ids.tolist())
    for leg in rt["legs"]:
        assert {"steps", "summary", "weight", "duration", "distance", "annotation"} <= set(leg)
        assert isinstance(leg["summary"], str)
        ann = leg["annotation"]
        n = len(ann["distance"])
        assert len(ann["duration"]) == len(ann["speed"]) == len(ann["weight"]) == len(ann["datasources"]) == n
        assert len(ann["nodes"]) == n + 1 and set(ann["nodes"]) <= osm_ids
        assert sum(ann["distance"]) == pytest.approx(leg["distance"], abs=0.06)
        assert sum(ann["duration"]) == pytest.approx(leg["duration"], abs=0.05 * n + 0.06)
        steps = leg["steps"]
        assert steps[0]["maneuver"]["type"] == "depart" and steps[-1]["maneuver"]["type"] == "arrive"
        assert sum(s["distance"] for s in steps) == pytest.approx(leg["distance"], abs=0.05 * len(steps) + 0.06)
        for s in steps:
            assert {"geometry", "maneuver", "mode", "name", "intersections", "weight", "duration",
                    "distance", "driving_side"} <= set(s)
            m = s["maneuver"]
            assert m["type"] in TYPES and m.get("modifier", "straight") in MODIFIERS
            assert all(isinstance(m[k], int) and 0 <= m[k] < 360 for k in ("bearing_before", "bearing_after"))
            assert s["mode"] == "driving" and len(m["location"]) == 2
            inter = s["intersections"][0]
            assert inter["location"] == m["location"]
            assert len(inter["bearings"]) == len(inter["entry"]) and inter["bearings"] == sorted(inter["bearings"])
            if m["type"] not in ("depart", "arrive"):
                assert inter["bearings"][inter["out"]] == pytest.approx(m["bearing_after"], abs=1)
                assert inter["entry"][inter["out"]]
    # the full overview is the legs' geometries end to end; steps' geometries cover the leg
    full = polyline.decode(rt["geometry"], 5, geojson=True)
    steps_pts = []
    for leg in rt["legs"]:
        for s in leg["steps"][:-1]:
            p = polyline.decode(s["geometry"], 5, geojson=True)
            steps_pts += p if not steps_pts else p[1:]
    assert steps_pts == full


def test_geometries_decode_to_the_route(engine, g):
    a, b = points(g, 2, 15)
    gj = engine.route([a, b], geometries="geojson", overview="full")["routes"][0]["geometry"]
    assert gj["type"] == "LineString"
    pts = np.array(gj["coordinates"])
    wp = engine.route([a, b])["waypoints"]
    assert pts[0].tolist() == wp[0]["location"] and pts[-1].tolist() == wp[1]["location"]
    for geom, prec in (("polyline", 5), ("polyline6", 6)):
        enc = engine.route([a, b], geometries=geom, overview="full")["routes"][0]["geometry"]
        dec = np.array(polyline.decode(enc, prec, geojson=True))
        # both round: the polyline to 10^-prec, the GeoJSON positions to 10^-6
        assert dec.shape == pts.shape and np.abs(dec - pts).max() <= 0.5 * 10.0 ** -prec + 0.5e-6 + 1e-9
    simp = np.array(engine.route([a, b], geometries="geojson")["routes"][0]["geometry"]["coordinates"])
    assert 2 <= len(simp) <= len(pts) and simp[0].tolist() == pts[0].tolist() and simp[-1].tolist() == pts[-1].tolist()
    assert all(any((q == p).all() for p in pts) for q in simp)  # a subset of the full line
    assert "geometry" not in engine.route([a, b], overview="false")["routes"][0]
    assert "geometry" not in engine.route([a, b], overview=False)["routes"][0]


def test_table_and_nearest_fields(engine, g):
    pts = points(g, 3, 16)
    tb = engine.table(pts)
    json.dumps(tb, allow_nan=False)
    assert set(tb) == {"code", "durations", "sources", "destinations"}
    assert all(isinstance(x, float) for row in tb["durations"] for x in row)
    nr = engine.nearest(pts[0], number=3)
    assert nr["code"] == "Ok" and len(nr["waypoints"]) == 3
    d = [w["distance"] for w in nr["waypoints"]]
    assert d == sorted(d)
    for w in nr["waypoints"]:
        assert set(w) == {"nodes", "hint", "distance", "name", "location"}
        assert set(w["nodes"]) <= set(g.node_ids.tolist())
    assert nr["waypoints"][0]["location"] == tb["sources"][0]["location"]
    assert engine.nearest(pts[0], radiuses=[None], bearings=[(0, 180)], approaches=["curb"])["code"] == "Ok"


def test_nearest_sees_small_components_routes_do_not(engine, g):
    """OSRM's nearest snaps to every segment, small strongly connected components included; routes and
    tables snap to the largest component (a point on a small component's segment: nearest at 0 m there,
    the table's waypoint elsewhere, farther)."""
    m = largest_scc_mask(g)
    small = np.flatnonzero(~m[g.tail] & ~m[g.head] & (g.tail != g.head))
    assert small.size, "Monaco has arcs outside the largest component"
    c = g.coords
    lens = np.hypot(c[g.head[small], 0] - c[g.tail[small], 0], c[g.head[small], 1] - c[g.tail[small], 1])
    a = int(small[np.argmax(lens)])
    pt = (float((c[g.tail[a], 0] + c[g.head[a], 0]) / 2), float((c[g.tail[a], 1] + c[g.head[a], 1]) / 2))
    near = engine.nearest(pt)["waypoints"][0]
    assert near["distance"] < 0.5
    ids = {int(g.node_ids[g.tail[a]]), int(g.node_ids[g.head[a]])}
    assert set(near["nodes"]) == ids
    tb = engine.table([pt, pt])["sources"][0]
    assert tb["distance"] > near["distance"] and tb["location"] != near["location"]


def test_names_reach_the_waypoints(engine, g):
    assert g.meta["way_names"] and "name_id" in g.arc_attrs
    names = [w["name"] for w in engine.table(points(g, 12, 17))["sources"]]
    assert sum(bool(n) for n in names) >= 6


# ---------------------------------------------------------------- errors
def codes(fn, *args, **kw):
    with pytest.raises(EngineError) as ei:
        fn(*args, **kw)
    assert ei.value.code in ERROR_CODES and ei.value.message
    assert ei.value.to_json() == {"code": ei.value.code, "message": ei.value.message}
    return ei.value.code


def test_error_codes(engine, g, monkeypatch):
    a, b = points(g, 2, 18)
    sea = (7.4246, 43.7270)
    assert codes(engine.route, [a]) == "InvalidOptions"
    assert codes(engine.route, [a, (181.0, 0.0)]) == "InvalidValue"
    assert codes(engine.route, [a, ("x", 1)]) == "InvalidValue"
    assert codes(engine.route, [a, b], geometries="wkt") == "InvalidOptions"
    assert codes(engine.route, [a, b], overview="some") == "InvalidOptions"
    assert codes(engine.route, [a, b], annotations=["duration", "colour"]) == "InvalidOptions"
    assert codes(engine.route, [a, b], radiuses=[10]) == "InvalidOptions"
    assert codes(engine.route, [a, b], bearings=[(10, 400), None]) == "InvalidOptions"
    assert codes(engine.route, [a, b], approaches=["opposite", None]) == "InvalidOptions"
    assert codes(engine.route, [a, sea], radiuses=[None, 20]) == "NoSegment"
    assert "coordinate 1" in pytest.raises(EngineError, engine.route, [a, sea], radiuses=[None, 20]).value.message
    monkeypatch.setitem(engine.limits, "max_locations_route", 3)
    assert codes(engine.route, [a, b, a, b]) == "TooBig"
    monkeypatch.setitem(engine.limits, "max_locations_table", 4)
    assert codes(engine.table, [a, b, a]) == "TooBig"
    assert engine.table([a, b, a], sources=[0], destinations=[1, 2])["code"] == "Ok"
    # an index outside the coordinates: InvalidOptions, as osrm-routed and the HTTP server (one check:
    # gpuroute.engine.params)
    assert codes(engine.table, [a, b], sources=[2]) == "InvalidOptions"
    assert codes(engine.table, [a, b], destinations=[-1]) == "InvalidOptions"
    assert codes(engine.table, [a, b], fallback_speed=0) == "InvalidValue"
    assert codes(engine.table, [a, b], annotations=["speed"]) == "InvalidOptions"
    assert codes(engine.nearest, a, number=0) == "InvalidOptions"
    assert codes(engine.nearest, a, number=101) == "TooBig"
    assert codes(engine.nearest, sea, radiuses=[20]) == "NoSegment"
    with pytest.raises(ValueError):
        EngineError("Oops", "not an OSRM code")


def test_concurrent_requests_agree(engine, g):
    pts = points(g, 16, 19)
    pairs = list(zip(pts[::2], pts[1::2], strict=True))
    want = [engine.route(list(p), overview="false")["routes"][0]["duration"] for p in pairs]
    got = [None] * len(pairs)

    table = engine.table(pts)["durations"]
    tables = []

    def work(k):
        for i in range(k, len(pairs), 4):
            got[i] = engine.route(list(pairs[i]), overview="false")["routes"][0]["duration"]
        tables.append(engine.table(pts)["durations"])

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == want
    assert tables == [table] * 4
