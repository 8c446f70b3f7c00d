"""The contraction hierarchy as arrays, and the public facade :class:`ContractionHierarchy`.

A hierarchy over a graph of ``n`` nodes (Geisberger, Sanders, Schultes, Delling, "Contraction
Hierarchies: Faster and Simpler Hierarchical Routing in Road Networks", WEA 2008; the parallel form of
Karimi, Koppelman, Michael, "GPU Road Network Graph Contraction and SSSP Query", ICS '19, sec. 3.1):

* ``rank`` int32 (n,): a total order, ``rank[v]`` = position of ``v`` in the contraction order (every
  hierarchy arc joins nodes of different ranks); ``order`` int32 (n,) its inverse.
* ``level`` int32 (n,): PHAST's levels. For every hierarchy arc joining ``u`` and ``v`` outside the
  core, the endpoint of higher rank has the higher level, so the nodes of one level are independent:
  the downward sweep may process a level in parallel. CU-CH's levels are its iterations (the
  independent sets it contracted); the sequential CH's are computed from the ranks (longest chain of
  lower-ranked neighbours).
* ``core`` int32 (c,): CU-CH's final overlay (sec. 3.6), the nodes left when fewer than K remained, all
  of level ``core_level``; it is a complete graph: ``core_dist`` int64 (c, c) holds the exact distance
  between every ordered pair (INF where unreachable, 0 on the diagonal). The sequential CH has no core.
* ``up``: arcs ``u -> v`` with ``rank[v] > rank[u]``, a CSR by tail: ``up_first_out`` int32 (n+1),
  ``up_head`` int32, ``up_weight`` int64, ``up_mid`` int32 (the middle node of a shortcut, -1 for an
  arc of the graph), ``up_arc`` int32 (the graph's arc id, -1 for a shortcut).
* ``down``: arcs ``u -> v`` with ``rank[u] > rank[v]``, a CSR by head: ``down_first_out``,
  ``down_tail``, ``down_weight``, ``down_mid``, ``down_arc``.

Core pairs are arcs too (the complete graph, in ``up`` or ``down`` by rank, with the midpoint of the
core's shortest path), so a bidirectional CH query needs nothing else; PHAST instead does the core in
one dense step (``core_dist``). Parallel hierarchy arcs are merged: the lightest (an arc of the graph
before a shortcut, then the smallest middle node) is kept. Weights are int64 on the CPU; the GPU kernels
use 32-bit distances and refuse a hierarchy whose weights do not fit.

A shortcut ``u -> w`` with middle ``m`` stands for ``u -> m`` then ``m -> w`` (both hierarchy arcs:
``rank[m]`` is below both ends, or ``m`` is in the core with them); :func:`unpack` follows them down to
the graph's arcs.
"""
from __future__ import annotations

import numpy as np

from ..graph.constants import INDEX_DTYPE, INF

#: Format version of the arrays (the saved directory's manifest carries it).
FORMAT_VERSION = 1


def _csr(keys, n, *cols):
    """Sort ``cols`` by ``keys`` (stable) and return ``(first_out int32 (n+1,), *sorted cols)``."""
    order = np.argsort(keys, kind="stable")
    first_out = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=n), out=first_out[1:])
    return (first_out.astype(INDEX_DTYPE), *[c[order] for c in cols])


