"""The GPU plumbing every family shares, and device selection.

``device="auto"`` means the same everywhere in gpuroute: the GPU when CuPy and a CUDA device are
usable, else the CPU; a function whose chosen method has no GPU implementation runs it on the CPU
under ``"auto"`` and raises under ``"gpu"``. Results report the device that ran.

Modules
-------
kernels
    ``load_module`` (a package ``.cu`` file with the shared header ``gpuroute_common.cuh`` inlined),
    cooperative kernels with fallback, resident-block counts.
flags
    The device flag words and the 32-bit distance sentinel, mirrored from ``gpuroute_common.cuh``.
phase_loop
    ``PhaseGraph`` (CUDA graph of many phases, device-side termination) and ``run_phase_loop``
    (device-clock or event phase timing).
device_graph
    ``DeviceGraph``: a graph and one weight on the GPU, owned and released explicitly.
predecessors
    Canonical predecessors, int64 widening and source initialisation on the GPU.
solver
    ``GPUSolver``, the base of every GPU SSSP solver.

``import gpuroute`` never needs CuPy or CUDA: CuPy is imported lazily, and GPU entry points raise
:class:`GPUUnavailableError` with the reason when there is no usable GPU.
"""
from __future__ import annotations

import functools
import os

import numpy as np

DEVICES = ("auto", "cpu", "gpu")


class GPUUnavailableError(RuntimeError):
    """Raised when ``device="gpu"`` is asked for but CuPy or a CUDA GPU is not available."""


@functools.lru_cache(maxsize=1)
def probe_gpu():
    """Return (ok, reason). Cached: the answer does not change within a process."""
    if os.environ.get("GPUROUTE_DISABLE_GPU"):
        return False, "GPUROUTE_DISABLE_GPU is set"
    try:
        import cupy  # noqa: F401
    except Exception as e:  # ImportError, or a CUDA library that fails to load
        return False, f"CuPy is not importable ({type(e).__name__}: {e}); install gpuroute[gpu]"
    try:
        import cupy

        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:
        return False, f"no CUDA device ({type(e).__name__}: {e})"
    if n < 1:
        return False, "no CUDA device"
    return True, ""


def gpu_available() -> bool:
    """True when CuPy imports and at least one CUDA device is visible."""
    return probe_gpu()[0]


def resolve_device(device: str = "auto", gpu_implemented: bool = True) -> str:
    """Map ``"auto" | "cpu" | "gpu"`` to ``"cpu"`` or ``"gpu"``: ``"auto"`` is the GPU when one is
    usable and ``gpu_implemented`` (the chosen method has a GPU kernel), else the CPU.

    Raises
    ------
    ValueError
        For an unknown device string.
    GPUUnavailableError
        For ``"gpu"`` when no GPU is usable (the message says why).
    """
    if device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
    if device == "cpu":
        return "cpu"
    ok, why = probe_gpu()
    if device == "gpu":
        if not ok:
            raise GPUUnavailableError(f"device='gpu' was asked for but {why}")
        return "gpu"
    return "gpu" if ok and gpu_implemented else "cpu"


def get_array_module(x):
    """``cupy`` if ``x`` is a CuPy array, else ``numpy``."""
    if type(x).__module__.startswith("cupy"):
        import cupy

        return cupy
    return np


def is_cupy_array(x) -> bool:
    return type(x).__module__.startswith("cupy")


def to_numpy(x):
    """A NumPy copy of a NumPy or CuPy array."""
    if is_cupy_array(x):
        return x.get()
    return np.asarray(x)
