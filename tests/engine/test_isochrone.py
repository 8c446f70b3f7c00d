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

from phantoms import point  # noqa: E402
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
    p = point(engine.segments.snap(*coord))
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


# ----------------------------------------------------------------------------------- the pipeline's parts
# (gpuroute.engine.services.isochrone: search, lattice and field, rings, checks, the GEOS path, the GPU twin)
import gpuroute.engine.services.isochrone as iso  # noqa: E402
from gpuroute.backend import gpu_available  # noqa: E402
from gpuroute.engine.services.isochrone import lattice, polygons, search  # noqa: E402


def request(engine, coord, contours_s, metric="duration"):
    """The engine's metric and the Request of an isochrone (contours in seconds, largest first)."""
    met = iso.metric_of(engine, metric)
    origin = point(engine.segments.snap(*coord))
    cus = sorted((c / met.scale for c in contours_s), reverse=True)
    return met, search.Request(met, engine._head, origin.arcs, cus, origin.lon, origin.lat), origin


def lattice_and_marks(engine, met, req):
    """What codes_cpu computes, with the marks kept: (codes, marked, lattice)."""
    fo, head, tail, lon, lat = iso.graph_arrays(engine)
    nodes, dist = search.search_cpu(met, req)
    args = (nodes, dist, fo, head, lon, lat, met.w, req.o_arc, req.o_frac, tail[req.o_arc], head[req.o_arc], req.cus,
            req.lon0, req.lat0, req.kx, req.ky)
    K = req.cus.size
    L = lattice.lattice(lattice.extent_cpu(args, K))
    marked = np.zeros((K, L.H, L.W), dtype=np.uint8)
    lattice.mark_cpu(args, L, marked)
    codes = np.empty_like(marked)
    lattice.field_cpu(marked, L, codes)
    return codes, marked, L


@pytest.mark.parametrize("bounded", [True, False])
def test_search_bounded_dijkstra_and_phast_fallback(engine, bounded, monkeypatch):
    """Node costs from the origin's heads: the bounded Dijkstra, and (a cap of 0 settled nodes) the
    hierarchy's bounded PHAST it hands over to, both equal scipy's Dijkstra with the bound."""
    monkeypatch.setattr(config, "SERVE_ISOCHRONE_DIJKSTRA_MIN_NODES", 10**9 if bounded else 0)
    monkeypatch.setattr(config, "SERVE_ISOCHRONE_DIJKSTRA_FRACTION", 1.0 if bounded else 0.0)
    g = engine.graph
    for coord, c in zip(ORIGINS, (60, 200, 400, 900), strict=True):
        met, req, _ = request(engine, coord, [c])
        nodes, cost = search.search_cpu(met, req)
        want = {}
        for s, b, off in zip(req.heads, req.bounds, req.offs, strict=True):
            d = dijkstra(g.to_scipy(met.name), indices=s)
            for v in np.flatnonzero(d <= b):
                want[int(v)] = min(want.get(int(v), math.inf), float(d[v]) + off)
        assert len(req.heads) >= 1 and len(want) > 1
        assert dict(zip(nodes.tolist(), cost.tolist(), strict=True)) == want


