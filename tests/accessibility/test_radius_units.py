"""pandana users pass metres: a radius is a quantity with its unit (``"2 km"``, ``2000, unit="m"``, or the
weight's own unit said explicitly), and a bare number is refused where it is ambiguous (a weight whose unit
is neither metres nor seconds, e.g. the DIMACS ~0.1 m steps or deciseconds). Oracle: the same query with the
radius converted by hand into the weight's unit."""
from __future__ import annotations

import numpy as np
import pytest
from naive import random_road_graph

from gpuroute import RoadGraph
from gpuroute import accessibility as acc
from gpuroute.graph.units import DECISECOND, DIMACS_DISTANCE, METRE, to_weight_units


def with_units(g, units):
    return RoadGraph(g.first_out, g.head, g.weights, units=units, coords=g.coords, name=g.name)


@pytest.fixture(scope="module")
def graphs():
    g, _ = random_road_graph(np.random.default_rng(4), 80)
    return (with_units(g, {"distance": DIMACS_DISTANCE, "travel_time": DECISECOND}),
            with_units(g, {"distance": METRE, "travel_time": DECISECOND}))


def test_bare_radius_on_an_ambiguous_unit_is_refused(graphs):
    g, _ = graphs
    for call in (lambda: acc.aggregate(g, [0, 5], None, 20000, device="cpu"),
                 lambda: acc.nearest_pois(g, [0, 5], 20000, 2, device="cpu"),
                 lambda: acc.aggregate(g, [0, 5], None, 600, weight="travel_time", device="cpu")):
        with pytest.raises(ValueError, match=r"bare number.*unit="):
            call()


def test_radius_with_units_equals_the_hand_converted_radius(graphs):
    g, _ = graphs
    nodes, vals = np.array([0, 5, 17, 40, 41]), np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    want = acc.aggregate(g, nodes, vals, 20000, unit="native", device="cpu")  # 2 km in 0.1 m steps
    assert want.sum() > 0
    for radius, unit in (("2 km", None), ("2000 m", None), ("2000m", None), (2000, "m"), (2, "km"),
                         ("20000 dimacs-d", None)):
        np.testing.assert_array_equal(acc.aggregate(g, nodes, vals, radius, unit=unit, device="cpu"), want)
    t = acc.aggregate(g, nodes, vals, "1 min", weight="travel_time", device="cpu")
    np.testing.assert_array_equal(t, acc.aggregate(g, nodes, vals, 600, weight="travel_time", unit="native",
                                                   device="cpu"))


def test_nearest_distances_come_back_in_the_callers_unit(graphs):
    g, _ = graphs
    d_native, i_native = acc.nearest_pois(g, [0, 5, 17], 20000, 2, unit="native", device="cpu")
    d_km, i_km = acc.nearest_pois(g, [0, 5, 17], "2 km", 2, device="cpu")
    np.testing.assert_array_equal(i_km, i_native)
    np.testing.assert_allclose(d_km, d_native * 0.1 / 1000, rtol=1e-12)   # missing ones: the radius, 2 km
    d_m, _ = acc.nearest_pois(g, [0, 5, 17], 2000, 2, unit="m", device="cpu")
    np.testing.assert_allclose(d_m, d_native * 0.1, rtol=1e-12)


def test_bare_radius_in_metres_is_metres(graphs):
    _, g = graphs
    np.testing.assert_array_equal(acc.aggregate(g, [0, 5], None, 2000, device="cpu"),
                                  acc.aggregate(g, [0, 5], None, "2 km", device="cpu"))


@pytest.mark.parametrize("value, unit, words", [
    ("2 parsecs", None, "unknown unit"), ("10 min", None, "not a time"), (5, "min", "not a time"),
    ("٩.5", None, "expected a number"), ("2 km", "m", "names its unit"), (-1, "m", ">= 0"),
    (float("nan"), "m", ">= 0"), (True, None, "number"), (5, "furlong", "unit must be"),
])
def test_bad_quantities_are_named(value, unit, words):
    with pytest.raises((ValueError, TypeError), match=words):
        to_weight_units(value, METRE, unit=unit, what="radius")
