"""The GPU twin of the overlay's many-to-many table (:mod:`gpuroute.crp.many_to_many_gpu`).

Without a GPU: the numba emulation of its kernels (``_emulate``: the same per-thread loops over the same
arrays -- hash tables, heaps, output slices, compaction, bucket CSRs, per-cell choice) gives the CPU twin's
table (:func:`gpuroute.crp.many_to_many.table`) bit for bit -- costs, chosen options, same-arc flags and
the quantities along the chosen paths -- and every cell equals the turn-aware oracle (tests/turn_oracle.py:
scipy's Dijkstra on the turn-expanded graph), on random graphs with turn costs and restrictions over
multi-level partitions, with many equal-cost ties, with scratch so small that searches stop and run again,
on hand-made same-arc cases, and on Monaco before and after traffic. The kernels' own source
(many_to_many.cu, compiled for the host by g++ with a small shim for the CUDA built-ins, every thread of every
launch run in turn) behind the GPU launcher, whose every launch is checked against the kernels' parameter
lists, gives the CPU twin's table bit for bit too.
With a GPU (``gpu`` marker): the CUDA kernels (``table``) give the CPU twin's table bit for bit on the same
inputs, and after a GPU customization with traffic.
"""
from __future__ import annotations

import weakref

import numpy as np
import pytest
from crp_oracle import with_restrictions
from naive import random_road_graph
from phantoms import option_point, random_options
from turn_oracle import phantom_cost, turn_graph

import gpuroute
from gpuroute import Overlay, Partition, RoadGraph, config
from gpuroute.backend import GPUUnavailableError, gpu_available
from gpuroute.crp import many_to_many as mm
from gpuroute.crp import many_to_many_gpu as mg
from gpuroute.partition.multilevel import topology_fingerprint

PARTS = [((2, 4, 8, 16), "inertial"), ((3, 9), "kahip"), ((6, 30, 60), "inertial"), ((4,), "kahip")]


