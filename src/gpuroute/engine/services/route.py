"""The route service (OSRM ``/route/v1``) past validation: the legs from one phantom-level search
(:func:`gpuroute.engine.algorithms.route_search`: the overlay's, else the hierarchy's), each leg's pieces,
turns and summary in one compiled call (:func:`gpuroute.engine.legs.leg_arrays`), the overview simplified and
encoded in one more (:func:`gpuroute.engine.osrm.overview_polyline`), and the OSRM route object built from their
arrays: a leg's steps and annotation written as JSON text by one more (:func:`leg_parts`:
:func:`gpuroute.engine.osrm.leg_parts_json`), which the HTTP answer splices in and the Python API reads back.

Costs of a leg from source option arc ``a`` at fraction ``fa`` to target option arc ``b`` at ``fb``:
``(1 - fa) w(a) + d(head a, tail b) + fb w(b)``, or ``(fb - fa) w(a)`` when both sit on the same arc
with the target ahead; durations, distances and weights of partial arcs are fraction-weighted (linear
along an arc, as OSRM's). With ``continue_straight`` a route leaves an intermediate waypoint on the arc
it arrived on; the legs are chosen jointly by a dynamic program over the options of each waypoint.

``alternatives``: for two waypoints, up to that many via-node alternatives (:func:`plan_alternatives`:
:mod:`gpuroute.crp.alternatives` on the overlay, :mod:`gpuroute.ch.alternatives` without one), each a
one-leg plan made a route object by the same :func:`route_object` as the shortest route.
"""
from __future__ import annotations

import math

import numpy as np

from ... import config
from ...geo.segments import local_xy
from ..algorithms import route_search
from ..legs import MODIFIERS, leg_arrays
from ..osrm import (
    ANNOTATION_BITS,
    GEOMETRY_CODES,
    EngineError,
    encode_geometry,
    json_fragment,
    json_loads,
    leg_overview,
    leg_parts_text,
    names_json,
    overview_polyline,
    polyline_args,
    round1,
    simplify,
    waypoints,
)
from ..traffic import LegPath

__all__ = ["route", "route_object", "plan_alternatives", "leg_parts"]

#: Empty arrays the leg kernels take where a leg has no path or the engine no such costs.
_NO_ARCS = np.zeros(0, dtype=np.int64)
_NO_COSTS = np.zeros(0, dtype=np.float64)


def route(engine, phantoms, *, steps, annotations, geometries, overview, continue_straight, exclusion=None,
          snap=None, alternatives=0, leg_parts="objects"):
    """The OSRM route answer through the snapped waypoints in order.

    Parameters
    ----------
    engine : Engine
    phantoms : PhantomSet
        The waypoints (2 or more points).
    steps : bool
    annotations : tuple of str
        Validated annotation names (:data:`gpuroute.engine.osrm.ROUTE_ANNOTATIONS`).
    geometries : {"polyline", "polyline6", "geojson"}
    overview : {"simplified", "full", "false"}
    continue_straight : bool
    exclusion : Exclusion, optional
        Resolved ``exclude=`` / avoids (:mod:`gpuroute.engine.exclude`): the route runs on its snapshot.
    snap : Snapshot, optional
        The request's metric snapshot (:func:`gpuroute.engine.algorithms.metric_snapshot` of ``exclusion``)
        where the request read it already (a trip: its matrix's); None: read by the search.
    alternatives : int
        Most alternative routes after the shortest one (>= 0; OSRM's ``number_of_alternatives``): for two
        waypoints, via-node alternatives on the same metric snapshot (:func:`plan_alternatives`); with more
        waypoints only the shortest route, as OSRM's.
    leg_parts : {"objects", "json"}
        Each leg's ``steps`` (when asked) and ``annotation`` as Python lists and dicts, or as ``orjson.Fragment``
        of their JSON text (orjson >= 3.10; the same JSON as orjson writes the objects, :func:`leg_parts`;
        :data:`gpuroute.engine.params.LEG_PARTS`).

    Returns
    -------
    dict
        ``{"code": "Ok", "routes": [route, alternative, ...], "waypoints": [...]}`` (see
        :meth:`gpuroute.engine.Engine.route`); the alternatives in ascending weight, each a full route object
        built as the first one is.

    Raises
    ------
    EngineError
        ``NoRoute``.
    """
    e = engine
    plan, snap = route_search(e, exclusion, snap).route(phantoms, continue_straight=bool(continue_straight))
    rows = PhantomRows(phantoms)
    plans = [plan]
    if alternatives > 0 and phantoms.n_points == 2:
        plans += plan_alternatives(e, phantoms, plan, snap, int(alternatives))
    routes = [route_object(e, phantoms, rows, p, snap, steps=steps, annotations=annotations, geometries=geometries,
                           overview=overview, leg_parts=leg_parts) for p in plans]
    return {"code": "Ok", "routes": routes, "waypoints": waypoints(phantoms, e._fingerprint, e._names)}


