"""TurnCosts (gpuroute.graph.turn_costs): one duration and weight per turn in TurnTable order, checked on
construction and against the graph, hashed into the fingerprint, saved and loaded with the graph.

Oracle: :class:`gpuroute.crp.metric.TurnTable` (its turn order is the one the costs follow) and the
arrays as written."""
from __future__ import annotations

import numpy as np
import pytest

from gpuroute.crp.metric import TurnTable
from gpuroute.graph import GraphError, ParseError, RoadGraph, TurnCosts
from gpuroute.graph.turn_costs import FORBIDDEN, n_turns_of, turn_arrays
from gpuroute.io import load_graph, save_graph


def _graph():
    # a square with one diagonal and two-way streets: every node has 2 or 3 out-arcs
    tail = [0, 1, 1, 2, 2, 3, 3, 0, 0, 2]
    head = [1, 0, 2, 1, 3, 2, 0, 3, 2, 0]
    coords = [[7.40, 43.70], [7.41, 43.70], [7.41, 43.71], [7.40, 43.71]]
    return RoadGraph.from_arcs(4, tail, head, {"weight": np.arange(10) + 1}, coords=coords)


def test_turn_order_is_the_turn_tables():
    g = _graph()
    table = TurnTable.build(g)
    first, t_in, t_out = turn_arrays(g.first_out, g.head)
    assert np.array_equal(first, table.first) and np.array_equal(t_out, table.out_arc)
    assert np.array_equal(t_in, table.in_arc()) and n_turns_of(g.first_out, g.head) == table.n_turns


def test_costs_are_checked():
    with pytest.raises(GraphError, match="duration of turn 1 is -5"):
        TurnCosts(np.array([0, -5]), np.array([0, 1]))
    with pytest.raises(GraphError, match="FORBIDDEN in one of"):
        TurnCosts(np.array([0, FORBIDDEN]), np.array([0, 3]))
    with pytest.raises(GraphError, match="integer array"):
        TurnCosts(np.array([0.5]), np.array([1]))
    with pytest.raises(GraphError, match="unknown obstacle fields"):
        TurnCosts(np.array([0]), np.array([0]), obstacles={"colour": [1]})
    g = _graph()
    with pytest.raises(GraphError, match="hold 3 turns but the graph has"):
        RoadGraph(g.first_out, g.head, g.weights, turn_costs=TurnCosts(np.zeros(3, int), np.zeros(3, int)))
    t = n_turns_of(g.first_out, g.head)
    with pytest.raises(GraphError, match="obstacle 0 has node 9"):
        RoadGraph(g.first_out, g.head, g.weights, turn_costs=TurnCosts(
            np.zeros(t, int), np.zeros(t, int), obstacles={"node": [9], "from_node": [-1], "type": [2],
                                                            "duration": [2.0], "weight": [2.0]}))


def test_fingerprint_and_store_round_trip(tmp_path):
    g = _graph()
    t = n_turns_of(g.first_out, g.head)
    rng = np.random.default_rng(1)
    d = rng.integers(0, 50, t)
    d[::4] = FORBIDDEN
    w = np.where(d == FORBIDDEN, FORBIDDEN, d * 2)
    obst = {"node": [1], "from_node": [0], "type": [2], "duration": [2.0], "weight": [0.0]}
    tc = TurnCosts(d, w, obstacles=obst, meta={"weight_name": "routability", "weight_precision": 1})
    h = RoadGraph(g.first_out, g.head, g.weights, coords=g.coords, turn_costs=tc)
    assert h.fingerprint() != g.fingerprint()  # the costs are routing content
    k = load_graph(save_graph(h, tmp_path / "h"))
    assert k.turn_costs == tc and k.turn_costs.meta == tc.meta and k.fingerprint() == h.fingerprint()
    assert k.turn_costs.obstacles["from_node"].tolist() == [0]
    f = tmp_path / "h" / "turn_costs-duration.npy"
    a = np.load(f)
    a[1] = a[1] + 1
    np.save(f, a)
    with pytest.raises(ParseError, match="turn_costs-duration.npy"):
        load_graph(tmp_path / "h")
    assert load_graph(save_graph(g, tmp_path / "g")).turn_costs is None
