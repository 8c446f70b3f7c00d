"""CU-CH on the CPU: the numba twin of the GPU contraction (``cuch_gpu.py`` + ``cuch.cu``), giving the
same hierarchy array for array.

Karimi, Koppelman, Michael, "GPU Road Network Graph Contraction and SSSP Query", ICS '19, sec. 3.1-3.6,
Algorithm 1: contract an independent set of low-cost nodes of the overlay graph ``G_l`` per iteration
until fewer than ``K`` nodes remain; they form the core, made complete by all-pairs shortest paths.
Every rule that decides anything is integer arithmetic, so both twins decide alike:

* Overlay ``G_l`` over the remaining nodes (original ids), a forward CSR sorted by (tail, head) and a
  backward CSR sorted by (head, tail), rebuilt every iteration (EXTRACT). Arcs carry
  ``(weight int64, mid, arc)``; parallel arcs are merged to the least ``(weight, mid, arc)`` (an arc of
  the graph, mid -1, before a shortcut of the same weight). ``G_0`` is the graph (mid -1, arc id).
* SCORE (sec. 3.3; lower contracts first): for ``v`` with in-neighbours ``U`` and out-neighbours
  ``W``, ``needed`` = pairs ``(u, w)``, ``u != w``, with no arc ``u -> w`` of weight
  ``<= w(u,v) + w(v,w)`` (the 1-hop search); ``ED = needed - (|U| + |W|)``, ``deg = |U| + |W|``,
  ``maxnbr`` = largest ``deg`` of a neighbour, ``S`` / ``M`` = sum / max of ``v``'s arc weights,
  ``mean_w`` = overlay weight sum // overlay arcs (at least 1);
  ``cost = 64 ED + 16 deg + 4 maxnbr + 16 S // (max(deg, 1) mean_w) + 16 M // mean_w``.
* SELECT: the ``ceil(C |V_l|)`` nodes of least ``(cost, id)`` are candidates (``C`` as a fraction of
  integers); ``luby_rounds`` rounds of deterministic Luby: an undecided candidate whose key is below
  every undecided or selected candidate neighbour's is selected; undecided neighbours of the nodes
  selected in the round are excluded. ``U_l`` = the selected nodes (independent in ``G_l``).
* SHORTCUT (sec. 3.4, Algorithm 2): for ``v`` in ``U_l``, ``u`` in ``U``, ``w`` in ``W``, ``u != w``,
  ``L = w(u,v) + w(v,w)``: witnessed by an arc ``u -> w`` of weight ``<= L`` (1 hop) or arcs
  ``u -> x -> w`` of length ``< L`` (2 hops, STRICT, so two contracted middles of equal paths cannot
  witness each other); otherwise the shortcut ``(u, w, L, mid=v)``. Every search reads ``G_l``.
* UPDATE / EXTRACT: the arcs of ``G_l`` incident to ``U_l`` become hierarchy arcs; ``G_{l+1}`` =
  ``G_l`` minus ``U_l`` plus the shortcuts (merged).
* Ranks: contraction order, by node id within an iteration; the core last, by node id. Levels: the
  iteration; the core's level is the number of iterations.
* APSP (sec. 3.6): exact distances between the core nodes in the final overlay (Dijkstra from each);
  every finite pair ``a -> b`` is a hierarchy arc: the direct overlay arc's ``(mid, arc)`` when its
  weight is the distance, else ``mid`` = the smallest ``p`` with an overlay arc ``p -> b`` and
  ``dist(a, p) + w(p, b) == dist(a, b)``, ``arc = -1``.

The per-node work (SCORE and SHORTCUT) runs in parallel over nodes (numba ``prange``); the result does
not depend on the number of threads.
"""
from __future__ import annotations

import logging
import time
from fractions import Fraction

import numpy as np
from numba import njit, prange

from .. import config
from ..graph.constants import INF
from ..sssp.dijkstra import dijkstra_one
from .hierarchy import Hierarchy

log = logging.getLogger(__name__)

_INF = INF

#: Step names of the per-iteration timings in ``stats`` (``time_<step>_s`` lists).
STEPS = ("score", "select", "shortcut", "update", "extract")


