"""Cell-local Bellman-Ford: the layout (Hilbert order, cell split) and the CPU twin against Dijkstra."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gpuroute
from gpuroute import INF, RoadGraph
from gpuroute.partition.cells import build_cells, hilbert_index, node_order
from gpuroute.sssp.cell_bf.cpu import cell_bf_one


def test_hilbert_index_is_a_bijection_with_unit_steps():
    order = 4
    side = 1 << order
    x, y = np.meshgrid(np.arange(side), np.arange(side), indexing="ij")
    d = hilbert_index(x.ravel(), y.ravel(), order)
    assert np.array_equal(np.sort(d), np.arange(side * side))
    # consecutive curve positions are grid neighbours (the locality the cells rely on)
    pos = np.empty((side * side, 2), dtype=np.int64)
    pos[d] = np.stack([x.ravel(), y.ravel()], axis=1)
    steps = np.abs(np.diff(pos, axis=0)).sum(axis=1)
    assert np.all(steps == 1)


def _random_graph(seed, n=250, deg=3, coords=False):
    rng = np.random.default_rng(seed)
    m = n * deg
    c = rng.uniform([-74.1, 40.6], [-73.9, 40.8], (n, 2)) if coords else None
    return RoadGraph.from_arcs(n, rng.integers(0, n, m), rng.integers(0, n, m),
                               {"distance": rng.integers(1, 30, m)}, coords=c)


@pytest.mark.parametrize("coords", [False, True])
def test_layout_partitions_the_arcs(coords):
    g = _random_graph(1, coords=coords)
    size = 16
    lay = build_cells(g, None, size, method="hilbert" if coords else "grow")
    assert np.array_equal(np.sort(lay.order), np.arange(g.n_nodes))
    assert np.array_equal(lay.rank[lay.order], np.arange(g.n_nodes))
    assert lay.lw.size + lay.xw.size == g.n_arcs
    # every internal arc stays in its cell, every boundary arc leaves it
    t_int = np.repeat(np.arange(g.n_nodes), np.diff(lay.lfo))
    t_ext = np.repeat(np.arange(g.n_nodes), np.diff(lay.xfo))
    assert np.all(lay.lhd < size)
    assert np.all((lay.xhd // size) != (t_ext // size))
    # the arc multiset (tail, head, weight) is preserved under the renumbering
    orig = sorted(zip(g.tail.tolist(), g.head.tolist(), g.weight().tolist(), strict=True))
    heads_int = (t_int // size) * size + lay.lhd
    new = [(int(lay.order[t]), int(lay.order[h]), int(w)) for t, h, w in zip(t_int, heads_int, lay.lw, strict=True)]
    new += [(int(lay.order[t]), int(lay.order[h]), int(w)) for t, h, w in zip(t_ext, lay.xhd, lay.xw, strict=True)]
    assert sorted(new) == orig
    # the by-head copy of the internal arcs holds the same arcs
    h_rev = np.repeat(np.arange(g.n_nodes), np.diff(lay.rfo))
    by_tail = sorted(zip(t_int.tolist(), heads_int.tolist(), lay.lw.tolist(), strict=True))
    by_head = sorted(zip(((h_rev // size) * size + lay.rtl).tolist(), h_rev.tolist(), lay.rw.tolist(), strict=True))
    assert by_tail == by_head
    assert lay.max_cell_arcs == max(int(lay.lfo[min(c * size + size, g.n_nodes)] - lay.lfo[c * size])
                                    for c in range(lay.n_cells))


def test_node_order_uses_coordinates_when_present():
    g = _random_graph(2, coords=True)
    order = node_order(g, method="hilbert")
    # consecutive nodes of the Hilbert order are closer on average than a random order's
    c = g.coords
    gap = np.linalg.norm(np.diff(c[order], axis=0), axis=1).mean()
    rnd = np.linalg.norm(np.diff(c, axis=0), axis=1).mean()
    assert gap < rnd / 2


def test_grown_cells_are_connected_regions():
    # on a path graph every grown cell is a run of consecutive path nodes
    n = 50
    g = RoadGraph.from_arcs(n, np.arange(n - 1), np.arange(1, n), {"distance": np.ones(n - 1)})
    order = node_order(g, cell_size=10)
    assert np.array_equal(np.sort(order), np.arange(n))
    for c in range(5):
        cell = np.sort(order[10 * c:10 * c + 10])
        assert np.all(np.diff(cell) == 1)


def test_bad_cell_size_and_order_rejected():
    g = _random_graph(3, n=20)
    with pytest.raises(ValueError, match="coordinates"):
        node_order(g, method="hilbert")
    with pytest.raises(ValueError, match="method"):
        node_order(g, method="metis")
    with pytest.raises(ValueError, match="cell_size"):
        build_cells(g, None, 0)
    with pytest.raises(ValueError, match="permutation"):
        build_cells(g, None, 4, order=np.zeros(20, dtype=np.int64))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), size=st.sampled_from([1, 3, 16, 64, 1024]), hilbert=st.booleans())
def test_cell_bf_kernel_equals_dijkstra(seed, size, hilbert):
    """The numba kernel on any cell size (the API's cells are threads x nodes_per_thread >= 32)."""
    g = _random_graph(seed, n=120, coords=hilbert)
    ref = gpuroute.sssp(g, [0, seed % 120], algorithm="dijkstra", device="cpu")
    lay = build_cells(g, None, size, method="hilbert" if hilbert else None)
    row = np.empty(g.n_nodes, dtype=np.int64)
    for i, s in enumerate((0, seed % 120)):
        r, upd, its, crit = cell_bf_one(g.n_nodes, size, lay.lfo, lay.lhd, lay.lw, lay.xfo, lay.xhd, lay.xw,
                                        int(lay.rank[s]), row)
        np.testing.assert_array_equal(row[lay.rank], ref[i])
        assert r >= 1 and crit <= its


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), cells=st.sampled_from([(32, 1), (32, 2), (256, 4)]), hilbert=st.booleans())
def test_cell_bf_cpu_equals_dijkstra(seed, cells, hilbert):
    g = _random_graph(seed, n=120, coords=hilbert)
    src = np.array([0, seed % 120])
    ref_d, ref_p = gpuroute.sssp(g, src, algorithm="dijkstra", device="cpu", return_predecessors=True)
    threads, npt = cells
    res = gpuroute.sssp_full(g, src, algorithm="cell-bf", device="cpu", return_predecessors=True, threads=threads,
                             nodes_per_thread=npt, order="hilbert" if hilbert else None)
    np.testing.assert_array_equal(res.dist, ref_d)
    np.testing.assert_array_equal(res.pred, ref_p)
    assert all(r >= 1 for r in res.stats["phases"])
    assert res.stats["params"]["cell_size"] == threads * npt


