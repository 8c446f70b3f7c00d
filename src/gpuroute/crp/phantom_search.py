"""One search per route leg on the customized overlay: every departure option of a waypoint seeded with its
start cost, every arrival option of the next waypoint a target with its offset, and the best cost to EACH
target (OSRM's phantom-node plugin model; RoutingKit's many-source query with start distances).

A waypoint snapped onto a segment (a point of a :class:`gpuroute.geo.segments.PhantomSet`) may leave or arrive by any of its
options (the segment's usable arcs, and those of the segments tied with it at a junction). A route's
dynamic program (``continue_straight``, :meth:`gpuroute.engine.traffic.TrafficRouter.plan`) needs, per leg,
the cost of arriving on every arrival option ``b`` given the cost of having left by each departure option
``d``: seeding state ``d`` with that cost (plus the rest of arc ``d`` beyond the waypoint) makes one
multi-source search answer it, ``min_d (seed_d + path(d -> b)) + offset_b`` per target ``b``.

The search is the forward half of :func:`gpuroute.crp.search.bidir_states` on the overlay's arc states
(Delling, Goldberg, Pajor, Werneck, "Customizable Route Planning in Road Networks", Transportation Science
2017, sec. 4; the arc-based turn model of Delling, Kobitzsch, Werneck, Euro-Par 2014, sec. 2): a state is
scanned at the level of its head (:func:`gpuroute.crp.search.state_level`), the query's cells ``keep``
being those of every seed's and every target's head. It is unidirectional because it must settle every
target on its own (a backward search from several targets only gives the nearest of them): it stops when
the queue's minimum reaches the largest target label (``every_target``), or, when only the best target
matters (a route's last leg; any leg whose arrival is followed by a free U-turn), when the minimum plus the
smallest offset reaches the best target cost found so far.

Same-arc cases: a target ahead of the departure point on the departure arc is the caller's (a cost without
search); a target *behind* it needs the search to leave the arc and come back. A seeded state is settled at
its seed label, so a target state's cost is taken from the edges that relax into it (every time one does,
whether or not the edge lowers the state's label), never from a seed.

Labels are integers in ``1 / scale`` of the metric's unit (every turn and clique cost is multiplied by
``scale`` when relaxed): the caller's fractional start costs and offsets (``(1 - f) c(a)``) are then rounded
to ``1 / scale``, and the search chooses between departure options as the fraction-weighted costs do.
"""
from __future__ import annotations

import threading
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from numba import njit

from ..graph.constants import INF
from .customize import unpack
from .search import LABEL_LIMIT, ih_pop, ih_update, reset, state_level

__all__ = ["search", "search_leg", "search_one_leg", "TargetCosts", "SEARCHES", "SearchCounter", "SCALE", "LABEL_LIMIT"]

#: Labels per unit of the metric that :func:`search` callers use by default (1024: a fraction-weighted start
#: cost is rounded to 1/1024 of a unit, e.g. 0.1 ms for deciseconds).
SCALE = 1024


class SearchCounter:
    """Searches run by the calling thread, by kind (a thread-local :class:`collections.Counter`): the route
    paths add ``"overlay_search"`` (:func:`search`), ``"overlay_unpack"`` (:meth:`TargetCosts.unpack`),
    ``"ch_table"`` and ``"ch_unpack"`` (:meth:`gpuroute.engine.algorithms.CH.route`), and
    ``"overlay_alternatives"`` (:mod:`gpuroute.crp.alternatives`: its overlap search and each T-test)."""

    def __init__(self):
        self._local = threading.local()

    def _counts(self):
        c = getattr(self._local, "counts", None)
        if c is None:
            c = self._local.counts = Counter()
        return c

    def add(self, kind, n=1):
        """Count ``n`` searches of ``kind`` (str) on this thread."""
        self._counts()[kind] += n

    def counts(self):
        """This thread's counts so far (a copy)."""
        return Counter(self._counts())

    @contextmanager
    def counting(self):
        """``with SEARCHES.counting() as c:`` -- ``c`` (a Counter) holds, after the block, the searches this
        thread ran inside it."""
        before = self.counts()
        out = Counter()
        try:
            yield out
        finally:
            now = self.counts()
            now.subtract(before)
            out.update({k: v for k, v in now.items() if v})


#: The process's search counter (per thread).
SEARCHES = SearchCounter()


