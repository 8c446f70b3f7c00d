"""Mezzanine levels and the level driver (gpuroute.crp.customize.CustomizationPlan; Delling, Kobitzsch,
Werneck, Euro-Par 2014, sec. 3 and 4).

``Partition.refine`` inserts finer nested levels; an overlay customized through them (the lowest by
microinstructions or by Dijkstra) has the same cliques as one customized without them, bit for bit, and
so the same exact distances and routes (unpacked through the kept trees of the mezzanine search graphs
and searches of the microcode cells) as the turn-aware Dijkstra oracle; traffic updates too. Without a
GPU, a NumPy emulation of the GPU layout over the plan's levels (the Bellman-Ford kernels' arrays from
``prepare_level``, the microcode twin) gives the same cliques. With a GPU (``gpu`` marker):
``customize(device="gpu")`` / ``update(device="gpu")`` equal the CPU bit for bit, trees valid."""
from __future__ import annotations

import numpy as np
import pytest
from crp_oracle import PEN, assert_all_pairs_exact, assert_path_ok, oracle, with_restrictions
from naive import random_road_graph

import gpuroute
from gpuroute import INF, Overlay, Partition, config
from gpuroute.backend import gpu_available
from gpuroute.crp import decode_turn_costs, microcode
from gpuroute.crp.customize_gpu import prepare_level

CONFIGS = [{12: (4,)}, {12: (3, 6), 30: (20,)}, {30: (20,), 60: (40,)}]


def graph(seed, n=70):
    rng = np.random.default_rng(seed)
    g, _ = random_road_graph(rng, n, one_way=0.3)
    return with_restrictions(g, rng, 10), rng


# ------------------------------------------------------------------------------------------ partition
@pytest.mark.parametrize("mz", [((4,), (), ()), ((3, 6), (20,), ()), ((), (20,), (40, 50))])
def test_refine_nested_and_bounded(mz):
    g, _ = graph(1, 90)
    part = Partition.build(g, cell_sizes=(12, 30, 60), seed=1)
    ext = part.refine(g, mz)
    sizes = sorted(set(part.cell_sizes) | {s for x in mz for s in x})
    assert ext.cell_sizes == tuple(sizes)
    assert ext.meta["query_levels"] == [sizes.index(s) for s in part.cell_sizes]
    for p, q in enumerate(ext.meta["query_levels"]):
        np.testing.assert_array_equal(ext.cells[q], part.cells[p])
    for q, s in enumerate(ext.cell_sizes):
        assert ext.cell_node_counts(q).max() <= s
    assert part.refine(g, mz) is ext  # memoised


@pytest.mark.parametrize("mz, msg", [(((4,), ()), "one entry per level"), (((12,), (), ()), "strictly between"),
                                     (((), (5,), ()), "strictly between"), (((6, 4), (), ()), "increasing"),
                                     (((4.5,), (), ()), "ints"), ("32", "sequence")])
def test_refine_bad_input(mz, msg):
    g, _ = graph(2, 40)
    part = Partition.build(g, cell_sizes=(12, 30, 60), seed=2)
    with pytest.raises(ValueError, match=msg):
        part.refine(g, mz)


def test_mezzanine_partition_must_refine():
    g, _ = graph(3, 60)
    part = Partition.build(g, cell_sizes=(12, 30, 60), seed=3)
    other = Partition.build(g, cell_sizes=(12, 30, 60), seed=4).refine(g, ((4,), (), ()))
    if not np.array_equal(other.cells[1], part.cells[0]):
        with pytest.raises(ValueError, match="refine"):
            Overlay.build(g, part, mezzanine=other)
    with pytest.raises(TypeError, match="mezzanine"):
        Overlay.build(g, part, mezzanine=[4])
    ov = Overlay.build(g, part, mezzanine=part.refine(g, ((4,), (), ())))
    assert ov._plan.n_ext == 4 and ov._plan.micro is not None


