"""RPHAST's kernels (gpuroute/ch/rphast.cu) on the CPU with every block running at once: a memory-model check
for machines without a GPU.

tests/tours/cuda_emu.py runs a launch's blocks one after another (so a persistent pass there has one block);
here every CUDA thread of every block is a ``std::thread`` at the same time (``__shared__`` per block, the grid
barrier of gpuroute_common.cuh as written, the blocks started in a seeded random order, random yields at the
distance loads and stores), behind the real launcher (gpuroute.ch.rphast_gpu with cuda_emu's CuPy on NumPy).
Besides the results, every access to the distance rows ``d`` is checked against the grid-barrier epochs of the
launch (a launch is epoch 0; each grid barrier starts the next):

* a *race*: a load of a word that another thread stores in the same epoch (before or after the load: no
  barrier orders them), or two threads storing one word in one epoch. The only ones allowed are the benign
  race the kernel documents: a phase of merged depths reading a node of its own phase (``[lo, hi)`` of that
  phase); with one depth a phase there are none.
* an *L1 hazard* (L1 is not coherent between multiprocessors): a plain (cacheable) load of a word another block
  stored in an earlier epoch of the same launch (a grid barrier orders the store, but the load may be served
  by a stale L1 line); the persistent pass must read such words through L2 (``__ldcg``).

The check is deterministic (every store is logged with its epoch and thread, every load checked after its
epoch's barrier); the interleaving only varies which values the benign race reads. Two mutations of the kernel
(a grid barrier taken out; the persistent pass reading through L1) show that it catches what it should.
"""
from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from naive import naive_ch, random_road_graph, scipy_dijkstra

import gpuroute
from gpuroute import config
from gpuroute.ch import ContractionHierarchy
from gpuroute.ch.rphast import rphast_cpu, select_targets

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="the concurrent emulator needs g++")

