"""``check_hierarchy``: validate a contraction hierarchy against its own rules and against Dijkstra.

The rules are those of :mod:`gpuroute.ch.hierarchy`. The distance check runs its own PHAST-style sweep
(Delling, Goldberg, Nowatzyk, Werneck, "PHAST: Hardware-Accelerated Shortest Path Trees", IPDPS 2011,
sec. 3; with CU-CH's dense core step, Karimi, Koppelman, Michael, ICS '19, sec. 3.8) in plain NumPy and
Python, independent of the query modules, and compares it with :func:`gpuroute.sssp` on the CPU.
"""
from __future__ import annotations

import heapq

import numpy as np

from ..graph.constants import INF
from .hierarchy import Hierarchy

__all__ = ["check_hierarchy", "phast_distances"]

#: Bytes of the (k, n) int64 distance matrix the check sweeps at once (k sources, at most 64).
_SWEEP_BYTES = 1 << 27


def _arcs(h):
    """Every hierarchy arc as flat int64 arrays ``(tail, head, weight, mid, arc, side, pos)``; ``side`` is
    "up"/"down" per block, ``pos`` the CSR position within its side."""
    n = h.n_nodes
    up_tail = np.repeat(np.arange(n, dtype=np.int64), np.diff(h.up_first_out.astype(np.int64)))
    dn_head = np.repeat(np.arange(n, dtype=np.int64), np.diff(h.down_first_out.astype(np.int64)))
    tail = np.concatenate([up_tail, h.down_tail.astype(np.int64)])
    head = np.concatenate([h.up_head.astype(np.int64), dn_head])
    weight = np.concatenate([h.up_weight, h.down_weight]).astype(np.int64)
    mid = np.concatenate([h.up_mid, h.down_mid]).astype(np.int64)
    arc = np.concatenate([h.up_arc, h.down_arc]).astype(np.int64)
    return tail, head, weight, mid, arc


def _where(h, i):
    """``"up arc k"`` / ``"down arc k"`` for flat arc index ``i`` (its CSR position in its side)."""
    return f"up arc {i}" if i < h.n_up else f"down arc {i - h.n_up}"


def _structure(h):
    n = h.n_nodes
    for name in ("rank", "order", "level"):
        if np.shape(getattr(h, name)) != (n,):
            raise ValueError(f"{name} has shape {np.shape(getattr(h, name))}, expected ({n},)")
    for side, col in (("up", "head"), ("down", "tail")):
        fo = np.asarray(getattr(h, f"{side}_first_out"), dtype=np.int64)
        m = np.shape(getattr(h, f"{side}_{col}"))[0] if np.ndim(getattr(h, f"{side}_{col}")) == 1 else -1
        if fo.shape != (n + 1,) or fo[0] != 0 or fo[-1] != m or np.any(np.diff(fo) < 0):
            raise ValueError(f"{side}_first_out is not a CSR over {n} nodes and {m} arcs (it must start at 0, not "
                             f"decrease and end at {m})")
        for c in (col, "weight", "mid", "arc"):
            a = getattr(h, f"{side}_{c}")
            if np.shape(a) != (m,):
                raise ValueError(f"{side}_{c} has shape {np.shape(a)}, expected ({m},)")
        ends = np.asarray(getattr(h, f"{side}_{col}"))
        bad = (ends < 0) | (ends >= n)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise ValueError(f"{side} arc {k}: {side}_{col} {int(ends[k])} is outside the node range [0, {n})")


def _ranks(h):
    n = h.n_nodes
    rank = np.asarray(h.rank, dtype=np.int64)
    out = (rank < 0) | (rank >= n)
    if out.any():
        v = int(np.flatnonzero(out)[0])
        raise ValueError(f"rank is not a permutation: node {v} has rank {int(rank[v])}, outside [0, {n})")
    owner = np.argsort(rank, kind="stable")
    dup = np.flatnonzero(rank[owner][1:] == rank[owner][:-1])
    if dup.size:
        u, v = int(owner[dup[0]]), int(owner[dup[0] + 1])
        raise ValueError(f"rank is not a permutation: nodes {u} and {v} both have rank {int(rank[u])}")
    bad = np.flatnonzero(np.asarray(h.order, dtype=np.int64) != owner)
    if bad.size:
        r = int(bad[0])
        raise ValueError(f"order is not the inverse of rank: order[{r}] = {int(h.order[r])}, but node {int(owner[r])} "
                         f"has rank {r}")


