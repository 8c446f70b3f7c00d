"""Oracles and generators for the tests (STYLE.md: naive reference implementations live here).

- :func:`scipy_dijkstra`: scipy.sparse.csgraph on ``graph.to_scipy()``; correct because RoadGraph has
  already reduced parallel arcs to the lightest (a csr_matrix built from raw arcs would sum them).
- :func:`naive_dijkstra`: pure-Python heapq Dijkstra over a *raw* arc list (parallel arcs and
  self-loops included), independent of every gpuroute data structure.
- :func:`random_road_graph` and the hypothesis strategy :func:`graphs`: small random road-like graphs
  with coordinates, one-way streets, parallel arcs and self-loops.
"""
from __future__ import annotations

import heapq

import numpy as np
from hypothesis import strategies as st
from scipy.sparse.csgraph import dijkstra as _sp_dijkstra

from gpuroute import INF, RoadGraph

#: Centre of the random graphs' coordinates (lon, lat degrees): Manhattan.
CENTRE = (-73.98, 40.75)


def scipy_dijkstra(graph, sources, weight=None):
    """Distances from each source, int64 (k, n) with ``INF`` where unreachable (scipy oracle)."""
    src = np.atleast_1d(np.asarray(sources, dtype=np.int64))
    d = _sp_dijkstra(graph.to_scipy(weight), directed=True, indices=src)
    out = np.full(d.shape, INF, dtype=np.int64)
    fin = np.isfinite(d)
    out[fin] = np.rint(d[fin]).astype(np.int64)
    return out


def naive_dijkstra(n, arcs, source):
    """Textbook Dijkstra with ``heapq`` over a raw arc list.

    Parameters
    ----------
    n : int
    arcs : iterable of (u, v, w)
        Raw arcs; parallel arcs and self-loops allowed (the minimum counts, loops never help).
    source : int

    Returns
    -------
    list of int, length n
        Distances, ``INF`` where unreachable.
    """
    adj = [[] for _ in range(n)]
    for u, v, w in arcs:
        adj[int(u)].append((int(v), int(w)))
    dist = [INF] * n
    dist[source] = 0
    heap = [(0, source)]
    done = [False] * n
    while heap:
        d, u = heapq.heappop(heap)
        if done[u]:
            continue
        done[u] = True
        for v, w in adj[u]:
            nd = d + w
            if nd < dist[v]:
                dist[v] = nd
                heapq.heappush(heap, (nd, v))
    return dist


