"""numba CPU kernels: Dijkstra (binary heap) and the canonical predecessor rule.

Every kernel takes plain CSR arrays (``first_out`` int32 (n+1,), ``head`` int32 (m,), ``weight`` int32
(m,)) and returns int64 distances with ``INF`` for unreachable nodes.

Canonical predecessors: shortest-path trees are not unique when several paths tie. Every gpuroute
algorithm (CPU and GPU) returns the same tree: ``pred[v]`` is the *smallest node id* ``u`` among the
tight in-arcs ``(u, v)``, i.e. those with ``dist[u] + w(u, v) == dist[v]``; ``NO_PREDECESSOR`` (-1) for
the source and for unreachable nodes. With positive weights this is always a tree (a cycle of tight
arcs would have positive length).
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from ..graph.constants import INF, NO_PREDECESSOR

_INF = INF


@njit(cache=True, inline="always")
def _heap_push(hd, hn, size, d, v):
    i = size
    hd[i] = d
    hn[i] = v
    while i > 0:
        p = (i - 1) >> 1
        if hd[p] <= hd[i]:
            break
        hd[p], hd[i] = hd[i], hd[p]
        hn[p], hn[i] = hn[i], hn[p]
        i = p
    return size + 1


@njit(cache=True, inline="always")
def _heap_pop(hd, hn, size):
    d = hd[0]
    v = hn[0]
    size -= 1
    hd[0] = hd[size]
    hn[0] = hn[size]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        if c + 1 < size and hd[c + 1] < hd[c]:
            c += 1
        if hd[i] <= hd[c]:
            break
        hd[c], hd[i] = hd[i], hd[c]
        hn[c], hn[i] = hn[i], hn[c]
        i = c
    return d, v, size


@njit(cache=True)
def dijkstra_one(first_out, head, weight, source, target, dist, pred, hd, hn):
    """Lazy-deletion binary-heap Dijkstra from ``source`` into ``dist``/``pred`` (pre-filled INF/-1).

    Stops as soon as ``target`` is settled (pass -1 for one-to-all). Returns the number of settled nodes.
    ``pred`` receives the node that last improved each node (not yet canonical).
    """
    dist[source] = 0
    size = _heap_push(hd, hn, 0, 0, source)
    settled = 0
    while size > 0:
        d, u, size = _heap_pop(hd, hn, size)
        if d > dist[u]:
            continue
        settled += 1
        if u == target:
            break
        for a in range(first_out[u], first_out[u + 1]):
            v = head[a]
            nd = d + weight[a]
            if nd < dist[v]:
                dist[v] = nd
                pred[v] = u
                size = _heap_push(hd, hn, size, nd, v)
    return settled


@njit(cache=True)
def canonical_predecessors_one(rev_first_out, rev_tail, rev_arc, weight, dist, source, pred):
    """Fill ``pred`` (int32, (n,)) with the canonical predecessor of every node (see module doc)."""
    n = dist.shape[0]
    for v in range(n):
        best = NO_PREDECESSOR
        dv = dist[v]
        if dv != _INF and v != source:
            for j in range(rev_first_out[v], rev_first_out[v + 1]):
                u = rev_tail[j]
                du = dist[u]
                if du != _INF and du + weight[rev_arc[j]] == dv:
                    if best == NO_PREDECESSOR or u < best:
                        best = u
        pred[v] = best


@njit(cache=True, parallel=True)
def dijkstra_many(first_out, head, weight, sources, rev_first_out, rev_tail, rev_arc, want_pred):
    """One-to-all Dijkstra from each of ``sources`` (int64 (k,)), in parallel over sources.

    Returns
    -------
    dist : int64 (k, n)
    pred : int32 (k, n) canonical predecessors (zeros-size (k, 0) when ``want_pred`` is False)
    """
    n = first_out.shape[0] - 1
    m = head.shape[0]
    k = sources.shape[0]
    dist = np.full((k, n), _INF, dtype=np.int64)
    pred = np.full((k, n if want_pred else 0), NO_PREDECESSOR, dtype=np.int32)
    for i in prange(k):
        hd = np.empty(m + 1, dtype=np.int64)
        hn = np.empty(m + 1, dtype=np.int32)
        tmp = np.full(n, NO_PREDECESSOR, dtype=np.int32)
        dijkstra_one(first_out, head, weight, sources[i], -1, dist[i], tmp, hd, hn)
        if want_pred:
            canonical_predecessors_one(rev_first_out, rev_tail, rev_arc, weight, dist[i], sources[i], pred[i])
    return dist, pred


@njit(cache=True, parallel=True)
def canonical_predecessors_many(rev_first_out, rev_tail, rev_arc, weight, dist, sources):
    """Canonical predecessors for each row of ``dist`` (int64 (k, n)); returns int32 (k, n)."""
    k, n = dist.shape
    pred = np.empty((k, n), dtype=np.int32)
    for i in prange(k):
        canonical_predecessors_one(rev_first_out, rev_tail, rev_arc, weight, dist[i], sources[i], pred[i])
    return pred


@njit(cache=True)
def _relax_masked(first_out, head, weight, ma, ca, ua, select, nra, nr, sched, nwa):
    """Harish & Narayanan relax step (seed 001): every ``v`` with ``Ma[v]`` clears it and relaxes its
    out-arcs with ``Ca[v]`` into ``Ua``.

    ``select=False``: RELAX_KERNEL (Alg. 2) over all nodes ``0 .. nr-1`` (``nr = n``; ``nra``, ``sched``,
    ``nwa`` unused). ``select=True``: SELECT_RELAX_KERNEL (Alg. 5) over the read queue ``nra[:nr]``; a
    head whose ``Ua`` strictly decreased is appended to ``nwa`` unless its ``sched`` flag is already set
    (the flag is then set). Returns the number of nodes appended to ``nwa`` (0 without ``select``).
    """
    nw = 0
    for x in range(nr):
        v = nra[x] if select else x
        if ma[v]:
            ma[v] = False
            dv = ca[v]
            for a in range(first_out[v], first_out[v + 1]):
                h = head[a]
                nd = dv + weight[a]
                if nd < ua[h]:
                    ua[h] = nd
                    if select and not sched[h]:
                        sched[h] = True
                        nwa[nw] = h
                        nw += 1
    return nw


@njit(cache=True)
def _update_all(ma, ca, ua):
    """Seed 001 Alg. 3 (UPDATE_KERNEL) over all n nodes; returns the number of nodes updated."""
    c = 0
    for v in range(ma.shape[0]):
        if ca[v] > ua[v]:
            ca[v] = ua[v]
            ma[v] = True
            c += 1
        ua[v] = ca[v]
    return c


@njit(cache=True)
def bellman_ford_cpu(first_out, head, weight, source, dist):
    """Harish & Narayanan's method run on the CPU (seed 001, Alg. 1-3): the conventional all-node
    phase loop with mask ``Ma``, cost ``Ca`` and update ``Ua`` arrays. Returns the number of phases.

    ``dist`` (int64 (n,)) is filled in place. The loop is bounded by n phases (Bellman-Ford's bound).
    """
    n = first_out.shape[0] - 1
    ca = dist
    ca[:] = _INF
    ua = np.full(n, _INF, dtype=np.int64)
    ma = np.zeros(n, dtype=np.bool_)
    ca[source] = 0
    ua[source] = 0
    ma[source] = True
    no_queue = np.empty(0, dtype=np.int32)
    no_flags = np.empty(0, dtype=np.bool_)
    phases = 0
    changed = True
    while changed and phases <= n:
        phases += 1
        _relax_masked(first_out, head, weight, ma, ca, ua, False, no_queue, n, no_flags, no_queue)  # Alg. 2
        changed = _update_all(ma, ca, ua) > 0  # UPDATE_KERNEL (Alg. 3)
    return phases
