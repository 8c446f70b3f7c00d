"""The device flag words and sentinels shared by every GPU kernel, mirrored from
``gpuroute_common.cuh`` (``tests/backend/test_common_cuh.py`` checks that both agree).

Layout of ``flags`` (int32, :data:`N_FLAGS` words): see the header of ``gpuroute_common.cuh``.
"""
from __future__ import annotations

#: "Something changed" in the phase of parity 0 / 1 (the Adaptive Thread Creation paper's conventional loop).
FLAG_CHANGED0, FLAG_CHANGED1 = 0, 1
#: The loop is finished; every later kernel of a captured CUDA graph returns at once.
FLAG_DONE = 2
#: Phases (or rounds) run.
FLAG_PHASES = 3
#: 1: a distance overflowed the 32-bit device keys; 2: a persistent kernel hit its round bound.
FLAG_OVERFLOW = 4
#: Adaptive-by-count thread mapping of the next phase (selection kernels).
FLAG_MODE = 5
#: Near-far: parity of the far pile.
FLAG_FARPAR = 6
#: Words in ``flags``.
N_FLAGS = 8
#: Device distance of a node not reached (32-bit keys).
DINF = 0xFFFFFFFF
#: Entries of the per-phase statistics and timestamp buffers (phases beyond it are not recorded).
STATS_CAP = 1 << 20


def check_overflow(host_flags, limit="2^32 - 2"):
    """Raise for a set overflow flag (``host_flags``: the flag words read back to the host).

    Raises
    ------
    OverflowError
        ``FLAG_OVERFLOW == 1``: a tentative distance reached the device keys' limit ``limit``.
    RuntimeError
        ``FLAG_OVERFLOW == 2``: a persistent kernel hit its proven round bound (a bug).
    """
    v = int(host_flags[FLAG_OVERFLOW])
    if v == 1:
        raise OverflowError(f"a tentative distance exceeded {limit}, the limit of the GPU's 32-bit distances; "
                            "use device='cpu' (64-bit)")
    if v == 2:
        raise RuntimeError("a persistent GPU kernel hit its round bound (a bug: please report)")
