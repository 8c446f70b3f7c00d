"""``Engine.trip`` (OSRM ``/trip/v1``) on the shipped Monaco extract: every waypoint visited once,
``trips_index``/``waypoint_index`` consistent, the trip's duration the sum of its legs and the table cost
of the chosen order, the order optimal (brute force over every order) for a few stops, OSRM's
source/destination/roundtrip combinations and its error codes; NoTrips on a hand-made graph."""
import itertools
import json
import math

import numpy as np
import pytest

pytest.importorskip("osmium")
pytest.importorskip("polyline")

from gpuroute.ch.api import ContractionHierarchy  # noqa: E402
from gpuroute.engine import Engine, EngineError  # noqa: E402
from gpuroute.geo.segments import SegmentIndex  # noqa: E402
from gpuroute.geo.snap import largest_scc_mask  # noqa: E402
from gpuroute.graph.road_graph import RoadGraph  # noqa: E402


@pytest.fixture(scope="module")
def engine():
    return Engine.open("monaco")


def points(g, k, seed, jitter_m=40.0):
    rng = np.random.default_rng(seed)
    nodes = rng.choice(np.flatnonzero(largest_scc_mask(g)), k, replace=False)
    j = jitter_m / 111_000
    return [(float(g.coords[v, 0] + rng.uniform(-j, j) / math.cos(math.radians(43.73))),
             float(g.coords[v, 1] + rng.uniform(-j, j))) for v in nodes]


def durations(engine, coords):
    return np.array(engine.table(coords)["durations"], dtype=np.float64)


def order_of(res):
    """The visiting order (input indices) from the waypoints' ``waypoint_index``."""
    wi = [w["waypoint_index"] for w in res["waypoints"]]
    assert sorted(wi) == list(range(len(wi)))  # every waypoint visited once
    assert all(w["trips_index"] == 0 for w in res["waypoints"])
    return [int(i) for i in np.argsort(wi)]


def path_cost(m, order, closed):
    legs = list(zip(order[:-1], order[1:], strict=True)) + ([(order[-1], order[0])] if closed else [])
    return sum(m[a, b] for a, b in legs)


def check_trip(engine, coords, res, closed):
    n = len(coords)
    json.dumps(res, allow_nan=False)
    assert res["code"] == "Ok" and len(res["trips"]) == 1 and len(res["waypoints"]) == n
    trip = res["trips"][0]
    order = order_of(res)
    assert len(trip["legs"]) == (n if closed else n - 1)
    # the trip's duration is the sum of its legs, and each leg is the table's cell of the order
    assert trip["duration"] == pytest.approx(sum(leg["duration"] for leg in trip["legs"]), abs=0.06 * n)
    m = durations(engine, coords)
    legs = list(zip(order[:-1], order[1:], strict=True)) + ([(order[-1], order[0])] if closed else [])
    for leg, (a, b) in zip(trip["legs"], legs, strict=True):
        assert leg["duration"] == pytest.approx(m[a, b], abs=0.11)
    assert trip["duration"] == pytest.approx(path_cost(m, order, closed), abs=0.06 * n + 0.1)
    # the waypoints are the snapped inputs (as /route reports them)
    snapped = engine.route([coords[0], coords[1]])["waypoints"]
    assert res["waypoints"][0]["location"] == snapped[0]["location"]
    return order, m


@pytest.mark.parametrize("n,seed", [(2, 1), (5, 2), (7, 3)])
def test_roundtrip_is_optimal_for_few_stops(engine, n, seed):
    coords = points(engine.graph, n, seed)
    res = engine.trip(coords)
    order, m = check_trip(engine, coords, res, closed=True)
    assert order[0] == 0  # OSRM: a roundtrip starts at the first coordinate
    best = min(path_cost(m, [0, *p], True) for p in itertools.permutations(range(1, n)))
    assert path_cost(m, order, True) <= best + 0.1 * n  # the table is rounded to 0.1 s


def test_open_trip_first_to_last(engine):
    n = 6
    coords = points(engine.graph, n, 4)
    res = engine.trip(coords, roundtrip=False, source="first", destination="last")
    order, m = check_trip(engine, coords, res, closed=False)
    assert order[0] == 0 and order[-1] == n - 1
    assert res["waypoints"][0]["waypoint_index"] == 0 and res["waypoints"][-1]["waypoint_index"] == n - 1
    best = min(path_cost(m, [0, *p, n - 1], False) for p in itertools.permutations(range(1, n - 1)))
    assert path_cost(m, order, False) <= best + 0.1 * n


