"""Routes over a customized overlay and live traffic for :class:`gpuroute.engine.Engine`.

When the engine holds an :class:`gpuroute.crp.Overlay` (a dataset directory built by ``gpuroute
build``), every route leg is answered by one search on the overlay between the snapped phantom nodes
(:mod:`gpuroute.crp.phantom_search`), so routes honour turn restrictions (and turn penalties of the metric) and follow
the overlay's current metric, which :meth:`TrafficRouter.customize` changes (traffic updates of some
arcs, or a whole new metric) atomically. A speed of 0 (or ``"cost": "closed"``) closes an arc (its cost
:data:`CLOSED`, the named ``INF``; :meth:`TrafficRouter.parse_updates`): the decoder forbids the turns into
it, and :meth:`TrafficRouter.open_segments` keeps waypoints off it.

Phantom costs (``c`` the overlay's current arc cost, in the metric's integer unit): a source phantom at
fraction ``fa`` of arc ``a`` starts with ``(1 - fa) c(a)`` paid; a target phantom at ``fb`` of arc ``b``
adds ``-(1 - fb) c(b)`` to the full cost of ``b`` that the search pays on entering it. ONE search per leg
(:func:`gpuroute.crp.phantom_search.search`, OSRM's phantom-node model): every departure option of the
waypoint (its arcs, and its snapping ties') is seeded with the cost of having arrived there plus its start
cost, every arrival option of the next waypoint is a target with its offset, and the search returns the
cost of each target, so that the legs chain by the same dynamic program as the hierarchy's route
(``continue_straight``: a leg leaves by the arc the previous one arrived on; without it, after the first
leg, every option leaves at the best arrival). Only the winning path of each leg is unpacked. The
same-arc cases: target ahead of the source (``fa <= fb``), the leg stays on the arc at ``(fb - fa) c(a)``
(no search); target behind it, the leg leaves the arc by one of its allowed turns and comes back (the
search takes a target's cost from the edges into it, never from its seed).

Consistency: a route reads the overlay's customization state once, at its start (:meth:`TrafficRouter.
snapshot`), and its searches, its unpacking and the costs it reports all read that state, so the arcs
chosen and the costs reported come from one metric whatever customization lands meanwhile (a snapshot
without its state is checked against the current state and read again, at most :data:`MAX_RETRIES`
times). Reported
weights and durations come from that metric's arc costs (durations: only for time metrics; for another
metric the state's live travel times where speed updates set them -- :attr:`Snapshot.duration`, OSRM's
segment durations on a Lua profile's weight such as ``routability`` --, else the graph's travel times),
fraction-weighted as the hierarchy's; turn penalties of
``"time-uturn"`` steer the route but are not added to the reported durations.
"""
from __future__ import annotations

import math
import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from ..crp import phantom_search as ps
from ..crp.metric import CLOSED as _CLOSED
from ..graph.units import parse_unit
from .osrm import EngineError

__all__ = ["TrafficRouter", "Snapshot", "LegPath", "MAX_RETRIES", "METRICS", "MAX_COST", "CLOSED", "CLOSED_WORD"]

#: How often a route starts again when a customization swapped the metric while it ran.
MAX_RETRIES = 5
#: Metrics a full re-customization takes by name (nothing in a request names a file). A graph extracted
#: with a Lua profile takes its ``weight_name`` (e.g. ``"routability"``: weights with turn weights) and
#: ``"duration"`` (travel times with turn durations) instead of ``"time"`` and ``"time-uturn"``.
METRICS = ("time", "distance", "time-uturn")
#: Largest arc cost :meth:`gpuroute.crp.Overlay.update` takes.
MAX_COST = int(np.iinfo(np.int32).max)
#: Seconds per decisecond (the unit of travel times and of OSRM's segment durations).
DS = 0.1
#: The cost of a closed arc (:data:`gpuroute.crp.metric.CLOSED`, the named ``INF``): what a speed (or
#: rate) of 0 or a cost of :data:`CLOSED_WORD` gives.
CLOSED = int(_CLOSED)
#: The word a cost takes to close an arc (``{"arc": id, "cost": "closed"}``; a traffic CSV's cost field).
CLOSED_WORD = "closed"
#: Segment indexes without the closed arcs kept per router (:meth:`TrafficRouter.open_segments`).
SNAP_CACHE = 4


