"""CPU customization of the overlay (numba, parallel over cells): the cell cliques of every level,
bottom-up, from the turn costs the metric decoder produced.

Follows Delling, Kobitzsch, Werneck, "Customizing Driving Directions with GPUs" (Euro-Par 2014),
sec. 2-3: a level-``p`` cell's clique holds, for every entry point ``e`` and exit point ``x`` of the
cell, the cost of the shortest path from ``e`` to ``x`` that stays inside the cell, computed on the
level-``p - 1`` overlay (the subcells' cliques and the turns between subcells; at the lowest level, the
turns of the arc-based graph). The seed runs Bellman-Ford on the GPU; this CPU twin runs one Dijkstra
per entry point (same exact costs, so the same cliques).

Edge references (``ref``) of the per-level search graphs are shared by customization, queries and path
unpacking: ``ref >= 0`` is a turn id (its cost is ``turn_cost[ref]``, negative = forbidden);
``ref < 0`` is clique entry ``-ref - 1`` of the level below.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from ..graph.constants import INF
from ..sssp.dijkstra import heap_pop, heap_push

#: Cost of an entry/exit pair with no path inside its cell.
CLIQUE_INF = INF


@njit(cache=True, inline="always")
def edge_cost(ref, turn_cost, clique):
    """Cost of one search-graph edge (see the module docstring); ``CLIQUE_INF`` when unusable."""
    if ref >= 0:
        c = turn_cost[ref]
        if c < 0:
            return CLIQUE_INF
        return c
    return clique[-ref - 1]


@njit(cache=True, inline="always")
def edge_tail(e_first, lo, hi, e):
    """The vertex in ``[lo, hi)`` whose CSR range of ``e_first`` holds edge ``e`` (binary search)."""
    a = lo
    b = hi
    while b - a > 1:
        mid = (a + b) >> 1
        if e_first[mid] <= e:
            a = mid
        else:
            b = mid
    return a


@njit(cache=True)
def cell_search(v0, lo, hi, e_first, e_to, e_ref, turn_cost, clique, dist, par, hk, hv, stop=-1):
    """Dijkstra from vertex ``v0`` over the vertices ``[lo, hi)`` of one cell of a level's search graph.

    ``dist``/``par`` are indexed by ``vertex - lo`` and are overwritten (``par`` = edge index into
    ``e_to``/``e_ref`` by which the vertex was reached, -1 for ``v0`` and unreached vertices).
    Edges leaving ``[lo, hi)`` do not exist by construction. With ``stop >= 0`` the search ends once
    that vertex is settled (path unpacking).
    """
    n = hi - lo
    for i in range(n):
        dist[i] = CLIQUE_INF
        par[i] = -1
    dist[v0 - lo] = 0
    size = heap_push(hk, hv, 0, 0, v0)
    while size > 0:
        d, u, size = heap_pop(hk, hv, size)
        if d > dist[u - lo]:
            continue
        if u == stop:
            return
        for e in range(e_first[u], e_first[u + 1]):
            c = edge_cost(e_ref[e], turn_cost, clique)
            if c >= CLIQUE_INF:
                continue
            v = e_to[e]
            nd = d + c
            if nd < dist[v - lo]:
                dist[v - lo] = nd
                par[v - lo] = e
                size = heap_push(hk, hv, size, nd, v)


@njit(cache=True, parallel=True)
def customize_level(cells, vert_first, e_first, e_to, e_ref, ent_first, ent_vert, ex_first, ex_vert,
                    cq_first, turn_cost, clique_below, out, tree_first, tree):
    """Cliques of the cells ``cells`` of one level (CPU twin of the seed's per-level customization).

    Parameters
    ----------
    cells : int64 (k,)
        Level-local ids of the cells to customize (all of them, or those a traffic update touched).
    vert_first : int64 (n_cells + 1,)
        Cell ``c``'s search-graph vertices are ``[vert_first[c], vert_first[c + 1])``.
    e_first, e_to, e_ref : int64 (V + 1,), int32 (E,), int64 (E,)
        The level's search graph in CSR (see the module docstring for ``e_ref``).
    ent_first, ent_vert, ex_first, ex_vert : int64 (n_cells + 1,), int32, int64 (n_cells + 1,), int32
        Entry and exit points of each cell, as search-graph vertices.
    cq_first : int64 (n_cells + 1,)
        Offset of each cell's row-major ``entries x exits`` clique in ``out``.
    turn_cost : int64 (T,)
        Decoded turn costs (negative: forbidden).
    clique_below : int64
        The level below's cliques (empty at the lowest level).
    out : int64
        This level's cliques, written in place for the cells given.
    tree_first : int64 (n_cells + 1,)
        Offset of each cell's shortest-path trees in ``tree`` (``entries x vertices``; empty ranges
        when the trees are not kept).
    tree : uint16 or int32
        For entry ``i`` of cell ``c`` and vertex ``v``: 1 + the edge (counted from the cell's first
        edge) by which ``v`` was reached, 0 for none. Path unpacking walks these instead of searching.
    """
    for ci in prange(cells.size):
        c = cells[ci]
        lo = vert_first[c]
        hi = vert_first[c + 1]
        n = hi - lo
        if n == 0:
            continue
        dist = np.empty(n, np.int64)
        par = np.empty(n, np.int64)
        cap = e_first[hi] - e_first[lo] + 1
        hk = np.empty(cap, np.int64)
        hv = np.empty(cap, np.int64)
        nx = ex_first[c + 1] - ex_first[c]
        base = cq_first[c]
        for i in range(ent_first[c + 1] - ent_first[c]):
            cell_search(ent_vert[ent_first[c] + i], lo, hi, e_first, e_to, e_ref, turn_cost, clique_below,
                        dist, par, hk, hv)
            for j in range(nx):
                out[base + i * nx + j] = dist[ex_vert[ex_first[c] + j] - lo]
            tb = tree_first[c] + i * n
            if tree_first[c + 1] > tree_first[c]:
                e0 = e_first[lo]
                for v in range(n):
                    tree[tb + v] = 0 if par[v] < 0 else par[v] - e0 + 1


@njit(cache=True)
def cell_path(v0, v1, lo, hi, e_first, e_to, e_ref, turn_cost, clique_below):
    """Edge references of one shortest path from vertex ``v0`` to ``v1`` inside one cell (in path order);
    empty when ``v0 == v1`` or ``v1`` is unreachable. Used to unpack a clique arc."""
    n = hi - lo
    dist = np.empty(n, np.int64)
    par = np.empty(n, np.int64)
    cap = e_first[hi] - e_first[lo] + 1
    hk = np.empty(cap, np.int64)
    hv = np.empty(cap, np.int64)
    cell_search(v0, lo, hi, e_first, e_to, e_ref, turn_cost, clique_below, dist, par, hk, hv, v1)
    k = 0
    v = v1
    while par[v - lo] >= 0:
        e = par[v - lo]
        k += 1
        # the tail of edge e: the vertex whose CSR range holds e
        v = edge_tail(e_first, lo, hi, e)
    refs = np.empty(k, np.int64)
    v = v1
    i = k
    while par[v - lo] >= 0:
        e = par[v - lo]
        i -= 1
        refs[i] = e_ref[e]
        v = edge_tail(e_first, lo, hi, e)
    return refs


@njit(cache=True)
def unpack(states, refs, tout, cq_first, cell_base, ex_first, ex_arc, vf, vh, vx, ef, eto, eref, turn_cost, clique,
           tree_first, tree, dist, par, hk, hv, stack, tmp, out):
    """The arcs of a search-graph path, every clique arc unpacked down to turns (one call per route).

    ``states``/``refs`` come from :func:`gpuroute.crp.search.chain`; ``vf``/``vh``/``vx``/``ef``/``eto``/
    ``eref`` are the level graphs flattened by :func:`gpuroute.crp.topology.build_topology`. A clique arc
    is replaced by a shortest path inside its cell on the level below, recursively, with an explicit
    stack: read from the shortest-path tree the customization kept (``tree_first``/``tree``, global cell
    numbering), or found by a Dijkstra stopped at the exit where no tree was kept. Buffers: ``dist``/``par`` hold the largest cell's vertices,
    ``hk``/``hv`` its edges + 1, ``stack`` and ``tmp`` the stacked references, ``out`` the arcs (m).
    Returns the number of arcs written to ``out``.
    """
    n = 0
    out[n] = states[0]
    n += 1
    top = 0
    for i in range(refs.size - 1, -1, -1):
        stack[top] = refs[i]
        top += 1
    while top > 0:
        top -= 1
        r = stack[top]
        if r >= 0:
            out[n] = tout[r]
            n += 1
            continue
        pos = -r - 1
        g = np.searchsorted(cq_first, pos, side="right") - 1
        p = np.searchsorted(cell_base, g, side="right") - 1
        nx = ex_first[g + 1] - ex_first[g]
        x_arc = ex_arc[ex_first[g] + (pos - cq_first[g]) % nx]
        e_arc = out[n - 1]
        v0 = vh[p, e_arc]
        v1 = vx[p, x_arc]
        lo = vf[g]
        hi = vf[g + 1]
        if tree_first[g + 1] > tree_first[g]:
            # the customization kept entry i's shortest-path tree: read the parents
            nv = hi - lo
            tb = tree_first[g] + ((pos - cq_first[g]) // nx) * nv
            e0 = ef[lo]
            for v in range(nv):
                par[v] = np.int64(tree[tb + v]) - 1 + e0 if tree[tb + v] > 0 else -1
        else:
            cell_search(v0, lo, hi, ef, eto, eref, turn_cost, clique, dist, par, hk, hv, v1)
        k = 0
        v = v1
        while par[v - lo] >= 0:
            e = par[v - lo]
            tmp[k] = eref[e]
            k += 1
            v = edge_tail(ef, lo, hi, e)
        # tmp holds the path backwards: push it so that its first edge is popped first
        for j in range(k):
            stack[top] = tmp[j]
            top += 1
    return n
