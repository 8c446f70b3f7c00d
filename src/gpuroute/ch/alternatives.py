"""Via-node alternative routes for an engine without an overlay (its hierarchy's metric, no turn costs):
OSRM's ``alternatives=`` on ``--algorithm ch``.

The admissibility rules are :mod:`gpuroute.crp.alternatives`'s (Abraham, Delling, Goldberg, Werneck,
"Alternative routes in road networks", ACM JEA 18, 2013: bounded stretch, limited sharing, the T-test),
here on the node-based graph: the candidate vias are the nodes settled by both a forward Dijkstra from the
source's options (each at its start cost ``(1 - f) w(a)`` at ``head a``) and a backward Dijkstra from the
target's options (``f w(b)`` at ``tail b``), each run until its queue minimum plus the other side's least
start cost passes ``(1 + stretch)`` times the shortest route's cost (the paper's X-BDV: exact halves, every
admissible via found). Candidates whose tree paths share more than ``sharing`` with the shortest route as a
common prefix and suffix (the paper's sharing from the two trees) are dropped first, the paths of the rest
taken in cost order (a via on a path taken before gives that path: dropped), filtered by stretch and
sharing with the route and the alternatives taken (one compiled pass), then checked exactly; the T-test's
distance comes from the hierarchy's query (:meth:`gpuroute.ch.ContractionHierarchy.query`). The searches run on the graph itself, not on the
hierarchy's search spaces (OSRM's CH variant, X-CHV, looks at fewer vias): their cost grows with the
ball of radius ``(1 + stretch)`` times the route, fine at city and region scale.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..crp.alternatives import settings, t_window
from ..graph.heap import heap_pop, heap_push_grow

__all__ = ["alternatives", "PATHS_PER_TESTED"]

#: Candidate paths read from the searches per path tested (the sharing filter drops most of them first).
PATHS_PER_TESTED = 8


@njit(cache=True)
def _balls(fo, head, w, rfo, rtail, rarc, sn, scost, tn, tcost, stretch):
    """The two bounded searches (see the module notes). Returns ``(best, df, db, pf, pb, sseed, tseed,
    cand, ccost)``: labels (float64 (n,)) and the arc into (``pf``) / out of (``pb``) each node on its tree (-1: a start),
    the option each start node took (-1), and the candidate vias (settled by both, ``df + db <= best (1 +
    stretch)``) sorted by that sum, ties by node."""
    n = fo.size - 1
    df = np.full(n, np.inf)
    db = np.full(n, np.inf)
    pf = np.full(n, -1, np.int64)
    pb = np.full(n, -1, np.int64)
    sf = np.zeros(n, np.bool_)
    sb = np.zeros(n, np.bool_)
    sseed = np.full(n, -1, np.int64)
    tseed = np.full(n, -1, np.int64)
    hk = np.empty(64, np.float64)
    hn = np.empty(64, np.int64)
    hk2 = np.empty(64, np.float64)
    hn2 = np.empty(64, np.int64)
    fs = 0
    bs = 0
    fmin0 = np.inf
    bmin0 = np.inf
    for i in range(sn.size):
        v = sn[i]
        if scost[i] < df[v]:
            df[v] = scost[i]
            sseed[v] = i
            hk, hn, fs = heap_push_grow(hk, hn, fs, scost[i], v)
        fmin0 = min(fmin0, scost[i])
    best = np.inf
    for j in range(tn.size):
        v = tn[j]
        if tcost[j] < db[v]:
            db[v] = tcost[j]
            tseed[v] = j
            hk2, hn2, bs = heap_push_grow(hk2, hn2, bs, tcost[j], v)
        bmin0 = min(bmin0, tcost[j])
    for v in range(n):
        if df[v] + db[v] < best:
            best = df[v] + db[v]
    limit = best * (1.0 + stretch)
    while True:
        while fs > 0 and sf[hn[0]]:  # lazy deletion
            _, _, fs = heap_pop(hk, hn, fs)
        while bs > 0 and sb[hn2[0]]:
            _, _, bs = heap_pop(hk2, hn2, bs)
        fok = fs > 0 and hk[0] + bmin0 <= limit
        bok = bs > 0 and hk2[0] + fmin0 <= limit
        if not fok and not bok:
            break
        if fok and (not bok or hk[0] <= hk2[0]):
            d, u, fs = heap_pop(hk, hn, fs)
            sf[u] = True
            for e in range(fo[u], fo[u + 1]):
                v = head[e]
                nd = d + w[e]
                if nd < df[v]:
                    df[v] = nd
                    pf[v] = e
                    hk, hn, fs = heap_push_grow(hk, hn, fs, nd, v)
                    if nd + db[v] < best:
                        best = nd + db[v]
                        limit = best * (1.0 + stretch)
        else:
            d, u, bs = heap_pop(hk2, hn2, bs)
            sb[u] = True
            for k in range(rfo[u], rfo[u + 1]):
                v = rtail[k]
                e = rarc[k]
                nd = d + w[e]
                if nd < db[v]:
                    db[v] = nd
                    pb[v] = e
                    hk2, hn2, bs = heap_push_grow(hk2, hn2, bs, nd, v)
                    if nd + df[v] < best:
                        best = nd + df[v]
                        limit = best * (1.0 + stretch)
    m = 0
    for v in range(n):
        if sf[v] and sb[v] and df[v] + db[v] <= limit:
            m += 1
    cand = np.empty(m, np.int64)
    ccost = np.empty(m, np.float64)
    m = 0
    for v in range(n):
        if sf[v] and sb[v] and df[v] + db[v] <= limit:
            cand[m] = v
            ccost[m] = df[v] + db[v]
            m += 1
    o = np.argsort(ccost, kind="mergesort")
    return best, df, db, pf, pb, sseed, tseed, cand[o], ccost[o]


@njit(cache=True)
def _shared(cand, df, db, pf, pb, tail, head, on_main):
    """Per candidate via ``v``, the cost its path shares with the shortest route as a common prefix and a
    common suffix (Abraham et al. sec. 4's sharing from the two trees): ``sf(v)``, the forward label of the
    last node of ``v``'s forward tree path whose whole tree path lies on the route (``on_main``: its nodes),
    plus ``sb(v)`` likewise in the backward tree. float64 (len(cand),)."""
    n = df.size
    sf = np.full(n, -1.0)
    sb = np.full(n, -1.0)
    stack = np.empty(n, np.int64)
    out = np.empty(cand.size, np.float64)
    for c in range(cand.size):
        for side in range(2):
            lab = df if side == 0 else db
            par = pf if side == 0 else pb
            memo = sf if side == 0 else sb
            v = cand[c]
            k = 0
            while memo[v] < 0.0:  # up the tree to a node already known (or a root)
                stack[k] = v
                k += 1
                if par[v] < 0:
                    break
                v = tail[par[v]] if side == 0 else head[par[v]]
            for i in range(k - 1, -1, -1):
                x = stack[i]
                if par[x] < 0:
                    memo[x] = lab[x] if on_main[x] else 0.0
                else:
                    y = tail[par[x]] if side == 0 else head[par[x]]
                    memo[x] = lab[x] if (on_main[x] and memo[y] == lab[y]) else memo[y]
        out[c] = sf[cand[c]] + sb[cand[c]]
    return out


@njit(cache=True)
def _chains(cand, limit, pf, pb, tail, head, sseed, tseed):
    """The node paths through the candidate vias in order (the first: the shortest route's), those through a
    node of a path taken before left out, at most ``limit + 1``: ``(cfirst, carcs, cstart, cend, cvia)``, path
    ``j``'s graph arcs ``carcs[cfirst[j]:cfirst[j + 1]]`` from start node ``cstart[j]`` (a source option's
    head) to end node ``cend[j]`` (a target option's tail), ``cvia[j]`` the via's position among them (the
    number of arcs before it)."""
    n = pf.size
    on = np.zeros(n, np.bool_)
    cap = 1024
    carcs = np.empty(cap, np.int64)
    cfirst = np.zeros(limit + 2, np.int64)
    cstart = np.empty(limit + 1, np.int64)
    cend = np.empty(limit + 1, np.int64)
    cvia = np.empty(limit + 1, np.int64)
    k = 0
    used = 0
    for c in range(cand.size):
        if k > limit:
            break
        v = cand[c]
        if on[v]:
            continue
        nf = 0
        x = v
        while pf[x] >= 0:
            x = tail[pf[x]]
            nf += 1
        s = x
        nb = 0
        x = v
        while pb[x] >= 0:
            x = head[pb[x]]
            nb += 1
        t = x
        if sseed[s] < 0 or tseed[t] < 0:
            continue
        while used + nf + nb > cap:
            cap *= 2
            a2 = np.empty(cap, np.int64)
            a2[:used] = carcs[:used]
            carcs = a2
        x = v
        p = used + nf
        on[v] = True
        while pf[x] >= 0:
            p -= 1
            carcs[p] = pf[x]
            x = tail[pf[x]]
            on[x] = True
        x = v
        p = used + nf
        while pb[x] >= 0:
            carcs[p] = pb[x]
            x = head[pb[x]]
            on[x] = True
            p += 1
        used += nf + nb
        cstart[k] = s
        cend[k] = t
        cvia[k] = nf
        k += 1
        cfirst[k] = used
    return cfirst[:k + 1], carcs[:used], cstart[:k], cend[:k], cvia[:k]


@njit(cache=True)
def _next_path(cfirst, carcs, w, s_arc, s_cost, t_arc, t_cost, j, union, share, top):
    """The first path ``>= j`` of :func:`_chains` (``s_arc[p]``, ``s_cost[p]`` / ``t_arc[p]``, ``t_cost[p]``:
    its departure and arrival arcs and pieces) costing at most ``top`` whose pieces on arcs of ``union``
    (sorted) cost at most ``share``; -1 when none."""
    for p in range(j, cfirst.size - 1):
        total = s_cost[p] + t_cost[p]
        shared = 0.0
        x = np.searchsorted(union, s_arc[p])
        if x < union.size and union[x] == s_arc[p]:
            shared += s_cost[p]
        x = np.searchsorted(union, t_arc[p])
        if x < union.size and union[x] == t_arc[p]:
            shared += t_cost[p]
        for i in range(cfirst[p], cfirst[p + 1]):
            total += w[carcs[i]]
            x = np.searchsorted(union, carcs[i])
            if x < union.size and union[x] == carcs[i]:
                shared += w[carcs[i]]
        if total <= top and shared <= share:
            return p
    return -1


def alternatives(e, a, fa, b, fb, *, k=1, main_arcs=None, stretch=None, sharing=None, alpha=None, candidates=None):
    """Up to ``k`` admissible via-node alternatives between the options of two phantoms on the engine's
    hierarchy metric (``e._w``, the engine's weight unit).

    Parameters
    ----------
    e : Engine
    a, fa : int64 (s,), float64 (s,)
        The source's options: arcs and fractions (the route leaves ``a`` at ``fa``).
    b, fb : int64 (t,), float64 (t,)
        The target's options. No arc may be in both (the same-arc case has no via).
    k : int
    main_arcs : int64 array, optional
        The shortest route's arcs (departure and arrival arcs included): sharing is measured against them
        (None: the searches' own shortest path).
    stretch, sharing, alpha, candidates : optional
        As :func:`gpuroute.crp.alternatives.alternatives` (``config.SERVE_ALTERNATIVES_*``).

    Returns
    -------
    list of (arcs int64 (k,), source option, target option, cost float)
        In ascending cost, ``arcs`` from a source option's arc to a target option's arc, ``cost`` in the
        engine's weight unit (``(1 - fa) w(a) + ... + fb w(b)``).

    Raises
    ------
    ValueError
        An arc in both option lists; a negative ``k``.
    """
    stretch, sharing, alpha, candidates = settings(stretch, sharing, alpha, candidates)
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    fa = np.asarray(fa, dtype=np.float64)
    fb = np.asarray(fb, dtype=np.float64)
    if int(k) < 0:
        raise ValueError(f"k must be >= 0, got {k!r}")
    both = np.intersect1d(a, b)
    if both.size:
        raise ValueError(f"arc {int(both[0])} is both a source and a target option (the same-arc case has no via)")
    if int(k) == 0 or a.size == 0 or b.size == 0:
        return []
    g = e.graph
    w, head, tail = e._w, e._head, e._tail
    scost = (1.0 - fa) * w[a]
    tcost = fb * w[b]
    rarc = np.asarray(g.rev_arc, dtype=np.int64)
    best, df, db, pf, pb, sseed, tseed, cand, ccost = _balls(e._fo_all, head, w, e._rfo, e._rev_tail, rarc, head[a], scost,
                                                     tail[b], tcost, stretch)
    if not math.isfinite(best):
        return []
    if main_arcs is not None:  # candidates sharing too much of the route as prefix + suffix: left out first
        on_main = np.zeros(df.size, np.bool_)
        m_arcs = np.asarray(main_arcs, dtype=np.int64)
        on_main[head[m_arcs[:-1]]] = True
        keep = _shared(cand, df, db, pf, pb, tail, head, on_main) <= sharing * best
        keep[:1] = True  # the shortest route's via stays first
        cand = cand[keep]
    cfirst, carcs, cstart, cend, cvia = _chains(cand, PATHS_PER_TESTED * candidates, pf, pb, tail, head, sseed, tseed)
    c_si = sseed[cstart]
    c_ti = tseed[cend]

    def full(j):
        si, ti = int(sseed[cstart[j]]), int(tseed[cend[j]])
        return np.concatenate([[a[si]], carcs[cfirst[j]:cfirst[j + 1]], [b[ti]]]).astype(np.int64), si, ti

    union = np.unique(np.asarray(main_arcs, dtype=np.int64) if main_arcs is not None
                      else (full(0)[0] if cvia.size else np.zeros(0, np.int64)))
    q = e._query()
    out = []
    T = alpha * best
    j = 0
    tested = 0
    while len(out) < int(k) and tested < candidates:
        # the next path within the stretch whose cost shared with the shortest route and the alternatives
        # taken is at most ``sharing`` (one compiled pass over the paths)
        j = _next_path(cfirst, carcs, w, a[c_si], scost[c_si], b[c_ti], tcost[c_ti], j + 1, union, sharing * best,
                       best * (1.0 + stretch))
        if j < 0:
            break
        arcs, si, ti = full(j)
        if np.unique(arcs).size != arcs.size:
            continue
        tested += 1
        whole = np.zeros(arcs.size)  # the whole arcs after the first up to each arc's head (integers: exact)
        np.cumsum(w[arcs[1:]], out=whole[1:])
        cum = scost[si] + whole  # at the head of each arc, the arrival arc counted whole
        cost = float(cum[-2] + tcost[ti])
        pieces = w[arcs].copy()
        pieces[0] = scost[si]
        pieces[-1] = tcost[ti]
        if cost > best * (1.0 + stretch) or float(pieces[np.isin(arcs, union)].sum()) > sharing * best:
            continue  # (never: the same sums as the filter's)
        iv = int(cvia[j])  # the via is the head of arcs[iv]
        x, y = (int(i) for i in t_window(cum, iv, T))
        if x == y:
            continue
        d = float(q.table(np.array([head[arcs[x]]]), np.array([head[arcs[y]]]))[0, 0])
        if d != float(whole[y] - whole[x]):
            continue
        out.append((arcs, si, ti, cost))
        union = np.union1d(union, arcs)
    return out
