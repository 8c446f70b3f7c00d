"""The sequential contraction hierarchy on the CPU (numba): the reference CH of Geisberger, Sanders,
Schultes, Delling, "Contraction Hierarchies: Faster and Simpler Hierarchical Routing in Road Networks",
WEA 2008 (sec. 3: contraction with witness searches; sec. 4: node ordering by a priority with lazy
updates).

The remaining graph (the nodes not yet contracted, with the shortcuts added so far) is held as one
adjacency list per node and direction in a pool of arrays (``_ofs``/``_len``/``_cap`` per node into
``_nb`` node ids, int32, and ``_w`` weights, int64), each list sorted by weight; a list that outgrows
its capacity moves to the end of the pool, and a full pool is repacked into a larger one. The remaining
graph keeps one arc per ordered pair ``(u, w)``: the lighter; on a tie the existing one (so a shortcut
that merely equals an existing arc is not recorded).

Contracting ``v`` (sec. 3): for every in-neighbour ``u`` a bounded Dijkstra from ``u`` in the remaining
graph without ``v`` looks for witnesses to the out-neighbours ``w``; it stops after ``settle_limit``
settled nodes, does not relax arcs out of nodes ``hop_limit`` arcs from ``u``, never goes past the
longest path ``u -> v -> w`` it still has to beat (a scan of a sorted list stops at the first arc that
is too long), and ends as soon as every ``w`` has a witness or is settled. A
shortcut ``u -> w`` (weight ``w(u,v) + w(v,w)``, middle ``v``) is needed unless some path of length
``<=`` that weight was found (any tentative distance is the length of a real path, so a stopped search
errs only towards extra shortcuts, never wrong ones). All of ``v``'s shortcuts are found first, then
``v`` leaves the remaining graph and they go in.

Node order (sec. 4): ``priority(v) = CH_PRIORITY_EDGE_DIFF * (needed shortcuts - in-degree - out-degree)
+ CH_PRIORITY_DELETED * contracted neighbours + CH_PRIORITY_DEPTH * depth``, where ``depth`` is the
search-space depth (``max(depth[x], depth[v] + 1)`` for each neighbour ``x`` when ``v`` is contracted).
The lowest priority goes first, ties by node id (the heap key is ``priority * n + v``). Lazy updates: the
minimum's priority is recomputed (unless nothing was contracted since it was last computed) and it is
contracted only if it is still the minimum, with the shortcuts that recomputation found; after ``v`` is
contracted its neighbours' priorities are recomputed. The needed shortcuts counted are those the witness
searches call for, before merging with existing arcs.

Levels (for PHAST) are computed afterwards from the ranks; they equal the depths above.
"""
from __future__ import annotations

import logging
import time

import numpy as np
from numba import njit

from .. import config
from ..graph.constants import INF
from ..graph.heap import ah_pop, ah_update
from .hierarchy import Hierarchy

log = logging.getLogger(__name__)

_INF = INF
#: Heap position of a node that is not in the heap / of a node the witness search has settled.
_ABSENT = -1
_SETTLED = -2

# Slots of the scalar state array ``st`` carried between contraction chunks.
_OUT_END, _IN_END, _N_SC, _PQ_SIZE, _CONTRACTED, _STAMP, _MAX_DEG = range(7)
_N_STATE = 7


# ----------------------------------------------------------------------------------------- indexed heap
# The node queue: the binary addressable heap of :mod:`gpuroute.graph.heap`, keys ``hk`` and nodes ``hn``
# by slot, the slot of node ``x`` in ``pos[x]`` (the witness search has its own heap, written out in
# :func:`_witness`).
@njit(cache=True, inline="always")
def _heap_push(hk, hn, pos, size, key, x):
    """Insert node ``x`` with ``key``; returns the new size."""
    return ah_update(hk, hn, size, pos, 1, 0, key, x, 1)


@njit(cache=True, inline="always")
def _heap_pop(hk, hn, pos, size):
    """Remove the minimum; returns ``(key, node, new size)`` (the node's slot becomes ``_ABSENT``)."""
    return ah_pop(hk, hn, size, pos, 1, 0, _ABSENT, 1)


@njit(cache=True, inline="always")
def _heap_set(hk, hn, pos, size, x, key):
    """Change the key of node ``x`` (in the heap) to ``key``."""
    ah_update(hk, hn, size, pos, 1, 0, key, x, 1)


