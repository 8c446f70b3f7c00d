"""Run gpuroute's CUDA kernels on the CPU, for tests on machines without a GPU.

The ``.cu`` file is compiled as C++ (g++, C++20) with a stand-in for ``gpuroute_common.cuh``: every CUDA
thread of a block is a ``std::thread``; ``__syncthreads`` is a barrier of the block, the warp shuffles
exchange through memory behind a barrier of the warp; ``__shared__`` variables are ``static`` (blocks run
one after another); ``%globaltimer`` is the host's steady clock. A barrier that waits more than 20 s
aborts (a divergent ``__syncthreads`` would hang a GPU). Each ``extern "C" __global__`` kernel gets a C
wrapper ``emu_<name>(grid x, grid y, block, args...)``.

:func:`fake_cupy` is a minimal CuPy on NumPy (arrays with ``get``/``set``, streams whose capture records
launches into a replayable graph, a RawModule whose kernels call the wrappers), so the package's own
launchers (gpuroute.tours.gpu, gpuroute.tours.vrp_gpu) run unchanged against the emulated kernels:
:func:`install` patches ``sys.modules["cupy"]``, the GPU probe and ``load_module``.

Not a timing model and not a memory model (no races are detected); it checks the kernels' logic:
indexing, barriers, reductions, what each kernel writes.
"""
from __future__ import annotations

import ctypes
import hashlib
import re
import shutil
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import numpy as np

SHIM = r"""
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>
#define __device__
#define __global__
#define __forceinline__ inline
#define __shared__ static
#define DINF 0xFFFFFFFFu
enum { F_CH0 = 0, F_CH1 = 1, F_DONE = 2, F_PHASES = 3, F_OVF = 4, F_MODE = 5, F_FARPAR = 6, N_FLAGS = 8 };
struct emu_dim { unsigned x, y, z; };
extern thread_local emu_dim threadIdx;
extern emu_dim blockIdx, blockDim, gridDim;

struct EmuBarrier {
    std::mutex m; std::condition_variable cv; int n = 0, count = 0; long gen = 0;
    void init(int k) { n = k; count = 0; gen = 0; }
    void wait() {
        std::unique_lock<std::mutex> l(m);
        const long g = gen;
        if (++count == n) { count = 0; ++gen; cv.notify_all(); return; }
        if (!cv.wait_for(l, std::chrono::seconds(20), [&] { return gen != g; })) {
            std::fprintf(stderr, "cuda_emu: a barrier waited 20 s (divergent __syncthreads?)\n");
            std::abort();
        }
    }
};
extern EmuBarrier* emu_block_bar;
extern std::vector<EmuBarrier>* emu_warp_bars;
extern std::vector<unsigned long long>* emu_xbuf;

inline void __syncthreads() { emu_block_bar->wait(); }
inline double __longlong_as_double(long long v) { double d; std::memcpy(&d, &v, 8); return d; }
inline unsigned long long gtimer() {
    return (unsigned long long)std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now().time_since_epoch()).count();
}
template <class T> inline T min(T a, T b) { return b < a ? b : a; }
template <class T> inline T max(T a, T b) { return a < b ? b : a; }
template <class T> inline T emu_shfl(T v, int src_lane) {
    const int t = threadIdx.x, w = t >> 5;
    unsigned long long raw = 0;
    std::memcpy(&raw, &v, sizeof(T));
    (*emu_xbuf)[t] = raw;
    (*emu_warp_bars)[w].wait();
    T o = v;
    if (src_lane >= 0 && src_lane < 32) std::memcpy(&o, &(*emu_xbuf)[w * 32 + src_lane], sizeof(T));
    (*emu_warp_bars)[w].wait();
    return o;
}
template <class T> inline T __shfl_down_sync(unsigned, T v, int off) {
    const int lane = threadIdx.x & 31;
    return emu_shfl(v, lane + off < 32 ? lane + off : lane);
}
template <class T> inline T __shfl_up_sync(unsigned, T v, int off) {
    const int lane = threadIdx.x & 31;
    return emu_shfl(v, lane - off >= 0 ? lane - off : lane);
}
template <class T> inline T __shfl_sync(unsigned, T v, int src) { return emu_shfl(v, src & 31); }
"""

RUNTIME = r"""
thread_local emu_dim threadIdx;
emu_dim blockIdx, blockDim, gridDim;
EmuBarrier* emu_block_bar;
std::vector<EmuBarrier>* emu_warp_bars;
std::vector<unsigned long long>* emu_xbuf;

static void emu_launch(unsigned gx, unsigned gy, unsigned bx, const std::function<void()>& f) {
    gridDim = {gx, gy, 1};
    blockDim = {bx, 1, 1};
    EmuBarrier bar;
    bar.init((int)bx);
    std::vector<EmuBarrier> warps((bx + 31) / 32);
    for (auto& w : warps) w.init(32);
    std::vector<unsigned long long> xbuf(((bx + 31) / 32) * 32);
    emu_block_bar = &bar;
    emu_warp_bars = &warps;
    emu_xbuf = &xbuf;
    // one thread per CUDA thread for the whole launch; the blocks run one after another
    std::vector<std::thread> ts;
    ts.reserve(bx);
    for (unsigned t = 0; t < bx; ++t)
        ts.emplace_back([&f, &bar, gx, gy, t] {
            threadIdx = {t, 0, 0};
            for (unsigned y = 0; y < gy; ++y)
                for (unsigned x = 0; x < gx; ++x) {
                    if (t == 0) blockIdx = {x, y, 0};
                    bar.wait();
                    f();
                    bar.wait();
                }
        });
    for (auto& th : ts) th.join();
}
"""

