"""Turn costs of an OSM graph as osrm-extract computes them: degree-2 compression, the intersection view
of every junction, one ``process_turn`` call per turn OSRM forms, and the per-turn duration and weight it
stores (:class:`gpuroute.graph.turn_costs.TurnCosts`).

gpuroute's OSM graph keeps every node of a way; osrm-extract first compresses degree-2 nodes
(``GraphCompressor::Compress``) and forms turns only at the nodes that remain. This module runs the same
compression (same node order, same compatibility rules, the triangle check on the graph as it is being
compressed), so that:

* at a compressed node the only turns are the two straight-through ones, at cost 0 -- plus the cost of a
  "fake" ``process_turn`` (:meth:`gpuroute.io.lua_profile.TurnInput.fake`) where the node carries an
  obstacle (a traffic signal, a stop sign, a gate), which osrm-extract adds to the compressed edge;
* at a remaining node every turn OSRM allows (``intersection::isTurnAllowed``: no turn through a barrier,
  U-turns only at dead ends, barriers, turning circles and where at most one road is two-way or one exit
  is left, no wrong-way roundabout exits, no restricted turn) gets a :class:`TurnInput` built from the
  intersection view OSRM builds (``convertToIntersectionView``): the roads in turn-angle order from the
  U-turn, their perceived bearings (:func:`gpuroute.io.osrm_geometry.representative_coordinate`), the legs
  with their flags, lengths and speeds of the whole compressed road;
* every other turn is :data:`~gpuroute.graph.turn_costs.FORBIDDEN`.

Where this differs from osrm-extract (measured by ``tests/io/test_lua_extract.py`` against osrm-extract
26.10 with car.lua: of the turns osrm-extract forms at the junctions, gpuroute forms 99.97 % on Monaco and
99.4 % on Andorra, 98.9 % and 99.2 % of those at the same cost; every obstacle at a compressed node is
priced the same): dual carriageways are merged (``MergableRoadDetector``) from the angle, direction, mode,
name, class, traffic-island and same-direction (parallel walk) checks, without OSRM's link-road,
narrow-triangle and circular-shape checks; parallel ways between two nodes were merged into one arc
before (``RoadGraph.from_arcs``); via-way restrictions are not read (their first and last via nodes are
compressed where OSRM keeps them); U-turn lanes (``turn:lanes`` with ``reverse``) do not allow a U-turn;
the legs of a fake turn have the speeds of their edges before earlier fake turns' costs are added.
"""
from __future__ import annotations

import math

import numpy as np

from ..graph.turn_costs import FORBIDDEN, TurnCosts, turn_arrays
from . import osrm_geometry as geo
from .lua_profile import OBSTACLE_TYPES, TurnInput, TurnLeg

__all__ = ["ArcInfo", "compute_turn_costs", "MERGABLE_ANGLE_DIFFERENCE"]

MERGABLE_ANGLE_DIFFERENCE = 95.0
MAXIMAL_ALLOWED_NO_TURN_DEVIATION = 3.0
PRUNING_DISTANCE = 30.0
_BARRIER = OBSTACLE_TYPES["barrier"]
_TURNING = OBSTACLE_TYPES["mini_roundabout"] | OBSTACLE_TYPES["turning_loop"] | OBSTACLE_TYPES["turning_circle"]
_MAX_PENALTY = 32767


class ArcInfo:
    """What osrm-extract keeps of each arc's OSRM edge (arrays over the graph's arcs).

    Attributes (all shape (m,))
    ---------------------------
    key : int32
        Equal for two arcs exactly when OSRM's edge flags are equal and their annotations combine
        (``NodeBasedEdgeClassification ==`` and ``NodeBasedEdgeAnnotation::CanCombineWith``).
    name_key : int32
        OSRM's string id (name, destinations, ref, pronunciation, exits).
    name : int32
        The plain ``name`` (-1: none), for dual carriageways.
    restricted, roundabout, circular, lhd, motorway, link, motorway_class, ignorable : bool
        ``motorway`` is OSRM's ``IsMotorwayClass()`` (motorway class and not a link), ``motorway_class``
        the stored flag (``IsMotorwayClass() or IsRampClass()``).
    mode, priority, lanes, htc, atc : int
    duration : int64
        Deciseconds (OSRM's rounded segment duration).
    weight : int64
    length : float64
        Metres (OSRM's ``greatCircleDistance``).
    """

    FIELDS = ("key", "name_key", "name", "restricted", "roundabout", "circular", "lhd", "motorway", "link",
              "motorway_class",
              "ignorable", "mode", "priority", "lanes", "htc", "atc", "duration", "weight", "length")

    def __init__(self, **arrays):
        for f in self.FIELDS:
            setattr(self, f, np.asarray(arrays[f]))

    def take(self, idx):
        return ArcInfo(**{f: getattr(self, f)[idx] for f in self.FIELDS})