# ---------------------------------------------------------------------------------------------- parameters
def cuch_params(C=None, K=None, luby_rounds=None):
    """Validate CU-CH's parameters.

    Returns
    -------
    params : dict
        ``{"C": float, "K": int, "luby_rounds": int}`` (defaults from :mod:`gpuroute.config`).
    c_num, c_den : int
        ``C`` as a fraction of integers (``Fraction(C).limit_denominator(10**6)``): the number of
        candidates of an iteration over ``V`` nodes is ``max(1, (c_num V + c_den - 1) // c_den)``.

    Raises
    ------
    ValueError
        ``C`` not in (0, 1], ``K`` < 1, ``luby_rounds`` < 1.
    """
    C = config.CH_SELECTION_FRACTION if C is None else C
    K = config.CH_CORE_CUTOFF if K is None else K
    luby_rounds = config.CH_LUBY_ROUNDS if luby_rounds is None else luby_rounds
    try:
        Cf = float(C)
    except (TypeError, ValueError):
        raise ValueError(f"C must be a number in (0, 1], got {C!r}") from None
    if not 0.0 < Cf <= 1.0:
        raise ValueError(f"C (the selection fraction) must be in (0, 1], got {C!r}")
    frac = Fraction(Cf).limit_denominator(10**6)
    if frac <= 0:
        raise ValueError(f"C={C!r} is below 1e-6, the finest selection fraction")
    if int(K) != K or K < 1:
        raise ValueError(f"K (the core cutoff) must be an integer >= 1, got {K!r}")
    if int(luby_rounds) != luby_rounds or luby_rounds < 1:
        raise ValueError(f"luby_rounds must be an integer >= 1, got {luby_rounds!r}")
    return {"C": Cf, "K": int(K), "luby_rounds": int(luby_rounds)}, frac.numerator, frac.denominator


def n_candidates(n_alive, c_num, c_den):
    """``max(1, ceil(C n_alive))`` in integers."""
    return max(1, (c_num * int(n_alive) + c_den - 1) // c_den)


def new_stats():
    """The per-iteration lists every twin fills (same keys on the CPU and the GPU)."""
    s = {k: [] for k in ("overlay_nodes", "overlay_arcs", "candidates", "selected", "shortcuts", "max_degree")}
    for step in STEPS:
        s[f"time_{step}_s"] = []
    return s


def finish_stats(stats, iterations, core_nodes, apsp_s, n_hierarchy_arcs):
    """Add the totals to ``stats`` (in place) and return it."""
    stats["iterations"] = int(iterations)
    stats["core_nodes"] = int(core_nodes)
    stats["time_apsp_s"] = float(apsp_s)
    stats["hierarchy_arcs"] = int(n_hierarchy_arcs)
    totals = {k: int(sum(stats[k])) for k in ("selected", "shortcuts")}
    for step in STEPS:
        totals[f"time_{step}_s"] = float(sum(stats[f"time_{step}_s"]))
    totals["time_apsp_s"] = float(apsp_s)
    stats["totals"] = totals
    return stats


def assemble(n, contracted, core, arcs, core_dist):
    """The :class:`Hierarchy` from the contraction's outcome (shared by both twins).

    Parameters
    ----------
    n : int
    contracted : list of int ndarray
        ``U_l`` of each iteration, ascending node ids.
    core : int ndarray (c,)
        The core nodes, ascending.
    arcs : list of 5-tuples of ndarray
        ``(tail, head, weight, mid, arc)`` blocks of hierarchy arcs.
    core_dist : int64 ndarray (c, c)
    """
    order = np.concatenate([np.asarray(u, dtype=np.int64) for u in contracted] + [np.asarray(core, dtype=np.int64)])
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n, dtype=np.int64)
    level = np.full(n, len(contracted), dtype=np.int64)
    for lv, u in enumerate(contracted):
        level[np.asarray(u, dtype=np.int64)] = lv
    cols = [np.concatenate([np.asarray(a[i], dtype=np.int64) for a in arcs]) if arcs else np.zeros(0, np.int64)
            for i in range(5)]
    return Hierarchy.from_arcs(n, rank, level, *cols, core=np.asarray(core, dtype=np.int64),
                               core_dist=np.asarray(core_dist, dtype=np.int64))


