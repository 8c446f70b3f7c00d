"""CRP turns and the metric decoder (Delling, Kobitzsch, Werneck, "Customizing Driving Directions with
GPUs", Euro-Par 2014, sec. 2-3): the turn table against brute force, turn kinds (U-turns, NO/ONLY
restrictions, left/right from the geometry), profiles and named metrics against hand computations, the
decoder, and every error."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from gpuroute import RoadGraph, TurnRestrictions
from gpuroute.crp import metric as M
from gpuroute.crp.metric import (
    FORBIDDEN,
    LEFT,
    NO_TURN,
    RESTRICTED,
    RIGHT,
    STRAIGHT,
    UTURN,
    Metric,
    Profile,
    TurnTable,
    decode_turn_costs,
    turn_angles_deg,
)
from gpuroute.graph.constants import MAX_WEIGHT
from gpuroute.graph.turns import NO, ONLY


# ---------------------------------------------------------------------------------------------- helpers
def csr_graph(n, tail, head, weights=None, **kw):
    """A RoadGraph straight from the constructor (keeps self-loops and parallel arcs), arcs sorted by
    tail; returns the graph and the position of each input arc."""
    tail = np.asarray(tail, dtype=np.int64)
    head = np.asarray(head, dtype=np.int64)
    order = np.argsort(tail, kind="stable")
    pos = np.empty_like(order)
    pos[order] = np.arange(order.size)
    first_out = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(tail, minlength=n), out=first_out[1:])
    if weights is None:
        weights = {"w": np.ones(tail.size, dtype=np.int64)}
    weights = {k: np.asarray(v)[order] for k, v in weights.items()}
    attrs = {k: np.asarray(v)[order] for k, v in kw.pop("arc_attrs", {}).items()}
    return RoadGraph(first_out, head[order], weights, arc_attrs=attrs, **kw), pos


def brute_turns(g):
    """Every (a, b) with head[a] == tail[b], a-major then b ascending."""
    return [(a, b) for a in range(g.n_arcs) for b in range(g.n_arcs) if g.head[a] == g.tail[b]]


def brute_bearing(g, a):
    (lo1, la1), (lo2, la2) = g.coords[g.tail[a]], g.coords[g.head[a]]
    if g.is_planar:
        return math.atan2(lo2 - lo1, la2 - la1)
    p1, p2, dl = math.radians(la1), math.radians(la2), math.radians(lo2 - lo1)
    y = math.sin(dl) * math.cos(p2)
    return math.atan2(y, math.cos(p1) * math.sin(p2) - math.sin(p1) * math.cos(p2) * math.cos(dl))


def brute_kind(g, a, b, forbidden):
    if (a, b) in forbidden:
        return RESTRICTED
    if g.head[b] == g.tail[a]:
        return UTURN
    if g.coords is None:
        return STRAIGHT
    if any((g.coords[g.tail[x]] == g.coords[g.head[x]]).all() for x in (a, b)):
        return STRAIGHT
    d = math.degrees(brute_bearing(g, b) - brute_bearing(g, a))
    d = 180.0 - (180.0 - d) % 360.0  # (-180, 180]: a reversal onto another node is a right turn
    if abs(d) <= 30.0:
        return STRAIGHT
    return RIGHT if d > 0 else LEFT


def forbidden_set(g):
    if g.turns is None:
        return set()
    fi, fo = g.turns.forbidden_pairs(g.first_out, g.head)
    return set(zip(fi.tolist(), fo.tolist(), strict=True))


def check_against_brute_force(g):
    tt = TurnTable.build(g)
    pairs = brute_turns(g)
    assert tt.n_turns == len(pairs) and tt.n_arcs == g.n_arcs
    assert tt.first.dtype == np.int64 and tt.first.shape == (g.n_arcs + 1,)
    assert tt.out_arc.dtype == np.int32 and tt.kind.dtype == np.uint8
    got = list(zip(tt.in_arc().tolist(), tt.out_arc.tolist(), strict=True))
    assert got == pairs
    forb = forbidden_set(g)
    assert tt.kind.tolist() == [brute_kind(g, a, b, forb) for a, b in pairs]
    # turn_index inverts the table; non-turns give NO_TURN
    ins = np.array([p[0] for p in pairs], dtype=np.int64)
    outs = np.array([p[1] for p in pairs], dtype=np.int64)
    assert np.array_equal(tt.turn_index(ins, outs), np.arange(len(pairs)))
    non = [(a, b) for a in range(g.n_arcs) for b in range(g.n_arcs) if g.head[a] != g.tail[b]]
    if non:
        a, b = np.array(non).T
        assert (tt.turn_index(a, b) == NO_TURN).all()
    assert (tt.turn_index([-1, g.n_arcs, 0], [0, 0, g.n_arcs]) == NO_TURN).all()
    # reverse: grouped by out-arc, increasing turn id, pointing back to the forward arrays
    rev = tt.reverse()
    assert rev.first_in.dtype == np.int64 and rev.in_arc.dtype == np.int32 and rev.turn_id.dtype == np.int64
    for b in range(g.n_arcs):
        ids = rev.turn_id[rev.first_in[b]:rev.first_in[b + 1]].tolist()
        assert ids == [t for t, (_, o) in enumerate(pairs) if o == b]
        assert rev.in_arc[rev.first_in[b]:rev.first_in[b + 1]].tolist() == [pairs[t][0] for t in ids]
    assert tt.reverse() is rev
    return tt


# ---------------------------------------------------------------------------------------------- turn table
@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("coords", ["none", "lonlat", "planar"])
def test_turn_table_matches_brute_force(seed, coords):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 9))
    m = int(rng.integers(0, 25))
    tail, head = rng.integers(0, n, m), rng.integers(0, n, m)  # self-loops and parallel arcs included
    kw = {}
    if coords == "lonlat":
        kw["coords"] = np.column_stack((7.4 + rng.integers(0, 4, n) * 0.001,
                                        43.7 + rng.integers(0, 4, n) * 0.001))
    elif coords == "planar":
        kw = {"coords": rng.integers(0, 4, (n, 2)).astype(float), "coord_system": "planar"}
    g, pos = csr_graph(n, tail, head, **kw)
    if m and seed % 2:  # a few restrictions (one ONLY per in-arc at most, as forbidden_pairs assumes)
        pairs = brute_turns(g)
        pick = rng.choice(len(pairs), size=min(4, len(pairs)), replace=False) if pairs else []
        ins, outs, kinds, only_seen = [], [], [], set()
        for p in pick:
            a, b = pairs[p]
            k = ONLY if (rng.random() < 0.5 and a not in only_seen) else NO
            only_seen.update([a] if k == ONLY else [])
            ins.append(a)
            outs.append(b)
            kinds.append(k)
        g = RoadGraph(g.first_out, g.head, g.weights, coords=g.coords, coord_system=g.coord_system,
                      turns=TurnRestrictions(ins, outs, kinds))
    check_against_brute_force(g)


def test_empty_graphs():
    for g in (RoadGraph([0], [], {"w": []}), RoadGraph([0, 0, 0], [], {"w": []})):
        tt = TurnTable.build(g)
        assert tt.n_turns == 0 and tt.first.tolist() == [0] * (g.n_arcs + 1)
        assert tt.reverse().turn_id.size == 0
        assert decode_turn_costs(Metric.resolve(g, "time"), tt).size == 0


def test_uturns_and_self_loops_without_coordinates():
    # arcs: 0->1, 1->0, 1->2, 2->2 (self-loop), 2->1
    g, p = csr_graph(3, [0, 1, 1, 2, 2], [1, 0, 2, 2, 1])
    tt = check_against_brute_force(g)
    a01, a10, a12, a22, a21 = p
    kind = {(int(a), int(b)): int(k) for a, b, k in zip(tt.in_arc(), tt.out_arc, tt.kind, strict=True)}
    assert kind[(a01, a10)] == UTURN and kind[(a12, a21)] == UTURN  # 2-node loops
    assert kind[(a01, a12)] == STRAIGHT  # no coordinates: every other turn is straight
    assert kind[(a12, a22)] == STRAIGHT and kind[(a22, a21)] == STRAIGHT  # self-loops are ordinary turns
    assert kind[(a22, a22)] == UTURN  # head[b] == tail[a]
    assert tt.counts() == {"straight": 4, "left": 0, "right": 0, "uturn": 5, "restricted": 0}


def cross(coord_system="lonlat"):
    """A + intersection: centre 0, N 1, E 2, S 3, W 4, every road two-way."""
    if coord_system == "lonlat":
        c = [(7.42, 43.73), (7.42, 43.74), (7.43, 43.73), (7.42, 43.72), (7.41, 43.73)]
    else:
        c = [(0.0, 0.0), (0.0, 1.0), (1.0, 0.0), (0.0, -1.0), (-1.0, 0.0)]
    tail = [0, 1, 0, 2, 0, 3, 0, 4]
    head = [1, 0, 2, 0, 3, 0, 4, 0]
    g, p = csr_graph(5, tail, head, {"travel_time": [10, 11, 20, 21, 30, 31, 40, 41]}, coords=c,
                     coord_system=coord_system)
    arc = {(t, h): int(p[i]) for i, (t, h) in enumerate(zip(tail, head, strict=True))}
    return g, arc


@pytest.mark.parametrize("coord_system", ["lonlat", "planar"])
def test_left_and_right_on_a_cross_intersection(coord_system):
    g, arc = cross(coord_system)
    tt = check_against_brute_force(g)

    def kind(u, w):
        return int(tt.kind[tt.turn_index([arc[(u, 0)]], [arc[(0, w)]])[0]])

    # from the south (heading north): north straight, east right, west left, south U-turn
    assert (kind(3, 1), kind(3, 2), kind(3, 4), kind(3, 3)) == (STRAIGHT, RIGHT, LEFT, UTURN)
    # from the west (heading east): east straight, south right, north left
    assert (kind(4, 2), kind(4, 3), kind(4, 1)) == (STRAIGHT, RIGHT, LEFT)
    assert (kind(1, 4), kind(1, 2), kind(2, 1), kind(2, 3)) == (RIGHT, LEFT, RIGHT, LEFT)
    ang = turn_angles_deg(g, [arc[(3, 0)], arc[(3, 0)]], [arc[(0, 2)], arc[(0, 4)]])
    assert ang == pytest.approx([90.0, -90.0], abs=0.01)
    # 4 U-turns at the centre and 4 at the dead ends
    assert tt.counts() == {"straight": 4, "left": 4, "right": 4, "uturn": 8, "restricted": 0}


def test_thirty_degrees_is_straight():
    # planar: in-arc heading north, out-arcs at exactly 30 deg and at 31 deg either side
    c = [(0.0, -1.0), (0.0, 0.0), (math.sin(math.radians(30)), math.cos(math.radians(30))),
         (-math.sin(math.radians(31)), math.cos(math.radians(31)))]
    g, p = csr_graph(4, [0, 1, 1], [1, 2, 3], coords=c, coord_system="planar")
    tt = TurnTable.build(g)
    ang = turn_angles_deg(g, [p[0], p[0]], [p[1], p[2]])
    assert ang == pytest.approx([30.0, -31.0])
    assert tt.kind[tt.turn_index([p[0], p[0]], [p[1], p[2]])].tolist() == [STRAIGHT, LEFT]
    assert np.isnan(turn_angles_deg(RoadGraph(g.first_out, g.head, g.weights), [p[0]], [p[1]])).all()


def restricted_graph(turns):
    """Arcs (input positions): 0: 0->1, 1: 1->2, 2: 1->3, 3: 1->0, 4: 2->1; the restrictions name them."""
    t = TurnRestrictions(*zip(*turns, strict=True)) if turns else None
    return RoadGraph.from_arcs(4, [0, 1, 1, 1, 2], [1, 2, 3, 0, 1], {"w": [1, 1, 1, 1, 1]}, turns=t)


def kinds_from(g, tt, a_in_pos):
    """{(tail, head) of out-arc: kind} of the turns out of the input arc ``a_in_pos``."""
    tail, head = [0, 1, 1, 1, 2], [1, 2, 3, 0, 1]
    a = int(np.flatnonzero((g.tail == tail[a_in_pos]) & (g.head == head[a_in_pos]))[0])
    return {(int(g.tail[b]), int(g.head[b])): int(k)
            for b, k in zip(tt.out_arc[tt.first[a]:tt.first[a + 1]], tt.kind[tt.first[a]:tt.first[a + 1]],
                            strict=True)}


def test_no_restrictions():
    g = restricted_graph([(0, 1, NO), (0, 3, NO)])  # no 0->1->2, no U-turn at 1
    tt = check_against_brute_force(g)
    assert kinds_from(g, tt, 0) == {(1, 2): RESTRICTED, (1, 3): STRAIGHT, (1, 0): RESTRICTED}
    # other in-arcs untouched
    assert kinds_from(g, tt, 4) == {(1, 2): UTURN, (1, 3): STRAIGHT, (1, 0): STRAIGHT}
    assert tt.counts()["restricted"] == 2


def test_only_restrictions():
    g = restricted_graph([(0, 2, ONLY)])  # from 0->1 only onto 1->3
    tt = check_against_brute_force(g)
    assert kinds_from(g, tt, 0) == {(1, 2): RESTRICTED, (1, 3): STRAIGHT, (1, 0): RESTRICTED}
    assert kinds_from(g, tt, 4) == {(1, 2): UTURN, (1, 3): STRAIGHT, (1, 0): STRAIGHT}
    # ONLY and NO on the same pair: forbidden (NO wins); two ONLYs from one in-arc: both stay allowed
    g = restricted_graph([(0, 2, ONLY), (0, 2, NO)])
    assert kinds_from(g, TurnTable.build(g), 0) == {(1, 2): RESTRICTED, (1, 3): RESTRICTED,
                                                    (1, 0): RESTRICTED}
    g = restricted_graph([(0, 2, ONLY), (0, 1, ONLY)])
    assert kinds_from(g, TurnTable.build(g), 0) == {(1, 2): STRAIGHT, (1, 3): STRAIGHT, (1, 0): RESTRICTED}


def test_turn_table_checks_its_arrays():
    with pytest.raises(ValueError, match="CSR offsets"):
        TurnTable([0, 2], [1], [0])
    with pytest.raises(ValueError, match="kind has shape"):
        TurnTable([0, 1], [1], [0, 0])


# ---------------------------------------------------------------------------------------------- metrics
def osm_like():
    """Four arcs on a path 0-1-2-3-4 with OSM-style attributes (classes primary, residential)."""
    g, p = csr_graph(5, [0, 1, 2, 3], [1, 2, 3, 4],
                     {"travel_time": [1, 2, 3, 4], "distance": [100, 36, 1, 1000]},
                     arc_attrs={"length_m": [100.0, 36.0, 0.0, 1000.0],
                                "road_class": np.array([0, 1, 1, 1], np.int8)},
                     meta={"road_classes": ["primary", "residential"]})
    return g


def test_profile_arithmetic():
    g = osm_like()
    prof = Profile({"primary": 50, "residential": 30}, {"left": 2.5, "uturn": 100, "right": 0.04}, name="car")
    m = Metric.resolve(g, prof)
    # 100 m at 50 km/h = 7.2 s; 36 m at 30 km/h = 4.32 s -> 44 ds (ceil); 0 m -> 1; 1000 m at 30 = 120 s
    assert m.arc_cost.tolist() == [72, 44, 1, 1200] and m.arc_cost.dtype == np.int32
    assert m.turn_penalty.tolist() == [0, 25, 0, 1000] and m.turn_penalty.dtype == np.int32
    assert (m.name, m.units, m.turn_cost) == ("car", "ds", None)
    m2 = Metric.resolve(g, Profile({"primary": 50, "default": 36}))
    assert m2.arc_cost.tolist() == [72, 36, 1, 1000]  # 36 km/h = 10 m/s exactly


def test_profile_json_roundtrip(tmp_path):
    prof = Profile({"primary": 50, "default": 20.5}, {"uturn": 100}, name="slow")
    path = tmp_path / "p.json"
    path.write_text(json.dumps(prof.to_dict()))
    assert Profile.load(path) == prof
    assert Profile.from_dict({"speeds_kmh": {"primary": 1}}).name == "profile"
    path.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        Profile.load(path)
    path.write_text(json.dumps({"speeds_kmh": {"primary": -1}}))
    with pytest.raises(ValueError, match=r"p\.json.*'primary'"):
        Profile.load(path)


@pytest.mark.parametrize("speeds, penalties, match", [
    ({"primary": 0}, {}, "road class 'primary'"),
    ({"primary": -5}, {}, "road class 'primary'"),
    ({"primary": float("nan")}, {}, "road class 'primary'"),
    ({"primary": float("inf")}, {}, "road class 'primary'"),
    ({"primary": "fast"}, {}, "road class 'primary'"),
    ({"primary": True}, {}, "road class 'primary'"),
    ({}, {}, "non-empty"),
    ({"primary": 5}, {"left": -1}, "turn type 'left'"),
    ({"primary": 5}, {"uturn": float("nan")}, "turn type 'uturn'"),
    ({"primary": 5}, {"restricted": 1}, "unknown turn type 'restricted'"),
    ({"primary": 5}, {"sharp": 1}, "unknown turn type 'sharp'"),
])
def test_profile_errors(speeds, penalties, match):
    with pytest.raises(ValueError, match=match):
        Profile(speeds, penalties)


def test_profile_from_dict_errors():
    with pytest.raises(ValueError, match="JSON object"):
        Profile.from_dict([1])
    with pytest.raises(ValueError, match="unknown profile key.*speeds"):
        Profile.from_dict({"speeds": {"primary": 1}})
    with pytest.raises(ValueError, match="needs 'speeds_kmh'"):
        Profile.from_dict({"name": "x"})


def test_profile_against_graph_errors():
    g = osm_like()
    with pytest.raises(ValueError, match=r"unknown road class\(es\) \['motorway'\]"):
        Metric.resolve(g, Profile({"primary": 50, "residential": 30, "motorway": 100}))
    with pytest.raises(ValueError, match=r"no speed for road class\(es\) \['residential'\]"):
        Metric.resolve(g, Profile({"primary": 50}))
    with pytest.raises(ValueError, match="has no length_m, road_class"):
        Metric.resolve(RoadGraph.from_arcs(2, [0], [1], {"w": [1]}), Profile({"primary": 50}))
    bad, _ = csr_graph(2, [0], [1], arc_attrs={"length_m": [1.0], "road_class": [5]},
                       meta={"road_classes": ["primary"]})
    with pytest.raises(ValueError, match="road_class of arc 0 is 5"):
        Metric.resolve(bad, Profile({"primary": 50}))
    bad, _ = csr_graph(3, [0, 1], [1, 2], arc_attrs={"length_m": [1.0, -3.0], "road_class": [0, 0]},
                       meta={"road_classes": ["primary"]})
    with pytest.raises(ValueError, match="length_m of arc 1 is -3.0"):
        Metric.resolve(bad, Profile({"primary": 50}))
    huge, _ = csr_graph(2, [0], [1], arc_attrs={"length_m": [1e9], "road_class": [0]},
                        meta={"road_classes": ["primary"]})
    with pytest.raises(ValueError, match="travel time of arc 0.*MAX_WEIGHT"):
        Metric.resolve(huge, Profile({"primary": 0.001}))


def test_named_metrics():
    g = osm_like()
    d, t, tu = (Metric.resolve(g, s) for s in ("distance", "time", "time-uturn"))
    assert (d.arc_cost.tolist(), d.units, d.turn_penalty.tolist()) == ([100, 36, 1, 1000], "m", [0, 0, 0, 0])
    assert (t.arc_cost.tolist(), t.units, t.turn_penalty.tolist()) == ([1, 2, 3, 4], "ds", [0, 0, 0, 0])
    assert (tu.units, tu.turn_penalty.tolist(), tu.name) == ("ds", [0, 0, 0, 1000], "time-uturn")  # 100 s
    # distance from length_m (rounded, >= 1) when there is no distance weight; else the default weight
    g2, _ = csr_graph(3, [0, 1], [1, 2], {"travel_time": [5, 6]}, arc_attrs={"length_m": [0.2, 7.6]})
    d2 = Metric.resolve(g2, "distance")
    assert (d2.arc_cost.tolist(), d2.units) == ([1, 8], "m")
    g3 = RoadGraph.from_arcs(2, [0], [1], {"w": [7]}, units={"w": "s"})
    assert Metric.resolve(g3, "distance").arc_cost.tolist() == [7] and Metric.resolve(g3, "time").units == "s"
    # the 100 s U-turn penalty in the time unit of the weight
    for unit, pen in (("s", 100), ("ms", 100_000), ("dimacs-t", 27_778), ("ds", 1000), ("furlongs", 1000),
                      (None, 1000)):
        gu = RoadGraph.from_arcs(2, [0], [1], {"w": [7]}, units={"w": unit} if unit else None)
        assert Metric.resolve(gu, "time-uturn").turn_penalty[UTURN] == pen, unit


def test_array_and_tuple_metrics():
    g = osm_like()
    tt = TurnTable.build(g)
    m = Metric.resolve(g, np.array([3, 4, 5, 6]))
    assert (m.arc_cost.tolist(), m.turn_penalty.tolist(), m.name) == ([3, 4, 5, 6], [0, 0, 0, 0], "custom")
    m = Metric.resolve(g, ([3.0, 4, 5, 6], {"uturn": 7, "left": 2}))
    assert m.turn_penalty.tolist() == [0, 2, 0, 7]
    m = Metric.resolve(g, ([3, 4, 5, 6], {}, np.arange(tt.n_turns)), turns=tt)
    assert m.turn_cost.tolist() == list(range(tt.n_turns))
    assert Metric.resolve(g, m, turns=tt) is m


@pytest.mark.parametrize("spec, match", [
    ("speed", "unknown metric 'speed'"),
    (np.array([1, 2, 3]), r"shape \(3,\), expected \(4,\)"),
    (np.array([1, 2, 0, 4]), "cost of arc 2 is 0"),
    (np.array([1, -2, 3, 4]), "cost of arc 1 is -2"),
    (np.array([1, 2, 3.5, 4]), "cost of arc 2 is 3.5"),
    (np.array([1, 2, 3, np.nan]), "cost of arc 3 is nan"),
    (np.array([1, 2, 3, 2**31]), f"cost of arc 3 .*{MAX_WEIGHT}"),
    (np.array([True, True, True, True]), "dtype bool"),
    (([1, 2, 3, 4],), "tuple"),
    (([1, 2, 3, 4], {"sharp": 1}), "unknown turn type 'sharp'"),
    (([1, 2, 3, 4], {"uturn": -1}), "turn type 'uturn' is -1"),
    (([1, 2, 3, 4], {"uturn": 1.5}), "turn type 'uturn' is 1.5"),
    (([1, 2, 3, 4], [1, 2]), "penalties must be a dict"),
    (([1, 2, 3, 4], {}, [0, 1]), "needs the graph's TurnTable"),
    (Metric([1, 2, 3]), "has 3 arc costs"),
])
def test_resolve_errors(spec, match):
    with pytest.raises(ValueError, match=match):
        Metric.resolve(osm_like(), spec)


def test_resolve_and_constructor_errors():
    g = osm_like()
    tt = TurnTable.build(g)
    with pytest.raises(ValueError, match=rf"turn_cost has shape \(2,\), expected \({tt.n_turns},\)"):
        Metric.resolve(g, ([1, 2, 3, 4], {}, [0, 1]), turns=tt)
    with pytest.raises(TypeError, match="got dict"):
        Metric.resolve(g, {"uturn": 1})
    with pytest.raises(ValueError, match="1-D"):
        Metric([[1, 2]])
    with pytest.raises(ValueError, match="turn_cost of turn 1 is -2"):
        Metric([1, 2], turn_cost=[0, -2])
    with pytest.raises(ValueError, match="1-D integer array"):
        Metric([1, 2], turn_cost=[0.5])
    with pytest.raises(ValueError, match=r"turn_penalty has shape \(3,\)"):
        Metric([1, 2], [0, 0, 0])
    with pytest.raises(ValueError, match="turn type 'right' is -4"):
        Metric([1, 2], [0, 0, -4, 0])
    with pytest.raises(ValueError, match="must be integers"):
        Metric([1, 2], [0, 0.5, 0, 0])


def test_fingerprint():
    a = Metric([1, 2, 3], [0, 0, 0, 10], units="ds")
    assert a.fingerprint() == Metric(np.array([1, 2, 3], np.int64), [0, 0, 0, 10], units="ds").fingerprint()
    others = [Metric([1, 2, 4], [0, 0, 0, 10], units="ds"), Metric([1, 2, 3], [0, 0, 0, 11], units="ds"),
              Metric([1, 2, 3], [0, 0, 0, 10], units="m"),
              Metric([1, 2, 3], [0, 0, 0, 10], units="ds", turn_cost=[0])]
    fps = {a.fingerprint(), *(o.fingerprint() for o in others)}
    assert len(fps) == 5 and all(len(f) == 16 for f in fps)


# ---------------------------------------------------------------------------------------------- decoder
def test_decoder_on_the_cross_with_restrictions():
    g, arc = cross()
    s0, n0 = arc[(3, 0)], arc[(1, 0)]
    g = RoadGraph(g.first_out, g.head, g.weights, coords=g.coords,
                  turns=TurnRestrictions([s0, n0], [arc[(0, 4)], arc[(0, 2)]], [NO, ONLY]))
    tt = TurnTable.build(g)
    m = Metric.resolve(g, (g.weights["travel_time"], {"left": 5, "right": 2, "uturn": 100}))
    c = decode_turn_costs(m, tt)
    assert c.dtype == np.int64 and c.shape == (tt.n_turns,)

    def cost(u, w):
        return int(c[tt.turn_index([arc[(u, 0)]], [arc[(0, w)]])[0]])

    w = {k: int(g.weights["travel_time"][v]) for k, v in arc.items()}
    assert cost(3, 1) == w[(0, 1)]  # straight: free
    assert cost(3, 2) == 2 + w[(0, 2)]  # right
    assert cost(3, 4) == FORBIDDEN  # NO left
    assert cost(3, 3) == 100 + w[(0, 3)]  # U-turn
    assert cost(1, 2) == w[(0, 2)] + 5  # the ONLY turn (left from the north)
    assert cost(1, 3) == cost(1, 4) == cost(1, 1) == FORBIDDEN
    assert cost(4, 1) == 5 + w[(0, 1)]
    # brute force over every turn
    pen = {STRAIGHT: 0, LEFT: 5, RIGHT: 2, UTURN: 100}
    expect = [FORBIDDEN if k == RESTRICTED else pen[int(k)] + w[(int(g.tail[b]), int(g.head[b]))]
              for b, k in zip(tt.out_arc, tt.kind, strict=True)]
    assert c.tolist() == expect
    # per-turn override: replaces the type penalty, FORBIDDEN closes, a restricted turn stays closed
    tc = np.zeros(tt.n_turns, dtype=np.int64)
    t_sn, t_sw = tt.turn_index([s0, s0], [arc[(0, 1)], arc[(0, 4)]])
    tc[t_sn], tc[t_sw] = FORBIDDEN, 7
    c2 = decode_turn_costs(Metric(m.arc_cost, m.turn_penalty, turn_cost=tc), tt)
    assert c2[t_sn] == FORBIDDEN and c2[t_sw] == FORBIDDEN
    ok = (tt.kind != RESTRICTED) & (tc == 0)
    assert np.array_equal(c2[ok], m.arc_cost[tt.out_arc[ok]])


def test_decoder_errors():
    g, _ = cross()
    tt = TurnTable.build(g)
    with pytest.raises(ValueError, match="metric 'custom' has 3 arcs but the turn table has 8"):
        decode_turn_costs(Metric([1, 2, 3], name="custom"), tt)
    with pytest.raises(ValueError, match=f"has 2 turn costs but the turn table has {tt.n_turns}"):
        decode_turn_costs(Metric(np.ones(8, np.int64), turn_cost=[0, 0]), tt)


def test_kind_constants():
    assert (M.STRAIGHT, M.LEFT, M.RIGHT, M.UTURN, M.RESTRICTED, M.FORBIDDEN) == (0, 1, 2, 3, 4, -1)
    assert M.KIND_NAMES == {0: "straight", 1: "left", 2: "right", 3: "uturn", 4: "restricted"}


# ---------------------------------------------------------------------------------------------- Monaco
def test_monaco_restrictions_are_in_the_table():
    pytest.importorskip("osmium")
    from gpuroute import datasets

    g = datasets.load("monaco")
    assert len(g.turns) > 0 and g.turns.counts()["only"] > 0 and g.turns.counts()["no"] > 0
    tt = TurnTable.build(g)
    t = tt.turn_index(g.turns.in_arc, g.turns.out_arc)
    assert (t != NO_TURN).all()
    no = g.turns.kind == NO
    assert (tt.kind[t[no]] == RESTRICTED).all()
    no_pairs = set(zip(g.turns.in_arc[no].tolist(), g.turns.out_arc[no].tolist(), strict=True))
    for a, b in zip(g.turns.in_arc[~no], g.turns.out_arc[~no], strict=True):
        lo, hi = tt.first[a], tt.first[a + 1]
        for tid in range(lo, hi):
            if tt.out_arc[tid] == b:
                assert (tt.kind[tid] == RESTRICTED) == ((int(a), int(b)) in no_pairs)
            else:
                assert tt.kind[tid] == RESTRICTED
    # exactly the project's forbidden pairs (Monaco has one ONLY per in-arc at most)
    fi, fo = g.turns.forbidden_pairs(g.first_out, g.head)
    restricted = np.flatnonzero(tt.kind == RESTRICTED)
    assert np.array_equal(np.sort(tt.turn_index(fi, fo)), restricted)
    # and every turn of the graph, by brute force over the via nodes
    in_arc = tt.in_arc()
    assert np.array_equal(g.head[in_arc], g.tail[tt.out_arc])
    assert tt.n_turns == int(np.diff(g.first_out)[g.head].sum())
    # decoding a profile on the real graph: forbidden exactly where restricted, else >= the out-arc cost
    prof = Profile({"default": 30, "motorway": 90, "primary": 50}, {"uturn": 100, "left": 3})
    m = Metric.resolve(g, prof)
    c = decode_turn_costs(m, tt)
    assert np.array_equal(c == FORBIDDEN, tt.kind == RESTRICTED)
    assert (c[c != FORBIDDEN] >= m.arc_cost[tt.out_arc[c != FORBIDDEN]]).all()
