"""Capacitated vehicle routing (CVRP) on an asymmetric cost matrix: best-improvement local search between
and within routes inside a ruin-and-recreate loop, CPU (numba) twin only.

The descent is the seed's scheme (Brodtkorb, Hagen, Schulz, Hasle, "GPU computing in discrete
optimization. Part I", EURO J. Transp. Logist. 2013): evaluate the whole neighbourhood
(:func:`best_vrp_move`, parallel over the first route), reduce to the best move, apply, until no move
improves. The start is Clarke-Wright savings (asymmetric form); the perturbation removes a customer and
its nearest customers and reinserts them by cheapest feasible insertion (ruin & recreate), accepted when
not worse, until the time limit.

State
-----
Routes live in a padded array ``E`` (int64 (R, W)): route ``r`` has ``lens[r]`` customers at
``E[r, 1..lens[r]]`` and the depot at ``E[r, 0]`` and ``E[r, lens[r] + 1]``. Routes ``0..nr-2`` are
non-empty and route ``nr - 1`` is empty (so a move can open a new route). Per route: ``load`` (float64
(R,)), and prefix sums over the extended route ``e = E[r, 0..lens[r]+1]``: ``fwd[r, t] = sum_{u<t}
c[e[u], e[u+1]]``, ``bwd[r, t] = sum_{u<t} c[e[u+1], e[u]]`` (reversal costs in O(1)) and ``dcum[r, t]
= sum_{1<=u<=t} demand[e[u]]``. The diagonal of ``c`` must be zero (an empty route costs 0).

Moves ``(type, r1, a, r2, b, k)``; ``a``, ``b``, ``k`` are positions in the extended routes:

* ``RELOCATE`` (0): customer ``E[r1, a]`` moved between ``E[r2, b]`` and ``E[r2, b+1]`` (r1 == r2
  allowed, ``b`` not in ``a-1..a``). ``k = -1``.
* ``SWAP`` (1): customers ``E[r1, a]`` and ``E[r2, b]`` exchanged (``r1 < r2``, or ``r1 == r2`` and
  ``a < b``). ``k = -1``.
* ``TWO_OPT_STAR`` (2): ``r1 < r2``; route r1 becomes ``E[r1, 1..a] + E[r2, b+1..]`` and route r2
  ``E[r2, 1..b] + E[r1, a+1..]`` (tails exchanged; ``0 <= a <= lens[r1]``, ``0 <= b <= lens[r2]``, not
  both heads or both tails empty). ``k = -1``.
* ``TWO_OPT`` (3): within route r1 (= r2), reverse ``E[r1, a+1..b]`` (``a + 2 <= b <= lens[r1]``).
* ``OR_OPT`` (4) / ``OR_OPT_REV`` (5): within route r1 (= r2), the segment ``E[r1, a..b]`` of 2 or 3
  customers is moved between ``E[r1, k]`` and ``E[r1, k+1]`` (``k`` not in ``a-1..b``), kept in
  orientation (4) or reversed (5).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numba import njit, prange

from .api import tour_cost

__all__ = ["VRPResult", "cvrp", "best_vrp_move", "apply_vrp_move", "refresh", "pack_routes", "vrp_cost",
           "vrp_local_search", "read_cvrplib", "VRP_MOVE_NAMES",
           "RELOCATE", "SWAP", "TWO_OPT_STAR", "TWO_OPT", "OR_OPT", "OR_OPT_REV"]

RELOCATE, SWAP, TWO_OPT_STAR, TWO_OPT, OR_OPT, OR_OPT_REV = 0, 1, 2, 3, 4, 5
VRP_MOVE_NAMES = ("relocate", "swap", "2-opt*", "2-opt", "or-opt", "or-opt-rev")


@dataclass
class VRPResult:
    """A CVRP solution found by :func:`cvrp`.

    Attributes
    ----------
    routes : list of numpy.ndarray
        int64 customer indices of each route in visiting order, the depot excluded; every customer
        exactly once, no empty route.
    cost : int or float
        Recomputed from the input matrix: depot -> first -> ... -> last -> depot summed over the routes
        (an ``int`` for an integer matrix).
    trace : list of (float, float)
        (seconds since the call, best cost so far) each time the best improved.
    device : str
        "cpu".
    stats : dict
        n, routes, iterations (ruin & recreate rounds), improvements, moves applied, seconds.
    """

    routes: list
    cost: float
    trace: list = field(default_factory=list)
    device: str = "cpu"
    stats: dict = field(default_factory=dict)


def vrp_cost(costs, routes, depot=0):
    """Cost of ``routes`` (customer index sequences, depot excluded) over ``costs`` ((n, n)): each
    non-empty route pays depot -> first -> ... -> last -> depot. Python int for an integer matrix."""
    total = 0
    for r in routes:
        r = np.asarray(r, dtype=np.int64)
        if r.size:
            total = total + tour_cost(costs, np.concatenate([[depot], r]), closed=True)
    return total


# ----------------------------------------------------------------------------------------------------
# numba kernels

@njit(cache=True)
def refresh(c, dem, E, lens, nr, load, fwd, bwd, dcum):
    """Fill ``load``, ``fwd``, ``bwd``, ``dcum`` for routes ``0..nr-1`` (see the module docstring)."""
    for r in range(nr):
        m = lens[r]
        fwd[r, 0] = 0.0
        bwd[r, 0] = 0.0
        dcum[r, 0] = 0.0
        for t in range(m + 1):
            fwd[r, t + 1] = fwd[r, t] + c[E[r, t], E[r, t + 1]]
            bwd[r, t + 1] = bwd[r, t] + c[E[r, t + 1], E[r, t]]
            if t >= 1:
                dcum[r, t] = dcum[r, t - 1] + dem[E[r, t]]
        load[r] = dcum[r, m] if m > 0 else 0.0


@njit(cache=True)
def _row(c, dem, cap, E, lens, nr, load, fwd, bwd, dcum, r1, out):
    """Best move whose first route is ``r1``, written to ``out`` (float64 (7,))."""
    best = np.inf
    bt, ba, br2, bb, bk = -1, -1, -1, -1, -1
    m1 = lens[r1]
    # relocate and swap
    for a in range(1, m1 + 1):
        x = E[r1, a]
        p = E[r1, a - 1]
        q = E[r1, a + 1]
        dx = dem[x]
        rem = c[p, q] - c[p, x] - c[x, q]
        for r2 in range(nr):
            m2 = lens[r2]
            if r2 != r1:
                if load[r2] + dx <= cap and not (m2 == 0 and m1 == 1):
                    for b in range(m2 + 1):
                        u = E[r2, b]
                        v = E[r2, b + 1]
                        d = rem + c[u, x] + c[x, v] - c[u, v]
                        if d < best:
                            best, bt, ba, br2, bb, bk = d, RELOCATE, a, r2, b, -1
                if r2 > r1:
                    for b in range(1, m2 + 1):
                        y = E[r2, b]
                        dy = dem[y]
                        if load[r1] - dx + dy > cap or load[r2] - dy + dx > cap:
                            continue
                        u = E[r2, b - 1]
                        v = E[r2, b + 1]
                        d = (c[p, y] + c[y, q] - c[p, x] - c[x, q]
                             + c[u, x] + c[x, v] - c[u, y] - c[y, v])
                        if d < best:
                            best, bt, ba, br2, bb, bk = d, SWAP, a, r2, b, -1
            else:
                for b in range(m1 + 1):
                    if b == a or b == a - 1:
                        continue
                    u = E[r1, b]
                    v = E[r1, b + 1]
                    d = rem + c[u, x] + c[x, v] - c[u, v]
                    if d < best:
                        best, bt, ba, br2, bb, bk = d, RELOCATE, a, r1, b, -1
                for b in range(a + 1, m1 + 1):
                    y = E[r1, b]
                    v = E[r1, b + 1]
                    if b == a + 1:
                        d = c[p, y] + c[y, x] + c[x, v] - c[p, x] - c[x, y] - c[y, v]
                    else:
                        u = E[r1, b - 1]
                        d = (c[p, y] + c[y, q] - c[p, x] - c[x, q]
                             + c[u, x] + c[x, v] - c[u, y] - c[y, v])
                    if d < best:
                        best, bt, ba, br2, bb, bk = d, SWAP, a, r1, b, -1
    # 2-opt*: exchange tails with a later route
    tot1 = fwd[r1, m1 + 1]
    for r2 in range(r1 + 1, nr):
        m2 = lens[r2]
        tot2 = fwd[r2, m2 + 1]
        for a in range(m1 + 1):
            for b in range(m2 + 1):
                if (a == 0 and b == 0) or (a == m1 and b == m2):
                    continue
                l1 = dcum[r1, a] + load[r2] - dcum[r2, b]
                l2 = dcum[r2, b] + load[r1] - dcum[r1, a]
                if l1 > cap or l2 > cap:
                    continue
                n1 = fwd[r1, a] + c[E[r1, a], E[r2, b + 1]] + tot2 - fwd[r2, b + 1]
                n2 = fwd[r2, b] + c[E[r2, b], E[r1, a + 1]] + tot1 - fwd[r1, a + 1]
                d = n1 + n2 - tot1 - tot2
                if d < best:
                    best, bt, ba, br2, bb, bk = d, TWO_OPT_STAR, a, r2, b, -1
    # intra-route 2-opt
    for a in range(m1 - 1):
        for b in range(a + 2, m1 + 1):
            d = (c[E[r1, a], E[r1, b]] + c[E[r1, a + 1], E[r1, b + 1]] - c[E[r1, a], E[r1, a + 1]]
                 - c[E[r1, b], E[r1, b + 1]] + (bwd[r1, b] - bwd[r1, a + 1]) - (fwd[r1, b] - fwd[r1, a + 1]))
            if d < best:
                best, bt, ba, br2, bb, bk = d, TWO_OPT, a, r1, b, -1
    # intra-route Or-opt of 2-3 customers, both orientations
    for L in range(2, 4):
        for s in range(1, m1 - L + 2):
            e = s + L - 1
            pr = E[r1, s - 1]
            nx = E[r1, e + 1]
            sf = E[r1, s]
            sl = E[r1, e]
            rem = c[pr, nx] - c[pr, sf] - c[sl, nx]
            inner = (bwd[r1, e] - bwd[r1, s]) - (fwd[r1, e] - fwd[r1, s])
            for k in range(m1 + 1):
                if k >= s - 1 and k <= e:
                    continue
                u = E[r1, k]
                v = E[r1, k + 1]
                d = rem - c[u, v] + c[u, sf] + c[sl, v]
                if d < best:
                    best, bt, ba, br2, bb, bk = d, OR_OPT, s, r1, e, k
                d = rem - c[u, v] + c[u, sl] + c[sf, v] + inner
                if d < best:
                    best, bt, ba, br2, bb, bk = d, OR_OPT_REV, s, r1, e, k
    out[0] = best
    out[1] = bt
    out[2] = r1
    out[3] = ba
    out[4] = br2
    out[5] = bb
    out[6] = bk


@njit(cache=True, parallel=True)
def best_vrp_move(c, dem, cap, E, lens, nr, load, fwd, bwd, dcum):
    """Evaluate the whole CVRP neighbourhood and reduce to its best capacity-feasible move.

    Parameters
    ----------
    c : float64 (n, n)
        Arc costs (asymmetric allowed), zero diagonal.
    dem : float64 (n,)
        Demands (the depot's is 0).
    cap : float
        Vehicle capacity.
    E, lens, nr : int64 (R, W), int64 (R,), int
        The routes (see the module docstring); route ``nr - 1`` may be empty.
    load, fwd, bwd, dcum : float64 (R,), (R, W), (R, W), (R, W)
        Their state, as filled by :func:`refresh`.

    Returns
    -------
    (delta, type, r1, a, r2, b, k) : (float, int, int, int, int, int, int)
        The smallest cost change (``inf`` and type -1 when no move is feasible) and its move; ties go
        to the lowest ``r1``, then the first move found. Relocate, swap, 2-opt* between routes;
        relocate, swap, 2-opt, Or-opt (2-3, both orientations) within a route. O(N^2) moves, parallel
        over ``r1`` (the GPU kernel of Brodtkorb et al. 2013 would be parallel over the moves).
    """
    rows = np.empty((nr, 7))
    for r1 in prange(nr):
        _row(c, dem, cap, E, lens, nr, load, fwd, bwd, dcum, r1, rows[r1])
    b = 0
    for r in range(1, nr):
        if rows[r, 0] < rows[b, 0]:
            b = r
    return (rows[b, 0], int(rows[b, 1]), int(rows[b, 2]), int(rows[b, 3]), int(rows[b, 4]),
            int(rows[b, 5]), int(rows[b, 6]))


@njit(cache=True)
def _set(E, lens, r, seq, depot):
    m = seq.shape[0]
    E[r, 0] = depot
    for t in range(m):
        E[r, t + 1] = seq[t]
    E[r, m + 1] = depot
    lens[r] = m


@njit(cache=True)
def normalize(E, lens, nr, depot):
    """Drop empty routes and append one empty route; returns the new ``nr``."""
    w = 0
    for r in range(nr):
        m = lens[r]
        if m > 0:
            if w != r:
                for t in range(m + 2):
                    E[w, t] = E[r, t]
                lens[w] = m
            w += 1
    E[w, 0] = depot
    E[w, 1] = depot
    lens[w] = 0
    return w + 1


@njit(cache=True)
def apply_vrp_move(E, lens, nr, depot, t, r1, a, r2, b, k):
    """Apply move (t, r1, a, r2, b, k) in place; returns the new ``nr`` (routes renormalised). The
    caller refreshes the state with :func:`refresh`."""
    m1 = lens[r1]
    m2 = lens[r2]
    s1 = E[r1, 1:m1 + 1].copy()
    s2 = E[r2, 1:m2 + 1].copy()
    if t == RELOCATE:
        x = E[r1, a]
        if r1 != r2:
            _set(E, lens, r1, np.concatenate((s1[:a - 1], s1[a:])), depot)
            _set(E, lens, r2, np.concatenate((s2[:b], np.array([x]), s2[b:])), depot)
        else:
            rest = np.concatenate((s1[:a - 1], s1[a:]))
            bb = b if b < a else b - 1
            _set(E, lens, r1, np.concatenate((rest[:bb], np.array([x]), rest[bb:])), depot)
    elif t == SWAP:
        x = E[r1, a]
        y = E[r2, b]
        E[r1, a] = y
        E[r2, b] = x
    elif t == TWO_OPT_STAR:
        _set(E, lens, r1, np.concatenate((s1[:a], s2[b:])), depot)
        _set(E, lens, r2, np.concatenate((s2[:b], s1[a:])), depot)
    elif t == TWO_OPT:
        i = a + 1
        j = b
        while i < j:
            E[r1, i], E[r1, j] = E[r1, j], E[r1, i]
            i += 1
            j -= 1
    elif t == OR_OPT or t == OR_OPT_REV:
        seg = s1[a - 1:b].copy()
        if t == OR_OPT_REV:
            seg = seg[::-1].copy()
        # k is an extended position: insert after customer E[r1, k] (k = 0: at the front)
        if k < a:
            new = np.concatenate((s1[:k], seg, s1[k:a - 1], s1[b:]))
        else:
            new = np.concatenate((s1[:a - 1], s1[b:k], seg, s1[k:]))
        _set(E, lens, r1, new, depot)
    return normalize(E, lens, nr, depot)


@njit(cache=True)
def route_costs_total(fwd, lens, nr):
    s = 0.0
    for r in range(nr):
        s += fwd[r, lens[r] + 1]
    return s


@njit(cache=True)
def vrp_local_search(c, dem, cap, E, lens, nr, depot, load, fwd, bwd, dcum, eps, max_moves):
    """Best-improvement descent (:func:`best_vrp_move`, apply, repeat). Returns (nr, cost, moves)."""
    moves = 0
    refresh(c, dem, E, lens, nr, load, fwd, bwd, dcum)
    while moves < max_moves:
        d, t, r1, a, r2, b, k = best_vrp_move(c, dem, cap, E, lens, nr, load, fwd, bwd, dcum)
        if not d < -eps:
            break
        nr = apply_vrp_move(E, lens, nr, depot, t, r1, a, r2, b, k)
        refresh(c, dem, E, lens, nr, load, fwd, bwd, dcum)
        moves += 1
    return nr, route_costs_total(fwd, lens, nr), moves


@njit(cache=True)
def ruin_recreate(c, dem, cap, E, lens, nr, depot, near, n_remove):
    """Remove a random customer and its nearest ``n_remove - 1`` customers (``near``: int64 (n, K)
    customers by distance), reinsert them in random order by cheapest feasible insertion (a new route if
    none fits). Uses numba's random state. Returns the new ``nr``."""
    n = c.shape[0]
    removed = np.zeros(n, np.bool_)
    seed_c = -1
    while seed_c < 0:
        r = np.random.randint(0, nr)
        if lens[r] > 0:
            seed_c = E[r, 1 + np.random.randint(0, lens[r])]
    removed[seed_c] = True
    cnt = 1
    for q in range(near.shape[1]):
        if cnt >= n_remove:
            break
        removed[near[seed_c, q]] = True
        cnt += 1
    lst = np.empty(cnt, np.int64)
    w = 0
    for r in range(nr):
        m = lens[r]
        keep = np.empty(m, np.int64)
        h = 0
        for t in range(1, m + 1):
            v = E[r, t]
            if removed[v]:
                lst[w] = v
                w += 1
            else:
                keep[h] = v
                h += 1
        _set(E, lens, r, keep[:h], depot)
    np.random.shuffle(lst)
    nr = normalize(E, lens, nr, depot)
    load = np.zeros(nr + cnt + 1)
    for r in range(nr):
        for t in range(1, lens[r] + 1):
            load[r] += dem[E[r, t]]
    for x in lst:
        best = np.inf
        br = -1
        bb = -1
        for r in range(nr):  # route nr - 1 is the empty one
            if load[r] + dem[x] > cap:
                continue
            for b in range(lens[r] + 1):
                u = E[r, b]
                v = E[r, b + 1]
                d = c[u, x] + c[x, v] - c[u, v]
                if d < best:
                    best = d
                    br = r
                    bb = b
        m = lens[br]
        for t in range(m + 1, bb, -1):
            E[br, t + 1] = E[br, t]
        E[br, bb + 1] = x
        lens[br] = m + 1
        load[br] += dem[x]
        if br == nr - 1:
            nr = normalize(E, lens, nr, depot)
            load[nr - 1] = 0.0
    return nr


@njit(cache=True)
def vrp_round(c, dem, cap, E, lens, nr, depot, cost, near, max_remove, eps, max_moves, iters, seed_val):
    """``iters`` rounds of ruin & recreate + descent from the solution (E, lens, nr) of cost ``cost``,
    keeping a result when it is not worse. Returns (E, lens, nr, cost, improvements, moves)."""
    np.random.seed(seed_val)
    R, W = E.shape
    load = np.empty(R)
    fwd = np.empty((R, W))
    bwd = np.empty((R, W))
    dcum = np.empty((R, W))
    cur_E = E.copy()
    cur_l = lens.copy()
    cur_nr = nr
    cc = cost
    acc = 0
    moves = 0
    for _ in range(iters):
        qE = cur_E.copy()
        ql = cur_l.copy()
        k = 2 + np.random.randint(0, max(1, max_remove - 1))
        qnr = ruin_recreate(c, dem, cap, qE, ql, cur_nr, depot, near, k)
        qnr, qc, mv = vrp_local_search(c, dem, cap, qE, ql, qnr, depot, load, fwd, bwd, dcum, eps, max_moves)
        moves += mv
        if qc < cc - eps:
            acc += 1
        if qc <= cc + eps:
            cur_E, cur_l, cur_nr, cc = qE, ql, qnr, qc
    return cur_E, cur_l, cur_nr, cc, acc, moves


# ----------------------------------------------------------------------------------------------------
# Python side

def pack_routes(routes, depot, n_rows, width):
    """The padded state of :func:`best_vrp_move` for ``routes`` (customer sequences, depot excluded).

    Returns ``(E, lens, nr)``: int64 (n_rows, width), int64 (n_rows,), int; empty routes dropped and one
    empty route appended (so ``n_rows`` must exceed the number of non-empty routes and ``width`` the
    longest route by 2).
    """
    E = np.zeros((n_rows, width), np.int64)
    lens = np.zeros(n_rows, np.int64)
    for r, seq in enumerate(routes):
        seq = np.asarray(seq, np.int64)
        E[r, 0] = depot
        E[r, 1:seq.size + 1] = seq
        E[r, seq.size + 1] = depot
        lens[r] = seq.size
    return E, lens, normalize(E, lens, len(routes), depot)


def _savings(C, dem, cap, depot, customers):
    """Clarke-Wright savings for an asymmetric matrix: merge route ending at i with route starting at j
    when ``C[i, d] + C[d, j] - C[i, j] > 0``, largest saving first, capacity allowing."""
    cu = np.asarray(customers)
    S = C[cu, depot][:, None] + C[depot, cu][None, :] - C[np.ix_(cu, cu)]
    np.fill_diagonal(S, -np.inf)
    order = np.argsort(-S, axis=None, kind="stable")
    m = cu.size
    route_of = {int(v): i for i, v in enumerate(cu)}
    routes = {i: [int(v)] for i, v in enumerate(cu)}
    load = {i: float(dem[v]) for i, v in enumerate(cu)}
    for idx in order:
        s = S.flat[idx]
        if not s > 0:
            break
        i, j = cu[idx // m], cu[idx % m]
        ri, rj = route_of[int(i)], route_of[int(j)]
        if ri == rj or routes[ri][-1] != i or routes[rj][0] != j or load[ri] + load[rj] > cap:
            continue
        routes[ri].extend(routes[rj])
        load[ri] += load[rj]
        for v in routes[rj]:
            route_of[v] = ri
        del routes[rj], load[rj]
    return [np.array(r, np.int64) for r in routes.values()]


def _validate(costs, demands, capacity, depot):
    c = np.asarray(costs)
    if c.ndim != 2 or c.shape[0] != c.shape[1] or c.shape[0] < 1:
        raise ValueError(f"costs must be a square (n, n) matrix with n >= 1, got shape {c.shape}")
    if not (np.issubdtype(c.dtype, np.integer) or np.issubdtype(c.dtype, np.floating)):
        raise TypeError(f"costs must be an integer or float matrix, got dtype {c.dtype}")
    if not np.isfinite(c).all() or (c < 0).any():
        raise ValueError("costs must be finite and non-negative")
    n = c.shape[0]
    d = np.asarray(demands)
    if d.shape != (n,):
        raise ValueError(f"demands must have shape ({n},), got {d.shape}")
    if not np.issubdtype(d.dtype, np.number) or not np.isfinite(d).all() or (d < 0).any():
        raise ValueError("demands must be finite and non-negative")
    if isinstance(depot, bool) or not isinstance(depot, (int, np.integer)) or not 0 <= depot < n:
        raise ValueError(f"depot={depot!r} is not a stop index in 0..{n - 1}")
    depot = int(depot)
    if d[depot] != 0:
        raise ValueError(f"demands[depot] must be 0, got {d[depot]}")
    if not np.isfinite(capacity) or capacity <= 0:
        raise ValueError(f"capacity must be a positive number, got {capacity!r}")
    over = np.flatnonzero(d > capacity)
    if over.size:
        raise ValueError(f"customer {int(over[0])} has demand {d[over[0]]} > capacity {capacity}")
    return c, d.astype(np.float64), float(capacity), depot


def cvrp(costs, demands, capacity, *, depot=0, time_limit=1.0, device="auto", seed=None):
    """Capacitated vehicle routing: routes from the depot covering every customer once, each route's
    demand within ``capacity``, minimising the total cost. The number of vehicles is free.

    Clarke-Wright savings start; then best-improvement descent (Brodtkorb et al. 2013's scheme over
    :func:`best_vrp_move`: relocate, swap and 2-opt* between routes, relocate, swap, 2-opt and Or-opt
    within a route) inside a ruin & recreate loop (a random customer and its nearest customers, 2 to
    ~10 % of them, cheapest feasible reinsertion), accepted when not worse, until ``time_limit``.

    Parameters
    ----------
    costs : array_like, (n, n), integer or float
        ``costs[u, v]``: cost (metres, seconds, ...) of u -> v; finite, non-negative; asymmetric allowed;
        the diagonal is ignored.
    demands : array_like, (n,)
        Non-negative demand of each stop (units of ``capacity``); ``demands[depot] == 0``.
    capacity : float
        Vehicle capacity.
    depot : int
        The depot's stop index.
    time_limit : float
        Seconds of search (the first descent always completes).
    device : {"auto", "cpu", "gpu"}
        "gpu" is not built yet.
    seed : int or None
        Seed of the perturbations.

    Returns
    -------
    VRPResult

    Raises
    ------
    ValueError
        Bad shapes, negative or non-finite values, ``demands[depot] != 0``, a customer whose demand
        exceeds ``capacity`` (named), bad depot, device or time_limit.
    TypeError
        Non-numeric matrix.
    NotImplementedError
        ``device="gpu"``.
    """
    if device == "gpu":
        raise NotImplementedError("GPU local search not built yet")
    if device not in ("auto", "cpu"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'gpu', got {device!r}")
    if not np.isfinite(time_limit) or time_limit < 0:
        raise ValueError(f"time_limit must be a non-negative number of seconds, got {time_limit!r}")
    t0 = time.perf_counter()
    c, dem, cap, depot = _validate(costs, demands, capacity, depot)
    n = c.shape[0]
    integral = np.issubdtype(c.dtype, np.integer)
    customers = np.array([v for v in range(n) if v != depot], np.int64)
    N = customers.size
    if N == 0:
        return VRPResult(routes=[], cost=0, trace=[(0.0, 0)], device="cpu",
                         stats={"n": n, "routes": 0, "iterations": 0, "improvements": 0, "moves": 0,
                                "seconds": time.perf_counter() - t0})
    C = c.astype(np.float64, copy=True)
    np.fill_diagonal(C, 0.0)
    eps = 0.5 if integral else 1e-9 * max(1.0, float(C.max())) * n
    rng = np.random.default_rng(seed)
    init = _savings(C, dem, cap, depot, customers)
    # width: the most customers a route can hold (smallest demands first) + the two depot copies
    fit = int(np.searchsorted(np.cumsum(np.sort(dem[customers])), cap, side="right"))
    W = min(N, max(fit, max(r.size for r in init))) + 2
    E, lens, nr = pack_routes(init, depot, N + 1, W)
    R = E.shape[0]
    load = np.empty(R)
    fwd = np.empty((R, W))
    bwd = np.empty((R, W))
    dcum = np.empty((R, W))
    max_moves = 50 * n + 1000
    nr, best_c, moves = vrp_local_search(C, dem, cap, E, lens, nr, depot, load, fwd, bwd, dcum, eps,
                                         max_moves)
    trace = [(time.perf_counter() - t0, best_c)]
    # nearest customers of each customer (by min of both directions), for the ruin step
    K = min(N - 1, 30)
    sym = np.minimum(C, C.T)
    sym[:, depot] = np.inf
    np.fill_diagonal(sym, np.inf)
    near = np.argsort(sym, axis=1, kind="stable")[:, :K].astype(np.int64)
    max_remove = max(2, min(N, 4 + N // 10, K + 1))
    iters = improved = 0
    batch = 4
    while N >= 2 and time.perf_counter() - t0 < time_limit:
        tb = time.perf_counter()
        E, lens, nr, qc, acc, mv = vrp_round(C, dem, cap, E, lens, nr, depot, best_c, near, max_remove, eps,
                                             max_moves, batch, int(rng.integers(0, 2**31 - 1)))
        iters += batch
        improved += acc
        moves += mv
        if qc < best_c - eps:
            trace.append((time.perf_counter() - t0, qc))
        best_c = qc
        el = time.perf_counter() - tb
        if el < 0.005 and batch < 1 << 14:
            batch *= 2
        elif el > 0.02 and batch > 1:
            batch //= 2
    routes = [E[r, 1:lens[r] + 1].copy() for r in range(nr) if lens[r] > 0]
    cost = vrp_cost(c, routes, depot)
    scale = (lambda v: int(round(v))) if integral else float
    trace = [(t, scale(v)) for t, v in trace]
    if trace[-1][1] != cost:
        trace.append((time.perf_counter() - t0, cost))
    stats = {"n": n, "routes": len(routes), "iterations": iters, "improvements": improved, "moves": moves,
             "seconds": time.perf_counter() - t0}
    return VRPResult(routes=routes, cost=cost, trace=trace, device="cpu", stats=stats)


def read_cvrplib(path):
    """Read a CVRPLIB instance (``.vrp``) with :mod:`vrplib`, and its ``.sol`` best-known cost if present.

    EUC_2D distances are rounded to the nearest integer (the X set's convention, Uchoa et al. 2017).

    Returns
    -------
    (costs, demands, capacity, depot, best_known) : (int64 (n, n), int64 (n,), int, int, int or None)
    """
    import vrplib

    path = Path(path)
    inst = vrplib.read_instance(str(path), compute_edge_weights=False)
    if inst.get("edge_weight_type", "EUC_2D") == "EUC_2D":
        xy = np.asarray(inst["node_coord"], np.float64)
        costs = np.floor(np.sqrt(((xy[:, None, :] - xy[None, :, :]) ** 2).sum(-1)) + 0.5).astype(np.int64)
    else:
        costs = np.asarray(inst["edge_weight"])
    sol = path.with_suffix(".sol")
    bks = int(vrplib.read_solution(str(sol))["cost"]) if sol.exists() else None
    return costs, np.asarray(inst["demand"], np.int64), int(inst["capacity"]), int(inst["depot"][0]), bks