class _Road:
    """One road (a compressed OSRM edge) leaving an intersection node."""

    __slots__ = ("nb", "end", "out_arc", "in_arc", "ref", "coords", "length", "dur_out", "dur_in",
                 "initial", "perceived", "merged_away", "self_loop", "last", "close")


def compute_turn_costs(graph, info, profile, *, osm_ids, fixed, obstacles, via_nodes, forbidden_pairs, debug=None):
    """Per-turn duration and weight of ``graph`` under an OSRM Lua profile.

    Parameters
    ----------
    graph : RoadGraph
        Lon/lat, arcs after parallel-arc merging.
    info : ArcInfo
        Per arc of ``graph``.
    profile : LuaProfile
        Its obstacle map prepared (:meth:`LuaProfile.prepare_obstacles`).
    osm_ids : ndarray of int64 (n,)
    fixed : ndarray of int64 (n, 2)
        Node coordinates in 1e-6 degrees.
    obstacles : dict
        ``bits`` int (n,) (OR of the types at each node), ``any`` bool (n,).
    via_nodes : set of int
        Dense ids of restriction via nodes (never compressed).
    forbidden_pairs : set of (int, int)
        ``(in_arc, out_arc)`` turns forbidden by turn restrictions.
    debug : list, optional
        Receives ``(from_node, via, to_node, TurnInput, turn_id)`` per ``process_turn`` call at an
        intersection (the far ends of the compressed roads, as osrm-extract's ``turn.from``/``turn.to``
        before they are mapped back to nodes) and ``(None, via, None, TurnInput, turn_id)`` per fake turn.

    Returns
    -------
    TurnCosts, dict
        The costs, and counts (``compressed_nodes``, ``turns_evaluated``, ``fake_turns``,
        ``negative_clamped``, ``merged_roads``).
    """
    n = graph.n_nodes
    tail = graph.tail.astype(np.int64)
    head = graph.head.astype(np.int64)
    m = head.size
    fo = graph.first_out.astype(np.int64)
    # ---------------------------------------------------------------- undirected adjacency, sorted by id
    arc_of = {}
    for a in range(m):
        arc_of[(int(tail[a]), int(head[a]))] = a
    lo = np.minimum(tail, head)
    hi = np.maximum(tail, head)
    pairs = np.unique(lo * n + hi) if m else np.zeros(0, dtype=np.int64)
    pu, pv = pairs // n, pairs % n
    src = np.concatenate([pu, pv])
    dst = np.concatenate([pv, pu])
    order = np.lexsort((dst, src))
    src, dst = src[order], dst[order]
    nfirst = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=nfirst[1:])
    nbrs = [dst[nfirst[v]:nfirst[v + 1]].tolist() for v in range(n)]
    deg = np.diff(nfirst)

    key = info.key.tolist()
    name_key = info.name_key.tolist()
    dur = info.duration.tolist()
    length = info.length.tolist()
    obits = obstacles["bits"]
    oany = obstacles["any"]
    osm = osm_ids.tolist()

    def slot(p, q):
        """(arc p->q or -1, the OSRM edge's arc: p->q, else q->p)."""
        a = arc_of.get((p, q), -1)
        return a, (a if a >= 0 else arc_of[(q, p)])

    # ---------------------------------------------------------------- degree-2 compression
    compressed = np.zeros(n, dtype=bool)
    cur = [list(x) for x in nbrs]   # current neighbours (after the compressions so far)
    cur_data = {}                   # current edge (p, q) -> (length, duration) once it spans compressed nodes
    hop = {}                        # current edge (p, q) -> p's original neighbour on it (default q)
    fake = []                       # (in_arc, out_arc, TurnInput)

    def data(p, q):
        """Length and duration of the current edge p -> q (a reversed edge has its mirror's data)."""
        v = cur_data.get((p, q))
        if v is not None:
            return v
        a, r = slot(p, q)
        return length[r], dur[a if a >= 0 else arc_of[(q, p)]]

    def leg(p, q, ref, incoming, outgoing):
        dist, d = data(p, q)
        return TurnLeg(is_restricted=bool(info.restricted[ref]), is_motorway=bool(info.motorway[ref]),
                       is_link=bool(info.link[ref]), number_of_lanes=int(info.lanes[ref]),
                       highway_turn_classification=int(info.htc[ref]), access_turn_classification=int(info.atc[ref]),
                       speed=int(36.0 * dist / d) if d else 0, distance=float(dist),
                       priority_class=int(info.priority[ref]), is_incoming=incoming, is_outgoing=outgoing)

    for v in range(n):
        if deg[v] != 2 or (obits[v] & (_BARRIER | _TURNING)) or v in via_nodes:
            continue
        x0, x1 = nbrs[v]
        a0 = arc_of.get((v, x0), -1)
        # OSRM: forward_e2 is the first edge unless that one is reversed (not traversable from v)
        xw, xu = (x1, x0) if a0 < 0 else (x0, x1)
        f1, rf1 = slot(xu, v)   # u -> v
        b1, rb1 = slot(xw, v)   # w -> v
        f2, rf2 = slot(v, xw)   # v -> w
        b2, rb2 = slot(v, xu)   # v -> u
        if name_key[rf1] != name_key[rb1] or name_key[rf2] != name_key[rb2]:
            continue
        if not (key[rf1] == key[rf2] and key[rb1] == key[rb2] and (f1 < 0) == (f2 < 0) and (b1 < 0) == (b2 < 0)):
            continue
        c0, c1 = cur[v]
        u_cur, w_cur = (c0, c1) if hop.get((v, c0), c0) == xu else (c1, c0)
        if w_cur in cur[u_cur]:  # u and w already adjacent: OSRM's FindEdgeInEitherDirection
            continue
        compressed[v] = True
        if oany[v]:  # osrm-extract's fake turns: an obstacle's cost, added to the compressed edge
            if f1 >= 0 and f2 >= 0:
                fake.append((f1, f2, TurnInput.fake(osm[xu], osm[v], osm[xw], leg(u_cur, v, rf1, True, False),
                                                    leg(v, w_cur, rf2, False, True))))
            if b1 >= 0 and b2 >= 0:
                fake.append((b1, b2, TurnInput.fake(osm[xw], osm[v], osm[xu], leg(w_cur, v, rb1, True, False),
                                                    leg(v, u_cur, rb2, False, True))))
        (l1, d1), (l2, d2) = data(u_cur, v), data(v, w_cur)
        (l3, d3), (l4, d4) = data(w_cur, v), data(v, u_cur)
        cur_data[(u_cur, w_cur)] = (l1 + l2, d1 + d2)
        cur_data[(w_cur, u_cur)] = (l3 + l4, d3 + d4)
        hop[(u_cur, w_cur)] = hop.get((u_cur, v), v)
        hop[(w_cur, u_cur)] = hop.get((w_cur, v), v)
        cur[u_cur] = [w_cur if y == v else y for y in cur[u_cur]]
        cur[w_cur] = [u_cur if y == v else y for y in cur[w_cur]]

    # ---------------------------------------------------------------- turns
    first, t_in, t_out = turn_arrays(fo, head)
    T = t_in.size
    t_dur = np.full(T, FORBIDDEN, dtype=np.int64)
    t_wgt = np.full(T, FORBIDDEN, dtype=np.int64)
    mult = profile.properties.weight_multiplier

    def turn_id(a, b):
        # the out-arcs of one in-arc are consecutive: first[a] + b - first_out[head[a]]
        return int(first[a] + b - fo[head[a]])

    # straight-through turns at compressed nodes: free, plus the fake turns' costs
    for v in np.flatnonzero(compressed).tolist():
        x0, x1 = nbrs[v]
        for p, q in ((x0, x1), (x1, x0)):
            a = arc_of.get((p, v), -1)
            b = arc_of.get((v, q), -1)
            if a >= 0 and b >= 0:
                t = turn_id(a, b)
                t_dur[t] = 0
                t_wgt[t] = 0
    n_neg = 0
    pen = {}
    if fake:
        fd, fw = profile.process_turns([f[2] for f in fake])
        for (a, b, fti), x, y in zip(fake, fd.tolist(), fw.tolist(), strict=True):
            dd, ww = _trunc(x * 10.0), _trunc(y * mult)
            n_neg += dd < 0 or ww < 0
            t = turn_id(a, b)
            t_dur[t] += max(dd, 0)
            t_wgt[t] += max(ww, 0)
            pen[(a, b)] = dd
            if debug is not None:
                debug.append((None, int(head[a]), None, fti, t))

    # roads of every remaining node: the compressed edges, their geometry, length and durations
    roads_at = {}
    for v in range(n):
        if compressed[v] or deg[v] == 0:
            continue
        roads = []
        for x in nbrs[v]:
            r = _Road()
            r.nb = x
            r.out_arc, r.ref = slot(v, x)
            r.in_arc = arc_of.get((x, v), -1)
            coords = [tuple(fixed[v]), tuple(fixed[x])]
            ln = length[r.ref]
            d_out = dur[r.out_arc] if r.out_arc >= 0 else dur[r.in_arc]
            d_in = dur[r.in_arc] if r.in_arc >= 0 else dur[r.out_arc]
            prev, c = v, x
            prev_out, prev_in = r.out_arc, r.in_arc
            while compressed[c]:
                y0, y1 = nbrs[c]
                nxt = y1 if y0 == prev else y0
                coords.append(tuple(fixed[nxt]))
                ao, ro = slot(c, nxt)
                ai = arc_of.get((nxt, c), -1)
                ln += length[ro]
                d_out += (dur[ao] if ao >= 0 else dur[ai]) + pen.get((prev_out, ao), 0)
                d_in += (dur[ai] if ai >= 0 else dur[ao]) + pen.get((ai, prev_in), 0)
                prev, c = c, nxt
                prev_out, prev_in = ao, ai
            r.end = c
            r.last = prev  # the node before the end (the road's first node seen from its end)
            r.self_loop = c == v
            dedup = [coords[0]]
            for p in coords[1:]:
                if p != dedup[-1]:
                    dedup.append(p)
            r.coords = dedup if len(dedup) >= 2 else [coords[0], coords[-1]]
            r.length = ln
            r.dur_out, r.dur_in = d_out, d_in
            r.merged_away = False
            roads.append(r)
        roads_at[v] = roads

    # bearings
    for roads in roads_at.values():
        lanes = max((int(info.lanes[r.ref]) for r in roads), default=0)
        for r in roads:
            c = r.coords
            r.initial = geo.bearing_deg(c[0], geo.coordinate_at_length(2.0, c))
            if len(roads) <= 2:
                rep = geo.coordinate_close_to_turn(c)
            else:
                ref = r.ref
                factor = geo.offset_correction_factor(bool(info.motorway_class[ref]), int(info.priority[ref]))
                rep = geo.representative_coordinate(
                    c, self_loop=r.self_loop, roundabout=bool(info.roundabout[ref] or info.circular[ref]),
                    low_priority=bool(info.ignorable[ref]),
                    considered_lanes=factor * (lanes if lanes else geo.ASSUMED_LANE_COUNT))
            r.perceived = geo.bearing_deg(c[0], rep)
            r.close = geo.bearing_deg(c[0], geo.coordinate_close_to_turn(c))
        roads.sort(key=lambda r: r.perceived)  # clockwise, as getIntersectionOutgoingGeometries sorts
    base = {v: [(r.perceived, r.initial) for r in roads] for v, roads in roads_at.items()}
    merger = _Merger(roads_at, info, fixed)
    n_merged = 0
    merged_at = {}
    for v, roads in roads_at.items():
        k = len(roads)
        merged = [False] * k
        if k >= 3:
            for i in range(k):
                if merger.pair_mergeable(v, roads, i):
                    j = (i + 1) % k
                    merged[i] = merged[j] = True
                    b = _find_merged_bearing(roads, i, j, info, False)[1]
                    roads[i].perceived = roads[i].initial = b
                    roads[j].perceived = roads[j].initial = b
                    away = roads[i] if roads[i].out_arc < 0 else roads[j]
                    away.merged_away = True
                    n_merged += 1
        merged_at[v] = merged
    # bearings of roads that will be merged at a neighbouring intersection within 30 m
    for v, roads in roads_at.items():
        if len(roads) < 2:
            continue
        for idx, r in enumerate(roads):
            if merged_at[v][idx] or r.length > PRUNING_DISTANCE or r.end not in roads_at:
                continue
            other = roads_at[r.end]
            ne = len(other)
            if ne <= 1:
                continue
            ob = base[r.end]
            order2 = sorted(range(ne), key=lambda i: ob[i][0])
            cur_i = next((p for p, i in enumerate(order2) if other[i].end == v), None)
            if cur_i is None:
                continue
            view = [_Shadow(other[i], ob[i]) for i in order2]
            prev_i, next_i = (cur_i - 1) % ne, (cur_i + 1) % ne
            if ne >= 3 and merger.pair_mergeable(r.end, view, prev_i):
                ok, b = _find_merged_bearing(view, prev_i, cur_i, info, True)
                if ok:
                    off = geo.angular_deviation(b, view[cur_i].perceived)
                    r.perceived = r.initial = math.fmod(r.perceived + 360.0 - off, 360.0)
            elif ne >= 3 and merger.pair_mergeable(r.end, view, cur_i):
                ok, b = _find_merged_bearing(view, cur_i, next_i, info, True)
                if ok:
                    off = geo.angular_deviation(b, view[cur_i].perceived)
                    r.perceived = r.initial = math.fmod(r.perceived + off, 360.0)

    # the intersection view of each incoming road, and the turns
    turns, where = [], []
    for v, roads in roads_at.items():
        by_nb = sorted(roads, key=lambda r: r.nb)  # OSRM's edge order (by target)
        barrier = bool(obits[v] & _BARRIER)
        turning = bool(obits[v] & _TURNING)
        for rin in by_nb:
            if rin.in_arc < 0:
                continue
            a_in = rin.in_arc
            entry = geo.reverse_bearing(rin.perceived)
            entry0 = geo.reverse_bearing(rin.initial)
            allowed = {id(r): _turn_allowed(rin, r, by_nb, forbidden_pairs, barrier, turning, info) for r in by_nb}
            pre, uturn, n_uturn_angles = [], None, 0
            for r in by_nb:
                ok = allowed[id(r)]
                ang = math.fmod(round(geo.angle_between(entry, r.perceived) * 1e8) / 1e8, 360.0)
                ang0 = geo.angle_between(entry0, r.initial)
                if ok and ((ang < 15 and ang0 > 180) or (ang > 345 and ang0 < 180)):
                    ang = ang0 = 0.0
                is_u = abs(ang) < 2.220446049250313e-16
                if r is rin:
                    uturn = [r, ok, ang]
                elif ok or (not r.merged_away and not is_u):
                    n_uturn_angles += is_u
                    use_turn = (ang > 270 and ang0 < 90) or (ang < 90 and ang0 > 270)
                    adj = (360.0 if ang > 180 else 0.0) if abs(ang0) < 2.220446049250313e-16 else (
                        ang if use_turn else ang0)
                    pre.append([r, ok, ang, adj])
            if uturn[1] or n_uturn_angles == 0:
                pre.insert(0, [uturn[0], uturn[1], 0.0, 0.0])
            pre.sort(key=lambda e: (e[3], e[2]))
            for i in range(len(pre) - 1):
                if pre[i + 1][2] < pre[i][2]:
                    adj = min(0.5, _restrict(360.0 - pre[i][2]) / 2.0)
                    pre[i + 1][2] = _restrict(pre[i][2] + adj)
            if not any(abs(e[2]) < 2.220446049250313e-16 for e in pre):
                pre.insert(0, [uturn[0], uturn[1], 0.0, 0.0])
            legs = [_leg(e[0], info) for e in pre]
            lhd = bool(info.lhd[a_in])
            for k, e in enumerate(pre):
                r, ok, ang = e[0], e[1], e[2]
                if not ok or r.out_arc < 0:
                    continue
                is_u = ang == 0.0 or ang >= 360.0
                if is_u:
                    right = legs[1:k] + legs[k + 1:]
                    left = []
                else:
                    right = legs[1:k] if k > 0 else []
                    left = legs[k + 1:]
                src_speed = int(rin.length / rin.dur_in * 36.0) if rin.dur_in else 0
                tgt_speed = int(r.length / r.dur_out * 36.0) if r.dur_out else 0
                a_out = r.out_arc
                to_node = r.nb
                ti = TurnInput(
                    angle=180.0 - ang, from_=osm[rin.nb], via=osm[v], to=osm[to_node],
                    number_of_roads=len(right) + len(left) + 2 - int(is_u), is_u_turn=is_u,
                    is_left_hand_driving=lhd,
                    source_restricted=bool(info.restricted[a_in]), source_mode=int(info.mode[a_in]),
                    source_is_motorway=bool(info.motorway[a_in]), source_is_link=bool(info.link[a_in]),
                    source_number_of_lanes=int(info.lanes[a_in]),
                    source_highway_turn_classification=int(info.htc[a_in]),
                    source_access_turn_classification=int(info.atc[a_in]), source_speed=src_speed,
                    source_priority_class=int(info.priority[a_in]),
                    source_is_roundabout=bool(info.roundabout[a_in]),
                    target_restricted=bool(info.restricted[a_out]), target_mode=int(info.mode[a_out]),
                    target_is_motorway=bool(info.motorway[a_out]), target_is_link=bool(info.link[a_out]),
                    target_number_of_lanes=int(info.lanes[a_out]),
                    target_highway_turn_classification=int(info.htc[a_out]),
                    target_access_turn_classification=int(info.atc[a_out]), target_speed=tgt_speed,
                    target_priority_class=int(info.priority[a_out]),
                    target_is_roundabout=bool(info.roundabout[a_out]),
                    source_road=legs[0], target_road=legs[k], roads_on_the_right=tuple(right),
                    roads_on_the_left=tuple(left))
                turns.append(ti)
                where.append(turn_id(a_in, a_out))
                if debug is not None:
                    debug.append((rin.end, v, r.end, ti, where[-1]))
    n_neg = 0
    if turns:
        d, w = profile.process_turns(turns)
        dd = np.array([_trunc(x * 10.0) for x in d.tolist()], dtype=np.int64)
        ww = np.array([_trunc(x * mult) for x in w.tolist()], dtype=np.int64)
        n_neg += int(((dd < 0) | (ww < 0)).sum())
        idx = np.asarray(where, dtype=np.int64)
        t_dur[idx] = np.maximum(dd, 0)
        t_wgt[idx] = np.maximum(ww, 0)
    for a, b in forbidden_pairs:
        t = turn_id(a, b)
        t_dur[t] = FORBIDDEN
        t_wgt[t] = FORBIDDEN
    meta = {"compressed_nodes": int(compressed.sum()), "turns_evaluated": len(turns), "fake_turns": len(fake),
            "negative_clamped": n_neg, "merged_roads": n_merged}
    return TurnCosts(t_dur, t_wgt), meta


