"""The GPU twin of :func:`gpuroute.crp.many_to_many.table` (kernels in ``many_to_many.cu``): the same
turn-aware, traffic-aware many-to-many table between phantom nodes over the customized overlay, the same
signature, the same results bit for bit.

Follows the CPU twin (OSRM's ``many_to_many_mld``; Delling, Goldberg, Pajor, Werneck, "Customizable Route
Planning in Road Networks", Transportation Science 2017, sec. 4), whose module docstring defines the
searches, the int64 fixed-point labels, the phantom seeds, the same-arc cases and the reported costs. Here:

1. **Backward searches, one GPU thread per target** (kernel ``m2m_backward``): each thread runs the CPU
   twin's multi-level Dijkstra to exhaustion, with the same indexed binary heap (same sift order, so the
   same settling order among equal keys and the same parents), and writes its bucket entries ``(state,
   label, parent entry, edge reference, root option, seed?)`` into its own slice of a scratch array.
2. **Buckets**: the slices are compacted (``m2m_compact_entries``) and the entries sorted by ``(state,
   entry id)`` into two CSRs (entries settled by a path, and seed entries) with ``cupy.argsort`` and
   ``cupy.searchsorted``. Within one target the entries keep their order, which is all a forward search's
   ties depend on (a cell's best only changes on a strictly smaller label, and only entries of its own
   target compete for it).
3. **Forward searches, one GPU thread per source** (``m2m_forward``): the CPU twin's forward search,
   joining each settled state's bucket range (and the seed entries at every relaxation into a state) into
   its row of the ``(S, T)`` label, option, entry and meeting arrays; with ``along``, the union tree of the
   source's chosen paths into its slice.
4. **Choice and cost** (``m2m_combine``, one thread per cell): the one-arc legs against the searched label
   and the cost recomputed from the chosen pair exactly as the CPU twin's ``_combine`` (the same float
   operations, each rounded on its own: ``__dmul_rn``/``__dadd_rn``, no fused multiply-add).
5. **Along** (quantities summed along the chosen paths): the CPU twin's own code (``_along_sums``) on the
   host, over the union trees and bucket entries the kernels wrote (the same trees, so the same sums).

Per-thread scratch. A search's records (distance, heap slot, root option, previous record, edge reference,
entry or tree node: 32 bytes, one memory sector) live in an open-addressing hash table of ``H`` slots keyed
by state (linear probing over an int32 key array; at most ``H / 2`` records), its heap in an array of ``H``
keys: memory grows with the search space, not with the graph. A search that fills its table, or its output slice, stops with a status; the driver runs
the searches that stopped again with four times the room (up to the sizes that cannot overflow: ``H >= 2m``,
``m + options + 1`` entries, ``m`` tree nodes), so a wrong answer is never returned. Searches run in
batches that keep the scratch within :data:`gpuroute.config.CRP_TABLE_GPU_SCRATCH_BYTES`; an overlay's
next table starts with the room its last one ended with.

Why one thread per search: a search's choices among equal labels (which option pair, which path) follow
from the exact order of its heap operations, and the table must be the CPU twin's bit for bit, so each
search runs the CPU twin's sequential loop; the parallelism is across searches (one per target, then one
per source). A warp per search that loads a state's edges and probes their records in parallel, then
applies the heap updates in the CPU twin's order, is the next step for tables of few points (not built).

:func:`table` runs the kernels on the GPU; :func:`_emulate` runs the same per-thread loops (numba, one
thread after another) over the same arrays, so the CPU tests check this twin's algorithm and layout (and
tests/crp/test_many_to_many_gpu.py also runs ``many_to_many.cu`` itself, compiled for the host, behind this
module's launcher).
"""
from __future__ import annotations

import threading
import time
import weakref

import numpy as np
from numba import njit

from .. import config
from ..graph.constants import INF
from . import many_to_many as mm
from .many_to_many import join, level_edge, level_edges, put_entry
from .search import ih_pop, ih_update

__all__ = ["table", "release", "hash_find"]

#: Kernel file (relative to the package root).
KERNELS = "crp/many_to_many.cu"
_NO_REF = mm._NO_REF
#: Multiplier of the hash tables' hash (Knuth's multiplicative hashing).
_HASH_MUL = 2654435761
#: Search status: done; the hash table was full; the output slice was full.
_OK, _HASH_FULL, _OUT_FULL = 0, 1, 2
#: What :func:`_relax` returns for a record (``m2m_relax``'s RELAX_NOT_LOWER, RELAX_TABLE_FULL): the label was not
#: lowered; the state needs a new record and the hash table is full.
_NOT_LOWER, _TABLE_FULL = -1, -2
#: Bytes per hash slot (key 4, record 32, heap key 8, heap value 4), per bucket entry of a slice (state 4, label 8, parent 4, reference 8, root 4,
#: seed 1) and per union-tree node (state 4, parent 4, reference 8).
_SLOT_BYTES = 48
#: A record: int64 words ``4x`` (distance) and ``4x + 1`` (edge reference), then int32 halves ``8x + 4`` (heap
#: slot: -1 never queued, -2 settled), ``8x + 5`` (root option), ``8x + 6`` (previous record, local; -1 for a
#: seed label), ``8x + 7`` (backward: the state's bucket entry; forward: its union-tree node) -- 32 bytes,
#: one memory sector per record touched.
_RECORD_WORDS = 4
_ENTRY_BYTES = 29
_NODE_BYTES = 16


