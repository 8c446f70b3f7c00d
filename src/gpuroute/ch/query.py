"""Point-to-point CH queries on the CPU (numba): :class:`CHQuery` (one path, buffers reused) and
:func:`distances_cpu` (many pairs in parallel).

The search is the bidirectional CH query of Geisberger, Sanders, Schultes, Delling, "Contraction
Hierarchies: Faster and Simpler Hierarchical Routing in Road Networks", WEA 2008, sec. 4: a forward
Dijkstra over ``up`` from the source and a backward Dijkstra over ``down`` (a CSR by head, so the
backward search reads it as its own upward graph) from the target, alternating; a direction stops when
its queue minimum reaches the best meeting distance. Stall-on-demand (sec. 4) is on by default: a node
settled with a distance that a higher-ranked neighbour beats through its arc into it is not expanded.

A core (CU-CH's overlay, Karimi, Koppelman, Michael, ICS '19, sec. 3.6) is handled through ``core_dist``
rather than through the core pairs' arcs: neither direction expands a core node; a core node that a
direction reaches is an *entry*, and each new entry distance is joined with every entry of the other
direction through ``core_dist`` (the core pairs are exact, so one core hop is all a shortest up-down
path needs). The meeting is then a node of both searches or a pair of entries ``(a, b)``, and the path
takes the hierarchy arc ``a -> b`` (a core pair) between the two search trees.

Paths are unpacked in numba through shortcut middles (:func:`gpuroute.ch.hierarchy.unpack`'s rule):
the half ``u -> m`` of a shortcut ``u -> w`` via ``m`` is in ``up`` of ``u`` when ``rank[m] > rank[u]``,
else in ``down`` of ``m``; the half ``m -> w`` in ``up`` of ``m`` when ``rank[w] > rank[m]``, else in
``down`` of ``w``. Those positions are looked up once per hierarchy (:class:`Prepared`), so unpacking
follows indices and scans nothing.

Layout (:class:`Prepared`, once per hierarchy; PHAST's reordering, Delling et al., IPDPS 2011,
sec. 4.1): nodes are renumbered by rank and each node's up arcs and down arcs (by head) lie in one
record, neighbour and weight side by side; a search keeps both directions' distances and parents of a
node in one row. A CH search is bound by cache misses (a few hundred scattered nodes per query), so
this is where its time goes.

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
from ..sssp.dijkstra import heap_pop, heap_push

__all__ = ["CHQuery", "distances_cpu", "prepared", "Prepared", "INF"]

_INF = INF
#: Pairs per parallel chunk of :func:`distances_cpu` at least (each chunk allocates its own buffers).
_MIN_PAIRS_PER_CHUNK = 256
#: Chunks per thread in :func:`distances_cpu` (load balance).
_CHUNKS_PER_THREAD = 4

# error codes of the route kernel (negative n_arcs)
_ERR_MISSING_HALF = -1
_ERR_TOO_LONG = -2
#: A half position in ``Prepared.unp`` where the shortcut's half is not in the hierarchy.
_MISSING = -2


# ---------------------------------------------------------------------------------------------- derived arrays
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
        arc of the graph), the graph's arc id (-1 for a shortcut), and the positions of the shortcut's
        halves ``tail -> mid`` and ``mid -> head`` (-1 for an arc of the graph; -2 where the half is not
        in the hierarchy: a broken hierarchy, reported when a path needs it).
    core_pos : ndarray int32, shape (n,)
        By rank: the position in ``h.core``, -1 outside the core.
    core : ndarray int32, shape (c,)
        The core's ranks in ``h.core``'s order.
    core_dist : ndarray int64, shape (c, c)
    heap_cap : int
        A bound on the pushes of one upward search (its start, then one per arc into a non-core node).
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
        self.unp = np.ascontiguousarray(np.column_stack((mid_id, arc, half1, half2)),
                                        dtype=np.int32 if key.size < 2**31 else np.int64)
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


# ---------------------------------------------------------------------------------------------- kernels
@njit(cache=True, inline="always")
def _reach(x, d, u, j, side, st, hk, hn, size, touched, nt, entries, ne, core_pos, core_dist, best, ma, mb):
    """Node ``x`` gets the tentative distance ``d`` in direction ``side`` (0 forward, 1 backward) from
    ``u`` through arc ``j``: record it in ``st[x]`` (``d_f, d_b, parent_f, parent_b``, a parent packed as
    ``u << 32 | j``), then push it (outside the core) or join it with the other side's core entries."""
    o = 1 - side
    first = st[x, side] == _INF
    if first:
        touched[side, nt] = x
        nt += 1
    st[x, side] = d
    st[x, 2 + side] = (np.int64(u) << 32) | j
    cx = core_pos[x]
    if cx < 0:
        dx = st[x, o]
        if dx != _INF and d + dx < best:
            best = d + dx
            ma = x
            mb = x
        size = heap_push(hk, hn, size, d, x)
    else:
        if first:
            entries[side, ne[side]] = x
            ne[side] += 1
        for k in range(ne[o]):
            y = entries[o, k]
            dy = st[y, o]
            if d + dy >= best:  # no need to read core_dist (the costly part)
                continue
            cy = core_pos[y]
            cd = core_dist[cx, cy] if side == 0 else core_dist[cy, cx]
            if cd != _INF:
                tot = d + cd + dy
                if tot < best:
                    best = tot
                    if side == 0:
                        ma = x
                        mb = y
                    else:
                        ma = y
                        mb = x
    return size, nt, best, ma, mb