def _trunc(x):
    """C++'s conversion of a double to an integer (toward zero), clamped to OSRM's 16-bit penalty range."""
    if not math.isfinite(x):
        return 0
    v = int(x)
    return max(-_MAX_PENALTY - 1, min(_MAX_PENALTY, v))


def _restrict(a):
    while a < 0:
        a += 360.0
    while a > 360:
        a -= 360.0
    return a


def _leg(r, info):
    ref = r.ref
    if r.out_arc >= 0:
        incoming, outgoing, d = r.in_arc >= 0, True, r.dur_out
    else:
        incoming, outgoing, d = True, False, r.dur_out
    return TurnLeg(is_restricted=bool(info.restricted[ref]), is_motorway=bool(info.motorway[ref]),
                   is_link=bool(info.link[ref]), number_of_lanes=int(info.lanes[ref]),
                   highway_turn_classification=int(info.htc[ref]), access_turn_classification=int(info.atc[ref]),
                   speed=int(36.0 * r.length / d) if d else 0, distance=float(r.length),
                   priority_class=int(info.priority[ref]), is_incoming=incoming, is_outgoing=outgoing)


def _turn_allowed(rin, r, roads, forbidden_pairs, barrier, turning, info):
    """``intersection::isTurnAllowed`` from ``rin`` (incoming) onto ``r``."""
    if r.out_arc < 0 or rin.in_arc < 0:
        return False
    if (rin.in_arc, r.out_arc) in forbidden_pairs:
        return False
    exits = bidir = 0
    rf = rt = None
    rf_ang = rt_ang = 0.0
    from_rev = rin.perceived  # the reversed bearing of the incoming edge: the road back, v -> from
    for x in roads:
        is_exit = x.out_arc >= 0 and (rin.in_arc, x.out_arc) not in forbidden_pairs
        exits += is_exit
        bidir += x.in_arc >= 0
        if info.roundabout[x.ref] or info.circular[x.ref]:
            if x.out_arc < 0:
                ang = geo.angle_between(geo.reverse_bearing(x.perceived), from_rev)
                if ang > rf_ang:
                    rf, rf_ang = x, ang
            else:
                ang = geo.angle_between(from_rev, x.perceived)
                if ang > rt_ang:
                    rt, rt_ang = x, ang
    if r is rin:  # a U-turn
        if barrier or turning:
            return True
        if len(roads) == 1:
            return True
        if exits == 1 or bidir <= 1:
            return True
        return False
    if barrier:
        return False
    if rf is not None and rt is not None:
        b_from = geo.reverse_bearing(rf.perceived)
        ra = geo.angle_between(b_from, rt.perceived)
        rfa = geo.angle_between(b_from, from_rev)
        rta = geo.angle_between(b_from, r.perceived)
        if (rfa < ra and rta < rfa) or (rfa > ra and rta > rfa):
            return False
    return True