@pytest.mark.parametrize("threads", [1, 3])
def test_field_codes_are_the_distance_transform_of_the_marks(engine, threads, monkeypatch):
    """The field codes of every contour: the squared lattice distance to the nearest marked point within
    reach (scipy's exact Euclidean distance transform of the contour's window), FAR beyond, raised to
    the next larger contour's; the marks are the pieces' samples (every reached node's lattice cell).
    In the request's thread, and in bands of rows on the worker threads (3 parts)."""
    from scipy.ndimage import distance_transform_edt

    monkeypatch.setattr(config, "SERVE_ISOCHRONE_LATTICE_THREADS", threads)
    monkeypatch.setattr(config, "SERVE_ISOCHRONE_PARALLEL_WORK", 0)
    g = engine.graph
    for coord in ORIGINS[:2]:
        met, req, origin = request(engine, coord, [120, 300])
        codes, marked, L = lattice_and_marks(engine, met, req)
        prev = None
        for q in range(req.cus.size):
            x0, y0, x1, y1 = L.windows[q]
            want = np.full((L.H, L.W), lattice.FAR, dtype=np.int64)
            d = distance_transform_edt(marked[q, y0:y1, x0:x1] == 0)
            d2 = np.rint(d * d).astype(np.int64)
            want[y0:y1, x0:x1] = np.where(np.sqrt(d2) * L.cell <= L.reach, d2, lattice.FAR)
            if prev is not None:
                want = np.maximum(want, prev)
            np.testing.assert_array_equal(codes[q], want)
            prev = want
        # every node reached within the largest contour has a marked lattice cell
        best, _, _ = oracle(engine, coord)
        reached = np.flatnonzero(best <= req.cus[0])
        x, y = local(g.coords[reached, 0], g.coords[reached, 1], origin.lon, origin.lat).T
        ix = np.floor(x / L.cell).astype(int) - L.i0
        iy = np.floor(y / L.cell).astype(int) - L.j0
        assert marked[0][iy, ix].mean() > 0.99  # (a node exactly on a cell border may fall in its neighbour)


@pytest.mark.parametrize("threads", [2, 3, 5])
def test_lattice_parts_on_threads_equal_one_thread(engine, threads, monkeypatch):
    """The extent, marks and field codes computed in parts on the worker threads equal those of the
    request's thread alone (1 to 4 contours, a coarse lattice too)."""
    for cells in (int(config.SERVE_ISOCHRONE_MAX_CELLS), 3000):
        monkeypatch.setattr(config, "SERVE_ISOCHRONE_MAX_CELLS", cells)
        for coord, contours in zip(ORIGINS, ([300], [60, 600], [30, 120, 300], [60, 180, 420, 900]), strict=True):
            met, req, _ = request(engine, coord, contours)
            monkeypatch.setattr(config, "SERVE_ISOCHRONE_LATTICE_THREADS", 1)
            args, tail = lattice.piece_args(iso.graph_arrays(engine), met, req)
            ext1 = lattice.extent_cpu(args, req.cus.size, tail)
            codes1, marked1, l1 = lattice_and_marks(engine, met, req)
            want, lw = lattice.codes_cpu(iso.graph_arrays(engine), met, req)
            want = want.copy()
            monkeypatch.setattr(config, "SERVE_ISOCHRONE_LATTICE_THREADS", threads)
            monkeypatch.setattr(config, "SERVE_ISOCHRONE_PARALLEL_WORK", 0)
            assert lattice._parts(args[0].size + args[7].size, 0) != [(0, args[0].size + args[7].size)]
            np.testing.assert_array_equal(lattice.extent_cpu(args, req.cus.size, tail), ext1)
            codes, marked, L = lattice_and_marks(engine, met, req)
            np.testing.assert_array_equal(marked, marked1)
            np.testing.assert_array_equal(codes, codes1)
            got, lg = lattice.codes_cpu(iso.graph_arrays(engine), met, req)
            assert (lg.W, lg.H, lg.i0, lg.j0, lg.cell) == (lw.W, lw.H, lw.i0, lw.j0, lw.cell)
            np.testing.assert_array_equal(got, want)
            monkeypatch.setattr(config, "SERVE_ISOCHRONE_PARALLEL_WORK", 20000)


def test_isochrone_in_a_forked_child_after_the_parent_used_the_worker_threads(engine, monkeypatch):
    """A served worker is a fork of a parent that ran the warm-up (isochrones of two contours: the nesting
    check on a worker thread). The child must get worker threads of its own: before, the parent's pool
    (its threads gone in the child) took the check's job and never ran it, and the isochrone hung. On the
    CPU, as forked workers serve (a forked child cannot use its parent's CUDA context)."""
    import os
    import signal

    monkeypatch.setattr(config, "SERVE_ISOCHRONE_DEVICE", "cpu")
    want = engine.isochrone(ORIGINS[0], [60, 300])  # the parent's pool starts its threads
    pid = os.fork()
    if pid == 0:  # the child: answer within 60 s, equal to the parent's answer
        code = 1
        try:
            signal.alarm(60)
            code = 0 if engine.isochrone(ORIGINS[0], [60, 300]) == want else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"child status {status}"


