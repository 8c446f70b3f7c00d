"""Cell-local Bellman-Ford: a thread block per cell of close nodes runs to local convergence in shared
memory, boundary arcs relaxed into other cells. ``options.py`` (shared), ``cpu.py`` (numba), ``gpu.py``
(CuPy) with ``cell_bf.cu``; cells from :mod:`gpuroute.partition.cells`."""
