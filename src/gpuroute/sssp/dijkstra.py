"""Dijkstra's algorithm on the CPU (numba): the exact reference every other method is checked against,
and the canonical predecessor rule every algorithm and device returns.

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
from ..graph.heap import heap_pop, heap_push  # the one lazy heap (issue 19); also re-exported here
from .common import Spec

_INF = INF


@njit(cache=True)
def dijkstra_one(first_out, head, weight, source, target, dist, pred, hd, hn):
    """Lazy-deletion binary-heap Dijkstra from ``source`` into ``dist``/``pred`` (pre-filled INF/-1).

    Stops as soon as ``target`` is settled (pass -1 for one-to-all). Returns the number of settled nodes.
    ``pred`` receives the node that last improved each node (not yet canonical).
    """
    dist[source] = 0
    size = heap_push(hd, hn, 0, 0, source)
    settled = 0
    while size > 0:
        d, u, size = heap_pop(hd, hn, size)
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
                size = heap_push(hd, hn, size, nd, v)
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


SPEC = Spec("dijkstra", doc="binary-heap Dijkstra (Dijkstra 1959), CPU, parallel over sources (numba)")


def run_cpu(graph, weight, sources, want_pred, variant, opts):
    """Registry entry: one-to-all Dijkstra from every source (int64 (k,)); see :func:`dijkstra_many`."""
    w = graph.weight(weight)
    rfo, rt, ra = (graph.rev_first_out, graph.rev_tail, graph.rev_arc) if want_pred else (
        np.zeros(1, np.int32), np.zeros(0, np.int32), np.zeros(0, np.int32))
    dist, pred = dijkstra_many(graph.first_out, graph.head, w, sources, rfo, rt, ra, want_pred)
    return dist, (pred if want_pred else None), [{"phases": 0} for _ in sources], {}