# ----------------------------------------------------------------------------------- adjacency pool
@njit(cache=True)
def _find(ofs, ln, nb, x, y):
    """Position in the pool of ``y`` in the list of ``x``, or -1."""
    s = ofs[x]
    for j in range(s, s + ln[x]):
        if nb[j] == y:
            return j
    return -1


@njit(cache=True)
def _remove(ofs, ln, nb, wt, x, y):
    """Remove ``y`` from the list of ``x``, keeping the order; no-op when absent."""
    j = _find(ofs, ln, nb, x, y)
    if j >= 0:
        last = ofs[x] + ln[x] - 1
        for i in range(j, last):
            nb[i] = nb[i + 1]
            wt[i] = wt[i + 1]
        ln[x] -= 1


@njit(cache=True)
def _sink(ofs, nb, wt, x, j):
    """Move the entry at ``j`` towards the front of the list of ``x`` past every heavier entry (the lists
    stay sorted by weight, so that a scan can stop at the first arc that is too long)."""
    s = ofs[x]
    y = nb[j]
    w = wt[j]
    while j > s and wt[j - 1] > w:
        nb[j] = nb[j - 1]
        wt[j] = wt[j - 1]
        j -= 1
    nb[j] = y
    wt[j] = w


@njit(cache=True)
def _repack(ofs, ln, cap, nb, wt, extra):
    """Copy every list into fresh arrays with 50 % slack each and room for ``extra`` more entries."""
    n = ofs.shape[0]
    need = extra
    for x in range(n):
        if ln[x] > 0:
            need += ln[x] + (ln[x] >> 1) + 1
    size = max(2 * need, nb.shape[0])
    nb2 = np.empty(size, dtype=nb.dtype)
    wt2 = np.empty(size, dtype=wt.dtype)
    end = 0
    for x in range(n):
        s = ofs[x]
        k = ln[x]
        for j in range(k):
            nb2[end + j] = nb[s + j]
            wt2[end + j] = wt[s + j]
        ofs[x] = end
        cap[x] = k + (k >> 1) + 1 if k > 0 else 0
        end += cap[x]
    return nb2, wt2, end


@njit(cache=True)
def _append(ofs, ln, cap, nb, wt, end, x, y, w):
    """Append ``(y, w)`` to the list of ``x``; returns the (possibly new) pool and its end."""
    if ln[x] == cap[x]:
        newcap = max(4, 2 * cap[x])
        if end + newcap > nb.shape[0]:
            nb, wt, end = _repack(ofs, ln, cap, nb, wt, newcap)
        if ln[x] == cap[x]:
            s = ofs[x]
            for j in range(ln[x]):
                nb[end + j] = nb[s + j]
                wt[end + j] = wt[s + j]
            ofs[x] = end
            cap[x] = newcap
            end += newcap
    j = ofs[x] + ln[x]
    nb[j] = y
    wt[j] = w
    ln[x] += 1
    _sink(ofs, nb, wt, x, j)
    return nb, wt, end


@njit(cache=True)
def _add_arc(o_ofs, o_len, o_cap, o_nb, o_w, i_ofs, i_len, i_cap, i_nb, i_w, st, u, w, s):
    """Put ``u -> w`` of weight ``s`` into the remaining graph, merging with an existing ``u -> w``
    (the lighter stays; on a tie the existing one). Returns the pools and whether the arc went in."""
    j = _find(o_ofs, o_len, o_nb, u, w)
    if j >= 0:
        if s >= o_w[j]:
            return o_nb, o_w, i_nb, i_w, False
        o_w[j] = s
        _sink(o_ofs, o_nb, o_w, u, j)
        k = _find(i_ofs, i_len, i_nb, w, u)
        i_w[k] = s
        _sink(i_ofs, i_nb, i_w, w, k)
        return o_nb, o_w, i_nb, i_w, True
    o_nb, o_w, st[_OUT_END] = _append(o_ofs, o_len, o_cap, o_nb, o_w, st[_OUT_END], u, w, s)
    i_nb, i_w, st[_IN_END] = _append(i_ofs, i_len, i_cap, i_nb, i_w, st[_IN_END], w, u, s)
    return o_nb, o_w, i_nb, i_w, True


