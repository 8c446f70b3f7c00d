"""Point-to-point CH queries on the CPU (numba): :class:`CHQuery` (one path, buffers reused) and
:func:`distances_cpu` (many pairs in parallel); both answer from hub labels (:func:`hub_labels`) once
those are built.

The search is the bidirectional CH query of Geisberger, Sanders, Schultes, Delling, "Contraction
Hierarchies: Faster and Simpler Hierarchical Routing in Road Networks", WEA 2008, sec. 4: a forward
Dijkstra over ``up`` from the source and a backward Dijkstra over ``down`` (a CSR by head, so the
backward search reads it as its own upward graph) from the target, taking turns; a direction stops when
its queue minimum reaches the best meeting distance. Stall-on-demand (sec. 4) is on by default: a node
settled with a distance that a higher-ranked neighbour beats through its arc into it is not expanded.
Each direction's queue is a 4-ary heap with decrease-key (a node is in it at most once, so no stale
entries are popped; its position in the heap is kept per node).

A core (CU-CH's overlay, Karimi, Koppelman, Michael, ICS '19, sec. 3.6) is handled through ``core_dist``
rather than through the core pairs' arcs: neither direction expands a core node; a core node that a
direction reaches is an *entry*. Once both directions have stopped, the entries are joined through
``core_dist`` (the core pairs are exact, so one core hop is all a shortest up-down path needs), the
entries sorted by distance so that the join stops at the best distance found. The meeting is then a node
of both searches or a pair of entries ``(a, b)``, and the path takes the hierarchy arc ``a -> b`` (a core
pair) between the two search trees. (A contraction hierarchy of the core, :func:`_core_ch`, searched
instead of joined, settles three times the nodes on DIMACS NY and was measured slower, 68 us against
52 us a query; the labels use it, below.)

Paths are unpacked in numba through shortcut middles (:func:`gpuroute.ch.hierarchy.unpack`'s rule):
the half ``u -> m`` of a shortcut ``u -> w`` via ``m`` is in ``up`` of ``u`` when ``rank[m] > rank[u]``,
else in ``down`` of ``m``; the half ``m -> w`` in ``up`` of ``m`` when ``rank[w] > rank[m]``, else in
``down`` of ``w``. Those positions are looked up once per hierarchy (:class:`Prepared`), and every
shortcut of at most ``_EXPAND_MAX_ARCS`` arcs is stored unpacked, so unpacking follows indices only above
those and copies below. One numba call does the search, the unpacking and writes the path's arcs and
nodes into preallocated buffers.

Layout (:class:`Prepared`, once per hierarchy; PHAST's reordering, Delling et al., IPDPS 2011,
sec. 4.1): nodes are renumbered by rank and each node's up arcs and down arcs (by head) lie in one
record, neighbour and weight side by side (32-bit where they fit). A query's search space sits mostly
at the top of the hierarchy (on NY, 88% of the settled nodes are among the 5,000 highest ranks), which
this numbering keeps together in memory. The kernels read the layout and their buffers as flat arrays
through unsigned indices (:func:`uidx`), which spares numba's negative-index checks and shape loads.

Hub labels (:class:`HubLabels`, Abraham et al., SEA 2011) trade memory for time: on DIMACS NY about
0.5 GB and 10 s to build, then a distance is a merge of two sorted labels (1-3 us) and a path a walk from
hub to hub plus the unpacking.

Every kernel works on any valid hierarchy, with or without a core; distances are int64 with ``INF``
where unreachable.
"""
from __future__ import annotations

import operator
import weakref

import numba
import numpy as np
from numba import njit, prange

from ..graph.constants import DIST_DTYPE, INDEX_DTYPE, INF
from ..graph.heap import ah_pop, ah_update, heap_pop, heap_push

__all__ = ["CHQuery", "distances_cpu", "prepared", "Prepared", "hub_labels", "built_hub_labels", "HubLabels", "INF"]

_INF = INF
#: Shortcuts standing for at most this many arcs of the graph are stored unpacked (``Prepared.expand``).
_EXPAND_MAX_ARCS = 32
#: Pairs per parallel worker of :func:`distances_cpu` at least (each worker allocates its own buffers).
_MIN_PAIRS_PER_WORKER = 64

# error codes of the route kernel (negative n_arcs)
_ERR_MISSING_HALF = -1
_ERR_TOO_LONG = -2
#: A half position in ``Prepared.unp`` where the shortcut's half is not in the hierarchy.
_MISSING = -2


# ---------------------------------------------------------------------------------------------- derived arrays
@njit(cache=True)
def _expansions(unp, cap):
    """The arcs of the graph of every shortcut that stands for at most ``cap`` of them (``Prepared.expand``);
    writes each such shortcut's offset into ``unp[j, 1]``. A shortcut with a half missing, or whose halves
    lead back to itself (a broken hierarchy), is left out: unpacking reports it."""
    m = unp.shape[0]
    big = cap + 1
    ln = np.zeros(m, dtype=np.int64)  # arcs of the graph it stands for, capped at cap + 1
    state = np.zeros(m, dtype=np.int8)  # 0 new, 1 open (on the walk), 2 done
    stack = np.empty(2 * m + 2, dtype=np.int64)
    for j0 in range(m):
        if state[j0] == 2:
            continue
        top = 1
        stack[0] = j0
        while top > 0:
            j = stack[top - 1]
            if state[j] == 2:
                top -= 1
                continue
            if unp[j, 0] < 0:
                ln[j] = 1
                state[j] = 2
                top -= 1
                continue
            a = unp[j, 2]
            b = unp[j, 3]
            if state[j] == 0:
                if a < 0 or b < 0 or state[a] == 1 or state[b] == 1:
                    ln[j] = big
                    state[j] = 2
                    top -= 1
                    continue
                state[j] = 1
                if state[a] == 0:
                    stack[top] = a
                    top += 1
                if state[b] == 0 and b != a:
                    stack[top] = b
                    top += 1
                continue
            ln[j] = min(ln[a] + ln[b], big)
            state[j] = 2
            top -= 1
    total = 0
    for j in range(m):
        if unp[j, 0] >= 0 and ln[j] <= cap:
            total += 1 + ln[j]
    out = np.empty(total, dtype=np.int64)
    o = 0
    for j in range(m):
        if unp[j, 0] < 0:
            continue
        if ln[j] > cap:
            unp[j, 1] = -1
            continue
        unp[j, 1] = o
        out[o] = ln[j]
        o += 1
        top = 1
        stack[0] = j
        while top > 0:
            top -= 1
            x = stack[top]
            if unp[x, 0] < 0:
                out[o] = unp[x, 1]
                o += 1
            else:
                stack[top] = unp[x, 3]
                stack[top + 1] = unp[x, 2]
                top += 2
    return out


