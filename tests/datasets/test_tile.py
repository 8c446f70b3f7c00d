"""datasets.tile: copies laid side by side, joined at their borders with realistic weights."""
from __future__ import annotations

import numpy as np
import pytest
from naive import random_road_graph, scipy_dijkstra
from scipy.sparse.csgraph import connected_components

import gpuroute
from gpuroute import INF, RoadGraph
from gpuroute.datasets import tile
from gpuroute.geo import haversine_m as great_circle_m


def n_scc(g):
    return connected_components(g.to_scipy(), directed=True, connection="strong")[0]


@pytest.fixture(scope="module", params=[False, True], ids=["lonlat", "planar"])
def base(request):
    # one-way streets make several strongly connected components
    g, _ = random_road_graph(np.random.default_rng(42), 150, one_way=0.5, planar=request.param)
    assert n_scc(g) > 1
    return g


@pytest.fixture(scope="module")
def tiled(base):
    return tile(base, 2, 3)


def copy_of(t, base):
    return t.tail // base.n_nodes, t.head // base.n_nodes


def test_counts_and_name(base, tiled):
    n, m = base.n_nodes, base.n_arcs
    assert tiled.n_nodes == 6 * n
    ct, ch = copy_of(tiled, base)
    joins = ct != ch
    assert tiled.n_arcs == 6 * m + int(joins.sum())
    assert tiled.meta["join_arcs"] == int(joins.sum()) > 0
    assert "tiled" in tiled.name and tiled.name == f"{base.name}-tiled-2x3"
    assert tiled.meta["synthetic"] is True and "synthetic" in tiled.meta["note"]
    assert tiled.weight_names == base.weight_names and tiled.units == base.units
    assert tiled.coord_system == base.coord_system
    assert tile(base, 2, 1, name="custom").name == "custom"


def test_each_copy_is_the_base_graph(base, tiled):
    n = base.n_nodes
    ct, ch = copy_of(tiled, base)
    key_b = base.tail.astype(np.int64) * n + base.head
    order_b = np.argsort(key_b)
    for c in range(6):
        inside = (ct == c) & (ch == c)
        tt = tiled.tail[inside].astype(np.int64) - c * n
        hh = tiled.head[inside].astype(np.int64) - c * n
        key = tt * n + hh
        o = np.argsort(key)
        np.testing.assert_array_equal(key[o], key_b[order_b])
        for wn in base.weight_names:
            np.testing.assert_array_equal(tiled.weight(wn)[inside][o], base.weight(wn)[order_b])


def test_coordinates_sit_side_by_side(base, tiled):
    n = base.n_nodes
    W, H = np.ptp(base.coords, axis=0)
    for j in range(3):
        for i in range(2):
            c = j * 2 + i
            np.testing.assert_allclose(tiled.coords[c * n:(c + 1) * n], base.coords + [i * W, j * H],
                                       atol=1e-9)


def test_joins_link_neighbouring_copies_both_ways_with_realistic_weights(base, tiled):
    ct, ch = copy_of(tiled, base)
    joins = np.flatnonzero(ct != ch)
    ci, cj = ct[joins] % 2, ct[joins] // 2
    hi, hj = ch[joins] % 2, ch[joins] // 2
    assert np.all(np.abs(ci - hi) + np.abs(cj - hj) == 1)  # only grid neighbours
    pairs = set(zip(tiled.tail[joins].tolist(), tiled.head[joins].tolist(), strict=True))
    assert all((h, t) in pairs for t, h in pairs)  # two-way
    # every neighbouring pair of copies is joined
    horizontal = [(0, 1), (2, 3), (4, 5)]
    vertical = [(0, 2), (2, 4), (1, 3), (3, 5)]
    expected = {p for a, b in horizontal + vertical for p in ((a, b), (b, a))}
    assert {(int(a), int(b)) for a, b in zip(ct[joins], ch[joins], strict=True)} == expected
    x, y = tiled.coords[:, 0], tiled.coords[:, 1]
    t, h = tiled.tail[joins], tiled.head[joins]
    planar = base.coord_system == "planar"
    length = np.hypot(x[h] - x[t], y[h] - y[t]) if planar else great_circle_m(x[t], y[t], x[h], y[h])
    bx, by = base.coords[:, 0], base.coords[:, 1]
    blen = (np.hypot(bx[base.head] - bx[base.tail], by[base.head] - by[base.tail]) if planar
            else great_circle_m(bx[base.tail], by[base.tail], bx[base.head], by[base.head]))
    pos = blen > 0
    for wn in base.weight_names:
        w = tiled.weight(wn)[joins]
        assert np.all(w >= 1)
        ratio = np.median(base.weight(wn)[pos] / blen[pos])
        assert tiled.meta["join_weight_per_length"][wn] == pytest.approx(ratio)
        np.testing.assert_array_equal(w, np.maximum(1, np.rint(length * ratio)).astype(np.int32))