def _directions(h, tail, head, weight):
    rank = np.asarray(h.rank, dtype=np.int64)
    up = np.arange(tail.size) < h.n_up
    wrong = np.flatnonzero(np.where(up, rank[head] <= rank[tail], rank[head] >= rank[tail]))
    if wrong.size:
        i = int(wrong[0])
        u, v = int(tail[i]), int(head[i])
        how = "from lower to higher rank" if up[i] else "from higher to lower rank"
        raise ValueError(f"{_where(h, i)} ({u} -> {v}) does not go {how}: rank[{u}] = {int(rank[u])}, "
                         f"rank[{v}] = {int(rank[v])}")
    nonpos = np.flatnonzero(weight <= 0)
    if nonpos.size:
        i = int(nonpos[0])
        raise ValueError(f"{_where(h, i)} ({int(tail[i])} -> {int(head[i])}) has weight {int(weight[i])}; "
                         "weights are positive")
    key = tail * max(h.n_nodes, 1) + head
    o = np.argsort(key, kind="stable")
    dup = np.flatnonzero(key[o][1:] == key[o][:-1])
    if dup.size:
        i, j = int(o[dup[0]]), int(o[dup[0] + 1])
        raise ValueError(f"{_where(h, i)} and {_where(h, j)} both join {int(tail[i])} -> {int(head[i])} "
                         "(parallel hierarchy arcs must be merged)")
    return key[o], o


def _core(h, tail, head, weight):
    n = h.n_nodes
    core = np.asarray(h.core, dtype=np.int64)
    c = core.size
    if core.ndim != 1:
        raise ValueError(f"core has shape {core.shape}, expected one dimension")
    cd = np.asarray(h.core_dist)
    if cd.shape != (c, c):
        raise ValueError(f"core_dist has shape {cd.shape}, expected ({c}, {c}) for a core of {c} nodes")
    is_core = np.zeros(n, dtype=bool)
    if not c:
        return is_core, np.full(n, -1, dtype=np.int64)
    if core.min() < 0 or core.max() >= n:
        i = int(np.flatnonzero((core < 0) | (core >= n))[0])
        raise ValueError(f"core[{i}] = {int(core[i])} is outside the node range [0, {n})")
    if np.unique(core).size != c:
        raise ValueError("core lists a node twice")
    is_core[core] = True
    pos = np.full(n, -1, dtype=np.int64)
    pos[core] = np.arange(c)
    lv = np.asarray(h.level)[core]
    off = np.flatnonzero(lv != h.core_level)
    if off.size:
        i = int(off[0])
        raise ValueError(f"core node {int(core[i])} has level {int(lv[i])}, not the core level {h.core_level}")
    rank = np.asarray(h.rank, dtype=np.int64)
    low = np.flatnonzero(rank[core] < n - c)
    if low.size:
        v = int(core[low[0]])
        raise ValueError(f"core node {v} has rank {int(rank[v])}: the {c} core nodes must hold the highest ranks "
                         f"[{n - c}, {n})")
    diag = np.flatnonzero(np.diag(cd) != 0)
    if diag.size:
        i = int(diag[0])
        raise ValueError(f"core_dist[{i}, {i}] = {int(cd[i, i])} (core node {int(core[i])} to itself), expected 0")
    both = is_core[tail] & is_core[head]
    got = np.full((c, c), INF, dtype=np.int64)
    np.fill_diagonal(got, 0)
    got[pos[tail[both]], pos[head[both]]] = weight[both]
    bad = np.argwhere(got != cd)
    if bad.size:
        i, j = (int(x) for x in bad[0])
        arc = "no arc" if got[i, j] == INF else f"the arc's weight is {int(got[i, j])}"
        want = "INF" if cd[i, j] == INF else int(cd[i, j])
        raise ValueError(f"core_dist[{i}, {j}] = {want} (core nodes {int(core[i])} -> {int(core[j])}), but "
                         f"{arc}: core pairs are hierarchy arcs weighing their core distance")
    return is_core, pos