# ------------------------------------------------------------------------------------------ CPU
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("mz", CONFIGS)
@pytest.mark.parametrize("micro", [True, False])
def test_mezzanine_cliques_routes_updates(seed, mz, micro, monkeypatch):
    monkeypatch.setattr(config, "CRP_MICROCODE", micro)
    g, rng = graph(seed)
    part = Partition.build(g, cell_sizes=(12, 30, 60), seed=seed)
    base = Overlay.build(g, part, mezzanine=False)
    ov = Overlay.build(g, part, mezzanine=mz)
    assert ov._plan.n_ext == 3 + sum(len(v) for v in mz.values())
    assert (ov._plan.micro is not None) == (micro and 12 in mz)
    metric = (g.weight("travel_time"), PEN)
    base.customize(metric, device="cpu")
    info = ov.customize(metric, device="cpu")
    assert len(info["level_seconds"]) == 3 and len(info["plan"]) == ov._plan.n_ext
    assert [d["method"] for d in info["plan"]][0] == ("microcode" if micro and 12 in mz else "search")
    np.testing.assert_array_equal(ov._state.clique, base._state.clique)
    assert_all_pairs_exact(ov, sources=range(seed, 70, 9))
    ids = rng.integers(0, g.n_arcs, 12)
    costs = rng.integers(1, 400, 12)
    u = ov.update(ids, costs, device="cpu")
    base.update(ids, costs, device="cpu")
    assert len(u["cells"]) == 3
    np.testing.assert_array_equal(ov._state.clique, base._state.clique)
    assert_all_pairs_exact(ov, sources=range(seed + 2, 70, 13))


def test_mezzanine_from_config(monkeypatch):
    g, _ = graph(5)
    part = Partition.build(g, cell_sizes=(12, 30, 60), seed=5)
    monkeypatch.setattr(config, "CRP_MEZZANINE", {12: (4,), 999: (7,)})  # 999: no such level, no mezzanine
    ov = Overlay.build(g, part)
    assert ov._plan.cell_sizes == (4, 12, 30, 60)
    monkeypatch.setattr(config, "CRP_MEZZANINE", {})
    assert Overlay.build(g, part)._plan.identity


def test_trees_smaller_and_unpacking_through_mezzanine():
    """The kept trees are those of the plan's search graphs (mezzanine cliques at level 0: fewer vertices);
    routes unpack through them and through searches of the microcode cells."""
    g, _ = graph(6, 90)
    part = Partition.build(g, cell_sizes=(12, 30, 60), seed=6)
    ov = Overlay.build(g, part, mezzanine={12: (4,)})
    base = Overlay.build(g, part, mezzanine=False)
    cb = ov._plan.topo["cell_base"]
    assert ov._tree_first[cb[1]] == 0  # no trees on the microcode level
    assert ov._tree_first[-1] < base._tree_first[-1]
    ov.customize("distance", device="cpu")
    for s in range(0, 90, 11):
        exp = oracle(ov, s)
        for t in range(0, 90, 7):
            res = ov.route(s, t)
            assert res.distance == exp[t]
            assert_path_ok(ov, s, t, res)


