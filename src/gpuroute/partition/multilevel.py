"""The nested multi-level partition of Customizable Route Planning.

Delling, Kobitzsch, Werneck, "Customizing Driving Directions with GPUs" (Euro-Par 2014), sec. 2: a nested
L-level partition of the nodes, built top-down, where level ``l`` has cells of at most ``U_l`` nodes and
every level-``l`` cell is a union of level-``(l-1)`` cells; the partitioner minimises the number of
boundary arcs (arcs whose ends lie in different cells). The paper uses PUNCH; this module uses one of two
well-kept partitioners instead (there is no home-made multilevel partitioner here):

``"kahip"``
    KaHIP's ``kaffpa`` (Sanders, Schulz, "Think Locally, Act Globally: Highly Balanced Graph
    Partitioning", SEA 2013) through the ``kahip`` PyPI package (``pip install kahip`` or
    ``gpuroute[crp]``), on the symmetrised simple undirected graph: self-loops dropped, the arcs
    ``u -> v`` and ``v -> u`` merged into one edge ``{u, v}`` whose weight is the number of directed
    arcs it stands for (1 or 2), so that kaffpa's edge cut is exactly the number of boundary arcs. The
    whole graph is cut into ``k`` blocks (the fewest for which kaffpa's balance bound
    ``(1 + imbalance) * ceil(n / k)`` is at most ``U_top``), then each cell's induced subgraph into
    blocks of at most the next finer bound, and so on; a block over its bound is cut again.
``"inertial"``
    Inertial flow (Schild, Sommer, "On Balanced Separators in Road Networks", SEA 2015) on the node
    coordinates: recursive bisection, each bisection the best of four directions (x, y, x + y, x - y):
    nodes sorted by their projection, the first and the last fraction ``b = 0.25`` tied to a super
    source and a super sink, a minimum cut by maximum flow with unit capacities per undirected edge
    (:func:`scipy.sparse.csgraph.maximum_flow`, Dinic), the source side being the nodes reachable from
    the source in the residual graph; the smallest cut wins (ties: the more balanced). Cells are bisected
    until every piece fits the bound of the level below.

Both work on the induced subgraph of one cell at a time. Disconnected pieces inside a cell are allowed.
Cell ids of each level are dense (``0 .. n_cells[l] - 1``) and nested cells are contiguous: the
level-``(l-1)`` cells of a level-``l`` cell have consecutive ids, in the order of their parents.

Saved as a directory (format ``"gpuroute-crp-partition"``) of ``cells.npy`` plus ``manifest.json`` with
the file's SHA-256, the topology fingerprint of the graph and the SHA-256 of every manifest field
(:mod:`gpuroute.store`: written atomically, checked on load like every saved artefact).

The partition depends on the topology only (CRP's metric independence): its :attr:`Partition.fingerprint`
hashes the CSR arrays ``first_out`` and ``head``, not the weights, so one partition serves every metric
of a graph (e.g. ``ny`` and ``ny-time``).
"""
from __future__ import annotations

import logging
import math
import numbers
import os
import time
from collections.abc import Sequence

import numpy as np

# scipy.sparse is imported where a partition is built (~0.1 s): loading a saved partition -- a served
# dataset's overlay -- needs none of it (issue 20: start to first answer)
from .. import config, store
from ..graph.errors import ParseError

__all__ = ["Partition", "METHODS", "KAHIP_MODES", "FORMAT", "FORMAT_VERSION", "INERTIAL_FRACTION",
           "topology_fingerprint", "symmetric_adjacency"]

log = logging.getLogger(__name__)

#: Partitioners :meth:`Partition.build` knows.
METHODS = ("kahip", "inertial")
#: kaffpa's preconfigurations by name (the ``kahip`` module's FAST, ECO, STRONG).
KAHIP_MODES = ("fast", "eco", "strong")
#: Inertial flow's source/sink fraction ``b`` (Schild and Sommer use 0.25).
INERTIAL_FRACTION = 0.25
FORMAT = "gpuroute-crp-partition"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
CELLS_FILE = "cells.npy"
#: Inertial flow's four projection directions (x, y, x + y, x - y).
DIRECTIONS = ((1.0, 0.0), (0.0, 1.0), (1.0, 1.0), (1.0, -1.0))


# --------------------------------------------------------------------------------------------- helpers
def _sha256_bytes(*arrays):
    return store.sha256_arrays(*arrays)


