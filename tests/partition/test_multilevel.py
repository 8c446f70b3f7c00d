"""The nested multi-level partition of Customizable Route Planning (Delling, Kobitzsch, Werneck,
Euro-Par 2014, sec. 2): structure (nesting, bounds, dense and contiguous ids) checked by brute force,
boundary arcs against a loop over the arcs, exact cuts on graphs whose best cut is known, the store, and
the errors."""
from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from conftest import shared_data

import gpuroute
from gpuroute import ParseError, RoadGraph, config
from gpuroute.partition import Partition

METHODS = ["kahip", "inertial"]


def grid(w, h, *, offset=0.0, seed=0):
    """A w x h grid road graph (both directions of every street) with planar coordinates."""
    rng = np.random.default_rng(seed)
    ids = np.arange(w * h).reshape(h, w)
    t = np.concatenate([ids[:, :-1].ravel(), ids[:-1, :].ravel()])
    u = np.concatenate([ids[:, 1:].ravel(), ids[1:, :].ravel()])
    xs, ys = np.meshgrid(np.arange(w, dtype=float) + offset, np.arange(h, dtype=float))
    coords = np.stack([xs.ravel(), ys.ravel()], axis=1)
    tail, head = np.concatenate([t, u]), np.concatenate([u, t])
    return RoadGraph.from_arcs(w * h, tail, head, {"distance": rng.integers(1, 20, tail.size)}, coords=coords,
                               coord_system="planar", name=f"grid{w}x{h}")


def dumbbell(side=8):
    """Two side x side grids, the second to the right of the first, joined by one two-way street: the best
    cut into halves of side*side nodes is that street (2 arcs)."""
    a = grid(side, side)
    n = a.n_nodes
    t = np.concatenate([a.tail, a.tail + n, [side - 1, n]])  # right end of row 0 <-> left end of row 0
    h = np.concatenate([a.head, a.head + n, [n, side - 1]])
    coords = np.concatenate([a.coords, a.coords + [side + 2.0, 0.0]])
    return RoadGraph.from_arcs(2 * n, t, h, {"distance": np.ones(t.size, dtype=np.int64)}, coords=coords,
                               coord_system="planar", name="dumbbell")


def rome():
    return gpuroute.load_dimacs(shared_data("dimacs9", "rome99.gr.gz"))


def check_structure(p, n):
    """Brute-force oracle of the partition's invariants."""
    cells = p.cells
    assert cells.dtype == np.int32 and cells.shape == (len(p.cell_sizes), n)
    for lvl, bound in enumerate(p.cell_sizes):
        row = cells[lvl]
        ids = sorted(set(row.tolist()))
        assert ids == list(range(len(ids))), f"level {lvl}: ids not dense"
        assert p.n_cells[lvl] == len(ids)
        counts = {c: 0 for c in ids}
        for c in row.tolist():
            counts[c] += 1
        assert max(counts.values()) <= bound, f"level {lvl}: a cell of {max(counts.values())} > {bound} nodes"
    for lvl in range(1, cells.shape[0]):
        parent = {}
        for child, par in zip(cells[lvl - 1].tolist(), cells[lvl].tolist(), strict=True):
            assert parent.setdefault(child, par) == par, f"level {lvl - 1} cell {child} spans two parents"
        # contiguous: the children of a parent have consecutive ids (parents non-decreasing in child id order)
        seq = [parent[c] for c in range(len(parent))]
        assert seq == sorted(seq)


def brute_boundary(p, g):
    out = []
    for row in p.cells:
        k = 0
        for u in range(g.n_nodes):
            for j in range(g.first_out[u], g.first_out[u + 1]):
                if row[u] != row[g.head[j]]:
                    k += 1
        out.append(k)
    return out