class Prepared:
    """The hierarchy laid out for the CPU searches, derived once per hierarchy (:func:`prepared`).

    Node ``v`` becomes ``rank[v]``. Node ``u``'s record is ``rec[u, 0] .. rec[u, 1]``: its up arcs
    ``u -> x`` (``x > u``), then ``rec[u, 1] .. rec[u + 1, 0]``: its down arcs ``x -> u`` (``x > u``),
    each part sorted by neighbour ``x``. A forward search relaxes the first part and stalls on the second,
    a backward search the other way round.

    Attributes
    ----------
    rank, order : ndarray int32, shape (n,)
        Node id -> rank, rank -> node id.
    rec : ndarray int32 (int64 beyond 2^31 arcs or weights), shape (n + 1, 2)
    nw : ndarray int32 (int64 beyond 2^31 arcs or weights), shape (M, 2)
        ``(neighbour, weight)`` of each arc (``M = n_up + n_down``).
    unp : ndarray int32 (int64 beyond 2^31 arcs), shape (M, 4)
        What unpacking needs of each arc, on one cache line: the shortcut's middle (a node id, -1 for an
        arc of the graph); the graph's arc id for an arc of the graph, for a shortcut its offset in
        ``expand`` (-1 when it is not there); the positions of the shortcut's halves ``tail -> mid`` and
        ``mid -> head`` (-1 for an arc of the graph; -2 where the half is not in the hierarchy: a broken
        hierarchy, reported when a path needs it).
    expand : ndarray int32 (int64 beyond 2^31 entries), shape (X,)
        Every shortcut that stands for at most ``_EXPAND_MAX_ARCS`` arcs of the graph, unpacked once: at
        its offset, the number of arcs ``k``, then their ids in path order. Unpacking a path then follows
        the halves only above these small shortcuts, then copies (on DIMACS NY, 32 arcs: 20 MB for the
        sequential CH, 30 MB for CU-CH; a 400-arc path unpacks in 4-5 us instead of 15-25 us).
    core_pos : ndarray int32, shape (n,)
        By rank: the position in ``h.core``, -1 outside the core.
    core : ndarray int32, shape (c,)
        The core's ranks in ``h.core``'s order.
    core_dist : ndarray int64, shape (c, c)
    heap_cap : int
        A bound on the pushes of one upward search (its start, then one per arc into a non-core node),
        hence on the size of its queue.
    """

    def __init__(self, h):
        n = h.n_nodes
        rank = h.rank.astype(np.int64)
        self.rank = h.rank.astype(INDEX_DTYPE)
        self.order = h.order.astype(INDEX_DTYPE)
        n_up, n_dn = h.n_up, h.n_down
        owner = np.concatenate((rank[np.repeat(np.arange(n), np.diff(h.up_first_out))],
                                rank[np.repeat(np.arange(n), np.diff(h.down_first_out))]))
        nbr = np.concatenate((rank[h.up_head], rank[h.down_tail]))
        kind = np.concatenate((np.zeros(n_up, dtype=np.int64), np.ones(n_dn, dtype=np.int64)))
        key = (owner * 2 + kind) * max(n, 1) + nbr  # unique: parallel arcs are merged
        o = np.argsort(key, kind="stable")
        key = key[o]
        w = np.concatenate((h.up_weight, h.down_weight)).astype(DIST_DTYPE)[o]
        mid_id = np.concatenate((h.up_mid, h.down_mid)).astype(np.int64)[o]
        arc = np.concatenate((h.up_arc, h.down_arc)).astype(np.int64)[o]
        owner, nbr, kind = owner[o], nbr[o], kind[o]
        mid = np.where(mid_id >= 0, rank[np.maximum(mid_id, 0)], -1)
        # 32-bit where everything fits (half the bytes: the searches are bound by cache misses)
        small = key.size < 2**31 and (w.size == 0 or int(w.max()) < 2**31)
        self.nw = np.ascontiguousarray(np.column_stack((nbr, w)), dtype=np.int32 if small else np.int64)
        bounds = np.searchsorted(key, np.arange(2 * n + 1, dtype=np.int64) * max(n, 1))
        self.rec = np.ascontiguousarray(np.column_stack((bounds[0::2], np.append(bounds[1::2], bounds[-1]))),
                                        dtype=np.int32 if small else np.int64)
        tail = np.where(kind == 0, owner, nbr)
        head = np.where(kind == 0, nbr, owner)
        sc = mid >= 0
        half1 = np.full(key.size, -1, dtype=np.int64)
        half2 = np.full(key.size, -1, dtype=np.int64)
        half1[sc] = self._lookup(key, tail[sc], mid[sc], n)
        half2[sc] = self._lookup(key, mid[sc], head[sc], n)
        unp = np.ascontiguousarray(np.column_stack((mid_id, arc, half1, half2)), dtype=np.int64)
        self.expand = _expansions(unp, _EXPAND_MAX_ARCS)  # writes the offsets into unp[:, 1]
        wide = key.size >= 2**31 or self.expand.size >= 2**31
        self.unp = unp if wide else unp.astype(np.int32)
        if not wide:
            self.expand = self.expand.astype(np.int32)
        self.core = rank[h.core.astype(np.int64)].astype(INDEX_DTYPE)
        core_pos = np.full(n, -1, dtype=INDEX_DTYPE)
        core_pos[self.core] = np.arange(h.core.size, dtype=INDEX_DTYPE)
        self.core_pos = core_pos
        self.core_dist = np.ascontiguousarray(h.core_dist, dtype=DIST_DTYPE).reshape(h.core.size, h.core.size)
        into_non_core = core_pos[head] < 0
        self.heap_cap = int(max(np.count_nonzero(into_non_core & (kind == 0)),
                                np.count_nonzero((core_pos[tail] < 0) & (kind == 1)))) + 2

    @staticmethod
    def _lookup(key, a, b, n):
        """Positions of the arcs ``a -> b`` (ranks), ``_MISSING`` where there is none."""
        up = b > a
        q = np.where(up, (a * 2) * max(n, 1) + b, (b * 2 + 1) * max(n, 1) + a)
        pos = np.minimum(np.searchsorted(key, q), max(key.size - 1, 0))
        return np.where((key.size > 0) & (key[pos] == q), pos, _MISSING)

    def search_arrays(self):
        """The arrays every search kernel takes first: ``rec, nw, core_pos, core_dist``."""
        return self.rec, self.nw, self.core_pos, self.core_dist


_PREPARED = weakref.WeakKeyDictionary()


def prepared(h):
    """The :class:`Prepared` layout of hierarchy ``h`` (computed on first use, kept while ``h`` lives)."""
    p = _PREPARED.get(h)
    if p is None:
        p = _PREPARED[h] = Prepared(h)
    return p


class _Work:
    """One search's buffers (one per thread), flat so that the kernels index them without multiplying
    by a shape.

    ``dist`` int64 (2n,): node ``v``'s forward distance at ``2v``, backward at ``2v + 1`` (INF between
    queries: reset through ``touched``); ``par`` int32 (2n,): the node each direction reached it from;
    ``qpos`` int32 (2n,): its position in each direction's heap (checked against the heap, never reset);
    ``qk`` int64 / ``qn`` int32 (2, cap): the two heaps; ``touched`` int32 (n,); ``ent`` int32 (2, c):
    each direction's core entries."""

    __slots__ = ("dist", "par", "qpos", "qk", "qn", "touched", "ent")

    def __init__(self, p):
        n = p.rank.size
        self.dist = np.full(2 * n, INF, dtype=DIST_DTYPE)
        self.par = np.empty(2 * n, dtype=INDEX_DTYPE)
        self.qpos = np.zeros(2 * n, dtype=INDEX_DTYPE)
        self.qk = np.empty((2, p.heap_cap), dtype=DIST_DTYPE)
        self.qn = np.empty((2, p.heap_cap), dtype=INDEX_DTYPE)
        self.touched = np.empty(max(n, 1), dtype=INDEX_DTYPE)
        self.ent = np.empty((2, max(p.core.size, 1)), dtype=INDEX_DTYPE)


# ---------------------------------------------------------------------------------------------- kernels
# The kernels take the layout flat (``rec.ravel()``: node ``u``'s up arcs start at ``rec[2u]``, its down
# arcs at ``rec[2u + 1]``, the next record at ``rec[2u + 2]``; ``nw.ravel()``: arc ``j``'s neighbour at
# ``nw[2j]``, its weight at ``nw[2j + 1]``) and index through :func:`uidx`: an unsigned index spares numba's
# negative-index wraparound and its shape loads on every access (measured 20-40% of a query's time).
@njit(cache=True, inline="always")
def uidx(i):
    return np.uint64(i)


# The two queues: 4-ary addressable heaps of :mod:`gpuroute.graph.heap`, the slot of node ``x`` of
# direction ``side`` in ``qpos[2x + side]`` (checked against the heap, never reset; -1 once popped).
@njit(cache=True, inline="always")
def _q_push(qk, qn, size, qpos, side, d, v):
    """Insert ``v`` with key ``d``, or decrease its key if it is in the heap; returns the new size."""
    return ah_update(qk, qn, size, qpos, 2, side, d, v, 2)


@njit(cache=True, inline="always")
def _q_pop(qk, qn, size, qpos, side):
    """Remove the minimum: returns ``(key, node, new size)``."""
    return ah_pop(qk, qn, size, qpos, 2, side, -1, 2)


@njit(cache=True, inline="always")
def _sort_entries(ent, k, dist, side):
    """Insertion sort of ``ent[:k]`` by distance (a few dozen entries)."""
    for i in range(1, k):
        x = ent[uidx(i)]
        dx = dist[uidx(2 * x + side)]
        j = i - 1
        while j >= 0 and dist[uidx(2 * ent[uidx(j)] + side)] > dx:
            ent[uidx(j + 1)] = ent[uidx(j)]
            j -= 1
        ent[uidx(j + 1)] = x


