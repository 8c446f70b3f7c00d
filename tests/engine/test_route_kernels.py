"""The fused compiled calls of a ``/route`` (issue 20, deliverable 3) give the bytes the calls they fuse give:
:func:`gpuroute.crp.phantom_search.search_leg` (``leg_seeds``, ``search``, ``leg_choice``),
:func:`gpuroute.engine.legs.leg_arrays` (``leg_pieces``, ``turn_sums``, ``summary_ids``) and
:func:`gpuroute.engine.osrm.overview_polyline` (``simplify_lonlat``, ``encode_geometry``): kernel by kernel on
random inputs, and end to end -- every answer of random ``/route`` requests (options and errors included) over
the overlay and over the hierarchy is byte for byte the answer with the unfused calls patched in (two-point
routes' :func:`~gpuroute.crp.phantom_search.search_one_leg` and one-leg route objects'
:func:`~gpuroute.engine.osrm.leg_overview` against the general legs, with the same search counts); and
:func:`gpuroute.engine.legs.summary_ids` against ``np.unique`` and ``np.bincount``."""
from __future__ import annotations

import json

import numpy as np
import pytest

from gpuroute.crp import phantom_search as ps
from gpuroute.engine import legs
from gpuroute.engine.osrm import encode_geometry, overview_polyline
from gpuroute.engine.services import route as route_service
from gpuroute.geo.simplify import simplify_lonlat


# ------------------------------------------------------------------------------------------ the unfused calls
def unfused_search_leg(q, st, dep, a, fa, cost, b, fb, *, every_target, scale=ps.SCALE):
    """``search_leg`` as the calls it fuses."""
    idx, s_arcs, s_costs, off, s_best, s_arg, bound, overflow = ps.leg_seeds(dep, a, fa, cost[a], b, fb, cost[b],
                                                                             scale)
    if overflow:
        return None
    res = ps.search(q, st, s_arcs, s_costs, b, off, every_target=every_target, bound=int(bound), scale=scale)
    if res.overflow:
        return None
    best, leaves, use_same, reached = ps.leg_choice(s_best, s_arg, idx, res.cost, res.seed)
    return res, best, leaves, use_same, reached


def unfused_leg_arrays(a, fa, b, fb, mid, nodes, has_path, slon, slat, elon, elat, coords, wcost, wf, dcost, df,
                       has_dur, length, turns, t_first, fo, head, from_snapshot, is_time, turn_cost, cost, twf, tscale,
                       tc_dur, tc_w, name_id):
    """``leg_arrays`` as the calls it fuses."""
    out = legs.leg_pieces(a, fa, b, fb, mid, nodes, has_path, slon, slat, elon, elat, coords, wcost, wf, dcost, df,
                          has_dur, length)
    td = tw = 0.0
    if turns and has_path:
        seq = np.concatenate([[a], mid, [b]]).astype(np.int64)
        td, tw = legs.turn_sums(seq, t_first, fo, head, from_snapshot, is_time, turn_cost, cost, twf, tscale, tc_dur,
                                tc_w)
    return (*out, td, tw, legs.summary_ids(name_id[out[0]], out[5]))


def unfused_overview(points, simplified, tolerance_m, precision):
    """``overview_polyline`` as the calls it fuses."""
    pts = simplify_lonlat(points, tolerance_m) if simplified else points
    return encode_geometry(pts, "polyline6" if precision == 6 else "polyline")


def _same(x, y):
    assert type(x) is type(y) or (np.isscalar(x) and np.isscalar(y)), (type(x), type(y))
    if isinstance(x, np.ndarray):
        assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y), (x, y)
    else:
        assert x == y or (x != x and y != y), (x, y)


