"""The short request path (issue 20): routes, tables and snapping built from arrays by compiled passes give
exactly what the general code gave, field by field and byte by byte.

Oracles: NumPy's own ``ndarray.sum`` and Python's ``round`` for the sums and roundings the answers are written
with; the ``polyline`` package for geometries; ``SegmentIndex.snap`` one coordinate at a time for batch
snapping (both steps of the batch: coordinates on a road and far from one); and a reference route builder
written the general way (one NumPy call per quantity, a Python loop per piece and per step: the engine's code
before the short path) for whole ``/route`` answers, on random graphs with and without turn costs, over the
overlay (a weight metric and a time metric) and over the hierarchy.
"""
from __future__ import annotations

import math

import numpy as np
import orjson
import polyline
import pytest
from crp_oracle import with_restrictions
from naive import random_road_graph
from phantoms import points as phantom_points

from gpuroute import ContractionHierarchy, Overlay, Partition, RoadGraph, Unit, config
from gpuroute.engine import Engine, EngineError
from gpuroute.engine.algorithms import CH
from gpuroute.engine.legs import _npsum_range, npsum, round_floats
from gpuroute.engine.osrm import (
    encode_geometries,
    encode_geometry,
    encode_polyline,
    make_hint,
    modifier,
    round1,
    simplify,
    turn_delta,
)
from gpuroute.geo.segments import SNAP_TIE_M, PhantomSet, local_xy


# ------------------------------------------------------------------------------------ sums and rounding
@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 15, 16, 17, 127, 128, 129, 255, 256, 257, 1000, 8191, 8193, 20011])
def test_npsum_is_numpys_sum_bit_for_bit(n):
    rng = np.random.default_rng(n)
    for a in (rng.random(n) * 10.0 ** rng.uniform(-3, 6, n), np.round(rng.random(n) * 1e3, 1), -rng.random(n)):
        assert np.float64(npsum(a)).tobytes() == a.sum().tobytes()
        if n > 4:
            lo, hi = 1, n - 3
            assert np.float64(_npsum_range(a, lo, hi)).tobytes() == a[lo:hi].sum().tobytes()


@pytest.mark.parametrize("digits", [1, 6])
def test_round_floats_is_pythons_round(digits):
    rng = np.random.default_rng(digits)
    k = rng.integers(-10 ** 7, 10 ** 7, 20000)
    half = (k + 0.5) / 10.0 ** digits  # halfway cases and their neighbours, where rint(x * 10**d) can miss
    cases = [half, half + np.spacing(half), half - np.spacing(half), rng.random(20000) * 10.0 ** rng.uniform(-7, 7, 20000),
             rng.integers(0, 10 ** 6, 20000) / 20.0, np.array([0.0, -0.0, 1.15, 2.675, 0.05, 5e-324, 1e300, -1e300,
                                                               math.inf, -math.inf])]
    for x in cases:
        for part in (x, x[:5]):  # large lists (arrays) and small ones (round itself)
            want = [round(float(v), digits) for v in part]
            got = round_floats(part, digits)
            assert [repr(v) for v in got] == [repr(v) for v in want]
    assert math.isnan(round_floats([math.nan] * 30, 1)[0])


