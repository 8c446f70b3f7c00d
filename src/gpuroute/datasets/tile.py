"""``tile()``: a synthetic scale proxy made of kx x ky copies of a real road network joined at their borders.

The shipped networks are small (NY: 264k nodes). To time algorithms at continental scale without
continental data, :func:`tile` lays copies of a real graph side by side on a grid and joins each pair of
neighbouring copies with a few two-way arcs between nodes near their shared border. Inside every copy
the network is the real one, so local structure (degrees, arc lengths, the hierarchy of roads that CH and
CRP exploit) is real; the long-range structure is not, which is why the result is marked synthetic.
"""
from __future__ import annotations

import math

import numpy as np

from ..graph.constants import INDEX_DTYPE, MAX_WEIGHT, WEIGHT_DTYPE
from ..graph.errors import GraphError
from ..graph.road_graph import RoadGraph

__all__ = ["tile", "BORDER_STRIP_FRACTION"]

#: Border nodes are picked among those within this fraction of the box's side from the shared border
#: (widened when fewer candidates than joins lie there).
BORDER_STRIP_FRACTION = 0.02


def _lengths(x1, y1, x2, y2, planar):
    """Straight-line lengths: great-circle metres for lon/lat, Euclidean units for planar."""
    if planar:
        return np.hypot(x2 - x1, y2 - y1)
    from ..geo import haversine_m

    return haversine_m(x1, y1, x2, y2)


def _points3(x, y, planar):
    """Points for a k-d tree whose Euclidean nearest neighbour is the true (great-circle) nearest."""
    if planar:
        return np.column_stack((x, y))
    from ..geo import unit_vectors

    return unit_vectors(x, y)


def _border_nodes(cand, depth, along, lo, side, k):
    """Up to ``k`` candidate nodes near one border, spread along it.

    ``depth`` is each candidate's distance from the border (coordinate units), ``along`` its position
    along the border, ``lo``/``side`` the border's start and length. The border is cut into ``k`` equal
    bins and in each bin the node nearest to the border (within the strip) is chosen.
    """
    if cand.size == 0:
        return cand
    k = min(k, cand.size)
    strip = BORDER_STRIP_FRACTION * side
    kth = np.partition(depth, k - 1)[k - 1]
    inside = depth <= max(strip, kth)
    c, d, a = cand[inside], depth[inside], along[inside]
    if side > 0:
        bins = np.minimum(((a - lo) / side * k).astype(np.int64), k - 1)
    else:
        bins = np.zeros(c.size, dtype=np.int64)
    order = np.lexsort((c, d, bins))
    _, first = np.unique(bins[order], return_index=True)
    return np.sort(c[order[first]])


def _pair(src, dst, x, y, dx, dy, planar):
    """Pair every node of ``src`` with the nearest node of ``dst`` shifted by ``(dx, dy)``."""
    from scipy.spatial import cKDTree

    tree = cKDTree(_points3(x[dst] + dx, y[dst] + dy, planar))
    _, j = tree.query(_points3(x[src], y[src], planar))
    return src, dst[np.asarray(j)]


