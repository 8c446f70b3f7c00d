"""A small population of SISR solutions recombined by route exchange: the CPU CVRP search of
:func:`gpuroute.tours.cvrp` where one annealing chain stalls on short routes.

One SISR annealing chain (:mod:`.vrp_sisr`) on the short-route, tight-capacity X instances (3-8 customers a
route, total demand 95-100 % of the routes' capacity) may reach its final basin early and spend the rest of
the time there (X-n110-k13, seed 0 at 10 s: its last gain at 1.7 s, 0.43 % above the best known), while on
others it improves until the end (X-n219-k73: last gains at 7.6-9.9 s of 10). So where the start's routes
are short (:func:`pop_applies`) the chain runs as before until it has found no new best for
``VRP_POP_STALL`` of the time (counted from ``VRP_POP_STALL_FROM`` on); then its best and
``VRP_POP_SIZE - 1`` fresh chains (each annealed over its share of the first ``VRP_POP_INIT`` of the time
left) make a population, and until the polish each generation takes two members at random, builds a child
by the Selective Route Exchange crossover (:func:`srex`; Nagata and Kobayashi, "A memetic algorithm for the
pickup and delivery problem with time windows using selective route exchange crossover", PPSN XI, 2010,
§3.2), anneals it for ``VRP_POP_CHILD`` of the time from ``VRP_POP_CHILD_T`` of the way down the
temperature schedule to its end, and puts the child's best in place of the worst member when it is better
and its cost is not already there. A chain that does not stall runs exactly as before.

:func:`srex` works on the padded route arrays of :mod:`.vrp_sisr` (``E`` int64 (R, W), ``lens``, routes
``0..nr-1``).
"""
from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["srex", "srex_child", "pop_applies", "VRP_POP_SIZE", "VRP_POP_STALL", "VRP_POP_STALL_FROM",
           "VRP_POP_INIT", "VRP_POP_CHILD", "VRP_POP_CHILD_T", "VRP_POP_ROUTES", "VRP_POP_MAX_ROUTE", "VRP_POP_MIN_N"]

#: population size; 1: one annealing chain throughout (the default: on the 16-core H100 host, 10 s, all 94 X
#: instances, the population (4) was no better than one chain -- 82 of 94 <= PyVRP against the chain's 85 in the
#: previous session's run, the 60 short-route instances 0.713 % against 0.653 % on average; BENCHMARKS.md, "CVRP
#: with a population after a stall"); 4 gains where one chain stalls early (X-n110-k13, X-n148-k46 on the 2-core
#: machine's simulated clock)
VRP_POP_SIZE = 1
#: the population starts when one annealing chain has found no new best for this share of the annealing
#: time (the limit less the polish reserve; the stalled chain's best is a member); 0: from the start
VRP_POP_STALL = 0.2
#: ... counted from this share of the annealing time on (while hot, a chain may stay above the savings
#: start's cost for seconds without being stalled)
VRP_POP_STALL_FROM = 0.3
#: share of the annealing time left in which the fresh members are made, each annealed from the start
#: temperature to the end one over its part of it
VRP_POP_INIT = 0.4
#: share of the annealing time a child is annealed for (each generation)
VRP_POP_CHILD = 0.005
#: a child's annealing starts at ``t0 (tf / t0) ** VRP_POP_CHILD_T`` and cools to ``tf``
VRP_POP_CHILD_T = 0.8
#: routes exchanged by the crossover: 1 to this many (uniform), each parent's routes nearest a random
#: customer
VRP_POP_ROUTES = 5
#: the population runs where the savings start's routes hold at most this many customers on average
#: (the short routes where one chain stalls); 0: never; a large number: always
VRP_POP_MAX_ROUTE = 12.0
#: ... and from this many customers on (under it one chain finds the optimum of the tested instances)
VRP_POP_MIN_N = 30


def pop_applies(customers, routes):
    """Whether :func:`gpuroute.tours.cvrp`'s CPU search uses the population for a start of ``routes``
    non-empty routes over ``customers`` customers (``VRP_POP_SIZE > 1``, at least ``VRP_POP_MIN_N``
    customers, at most ``VRP_POP_MAX_ROUTE`` customers a route on average)."""
    return (VRP_POP_SIZE > 1 and routes > 0 and customers >= VRP_POP_MIN_N
            and customers <= VRP_POP_MAX_ROUTE * routes)


@njit(cache=True)
def _route_of(E, lens, nr, n):
    rt = np.full(n, -1, np.int64)
    for r in range(nr):
        for t in range(1, lens[r] + 1):
            rt[E[r, t]] = r
    return rt