def test_strongly_connected_components_do_not_increase(base, tiled):
    s = n_scc(base)
    st = n_scc(tiled)
    assert st <= 6 * s
    # joins only touch the largest SCC of each copy, so those six merge into one and nothing else changes
    assert st == 6 * (s - 1) + 1


def test_distances_inside_a_copy_never_increase(base, tiled):
    n = base.n_nodes
    rng = np.random.default_rng(0)
    src = rng.choice(n, 8, replace=False)
    want = scipy_dijkstra(base, src)
    for c in (0, 3, 5):
        got = gpuroute.sssp(tiled, src + c * n, device="cpu")[:, c * n:(c + 1) * n]
        assert np.all(got <= want)
        # what the base graph reaches, the copy reaches
        assert np.all(got[want != INF] != INF)


def test_csr_equals_from_arcs_of_the_same_arcs(tiled):
    g2 = RoadGraph.from_arcs(tiled.n_nodes, tiled.tail, tiled.head, tiled.weights)
    assert g2.meta["parallel_arcs_dropped"] == 0 and g2.meta["self_loops_dropped"] == 0
    np.testing.assert_array_equal(g2.first_out, tiled.first_out)
    np.testing.assert_array_equal(g2.head, tiled.head)
    for wn in tiled.weight_names:
        np.testing.assert_array_equal(g2.weight(wn), tiled.weight(wn))


def test_one_by_one_is_the_base_graph(base):
    t = tile(base, 1, 1)
    np.testing.assert_array_equal(t.first_out, base.first_out)
    np.testing.assert_array_equal(t.head, base.head)
    np.testing.assert_array_equal(t.coords, base.coords)
    assert t.meta["join_arcs"] == 0


def test_tile_errors(base):
    nocoords = RoadGraph.from_arcs(2, [0], [1], {"distance": [3]})
    with pytest.raises(ValueError, match="coordinates"):
        tile(nocoords, 2, 2)
    with pytest.raises(ValueError, match=">= 1"):
        tile(base, 0, 2)
    polar = RoadGraph.from_arcs(2, [0, 1], [1, 0], {"distance": [30000, 30000]},
                                coords=[[0.0, 60.0], [0.0, 85.0]])
    with pytest.raises(ValueError, match="leaves"):
        tile(polar, 1, 2)


@pytest.mark.slow
def test_tile_ny_2x2():
    ny = gpuroute.datasets.load("ny")
    t = tile(ny, 2, 2)
    assert t.n_nodes == 4 * ny.n_nodes
    assert t.n_arcs == 4 * ny.n_arcs + t.meta["join_arcs"]
    assert n_scc(t) == n_scc(ny) == 1
    assert 0 < t.meta["join_arcs"] <= 4 * 2 * 2 * 130
    # the distance unit is ~0.1 m: about 10 units per metre
    assert 9.9 < t.meta["join_weight_per_length"]["distance"] < 10.1
    key = t.tail.astype(np.int64) * t.n_nodes + t.head
    assert np.all(np.diff(key) > 0)  # CSR sorted by (tail, head), no parallel arcs