def topology_fingerprint(graph):
    """SHA-256 (hex, first 16 characters) of a graph's node and arc counts and CSR arrays ``first_out``
    and ``head`` (int64), not of its weights: what a partition depends on.

    Parameters
    ----------
    graph : RoadGraph

    Returns
    -------
    str
    """
    n, m = graph.n_nodes, graph.n_arcs
    return _sha256_bytes(np.array([n, m], dtype=np.int64), np.asarray(graph.first_out, dtype=np.int64),
                         np.asarray(graph.head, dtype=np.int64))[:16]


def symmetric_adjacency(graph):
    """The symmetrised simple undirected graph of a road graph, as a symmetric CSR matrix.

    Self-loops are dropped; ``A[u, v] = A[v, u]`` = the number of directed arcs between ``u`` and ``v``
    in either direction (1 or 2 for a graph whose parallel arcs were merged, as a RoadGraph's are).

    Parameters
    ----------
    graph : RoadGraph

    Returns
    -------
    scipy.sparse.csr_matrix of int32, shape (n_nodes, n_nodes)
        Sorted indices, no explicit zeros, empty diagonal.
    """
    import scipy.sparse as sp

    n = graph.n_nodes
    t = np.asarray(graph.tail, dtype=np.int64)
    h = np.asarray(graph.head, dtype=np.int64)
    keep = t != h
    a = sp.csr_matrix((np.ones(int(keep.sum()), dtype=np.int32), (t[keep], h[keep])), shape=(n, n))
    a = (a + a.T).tocsr()
    a.sum_duplicates()
    a.sort_indices()
    return a.astype(np.int32)


def _check_cell_sizes(cell_sizes):
    if isinstance(cell_sizes, (str, bytes)) or not isinstance(cell_sizes, (Sequence, np.ndarray)):
        raise ValueError(f"cell_sizes must be a sequence of ints (finest level first), got {cell_sizes!r}")
    sizes = list(cell_sizes)
    if not sizes:
        raise ValueError("cell_sizes must name at least one level (e.g. (256, 4096, 65536))")
    for s in sizes:
        if isinstance(s, (bool, np.bool_)) or not isinstance(s, numbers.Integral):
            raise ValueError(f"cell_sizes must hold ints, got {s!r} in {tuple(sizes)!r}")
        if s < 2:
            raise ValueError(f"every cell size must be at least 2 nodes, got {int(s)} in {tuple(sizes)!r}")
    sizes = tuple(int(s) for s in sizes)
    if any(b <= a for a, b in zip(sizes, sizes[1:], strict=False)):
        raise ValueError(f"cell_sizes must be strictly increasing (finest level first), got {sizes!r}")
    return sizes


def _import_kahip():
    from ..extras import require

    return require("kahip", "Partition.build(method='kahip')")


# --------------------------------------------------------------------------------------------- kahip
def _kahip_blocks(n, bound, imbalance):
    """The fewest blocks ``k`` for which kaffpa's bound ``floor((1 + imbalance) * ceil(n / k))`` is at
    most ``bound``."""
    k = max(2, math.ceil(n / bound))
    while math.floor((1.0 + imbalance) * math.ceil(n / k)) > bound:
        k += 1
    return min(k, n)


