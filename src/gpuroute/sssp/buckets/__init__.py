"""Bucket family: near-far (Davidson et al., IPDPS 2014; batched over many sources on the GPU) and
Δ-stepping (Meyer & Sanders 2003; CPU). ``options.py`` (shared), ``cpu.py`` (numba), ``gpu.py`` (CuPy)
with ``near_far.cu``."""
