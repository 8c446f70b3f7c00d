"""RPHAST (gpuroute.ch.rphast, rphast_gpu, rphast.cu): the target selection, the CPU twin against Dijkstra
(random graphs with and without a core, upward by search and by hub labels, a shipped dataset), the GPU
twin against the CPU twin bit for bit (``gpu``), and, for machines without a GPU, two emulations of the
kernels' layout: a NumPy replay of the threads' index arithmetic over the restricted levels (lanes per item,
warp-uniform strides, the staged core step, the target gather), and the kernels themselves compiled for the
CPU (tests/tours/cuda_emu.py) behind the real launcher, both its persistent pass and its captured graph."""
from __future__ import annotations

import importlib.util
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from naive import naive_ch, random_road_graph, scipy_dijkstra

import gpuroute
from gpuroute import INF, config
from gpuroute.backend import GPUUnavailableError, gpu_available
from gpuroute.ch import ContractionHierarchy
from gpuroute.ch.rphast import TargetSelection, rphast_cpu, select_targets, upward_entries

gpu_only = pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")
DINF = 0xFFFFFFFF


def _case(seed, n=60, core_from=None):
    rng = np.random.default_rng(seed)
    g, _ = random_road_graph(rng, n)
    h = naive_ch(g, order=rng.permutation(n), core_from=core_from)
    return g, ContractionHierarchy(h, graph=g, weight=g.default_weight)


# ---------------------------------------------------------------------------------------------- selection
@pytest.mark.parametrize("core_from", [None, 40, 0])
def test_selection_is_closed_layered_and_renumbered(core_from):
    g, ch = _case(3, core_from=core_from)
    h = ch.h
    n = h.n_nodes
    T = np.array([5, 17, 17, 44, 2])
    sel = select_targets(h, T)
    c = h.core.size
    assert sel.c == c and np.array_equal(sel.node[:c], h.core) and np.array_equal(sel.rid[h.core], np.arange(c))
    assert np.array_equal(sel.rid[sel.node], np.arange(sel.n_restricted))
    assert np.count_nonzero(sel.rid >= 0) == sel.n_restricted
    assert np.array_equal(sel.node[sel.target_rid], T)
    in_core = np.zeros(n, bool)
    in_core[h.core] = True
    # closed: every downward in-arc of a selected non-core node (core-core arcs aside) is in the structure
    heads = np.repeat(np.arange(n), np.diff(h.down_first_out))
    for v in sel.node[c:]:
        a0, a1 = h.down_first_out[v], h.down_first_out[v + 1]
        r = sel.rid[v]
        want = sorted(zip(sel.rid[h.down_tail[a0:a1]].tolist(), h.down_weight[a0:a1].tolist(), strict=True))
        got = sorted(zip(sel.tail[sel.first_out[r]:sel.first_out[r + 1]].tolist(),
                         sel.weight[sel.first_out[r]:sel.first_out[r + 1]].tolist(), strict=True))
        assert got == want and min(x for x, _ in want + [(0, 0)]) >= 0
    assert sel.first_out[c] == 0 and sel.first_out[-1] == sel.tail.size  # core heads: no arcs
    # exactly the nodes with a downward path to a target (a naive closure)
    reach = set(T.tolist())
    frontier = [v for v in T.tolist() if not in_core[v]]
    while frontier:
        v = frontier.pop()
        for u in h.down_tail[h.down_first_out[v]:h.down_first_out[v + 1]].tolist():
            if u not in reach:
                reach.add(u)
                if not in_core[u]:
                    frontier.append(u)
    assert set(sel.node[c:].tolist()) == {v for v in reach if not in_core[v]}
    assert set(sel.node[sel.core_sel].tolist()) == {v for v in reach if in_core[v]}
    np.testing.assert_array_equal(sel.core_dist_sel, np.asarray(h.core_dist).reshape(c, c)[:, sel.core_sel])
    # layered: a tail is in an earlier depth (or the core); depths never outnumber the hierarchy's levels
    lb = sel.level_bounds
    assert lb[0] == c and lb[-1] == sel.n_restricted and np.all(np.diff(lb) > 0)
    depth_of = np.searchsorted(lb, np.arange(sel.n_restricted), side="right") - 1
    for r in range(c, sel.n_restricted):
        tails = sel.tail[sel.first_out[r]:sel.first_out[r + 1]]
        nc = tails[tails >= c]
        assert np.all(depth_of[nc] < depth_of[r])
        if depth_of[r] > 0:
            assert np.any(depth_of[nc] == depth_of[r] - 1)
    assert sel.n_levels <= h.n_levels
    del heads
    # merged phases: tails from earlier phases or the node's own; each phase is m depths; arcs only gain
    for m in (2, 3, 100):
        mlb, mfo, mtl, mw = sel.merged(m)
        assert np.array_equal(mlb, np.append(lb[:-1][::m], lb[-1]))
        phase_of = np.searchsorted(mlb, np.arange(sel.n_restricted), side="right") - 1
        for r in range(c, sel.n_restricted):
            tails = mtl[mfo[r]:mfo[r + 1]]
            assert len(set(tails.tolist())) == tails.size  # the lightest arc per tail
            assert np.all(phase_of[tails[tails >= c]] <= phase_of[r])
            assert set(sel.tail[sel.first_out[r]:sel.first_out[r + 1]].tolist()) <= set(tails.tolist())
    assert sel.merged(1)[2] is sel.tail
    with pytest.raises(ValueError, match=">= 0"):
        sel.merged(-1)
    # m = 0: the boundaries by the cost model (ch.phast.merge_phases), at depth boundaries, the same closure rule
    for k in (1, 40):
        mlb, mfo, mtl, mw = sel.merged(0, k)
        assert mlb[0] == c and mlb[-1] == sel.n_restricted and set(mlb.tolist()) <= set(lb.tolist())
        phase_of = np.searchsorted(mlb, np.arange(sel.n_restricted), side="right") - 1
        for r in range(c, sel.n_restricted):
            tails = mtl[mfo[r]:mfo[r + 1]]
            assert np.all(phase_of[tails[tails >= c]] <= phase_of[r])
            assert set(sel.tail[sel.first_out[r]:sel.first_out[r + 1]].tolist()) <= set(tails.tolist())


