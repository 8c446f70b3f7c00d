"""RPHAST: one-to-many distances to a fixed target set over a contraction hierarchy -- the target selection
(the restricted downward structure, built once per target set) and the CPU twin of the restricted sweep
(numba). The GPU twin is :mod:`gpuroute.ch.rphast_gpu` (kernels in ``rphast.cu``).

Delling, Goldberg, Werneck, "Faster Batched Shortest Paths in Road Networks", ATMOS 2011, sec. 3-4:
PHAST's downward sweep (Delling, Goldberg, Nowatzyk, Werneck, IPDPS 2011) needs, for the distances of a
target set ``T``, only the nodes from which a downward path reaches ``T``: the *target selection* ``T'``,
found once by a search from ``T`` over the reversed downward arcs. Its nodes, renumbered and ordered top
first, with their downward in-arcs, form a small CSR; every source then costs one upward search (or, once
the hub labels exist, its forward label: the highest node of every shortest path is in it, exactly) and
one linear sweep over ``T'`` instead of over all ``n`` nodes.

Layout of a :class:`TargetSelection` (restricted ids ``0 .. R-1``, the same on the CPU and the GPU):

* ``[0, c)``: the whole core of CU-CH (Karimi, Koppelman, Michael, ICS '19, sec. 3.6) in ``h.core``'s order.
  An upward search may end at any core node, so every core node has a slot (the ``a`` side of the core
  step); only the selected ones (``core_sel``: reached from ``T``, or targets) are written by the dense
  core step ``d[b] = min(d[b], min_a d[a] + core_dist[a, b])`` (the ``b`` side), whose columns
  ``core_dist_sel`` (c, cb) are cut once per selection.
* ``[c, R)``: the selected non-core nodes by *depth*, then node id: depth 0 has no downward in-arc from
  another selected non-core node, depth ``i`` has one from depth ``i - 1`` and none from deeper. A depth
  is independent (the sweep may run its nodes in parallel); the depths are the restricted DAG's own
  layering, never more of them than the hierarchy's levels (which layer it too). ``level_bounds`` (L+1,)
  cuts the range into them, top first.
* ``first_out`` / ``tail`` / ``weight``: the downward in-arcs ``u -> v`` of every selected non-core ``v``
  (core tails included, core-core arcs left to the core step, as PHAST does), a CSR by head over
  restricted ids. Every tail is selected (the selection is closed under them), so the sweep over ``T'``
  computes, at each of its nodes, exactly what the full PHAST sweep computes there.

Public API: :class:`TargetSelection` (``select_targets``), :func:`rphast_cpu`.
"""
from __future__ import annotations

import weakref

import numpy as np
from numba import njit, prange

from .. import config
from ..graph.constants import DIST_DTYPE, INDEX_DTYPE, INF
from .phast import (
    bucket_search,
    chunk_bounds,
    chunk_count,
    merge_phases,
    phase_cost,
    reset_touched,
    search_buffers,
)
from .query import built_hub_labels, id_array, prepared

__all__ = ["TargetSelection", "select_targets", "rphast_cpu", "upward_entries", "resolve_upward", "label_rids",
           "UPWARD", "INF"]

#: Ways of getting each source's upward distances: ``"search"`` (an upward Dijkstra over the hierarchy, no
#: core node expanded), ``"labels"`` (the source's forward hub label; needs ``ContractionHierarchy.hub_labels()``),
#: ``"auto"`` (labels once built, else search). The results are the same.
UPWARD = ("auto", "search", "labels")
_INF = INF
#: Sources per parallel chunk at least (each chunk allocates its own search buffers).
_MIN_PER_CHUNK = 4


# ---------------------------------------------------------------------------------------------- selection
@njit(cache=True, inline="always")
def _visit(u, mark, in_core, stack, top):
    """Mark ``u``; push it on ``stack`` (``top`` entries; returns the new top) when first marked and not core."""
    if not mark[u]:
        mark[u] = True
        if not in_core[u]:
            stack[top] = u
            return top + 1
    return top


@njit(cache=True)
def _closure(dfo, dtail, in_core, targets, mark):
    """Mark every node from which a downward path reaches a target (``mark`` bool (n,), False on entry):
    a search from the targets over the reversed downward arcs, expanding no core node (a core node's
    downward in-arcs are core-core arcs: the core step's)."""
    n = mark.shape[0]
    stack = np.empty(max(n, 1), dtype=np.int32)
    top = 0
    for i in range(targets.shape[0]):
        top = _visit(targets[i], mark, in_core, stack, top)
    while top > 0:
        top -= 1
        v = stack[top]
        for a in range(dfo[v], dfo[v + 1]):
            top = _visit(dtail[a], mark, in_core, stack, top)


