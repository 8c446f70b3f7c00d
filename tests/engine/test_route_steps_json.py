"""A route's steps and annotations written as JSON by one compiled call (issue 20, deliverable 3:
:func:`gpuroute.engine.osrm.leg_parts_json`, :func:`gpuroute.engine.services.route.leg_parts`) are the bytes orjson
writes for the objects the route service built before (the oracle here: :func:`reference_leg_parts`, its Python
dict builder as it was): leg by leg on random routes of Monaco with OSRM's car.lua (every geometry, every
annotation, with and without durations), on names that JSON escapes, on values of 15 digits and more, and end to
end (``Engine.route`` with the objects read back, with ``leg_parts="json"``, the HTTP answer). The numbers: Python's
``round`` and NumPy's ``np.round`` written as orjson writes their values, on random values and on halves."""
from __future__ import annotations

import math

import numpy as np
import pytest
from numba import njit

from gpuroute.engine import osrm
from gpuroute.engine.algorithms import route_search
from gpuroute.engine.legs import MODIFIERS, STEP_TYPES, intersections, maneuvers, round_floats
from gpuroute.engine.osrm import encode_geometries, encode_geometry, round1
from gpuroute.engine.params import RouteParams
from gpuroute.engine.services import route as route_service
from gpuroute.geo.segments import local_xy

orjson = pytest.importorskip("orjson")

GEOMETRIES = ("polyline", "polyline6", "geojson")
ANNOTATIONS = ("duration", "distance", "datasources", "nodes", "weight", "speed")


# ------------------------------------------------------------------------------------------ the oracle
def _name(e, arc):
    k = int(e._name_id[arc])
    return e._names[k] if 0 <= k < len(e._names) else ""


def reference_leg_parts(e, leg, phantoms, end, steps, ann, geometries):
    """The route service's ``steps`` list and ``annotation`` dict of a leg as it built them before the compiled
    writer (a dict per step and per intersection, ``round`` per value)."""
    out_steps = _reference_steps(e, leg, phantoms, end, geometries) if steps else []
    a = {}
    if ann:
        dist, dur = leg.distance, leg.duration
        if "distance" in ann:
            a["distance"] = round_floats(dist, 6)
        if "duration" in ann:
            a["duration"] = [None] * int(dist.size) if dur is None else round_floats(dur, 1)
        if "datasources" in ann:
            a["datasources"] = [0] * int(dist.size)
        if "nodes" in ann:
            arcs = leg.arcs
            nodes = np.concatenate([e._tail[arcs[:1]], e._head[arcs]])
            a["nodes"] = e._node_ids[nodes].tolist()
        if "weight" in ann:
            a["weight"] = round_floats(leg.weight * e._w_scale, 1)
        if "speed" in ann and dur is None:
            a["speed"] = [None] * int(dist.size)
        elif "speed" in ann:
            with np.errstate(divide="ignore", invalid="ignore"):
                sp = np.where(dur > 0, dist / np.where(dur > 0, dur, 1.0), 0.0)
            a["speed"] = round_floats(sp, 1)
        if "datasources" in ann:
            a["metadata"] = {"datasource_names": ["gpuroute"]}
    return out_steps, a