@njit(cache=True)
def _search(rec, nw, core_pos, core_dist, s, t, dist, par, qpos, qk, qn, touched, ent, stall, want_par):
    """Bidirectional CH search from rank ``s`` to rank ``t`` (``s != t``) in the caller's buffers
    (:class:`_Work`; ``dist`` all INF on entry; ``rec`` and ``nw`` flat).

    Returns ``(best, ma, mb, settled, nt)``: the distance (INF when unreachable), the meeting (``ma ==
    mb``: a node of both searches; else the forward entry ``ma`` and backward entry ``mb`` of the core),
    the number of nodes settled by both directions and the length of ``touched`` (for :func:`_reset`).
    With ``want_par``, ``par`` holds the search trees.
    """
    best = _INF
    ma = -1
    mb = -1
    touched[0] = s
    touched[1] = t
    nt = 2
    dist[uidx(2 * s)] = 0
    dist[uidx(2 * t + 1)] = 0
    qkf, qnf, qkb, qnb = qk[0], qn[0], qk[1], qn[1]  # views once, not per heap operation
    entf, entb = ent[0], ent[1]
    sf = 0
    sb = 0
    nef = 0
    neb = 0
    if core_pos[uidx(s)] < 0:
        sf = _q_push(qkf, qnf, 0, qpos, 0, 0, s)
    else:
        entf[0] = s
        nef = 1
    if core_pos[uidx(t)] < 0:
        sb = _q_push(qkb, qnb, 0, qpos, 1, 0, t)
    else:
        entb[0] = t
        neb = 1
    settled = 0
    turn = 0
    while True:
        fgo = sf > 0 and qkf[0] < best
        bgo = sb > 0 and qkb[0] < best
        if fgo and bgo:
            side = turn
            turn = 1 - turn
        elif fgo:
            side = 0
        elif bgo:
            side = 1
        else:
            break
        if side == 0:
            d, u, sf = _q_pop(qkf, qnf, sf, qpos, 0)
        else:
            d, u, sb = _q_pop(qkb, qnb, sb, qpos, 1)
        settled += 1
        a = rec[uidx(2 * u)]
        b = rec[uidx(2 * u + 1)]
        c = rec[uidx(2 * u + 2)]
        if side == 0:
            r0, r1, s0, s1 = a, b, b, c
        else:
            r0, r1, s0, s1 = b, c, a, b
        if stall:
            stalled = False
            for j in range(s0, s1):
                dx = dist[uidx(2 * nw[uidx(2 * j)] + side)]
                if dx != _INF and dx + nw[uidx(2 * j + 1)] < d:
                    stalled = True
                    break
            if stalled:
                continue
        o = 1 - side
        for j in range(r0, r1):
            v = nw[uidx(2 * j)]
            nd = d + nw[uidx(2 * j + 1)]
            iv = uidx(2 * v)
            dv = dist[iv + uidx(side)]
            if nd < dv:
                dvo = dist[iv + uidx(o)]
                if dv == _INF and dvo == _INF:
                    touched[uidx(nt)] = v
                    nt += 1
                dist[iv + uidx(side)] = nd
                if want_par:
                    par[iv + uidx(side)] = u
                if dvo != _INF and nd + dvo < best:
                    best = nd + dvo
                    ma = v
                    mb = v
                if core_pos[uidx(v)] < 0:
                    if side == 0:
                        sf = _q_push(qkf, qnf, sf, qpos, 0, nd, v)
                    else:
                        sb = _q_push(qkb, qnb, sb, qpos, 1, nd, v)
                elif dv == _INF:
                    if side == 0:
                        entf[uidx(nef)] = v
                        nef += 1
                    else:
                        entb[uidx(neb)] = v
                        neb += 1
    if nef > 0 and neb > 0:
        # the core: every forward entry against every backward entry, both by distance, so that the
        # join stops as soon as two entry distances alone reach the best distance
        _sort_entries(entf, nef, dist, 0)
        _sort_entries(entb, neb, dist, 1)
        dmin_b = dist[uidx(2 * entb[0] + 1)]
        for i in range(nef):
            x = entf[uidx(i)]
            dx = dist[uidx(2 * x)]
            if dx + dmin_b >= best:
                break
            row = core_dist[uidx(core_pos[uidx(x)])]
            for k in range(neb):
                y = entb[uidx(k)]
                dy = dist[uidx(2 * y + 1)]
                if dx + dy >= best:
                    break
                cd = row[uidx(core_pos[uidx(y)])]
                if cd != _INF and dx + cd + dy < best:
                    best = dx + cd + dy
                    ma = x
                    mb = y
    return best, ma, mb, settled, nt


@njit(cache=True, inline="always")
def _reset(dist, touched, nt):
    for i in range(nt):
        x = touched[uidx(i)]
        dist[uidx(2 * x)] = _INF
        dist[uidx(2 * x + 1)] = _INF


@njit(cache=True)
def _find(rec, nw, a, b):
    """Position of the arc ``a -> b`` (ranks; flat layout), -1 if none (binary search: a record is sorted
    by neighbour, and a core node's record holds the whole core)."""
    if b > a:
        lo, end = rec[uidx(2 * a)], rec[uidx(2 * a + 1)]
        x = b
    else:
        lo, end = rec[uidx(2 * b + 1)], rec[uidx(2 * b + 2)]
        x = a
    hi = end
    while lo < hi:
        m = (lo + hi) >> 1
        if nw[uidx(2 * m)] < x:
            lo = m + 1
        else:
            hi = m
    if lo < end and nw[uidx(2 * lo)] == x:
        return lo
    return -1


@njit(cache=True)
def _route(rec, nw, core_pos, core_dist, unp, expand, tail, s, t, dist, par, qpos, qk, qn, touched, ent, stack,
           out_arcs, out_nodes, stall):
    """One query with its path (flat ``rec``, ``nw``, ``unp``): search, the hierarchy arcs of the path
    onto ``stack`` (their positions, the first arc on top), then unpacked through ``unp`` and ``expand``
    into ``out_arcs`` (graph arc ids in path order) and ``out_nodes`` (their tails ``tail[arc]``; the
    caller adds the target). Leaves the buffers reset. Returns ``(best, settled, n_arcs, ma, mb)``;
    ``n_arcs < 0`` is an error code."""
    best, ma, mb, settled, nt = _search(rec, nw, core_pos, core_dist, s, t, dist, par, qpos, qk, qn, touched,
                                        ent, stall, True)
    _reset(dist, touched, nt)
    n_arcs = 0
    if best == _INF:
        return best, settled, n_arcs, ma, mb
    cap = stack.shape[0]
    top = 0
    # backward tree mb -> t, pushed in path order, then reversed (the last arc at the bottom); the arc
    # x -> u of the backward search is in the down part of u's record
    x = mb
    while x != t and top < cap:
        u = par[uidx(2 * x + 1)]
        j = _find(rec, nw, x, u)
        if j < 0:
            n_arcs = _ERR_MISSING_HALF
        stack[uidx(top)] = j
        top += 1
        x = u
    if x != t:
        n_arcs = _ERR_TOO_LONG
    i, k = 0, top - 1
    while i < k:
        stack[uidx(i)], stack[uidx(k)] = stack[uidx(k)], stack[uidx(i)]
        i += 1
        k -= 1
    if ma != mb and top < cap:  # the core pair ma -> mb
        j = _find(rec, nw, ma, mb)
        if j < 0:
            n_arcs = _ERR_MISSING_HALF
        stack[uidx(top)] = j
        top += 1
    # forward tree ma -> s, walked backwards: already in reverse path order
    x = ma
    while x != s and top < cap:
        u = par[uidx(2 * x)]
        j = _find(rec, nw, u, x)
        if j < 0:
            n_arcs = _ERR_MISSING_HALF
        stack[uidx(top)] = j
        top += 1
        x = u
    if x != s:
        n_arcs = _ERR_TOO_LONG
    if n_arcs < 0:
        return best, settled, n_arcs, ma, mb
    return best, settled, _unpack(stack, top, unp, expand, tail, out_arcs, out_nodes), ma, mb