class _Shadow:
    """A road of a neighbouring intersection with its unadjusted bearings (for the 30 m adjustment)."""

    __slots__ = ("nb", "end", "out_arc", "in_arc", "ref", "perceived", "initial", "self_loop", "road")

    def __init__(self, r, pb):
        self.nb, self.end, self.out_arc, self.in_arc, self.ref = r.nb, r.end, r.out_arc, r.in_arc, r.ref
        self.perceived, self.initial = pb
        self.self_loop = r.self_loop
        self.road = r


class _Merger:
    """``MergableRoadDetector``, in part: two adjacent roads at an intersection are one (a dual carriageway
    seen as one road) when ``CanMergeRoad`` holds. Ported: the angle, direction, roundabout, mode, name
    and class checks, traffic loops, ``IsTrafficIsland`` and ``HaveSameDirection`` (the parallel walk
    of 120 m along both roads, straightmost by name); not ported: ``IsLinkRoad``, ``IsNarrowTriangle``
    and ``IsCircularShape`` (taken as false)."""

    def __init__(self, roads_at, info, fixed):
        self.roads_at, self.info, self.fixed = roads_at, info, fixed

    def names_identical(self, a, b):
        na, nb = self.info.name[a.ref], self.info.name[b.ref]
        return na >= 0 and na == nb

    def distinct(self, a, b):
        if geo.angular_deviation(a.perceived, b.perceived) > MERGABLE_ANGLE_DIFFERENCE:
            return True
        return not self.names_identical(a, b)

    def pair_mergeable(self, v, roads, i):
        k = len(roads)
        return (self.distinct(roads[(i - 1) % k], roads[i]) and self.can_merge(v, roads[i], roads[(i + 1) % k])
                and self.distinct(roads[(i + 1) % k], roads[(i + 2) % k]))

    def supports_merge(self, ra, rb):
        info = self.info
        if info.roundabout[ra] or info.roundabout[rb] or info.mode[ra] != info.mode[rb]:
            return False
        if info.name[ra] < 0 or info.name[ra] != info.name[rb]:
            return False
        return (info.motorway_class[ra], info.link[ra], info.ignorable[ra], info.priority[ra], info.lanes[ra]) == (
            info.motorway_class[rb], info.link[rb], info.ignorable[rb], info.priority[rb], info.lanes[rb])

    def can_merge(self, v, a, b):
        if geo.angular_deviation(a.perceived, b.perceived) > MERGABLE_ANGLE_DIFFERENCE:
            return False
        if (a.out_arc < 0) == (b.out_arc < 0) or not self.supports_merge(a.ref, b.ref):
            return False
        if a.self_loop or b.self_loop:
            return False
        if self.traffic_island(v, a, b):
            return True
        return self.same_direction(v, a, b)

    # ------------------------------------------------------------------ helpers
    def _road(self, r):
        return r.road if isinstance(r, _Shadow) else r

    def skip_degree_two(self, v, r):
        """``skipDegreeTwoNodes``: the node reached along ``r`` past intersections of two roads."""
        r = self._road(r)
        seen = {v}
        while True:
            c = r.end
            roads = self.roads_at.get(c, ())
            if len(roads) != 2 or c in seen:
                return c
            seen.add(c)
            back = roads[0] if (roads[0].end == v and roads[0].nb == r.last) else roads[1]
            r = roads[1] if back is roads[0] else roads[0]
            v = c

    def traffic_island(self, v, a, b):
        la, lb = self.skip_degree_two(v, a), self.skip_degree_two(v, b)
        if la != lb or la == v:
            return False

        def same_name_deg3(x):
            roads = self.roads_at.get(x, ())
            if len(roads) != 3:
                return False
            n0 = self.info.name[roads[0].ref]
            return n0 >= 0 and all(self.info.name[r.ref] == n0 for r in roads)

        din, dout = same_name_deg3(v), same_name_deg3(la)
        if not din and not dout:
            return False
        d = geo.distance_m(tuple(self.fixed[v]), tuple(self.fixed[la]))
        return d < 30 if (din and dout) else d < 15

    def _view(self, c, back):
        """The roads at ``c`` with their turn angles when arriving over ``back`` (close coordinates)."""
        entry = geo.reverse_bearing(back.close)
        out = []
        for r in self.roads_at[c]:
            ang = 0.0 if r is back else geo.angle_between(entry, r.close)
            out.append((ang, r))
        out.sort(key=lambda e: e[0])
        return out

    def walk(self, v, r, name_key, initial, max_length=120.0):
        coords, acc = [], 0.0
        start = v
        for _ in range(64):
            c = list(r.coords)
            length = geo.polyline_length(c)
            if length + acc > max_length:
                c = geo._trim_to_length(c, max_length - acc)
            coords.extend(c)
            acc = min(acc + length, max_length)
            if r.end == start:
                break
            roads = self.roads_at.get(r.end, ())
            back = next((x for x in roads if x.end == v and x.nb == r.last), None)
            if back is None or len(roads) <= 1:
                break
            view = self._view(r.end, back)
            nxt = self._select(view, name_key, initial)
            if nxt is None or acc >= max_length:
                break
            v, r = r.end, nxt
        return acc, coords

    def _select(self, view, name_key, initial):
        """``SelectStraightmostRoadByNameAndOnlyChoice`` (stopping on ambiguous turns)."""
        if len(view) == 1:
            return None
        nk = self.info.name_key
        count = sum(1 for _, r in view if nk[r.ref] == name_key)
        if count > 2:
            return None

        def score(e):
            return (180.0 if nk[e[1].ref] != name_key else 0.0) + geo.angular_deviation(e[0], 180.0)

        best = min(view[1:], key=score)
        closest = min(view, key=lambda e: geo.angular_deviation(e[0], 180.0))
        if ((len(view) == 2 or closest is best) and geo.angular_deviation(best[0], 180.0) < 40.0
                and geo.angular_deviation(initial, best[1].perceived) < 40.0):
            return best[1]
        only = nk[best[1].ref] == name_key and geo.angular_deviation(best[0], 180.0) < 100
        if geo.angular_deviation(180.0, best[0]) > 60.0:
            opp = min(view, key=lambda e: geo.angular_deviation(e[0], geo.reverse_bearing(best[0])))
            if geo.angular_deviation(best[0], opp[0]) > 180 - 25.0:
                return None
            if geo.angular_deviation(closest[0], 180.0) < 25.0:
                return None
        return best[1] if only else None

    def same_direction(self, v, a, b):
        a, b = self._road(a), self._road(b)
        nk = self.info.name_key
        la, ca = self.walk(v, a, nk[a.ref], a.perceived)
        if la <= 40:
            return False
        lb, cb = self.walk(v, b, nk[b.ref], a.perceived)
        if lb <= 40:
            return False
        again = ca[-1] == cb[-1]
        ca = geo._sample(ca, 120.0, 5)
        cb = geo._sample(cb, 120.0, 5)
        if len(ca) < 3 or len(cb) < 3:
            return False
        if not again:
            ca = ca[len(ca) // 3:]
            cb = cb[len(cb) // 3:]
        if not _parallel(ca, cb):
            return False
        d1 = min(geo.distance_m(geo._project(cb[i], cb[i + 1], ca[len(ca) // 2]), ca[len(ca) // 2])
                 for i in range(len(cb) - 1))
        d2 = min(geo.distance_m(geo._project(ca[i], ca[i + 1], cb[len(cb) // 2]), cb[len(cb) // 2])
                 for i in range(len(ca) - 1))
        lanes = 0.5 * (max(1, int(self.info.lanes[a.ref])) + max(1, int(self.info.lanes[b.ref]))) * 3.25
        return min(d1, d2) <= lanes + 12


def _parallel(ca, cb):
    """``areParallel``: the two regression lines differ by a slope of at most 0.2."""
    a0, a1 = geo._regression_raw(ca)
    b0, b1 = geo._regression_raw(cb)
    dax, day = a1[0] - a0[0], a1[1] - a0[1]
    dbx, dby = b1[0] - b0[0], b1[1] - b0[1]
    ba = math.radians(geo.bearing_deg((0, 0), (dax, day)) - 90.0)
    # rotate b's direction by the bearing of a (counter-clockwise, in degrees)
    x, y = dbx / 1e6, dby / 1e6
    rx = math.cos(ba) * x - math.sin(ba) * y
    ry = math.sin(ba) * x + math.cos(ba) * y
    if to_int(rx) == 0:
        return False
    return abs(to_int(ry) / to_int(rx)) < 0.20


def to_int(x):
    return geo.to_fixed(x)


def _bisector(a, b):
    a, b = math.radians(a), math.radians(b)
    avg = math.degrees(math.atan2(math.sin(a) + math.sin(b), math.cos(a) + math.cos(b)))
    return math.fmod(avg + 360.0, 360.0)


def _find_merged_bearing(roads, i, j, info, neighbor):
    lhs, rhs = roads[i], roads[j]
    entry = rhs if lhs.out_arc < 0 else lhs
    rev = geo.reverse_bearing(entry.perceived)
    closest = min(roads, key=lambda r: geo.angular_deviation(r.perceived, rev))
    opposite = geo.reverse_bearing(closest.perceived)
    merged = _bisector(rhs.perceived, lhs.perceived)
    if geo.angular_deviation(geo.angle_between(opposite, entry.perceived), 180.0) < MAXIMAL_ALLOWED_NO_TURN_DEVIATION:
        return False, entry.perceived
    if neighbor:
        tl = geo.angle_between(opposite, lhs.perceived)
        tr = geo.angle_between(opposite, rhs.perceived)
        tn = geo.angle_between(opposite, merged)
        if (geo.angular_deviation(tl, 180.0) < geo.angular_deviation(tn, 180.0)
                or geo.angular_deviation(tr, 180.0) < geo.angular_deviation(tn, 180.0)):
            return False, opposite
    return True, merged

