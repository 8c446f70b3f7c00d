"""CU-CH on the GPU (CuPy + ``cuch.cu``): the same hierarchy as the numba twin :mod:`gpuroute.ch.cuch`,
array for array (every rule is in that module's doc).

Karimi, Koppelman, Michael, "GPU Road Network Graph Contraction and SSSP Query", ICS '19, Algorithm 1.
Everything stays on the device, and the host reads a few counts once per iteration (the iteration's
``info`` row, after SELECT). The overlay is two CSRs with original node ids (forward by (tail, head),
backward by (head, tail); ids int32, offsets and weights int64, mids and arc ids int32) whose arc
arrays have a capacity: the arc count lives on the device. Per iteration:

* SCORE: ``cuch_score``, one thread group per node (out-arcs cached in shared memory, 1-hop search),
  or on overlays of high degree ``cuch_score_wide`` (a block per node, a warp per in-neighbour); it
  also writes SELECT's keys ``cost * 2^32 + id`` and the overlay's largest degrees;
* SELECT: the ``ceil(C |V_l|)`` least ``(cost, id)`` are the keys up to the ``ceil(C |V_l|)``-th of
  one key sort (``cuch_mark``; a stable sort of the int64 costs instead when a cost leaves int32), then
  ``luby_rounds`` x (``cuch_luby_decide``, ``cuch_luby_apply``), then a scan (``cuch_sel_reduce``,
  ``cuch_sel_scatter``) lists ``U_l`` and the next overlay's nodes, assigns ranks and levels and the
  places of the hierarchy arcs; one read of the ``info`` row (``|U_l|``, broken paths, ...) sizes the
  rest of the iteration;
* SHORTCUT: ``cuch_shortcut`` (Algorithm 2: 1-hop and strict 2-hop search; a group per node) or, on
  overlays of high degree, ``cuch_shortcut_rows`` (1, 2 or 4 warps per broken-path row ``(u, v)``,
  threads over u's out-arcs: the late iterations have few nodes of high degree) writes one sort key per
  broken path (the shortcut's, or a sentinel when witnessed) straight into EXTRACT's arc list;
* UPDATE: ``cuch_extract_keys`` gives the other arcs of ``G_l`` their keys (a sentinel for the arcs
  incident to ``U_l``) and copies ``U_l``'s arcs to the hierarchy buffers;
* EXTRACT: one key sort (keys only: the arc's index rides in the key's low bits where both fit in 63
  bits, else CuPy's argsort), ``cuch_seg_*`` (a scan) keeps the least ``(w, mid, arc)`` of each run of
  equal ``(tail, head)``, a second key sort gives the backward CSR, ``cuch_offsets`` the offsets.

Buffers are reused across iterations (``_Work``); the per-iteration host work is about 15 kernel
launches and 2-3 sorts, which on NY's late iterations (a thousand nodes) costs more than the GPU work.

APSP: the final overlay as a dense ``(c, c)`` matrix, blocked Floyd-Warshall (``cuch_fw_cross``,
``cuch_fw_rest``), then ``cuch_core_mid`` for the core pairs' middles. The hierarchy is assembled on
the device: a contracted node's up arcs are its out-arcs at contraction (sorted by head) and its down
arcs its in-arcs (sorted by tail), the core's are its pairs, so the CSRs need a scan of the counts and
one gather (``cuch_hgather``, ``cuch_core_fill``), no sort; the arrays come to the host once, into page-
locked memory (CuPy's pinned pool), and become the :class:`~gpuroute.ch.hierarchy.Hierarchy` as they
are (equal to what ``Hierarchy.from_arcs`` builds: hierarchy arcs never repeat a (tail, head) pair).
Step times are CUDA-event times.

Imports without CuPy; :func:`build_cuch_gpu` raises :class:`~gpuroute.backend.GPUUnavailableError`
without a usable GPU.
"""
from __future__ import annotations

import logging
import time

import numpy as np

from ..backend import resolve_device
from ..backend.kernels import load_module
from .cuch import STEPS, cuch_params, finish_stats, n_candidates, new_stats
from .hierarchy import Hierarchy

log = logging.getLogger(__name__)

#: Threads per block of every kernel (cuch.cu's CU_BLOCK).
BLOCK = 256
#: Elements per block of the scans (cuch.cu's SCAN_TILE).
SCAN_TILE = BLOCK * 8
#: Tile side of the blocked Floyd-Warshall (cuch.cu's FW_B).
FW_B = 32
KERNEL_FILE = "ch/cuch.cu"
#: Sort key of a dropped arc (cuch.cu's CU_SENT).
SENT = np.iinfo(np.int64).max

# The per-iteration info row (int64), cuch.cu's I_*.
I_NSEL, I_PAIRS, I_UP, I_DOWN, I_M, I_MAXIN, I_MAXDEG, I_SUMW, I_SHORT, I_OVF = range(10)
I_WIDTH = 16

