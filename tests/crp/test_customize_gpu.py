"""GPU customization of the overlay (gpuroute.crp.customize_gpu) against the CPU twin.

Without a GPU: the kernels' metric-independent layout (work units, incoming-edge CSR, local entry/exit
points, scratch slices) is checked by a NumPy emulation of the kernels' Bellman-Ford over exactly those
arrays, which must give the CPU customization's cliques bit for bit and valid shortest-path trees.
With a GPU (``gpu`` marker): ``customize(device="gpu")`` and ``update(device="gpu")`` give the CPU's
cliques bit for bit (random graphs with restrictions and turn penalties, Monaco with the U-turn penalty,
NY), with work units small enough to split cells and to use the global-memory fallback; queries on a
GPU-customized overlay (trees read for path unpacking) equal the turn-aware Dijkstra oracle."""
from __future__ import annotations

import numpy as np
import pytest
from crp_oracle import PEN, assert_all_pairs_exact, with_restrictions
from naive import random_road_graph

import gpuroute
from gpuroute import INF, Overlay, Partition, config
from gpuroute.backend import gpu_available
from gpuroute.crp import decode_turn_costs
from gpuroute.crp.customize_gpu import prepare_level


def emulate(ov, smem_items, max_group, target_units=0):
    """The kernels' computation in NumPy over :func:`prepare_level`'s arrays: for every work unit, Jacobi
    Bellman-Ford rounds over the unit's ``vertices x g`` distances, then its clique rows and trees.
    Returns (clique, tree) laid out as the overlay's."""
    topo = ov._topo
    st = ov._state
    tcost = decode_turn_costs(st.metric, ov.turns)
    clique = np.full(int(topo["cq_first"][-1]), -7, np.int64)
    tree = np.full(int(ov._tree_first[-1]), 9999, np.int64)
    cb = topo["cell_base"]
    for p, lg in enumerate(topo["levels"]):
        ent_first, ex_first = topo["level_first"][p]
        h = prepare_level(lg, ent_first, ex_first, smem_items, max_group, target_units)
        ref = h["r_ref"]
        ecost = np.where(ref >= 0, tcost[np.maximum(ref, 0)], clique[np.maximum(-ref - 1, 0)])
        ecost = np.where((ref >= 0) & (ecost < 0), INF, ecost)
        assert_units_cover(h, smem_items)
        for c in range(h["vf"].size - 1):  # renumbering: a permutation within each cell
            lo, hi = h["vf"][c], h["vf"][c + 1]
            np.testing.assert_array_equal(np.sort(h["v_orig"][lo:hi]), np.arange(hi - lo))
        assert_same_edges(h)
        cq = topo["cq_first"][cb[p]:cb[p + 1] + 1]
        tf = ov._tree_first[cb[p]:cb[p + 1] + 1]
        vf = h["vf"]
        for c, i0, g in zip(h["u_cell"], h["u_i0"], h["u_g"], strict=True):
            lo, n = vf[c], vf[c + 1] - vf[c]
            a0, a1 = h["r_first"][lo], h["r_first"][lo + n]
            heads = np.repeat(np.arange(n), np.diff(h["r_first"][lo:lo + n + 1]))
            src = h["r_src"][a0:a1]
            ec = ecost[a0:a1]
            d = np.full((n, g), INF, np.int64)
            ents = h["ent_loc"][h["ent_first"][c] + i0:h["ent_first"][c] + i0 + g]
            d[ents, np.arange(g)] = 0
            for _ in range(n + 2):
                ok = ec < INF
                cand = np.full((heads.size, g), INF, np.int64)
                du = d[src]
                fin = ok[:, None] & (du < INF)
                cand[fin] = (du + ec[:, None])[fin]
                new = d.copy()
                np.minimum.at(new, heads, cand)
                if (new == d).all():
                    break
                d = new
            else:
                raise AssertionError("Bellman-Ford did not converge")
            xs = h["ex_loc"][h["ex_first"][c]:h["ex_first"][c + 1]]
            nx = xs.size
            for i in range(g):
                clique[cq[c] + (i0 + i) * nx: cq[c] + (i0 + i + 1) * nx] = d[xs, i]
            if tf[c + 1] > tf[c]:
                for i in range(g):
                    tight = (ec < INF) & (d[src, i] < INF) & (d[src, i] + ec == d[heads, i])
                    par = np.full(n, -1, np.int64)
                    fe = h["r_fe"][a0:a1]
                    for v, e in sorted(zip(heads[tight], fe[tight], strict=True), key=lambda x: -x[1]):
                        par[v] = e
                    par[ents[i]] = -1
                    par[d[:, i] >= INF] = -1
                    tree[tf[c] + (i0 + i) * n + h["v_orig"][lo:lo + n]] = par + 1
    return clique, tree


