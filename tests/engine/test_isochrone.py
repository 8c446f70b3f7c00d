"""Isochrones of the engine on the shipped Monaco extract, against an oracle: scipy Dijkstra on the
travel_time weight from the heads of the snapped origin's arcs (plus the rest of the origin's arc).
Every node reached within a contour, and every reachable piece of a partially reached arc, lies inside
the contour's polygon; road points beyond the contour and far from every reachable road lie outside;
contours nest; errors."""
import math

import numpy as np
import pytest

pytest.importorskip("osmium")
shapely = pytest.importorskip("shapely")

from scipy.sparse.csgraph import dijkstra  # noqa: E402
from shapely.geometry import shape  # noqa: E402

from gpuroute import config  # noqa: E402
from gpuroute.engine import Engine, EngineError  # noqa: E402
from gpuroute.geo import EARTH_RADIUS_M  # noqa: E402
from gpuroute.graph.road_graph import RoadGraph  # noqa: E402

#: Place du Casino, Port Hercule, Fontvieille, and a point on the Moyenne Corniche (lon, lat).
ORIGINS = [(7.4282, 43.7396), (7.4233, 43.7347), (7.4168, 43.7283), (7.4200, 43.7400)]
#: The Mediterranean, 40 km south of Monaco.
SEA = (7.43, 43.35)
#: Tolerance of "inside" in metres (rounding of the positions to 6 decimals is 0.1 m).
TOL_M = 1.0


@pytest.fixture(scope="module")
def engine():
    return Engine.open("monaco")


def local(lon, lat, lon0, lat0):
    k = math.pi / 180 * EARTH_RADIUS_M
    return np.column_stack([(np.asarray(lon) - lon0) * k * math.cos(math.radians(lat0)),
                            (np.asarray(lat) - lat0) * k])


def polygon_m(feature, lon0, lat0):
    """A feature's polygon in local metres around (lon0, lat0)."""
    geom = shape(feature["geometry"])
    return shapely.transform(geom, lambda xy: local(xy[:, 0], xy[:, 1], lon0, lat0))


def oracle(engine, coord, weight="travel_time"):
    """Cost of every node (weight units, inf unreached) from the snapped coordinate, by scipy Dijkstra from
    each usable arc's head plus the rest of that arc; and the phantom."""
    g = engine.graph
    p = engine.segments.snap(*coord)
    w = g.weight(weight).astype(np.float64)
    heads = [int(g.head[a]) for a, _ in p.arcs]
    d = dijkstra(g.to_scipy(weight), indices=heads)
    best = np.full(g.n_nodes, np.inf)
    for row, (a, fa) in zip(np.atleast_2d(d), p.arcs, strict=True):
        best = np.minimum(best, row + (1 - fa) * w[a])
    return best, p, w


def reachable_pieces(g, best, p, w, c):
    """The oracle's reachable network within cost c: (k, 2, 2) lon/lat segments."""
    tail, head = g.tail.astype(np.int64), g.head.astype(np.int64)
    dt = best[tail]
    ok = dt <= c
    a = np.flatnonzero(ok)
    f = np.where(w[a] > 0, np.minimum(1.0, (c - dt[a]) / np.where(w[a] > 0, w[a], 1)), 1.0)
    lo = np.zeros(a.size)
    extra = [(arc, fa, min(1.0, fa + c / w[arc]) if w[arc] > 0 else 1.0) for arc, fa in p.arcs]
    a = np.concatenate([a, [e[0] for e in extra]]).astype(np.int64)
    lo = np.concatenate([lo, [e[1] for e in extra]])
    hi = np.concatenate([f, [e[2] for e in extra]])
    xy0, xy1 = g.coords[tail[a]], g.coords[head[a]]
    return np.stack([xy0 + lo[:, None] * (xy1 - xy0), xy0 + hi[:, None] * (xy1 - xy0)], axis=1)


@pytest.mark.parametrize("coord", ORIGINS)
def test_reached_inside_unreached_far_roads_outside(engine, coord):
    g = engine.graph
    contours = [120.0, 300.0]
    res = engine.isochrone(coord, contours)
    assert res["code"] == "Ok" and res["type"] == "FeatureCollection"
    feats = res["features"]
    assert [f["properties"]["contour"] for f in feats] == [300.0, 120.0]
    assert all(f["properties"]["metric"] == "duration" and f["type"] == "Feature" for f in feats)
    best, p, w = oracle(engine, coord)
    lon0, lat0 = p.lon, p.lat
    assert res["waypoints"][0]["location"] == pytest.approx([lon0, lat0], abs=1e-6)
    xy = local(g.coords[:, 0], g.coords[:, 1], lon0, lat0)
    for f in feats:
        c = f["properties"]["contour"] * 10.0  # travel_time is in deciseconds
        poly = polygon_m(f, lon0, lat0).buffer(TOL_M)
        # every node reached within the contour is inside
        inside = shapely.covers(poly, shapely.points(xy[best <= c]))
        assert inside.all(), f"{(~inside).sum()} reached nodes outside the {c / 10} s contour"
        # and every reachable piece of road (partial arcs cut at the reachable fraction)
        pieces = reachable_pieces(g, best, p, w, c)
        ends = local(pieces[:, :, 0].ravel(), pieces[:, :, 1].ravel(), lon0, lat0)
        assert shapely.covers(poly, shapely.points(ends)).all()
        # nodes beyond contour + 30 s and farther than the band from every reachable road lie outside
        net = shapely.multilinestrings(shapely.linestrings(
            local(pieces[:, :, 0].ravel(), pieces[:, :, 1].ravel(), lon0, lat0).reshape(-1, 2, 2)))
        far = np.flatnonzero(best > c + 300)
        pts = shapely.points(xy[far])
        away = shapely.distance(net, pts) > config.SERVE_ISOCHRONE_BUFFER_M + 10.0
        assert away.sum() > 20
        out = ~shapely.covers(polygon_m(f, lon0, lat0), pts[away])
        assert out.mean() >= 0.9, f"only {out.mean():.0%} of far unreached nodes outside the {c / 10} s contour"


