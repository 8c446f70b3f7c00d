"""numba kernels behind :mod:`gpuroute.query`: point-to-point searches and path walks.

Every search takes plain CSR arrays (``first_out`` int32 (n+1,), ``head`` int32 (m,), ``weight`` int32
(m,)), writes int64 distances (``INF`` = not reached) and the id of the arc that last improved each node
(``-1`` = none) into caller-allocated arrays, and returns statistics. Paths are traced from those arc
ids, so the arcs of a returned path sum exactly to its distance.

The binary heap (lazy deletion) is the one of :mod:`gpuroute.graph.heap`; here it grows by doubling,
so a query on a graph of tens of millions of arcs does not allocate ``m`` heap slots up front.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..geo.kernels import point_distance
from ..graph.constants import INF
from ..graph.heap import heap_pop, heap_push_grow

_INF = INF
_HEAP_START = 1024


#: Push onto a heap that doubles its arrays when full: ``(hd, hn, size) = _push(hd, hn, size, d, v)``.
_push = heap_push_grow


@njit(cache=True, inline="always")
def _new_heap():
    """Empty growable heap arrays (keys int64, nodes int32) of ``_HEAP_START`` slots."""
    return np.empty(_HEAP_START, dtype=np.int64), np.empty(_HEAP_START, dtype=np.int32)


@njit(cache=True)
def dijkstra_pp(first_out, head, weight, source, target, dist, pred_arc):
    """Unidirectional Dijkstra from ``source`` that stops once ``target`` is settled.

    ``dist`` (int64 (n,)) must be filled with INF and ``pred_arc`` (int32 (n,)) with -1. Returns the
    number of settled nodes.
    """
    return _best_first(first_out, head, weight, source, target, dist, pred_arc, None, None, None, 0.0, 0.0,
                       False, 0.0)


@njit(cache=True, inline="always")
def _bidir_step(hd, hn, size, first, nbr, arc_id, weight, dist, dist_other, arc_to, best, meet):
    """One step of one side of :func:`bidirectional_pp`: pop its queue minimum ``u`` and, unless stale,
    relax the arcs ``j`` of ``u`` in the CSR ``first``/``nbr`` (arc id ``arc_id[j]``, or ``j`` when
    ``arc_id`` is None), updating ``mu = best`` and the meeting node. Returns
    ``(hd, hn, size, best, meet, settled)`` with ``settled`` 1, or 0 for a stale entry.
    """
    d, u, size = heap_pop(hd, hn, size)
    if d > dist[u]:
        return hd, hn, size, best, meet, 0
    for j in range(first[u], first[u + 1]):
        v = nbr[j]
        a = j if arc_id is None else arc_id[j]
        nd = d + weight[a]
        if nd < dist[v]:
            dist[v] = nd
            arc_to[v] = a
            hd, hn, size = _push(hd, hn, size, nd, v)
        if dist_other[v] != _INF and dist[v] + dist_other[v] < best:
            best = dist[v] + dist_other[v]
            meet = v
    return hd, hn, size, best, meet, 1


@njit(cache=True)
def bidirectional_pp(first_out, head, weight, rev_first_out, rev_tail, rev_arc, source, target,
                     dist_f, dist_b, arc_f, arc_b):
    """Bidirectional Dijkstra (Pohl 1971) with the stopping rule of Goldberg & Harrelson (2005).

    The forward search runs on the forward CSR, the backward search on the reverse CSR; each step
    advances the side whose queue minimum is smaller. Whenever an arc relaxation labels a node ``v``
    that the other side has labelled too, ``mu = min(mu, dist_f[v] + dist_b[v])``. The search stops
    when ``min_f + min_b >= mu`` (or a queue runs empty): no path through an unsettled node can then
    be shorter than ``mu``.

    ``arc_f[v]`` is the forward arc into ``v`` on the forward tree; ``arc_b[v]`` is the forward arc
    *leaving* ``v`` on the backward tree. Returns ``(mu, meeting_node, settled)`` with ``mu = INF``
    and ``meeting_node = -1`` when ``target`` cannot be reached.
    """
    hdf, hnf = _new_heap()
    hdb, hnb = _new_heap()
    dist_f[source] = 0
    dist_b[target] = 0
    hdf, hnf, sf = _push(hdf, hnf, 0, 0, source)
    hdb, hnb, sb = _push(hdb, hnb, 0, 0, target)
    best = _INF
    meet = -1
    settled = 0
    while sf > 0 and sb > 0:
        if hdf[0] + hdb[0] >= best:
            break
        if hdf[0] <= hdb[0]:
            hdf, hnf, sf, best, meet, done = _bidir_step(hdf, hnf, sf, first_out, head, None, weight,
                                                         dist_f, dist_b, arc_f, best, meet)
        else:
            hdb, hnb, sb, best, meet, done = _bidir_step(hdb, hnb, sb, rev_first_out, rev_tail, rev_arc,
                                                         weight, dist_b, dist_f, arc_b, best, meet)
        settled += done
    return best, meet, settled


@njit(cache=True, inline="always")
def _potential(v, x, y, tx, ty, planar, factor):
    """A* potential ``floor(factor * d(v, (tx, ty)))`` of node ``v`` (see :func:`astar_pp`)."""
    return np.int64(math.floor(factor * point_distance(x[v], y[v], tx, ty, planar)))


@njit(cache=True)
def _best_first(first_out, head, weight, source, target, dist, pred_arc, h, x, y, tx, ty, planar, factor):
    """Growable-heap Dijkstra (``h`` None) or A* (``h`` filled with -1) from ``source`` to ``target``.

    The heap key of a node is its tentative distance plus its potential (:func:`_potential`, computed
    on first use and stored in ``h``; see :func:`astar_pp`). With ``h`` None numba compiles the plain
    Dijkstra loop, without potentials. Stops once ``target`` is settled; returns the number of settled
    nodes.
    """
    hd, hn = _new_heap()
    dist[source] = 0
    hs = np.int64(0)
    if h is not None:
        hs = _potential(source, x, y, tx, ty, planar, factor)
        h[source] = hs
    hd, hn, size = _push(hd, hn, 0, hs, source)
    settled = 0
    while size > 0:
        key, u, size = heap_pop(hd, hn, size)
        d = key if h is None else key - h[u]  # h[u] was set when u was pushed
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
                pred_arc[v] = a
                key = nd
                if h is not None:
                    hv = h[v]
                    if hv < 0:
                        hv = _potential(v, x, y, tx, ty, planar, factor)
                        h[v] = hv
                    key += hv
                hd, hn, size = _push(hd, hn, size, key, v)
    return settled


@njit(cache=True)
def astar_pp(first_out, head, weight, x, y, planar, factor, source, target, dist, pred_arc, h):
    """A* (Hart, Nilsson & Raphael 1968) with the potential ``h(v) = floor(factor * d(v, target))``.

    ``d`` is the great-circle length in metres (``planar``: Euclidean length) and ``factor`` a lower
    bound of ``weight / d`` over all arcs, so ``h`` is admissible and consistent (triangle inequality;
    the floor keeps it consistent for integer weights). ``h`` (int64 (n,)) must be filled with -1 and
    is computed lazily. A node whose distance improves after it was settled is pushed again, so the
    result stays exact even if rounding broke consistency. Returns the number of settled nodes.
    """
    return _best_first(first_out, head, weight, source, target, dist, pred_arc, h, x, y, x[target], y[target],
                       planar, factor)


@njit(cache=True, inline="always")
def _walk_arcs(arc_of, next_node, v, stop, out):
    """Follow ``a = arc_of[v]``, ``v = next_node[a]`` from ``v`` until ``stop``, writing the arcs into ``out``.

    Returns the number of arcs, or -1 if ``stop`` is not reached within ``out.size`` arcs (or a node has
    no arc).
    """
    k = 0
    while v != stop:
        if k >= out.shape[0]:
            return -1
        a = arc_of[v]
        if a < 0:
            return -1
        out[k] = a
        k += 1
        v = next_node[a]
    return k


@njit(cache=True)
def trace_back(pred_arc, tail, source, v, out):
    """Write into ``out`` the arcs from ``source`` to ``v`` following ``pred_arc`` (tree into ``v``).

    Returns the number of arcs, or -1 if the walk does not reach ``source`` within ``out.size`` arcs.
    The arcs are written back to front and then reversed in place.
    """
    k = _walk_arcs(pred_arc, tail, v, source, out)
    if k < 0:
        return -1
    i = 0
    j = k - 1
    while i < j:
        out[i], out[j] = out[j], out[i]
        i += 1
        j -= 1
    return k


@njit(cache=True)
def trace_forward(succ_arc, head, v, target, out):
    """Write into ``out`` the arcs from ``v`` to ``target`` following ``succ_arc`` (tree out of ``v``).

    Returns the number of arcs, or -1 if ``target`` is not reached within ``out.size`` arcs.
    """
    return _walk_arcs(succ_arc, head, v, target, out)


@njit(cache=True)
def walk_predecessors(pred, source, target, out):
    """Walk ``pred`` from ``target`` back to ``source``, writing nodes target..source into ``out``.

    Returns the number of nodes written; ``-1`` if a step leaves ``[0, n)`` before reaching ``source``
    (a dead end or a bad id) and ``-2`` if more than ``n`` steps are needed (a cycle).
    """
    n = pred.shape[0]
    v = target
    k = 0
    while True:
        if k >= n:
            return -2
        out[k] = v
        k += 1
        if v == source:
            return k
        v = pred[v]
        if v < 0 or v >= n:
            return -1


@njit(cache=True)
def arcs_between(first_out, head, weight, nodes, out):
    """For each consecutive pair ``(nodes[i], nodes[i+1])`` the lightest arc joining them.

    Writes ``len(nodes) - 1`` arc ids into ``out`` and returns -1, or returns the first ``i`` whose
    pair is not joined by any arc.
    """
    for i in range(nodes.shape[0] - 1):
        u = nodes[i]
        v = nodes[i + 1]
        best = -1
        for a in range(first_out[u], first_out[u + 1]):
            if head[a] == v and (best < 0 or weight[a] < weight[best]):
                best = a
        if best < 0:
            return i
        out[i] = best
    return -1
