"""The search of isochrones on an engine with an overlay: routes as ``/route`` drives them, turn costs paid,
turn restrictions honoured, on the overlay's current metric (it follows ``/customize``).

Search (:func:`search_turns`). Dijkstra on arc states (the turn-expanded graph of the overlay's turn
table: states are arcs, a move is an allowed turn ``t = (a, b)`` at ``turn_cost[t]`` = penalty of the
turn + cost of ``b``; Delling, Kobitzsch, Werneck, "Customizing Driving Directions with GPUs", Euro-Par
2014, sec. 2) from the snapped origin: from each of its arcs ``(a, f)`` (fraction ``f`` from the tail) the
rest ``(1 - f) c(a)`` is paid, then every allowed turn out of ``a``. The label of an arc is the cost when
standing at its head; its ENTRY cost ``label(b) - c(b)`` is the cost when standing at its tail having
turned into it. Within a contour ``C`` the reachable pieces are then every arc with ``entry(b) <= C``, from
its tail to the fraction ``min(1, (C - entry(b)) / c(b))`` (what the node-based search draws with the
cost of the tail), and the origin's own arcs from the origin on (:func:`gpuroute.engine.isochrone._pieces`
with ``by_arc``). The search settles every arc whose label is at most the largest contour and stops;
since a turn costs at least its out-arc (penalties are ``>= 0``), the labels of the arcs left in the heap
whose entry is within the contour are final by then. It runs on the CPU (numba): it is bounded by the
largest contour, and small.

Metrics (:class:`OverlayMetrics`):

* ``"duration"``: the overlay's current metric when it is a time (then traffic-aware: its arc costs and
  turn costs, as ``/route`` reads them); else (``/customize`` switched it to a length, or a profile's
  weight that is not a time) the graph's travel times with the graph's turn durations (a Lua profile's
  ``turn_costs.duration``; none otherwise), the graph's turn restrictions and the turns the profile
  closes forbidden.
* ``"distance"``: lengths, no turn costs, turn restrictions honoured: the overlay's current metric when
  it is a length (its arc costs and the turns it forbids); else the graph's length weight, with the
  graph's restrictions and the turns the profile closes forbidden.
"""
from __future__ import annotations

import threading

import numpy as np
from numba import njit

from ..crp.metric import RESTRICTED
from ..crp.overlay import metric_unit
from ..sssp.dijkstra import heap_pop, heap_push
from .isochrone import Metric
from .osrm import EngineError
from .traffic import MAX_RETRIES

__all__ = ["search_turns", "OverlayMetrics", "live_quantity"]


def live_quantity(graph, overlay):
    """The quantity (``"time"``, ``"length"``, ...) of the overlay's current metric: isochrones of that
    metric follow ``/customize`` (a time: ``duration``; a length: ``distance``), the others search the
    graph's own weights."""
    return metric_unit(graph, overlay.metric).quantity


@njit(cache=True, nogil=True)
def _relax(a, base, first, out_arc, turn_cost, cost, bound, label, hd, hn, size, touched, k):
    """Relax every allowed turn out of arc ``a`` from ``base`` (the cost at its head). Returns
    ``(size, k)``; ``size`` -1 when the heap ``hd``/``hn`` is full."""
    for t in range(first[a], first[a + 1]):
        tc = turn_cost[t]
        if tc < 0.0:
            continue
        b = out_arc[t]
        nd = base + tc
        if nd - cost[b] <= bound and nd < label[b]:
            if size == hd.shape[0]:
                return -1, k
            if label[b] == np.inf:
                touched[k] = b
                k += 1
            label[b] = nd
            size = heap_push(hd, hn, size, nd, b)
    return size, k


