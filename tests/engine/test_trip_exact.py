"""``Engine.trip`` up to ``config.TOUR_EXACT_MAX_N`` stops on the shipped Monaco extract: the order is the
optimum of brute force over every order of the engine's own cost matrix (the routing-weight table the
engine builds, caught on its way to the solver), for OSRM's roundtrip / source / destination combinations,
and the tour search (``gpuroute.tours.tsp``) is never called; past the threshold the search gets the
size-scaled budget (``SERVE_TRIP_TIME_PER_STOP_S`` x n within [``_MIN_S``, ``_MAX_S``]) unless the caller
gives a time limit; unreachable legs keep NoTrips where no order avoids them."""
import itertools
import json
import math

import numpy as np
import pytest

pytest.importorskip("osmium")
pytest.importorskip("polyline")

import gpuroute.tours  # noqa: E402
import gpuroute.tours.api  # noqa: E402
from gpuroute import config  # noqa: E402
from gpuroute.engine import Engine, EngineError  # noqa: E402
from gpuroute.engine.algorithms import CH  # noqa: E402
from gpuroute.engine.services.trip import tour  # noqa: E402
from gpuroute.geo.snap import largest_scc_mask  # noqa: E402


@pytest.fixture(scope="module")
def engine():
    return Engine.open("monaco")


def points(g, k, seed, jitter_m=40.0):
    """``k`` positions near distinct nodes of the largest strongly connected component."""
    rng = np.random.default_rng(seed)
    nodes = rng.choice(np.flatnonzero(largest_scc_mask(g)), k, replace=False)
    j = jitter_m / 111_000
    return [(float(g.coords[v, 0] + rng.uniform(-j, j) / math.cos(math.radians(43.73))),
             float(g.coords[v, 1] + rng.uniform(-j, j))) for v in nodes]


def check_trip(res, n, closed):
    """The visiting order of an answer (input indices), after checking its shape."""
    json.dumps(res, allow_nan=False)
    assert res["code"] == "Ok" and len(res["trips"]) == 1 and len(res["waypoints"]) == n
    wi = [w["waypoint_index"] for w in res["waypoints"]]
    assert sorted(wi) == list(range(n)) and all(w["trips_index"] == 0 for w in res["waypoints"])
    trip = res["trips"][0]
    assert len(trip["legs"]) == (n if closed else n - 1)
    assert trip["duration"] == pytest.approx(sum(leg["duration"] for leg in trip["legs"]), abs=0.06 * n)
    return [int(i) for i in np.argsort(wi)]


@pytest.fixture
def no_search(monkeypatch):
    """The tour search raises if called."""
    def boom(*a, **k):
        raise AssertionError("the tour search ran on a trip the exact solver should order")

    monkeypatch.setattr(gpuroute.tours, "tsp", boom)
    monkeypatch.setattr(gpuroute.tours.api, "tsp", boom)


@pytest.fixture
def matrices(monkeypatch):
    """Every cost matrix the engine orders a trip on (its routing-weight table of the snapped stops)."""
    seen = []
    orig = CH._cost_matrix

    def spy(self, sp, tp, *a, **kw):
        out = orig(self, sp, tp, *a, **kw)
        seen.append(np.array(out[0].get() if hasattr(out[0], "get") else out[0], dtype=np.float64))
        return out

    monkeypatch.setattr(CH, "_cost_matrix", spy)
    return seen


def brute(m, first, last, closed):
    """The cheapest order by enumeration: ``first``/``last`` fixed stops (or None), ``closed`` adds the
    return leg. Returns the best cost."""
    n = m.shape[0]
    mid = [v for v in range(n) if v != first and v != last]
    P = np.array([[*([first] if first is not None else []), *p, *([last] if last is not None else [])]
                  for p in itertools.permutations(mid)], dtype=np.int64)
    c = m[P[:, :-1], P[:, 1:]].sum(axis=1)
    if closed:
        c = c + m[P[:, -1], P[:, 0]]
    return float(c.min())


def cost_of(m, order, closed):
    legs = list(zip(order[:-1], order[1:], strict=True)) + ([(order[-1], order[0])] if closed else [])
    return float(sum(m[a, b] for a, b in legs))


# (n, seed, options, first, last, closed): OSRM's combinations (plugins/trip.cpp), as Engine.trip documents
CASES = [
    (4, 11, {}, 0, None, True),
    (6, 12, {"source": "first"}, 0, None, True),
    (10, 13, {}, 0, None, True),
    (7, 14, {"destination": "last"}, 6, None, True),  # a roundtrip with only destination=last starts there
    (8, 15, {"source": "first", "destination": "last"}, 0, 7, True),
    (9, 16, {"roundtrip": False, "source": "first", "destination": "last"}, 0, 8, False),
    (10, 17, {"roundtrip": False, "source": "first", "destination": "last"}, 0, 9, False),
]


@pytest.mark.parametrize("n,seed,kw,first,last,closed", CASES)
def test_small_trips_are_optimal_without_the_search(engine, no_search, matrices, n, seed, kw, first, last, closed):
    assert n <= config.TOUR_EXACT_MAX_N
    coords = points(engine.graph, n, seed)
    res = engine.trip(coords, **kw)
    order = check_trip(res, n, closed)
    m = matrices[-1]
    assert m.shape == (n, n) and np.isfinite(m).all()
    assert order[0] == first and (last is None or order[-1] == last)
    best = brute(m, first, last, closed)
    assert cost_of(m, order, closed) <= best * (1 + 1e-12)