@njit(cache=True)
def _depths(sel_by_rank, dfo, dtail, in_core, depth):
    """``depth[v]`` for the selected non-core nodes, given in decreasing rank (a topological order of the
    downward arcs): 0 without a non-core tail, else 1 + the deepest non-core tail."""
    for i in range(sel_by_rank.shape[0]):
        v = sel_by_rank[i]
        dv = 0
        for a in range(dfo[v], dfo[v + 1]):
            u = dtail[a]
            if not in_core[u] and depth[u] + 1 > dv:
                dv = depth[u] + 1
        depth[v] = dv


class TargetSelection:
    """The restricted downward structure of one target set (RPHAST's target selection; see the module doc
    for the layout). Built by :meth:`build` (or :func:`select_targets`), reused for any number of sources;
    valid for the hierarchy it was built from only.

    Attributes
    ----------
    n_nodes : int
        Nodes of the hierarchy (``n``).
    targets : ndarray int64, shape (t,)
        The targets as given (repeats allowed): the columns of every result.
    n_restricted : int
        ``R = c + r``: the core plus the selected non-core nodes.
    node : ndarray int32, shape (R,)
        Restricted id -> node id.
    rid : ndarray int32, shape (n,)
        Node id -> restricted id, -1 outside the selection (and never -1 for a core node).
    c : int
        Core size (0 for a hierarchy without a core).
    core_sel : ndarray int32, shape (cb,)
        Restricted ids (= core positions) of the selected core nodes, ascending.
    core_dist_sel : ndarray int64, shape (c, cb)
        ``core_dist[:, core_sel]``: the columns of the core step; INF where unreachable.
    level_bounds : ndarray int64, shape (L + 1,)
        Depth ``i`` is restricted ids ``level_bounds[i] .. level_bounds[i + 1]``, top first;
        ``level_bounds[0] == c``, ``level_bounds[-1] == R``.
    first_out : ndarray int64, shape (R + 1,)
    tail : ndarray int32, shape (A,)
        Restricted id of each in-arc's tail (a higher node: an earlier depth, or the core).
    weight : ndarray int64, shape (A,)
        In the hierarchy's weight unit.
    target_rid : ndarray int32, shape (t,)
        Restricted id of each target.
    time_s : float
        Seconds the selection took.
    """

    def __init__(self, h, targets, node, rid, c, core_sel, core_dist_sel, level_bounds, first_out, tail, weight,
                 time_s=0.0):
        self._h = weakref.ref(h)
        self.n_nodes = int(h.n_nodes)
        self.targets = targets
        self.node, self.rid, self.c = node, rid, int(c)
        self.core_sel, self.core_dist_sel = core_sel, core_dist_sel
        self.level_bounds, self.first_out, self.tail, self.weight = level_bounds, first_out, tail, weight
        self.target_rid = rid[targets].astype(INDEX_DTYPE)
        self.n_restricted = int(node.size)
        self.time_s = float(time_s)
        self._device = {}  # the GPU twin's uploads (gpuroute.ch.rphast_gpu), made on first use
        self._merged = {}  # (m, k, cost) -> merged sweep (merged())

    @classmethod
    def build(cls, h, targets):
        """Select the targets' restricted downward structure (Delling, Goldberg, Werneck, ATMOS 2011,
        sec. 4.1: target selection).

        Parameters
        ----------
        h : Hierarchy
        targets : array_like of int, shape (t,)
            Node ids; repeats allowed.

        Returns
        -------
        TargetSelection

        Raises
        ------
        IndexError
            A target outside ``[0, n)`` (the message names its position).
        ValueError
            ``targets`` not 1-D.
        TypeError
            Non-integer targets.
        """
        import time

        t0 = time.perf_counter()
        n = h.n_nodes
        t = id_array(targets, n, "targets")
        core = h.core.astype(np.int64)
        c = core.size
        in_core = np.zeros(n, dtype=np.bool_)
        in_core[core] = True
        dfo = h.down_first_out.astype(np.int64)
        dtail = h.down_tail.astype(np.int64)
        mark = np.zeros(n, dtype=np.bool_)
        if t.size:
            _closure(dfo, dtail, in_core, t, mark)
        sel = np.flatnonzero(mark & ~in_core)
        depth = np.zeros(n, dtype=np.int64)
        _depths(sel[np.argsort(-h.rank[sel].astype(np.int64), kind="stable")], dfo, dtail, in_core, depth)
        sel = sel[np.lexsort((sel, depth[sel]))]  # by depth, then node id
        node = np.concatenate((core, sel)).astype(INDEX_DTYPE)
        rid = np.full(n, -1, dtype=INDEX_DTYPE)
        rid[node] = np.arange(node.size, dtype=INDEX_DTYPE)
        core_sel = np.flatnonzero(mark[core]).astype(INDEX_DTYPE) if c else np.zeros(0, dtype=INDEX_DTYPE)
        cd = np.asarray(h.core_dist, dtype=DIST_DTYPE).reshape(c, c)
        core_dist_sel = np.ascontiguousarray(cd[:, core_sel])
        dsel = depth[sel]
        cuts = np.flatnonzero(np.diff(dsel)) + 1
        level_bounds = (np.concatenate(([0], cuts, [sel.size])) + c).astype(np.int64) if sel.size else \
            np.array([c], dtype=np.int64)
        # in-arcs of the selected non-core nodes, in restricted order (core heads have none)
        cnt = dfo[sel + 1] - dfo[sel]
        loc = np.zeros(sel.size + 1, dtype=np.int64)
        np.cumsum(cnt, out=loc[1:])
        first_out = np.concatenate((np.zeros(c, dtype=np.int64), loc))
        arcs = np.repeat(dfo[sel] - loc[:-1], cnt) + np.arange(int(loc[-1]), dtype=np.int64)
        tail = rid[dtail[arcs]]
        weight = np.asarray(h.down_weight, dtype=DIST_DTYPE)[arcs]
        if tail.size and int(tail.min()) < 0:  # the closure guarantees it; a broken hierarchy would not
            raise ValueError("target selection: a downward in-arc's tail is outside the selection (broken hierarchy)")
        return cls(h, t, node, rid, c, core_sel, core_dist_sel, level_bounds, first_out, tail.astype(INDEX_DTYPE),
                   weight, time.perf_counter() - t0)

    @property
    def n_levels(self):
        """Depths of the restricted sweep (dependent steps after the core step)."""
        return int(self.level_bounds.size - 1)

    def merged(self, m, k=1, cost=None):
        """The sweep with its depths merged into phases (cached): ``(level_bounds, first_out, tail, weight)`` in the
        layout of the attributes, by :func:`gpuroute.ch.phast.merge_phases` (PHAST's downward pass on the GPU merges
        its levels the same way). ``m >= 1``: ``m`` consecutive depths a phase; ``m = 0``: the phase boundaries by
        the cost model (``cost``: :func:`~gpuroute.ch.phast.phase_cost`, default ``config.CH_PHASE_*``) for passes
        of ``k`` sources. A node's in-arcs are its own plus,
        through every tail ``u`` of its phase, ``u``'s merged in-arcs extended by the arc ``u -> v`` (lightest per
        tail), so a phase's nodes may run in parallel, each reading the others' distances before or after they are
        lowered: either value, with the extended arcs, gives the node its exact result (``d[u]`` is ``min(up[u],
        min_x d[x] + w(x, u))`` and both terms are there). Fewer dependent steps than ``L`` for more arcs; on DIMACS
        NY with 1,000 targets, m = 4 gives 13 steps for 1.7x the arcs, m = 8 7 steps for 2.7x.

        Raises
        ------
        ValueError
            ``m < 0`` or ``k < 1``.
        """
        m, k = int(m), int(k)
        if m < 0:
            raise ValueError(f"levels merged must be >= 0 (0: by the cost model), got {m}")
        if m == 1:
            return self.level_bounds, self.first_out, self.tail, self.weight
        cost = phase_cost() if cost is None else np.asarray(cost, dtype=np.float64)
        key = (m, k, tuple(cost.tolist()), int(config.CH_PHASE_MAX_LEVELS)) if m == 0 else (m,)
        got = self._merged.get(key)
        if got is None:
            got = self._merged[key] = merge_phases(self.c, self.level_bounds, self.first_out, self.tail, self.weight,
                                                   levels=m, k=k, cost=cost)
        return got

    @property
    def n_arcs(self):
        return int(self.tail.size)

    @property
    def nbytes(self):
        """Host bytes of the arrays (``rid`` included)."""
        return sum(int(a.nbytes) for a in (self.node, self.rid, self.core_sel, self.core_dist_sel, self.level_bounds,
                                             self.first_out, self.tail, self.weight, self.target_rid, self.targets))

    def check(self, h):
        """Raise ValueError unless this selection was built from hierarchy ``h``."""
        if self._h() is not h:
            raise ValueError("this TargetSelection was built from another hierarchy (select the targets again)")

    def __repr__(self):
        return (f"TargetSelection(targets={self.targets.size:,}, restricted={self.n_restricted:,} of {self.n_nodes:,} "
                f"(core {self.c}, {self.core_sel.size} selected), arcs={self.n_arcs:,}, levels={self.n_levels})")