def test_rings_hold_exactly_the_inside_lattice_points(engine, monkeypatch):
    """Without hole filling, part dropping and simplification, the traced rings of each contour make
    valid polygons containing exactly the lattice points whose code is inside (marching squares' level
    set of the field), holes and islands included."""
    monkeypatch.setattr(config, "SERVE_ISOCHRONE_MAX_HOLE_M2", 0.0)
    for coord in ORIGINS[:3]:
        met, req, origin = request(engine, coord, [90, 300])
        codes, _, L = lattice_and_marks(engine, met, req)
        layers = polygons.rings_of(codes, L, req.cus.size, 0.0, 0.0, origin.lon, origin.lat)
        for q, (xy, idx, rpoly) in enumerate(layers.metres):
            polys = shapely.polygons(shapely.linearrings(xy, indices=idx), indices=rpoly)
            geom = shapely.multipolygons(polys)
            assert shapely.is_valid(geom), shapely.is_valid_reason(geom)
            yy, xx = np.mgrid[0:L.H, 0:L.W]
            pts = shapely.points((xx.ravel() + L.i0 + 0.5) * L.cell, (yy.ravel() + L.j0 + 0.5) * L.cell)
            inside = shapely.contains_xy(geom, *shapely.get_coordinates(pts).T)
            np.testing.assert_array_equal(inside, codes[q].ravel() <= L.kin)


def test_holes_filled_parts_dropped_vertices_within_tolerance(engine):
    """Default options: one polygon per contour (denoise 1), every hole at least the hole limit (up to
    the simplification), every vertex of the unsimplified rings within ``generalize`` of the answer's
    boundary (Douglas-Peucker's tolerance, plus the rounding)."""
    for coord in ORIGINS:
        met, req, origin = request(engine, coord, [120, 300])
        codes, _, L = lattice_and_marks(engine, met, req)
        gen = float(config.SERVE_ISOCHRONE_GENERALIZE_M)
        layers = polygons.rings_of(codes, L, 2, 1.0, gen, origin.lon, origin.lat)
        assert layers.ok, polygons.CHECKS[layers.why]
        for q, (xy, _, rpoly) in enumerate(layers.metres):
            assert rpoly.max() == 0  # one polygon
            poly = polygon_m({"geometry": polygons.geojson_fast(layers, q, True)}, origin.lon, origin.lat)
            assert poly.geom_type == "Polygon" and poly.is_valid
            assert all(shapely.Polygon(h).area >= config.SERVE_ISOCHRONE_MAX_HOLE_M2 * 0.9 for h in poly.interiors)
            d = shapely.distance(poly.boundary, shapely.points(xy))
            assert d.max() <= gen + 0.2


def _rings(poly, layer):
    """Rings of a shapely (Multi)Polygon, shells counter-clockwise then their holes clockwise."""
    out = []
    for p in shapely.get_parts(poly):
        p = shapely.orient_polygons(p) if hasattr(shapely, "orient_polygons") else shapely.geometry.polygon.orient(p)
        out.append((np.asarray(p.exterior.coords)[:-1], True, layer))
        out.extend((np.asarray(h.coords)[:-1], False, layer) for h in p.interiors)
    return out


def _layers(rings):
    """The arrays _check takes, from [(xy, shell, layer)] (holes after their shell)."""
    xs, ys, roff, lay, shell, kpar = [], [], [0], [], [], []
    last_shell = -1
    for r, (xy, sh, la) in enumerate(rings):
        xs.append(xy[:, 0])
        ys.append(xy[:, 1])
        roff.append(roff[-1] + len(xy))
        lay.append(la)
        shell.append(sh)
        if sh:
            last_shell = r
        kpar.append(-1 if sh else last_shell)
    n = roff[-1]
    return (np.concatenate(xs), np.concatenate(ys), np.asarray(roff, dtype=np.int64), np.asarray(lay, dtype=np.int64),
            np.asarray(shell), np.asarray(kpar, dtype=np.int64), np.zeros(n, dtype=bool), np.zeros(n, dtype=bool))