def random_road_graph(rng, n, *, neighbours=3, one_way=0.3, n_parallel=None, n_loops=None, n_long=None,
                      max_noise=0.5, spread_deg=0.02, two_weights=True, planar=False):
    """A small random road-like graph and its raw arcs.

    Nodes get random lon/lat around :data:`CENTRE` (``spread_deg`` wide). Each node is joined to up to
    ``neighbours`` nearest nodes, two-way or (with probability ``one_way``) one-way; some long random
    arcs, parallel copies with other weights and self-loops are added. ``distance`` is the great-circle
    length in decimetres times a random factor in ``[1, 1 + max_noise]`` (at least 1); ``travel_time``
    (if ``two_weights``) is an unrelated positive integer.

    Returns
    -------
    graph : RoadGraph
        Built with ``RoadGraph.from_arcs`` (loops dropped, parallel arcs reduced).
    raw : list of (u, v, {name: w})
        Every arc as generated, before cleaning.
    """
    from gpuroute.geo import haversine_m as great_circle_m

    n = int(n)
    if planar:
        xy = rng.uniform(0, 1000, size=(n, 2))
    else:
        xy = np.column_stack((CENTRE[0] + rng.uniform(-spread_deg, spread_deg, n),
                              CENTRE[1] + rng.uniform(-spread_deg, spread_deg, n)))
    # Round like DIMACS (micro-degrees) so that duplicate coordinates happen now and then.
    xy = np.round(xy, 6 if not planar else 2)
    tails, heads = [], []
    if n > 1:
        d2 = ((xy[:, None, :] - xy[None, :, :]) ** 2).sum(-1)
        np.fill_diagonal(d2, np.inf)
        near = np.argsort(d2, axis=1)[:, : min(neighbours, n - 1)]
        for u in range(n):
            for v in near[u]:
                r = rng.random()
                if r < one_way / 2:
                    tails.append(u)
                    heads.append(int(v))
                elif r < one_way:
                    tails.append(int(v))
                    heads.append(u)
                elif r < 0.95:
                    tails += [u, int(v)]
                    heads += [int(v), u]
        n_long = int(rng.integers(0, 3)) if n_long is None else n_long
        for _ in range(n_long):
            u, v = (int(a) for a in rng.integers(0, n, 2))
            tails.append(u)
            heads.append(v)
    n_par = int(rng.integers(0, 4)) if n_parallel is None else n_parallel
    n_lp = int(rng.integers(0, 3)) if n_loops is None else n_loops
    base = len(tails)
    for _ in range(n_par if base else 0):
        i = int(rng.integers(0, base))
        tails.append(tails[i])
        heads.append(heads[i])
    for _ in range(n_lp):
        u = int(rng.integers(0, n))
        tails.append(u)
        heads.append(u)
    t = np.asarray(tails, dtype=np.int64)
    h = np.asarray(heads, dtype=np.int64)
    if planar:
        length = np.hypot(*(xy[h] - xy[t]).T)
    else:
        length = great_circle_m(xy[t, 0], xy[t, 1], xy[h, 0], xy[h, 1]) * 10.0
    dist = np.maximum(1, np.rint(length * (1 + max_noise * rng.random(t.size)))).astype(np.int64)
    weights = {"distance": dist}
    units = {"distance": "dm" if not planar else ""}
    if two_weights:
        weights["travel_time"] = rng.integers(1, 100, t.size)
        units["travel_time"] = "ds"
    g = RoadGraph.from_arcs(n, t, h, weights, units=units, coords=xy, name=f"random-{n}",
                            coord_system="planar" if planar else "lonlat")
    raw = [(int(t[i]), int(h[i]), {k: int(w[i]) for k, w in weights.items()}) for i in range(t.size)]
    return g, raw


def raw_arcs(raw, weight="distance", primary="distance"):
    """``(u, v, w)`` triples of one weight from :func:`random_road_graph`'s raw arcs.

    Parallel arcs merge into ONE real arc, the lightest by the ``primary`` weight (first in input
    order among equals): for the primary weight every raw arc is kept (the minimum wins anyway); for
    another weight only each group's kept arc counts, computed here independently of RoadGraph.
    """
    if weight == primary:
        return [(u, v, ws[weight]) for u, v, ws in raw]
    best = {}
    for i, (u, v, ws) in enumerate(raw):
        if u == v:
            continue
        key = (ws[primary], i)
        if (u, v) not in best or key < best[u, v][0]:
            best[u, v] = (key, ws[weight])
    return [(u, v, w) for (u, v), (_, w) in best.items()]


@st.composite
def graphs(draw, min_nodes=1, max_nodes=40, planar=None):
    """Hypothesis strategy: ``(graph, raw)`` from :func:`random_road_graph` with drawn parameters."""
    n = draw(st.integers(min_nodes, max_nodes))
    seed = draw(st.integers(0, 2**32 - 1))
    neighbours = draw(st.integers(0, 4))
    one_way = draw(st.sampled_from([0.0, 0.3, 0.8]))
    pl = draw(st.booleans()) if planar is None else planar
    rng = np.random.default_rng(seed)
    return random_road_graph(rng, n, neighbours=neighbours, one_way=one_way, planar=pl)


