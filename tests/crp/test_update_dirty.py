"""Traffic updates copy only what they change (gpuroute.crp.state_buffers, ``Overlay.update``).

Each update's state is the previous one's arrays with the changed ranges rewritten, in buffers no snapshot
holds. Checked on random graphs (with restrictions and turn penalties, with and without mezzanine levels)
and Monaco: (a) a snapshot a reader holds is bit for bit unchanged by later updates; (b) every state equals
a customization from scratch of the updated metric (costs, decoded turn costs, query-ordered costs,
cliques, trees, the metric itself); (c) the bytes and ranges copied (a counter, not a clock) are exactly
the ranges the previous update changed (the cells it touched: entries x exits cliques, entries x vertices
trees; the turns into its arcs), nothing whole once two buffers exist. With a GPU (``gpu``): the GPU update
path (spare device buffers synced by ranges, only the touched cells copied back) gives the same states as
the CPU path and a GPU customization from scratch, and its device counters are the touched ranges too.
"""
from __future__ import annotations

import numpy as np
import pytest
from crp_oracle import PEN, assert_all_pairs_exact, with_restrictions
from naive import random_road_graph

import gpuroute
from gpuroute import Overlay, Partition, config
from gpuroute.backend import gpu_available
from gpuroute.crp import CLOSED
from gpuroute.crp import state_buffers as sb