def _levels(h, tail, head, is_core):
    rank = np.asarray(h.rank, dtype=np.int64)
    level = np.asarray(h.level, dtype=np.int64)
    hi = np.where(rank[head] > rank[tail], head, tail)
    lo = np.where(rank[head] > rank[tail], tail, head)
    bad = np.flatnonzero(~(is_core[tail] & is_core[head]) & (level[hi] <= level[lo]))
    if bad.size:
        i = int(bad[0])
        u, v = int(lo[i]), int(hi[i])
        raise ValueError(f"{_where(h, i)} ({int(tail[i])} -> {int(head[i])}) breaks the levels: node {v} (rank "
                         f"{int(rank[v])}) has level {int(level[v])}, not above node {u}'s level {int(level[u])} "
                         f"(rank {int(rank[u])})")


def _kinds(h, tail, head, weight, mid, arc, sorted_key, order, graph, w):
    n = h.n_nodes
    kind_bad = np.flatnonzero((mid >= 0) == (arc >= 0))
    if kind_bad.size:
        i = int(kind_bad[0])
        raise ValueError(f"{_where(h, i)} ({int(tail[i])} -> {int(head[i])}) has mid {int(mid[i])} and arc "
                         f"{int(arc[i])}: exactly one must be >= 0 (a shortcut or an arc of the graph)")
    bad = np.flatnonzero((mid < -1) | (mid >= n) | (arc < -1) | ((mid >= 0) & ((mid == tail) | (mid == head))))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"{_where(h, i)} ({int(tail[i])} -> {int(head[i])}) has an invalid mid {int(mid[i])} or "
                         f"arc {int(arc[i])}")
    sc = np.flatnonzero(mid >= 0)
    w_sorted = weight[order]

    def lookup(a, b):
        k = a * max(n, 1) + b
        j = np.minimum(np.searchsorted(sorted_key, k), max(sorted_key.size - 1, 0))
        found = sorted_key.size > 0
        ok = (sorted_key[j] == k) if found else np.zeros(k.shape, dtype=bool)
        return ok, np.where(ok, w_sorted[j] if found else 0, 0)

    ok1, w1 = lookup(tail[sc], mid[sc])
    ok2, w2 = lookup(mid[sc], head[sc])
    for ok, a, b in ((ok1, tail, mid), (ok2, mid, head)):
        miss = np.flatnonzero(~ok)
        if miss.size:
            i = int(sc[miss[0]])
            raise ValueError(f"shortcut {int(tail[i])} -> {int(head[i])} via {int(mid[i])} ({_where(h, i)}) has no "
                             f"half {int(a[i])} -> {int(b[i])} in the hierarchy")
    wrong = np.flatnonzero(w1 + w2 != weight[sc])
    if wrong.size:
        k = int(wrong[0])
        i = int(sc[k])
        raise ValueError(f"shortcut {int(tail[i])} -> {int(head[i])} via {int(mid[i])} ({_where(h, i)}) weighs "
                         f"{int(weight[i])}, but its halves weigh {int(w1[k])} + {int(w2[k])} = {int(w1[k] + w2[k])}")
    ga = np.flatnonzero(arc >= 0)
    if graph is not None and ga.size:
        a = arc[ga]
        out = np.flatnonzero(a >= graph.n_arcs)
        if out.size:
            i = int(ga[out[0]])
            raise ValueError(f"{_where(h, i)} ({int(tail[i])} -> {int(head[i])}) names graph arc {int(arc[i])}, "
                             f"outside the graph's arc range [0, {graph.n_arcs})")
        gt = graph.tail.astype(np.int64)[a]
        gh = graph.head.astype(np.int64)[a]
        gw = w[a]
        bad = np.flatnonzero((gt != tail[ga]) | (gh != head[ga]) | (gw != weight[ga]))
        if bad.size:
            k = int(bad[0])
            i = int(ga[k])
            raise ValueError(f"{_where(h, i)} ({int(tail[i])} -> {int(head[i])}, weight {int(weight[i])}) names graph "
                             f"arc {int(arc[i])}, which is {int(gt[k])} -> {int(gh[k])} with weight {int(gw[k])}")
    return int(sc.size), int(ga.size) if graph is not None else 0