@njit(cache=True)
def srex(C, dem, cap, depot, EA, la, nra, EB, lb, nrb, adj, nsel, keep_b, seed_val, E, lens):
    """Selective Route Exchange: a child of parents A and B in ``E``, ``lens`` (shaped as ``EA``).

    A random customer ``c`` and its nearest customers (``adj[c]``, in order) name the routes exchanged:
    the first ``nsel`` distinct routes of A holding them (set S_A) and of B (S_B). The child is A's routes
    outside S_A plus B's routes in S_B, each customer once: with ``keep_b`` false, the routes of A stay
    whole and S_B's routes lose the customers those hold; with ``keep_b`` true, S_B's routes stay whole and
    A's lose the customers S_B holds. Customers then in no route (those of S_A that S_B's kept part does not
    hold) go one by one, in random order, to their cheapest position in a route with room for them (a new
    route when none has). Every route of the child is within ``cap`` when the parents' are; the order of
    the kept customers in each route is the parent's.

    Parameters
    ----------
    C : float64 (n, n)
        Arc costs, zero diagonal.
    dem : float64 (n,); cap : float
        Demands and capacity.
    EA, la, nra, EB, lb, nrb
        The parents (padded routes, routes ``0..nr-1``; empty routes allowed).
    adj : int64 (n, K)
        Each customer's nearest customers.
    nsel : int
        Routes exchanged (>= 1).
    keep_b : bool
        Which side keeps its routes whole (above).
    seed_val : int
        Seed of numba's random state.
    E, lens : int64 (R, W), int64 (R,)
        The child (out). ``R`` must exceed the number of customers; a route longer than ``W - 2``
        customers is never made (a customer that fits no route by length opens a new one).

    Returns
    -------
    (nr, work) : int
        The child's routes (all non-empty, then one empty route), and the work done (positions evaluated
        + customers copied).
    """
    np.random.seed(seed_val)
    n = C.shape[0]
    R, W = E.shape
    K = adj.shape[1]
    rtA = _route_of(EA, la, nra, n)
    rtB = _route_of(EB, lb, nrb, n)
    selA = np.zeros(nra, np.bool_)
    selB = np.zeros(nrb, np.bool_)
    c = np.random.randint(0, n - 1)
    if c >= depot:
        c += 1
    ka = 0
    kb = 0
    for q in range(-1, K):
        if ka >= nsel and kb >= nsel:
            break
        v = c if q < 0 else adj[c, q]
        if ka < nsel and rtA[v] >= 0 and not selA[rtA[v]]:
            selA[rtA[v]] = True
            ka += 1
        if kb < nsel and rtB[v] >= 0 and not selB[rtB[v]]:
            selB[rtB[v]] = True
            kb += 1
    nr, work = srex_child(C, dem, cap, depot, EA, la, nra, EB, lb, nrb, selA, selB, keep_b,
                          np.random.random(n), E, lens)
    return nr, work + n


@njit(cache=True)
def srex_child(C, dem, cap, depot, EA, la, nra, EB, lb, nrb, selA, selB, keep_b, prio, E, lens):
    """The child of :func:`srex` for the exchanged routes ``selA`` (bool (nra,)) of A and ``selB`` (bool
    (nrb,)) of B: first the routes of A outside ``selA`` (in order), then those of B in ``selB``, each less
    the customers the other side keeps whole (empty ones dropped); then each customer in none of them, by
    increasing ``prio`` (float64 (n,); ties by index), goes to its cheapest position (the first of equal
    cost, routes and positions in order) in a route whose load stays within ``cap`` and that holds fewer
    than ``W - 2`` customers, or to a new route when none costs less than the depot and back. Returns
    (nr, work) as :func:`srex`."""
    n = C.shape[0]
    R, W = E.shape
    # which customers the whole side keeps
    inB = np.zeros(n, np.bool_)  # in a selected route of B
    for r in range(nrb):
        if selB[r]:
            for t in range(1, lb[r] + 1):
                inB[EB[r, t]] = True
    inA = np.zeros(n, np.bool_)  # in a kept route of A
    for r in range(nra):
        if not selA[r]:
            for t in range(1, la[r] + 1):
                inA[EA[r, t]] = True
    placed = np.zeros(n, np.bool_)
    load = np.zeros(R)
    nr = 0
    work = 0
    for side in range(2):
        for r in range(nra if side == 0 else nrb):
            if side == 0 and selA[r] or side == 1 and not selB[r]:
                continue
            m = la[r] if side == 0 else lb[r]
            w = 0
            for t in range(1, m + 1):
                v = EA[r, t] if side == 0 else EB[r, t]
                if side == 0 and keep_b and inB[v] or side == 1 and not keep_b and inA[v]:
                    continue
                w += 1
                E[nr, w] = v
                placed[v] = True
                load[nr] += dem[v]
            work += m
            if w > 0:
                E[nr, 0] = depot
                E[nr, w + 1] = depot
                lens[nr] = w
                nr += 1
            else:
                load[nr] = 0.0
    rem = np.empty(n, np.int64)
    nrem = 0
    for v in range(n):
        if v != depot and not placed[v]:
            rem[nrem] = v
            nrem += 1
    o = np.argsort(prio[rem[:nrem]], kind="mergesort")
    rem[:nrem] = rem[:nrem][o]
    for q in range(nrem):
        x = rem[q]
        best = C[depot, x] + C[x, depot]
        br = -1
        bb = 0
        for r in range(nr):
            m = lens[r]
            if load[r] + dem[x] > cap or m + 2 >= W:
                continue
            for b in range(m + 1):
                d = C[E[r, b], x] + C[x, E[r, b + 1]] - C[E[r, b], E[r, b + 1]]
                if d < best:
                    best = d
                    br = r
                    bb = b
            work += m + 1
        if br < 0:
            br = nr
            nr += 1
            E[br, 0] = depot
            E[br, 1] = depot
            lens[br] = 0
            load[br] = 0.0
        m = lens[br]
        for t in range(m + 1, bb, -1):
            E[br, t + 1] = E[br, t]
        E[br, bb + 1] = x
        lens[br] = m + 1
        load[br] += dem[x]
        work += m + nr
    E[nr, 0] = depot
    E[nr, 1] = depot
    lens[nr] = 0
    return nr + 1, work