@dataclass
class Snapshot:
    """One metric of the overlay, as a route reads it.

    Attributes
    ----------
    metric : Metric
        The overlay's metric object (identity tells whether it is still current).
    cost : ndarray of float64 (m,)
        Arc costs in the metric's unit.
    turn_cost : ndarray of int64 (T,)
        Turn costs (penalty + cost of the out-arc; -1 forbidden).
    scale : float
        Metric unit -> OSRM weight unit (seconds for a time, metres for a length; 1 when unknown).
    is_time : bool
        The metric is a time: its costs are also the reported durations.
    name : str
        The metric's name (``"time"``, ``"distance"``, ``"time-uturn"``, ...).
    state : OverlayState or None
        The customization state it was read from.
    duration : ndarray of float64 (m,) or None
        The arcs' current travel times (s) when the metric is not a time and speed updates changed them
        (the state's ``arc_duration``: OSRM's segment durations under live traffic, e.g. on a
        ``routability`` metric); None: the graph's travel times (or, for a time metric, its costs).
    """

    metric: object
    cost: np.ndarray
    turn_cost: np.ndarray
    scale: float
    is_time: bool
    name: str
    state: object = None
    duration: np.ndarray = None


@dataclass
class LegPath:
    """The arcs strictly between the departure and arrival arcs of a leg (``arcs`` int64 (k,)), and the
    nodes from the departure arc's head to the arrival arc's tail (``nodes`` int64 (k + 1,)): the shape
    the engine's leg builder reads from a hierarchy path."""

    arcs: np.ndarray
    nodes: np.ndarray
    distance: float


