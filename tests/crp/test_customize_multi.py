"""Multi-device CRP customization (gpuroute.crp.customize_multi) against the one-device customization.

Oracle: the overlay's own one-device customization of the same metric; cliques and trees must be equal bit
for bit. Without a GPU the split and the merge run with the CPU customizer per part (``device_kind="cpu"``,
1-4 virtual devices, every split level, more parts than devices): random graphs with restrictions, turn
penalties and per-turn costs (some closed), mezzanine levels with microinstructions, the shipped Monaco and
NY (``slow``). The split's bookkeeping (every cell in exactly one part, bytes exchanged, work per device) is
checked against its definition, and the GPU kernels' layout (``prepare_level``) is built for every part.
With 2 or more GPUs (``gpu``): the multi-GPU cliques and trees equal the one-GPU customization's; with one
GPU, several parts on it."""
from __future__ import annotations

import numpy as np
import pytest
from crp_oracle import PEN, assert_all_pairs_exact, with_restrictions
from naive import random_road_graph

import gpuroute
from gpuroute import Overlay, Partition, config
from gpuroute.backend import GPUUnavailableError, gpu_available
from gpuroute.crp import FORBIDDEN
from gpuroute.crp.customize_gpu import prepare_level
from gpuroute.crp.customize_multi import MultiCustomizer, check_devices, customize_multi, split_cells
from gpuroute.crp.metric import Metric


def _graph(seed, n=80):
    rng = np.random.default_rng(seed)
    g, _ = random_road_graph(rng, n, one_way=0.3)
    return with_restrictions(g, rng, 10), rng


def _metrics(g, ov, rng):
    tc = rng.integers(0, 30, ov.turns.n_turns)
    tc[rng.random(tc.size) < 0.05] = FORBIDDEN
    return [(g.weight("travel_time"), PEN), Metric(g.weight("travel_time"), turn_cost=tc, name="per-turn", units="ds")]


def _one_device(ov, metric):
    st = ov.customized_state(metric, device="cpu")
    return st.clique.copy(), st.tree.copy()


def _check_split(ov, mc):
    """Every plan cell up to the split level in exactly one part; the stats add up."""
    plan = ov._plan
    for q in range(mc.qs + 1):
        got = np.concatenate([pt.cells[q] for pt in mc.parts])
        np.testing.assert_array_equal(np.sort(got), np.arange(plan.topo["n_cells"][q]))
    # the parts' clique entries cover the levels up to the split exactly once
    cq, cb = plan.topo["cq_first"], plan.topo["cell_base"]
    pos = np.sort(np.concatenate([pt.clique_pos for pt in mc.parts]))
    np.testing.assert_array_equal(pos, np.arange(int(cq[cb[mc.qs + 1]])))
    st = mc.stats
    assert sum(st.cells_per_device.values()) == int(cb[mc.qs + 1])
    assert sum(st.work_per_device.values()) == sum(pt.work for pt in mc.parts)
    assert st.upper_cells == [int(plan.topo["n_cells"][q]) for q in range(mc.qs + 1, plan.n_ext)]


def _expected_peer(ov, mc):
    """Bytes of the split level's cliques held by parts not on the gather device, where levels above the
    split remain (none otherwise): 8 x their entries, from the plan's own offsets."""
    plan = ov._plan
    if mc.qs == plan.n_ext - 1:
        return 0
    cq, cb = plan.topo["cq_first"], plan.topo["cell_base"]
    g = cb[mc.qs] + np.concatenate([pt.cells[mc.qs] for pt in mc.parts if pt.device != mc.gather_device] + [[]])
    g = g.astype(np.int64)
    return int(8 * (cq[g + 1] - cq[g]).sum())


