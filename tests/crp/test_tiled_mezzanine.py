"""The tiled graph's mezzanine partition (benchmarks/crp_multi_gpu.py ``tiled_refined_partition``): a base
graph's refined partition (``Partition.refine``) laid over the copies of ``datasets.tile`` as ``tiled_partition``
lays the base partition, plus the 2x2-copies top level -- no partitioner run on the tiled graph.

Oracles: the partition's own definition (every row equal to the base row in each copy, shifted by the copy's
cell offset; nested; the query rows equal the plain tiled partition's) and the plain tiled customization: an
overlay of the tiled graph customized through the tiled mezzanine levels (by microinstructions or by Dijkstra;
on one device and on 2 virtual devices) has the same cliques, bit for bit, as without them. Tiny graphs
(2x2 copies of a random road graph), CPU only."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from crp_oracle import PEN, with_restrictions
from naive import random_road_graph

from gpuroute import Overlay, Partition, config
from gpuroute.crp.customize_multi import customize_multi
from gpuroute.datasets import tile

SIZES = (12, 30, 60)


def _bench():
    spec = importlib.util.spec_from_file_location("_bench_crp_multi_gpu",
                                                  Path(__file__).parents[2] / "benchmarks" / "crp_multi_gpu.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def bench():
    return _bench()


def _setup(bench, seed, mz, kx=2, ky=2, n=70):
    rng = np.random.default_rng(seed)
    g, _ = random_road_graph(rng, n, one_way=0.3)
    g = with_restrictions(g, rng, 6)
    part = Partition.build(g, cell_sizes=SIZES, seed=seed)
    ext = part.refine(g, mz)
    tg = tile(g, kx, ky)
    tpart = bench.tiled_partition(part, tg, kx, ky)
    text = bench.tiled_refined_partition(ext, part, tpart, tg, kx, ky)
    return g, part, ext, tg, tpart, text


@pytest.mark.parametrize("mz, tiles", [(((4,), (), ()), (2, 2)), (((3, 6), (20,), ()), (2, 2)),
                                       (((4,), (), (40,)), (3, 1))])
def test_tiled_refined_partition_is_the_tiling(bench, mz, tiles):
    kx, ky = tiles
    g, part, ext, tg, tpart, text = _setup(bench, 1, mz, kx, ky)
    n = g.n_nodes
    copies = kx * ky
    assert text.cell_sizes == ext.cell_sizes + (tpart.cell_sizes[-1],)
    # nested and dense (the constructor checks both; again from the definition here)
    for lv in range(1, text.n_levels):
        parent = np.full(text.n_cells[lv - 1], -1, np.int64)
        parent[text.cells[lv - 1]] = text.cells[lv]
        np.testing.assert_array_equal(parent[text.cells[lv - 1]], text.cells[lv])
    # every row of ext in every copy, shifted by the copy's cell offset; the top row: 2x2 blocks of copies
    for q in range(ext.n_levels):
        nc = ext.n_cells[q]
        assert text.n_cells[q] == copies * nc
        for c in range(copies):
            np.testing.assert_array_equal(text.cells[q, c * n:(c + 1) * n], c * nc + ext.cells[q])
    np.testing.assert_array_equal(text.cells[-1], tpart.cells[-1])
    # the query levels are the plain tiled partition's rows, at the same cell sizes
    assert text.meta["query_levels"] == [text.cell_sizes.index(s) for s in tpart.cell_sizes]
    for p, q in enumerate(text.meta["query_levels"]):
        np.testing.assert_array_equal(text.cells[q], tpart.cells[p])
    for q, s in enumerate(text.cell_sizes):
        assert text.cell_node_counts(q).max() <= s


@pytest.mark.parametrize("micro", [True, False])
@pytest.mark.parametrize("seed, mz", [(0, ((4,), (), ())), (1, ((3, 6), (20,), ())), (2, ((4,), (), (40,)))])
def test_tiled_mezzanine_cliques_equal_plain_tiled(bench, seed, mz, micro, monkeypatch):
    monkeypatch.setattr(config, "CRP_MICROCODE", micro)
    g, part, ext, tg, tpart, text = _setup(bench, seed, mz)
    plain = Overlay.build(tg, tpart, mezzanine=False)
    ov = Overlay.build(tg, tpart, turns=plain.turns, mezzanine=text)
    plan = ov._plan
    assert not plan.identity and plan.n_ext == text.n_levels
    assert [d["method"] for d in plan.describe()][0] == ("microcode" if micro and mz[0] else "search")
    for metric in (tg.weight("travel_time"), (tg.weight("travel_time"), PEN)):
        ref = plain.customized_state(metric, device="cpu")
        got = ov.customized_state(metric, device="cpu")
        np.testing.assert_array_equal(got.clique, ref.clique)
        # the benchmark's with_plan (the plain overlay's query topology, the refined plan) customizes the same
        same = bench.with_plan(plain, text).customized_state(metric, device="cpu")
        np.testing.assert_array_equal(same.clique, got.clique)
        np.testing.assert_array_equal(same.tree, got.tree)
        # two virtual devices, split at the top level and at level 0 (mezzanine and microcode levels in the parts)
        for split in (None, 0):
            st, _ = customize_multi(ov, metric, devices=[0, 1], device_kind="cpu", split_level=split, install=False)
            np.testing.assert_array_equal(st.clique, ref.clique)
            np.testing.assert_array_equal(st.tree, got.tree)
        ov._multi_cust = None


def test_tiled_refined_partition_bad_input(bench):
    g, part, ext, tg, tpart, _ = _setup(bench, 3, ((4,), (), ()))
    other = Partition.build(g, cell_sizes=SIZES, seed=7)
    if not np.array_equal(other.cells[0], part.cells[0]):
        with pytest.raises(ValueError, match="must refine it"):
            bench.tiled_refined_partition(ext, other, tpart, tg, 2, 2)
    with pytest.raises(ValueError, match="no level of cell size"):
        bench.tiled_refined_partition(ext, Partition(part.cells, (12, 31, 60), "x", part.fingerprint), tpart, tg, 2, 2)
    with pytest.raises(ValueError, match="expected 4 over 3x1 copies"):
        bench.tiled_refined_partition(ext, part, tpart, tg, 3, 1)
    # copies' cell ids swapped: nested and dense, on the right graph, but not the tiling of the base partition
    n = g.n_nodes
    rows = tpart.cells.copy()
    rows[:-1] = rows[:-1].reshape(rows.shape[0] - 1, 4, n)[:, ::-1].reshape(rows.shape[0] - 1, -1)
    swapped = Partition(rows, tpart.cell_sizes, tpart.method, tpart.fingerprint)
    with pytest.raises(ValueError, match="is not the tiling"):
        bench.tiled_refined_partition(ext, part, swapped, tg, 2, 2)
    with pytest.raises(ValueError, match="built for another graph"):
        bench.tiled_refined_partition(ext, part, tpart, tile(g, 1, 2), 2, 2)