def test_selection_errors():
    g, ch = _case(1)
    with pytest.raises(IndexError, match=r"targets\[1\] = 60"):
        select_targets(ch.h, [3, 60])
    with pytest.raises(TypeError):
        select_targets(ch.h, [0.5])
    sel = select_targets(ch.h, [1, 2])
    _, other = _case(2)
    with pytest.raises(ValueError, match="another hierarchy"):
        rphast_cpu(other.h, sel, [0])
    with pytest.raises(IndexError, match=r"sources\[0\] = -1"):
        rphast_cpu(ch.h, sel, [-1])
    with pytest.raises(ValueError, match="upward must be one of"):
        rphast_cpu(ch.h, sel, [0], upward="dijkstra")
    with pytest.raises(ValueError, match="hub_labels"):
        rphast_cpu(ch.h, sel, [0], upward="labels")


# ---------------------------------------------------------------------------------------------- CPU twin
@pytest.mark.parametrize("core_from", [None, 40, 0])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cpu_twin_equals_dijkstra(seed, core_from):
    g, ch = _case(seed, core_from=core_from)
    n = g.n_nodes
    D = scipy_dijkstra(g, np.arange(n))
    rng = np.random.default_rng(seed + 10)
    for T in (rng.integers(0, n, 7), np.arange(n), np.array([4, 4, 9]), np.zeros(0, dtype=np.int64)):
        sel = TargetSelection.build(ch.h, T)
        got = rphast_cpu(ch.h, sel, np.arange(n), upward="search")
        assert got.dtype == np.int64 and got.shape == (n, T.size)
        np.testing.assert_array_equal(got, D[:, T])
    ch.hub_labels()
    np.testing.assert_array_equal(rphast_cpu(ch.h, sel := select_targets(ch.h, T := rng.integers(0, n, 9)),
                                             np.arange(n), upward="labels"), D[:, T])
    np.testing.assert_array_equal(rphast_cpu(ch.h, sel, np.arange(n)), D[:, T])  # auto: the labels
    assert rphast_cpu(ch.h, sel, np.zeros(0, dtype=np.int64)).shape == (0, T.size)


def test_cpu_twin_on_monaco():
    """A shipped OSM network (one-way streets, the time metric), CU-CH's numba twin with its core."""
    g = gpuroute.datasets.load("monaco")
    ch = ContractionHierarchy.build(g, device="cpu", progress=False)
    rng = np.random.default_rng(0)
    n = g.n_nodes
    S, T = rng.integers(0, n, 12), rng.integers(0, n, 300)
    D = scipy_dijkstra(g, S)
    sel = select_targets(ch.h, T)
    assert sel.n_restricted < n
    np.testing.assert_array_equal(rphast_cpu(ch.h, sel, S, upward="search"), D[:, T])


