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

:class:`CustomizationPlan` is the level driver: the levels customization runs are the overlay's (query)
levels plus, where configured, **mezzanine levels** under them (sec. 3: finer nested cells whose cliques
only feed the customization of the level above; queries never see them), the lowest of which runs
**microinstructions** (sec. 4, :mod:`gpuroute.crp.microcode`). A level above a mezzanine level searches
the mezzanine cliques (its search graph's edges are the cliques of the mezzanine cells, the arcs between
them being the clique arcs' last arcs), so the query levels' cliques are the same, bit for bit.
"""
from __future__ import annotations

import logging
import time

import numpy as np
from numba import njit, prange

from .. import config
from ..graph.constants import INF
from ..graph.heap import heap_pop, heap_push  # not via gpuroute.sssp: a served overlay needs no SSSP family

#: Cost of an entry/exit pair with no path inside its cell.
CLIQUE_INF = INF

log = logging.getLogger(__name__)


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


def edge_tails(e_first):
    """Each edge's tail in a CSR of ``e_first`` (int64 (n + 1,)): int32 (e_first[-1],), the vertex whose range holds the
    edge (:func:`edge_tail`'s answer over any range of vertices that holds it)."""
    e_first = np.asarray(e_first, np.int64)
    return np.repeat(np.arange(e_first.size - 1, dtype=np.int32), np.diff(e_first))


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
def unpack(states, refs, tout, cq_first, cell_base, ex_first, ex_arc, vf, vh, vx, ef, eto, eref, etail, turn_cost,
           clique, tree_first, tree, ent_first, mc_first, mc_tree, mc_have, dist, par, hk, hv, stack, tmp, out):
    """The arcs of a search-graph path, every clique arc unpacked down to turns (one call per route).

    ``states``/``refs`` come from :func:`gpuroute.crp.search.chain`; ``vf``/``vh``/``vx``/``ef``/``eto``/
    ``eref`` are the level graphs flattened by :func:`gpuroute.crp.topology.build_topology`, ``etail`` each
    edge's tail (:func:`edge_tails` of ``ef``: the vertex :func:`edge_tail` finds, read). A clique arc
    is replaced by a shortest path inside its cell on the level below, recursively, with an explicit
    stack: read from the shortest-path tree the customization kept (``tree_first``/``tree``, global cell
    numbering), or found by a Dijkstra where no tree was kept: stopped at the exit, or, in a cell with a
    range in the caller's tree cache (``mc_first``, global cell numbering; ``mc_tree`` laid out as the
    trees; ``mc_have`` uint8, one flag per entry point, indexed by ``ent_first[cell] + entry``), run to the
    end once per entry point and kept there for the next paths. Buffers: ``dist``/``par`` hold the largest
    cell's vertices, ``hk``/``hv`` its edges + 1, ``stack`` and ``tmp`` the stacked references, ``out`` the
    arcs (m). Returns the number of arcs written to ``out``.
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
        nv = hi - lo
        i = (pos - cq_first[g]) // nx
        e0 = ef[lo]
        k = 0
        v = v1
        if tree_first[g + 1] > tree_first[g]:
            # the customization kept entry i's shortest-path tree: its parents from the exit back (only the
            # path's vertices are read, not the cell's)
            tb = tree_first[g] + i * nv - lo
            while tree[tb + v] > 0:
                e = np.int64(tree[tb + v]) - 1 + e0
                tmp[k] = eref[e]
                k += 1
                v = etail[e]
        elif mc_first[g + 1] > mc_first[g] and mc_have[ent_first[g] + i] != 0:
            # the caller's cache holds entry i's tree: read as a kept tree
            tb = mc_first[g] + i * nv - lo
            while mc_tree[tb + v] > 0:
                e = np.int64(mc_tree[tb + v]) - 1 + e0
                tmp[k] = eref[e]
                k += 1
                v = etail[e]
        else:
            if mc_first[g + 1] > mc_first[g]:
                # the caller's cache: entry i's tree, searched once (to the end) and kept
                tb = mc_first[g] + i * nv
                cell_search(v0, lo, hi, ef, eto, eref, turn_cost, clique, dist, par, hk, hv)
                for x in range(nv):
                    mc_tree[tb + x] = 0 if par[x] < 0 else par[x] - e0 + 1
                mc_have[ent_first[g] + i] = 1
            else:
                cell_search(v0, lo, hi, ef, eto, eref, turn_cost, clique, dist, par, hk, hv, v1)
            while par[v - lo] >= 0:
                e = par[v - lo]
                tmp[k] = eref[e]
                k += 1
                v = etail[e]
        # tmp holds the path backwards: push it so that its first edge is popped first
        for j in range(k):
            stack[top] = tmp[j]
            top += 1
    return n


# ------------------------------------------------------------------------------------------ level driver
def build_mezzanine(graph, partition):
    """The mezzanine levels a build gives an overlay (the pipeline's customize stage: ``gpuroute build``,
    ``gpuroute customize``): :data:`gpuroute.config.CRP_MEZZANINE` where it is set; else
    :data:`gpuroute.config.CRP_MEZZANINE_AUTO` for a graph of at least
    :data:`gpuroute.config.CRP_MEZZANINE_AUTO_MIN_NODES` nodes whose partition has one of its cell sizes, where
    KaHIP imports (the mezzanine cells are cut by kaffpa); else none.

    Parameters
    ----------
    graph : RoadGraph
    partition : Partition
        The overlay's (query) partition; its ``cell_sizes`` select the ``CRP_MEZZANINE_AUTO`` entries.

    Returns
    -------
    dict or False
        A :func:`resolve_mezzanine` argument.
    """
    if config.CRP_MEZZANINE:
        return config.CRP_MEZZANINE
    auto = dict(config.CRP_MEZZANINE_AUTO or {})
    if graph.n_nodes < int(config.CRP_MEZZANINE_AUTO_MIN_NODES) or not any(s in auto for s in partition.cell_sizes):
        return False
    import importlib.util

    if importlib.util.find_spec("kahip") is None:  # the mezzanine cells are cut by kaffpa
        return False
    return auto


def resolve_mezzanine(graph, partition, mezzanine=None):
    """The partition customization runs on: ``partition`` refined by mezzanine levels, or None for none.

    Parameters
    ----------
    graph : RoadGraph
    partition : Partition
        The overlay's (query) partition.
    mezzanine : None, dict, Partition or False
        None: :data:`gpuroute.config.CRP_MEZZANINE`; a dict ``{level cell size: (mezzanine sizes, ...)}``
        (see there); a Partition that refines ``partition`` (``Partition.refine``'s output, e.g. cached);
        False or ``{}``: none.

    Raises
    ------
    ValueError
        A Partition that does not hold every level of ``partition`` (same cell size, same row); a bad dict
        (``Partition.refine``'s errors).
    TypeError
        Anything else.
    """
    from ..partition import Partition

    if mezzanine is None:
        mezzanine = config.CRP_MEZZANINE
        if not isinstance(mezzanine, dict):
            raise TypeError(f"config.CRP_MEZZANINE must be a dict {{cell size: (mezzanine sizes, ...)}}, got "
                            f"{mezzanine!r}")
    if mezzanine is False or (isinstance(mezzanine, dict) and not mezzanine):
        return None
    if isinstance(mezzanine, dict):
        sizes = tuple(tuple(mezzanine.get(s, ())) for s in partition.cell_sizes)
        if not any(sizes):
            return None
        return partition.refine(graph, sizes)
    if isinstance(mezzanine, Partition):
        mezzanine.check_graph(graph, where="the mezzanine partition")
        for p, size in enumerate(partition.cell_sizes):
            if size not in mezzanine.cell_sizes:
                raise ValueError(f"the mezzanine partition has no level of cell size {size} (level {p} of the "
                                 f"overlay's partition; its sizes: {mezzanine.cell_sizes})")
            q = mezzanine.cell_sizes.index(size)
            if not np.array_equal(mezzanine.cells[q], partition.cells[p]):
                raise ValueError(f"the mezzanine partition's level of cell size {size} differs from level {p} of "
                                 "the overlay's partition: it must refine that partition (Partition.refine)")
        return mezzanine if mezzanine.n_levels > partition.n_levels else None
    raise TypeError(f"mezzanine must be None, a dict {{cell size: sizes}}, a Partition or False, got "
                    f"{type(mezzanine).__name__}")


class CustomizationPlan:
    """The levels one overlay's customization runs, bottom-up (the level driver; see the module docstring).

    Without mezzanine levels it runs the overlay's own topology (``identity``). With them, ``topo`` is the
    topology (:func:`gpuroute.crp.topology.build_topology`) of the refined partition: its level ``q`` is query
    level ``query_of_ext[q]`` (-1: a mezzanine level). Cliques are customized into one array in that
    topology's layout (``n_ext_clique`` entries); the query levels' slices of it (``q_slices``) are the
    overlay's cliques, equal to those of a customization without mezzanine levels.

    Trees (``tree_first`` over the customization's cells, ``tree_dtype``) are kept per level when
    :data:`gpuroute.config.CRP_KEEP_TREES`, except on a level run by microinstructions (contraction keeps no
    parents): path unpacking then walks the trees of the customization's search graphs (a query level-0
    clique arc through mezzanine clique arcs) and searches the small cells of the microcode level
    (:meth:`unpack_arrays`).

    Parameters
    ----------
    graph : RoadGraph
    partition : Partition
    turns : TurnTable
    query_topo : dict
        The overlay's topology.
    mezzanine : see :func:`resolve_mezzanine`
    micro : MicroProgram, optional
        The lowest mezzanine level's microinstructions as saved with the overlay
        (:meth:`gpuroute.Overlay.load`); used where its shared-memory size is the configured one, else built.
    """

    def __init__(self, graph, partition, turns, query_topo, mezzanine=None, micro=None):
        from . import microcode
        from .metric import RESTRICTED
        from .topology import build_topology

        t0 = time.perf_counter()
        self._edge_tails = {}  # id(topology's flat arrays) -> (its ef, edge_tails(ef)): made once per topology
        ext = resolve_mezzanine(graph, partition, mezzanine)
        L = partition.n_levels
        self.query_topo = query_topo
        self.identity = ext is None
        if ext is None:
            self.partition = partition
            self.topo = query_topo
            self.query_of_ext = np.arange(L, dtype=np.int64)
        else:
            self.partition = ext
            restricted = turns.kind == RESTRICTED
            self.topo = build_topology(graph.tail, graph.head, ext.cells, turns.first, turns.out_arc, restricted)
            qe = np.full(ext.n_levels, -1, np.int64)
            for p, size in enumerate(partition.cell_sizes):
                qe[ext.cell_sizes.index(size)] = p
            self.query_of_ext = qe
        self.ext_of_query = np.flatnonzero(self.query_of_ext >= 0)
        self.n_ext = len(self.topo["levels"])
        self.cell_sizes = tuple(self.partition.cell_sizes)
        topo = self.topo
        cb = topo["cell_base"]
        cq = topo["cq_first"]
        self.n_ext_clique = int(cq[-1])
        # the query levels' clique slices: (customization offset, query offset, length)
        qcb, qcq = query_topo["cell_base"], query_topo["cq_first"]
        self.q_slices = []
        for p, q in enumerate(self.ext_of_query):
            a, b = int(cq[cb[q]]), int(cq[cb[q + 1]])
            qa, qb = int(qcq[qcb[p]]), int(qcq[qcb[p + 1]])
            if b - a != qb - qa:
                raise AssertionError(f"level {p}: {qb - qa} clique entries in the overlay, {b - a} in the plan")
            self.q_slices.append((a, qa, b - a))
        # the same, adjacent slices merged (the copies scatter, gather and the GPU's copy back make)
        self.copy_slices = []
        for a, qa, n in self.q_slices:
            if self.copy_slices and self.copy_slices[-1][0] + self.copy_slices[-1][2] == a and \
                    self.copy_slices[-1][1] + self.copy_slices[-1][2] == qa:
                a0, qa0, n0 = self.copy_slices[-1]
                self.copy_slices[-1] = (a0, qa0, n0 + n)
            else:
                self.copy_slices.append((a, qa, n))
        # parent cell of every cell of a mezzanine level (the level above it)
        self.parent_of = [None] * self.n_ext
        for q in range(self.n_ext - 1):
            if self.query_of_ext[q] < 0:
                par = np.zeros(topo["n_cells"][q], np.int64)
                par[self.partition.cells[q]] = self.partition.cells[q + 1]
                self.parent_of[q] = par
        self.micro = None
        self.micro_seconds = 0.0
        if not self.identity and self.query_of_ext[0] < 0 and config.CRP_MICROCODE:
            t1 = time.perf_counter()
            nbytes = int(config.CRP_MICRO_SMEM_BYTES)
            if not 8 <= nbytes <= 8 << microcode.MAX_A_BITS:
                raise ValueError(f"config.CRP_MICRO_SMEM_BYTES = {nbytes}: must be in [8, {8 << microcode.MAX_A_BITS}] "
                                 "(int64 positions addressed with at most 14 bits)")
            ent_first, ex_first = topo["level_first"][0]
            if micro is not None and micro.smem_items == nbytes // 8 and micro.cell_block.size == topo["n_cells"][0]:
                self.micro = micro  # saved with the overlay (metric-independent): not built again
            else:
                self.micro = microcode.build_program(topo["levels"][0], ent_first, ex_first, cq[cb[0]:cb[1] + 1],
                                                     nbytes // 8)
            self.micro_seconds = time.perf_counter() - t1
            st = self.micro.stats
            log.info("microinstructions for %d cells of at most %d nodes: %d instructions (%d words), %d blocks, "
                     "%.1f layers per cell, built in %.1f s", st["cells"], self.cell_sizes[0], st["instructions"],
                     st["words"], st["blocks"], st["mean_layers"], self.micro_seconds)
        fl = topo["flat"]
        self.tree_first = np.zeros(int(cb[-1]) + 1, np.int64)
        if config.CRP_KEEP_TREES:
            per = np.diff(topo["ent_first"]) * np.diff(fl["vf"])
            if self.micro is not None:
                per[cb[0]:cb[1]] = 0
            np.cumsum(per, out=self.tree_first[1:])
        self.tree_dtype = np.uint16 if fl["max_edges"] + 1 < np.iinfo(np.uint16).max else np.int32
        # the layout of the trees path unpacking caches for the microcode level's cells (see unpack_arrays)
        self.mc_first = np.zeros(int(cb[-1]) + 1, np.int64)
        if self.micro is not None:
            per = np.zeros(int(cb[-1]), np.int64)
            per[cb[0]:cb[1]] = (np.diff(topo["ent_first"]) * np.diff(fl["vf"]))[cb[0]:cb[1]]
            np.cumsum(per, out=self.mc_first[1:])
        self.seconds = time.perf_counter() - t0

    # --------------------------------------------------------------------------------------- levels
    def method(self, q):
        """How level ``q`` of the plan is customized: ``"microcode"`` or ``"search"``."""
        return "microcode" if q == 0 and self.micro is not None else "search"

    def describe(self):
        """One dict per level of the plan: ``level`` (its index), ``query_level`` (None for a mezzanine
        level), ``cell_size``, ``cells``, ``method``."""
        return [{"level": q, "query_level": None if self.query_of_ext[q] < 0 else int(self.query_of_ext[q]),
                 "cell_size": int(self.cell_sizes[q]), "cells": int(self.topo["n_cells"][q]), "method": self.method(q)}
                for q in range(self.n_ext)]

    def ext_cells(self, cells_per_level):
        """Cells of every plan level to customize, from the query levels' (``None``: all of them): a
        mezzanine level recomputes every cell inside a recomputed cell of the level above it (a superset of
        the cells a change touches; their cliques are all the level above reads)."""
        out = [None] * self.n_ext
        for q in range(self.n_ext - 1, -1, -1):
            p = self.query_of_ext[q]
            if cells_per_level is None:
                out[q] = np.arange(self.topo["n_cells"][q], dtype=np.int64)
            elif p >= 0:
                out[q] = np.asarray(cells_per_level[p], np.int64)
            else:
                touched = np.zeros(self.topo["n_cells"][q + 1], bool)
                touched[out[q + 1]] = True
                out[q] = np.flatnonzero(touched[self.parent_of[q]]).astype(np.int64)
        return out

    def query_seconds(self, seconds):
        """Per query level, the seconds of the plan levels it needs (itself and the mezzanine levels under it)."""
        out = [0.0] * len(self.ext_of_query)
        p = 0
        for q, s in enumerate(seconds):
            while self.ext_of_query[p] < q:
                p += 1
            out[p] += s
        return out

    def scatter(self, clique, ext):
        """Copy the query cliques ``clique`` into their slices of the plan's array ``ext``."""
        for a, qa, n in self.copy_slices:
            ext[a:a + n] = clique[qa:qa + n]

    def gather(self, ext, clique):
        """Copy the query levels' slices of ``ext`` into ``clique`` (the overlay's layout)."""
        for a, qa, n in self.copy_slices:
            clique[qa:qa + n] = ext[a:a + n]

    def run_cpu(self, turn_cost, clique, tree, cells_per_level=None, tree_first=None):
        """Customize on the CPU: every plan level bottom-up (numba; microinstructions on a microcode level,
        a Dijkstra per entry point elsewhere).

        Parameters
        ----------
        turn_cost : int64 (T,)
            Decoded turn costs (negative: forbidden).
        clique : int64 (C,)
            The overlay's cliques, written in place; for a partial run it holds the customization it starts
            from.
        tree : uint16 or int32 (``tree_first[-1]``,)
            Trees in the plan's layout, written in place for the cells customized.
        cells_per_level : list of int64 arrays, optional
            Query-level cells to recompute (a traffic update); default all.
        tree_first : int64 (plan cells + 1,), optional
            The tree layout (default ``self.tree_first``; all zeros: no trees).

        Returns
        -------
        list of float
            Seconds per plan level.
        """
        from . import microcode

        topo = self.topo
        cb = topo["cell_base"]
        cq = topo["cq_first"]
        if self.identity:
            ext = clique
        else:
            ext = np.empty(self.n_ext_clique, np.int64)
            if cells_per_level is not None:
                self.scatter(clique, ext)
        cells = self.ext_cells(cells_per_level)
        tf = self.tree_first if tree_first is None else tree_first
        times = []
        for q, lg in enumerate(topo["levels"]):
            cs = cells[q]
            t0 = time.perf_counter()
            if cs.size:
                if q == 0 and self.micro is not None:
                    microcode.run(self.micro, turn_cost, ext, None if cells_per_level is None else self.micro.blocks_of(cs))
                else:
                    ent_first, ex_first = topo["level_first"][q]
                    customize_level(cs, lg.vert_first, lg.e_first, lg.e_to, lg.e_ref, ent_first, lg.ent_vert, ex_first,
                                    lg.ex_vert, cq[cb[q]:cb[q + 1] + 1], turn_cost, ext, ext,
                                    tf[cb[q]:cb[q + 1] + 1], tree)
            times.append(time.perf_counter() - t0)
        if not self.identity:
            self.gather(ext, clique)
        return times

    # --------------------------------------------------------------------------------------- unpacking
    def unpack_arrays(self, tree_first, tree, clique, turn_cost, refs, cache=None):
        """What :func:`unpack` reads for one path: ``(refs, args)`` with ``args`` its arguments from
        ``cq_first`` to ``mc_have`` (``etail``: :func:`edge_tails`, made once per topology).

        With mezzanine levels and trees, the plan's topology (its trees; the query path's clique references
        moved to the plan's positions; no clique value is read, so ``clique`` is not needed): the cells of a
        microcode level have no trees, and are searched, their trees kept in ``cache`` (a dict the caller
        owns, one per thread; emptied when ``tree`` -- the customization -- changes) for the next paths.
        Otherwise the overlay's topology, its cliques and ``tree_first`` (no trees: cells are searched).
        """
        qt = self.query_topo
        none = np.zeros(1, np.uint8)
        if self.identity or tree.size == 0 or int(tree_first[-1]) == 0:
            t = qt
            tf = tree_first if self.identity else np.zeros(int(qt["cell_base"][-1]) + 1, np.int64)
            mc_first = np.zeros(tf.size, np.int64)
            mc_tree, mc_have = tree[:0], none
        else:
            t = self.topo
            tf = tree_first
            refs = np.asarray(refs, np.int64).copy()
            neg = refs < 0
            if neg.any():
                pos = -refs[neg] - 1
                qa = np.array([x[1] for x in self.q_slices], np.int64)
                shift = np.array([x[0] - x[1] for x in self.q_slices], np.int64)
                lv = np.searchsorted(qa, pos, side="right") - 1
                refs[neg] = -(pos + shift[lv]) - 1
            clique = np.zeros(1, np.int64)
            mc_first = self.mc_first
            if cache is None or int(mc_first[-1]) == 0:
                mc_first = np.zeros_like(mc_first)
                mc_tree, mc_have = tree[:0], none
            else:
                if cache.get("tree") is not tree:  # another customization: forget the cached trees
                    if "mc_tree" not in cache:
                        cache["mc_tree"] = np.zeros(int(mc_first[-1]), self.tree_dtype)
                        cache["mc_have"] = np.zeros(int(t["ent_first"][-1]), np.uint8)
                    cache["mc_have"][:] = 0
                    cache["tree"] = tree
                mc_tree, mc_have = cache["mc_tree"], cache["mc_have"]
        fl = t["flat"]
        tails = self._edge_tails
        hit = tails.get(id(fl))
        if hit is None or hit[0] is not fl["ef"]:
            hit = tails[id(fl)] = (fl["ef"], edge_tails(fl["ef"]))
        return refs, (t["cq_first"], t["cell_base"], t["ex_first"], t["ex_arc"], fl["vf"], fl["vh"], fl["vx"], fl["ef"],
                      fl["eto"], fl["eref"], hit[1], turn_cost, clique, tf, tree, t["ent_first"], mc_first, mc_tree,
                      mc_have)

    def unpack_buffer_sizes(self):
        """(most vertices, most edges, levels) of a cell over both topologies: :func:`unpack`'s buffers."""
        a, b = self.query_topo["flat"], self.topo["flat"]
        return (max(a["max_verts"], b["max_verts"]), max(a["max_edges"], b["max_edges"]),
                max(len(self.query_topo["levels"]), self.n_ext))