@njit(cache=True, inline="always")
def _settle(side, rec, nw, st, hk, hn, size, touched, nt, entries, ne, core_pos, core_dist, best, ma, mb, stall):
    """Pop direction ``side``'s queue minimum ``u`` and, unless stale or stalled (a higher neighbour
    reaches it shorter through the other part of its record), relax its part of the record. Returns the
    new state and 1 if a node was settled."""
    d, u, size = heap_pop(hk, hn, size)
    if d > st[u, side]:
        return size, nt, best, ma, mb, 0
    a = rec[u, 0]
    b = rec[u, 1]
    c = rec[u + 1, 0]
    if side == 0:
        r0, r1, s0, s1 = a, b, b, c
    else:
        r0, r1, s0, s1 = b, c, a, b
    if stall:
        for j in range(s0, s1):
            dx = st[nw[j, 0], side]
            if dx != _INF and dx + nw[j, 1] < d:
                return size, nt, best, ma, mb, 1
    for j in range(r0, r1):
        v = nw[j, 0]
        nd = d + nw[j, 1]
        if nd < st[v, side]:
            size, nt, best, ma, mb = _reach(v, nd, u, j, side, st, hk, hn, size, touched, nt, entries, ne,
                                            core_pos, core_dist, best, ma, mb)
    return size, nt, best, ma, mb, 1


@njit(cache=True)
def _search(rec, nw, core_pos, core_dist, s, t, st, hk, hn, touched, nt, entries, ne, stall):
    """Bidirectional CH search from rank ``s`` to rank ``t`` (s != t) in the caller's buffers (``st``
    (n, 4) with INF in its distance columns).

    Returns ``(best, ma, mb, settled)``: the distance (INF when unreachable), the meeting (``ma == mb``: a
    node of both searches; else the forward entry ``ma`` and backward entry ``mb`` of the core) and the
    number of nodes settled by both directions. ``nt`` (2,) and ``ne`` (2,) receive the lengths of
    ``touched`` and ``entries`` (for :func:`_reset`).
    """
    best = _INF
    ma = -1
    mb = -1
    ne[0] = 0
    ne[1] = 0
    hkf, hnf, hkb, hnb = hk[0], hn[0], hk[1], hn[1]  # views once, not per heap operation
    sf, ntf, best, ma, mb = _reach(s, 0, -1, -1, 0, st, hkf, hnf, 0, touched, 0, entries, ne, core_pos, core_dist,
                                   best, ma, mb)
    sb, ntb, best, ma, mb = _reach(t, 0, -1, -1, 1, st, hkb, hnb, 0, touched, 0, entries, ne, core_pos, core_dist,
                                   best, ma, mb)
    settled = 0
    turn = 0
    while True:
        fgo = sf > 0 and hkf[0] < best
        bgo = sb > 0 and hkb[0] < best
        if not fgo and not bgo:
            break
        side = turn if (fgo and bgo) else (0 if fgo else 1)
        turn = 1 - turn
        if side == 0:
            sf, ntf, best, ma, mb, k = _settle(0, rec, nw, st, hkf, hnf, sf, touched, ntf, entries, ne, core_pos,
                                               core_dist, best, ma, mb, stall)
        else:
            sb, ntb, best, ma, mb, k = _settle(1, rec, nw, st, hkb, hnb, sb, touched, ntb, entries, ne, core_pos,
                                               core_dist, best, ma, mb, stall)
        settled += k
    nt[0] = ntf
    nt[1] = ntb
    return best, ma, mb, settled


@njit(cache=True, inline="always")
def _reset(st, touched, nt):
    for side in range(2):
        for i in range(nt[side]):
            st[touched[side, i], side] = _INF


@njit(cache=True)
def _find(rec, nw, a, b):
    """Position of the arc ``a -> b`` (ranks), -1 if none."""
    if b > a:
        lo, hi = rec[a, 0], rec[a, 1]
        x = b
    else:
        lo, hi = rec[b, 1], rec[b + 1, 0]
        x = a
    for j in range(lo, hi):
        if nw[j, 0] == x:
            return j
    return -1