def test_save_load_tree_layout(tmp_path, monkeypatch):
    """A saved overlay carries the mezzanine levels it was customized on (``mezzanine.npy``): loaded under
    any configuration it has the same plan and keeps its trees, without kaffpa. One saved without them is
    loaded as before they were saved: the configuration decides, and trees of another layout are dropped
    (routes still exact)."""
    g, _ = graph(7)
    part = Partition.build(g, cell_sizes=(12, 30, 60), seed=7)
    monkeypatch.setattr(config, "CRP_MEZZANINE", {12: (4,)})
    ov = Overlay.build(g, part)
    assert not ov._plan.identity
    ov.customize("distance", device="cpu")
    d = ov.save(tmp_path / "ov")
    monkeypatch.setattr(config, "CRP_MEZZANINE", {})
    from gpuroute.crp import microcode

    monkeypatch.setattr(Partition, "refine", lambda *a, **k: pytest.fail("kaffpa ran on load"))
    monkeypatch.setattr(microcode, "build_program", lambda *a, **k: pytest.fail("microinstructions built on load"))
    same = Overlay.load(d, g)
    assert not same._plan.identity and ov._plan.micro is not None
    for k, v in ov._plan.micro.arrays().items():
        np.testing.assert_array_equal(getattr(same._plan.micro, k), v)
    assert same._plan.micro.scalars() == ov._plan.micro.scalars()
    np.testing.assert_array_equal(same._plan.partition.cells, ov._plan.partition.cells)
    assert same._plan.partition.cell_sizes == ov._plan.partition.cell_sizes
    assert same._tree_first[-1] == ov._tree_first[-1] and same._state.tree.size == ov._state.tree.size
    np.testing.assert_array_equal(same._state.tree, ov._state.tree)
    monkeypatch.undo()
    monkeypatch.setattr(config, "CRP_MEZZANINE", {})
    plain = Overlay.build(g, part)
    plain.customize("distance", device="cpu")
    d2 = plain.save(tmp_path / "plain")
    monkeypatch.setattr(config, "CRP_MEZZANINE", {12: (4,)})
    other = Overlay.load(d2, g)
    assert not other._plan.identity  # the configuration's plan
    assert other._state.tree.size == 0 and other._tree_first[-1] == 0
    np.testing.assert_array_equal(other._state.clique, ov._state.clique)
    for ov_ in (same, other):
        exp = oracle(ov_, 3)
        for t in range(0, 70, 6):
            res = ov_.route(3, t)
            assert res.distance == exp[t]
            assert_path_ok(ov_, 3, t, res)


def test_build_gives_large_graphs_the_auto_mezzanine(monkeypatch):
    """The pipeline's customize stage: ``CRP_MEZZANINE_AUTO`` from ``CRP_MEZZANINE_AUTO_MIN_NODES`` nodes on
    (where the partition has the size), an explicit ``CRP_MEZZANINE`` always, none below."""
    pytest.importorskip("kahip")
    from gpuroute.crp.customize import build_mezzanine

    g, _ = graph(7)
    part = Partition.build(g, cell_sizes=(12, 30, 60), seed=7)
    monkeypatch.setattr(config, "CRP_MEZZANINE", {})
    monkeypatch.setattr(config, "CRP_MEZZANINE_AUTO", {12: (4,)})
    monkeypatch.setattr(config, "CRP_MEZZANINE_AUTO_MIN_NODES", g.n_nodes + 1)
    assert build_mezzanine(g, part) is False
    monkeypatch.setattr(config, "CRP_MEZZANINE_AUTO_MIN_NODES", g.n_nodes)
    assert build_mezzanine(g, part) == {12: (4,)}
    monkeypatch.setattr(config, "CRP_MEZZANINE_AUTO", {256: (32,)})  # no such level
    assert build_mezzanine(g, part) is False
    monkeypatch.setattr(config, "CRP_MEZZANINE", {30: (15,)})
    assert build_mezzanine(g, part) == {30: (15,)}


def test_monaco_mezzanine(monkeypatch):
    monkeypatch.setattr(config, "CRP_KAHIP_MODE", "fast")
    g = gpuroute.datasets.load("monaco")
    part = Partition.build(g, cell_sizes=(64, 512, 4096))
    base = Overlay.build(g, part, mezzanine=False)
    ov = Overlay.build(g, part, mezzanine={64: (16,), 512: (256,)})
    base.customize("time-uturn", device="cpu")
    ov.customize("time-uturn", device="cpu")
    np.testing.assert_array_equal(ov._state.clique, base._state.clique)
    rng = np.random.default_rng(0)
    s, t = rng.integers(0, g.n_nodes, 40), rng.integers(0, g.n_nodes, 40)
    np.testing.assert_array_equal(ov.distances(s, t), base.distances(s, t))
    for a, b in zip(s[:10], t[:10], strict=True):
        r = ov.route(int(a), int(b))
        assert r.distance == base.route(int(a), int(b)).distance
        assert_path_ok(ov, int(a), int(b), r)