def _reference_steps(e, leg, phantoms, end, geometries):
    arcs, pts = leg.arcs, leg.points
    head, tail = e._head, e._tail
    dur = leg.duration
    starts, kinds, mods, sums, i_first, i_at = maneuvers(
        arcs, e._bearing, e._name_id, head, tail, e._degree, leg.weight,
        dur if dur is not None else leg.distance, leg.distance)
    flat = round_floats(pts.ravel(), 6)
    loc = [flat[i:i + 2] for i in range(0, len(flat), 2)]
    b_int = (np.rint(e._bearing[arcs]).astype(np.int64) % 360).tolist()
    first, bearings, entry, in_pos, out_pos = intersections(
        tail[arcs[i_at]], tail[arcs[i_at - 1]], head[arcs[i_at]], e._fo_all, head, e._rfo, e._rev_tail,
        e._coords_f64)
    first, bearings, entry = first.tolist(), bearings.tolist(), entry.tolist()
    in_pos, out_pos, at = in_pos.tolist(), out_pos.tolist(), i_at.tolist()
    inter_all = [{"location": loc[j], "bearings": bearings[first[r]:first[r + 1]],
                  "entry": entry[first[r]:first[r + 1]], "in": in_pos[r], "out": out_pos[r]}
                 for r, j in enumerate(at)]
    i_first = i_first.tolist()
    bounds = starts.tolist() + [int(arcs.size)]
    w_scale = e._w_scale
    sums = sums.tolist()
    geoms = encode_geometries(pts, bounds[:-1], [b + 1 for b in bounds[1:]], geometries)
    out = []
    for s, (kind, mod) in enumerate(zip(kinds.tolist(), mods.tolist(), strict=True)):
        j0 = bounds[s]
        b_after = b_int[j0]
        if kind == 0:
            b_before = 0
            inter = [{"location": loc[0], "bearings": [b_after], "entry": [True], "out": 0}]
        else:
            b_before = b_int[j0 - 1]
            inter = []
        inter += inter_all[i_first[s]:i_first[s + 1]]
        man = {"bearing_after": b_after, "bearing_before": b_before, "location": loc[j0], "type": STEP_TYPES[kind]}
        if mod >= 0:
            man["modifier"] = MODIFIERS[mod]
        w, d, ln = sums[s]
        out.append({"geometry": geoms[s], "maneuver": man,
                    "mode": "driving", "driving_side": "right", "name": _name(e, arcs[j0]),
                    "intersections": inter, "weight": round1(w * w_scale),
                    "duration": None if dur is None else round1(d), "distance": round1(ln)})
    bearing = e._bearing[arcs]
    b_last = float(bearing[-1])
    r0 = int(phantoms.point_start[end])
    px, py = local_xy(float(phantoms.input_lon[end]), float(phantoms.input_lat[end]), float(phantoms.lon[r0]),
                      float(phantoms.lat[r0]))
    side = math.sin(math.radians(b_last)) * float(py) - math.cos(math.radians(b_last)) * float(px)
    amod = "straight" if float(phantoms.distance[r0]) < 1.0 else ("right" if side < 0 else "left")
    bb = int(round(b_last)) % 360
    out.append({"geometry": encode_geometry(pts[-1:].repeat(2, axis=0), geometries),
                "maneuver": {"bearing_after": 0, "bearing_before": bb, "location": loc[-1], "type": "arrive",
                             "modifier": amod},
                "mode": "driving", "driving_side": "right", "name": _name(e, arcs[-1]),
                "intersections": [{"location": loc[-1], "bearings": [(bb + 180) % 360], "entry": [True],
                                   "in": 0}],
                "weight": 0.0, "duration": None if leg.duration is None else 0.0, "distance": 0.0})
    return out


# ------------------------------------------------------------------------------------------ helpers
def _legs(e, coords, continue_straight=True):
    """``(phantoms, [leg, ...])`` of the route through ``coords`` (the route service's own calls)."""
    p = RouteParams.from_kwargs(coords, limits=e.limits)
    phantoms = e._snap(p, segments=e._snap_index(None))
    plan, snap = route_search(e, None, None).route(phantoms, continue_straight=continue_straight)
    rows = route_service.PhantomRows(phantoms)
    return phantoms, [route_service._leg(e, rows, i, dep, arr, path, snap) for i, (dep, arr, path) in enumerate(plan)]


def _random_coords(e, rng, k):
    c = np.asarray(e.graph.coords, dtype=np.float64)
    out = []
    for _ in range(k):
        x = c[rng.integers(c.shape[0])]
        if rng.random() < 0.3:
            out.append((float(x[0]), float(x[1])))  # on a node
        else:
            j = rng.normal(0.0, 3e-4, 2)
            out.append((float(x[0] + j[0]), float(x[1] + j[1])))
    if k > 2 and rng.random() < 0.2:  # a zero-length leg
        out[1] = out[0]
    return out