def select_targets(h, targets):
    """:meth:`TargetSelection.build`."""
    return TargetSelection.build(h, targets)


# ---------------------------------------------------------------------------------------------- upward passes
@njit(cache=True, inline="always")
def _keep(r, x, fill, e_rid, e_dist, o, m):
    """An upward distance ``x`` at restricted id ``r`` (-1: outside the selection, dropped): the source's
    ``m``-th entry, written at ``o + m`` when ``fill``; returns the new count."""
    if r < 0:
        return m
    if fill:
        e_rid[o + m] = r
        e_dist[o + m] = x
    return m + 1


@njit(cache=True, parallel=True)
def _search_entries(rec, nw, core_pos, c, rid_rank, sources, heap_cap, n_chunks, offsets, e_rid, e_dist, fill):
    """The upward searches of ``sources`` (ranks; PHAST's, :func:`gpuroute.ch.phast.bucket_search` without
    stalling; ``c`` core nodes), kept where they meet the selection. ``fill=False``: ``offsets[i + 1]`` =
    entries of source ``i``; ``fill=True``: write them at ``offsets[i]`` into ``e_rid`` (restricted ids) and
    ``e_dist``."""
    k = sources.shape[0]
    n = core_pos.shape[0]
    for ci in prange(n_chunks):
        lo, hi = chunk_bounds(ci, k, n_chunks)
        d, hk, hn, touched, entries, sn, sd = search_buffers(n, c, heap_cap)
        for i in range(lo, hi):
            _, _, nt = bucket_search(0, rec, nw, core_pos, sources[i], d, hk, hn, touched, entries, sn, sd, False)
            m = 0
            o = offsets[i] if fill else 0
            for q in range(nt):
                u = touched[q]
                m = _keep(rid_rank[u], d[u], fill, e_rid, e_dist, o, m)
            reset_touched(d, touched, nt)
            if not fill:
                offsets[i + 1] = m


