"""Bellman-Ford family ("Accelerating SSSP Algorithm on GPU with Adaptive Thread Creation", Alg. 1-6):
conventional
(Harish & Narayanan), selection, adaptive thread creation. ``options.py`` (shared), ``cpu.py`` (numba),
``gpu.py`` (CuPy) with ``conventional.cu``, ``selection.cu``, ``fused.cu``."""