def _check_legs(e, phantoms, legs, rng, *, no_durations=False):
    for i, leg in enumerate(legs):
        if no_durations:
            leg = route_service._Leg(leg.arcs, leg.frac, leg.points, leg.weight, None, leg.distance, leg.weight_sum,
                                     leg.duration_sum, leg.distance_sum, leg.turn_duration, leg.turn_weight,
                                     leg.summary)
        for geometries in GEOMETRIES:
            ann = tuple(a for a in ANNOTATIONS if rng.random() < 0.5) if rng.random() < 0.7 else ANNOTATIONS
            for steps in (True, False):
                want_s, want_a = reference_leg_parts(e, leg, phantoms, i + 1, steps, ann, geometries)
                got_s, got_a = route_service.leg_parts(e, leg, phantoms, i + 1, steps, ann, geometries)
                assert got_s == orjson.dumps(want_s), (i, geometries, steps)
                assert got_a == (orjson.dumps(want_a) if ann else b""), (i, geometries, ann)


# ------------------------------------------------------------------------------------------ numbers
@njit(cache=False)
def _put_round_one(x, d, numpy_round, buf, fixes):
    return osrm._put_round(buf, 0, x, d, numpy_round, fixes, 0)


def _values(rng):
    vals = [0.0, -0.0, 0.25, -0.25, 0.75, 2.5, -2.5, 0.05, 0.15, 0.35, 1e-6, -1e-6, 5e-6, 9.4e-6, 9.6e-6, 1e-5, 3e-7,
            -3e-7, 7.4213, 43.7311, 1e14 - 0.05, 123456789.123456, float("nan"), float("inf"), -float("inf")]
    for scale in (1e-7, 1e-5, 1e-3, 1.0, 1e3, 1e6, 1e9, 1e13):
        vals += (rng.standard_normal(400) * scale).tolist()
    for d in (1, 6):  # halves of the last decimal, and the doubles either side of them
        for k in rng.integers(-10 ** 9, 10 ** 9, 400).tolist():
            x = (k + 0.5) / 10.0 ** d
            vals += [x, float(np.nextafter(x, np.inf)), float(np.nextafter(x, -np.inf))]
    return vals


def test_numbers_are_round_as_orjson_writes_it():
    rng = np.random.default_rng(3)
    buf = np.empty(64, np.uint8)
    fixes = np.zeros((1, 4))
    left = 0
    for x in _values(rng):
        for d in (1, 6):
            for numpy_round in (False, True):
                p, nf = _put_round_one(x, d, numpy_round, buf, fixes)
                want = float(np.round(x, d)) if numpy_round else round(x, d)
                if nf:  # 15 digits or more: left to Python, nothing written
                    assert p == 0 and abs(want) * 10 ** d >= 1e15 - 1, (x, d)
                    left += 1
                    continue
                assert buf[:p].tobytes() == orjson.dumps(want), (x, d, numpy_round)
    assert left  # the large values took the Python path


@njit(cache=False)
def _put_int_one(v, buf):
    return osrm._put_int(buf, 0, v)


def test_integers_are_written_as_str():
    rng = np.random.default_rng(4)
    buf = np.empty(32, np.uint8)
    vals = [0, 1, 9, 10, 99, 100, -1, -10, 2 ** 63 - 1, -(2 ** 63 - 1), 10 ** 18, 10 ** 18 - 1]
    vals += rng.integers(-2 ** 63 + 1, 2 ** 63 - 1, 2000).tolist() + rng.integers(-1000, 100000, 2000).tolist()
    for v in vals:
        assert buf[:_put_int_one(v, buf)].tobytes() == str(v).encode(), v