# ------------------------------------------------------------------------------------------ emulation
# The kernels of many_to_many.cu, statement for statement, over the same flat arrays; one "thread" (slot)
# after another. A search's steps are the kernels' device functions: _relax (m2m_relax), and the CPU twin's
# level_edges, level_edge, join, put_entry (m2m_level_edges, m2m_level_edge, m2m_join, m2m_put_entry); its heap
# is the CPU twin's (gpuroute.crp.search.ih_update / ih_pop over the search's H slots; m2m_heap_update / _pop).
@njit(cache=True, inline="always")
def hash_find(hkey, base, H, s):
    """Record index (global) of key ``s`` (a state; /match's twin: an arc) in the open-addressing table
    ``[base, base + H)`` of ``hkey`` (int32, -1 free; ``H`` a power of two; linear probing from Knuth's
    multiplicative hash, as the kernels' own), or ``-1 - free slot``. Shared by the GPU twins' emulations
    (this module's and :mod:`gpuroute.engine.match_gpu`'s)."""
    i = (s * _HASH_MUL) & (H - 1)
    while True:
        k = hkey[base + i]
        if k == s:
            return base + i
        if k < 0:
            return -1 - (base + i)
        i = (i + 1) & (H - 1)


@njit(cache=True, _nrt=False)  # no reference counting of its arrays: see many_to_many.level_edges
def _relax(hkey, R, R32, hk, hv, base, H, lim, used, size, s, d, root, prev, ref):
    """``m2m_relax``: label ``d`` for state ``s`` in the search's table ``[base, base + H)`` where it is lower
    than its label (a state without a record has none: a new record, never queued, ``aux`` -1), its heap
    (``hk``, ``hv``: the search's own ``H`` slots, records by local index) keyed to match. Returns
    ``(x, used, size)``: ``x`` the record (global) whose label was lowered, :data:`_NOT_LOWER`, or
    :data:`_TABLE_FULL` where ``s`` needs a new record and the table holds ``lim`` already."""
    x = hash_find(hkey, base, H, s)
    cur = INF if x < 0 else R[4 * x]
    if d >= cur:
        return _NOT_LOWER, used, size
    if x < 0:
        if used >= lim:
            return _TABLE_FULL, used, size
        x = -1 - x
        hkey[x] = s
        R32[8 * x + 4] = -1
        R32[8 * x + 7] = -1
        used += 1
    R[4 * x] = d
    R32[8 * x + 5] = root
    R32[8 * x + 6] = prev
    R[4 * x + 1] = ref
    return x, used, ih_update(hk, hv, R32, 8 * base + 4, size, d, x - base)


@njit(cache=True)
def _emu_backward(items, H, cap, keepT, t_st, t_lab, scale, rfirst, rin, rturn, tcost, tc, exit_idx, cell_base,
                  ent_first, ent_st, ex_first, cq_first, clique, hkey, R, hk, hv,
                  e_state, e_label, e_parent, e_ref, e_root, e_seed, e_cnt, status):
    """``m2m_backward``: slot ``i`` runs the backward search of target ``items[i]``."""
    R32 = R.view(np.int32)
    no = t_st.shape[1]
    lim = H >> 1
    for i in range(items.size):
        t = items[i]
        keep = keepT[t]
        base = i * H
        eb = i * cap
        hks = hk[base:base + H]  # the search's heap (records by local index: slot at R32[8 * (base + r) + 4])
        hvs = hv[base:base + H]
        n = 0
        used = 0
        size = 0
        stat = _OK
        for k in range(no):
            b = t_st[t, k]
            if b < 0:
                continue
            c = t_lab[t, k]
            if n >= cap:
                stat = _OUT_FULL
                break
            put_entry(e_state, e_label, e_parent, e_ref, e_root, e_seed, eb + n, b, c, -1, _NO_REF, k, 1)
            x, used, size = _relax(hkey, R, R32, hks, hvs, base, H, lim, used, size, b, c, k, -1, _NO_REF)
            if x == _TABLE_FULL:
                stat = _HASH_FULL
                break
            if x >= 0:
                R32[8 * x + 7] = n
            n += 1
        while stat == _OK and size > 0:
            d = hks[0]
            r = hvs[0]
            x = base + r
            size = ih_pop(hks, hvs, R32, 8 * base + 4, size)
            b = hkey[x]
            if R32[8 * x + 6] >= 0:
                if n >= cap:
                    stat = _OUT_FULL
                    break
                put_entry(e_state, e_label, e_parent, e_ref, e_root, e_seed, eb + n, b, d,
                          R32[8 * (base + R32[8 * x + 6]) + 7], R[4 * x + 1], R32[8 * x + 5], 0)
                R32[8 * x + 7] = n
                n += 1
            root = R32[8 * x + 5]
            q, lo, hi, start, stride, far = level_edges(b, tc, keep, rfirst, exit_idx, cell_base, cq_first, ex_first,
                                                           ent_first, True)
            for k in range(lo, hi):
                c, a, ref = level_edge(k, q, start, stride, far, rturn, tcost, rin, clique, ent_st, True)
                if c < 0:
                    continue
                y, used, size = _relax(hkey, R, R32, hks, hvs, base, H, lim, used, size, a, d + c * scale, root, r,
                                       ref)
                if y == _TABLE_FULL:
                    stat = _HASH_FULL
                    break
        e_cnt[i] = n
        status[i] = stat