def tile(graph, kx, ky, *, name=None, joins_per_border=None):
    """Lay ``kx * ky`` copies of a road network on a grid and join neighbouring copies.

    Parameters
    ----------
    graph : RoadGraph
        A real network with coordinates (lon/lat degrees or planar).
    kx, ky : int
        Copies along x (longitude, east) and y (latitude, north); both >= 1.
    name : str, optional
        Default ``f"{graph.name}-tiled-{kx}x{ky}"``.
    joins_per_border : int, optional
        Two-way joins between each pair of neighbouring copies; default ``max(1, round(sqrt(n) / 4))``
        (NY: 129). Fewer are made where the border has fewer candidate nodes.

    Returns
    -------
    RoadGraph
        ``kx * ky * n`` nodes. Copy ``(i, j)`` (column ``i``, row ``j``) holds nodes
        ``(j * kx + i) * n + v`` for the base nodes ``v``, with coordinates shifted by ``(i * W, j * H)``
        where ``W x H`` is the base graph's bounding box, so copies sit side by side. Arcs: every base
        arc in every copy, plus the joins. Arcs are in CSR order sorted by (tail, head) when the base
        graph's are (as after :meth:`RoadGraph.from_arcs`); there are no self-loops or parallel arcs.
        ``node_ids`` is None; ``meta`` says it is a synthetic scale proxy and records ``kx``, ``ky``,
        the base graph's name and fingerprint, the number of join arcs, their median and largest
        length, and the weight-per-length ratios used.

    Notes
    -----
    Joins. The base graph's border nodes are chosen once: among the nodes of its largest strongly
    connected component, those within ``BORDER_STRIP_FRACTION`` of the box's side from the east
    (west, north, south) border; the border is cut into ``joins_per_border`` bins and the node nearest
    to the border in each bin is taken. Each east-border node of a copy is paired with the nearest
    west-border node of the copy to its east (likewise north with south), and arcs are added both ways.
    So the largest SCCs of all copies merge into one and no SCC is split.

    Join weights are realistic for every weight of the graph: ``w = max(1, round(r * len))`` where
    ``len`` is the join's great-circle length in metres (planar: Euclidean length) and ``r`` the median
    of ``w(a) / len(a)`` over the base graph's arcs of positive length (the weight's units per metre,
    e.g. ~10 for the DIMACS distance unit of ~0.1 m).

    The result is built straight into CSR form with vectorised NumPy (no sort of all arcs, no Python
    loop over nodes): NY 8 x 8 (16.9M nodes, ~46.7M arcs) needs about 1.5 GB beside the base graph.

    Raises
    ------
    ValueError
        The graph has no coordinates or no nodes; ``kx`` or ``ky`` < 1; lon/lat copies would leave
        ``[-180, 180] x [-90, 90]``; no arc has positive length (no weight-per-length ratio).
    GraphError
        The tiled graph would exceed the int32 id space.
    """
    if graph.coords is None:
        raise ValueError(f"tile() needs node coordinates to lay copies side by side; "
                         f"graph {graph.name!r} has none")
    kx, ky = int(kx), int(ky)
    if kx < 1 or ky < 1:
        raise ValueError(f"kx and ky must be >= 1, got {kx} x {ky}")
    n, m = graph.n_nodes, graph.n_arcs
    if n == 0:
        raise ValueError(f"graph {graph.name!r} has no nodes to tile")
    n_copies = kx * ky
    lim = np.iinfo(INDEX_DTYPE).max
    if n * n_copies >= lim or m * n_copies >= lim:
        raise GraphError(f"tiling {graph.name!r} {kx}x{ky} gives {n * n_copies:,} nodes / {m * n_copies:,} "
                         "base arcs, beyond the int32 id space")
    planar = graph.coord_system == "planar"
    x = graph.coords[:, 0]
    y = graph.coords[:, 1]
    x0, x1, y0, y1 = float(x.min()), float(x.max()), float(y.min()), float(y.max())
    W, H = x1 - x0, y1 - y0
    fallback = max(W, H) if max(W, H) > 0 else (1e-3 if not planar else 1.0)
    step_x = W if W > 0 else fallback
    step_y = H if H > 0 else fallback
    if not planar and (x1 + (kx - 1) * step_x > 180.0 or y1 + (ky - 1) * step_y > 90.0):
        raise ValueError(f"tiling {graph.name!r} {kx}x{ky} with steps {step_x:.4f} x {step_y:.4f} degrees "
                         "leaves [-180, 180] x [-90, 90]")

    # Weight per unit of length, per weight: the median over the base graph's own arcs.
    from ..geo.kernels import arc_lengths

    alen = arc_lengths(graph.tail, graph.head, x, y, planar)
    pos = alen > 0
    if not pos.any():
        raise ValueError(f"graph {graph.name!r} has no arc of positive length: cannot estimate join weights")
    ratio = {k: float(np.median(w[pos] / alen[pos])) for k, w in graph.weights.items()}
    del alen, pos

    # Border nodes, from the largest strongly connected component.
    from scipy.sparse.csgraph import connected_components

    if m:
        _, lab = connected_components(graph.to_scipy(), directed=True, connection="strong")
        cand = np.flatnonzero(lab == np.argmax(np.bincount(lab)))
    else:
        cand = np.arange(n)
    k = int(joins_per_border) if joins_per_border is not None else max(1, int(round(math.sqrt(n) / 4)))
    if k < 1:
        raise ValueError(f"joins_per_border must be >= 1, got {k}")
    cx, cy = x[cand], y[cand]
    joins = []  # (tail base ids, head base ids, copy pairs (c_tail, c_head))
    if kx > 1:
        east = _border_nodes(cand, x1 - cx, cy, y0, H, k)
        west = _border_nodes(cand, cx - x0, cy, y0, H, k)
        e, w_ = _pair(east, west, x, y, step_x, 0.0, planar)
        cols = np.arange(kx - 1)
        rows = np.arange(ky)
        left = (rows[:, None] * kx + cols[None, :]).ravel()
        joins.append((e, w_, left, left + 1))
    if ky > 1:
        north = _border_nodes(cand, y1 - cy, cx, x0, W, k)
        south = _border_nodes(cand, cy - y0, cx, x0, W, k)
        nn, s = _pair(north, south, x, y, 0.0, step_y, planar)
        cols = np.arange(kx)
        rows = np.arange(ky - 1)
        below = (rows[:, None] * kx + cols[None, :]).ravel()
        joins.append((nn, s, below, below + kx))

    # Tiled coordinates.
    N = n * n_copies
    copy_i = np.arange(n_copies) % kx
    copy_j = np.arange(n_copies) // kx
    coords = np.empty((N, 2), dtype=np.float64)
    cview = coords.reshape(n_copies, n, 2)
    cview[:, :, 0] = x[None, :] + (copy_i * step_x)[:, None]
    cview[:, :, 1] = y[None, :] + (copy_j * step_y)[:, None]

    # Join arcs (both ways) with global ids and weights from their lengths.
    jt, jh = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for a, b, ca, cb in joins:
        ta = (ca[:, None] * n + a[None, :]).ravel()
        hb = (cb[:, None] * n + b[None, :]).ravel()
        jt += [ta, hb]
        jh += [hb, ta]
    jt = np.concatenate(jt)
    jh = np.concatenate(jh)
    jlen = _lengths(coords[jt, 0], coords[jt, 1], coords[jh, 0], coords[jh, 1], planar)
    jw = {key: np.clip(np.rint(jlen * r), 1, MAX_WEIGHT).astype(WEIGHT_DTYPE) for key, r in ratio.items()}
    jorder = np.lexsort((jh, jt))
    jt, jh = jt[jorder], jh[jorder]
    jw = {key: v[jorder] for key, v in jw.items()}

    # CSR straight away. Per node: joins to lower-numbered copies, then the base arcs, then joins to
    # higher-numbered copies, which keeps (tail, head) order when the base graph has it.
    base_deg = np.diff(graph.first_out).astype(np.int64)
    deg = np.tile(base_deg, n_copies)
    deg += np.bincount(jt, minlength=N)
    first_out = np.zeros(N + 1, dtype=np.int64)
    np.cumsum(deg, out=first_out[1:])
    del deg
    M = int(first_out[-1])
    if M >= lim:
        raise GraphError(f"tiling {graph.name!r} {kx}x{ky} gives {M:,} arcs, beyond the int32 id space")
    jcopy = jt // n
    lower = (jh // n) < jcopy
    n_lower = np.bincount(jt[lower], minlength=N)
    # Rank of each join among the joins of its tail (they are sorted by tail, then head).
    starts = np.searchsorted(jt, jt, side="left")
    rank = np.arange(jt.size) - starts
    jpos = first_out[jt] + rank + np.where(lower, 0, base_deg[jt % n])

    head = np.empty(M, dtype=INDEX_DTYPE)
    weights = {key: np.empty(M, dtype=WEIGHT_DTYPE) for key in graph.weights}
    local = np.arange(m, dtype=np.int64) - graph.first_out[graph.tail]
    btail = graph.tail.astype(np.int64)
    bhead = graph.head.astype(np.int64)
    for c in range(n_copies):
        off = c * n
        p = first_out[off + btail] + n_lower[off + btail] + local
        head[p] = bhead + off
        for key, w in graph.weights.items():
            weights[key][p] = w
    head[jpos] = jh
    for key in weights:
        weights[key][jpos] = jw[key]
    del n_lower, local, btail, bhead

    meta = {
        "synthetic": True,
        "note": (f"synthetic scale proxy: {kx}x{ky} copies of {graph.name!r} joined at their borders "
                 "(not a real network)"),
        "tiled_from": graph.name,
        "base_fingerprint": graph.fingerprint(),
        "kx": kx,
        "ky": ky,
        "base_n_nodes": n,
        "base_n_arcs": m,
        "copy_node_offset": "node (j * kx + i) * base_n_nodes + v is base node v in copy (i, j)",
        "tile_step": (step_x, step_y),
        "join_arcs": int(jt.size),
        "join_length_median": float(np.median(jlen)) if jlen.size else 0.0,
        "join_length_max": float(jlen.max()) if jlen.size else 0.0,
        "join_length_unit": "" if planar else "m",
        "join_weight_per_length": ratio,
        "self_loops_dropped": 0,
        "parallel_arcs_dropped": 0,
    }
    return RoadGraph(first_out, head, weights, units=dict(graph.units), coords=coords,
                     name=name if name is not None else f"{graph.name}-tiled-{kx}x{ky}",
                     coord_system=graph.coord_system, meta=meta)
