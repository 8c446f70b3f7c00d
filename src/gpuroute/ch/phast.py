"""One-to-all, bounded one-to-all and many-to-many distances over a contraction hierarchy on the CPU
(numba): :func:`tree_cpu`, :func:`within_cpu`, :func:`table_cpu`.

Trees follow PHAST (Delling, Goldberg, Nowatzyk, Werneck, "PHAST: Hardware-Accelerated Shortest Path
Trees", IPDPS 2011, sec. 3): an upward Dijkstra over ``up`` from the source, then one linear sweep over
the nodes by decreasing rank, each taking ``d[v] = min(d[v], d[u] + w)`` over its ``down`` arcs
``u -> v`` (all from higher ranks, hence final). With a core (CU-CH's overlay, Karimi, Koppelman,
Michael, ICS '19, sec. 3.6-3.8) the upward search does not expand core nodes; the core is done in one
dense step, ``d[b] = min over reached core a of d[a] + core_dist[a, b]``, and the sweep skips it.

Tables are the bucket algorithm of Knopp, Sanders, Schultes, Schulz, Wagner, "Computing Many-to-Many
Shortest Paths Using Highway Hierarchies", ALENEX 2007, on the CH: a backward upward search from every
target leaves ``(target, distance)`` in the bucket of every node it settles; a forward upward search
from every source scans the buckets of the nodes it settles. A core is again one dense step: each target's
backward core entries are pushed through ``core_dist`` to a vector over the core (``(c, |T|)`` in all),
which the forward search reads at its own core entries. Both searches use stall-on-demand (Geisberger et al.,
WEA 2008, sec. 4); a stalled node neither leaves nor reads bucket entries.
"""
from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

from ..graph.constants import DIST_DTYPE, INDEX_DTYPE, INF
from ..graph.heap import heap_pop, heap_push
from .query import id_array, prepared, uidx

__all__ = ["tree_cpu", "within_cpu", "table_cpu", "merge_phases", "phase_cost", "sweep_phases", "lanes_lg", "INF"]

_INF = INF
#: Sources (or targets) per parallel chunk at least (each chunk allocates its own search buffers).
_MIN_PER_CHUNK = 8
#: Chunks per thread (load balance).
_CHUNKS_PER_THREAD = 4