_KERNEL = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(\w+)\s*\(([^)]*)\)', re.S)


def _param_names(params, macros):
    """The argument names of a parameter list, and how many arguments it takes (a ``X_PARAMS`` macro
    stands for its own list, passed on as ``X_ARGS``)."""
    out = []
    count = 0
    for p in (x.strip() for x in params.split(",")):
        if not p:
            continue
        if p.endswith("_PARAMS"):
            out.append(p[:-len("_PARAMS")] + "_ARGS")
            count += macros[p]
        else:
            out.append(re.findall(r"\w+", p)[-1])
            count += 1
    return out, count


def build(cu_path):
    """Compile ``cu_path`` for the CPU; returns (ctypes.CDLL, {kernel: n_params}). Cached by content."""
    if shutil.which("g++") is None:
        raise RuntimeError("g++ not found")
    src = Path(cu_path).read_text()
    macros = {m: body.replace("\\\n", " ").count(",") + 1
              for m, body in re.findall(r"#define\s+(\w+_PARAMS)\s+((?:[^\n]*\\\n)*[^\n]*)", src)}
    wrappers = []
    kernels = {}
    for name, params in _KERNEL.findall(src):
        names, count = _param_names(params, macros)
        kernels[name] = count
        wrappers.append(f'extern "C" void emu_{name}(unsigned gx, unsigned gy, unsigned bx, {params}) '
                        f'{{ emu_launch(gx, gy, bx, [=] {{ {name}({", ".join(names)}); }}); }}')
    body = src.replace('#include "gpuroute_common.cuh"', SHIM.replace("#pragma once", ""), 1)
    text = body + "\n" + RUNTIME + "\n" + "\n".join(wrappers) + "\n"
    key = hashlib.sha256(text.encode()).hexdigest()[:16]
    d = Path(tempfile.gettempdir()) / "gpuroute_cuda_emu"
    d.mkdir(exist_ok=True)
    so = d / f"{Path(cu_path).stem}_{key}.so"
    if not so.exists():
        cpp = d / f"{Path(cu_path).stem}_{key}.cpp"
        cpp.write_text(text)
        tmp = so.with_suffix(".tmp.so")
        r = subprocess.run(["g++", "-std=c++20", "-O1", "-pthread", "-shared", "-fPIC", "-w", "-o", str(tmp), str(cpp)],
                           capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(f"g++ failed on {cu_path}:\n{r.stderr[-4000:]}")
        tmp.rename(so)
    return ctypes.CDLL(str(so)), kernels


# --------------------------------------------------------------------------------------- a CuPy on NumPy
# NumPy's conversions as they were at import (a test may wrap numpy's to log implicit device-to-host copies)
_NP_ARRAY, _NP_ASARRAY, _NP_ASCONTIGUOUSARRAY = np.array, np.asarray, np.ascontiguousarray

class FakeArray(np.ndarray):
    """A NumPy array with CuPy's ``get`` / ``set``; indexing one element gives a 0-d array, as CuPy's. Its
    type claims the module ``cupy`` so that gpuroute.backend.is_cupy_array takes it for a device array.
    :class:`Transfers` counts what its ``get`` copies to the host."""

    def __getitem__(self, key):
        r = super().__getitem__(key)
        return r if isinstance(r, np.ndarray) else _NP_ASARRAY(r).view(FakeArray)

    def get(self, stream=None, out=None):
        Transfers.log("get", self)
        if out is not None:
            out[...] = self
            return out
        return _NP_ARRAY(self)

    def set(self, a, stream=None):
        self[...] = a


FakeArray.__module__ = "cupy"


class Transfers:
    """Copies between the host and the emulated device, as ``(kind, shape, dtype)``: "get" (device to
    host), "asnumpy", "upload" (``cupy.asarray`` of a host array); tests add "implicit" (NumPy's
    asarray / array / ascontiguousarray on a device array, which real CuPy refuses). ``events`` is None
    unless a test starts a log (``Transfers.log_to([])``)."""

    events = None

    @classmethod
    def log_to(cls, events):
        cls.events = events

    @classmethod
    def log(cls, kind, a):
        if cls.events is not None:
            a = a if hasattr(a, "shape") else _NP_ASARRAY(a)
            cls.events.append((kind, tuple(a.shape), str(a.dtype)))


def _fa(a):
    return _NP_ASCONTIGUOUSARRAY(a).view(FakeArray)


def _wrap(fn):
    def f(*a, **k):
        r = fn(*a, **k)
        return r.view(FakeArray) if isinstance(r, np.ndarray) else r
    return f


class _Capture:
    launches = None  # a list while a stream captures


class FakeGraph:
    def __init__(self, launches):
        self.launches = launches

    def launch(self, stream=None):
        for fn in self.launches:
            fn()


class FakeStream:
    def __init__(self, non_blocking=False):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False

    def synchronize(self):
        pass

    def begin_capture(self):
        _Capture.launches = []

    def end_capture(self):
        g = FakeGraph(_Capture.launches)
        _Capture.launches = None
        return g


class FakeKernel:
    def __init__(self, lib, name, n_params):
        self.fn = getattr(lib, f"emu_{name}")
        self.name = name
        self.n_params = n_params

    def __call__(self, grid, block, args):
        if len(args) != self.n_params:
            raise TypeError(f"{self.name}: {len(args)} arguments for {self.n_params} parameters")
        conv = []
        keep = []
        for a in args:
            if isinstance(a, np.ndarray):
                if not a.flags.c_contiguous:
                    raise ValueError(f"{self.name}: a non-contiguous array argument")
                keep.append(a)
                conv.append(ctypes.c_void_p(a.ctypes.data))
            elif isinstance(a, np.int32):
                conv.append(ctypes.c_int32(int(a)))
            elif isinstance(a, np.uint64):
                conv.append(ctypes.c_uint64(int(a)))
            elif isinstance(a, np.float64):
                conv.append(ctypes.c_double(float(a)))
            else:
                raise TypeError(f"{self.name}: argument of type {type(a).__name__} (CuPy needs numpy scalars)")
        gx, gy = (grid + (1,))[:2] if isinstance(grid, tuple) else (grid, 1)
        bx = block[0] if isinstance(block, tuple) else block

        def run():
            self.fn(ctypes.c_uint(gx), ctypes.c_uint(gy), ctypes.c_uint(bx), *conv)

        if _Capture.launches is not None:
            _Capture.launches.append(run)
        else:
            run()


class FakeModule:
    def __init__(self, lib, kernels):
        self.lib, self.kernels = lib, kernels

    def get_function(self, name):
        return FakeKernel(self.lib, name, self.kernels[name])


def fake_cupy():
    """A module object standing in for ``cupy`` (the parts gpuroute.tours uses)."""
    cp = types.ModuleType("cupy")
    for t in ("int32", "int64", "float64", "uint64", "bool_", "float32"):
        setattr(cp, t, getattr(np, t))
    cp.ndarray = FakeArray

    def asarray(a, dtype=None):
        if isinstance(a, FakeArray) and (dtype is None or a.dtype == dtype):
            return a
        if not isinstance(a, FakeArray):
            Transfers.log("upload", a)
        return _fa(_NP_ARRAY(a, dtype=dtype, copy=True))

    def asnumpy(a):
        Transfers.log("asnumpy", a)
        return _NP_ARRAY(a)

    cp.asarray = asarray
    cp.asnumpy = asnumpy
    cp.inf = np.inf
    cp.empty = lambda shape, dtype=float: _fa(np.empty(shape, dtype))
    cp.arange = _wrap(np.arange)
    cp.minimum = _wrap(np.minimum)
    cp.isfinite = _wrap(np.isfinite)
    cp.argwhere = _wrap(np.argwhere)
    cp.roll = _wrap(np.roll)
    cp.where = _wrap(np.where)
    cp.fill_diagonal = np.fill_diagonal  # in place
    cp.argsort = _wrap(lambda a, axis=-1: np.argsort(a, axis=axis, kind="stable"))  # CuPy's sort is stable
    cp.ascontiguousarray = lambda a, dtype=None: _fa(_NP_ASCONTIGUOUSARRAY(a, dtype=dtype))
    cp.zeros = lambda shape, dtype=float: _fa(np.zeros(shape, dtype))
    cp.full = lambda shape, v, dtype=None: _fa(np.full(shape, v, dtype))
    cuda = types.SimpleNamespace()
    cuda.Stream = FakeStream
    cuda.get_current_stream = FakeStream

    class Device:
        mem_info = (8 << 30, 16 << 30)
        attributes = {"MultiProcessorCount": 2}

        def __init__(self, *a):
            pass

    cuda.Device = Device
    cuda.runtime = types.SimpleNamespace(getDeviceCount=lambda: 1)
    cp.cuda = cuda
    return cp


def install(monkeypatch, sms=2):
    """Patch the running process so gpuroute's GPU paths run on the emulated kernels: ``cupy`` is
    :func:`fake_cupy`, the GPU probe says yes, ``load_module`` compiles with :func:`build`."""
    import gpuroute.backend as backend
    import gpuroute.backend.kernels as kernels

    monkeypatch.setitem(sys.modules, "cupy", fake_cupy())
    monkeypatch.setattr(backend, "probe_gpu", lambda: (True, ""))
    cache = {}

    def load_module(relpath, options=(), cooperative=False):
        if relpath not in cache:
            cache[relpath] = FakeModule(*build(Path(kernels.PACKAGE_DIR) / relpath))
        return cache[relpath]

    monkeypatch.setattr(kernels, "load_module", load_module)
    monkeypatch.setattr(kernels, "multiprocessors", lambda: sms)