# ------------------------------------------------------------------------------------------ kernels
def test_overview_polyline_is_simplify_then_encode():
    rng = np.random.default_rng(11)
    lines = [np.array([[7.42, 43.73]]), np.array([[7.42, 43.73], [7.421, 43.731]]),
             np.array([[7.42, 43.73]] * 4),  # every point the same
             np.array([[7.42, 43.73], [7.42, 43.73], [7.4201, 43.73], [7.4201, 43.73]])]  # duplicates
    for _ in range(300):
        k = int(rng.integers(3, 60))
        steps = rng.normal(0.0, rng.choice([1e-6, 3e-5, 3e-4]), (k, 2))
        if rng.random() < 0.3:  # repeated points (a leg's end and the next one's start)
            steps[rng.integers(1, k, 3)] = 0.0
        lines.append(np.array([7.42, 43.73]) + np.cumsum(steps, axis=0))
    for pts in lines:
        pts = np.ascontiguousarray(pts)
        for simplified in (True, False):
            for tol in (0.0, 3.0, 40.0):
                for precision in (5, 6):
                    assert overview_polyline(pts, simplified, tol, precision) == \
                        unfused_overview(pts, simplified, tol, precision)
    with pytest.raises(ValueError, match="tolerance"):
        overview_polyline(lines[-1], True, -1.0, 5)


def test_leg_arrays_are_the_leg_kernels():
    rng = np.random.default_rng(5)
    n, m = 40, 160
    head = rng.integers(0, n, m).astype(np.int64)
    tail = rng.integers(0, n, m).astype(np.int64)
    order = np.argsort(tail, kind="stable")
    head, tail = head[order], tail[order]
    fo = np.searchsorted(tail, np.arange(n + 1)).astype(np.int64)
    deg = np.diff(fo)
    t_first = np.zeros(m, np.int64)  # turns of arc a: one per out-arc of head[a]
    t_first[1:] = np.cumsum(deg[head])[:-1]
    n_turns = int(deg[head].sum())
    coords = rng.uniform([7.40, 43.72], [7.44, 43.75], (n, 2))
    length = rng.uniform(1.0, 200.0, m)
    wcost = np.round(rng.uniform(1.0, 90.0, m))
    dcost = rng.uniform(0.5, 30.0, m)
    name_id = rng.integers(-1, 6, m).astype(np.int32)
    tc_dur = rng.integers(-3, 40, n_turns).astype(np.int32)
    tc_w = rng.integers(-3, 40, n_turns).astype(np.int32)
    turn_cost = (rng.integers(0, 100, n_turns)).astype(np.int64)
    checked = 0
    for _ in range(400):
        a = int(rng.integers(m))
        walk = [a]
        for _ in range(int(rng.integers(0, 12))):  # a path of allowed turns
            v = head[walk[-1]]
            if deg[v] == 0:
                break
            walk.append(int(fo[v] + rng.integers(deg[v])))
        has_path = len(walk) >= 2 and rng.random() < 0.9
        b = walk[-1] if has_path else a
        mid = np.array(walk[1:-1], np.int64) if has_path else np.zeros(0, np.int64)
        nodes = head[np.array(walk[:-1], np.int64)] if has_path else np.zeros(0, np.int64)
        fa, fb = (rng.choice([0.0, 1.0, rng.random()]) for _ in range(2))
        if not has_path:
            fa, fb = min(fa, fb), max(fa, fb)
        for has_dur, turns, from_snapshot, is_time in ((True, True, True, True), (True, True, False, False),
                                                       (False, False, False, False), (True, True, True, False)):
            args = (a, float(fa), b, float(fb), mid, np.ascontiguousarray(nodes), has_path, 7.41, 43.73, 7.43, 43.74,
                    coords, wcost, 0.1, dcost if has_dur else np.zeros(0), 1.0, has_dur, length, turns, t_first, fo,
                    head, from_snapshot, is_time, turn_cost, wcost, 0.1, 0.1, tc_dur, tc_w, name_id)
            got, want = legs.leg_arrays(*args), unfused_leg_arrays(*args)
            assert len(got) == len(want) == 12
            for x, y in zip(got, want, strict=True):
                _same(x, y)
            checked += 1
    assert checked == 1600


