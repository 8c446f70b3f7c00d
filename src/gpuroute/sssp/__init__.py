"""Single-source shortest paths without preprocessing: CPU Dijkstra and the GPU methods of "Accelerating
SSSP Algorithm on GPU with Adaptive Thread Creation" (Bellman-Ford family) and Ortega-Arranz et al., "A
New GPU-based Approach to the Shortest Path Problem" (settling family), near-far and cell-local
Bellman-Ford.

Layout: ``api.py`` (the public function, the registry, query objects), ``common.py`` (options records,
stats layout), ``dijkstra.py``, and one folder per family, each with ``options.py`` (one record used by
both twins), ``cpu.py`` (numba twin), ``gpu.py`` (CuPy launcher) and its ``.cu`` kernels:
``bellman_ford/`` (conventional, selection, adaptive), ``settle/`` (Martín, Crauser), ``buckets/``
(near-far, Δ-stepping), ``cell_bf/``.
"""
from .api import ALGORITHMS, DTYPES, SSSPQuery, SSSPResult, auto_algorithm, release, sssp, sssp_full
from .common import STATS_KEYS

__all__ = ["sssp", "sssp_full", "SSSPQuery", "SSSPResult", "ALGORITHMS", "DTYPES", "STATS_KEYS", "auto_algorithm",
           "release"]