def assert_same_edges(h):
    """The out-neighbour CSR (frontier marking) holds exactly the edges of the in-neighbour CSR."""
    vcell = np.repeat(np.arange(h["vf"].size - 1), np.diff(h["vf"]))
    V = h["vf"][-1]
    head = np.repeat(np.arange(V), np.diff(h["r_first"]))
    tail = h["r_src"] + h["vf"][vcell[head]]
    ftail = np.repeat(np.arange(V), np.diff(h["f_first"]))
    fhead = h["f_dst"] + h["vf"][vcell[ftail]]
    a = np.sort(tail.astype(np.int64) * V + head)
    b = np.sort(ftail.astype(np.int64) * V + fhead)
    np.testing.assert_array_equal(a, b)


def assert_units_cover(h, smem_items):
    """Every (cell, entry point) is in exactly one unit; units fit shared memory or own a scratch slice."""
    n = np.diff(h["vf"])
    k = np.diff(h["ent_first"])
    seen = np.zeros(int(k.sum()), np.int64)
    for c, i0, g, s in zip(h["u_cell"], h["u_i0"], h["u_g"], h["u_scr"], strict=True):
        assert g >= 1 and 0 <= i0 and i0 + g <= k[c]
        seen[h["ent_first"][c] + i0:h["ent_first"][c] + i0 + g] += 1
        assert (s >= 0) == (n[c] > smem_items)
        assert s >= 0 or n[c] * g <= smem_items
    assert ((seen == 1) | (np.repeat(n, k) == 0)).all()
    big = h["u_scr"] >= 0
    if big.any():
        sizes = n[h["u_cell"][big]] * h["u_g"][big]
        order = np.argsort(h["u_scr"][big])
        ends = h["u_scr"][big][order] + sizes[order]
        assert (ends[:-1] <= h["u_scr"][big][order][1:]).all() and ends[-1] <= h["scratch"]


def assert_trees_valid(ov, tree):
    """Each kept tree's parent edges end at their vertex, and parents lead from every reached vertex back
    to the entry point without a cycle (sampled cells)."""
    topo = ov._topo
    cb = topo["cell_base"]
    for p, lg in enumerate(topo["levels"]):
        ent_first, _ = topo["level_first"][p]
        for c in range(0, lg.vert_first.size - 1, 7):
            lo, hi = lg.vert_first[c], lg.vert_first[c + 1]
            n = hi - lo
            g_ = cb[p] + c
            tf0 = ov._tree_first[g_]
            if ov._tree_first[g_ + 1] == tf0:
                continue
            e0 = lg.e_first[lo]
            tail = np.repeat(np.arange(lo, hi), np.diff(lg.e_first[lo:hi + 1]))
            for i in range(ent_first[c + 1] - ent_first[c]):
                entry = lg.ent_vert[ent_first[c] + i] - lo
                par = tree[tf0 + i * n: tf0 + (i + 1) * n].astype(np.int64) - 1
                for v in np.flatnonzero(par >= 0):
                    e = e0 + par[v]
                    assert lg.e_first[lo] <= e < lg.e_first[hi] and lg.e_to[e] == lo + v
                    u, steps = v, 0
                    while par[u] >= 0 and steps <= n:
                        u = tail[par[u]] - lo
                        steps += 1
                    assert u == entry, f"level {p} cell {c} entry {i}: vertex {v} does not lead to the entry"


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("smem_items, max_group, target_units", [(4096, 64, 0), (12, 2, 0), (5, 3, 0), (4096, 64, 40)])
def test_emulated_kernels_equal_cpu_cliques(seed, smem_items, max_group, target_units):
    rng = np.random.default_rng(seed)
    g, _ = random_road_graph(rng, 50, one_way=0.3)
    g = with_restrictions(g, rng, 10)
    ov = Overlay.build(g, Partition.build(g, cell_sizes=(6, 18, 40), seed=seed))
    ov.customize((g.weight("travel_time"), PEN), device="cpu")
    clique, tree = emulate(ov, smem_items, max_group, target_units)
    np.testing.assert_array_equal(clique, ov._state.clique)
    assert_trees_valid(ov, tree)


