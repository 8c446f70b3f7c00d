"""``alternatives=`` on ``/route`` (:func:`gpuroute.engine.services.route.plan_alternatives`): on the Monaco
overlay (:mod:`gpuroute.crp.alternatives`) and on a hierarchy-only engine (:mod:`gpuroute.ch.alternatives`).

Oracles, from the route objects alone (their ``nodes`` annotation gives their arcs): scipy's Dijkstra on the
turn-expanded graph of the request's metric snapshot (current traffic; an avoid's own customization). Every
alternative is a real path whose weight is the sum of its fraction-weighted arc costs and turn costs; it is
at most ``1 + stretch`` times the main route's weight, shares at most ``sharing`` of the main route's cost
with it and the alternatives before it, splits into two shortest paths at some arc whose T-window (``T =
alpha`` times the main route's cost each side) is a shortest path; no two routes are the same; the main route
is byte for byte the ``alternatives=false`` answer."""
from __future__ import annotations

import json

import numpy as np
import pytest
from alternatives_oracle import (
    ALPHA,
    SHARING,
    STRETCH,
    TurnOracle,
    check_alternatives,
    dist_from,
    snap_options,
    t_window,
)
from naive import random_road_graph
from turn_oracle import route_arcs

from gpuroute import ContractionHierarchy
from gpuroute.engine import Engine
from gpuroute.engine.algorithms import metric_snapshot
from gpuroute.engine.exclude import resolve as resolve_exclude
from gpuroute.geo.snap import largest_scc_mask


def _points(e, k, seed):
    """``k`` coordinate pairs inside random segments of at least 20 m (20..80 % along: no zero pieces)."""
    s = e.segments
    rng = np.random.default_rng(seed)
    ok = np.flatnonzero(s.length_m >= 20.0)
    out = []
    for _ in range(k):
        pick = rng.choice(ok, 2)
        f = rng.uniform(0.2, 0.8, 2)
        lon = s.lon_u[pick] + f * (s.lon_v[pick] - s.lon_u[pick])
        lat = s.lat_u[pick] + f * (s.lat_v[pick] - s.lat_u[pick])
        out.append([(float(lon[i]), float(lat[i])) for i in range(2)])
    return out


def _both(e, coords, k, **kw):
    opts = dict(steps=True, annotations=True, geometries="polyline6", overview="full", **kw)
    plain = e.route(coords, **opts)
    alt = e.route(coords, alternatives=k, **opts)
    assert json.dumps(alt["routes"][0]) == json.dumps(plain["routes"][0])  # the main route, byte for byte
    assert json.dumps(alt["waypoints"]) == json.dumps(plain["waypoints"])
    return alt


def test_overlay_alternatives_admissible(overlay_engine):
    e = overlay_engine
    oracle = TurnOracle(e, metric_snapshot(e))
    found = 0
    for coords in _points(e, 12, 5):
        res = _both(e, coords, 3)
        assert 1 <= len(res["routes"]) <= 4
        found += check_alternatives(e, coords, res, oracle)
        one = e.route(coords, alternatives=True, overview="false", annotations=["nodes"])
        assert len(one["routes"]) <= 2  # true: one alternative (OSRM's)
        if len(res["routes"]) > 1:  # the first of three is the one of one (chosen in cost order)
            assert route_arcs(e, one["routes"][1]) == route_arcs(e, res["routes"][1])
    assert found > 0


def test_more_waypoints_give_the_main_route_only(overlay_engine):
    e = overlay_engine
    (p, q), (r, _) = _points(e, 2, 9)
    res = e.route([p, q, r], alternatives=3, overview="false")
    assert len(res["routes"]) == 1
    assert json.dumps(res) == json.dumps(e.route([p, q, r], overview="false"))


