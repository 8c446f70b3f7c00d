"""Snapping points to nodes (gpuroute.geo) against brute force; the largest-component rule."""
from __future__ import annotations

import numpy as np
import pytest
from naive import random_road_graph

import gpuroute
from gpuroute import RoadGraph
from gpuroute.geo import OutOfBoundsError, SnapError, nearest_node, nearest_nodes
from gpuroute.geo import haversine_m as great_circle_m
from gpuroute.geo.snap import largest_scc_mask


@pytest.mark.parametrize("planar", [False, True])
def test_nearest_nodes_brute_force(planar):
    rng = np.random.default_rng(11)
    g, _ = random_road_graph(rng, 200, planar=planar)
    lo, hi = g.coords.min(0), g.coords.max(0)
    pts = rng.uniform(lo, hi, size=(300, 2))
    pts[:10] = g.coords[:10]  # exactly on a node
    nodes, offs = nearest_nodes(g, pts[:, 0], pts[:, 1], snapping="any")
    assert nodes.dtype == np.int32 and offs.dtype == np.float64 and nodes.shape == (300,)
    x, y = g.coords[:, 0], g.coords[:, 1]
    for (px, py), v, off in zip(pts, nodes, offs, strict=True):
        d = np.hypot(x - px, y - py) if planar else great_circle_m(px, py, x, y)
        assert off == pytest.approx(d.min(), rel=1e-9, abs=1e-9)
        assert d[v] == pytest.approx(d.min(), rel=1e-9, abs=1e-9)
    np.testing.assert_allclose(offs[:10], 0.0, atol=1e-9)
    v, off = nearest_node(g, float(pts[20, 0]), float(pts[20, 1]), snapping="any")
    assert isinstance(v, int) and isinstance(off, float)
    assert v == nodes[20] and off == pytest.approx(offs[20])


def test_nearest_node_great_circle_not_degrees():
    # At 60 degrees north a degree of longitude is half a degree of latitude: node 1 (0.015 deg east,
    # ~833 m) is nearer than node 0 (0.01 deg north, ~1112 m) although farther in raw degrees.
    g = RoadGraph.from_arcs(2, [0, 1], [1, 0], {"distance": [1, 1]}, coords=[[10.0, 60.01], [10.015, 60.0]])
    v, off = nearest_node(g, 10.0, 60.0)
    assert v == 1
    assert off == pytest.approx(great_circle_m(10.0, 60.0, 10.015, 60.0))
    assert 800 < off < 870


def test_snapper_built_once_per_graph():
    from gpuroute.geo.snap import Snapper

    g, _ = random_road_graph(np.random.default_rng(5), 30)
    a = Snapper.of(g)
    nearest_node(g, *g.coords[0])
    assert Snapper.of(g) is a and Snapper.of(g, "any") is not a
    g.clear_derived()  # the documented way to drop derived structures after editing arrays
    assert Snapper.of(g) is not a


def test_out_of_bounds():
    g, _ = random_road_graph(np.random.default_rng(6), 30)
    lo, hi = g.coords.min(0), g.coords.max(0)
    with pytest.raises(OutOfBoundsError, match="bounding box") as ei:
        nearest_node(g, 0.0, 0.0)
    assert isinstance(ei.value, ValueError)
    x0, y0, x1, y1 = ei.value.bbox
    assert x0 < lo[0] and y0 < lo[1] and x1 > hi[0] and y1 > hi[1]
    assert x1 - hi[0] == pytest.approx(0.01)
    # inside the margin: fine
    nearest_node(g, hi[0] + 0.005, hi[1])
    with pytest.raises(OutOfBoundsError):
        nearest_node(g, hi[0] + 0.02, hi[1])
    with pytest.raises(OutOfBoundsError, match="point 2"):
        nearest_nodes(g, [lo[0], lo[0], lo[0]], [lo[1], hi[1], lo[1] - 1.0])


def test_nearest_node_bad_input():
    nocoords = RoadGraph.from_arcs(2, [0], [1], {"distance": [3]})
    with pytest.raises(ValueError, match="coordinates"):
        nearest_node(nocoords, 0.0, 0.0)
    g, _ = random_road_graph(np.random.default_rng(6), 30)
    with pytest.raises(ValueError, match="finite"):
        nearest_node(g, float("nan"), 40.75)
    with pytest.raises(ValueError):
        nearest_node(g, [1.0, 2.0], [1.0, 2.0])