@pytest.mark.parametrize("seed", range(3))
def test_virtual_devices_equal_one_device(seed):
    g, rng = _graph(seed)
    ov = Overlay.build(g, Partition.build(g, cell_sizes=(6, 18, 40), seed=seed))
    for metric in _metrics(g, ov, rng):
        ref_c, ref_t = _one_device(ov, metric)
        for k in (1, 2, 3, 4):
            for split in range(ov.n_levels):
                st, info = customize_multi(ov, metric, devices=list(range(k)), device_kind="cpu", split_level=split,
                                           install=False)
                np.testing.assert_array_equal(st.clique, ref_c)
                np.testing.assert_array_equal(st.tree, ref_t)
                mc = ov._multi_cust[1]
                _check_split(ov, mc)
                m = info["multi"]
                assert m["split_level"] == split and m["devices"] == list(range(k))
                assert m["bytes_peer"] == _expected_peer(ov, mc)
                assert set(m["busy_seconds"]) == {str(d) for d in range(k)}


def test_mezzanine_and_microcode_levels_split():
    g, rng = _graph(5)
    part = Partition.build(g, cell_sizes=(6, 18, 40), seed=5)
    base = Overlay.build(g, part, mezzanine=False)
    metric = _metrics(g, base, rng)[1]
    ref_c, _ = _one_device(base, metric)
    for mz in ({6: (3,)}, {6: (3,), 18: (9,)}):
        ov = Overlay.build(g, part, mezzanine=mz)
        assert ov._plan.micro is not None
        _, ref_t = _one_device(ov, metric)
        for k in (2, 3):
            for split in range(ov.n_levels):
                st, info = customize_multi(ov, metric, devices=list(range(k)), device_kind="cpu", split_level=split,
                                           install=False)
                np.testing.assert_array_equal(st.clique, ref_c)
                np.testing.assert_array_equal(st.tree, ref_t)
                assert info["multi"]["split_plan_level"] == int(ov._plan.ext_of_query[split])
                _check_split(ov, ov._multi_cust[1])


def test_more_parts_than_devices_and_empty_parts():
    g, rng = _graph(7)
    ov = Overlay.build(g, Partition.build(g, cell_sizes=(6, 18, 40), seed=7))
    metric = _metrics(g, ov, rng)[0]
    ref_c, ref_t = _one_device(ov, metric)
    top = ov.n_cells[-1]
    mc = MultiCustomizer(ov, [3], device_kind="cpu", split_level=ov.n_levels - 1, parts=top + 2)
    assert len(mc.parts) == top  # two parts got no subtree
    assert all(pt.device == 3 for pt in mc.parts)
    st, info = customize_multi(ov, metric, devices=[3, 1], device_kind="cpu", parts=5, install=False)
    np.testing.assert_array_equal(st.clique, ref_c)
    np.testing.assert_array_equal(st.tree, ref_t)
    assert {p["device"] for p in info["multi"]["parts"]} <= {1, 3} and info["multi"]["gather_device"] == 3


def test_overlay_customize_devices_installs_an_exact_state():
    g, rng = _graph(11, n=60)
    ov = Overlay.build(g, Partition.build(g, cell_sizes=(6, 18, 40), seed=11))
    metric = (g.weight("travel_time"), PEN)
    ref_c, ref_t = _one_device(ov, metric)
    info = ov.customize(metric, device="cpu", devices=[0, 1, 2])
    assert info["device"] == "cpu" and info["devices"] == [0, 1, 2]
    np.testing.assert_array_equal(ov._state.clique, ref_c)
    np.testing.assert_array_equal(ov._state.tree, ref_t)
    assert_all_pairs_exact(ov, sources=range(0, 60, 7))
    # a traffic update starts from the multi-device state
    ids = rng.integers(0, g.n_arcs, 10)
    costs = rng.integers(1, 300, 10)
    ov.update(ids, costs, device="cpu")
    got = ov._state.clique.copy()
    ov.customize(metric, device="cpu")
    ov.update(ids, costs, device="cpu")
    np.testing.assert_array_equal(got, ov._state.clique)


def test_auto_split_level():
    g, _ = _graph(2)
    ov = Overlay.build(g, Partition.build(g, cell_sizes=(6, 18, 40), seed=2))
    n = ov.n_cells
    for k in (1, 2, 3, 8):
        mc = MultiCustomizer(ov, list(range(k)), device_kind="cpu")
        need = config.CRP_MULTI_CELLS_PER_PART * k
        want = max([p for p in range(ov.n_levels) if n[p] >= need], default=0)
        assert mc.split_level == want


