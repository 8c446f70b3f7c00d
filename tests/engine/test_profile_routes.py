"""Routes on a dataset built with an OSRM Lua profile (``gpuroute build X.osm.pbf --profile car``): the
overlay is customized with the profile's weight and per-turn weights, and ``/route`` answers OSRM's
``weight``, ``weight_name``, ``duration`` (segment durations + the durations of the turns taken) and
``distance``; snapping follows ``is_startpoint``; restricted (destination-only) streets are reachable
at the ends of a route and charged on entry.

Oracles: a turn-aware Dijkstra on the arc graph built from the graph's own arc weights and turn costs
(``tests/turn_oracle.py``'s phantom search, fed the profile's costs, not the overlay's), and the
route's arcs read back from its node annotation (durations summed independently).
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("lupa", reason="lupa (pip install 'gpuroute[lua]') runs the Lua profiles")
pytest.importorskip("osmium")

from osrm_peer import osrm_bin_dir, osrm_profiles_dir  # noqa: E402
from phantoms import point, points  # noqa: E402
from turn_oracle import phantom_cost, route_arcs  # noqa: E402

from gpuroute.crp.metric import decode_turn_costs  # noqa: E402
from gpuroute.engine import Engine  # noqa: E402
from gpuroute.engine.dataset import load_dataset  # noqa: E402
from gpuroute.graph.turn_costs import turn_arrays  # noqa: E402
from gpuroute.io import lua_extract  # noqa: E402
from gpuroute.pipeline import build_dataset  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MONACO = ROOT / "src" / "gpuroute" / "datasets" / "data" / "monaco.osm.pbf"
CELLS = (64, 1024)


@pytest.fixture(scope="module")
def profiles():
    return osrm_profiles_dir(osrm_bin_dir(required=False))  # skips with the reason where OSRM is absent


@pytest.fixture(scope="module")
def monaco(profiles, monaco_car_dir):
    return monaco_car_dir  # the session's Monaco with car.lua, cells CELLS (tests/conftest.py)


@pytest.fixture(scope="module")
def engine(monaco):
    return Engine.open(monaco)


def _profile_tg(g):
    """The turn-expanded graph of the profile's own costs: turns (in, out) with turn weight + out-arc weight."""
    tc = g.turn_costs
    _, t_in, t_out = turn_arrays(g.first_out, g.head)
    w = g.weight("weight").astype(np.float64)
    ok = tc.weight >= 0
    return t_in[ok], t_out[ok], tc.weight[ok].astype(np.float64) + w[t_out[ok]], w


class _Arcs:
    """The ``ov`` phantom_cost reads: the graph (for its arc count)."""

    def __init__(self, g):
        self.graph = g


def _points(e, k, seed):
    """Points at 30..70 % of random segments where a waypoint may snap (one segment each)."""
    g = e.graph
    seg = e.segments
    rng = np.random.default_rng(seed)
    pick = rng.choice(seg.n_segments, 2 * k)
    f = rng.uniform(0.3, 0.7, 2 * k)
    lon = seg.lon_u[pick] + f * (seg.lon_v[pick] - seg.lon_u[pick])
    lat = seg.lat_u[pick] + f * (seg.lat_v[pick] - seg.lat_u[pick])
    assert g.n_arcs
    return [[(float(lon[2 * i]), float(lat[2 * i])), (float(lon[2 * i + 1]), float(lat[2 * i + 1]))] for i in range(k)]


def test_dataset_routes_by_the_profiles_weight(monaco, engine):
    ds = load_dataset(monaco)
    assert ds.manifest["weight"] == "weight" and ds.manifest["metric"] == "routability"
    assert ds.profile == "car" and engine.weight_name == "routability"  # OSRM's own car.lua is "car"
    assert ds.graph.turn_costs is not None and engine.overlay.metric.turn_cost is not None


