"""CVRP search by Slack Induction by String Removals (SISR; Christiaens and Vanden Berghe, "Slack Induction
by String Removals for Vehicle Routing Problems", Transportation Science 54(2), 2020): the CPU search of
:func:`gpuroute.tours.cvrp`.

One step ruins the current solution by removing a few *strings* (runs of consecutive customers) from
routes near a random seed customer (§5.2: the string and split-string removals), recreates it by greedy
insertion with blinks (§5.3: each removed customer, in one of four orders, goes to its cheapest feasible
position, each position skipped with probability ``blink``), and accepts the result by simulated annealing
(§5.1: accepted when ``new < current - T ln U``; the caller lowers ``T`` geometrically with the time
used). The best solution seen is kept. A rejected step is undone from a log of the routes it touched, so
a step costs what it touches, not what the solution holds. Options off by default (measured, no gain on
issue 23's 10-s misses; BENCHMARKS.md): reinsertion into the routes of the nearest customers only
(``SISR_NEAR``), routes above capacity at an adaptive cost a unit (``SISR_PEN``; the best stays within).

:func:`sisr_chains` runs several such chains at once, one a numba thread (``cvrp(..., chains=K)``); every
``SISR_CHAINS_SYNC`` of the annealing time the caller restarts them all from the best solution of all.

State (as :mod:`gpuroute.tours.cvrp`'s): routes in a padded array ``E`` (int64 (R, W)): route ``r`` has
``lens[r]`` customers at ``E[r, 1..lens[r]]`` and the depot at ``E[r, 0]`` and ``E[r, lens[r] + 1]``;
routes ``0..nr-1`` are in use (some may be empty here; :func:`gpuroute.tours.cvrp.normalize` compacts
them). Per route ``load`` (float64 (R,)) and ``rcost`` (float64 (R,): the route's cost, depot to depot);
per stop ``rt`` and ``ps`` (int64 (n,)): its route and position (-1 for the depot and removed stops).
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

__all__ = ["sisr_init", "sisr_steps", "sisr_chains", "overload_penalty", "adapt_penalty", "temperature_unit", "SISR_CBAR",
           "SISR_LMAX", "SISR_BLINK", "SISR_SPLIT", "SISR_NEAR", "SISR_PEN", "SISR_FEASIBLE", "SISR_PEN_STEP",
           "SISR_T0", "SISR_TF", "SISR_TSCALE", "SISR_LONG_ROUTE", "SISR_LONG_HEAT",
           "SISR_CHAINS_SYNC"]

#: average number of customers a ruin removes (the paper's c-bar)
SISR_CBAR = 10.0
#: longest string removed (L^max)
SISR_LMAX = 10.0
#: probability to skip an insertion position (beta, the blink rate)
SISR_BLINK = 0.01
#: probability of the split-string removal (else the string removal)
SISR_SPLIT = 0.5
#: a removed customer is reinserted into the routes of its nearest customers (this many of its nearest
#: customers' routes; all routes when none of them has room): positions far away are not looked at; 0:
#: every route (the paper's search)
SISR_NEAR = 0
#: cost of one unit of load above capacity at the start, as a multiple of (mean arc cost of the start
#: solution) / (mean customer demand); 0: no route above capacity, ever (the paper's search). The annealing
#: may then pass through overloaded solutions (as the penalised searches of Vidal et al.'s HGS and PyVRP
#: do); the cost adapts (:func:`adapt_penalty`) so that about ``SISR_FEASIBLE`` of the steps end within capacity
SISR_PEN = 0.0
#: target share of steps whose current solution is within capacity
SISR_FEASIBLE = 0.5
#: the penalty's factor up or down after each call of :func:`sisr_steps`
SISR_PEN_STEP = 1.2

#: start and end temperatures of the annealing, as fractions of the unit ``SISR_TSCALE`` names (the paper's
#: T0 = 100 and Tf = 1 on X instances, whose arcs average ~50-250 and customers lie ~200-580 apart on average)
SISR_T0 = 0.5
SISR_TF = 0.003
#: the temperatures' unit (:func:`temperature_unit`): 0: the mean arc cost of the start solution (depot arcs
#: included: with many short routes it is mostly the depot's distance); 1: the mean cost between two customers
SISR_TSCALE = 0
#: with long routes (the start solution's customers per route >= ``SISR_LONG_ROUTE``) both temperatures are
#: ``SISR_LONG_HEAT`` times higher (:func:`temperature_unit`): there the mean arc is about the arcs between
#: customers, while many short routes' mean arc is mostly the depot's distance, which already makes their
#: unit larger. 10-s runs on the 2-core VM (2026-11-26, session 22, seeds paired): X-n190-k8 (24 customers a
#: route) 0.11-0.24 % at twice the temperature against 0.25-0.78 % (6 runs each), X-n308-k13 1.51 / 2.48 %
#: against 1.98 / 2.84 %; 1: off
SISR_LONG_ROUTE = 12.0
SISR_LONG_HEAT = 2.0
#: several chains (gpuroute.tours.cvrp's ``chains``, :func:`sisr_chains`): every this share of the annealing
#: time every chain goes on from the best solution of all; 0: independent chains (the best of them returned).
#: Measured on the 2-core VM under a virtual clock (the 16-core host's steps a second, one core a chain; 8 of
#: issue 23's 10-s misses, 2026-11-27, BENCHMARKS.md), mean gap: 2 chains (4 seeds) 0.488 % at 0.1, 0.517 %
#: independent, 0.579 % at 0.03 and 0.647 % at 0.2 (2 seeds); 4 chains (4 seeds) 0.336 % at 0.1, 0.372 %
#: independent; 8 chains (2 seeds) 0.291 % at 0.1, 0.292 % independent; one chain 0.617 %: within the seeds'
#: spread, 0.1 by its small lead at 2 and 4 chains
SISR_CHAINS_SYNC = 0.1


def temperature_unit(C, depot, cost, arcs, routes):
    """The unit of ``SISR_T0`` and ``SISR_TF`` (cost units) for a start solution of ``cost`` over ``arcs``
    arcs in ``routes`` non-empty routes (``arcs - routes`` customers): ``SISR_TSCALE`` 0: ``cost / arcs``;
    1: the mean of ``C[u, v]`` over ordered pairs of distinct customers (``C``: float64 (n, n), zero
    diagonal; ``cost / arcs`` under 3 stops); times ``SISR_LONG_HEAT`` when the routes hold
    ``SISR_LONG_ROUTE`` customers or more on average. Raises ValueError for another ``SISR_TSCALE``."""
    if SISR_TSCALE not in (0, 1):
        raise ValueError(f"SISR_TSCALE must be 0 or 1, got {SISR_TSCALE!r}")
    n = C.shape[0]
    if SISR_TSCALE == 0 or n < 3:
        unit = cost / max(1, arcs)
    else:
        tot = float(C.sum()) - float(C[depot].sum()) - float(C[:, depot].sum()) + float(C[depot, depot])
        unit = tot / ((n - 1) * (n - 2))
    if routes > 0 and (arcs - routes) >= SISR_LONG_ROUTE * routes:
        unit *= SISR_LONG_HEAT
    return unit


def overload_penalty(arc, dem, depot):
    """The start's cost of one unit of load above capacity: ``SISR_PEN * arc / (mean customer demand)``
    (``arc``: the start solution's mean arc cost); 0 (no overload) when ``SISR_PEN`` is 0 or no customer has
    a demand."""
    d = np.delete(np.asarray(dem, np.float64), depot)
    md = float(d.mean()) if d.size else 0.0
    return float(SISR_PEN) * arc / md if SISR_PEN > 0 and md > 0 else 0.0


def adapt_penalty(pen, feasible, steps):
    """The overload penalty after a call of ``steps`` steps of which ``feasible`` ended within capacity:
    times ``SISR_PEN_STEP`` below the target share ``SISR_FEASIBLE``, divided by it above; 0 stays 0."""
    if pen <= 0 or steps <= 0:
        return pen
    return pen * SISR_PEN_STEP if feasible < SISR_FEASIBLE * steps else pen / SISR_PEN_STEP


@njit(cache=True)
def _route_cost(C, E, r, m):
    s = 0.0
    for t in range(m + 1):
        s += C[E[r, t], E[r, t + 1]]
    return s


@njit(cache=True)
def _gap(lb):
    """Positions evaluated before the next blink: geometric with ``lb = ln(1 - blink)`` (each position
    blinks with probability ``blink``, independently; one draw a blink, not one a position)."""
    if lb == 0.0:
        return 1 << 62
    return int(np.log(1.0 - np.random.random()) / lb)


@njit(cache=True)
def sisr_init(C, dem, E, lens, nr, load, rcost, rt, ps):
    """Fill ``load``, ``rcost``, ``rt``, ``ps`` for routes ``0..nr-1``; returns the total cost."""
    rt[:] = -1
    ps[:] = -1
    tot = 0.0
    for r in range(nr):
        m = lens[r]
        ld = 0.0
        for t in range(1, m + 1):
            v = E[r, t]
            rt[v] = r
            ps[v] = t
            ld += dem[v]
        load[r] = ld
        rcost[r] = _route_cost(C, E, r, m)
        tot += rcost[r]
    return tot


@njit(cache=True)
def _touch(r, E, lens, load, rcost, touched, bkE, bkl, bkload, bkcost, ids, nt):
    """Log route r (once a step) before it changes; returns the new count of logged routes."""
    if touched[r]:
        return nt
    touched[r] = True
    m = lens[r]
    for t in range(m + 2):
        bkE[nt, t] = E[r, t]
    bkl[nt] = m
    bkload[nt] = load[r]
    bkcost[nt] = rcost[r]
    ids[nt] = r
    return nt + 1


@njit(cache=True)
def _remove_positions(C, dem, E, lens, load, rcost, rt, ps, r, lo, hi, keep_lo, keep_hi, out, nout):
    """Remove the customers at positions lo..hi of route r except keep_lo..keep_hi (an empty keep when
    keep_lo > keep_hi) into ``out``; returns the new count in ``out``."""
    m = lens[r]
    w = lo
    for t in range(lo, m + 1):
        v = E[r, t]
        if t <= hi and not (keep_lo <= t <= keep_hi):
            out[nout] = v
            nout += 1
            rt[v] = -1
            ps[v] = -1
            load[r] -= dem[v]
        else:
            E[r, w] = v
            ps[v] = w
            w += 1
    E[r, w] = E[r, 0]
    lens[r] = w - 1
    rcost[r] = _route_cost(C, E, r, w - 1)
    return nout


@njit(cache=True)
def _order_removed(C, dem, depot, rem, nrem):
    """SISR's insertion orders, weights 4 : 4 : 2 : 1: random, largest demand first, farthest from the
    depot first, closest first (ties in random order: a shuffle first, then a stable sort)."""
    np.random.shuffle(rem[:nrem])
    u = np.random.random() * 11.0
    if u < 4.0:
        return
    key = np.empty(nrem)
    for q in range(nrem):
        x = rem[q]
        if u < 8.0:
            key[q] = -dem[x]
        elif u < 10.0:
            key[q] = -(C[depot, x] + C[x, depot])
        else:
            key[q] = C[depot, x] + C[x, depot]
    o = np.argsort(key, kind="mergesort")
    tmp = rem[:nrem].copy()
    for q in range(nrem):
        rem[q] = tmp[o[q]]


@njit(cache=True)
def _scan_route(C, E, m, r, x, extra, best, br, bb, skip, lb):
    """Cheapest insertion of x between two stops of route r (m customers) with blinks, ``extra`` (the
    overload penalty) added to each: returns the best (cost increase, route, position) so far and the
    positions left before the next blink."""
    for b in range(m + 1):
        if skip == 0:  # a blink: this position is not evaluated
            skip = _gap(lb)
            continue
        skip -= 1
        u = E[r, b]
        v = E[r, b + 1]
        d = C[u, x] + C[x, v] - C[u, v] + extra
        if d < best:
            best = d
            br = r
            bb = b
    return best, br, bb, skip


@njit(cache=True)
def _over(ld, cap):
    return ld - cap if ld > cap else 0.0


@njit(cache=True)
def _extra(ld, dx, cap, pen):
    """Penalty added by dx more load on a route of load ld; -1 when not allowed (``pen <= 0``)."""
    if ld + dx <= cap:
        return 0.0
    if pen <= 0.0:
        return -1.0
    return pen * (_over(ld + dx, cap) - _over(ld, cap))


@njit(cache=True)
def sisr_steps(C, dem, cap, depot, E, lens, load, rcost, rt, ps, st, cost, bestE, bestl, adj, temp, iters, budget,
               seed_val, cbar, lmax, blink, split, near_routes, pen):
    """At most ``iters`` SISR steps and about ``budget`` work units (checked before each step; a step is
    at most ``(removed + 1) (N + nr + near_routes)`` units: its removals and one insertion scan a removed
    customer).

    Parameters
    ----------
    C : float64 (n, n)
        Arc costs, zero diagonal.
    dem : float64 (n,)
        Demands (the depot's 0); ``cap`` the capacity.
    E, lens, load, rcost, rt, ps
        The current solution (module docstring; :func:`sisr_init` fills the last four), changed in place.
    st : int64 (2,)
        ``st[0]``: routes in use of the current solution; ``st[1]``: of the best (rows of ``bestE``).
    cost : float64 (2,)
        Current and best cost (the best's routes in ``bestE``, ``bestl``: shaped as ``E``, ``lens``); the
        current one is recomputed on entry (with this call's ``pen``), the best is always within capacity.
    adj : int64 (n, K)
        Each customer's nearest customers (the seed's neighbourhood of the ruin).
    temp : float
        Annealing temperature of these steps (cost units).
    seed_val : int
        Seed of numba's random state for these steps.
    cbar, lmax, blink, split : float
        Average removed customers, longest string, blink rate, split-string probability.
    near_routes : int
        Insertion positions looked at for a removed customer ``x``: those of the routes holding one of
        ``x``'s first ``near_routes`` customers in ``adj`` with room for ``x``; every route with room when
        none has (or ``near_routes`` is 0: the paper's full scan).
    pen : float
        Cost per unit of load above ``cap`` (routes of the current solution may carry more than ``cap``,
        the annealing compares costs plus these penalties; a new best solution is within capacity); 0 or
        less: no route above ``cap`` (the paper's search). A route never holds more than ``W - 2``
        customers.

    Returns
    -------
    (steps, accepted, improvements, feasible, work) : int
        Steps done, steps accepted, new best solutions, steps after which the current solution is within
        capacity, work units (positions evaluated + customers moved).
    """
    np.random.seed(seed_val)
    n = C.shape[0]
    R, W = E.shape
    K = adj.shape[1]
    touched = np.zeros(R, np.bool_)
    ruined = np.zeros(R, np.bool_)
    bkE = np.empty((R, W), np.int64)
    bkl = np.empty(R, np.int64)
    bkload = np.empty(R)
    bkcost = np.empty(R)
    ids = np.empty(R, np.int64)
    rem = np.empty(n, np.int64)
    mark = np.zeros(R, np.int64)  # route r was looked at for the current customer when mark[r] == stamp
    stamp = 0
    kn = min(K, near_routes)
    lb = np.log(1.0 - blink) if blink > 0 else 0.0
    skip = _gap(lb)
    steps = 0
    acc = 0
    imp = 0
    feas = 0
    work = 0
    over = 0.0  # total load above capacity of the current solution
    cur = 0.0
    for r in range(st[0]):
        over += _over(load[r], cap)
        cur += rcost[r]
    if pen > 0.0:
        cur += pen * over
    cost[0] = cur
    tol = 1e-9 * max(1.0, cap)
    while steps < iters and work < budget:
        nr = st[0]
        N = 0
        used = 0
        for r in range(nr):
            N += lens[r]
            if lens[r] > 0:
                used += 1
        # ---- ruin (Algorithm 2)
        lsmax = min(lmax, N / max(1, used))
        ksmax = 4.0 * cbar / (1.0 + lsmax) - 1.0
        ks = int(np.random.random() * ksmax) + 1
        cs = np.random.randint(0, n - 1)
        if cs >= depot:
            cs += 1
        nt = 0
        nrem = 0
        strings = 0
        for q in range(-1, K):
            if strings >= ks:
                break
            c = cs if q < 0 else adj[cs, q]
            r = rt[c]
            if r < 0 or ruined[r]:
                continue
            m = lens[r]
            ltmax = min(float(m), lsmax)
            lt = int(np.random.random() * ltmax) + 1
            nt = _touch(r, E, lens, load, rcost, touched, bkE, bkl, bkload, bkcost, ids, nt)
            ruined[r] = True
            strings += 1
            p = ps[c]
            if lt < m and np.random.random() < split:
                mm = 1  # customers kept inside the window (split string)
                while mm < m - lt and np.random.random() < 0.5:
                    mm += 1
                span = lt + mm
                lo_min = max(1, p - span + 1)
                lo = lo_min + np.random.randint(0, min(p, m - span + 1) - lo_min + 1)
                klo = lo + np.random.randint(0, lt + 1)
                nrem = _remove_positions(C, dem, E, lens, load, rcost, rt, ps, r, lo, lo + span - 1, klo,
                                         klo + mm - 1, rem, nrem)
            else:
                lo_min = max(1, p - lt + 1)
                lo = lo_min + np.random.randint(0, min(p, m - lt + 1) - lo_min + 1)
                nrem = _remove_positions(C, dem, E, lens, load, rcost, rt, ps, r, lo, lo + lt - 1, 1, 0, rem, nrem)
            work += m
        # ---- recreate (Algorithm 3: greedy insertion with blinks)
        _order_removed(C, dem, depot, rem, nrem)
        for q in range(nrem):
            x = rem[q]
            dx = dem[x]
            best = C[depot, x] + C[x, depot]  # a new route
            br = -1
            bb = 0
            stamp += 1
            found = False
            for j in range(kn):  # the routes of x's nearest customers first
                r = rt[adj[x, j]]
                if r < 0 or mark[r] == stamp:
                    continue
                mark[r] = stamp
                ex = _extra(load[r], dx, cap, pen)
                if ex < 0.0 or lens[r] + 2 >= W:
                    continue
                found = True
                best, br, bb, skip = _scan_route(C, E, lens[r], r, x, ex, best, br, bb, skip, lb)
                work += lens[r] + 1
            work += kn
            if not found:  # none of them (or no list): every route
                for r in range(nr):
                    m = lens[r]
                    if m == 0 or mark[r] == stamp or m + 2 >= W:
                        continue
                    ex = _extra(load[r], dx, cap, pen)
                    if ex < 0.0:
                        continue
                    best, br, bb, skip = _scan_route(C, E, m, r, x, ex, best, br, bb, skip, lb)
                    work += m + 1
                work += nr
            if br < 0:  # open a route: an empty one in use, else a new row
                for r in range(nr):
                    if lens[r] == 0:
                        br = r
                        break
                if br < 0:
                    br = nr
                    nr += 1
                    E[br, 0] = depot
                    E[br, 1] = depot
                    lens[br] = 0
                    load[br] = 0.0
                    rcost[br] = 0.0
                bb = 0
            nt = _touch(br, E, lens, load, rcost, touched, bkE, bkl, bkload, bkcost, ids, nt)
            m = lens[br]
            u = E[br, bb]
            v = E[br, bb + 1]
            rcost[br] += C[u, x] + C[x, v] - C[u, v]  # best less the penalty
            for t in range(m + 1, bb, -1):
                E[br, t + 1] = E[br, t]
                ps[E[br, t + 1]] = t + 1
            E[br, bb + 1] = x
            rt[x] = br
            ps[x] = bb + 1
            lens[br] = m + 1
            load[br] += dx
            work += m
        # ---- accept (simulated annealing) or undo
        delta = 0.0
        dover = 0.0
        for s in range(nt):
            r = ids[s]
            delta += rcost[r] - bkcost[s]
            dover += _over(load[r], cap) - _over(bkload[s], cap)
        if pen > 0.0:
            delta += pen * dover
        new = cost[0] + delta
        steps += 1
        if new < cost[0] - temp * np.log(1.0 - np.random.random()):
            acc += 1
            cost[0] = new
            st[0] = nr
            over += dover
            if over < tol:
                over = 0.0
            if over == 0.0 and new < cost[1] - 1e-9 * max(1.0, abs(cost[1])):
                imp += 1
                new = 0.0  # the sum afresh (no drift of the step deltas in the best's cost)
                st[1] = nr
                for r in range(nr):
                    m = lens[r]
                    bestl[r] = m
                    new += rcost[r]
                    for t in range(m + 2):
                        bestE[r, t] = E[r, t]
                cost[0] = new
                cost[1] = new
                work += nr
        else:
            for s in range(nt):
                r = ids[s]
                m = bkl[s]
                for t in range(m + 2):
                    E[r, t] = bkE[s, t]
                    if 1 <= t <= m:
                        rt[E[r, t]] = r
                        ps[E[r, t]] = t
                lens[r] = m
                load[r] = bkload[s]
                rcost[r] = bkcost[s]
            for r in range(st[0], nr):  # rows opened by this step
                lens[r] = 0
        if over == 0.0:
            feas += 1
        for s in range(nt):
            touched[ids[s]] = False
            ruined[ids[s]] = False
        work += nt
    return steps, acc, imp, feas, work


@njit(cache=True, parallel=True)
def sisr_chains(C, dem, cap, depot, E, lens, load, rcost, rt, ps, st, cost, bestE, bestl, adj, temp, iters, budget,
                seeds, cbar, lmax, blink, split, near_routes, pen, out):
    """:func:`sisr_steps` on ``K`` independent chains at once, one numba thread a chain (a ``prange`` over
    the chains; each chain's numba random state is its thread's, seeded by the call). Every state array has
    one more leading axis of length ``K`` (``E``, ``bestE`` int64 (K, R, W); ``lens``, ``bestl`` int64
    (K, R); ``load``, ``rcost`` float64 (K, R); ``rt``, ``ps`` int64 (K, n); ``st`` int64 (K, 2);
    ``cost`` float64 (K, 2)); ``seeds`` int64 (K,) and ``pen`` float64 (K,) are per chain; ``temp``,
    ``iters``, ``budget`` (work units of each chain) and the rest are shared. Chain ``k`` does exactly what
    :func:`sisr_steps` does on its slices with ``seeds[k]`` and ``pen[k]``. ``out`` int64 (K, 5) gets each
    chain's (steps, accepted, improvements, feasible, work). Returns the most work of a chain (the call's
    length). Called from Python only (as :func:`gpuroute.tours.local_search.or_ils_chains`)."""
    K = E.shape[0]
    for k in prange(K):
        s, a, i, f, w = sisr_steps(C, dem, cap, depot, E[k], lens[k], load[k], rcost[k], rt[k], ps[k], st[k],
                                   cost[k], bestE[k], bestl[k], adj, temp, iters, budget, seeds[k], cbar, lmax,
                                   blink, split, near_routes, pen[k])
        out[k, 0] = s
        out[k, 1] = a
        out[k, 2] = i
        out[k, 3] = f
        out[k, 4] = w
    return out[:, 4].max()