@njit(cache=True)
def _route(rec, nw, core_pos, core_dist, unp, order, s, t, st, hk, hn, touched, entries, stack, out_arcs,
           out_nodes, stall):
    """One query with its path: search, the hierarchy arcs of the path onto ``stack`` (rows ``(position,
    tail node id)``, the first arc on top), then unpacked through ``unp`` into ``out_arcs`` (graph arc
    ids in path order) and ``out_nodes`` (their tails). Leaves the buffers reset. Returns ``(best,
    settled, n_arcs, ma, mb)``; ``n_arcs < 0`` is an error code."""
    nt = np.zeros(2, dtype=np.int64)
    ne = np.zeros(2, dtype=np.int64)
    best, ma, mb, settled = _search(rec, nw, core_pos, core_dist, s, t, st, hk, hn, touched, nt, entries, ne,
                                    stall)
    n_arcs = 0
    if best != _INF:
        cap = stack.shape[0]
        top = 0
        # backward tree mb -> t, pushed in path order, then reversed (the last arc at the bottom)
        x = mb
        while x != t and top < cap:
            p = st[x, 3]
            stack[top, 0] = p & 0xFFFFFFFF
            stack[top, 1] = order[x]
            top += 1
            x = p >> 32
        if x != t:
            n_arcs = _ERR_TOO_LONG
        i, k = 0, top - 1
        while i < k:
            for c in range(2):
                stack[i, c], stack[k, c] = stack[k, c], stack[i, c]
            i += 1
            k -= 1
        if ma != mb and top < cap:  # the core pair ma -> mb
            j = _find(rec, nw, ma, mb)
            if j < 0:
                n_arcs = _ERR_MISSING_HALF
            stack[top, 0] = j
            stack[top, 1] = order[ma]
            top += 1
        # forward tree ma -> s, walked backwards: already in reverse path order
        x = ma
        while x != s and top < cap:
            p = st[x, 2]
            u = p >> 32
            stack[top, 0] = p & 0xFFFFFFFF
            stack[top, 1] = order[u]
            top += 1
            x = u
        if x != s:
            n_arcs = _ERR_TOO_LONG
        if n_arcs == 0:
            while top > 0:
                top -= 1
                j = stack[top, 0]
                m = unp[j, 0]
                if m < 0:
                    if n_arcs == out_arcs.shape[0]:
                        n_arcs = _ERR_TOO_LONG
                        break
                    out_arcs[n_arcs] = unp[j, 1]
                    out_nodes[n_arcs] = stack[top, 1]
                    n_arcs += 1
                    continue
                h1 = unp[j, 2]
                h2 = unp[j, 3]
                if h1 < 0 or h2 < 0:
                    n_arcs = _ERR_MISSING_HALF
                    break
                if top + 2 > cap:
                    n_arcs = _ERR_TOO_LONG
                    break
                stack[top + 1, 0] = h1  # tail -> mid, popped first; its tail is the shortcut's
                stack[top + 1, 1] = stack[top, 1]
                stack[top, 0] = h2
                stack[top, 1] = m
                top += 2
    _reset(st, touched, nt)
    return best, settled, n_arcs, ma, mb


@njit(cache=True, parallel=True)
def _distances(rec, nw, core_pos, core_dist, sources, targets, heap_cap, n_chunks, stall):
    """Paired distances int64 (k,) between ranks, in parallel over ``n_chunks`` chunks of pairs (buffers
    per chunk)."""
    k = sources.shape[0]
    n = core_pos.shape[0]
    c = core_dist.shape[0]
    res = np.empty(k, dtype=np.int64)
    for ci in prange(n_chunks):
        lo = ci * k // n_chunks
        hi = (ci + 1) * k // n_chunks
        st = np.full((n, 4), _INF, dtype=np.int64)
        hk = np.empty((2, heap_cap), dtype=np.int64)
        hn = np.empty((2, heap_cap), dtype=np.int32)
        touched = np.empty((2, n), dtype=np.int32)
        entries = np.empty((2, max(c, 1)), dtype=np.int32)
        nt = np.zeros(2, dtype=np.int64)
        ne = np.zeros(2, dtype=np.int64)
        for i in range(lo, hi):
            s = sources[i]
            t = targets[i]
            if s == t:
                res[i] = 0
                continue
            best, ma, mb, settled = _search(rec, nw, core_pos, core_dist, s, t, st, hk, hn, touched, nt, entries,
                                            ne, stall)
            res[i] = best
            _reset(st, touched, nt)
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