def test_an_extract_opened_with_a_lua_profile_pays_the_turn_costs(profiles, engine):
    """``Engine.open(X.osm.pbf, profile=car.lua)`` (and ``gpuroute serve X.osm.pbf``) builds the overlay in
    memory: routes and tables pay the profile's turn costs as the dataset's do (the hierarchy alone did
    not: 4-12 % short of OSRM's durations)."""
    e = Engine.open(MONACO, profile=profiles / "car.lua")
    assert e.overlay is not None and e.weight_name == "routability"
    caps = {c["service"]: c for c in e.capabilities}
    assert all(caps[s]["turn_aware"] for s in ("route", "table", "trip", "isochrone"))
    pairs = _points(e, 12, 21)
    for a, b in pairs:
        r0 = engine.route([a, b], overview="false")["routes"][0]
        r1 = e.route([a, b], overview="false")["routes"][0]
        assert r1["weight"] == pytest.approx(r0["weight"], abs=0.11)
        assert r1["duration"] == pytest.approx(r0["duration"], abs=0.11)
    pts = [p for pair in pairs[:5] for p in pair]
    t0 = np.array(engine.table(pts)["durations"], dtype=float)
    t1 = np.array(e.table(pts)["durations"], dtype=float)
    np.testing.assert_allclose(t1, t0, atol=0.11)


def test_routes_equal_the_turn_aware_oracle(engine):
    """weight = least (arc weights + turn weights) between the phantoms, by the oracle on the profile's
    costs; duration = the durations of the route's segments (fractions at the ends) + its turns'."""
    g = engine.graph
    tg = _profile_tg(g)
    tc = g.turn_costs
    first = turn_arrays(g.first_out, g.head)[0]
    dur = g.weight("travel_time").astype(np.float64) * 0.1
    n_turn_cost = 0
    for pts in _points(engine, 20, 7):
        r = engine.route(pts, overview="false", annotations=["nodes", "duration"])["routes"][0]
        assert r["weight_name"] == "routability"
        sp = [point(engine.segments.snap(*p)) for p in pts]
        want = phantom_cost(_Arcs(g), sp[0], sp[1], tg) * 0.1
        assert r["weight"] == pytest.approx(want, abs=0.051), pts
        arcs = route_arcs(engine, r)
        turn_d = sum(int(tc.duration[first[a] + b - g.first_out[g.head[a]]]) for a, b in zip(arcs[:-1], arcs[1:], strict=True))
        n_turn_cost += turn_d > 0
        seg = r["legs"][0]["annotation"]["duration"]
        assert len(seg) == len(arcs)
        inner = dur[arcs[1:-1]].sum() if len(arcs) > 2 else 0.0
        assert sum(seg[1:-1]) == pytest.approx(inner, abs=0.051 * len(arcs))
        assert r["duration"] == pytest.approx(sum(seg) + turn_d * 0.1, abs=0.05 * (len(arcs) + 2)), pts
    assert n_turn_cost >= 5  # the routes do pay turns


def test_overlay_reload_keeps_the_turn_costs(monaco, engine):
    """A customized overlay saved and loaded again decodes to the same turn costs (the per-turn costs
    travel with it), so a traffic update on either device keeps the profile's turn weights."""
    ov = engine.overlay
    assert np.array_equal(decode_turn_costs(ov.metric, ov.turns), np.asarray(ov.turn_cost))
    arc = int(np.flatnonzero(np.asarray(ov.arc_cost) > 10)[0])
    ov2 = Engine.open(monaco).overlay
    ov2.update(np.array([arc]), np.array([int(ov2.arc_cost[arc]) * 3]), device="cpu")
    assert np.array_equal(decode_turn_costs(ov2.metric, ov2.turns), np.asarray(ov2.turn_cost))


# ------------------------------------------------------------------------------------------ a small town
def _osm(path, items):
    path.write_text('<?xml version="1.0" encoding="UTF-8"?>\n<osm version="0.6" generator="test">\n'
                    + "\n".join(items) + "\n</osm>\n")
    return str(path)


def _node(i, lat, lon):
    return f'<node id="{i}" version="1" lat="{lat:.7f}" lon="{lon:.7f}"/>'


def _way(i, refs, **tags):
    return (f'<way id="{i}" version="1">' + "".join(f'<nd ref="{r}"/>' for r in refs)
            + "".join(f'<tag k="{k}" v="{v}"/>' for k, v in tags.items()) + "</way>")