def test_twelve_stops_exact_by_default(engine, no_search, matrices):
    """The measured case (12 stops): ordered by the exact solver; its cost is the brute-force optimum
    (every order from the fixed first stop, 11! of them, is too many: checked against orders of 9 of the
    stops with the other 3 placed as the solver placed them, i.e. a local optimality certificate)."""
    n = 12
    assert config.TOUR_EXACT_MAX_N >= n
    coords = points(engine.graph, n, 21)
    order = check_trip(engine.trip(coords), n, True)
    m = matrices[-1]
    got = cost_of(m, order, True)
    for k in range(1, n - 3):  # permute every window of 3 consecutive stops after the first
        for p in itertools.permutations(order[k:k + 3]):
            assert got <= cost_of(m, order[:k] + list(p) + order[k + 3:], True) * (1 + 1e-12)


def test_past_the_threshold_the_search_gets_a_size_scaled_budget(engine, monkeypatch):
    limits = []
    real = gpuroute.tours.api.tsp

    def spy(*a, **k):
        limits.append(k["time_limit"])
        return real(*a, **k)

    monkeypatch.setattr(gpuroute.tours, "tsp", spy)
    monkeypatch.setattr(config, "TOUR_EXACT_MAX_N", 4)
    coords = points(engine.graph, 6, 31)
    for per_stop, lo, hi, want in ((0.01, 0.02, 0.2, 0.06),  # 6 x 10 ms, inside the bounds
                                   (0.001, 0.03, 0.2, 0.03),  # 6 ms: raised to the floor
                                   (0.1, 0.02, 0.25, 0.25)):  # 0.6 s: cut to the ceiling
        monkeypatch.setattr(config, "SERVE_TRIP_TIME_PER_STOP_S", per_stop)
        monkeypatch.setattr(config, "SERVE_TRIP_TIME_MIN_S", lo)
        monkeypatch.setattr(config, "SERVE_TRIP_TIME_MAX_S", hi)
        check_trip(engine.trip(coords), 6, True)
        assert limits[-1] == pytest.approx(want)
    engine.trip(coords, time_limit=0.05)  # the caller's limit wins
    assert limits[-1] == 0.05
    assert len(limits) == 4
    limits.clear()
    engine.trip(coords[:4])  # at the threshold: exact, no search
    assert limits == []


def test_the_search_stops_once_it_stalls_within_the_budget(monkeypatch):
    """Issue 20: a 25-stop trip spent its whole budget after its search had stalled. The trip's tour search gets
    ``stall`` = ``SERVE_TRIP_STALL_KICKS_PER_STOP`` x n kicks (with the budget as the bound) on the CPU; none with
    a caller's time limit (the caller asked for that long a search), nor where the tour runs on the GPU (whose
    search has no such bound and refuses it); the order is the search's."""
    import gpuroute.engine.services.trip as trip_mod

    seen = []
    real = gpuroute.tours.api.tsp

    def spy(*a, **k):
        seen.append((k["time_limit"], k["stall"]))
        res = real(*a, **k)
        seen.append(res)
        return res

    monkeypatch.setattr(gpuroute.tours, "tsp", spy)
    monkeypatch.setattr(config, "SERVE_TRIP_STALL_KICKS_PER_STOP", 3)
    rng = np.random.default_rng(4)
    n = 20
    xy = rng.random((n, 2)) * 1000
    m = np.hypot(*(xy[:, None] - xy[None]).transpose(2, 0, 1)) + rng.random((n, n)) * 50
    order = tour(m, True, False, False)
    assert seen[0] == (pytest.approx(0.02), 60)
    # the search reports whether the bound stopped it (the bound itself is counted, not timed, in
    # tests/tours/test_time_limits.py::test_tsp_stops_once_stall_kicks_bring_no_improvement)
    assert isinstance(seen[1].stats["stalled"], bool)
    assert order == [int(v) for v in seen[1].tour]
    seen.clear()
    tour(m, True, False, False, 0.05)
    assert seen[0] == (0.05, None)
    seen.clear()
    monkeypatch.setattr(trip_mod, "tour_on_device", lambda n: True)
    monkeypatch.setattr(gpuroute.tours, "tsp", lambda *a, **k: seen.append(k["stall"]) or real(*a, **{**k, "device": "cpu"}))
    tour(m, True, False, False)
    assert seen == [None]


def test_time_limit_still_checked_on_exact_trips(engine, no_search):
    coords = points(engine.graph, 4, 41)
    for bad in (0, -1.0, float("nan"), "fast", True):
        with pytest.raises(EngineError) as ei:
            engine.trip(coords, time_limit=bad)
        assert ei.value.code == "InvalidValue"
    engine.trip(coords, time_limit=0.5)  # a valid limit: the order is exact all the same


def test_unreachable_legs(no_search):
    """The trip service's tour on hand-made matrices: an open trip takes the one order without an unreachable leg;
    a roundtrip needs every pair reachable (as before); no order at all: NoTrips."""
    inf = np.inf
    m = np.array([[0, 1, 9, inf, inf],
                  [inf, 0, inf, 1, inf],
                  [inf, inf, 0, inf, 1],
                  [inf, inf, 1, 0, inf],
                  [inf, inf, inf, inf, 0]], dtype=np.float64)
    assert tour(m, False, True, True) == [0, 1, 3, 2, 4]
    for roundtrip, start, end in ((True, False, False), (True, True, True), (True, False, True)):
        with pytest.raises(EngineError) as ei:
            tour(m, roundtrip, start, end)
        assert ei.value.code == "NoTrips"
    m[3, 2] = inf  # 0 -> 1 -> 3 is a dead end now
    with pytest.raises(EngineError) as ei:
        tour(m, False, True, True)
    assert ei.value.code == "NoTrips"
