"""Numba CPU twin of the tour local search: best-improvement over a whole neighbourhood.

Follows the programming example of Brodtkorb, Hagen, Schulz, Hasle, "GPU computing in discrete
optimization. Part I" (EURO J. Transp. Logist. 2013): evaluate every move of the neighbourhood,
reduce to the best one, apply it, and loop until no move improves (a local minimum). The evaluation is
kept apart from the application in :func:`best_move`, which is what the GPU kernel will mirror.

State
-----
All kernels work on a **closed** tour ``p`` (int64 (n,), a permutation of ``0..n-1``) over a float64
(n, n) cost matrix ``c`` (``c[u, v]`` is the cost of the arc u -> v, asymmetric allowed). Open paths
are reduced to closed tours by the API (:mod:`gpuroute.tours.api`) by editing the return arcs. Beside
``p`` the state holds ``pos`` (inverse permutation) and two prefix sums over the sequence ``p[0..n-1]``
(the wrap arc ``p[n-1] -> p[0]`` is not in them):

* ``fwd[t] = sum_{u < t} c[p[u], p[u+1]]`` (the path walked forwards),
* ``bwd[t] = sum_{u < t} c[p[u+1], p[u]]`` (the same path walked backwards),

so the cost of reversing the sub-path ``p[a..b]`` is ``(bwd[b] - bwd[a]) - (fwd[b] - fwd[a])``, O(1).

Moves (``move type``, ``i``, ``j``, ``k``), positions index ``p``:

* ``TWO_OPT`` (0): ``0 <= i``, ``i + 2 <= j <= n - 1``; reverse ``p[i+1..j]`` (arcs ``p[i] -> p[i+1]``
  and ``p[j] -> p[(j+1) % n]`` replaced by ``p[i] -> p[j]`` and ``p[i+1] -> p[(j+1) % n]``; the
  reversed sub-path pays its backward cost). ``k = -1``.
* ``OR_OPT`` (1) / ``OR_OPT_REV`` (2): the segment ``p[i..j]`` of 2 or 3 stops (``j = i + L - 1 <=
  n - 1``, no wrap) is moved between ``p[k]`` and ``p[(k+1) % n]`` (``k`` outside ``i-1..j`` cyclically),
  kept in orientation (1) or reversed (2).
* ``SWAP`` (3): ``i < j``; exchange ``p[i]`` and ``p[j]``. ``k = -1``.
* ``RELOCATE`` (4): Or-opt of one stop: ``p[i]`` (``j = i``) moved between ``p[k]`` and ``p[(k+1) % n]``.

Two neighbourhoods are searched by the same delta functions:

* full (:func:`best_move` with ``nbr`` of width 0): every move above once, O(n^2), parallel over ``i``;
* candidate lists (``nbr`` (n, K) int64: the K nearest stops of each stop): only the moves that create
  an arc between a stop and one of its candidates, O(n K) -- the usual speed-up of good CPU code.

:func:`local_search` is the GPU scheme (global best move each step); :func:`local_search_queue` is the
fast CPU descent (best move around one stop at a time, a work queue of stops whose arcs changed), used
by the iterated local search :func:`ils_round` above 150 stops on an asymmetric matrix.

Or-opt (symmetric matrices, above 150 stops)
--------------------------------------------
The prefix sums above make every move O(1) to evaluate on an asymmetric matrix but O(n) to apply. On a
symmetric one the CPU search uses instead the classic fast scheme of good sequential codes (Johnson and
McGeoch's "The TSP: a case study in local optimization", 1997: neighbour lists, don't-look bits, array
tour): :func:`or_step`, an LK-style sequential move of depth 4 (chains of up to four 2-opt moves under Lin
and Kernighan's positive-gain rule: 2-opt, the sequential 3-opt moves, Or-opt with or without reversal),
each reversal done on the shorter side and logged; :func:`or_descent`, its don't-look-bit queue; and
:func:`or_ils`, an iterated local search of local segment kicks (:func:`segment_kick`) repaired by a
descent from the 6 stops a kick touched and undone from the log when worse, so a step costs what it
touches, not O(n). :func:`or_ils_chains` runs one chain a thread.

Time budgets
------------
Every step whose length grows with n runs under a budget of **work units** (about one unit per delta
evaluated, ``n`` per O(n) pass) and returns the work it did, so that :func:`gpuroute.tours.api.tsp`
checks its deadline between calls of bounded work (:mod:`gpuroute.tours.budget`): candidate lists by
rows (:func:`candidate_rows`), the nearest-neighbour start by stops (:func:`nearest_neighbour_steps`),
descents that can be resumed (:func:`queue_descent`, :func:`full_descent`), ILS rounds that abandon the
step under way (:func:`ils_round`). A call overruns its budget by at most one indivisible step (one
evaluation of the neighbourhood and one move).
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

TWO_OPT = 0
OR_OPT = 1
OR_OPT_REV = 2
SWAP = 3
RELOCATE = 4
MOVE_NAMES = ("2-opt", "or-opt", "or-opt-reversed", "swap", "relocate")
MAX_SEG = 3

__all__ = ["TWO_OPT", "OR_OPT", "OR_OPT_REV", "SWAP", "RELOCATE", "MOVE_NAMES", "MAX_SEG", "tour_cost",
           "prefix_sums", "delta_two_opt", "delta_or_opt", "delta_swap", "best_move", "apply_move",
           "local_search", "local_search_queue", "double_bridge", "nearest_neighbour_tour", "candidate_lists",
           "ils_round", "candidate_rows", "nearest_neighbour_start", "nearest_neighbour_steps", "queue_init",
           "queue_descent", "full_descent", "full_work", "symmetric_rows", "reverse_positions", "or_step",
           "or_descent", "segment_kick", "or_ils", "or_ils_chains", "OR_LOG_CAP"]


@njit(cache=True)
def tour_cost(c, p):
    """Cost of the closed tour ``p`` over ``c`` (float64), the return arc included."""
    n = p.shape[0]
    s = 0.0
    for t in range(n):
        s += c[p[t], p[(t + 1) % n]]
    return s


@njit(cache=True)
def prefix_sums(c, p, pos, fwd, bwd):
    """Fill ``pos`` (inverse of ``p``), ``fwd`` and ``bwd`` (float64 (n,)) in place; O(n)."""
    n = p.shape[0]
    fwd[0] = 0.0
    bwd[0] = 0.0
    pos[p[0]] = 0
    for t in range(1, n):
        pos[p[t]] = t
        fwd[t] = fwd[t - 1] + c[p[t - 1], p[t]]
        bwd[t] = bwd[t - 1] + c[p[t], p[t - 1]]


@njit(cache=True, inline="always")
def delta_two_opt(c, p, fwd, bwd, i, j):
    """Cost change of reversing ``p[i+1..j]`` (``i + 2 <= j <= n - 1``); O(1)."""
    n = p.shape[0]
    a = p[i]
    b = p[i + 1]
    e = p[j]
    d = p[(j + 1) % n]
    return (c[a, e] + c[b, d] - c[a, b] - c[e, d]
            + (bwd[j] - bwd[i + 1]) - (fwd[j] - fwd[i + 1]))


@njit(cache=True, inline="always")
def delta_or_opt(c, p, fwd, bwd, i, j, k, rev):
    """Cost change of moving ``p[i..j]`` between ``p[k]`` and ``p[(k+1) % n]`` (reversed if ``rev``);
    the caller guarantees ``k`` lies outside ``i-1..j`` cyclically; O(1)."""
    n = p.shape[0]
    prv = p[(i - 1 + n) % n]
    nxt = p[(j + 1) % n]
    sf = p[i]
    sl = p[j]
    u = p[k]
    w = p[(k + 1) % n]
    d = c[prv, nxt] - c[prv, sf] - c[sl, nxt] - c[u, w]
    if rev:
        d += c[u, sl] + c[sf, w] + (bwd[j] - bwd[i]) - (fwd[j] - fwd[i])
    else:
        d += c[u, sf] + c[sl, w]
    return d


@njit(cache=True, inline="always")
def delta_swap(c, p, i, j):
    """Cost change of exchanging ``p[i]`` and ``p[j]`` (``i < j``, ``n >= 3``); O(1)."""
    n = p.shape[0]
    x = p[i]
    y = p[j]
    if j == i + 1:
        a = p[(i - 1 + n) % n]
        b = p[(j + 1) % n]
        return c[a, y] + c[y, x] + c[x, b] - c[a, x] - c[x, y] - c[y, b]
    if i == 0 and j == n - 1:  # cyclically adjacent: ... a y | x b ...
        a = p[n - 2]
        b = p[1]
        return c[a, x] + c[x, y] + c[y, b] - c[a, y] - c[y, x] - c[x, b]
    ap = p[(i - 1 + n) % n]
    an = p[i + 1]
    bp = p[j - 1]
    bn = p[(j + 1) % n]
    return (c[ap, y] + c[y, an] + c[bp, x] + c[x, bn]
            - c[ap, x] - c[x, an] - c[bp, y] - c[y, bn])


@njit(cache=True, inline="always")
def _or_valid(n, i, j, k):
    """``k`` is a legal insertion point for the segment ``p[i..j]`` (not ``i-1..j`` cyclically)."""
    if k < 0 or k >= n:
        return False
    if i <= k <= j:
        return False
    if k == (i - 1 + n) % n:
        return False
    return True


@njit(cache=True)
def _row_best(c, ct, arc, p, fwd, bwd, i, out):
    """Best move whose first index is ``i`` in the full neighbourhood; writes (delta, type, i, j, k).

    Same deltas as :func:`delta_two_opt`, :func:`delta_swap`, :func:`delta_or_opt`, laid out for the
    cache: every matrix read is in a row fixed for the loop (``ct`` is ``c`` transposed), and the arcs
    of the tour come from ``arc[t] = c[p[t], p[(t+1) % n]]``.
    """
    n = p.shape[0]
    best = np.inf
    bt = -1
    bj = -1
    bk = -1
    if i + 1 < n:
        a = p[i]
        b = p[i + 1]
        base = -arc[i] + bwd[i + 1] * -1.0 + fwd[i + 1]
        for j in range(i + 2, n):  # 2-opt
            e = p[j]
            d = p[j + 1] if j + 1 < n else p[0]
            dd = c[a, e] + c[b, d] - arc[j] + base + bwd[j] - fwd[j]
            if dd < best:
                best = dd
                bt = TWO_OPT
                bj = j
                bk = -1
    if n >= 3:
        x = p[i]
        ap = p[(i - 1 + n) % n]
        an = p[(i + 1) % n]
        sub_i = arc[(i - 1 + n) % n] + arc[i]
        for j in range(i + 1, n):  # swap
            if j == i + 1 or (i == 0 and j == n - 1):
                if i == 0 and j == n - 1 and n == 3:
                    continue  # the same as (0, 1) on a 3-cycle: keep one
                dd = delta_swap(c, p, i, j)
            else:
                y = p[j]
                bp = p[j - 1]
                bn = p[j + 1] if j + 1 < n else p[0]
                dd = c[ap, y] + ct[an, y] + ct[x, bp] + c[x, bn] - sub_i - arc[j - 1] - arc[j]
            if dd < best:
                best = dd
                bt = SWAP
                bj = j
                bk = -1
    prv = p[(i - 1 + n) % n]
    sf = p[i]
    for L in range(1, MAX_SEG + 1):  # relocate (L = 1) and Or-opt (L = 2, 3)
        j = i + L - 1
        if j >= n:
            break
        sl = p[j]
        nxt = p[(j + 1) % n]
        rem = c[prv, nxt] - arc[(i - 1 + n) % n] - arc[j]
        inner = (bwd[j] - bwd[i]) - (fwd[j] - fwd[i])
        # legal k: 0..i-2 and j+1..n-1, less n-1 when i == 0 (the arc into the segment); no branch
        # on k inside the loops
        for part in range(2):
            k0 = 0 if part == 0 else j + 1
            k1 = i - 1 if part == 0 else (n - 1 if i == 0 else n)
            ft = RELOCATE if L == 1 else OR_OPT
            ke = min(k1, n - 1)  # k + 1 stays in range; k = n - 1 is handled after the loop
            for k in range(k0, ke):
                r0 = rem - arc[k]
                dd = r0 + ct[sf, p[k]] + c[sl, p[k + 1]]
                if dd < best:
                    best = dd
                    bt = ft
                    bj = j
                    bk = k
            if k1 == n and k0 <= n - 1:  # k = n - 1: the wrap arc p[n-1] -> p[0]
                dd = rem - arc[n - 1] + ct[sf, p[n - 1]] + c[sl, p[0]]
                if dd < best:
                    best = dd
                    bt = ft
                    bj = j
                    bk = n - 1
            if L > 1:
                for k in range(k0, ke):
                    dd = rem - arc[k] + ct[sl, p[k]] + c[sf, p[k + 1]] + inner
                    if dd < best:
                        best = dd
                        bt = OR_OPT_REV
                        bj = j
                        bk = k
                if k1 == n and k0 <= n - 1:
                    dd = rem - arc[n - 1] + ct[sl, p[n - 1]] + c[sf, p[0]] + inner
                    if dd < best:
                        best = dd
                        bt = OR_OPT_REV
                        bj = j
                        bk = n - 1
    out[0] = best
    out[1] = bt
    out[2] = i
    out[3] = bj
    out[4] = bk


@njit(cache=True, parallel=True)
def _best_full(c, p, fwd, bwd, ct):
    """The full scan, parallel over the first index (called from Python only: a cached jitted caller of
    a parallel function can crash when loaded from numba's cache, numba issue #8578)."""
    n = p.shape[0]
    arc = np.empty(n)
    for t in range(n):
        arc[t] = c[p[t], p[(t + 1) % n]]
    rows = np.empty((n, 5))
    for i in prange(n):
        _row_best(c, ct, arc, p, fwd, bwd, i, rows[i])
    b = 0
    for i in range(1, n):  # the reduction; ties go to the lowest i
        if rows[i, 0] < rows[b, 0]:
            b = i
    return rows[b, 0], int(rows[b, 1]), int(rows[b, 2]), int(rows[b, 3]), int(rows[b, 4])


@njit(cache=True)
def _best_full_serial(c, p, fwd, bwd, ct):
    """:func:`_best_full` on one thread (the same move), for the jitted descents."""
    n = p.shape[0]
    arc = np.empty(n)
    for t in range(n):
        arc[t] = c[p[t], p[(t + 1) % n]]
    row = np.empty(5)
    bd = np.inf
    bt, bi, bj, bk = -1, -1, -1, -1
    for i in range(n):
        _row_best(c, ct, arc, p, fwd, bwd, i, row)
        if row[0] < bd or i == 0:  # ties go to the lowest i
            bd = row[0]
            bt, bi, bj, bk = int(row[1]), int(row[2]), int(row[3]), int(row[4])
    return bd, bt, bi, bj, bk


@njit(cache=True, inline="always")
def _take(best, cand_d, t, i, j, k):
    if cand_d < best[0]:
        best[0] = cand_d
        best[1] = t
        best[2] = i
        best[3] = j
        best[4] = k


@njit(cache=True)
def _pair_best(c, p, fwd, bwd, x, y, best):
    """Update ``best`` (float64 (5,)) with the moves that create an arc between ``p[x]`` and ``p[y]``."""
    n = p.shape[0]
    # 2-opt creating p[x] -> p[y] as first arc (i = x, j = y) ...
    if y >= x + 2:
        _take(best, delta_two_opt(c, p, fwd, bwd, x, y), TWO_OPT, x, y, -1)
    # ... or as second arc p[i+1] -> p[(j+1) % n] (i = x - 1, j = y - 1)
    i = x - 1
    j = y - 1 if y > 0 else n - 1
    if i >= 0 and j >= i + 2:
        _take(best, delta_two_opt(c, p, fwd, bwd, i, j), TWO_OPT, i, j, -1)
    # 2-opt creating p[y] -> p[x] (first arc, y < x)
    if x >= y + 2:
        _take(best, delta_two_opt(c, p, fwd, bwd, y, x), TWO_OPT, y, x, -1)
    # swaps putting p[y] next to p[x]
    if n >= 3:
        for h in range(2):
            s = (x + 1) % n if h == 0 else (x - 1 + n) % n
            if s != y:
                a = min(s, y)
                b = max(s, y)
                _take(best, delta_swap(c, p, a, b), SWAP, a, b, -1)
    # segments starting or ending at y, inserted next to p[x]
    for L in range(1, MAX_SEG + 1):
        for side in range(2):
            s0 = y if side == 0 else y - L + 1
            e0 = s0 + L - 1
            if s0 < 0 or e0 >= n or (L == 1 and side == 1):
                continue
            for h in range(2):
                k = x if h == 0 else (x - 1 + n) % n
                if not _or_valid(n, s0, e0, k):
                    continue
                if L == 1:
                    _take(best, delta_or_opt(c, p, fwd, bwd, s0, e0, k, False), RELOCATE, s0, e0, k)
                else:
                    _take(best, delta_or_opt(c, p, fwd, bwd, s0, e0, k, False), OR_OPT, s0, e0, k)
                    _take(best, delta_or_opt(c, p, fwd, bwd, s0, e0, k, True), OR_OPT_REV, s0, e0, k)


@njit(cache=True)
def _best_candidates(c, p, pos, fwd, bwd, nbr):
    """Best move among those creating an arc ``x -> y`` or ``y -> x`` with ``y`` a candidate of ``x``."""
    n = p.shape[0]
    K = nbr.shape[1]
    best = np.empty(5)
    best[0] = np.inf
    best[1:] = -1
    for x in range(n):
        for q in range(K):
            y = pos[nbr[p[x], q]]
            if y != x:
                _pair_best(c, p, fwd, bwd, x, y, best)
    return best[0], int(best[1]), int(best[2]), int(best[3]), int(best[4])


@njit(cache=True)
def _best_move(c, ct, p, pos, fwd, bwd, nbr):
    """:func:`best_move` on one thread, for the jitted descents."""
    if p.shape[0] < 3:
        return np.inf, -1, -1, -1, -1
    if nbr.shape[1] == 0:
        return _best_full_serial(c, p, fwd, bwd, ct)
    return _best_candidates(c, p, pos, fwd, bwd, nbr)


def best_move(c, ct, p, pos, fwd, bwd, nbr):
    """Evaluate a whole neighbourhood and reduce to its best move.

    Parameters
    ----------
    c : float64 (n, n)
        Arc costs, ``c[u, v]`` for u -> v (asymmetric allowed).
    ct : float64 (n, n)
        ``c`` transposed, C-contiguous (``np.ascontiguousarray(c.T)``): the full scan reads columns of
        ``c`` as rows of ``ct``. Unused with candidate lists (pass ``c``).
    p : int64 (n,)
        The closed tour.
    pos, fwd, bwd : int64 (n,), float64 (n,), float64 (n,)
        Its state, as filled by :func:`prefix_sums`.
    nbr : int64 (n, K)
        Candidate lists; ``K == 0`` searches the full neighbourhood (2-opt, Or-opt 2-3 both
        orientations, swap, relocate: O(n^2), parallel over the first index; the jitted descents use
        the same scan on one thread).

    Returns
    -------
    (delta, move_type, i, j, k) : (float, int, int, int, int)
        The smallest cost change (``inf`` and type -1 if the neighbourhood is empty, n < 3) and the move
        (see the module docstring); ties go to the first move found.
    """
    if p.shape[0] < 3:
        return np.inf, -1, -1, -1, -1
    if nbr.shape[1] == 0:
        return _best_full(c, p, fwd, bwd, ct)
    return _best_candidates(c, p, pos, fwd, bwd, nbr)


@njit(cache=True)
def apply_move(p, t, i, j, k):
    """Apply move (t, i, j, k) to ``p`` in place; O(n). The caller refreshes the prefix sums."""
    n = p.shape[0]
    if t == TWO_OPT:
        a = i + 1
        b = j
        while a < b:
            p[a], p[b] = p[b], p[a]
            a += 1
            b -= 1
    elif t == SWAP:
        p[i], p[j] = p[j], p[i]
    elif t == OR_OPT or t == OR_OPT_REV or t == RELOCATE:
        L = j - i + 1
        seg = p[i:j + 1].copy()
        if t == OR_OPT_REV:
            seg = seg[::-1].copy()
        u = p[k]
        rest = np.empty(n - L, np.int64)
        m = 0
        for t2 in range(n):
            if t2 < i or t2 > j:
                rest[m] = p[t2]
                m += 1
        m = 0
        for t2 in range(n - L):
            p[m] = rest[t2]
            m += 1
            if rest[t2] == u:
                for q in range(L):
                    p[m] = seg[q]
                    m += 1


@njit(cache=True)
def local_search(c, p, nbr, eps, max_moves):
    """Best-improvement descent: :func:`best_move`, apply, repeat until no move gains more than ``eps``.

    ``p`` (int64 (n,)) is changed in place. Returns ``(cost, moves)``: the closed-tour cost (float) and
    the number of moves applied (capped at ``max_moves``).
    """
    n = p.shape[0]
    pos = np.empty(n, np.int64)
    fwd = np.empty(n)
    bwd = np.empty(n)
    ct = np.ascontiguousarray(c.T) if nbr.shape[1] == 0 else c
    moves = 0
    while moves < max_moves:
        prefix_sums(c, p, pos, fwd, bwd)
        d, t, i, j, k = _best_move(c, ct, p, pos, fwd, bwd, nbr)
        if not d < -eps:
            break
        apply_move(p, t, i, j, k)
        moves += 1
    return tour_cost(c, p), moves


@njit(cache=True)
def double_bridge(p, window, touched):
    """Double-bridge perturbation A B C D -> A C B D on a random stretch of at most ``window`` positions
    after position 0 (``p[0]`` keeps its place; ``window <= 0``: the whole tour). Uses numba's random
    state. Returns a new int64 (n,) array; the 6 stops whose arcs changed are written to ``touched``."""
    n = p.shape[0]
    q = p.copy()
    if n < 8:
        touched[:] = p[0]
        return q
    w = n - 1 if window <= 0 or window >= n - 1 else window
    start = 1 + np.random.randint(0, n - w)  # stretch p[start..start+w-1]
    cuts = np.sort(np.random.choice(w - 1, 3, replace=False) + 1) + start
    a, b, e = cuts[0], cuts[1], cuts[2]
    m = a
    for t in range(b, e):
        q[m] = p[t]
        m += 1
    for t in range(a, b):
        q[m] = p[t]
        m += 1
    touched[0] = p[a - 1]
    touched[1] = p[a]
    touched[2] = p[b - 1]
    touched[3] = p[b]
    touched[4] = p[e - 1]
    touched[5] = p[e % n]
    return q


@njit(cache=True)
def nearest_neighbour_steps(c, p, used, m, limit, steps):
    """Extend the partial nearest-neighbour tour ``p[0..m)`` by at most ``steps`` stops (never past
    ``limit``), marking them in ``used`` (bool (n,)). Returns ``(m, work)``: the new length and the work
    done (``n`` units a stop). Ties go to the lowest stop index."""
    n = c.shape[0]
    cur = p[m - 1]
    work = 0
    while m < limit and steps > 0:
        bv = -1
        bc = np.inf
        for v in range(n):
            if not used[v] and c[cur, v] < bc:
                bc = c[cur, v]
                bv = v
        p[m] = bv
        used[bv] = True
        cur = bv
        m += 1
        steps -= 1
        work += n
    return m, work


@njit(cache=True)
def nearest_neighbour_start(n, first, last, p, used):
    """Start the nearest-neighbour tour: ``p[0] = first``, ``last`` (if >= 0 and not ``first``) reserved
    for ``p[n - 1]``. Returns ``(m, limit)`` for :func:`nearest_neighbour_steps`."""
    used[:] = False
    p[0] = first
    used[first] = True
    if last >= 0:
        used[last] = True
    limit = n - 1 if last >= 0 and last != first else n
    if last >= 0 and last != first:
        p[n - 1] = last
    return 1, limit


@njit(cache=True)
def nearest_neighbour_tour(c, first, last):
    """Nearest-neighbour tour from ``first``; if ``last >= 0`` it is kept for the end. int64 (n,)."""
    n = c.shape[0]
    p = np.empty(n, np.int64)
    used = np.zeros(n, np.bool_)
    m, limit = nearest_neighbour_start(n, first, last, p, used)
    nearest_neighbour_steps(c, p, used, m, limit, n)
    return p


@njit(cache=True, parallel=True)
def candidate_rows(c, K, lo, hi, out):
    """Rows ``lo..hi-1`` of the candidate lists (see :func:`candidate_lists`) into ``out`` (int64 (n, K)).

    Tiles of 32 rows, each with a transposed strip of ``c`` so that both ``c[u, v]`` and ``c[v, u]`` are
    read along rows; a sorted insertion keeps the K best of each row, O(n) a row for random data.
    Returns the work done, ``n`` units a row."""
    n = c.shape[0]
    T = 32
    ntiles = (hi - lo + T - 1) // T
    for tile in prange(ntiles):
        u0 = lo + tile * T
        u1 = min(hi, u0 + T)
        strip = np.empty((u1 - u0, n))
        for v in range(n):
            for u in range(u0, u1):
                strip[u - u0, v] = c[v, u]
        bd = np.empty(K)
        bv = np.empty(K, np.int64)
        for u in range(u0, u1):
            bd[:] = np.inf
            bv[:] = n
            for v in range(n):
                if v == u:
                    continue
                d = min(c[u, v], strip[u - u0, v])
                if d < bd[K - 1]:
                    q = K - 1
                    while q > 0 and bd[q - 1] > d:
                        bd[q] = bd[q - 1]
                        bv[q] = bv[q - 1]
                        q -= 1
                    bd[q] = d
                    bv[q] = v
            for q in range(K):
                out[u, q] = bv[q]
    return (hi - lo) * n


def candidate_lists(c, K):
    """The K stops nearest to each stop by ``min(c[u, v], c[v, u])``, ties to the lower stop index:
    int64 (n, K), ``1 <= K <= n - 1`` (``c`` float64 (n, n), C-contiguous)."""
    c = np.ascontiguousarray(c, dtype=np.float64)
    n = c.shape[0]
    out = np.empty((n, K), np.int64)
    candidate_rows(c, K, 0, n, out)
    return out


@njit(cache=True)
def _touched(p, t, i, j, k, out):
    """Stops whose arcs move ``(t, i, j, k)`` changes (before it is applied); returns how many."""
    n = p.shape[0]
    if t == TWO_OPT:
        out[0] = p[i]
        out[1] = p[i + 1]
        out[2] = p[j]
        out[3] = p[(j + 1) % n]
        return 4
    if t == SWAP:
        out[0] = p[(i - 1 + n) % n]
        out[1] = p[i]
        out[2] = p[(i + 1) % n]
        out[3] = p[(j - 1 + n) % n]
        out[4] = p[j]
        out[5] = p[(j + 1) % n]
        return 6
    out[0] = p[(i - 1 + n) % n]
    out[1] = p[i]
    out[2] = p[j]
    out[3] = p[(j + 1) % n]
    out[4] = p[k]
    out[5] = p[(k + 1) % n]
    return 6


@njit(cache=True)
def _push(queue, inq, qs, n, v):
    if not inq[v]:
        inq[v] = True
        queue[(qs[0] + qs[1]) % n] = v
        qs[1] += 1


@njit(cache=True)
def queue_init(c, p, pos, fwd, bwd, queue, inq, qs, active):
    """State of a :func:`queue_descent` of the tour ``p``: ``pos``, ``fwd``, ``bwd`` (:func:`prefix_sums`),
    an empty FIFO ``queue`` (int64 (n,)) with ``inq`` (bool (n,)) cleared, then seeded with ``active`` in
    order (repeats dropped); ``qs`` (int64 (3,)) = (head, size, moves applied). O(n)."""
    n = p.shape[0]
    prefix_sums(c, p, pos, fwd, bwd)
    inq[:] = False
    qs[0] = 0
    qs[1] = 0
    qs[2] = 0
    for t in range(active.shape[0]):
        _push(queue, inq, qs, n, active[t])


@njit(cache=True)
def queue_descent(c, p, pos, fwd, bwd, nbr, eps, max_moves, queue, inq, qs, polish, budget):
    """Resumable queue-driven descent (:func:`local_search_queue`) on the state of :func:`queue_init`.

    Work units (the measure of a time budget): ``23 K`` a stop popped (its moves evaluated), ``23 K n``
    a polish scan (the whole candidate neighbourhood), ``2 n`` a move applied (apply + prefix sums). The
    budget is checked before each pop or scan, so a call does at most ``budget`` plus one scan and one
    move of work. Returns ``(status, work)``: status 0 when the descent is over (queue empty, polish
    found nothing, or ``max_moves`` moves in all, counted in ``qs[2]``), 1 when ``budget`` was spent first
    (call again with the same state to go on: the same moves as an uninterrupted descent).
    """
    n = p.shape[0]
    K = nbr.shape[1]
    best = np.empty(5)
    tch = np.empty(6, np.int64)
    work = 0
    while qs[2] < max_moves:
        if work >= budget:
            return 1, work
        if qs[1] == 0:
            if not polish:
                break
            d, t, i, j, k = _best_move(c, c, p, pos, fwd, bwd, nbr)
            work += 23 * K * n
            if not d < -eps:
                break
            m = _touched(p, t, i, j, k, tch)
            apply_move(p, t, i, j, k)
            prefix_sums(c, p, pos, fwd, bwd)
            work += 2 * n
            qs[2] += 1
            for h in range(m):
                _push(queue, inq, qs, n, tch[h])
            continue
        u = queue[qs[0]]
        qs[0] = (qs[0] + 1) % n
        qs[1] -= 1
        inq[u] = False
        best[0] = np.inf
        x = pos[u]
        for q in range(K):
            y = pos[nbr[u, q]]
            if y != x:
                _pair_best(c, p, fwd, bwd, x, y, best)
        work += 23 * K
        if best[0] < -eps:
            t, i, j, k = int(best[1]), int(best[2]), int(best[3]), int(best[4])
            m = _touched(p, t, i, j, k, tch)
            apply_move(p, t, i, j, k)
            prefix_sums(c, p, pos, fwd, bwd)
            work += 2 * n
            qs[2] += 1
            for h in range(m):
                _push(queue, inq, qs, n, tch[h])
            _push(queue, inq, qs, n, u)
    return 0, work


@njit(cache=True)
def local_search_queue(c, p, nbr, eps, max_moves, active, polish):
    """Fast CPU descent with a work queue ("don't-look bits"): for a stop u taken from the queue, the best
    move among those creating an arc between u and one of its candidates ``nbr[u]`` is applied if it
    improves by more than ``eps``, and the stops whose arcs changed go back on the queue.

    This is the good-CPU-code reference of the seed's warning, not the GPU scheme (that is
    :func:`local_search`). ``p`` (int64 (n,)) is changed in place; ``active`` (int64) seeds the queue.
    A move can also become improving when the arcs around a candidate change, which the queue misses;
    with ``polish`` the queue is refilled from a global candidate-list :func:`best_move` until that
    finds nothing, so the result is a local minimum of the candidate neighbourhood.
    Returns ``(cost, moves)``. Uninterrupted; :func:`queue_descent` is the same descent under a budget.
    """
    n = p.shape[0]
    pos = np.empty(n, np.int64)
    fwd = np.empty(n)
    bwd = np.empty(n)
    queue = np.empty(n, np.int64)
    inq = np.zeros(n, np.bool_)
    qs = np.zeros(3, np.int64)
    queue_init(c, p, pos, fwd, bwd, queue, inq, qs, active)
    queue_descent(c, p, pos, fwd, bwd, nbr, eps, max_moves, queue, inq, qs, polish, np.iinfo(np.int64).max)
    return tour_cost(c, p), qs[2]


@njit(cache=True)
def full_work(n):
    """Work units of one evaluation of the full neighbourhood (:func:`best_move` with ``K == 0``): about
    ``6 n^2`` deltas (2-opt and swap ``n^2 / 2`` each, relocate and Or-opt ``5 n^2``), plus ``2 n`` for
    applying a move."""
    return 6 * n * n + 2 * n


@njit(cache=True)
def full_descent(c, ct, p, eps, max_moves, budget):
    """:func:`local_search` with the full neighbourhood under a work budget (units of :func:`full_work`
    a move, checked before each evaluation: at most ``budget`` plus one evaluation). ``ct`` is ``c``
    transposed, C-contiguous. ``p`` changes in place; calling again resumes the same descent.
    Returns ``(status, cost, moves, work)``: status 0 at a local minimum or after ``max_moves`` moves, 1
    when the budget ran out first."""
    n = p.shape[0]
    pos = np.empty(n, np.int64)
    fwd = np.empty(n)
    bwd = np.empty(n)
    nbr = np.empty((n, 0), np.int64)
    moves = 0
    work = 0
    status = 0
    while moves < max_moves:
        if work >= budget:
            status = 1
            break
        prefix_sums(c, p, pos, fwd, bwd)
        d, t, i, j, k = _best_move(c, ct, p, pos, fwd, bwd, nbr)
        work += full_work(n)
        if not d < -eps:
            break
        apply_move(p, t, i, j, k)
        moves += 1
    return status, tour_cost(c, p), moves, work


@njit(cache=True)
def ils_round(c, p, cost, nbr, window, eps, max_moves, iters, seed_val, budget):
    """Iterated local search from the local minimum ``p`` (cost ``cost``), at most ``iters`` steps and
    ``budget`` work units: double-bridge on a stretch of ``window`` positions (``window <= 0``: the whole
    tour), :func:`queue_descent` from the touched
    stops, keep the result if it is not worse. A step still running when the budget is spent is abandoned
    and rejected (so the tour returned is a local minimum of a complete descent). Work: :func:`queue_descent`'s
    plus ``n`` a step (the perturbed copy). Returns (tour, cost, improvements, moves, steps, work)."""
    np.random.seed(seed_val)
    n = p.shape[0]
    cur = p.copy()
    cc = cost
    acc = 0
    moves = 0
    steps = 0
    work = 0
    touched = np.empty(6, np.int64)
    pos = np.empty(n, np.int64)
    fwd = np.empty(n)
    bwd = np.empty(n)
    queue = np.empty(n, np.int64)
    inq = np.zeros(n, np.bool_)
    qs = np.zeros(3, np.int64)
    while steps < iters and work < budget:
        q = double_bridge(cur, window, touched)
        work += n
        queue_init(c, q, pos, fwd, bwd, queue, inq, qs, touched)
        status, wk = queue_descent(c, q, pos, fwd, bwd, nbr, eps, max_moves, queue, inq, qs, False,
                                   budget - work)
        work += wk
        moves += qs[2]
        if status == 1:
            break
        steps += 1
        qc = tour_cost(c, q)
        if qc < cc - eps:
            acc += 1
        if qc <= cc + eps:
            cur = q
            cc = qc
    return cur, cc, acc, moves, steps, work


# ------------------------------------------------------------------------------ paced host loops
def candidate_lists_paced(c, K, pacer):
    """:func:`candidate_lists` by chunks of rows, each chunk one call of :func:`candidate_rows` of at most
    the pacer's budget (``n`` units a row, at least one row). Returns int64 (n, K), or None when the
    deadline passed first."""
    n = c.shape[0]
    out = np.empty((n, K), np.int64)
    row = 0
    while row < n:
        b = pacer.budget("candidate_rows")
        if b <= 0:
            return None
        hi = min(n, row + max(1, b // n))
        pacer.spent(candidate_rows(c, K, row, hi, out))
        row = hi
    return out


def nearest_neighbour_paced(c, first, last, pacer):
    """:func:`nearest_neighbour_tour` by chunks of stops (``n`` units a stop). When the deadline passes
    first, the stops not yet placed follow in index order (a valid tour, ``last`` still last). Returns
    ``(tour, complete)``: int64 (n,), bool."""
    n = c.shape[0]
    p = np.empty(n, np.int64)
    used = np.zeros(n, np.bool_)
    m, limit = nearest_neighbour_start(n, first, last, p, used)
    while m < limit:
        b = pacer.budget("nearest_neighbour")
        if b <= 0:
            rest = np.flatnonzero(~used)
            p[m:m + rest.size] = rest
            return p, False
        m, w = nearest_neighbour_steps(c, p, used, m, limit, max(1, b // n))
        pacer.spent(w)
    return p, True


# ------------------------------------------------------------------------------ Or-opt (symmetric costs)
# An LK-style sequential 3-opt move ("Or-opt": Or-opt and 2-opt as its special cases) for a symmetric
# cost matrix, on an array tour with a position index; see :func:`or_step`. The tour is a closed tour
# ``tour`` (int64 (n,)) with ``pos`` its inverse; its orientation carries no meaning (the costs are
# symmetric), so a path is reversed by reversing its shorter side (the complement gives the same cycle).
# Every reversal applied is logged (its positions) so that an ILS step is undone in O(what it touched).

#: most reversals an ILS step may log (kick + descent); a descent stops when its log is full
OR_LOG_CAP = 4096
#: levels of :func:`or_step` (reversals of one move at most) and how many continuations each level tries
#: (closings only at the last). Depth 4 against 3 and 6, mean gap of 4 seeds at 1 CPU-second (2-core
#: machine, one thread): pr1002 0.61 / 1.13 / 0.67 %, pcb3038 0.92 / 0.78 / 0.94 %, fnl4461 0.80 / - / 0.82 %
#: (a tie within the seeds' spread; depth 4 makes 1.4x the kicks of depth 6)
OR_DEPTH = 4
OR_BREADTH = (5, 3, 1, 0)


@njit(cache=True, parallel=True)
def symmetric_rows(c, lo, hi):
    """Whether ``c[u, v] == c[v, u]`` for every row ``u`` in ``lo..hi-1`` (float64 (n, n)); tiles of 32 rows
    read both ``c[u, :]`` and a strip of columns along rows. Returns ``(symmetric, work)``: work ``n`` units
    a row."""
    n = c.shape[0]
    T = 32
    ntiles = (hi - lo + T - 1) // T
    bad = np.zeros(ntiles, np.bool_)
    for tile in prange(ntiles):
        u0 = lo + tile * T
        u1 = min(hi, u0 + T)
        for v in range(u0, n):  # v < u0 is the pair (v, u) of v's own tile
            for u in range(u0, u1):
                if c[u, v] != c[v, u]:
                    bad[tile] = True
    return not bad.any(), (hi - lo) * n


@njit(cache=True, inline="always")
def _succ(tour, pos, v):
    i = pos[v] + 1
    return tour[0] if i == tour.shape[0] else tour[i]


@njit(cache=True, inline="always")
def _pred(tour, pos, v):
    i = pos[v] - 1
    return tour[tour.shape[0] - 1] if i < 0 else tour[i]


@njit(cache=True)
def reverse_positions(tour, pos, i, j):
    """Reverse the cyclic stretch of positions ``i..j`` (forwards, both included; ``i == j + 1`` mod n is
    the whole tour) of ``tour`` and update ``pos``. Self-inverse. Returns the stretch's length."""
    n = tour.shape[0]
    L = j - i
    if L < 0:
        L += n
    L += 1
    for s in range(L // 2):
        a = i + s
        if a >= n:
            a -= n
        b = j - s
        if b < 0:
            b += n
        va = tour[a]
        vb = tour[b]
        tour[a] = vb
        pos[vb] = a
        tour[b] = va
        pos[va] = b
    return L


@njit(cache=True)
def _reverse_path(tour, pos, a, b, log, lgs):
    """Reverse the path from stop ``a`` forwards to stop ``b`` or, when shorter, its complement (the same
    cycle); logs the positions reversed. Returns the stops moved."""
    n = tour.shape[0]
    i = pos[a]
    j = pos[b]
    L = j - i
    if L < 0:
        L += n
    L += 1
    if 2 * L > n:
        i, j = j + 1, i - 1
        if i >= n:
            i -= n
        if j < 0:
            j += n
    log[lgs[0], 0] = i
    log[lgs[0], 1] = j
    lgs[0] += 1
    return reverse_positions(tour, pos, i, j)


@njit(cache=True)
def _move2(tour, pos, t1, t2, t3, t4, log, lgs):
    """The 2-opt move removing ``(t1, t2)``, ``(t4, t3)`` and adding ``(t2, t3)``, ``(t4, t1)``, where ``t2``
    follows ``t1`` and ``t4`` precedes ``t3`` in one orientation of the tour. Returns the stops moved."""
    if _succ(tour, pos, t1) == t2:
        return _reverse_path(tour, pos, t2, t4, log, lgs)
    return _reverse_path(tour, pos, t4, t2, log, lgs)


@njit(cache=True)
def _undo_last(tour, pos, log, lgs):
    lgs[0] -= 1
    return reverse_positions(tour, pos, log[lgs[0], 0], log[lgs[0], 1])


@njit(cache=True)
def _or_scan(c, tour, pos, nbr, t1, t2, g, eps, kt3, kt4, kg, width):
    """One level of :func:`or_step`: the path end ``t2`` next to ``t1`` (the arc ``(t1, t2)`` to remove),
    ``g`` the gain so far with it removed. For each candidate ``t3`` of ``t2`` with ``g - c[t2, t3] > 0``,
    ``t4`` the stop before ``t3`` (orientation: ``t2`` after ``t1``): the closing gain ``g - c[t2, t3] +
    c[t3, t4] - c[t4, t1]``. Returns ``(gain, t3, t4, m)``: the first closing gain above ``eps`` (else
    -inf) and its stops; otherwise the ``width`` best (by ``g - c[t2, t3] + c[t3, t4]``) continuations in
    ``kt3``, ``kt4``, ``kg``, ``m`` of them."""
    K = nbr.shape[1]
    fwd = _succ(tour, pos, t1) == t2
    m = 0
    for q in range(K):
        t3 = nbr[t2, q]
        g1 = g - c[t2, t3]
        if g1 <= eps:
            break  # candidates are sorted by cost: no later one gains
        if t3 == t1:
            continue
        t4 = _pred(tour, pos, t3) if fwd else _succ(tour, pos, t3)
        if t4 == t2:
            continue  # (t2, t3) is an arc of the tour
        gc = g1 + c[t3, t4]
        if gc - c[t4, t1] > eps:
            return gc - c[t4, t1], t3, t4, m
        if width > 0 and (m < width or gc > kg[m - 1]):
            r = m if m < width else width - 1
            while r > 0 and kg[r - 1] < gc:
                kt3[r] = kt3[r - 1]
                kt4[r] = kt4[r - 1]
                kg[r] = kg[r - 1]
                r -= 1
            kt3[r] = t3
            kt4[r] = t4
            kg[r] = gc
            if m < width:
                m += 1
    return -np.inf, -1, -1, m


@njit(cache=True)
def or_step(c, tour, pos, nbr, t1, eps, log, lgs, scratch, tch):
    """Improve the tour at stop ``t1`` by an LK-style sequential move of depth up to :data:`OR_DEPTH` (the
    "Or-opt" move: 2-opt, the sequential 3-opt moves -- Or-opt segment insertions with or without reversal
    among them -- and deeper chains), first improvement; symmetric costs.

    For each neighbour ``t2`` of ``t1`` in the tour, remove ``(t1, t2)``; at each level add an arc
    ``(t2, t3)`` to a candidate ``t3`` of ``t2`` with a positive partial gain (Lin and Kernighan's gain
    criterion) and remove ``(t3, t4)``, ``t4`` the stop that makes closing with ``(t4, t1)`` a tour (a
    2-opt move; the chain of these is the sequential move). A closing that gains more than ``eps`` is kept;
    otherwise the best continuations by partial gain (:data:`OR_BREADTH`: 5 at the first level, 3 at the
    second, 1 at the third) are applied tentatively, searched one level deeper, and undone. Each level is one
    reversal of the shorter side (:func:`reverse_positions`), logged in ``log`` (int64 (cap, 2), ``lgs[0]``
    entries used; the caller leaves at least :data:`OR_DEPTH` free). ``scratch``: float64 (3 OR_DEPTH, 5).

    Returns ``(gain, touched, work)``: the decrease of the tour's cost (0.0: none found, the tour is as it
    was), the stops whose arcs changed (written to ``tch``, int64 (>= 2 OR_DEPTH + 2,)), and the work done
    (one unit a candidate looked at, one a stop moved by a reversal).
    """
    K = nbr.shape[1]
    D = OR_DEPTH
    work = 0
    t2s = np.empty(D + 1, np.int64)  # the path's end at each level
    idx = np.empty(D, np.int64)  # the continuation tried at each level
    cnt = np.empty(D, np.int64)  # ... of how many
    for side in range(2):
        t2 = _succ(tour, pos, t1) if side == 0 else _pred(tour, pos, t1)
        t2s[0] = t2
        gain, t3, t4, m = _or_scan(c, tour, pos, nbr, t1, t2, c[t1, t2], eps, scratch[0], scratch[1],
                                   scratch[2], OR_BREADTH[0])
        work += K
        lvl = 0
        if not gain > eps:
            cnt[0] = m
            idx[0] = 0
            while lvl >= 0:
                if idx[lvl] >= cnt[lvl]:  # this level is done: undo the move that led to it
                    if lvl > 0:
                        work += _undo_last(tour, pos, log, lgs)
                    lvl -= 1
                    if lvl >= 0:
                        idx[lvl] += 1
                    continue
                a = idx[lvl]
                t3 = int(scratch[3 * lvl, a])
                t4 = int(scratch[3 * lvl + 1, a])
                work += _move2(tour, pos, t1, t2s[lvl], t3, t4, log, lgs)
                nl = lvl + 1
                t2s[nl] = t4
                width = OR_BREADTH[nl] if nl < D - 1 else 0
                if width > 0:
                    gain, t5, t6, m = _or_scan(c, tour, pos, nbr, t1, t4, scratch[3 * lvl + 2, a], eps,
                                               scratch[3 * nl], scratch[3 * nl + 1], scratch[3 * nl + 2], width)
                else:  # the deepest level: closings only
                    gain, t5, t6, m = _or_scan(c, tour, pos, nbr, t1, t4, scratch[3 * lvl + 2, a], eps,
                                               scratch[0], scratch[1], scratch[2], 0)
                work += K
                if gain > eps:
                    lvl = nl
                    t3, t4 = t5, t6
                    break
                if m > 0:
                    lvl = nl
                    cnt[lvl] = m
                    idx[lvl] = 0
                else:
                    work += _undo_last(tour, pos, log, lgs)
                    idx[lvl] += 1
        if gain > eps:  # close at level lvl: t3, t4 the last pair
            work += _move2(tour, pos, t1, t2s[lvl], t3, t4, log, lgs)
            h = 0
            tch[h] = t1
            h += 1
            for q in range(lvl + 1):
                tch[h] = t2s[q]
                h += 1
            for q in range(lvl):
                tch[h] = int(scratch[3 * q, idx[q]])
                h += 1
            tch[h] = t3
            tch[h + 1] = t4
            return gain, h + 2, work
    return 0.0, 0, work


@njit(cache=True)
def or_descent(c, tour, pos, nbr, eps, queue, inq, qs, log, lgs, keep_log, budget):
    """Don't-look-bit descent with :func:`or_step`: stops are taken from the FIFO ``queue`` (state as in
    :func:`queue_init`: ``inq``, ``qs`` = (head, size, moves applied)); a stop whose step improves goes back
    with every stop the move touched. Resumable: returns ``(status, gain, work)``, status 0 when the
    queue is empty (a local minimum of the move), 1 when ``budget`` work units were spent (checked
    before each step: at most one step over), 2 when the log is full (``keep_log``: the moves are kept
    in ``log`` for an undo; otherwise the log is reset after each move). ``gain``: the cost decrease."""
    n = tour.shape[0]
    cap = log.shape[0]
    scratch = np.empty((3 * OR_DEPTH, 5))
    tch = np.empty(2 * OR_DEPTH + 2, np.int64)
    work = 0
    gain = 0.0
    while qs[1] > 0:
        if work >= budget:
            return 1, gain, work
        if lgs[0] + OR_DEPTH > cap:
            return 2, gain, work
        u = queue[qs[0]]
        qs[0] = (qs[0] + 1) % n
        qs[1] -= 1
        inq[u] = False
        g, m, w = or_step(c, tour, pos, nbr, u, eps, log, lgs, scratch, tch)
        work += w
        if g > 0.0:
            gain += g
            qs[2] += 1
            if not keep_log:
                lgs[0] = 0
            for h in range(m):
                _push(queue, inq, qs, n, tch[h])
    return 0, gain, work


@njit(cache=True)
def _clear_queue(queue, inq, qs):
    n = queue.shape[0]
    while qs[1] > 0:
        inq[queue[qs[0]]] = False
        qs[0] = (qs[0] + 1) % n
        qs[1] -= 1


@njit(cache=True)
def segment_kick(c, tour, pos, seg, log, lgs, tch):
    """A local double bridge: the adjacent stretches ``B`` and ``C`` (1..``seg`` stops each, at a random
    place; numba's random state) of ``A B C D`` swap places (``A C B D``), done as three logged reversals
    of at most ``2 seg`` positions. Needs ``n >= 4 seg + 4``. Writes the 6 stops whose arcs change to
    ``tch`` and returns ``(delta, work)``: the cost change and the stops moved."""
    n = tour.shape[0]
    i = np.random.randint(0, n)
    l1 = 1 + np.random.randint(0, seg)
    l2 = 1 + np.random.randint(0, seg)
    b0 = (i + 1) % n
    b1 = (i + l1) % n
    c0 = (i + l1 + 1) % n
    c1 = (i + l1 + l2) % n
    d0 = (i + l1 + l2 + 1) % n
    a = tour[i]
    vb0, vb1, vc0, vc1, vd0 = tour[b0], tour[b1], tour[c0], tour[c1], tour[d0]
    delta = (c[a, vc0] + c[vc1, vb0] + c[vb1, vd0]) - (c[a, vb0] + c[vb1, vc0] + c[vc1, vd0])
    work = 0
    for r in range(3):
        if r == 0:
            x, y = b0, c1  # B C -> C' B'
        elif r == 1:
            x, y = b0, (i + l2) % n  # C' -> C
        else:
            x, y = (i + l2 + 1) % n, c1  # B' -> B
        log[lgs[0], 0] = x
        log[lgs[0], 1] = y
        lgs[0] += 1
        work += reverse_positions(tour, pos, x, y)
    tch[0], tch[1], tch[2], tch[3], tch[4], tch[5] = a, vb0, vb1, vc0, vc1, vd0
    return delta, work


@njit(cache=True)
def or_ils(c, tour, pos, cost, nbr, eps, seg, seed_val, budget):
    """Iterated local search from the :func:`or_descent` local minimum ``tour`` (cost ``cost``), in place:
    each step a :func:`segment_kick`, then :func:`or_descent` from the 6 stops it touched only (so a step
    costs what it touches, not O(n)), kept when not worse, else undone by replaying its reversal log
    backwards. Runs until ``budget`` work units are spent (checked before each step and inside the
    descent: a step cut short is kept if not worse, else undone, so the tour stays a permutation and its
    cost is known). Returns ``(cost, steps, improvements, moves, work)``."""
    np.random.seed(seed_val)
    n = tour.shape[0]
    queue = np.empty(n, np.int64)
    inq = np.zeros(n, np.bool_)
    qs = np.zeros(3, np.int64)
    log = np.empty((OR_LOG_CAP, 2), np.int64)
    lgs = np.zeros(1, np.int64)
    tch = np.empty(2 * OR_DEPTH + 2, np.int64)
    steps = 0
    acc = 0
    moves = 0
    work = 0
    while work < budget:
        lgs[0] = 0
        delta, w = segment_kick(c, tour, pos, seg, log, lgs, tch)
        work += w + 6
        for h in range(6):
            _push(queue, inq, qs, n, tch[h])
        qs[2] = 0
        # half the budget left: undoing the step costs at most what its reversals did
        st, g, w = or_descent(c, tour, pos, nbr, eps, queue, inq, qs, log, lgs, True, (budget - work) // 2)
        work += w
        if st != 0:
            _clear_queue(queue, inq, qs)
        moves += qs[2]
        steps += 1
        nc = cost + delta - g
        if nc < cost - eps:
            acc += 1
        if nc <= cost + eps:
            cost = nc
        else:
            while lgs[0] > 0:
                work += _undo_last(tour, pos, log, lgs)
    return cost, steps, acc, moves, work


@njit(cache=True, parallel=True)
def or_ils_chains(c, tours, poss, costs, nbr, eps, seg, seeds, budget, out):
    """:func:`or_ils` on each row of ``tours`` / ``poss`` (int64 (m, n)) at once, one thread a chain
    (``costs`` float64 (m,) updated, ``seeds`` int64 (m,)), ``budget`` work units each; ``out`` int64
    (m, 4) gets (steps, improvements, moves, work) of each chain. Returns the most work of a chain (the
    call's length). Called from Python only (numba issue #8578, see :func:`_best_full`)."""
    m = tours.shape[0]
    for k in prange(m):
        cst, s, a, mv, w = or_ils(c, tours[k], poss[k], costs[k], nbr, eps, seg, seeds[k], budget)
        costs[k] = cst
        out[k, 0] = s
        out[k, 1] = a
        out[k, 2] = mv
        out[k, 3] = w
    return out[:, 3].max()