def _overlay(seed, n=70, max_cost=1000):
    rng = np.random.default_rng(seed)
    g, _ = random_road_graph(rng, n, one_way=float(rng.choice([0.0, 0.3, 0.6])))
    g = with_restrictions(g, rng, 15)
    sizes, method = PARTS[seed % len(PARTS)]
    ov = Overlay.build(g, Partition.build(g, cell_sizes=sizes, method=method, seed=seed))
    costs = rng.integers(1, max_cost, g.n_arcs)
    pen = {name: int(rng.integers(0, max(1, max_cost // 3))) for name in ("straight", "left", "right", "uturn")}
    ov.customize((costs, pen))
    return g, ov, rng


def _inputs(g, ov, rng, S, T, k_same):
    sa, sf = random_options(g, rng, S)
    ta, tf = random_options(g, rng, T)
    ta[:k_same], tf[:k_same] = sa[:k_same], rng.random(sf[:k_same].shape)  # targets on the sources' own arcs
    tr = ov.turns
    along = [(rng.random(g.n_arcs), rng.random(tr.out_arc.size)), (rng.random(g.n_arcs) * 100, None)]
    return sa, sf, ta, tf, along


def _oracle(ov, sa, sf, ta, tf):
    tg = turn_graph(ov)
    return np.array([[phantom_cost(ov, option_point(sa[s], sf[s]), option_point(ta[t], tf[t]), tg)
                      for t in range(ta.shape[0])] for s in range(sa.shape[0])])


def _assert_same_table(res, ref):
    """Bit for bit: costs, options, same-arc flags, along sums, the metric and the label scale."""
    np.testing.assert_array_equal(res.cost, ref.cost)
    np.testing.assert_array_equal(res.src_option, ref.src_option)
    np.testing.assert_array_equal(res.dst_option, ref.dst_option)
    np.testing.assert_array_equal(res.same_arc, ref.same_arc)
    assert len(res.along) == len(ref.along)
    for x, y in zip(res.along, ref.along, strict=True):
        np.testing.assert_array_equal(x, y)
    assert res.cost.dtype == ref.cost.dtype and res.src_option.dtype == ref.src_option.dtype
    assert res.same_arc.dtype == ref.same_arc.dtype
    assert res.metric is ref.metric
    assert res.stats["scale"] == ref.stats["scale"]
    assert res.stats["bucket_entries"] == ref.stats["bucket_entries"]


# ------------------------------------------------------------------------------------------ emulation (CPU)
@pytest.mark.parametrize("seed", range(4))
def test_emulation_equals_the_cpu_twin_and_the_oracle(seed):
    g, ov, rng = _overlay(seed)
    sa, sf, ta, tf, along = _inputs(g, ov, rng, 13, 11, 5)
    ref = mm.table(ov, sa, sf, ta, tf, along=along)
    res = mg._emulate(ov, sa, sf, ta, tf, along=along)
    assert res.stats["device"] == "emulated"
    _assert_same_table(res, ref)
    want = _oracle(ov, sa, sf, ta, tf)
    assert np.isfinite(want).any() and res.same_arc.any()
    np.testing.assert_allclose(res.cost, want, rtol=0, atol=1e-6)


@pytest.mark.parametrize("seed", range(2))
def test_emulation_breaks_ties_as_the_cpu_twin(seed):
    """Arc costs 1..2 and penalties 0: many paths and option pairs of equal label; the kernels' heaps settle
    equal keys in the CPU twin's order, so the same pairs and paths are chosen."""
    g, ov, rng = _overlay(seed + 30, max_cost=3)
    sa, sf, ta, tf, along = _inputs(g, ov, rng, 12, 12, 4)
    ref = mm.table(ov, sa, sf, ta, tf, along=along)
    _assert_same_table(mg._emulate(ov, sa, sf, ta, tf, along=along), ref)
    np.testing.assert_allclose(ref.cost, _oracle(ov, sa, sf, ta, tf), rtol=0, atol=1e-6)


def test_emulation_with_scratch_too_small_runs_the_searches_again(monkeypatch):
    """Two hash slots per search, one bucket entry and one tree node per slice, scratch for one search per
    launch: searches stop (table full, slice full) and run again with more room; the table is the same. The
    next table on the overlay starts with the room the last one ended with."""
    g, ov, rng = _overlay(5)
    sa, sf, ta, tf, along = _inputs(g, ov, rng, 9, 10, 3)
    ref = mm.table(ov, sa, sf, ta, tf, along=along)
    res = mg._emulate(ov, sa, sf, ta, tf, along=along)
    assert res.stats["rounds"] == (1, 1)
    monkeypatch.setattr(config, "CRP_TABLE_GPU_HASH_SLOTS", 2)
    monkeypatch.setattr(config, "CRP_TABLE_GPU_SCRATCH_BYTES", 1)
    monkeypatch.setattr(mm, "_EST_ENTRIES", 1)
    monkeypatch.setattr(mm, "_EST_NODES", 1)
    monkeypatch.setattr(mg, "_room", weakref.WeakKeyDictionary())
    small = mg._emulate(ov, sa, sf, ta, tf, along=along)
    assert small.stats["rounds"][0] > 1 and small.stats["rounds"][1] > 1
    _assert_same_table(small, ref)
    _assert_same_table(res, ref)
    again = mg._emulate(ov, sa, sf, ta, tf, along=along)
    assert again.stats["rounds"] == (1, 1) and again.stats["hash_slots"] == small.stats["hash_slots"]
    _assert_same_table(again, ref)


def test_a_kernel_that_stops_with_room_for_everything_is_an_error(monkeypatch):
    """Never a wrong answer silently: a search reporting a full table when it had room for every state is
    raised, not retried forever nor returned."""
    g, ov, rng = _overlay(6)
    sa, sf, ta, tf, _ = _inputs(g, ov, rng, 3, 3, 1)

    def broken(items, H, cap, *rest):
        status = rest[-1]
        status[:] = mg._HASH_FULL

    monkeypatch.setattr(mg, "_emu_backward", broken)
    with pytest.raises(RuntimeError, match="kernel defect"):
        mg._emulate(ov, sa, sf, ta, tf)


def _ring():
    """A one-way ring 0 -> 1 -> 2 -> 3 -> 0 (arcs 0..3, costs 10, 20, 30, 40) and an isolated one-way arc 4 -> 5."""
    g = RoadGraph.from_arcs(6, [0, 1, 2, 3, 4], [1, 2, 3, 0, 5], {"travel_time": np.array([10, 20, 30, 40, 50])})
    cells = np.array([[0, 0, 1, 1, 2, 2], [0, 0, 0, 0, 1, 1]])
    ov = Overlay.build(g, Partition(cells, (2, 4), "manual", topology_fingerprint(g)))
    ov.customize(np.array([10, 20, 30, 40, 50]))
    return g, ov


def _ring_cases(ov):
    """On :func:`_ring`: a target behind the source on its arc (round the ring, through a clique), ahead of it
    (one-arc leg), on an isolated arc (behind: none), unused option slots and rows without options; ``along``
    quantities per arc and per turn. Returns ``sa, sf, ta, tf, along``."""
    sa = np.array([[3, -1], [3, -1], [4, -1], [-1, 4], [-1, -1], [-1, 0]])
    sf = np.array([[0.8, 0], [0.2, 0], [0.9, 0], [0, 0.2], [0, 0], [0, 0.5]])
    ta = np.array([[3, -1, -1], [4, -1, 1], [-1, 2, -1], [-1, -1, -1]])
    tf = np.array([[0.3, 0, 0], [0.7, 0, 0.5], [0, 0.25, 0], [0, 0, 0]])
    along = [(np.arange(5.0), np.ones(ov.turns.out_arc.size))]
    return sa, sf, ta, tf, along


def test_emulation_same_arc_cases_and_unused_slots():
    """:func:`_ring_cases`, against the CPU twin and the oracle."""
    g, ov = _ring()
    sa, sf, ta, tf, along = _ring_cases(ov)
    ref = mm.table(ov, sa, sf, ta, tf, along=along)
    res = mg._emulate(ov, sa, sf, ta, tf, along=along)
    _assert_same_table(res, ref)
    np.testing.assert_allclose(res.cost, _oracle(ov, sa, sf, ta, tf), rtol=0, atol=1e-9)
    assert res.cost[0, 0] == pytest.approx(0.2 * 40 + 100 - 0.7 * 40) and not res.same_arc[0, 0]
    assert res.cost[1, 0] == pytest.approx(0.1 * 40) and res.same_arc[1, 0]
    assert np.isinf(res.cost[4]).all() and np.isinf(res.cost[:, 3]).all()


def test_emulation_u_turn_into_a_state_settled_by_another_seed():
    """The CPU twin's relaxation-time join (a U-turn edge into a target option's state that the source's own
    seed settled): 19 = 10 + 45 - 36."""
    g = RoadGraph.from_arcs(2, [0, 1], [1, 0], {"travel_time": np.array([40, 40])})
    ov = Overlay.build(g, Partition(np.array([[0, 1]]), (2,), "manual", topology_fingerprint(g)))
    ov.customize((np.array([40, 40]), {"uturn": 5}))
    sa, sf = np.array([[0, 1]]), np.array([[0.25, 0.75]])
    ta, tf = np.array([[0, 1]]), np.array([[0.1, 0.6]])
    res = mg._emulate(ov, sa, sf, ta, tf, along=[(np.ones(2), None)])
    _assert_same_table(res, mm.table(ov, sa, sf, ta, tf, along=[(np.ones(2), None)]))
    assert res.cost[0, 0] == pytest.approx(19.0) and res.src_option[0, 0] == 1 and res.dst_option[0, 0] == 0


def test_emulation_empty_tables_and_bad_input():
    g, ov = _ring()
    a, f = np.zeros((0, 2), np.int64), np.zeros((0, 2))
    res = mg._emulate(ov, a, f, np.array([[1, -1]]), np.array([[0.5, 0.0]]), along=[(np.ones(5), None)])
    assert res.cost.shape == (0, 1) and res.along[0].shape == (0, 1)
    assert mg._emulate(ov, np.array([[1]]), np.array([[0.5]]), a, f).cost.shape == (1, 0)
    with pytest.raises(IndexError, match=r"dst_arcs\[0, 1\] = 5"):
        mg._emulate(ov, np.array([[0]]), np.array([[0.5]]), np.array([[0, 5]]), np.array([[0.5, 0.5]]))
    with pytest.raises(ValueError, match=r"src_frac\[0, 0\] = 1.5 \(arc 0\)"):
        mg._emulate(ov, np.array([[0]]), np.array([[1.5]]), np.array([[1]]), np.array([[0.5]]))
    with pytest.raises(ValueError, match=r"along\[0\] per_arc has shape \(4,\)"):
        mg._emulate(ov, np.array([[0]]), np.array([[0.5]]), np.array([[1]]), np.array([[0.5]]),
                    along=[(np.ones(4), None)])


def test_without_a_gpu_the_entry_point_says_why(monkeypatch):
    if gpu_available():
        pytest.skip("a GPU is usable here")
    monkeypatch.setattr(mg, "_device", None)
    g, ov = _ring()
    with pytest.raises(GPUUnavailableError):
        mg.table(ov, np.array([[0]]), np.array([[0.5]]), np.array([[1]]), np.array([[0.5]]))


def test_release_drops_what_is_kept(monkeypatch):
    """``release()`` empties the device copies and the learnt room (filled here with stand-ins: no GPU)."""
    g, ov = _ring()
    monkeypatch.setattr(mg, "_dev_graph", {1: (None, {})})
    monkeypatch.setattr(mg, "_dev_state", {2: (None, ())})
    mg._emulate(ov, np.array([[0]]), np.array([[0.5]]), np.array([[1]]), np.array([[0.5]]))
    assert ov in mg._room
    mg.release()
    assert not mg._dev_graph and not mg._dev_state and ov not in mg._room


@pytest.fixture(scope="module")
def monaco():
    g = gpuroute.datasets.load("monaco")
    return g, Overlay.build(g, Partition.build(g, cell_sizes=(64, 512, 4096), method="inertial"))


def test_emulation_on_monaco_before_and_after_traffic(monaco):
    """Restrictions and U-turn penalties; a traffic update; the old state read again."""
    g, ov = monaco
    ov.customize("time-uturn")
    rng = np.random.default_rng(3)
    sa, sf, ta, tf, _ = _inputs(g, ov, rng, 10, 10, 3)
    along = [(g.weight("distance").astype(np.float64), None)]
    before = mg._emulate(ov, sa, sf, ta, tf, along=along)
    _assert_same_table(before, mm.table(ov, sa, sf, ta, tf, along=along))
    assert np.isfinite(before.cost).sum() > 80 and before.same_arc.any()
    old = ov._state
    arcs = np.unique(rng.integers(0, g.n_arcs, g.n_arcs // 3))
    ov.update(arcs, 3 * ov.arc_cost[arcs])
    after = mg._emulate(ov, sa, sf, ta, tf)
    _assert_same_table(after, mm.table(ov, sa, sf, ta, tf))
    assert (after.cost > before.cost + 1e-9).any()
    _assert_same_table(mg._emulate(ov, sa, sf, ta, tf, state=old), mm.table(ov, sa, sf, ta, tf, state=old))


# ------------------------------------------------------------------------------------------ the GPU
@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("max_cost", [1000, 3])
def test_gpu_equals_the_cpu_twin(seed, max_cost, monkeypatch):
    """Random graphs with restrictions and turn penalties (max_cost 3: many ties), with ``along``; then with
    scratch so small that searches stop on the device and run again, in many launches."""
    g, ov, rng = _overlay(seed + (30 if max_cost == 3 else 0), max_cost=max_cost)
    sa, sf, ta, tf, along = _inputs(g, ov, rng, 40, 33, 8)
    ref = mm.table(ov, sa, sf, ta, tf, along=along)
    res = mg.table(ov, sa, sf, ta, tf, along=along)
    assert res.stats["device"] == "gpu"
    print(f"answered by {res.stats['device_name']}")
    _assert_same_table(res, ref)
    np.testing.assert_allclose(res.cost[:10, :10], _oracle(ov, sa[:10], sf[:10], ta[:10], tf[:10]), rtol=0, atol=1e-6)
    _assert_same_table(mg.table(ov, sa, sf, ta, tf), mm.table(ov, sa, sf, ta, tf))
    # tiny scratch: searches stop on the device and run again; several launches per phase
    monkeypatch.setattr(config, "CRP_TABLE_GPU_HASH_SLOTS", 2)
    monkeypatch.setattr(config, "CRP_TABLE_GPU_SCRATCH_BYTES", 64 * 1024)
    monkeypatch.setattr(config, "CRP_TABLE_GPU_THREADS", 8)
    monkeypatch.setattr(mm, "_EST_ENTRIES", 1)
    monkeypatch.setattr(mm, "_EST_NODES", 1)
    monkeypatch.setattr(mg, "_room", weakref.WeakKeyDictionary())
    mg._device = None  # the threads per block are read when the kernels are loaded
    try:
        small = mg.table(ov, sa, sf, ta, tf, along=along)
    finally:
        mg._device = None
    assert small.stats["rounds"][0] > 1 and small.stats["rounds"][1] > 1
    _assert_same_table(small, ref)


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")
def test_gpu_same_arc_cases():
    g, ov = _ring()
    sa, sf, ta, tf, along = _ring_cases(ov)
    _assert_same_table(mg.table(ov, sa, sf, ta, tf, along=along), mm.table(ov, sa, sf, ta, tf, along=along))


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")
def test_gpu_on_monaco_after_a_gpu_customization_with_traffic(monaco):
    """Customized on the GPU, then a traffic update on the GPU: the GPU table equals the CPU twin's on each
    state (the device copies of a state's costs are per state), and the oracle on a sample."""
    g, ov = monaco
    ov.customize("time-uturn", device="gpu")
    rng = np.random.default_rng(4)
    sa, sf, ta, tf, _ = _inputs(g, ov, rng, 60, 50, 10)
    along = [(g.weight("distance").astype(np.float64), None)]
    before = mg.table(ov, sa, sf, ta, tf, along=along)
    _assert_same_table(before, mm.table(ov, sa, sf, ta, tf, along=along))
    old = ov._state
    arcs = np.unique(rng.integers(0, g.n_arcs, g.n_arcs // 3))
    ov.update(arcs, 3 * ov.arc_cost[arcs], device="gpu")
    after = mg.table(ov, sa, sf, ta, tf, along=along)
    _assert_same_table(after, mm.table(ov, sa, sf, ta, tf, along=along))
    assert (after.cost > before.cost + 1e-9).any()
    _assert_same_table(mg.table(ov, sa, sf, ta, tf, state=old), mm.table(ov, sa, sf, ta, tf, state=old))
    np.testing.assert_allclose(after.cost[:6, :6], _oracle(ov, sa[:6], sf[:6], ta[:6], tf[:6]), rtol=0, atol=1e-6)


# ------------------------------------------------------------------------------------------ the launcher
_C_TYPES = {"i64": np.int64, "int": np.int32, "double": np.float64, "bool": np.bool_, "unsigned char": np.uint8}


def _kernel_signatures():
    """``{kernel: [(c type, is pointer), ...]}`` of every ``extern "C" __global__`` function of many_to_many.cu."""
    import re
    from pathlib import Path

    text = (Path(mg.__file__).parent / "many_to_many.cu").read_text()
    out = {}
    for name, params in re.findall(r'extern "C" __global__ void (\w+)\(([^)]*)\)', text):
        sig = []
        for p in params.split(","):
            p = " ".join(p.replace("__restrict__", " ").replace("const ", " ").split())
            ptr = "*" in p
            typ = p.replace("*", " ").rsplit(" ", 2)[0] if ptr else p.rsplit(" ", 1)[0]
            sig.append((" ".join(typ.split()), ptr))
        out[name] = sig
    return out


class _CheckedLaunches(mg._Device):
    """The GPU launcher (:class:`~gpuroute.crp.many_to_many_gpu._Device`: its argument lists, scalar types,
    grids) over NumPy arrays: each launch is checked against the kernel's parameter list in the .cu file
    (count, C type of every scalar and array, contiguity, a thread for every item) and then run by the
    emulation of that kernel, or (``lib``) by the .cu file itself compiled for the host
    (:func:`_host_kernels`), every block and thread of the grid in turn."""

    host = staticmethod(np.asarray)
    device = "checked"  # not "gpu": nothing of this run is kept as the GPU's device copies

    def __init__(self, lib=None):
        self.xp = np
        self.threads = 8
        self.sig = _kernel_signatures()
        self.calls = {}
        run = {"m2m_backward": lambda a: mg._emu_backward(a[1], a[2], a[3], *a[6:]),
               "m2m_compact_entries": lambda a: mg._emu_compact_entries(*a[1:]),
               "m2m_forward": lambda a: mg._emu_forward(a[1], a[2], a[3], bool(a[4]), *a[7:]),
               "m2m_compact_nodes": lambda a: mg._emu_compact_nodes(*a[1:]),
               "m2m_combine": lambda a: mg._emu_combine(a[0], a[1], *a[4:])}
        self.k = {name: self._kernel(name, run[name] if lib is None else self._compiled(lib, name)) for name in run}
        self.grids = {}

    def _compiled(self, lib, name):
        import ctypes

        fn = getattr(lib, f"launch_{name}")
        fn.restype = None
        fn.argtypes = [ctypes.c_uint, ctypes.c_uint] + [
            ctypes.c_void_p if ptr else (ctypes.c_longlong if typ == "i64" else ctypes.c_int)
            for typ, ptr in self.sig[name]]

        def run(a):
            grid, block = self.grids[name]
            fn(grid, block, *[x.ctypes.data if isinstance(x, np.ndarray) else int(x) for x in a])
        return run

    def _kernel(self, name, run):
        def launch(grid, block, args):
            sig = self.sig[name]
            assert len(args) == len(sig), f"{name}: {len(args)} arguments, the kernel takes {len(sig)}"
            for i, (arg, (typ, ptr)) in enumerate(zip(args, sig, strict=True)):
                want = _C_TYPES[typ]
                if ptr:
                    assert isinstance(arg, np.ndarray) and arg.dtype == want and arg.flags.c_contiguous, \
                        f"{name} argument {i}: {typ}* expected, got {getattr(arg, 'dtype', type(arg))}"
                else:
                    assert isinstance(arg, np.generic) and arg.dtype == want, \
                        f"{name} argument {i}: {typ} expected, got {type(arg).__name__}"
            n = int(args[0]) * (int(args[1]) if name == "m2m_combine" else 1)
            per_block = 1 if name.startswith("m2m_compact") else block[0]
            assert grid[0] * per_block >= n, f"{name}: grid {grid} x {block} for {n} items"
            self.calls[name] = self.calls.get(name, 0) + 1
            self.grids[name] = (int(grid[0]), int(block[0]))
            run(args)
        return launch


def test_the_gpu_launcher_passes_what_the_kernels_take():
    """Every launch of the GPU path (argument order, scalar and array types, grids) matches the .cu
    signatures, and the GPU path's driver run over the emulated kernels gives the CPU twin's table."""
    assert set(_kernel_signatures()) == {"m2m_backward", "m2m_compact_entries", "m2m_forward", "m2m_compact_nodes",
                                         "m2m_combine"}
    g, ov, rng = _overlay(2)
    sa, sf, ta, tf, along = _inputs(g, ov, rng, 11, 12, 4)
    kern = _CheckedLaunches()
    res = mg._table(kern, ov, sa, sf, ta, tf, None, along)
    _assert_same_table(res, mm.table(ov, sa, sf, ta, tf, along=along))
    assert set(kern.calls) == set(kern.k)
    res = mg._table(kern, ov, sa, sf, ta, tf, None, ())
    _assert_same_table(res, mm.table(ov, sa, sf, ta, tf))


#: What a CUDA kernel file needs from the device toolkit, for the host: the thread indices (set by the launch
#: wrappers), the round-to-nearest intrinsics (IEEE operations; compiled without contraction), the bit casts.
_HOST_SHIM = """
#include <cmath>
#include <cstring>
struct m2m_idx_t { unsigned int x; };
static m2m_idx_t blockIdx, threadIdx, blockDim;
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __ll2double_rn(long long x) { return (double)x; }
static inline double __longlong_as_double(long long x) { double d; std::memcpy(&d, &x, sizeof d); return d; }
#define __global__
#define __device__
#define __forceinline__ inline
"""


@pytest.fixture(scope="module")
def host_kernels(tmp_path_factory):
    """many_to_many.cu compiled for the host by g++ (the shared header replaced by :data:`_HOST_SHIM`), with a
    ``launch_<kernel>(grid, block, ...)`` wrapper per kernel that runs every block and thread in turn."""
    import ctypes
    import re
    import shutil
    import subprocess
    from pathlib import Path

    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("needs a C++ compiler (g++ or clang++) to run the .cu kernels on the host")
    text = (Path(mg.__file__).parent / "many_to_many.cu").read_text()
    assert '#include "gpuroute_common.cuh"' in text
    code = [text.replace('#include "gpuroute_common.cuh"', _HOST_SHIM, 1)]
    for name, params in re.findall(r'extern "C" __global__ void (\w+)\(([^)]*)\)', text):
        names = ", ".join(re.findall(r"\w+", p)[-1] for p in params.split(","))
        code.append(f'extern "C" void launch_{name}(unsigned int grid, unsigned int block, {params}) {{\n'
                    f"    blockDim.x = block;\n"
                    f"    for (unsigned int b = 0; b < grid; ++b)\n"
                    f"        for (unsigned int t = 0; t < block; ++t) {{\n"
                    f"            blockIdx.x = b;\n            threadIdx.x = t;\n            {name}({names});\n"
                    f"        }}\n}}\n")
    d = tmp_path_factory.mktemp("m2m_host")
    src, lib = d / "many_to_many_host.cpp", d / "many_to_many_host.so"
    src.write_text("\n".join(code))
    out = subprocess.run([cxx, "-std=c++17", "-O1", "-ffp-contract=off", "-Wall", "-Werror", "-shared", "-fPIC",
                          "-o", str(lib), str(src)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return ctypes.CDLL(str(lib))


@pytest.mark.parametrize("seed, max_cost", [(0, 1000), (1, 1000), (30, 3), (31, 3)])
def test_the_cu_kernels_compiled_for_the_host_give_the_cpu_twins_table(seed, max_cost, host_kernels, monkeypatch):
    """The kernels' own source (many_to_many.cu, compiled for the host, every thread of every launch run in
    turn) behind the GPU launcher gives the CPU twin's table bit for bit: random graphs with restrictions and
    penalties, many ties (max_cost 3), ``along``; then scratch so small that searches stop and run again."""
    g, ov, rng = _overlay(seed, max_cost=max_cost)
    sa, sf, ta, tf, along = _inputs(g, ov, rng, 12, 12, 4)
    ref = mm.table(ov, sa, sf, ta, tf, along=along)
    kern = _CheckedLaunches(host_kernels)
    _assert_same_table(mg._table(kern, ov, sa, sf, ta, tf, None, along), ref)
    _assert_same_table(mg._table(kern, ov, sa, sf, ta, tf, None, ()), mm.table(ov, sa, sf, ta, tf))
    assert set(kern.calls) == set(kern.k)
    monkeypatch.setattr(config, "CRP_TABLE_GPU_HASH_SLOTS", 2)
    monkeypatch.setattr(config, "CRP_TABLE_GPU_SCRATCH_BYTES", 4096)
    monkeypatch.setattr(mm, "_EST_ENTRIES", 1)
    monkeypatch.setattr(mm, "_EST_NODES", 1)
    monkeypatch.setattr(mg, "_room", weakref.WeakKeyDictionary())
    small = mg._table(kern, ov, sa, sf, ta, tf, None, along)
    assert small.stats["rounds"][0] > 1 and small.stats["rounds"][1] > 1
    _assert_same_table(small, ref)


def test_the_cu_kernels_compiled_for_the_host_on_monaco(monaco, host_kernels):
    g, ov = monaco
    ov.customize("time-uturn")
    rng = np.random.default_rng(8)
    sa, sf, ta, tf, _ = _inputs(g, ov, rng, 8, 9, 3)
    along = [(g.weight("distance").astype(np.float64), None)]
    res = mg._table(_CheckedLaunches(host_kernels), ov, sa, sf, ta, tf, None, along)
    _assert_same_table(res, mm.table(ov, sa, sf, ta, tf, along=along))
    assert res.same_arc.any() and np.isfinite(res.cost).sum() > 50