def test_check_is_sound_on_random_polygons():
    """Whenever the fast path's check passes a configuration, GEOS agrees: each contour valid (mode 1),
    each inside the next larger (mode 2); on random unions of buffered segments (holes, several parts)
    with a vertex moved at random (which often makes them invalid or not nested)."""
    rng = np.random.default_rng(7)
    fails = np.empty((64, 2), dtype=np.int64)
    passed = {1: 0, 2: 0}
    refused = {1: 0, 2: 0}
    invalid = 0
    for _ in range(150):
        lines = [shapely.LineString(rng.uniform(0, 1, (3, 2))) for _ in range(rng.integers(1, 4))]
        big = shapely.union_all([ln.buffer(rng.uniform(0.03, 0.08), quad_segs=2) for ln in lines])
        small = shapely.intersection(big, shapely.Point(rng.uniform(0.2, 0.8, 2)).buffer(0.3, quad_segs=3)).buffer(
            -0.01, quad_segs=1)
        rings = _rings(big, 0) + (_rings(small, 1) if not small.is_empty else [])
        if rng.random() < 0.7:  # move one vertex
            k = int(rng.integers(len(rings)))
            xy = rings[k][0].copy()
            xy[int(rng.integers(len(xy)))] += rng.normal(0, 0.05, 2)
            rings[k] = (xy, rings[k][1], rings[k][2])
        arrs = _layers(rings)
        geoms = []
        for la in (0, 1):
            polys, cur = [], None
            for xy, sh, l2 in rings:
                if l2 != la:
                    continue
                if sh:
                    cur = [xy]
                    polys.append(cur)
                else:
                    cur.append(xy)
            geoms.append(shapely.MultiPolygon([(p[0], p[1:]) for p in polys]) if polys else None)
        invalid += any(g is not None and not shapely.is_valid(g) for g in geoms)
        for mode in (1, 2):
            code = polygons._check(*arrs, mode, 1e-12, fails)
            if code % 16 != 0:
                refused[mode] += 1
                continue
            passed[mode] += 1
            if mode == 1:
                assert all(g is None or shapely.is_valid(g) for g in geoms), [shapely.is_valid_reason(g) for g in geoms]
            elif geoms[1] is not None and shapely.is_valid(geoms[0]) and shapely.is_valid(geoms[1]):
                assert geoms[0].buffer(1e-9).covers(geoms[1])
    assert min(passed.values()) > 20 and invalid > 5 and refused[1] >= invalid, (passed, refused, invalid)


def test_geos_path_when_the_check_refuses(engine, monkeypatch):
    """Where the check is not sure, GEOS draws the same rings as before: still valid, nested, every
    reached node inside, about the same area as the fast path's."""
    coord = ORIGINS[0]
    fast = engine.isochrone(coord, [120, 300])
    monkeypatch.setattr(polygons, "_check", lambda *a: 8)  # "a ring not inside the rings it should be"
    slow = engine.isochrone(coord, [120, 300])
    best, p, _ = oracle(engine, coord)
    g = engine.graph
    xy = local(g.coords[:, 0], g.coords[:, 1], p.lon, p.lat)
    polys = []
    for f, h in zip(fast["features"], slow["features"], strict=True):
        a, b = shape(f["geometry"]), shape(h["geometry"])
        assert a.is_valid and b.is_valid
        assert b.area == pytest.approx(a.area, rel=0.03)
        c = f["properties"]["contour"] * 10.0
        poly = polygon_m(h, p.lon, p.lat).buffer(TOL_M)
        assert shapely.covers(poly, shapely.points(xy[best <= c])).all()
        polys.append(b)
    assert polys[0].buffer(3e-6).covers(polys[1])