@njit(cache=True)
def _unpack(stack, top, unp, expand, tail, out_arcs, out_nodes):
    """Unpack the hierarchy arcs ``stack[:top]`` (positions, flat ``unp``; the first arc on top) into
    ``out_arcs`` (graph arc ids in path order) and ``out_nodes`` (their tails ``tail[arc]``); returns the
    number of arcs, or an error code (< 0)."""
    cap = stack.shape[0]
    n_out = out_arcs.shape[0]
    n_arcs = 0
    while top > 0:
        top -= 1
        j = stack[uidx(top)]
        m = unp[uidx(4 * j)]
        a = unp[uidx(4 * j + 1)]
        if m < 0:  # an arc of the graph
            if n_arcs == n_out:
                return _ERR_TOO_LONG
            out_arcs[uidx(n_arcs)] = a
            n_arcs += 1
        elif a >= 0:  # a small shortcut, unpacked once
            k = expand[uidx(a)]
            if n_arcs + k > n_out:
                return _ERR_TOO_LONG
            for q in range(k):
                out_arcs[uidx(n_arcs + q)] = expand[uidx(a + 1 + q)]
            n_arcs += k
        else:
            h1 = unp[uidx(4 * j + 2)]
            h2 = unp[uidx(4 * j + 3)]
            if h1 < 0 or h2 < 0:
                return _ERR_MISSING_HALF
            if top + 2 > cap:
                return _ERR_TOO_LONG
            stack[uidx(top)] = h2  # mid -> head, popped second
            stack[uidx(top + 1)] = h1  # tail -> mid, popped first
            top += 2
    for i in range(n_arcs):  # independent loads: they overlap
        out_nodes[uidx(i)] = tail[uidx(out_arcs[uidx(i)])]
    return n_arcs


@njit(cache=True, parallel=True)
def _distances(rec, nw, core_pos, core_dist, sources, targets, heap_cap, n_workers, stall):
    """Paired distances int64 (k,) between ranks (flat ``rec``, ``nw``), in parallel: worker ``w`` (its
    own buffers) takes the pairs ``w, w + n_workers, ...``."""
    k = sources.shape[0]
    n = core_pos.shape[0]
    c = core_dist.shape[0]
    res = np.empty(k, dtype=np.int64)
    for wi in prange(n_workers):
        dist = np.full(2 * n, _INF, dtype=np.int64)
        par = np.empty(2, dtype=np.int32)  # no trees
        qpos = np.zeros(2 * n, dtype=np.int32)
        qk = np.empty((2, heap_cap), dtype=np.int64)
        qn = np.empty((2, heap_cap), dtype=np.int32)
        touched = np.empty(max(n, 1), dtype=np.int32)
        ent = np.empty((2, max(c, 1)), dtype=np.int32)
        for i in range(wi, k, n_workers):
            s = sources[i]
            t = targets[i]
            if s == t:
                res[i] = 0
                continue
            best, ma, mb, settled, nt = _search(rec, nw, core_pos, core_dist, s, t, dist, par, qpos, qk, qn,
                                                touched, ent, stall, False)
            res[i] = best
            _reset(dist, touched, nt)
    return res


@njit(cache=True)
def _pair_table(rec, nw, core_pos, core_dist, sources, targets, dist, par, qpos, qk, qn, touched, ent, stall):
    """Distances int64 (|S|, |T|) between ranks (flat ``rec``, ``nw``), one bidirectional search a pair,
    serially in the caller's buffers (:class:`_Work`): :meth:`CHQuery.table`."""
    out = np.empty((sources.shape[0], targets.shape[0]), dtype=np.int64)
    for i in range(sources.shape[0]):
        for j in range(targets.shape[0]):
            s = sources[i]
            t = targets[j]
            if s == t:
                out[i, j] = 0
                continue
            best, ma, mb, settled, nt = _search(rec, nw, core_pos, core_dist, s, t, dist, par, qpos, qk, qn,
                                                touched, ent, stall, False)
            out[i, j] = best
            _reset(dist, touched, nt)
    return out


# ---------------------------------------------------------------------------------------------- hub labels
# Hub labels from the hierarchy (Abraham, Delling, Goldberg, Werneck, "A Hub-Based Labeling Algorithm for
# Shortest Paths on Road Networks", SEA 2011, sec. 4: labels from CH search spaces, pruned by bootstrapping;
# "Hierarchical Hub Labelings for Shortest Paths", ESA 2012). A core (a complete graph) would put most of
# it into every label, so the core is first given a contraction hierarchy of its own.
@njit(cache=True, parallel=True)
def _core_sparse(core_dist):
    """``keep[a, b]``: the core pair ``a -> b`` is not two core pairs ``a -> m -> b`` of the same length
    (weights are positive, so the kept pairs' shortest paths are ``core_dist``)."""
    c = core_dist.shape[0]
    keep = np.zeros((c, c), dtype=np.bool_)
    for a in prange(c):
        row = core_dist[a]
        for b in range(c):
            dab = row[b]
            if a == b or dab == _INF:
                continue
            red = False
            for m in range(c):
                x = row[m]
                if m != a and m != b and x < dab:
                    y = core_dist[m, b]
                    if y != _INF and x + y == dab:
                        red = True
                        break
            keep[a, b] = not red
    return keep


@njit(cache=True)
def _core_witness(u, w, v, core_dist, wgt, outl, outc, dead, stamp, sid, queue):
    """A path ``u -> w`` of length ``core_dist[u, w]`` in the remaining core graph without ``v`` (every
    arc of it is a shortest path, so the search follows only nodes on shortest ``u -> w`` paths)."""
    duw = core_dist[u, w]
    qh = 0
    qt = 1
    queue[0] = u
    stamp[u] = sid
    while qh < qt:
        x = queue[qh]
        qh += 1
        dux = core_dist[u, x]
        for i in range(outc[x]):
            y = outl[x, i]
            if y == v or dead[y] or stamp[y] == sid:
                continue
            wy = wgt[x, y]
            if wy == _INF or dux + wy != core_dist[u, y]:
                continue
            if y == w:
                return True
            dyw = core_dist[y, w]
            if dyw == _INF or core_dist[u, y] + dyw != duw:
                continue
            stamp[y] = sid
            queue[qt] = y
            qt += 1
    return False


@njit(cache=True)
def _core_contract(v, core_dist, wgt, outl, outc, inl, inc, dead, stamp, sid, queue, sc, apply):
    """Shortcuts ``u -> w`` of contracting core node ``v`` (exact witnesses); with ``apply``, add them.
    Returns ``(shortcuts, degree, sid)``."""
    k = 0
    deg = 0
    for i in range(outc[v]):
        w = outl[v, i]
        if not dead[w] and wgt[v, w] != _INF:
            deg += 1
    for i in range(inc[v]):
        u = inl[v, i]
        if dead[u] or wgt[u, v] == _INF:
            continue
        deg += 1
        wu = wgt[u, v]
        for j in range(outc[v]):
            w = outl[v, j]
            if w == u or dead[w] or wgt[v, w] == _INF:
                continue
            length = wu + wgt[v, w]
            if length != core_dist[u, w] or wgt[u, w] == length:
                continue  # longer than the distance, or the arc u -> w is there
            sid += 1
            if not _core_witness(u, w, v, core_dist, wgt, outl, outc, dead, stamp, sid, queue):
                sc[k, 0] = u
                sc[k, 1] = w
                k += 1
    if apply:
        for q in range(k):
            u = sc[q, 0]
            w = sc[q, 1]
            if wgt[u, w] == _INF:
                outl[u, outc[u]] = w
                outc[u] += 1
                inl[w, inc[w]] = u
                inc[w] += 1
            wgt[u, w] = core_dist[u, w]
    return k, deg, sid