#: Test hook: take SELECT's exact fallback (a stable sort of the int64 costs) every iteration.
FORCE_EXACT_SELECT = False
#: SCORE's kernel: "group" (a group of lanes per node), "wide" (a block per node) or "auto" (wide when
#: the overlay's mean out-degree, as last read, is at least WIDE_SCORE_DEGREE).
SCORE_MODE = "auto"
WIDE_SCORE_DEGREE = 28
#: SHORTCUT's kernel: "group", "rows" (warps per broken-path row) or "auto" (rows when the selected
#: nodes have at least ROWS_PAIRS_PER_NODE broken paths on average); rows get 1, 2 or 4 warps by the
#: overlay's mean out-degree (below 24, below 48, more).
SHORTCUT_MODE = "auto"
ROWS_PAIRS_PER_NODE = 28
#: Test hook: warps per row of the row form (0: by the mean out-degree).
ROWS_WPR = 0
#: EXTRACT's sorts: pack the arc's index into the key when both fit in 63 bits (one key sort, no index
#: array); False: always sort an index array (the path of very large graphs).
PACK_KEYS = True
#: EXTRACT after G_0 by merging: the old arcs keep their order (the previous overlay's forward and backward
#: CSRs), only the new shortcuts are sorted, and the two merged (``cuch_mg_*``); False: sort every arc twice.
MERGE_SORTED = True
#: ... for iterations whose overlay has at least this many arcs (below, the two sorts are cheaper than the
#: merge's extra launches and its one synchronisation: NY's extract 13.7 -> 20.8 ms when every iteration merged).
MERGE_MIN_ARCS = 4_000_000
#: Initial capacity of the hierarchy-arc buffers, in arcs of the graph (they grow when needed).
HBUF_ARCS_PER_ARC = 2
#: Initial rows of the per-iteration info array (it grows when needed).
INFO_ROWS = 256

_KERNELS = ("cuch_score", "cuch_score_wide", "cuch_mark", "cuch_luby_decide", "cuch_luby_apply", "cuch_sel_reduce",
            "cuch_sel_scatter", "cuch_shortcut", "cuch_shortcut_rows", "cuch_extract_keys", "cuch_input_keys",
            "cuch_seg_reduce",
            "cuch_seg_scatter", "cuch_back", "cuch_offsets", "cuch_core_nodes", "cuch_core_init", "cuch_core_scatter",
            "cuch_fw_cross", "cuch_fw_rest", "cuch_core_mid", "cuch_core_counts", "cuch_core_fill", "cuch_fo_reduce",
            "cuch_fo_scatter", "cuch_hgather", "cuch_mg_count", "cuch_mg_keep_reduce", "cuch_mg_old", "cuch_mg_new",
            "cuch_mg_bold", "cuch_mg_bnew")


def _i64(x):
    return np.int64(x)


def _i32(x):
    return np.int32(x)