@pytest.mark.slow
def test_nearest_node_ny_brute_force():
    ny = gpuroute.datasets.load("ny")
    rng = np.random.default_rng(3)
    lo, hi = ny.coords.min(0), ny.coords.max(0)
    pts = rng.uniform(lo, hi, size=(50, 2))
    nodes, offs = nearest_nodes(ny, pts[:, 0], pts[:, 1], snapping="any")
    for (x, y), v, off in zip(pts, nodes, offs, strict=True):
        d = great_circle_m(x, y, ny.coords[:, 0], ny.coords[:, 1])
        assert off == pytest.approx(d.min(), rel=1e-9, abs=1e-6)
        assert d[v] == pytest.approx(d.min(), rel=1e-9, abs=1e-6)


    # default snapping: the brute-force nearest among the nodes of the largest strongly connected component
    mask = largest_scc_mask(ny)
    nodes, offs = nearest_nodes(ny, pts[:, 0], pts[:, 1])
    for (x, y), v, off in zip(pts, nodes, offs, strict=True):
        d = np.where(mask, great_circle_m(x, y, ny.coords[:, 0], ny.coords[:, 1]), np.inf)
        assert mask[v] and off == pytest.approx(d.min(), rel=1e-9, abs=1e-6)


# ------------------------------------------------------------------------------- largest component rule
def test_default_snapping_uses_the_largest_strongly_connected_component():
    # two strongly connected pieces: a 3-cycle (0, 1, 2) and a 2-cycle (3, 4) far from it; a point right
    # on node 3 snaps to node 3 with snapping="any" but to the nearest node of the 3-cycle by default
    g = RoadGraph.from_arcs(5, [0, 1, 2, 3, 4], [1, 2, 0, 4, 3], {"distance": [1] * 5},
                            coords=[[0.0, 0.0], [0.001, 0.0], [0.002, 0.0], [0.01, 0.0], [0.011, 0.0]])
    np.testing.assert_array_equal(largest_scc_mask(g), [True, True, True, False, False])
    assert nearest_node(g, 0.01, 0.0, snapping="any")[0] == 3
    v, off = nearest_node(g, 0.01, 0.0)
    assert v == 2 and off == pytest.approx(great_circle_m(0.01, 0.0, 0.002, 0.0))
    with pytest.raises(ValueError, match="snapping"):
        nearest_node(g, 0.0, 0.0, snapping="nearest")


def test_radius():
    g = RoadGraph.from_arcs(2, [0, 1], [1, 0], {"distance": [1, 1]}, coords=[[0.0, 0.0], [0.001, 0.0]])
    v, off = nearest_node(g, 0.0, 0.0005, radius=100.0)  # ~56 m north of node 0
    assert v == 0 and 50 < off < 60
    with pytest.raises(SnapError, match="beyond the radius 10.0 m") as ei:
        nearest_nodes(g, [0.0, 0.0], [0.0, 0.0005], radius=10.0)
    assert ei.value.index == 1 and 50 < ei.value.distance < 60


@pytest.mark.slow
def test_random_points_on_monaco_always_route():
    """Section 4 finding: random points inside the bounding box of a real OSM extract failed as "no route"
    for 6-27 % of pairs on main (they snapped to tiny disconnected pieces). With default snapping every
    pair of snapped points is connected (checked by a one-to-all search, not by the component labels)."""
    g = gpuroute.datasets.load("monaco")
    rng = np.random.default_rng(2026)
    lo, hi = g.coords.min(0), g.coords.max(0)
    pts = rng.uniform(lo, hi, size=(60, 2))
    nodes, _ = nearest_nodes(g, pts[:, 0], pts[:, 1])
    dist = gpuroute.sssp(g, nodes, device="cpu")
    assert (dist[:, nodes] < gpuroute.INF).all()
    any_nodes, _ = nearest_nodes(g, pts[:, 0], pts[:, 1], snapping="any")
    d_any = gpuroute.sssp(g, any_nodes, device="cpu")
    assert (d_any[:, any_nodes] == gpuroute.INF).any()  # what users hit before: some pairs had no route
