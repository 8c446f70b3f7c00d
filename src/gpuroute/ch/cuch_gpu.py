"""CU-CH on the GPU (CuPy + ``cuch.cu``): the same hierarchy as the numba twin :mod:`gpuroute.ch.cuch`,
array for array (every rule is in that module's doc).

Karimi, Koppelman, Michael, "GPU Road Network Graph Contraction and SSSP Query", ICS '19, Algorithm 1.
The overlay stays on the device between iterations as two CSRs with original node ids (forward by
(tail, head), backward by (head, tail); ids int32, offsets and weights int64, mids and arc ids int32).
Per iteration:

* SCORE: ``cuch_score``, one thread group per node (out-arcs cached in shared memory, 1-hop search);
* SELECT: the ``ceil(C |V_l|)`` least ``(cost, id)`` by a sorted threshold (no stable sort needed),
  then ``luby_rounds`` x (``cuch_luby_decide``, ``cuch_luby_apply``);
* SHORTCUT: ``cuch_shortcut`` (Algorithm 2: 1-hop and strict 2-hop search) writes one flag per broken
  path into a buffer laid out by a prefix sum of ``|U| x |W|``; the flags are compacted with CuPy;
* UPDATE: the arcs incident to ``U_l`` are kept (on the device) as hierarchy arcs;
* EXTRACT: the rest plus the shortcuts are sorted by a 64-bit (tail, head) key, parallel runs merged by
  ``cuch_merge_best``, and both CSRs rebuilt.

APSP: the final overlay as a dense ``(c, c)`` matrix, ``c`` Floyd-Warshall rounds (``cuch_fw_round``,
captured in one CUDA graph), then ``cuch_core_mid`` for the core pairs' middles. Everything comes back
to the host once, at the end. Step times are CUDA-event times.

Imports without CuPy; :func:`build_cuch_gpu` raises :class:`~gpuroute.backend.GPUUnavailableError`
without a usable GPU.
"""
from __future__ import annotations

import logging

import numpy as np

from ..backend import resolve_device
from ..backend.kernels import load_module
from ..graph.constants import INF
from .cuch import STEPS, assemble, cuch_params, finish_stats, n_candidates, new_stats

log = logging.getLogger(__name__)

#: Threads per block of every kernel (cuch.cu's CU_BLOCK).
BLOCK = 256
KERNEL_FILE = "ch/cuch.cu"


def _i64(x):
    return np.int64(x)