@njit(cache=True)
def _targets(keep, src, scost, dst, doff, every, ub, scale, tfirst, tout, tcost, hc, entry_idx, cell_base,
             ex_first, ex_arc, cq_first, clique, R, touched, hk, hv):
    """The search of :func:`search` (state numbering). ``R``/``touched``/``hk``/``hv`` are an
    :class:`~gpuroute.crp.OverlayQuery`'s buffers (records as :func:`gpuroute.crp.search.bidir_states`'s;
    ``R[8b + 1]`` marks a target state with -1 while the search runs); they are put back before returning.

    Returns ``(tbest, tseed, cfirst, cstates, crefs, settled, overflow)``: ``tbest[j]`` the least label an
    edge brought into ``dst[j]`` (INF: none; the offset not added), ``tseed[j]`` the index in ``src`` of the
    seed its chain starts from (-1), and the chains: ``cstates[cfirst[j]:cfirst[j + 1]]`` the states from
    that seed to ``dst[j]``, ``crefs[p]`` the edge into ``cstates[p]`` (turn position or ``-(1 + clique
    position)``; the first of each chain unused).
    """
    k = dst.size
    tbest = np.full(k, INF, np.int64)
    tpred = np.full(k, -1, np.int64)
    tref = np.zeros(k, np.int64)
    tseed = np.full(k, -1, np.int64)
    nt = 0
    size = 0
    for j in range(k):
        b = dst[j]
        if R[8 * b] == INF and R[8 * b + 1] == INF:
            touched[nt] = b
            nt += 1
        R[8 * b + 1] = -1
    for i in range(src.size):
        b = src[i]
        c = scost[i]
        if c < R[8 * b]:
            if R[8 * b] == INF and R[8 * b + 1] == INF:
                touched[nt] = b
                nt += 1
            R[8 * b] = c
            R[8 * b + 4] = -1
            R[8 * b + 5] = -1
            size = ih_update(hk, hv, R, 2, size, c, b)
    min_off = 0
    for j in range(k):
        if doff[j] < min_off:
            min_off = doff[j]
    best = ub  # best target cost (offset included), for the best-target stop
    tmax = INF if k > 0 else -1  # largest target label, for the every-target stop
    settled = 0
    overflow = False
    while size > 0:
        d = hk[0]
        if every:
            if d >= tmax:
                break
        elif best < INF and d + min_off >= best:
            break
        if d > LABEL_LIMIT:
            overflow = True
            break
        a = hv[0]
        size = ih_pop(hk, hv, R, 2, size)
        settled += 1
        q = state_level(a, hc, keep)
        if q == 0:
            lo = tfirst[a]
            hi = tfirst[a + 1]
            g = 0
            base = 0
        else:
            p = q - 1
            g = cell_base[p] + hc[a, p]
            i = entry_idx[a, p]
            if i < 0:
                continue
            nx = ex_first[g + 1] - ex_first[g]
            base = cq_first[g] + i * nx
            lo = 0
            hi = nx
        for e in range(lo, hi):
            if q == 0:
                c = tcost[e]
                if c < 0:
                    continue
                b = tout[e]
                ref = e
            else:
                c = clique[base + e]
                if c >= INF:
                    continue
                b = ex_arc[ex_first[g] + e]
                ref = -(1 + base + e)
            nd = d + c * scale
            if R[8 * b + 1] == -1:  # a target: every edge into it is a candidate (a seed's label is not)
                hit = False
                for j in range(k):
                    if dst[j] == b and nd < tbest[j]:
                        tbest[j] = nd
                        tpred[j] = a
                        tref[j] = ref
                        hit = True
                        if nd + doff[j] < best:
                            best = nd + doff[j]
                if hit:
                    tmax = tbest[0]
                    for j in range(1, k):
                        if tbest[j] > tmax:
                            tmax = tbest[j]
            if nd < R[8 * b]:
                if R[8 * b] == INF and R[8 * b + 1] == INF:
                    touched[nt] = b
                    nt += 1
                R[8 * b] = nd
                R[8 * b + 4] = a
                R[8 * b + 5] = ref
                size = ih_update(hk, hv, R, 2, size, nd, b)
    # the chains, while the records still hold them
    cfirst = np.zeros(k + 1, np.int64)
    for j in range(k):
        n = 0
        if tpred[j] >= 0:
            n = 2
            x = tpred[j]
            while R[8 * x + 4] >= 0:
                x = R[8 * x + 4]
                n += 1
        cfirst[j + 1] = cfirst[j] + n
    cstates = np.empty(cfirst[k], np.int64)
    crefs = np.empty(cfirst[k], np.int64)
    for j in range(k):
        if tpred[j] < 0:
            continue
        p = cfirst[j + 1] - 1
        cstates[p] = dst[j]
        crefs[p] = tref[j]
        x = tpred[j]
        while True:
            p -= 1
            cstates[p] = x
            crefs[p] = R[8 * x + 5]
            if R[8 * x + 4] < 0:
                break
            x = R[8 * x + 4]
        for i in range(src.size):  # the seed whose label the chain's first state kept
            if src[i] == x and scost[i] == R[8 * x]:
                tseed[j] = i
                break
    reset(R, touched, nt)
    return tbest, tseed, cfirst, cstates, crefs, settled, overflow