def test_emulated_kernels_monaco():
    g = gpuroute.datasets.load("monaco")
    ov = Overlay.build(g, Partition.build(g, cell_sizes=(64, 512, 4096)))
    ov.customize("time-uturn", device="cpu")
    clique, tree = emulate(ov, 300, 8)
    np.testing.assert_array_equal(clique, ov._state.clique)
    assert_trees_valid(ov, tree)


# ------------------------------------------------------------------------------------------------ GPU
def assert_gpu_equals_cpu(ov, metric):
    ov.customize(metric, device="cpu")
    ref = ov._state.clique.copy()
    info = ov.customize(metric, device="gpu")
    assert info["device"] == "gpu"
    np.testing.assert_array_equal(ov._state.clique, ref)
    assert_trees_valid(ov, ov._state.tree)


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")
@pytest.mark.parametrize("smem_bytes, max_group, threads, frontier", [(48 * 1024, 64, 256, True), (96, 2, 32, True),
                                                                    (40, 3, 64, True), (24 * 1024, 8, 512, False)])
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("push_cells", [0, None])  # the pull kernel on every level; the push kernel where it fits (default)
def test_gpu_customize_equals_cpu(seed, smem_bytes, max_group, threads, frontier, push_cells, monkeypatch):
    monkeypatch.setattr(config, "CRP_GPU_PUSH_MAX_CELLS", push_cells)
    monkeypatch.setattr(config, "CRP_GPU_FRONTIER", frontier)
    monkeypatch.setattr(config, "CRP_GPU_SMEM_BYTES", smem_bytes)
    monkeypatch.setattr(config, "CRP_GPU_MAX_GROUP", max_group)
    monkeypatch.setattr(config, "CRP_GPU_THREADS", threads)
    rng = np.random.default_rng(seed)
    g, _ = random_road_graph(rng, 60, one_way=0.3)
    g = with_restrictions(g, rng, 12)
    ov = Overlay.build(g, Partition.build(g, cell_sizes=(6, 18, 40), seed=seed))
    assert_gpu_equals_cpu(ov, "distance")
    assert_gpu_equals_cpu(ov, (g.weight("travel_time"), PEN))
    assert_all_pairs_exact(ov, sources=range(0, 60, 5))
    # traffic: GPU update == CPU update, starting from the device copy and from a CPU customization
    ids = rng.integers(0, g.n_arcs, 15)
    costs = rng.integers(1, 400, 15)
    ov.update(ids, costs, device="gpu")
    got = ov._state.clique.copy()
    ov.customize((g.weight("travel_time"), PEN), device="cpu")
    ov.update(ids, costs, device="cpu")
    np.testing.assert_array_equal(got, ov._state.clique)
    ov.update(ids[:5], costs[:5] + 7, device="gpu")  # the device copy is stale: starts from the host state
    got = ov._state.clique.copy()
    ov.update(ids[5:], costs[5:] * 2, device="gpu")
    got2 = ov._state.clique.copy()
    ov.customize((g.weight("travel_time"), PEN), device="cpu")
    ov.update(ids, costs, device="cpu")
    ov.update(ids[:5], costs[:5] + 7, device="cpu")
    np.testing.assert_array_equal(got, ov._state.clique)
    ov.update(ids[5:], costs[5:] * 2, device="cpu")
    np.testing.assert_array_equal(got2, ov._state.clique)
    assert_all_pairs_exact(ov, sources=range(1, 60, 7))


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")
@pytest.mark.parametrize("name, cells, metric", [("monaco", (64, 512, 4096), "time-uturn"),
                                                 ("ny", None, "distance")])
def test_gpu_customize_real_networks(name, cells, metric, monkeypatch):
    monkeypatch.setattr(config, "CRP_KAHIP_MODE", "fast")
    g = gpuroute.datasets.load(name)
    part = Partition.build(g, cell_sizes=cells, method="kahip") if cells else Partition.build(g)
    ov = Overlay.build(g, part)
    assert_gpu_equals_cpu(ov, metric)
    rng = np.random.default_rng(1)
    s, t = rng.integers(0, g.n_nodes, 300), rng.integers(0, g.n_nodes, 300)
    gd = ov.distances(s, t)
    ids = rng.integers(0, g.n_arcs, 1000)
    costs = rng.integers(1, 5000, 1000)
    ov.update(ids, costs, device="gpu")
    got = ov._state.clique.copy()
    ov.customize(metric, device="cpu")
    np.testing.assert_array_equal(ov.distances(s, t), gd)
    ov.update(ids, costs, device="cpu")
    np.testing.assert_array_equal(got, ov._state.clique)