def canonical_predecessors(graph, dist, source, weight=None):
    """The canonical predecessor of every node, int32 (n,), computed naively from all arcs.

    ``pred[v]`` = the smallest ``u`` with an arc ``(u, v)`` and ``dist[u] + w(u, v) == dist[v]``;
    -1 for ``source`` and unreachable nodes.
    """
    w = graph.weight(weight).astype(np.int64)
    t = graph.tail.astype(np.int64)
    h = graph.head.astype(np.int64)
    dist = np.asarray(dist, dtype=np.int64)
    ok = (dist[t] != INF) & (dist[h] != INF)
    tight = ok.copy()
    tight[ok] = dist[t[ok]] + w[ok] == dist[h[ok]]
    best = np.full(graph.n_nodes, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(best, h[tight], t[tight])
    pred = np.where(best == np.iinfo(np.int64).max, -1, best)
    pred[source] = -1
    return pred.astype(np.int32)


def naive_ch(graph, weight=None, order=None, core_from=None):
    """A slow, obviously correct contraction hierarchy of a small graph (the oracle hierarchy).

    Nodes are contracted one by one in ``order`` (Geisberger, Sanders, Schultes, Delling, WEA 2008,
    sec. 3) with *exact* witness searches: contracting ``v`` adds the shortcut ``u -> w`` (middle ``v``)
    for every pair ``u -> v -> w`` of the remaining graph unless a Dijkstra in the remaining graph
    without ``v`` finds ``u -> w`` no longer than the broken path. Every arc of the graph and every
    shortcut becomes a hierarchy arc; ``level[v]`` = 1 + the largest level of ``v``'s lower-ranked
    hierarchy neighbours (0 without any).

    Parameters
    ----------
    graph : RoadGraph
    weight : str, optional
        Default: the graph's first weight.
    order : array_like of int, shape (n,), optional
        The contraction order (``rank[order[i]] = i``); default ``0 .. n-1``.
    core_from : int, optional
        Make the nodes of rank ``>= core_from`` a core (CU-CH's overlay, Karimi et al., ICS '19,
        sec. 3.6): contraction stops there, ``core_dist`` is computed by Dijkstra on the remaining graph
        and every reachable ordered core pair ``(a, b)`` becomes a hierarchy arc of weight
        ``core_dist[a, b]``: with the direct arc's ``(mid, arc)`` when that arc is tight, else with
        ``mid`` = the smallest-id tight predecessor of ``b`` in the core SSSP from ``a`` and arc -1.
        Core nodes all get level 1 + the largest level of a contracted node.

    Returns
    -------
    gpuroute.ch.hierarchy.Hierarchy
    """
    from gpuroute.ch.hierarchy import Hierarchy

    n = graph.n_nodes
    w = graph.weight(weight).astype(np.int64)
    order = np.arange(n, dtype=np.int64) if order is None else np.asarray(order, dtype=np.int64)
    assert sorted(order.tolist()) == list(range(n)), "order must be a permutation of the nodes"
    n_contract = n if core_from is None else max(0, min(int(core_from), n))
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)

    out = [{} for _ in range(n)]  # remaining graph: out[u][v] = (weight, mid, arc)
    inn = [set() for _ in range(n)]
    arcs = []  # hierarchy arcs (tail, head, weight, mid, arc)
    for a in range(graph.n_arcs):
        u, v = int(graph.tail[a]), int(graph.head[a])
        if v not in out[u] or w[a] < out[u][v][0]:
            out[u][v] = (int(w[a]), -1, a)
        inn[v].add(u)
        arcs.append((u, v, int(w[a]), -1, a))

    def dijkstra_remaining(src):
        dist = {src: 0}
        heap = [(0, src)]
        done = set()
        while heap:
            d, x = heapq.heappop(heap)
            if x in done:
                continue
            done.add(x)
            for y, (wy, _, _) in out[x].items():
                if d + wy < dist.get(y, INF):
                    dist[y] = d + wy
                    heapq.heappush(heap, (d + wy, y))
        return dist

    for i in range(n_contract):
        v = int(order[i])
        ins = {u: out[u][v][0] for u in inn[v]}
        outs = {x: wx for x, (wx, _, _) in out[v].items()}
        for u in ins:  # remove v from the remaining graph
            del out[u][v]
        for x in outs:
            inn[x].discard(v)
        out[v].clear()
        inn[v].clear()
        new = []
        for u, wu in ins.items():
            dist = dijkstra_remaining(u)
            for x, wx in outs.items():
                if x != u and dist.get(x, INF) > wu + wx:
                    new.append((u, x, wu + wx))
        for u, x, length in new:
            out[u][x] = (length, v, -1)  # an existing u -> x is longer (the witness search saw it)
            inn[x].add(u)
            arcs.append((u, x, length, v, -1))

    core = order[n_contract:]
    c = core.size
    core_dist = np.full((c, c), INF, dtype=np.int64)
    for ia, a in enumerate(core.tolist()):
        dist = dijkstra_remaining(a)
        for ib, b in enumerate(core.tolist()):
            core_dist[ia, ib] = dist.get(b, INF)
            if a == b or b not in dist:
                continue
            direct = out[a].get(b)
            if direct is not None and direct[0] == dist[b]:
                arcs.append((a, b, dist[b], direct[1], direct[2]))
            else:
                mid = min(p for p in inn[b] if p in dist and dist[p] + out[p][b][0] == dist[b])
                arcs.append((a, b, dist[b], mid, -1))

    level = np.zeros(n, dtype=np.int64)
    lower = [[] for _ in range(n)]
    for t, h, _, _, _ in arcs:
        lo, hi = (t, h) if rank[t] < rank[h] else (h, t)
        lower[hi].append(lo)
    for v in order[:n_contract].tolist():
        level[v] = 1 + max((level[u] for u in lower[v]), default=-1)
    if c:
        level[core] = 1 + (int(level[order[:n_contract]].max()) if n_contract else -1)
    if arcs:
        t, h, wt, mid, arc = (np.array(col, dtype=np.int64) for col in zip(*arcs, strict=True))
    else:
        t = h = wt = mid = arc = np.zeros(0, dtype=np.int64)
    return Hierarchy.from_arcs(n, rank, level, t, h, wt, mid, arc,
                               core=core if c else None, core_dist=core_dist if c else None)


