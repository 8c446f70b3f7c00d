"""Device selection (``device="auto" | "cpu" | "gpu"``), array modules and the ``.cu`` loader.

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
def _probe_gpu():
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
    return _probe_gpu()[0]


def resolve_device(device: str = "auto") -> str:
    """Map ``"auto" | "cpu" | "gpu"`` to ``"cpu"`` or ``"gpu"``.

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
    ok, why = _probe_gpu()
    if device == "gpu":
        if not ok:
            raise GPUUnavailableError(f"device='gpu' was asked for but {why}")
        return "gpu"
    return "gpu" if ok else "cpu"


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


KERNEL_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@functools.lru_cache(maxsize=None)
def load_cuda_module(relpath: str, options: tuple = (), cooperative: bool = False):
    """Compile (once per process) a ``.cu`` file of the package with ``cupy.RawModule``.

    Parameters
    ----------
    relpath : str
        Path relative to the package root, e.g. ``"sssp/bellman_ford.cu"``.
    options : tuple of str
        Extra NVRTC options.
    cooperative : bool
        Compile for cooperative launches (``cuLaunchCooperativeKernel``: every block resident), as the
        persistent kernels with a grid-wide barrier need.

    Returns
    -------
    cupy.RawModule

    Raises
    ------
    GPUUnavailableError
        Without a usable GPU.
    """
    ok, why = _probe_gpu()
    if not ok:
        raise GPUUnavailableError(why)
    import cupy

    path = os.path.join(KERNEL_DIR, relpath)
    with open(path) as f:
        code = f.read()
    return cupy.RawModule(code=code, options=("-std=c++17",) + tuple(options),
                          enable_cooperative_groups=cooperative)
