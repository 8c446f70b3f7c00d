"""Cell layouts: nodes renumbered so that cells are contiguous ranges of close nodes, arcs split into
cell-internal and boundary arcs. The cells of cell-local Bellman-Ford today; the multi-level partition of
Customizable Route Planning (Delling, Kobitzsch, Werneck, "Customizing Driving Directions with GPUs",
Euro-Par 2014, sec. 2-3) will build on this module.

Orders: breadth-first regions grown over the undirected graph (``"grow"``, no coordinates needed), or
a Hilbert curve over the coordinates (``"hilbert"``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit


def hilbert_index(x, y, order=16):
    """Hilbert-curve index of integer points.

    Parameters
    ----------
    x, y : ndarray of int, shape (k,), values in ``[0, 2**order)``
    order : int

    Returns
    -------
    ndarray of int64, shape (k,)
    """
    x = np.asarray(x, dtype=np.int64).copy()
    y = np.asarray(y, dtype=np.int64).copy()
    d = np.zeros(x.shape, dtype=np.int64)
    top = (1 << order) - 1
    s = 1 << (order - 1)
    while s > 0:
        rx = (x & s) > 0
        ry = (y & s) > 0
        d += s * s * ((3 * rx) ^ ry)
        # rotate the quadrant
        flip = ~ry
        swap_x = np.where(flip & rx, top - x, x)
        swap_y = np.where(flip & rx, top - y, y)
        x = np.where(flip, swap_y, x)
        y = np.where(flip, swap_x, y)
        s >>= 1
    return d


@njit(cache=True)
def _grown_order(first_out, adj, start, cell_size):
    """Region-growing order over the undirected adjacency (CSR ``first_out``, ``adj``): from the first
    unplaced node of a breadth-first sweep from ``start``, grow a breadth-first region over unplaced
    nodes until it holds ``cell_size`` nodes (or runs out), then start the next region."""
    n = first_out.size - 1
    placed = np.zeros(n, dtype=np.bool_)
    order = np.empty(n, dtype=np.int64)
    # seeds: a breadth-first sweep of the whole graph (every component), so regions follow each other
    sweep = np.empty(n, dtype=np.int64)
    seen = np.zeros(n, dtype=np.bool_)
    k = 0
    for root0 in range(n):
        root = (start + root0) % n
        if seen[root]:
            continue
        seen[root] = True
        sweep[k] = root
        lo = k
        k += 1
        while lo < k:
            u = sweep[lo]
            lo += 1
            for j in range(first_out[u], first_out[u + 1]):
                v = adj[j]
                if not seen[v]:
                    seen[v] = True
                    sweep[k] = v
                    k += 1
    queue = np.empty(n, dtype=np.int64)
    out = 0
    for i in range(n):
        seed = sweep[i]
        if placed[seed]:
            continue
        room = cell_size - (out % cell_size)
        placed[seed] = True
        queue[0] = seed
        qh, qt = 0, 1
        taken = 0
        while qh < qt and taken < room:
            u = queue[qh]
            qh += 1
            order[out] = u
            out += 1
            taken += 1
            for j in range(first_out[u], first_out[u + 1]):
                v = adj[j]
                if not placed[v] and qt - qh + taken < room:
                    placed[v] = True
                    queue[qt] = v
                    qt += 1
        for j in range(qh, qt):  # queued but not taken (region full): back to the pool
            placed[queue[j]] = False
    return order


def node_order(graph, cell_size=1024, method=None):
    """A locality-preserving node order: ``order[i]`` is the original id of new node ``i``.

    ``method="grow"`` (default): breadth-first regions of ``cell_size`` nodes grown over the undirected
    graph (on NY as good as or better than the Hilbert order in rounds and local iterations, and it needs
    no coordinates). ``method="hilbert"``: Hilbert curve over the coordinates. Returns int64 array of
    shape (n_nodes,).

    Raises
    ------
    ValueError
        For an unknown method, or ``"hilbert"`` on a graph without coordinates.
    """
    n = graph.n_nodes
    if method is None:
        method = "grow"
    if method == "hilbert":
        if graph.coords is None:
            raise ValueError("method='hilbert' needs node coordinates")
        if n <= 1:
            return np.arange(n, dtype=np.int64)
        c = graph.coords
        lo = c.min(axis=0)
        span = np.maximum(c.max(axis=0) - lo, 1e-12)
        q = np.minimum(((c - lo) / span * 65535.0).astype(np.int64), 65535)
        return np.argsort(hilbert_index(q[:, 0], q[:, 1]), kind="stable").astype(np.int64)
    if method != "grow":
        raise ValueError(f"method must be 'hilbert' or 'grow', got {method!r}")
    t = np.concatenate((graph.tail, graph.head)).astype(np.int64)
    h = np.concatenate((graph.head, graph.tail)).astype(np.int64)
    srt = np.argsort(t, kind="stable")
    fo = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(t, minlength=n), out=fo[1:])
    return _grown_order(fo, h[srt], 0, int(cell_size))


@dataclass
class CellLayout:
    """Renumbered graph split into cells.

    Attributes
    ----------
    cell_size : int
        Nodes per cell S (the last cell may hold fewer); cell of new node i is ``i // S``.
    order, rank : ndarray of int64, shape (n,)
        ``order[i]`` = original id of new node i; ``rank[v]`` = new id of original node v.
    lfo : ndarray of int32, shape (n + 1,)
        Internal-arc offsets per new node (CSR over all cells, cell c's arcs contiguous).
    lhd : ndarray of uint16, shape (m_internal,)
        Head of each internal arc as an index inside its cell.
    lw : ndarray of int32, shape (m_internal,)
    rfo : ndarray of int32, shape (n + 1,)
        Internal arcs again, grouped by head (the GPU kernel pulls over in-arcs).
    rtl : ndarray of uint16, shape (m_internal,)
        Tail of each internal in-arc as an index inside its cell.
    rw : ndarray of int32, shape (m_internal,)
    xfo : ndarray of int32, shape (n + 1,)
        Boundary-arc offsets per new node.
    xhd : ndarray of int32, shape (m_boundary,)
        Head (new id) of each boundary arc.
    xw : ndarray of int32, shape (m_boundary,)
    max_cell_arcs : int
        Most internal arcs in one cell (sizes the shared memory of a block).
    """

    cell_size: int
    order: np.ndarray
    rank: np.ndarray
    lfo: np.ndarray
    lhd: np.ndarray
    lw: np.ndarray
    rfo: np.ndarray
    rtl: np.ndarray
    rw: np.ndarray
    xfo: np.ndarray
    xhd: np.ndarray
    xw: np.ndarray
    max_cell_arcs: int

    @property
    def n_cells(self):
        n = self.rank.size
        return (n + self.cell_size - 1) // self.cell_size

    @property
    def boundary_fraction(self):
        m = self.lw.size + self.xw.size
        return self.xw.size / m if m else 0.0


def build_cells(graph, weight, cell_size, order=None, method=None):
    """Renumber ``graph`` and split its arcs into internal and boundary arcs of cells of ``cell_size``.

    Parameters
    ----------
    graph : RoadGraph
    weight : str or None
        Weight name (None: the default weight).
    cell_size : int
        1 .. 65536 nodes per cell.
    order : ndarray of int, shape (n,), optional
        Node order to use instead of :func:`node_order`.
    method : {"hilbert", "grow"}, optional
        :func:`node_order`'s method when ``order`` is not given.

    Returns
    -------
    CellLayout

    Raises
    ------
    ValueError
        If ``cell_size`` is out of range or ``order`` is not a permutation.
    """
    cell_size = int(cell_size)
    if not 1 <= cell_size <= 65536:
        raise ValueError(f"cell_size must be in [1, 65536], got {cell_size}")
    n = graph.n_nodes
    order = node_order(graph, cell_size, method) if order is None else np.asarray(order, dtype=np.int64)
    if order.shape != (n,) or not np.array_equal(np.sort(order), np.arange(n)):
        raise ValueError("order must be a permutation of the node ids")
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n, dtype=np.int64)
    w = graph.weight(weight)
    t = rank[graph.tail]
    h = rank[graph.head]
    srt = np.lexsort((h, t))
    t, h, w = t[srt], h[srt], w[srt]
    internal = (t // cell_size) == (h // cell_size)

    def csr(keys):
        fo = np.zeros(n + 1, dtype=np.int32)
        np.cumsum(np.bincount(keys, minlength=n), out=fo[1:])
        return fo

    lfo = csr(t[internal])
    xfo = csr(t[~internal])
    ti, hi, wi = t[internal], h[internal], w[internal]
    by_head = np.lexsort((ti, hi))
    rfo = csr(hi)
    n_cells = (n + cell_size - 1) // cell_size
    starts = np.minimum(np.arange(n_cells + 1, dtype=np.int64) * cell_size, n)
    per_cell = np.diff(lfo[starts]) if n else np.zeros(0, dtype=np.int64)
    return CellLayout(
        cell_size=cell_size, order=order, rank=rank,
        lfo=lfo, lhd=(hi % cell_size).astype(np.uint16), lw=wi.astype(np.int32),
        rfo=rfo, rtl=(ti[by_head] % cell_size).astype(np.uint16), rw=wi[by_head].astype(np.int32),
        xfo=xfo, xhd=h[~internal].astype(np.int32), xw=w[~internal].astype(np.int32),
        max_cell_arcs=int(per_cell.max()) if per_cell.size else 0,
    )


def layout(graph, weight, cell_size, method=None):
    """The :class:`CellLayout` of (graph, weight, cell_size, method), built once per graph (kept in the
    graph's derived-structure cache, :meth:`gpuroute.graph.RoadGraph.derived`)."""
    name = graph.default_weight if weight is None else weight
    return graph.derived(("cell_layout", name, int(cell_size), method),
                         lambda: build_cells(graph, name, cell_size, method=method))