@njit(cache=True, nogil=True)
def _turn_search(first, out_arc, turn_cost, cost, s_arc, s_base, bound, label, hd, hn, touched):
    """Labels of every arc entered within ``bound`` from the seeds (arc ``s_arc[i]`` with ``s_base[i]``
    paid at its head): the turn-expanded Dijkstra of the module doc. ``label`` (m,) float64 holds +inf
    for every arc on entry and is left with the labels of ``touched[:k]``; returns ``k``, or ``-k - 1``
    when the heap (lazy deletion: one entry per improved label) ran full (``touched[:k]`` still lists
    what it wrote)."""
    size = 0
    k = 0
    for i in range(s_arc.shape[0]):
        if s_base[i] <= bound:
            size, k = _relax(s_arc[i], s_base[i], first, out_arc, turn_cost, cost, bound, label, hd, hn, size,
                             touched, k)
            if size < 0:
                return -k - 1
    while size > 0:
        d, a, size = heap_pop(hd, hn, size)
        if d > label[a]:
            continue  # a stale entry
        if d > bound:
            break  # nothing beyond reach is expanded; the labels left with entry <= bound are final
        size, k = _relax(a, d, first, out_arc, turn_cost, cost, bound, label, hd, hn, size, touched, k)
        if size < 0:
            return -k - 1
    return k


class _Scratch(threading.local):
    """Per-thread search buffers (labels kept at +inf between searches)."""

    m = -1


_scratch = _Scratch()


def search_turns(metric, req):
    """Entry cost of every arc entered within the largest contour (CPU).

    Parameters
    ----------
    metric : gpuroute.engine.isochrone.Metric
        With ``turns = (first int64 (m+1,), out_arc int64 (T,), turn_cost float64 (T,))``: the turns out of
        arc ``a`` are ``first[a]:first[a+1]``, onto ``out_arc``, each costing ``turn_cost`` (penalty + cost
        of the out-arc, native unit; negative: forbidden); ``w`` float64 (m,) the arc costs.
    req : gpuroute.engine.isochrone.Request
        The origin's arcs ``o_arc``/``o_frac`` and the contours ``cus`` (native unit, largest first).

    Returns
    -------
    arcs : ndarray int64, shape (r,)
        Distinct, unordered.
    entry : ndarray float64, shape (r,)
        Cost (native unit) at the tail of each arc having turned into it, ``<= cus[0]``.
    """
    first, out_arc, tcost = metric.turns
    w = metric.w
    m = w.shape[0]
    st = _scratch
    if st.m != m:
        st.label = np.full(m, np.inf)
        st.touched = np.empty(m, dtype=np.int64)
        st.hd = np.empty(m + 64, dtype=np.float64)  # grown below when a search fills it
        st.hn = np.empty(m + 64, dtype=np.int64)
        st.m = m
    base = (1.0 - req.o_frac) * w[req.o_arc]
    while True:
        k = _turn_search(first, out_arc, tcost, w, req.o_arc, base, float(req.cus[0]), st.label, st.hd, st.hn,
                         st.touched)
        if k >= 0:
            break
        st.label[st.touched[:-k - 1]] = np.inf  # again with twice the heap
        st.hd = np.empty(2 * st.hd.shape[0], dtype=np.float64)
        st.hn = np.empty(st.hd.shape[0], dtype=np.int64)
    arcs = st.touched[:k].copy()
    entry = st.label[arcs] - w[arcs]
    st.label[arcs] = np.inf
    return arcs, entry


