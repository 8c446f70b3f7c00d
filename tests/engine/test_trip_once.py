"""A trip snaps once and reads one metric (issue 19): ``Engine.trip`` snaps its coordinates in ONE batch
(the legs reuse the trip's PhantomSet, reordered), its legs are the route through the same coordinates in
the trip's order (the oracle: ``Engine.route`` on the reordered coordinates, ``continue_straight=False``),
and a ``/customize`` landing between the trip's matrix and its legs changes neither (one metric snapshot for
the whole request). Small random road graphs with turn restrictions, over the overlay and over the
hierarchy."""
from __future__ import annotations

import numpy as np
import pytest
from crp_oracle import with_restrictions
from naive import random_road_graph

from gpuroute import ContractionHierarchy, Overlay, Partition
from gpuroute.engine import Engine
from gpuroute.engine.params import TripParams
from gpuroute.engine.services import trip as trip_service
from gpuroute.geo.segments import SegmentIndex
from gpuroute.geo.snap import largest_scc_mask


def _engine(overlay, seed=5):
    rng = np.random.default_rng(seed)
    g, _ = random_road_graph(rng, 70, one_way=0.2)
    g = with_restrictions(g, rng, 10)
    ch = ContractionHierarchy.build(g, "travel_time", progress=False)
    if not overlay:
        return Engine(g, ch)
    ov = Overlay.build(g, Partition.build(g, cell_sizes=(6, 20), seed=1))
    ov.customize()
    return Engine(g, ch, overlay=ov)


@pytest.fixture(scope="module", params=["overlay", "hierarchy"])
def engine(request):
    return _engine(request.param == "overlay")


def _points(e, k, seed):
    """``k`` coordinates near distinct nodes of the snapping component (a few metres off the node)."""
    rng = np.random.default_rng(seed)
    g = e.graph
    v = rng.choice(np.flatnonzero(largest_scc_mask(g)), k, replace=False)
    return [(float(g.coords[x, 0]) + 1e-5, float(g.coords[x, 1]) - 1e-5) for x in v]


def _order(res):
    wi = [w["waypoint_index"] for w in res["waypoints"]]
    assert sorted(wi) == list(range(len(wi)))
    return [int(i) for i in np.argsort(wi)]


def _oracle(e, coords, res, roundtrip, **options):
    """The route through ``coords`` in the trip's order (back to the first on a roundtrip)."""
    order = _order(res)
    seq = order + ([order[0]] if roundtrip else [])
    return order, e.route([coords[i] for i in seq], continue_straight=False, **options)


def _count_snaps(monkeypatch):
    calls = []
    snap = SegmentIndex.snap_checked

    def counting(self, lon, lat, **kw):
        calls.append(int(np.size(lon)))
        return snap(self, lon, lat, **kw)

    monkeypatch.setattr(SegmentIndex, "snap_checked", counting)
    return calls


@pytest.mark.parametrize("roundtrip", [True, False])
def test_trip_snaps_once(engine, monkeypatch, roundtrip):
    """One snapping batch of all n coordinates per trip, from Python and from a checked record (the HTTP
    server's path); before, the legs' route snapped every coordinate again."""
    coords = _points(engine, 6, 1)
    kw = {} if roundtrip else {"roundtrip": False, "source": "first", "destination": "last"}
    calls = _count_snaps(monkeypatch)
    engine.trip(coords, **kw)
    assert calls == [len(coords)]
    calls.clear()
    engine.run(TripParams.from_kwargs(coords, limits=engine.limits, **kw))
    assert calls == [len(coords)]


@pytest.mark.parametrize("roundtrip,seed", [(True, 2), (False, 3), (True, 4)])
def test_trip_legs_are_the_route_in_order(engine, roundtrip, seed):
    """The trip's route object is the route through the same coordinates in its order, and each waypoint
    is that route's (its snapped location, hint, distance, name)."""
    coords = _points(engine, 5, seed)
    opts = {"steps": True, "annotations": True, "overview": "full", "geometries": "geojson"}
    kw = {} if roundtrip else {"roundtrip": False, "source": "first", "destination": "last"}
    res = engine.trip(coords, **kw, **opts)
    order, ref = _oracle(engine, coords, res, roundtrip, **opts)
    assert res["trips"] == ref["routes"]
    for j, i in enumerate(order):
        wp = dict(res["waypoints"][i])
        assert (wp.pop("waypoint_index"), wp.pop("trips_index")) == (j, 0)
        assert wp == ref["waypoints"][j]


def test_customize_mid_trip_changes_nothing(monkeypatch):
    """A customization landing after the trip's matrix and before its legs: the trip is the one on the
    metric it started with (legs included), while a route started afterwards follows the new metric."""
    e = _engine(True, seed=7)
    coords = _points(e, 5, 6)
    before = e.trip(coords, overview="full")
    new = "time" if e.info["metric"] == "distance" else "distance"
    tour = trip_service.tour
    landed = []

    def tour_then_customize(*a, **kw):
        order = tour(*a, **kw)
        landed.append(e.customize(metric=new)["metric"])
        return order

    monkeypatch.setattr(trip_service, "tour", tour_then_customize)
    during = e.trip(coords, overview="full")
    assert landed == [new]
    assert during == before
    order, after = _oracle(e, coords, before, True, overview="full")
    assert after["routes"][0]["weight"] != before["trips"][0]["weight"]  # the new metric is in force