@njit(cache=True)
def _core_ch(core_dist, keep):
    """A contraction hierarchy of the core graph (arcs ``keep`` of weight ``core_dist``): nodes contracted
    by edge difference plus contracted neighbours (lazy updates), exact witnesses. Every arc of it, graph
    arc or shortcut, weighs ``core_dist`` of its ends (a shortcut is added only when its two halves are the
    only shortest path left), so it is a core pair of the hierarchy. Returns ``(order (c,), arcs (k, 2))``
    in core positions."""
    c = core_dist.shape[0]
    wgt = np.full((c, c), _INF, dtype=np.int64)
    outl = np.empty((c, c), dtype=np.int32)
    outc = np.zeros(c, dtype=np.int64)
    inl = np.empty((c, c), dtype=np.int32)
    inc = np.zeros(c, dtype=np.int64)
    for a in range(c):
        for b in range(c):
            if keep[a, b]:
                wgt[a, b] = core_dist[a, b]
                outl[a, outc[a]] = b
                outc[a] += 1
                inl[b, inc[b]] = a
                inc[b] += 1
    dead = np.zeros(c, dtype=np.bool_)
    stamp = np.zeros(c, dtype=np.int64)
    sid = 0
    queue = np.empty(c, dtype=np.int32)
    sc = np.empty((c * c, 2), dtype=np.int64)
    deleted = np.zeros(c, dtype=np.int64)
    hk = np.empty(c * c + c, dtype=np.int64)
    hn = np.empty(c * c + c, dtype=np.int32)
    size = 0
    for v in range(c):
        k, deg, sid = _core_contract(v, core_dist, wgt, outl, outc, inl, inc, dead, stamp, sid, queue, sc, False)
        size = heap_push(hk, hn, size, k - deg, v)
    order = np.empty(c, dtype=np.int64)
    done = 0
    while size > 0:
        _, v, size = heap_pop(hk, hn, size)
        if dead[v]:
            continue
        k, deg, sid = _core_contract(v, core_dist, wgt, outl, outc, inl, inc, dead, stamp, sid, queue, sc, False)
        prio = k - deg + deleted[v]
        if size > 0 and prio > hk[0]:
            size = heap_push(hk, hn, size, prio, v)
            continue
        _, _, sid = _core_contract(v, core_dist, wgt, outl, outc, inl, inc, dead, stamp, sid, queue, sc, True)
        dead[v] = True
        order[done] = v
        done += 1
        for i in range(outc[v]):
            if not dead[outl[v, i]]:
                deleted[outl[v, i]] += 1
        for i in range(inc[v]):
            if not dead[inl[v, i]]:
                deleted[inl[v, i]] += 1
    m = 0
    for a in range(c):
        for b in range(c):
            if wgt[a, b] != _INF:
                m += 1
    arcs = np.empty((m, 2), dtype=np.int64)
    m = 0
    for a in range(c):
        for b in range(c):
            if wgt[a, b] != _INF:
                arcs[m, 0] = a
                arcs[m, 1] = b
                m += 1
    return order, arcs


@njit(cache=True)
def _find_all(rec, nw, tails, heads):
    """Positions of the arcs ``tails[i] -> heads[i]`` (ranks; flat layout), -1 where missing."""
    out = np.empty(tails.shape[0], dtype=np.int64)
    for i in range(tails.shape[0]):
        out[i] = _find(rec, nw, tails[i], heads[i])
    return out


@njit(cache=True)
def _heights(ffirst, fnbr, bfirst, bnbr):
    """``ht[v]`` = 0 for a node with no higher neighbour, else 1 + the largest ``ht`` of its higher
    neighbours (either direction); neighbours have higher ids, so one pass from the top."""
    n = ffirst.shape[0] - 1
    ht = np.zeros(n, dtype=np.int64)
    for v in range(n - 1, -1, -1):
        x = -1
        for j in range(ffirst[v], ffirst[v + 1]):
            x = max(x, ht[fnbr[j]])
        for j in range(bfirst[v], bfirst[v + 1]):
            x = max(x, ht[bnbr[j]])
        ht[v] = x + 1
    return ht


@njit(cache=True)
def _label_bounds(nodes, first, nbr, lab_len):
    """Per node of ``nodes``: 1 + the summed labels of its higher neighbours (its candidates at most)."""
    out = np.empty(nodes.shape[0], dtype=np.int64)
    for i in range(nodes.shape[0]):
        v = nodes[i]
        b = 1
        for j in range(first[v], first[v + 1]):
            b += lab_len[nbr[j]]
        out[i] = b
    return out


@njit(cache=True, parallel=True)
def _label_chunk(nodes, ffirst, fnbr, fw, bfirst, bnbr, bw, start, length, hub, dst, slot, s_hub, s_dst, s_par,
                 s_len, tmp, tpar, touched, n_workers):
    """Labels of ``nodes`` (their higher neighbours' labels done), both directions, into the scratch slots
    ``slot[side, i]`` of ``s_hub``/``s_dst``/``s_par``, lengths into ``s_len``. ``start``/``length``
    (2, n), ``hub``/``dst`` (2,) tuples: the labels so far. Per worker: ``tmp`` (INF), ``tpar``,
    ``touched`` rows."""
    k = nodes.shape[0]
    for wi in prange(n_workers):
        t_d = tmp[wi]
        t_p = tpar[wi]
        tch = touched[wi]
        for i in range(wi, k, n_workers):
            v = nodes[i]
            for side in range(2):
                if side == 0:
                    first, nbr, w = ffirst, fnbr, fw
                    lh, ld = hub[0], dst[0]
                    oh, od = hub[1], dst[1]
                else:
                    first, nbr, w = bfirst, bnbr, bw
                    lh, ld = hub[1], dst[1]
                    oh, od = hub[0], dst[0]
                o = 1 - side
                nt = 1
                tch[0] = v
                t_d[v] = 0
                t_p[v] = -1
                for a in range(first[v], first[v + 1]):
                    x = nbr[a]
                    c = w[a]
                    st = start[side, x]
                    for q in range(st, st + length[side, x]):
                        hq = lh[q]
                        dq = ld[q] + c
                        if dq < t_d[hq]:
                            if t_d[hq] == _INF:
                                tch[nt] = hq
                                nt += 1
                            t_d[hq] = dq
                            t_p[hq] = a - first[v]
                # keep a hub unless the other direction's label of it shows a shorter path
                base = slot[side, i]
                m = 0
                for q in range(nt):
                    hq = tch[q]
                    d = t_d[hq]
                    keep = True
                    if hq != v:
                        st = start[o, hq]
                        for r in range(st, st + length[o, hq]):
                            y = t_d[oh[r]]
                            if y != _INF and y + od[r] < d:
                                keep = False
                                break
                    if keep:
                        s_hub[base + m] = hq
                        m += 1
                s_hub[base:base + m].sort()
                for q in range(m):
                    hq = s_hub[base + q]
                    s_dst[base + q] = t_d[hq]
                    s_par[base + q] = t_p[hq]
                s_len[side, i] = m
                for q in range(nt):
                    t_d[tch[q]] = _INF


@njit(cache=True)
def _label_store(nodes, slot, s_hub, s_dst, s_par, s_len, start, length, hub, dst, par, used):
    """Append the chunk's labels (scratch) to the label arrays (capacity checked by the caller)."""
    for side in range(2):
        o = used[side]
        lh, ld, lp = hub[side], dst[side], par[side]
        for i in range(nodes.shape[0]):
            v = nodes[i]
            m = s_len[side, i]
            b = slot[side, i]
            start[side, v] = o
            length[side, v] = m
            for q in range(m):
                lh[o + q] = s_hub[b + q]
                ld[o + q] = s_dst[b + q]
                lp[o + q] = s_par[b + q]
            o += m
        used[side] = o


@njit(cache=True)
def _label_reorder(start, length, new_start, hub, dst, par, h_out, d_out, p_out):
    """Copy each node's label from its build position to ``new_start`` (label-id order)."""
    for v in range(start.shape[0]):
        a = start[v]
        b = new_start[v]
        for q in range(length[v]):
            h_out[b + q] = hub[a + q]
            d_out[b + q] = dst[a + q]
            p_out[b + q] = par[a + q]