class TrafficRouter:
    """Overlay routes and customization for one engine (thread-safe).

    Parameters
    ----------
    graph : RoadGraph
    overlay : Overlay
        Customized, of ``graph``.

    Attributes
    ----------
    graph, overlay
    """

    def __init__(self, graph, overlay):
        if not overlay.customized:
            raise ValueError("the overlay is not customized: customize(metric) it first")
        self.graph = graph
        self.overlay = overlay
        self._tail = np.asarray(graph.tail, dtype=np.int64)
        self._head = np.asarray(graph.head, dtype=np.int64)
        self._local = threading.local()
        self._lock = threading.Lock()  # customizations one at a time (an update builds on the current metric)
        self._length = (np.asarray(graph.arc_attrs["length_m"], dtype=np.float64) if "length_m" in graph.arc_attrs
                        else None)
        ids = graph.node_ids
        self._node_ids = (np.asarray(ids, dtype=np.int64) if ids is not None
                          else np.arange(graph.n_nodes, dtype=np.int64))
        self._pairs = None
        self._seg_lock = threading.Lock()
        self._seg_cache = OrderedDict()  # (closed digest, component, exclusion key) -> SegmentIndex
        self._closed_memo = None  # (metric, digest of its closed arcs, closed mask)

    # ------------------------------------------------------------------ metric
    def snapshot(self, state=None):
        """The overlay's current metric as a :class:`Snapshot` (its customization state read once: costs,
        turn costs and cliques of one metric), or that of ``state``, a customization of the overlay that
        is not installed (:meth:`gpuroute.crp.Overlay.customized_state`)."""
        st = self.overlay._need_state() if state is None else state
        last = getattr(self, "_last_snapshot", None)  # the installed state's: read by every route and table
        if last is not None and last.state is st:
            return last
        met = st.metric
        sym = getattr(met, "units", None) or None
        # a unit of the graph's own weights first (a Lua profile's weight, e.g. "routability/10", has a
        # scale only the graph knows), else a standard unit symbol
        unit = next((u for u in self.graph.units.values() if sym is not None and u.symbol == sym), None)
        unit = unit if unit is not None else parse_unit(sym)
        is_time = unit.quantity == "time"
        scale = float(unit.scale) if unit.scale else 1.0
        dur = getattr(st, "arc_duration", None)  # live durations of a metric that is not a time
        snap = Snapshot(met, np.asarray(st.arc_cost, dtype=np.float64), st.turn_cost, scale, is_time,
                        str(getattr(met, "name", "") or ""), st,
                        None if dur is None or is_time else np.asarray(dur, dtype=np.float64) * DS)
        if state is None:  # one float64 copy of the arc costs per installed metric, not one per request
            self._last_snapshot = snap
        return snap

    def query(self):
        q = getattr(self._local, "query", None)
        if q is None:
            q = self._local.query = self.overlay.query()
        return q

    # ------------------------------------------------------------------ routes
    def plan(self, phantoms, continue_straight, snap=None):
        """The legs of a route over the overlay through the points of ``phantoms`` (a
        :class:`gpuroute.geo.segments.PhantomSet`): ``(plan, snapshot)``, ``plan`` a list of
        ``((arc, fraction), (arc, fraction), path)`` per leg as the engine's hierarchy plan (``path`` a
        :class:`LegPath`, or None when the leg stays on one arc).

        ``snap``: a :class:`Snapshot` with its ``state`` to search instead of the current metric (e.g. one
        with excluded arcs, :mod:`gpuroute.engine.exclude`); searches and unpacking read only that state.

        Raises
        ------
        EngineError
            ``NoRoute``.
        """
        if snap is not None:
            if snap.state is None:
                raise ValueError("plan(snap=...) needs a snapshot with its customization state")
            return self._plan(phantoms, continue_straight, snap, snap.state), snap
        for k in range(MAX_RETRIES):
            snap = self.snapshot()
            st = getattr(snap, "state", None)
            if st is None:  # a snapshot without its state: the one current now, if it is the snapshot's
                st = self.overlay._need_state()
                if (st.metric is not snap.metric or st.turn_cost is not snap.turn_cost) and k < MAX_RETRIES - 1:
                    continue  # a customization swapped the metric in between: read both again
            return self._plan(phantoms, continue_straight, snap, st), snap

    def _plan(self, phantoms, continue_straight, snap, st):
        """The route's legs from one overlay search per leg (:func:`gpuroute.crp.phantom_search.search_leg`)
        and the dynamic program over the waypoints' options; only the winning paths are unpacked.

        ``st`` is the overlay state ``snap`` was read from (the searches and the unpacking read nothing
        else). Labels are in ``1 / SCALE`` of the metric's unit; should one pass
        :data:`gpuroute.crp.phantom_search.LABEL_LIMIT` (costs near 2^52), the plan is made again with
        whole units.
        """
        # per waypoint: its options' arcs (int64) and fractions (float64), ties included
        opts = [phantoms.options(i) for i in range(phantoms.n_points)]
        if len(opts) == 2:  # one leg: search, choice and unpacking in one compiled call
            plan = self._one_leg(opts, snap, st)
            if plan is not None:
                return plan
        for scale in (ps.SCALE, 1):
            legs = self._search_legs(opts, continue_straight, snap, st, scale)
            if legs is not None:
                return self._unpack_legs(opts, continue_straight, snap, st, legs)
        raise EngineError("NoRoute", "Impossible route between points (costs too large to add up)")

    def _one_leg(self, opts, snap, st):
        """:meth:`_plan` of two waypoints by :func:`gpuroute.crp.phantom_search.search_one_leg` (the same plan as
        :meth:`_search_legs` and :meth:`_unpack_legs` make); None where it does not apply (nothing searched)."""
        (a, fa), (b, fb) = opts
        c = snap.cost
        q = self.query()
        for scale in (ps.SCALE, 1):
            got = ps.search_one_leg(q, st, a, fa, c, b, fb, scale=scale)
            if got is None:
                return None
            status, reached, o, d, path = got
            if status != 0:
                continue
            if not reached:
                raise EngineError("NoRoute", "Impossible route between points")
            a0, f0, b0, f1 = int(a[d]), float(fa[d]), int(b[o]), float(fb[o])
            leg = None
            if path is not None:
                mid, nodes, paid = path
                leg = LegPath(mid, nodes, (1.0 - f0) * c[a0] + float(paid) - (1.0 - f1) * c[b0])
            return [((a0, f0), (b0, f1), leg)]
        raise EngineError("NoRoute", "Impossible route between points (costs too large to add up)")

    def _search_legs(self, opts, continue_straight, snap, st, scale):
        """One search per leg and the dynamic program's forward pass (``opts``: per waypoint, its options'
        arcs and fractions): a list of per-leg records, or None on a label overflow. Raises EngineError
        NoRoute."""
        q = self.query()
        c = snap.cost
        arrived = np.zeros(opts[0][0].size, np.int64)  # the first waypoint: leave by any option, at 0
        legs = []
        n_legs = len(opts) - 1
        for i in range(n_legs):
            a, fa = opts[i]
            b, fb = opts[i + 1]
            # continue_straight: leave by the arc arrived on; else (after the first leg) a U-turn is allowed
            dep = arrived if (i == 0 or continue_straight) else np.full(a.size, arrived.min())
            # seeds, offsets, a target ahead of a departure point on the same arc ((fb - fa) c(a), without a
            # search), the search and the choice per target, in one compiled call; per target exact only
            # where the next leg leaves by the arc arrived on
            got = ps.search_leg(q, st, dep, a, fa, c, b, fb, every_target=continue_straight and i < n_legs - 1,
                                scale=scale)
            if got is None:
                return None
            res, best, leaves, use_same, reached = got
            legs.append((arrived, res, leaves, use_same))
            arrived = best
            if not reached:
                raise EngineError("NoRoute", "Impossible route between points")
        legs.append((arrived, None, None, None))
        return legs

    def _unpack_legs(self, opts, continue_straight, snap, st, legs):
        """The dynamic program's backward pass: ``[((arc, fraction), (arc, fraction), LegPath or None)]``
        per leg, only the winning path of each leg unpacked."""
        c = snap.cost
        q = self.query()
        free = not continue_straight
        plan = []
        o = int(legs[-1][0].argmin())  # the option the last leg arrives by
        for i in range(len(legs) - 2, -1, -1):
            arrived, res, leaves, use_same = legs[i]
            d = int(leaves[o])
            a, fa = int(opts[i][0][d]), float(opts[i][1][d])
            b, fb = int(opts[i + 1][0][o]), float(opts[i + 1][1][o])
            path = None
            if not use_same[o]:
                mid, nodes = res.leg_path(q, st, o, self._head)  # the arcs between a and b, the nodes
                cost = (1.0 - fa) * c[a] + float(res.paid(o)) - (1.0 - fb) * c[b]
                path = LegPath(mid, nodes, cost)
            plan.append(((a, fa), (b, fb), path))
            o = int(arrived.argmin()) if (free and i > 0) else d  # the option leg i - 1 arrives by
        plan.reverse()
        return plan

    def reprice(self, leg, snap, w_scale):
        """Replace a leg's ``weight`` (in the engine's weight unit: OSRM weight / ``w_scale``) and, for a
        time metric, ``duration`` (s) by the snapshot's fraction-weighted arc costs."""
        raw = leg["frac"] * snap.cost[leg["arcs"]]
        leg["weight"] = raw * (snap.scale / w_scale)
        if snap.is_time:
            leg["duration"] = raw * snap.scale
        elif snap.duration is not None:
            leg["duration"] = leg["frac"] * snap.duration[leg["arcs"]]
        return leg

    # ------------------------------------------------------------------ snapping
    def open_segments(self, component, excluded=None, key=None):
        """The segment index waypoints snap on while the current metric has closed arcs: a
        :class:`gpuroute.geo.segments.SegmentIndex` of ``component`` with ``arc_mask`` = neither closed nor
        ``excluded``, as osrm-routed's ``HasValidEdge`` (a segment whose directions are all closed is no
        candidate; one with a closed direction snaps with the other only). None when no arc is closed (the
        caller's own index serves).

        Built once per set of closed arcs, component and ``key`` (an exclusion's key, with ``excluded``
        its arcs) and kept in a small least-recently-used cache (:data:`SNAP_CACHE` entries): a closure
        costs one index build (Monaco ~15 ms) at the first request after it.

        Raises
        ------
        EngineError
            ``NoSegment``: every segment is closed (or excluded).
        """
        st = self.overlay._state
        met = None if st is None else st.metric
        closed = getattr(met, "closed", None)
        if closed is None:
            return None
        memo = self._closed_memo
        if memo is None or memo[0] is not met:
            import hashlib

            digest = hashlib.blake2b(np.flatnonzero(closed).tobytes(), digest_size=16).hexdigest()
            self._closed_memo = memo = (met, digest, closed)
        ck = (memo[1], component, key)
        with self._seg_lock:
            idx = self._seg_cache.get(ck)
            if idx is not None:
                self._seg_cache.move_to_end(ck)
                return idx
        from ..geo.segments import SegmentIndex

        shut = memo[2] if excluded is None else (memo[2] | excluded)
        try:
            idx = SegmentIndex(self.graph, component=component, arc_mask=~shut)
        except ValueError:
            raise EngineError("NoSegment", "no segment is left to snap to: every one is closed"
                              + (" or excluded" if excluded is not None else "")) from None
        with self._seg_lock:
            self._seg_cache[ck] = idx  # a race builds two, harmlessly
            while len(self._seg_cache) > SNAP_CACHE:
                self._seg_cache.popitem(last=False)
        return idx

    # ------------------------------------------------------------------ customization
    def _arc_of_pair(self):
        """``{(osm_tail, osm_head): arc}`` (built on first use; parallel arcs were dropped at import)."""
        if self._pairs is None:
            ids = self._node_ids
            self._pairs = dict(zip(zip(ids[self._tail].tolist(), ids[self._head].tolist(), strict=True),
                                   range(self.graph.n_arcs), strict=True))
        return self._pairs

    def parse_updates(self, updates, snap):
        """Arc ids, integer costs and durations of a list of updates, every entry validated.

        Each entry is ``{"arc": id, "cost": c}`` (``c`` in the metric's unit, rounded to an integer, at
        least 1) or ``{"from": osm_id, "to": osm_id, "speed_kmh": v[, "rate": r]}`` (a line of OSRM's
        traffic CSV ``from,to,speed[,rate]``, as ``osrm-customize --segment-speed-file`` applies it): the
        arc between two consecutive OSM nodes, in that direction, gets

        * duration ``max(1, round(10 * length_m / (v / 3.6)))`` deciseconds (OSRM's ``convertToDuration``;
          ``round`` half away from zero as C++ ``std::round``);
        * weight: on a time metric in deciseconds, that duration (``rate`` is refused: the weight is the
          duration there); on a Lua profile's weight (``weight_name``, e.g. car.lua's ``routability``)
          OSRM's ``convertToWeight``: ``max(1, round(length_m / rate * 10**weight_precision))`` with ``rate``
          (metres per weight unit) the given one, or ``v / 3.6`` without it (OSRM's fallback to the
          duration), and ``"rate": null`` (OSRM's empty 4th column) keeps the arc's current weight.

        The turn costs stay. Speed updates on any other metric (``"distance"``) are refused.

        **Closures.** A ``speed_kmh`` of 0 closes the arc, as ``osrm-customize`` does with a speed of 0 in its
        segment-speed file (OSRM's ``INVALID_SEGMENT_WEIGHT``); so do a ``rate`` of 0 (the weight is
        invalid) and ``"cost": "closed"`` (:data:`CLOSED_WORD`). A closed arc costs :data:`CLOSED`: no
        route, table, trip or isochrone enters it, and no waypoint snaps to it (OSRM's ``HasValidEdge``);
        its travel time stays as it was. A later update of the arc with a positive cost or speed reopens
        it. Anything else that is not a finite number > 0 is refused.

        Returns
        -------
        (ids, costs, durations)
            ``ids``, ``costs`` int64 (k,) (costs in the metric's unit, :data:`CLOSED` for a closure);
            ``durations`` int64 (m,): every arc's
            travel time (deciseconds) after the updates when a speed update changed durations that are not
            the metric's costs (a Lua profile's weight), else None (the durations stay as they are).

        Raises
        ------
        EngineError
            ``InvalidOptions`` (not a non-empty list), ``InvalidValue`` naming the first bad entry, its field
            and value (not an object, unknown keys, an unknown arc or node pair, a cost, speed or rate that
            is not a finite positive number, a cost or a duration -- given, or from a speed -- over
            :data:`MAX_COST`, a speed update on a metric that is neither).
        """
        if not isinstance(updates, (list, tuple)) or not updates:
            raise EngineError("InvalidOptions", "updates must be a non-empty list of {\"arc\": id, \"cost\": c} or "
                                                "{\"from\": osm_id, \"to\": osm_id, \"speed_kmh\": v} objects")
        m = self.graph.n_arcs
        ids = np.empty(len(updates), np.int64)
        costs = np.empty(len(updates), np.int64)
        mult = self._weight_multiplier(snap)
        durations = None
        for i, u in enumerate(updates):
            where = f"updates[{i}]"
            if not isinstance(u, dict):
                raise EngineError("InvalidValue", f"{where}: expected an object, got {type(u).__name__}")
            keys = set(u)
            if keys == {"arc", "cost"}:
                a = u["arc"]
                if isinstance(a, bool) or not isinstance(a, (int, np.integer)) or not 0 <= a < m:
                    raise EngineError("InvalidValue", f"{where}: arc {a!r} is not an arc id in [0, {m})")
                if isinstance(u["cost"], str) and u["cost"].strip().lower() == CLOSED_WORD:
                    ids[i], costs[i] = int(a), CLOSED
                    continue
                v = _positive(u["cost"], where, "cost", closed_word=True)
                if v >= MAX_COST + 0.5:  # before any integer conversion (1e30 overflowed int64)
                    raise EngineError("InvalidValue", f"{where}: cost {u['cost']!r} is over the largest cost "
                                                      f"{MAX_COST}")
                ids[i], costs[i] = int(a), max(1, int(round(v)))
            elif keys in ({"from", "to", "speed_kmh"}, {"from", "to", "speed_kmh", "rate"}):
                if mult is None and not (snap.is_time and snap.scale == DS):
                    raise EngineError("InvalidValue", f"{where}: speed updates need a time metric in deciseconds "
                                                      "or the Lua profile's weight (the current metric is "
                                                      f"{snap.name!r})")
                if mult is None and "rate" in keys:
                    raise EngineError("InvalidValue", f"{where}: rate {u['rate']!r} needs a metric that is not the "
                                                      f"duration (the current metric {snap.name!r} is a time: its "
                                                      "weight is the duration the speed gives)")
                if self._length is None:
                    raise EngineError("InvalidValue", f"{where}: the graph has no length_m to turn speeds into "
                                                      "travel times")
                f, t = u["from"], u["to"]
                if any(isinstance(x, bool) or not isinstance(x, (int, np.integer)) for x in (f, t)):
                    raise EngineError("InvalidValue", f"{where}: from {f!r} and to {t!r} must be OSM node ids "
                                                      "(integers)")
                a = self._arc_of_pair().get((int(f), int(t)))
                if a is None:
                    raise EngineError("InvalidValue", f"{where}: no arc from OSM node {f} to OSM node {t} (they must "
                                                      "be consecutive nodes of a way, in the direction of travel)")
                v = _positive(u["speed_kmh"], where, "speed_kmh", zero=True)
                ids[i] = a
                if v == 0.0:  # OSRM: speed 0 closes the segment (its duration and weight are invalid)
                    costs[i] = CLOSED
                    continue
                length = float(self._length[a])
                ds = length / (v / 3.6) * 10.0  # OSRM's convertToDuration; inf for a speed near 0: checked first
                if not ds < MAX_COST + 0.5:
                    raise EngineError("InvalidValue", f"{where}: speed_kmh {u['speed_kmh']!r} makes the "
                                                      f"{length:.1f} m of arc {a} take {ds:.3g} ds, "
                                                      f"over the largest cost {MAX_COST}")
                ids[i] = a
                if mult is None:  # a time metric in deciseconds: the weight is the duration
                    costs[i] = max(1, _osrm_round(ds))
                else:  # OSRM's convertToWeight on the profile's weight; the duration goes with the state
                    if durations is None:
                        durations = self._durations_of(snap)
                    durations[a] = max(1, _osrm_round(ds))
                    r = u.get("rate", v / 3.6)  # no rate: OSRM falls back to the duration (rate = speed in m/s)
                    if r is None:  # OSRM's empty 4th column: the weight stays
                        costs[i] = int(np.asarray(snap.state.arc_cost)[a]) if snap.state is not None \
                            else int(snap.cost[a])
                    elif _positive(r, where, "rate", zero=True) == 0.0:  # OSRM: an invalid weight, closed
                        costs[i] = CLOSED
                    else:
                        r = _positive(r, where, "rate")
                        w = length / r * mult
                        if not w < MAX_COST + 0.5:
                            field = "rate" if "rate" in u else "speed_kmh"
                            raise EngineError("InvalidValue", f"{where}: {field} {u[field]!r} makes the "
                                                              f"{length:.1f} m of arc {a} weigh {w:.3g} "
                                                              f"({snap.name}), over the largest cost {MAX_COST}")
                        costs[i] = max(1, _osrm_round(w))
            else:
                raise EngineError("InvalidValue", f"{where}: expected keys arc, cost or from, to, speed_kmh "
                                                  "(and optionally rate); got "
                                                  f"{', '.join(sorted(map(str, keys))) or 'none'}")
            if MAX_COST < costs[i] != CLOSED:
                raise EngineError("InvalidValue", f"{where}: cost {int(costs[i])} is over the largest cost {MAX_COST}")
        return ids, costs, durations

    def _weight_multiplier(self, snap):
        """``10**weight_precision`` when ``snap``'s metric is the Lua profile's weight (speed updates set
        its costs by OSRM's ``convertToWeight`` and keep the durations apart), else None."""
        tc = getattr(self.graph, "turn_costs", None)
        if tc is None or snap.is_time or "travel_time" not in self.graph.weights:
            return None
        if snap.name != str(tc.meta.get("weight_name") or self.graph.meta.get("weight_name") or "weight"):
            return None
        p = tc.meta.get("weight_precision", self.graph.meta.get("weight_precision"))
        return None if p is None else 10.0 ** int(p)

    def _durations_of(self, snap):
        """Every arc's current travel time (int64 (m,), deciseconds, a copy): ``snap``'s state's live ones,
        else the graph's ``travel_time``."""
        dur = getattr(snap.state, "arc_duration", None)
        if dur is None:
            dur = self.graph.weight("travel_time")
        return np.array(dur, dtype=np.int64)

    def metric_names(self):
        """The metric names :meth:`customize` takes for this graph: :data:`METRICS`, or for a graph with
        turn costs (a Lua profile's) its ``weight_name``, ``"duration"`` and ``"distance"``."""
        tc = getattr(self.graph, "turn_costs", None)
        if tc is None:
            return METRICS
        wn = str(tc.meta.get("weight_name") or "weight")
        return tuple(dict.fromkeys((wn, "duration", "distance")))

    def _resolve_metric(self, name):
        tc = getattr(self.graph, "turn_costs", None)
        if tc is None or name == "distance":
            return name
        from ..pipeline.customize import profile_metric

        return profile_metric(self.graph, "duration" if name == "duration" else "weight", turns=self.overlay.turns)

    def warm(self):
        """Run the kernels of :meth:`customize` once without changing the metric; the server's warm-up
        (:func:`gpuroute.server.warm_up`), so that no ``/customize`` compiles.

        The metric decoder of each named metric (:data:`METRICS`, resolved and decoded, the result
        dropped), an update that gives one arc the cost it has (its cells come out the same), and on the
        GPU a whole customization of the current metric (the same values again). The overlay's arc costs,
        turn costs and metric name stay as they are (the metric object is a new one with the same
        values: a route running meanwhile starts again, as after any customization).

        Returns
        -------
        dict
            ``{"seconds": s}``.
        """
        import time

        from ..backend import resolve_device
        from ..crp.metric import Metric, decode_turn_costs

        t0 = time.perf_counter()
        ov = self.overlay
        for name in self.metric_names():  # pure: resolved and decoded as customize(metric=name) does
            decode_turn_costs(Metric.resolve(ov.graph, self._resolve_metric(name), turns=ov.turns), ov.turns)
        with self._lock:
            cost = np.asarray(ov.arc_cost)
            if cost.size:
                a = int(cost.size // 2)  # any arc: its own cost again
                ov.update(np.array([a], dtype=np.int64), np.array([int(cost[a])], dtype=np.int64))
            if resolve_device("auto") == "gpu":  # the whole-metric launch is another one on the device
                ov.customize(ov.metric)
        return {"seconds": time.perf_counter() - t0}

    def customize(self, updates=None, metric=None, *, persist=None):
        """Apply traffic updates (:meth:`parse_updates`) or re-customize for a named metric.

        Parameters
        ----------
        updates, metric
            See :meth:`gpuroute.engine.Engine.customize`.
        persist : callable, optional
            ``persist(overlay) -> dict or None``, called under the customization lock once the new metric
            is in place (:meth:`gpuroute.engine.dataset.TrafficStore.save`: the dataset directory's saved
            traffic). When it raises, the overlay is put back to the metric it had before (one reference,
            as the swap itself) and the error propagates: after a success memory and disk hold the same
            metric, after a failure both hold the previous one.

        Returns
        -------
        dict
            ``{"code": "Ok", "seconds": s, "cells": [per level], "metric": name, "arcs": k, "saved": ...}``
            (``cells``: the cells re-customized per level, finest first; all of them for a metric;
            ``saved``: what ``persist`` returned, e.g. ``{"file", "generation", "updated", "seconds"}``, None
            without it). ``seconds`` is the customization's; saving is not included.

        Raises
        ------
        EngineError
            ``InvalidOptions`` (neither or both of ``updates`` and ``metric``), ``InvalidValue`` (a bad
            update or metric name); nothing changes and nothing is saved then.
        OSError
            ``persist`` failed (:class:`gpuroute.engine.dataset.TrafficSaveError`); the customization was
            undone.
        """
        if (updates is None) == (metric is None):
            raise EngineError("InvalidOptions", "give either updates (a list) or metric (one of "
                                                f"{', '.join(METRICS)})")
        ov = self.overlay
        with self._lock:
            if metric is not None:
                names = self.metric_names()
                if not isinstance(metric, str) or metric not in names:
                    raise EngineError("InvalidValue", f"metric must be one of {', '.join(names)}, got {metric!r}")
                before = ov._state  # what memory and disk hold now: put back if saving fails
                info = ov.customize(self._resolve_metric(metric))
                out = {"code": "Ok", "seconds": float(info["seconds"]), "cells": [int(x) for x in ov.n_cells],
                       "metric": metric, "arcs": int(self.graph.n_arcs)}
            else:
                ids, costs, durations = self.parse_updates(updates, self.snapshot())
                before = ov._state
                info = ov.update(ids, costs, durations=durations)  # costs and durations: one state
                out = {"code": "Ok", "seconds": float(info["seconds"]), "cells": [int(x) for x in info["cells"]],
                       "metric": str(getattr(ov.metric, "name", "") or ""), "arcs": int(np.unique(ids).size)}
            out["saved"] = None
            if persist is not None:
                # Overlay.customize / update compute and swap in one call, so the file is written after the
                # swap; a failed write swaps the previous state back (a route that started meanwhile sees
                # the metric change and starts again, as after any customization)
                try:
                    out["saved"] = persist(ov)
                except BaseException:
                    ov._state = before
                    raise
            return out


def _osrm_round(x):
    """``std::round`` of a finite ``x >= 0`` (half away from zero; Python's ``round`` goes half to even)."""
    r = math.floor(x)
    return int(r) + (1 if x - r >= 0.5 else 0)


def _positive(v, where, what, *, zero=False, closed_word=False):
    """``v`` as a float, finite and > 0 (``zero``: >= 0, 0 closing the arc); EngineError InvalidValue naming
    ``where`` and ``what`` otherwise (``closed_word``: the message names :data:`CLOSED_WORD`)."""
    alt = f" or {CLOSED_WORD!r}" if closed_word else (" (0 closes the arc)" if zero else "")
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise EngineError("InvalidValue", f"{where}: {what} must be a number{alt}, got {v!r}")
    x = float(v)
    if not (math.isfinite(x) and (x >= 0 if zero else x > 0)):
        raise EngineError("InvalidValue", f"{where}: {what} must be a finite number {'>=' if zero else '>'} 0{alt}, "
                                          f"got {v!r}")
    return x