def test_gpu_layout_of_every_part():
    """The GPU kernels' metric-independent arrays build for every part, and their work units cover every
    entry point of every cell once (what :class:`GPUCustomizer` uploads)."""
    g, _ = _graph(3)
    ov = Overlay.build(g, Partition.build(g, cell_sizes=(6, 18, 40), seed=3))
    mc = MultiCustomizer(ov, [0, 1, 2], device_kind="cpu", split_level=1)
    for pt in mc.parts:
        for q, lg in enumerate(pt.topo["levels"]):
            ent_first, ex_first = pt.topo["level_first"][q]
            h = prepare_level(lg, ent_first, ex_first, 12, 2, 0)
            covered = np.zeros(int(ent_first[-1]), np.int64)
            for c, i0, gg in zip(h["u_cell"], h["u_i0"], h["u_g"], strict=True):
                covered[ent_first[c] + i0: ent_first[c] + i0 + gg] += 1
            assert (covered == 1).all()
        refs = pt.topo["levels"][0].e_ref
        assert refs.min(initial=0) >= 0 and refs.max(initial=-1) < pt.turns.size
        assert pt.turn_out.max(initial=-1) < pt.arcs.size


def test_split_cells_is_lpt():
    work = np.array([5, 9, 1, 9, 3, 7])
    owner = split_cells(work, 3)
    # heaviest first, to the least loaded part: 9 -> 0, 9 -> 1, 7 -> 2, 5 -> 2 (7), 3 -> 0 (9), 1 -> 1 (9)
    np.testing.assert_array_equal(owner, [2, 0, 1, 1, 0, 2])
    load = np.bincount(owner, weights=work, minlength=3)
    assert load.max() - load.min() <= work.max()


@pytest.mark.parametrize("devices, kind, err, text", [
    ([0, 1, 0], "cpu", ValueError, r"devices\[2\] = 0 repeats devices\[0\]"),
    ([0, -1], "cpu", ValueError, r"devices\[1\] = -1 is negative"),
    ([0, "1"], "cpu", TypeError, r"devices\[1\] = '1' is not an int"),
    ([True], "cpu", TypeError, r"devices\[0\] = True"),
    ([], "cpu", ValueError, "devices is empty"),
    ("01", "cpu", TypeError, "sequence of device ids"),
    ([0], "tpu", ValueError, "device_kind"),
])
def test_bad_devices_are_named(devices, kind, err, text):
    with pytest.raises(err, match=text):
        check_devices(devices, kind)


def test_bad_split_and_parts_are_named():
    g, _ = _graph(1, n=40)
    ov = Overlay.build(g, Partition.build(g, cell_sizes=(6, 18), seed=1))
    with pytest.raises(ValueError, match=r"split_level = 2: must be a query level in \[0, 2\)"):
        MultiCustomizer(ov, [0, 1], device_kind="cpu", split_level=2)
    with pytest.raises(ValueError, match=r"parts = 1: must be an int >= len\(devices\) = 2"):
        MultiCustomizer(ov, [0, 1], device_kind="cpu", parts=1)
    ov.customize("distance", device="cpu")
    before = ov._state
    with pytest.raises(ValueError, match="repeats"):
        ov.customize("distance", device="cpu", devices=[1, 1])
    assert ov._state is before  # nothing installed


@pytest.mark.skipif(gpu_available(), reason="checks the error without a GPU")
def test_gpu_kind_without_a_gpu_says_so():
    with pytest.raises(GPUUnavailableError):
        check_devices([0, 1], "gpu")


def test_monaco_virtual_devices():
    g = gpuroute.datasets.load("monaco")
    ov = Overlay.build(g, Partition.build(g, cell_sizes=(64, 512, 4096)))
    ref_c, ref_t = _one_device(ov, "time-uturn")
    for k, split in ((2, None), (4, None), (3, 0)):
        st, _ = customize_multi(ov, "time-uturn", devices=list(range(k)), device_kind="cpu", split_level=split,
                                install=False)
        np.testing.assert_array_equal(st.clique, ref_c)
        np.testing.assert_array_equal(st.tree, ref_t)


