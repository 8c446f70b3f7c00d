"""Loading the package's CUDA C++ kernels with ``cupy.RawModule``, with one shared include.

Every ``.cu`` file of gpuroute starts with ``#include "gpuroute_common.cuh"`` (flag layout, the
distance sentinel, saturating add, warp-aggregated queue push, device clock, grid barrier). On the GPU
machine :func:`load_module` inlines that header into the source before NVRTC sees it (so CuPy's
compile cache, keyed by source text, is invalidated when the header changes); CI's nvcc check compiles
each file with ``-I src/gpuroute/backend``.
"""
from __future__ import annotations

import functools
import os

from . import GPUUnavailableError, probe_gpu

#: The package root: ``.cu`` paths are relative to it (e.g. ``"sssp/buckets/near_far.cu"``).
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: The shared header.
COMMON_HEADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpuroute_common.cuh")
_INCLUDE = '#include "gpuroute_common.cuh"'


def kernel_source(relpath: str) -> str:
    """The source of a package ``.cu`` file with the shared header inlined.

    Raises
    ------
    FileNotFoundError
        No such kernel file.
    """
    path = os.path.join(PACKAGE_DIR, relpath)
    with open(path) as f:
        code = f.read()
    if _INCLUDE in code:
        with open(COMMON_HEADER) as f:
            header = f.read().replace("#pragma once\n", "")
        code = code.replace(_INCLUDE, header, 1)
    return code


@functools.lru_cache(maxsize=None)
def load_module(relpath: str, options: tuple = (), cooperative: bool = False):
    """Compile (once per process) a ``.cu`` file of the package with ``cupy.RawModule``.

    Parameters
    ----------
    relpath : str
        Path relative to the package root, e.g. ``"sssp/bellman_ford/fused.cu"``.
    options : tuple of str
        Extra NVRTC options (``-D`` defines).
    cooperative : bool
        Compile for cooperative launches (every block resident), as persistent kernels with a grid
        barrier need.

    Returns
    -------
    cupy.RawModule

    Raises
    ------
    GPUUnavailableError
        Without a usable GPU.
    """
    ok, why = probe_gpu()
    if not ok:
        raise GPUUnavailableError(why)
    import cupy

    return cupy.RawModule(code=kernel_source(relpath), options=("-std=c++17",) + tuple(options),
                          enable_cooperative_groups=cooperative)


def cooperative_function(relpath: str, name: str, options: tuple = ()):
    """A kernel compiled for cooperative launch, or ``(None, reason)`` where this CuPy/driver cannot.

    Returns
    -------
    (cupy.RawKernel or None, str)
        The kernel and ``""``, or None and why (the caller falls back to its non-persistent loop).
    """
    try:
        return load_module(relpath, options, cooperative=True).get_function(name), ""
    except Exception as e:  # no cooperative launch through this CuPy/driver
        return None, f"{type(e).__name__}: {e}"


def resident_blocks(kernel, threads: int, dynamic_smem: int = 0, cap: int = 32) -> int:
    """Blocks of ``threads`` threads of ``kernel`` one multiprocessor holds at once (registers, shared
    memory and threads), at most ``cap``: the grid of a cooperative launch may not exceed this times the
    number of multiprocessors."""
    import cupy

    dev = cupy.cuda.Device()
    regs = max(1, int(kernel.num_regs))
    warp_regs = -(-regs * 32 // 256) * 256
    by_regs = dev.attributes["MaxRegistersPerMultiprocessor"] // (warp_regs * (threads // 32))
    smem = dynamic_smem + int(kernel.shared_size_bytes) + 1024  # + the block's reserved shared memory
    by_smem = dev.attributes["MaxSharedMemoryPerMultiprocessor"] // smem
    by_threads = dev.attributes["MaxThreadsPerMultiProcessor"] // threads
    return max(0, min(by_regs, by_smem, by_threads, cap))


def multiprocessors() -> int:
    """Number of multiprocessors of the current device."""
    import cupy

    return int(cupy.cuda.Device().attributes["MultiProcessorCount"])