@njit(cache=True)
def _emu_compact_entries(items, cap, off, ok, e_state, e_label, e_parent, e_ref, e_root, e_seed, o_state, o_label,
                         o_parent, o_ref, o_root, o_seed, o_tgt):
    """``m2m_compact_entries``: the entries of every finished slot ``i`` (``ok[i]``) to ``[off[i], off[i + 1])``,
    parents made global."""
    for i in range(items.size):
        if not ok[i]:
            continue
        o0 = off[i]
        n = off[i + 1] - o0
        eb = i * cap
        for x in range(n):
            o_state[o0 + x] = e_state[eb + x]
            o_label[o0 + x] = e_label[eb + x]
            p = e_parent[eb + x]
            o_parent[o0 + x] = p + o0 if p >= 0 else -1
            o_ref[o0 + x] = e_ref[eb + x]
            o_root[o0 + x] = e_root[eb + x]
            o_seed[o0 + x] = e_seed[eb + x] != 0
            o_tgt[o0 + x] = items[i]


@njit(cache=True)
def _emu_forward(items, H, cap, want_tree, keepS, s_st, s_lab, scale, tfirst, tout, tcost, hc, entry_idx, cell_base,
                 ex_first, ex_st, cq_first, clique, b_first, b_tgt, b_lab, b_eid, z_first, z_tgt, z_lab, z_eid, lowb,
                 n_t, hkey, R, hk, hv, o_best, o_root, o_eid, o_xref, o_node, n_state,
                 n_parent, n_ref, n_cnt, status):
    """``m2m_forward``: slot ``i`` runs the forward search of source ``items[i]`` into row ``items[i]`` of the
    flat (S, T) outputs (``o_node`` holds the meeting's record until the union tree replaces it by its node)."""
    R32 = R.view(np.int32)
    no = s_st.shape[1]
    lim = H >> 1
    for i in range(items.size):
        s = items[i]
        keep = keepS[s]
        base = i * H
        nb = i * cap
        hks = hk[base:base + H]  # the search's heap (records by local index: slot at R32[8 * (base + r) + 4])
        hvs = hv[base:base + H]
        row = s * n_t
        for t in range(n_t):
            o_best[row + t] = INF
        used = 0
        size = 0
        stat = _OK
        for k in range(no):
            a = s_st[s, k]
            if a < 0:
                continue
            x, used, size = _relax(hkey, R, R32, hks, hvs, base, H, lim, used, size, a, s_lab[s, k], k, -1, _NO_REF)
            if x == _TABLE_FULL:
                stat = _HASH_FULL
                break
        found = 0
        worst = INF
        pops = 0
        while stat == _OK and size > 0:
            if found == n_t:
                if worst == INF or (pops & 63) == 0:
                    worst = o_best[row]
                    for t in range(1, n_t):
                        if o_best[row + t] > worst:
                            worst = o_best[row + t]
                if hks[0] + lowb >= worst:
                    break
            d = hks[0]
            r = hvs[0]
            x = base + r
            size = ih_pop(hks, hvs, R32, 8 * base + 4, size)
            pops += 1
            v = hkey[x]
            root = R32[8 * x + 5]
            found = join(d, b_first[v], b_first[v + 1], b_tgt, b_lab, b_eid, o_best, o_node, o_xref, o_eid, o_root,
                            row, r, _NO_REF, root, found)
            if R32[8 * x + 6] >= 0:
                found = join(d, z_first[v], z_first[v + 1], z_tgt, z_lab, z_eid, o_best, o_node, o_xref, o_eid,
                                o_root, row, r, _NO_REF, root, found)
            q, lo, hi, start, stride, far = level_edges(v, hc, keep, tfirst, entry_idx, cell_base, cq_first, ex_first,
                                                           ex_first, False)
            for k in range(lo, hi):
                c, y, ref = level_edge(k, q, start, stride, far, tout, tcost, tout, clique, ex_st, False)
                if c < 0:
                    continue
                nd = d + c * scale
                if y != v:
                    found = join(nd, z_first[y], z_first[y + 1], z_tgt, z_lab, z_eid, o_best, o_node, o_xref, o_eid,
                                    o_root, row, r, ref, root, found)
                z, used, size = _relax(hkey, R, R32, hks, hvs, base, H, lim, used, size, y, nd, root, r, ref)
                if z == _TABLE_FULL:
                    stat = _HASH_FULL
                    break
        nn = 0
        if stat == _OK and want_tree:
            for t in range(n_t):
                if o_best[row + t] == INF:
                    continue
                y = o_node[row + t]
                prev = -1
                while True:
                    if R32[8 * (base + y) + 7] >= 0:
                        if prev >= 0:
                            n_parent[nb + prev] = R32[8 * (base + y) + 7]
                        break
                    if nn >= cap:
                        stat = _OUT_FULL
                        break
                    n_state[nb + nn] = hkey[base + y]
                    n_ref[nb + nn] = R[4 * (base + y) + 1]
                    n_parent[nb + nn] = -1
                    R32[8 * (base + y) + 7] = nn
                    if prev >= 0:
                        n_parent[nb + prev] = nn
                    prev = nn
                    nn += 1
                    u = R32[8 * (base + y) + 6]
                    if u < 0:
                        break
                    y = u
                if stat != _OK:
                    break
        if stat == _OK:
            for t in range(n_t):
                if o_best[row + t] == INF:
                    o_root[row + t] = -1
                    o_eid[row + t] = -1
                    o_xref[row + t] = _NO_REF
                    o_node[row + t] = -1
                elif want_tree:
                    o_node[row + t] = R32[8 * (base + o_node[row + t]) + 7]
                else:
                    o_node[row + t] = -1
        n_cnt[i] = nn
        status[i] = stat