@njit(cache=True)
def _label_entries(node, hub, dist, lidr, slid, offsets, e_rid, e_dist, fill):
    """The same from the sources' forward hub labels (label ids ``slid``): hub ``x`` of the label at
    restricted id ``lidr[x]`` (label id -> restricted id, -1 outside the selection)."""
    for i in range(slid.shape[0]):
        v = slid[i]
        m = 0
        o = offsets[i] if fill else 0
        for q in range(node[v, 0], node[v + 1, 0]):
            m = _keep(lidr[hub[q]], dist[q], fill, e_rid, e_dist, o, m)
        if not fill:
            offsets[i + 1] = m


def resolve_upward(h, upward):
    """``(upward, labels)``: ``"auto"`` resolved to ``"labels"`` (once built) or ``"search"``, and the hub labels
    of ``h`` (None before they are built).

    Raises
    ------
    ValueError
        An unknown ``upward``; ``"labels"`` before the labels exist.
    """
    if upward not in UPWARD:
        raise ValueError(f"upward must be one of {UPWARD}, got {upward!r}")
    lab = built_hub_labels(h)
    if upward == "labels" and lab is None:
        raise ValueError("upward='labels' needs the hub labels: call ContractionHierarchy.hub_labels() first")
    if upward == "auto":
        upward = "labels" if lab is not None else "search"
    return upward, lab


def label_rids(sel, lab):
    """``lidr`` int32 (n,): a hub label id's restricted id in ``sel`` (-1 outside it); cached on ``sel``."""
    key = ("lidr", id(lab))
    got = sel._device.get(key)
    if got is None:
        got = sel._device[key] = sel.rid[np.asarray(lab.lid_node, dtype=np.int64)].astype(INDEX_DTYPE)
    return got


def upward_entries(h, sel, sources, upward="auto"):
    """Each source's upward distances where they meet the selection: what the restricted sweep starts from.

    Parameters
    ----------
    h : Hierarchy
    sel : TargetSelection
    sources : ndarray int64, shape (k,)
        Node ids (validated).
    upward : {"auto", "search", "labels"}

    Returns
    -------
    offsets : ndarray int64, shape (k + 1,)
        Source ``i``'s entries are ``offsets[i] .. offsets[i + 1]``.
    e_rid : ndarray int32
        Restricted ids.
    e_dist : ndarray int64
        Upper bounds on the distance from the source (exact at the highest node of every shortest path
        into the selection), in the weight's unit.
    """
    upward, lab = resolve_upward(h, upward)
    k = int(sources.size)
    if upward == "labels":
        slid = np.asarray(lab.node_lid, dtype=np.int64)[sources]
        return _two_passes(_label_entries, (lab.node, lab.hub, lab.dist, label_rids(sel, lab), slid), k)
    p = prepared(h)
    rid_rank = sel.rid[p.order]  # rank -> restricted id
    src = p.rank[sources].astype(np.int64)
    return _two_passes(_search_entries, (p.rec.ravel(), p.nw.ravel(), p.core_pos, int(h.core.size), rid_rank, src,
                                         p.heap_cap, chunk_count(k, _MIN_PER_CHUNK)), k)