@pytest.mark.slow
def test_ny_virtual_devices(monkeypatch):
    monkeypatch.setattr(config, "CRP_KAHIP_MODE", "fast")
    g = gpuroute.datasets.load("ny")
    ov = Overlay.build(g, Partition.build(g))
    ref_c, ref_t = _one_device(ov, "distance")
    for k, split in ((2, None), (4, None), (3, 0)):
        st, info = customize_multi(ov, "distance", devices=list(range(k)), device_kind="cpu", split_level=split,
                                   install=False)
        np.testing.assert_array_equal(st.clique, ref_c)
        np.testing.assert_array_equal(st.tree, ref_t)
        assert info["multi"]["imbalance"] < 2.0


# ------------------------------------------------------------------------------------------------ GPU
def _n_gpus():
    if not gpu_available():
        return 0
    import cupy as cp

    return cp.cuda.runtime.getDeviceCount()


def _gpu_reference(ov, metric):
    st = ov.customized_state(metric, device="gpu")
    return st.clique.copy(), st.tree.copy()


def _assert_multi_gpu_equal(ov, metric, devices, **kw):
    ref_c, ref_t = _gpu_reference(ov, metric)
    st, info = customize_multi(ov, metric, devices=devices, device_kind="gpu", install=False, **kw)
    np.testing.assert_array_equal(st.clique, ref_c)
    np.testing.assert_array_equal(st.tree, ref_t)
    m = info["multi"]
    assert m["device_seconds"] > 0 and set(m["busy_seconds"]) == {str(d) for d in devices}
    assert m["bytes_peer"] == _expected_peer(ov, ov._multi_cust[1])
    # and the CPU cliques (the GPU's trees may pick other equally short paths than the CPU's)
    np.testing.assert_array_equal(st.clique, _one_device(ov, metric)[0])
    return info


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")
@pytest.mark.parametrize("seed", range(2))
def test_one_gpu_with_several_parts(seed):
    g, rng = _graph(seed, n=100)
    ov = Overlay.build(g, Partition.build(g, cell_sizes=(6, 18, 40), seed=seed))
    for metric in _metrics(g, ov, rng):
        for split in range(ov.n_levels):
            info = _assert_multi_gpu_equal(ov, metric, [0], parts=3, split_level=split)
            assert info["multi"]["bytes_peer"] == 0  # every part on the gather device


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")
def test_one_gpu_mezzanine_microcode_parts():
    g, rng = _graph(5, n=100)
    ov = Overlay.build(g, Partition.build(g, cell_sizes=(6, 18, 40), seed=5), mezzanine={6: (3,)})
    for split in range(ov.n_levels):
        _assert_multi_gpu_equal(ov, _metrics(g, ov, rng)[1], [0], parts=2, split_level=split)


@pytest.mark.gpu
@pytest.mark.skipif(_n_gpus() < 2, reason="needs 2 or more GPUs")
def test_multi_gpu_random_graphs():
    n = _n_gpus()
    g, rng = _graph(4, n=120)
    ov = Overlay.build(g, Partition.build(g, cell_sizes=(6, 18, 40), seed=4))
    for metric in _metrics(g, ov, rng):
        for k in range(2, n + 1):
            for split in range(ov.n_levels):
                info = _assert_multi_gpu_equal(ov, metric, list(range(k)), split_level=split)
                assert (info["multi"]["bytes_peer"] > 0) == (split < ov.n_levels - 1)
    with pytest.raises(IndexError, match=rf"devices\[1\] = {n}: no such GPU"):
        check_devices([0, n], "gpu")


@pytest.mark.gpu
@pytest.mark.skipif(_n_gpus() < 2, reason="needs 2 or more GPUs")
@pytest.mark.parametrize("name, cells, metric", [("monaco", (64, 512, 4096), "time-uturn"), ("ny", None, "distance")])
def test_multi_gpu_real_networks(name, cells, metric, monkeypatch):
    monkeypatch.setattr(config, "CRP_KAHIP_MODE", "fast")
    g = gpuroute.datasets.load(name)
    ov = Overlay.build(g, Partition.build(g, cell_sizes=cells) if cells else Partition.build(g))
    n = _n_gpus()
    for k in sorted({2, n}):
        for split in (None, 0):
            _assert_multi_gpu_equal(ov, metric, list(range(k)), split_level=split)
    # installed through Overlay.customize, then routes as the one-GPU state
    rng = np.random.default_rng(0)
    s, t = rng.integers(0, g.n_nodes, 200), rng.integers(0, g.n_nodes, 200)
    ov.customize(metric, device="gpu")
    want = ov.distances(s, t)
    info = ov.customize(metric, device="gpu", devices=list(range(n)))
    assert info["devices"] == list(range(n))
    np.testing.assert_array_equal(ov.distances(s, t), want)