@njit(cache=True)
def _emu_compact_nodes(items, cap, off, ok, n_state, n_parent, n_ref, o_state, o_parent, o_ref, o_src):
    """``m2m_compact_nodes``: the union-tree nodes of every finished slot to ``[off[i], off[i + 1])`` (parents
    stay local to their source, as the CPU twin's)."""
    for i in range(items.size):
        if not ok[i]:
            continue
        o0 = off[i]
        nb = i * cap
        for x in range(off[i + 1] - o0):
            o_state[o0 + x] = n_state[nb + x]
            o_parent[o0 + x] = n_parent[nb + x]
            o_ref[o0 + x] = n_ref[nb + x]
            o_src[o0 + x] = items[i]


@njit(cache=True)
def _emu_combine(S, T, o_best, o_root, o_eid, e_root, sa, sf, ta, tf, s_lab, t_lab, scale, cost, out_cost, so, to,
                 same):
    """``m2m_combine``: cell ``(s, t)`` (flat ``s * T + t``): the one-arc legs against the searched label, then
    the winner's cost as the CPU twin's ``_combine`` reports it."""
    os_ = sa.shape[1]
    ot = ta.shape[1]
    for cell in range(S * T):
        s = cell // T
        t = cell - s * T
        lab = o_best[cell]
        dj = -1
        dk = -1
        for j in range(os_):
            a = sa[s, j]
            if a < 0:
                continue
            fa = sf[s, j]
            for k in range(ot):
                if ta[t, k] != a:
                    continue
                fb = tf[t, k]
                if fa <= fb:
                    dl = np.int64(np.rint(scale * (fb - fa) * cost[a]))
                    if dl < lab or (dl == lab and (dk < 0 or k < dk or (k == dk and j < dj))):
                        lab = dl
                        dj = j
                        dk = k
        same[cell] = dk >= 0
        if dk >= 0:
            out_cost[cell] = (tf[t, dk] - sf[s, dj]) * cost[sa[s, dj]]
            so[cell] = dj
            to[cell] = dk
        elif o_best[cell] < INF:
            j = o_root[cell]
            k = e_root[o_eid[cell]]
            p = (o_best[cell] - s_lab[s, j] - t_lab[t, k]) // scale
            out_cost[cell] = (1.0 - sf[s, j]) * cost[sa[s, j]] + np.float64(p) - (1.0 - tf[t, k]) * cost[ta[t, k]]
            so[cell] = j
            to[cell] = k
        else:
            out_cost[cell] = np.inf
            so[cell] = -1
            to[cell] = -1