def test_coordinates_as_arrays_write_the_same_json(engine):
    """``coordinates="arrays"``: one float64 (k, 2) array per ring, the same JSON through orjson."""
    orjson = pytest.importorskip("orjson")
    for kw in ({}, {"polygons": False}, {"denoise": 0.0}):
        a = engine.isochrone(ORIGINS[1], [120, 300], **kw)
        b = engine.isochrone(ORIGINS[1], [120, 300], coordinates="arrays", **kw)
        kind, geom = b["features"][0]["geometry"]["type"], b["features"][0]["geometry"]["coordinates"]
        ring = {"LineString": geom, "MultiPolygon": geom[0][0]}.get(kind, geom[0])
        assert isinstance(ring, np.ndarray) and ring.dtype == np.float64 and ring.shape[1] == 2
        assert orjson.dumps(a) == orjson.dumps(b, option=orjson.OPT_SERIALIZE_NUMPY)
    with pytest.raises(EngineError) as ei:
        engine.isochrone(ORIGINS[1], [120], coordinates="tuples")
    assert ei.value.code == "InvalidOptions"


def test_lattice_coarsens_with_the_contour_size(monkeypatch):
    """Cells of ``SERVE_ISOCHRONE_CELL_M`` (default half the band) for small contours; past
    ``SERVE_ISOCHRONE_MAX_CELLS`` cells the cells grow (and the band with them) so the lattice stays
    about that size."""
    monkeypatch.setattr(config, "SERVE_ISOCHRONE_MAX_CELLS", 40000)
    r = float(config.SERVE_ISOCHRONE_BUFFER_M)
    small = lattice.lattice(np.array([[-300.0, -200.0, 400.0, 250.0]]))
    assert small.cell == 0.5 * r and small.r == r
    big = lattice.lattice(np.array([[-9000.0, -7000.0, 8000.0, 6000.0], [-100.0, -100.0, 100.0, 100.0]]))
    assert big.cell > 0.5 * r and big.r == max(r, big.cell)
    assert big.W * big.H <= 1.15 * 40000  # (plus the band around the largest contour)
    assert big.windows[1, 2] - big.windows[1, 0] < big.W / 10  # the small contour's window is its own


# ----------------------------------------------------------------------------------- GPU twin
@pytest.mark.parametrize("cells", [int(config.SERVE_ISOCHRONE_MAX_CELLS), 20000])
@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")
def test_gpu_codes_equal_the_cpu_twin(engine, cells, monkeypatch):
    """The GPU's lattice and field codes (PHAST rows on the device, extent, marks, two passes) equal the
    numba twin's bit for bit, for 1 to 4 contours, coarse lattices and small blocks included."""
    monkeypatch.setattr(config, "SERVE_ISOCHRONE_MAX_CELLS", cells)
    monkeypatch.setattr(config, "SERVE_ISOCHRONE_GPU_THREADS", 64)
    met = iso.metric_of(engine, "duration")
    gpu = lattice.IsochroneGPU(iso.graph_arrays(engine), met)
    for coord, contours in zip(ORIGINS, ([300], [60, 600], [30, 120, 300], [60, 180, 420, 900]), strict=True):
        _, req, _ = request(engine, coord, contours)
        want, lw = lattice.codes_cpu(iso.graph_arrays(engine), met, req)
        want = want.copy()
        got, lg = gpu.codes(req)
        assert (lg.cell, lg.i0, lg.j0, lg.W, lg.H) == (lw.cell, lw.i0, lw.j0, lw.W, lw.H)
        np.testing.assert_array_equal(lg.windows, lw.windows)
        np.testing.assert_array_equal(got, want)


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")
def test_gpu_isochrone_equals_cpu(engine, monkeypatch):
    """Engine.isochrone on the GPU answers exactly as on the CPU (both metrics, all options)."""
    for kw in ({}, {"metric": "distance"}, {"polygons": False, "denoise": 0.0, "generalize": 0.0}):
        cont = [500, 1500] if kw.get("metric") == "distance" else [120, 300]
        monkeypatch.setattr(config, "SERVE_ISOCHRONE_DEVICE", "cpu")
        a = engine.isochrone(ORIGINS[2], cont, **kw)
        monkeypatch.setattr(config, "SERVE_ISOCHRONE_DEVICE", "gpu")
        b = engine.isochrone(ORIGINS[2], cont, **kw)
        assert a == b