# ---------------------------------------------------------------------------------------------- kernels
@njit(cache=True, inline="always")
def _find(keys, lo, hi, x):
    """Index of ``x`` in the ascending ``keys[lo:hi]``, or -1."""
    while lo < hi:
        mid = (lo + hi) >> 1
        k = keys[mid]
        if k < x:
            lo = mid + 1
        elif k > x:
            hi = mid
        else:
            return mid
    return -1


@njit(cache=True)
def merge_csr(n, tail, head, weight, mid, arc):
    """The overlay's CSRs from an arc list (int64 arrays): parallel arcs merged to the least
    ``(weight, mid, arc)``, loops dropped.

    Returns
    -------
    ffo : int64 (n+1,), ftail, fhead, fw, fmid, farc : int64 (m,)
        Forward CSR sorted by (tail, head).
    bfo : int64 (n+1,), btail, bw : int64 (m,)
        Backward CSR sorted by (head, tail).
    """
    m = tail.size
    pos = np.zeros(n + 1, dtype=np.int64)
    for e in range(m):
        pos[head[e] + 1] += 1
    for i in range(n):
        pos[i + 1] += pos[i]
    by_head = np.empty(m, dtype=np.int64)
    for e in range(m):
        h = head[e]
        by_head[pos[h]] = e
        pos[h] += 1
    pos[:] = 0
    for e in range(m):
        pos[tail[e] + 1] += 1
    for i in range(n):
        pos[i + 1] += pos[i]
    order = np.empty(m, dtype=np.int64)
    for k in range(m):  # stable: sorted by (tail, head)
        e = by_head[k]
        t = tail[e]
        order[pos[t]] = e
        pos[t] += 1
    ftail = np.empty(m, dtype=np.int64)
    fhead = np.empty(m, dtype=np.int64)
    fw = np.empty(m, dtype=np.int64)
    fmid = np.empty(m, dtype=np.int64)
    farc = np.empty(m, dtype=np.int64)
    cnt = 0
    k = 0
    while k < m:
        b = order[k]
        t = tail[b]
        h = head[b]
        k += 1
        while k < m and tail[order[k]] == t and head[order[k]] == h:
            e = order[k]
            if weight[e] < weight[b] or (weight[e] == weight[b] and (
                    mid[e] < mid[b] or (mid[e] == mid[b] and arc[e] < arc[b]))):
                b = e
            k += 1
        if t == h:
            continue
        ftail[cnt] = t
        fhead[cnt] = h
        fw[cnt] = weight[b]
        fmid[cnt] = mid[b]
        farc[cnt] = arc[b]
        cnt += 1
    ftail, fhead, fw, fmid, farc = ftail[:cnt], fhead[:cnt], fw[:cnt], fmid[:cnt], farc[:cnt]
    ffo = np.zeros(n + 1, dtype=np.int64)
    bfo = np.zeros(n + 1, dtype=np.int64)
    for e in range(cnt):
        ffo[ftail[e] + 1] += 1
        bfo[fhead[e] + 1] += 1
    for i in range(n):
        ffo[i + 1] += ffo[i]
        bfo[i + 1] += bfo[i]
    btail = np.empty(cnt, dtype=np.int64)
    bw = np.empty(cnt, dtype=np.int64)
    pos[:] = bfo
    for e in range(cnt):  # forward order is by tail: stable by head gives (head, tail)
        h = fhead[e]
        btail[pos[h]] = ftail[e]
        bw[pos[h]] = fw[e]
        pos[h] += 1
    return ffo, ftail, fhead, fw, fmid, farc, bfo, btail, bw


