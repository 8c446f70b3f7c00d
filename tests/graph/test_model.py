"""The graph model: structured units, arc attributes kept with their arc, turn restrictions, coordinate
checks, the derived-structure cache."""
from __future__ import annotations

import numpy as np
import pytest

from gpuroute import GraphError, RoadGraph, TurnRestrictions
from gpuroute.graph import units
from gpuroute.graph.turns import NO, ONLY


def test_units_are_quantity_and_scale():
    """Section 2: units were free strings parsed by the CLI ("dimacs-t" never explained, an OSM travel
    time printed as a distance). A unit now says what it measures and its scale to SI."""
    g = RoadGraph.from_arcs(2, [0], [1], {"travel_time": [1918], "distance": [12345]})
    tt, d = g.units["travel_time"], g.units["distance"]
    assert (tt.quantity, tt.scale, tt.symbol) == ("time", 0.1, "ds") and tt.is_duration
    assert (d.quantity, d.scale, d.symbol) == ("length", 1.0, "m") and d.is_distance
    assert tt.describe(1918) == "3 min 12 s" and tt.format(1918) == "1,918 ds (3 min 12 s)"
    assert d.describe(12345) == "12.35 km" and d.describe(850) == "850 m"
    assert units.DIMACS_DISTANCE.describe(123450) == "~12.35 km"
    assert units.DIMACS_TIME.quantity == "time" and units.DIMACS_TIME.approximate and units.DIMACS_TIME.note
    assert units.HOUR.describe(2) == "2 h 00 min"
    custom = units.scaled(units.MILE, 1000)
    assert custom.symbol == "mi/1000" and custom.scale == pytest.approx(1.609344)
    assert units.Unit.from_json(custom.to_json()) == custom
    assert units.parse_unit("furlongs").scale is None and units.parse_unit("furlongs").describe(3) == ""
    with pytest.raises(ValueError, match="quantity"):
        units.Unit("x", "weight")
    with pytest.raises(ValueError, match="scale"):
        units.Unit("x", "length", -1.0)


def test_arc_attributes_follow_the_kept_arc():
    g = RoadGraph.from_arcs(3, [0, 0, 1, 1], [1, 1, 2, 1], {"time": [9, 4, 3, 1], "dist": [100, 200, 50, 7]},
                            arc_attrs={"way_id": [10, 20, 30, 40], "speed": [5.0, 9.0, 1.0, 2.0]})
    assert g.n_arcs == 2 and g.meta["parallel_arcs_dropped"] == 1 and g.meta["self_loops_dropped"] == 1
    a01 = int(np.flatnonzero((g.tail == 0) & (g.head == 1))[0])
    assert (int(g.weights["time"][a01]), int(g.weights["dist"][a01])) == (4, 200)  # one real arc: way 20
    assert (int(g.arc_attrs["way_id"][a01]), float(g.arc_attrs["speed"][a01])) == (20, 9.0)
    with pytest.raises(GraphError, match="arc attribute 'x' has shape"):
        RoadGraph.from_arcs(2, [0], [1], {"w": [1]}, arc_attrs={"x": [1, 2]})
    with pytest.raises(GraphError, match="numeric"):
        RoadGraph.from_arcs(2, [0], [1], {"w": [1]}, arc_attrs={"x": np.array(["a"])})
    with pytest.raises(GraphError, match="both a weight and an arc attribute"):
        RoadGraph.from_arcs(2, [0], [1], {"w": [1]}, arc_attrs={"w": [1]})


def test_turns_map_to_kept_arcs_and_are_validated():
    # input arcs: 0: 0->1, 1: 1->2, 2: 1->2 (heavier, dropped), 3: 1->0
    t = TurnRestrictions([0, 0, 0], [1, 2, 3], [NO, ONLY, NO])
    g = RoadGraph.from_arcs(3, [0, 1, 1, 1], [1, 2, 2, 0], {"w": [1, 1, 5, 1]}, turns=t)
    assert len(g.turns) == 2 and g.turns.meta["dropped"] == 1
    assert g.turns.counts() == {"no": 2, "only": 0}
    for i, o in zip(g.turns.in_arc, g.turns.out_arc, strict=True):
        assert g.head[i] == g.tail[o] == 1
    a01 = int(np.flatnonzero((g.tail == 0) & (g.head == 1))[0])
    a12 = int(np.flatnonzero((g.tail == 1) & (g.head == 2))[0])
    fi, fo = TurnRestrictions([a01], [a12], [ONLY]).forbidden_pairs(g.first_out, g.head)
    # only 0->1->2 allowed from arc (0->1): the U-turn 1->0 is forbidden
    assert list(fi) == [a01] and g.head[fo[0]] == 0
    with pytest.raises(GraphError, match="do not meet|starts at"):
        RoadGraph(g.first_out, g.head, g.weights, turns=TurnRestrictions([0], [0], [NO]))
    with pytest.raises(GraphError, match="kind"):
        TurnRestrictions([0], [1], [7])


def test_coordinates_checked_on_construction():
    """Section 2: lon/lat coordinates are validated on construction (main accepted lon=500)."""
    with pytest.raises(GraphError, match="node 1 .* longitude in \\[-180, 180\\]"):
        RoadGraph.from_arcs(2, [0], [1], {"w": [1]}, coords=[[0.0, 0.0], [500.0, 1.0]])
    with pytest.raises(GraphError, match="latitude"):
        RoadGraph.from_arcs(2, [0], [1], {"w": [1]}, coords=[[0.0, 0.0], [1.0, 95.0]])
    with pytest.raises(GraphError, match="finite"):
        RoadGraph.from_arcs(2, [0], [1], {"w": [1]}, coords=[[0.0, np.nan], [1.0, 1.0]])
    g = RoadGraph.from_arcs(2, [0], [1], {"w": [1]}, coords=[[1000.0, 2000.0], [1500.0, 2000.0]],
                            coord_system="planar")
    assert g.is_planar
    with pytest.raises(GraphError, match="coord_system"):
        RoadGraph.from_arcs(2, [0], [1], {"w": [1]}, coord_system="mercator")


def test_derived_structures_have_one_home():
    g = RoadGraph.from_arcs(2, [0], [1], {"w": [1]})
    calls = []
    a = g.derived("k", lambda: calls.append(1) or object())
    assert g.derived("k", lambda: calls.append(1) or object()) is a and calls == [1]
    g.clear_derived()
    assert g.derived("k", lambda: object()) is not a
