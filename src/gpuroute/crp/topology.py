"""The metric-independent overlay topology of Customizable Route Planning on the arc-based graph.

Follows Delling, Kobitzsch, Werneck, "Customizing Driving Directions with GPUs" (Euro-Par 2014), sec. 2
(overlay, entry and exit points, the turn model) and Delling, Goldberg, Pajor, Werneck, "Customizable
Route Planning in Road Networks" (Transportation Science 2017), sec. 3.

Model. A search state is an arc ``a`` of the graph, its cost counted to the arc's end; the state lies in
the cell of its head at every level (``hc[p, a] = cells[p, head[a]]``). A turn ``a -> b``
(``head[a] == tail[b]``) is the transition between states. At partition level ``p`` the **boundary
arcs** are those whose tail and head lie in different cells; a boundary arc is an **entry point** of its
head's cell and an **exit point** of its tail's cell. A cell's **clique** holds, for every entry ``e`` and
exit ``x``, the cost of the cheapest path that leaves ``e``'s head, stays in the cell and ends by
traversing ``x`` (row-major ``entries x exits``, int64, ``INF`` where there is none). The overlay of level
``p`` is therefore a graph on the boundary arcs whose arcs are the cliques.

The level's **search graph** (customization and path unpacking) gives each cell its own vertices: the
arcs ending in the cell (at ``p = 0`` every such arc; above, the level-``p - 1`` boundary arcs) and, as
sinks, the cell's exit points. Its edges are the turns out of the cell's arcs at ``p = 0``, and above it
the cliques of the level-``p - 1`` cells inside the cell.

Every array is built once here with NumPy (vectorised); customization only fills cliques.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class LevelGraph:
    """One level's search graph (see the module docstring).

    Attributes
    ----------
    vert_first : int64 (n_cells + 1,)
        Cell ``c``'s vertices are ``[vert_first[c], vert_first[c + 1])``: first the arcs ending in the
        cell, then its exit points.
    vert_arc : int32 (V,)
        The arc (search state) of each vertex.
    vhead_of, vexit_of : int32 (m,)
        Vertex of each arc in its head's cell (-1 if it is not a vertex at this level) and, for a
        boundary arc of this level, its sink vertex in its tail's cell (-1 otherwise).
    e_first : int64 (V + 1,), e_to : int32 (E,), e_ref : int64 (E,)
        Edges in CSR; ``e_ref >= 0`` is a turn id, ``< 0`` clique position ``-ref - 1`` of the level below.
    ent_vert, ex_vert : int32
        Entry and exit points of this level's cells as vertices (same order as the overlay's
        ``ent_arc``/``ex_arc`` slices of this level).
    """

    vert_first: np.ndarray
    vert_arc: np.ndarray
    vhead_of: np.ndarray
    vexit_of: np.ndarray
    e_first: np.ndarray
    e_to: np.ndarray
    e_ref: np.ndarray
    ent_vert: np.ndarray
    ex_vert: np.ndarray


def _csr_by(key, n_keys, values):
    """Group ``values`` by ``key`` (stable): returns (first int64 (n_keys + 1,), values sorted)."""
    order = np.argsort(key, kind="stable")
    first = np.zeros(n_keys + 1, np.int64)
    np.cumsum(np.bincount(key, minlength=n_keys), out=first[1:])
    return first, values[order]


def _local_index(first, items, m):
    """``idx[items[k]] = k - first[group of k]``: position of each item within its group; -1 elsewhere."""
    idx = np.full(m, -1, np.int32)
    if items.size:
        pos = np.arange(items.size, dtype=np.int64) - np.repeat(first[:-1], np.diff(first))
        idx[items] = pos.astype(np.int32)
    return idx


def build_topology(tail, head, cells, tfirst, tout, restricted):
    """Entry and exit points, clique offsets and the per-level search graphs.

    Parameters
    ----------
    tail, head : int32 (m,)
        The graph's arcs.
    cells : int32 (L, n)
        Nested partition, level 0 finest (:class:`gpuroute.partition.Partition`).
    tfirst : int64 (m + 1,), tout : int32 (T,)
        Turns grouped by in-arc (:class:`gpuroute.crp.metric.TurnTable`).
    restricted : bool (T,)
        Turns that are forbidden whatever the metric (no search-graph edge).

    Returns
    -------
    dict
        ``hc``/``tc`` int32 (L, m) (cell of each arc's head and tail); ``cell_base`` int64 (L + 1,);
        ``n_cells``; ``ent_first``/``ex_first`` int64 (total cells + 1,) and ``ent_arc``/``ex_arc``
        int32; ``entry_idx``/``exit_idx`` int32 (L, m); ``cq_first`` int64 (total cells + 1,) into one
        clique array of ``cq_first[-1]`` entries; ``levels`` (list of :class:`LevelGraph`);
        ``level_first`` (per level, the level-local ``(ent_first, ex_first)``).
    """
    L, n = cells.shape
    m = head.size
    tin = np.repeat(np.arange(m, dtype=np.int32), np.diff(tfirst)).astype(np.int32)
    ok = ~restricted
    hc = np.ascontiguousarray(cells[:, head], dtype=np.int32)
    tc = np.ascontiguousarray(cells[:, tail], dtype=np.int32)
    n_cells = [int(cells[p].max()) + 1 if n else 0 for p in range(L)]
    cell_base = np.zeros(L + 1, np.int64)
    np.cumsum(n_cells, out=cell_base[1:])
    arcs = np.arange(m, dtype=np.int32)
    ent_first_l, ent_arc_l, ex_first_l, ex_arc_l = [], [], [], []
    entry_idx = np.full((L, m), -1, np.int32)
    exit_idx = np.full((L, m), -1, np.int32)
    cross = hc != tc
    for p in range(L):
        ca = arcs[cross[p]]
        f, ea = _csr_by(hc[p][ca], n_cells[p], ca)
        ent_first_l.append(f)
        ent_arc_l.append(ea)
        entry_idx[p] = _local_index(f, ea, m)
        f, xa = _csr_by(tc[p][ca], n_cells[p], ca)
        ex_first_l.append(f)
        ex_arc_l.append(xa)
        exit_idx[p] = _local_index(f, xa, m)
    ne_all = np.concatenate([np.diff(f) for f in ent_first_l]) if L else np.zeros(0, np.int64)
    nx_all = np.concatenate([np.diff(f) for f in ex_first_l]) if L else np.zeros(0, np.int64)
    ent_first = np.zeros(int(cell_base[-1]) + 1, np.int64)
    ex_first = np.zeros(int(cell_base[-1]) + 1, np.int64)
    np.cumsum(ne_all, out=ent_first[1:])
    np.cumsum(nx_all, out=ex_first[1:])
    ent_arc = np.concatenate(ent_arc_l).astype(np.int32) if L else np.zeros(0, np.int32)
    ex_arc = np.concatenate(ex_arc_l).astype(np.int32) if L else np.zeros(0, np.int32)
    cq_first = np.zeros(int(cell_base[-1]) + 1, np.int64)
    np.cumsum(ne_all * nx_all, out=cq_first[1:])

    levels = []
    for p in range(L):
        nc = n_cells[p]
        hv = arcs if p == 0 else arcs[cross[p - 1]]     # arcs ending in the cell
        xv = arcs[cross[p]]                             # the cell's exit points (sinks)
        key = np.concatenate([2 * hc[p][hv].astype(np.int64), 2 * tc[p][xv].astype(np.int64) + 1])
        allv = np.concatenate([hv, xv])
        order = np.argsort(key, kind="stable")
        vert_arc = allv[order].astype(np.int32)
        vert_first = np.zeros(nc + 1, np.int64)
        np.cumsum(np.bincount(key >> 1, minlength=nc), out=vert_first[1:])
        vid = np.empty(allv.size, np.int64)
        vid[order] = np.arange(allv.size, dtype=np.int64)
        vhead_of = np.full(m, -1, np.int32)
        vhead_of[hv] = vid[:hv.size]
        vexit_of = np.full(m, -1, np.int32)
        vexit_of[xv] = vid[hv.size:]
        if p == 0:
            t_ids = np.flatnonzero(ok)
            a = tin[t_ids]
            b = tout[t_ids]
            src = vhead_of[a].astype(np.int64)
            dst = np.where(hc[0][b] == hc[0][a], vhead_of[b], vexit_of[b])
            refs = t_ids.astype(np.int64)
        else:
            # the cliques of the level-(p-1) cells: entry i -> exit j, into the cell or out of it
            q = p - 1
            g0 = int(cell_base[q])
            ne = np.diff(ent_first_l[q])
            nx = np.diff(ex_first_l[q])
            per = ne * nx
            c_of = np.repeat(np.arange(n_cells[q], dtype=np.int64), per)
            k = np.arange(int(per.sum()), dtype=np.int64) - np.repeat(cq_first[g0:g0 + n_cells[q]] - cq_first[g0], per)
            nxc = np.maximum(nx[c_of], 1)
            e_arc = ent_arc_l[q][ent_first_l[q][c_of] + k // nxc]
            x_arc = ex_arc_l[q][ex_first_l[q][c_of] + k % nxc]
            src = vhead_of[e_arc].astype(np.int64)
            dst = np.where(hc[p][x_arc] == hc[p][e_arc], vhead_of[x_arc], vexit_of[x_arc])
            refs = -(1 + cq_first[g0 + c_of] + k)
        order = np.lexsort((refs, src))
        src, dst, refs = src[order], dst[order], refs[order]
        e_first = np.zeros(vert_arc.size + 1, np.int64)
        np.cumsum(np.bincount(src, minlength=vert_arc.size), out=e_first[1:])
        levels.append(LevelGraph(vert_first=vert_first, vert_arc=vert_arc, vhead_of=vhead_of, vexit_of=vexit_of,
                                 e_first=e_first, e_to=dst.astype(np.int32), e_ref=refs,
                                 ent_vert=vhead_of[ent_arc_l[p]].astype(np.int32),
                                 ex_vert=vexit_of[ex_arc_l[p]].astype(np.int32)))
    # the level graphs flattened into one numbering (level p's vertex v is vbase[p] + v) for path unpacking
    vcount = [lg.vert_arc.size for lg in levels]
    vbase = np.zeros(L + 1, np.int64)
    np.cumsum(vcount, out=vbase[1:])
    ecount = [lg.e_to.size for lg in levels]
    ebase = np.zeros(L + 1, np.int64)
    np.cumsum(ecount, out=ebase[1:])
    vf = np.concatenate([lg.vert_first[:-1] + vbase[p] for p, lg in enumerate(levels)] + [vbase[-1:]])
    ef = np.concatenate([lg.e_first[:-1] + ebase[p] for p, lg in enumerate(levels)] + [ebase[-1:]])
    eto = np.concatenate([lg.e_to.astype(np.int64) + vbase[p] for p, lg in enumerate(levels)])
    eref = np.concatenate([lg.e_ref for lg in levels])
    vh = np.stack([np.where(lg.vhead_of >= 0, lg.vhead_of + vbase[p], -1) for p, lg in enumerate(levels)])
    vx = np.stack([np.where(lg.vexit_of >= 0, lg.vexit_of + vbase[p], -1) for p, lg in enumerate(levels)])
    ncells = np.diff(vf)
    flat = dict(vf=vf, ef=ef, eto=eto, eref=eref, vh=vh, vx=vx,
                max_verts=int(ncells.max()) if ncells.size else 0,
                max_edges=int((ef[vf[1:]] - ef[vf[:-1]]).max()) if ncells.size else 0)
    return dict(flat=flat, hc=hc, tc=tc, cell_base=cell_base, n_cells=tuple(n_cells), ent_first=ent_first, ent_arc=ent_arc,
                ex_first=ex_first, ex_arc=ex_arc, entry_idx=entry_idx, exit_idx=exit_idx, cq_first=cq_first,
                levels=levels, level_first=[(ent_first_l[p], ex_first_l[p]) for p in range(L)])