@pytest.mark.parametrize("method", METHODS)
def test_grid_structure_boundary_and_determinism(method):
    g = grid(23, 17, seed=1)
    sizes = (8, 40, 160)
    p = Partition.build(g, cell_sizes=sizes, method=method, seed=3)
    check_structure(p, g.n_nodes)
    assert p.cell_sizes == sizes and p.method == method
    assert p.n_cells[-1] >= -(-g.n_nodes // sizes[-1])
    assert p.boundary_arcs(g).tolist() == brute_boundary(p, g)
    assert p.meta["boundary_arcs"] == brute_boundary(p, g)
    assert p.boundary_arcs(g).dtype == np.int64
    again = Partition.build(g, cell_sizes=sizes, method=method, seed=3)
    assert np.array_equal(again.cells, p.cells)


@pytest.mark.parametrize("method", METHODS)
def test_finds_the_bridge(method):
    """Two grids joined by one street: the only cut of two cells of at most 64 nodes that costs 2 arcs."""
    g = dumbbell(8)
    p = Partition.build(g, cell_sizes=(64, 1024), method=method, imbalance=0.0)
    assert p.n_cells == (2, 1)
    assert p.boundary_arcs(g).tolist() == [2, 0]
    halves = p.cells[0]
    assert len(set(halves[:64].tolist())) == 1 and len(set(halves[64:].tolist())) == 1
    assert halves[0] != halves[64]


def test_kahip_real_rome99_beats_an_arbitrary_split():
    g = rome()
    sizes = (64, 512)
    p = Partition.build(g, cell_sizes=sizes, method="kahip", seed=0)
    check_structure(p, g.n_nodes)
    got = p.boundary_arcs(g)
    assert got.tolist() == brute_boundary(p, g)
    # node-id chunks of the same cell counts: a partitioner that minimises the cut does far better
    chunks = np.stack([np.arange(g.n_nodes) * p.n_cells[lv] // g.n_nodes for lv in range(2)]).astype(np.int32)
    naive = Partition(chunks, sizes, "chunks", p.fingerprint).boundary_arcs(g)
    assert np.all(got * 2 < naive)
    assert np.array_equal(Partition.build(g, cell_sizes=sizes, method="kahip", seed=0).cells, p.cells)


@pytest.mark.slow
@pytest.mark.parametrize("method", METHODS)
def test_real_monaco_defaults(method):
    g = gpuroute.datasets.load("monaco")
    p = Partition.build(g, method=method)
    assert p.cell_sizes == tuple(config.CRP_CELL_SIZES)
    check_structure(p, g.n_nodes)
    t, h = g.tail, g.head
    assert p.boundary_arcs(g).tolist() == [int(np.sum(row[t] != row[h])) for row in p.cells]


def test_disconnected_isolated_and_self_loops():
    # two components, isolated nodes, and a self-loop (RoadGraph's constructor keeps one)
    first_out = np.array([0, 2, 3, 4, 5, 6, 6, 6, 7])
    head = np.array([1, 0, 0, 3, 2, 4, 7])  # 0<->1, 2<->3, 4->4 (self-loop), 5 and 6 isolated, 7->7
    g = RoadGraph(first_out, head, {"w": np.ones(head.size, dtype=np.int64)},
                  coords=np.stack([np.arange(8.0), np.zeros(8)], axis=1), coord_system="planar")
    for method in METHODS:
        p = Partition.build(g, cell_sizes=(2, 4), method=method)
        check_structure(p, 8)
        assert p.boundary_arcs(g).tolist() == brute_boundary(p, g)


def test_one_cell_when_the_graph_fits():
    g = grid(5, 5)
    for method in METHODS:
        p = Partition.build(g, cell_sizes=(25, 100), method=method)
        assert p.n_cells == (1, 1) and p.boundary_arcs(g).tolist() == [0, 0]


def test_self_loops_are_never_boundary():
    g = RoadGraph(np.array([0, 2, 3]), np.array([0, 1, 1]), {"w": np.ones(3, dtype=np.int64)})
    p = Partition(np.array([[0, 1]]), (2,), "given", "x")
    assert p.boundary_arcs(g).tolist() == [1]


def test_save_load_round_trip_and_refusals(tmp_path):
    g = grid(12, 10)
    p = Partition.build(g, cell_sizes=(8, 32), method="kahip")
    d = tmp_path / "part"
    assert p.save(d) == str(d)
    q = Partition.load(d, graph=g)
    assert np.array_equal(q.cells, p.cells) and q.cells.dtype == np.int32
    assert (q.cell_sizes, q.n_cells, q.method, q.fingerprint) == (p.cell_sizes, p.n_cells, p.method, p.fingerprint)
    assert q.meta["boundary_arcs"] == p.meta["boundary_arcs"]
    p.save(d)  # replaces a saved partition
    # same topology, other weights: accepted (a partition is metric-independent)
    other_w = RoadGraph(g.first_out, g.head, {"distance": g.weight() + 1}, coords=g.coords, coord_system="planar")
    Partition.load(d, graph=other_w)
    with pytest.raises(ValueError, match="nodes: 120 in the partition, 110"):
        Partition.load(d, graph=grid(11, 10))
    # same n and m, other arcs
    h2 = g.head.copy()
    h2[[0, 1]] = h2[[1, 0]]
    with pytest.raises(ValueError, match="arc arrays"):
        Partition.load(d, graph=RoadGraph(g.first_out, h2, {"w": g.weight()}))
    # same n, other m
    sub = RoadGraph.from_arcs(g.n_nodes, g.tail[:-2], g.head[:-2], {"w": g.weight()[:-2]})
    with pytest.raises(ValueError, match="arcs: "):
        Partition.load(d, graph=sub)
    # not over another directory
    other = tmp_path / "other"
    other.mkdir()
    (other / "x.txt").write_text("keep")
    with pytest.raises(FileExistsError):
        p.save(other)
    assert (other / "x.txt").read_text() == "keep"


def test_load_refuses_damaged_files(tmp_path):
    g = grid(9, 9)
    p = Partition.build(g, cell_sizes=(4, 16), method="inertial")
    d = tmp_path / "p"
    p.save(d)
    cells = d / "cells.npy"
    raw = cells.read_bytes()
    cells.write_bytes(raw[:-7])  # truncated
    with pytest.raises(ParseError, match="checksum"):
        Partition.load(d)
    cells.write_bytes(raw[:-1] + bytes([raw[-1] ^ 1]))  # one bit flipped
    with pytest.raises(ParseError, match="checksum"):
        Partition.load(d)
    cells.write_bytes(raw)
    Partition.load(d)
    m = json.loads((d / "manifest.json").read_text())
    m["cell_sizes"] = [4, 32]
    (d / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(ParseError, match="cell_sizes"):
        Partition.load(d)
    (d / "manifest.json").write_text("{")
    with pytest.raises(ParseError, match="JSON"):
        Partition.load(d)


def test_constructor_refuses_broken_partitions():
    with pytest.raises(ValueError, match="dense"):
        Partition(np.array([[0, 2, 2]]), (2,), "x", "f")
    with pytest.raises(ValueError, match="nested"):
        Partition(np.array([[0, 0, 1, 1], [0, 1, 1, 1]]), (2, 4), "x", "f")
    with pytest.raises(ValueError, match="one row per level"):
        Partition(np.zeros((1, 4), dtype=np.int32), (2, 4), "x", "f")


@pytest.mark.parametrize("sizes", [(256, 256), (4096, 256), (1, 4), (4.0, 8), (True, 8), "256", (), 256])
def test_bad_cell_sizes(sizes):
    with pytest.raises(ValueError, match="cell_sizes|cell size"):
        Partition.build(grid(4, 4), cell_sizes=sizes, method="kahip")


def test_bad_method_and_settings():
    g = grid(4, 4)
    with pytest.raises(ValueError, match="'kahip', 'inertial'"):
        Partition.build(g, method="metis")
    with pytest.raises(ValueError, match="imbalance"):
        Partition.build(g, method="kahip", imbalance=1.5)
    with pytest.raises(ValueError, match="seed"):
        Partition.build(g, method="kahip", seed=1.5)


def test_inertial_needs_coordinates():
    g = RoadGraph.from_arcs(4, [0, 1, 2], [1, 2, 3], {"w": [1, 1, 1]})
    with pytest.raises(ValueError, match="coordinates.*method='kahip'"):
        Partition.build(g, cell_sizes=(2,), method="inertial")
    assert Partition.build(g, cell_sizes=(2,), method="kahip").n_cells == (2,)


def test_kahip_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "kahip", None)  # import kahip now raises ImportError
    with pytest.raises(ImportError, match=r"kahip.*pip install .gpuroute\[crp\]."):
        Partition.build(grid(4, 4), cell_sizes=(4,), method="kahip")