def turn_aware_distances(graph, source, arc_cost, turn_cost_of):
    """Shortest distances from ``source`` to every node in the arc-based turn model, naively (heapq on
    arcs as states): leaving ``source`` by arc ``b`` costs ``arc_cost[b]``; the turn ``a -> b`` costs
    ``turn_cost_of(a, b)`` (``None``: forbidden). Returns a list (n,) of ints, ``None`` if unreachable.
    """
    n, m = graph.n_nodes, graph.n_arcs
    head, first_out = graph.head, graph.first_out
    dist = [None] * m
    heap = [(int(arc_cost[b]), b) for b in range(first_out[source], first_out[source + 1])]
    heapq.heapify(heap)
    while heap:
        d, a = heapq.heappop(heap)
        if dist[a] is not None:
            continue
        dist[a] = d
        v = head[a]
        for b in range(first_out[v], first_out[v + 1]):
            if dist[b] is None:
                c = turn_cost_of(a, b)
                if c is not None:
                    heapq.heappush(heap, (d + c, b))
    out = [None] * n
    out[source] = 0
    for a in range(m):
        if dist[a] is not None and (out[head[a]] is None or dist[a] < out[head[a]]):
            out[head[a]] = dist[a]
    return out


def within_radius_oracle(graph, radius, weight=None, chunk=1024):
    """Distances ``d(v -> u)`` within a radius, by scipy Dijkstra from *every* node ``v`` over the forward graph
    (bounded by ``limit``; ``chunk`` sources at a time): a function ``cols -> (n, len(cols))`` int64 block
    with ``INF`` beyond ``floor(radius)`` (the accessibility oracle: no reverse graph, no hierarchy)."""
    bound = int(np.floor(radius))
    csr = graph.to_scipy(weight)
    n = graph.n_nodes

    def block(cols):
        cols = np.asarray(cols, dtype=np.int64)
        out = np.full((n, cols.size), INF, dtype=np.int64)
        for lo in range(0, n, chunk):
            d = _sp_dijkstra(csr, directed=True, indices=np.arange(lo, min(n, lo + chunk)), limit=bound + 0.5)[:, cols]
            ok = d <= bound
            out[lo:lo + d.shape[0]][ok] = np.rint(d[ok]).astype(np.int64)
        return out

    return block