@njit(cache=True)
def _initial_graph(n, first_out, head, weight):
    """The remaining graph at the start: the graph's arcs without loops, parallel arcs merged."""
    o_len = np.zeros(n, dtype=np.int64)
    i_len = np.zeros(n, dtype=np.int64)
    o_cap = np.zeros(n, dtype=np.int64)
    i_cap = np.zeros(n, dtype=np.int64)
    for u in range(n):
        for a in range(first_out[u], first_out[u + 1]):
            if head[a] != u:
                o_cap[u] += 1
                i_cap[head[a]] += 1
    o_ofs = np.zeros(n, dtype=np.int64)
    i_ofs = np.zeros(n, dtype=np.int64)
    oe = 0
    ie = 0
    for x in range(n):
        o_cap[x] += (o_cap[x] >> 1) + 2
        i_cap[x] += (i_cap[x] >> 1) + 2
        o_ofs[x] = oe
        i_ofs[x] = ie
        oe += o_cap[x]
        ie += i_cap[x]
    o_nb = np.empty(2 * oe + 16, dtype=np.int32)
    o_w = np.empty(2 * oe + 16, dtype=np.int64)
    i_nb = np.empty(2 * ie + 16, dtype=np.int32)
    i_w = np.empty(2 * ie + 16, dtype=np.int64)
    st = np.zeros(_N_STATE, dtype=np.int64)
    st[_OUT_END] = oe
    st[_IN_END] = ie
    for u in range(n):
        for a in range(first_out[u], first_out[u + 1]):
            if head[a] != u:
                o_nb, o_w, i_nb, i_w, _ = _add_arc(o_ofs, o_len, o_cap, o_nb, o_w, i_ofs, i_len, i_cap,
                                                   i_nb, i_w, st, u, head[a], np.int64(weight[a]))
    return o_ofs, o_len, o_cap, o_nb, o_w, i_ofs, i_len, i_cap, i_nb, i_w, st


# ----------------------------------------------------------------------------------- witness search
# The witness searches' workspace: ``W`` int64 (n, _N_COLS) with columns _DIST (INF when untouched),
# _SLOT (heap slot, _ABSENT or _SETTLED), _HOPS, _MARK (the stamp of the search a node is a target of) and
# _THR (a target's arc weight from the contracted node), so that a node's search state shares a cache
# line; ``touched``, ``hk``, ``hn`` int64 (n,); ``cnt`` int64 (_N_CNT,): the last stamp and the searches'
# statistics.
_DIST, _SLOT, _HOPS, _MARK, _THR = range(5)
_N_COLS = 5
_C_STAMP, _C_SEARCHES, _C_STOPPED, _C_SETTLED = range(4)
_N_CNT = 4