def test_roundtrip_source_and_destination(engine):
    n = 5
    coords = points(engine.graph, n, 5)
    res = engine.trip(coords, source="first", destination="last")  # 0 .. n-1, then back to 0
    order, m = check_trip(engine, coords, res, closed=True)
    assert order[0] == 0 and order[-1] == n - 1
    res = engine.trip(coords, destination="last")  # OSRM: the roundtrip starts at the last coordinate
    order, m = check_trip(engine, coords, res, closed=True)
    assert order[0] == n - 1
    best = min(path_cost(m, list(p), True) for p in itertools.permutations(range(n)))
    assert path_cost(m, order, True) <= best + 0.1 * n


def test_route_options_pass_through(engine):
    coords = points(engine.graph, 4, 6)
    res = engine.trip(coords, steps=True, geometries="geojson", overview="full", annotations=["duration"],
                      radiuses=[200, None, "unlimited", 300], bearings=None)
    trip = res["trips"][0]
    assert trip["geometry"]["type"] == "LineString"
    order = order_of(res)
    first = res["waypoints"][order[0]]["location"]
    assert trip["geometry"]["coordinates"][0] == pytest.approx(first, abs=1e-6)
    assert trip["geometry"]["coordinates"][-1] == pytest.approx(first, abs=1e-6)  # back where it started
    for leg in trip["legs"]:
        types_ = [s["maneuver"]["type"] for s in leg["steps"]]
        assert types_[0] == "depart" and types_[-1] == "arrive"
        assert "duration" in leg["annotation"]
    assert "geometry" not in engine.trip(coords, overview="false")["trips"][0]


@pytest.mark.parametrize("source,destination", [("any", "any"), ("first", "any"), ("any", "last")])
def test_unsupported_combinations(engine, source, destination):
    coords = points(engine.graph, 3, 7)
    with pytest.raises(EngineError) as ei:
        engine.trip(coords, roundtrip=False, source=source, destination=destination)
    assert ei.value.code == "NotImplemented"


def test_errors(engine, monkeypatch):
    coords = points(engine.graph, 4, 8)
    monkeypatch.setitem(engine.limits, "max_locations_trip", 3)
    with pytest.raises(EngineError) as ei:
        engine.trip(coords)
    assert ei.value.code == "TooBig"
    monkeypatch.undo()
    for kw, code in (({"source": "middle"}, "InvalidOptions"), ({"destination": "first"}, "InvalidOptions"),
                     ({"roundtrip": "maybe"}, "InvalidOptions"), ({"time_limit": 0}, "InvalidValue"),
                     ({"radiuses": [1, 2]}, "InvalidOptions")):
        with pytest.raises(EngineError) as ei:
            engine.trip(coords, **kw)
        assert ei.value.code == code, kw
    with pytest.raises(EngineError) as ei:
        engine.trip(coords[:1])
    assert ei.value.code == "InvalidOptions"
    with pytest.raises(EngineError) as ei:
        engine.trip([(7.42, 43.73), (200.0, 43.73)])
    assert ei.value.code == "InvalidValue"


# ---------------------------------------------------------------- unreachable stops
@pytest.fixture(scope="module")
def tiny():
    """A two-way street 0-1-2 with a one-way 2 -> 3 further east, and a separate street 4-5 to the north."""
    lon = [7.400, 7.401, 7.402, 7.403, 7.400, 7.401]
    lat = [43.7, 43.7, 43.7, 43.7, 43.718, 43.718]
    tail = [0, 1, 1, 2, 2, 4, 5]
    head = [1, 0, 2, 1, 3, 5, 4]
    gr = RoadGraph.from_arcs(6, tail, head, {"travel_time": [100, 100, 200, 200, 50, 100, 100]},
                             units={"travel_time": "ds"}, coords=np.column_stack([lon, lat]), name="tiny")
    ch = ContractionHierarchy.build(gr, "travel_time", method="sequential", progress=False)
    return Engine(gr, ch, segments=SegmentIndex(gr, component="any"))


def test_no_trips(tiny):
    a, b, one_way, north = (7.4005, 43.7), (7.4015, 43.7), (7.4025, 43.7), (7.4005, 43.718)
    for coords, kw in (([a, b, north], {}), ([a, one_way], {}),  # no tour returns from the one-way street
                       ([one_way, b, a], {"roundtrip": False, "source": "first", "destination": "last"})):
        with pytest.raises(EngineError) as ei:
            tiny.trip(coords, **kw)
        assert ei.value.code == "NoTrips", coords
    # an open trip onto the one-way street exists
    res = tiny.trip([a, b, one_way], roundtrip=False, source="first", destination="last")
    assert order_of(res) == [0, 1, 2]
    assert res["trips"][0]["duration"] == pytest.approx(0.5 * 10 + 20 + 0.5 * 5, abs=0.11)