def test_search_leg_is_seeds_search_choice(overlay_engine):
    e = overlay_engine
    tr = e._traffic
    snap = tr.snapshot()
    st = snap.state
    q = tr.query()
    rng = np.random.default_rng(2)
    lon = rng.uniform(7.41, 7.44, 240)
    lat = rng.uniform(43.725, 43.75, 240)
    ph = e.segments.snap_checked(lon, lat)
    seen_same_arc = 0
    for i in range(0, 240, 2):
        a, fa = ph.options(i)
        b, fb = ph.options(i + 1)
        if i % 6 == 0:  # the same arc: a target ahead of and behind the departure point
            b, fb = a.copy(), np.clip(fa + rng.choice([-0.3, 0.3], a.size), 0.0, 1.0)
            seen_same_arc += 1
        dep = np.zeros(a.size, np.int64)
        if a.size > 1 and i % 4 == 0:
            dep[0] = ps.INF  # a departure option not reached
        dep[-1] += int(rng.integers(0, 5000))
        for every in (True, False):
            with ps.SEARCHES.counting() as c_new:
                got = ps.search_leg(q, st, dep, a, fa, snap.cost, b, fb, every_target=every)
            with ps.SEARCHES.counting() as c_old:
                want = unfused_search_leg(q, st, dep, a, fa, snap.cost, b, fb, every_target=every)
            assert c_new == c_old
            assert (got is None) == (want is None)
            if got is None:
                continue
            res, res0 = got[0], want[0]
            for f in ("cost", "label", "seed", "seed_cost", "_first", "_states", "_refs"):
                _same(getattr(res, f), getattr(res0, f))
            assert (res.scale, res.settled, res.overflow) == (res0.scale, res0.settled, res0.overflow)
            for x, y in zip(got[1:], want[1:], strict=True):
                _same(x if not isinstance(x, np.bool_) else bool(x), y if not isinstance(y, np.bool_) else bool(y))
            for j in range(b.size):
                if res.cost[j] < ps.INF:
                    assert np.array_equal(res.unpack(q, st, j), res0.unpack(q, st, j))
    assert seen_same_arc == 40


# ------------------------------------------------------------------------------------------ end to end
QUERIES = ("", "overview=full", "overview=false", "steps=true", "steps=true&overview=full&annotations=true",
           "annotations=duration,nodes,speed", "geometries=polyline6", "geometries=geojson&steps=true",
           "continue_straight=false", "alternatives=2&overview=full", "generate_hints=false", "skip_waypoints=true",
           "overview=bogus")


def _requests(eng, n, seed):
    """Random ``/route`` URLs over the engine's area: 2 to 5 points (some on nodes: junction ties), every query of
    :data:`QUERIES`, a coordinate out of range now and then."""
    rng = np.random.default_rng(seed)
    xy = np.asarray(eng._coords_f64)
    lo, hi = xy.min(axis=0), xy.max(axis=0)
    out = []
    for i in range(n):
        pts = []
        for _ in range(2 if i % 3 else int(rng.integers(3, 6))):
            p = xy[int(rng.integers(len(xy)))] if rng.random() < 0.3 else rng.uniform(lo, hi)
            pts.append(f"{p[0]:.6f},{p[1]:.6f}")
        if i % 41 == 0:
            pts[0] = "7.42,91.0"
        out.append(f"/route/v1/driving/{';'.join(pts)}?{QUERIES[i % len(QUERIES)]}")
    return out


def _answers(app, urls):
    server = app.state.adapter
    out = []
    for url in urls:
        path, _, query = url.partition("?")
        scope = {"type": "http", "method": "GET", "http_version": "1.1", "path": path, "raw_path": path.encode(),
                 "query_string": query.encode(), "headers": []}
        status, body, call = server.answer_get(scope)
        if call is not None:
            status, body = server.work(call)
        out.append((status, body))
    return out


def _engines(overlay_engine):
    from gpuroute.engine import Engine

    return {"overlay": overlay_engine, "hierarchy": Engine.open("monaco")}


