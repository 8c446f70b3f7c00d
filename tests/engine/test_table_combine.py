"""The table's phantom step (gpuroute.engine.table_combine): the numba twin against a plain loop over
every option pair, and the GPU kernel against the numba twin (``gpu`` marker), on random options with
unused slots, unreachable node pairs, same-arc pairs and ties."""
from __future__ import annotations

import math

import numpy as np
import pytest

from gpuroute.backend import gpu_available
from gpuroute.engine.table_combine import combine


def random_case(seed, S=7, T=9, ko=3, kt=4, U=5, V=6):
    rng = np.random.default_rng(seed)
    d = rng.integers(0, 20, (U, V)).astype(np.float64)
    d[rng.random((U, V)) < 0.2] = math.inf
    sa = rng.integers(0, 6, (S, ko))
    ta = rng.integers(0, 6, (T, kt))
    sa[rng.random((S, ko)) < 0.25] = -1
    ta[rng.random((T, kt)) < 0.25] = -1
    sf = rng.integers(0, 5, (S, ko)) / 4.0
    tf = rng.integers(0, 5, (T, kt)) / 4.0
    ws = rng.integers(1, 9, (S, ko)).astype(np.float64)
    sc = np.where(sa >= 0, rng.integers(0, 6, (S, ko)).astype(np.float64), math.inf)
    tc = np.where(ta >= 0, rng.integers(0, 6, (T, kt)).astype(np.float64), math.inf)
    si = rng.integers(0, U, (S, ko))
    ti = rng.integers(0, V, (T, kt))
    return d, si, ti, sc, tc, sa, ta, sf, tf, ws


def loop_oracle(d, si, ti, sc, tc, sa, ta, sf, tf, ws):
    S, T = sa.shape[0], ta.shape[0]
    out = np.full((S, T), math.inf)
    pick = {}
    for i in range(S):
        for j in range(T):
            for a in range(sa.shape[1]):
                for c in range(ta.shape[1]):
                    if sa[i, a] < 0 or ta[j, c] < 0:
                        continue
                    via = sc[i, a] + d[si[i, a], ti[j, c]] + tc[j, c]
                    same = (tf[j, c] - sf[i, a]) * ws[i, a] if sa[i, a] == ta[j, c] and sf[i, a] <= tf[j, c] else math.inf
                    v = min(via, same)
                    if v < out[i, j]:
                        out[i, j] = v
                        pick[i, j] = (a, c, same <= via)
    return out, pick


@pytest.mark.parametrize("seed", range(20))
def test_cpu_twin_equals_loop(seed):
    case = random_case(seed)
    best, so, to, sw = combine(*case)
    exp, pick = loop_oracle(*case)
    np.testing.assert_array_equal(best, exp)
    for (i, j), (a, c, s) in pick.items():
        assert (so[i, j], to[i, j], bool(sw[i, j])) == (a, c, s)


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")
@pytest.mark.parametrize("seed", range(10))
def test_gpu_equals_cpu_twin(seed):
    import cupy as cp

    case = random_case(seed, S=40, T=33, ko=4, kt=3, U=30, V=25)
    ref = combine(*case)
    got = combine(cp.asarray(case[0]), *case[1:])
    for r, g in zip(ref, got, strict=True):
        np.testing.assert_array_equal(g, r)