def route_object(e, phantoms, rows, plan, snap, *, steps, annotations, geometries, overview, leg_parts="objects"):
    """One OSRM route object (geometry, legs, weight_name, weight, duration, distance) of one leg plan
    (``[((arc, fraction), (arc, fraction), path)]`` per leg, as :meth:`gpuroute.engine.algorithms.CRP.route`
    gives it) on the metric snapshot ``snap`` (None: the hierarchy's arrays); ``rows`` the :class:`PhantomRows` of
    ``phantoms``; ``leg_parts`` as :func:`route`'s. The shortest route and every alternative are built by this one
    function. A one-leg plan without steps or annotations and with a polyline overview (or none) in one compiled
    call (:func:`_one_leg_route`), else leg by leg (:func:`_route_of_legs`): the same object."""
    consts = _leg_consts(e, snap)
    if not steps and not annotations and len(plan) == 1 and (overview == "false" or geometries != "geojson"):
        return _one_leg_route(e, rows, plan[0], snap, consts, geometries, overview)
    return _route_of_legs(e, phantoms, rows, plan, snap, consts, steps, annotations, geometries, overview, leg_parts)


def _route_of_legs(e, phantoms, rows, plan, snap, consts, steps, annotations, geometries, overview, leg_parts):
    """:func:`route_object` leg by leg (:func:`_leg`, :func:`_leg_json`), ``consts`` :func:`_leg_consts`'s."""
    legs, points = [], []
    tot_w = tot_d = tot_l = 0.0
    for i, (dep, arr, path) in enumerate(plan):
        leg = _leg(e, rows, i, dep, arr, path, snap, consts)
        legs.append(_leg_json(e, leg, phantoms, i + 1, steps, annotations, geometries, leg_parts))
        tot_w += leg.weight_sum + leg.turn_weight
        tot_d = None if leg.duration is None or tot_d is None else tot_d + leg.duration_sum + leg.turn_duration
        tot_l += leg.distance_sum
        points.append(leg.points if i == 0 else leg.points[1:])
    out = {}
    if overview != "false":
        pts = points[0] if len(points) == 1 else np.concatenate(points)
        if geometries == "geojson":
            if overview == "simplified":
                pts = simplify(pts, config.SERVE_SIMPLIFY_TOLERANCE_M)
            out["geometry"] = encode_geometry(pts, geometries)
        else:  # simplified and encoded in one compiled call
            out["geometry"] = overview_polyline(pts, overview == "simplified", config.SERVE_SIMPLIFY_TOLERANCE_M,
                                                6 if geometries == "polyline6" else 5)
    weight_name = e.weight_name if snap is None or snap.name == "time" else snap.name
    out.update(legs=legs, weight_name=weight_name, weight=round1(tot_w * e._w_scale),
               duration=None if tot_d is None else round1(tot_d), distance=round1(tot_l))
    return out