class HubLabels:
    """Hub labels of a hierarchy for point-to-point queries on the CPU (:func:`hub_labels`).

    Abraham, Delling, Goldberg, Werneck, "A Hub-Based Labeling Algorithm for Shortest Paths on Road
    Networks", SEA 2011, sec. 4: node ``v``'s forward label is its upward search space with distances,
    its backward label the same over ``down``, each pruned (top-down, "bootstrapping") of the hubs whose
    distance another hub beats through the hub's own label of the other direction; then ``dist(s, t)`` is
    the smallest ``d_f(s, h) + d_b(t, h)`` over the hubs ``h`` of both labels (a merge of two sorted arrays:
    a query reads two labels, not a search space). Each entry keeps the arc its distance came through, so
    a path walks from hub to hub down to the hierarchy arcs and unpacks as a CH path does.

    A core (CU-CH) would put most of itself into every label; it is first given a contraction hierarchy
    of its own (:func:`_core_ch`: its nodes contracted with exact witnesses on the core graph that
    ``core_dist`` spans), whose arcs are core pairs of the hierarchy, so that the labels see an ordinary
    hierarchy. The labels are large (DIMACS NY: about 90 hubs a node and direction for the sequential
    CH, 110 for CU-CH; 10 bytes a hub: 0.5 GB) and take seconds to build (in parallel over the nodes of one
    height of the hierarchy).

    Attributes
    ----------
    lid : ndarray int32, shape (n,)
        Rank -> label id (the rank, but the core's reordered by its own hierarchy).
    node_lid, lid_node : ndarray int32, shape (n,)
        Node id -> label id and back.
    node : ndarray int64, shape (n + 1, 4)
        By label id ``v``: its forward label is entries ``node[v, 0] .. node[v + 1, 0]`` of ``hub`` (int32
        label ids, ascending), ``dist`` (int32, int64 beyond 2^31) and ``par`` (uint16, int32 beyond: the
        index, among ``v``'s arcs of the label's direction, of the arc the distance came through), its
        backward label entries ``node[v, 1] .. node[v + 1, 1]`` (after every forward label); its forward
        arcs are rows ``node[v, 2] .. node[v + 1, 2]`` of ``arc``, its backward arcs rows ``node[v, 3] ..
        node[v + 1, 3]``.
    arc : ndarray int32 (int64 beyond 2^31 arcs), shape (m, 2)
        The label hierarchy's arcs, forward (``v -> x``) then backward (``x -> v``, ``x`` higher): the
        neighbour's label id and the arc's position in :class:`Prepared`'s layout.
    """

    def __init__(self, h):
        p = prepared(h)
        n = h.n_nodes
        c = p.core.size
        rec, nw = p.rec.ravel(), p.nw.ravel()
        lid = np.arange(n, dtype=np.int64)
        rank_ids = np.arange(n, dtype=np.int64)
        non_core = p.core_pos < 0
        # the hierarchy's arcs but core pairs: owner (the lower end), neighbour, weight, position, direction
        m_all = p.nw.shape[0]
        owner = np.repeat(rank_ids, np.diff(p.rec[:, 0]))
        kind = np.zeros(m_all, dtype=np.int64)
        lo_dn = np.repeat(p.rec[:, 1][:-1].astype(np.int64), np.diff(p.rec[:, 0]))
        kind[np.arange(m_all) >= lo_dn] = 1
        nbr = p.nw[:, 0].astype(np.int64)
        keep = non_core[owner] | non_core[nbr] if c else np.ones(m_all, dtype=bool)
        cols = [owner[keep], nbr[keep], p.nw[keep, 1].astype(np.int64), np.flatnonzero(keep), kind[keep]]
        if c:
            if not np.array_equal(np.sort(p.core.astype(np.int64)), np.arange(n - c, n)):
                raise ValueError("hub labels need the core to hold the highest ranks")
            cd = np.ascontiguousarray(p.core_dist)
            order_c, carcs = _core_ch(cd, _core_sparse(cd))
            crank = np.empty(c, dtype=np.int64)
            crank[order_c] = np.arange(c)
            core_ids = p.core.astype(np.int64)
            lid[core_ids] = n - c + crank
            x, y = core_ids[carcs[:, 0]], core_ids[carcs[:, 1]]
            pos = _find_all(rec, nw, x, y)
            up = crank[carcs[:, 1]] > crank[carcs[:, 0]]
            cols = [np.concatenate((cols[0], np.where(up, x, y))), np.concatenate((cols[1], np.where(up, y, x))),
                    np.concatenate((cols[2], cd[carcs[:, 0], carcs[:, 1]])), np.concatenate((cols[3], pos)),
                    np.concatenate((cols[4], (~up).astype(np.int64)))]
        own, nb, w, pos, kd = lid[cols[0]], lid[cols[1]], cols[2], cols[3], cols[4]
        self.lid = lid.astype(INDEX_DTYPE)
        self.node_lid = lid[p.rank].astype(INDEX_DTYPE)  # node id -> label id
        self.lid_node = np.empty(n, dtype=INDEX_DTYPE)  # label id -> node id
        self.lid_node[self.node_lid] = np.arange(n, dtype=INDEX_DTYPE)
        self.first, self.nbr, self.w, self.pos = [], [], [], []
        for side in range(2):
            sel = kd == side
            o = np.argsort(own[sel], kind="stable")
            first = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(np.bincount(own[sel], minlength=n), out=first[1:])
            self.first.append(first)
            self.nbr.append(nb[sel][o].astype(INDEX_DTYPE))
            self.w.append(w[sel][o].astype(np.int64))
            self.pos.append(pos[sel][o].astype(np.int64))
        self._build(n)
        del self.first, self.nbr, self.w, self.pos  # in ``node`` and ``arc`` now

    def _build(self, n):
        ff, bf = self.first
        fn, bn = self.nbr
        fw, bw = self.w
        ht = _heights(ff, fn, bf, bn)
        groups = np.argsort(ht, kind="stable")
        bounds = np.searchsorted(ht[groups], np.arange(int(ht.max()) + 2 if n else 1))
        start = np.zeros((2, n), dtype=np.int64)
        length = np.zeros((2, n), dtype=np.int64)
        cap = max(64 * n, 1024)
        hub = [np.empty(cap, dtype=INDEX_DTYPE), np.empty(cap, dtype=INDEX_DTYPE)]
        dst = [np.empty(cap, dtype=DIST_DTYPE), np.empty(cap, dtype=DIST_DTYPE)]
        par = [np.empty(cap, dtype=INDEX_DTYPE), np.empty(cap, dtype=INDEX_DTYPE)]
        used = np.zeros(2, dtype=np.int64)
        n_workers = numba.get_num_threads()
        tmp = np.full((n_workers, max(n, 1)), INF, dtype=DIST_DTYPE)
        tpar = np.empty((n_workers, max(n, 1)), dtype=INDEX_DTYPE)
        touched = np.empty((n_workers, max(n, 1)), dtype=INDEX_DTYPE)
        for g in range(bounds.size - 1):
            nodes_g = groups[bounds[g]:bounds[g + 1]]
            # chunks whose candidate bounds fit a scratch of _LABEL_SCRATCH entries per direction
            bnd = np.stack((_label_bounds(nodes_g, ff, fn, length[0]), _label_bounds(nodes_g, bf, bn, length[1])))
            cum = np.cumsum(bnd.max(axis=0))
            i0 = 0
            while i0 < nodes_g.size:
                i1 = max(i0 + 1, int(np.searchsorted(cum, (cum[i0 - 1] if i0 else 0) + _LABEL_SCRATCH, "right")))
                nodes = nodes_g[i0:i1]
                b = bnd[:, i0:i1]
                slot = np.zeros((2, nodes.size), dtype=np.int64)
                np.cumsum(b[:, :-1], axis=1, out=slot[:, 1:])
                tot = int(b.sum(axis=1).max())
                s_hub = np.empty(2 * tot, dtype=INDEX_DTYPE)
                s_dst = np.empty(2 * tot, dtype=DIST_DTYPE)
                s_par = np.empty(2 * tot, dtype=INDEX_DTYPE)
                slot[1] += tot
                s_len = np.zeros((2, nodes.size), dtype=np.int64)
                _label_chunk(nodes, ff, fn, fw, bf, bn, bw, start, length, (hub[0], hub[1]), (dst[0], dst[1]), slot,
                             s_hub, s_dst, s_par, s_len, tmp, tpar, touched, min(n_workers, nodes.size))
                need = int((used + s_len.sum(axis=1)).max())
                if need > hub[0].size:
                    new = max(need, 2 * hub[0].size)
                    for side in range(2):
                        hub[side] = np.resize(hub[side], new)
                        dst[side] = np.resize(dst[side], new)
                        par[side] = np.resize(par[side], new)
                _label_store(nodes, slot, s_hub, s_dst, s_par, s_len, start, length, (hub[0], hub[1]),
                             (dst[0], dst[1]), (par[0], par[1]), used)
                i0 = i1
        big = max((int(dst[s][:used[s]].max()) if used[s] else 0) for s in range(2))
        ddt = np.int32 if big < 2**31 - 1 else DIST_DTYPE
        deg = max(int(np.diff(f).max()) if f.size > 1 else 0 for f in self.first)
        pdt = np.uint16 if deg < 2**16 - 1 else INDEX_DTYPE
        # labels in label-id order, forward then backward in one array each, and one node row for the
        # query: its forward and backward label starts and arc starts
        m_f, m_b = int(used[0]), int(used[1])
        a_f = self.first[0][-1]
        node = np.zeros((n + 1, 4), dtype=np.int64)
        np.cumsum(length[0], out=node[1:, 0])
        np.cumsum(length[1], out=node[1:, 1])
        node[:, 1] += m_f
        node[:, 2] = self.first[0]
        node[:, 3] = self.first[1] + a_f
        self.hub = np.empty(m_f + m_b, dtype=INDEX_DTYPE)
        self.dist = np.empty(m_f + m_b, dtype=ddt)
        self.par = np.empty(m_f + m_b, dtype=pdt)
        for side in range(2):
            _label_reorder(start[side], length[side], node[:, side].copy(), hub[side], dst[side], par[side],
                           self.hub, self.dist, self.par)
            hub[side] = dst[side] = par[side] = None
        pos = np.concatenate(self.pos)
        adt = INDEX_DTYPE if pos.size == 0 or int(pos.max()) < 2**31 else np.int64
        self.arc = np.ascontiguousarray(np.column_stack((np.concatenate(self.nbr), pos)), dtype=adt)
        self.node = node

    @property
    def n_hubs(self):
        """Label entries, both directions."""
        return int(self.hub.size)

    @property
    def nbytes(self):
        return sum(int(a.nbytes) for a in (self.hub, self.dist, self.par, self.arc, self.node))