SHIM = r"""
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>
#define __device__
#define __global__
#define __forceinline__ inline
#define DINF 0xFFFFFFFFu
enum { F_CH0 = 0, F_CH1 = 1, F_DONE = 2, F_PHASES = 3, F_OVF = 4, F_MODE = 5, F_FARPAR = 6, N_FLAGS = 8 };
struct emu_dim { unsigned x, y, z; };
thread_local emu_dim threadIdx, blockIdx;
emu_dim blockDim, gridDim;

struct EmuBarrier {
    std::mutex m; std::condition_variable cv; int n = 0, count = 0; long gen = 0;
    void wait() {
        std::unique_lock<std::mutex> l(m);
        const long g = gen;
        if (++count == n) { count = 0; ++gen; cv.notify_all(); return; }
        if (!cv.wait_for(l, std::chrono::seconds(60), [&] { return gen != g; })) {
            std::fprintf(stderr, "emu: a barrier waited 60 s\n");
            std::abort();
        }
    }
};
struct EmuBlock {
    EmuBarrier bar;
    std::vector<EmuBarrier> warps;
    std::vector<unsigned long long> xbuf;
    std::mutex m;
    std::map<int, std::vector<unsigned char>> smem;
};
thread_local EmuBlock* emu_blk;
thread_local long emu_tid;   // the thread's index in the grid
thread_local int emu_epoch;  // grid barriers passed in this launch
thread_local unsigned long long emu_rng;
thread_local std::vector<const void*> emu_reads;  // the L2 loads of d in this epoch
int emu_yield_per_256 = 32;

inline void emu_maybe_yield() {
    emu_rng ^= emu_rng << 13; emu_rng ^= emu_rng >> 7; emu_rng ^= emu_rng << 17;
    if ((int)(emu_rng & 255u) < emu_yield_per_256) std::this_thread::yield();
}
inline void __syncthreads() { emu_blk->bar.wait(); }
template <class T> inline T* emu_shared(int id, int n) {
    std::lock_guard<std::mutex> l(emu_blk->m);
    auto& v = emu_blk->smem[id];
    if (v.empty()) v.resize(sizeof(T) * (size_t)n);
    return (T*)v.data();
}
template <class T> inline T min(T a, T b) { return b < a ? b : a; }
template <class T> inline T max(T a, T b) { return a < b ? b : a; }
template <class T> inline T emu_shfl(T v, int src_lane) {
    const int t = threadIdx.x, w = t >> 5;
    unsigned long long raw = 0;
    std::memcpy(&raw, &v, sizeof(T));
    emu_blk->xbuf[t] = raw;
    emu_blk->warps[w].wait();
    T o = v;
    if (src_lane >= 0 && src_lane < 32) std::memcpy(&o, &emu_blk->xbuf[w * 32 + src_lane], sizeof(T));
    emu_blk->warps[w].wait();
    return o;
}
template <class T> inline T __shfl_down_sync(unsigned, T v, int off) {
    const int lane = threadIdx.x & 31;
    return emu_shfl(v, lane + off < 32 ? lane + off : lane);
}

// ---- the check: the last store of each word (thread, epoch) in this launch; what broke the rules
#define EMU_ATOMIC (-2L)
struct EmuShadow { long writer; int epoch; };
std::mutex emu_sm;
std::unordered_map<const void*, EmuShadow> emu_shadow;
std::vector<long long> emu_log;  // (kind, epoch, address) triples: 0 race, 1 store/store race, 2 L1 hazard

inline void emu_report(int kind, int epoch, const void* p) {  // emu_sm held
    emu_log.push_back(kind); emu_log.push_back(epoch); emu_log.push_back((long long)(size_t)p);
}
inline void emu_note_store(const void* p, long writer) {
    std::lock_guard<std::mutex> l(emu_sm);
    auto it = emu_shadow.find(p);
    if (it != emu_shadow.end() && it->second.epoch == emu_epoch && it->second.writer != writer &&
        !(writer == EMU_ATOMIC && it->second.writer == EMU_ATOMIC))
        emu_report(1, emu_epoch, p);
    emu_shadow[p] = EmuShadow{writer, emu_epoch};
}
inline void emu_store(unsigned int* p, unsigned int v) {
    emu_maybe_yield();
    emu_note_store(p, emu_tid);
    __atomic_store_n(p, v, __ATOMIC_RELAXED);
}
// the loads of this epoch against the stores of this epoch (call when every store of the epoch is done)
inline void emu_check_reads() {
    std::lock_guard<std::mutex> l(emu_sm);
    for (const void* p : emu_reads) {
        auto it = emu_shadow.find(p);
        if (it != emu_shadow.end() && it->second.epoch == emu_epoch && it->second.writer != emu_tid)
            emu_report(0, emu_epoch, p);
    }
    emu_reads.clear();
}
inline unsigned int __ldcg(const unsigned int* p) {
    emu_maybe_yield();
    emu_reads.push_back(p);
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}
inline unsigned int emu_plain_load(const unsigned int* p) {  // a load L1 may serve
    emu_maybe_yield();
    emu_reads.push_back(p);
    {
        std::lock_guard<std::mutex> l(emu_sm);
        auto it = emu_shadow.find(p);
        if (it != emu_shadow.end() && it->second.epoch < emu_epoch &&
            (it->second.writer == EMU_ATOMIC || it->second.writer / (long)blockDim.x != (long)blockIdx.x))
            emu_report(2, emu_epoch, p);
    }
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}
inline unsigned int atomicAdd(unsigned int* p, unsigned int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __nanosleep(unsigned) { std::this_thread::yield(); }
inline unsigned int atomicMin(unsigned int* p, unsigned int v) {
    emu_note_store(p, EMU_ATOMIC);
    unsigned int old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while (v < old && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {}
    return old;
}
"""

# after gpuroute_common.cuh's grid_barrier, before the kernels: the kernels' grid barrier, checked
HOOK = r"""
inline void emu_grid_barrier(unsigned int* bar) {
    grid_barrier(bar);  // every store of this epoch is done
    emu_check_reads();
    grid_barrier(bar);  // every check is done before the next epoch stores
    ++emu_epoch;
}
"""

