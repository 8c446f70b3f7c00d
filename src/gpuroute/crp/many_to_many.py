"""Turn-aware, traffic-aware many-to-many tables on the customized overlay (numba, CPU): OSRM's MLD
many-to-many with buckets, between phantom nodes (points on arcs).

Follows Delling, Goldberg, Pajor, Werneck, "Customizable Route Planning in Road Networks"
(Transportation Science 2017), sec. 4 (the multi-level query) and OSRM's ``many_to_many_mld``: one
backward multi-level search per target, run to exhaustion, leaves bucket entries ``(state, target,
backward distance)``; then one forward search per source scans the buckets of every state it settles.
The searches are those of :mod:`gpuroute.crp.search` (arc states, cost counted to the arc's end; a turn
``a -> b`` costs the decoded turn cost, penalty + cost of ``b``; query levels by head cell forward, by
tail cell backward), each with the query levels of its own point only (``keep`` = the cells of the heads
of its option arcs, as :meth:`gpuroute.crp.overlay.OverlayQuery.route_arcs` builds them).

Phantom costs are those of a route (:meth:`gpuroute.engine.traffic.TrafficRouter.plan`), so that a table cell
equals the route between the same points over the same metric: source option ``a`` at fraction ``fa``
starts with ``(1 - fa) c(a)`` paid, target option ``b`` at ``fb`` adds ``-(1 - fb) c(b)``; a target
ahead on the source's own arc costs ``(fb - fa) c(a)``; one behind it is reached by leaving the arc
and coming back.

Design
------
* **One metric snapshot.** The overlay's ``OverlayState`` is read once; arc costs, turn costs, cliques and the
  kept trees all come from it (a concurrent :meth:`~gpuroute.crp.Overlay.customize` or
  :meth:`~gpuroute.crp.Overlay.update` swaps the overlay's state, never this one).
* **Labels.** int64 fixed point, as the route's search (:mod:`gpuroute.crp.phantom_search`): labels count
  ``1 / scale`` of the metric's unit (:data:`~gpuroute.crp.phantom_search.SCALE`; 1 where the metric's
  costs would not leave room below :data:`~gpuroute.crp.phantom_search.LABEL_LIMIT`), every turn and
  clique cost is multiplied by ``scale`` when relaxed, a source option starts at ``rint(scale (1 - fa)
  c(a))``, a target option adds ``-rint(scale (1 - fb) c(b))`` and a one-arc leg costs ``rint(scale (fb -
  fa) c(a))``: the same integers as a route's, so the table chooses the option pair a route chooses (up to
  ties between pairs, whose costs differ by less than ``2 / scale`` units). The integer search only
  *chooses*; the reported cost is recomputed from the chosen pair as the route reports it, ``(1 - fa) c(a)
  + P - (1 - fb) c(b)`` (``P`` the exact integer cost of the turns between) or ``(fb - fa) c(a)``.
* **Same-arc cases.** The one-arc leg (target ahead, ``fa <= fb``) is evaluated directly for every
  source/target option pair sharing an arc, outside the searches, and the searches never join a source
  *seed* label with a target *seed* entry (a state settled by its source seed meets the target seed entries
  there only through an edge). A target behind the source comes from an edge that leads back into the
  target option's state: the forward search joins the target seed entries of a state at every relaxation
  into it (the state may be settled already, by the source's seed). Every other path is met at a state after
  its first one, as in any bidirectional search: only a path ending on the source's own state needs the
  relaxation-time join.
* **Buckets.** Entries are written per target (state, label, root option, parent entry, edge reference),
  then sorted into two CSRs by state: the entries of states settled by a path (any forward label may
  use them) and the seed entries (only a forward label that came by an edge, or a relaxation). Arrays are flat (CSR offsets, int64 labels) so that
  a GPU twin can follow.
* **Parallelism.** ``prange`` over chunks of targets, then of sources; each chunk searches on its own row of
  search records (and tree node numbers), kept between tables (:class:`_ScratchPool`: every search leaves them
  as it found them; made per table, their first touch cost more than a small table's searches), and its own
  heap. A chunk writes into its own slice of the output; when the slice is full it stops
  and the driver runs the targets (sources) left in another round with more room.
* **Along.** Quantities summed along each cell's chosen path (durations and distances of the
  weight-optimal path) without searching again: every forward search keeps the union of its chosen paths
  (its "union tree": states, parent, edge reference), every cell records its meeting (forward node, the
  extra edge of a relaxation-time meeting, bucket entry), and the backward trees are the bucket entries'
  parent pointers. A clique edge's quantity comes from unpacking it
  (:func:`gpuroute.crp.customize.unpack`, the overlay's trees) once per overlay state and ``along`` arrays
  (:data:`_clique_items`, filled by the tables that cross it: OSRM's customizer stores a clique's duration and
  distance beside its weight; here a customization or traffic update makes a new state, whose values start
  empty, so none is stale); then one pass sums every needed tree node and entry (memoised per node and entry).
* **Per state, not per request.** What depends only on the overlay state and the ``along`` arrays (the
  label scale, the arc costs as floats, the checked and reordered quantities) is made once per state (the
  last few kept, keyed by the state object: a customization is a new state, so nothing goes stale), and
  the microcode trees the unpacking fills are kept per thread (emptied when the state changes).
* **Stopping.** Backward searches run to exhaustion; a forward search stops once every target has a
  candidate and the heap's minimum plus the least bucket label cannot improve the worst of them.

Numba: every kernel is ``cache=True``; the ``parallel=True`` kernels (``_backward_chunks``,
``_forward_chunks``, ``_combine``, ``_along_cells``) are called from Python only,
never from another cached ``njit`` function (numba issue #8578).
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import numba
import numpy as np
from numba import njit, prange

from .. import config
from ..graph.constants import INF
from .customize import unpack
from .phantom_search import LABEL_LIMIT, SCALE
from .search import ih_pop, ih_update, new_records, state_level

__all__ = ["table", "TableResult", "NO_OPTION"]

#: Option index of a cell without a path.
NO_OPTION = -1
#: Edge reference of "no edge" (a settle-time meeting).
_NO_REF = np.iinfo(np.int64).min
#: Bucket entries per target and union-tree nodes per source a first round makes room for.
_EST_ENTRIES = 2048
_EST_NODES = 512
#: Overlay states (customizations) whose request-independent items (:func:`_per_state`, :func:`_along`) are
#: kept: the current one and the few a request still in flight may read.
_STATES_KEPT = 4
_cache_lock = threading.Lock()
#: ``{id(state): (state, (scale, cost))}`` (:func:`_per_state`).
_state_items = {}
#: ``{(id(state), id(overlay), ((id(per_arc), id(per_turn)), ...)): (state, overlay, along, items)}``
#: (:func:`_along`; the key objects are held so that their ids cannot be reused while cached).
_along_items = {}
#: ``{id(qa_g): (qa_g, state, values, have)}``: the ``along`` quantities of clique edges (:func:`_unpack_positions`)
#: of one state and one cached ``along`` (``qa_g``: :func:`_along`'s first item, made per state), float64
#: (positions, nq) and bool (positions,), filled as tables unpack them.
_clique_items = {}
#: Per thread: ``{id(overlay): (overlay, cache)}``, the microcode trees
#: :meth:`~gpuroute.crp.customize.CustomizationPlan.unpack_arrays` keeps (it empties them per customization).
_unpack_local = threading.local()


@dataclass
class TableResult:
    """A many-to-many table over one metric snapshot.

    Attributes
    ----------
    cost : ndarray of float64, shape (S, T)
        Least cost in the metric's unit; ``inf`` where no path exists.
    src_option, dst_option : ndarray of int64, shape (S, T)
        Column of ``src_arcs`` / ``dst_arcs`` of the chosen pair of options; :data:`NO_OPTION` where no
        path exists.
    same_arc : ndarray of bool, shape (S, T)
        The chosen leg stays on one arc (target ahead of the source on the same arc).
    along : tuple of ndarray of float64, shape (S, T)
        One per quantity asked: its sum along the chosen path (``inf`` where no path exists).
    metric : Metric
        The metric of the snapshot the table was computed on.
    stats : dict
        ``scale`` (labels per unit of the metric), ``bucket_entries``, ``union_nodes`` (tree nodes kept for
        ``along``), ``clique_edges`` (with ``along``: on the chosen paths) and ``clique_edges_unpacked`` (of
        those, unpacked by this table: the others' quantities were kept for the state), ``rounds`` (backward, forward: 1 each unless a
        chunk's output filled), ``seconds`` per phase and in total.
    """

    cost: np.ndarray
    src_option: np.ndarray
    dst_option: np.ndarray
    same_arc: np.ndarray
    along: tuple = ()
    metric: object = None
    stats: dict = field(default_factory=dict)


# ------------------------------------------------------------------------------------------ kernels
@njit(cache=True)
def _reset(R, touched, nt):
    for i in range(nt):
        a = touched[i]
        R[8 * a] = INF
        R[8 * a + 2] = -1


# The steps of a search that the CPU twin and the GPU twin's emulation (many_to_many_gpu._emu_*; in the kernels
# m2m_level_edges, m2m_level_edge, m2m_join, m2m_put_entry of many_to_many.cu) share. Compiled with
# ``_nrt=False``: they take their arrays without reference counting, and LLVM inlines them into the loops at no
# cost; numba's own inlining (``inline="always"``) or a plain call increfs and decrefs every array argument at
# every call, which made the searches 2.5-4x slower on NY (measured).
@njit(cache=True, _nrt=False)
def level_edges(v, cells, keep, first, idx, cell_base, cq_first, ex_first, far_first, backward):
    """The edges a search relaxes from settled state ``v`` (forward: out of it, backward: into it), at its
    query level ``q`` (:func:`~gpuroute.crp.search.state_level` over ``cells``: the head cells forward, the
    tail cells backward). Returns ``(q, lo, hi, start, stride, far)``, the range ``lo <= k < hi`` that
    :func:`level_edge` reads: level 0, the graph's turns at CSR positions ``first[v]:first[v + 1]``; level
    ``q > 0``, the clique of ``v``'s cell at that level, forward the row of its entry ``idx[v, q - 1]``
    (``k`` over the cell's exits: clique position ``start + k``, far state ``ex_st[far + k]``, ``far_first`` =
    ``ex_first``), backward the column of its exit (``k`` over the entries: position ``start + k * stride``,
    ``stride`` the cell's exit count, far state ``ent_st[far + k]``, ``far_first`` = ``ent_first``); empty
    where ``v`` is none of its cell's entries (exits)."""
    q = state_level(v, cells, keep)
    if q == 0:
        return 0, first[v], first[v + 1], 0, 0, 0
    p = q - 1
    g = cell_base[p] + cells[v, p]
    i = idx[v, p]
    if i < 0:
        return q, 0, 0, 0, 0, 0
    nx = ex_first[g + 1] - ex_first[g]
    if backward:
        return q, 0, far_first[g + 1] - far_first[g], cq_first[g] + i, nx, far_first[g]
    return q, 0, nx, cq_first[g] + i * nx, 1, far_first[g]


@njit(cache=True, _nrt=False)
def level_edge(k, q, start, stride, far, turn, tcost, head0, clique, far_st, backward):
    """Edge ``k`` of :func:`level_edges`' range: ``(c, x, ref)``, its cost (unscaled; negative where it is
    closed: a forbidden turn, no path across the cell; then ``x`` and ``ref`` mean nothing), the far state ``x``
    and the edge reference (a turn id ``>= 0``, or ``-(1 + clique position)``). Level 0: the turn is
    ``turn[k]`` backward (``rturn``), ``k`` itself forward (``turn`` unused), ``x = head0[k]`` (``rin`` /
    ``tout``); else ``x = far_st[far + k]`` (``ent_st`` / ``ex_st``)."""
    if q == 0:
        ref = turn[k] if backward else k
        c = tcost[ref]
        if c < 0:
            return c, 0, ref
        return c, head0[k], ref
    pos = start + k * stride
    c = clique[pos]
    if c >= INF:
        return -1, 0, 0
    return c, far_st[far + k], -(1 + pos)


@njit(cache=True, _nrt=False)
def join(d, lo, hi, tgt, lab, eid, best, meet, xref, ent, froot, row, at, ref, root, found):
    """A forward label ``d`` meets the bucket entries ``lo:hi`` (target ``tgt``, backward label ``lab``, entry
    id ``eid``): every target ``t`` whose cell ``row + t`` it improves gets the label ``d + lab``, the meeting
    ``at``, the extra edge ``ref`` (:data:`_NO_REF`: a settle-time meeting), the entry and the source option
    ``root``. Returns ``found`` plus the cells reached for the first time."""
    for i in range(lo, hi):
        t = row + tgt[i]
        c = d + lab[i]
        if c < best[t]:
            if best[t] == INF:
                found += 1
            best[t] = c
            meet[t] = at
            xref[t] = ref
            ent[t] = eid[i]
            froot[t] = root
    return found


@njit(cache=True, _nrt=False)
def put_entry(e_state, e_label, e_parent, e_ref, e_root, e_seed, n, state, label, parent, ref, root, seed):
    """Bucket entry ``n`` of a backward search: its state, backward label, parent entry (-1 for a seed entry),
    edge reference (:data:`_NO_REF` for a seed entry), root option and whether it is a seed entry."""
    e_state[n] = state
    e_label[n] = label
    e_parent[n] = parent
    e_ref[n] = ref
    e_root[n] = root
    e_seed[n] = seed


@njit(cache=True, _nrt=False)
def _relax(R, touched, nt, hk, hv, size, x, d, root, prev, ref):
    """Label ``d`` for state ``x`` where it is lower than its label (record ``R[8x + k]``: 0 distance, 2 heap
    slot, 3 root option, 4 previous state, 5 edge reference; a first label adds ``x`` to ``touched``).
    Returns ``(lowered, nt, size)``."""
    if d >= R[8 * x]:
        return False, nt, size
    if R[8 * x] == INF:
        touched[nt] = x
        nt += 1
    R[8 * x] = d
    R[8 * x + 3] = root
    R[8 * x + 4] = prev
    R[8 * x + 5] = ref
    return True, nt, ih_update(hk, hv, R, 2, size, d, x)


@njit(cache=True)
def _backward_one(keep, seeds, labs, scale, rfirst, rin, rturn, tcost, tc, exit_idx, cell_base, ent_first,
                  ent_st, ex_first, cq_first, clique, R, touched, hk, hv, e_state, e_label, e_parent, e_ref, e_root,
                  e_seed):
    """Backward multi-level search of one target, to exhaustion; writes its bucket entries.

    Record ``R[8b + k]``: 0 distance, 2 heap slot, 3 root option, 4 next state towards the target (-1 for
    a seed label), 5 edge reference, 6 the state's entry (local index). Entries: the seed entries first
    (one per option), then one per state settled by a real path. Returns the number of entries.
    """
    n = 0
    nt = 0
    size = 0
    for k in range(seeds.size):
        b = seeds[k]
        if b < 0:
            continue
        c = labs[k]
        put_entry(e_state, e_label, e_parent, e_ref, e_root, e_seed, n, b, c, -1, _NO_REF, k, True)
        low, nt, size = _relax(R, touched, nt, hk, hv, size, b, c, k, -1, _NO_REF)
        if low:
            R[8 * b + 6] = n
        n += 1
    while size > 0:
        d = hk[0]
        b = hv[0]
        size = ih_pop(hk, hv, R, 2, size)
        if R[8 * b + 4] >= 0:
            put_entry(e_state, e_label, e_parent, e_ref, e_root, e_seed, n, b, d, R[8 * R[8 * b + 4] + 6], R[8 * b + 5],
                      R[8 * b + 3], False)
            R[8 * b + 6] = n
            n += 1
        root = R[8 * b + 3]
        q, lo, hi, start, stride, far = level_edges(b, tc, keep, rfirst, exit_idx, cell_base, cq_first, ex_first,
                                                    ent_first, True)
        for k in range(lo, hi):
            c, a, ref = level_edge(k, q, start, stride, far, rturn, tcost, rin, clique, ent_st, True)
            if c < 0:
                continue
            _, nt, size = _relax(R, touched, nt, hk, hv, size, a, d + c * scale, root, b, ref)
    _reset(R, touched, nt)
    return n


@njit(cache=True)
def _scratch(m):
    """One search's touched list and heap (keys, states) over ``m`` states (uninitialised: only the entries a
    search writes are read)."""
    return np.empty(m, np.int64), np.empty(m, np.int64), np.empty(m, np.int64)


@njit(cache=True, parallel=True)
def _backward_chunks(items, n_chunks, cap, keepT, t_st, t_lab, scale, rfirst, rin, rturn, tcost, tc, exit_idx,
                     cell_base, ent_first, ent_st, ex_first, cq_first, clique, o_state, o_label, o_parent, o_ref,
                     o_root, o_seed, o_tgt, o_cnt, done, need, records):
    """Backward searches of the targets ``items``, ``n_chunks`` chunks in parallel; chunk ``ch`` writes its
    entries to ``[ch * cap, (ch + 1) * cap)`` of the outputs (``o_cnt[i]``: entries of ``items[i]``) and
    stops at the first target that does not fit (``done[ch]`` targets done, ``need[ch]`` the entries of
    the one that did not fit). Chunk ``ch`` searches on the records ``records[ch]`` (int64 (8 m,), unreached
    on entry, left so: :class:`_Scratch`)."""
    m = rfirst.size - 1
    k_items = items.size
    no = t_st.shape[1]
    for ch in prange(n_chunks):
        lo = ch * k_items // n_chunks
        hi = (ch + 1) * k_items // n_chunks
        R = records[ch]
        touched, hk, hv = _scratch(m)
        cmax = m + no + 1
        e_state = np.empty(cmax, np.int64)
        e_label = np.empty(cmax, np.int64)
        e_parent = np.empty(cmax, np.int64)
        e_ref = np.empty(cmax, np.int64)
        e_root = np.empty(cmax, np.int64)
        e_seed = np.empty(cmax, np.bool_)
        pos = ch * cap
        end = (ch + 1) * cap
        i = lo
        while i < hi:
            t = items[i]
            n = _backward_one(keepT[t], t_st[t], t_lab[t], scale, rfirst, rin, rturn, tcost, tc, exit_idx, cell_base,
                              ent_first, ent_st, ex_first, cq_first, clique, R, touched, hk, hv, e_state, e_label, e_parent,
                              e_ref, e_root, e_seed)
            if pos + n > end:
                need[ch] = n
                break
            for x in range(n):
                o_state[pos + x] = e_state[x]
                o_label[pos + x] = e_label[x]
                o_parent[pos + x] = e_parent[x]
                o_ref[pos + x] = e_ref[x]
                o_root[pos + x] = e_root[x]
                o_seed[pos + x] = e_seed[x]
                o_tgt[pos + x] = t
            o_cnt[i] = n
            pos += n
            i += 1
        done[ch] = i - lo


@njit(cache=True)
def _forward_one(keep, seeds, labs, scale, tfirst, tout, tcost, hc, entry_idx, cell_base, ex_first, ex_st,
                 cq_first, clique, b_first, b_tgt, b_lab, b_eid, z_first, z_tgt, z_lab, z_eid, lowb, R, touched, hk,
                 hv, best, meet, xref, eid, froot):
    """Forward multi-level search of one source scanning the buckets (see the module docstring).

    Record ``R[8v + k]``: 0 distance, 2 heap slot, 3 root option, 4 previous state (-1 for a seed label),
    5 edge reference. Per target ``t``: ``best[t]`` (INF on entry), the forward state of the meeting
    ``meet[t]``, the extra edge ``xref[t]`` of a relaxation-time meeting (``_NO_REF``: none), the bucket
    entry ``eid[t]`` and the source option ``froot[t]``. Returns the number of touched states (the caller
    resets them).
    """
    n_t = best.size
    nt = 0
    size = 0
    for k in range(seeds.size):
        a = seeds[k]
        if a >= 0:
            _, nt, size = _relax(R, touched, nt, hk, hv, size, a, labs[k], k, -1, _NO_REF)
    found = 0
    worst = INF
    pops = 0
    while size > 0:
        if found == n_t:
            if worst == INF or (pops & 63) == 0:
                worst = best.max()
            if hk[0] + lowb >= worst:
                break
        d = hk[0]
        v = hv[0]
        size = ih_pop(hk, hv, R, 2, size)
        pops += 1
        root = R[8 * v + 3]
        found = join(d, b_first[v], b_first[v + 1], b_tgt, b_lab, b_eid, best, meet, xref, eid, froot, 0, v, _NO_REF,
                     root, found)
        if R[8 * v + 4] >= 0:  # a label that came by an edge: the target seeds here are reached too
            found = join(d, z_first[v], z_first[v + 1], z_tgt, z_lab, z_eid, best, meet, xref, eid, froot, 0, v,
                         _NO_REF, root, found)
        q, lo, hi, start, stride, far = level_edges(v, hc, keep, tfirst, entry_idx, cell_base, cq_first, ex_first,
                                                    ex_first, False)
        for k in range(lo, hi):
            c, x, ref = level_edge(k, q, start, stride, far, tout, tcost, tout, clique, ex_st, False)
            if c < 0:
                continue
            nd = d + c * scale
            if x != v:  # an edge into a target's option state: the target behind (or at) it
                found = join(nd, z_first[x], z_first[x + 1], z_tgt, z_lab, z_eid, best, meet, xref, eid, froot, 0, v,
                             ref, root, found)
            _, nt, size = _relax(R, touched, nt, hk, hv, size, x, nd, root, v, ref)
    return nt


@njit(cache=True, parallel=True)
def _forward_chunks(items, n_chunks, cap, want_tree, keepS, s_st, s_lab, scale, tfirst, tout, tcost, hc, entry_idx,
                    cell_base, ex_first, ex_st, cq_first, clique, b_first, b_tgt, b_lab, b_eid, z_first, z_tgt, z_lab,
                    z_eid, lowb, n_t, o_best, o_root, o_eid, o_xref, o_node, n_state, n_parent, n_ref, n_cnt, done,
                    need, records, nodes):
    """Forward searches of the sources ``items`` in ``n_chunks`` parallel chunks: row ``s`` of the (S, T)
    outputs for each source ``s``; with ``want_tree`` each source's union tree (its chosen paths: node
    state, parent node -- local to the source -- and edge reference) into ``[ch * cap, (ch + 1) * cap)``
    of the node arrays (``o_node``: the meeting's node), stopping as :func:`_backward_chunks` does. Chunk
    ``ch`` searches on ``records[ch]`` and, with ``want_tree``, numbers its tree nodes in ``nodes[ch]`` (int64
    (m,), all -1 on entry, left so: :class:`_Scratch`)."""
    m = tfirst.size - 1
    k_items = items.size
    for ch in prange(n_chunks):
        lo = ch * k_items // n_chunks
        hi = (ch + 1) * k_items // n_chunks
        R = records[ch]
        touched, hk, hv = _scratch(m)
        best = np.empty(n_t, np.int64)
        meet = np.empty(n_t, np.int64)
        xref = np.empty(n_t, np.int64)
        eid = np.empty(n_t, np.int64)
        froot = np.empty(n_t, np.int64)
        cnode = np.full(n_t, -1, np.int64)
        node = nodes[ch]
        t_state = np.empty(m if want_tree else 0, np.int64)
        t_parent = np.empty(m if want_tree else 0, np.int64)
        t_ref = np.empty(m if want_tree else 0, np.int64)
        pos = ch * cap
        end = (ch + 1) * cap
        i = lo
        while i < hi:
            s = items[i]
            best[:] = INF
            nt = _forward_one(keepS[s], s_st[s], s_lab[s], scale, tfirst, tout, tcost, hc, entry_idx, cell_base,
                              ex_first, ex_st, cq_first, clique, b_first, b_tgt, b_lab, b_eid, z_first, z_tgt, z_lab,
                              z_eid, lowb, R, touched, hk, hv, best, meet, xref, eid, froot)
            nn = 0
            if want_tree:
                for t in range(n_t):
                    if best[t] == INF:
                        continue
                    v = meet[t]
                    prev = -1
                    while True:
                        if node[v] >= 0:
                            if prev >= 0:
                                t_parent[prev] = node[v]
                            break
                        t_state[nn] = v
                        t_ref[nn] = R[8 * v + 5]
                        t_parent[nn] = -1
                        node[v] = nn
                        if prev >= 0:
                            t_parent[prev] = nn
                        prev = nn
                        nn += 1
                        u = R[8 * v + 4]
                        if u < 0:
                            break
                        v = u
                    cnode[t] = node[meet[t]]
                for x in range(nn):
                    node[t_state[x]] = -1
            _reset(R, touched, nt)
            if pos + nn > end:
                need[ch] = nn
                break
            for x in range(nn):
                n_state[pos + x] = t_state[x]
                n_parent[pos + x] = t_parent[x]
                n_ref[pos + x] = t_ref[x]
            for t in range(n_t):
                o_best[s, t] = best[t]
                if best[t] < INF:
                    o_root[s, t] = froot[t]
                    o_eid[s, t] = eid[t]
                    o_xref[s, t] = xref[t]
                    o_node[s, t] = cnode[t]
                else:
                    o_root[s, t] = -1
                    o_eid[s, t] = -1
                    o_xref[s, t] = _NO_REF
                    o_node[s, t] = -1
            n_cnt[i] = nn
            pos += nn
            i += 1
        done[ch] = i - lo


@njit(cache=True)
def _csr_by_state(state, mask, first, fill):
    """Offsets (m + 1,) and entry ids, grouped by state, of the entries where ``mask`` holds (stable); the
    offsets are written into ``first`` (int64 (m + 1,)), ``fill`` (int64 (m,)) is scratch."""
    m = first.size - 1
    first[:] = 0
    for i in range(state.size):
        if mask[i]:
            first[state[i] + 1] += 1
    for v in range(m):
        first[v + 1] += first[v]
    fill[:] = first[:-1]
    ids = np.empty(first[m], np.int64)
    for i in range(state.size):
        if mask[i]:
            ids[fill[state[i]]] = i
            fill[state[i]] += 1
    return first, ids


@njit(cache=True, parallel=True)
def _combine(o_best, o_root, o_eid, e_root, sa, sf, ta, tf, s_lab, t_lab, scale, cost, keys, key_t, key_k, out_cost,
             so, to, same):
    """Per cell, the searched pair's label against the one-arc legs' (every source option whose arc is a
    target option's -- ``keys`` sorted, with the target ``key_t`` and column ``key_k`` -- with the target
    ahead, ``fa <= fb``: ``rint(scale (fb - fa) c(a))``; a one-arc leg wins a tie, as in a route), then the
    winner's cost as a route reports it: ``(fb - fa) c(a)``, or ``(1 - fa) c(a) + P - (1 - fb) c(b)`` with
    ``P`` the integer cost of the turns between. Parallel over sources."""
    S, T = o_best.shape
    o = sa.shape[1]
    n = keys.size
    for s in prange(S):
        lab = o_best[s].copy()
        dj = np.full(T, -1, np.int64)
        dk = np.full(T, -1, np.int64)
        for j in range(o):
            a = sa[s, j]
            if a < 0:
                continue
            fa = sf[s, j]
            i = np.searchsorted(keys, a)
            while i < n and keys[i] == a:
                t = key_t[i]
                k = key_k[i]
                fb = tf[t, k]
                if fa <= fb:
                    dl = np.int64(np.rint(scale * (fb - fa) * cost[a]))
                    if dl < lab[t] or (dl == lab[t] and (dk[t] < 0 or k < dk[t] or (k == dk[t] and j < dj[t]))):
                        lab[t] = dl
                        dj[t] = j
                        dk[t] = k
                i += 1
        for t in range(T):
            same[s, t] = dk[t] >= 0
            if dk[t] >= 0:
                j = dj[t]
                k = dk[t]
                out_cost[s, t] = (tf[t, k] - sf[s, j]) * cost[sa[s, j]]
                so[s, t] = j
                to[s, t] = k
            elif o_best[s, t] < INF:
                j = o_root[s, t]
                k = e_root[o_eid[s, t]]
                p = (o_best[s, t] - s_lab[s, j] - t_lab[t, k]) // scale
                out_cost[s, t] = (1.0 - sf[s, j]) * cost[sa[s, j]] + np.float64(p) - (1.0 - tf[t, k]) * cost[ta[t, k]]
                so[s, t] = j
                to[s, t] = k
            else:
                out_cost[s, t] = np.inf
                so[s, t] = -1
                to[s, t] = -1


@njit(cache=True, parallel=True)
def _along_cells(so, to, same, o_eid, o_xref, o_node, s_start, e_state, sa, sf, ta, tf, qa_g, qa_s, qt_s, pos,
                 pos_q, accf, accb, out):
    """``out[q, s, t]``: quantity ``q`` along the chosen path of every cell (inf where none); parallel over
    sources."""
    S, T = so.shape
    nq = qa_g.shape[0]
    for s in prange(S):
        for t in range(T):
            j = so[s, t]
            if j < 0:
                for q in range(nq):
                    out[q, s, t] = np.inf
                continue
            k = to[s, t]
            a = sa[s, j]
            fa = sf[s, j]
            b = ta[t, k]
            fb = tf[t, k]
            if same[s, t]:
                for q in range(nq):
                    out[q, s, t] = (fb - fa) * qa_g[q, a]
                continue
            e = o_eid[s, t]
            f = o_node[s, t] + s_start[s]
            r = o_xref[s, t]
            ip = -1
            if r != _NO_REF and r < 0:
                ip = np.searchsorted(pos, -r - 1)
            x = e_state[e]
            for q in range(nq):
                xq = 0.0
                if r != _NO_REF:
                    xq = qt_s[q, r] + qa_s[q, x] if r >= 0 else pos_q[ip, q]
                out[q, s, t] = ((1.0 - fa) * qa_g[q, a] + accf[f, q] + xq + accb[e, q]) - (1.0 - fb) * qa_g[q, b]


@njit(cache=True)
def _mark(parent, starts):
    """Every entry on the parent chains from ``starts`` (>= 0 where wanted)."""
    marked = np.zeros(parent.size, np.bool_)
    for i in range(starts.size):
        e = starts[i]
        while e >= 0 and not marked[e]:
            marked[e] = True
            e = parent[e]
    return marked


@njit(cache=True)
def _edge_quantities(mask, head_state, refs, pos_sorted, pos_q, qa, qt):
    """Quantities of the edges into ``head_state`` by ``refs`` (query turn positions, or clique positions
    ``-(1 + pos)`` looked up in ``pos_sorted``/``pos_q``), where ``mask`` holds (else 0)."""
    nq = qa.shape[0]
    out = np.zeros((refs.size, nq))
    for i in range(refs.size):
        if not mask[i]:
            continue
        r = refs[i]
        if r >= 0:
            for k in range(nq):
                out[i, k] = qt[k, r] + qa[k, head_state[i]]
        else:
            j = np.searchsorted(pos_sorted, -r - 1)
            for k in range(nq):
                out[i, k] = pos_q[j, k]
    return out


@njit(cache=True)
def _accumulate(parent, edge_q, need):
    """``acc[i] = acc[parent[i]] + edge_q[i]`` (0 at roots), for every ``need``-ed node and its ancestors."""
    n, nq = edge_q.shape
    acc = np.zeros((n, nq))
    done = np.zeros(n, np.bool_)
    stack = np.empty(n, np.int64)
    for i in range(n):
        if not need[i] or done[i]:
            continue
        top = 0
        v = i
        while v >= 0 and not done[v]:
            stack[top] = v
            top += 1
            v = parent[v]
        while top > 0:
            top -= 1
            u = stack[top]
            p = parent[u]
            if p >= 0:
                for k in range(nq):
                    acc[u, k] = acc[p, k] + edge_q[u, k]
            done[u] = True
    return acc


@njit(cache=True)
def _clique_quantities(ent_arcs, refs, first, out_arc, qa, qt, cq_first, cell_base, ex_first, ex_arc, vf, vh, vx, ef,
                       eto, eref, etail, turn_cost, clique, tree_first, tree, ent_first, mc_first, mc_tree, mc_have, dist,
                       par, hk, hv, stack, tmp, outbuf):
    """Quantities of clique edges (graph order ``qa`` (nq, m), ``qt`` (nq, T)): each unpacked once into its
    graph arcs (:func:`gpuroute.crp.customize.unpack`), the sum over the arcs after the entry arc of the
    turn into the arc and the arc."""
    nq = qa.shape[0]
    res = np.zeros((refs.size, nq))
    st = np.empty(1, np.int64)
    rf = np.empty(1, np.int64)
    for i in range(refs.size):
        st[0] = ent_arcs[i]
        rf[0] = refs[i]
        k = unpack(st, rf, out_arc, cq_first, cell_base, ex_first, ex_arc, vf, vh, vx, ef, eto, eref, etail, turn_cost,
                   clique, tree_first, tree, ent_first, mc_first, mc_tree, mc_have, dist, par, hk, hv, stack, tmp, outbuf)
        for j in range(1, k):
            x = outbuf[j - 1]
            y = outbuf[j]
            tid = -1
            for t in range(first[x], first[x + 1]):
                if out_arc[t] == y:
                    tid = t
                    break
            for q in range(nq):
                res[i, q] += qt[q, tid] + qa[q, y]
    return res


# ------------------------------------------------------------------------------------------ driver
def _threads():
    return max(1, int(numba.get_num_threads()))


class _Scratch:
    """The graph-sized scratch of one table on ``m`` states, for up to ``rows`` chunks: per chunk its search
    records (``records[ch]``, int64 (8 m,), unreached: :func:`gpuroute.crp.search.new_records`) and tree node
    numbers (``nodes[ch]``, int64 (m,), all -1), which every search and tree leaves as it found them; and the
    bucket CSRs' offsets (``first``, int64 (2, m + 1)) and fill pointers (``fill``, int64 (m,)), rewritten by
    each table. Made once and kept between tables (:class:`_ScratchPool`): made per table, its first touch
    (page faults, filling 9 m words a chunk) cost more than the searches of a small table (issue 20)."""

    def __init__(self, m, rows):
        self.m = int(m)
        self.rows = int(rows)
        self.records = np.empty((self.rows, 8 * self.m), np.int64)
        for r in range(self.rows):
            self.records[r] = new_records(self.m)
        self.nodes = np.full((self.rows, self.m), -1, np.int64)
        self.first = np.empty((2, self.m + 1), np.int64)
        self.fill = np.empty(self.m, np.int64)
        self.nbytes = sum(x.nbytes for x in (self.records, self.nodes, self.first, self.fill))


class _ScratchPool:
    """:class:`_Scratch` kept between tables: ``get(m, rows)`` hands one with at least ``rows`` chunk rows to
    one caller (a new one where none is free: concurrent tables never share one), ``put`` takes it back once
    the searches are done (a table that raised does not: its records may be dirty). At most
    ``config.CRP_TABLE_SCRATCH_KEEP_BYTES`` are kept; a scratch larger than that is made per table."""

    def __init__(self):
        self._lock = threading.Lock()
        self._free = []

    def get(self, m, rows):
        with self._lock:
            for i, sc in enumerate(self._free):
                if sc.m == m and sc.rows >= rows:
                    return self._free.pop(i)
        return _Scratch(m, rows)

    def put(self, sc):
        keep = int(config.CRP_TABLE_SCRATCH_KEEP_BYTES)
        with self._lock:
            self._free.insert(0, sc)
            total = 0
            for i, x in enumerate(self._free):  # the most recent first; forget the rest past the budget
                total += x.nbytes
                if total > keep:
                    del self._free[i:]
                    break


_SCRATCH = _ScratchPool()


def _fits(sc, n_chunks):
    """The kernels index ``sc``'s rows unchecked: a launch of more chunks than it has rows is a bug, refused."""
    if n_chunks > sc.rows:
        raise RuntimeError(f"internal error: {n_chunks} chunks on a scratch of {sc.rows} rows (numba's thread count "
                           "changed during a table?)")


def _rounds(n_items, est, run):
    """Run ``run(items, n_chunks, cap) -> (done, need, per_item, parts)`` until every item is done, with
    more room per chunk after a round where some did not fit. Returns the parts in order and the rounds."""
    pending = np.arange(n_items, dtype=np.int64)
    parts = []
    rounds = 0
    while pending.size:
        rounds += 1
        n_chunks = int(min(_threads(), pending.size))
        per = -(-pending.size // n_chunks)
        cap = int(per * est)
        done, need, counts, part = run(pending, n_chunks, cap)
        parts.append(part)
        left = []
        sizes = []
        for ch in range(n_chunks):
            lo = ch * pending.size // n_chunks
            hi = (ch + 1) * pending.size // n_chunks
            left.append(pending[lo + int(done[ch]):hi])
            sizes.append(counts[lo:lo + int(done[ch])])
        pending = np.concatenate(left) if left else pending[:0]
        seen = np.concatenate(sizes) if sizes else np.zeros(0, np.int64)
        mean = float(seen.mean()) if seen.size else 0.0
        est = max(2 * est if seen.size < 1 else est, int(1.5 * mean) + 1, int(need.max()) + 1 if need.size else 1)
    return parts, rounds


def _options(what_arcs, what_frac, arcs, frac, m):
    a = np.asarray(arcs)
    f = np.asarray(frac)
    if a.ndim != 2:
        raise ValueError(f"{what_arcs} must be 2-D (points, options), got shape {a.shape}")
    if f.shape != a.shape:
        raise ValueError(f"{what_frac} has shape {f.shape}, {what_arcs} {a.shape}: they must be equal")
    if a.size and a.dtype.kind not in "iu":
        raise TypeError(f"{what_arcs} must be integers (dtype {a.dtype})")
    a = a.astype(np.int64)
    bad = (a < -1) | (a >= m)
    if bad.any():
        i, j = (int(x[0]) for x in np.nonzero(bad))
        raise IndexError(f"{what_arcs}[{i}, {j}] = {int(a[i, j])} is neither an arc id in [0, {m}) nor -1 (unused)")
    if f.size and f.dtype.kind not in "fiu":
        raise TypeError(f"{what_frac} must be numbers (dtype {f.dtype})")
    f = f.astype(np.float64)
    badf = (a >= 0) & ~((f >= 0.0) & (f <= 1.0))
    if badf.any():
        i, j = (int(x[0]) for x in np.nonzero(badf))
        raise ValueError(f"{what_frac}[{i}, {j}] = {float(f[i, j])!r} (arc {int(a[i, j])}) is not a fraction in [0, 1]")
    return np.ascontiguousarray(a), np.ascontiguousarray(f)


def _check_along(along, m, n_turns):
    out = []
    for i, item in enumerate(along):
        try:
            per_arc, per_turn = item
        except (TypeError, ValueError):
            raise ValueError(f"along[{i}] must be a pair (per_arc, per_turn or None)") from None
        qa = np.asarray(per_arc, dtype=np.float64)
        if qa.shape != (m,):
            raise ValueError(f"along[{i}] per_arc has shape {qa.shape}, expected ({m},) (one per arc)")
        if per_turn is None:
            qt = np.zeros(n_turns)
        else:
            qt = np.asarray(per_turn, dtype=np.float64)
            if qt.shape != (n_turns,):
                raise ValueError(f"along[{i}] per_turn has shape {qt.shape}, expected ({n_turns},) (one per turn "
                                 "of overlay.turns)")
        for what, q in (("per_arc", qa), ("per_turn", qt)):
            bad = ~np.isfinite(q)
            if bad.any():
                k = int(np.flatnonzero(bad)[0])
                raise ValueError(f"along[{i}] {what}[{k}] = {float(q[k])!r} is not finite")
        out.append((qa, qt))
    return out


def _cacheable(along):
    return all(isinstance(x, (tuple, list)) and len(x) == 2 and isinstance(x[0], np.ndarray)
               and (x[1] is None or isinstance(x[1], np.ndarray)) for x in along)


def _remember(cache, key, value):
    """``cache[key] = value`` under :data:`_cache_lock`, the oldest entries dropped past :data:`_STATES_KEPT`."""
    with _cache_lock:
        while len(cache) >= _STATES_KEPT:
            cache.pop(next(iter(cache)))
        cache[key] = value


def _along(along, overlay, st, m, n_turns):
    """The ``along`` quantities checked and laid out: ``()`` when none is asked, else ``(qa_g, qt_g, qa_s,
    qt_s)``, float64 ``(nq, m)`` and ``(nq, n_turns)`` in graph arc and turn order, then the same in the
    overlay's state and query-turn numbering (read-only).

    Request-independent: kept for the last few ``(state, along arrays)`` (the engine passes the same
    array objects for one metric snapshot; a new customization is a new state, so a new key). The arrays
    are taken as read-only: changing one in place between two tables of one state is not seen.
    """
    along = tuple(along)
    if not along:
        return ()
    key = None
    if _cacheable(along):
        key = (id(st), id(overlay), tuple((id(x[0]), id(x[1])) for x in along))
        hit = _along_items.get(key)
        if (hit is not None and hit[0] is st and hit[1] is overlay
                and all(x[0] is y[0] and x[1] is y[1] for x, y in zip(hit[2], along, strict=True))):
            _clique_memo(overlay, st, hit[3][0])
            return hit[3]
    qs = _check_along(along, m, n_turns)
    qg = overlay._qg
    qa_g = np.ascontiguousarray(np.stack([q[0] for q in qs]))  # (nq, m) graph order
    qt_g = np.ascontiguousarray(np.stack([q[1] for q in qs]))  # (nq, n_turns) turn ids
    qa_s = np.ascontiguousarray(qa_g[:, qg["order"]])  # state numbering
    qt_s = np.ascontiguousarray(qt_g[:, qg["torder"]])  # query turn positions
    items = (qa_g, qt_g, qa_s, qt_s)
    for x in items:
        x.flags.writeable = False
    if key is not None:
        _remember(_along_items, key, (st, overlay, tuple(tuple(x) for x in along), items))
        _clique_memo(overlay, st, qa_g)
    return items


def _clique_memo(overlay, st, qa_g):
    """The :data:`_clique_items` entry of the cached ``along`` whose first item is ``qa_g`` on state ``st``, made
    (empty: nothing unpacked yet) where there is none. ``np.zeros``: pages are only committed where tables write."""
    hit = _clique_items.get(id(qa_g))
    if hit is None or hit[0] is not qa_g or hit[1] is not st:
        n_pos = int(overlay._topo["cq_first"][-1])
        _remember(_clique_items, id(qa_g), (qa_g, st, np.zeros((n_pos, qa_g.shape[0])), np.zeros(n_pos, np.bool_)))


def _per_state(st):
    """``(scale, cost)``: the label scale (:func:`_label_scale`) and the arc costs as float64 (m,)
    (read-only) of the overlay state ``st``, made once per state (the last few kept)."""
    hit = _state_items.get(id(st))
    if hit is not None and hit[0] is st:
        return hit[1]
    cost = np.asarray(st.arc_cost, dtype=np.int64).astype(np.float64)
    cost.flags.writeable = False
    out = (_label_scale(st), cost)
    _remember(_state_items, id(st), (st, out))
    return out


def _keep(cells, head, arcs):
    """(points, L, o) int32: the cells of the heads of each point's option arcs (-1 for unused slots)."""
    c = cells[:, head[np.maximum(arcs, 0)]]  # (L, k, o)
    c = np.where(arcs[None] >= 0, c, -1)
    return np.ascontiguousarray(np.transpose(c, (1, 0, 2)), dtype=np.int32)


def _label_scale(st):
    """:data:`SCALE`, or 1 where a simple path's cost in ``1 / SCALE`` units could pass :data:`LABEL_LIMIT`
    (its bound: every turn cost once, and three arc costs for the phantoms and the way back)."""
    tc = np.asarray(st.turn_cost, dtype=np.int64)
    ac = np.asarray(st.arc_cost, dtype=np.int64)
    ac = ac[ac != INF]  # closed arcs (CLOSED = INF) are never paid
    bound = int(tc[tc > 0].sum(dtype=np.int64)) + 3 * int(ac.max() if ac.size else 1) + 1
    return SCALE if bound * SCALE < LABEL_LIMIT else 1


def request(overlay, src_arcs, src_frac, dst_arcs, dst_frac, state, along):
    """What both twins' tables start from, checked (raises as :func:`table`): ``(st, m, sa, sf, ta, tf, qs,
    scale, cost, seeds)``, the overlay state read once, the arc count, the options (:func:`_options`), the
    ``along`` quantities (:func:`_along`), the label scale and float arc costs (:func:`_per_state`), and the
    phantom seeds ``(s_st, t_st, s_lab, t_lab, keepS, keepT)``: per point and option its state in query order
    (-1: an unused slot) and seed label (a source's ``rint(scale (1 - fa) c(a))``, a target's ``-rint(scale
    (1 - fb) c(b))``; int64 (points, o)), and per point its query cells (:func:`_keep`)."""
    st = overlay._need_state() if state is None else state
    g = overlay.graph
    m = int(g.n_arcs)
    sa, sf = _options("src_arcs", "src_frac", src_arcs, src_frac, m)
    ta, tf = _options("dst_arcs", "dst_frac", dst_arcs, dst_frac, m)
    qs = _along(along, overlay, st, m, int(overlay.turns.out_arc.size))
    scale, cost = _per_state(st)
    perm = overlay._qg["perm"]
    s_st = np.where(sa >= 0, perm[np.maximum(sa, 0)], -1).astype(np.int64)
    t_st = np.where(ta >= 0, perm[np.maximum(ta, 0)], -1).astype(np.int64)
    s_lab = np.where(sa >= 0, np.rint(scale * (1.0 - sf) * cost[np.maximum(sa, 0)]), 0).astype(np.int64)
    t_lab = np.where(ta >= 0, -np.rint(scale * (1.0 - tf) * cost[np.maximum(ta, 0)]), 0).astype(np.int64)
    cells = np.asarray(overlay.partition.cells)
    head = np.asarray(g.head, dtype=np.int64)
    seeds = (s_st, t_st, s_lab, t_lab, _keep(cells, head, sa), _keep(cells, head, ta))
    return st, m, sa, sf, ta, tf, qs, scale, cost, seeds


def empty_table(S, T, qs, metric, stats):
    """The table of ``S`` sources and ``T`` targets where one of them is 0 (``qs``: :func:`_along`'s)."""
    z = np.zeros((S, T))
    nq = qs[0].shape[0] if qs else 0
    return TableResult(z.copy(), np.full((S, T), NO_OPTION, np.int64), np.full((S, T), NO_OPTION, np.int64),
                       np.zeros((S, T), bool), tuple(z.copy() for _ in range(nq)), metric,
                       {**stats, "bucket_entries": 0, "rounds": (0, 0)})


def bucket_csrs(csr, e_state, e_seed, e_tgt, e_label, m):
    """The bucket entries as the forward searches read them: ``(b_first, b_tgt, b_lab, b_ids, z_first, z_tgt,
    z_lab, z_ids, lowb)``, the entries settled by a path (``b_``) and the seed entries (``z_``) grouped by
    state (``csr(state, mask, m)``: offsets (m + 1,) and entry ids), their targets and labels, and the least
    label (0 without entries). NumPy arrays (:func:`_csr_by_state`) or CuPy arrays (the GPU twin's)."""
    b_first, b_ids = csr(e_state, ~e_seed, m)
    z_first, z_ids = csr(e_state, e_seed, m)
    lowb = int(e_label.min()) if e_label.size else 0
    return b_first, e_tgt[b_ids], e_label[b_ids], b_ids, z_first, e_tgt[z_ids], e_label[z_ids], z_ids, lowb


def table(overlay, src_arcs, src_frac, dst_arcs, dst_frac, *, state=None, along=()):
    """Many-to-many table between phantom nodes over the customized overlay: turn costs, restrictions and
    the current traffic (one metric snapshot); see the module docstring for the algorithm.

    Parameters
    ----------
    overlay : Overlay
        Customized.
    src_arcs : array_like of int, shape (S, o)
        Each source's options: graph arc ids, -1 for unused slots (:meth:`gpuroute.geo.segments.PhantomSet.padded`).
    src_frac : array_like of float, shape (S, o)
        Fraction of the arc (0 at its tail, 1 at its head) where the source lies.
    dst_arcs, dst_frac : array_like, shape (T, o')
        The same for the targets.
    state : overlay state, optional
        The customization to read (default: the overlay's current one, read once).
    along : sequence of (per_arc, per_turn)
        Quantities to sum along each cell's chosen path: ``per_arc`` float64 (m,) in graph arc order,
        ``per_turn`` float64 (n_turns,) in the order of ``overlay.turns`` (or None: 0). The end arcs count
        as the cost does: ``(1 - fa)`` of the first, ``fb`` of the last, ``(fb - fa)`` of a one-arc leg.
        Taken as read-only: their checked, reordered copies are kept per state and
        array objects (changing an array in place between two tables of one state is not seen).

    Returns
    -------
    TableResult
        ``cost`` float64 (S, T) in the metric's unit (``inf``: no path), ``src_option``/``dst_option``
        (S, T) int64 (columns of the chosen options; -1: no path), ``same_arc`` (S, T) bool, ``along``
        (one float64 (S, T) per quantity), ``metric``, ``stats``. A cell equals the least, over its option
        pairs, of the route's cost between the same points on the same metric (a route's option choice,
        :mod:`gpuroute.crp.phantom_search`, up to ties).

    Raises
    ------
    RuntimeError
        The overlay is not customized.
    ValueError
        Arrays of the wrong shape, a fraction outside [0, 1] (named with its row, column and arc), a
        malformed or non-finite ``along`` quantity.
    IndexError
        An arc id outside ``[-1, m)`` (named with its row and column).
    TypeError
        Arc ids that are not integers.
    """
    t_all = time.perf_counter()
    st, m, sa, sf, ta, tf, qs, scale, cost, seeds = request(overlay, src_arcs, src_frac, dst_arcs, dst_frac, state,
                                                            along)
    S, T = sa.shape[0], ta.shape[0]
    secs = {}
    stats = {"scale": scale, "seconds": secs}
    if S == 0 or T == 0:
        return empty_table(S, T, qs, st.metric, stats)
    s_st, t_st, s_lab, t_lab, keepS, keepT = seeds
    qg = overlay._qg
    topo = overlay._topo
    clique = st.clique
    tcost = st.q_turn_cost
    sc = _SCRATCH.get(m, min(_threads(), max(S, T)))

    # ---- backward searches: bucket entries per target
    t0 = time.perf_counter()
    args_b = (keepT, t_st, t_lab, scale, qg["rfirst"], qg["rin"], qg["rturn"], tcost, qg["tc"], qg["exit_idx"],
              topo["cell_base"], topo["ent_first"], qg["ent_st"], topo["ex_first"], topo["cq_first"], clique)

    def run_b(items, n_chunks, cap):
        _fits(sc, n_chunks)
        bufs = [np.empty(n_chunks * cap, np.int64) for _ in range(5)] + [np.empty(n_chunks * cap, np.bool_),
                                                                         np.empty(n_chunks * cap, np.int64)]
        cnt = np.zeros(items.size, np.int64)
        done = np.zeros(n_chunks, np.int64)
        need = np.zeros(n_chunks, np.int64)
        _backward_chunks(items, n_chunks, cap, *args_b, *bufs, cnt, done, need, sc.records)
        keep = []
        for ch in range(n_chunks):
            lo = ch * items.size // n_chunks
            n = int(cnt[lo:lo + int(done[ch])].sum())
            keep.append(slice(ch * cap, ch * cap + n))
        part = [np.concatenate([b[s] for s in keep]) for b in bufs]
        return done, need, cnt, part

    parts, rounds_b = _rounds(T, _EST_ENTRIES, run_b)
    e_state, e_label, e_parent, e_ref, e_root, e_seed, e_tgt = (np.concatenate([p[i] for p in parts])
                                                               for i in range(7))
    E = e_state.size
    # local parent indices -> global: each target's entries are contiguous, seeds first
    t_start = np.zeros(T, np.int64)
    if E:
        new = np.flatnonzero(np.concatenate(([True], e_tgt[1:] != e_tgt[:-1])))
        t_start[e_tgt[new]] = new
    e_parent = np.where(e_parent >= 0, e_parent + t_start[e_tgt], -1)
    firsts = iter(sc.first)
    buckets = bucket_csrs(lambda state, mask, m: _csr_by_state(state, mask, next(firsts), sc.fill), e_state, e_seed,
                          e_tgt, e_label, m)
    secs["backward"] = time.perf_counter() - t0

    # ---- forward searches: every cell's best label, meeting and chosen options
    t0 = time.perf_counter()
    want_tree = bool(qs)
    o_best = np.empty((S, T), np.int64)
    o_root = np.empty((S, T), np.int64)
    o_eid = np.empty((S, T), np.int64)
    o_xref = np.empty((S, T), np.int64)
    o_node = np.empty((S, T), np.int64)
    args_f = (keepS, s_st, s_lab, scale, qg["tfirst"], qg["tout"], tcost, qg["hc"], qg["entry_idx"], topo["cell_base"],
              topo["ex_first"], qg["ex_st"], topo["cq_first"], clique, *buckets, T, o_best, o_root, o_eid, o_xref,
              o_node)

    def run_f(items, n_chunks, cap):
        _fits(sc, n_chunks)
        cap = cap if want_tree else 0
        bufs = [np.empty(n_chunks * cap, np.int64) for _ in range(3)]
        cnt = np.zeros(items.size, np.int64)
        done = np.zeros(n_chunks, np.int64)
        need = np.zeros(n_chunks, np.int64)
        _forward_chunks(items, n_chunks, cap, want_tree, *args_f, *bufs, cnt, done, need, sc.records, sc.nodes)
        sl = []
        src = []
        for ch in range(n_chunks):
            lo = ch * items.size // n_chunks
            c = cnt[lo:lo + int(done[ch])]
            sl.append(slice(ch * cap, ch * cap + int(c.sum())))
            src.append(np.repeat(items[lo:lo + int(done[ch])], c))
        part = [np.concatenate([b[s] for s in sl]) for b in bufs] + [np.concatenate(src)]
        return done, need, cnt, part

    parts, rounds_f = _rounds(S, _EST_NODES, run_f)
    n_state, n_parent, n_ref, n_src = (np.concatenate([p[i] for p in parts]) for i in range(4))
    _SCRATCH.put(sc)  # the searches are done (``buckets`` are views of its ``first``: not read past here)
    secs["forward"] = time.perf_counter() - t0

    # ---- the one-arc legs, and the costs as a route reports them
    t0 = time.perf_counter()
    used = ta >= 0
    keys = ta[used]
    key_t, key_k = np.nonzero(used)
    by = np.argsort(keys, kind="stable")
    out_cost = np.empty((S, T))
    so = np.empty((S, T), np.int64)
    to = np.empty((S, T), np.int64)
    same = np.empty((S, T), np.bool_)
    _combine(o_best, o_root, o_eid, e_root, sa, sf, ta, tf, s_lab, t_lab, scale, cost, keys[by],
             key_t[by].astype(np.int64), key_k[by].astype(np.int64), out_cost, so, to, same)
    secs["combine"] = time.perf_counter() - t0

    sums = ()
    if qs:
        t0 = time.perf_counter()
        sums = _along_sums(overlay, st, qs, sa, sf, ta, tf, so, to, same, o_eid, o_xref, o_node, n_state, n_parent,
                           n_ref, n_src, e_state, e_parent, e_ref, stats)
        secs["along"] = time.perf_counter() - t0
    secs["total"] = time.perf_counter() - t_all
    stats.update(bucket_entries=int(E), rounds=(rounds_b, rounds_f), union_nodes=int(n_state.size))
    return TableResult(out_cost, so, to, same, sums, st.metric, stats)


def _along_sums(overlay, st, qs, sa, sf, ta, tf, so, to, same, o_eid, o_xref, o_node, n_state, n_parent, n_ref,
                n_src, e_state, e_parent, e_ref, stats):
    """Each quantity summed along every cell's chosen path (see the module docstring); ``qs`` is
    :func:`_along`'s."""
    S, T = so.shape
    qa_g, qt_g, qa_s, qt_s = qs
    nq = qa_g.shape[0]
    # union-tree nodes: parents local to their source -> global
    s_start = np.zeros(S, np.int64)
    if n_state.size:
        new = np.flatnonzero(np.concatenate(([True], n_src[1:] != n_src[:-1])))
        s_start[n_src[new]] = new
    n_par = np.where(n_parent >= 0, n_parent + s_start[n_src], -1)
    srch = (so >= 0) & ~same
    marked = _mark(e_parent, np.where(srch, o_eid, -1).ravel())
    n_mark = _mark(n_par, np.where(srch, o_node + s_start[:, None], -1).ravel())
    # every clique edge on a chosen path, unpacked once
    xr = o_xref[srch]
    pos = np.unique(np.concatenate([-e_ref[marked & (e_parent >= 0) & (e_ref < 0)] - 1,
                                    -n_ref[n_mark & (n_par >= 0) & (n_ref < 0)] - 1,
                                    -xr[(xr != _NO_REF) & (xr < 0)] - 1]))
    pos_q, stats["clique_edges_unpacked"] = _unpack_positions(overlay, st, pos, qa_g, qt_g)
    stats["clique_edges"] = int(pos.size)
    # edges into tree nodes (head: the node's state) and out of bucket entries (head: the parent's state)
    fq = _edge_quantities(n_mark & (n_par >= 0), n_state, n_ref, pos, pos_q, qa_s, qt_s)
    e_head = np.where(e_parent >= 0, e_state[np.maximum(e_parent, 0)], 0)
    bq = _edge_quantities(marked & (e_parent >= 0), e_head, e_ref, pos, pos_q, qa_s, qt_s)
    accf = _accumulate(n_par, fq, n_mark)
    accb = _accumulate(e_parent, bq, marked)
    out = np.empty((nq, S, T))
    _along_cells(so, to, same, o_eid, o_xref, o_node, s_start, e_state, sa, sf, ta, tf, qa_g, qa_s, qt_s, pos, pos_q,
                 accf, accb, out)
    return tuple(out[q] for q in range(nq))


def _unpack_positions(overlay, st, pos, qa_g, qt_g):
    """``(values, unpacked)``: the (k, nq) quantities of the clique edges at positions ``pos`` (query topology),
    and how many of them were unpacked here. Those of a cached ``along`` (:func:`_along`) are kept per state
    (:data:`_clique_items`): a clique edge is unpacked once per customization, at the first table whose paths
    cross it, not once per table (what OSRM's customizer does for every clique, at customization)."""
    hit = _clique_items.get(id(qa_g))
    if hit is None or hit[0] is not qa_g or hit[1] is not st:
        vals = _unpack_some(overlay, st, pos, qa_g, qt_g)
        return vals, int(pos.size)
    _, _, memo, have = hit
    miss = pos[~have[pos]]
    if miss.size:
        memo[miss] = _unpack_some(overlay, st, miss, qa_g, qt_g)
        have[miss] = True  # after the values: a concurrent table reads a flagged row only once written
    return memo[pos], int(miss.size)


def _unpack_some(overlay, st, pos, qa_g, qt_g):
    """(k, nq) quantities of the clique edges at positions ``pos`` (query topology), each unpacked."""
    nq = qa_g.shape[0]
    if pos.size == 0:
        return np.zeros((0, nq))
    topo = overlay._topo
    cq_first = topo["cq_first"]
    gcell = np.searchsorted(cq_first, pos, side="right") - 1
    nx = topo["ex_first"][gcell + 1] - topo["ex_first"][gcell]
    i = (pos - cq_first[gcell]) // nx
    ent = np.asarray(topo["ent_arc"], np.int64)[topo["ent_first"][gcell] + i]
    plan = overlay._plan
    # the microcode trees kept per thread and overlay (unpack_arrays empties them when the state changes),
    # not allocated (graph-sized) per table
    caches = getattr(_unpack_local, "caches", None)
    if caches is None:
        caches = _unpack_local.caches = {}
    hit = caches.get(id(overlay))
    if hit is None or hit[0] is not overlay:
        if len(caches) >= _STATES_KEPT:
            caches.clear()
        hit = caches[id(overlay)] = (overlay, {})
    refs, args = plan.unpack_arrays(overlay._tree_first, st.tree, st.clique, st.turn_cost, -(pos + 1), hit[1])
    mv, me, L = plan.unpack_buffer_sizes()
    mv, me = mv + 1, me + 1
    m = overlay.graph.n_arcs
    bufs = (np.empty(mv, np.int64), np.empty(mv, np.int64), np.empty(me, np.int64), np.empty(me, np.int64),
            np.empty((L + 1) * mv + m, np.int64), np.empty(mv, np.int64), np.empty(m + 1, np.int64))
    tr = overlay.turns
    return _clique_quantities(ent, np.asarray(refs, np.int64), np.asarray(tr.first, np.int64), tr.out_arc,
                              np.ascontiguousarray(qa_g), np.ascontiguousarray(qt_g), *args, *bufs)
