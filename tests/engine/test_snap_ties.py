"""Snapping ties at junctions (found by tests/server/test_osrm_differential.py): a coordinate on a node
where several segments meet snaps to all of them (the PhantomSet's tie options), and routes and tables leave from /
arrive on whichever is best, as OSRM >= 5.26 does."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("osmium")

from phantoms import point  # noqa: E402
from scipy.sparse import csr_matrix  # noqa: E402
from scipy.sparse.csgraph import dijkstra  # noqa: E402

from gpuroute.engine import Engine  # noqa: E402
from gpuroute.geo.segments import SNAP_TIE_M  # noqa: E402

#: OSM node 247694464 -> OSM node 25194196 on Monaco, coordinates at OSRM's 6 decimals; osrm-routed
#: (the differential test's car profile) answers 390.4 s / 6,394 m, gpuroute gave 398.3 s / 6,532 m when
#: it snapped to one segment only.
A = (247694464, (7.443432, 43.756749))
B = (25194196, (7.420054, 43.733067))
OSRM_DURATION_S = 390.4


@pytest.fixture(scope="module")
def engine():
    return Engine.open("monaco")


def _node(g, osm_id):
    return int(np.flatnonzero(np.asarray(g.node_ids) == osm_id)[0])


def _oracle_s(g, s, t):
    """Fastest node-to-node travel time (s): scipy Dijkstra on travel_time."""
    w = g.weight("travel_time").astype(np.float64) + 1e-9  # an explicit zero would vanish
    m = csr_matrix((w, (g.tail, g.head)), shape=(g.n_nodes, g.n_nodes))
    return float(dijkstra(m, indices=s)[t]) * float(g.units["travel_time"].scale or 0.1)


def test_junction_coordinate_snaps_to_every_segment_there(engine):
    g = engine.graph
    n = _node(g, A[0])
    ps = engine.segments.snap(*A[1])
    p = point(ps, 0, engine.segments)
    cands = (p, *p.ties)
    assert len(cands) >= 2
    for c in cands:
        assert n in (c.u, c.v)
        assert abs(c.distance - p.distance) <= SNAP_TIE_M
    assert len(p.all_arcs) == sum(len(c.arcs) for c in cands)
    assert ps.tie.tolist() == [False] * len(p.arcs) + [True] * (len(p.all_arcs) - len(p.arcs))
    assert not engine.segments.snap(*A[1], tie=None).tie.any()
    mid = point(engine.segments.snap(7.4310, 43.7400))  # an ordinary point: one segment
    assert len(mid.all_arcs) == len(mid.arcs)


def test_route_from_junction_leaves_along_the_best_segment(engine):
    g = engine.graph
    want = _oracle_s(g, _node(g, A[0]), _node(g, B[0]))
    r = engine.route([A[1], B[1]])["routes"][0]
    # the phantoms lie a few centimetres off the nodes: the partial arcs cost well under 0.1 s
    assert r["duration"] == pytest.approx(want, abs=0.15)
    assert r["duration"] == pytest.approx(OSRM_DURATION_S, rel=5e-3, abs=0.5)  # the differential tolerance
    back = engine.route([B[1], A[1]])["routes"][0]
    assert back["duration"] == pytest.approx(_oracle_s(g, _node(g, B[0]), _node(g, A[0])), abs=0.15)
    t = engine.table([A[1], B[1]])["durations"]
    assert t[0][1] == pytest.approx(r["duration"], abs=0.15)
    assert t[1][0] == pytest.approx(back["duration"], abs=0.15)