def test_alternatives_follow_traffic_and_avoids(overlay_engine):
    """After a traffic update on the main route, and with ``avoid_ways`` of one of its ways, the alternatives
    are admissible on that request's metric; none enters an avoided arc."""
    e = overlay_engine
    pairs = [c for c in _points(e, 12, 5)]
    coords = next(c for c in pairs if len(e.route(c, alternatives=2, overview="false")["routes"]) > 1)
    main = route_arcs(e, e.route(coords, overview="false", annotations=["nodes"])["routes"][0])
    mid = main[len(main) // 3: 2 * len(main) // 3]
    e.customize([{"arc": int(x), "cost": int(e._traffic.snapshot().cost[x]) * 3 + 50} for x in mid])
    snap = metric_snapshot(e)
    res = e.route(coords, alternatives=3, annotations=["nodes"], overview="false")
    check_alternatives(e, coords, res, TurnOracle(e, snap))
    way_of = np.asarray(e.graph.arc_attrs["way_id"], dtype=np.int64)
    wid = int(way_of[main[len(main) // 2]])
    ex = resolve_exclude(e, None, None, [wid])
    res = _both(e, coords, 3, avoid_ways=[wid])
    for r in res["routes"]:
        assert wid not in set(way_of[route_arcs(e, r)].tolist())
    check_alternatives(e, coords, res, TurnOracle(e, ex.snapshot()))


def test_http_alternatives(overlay_engine):
    pytest.importorskip("starlette")
    pytest.importorskip("httpx")
    from starlette.testclient import TestClient

    from gpuroute.server.app import create_app

    e = overlay_engine
    client = TestClient(create_app(e))
    health = client.get("/health").json()
    assert health["limits"]["max_alternatives"] == e.limits["max_alternatives"]
    row = next(r for r in health["capabilities"] if r["service"] == "route")
    assert row["alternatives"] == e.limits["max_alternatives"]
    for coords in _points(e, 4, 5):
        loc = ";".join(f"{x},{y}" for x, y in coords)
        for v, k in (("true", 1), ("2", 2), ("false", 0)):
            got = client.get(f"/route/v1/driving/{loc}?alternatives={v}&overview=false").json()
            want = e.route(coords, alternatives=k, overview="false")
            assert [r["weight"] for r in got["routes"]] == [r["weight"] for r in want["routes"]]
            assert len(got["routes"]) <= k + 1


# ------------------------------------------------------------------------------------ hierarchy only
@pytest.fixture(scope="module")
def ch_engine():
    g, _ = random_road_graph(np.random.default_rng(4), 400, one_way=0.1)
    return Engine(g, ContractionHierarchy.build(g, "travel_time", progress=False))


def test_hierarchy_alternatives_admissible(ch_engine):
    e = ch_engine
    g = e.graph
    n = g.n_nodes
    w = e._w
    v = np.flatnonzero(largest_scc_mask(g))
    rng = np.random.default_rng(2)
    ids = np.asarray(g.node_ids if g.node_ids is not None else np.arange(n), dtype=np.int64)
    pair = {(int(u), int(x)): k for k, (u, x) in enumerate(zip(ids[g.tail], ids[g.head], strict=True))}
    found = 0
    for _ in range(12):
        s, t = rng.choice(v, 2, replace=False)
        mid = lambda x: tuple(map(float, (g.coords[x] + g.coords[g.head[g.first_out[x]]]) / 2))  # noqa: E731
        coords = [mid(s), mid(t)]
        res = _both(e, coords, 3)
        src, dst = snap_options(e, coords)
        fwd = dist_from(n, e._tail, e._head, w, [int(e._head[a]) for a in src], [(1 - f) * w[a] for a, f in src.items()])
        bwd = dist_from(n, e._head, e._tail, w, [int(e._tail[b]) for b in dst], [f * w[b] for b, f in dst.items()])
        paths, best = [], None
        for r in res["routes"]:
            nodes = r["legs"][0]["annotation"]["nodes"]
            arcs = np.array([pair[(x, y)] for x, y in zip(nodes[:-1], nodes[1:], strict=True)], dtype=np.int64)
            a, b = int(arcs[0]), int(arcs[-1])
            whole = np.concatenate([[0.0], np.cumsum(w[arcs[1:]])])
            cum = (1 - src[a]) * w[a] + whole
            cost = cum[-2] + dst[b] * w[b]
            assert r["weight"] == pytest.approx(cost * e._w_scale, abs=0.051)
            if best is None:
                best = cost
                union = set(arcs.tolist())
            else:
                assert cost <= best * (1 + STRETCH) + 1e-6
                pieces = w[arcs].copy()
                pieces[0], pieces[-1] = (1 - src[a]) * w[a], dst[b] * w[b]
                assert sum(p for x, p in zip(arcs.tolist(), pieces.tolist(), strict=True) if x in union) <= \
                    SHARING * best + 1e-6
                heads = e._head[arcs]
                vias = [i for i in range(arcs.size - 1) if abs(cum[i] - fwd[heads[i]]) < 1e-6
                        and abs(cost - cum[i] - bwd[heads[i]]) < 1e-6]
                assert vias
                T = ALPHA * best
                ok = False
                for iv in vias:
                    x, y = t_window(cum, iv, T)
                    d = dist_from(n, e._tail, e._head, w, [int(heads[x])], [0.0])
                    ok = ok or (x < y and abs(d[heads[y]] - (whole[y] - whole[x])) < 1e-6)
                assert ok
                union |= set(arcs.tolist())
                found += 1
            paths.append(tuple(arcs.tolist()))
        assert len(set(paths)) == len(paths)
    assert found > 0