# ------------------------------------------------------------------------------ the GPU path, emulated
# The multi-GPU driver and customize.cu's kernels run on the CPU: the kernels through the emulator of
# tests/tours/cuda_emu.py (every CUDA thread a host thread; what customize.cu needs beyond it -- dynamic shared
# memory, __syncthreads_or, atomicMax, int64 arguments -- is added here), CuPy by NumPy arrays with several
# "devices" sharing host memory (streams, events, peer copies as memmove). It checks the driver's logic (parts'
# uploads, local turn and arc ids, the gather, the upper levels, trees copied by runs), not timing.
EMU_PRELUDE = r"""
#include <atomic>
alignas(16) static unsigned char emu_dyn_smem[1 << 20];
static std::atomic<int> emu_or_flag{0};
#define __align__(x)
inline int __syncthreads_or(int p) {
    if (p) emu_or_flag.store(1);
    __syncthreads();
    int r = emu_or_flag.load();
    __syncthreads();
    if (threadIdx.x == 0) emu_or_flag.store(0);
    __syncthreads();
    return r;
}
inline int atomicMax(int* a, int v) {
    int old = __atomic_load_n(a, __ATOMIC_SEQ_CST);
    while (old < v && !__atomic_compare_exchange_n(a, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {}
    return old;
}
template <class T> inline T atomicMin(T* a, T v) {  // (int and long long: crp_push_level)
    T old = __atomic_load_n(a, __ATOMIC_SEQ_CST);
    while (v < old && !__atomic_compare_exchange_n(a, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {}
    return old;
}
"""