def _multi_tests():
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("_crp_update_multi", Path(__file__).with_name("test_customize_multi.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


#: fixture: customize.cu's own kernels on the CPU (tests/tours/cuda_emu.py), CuPy by NumPy
emulated_gpus = _multi_tests().emulated_gpus

ARRAYS = ("arc_cost", "turn_cost", "clique", "q_arc_cost", "q_turn_cost", "tree")


def copy_state(st):
    out = {k: np.array(getattr(st, k), copy=True) for k in ARRAYS}
    out["metric_arc"] = np.array(st.metric.arc_cost, copy=True)
    out["fingerprint"] = st.metric.fingerprint()
    return out


def assert_state_is(st, saved):
    for k in ARRAYS:
        np.testing.assert_array_equal(getattr(st, k), saved[k], err_msg=k)
    np.testing.assert_array_equal(st.metric.arc_cost, saved["metric_arc"])
    assert st.metric.arc_cost.dtype == saved["metric_arc"].dtype
    assert st.metric.fingerprint() == saved["fingerprint"]


def assert_equals_scratch(ov, arc, device="cpu", trees=True):
    """The overlay's state equals a customization from scratch of the metric (arc, PEN)."""
    mz = False if ov._plan.identity else ov._plan.partition
    ref = Overlay.build(ov.graph, ov.partition, turns=ov.turns, mezzanine=mz)
    ref.customize((arc, PEN), device=device)
    st, rs = ov._state, ref._state
    for k in ARRAYS if trees else ARRAYS[:-1]:
        np.testing.assert_array_equal(getattr(st, k), getattr(rs, k), err_msg=k)
    np.testing.assert_array_equal(st.metric.arc_cost, rs.metric.arc_cost)
    assert st.metric.arc_cost.dtype == rs.metric.arc_cost.dtype
    assert st.metric.fingerprint() == rs.metric.fingerprint()


def touched(ov, ids):
    """Global ids of the cells an update of arcs ``ids`` re-customizes (every level: the cells of the arcs'
    heads and tails), from the partition."""
    g, part = ov.graph, ov.partition
    cb = ov._topo["cell_base"]
    out = []
    for p in range(part.n_levels):
        c = np.unique(np.concatenate([part.cells[p][g.head[ids]], part.cells[p][g.tail[ids]]]))
        out.append(cb[p] + c)
    return np.concatenate(out)


def expected_copies(ov, ids, minus=None):
    """Bytes each array's buffer must have copied to catch up with an update of arcs ``ids``; with ``minus`` (the
    arcs of the update catching up), the cliques and trees of the cells it re-customizes left out (the GPU's
    device copy: its levels write those whole)."""
    ids = np.unique(ids)
    topo = ov._topo
    cells = touched(ov, ids)
    if minus is not None:
        cells = np.setdiff1d(cells, touched(ov, np.unique(minus)))
    ne, nx = np.diff(topo["ent_first"]), np.diff(topo["ex_first"])
    n_turns = int(np.isin(ov.turns.out_arc, ids).sum())
    tree_items = int(np.diff(ov._tree_first)[cells].sum()) if ov._plan.identity else None
    return {"arc_cost": 8 * ids.size, "q_arc_cost": 8 * ids.size, "metric_arc": 4 * ids.size,
            "turn_cost": 8 * n_turns, "q_turn_cost": 8 * n_turns,
            "clique": 8 * int((ne * nx)[cells].sum()),
            "tree": None if tree_items is None else tree_items * ov._tree_dtype().itemsize}


def assert_packed(got, name, payload):
    """The GPU packed exactly ``payload`` bytes of ``name`` (the touched cells') and copied them back with at most
    the alignment padding (each packed range keeps its 16-byte alignment: < 32 bytes more per range)."""
    pack = got[name].get("device_pack", {"bytes": 0, "ranges": 0})
    assert pack["bytes"] == payload, name
    assert payload <= got[name]["download"]["bytes"] < payload + 32 * pack["ranges"] + 1, name


def setup(seed, n=90, cells=(8, 24, 60), mezzanine=False):
    rng = np.random.default_rng(seed)
    g, _ = random_road_graph(rng, n, one_way=0.3)
    g = with_restrictions(g, rng, 12)
    ov = Overlay.build(g, Partition.build(g, cell_sizes=cells, seed=seed), mezzanine=mezzanine)
    arc = np.asarray(g.weight("travel_time"), np.int64).copy()
    return g, ov, arc, rng


def clustered(g, rng, k):
    """``k`` arcs whose tails are near one random node (what traffic looks like)."""
    c = int(rng.integers(0, g.n_nodes))
    d = np.hypot(g.coords[g.tail, 0] - g.coords[c, 0], g.coords[g.tail, 1] - g.coords[c, 1])
    return np.argsort(d, kind="stable")[:k]


# ---------------------------------------------------------------------------------- the buffers alone
def test_merge_and_ranges():
    s, n = sb.merge([10, 0, 3, 12, 20, 5], [5, 3, 2, 1, 0, 1])
    assert s.tolist() == [0, 10] and n.tolist() == [6, 5]  # 0-3, 3-5, 5-6 adjacent; 12 inside 10-15; 20 empty
    s, n = sb.index_ranges([7, 3, 4, 4, 9, 8])
    assert s.tolist() == [3, 7] and n.tolist() == [2, 3]
    first = np.array([0, 4, 4, 10, 12])
    s, n = sb.cell_ranges(first, [3, 0, 1])
    assert s.tolist() == [0, 10] and n.tolist() == [4, 2]
    src = np.arange(20)
    out = np.zeros(7, np.int64)
    sb.move_ranges(src, np.array([2, 10]), out, np.array([0, 3]), np.array([3, 4]))  # packed one after another
    assert out.tolist() == [2, 3, 4, 10, 11, 12, 13]
    back = np.full(20, -1)
    sb.move_ranges(out, np.array([0, 3]), back, np.array([2, 10]), np.array([3, 4]))
    assert back[[2, 3, 4, 10, 13]].tolist() == [2, 3, 4, 10, 13] and back[5] == -1
    # long ranges go by slices, short ones by the loop: the same result
    rng = np.random.default_rng(0)
    src = rng.integers(0, 60000, 5000).astype(np.uint16)
    s, n = sb.merge([0, 700, 1000, 1300, 4990], [600, 3, 299, 1, 10])
    dst = np.zeros_like(src)
    sb.copy_ranges_fast(src, dst, s, n)
    want = np.zeros_like(src)
    sb.copy_ranges(src, want, s, n)
    np.testing.assert_array_equal(dst, want)
    assert (dst[600:700] == 0).all() and (dst[:600] == src[:600]).all()
    at = np.cumsum(n) - n
    packed = np.empty(int(n.sum()), src.dtype)
    sb.move_ranges_fast(src, s, packed, at, n)
    back = np.zeros_like(src)
    sb.move_ranges_fast(packed, at, back, s, n)
    np.testing.assert_array_equal(back, want)


def test_buffers_recycle_only_what_nothing_references():
    bufs = sb.StateBuffers()
    a0 = np.arange(100, dtype=np.int64)
    bufs.install("x", a0, own=True)
    a0_id = id(a0)
    d1 = sb.index_ranges([5, 6])
    a1 = bufs.derive("x", a0, d1)
    a1[[5, 6]] = -1
    assert bufs.stats.bytes("x", {"full"}) == 800          # the second buffer: one whole copy
    view = a0[10:20]                                       # a reader still holds (a view of) generation 0
    del a0
    bufs.stats.reset()
    a2 = bufs.derive("x", a1, sb.index_ranges([50]))
    a2[50] = -2
    assert id(a2) != a0_id and bufs.stats.bytes("x", {"full"}) == 800
    np.testing.assert_array_equal(view.base, np.arange(100))
    del view
    bufs.stats.reset()
    a3 = bufs.derive("x", a2, sb.index_ranges([70, 71, 72]))  # generation 0 is free: it catches up by ranges
    a3[70:73] = -3
    assert id(a3) == a0_id
    assert bufs.stats.snapshot()["x"] == {"sync": {"bytes": 8 * 3, "ranges": 2, "copies": 1}}  # 5-6 and 50
    exp = np.arange(100)
    exp[[5, 6]], exp[50], exp[70:73] = -1, -2, -3
    np.testing.assert_array_equal(a3, exp)
    # an array the ring did not make (installed elsewhere) is never written, and starts the log again
    foreign = a3.copy()
    bufs.stats.reset()
    a4 = bufs.derive("x", foreign, sb.index_ranges([0]))
    a4[0] = 99
    assert a4 is not foreign and foreign[0] == 0 and bufs.stats.bytes("x", {"full"}) == 800
    # a view's memory belongs to its base: not handed over
    base = np.zeros(10, np.int64)
    bufs.install("y", base[2:8])
    assert not bufs.rings["y"].bufs


def test_whole_customizations_in_a_row_keep_at_most_keep_spare_buffers():
    """Each install (a whole customization's fresh arrays, handed over) made the ring hold one more buffer and
    none was ever dropped (no update between them ran the pruning): memory grew with every customization and
    the GPU path's pinned trees never went back to CuPy's pool. Now the ring keeps the current array and at
    most ``keep`` free stale ones; a buffer a reader still holds stays the reader's, and the next update
    recycles a free one."""
    bufs = sb.StateBuffers(keep=2)
    held = []
    for i in range(10):
        a = np.full(50, i, dtype=np.int64)
        bufs.install("x", a, own=True)
        if i == 3:
            held.append(a)  # a reader's snapshot of generation 3
        del a
        ring = bufs.rings["x"]
        free = [b for b in ring.bufs if b.a is not ring.cur and sb._free(b)]
        assert len(free) <= 2 and len(ring.bufs) <= 2 + 1 + len(held)
    np.testing.assert_array_equal(held[0], np.full(50, 3))
    cur = bufs.rings["x"].cur
    nxt = bufs.derive("x", cur, sb.index_ranges([7]))
    nxt[7] = -1
    assert nxt is not cur and nxt is not held[0] and any(b.a is nxt for b in bufs.rings["x"].bufs)
    np.testing.assert_array_equal(held[0], np.full(50, 3))  # never written


# ---------------------------------------------------------------------------------- CPU updates
@pytest.mark.parametrize("seed, mezzanine", [(0, False), (1, False), (2, {8: (3,), 24: (12,)})])
def test_updates_equal_scratch_and_old_snapshots_stay(seed, mezzanine, monkeypatch):
    monkeypatch.setattr(config, "CRP_MICROCODE", False)
    g, ov, arc, rng = setup(seed, mezzanine=mezzanine)
    ov.customize((arc, PEN), device="cpu")
    held = {0: (ov._state, copy_state(ov._state))}
    closed_arc = None
    for k in range(1, 8):
        ids = clustered(g, rng, 6) if k % 2 else rng.integers(0, g.n_arcs, 4)
        costs = rng.integers(1, 500, ids.size)
        if k == 3:
            costs[0] = CLOSED  # a closure (the metric's costs turn int64), reopened two updates later
            closed_arc = int(ids[0])
        if k == 5:
            ids = np.concatenate([ids, [closed_arc, ids[0]]])  # reopened; a repeated id takes its last cost
            costs = np.concatenate([costs, [77, 5]])
        ov.update(ids, costs, device="cpu")
        arc[ids] = costs
        assert (ov._state.metric.arc_cost.dtype == np.int64) == (k in (3, 4))
        assert_equals_scratch(ov, arc)
        if k in (2, 3, 6):
            held[k] = (ov._state, copy_state(ov._state))
        if k == 4:
            del held[2]  # released: its buffers may be reused
    for st, saved in held.values():
        assert_state_is(st, saved)
    assert_all_pairs_exact(ov, sources=range(seed, g.n_nodes, 11))


@pytest.mark.parametrize("seed", [3, 4])
def test_update_copies_only_the_touched_ranges(seed, monkeypatch):
    monkeypatch.setattr(config, "CRP_UPDATE_FULL_FRACTION", 1.0)
    g, ov, arc, rng = setup(seed, n=160, cells=(10, 40, 100))
    ov.customize((arc, PEN), device="cpu")
    sizes = {k: getattr(ov._state, k).nbytes for k in ARRAYS}
    prev = None
    for k in range(6):
        ids = clustered(g, rng, 5)
        costs = rng.integers(1, 500, ids.size)
        info = ov.update(ids, costs, device="cpu")
        arc[ids] = costs
        assert [int(x) for x in info["cells"]] == [int(np.unique(np.concatenate(
            [ov.partition.cells[p][g.head[ids]], ov.partition.cells[p][g.tail[ids]]])).size)
            for p in range(ov.n_levels)]
        got = info["copied"]
        if k == 0:  # the second buffer of each array: one whole copy
            for name in ("turn_cost", "clique", "tree", "q_arc_cost", "q_turn_cost"):
                assert got[name] == {"full": {"bytes": sizes[name], "ranges": 1, "copies": 1}}, name
        if k >= 2:  # both buffers exist: each catches up with the update before, range by range
            exp = expected_copies(ov, prev)
            for name, nbytes in exp.items():
                kinds = got.get(name, {})
                assert "full" not in kinds, name
                assert kinds.get("sync", {"bytes": 0})["bytes"] == nbytes, name
        prev = ids
    assert_equals_scratch(ov, arc)
    # a reader holding the state before: the next update cannot reuse its buffers (one whole copy each)
    held = ov._state
    saved = copy_state(held)
    ov.update(ids, costs + 1, device="cpu")
    held2 = ov._state
    info = ov.update(ids[:2], costs[:2] + 3, device="cpu")
    assert info["copied"]["clique"]["full"]["bytes"] == sizes["clique"]
    assert_state_is(held, saved)
    del held, held2
    arc[ids] = costs + 1
    arc[ids[:2]] = costs[:2] + 3
    assert_equals_scratch(ov, arc)
    # config.CRP_UPDATE_DIRTY_RANGES off: every array copied whole, the same states
    monkeypatch.setattr(config, "CRP_UPDATE_DIRTY_RANGES", False)
    info = ov.update(ids, costs, device="cpu")
    arc[ids] = costs
    assert info["copied"]["tree"] == {"full": {"bytes": sizes["tree"], "ranges": 1, "copies": 1}}
    assert_equals_scratch(ov, arc)


@pytest.fixture(scope="module")
def monaco_overlay():
    g = gpuroute.datasets.load("monaco")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(config, "CRP_KAHIP_MODE", "fast")
        part = Partition.build(g, cell_sizes=(64, 512, 4096))
    return g, part


def test_monaco_clustered_updates(monaco_overlay):
    g, part = monaco_overlay
    ov = Overlay.build(g, part, mezzanine=False)
    arc = np.asarray(g.weight("travel_time"), np.int64).copy()
    ov.customize((arc, PEN), device="cpu")
    st0, saved0 = ov._state, copy_state(ov._state)
    rng = np.random.default_rng(7)
    prev = None
    for k in range(4):
        ids = clustered(g, rng, 40)
        costs = np.maximum(1, arc[ids] * rng.integers(1, 4, ids.size))
        info = ov.update(ids, costs, device="cpu")
        arc[ids] = costs
        if k >= 2:
            exp = expected_copies(ov, prev)
            for name in ("clique", "tree", "turn_cost"):
                synced = info["copied"].get(name, {}).get("sync", {"bytes": 0})["bytes"]
                assert "full" not in info["copied"].get(name, {}) and synced == exp[name], name
                assert synced < getattr(ov._state, name).nbytes // 4, name  # a few cells of many
        prev = ids
    assert_equals_scratch(ov, arc)
    assert_state_is(st0, saved0)


# ---------------------------------------------------------------------------------- GPU updates
@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")
@pytest.mark.parametrize("seed, smem_bytes", [(0, 24 * 1024), (1, 96), (2, 24 * 1024)])
def test_gpu_updates_copy_touched_ranges_and_equal_scratch(seed, smem_bytes, monkeypatch):
    monkeypatch.setattr(config, "CRP_GPU_SMEM_BYTES", smem_bytes)
    monkeypatch.setattr(config, "CRP_UPDATE_FULL_FRACTION", 1.0)
    g, ov, arc, rng = setup(seed, n=160, cells=(10, 40, 100))
    cpu = Overlay.build(g, ov.partition, turns=ov.turns, mezzanine=False)
    ov.customize((arc, PEN), device="gpu")
    cpu.customize((arc, PEN), device="cpu")
    held = (ov._state, copy_state(ov._state))
    prev = None
    for k in range(6):
        ids = clustered(g, rng, 5) if k != 3 else rng.integers(0, g.n_arcs, 8)
        costs = rng.integers(1, 500, ids.size)
        info = ov.update(ids, costs, device="gpu")
        cpu.update(ids, costs, device="cpu")
        arc[ids] = costs
        for name in ARRAYS[:-1]:
            np.testing.assert_array_equal(getattr(ov._state, name), getattr(cpu._state, name), err_msg=name)
        got = info["copied"]
        if k >= 1:  # the device copy: the spare catches up with the update before, by ranges
            exp = expected_copies(ov, prev, minus=ids)
            assert got["clique"].get("device_sync", {"bytes": 0})["bytes"] == exp["clique"]
            assert got["tree"].get("device_sync", {"bytes": 0})["bytes"] == exp["tree"]
        cur = expected_copies(ov, ids)
        assert_packed(got, "clique", cur["clique"])
        assert_packed(got, "tree", cur["tree"])
        assert set(info["device_seconds"]) == {"sync", "levels", "pack", "total", "upload"}
        prev = ids
    assert_equals_scratch(ov, arc, device="gpu")  # trees too: the GPU's own, from scratch
    assert_state_is(*held)
    assert_all_pairs_exact(ov, sources=range(seed, g.n_nodes, 17))


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")
def test_gpu_monaco_updates_equal_cpu(monaco_overlay):
    g, part = monaco_overlay
    ov = Overlay.build(g, part, mezzanine=False)
    cpu = Overlay.build(g, part, mezzanine=False)
    arc = np.asarray(g.weight("travel_time"), np.int64).copy()
    ov.customize((arc, PEN), device="gpu")
    cpu.customize((arc, PEN), device="cpu")
    st0, saved0 = ov._state, copy_state(ov._state)
    rng = np.random.default_rng(3)
    for k in range(5):
        ids = clustered(g, rng, 60) if k != 2 else rng.integers(0, g.n_arcs, 300)
        costs = np.maximum(1, arc[ids] * rng.integers(1, 4, ids.size))
        if k == 1:
            costs[:3] = CLOSED
        ov.update(ids, costs, device="gpu")
        cpu.update(ids, costs, device="cpu")
        arc[ids] = costs
        np.testing.assert_array_equal(ov._state.clique, cpu._state.clique)
        np.testing.assert_array_equal(ov._state.turn_cost, cpu._state.turn_cost)
        np.testing.assert_array_equal(ov._state.q_turn_cost, cpu._state.q_turn_cost)
    assert_equals_scratch(ov, arc, device="gpu")
    assert_state_is(st0, saved0)
    s, t = rng.integers(0, g.n_nodes, 200), rng.integers(0, g.n_nodes, 200)
    np.testing.assert_array_equal(ov.distances(s, t), cpu.distances(s, t))
    for a, b in zip(s[:10], t[:10], strict=True):
        assert ov.route(int(a), int(b)).distance == cpu.route(int(a), int(b)).distance


# ---------------------------------------------------------------------------------- the GPU path, emulated
class _DevArray(np.ndarray):
    """A "device" array of the emulation: a NumPy array with CuPy's ``get``."""

    def get(self, out=None, stream=None, blocking=True):
        if out is None:
            return np.array(self)
        out[...] = self
        return out


class _Event:
    def record(self, stream=None):
        pass

    def synchronize(self):
        pass


class _Stream:
    def __init__(self, non_blocking=False):
        pass

    def synchronize(self):
        pass

    def wait_event(self, e):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _garbage(shape, dtype):
    """Fresh device memory of the emulation: filled with a value no customization writes, so that a
    range the update path forgot to bring up to date shows."""
    a = np.empty(shape, dtype)
    a.fill(np.iinfo(dtype).max - 3 if np.dtype(dtype).kind in "iu" else 0)
    return a.view(_DevArray)


class _FakeCupy:
    """The part of CuPy the customizer uses, over NumPy (uploads copy, as they do)."""

    def __init__(self):
        import types

        self.cuda = types.SimpleNamespace(Event=_Event, Stream=_Stream, get_elapsed_time=lambda a, b: 0.0)

    def asarray(self, a):
        return a if isinstance(a, _DevArray) else np.array(a, copy=True).view(_DevArray)

    def empty(self, shape, dtype):
        return _garbage(shape, dtype)

    def empty_like(self, a):
        return _garbage(a.shape, a.dtype)

    def zeros(self, shape, dtype):
        return np.zeros(shape, dtype).view(_DevArray)

    def arange(self, n, dtype):
        return np.arange(n, dtype=dtype).view(_DevArray)


def _fake_kernels(customizer_box):
    """The customization's kernels emulated on the CPU: decode and aggregation as the .cu does them, a
    level's work units by the CPU twin on their cells (CPU trees), range copies."""
    from gpuroute.crp.customize import customize_level

    last = {}

    def decode(grid, block, args, shared_mem=0):
        T, kind, out_arc, arc, pen, ovr, has, tc = args
        k = np.asarray(kind).astype(np.int64)
        a = np.asarray(arc)[np.asarray(out_arc)]
        p = np.asarray(ovr) if int(has) else np.asarray(pen)[np.minimum(k, 3)]
        shut = (k == 4) | (a == np.iinfo(np.int64).max) | ((np.asarray(p) == -1) & bool(int(has)))
        tc[:int(T)] = np.where(shut, -1, np.where(shut, 0, p) + np.where(shut, 0, a))

    def aggregate(grid, block, args, shared_mem=0):
        E, r_ref, tcost, clique, ecost = args
        last["tcost"] = tcost

    def aggregate_ranges(grid, block, args, shared_mem=0):
        last["tcost"] = args[3]

    def level(grid, block, args, shared_mem=0):
        ov = customizer_box["ov"]
        g = customizer_box["gpu"]
        units, u_cell = np.asarray(args[0]), np.asarray(args[1])
        p = next(i for i, lv in enumerate(g.levels) if lv is not None and lv["dev"]["vf"] is args[5])
        topo = ov._plan.topo
        lg = topo["levels"][p]
        ent_first, ex_first = topo["level_first"][p]
        cells = np.unique(u_cell[units]).astype(np.int64)
        tree = np.asarray(args[20]) if int(args[22]) else np.zeros(0, ov._tree_dtype)
        tf = np.asarray(args[18]) if int(args[22]) else np.zeros(np.asarray(args[18]).size, np.int64)
        customize_level(cells, lg.vert_first, lg.e_first, lg.e_to, lg.e_ref, ent_first, lg.ent_vert, ex_first,
                        lg.ex_vert, np.asarray(args[17]), np.asarray(last["tcost"]), np.asarray(args[19]),
                        np.asarray(args[19]), tf, tree)

    def push(grid, block, args, shared_mem=0):  # crp_push_level: as level (vf at 4; cq_first .. keep at 14-18)
        a = list(args)
        level(grid, block, a[:4] + [None, a[4]] + [None] * 11 + a[14:18] + [None, a[18]])

    def copy(grid, block, args, shared_mem=0):  # crp_copy_chunks: byte ranges of four array pairs
        n, seg, first, chunk = args[:4]
        arrays = args[4:]
        for p, s, d, k in np.asarray(seg).reshape(-1, 4)[:int(n)]:
            src = np.asarray(arrays[2 * p]).view(np.uint8)
            dst = np.asarray(arrays[2 * p + 1]).view(np.uint8)
            dst[d:d + k] = src[s:s + k]

    def micro(*a, **k):
        raise AssertionError("no microcode in this emulation")

    fns = {"crp_decode": decode, "crp_aggregate": aggregate, "crp_aggregate_ranges": aggregate_ranges,
           "crp_bf_level_u16": level, "crp_bf_level_i32": level, "crp_push_level_u16": push, "crp_push_level_i32": push,
           "crp_micro": micro, "crp_copy_chunks": copy}

    class Module:
        def get_function(self, name):
            f = fns[name]

            def kernel(*a, **k):
                return f(*a, **k)

            return kernel

    return Module()


@pytest.fixture
def emulated_gpu(monkeypatch):
    """``device="gpu"`` runs GPUCustomizer's host code over the emulated CuPy and kernels."""
    import sys
    import types

    import gpuroute.backend
    import gpuroute.crp.customize_gpu as cg
    import gpuroute.crp.overlay as ovm

    fake = _FakeCupy()
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setitem(sys.modules, "cupyx", types.SimpleNamespace(empty_pinned=lambda shape, dtype: np.empty(shape, dtype)))
    monkeypatch.setattr(gpuroute.backend, "resolve_device", lambda d="auto": "gpu")
    monkeypatch.setattr(ovm, "resolve_device", lambda d="auto": "cpu" if d == "cpu" else "gpu")
    box = {}
    monkeypatch.setattr(cg, "load_module", lambda *a, **k: _fake_kernels(box))
    real_init = cg.GPUCustomizer.__init__

    def init(self, overlay):
        real_init(self, overlay)
        box["ov"], box["gpu"] = overlay, self

    monkeypatch.setattr(cg.GPUCustomizer, "__init__", init)
    return box


@pytest.mark.parametrize("seed", [5, 6])
def test_gpu_update_path_emulated(seed, emulated_gpu, monkeypatch):
    """The GPU update path's host code (spare device buffers synced by ranges, changed turn costs uploaded,
    the touched cells packed and copied back, the host buffers patched), run over an emulated CuPy whose
    fresh memory is garbage: the states equal the CPU path's bit for bit (trees too: the emulated kernels
    are the CPU twin), old snapshots stay, and the device counters are the touched ranges."""
    monkeypatch.setattr(config, "CRP_UPDATE_FULL_FRACTION", 1.0)
    g, ov, arc, rng = setup(seed, n=140, cells=(10, 40, 100))
    cpu = Overlay.build(g, ov.partition, turns=ov.turns, mezzanine=False)
    ov.customize((arc, PEN), device="gpu")
    cpu.customize((arc, PEN), device="cpu")
    assert ov._gpu_cust is emulated_gpu["gpu"]
    held = (ov._state, copy_state(ov._state))
    prev = None
    for k in range(7):
        ids = clustered(g, rng, 5) if k % 3 else rng.integers(0, g.n_arcs, 6)
        costs = rng.integers(1, 500, ids.size)
        if k == 2:
            costs[0] = CLOSED
        if k == 4:  # a whole customization between updates: the spare is stale, caught up whole
            ov.customize((arc, PEN), device="gpu")
            other = ov.customized_state((np.where(arc == CLOSED, arc, arc + 1), PEN), device="gpu")  # not the device copy updates start from
            assert other.clique.size == ov._state.clique.size
            prev = None
        if k == 5:  # a state installed from elsewhere: the update starts from its host arrays
            st = ov._state
            ov._state = type(st)(st.metric, st.arc_cost.copy(), st.turn_cost.copy(), st.clique.copy(),
                                 st.tree.copy(), 0.0, ov._qg)
            prev = None
        info = ov.update(ids, costs, device="gpu")
        cpu.update(ids, costs, device="cpu")
        arc[ids] = costs
        for name in ARRAYS:
            np.testing.assert_array_equal(getattr(ov._state, name), getattr(cpu._state, name), err_msg=name)
        got = info["copied"]
        if k == 5:
            assert "device_seconds" not in info  # whole: from the host state
        else:
            cur = expected_copies(ov, ids)
            assert_packed(got, "clique", cur["clique"])
            assert_packed(got, "tree", cur["tree"])
            if prev is not None:
                exp = expected_copies(ov, prev, minus=ids)
                for name in ("clique", "tree"):
                    assert "device_full" not in got[name], (k, name)
                    assert got[name].get("device_sync", {"bytes": 0})["bytes"] == exp[name], name
            else:  # after a whole customization or upload: the spare differs everywhere
                assert got["clique"]["device_full"]["bytes"] == ov._state.clique.nbytes
        prev = ids if k != 5 else None
    # the same arcs again (traffic in one place): the cells the update before touched are all rewritten, so
    # the spare catches up with nothing but the turn costs
    for c in (costs + 1, costs + 2):
        info = ov.update(ids, c, device="gpu")
        cpu.update(ids, c, device="cpu")
        arc[ids] = c
    for name in ("clique", "tree"):
        assert info["copied"][name].get("device_sync", {"bytes": 0})["bytes"] == 0, name
        assert "device_full" not in info["copied"][name]
    assert_packed(info["copied"], "tree", expected_copies(ov, ids)["tree"])
    for name in ARRAYS:
        np.testing.assert_array_equal(getattr(ov._state, name), getattr(cpu._state, name), err_msg=name)
    info = ov.update([], [], device="gpu")  # nothing changes: nothing re-customized, nothing copied back
    assert info["cells"] == [0, 0, 0] and info["copied"]["clique"]["download"]["bytes"] == 0
    assert_equals_scratch(ov, arc)
    assert_state_is(*held)


@pytest.mark.parametrize("target_units, mezzanine", [(0, False), (3, False), (2048, False), (2048, {8: (3,)})])
def test_gpu_update_path_real_kernels_emulated(emulated_gpus, target_units, mezzanine, monkeypatch):  # noqa: F811
    """The same with customize.cu's own kernels run by the CPU emulator of tests/tours/cuda_emu.py (the range
    copies included), with the levels' own work units (0) and the dirty cells' (update_units): cliques equal
    the CPU path's, trees a GPU customization from scratch; also with a mezzanine level run by microinstructions
    (its cells recomputed under the dirty cells, the query levels' cliques copied back from the plan's array)."""
    monkeypatch.setattr(config, "CRP_UPDATE_FULL_FRACTION", 1.0)
    monkeypatch.setattr(config, "CRP_UPDATE_TARGET_UNITS", target_units)
    monkeypatch.setattr(config, "CRP_UPDATE_THREADS", 64)  # bigger blocks than the customization's (32 here)
    g, ov, arc, rng = setup(8, n=70, cells=(8, 20, 45), mezzanine=mezzanine)
    assert (ov._plan.micro is not None) == bool(mezzanine)
    cpu = Overlay.build(g, ov.partition, turns=ov.turns, mezzanine=False)
    ov.customize((arc, PEN), device="gpu")
    cpu.customize((arc, PEN), device="cpu")
    held = (ov._state, copy_state(ov._state))
    prev = None
    for k in range(4):
        ids = clustered(g, rng, 4) if k != 2 else rng.integers(0, g.n_arcs, 5)
        costs = rng.integers(1, 500, ids.size)
        info = ov.update(ids, costs, device="gpu")
        cpu.update(ids, costs, device="cpu")
        arc[ids] = costs
        for name in ARRAYS[:-1]:
            np.testing.assert_array_equal(getattr(ov._state, name), getattr(cpu._state, name), err_msg=name)
        got = info["copied"]
        assert_packed(got, "clique", expected_copies(ov, ids)["clique"])
        if prev is not None:
            assert "device_full" not in got["clique"]
        if not mezzanine:  # (the device copy and the trees are in the plan's layout)
            if prev is not None:
                exp = expected_copies(ov, prev, minus=ids)
                for name in ("clique", "tree"):
                    assert got[name].get("device_sync", {"bytes": 0})["bytes"] == exp[name], name
                    assert "device_full" not in got[name], name
            assert_packed(got, "tree", expected_copies(ov, ids)["tree"])
        prev = ids
    assert_equals_scratch(ov, arc, device="gpu")
    assert_state_is(*held)


@pytest.mark.parametrize("smem_bytes", [24 * 1024, 96])
def test_update_units_cover_the_dirty_cells(emulated_gpu, smem_bytes, monkeypatch):
    """The work units a GPU update makes for its dirty cells (GPUCustomizer.update_units): every entry point
    of every dirty cell exactly once, groups of at most ceil(entries / target) entries, scratch slices
    (cells too big for shared memory) disjoint and inside the scratch array."""
    monkeypatch.setattr(config, "CRP_GPU_SMEM_BYTES", smem_bytes)
    g, ov, arc, rng = setup(5, n=140, cells=(10, 40, 100))
    ov.customize((arc, PEN), device="gpu")
    cu = ov._gpu_cust
    for p, lv in enumerate(cu.levels):
        ef, vf = lv["host"]["ent_first"], lv["host"]["vf"]
        for cells in (np.arange(0, ov.n_cells[p], 2), np.array([ov.n_cells[p] - 1])):
            k = int(sum(ef[c + 1] - ef[c] for c in cells))
            for target in (1, 7, 4096):
                u_cell, u_i0, u_g, u_scr = cu.update_units(p, cells, target)
                covered = np.zeros(int(ef[-1]), np.int64)
                for c, i0, gg in zip(u_cell, u_i0, u_g, strict=True):
                    covered[ef[c] + i0:ef[c] + i0 + gg] += 1
                want = np.zeros_like(covered)
                for c in cells:
                    want[ef[c]:ef[c + 1]] = 1
                np.testing.assert_array_equal(covered, want)
                assert u_g.max(initial=0) <= max(1, min(config.CRP_GPU_MAX_GROUP, -(-k // target)))
                n = vf[u_cell + 1] - vf[u_cell]
                big = n * u_g > (lv["push_items"] if lv["push"] else cu.smem_items)  # (the push kernel's levels: no scratch)
                assert ((u_scr >= 0) == big).all()
                if big.any():
                    lo, hi = u_scr[big], u_scr[big] + (n * u_g)[big]
                    order = np.argsort(lo)
                    assert (lo[order][1:] >= hi[order][:-1]).all() and hi.max() <= cu.scratch.size


# ---------------------------------------------------------------------------------- crp_copy_chunks, emulated
def _at(nbytes, shift, dtype):
    """A zeroed array of ``nbytes`` bytes starting ``shift`` bytes past a 64-byte boundary (any base alignment)."""
    raw = np.zeros(nbytes + 128, np.uint8)
    o = (-raw.ctypes.data) % 64 + shift
    return raw[o:o + nbytes].view(dtype)


@pytest.mark.parametrize("chunk, threads, grid", [(48, 64, 3), (2048, 256, 40), (16, 32, 1)])
def test_copy_chunks_kernel_emulated(emulated_gpus, chunk, threads, grid):
    """customize.cu's crp_copy_chunks (the update's one-launch range copy) on the CPU emulator, against NumPy
    slices: four array pairs of 8-, 2-, 4- and 1-byte elements, bases at every alignment, ranges empty, of one
    element, unaligned, at both ends of the arrays, longer than many chunks, source and destination offsets that
    agree modulo 16 bytes and ones that do not (so every word width, 16 down to 1 byte, runs); nothing outside
    the ranges written, the sources unchanged."""
    import gpuroute.crp.customize_gpu as cgpu

    k = cgpu.load_module(cgpu.KERNELS).get_function("crp_copy_chunks")
    rng = np.random.default_rng(chunk)
    specs = [  # (dtype, src length, dst length, src shift, dst shift, [(src, dst, len)] in elements)
        (np.int64, 37, 37, 0, 0, [(0, 0, 0), (0, 0, 1), (36, 36, 1), (5, 5, 20), (30, 30, 0), (26, 27, 4)]),
        (np.uint16, 1001, 1001, 2, 2, [(3, 3, 1), (7, 7, 9), (17, 17, 500), (600, 600, 401)]),
        (np.int32, 50, 64, 0, 4, [(1, 0, 7), (13, 9, 30), (49, 63, 1), (44, 50, 2)]),
        (np.uint8, 300, 300, 1, 0, [(0, 1, 1), (2, 3, 250), (299, 299, 1), (253, 260, 39)]),
    ]
    srcs, dsts, want, pairs = [], [], [], []
    for dt, ns, nd, ss, ds, rs in specs:
        b = np.dtype(dt).itemsize
        s = _at(ns * b, ss, dt)
        s[...] = rng.integers(1, 200, ns).astype(dt)
        d = _at(nd * b, ds, dt)
        d[...] = np.iinfo(dt).max
        w = d.copy()
        for a, c, n in rs:
            w[c:c + n] = s[a:a + n]
        r = np.array(rs, np.int64).reshape(-1, 3)
        pairs.append((r[:, 0] * b, r[:, 1] * b, r[:, 2] * b))
        srcs.append(s)
        dsts.append(d)
        want.append(w)
    saved = [s.copy() for s in srcs]
    seg, first = sb.chunk_table(pairs, chunk)
    assert seg.size // 4 == sum(int((p[2] > 0).sum()) for p in pairs)  # empty ranges dropped
    widths = set()
    for p, so, do, n in seg.reshape(-1, 4):
        for off in range(0, int(n), chunk):
            x = (srcs[p].ctypes.data + int(so) + off) ^ (dsts[p].ctypes.data + int(do) + off)
            widths.add(next(w for w in (16, 8, 4, 2, 1) if x % w == 0))
    assert widths == {16, 8, 4, 2, 1}
    args = [a for s, d in zip(srcs, dsts, strict=True) for a in (s, d)]
    k((grid,), (threads,), (np.int64(seg.size // 4), seg, first, np.int64(chunk), *args))
    for d, w, s, s0 in zip(dsts, want, srcs, saved, strict=True):
        np.testing.assert_array_equal(d, w)
        np.testing.assert_array_equal(s, s0)
    # no ranges at all: nothing written
    before = [d.copy() for d in dsts]
    seg, first = sb.chunk_table([(EMPTY := sb.EMPTY[0], EMPTY, EMPTY)], chunk)
    assert seg.size == 0 and first.tolist() == [0]
    k((1,), (32,), (np.int64(0), np.zeros(4, np.int64), first, np.int64(chunk), *args))
    for d, b in zip(dsts, before, strict=True):
        np.testing.assert_array_equal(d, b)


def test_packing_helpers():
    """padded_offsets keeps every range's alignment without overlaps; points_complement, move_ranges_fast and
    chunk_table against direct loops."""
    rng = np.random.default_rng(1)
    for itemsize in (1, 2, 4, 8):
        per = 16 // itemsize
        s = np.sort(rng.choice(5000, 60, replace=False)).astype(np.int64)
        n = rng.integers(0, 40, 60).astype(np.int64)
        at, size = sb.padded_offsets(s, n, itemsize)
        assert ((at - s) % per == 0).all()
        assert (at[1:] >= at[:-1] + n[:-1]).all() and at[0] >= 0 and at[-1] + n[-1] <= size
        assert n.sum() <= size <= n.sum() + 2 * 60 * (per - 1)
    assert sb.padded_offsets(sb.EMPTY[0], sb.EMPTY[1], 2)[1] == 0
    for pts, m in (([], 5), ([0, 4], 5), ([1, 2, 3], 5), ([0, 1, 2, 3, 4], 5)):
        st, ln = sb.points_complement(np.array(pts, np.int64), m)
        covered = np.zeros(m, bool)
        for a, b in zip(st, ln, strict=True):
            covered[a:a + b] = True
        assert np.flatnonzero(~covered).tolist() == list(pts) and (ln > 0).all()
    src = rng.integers(0, 1000, 3000).astype(np.int64)
    ss, ds, ln = np.array([0, 10, 2000, 2999]), np.array([5, 400, 1000, 0]), np.array([3, 300, 700, 1])
    dst = np.full(2000, -1, np.int64)
    sb.move_ranges_fast(src, ss, dst, ds, ln)
    want = np.full(2000, -1, np.int64)
    for a, b, c in zip(ss, ds, ln, strict=True):
        want[b:b + c] = src[a:a + c]
    np.testing.assert_array_equal(dst, want)
    seg, first = sb.chunk_table([(np.array([0, 16]), np.array([0, 0]), np.array([33, 0])), (np.array([5]), np.array([7]),
                                                                                            np.array([16]))], 16)
    assert seg.reshape(-1, 4).tolist() == [[0, 0, 0, 33], [1, 5, 7, 16]] and first.tolist() == [0, 3, 4]
    with pytest.raises(ValueError, match="multiple of 16"):
        sb.chunk_table([], 24)
    with pytest.raises(ValueError, match="at most 4"):
        sb.chunk_table([sb.EMPTY + (sb.EMPTY[0],)] * 5, 16)