@njit(cache=True, parallel=True)
def score(nodes, ffo, fhead, fw, bfo, btail, bw, mean_w):
    """SCORE (see the module doc): int64 cost of each of ``nodes``."""
    cost = np.empty(nodes.size, dtype=np.int64)
    for k in prange(nodes.size):
        v = nodes[k]
        w0 = ffo[v]
        w1 = ffo[v + 1]
        u0 = bfo[v]
        u1 = bfo[v + 1]
        n_w = w1 - w0
        deg = n_w + (u1 - u0)
        s = np.int64(0)
        mx = np.int64(0)
        maxnbr = np.int64(0)
        needed = np.int64(0)
        for a in range(w0, w1):
            x = fhead[a]
            s += fw[a]
            mx = max(mx, fw[a])
            maxnbr = max(maxnbr, ffo[x + 1] - ffo[x] + bfo[x + 1] - bfo[x])
        for b in range(u0, u1):
            u = btail[b]
            wu = bw[b]
            s += wu
            mx = max(mx, wu)
            maxnbr = max(maxnbr, ffo[u + 1] - ffo[u] + bfo[u + 1] - bfo[u])
            c = n_w
            if _find(fhead, w0, w1, u) >= 0:
                c -= 1  # the pair (u, u)
            for a in range(ffo[u], ffo[u + 1]):
                j = _find(fhead, w0, w1, fhead[a])
                if j >= 0 and fw[a] <= wu + fw[j]:
                    c -= 1
            needed += c
        ed = needed - deg
        cost[k] = (64 * ed + 16 * deg + 4 * maxnbr + (16 * s) // (max(deg, 1) * mean_w) + (16 * mx) // mean_w)
    return cost


@njit(cache=True)
def luby(n, cand, cost_of, ffo, fhead, bfo, btail, rounds):
    """SELECT's deterministic Luby rounds over ``cand``; ``cost_of`` int64 (n,) by node id. Returns the
    selected nodes, ascending."""
    state = np.zeros(n, dtype=np.int8)  # 0 not a candidate, 1 undecided, 2 selected, 3 excluded
    for v in cand:
        state[v] = 1
    new = np.zeros(n, dtype=np.bool_)
    for _ in range(rounds):
        for v in cand:
            if state[v] != 1:
                continue
            ok = True
            cv = cost_of[v]
            for a in range(ffo[v], ffo[v + 1]):
                x = fhead[a]
                if (state[x] == 1 or state[x] == 2) and (cost_of[x] < cv or (cost_of[x] == cv and x < v)):
                    ok = False
                    break
            if ok:
                for b in range(bfo[v], bfo[v + 1]):
                    x = btail[b]
                    if (state[x] == 1 or state[x] == 2) and (cost_of[x] < cv or (cost_of[x] == cv and x < v)):
                        ok = False
                        break
            new[v] = ok
        for v in cand:
            if state[v] == 1 and new[v]:
                state[v] = 2
        for v in cand:
            if state[v] != 1:
                continue
            hit = False
            for a in range(ffo[v], ffo[v + 1]):
                if new[fhead[a]]:
                    hit = True
                    break
            if not hit:
                for b in range(bfo[v], bfo[v + 1]):
                    if new[btail[b]]:
                        hit = True
                        break
            if hit:
                state[v] = 3
        for v in cand:
            new[v] = False
    return np.flatnonzero(state == 2)


@njit(cache=True)
def pair_offsets(sel, ffo, bfo):
    """Start of each selected node's ``|U| x |W|`` block of broken paths (int64 (k+1,))."""
    off = np.zeros(sel.size + 1, dtype=np.int64)
    for k in range(sel.size):
        v = sel[k]
        off[k + 1] = off[k] + (bfo[v + 1] - bfo[v]) * (ffo[v + 1] - ffo[v])
    return off


@njit(cache=True, parallel=True)
def shortcut_flags(sel, off, ffo, fhead, fw, bfo, btail, bw):
    """SHORTCUT (Algorithm 2): one flag per broken path ``(u_i, v, w_j)`` at ``off[k] + i |W| + j``,
    1 where no witness exists (a shortcut is needed)."""
    flags = np.zeros(off[-1], dtype=np.uint8)
    for k in prange(sel.size):
        v = sel[k]
        w0 = ffo[v]
        w1 = ffo[v + 1]
        n_w = w1 - w0
        for i in range(bfo[v + 1] - bfo[v]):
            u = btail[bfo[v] + i]
            wu = bw[bfo[v] + i]
            row = off[k] + i * n_w
            for j in range(n_w):
                flags[row + j] = fhead[w0 + j] != u
            for a in range(ffo[u], ffo[u + 1]):
                x = fhead[a]
                j = _find(fhead, w0, w1, x)
                if j >= 0 and fw[a] <= wu + fw[j]:  # 1 hop, not strict
                    flags[row + j - w0] = 0
                if x == v:
                    continue  # u -> v -> w is the broken path itself
                wx = fw[a]
                for a2 in range(ffo[x], ffo[x + 1]):
                    j = _find(fhead, w0, w1, fhead[a2])
                    if j >= 0 and wx + fw[a2] < wu + fw[j]:  # 2 hops, strict
                        flags[row + j - w0] = 0
    return flags


@njit(cache=True)
def emit_shortcuts(sel, off, flags, ffo, fhead, fw, bfo, btail, bw):
    """The flagged broken paths as shortcuts ``(tail, head, weight, mid)``."""
    cnt = 0
    for f in flags:
        cnt += f
    st = np.empty(cnt, dtype=np.int64)
    sh = np.empty(cnt, dtype=np.int64)
    sw = np.empty(cnt, dtype=np.int64)
    sm = np.empty(cnt, dtype=np.int64)
    c = 0
    for k in range(sel.size):
        v = sel[k]
        w0 = ffo[v]
        n_w = ffo[v + 1] - w0
        for i in range(bfo[v + 1] - bfo[v]):
            row = off[k] + i * n_w
            for j in range(n_w):
                if flags[row + j]:
                    st[c] = btail[bfo[v] + i]
                    sh[c] = fhead[w0 + j]
                    sw[c] = bw[bfo[v] + i] + fw[w0 + j]
                    sm[c] = v
                    c += 1
    return st, sh, sw, sm


@njit(cache=True)
def split_arcs(is_sel, ftail, fhead, fw, fmid, farc, st, sh, sw, sm):
    """UPDATE + the input of EXTRACT: the overlay arcs incident to a selected node (hierarchy arcs), and
    the rest plus the shortcuts (the next overlay's arcs, unmerged)."""
    m = ftail.size
    nh = 0
    for e in range(m):
        if is_sel[ftail[e]] or is_sel[fhead[e]]:
            nh += 1
    nk = m - nh + st.size
    h = np.empty((5, nh), dtype=np.int64)
    o = np.empty((5, nk), dtype=np.int64)
    a = 0
    b = 0
    for e in range(m):
        if is_sel[ftail[e]] or is_sel[fhead[e]]:
            h[0, a], h[1, a], h[2, a], h[3, a], h[4, a] = ftail[e], fhead[e], fw[e], fmid[e], farc[e]
            a += 1
        else:
            o[0, b], o[1, b], o[2, b], o[3, b], o[4, b] = ftail[e], fhead[e], fw[e], fmid[e], farc[e]
            b += 1
    for s in range(st.size):
        o[0, b], o[1, b], o[2, b], o[3, b], o[4, b] = st[s], sh[s], sw[s], sm[s], -1
        b += 1
    return h, o


@njit(cache=True, parallel=True)
def core_apsp(core, ffo, fhead, fw, bfo, btail, bw):
    """Distances between the core nodes in the final overlay (whose nodes are exactly ``core``):
    int64 (c, c), INF where unreachable, 0 on the diagonal."""
    n = ffo.size - 1
    c = core.size
    pos = np.full(n, -1, dtype=np.int64)
    for i in range(c):
        pos[core[i]] = i
    cfo = np.zeros(c + 1, dtype=np.int64)
    for i in range(c):
        v = core[i]
        cfo[i + 1] = cfo[i] + ffo[v + 1] - ffo[v]
    chd = np.empty(cfo[c], dtype=np.int64)
    cw = np.empty(cfo[c], dtype=np.int64)
    for i in range(c):
        v = core[i]
        for a in range(ffo[v], ffo[v + 1]):
            chd[cfo[i] + a - ffo[v]] = pos[fhead[a]]
            cw[cfo[i] + a - ffo[v]] = fw[a]
    dist = np.full((c, c), _INF, dtype=np.int64)
    for s in prange(c):
        hd = np.empty(cfo[c] + 1, dtype=np.int64)
        hn = np.empty(cfo[c] + 1, dtype=np.int64)
        pred = np.empty(c, dtype=np.int64)
        dijkstra_one(cfo, chd, cw, s, -1, dist[s], pred, hd, hn)
    return dist


@njit(cache=True)
def core_arcs(core, dist, ffo, fhead, fw, fmid, farc, bfo, btail, bw):
    """The core pairs as hierarchy arcs ``(5, k)``: tail, head, weight = distance, mid, arc (module doc)."""
    n = ffo.size - 1
    c = core.size
    pos = np.full(n, -1, dtype=np.int64)
    for i in range(c):
        pos[core[i]] = i
    k = 0
    for a in range(c):
        for b in range(c):
            if a != b and dist[a, b] != _INF:
                k += 1
    out = np.empty((5, k), dtype=np.int64)
    k = 0
    for a in range(c):
        va = core[a]
        for b in range(c):
            d = dist[a, b]
            if a == b or d == _INF:
                continue
            vb = core[b]
            j = _find(fhead, ffo[va], ffo[va + 1], vb)
            if j >= 0 and fw[j] == d:
                m, r = fmid[j], farc[j]
            else:
                m = -1
                for q in range(bfo[vb], bfo[vb + 1]):
                    p = btail[q]
                    dp = dist[a, pos[p]]
                    if dp != _INF and dp + bw[q] == d and (m < 0 or p < m):
                        m = p
                r = -1
            out[0, k], out[1, k], out[2, k], out[3, k], out[4, k] = va, vb, d, m, r
            k += 1
    return out


# ---------------------------------------------------------------------------------------------- driver
#: Graphs with fewer nodes contract without a progress bar.
_PROGRESS_MIN_NODES = 50_000


def _progress(n, progress):
    """A tqdm bar over the ``n`` nodes (shown after 2 s; it ends at ``n``, the core included, and keeps its
    line, ended by a newline); None for small graphs or ``progress=False``."""
    if not progress or n < _PROGRESS_MIN_NODES:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=n, desc="CU-CH", unit=" nodes", delay=2.0, leave=True)