# ------------------------------------------------------------------------------------------ GPU layout
def emulate_plan(ov, smem_items, max_group):
    """The GPU customization's computation in NumPy over the plan's levels: the microcode twin on a
    microcode level, Jacobi Bellman-Ford over ``prepare_level``'s arrays elsewhere; returns the plan's
    cliques (all levels)."""
    plan = ov._plan
    t = plan.topo
    tcost = decode_turn_costs(ov._state.metric, ov.turns)
    clique = np.full(plan.n_ext_clique, -7, np.int64)
    cb = t["cell_base"]
    for q, lg in enumerate(t["levels"]):
        if plan.method(q) == "microcode":
            microcode.run(plan.micro, tcost, clique)
            continue
        ef, xf = t["level_first"][q]
        h = prepare_level(lg, ef, xf, smem_items, max_group)
        ref = h["r_ref"]
        ecost = np.where(ref >= 0, tcost[np.maximum(ref, 0)], clique[np.maximum(-ref - 1, 0)])
        ecost = np.where((ref >= 0) & (ecost < 0), INF, ecost)
        cq = t["cq_first"][cb[q]:cb[q + 1] + 1]
        vf = h["vf"]
        for c, i0, gg in zip(h["u_cell"], h["u_i0"], h["u_g"], strict=True):
            lo, n = vf[c], vf[c + 1] - vf[c]
            a0, a1 = h["r_first"][lo], h["r_first"][lo + n]
            heads = np.repeat(np.arange(n), np.diff(h["r_first"][lo:lo + n + 1]))
            src = h["r_src"][a0:a1]
            ec = ecost[a0:a1]
            d = np.full((n, gg), INF, np.int64)
            ents = h["ent_loc"][h["ent_first"][c] + i0:h["ent_first"][c] + i0 + gg]
            d[ents, np.arange(gg)] = 0
            for _ in range(n + 2):
                du = d[src]
                fin = (ec < INF)[:, None] & (du < INF)
                cand = np.where(fin, du + np.where(ec < INF, ec, 0)[:, None], INF)
                new = d.copy()
                np.minimum.at(new, heads, cand)
                if (new == d).all():
                    break
                d = new
            xs = h["ex_loc"][h["ex_first"][c]:h["ex_first"][c + 1]]
            for i in range(gg):
                clique[cq[c] + (i0 + i) * xs.size: cq[c] + (i0 + i + 1) * xs.size] = d[xs, i]
    return clique


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("mz", CONFIGS[:2])
def test_emulated_gpu_plan_equals_cpu(seed, mz):
    g, _ = graph(seed)
    part = Partition.build(g, cell_sizes=(12, 30, 60), seed=seed)
    ov = Overlay.build(g, part, mezzanine=mz)
    ov.customize((g.weight("travel_time"), PEN), device="cpu")
    ext = emulate_plan(ov, 64, 3)
    q = np.empty_like(ov._state.clique)
    ov._plan.gather(ext, q)
    np.testing.assert_array_equal(q, ov._state.clique)