def _emulator():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "tours" / "cuda_emu.py"
    spec = importlib.util.spec_from_file_location("_crp_multi_cuda_emu", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def emulated_gpus(monkeypatch, tmp_path):
    import ctypes
    import re
    import shutil
    import sys
    import types
    from pathlib import Path

    if shutil.which("g++") is None:
        pytest.skip("the CUDA emulator needs g++")
    emu = _emulator()
    import gpuroute.backend as backend
    import gpuroute.crp.customize_gpu as cgpu

    src = (Path(cgpu.__file__).with_name("customize.cu")).read_text()
    src = src.replace('#include "gpuroute_common.cuh"', '#include "gpuroute_common.cuh"\n' + EMU_PRELUDE, 1)
    src = re.sub(r"extern __shared__ __align__\(16\) (\w+(?: \w+)?) (\w+)\[\];",
                 lambda m: f"{m.group(1)}* {m.group(2)} = ({m.group(1)}*)emu_dyn_smem;", src)
    cu = tmp_path / "customize.cu"
    cu.write_text(src)
    lib, kernels = emu.build(cu)

    class Kernel:
        def __init__(self, name):
            self.fn = getattr(lib, f"emu_{name}")
            self.name, self.n = name, kernels[name]

        def __call__(self, grid, block, args, shared_mem=0):
            assert len(args) == self.n, f"{self.name}: {len(args)} arguments for {self.n} parameters"
            assert shared_mem <= 1 << 20
            conv, keep = [], []
            for a in args:
                if isinstance(a, np.ndarray):
                    assert a.flags.c_contiguous, f"{self.name}: a non-contiguous array argument"
                    keep.append(a)
                    conv.append(ctypes.c_void_p(a.ctypes.data))
                elif isinstance(a, np.int64):
                    conv.append(ctypes.c_int64(int(a)))
                elif isinstance(a, np.int32):
                    conv.append(ctypes.c_int32(int(a)))
                else:
                    raise TypeError(f"{self.name}: argument of type {type(a).__name__}")
            self.fn(ctypes.c_uint(grid[0]), ctypes.c_uint(1), ctypes.c_uint(block[0]), *conv)

    class Module:
        def get_function(self, name):
            return Kernel(name)

    cp = emu.fake_cupy()
    FA = emu.FakeArray

    def get(self, stream=None, out=None, blocking=True):
        if out is not None:
            out[...] = self
            return out
        return np.array(self)

    monkeypatch.setattr(FA, "get", get)
    monkeypatch.setattr(FA, "data", property(lambda self: types.SimpleNamespace(ptr=self.ctypes.data)), raising=False)

    class Stream(emu.FakeStream):
        ptr = 0

        def wait_event(self, e):
            pass

    class Event:
        def record(self, stream=None):
            pass

        def synchronize(self):
            pass

    class Device:
        def __init__(self, d=0):
            assert 0 <= d < 4, f"no device {d}"

        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

        def synchronize(self):
            pass

    class CUDARuntimeError(RuntimeError):
        pass

    enabled = set()

    def enable_peer(d):
        if d in enabled:
            raise CUDARuntimeError("cudaErrorPeerAccessAlreadyEnabled: peer access is already enabled")
        enabled.add(d)

    peer_bytes = []

    def memcpy_peer(dst, dd, src, sd, size, stream):
        assert dd != sd
        peer_bytes.append(size)
        ctypes.memmove(dst, src, size)

    cp.cuda.Stream = Stream
    cp.cuda.Event = Event
    cp.cuda.Device = Device
    cp.cuda.get_elapsed_time = lambda a, b: 0.5
    cp.cuda.runtime = types.SimpleNamespace(getDeviceCount=lambda: 4, deviceCanAccessPeer=lambda a, b: 1,
                                            deviceEnablePeerAccess=enable_peer, memcpyPeerAsync=memcpy_peer,
                                            CUDARuntimeError=CUDARuntimeError)
    cupyx = types.ModuleType("cupyx")
    cupyx.empty_pinned = lambda shape, dtype=float: np.empty(shape, dtype)
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setitem(sys.modules, "cupyx", cupyx)
    monkeypatch.setattr(backend, "probe_gpu", lambda: (True, ""))
    monkeypatch.setattr(cgpu, "load_module", lambda relpath, options=(), cooperative=False: Module())
    monkeypatch.setattr(config, "CRP_GPU_THREADS", 32)
    monkeypatch.setattr(config, "CRP_GPU_PUSH_THREADS", 32)
    monkeypatch.setattr(config, "CRP_MICRO_THREADS", 32)
    return peer_bytes


@pytest.mark.parametrize("mezzanine", [False, {6: (3,)}])
def test_emulated_gpus_equal_one_gpu(emulated_gpus, mezzanine):
    g, rng = _graph(8, n=60)
    ov = Overlay.build(g, Partition.build(g, cell_sizes=(6, 18, 40), seed=8), mezzanine=mezzanine)
    metric = _metrics(g, ov, rng)[0 if mezzanine else 1]
    ref_c, ref_t = _gpu_reference(ov, metric)  # the one-GPU path, emulated
    np.testing.assert_array_equal(ref_c, _one_device(ov, metric)[0])
    for devices, parts, splits in (([0, 1, 2], None, range(ov.n_levels)), ([2, 0], 3, [1]), ([1], 2, [0])):
        for split in splits:
            emulated_gpus.clear()
            st, info = customize_multi(ov, metric, devices=devices, device_kind="gpu", split_level=split, parts=parts,
                                       install=False)
            np.testing.assert_array_equal(st.clique, ref_c)
            np.testing.assert_array_equal(st.tree, ref_t)
            m = info["multi"]
            assert m["bytes_peer"] == sum(emulated_gpus) == _expected_peer(ov, ov._multi_cust[1])
            assert m["bytes_d2h"] == 8 * ref_c.size + ref_t.nbytes
    info = ov.customize(metric, device="gpu", devices=[0, 1])
    assert info["device"] == "gpu" and info["multi"]["peer_access"] == {"1": True}
    np.testing.assert_array_equal(ov._state.tree, ref_t)
    assert_all_pairs_exact(ov, sources=range(0, 60, 9))