@pytest.fixture(scope="module")
def town(profiles, tmp_path_factory):
    """A main road 1-2-3-4 with a destination-only shortcut 1-5-4 (shorter) and a ferry 4-6, 6-7."""
    tmp = tmp_path_factory.mktemp("town")
    items = [_node(1, 43.700, 7.400), _node(2, 43.702, 7.402), _node(3, 43.702, 7.406), _node(4, 43.700, 7.408),
             _node(5, 43.700, 7.404), _node(6, 43.696, 7.408), _node(7, 43.696, 7.412),
             _way(10, [1, 2, 3, 4], highway="primary", name="Main"),
             _way(11, [1, 5, 4], highway="residential", name="Private", access="destination"),
             _way(12, [4, 6], route="ferry", duration="00:05"),
             _way(13, [6, 7], highway="residential", name="Far")]
    src = _osm(tmp / "town.osm", items)
    d = tmp / "ds"
    build_dataset(src, d, profile=profiles / "car.lua", cell_sizes=(4,))
    return Engine.open(d)


def test_restricted_streets_are_avoided_between_but_usable_at_the_ends(town):
    """OSRM's rule for access=destination: a route may start or end on such a street (the entry is
    charged car.lua's max_turn_weight), and between two other places it takes the longer main road."""
    main_a, main_b = (7.4005, 43.7005), (7.4075, 43.7005)  # on Main near 1 and near 4
    r = town.route([main_a, main_b], overview="false", annotations=["nodes"])["routes"][0]
    assert 5 not in r["legs"][0]["annotation"]["nodes"]
    assert r["weight"] < 3276.7
    r2 = town.route([main_a, (7.402, 43.700)], overview="false", annotations=["nodes"])["routes"][0]
    assert r2["weight"] > 3276.7 > r2["duration"]  # entering the destination street: the weight penalty
    r3 = town.route([(7.402, 43.700), (7.406, 43.700)], overview="false")["routes"][0]
    assert r3["weight"] < 3276.7  # start and end on it: no entry to pay


def test_snapping_follows_is_startpoint(town):
    """A point on the ferry line snaps to a road (car.lua: no waypoint on a ferry), never the ferry."""
    g = town.graph
    w = town.route([(7.4080, 43.6980), (7.4110, 43.6960)], overview="false")["waypoints"]
    ids = list(g.node_ids)
    ferry = {(ids.index(4), ids.index(6)), (ids.index(6), ids.index(4))}
    for p in points(town.segments.snap_many([(7.4080, 43.6980)])):
        assert all((int(g.tail[a]), int(g.head[a])) not in ferry for a, _ in p.all_arcs)
    assert w[0]["distance"] > 10  # the nearest startpoint segment is off the ferry line
    assert math.isfinite(w[1]["distance"])


def test_customize_names_the_profiles_metrics(town):
    """/customize takes the profile's metrics by name (its weight_name, duration, distance), not the
    turn-less ``time``."""
    from gpuroute.engine import EngineError

    with pytest.raises(EngineError, match="routability, duration, distance"):
        town.customize(metric="time")
    town.customize(metric="duration")
    r = town.route([(7.4005, 43.7005), (7.4075, 43.7005)], overview="false")["routes"][0]
    assert r["weight_name"] == "duration" and r["weight"] == pytest.approx(r["duration"], abs=0.11)
    town.customize(metric="routability")


def test_engine_reports_lua_profile_names(profiles, monkeypatch):
    monkeypatch.setenv(lua_extract.PROFILES_ENV, str(profiles))
    assert lua_extract.find_osrm_profile("car") == profiles / "car.lua"


def test_continue_straight_defaults_to_the_profiles(town, profiles, tmp_path):
    """OSRM's continue_straight_at_waypoint: true for car.lua, false for foot.lua; the engine's default."""
    a, b = (7.4005, 43.7005), (7.4040, 43.7020)  # on Main, then halfway along it: come back to a
    pts = [a, b, a]
    car = {cs: town.route(pts, overview="false", continue_straight=cs)["routes"][0]["weight"] for cs in (True, False)}
    assert car[True] > car[False]  # going on at b costs more than turning there
    assert town.route(pts, overview="false")["routes"][0]["weight"] == car[True]
    assert town.graph.meta["continue_straight_at_waypoint"] is True
    src = town.graph.meta["source"]
    build_dataset(src, tmp_path / "foot", profile=profiles / "foot.lua", cell_sizes=(4,))
    foot = Engine.open(tmp_path / "foot")
    assert foot.graph.meta["continue_straight_at_waypoint"] is False
    want = foot.route(pts, overview="false", continue_straight=False)["routes"][0]["weight"]
    assert foot.route(pts, overview="false", continue_straight=True)["routes"][0]["weight"] > want
    assert foot.route(pts, overview="false")["routes"][0]["weight"] == want
