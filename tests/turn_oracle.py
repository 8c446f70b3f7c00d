"""A turn-aware oracle for routes between phantom nodes (segment snapping) over an overlay's current
metric: scipy's Dijkstra on the turn-expanded graph (states = arcs, edges = the allowed turns with the
overlay's ``turn_cost``: penalty + cost of the out-arc; forbidden turns left out), and helpers to read a
route's arcs back from its OSM node annotation. Shared by tests/engine/test_dataset.py and
tests/server/test_customize_http.py."""
from __future__ import annotations

import math

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import dijkstra


def turn_graph(ov):
    """The turn-expanded graph of ``ov``'s current metric plus one spare state (index m) for the source:
    ``(rows, cols, weights)`` of the allowed turns and the arc costs (float64 (m,))."""
    tr = ov.turns
    m = ov.graph.n_arcs
    tc = np.asarray(ov.turn_cost, dtype=np.float64)
    in_arc = np.repeat(np.arange(m), np.diff(np.asarray(tr.first)))
    ok = tc >= 0
    return in_arc[ok], np.asarray(tr.out_arc)[ok], tc[ok], np.asarray(ov.arc_cost, dtype=np.float64)


def phantom_cost(ov, src, dst, tg=None):
    """Least cost (the metric's unit) from phantom ``src`` to phantom ``dst`` (``Phantom.arcs``: (arc,
    fraction) options), turn restrictions honoured; inf when unreachable.

    From source arc ``a`` at ``fa``: either the target ahead on the same arc (``(fb - fa) c(a)``), or
    leave ``a`` by an allowed turn (``(1 - fa) c(a) + turn``) and reach target arc ``b`` (label minus
    ``(1 - fb) c(b)``); leaving and coming back covers a target behind the source on the same arc.
    """
    rows, cols, w, c = tg if tg is not None else turn_graph(ov)
    m = ov.graph.n_arcs
    best = math.inf
    for a, fa in src.arcs:
        for b, fb in dst.arcs:
            if a == b and fa <= fb:
                best = min(best, (fb - fa) * c[a])
        sel = rows == a
        start = (1.0 - fa) * c[a]
        # the spare state m stands for "on a, at the source point": edges to a's successors
        r = np.concatenate([rows, np.full(int(sel.sum()), m)])
        cc = np.concatenate([cols, cols[sel]])
        ww = np.concatenate([w, w[sel] + start + 1.0])  # +1: a zero weight would vanish from the matrix
        g = csr_matrix((ww, (r, cc)), shape=(m + 1, m + 1))
        d = dijkstra(g, indices=m) - 1.0
        for b, fb in dst.arcs:
            if np.isfinite(d[b]):
                best = min(best, d[b] - (1.0 - fb) * c[b])
    return best


def route_arcs(engine, route):
    """The graph arcs of a one-leg route answered with ``annotations=["nodes"]`` (OSM node ids, one per
    coordinate: the route's arcs, the partial first and last ones included)."""
    g = engine.graph
    ids = np.asarray(g.node_ids, dtype=np.int64)
    pair = {(int(u), int(v)): k for k, (u, v) in enumerate(zip(ids[g.tail], ids[g.head], strict=True))}
    nodes = route["legs"][0]["annotation"]["nodes"]
    return [pair[(u, v)] for u, v in zip(nodes[:-1], nodes[1:], strict=True)]


def turns_allowed(ov, arcs):
    """Whether every consecutive pair of ``arcs`` is an allowed turn of ``ov``'s metric."""
    tr = ov.turns
    tc = ov.turn_cost
    for a, b in zip(arcs[:-1], arcs[1:], strict=True):
        t0, t1 = int(tr.first[a]), int(tr.first[a + 1])
        hit = np.flatnonzero(np.asarray(tr.out_arc[t0:t1]) == b)
        if hit.size == 0 or tc[t0 + hit[0]] < 0:
            return False
    return True