class CHQuery:
    """Point-to-point shortest paths over a contraction hierarchy on the CPU, buffers reused across
    queries (one object per thread: it is not thread-safe).

    Parameters
    ----------
    ch : ContractionHierarchy
        The facade: ``ch.h`` (the arrays), ``ch.graph`` (needed by :meth:`route`), ``ch.weight``.
    stall : bool
        Stall-on-demand (Geisberger et al., WEA 2008, sec. 4); the result is the same without.

    Notes
    -----
    The searches run on :func:`prepared`'s layout of the hierarchy. Buffers: int64 (n, 4) node states
    (both directions' distances and parents; the distances reset through the touched lists after each
    query, not O(n) per query), two lazy-deletion heaps of ``heap_cap`` slots, a path stack (2n + 4, 2)
    and path buffers (n,).
    """

    def __init__(self, ch, *, stall=True):
        self.ch = ch
        h = ch.h
        self.h = h
        p = prepared(h)
        n = h.n_nodes
        self._p = p
        self._rank = p.rank
        self.stall = bool(stall)
        self._st = np.full((n, 4), INF, dtype=DIST_DTYPE)
        self._hk = np.empty((2, p.heap_cap), dtype=DIST_DTYPE)
        self._hn = np.empty((2, p.heap_cap), dtype=INDEX_DTYPE)
        self._touched = np.empty((2, n), dtype=INDEX_DTYPE)
        self._entries = np.empty((2, max(h.core.size, 1)), dtype=INDEX_DTYPE)
        self._stack = np.empty((2 * n + 4, 2), dtype=np.int64)
        self._arcs = np.empty(max(n - 1, 1), dtype=INDEX_DTYPE)
        self._nodes = np.empty(n + 1, dtype=INDEX_DTYPE)
        self._empty = np.zeros(0, dtype=INDEX_DTYPE)

    def route(self, source, target):
        """Shortest path ``source -> target`` by the bidirectional CH query, unpacked to graph arcs.

        Parameters
        ----------
        source, target : int
            Node ids in ``[0, n)``.

        Returns
        -------
        PathResult
            ``distance`` int (the weight's unit, INF when unreachable), ``nodes`` int32 (k,) (empty when
            unreachable, ``[source]`` when ``source == target``), ``arcs`` int32 (k-1,) graph arc ids
            whose weights sum to the distance, ``settled`` (nodes settled by both searches),
            ``method="ch"``, ``device="cpu"``, ``stats`` ``{"meeting": (a, b)}`` (``a == b``: a node of
            both searches; else the core pair the path crosses).

        Raises
        ------
        IndexError
            An id outside ``[0, n)``.
        TypeError
            A non-integer id.
        ValueError
            No graph (a hierarchy loaded without it), or a broken hierarchy (a shortcut's half missing).
        """
        from ..query.p2p import PathResult

        ch = self.ch
        g = ch.graph
        if g is None:
            raise ValueError("route needs the graph the hierarchy was built from: "
                             "ContractionHierarchy.load(directory, graph=...)")
        h = self.h
        n = h.n_nodes
        s = _node(source, n, "source")
        t = _node(target, n, "target")
        wname = ch.weight if ch.weight is not None else g.default_weight
        unit = g.units[wname]
        if s == t:
            return PathResult(0, np.array([s], dtype=INDEX_DTYPE), self._empty, wname, unit, 0, "ch",
                              device="cpu")
        p = self._p
        best, settled, k, ma, mb = _route(
            p.rec, p.nw, p.core_pos, p.core_dist, p.unp, p.order, self._rank[s], self._rank[t], self._st,
            self._hk, self._hn, self._touched, self._entries, self._stack, self._arcs, self._nodes, self.stall)
        if best == INF:
            return PathResult(INF, self._empty, self._empty, wname, unit, int(settled), "ch", device="cpu")
        if k < 0:
            why = "a shortcut's half is missing" if k == _ERR_MISSING_HALF else "the unpacked path is not simple"
            raise ValueError(f"broken hierarchy: {why} on the path {s} -> {t}")
        arcs = self._arcs[:k].copy()
        self._nodes[k] = t
        nodes = self._nodes[:k + 1].copy()
        return PathResult(int(best), nodes, arcs, wname, unit, int(settled), "ch",
                          {"meeting": (int(p.order[ma]), int(p.order[mb]))}, device="cpu")


def distances_cpu(h, sources, targets, *, stall=True):
    """Distances of the pairs ``(sources[i], targets[i])`` by bidirectional CH queries (Geisberger et al.,
    WEA 2008, sec. 4), in parallel over pairs (numba ``prange`` over chunks, each chunk its own buffers).

    Parameters
    ----------
    h : Hierarchy
    sources, targets : array_like of int, shape (k,)
    stall : bool
        Stall-on-demand (same result either way).

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
    p = prepared(h)
    n_chunks = max(1, min(s.size // _MIN_PAIRS_PER_CHUNK, _CHUNKS_PER_THREAD * numba.get_num_threads()))
    return _distances(*p.search_arrays(), p.rank[s], p.rank[t], p.heap_cap, n_chunks, bool(stall))