RUNTIME = r"""
static unsigned long long emu_seed = 1;
static std::vector<std::tuple<long, int, std::vector<const void*>>> finals;
extern "C" void emu_set(unsigned long long seed, int yield_per_256) { emu_seed = seed; emu_yield_per_256 = yield_per_256; }
extern "C" long long emu_log_size() { return (long long)emu_log.size(); }
extern "C" void emu_log_take(long long* out) {
    std::copy(emu_log.begin(), emu_log.end(), out);
    emu_log.clear();
}

// every thread of every block at once, the blocks started in a random order
static void emu_launch(unsigned gx, unsigned gy, unsigned bx, const std::function<void()>& f) {
    if (gy != 1) { std::fprintf(stderr, "emu: 1-D grids only\n"); std::abort(); }
    gridDim = {gx, 1, 1};
    blockDim = {bx, 1, 1};
    emu_shadow.clear();  // a launch boundary orders everything
    std::vector<EmuBlock> blocks(gx);
    for (auto& b : blocks) {
        b.bar.n = (int)bx;
        b.warps = std::vector<EmuBarrier>((bx + 31) / 32);
        for (auto& w : b.warps) w.n = 32;
        b.xbuf.assign(((bx + 31) / 32) * 32, 0);
    }
    std::vector<unsigned> order(gx);
    for (unsigned i = 0; i < gx; ++i) order[i] = i;
    unsigned long long r = emu_seed * 0x9E3779B97F4A7C15ull + 1;
    for (unsigned i = gx; i > 1; --i) {
        r ^= r << 13; r ^= r >> 7; r ^= r << 17;
        std::swap(order[i - 1], order[r % i]);
    }
    emu_seed += 1;
    std::vector<std::thread> ts;
    ts.reserve((size_t)gx * bx);
    std::mutex fm;
    for (unsigned bi : order)
        for (unsigned t = 0; t < bx; ++t)
            ts.emplace_back([&, bi, t] {
                threadIdx = {t, 0, 0};
                blockIdx = {bi, 0, 0};
                emu_blk = &blocks[bi];
                emu_tid = (long)bi * bx + t;
                emu_epoch = 0;
                emu_rng = (emu_seed << 20) ^ (unsigned long long)(emu_tid * 2654435761ull + 7);
                emu_reads.clear();
                f();
                std::lock_guard<std::mutex> l(fm);  // the last epoch's loads, checked once every thread is done
                finals.emplace_back(emu_tid, emu_epoch, std::move(emu_reads));
            });
    for (auto& th : ts) th.join();
    for (auto& [tid, ep, reads] : finals) {
        emu_tid = tid; emu_epoch = ep; emu_reads = std::move(reads);
        emu_check_reads();
    }
    finals.clear();
}
"""