@njit(cache=False)
def reference_intersections(nodes, prev, nxt, first_out, head, rev_first_out, rev_tail, coords):
    """:func:`gpuroute.engine.legs.intersections` as it was (``np.unique`` and ``np.argsort`` per node)."""
    r = nodes.size
    first = np.zeros(r + 1, np.int64)
    for i in range(r):
        x = nodes[i]
        first[i + 1] = first[i] + (first_out[x + 1] - first_out[x]) + (rev_first_out[x + 1] - rev_first_out[x])
    bearings = np.empty(first[r], np.int64)
    entry = np.empty(first[r], np.bool_)
    in_pos = np.full(r, -1, np.int64)
    out_pos = np.full(r, -1, np.int64)
    c = 0
    for i in range(r):
        x = nodes[i]
        no = first_out[x + 1] - first_out[x]
        ni = rev_first_out[x + 1] - rev_first_out[x]
        nb = np.empty(no + ni, np.int64)
        for e in range(no):
            nb[e] = head[first_out[x] + e]
        for e in range(ni):
            nb[no + e] = rev_tail[rev_first_out[x] + e]
        nb = np.unique(nb)
        x0 = coords[x, 0]
        y0 = coords[x, 1]
        kk = math.cos(math.radians(y0))
        key = np.empty(nb.size, np.int64)
        bs = np.empty(nb.size, np.int64)
        for e in range(nb.size):
            v = nb[e]
            b = np.int64(np.rint(math.degrees(math.atan2((coords[v, 0] - x0) * kk, coords[v, 1] - y0)))) % 360
            bs[e] = b
            key[e] = b * (nb[nb.size - 1] + 1) + e
        order = np.argsort(key)
        first[i] = c
        for p in range(nb.size):
            e = order[p]
            v = nb[e]
            bearings[c] = bs[e]
            ent = False
            for q in range(no):
                if head[first_out[x] + q] == v:
                    ent = True
                    break
            entry[c] = ent
            if v == prev[i]:
                in_pos[i] = p
            if v == nxt[i]:
                out_pos[i] = p
            c += 1
    first[r] = c
    return first, bearings[:c], entry[:c], in_pos, out_pos


def test_intersections_are_the_reference(car_engine):
    """Every node of Monaco (and random batches, with neighbours at equal bearings: a node's coordinates
    copied to a neighbour's neighbours), the sorted-in-place kernel against the one with np.unique/argsort."""
    e = car_engine
    rng = np.random.default_rng(7)
    n = e._coords_f64.shape[0]
    args = (e._fo_all, e._head, e._rfo, e._rev_tail)
    batches = [np.arange(n, dtype=np.int64)] + [rng.integers(0, n, int(rng.integers(0, 60))) for _ in range(50)]
    coords = e._coords_f64.copy()
    for x in rng.integers(0, n, 400).tolist():  # equal bearings: two neighbours of x on one spot
        nbr = np.concatenate([e._head[e._fo_all[x]:e._fo_all[x + 1]], e._rev_tail[e._rfo[x]:e._rfo[x + 1]]])
        if nbr.size >= 2:
            coords[nbr[1]] = coords[nbr[0]]
    for c in (e._coords_f64, coords):
        for nodes in batches:
            prev = rng.integers(-1, n, nodes.size)
            nxt = rng.integers(-1, n, nodes.size)
            want = reference_intersections(nodes, prev, nxt, *args, c)
            got = intersections(nodes, prev, nxt, *args, c)
            for x, y in zip(got, want, strict=True):
                assert x.dtype == y.dtype and np.array_equal(x, y)


# ------------------------------------------------------------------------------------------ legs
def test_leg_parts_are_the_objects_json(car_engine):
    e = car_engine
    rng = np.random.default_rng(20)
    n = 0
    for _ in range(40):
        coords = _random_coords(e, rng, int(rng.integers(2, 5)))
        try:
            phantoms, legs = _legs(e, coords, continue_straight=bool(rng.random() < 0.7))
        except Exception as err:  # NoSegment / NoRoute: nothing to write
            assert getattr(err, "code", None) in ("NoSegment", "NoRoute"), err
            continue
        _check_legs(e, phantoms, legs, rng, no_durations=bool(rng.random() < 0.2))
        n += len(legs)
    assert n >= 40


def test_leg_parts_one_step_and_zero_length(car_engine):
    """A leg on one arc (depart and arrive only) and a zero-length leg (the same point twice)."""
    e = car_engine
    rng = np.random.default_rng(5)
    a = int(np.argmax(e._len))  # the longest arc: two points along it
    t, h = e._coords_f64[e._tail[a]], e._coords_f64[e._head[a]]
    p1 = tuple((t + 0.3 * (h - t)).tolist())
    p2 = tuple((t + 0.7 * (h - t)).tolist())
    phantoms, legs = _legs(e, [p1, p2])
    assert legs[0].arcs.size == 1
    _check_legs(e, phantoms, legs, rng)
    phantoms, legs = _legs(e, [p1, p1, p2])
    assert legs[0].distance_sum == 0.0
    _check_legs(e, phantoms, legs, rng)