def _blocks(count, per_block=BLOCK):
    return (max(1, int(-(-int(count) // per_block))),)


def group_size(max_in_degree):
    """Lanes per node of SCORE and SHORTCUT: ``max(8, 2^ceil(lg D))`` capped at a warp (the paper's
    ``T_l``). Any size gives the same result (lanes stride over the in-arcs)."""
    gs = 8
    while gs < 32 and gs < max_in_degree:
        gs *= 2
    return gs


class Kernels:
    """The kernels of ``cuch.cu`` (compiled once per process), as attributes without the ``cuch_`` prefix."""

    def __init__(self):
        mod = load_module(KERNEL_FILE, (f"-DCU_BLOCK={BLOCK}",))
        for name in _KERNELS:
            setattr(self, name[5:], mod.get_function(name))


class Overlay:
    """An overlay graph on the device: forward CSR ``ffo`` (n+1), ``ftail``, ``fhead``, ``fw``, ``fmid``,
    ``farc``; backward CSR ``bfo`` (n+1), ``btail``, ``bw``, ``bperm`` (forward index of each backward
    arc). The arc arrays have a capacity; ``m`` is the arc count when the host knows it (else None; the
    device has it in ``info[I_M]``)."""

    __slots__ = ("n", "m", "info", "ffo", "ftail", "fhead", "fw", "fmid", "farc", "bfo", "bhead", "btail", "bw",
                 "bperm")

    def arrays(self):
        """The nine arrays of :func:`gpuroute.ch.cuch.merge_csr`'s result, cut to ``m`` arcs."""
        m = self.m
        return (self.ffo, self.ftail[:m], self.fhead[:m], self.fw[:m], self.fmid[:m], self.farc[:m], self.bfo,
                self.btail[:m], self.bw[:m])


class _Work:
    """Device buffers reused across the iterations of a build: ``get`` returns the buffer ``name`` of at
    least ``size`` elements (reallocated, 25 % larger, when too small; kernels take sizes as arguments,
    so no view is cut), ``view`` its first ``size`` elements (for CuPy's sorts)."""

    def __init__(self, cp):
        self.cp = cp
        self.bufs = {}

    def get(self, name, size, dtype):
        a = self.bufs.get(name)
        if a is None or a.size < size:
            a = self.cp.empty(max(1, int(size) + int(size) // 4), dtype=dtype)
            self.bufs[name] = a
        return a

    def view(self, name, size, dtype):
        return self.get(name, size, dtype)[:size]


def _index_bits(n, T):
    """Bits of EXTRACT's packed keys for ``T`` arcs over ``n`` nodes (the arc index's), or -1 when
    ``(tail * n + head) << bits`` would not fit in 63 bits (or packing is off)."""
    ib = max(int(T) - 1, 0).bit_length()
    return ib if PACK_KEYS and max(n * n - 1, 0).bit_length() + ib <= 63 else -1


def _merged_order(cp, kern, work, T, m_old, ckey, ib):
    """EXTRACT's forward order by merging (``MERGE_SORTED``): ``ckey[0:m_old]`` in order but for SENT holes,
    ``ckey[m_old:T]`` the new keys (SENT where witnessed). Returns ``(out, cnt, T')``: the first ``T'`` places
    of what the full sort gives (ib >= 0: the sorted packed keys; else the sorting permutation, -1 where a
    dropped arc sorts), where ``T' = m_old +`` the new keys that are not SENT (the witnessed ones would sort
    after every place read), and the device counters (``cuch_mg_count``'s)."""
    i64 = cp.int64
    b = ckey[m_old:T]
    keep = cp.flatnonzero(b != SENT)  # most broken paths are witnessed: sort only the shortcuts (one sync)
    n_new = int(keep.size)
    T = m_old + n_new
    if n_new == 0:
        bkey = bord = cp.zeros(1, dtype=i64)
    elif ib >= 0:
        bkey = bord = b[keep]
        bkey.sort()
    else:
        bk = b[keep]
        o = cp.argsort(bk)
        bkey, bord = bk[o], keep[o]
    cnt = work.get("mg_cnt", 4, i64)
    kern.mg_count((1,), (1,), (bkey, _i64(n_new), cnt))
    out = work.get("mg_out", T, i64)
    akey = work.get("mg_akey", max(m_old, 1), i64)
    if m_old:
        nb = _blocks(m_old, SCAN_TILE)
        bsum = work.get("mg_bsum", nb[0] * 4, i64)
        kern.mg_keep_reduce(nb, (BLOCK,), (_i64(m_old), ckey, cnt, _i32(0), bsum))  # cnt: a pointer not read
        kern.mg_old(nb, (BLOCK,), (_i64(m_old), ckey, bsum, bkey, _i32(ib), akey, out, cnt))
    kern.mg_new(_blocks(T), (BLOCK,), (_i64(T), _i64(m_old), bkey, bord, _i32(ib), akey, cnt, out))
    return out, cnt, T


def _merged_back(cp, kern, work, T, m_old, n_new, ckey, qof, nk, nq, cnt, bperm, ftail, fhead, n, ib):
    """EXTRACT's backward order by merging: the previous overlay's backward arcs (``bperm``, ``m_old``) that
    are kept, in their order, and the runs of new arcs only (``nk``/``nq``, ``cnt[2]`` of them, written by
    ``cuch_seg_scatter``) sorted apart. Returns what sorting every arc's backward key gives (ib >= 0: the
    sorted packed keys; else the permutation)."""
    i64 = cp.int64
    if ib >= 0:
        if n_new:
            nk[:n_new].sort()
        nks = nqs = nk
    else:
        o = cp.argsort(nk[:n_new]) if n_new else None
        nks = nk[:n_new][o] if n_new else nk
        nqs = nq[:n_new][o] if n_new else nq
    out = work.get("mg_out2", T, i64)
    akey = work.get("mg_akey2", max(m_old, 1), i64)
    if m_old:
        nb = _blocks(m_old, SCAN_TILE)
        bsum = work.get("mg_bsum2", nb[0] * 4, i64)
        kern.mg_keep_reduce(nb, (BLOCK,), (_i64(m_old), ckey, bperm, _i32(1), bsum))
        kern.mg_bold(nb, (BLOCK,), (_i64(m_old), bperm, ckey, qof, ftail, fhead, _i64(n), bsum, nks, _i32(ib), akey,
                                    out, cnt))
    kern.mg_bnew(_blocks(T), (BLOCK,), (_i64(T), nks, nqs, _i32(ib), akey, cnt, out))
    return out


def _merge(cp, kern, work, n, T, ckey, cw, cmid, carc, info, ffo, bfo, nodes=None, n_nodes=0, ib=-1, m_old=None,
           bperm=None):
    """EXTRACT: the overlay of the ``T`` arcs ``(ckey, cw, cmid, carc)`` (key ``tail * n + head``, SENT for
    a dropped arc), parallel arcs merged to the least ``(w, mid, arc)``. Writes ``info[I_M]`` and
    ``info[I_SUMW]`` (``info`` zero there before), and the offsets ``ffo`` / ``bfo`` of every node
    (``nodes`` None) or of the ``n_nodes`` nodes of ``nodes``. No host synchronisation. The overlay's arc
    arrays are ``work``'s buffers (the previous overlay's: it is not read any more). ``ib``: the keys are
    packed with the arc index in ``ib`` bits (:func:`_index_bits`; -1: plain keys); ``ckey`` is sorted
    in place. ``m_old``, ``bperm``: ``ckey[0:m_old]`` are the previous overlay's arcs in its forward order
    (SENT where dropped) and ``bperm`` its backward CSR's forward indices, which is read before the new
    overlay overwrites it (the same buffer): the orders come by merging (:func:`_merged_order`,
    :func:`_merged_back`) instead of two sorts of every arc, the same arrays."""
    i32, i64 = cp.int32, cp.int64
    ov = Overlay()
    ov.n, ov.m, ov.info, ov.ffo, ov.bfo = n, None, info, ffo, bfo
    ov.ftail = work.get("ftail", T, i32)
    ov.fhead = work.get("fhead", T, i32)
    ov.fw = work.get("fw", T, i64)
    ov.fmid = work.get("fmid", T, i32)
    ov.farc = work.get("farc", T, i32)
    ov.bhead = work.get("bhead", T, i32)
    ov.btail = work.get("btail", T, i32)
    ov.bw = work.get("bw", T, i64)
    ov.bperm = work.get("bperm", T, i32)
    if T:
        ckey = ckey[:T]
        merged = m_old is not None and MERGE_SORTED and m_old >= MERGE_MIN_ARCS
        if merged:
            order, cnt, T = _merged_order(cp, kern, work, T, m_old, ckey, ib)
            src = order if ib >= 0 else ckey
            n_new = T - m_old
            qof = work.get("mg_qof", max(m_old, 1), i64)
            nk = work.get("mg_nk", max(n_new, 1), i64)
            nq = work.get("mg_nq", max(n_new, 1), i64)
            nk[:n_new].fill(SENT)
            extra = (_i64(m_old), qof, nk, nq, cnt)
        else:
            if ib >= 0:
                ckey.sort()
                order = src = ckey
            else:
                order = cp.argsort(ckey)
                src = ckey
            extra = (_i64(-1), ckey, ckey, ckey, ckey)  # unused
        nb = _blocks(T, SCAN_TILE)
        ks = work.get("ks", T, i64)
        ke = work.get("ke", T, i64)
        bsum = work.get("bsum_m", nb[0] * 4, i64)
        key2 = work.view("key2", T, i64)
        kern.seg_reduce(nb, (BLOCK,), (_i64(T), src, order, _i32(ib), ks, ke, key2, bsum))
        kern.seg_scatter(nb, (BLOCK,), (_i64(T), ks, ke, cw, cmid, carc, bsum, _i64(n), _i32(ib), info, ov.ftail,
                                        ov.fhead, ov.fw, ov.fmid, ov.farc, key2, *extra))
        del order
        if merged:
            border = _merged_back(cp, kern, work, T, m_old, T - m_old, ckey, qof, nk, nq, cnt, bperm, ov.ftail,
                                  ov.fhead, n, ib)
            if ib >= 0:
                key2 = border
        elif ib >= 0:
            key2.sort()
            border = key2
        else:
            border = cp.argsort(key2)
        kern.back(_blocks(T), (BLOCK,), (_i64(T), key2, border, _i32(ib), ov.ftail, ov.fhead, ov.fw, info, ov.bhead,
                                         ov.btail, ov.bw, ov.bperm))
    full = nodes is None
    cnt = n + 1 if full else n_nodes
    if cnt:
        kern.offsets(_blocks(cnt), (BLOCK,), (_i64(cnt), ov.ftail if full else nodes, _i32(full), ov.ftail, ov.bhead,
                                              info, ffo, bfo))
    return ov


def merge_csr_gpu(cp, kern, n, tail, head, w, mid, arc):
    """Device twin of :func:`gpuroute.ch.cuch.merge_csr` (int32 ids, int64 weights, int32 mid/arc), for the
    tests: returns the :class:`Overlay` with ``m`` set (one synchronisation)."""
    T = int(tail.size)
    t64, h64 = tail.astype(cp.int64), head.astype(cp.int64)
    ib = _index_bits(n, T)
    pk = (t64 * n + h64) << max(ib, 0) | (cp.arange(T, dtype=cp.int64) if ib >= 0 else 0)
    key = cp.where(t64 != h64, pk, SENT).astype(cp.int64)
    info = cp.zeros(I_WIDTH, dtype=cp.int64)
    ov = _merge(cp, kern, _Work(cp), n, T, key, w.astype(cp.int64), mid.astype(cp.int32), arc.astype(cp.int32), info,
                cp.zeros(n + 1, dtype=cp.int64), cp.zeros(n + 1, dtype=cp.int64), ib=ib)
    ov.m = int(info[I_M].get())
    return ov


def mean_weight(fw):
    """SCORE's ``mean_w``: overlay weight sum // overlay arcs, at least 1 (host int)."""
    return max(1, int(fw.sum()) // int(fw.size)) if fw.size else 1


def _score(kern, ov, nodes, k, info, gs, wide, cost, cost_of, skey):
    if wide:
        kern.score_wide((k,), (BLOCK,), (_i64(k), nodes, ov.ffo, ov.fhead, ov.fw, ov.bfo, ov.btail, ov.bw, info, cost,
                                         cost_of, skey))
    else:
        kern.score(_blocks(k, BLOCK // gs), (BLOCK,), (_i64(k), nodes, ov.ffo, ov.fhead, ov.fw, ov.bfo, ov.btail, ov.bw,
                                                       info, _i32(gs), cost, cost_of, skey))


def score_gpu(cp, kern, ov, nodes, gs):
    """SCORE: int64 cost of each of ``nodes`` (int32, device) in the overlay ``ov`` (``m`` known), ``gs``
    lanes per node, or ``gs`` "wide" (a block per node). For the tests."""
    k = int(nodes.size)
    n = ov.n
    info = cp.zeros(I_WIDTH, dtype=cp.int64)
    info[I_M] = ov.m
    info[I_SUMW] = ov.fw[:ov.m].sum()
    cost = cp.empty(k, dtype=cp.int64)
    if k:
        _score(kern, ov, nodes, k, info, 8 if gs == "wide" else gs, gs == "wide", cost, cp.empty(n, dtype=cp.int64),
               cp.empty(k, dtype=cp.int64))
    return cost


def _luby_rounds(kern, ov, nodes, k, state, cost_of, newsel, rounds):
    grid = _blocks(k)
    for r in range(rounds):
        kern.luby_decide(grid, (BLOCK,), (_i64(k), nodes, state, cost_of, ov.ffo, ov.fhead, ov.bfo, ov.btail, newsel,
                                          _i32(r + 1)))
        kern.luby_apply(grid, (BLOCK,), (_i64(k), nodes, state, newsel, ov.ffo, ov.fhead, ov.bfo, ov.btail,
                                         _i32(r + 1)))


def luby_gpu(cp, kern, ov, n, cand, cost_of, rounds):
    """SELECT's Luby rounds over ``cand`` (int32, ascending); ``cost_of`` int64 (n,) by node id.
    Returns the selected nodes (int32, ascending). For the tests."""
    state = cp.zeros(n, dtype=cp.int32)
    state[cand] = 1
    newsel = cp.zeros(n, dtype=cp.int32)
    k = int(cand.size)
    if k:
        _luby_rounds(kern, ov, cand, k, state, cost_of, newsel, rounds)
    return cand[state[cand] == 2]


def _shortcuts(kern, ov, sel, n_sel, off, roff, n_rows, gs, wpr, ib, ebase, pkey, pw, pmid, parc, info):
    """SHORTCUT's launch: ``wpr`` warps per row (the row form) or, with ``wpr`` 0, a group of ``gs`` lanes
    per node; keys packed with ``ib`` bits of index from ``ebase`` (``ib`` -1: plain keys)."""
    if wpr:
        kern.shortcut_rows(_blocks(n_rows, BLOCK // (32 * wpr)), (BLOCK,),
                           (_i64(n_rows), _i64(n_sel), sel, roff, off, ov.ffo, ov.fhead, ov.fw, ov.bfo, ov.btail, ov.bw,
                            _i64(ov.n), _i32(wpr), _i32(ib), _i64(ebase), pkey, pw, pmid, parc, info))
    else:
        kern.shortcut(_blocks(n_sel, BLOCK // gs), (BLOCK,),
                      (_i64(n_sel), sel, off, ov.ffo, ov.fhead, ov.fw, ov.bfo, ov.btail, ov.bw, _i64(ov.n), _i32(gs),
                       _i32(ib), _i64(ebase), pkey, pw, pmid, parc, info))


def shortcuts_gpu(cp, kern, ov, sel, gs):
    """SHORTCUT: the candidate shortcuts around ``sel`` (int32, an independent set), as device arrays
    ``(tail int32, head int32, weight int64, mid int32)``, in the order of the broken paths; ``gs`` lanes
    per node, or ``gs`` "rows1", "rows2", "rows4" (1, 2, 4 warps per broken-path row). For the tests."""
    k = int(sel.size)
    n = ov.n
    s64 = sel.astype(cp.int64)
    nu = ov.bfo[s64 + 1] - ov.bfo[s64]
    sizes = nu * (ov.ffo[s64 + 1] - ov.ffo[s64])
    off = cp.zeros(k + 1, dtype=cp.int64)
    off[1:] = cp.cumsum(sizes)
    roff = cp.zeros(k + 1, dtype=cp.int64)
    roff[1:] = cp.cumsum(nu)
    total, n_rows = int(off[-1]), int(roff[-1])
    key = cp.empty(max(total, 1), dtype=cp.int64)
    w = cp.empty(max(total, 1), dtype=cp.int64)
    mid = cp.empty(max(total, 1), dtype=cp.int32)
    arc = cp.empty(max(total, 1), dtype=cp.int32)
    info = cp.zeros(I_WIDTH, dtype=cp.int64)
    if total:
        rows = isinstance(gs, str)
        _shortcuts(kern, ov, sel, k, off, roff, n_rows, 8 if rows else gs, int(gs[4:]) if rows else 0, -1, 0, key, w,
                   mid, arc, info)
    key, w, mid, arc = key[:total], w[:total], mid[:total], arc[:total]
    keep = key != SENT
    assert bool((arc == -1).all())
    key = key[keep]
    assert int(info[I_SHORT].get()) == int(key.size)
    return (key // n).astype(cp.int32), (key % n).astype(cp.int32), w[keep], mid[keep]


def _core_dense(cp, kern, ov, m, core, c, pos):
    """APSP on the core (the nodes of the final overlay ``ov``, ``m`` arcs; ``pos[v]`` = v's place in
    ``core``): the dense ``(c, c)`` distances and each pair's ``(mid, arc)``."""
    dist = cp.empty((c, c), dtype=cp.int64)
    wd = cp.empty((c, c), dtype=cp.int64)
    md = cp.empty((c, c), dtype=cp.int32)
    ad = cp.empty((c, c), dtype=cp.int32)
    kern.core_init(_blocks(c * c), (BLOCK,), (_i64(c), dist, wd, md, ad))
    if m:
        kern.core_scatter(_blocks(m), (BLOCK,), (_i64(m), ov.ftail, ov.fhead, ov.fw, ov.fmid, ov.farc, pos, _i64(c),
                                                 dist, wd, md, ad))
    _floyd_warshall(kern, dist, c)
    omid = cp.empty((c, c), dtype=cp.int32)
    oarc = cp.empty((c, c), dtype=cp.int32)
    kern.core_mid(_blocks(c * c), (BLOCK,), (_i32(c), core, pos, ov.bfo, ov.btail, ov.bw, dist, wd, md, ad, omid, oarc))
    return dist, omid, oarc


def _floyd_warshall(kern, d, c):
    """Blocked Floyd-Warshall on the dense ``(c, c)`` int64 matrix ``d`` (in place): per round of
    ``FW_B`` pivots, one launch for the diagonal tile with its row and column, one for the rest."""
    nb = -(-c // FW_B)
    for kb in range(nb):
        kern.fw_cross((2 * nb,), (FW_B, FW_B), (_i32(c), _i32(kb), d))
        if nb > 1:
            kern.fw_rest((nb, nb), (FW_B, FW_B), (_i32(c), _i32(kb), d))


def core_gpu(cp, kern, ov, n, core):
    """APSP on the core (the nodes of the final overlay ``ov``, ``m`` known): ``(dist int64 (c, c), [arc
    block])``, the block ``(tail, head, weight, mid, arc)`` of the core pairs (empty list without a core).
    For the tests (the build writes the pairs straight into the hierarchy)."""
    c = int(core.size)
    if c == 0:
        return cp.zeros((0, 0), dtype=cp.int64), []
    pos = cp.empty(n, dtype=cp.int32)
    pos[core] = cp.arange(c, dtype=cp.int32)
    dist, omid, oarc = _core_dense(cp, kern, ov, ov.m, core, c, pos)
    pair = dist != SENT
    diag = cp.arange(c)
    pair[diag, diag] = False
    a, b = cp.nonzero(pair)
    return dist, [(core[a], core[b], dist[a, b], omid[a, b], oarc[a, b])]


# ---------------------------------------------------------------------------------------------- buffers
_EVENTS = []


def _events(k):
    """``k`` CUDA events (timing on), reused across builds."""
    import cupy as cp

    while len(_EVENTS) < k:
        _EVENTS.append(cp.cuda.Event())
    return _EVENTS


class _Growable:
    """Device arrays of one length that grow (by copying) when more is needed."""

    def __init__(self, cp, dtypes, cap):
        self.cp = cp
        self.arrs = [cp.empty(max(int(cap), 1), dtype=d) for d in dtypes]

    def ensure(self, used, need):
        cap = self.arrs[0].size
        if need <= cap:
            return
        new_cap = max(int(need), int(cap * 3 // 2) + 1)
        new = []
        for a in self.arrs:
            b = self.cp.empty(new_cap, dtype=a.dtype)
            if used:
                b[:used] = a[:used]
            new.append(b)
        self.arrs = new


def _to_host(cp, arrays):
    """Copy the device arrays into one block of page-locked host memory (CuPy's pinned pool: the block
    goes back to the pool when the arrays die) with asynchronous copies and one synchronisation; returns
    NumPy arrays over that block (same shapes and dtypes)."""
    offs, total = [], 0
    for a in arrays:
        offs.append(total)
        total += -(-max(int(a.nbytes), 1) // 256) * 256
    mem = cp.cuda.alloc_pinned_memory(max(total, 1))
    stream = cp.cuda.get_current_stream()
    out = []
    for a, off in zip(arrays, offs, strict=True):
        h = np.ndarray(a.shape, dtype=a.dtype, buffer=mem, offset=off)
        if a.nbytes:
            cp.cuda.runtime.memcpyAsync(h.ctypes.data, a.data.ptr, a.nbytes, cp.cuda.runtime.memcpyDeviceToHost,
                                        stream.ptr)
        out.append(h)
    stream.synchronize()
    return out


# ---------------------------------------------------------------------------------------------- build
class _Nodes:
    """Per-node device state of a build (by node id)."""

    def __init__(self, cp, n, m0):
        i32, i64 = cp.int32, cp.int64
        self.cost_of = cp.empty(n, dtype=i64)
        self.state = cp.zeros(n, dtype=i32)  # SELECT: 0 no candidate, 1 undecided, 2 selected, 3 excluded
        self.newsel = cp.zeros(n, dtype=i32)  # Luby: the round tag of the round that picked the node
        self.rank = cp.empty(n, dtype=i32)
        self.order = cp.empty(n, dtype=i32)
        self.level = cp.empty(n, dtype=i32)
        self.hu_start = cp.empty(n, dtype=i64)  # where a contracted node's up / down arcs are in the buffers
        self.hd_start = cp.empty(n, dtype=i64)
        self.hu_cnt = cp.zeros(n, dtype=i32)  # how many (the core's: its pairs)
        self.hd_cnt = cp.zeros(n, dtype=i32)
        hcap = HBUF_ARCS_PER_ARC * m0 + 16
        self.ubuf = _Growable(cp, (i32, i32, i64, i32, i32), hcap)  # owner (tail), head, weight, mid, arc
        self.dbuf = _Growable(cp, (i32, i32, i64, i32, i32), hcap)  # owner (head), tail, weight, mid, arc


def _select(cp, kern, work, ov, nd, nodes, n_alive, cost, skey, n_cand, rounds, info, it, n, up_total, down_total,
            exact):
    """SELECT of iteration ``it`` over the ``n_alive`` nodes of G_l: candidates, Luby, then the scan that
    lists U_l (``sel``) and the next overlay's nodes (``nxt``) and fills ``info[0:4]``. Returns ``(sel,
    nxt, off, roff, row)``, ``row`` the iteration's info row on the host (the one synchronisation)."""
    if exact:  # a stable sort of the int64 costs: ties by position = by id (nodes ascending)
        cand = nodes[cp.argsort(cost[:n_alive])[:n_cand]]
        nd.state[nodes] = 0
        nd.newsel[nodes] = 0
        nd.state[cand] = 1
    else:
        skey[:n_alive].sort()  # in place: the mark recomputes each node's key from cost_of
        kern.mark(_blocks(n_alive), (BLOCK,), (_i64(n_alive), nodes, nd.cost_of, skey, _i64(n_cand - 1), nd.state,
                                               nd.newsel))
    _luby_rounds(kern, ov, nodes, n_alive, nd.state, nd.cost_of, nd.newsel, rounds)
    sel = work.get("sel", n_cand, cp.int32)
    nxt = work.get(f"nxt{it & 1}", n_alive, cp.int32)  # nodes is the other one
    off = work.get("off", n_cand, cp.int64)
    roff = work.get("roff", n_cand, cp.int64)
    nb = _blocks(n_alive, SCAN_TILE)
    bsum = work.get("bsum_s", nb[0] * 4, cp.int64)
    kern.sel_reduce(nb, (BLOCK,), (_i64(n_alive), nodes, nd.state, ov.ffo, ov.bfo, bsum))
    kern.sel_scatter(nb, (BLOCK,), (_i64(n_alive), nodes, nd.state, ov.ffo, ov.bfo, bsum, info, _i64(n - n_alive),
                                    _i64(up_total), _i64(down_total), _i32(it), sel, nxt, off, roff, nd.rank,
                                    nd.order, nd.level, nd.hu_start, nd.hu_cnt, nd.hd_start, nd.hd_cnt))
    return sel, nxt, off, roff, info.get()


def build_cuch_gpu(graph, weight=None, *, C=None, K=None, luby_rounds=None):
    """Contract ``graph`` by CU-CH on the GPU; the same :class:`~gpuroute.ch.hierarchy.Hierarchy`
    (ranks, levels, arcs, core distances) as :func:`gpuroute.ch.cuch.build_cuch_cpu`.

    Parameters
    ----------
    graph : RoadGraph
    weight : str, optional
        Default: the graph's first weight.
    C, K, luby_rounds
        As :func:`~gpuroute.ch.cuch.build_cuch_cpu`.

    Returns
    -------
    h : Hierarchy
        Its arrays live in page-locked host memory from CuPy's pinned pool.
    stats : dict
        The CPU twin's keys; ``time_<step>_s`` are CUDA-event times of each step, seconds (SELECT's
        include the one host read of the iteration). Also ``host_time_<step>_s`` (host wall clock of
        each step's launches; SELECT's includes waiting for the device), ``broken_paths`` (per
        iteration), ``time_g0_s`` (building G_0, CUDA events) and ``wall_s`` (host wall clock of setup,
        loop, core and CSRs, copy to the host).
    params : dict

    Raises
    ------
    GPUUnavailableError
        Without CuPy or a CUDA device.
    ValueError
        Bad ``C``, ``K`` or ``luby_rounds``; more arcs than int32 arc ids hold.
    KeyError
        Unknown weight.
    """
    params, c_num, c_den = cuch_params(C, K, luby_rounds)
    resolve_device("gpu")
    import cupy as cp

    K, rounds = params["K"], params["luby_rounds"]
    t_start = time.perf_counter()
    g0 = _events(2)[:2]
    kern = Kernels()
    n = int(graph.n_nodes)
    m0 = int(graph.n_arcs)
    if m0 >= 2**31 - 1:
        raise ValueError(f"{m0} arcs exceed the int32 arc ids of the GPU contraction")
    i32, i64 = cp.int32, cp.int64

    # ---- G_0
    g0[0].record()
    istats = cp.zeros((max(2, INFO_ROWS), I_WIDTH), dtype=i64)
    ckey = cp.empty(m0, dtype=i64)
    cmid = cp.empty(m0, dtype=i32)
    carc = cp.empty(m0, dtype=i32)
    tail_d = cp.asarray(graph.tail, dtype=i32)
    head_d = cp.asarray(graph.head, dtype=i32)
    cw = cp.asarray(graph.weight(weight)).astype(i64)
    ib = _index_bits(n, m0)
    if m0:
        kern.input_keys(_blocks(m0), (BLOCK,), (_i64(m0), tail_d, head_d, _i64(n), _i32(ib), ckey, cmid, carc))
    work = _Work(cp)
    ov = _merge(cp, kern, work, n, m0, ckey, cw, cmid, carc, istats[0], cp.empty(n + 1, dtype=i64),
                cp.empty(n + 1, dtype=i64), ib=ib)
    del ckey, cw, cmid, carc, tail_d, head_d
    nd = _Nodes(cp, n, m0)
    g0[1].record()
    t_g0 = time.perf_counter()

    stats = new_stats()
    nodes = cp.arange(n, dtype=i32)
    n_alive, it, up_total, down_total, gs_score, m_prev, n_prev = n, 0, 0, 0, 8, m0, max(n, 1)
    n_ev = len(STEPS) + 1
    ev_used = []
    while n_alive >= K:
        if it + 2 > istats.shape[0]:
            grown = cp.zeros((2 * istats.shape[0], I_WIDTH), dtype=i64)
            grown[:istats.shape[0]] = istats
            istats = grown
        info = istats[it]
        ev = _events((it + 1) * n_ev + 2)[2 + it * n_ev:2 + (it + 1) * n_ev]
        ev_used.append(ev)
        ev[0].record()
        th = [time.perf_counter()]
        # ---- SCORE
        cost = work.get("cost", n_alive, i64)
        skey = work.get("skey", n_alive, i64)
        wide = SCORE_MODE == "wide" or (SCORE_MODE == "auto" and m_prev >= WIDE_SCORE_DEGREE * n_prev)
        _score(kern, ov, nodes, n_alive, info, gs_score, wide, cost, nd.cost_of, skey)
        ev[1].record()
        th.append(time.perf_counter())
        # ---- SELECT
        n_cand = n_candidates(n_alive, c_num, c_den)
        args = (cp, kern, work, ov, nd, nodes, n_alive, cost, skey, n_cand, rounds, info, it, n, up_total, down_total)
        sel, nxt, off, roff, row = _select(*args, FORCE_EXACT_SELECT)
        if row[I_OVF] and not FORCE_EXACT_SELECT:  # a cost outside int32: the packed keys are not exact
            sel, nxt, off, roff, row = _select(*args, True)
        ev[2].record()
        th.append(time.perf_counter())
        n_sel, n_pairs, n_up, n_down = int(row[I_NSEL]), int(row[I_PAIRS]), int(row[I_UP]), int(row[I_DOWN])
        m = int(row[I_M])
        ov.m = m
        # ---- SHORTCUT
        T = m + n_pairs
        ckey = work.get("ckey", T, i64)
        cw = work.get("cw", T, i64)
        cmid = work.get("cmid", T, i32)
        carc = work.get("carc", T, i32)
        gs = group_size(int(row[I_MAXIN]))
        ib = _index_bits(n, T)
        if n_pairs:
            wpr = 0
            if SHORTCUT_MODE == "rows" or (SHORTCUT_MODE == "auto" and n_pairs >= ROWS_PAIRS_PER_NODE * n_sel):
                wpr = ROWS_WPR or (1 if m < 24 * n_alive else 2 if m < 48 * n_alive else 4)
            _shortcuts(kern, ov, sel, n_sel, off, roff, n_down, gs, wpr, ib, m, ckey, cw, cmid, carc, info)
        ev[3].record()
        th.append(time.perf_counter())
        # ---- UPDATE: the other arcs of G_l keep their keys; U_l's arcs to the hierarchy buffers
        nd.ubuf.ensure(up_total, up_total + n_up)
        nd.dbuf.ensure(down_total, down_total + n_down)
        if m:
            kern.extract_keys(_blocks(m), (BLOCK,), (_i64(m), ov.ftail, ov.fhead, ov.fw, ov.fmid, ov.farc, ov.ffo, ov.bfo,
                                                     ov.bhead, ov.btail, ov.bw, ov.bperm, nd.state, _i64(n), _i32(ib),
                                                     ckey, cw,
                                                     cmid, carc, nd.hu_start, nd.hd_start, *nd.ubuf.arrs,
                                                     *nd.dbuf.arrs))
        ev[4].record()
        th.append(time.perf_counter())
        # ---- EXTRACT
        n_next = n_alive - n_sel
        ov = _merge(cp, kern, work, n, T, ckey, cw, cmid, carc, istats[it + 1], ov.ffo, ov.bfo, nxt, n_next, ib,
                    m_old=m, bperm=ov.bperm)
        del ckey, cw, cmid, carc
        ev[5].record()
        th.append(time.perf_counter())
        for key, val in (("overlay_nodes", n_alive), ("overlay_arcs", m), ("candidates", n_cand), ("selected", n_sel),
                         ("max_degree", int(row[I_MAXDEG])), ("broken_paths", n_pairs)):
            stats.setdefault(key, []).append(int(val))
        for i, step in enumerate(STEPS):
            stats.setdefault(f"host_time_{step}_s", []).append(th[i + 1] - th[i])
        gs_score, m_prev, n_prev = gs, m, max(n_alive, 1)
        up_total += n_up
        down_total += n_down
        n_alive = n_next
        nodes = nxt[:n_alive]
        it += 1

    # ---- APSP on the core
    t_loop = time.perf_counter()
    e0, e1 = _events((it + 1) * n_ev + 4)[-2:]
    e0.record()
    m = int(istats[it, I_M].get())
    ov.m = m
    c = n_alive
    core = nodes
    pos = cp.empty(n, dtype=i32)
    kern.core_nodes(_blocks(c), (BLOCK,), (_i64(c), core, _i64(n), _i32(it), nd.rank, nd.order, nd.level, pos))
    if c:
        dist, omid, oarc = _core_dense(cp, kern, ov, m, core, c, pos)
        kern.core_counts((2 * c,), (BLOCK,), (_i32(c), core, dist, nd.hu_cnt, nd.hd_cnt))
    else:
        dist = cp.zeros((0, 0), dtype=i64)
    e1.record()
    # ---- the hierarchy's CSRs: a scan of the counts, then every arc to its place
    ufo = cp.empty(n + 1, dtype=i32)
    dfo = cp.empty(n + 1, dtype=i32)
    fin = cp.zeros(4, dtype=i64)
    nb = _blocks(n, SCAN_TILE)
    bsum = cp.empty(nb[0] * 4, dtype=i64)
    kern.fo_reduce(nb, (BLOCK,), (_i64(n), nd.hu_cnt, nd.hd_cnt, bsum))
    kern.fo_scatter(nb, (BLOCK,), (_i64(n), nd.hu_cnt, nd.hd_cnt, bsum, fin, ufo, dfo))
    n_up_all, n_down_all = (int(x) for x in fin[:2].get())
    up = (cp.empty(n_up_all, dtype=i32), cp.empty(n_up_all, dtype=i64), cp.empty(n_up_all, dtype=i32),
          cp.empty(n_up_all, dtype=i32))
    dn = (cp.empty(n_down_all, dtype=i32), cp.empty(n_down_all, dtype=i64), cp.empty(n_down_all, dtype=i32),
          cp.empty(n_down_all, dtype=i32))
    if up_total + down_total:
        kern.hgather(_blocks(up_total + down_total), (BLOCK,),
                     (_i64(up_total), _i64(down_total), *nd.ubuf.arrs, *nd.dbuf.arrs, nd.hu_start, nd.hd_start, ufo,
                      dfo, *up, *dn))
    if c:
        kern.core_fill((2 * c,), (BLOCK,), (_i32(c), core, dist, omid, oarc, ufo, dfo, *up, *dn))
    names = ("rank", "order", "level", "core", "core_dist", "up_first_out", "up_head", "up_weight", "up_mid", "up_arc",
             "down_first_out", "down_tail", "down_weight", "down_mid", "down_arc")
    dev = (nd.rank, nd.order, nd.level, core, dist, ufo, *up, dfo, *dn, istats[:it + 1])
    t_copy = time.perf_counter()
    *host, irows = _to_host(cp, dev)
    h = Hierarchy(**dict(zip(names, host, strict=True)))
    t_end = time.perf_counter()

    # ---- stats
    stats["shortcuts"] = [int(x) for x in irows[:it, I_SHORT]]
    for ev in ev_used:
        for i, step in enumerate(STEPS):
            stats[f"time_{step}_s"].append(cp.cuda.get_elapsed_time(ev[i], ev[i + 1]) / 1e3)
    apsp_s = cp.cuda.get_elapsed_time(e0, e1) / 1e3
    finish_stats(stats, it, c, apsp_s, n_up_all + n_down_all)
    # host wall clock of the build's phases (the loop's includes G_0; the copy waits for the device)
    stats["wall_s"] = {"setup": t_g0 - t_start, "loop": t_loop - t_g0, "core_and_csr": t_copy - t_loop,
                       "copy": t_end - t_copy}
    stats["time_g0_s"] = cp.cuda.get_elapsed_time(g0[0], g0[1]) / 1e3
    log.info("CU-CH (GPU): %d iterations, %d contracted, core %d, %d shortcuts", it, n - c, c,
             stats["totals"]["shortcuts"])
    return h, stats, params


__all__ = ["build_cuch_gpu", "Kernels", "Overlay", "merge_csr_gpu", "score_gpu", "luby_gpu", "shortcuts_gpu",
           "core_gpu", "group_size", "mean_weight"]
