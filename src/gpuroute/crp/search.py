"""Point-to-point queries on the customized overlay (numba): bidirectional multi-level Dijkstra on the
arc-based graph, entering only the cells of the source and the target.

Follows Delling, Goldberg, Pajor, Werneck, "Customizable Route Planning in Road Networks"
(Transportation Science 2017), sec. 4 (the query), with the arc-based turn model of Delling,
Kobitzsch, Werneck, "Customizing Driving Directions with GPUs" (Euro-Par 2014), sec. 2: a search state
is an arc ``a`` (standing at its head, cost counted to its end); a turn ``a -> b`` costs the decoded
turn cost (penalty + cost of ``b``).

The level of a node is the highest level ``q`` at which its cell contains neither the source nor the
target (0: none). The forward search scans state ``a`` at the level of ``head[a]``: at level 0 every turn
out of ``a``; at ``q > 0``, if ``a`` is an entry point of its level-``q - 1`` cell, that cell's clique row
(the exits it leads to are entry points of the next cells). The backward search scans state ``b`` at the
level of ``tail[b]``: every turn into ``b`` at level 0, else the clique column of ``b`` as an exit point
of its tail's cell. Both searches thus run on one graph, and only the cells of ``s`` and ``t`` are entered.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from ..graph.constants import INF
from ..graph.heap import ah_pop, ah_update

#: A label above this stops a search with ``overflow`` set (the caller then searches again with ``scale=1``):
#: with every turn and clique cost below 2^52 (arc costs are below 2^31), no sum overflows.
LABEL_LIMIT = 1 << 61


@njit(cache=True, inline="always")
def state_level(a, hc, keep):
    """Query level of state ``a`` (see the module docstring): the highest level ``p + 1`` at which its cell
    ``hc[a, p]`` is none of the query's cells ``keep[p, :]`` (those of the source and the target); 0 if
    there is none. ``hc`` (m, L), ``keep`` (L, k)."""
    for p in range(hc.shape[1] - 1, -1, -1):
        c = hc[a, p]
        hit = False
        for j in range(keep.shape[1]):
            if c == keep[p, j]:
                hit = True
                break
        if not hit:
            return p + 1
    return 0


@njit(cache=True, inline="always")
def ih_update(hk, hv, R, off, size, k, v):
    """Insert ``v`` with key ``k`` into an indexed binary min-heap, or lower its key; the heap slot of
    ``v`` lives in its search record at ``R[8v + off]`` (-1 never queued, -2 settled). Returns the new
    size. The addressable heap of :mod:`gpuroute.graph.heap`."""
    return ah_update(hk, hv, size, R, 8, off, k, v, 1)


@njit(cache=True, inline="always")
def ih_pop(hk, hv, R, off, size):
    """Remove the minimum (read ``hk[0]``, ``hv[0]`` first) and mark it settled; returns the new size."""
    _, _, size = ah_pop(hk, hv, size, R, 8, off, -2, 1)
    return size


@njit(cache=True)
def bidir(s, t, ncell, first_out, fwd_st, rev_first, rev_arc, tfirst, tout, tcost, rfirst, rin, rturn, arc_cost, hc, tc,
          entry_idx, exit_idx, cell_base, ent_first, ent_arc, ex_first, ex_arc, cq_first, clique,
          R, touched, hk, hv, hk2, hv2):
    """One bidirectional multi-level query from node ``s`` to node ``t``: :func:`bidir_states` from the
    arcs leaving ``s`` (each at its own cost) to the arcs entering ``t`` (at 0), the query's cells those
    of ``s`` and ``t``.

    ``fwd_st[k]`` is the state of the ``k``-th arc in CSR order (``first_out`` gives the range of node
    ``s``) and ``rev_arc`` holds the states of the arcs entering each node (``rev_first``).
    """
    ns = first_out[s + 1] - first_out[s]
    nd = rev_first[t + 1] - rev_first[t]
    src = np.empty(ns, np.int64)
    scost = np.empty(ns, np.int64)
    for k in range(ns):
        src[k] = fwd_st[first_out[s] + k]
        scost[k] = arc_cost[src[k]]
    dst = np.empty(nd, np.int64)
    dcost = np.zeros(nd, np.int64)
    for k in range(nd):
        dst[k] = rev_arc[rev_first[t] + k]
    L = ncell.shape[0]
    keep = np.empty((L, 2), np.int32)
    for p in range(L):
        keep[p, 0] = ncell[p, s]
        keep[p, 1] = ncell[p, t]
    return bidir_states(keep, src, scost, dst, dcost, tfirst, tout, tcost, rfirst, rin, rturn, hc, tc,
                        entry_idx, exit_idx, cell_base, ent_first, ent_arc, ex_first, ex_arc, cq_first, clique,
                        R, touched, hk, hv, hk2, hv2)


@njit(cache=True)
def bidir_states(keep, src, scost, dst, dcost, tfirst, tout, tcost, rfirst, rin, rturn, hc, tc,
                 entry_idx, exit_idx, cell_base, ent_first, ent_arc, ex_first, ex_arc, cq_first, clique,
                 R, touched, hk, hv, hk2, hv2):
    """Bidirectional multi-level search between sets of states: the forward search starts at states
    ``src`` with distances ``scost`` (e.g. the rest of the arc a phantom node lies on), the backward
    search at ``dst`` with ``dcost`` (added at the end; may be negative, e.g. minus the part of the last
    arc beyond a phantom node). ``keep`` (L, k) lists the query's cells per level (the cells of the
    sources' and the targets' heads, at least).

    Every per-state array is in the overlay's *state numbering* (a permutation of the arcs that puts the
    arcs of one cell, boundary arcs first, next to each other: the records a clique row touches share
    cache lines): the turn CSRs and costs by state, and the per-state level arrays state-major (``hc``,
    ``tc``, ``entry_idx``, ``exit_idx``: (m, L)), so that one state's cells at every level share a cache
    line.

    Returns ``(distance, meet, n_touched)``: ``meet`` is the state where the searches met (-1: no path).
    ``R`` (8m,) holds one 64-byte record per state (one cache line): ``R[8a]`` forward distance,
    ``R[8a + 1]`` backward distance (``INF`` on entry), ``R[8a + 2]``/``R[8a + 3]`` forward/backward heap
    slot (-1 on entry), ``R[8a + 4]``/``R[8a + 5]`` the previous state in the forward search and the
    edge reference it came by (turn id >= 0, or ``-(1 + clique position)``), ``R[8a + 6]``/``R[8a + 7]``
    the next state towards the target and its edge. :func:`new_records` makes them; the ``n_touched``
    states listed in ``touched`` are the ones :func:`reset` puts back.
    """
    best, meet, nt, _, _, _ = bidir_kernel(
        False, 0.0, 1, keep, src, scost, dst, dcost, tfirst, tout, tcost, rfirst, rin, rturn, hc, tc, entry_idx,
        exit_idx, cell_base, ent_first, ent_arc, ex_first, ex_arc, cq_first, clique, R, touched, hk, hv, hk2, hv2)
    return best, meet, nt


@njit(cache=True)
def bidir_kernel(bounded, stretch, scale, keep, src, scost, dst, dcost, tfirst, tout, tcost, rfirst, rin, rturn, hc,
                 tc, entry_idx, exit_idx, cell_base, ent_first, ent_arc, ex_first, ex_arc, cq_first, clique,
                 R, touched, hk, hv, hk2, hv2):
    """The loop of :func:`bidir_states` (the same arguments after the first three; every edge cost times
    ``scale``). ``bounded`` False: the shortest distance (stop once ``fmin + bmin >= best``). True: each side
    runs instead until its minimum plus the other side's least start label passes ``limit = best +
    floor(stretch best)`` (every state ``v`` with ``d_f(v) + d_b(v) <= limit`` is then settled by both, its
    labels exact: :mod:`gpuroute.crp.alternatives`' overlap search), and stops with ``overflow`` set once a
    minimum passes :data:`LABEL_LIMIT`. Returns ``(best, meet, n_touched, limit, settled, overflow)``
    (``limit`` INF and ``settled`` 0 unless ``bounded``)."""
    nt = 0
    best = INF
    meet = -1
    fsize = 0
    bsize = 0
    for k0 in range(src.size):
        b = src[k0]
        c = scost[k0]
        if c < R[8 * b]:
            if R[8 * b] == INF and R[8 * b + 1] == INF:
                touched[nt] = b
                nt += 1
            R[8 * b] = c
            R[8 * b + 4] = -1
            R[8 * b + 5] = -1
            fsize = ih_update(hk, hv, R, 2, fsize, c, b)
    for k in range(dst.size):
        a = dst[k]
        c = dcost[k]
        if c < R[8 * a + 1]:
            if R[8 * a] == INF and R[8 * a + 1] == INF:
                touched[nt] = a
                nt += 1
            R[8 * a + 1] = c
            R[8 * a + 6] = -1
            R[8 * a + 7] = -1
            bsize = ih_update(hk2, hv2, R, 3, bsize, c, a)
            if R[8 * a] < INF and R[8 * a] + c < best:
                best = R[8 * a] + c
                meet = a
                if bounded:
                    limit = best + np.int64(np.floor(best * stretch))
    limit = INF
    settled = 0
    overflow = False
    fmin0 = INF  # the least start label of each side (``bounded``: a state settles on both sides iff within
    for k0 in range(scost.size):  # the limit)
        fmin0 = min(fmin0, scost[k0])
    bmin0 = INF
    for k in range(dcost.size):
        bmin0 = min(bmin0, dcost[k])
    while True:
        fmin = hk[0] if fsize > 0 else INF
        bmin = hk2[0] if bsize > 0 else INF
        if bounded:
            if fmin > LABEL_LIMIT and fsize > 0 or bmin > LABEL_LIMIT and bsize > 0:
                overflow = True
                break
            fok = fsize > 0 and fmin + bmin0 <= limit
            bok = bsize > 0 and bmin + fmin0 <= limit
            if not fok and not bok:
                break
            settled += 1
            forward = fok and (not bok or fmin <= bmin)
        else:
            if fsize == 0 and bsize == 0:
                break
            if fmin == INF or bmin == INF:
                # one side is exhausted: every state it can reach is settled, and each meeting with the
                # other side's start was checked when it was relaxed
                break
            if best < INF and fmin + bmin >= best:
                break
            forward = fmin <= bmin
        if forward:
            d = fmin
            a = hv[0]
            fsize = ih_pop(hk, hv, R, 2, fsize)
            q = state_level(a, hc, keep)
            if q == 0:
                for tt in range(tfirst[a], tfirst[a + 1]):
                    c = tcost[tt]
                    if c < 0:
                        continue
                    b = tout[tt]
                    nd = d + c * scale
                    if nd < R[8 * b]:
                        if R[8 * b] == INF and R[8 * b + 1] == INF:
                            touched[nt] = b
                            nt += 1
                        R[8 * b] = nd
                        R[8 * b + 4] = a
                        R[8 * b + 5] = tt
                        fsize = ih_update(hk, hv, R, 2, fsize, nd, b)
                        if R[8 * b + 1] < INF and nd + R[8 * b + 1] < best:
                            best = nd + R[8 * b + 1]
                            meet = b
                            if bounded:
                                limit = best + np.int64(np.floor(best * stretch))
            else:
                p = q - 1
                cell = hc[a, p]
                g = cell_base[p] + cell
                i = entry_idx[a, p]
                if i >= 0:
                    nx = ex_first[g + 1] - ex_first[g]
                    base = cq_first[g] + i * nx
                    for j in range(nx):
                        w = clique[base + j]
                        if w >= INF:
                            continue
                        b = ex_arc[ex_first[g] + j]
                        nd = d + w * scale
                        if nd < R[8 * b]:
                            if R[8 * b] == INF and R[8 * b + 1] == INF:
                                touched[nt] = b
                                nt += 1
                            R[8 * b] = nd
                            R[8 * b + 4] = a
                            R[8 * b + 5] = -(1 + base + j)
                            fsize = ih_update(hk, hv, R, 2, fsize, nd, b)
                            if R[8 * b + 1] < INF and nd + R[8 * b + 1] < best:
                                best = nd + R[8 * b + 1]
                                meet = b
                                if bounded:
                                    limit = best + np.int64(np.floor(best * stretch))
        else:
            d = bmin
            b = hv2[0]
            bsize = ih_pop(hk2, hv2, R, 3, bsize)
            q = state_level(b, tc, keep)
            if q == 0:
                for k in range(rfirst[b], rfirst[b + 1]):
                    tt = rturn[k]
                    c = tcost[tt]
                    if c < 0:
                        continue
                    a = rin[k]
                    nd = d + c * scale
                    if nd < R[8 * a + 1]:
                        if R[8 * a] == INF and R[8 * a + 1] == INF:
                            touched[nt] = a
                            nt += 1
                        R[8 * a + 1] = nd
                        R[8 * a + 6] = b
                        R[8 * a + 7] = tt
                        bsize = ih_update(hk2, hv2, R, 3, bsize, nd, a)
                        if R[8 * a] < INF and nd + R[8 * a] < best:
                            best = nd + R[8 * a]
                            meet = a
                            if bounded:
                                limit = best + np.int64(np.floor(best * stretch))
            else:
                p = q - 1
                g = cell_base[p] + tc[b, p]
                j = exit_idx[b, p]
                if j >= 0:
                    nx = ex_first[g + 1] - ex_first[g]
                    ne = ent_first[g + 1] - ent_first[g]
                    for i in range(ne):
                        pos = cq_first[g] + i * nx + j
                        w = clique[pos]
                        if w >= INF:
                            continue
                        a = ent_arc[ent_first[g] + i]
                        nd = d + w * scale
                        if nd < R[8 * a + 1]:
                            if R[8 * a] == INF and R[8 * a + 1] == INF:
                                touched[nt] = a
                                nt += 1
                            R[8 * a + 1] = nd
                            R[8 * a + 6] = b
                            R[8 * a + 7] = -(1 + pos)
                            bsize = ih_update(hk2, hv2, R, 3, bsize, nd, a)
                            if R[8 * a] < INF and nd + R[8 * a] < best:
                                best = nd + R[8 * a]
                                meet = a
                                if bounded:
                                    limit = best + np.int64(np.floor(best * stretch))
    return best, meet, nt, limit, settled, overflow


@njit(cache=True)
def reset(R, touched, nt):
    """Set the ``nt`` touched arcs back to unreached in both searches."""
    for i in range(nt):
        a = touched[i]
        R[8 * a] = INF
        R[8 * a + 1] = INF
        R[8 * a + 2] = -1
        R[8 * a + 3] = -1


@njit(cache=True)
def new_records(m):
    """Search records of ``m`` states, unreached (see :func:`bidir`)."""
    R = np.empty(8 * m, np.int64)
    R[0::8] = INF
    R[1::8] = INF
    R[2::8] = -1
    R[3::8] = -1
    return R


@njit(cache=True)
def chain(meet, R):
    """The search-graph path through ``meet``: states (arcs) and the edge references between them.

    Returns ``(states, refs)`` with ``refs[i]`` the edge from ``states[i]`` to ``states[i + 1]``.
    """
    k = 1
    a = meet
    while R[8 * a + 4] >= 0:
        a = R[8 * a + 4]
        k += 1
    b = meet
    while R[8 * b + 6] >= 0:
        b = R[8 * b + 6]
        k += 1
    states = np.empty(k, np.int64)
    refs = np.empty(k - 1, np.int64)
    a = meet
    i = 0
    while R[8 * a + 4] >= 0:
        i += 1
        a = R[8 * a + 4]
    nf = i
    a = meet
    i = nf
    states[i] = meet
    while R[8 * a + 4] >= 0:
        refs[i - 1] = R[8 * a + 5]
        a = R[8 * a + 4]
        i -= 1
        states[i] = a
    b = meet
    i = nf
    while R[8 * b + 6] >= 0:
        refs[i] = R[8 * b + 7]
        b = R[8 * b + 6]
        i += 1
        states[i] = b
    return states, refs


@njit(cache=True, parallel=True)
def many(src, dst, n_chunks, ncell, first_out, fwd_st, rev_first, rev_arc, tfirst, tout, tcost, rfirst, rin, rturn, arc_cost, hc, tc,
         entry_idx, exit_idx, cell_base, ent_first, ent_arc, ex_first, ex_arc, cq_first, clique, out):
    """Paired distances ``out[i] = dist(src[i], dst[i])`` (``INF`` when unreachable), ``n_chunks``
    chunks in parallel, each with its own search arrays."""
    m = arc_cost.size
    k = src.size
    for ch in prange(n_chunks):
        lo = ch * k // n_chunks
        hi = (ch + 1) * k // n_chunks
        if hi <= lo:
            continue
        R = new_records(m)
        touched = np.empty(m, np.int64)
        hk = np.empty(m, np.int64)
        hv = np.empty(m, np.int64)
        hk2 = np.empty(m, np.int64)
        hv2 = np.empty(m, np.int64)
        for i in range(lo, hi):
            s = src[i]
            t = dst[i]
            if s == t:
                out[i] = 0
                continue
            best, meet, nt = bidir(s, t, ncell, first_out, fwd_st, rev_first, rev_arc, tfirst, tout, tcost, rfirst, rin, rturn,
                                   arc_cost, hc, tc, entry_idx, exit_idx, cell_base, ent_first, ent_arc, ex_first,
                                   ex_arc, cq_first, clique, R, touched, hk, hv, hk2, hv2)
            out[i] = best
            reset(R, touched, nt)