@njit(cache=True)
def _witness(src, excl, base, n_targets, stamp, t_first, t_end, settle_limit, hop_limit, o_ofs, o_len, o_nb, o_w,
             W, touched, hk, hn):
    """Bounded Dijkstra from ``src`` in the remaining graph without ``excl`` (Geisberger et al. sec. 3).

    Fills ``W[:, _DIST]`` (tentative distances: lengths of real paths avoiding ``excl``) and lists the
    nodes it touched in ``touched``; the caller reads the distances, then calls :func:`_reset`. The
    ``n_targets`` targets are the nodes ``y`` with ``W[y, _MARK] == stamp``, all among the weight-sorted
    ``o_nb[t_first:t_end]``; target ``y`` is decided (and unmarked) once its distance is ``<= base +
    W[y, _THR]`` (a witness) or it is settled (no witness). Ends when every target is decided, the next
    distance exceeds the largest ``base + W[y, _THR]`` of an undecided target or ``settle_limit`` nodes
    are settled; arcs out of nodes ``hop_limit`` arcs from ``src`` are not relaxed. Returns ``(number
    touched, number settled, stopped)``: ``stopped`` when a limit ended the search or cut off a
    relaxation that could have mattered.

    The heap (keys ``hk``, nodes ``hn``, slots in ``W[:, _SLOT]``) is written out here rather than
    called: numba-inlined helpers taking arrays pay an atomic reference count per call (the same search on
    :func:`gpuroute.graph.heap.ah_update` / ``ah_pop`` over ``W.reshape(-1)`` contracted NY 7-8 % slower,
    issue 19).
    """
    top = t_end - 1  # the farthest undecided target is the last one still marked at or before top
    refresh = True
    maxd = 0
    W[src, _DIST] = 0
    W[src, _HOPS] = 0
    touched[0] = src
    nt = 1
    hk[0] = 0
    hn[0] = src
    W[src, _SLOT] = 0
    size = 1
    settled = 0
    left = n_targets
    stopped = False
    while size > 0:
        if refresh:
            while top >= t_first and W[o_nb[top], _MARK] != stamp:
                top -= 1
            maxd = base + o_w[top] if top >= t_first else -1
            refresh = False
        # pop the minimum
        d = hk[0]
        x = hn[0]
        size -= 1
        if size > 0:
            k = hk[size]
            z = hn[size]
            i = 0
            while True:
                c = 2 * i + 1
                if c >= size:
                    break
                if c + 1 < size and hk[c + 1] < hk[c]:
                    c += 1
                if hk[c] >= k:
                    break
                hk[i] = hk[c]
                hn[i] = hn[c]
                W[hn[i], _SLOT] = i
                i = c
            hk[i] = k
            hn[i] = z
            W[z, _SLOT] = i
        W[x, _SLOT] = _SETTLED
        if d > maxd:
            break
        settled += 1
        if W[x, _MARK] == stamp:  # settled without a witness
            W[x, _MARK] = 0
            left -= 1
            if left == 0:
                break
            refresh = base + W[x, _THR] == maxd
        if settled >= settle_limit:
            stopped = True
            break
        cut = W[x, _HOPS] >= hop_limit
        h1 = W[x, _HOPS] + 1
        for j in range(o_ofs[x], o_ofs[x] + o_len[x]):
            nd = d + o_w[j]
            if nd > maxd:
                break  # the list is sorted by weight
            y = o_nb[j]
            if nd >= W[y, _DIST] or y == excl:  # (a settled node has a distance <= d)
                continue
            if cut:
                stopped = True
                break
            if W[y, _DIST] == _INF:
                touched[nt] = y
                nt += 1
            W[y, _DIST] = nd
            W[y, _HOPS] = h1
            # push y, or move it up now that its key decreased
            if W[y, _SLOT] == _ABSENT:
                i = size
                size += 1
            else:
                i = W[y, _SLOT]
            while i > 0:
                p = (i - 1) >> 1
                if hk[p] <= nd:
                    break
                hk[i] = hk[p]
                hn[i] = hn[p]
                W[hn[i], _SLOT] = i
                i = p
            hk[i] = nd
            hn[i] = y
            W[y, _SLOT] = i
            if W[y, _MARK] == stamp and nd <= base + W[y, _THR]:  # a witness
                W[y, _MARK] = 0
                left -= 1
                if left == 0:
                    break
                if base + W[y, _THR] == maxd:
                    refresh = True
        if left == 0:
            break
    return nt, settled, stopped


@njit(cache=True)
def _reset(nt, W, touched):
    for i in range(nt):
        x = touched[i]
        W[x, _DIST] = _INF
        W[x, _SLOT] = _ABSENT


@njit(cache=True)
def _needed(v, record, out_u, out_w, out_s, settle_limit, hop_limit, o_ofs, o_len, o_nb, o_w, i_ofs, i_len,
            i_nb, i_w, W, touched, hk, hn, cnt):
    """The shortcuts that contracting ``v`` needs now (Geisberger et al. sec. 3).

    One witness search per in-neighbour ``u`` (workspace ``W``, ``touched``, ``hk``, ``hn``, ``cnt``),
    reading the remaining graph only. Returns their number; with ``record`` writes them to ``out_u``, ``out_w``, ``out_s`` (tail,
    head, weight), which must hold in-degree x out-degree entries.
    """
    t_first = o_ofs[v]
    t_end = t_first + o_len[v]
    for k in range(t_first, t_end):
        W[o_nb[k], _THR] = o_w[k]
    count = 0
    for ki in range(i_ofs[v], i_ofs[v] + i_len[v]):
        u = i_nb[ki]
        wu = i_w[ki]
        cnt[_C_STAMP] += 1
        stamp = cnt[_C_STAMP]
        nt = 0
        for k in range(t_first, t_end):
            if o_nb[k] != u:
                W[o_nb[k], _MARK] = stamp
                nt += 1
        if nt == 0:
            continue
        n_touched, n_settled, stopped = _witness(u, v, wu, nt, stamp, t_first, t_end, settle_limit, hop_limit,
                                                 o_ofs, o_len, o_nb, o_w, W, touched, hk, hn)
        cnt[_C_SEARCHES] += 1
        cnt[_C_SETTLED] += n_settled
        if stopped:
            cnt[_C_STOPPED] += 1
        for k in range(t_first, t_end):
            w = o_nb[k]
            if w == u:
                continue
            s = wu + o_w[k]
            if W[w, _DIST] > s:
                if record:
                    out_u[count] = u
                    out_w[count] = w
                    out_s[count] = s
                count += 1
        _reset(n_touched, W, touched)
    return count


