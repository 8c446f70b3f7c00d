"""Exact tours of a few stops: Held–Karp dynamic programming over subsets (:func:`tsp_exact`).

Held, Karp, "A dynamic programming approach to sequencing problems", J. SIAM 10(1), 1962; Bellman, "Dynamic
programming treatment of the travelling salesman problem", J. ACM 9(1), 1962. ``O(2^n n^2)`` time and
``O(2^n n)`` memory: at 10 stops ~0.1 ms, at 12 ~0.6 ms, at 16 ~20 ms in numba on one core, so it is the
answer for OSRM-sized trips (``osrm-routed`` brute-forces up to 10 coordinates) where the iterated local
search of :func:`gpuroute.tours.tsp` would spend its whole time limit. :class:`gpuroute.engine.Engine`'s
``trip`` takes it up to ``config.TOUR_EXACT_MAX_N`` stops.

The table is built from the end of the tour backwards (``g[S, j]``: the cheapest way to leave stop ``j``,
visit exactly the set ``S`` and finish), so the order is read forwards and, of the optimal orders, the
lexicographically smallest comes out (the lowest stop index first at every position). Unreachable legs
(``inf``) are counted apart from the finite cost: the DP minimises (number of unreachable legs, cost), so a
tour that avoids them all is returned whenever one exists, and otherwise the order with the fewest
(cheapest among those), with ``cost = inf``.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .api import TourResult, check_stop_id, tour_cost

__all__ = ["tsp_exact", "MAX_N"]

#: most stops :func:`tsp_exact` takes (2^16 x 16 states: ~18 MB of table, ~20 ms)
MAX_N = 16
#: unreachable-leg count of a state whose constraints cannot be met (a fixed last stop not last)
_IMPOSSIBLE = np.int64(1) << np.int64(40)


@njit(cache=True)
def _held_karp(C, bad, first, last, close_first, close_top):
    """Held–Karp over the subsets of ``n`` stops, read forwards.

    C : float64 (n, n), the finite costs (0 where ``bad``); bad : bool (n, n), unreachable legs.
    first, last : the fixed first / last stop, or -1 (free). close_first : add the return leg
    ``last visited -> first`` (a closed tour with a fixed first stop). close_top : add the return leg
    ``last -> first`` once the first stop is chosen (a closed tour with a free first stop; ``last`` fixed).
    Returns (order int64 (n,), unreachable legs, finite cost); ties go to the lowest stop index.
    """
    n = C.shape[0]
    full = (1 << n) - 1
    gc = np.empty((full + 1, n), np.int64)
    gw = np.empty((full + 1, n), np.float64)
    nx = np.full((full + 1, n), -1, np.int8)
    for j in range(n):
        gw[0, j] = 0.0
        gc[0, j] = 0
        if last >= 0 and j != last:
            gc[0, j] = _IMPOSSIBLE
        elif close_first and j != first:
            gc[0, j] = np.int64(bad[j, first])
            gw[0, j] = C[j, first]
    rest = full ^ (1 << first) if first >= 0 else full  # a fixed first stop is never in S ...
    for S in range(1, full + 1):
        if first >= 0 and (S >> first) & 1:
            continue
        for j in range(n):
            if (S >> j) & 1 or (j == first and S != rest):  # ... and leaves only the whole rest
                continue
            bc = _IMPOSSIBLE * 4
            bw = np.inf
            bk = -1
            for k in range(n):
                if not (S >> k) & 1:
                    continue
                R = S ^ (1 << k)
                c = gc[R, k] + np.int64(bad[j, k])
                w = gw[R, k] + C[j, k]
                if c < bc or (c == bc and w < bw):
                    bc, bw, bk = c, w, k
            gc[S, j] = bc
            gw[S, j] = bw
            nx[S, j] = bk
    bc = _IMPOSSIBLE * 4
    bw = np.inf
    bf = -1
    for f in range(n):
        if first >= 0 and f != first:
            continue
        c = gc[full ^ (1 << f), f]
        w = gw[full ^ (1 << f), f]
        if close_top and f != last:
            c += np.int64(bad[last, f])
            w += C[last, f]
        if c < bc or (c == bc and w < bw):
            bc, bw, bf = c, w, f
    order = np.empty(n, np.int64)
    order[0] = bf
    S = full ^ (1 << bf)
    j = bf
    for i in range(1, n):
        k = np.int64(nx[S, j])
        order[i] = k
        S ^= 1 << k
        j = k
    return order, bc, bw


def tsp_exact(costs, *, start=None, end=None, roundtrip=None):
    """Optimal closed tour or open path through every stop of an asymmetric cost matrix (Held–Karp).

    The exact twin of :func:`gpuroute.tours.tsp` for a few stops (same ``start``/``end`` conventions, same
    :class:`~gpuroute.tours.TourResult`), plus ``roundtrip`` for OSRM's ``/trip`` combinations and
    unreachable legs. ``O(2^n n^2)`` time (module documentation); no time limit.

    Parameters
    ----------
    costs : array_like, (n, n), integer or float, 1 <= n <= :data:`MAX_N`
        ``costs[u, v]``: the cost (seconds, metres, ...) of going from stop u to stop v; ``+inf`` marks an
        unreachable leg; any other value must be finite (negative costs are allowed). The diagonal is
        ignored. Need not be symmetric.
    start, end : int or None
        The fixed first / last stop of the visiting order (None: free).
    roundtrip : bool or None
        None (default): :func:`~gpuroute.tours.tsp`'s rule: a closed tour when ``start`` and ``end`` are
        both None or equal, else an open path. True: a closed tour (the return leg ``tour[-1] -> tour[0]``
        is part of the cost) starting at ``start`` (None: stop 0 when ``end`` is None too, else free) and
        visiting ``end`` last before it returns (``start == end``: a closed tour from ``start``). False: an
        open path from ``start`` to ``end``, each end free when None (``start == end`` needs n = 1).

    Returns
    -------
    TourResult
        ``tour`` int64 (n,) in visiting order; ``cost`` recomputed from ``costs`` (an ``int`` for an
        integer matrix; ``inf`` when the tour has an unreachable leg); ``closed``; ``trace`` empty;
        ``device`` "cpu"; ``stats``: n, exact (True), unreachable_legs. Of the optimal orders, the
        lexicographically smallest is returned (ties: equal float64 sums, accumulated from the end of the
        order). When every order needs an unreachable leg, ``cost`` is ``inf`` and ``tour`` is an order
        with the fewest unreachable legs, the cheapest of those by its finite legs.

    Raises
    ------
    ValueError
        Not a square matrix, no stop or more than :data:`MAX_N`; a NaN or ``-inf`` entry (named);
        ``start``/``end`` out of range; ``roundtrip=False`` with ``start == end`` and n > 1.
    TypeError
        A non-numeric matrix, non-integer stop ids or a ``roundtrip`` that is not a bool or None.
    """
    c = np.asarray(costs)
    if c.ndim != 2 or c.shape[0] != c.shape[1]:
        raise ValueError(f"costs must be a square (n, n) matrix, got shape {c.shape}")
    n = c.shape[0]
    if n < 1:
        raise ValueError("costs must have at least one stop (n >= 1)")
    if n > MAX_N:
        raise ValueError(f"tsp_exact takes at most {MAX_N} stops (2^n n^2 work), got {n}: use tsp")
    if c.dtype == np.bool_ or not (np.issubdtype(c.dtype, np.integer) or np.issubdtype(c.dtype, np.floating)):
        raise TypeError(f"costs must be an integer or float matrix, got dtype {c.dtype}")
    C = c.astype(np.float64)
    bad_entry = np.isnan(C) | (C == -np.inf)
    np.fill_diagonal(bad_entry, False)
    if bad_entry.any():
        u, v = np.argwhere(bad_entry)[0]
        raise ValueError(f"costs[{u}, {v}] = {c[u, v]}: a cost must be finite or +inf (unreachable)")
    start = check_stop_id("start", start, n)
    end = check_stop_id("end", end, n)
    if roundtrip is not None and not isinstance(roundtrip, (bool, np.bool_)):
        raise TypeError(f"roundtrip must be True, False or None, got {roundtrip!r}")
    if roundtrip is None:
        closed = (start is None and end is None) or (start is not None and start == end)
    else:
        closed = bool(roundtrip)
    if not closed and start is not None and start == end and n > 1:
        raise ValueError(f"an open path cannot start and end at the same stop (start = end = {start}) "
                         f"with {n} stops")
    first = -1 if start is None else start
    last = -1 if end is None else end
    if closed and first < 0 and last < 0:
        first = 0  # tsp's convention: a closed tour starts at stop 0
    if closed and first >= 0 and last == first:
        last = -1  # a closed tour from ``start``
    bad = ~np.isfinite(C)
    np.fill_diagonal(bad, False)
    C = np.where(bad, 0.0, C)
    np.fill_diagonal(C, 0.0)
    order, n_bad, _ = _held_karp(C, bad, first, last, closed and first >= 0, closed and first < 0)
    n_bad = int(n_bad)
    if n_bad >= int(_IMPOSSIBLE) or sorted(order.tolist()) != list(range(n)):  # pragma: no cover
        raise RuntimeError(f"Held-Karp found no order for first={first}, last={last}, closed={closed}")
    cost = tour_cost(c, order, closed)
    if n_bad:
        cost = float("inf")
    return TourResult(tour=order, cost=cost, closed=closed, trace=[], device="cpu",
                      stats={"n": n, "exact": True, "unreachable_legs": n_bad})