def _one_leg_route(e, rows, leg_plan, snap, consts, geometries, overview):
    """:func:`route_object` of a one-leg plan without steps or annotations, its overview (if any) an encoded
    polyline: the leg's sums, summary and overview in one compiled call (:func:`gpuroute.engine.osrm.leg_overview`),
    the same values and the same object as the general path's."""
    (a, fa), (b, fb), path = leg_plan
    ra, rb = rows.row(0, a), rows.row(1, b)  # the phantom's or a tie's segment
    if path is None:
        mid = nodes = _NO_ARCS
    else:
        mid = np.ascontiguousarray(path.arcs, dtype=np.int64)
        nodes = np.ascontiguousarray(path.nodes, dtype=np.int64)
    want = overview != "false"
    simplified = overview == "simplified"
    slat = rows.lat[ra]
    buf, w_sum, d_sum, l_sum, td, tw, ns, s0, s1 = leg_overview(
        int(a), float(fa), int(b), float(fb), mid, nodes, path is not None, rows.lon[ra], slat, rows.lon[rb],
        rows.lat[rb], *consts, want, simplified,
        *polyline_args(slat, simplified, config.SERVE_SIMPLIFY_TOLERANCE_M, 6 if geometries == "polyline6" else 5))
    names = e._names
    summary = "" if ns == 0 else names[s0] if ns == 1 else names[s0] + ", " + names[s1]
    ws = e._w_scale
    has_dur = consts[5]
    tot_w = 0.0 + (w_sum + tw)  # route_object's running sums, from 0.0, in its order
    # round1's values (the kernel's are Python floats already)
    leg = {"steps": [], "summary": summary, "weight": round((w_sum + tw) * ws, 1),
           "duration": round(d_sum + td, 1) if has_dur else None, "distance": round(l_sum, 1)}
    out = {"geometry": buf.tobytes().decode("ascii")} if want else {}
    weight_name = e.weight_name if snap is None or snap.name == "time" else snap.name
    out.update(legs=[leg], weight_name=weight_name, weight=round(tot_w * ws, 1),
               duration=round(0.0 + d_sum + td, 1) if has_dur else None, distance=round(0.0 + l_sum, 1))
    return out


def plan_alternatives(e, phantoms, plan, snap, k):
    """Up to ``k`` alternative one-leg plans (each as ``plan``) between the two points of ``phantoms``,
    ``plan`` the shortest route's: over the overlay on the route's metric snapshot ``snap`` (its
    customization state: traffic, exclusions and avoids as the route's),
    :func:`gpuroute.crp.alternatives.alternatives` seeded with every option of the first point and
    targeting every option of the second (:func:`gpuroute.crp.phantom_search.leg_seeds`'s costs); over the
    hierarchy (``snap`` None), :func:`gpuroute.ch.alternatives.alternatives` between the options' nodes.
    Empty when the shortest route stays on one arc, or a departure option's arc is also an arrival option's
    (the same-arc case has no via)."""
    (a0, _), (b0, _), path = plan[0]
    if path is None:
        return []
    a, fa = phantoms.options(0)
    b, fb = phantoms.options(1)
    if np.intersect1d(a, b).size:
        return []
    main = np.concatenate([[a0], np.asarray(path.arcs, dtype=np.int64), [b0]]).astype(np.int64)
    head = e._head
    if snap is None:
        from ...ch.alternatives import alternatives as ch_alternatives

        found = ch_alternatives(e, a, fa, b, fb, k=k, main_arcs=main)  # (arcs, option, option, cost)
    else:
        from ...crp import phantom_search as ps
        from ...crp.alternatives import alternatives as crp_alternatives

        c = snap.cost
        dep = np.zeros(a.size, np.int64)
        idx, s_arcs, s_costs, off, _, _, _, overflow = ps.leg_seeds(dep, a, fa, c[a], b, fb, c[b], ps.SCALE)
        if overflow:
            return []
        res = crp_alternatives(e._traffic.query(), snap.state, s_arcs, s_costs, b, off, k=k, main_arcs=main)
        found = [(r.arcs, int(idx[r.seed]), r.target, r.cost / res.scale) for r in res.routes]
    out = []
    for arcs, si, ti, cost in found:
        mid = np.ascontiguousarray(arcs[1:-1], dtype=np.int64)
        nodes = np.empty(mid.size + 1, np.int64)
        nodes[0] = head[arcs[0]]
        nodes[1:] = head[mid]
        out.append([((int(arcs[0]), float(fa[si])), (int(arcs[-1]), float(fb[ti])), LegPath(mid, nodes, float(cost)))])
    return out


class PhantomRows:
    """What the legs read of a PhantomSet's rows, as Python lists (read once per route, not per leg):
    ``start`` (``point_start``), ``arc``, ``lon``, ``lat``."""

    __slots__ = ("start", "arc", "lon", "lat")

    def __init__(self, phantoms):
        self.start = phantoms.point_start.tolist()
        self.arc = phantoms.arc.tolist()
        self.lon = phantoms.lon.tolist()
        self.lat = phantoms.lat.tolist()

    def row(self, i, arc):
        """The row of point ``i``'s option on ``arc`` (its own segment's or a tie's)."""
        s = self.start[i]
        return s + self.arc[s:self.start[i + 1]].index(arc)