def test_polylines_are_the_polyline_packages():
    rng = np.random.default_rng(3)
    for k in (1, 2, 5, 40):
        pts = np.column_stack([rng.uniform(-180, 180, k), rng.uniform(-90, 90, k)])
        pts[: k // 2] = np.round(pts[: k // 2] * 2e5) / 2e5  # on the half-grid of precision 5
        for prec, name in ((5, "polyline"), (6, "polyline6")):
            assert encode_polyline(pts, prec) == polyline.encode([(y, x) for x, y in pts], prec)
            starts = [0, 0, 1, k - 1]
            ends = [k, 1, k, k]
            assert encode_geometries(pts, starts, ends, name) == [encode_geometry(pts[a:b], name)
                                                                 for a, b in zip(starts, ends, strict=True)]
    assert encode_geometries(pts, [0, 1], [2, 3], "geojson") == [encode_geometry(pts[0:2], "geojson"),
                                                                 encode_geometry(pts[1:3], "geojson")]


# ------------------------------------------------------------------------------------------ engines
def _graph(seed, turn_costs, weight_scale=0.1):
    """A random road graph with street names (and, with ``turn_costs``, a Lua profile's per-turn costs and a
    weight that is not a time, of ``weight_scale``), its restrictions."""
    from gpuroute.graph.turn_costs import TurnCosts, n_turns_of

    rng = np.random.default_rng(seed)
    g0, _ = random_road_graph(rng, 90, one_way=0.25)
    g0 = with_restrictions(g0, rng, 10)
    names = [f"street {i}" for i in range(12)]
    attrs = dict(g0.arc_attrs, name_id=rng.integers(-1, len(names), g0.n_arcs))
    meta = dict(g0.meta, way_names=names)
    if not turn_costs:
        return RoadGraph(g0.first_out, g0.head, g0.weights, units=g0.units, coords=g0.coords, name="named",
                         turns=g0.turns, arc_attrs=attrs, meta=meta)
    T = n_turns_of(g0.first_out, g0.head)
    dur = rng.integers(0, 40, T)
    dur[rng.random(T) < 0.1] = -1  # closed by the profile
    weight = np.where(dur < 0, -1, dur + rng.integers(0, 20, T))
    weights = dict(g0.weights, weight=g0.weight("travel_time") + rng.integers(0, 30, g0.n_arcs))
    units = dict(g0.units, weight=Unit(f"routability/{round(1 / weight_scale)}", "other", weight_scale))
    return RoadGraph(g0.first_out, g0.head, weights, units=units, coords=g0.coords, name="profiled", turns=g0.turns,
                     arc_attrs=attrs, meta=meta, turn_costs=TurnCosts(dur, weight, meta={"weight_name": "routability"}))


@pytest.fixture(scope="module", params=["overlay-weight", "overlay-time", "overlay-distance", "hierarchy-turns",
                                        "hierarchy"])
def engine(request):
    from gpuroute.pipeline.customize import profile_metric

    kind = request.param
    g = _graph(11, turn_costs=kind != "hierarchy", weight_scale=0.01 if kind == "overlay-distance" else 0.1)
    ch = ContractionHierarchy.build(g, "travel_time" if kind == "hierarchy" else "weight", progress=False)
    if not kind.startswith("overlay"):
        return Engine(g, ch)
    ov = Overlay.build(g, Partition.build(g, cell_sizes=(8, 32), seed=1))
    ov.customize(profile_metric(g, "weight", turns=ov.turns))
    e = Engine(g, ch, overlay=ov)
    if kind == "overlay-time":
        e.customize(metric="duration")
        assert e._traffic.snapshot().is_time
    if kind == "overlay-distance":  # decimetres against the engine's routability/100: weights rescaled
        e.customize(metric="distance")
        snap = e._traffic.snapshot()
        assert not snap.is_time and snap.scale != e._w_scale
    return e


def _points(e, rng, k):
    """``k`` snappable coordinates: inside random segments, at their end nodes (snapping ties at junctions),
    and a few metres off a road."""
    s = e.segments
    seg = rng.integers(0, s.n_segments, k)
    f = rng.uniform(0.05, 0.95, k)
    kind = rng.integers(0, 4, k)
    f = np.where(kind == 0, 0.0, np.where(kind == 1, 1.0, f))
    lon = s.lon_u[seg] + f * (s.lon_v[seg] - s.lon_u[seg]) + (kind == 2) * rng.normal(0, 2e-5, k)
    lat = s.lat_u[seg] + f * (s.lat_v[seg] - s.lat_u[seg]) + (kind == 2) * rng.normal(0, 2e-5, k)
    return [(float(x), float(y)) for x, y in zip(np.round(lon, 6), np.round(lat, 6), strict=True)]


# ------------------------------------------------------------------------- the reference route builder
def _point_of(p, arc):
    """The snapped (lon, lat) of the segment (the point's own or a tie's) one of whose options is ``arc``."""
    for q in (p, *p.ties):
        if any(a == arc for a, _ in q.arcs):
            return q.lon, q.lat
    raise KeyError(arc)


def _ref_name(e, arc):
    k = int(e._name_id[arc])
    return e._names[k] if 0 <= k < len(e._names) else ""


def _ref_waypoint(e, p):
    """An OSRM waypoint written out: hint, distance, name and location rounded by Python's ``round``."""
    return {"hint": make_hint(p.segment, p.fraction, e._fingerprint), "distance": round(p.distance, 6),
            "name": e.segments.name_of(p.name_id), "location": [round(p.lon, 6), round(p.lat, 6)]}


def _ref_leg(e, pa, pb, dep, arr, path, snap):
    (a, fa), (b, fb) = dep, arr
    start, end = _point_of(pa, a), _point_of(pb, b)
    if path is None:
        arcs, frac, pts = np.array([a], dtype=np.int64), np.array([fb - fa]), np.array([start, end])
    else:
        mid = np.asarray(path.arcs, dtype=np.int64)
        arcs = np.concatenate([[a], mid, [b]]).astype(np.int64)
        frac = np.concatenate([[1.0 - fa], np.ones(mid.size), [fb]])
        pts = np.concatenate([[start], e.graph.coords[np.asarray(path.nodes, dtype=np.int64)], [end]])
    keep = frac > 0
    if not keep.any():
        keep[0] = True
    if not keep.all():
        last = pts[-1].copy()
        pts = np.concatenate([pts[:1], pts[1:][keep]])
        pts[-1] = last
        arcs, frac = arcs[keep], frac[keep]
    leg = {"arcs": arcs, "frac": frac, "points": pts, "weight": frac * e._w[arcs],
           "duration": frac * e._dur[arcs] if e._dur is not None else None, "distance": frac * e._len[arcs]}
    if snap is not None:
        raw = frac * snap.cost[arcs]
        leg["weight"] = raw * (snap.scale / e._w_scale)
        if snap.is_time:
            leg["duration"] = raw * snap.scale
    leg["turn_duration"] = leg["turn_weight"] = 0.0
    if e._tc is not None and path is not None:
        seq = np.concatenate([[a], np.asarray(path.arcs, dtype=np.int64), [b]]).astype(np.int64)
        x, y = seq[:-1], seq[1:]
        t = e._t_first[x] + y - e._fo[e._head[x]]
        d = e._tc.duration[t].astype(np.float64)
        w = e._tc.weight[t].astype(np.float64)
        if snap is not None:
            part = snap.turn_cost[t].astype(np.float64) - snap.cost[y]
            w = part * (snap.scale / e._w_scale)
            if snap.is_time:
                d = None
                leg["turn_duration"] = float(np.maximum(part, 0).sum() * snap.scale)
        if d is not None:
            leg["turn_duration"] = float(np.maximum(d, 0).sum() * 0.1)
        leg["turn_weight"] = float(np.maximum(w, 0).sum())
    return leg


def _ref_summary(e, leg):
    nid = e._name_id[leg["arcs"]]
    named = nid >= 0
    if not named.any():
        return ""
    ids, first, inv = np.unique(nid[named], return_index=True, return_inverse=True)
    length = np.bincount(inv, weights=leg["distance"][named], minlength=ids.size)
    top = np.argsort(-length, kind="stable")[:2]
    top = top[np.argsort(first[top])]
    return ", ".join(e._names[int(ids[t])] for t in top)


def _ref_geometry(pts, geometries):
    pts = np.asarray(pts, dtype=np.float64).reshape(-1, 2)
    if geometries == "geojson":
        return {"type": "LineString", "coordinates": np.round(pts, 6).tolist()}
    return polyline.encode([(y, x) for x, y in pts.tolist()], 6 if geometries == "polyline6" else 5)


def _ref_intersection(e, node, prev_node, next_node, location):
    g = e.graph
    fo, rfo = g.first_out, g.rev_first_out
    outs = set(e._head[fo[node]:fo[node + 1]].tolist())
    nb = outs | set(g.rev_tail[rfo[node]:rfo[node + 1]].tolist())
    c = g.coords
    x0, y0 = float(c[node, 0]), float(c[node, 1])
    k = math.cos(math.radians(y0))
    streets = sorted((int(round(math.degrees(math.atan2((float(c[v, 0]) - x0) * k, float(c[v, 1]) - y0)))) % 360, v)
                     for v in nb)
    order = [v for _, v in streets]
    return {"location": location, "bearings": [b for b, _ in streets], "entry": [v in outs for v in order],
            "in": order.index(prev_node), "out": order.index(next_node)}


def _ref_steps(e, leg, end, geometries):
    arcs, pts = leg["arcs"], leg["points"]
    head, tail = e._head, e._tail
    bearing = e._bearing[arcs]
    nid = e._name_id[arcs]
    loc = [[round(float(p[0]), 6), round(float(p[1]), 6)] for p in pts]
    starts, kinds = [0], [("depart", None)]
    for j in range(1, arcs.size):
        mod = modifier(turn_delta(bearing[j - 1], bearing[j]))
        x = int(tail[arcs[j]])
        uturn = int(head[arcs[j]]) == int(tail[arcs[j - 1]])
        if uturn:
            mod = "uturn"
        if nid[j] != nid[j - 1]:
            kinds.append(("new name" if mod == "straight" else "turn", mod))
            starts.append(j)
        elif uturn or (e._degree[x] >= 3 and mod not in ("straight", "slight left", "slight right")):
            kinds.append(("continue", mod))
            starts.append(j)
    steps = []
    bounds = starts + [arcs.size]
    for s, (typ, mod) in enumerate(kinds):
        j0, j1 = bounds[s], bounds[s + 1]
        b_after = int(round(float(bearing[j0]))) % 360
        if typ == "depart":
            b_before = 0
            inter = [{"location": loc[0], "bearings": [b_after], "entry": [True], "out": 0}]
        else:
            b_before = int(round(float(bearing[j0 - 1]))) % 360
            inter = [_ref_intersection(e, int(tail[arcs[j0]]), int(tail[arcs[j0 - 1]]), int(head[arcs[j0]]), loc[j0])]
        for j in range(j0 + 1, j1):
            x = int(tail[arcs[j]])
            if e._degree[x] >= 3:
                inter.append(_ref_intersection(e, x, int(tail[arcs[j - 1]]), int(head[arcs[j]]), loc[j]))
        man = {"bearing_after": b_after, "bearing_before": b_before, "location": loc[j0], "type": typ}
        if mod is not None:
            man["modifier"] = mod
        steps.append({"geometry": _ref_geometry(pts[j0:j1 + 1], geometries), "maneuver": man, "mode": "driving",
                      "driving_side": "right", "name": _ref_name(e, arcs[j0]), "intersections": inter,
                      "weight": round1(leg["weight"][j0:j1].sum() * e._w_scale),
                      "duration": None if leg["duration"] is None else round1(leg["duration"][j0:j1].sum()),
                      "distance": round1(leg["distance"][j0:j1].sum())})
    b_last = float(bearing[-1])
    px, py = local_xy(end.input_lon, end.input_lat, end.lon, end.lat)
    side = math.sin(math.radians(b_last)) * float(py) - math.cos(math.radians(b_last)) * float(px)
    amod = "straight" if end.distance < 1.0 else ("right" if side < 0 else "left")
    bb = int(round(b_last)) % 360
    steps.append({"geometry": _ref_geometry(pts[-1:].repeat(2, axis=0), geometries),
                  "maneuver": {"bearing_after": 0, "bearing_before": bb, "location": loc[-1], "type": "arrive",
                               "modifier": amod},
                  "mode": "driving", "driving_side": "right", "name": _ref_name(e, arcs[-1]),
                  "intersections": [{"location": loc[-1], "bearings": [(bb + 180) % 360], "entry": [True], "in": 0}],
                  "weight": 0.0, "duration": None if leg["duration"] is None else 0.0, "distance": 0.0})
    return steps


def _ref_leg_json(e, leg, end, steps, ann, geometries):
    tw, td = leg["turn_weight"], leg["turn_duration"]
    out = {"steps": _ref_steps(e, leg, end, geometries) if steps else [], "summary": _ref_summary(e, leg),
           "weight": round1((leg["weight"].sum() + tw) * e._w_scale),
           "duration": None if leg["duration"] is None else round1(leg["duration"].sum() + td),
           "distance": round1(leg["distance"].sum())}
    if ann:
        a = {}
        dist, dur = leg["distance"], leg["duration"]
        a["distance"] = [round(float(x), 6) for x in dist]
        a["duration"] = [None] * int(dist.size) if dur is None else [round1(x) for x in dur]
        a["datasources"] = [0] * int(dist.size)
        arcs = leg["arcs"]
        a["nodes"] = [int(x) for x in e._node_ids[np.concatenate([e._tail[arcs[:1]], e._head[arcs]])]]
        a["weight"] = [round1(x * e._w_scale) for x in leg["weight"]]
        if dur is None:
            a["speed"] = [None] * int(dist.size)
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                sp = np.where(dur > 0, dist / np.where(dur > 0, dur, 1.0), 0.0)
            a["speed"] = [round1(x) for x in sp]
        a["metadata"] = {"datasource_names": ["gpuroute"]}
        out["annotation"] = a
    return out


def _ref_route(e, coords, *, steps, annotations, geometries, overview, continue_straight=True):
    ps = e.segments.snap_many(coords)
    if e._traffic is not None:
        plan, snap = e._traffic.plan(ps, continue_straight)
    else:
        plan, snap = CH(e).route(ps, continue_straight=continue_straight)
    phantoms = phantom_points(ps)
    legs, points = [], []
    tot_w = tot_d = tot_l = 0.0
    for i, (dep, arr, path) in enumerate(plan):
        leg = _ref_leg(e, phantoms[i], phantoms[i + 1], dep, arr, path, snap)
        legs.append(_ref_leg_json(e, leg, phantoms[i + 1], steps, annotations, geometries))
        tot_w += leg["weight"].sum() + leg["turn_weight"]
        tot_d = None if leg["duration"] is None or tot_d is None else \
            tot_d + leg["duration"].sum() + leg["turn_duration"]
        tot_l += leg["distance"].sum()
        points.append(leg["points"] if i == 0 else leg["points"][1:])
    route = {}
    if overview != "false":
        pts = np.concatenate(points)
        if overview == "simplified":
            pts = simplify(pts, config.SERVE_SIMPLIFY_TOLERANCE_M)
        route["geometry"] = _ref_geometry(pts, geometries)
    weight_name = e.weight_name if snap is None or snap.name == "time" else snap.name
    route.update(legs=legs, weight_name=weight_name, weight=round1(tot_w * e._w_scale),
                 duration=None if tot_d is None else round1(tot_d), distance=round1(tot_l))
    return {"code": "Ok", "routes": [route], "waypoints": [_ref_waypoint(e, p) for p in phantoms]}


OPTIONS = [dict(steps=False, annotations=False, geometries="polyline", overview="full"),
           dict(steps=False, annotations=False, geometries="polyline", overview="false"),
           dict(steps=True, annotations=True, geometries="polyline6", overview="simplified"),
           dict(steps=True, annotations=False, geometries="geojson", overview="full")]


@pytest.mark.parametrize("opts", range(len(OPTIONS)))
def test_route_answers_equal_the_general_builders(engine, opts):
    """Random routes (2 to 4 waypoints, some on junction nodes): ``Engine.route``'s answer, serialised,
    equals the reference builder's byte for byte (legs, steps, intersections, annotations, geometry,
    waypoints, totals)."""
    rng = np.random.default_rng(100 + opts)
    o = OPTIONS[opts]
    done = 0
    for _ in range(30):
        coords = _points(engine, rng, int(rng.integers(2, 5)))
        try:
            got = engine.route(coords, **o, continue_straight=True)
        except EngineError as err:
            assert err.code == "NoRoute"
            continue
        want = _ref_route(engine, coords, **{**o, "annotations": ("distance",) if o["annotations"] else ()},
                          continue_straight=True)
        assert orjson.dumps(got, option=orjson.OPT_SERIALIZE_NUMPY) == \
            orjson.dumps(want, option=orjson.OPT_SERIALIZE_NUMPY), coords
        done += 1
    assert done >= 20


def test_summary_names_the_two_longest_streets():
    """``summary_ids`` against the general code (``np.unique``, ``np.bincount``, a stable ``argsort``) on
    legs whose streets often have equal lengths (ties: the smaller id) and unnamed pieces."""
    from gpuroute.engine.legs import summary_ids

    rng = np.random.default_rng(6)
    for _ in range(3000):
        k = int(rng.integers(1, 12))
        nid = rng.integers(-1, 5, k)
        dist = rng.choice([0.0, 1.5, 2.0, 3.0], k)
        named = nid >= 0
        want = []
        if named.any():
            ids, first, inv = np.unique(nid[named], return_index=True, return_inverse=True)
            length = np.bincount(inv, weights=dist[named], minlength=ids.size)
            top = np.argsort(-length, kind="stable")[:2]
            want = ids[top[np.argsort(first[top])]].tolist()
        assert summary_ids(nid.astype(np.int64), dist).tolist() == want, (nid, dist)


# ------------------------------------------------------------------------------ snapping and options
def _assert_same_phantoms(got, want):
    """Two PhantomSets with the same arrays, bit for bit."""
    assert isinstance(got, PhantomSet) and isinstance(want, PhantomSet)
    for name in ("point_start", "arc", "fraction", "segment", "segment_fraction", "lon", "lat", "distance",
                 "name_id", "tie", "input_lon", "input_lat"):
        g, w = getattr(got, name), getattr(want, name)
        assert g.dtype == w.dtype and g.tobytes() == w.tobytes(), name


def test_batch_snapping_both_steps_equal_one_at_a_time(engine, monkeypatch):
    """Coordinates on roads (settled by the first balls of ``spacing`` metres) and up to a few hundred
    metres off them (the second step, from the nearest sample's segment), with and without radiuses:
    ``snap_batch`` gives ``snap``'s phantoms, ties included."""
    s = engine.segments
    rng = np.random.default_rng(4)
    near = np.asarray(_points(engine, rng, 60))
    far = near[:30] + rng.normal(0, 2e-3, (30, 2))  # ~200 m off
    pts = np.concatenate([near, far])
    steps = []
    balls = type(s)._snap_balls

    def count(self, q, *a, **kw):
        steps.append(q.shape[0])
        return balls(self, q, *a, **kw)

    monkeypatch.setattr(type(s), "_snap_balls", count)
    for radiuses in (None, [None if i % 3 else 150.0 for i in range(len(pts))]):
        try:
            got = s.snap_batch(pts[:, 0], pts[:, 1], radiuses=radiuses)
        except Exception as err:  # a coordinate with no segment within its radius: the same one as snap's
            got = err
        want = []
        for i, (x, y) in enumerate(pts.tolist()):  # the oracle: one coordinate at a time
            try:
                want.append(s.snap(x, y, radius=None if radiuses is None else radiuses[i], index=i, tie=SNAP_TIE_M))
            except Exception as err:
                want = err
                break
        if isinstance(want, Exception):
            assert type(got) is type(want) and got.index == want.index
            continue
        _assert_same_phantoms(got, PhantomSet.concat(want))
    assert len(steps) >= 2 and steps[1] < steps[0]  # both steps ran: the far coordinates took the second


def test_options_are_every_phantoms_arcs(engine):
    """The padded option arrays of a table (own arcs, then the ties'), as each point's options list them."""
    rng = np.random.default_rng(8)
    ps = engine.segments.snap_many(_points(engine, rng, 80))
    ph = phantom_points(ps, engine.segments)
    assert any(p.ties for p in ph) and any(p.reverse_arc < 0 for p in ph)
    arcs, frac = ps.padded()
    assert arcs.shape[1] == max([2] + [len(p.all_arcs) for p in ph])
    for i, p in enumerate(ph):
        o = p.all_arcs
        assert arcs[i, :len(o)].tolist() == [a for a, _ in o] and frac[i, :len(o)].tolist() == [f for _, f in o]
        assert (arcs[i, len(o):] == -1).all() and (frac[i, len(o):] == 0).all()