def _two_passes(entries, args, k):
    """``(offsets, e_rid, e_dist)`` of ``k`` sources from ``entries(*args, offsets, e_rid, e_dist, fill)``
    (:func:`_search_entries` or :func:`_label_entries`): one pass counting, one filling."""
    offsets = np.zeros(k + 1, dtype=np.int64)
    entries(*args, offsets, np.zeros(0, dtype=INDEX_DTYPE), np.zeros(0, dtype=DIST_DTYPE), False)
    np.cumsum(offsets, out=offsets)
    e_rid = np.empty(int(offsets[-1]), dtype=INDEX_DTYPE)
    e_dist = np.empty(int(offsets[-1]), dtype=DIST_DTYPE)
    entries(*args, offsets, e_rid, e_dist, True)
    return offsets, e_rid, e_dist


# ---------------------------------------------------------------------------------------------- the sweep
@njit(cache=True, parallel=True)
def _rows(offsets, e_rid, e_dist, c, core_sel, core_dist_sel, first_out, tail, weight, target_rid, n_chunks):
    """Per source: the restricted distances from its upward entries, the core step over the selected core
    columns, the sweep over the selected non-core nodes in restricted order (top first: every tail is
    final before its head), then the targets' distances. int64 (k, t)."""
    k = offsets.shape[0] - 1
    R = first_out.shape[0] - 1
    t = target_rid.shape[0]
    cb = core_sel.shape[0]
    out = np.empty((k, t), dtype=np.int64)
    for ci in prange(n_chunks):
        lo, hi = chunk_bounds(ci, k, n_chunks)
        rd = np.empty(R, dtype=np.int64)
        up = np.empty(max(c, 1), dtype=np.int64)
        for i in range(lo, hi):
            rd[:] = _INF
            for q in range(offsets[i], offsets[i + 1]):
                rd[e_rid[q]] = e_dist[q]
            for a in range(c):  # the core step from the upward values (a snapshot: the sums of the paper)
                up[a] = rd[a]
            for a in range(c):
                da = up[a]
                if da == _INF:
                    continue
                for bi in range(cb):
                    x = core_dist_sel[a, bi]
                    if x != _INF:
                        b = core_sel[bi]
                        if da + x < rd[b]:
                            rd[b] = da + x
            for v in range(c, R):  # restricted ids are in sweep order
                best = rd[v]
                for a in range(first_out[v], first_out[v + 1]):
                    du = rd[tail[a]]
                    if du != _INF:
                        x = du + weight[a]
                        if x < best:
                            best = x
                rd[v] = best
            row = out[i]
            for q in range(t):
                row[q] = rd[target_rid[q]]
    return out


def rphast_cpu(h, selection, sources, *, upward="auto"):
    """One-to-many distances from each source to the selection's targets by RPHAST on the CPU (numba,
    parallel over sources): the upward pass (search or forward label), the core step over the selected
    core columns and the sweep over the selection only (Delling, Goldberg, Werneck, ATMOS 2011, sec. 4).

    Parameters
    ----------
    h : Hierarchy
    selection : TargetSelection
        Built from ``h`` (:func:`select_targets`).
    sources : array_like of int, shape (k,)
    upward : {"auto", "search", "labels"}
        See :data:`UPWARD` (same results).

    Returns
    -------
    ndarray int64, shape (k, t)
        ``[i, q]`` = distance from ``sources[i]`` to ``selection.targets[q]`` in the weight's unit, ``INF``
        where unreachable.

    Raises
    ------
    IndexError
        A source outside ``[0, n)``.
    ValueError
        A selection of another hierarchy; an unknown ``upward``; ``"labels"`` before the labels exist.
    """
    selection.check(h)
    s = id_array(sources, h.n_nodes, "sources")
    offsets, e_rid, e_dist = upward_entries(h, selection, s, upward)
    sel = selection
    return _rows(offsets, e_rid, e_dist, sel.c, sel.core_sel, sel.core_dist_sel, sel.first_out, sel.tail, sel.weight,
                 sel.target_rid, chunk_count(s.size, _MIN_PER_CHUNK))
