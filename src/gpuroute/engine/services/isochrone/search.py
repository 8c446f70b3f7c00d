"""The isochrone searches: the cost of every node reachable within the largest contour (a bounded Dijkstra,
or the hierarchy's bounded PHAST, :func:`search_cpu`), and on an engine with an overlay the turn-aware
bounded Dijkstra on arcs (:func:`search_turns`, :class:`OverlayMetrics`).

The search of isochrones on an engine with an overlay: routes as ``/route`` drives them, turn costs paid,
turn restrictions honoured, on the overlay's current metric (it follows ``/customize``).

Search (:func:`search_turns`). Dijkstra on arc states (the turn-expanded graph of the overlay's turn
table: states are arcs, a move is an allowed turn ``t = (a, b)`` at ``turn_cost[t]`` = penalty of the
turn + cost of ``b``; Delling, Kobitzsch, Werneck, "Customizing Driving Directions with GPUs", Euro-Par
2014, sec. 2) from the snapped origin: from each of its arcs ``(a, f)`` (fraction ``f`` from the tail) the
rest ``(1 - f) c(a)`` is paid, then every allowed turn out of ``a``. The label of an arc is the cost when
standing at its head; its ENTRY cost ``label(b) - c(b)`` is the cost when standing at its tail having
turned into it. Within a contour ``C`` the reachable pieces are then every arc with ``entry(b) <= C``, from
its tail to the fraction ``min(1, (C - entry(b)) / c(b))`` (what the node-based search draws with the
cost of the tail), and the origin's own arcs from the origin on (:func:`gpuroute.engine.services.isochrone.lattice._pieces`
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

import math
import threading

import numpy as np
from numba import njit

from .... import config
from ....crp.metric import RESTRICTED
from ....crp.overlay import metric_unit
from ....geo import EARTH_RADIUS_M
from ....graph.heap import heap_pop, heap_push
from ...osrm import EngineError
from ...traffic import MAX_RETRIES

__all__ = ["Metric", "Request", "search_cpu", "reach_cpu", "search_turns", "OverlayMetrics", "live_quantity"]

_DEG = math.pi / 180.0
#: Per-thread buffers of :func:`reach_cpu` (its distances, heap and output, sized for the last graph).
_reach_scratch = threading.local()


# ----------------------------------------------------------------------------------- search
@njit(cache=True)
def _bounded_dijkstra(first_out, head, weight, source, bound, cap, dist, hd, hn, touched):
    """Dijkstra from ``source`` over the CSR (integer weights) settling nothing beyond ``bound``; gives up
    after ``cap`` settled nodes (returns -1). ``dist`` (int64 (n,)) holds -1 for untouched nodes and is
    left with the reached nodes' distances at ``touched[:k]``; returns ``k``, or ``-k - 1`` when it gave
    up (``touched[:k]`` still lists what it wrote)."""
    dist[source] = 0
    touched[0] = source
    k = 1
    size = heap_push(hd, hn, 0, 0, source)
    settled = 0
    while size > 0:
        d, u, size = heap_pop(hd, hn, size)
        if d > dist[u]:
            continue
        settled += 1
        if settled > cap:
            return -k - 1
        for a in range(first_out[u], first_out[u + 1]):
            v = head[a]
            nd = d + weight[a]
            if nd <= bound:
                dv = dist[v]
                if dv < 0 or nd < dv:
                    if dv < 0:
                        touched[k] = v
                        k += 1
                    dist[v] = nd
                    size = heap_push(hd, hn, size, nd, v)
    return k


@njit(cache=True)
def _combine(touched, k, dist, off, best, out_nodes, n_out):
    """Fold one source's distances (``dist`` at ``touched[:k]``, plus ``off``) into ``best`` (float64 (n,),
    +inf where unset), listing newly set nodes in ``out_nodes``; resets ``dist`` to -1. Returns the new
    count of listed nodes."""
    for i in range(k):
        v = touched[i]
        x = float(dist[v]) + off
        if best[v] == np.inf:
            out_nodes[n_out] = v
            n_out += 1
            best[v] = x
        elif x < best[v]:
            best[v] = x
        dist[v] = -1
    return n_out


def reach_cpu(csr, heads, bounds, offs, within, cap):
    """Cost of every node reachable within the largest contour, from several sources (the heads of the
    origin's arcs), on the CPU.

    Parameters
    ----------
    csr : (first_out int64 (n+1,), head int32 (m,), weight int64 (m,))
        The graph under the hierarchy's integer weight.
    heads : sequence of int
    bounds : sequence of int
        Per source, the largest distance wanted (``>= 0``).
    offs : sequence of float
        Per source, the cost already paid (the rest of the origin's arc).
    within : callable ``(source, bound) -> (nodes, dist)``
        The hierarchy's bounded one-to-all, for searches past ``cap``.
    cap : int
        Settled nodes after which the Dijkstra gives up for ``within``.

    Returns
    -------
    nodes : ndarray int64, shape (r,)
        Unordered, distinct.
    dist : ndarray float64, shape (r,)
        ``min`` over the sources of ``offs[s] + d_s(v)`` for ``d_s(v) <= bounds[s]``.
    """
    fo, head, w = csr
    n = fo.shape[0] - 1
    st = _reach_scratch
    if getattr(st, "n_search", None) != n:
        st.dist = np.full(n, -1, dtype=np.int64)
        st.best = np.full(n, np.inf)
        st.touched = np.empty(n, dtype=np.int64)
        st.out = np.empty(n, dtype=np.int64)
        st.hd = np.empty(w.shape[0] + 1, dtype=np.int64)
        st.hn = np.empty(w.shape[0] + 1, dtype=np.int64)
        st.n_search = n
    dist, best, touched, out = st.dist, st.best, st.touched, st.out
    n_out = 0
    for s, b, off in zip(heads, bounds, offs, strict=True):
        k = _bounded_dijkstra(fo, head, w, int(s), int(b), int(cap), dist, st.hd, st.hn, touched)
        if k >= 0:
            n_out = _combine(touched, k, dist, float(off), best, out, n_out)
            continue
        dist[touched[:-k - 1]] = -1
        nodes, d = within(int(s), int(b))
        nodes = np.asarray(nodes, dtype=np.int64)
        d = np.asarray(d, dtype=np.int64)
        dist[nodes] = d
        touched[:nodes.size] = nodes
        n_out = _combine(touched, nodes.size, dist, float(off), best, out, n_out)
    nodes = out[:n_out].copy()
    cost = best[nodes]
    best[nodes] = np.inf
    return nodes, cost


# ----------------------------------------------------------------------------------- one request
class Metric:
    """What an isochrone searches: arc costs (native unit) and how to search them.

    Attributes
    ----------
    name : str
        The weight.
    w : ndarray float64, shape (m,)
        Arc costs.
    scale : float
        Native unit -> seconds or metres.
    csr : tuple or None
        ``(first_out int64, head int32, weight int64)`` of the integer weight under the hierarchy ``ch``.
    ch : ContractionHierarchy or None
    search : callable or None
        Without a hierarchy: ``(source, bound) -> (nodes, float costs)`` (scipy's bounded Dijkstra).
    turns : tuple or None
        On an engine with an overlay: ``(first int64 (m+1,), out_arc int64 (T,), turn_cost float64 (T,))``,
        the turn table and the cost of every turn (penalty + cost of the out-arc, native unit; negative:
        forbidden); the search is then the turn-aware one of :func:`search_turns` and
        the pieces are drawn from the arcs' entry costs.
    """

    __slots__ = ("name", "w", "scale", "csr", "ch", "search", "turns")

    def __init__(self, name, w, scale, csr=None, ch=None, search=None, turns=None):
        self.name, self.w, self.scale, self.csr, self.ch, self.search = name, w, scale, csr, ch, search
        self.turns = turns


class Request:
    """One isochrone: the origin's arcs and the contours (native unit, largest first).

    Attributes
    ----------
    o_arc : ndarray int64 (k,)
    o_frac : ndarray float64 (k,)
    cus : ndarray float64 (K,)
    lon0, lat0, kx, ky : float
        The frame (the snapped origin) and its metres per degree east and north.
    heads, bounds, offs : lists
        The searches: per origin arc whose rest costs at most the largest contour, its head, the bound
        (hierarchy weights: integer, the floor) and the rest's cost.
    """

    __slots__ = ("o_arc", "o_frac", "cus", "lon0", "lat0", "kx", "ky", "heads", "bounds", "offs")

    def __init__(self, metric, head, arcs, cus, lon0, lat0):
        self.o_arc = np.array([a for a, _ in arcs], dtype=np.int64)
        self.o_frac = np.array([f for _, f in arcs], dtype=np.float64)
        self.cus = np.asarray(cus, dtype=np.float64)
        self.lon0, self.lat0 = float(lon0), float(lat0)
        self.kx = (_DEG * EARTH_RADIUS_M) * math.cos(self.lat0 * _DEG)
        self.ky = _DEG * EARTH_RADIUS_M
        cmax = float(self.cus[0])
        self.heads, self.bounds, self.offs = [], [], []
        for a, fa in zip(self.o_arc, self.o_frac, strict=True):
            off = (1.0 - fa) * metric.w[a]
            if off <= cmax:
                self.heads.append(int(head[a]))
                self.offs.append(float(off))
                b = cmax - off
                self.bounds.append(int(math.floor(b + 1e-9)) if metric.ch is not None else b)


def search_cpu(metric, req):
    """``(nodes int64, cost float64)`` of every node within the largest contour (CPU): the bounded
    Dijkstra / PHAST of :func:`reach_cpu` with a hierarchy, scipy's bounded Dijkstra without."""
    if metric.ch is not None:
        n = metric.csr[0].shape[0] - 1
        cap = max(int(config.SERVE_ISOCHRONE_DIJKSTRA_MIN_NODES),
                  int(float(config.SERVE_ISOCHRONE_DIJKSTRA_FRACTION) * n))
        ch = metric.ch

        def within(source, bound):
            return ch.within(source, bound, device="cpu")

        return reach_cpu(metric.csr, req.heads, req.bounds, req.offs, within, cap)
    found_n, found_d = [], []
    for s, b, off in zip(req.heads, req.bounds, req.offs, strict=True):
        nodes, d = metric.search(s, b)
        found_n.append(np.asarray(nodes, dtype=np.int64))
        found_d.append(np.asarray(d, dtype=np.float64) + off)
    if not found_n:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    nodes = np.concatenate(found_n)
    dist = np.concatenate(found_d)
    order = np.lexsort((dist, nodes))
    nodes, dist = nodes[order], dist[order]
    first = np.ones(nodes.size, dtype=bool)
    first[1:] = nodes[1:] != nodes[:-1]
    return nodes[first], dist[first]


# ----------------------------------------------------------------------------------- turns
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


class _TurnScratch(threading.local):
    """Per-thread search buffers (labels kept at +inf between searches)."""

    m = -1


_turn_scratch = _TurnScratch()


def search_turns(metric, req):
    """Entry cost of every arc entered within the largest contour (CPU).

    Parameters
    ----------
    metric : gpuroute.engine.services.isochrone.search.Metric
        With ``turns = (first int64 (m+1,), out_arc int64 (T,), turn_cost float64 (T,))``: the turns out of
        arc ``a`` are ``first[a]:first[a+1]``, onto ``out_arc``, each costing ``turn_cost`` (penalty + cost
        of the out-arc, native unit; negative: forbidden); ``w`` float64 (m,) the arc costs.
    req : gpuroute.engine.services.isochrone.search.Request
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
    st = _turn_scratch
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
        """The :class:`gpuroute.engine.services.isochrone.search.Metric` (with ``turns``) of ``"duration"`` or
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
        if live and hit is not None and hit[0] is cur:
            return hit[1]  # without a copy of the costs
        if not live:
            st = ov._need_state()
            dur = st.arc_duration if quantity == "time" else None  # live travel times (speed updates)
            if dur is not None:
                hit = self._cache.get((metric, "live"))
                if hit is not None and hit[0] is dur:
                    return self._closing(hit[1], st.metric)
                met = self._graph_metric(quantity, dur)
                self._cache[(metric, "live")] = (dur, met)
                return self._closing(met, st.metric)
            if hit is None:
                hit = self._cache[(metric, False)] = (None, self._graph_metric(quantity))
            return self._closing(hit[1], st.metric)  # the arcs live traffic closed, closed here too
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

    def _closing(self, met, current):
        """``met`` (a metric of the graph's own weights) with the turns into the arcs the overlay's
        ``current`` metric closed (live traffic at speed 0) forbidden: a closed road is closed for every
        metric. ``met`` itself when none is closed; cached per (``met``, ``current``)."""
        closed = getattr(current, "closed", None)
        if closed is None:
            return met
        hit = self._cache.get(("closed", id(met)))
        if hit is not None and hit[0] is current and hit[1] is met:
            return hit[2]
        first, out_arc, tcost = met.turns
        out = Metric(met.name, met.w, met.scale, turns=(first, out_arc, np.where(closed[out_arc], -1.0, tcost)))
        self._cache[("closed", id(met))] = (current, met, out)
        return out

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
