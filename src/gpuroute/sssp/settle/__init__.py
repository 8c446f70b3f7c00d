"""Settling family (Ortega-Arranz et al., "A New GPU-based Approach to the Shortest Path Problem", sec.
IV): Martín et al., Crauser et al. general and economic. ``options.py`` (shared rule numbers),
``cpu.py`` (numba), ``gpu.py`` (CuPy) with ``settle.cu``."""