@njit(cache=True)
def _key(v, n, settle_limit, hop_limit, c_ed, c_del, c_dep, deleted, depth, o_ofs, o_len, o_nb, o_w, i_ofs,
         i_len, i_nb, i_w, W, touched, hk, hn, cnt):
    """Heap key ``priority(v) * n + v`` (Geisberger et al. sec. 4; see the module doc)."""
    dummy = np.zeros(0, dtype=np.int64)
    sc = _needed(v, False, dummy, dummy, dummy, settle_limit, hop_limit, o_ofs, o_len, o_nb, o_w, i_ofs, i_len,
                 i_nb, i_w, W, touched, hk, hn, cnt)
    return _priority(sc, v, n, c_ed, c_del, c_dep, deleted, depth, o_len, i_len)


@njit(cache=True)
def _priority(sc, v, n, c_ed, c_del, c_dep, deleted, depth, o_len, i_len):
    """Heap key of ``v`` when contracting it needs ``sc`` shortcuts."""
    prio = c_ed * (sc - o_len[v] - i_len[v]) + c_del * deleted[v] + c_dep * depth[v]
    return prio * n + v


@njit(cache=True)
def _keys(nodes, k, keys, n, settle_limit, hop_limit, c_ed, c_del, c_dep, deleted, depth, o_ofs, o_len, o_nb, o_w,
          i_ofs, i_len, i_nb, i_w, W, touched, hk, hn, cnt):
    """``keys[j] = _key(nodes[j])`` for ``j < k``."""
    for j in range(k):
        keys[j] = _key(nodes[j], n, settle_limit, hop_limit, c_ed, c_del, c_dep, deleted, depth, o_ofs, o_len,
                       o_nb, o_w, i_ofs, i_len, i_nb, i_w, W, touched, hk, hn, cnt)


@njit(cache=True)
def _initial_queue(n, settle_limit, hop_limit, c_ed, c_del, c_dep, deleted, depth, o_ofs, o_len, o_nb, o_w,
                   i_ofs, i_len, i_nb, i_w, W, touched, hk, hn, cnt, st, pk, pn, ppos):
    """Every node's priority, into the node queue (``pk``, ``pn``, ``ppos``)."""
    nodes = np.arange(n)
    keys = np.empty(n, dtype=np.int64)
    _keys(nodes, n, keys, n, settle_limit, hop_limit, c_ed, c_del, c_dep, deleted, depth, o_ofs, o_len, o_nb, o_w,
          i_ofs, i_len, i_nb, i_w, W, touched, hk, hn, cnt)
    size = 0
    for v in range(n):
        size = _heap_push(pk, pn, ppos, size, keys[v], v)
    st[_PQ_SIZE] = size


@njit(cache=True)
def _grow(a, size):
    b = np.empty(max(size, 2 * a.shape[0] + 16), dtype=a.dtype)
    b[: a.shape[0]] = a
    return b