def _upward(h, s, is_core):
    """Dijkstra from ``s`` over ``up`` arcs, not leaving core nodes (the core step covers the core):
    ``{node: distance}``."""
    fo, hd, wt = h.up_first_out, h.up_head, h.up_weight
    dist = {s: 0}
    heap = [(0, s)]
    done = set()
    while heap:
        d, u = heapq.heappop(heap)
        if u in done:
            continue
        done.add(u)
        if is_core[u]:
            continue
        for k in range(int(fo[u]), int(fo[u + 1])):
            v, nd = int(hd[k]), d + int(wt[k])
            if nd < dist.get(v, INF):
                dist[v] = nd
                heapq.heappush(heap, (nd, v))
    return dist


def _plus(a, w):
    """``a + w`` with ``INF`` kept (int64; no wrap-around)."""
    return np.where(a == INF, INF, a + np.where(a == INF, 0, w))


def phast_distances(h, sources):
    """Distances from each source by a PHAST-style sweep, int64 (k, n), ``INF`` where unreachable.

    Upward Dijkstra over ``up`` (stopping at core nodes), one dense core step with ``core_dist``, then a
    downward sweep over the non-core nodes in decreasing rank over ``down``. Plain NumPy/Python: the
    reference the checks compare against Dijkstra; slow (a Python step per node), for checking only.
    """
    n = h.n_nodes
    sources = np.asarray(sources, dtype=np.int64)
    core = np.asarray(h.core, dtype=np.int64)
    is_core = np.zeros(n, dtype=bool)
    is_core[core] = True
    cd = np.asarray(h.core_dist, dtype=np.int64)
    d = np.full((sources.size, n), INF, dtype=np.int64)
    for r, s in enumerate(sources):
        for v, dv in _upward(h, int(s), is_core).items():
            d[r, v] = dv
        if core.size:
            dc = d[r, core]
            best = dc.copy()
            for i in np.flatnonzero(dc < INF):
                best = np.minimum(best, _plus(cd[i], dc[i]))
            d[r, core] = best
    fo, tl, wt = h.down_first_out, h.down_tail, h.down_weight
    for v in np.asarray(h.order)[::-1]:
        v = int(v)
        if is_core[v]:
            continue
        lo, hi = int(fo[v]), int(fo[v + 1])
        if lo == hi:
            continue
        cand = _plus(d[:, tl[lo:hi]], wt[lo:hi][None, :]).min(axis=1)
        np.minimum(d[:, v], cand, out=d[:, v])
    return d