def aggregate_oracle(dist, values, radius, type, decay, empty=None):
    """pandana's aggregate by brute force from ``dist`` (n, k): the distance from every node to each of the
    k points (INF beyond the radius). Decay ``flat`` / ``linear`` (1 - d / r) / ``exp`` (exp(-d / r)); mean =
    decayed sum / count; std (flat, population), min, max of the values; pandana's empties (0, or -1 for
    min and max) unless ``empty``."""
    import warnings

    values = np.asarray(values, dtype=np.float64)
    ok = dist <= np.floor(radius)
    d = np.where(ok, dist, 0).astype(np.float64)
    w = {"flat": np.ones_like(d), "linear": 1.0 - d / max(radius, 1e-300), "exp": np.exp(-d / max(radius, 1e-300))}[decay]
    w = np.where(ok, w, 0.0)
    cnt = ok.sum(axis=1)
    has = cnt > 0
    x = np.where(ok, values[None, :], np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out = {"sum": (w * values[None, :]).sum(axis=1),
               "mean": (w * values[None, :]).sum(axis=1) / np.maximum(cnt, 1),
               "count": cnt.astype(np.float64),
               "std": np.nanstd(x, axis=1),
               "min": np.nanmin(x, axis=1) if x.shape[1] else np.full(x.shape[0], np.nan),
               "max": np.nanmax(x, axis=1) if x.shape[1] else np.full(x.shape[0], np.nan)}[type]
    e = {"min": -1.0, "max": -1.0}.get(type, 0.0) if empty is None else empty
    return np.where(has, out, e)


def nearest_pois_oracle(dist, radius, k, fill=None):
    """pandana's nearest_pois by brute force from ``dist`` (n, m): per node the k smallest (distance, poi
    position) pairs with distance <= radius, sorted; ``fill`` (default the radius) and -1 where fewer."""
    n, m = dist.shape
    bound = np.floor(radius)
    fill = radius if fill is None else fill
    dd = np.full((n, k), fill, dtype=np.float64)
    ii = np.full((n, k), -1, dtype=np.int64)
    for v in range(n):
        row = dist[v]
        cand = np.flatnonzero(row <= bound)
        pairs = sorted(zip(row[cand].tolist(), cand.tolist(), strict=True))[:k]
        for q, (x, i) in enumerate(pairs):
            dd[v, q] = x
            ii[v, q] = i
    return dd, ii


def naive_douglas_peucker(x, y, tolerance, closing=None):
    """Douglas-Peucker by plain recursion (Douglas and Peucker 1973): the bool mask of the points of the
    planar polyline ``x, y`` kept with ``tolerance`` (the farthest interior point from the segment of a
    span's ends, clamped to the segment, is kept iff strictly farther than ``tolerance``; first on ties).
    ``closing`` = (cx, cy) is appended as the last span's end (a ring closed by its start; not in the mask)."""
    pts = list(zip(np.asarray(x, dtype=float).tolist(), np.asarray(y, dtype=float).tolist(), strict=True))
    if closing is not None:
        pts.append(tuple(closing))
    keep = [False] * len(pts)

    def seg_dist2(p, a, b):
        # squared, in the kernel's arithmetic, so that exact ties (grid points) break the same way
        (px, py), (ax, ay), (bx, by) = p, a, b
        dx, dy = bx - ax, by - ay
        ll = dx * dx + dy * dy
        t = 0.0 if ll == 0 else min(1.0, max(0.0, ((px - ax) * dx + (py - ay) * dy) / ll))
        ex, ey = (px - ax) - t * dx, (py - ay) - t * dy
        return ex * ex + ey * ey

    def rec(i, j):
        if j - i < 2:
            return
        d = [seg_dist2(pts[p], pts[i], pts[j]) for p in range(i + 1, j)]
        m = i + 1 + int(np.argmax(d))
        if d[m - i - 1] > tolerance * tolerance:
            keep[m] = True
            rec(i, m)
            rec(m, j)

    if pts:
        keep[0] = keep[-1] = True
        rec(0, len(pts) - 1)
    return np.array(keep[:-1] if closing is not None else keep, dtype=bool)