def build_cuch_cpu(graph, weight=None, *, C=None, K=None, luby_rounds=None, progress=True):
    """Contract ``graph`` by CU-CH on the CPU (numba; the twin of :func:`~gpuroute.ch.cuch_gpu.build_cuch_gpu`).

    Karimi, Koppelman, Michael, "GPU Road Network Graph Contraction and SSSP Query", ICS '19, sec. 3.1-3.6
    and Algorithm 1; every rule is in the module doc.

    Parameters
    ----------
    graph : RoadGraph
    weight : str, optional
        The weight to contract for (default: the graph's first).
    C : float, optional
        Selection fraction in (0, 1] (default ``config.CH_SELECTION_FRACTION``).
    K : int, optional
        Core cutoff >= 1: contraction stops when fewer than ``K`` nodes remain (default
        ``config.CH_CORE_CUTOFF``). The core's ``(c, c)`` distance matrix is dense.
    luby_rounds : int, optional
        Luby rounds of SELECT (default ``config.CH_LUBY_ROUNDS``).
    progress : bool
        A tqdm bar over the nodes contracted on long runs.

    Returns
    -------
    h : Hierarchy
    stats : dict
        Per-iteration lists ``overlay_nodes``, ``overlay_arcs`` (of ``G_l``), ``candidates``,
        ``selected`` (``|U_l|``), ``shortcuts`` (candidate shortcuts found, before merging),
        ``max_degree`` (largest in + out degree in ``G_l``), ``time_<step>_s`` for the steps score,
        select, shortcut, update, extract (seconds); ``iterations``, ``core_nodes``, ``time_apsp_s``,
        ``hierarchy_arcs`` (before merging) and ``totals``.
    params : dict
        ``{"C", "K", "luby_rounds"}``.

    Raises
    ------
    ValueError
        Bad ``C``, ``K`` or ``luby_rounds``.
    KeyError
        Unknown weight.
    """
    params, c_num, c_den = cuch_params(C, K, luby_rounds)
    K, rounds = params["K"], params["luby_rounds"]
    w = np.asarray(graph.weight(weight), dtype=np.int64)
    n = graph.n_nodes
    tail = graph.tail.astype(np.int64)
    head = graph.head.astype(np.int64)
    m = tail.size
    ov = merge_csr(n, tail, head, w, np.full(m, -1, dtype=np.int64), np.arange(m, dtype=np.int64))
    alive = np.ones(n, dtype=np.bool_)
    is_sel = np.zeros(n, dtype=np.bool_)
    cost_of = np.zeros(n, dtype=np.int64)
    stats = new_stats()
    contracted, harcs = [], []
    bar = _progress(n, progress)
    n_alive = n
    try:
        while n_alive >= K:
            ffo, ftail, fhead, fw, fmid, farc, bfo, btail, bw = ov
            nodes = np.flatnonzero(alive)
            t0 = time.perf_counter()
            mean_w = max(1, int(fw.sum()) // fw.size) if fw.size else 1
            cost = score(nodes, ffo, fhead, fw, bfo, btail, bw, np.int64(mean_w))
            t1 = time.perf_counter()
            n_cand = n_candidates(n_alive, c_num, c_den)
            cand = nodes[np.lexsort((nodes, cost))[:n_cand]]
            cost_of[nodes] = cost
            sel = luby(n, cand, cost_of, ffo, fhead, bfo, btail, rounds)
            t2 = time.perf_counter()
            off = pair_offsets(sel, ffo, bfo)
            flags = shortcut_flags(sel, off, ffo, fhead, fw, bfo, btail, bw)
            st, sh, sw, sm = emit_shortcuts(sel, off, flags, ffo, fhead, fw, bfo, btail, bw)
            t3 = time.perf_counter()
            is_sel[sel] = True
            harc, nxt = split_arcs(is_sel, ftail, fhead, fw, fmid, farc, st, sh, sw, sm)
            harcs.append(tuple(harc))
            is_sel[sel] = False
            alive[sel] = False
            t4 = time.perf_counter()
            ov = merge_csr(n, nxt[0], nxt[1], nxt[2], nxt[3], nxt[4])
            t5 = time.perf_counter()
            deg = np.diff(ffo)[nodes] + np.diff(bfo)[nodes]
            for key, val in (("overlay_nodes", n_alive), ("overlay_arcs", fw.size), ("candidates", n_cand),
                             ("selected", sel.size), ("shortcuts", st.size),
                             ("max_degree", int(deg.max()) if deg.size else 0)):
                stats[key].append(int(val))
            for step, dt in zip(STEPS, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4), strict=True):
                stats[f"time_{step}_s"].append(dt)
            contracted.append(sel)
            n_alive -= sel.size
            if bar is not None:
                bar.update(sel.size)
        if bar is not None:  # the core's nodes are ordered by the all-pairs step below: the bar ends at n
            bar.set_postfix_str(f"core {n_alive:,}", refresh=False)
            bar.update(n_alive)
    finally:
        if bar is not None:
            bar.close()
    t0 = time.perf_counter()
    ffo, ftail, fhead, fw, fmid, farc, bfo, btail, bw = ov
    core = np.flatnonzero(alive)
    dist = core_apsp(core, ffo, fhead, fw, bfo, btail, bw)
    carcs = core_arcs(core, dist, ffo, fhead, fw, fmid, farc, bfo, btail, bw)
    harcs.append(tuple(carcs))
    apsp_s = time.perf_counter() - t0
    h = assemble(n, contracted, core, harcs, dist)
    finish_stats(stats, len(contracted), core.size, apsp_s, sum(a[0].size for a in harcs))
    log.info("CU-CH (CPU): %d iterations, %d contracted, core %d, %d shortcuts", len(contracted),
             n - core.size, core.size, stats["totals"]["shortcuts"])
    return h, stats, params


__all__ = ["build_cuch_cpu", "cuch_params", "n_candidates", "STEPS"]
