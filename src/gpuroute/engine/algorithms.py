"""The engine's searches between phantom nodes, and the capability table saying which one answers which
service (OSRM's plugin model over one search interface; RoutingKit's many-source query with start
distances).

Two implementations share one interface, both taking :class:`gpuroute.geo.segments.PhantomSet` s (every
snapping option of every coordinate seeded with its offset in one search, only winning paths unpacked):

* :class:`CH`: the contraction hierarchy (no turn costs nor restrictions; the metric it was built for).
  ``many_to_many``: one node table between the distinct option nodes (:meth:`gpuroute.ch.
  ContractionHierarchy.table`, CPU buckets or GPU labels / PHAST), then the phantom step
  (:func:`gpuroute.engine.table_combine.combine`, numba twin and CUDA kernel). ``route``: per leg one
  node table between the options' nodes, the dynamic program over the options, one path unpacking.
* :class:`CRP`: the customized overlay, one metric snapshot (turn costs and restrictions, the current
  metric of ``/customize``). ``many_to_many``: :func:`gpuroute.crp.many_to_many.table` (OSRM's MLD
  buckets, numba) or its GPU twin :func:`gpuroute.crp.many_to_many_gpu.table` (same signature, same
  results). ``route``: one :func:`gpuroute.crp.phantom_search.search` per leg
  (:meth:`gpuroute.engine.traffic.TrafficRouter.plan`).

``device`` of ``many_to_many``: ``"auto"`` (the GPU where one is usable, :func:`gpuroute.backend.
resolve_device`), ``"cpu"`` or ``"gpu"`` (GPUUnavailableError without one), for both implementations: the
hierarchy's node table and phantom step, the overlay's many-to-many (:data:`CRP_TABLES`).

:func:`table_search` and :func:`route_search` pick the implementation for a request (on the metric snapshot
:func:`metric_snapshot` reads once per request); :func:`capabilities` is ``/health``'s table.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import config
from ..backend import resolve_device
from ..graph.constants import INF
from .osrm import EngineError
from .table_combine import combine

__all__ = ["CH", "CRP", "TableCosts", "metric_snapshot", "table_search", "route_search", "capabilities", "DEVICES",
           "CRP_TABLES"]

#: Values of ``many_to_many``'s ``device``.
DEVICES = ("auto", "cpu", "gpu")
#: The overlay many-to-many's twins by device (modules, each with a ``table`` of
#: :func:`gpuroute.crp.many_to_many.table`'s signature), imported on first use.
CRP_TABLES = {"cpu": "gpuroute.crp.many_to_many", "gpu": "gpuroute.crp.many_to_many_gpu"}
#: Metric snapshots whose per-arc and per-turn durations :func:`_along` keeps.
_ALONG_SNAPSHOTS = 4


@dataclass
class TableCosts:
    """Phantom-to-phantom matrices of one many-to-many search.

    Attributes
    ----------
    cost : ndarray float64 (S, T)
        Routing cost in the engine's weight unit (``inf``: no path).
    duration : ndarray float64 (S, T) or None
        Seconds along each cell's chosen path (None: not asked; ``inf`` where no path).
    distance : ndarray float64 (S, T) or None
        Metres likewise.
    """

    cost: np.ndarray
    duration: np.ndarray = None
    distance: np.ndarray = None


def _device(device):
    if device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
    return device


# ------------------------------------------------------------------------------------ hierarchy
class CH:
    """Searches on the engine's contraction hierarchy (see the module notes).

    Parameters
    ----------
    engine : Engine
    """

    name = "ch"

    def __init__(self, engine):
        self.engine = engine

    def many_to_many(self, sources, targets, *, need_dur=False, need_len=False, device="auto", on_device=False):
        """Costs between every source and every target phantom (:class:`TableCosts`).

        One node table on the hierarchy between the distinct nodes at the ends of the options' arcs, then
        per pair of options (source arc ``a`` at ``fa``, target arc ``b`` at ``fb``) ``(1 - fa) w(a) +
        d(head a, tail b) + fb w(b)`` or, on one arc with the target ahead, ``(fb - fa) w(a)``, minimised
        over the pairs (:func:`gpuroute.engine.table_combine.combine`; on the GPU where the node table is).
        Durations when they are not the routing weight, and distances, unpack the chosen path of each cell
        (one query per distinct node pair).

        Parameters
        ----------
        sources, targets : PhantomSet
        need_dur, need_len : bool
            Durations (s) / distances (m) too.
        device : {"auto", "cpu", "gpu"}
            Of the node table and the phantom step.
        on_device : bool
            True: where the table ran on the GPU, ``cost`` is handed back as the CuPy array the phantom step
            wrote, never copied to the host (the trip's tour search takes it there: issue 23); on the CPU
            it is the NumPy array as always. Only the cost: with ``need_dur`` or ``need_len`` it is
            refused (ValueError), their unpacking reads the cells' choices on the host.
        """
        e = self.engine
        if on_device and (need_dur or need_len):
            raise ValueError("on_device=True hands back the cost matrix only (need_dur and need_len must be False)")
        cost, choice = self._cost_matrix(sources, targets, _device(device), to_host=not on_device)
        dur = cost * e._w_scale if (need_dur and e._dur_is_weight) else None
        length = None
        if (need_dur and dur is None) or need_len:
            d2, length = self._unpack_cells(sources, targets, np.isfinite(cost), choice)
            dur = d2 if (need_dur and dur is None) else dur
        return TableCosts(cost, dur, length if need_len else None)

    def _cost_matrix(self, sp, tp, device, to_host=True):
        """Routing-weight costs (|S|, |T|) float64 (inf unreachable) and the choice of each cell:
        ``(source option, target option, same_arc)`` int arrays (CuPy arrays, left on the device, where
        the table ran on the GPU and ``to_host`` is False)."""
        e = self.engine
        w, head, tail = e._w, e._head, e._tail
        sa, sf = sp.padded()
        ta, tf = tp.padded()
        sv, tv = sa >= 0, ta >= 0
        s_node = np.where(sv, head[np.maximum(sa, 0)], 0)
        t_node = np.where(tv, tail[np.maximum(ta, 0)], 0)
        s_cost = np.where(sv, (1.0 - sf) * w[np.maximum(sa, 0)], math.inf)
        t_cost = np.where(tv, tf * w[np.maximum(ta, 0)], math.inf)
        # options another option of the same phantom dominates leave the node table (not the same-arc case)
        s_node, s_cost = _prune_options(sa, s_node, s_cost, tail, w)
        t_node, t_cost = _prune_options(ta, t_node, t_cost, head, w)
        us, s_inv = np.unique(s_node, return_inverse=True)
        ut, t_inv = np.unique(t_node, return_inverse=True)
        s_inv = s_inv.reshape(s_node.shape)
        t_inv = t_inv.reshape(t_node.shape)
        xp = np
        ids_s, ids_t = us, ut
        if resolve_device(device) == "gpu":
            import cupy as xp

            ids_s, ids_t = xp.asarray(us), xp.asarray(ut)
        # one table at a time per engine, the phantom step included: on the GPU the hierarchy's node table
        # lives in the engine's buffers until the step has read it
        with e._table_lock:
            d = xp.asarray(e.ch.table(ids_s, ids_t, device=device)).astype(xp.float64)
            d[d >= float(INF)] = math.inf
            best, so, to, same_won = combine(d, s_inv.astype(np.int64), t_inv.astype(np.int64), s_cost, t_cost, sa,
                                             ta, sf, tf, w[np.maximum(sa, 0)].astype(np.float64), to_host=to_host)
        return best, (so, to, same_won)

    def _unpack_cells(self, sp, tp, reach, choice):
        """Durations (s) and distances (m) of the chosen route of every reachable cell, by unpacking the
        CH path between the phantoms' arcs (one query per distinct node pair)."""
        e = self.engine
        so, to, is_same = choice
        sa, sf = sp.padded()
        ta, tf = tp.padded()
        dur = np.full(reach.shape, math.inf)
        length = np.full(reach.shape, math.inf)
        q = e._query()
        arc_dur = e._dur if e._dur is not None else np.zeros_like(e._len)  # durations then unused
        cache = {}
        for i, j in zip(*np.nonzero(reach), strict=True):
            a, fa = int(sa[i, so[i, j]]), float(sf[i, so[i, j]])
            b, fb = int(ta[j, to[i, j]]), float(tf[j, to[i, j]])
            if is_same[i, j]:
                dur[i, j] = (fb - fa) * arc_dur[a]
                length[i, j] = (fb - fa) * e._len[a]
                continue
            key = (int(e._head[a]), int(e._tail[b]))
            mid = cache.get(key)
            if mid is None:
                r = q.route(*key)
                arcs = np.asarray(r.arcs, dtype=np.int64)
                mid = cache[key] = (float(arc_dur[arcs].sum()), float(e._len[arcs].sum()))
            dur[i, j] = (1.0 - fa) * arc_dur[a] + mid[0] + fb * arc_dur[b]
            length[i, j] = (1.0 - fa) * e._len[a] + mid[1] + fb * e._len[b]
        return dur, length

    def route(self, waypoints, *, continue_straight):
        """The legs of a route through the points of ``waypoints`` (a PhantomSet) in order: ``(plan,
        None)``, ``plan`` a list of ``((arc, fraction), (arc, fraction), path)`` per leg (the options it
        leaves and arrives by, ``path`` a PathResult between them or None when the leg stays on one arc).

        Per leg ONE node table on the hierarchy between the distinct nodes of the options (the departure
        arcs' heads, the arrival arcs' tails; :meth:`_leg_costs`), the dynamic program over the options'
        costs, then one path unpacking per leg, for the winning pair only (counted in
        :data:`gpuroute.crp.phantom_search.SEARCHES` as ``"ch_table"`` and ``"ch_unpack"``).

        Raises
        ------
        EngineError
            ``NoRoute``.
        """
        from ..crp.phantom_search import SEARCHES

        e = self.engine
        head, tail = e._head, e._tail
        opts = [waypoints.options(i) for i in range(waypoints.n_points)]
        costs, same = [], []
        for i in range(len(opts) - 1):
            c, s = self._leg_costs(opts[i][0], opts[i][1], opts[i + 1][0], opts[i + 1][1])
            costs.append(c)
            same.append(s)
        # dynamic program over the arcs of each waypoint: best[o] = cost of arriving on option o
        best = np.zeros(opts[0][0].size)
        back, arrived = [], []
        free = not continue_straight
        for i, c in enumerate(costs):
            arrived.append(best)
            if i == 0 or not free:
                dep = best  # leave on the arc arrived on (the first waypoint: any arc)
            else:
                dep = np.full(best.size, best.min())  # a U-turn at the waypoint is allowed
            tot = dep[:, None] + c
            arg = np.argmin(tot, axis=0)
            back.append(arg)
            best = tot[arg, np.arange(tot.shape[1])]
        if not np.isfinite(best).any():
            raise EngineError("NoRoute", "Impossible route between points")
        plan = []
        q = e._query()
        o = int(np.argmin(best))  # the arc the last leg arrives on
        for i in range(len(costs) - 1, -1, -1):
            d = int(back[i][o])  # the arc leg i leaves waypoint i on
            a, fa = int(opts[i][0][d]), float(opts[i][1][d])
            b, fb = int(opts[i + 1][0][o]), float(opts[i + 1][1][o])
            path = None
            if not same[i][d, o]:  # the winning pair's path, unpacked (the only search of the leg past its table)
                SEARCHES.add("ch_unpack")
                path = q.route(int(head[a]), int(tail[b]))
            plan.append(((a, fa), (b, fb), path))
            o = int(np.argmin(arrived[i])) if (free and i > 0) else d  # the arc leg i - 1 arrives on
        plan.reverse()
        return plan, None

    def _leg_costs(self, a, fa, b, fb):
        """Routing-weight costs (float64 (len(a), len(b)), inf unreachable) of every (departure option,
        arrival option) pair of one leg, from ONE node table on the hierarchy between the distinct
        departure heads and arrival tails: ``(1 - fa) w(a) + d(head a, tail b) + fb w(b)``, or, for a
        target ahead on the departure arc (``a == b``, ``fa <= fb``), ``(fb - fa) w(a)`` (never beaten by
        leaving the arc, which costs at least ``(1 - fa + fb) w(a)``); and that same-arc mask (bool, same
        shape). ``a``/``b`` int64 arc ids, ``fa``/``fb`` float64 fractions."""
        from ..crp.phantom_search import SEARCHES

        e = self.engine
        w, head, tail = e._w, e._head, e._tail
        us, si = np.unique(head[a], return_inverse=True)
        ut, ti = np.unique(tail[b], return_inverse=True)
        SEARCHES.add("ch_table")
        # a handful of nodes: this thread's query object's serial table (the bucket table's passes over
        # every node, and a parallel launch under the table lock, cost more than its few searches)
        d = e._query().table(us, ut)
        d = np.where(d >= INF, math.inf, d.astype(np.float64))
        c = ((1.0 - fa) * w[a])[:, None] + d[si.ravel()][:, ti.ravel()] + (fb * w[b])[None, :]
        same = (a[:, None] == b[None, :]) & (fa[:, None] <= fb[None, :])
        c = np.where(same, ((fb[None, :] - fa[:, None]) * w[a][:, None]), c)
        return c, same


def _prune_options(arcs, node, cost, far_end, w):
    """Options of a phantom that another option of the same phantom dominates, dropped from the node table:
    option ``o`` (arc ``a``, reaching ``node[o]`` at ``cost[o]``) is dominated by ``o2`` when ``node[o2]``
    is the other end of ``a`` (``far_end[a]``: the tail for a source, the head for a target) and
    ``cost[o2] + w[a] <= cost[o]``: by the triangle inequality over ``a`` no route through ``o`` is shorter
    than through ``o2``. A coordinate snapped onto a junction is the common case: its arcs leaving the node
    (source) or entering it (target) are all dominated by the arcs ending (starting) there at cost 0, so
    its options need one node of the table instead of one per arc. Dominated options keep their arc for
    the same-arc case; their node becomes the dominating one and their cost +inf.

    Returns
    -------
    (node int64 (k, o), cost float64 (k, o)) new arrays.
    """
    node = node.copy()
    cost = cost.copy()
    ok = arcs >= 0
    if not ok.any():
        return node, cost
    a = np.maximum(arcs, 0)
    end = far_end[a]
    wa = w[a].astype(np.float64)
    # dom[i, o, o2]: o2 dominates o
    dom = (ok[:, :, None] & ok[:, None, :] & (wa[:, :, None] > 0) & (node[:, None, :] == end[:, :, None])
           & (cost[:, None, :] + wa[:, :, None] <= cost[:, :, None]))
    o = np.arange(arcs.shape[1])
    dom[:, o, o] = False
    hit = dom.any(axis=2)
    if hit.any():
        first = np.argmax(dom, axis=2)
        rows, cols = np.nonzero(hit)
        node[rows, cols] = node[rows, first[rows, cols]]
        cost[rows, cols] = math.inf
    return node, cost


# ------------------------------------------------------------------------------------ overlay
class CRP:
    """Searches on the engine's customized overlay, on one metric snapshot (see the module notes).

    Parameters
    ----------
    engine : Engine
        With an overlay.
    snap : Snapshot, optional
        The metric (:class:`gpuroute.engine.traffic.Snapshot`, with its state) to search; None: the
        overlay's current one, read once per request (a route reads it at its start, and starts again
        should a customization land meanwhile).
    """

    name = "crp"

    def __init__(self, engine, snap=None):
        self.engine = engine
        self.snap = snap

    def many_to_many(self, sources, targets, *, need_dur=False, need_len=False, device="auto", on_device=False):
        """Costs, durations and distances between phantoms over the overlay snapshot (:class:`TableCosts`):
        :func:`gpuroute.crp.many_to_many.table` with the route's phantom costs, so that a cell equals the
        route between the same points on the same metric. Durations (s) are the snapshot's costs when its
        metric is a time (turn costs less the out-arc's cost for the turns), else the graph's travel times
        and turn durations; distances (m) the arcs' lengths; both summed along each cell's chosen path.

        Parameters
        ----------
        sources, targets : PhantomSet
        need_dur, need_len : bool
        device : {"auto", "cpu", "gpu"}
            The twin that runs (:data:`CRP_TABLES`); ``"auto"``: ``config.CRP_TABLE_AUTO_DEVICE`` (the CPU's:
            it was faster than the GPU twin at every size measured on a 16-core host).
        on_device : bool
            As :meth:`CH.many_to_many`'s: the cost is not copied to the host where it is on the device. The
            overlay's many-to-many hands back NumPy arrays (both twins), so the cost is a NumPy array here.

        Raises
        ------
        ValueError
            An unknown device; ``on_device`` with ``need_dur`` or ``need_len``.
        GPUUnavailableError
            ``device="gpu"`` without a usable GPU.
        """
        import importlib

        if on_device and (need_dur or need_len):
            raise ValueError("on_device=True hands back the cost matrix only (need_dur and need_len must be False)")
        e = self.engine
        snap = self.snap if self.snap is not None else e._traffic.snapshot()
        device = _device(device)
        if device == "auto":
            device = str(config.CRP_TABLE_AUTO_DEVICE)
        run = importlib.import_module(CRP_TABLES[resolve_device(device)]).table
        sa, sf = sources.padded()
        ta, tf = targets.padded()
        along = _along(e, snap, need_dur, need_len)
        # numba-parallel kernels: one table at a time per engine (numba's workqueue threading layer aborts on
        # concurrent parallel calls; with omp or tbb this costs nothing, a table uses every core anyway)
        with e._table_lock:
            res = run(e._traffic.overlay, sa, sf, ta, tf, state=snap.state, along=along)
        cost = res.cost * (snap.scale / e._w_scale)
        k = 0
        dur = length = None
        if need_dur:
            dur = res.along[k]
            k += 1
        if need_len:
            length = res.along[k]
        for x in (dur, length):
            if x is not None:
                x[~np.isfinite(res.cost)] = math.inf
        return TableCosts(cost, dur, length)

    def route(self, waypoints, *, continue_straight):
        """The legs of a route through the points of ``waypoints`` (a PhantomSet): ``(plan, snapshot)`` as
        :meth:`gpuroute.engine.traffic.TrafficRouter.plan` (one search per leg; ``plan`` as
        :meth:`CH.route`'s, paths :class:`gpuroute.engine.traffic.LegPath`). Raises EngineError NoRoute."""
        return self.engine._traffic.plan(waypoints, bool(continue_straight), self.snap)


def _along(engine, snap, need_dur, need_len):
    """The ``along`` quantities of :func:`gpuroute.crp.many_to_many.table`: ``[(per_arc, per_turn)]`` for
    durations (s) when asked and known, then distances (m) when asked. The per-arc and per-turn durations of
    a metric are made once per metric snapshot (the last few kept: one per customization state), not per
    request."""
    out = []
    if need_dur:
        cache = engine._along_cache
        hit = cache.get(id(snap))
        if hit is None or hit[0] is not snap:
            if len(cache) >= _ALONG_SNAPSHOTS:
                cache.clear()
            hit = cache[id(snap)] = (snap, _durations_along(engine, snap))
        out.append(hit[1])
    if need_len:
        out.append((np.ascontiguousarray(engine._len, dtype=np.float64), None))
    return out


def _durations_along(engine, snap):
    """``(per_arc, per_turn)`` durations (s) of ``snap``'s metric (see :func:`_along`)."""
    if snap.is_time:
        per_arc = snap.cost * snap.scale
        per_turn = None
        if engine._tc is not None:
            out_arc = np.asarray(engine._traffic.overlay.turns.out_arc, dtype=np.int64)
            per_turn = np.maximum(snap.turn_cost.astype(np.float64) - snap.cost[out_arc], 0.0) * snap.scale
    else:  # the state's live travel times (speed updates), else the graph's
        per_arc = engine._dur if snap.duration is None else snap.duration
        per_turn = (None if engine._tc is None
                    else np.maximum(engine._tc.duration.astype(np.float64), 0.0) * 0.1)
    return np.ascontiguousarray(per_arc, dtype=np.float64), per_turn


# ------------------------------------------------------------------------------------ choice
def metric_snapshot(engine, ex=None):
    """The metric one request reads, once: the overlay's current :class:`gpuroute.engine.traffic.Snapshot`
    (its customization state with it), or that of the exclusion ``ex`` (:meth:`gpuroute.engine.exclude.
    Exclusion.snapshot`); None without an overlay (the hierarchy's fixed metric). A request that searches
    more than once (a trip: its matrix, then its legs) hands it to :func:`table_search` and
    :func:`route_search`, so that a ``/customize`` landing meanwhile changes none of its answers."""
    if ex is not None:
        return ex.snapshot()
    tr = engine._traffic
    return None if tr is None else tr.snapshot()


def table_search(engine, ex=None, snap=None):
    """The search a table (and a trip's matrix) runs on: :class:`CRP` on the overlay whenever the engine
    has one whose current metric is not the hierarchy's (turn costs or restrictions: a graph read with a
    Lua profile, OSM turn restrictions, a U-turn penalty; or costs changed by ``/customize``), or on an
    exclusion's metric (``ex``, :mod:`gpuroute.engine.exclude`); :class:`CH` otherwise (no overlay, or an
    overlay whose metric is exactly the hierarchy's weight with every turn free: the same costs, and the
    hierarchy's table runs on the GPU).

    ``snap``: the request's metric snapshot (:func:`metric_snapshot` of the same ``ex``), read here when
    None."""
    if snap is None:
        snap = metric_snapshot(engine, ex)
    if ex is not None:
        return CRP(engine, snap)
    tr = engine._traffic
    if tr is None or snap is None:
        return CH(engine)
    st = snap.state
    cache = engine._table_pristine
    key = id(st)
    ok = cache.get(key)
    if ok is None or ok[0] is not st:
        pristine = False
        if engine._tc is None and engine.ch.weight in engine.graph.weights:
            ch_w = np.asarray(engine.graph.weight(engine.ch.weight), dtype=np.int64)
            arc = np.asarray(st.arc_cost, dtype=np.int64)
            if np.array_equal(arc, ch_w):
                out = np.asarray(tr.overlay.turns.out_arc, dtype=np.int64)
                pristine = bool(np.array_equal(np.asarray(st.turn_cost, dtype=np.int64), arc[out]))
        cache.clear()  # one entry: the current state
        cache[key] = ok = (st, pristine)
    return CH(engine) if ok[1] else CRP(engine, snap)


def route_search(engine, ex=None, snap=None):
    """The search a route runs on: :class:`CRP` with an overlay (turn-aware, on ``snap``, the request's
    metric snapshot from :func:`metric_snapshot`; else ``ex``'s snapshot, else its current metric), else
    :class:`CH`."""
    if engine._traffic is None:
        return CH(engine)
    if snap is None and ex is not None:
        snap = ex.snapshot()
    return CRP(engine, snap)


# ------------------------------------------------------------------------------------ capabilities
def capabilities(engine):
    """Which algorithm answers which service, on which device, and whether it follows traffic
    (:meth:`gpuroute.engine.Engine.customize`): a list of ``{"service", "algorithm", "device",
    "traffic_aware", "turn_aware", "exclude", "depart_at", "note"}`` dicts (``exclude``: the service takes
    ``exclude=``: an overlay and a profile that declares combinations, :mod:`gpuroute.engine.exclude`;
    ``depart_at``: the service takes ``depart_at=``, a time profile is loaded, :mod:`gpuroute.engine.timeslots`).

    ``route``: ``"crp"`` (the customized overlay, turn restrictions honoured) when the engine has an
    overlay, else ``"ch"``; its ``alternatives``: the most alternative routes a request may ask for
    (the engine's ``limits["max_alternatives"]``, ``/health``'s: 0 none, None no limit,
    :func:`gpuroute.engine.params.max_alternatives`; two waypoints;
    :mod:`gpuroute.crp.alternatives` on the overlay, :mod:`gpuroute.ch.alternatives` without one). ``table`` and ``trip``'s matrix: with an overlay, its many-to-many
    (:func:`table_search`: turn costs, restrictions, the current metric), except while that metric is
    exactly the hierarchy's with every turn free (then the hierarchy's table, the same costs, on the GPU
    where one is usable); without an overlay the hierarchy's. ``nearest``: the segment index (every segment,
    as OSRM's). ``isochrone``: with an overlay, a turn-aware search on its current metric (CPU), else the
    hierarchy (not turn-aware, the dataset's metric). ``customize``: the overlay's customization (cells
    re-customized bottom-up; on the GPU where one is usable, :mod:`gpuroute.crp.customize_gpu`), only with
    an overlay.
    """
    from ..backend import gpu_available
    from .exclude import excluder
    from .params import max_alternatives

    try:
        gpu = bool(gpu_available())
    except Exception:  # no CUDA at all
        gpu = False
    ov = engine._traffic is not None
    ch_dev = "gpu" if gpu else "cpu"
    out = [{"service": "route", "algorithm": "crp" if ov else "ch", "device": "cpu", "traffic_aware": ov,
            "turn_aware": ov, "alternatives": max_alternatives(engine.limits),
            "note": ("multi-level overlay between the snapped phantom nodes, follows /customize; alternatives "
                     "(two waypoints): via-node, from the overlap of the overlay's forward and backward "
                     "search spaces (gpuroute.crp.alternatives)" if ov else
                     "contraction hierarchy between the snapped phantom nodes (no turn restrictions); "
                     "build a dataset with gpuroute build for turn-aware routes and traffic; alternatives "
                     "(two waypoints): via-node, bounded Dijkstra on the graph and the T-test on the hierarchy "
                     "(gpuroute.ch.alternatives)")},
           {"service": "table", "algorithm": "crp many-to-many (buckets)" if ov else "ch (many-to-many)",
            "device": (str(config.CRP_TABLE_AUTO_DEVICE) if gpu else "cpu") if ov else ch_dev,
            "traffic_aware": ov, "turn_aware": ov,
            "note": ("the overlay's current metric, turn costs and restrictions (the hierarchy's table on the "
                     f"{ch_dev} while the metric is the built one with every turn free)" if ov else
                     "contraction hierarchy between the snapped phantom nodes (no turn restrictions)")},
           {"service": "nearest", "algorithm": "segment index", "device": "cpu", "traffic_aware": False,
            "turn_aware": False, "note": "k-d tree of segment samples, exact"}]
    if callable(getattr(engine, "isochrone", None)) and ov:
        from .services.isochrone.search import live_quantity

        live = live_quantity(engine.graph, engine.overlay)
        iso_dev = ch_dev if str(config.SERVE_ISOCHRONE_DEVICE) != "cpu" else "cpu"
        out.append({"service": "isochrone",
                    "algorithm": "turn-aware bounded Dijkstra on arcs, lattice field, marching squares",
                    "device": iso_dev, "traffic_aware": True, "turn_aware": True,
                    "note": ("the search on the CPU, the lattice's extent, marks and field on the GPU; "
                             if iso_dev == "gpu" else "") +
                            "routes as /route drives them, turn restrictions honoured: duration on the "
                            "overlay's current metric when it is a time, else the live travel times (speed "
                            f"updates of /customize) and the graph's turn durations (current metric: {live}); "
                            "distance on the current metric when it is a length, else the graph's lengths"})
    elif callable(getattr(engine, "isochrone", None)):
        iso_dev = ch_dev if str(config.SERVE_ISOCHRONE_DEVICE) != "cpu" else "cpu"
        out.append({"service": "isochrone", "algorithm": "bounded Dijkstra / PHAST, lattice field, marching squares",
                    "device": iso_dev, "traffic_aware": False, "turn_aware": False,
                    "note": "the metric the dataset was built with; search and field on the device, polygons "
                            "on the CPU"})
    out.append({"service": "trip", "algorithm": "table + gpuroute.tours (exact up to "
                                                f"{int(config.TOUR_EXACT_MAX_N)} stops), then route",
                "device": ch_dev, "traffic_aware": ov, "turn_aware": ov,
                "note": "the order from the table service's matrix; the legs routed as route's "
                        "(continue_straight=false)"})
    out.append({"service": "customize", "algorithm": "crp customization" if ov else "none", "device": ch_dev,
                "traffic_aware": ov, "turn_aware": ov,
                "note": ("traffic updates re-customize only the cells holding the arcs; a metric all cells"
                         if ov else "needs an overlay: gpuroute build GRAPH -o DIR, then serve DIR")})
    can_exclude = excluder(engine).info()["supported"]
    timed = getattr(engine, "_time_slots", None) is not None  # a time profile loaded (gpuroute.engine.timeslots)
    for row in out:
        row["exclude"] = bool(can_exclude and row["service"] != "customize")
        row["depart_at"] = bool(timed and row["service"] in ("route", "table", "trip", "isochrone"))
    return out
