"""Via-node alternative routes on the customized overlay (OSRM's ``alternatives=``, its MLD flavour).

Abraham, Delling, Goldberg, Werneck, "Alternative routes in road networks" (ACM JEA 18, 2013), sec. 2-4:
an alternative is the concatenation of the shortest path from the source to a *via* vertex ``v`` and the
shortest path from ``v`` to the target; it is *admissible* when

* its cost is at most ``(1 + stretch)`` times the shortest route's (bounded stretch, sec. 2);
* the cost it shares with the shortest route and the alternatives chosen before it is at most ``sharing``
  times the shortest route's cost (limited sharing);
* it passes the T-test around ``v`` with ``T = alpha`` times the shortest route's cost (local optimality,
  sec. 3.1): ``x`` the last arc at least ``T`` before ``v`` on it (else its first arc), ``y`` the first arc at
  least ``T`` after ``v`` (else its last), the subpath from ``x`` to ``y`` is a shortest path. With the
  halves shortest paths, every subpath of cost ``T`` through ``v`` then is one.

As OSRM's MLD implementation (``alternative_path_mld.cpp``) the candidate vias are the states where a
forward search from the source's options and a backward search from the target's options overlap, both
run on the overlay's multi-level search graph (:func:`gpuroute.crp.search.bidir_states`'s levels, the
cells of every option's head kept open): the vias are boundary arcs of the overlay's cells (and arcs of the
source's and target's cells). Each side runs until its queue minimum plus the other side's least start
label passes the stretch bound, so every via within it is settled by both: its ``forward + backward``
label is the cost of a real path whose halves are shortest paths. Candidates are ranked by that cost;
those on the shortest route's packed path, or on a candidate path taken before, are dropped (their path is
that one, or nearly); of the packed paths left (at most :data:`PACKED_PER_UNPACKED` times ``candidates``),
those whose packed edges shared with the shortest route and the alternatives taken cost more than
``sharing`` are dropped (OSRM's packed filter; an overlay edge's cost is its subpath's), and the rest
unpacked (:meth:`gpuroute.crp.OverlayQuery._unpacked`), at most ``candidates`` of them, and tested in cost
order: no arc twice, sharing, then the T-test (one bidirectional overlay search each) at the via, and where
that fails at the middle of the path's plateau (its other vias: packed states settled by both searches at
its cost). States are arcs
(the arc-based turn model of :mod:`gpuroute.crp.search`), so turn costs and restrictions hold on every
alternative. Only states of the packed path are vias: a path whose T-test passes only at an arc inside a
clique edge is not found (OSRM MLD's limit too).

Labels are integers in ``1 / scale`` of the metric's unit, as :func:`gpuroute.crp.phantom_search.search`'s
(the caller's start costs and offsets come from :func:`gpuroute.crp.phantom_search.leg_seeds`); turn and
clique costs are multiplied by ``scale`` when relaxed.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numba import njit

from .. import config
from ..graph.constants import INF
from .phantom_search import SCALE, SEARCHES, seed_arrays, seed_states, tree_numbering
from .search import bidir_kernel, bidir_states, reset

__all__ = ["alternatives", "Alternative", "AlternativeSet", "PACKED_PER_UNPACKED", "settings", "t_window"]

#: Packed candidate paths read from the searches per path unpacked: the packed sharing filter (the edges a
#: candidate shares with the shortest route and the alternatives taken, each edge's cost its subpath's) drops
#: most candidates before they are unpacked.
PACKED_PER_UNPACKED = 8


def settings(stretch=None, sharing=None, alpha=None, candidates=None):
    """The admissibility parameters of an alternatives query, ``None`` taking ``config.SERVE_ALTERNATIVES_STRETCH``,
    ``_SHARING``, ``_ALPHA``, ``_CANDIDATES``: ``(stretch, sharing, alpha, candidates)`` as float, float, float,
    int (the stretch and sharing bounds are fractions of the shortest route's cost, ``T = alpha`` times it)."""
    return (float(config.SERVE_ALTERNATIVES_STRETCH if stretch is None else stretch),
            float(config.SERVE_ALTERNATIVES_SHARING if sharing is None else sharing),
            float(config.SERVE_ALTERNATIVES_ALPHA if alpha is None else alpha),
            int(config.SERVE_ALTERNATIVES_CANDIDATES if candidates is None else candidates))


@njit(cache=True)
def t_window(cum, iv, T):
    """The T-test's subpath around the via (Abraham et al. sec. 3.1): ``cum`` (k,) the path's costs at the
    end of each of its arcs (ascending), ``iv`` the via's position, ``T`` a cost. Returns ``(x, y)``: ``x``
    the last position at least ``T`` before ``iv`` (else 0), ``y`` the first at least ``T`` after it (else
    ``k - 1``)."""
    x = 0
    for i in range(iv, -1, -1):
        if cum[iv] - cum[i] >= T:
            x = i
            break
    y = cum.size - 1
    for i in range(iv, cum.size):
        if cum[i] - cum[iv] >= T:
            y = i
            break
    return x, y


@dataclass
class Alternative:
    """One admissible alternative path.

    Attributes
    ----------
    arcs : ndarray int64 (k,)
        Graph arcs from a seed's arc to a target's arc, both included (k >= 2).
    seed : int
        Index into the seeds given of the arc it leaves by (``arcs[0]``).
    target : int
        Index into the targets given of the arc it arrives by (``arcs[-1]``).
    via : int
        Position in ``arcs`` of the via arc (where the two searches met).
    cost : int
        ``seed cost + turn costs (x scale) + target offset``, in ``1 / scale`` of the metric's unit.
    shared : int
        The cost of its pieces (departure piece: its seed cost; arrival piece: ``scale c(b) + offset``;
        others ``scale c``) on arcs of the shortest route or an alternative before it, ``1 / scale`` units.
    test : tuple of int
        ``(x, y)``: the positions in ``arcs`` of the T-test's subpath ends.
    """

    arcs: np.ndarray
    seed: int
    target: int
    via: int
    cost: int
    shared: int
    test: tuple


@dataclass
class AlternativeSet:
    """What :func:`alternatives` found: ``routes`` (list of :class:`Alternative`, ascending cost), ``best``
    (int, the shortest route's cost, ``1 / scale`` units; INF: no route), ``scale``, and ``stats``
    (``{"candidates": vias within the stretch bound, "unpacked": paths unpacked, "tested": T-tests run,
    "settled": states settled by the overlap search}``)."""

    routes: list
    best: int
    scale: int
    stats: dict = field(default_factory=dict)


@njit(cache=True)
def _overlap(keep, src, scost, dst, dcost, stretch, scale, tfirst, tout, tcost, rfirst, rin, rturn, hc, tc,
             entry_idx, exit_idx, cell_base, ent_first, ent_arc, ex_first, ex_arc, cq_first, clique,
             R, touched, hk, hv, hk2, hv2):
    """The forward search from ``src`` (labels ``scost``) and the backward search from ``dst`` (``dcost``)
    on the overlay's search graph (the records, levels and edges of :func:`gpuroute.crp.search.bidir_states`,
    every edge cost times ``scale``), alternating by the smaller queue minimum; a side stops once its minimum
    plus the other side's least start label passes ``limit = best + floor(stretch best)`` (``best`` the least
    meeting cost so far), so that every state ``v`` with ``d_f(v) + d_b(v) <= limit`` is settled by both:
    its labels are its exact distances and both halves of the path through it are shortest paths.

    Returns ``(best, nt, settled, overflow, cand, ccost)``: ``cand`` int64 the states settled by both
    searches with ``forward + backward <= limit``, sorted by that sum (``ccost``), ties by state;
    the records stay in ``R`` (``nt`` touched states) for :func:`_chains`; the caller resets them."""
    best, _, nt, limit, settled, overflow = bidir_kernel(
        True, stretch, scale, keep, src, scost, dst, dcost, tfirst, tout, tcost, rfirst, rin, rturn, hc, tc,
        entry_idx, exit_idx, cell_base, ent_first, ent_arc, ex_first, ex_arc, cq_first, clique, R, touched, hk, hv,
        hk2, hv2)
    n = 0
    for i in range(nt):
        a = touched[i]
        if R[8 * a + 2] == -2 and R[8 * a + 3] == -2 and R[8 * a] + R[8 * a + 1] <= limit:
            n += 1
    cand = np.empty(n, np.int64)
    ccost = np.empty(n, np.int64)
    n = 0
    for i in range(nt):
        a = touched[i]
        if R[8 * a + 2] == -2 and R[8 * a + 3] == -2 and R[8 * a] + R[8 * a + 1] <= limit:
            cand[n] = a
            ccost[n] = R[8 * a] + R[8 * a + 1]
            n += 1
    o = np.argsort(cand)  # by state, then (stable) by cost: equal costs in state order
    cand = cand[o]
    ccost = ccost[o]
    o = np.argsort(ccost, kind="mergesort")
    return best, nt, settled, overflow, cand[o], ccost[o]


@njit(cache=True)
def _chains(cand, limit, R, m):
    """The packed paths through the candidate vias ``cand`` (in order) from the records of :func:`_overlap`:
    the first candidate's (the shortest route's), then those of the candidates that lie on no path taken
    before, at most ``limit`` of them.

    Returns ``(cfirst, cstates, crefs, ccost, cplat, cvia)``: path ``j`` is ``cstates[cfirst[j]:cfirst[j +
    1]]`` (states from a seed to a target), ``crefs[p]`` the edge into ``cstates[p]`` (a turn position or ``-(1
    + clique position)``: an edge's unique id; the first of each path -1) and ``ccost[p]`` its cost (label
    units; the first of each path: its seed's label), ``cplat[p]`` whether ``cstates[p]`` is on the path's
    plateau (settled by both searches, ``forward + backward`` the path's cost: a via of the same path, both
    halves shortest), ``cvia[j]`` its via's index in ``cand``."""
    on = np.zeros(m, np.bool_)
    cap = 1024
    cstates = np.empty(cap, np.int64)
    crefs = np.empty(cap, np.int64)
    ccost = np.empty(cap, np.int64)
    cplat = np.empty(cap, np.bool_)
    cfirst = np.zeros(limit + 2, np.int64)
    cvia = np.empty(limit + 1, np.int64)
    n = 0
    used = 0
    for c in range(cand.size):
        if n > limit:
            break
        v = cand[c]
        if on[v]:
            continue
        nf = 0
        x = v
        while R[8 * x + 4] >= 0:
            x = R[8 * x + 4]
            nf += 1
        nb = 0
        x = v
        while R[8 * x + 6] >= 0:
            x = R[8 * x + 6]
            nb += 1
        k = nf + 1 + nb
        while used + k > cap:
            cap *= 2
            s2 = np.empty(cap, np.int64)
            r2 = np.empty(cap, np.int64)
            c2 = np.empty(cap, np.int64)
            p2 = np.empty(cap, np.bool_)
            s2[:used] = cstates[:used]
            r2[:used] = crefs[:used]
            c2[:used] = ccost[:used]
            p2[:used] = cplat[:used]
            cstates = s2
            crefs = r2
            ccost = c2
            cplat = p2
        p = used + nf
        cstates[p] = v
        x = v
        while R[8 * x + 4] >= 0:
            crefs[p] = R[8 * x + 5]
            y = R[8 * x + 4]
            ccost[p] = R[8 * x] - R[8 * y]
            x = y
            p -= 1
            cstates[p] = x
        crefs[p] = -1
        ccost[p] = R[8 * x]
        p = used + nf
        x = v
        while R[8 * x + 6] >= 0:
            r = R[8 * x + 7]
            y = R[8 * x + 6]
            p += 1
            cstates[p] = y
            crefs[p] = r
            ccost[p] = R[8 * x + 1] - R[8 * y + 1]
            x = y
        total = R[8 * v] + R[8 * v + 1]
        for i in range(used, used + k):
            x = cstates[i]
            on[x] = True
            cplat[i] = R[8 * x + 2] == -2 and R[8 * x + 3] == -2 and R[8 * x] + R[8 * x + 1] == total
        used += k
        cvia[n] = c
        n += 1
        cfirst[n] = used
    return cfirst[:n + 1], cstates[:used], crefs[:used], ccost[:used], cplat[:used], cvia[:n]


@njit(cache=True)
def _assess(arcs, tfirst, tout, turn_cost, arc_cost, seed_cost, offset, scale, union, plateau, T):
    """One unpacked candidate ``arcs`` (int64 (k,)) in one compiled pass: ``(ok, cost, shared, iv, x, y,
    sub)``. ``ok``: no arc twice and every turn allowed (``tfirst``/``tout``: the turn table, ``turn_cost``
    by turn id, -1 forbidden); ``cost`` ``seed_cost + scale * turns + offset``; ``shared`` the cost of its
    pieces on arcs in ``union`` (sorted; pieces as :class:`Alternative`'s); ``iv`` the via tested: of the arcs
    in ``plateau`` (sorted; vias of this path, both halves shortest), the one nearest the middle of their
    span (one arc: that one); ``x``/``y`` the T-test's ends (the last arc at least ``T`` before, the first at least ``T`` after,
    else the path's ends) and ``sub`` the labels between their ends."""
    k = arcs.size
    srt = np.sort(arcs)
    ok = k >= 2
    for i in range(1, k):
        if srt[i] == srt[i - 1]:
            ok = False
    cum = np.empty(k, np.int64)
    cum[0] = seed_cost
    for i in range(1, k):
        a = arcs[i - 1]
        b = arcs[i]
        lo = tfirst[a]
        hi = tfirst[a + 1]
        t = lo + b - tout[lo] if hi > lo else -1
        if t < lo or t >= hi or tout[t] != b or turn_cost[t] < 0:
            ok = False
            cum[i] = cum[i - 1]
        else:
            cum[i] = cum[i - 1] + scale * turn_cost[t]
    cost = cum[k - 1] + offset
    shared = 0
    lo = -1
    hi = -1
    for i in range(k):
        p = arc_cost[arcs[i]] * scale
        if i == 0:
            p = seed_cost
        if i == k - 1:
            p += offset
        x = np.searchsorted(union, arcs[i])
        if x < union.size and union[x] == arcs[i]:
            shared += p
        x = np.searchsorted(plateau, arcs[i])
        if x < plateau.size and plateau[x] == arcs[i]:
            if lo < 0:
                lo = i
            hi = i
    iv = max(lo, 0)
    if lo >= 0:  # the plateau arc nearest the middle of the plateau's span (cum is ascending)
        mid = (cum[lo] + cum[hi]) // 2
        for i in range(lo, hi + 1):
            x = np.searchsorted(plateau, arcs[i])
            if x < plateau.size and plateau[x] == arcs[i] and abs(cum[i] - mid) < abs(cum[iv] - mid):
                iv = i
    x, y = t_window(cum, iv, T)
    return ok, cost, shared, iv, x, y, cum[y] - cum[x]


@njit(cache=True)
def _next_packed(cfirst, crefs, cedge, j, packed, limit):
    """The first packed path ``>= j`` (:func:`_chains`' arrays) whose edges found in ``packed`` (sorted edge
    ids) cost at most ``limit`` in all; -1 when none."""
    for p in range(j, cfirst.size - 1):
        shared = 0
        for i in range(cfirst[p] + 1, cfirst[p + 1]):
            x = np.searchsorted(packed, crefs[i])
            if x < packed.size and packed[x] == crefs[i]:
                shared += cedge[i]
        if shared <= limit:
            return p
    return -1


def alternatives(q, st, seed_arcs, seed_costs, target_arcs, target_offsets, *, k=1, main_arcs=None, stretch=None,
                 sharing=None, alpha=None, candidates=None, scale=SCALE):
    """Up to ``k`` admissible via-node alternatives between seeded arcs and target arcs (see the module notes).

    Parameters
    ----------
    q : OverlayQuery
        Its buffers are used (one query object per thread).
    st : overlay state
        The customization state every search and unpacking reads (the request's metric snapshot).
    seed_arcs, seed_costs : int64 (s,)
        Departure arcs and start costs (``1 / scale`` units), as :func:`gpuroute.crp.phantom_search.search`'s.
    target_arcs, target_offsets : int64 (t,)
        Arrival arcs and offsets (``1 / scale`` units, typically <= 0). No arc may be both a seed and a target
        (the same-arc case has no via; the caller leaves it out).
    k : int
        Most alternatives wanted (>= 0).
    main_arcs : int64 array, optional
        The shortest route's arcs as the caller took them (sharing is measured against these); None: the
        overlap search's own shortest path, unpacked.
    stretch, sharing, alpha : float, optional
        Default ``config.SERVE_ALTERNATIVES_STRETCH``, ``_SHARING``, ``_ALPHA``.
    candidates : int, optional
        Most candidate paths unpacked and tested (default ``config.SERVE_ALTERNATIVES_CANDIDATES``).
    scale : int

    Returns
    -------
    AlternativeSet

    Raises
    ------
    ValueError
        Arrays of different lengths, a negative ``k``, an arc both a seed and a target, ``scale < 1``.
    IndexError
        An arc id outside ``[0, m)``.
    """
    stretch, sharing, alpha, candidates = settings(stretch, sharing, alpha, candidates)
    ov = q.overlay
    m = ov.graph.n_arcs
    sa, sc, da, dc = seed_arrays(seed_arcs, seed_costs, target_arcs, target_offsets)
    if int(k) < 0 or int(scale) < 1:
        raise ValueError(f"k must be >= 0 and scale >= 1, got k={k!r}, scale={scale!r}")
    qg = ov._qg
    topo = ov._topo
    keep, src, dst = seed_states(ov, sa, da)
    both = np.intersect1d(sa, da)
    if both.size:
        raise ValueError(f"arc {int(both[0])} is both a seed and a target (the same-arc case has no via)")
    out = AlternativeSet([], INF, int(scale), {"candidates": 0, "unpacked": 0, "tested": 0, "settled": 0})
    if sa.size == 0 or da.size == 0:
        return out
    hk, hv, hk2, hv2 = q._h
    SEARCHES.add("overlay_alternatives")
    best, nt, settled, overflow, cand, ccost = _overlap(
        keep, src, sc, dst, dc, stretch, np.int64(scale), qg["tfirst"], qg["tout"], st.q_turn_cost, qg["rfirst"],
        qg["rin"], qg["rturn"], qg["hc"], qg["tc"], qg["entry_idx"], qg["exit_idx"], topo["cell_base"],
        topo["ent_first"], qg["ent_st"], topo["ex_first"], qg["ex_st"], topo["cq_first"], st.clique, q._R,
        q._touched, hk, hv, hk2, hv2)
    try:
        out.best = int(best)
        out.stats.update(candidates=int(cand.size), settled=int(settled))
        if overflow or best >= INF or int(k) == 0:
            return out
        cfirst, cstates, crefs, cedge, cplat, cvia = _chains(cand, PACKED_PER_UNPACKED * candidates, q._R, m)
    finally:
        reset(q._R, q._touched, nt)
    order, torder = qg["order"], qg["torder"]

    def unpacked(j):
        s, r = tree_numbering(cstates[cfirst[j]:cfirst[j + 1]], crefs[cfirst[j] + 1:cfirst[j + 1]], order, torder)
        out.stats["unpacked"] += 1
        return q._unpacked(st, s, r).astype(np.int64)

    union = np.unique(np.asarray(main_arcs, dtype=np.int64) if main_arcs is not None else unpacked(0))
    arc_cost = np.asarray(st.arc_cost, dtype=np.int64)
    turn_cost = np.asarray(st.turn_cost, dtype=np.int64)
    tfirst = np.asarray(ov.turns.first, dtype=np.int64)
    tout = np.asarray(ov.turns.out_arc, dtype=np.int64)
    seed_of = {int(a): i for i, a in reversed(list(enumerate(sa.tolist())))}
    target_of = {int(a): i for i, a in reversed(list(enumerate(da.tolist())))}
    T = alpha * best
    packed = np.sort(crefs[cfirst[0] + 1:cfirst[1]])  # the edges of the shortest route's and the taken paths
    j = 0
    while len(out.routes) < int(k) and out.stats["unpacked"] <= candidates:
        # the next packed path whose packed edges shared with those cost at most ``sharing`` (an edge's cost
        # is its subpath's): the others share too much already
        j = _next_packed(cfirst, crefs, cedge, j + 1, packed, np.int64(np.floor(sharing * best)))
        if j < 0:
            break
        lo, hi = cfirst[j], cfirst[j + 1]
        arcs = unpacked(j)
        si, ti = seed_of.get(int(arcs[0])), target_of.get(int(arcs[-1]))
        if si is None or ti is None:
            continue
        # the T-test at the via the searches met at, else at the middle of the path's plateau (the states of
        # its packed path settled by both searches at the path's cost: vias of the same path)
        via = np.array([order[cand[cvia[j]]]], dtype=np.int64)
        plateau = np.sort(order[cstates[lo:hi][cplat[lo:hi]]])
        passed = False
        for vias in (via, plateau) if plateau.size > 1 else (via,):
            ok, cost, shared, iv, x, y, sub = _assess(arcs, tfirst, tout, turn_cost, arc_cost, sc[si], dc[ti],
                                                      np.int64(scale), union, vias, T)
            # a loop or a turn not allowed (never: both halves are shortest paths); the packed path and its
            # unpacking disagreeing (never seen: refused rather than guessed); too much shared; no T-window
            if not ok or cost != int(ccost[cvia[j]]) or shared > sharing * best:
                break
            if x == y:
                continue
            out.stats["tested"] += 1
            if _distance(q, st, int(arcs[x]), int(arcs[y])) * int(scale) == sub:
                passed = True
                break
        if not passed:
            continue
        out.routes.append(Alternative(arcs, si, ti, int(iv), int(cost), int(shared), (int(x), int(y))))
        union = np.union1d(union, arcs)  # sorted
        packed = np.union1d(packed, crefs[lo + 1:hi])  # sorted
    return out


def _distance(q, st, x, y):
    """The overlay's shortest distance (metric unit, int; INF none) from the end of arc ``x`` to the end of
    arc ``y`` (one bidirectional search, :func:`gpuroute.crp.search.bidir_states`)."""
    ov = q.overlay
    qg = ov._qg
    topo = ov._topo
    g = ov.graph
    keep = np.ascontiguousarray(ov.partition.cells[:, [int(g.head[x]), int(g.head[y])]], dtype=np.int32)
    hk, hv, hk2, hv2 = q._h
    SEARCHES.add("overlay_alternatives")
    best, meet, nt = bidir_states(
        keep, qg["perm"][[x]], np.zeros(1, np.int64), qg["perm"][[y]], np.zeros(1, np.int64), qg["tfirst"],
        qg["tout"], st.q_turn_cost, qg["rfirst"], qg["rin"], qg["rturn"], qg["hc"], qg["tc"], qg["entry_idx"],
        qg["exit_idx"], topo["cell_base"], topo["ent_first"], qg["ent_st"], topo["ex_first"], qg["ex_st"],
        topo["cq_first"], st.clique, q._R, q._touched, hk, hv, hk2, hv2)
    reset(q._R, q._touched, nt)
    return int(best)