def test_facade_one_to_many_and_kept_selections(monkeypatch):
    """ContractionHierarchy.one_to_many on the CPU (targets or a selection; CuPy-free NumPy out) and
    select_targets keeping the last config.CH_RPHAST_SELECTIONS target sets."""
    g, ch = _case(8, core_from=45)
    n = g.n_nodes
    D = scipy_dijkstra(g, np.arange(n))
    T = np.array([9, 1, 30])
    np.testing.assert_array_equal(ch.one_to_many(np.arange(n), T, device="cpu"), D[:, T])
    sel = ch.select_targets(T)
    assert ch.select_targets(T.tolist()) is sel  # kept, not selected again
    np.testing.assert_array_equal(ch.one_to_many([4, 2], sel, device="cpu"), D[[4, 2]][:, T])
    monkeypatch.setattr(config, "CH_RPHAST_SELECTIONS", 2)
    ch.select_targets([1])
    ch.select_targets([2])
    assert ch.select_targets(T) is not sel and len(ch._selections) == 2
    with pytest.raises(IndexError, match=r"targets\[0\] = 99"):
        ch.one_to_many([0], [99], device="cpu")


# ---------------------------------------------------------------------------------------------- layout (NumPy)
def emulated_pass(h, sel, sources, upward, tpb=64, blocks=3, k_lanes_max=32, es=4, merge=1, max_lanes=32):
    """rph_pass_* replayed thread by thread on NumPy: the fill; the non-core entries; the core step in chunks of
    ``tpb`` columns and ``es`` entries per unit, units strided over the blocks, entries staged ``RPH_STAGE`` at a
    time, each unit's minimum put with atomicMin; every level with ``2**lg`` lanes per
    item, the grid striding over whole warps, each lane taking the arcs ``fo[v] + g, + 2**lg, ...`` and lane 0
    of each item reducing its lanes (the shuffles), over the sweep with ``merge`` depths a phase, every node
    of a phase reading the distances as they were before the phase (the far end of the benign race between
    a phase's nodes); the gather ``out[j * t + q]``. Returns (k, t) uint32."""
    stage = int(re.search(r"#define RPH_STAGE (\d+)", _cu_text()).group(1))
    k = int(sources.size)
    offsets, e_rid, e_dist = upward_entries(h, sel, sources, upward)
    R, c, cb, t = sel.n_restricted, sel.c, sel.core_sel.size, sel.targets.size
    lb, fo, tl, w = sel.merged(merge)
    d = np.full(R * k, DINF, dtype=np.int64)
    nth = blocks * tpb
    for j in range(k):  # (a) non-core entries (rids >= c)
        for q in range(offsets[j], offsets[j + 1]):
            if e_rid[q] >= c:
                d[e_rid[q] * k + j] = e_dist[q]
    per = -(-cb // tpb) if cb else 0
    core_q = [[q for q in range(offsets[j], offsets[j + 1]) if e_rid[q] < c] for j in range(k)]
    ns = max(1, -(-max(len(x) for x in core_q) // es))
    for blk in range(blocks):  # (b) the core step: units (source, column chunk, slice), block-strided, atomicMin
        for u in range(blk, k * per * ns, blocks):
            j, rem = divmod(u, per * ns)
            chunk, z = divmod(rem, ns)
            sl = core_q[j][z * es:(z + 1) * es]
            for th in range(tpb):
                bi = chunk * tpb + th
                if bi >= cb:
                    continue
                best = DINF
                for base in range(0, len(sl), stage):
                    for q in sl[base:base + stage]:
                        x = sel.core_dist_sel[e_rid[q], bi]
                        if x != INF:
                            best = min(best, int(e_dist[q]) + int(x))
                b = sel.core_sel[bi] * k + j
                d[b] = min(d[b], best)
    rows = []
    for lo, hi in zip(lb[:-1], lb[1:], strict=True):
        lg = 0
        mean = (fo[hi] - fo[lo]) / (hi - lo)
        while k < k_lanes_max and (1 << lg) < mean and (2 << lg) <= max_lanes:
            lg += 1
        rows.append((int(lo), int(hi), lg))
    for lo, hi, lg in rows:
        items = (hi - lo) * k
        total = items << lg
        lanes = 1 << lg
        new = d.copy()  # every node of the phase reads the values from before the phase
        written = np.zeros(R * k, bool)
        for tid in range(nth):
            lane32 = tid & 31
            g_ = lane32 & (lanes - 1)
            b = tid & ~31
            while b < total:
                x = (b + lane32) >> lg
                if x < items and g_ == 0:  # lane 0 of the item: its own value, then every lane's arcs
                    v = lo + x // k
                    j = x - (v - lo) * k
                    best = d[v * k + j]
                    for gg in range(lanes):
                        for a in range(fo[v] + gg, fo[v + 1], lanes):
                            du = d[tl[a] * k + j]
                            if du != DINF:
                                best = min(best, du + int(w[a]))
                    assert not written[v * k + j]
                    written[v * k + j] = True
                    new[v * k + j] = best
                b += nth
        assert written.sum() == items  # every item exactly once
        d = new
    out = np.empty(k * t, dtype=np.int64)
    for tid in range(nth):
        for x in range(tid, t * k, nth):
            q, j = x // k, x % k
            out[j * t + q] = d[sel.target_rid[q] * k + j]
    return out.reshape(k, t)


def _cu_text():
    return (Path(gpuroute.__file__).parent / "ch" / "rphast.cu").read_text()


@pytest.mark.parametrize("core_from", [None, 40, 0])
@pytest.mark.parametrize("k, merge, lanes", [(1, 1, 32), (1, 3, 4), (3, 2, 32), (40, 1, 32), (40, 4, 32), (1, 0, 32),
                                             (40, 0, 32)])
def test_kernel_layout_emulated(core_from, k, merge, lanes):
    g, ch = _case(4, n=50, core_from=core_from)
    n = g.n_nodes
    D = scipy_dijkstra(g, np.arange(n))
    rng = np.random.default_rng(k)
    S, T = rng.integers(0, n, k), rng.integers(0, n, 11)
    sel = select_targets(ch.h, T)
    got = emulated_pass(ch.h, sel, S, "search", tpb=64, blocks=2, merge=merge, max_lanes=lanes)
    want = np.where(D[S][:, T] == INF, DINF, D[S][:, T])
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.where(got == DINF, INF, got), rphast_cpu(ch.h, sel, S))


# ---------------------------------------------------------------------------------------------- the kernels on the CPU
def _sibling(name):
    spec = importlib.util.spec_from_file_location(f"_emu_{name}",
                                                  Path(__file__).parents[1] / "tours" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# What the emulator's stand-in header lacks and rphast.cu uses: L2 loads, atomics, fences, and the grid barrier
# of gpuroute_common.cuh (its text, cut out of the header below).
_PRELUDE = r"""
#define __ldcg(p) (*(p))
inline unsigned int atomicAdd(unsigned int* p, unsigned int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __nanosleep(unsigned) {}
inline unsigned int atomicMin(unsigned int* p, unsigned int v) {
    unsigned int old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while (v < old && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {}
    return old;
}
"""


@pytest.fixture
def emulated(monkeypatch, tmp_path):
    if shutil.which("g++") is None:
        pytest.skip("the CUDA emulator needs g++")
    emu = _sibling("cuda_emu")
    emu.install(monkeypatch)
    import gpuroute.backend.kernels as kernels

    cp = sys.modules["cupy"]
    cp.uint32 = np.uint32
    monkeypatch.setattr(cp.cuda.Device, "synchronize", lambda self: None, raising=False)
    header = Path(kernels.COMMON_HEADER).read_text()
    barrier = re.search(r"__device__ __forceinline__ void grid_barrier\(.*?\n}\n", header, re.S).group(0)
    # three core entries staged at a time: the staging loop runs several rounds on these small cores
    src = _cu_text().replace('#include "gpuroute_common.cuh"', "")
    src = src.replace("#define RPH_STAGE 512", "#define RPH_STAGE 3")
    cu = tmp_path / "rphast.cu"
    cu.write_text('#include "gpuroute_common.cuh"\n' + _PRELUDE + barrier + src)
    inner = kernels.load_module
    cache = {}

    def load_module(relpath, options=(), cooperative=False):
        if relpath != "ch/rphast.cu":
            return inner(relpath, options, cooperative)
        if "m" not in cache:
            cache["m"] = emu.FakeModule(*emu.build(cu))
        return cache["m"]

    monkeypatch.setattr(kernels, "load_module", load_module)
    monkeypatch.setattr(kernels, "resident_blocks", lambda kernel, threads, dynamic_smem=0, cap=32: 4)
    monkeypatch.setattr(config, "CH_RPHAST_THREADS", 64)
    monkeypatch.setattr(config, "CH_RPHAST_PERSISTENT_MAX_BLOCKS", 1)  # the emulator runs blocks one by one
    monkeypatch.setattr(config, "CH_RPHAST_CORE_SLICE", 4)  # several slices of a source's core entries
    monkeypatch.setattr(config, "CH_RPHAST_MERGE_LEVELS", 3)  # phases of three depths
    return cp


def _fake_gpu_labels(cp, lab):
    from types import SimpleNamespace

    return SimpleNamespace(node=cp.asarray(np.ascontiguousarray(lab.node, dtype=np.int64).ravel()),
                           hub=cp.asarray(lab.hub), dist=cp.asarray(lab.dist))


@pytest.mark.parametrize("core_from, lanes", [(None, 32), (30, 4)])
def test_kernels_emulated_equal_the_cpu_twin(emulated, core_from, lanes, monkeypatch):
    """The real launcher on the emulated kernels: the persistent pass (k <= max) and the captured graph of
    one launch per phase and level (k > max, two passes, replayed), upward from host entries and from the
    labels on the device."""
    from gpuroute.ch import rphast_gpu

    cp = emulated
    g, ch = _case(6, n=45, core_from=core_from)
    n = g.n_nodes
    D = scipy_dijkstra(g, np.arange(n))
    rng = np.random.default_rng(2)
    T = rng.integers(0, n, 9)
    sel = select_targets(ch.h, T)
    monkeypatch.setattr(config, "CH_RPHAST_PERSISTENT_MAX_K", 2)
    monkeypatch.setattr(config, "CH_RPHAST_MAX_LANES", lanes)
    monkeypatch.setattr(config, "CH_RPHAST_BATCH_ITEMS", 5 * sel.n_restricted)  # passes of 5 sources
    for S in (np.array([7]), np.array([3, 40]), rng.integers(0, n, 10), rng.integers(0, n, 10)):
        got = rphast_gpu.rphast_gpu(ch.h, sel, S, upward="search")
        np.testing.assert_array_equal(got, D[S][:, T])
    ds = rphast_gpu.device_selection(sel)
    # the last pass was captured: fill, non-core entries, core step (with a core), one a level, the gather
    assert ds.persistent(2, "entries") and not ds.persistent(5, "entries")
    assert len(ds.levels) == -(-sel.n_levels // 3) and ds.launches == 2 + bool(ds.cb) + len(ds.levels) + 1
    lab = ch.hub_labels()
    gl = _fake_gpu_labels(cp, lab)
    for S in (np.array([11]), rng.integers(0, n, 10)):
        np.testing.assert_array_equal(rphast_gpu.rphast_gpu(ch.h, sel, S, upward="labels", gpu_labels=gl),
                                      D[S][:, T])
    np.testing.assert_array_equal(rphast_gpu.rphast_gpu(ch.h, sel, np.arange(n), upward="labels", gpu_labels=gl),
                                  rphast_cpu(ch.h, sel, np.arange(n)))


def test_cost_model_layouts_emulated(emulated, monkeypatch):
    """CH_RPHAST_MERGE_LEVELS = 0: the launcher plans the phases per pass-size class (powers of two) and switches its
    arrays to each pass's layout (persistent passes and captured graphs alike): every result equals Dijkstra."""
    from gpuroute.ch import rphast_gpu

    g, ch = _case(8, n=50, core_from=40)
    n = g.n_nodes
    D = scipy_dijkstra(g, np.arange(n))
    rng = np.random.default_rng(5)
    T = rng.integers(0, n, 12)
    sel = select_targets(ch.h, T)
    monkeypatch.setattr(config, "CH_RPHAST_MERGE_LEVELS", 0)
    monkeypatch.setattr(config, "CH_RPHAST_PERSISTENT_MAX_K", 2)
    monkeypatch.setattr(config, "CH_RPHAST_BATCH_ITEMS", 5 * sel.n_restricted)  # passes of at most 5 sources
    for S in (np.array([4]), rng.integers(0, n, 2), rng.integers(0, n, 3), rng.integers(0, n, 9), np.array([7])):
        np.testing.assert_array_equal(rphast_gpu.rphast_gpu(ch.h, sel, S, upward="search"), D[S][:, T])
    ds = rphast_gpu.device_selection(sel)
    assert set(ds._layouts) == {1, 2, 4, 8}  # passes of 1, 2, 3 and 5 (9 = 5 + 4) sources
    assert ds.levels == [tuple(x) for x in zip(sel.merged(0, 1, ds._cost)[0][:-1].tolist(),
                                               sel.merged(0, 1, ds._cost)[0][1:].tolist(), strict=True)]


class _Spy:
    """A kernel that logs ``(name, stream())`` at each launch (its other attributes: the kernel's)."""

    def __init__(self, name, fn, log, stream):
        self._name, self._fn, self._log, self._stream = name, fn, log, stream

    def __call__(self, *a, **kw):
        self._log.append((self._name, self._stream()))
        return self._fn(*a, **kw)

    def __getattr__(self, attr):
        return getattr(self._fn, attr)


def test_every_launch_is_on_the_selections_stream(emulated, monkeypatch):
    """Every kernel of a pass (the persistent one and the captured graph's) is launched on the selection's own
    non-blocking stream, the one its flags' reset, inputs' uploads and result's copy (and the benchmark's CUDA
    events) are ordered on. Regression: the persistent pass was launched on CuPy's current stream (the legacy
    default stream), unordered with that stream: the result was copied while the kernel still ran (H100: inexact
    at grid shapes that looked random, and the benchmark's events timed only the host's launch call)."""
    from gpuroute.ch import rphast_gpu

    cp = emulated
    stack = []
    fake_stream = type(cp.cuda.Stream())
    monkeypatch.setattr(fake_stream, "__enter__", lambda self: stack.append(self) or self)
    monkeypatch.setattr(fake_stream, "__exit__", lambda self, *a: bool(stack.pop()) and False)
    g, ch = _case(6, n=45, core_from=30)
    n = g.n_nodes
    D = scipy_dijkstra(g, np.arange(n))
    T = np.array([3, 9, 30, 44])
    sel = select_targets(ch.h, T)
    monkeypatch.setattr(config, "CH_RPHAST_PERSISTENT_MAX_K", 2)
    ds = rphast_gpu.device_selection(sel)
    seen = []
    ds.k = {name: _Spy(name, fn, seen, lambda: stack[-1] if stack else None) for name, fn in ds.k.items()}
    ds.k_pass = {name: _Spy(name, fn, seen, lambda: stack[-1] if stack else None) for name, fn in ds.k_pass.items()}
    lab = ch.hub_labels()
    gl = _fake_gpu_labels(cp, lab)
    for S in (np.array([7]), np.arange(0, n, 5)):  # one persistent pass, then the captured graph
        np.testing.assert_array_equal(rphast_gpu.rphast_gpu(ch.h, sel, S, upward="search"), D[S][:, T])
        np.testing.assert_array_equal(rphast_gpu.rphast_gpu(ch.h, sel, S, upward="labels", gpu_labels=gl),
                                      D[S][:, T])
    names = {name for name, _ in seen}
    assert {"rph_pass_entries", "rph_pass_labels", "rph_level", "rph_out"} <= names
    assert [name for name, s in seen if s is not ds.stream] == []


def test_table_picks_rphast_emulated(emulated, monkeypatch):
    """ContractionHierarchy.table on the (emulated) GPU runs RPHAST, once the hub labels exist, for enough sources
    and few enough targets, and answers as Dijkstra; release() drops the selection's device copy."""
    g, ch = _case(9, n=40, core_from=30)
    n = g.n_nodes
    D = scipy_dijkstra(g, np.arange(n))
    monkeypatch.setattr(config, "CH_RPHAST_TABLE_MIN_SOURCES", 4)
    monkeypatch.setattr(config, "CH_LABELS_TABLE_MAX_TARGETS", 0)  # not the label merges
    lab = ch.hub_labels()
    monkeypatch.setattr(ch, "_gpu_labels", lambda: _fake_gpu_labels(emulated, lab))
    S, T = np.arange(0, n, 3), np.array([0, 7, 7, 39])
    calls = []

    class Sweeps:  # the PHAST engine, recording that it answered
        def table(self, s, t, dtype, to_host):
            calls.append((s.size, t.size))
            return D[s][:, t]

    real_engine = ch._gpu_engine
    monkeypatch.setattr(ch, "_gpu_engine", lambda: Sweeps())
    # no kept selection of T: a one-off table does not pay RPHAST's selection on the CPU
    np.testing.assert_array_equal(ch.table(S, T, device="gpu"), D[S][:, T])
    assert calls == [(S.size, T.size)] and not ch._selections
    monkeypatch.setattr(ch, "_gpu_engine", real_engine)
    sel = ch.select_targets(T)  # kept: later tables to T run RPHAST
    np.testing.assert_array_equal(ch.table(S, T, device="gpu"), D[S][:, T])
    assert "gpu" in sel._device and ch._gpu is None  # RPHAST answered, not the PHAST engine
    ch.release()
    assert "gpu" not in sel._device


def test_gpu_twin_raises_without_a_gpu(monkeypatch):
    import gpuroute.backend as backend
    from gpuroute.ch.rphast_gpu import rphast_gpu

    monkeypatch.setattr(backend, "probe_gpu", lambda: (False, "no CUDA device (test)"))
    _, ch = _case(0)
    sel = select_targets(ch.h, [1, 2])
    with pytest.raises(GPUUnavailableError, match="no CUDA device"):
        rphast_gpu(ch.h, sel, [0])


# ---------------------------------------------------------------------------------------------- the GPU twin
# (most sources a persistent pass, depths merged a phase, threads a block, most blocks (0: as resident), most lanes)
_GPU_SHAPES = [(0, 1, 64, 0, 32), (8, 1, 64, 0, 32), (0, 4, 64, 0, 32), (8, 4, 64, 0, 32), (16, 2, 32, 1, 4),
               (16, 3, 32, 2, 32), (16, 4, 64, 3, 8), (16, 8, 128, 5, 2), (16, 4, 1024, 0, 32), (0, 0, 64, 0, 32),
               (8, 0, 128, 0, 32), (0, 8, 32, 0, 4)]


@pytest.mark.gpu
@gpu_only
@pytest.mark.parametrize("core_from", [None, 40, 0])
@pytest.mark.parametrize("seed", [0, 1])
def test_gpu_equals_cpu_twin(seed, core_from, monkeypatch):
    """Every pass kind and grid shape (one block to as many as are resident, 32 to 1024 threads, 1 to 8 depths a
    phase, 2 to 32 lanes an item) equal to the CPU twin, for 1, 15 (passes of 5) and 60 (passes of 7) sources;
    the persistent pass runs where asked (one launch, at most the blocks allowed)."""
    from gpuroute.ch.rphast_gpu import device_selection, rphast_gpu

    g, ch = _case(seed, core_from=core_from)
    n = g.n_nodes
    D = scipy_dijkstra(g, np.arange(n))
    rng = np.random.default_rng(seed)
    for T in (rng.integers(0, n, 13), np.arange(n)):
        sel = select_targets(ch.h, T)
        monkeypatch.setattr(config, "CH_RPHAST_BATCH_ITEMS", 7 * sel.n_restricted)  # passes of at most 7 sources
        for max_k, merge, tpb, cap, lanes in _GPU_SHAPES:
            for name, v in (("PERSISTENT_MAX_K", max_k), ("MERGE_LEVELS", merge), ("THREADS", tpb),
                            ("PERSISTENT_MAX_BLOCKS", cap), ("MAX_LANES", lanes)):
                monkeypatch.setattr(config, f"CH_RPHAST_{name}", v)
            sel._device.pop("gpu", None)  # uploaded again with this merge and block size
            for S in (np.array([3]), np.arange(0, n, 4), np.arange(n)):
                want = rphast_cpu(ch.h, sel, S, upward="search")
                np.testing.assert_array_equal(want, D[S][:, T])
                np.testing.assert_array_equal(rphast_gpu(ch.h, sel, S, upward="search"), want,
                                              err_msg=f"shape {(max_k, merge, tpb, cap, lanes)}, k={S.size}")
                ds = device_selection(sel)
                if S.size <= max_k or (S.size == n and max_k >= 7):
                    assert ds.launches == 1 and (cap == 0 or ds.last_blocks <= cap)
        monkeypatch.setattr(config, "CH_RPHAST_PERSISTENT_MAX_K", 8)  # the last shape switched it off
        assert device_selection(sel).persistent(1, "entries")
    ch.hub_labels()
    np.testing.assert_array_equal(rphast_gpu(ch.h, sel, np.arange(n), upward="labels"), D[:, T])


@pytest.mark.gpu
@gpu_only
def test_gpu_launches_on_the_selections_stream(monkeypatch):
    """Every kernel of a pass is launched on the selection's own non-blocking stream (the one the result's copy
    waits for): the persistent pass once ran on CuPy's current stream and was copied out before it ended."""
    import cupy as cp

    from gpuroute.ch.rphast_gpu import device_selection, rphast_gpu

    monkeypatch.setattr(config, "CH_RPHAST_PERSISTENT_MAX_K", 8)
    g, ch = _case(2, core_from=40)
    n = g.n_nodes
    sel = select_targets(ch.h, np.arange(0, n, 3))
    ds = device_selection(sel)
    seen = []
    ds.k = {name: _Spy(name, fn, seen, lambda: cp.cuda.get_current_stream().ptr) for name, fn in ds.k.items()}
    ds.k_pass = {name: _Spy(name, fn, seen, lambda: cp.cuda.get_current_stream().ptr) if fn is not None else None
                 for name, fn in ds.k_pass.items()}
    D = scipy_dijkstra(g, np.arange(n))
    for S in (np.array([5]), np.arange(n)):  # persistent, then captured graphs
        np.testing.assert_array_equal(rphast_gpu(ch.h, sel, S, upward="search"), D[S][:, sel.targets])
    assert "rph_pass_entries" in {x for x, _ in seen} and "rph_level" in {x for x, _ in seen}
    assert [x for x, ptr in seen if ptr != ds.stream.ptr] == []


@pytest.mark.gpu
@gpu_only
def test_gpu_cupy_in_out_and_overflow():
    import cupy as cp

    from gpuroute.ch.rphast_gpu import rphast_gpu

    g, ch = _case(5)
    sel = select_targets(ch.h, [1, 2, 3])
    got = rphast_gpu(ch.h, sel, cp.asarray([0, 4]))
    assert isinstance(got, cp.ndarray) and got.dtype == cp.int64
    np.testing.assert_array_equal(got.get(), rphast_cpu(ch.h, sel, [0, 4]))
    big = ch.h
    big.down_weight[:] = 2**33
    sel = select_targets(big, np.arange(g.n_nodes))
    assert sel.n_arcs > 0
    with pytest.raises(OverflowError, match="32-bit"):
        rphast_gpu(big, sel, [0])


def _bench():
    spec = importlib.util.spec_from_file_location("_bench_rphast", Path(__file__).parents[2] / "benchmarks" / "rphast.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.gpu
@gpu_only
def test_gpu_ny_every_benchmark_shape_exact(monkeypatch):
    """NY, CU-CH built on the GPU, 1,000 targets, upward searched and from the labels, equal to the CPU twin (itself
    equal to Dijkstra): 40 sources with the defaults; every pass kind and grid shape benchmarks/rphast.py sweeps,
    for 1 and 16 sources, both the result of rphast_gpu and the rows of 5 passes run back to back on the stream
    (as the benchmark times them)."""
    import cupy as cp

    from gpuroute.ch.rphast_gpu import device_selection, rphast_gpu

    bench = _bench()
    g = gpuroute.datasets.load("ny")
    ch = ContractionHierarchy.build(g, progress=False)
    rng = np.random.default_rng(21)
    T = rng.choice(g.n_nodes, 1000, replace=False)
    sel = select_targets(ch.h, T)
    S40 = rng.integers(0, g.n_nodes, 40)
    want40 = rphast_cpu(ch.h, sel, S40, upward="search")
    np.testing.assert_array_equal(want40[:3], scipy_dijkstra(g, S40[:3])[:, T])
    bad = []
    for upward in ("search", "labels"):
        if upward == "labels":
            ch.hub_labels()
        gl = ch._gpu_labels() if upward == "labels" else None
        sel._device.pop("gpu", None)  # the defaults
        for k in (1, 40):
            np.testing.assert_array_equal(rphast_gpu(ch.h, sel, S40[:k], upward=upward), want40[:k])
        for k in (1, 16):
            S, want = S40[:k], want40[:k]
            for mode in bench.modes(k):
                for tpb, cap, merge, lanes in bench.shapes(k, mode):
                    with monkeypatch.context() as m:
                        m.setattr(config, "CH_RPHAST_PERSISTENT_MAX_K", k if mode == "persistent" else 0)
                        m.setattr(config, "CH_RPHAST_THREADS", tpb)
                        m.setattr(config, "CH_RPHAST_MERGE_LEVELS", merge)
                        m.setattr(config, "CH_RPHAST_PERSISTENT_MAX_BLOCKS", cap)
                        m.setattr(config, "CH_RPHAST_MAX_LANES", lanes)
                        sel._device.pop("gpu", None)
                        ds = device_selection(sel)
                        got = rphast_gpu(ch.h, sel, S, upward=upward, gpu_labels=gl)
                        ran = ds.persistent(k, ds.kind) == (mode == "persistent")
                        rows = cp.empty((k, T.size), dtype=cp.uint32)
                        launch = ds.prepare(ch.h, S, upward, gl, rows)
                        for _ in range(5):
                            launch()
                        ds.stream.synchronize()
                        r = rows.get()
                        again = np.where(r == DINF, INF, r.astype(np.int64))
                        if not (ran and np.array_equal(got, want) and np.array_equal(again, want)):
                            bad.append((upward, mode, k, tpb, cap, ds.last_blocks, merge, lanes))
        sel._device.pop("gpu", None)
    assert bad == []