def test_leg_parts_escape_names_and_splice_large_values(monaco_car_dir, monkeypatch):
    """Names JSON escapes (quotes, backslashes, control characters, non-ASCII) and values of 15 digits or more
    (left to Python by the writer, spliced in) give the objects' JSON too."""
    from gpuroute.engine import Engine

    e = Engine.open(monaco_car_dir)
    tricky = ['Rue "du" Port', "C:\\chemin\\", "tab\there\nnew\x01\x1f", "Boulevard d'Italie é ñ 中文 \u2028",
              "emoji 🚗", "slash / \x7f"]
    e._names = [tricky[i % len(tricky)] + n for i, n in enumerate(e._names)]
    spliced = []
    splice = osrm._splice_fixes
    monkeypatch.setattr(osrm, "_splice_fixes", lambda raw, fixes, *a: spliced.append(len(fixes)) or splice(raw, fixes, *a))
    rng = np.random.default_rng(9)
    w_scale = e._w_scale
    for _ in range(8):
        coords = _random_coords(e, rng, 3)
        try:
            phantoms, legs = _legs(e, coords)
        except Exception as err:
            assert getattr(err, "code", None) in ("NoSegment", "NoRoute"), err
            continue
        _check_legs(e, phantoms, legs, rng)
        e._w_scale = 3.7e13  # weights of 15 and more digits (at 0.1): written by Python, spliced in
        _check_legs(e, phantoms, legs, rng)
        e._w_scale = w_scale
    assert max(spliced) > osrm._FIXES  # more than the first call had room for: written again with room


def test_route_answers_are_the_reference_objects(car_engine, monkeypatch):
    """End to end: ``Engine.route`` (objects read back from the JSON text), ``leg_parts="json"`` and the HTTP
    answer give the bytes of the reference objects (the route service with :func:`reference_leg_parts`)."""
    from gpuroute.server.app import create_app

    e = car_engine
    app = create_app(e)
    rng = np.random.default_rng(31)
    cases = 0
    for _ in range(30):
        coords = _random_coords(e, rng, int(rng.integers(2, 6)))
        kw = {"steps": bool(rng.random() < 0.85), "geometries": GEOMETRIES[rng.integers(3)],
              "overview": ("full", "simplified", "false")[rng.integers(3)],
              "annotations": True if rng.random() < 0.4 else [a for a in ANNOTATIONS if rng.random() < 0.5] or False,
              "continue_straight": bool(rng.random() < 0.7)}
        if len(coords) == 2 and rng.random() < 0.4:
            kw["alternatives"] = 2
        try:
            got = orjson.dumps(e.route(coords, **kw))
        except Exception as err:
            assert getattr(err, "code", None) in ("NoSegment", "NoRoute"), err
            continue
        as_json = orjson.dumps(e.route(coords, **kw, leg_parts="json"))
        with monkeypatch.context() as m:
            m.setattr(route_service, "leg_parts",
                      lambda *a: tuple(orjson.dumps(x) for x in reference_leg_parts(*a)))
            want = orjson.dumps(e.route(coords, **kw))
        assert got == want and as_json == want
        ann = kw["annotations"]
        q = (f"steps={str(kw['steps']).lower()}&geometries={kw['geometries']}&overview={kw['overview']}"
             f"&continue_straight={str(kw['continue_straight']).lower()}"
             f"&annotations={'true' if ann is True else ','.join(ann) if ann else 'false'}"
             + (f"&alternatives={kw['alternatives']}" if "alternatives" in kw else ""))
        path = "/route/v1/driving/" + ";".join(f"{x!r},{y!r}" for x, y in coords)
        scope = {"type": "http", "method": "GET", "http_version": "1.1", "path": path, "raw_path": path.encode(),
                 "query_string": q.encode(), "headers": [], "scheme": "http", "server": None, "client": None}
        status, body, call = app.state.adapter.answer_get(scope)
        if call is not None:
            assert call.params.leg_parts == ("json" if kw["steps"] or ann else "objects")
            status, body = app.state.adapter.work(call)
        assert status == 200 and body == want
        cases += 1
    assert cases >= 20


def test_leg_parts_option_is_checked(car_engine):
    with pytest.raises(Exception, match="leg_parts must be one of"):
        car_engine.route([(7.42, 43.73), (7.43, 43.74)], leg_parts="text")
