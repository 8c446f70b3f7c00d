"""``tsp_exact`` (Held–Karp) against brute force over every permutation (itertools), n = 1..8, for every
combination of roundtrip / fixed first stop / fixed last stop, on random asymmetric matrices with
unreachable (inf) legs: the same order (the lexicographically smallest optimal one: small integer costs
make many ties), the same number of unreachable legs, the same cost; bad input named."""
import itertools
import math

import numpy as np
import pytest

from gpuroute.tours import tour_cost
from gpuroute.tours.exact import MAX_N, tsp_exact


def brute(C, first, last, closed):
    """The lexicographically smallest order minimising (unreachable legs, finite cost), by enumeration:
    ``first``/``last`` fixed stops or None; ``closed`` adds the return leg. Returns (order, n_inf, cost)."""
    n = C.shape[0]
    P = np.array(list(itertools.permutations(range(n))), dtype=np.int64).reshape(-1, n)  # lexicographic
    keep = np.ones(len(P), bool)
    if first is not None:
        keep &= P[:, 0] == first
    if last is not None:
        keep &= P[:, -1] == last
    P = P[keep]
    legs = C[P[:, :-1], P[:, 1:]]
    if closed and n > 1:
        legs = np.concatenate([legs, C[P[:, -1], P[:, 0]][:, None]], axis=1)
    unreachable = np.isinf(legs)
    cnt = unreachable.sum(axis=1)
    fin = np.where(unreachable, 0.0, legs).sum(axis=1)
    i = np.lexsort((np.arange(len(P)), fin, cnt))[0]
    return P[i].tolist(), int(cnt[i]), float(fin[i])


def matrix(rng, n, p_inf, hi=6):
    """Small integer costs (exact float sums, many ties), each off-diagonal leg inf with probability p_inf;
    a random diagonal (ignored)."""
    C = rng.integers(0, hi, (n, n)).astype(np.float64)
    C[(rng.random((n, n)) < p_inf) & ~np.eye(n, dtype=bool)] = np.inf
    return C


def cases(n, rng):
    """(kwargs, first, last, closed) of every roundtrip / start / end combination."""
    s, e = (int(x) for x in rng.choice(n, 2, replace=n < 2))
    out = []
    for roundtrip in (True, False, None):
        for start in (None, s):
            for end in (None, e):
                if start is not None and end is not None and start == end and n > 1 and roundtrip is False:
                    continue  # refused (tested below)
                closed = roundtrip if roundtrip is not None else (
                    (start is None and end is None) or (start is not None and start == end))
                first, last = start, end
                if closed and first is None and last is None:
                    first = 0
                if closed and first is not None and first == last:
                    last = None
                out.append(({"start": start, "end": end, "roundtrip": roundtrip}, first, last, closed))
    if n > 1:  # start == end: a closed tour from there
        out.append(({"start": s, "end": s}, s, None, True))
        out.append(({"start": s, "end": s, "roundtrip": True}, s, None, True))
    return out


@pytest.mark.parametrize("n", range(1, 9))
@pytest.mark.parametrize("p_inf", [0.0, 0.25, 0.6])
def test_matches_brute_force(n, p_inf):
    rng = np.random.default_rng(1000 * n + int(100 * p_inf))
    for trial in range(2):
        C = matrix(rng, n, p_inf)
        for kw, first, last, closed in cases(n, rng):
            res = tsp_exact(C, **kw)
            want, n_inf, fin = brute(C, first, last, closed)
            where = f"n={n} trial={trial} {kw}\n{C}"
            assert res.tour.tolist() == want, where
            assert res.tour.dtype == np.int64 and res.closed == closed, where
            assert res.stats["unreachable_legs"] == n_inf, where
            if n_inf:
                assert res.cost == math.inf, where
            else:
                assert res.cost == fin == tour_cost(C, want, closed), where


@pytest.mark.parametrize("n", [5, 8])
def test_real_costs_match_brute_force(n):
    """Random real costs (no ties): the optimal cost, to rounding."""
    rng = np.random.default_rng(n)
    C = rng.random((n, n)) * 1000.0
    C[rng.random((n, n)) < 0.2] = np.inf
    for kw, first, last, closed in cases(n, rng):
        res = tsp_exact(C, **kw)
        want, n_inf, fin = brute(C, first, last, closed)
        assert res.stats["unreachable_legs"] == n_inf, kw
        got = np.where(np.isinf(C), 0.0, C)
        legs = list(zip(res.tour[:-1], res.tour[1:], strict=True)) + ([(res.tour[-1], res.tour[0])] if closed else [])
        assert sum(got[a, b] for a, b in legs) == pytest.approx(fin, rel=1e-12), kw


def test_avoids_unreachable_legs_when_a_tour_exists():
    """Only 0 -> 2 -> 1 -> 3 -> 0 avoids the inf legs; it costs far more than the legs it avoids."""
    n = 4
    C = np.full((n, n), np.inf)
    for a, b in ((0, 2), (2, 1), (1, 3), (3, 0)):
        C[a, b] = 1000.0
    C[0, 1] = C[2, 3] = 1.0  # cheap but leading into an inf leg
    res = tsp_exact(C)
    assert res.tour.tolist() == [0, 2, 1, 3] and res.cost == 4000.0 and res.stats["unreachable_legs"] == 0
    # no closed tour at all once 3 -> 0 goes: the order with one unreachable leg, cost inf
    C[3, 0] = np.inf
    res = tsp_exact(C)
    assert res.cost == math.inf and res.stats["unreachable_legs"] == 1
    # ... but the open path 0 -> 3 exists
    res = tsp_exact(C, start=0, end=3)
    assert res.tour.tolist() == [0, 2, 1, 3] and res.cost == 3000.0


def test_integer_matrix_and_conventions():
    C = np.array([[0, 5, 1, 9], [1, 0, 9, 2], [9, 1, 0, 9], [3, 9, 9, 0]], dtype=np.int32)
    res = tsp_exact(C)
    assert res.tour.tolist() == [0, 2, 1, 3] and res.cost == 1 + 1 + 2 + 3 and isinstance(res.cost, int)
    assert tsp_exact(C, start=3, end=3).tour.tolist() == [3, 0, 2, 1]  # tsp's rule: closed from 3
    assert tsp_exact(C, start=0).closed is False
    assert tsp_exact(np.zeros((1, 1)), roundtrip=False).tour.tolist() == [0]


def test_bad_input():
    with pytest.raises(ValueError, match="square"):
        tsp_exact(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="at least one"):
        tsp_exact(np.zeros((0, 0)))
    with pytest.raises(ValueError, match=f"at most {MAX_N}"):
        tsp_exact(np.zeros((MAX_N + 1, MAX_N + 1)))
    C = np.ones((3, 3))
    C[1, 2] = np.nan
    with pytest.raises(ValueError, match=r"costs\[1, 2\] = nan"):
        tsp_exact(C)
    C[1, 2] = -np.inf
    with pytest.raises(ValueError, match=r"costs\[1, 2\] = -inf"):
        tsp_exact(C)
    with pytest.raises(TypeError):
        tsp_exact(np.ones((3, 3), dtype=bool))
    with pytest.raises(ValueError, match="start=3 is out of range"):
        tsp_exact(np.ones((3, 3)), start=3)
    with pytest.raises(TypeError, match="roundtrip"):
        tsp_exact(np.ones((3, 3)), roundtrip="yes")
    with pytest.raises(ValueError, match="open path cannot start and end"):
        tsp_exact(np.ones((3, 3)), start=1, end=1, roundtrip=False)