@njit(cache=True)
def _contract_chunk(stop, n, settle_limit, hop_limit, c_ed, c_del, c_dep, deleted, depth, rank, o_ofs, o_len,
                    o_cap, o_nb, o_w, i_ofs, i_len, i_cap, i_nb, i_w, W, touched, hk, hn, cnt, nmark, fresh, pk,
                    pn, ppos, sc_t, sc_h, sc_w, sc_m, st):
    """Contract nodes in priority order until ``stop`` nodes are contracted (Geisberger et al. sec. 3-4).

    Returns the pools and shortcut arrays (each may have been replaced by a larger one).
    """
    size = st[_PQ_SIZE]
    keys = np.empty(n, dtype=np.int64)
    while st[_CONTRACTED] < stop and size > 0:
        v = pn[0]
        ni = i_len[v]
        no = o_len[v]
        # v's shortcuts on the remaining graph as it is: they give its priority now, and the shortcuts
        # to add if it is still the minimum
        cu = np.empty(ni * no, dtype=np.int64)
        cw = np.empty(ni * no, dtype=np.int64)
        cs = np.empty(ni * no, dtype=np.int64)
        k = _needed(v, True, cu, cw, cs, settle_limit, hop_limit, o_ofs, o_len, o_nb, o_w, i_ofs, i_len, i_nb,
                    i_w, W, touched, hk, hn, cnt)
        if fresh[v] != st[_CONTRACTED]:  # else its key was computed on the remaining graph as it is
            key = _priority(k, v, n, c_ed, c_del, c_dep, deleted, depth, o_len, i_len)
            fresh[v] = st[_CONTRACTED]
            if key != pk[0]:
                _heap_set(pk, pn, ppos, size, v, key)
                if pn[0] != v:
                    continue  # no longer the minimum: re-inserted with its new priority
        _, v, size = _heap_pop(pk, pn, ppos, size)
        if ni + no > st[_MAX_DEG]:
            st[_MAX_DEG] = ni + no
        # v leaves the remaining graph; its neighbours (marked once each) lose one neighbour
        st[_STAMP] += 1
        stamp = st[_STAMP]
        nbrs = np.empty(ni + no, dtype=np.int64)
        nn = 0
        for j in range(i_ofs[v], i_ofs[v] + ni):
            u = i_nb[j]
            _remove(o_ofs, o_len, o_nb, o_w, u, v)
            if nmark[u] != stamp:
                nmark[u] = stamp
                nbrs[nn] = u
                nn += 1
        for j in range(o_ofs[v], o_ofs[v] + no):
            w = o_nb[j]
            _remove(i_ofs, i_len, i_nb, i_w, w, v)
            if nmark[w] != stamp:
                nmark[w] = stamp
                nbrs[nn] = w
                nn += 1
        o_len[v] = 0
        i_len[v] = 0
        for j in range(k):
            o_nb, o_w, i_nb, i_w, added = _add_arc(o_ofs, o_len, o_cap, o_nb, o_w, i_ofs, i_len, i_cap, i_nb, i_w,
                                                   st, cu[j], cw[j], cs[j])
            if added:
                c = st[_N_SC]
                if c == sc_t.shape[0]:
                    sc_t = _grow(sc_t, c + 1)
                    sc_h = _grow(sc_h, c + 1)
                    sc_w = _grow(sc_w, c + 1)
                    sc_m = _grow(sc_m, c + 1)
                sc_t[c] = cu[j]
                sc_h[c] = cw[j]
                sc_w[c] = cs[j]
                sc_m[c] = v
                st[_N_SC] = c + 1
        rank[v] = st[_CONTRACTED]
        st[_CONTRACTED] += 1
        for j in range(nn):
            x = nbrs[j]
            deleted[x] += 1
            if depth[v] + 1 > depth[x]:
                depth[x] = depth[v] + 1
        _keys(nbrs, nn, keys, n, settle_limit, hop_limit, c_ed, c_del, c_dep, deleted, depth, o_ofs, o_len, o_nb,
              o_w, i_ofs, i_len, i_nb, i_w, W, touched, hk, hn, cnt)
        for j in range(nn):
            fresh[nbrs[j]] = st[_CONTRACTED]
            _heap_set(pk, pn, ppos, size, nbrs[j], keys[j])
    st[_PQ_SIZE] = size
    return o_nb, o_w, i_nb, i_w, sc_t, sc_h, sc_w, sc_m


@njit(cache=True)
def _levels(n, rank, tail, head):
    """PHAST levels from the ranks: in increasing rank, ``level[v] = 1 + max level[u]`` over hierarchy
    neighbours ``u`` of lower rank (0 if none). int64 (n,)."""
    m = tail.shape[0]
    lo = np.empty(m, dtype=np.int64)
    hi = np.empty(m, dtype=np.int64)
    for a in range(m):
        if rank[tail[a]] < rank[head[a]]:
            lo[a] = tail[a]
            hi[a] = head[a]
        else:
            lo[a] = head[a]
            hi[a] = tail[a]
    # arcs by the rank of their lower end: when lo's arcs are processed, every arc into lo (whose lower
    # end has a smaller rank) already was, so level[lo] is final
    cnt = np.zeros(n + 1, dtype=np.int64)
    for a in range(m):
        cnt[rank[lo[a]] + 1] += 1
    for r in range(n):
        cnt[r + 1] += cnt[r]
    by = np.empty(m, dtype=np.int64)
    for a in range(m):
        r = rank[lo[a]]
        by[cnt[r]] = a
        cnt[r] += 1
    level = np.zeros(n, dtype=np.int64)
    for i in range(m):
        a = by[i]
        if level[lo[a]] + 1 > level[hi[a]]:
            level[hi[a]] = level[lo[a]] + 1
    return level