class Hierarchy:
    """The arrays of a contraction hierarchy (see the module doc); built by :meth:`from_arcs`.

    Attributes
    ----------
    n_nodes : int
    rank, order, level : ndarray int32, shape (n,)
    core : ndarray int32, shape (c,)
    core_level : int
        The level of the core nodes (-1 without a core).
    core_dist : ndarray int64, shape (c, c)
    up_first_out, up_head, up_weight, up_mid, up_arc
    down_first_out, down_tail, down_weight, down_mid, down_arc
    """

    ARRAYS = ("rank", "order", "level", "core", "core_dist", "up_first_out", "up_head", "up_weight", "up_mid",
              "up_arc", "down_first_out", "down_tail", "down_weight", "down_mid", "down_arc")

    def __init__(self, **arrays):
        for k in self.ARRAYS:
            setattr(self, k, arrays[k])
        self.n_nodes = int(self.rank.size)
        self.core_level = int(self.level[self.core[0]]) if self.core.size else -1

    @classmethod
    def from_arcs(cls, n, rank, level, tail, head, weight, mid, arc, core=None, core_dist=None):
        """Build the arrays from the hierarchy's arcs.

        Parameters
        ----------
        n : int
        rank : array_like of int, shape (n,)
            A permutation of ``0 .. n-1``.
        level : array_like of int, shape (n,)
        tail, head : array_like of int, shape (a,)
            Every arc of the hierarchy (the graph's arcs, shortcuts, core pairs); ``tail != head``.
        weight : array_like of int, shape (a,)
        mid : array_like of int, shape (a,)
            Middle node of a shortcut, -1 for an arc of the graph.
        arc : array_like of int, shape (a,)
            The graph's arc id of an arc of the graph, -1 for a shortcut.
        core : array_like of int, shape (c,), optional
        core_dist : array_like of int, shape (c, c), optional

        Returns
        -------
        Hierarchy
            Parallel arcs merged (the lightest; then an arc of the graph; then the smallest middle).

        Raises
        ------
        ValueError
            ``rank`` is not a permutation, an arc is a loop, or arrays disagree in length.
        """
        rank = np.asarray(rank, dtype=np.int64)
        if rank.shape != (n,) or not np.array_equal(np.sort(rank), np.arange(n)):
            raise ValueError("rank must be a permutation of 0 .. n-1")
        tail, head = np.asarray(tail, dtype=np.int64), np.asarray(head, dtype=np.int64)
        weight = np.asarray(weight, dtype=np.int64)
        mid, arc = np.asarray(mid, dtype=np.int64), np.asarray(arc, dtype=np.int64)
        if not (tail.shape == head.shape == weight.shape == mid.shape == arc.shape):
            raise ValueError("tail, head, weight, mid and arc must have one length")
        if (tail == head).any():
            raise ValueError("a hierarchy arc cannot be a loop")
        # merge parallel arcs: lightest, then an arc of the graph (mid -1 sorts first), then smallest mid
        o = np.lexsort((mid, weight, head, tail))
        tail, head, weight, mid, arc = tail[o], head[o], weight[o], mid[o], arc[o]
        if tail.size:
            keep = np.ones(tail.size, dtype=bool)
            keep[1:] = (tail[1:] != tail[:-1]) | (head[1:] != head[:-1])
            tail, head, weight, mid, arc = tail[keep], head[keep], weight[keep], mid[keep], arc[keep]
        upward = rank[head] > rank[tail]
        ufo, uh, uw, um, ua = _csr(tail[upward], n, head[upward], weight[upward], mid[upward], arc[upward])
        dn = ~upward
        dfo, dt, dw, dm, da = _csr(head[dn], n, tail[dn], weight[dn], mid[dn], arc[dn])
        core = np.zeros(0, dtype=np.int64) if core is None else np.asarray(core, dtype=np.int64)
        c = core.size
        core_dist = (np.zeros((0, 0), dtype=np.int64) if core_dist is None
                     else np.asarray(core_dist, dtype=np.int64).reshape(c, c))
        order = np.empty(n, dtype=np.int64)
        order[rank] = np.arange(n)
        i32 = INDEX_DTYPE
        return cls(rank=rank.astype(i32), order=order.astype(i32), level=np.asarray(level, dtype=i32),
                   core=core.astype(i32), core_dist=core_dist,
                   up_first_out=ufo, up_head=uh.astype(i32), up_weight=uw, up_mid=um.astype(i32),
                   up_arc=ua.astype(i32), down_first_out=dfo, down_tail=dt.astype(i32), down_weight=dw,
                   down_mid=dm.astype(i32), down_arc=da.astype(i32))

    @property
    def n_up(self):
        return int(self.up_head.size)

    @property
    def n_down(self):
        return int(self.down_tail.size)

    @property
    def n_levels(self):
        return int(self.level.max()) + 1 if self.n_nodes else 0

    @property
    def n_shortcuts(self):
        """Hierarchy arcs that are not arcs of the graph (core pairs included)."""
        return int(np.count_nonzero(self.up_arc < 0) + np.count_nonzero(self.down_arc < 0))

    def arrays(self):
        """``{name: ndarray}`` of every array (for saving)."""
        return {k: getattr(self, k) for k in self.ARRAYS}


def unpack(h, tail, head, mid, arc, out):
    """Append to ``out`` (a list) the graph's arc ids of the hierarchy arc ``tail -> head`` (middle
    ``mid``, graph arc ``arc``), recursively through shortcut middles.

    Raises
    ------
    ValueError
        A shortcut's half is missing from the hierarchy (a broken hierarchy).
    """
    stack = [(tail, head, mid, arc)]
    while stack:
        t, hd, m, a = stack.pop()
        if m < 0:
            out.append(int(a))
            continue
        first = find_arc(h, t, m)
        second = find_arc(h, m, hd)
        if first is None or second is None:
            raise ValueError(f"broken hierarchy: shortcut {t} -> {hd} via {m} has no half {t}->{m} or {m}->{hd}")
        stack.append(second)
        stack.append(first)
    return out


def find_arc(h, u, v):
    """``(u, v, mid, arc)`` of the lightest hierarchy arc ``u -> v``, or None."""
    if h.rank[v] > h.rank[u]:
        lo, hi = h.up_first_out[u], h.up_first_out[u + 1]
        j = np.flatnonzero(h.up_head[lo:hi] == v)
        if j.size:
            k = lo + int(j[0])
            return u, v, int(h.up_mid[k]), int(h.up_arc[k])
    else:
        lo, hi = h.down_first_out[v], h.down_first_out[v + 1]
        j = np.flatnonzero(h.down_tail[lo:hi] == u)
        if j.size:
            k = lo + int(j[0])
            return u, v, int(h.down_mid[k]), int(h.down_arc[k])
    return None


__all__ = ["Hierarchy", "unpack", "find_arc", "FORMAT_VERSION", "INF"]