@dataclass
class TargetCosts:
    """What one :func:`search` found for each target ``j``.

    Attributes
    ----------
    cost : ndarray int64 (k,)
        Least ``seed cost + path + offset`` over the seeds, in ``1 / scale`` of the metric's unit (the
        offset included); ``INF`` when no edge reached the target. Without ``every_target`` only the least
        of them is exact (the others are the costs of real paths, or INF).
    label : ndarray int64 (k,)
        ``cost`` without the offset (``INF`` where unreached).
    seed : ndarray int64 (k,)
        Index (into the seeds given) of the seed the target's path leaves from; -1 where unreached.
    seed_cost : ndarray int64 (s,)
        The seeds' costs as given.
    scale : int
    settled : int
        States settled.
    overflow : bool
        A label passed :data:`LABEL_LIMIT` (the costs are then not exact: search again with ``scale=1``).
    """

    cost: np.ndarray
    label: np.ndarray
    seed: np.ndarray
    seed_cost: np.ndarray
    scale: int
    settled: int
    overflow: bool
    _first: np.ndarray
    _states: np.ndarray
    _refs: np.ndarray

    def paid(self, j):
        """The integer cost (metric unit) of target ``j``'s path after its seed: every turn and clique cost
        on it, the target arc's full cost included."""
        return int((self.label[j] - self.seed_cost[self.seed[j]]) // self.scale)

    def chain(self, j):
        """Target ``j``'s search-graph path: ``(states, refs)`` in the overlay's state numbering (as
        :func:`gpuroute.crp.search.chain` gives them), or None when unreached."""
        lo, hi = int(self._first[j]), int(self._first[j + 1])
        if hi == lo:
            return None
        return self._states[lo:hi], self._refs[lo + 1:hi]

    def unpack(self, q, st, j):
        """Target ``j``'s path as graph arcs (int64 (k,), from its seed's arc to the target's arc, both
        included), every clique arc unpacked by ``q`` (an :class:`~gpuroute.crp.OverlayQuery`) under the
        overlay state ``st`` the search ran on. Counts one ``"overlay_unpack"``.

        Raises
        ------
        ValueError
            Target ``j`` was not reached.
        """
        ch = self.chain(j)
        if ch is None:
            raise ValueError(f"target {j} was not reached")
        states, refs = ch
        qg = q.overlay._qg
        SEARCHES.add("overlay_unpack")
        args = _unpack_args(q, st)
        if args is not None:  # the overlay's own topology: numbering and unpacking in one compiled call
            return _unpack_chain(states, refs, qg["order"], qg["torder"], *args)
        arcs = q._unpacked(st, *tree_numbering(states, refs, qg["order"], qg["torder"]))
        return arcs.astype(np.int64)

    def leg_path(self, q, st, j, head):
        """:meth:`unpack` of target ``j`` as a route leg's path: ``(mid, nodes)``, the arcs strictly between the
        seed's arc ``a`` and the target's arc ``b`` (int64 (k,)) and the nodes from ``a``'s head to ``b``'s tail
        (int64 (k + 1,), ``head`` the graph's arc heads), in one compiled call with the unpacking on the overlay's
        own topology. Counts one ``"overlay_unpack"``; ValueError as :meth:`unpack`'s."""
        args = _unpack_args(q, st)
        if args is None:
            arcs = self.unpack(q, st, j)
            mid = arcs[1:-1]
            nodes = np.empty(mid.size + 1, np.int64)
            nodes[0] = head[arcs[0]]
            nodes[1:] = head[mid]
            return mid, nodes
        ch = self.chain(j)
        if ch is None:
            raise ValueError(f"target {j} was not reached")
        qg = q.overlay._qg
        SEARCHES.add("overlay_unpack")
        return _unpack_leg_path(ch[0], ch[1], qg["order"], qg["torder"], head, *args)


def _unpack_args(q, st):
    """The arguments of :func:`gpuroute.crp.customize.unpack` after the path (``tout`` .. ``out``: the query
    object's buffers) under state ``st``, made once per state and query object, when the path's references
    need no translation (the overlay's own topology: the customization plan is the identity, or kept no
    tree; :meth:`gpuroute.crp.customize.CustomizationPlan.unpack_arrays`); None otherwise (and before the query
    object's first unpacking, which makes its buffers)."""
    ov = q.overlay
    tf, tree = ov._tree_first, st.tree
    memo = getattr(q, "_leg_unpack", None)
    if memo is not None and memo[0] is tree and memo[1] is st.clique and memo[2] is st.turn_cost and memo[3] is tf:
        return memo[4]
    plan = ov._plan
    if q._unp is None or not (plan.identity or tree.size == 0 or int(tf[-1]) == 0):
        return None
    _, args = plan.unpack_arrays(tf, tree, st.clique, st.turn_cost, _NO_REFS)
    args = (ov.turns.out_arc, *args, *q._unp)
    q._leg_unpack = (tree, st.clique, st.turn_cost, tf, args)
    return args


_NO_REFS = np.zeros(0, np.int64)


@njit(cache=True)
def _unpack_chain(states, refs, order, torder, tout, cq_first, cell_base, ex_first, ex_arc, vf, vh, vx, ef, eto, eref,
                  etail, turn_cost, clique, tree_first, tree, ent_first, mc_first, mc_tree, mc_have, dist, par, hk, hv,
                  stack, tmp, out):
    """:func:`tree_numbering` and :func:`gpuroute.crp.customize.unpack` of one chain: its graph arcs (int64)."""
    s, r = tree_numbering(states, refs, order, torder)
    k = unpack(s, r, tout, cq_first, cell_base, ex_first, ex_arc, vf, vh, vx, ef, eto, eref, etail, turn_cost, clique,
               tree_first, tree, ent_first, mc_first, mc_tree, mc_have, dist, par, hk, hv, stack, tmp, out)
    arcs = np.empty(k, np.int64)
    for i in range(k):
        arcs[i] = out[i]
    return arcs


@njit(cache=True)
def _unpack_leg_path(states, refs, order, torder, head, tout, cq_first, cell_base, ex_first, ex_arc, vf, vh, vx, ef, eto,
                     eref, etail, turn_cost, clique, tree_first, tree, ent_first, mc_first, mc_tree, mc_have, dist, par,
                     hk, hv, stack, tmp, out):
    """:func:`_unpack_chain` as :meth:`TargetCosts.leg_path`'s ``(mid, nodes)``: the arcs between the first and the
    last, and the nodes from the first's head to the last's tail (the heads of all but the last)."""
    s, r = tree_numbering(states, refs, order, torder)
    k = unpack(s, r, tout, cq_first, cell_base, ex_first, ex_arc, vf, vh, vx, ef, eto, eref, etail, turn_cost, clique,
               tree_first, tree, ent_first, mc_first, mc_tree, mc_have, dist, par, hk, hv, stack, tmp, out)
    mid = np.empty(max(k - 2, 0), np.int64)
    nodes = np.empty(mid.size + 1, np.int64)
    nodes[0] = head[out[0]]
    for i in range(1, k - 1):
        mid[i - 1] = out[i]
        nodes[i] = head[out[i]]
    return mid, nodes


@njit(cache=True)
def tree_numbering(states, refs, order, torder):
    """A chain's states and edge references (:meth:`TargetCosts.chain`) in the numbering the unpacking reads:
    ``(order[states], torder[refs] where refs >= 0, else refs)`` (one compiled pass)."""
    s = np.empty(states.size, order.dtype)
    for i in range(states.size):
        s[i] = order[states[i]]
    r = np.empty(refs.size, np.int64)
    for i in range(refs.size):
        r[i] = torder[refs[i]] if refs[i] >= 0 else refs[i]
    return s, r


def search(q, st, seed_arcs, seed_costs, target_arcs, target_offsets, *, every_target=True, bound=INF,
           scale=SCALE):
    """One multi-source search on the overlay from seeded arcs to target arcs: the cost of reaching EACH
    target (see the module notes). Counts one ``"overlay_search"`` in :data:`SEARCHES`.

    Parameters
    ----------
    q : OverlayQuery
        Its buffers are used (one query object per thread).
    st : overlay state
        The overlay's customized state the search reads (``overlay._state`` at the request's start: one
        metric for the whole request).
    seed_arcs : int64 (s,)
        Graph arc ids the path may leave by (standing at the arc's head).
    seed_costs : int64 (s,)
        Their start costs, in ``1 / scale`` of the metric's unit (>= 0, below :data:`LABEL_LIMIT`).
    target_arcs : int64 (k,)
        Graph arc ids the path may arrive by (the arc's full cost paid on entering it).
    target_offsets : int64 (k,)
        Added to each target's label (``1 / scale`` units; typically ``-(1 - f) c(b)``, <= 0).
    every_target : bool
        Settle every target (each one's cost exact); False: only the least cost is needed (the search stops
        as soon as no target can beat it).
    bound : int
        A cost (offset included) already known to be reachable otherwise (e.g. a target ahead on a seed's
        arc): without ``every_target`` the search stops once no target can beat it.
    scale : int
        Labels per unit of the metric (turn and clique costs are multiplied by it).

    Returns
    -------
    TargetCosts

    Raises
    ------
    ValueError
        Arrays of different lengths, or ``scale < 1``. IndexError: an arc id outside ``[0, m)``.
    """
    ov = q.overlay
    sa, sc, da, dc = seed_arrays(seed_arcs, seed_costs, target_arcs, target_offsets)
    if int(scale) < 1:
        raise ValueError(f"scale must be >= 1, got {scale!r}")
    qg = ov._qg
    topo = ov._topo
    hk, hv = q._h[0], q._h[1]
    keep, src, dst = seed_states(ov, sa, da)  # nothing searched if it raises
    SEARCHES.add("overlay_search")
    tbest, tseed, cfirst, cstates, crefs, settled, overflow = _targets(
        keep, src, sc, dst, dc, bool(every_target), np.int64(min(int(bound), INF)), np.int64(scale),
        qg["tfirst"], qg["tout"], st.q_turn_cost, qg["hc"], qg["entry_idx"], topo["cell_base"], topo["ex_first"],
        qg["ex_st"], topo["cq_first"], st.clique, q._R, q._touched, hk, hv)
    cost = np.where(tbest < INF, tbest + dc, INF)
    return TargetCosts(cost, tbest, tseed, sc, int(scale), int(settled), bool(overflow), cfirst, cstates, crefs)


def search_leg(q, st, dep, a, fa, cost, b, fb, *, every_target, scale=SCALE):
    """One route leg's search in one compiled call (:func:`_leg_search`: :func:`leg_seeds`, :func:`prepare_seeds`,
    the search of :func:`search` and :func:`leg_choice`, with the same values): the departure options ``a``
    (int64 (s,)) at fractions ``fa`` (float64 (s,)) reached at ``dep`` (int64 (s,), ``1 / scale`` units; INF:
    not reached), the arrival options ``b``, ``fb`` (k,), ``cost`` the metric snapshot's arc costs (float64
    (m,), metric unit). Counts one ``"overlay_search"`` in :data:`SEARCHES` (none when a start cost overflows:
    nothing is searched then).

    Returns
    -------
    (res, best, leaves, use_same, reached) or None
        ``res`` the :class:`TargetCosts` of the search (seeds: the reached departure options, in order), then
        :func:`leg_choice`'s values; None when a label reaches :data:`LABEL_LIMIT` (search again with
        ``scale=1``).
    """
    ov = q.overlay
    qg = ov._qg
    topo = ov._topo
    g = ov.graph
    (status, cost_t, tbest, tseed, sc, cfirst, cstates, crefs, settled, best, leaves, use_same, reached) = _leg_search(
        dep, a, fa, b, fb, cost, np.int64(scale), bool(every_target), g.n_arcs, g.head, ov.partition.cells,
        qg["perm"], qg["tfirst"], qg["tout"], st.q_turn_cost, qg["hc"], qg["entry_idx"], topo["cell_base"],
        topo["ex_first"], qg["ex_st"], topo["cq_first"], st.clique, q._R, q._touched, q._h[0], q._h[1])
    if status != 1:
        SEARCHES.add("overlay_search")
    if status != 0:
        return None
    res = TargetCosts(cost_t, tbest, tseed, sc, int(scale), int(settled), False, cfirst, cstates, crefs)
    return res, best, leaves, use_same, reached


@njit(cache=True)
def _leg_search(dep, a, fa, b, fb, cost, scale, every, m, head, cells, perm, tfirst, tout, tcost, hc, entry_idx,
                cell_base, ex_first, ex_arc, cq_first, clique, R, touched, hk, hv):
    """:func:`search_leg`'s compiled call: ``(status, cost, label, seed, seed_cost, cfirst, cstates, crefs, settled,
    best, leaves, use_same, reached)``, ``status`` 0, or 1 when a start cost overflows (nothing searched), 2 when
    a label does."""
    ca = np.empty(a.size, np.float64)
    for i in range(a.size):
        ca[i] = cost[a[i]]
    cb = np.empty(b.size, np.float64)
    for j in range(b.size):
        cb[j] = cost[b[j]]
    idx, s_arcs, s_costs, off, s_best, s_arg, bound, overflow = leg_seeds(dep, a, fa, ca, b, fb, cb, scale)
    e64 = np.empty(0, np.int64)
    no = np.empty(0, np.bool_)
    if overflow:
        return 1, e64, e64, e64, e64, e64, e64, e64, 0, e64, e64, no, False
    bad, keep, src, dst = prepare_seeds(s_arcs, b, m, head, cells, perm)
    if bad >= 0:  # the snapped options' arcs are the graph's: never
        raise IndexError("an arc id outside the graph's arc range")
    tbest, tseed, cfirst, cstates, crefs, settled, ovf = _targets(
        keep, src, s_costs, dst, off, every, min(bound, INF), scale, tfirst, tout, tcost, hc, entry_idx, cell_base,
        ex_first, ex_arc, cq_first, clique, R, touched, hk, hv)
    if ovf:
        return 2, e64, e64, e64, e64, e64, e64, e64, 0, e64, e64, no, False
    k = b.size
    cost_t = np.empty(k, np.int64)
    for j in range(k):
        cost_t[j] = tbest[j] + off[j] if tbest[j] < INF else INF
    best, leaves, use_same, reached = leg_choice(s_best, s_arg, idx, cost_t, tseed)
    return 0, cost_t, tbest, tseed, s_costs, cfirst, cstates, crefs, settled, best, leaves, use_same, reached


def search_one_leg(q, st, a, fa, cost, b, fb, *, scale=SCALE):
    """A two-point route's one leg in one compiled call (:func:`_one_leg`): :func:`search_leg` from every departure
    option ``a`` (int64 (s,)) at ``fa`` (float64 (s,)) reached at 0 to the arrival options ``b``, ``fb`` (k,), the
    least-cost arrival option (the first of equal ones) and its departure option, and :meth:`TargetCosts.leg_path`
    of the winner when it is no same-arc target -- the values of those calls, in one. Counts one
    ``"overlay_search"`` and, with a path, one ``"overlay_unpack"`` in :data:`SEARCHES`. None when the unpacking
    arguments are not those of the overlay's own topology (:func:`_unpack_args`: then the calls one by one).

    Returns
    -------
    (status, reached, o, d, path) or None
        ``status`` 0, or as :func:`_leg_search`'s (1, 2: search again with ``scale=1``; nothing else then); ``reached`` whether any arrival option is; ``o`` the arrival option and ``d`` the departure option
        of the least cost; ``path`` ``(mid, nodes, paid)`` (:meth:`TargetCosts.leg_path`, :meth:`TargetCosts.paid`)
        or None for a same-arc target.
    """
    args = _unpack_args(q, st)
    if args is None:
        return None
    ov = q.overlay
    qg = ov._qg
    topo = ov._topo
    g = ov.graph
    status, reached, o, d, same, paid, mid, nodes = _one_leg(
        a, fa, b, fb, cost, np.int64(scale), g.n_arcs, g.head, ov.partition.cells, qg["perm"], qg["tfirst"],
        qg["tout"], st.q_turn_cost, qg["hc"], qg["entry_idx"], topo["cell_base"], topo["ex_first"], qg["ex_st"],
        topo["cq_first"], st.clique, q._R, q._touched, q._h[0], q._h[1], qg["order"], qg["torder"], *args)
    if status != 1:  # 1: a start cost overflows, nothing searched
        SEARCHES.add("overlay_search")
    if status != 0 or not reached:
        return status, reached, -1, -1, None
    if same:
        return status, True, o, d, None
    SEARCHES.add("overlay_unpack")
    return status, True, o, d, (mid, nodes, paid)


@njit(cache=True)
def _one_leg(a, fa, b, fb, cost, scale, m, head, cells, perm, tfirst, tout, tcost, hc, entry_idx, cell_base, ex_first,
             ex_arc, cq_first, clique, R, touched, hk, hv, order, torder, u_tout, u_cq_first, u_cell_base, u_ex_first,
             u_ex_arc, vf, vh, vx, ef, eto, eref, etail, u_turn_cost, u_clique, tree_first, tree, ent_first, mc_first, mc_tree,
             mc_have, dist, par, u_hk, u_hv, stack, tmp, out):
    """:func:`search_one_leg`'s compiled call: ``(status, reached, o, d, same, paid, mid, nodes)``; :func:`_leg_search`
    (``a`` .. ``hv``, departures at 0, the least cost only), the choice of the route's last leg, and
    :func:`_unpack_leg_path` (``order`` .. ``out``: :func:`_unpack_args`) of its path unless ``same``."""
    e64 = np.empty(0, np.int64)
    dep = np.zeros(a.size, np.int64)
    status, cost_t, tbest, tseed, sc, cfirst, cstates, crefs, settled, best, leaves, use_same, reached = _leg_search(
        dep, a, fa, b, fb, cost, scale, False, m, head, cells, perm, tfirst, tout, tcost, hc, entry_idx, cell_base,
        ex_first, ex_arc, cq_first, clique, R, touched, hk, hv)
    if status != 0 or not reached:
        return status, reached, -1, -1, False, 0, e64, e64
    o = 0
    for j in range(1, best.size):  # np.argmin: the first least
        if best[j] < best[o]:
            o = j
    d = leaves[o]
    if use_same[o]:
        return status, True, o, d, True, 0, e64, e64
    paid = (tbest[o] - sc[tseed[o]]) // scale
    lo = cfirst[o]
    hi = cfirst[o + 1]
    if hi == lo:  # reached with a search cost: never
        raise ValueError("the least-cost target was not reached")
    mid, nodes = _unpack_leg_path(cstates[lo:hi], crefs[lo + 1:hi], order, torder, head, u_tout, u_cq_first,
                                  u_cell_base, u_ex_first, u_ex_arc, vf, vh, vx, ef, eto, eref, etail, u_turn_cost, u_clique,
                                  tree_first, tree, ent_first, mc_first, mc_tree, mc_have, dist, par, u_hk, u_hv,
                                  stack, tmp, out)
    return status, True, o, d, False, paid, mid, nodes


def seed_arrays(seed_arcs, seed_costs, target_arcs, target_offsets):
    """:func:`search`'s seeds and targets as contiguous int64 (s,), (s,), (k,), (k,) arrays (one copy at most).

    Raises
    ------
    ValueError
        Arrays of different lengths (one cost per arc)."""
    sa = np.ascontiguousarray(seed_arcs, dtype=np.int64).ravel()
    sc = np.ascontiguousarray(seed_costs, dtype=np.int64).ravel()
    da = np.ascontiguousarray(target_arcs, dtype=np.int64).ravel()
    dc = np.ascontiguousarray(target_offsets, dtype=np.int64).ravel()
    if sa.size != sc.size or da.size != dc.size:
        raise ValueError(f"one cost per arc: {sa.size} seed arcs, {sc.size} seed costs, {da.size} target arcs, "
                         f"{dc.size} target offsets")
    return sa, sc, da, dc


def seed_states(ov, sa, da):
    """:func:`prepare_seeds` on overlay ``ov``: ``(keep, src, dst)`` for seed arcs ``sa`` and target arcs ``da``
    (int64, from :func:`seed_arrays`).

    Raises
    ------
    IndexError
        An arc id outside ``[0, m)`` (named by its array and position)."""
    g = ov.graph
    m = g.n_arcs
    bad, keep, src, dst = prepare_seeds(sa, da, m, g.head, ov.partition.cells, ov._qg["perm"])
    if bad >= 0:
        what, a, i = ("seed_arcs", sa, bad) if bad < sa.size else ("target_arcs", da, bad - sa.size)
        raise IndexError(f"{what}[{i}] = {int(a[i])} is outside the arc range [0, {m})")
    return keep, src, dst


@njit(cache=True)
def prepare_seeds(sa, da, m, head, cells, perm):
    """:func:`search`'s arc ids checked and laid out for :func:`_targets`, in one compiled call: ``(bad, keep,
    src, dst)``, ``bad`` the position (seeds, then targets) of the first arc id outside ``[0, m)`` (-1: none;
    else the rest is empty), ``keep`` int32 (levels, s + k) the cells of every seed's and target's head,
    ``src``/``dst`` the arcs' states."""
    ns = sa.size
    k = da.size
    L = cells.shape[0]
    for i in range(ns + k):
        x = sa[i] if i < ns else da[i - ns]
        if x < 0 or x >= m:
            return i, np.empty((L, 0), np.int32), np.empty(0, np.int64), np.empty(0, np.int64)
    keep = np.empty((L, ns + k), np.int32)
    src = np.empty(ns, np.int64)
    dst = np.empty(k, np.int64)
    for i in range(ns + k):
        x = sa[i] if i < ns else da[i - ns]
        v = head[x]
        for lv in range(L):
            keep[lv, i] = cells[lv, v]
        if i < ns:
            src[i] = perm[x]
        else:
            dst[i - ns] = perm[x]
    return -1, keep, src, dst


@njit(cache=True)
def leg_seeds(dep, a, fa, ca, b, fb, cb, scale):
    """A route leg's seeds, offsets and same-arc costs (:meth:`gpuroute.engine.traffic.TrafficRouter.plan`), in
    one compiled pass: the departure options ``a`` (int64 (s,)) at fractions ``fa`` (float64 (s,)) of arcs
    costing ``ca`` (float64 (s,), metric unit), already reached at ``dep`` (int64 (s,), ``1 / scale`` units;
    INF: not reached), and the arrival options ``b``, ``fb``, ``cb`` (k,).

    Returns ``(idx, seed_arcs, seed_costs, offsets, s_best, s_arg, bound, overflow)``: the reached departure
    options ``idx`` (int64), their arcs and start costs ``dep + rint(scale (1 - fa) ca)`` (the seeds of
    :func:`search`), each target's offset ``-rint(scale (1 - fb) cb)``, the least cost of each target ahead
    of a departure point on the same arc, ``dep + rint(scale (fb - fa) ca)`` (INF: none) with the departure
    option giving it (the first of the least; 0 when none), the least of them (``bound``), and whether a
    start cost reaches :data:`LABEL_LIMIT` (the leg must be searched again with ``scale=1``). The values are
    NumPy's for the same expressions, bit for bit.
    """
    n = a.size
    k = b.size
    s = float(scale)
    m = 0
    for i in range(n):
        if dep[i] < INF:
            m += 1
    idx = np.empty(m, np.int64)
    seed_arcs = np.empty(m, np.int64)
    seed_costs = np.empty(m, np.int64)
    overflow = False
    p = 0
    for i in range(n):
        if dep[i] < INF:
            c = dep[i] + np.int64(np.rint(s * (1.0 - fa[i]) * ca[i]))
            if c >= LABEL_LIMIT:
                overflow = True
            idx[p] = i
            seed_arcs[p] = a[i]
            seed_costs[p] = c
            p += 1
    off = np.empty(k, np.int64)
    s_best = np.full(k, INF, np.int64)
    s_arg = np.zeros(k, np.int64)
    bound = INF
    for j in range(k):
        off[j] = -np.int64(np.rint(s * (1.0 - fb[j]) * cb[j]))
        for i in range(n):
            if a[i] == b[j] and fa[i] <= fb[j] and dep[i] < INF:
                c = dep[i] + np.int64(np.rint(s * (fb[j] - fa[i]) * ca[i]))
                if c < s_best[j]:
                    s_best[j] = c
                    s_arg[j] = i
        if s_best[j] < bound:
            bound = s_best[j]
    return idx, seed_arcs, seed_costs, off, s_best, s_arg, bound, overflow


@njit(cache=True)
def leg_choice(s_best, s_arg, idx, cost, seed):
    """Per target of a leg, the better of its same-arc cost ``s_best`` (from departure option ``s_arg``) and
    the search's ``cost`` (:attr:`TargetCosts.cost`, from seed ``seed``, an index into ``idx``): ``(best,
    leaves, use_same, reached)``, ``best`` int64 (k,) the cost (INF: neither), ``leaves`` the departure
    option, ``use_same`` whether it is the same-arc one (ties: the same-arc one), ``reached`` whether any
    target is reached."""
    k = s_best.size
    best = np.empty(k, np.int64)
    leaves = np.empty(k, np.int64)
    use_same = np.empty(k, np.bool_)
    reached = False
    for j in range(k):
        u = s_best[j] <= cost[j]
        use_same[j] = u
        if u:
            best[j] = s_best[j]
            leaves[j] = s_arg[j]
        else:
            best[j] = cost[j]
            leaves[j] = idx[max(seed[j], 0)]
        if best[j] < INF:
            reached = True
    return best, leaves, use_same, reached