# ----------------------------------------------------------------------------------------- public
def build_sequential(graph, weight, *, progress=True, settle_limit=None, hop_limit=None):
    """Contract ``graph`` for ``weight`` in the order of Geisberger, Sanders, Schultes, Delling,
    "Contraction Hierarchies: Faster and Simpler Hierarchical Routing in Road Networks", WEA 2008
    (sec. 3: node contraction with bounded witness searches; sec. 4: node ordering by edge difference,
    deleted neighbours and search-space depth with lazy updates). Sequential, on the CPU (numba).

    Parameters
    ----------
    graph : RoadGraph
        ``n`` nodes, ``m`` arcs. Self-loops (only possible in a graph built from raw CSR arrays) never
        help a shortest path and are left out of the hierarchy; parallel arcs are merged (the lighter).
    weight : str
        Name of the weight to contract for (positive integers in the weight's unit, e.g. DIMACS
        decimetres); the hierarchy's weights are in the same unit.
    progress : bool
        A tqdm bar over the contracted nodes (shown when the contraction takes more than ~2 s).
    settle_limit : int, optional
        A witness search stops after this many settled nodes (default
        ``config.CH_WITNESS_SETTLE_LIMIT``, read at call time).
    hop_limit : int, optional
        A witness search does not relax arcs out of nodes this many arcs from its source (default
        ``config.CH_WITNESS_HOP_LIMIT``).

    Returns
    -------
    h : Hierarchy
        Built with :meth:`Hierarchy.from_arcs`: every arc of the graph (``mid`` -1, ``arc`` its arc id)
        and every shortcut (``mid`` the contracted node, ``arc`` -1); ``rank[v]`` the position of ``v``
        in the contraction order; ``level`` computed from the ranks (in increasing rank, 1 + the largest
        level of a lower-ranked hierarchy neighbour, 0 if none); no core.
    stats : dict
        ``shortcuts`` (shortcuts recorded; the hierarchy may hold fewer after merging parallel arcs),
        ``levels``, ``max_degree`` (largest in- + out-degree of a node in the remaining graph when it
        was contracted, i.e. its number of upward hierarchy arcs), ``witness_searches`` (all, including
        those of priority updates), ``searches_stopped`` (ended by the settle limit, or a relaxation cut
        off by the hop limit), ``witness_settled`` (nodes settled by them), ``time_s`` (total seconds;
        :meth:`ContractionHierarchy.build` replaces it by its own total) and ``phase_time_s`` (seconds
        per phase: ``initial_priorities``, ``contraction``, ``levels``, ``hierarchy`` (the CSRs)).
    params : dict
        ``settle_limit``, ``hop_limit``, ``priority_edge_diff``, ``priority_deleted``,
        ``priority_depth``.

    Raises
    ------
    KeyError
        The graph has no weight ``weight``.
    ValueError
        ``settle_limit`` or ``hop_limit`` below 1.
    """
    w = np.asarray(graph.weight(weight))
    settle_limit = int(config.CH_WITNESS_SETTLE_LIMIT if settle_limit is None else settle_limit)
    hop_limit = int(config.CH_WITNESS_HOP_LIMIT if hop_limit is None else hop_limit)
    if settle_limit < 1:
        raise ValueError(f"settle_limit must be >= 1, got {settle_limit}")
    if hop_limit < 1:
        raise ValueError(f"hop_limit must be >= 1, got {hop_limit}")
    c_ed, c_del, c_dep = (int(config.CH_PRIORITY_EDGE_DIFF), int(config.CH_PRIORITY_DELETED),
                          int(config.CH_PRIORITY_DEPTH))
    params = dict(settle_limit=settle_limit, hop_limit=hop_limit, priority_edge_diff=c_ed,
                  priority_deleted=c_del, priority_depth=c_dep)
    n, m = int(graph.n_nodes), int(graph.n_arcs)
    first_out = np.asarray(graph.first_out, dtype=np.int64)
    head = np.asarray(graph.head, dtype=np.int64)
    w = w.astype(np.int64)
    t_start = time.perf_counter()

    (o_ofs, o_len, o_cap, o_nb, o_w, i_ofs, i_len, i_cap, i_nb, i_w, st) = _initial_graph(n, first_out, head, w)
    deleted = np.zeros(n, dtype=np.int64)
    depth = np.zeros(n, dtype=np.int64)
    rank = np.full(n, -1, dtype=np.int64)
    W = np.zeros((n, _N_COLS), dtype=np.int64)  # the witness searches' workspace (see _witness)
    W[:, _DIST] = _INF
    W[:, _SLOT] = _ABSENT
    touched, hk, hn = (np.empty(n, dtype=np.int64) for _ in range(3))
    cnt = np.zeros(_N_CNT, dtype=np.int64)
    nmark = np.zeros(n, dtype=np.int64)
    fresh = np.zeros(n, dtype=np.int64)  # the number contracted when each key was computed
    pk = np.empty(n, dtype=np.int64)
    pn = np.empty(n, dtype=np.int64)
    ppos = np.full(n, _ABSENT, dtype=np.int64)
    cap = max(16, m)
    sc_t, sc_h, sc_w, sc_m = (np.empty(cap, dtype=np.int64) for _ in range(4))

    _initial_queue(n, settle_limit, hop_limit, c_ed, c_del, c_dep, deleted, depth, o_ofs, o_len, o_nb, o_w,
                   i_ofs, i_len, i_nb, i_w, W, touched, hk, hn, cnt, st, pk, pn, ppos)
    t_init = time.perf_counter()

    from tqdm.auto import tqdm

    chunk = max(1024, n // 200)
    with tqdm(total=n, desc="CH contraction", unit="node", delay=2.0, leave=True,
              disable=not progress) as bar:
        while st[_CONTRACTED] < n:
            before = int(st[_CONTRACTED])
            o_nb, o_w, i_nb, i_w, sc_t, sc_h, sc_w, sc_m = _contract_chunk(
                min(n, before + chunk), n, settle_limit, hop_limit, c_ed, c_del, c_dep, deleted, depth, rank,
                o_ofs, o_len, o_cap, o_nb, o_w, i_ofs, i_len, i_cap, i_nb, i_w, W, touched, hk, hn, cnt, nmark,
                fresh, pk, pn, ppos, sc_t, sc_h, sc_w, sc_m, st)
            bar.update(int(st[_CONTRACTED]) - before)
    t_contract = time.perf_counter()

    ns = int(st[_N_SC])
    loop = np.asarray(graph.tail, dtype=np.int64) == head
    keep = np.flatnonzero(~loop)
    tail = np.concatenate((np.asarray(graph.tail, dtype=np.int64)[keep], sc_t[:ns]))
    hd = np.concatenate((head[keep], sc_h[:ns]))
    level = _levels(n, rank, tail, hd)
    t_levels = time.perf_counter()

    h = Hierarchy.from_arcs(
        n, rank, level, tail, hd,
        np.concatenate((w[keep], sc_w[:ns])),
        np.concatenate((np.full(keep.size, -1, dtype=np.int64), sc_m[:ns])),
        np.concatenate((keep.astype(np.int64), np.full(ns, -1, dtype=np.int64))))
    t_end = time.perf_counter()
    stats = dict(
        shortcuts=ns, levels=h.n_levels, max_degree=int(st[_MAX_DEG]),
        witness_searches=int(cnt[_C_SEARCHES]), searches_stopped=int(cnt[_C_STOPPED]),
        witness_settled=int(cnt[_C_SETTLED]), time_s=t_end - t_start,
        phase_time_s=dict(initial_priorities=t_init - t_start, contraction=t_contract - t_init,
                          levels=t_levels - t_contract, hierarchy=t_end - t_levels))
    log.info("sequential CH of %s (%s): %d nodes, %d shortcuts, %d levels in %.1f s", graph.name, weight, n, ns,
             stats["levels"], stats["time_s"])
    return h, stats, params


__all__ = ["build_sequential"]