def _emu():
    spec = importlib.util.spec_from_file_location("_emu_cuda_emu_races",
                                                  Path(__file__).parents[1] / "tours" / "cuda_emu.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _source(mutation=None):
    """rphast.cu for the concurrent emulator: the grid barrier of gpuroute_common.cuh as written, each grid
    barrier of the kernel checked, the stores to ``d`` and its plain loads instrumented, ``__shared__`` per block."""
    from gpuroute.backend import kernels

    header = Path(kernels.COMMON_HEADER).read_text()
    barrier = re.search(r"__device__ __forceinline__ void grid_barrier\(.*?\n}\n", header, re.S).group(0)
    src = (Path(gpuroute.__file__).parent / "ch" / "rphast.cu").read_text()
    src = src.replace('#include "gpuroute_common.cuh"', "")
    src = src.replace("#define RPH_STAGE 512", "#define RPH_STAGE 3")  # the staging loop runs several rounds
    if mutation == "no barrier after the upward pass":
        cut = "rph_up_core(up, k, cb, csel, D, d, ovf, s_rid, s_dist, es, ns, (int)blockIdx.x, (int)gridDim.x);\n" \
              "    grid_barrier(bar);\n"
        assert src.count(cut) == 1
        src = src.replace(cut, cut.replace("    grid_barrier(bar);\n", ""))
    elif mutation == "levels read through L1":
        assert src.count("rph_level_items<true>") == 1
        src = src.replace("rph_level_items<true>", "rph_level_items<false>")
    n_barriers = src.count("grid_barrier(bar);")
    src = src.replace("grid_barrier(bar);", "emu_grid_barrier(bar);")
    assert n_barriers == (2 if mutation == "no barrier after the upward pass" else 3)
    src, n_shared = re.subn(r"__shared__\s+((?:unsigned\s+)?\w+)\s+(\w+)\[(\w+)\];",
                            r"\1* \2 = emu_shared<\1>(__LINE__, \3);", src)
    lines, n_stores = src.split("\n"), 0
    for i, line in enumerate(lines):
        if not line.lstrip().startswith("//"):
            lines[i], c = re.subn(r"\bd\[([^\]]+)\] = ([^;]+);", r"emu_store(&d[\1], \2);", line)
            n_stores += c
    src = "\n".join(lines)
    assert n_shared == 6 and n_stores == 3, (n_shared, n_stores)  # the rewrites found what they rewrite
    plain = "    return *p;\n}"
    assert src.count(plain) == 1
    src = src.replace(plain, "    return emu_plain_load(p);\n}")
    return src, barrier


def build(mutation=None):
    """Compile the instrumented kernels; returns (ctypes.CDLL, {kernel: n_params}) (cached by content)."""
    emu = _emu()
    src, barrier = _source(mutation)
    wrappers = []
    kernels = {}
    for name, params in emu._KERNEL.findall(src):
        names, count = emu._param_names(params, {})
        kernels[name] = count
        wrappers.append(f'extern "C" void emu_{name}(unsigned gx, unsigned gy, unsigned bx, {params}) '
                        f'{{ emu_launch(gx, gy, bx, [=] {{ {name}({", ".join(names)}); }}); }}')
    text = "#include <tuple>\n" + SHIM + barrier + HOOK + src + RUNTIME + "\n".join(wrappers) + "\n"
    key = hashlib.sha256(text.encode()).hexdigest()[:16]
    d = Path(tempfile.gettempdir()) / "gpuroute_cuda_emu"
    d.mkdir(exist_ok=True)
    so = d / f"rphast_races_{key}.so"
    if not so.exists():
        cpp = so.with_suffix(".cpp")
        cpp.write_text(text)
        tmp = so.with_suffix(".tmp.so")
        r = subprocess.run(["g++", "-std=c++20", "-O1", "-pthread", "-shared", "-fPIC", "-w", "-o", str(tmp), str(cpp)],
                           capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(f"g++ failed:\n{r.stderr[-4000:]}")
        tmp.rename(so)
    return ctypes.CDLL(str(so)), kernels, emu


class Recorder:
    """What the launches reported: ``launches``, one ``(kernel, args, [(kind, epoch, word of d)])`` a launch run
    (kind 0 race, 1 store/store race, 2 L1 hazard)."""

    def __init__(self):
        self.launches = []


def make_module(lib, kernels, emu, rec):
    src, _ = _source()
    d_pos = {}
    for name, params in emu._KERNEL.findall(src):
        names, _ = emu._param_names(params, {})
        d_pos[name] = names.index("d") if "d" in names else None
    lib.emu_log_take.argtypes = [ctypes.c_void_p]
    lib.emu_log_size.restype = ctypes.c_longlong

    class Kernel(emu.FakeKernel):
        def __call__(self, grid, block, args):
            inner = emu.FakeKernel(lib, self.name, self.n_params)
            pos = d_pos[self.name]
            base = args[pos].ctypes.data if pos is not None else None
            name = self.name

            def collect():
                n = int(lib.emu_log_size())
                buf = np.zeros(max(n, 1), dtype=np.int64)
                lib.emu_log_take(buf.ctypes.data)
                trip = buf[:n].reshape(-1, 3)
                found = [(int(k_), int(e), (int(a) - base) // 4 if base is not None else -1) for k_, e, a in trip]
                rec.launches.append((name, args, found))

            cap = emu._Capture.launches
            if cap is not None:  # captured: run, then collect, at each replay
                inner(grid, block, args)
                run = cap.pop()
                cap.append(lambda: (run(), collect()))
            else:
                inner(grid, block, args)
                collect()

    class Module(emu.FakeModule):
        def get_function(self, name):
            return Kernel(self.lib, name, self.kernels[name])

    return Module(lib, kernels)


@pytest.fixture
def concurrent(monkeypatch):
    """The launcher on the concurrent emulator: ``use(mutation=None, seed=1, yields=32)`` (re)builds the kernels
    (a mutation of them, the blocks' start order seeded, ``yields`` of 256 accesses to ``d`` yielding the thread),
    installs them behind cuda_emu's CuPy and returns the :class:`Recorder` of the launches from then on."""
    import gpuroute.backend.kernels as kmod

    state = {}

    def use(mutation=None, seed=1, yields=32):
        lib, kernels, emu = build(mutation)
        lib.emu_set(ctypes.c_ulonglong(seed), ctypes.c_int(yields))
        state["rec"] = Recorder()
        state["mod"] = make_module(lib, kernels, emu, state["rec"])
        if "emu" not in state:
            state["emu"] = emu
            emu.install(monkeypatch, sms=2)
            cp = sys.modules["cupy"]
            cp.uint32 = np.uint32
            monkeypatch.setattr(cp.cuda.Device, "synchronize", lambda self: None, raising=False)
            monkeypatch.setattr(kmod, "load_module", lambda relpath, options=(), cooperative=False: state["mod"])
            monkeypatch.setattr(kmod, "resident_blocks", lambda kernel, threads, dynamic_smem=0, cap=32: 8)
        return state["rec"]

    monkeypatch.setattr(config, "CH_RPHAST_CORE_SLICE", 4)
    return use


def _case(seed, n=45, core_from=None):
    rng = np.random.default_rng(seed)
    g, _ = random_road_graph(rng, n)
    h = naive_ch(g, order=rng.permutation(n), core_from=core_from)
    return g, ContractionHierarchy(h, graph=g, weight=g.default_weight)


def _same_phase_arcs(ds):
    """Whether a merged phase has an arc between two of its own nodes."""
    fo, tl = ds.fo_host, np.asarray(ds.tl)
    for lo, hi in ds.levels:
        tails = tl[fo[lo]:fo[hi]]
        if np.any((tails >= lo) & (tails < hi)):
            return True
    return False


def _bad(rec, ds, k):
    """The reports no rule allows: every L1 hazard and store/store race; a load/store race unless it is a merged
    phase's load of a node of its own phase (the persistent pass: epoch 2 + phase; a level launch: its own
    [lo, hi))."""
    plan = ds.plan(k)
    bad = []
    for name, args, found in rec.launches:
        for kind, epoch, word in found:
            rid = word // k if word >= 0 else -1
            if kind == 0 and name.startswith("rph_pass") and 2 <= epoch < 2 + len(plan):
                lo, hi, _ = plan[epoch - 2]
                if ds.merge > 1 and lo <= rid < hi:
                    continue
            if kind == 0 and name == "rph_level" and ds.merge > 1 and int(args[0]) <= rid < int(args[1]):
                continue
            bad.append((name, ("race", "store/store race", "L1 hazard")[kind], epoch, rid))
    return bad


@pytest.mark.parametrize("core_from, merge, lanes, tpb, blocks, seed", [
    (None, 1, 32, 32, 3, 0), (None, 3, 4, 32, 3, 1), (30, 2, 32, 64, 2, 2), (30, 4, 8, 32, 5, 3),
    (0, 3, 32, 32, 4, 4), (None, 8, 2, 64, 3, 5)])
def test_persistent_pass_concurrent_blocks_race_free(concurrent, monkeypatch, core_from, merge, lanes, tpb, blocks,
                                                     seed):
    """The persistent pass with several blocks at once (sources 1 and 2, upward from the host and from the labels):
    equal to Dijkstra for every interleaving tried, and its only races are the merged phases' benign ones."""
    from gpuroute.ch import rphast_gpu

    monkeypatch.setattr(config, "CH_RPHAST_THREADS", tpb)
    monkeypatch.setattr(config, "CH_RPHAST_MERGE_LEVELS", merge)
    monkeypatch.setattr(config, "CH_RPHAST_MAX_LANES", lanes)
    monkeypatch.setattr(config, "CH_RPHAST_PERSISTENT_MAX_K", 2)
    # exactly this grid, even where the widest phase needs fewer blocks (their threads then stride over nothing)
    monkeypatch.setattr(rphast_gpu.DeviceSelection, "persistent_blocks", lambda self, k, kernel, ns=1: blocks)
    g, ch = _case(seed, core_from=core_from)
    n = g.n_nodes
    D = scipy_dijkstra(g, np.arange(n))
    rng = np.random.default_rng(seed)
    T = rng.integers(0, n, 12)
    sel = select_targets(ch.h, T)
    lab = ch.hub_labels()
    for rep in range(3):
        rec = concurrent(seed=10 * seed + rep)
        sel._device.pop("gpu", None)
        ds = rphast_gpu.device_selection(sel)
        S = rng.integers(0, n, 1 + rep % 2)
        upward = "labels" if rep == 2 else "search"
        gl = None
        if upward == "labels":  # the labels "on the device" (cuda_emu's CuPy), as GPUHubLabels holds them
            cp = sys.modules["cupy"]
            gl = SimpleNamespace(node=cp.asarray(np.ascontiguousarray(lab.node, dtype=np.int64).ravel()),
                                 hub=cp.asarray(lab.hub), dist=cp.asarray(lab.dist))
        got = rphast_gpu.rphast_gpu(ch.h, sel, S, upward=upward, gpu_labels=gl)
        np.testing.assert_array_equal(got, D[S][:, T])
        np.testing.assert_array_equal(got, rphast_cpu(ch.h, sel, S))
        assert ds.persistent(S.size, ds.kind) and ds.last_blocks == blocks
        assert [x[0] for x in rec.launches] == [f"rph_pass_{'labels' if upward == 'labels' else 'entries'}"]
        assert _bad(rec, ds, S.size) == []
        if merge == 1:
            assert all(found == [] for _, _, found in rec.launches)
        elif _same_phase_arcs(ds):  # the benign race is there, and seen (the check is not blind to it)
            assert sum(len(found) for _, _, found in rec.launches) > 0


@pytest.mark.parametrize("merge", [1, 3])
def test_graph_pass_concurrent_blocks_race_free(concurrent, monkeypatch, merge):
    """The captured graph (a launch per phase) with its blocks at once: exact, only the benign races."""
    from gpuroute.ch import rphast_gpu

    monkeypatch.setattr(config, "CH_RPHAST_THREADS", 32)
    monkeypatch.setattr(config, "CH_RPHAST_MERGE_LEVELS", merge)
    monkeypatch.setattr(config, "CH_RPHAST_PERSISTENT_MAX_K", 0)
    g, ch = _case(7, core_from=35)
    n = g.n_nodes
    D = scipy_dijkstra(g, np.arange(n))
    T = np.arange(0, n, 4)
    sel = select_targets(ch.h, T)
    rec = concurrent(seed=merge)
    S = np.array([1, 20, 33])
    np.testing.assert_array_equal(rphast_gpu.rphast_gpu(ch.h, sel, S, upward="search"), D[S][:, T])
    ds = rphast_gpu.device_selection(sel)
    assert {"rph_level", "rph_out", "rph_fill_rows"} <= {x[0] for x in rec.launches}
    assert _bad(rec, ds, S.size) == []


@pytest.mark.parametrize("mutation, kind", [("no barrier after the upward pass", "race"),
                                            ("levels read through L1", "L1 hazard")])
def test_the_check_catches_a_broken_persistent_pass(concurrent, monkeypatch, mutation, kind):
    """The check is not vacuous: the persistent pass without the grid barrier between the upward pass and the
    first phase races; reading earlier phases' distances through L1 is a hazard."""
    from gpuroute.ch import rphast_gpu

    monkeypatch.setattr(config, "CH_RPHAST_THREADS", 32)
    monkeypatch.setattr(config, "CH_RPHAST_MERGE_LEVELS", 1)
    monkeypatch.setattr(config, "CH_RPHAST_PERSISTENT_MAX_K", 2)
    monkeypatch.setattr(rphast_gpu.DeviceSelection, "persistent_blocks", lambda self, k, kernel, ns=1: 3)
    g, ch = _case(11, core_from=30)
    n = g.n_nodes
    sel = select_targets(ch.h, np.arange(n))
    rec = concurrent(mutation=mutation, seed=3)
    S = np.array([5, 17])
    rphast_gpu.rphast_gpu(ch.h, sel, S, upward="search")
    ds = rphast_gpu.device_selection(sel)
    assert ds.last_blocks == 3
    assert any(b[1] == kind for b in _bad(rec, ds, S.size))