class _Leg:
    """The pieces of one leg (:func:`_leg`): ``arcs``, ``frac`` (of each arc covered), ``points`` (pieces + 1,
    lon/lat), per-piece ``weight`` (the engine's weight unit), ``duration`` (s; None without durations) and
    ``distance`` (m) with their sums (``weight_sum``, ``duration_sum``, ``distance_sum``), the turns taken
    (``turn_weight``, ``turn_duration``) and the summary's name ids (``summary``, int64, at most 2)."""

    __slots__ = ("arcs", "frac", "points", "weight", "duration", "distance", "weight_sum", "duration_sum",
                 "distance_sum", "turn_duration", "turn_weight", "summary")

    def __init__(self, arcs, frac, points, weight, duration, distance, weight_sum, duration_sum, distance_sum,
                 turn_duration, turn_weight, summary):
        self.arcs, self.frac, self.points = arcs, frac, points
        self.weight, self.duration, self.distance = weight, duration, distance
        self.weight_sum, self.duration_sum, self.distance_sum = weight_sum, duration_sum, distance_sum
        self.turn_duration, self.turn_weight, self.summary = turn_duration, turn_weight, summary


def _leg(e, rows, i, dep, arr, path, snap=None, consts=None):
    """The :class:`_Leg` of leg ``i`` in one compiled call (:func:`gpuroute.engine.legs.leg_arrays`: the pieces
    of :func:`~gpuroute.engine.legs.leg_pieces`, the turns of :func:`~gpuroute.engine.legs.turn_sums`, the
    summary of :func:`~gpuroute.engine.legs.summary_ids`) on the metric snapshot ``snap``, ``consts`` its
    arguments after the end points (:func:`_leg_consts` of ``snap``; made when None). Zero-length partial pieces
    are dropped."""
    if consts is None:
        consts = _leg_consts(e, snap)
    (a, fa), (b, fb) = dep, arr
    ra, rb = rows.row(i, a), rows.row(i + 1, b)  # the phantom's or a tie's segment
    if path is None:
        mid = nodes = _NO_ARCS
    else:
        mid = np.ascontiguousarray(path.arcs, dtype=np.int64)
        nodes = np.ascontiguousarray(path.nodes, dtype=np.int64)
    has_dur = consts[5]
    arcs, frac, pts, w, d, ln, w_sum, d_sum, l_sum, td, tw, summary = leg_arrays(
        int(a), float(fa), int(b), float(fb), mid, nodes, path is not None, rows.lon[ra], rows.lat[ra], rows.lon[rb],
        rows.lat[rb], *consts)
    return _Leg(arcs, frac, pts, w, d if has_dur else None, ln, w_sum, d_sum, l_sum, float(td), float(tw), summary)


def _leg_consts(e, snap=None):
    """:func:`gpuroute.engine.legs.leg_arrays`'s arguments after the end points (``coords`` .. ``name_id``) on the
    metric snapshot ``snap`` (None: the hierarchy's arrays), made once per engine and snapshot.

    Over the overlay (``snap``, the route's metric snapshot) weights come from the snapshot's
    fraction-weighted arc costs, and durations too when its metric is a time; else from the engine's
    arrays. Turns: those between the departure arc, the path's arcs and the arrival arc (none when the
    leg stays on one arc), from the snapshot (its decoded turn cost less the out-arc's cost) when the
    route ran over the overlay, else from the graph's turn costs; durations from the snapshot when its
    metric is a time, else from the graph's turn costs (deciseconds)."""
    memo = getattr(e, "_leg_consts_memo", None)
    if memo is not None and memo[0] is snap:
        return memo[1]
    tc = e._tc
    if snap is not None:
        wcost, wf = snap.cost, snap.scale / e._w_scale
        dcost, df = ((snap.cost, snap.scale) if snap.is_time
                     else (e._dur if snap.duration is None else snap.duration, 1.0))  # live durations
        turns = (True, bool(snap.is_time), snap.turn_cost, snap.cost, float(snap.scale / e._w_scale),
                 float(snap.scale))
    else:
        wcost, wf = e._w, 1.0
        dcost, df = e._dur, 1.0
        turns = (False, False, _NO_ARCS, _NO_COSTS, 1.0, 1.0)
    has_dur = dcost is not None
    consts = (e._coords_f64, wcost, float(wf), dcost if has_dur else _NO_COSTS, float(df), has_dur, e._len,
              tc is not None, e._t_first if tc is not None else _NO_ARCS, e._fo if tc is not None else _NO_ARCS,
              e._head, *turns, tc.duration if tc is not None else _NO_ARCS, tc.weight if tc is not None else _NO_ARCS,
              e._name_id)
    e._leg_consts_memo = (snap, consts)
    return consts