#: Scratch entries (per direction) of one parallel chunk of the label construction.
_LABEL_SCRATCH = 1 << 24
_LABELS = weakref.WeakKeyDictionary()
#: Counts the hub labels built, so that a query object looks for new ones only when there are some.
_LABELS_BUILT = [0]


def built_hub_labels(h):
    """The :class:`HubLabels` of ``h`` if :func:`hub_labels` built them, else None (builds nothing)."""
    return _LABELS.get(h)


def hub_labels(h):
    """The :class:`HubLabels` of hierarchy ``h``: built on the first call (seconds, and on DIMACS NY about
    0.5 GB), kept while ``h`` lives. Once built, :class:`CHQuery` and :func:`distances_cpu` answer from
    them (unless told ``labels=False``)."""
    lab = _LABELS.get(h)
    if lab is None:
        lab = _LABELS[h] = HubLabels(h)
        _LABELS_BUILT[0] += 1
    return lab


@njit(cache=True, inline="always")
def _meet(node, hub, dist, s, t):
    """Merge of ``s``'s forward and ``t``'s backward labels: ``(distance, i, k, scanned)`` with ``i``, ``k``
    the entries of the best hub (-1 when none)."""
    i = node[uidx(4 * s)]
    ie = node[uidx(4 * s + 4)]
    k = node[uidx(4 * t + 1)]
    ke = node[uidx(4 * t + 5)]
    i0 = i
    k0 = k
    best = _INF
    bi = -1
    bk = -1
    while i < ie and k < ke:
        a = hub[uidx(i)]
        b = hub[uidx(k)]
        if a == b:
            x = np.int64(dist[uidx(i)]) + np.int64(dist[uidx(k)])
            if x < best:
                best = x
                bi = i
                bk = k
            i += 1
            k += 1
        elif a < b:
            i += 1
        else:
            k += 1
    return best, bi, bk, (i - i0) + (k - k0)


@njit(cache=True, inline="always")
def _label_find(lo, end, hub, x):
    """Entry of hub ``x`` in the label ``hub[lo:end]`` (ascending), -1 if none."""
    hi = end
    while lo < hi:
        m = (lo + hi) >> 1
        if hub[uidx(m)] < x:
            lo = m + 1
        else:
            hi = m
    if lo < end and hub[uidx(lo)] == x:
        return lo
    return -1


@njit(cache=True)
def _route_labels(node, hub, dist, par, arc, unp, expand, tail, s, t, stack, out_arcs, out_nodes):
    """One query with its path by hub labels (label ids ``s != t``; flat ``node``, ``arc``, ``unp``): the
    best hub, the hierarchy arcs from ``s`` up to it and from it down to ``t`` (each entry's arc, then the
    next node's entry of the hub), then unpacked as :func:`_route` does. Returns ``(best, scanned,
    n_arcs, hub)``."""
    best, i, k, scanned = _meet(node, hub, dist, s, t)
    if best == _INF:
        return best, scanned, 0, -1
    hbest = hub[uidx(i)]
    cap = stack.shape[0]
    top = 0
    # backward: t up to the hub; the arcs come last-first, so they go to the bottom in this order
    v = t
    while v != hbest:
        if k < 0 or top == cap:
            return best, scanned, _ERR_MISSING_HALF, hbest
        a = node[uidx(4 * v + 3)] + np.int64(par[uidx(k)])
        stack[uidx(top)] = arc[uidx(2 * a + 1)]
        top += 1
        v = arc[uidx(2 * a)]
        k = _label_find(node[uidx(4 * v + 1)], node[uidx(4 * v + 5)], hub, hbest)
    # forward: s up to the hub, then reversed (the first arc on top)
    base = top
    v = s
    while v != hbest:
        if i < 0 or top == cap:
            return best, scanned, _ERR_MISSING_HALF, hbest
        a = node[uidx(4 * v + 2)] + np.int64(par[uidx(i)])
        stack[uidx(top)] = arc[uidx(2 * a + 1)]
        top += 1
        v = arc[uidx(2 * a)]
        i = _label_find(node[uidx(4 * v)], node[uidx(4 * v + 4)], hub, hbest)
    x, y = base, top - 1
    while x < y:
        stack[uidx(x)], stack[uidx(y)] = stack[uidx(y)], stack[uidx(x)]
        x += 1
        y -= 1
    for q in range(top):
        if stack[uidx(q)] < 0:
            return best, scanned, _ERR_MISSING_HALF, hbest
    return best, scanned, _unpack(stack, top, unp, expand, tail, out_arcs, out_nodes), hbest


@njit(cache=True, parallel=True)
def _distances_labels(node, hub, dist, sources, targets):
    """Paired distances int64 (k,) between label ids (flat ``node``), in parallel."""
    k = sources.shape[0]
    res = np.empty(k, dtype=np.int64)
    for i in prange(k):
        s = sources[i]
        t = targets[i]
        if s == t:
            res[i] = 0
        else:
            res[i] = _meet(node, hub, dist, s, t)[0]
    return res


# ---------------------------------------------------------------------------------------------- Python API
def _node(x, n, what):
    try:
        v = operator.index(x)
    except TypeError:
        raise TypeError(f"{what} must be an integer node id, got {type(x).__name__}") from None
    if v < 0 or v >= n:
        raise IndexError(f"{what} {v} is outside the node range [0, {n})")
    return v


def id_array(x, n, what):
    a = np.atleast_1d(np.asarray(x))
    if a.ndim != 1:
        raise ValueError(f"{what} must be a 1-D array of node ids, got shape {a.shape}")
    if a.size and a.dtype.kind not in "iu":
        raise TypeError(f"{what} must be integer node ids (dtype {a.dtype})")
    a = a.astype(np.int64)
    bad = (a < 0) | (a >= n)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise IndexError(f"{what}[{i}] = {int(a[i])} is outside the node range [0, {n})")
    return a


_PathResult = None


def _path_result_class():
    global _PathResult
    if _PathResult is None:
        from ..query.p2p import PathResult

        _PathResult = PathResult
    return _PathResult