# ------------------------------------------------------------------------------------------ GPU
def assert_plan_trees_valid(ov, tree):
    """Each kept tree's parent edges end at their vertex and lead back to the entry point (sampled)."""
    t = ov._plan.topo
    cb = t["cell_base"]
    tf = ov._tree_first
    for q, lg in enumerate(t["levels"]):
        ent_first, _ = t["level_first"][q]
        for c in range(0, lg.vert_first.size - 1, 5):
            lo, hi = lg.vert_first[c], lg.vert_first[c + 1]
            n = hi - lo
            gc = cb[q] + c
            if tf[gc + 1] == tf[gc]:
                continue
            e0 = lg.e_first[lo]
            tail = np.repeat(np.arange(lo, hi), np.diff(lg.e_first[lo:hi + 1]))
            for i in range(ent_first[c + 1] - ent_first[c]):
                entry = lg.ent_vert[ent_first[c] + i] - lo
                par = tree[tf[gc] + i * n: tf[gc] + (i + 1) * n].astype(np.int64) - 1
                for v in np.flatnonzero(par >= 0):
                    assert lg.e_to[e0 + par[v]] == lo + v
                    u, steps = v, 0
                    while par[u] >= 0 and steps <= n:
                        u = tail[par[u]] - lo
                        steps += 1
                    assert u == entry


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")
@pytest.mark.parametrize("mz", CONFIGS)
@pytest.mark.parametrize("micro, micro_smem, smem_bytes", [(True, 24 * 1024, 24 * 1024), (True, 64, 96),
                                                           (False, 24 * 1024, 40)])
@pytest.mark.parametrize("seed", range(3))
def test_gpu_mezzanine_equals_cpu(seed, mz, micro, micro_smem, smem_bytes, monkeypatch):
    monkeypatch.setattr(config, "CRP_MICROCODE", micro)
    monkeypatch.setattr(config, "CRP_MICRO_SMEM_BYTES", micro_smem)  # 64 bytes: every block in scratch
    monkeypatch.setattr(config, "CRP_GPU_SMEM_BYTES", smem_bytes)
    monkeypatch.setattr(config, "CRP_MICRO_THREADS", 64)
    g, rng = graph(seed)
    part = Partition.build(g, cell_sizes=(12, 30, 60), seed=seed)
    ov = Overlay.build(g, part, mezzanine=mz)
    base = Overlay.build(g, part, mezzanine=False)
    for metric in ("distance", (g.weight("travel_time"), PEN)):
        base.customize(metric, device="cpu")
        info = ov.customize(metric, device="gpu")
        assert info["device"] == "gpu" and len(info["plan"]) == ov._plan.n_ext
        np.testing.assert_array_equal(ov._state.clique, base._state.clique)
        assert_plan_trees_valid(ov, ov._state.tree)
    assert_all_pairs_exact(ov, sources=range(0, 70, 10))
    ids = rng.integers(0, g.n_arcs, 15)
    costs = rng.integers(1, 400, 15)
    ov.update(ids, costs, device="gpu")       # from the device copy
    base.update(ids, costs, device="cpu")
    np.testing.assert_array_equal(ov._state.clique, base._state.clique)
    ov.customize("distance", device="cpu")    # the device copy is stale: starts from the host state
    base.customize("distance", device="cpu")
    ov.update(ids[:6], costs[:6] + 9, device="gpu")
    base.update(ids[:6], costs[:6] + 9, device="cpu")
    np.testing.assert_array_equal(ov._state.clique, base._state.clique)
    assert_plan_trees_valid(ov, ov._state.tree)
    assert_all_pairs_exact(ov, sources=range(3, 70, 11))


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")
@pytest.mark.parametrize("name, cells, mz, metric", [("monaco", (64, 512, 4096), {64: (16,), 512: (256,)}, "time-uturn"),
                                                     ("ny", None, {256: (32,)}, "distance")])
def test_gpu_mezzanine_real_networks(name, cells, mz, metric, monkeypatch):
    monkeypatch.setattr(config, "CRP_KAHIP_MODE", "fast")
    g = gpuroute.datasets.load(name)
    part = Partition.build(g, cell_sizes=cells, method="kahip") if cells else Partition.build(g)
    ov = Overlay.build(g, part, mezzanine=mz)
    ov.customize(metric, device="cpu")
    ref = ov._state.clique.copy()
    ov.customize(metric, device="gpu")
    np.testing.assert_array_equal(ov._state.clique, ref)
    base = Overlay.build(g, part, mezzanine=False)
    base.customize(metric, device="cpu")
    np.testing.assert_array_equal(ref, base._state.clique)
    rng = np.random.default_rng(1)
    ids = rng.integers(0, g.n_arcs, 1000)
    costs = rng.integers(1, 5000, 1000)
    ov.update(ids, costs, device="gpu")
    base.update(ids, costs, device="cpu")
    np.testing.assert_array_equal(ov._state.clique, base._state.clique)
    s, t = rng.integers(0, g.n_nodes, 20), rng.integers(0, g.n_nodes, 20)
    for a, b in zip(s, t, strict=True):
        r = ov.route(int(a), int(b))
        assert r.distance == base.route(int(a), int(b)).distance
        assert_path_ok(ov, int(a), int(b), r)