# ------------------------------------------------------------------------------------------ backends
class _Emulated:
    """The kernels as the numba loops above, NumPy arrays: the CPU tests' view of the GPU twin."""

    device = "emulated"
    xp = np

    def upload(self, x):
        return np.ascontiguousarray(x)

    def host(self, x):
        return np.asarray(x)

    def backward(self, items, H, cap, args, scratch, out):
        _emu_backward(items, H, cap, *args, *scratch, *out)

    def compact_entries(self, items, cap, off, ok, regions, out):
        _emu_compact_entries(items, cap, off, ok, *regions, *out)

    def forward(self, items, H, cap, want_tree, args, scratch, rows, out):
        _emu_forward(items, H, cap, want_tree, *args, *scratch, *rows, *out)

    def compact_nodes(self, items, cap, off, ok, regions, out):
        _emu_compact_nodes(items, cap, off, ok, *regions, *out)

    def combine(self, S, T, args, out):
        _emu_combine(S, T, *args, *out)


class _Device:
    """The kernels of ``many_to_many.cu`` on the GPU (CuPy)."""

    device = "gpu"

    def __init__(self):
        from ..backend import resolve_device
        from ..backend.kernels import load_module

        resolve_device("gpu")  # GPUUnavailableError, with the reason, before CuPy is imported
        import cupy as cp

        self.xp = cp
        mod = load_module(KERNELS)
        self.k = {name: mod.get_function(name) for name in ("m2m_backward", "m2m_compact_entries", "m2m_forward",
                                                             "m2m_compact_nodes", "m2m_combine")}
        self.threads = int(config.CRP_TABLE_GPU_THREADS)
        props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
        self.name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])

    def upload(self, x):
        return self.xp.ascontiguousarray(self.xp.asarray(x))

    def host(self, x):
        return self.xp.asnumpy(x)

    def _launch(self, name, n, args, block=None):
        tb = self.threads if block is None else block
        grid = max(1, -(-int(n) // tb))
        self.k[name]((grid,), (tb,), tuple(args))

    def backward(self, items, H, cap, args, scratch, out):
        keepT, t_st, t_lab = args[:3]
        L, o = keepT.shape[1], keepT.shape[2]
        self._launch("m2m_backward", items.size, (np.int64(items.size), items, np.int64(H), np.int64(cap), np.int32(L),
                                                  np.int32(o), *args[:3], np.int64(args[3]), *args[4:], *scratch, *out))

    def compact_entries(self, items, cap, off, ok, regions, out):
        # one block per slot, its threads stride over the slot's entries
        self.k["m2m_compact_entries"]((max(1, items.size),), (128,),
                                      (np.int64(items.size), items, np.int64(cap), off, ok, *regions, *out))

    def forward(self, items, H, cap, want_tree, args, scratch, rows, out):
        keepS = args[0]
        L, o = keepS.shape[1], keepS.shape[2]
        a = list(args)
        a[3] = np.int64(a[3])  # scale
        a[22] = np.int64(a[22])  # lowb
        a[23] = np.int64(a[23])  # n_t
        self._launch("m2m_forward", items.size, (np.int64(items.size), items, np.int64(H), np.int64(cap),
                                                 np.int32(bool(want_tree)), np.int32(L), np.int32(o), *a, *scratch,
                                                 *rows, *out))

    def compact_nodes(self, items, cap, off, ok, regions, out):
        self.k["m2m_compact_nodes"]((max(1, items.size),), (128,),
                                    (np.int64(items.size), items, np.int64(cap), off, ok, *regions, *out))

    def combine(self, S, T, args, out):
        sa, ta = args[4], args[6]
        a = list(args)
        a[10] = np.int64(a[10])  # scale
        self._launch("m2m_combine", S * T, (np.int64(S), np.int64(T), np.int32(sa.shape[1]), np.int32(ta.shape[1]),
                                            *a, *out), block=256)


_device_lock = threading.Lock()
_device = None
#: Device copies of an overlay's query graph (``id(overlay) -> (weakref, arrays)``) and of a state's costs
#: (``id(state) -> (state, arrays)``, the last few states kept, as the CPU twin's per-state items).
_dev_graph = {}
_dev_state = {}
#: Per overlay, the room ``{"b": (H, cap), "f": (H, cap)}`` its last GPU table's searches ended with.
_room = weakref.WeakKeyDictionary()


def _backend():
    global _device
    with _device_lock:
        if _device is None:
            _device = _Device()
        return _device


def _graph_arrays(kern, overlay):
    """The query graph's arrays on the device (uploaded once per overlay; emulation: the host arrays)."""
    hit = _dev_graph.get(id(overlay)) if kern.device == "gpu" else None
    if hit is not None and hit[0]() is overlay:
        return hit[1]
    qg, topo = overlay._qg, overlay._topo
    up = kern.upload
    arr = {k: up(np.asarray(qg[k], np.int64)) for k in ("rfirst", "rin", "rturn", "tfirst", "tout", "ent_st",
                                                         "ex_st")}
    arr.update({k: up(np.asarray(qg[k], np.int32)) for k in ("hc", "tc", "entry_idx", "exit_idx")})
    arr.update({k: up(np.asarray(topo[k], np.int64)) for k in ("cell_base", "ent_first", "ex_first", "cq_first")})
    if kern.device == "gpu":
        with mm._cache_lock:
            for key in [k for k, v in _dev_graph.items() if v[0]() is None]:
                del _dev_graph[key]
            _dev_graph[id(overlay)] = (weakref.ref(overlay), arr)
    return arr


def _state_arrays(kern, st, cost):
    """The state's clique, query-order turn costs and float arc costs on the device (the last few states)."""
    hit = _dev_state.get(id(st)) if kern.device == "gpu" else None
    if hit is not None and hit[0] is st:
        return hit[1]
    up = kern.upload
    arr = (up(np.asarray(st.clique, np.int64)), up(np.asarray(st.q_turn_cost, np.int64)), up(cost))
    if kern.device == "gpu":
        mm._remember(_dev_state, id(st), (st, arr))
    return arr


def _grow(x, top):
    return int(min(top, 4 * x))


def _pow2(x):
    return 1 << max(0, int(x - 1).bit_length())


def _batches(kern, items, H, per_item):
    """Slices of ``items`` whose scratch (``H`` hash slots and ``per_item`` output bytes each) fits the budget."""
    per = H * _SLOT_BYTES + per_item
    k = max(1, int(config.CRP_TABLE_GPU_SCRATCH_BYTES) // per)
    return [items[i:i + k] for i in range(0, items.size, k)]


def _scratch(xp, n, H):
    """One launch's per-search scratch: the hash tables' keys (-1: empty; one search per slot and launch, so
    no search resets its table), their records (:data:`_RECORD_WORDS` int64 words each) and the heaps."""
    return (xp.full(n * H, -1, np.int32), xp.empty(n * H * _RECORD_WORDS, np.int64), xp.empty(n * H, np.int64),
            xp.empty(n * H, np.int32))


def _csr_by_state(xp, state, mask, m):
    """Offsets (m + 1,) and entry ids of the entries where ``mask`` holds, grouped by state, ids ascending
    within a state (the keys ``state * E + id`` are distinct, so any sort gives this order)."""
    ids = xp.flatnonzero(mask).astype(np.int64)
    key = state[ids] * np.int64(max(1, state.size)) + ids
    ids = ids[xp.argsort(key)]
    first = xp.searchsorted(state[ids], xp.arange(m + 1, dtype=np.int64), side="left").astype(np.int64)
    return first, ids


def _run_rounds(kern, n_items, H0, Hmax, cap0, capmax, per_out, run, what):
    """Run ``run(items, H, cap) -> (status, part)`` over every item, in batches, again with four times the room
    for the items whose search stopped; returns the parts in order, the number of rounds and the room
    ``(H, cap)`` the last round had."""
    pending = np.arange(n_items, dtype=np.int64)
    H, cap = min(H0, Hmax), min(cap0, capmax)
    parts = []
    rounds = 0
    while pending.size:
        rounds += 1
        left = []
        full_h = full_o = False
        for chunk in _batches(kern, pending, H, cap * per_out):
            status, part = run(chunk, H, cap)
            parts.append(part)
            bad = status != _OK
            if bad.any():
                left.append(chunk[bad])
                full_h |= bool((status == _HASH_FULL).any())
                full_o |= bool((status == _OUT_FULL).any())
        if not left:
            break
        if (full_h and H >= Hmax) or (full_o and cap >= capmax) or not (full_h or full_o):
            raise RuntimeError(f"many_to_many_gpu: a {what} search stopped with room for every state "
                               f"(H={H}, cap={cap}): a kernel defect")
        H = _grow(H, Hmax) if full_h else H
        cap = _grow(cap, capmax) if full_o else cap
        pending = np.concatenate(left)
    return parts, rounds, (H, cap)


def _table(kern, overlay, src_arcs, src_frac, dst_arcs, dst_frac, state, along):
    t_all = time.perf_counter()
    xp = kern.xp
    # the checked options and the phantom seeds, exactly as the CPU twin makes them (host, NumPy)
    st, m, sa, sf, ta, tf, qs, scale, cost, seeds = mm.request(overlay, src_arcs, src_frac, dst_arcs, dst_frac,
                                                               state, along)
    S, T = sa.shape[0], ta.shape[0]
    secs = {}
    stats = {"scale": scale, "seconds": secs, "device": kern.device}
    if getattr(kern, "name", None):
        stats["device_name"] = kern.name
    if S == 0 or T == 0:
        return mm.empty_table(S, T, qs, st.metric, stats)
    s_st, t_st, s_lab, t_lab, keepS, keepT = seeds
    t0 = time.perf_counter()
    ga = _graph_arrays(kern, overlay)
    d_clique, d_tcost, d_cost = _state_arrays(kern, st, cost)
    up = kern.upload
    d_sa, d_sf, d_ta, d_tf = up(sa), up(sf), up(ta), up(tf)
    d_s_st, d_t_st, d_s_lab, d_t_lab, d_keepS, d_keepT = up(s_st), up(t_st), up(s_lab), up(t_lab), up(keepS), up(keepT)
    secs["upload"] = time.perf_counter() - t0
    Hmax = _pow2(2 * (m + 1))
    H0 = _pow2(int(config.CRP_TABLE_GPU_HASH_SLOTS))
    # the room the last table on this overlay ended with: its next table starts there (no round lost)
    seen = _room.get(overlay, {})

    # ---- backward searches: bucket entries per target
    t0 = time.perf_counter()
    args_b = (d_keepT, d_t_st, d_t_lab, scale, ga["rfirst"], ga["rin"], ga["rturn"], d_tcost, ga["tc"], ga["exit_idx"],
              ga["cell_base"], ga["ent_first"], ga["ent_st"], ga["ex_first"], ga["cq_first"], d_clique)

    def run_b(chunk, H, cap):
        n = chunk.size
        items = up(chunk)
        regions = (xp.empty(n * cap, np.int32), xp.empty(n * cap, np.int64), xp.empty(n * cap, np.int32),
                   xp.empty(n * cap, np.int64), xp.empty(n * cap, np.int32), xp.empty(n * cap, np.uint8))
        cnt = xp.zeros(n, np.int64)
        status = xp.zeros(n, np.int32)
        kern.backward(items, H, cap, args_b, _scratch(xp, n, H), regions + (cnt, status))
        ok = status == _OK
        off = xp.zeros(n + 1, np.int64)
        off[1:] = xp.cumsum(xp.where(ok, cnt, 0))
        E = int(off[-1])
        out = (xp.empty(E, np.int64), xp.empty(E, np.int64), xp.empty(E, np.int64), xp.empty(E, np.int64),
               xp.empty(E, np.int64), xp.empty(E, np.bool_), xp.empty(E, np.int64))
        kern.compact_entries(items, cap, off, ok, regions, out)
        return kern.host(status), out

    parts, rounds_b, room_b = _run_rounds(kern, T, max(H0, seen.get("b", (0, 0))[0]), Hmax,
                                          max(mm._EST_ENTRIES, seen.get("b", (0, 0))[1]),
                                          m + sa.shape[1] + ta.shape[1] + 1, _ENTRY_BYTES, run_b, "backward")
    base = 0
    fixed = []
    for p in parts:
        e_par = p[2]
        if base:
            e_par = xp.where(e_par >= 0, e_par + base, -1)
        fixed.append(p[:2] + (e_par,) + p[3:])
        base += int(p[0].size)
    e_state, e_label, e_parent, e_ref, e_root, e_seed, e_tgt = (xp.concatenate([p[i] for p in fixed]) for i in range(7))
    E = int(e_state.size)
    buckets = mm.bucket_csrs(lambda state, mask, m: _csr_by_state(xp, state, mask, m), e_state, e_seed, e_tgt,
                             e_label, m)
    secs["backward"] = time.perf_counter() - t0

    # ---- forward searches: every cell's best label, meeting and chosen source option
    t0 = time.perf_counter()
    want_tree = bool(qs)
    rows = tuple(xp.empty(S * T, np.int64) for _ in range(5))  # best, root, eid, xref, node
    args_f = (d_keepS, d_s_st, d_s_lab, scale, ga["tfirst"], ga["tout"], d_tcost, ga["hc"], ga["entry_idx"],
              ga["cell_base"], ga["ex_first"], ga["ex_st"], ga["cq_first"], d_clique, *buckets, T)

    def run_f(chunk, H, cap):
        n = chunk.size
        items = up(chunk)
        c = cap if want_tree else 0
        regions = (xp.empty(n * c, np.int32), xp.empty(n * c, np.int32), xp.empty(n * c, np.int64))
        cnt = xp.zeros(n, np.int64)
        status = xp.zeros(n, np.int32)
        kern.forward(items, H, c, want_tree, args_f, _scratch(xp, n, H), rows, regions + (cnt, status))
        ok = status == _OK
        off = xp.zeros(n + 1, np.int64)
        off[1:] = xp.cumsum(xp.where(ok, cnt, 0))
        N = int(off[-1])
        out = (xp.empty(N, np.int64), xp.empty(N, np.int64), xp.empty(N, np.int64), xp.empty(N, np.int64))
        if N:
            kern.compact_nodes(items, c, off, ok, regions, out)
        return kern.host(status), out

    parts, rounds_f, room_f = _run_rounds(kern, S, max(H0, seen.get("f", (0, 0))[0]), Hmax,
                                          max(mm._EST_NODES, seen.get("f", (0, 0))[1]), m,
                                          _NODE_BYTES if want_tree else 0, run_f, "forward")
    n_state, n_parent, n_ref, n_src = (xp.concatenate([p[i] for p in parts]) for i in range(4))
    secs["forward"] = time.perf_counter() - t0

    # ---- the one-arc legs, and the costs as a route reports them
    t0 = time.perf_counter()
    o_best, o_root, o_eid, o_xref, o_node = rows
    out = (xp.empty(S * T, np.float64), xp.empty(S * T, np.int64), xp.empty(S * T, np.int64),
           xp.empty(S * T, np.bool_))
    kern.combine(S, T, (o_best, o_root, o_eid, e_root, d_sa, d_sf, d_ta, d_tf, d_s_lab, d_t_lab, scale, d_cost), out)
    out_cost, so, to, same = (kern.host(x).reshape(S, T) for x in out)
    secs["combine"] = time.perf_counter() - t0

    sums = ()
    if qs:
        t0 = time.perf_counter()
        h = kern.host
        sums = mm._along_sums(overlay, st, qs, sa, sf, ta, tf, so, to, same, h(o_eid).reshape(S, T),
                              h(o_xref).reshape(S, T), h(o_node).reshape(S, T), h(n_state), h(n_parent), h(n_ref),
                              h(n_src), h(e_state), h(e_parent), h(e_ref), stats)
        secs["along"] = time.perf_counter() - t0
    _room[overlay] = {"b": room_b, "f": (room_f[0], room_f[1] if want_tree else seen.get("f", (0, 0))[1])}
    secs["total"] = time.perf_counter() - t_all
    stats.update(bucket_entries=E, rounds=(rounds_b, rounds_f), union_nodes=int(n_state.size),
                 hash_slots=(room_b[0], room_f[0]))
    return mm.TableResult(out_cost, so, to, same, sums, st.metric, stats)


# ------------------------------------------------------------------------------------------ entry points
def table(overlay, src_arcs, src_frac, dst_arcs, dst_frac, *, state=None, along=()):
    """Many-to-many table between phantom nodes over the customized overlay, on the GPU: the twin of
    :func:`gpuroute.crp.many_to_many.table` (same parameters, same :class:`~gpuroute.crp.many_to_many.TableResult`
    bit for bit; see the module docstring for the kernels).

    Parameters
    ----------
    overlay : Overlay
        Customized.
    src_arcs : array_like of int, shape (S, o)
        Each source's options: graph arc ids, -1 for unused slots.
    src_frac : array_like of float, shape (S, o)
        Fraction of the arc (0 at its tail, 1 at its head) where the source lies.
    dst_arcs, dst_frac : array_like, shape (T, o')
        The same for the targets.
    state : overlay state, optional
        The customization to read (default: the overlay's current one, read once).
    along : sequence of (per_arc, per_turn)
        Quantities to sum along each cell's chosen path (float64 (m,) in graph arc order and (n_turns,) in
        the order of ``overlay.turns``, or None), as the CPU twin's.

    Returns
    -------
    TableResult
        NumPy arrays, as the CPU twin's: ``cost`` float64 (S, T) in the metric's unit (``inf``: no path),
        ``src_option``/``dst_option`` int64 (S, T) (-1: no path), ``same_arc`` bool (S, T), ``along``,
        ``metric``, ``stats`` (the CPU twin's keys, plus ``device`` ("gpu"), ``device_name`` (the CUDA device's),
        ``hash_slots`` (per search, backward and forward) and ``seconds["upload"]``).

    Raises
    ------
    GPUUnavailableError
        Without a usable GPU (CuPy and a CUDA device).
    RuntimeError
        The overlay is not customized.
    ValueError, IndexError, TypeError
        Bad options or ``along`` arrays, named as the CPU twin names them.
    """
    return _table(_backend(), overlay, src_arcs, src_frac, dst_arcs, dst_frac, state, along)


def release():
    """Drop the device copies this module keeps (every overlay's query graph, the last states' costs) and the
    room learnt per overlay, so that their GPU memory returns to CuPy's pool (what ``Engine.close()`` calls).
    Safe without a GPU; the next :func:`table` uploads again."""
    with mm._cache_lock:
        _dev_graph.clear()
        _dev_state.clear()
        _room.clear()


def _emulate(overlay, src_arcs, src_frac, dst_arcs, dst_frac, *, state=None, along=()):
    """:func:`table`'s algorithm and array layout run by the numba emulation of its kernels (CPU, one
    search after another): what the CPU tests check the GPU twin with. ``stats["device"]`` is
    ``"emulated"``."""
    return _table(_Emulated(), overlay, src_arcs, src_frac, dst_arcs, dst_frac, state, along)