def check_hierarchy(ch, graph=None, *, weight=None, samples=50, seed=0):
    """Validate a contraction hierarchy; raise ``ValueError`` naming the first violation.

    Checked, in this order: the arrays' shapes and CSR structure; ``rank`` is a permutation and
    ``order`` its inverse; every up arc goes from lower to higher rank and every down arc from higher to
    lower rank (by CSR position), weights are positive, no two arcs join the same pair; the core (nodes
    in range, distinct, all of level ``core_level``, holding the highest ranks; ``core_dist`` of shape
    (c, c) with a 0 diagonal, equal to the weights of the core pairs' arcs, INF exactly where no arc);
    for every arc not between two core nodes, the end of higher rank has the higher level; every arc is
    a shortcut (``mid >= 0``, ``arc == -1``) or an arc of the graph (``mid == -1``, ``arc >= 0``); every
    shortcut's halves exist and their weights sum to its weight; with a graph, every arc of the graph
    has the graph's tail, head and weight; and the distances from ``samples`` random sources (a
    PHAST-style sweep, :func:`phast_distances`) equal ``gpuroute.sssp(graph, s, device="cpu")``.

    A shortcut's middle node is not required to rank below both ends (only that its halves exist and
    add up; every half weighs less than the whole, so unpacking ends).

    Parameters
    ----------
    ch : ContractionHierarchy or Hierarchy
    graph : RoadGraph, optional
        Default: ``ch.graph``. Without a graph the arc ids and distances are not checked.
    weight : str, optional
        Default: ``ch.weight``, else the graph's default weight.
    samples : int
        Random sources for the distance check (all nodes when ``samples >= n``; 0 skips it).
    seed : int

    Returns
    -------
    dict
        What was checked: ``nodes``, ``up_arcs``, ``down_arcs``, ``shortcuts``, ``graph_arcs`` (arcs
        checked against the graph, 0 without one), ``core``, ``levels``, ``sources`` (sampled),
        ``distances`` (source-node pairs compared).

    Raises
    ------
    ValueError
        The first violation, naming the arc (up/down and CSR position), node or entry; or a graph that
        is not the one the hierarchy was built from (fingerprints or node count differ).
    KeyError
        The weight is not in the graph.
    """
    from ..sssp import sssp

    h = ch if isinstance(ch, Hierarchy) else ch.h
    if graph is None and not isinstance(ch, Hierarchy):
        graph = ch.graph
    if weight is None:
        weight = getattr(ch, "weight", None) or (graph.default_weight if graph is not None else None)
    w = None
    if graph is not None:
        w = graph.weight(weight).astype(np.int64)
        if graph.n_nodes != h.n_nodes:
            raise ValueError(f"the hierarchy has {h.n_nodes} nodes, the graph {graph.name!r} {graph.n_nodes}")
        fp = getattr(ch, "graph_fingerprint", None)
        if fp is not None and graph.fingerprint() != fp:
            raise ValueError(f"the hierarchy was built from another graph (fingerprint {fp}; graph {graph.name!r} has "
                             f"{graph.fingerprint()})")
    _structure(h)
    _ranks(h)
    tail, head, weight_, mid, arc = _arcs(h)
    sorted_key, order = _directions(h, tail, head, weight_)
    is_core, _ = _core(h, tail, head, weight_)
    _levels(h, tail, head, is_core)
    n_short, n_graph = _kinds(h, tail, head, weight_, mid, arc, sorted_key, order, graph, w)
    n = h.n_nodes
    srcs = np.zeros(0, dtype=np.int64)
    if graph is not None and samples > 0 and n:
        rng = np.random.default_rng(seed)
        srcs = np.arange(n) if samples >= n else np.sort(rng.choice(n, size=samples, replace=False))
        step = int(np.clip(_SWEEP_BYTES // (8 * n), 1, 64))
        for b in range(0, srcs.size, step):
            batch = srcs[b:b + step]
            got = phast_distances(h, batch)
            want = np.asarray(sssp(graph, batch, weight=weight, device="cpu"), dtype=np.int64).reshape(batch.size, n)
            bad = np.argwhere(got != want)
            if bad.size:
                r, v = (int(x) for x in bad[0])

                def f(x):
                    return "INF" if x == INF else str(int(x))

                raise ValueError(f"distance from node {int(batch[r])} to node {v}: the hierarchy gives {f(got[r, v])}, "
                                 f"Dijkstra {f(want[r, v])}")
    return {"nodes": n, "up_arcs": h.n_up, "down_arcs": h.n_down, "shortcuts": n_short, "graph_arcs": n_graph,
            "core": int(np.asarray(h.core).size), "levels": h.n_levels, "sources": int(srcs.size),
            "distances": int(srcs.size) * n}

