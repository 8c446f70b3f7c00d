"""The push kernel of the GPU customization (``crp_push_level`` in crp/customize.cu, every level whose cells fit
its shared memory unless ``config.CRP_GPU_PUSH_MAX_CELLS`` narrows it) against the CPU twin.

Without a GPU: a NumPy emulation of the kernel over exactly :func:`prepare_level`'s push arrays (forward edges
packed tail | head << 16, their tree edge ids and cost references; balanced work units): rounds that relax the
out-edges of the tails that improved in the round before (the kernel's frontier), then the trees by the
smallest tight forward edge. It must give the CPU customization's cliques bit for bit and the same trees as
the pull kernel's emulation (tests/crp/test_customize_gpu.py: the same tree rule).
With a GPU (``gpu`` marker): customize and update with the push kernel on every level give the CPU's cliques,
and the same trees as the pull kernel, on random graphs (units split, one entry a unit, the frontier on and
off) and NY."""
from __future__ import annotations

import numpy as np
import pytest
from crp.test_customize_gpu import assert_trees_valid, assert_units_cover, emulate
from crp_oracle import PEN, assert_all_pairs_exact, with_restrictions
from naive import random_road_graph

import gpuroute
from gpuroute import INF, Overlay, Partition, config
from gpuroute.backend import gpu_available
from gpuroute.crp import decode_turn_costs
from gpuroute.crp.customize_gpu import _units, prepare_level, push_fits, push_items_of, push_threads


def emulate_push(ov, push_items, max_group, target_units, frontier=True):
    """``crp_push_level`` in NumPy on every level: per work unit, rounds over the forward edges whose tail
    improved in the round before (all edges without the frontier), then the clique rows and the trees (1 + the
    smallest tight forward edge id, 0 at the entry point and where unreached). Returns (clique, tree, rounds
    per level)."""
    topo = ov._topo
    tcost = decode_turn_costs(ov._state.metric, ov.turns)
    clique = np.full(int(topo["cq_first"][-1]), -7, np.int64)
    tree = np.full(int(ov._tree_first[-1]), 9999, np.int64)
    cb = topo["cell_base"]
    rounds = []
    for p, lg in enumerate(topo["levels"]):
        ent_first, ex_first = topo["level_first"][p]
        h = prepare_level(lg, ent_first, ex_first, push_items, max_group, target_units, push=True)
        assert_units_cover(h, push_items)
        assert h["scratch"] == 0 or int(np.diff(h["vf"]).max()) > push_items
        ref = h["f_ref"]
        ecost = np.where(ref >= 0, tcost[np.maximum(ref, 0)], clique[np.maximum(-ref - 1, 0)])
        ecost = np.where((ref >= 0) & (ecost < 0), INF, ecost)
        cq = topo["cq_first"][cb[p]:cb[p + 1] + 1]
        tf = ov._tree_first[cb[p]:cb[p + 1] + 1]
        vf = h["vf"]
        most = 0
        for c, i0, g in zip(h["u_cell"], h["u_i0"], h["u_g"], strict=True):
            lo, n = vf[c], vf[c + 1] - vf[c]
            b0, b1 = h["f_first"][lo], h["f_first"][lo + n]
            pk = h["f_pack"][b0:b1].astype(np.int64)
            tail, head = pk & 0xFFFF, pk >> 16
            ec = ecost[b0:b1]
            d = np.full((n, g), INF, np.int64)
            ents = h["ent_loc"][h["ent_first"][c] + i0:h["ent_first"][c] + i0 + g]
            d[ents, np.arange(g)] = 0
            cur = np.zeros(n, bool)
            cur[ents] = True
            r = 0
            while True:
                r += 1
                assert r <= n + 2, "the push rounds did not converge"
                on = (ec < INF) & (cur[tail] if frontier else True)
                du = d[tail[on]]
                cand = np.where(du < INF, du + ec[on][:, None], INF)
                new = d.copy()
                np.minimum.at(new, head[on], cand)
                better = (new < d).any(axis=1)
                d = new
                if not better.any():
                    break
                cur = better
            most = max(most, r)
            xs = h["ex_loc"][h["ex_first"][c]:h["ex_first"][c + 1]]
            for i in range(g):
                clique[cq[c] + (i0 + i) * xs.size: cq[c] + (i0 + i + 1) * xs.size] = d[xs, i]
            if tf[c + 1] > tf[c]:
                fe = h["f_fe"][b0:b1].astype(np.int64)
                for i in range(g):
                    best = np.full(n, np.iinfo(np.int64).max, np.int64)
                    tight = (ec < INF) & (d[tail, i] < INF) & (d[tail, i] + ec == d[head, i]) & (head != ents[i])
                    np.minimum.at(best, head[tight], fe[tight])
                    out = np.where(best == np.iinfo(np.int64).max, 0, best + 1)
                    tree[tf[c] + (i0 + i) * n + h["v_orig"][lo:lo + n]] = out
        rounds.append(most)
    return clique, tree, rounds


