"""Capacitated vehicle routing (CVRP) on an asymmetric cost matrix: best-improvement local search between
and within routes inside a ruin-and-recreate loop; the CPU (numba) twin here, the GPU twin in
:mod:`.vrp_gpu` (``vrp.cu``); the CPU's own search by string removals in :mod:`.vrp_sisr`.

The descent is the seed's scheme (Brodtkorb, Hagen, Schulz, Hasle, "GPU computing in discrete
optimization. Part I", EURO J. Transp. Logist. 2013): evaluate the whole neighbourhood
(:func:`best_vrp_move`, parallel over the first route), reduce to the best move, apply, until no move
improves. The start is Clarke-Wright savings (asymmetric form). On the GPU the perturbation removes a
customer and its nearest customers and reinserts them by cheapest feasible insertion (ruin & recreate,
:func:`vrp_steps` is the CPU twin of one chain), accepted when not worse, until the time limit. On the CPU
(:func:`cvrp` with ``device="cpu"``) the search is SISR (:mod:`.vrp_sisr`: string removals, greedy
insertion with blinks, simulated annealing), which measured better than those chains at equal time
(BENCHMARKS.md), ``chains`` of them at once on numba's threads (:func:`~.vrp_sisr.sisr_chains`), then the
descent on the best solution. Every step that grows with n runs under a work
budget (units of about one delta; :func:`vrp_eval_work`) and the host checks the deadline between calls
(:mod:`gpuroute.tours.budget`).

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

from dataclasses import dataclass, field
from pathlib import Path

import numba
import numpy as np
from numba import njit, prange

from .. import config
from ..backend import resolve_device
from . import budget
from . import local_search as ls
from . import vrp_pop as pop
from . import vrp_sisr as sisr
from .api import tour_cost
from .budget import Deadline, Pacer, check_time_limit
from .warmup import warm_up_cvrp

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
        (seconds since the call, first-call compilation left out; best cost so far) each time the best
        improved.
    device : str
        "cpu" or "gpu": where the search ran.
    stats : dict
        n, routes, iterations (ruin & recreate steps completed: SISR steps on the CPU), improvements (new
        best solutions on the CPU, improving steps on the GPU), moves applied (descents), complete (False
        when the time limit cut the start short, or on the GPU its descent), warmup_seconds (first-call
        compilation, outside the time limit), seconds (of the time limit used), chains (on the CPU: SISR
        chains run at once, ``chains`` of :func:`cvrp`); on the GPU chains and rounds
        (:func:`gpuroute.tours.vrp_gpu.search`).
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


def vrp_eval_work(N, nr):
    """Work units of one evaluation of the whole neighbourhood (:func:`best_vrp_move`) of ``N``
    customers in ``nr`` routes: about ``2 (N + nr)^2`` deltas (relocate ``N (N + nr)``, swap ``N^2 / 2``,
    2-opt* ``(N + nr)^2 / 2``), plus ``4 (N + nr)`` to apply a move and refresh the state."""
    return 2 * (N + nr) * (N + nr) + 4 * (N + nr)


def vrp_descent(c, dem, cap, E, lens, nr, depot, load, fwd, bwd, dcum, eps, max_moves, budget):
    """Best-improvement descent (:func:`best_vrp_move`, apply, repeat) under a work budget
    (:func:`vrp_eval_work` an evaluation, checked before each: at most ``budget`` plus one evaluation).
    ``E``, ``lens`` change in place; calling again resumes the same descent. Returns
    ``(status, nr, cost, moves, work)``: status 0 at a local minimum or after ``max_moves`` moves, 1 when
    the budget ran out first.

    A Python loop over compiled steps: the parallel :func:`best_vrp_move` is called from Python only (a
    cached jitted caller of a parallel function can crash when loaded from numba's cache, numba issue
    #8578); the loop costs a few microseconds a move against the evaluation's O(N^2)."""
    N = int(lens[:nr].sum())
    moves = 0
    work = 0
    status = 0
    refresh(c, dem, E, lens, nr, load, fwd, bwd, dcum)
    while moves < max_moves:
        if work >= budget:
            status = 1
            break
        d, t, r1, a, r2, b, k = best_vrp_move(c, dem, cap, E, lens, nr, load, fwd, bwd, dcum)
        work += vrp_eval_work(N, nr)
        if not d < -eps:
            break
        nr = apply_vrp_move(E, lens, nr, depot, t, r1, a, r2, b, k)
        refresh(c, dem, E, lens, nr, load, fwd, bwd, dcum)
        moves += 1
    return status, nr, route_costs_total(fwd, lens, nr), moves, work


def vrp_local_search(c, dem, cap, E, lens, nr, depot, load, fwd, bwd, dcum, eps, max_moves):
    """Best-improvement descent (:func:`best_vrp_move`, apply, repeat), uninterrupted. Returns
    (nr, cost, moves)."""
    _, nr, cost, moves, _ = vrp_descent(c, dem, cap, E, lens, nr, depot, load, fwd, bwd, dcum, eps, max_moves,
                                        1 << 62)
    return nr, cost, moves


@njit(cache=True)
def ruin_recreate(c, dem, cap, E, lens, nr, depot, order):
    """Ruin and recreate with an explicit list: remove the customers ``order[0..]`` (stop ids; a -1 ends
    the list) from their routes, then reinsert them in that order, each by cheapest feasible insertion
    (the smallest ``c[u, x] + c[x, v] - c[u, v]`` over every position of every route whose load leaves
    room; ties to the lowest route, then the lowest position; the empty last route always fits, and
    using it opens a new one). Routes renormalised. Returns ``(nr, work)``: work ``N + nr`` units for
    the removal and as many a reinsertion."""
    n = c.shape[0]
    removed = np.zeros(n, np.bool_)
    cnt = 0
    for q in range(order.shape[0]):
        if order[q] < 0:
            break
        removed[order[q]] = True
        cnt += 1
    N = 0
    for r in range(nr):
        m = lens[r]
        N += m
        h = 0
        for t in range(1, m + 1):
            v = E[r, t]
            if not removed[v]:
                h += 1
                E[r, h] = v
        E[r, h + 1] = depot
        lens[r] = h
    nr = normalize(E, lens, nr, depot)
    load = np.zeros(nr + cnt + 1)
    for r in range(nr):
        for t in range(1, lens[r] + 1):
            load[r] += dem[E[r, t]]
    work = N + nr
    for q in range(cnt):
        x = order[q]
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
        work += N + nr
        m = lens[br]
        for t in range(m + 1, bb, -1):
            E[br, t + 1] = E[br, t]
        E[br, bb + 1] = x
        lens[br] = m + 1
        load[br] += dem[x]
        if br == nr - 1:
            nr = normalize(E, lens, nr, depot)
            load[nr - 1] = 0.0
    return nr, work


@njit(cache=True)
def ruin_order(near, depot, n, max_remove, out):
    """Draw a ruin list with numba's random state (:func:`ruin_recreate`): a customer chosen uniformly
    and its nearest customers (``near``: int64 (n, K)), ``k = 2 .. max_remove`` of them in all (at most
    ``K + 1``), in random order, into ``out`` (int64, padded with -1). Returns k."""
    v = np.random.randint(0, n - 1)
    if v >= depot:
        v += 1
    k = 2 + np.random.randint(0, max(1, max_remove - 1))
    k = min(k, near.shape[1] + 1, out.shape[0])
    out[:] = -1
    out[0] = v
    for q in range(1, k):
        out[q] = near[v, q - 1]
    np.random.shuffle(out[:k])
    return k


@njit(cache=True)
def _seed(v):
    """Seed numba's random state (:func:`ruin_order` draws from it)."""
    np.random.seed(v)


def _bufs(E):
    R, W = E.shape
    return np.empty(R), np.empty((R, W)), np.empty((R, W)), np.empty((R, W))


def vrp_steps(c, dem, cap, E, lens, nr, depot, cost, orders, eps, max_moves):
    """ILS steps with given ruin lists ``orders`` (int64 (S, kmax), rows as :func:`ruin_recreate` takes
    them; a row starting with -1 perturbs nothing): ruin & recreate, descent, keep the result when its
    cost is at most the current one + ``eps``. The CPU twin of one chain of the GPU's ``vrp_ils``.
    Returns (E, lens, nr, cost, improvements, moves)."""
    bufs = _bufs(E)
    cur_E, cur_l, cur_nr, cc = E.copy(), lens.copy(), nr, cost
    acc = 0
    moves = 0
    for s in range(orders.shape[0]):
        qE, ql = cur_E.copy(), cur_l.copy()
        qnr, _ = ruin_recreate(c, dem, cap, qE, ql, cur_nr, depot, np.ascontiguousarray(orders[s], np.int64))
        _, qnr, qc, mv, _ = vrp_descent(c, dem, cap, qE, ql, qnr, depot, *bufs, eps, max_moves, 1 << 62)
        moves += mv
        if qc < cc - eps:
            acc += 1
        if qc <= cc + eps:
            cur_E, cur_l, cur_nr, cc = qE, ql, qnr, qc
    return cur_E, cur_l, cur_nr, cc, acc, moves


def vrp_round(c, dem, cap, E, lens, nr, depot, cost, near, max_remove, eps, max_moves, iters, seed_val, budget,
              qE, ql, qst):
    """At most ``iters`` ILS steps and about ``budget`` work units from the solution (E, lens, nr) of cost
    ``cost``: ruin & recreate (:func:`ruin_order` from numba's random state seeded with ``seed_val``,
    :func:`ruin_recreate`) + descent (:func:`vrp_descent`), keeping a result when it is not worse. The
    budget is checked before each neighbourhood evaluation (a call does at most ``budget`` plus one
    evaluation of work); a step still running then is kept pending in ``qE``, ``ql`` (its solution, shaped
    as ``E``, ``lens``) and ``qst`` (int64 (3,): pending flag, its ``nr``, its moves so far) and the next
    call resumes it first (a step can be longer than one call's budget).
    Returns (E, lens, nr, cost, improvements, moves, steps, work)."""
    _seed(seed_val)
    n = c.shape[0]
    bufs = _bufs(E)
    order = np.empty(max(2, min(max_remove, near.shape[1] + 1)), np.int64)
    cur_E, cur_l, cur_nr, cc = E, lens, nr, cost
    acc = 0
    moves = 0
    steps = 0
    work = 0
    while steps < iters and work < budget:
        if qst[0] == 0:  # a new step: ruin & recreate a copy of the current solution
            ruin_order(near, depot, n, max_remove, order)
            qE[:] = cur_E
            ql[:] = cur_l
            qnr, w = ruin_recreate(c, dem, cap, qE, ql, cur_nr, depot, order)
            work += w
            qst[0] = 1
            qst[1] = qnr
            qst[2] = 0
        status, qnr, qc, mv, w = vrp_descent(c, dem, cap, qE, ql, int(qst[1]), depot, *bufs, eps,
                                             max_moves - int(qst[2]), budget - work)
        work += w
        moves += mv
        qst[1] = qnr
        qst[2] += mv
        if status == 1:
            break
        qst[0] = 0
        steps += 1
        if qc < cc - eps:
            acc += 1
        if qc <= cc + eps:
            cur_E, cur_l, cur_nr, cc = qE.copy(), ql.copy(), qnr, qc
    return cur_E, cur_l, cur_nr, cc, acc, moves, steps, work


@njit(cache=True, inline="always")
def _merge(i, j, cap, nxt, prv, route, head, tail, load, size):
    """One savings merge: the route ending at ``i`` followed by the route starting at ``j``, when they are
    two routes, ``i`` ends one, ``j`` starts the other and their loads fit ``cap`` (else nothing). The
    smaller route is relabelled (O(n log n) over all merges)."""
    ri = route[i]
    rj = route[j]
    if ri == rj or tail[ri] != i or head[rj] != j or load[ri] + load[rj] > cap:
        return
    nxt[i] = j
    prv[j] = i
    keep, drop = (ri, rj) if size[ri] >= size[rj] else (rj, ri)
    v = head[drop]
    while v >= 0:
        route[v] = keep
        v = nxt[v] if v != tail[drop] else -1
    h = head[ri]
    t = tail[rj]
    head[keep] = h
    tail[keep] = t
    load[keep] = load[ri] + load[rj]
    size[keep] = size[ri] + size[rj]


@njit(cache=True)
def _merge_pairs(pi, pj, ps, cap, nxt, prv, route, head, tail, load, size):
    """Savings merges over the pairs (pi, pj) of savings ps, largest first (stable), capacity allowing:
    the route ending at i followed by the route starting at j (linked lists nxt / prv, route labels)."""
    order = np.argsort(-ps, kind="mergesort")
    for q in range(order.shape[0]):
        e = order[q]
        if not ps[e] > 0:
            break
        i = pi[e]
        j = pj[e]
        _merge(i, j, cap, nxt, prv, route, head, tail, load, size)


@njit(cache=True)
def savings_routes(C, dem, cap, depot, near):
    """Clarke-Wright savings for an asymmetric matrix over candidate pairs: the route ending at i is
    followed by the route starting at j when ``C[i, d] + C[d, j] - C[i, j] > 0``, largest saving first
    (ties: the order of the pairs (i, j) and (j, i) for j in ``near[i]``, i ascending), capacity
    allowing; then the same over every pair of the remaining routes' ends (when there are at most
    ``sqrt(2 n K)`` routes). ``near`` (int64 (n, K)) lists each customer's candidate partners (its depot
    row is unused). O(n K log(n K)). Returns ``(seq, starts)``: the customers route after route (int64 (N,)) and the
    route boundaries (int64 (routes + 1,))."""
    n = C.shape[0]
    K = near.shape[1]
    P = 2 * (n - 1) * K
    pi = np.empty(P, np.int64)
    pj = np.empty(P, np.int64)
    ps = np.empty(P)
    m = 0
    for i in range(n):
        if i == depot:
            continue
        for q in range(K):
            j = near[i, q]
            pi[m] = i
            pj[m] = j
            ps[m] = C[i, depot] + C[depot, j] - C[i, j]
            m += 1
            pi[m] = j
            pj[m] = i
            ps[m] = C[j, depot] + C[depot, i] - C[j, i]
            m += 1
    nxt = np.full(n, -1, np.int64)
    prv = np.full(n, -1, np.int64)
    route = np.arange(n)  # route label of each customer
    head = np.arange(n)  # head / tail / load / size of each label
    tail = np.arange(n)
    load = dem.copy()
    size = np.ones(n, np.int64)
    _merge_pairs(pi[:m], pj[:m], ps[:m], cap, nxt, prv, route, head, tail, load, size)
    # second pass: every pair of the remaining routes' ends (the merges of the full list that the
    # candidate pairs missed), when there are few enough routes
    ends = np.empty(n, np.int64)
    R = 0
    for v in range(n):
        if v != depot and prv[v] < 0:
            ends[R] = v
            R += 1
    if 1 < R and R * R <= max(P, 4 * n):
        pi = np.empty(R * R, np.int64)
        pj = np.empty(R * R, np.int64)
        ps = np.empty(R * R)
        m = 0
        for a in range(R):
            i = tail[route[ends[a]]]
            for b in range(R):
                if a != b:
                    j = ends[b]
                    pi[m] = i
                    pj[m] = j
                    ps[m] = C[i, depot] + C[depot, j] - C[i, j]
                    m += 1
        _merge_pairs(pi[:m], pj[:m], ps[:m], cap, nxt, prv, route, head, tail, load, size)
    seq = np.empty(n - 1, np.int64)
    starts = np.empty(n, np.int64)
    w = 0
    nr = 0
    for v in range(n):
        if v == depot or prv[v] >= 0:
            continue
        starts[nr] = w
        nr += 1
        u = v
        while u >= 0:
            seq[w] = u
            w += 1
            u = nxt[u]
    starts[nr] = w
    return seq, starts[:nr + 1].copy()


# ----------------------------------------------------------------------------------------------------
# move ranks: the tie order of the GPU's reduction (vrp.cu), the CPU's order of evaluation in _row

def vrp_move_rank(nr, W, t, a, r2, b, k):
    """Rank of the move ``(t, r1, a, r2, b, k)`` among the moves of its first route r1 (the tie-break
    after delta and r1 of the GPU's reduction in ``vrp.cu``): the order in which the CPU twin's ``_row``
    visits them, for ``nr`` routes in rows of width ``W``. Python int (the device uses 64 bits).

    Relocate / swap: ``((a nr + r2) 2 + [swap]) W + b``; then 2-opt*: ``base_B + (r2 W + a) W + b``;
    2-opt: ``base_C + a W + b``; Or-opt: ``base_D + (((L - 2) W + a) W + k) 2 + [reversed]`` with
    ``L = b - a + 1`` and ``base_B = 2 nr W^2``, ``base_C = base_B + nr W^2``, ``base_D = base_C + W^2``.

    Raises
    ------
    ValueError
        Unknown move type.
    """
    base_b = 2 * nr * W * W
    base_c = base_b + nr * W * W
    base_d = base_c + W * W
    if t in (RELOCATE, SWAP):
        return ((a * nr + r2) * 2 + (t == SWAP)) * W + b
    if t == TWO_OPT_STAR:
        return base_b + (r2 * W + a) * W + b
    if t == TWO_OPT:
        return base_c + a * W + b
    if t in (OR_OPT, OR_OPT_REV):
        return base_d + (((b - a - 1) * W + a) * W + k) * 2 + (t == OR_OPT_REV)
    raise ValueError(f"unknown move type {t}")


def vrp_move_from_rank(nr, W, r1, rank):
    """The move ``(t, r1, a, r2, b, k)`` of rank ``rank`` in route r1 (inverse of :func:`vrp_move_rank`)."""
    base_b = 2 * nr * W * W
    base_c = base_b + nr * W * W
    base_d = base_c + W * W
    if rank < base_b:
        q, b = divmod(rank, W)
        q, kind = divmod(q, 2)
        a, r2 = divmod(q, nr)
        return (SWAP if kind else RELOCATE), r1, a, r2, b, -1
    if rank < base_c:
        q, b = divmod(rank - base_b, W)
        r2, a = divmod(q, W)
        return TWO_OPT_STAR, r1, a, r2, b, -1
    if rank < base_d:
        a, b = divmod(rank - base_c, W)
        return TWO_OPT, r1, a, r1, b, -1
    q, rev = divmod(rank - base_d, 2)
    q, k = divmod(q, W)
    L2, a = divmod(q, W)
    return (OR_OPT_REV if rev else OR_OPT), r1, a, r1, a + L2 + 1, k


def vrp_items(lens, nr):
    """The work items of the GPU evaluation (``vrp.cu``'s ``eval_item``), in item order, as tuples:
    ``("A", r1, a, r2)`` relocate and swap of customer ``E[r1, a]`` into route r2; ``("B", r1, a, r2)``
    2-opt* cutting r1 after position a (r2 > r1); ``("C", r1, a)`` 2-opt within r1 from position a;
    ``("D", r1, s, L)`` Or-opt of the L customers from position s. Item ids: A ``g nr + r2`` (g: the
    customer's index in route order), B ``A_count + e nr + r2`` (e: the extended position's index, a in
    0..lens[r] of each route), C ``B_end + e``, D ``C_end + 2 g + L - 2``; invalid ones are skipped."""
    cust = [(r, a) for r in range(nr) for a in range(1, lens[r] + 1)]
    ext = [(r, a) for r in range(nr) for a in range(lens[r] + 1)]
    for r1, a in cust:
        for r2 in range(nr):
            yield "A", r1, a, r2
    for r1, a in ext:
        for r2 in range(nr):
            if r2 > r1:
                yield "B", r1, a, r2
    for r1, a in ext:
        if a <= lens[r1] - 2:
            yield "C", r1, a
    for r1, s in cust:
        for L in (2, 3):
            if s + L - 1 <= lens[r1]:
                yield "D", r1, s, L


def emulate_best_vrp_move(c, dem, cap, E, lens, nr, load, fwd, bwd, dcum):
    """The GPU kernel's evaluation, emulated in Python: every work item of :func:`vrp_items` loops its
    moves as ``vrp.cu``'s ``eval_item`` does (deltas and feasibility tests with the CPU's operations) and
    the smallest key ``(delta, r1, rank)`` (:func:`vrp_move_rank`) wins. Equal to :func:`best_vrp_move`
    move for move (the test of the kernel's decomposition, decoding and tie order on a machine without a
    GPU). Returns ``(delta, t, r1, a, r2, b, k)``."""
    W = E.shape[1]
    best = (np.inf, 1 << 62, 1 << 62)
    move = (np.inf, -1, -1, -1, -1, -1, -1)

    def take(d, t, r1, a, r2, b, k):
        nonlocal best, move
        key = (d, r1, vrp_move_rank(nr, W, t, a, r2, b, k))
        if key < best:
            best = key
            move = (float(d), t, r1, a, r2, b, k)

    for item in vrp_items(lens, nr):
        kind, r1 = item[0], item[1]
        m1 = int(lens[r1])
        if kind == "A":
            _, _, a, r2 = item
            x, p, q = E[r1, a], E[r1, a - 1], E[r1, a + 1]
            dx = dem[x]
            rem = c[p, q] - c[p, x] - c[x, q]
            m2 = int(lens[r2])
            if r2 != r1:
                if load[r2] + dx <= cap and not (m2 == 0 and m1 == 1):
                    for b in range(m2 + 1):
                        u, v = E[r2, b], E[r2, b + 1]
                        take(rem + c[u, x] + c[x, v] - c[u, v], RELOCATE, r1, a, r2, b, -1)
                if r2 > r1:
                    for b in range(1, m2 + 1):
                        y = E[r2, b]
                        dy = dem[y]
                        if load[r1] - dx + dy > cap or load[r2] - dy + dx > cap:
                            continue
                        u, v = E[r2, b - 1], E[r2, b + 1]
                        take(c[p, y] + c[y, q] - c[p, x] - c[x, q] + c[u, x] + c[x, v] - c[u, y] - c[y, v],
                             SWAP, r1, a, r2, b, -1)
            else:
                for b in range(m1 + 1):
                    if b == a or b == a - 1:
                        continue
                    u, v = E[r1, b], E[r1, b + 1]
                    take(rem + c[u, x] + c[x, v] - c[u, v], RELOCATE, r1, a, r1, b, -1)
                for b in range(a + 1, m1 + 1):
                    y, v = E[r1, b], E[r1, b + 1]
                    if b == a + 1:
                        d = c[p, y] + c[y, x] + c[x, v] - c[p, x] - c[x, y] - c[y, v]
                    else:
                        u = E[r1, b - 1]
                        d = c[p, y] + c[y, q] - c[p, x] - c[x, q] + c[u, x] + c[x, v] - c[u, y] - c[y, v]
                    take(d, SWAP, r1, a, r1, b, -1)
        elif kind == "B":
            _, _, a, r2 = item
            m2 = int(lens[r2])
            tot1, tot2 = fwd[r1, m1 + 1], fwd[r2, m2 + 1]
            for b in range(m2 + 1):
                if (a == 0 and b == 0) or (a == m1 and b == m2):
                    continue
                if dcum[r1, a] + load[r2] - dcum[r2, b] > cap or dcum[r2, b] + load[r1] - dcum[r1, a] > cap:
                    continue
                n1 = fwd[r1, a] + c[E[r1, a], E[r2, b + 1]] + tot2 - fwd[r2, b + 1]
                n2 = fwd[r2, b] + c[E[r2, b], E[r1, a + 1]] + tot1 - fwd[r1, a + 1]
                take(n1 + n2 - tot1 - tot2, TWO_OPT_STAR, r1, a, r2, b, -1)
        elif kind == "C":
            _, _, a = item
            for b in range(a + 2, m1 + 1):
                d = (c[E[r1, a], E[r1, b]] + c[E[r1, a + 1], E[r1, b + 1]] - c[E[r1, a], E[r1, a + 1]]
                     - c[E[r1, b], E[r1, b + 1]] + (bwd[r1, b] - bwd[r1, a + 1]) - (fwd[r1, b] - fwd[r1, a + 1]))
                take(d, TWO_OPT, r1, a, r1, b, -1)
        else:
            _, _, s, L = item
            e = s + L - 1
            pr, nx, sf, sl = E[r1, s - 1], E[r1, e + 1], E[r1, s], E[r1, e]
            rem = c[pr, nx] - c[pr, sf] - c[sl, nx]
            inner = (bwd[r1, e] - bwd[r1, s]) - (fwd[r1, e] - fwd[r1, s])
            for k in range(m1 + 1):
                if s - 1 <= k <= e:
                    continue
                u, v = E[r1, k], E[r1, k + 1]
                take(rem - c[u, v] + c[u, sf] + c[sl, v], OR_OPT, r1, s, r1, e, k)
                take(rem - c[u, v] + c[u, sl] + c[sf, v] + inner, OR_OPT_REV, r1, s, r1, e, k)
    return move


def ruin_orders(rng, near, depot, n, max_remove, shape):
    """Ruin lists drawn on the host for the GPU chains (the distribution of :func:`ruin_order`): int32
    ``shape + (kmax,)``, each row a customer and its nearest customers, ``k = 2 .. max_remove`` of them
    (at most ``K + 1``) in random order, padded with -1; ``kmax = min(max_remove, K + 1)``."""
    shape = tuple(shape)
    K = near.shape[1]
    kmax = max(2, min(max_remove, K + 1))
    v = rng.integers(0, n - 1, size=shape)
    v = v + (v >= depot)
    k = np.minimum(2 + rng.integers(0, max(1, max_remove - 1), size=shape), min(K + 1, kmax))
    lists = np.concatenate([v[..., None], near[v, :kmax - 1]], axis=-1)
    keys = rng.random(shape + (kmax,))
    keys[np.arange(kmax) >= k[..., None]] = np.inf
    order = np.argsort(keys, axis=-1, kind="stable")
    out = np.take_along_axis(lists, order, axis=-1)
    out[np.arange(kmax) >= k[..., None]] = -1
    return out.astype(np.int32)


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


def _bad_entry(c, mask, what):
    i, j = (int(v) for v in np.argwhere(mask)[0])
    return ValueError(f"costs must be {what}; costs[{i}, {j}] = {c[i, j]}")


def _validate(costs, demands, capacity, depot):
    c = np.asarray(costs)
    if c.ndim != 2 or c.shape[0] != c.shape[1] or c.shape[0] < 1:
        raise ValueError(f"costs must be a square (n, n) matrix with n >= 1, got shape {c.shape}")
    if not (np.issubdtype(c.dtype, np.integer) or np.issubdtype(c.dtype, np.floating)):
        raise TypeError(f"costs must be an integer or float matrix, got dtype {c.dtype}")
    if np.issubdtype(c.dtype, np.floating) and not np.isfinite(c).all():
        raise _bad_entry(c, ~np.isfinite(c), "finite (an unreachable stop?)")
    if (c < 0).any():
        raise _bad_entry(c, c < 0, "non-negative")
    n = c.shape[0]
    d = np.asarray(demands)
    if d.shape != (n,):
        raise ValueError(f"demands must have shape ({n},) (one per stop of costs), got {d.shape}")
    if not (np.issubdtype(d.dtype, np.integer) or np.issubdtype(d.dtype, np.floating)):
        raise TypeError(f"demands must be integers or floats, got dtype {d.dtype}")
    if np.issubdtype(d.dtype, np.floating) and not np.isfinite(d).all():
        i = int(np.flatnonzero(~np.isfinite(d))[0])
        raise ValueError(f"demands must be finite; demands[{i}] = {d[i]}")
    if (d < 0).any():
        i = int(np.flatnonzero(d < 0)[0])
        raise ValueError(f"demands must be non-negative; demands[{i}] = {d[i]}")
    if isinstance(depot, bool) or not isinstance(depot, (int, np.integer)):
        raise TypeError(f"depot must be a stop index (int), got {depot!r}")
    if not 0 <= depot < n:
        raise ValueError(f"depot={depot} is out of range for {n} stops (0..{n - 1})")
    depot = int(depot)
    if d[depot] != 0:
        raise ValueError(f"demands[depot] must be 0; demands[{depot}] = {d[depot]}")
    if isinstance(capacity, bool) or not isinstance(capacity, (int, float, np.integer, np.floating)):
        raise TypeError(f"capacity must be a number, got {capacity!r}")
    if not np.isfinite(capacity) or capacity <= 0:
        raise ValueError(f"capacity must be a finite number > 0, got {capacity}")
    over = np.flatnonzero(d > capacity)
    if over.size:
        i = int(over[0])
        raise ValueError(f"demands[{i}] = {d[i]} exceeds the capacity {capacity} (customer {i} fits no "
                         "vehicle)")
    return c, d.astype(np.float64), float(capacity), depot


def near_customers(C, depot, K, pacer):
    """The K nearest customers of each customer by ``min(C[u, v], C[v, u])`` (ties to the lower index;
    the depot never listed, its row 0): int64 (n, K), built by paced chunks of rows
    (:func:`~.local_search.candidate_lists_paced`), or None when the deadline passed first."""
    n = C.shape[0]
    cu = np.array([v for v in range(n) if v != depot], np.int64)
    sub = np.ascontiguousarray(C[np.ix_(cu, cu)])
    nb = ls.candidate_lists_paced(sub, K, pacer)
    if nb is None:
        return None
    near = np.zeros((n, K), np.int64)
    near[cu] = cu[nb]
    return near


def _singletons(customers):
    return [np.array([v], np.int64) for v in customers]


def savings(C, dem, cap, depot, near):
    """Clarke-Wright savings routes over the candidate pairs of ``near`` (:func:`savings_routes`): a
    list of int64 customer sequences."""
    seq, starts = savings_routes(C, dem, cap, depot, near)
    return [seq[starts[r]:starts[r + 1]].copy() for r in range(starts.size - 1)]


@njit(cache=True, parallel=True)
def savings_sort_rows(C, depot, cu, lo, hi, order, vals, npos):
    """Rows ``lo..hi-1`` of the full savings list: for customer ``i = cu[r]``, the customers ``cu[q]``
    with a positive saving ``C[i, d] + C[d, j] - C[i, j]``, largest first (ties to the lower q), into
    ``order[r, :npos[r]]`` (int32) and ``vals`` (float64). Returns the work, ``4 N`` units a row."""
    N = cu.shape[0]
    for r in prange(lo, hi):
        i = cu[r]
        sv = np.empty(N)
        for q in range(N):
            j = cu[q]
            sv[q] = C[i, depot] + C[depot, j] - C[i, j] if q != r else -np.inf
        o = np.argsort(-sv, kind="mergesort")
        cnt = 0
        for q in range(N):
            if not sv[o[q]] > 0:
                break
            order[r, cnt] = o[q]
            vals[r, cnt] = sv[o[q]]
            cnt += 1
        npos[r] = cnt
    return (hi - lo) * N * 4


@njit(cache=True)
def _heap_less(vals, ptr, a, b):
    """Row a's next saving comes before row b's: larger saving, then lower row."""
    va = vals[a, ptr[a]]
    vb = vals[b, ptr[b]]
    return va > vb or (va == vb and a < b)


@njit(cache=True)
def _heap_down(heap, size, vals, ptr, h):
    while True:
        m = h
        for ch in (2 * h + 1, 2 * h + 2):
            if ch < size and _heap_less(vals, ptr, heap[ch], heap[m]):
                m = ch
        if m == h:
            return
        heap[h], heap[m] = heap[m], heap[h]
        h = m


@njit(cache=True)
def savings_merge_init(npos, heap, ptr):
    """Heap of the rows of :func:`savings_sort_rows` with a positive saving left; returns its size."""
    size = 0
    for r in range(npos.shape[0]):
        ptr[r] = 0
        if npos[r] > 0:
            heap[size] = r
            size += 1
    return size


@njit(cache=True)
def savings_merge_steps(order, vals, npos, heap, hs, ptr, cu, cap, nxt, prv, route, head, tail, load, size,
                        steps):
    """Up to ``steps`` pairs of the full savings list in global order (largest saving, then lower row,
    then the row's order: Clarke and Wright's list sorted stably), each merged as :func:`_merge_pairs`
    does; ``hs`` (int64 (1,)) is the heap's size (0: the list is done; heapify with
    :func:`_heap_down` first). Returns the work done (``log N`` units a pair)."""
    work = 0
    lg = 1
    while (1 << lg) < max(2, heap.shape[0]):
        lg += 1
    while hs[0] > 0 and steps > 0:
        r = heap[0]
        q = order[r, ptr[r]]
        i = cu[r]
        j = cu[q]
        ptr[r] += 1
        if ptr[r] >= npos[r]:
            hs[0] -= 1
            heap[0] = heap[hs[0]]
        if hs[0] > 0:
            _heap_down(heap, hs[0], vals, ptr, 0)
        steps -= 1
        work += lg
        _merge(i, j, cap, nxt, prv, route, head, tail, load, size)
    return work


def savings_full(C, dem, cap, depot, pacer):
    """Clarke and Wright's savings over every pair (asymmetric form), paced: rows of savings sorted by
    chunks (:func:`savings_sort_rows`), then merged in global order from a heap of the rows
    (:func:`savings_merge_steps`), each call within the pacer's budget. 12 N^2 bytes. Returns a list of
    int64 customer sequences, or None when the deadline passed first."""
    n = C.shape[0]
    cu = np.array([v for v in range(n) if v != depot], np.int64)
    N = cu.size
    order = np.empty((N, N), np.int32)
    vals = np.empty((N, N))
    npos = np.zeros(N, np.int64)
    r = 0
    while r < N:
        b = pacer.budget("savings_rows")
        if b <= 0:
            return None
        hi = min(N, r + max(1, b // (4 * N)))
        pacer.spent(savings_sort_rows(C, depot, cu, r, hi, order, vals, npos))
        r = hi
    heap = np.empty(N, np.int64)
    ptr = np.zeros(N, np.int64)
    hs = np.array([savings_merge_init(npos, heap, ptr)], np.int64)
    for h in range(hs[0] // 2, -1, -1):
        _heap_down(heap, hs[0], vals, ptr, h)
    nxt = np.full(n, -1, np.int64)
    prv = np.full(n, -1, np.int64)
    route = np.arange(n)
    head = np.arange(n)
    tail = np.arange(n)
    load = dem.copy()
    size = np.ones(n, np.int64)
    while hs[0] > 0:
        b = pacer.budget("savings_merge")
        if b <= 0:
            return None
        pacer.spent(savings_merge_steps(order, vals, npos, heap, hs, ptr, cu, cap, nxt, prv, route, head, tail,
                                        load, size, max(1, b // 16)))
    routes = []
    for v in cu:
        if prv[v] < 0:
            seq = []
            u = v
            while u >= 0:
                seq.append(u)
                u = nxt[u]
            routes.append(np.array(seq, np.int64))
    return routes


#: nearest customers listed per customer for ruin & recreate ...
NEAR_K = 30
#: the savings start sorts every pair (:func:`savings_full`, 12 N^2 bytes) up to this many customers;
#: above, each customer's SAVINGS_K nearest customers and then the pairs of route ends
#: (:func:`savings_routes`)
SAVINGS_FULL_MAX_N = 3000
SAVINGS_K = 100


def cvrp(costs, demands, capacity, *, depot=0, time_limit=1.0, device="auto", seed=None, chains=None):
    """Capacitated vehicle routing: routes from the depot covering every customer once, each route's
    demand within ``capacity``, minimising the total cost. The number of vehicles is free.

    Clarke-Wright savings start (over each customer's :data:`NEAR_K` nearest customers). On the CPU:
    ``chains`` SISR chains at once, one a numba thread, under the same deadline, the best solution kept
    (Christiaens and Vanden Berghe 2020, :mod:`gpuroute.tours.vrp_sisr`): strings of customers
    removed around a random customer, greedy reinsertion with blinks, simulated annealing from
    ``SISR_T0`` to ``SISR_TF`` times the start's mean arc cost (twice that where the start's routes hold 12
    customers or more on average: ``SISR_LONG_ROUTE``, ``SISR_LONG_HEAT``) over the time limit, the best
    solution kept; where the start's routes are short (:func:`gpuroute.tours.vrp_pop.pop_applies`: from
    ``VRP_POP_MIN_N`` customers, at most ``VRP_POP_MAX_ROUTE`` a route) and that chain stalls (no new best
    for ``VRP_POP_STALL`` of the time), a population of such chains whose members are recombined by
    selective route exchange (:mod:`gpuroute.tours.vrp_pop`) for the rest; then, in
    the last ``config.TOUR_POLISH_RESERVE`` of the time limit, best-improvement descent of the best solution (Brodtkorb et al. 2013's scheme over :func:`best_vrp_move`: relocate, swap
    and 2-opt* between routes, relocate, swap, 2-opt and Or-opt within a route). On the GPU
    (:func:`gpuroute.tours.vrp_gpu.search`): that descent with the neighbourhood evaluated by the whole
    device for the start, then many ruin-and-recreate chains at once (a block each: a random customer
    and its nearest customers, 2 to ~10 % of them, cheapest feasible reinsertion, descent, accepted when
    not worse).

    The time limit is kept as :func:`gpuroute.tours.tsp` keeps it (:mod:`gpuroute.tours.budget`): the
    deadline is checked between steps of bounded work (the nearest-customer lists by rows, every descent
    between two neighbourhood evaluations, every round of ruin & recreate), so the call returns within
    about one evaluation of the whole neighbourhood (``2 (n + routes)^2`` deltas, ~5 ms at n = 1,000 on
    one core) of ``time_limit``; cut short, it returns the best solution so far (at worst the savings
    start). Compilation is excluded and reported in ``stats["warmup_seconds"]``
    (:func:`gpuroute.tours.warm_up`).

    Parameters
    ----------
    costs : array_like, (n, n), integer or float
        ``costs[u, v]``: cost (metres, seconds, ...) of u -> v; finite, non-negative; asymmetric allowed;
        the diagonal is ignored.
    demands : array_like, (n,), integer or float
        Non-negative demand of each stop (units of ``capacity``); ``demands[depot] == 0``; none above
        ``capacity``.
    capacity : float
        Vehicle capacity (> 0).
    depot : int
        The depot's stop index.
    time_limit : float
        Seconds of search (> 0), from the call to the return, compilation excluded.
    device : {"auto", "cpu", "gpu"}
        "auto": the GPU when one is usable and ``config.TOUR_CVRP_GPU_AUTO_MIN_N <= n <=
        config.TOUR_CVRP_GPU_AUTO_MAX_N`` (where it won in the measured runs: an empty window since the CPU
        search became SISR, see the config), else the CPU.
        Under 2 customers there is nothing to search: the CPU answers whatever the device.
    seed : int or None
        Seed of the perturbations. With ``chains`` K > 1, chain 0 runs on ``seed`` itself (what one chain
        does) and chain k on a seed derived from (``seed``, k) (:func:`chain_seeds`): the answer is
        deterministic for a given seed and K (under the same work budgets; real time sizes the budgets).
    chains : int or None
        SISR chains of the CPU search, run at once on numba's threads (``numba.get_num_threads()``; more
        chains than threads take turns): None: ``config.TOUR_CVRP_CPU_CHAINS`` (0 there: one a numba
        thread); fewer when their state (about ``24 R W`` bytes a chain, ``R`` ~ customers, ``W`` the
        longest route that fits) would pass ``config.TOUR_CVRP_CPU_CHAINS_BYTES`` (``stats["chains"]``
        says how many ran). 1: one chain on one thread (the search before chains). Every
        ``vrp_sisr.SISR_CHAINS_SYNC`` of the annealing time, every chain goes on from the best solution
        so far (0: independent chains, the best of them returned). The GPU search has its own chains
        (``config.TOUR_VRP_GPU_CHAINS_PER_SM``): ``chains`` is refused there.

    Returns
    -------
    VRPResult

    Raises
    ------
    ValueError
        A non-square matrix (its shape), a non-finite or negative cost or demand (its position and
        value), ``demands`` of the wrong shape, ``demands[depot] != 0``, a demand above ``capacity``
        (the customer and both values), a depot out of range, a capacity that is not a finite number > 0,
        a bad device, ``time_limit`` not a finite number > 0, ``chains`` not an integer >= 1 (or None),
        ``chains`` given to the GPU search.
    TypeError
        A non-numeric matrix or demands; a non-integer depot; a non-numeric capacity.
    GPUUnavailableError
        ``device="gpu"`` without CuPy and a usable CUDA GPU.
    """
    if device not in ("auto", "cpu", "gpu"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'gpu', got {device!r}")
    time_limit = check_time_limit(time_limit)
    K = _check_chains(chains)
    dl = Deadline(time_limit)
    c, dem, cap, depot = _validate(costs, demands, capacity, depot)
    n = c.shape[0]
    integral = np.issubdtype(c.dtype, np.integer)
    customers = np.array([v for v in range(n) if v != depot], np.int64)
    N = customers.size
    tw = budget.clock()
    dev = resolve_device(device, gpu_implemented=config.TOUR_CVRP_GPU_AUTO_MIN_N <= n <= config.TOUR_CVRP_GPU_AUTO_MAX_N)
    if N < 2:
        dev = "cpu"  # nothing to search
    if dev == "gpu" and chains is not None:
        raise ValueError(f"chains={chains!r} is the CPU search's; the GPU search runs "
                         "config.TOUR_VRP_GPU_CHAINS_PER_SM chains a multiprocessor (pass chains=None)")
    warm_up_cvrp(dev)
    warm = budget.clock() - tw
    dl.extend(warm)
    if N == 0:
        return VRPResult(routes=[], cost=0, trace=[(dl.elapsed(), 0)], device="cpu",
                         stats={"n": n, "routes": 0, "iterations": 0, "improvements": 0, "moves": 0,
                                "complete": True, "warmup_seconds": warm, "seconds": dl.elapsed()})
    C = c.astype(np.float64, copy=True)
    np.fill_diagonal(C, 0.0)
    eps = 0.5 if integral else 1e-9 * max(1.0, float(C.max())) * n
    rng = np.random.default_rng(seed)
    max_moves = 50 * n + 1000
    pace = Pacer(dl)
    if N == 1:
        near, init = np.zeros((n, 0), np.int64), _singletons(customers)
    else:
        near = near_customers(C, depot, min(N - 1, NEAR_K), pace)
        if near is None:
            init = None
        elif N <= SAVINGS_FULL_MAX_N:
            init = savings_full(C, dem, cap, depot, pace)
        else:
            pairs = near_customers(C, depot, min(N - 1, SAVINGS_K), pace)
            init = None if pairs is None else savings(C, dem, cap, depot, pairs)
        if init is None:  # out of time: one route a customer
            near, init = None, _singletons(customers)
    # width: the most customers a route can hold (smallest demands first; twice that where the CPU search
    # lets routes go above capacity, vrp_sisr.SISR_PEN) + the two depot copies
    fit = int(np.searchsorted(np.cumsum(np.sort(dem[customers])), cap, side="right"))
    fit *= 2 if dev == "cpu" and sisr.SISR_PEN > 0 else 1
    W = min(N, max(fit, max(r.size for r in init))) + 2
    E, lens, nr = pack_routes(init, depot, N + 1, W)
    stats = {"n": n, "routes": 0, "iterations": 0, "improvements": 0, "moves": 0, "complete": False,
             "warmup_seconds": warm}
    if near is None:
        trace = [(dl.elapsed(), vrp_cost(C, init, depot))]
    elif dev == "gpu":
        from . import vrp_gpu

        E, lens, nr, trace, gst = vrp_gpu.search(C, dem, cap, depot, E, lens, nr, near, deadline=dl, rng=rng,
                                                 eps=eps, max_moves=max_moves)
        stats.update(gst)
    else:
        K = min(K, max(1, int(config.TOUR_CVRP_CPU_CHAINS_BYTES) // (24 * E.size)))
        rngs = [rng] + [np.random.default_rng(v) for v in chain_seeds(seed, K)[1:]]
        E, lens, nr, trace = _search_cpu(C, dem, cap, depot, E, lens, nr, near, dl, pace, rngs, eps, max_moves,
                                         stats)
    routes = [E[r, 1:lens[r] + 1].astype(np.int64) for r in range(nr) if lens[r] > 0]
    cost = vrp_cost(c, routes, depot)
    scale = (lambda v: int(round(v))) if integral else float
    trace = [(t, scale(v)) for t, v in trace]
    if trace[-1][1] != cost:
        trace.append((dl.elapsed(), cost))
    stats.update(routes=len(routes), seconds=dl.elapsed())
    return VRPResult(routes=routes, cost=cost, trace=trace, device=dev, stats=stats)


def _check_chains(chains):
    """``chains`` of :func:`cvrp` as the number of chains to run (None: ``config.TOUR_CVRP_CPU_CHAINS``, 0
    there: ``numba.get_num_threads()``). Raises ValueError for anything but None or an integer >= 1 (a bool
    too), and for a negative or non-integer ``config.TOUR_CVRP_CPU_CHAINS``."""
    if chains is None:
        v = config.TOUR_CVRP_CPU_CHAINS
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise ValueError(f"config.TOUR_CVRP_CPU_CHAINS must be an integer >= 0 (0: one chain a numba "
                             f"thread), got {v!r}")
        return int(v) or numba.get_num_threads()
    if isinstance(chains, bool) or not isinstance(chains, (int, np.integer)) or chains < 1:
        raise ValueError(f"chains must be an integer >= 1 (SISR chains of the CPU search) or None "
                         f"(config.TOUR_CVRP_CPU_CHAINS), got {chains!r}")
    return int(chains)


def chain_seeds(seed, chains):
    """The seeds of :func:`cvrp`'s ``chains`` SISR chains for the call's ``seed``: chain 0's is ``seed``
    itself (so one chain is the search of a call with ``chains=1``), chain k's (k >= 1) an int in [0, 2^63)
    drawn from ``numpy.random.SeedSequence([seed, k])`` (fresh entropy when ``seed`` is None). A call with
    ``chains=1`` and ``seed=chain_seeds(s, K)[k]`` runs chain k's search alone."""
    out = [seed]
    for k in range(1, chains):
        ss = np.random.SeedSequence() if seed is None else np.random.SeedSequence([int(seed), k])
        out.append(int(ss.generate_state(1, np.uint64)[0] >> np.uint64(1)))
    return out


def _search_cpu(C, dem, cap, depot, E, lens, nr, near, dl, pace, rngs, eps, max_moves, stats):
    """The CPU search of :func:`cvrp` from the packed start (E, lens, nr), ``len(rngs)`` chains at once
    (``rngs``: each chain's numpy Generator; one chain: the SISR steps below on this thread; more:
    :func:`~.vrp_sisr.sisr_chains`, one a numba thread, each with its own solution, best solution and
    random stream, every one under the same temperature and the same work budget a call; every
    ``SISR_CHAINS_SYNC`` of the annealing time each chain goes on from the best solution of all, and what
    a phase returns is the best of all chains). A chain: SISR steps
    (:func:`~.vrp_sisr.sisr_steps`: string removals, greedy insertion with blinks, simulated annealing
    from ``SISR_T0`` to ``SISR_TF`` times :func:`~.vrp_sisr.temperature_unit` (by default the start's mean
    arc cost, doubled where its routes hold 12 customers or more on average), geometric in the time used;
    routes above capacity at an adaptive cost when ``SISR_PEN > 0``) until
    ``config.TOUR_POLISH_RESERVE`` of the limit is left; where :func:`~.vrp_pop.pop_applies` (short routes),
    once one chain has stalled, a population of such chains recombined by route exchange for the rest
    (:mod:`.vrp_pop`). Then the best solution's best-improvement descent (:func:`vrp_descent`); time left
    after that goes to SISR steps at the final temperature from the descent's local minimum. Fills
    ``stats``. Returns (E, lens, nr, trace)."""
    rng = rngs[0]
    K = len(rngs)
    stats["chains"] = K
    R, W = E.shape
    n = C.shape[0]
    load, rcost = np.empty(R), np.empty(R)
    rt, ps = np.empty(n, np.int64), np.empty(n, np.int64)
    cur = sisr.sisr_init(C, dem, E, lens, nr, load, rcost, rt, ps)
    trace = [(dl.elapsed(), cur)]
    used = int((lens[:nr] > 0).sum())
    arcs = max(1, int(lens[:nr].sum()) + used)
    unit = sisr.temperature_unit(C, depot, cur, arcs, used)
    t0, tf = sisr.SISR_T0 * unit, sisr.SISR_TF * unit
    pen = [sisr.overload_penalty(cur / arcs, dem, depot)]
    pens = np.full(K, pen[0])  # each chain's (K > 1)
    reserve = float(config.TOUR_POLISH_RESERVE) * dl.limit
    span = max(1e-9, dl.limit - reserve)

    def anneal(E, lens, nr, start, end, ta, tb, stall=0.0):
        if K > 1:
            return anneal_chains(E, lens, nr, start, end, ta, tb, stall)
        return anneal_one(E, lens, nr, start, end, ta, tb, stall)

    def anneal_one(E, lens, nr, start, end, ta, tb, stall=0.0):
        """SISR steps from (E, lens, nr) until ``end`` seconds of the limit are used, cooling from ``ta``
        (at ``start`` seconds) to ``tb`` (at ``end``), or (``stall > 0``) until ``stall`` seconds passed
        without a new best (counted from ``VRP_POP_STALL_FROM`` of ``span`` on at the earliest); returns the best solution (normalised), its cost, and whether it stopped
        for the stall."""
        cur = sisr.sisr_init(C, dem, E, lens, nr, load, rcost, rt, ps)
        st = np.array([nr, nr], np.int64)
        cost = np.array([cur, cur])
        bestE, bestl = E.copy(), lens.copy()
        width = max(1e-9, end - start)
        stall_from = float(pop.VRP_POP_STALL_FROM) * span
        t_best, stalled = max(dl.elapsed(), stall_from), False
        timed = stall > 0 or ta != tb
        while True:
            now = dl.elapsed() if timed else end  # read before the budget: no work after a late reading
            if stall > 0 and now - t_best > stall:
                stalled = True
                break
            if (b := pace.budget("sisr_steps", dl.limit - end)) <= 0:
                break
            frac = min(1.0, max(0.0, (now - start) / width))
            temp = ta * (tb / ta) ** frac if ta > 0 else 0.0
            before = cost[1]
            steps, acc, imp, feas, w = sisr.sisr_steps(C, dem, cap, depot, E, lens, load, rcost, rt, ps, st,
                                                       cost, bestE, bestl, near, temp, 1 << 30, b,
                                                       int(rng.integers(0, 2**31 - 1)), sisr.SISR_CBAR,
                                                       sisr.SISR_LMAX, sisr.SISR_BLINK, sisr.SISR_SPLIT,
                                                       sisr.SISR_NEAR, pen[0])
            pace.spent(w)
            pen[0] = sisr.adapt_penalty(pen[0], feas, steps)
            stats["iterations"] += steps
            stats["improvements"] += imp
            if cost[1] < before - eps:
                t_best = max(now, stall_from)
            if cost[1] < trace[-1][1] - eps:
                trace.append((dl.elapsed(), float(cost[1])))
        return bestE, bestl, normalize(bestE, bestl, int(st[1]), depot), float(cost[1]), stalled

    def anneal_chains(E, lens, nr, start, end, ta, tb, stall=0.0):
        """:func:`anneal_one` with ``K`` chains from (E, lens, nr) (:func:`~.vrp_sisr.sisr_chains`: each
        call gives every chain the same budget and temperature, chain k its seed from ``rngs[k]``); the
        stall counts new bests of all chains; every ``SISR_CHAINS_SYNC * span`` seconds every chain's
        current and best solution become the best of all (0: never). Returns the best chain's best."""
        cur = sisr.sisr_init(C, dem, E, lens, nr, load, rcost, rt, ps)
        Es, Ls = np.repeat(E[None], K, 0), np.repeat(lens[None], K, 0)
        loads, rcosts = np.repeat(load[None], K, 0), np.repeat(rcost[None], K, 0)
        rts, pss = np.repeat(rt[None], K, 0), np.repeat(ps[None], K, 0)
        sts = np.full((K, 2), nr, np.int64)
        costs = np.full((K, 2), cur)
        bestEs, bestls = Es.copy(), Ls.copy()
        out = np.zeros((K, 5), np.int64)
        width = max(1e-9, end - start)
        stall_from = float(pop.VRP_POP_STALL_FROM) * span
        t_best, stalled = max(dl.elapsed(), stall_from), False
        timed = stall > 0 or ta != tb
        sync = float(sisr.SISR_CHAINS_SYNC) * span
        next_sync = start + sync
        while True:
            now = dl.elapsed() if timed or sync > 0 else end  # read before the budget
            if stall > 0 and now - t_best > stall:
                stalled = True
                break
            if (b := pace.budget("sisr_chains", dl.limit - end)) <= 0:
                break
            frac = min(1.0, max(0.0, (now - start) / width))
            temp = ta * (tb / ta) ** frac if ta > 0 else 0.0
            before = float(costs[:, 1].min())
            seeds = np.array([r.integers(0, 2**31 - 1) for r in rngs], np.int64)
            pace.spent(sisr.sisr_chains(C, dem, cap, depot, Es, Ls, loads, rcosts, rts, pss, sts, costs, bestEs,
                                        bestls, near, temp, 1 << 30, b, seeds, sisr.SISR_CBAR, sisr.SISR_LMAX,
                                        sisr.SISR_BLINK, sisr.SISR_SPLIT, sisr.SISR_NEAR, pens, out))
            for k in range(K):
                pens[k] = sisr.adapt_penalty(pens[k], int(out[k, 3]), int(out[k, 0]))
            stats["iterations"] += int(out[:, 0].sum())
            stats["improvements"] += int(out[:, 2].sum())
            kb = int(np.argmin(costs[:, 1]))
            best = float(costs[kb, 1])
            if best < before - eps:
                t_best = max(now, stall_from)
            if best < trace[-1][1] - eps:
                trace.append((dl.elapsed(), best))
            if sync > 0 and now >= next_sync:
                next_sync = now + sync
                m = int(sts[kb, 1])
                for k in range(K):  # every chain from the best of all (its current and its best)
                    if k != kb:
                        bestEs[k, :m], bestls[k, :m] = bestEs[kb, :m], bestls[kb, :m]
                        costs[k, 1] = best
                        sts[k, 1] = m
                    Es[k, :m], Ls[k, :m] = bestEs[kb, :m], bestls[kb, :m]
                    sts[k, 0] = m
                    costs[k, 0] = sisr.sisr_init(C, dem, Es[k], Ls[k], m, loads[k], rcosts[k], rts[k], pss[k])
        kb = int(np.argmin(costs[:, 1]))
        bestE, bestl = bestEs[kb].copy(), bestls[kb].copy()
        return bestE, bestl, normalize(bestE, bestl, int(sts[kb, 1]), depot), float(costs[kb, 1]), stalled

    if pop.pop_applies(int(lens[:nr].sum()), used):
        first = None
        if pop.VRP_POP_STALL > 0:  # one chain first; the population only where it stalls
            first = anneal(E.copy(), lens.copy(), nr, 0.0, span, t0, tf, float(pop.VRP_POP_STALL) * span)
        if first is None or first[4]:
            E, lens, nr = _population(C, dem, cap, depot, E, lens, nr, near, dl, pace, rng, eps, stats, anneal,
                                      span, t0, tf, first)
        else:
            E, lens, nr = first[:3]
    else:
        E, lens, nr = anneal(E, lens, nr, 0.0, span, t0, tf)[:3]
    bufs = _bufs(E)
    while (b := pace.budget("vrp_descent")) > 0:
        s, nr, c, mv, w = vrp_descent(C, dem, cap, E, lens, nr, depot, *bufs, eps, max_moves, b)
        pace.spent(w)
        stats["moves"] += mv
        max_moves -= mv
        if c < trace[-1][1] - eps:
            trace.append((dl.elapsed(), c))
        if s == 0:
            E, lens, nr = anneal(E, lens, nr, dl.elapsed(), dl.limit, tf, tf)[:3]
            break
    stats["complete"] = True
    return E, lens, nr, trace


def _population(C, dem, cap, depot, E, lens, nr, near, dl, pace, rng, eps, stats, anneal, span, t0, tf, first):
    """:mod:`.vrp_pop`'s search until ``span`` seconds of the limit are used. Members: ``first`` (a chain's
    best: E, lens, nr, cost, ...; None: none) and fresh chains from the start (E, lens, nr) up to
    ``VRP_POP_SIZE``, each annealed from ``t0`` to ``tf`` over its equal part of the first ``VRP_POP_INIT``
    of the time left; then generations (two members at random, :func:`~.vrp_pop.srex`, the child annealed
    from ``t0 (tf / t0) ** VRP_POP_CHILD_T`` to ``tf`` for ``VRP_POP_CHILD`` of ``span``, its best in place
    of the worst member when better and of a cost not in the population). Sets ``stats["generations"]``,
    ``stats["population_replacements"]``, ``stats["population_start"]`` (seconds). Returns the best member
    (E, lens, nr)."""
    P = int(pop.VRP_POP_SIZE)
    s0 = dl.elapsed()
    members = [] if first is None else [list(first[:4])]
    fresh = P - len(members)
    init_end = s0 + float(pop.VRP_POP_INIT) * max(0.0, span - s0)
    for i in range(fresh):
        if i > 0 and pace.budget("sisr_steps", dl.limit - span) == 0:
            break
        end = s0 + (init_end - s0) * (i + 1) / fresh
        members.append(list(anneal(E.copy(), lens.copy(), nr, dl.elapsed(), end, t0, tf)[:4]))
    tc = t0 * (tf / t0) ** float(pop.VRP_POP_CHILD_T) if t0 > 0 else 0.0
    gens = repl = 0
    cE, cl = np.empty_like(E), np.empty_like(lens)
    while len(members) > 1 and pace.budget("srex", dl.limit - span) > 0:
        i, j = (int(v) for v in rng.choice(len(members), 2, replace=False))
        A, B = members[i], members[j]
        cnr, w = pop.srex(C, dem, cap, depot, A[0], A[1], A[2], B[0], B[1], B[2], near,
                          int(rng.integers(1, int(pop.VRP_POP_ROUTES) + 1)), bool(rng.integers(0, 2)),
                          int(rng.integers(0, 2**31 - 1)), cE, cl)
        pace.spent(w)
        start = dl.elapsed()
        child = anneal(cE, cl, cnr, start, min(span, start + float(pop.VRP_POP_CHILD) * span), tc, tf)
        gens += 1
        costs = [m[3] for m in members]
        worst = int(np.argmax(costs))
        if child[3] < costs[worst] - eps and all(abs(child[3] - c) > eps for c in costs):
            members[worst] = list(child[:4])
            repl += 1
    stats.update(generations=gens, population_replacements=repl, population_start=s0)
    best = min(members, key=lambda m: m[3])
    return best[0], best[1], best[2]


def warm_up_kernels():
    """Compile (or load) every numba kernel of :func:`cvrp` on a tiny instance with the argument types
    the search uses (:mod:`gpuroute.tours.warmup`)."""
    rng = np.random.default_rng(0)
    n = 8
    C = rng.integers(1, 100, (n, n)).astype(np.float64)
    np.fill_diagonal(C, 0.0)
    dem = rng.integers(1, 5, n).astype(np.float64)
    dem[0] = 0.0
    cap = 8.0

    class _Free:  # a pacer without a clock: one call does it all
        def budget(self, kind=None):
            return 1 << 40

        def spent(self, w):
            pass

    near = near_customers(C, 0, 3, _Free())
    savings(C, dem, cap, 0, near)
    init = savings_full(C, dem, cap, 0, _Free())
    E, lens, nr = pack_routes(init, 0, n, n + 1)
    R, W = E.shape
    load, fwd, bwd, dcum = np.empty(R), np.empty((R, W)), np.empty((R, W)), np.empty((R, W))
    st, nr, cost, mv, w = vrp_descent(C, dem, cap, E, lens, nr, 0, load, fwd, bwd, dcum, 0.5, 1000, 1 << 40)
    refresh(C, dem, E, lens, nr, load, fwd, bwd, dcum)
    cost = route_costs_total(fwd, lens, nr)
    vrp_round(C, dem, cap, E, lens, nr, 0, cost, near, 3, 0.5, 1000, 2, 1, 1 << 40, np.empty_like(E),
              np.empty_like(lens), np.zeros(3, np.int64))
    vrp_local_search(C, dem, cap, E.copy(), lens.copy(), nr, 0, load, fwd, bwd, dcum, 0.5, 1000)
    vrp_steps(C, dem, cap, E, lens, nr, 0, cost, ruin_orders(rng, near, 0, n, 3, (2,)).astype(np.int64), 0.5, 1000)
    rt, ps = np.empty(n, np.int64), np.empty(n, np.int64)
    cur = sisr.sisr_init(C, dem, E, lens, nr, load, np.empty(R), rt, ps)
    sisr.sisr_steps(C, dem, cap, 0, E, lens, load, np.empty(R), rt, ps, np.array([nr, nr], np.int64),
                    np.array([cur, cur]), E.copy(), lens.copy(), near, 1.0, 0, 1, 1, sisr.SISR_CBAR,
                    sisr.SISR_LMAX, sisr.SISR_BLINK, sisr.SISR_SPLIT, sisr.SISR_NEAR, 1.0)
    K = 2
    sisr.sisr_chains(C, dem, cap, 0, np.repeat(E[None], K, 0), np.repeat(lens[None], K, 0), np.empty((K, R)),
                     np.empty((K, R)), np.empty((K, n), np.int64), np.empty((K, n), np.int64),
                     np.full((K, 2), nr, np.int64), np.full((K, 2), cur), np.repeat(E[None], K, 0),
                     np.repeat(lens[None], K, 0), near, 1.0, 0, 1, np.arange(K, dtype=np.int64), sisr.SISR_CBAR,
                     sisr.SISR_LMAX, sisr.SISR_BLINK, sisr.SISR_SPLIT, sisr.SISR_NEAR, np.ones(K),
                     np.zeros((K, 5), np.int64))
    pop.srex(C, dem, cap, 0, E, lens, nr, E, lens, nr, near, 1, True, 1, np.empty_like(E), np.empty_like(lens))


def read_cvrplib(path):
    """Read a CVRPLIB instance (``.vrp``) with :mod:`vrplib`, and its ``.sol`` best-known cost if present.

    EUC_2D distances are rounded to the nearest integer (the X set's convention, Uchoa et al. 2017).

    Returns
    -------
    (costs, demands, capacity, depot, best_known) : (int64 (n, n), int64 (n,), int, int, int or None)
    """
    from ..extras import require

    vrplib = require("vrplib", "read_cvrplib")
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