def test_bad_configuration(monkeypatch):
    g, _ = graph(8, 40)
    part = Partition.build(g, cell_sizes=(12, 30, 60), seed=8)
    monkeypatch.setattr(config, "CRP_MEZZANINE", ((4,), (), ()))
    with pytest.raises(TypeError, match="CRP_MEZZANINE"):
        Overlay.build(g, part)
    monkeypatch.setattr(config, "CRP_MEZZANINE", {12: (4,)})
    monkeypatch.setattr(config, "CRP_MICRO_SMEM_BYTES", 256 * 1024)
    with pytest.raises(ValueError, match="CRP_MICRO_SMEM_BYTES"):
        Overlay.build(g, part)
    monkeypatch.setattr(config, "CRP_MICRO_SMEM_BYTES", 24 * 1024)
    with pytest.raises(ValueError, match="strictly between"):
        Overlay.build(g, part, mezzanine={12: (20,)})


def test_unpack_cache_follows_the_metric():
    """Routes unpack the microcode cells through a per-query cache of their trees: after an update that
    makes the cached paths expensive, the same query object gives the new exact route (the cache was
    emptied), and repeated routes agree with fresh query objects."""
    g, _ = graph(9, 90)
    part = Partition.build(g, cell_sizes=(12, 30, 60), seed=9)
    ov = Overlay.build(g, part, mezzanine={12: (4,)})
    ov.customize("distance", device="cpu")
    q = ov.query()
    pairs = [(s, t) for s in range(0, 90, 13) for t in range(5, 90, 17)]
    first = {p: q.route(*p) for p in pairs}
    assert q._mc_cache["mc_have"].any()
    for p, r in first.items():
        assert_path_ok(ov, *p, r)
        again = q.route(*p)
        np.testing.assert_array_equal(again.arcs, r.arcs)
    # make every arc of the cached routes 50 times dearer
    used = np.unique(np.concatenate([r.arcs for r in first.values() if r.arcs.size]))
    ov.update(used, np.asarray(ov.arc_cost)[used] * 50, device="cpu")
    changed = 0
    for s, t in pairs:
        r = q.route(s, t)
        assert r.distance == oracle(ov, s)[t]
        assert_path_ok(ov, s, t, r)
        changed += not np.array_equal(r.arcs, first[(s, t)].arcs)
    assert changed > 0


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")
def test_gpu_customizes_a_loaded_overlay_on_its_saved_program(tmp_path, monkeypatch):
    """The microinstructions loaded with an overlay (not built again) run on the GPU to the CPU's cliques."""
    from gpuroute.crp import microcode

    g, _ = graph(5)
    part = Partition.build(g, cell_sizes=(12, 30, 60), seed=5)
    ov = Overlay.build(g, part, mezzanine={12: (4,)})
    ov.customize("distance", device="cpu")
    d = ov.save(tmp_path / "ov")
    monkeypatch.setattr(microcode, "build_program", lambda *a, **k: pytest.fail("microinstructions built on load"))
    loaded = Overlay.load(d, g)
    assert loaded._plan.micro is not None
    for metric in ((g.weight("travel_time"), PEN), "distance"):
        ov.customize(metric, device="cpu")
        info = loaded.customize(metric, device="gpu")
        assert info["device"] == "gpu"
        np.testing.assert_array_equal(loaded._state.clique, ov._state.clique)
        assert_plan_trees_valid(loaded, loaded._state.tree)
