"""How a batched PHAST pass's rows start (``GPUHierarchy._start_mode``, ``config.CH_PHAST_NO_FILL``): the rows are
not filled with DINF; on the label path only the core's rows are and a bit mask marks the items the labels wrote
(``ph_label_up_m``), which the downward pulls read instead of their own rows (``ph_level*m``); pulled level by
level, the upward pass starts each item at 0 at its source and DINF elsewhere (``ph_level*s``). The launchers run
here on ``ch/phast.cu``'s pulls compiled for the CPU (tests/tours/cuda_emu.py) over rows holding garbage, and the
trees equal Dijkstra's (the GPU's own run: tests/ch/test_phast_gpu.py's ``test_rows_not_filled``)."""
from __future__ import annotations

import importlib.util
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from naive import naive_ch, random_road_graph, scipy_dijkstra

from gpuroute import INF, config
from gpuroute.ch.phast_gpu import host_layout

DINF = 0xFFFFFFFF

_PRELUDE = r"""
inline unsigned int atomicOr(unsigned int* p, unsigned int v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }
"""


def _sibling(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _emu():
    return _sibling("_cuda_emu_for_phast", Path(__file__).parents[1] / "tours" / "cuda_emu.py")


def _function(src, head):
    """The text of the function whose definition starts with ``head``, up to its closing brace at column 0."""
    i = src.index(head)
    return src[i:src.index("\n}\n", i) + 3]


def _cu_text():
    """``ph_relax``, the pull template ``ph_level_u``, its ``PH_LEVEL`` instances of ``ch/phast.cu`` written out
    (the emulator finds ``extern "C" __global__`` kernels) and ``ph_label_up_m``."""
    import gpuroute

    src = (Path(gpuroute.__file__).parent / "ch" / "phast.cu").read_text()
    parts = ['#include "gpuroute_common.cuh"', _PRELUDE,
             _function(src, "__device__ __forceinline__ void ph_relax("),
             _function(src, "template <int U, int INIT>")]
    inst = re.findall(r"^PH_LEVEL\((\w+), (\d+), (\d)\)$", src, re.M)
    assert {name for name, _, _ in inst} >= {f"ph_level{u}{m}" for u in (4, 8, 16) for m in ("", "m", "s")}
    for name, u, init in inst:
        parts.append(f'extern "C" __global__ void {name}(int lo, int hi, int k, const int* fo, const int* tl, '
                     f'const unsigned int* w, unsigned int* d, int* flags, const unsigned int* init) '
                     f'{{ ph_level_u<{u}, {init}>(lo, hi, k, fo, tl, w, d, flags, init); }}')
    parts.append('extern "C" ' + _function(src, "__global__ void ph_label_up_m("))
    return "\n".join(parts) + "\n"


@pytest.fixture
def emulated(monkeypatch, tmp_path):
    if shutil.which("g++") is None:
        pytest.skip("the CUDA emulator needs g++")
    emu = _emu()
    emu.install(monkeypatch)
    cp = sys.modules["cupy"]
    cp.uint32 = np.uint32
    cu = tmp_path / "phast_pulls.cu"
    cu.write_text(_cu_text())
    return cp, emu.FakeModule(*emu.build(cu))


def _engine(cp, mod, h, tpb=64):
    """The parts of a GPUHierarchy its pass launchers read, on the emulated kernels."""
    from gpuroute.ch import phast_gpu

    lay = host_layout(h)
    eng = object.__new__(phast_gpu.GPUHierarchy)
    eng.cp, eng.layout, eng.n, eng.c = cp, lay, lay.n, lay.c
    eng.levels_down, eng.levels_up = lay.levels_down, lay.levels_down[::-1]
    eng.up_fo_host, eng.down_fo_host = lay.up[0], lay.down[0]
    eng.up, eng.down = (tuple(cp.asarray(a) for a in arcs) for arcs in (lay.up, lay.down))
    eng.tpb, eng.flags, eng._merged, eng.k_lanes = tpb, cp.zeros(8, dtype=np.int32), {}, None
    eng.k_levels_init = {(u, m): mod.get_function(f"ph_level{u}{m}") for u in (4, 8, 16) for m in "ms"}
    eng.k_levels = {u: mod.get_function(f"ph_level{u}") for u in (4, 8, 16)}
    core = np.asarray(h.core_dist, dtype=np.int64) if lay.c else None

    def core_step(k, d):  # the core step's twin (ph_core: 3-D grid, dynamic shared memory)
        rows = np.asarray(d[:lay.c * k]).reshape(lay.c, k).astype(np.int64)
        rows[rows == DINF] = INF
        via = np.where((rows[:, None, :] < INF) & (core[:, :, None] < INF), rows[:, None, :] + core[:, :, None], INF)
        d[:lay.c * k] = np.where(np.minimum(rows, via.min(axis=0)) >= INF, DINF, np.minimum(rows, via.min(axis=0))
                                 ).astype(np.uint32).ravel()

    eng._core = core_step
    return eng, lay


def _case(seed, core_from, n=70):
    rng = np.random.default_rng(seed)
    g, _ = random_road_graph(rng, n)
    return g, naive_ch(g, order=rng.permutation(n), core_from=core_from)


@pytest.mark.parametrize("core_from", [None, 50, 0])
@pytest.mark.parametrize("k", [33, 40, 64])
def test_upward_pulls_start_at_the_sources(emulated, core_from, k, monkeypatch):
    """Pulled level by level ("sources"): rows full of garbage, no fill, no source kernel; the upward pulls start
    each item at 0 (its source) or DINF, the core step and the downward pulls read what they wrote."""
    cp, mod = emulated
    monkeypatch.setattr(config, "CH_PHAST_FROM_LABELS", False)
    monkeypatch.setattr(config, "CH_PHAST_MERGE_LEVELS", 1)
    g, h = _case(k, core_from)
    eng, lay = _engine(cp, mod, h)
    S = np.random.default_rng(k).integers(0, lay.n, k)
    up_plan, (down_plan, down_arcs) = eng._up_plan(k), eng._down_plan(k)
    assert eng._start_mode(up_plan, down_plan) == "sources"
    eng._pass_start = ("sources", None)
    d = cp.asarray(np.random.default_rng(1).integers(0, 40, lay.n * k).astype(np.uint32))  # garbage, small
    src = cp.asarray(lay.pos[S].astype(np.int32))
    assert eng._start_rows(k, d, src) == 0
    eng._launch_plan(up_plan, k, eng.up, d, src)
    if lay.c:
        eng._core(k, d)
    eng._launch_plan(down_plan, k, down_arcs, d)
    got = np.asarray(d).reshape(lay.n, k).T.astype(np.int64)[:, lay.pos]
    np.testing.assert_array_equal(np.where(got == DINF, INF, got), scipy_dijkstra(g, S))
    assert not np.asarray(eng.flags).any()


@pytest.mark.parametrize("core_from", [None, 50, 0])
@pytest.mark.parametrize("k", [33, 64])
def test_downward_pulls_read_the_marked_rows(emulated, core_from, k, monkeypatch):
    """From labels ("mask"): only the core's rows are filled; each item the upward pass wrote below the core has
    its bit (here the upward search space of the CPU twin, which a forward label covers in the same way), every
    other row holds garbage; the downward pulls give Dijkstra's trees. ``_start_rows`` fills the core's rows and
    clears the mask only."""
    _starts = _sibling("_t_phast_merged_for_start", Path(__file__).parent / "test_phast_merged.py")._starts
    cp, mod = emulated
    monkeypatch.setattr(config, "CH_PHAST_MERGE_LEVELS", 1)
    g, h = _case(k + 1, core_from)
    eng, lay = _engine(cp, mod, h)
    n, c, kw = lay.n, lay.c, (k + 31) // 32
    S = np.random.default_rng(k).integers(0, n, k)
    plan, arcs = eng._down_plan(k)
    assert eng._start_mode([("labels", 0, 0, 0)], plan) == "mask"
    mask = cp.asarray(np.full(n * kw, 0xDEADBEEF, dtype=np.uint32))
    d = cp.asarray(np.random.default_rng(2).integers(0, 40, n * k).astype(np.uint32))
    eng._pass_start = ("mask", mask)
    assert eng._start_rows(k, d, None) == 1 + bool(c)
    assert not np.asarray(mask).any() and (np.asarray(d[:c * k]) == DINF).all()
    starts = _starts(h, lay, S)  # (k, n) over the layout's ids: the upward search and the core step
    rows = np.asarray(d).reshape(n, k)
    bits = np.zeros((n, kw), dtype=np.uint32)
    for j in range(k):
        for v in np.flatnonzero(starts[j] < INF):
            rows[v, j] = starts[j, v]
            if v >= c:
                bits[v, j // 32] |= np.uint32(1 << (j % 32))
    d[:] = rows.ravel()
    mask[:] = bits.ravel()
    eng._launch_plan(plan, k, arcs, d)
    got = np.asarray(d).reshape(n, k).T.astype(np.int64)[:, lay.pos]
    np.testing.assert_array_equal(np.where(got == DINF, INF, got), scipy_dijkstra(g, S))


def test_label_scatter_sets_the_bits_below_the_core(emulated):
    """``ph_label_up_m``: each (hub, source) entry's distance written to its row and, below the core, its bit set
    in the node-major mask (kw = ceil(k / 32) words a node), across word boundaries."""
    cp, mod = emulated
    rng = np.random.default_rng(5)
    n, c, k, L = 50, 6, 70, 40  # 70 sources: three mask words a node
    kw = (k + 31) // 32
    lidpos = rng.permutation(n).astype(np.int32)  # label id -> node
    hubs = [rng.choice(n, size=rng.integers(1, 9), replace=False).astype(np.int32) for _ in range(L)]
    first = np.concatenate([[0], np.cumsum([len(x) for x in hubs])]).astype(np.int64)
    node = np.zeros((L + 1, 4), dtype=np.int64)
    node[:, 0] = first
    hub = np.concatenate(hubs)
    dist = rng.integers(0, 1000, hub.size).astype(np.int32)
    slid = rng.integers(0, L, k).astype(np.int32)
    d = np.full(n * k, 7, dtype=np.uint32)
    mask = np.zeros(n * kw, dtype=np.uint32)
    want_d, want_m = d.copy(), mask.copy()
    for j, lid in enumerate(slid):
        for i in range(first[lid], first[lid + 1]):
            p = lidpos[hub[i]]
            want_d[p * k + j] = dist[i]
            if p >= c:
                want_m[p * kw + j // 32] |= np.uint32(1 << (j % 32))
    args = (np.int32(k), np.int32(c), cp.asarray(slid), cp.asarray(node.ravel()), cp.asarray(hub), cp.asarray(dist),
            cp.asarray(lidpos), cp.asarray(d), cp.asarray(mask))
    mod.get_function("ph_label_up_m")((k,), (32,), args)
    np.testing.assert_array_equal(np.asarray(args[7]), want_d)
    np.testing.assert_array_equal(np.asarray(args[8]), want_m)
    assert want_m.any() and (want_m.reshape(n, kw)[:, 2] != 0).any()