def _kahip_split(kahip, a, bound, imbalance, seed, mode, stats):
    """Local node sets (sorted int64 arrays) of the pieces of the graph ``a`` (symmetric CSR), each of at
    most ``bound`` nodes; a kaffpa block over the bound is cut again."""
    n = a.shape[0]
    if n <= bound:
        return [np.arange(n, dtype=np.int64)]
    k = _kahip_blocks(n, bound, imbalance)
    if a.nnz == 0:  # no edges: any split cuts nothing
        blocks = np.arange(n, dtype=np.int64) * k // n
    else:
        _, blocks = kahip.kaffpa(np.ones(n, dtype=np.int32), a.indptr.astype(np.int32), a.data.astype(np.int32),
                                 a.indices.astype(np.int32), int(k), float(imbalance), True, int(seed), int(mode))
        blocks = np.asarray(blocks, dtype=np.int64)
        stats["kaffpa_calls"] += 1
    order = np.argsort(blocks, kind="stable")
    counts = np.bincount(blocks, minlength=k)
    out = []
    for idx in np.split(order, np.cumsum(counts)[:-1]):
        if idx.size == 0:
            continue
        if idx.size > bound:
            stats["resplits"] += 1
            if idx.size == n:  # kaffpa gave everything to one block: cut it in index order instead
                sub = [idx[i * idx.size // k:(i + 1) * idx.size // k] for i in range(k)]
                out.extend(s for s in sub if s.size)
                continue
            sub_a = a[idx][:, idx]
            out.extend(idx[p] for p in _kahip_split(kahip, sub_a, bound, imbalance, seed, mode, stats))
        else:
            out.append(idx)
    return out


def _kahip_split_weighted(kahip, a, w, bound, imbalance, seed, mode, stats):
    """Local index sets (sorted int64 arrays) of the pieces of the graph ``a`` (symmetric CSR) whose vertices
    weigh ``w`` (int64, each at most ``bound``): every piece weighs at most ``bound``. kaffpa with vertex
    weights; a block over the bound is cut again; where kaffpa leaves everything in one block, the
    vertices are cut in index order by their cumulative weight."""
    n = a.shape[0]
    total = int(w.sum())
    if total <= bound:
        return [np.arange(n, dtype=np.int64)]
    k = min(_kahip_blocks(total, bound, imbalance), n)
    blocks = None
    if a.nnz and k > 1:
        _, blocks = kahip.kaffpa(w.astype(np.int32), a.indptr.astype(np.int32), a.data.astype(np.int32),
                                 a.indices.astype(np.int32), int(k), float(imbalance), True, int(seed), int(mode))
        blocks = np.asarray(blocks, dtype=np.int64)
        stats["kaffpa_calls"] += 1
    if blocks is None or np.unique(blocks).size == 1:
        # greedy cut in index order: a piece closes before it would pass the bound
        blocks = np.zeros(n, np.int64)
        acc, b = 0, 0
        for i in range(n):
            if acc + int(w[i]) > bound:
                b += 1
                acc = 0
            blocks[i] = b
            acc += int(w[i])
        return [np.flatnonzero(blocks == j) for j in range(b + 1)]
    out = []
    for j in range(int(blocks.max()) + 1):
        idx = np.flatnonzero(blocks == j)
        if idx.size == 0:
            continue
        if int(w[idx].sum()) > bound:
            stats["resplits"] += 1
            sub = _kahip_split_weighted(kahip, a[idx][:, idx], w[idx], bound, imbalance, seed, mode, stats)
            out.extend(idx[p] for p in sub)
        else:
            out.append(idx)
    return out


def _check_mezzanine(mezzanine, cell_sizes):
    """``mezzanine`` as a tuple (one per level) of strictly increasing size tuples, each between the sizes
    of the levels around it; ValueError naming the level and size otherwise."""
    if isinstance(mezzanine, (str, bytes)) or not isinstance(mezzanine, (Sequence, np.ndarray)):
        raise ValueError(f"mezzanine must be a sequence (one entry per level) of sequences of cell sizes, got "
                         f"{mezzanine!r}")
    mz = list(mezzanine)
    if len(mz) != len(cell_sizes):
        raise ValueError(f"mezzanine has {len(mz)} entries, the partition {len(cell_sizes)} levels "
                         f"(cell_sizes {tuple(cell_sizes)}): one entry per level, () for none")
    out = []
    for lvl, sizes in enumerate(mz):
        if isinstance(sizes, (str, bytes)) or not isinstance(sizes, (Sequence, np.ndarray)):
            raise ValueError(f"mezzanine[{lvl}] must be a sequence of cell sizes, got {sizes!r}")
        sizes = list(sizes)
        for s in sizes:
            if isinstance(s, (bool, np.bool_)) or not isinstance(s, numbers.Integral):
                raise ValueError(f"mezzanine[{lvl}] must hold ints, got {s!r}")
        sizes = tuple(int(s) for s in sizes)
        lo = cell_sizes[lvl - 1] if lvl else 1
        for s in sizes:
            if not lo < s < cell_sizes[lvl]:
                raise ValueError(f"mezzanine[{lvl}] size {s}: must lie strictly between {lo} and "
                                 f"{cell_sizes[lvl]} (the cell sizes of the levels around it)")
        if any(b <= a for a, b in zip(sizes, sizes[1:], strict=False)):
            raise ValueError(f"mezzanine[{lvl}] = {sizes}: sizes must be strictly increasing")
        out.append(sizes)
    return tuple(out)


# --------------------------------------------------------------------------------------------- inertial
def _planar_coords(graph):
    """Node coordinates as planar x/y: lon/lat degrees scaled by cos(mean latitude) (equirectangular)."""
    xy = np.array(graph.coords, dtype=np.float64)
    if not graph.is_planar and xy.size:
        xy[:, 0] *= math.cos(math.radians(float(np.mean(xy[:, 1]))))
    return xy


def _inertial_bisect(a, xy, b, stats):
    """Best inertial-flow bisection of the graph ``a`` (symmetric CSR, k >= 2 nodes): a boolean mask of
    the source side (never empty, never everything)."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import breadth_first_order, maximum_flow

    k = a.shape[0]
    s = min(max(1, int(b * k)), k // 2)
    cap = a.copy()
    cap.data = np.ones(cap.nnz, dtype=np.int32)
    big = np.int32(min(cap.nnz + 1, np.iinfo(np.int32).max))
    coo = cap.tocoo()
    best = None
    for dx, dy in DIRECTIONS:
        order = np.argsort(xy[:, 0] * dx + xy[:, 1] * dy, kind="stable")
        src, snk = order[:s], order[k - s:]
        rows = np.concatenate([coo.row, np.full(s, k), snk]).astype(np.int32)
        cols = np.concatenate([coo.col, src, np.full(s, k + 1)]).astype(np.int32)
        data = np.concatenate([coo.data, np.full(2 * s, big, dtype=np.int32)])
        g = sp.csr_matrix((data, (rows, cols)), shape=(k + 2, k + 2))
        g.sort_indices()
        res = maximum_flow(g, k, k + 1, method="dinic")
        stats["max_flows"] += 1
        r = (g - res.flow).tocsr()
        r.data = (r.data > 0).astype(np.int32)
        r.eliminate_zeros()
        reached = breadth_first_order(r, k, directed=True, return_predecessors=False)
        side = np.zeros(k + 2, dtype=bool)
        side[reached] = True
        side = side[:k]
        size = int(side.sum())
        key = (int(res.flow_value), -min(size, k - size))
        if best is None or key < best[0]:
            best = (key, side)
    return best[1]


def _inertial_split(a, xy, bound, b, stats):
    """Local node sets (sorted int64 arrays) of the pieces of ``a`` (recursive inertial-flow bisection
    until every piece has at most ``bound`` nodes), in depth-first order."""
    n = a.shape[0]
    if n <= bound:
        return [np.arange(n, dtype=np.int64)]
    side = _inertial_bisect(a, xy, b, stats)
    out = []
    for half in (np.flatnonzero(side), np.flatnonzero(~side)):
        sub = a[half][:, half]
        out.extend(half[p] for p in _inertial_split(sub, xy[half], bound, b, stats))
    return out


# --------------------------------------------------------------------------------------------- Partition
class Partition:
    """A nested multi-level partition of a road graph's nodes (Customizable Route Planning).

    Delling, Kobitzsch, Werneck, "Customizing Driving Directions with GPUs" (Euro-Par 2014), sec. 2. Build
    one with :meth:`build`, or read one with :meth:`load`.

    Parameters
    ----------
    cells : array_like of int, shape (L, n_nodes)
        Row ``l``: the level-``l`` cell id of every node (level 0 is the finest). Ids of each level must
        be dense (``0 .. n_cells[l] - 1``) and nested (the nodes of a level-``(l-1)`` cell share one
        level-``l`` cell).
    cell_sizes : sequence of int, length L
        The bound ``U_l`` of each level, strictly increasing.
    method : str
        The partitioner that made it.
    fingerprint : str
        :func:`topology_fingerprint` of the graph it was built for.
    meta : dict, optional

    Attributes
    ----------
    cells : ndarray of int32, shape (L, n_nodes)
    cell_sizes : tuple of int
    n_cells : tuple of int
        Cells per level.
    method : str
    fingerprint : str
    meta : dict
        ``seed``, ``seconds`` (wall time of the build), ``boundary_arcs`` (list, per level), ``imbalance``,
        ``graph`` (name), ``graph_fingerprint`` (:meth:`RoadGraph.fingerprint`, with the weights), and the
        partitioner's settings and counters.

    Raises
    ------
    ValueError
        ``cells`` is not (L, n) with L = len(cell_sizes), or its ids are not dense or not nested.
    """

    def __init__(self, cells, cell_sizes, method, fingerprint, meta=None):
        self.cell_sizes = _check_cell_sizes(cell_sizes)
        cells = np.asarray(cells)
        if cells.ndim != 2 or cells.shape[0] != len(self.cell_sizes):
            raise ValueError(f"cells has shape {cells.shape}, expected ({len(self.cell_sizes)}, n_nodes): one row "
                             "per level of cell_sizes")
        if cells.dtype.kind not in "iu":
            raise ValueError(f"cells has dtype {cells.dtype}, expected integers")
        self.cells = np.ascontiguousarray(cells, dtype=np.int32)
        self.n_cells = self._check_structure(self.cells)
        self.method = str(method)
        self.fingerprint = str(fingerprint)
        self.meta = dict(meta or {})
        self._refined = {}  # refine()'s results by (mezzanine, seed, imbalance, mode)

    @staticmethod
    def _check_structure(cells):
        """Dense ids per level and nesting; returns the number of cells per level."""
        n_cells = []
        n = cells.shape[1]
        for lvl, row in enumerate(cells):
            if n == 0:
                n_cells.append(0)
                continue
            lo, hi = int(row.min()), int(row.max())
            if lo < 0 or np.unique(row).size != hi + 1:
                raise ValueError(f"level {lvl}: cell ids must be dense 0..n_cells-1 (got ids {lo}..{hi}, "
                                 f"{np.unique(row).size} distinct)")
            n_cells.append(hi + 1)
        for lvl in range(1, cells.shape[0]):
            parent = np.full(n_cells[lvl - 1], -1, dtype=np.int64)
            parent[cells[lvl - 1]] = cells[lvl]
            if np.any(parent[cells[lvl - 1]] != cells[lvl]):
                raise ValueError(f"not nested: a level-{lvl - 1} cell spans several level-{lvl} cells")
        return tuple(n_cells)

    # ------------------------------------------------------------------------------------------ build
    @classmethod
    def build(cls, graph, *, cell_sizes=None, method=None, seed=0, imbalance=0.03):
        """Partition ``graph`` top-down into a nested multi-level partition.

        Parameters
        ----------
        graph : RoadGraph
        cell_sizes : sequence of int, optional
            Most nodes per cell of each level, finest first, strictly increasing, each at least 2.
            Default: :data:`gpuroute.config.CRP_CELL_SIZES`.
        method : {"kahip", "inertial"}, optional
            Default: :data:`gpuroute.config.CRP_PARTITION_METHOD`. ``"kahip"`` runs kaffpa in the mode
            :data:`gpuroute.config.CRP_KAHIP_MODE`; ``"inertial"`` needs ``graph.coords``.
        seed : int
            kaffpa's seed (inertial flow is deterministic and ignores it). The same seed gives the same
            partition.
        imbalance : float
            kaffpa's allowed imbalance ``epsilon`` in ``[0, 1)``: blocks of at most
            ``(1 + epsilon) * ceil(n / k)`` nodes, ``k`` chosen so that this fits the level's bound.

        Returns
        -------
        Partition
            ``cells`` int32 (L, n_nodes) with every level-``l`` cell of at most ``cell_sizes[l]`` nodes.

        Raises
        ------
        ValueError
            Bad ``cell_sizes``, an unknown ``method`` (the message lists the valid ones), ``imbalance``
            outside ``[0, 1)``, or ``method="inertial"`` on a graph without coordinates.
        ImportError
            ``method="kahip"`` without the ``kahip`` package (``pip install kahip`` or ``gpuroute[crp]``).
        """
        sizes = _check_cell_sizes(config.CRP_CELL_SIZES if cell_sizes is None else cell_sizes)
        method = config.CRP_PARTITION_METHOD if method is None else method
        if method not in METHODS:
            raise ValueError(f"unknown partition method {method!r}; valid: {', '.join(map(repr, METHODS))}")
        if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, numbers.Integral):
            raise ValueError(f"seed must be an int, got {seed!r}")
        if isinstance(imbalance, (bool, np.bool_)) or not isinstance(imbalance, numbers.Real) \
                or not 0.0 <= float(imbalance) < 1.0:
            raise ValueError(f"imbalance must be a number in [0, 1), got {imbalance!r}")
        imbalance = float(imbalance)
        stats = {"kaffpa_calls": 0, "resplits": 0, "max_flows": 0}
        meta = {"seed": int(seed), "imbalance": imbalance}
        if method == "kahip":
            kahip = _import_kahip()
            mode_name = str(config.CRP_KAHIP_MODE).lower()
            if mode_name not in KAHIP_MODES:
                raise ValueError(f"config.CRP_KAHIP_MODE is {config.CRP_KAHIP_MODE!r}; valid: "
                                 f"{', '.join(map(repr, KAHIP_MODES))}")
            mode = getattr(kahip, mode_name.upper())
            meta.update(kahip_mode=mode_name, kahip_version=getattr(kahip, "__version__", None),
                        edge_weights="multiplicity (directed arcs per undirected edge)")

            def split(a, nodes, bound):
                return _kahip_split(kahip, a, bound, imbalance, seed, mode, stats)
        else:
            if graph.coords is None:
                raise ValueError(f"method='inertial' needs node coordinates and graph {graph.name!r} has none; "
                                 "use method='kahip' (no coordinates needed)")
            xy = _planar_coords(graph)
            meta.update(inertial_fraction=INERTIAL_FRACTION, capacities="unit per undirected edge")

            def split(a, nodes, bound):
                return _inertial_split(a, xy[nodes], bound, INERTIAL_FRACTION, stats)

        t0 = time.perf_counter()
        n = graph.n_nodes
        big = symmetric_adjacency(graph)
        levels = len(sizes)
        cells = np.zeros((levels, n), dtype=np.int32)
        parents = [np.arange(n, dtype=np.int64)] if n else []
        for lvl in range(levels - 1, -1, -1):
            children = []
            for nodes in parents:
                a = big if nodes.size == n else big[nodes][:, nodes]
                for part in split(a, nodes, sizes[lvl]):
                    children.append(nodes[part])
            for cid, nodes in enumerate(children):
                cells[lvl, nodes] = cid
            parents = children
        seconds = time.perf_counter() - t0
        meta.update(stats)
        part = cls(cells, sizes, method, topology_fingerprint(graph), meta)
        part.meta.update(seconds=seconds, boundary_arcs=part.boundary_arcs(graph).tolist(),
                         graph=graph.name, graph_fingerprint=graph.fingerprint(),
                         n_arcs=int(graph.n_arcs))
        return part

    # ------------------------------------------------------------------------------------------ queries
    @property
    def n_levels(self):
        """Number of levels L."""
        return self.cells.shape[0]

    @property
    def n_nodes(self):
        """Nodes partitioned."""
        return self.cells.shape[1]

    def cell_node_counts(self, level):
        """Nodes per cell of one level.

        Returns
        -------
        ndarray of int64, shape (n_cells[level],)
        """
        return np.bincount(self.cells[level], minlength=self.n_cells[level]).astype(np.int64)

    def boundary_arcs(self, graph):
        """Directed arcs whose tail and head lie in different cells, per level.

        Parameters
        ----------
        graph : RoadGraph
            The graph partitioned (same node count).

        Returns
        -------
        ndarray of int64, shape (L,)
            Self-loops are never boundary arcs.

        Raises
        ------
        ValueError
            ``graph`` has another number of nodes.
        """
        if graph.n_nodes != self.n_nodes:
            raise ValueError(f"the partition has {self.n_nodes} nodes, graph {graph.name!r} {graph.n_nodes}")
        t = np.asarray(graph.tail, dtype=np.int64)
        h = np.asarray(graph.head, dtype=np.int64)
        return np.array([int(np.count_nonzero(row[t] != row[h])) for row in self.cells], dtype=np.int64)

    def refine(self, graph, mezzanine, *, seed=0, imbalance=0.03, mode=None):
        """This partition with **mezzanine levels** inserted: finer nested levels whose cliques only speed up
        customization of the level above them (Delling, Kobitzsch, Werneck, Euro-Par 2014, sec. 3,
        "mezzanine levels"; queries never see them).

        A mezzanine level of size ``s`` under level ``l`` splits every cell of the level above it (level
        ``l``, or a coarser mezzanine level under ``l``) into cells of at most ``s`` nodes that are unions of
        level-``(l - 1)`` cells (of nodes for ``l = 0``): kaffpa on the quotient graph of those units,
        weighted by their node counts (edge weights: the arcs between them). The result is memoised on
        this object per argument set.

        Parameters
        ----------
        graph : RoadGraph
            The graph partitioned.
        mezzanine : sequence of sequences of int, one per level
            ``mezzanine[l]``: sizes of the levels inserted under level ``l``, strictly increasing, each
            strictly between ``cell_sizes[l - 1]`` (1 for ``l = 0``) and ``cell_sizes[l]``; ``()`` for none.
        seed : int
            kaffpa's seed.
        imbalance : float
            kaffpa's allowed imbalance.
        mode : {"fast", "eco", "strong"}, optional
            kaffpa's preconfiguration; default :data:`gpuroute.config.CRP_MEZZANINE_KAHIP_MODE`.

        Returns
        -------
        Partition
            Every level of this partition (rows equal) and the mezzanine levels, finest first;
            ``meta["query_levels"]`` lists the index of each of this partition's levels in it and
            ``meta["refines"]`` the SHA-256 of this partition's cells.

        Raises
        ------
        ValueError
            Bad ``mezzanine`` (named: the level and the size), or another graph.
        ImportError
            Without the ``kahip`` package.
        """
        mz = _check_mezzanine(mezzanine, self.cell_sizes)
        mode_name = str(config.CRP_MEZZANINE_KAHIP_MODE if mode is None else mode).lower()
        if mode_name not in KAHIP_MODES:
            raise ValueError(f"kaffpa mode {mode_name!r}; valid: {', '.join(map(repr, KAHIP_MODES))}")
        key = (mz, int(seed), float(imbalance), mode_name)
        memo = self._refined
        if key in memo:
            return memo[key]
        self.check_graph(graph)
        ext_rows, ext_sizes, query_levels = [], [], []
        stats = {"kaffpa_calls": 0, "resplits": 0}
        t0 = time.perf_counter()
        n = self.n_nodes
        if any(mz):
            kahip = _import_kahip()
            kmode = getattr(kahip, mode_name.upper())
            big = symmetric_adjacency(graph)
        rows_desc, sizes_desc = [], []
        for lvl in range(self.n_levels - 1, -1, -1):
            rows_desc.append(self.cells[lvl].astype(np.int64))
            sizes_desc.append(self.cell_sizes[lvl])
            query_levels.append(len(rows_desc) - 1)
            if not mz[lvl]:
                continue
            # units: the cells of the query level below (nodes under level 0)
            unit = self.cells[lvl - 1].astype(np.int64) if lvl else np.arange(n, dtype=np.int64)
            n_units = int(unit.max()) + 1 if n else 0
            import scipy.sparse as sp

            s = sp.csr_matrix((np.ones(n, np.int64), (np.arange(n), unit)), shape=(n, n_units))
            quot = (s.T @ big.astype(np.int64) @ s).tocsr()
            quot.setdiag(0)
            quot.eliminate_zeros()
            quot.sort_indices()
            weight = np.bincount(unit, minlength=n_units).astype(np.int64)
            unit_parent = np.zeros(n_units, np.int64)
            for size in sorted(mz[lvl], reverse=True):
                unit_parent[unit] = rows_desc[-1]
                order = np.argsort(unit_parent, kind="stable")
                bounds = np.searchsorted(unit_parent[order], np.arange(int(unit_parent.max()) + 2))
                new_of_unit = np.empty(n_units, np.int64)
                nid = 0
                for c in range(bounds.size - 1):
                    us = order[bounds[c]:bounds[c + 1]]
                    for piece in _kahip_split_weighted(kahip, quot[us][:, us], weight[us], size, imbalance, seed,
                                                       kmode, stats):
                        new_of_unit[us[piece]] = nid
                        nid += 1
                rows_desc.append(new_of_unit[unit])
                sizes_desc.append(size)
        nl = len(rows_desc)
        ext_rows = rows_desc[::-1]
        ext_sizes = sizes_desc[::-1]
        query_levels = sorted(nl - 1 - q for q in query_levels)
        cells = np.stack(ext_rows).astype(np.int32) if nl else np.zeros((0, n), np.int32)
        meta = {"query_levels": query_levels, "refines": _sha256_bytes(self.cells), "mezzanine": [list(x) for x in mz],
                "kahip_mode": mode_name, "seed": int(seed), "imbalance": float(imbalance),
                "seconds": time.perf_counter() - t0, **stats, "n_arcs": self.meta.get("n_arcs", graph.n_arcs),
                "graph": graph.name}
        out = Partition(cells, ext_sizes, self.method + "+mezzanine", self.fingerprint, meta)
        log.info("mezzanine levels %s: cells %s in %.1f s (kaffpa %s)", mz, out.n_cells, meta["seconds"], mode_name)
        memo[key] = out
        return out

    def __repr__(self):
        return (f"Partition(method={self.method!r}, n_nodes={self.n_nodes:,}, cell_sizes={self.cell_sizes}, "
                f"n_cells={self.n_cells})")

    # ------------------------------------------------------------------------------------------ store
    def save(self, directory):
        """Write the partition to ``directory`` atomically (``cells.npy`` + ``manifest.json``).

        Written into a temporary sibling, then renamed into place (:func:`gpuroute.store.atomic_directory`):
        an error leaves ``directory`` as it was. An existing saved partition there is replaced; a
        non-empty directory holding anything else is refused.

        Parameters
        ----------
        directory : str or path-like

        Returns
        -------
        str
            The absolute path written.

        Raises
        ------
        FileExistsError
            ``directory`` is a file, or a non-empty directory that is not a saved partition.
        OSError
            Writing failed.
        """
        from .. import __version__

        directory = store.check_replaceable(directory, (FORMAT,), "a saved partition")
        with store.atomic_directory(directory) as tmp:
            files = store.write_arrays(tmp, {CELLS_FILE: self.cells})
            store.write_manifest(tmp, {
                "format": FORMAT,
                "version": FORMAT_VERSION,
                "n_nodes": int(self.n_nodes),
                "cell_sizes": list(self.cell_sizes),
                "n_cells": list(self.n_cells),
                "method": self.method,
                "fingerprint": self.fingerprint,
                "meta": self.meta,
                "files": files,
                "created": store.manifest.now(),
                "gpuroute_version": __version__,
            }, what="partition's manifest")
        return directory

    @classmethod
    def load(cls, directory, graph=None):
        """Read a partition written by :meth:`save`.

        Every check runs before anything is returned: the manifest's format, version and field hashes;
        the files present; the SHA-256 of ``cells.npy``; its dtype and shape; dense and nested ids; with
        ``graph``, that it is the graph the partition was built for.

        Parameters
        ----------
        directory : str or path-like
        graph : RoadGraph, optional
            Checked against the recorded node and arc counts and topology fingerprint (the weights may
            differ: a partition is metric-independent).

        Returns
        -------
        Partition

        Raises
        ------
        FileNotFoundError
            ``directory`` does not exist.
        ParseError
            Naming the file: not a saved partition, another format version, a manifest field edited, a
            file missing, added, changed or truncated (checksum), of the wrong dtype or shape, ids not dense
            or not nested.
        ValueError
            ``graph`` is another graph; the message names what differs (nodes, arcs, arc arrays).
        """
        directory = os.fspath(directory)
        mpath = os.path.join(directory, MANIFEST)
        manifest = _read_manifest(directory, mpath)
        present = set(os.listdir(directory)) - {MANIFEST}
        if present != {CELLS_FILE}:
            extra, missing = sorted(present - {CELLS_FILE}), sorted({CELLS_FILE} - present)
            raise ParseError(mpath, None, f"files differ from a saved partition's: missing {missing or 'none'}, "
                                          f"not listed {extra or 'none'}")
        cpath = os.path.join(directory, CELLS_FILE)
        if not isinstance(manifest["files"].get(CELLS_FILE), dict):
            raise ParseError(mpath, None, f"'files' does not describe {CELLS_FILE}")
        store.check_file(directory, CELLS_FILE, manifest, blame=cpath)
        try:
            cells = np.load(cpath, allow_pickle=False)
        except (ValueError, OSError, EOFError) as e:
            raise ParseError(cpath, None, f"not a readable .npy array ({e})") from None
        levels = len(manifest["cell_sizes"])
        want = (levels, manifest["n_nodes"])
        if cells.dtype != np.int32 or cells.shape != want:
            raise ParseError(cpath, None, f"dtype {cells.dtype}, shape {cells.shape}: expected int32 {want}")
        try:
            part = cls(cells, manifest["cell_sizes"], manifest["method"], manifest["fingerprint"],
                       manifest.get("meta"))
        except ValueError as e:
            raise ParseError(cpath, None, str(e)) from None
        if list(part.n_cells) != manifest["n_cells"]:
            raise ParseError(mpath, None, f"n_cells {manifest['n_cells']} but the file has {list(part.n_cells)}")
        if graph is not None:
            part.check_graph(graph, where=directory)
        return part

    def check_graph(self, graph, where="the partition"):
        """Raise unless ``graph`` has the topology this partition was built for.

        Raises
        ------
        ValueError
            Naming what differs: node count, arc count, or the arc arrays (``first_out``/``head``).
        """
        problems = []
        if graph.n_nodes != self.n_nodes:
            problems.append(f"nodes: {self.n_nodes} in the partition, {graph.n_nodes} in the graph")
        m = self.meta.get("n_arcs")
        if m is not None and graph.n_arcs != m:
            problems.append(f"arcs: {m} in the partition's graph, {graph.n_arcs} in the graph")
        if not problems:
            fp = topology_fingerprint(graph)
            if fp != self.fingerprint:
                problems.append(f"arc arrays (first_out/head): topology fingerprint {self.fingerprint} recorded, "
                                f"the graph has {fp}")
        if problems:
            raise ValueError(f"{where}: built for another graph than {graph.name!r}: {'; '.join(problems)}")


def _read_manifest(directory, mpath):
    manifest = store.read_manifest(directory, format=FORMAT, versions=(FORMAT_VERSION,),
                                   required=("n_nodes", "cell_sizes", "n_cells", "method", "fingerprint", "files"),
                                   what="saved partition", remedy="rebuild the partition")
    n = manifest["n_nodes"]
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ParseError(mpath, None, f"malformed 'n_nodes' entry {n!r}")
    try:
        _check_cell_sizes(manifest["cell_sizes"])
    except ValueError as e:
        raise ParseError(mpath, None, f"malformed 'cell_sizes' entry: {e}") from None
    return manifest
