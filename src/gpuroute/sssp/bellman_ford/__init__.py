"""Bellman-Ford family (Nakajima et al., "GPU SSSP without preprocessing", Alg. 1-6): conventional
(Harish & Narayanan), selection, adaptive thread creation. ``options.py`` (shared), ``cpu.py`` (numba),
``gpu.py`` (CuPy) with ``conventional.cu``, ``selection.cu``, ``fused.cu``."""