def _name(e, arc):
    k = int(e._name_id[arc])
    return e._names[k] if 0 <= k < len(e._names) else ""


def _summary(e, leg):
    """The names of the two streets with the longest distance on the leg, in route order."""
    return ", ".join([e._names[i] for i in leg.summary.tolist()])


def _leg_json(e, leg, phantoms, end, steps, ann, geometries, parts="objects"):
    """The OSRM leg object of ``leg`` arriving at point ``end`` of ``phantoms``: its ``steps`` and ``annotation``
    from :func:`leg_parts` (objects read back from their JSON text, or the text itself: ``parts``)."""
    tw, td = leg.turn_weight, leg.turn_duration
    out = {"steps": [], "summary": _summary(e, leg), "weight": round1((leg.weight_sum + tw) * e._w_scale),
           "duration": None if leg.duration is None else round1(leg.duration_sum + td),
           "distance": round1(leg.distance_sum)}
    if steps or ann:
        st, an = leg_parts(e, leg, phantoms, end, steps, ann, geometries)
        if parts != "json":
            wrap = json_loads
        elif json_fragment is None:
            raise EngineError("NotImplemented", "leg_parts='json' needs orjson >= 3.10 (orjson.Fragment)")
        else:
            wrap = json_fragment
        if steps:
            out["steps"] = wrap(st)
        if ann:
            out["annotation"] = wrap(an)
    return out


def leg_parts(e, leg, phantoms, end, steps, ann, geometries):
    """A leg's ``steps`` (OSRM's step objects; when ``steps``) and ``annotation`` (the ``ann`` names, one value per
    piece; when any) as JSON text, written from its arrays by one compiled call
    (:func:`gpuroute.engine.osrm.leg_parts_json`: the maneuvers, intersections, geometries and every value's
    rounding; the arrival's side of the street, :func:`_arrive_modifier`, from here).

    Returns
    -------
    (bytes, bytes)
        The steps' JSON array (``[]`` without ``steps``) and the annotation's object (empty without ``ann``), the
        bytes orjson writes for those objects.
    """
    names, off = _names_table(e)
    dur = leg.duration
    has_dur = dur is not None
    bits = 0
    for a in ann:
        bits |= ANNOTATION_BITS[a]
    amod = _arrive_modifier(e, leg, phantoms, end) if steps else 0
    return leg_parts_text(leg.arcs, leg.points, leg.weight, dur if has_dur else leg.distance, leg.distance, has_dur,
                          bool(steps), bits, GEOMETRY_CODES[geometries], amod, e._w_scale, e._bearing, e._name_id,
                          e._head, e._tail, e._degree, e._fo_all, e._rfo, e._rev_tail, e._coords_f64, names, off,
                          e._node_ids)


def _names_table(e):
    """The engine's street names as :func:`gpuroute.engine.osrm.leg_parts_json` reads them (made once)."""
    t = getattr(e, "_names_json", None)
    if t is None:
        t = e._names_json = names_json(e._names)
    return t


def _arrive_modifier(e, leg, phantoms, end):
    """The arrival's modifier as a code of :data:`gpuroute.engine.legs.MODIFIERS`: the side of the street the
    destination lies on (from its own segment's bearing, the leg's last), ``straight`` within a metre of it."""
    b_last = float(e._bearing[leg.arcs[-1]])
    r0 = int(phantoms.point_start[end])
    px, py = local_xy(float(phantoms.input_lon[end]), float(phantoms.input_lat[end]), float(phantoms.lon[r0]),
                      float(phantoms.lat[r0]))
    side = math.sin(math.radians(b_last)) * float(py) - math.cos(math.radians(b_last)) * float(px)
    amod = "straight" if float(phantoms.distance[r0]) < 1.0 else ("right" if side < 0 else "left")
    return _ARRIVE_MODIFIERS[amod]


#: The arrival's modifiers as codes of :data:`gpuroute.engine.legs.MODIFIERS`.
_ARRIVE_MODIFIERS = {m: MODIFIERS.index(m) for m in ("straight", "right", "left")}