class OverlayMetrics:
    """The isochrone metrics of an engine with an overlay (see the module doc), rebuilt when
    ``/customize`` swaps the overlay's metric.

    Parameters
    ----------
    graph : RoadGraph
    traffic : gpuroute.engine.traffic.TrafficRouter
    """

    def __init__(self, graph, traffic):
        self.graph = graph
        self.traffic = traffic
        tr = traffic.overlay.turns
        self.first = np.ascontiguousarray(tr.first, dtype=np.int64)
        self.out_arc = np.ascontiguousarray(tr.out_arc, dtype=np.int64)
        closed = np.asarray(tr.kind) == RESTRICTED
        tc = getattr(graph, "turn_costs", None)
        self.turn_duration = None
        if tc is not None:  # a Lua profile's: its closed turns, and its turn durations (deciseconds)
            closed = closed | np.asarray(tc.forbidden)
            self.turn_duration = np.asarray(tc.duration, dtype=np.float64)
        self.allowed = ~closed
        self._cache = {}  # a race builds a metric twice, harmlessly

    def get(self, metric):
        """The :class:`gpuroute.engine.isochrone.Metric` (with ``turns``) of ``"duration"`` or
        ``"distance"``.

        Raises
        ------
        EngineError
            ``InvalidOptions`` when the overlay's metric is not of that quantity and the graph has no
            weight of it.
        """
        ov = self.traffic.overlay
        quantity = "time" if metric == "duration" else "length"
        cur = ov.metric
        live = metric_unit(self.graph, cur).quantity == quantity  # the snapshot's test (is_time)
        hit = self._cache.get((metric, live))
        if hit is not None and (not live or hit[0] is cur):
            return hit[1]  # without a copy of the costs
        if not live:
            st = ov._need_state()
            dur = st.arc_duration if quantity == "time" else None  # live travel times (speed updates)
            if dur is not None:
                hit = self._cache.get((metric, "live"))
                if hit is not None and hit[0] is dur:
                    return hit[1]
                met = self._graph_metric(quantity, dur)
                self._cache[(metric, "live")] = (dur, met)
                return met
            met = self._graph_metric(quantity)
            self._cache[(metric, False)] = (None, met)
            return met
        for _ in range(MAX_RETRIES):  # the metric and its turn costs from one customization
            snap = self.traffic.snapshot()
            if ov.metric is snap.metric:
                break
        if metric_unit(self.graph, snap.metric).quantity != quantity:  # swapped for another quantity meanwhile
            return self.get(metric)
        w = np.asarray(snap.cost, dtype=np.float64)
        if quantity == "time":
            tcost = np.asarray(snap.turn_cost, dtype=np.float64)
        else:  # no turn costs, the turns the metric forbids
            tcost = np.where(np.asarray(snap.turn_cost) >= 0, w[self.out_arc], -1.0)
        met = Metric(snap.name or metric, w, float(snap.scale), turns=(self.first, self.out_arc, tcost))
        self._cache[(metric, True)] = (snap.metric, met)
        return met

    def _graph_metric(self, quantity, durations=None):
        """The graph's travel times with its turn durations, or its lengths, with its turn rules;
        ``durations`` (int64 (m,), deciseconds: an overlay state's live ``arc_duration``) replace the
        travel times."""
        if durations is not None:
            w = np.asarray(durations, dtype=np.float64)
            pen = 0.0 if self.turn_duration is None else np.maximum(self.turn_duration, 0.0)
            tcost = np.where(self.allowed, w[self.out_arc] + pen, -1.0)
            return Metric("travel_time", w, 0.1, turns=(self.first, self.out_arc, tcost))
        g = self.graph
        names = [k for k in g.weights if g.units[k].quantity == quantity]
        prefer = "travel_time" if quantity == "time" else "distance"
        if prefer in names:
            names = [prefer]
        if not names:
            what = "duration" if quantity == "time" else "distance"
            raise EngineError("InvalidOptions", f"metric={what} needs a {quantity} weight; the overlay's metric "
                              f"is not a {quantity} and graph {g.name!r} has only {', '.join(sorted(g.weights))}")
        name = names[0]
        w = g.weight(name).astype(np.float64)
        scale = float(g.units[name].scale or 1.0)
        pen = 0.0
        if quantity == "time" and self.turn_duration is not None:
            pen = np.maximum(self.turn_duration, 0.0) * (0.1 / scale)  # deciseconds -> the weight's unit
        tcost = np.where(self.allowed, w[self.out_arc] + pen, -1.0)
        return Metric(name, w, scale, turns=(self.first, self.out_arc, tcost))