def chunk_count(k, min_per_chunk=_MIN_PER_CHUNK):
    """Parallel chunks for ``k`` searches: at least ``min_per_chunk`` each, at most ``_CHUNKS_PER_THREAD`` a
    thread (the CPU twins of PHAST and RPHAST)."""
    return max(1, min(k // min_per_chunk, _CHUNKS_PER_THREAD * numba.get_num_threads()))


@njit(cache=True, inline="always")
def chunk_bounds(ci, k, n_chunks):
    """Items ``lo .. hi`` of chunk ``ci`` of ``k`` items in ``n_chunks`` chunks."""
    return ci * k // n_chunks, (ci + 1) * k // n_chunks


@njit(cache=True)
def search_buffers(n, c, heap_cap):
    """One chunk's buffers for :func:`bucket_search`: ``(d int64 (n,) all INF, heap keys int64, heap nodes int32,
    touched int32 (n,), entries int32 (c,), settled nodes int32 (n,), settled distances int64 (n,))``."""
    m = max(n, 1)
    return (np.full(n, _INF, dtype=np.int64), np.empty(heap_cap, dtype=np.int64), np.empty(heap_cap, dtype=np.int32),
            np.empty(m, dtype=np.int32), np.empty(max(c, 1), dtype=np.int32), np.empty(m, dtype=np.int32),
            np.empty(m, dtype=np.int64))


@njit(cache=True, inline="always")
def reset_touched(d, touched, nt):
    """``d`` back to all INF after a search that set ``d`` at ``touched[:nt]`` only."""
    for q in range(nt):
        d[touched[q]] = _INF


# ---------------------------------------------------------------------------------------------- kernels
# Every kernel works in :class:`~gpuroute.ch.query.Prepared`'s layout, flat: ranks as node ids, node ``u``'s
# up arcs at ``rec[2u] .. rec[2u + 1]`` and its down arcs (by head) at ``rec[2u + 1] .. rec[2u + 2]`` of
# ``nw`` (arc ``j``'s neighbour at ``nw[2j]``, its weight at ``nw[2j + 1]``), indexed through ``uidx``
# (unsigned: no negative-index checks; the downward sweep runs 25-40% faster for it).
@njit(cache=True)
def _upward(rec, nw, core_pos, s, d, hk, hn, entries, bound):
    """Upward Dijkstra from ``s`` into ``d`` (n,) (all INF on entry), settling keys ``<= bound`` only
    and expanding no core node. Core nodes reached are listed in ``entries``; returns how many."""
    d[s] = 0
    if core_pos[s] >= 0:
        entries[0] = s
        return 1
    ne = 0
    size = heap_push(hk, hn, 0, 0, s)
    while size > 0:
        du, u, size = heap_pop(hk, hn, size)
        if du > bound:
            break
        if du > d[uidx(u)]:
            continue
        for j in range(rec[uidx(2 * u)], rec[uidx(2 * u + 1)]):
            v = nw[uidx(2 * j)]
            nd = du + nw[uidx(2 * j + 1)]
            if nd < d[uidx(v)]:
                if core_pos[uidx(v)] >= 0:
                    if d[uidx(v)] == _INF:
                        entries[ne] = v
                        ne += 1
                    d[uidx(v)] = nd
                else:
                    d[uidx(v)] = nd
                    size = heap_push(hk, hn, size, nd, v)
    return ne


@njit(cache=True, inline="always")
def _core_step(core, core_pos, core_dist, d, entries, ne, bound):
    """``d[b] = min(d[b], d[a] + core_dist[a, b])`` for every core ``b`` and reached core ``a`` with
    ``d[a] <= bound``."""
    c = core.shape[0]
    for e in range(ne):
        a = entries[e]
        da = d[uidx(a)]
        if da > bound:
            continue
        row = core_dist[core_pos[a]]
        for bi in range(c):
            cd = row[bi]
            if cd != _INF:
                x = da + cd
                b = core[bi]
                if x < d[uidx(b)]:
                    d[uidx(b)] = x


@njit(cache=True, inline="always")
def _sweep(rec, nw, core_pos, d):
    """PHAST's downward pass: ranks ``n-1 .. 0`` (core skipped) pull over their down arcs, whose tails
    have higher ranks and are final."""
    for v in range(d.shape[0] - 1, -1, -1):
        if core_pos[uidx(v)] >= 0:
            continue
        dv = d[uidx(v)]
        for j in range(rec[uidx(2 * v + 1)], rec[uidx(2 * v + 2)]):
            du = d[uidx(nw[uidx(2 * j)])]
            if du != _INF:
                x = du + nw[uidx(2 * j + 1)]
                if x < dv:
                    dv = x
        d[uidx(v)] = dv


@njit(cache=True, inline="always")
def _phast(rec, nw, core_pos, core_dist, core, s, d, hk, hn, entries, bound):
    """One PHAST tree from rank ``s`` into ``d`` (n,) indexed by rank."""
    d[:] = _INF
    ne = _upward(rec, nw, core_pos, s, d, hk, hn, entries, bound)
    _core_step(core, core_pos, core_dist, d, entries, ne, bound)
    _sweep(rec, nw, core_pos, d)


@njit(cache=True, parallel=True)
def _trees(rec, nw, core_pos, core_dist, core, rank, sources, heap_cap, n_chunks):
    """PHAST distances from each source (a rank): int64 (k, n) by node id, INF where unreachable."""
    k = sources.shape[0]
    n = core_pos.shape[0]
    out = np.empty((k, n), dtype=np.int64)
    for ci in prange(n_chunks):
        lo, hi = chunk_bounds(ci, k, n_chunks)
        hk = np.empty(heap_cap, dtype=np.int64)
        hn = np.empty(heap_cap, dtype=np.int32)
        entries = np.empty(max(core.shape[0], 1), dtype=np.int32)
        d = np.empty(n, dtype=np.int64)
        for i in range(lo, hi):
            _phast(rec, nw, core_pos, core_dist, core, sources[i], d, hk, hn, entries, _INF)
            row = out[i]
            for v in range(n):
                row[v] = d[rank[v]]
    return out


@njit(cache=True)
def _within(rec, nw, core_pos, core_dist, core, rank, source, heap_cap, bound):
    """One bounded PHAST tree from rank ``source``; returns ``(nodes int32 (r,), dist int64 (r,))`` by node
    id with ``dist <= bound``."""
    n = core_pos.shape[0]
    d = np.empty(n, dtype=np.int64)
    hk = np.empty(heap_cap, dtype=np.int64)
    hn = np.empty(heap_cap, dtype=np.int32)
    entries = np.empty(max(core.shape[0], 1), dtype=np.int32)
    _phast(rec, nw, core_pos, core_dist, core, source, d, hk, hn, entries, bound)
    r = 0
    for v in range(n):
        x = d[rank[v]]
        if x <= bound and x != _INF:
            r += 1
    nodes = np.empty(r, dtype=np.int32)
    dist = np.empty(r, dtype=np.int64)
    r = 0
    for v in range(n):
        x = d[rank[v]]
        if x <= bound and x != _INF:
            nodes[r] = v
            dist[r] = x
            r += 1
    return nodes, dist


@njit(cache=True)
def bucket_search(side, rec, nw, core_pos, s, d, hk, hn, touched, entries, sett_node, sett_dist, stall):
    """Full upward search from rank ``s`` (``side`` 0: forward over up arcs; 1: backward over down arcs),
    stall-on-demand, no core node expanded. Writes the settled, unstalled non-core nodes and their
    distances to ``sett_node``/``sett_dist`` and the reached core nodes to ``entries``; returns
    ``(n_settled, n_entries, n_touched)`` (``touched`` lists every node whose ``d`` was set, for the
    caller's reset). With ``side=0, stall=False`` it is PHAST's upward pass without a bound (every node set
    listed): RPHAST's upward search (:mod:`gpuroute.ch.rphast`)."""
    ns = 0
    ne = 0
    nt = 1
    d[s] = 0
    touched[0] = s
    if core_pos[s] >= 0:
        entries[0] = s
        return 0, 1, 1
    size = heap_push(hk, hn, 0, 0, s)
    while size > 0:
        du, u, size = heap_pop(hk, hn, size)
        if du > d[uidx(u)]:
            continue
        a = rec[uidx(2 * u)]
        b = rec[uidx(2 * u + 1)]
        c = rec[uidx(2 * u + 2)]
        if side == 0:
            r0, r1, s0, s1 = a, b, b, c
        else:
            r0, r1, s0, s1 = b, c, a, b
        stalled = False
        if stall:
            for j in range(s0, s1):
                dx = d[uidx(nw[uidx(2 * j)])]
                if dx != _INF and dx + nw[uidx(2 * j + 1)] < du:
                    stalled = True
                    break
        if stalled:
            continue
        sett_node[ns] = u
        sett_dist[ns] = du
        ns += 1
        for j in range(r0, r1):
            v = nw[uidx(2 * j)]
            nd = du + nw[uidx(2 * j + 1)]
            if nd < d[uidx(v)]:
                if d[uidx(v)] == _INF:
                    touched[nt] = v
                    nt += 1
                    if core_pos[uidx(v)] >= 0:
                        entries[ne] = v
                        ne += 1
                d[uidx(v)] = nd
                if core_pos[uidx(v)] < 0:
                    size = heap_push(hk, hn, size, nd, v)
    return ns, ne, nt


@njit(cache=True, parallel=True)
def _backward(rec, nw, core_pos, core_dist_t, targets, heap_cap, n_chunks, stall, counts, offsets, b_node, b_dist,
              tcore, fill):
    """Backward upward searches from every target (a rank). ``fill=False``: ``counts[j]`` = bucket
    entries of target ``j``. ``fill=True``: write them at ``offsets[j]`` into ``b_node``/``b_dist`` and
    the target's core vector ``tcore[j]`` (c,): ``min over backward entries y of core_dist[a, y] + d(y, t)``
    for every core ``a`` (``core_dist_t`` is ``core_dist`` transposed, so that this reads rows)."""
    k = targets.shape[0]
    n = core_pos.shape[0]
    c = core_dist_t.shape[0]
    for ci in prange(n_chunks):
        lo, hi = chunk_bounds(ci, k, n_chunks)
        d, hk, hn, touched, entries, sn, sd = search_buffers(n, c, heap_cap)
        for j in range(lo, hi):
            ns, ne, nt = bucket_search(1, rec, nw, core_pos, targets[j], d, hk, hn, touched, entries, sn, sd, stall)
            if not fill:
                counts[j] = ns
            else:
                o = offsets[j]
                for i in range(ns):
                    b_node[o + i] = sn[i]
                    b_dist[o + i] = sd[i]
                tv = tcore[j]
                for e in range(ne):
                    y = entries[e]
                    dy = d[y]
                    row = core_dist_t[core_pos[y]]
                    for ai in range(c):
                        cd = row[ai]
                        if cd != _INF and cd + dy < tv[ai]:
                            tv[ai] = cd + dy
            reset_touched(d, touched, nt)


@njit(cache=True)
def _bucket_csr(n, offsets, b_node, b_dist):
    """Buckets as a CSR by node: ``(first int64 (n+1,), target int32, dist int64)``, each bucket in
    target order (entries of target ``j`` lie at ``offsets[j] .. offsets[j+1]``)."""
    total = b_node.shape[0]
    first = np.zeros(n + 1, dtype=np.int64)
    for i in range(total):
        first[b_node[i] + 1] += 1
    for v in range(n):
        first[v + 1] += first[v]
    fill = first[:-1].copy()
    tgt = np.empty(total, dtype=np.int32)
    dist = np.empty(total, dtype=np.int64)
    k = offsets.shape[0] - 1
    for j in range(k):
        for i in range(offsets[j], offsets[j + 1]):
            v = b_node[i]
            p = fill[v]
            tgt[p] = j
            dist[p] = b_dist[i]
            fill[v] = p + 1
    return first, tgt, dist


@njit(cache=True, parallel=True)
def _forward(rec, nw, core_pos, core_dist, sources, heap_cap, n_chunks, stall, b_first, b_tgt, b_dist, tcore,
             n_targets):
    """Forward upward searches from every source (a rank) scanning the buckets: int64 (|S|, |T|)."""
    k = sources.shape[0]
    n = core_pos.shape[0]
    c = core_dist.shape[0]
    out = np.full((k, n_targets), _INF, dtype=np.int64)
    for ci in prange(n_chunks):
        lo, hi = chunk_bounds(ci, k, n_chunks)
        d, hk, hn, touched, entries, sn, sd = search_buffers(n, c, heap_cap)
        for i in range(lo, hi):
            row = out[i]
            ns, ne, nt = bucket_search(0, rec, nw, core_pos, sources[i], d, hk, hn, touched, entries, sn, sd, stall)
            for q in range(ns):
                v = sn[q]
                dv = sd[q]
                for p in range(b_first[v], b_first[v + 1]):
                    x = dv + b_dist[p]
                    jt = b_tgt[p]
                    if x < row[jt]:
                        row[jt] = x
            for e in range(ne):
                a = entries[e]
                da = d[uidx(a)]
                tr = tcore[core_pos[a]]
                for jt in range(n_targets):
                    y = tr[jt]
                    if y != _INF and da + y < row[jt]:
                        row[jt] = da + y
            reset_touched(d, touched, nt)
    return out


# ---------------------------------------------------------------------------------------------- merged phases
# The downward sweep of PHAST (over every node, on the GPU) and of RPHAST (over a target selection) in one layout:
# ids ``[0, c)`` the core (no in-arcs: core-core arcs are the core step's), then the levels (or depths) top first,
# each a contiguous id range ``level_bounds[i] .. level_bounds[i + 1]`` with no arc inside it; in-arcs as a CSR by
# head whose tails have lower ids (a higher level, or the core). A *phase* is a run of consecutive levels swept in
# one step: node ``v`` gets, besides its own in-arcs, through each tail ``u`` of its own phase ``u``'s merged
# in-arcs extended by ``w(u, v)`` (the lightest per tail), so every path from an earlier phase into ``v`` is one
# arc and the phase's nodes may run in parallel, each reading the others' distances before or after they are
# lowered: ``d[u]`` is ``min(start[u], min_x d[x] + w(x, u))`` and both terms are ``v``'s arcs, so either value
# gives ``v`` the minimum of the unmerged sweep, bit for bit (the same sums of the same integers).
@njit(cache=True, inline="always")
def _offer(v, x, wx, stamp, seen, best, lst, cnt):
    """An in-arc ``x -> v`` of weight ``wx`` for the merged arcs of ``v`` (stamp ``stamp``): the first from ``x``
    is listed in ``lst`` (``cnt`` of them so far; returns the new count), a later one only lowers ``best[x]``."""
    if seen[x] != stamp:
        seen[x] = stamp
        best[x] = wx
        lst[cnt] = x
        return cnt + 1
    if wx < best[x]:
        best[x] = wx
    return cnt


@njit(cache=True, inline="always")
def lanes_lg(arcs, nodes, k, lanes_max_k, most):
    """``lg``: ``2**lg`` lanes per (node, source) item of a phase with ``arcs`` in-arcs over ``nodes`` nodes, for
    a pass of ``k`` sources: for ``k < lanes_max_k`` the power of two at least the mean in-degree (at most
    ``most``, itself at most 32), else 1 (one thread an item). The launchers' rule (``rph_level``)."""
    most = min(32, max(1, most))
    lg = 0
    if k < lanes_max_k and nodes > 0:
        mean = arcs / nodes
        while (1 << lg) < mean and (2 << lg) <= most:
            lg += 1
    return lg


@njit(cache=True, inline="always")
def _phase_us(arcs, nodes, dmax, k, cost):
    """Modelled microseconds of one phase (``arcs`` merged in-arcs over ``nodes`` nodes, ``dmax`` the most of one
    node) for ``k`` sources; ``cost`` = (step us, bytes per us, us per lane iteration, lanes_max_k, most lanes):
    a dependent step, then the larger of the bytes (each arc's tail and weight, each node's offsets, per source an
    arc's tail distance and a node's own read and write) over the bandwidth and the longest item's arcs one
    lane-iteration at a time. A tail distance costs a 32-byte sector where an item's lanes spread over its arcs (the
    lanes of a warp read scattered words), 4 bytes where a thread takes an item and the sources of a node sit side
    by side (at least 8 of them: a sector's worth)."""
    lg = lanes_lg(arcs, nodes, k, int(cost[3]), int(cost[4]))
    per_arc = 32.0 * k if lg > 0 else 4.0 * max(k, 8)
    byt = 8.0 * arcs + 8.0 * nodes + per_arc * arcs + 8.0 * nodes * k
    chain = ((dmax + (1 << lg) - 1) >> lg) * cost[2]
    return cost[0] + max(byt / cost[1], chain)


@njit(cache=True)
def _merge_level(c, lo, hi, ph, phase_of, fo, tl, w, nfo, ntl, nw, m, stamp, seen, best, lst):
    """Merged in-arcs of the nodes ``lo .. hi`` (one level) in phase ``ph``, written from ``m`` on (``ntl`` / ``nw``
    grown when full); returns ``(ntl, nw, m, stamp, arcs, most arcs of one node)``."""
    for v in range(lo, hi):
        phase_of[v] = ph
    arcs = 0
    dmax = 0
    for v in range(lo, hi):
        nfo[v] = m
        stamp += 1
        cnt = 0
        for a in range(fo[v], fo[v + 1]):
            u = tl[a]
            wu = w[a]
            cnt = _offer(v, u, wu, stamp, seen, best, lst, cnt)
            if u >= c and phase_of[u] == ph:
                for b in range(nfo[u], nfo[u + 1]):
                    cnt = _offer(v, ntl[b], nw[b] + wu, stamp, seen, best, lst, cnt)
        if m + cnt > ntl.shape[0]:
            new = max(2 * ntl.shape[0], m + cnt)
            t2 = np.empty(new, dtype=np.int32)
            w2 = np.empty(new, dtype=np.int64)
            t2[:m] = ntl[:m]
            w2[:m] = nw[:m]
            ntl, nw = t2, w2
        for q in range(cnt):
            x = lst[q]
            ntl[m] = x
            nw[m] = best[x]
            m += 1
        arcs += cnt
        dmax = max(dmax, cnt)
    nfo[hi] = m
    return ntl, nw, m, stamp, arcs, dmax


@njit(cache=True, inline="always")
def _merge_buffers(R, arcs):
    """:func:`_merge_level`'s work arrays over ``R`` restricted nodes: merged tails int32 and weights int64 for
    ``arcs`` arcs at first (grown as needed), first-out int64 (R+1,), and per node best, seen (-1), list and phase
    (-1)."""
    ntl = np.empty(max(16, arcs), dtype=np.int32)
    nw = np.empty(ntl.shape[0], dtype=np.int64)
    nfo = np.zeros(R + 1, dtype=np.int64)
    best = np.empty(max(R, 1), dtype=np.int64)
    seen = np.full(max(R, 1), -1, dtype=np.int64)
    lst = np.empty(max(R, 1), dtype=np.int32)
    phase_of = np.full(max(R, 1), -1, dtype=np.int64)
    return ntl, nw, nfo, best, seen, lst, phase_of


@njit(cache=True)
def _merge_phases(c, lb, fo, tl, w, start):
    """The merged sweep (see above) of the layout ``lb`` (L+1,) / ``fo`` / ``tl`` / ``w``; level ``i`` starts a phase
    where ``start[i]`` (level 0 always). Returns ``(first_out int64 (R+1,), tail int32, weight int64)``."""
    R = fo.shape[0] - 1
    L = lb.shape[0] - 1
    ntl, nw, nfo, best, seen, lst, phase_of = _merge_buffers(R, 2 * tl.shape[0])
    m = 0
    stamp = 0
    ph = -1
    for i in range(L):
        if i == 0 or start[i]:
            ph += 1
        ntl, nw, m, stamp, _, _ = _merge_level(c, lb[i], lb[i + 1], ph, phase_of, fo, tl, w, nfo, ntl, nw, m, stamp,
                                               seen, best, lst)
    for v in range(lb[L], R + 1):
        nfo[v] = m
    return nfo, ntl[:m].copy(), nw[:m].copy()


#: The cost model's planning extends a phase no further once its merged arcs exceed this many times its levels' own.
_MERGE_GROWTH = 4


@njit(cache=True, parallel=True)
def _phase_costs(c, lb, fo, tl, w, k, cost, max_levels, n_chunks):
    """``T`` float64 (L, L): ``T[i, j]`` the modelled microseconds (:func:`_phase_us`) of one phase of levels
    ``i .. j``, its arcs merged; ``inf`` where not evaluated: beyond ``max_levels`` levels (if > 0), or once the
    phase costs more than its levels apart or holds more than ``_MERGE_GROWTH`` times their own arcs (extending it
    only adds arcs; this bounds the planning's work). The starts ``i`` in parallel (``n_chunks`` chunks, each
    with its own buffers)."""
    R = fo.shape[0] - 1
    L = lb.shape[0] - 1
    T = np.full((max(L, 1), max(L, 1)), np.inf)
    single = np.empty(max(L, 1))
    for i in range(L):
        dmax = 0
        for v in range(lb[i], lb[i + 1]):
            dmax = max(dmax, fo[v + 1] - fo[v])
        single[i] = _phase_us(fo[lb[i + 1]] - fo[lb[i]], lb[i + 1] - lb[i], dmax, k, cost)
    for ci in prange(n_chunks):
        ntl, nw, nfo, best, seen, lst, phase_of = _merge_buffers(R, tl.shape[0])
        stamp = 0
        for i in range(ci, L, n_chunks):
            m = 0
            arcs = 0
            nodes = 0
            dmax = 0
            apart = 0.0
            own = 0
            for j in range(i, L):
                if max_levels > 0 and j - i >= max_levels:
                    break
                # phase id i + 1 for the start i: no level above i holds it (each was last written as its own
                # start's phase, or as an earlier start's), and the levels below are rewritten before they are read
                ntl, nw, m, stamp, a, d = _merge_level(c, lb[j], lb[j + 1], i + 1, phase_of, fo, tl, w, nfo, ntl,
                                                       nw, m, stamp, seen, best, lst)
                arcs += a
                nodes += lb[j + 1] - lb[j]
                dmax = max(dmax, d)
                apart += single[j]
                own += fo[lb[j + 1]] - fo[lb[j]]
                T[i, j] = _phase_us(arcs, nodes, dmax, k, cost)
                if T[i, j] > apart or arcs > _MERGE_GROWTH * own + 1024:
                    break
            # the next start of this chunk is larger: levels from it on are written again before they are read,
            # and a level above it keeps a phase id below the new start's
    return T


@njit(cache=True)
def _best_starts(T):
    """The partition of the levels into consecutive phases of least total ``T`` (dynamic programming): int8 (L,),
    1 where a phase starts."""
    L = T.shape[0]
    tot = np.full(L + 1, np.inf)
    arg = np.zeros(L + 1, dtype=np.int64)
    tot[0] = 0.0
    for j in range(1, L + 1):
        for i in range(j - 1, -1, -1):  # ties (to rounding) to the shorter last phase: fewer arcs for nothing
            x = tot[i] + T[i, j - 1]
            if x < tot[j] - 1e-9:
                tot[j] = x
                arg[j] = i
    start = np.zeros(L, dtype=np.int8)
    j = L
    while j > 0:
        start[arg[j]] = 1
        j = arg[j]
    return start


def phase_cost(step_us=None, bytes_per_us=None, iter_us=None, lanes_max_k=None, max_lanes=None):
    """The cost model's parameters as :func:`merge_phases` takes them, float64 (5,); each None: its
    ``config.CH_PHASE_*`` default (lanes: ``config.CH_PHAST_LANES_MAX_K`` / ``CH_PHAST_MAX_LANES``)."""
    from .. import config

    vals = (config.CH_PHASE_STEP_US if step_us is None else step_us,
            config.CH_PHASE_BYTES_PER_US if bytes_per_us is None else bytes_per_us,
            config.CH_PHASE_ITER_US if iter_us is None else iter_us,
            config.CH_PHAST_LANES_MAX_K if lanes_max_k is None else lanes_max_k,
            config.CH_PHAST_MAX_LANES if max_lanes is None else max_lanes)
    out = np.asarray(vals, dtype=np.float64)
    if not (out[0] >= 0 and out[1] > 0 and out[2] >= 0 and out[3] >= 0 and out[4] >= 1):
        raise ValueError(f"phase cost: need step_us >= 0, bytes_per_us > 0, iter_us >= 0, lanes_max_k >= 0, "
                         f"max_lanes >= 1; got {tuple(vals)}")
    return out


def merge_phases(c, level_bounds, first_out, tail, weight, *, levels=0, k=1, cost=None, max_levels=None):
    """Merge consecutive levels of a downward sweep into phases (the layout above; PHAST's on the GPU and
    RPHAST's restricted sweep both call this).

    Parameters
    ----------
    c : int
        Core nodes (ids ``[0, c)``, no in-arcs).
    level_bounds : ndarray int64, shape (L + 1,)
        Level ``i`` is ids ``level_bounds[i] .. level_bounds[i + 1]``, top first; ``level_bounds[0] == c``.
    first_out : ndarray int64, shape (R + 1,)
    tail : ndarray int32
        In-arcs by head; every tail in an earlier level or the core.
    weight : ndarray int64
    levels : int
        ``m >= 1``: every phase ``m`` consecutive levels (1: the levels unmerged, arcs deduplicated by tail);
        0: the phase boundaries by the cost model for a pass of ``k`` sources.
    k : int
        Sources of a pass (the cost model's bytes and lanes).
    cost : ndarray float64, shape (5,), optional
        :func:`phase_cost` (default: from ``config``).
    max_levels : int, optional
        Most levels a phase under the cost model (0: no limit); default ``config.CH_PHASE_MAX_LEVELS``.

    Returns
    -------
    bounds : ndarray int64, shape (P + 1,)
        Phase ``p`` is ids ``bounds[p] .. bounds[p + 1]``.
    first_out : ndarray int64, shape (R + 1,)
    tail : ndarray int32
    weight : ndarray int64
        The merged in-arcs (sums of the hierarchy's weights).

    Raises
    ------
    ValueError
        ``levels < 0``, ``k < 1``, or a bad cost.
    """
    from .. import config

    levels, k = int(levels), int(k)
    if levels < 0:
        raise ValueError(f"levels merged must be >= 0 (0: by the cost model), got {levels}")
    if k < 1:
        raise ValueError(f"sources of a pass must be >= 1, got {k}")
    cost = phase_cost() if cost is None else np.asarray(cost, dtype=np.float64)
    max_levels = int(config.CH_PHASE_MAX_LEVELS if max_levels is None else max_levels)
    lb = np.asarray(level_bounds, dtype=np.int64)
    fo = np.asarray(first_out, dtype=np.int64)
    tl = np.asarray(tail, dtype=np.int32)
    w = np.asarray(weight, dtype=np.int64)
    L = lb.size - 1
    if L <= 0:
        start = np.zeros(0, dtype=np.int8)
    elif levels >= 1:
        start = (np.arange(L) % levels == 0).astype(np.int8)
    else:
        n_chunks = max(1, min(L, numba.get_num_threads()))  # one a thread: each holds buffers of the layout's size
        start = _best_starts(_phase_costs(int(c), lb, fo, tl, w, k, cost, max_levels, n_chunks))
    mfo, mtl, mw = _merge_phases(int(c), lb, fo, tl, w, start)
    return np.append(lb[:-1][start.astype(bool)], lb[-1]).astype(np.int64), mfo, mtl, mw


@njit(cache=True)
def sweep_phases(bounds, fo, tl, w, d, order):
    """The merged downward sweep on the CPU, ``d`` (R,) int64 (INF: unreached) lowered in place, phase by phase
    (``bounds``), each phase's nodes in one of the orders its parallel launch allows: ``order`` 0 by id, each
    node reading the values as they are; 1 every node reading the values from before the phase (the far end of
    the phases' benign race); 2 by decreasing id. The three give the same ``d`` (the GPU kernels' twin)."""
    for p in range(bounds.shape[0] - 1):
        lo, hi = bounds[p], bounds[p + 1]
        snap = d[lo:hi].copy() if order == 1 else np.empty(0, dtype=np.int64)
        for i in range(hi - lo):
            v = lo + i if order != 2 else hi - 1 - i
            best = d[v]
            for a in range(fo[v], fo[v + 1]):
                u = tl[a]
                du = snap[u - lo] if order == 1 and u >= lo else d[u]
                if du != _INF:
                    x = du + w[a]
                    if x < best:
                        best = x
            d[v] = best  # with order 1 read by no node of this phase (they read snap)


# ---------------------------------------------------------------------------------------------- Python API
def _flat(p):
    """``rec, nw, core_pos, core_dist`` of :class:`~gpuroute.ch.query.Prepared`, ``rec`` and ``nw`` flat."""
    rec, nw, core_pos, core_dist = p.search_arrays()
    return rec.ravel(), nw.ravel(), core_pos, core_dist


def tree_cpu(h, sources):
    """PHAST one-to-all distances (Delling et al., IPDPS 2011, sec. 3; a core in one dense step), in
    parallel over sources (numba ``prange``).

    Parameters
    ----------
    h : Hierarchy
    sources : array_like of int, shape (k,)

    Returns
    -------
    ndarray int64, shape (k, n)
        Distances in the weight's unit, ``INF`` where unreachable.

    Raises
    ------
    IndexError
        An id outside ``[0, n)``.
    """
    s = id_array(sources, h.n_nodes, "sources")
    p = prepared(h)
    return _trees(*_flat(p), p.core, p.rank, p.rank[s], p.heap_cap, chunk_count(s.size))


def within_cpu(h, source, bound):
    """Every node at distance ``<= bound`` from ``source``: a PHAST tree whose upward search settles
    nothing beyond ``bound`` and whose core step starts only from entries within it.

    Exact: a node at distance ``<= bound`` has an up-down shortest path whose upward part (and core
    entry) lies within ``bound`` (weights are positive), so that part is settled exactly and the sweep
    carries it down; every value computed is the length of some path, so none falls below a node's
    distance and nodes beyond ``bound`` stay beyond it.

    Parameters
    ----------
    h : Hierarchy
    source : int
    bound : int
        In the weight's unit; ``>= 0``.

    Returns
    -------
    nodes : ndarray int32, shape (r,)
        Sorted by node id (``source`` included).
    dist : ndarray int64, shape (r,)

    Raises
    ------
    IndexError
        ``source`` outside ``[0, n)``.
    ValueError
        A negative bound.
    """
    s = id_array(source, h.n_nodes, "source")
    if s.size != 1:
        raise ValueError("within_cpu takes one source")
    bound = int(bound)
    if bound < 0:
        raise ValueError(f"bound must be >= 0, got {bound}")
    p = prepared(h)
    return _within(*_flat(p), p.core, p.rank, int(p.rank[s[0]]), p.heap_cap, min(bound, _INF))


def table_cpu(h, sources, targets, *, stall=True):
    """Many-to-many distances by CH buckets (Knopp et al., ALENEX 2007, on the CH; a core through
    ``core_dist``), both phases in parallel (over targets, then over sources).

    Parameters
    ----------
    h : Hierarchy
    sources : array_like of int, shape (|S|,)
    targets : array_like of int, shape (|T|,)
    stall : bool
        Stall-on-demand in both searches (same result either way).

    Returns
    -------
    ndarray int64, shape (|S|, |T|)
        ``INF`` where unreachable.

    Raises
    ------
    IndexError
        An id outside ``[0, n)``.
    """
    n = h.n_nodes
    s = id_array(sources, n, "sources")
    t = id_array(targets, n, "targets")
    if s.size == 0 or t.size == 0:
        return np.full((s.size, t.size), INF, dtype=DIST_DTYPE)
    p = prepared(h)
    a = _flat(p)
    s, t = p.rank[s], p.rank[t]
    c = h.core.size
    counts = np.zeros(t.size, dtype=np.int64)
    dummy_i = np.zeros(0, dtype=INDEX_DTYPE)
    dummy_d = np.zeros(0, dtype=DIST_DTYPE)
    no_core = np.zeros((t.size, 0), dtype=DIST_DTYPE)
    nc = chunk_count(t.size)
    rec, nw, core_pos, core_dist = a
    core_dist_t = np.ascontiguousarray(core_dist.T)
    _backward(rec, nw, core_pos, core_dist_t, t, p.heap_cap, nc, bool(stall), counts, counts, dummy_i, dummy_d,
              no_core, False)
    offsets = np.zeros(t.size + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    b_node = np.empty(int(offsets[-1]), dtype=INDEX_DTYPE)
    b_dist = np.empty(int(offsets[-1]), dtype=DIST_DTYPE)
    tcore = np.full((t.size, c), INF, dtype=DIST_DTYPE)
    _backward(rec, nw, core_pos, core_dist_t, t, p.heap_cap, nc, bool(stall), counts, offsets, b_node, b_dist,
              tcore, True)
    tcore = np.ascontiguousarray(tcore.T)  # (c, |T|): the forward search reads one row per core entry
    b_first, b_tgt, b_d = _bucket_csr(n, offsets, b_node, b_dist)
    return _forward(*a, s, p.heap_cap, chunk_count(s.size), bool(stall), b_first, b_tgt, b_d, tcore, t.size)