def assert_forward_arrays(h):
    """The push arrays hold exactly the in-edge CSR's edges, with the same tree edge ids and cost references."""
    vcell = np.repeat(np.arange(h["vf"].size - 1), np.diff(h["vf"]))
    V = h["vf"][-1]
    head = np.repeat(np.arange(V), np.diff(h["r_first"]))
    tail = h["r_src"] + h["vf"][vcell[head]]
    ftail = np.repeat(np.arange(V), np.diff(h["f_first"]))
    pk = h["f_pack"].astype(np.int64)
    assert ((pk & 0xFFFF) == ftail - h["vf"][vcell[ftail]]).all()
    fhead = (pk >> 16) + h["vf"][vcell[ftail]]
    a = np.lexsort((h["r_ref"], head, tail, h["r_fe"]))
    b = np.lexsort((h["f_ref"], fhead, ftail, h["f_fe"]))
    np.testing.assert_array_equal(h["r_fe"][a], h["f_fe"][b])
    np.testing.assert_array_equal(tail[a], ftail[b])
    np.testing.assert_array_equal(head[a], fhead[b])
    np.testing.assert_array_equal(h["r_ref"][a], h["f_ref"][b])


def _multi_tests():
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("_crp_push_multi", Path(__file__).with_name("test_customize_multi.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


#: fixture: customize.cu's own kernels on the CPU (tests/tours/cuda_emu.py: a std::thread per CUDA thread, real
#: barriers and atomics), CuPy by NumPy
emulated_gpus = _multi_tests().emulated_gpus


def _overlay(seed, n=50):
    rng = np.random.default_rng(seed)
    g, _ = random_road_graph(rng, n, one_way=0.3)
    g = with_restrictions(g, rng, 10)
    ov = Overlay.build(g, Partition.build(g, cell_sizes=(6, 18, 40), seed=seed))
    return g, ov


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("push_items, max_group, target_units, frontier",
                         [(4096, 64, 0, True), (40, 3, 0, True), (60, 64, 7, True), (4096, 1, 0, False)])
def test_emulated_push_equals_cpu(seed, push_items, max_group, target_units, frontier):
    g, ov = _overlay(seed)
    ov.customize((g.weight("travel_time"), PEN), device="cpu")
    topo = ov._topo
    for p, lg in enumerate(topo["levels"]):
        ent_first, ex_first = topo["level_first"][p]
        assert_forward_arrays(prepare_level(lg, ent_first, ex_first, push_items, max_group, target_units, push=True))
    clique, tree, _ = emulate_push(ov, push_items, max_group, target_units, frontier)
    np.testing.assert_array_equal(clique, ov._state.clique)
    assert_trees_valid(ov, tree)
    _, pull_tree = emulate(ov, 4096, 64)
    np.testing.assert_array_equal(tree, pull_tree)


def test_emulated_push_monaco():
    g = gpuroute.datasets.load("monaco")
    ov = Overlay.build(g, Partition.build(g, cell_sizes=(64, 512, 4096)))
    ov.customize("time-uturn", device="cpu")
    clique, tree, rounds = emulate_push(ov, 4096, 64, 0)
    np.testing.assert_array_equal(clique, ov._state.clique)
    assert_trees_valid(ov, tree)  # (equal to the pull kernel's trees: test_emulated_push_equals_cpu)
    assert all(r >= 1 for r in rounds)


@pytest.mark.parametrize("k, g, sizes", [(34, 11, [9, 9, 9, 7]), (10, 4, [4, 4, 2]), (5, 8, [5]), (12, 4, [4, 4, 4])])
def test_balanced_units(k, g, sizes):
    vf = np.array([0, 20], np.int64)
    ef = np.array([0, k], np.int64)
    cell, i0, gg, scr, total = _units(vf, ef, 4096, g, balance=True)
    assert gg.tolist() == sizes and (cell == 0).all() and total == 0
    np.testing.assert_array_equal(i0, np.concatenate([[0], np.cumsum(gg)[:-1]]))
    assert _units(vf, ef, 4096, g)[2].tolist() == [min(g, k - j) for j in range(0, k, g)]  # unbalanced: as before


def test_push_fits_rule():
    _, ov = _overlay(0)
    for lg in ov._topo["levels"]:
        nc = lg.vert_first.size - 1
        n_max = int(np.diff(lg.vert_first).max())
        assert push_fits(lg, 4096, nc + 1) and not push_fits(lg, 4096, nc) and not push_fits(lg, 4096, 0)
        assert not push_fits(lg, n_max - 1, nc + 1) and push_fits(lg, n_max, nc + 1)
        # the default (None): no cell-count limit, the fit alone decides
        assert config.CRP_GPU_PUSH_MAX_CELLS is None
        assert push_fits(lg, n_max, None) and push_fits(lg, 4096) and not push_fits(lg, n_max - 1, None)


def test_push_items_of_rule():
    """A level that push_fits keeps the default items; one whose largest cell exceeds them takes the big items
    where its cells fit them and the block (15 x items + 16 bytes) fits the device's cap; else the pull kernel."""
    _, ov = _overlay(0)
    for lg in ov._topo["levels"]:
        nc = lg.vert_first.size - 1
        n_max = int(np.diff(lg.vert_first).max())
        assert push_items_of(lg, n_max, 0) == n_max and push_items_of(lg, n_max, 10 * n_max) == n_max
        assert push_items_of(lg, n_max - 1, 0) == 0  # off: the pull kernel, as before
        assert push_items_of(lg, n_max - 1, n_max) == n_max
        assert push_items_of(lg, n_max - 1, n_max - 1) == 0
        assert push_items_of(lg, n_max - 1, n_max, smem_cap=15 * n_max + 16) == n_max
        assert push_items_of(lg, n_max - 1, n_max, smem_cap=15 * n_max + 15) == 0
        assert push_items_of(lg, n_max - 1, n_max, max_cells=nc) == 0  # the cell-count rule still applies
        assert push_items_of(lg, n_max, 0, max_cells=nc) == 0


@pytest.mark.parametrize("seed, push_bytes, big_bytes, threads", [(1, 184, 8 * 4096, 64), (2, 96, 8 * 60, 32)])
def test_push_kernel_emulated_big_cells(emulated_gpus, seed, push_bytes, big_bytes, threads, monkeypatch):  # noqa: F811
    """crp_push_level (the .cu on the CPU emulator) on levels whose cells exceed CRP_GPU_PUSH_SMEM_BYTES / 8 but fit
    CRP_GPU_PUSH_BIG_SMEM_BYTES / 8 (push_items_of): those levels run the push kernel with the big items and block
    (15 x items + 16 bytes of shared memory) instead of the pull kernel; the CPU's cliques, the pull kernel's
    trees, and (with the big items off) the same levels back on the pull kernel."""
    monkeypatch.setattr(config, "CRP_GPU_PUSH_SMEM_BYTES", push_bytes)
    monkeypatch.setattr(config, "CRP_GPU_PUSH_BIG_SMEM_BYTES", 0)  # first without the big items
    monkeypatch.setattr(config, "CRP_GPU_PUSH_THREADS", threads)
    monkeypatch.setattr(config, "CRP_GPU_PUSH_MAX_THREADS", threads)
    g, ov = _overlay(seed, 40)
    metric = (g.weight("travel_time"), PEN)
    ov.customize(metric, device="cpu")
    ref = ov._state.clique.copy()
    pull_c, pull_t, kinds_off = _gpu_cliques_trees(ov, metric, 0, monkeypatch)
    _, _, kinds_small = _gpu_cliques_trees(ov, metric, None, monkeypatch)
    assert not all(kinds_small)  # some level too big for push_bytes: pull there
    monkeypatch.setattr(config, "CRP_GPU_PUSH_BIG_SMEM_BYTES", big_bytes)
    push_c, push_t, kinds = _gpu_cliques_trees(ov, metric, None, monkeypatch)
    np.testing.assert_array_equal(pull_c, ref)
    np.testing.assert_array_equal(push_c, ref)
    np.testing.assert_array_equal(push_t, pull_t)
    small, big = push_bytes // 8, big_bytes // 8
    for lv, lg, was in zip(ov._gpu_cust.levels, ov._topo["levels"], kinds_small, strict=True):
        n_max = int(np.diff(lg.vert_first).max())
        want = small if n_max <= small else (big if n_max <= big else 0)
        assert lv["push"] == (want > 0) and lv["push_items"] == want
        assert lv["push_smem"] == (15 * want + 16 if want else 0)
        assert lv["push"] or not was
        assert not lv["push"] or lv["host"]["scratch"] == 0  # (a push unit never uses global scratch)
    assert sum(kinds) > sum(kinds_small)


@pytest.mark.parametrize("edges, cells, least, most, unroll, want",
                         [(2_269_576, 1092, 512, 1024, 8, 512),  # NY level 0 (2,078 edges a cell)
                          (415_306, 69, 512, 1024, 8, 512),  # level 1 (6,019 < 8,192: one stride of 1,024 x 8)
                          (113_290, 5, 512, 1024, 8, 1024),  # level 2 (22,658)
                          (415_306, 69, 512, 1024, 4, 1024),  # level 1 at unroll 4 (6,019 >= 4,096)
                          (113_290, 5, 512, 512, 8, 512),  # capped
                          (113_290, 5, 1024, 1024, 8, 1024),  # CRP_GPU_PUSH_THREADS = 1,024: every level
                          (2_269_576, 1092, 1024, 1024, 8, 1024),
                          (8192, 1, 32, 1024, 8, 1024), (8191, 1, 32, 1024, 8, 512), (0, 0, 64, 1024, 8, 64)])
def test_push_threads_rule(edges, cells, least, most, unroll, want):
    assert push_threads(edges, cells, least, most, unroll) == want


@pytest.mark.parametrize("seed, push_bytes, threads, most, frontier, target, split, mixed",
                         [(0, 24 * 1024, 32, 32, True, 0, False, False),  # whole cells a unit
                          (1, 184, 64, 64, True, 0, True, True),  # one entry point a unit; level 0 too big: pull
                          (2, 320, 32, 32, False, 5, True, False),
                          (0, 24 * 1024, 4, 64, True, 0, False, False)])  # blocks of 4 to 64 threads by level
def test_push_kernel_emulated(emulated_gpus, seed, push_bytes, threads, most, frontier, target, split, mixed,  # noqa: F811
                              monkeypatch):
    """crp_push_level itself (the CPU emulator runs the .cu -- as built by default, CRP_PUSH_UNROLL 8 -- the
    block's threads concurrently, the shared-memory atomicMin and the barriers real): the cliques of the CPU
    customization, the trees of the pull kernel, on every level, with units of several entry points and of one,
    blocks of the level's push_threads; the default cell rule (None) as the unlimited one."""
    monkeypatch.setattr(config, "CRP_GPU_PUSH_SMEM_BYTES", push_bytes)
    monkeypatch.setattr(config, "CRP_GPU_PUSH_BIG_SMEM_BYTES", 0)  # a too-big level stays on the pull kernel
    monkeypatch.setattr(config, "CRP_GPU_PUSH_THREADS", threads)
    monkeypatch.setattr(config, "CRP_GPU_PUSH_MAX_THREADS", most)
    monkeypatch.setattr(config, "CRP_GPU_PUSH_TARGET_UNITS", target)
    monkeypatch.setattr(config, "CRP_GPU_FRONTIER", frontier)
    g, ov = _overlay(seed, 40)
    metric = (g.weight("travel_time"), PEN)
    ov.customize(metric, device="cpu")
    ref = ov._state.clique.copy()
    pull_c, pull_t, kinds = _gpu_cliques_trees(ov, metric, 0, monkeypatch)
    assert not any(kinds)
    push_c, push_t, kinds = _gpu_cliques_trees(ov, metric, None, monkeypatch)
    assert any(kinds)
    assert kinds == _gpu_cliques_trees(ov, metric, 10**9, monkeypatch)[2]  # None: no cell-count limit
    np.testing.assert_array_equal(pull_c, ref)
    np.testing.assert_array_equal(push_c, ref)
    np.testing.assert_array_equal(push_t, pull_t)
    push = [lv for lv in ov._gpu_cust.levels if lv is not None and lv["push"]]
    blocks = [lv["push_threads"] for lv in push]
    assert blocks == [push_threads(lv["n_edges"], lv["host"]["vf"].size - 1, threads, most, config.CRP_GPU_PUSH_UNROLL)
                      for lv in push]
    assert (max(blocks) > threads) == (most > threads)  # the last case: some level's block doubled
    working = sum(int((np.diff(lv["host"]["ent_first"]) > 0).sum()) for lv in push)
    assert working > 0 and (sum(lv["n_units"] for lv in push) > working) == split  # cells split into units or not
    assert all(kinds) == (not mixed)


# ------------------------------------------------------------------------------------------------ GPU
def _gpu_cliques_trees(ov, metric, max_cells, monkeypatch):
    monkeypatch.setattr(config, "CRP_GPU_PUSH_MAX_CELLS", max_cells)
    ov._gpu_cust = None  # rebuilt with the setting
    info = ov.customize(metric, device="gpu")
    assert info["device"] == "gpu"
    kinds = [lv is not None and lv["push"] for lv in ov._gpu_cust.levels]
    return ov._state.clique.copy(), np.asarray(ov._state.tree).copy(), kinds


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")
@pytest.mark.parametrize("push_bytes, max_group, threads, frontier, target",
                         [(24 * 1024, 64, 512, True, 256), (320, 3, 64, True, 0), (480, 1, 32, False, 0),
                          (48 * 1024, 64, 1024, True, 7)])
@pytest.mark.parametrize("seed", range(3))
def test_gpu_push_equals_cpu(seed, push_bytes, max_group, threads, frontier, target, monkeypatch):
    monkeypatch.setattr(config, "CRP_GPU_PUSH_SMEM_BYTES", push_bytes)
    monkeypatch.setattr(config, "CRP_GPU_MAX_GROUP", max_group)
    monkeypatch.setattr(config, "CRP_GPU_PUSH_THREADS", threads)
    monkeypatch.setattr(config, "CRP_GPU_PUSH_TARGET_UNITS", target)
    monkeypatch.setattr(config, "CRP_GPU_FRONTIER", frontier)
    g, ov = _overlay(seed, 60)
    metric = (g.weight("travel_time"), PEN)
    ov.customize(metric, device="cpu")
    ref = ov._state.clique.copy()
    pull_c, pull_t, kinds = _gpu_cliques_trees(ov, metric, 0, monkeypatch)
    assert not any(kinds)
    push_c, push_t, kinds = _gpu_cliques_trees(ov, metric, 10**9, monkeypatch)
    assert any(kinds)  # (a level whose biggest cell does not fit keeps the pull kernel)
    np.testing.assert_array_equal(pull_c, ref)
    np.testing.assert_array_equal(push_c, ref)
    np.testing.assert_array_equal(push_t, pull_t)
    assert_trees_valid(ov, ov._state.tree)
    assert_all_pairs_exact(ov, sources=range(0, 60, 6))
    # traffic on the push levels: GPU update == CPU update
    rng = np.random.default_rng(seed + 10)
    ids = rng.integers(0, g.n_arcs, 15)
    costs = rng.integers(1, 400, 15)
    ov.update(ids, costs, device="gpu")
    got = ov._state.clique.copy()
    ov.update(ids[:4], costs[:4] + 3, device="gpu")
    got2 = ov._state.clique.copy()
    ov.customize(metric, device="cpu")
    ov.update(ids, costs, device="cpu")
    np.testing.assert_array_equal(got, ov._state.clique)
    ov.update(ids[:4], costs[:4] + 3, device="cpu")
    np.testing.assert_array_equal(got2, ov._state.clique)


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")
@pytest.mark.parametrize("push_bytes, big_bytes", [(96, 96 * 1024), (96, 480)])
@pytest.mark.parametrize("seed", range(2))
def test_gpu_push_big_cells_equals_cpu(seed, push_bytes, big_bytes, monkeypatch):
    """Levels whose cells exceed CRP_GPU_PUSH_SMEM_BYTES / 8 vertices run the push kernel with
    CRP_GPU_PUSH_BIG_SMEM_BYTES / 8 items a unit (96 KiB: a 184 KiB block, the opt-in path): the CPU's cliques, the
    pull kernel's trees, and traffic updates (their units sized by the level's items) equal the CPU's."""
    monkeypatch.setattr(config, "CRP_GPU_PUSH_SMEM_BYTES", push_bytes)
    monkeypatch.setattr(config, "CRP_GPU_PUSH_BIG_SMEM_BYTES", 0)  # first without the big items
    g, ov = _overlay(seed, 60)
    metric = (g.weight("travel_time"), PEN)
    ov.customize(metric, device="cpu")
    ref = ov._state.clique.copy()
    pull_c, pull_t, _ = _gpu_cliques_trees(ov, metric, 0, monkeypatch)
    _, _, small = _gpu_cliques_trees(ov, metric, None, monkeypatch)
    monkeypatch.setattr(config, "CRP_GPU_PUSH_BIG_SMEM_BYTES", big_bytes)
    push_c, push_t, kinds = _gpu_cliques_trees(ov, metric, None, monkeypatch)
    assert sum(kinds) > sum(small)
    assert any(lv is not None and lv["push_items"] == big_bytes // 8 for lv in ov._gpu_cust.levels)
    np.testing.assert_array_equal(pull_c, ref)
    np.testing.assert_array_equal(push_c, ref)
    np.testing.assert_array_equal(push_t, pull_t)
    rng = np.random.default_rng(seed + 20)
    ids = rng.integers(0, g.n_arcs, 15)
    costs = rng.integers(1, 400, 15)
    ov.update(ids, costs, device="gpu")
    got = ov._state.clique.copy()
    ov.customize(metric, device="cpu")
    ov.update(ids, costs, device="cpu")
    np.testing.assert_array_equal(got, ov._state.clique)


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")
def test_gpu_push_ny(monkeypatch):
    monkeypatch.setattr(config, "CRP_KAHIP_MODE", "fast")
    g = gpuroute.datasets.load("ny")
    ov = Overlay.build(g, Partition.build(g))
    ov.customize("distance", device="cpu")
    ref = ov._state.clique.copy()
    pull_c, pull_t, _ = _gpu_cliques_trees(ov, "distance", 0, monkeypatch)
    push_c, push_t, kinds = _gpu_cliques_trees(ov, "distance", 100, monkeypatch)  # session 23's first rule
    assert kinds[0] is False and any(kinds)
    np.testing.assert_array_equal(push_c, ref)
    np.testing.assert_array_equal(pull_c, ref)
    np.testing.assert_array_equal(push_t, pull_t)
    push_c, push_t, kinds = _gpu_cliques_trees(ov, "distance", None, monkeypatch)  # the default: every level
    assert all(kinds)
    np.testing.assert_array_equal(push_c, ref)
    np.testing.assert_array_equal(push_t, pull_t)
    rng = np.random.default_rng(3)
    ids = rng.integers(0, g.n_arcs, 1000)
    costs = rng.integers(1, 5000, 1000)
    ov.update(ids, costs, device="gpu")
    got = ov._state.clique.copy()
    ov.customize("distance", device="cpu")
    ov.update(ids, costs, device="cpu")
    np.testing.assert_array_equal(got, ov._state.clique)