class CHQuery:
    """Point-to-point shortest paths over a contraction hierarchy on the CPU, buffers reused across
    queries (one object per thread: it is not thread-safe).

    Parameters
    ----------
    ch : ContractionHierarchy
        The facade: ``ch.h`` (the arrays), ``ch.graph`` (needed by :meth:`route`), ``ch.weight``.
    stall : bool
        Stall-on-demand (Geisberger et al., WEA 2008, sec. 4); the result is the same without.
    labels : bool or None
        Answer from the hierarchy's hub labels (:func:`hub_labels`; same results, a few microseconds a
        query): True builds them now if need be, False never uses them, None (default) uses them once
        they are built for ``ch.h``.

    Notes
    -----
    The searches run on :func:`prepared`'s layout of the hierarchy. Buffers (:class:`_Work`): int64
    (2n,) distances and int32 (2n,) parents and heap positions (the distances reset through the touched
    list after each query, not O(n) per query), two heaps of ``heap_cap`` slots, a path stack (2n + 4,)
    and path buffers (n,). One numba call per query does the search, the unpacking and writes the path.
    """

    def __init__(self, ch, *, stall=True, labels=None):
        self.ch = ch
        h = ch.h
        self.h = h
        p = prepared(h)
        n = h.n_nodes
        self._n = n
        self._p = p
        self._rank = p.rank
        self.stall = bool(stall)
        w = self._w = _Work(p)
        self._stack = np.empty(2 * n + 4, dtype=np.int64)
        self._arcs = np.empty(max(n - 1, 1), dtype=INDEX_DTYPE)
        self._nodes = np.empty(n + 1, dtype=INDEX_DTYPE)
        self._empty = np.zeros(0, dtype=INDEX_DTYPE)
        # the kernel's arguments before and after the graph's tails and the two ranks (tuples: nothing
        # rebuilt per call)
        self._pre = (p.rec.ravel(), p.nw.ravel(), p.core_pos, p.core_dist, p.unp.ravel(), p.expand)
        self._post = (w.dist, w.par, w.qpos, w.qk, w.qn, w.touched, w.ent, self._stack, self._arcs, self._nodes,
                      self.stall)
        self._graph = None
        self._use_labels = labels
        self._lab = None
        self._seen = -1
        if labels:
            self._set_labels(hub_labels(h))

    def _set_labels(self, lab):
        self._lab = lab
        self._lab_pre = (lab.node.ravel(), lab.hub, lab.dist, lab.par, lab.arc.ravel(), self._pre[4], self._pre[5])
        self._lab_post = (self._stack, self._arcs, self._nodes)

    def _of_graph(self, g):
        """``(weight name, unit, tail int32)`` of the graph ``g`` (looked up once per graph)."""
        if g is not self._graph:
            ch = self.ch
            wname = ch.weight if ch.weight is not None else g.default_weight
            self._gw = (wname, g.units[wname], np.ascontiguousarray(g.tail, dtype=INDEX_DTYPE))
            self._graph = g
        return self._gw

    def route(self, source, target):
        """Shortest path ``source -> target`` by the bidirectional CH query (or the hub labels), unpacked
        to graph arcs.

        Parameters
        ----------
        source, target : int
            Node ids in ``[0, n)``.

        Returns
        -------
        PathResult
            ``distance`` int (the weight's unit, INF when unreachable), ``nodes`` int32 (k,) (empty when
            unreachable, ``[source]`` when ``source == target``), ``arcs`` int32 (k-1,) graph arc ids
            whose weights sum to the distance, ``settled`` (nodes settled by both searches; with labels,
            label entries read), ``method="ch"``, ``device="cpu"``, ``stats`` ``{"meeting": (a, b)}``
            (``a == b``: a node of both searches, or the hub; else the core pair the path crosses).

        Raises
        ------
        IndexError
            An id outside ``[0, n)``.
        TypeError
            A non-integer id.
        ValueError
            No graph (a hierarchy loaded without it), or a broken hierarchy (a shortcut's half missing).
        """
        g = self.ch.graph
        if g is None:
            raise ValueError("route needs the graph the hierarchy was built from: "
                             "ContractionHierarchy.load(directory, graph=...)")
        n = self._n
        s = _node(source, n, "source")
        t = _node(target, n, "target")
        wname, unit, tail = self._of_graph(g)
        PathResult = _PathResult or _path_result_class()
        if s == t:
            return PathResult(0, np.array([s], dtype=INDEX_DTYPE), self._empty, wname, unit, 0, "ch",
                              device="cpu")
        lab = self._lab
        if lab is None and self._use_labels is None and self._seen != _LABELS_BUILT[0]:
            self._seen = _LABELS_BUILT[0]
            lab = _LABELS.get(self.h)
            if lab is not None:
                self._set_labels(lab)
        if lab is not None:
            nl = lab.node_lid
            best, settled, k, hub = _route_labels(*self._lab_pre, tail, nl[s], nl[t], *self._lab_post)
        else:
            rank = self._rank
            best, settled, k, ma, mb = _route(*self._pre, tail, rank[s], rank[t], *self._post)
        if best == INF:
            return PathResult(INF, self._empty, self._empty, wname, unit, settled, "ch", device="cpu")
        if k < 0:
            why = "a shortcut's half is missing" if k == _ERR_MISSING_HALF else "the unpacked path is not simple"
            raise ValueError(f"broken hierarchy: {why} on the path {s} -> {t}")
        nodes = self._nodes[:k + 1].copy()
        nodes[k] = t
        if lab is not None:
            meeting = (int(lab.lid_node[hub]),) * 2
        else:
            order = self._p.order
            meeting = (int(order[ma]), int(order[mb]))
        return PathResult(best, nodes, self._arcs[:k].copy(), wname, unit, settled, "ch", {"meeting": meeting},
                          device="cpu")

    def table(self, sources, targets):
        """Distances between a few nodes, every source to every target, in this query object's buffers
        (one numba call, serial: no parallel launch and no lock, for a route leg's handful of phantom
        nodes; :meth:`ContractionHierarchy.table` for large tables).

        Parameters
        ----------
        sources, targets : array_like of int, shape (|S|,), (|T|,)
            Node ids in ``[0, n)``.

        Returns
        -------
        ndarray int64, shape (|S|, |T|)
            In the weight's unit; ``INF`` where unreachable, 0 where source and target are one node.

        Raises
        ------
        IndexError
            An id outside ``[0, n)`` (named, with its position).
        """
        s = id_array(sources, self._n, "sources")
        t = id_array(targets, self._n, "targets")
        w = self._w
        rank = self._rank
        return _pair_table(*self._pre[:4], rank[s], rank[t], w.dist, w.par, w.qpos, w.qk, w.qn, w.touched, w.ent,
                           self.stall)


def distances_cpu(h, sources, targets, *, stall=True, labels=None):
    """Distances of the pairs ``(sources[i], targets[i])`` by bidirectional CH queries (Geisberger et al.,
    WEA 2008, sec. 4), in parallel over pairs (numba ``prange`` over one worker per thread, each with its
    own buffers, taking every ``n_threads``-th pair); or, with hub labels, one label merge a pair.

    Parameters
    ----------
    h : Hierarchy
    sources, targets : array_like of int, shape (k,)
    stall : bool
        Stall-on-demand (same result either way).
    labels : bool or None
        Hub labels (:func:`hub_labels`): True builds them if need be, False never uses them, None (default)
        uses them once they are built for ``h``. Same results.

    Returns
    -------
    ndarray int64, shape (k,)
        In the weight's unit; ``INF`` where unreachable, 0 where ``sources[i] == targets[i]``.

    Raises
    ------
    ValueError
        ``sources`` and ``targets`` of different shapes.
    IndexError
        An id outside ``[0, n)``.
    """
    n = h.n_nodes
    s = id_array(sources, n, "sources")
    t = id_array(targets, n, "targets")
    if s.shape != t.shape:
        raise ValueError(f"sources and targets must pair up: {s.size} sources, {t.size} targets")
    if s.size == 0:
        return np.zeros(0, dtype=DIST_DTYPE)
    lab = hub_labels(h) if labels else (_LABELS.get(h) if labels is None else None)
    if lab is not None:
        return _distances_labels(lab.node.ravel(), lab.hub, lab.dist, lab.node_lid[s], lab.node_lid[t])
    p = prepared(h)
    n_workers = max(1, min(s.size // _MIN_PAIRS_PER_WORKER, numba.get_num_threads()))
    return _distances(p.rec.ravel(), p.nw.ravel(), p.core_pos, p.core_dist, p.rank[s], p.rank[t], p.heap_cap,
                      n_workers, bool(stall))