def test_contours_nest_and_options(engine):
    coord = ORIGINS[0]
    res = engine.isochrone(coord, [60, 600, 180, 300], colors=["ff0000", "#00FF00", "0000ff", "aaaaaa"])
    feats = res["features"]
    assert [f["properties"]["contour"] for f in feats] == [600, 300, 180, 60]
    assert [f["properties"]["color"] for f in feats] == ["#00ff00", "#aaaaaa", "#0000ff", "#ff0000"]
    polys = [shape(f["geometry"]) for f in feats]
    assert all(p.is_valid and p.area > 0 for p in polys)
    for big, small in zip(polys, polys[1:], strict=False):
        assert big.buffer(3e-6).covers(small) and big.area > small.area  # 6-decimal snap-rounding
    # rings as lines: the same rings
    lines = engine.isochrone(coord, [300], polygons=False)["features"][0]["geometry"]
    poly = engine.isochrone(coord, [300])["features"][0]["geometry"]
    assert lines["type"] in ("LineString", "MultiLineString")
    rings = [lines["coordinates"]] if lines["type"] == "LineString" else lines["coordinates"]
    want = poly["coordinates"] if poly["type"] == "Polygon" else [r for p in poly["coordinates"] for r in p]
    assert sorted(map(len, rings)) == sorted(map(len, want))
    # generalize: fewer vertices, same area roughly; denoise 0 keeps every part
    fine = shape(engine.isochrone(coord, [300], generalize=0)["features"][0]["geometry"])
    coarse = shape(engine.isochrone(coord, [300], generalize=20)["features"][0]["geometry"])
    assert shapely.get_num_coordinates(coarse) < shapely.get_num_coordinates(fine)
    assert coarse.area == pytest.approx(fine.area, rel=0.05)
    assert engine.isochrone(coord, 300, denoise=0)["features"][0]["geometry"]["type"] in ("Polygon", "MultiPolygon")


def test_distance_metric(engine):
    coord = ORIGINS[1]
    res = engine.isochrone(coord, [500, 1500], metric="distance")
    g = engine.graph
    best, p, _ = oracle(engine, coord, weight="distance")
    xy = local(g.coords[:, 0], g.coords[:, 1], p.lon, p.lat)
    for f in res["features"]:
        assert f["properties"]["metric"] == "distance"
        poly = polygon_m(f, p.lon, p.lat).buffer(TOL_M)
        assert shapely.covers(poly, shapely.points(xy[best <= f["properties"]["contour"]])).all()
    # a time-only graph has no length weight to search: the error says so
    tt = RoadGraph(g.first_out, g.head, {"travel_time": g.weight("travel_time")},
                   units={"travel_time": g.units["travel_time"]}, coords=g.coords, name="time-only")
    e2 = Engine(tt, engine.ch, segments=engine.segments)
    with pytest.raises(EngineError) as ei:
        e2.isochrone(coord, [500], metric="distance")
    assert ei.value.code == "InvalidOptions" and "length weight" in ei.value.message
    assert e2.isochrone(coord, [60])["features"][0]["geometry"]["type"] == "Polygon"


@pytest.mark.parametrize("kwargs, code", [
    ({"contours": []}, "InvalidOptions"),
    ({"contours": "5"}, "InvalidOptions"),
    ({"contours": [0]}, "InvalidValue"),
    ({"contours": [-60]}, "InvalidValue"),
    ({"contours": [float("nan")]}, "InvalidValue"),
    ({"contours": [60, 120, 180, 240, 300]}, "TooBig"),
    ({"contours": [7201]}, "TooBig"),
    ({"contours": [200_000], "metric": "distance"}, "TooBig"),
    ({"contours": [60], "metric": "speed"}, "InvalidOptions"),
    ({"contours": [60], "polygons": "yes"}, "InvalidOptions"),
    ({"contours": [60], "denoise": 2}, "InvalidOptions"),
    ({"contours": [60], "generalize": -1}, "InvalidOptions"),
    ({"contours": [60], "colors": ["red"]}, "InvalidOptions"),
    ({"contours": [60, 120], "colors": ["ff0000"]}, "InvalidOptions"),
    ({"contours": [60], "coord": (7.43, 95.0)}, "InvalidValue"),
    ({"contours": [60], "coord": SEA, "radiuses": [1000]}, "NoSegment"),
])
def test_errors(engine, kwargs, code):
    kwargs = dict(kwargs)
    coord = kwargs.pop("coord", ORIGINS[0])
    contours = kwargs.pop("contours")
    with pytest.raises(EngineError) as ei:
        engine.isochrone(coord, contours, **kwargs)
    assert ei.value.code == code and ei.value.message