def _blocks(count, per_block=BLOCK):
    return (max(1, int(-(-int(count) // per_block))),)


def group_size(max_in_degree):
    """Lanes per node of SCORE and SHORTCUT: ``max(8, 2^ceil(lg D))`` capped at a warp (the paper's
    ``T_l``)."""
    gs = 8
    while gs < 32 and gs < max_in_degree:
        gs *= 2
    return gs


class Kernels:
    """The kernels of ``cuch.cu`` (compiled once per process), as attributes without the ``cuch_`` prefix."""

    def __init__(self):
        mod = load_module(KERNEL_FILE, (f"-DCU_BLOCK={BLOCK}",))
        for name in ("cuch_score", "cuch_luby_decide", "cuch_luby_apply", "cuch_shortcut", "cuch_merge_best",
                     "cuch_fw_round", "cuch_core_mid"):
            setattr(self, name[5:], mod.get_function(name))


def merge_csr_gpu(cp, kern, n, tail, head, w, mid, arc):
    """Device twin of :func:`gpuroute.ch.cuch.merge_csr` (int32 ids, int64 weights, int32 mid/arc).

    Returns ``(ffo, ftail, fhead, fw, fmid, farc, bfo, btail, bw)``: offsets int64 (n+1,).
    """
    keep = tail != head
    tail, head, w, mid, arc = tail[keep], head[keep], w[keep], mid[keep], arc[keep]
    m = int(tail.size)
    if m == 0:
        z32, z64 = cp.zeros(0, dtype=cp.int32), cp.zeros(0, dtype=cp.int64)
        fo = cp.zeros(n + 1, dtype=cp.int64)
        return fo, z32, z32, z64, z32, z32, fo.copy(), z32, z64
    key = tail.astype(cp.int64) * n + head.astype(cp.int64)
    order = cp.argsort(key)
    ks = key[order]
    start = cp.empty(m, dtype=cp.bool_)
    start[0] = True
    start[1:] = ks[1:] != ks[:-1]
    seg = cp.flatnonzero(start)
    n_seg = int(seg.size)
    seg = cp.concatenate((seg, cp.asarray([m], dtype=seg.dtype))).astype(cp.int64)
    best = cp.empty(n_seg, dtype=cp.int64)
    kern.merge_best(_blocks(n_seg), (BLOCK,), (_i64(n_seg), seg, order.astype(cp.int64), w, mid, arc, best))
    ftail, fhead, fw, fmid, farc = tail[best], head[best], w[best], mid[best], arc[best]
    nodes = cp.arange(n + 1, dtype=cp.int32)
    ffo = cp.searchsorted(ftail, nodes, side="left").astype(cp.int64)
    border = cp.argsort(fhead.astype(cp.int64) * n + ftail.astype(cp.int64))
    bhead, btail, bw = fhead[border], ftail[border], fw[border]
    bfo = cp.searchsorted(bhead, nodes, side="left").astype(cp.int64)
    return ffo, ftail, fhead, fw, fmid, farc, bfo, btail, bw


def _least(cp, nodes, cost, n_cand):
    """The ``n_cand`` nodes of least ``(cost, id)``, ascending by id (``nodes`` ascending)."""
    if n_cand >= nodes.size:
        return nodes
    t = cp.sort(cost)[n_cand - 1]
    less = cost < t
    eq = cost == t
    need = n_cand - cp.count_nonzero(less)
    take = eq & (cp.cumsum(eq, dtype=cp.int64) <= need)
    return nodes[less | take]


def mean_weight(fw):
    """SCORE's ``mean_w``: overlay weight sum // overlay arcs, at least 1 (host int)."""
    return max(1, int(fw.sum()) // int(fw.size)) if fw.size else 1


def score_gpu(cp, kern, ov, nodes, gs):
    """SCORE: int64 cost of each of ``nodes`` (int32, device) in the overlay ``ov`` (the tuple
    :func:`merge_csr_gpu` returns), ``gs`` lanes per node."""
    ffo, ftail, fhead, fw, fmid, farc, bfo, btail, bw = ov
    k = int(nodes.size)
    cost = cp.empty(k, dtype=cp.int64)
    if k:
        kern.score(_blocks(k, BLOCK // gs), (BLOCK,),
                   (_i64(k), nodes, ffo, fhead, fw, bfo, btail, bw, _i64(mean_weight(fw)), np.int32(gs), cost))
    return cost


def luby_gpu(cp, kern, ov, n, cand, cost_of, rounds):
    """SELECT's Luby rounds over ``cand`` (int32, ascending); ``cost_of`` int64 (n,) by node id.
    Returns the selected nodes (int32, ascending)."""
    ffo, ftail, fhead, fw, fmid, farc, bfo, btail, bw = ov
    state = cp.zeros(n, dtype=cp.int32)
    state[cand] = 1
    newsel = cp.zeros(n, dtype=cp.uint8)
    k = int(cand.size)
    for _ in range(rounds):
        kern.luby_decide(_blocks(k), (BLOCK,), (_i64(k), cand, state, cost_of, ffo, fhead, bfo, btail, newsel))
        kern.luby_apply(_blocks(k), (BLOCK,), (_i64(k), cand, state, newsel, ffo, fhead, bfo, btail))
        newsel[cand] = 0
    return cand[state[cand] == 2]


def shortcuts_gpu(cp, kern, ov, sel, gs):
    """SHORTCUT: the candidate shortcuts around ``sel`` (int32, an independent set), as device arrays
    ``(tail int32, head int32, weight int64, mid int32)``."""
    ffo, ftail, fhead, fw, fmid, farc, bfo, btail, bw = ov
    k = int(sel.size)
    s64 = sel.astype(cp.int64)
    sizes = (bfo[s64 + 1] - bfo[s64]) * (ffo[s64 + 1] - ffo[s64])
    off = cp.zeros(k + 1, dtype=cp.int64)
    off[1:] = cp.cumsum(sizes)
    total = int(off[-1])
    flags = cp.zeros(max(total, 1), dtype=cp.uint8)
    if k:
        kern.shortcut(_blocks(k, BLOCK // gs), (BLOCK,),
                      (_i64(k), sel, off, ffo, fhead, fw, bfo, btail, bw, np.int32(gs), flags))
    idx = cp.flatnonzero(flags[:total])
    kk = cp.searchsorted(off[:-1], idx, side="right") - 1
    r = idx - off[kk]
    v = s64[kk]
    n_w = ffo[v + 1] - ffo[v]
    bi = bfo[v] + r // n_w
    wj = ffo[v] + r % n_w
    return btail[bi], fhead[wj], bw[bi] + fw[wj], v.astype(cp.int32)


def core_gpu(cp, kern, ov, n, core):
    """APSP on the core (the nodes of the final overlay ``ov``): ``(dist int64 (c, c), [arc block])``,
    the block ``(tail, head, weight, mid, arc)`` of the core pairs (empty list without a core)."""
    ffo, ftail, fhead, fw, fmid, farc, bfo, btail, bw = ov
    c = int(core.size)
    if c == 0:
        return cp.zeros((0, 0), dtype=cp.int64), []
    pos = cp.full(n, -1, dtype=cp.int32)
    pos[core] = cp.arange(c, dtype=cp.int32)
    pa, pb = pos[ftail], pos[fhead]
    wd = cp.full((c, c), INF, dtype=cp.int64)
    md = cp.full((c, c), -1, dtype=cp.int32)
    ad = cp.full((c, c), -1, dtype=cp.int32)
    wd[pa, pb] = fw  # (tail, head) pairs are unique after the merge
    md[pa, pb] = fmid
    ad[pa, pb] = farc
    dist = wd.copy()
    diag = cp.arange(c)
    dist[diag, diag] = 0
    _floyd_warshall(cp, kern, dist, c)
    omid = cp.empty((c, c), dtype=cp.int32)
    oarc = cp.empty((c, c), dtype=cp.int32)
    kern.core_mid(_blocks(c * c), (BLOCK,), (np.int32(c), core, pos, bfo, btail, bw, dist, wd, md, ad, omid, oarc))
    pair = dist != INF
    pair[diag, diag] = False
    a, b = cp.nonzero(pair)
    return dist, [(core[a], core[b], dist[a, b], omid[a, b], oarc[a, b])]


def _floyd_warshall(cp, kern, d, c):
    """``c`` rounds of ``cuch_fw_round`` on ``d`` (in place), captured in one CUDA graph (plain launches
    where capture is not available)."""
    grid = _blocks(c * c)

    def launch_rounds():
        for k in range(c):
            kern.fw_round(grid, (BLOCK,), (np.int32(c), np.int32(k), d))

    stream = cp.cuda.Stream(non_blocking=False)
    graph = None
    try:
        with stream:
            stream.begin_capture()
            try:
                launch_rounds()
            finally:
                graph = stream.end_capture()
    except Exception as e:  # no graph capture through this CuPy/driver: the same rounds, one launch each
        log.debug("CU-CH APSP: CUDA graph capture unavailable (%s); plain launches", e)
        graph = None
    if graph is None:
        launch_rounds()
        return
    graph.launch(stream)
    stream.synchronize()


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
    stats : dict
        The CPU twin's keys; ``time_<step>_s`` are CUDA-event times of each step, seconds.
    params : dict

    Raises
    ------
    GPUUnavailableError
        Without CuPy or a CUDA device.
    ValueError
        Bad ``C``, ``K`` or ``luby_rounds``.
    KeyError
        Unknown weight.
    """
    params, c_num, c_den = cuch_params(C, K, luby_rounds)
    resolve_device("gpu")
    import cupy as cp

    K, rounds = params["K"], params["luby_rounds"]
    kern = Kernels()
    n = graph.n_nodes
    m = graph.n_arcs
    if m >= 2**31 - 1:
        raise ValueError(f"{m} arcs exceed the int32 arc ids of the GPU contraction")
    w_host = np.asarray(graph.weight(weight), dtype=np.int64)
    ov = merge_csr_gpu(cp, kern, n, cp.asarray(graph.tail, dtype=cp.int32), cp.asarray(graph.head, dtype=cp.int32),
                       cp.asarray(w_host), cp.full(m, -1, dtype=cp.int32), cp.arange(m, dtype=cp.int32))
    alive = cp.ones(n, dtype=cp.bool_)
    cost_of = cp.zeros(n, dtype=cp.int64)
    is_sel = cp.zeros(n, dtype=cp.bool_)
    stats = new_stats()
    contracted, harcs = [], []
    n_alive = n
    ev = [cp.cuda.Event() for _ in range(len(STEPS) + 1)]
    while n_alive >= K:
        ffo, ftail, fhead, fw, fmid, farc, bfo, btail, bw = ov
        n_arcs = int(fw.size)
        ev[0].record()
        # ---- SCORE
        nodes = cp.flatnonzero(alive).astype(cp.int32)
        in_deg = bfo[1:] - bfo[:-1]
        max_deg = int(((ffo[1:] - ffo[:-1]) + in_deg).max())
        gs = group_size(int(in_deg.max()))
        cost = score_gpu(cp, kern, ov, nodes, gs)
        ev[1].record()
        # ---- SELECT
        n_cand = n_candidates(n_alive, c_num, c_den)
        cand = _least(cp, nodes, cost, n_cand)
        cost_of[nodes] = cost
        sel = luby_gpu(cp, kern, ov, n, cand, cost_of, rounds)
        n_sel = int(sel.size)
        ev[2].record()
        # ---- SHORTCUT
        st, sh, sw, sm = shortcuts_gpu(cp, kern, ov, sel, gs)
        n_short = int(st.size)
        ev[3].record()
        # ---- UPDATE
        is_sel[sel] = True
        inc = is_sel[ftail] | is_sel[fhead]
        is_sel[sel] = False
        harcs.append((ftail[inc], fhead[inc], fw[inc], fmid[inc], farc[inc]))
        alive[sel] = False
        ev[4].record()
        # ---- EXTRACT
        keep = ~inc
        ov = merge_csr_gpu(cp, kern, n, cp.concatenate((ftail[keep], st)), cp.concatenate((fhead[keep], sh)),
                           cp.concatenate((fw[keep], sw)), cp.concatenate((fmid[keep], sm)),
                           cp.concatenate((farc[keep], cp.full(n_short, -1, dtype=cp.int32))))
        ev[5].record()
        ev[5].synchronize()
        for key, val in (("overlay_nodes", n_alive), ("overlay_arcs", n_arcs), ("candidates", n_cand),
                         ("selected", n_sel), ("shortcuts", n_short), ("max_degree", max_deg)):
            stats[key].append(int(val))
        for i, step in enumerate(STEPS):
            stats[f"time_{step}_s"].append(cp.cuda.get_elapsed_time(ev[i], ev[i + 1]) / 1e3)
        contracted.append(sel.get())
        n_alive -= n_sel
    # ---- APSP on the core
    e0, e1 = cp.cuda.Event(), cp.cuda.Event()
    e0.record()
    core = cp.flatnonzero(alive).astype(cp.int32)
    c = int(core.size)
    dist, core_blocks = core_gpu(cp, kern, ov, n, core)
    e1.record()
    e1.synchronize()
    apsp_s = cp.cuda.get_elapsed_time(e0, e1) / 1e3
    host_arcs = [tuple(x.get() for x in blk) for blk in harcs + core_blocks]
    core_h, dist_h = core.get(), dist.get()
    h = assemble(n, contracted, core_h, host_arcs, dist_h)
    finish_stats(stats, len(contracted), c, apsp_s, sum(a[0].size for a in host_arcs))
    log.info("CU-CH (GPU): %d iterations, %d contracted, core %d, %d shortcuts", len(contracted), n - c, c,
             stats["totals"]["shortcuts"])
    return h, stats, params


__all__ = ["build_cuch_gpu", "Kernels", "merge_csr_gpu", "score_gpu", "luby_gpu", "shortcuts_gpu", "core_gpu",
           "group_size", "mean_weight"]