@pytest.mark.parametrize("kind", ["overlay", "hierarchy"])
def test_route_answers_are_the_unfused_calls(overlay_engine, monkeypatch, kind):
    from gpuroute.server import create_app

    eng = _engines(overlay_engine)[kind]
    urls = _requests(eng, 260, seed=3 if kind == "overlay" else 4)
    with ps.SEARCHES.counting() as c_fused:
        fused = _answers(create_app(eng), urls)
    monkeypatch.setattr(ps, "search_one_leg", lambda *a, **k: None)  # two points: search_leg, then the unpacking
    monkeypatch.setattr(ps, "search_leg", unfused_search_leg)
    monkeypatch.setattr(route_service, "leg_arrays", unfused_leg_arrays)
    monkeypatch.setattr(route_service, "_one_leg_route", lambda e, rows, leg, snap, consts, geometries, overview:
                        route_service._route_of_legs(e, None, rows, [leg], snap, consts, False, (), geometries,
                                                     overview, "objects"))  # no steps: the points are not read
    monkeypatch.setattr(route_service, "overview_polyline", unfused_overview)
    with ps.SEARCHES.counting() as c_unfused:
        unfused = _answers(create_app(eng), urls)
    assert c_fused == c_unfused
    codes = {}
    for url, (s1, b1), (s0, b0) in zip(urls, fused, unfused, strict=True):
        assert (s1, b1) == (s0, b0), url
        code = json.loads(b1)["code"]
        codes[code] = codes.get(code, 0) + 1
    assert codes.get("Ok", 0) >= 200 and codes.get("InvalidValue", 0) >= 5 and codes.get("InvalidOptions", 0) >= 10


def test_edge_tails_are_edge_tail(overlay_engine):
    """:func:`gpuroute.crp.customize.edge_tails` (what the path unpacking reads) is :func:`edge_tail`'s binary search
    for every edge: a random CSR with empty ranges, and every cell of the overlay's flattened level graphs."""
    from gpuroute.crp.customize import edge_tail, edge_tails

    rng = np.random.default_rng(5)
    ef = np.concatenate([[0], np.cumsum(rng.choice([0, 0, 1, 3], 300))]).astype(np.int64)
    tails = edge_tails(ef)
    assert tails.size == ef[-1] and all(edge_tail(ef, 0, ef.size - 1, e) == tails[e] for e in range(ef[-1]))
    fl = overlay_engine._traffic.overlay._topo["flat"]
    ef, vf = np.asarray(fl["ef"], np.int64), np.asarray(fl["vf"], np.int64)
    tails = edge_tails(ef)
    for g in range(vf.size - 1):
        lo, hi = int(vf[g]), int(vf[g + 1])
        for e in range(int(ef[lo]), int(ef[hi])):
            assert edge_tail(ef, lo, hi, e) == tails[e]


def test_summary_ids_are_the_two_longest_names():
    """:func:`gpuroute.engine.legs.summary_ids` against ``np.unique`` and ``np.bincount``: per name its pieces'
    distances added in order, the two longest (ties: the smaller id), in order of first appearance."""
    rng = np.random.default_rng(9)
    for _ in range(500):
        k = int(rng.integers(1, 300))
        runs = rng.integers(-1, int(rng.integers(1, 40)), int(rng.integers(1, k + 1)))  # streets piece after piece
        name_id = np.resize(np.repeat(runs, rng.integers(1, 12, runs.size)), k).astype(np.int32)
        distance = rng.choice([1.0, 2.5, rng.random() * 100], k)  # equal lengths now and then
        got = legs.summary_ids(name_id, distance).tolist()
        ok = name_id >= 0
        if not ok.any():
            assert got == []
            continue
        u, inv = np.unique(name_id[ok], return_inverse=True)
        total = np.bincount(inv, weights=distance[ok])
        top = sorted(range(u.size), key=lambda j: (-total[j], u[j]))[:2]
        first = {int(u[j]): int(np.flatnonzero(name_id == u[j])[0]) for j in top}
        assert got == sorted(first, key=first.get)