def test_cell_bf_on_ny_equals_dijkstra_and_needs_few_rounds():
    ny = gpuroute.datasets.load("ny")
    src = 12345
    ref = gpuroute.sssp(ny, src, algorithm="dijkstra", device="cpu")
    res = gpuroute.sssp_full(ny, [src], algorithm="cell-bf", device="cpu", threads=256, nodes_per_thread=4)
    d, stats = res.dist, res.stats
    np.testing.assert_array_equal(d[0], ref)
    assert (d[0] < INF).sum() > 0.99 * ny.n_nodes
    # a round per boundary crossing instead of a phase per arc: far fewer rounds than NY's ~860 phases
    assert stats["phases"][0] < 300
    assert stats["extra"]["critical_iterations"][0] <= stats["extra"]["local_iterations"][0]


def test_in_slots_hold_every_internal_in_arc():
    from gpuroute.sssp.cell_bf.gpu import in_slots

    g = _random_graph(5, n=90, deg=4)
    size, k = 16, 2
    lay = build_cells(g, None, size)
    pu, pw, ofo, otl, ow = in_slots(lay, k)
    n = g.n_nodes
    pu, pw = pu.reshape(k, n), pw.reshape(k, n)
    for v in range(n):
        want = sorted(zip(lay.rtl[lay.rfo[v]:lay.rfo[v + 1]].tolist(), lay.rw[lay.rfo[v]:lay.rfo[v + 1]].tolist(),
                          strict=True))
        deg = len(want)
        slots = [(int(pu[j, v]), int(pw[j, v])) for j in range(k)]
        got = slots[:min(deg, k)] + list(zip(otl[ofo[v]:ofo[v + 1]].tolist(), ow[ofo[v]:ofo[v + 1]].tolist(),
                                             strict=True))
        assert sorted(got) == want
        assert all(s == (v % size, 0) for s in slots[deg:])  # padding: the node itself, weight 0
