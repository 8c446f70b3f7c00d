"""OSM loader: car profile rules, graph construction on a hand-written extract, arc attributes, turn
restrictions, real extracts."""
import collections
import os
import time

import numpy as np
import pytest
from conftest import shared_data

osmium = pytest.importorskip("osmium")

from gpuroute.datasets import path_of  # noqa: E402
from gpuroute.graph.errors import ParseError  # noqa: E402
from gpuroute.graph.turns import NO, ONLY  # noqa: E402
from gpuroute.io.osm import CAR, EARTH_RADIUS_M, PROFILES, load_osm, parse_restriction  # noqa: E402

MONACO = path_of("monaco")
#: The extracts of the shared real data (``osm/`` there), by name.
SHARED_EXTRACTS = {"andorra": "andorra.osm.pbf", "helsinki": "Helsinki.osm.pbf"}
STEP_M = EARTH_RADIUS_M * np.radians(0.001)  # 0.001 degree of latitude, ~111.2 m


# ---------------------------------------------------------------- profile rules
@pytest.mark.parametrize(
    "value, kmh",
    [("50", 50), ("50 km/h", 50), ("30 mph", 30 * 1.609344), ("none", 140), ("DE:urban", 50),
     ("FR:rural", 80), ("RU:living_street", 20), ("de:motorway", 0), ("signals", 0), ("", 0), (None, 0),
     ("7,5", 7.5)],
)
def test_parse_maxspeed(value, kmh):
    assert CAR.parse_maxspeed(value) == pytest.approx(kmh)


@pytest.mark.parametrize(
    "tags, fwd, bwd",
    [
        ({"highway": "residential"}, 25, 25),
        ({"highway": "motorway"}, 90, 0),  # implied oneway
        ({"highway": "motorway", "oneway": "no"}, 90, 90),
        ({"highway": "motorway_link"}, 45, 45),
        ({"highway": "primary", "oneway": "yes"}, 65, 0),
        ({"highway": "primary", "oneway": "1"}, 65, 0),
        ({"highway": "primary", "oneway": "true"}, 65, 0),
        ({"highway": "secondary", "oneway": "-1"}, 0, 55),
        ({"highway": "tertiary", "junction": "roundabout"}, 40, 0),
        ({"highway": "tertiary", "junction": "roundabout", "oneway": "no"}, 40, 40),
        ({"highway": "primary", "maxspeed": "50"}, 40, 40),  # x 0.8, as OSRM
        ({"highway": "primary", "maxspeed": "50", "maxspeed:backward": "30"}, 40, 24),
        ({"highway": "living_street"}, 10, 10),
        ({"highway": "service"}, 15, 15),
        ({"highway": "service", "service": "emergency_access"}, 0, 0),
        ({"highway": "residential", "access": "private"}, 0, 0),
        ({"highway": "residential", "access": "no"}, 0, 0),
        ({"highway": "residential", "access": "destination"}, 25, 25),
        ({"highway": "residential", "access": "no", "motorcar": "yes"}, 25, 25),  # most specific tag wins
        ({"highway": "residential", "access": "yes", "motor_vehicle": "no"}, 0, 0),
        ({"highway": "residential", "area": "yes"}, 0, 0),
        ({"highway": "residential", "oneway": "reversible"}, 0, 0),
        ({"highway": "footway"}, 0, 0),
        ({"highway": "cycleway"}, 0, 0),
        ({"highway": "steps"}, 0, 0),
        ({"highway": "construction"}, 0, 0),
        ({"building": "yes"}, 0, 0),
    ],
)
def test_car_way_speeds(tags, fwd, bwd):
    f, b = CAR.way_speeds(tags)
    assert (f, b) == (pytest.approx(fwd), pytest.approx(bwd))


def test_profiles_registry():
    """The native profile is car-basic; car/bicycle/foot are OSRM's Lua profiles (tests/io/test_lua_extract.py)."""
    assert PROFILES["car-basic"] is CAR and CAR.name == "car-basic"
    assert "car" not in PROFILES
    with pytest.raises(KeyError, match="known profiles"):
        load_osm(MONACO, profile="hovercraft", progress=False)


# ---------------------------------------------------------------- a hand-written extract
def node(i, lat, lon):
    return f'<node id="{i}" version="1" lat="{lat:.7f}" lon="{lon:.7f}"/>'


def way(i, refs, **tags):
    nds = "".join(f'<nd ref="{r}"/>' for r in refs)
    tg = "".join(f'<tag k="{k}" v="{v}"/>' for k, v in tags.items())
    return f'<way id="{i}" version="1">{nds}{tg}</way>'


MEMBER_TYPES = {"n": "node", "w": "way", "r": "relation"}


def relation(i, members, tags):
    """members: (type "n"/"w", ref, role); tags: dict (keys such as "restriction:hgv" are not names)."""
    ms = "".join(f'<member type="{MEMBER_TYPES[t]}" ref="{r}" role="{role}"/>' for t, r, role in members)
    tg = "".join(f'<tag k="{k}" v="{v}"/>' for k, v in tags.items())
    return f'<relation id="{i}" version="1">{ms}{tg}</relation>'


def write_osm(path, items):
    path.write_text('<?xml version="1.0" encoding="UTF-8"?>\n<osm version="0.6" generator="test">\n'
                    + "\n".join(items) + "\n</osm>\n")
    return str(path)


@pytest.fixture
def tiny_osm(tmp_path):
    # nodes 1..9 on a north-south line, 0.001 degree apart; node 99 is referenced but missing
    nodes = [node(i, 43.7 + 0.001 * i, 7.4) for i in range(1, 10)]
    ways = [
        way(10, [1, 2], highway="residential"),
        way(11, [2, 3], highway="primary", oneway="yes"),
        way(12, [3, 4], highway="secondary", oneway="-1"),
        way(13, [4, 5], highway="motorway"),
        way(14, [5, 6], highway="residential", maxspeed="30 mph"),
        way(15, [6, 7, 99, 8], highway="residential"),  # 7-99 and 99-8 cannot be placed
        way(16, [1, 9], highway="footway"),
        way(17, [8, 9], highway="service", access="private"),
        way(18, [2, 3], highway="living_street"),  # parallel to 11, slower, two-way
    ]
    p = tmp_path / "tiny.osm"
    p.write_text('<?xml version="1.0" encoding="UTF-8"?>\n<osm version="0.6" generator="test">\n'
                 + "\n".join(nodes + ways) + "\n</osm>\n")
    return str(p)


def test_tiny_extract(tiny_osm):
    g = load_osm(tiny_osm, profile="car-basic", progress=False)
    ids = g.node_ids.tolist()
    assert ids == [1, 2, 3, 4, 5, 6, 7]  # 8 and 9 only sit on dropped segments / non-car ways
    assert g.weight_names == ["travel_time", "distance"]
    assert {k: (u.symbol, u.quantity, u.scale) for k, u in g.units.items()} == {
        "travel_time": ("ds", "time", 0.1), "distance": ("m", "length", 1.0)}
    np.testing.assert_allclose(g.coords[0], [7.4, 43.701])
    arcs = {(ids[g.tail[a]], ids[g.head[a]]): (int(g.weight("travel_time")[a]), int(g.weight("distance")[a]))
            for a in range(g.n_arcs)}
    d = round(STEP_M)

    def tt(kmh):
        return round(STEP_M * 36 / kmh)

    assert set(arcs) == {(1, 2), (2, 1), (2, 3), (3, 2), (4, 3), (4, 5), (5, 6), (6, 5), (6, 7), (7, 6)}
    assert arcs[(1, 2)] == (tt(25), d)
    assert arcs[(2, 3)] == (tt(65), d)  # the primary oneway beats the living street
    assert arcs[(3, 2)] == (tt(10), d)  # only the living street goes back
    assert arcs[(4, 3)] == (tt(55), d)  # oneway=-1
    assert arcs[(4, 5)] == (tt(90), d)  # motorway: implied oneway
    assert arcs[(5, 6)] == (tt(30 * 1.609344 * 0.8), d)
    assert g.meta["segments_missing_location"] == 2
    assert g.meta["parallel_arcs_dropped"] == 1
    assert g.meta["profile"] == "car-basic"
    assert g.name == "tiny"


def test_missing_and_corrupt_files(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_osm(str(tmp_path / "absent.osm.pbf"), profile="car-basic", progress=False)
    data = open(MONACO, "rb").read()
    cut = tmp_path / "cut.osm.pbf"
    cut.write_bytes(data[: len(data) // 3])
    with pytest.raises(ParseError, match="cannot read OSM file") as ei:
        load_osm(str(cut), profile="car-basic", progress=False)
    assert ei.value.path == str(cut)


# ---------------------------------------------------------------- one radius, arc attributes
def test_haversine_uses_the_mean_earth_radius(tmp_path):
    # One Earth radius everywhere: A* and gpuroute.paths use the IUGG mean radius 6,371,008.8 m; the
    # loader used OSRM's 6,372,797.56 m, so a 0.1-degree segment measured 11,123 m instead of 11,120 m.
    from gpuroute import geo
    from gpuroute.io import osm as osm_mod

    assert EARTH_RADIUS_M == geo.EARTH_RADIUS_M == 6371008.8
    assert osm_mod.haversine_m is geo.haversine_m  # the one haversine, not a copy
    p = write_osm(tmp_path / "long.osm", [node(1, 43.7, 7.4), node(2, 43.8, 7.4), way(10, [1, 2], highway="primary")])
    g = load_osm(p, profile="car-basic", progress=False)
    exact = 6371008.8 * np.radians(0.1)  # due north: the arc of a meridian
    assert g.arc_attrs["length_m"] == pytest.approx([exact, exact], rel=1e-12)
    assert g.weight("distance").tolist() == [round(exact)] * 2 == [11120, 11120]


def test_arc_attributes(tiny_osm):
    g = load_osm(tiny_osm, profile="car-basic", progress=False)
    ids = g.node_ids
    assert set(g.arc_attrs) == {"way_id", "road_class", "speed_kmh", "length_m"}
    assert g.arc_attrs["way_id"].dtype == np.int64 and g.arc_attrs["road_class"].dtype == np.int8
    assert g.arc_attrs["speed_kmh"].dtype == np.float32 and g.arc_attrs["length_m"].dtype == np.float64
    assert g.meta["road_classes"] == list(CAR.highway_speeds)
    assert (g.attr_units["length_m"].symbol, g.attr_units["length_m"].quantity) == ("m", "length")
    assert g.attr_units["speed_kmh"].symbol == "km/h" and g.attr_units["road_class"].quantity == "other"
    got = {(int(ids[g.tail[a]]), int(ids[g.head[a]])):
           (int(g.arc_attrs["way_id"][a]), g.meta["road_classes"][g.arc_attrs["road_class"][a]],
            float(g.arc_attrs["speed_kmh"][a])) for a in range(g.n_arcs)}
    assert got[(1, 2)] == (10, "residential", 25.0)
    assert got[(2, 3)] == (11, "primary", 65.0)
    assert got[(3, 2)] == (18, "living_street", 10.0)
    assert got[(4, 3)] == (12, "secondary", 55.0)
    assert got[(5, 6)] == (14, "residential", pytest.approx(30 * 1.609344 * 0.8, rel=1e-6))
    np.testing.assert_allclose(g.arc_attrs["length_m"], STEP_M, rtol=1e-9)
    # every weight is the arc's own: computed from its length and speed
    tt = np.maximum(1, np.rint(g.arc_attrs["length_m"] * 36 / g.arc_attrs["speed_kmh"].astype(np.float64)))
    np.testing.assert_array_equal(g.weight("travel_time"), tt)
    np.testing.assert_array_equal(g.weight("distance"), np.maximum(1, np.rint(g.arc_attrs["length_m"])))


def test_parallel_ways_keep_one_real_arc(tmp_path):
    # Ways 300 (residential, 25 km/h, read first) and 301 (primary with maxspeed 50: 40 km/h) both join
    # nodes 10 and 11. The kept arc is ONE way's arc, the faster 301 (lightest travel time), with its
    # travel time, distance, way id, road class and speed. A no_left_turn from the dropped 300 moves to
    # the kept arc (same turn between the same nodes) instead of vanishing.
    items = [node(10, 43.7, 7.4), node(11, 43.7, 7.401), node(12, 43.701, 7.401),
             way(300, [10, 11], highway="residential"), way(301, [10, 11], highway="primary", maxspeed="50"),
             way(302, [11, 12], highway="residential"),
             relation(400, [("w", 300, "from"), ("n", 11, "via"), ("w", 302, "to")],
                      {"type": "restriction", "restriction": "no_left_turn"})]
    g = load_osm(write_osm(tmp_path / "par.osm", items), profile="car-basic", progress=False)
    ids = g.node_ids.tolist()
    assert g.meta["parallel_arcs_dropped"] == 2  # one per direction
    length = g.arc_attrs["length_m"]
    for u, v in ((10, 11), (11, 10)):
        a = [k for k in range(g.n_arcs) if (ids[g.tail[k]], ids[g.head[k]]) == (u, v)]
        assert len(a) == 1
        a = a[0]
        assert int(g.arc_attrs["way_id"][a]) == 301
        assert g.meta["road_classes"][g.arc_attrs["road_class"][a]] == "primary"
        assert float(g.arc_attrs["speed_kmh"][a]) == pytest.approx(40.0)
        assert int(g.weight("travel_time")[a]) == round(length[a] * 36 / 40)
        assert int(g.weight("distance")[a]) == round(length[a])
    t = g.turns
    assert len(t) == 1 and t.meta["applied"] == 1 and t.meta.get("dropped", 0) == 0
    assert (ids[g.tail[t.in_arc[0]]], ids[g.head[t.in_arc[0]]], ids[g.head[t.out_arc[0]]]) == (10, 11, 12)
    assert int(g.arc_attrs["way_id"][t.in_arc[0]]) == 301 and t.kind.tolist() == [NO]


# ---------------------------------------------------------------- turn restrictions
@pytest.mark.parametrize(
    "tags, members, expected",
    [
        ({"type": "restriction", "restriction": "no_left_turn"}, [("w", 1, "from"), ("n", 5, "via"), ("w", 2, "to")],
         ("no_left_turn", (1,), 5, (2,))),
        ({"type": "restriction", "restriction": " Only_Straight_On "}, [("w", 1, "from"), ("n", 5, "via"), ("w", 2, "to")],
         ("only_straight_on", (1,), 5, (2,))),
        # the most specific vehicle key wins over the plain one
        ({"type": "restriction", "restriction": "no_left_turn", "restriction:motorcar": "only_right_turn"},
         [("w", 1, "from"), ("n", 5, "via"), ("w", 2, "to")], ("only_right_turn", (1,), 5, (2,))),
        ({"type": "restriction", "restriction:motor_vehicle": "no_u_turn"},
         [("w", 1, "from"), ("n", 5, "via"), ("w", 1, "to")], ("no_u_turn", (1,), 5, (1,))),
        ({"type": "restriction:motorcar", "restriction:motorcar": "no_exit"},
         [("w", 1, "from"), ("n", 5, "via"), ("w", 2, "to"), ("w", 3, "to")], ("no_exit", (1,), 5, (2, 3))),
        ({"type": "restriction", "restriction": "no_entry"},
         [("w", 1, "from"), ("w", 3, "from"), ("n", 5, "via"), ("w", 2, "to")], ("no_entry", (1, 3), 5, (2,))),
        ({"type": "restriction", "restriction:hgv": "no_left_turn"},
         [("w", 1, "from"), ("n", 5, "via"), ("w", 2, "to")], ("not_for_profile", None, None, None)),
        ({"type": "restriction:bus", "restriction:bus": "no_left_turn", "restriction": "no_left_turn"},
         [("w", 1, "from"), ("n", 5, "via"), ("w", 2, "to")], ("not_for_profile", None, None, None)),
        ({"type": "restriction", "restriction": "no_left_turn", "except": "bicycle; motorcar"},
         [("w", 1, "from"), ("n", 5, "via"), ("w", 2, "to")], ("except_skipped", None, None, None)),
        ({"type": "restriction", "restriction": "no_left_turn", "except": "psv;bicycle"},
         [("w", 1, "from"), ("n", 5, "via"), ("w", 2, "to")], ("no_left_turn", (1,), 5, (2,))),
        ({"type": "restriction", "restriction": "give_way"},
         [("w", 1, "from"), ("n", 5, "via"), ("w", 2, "to")], ("unknown_value", None, None, None)),
        ({"type": "restriction", "restriction": "no_left_turn"},
         [("w", 1, "from"), ("w", 7, "via"), ("w", 2, "to")], ("unsupported_via_way", None, None, None)),
        ({"type": "restriction", "restriction": "no_left_turn"}, [("w", 1, "from"), ("n", 5, "via")],
         ("malformed", None, None, None)),
        ({"type": "restriction", "restriction": "no_left_turn"},
         [("w", 1, "from"), ("n", 5, "via"), ("n", 6, "via"), ("w", 2, "to")], ("malformed", None, None, None)),
        ({"type": "restriction", "restriction": "only_left_turn"},
         [("w", 1, "from"), ("n", 5, "via"), ("w", 2, "to"), ("w", 3, "to")], ("malformed", None, None, None)),
        ({"type": "restriction", "restriction": "no_left_turn"},
         [("n", 1, "from"), ("n", 5, "via"), ("w", 2, "to")], ("malformed", None, None, None)),
    ],
)
def test_parse_restriction(tags, members, expected):
    assert parse_restriction(tags, members, CAR) == expected


@pytest.fixture
def grid_osm(tmp_path):
    # 3 x 3 grid, 0.001 degree apart; row 0 is the northern one:
    #   1 - 2 - 3        ways: 100 [4,5], 101 [5,6], 102 [2,5], 103 [5,8] (residential, two-way),
    #       |   :              104 [1,2,3] and 105 [7,8,9] (residential, through 2 and 8),
    #   4 - 5 - 6              106 [3,6] footway (not for cars), 107 [6,9] primary, oneway 6 -> 9
    #       |   |
    #   7 - 8 - 9
    nodes = [node(3 * r + c + 1, 43.7 - 0.001 * r, 7.4 + 0.001 * c) for r in range(3) for c in range(3)]
    ways = [way(100, [4, 5], highway="residential"), way(101, [5, 6], highway="residential"),
            way(102, [2, 5], highway="residential"), way(103, [5, 8], highway="residential"),
            way(104, [1, 2, 3], highway="residential"), way(105, [7, 8, 9], highway="residential"),
            way(106, [3, 6], highway="footway"), way(107, [6, 9], highway="primary", oneway="yes")]

    def r(i, value, frm, via, to, **extra):
        members = [("w", f, "from") for f in frm] + [via] + [("w", t, "to") for t in to]
        tags = {"type": "restriction", **({"restriction": value} if value else {}),
                **{k.replace("__", ":"): v for k, v in extra.items()}}
        return relation(i, members, tags)

    rels = [
        r(201, "no_left_turn", [100], ("n", 5, "via"), [102]),                     # (4,5,2) no
        r(202, "only_straight_on", [102], ("n", 5, "via"), [103]),                 # (2,5,8) only
        r(203, "no_left_turn", [100], ("w", 101, "via"), [107]),                   # via way: unsupported
        r(204, "no_right_turn", [106], ("n", 6, "via"), [101]),                    # footway: unresolved
        r(205, "no_left_turn", [107], ("n", 6, "via"), [101]),                     # 107 leaves 6: unresolved
        r(206, "no_right_turn", [100], ("n", 5, "via"), [103], **{"except": "psv;motorcar"}),  # skipped
        r(207, "no_u_turn", [103], ("n", 8, "via"), [103], **{"except": "bicycle"}),  # (5,8,5) no
        r(208, None, [101], ("n", 5, "via"), [103], restriction__hgv="no_left_turn"),  # not for cars
        r(209, None, [101], ("n", 5, "via"), [103], restriction__motorcar="only_right_turn"),  # (6,5,8) only
        r(210, "no_straight_on", [104], ("n", 2, "via"), [102]),                   # (1,2,5) (3,2,5) no
        r(211, "only_straight_on", [105], ("n", 8, "via"), [105]),                 # (7,8,9) (9,8,7) only
        r(212, "give_way", [100], ("n", 5, "via"), [101]),                         # unknown value
        r(213, "no_left_turn", [100], ("n", 5, "via"), []),                        # no 'to': malformed
        r(214, "no_entry", [101, 102], ("n", 5, "via"), [100]),                    # (6,5,4) (2,5,4) no
        r(215, "no_exit", [100], ("n", 5, "via"), [101, 103]),                     # (4,5,6) (4,5,8) no
        relation(216, [("w", 104, "outer")], {"type": "multipolygon"}),           # not a restriction
    ]
    return write_osm(tmp_path / "grid.osm", nodes + ways + rels)


def turn_triples(g):
    """{(OSM node before, via, after, kind)} of a graph's turn restrictions."""
    ids, t = g.node_ids, g.turns
    assert np.array_equal(g.head[t.in_arc], g.tail[t.out_arc])  # every pair meets at its via node
    return {(int(ids[g.tail[i]]), int(ids[g.head[i]]), int(ids[g.head[o]]), int(k))
            for i, o, k in zip(t.in_arc, t.out_arc, t.kind, strict=True)}


def test_turn_restrictions_from_relations(grid_osm):
    g = load_osm(grid_osm, profile="car-basic", progress=False)
    assert turn_triples(g) == {
        (4, 5, 2, NO), (2, 5, 8, ONLY), (5, 8, 5, NO), (6, 5, 8, ONLY), (1, 2, 5, NO), (3, 2, 5, NO),
        (7, 8, 9, ONLY), (9, 8, 7, ONLY), (6, 5, 4, NO), (2, 5, 4, NO), (4, 5, 6, NO), (4, 5, 8, NO)}
    assert len(g.turns) == 12 and g.turns.counts() == {"no": 8, "only": 4}
    m = g.turns.meta
    assert m["by_value"] == {"no_entry": 1, "no_exit": 1, "no_left_turn": 1, "no_straight_on": 1, "no_u_turn": 1,
                             "only_right_turn": 1, "only_straight_on": 2}
    assert {k: m[k] for k in ("relations", "applied", "unsupported_via_way", "unresolved", "except_skipped",
                              "not_for_profile", "unknown_value", "malformed", "ambiguous", "pairs")} == {
        "relations": 15, "applied": 8, "unsupported_via_way": 1, "unresolved": 2, "except_skipped": 1,
        "not_for_profile": 1, "unknown_value": 1, "malformed": 1, "ambiguous": 2, "pairs": 12}
    # the plain-pyosmium oracle used on the real extracts below agrees on this hand-checked file
    want, counts = restrictions_oracle(grid_osm)
    assert want == turn_triples(g)
    assert all(counts[k] == m[k] for k in ("relations", "applied", "unresolved", "ambiguous", "malformed"))


def test_no_restrictions_gives_empty_turns(tiny_osm):
    g = load_osm(tiny_osm, profile="car-basic", progress=False)
    assert g.turns is not None and len(g.turns) == 0
    assert g.turns.meta["relations"] == 0 and g.turns.counts() == {"no": 0, "only": 0}


# ---------------------------------------------------------------- real extracts
def _speeds_kmh(g, min_m):
    d = g.weight("distance").astype(float)
    t = g.weight("travel_time").astype(float)
    keep = d >= min_m
    return 36.0 * d[keep] / t[keep]


@pytest.fixture(scope="module")
def monaco():
    return load_osm(MONACO, profile="car-basic", progress=False)


def test_monaco_counts_and_weights(monaco):
    g = monaco
    # 26,088 nodes sit on highway=* ways of any kind; the car graph uses a large part of them
    assert 10_000 < g.n_nodes < 26_088
    assert g.n_nodes <= g.n_arcs <= 2 * 27_348
    for k in ("distance", "travel_time"):
        assert g.weight(k).min() >= 1
    s = _speeds_kmh(g, 100)
    assert s.min() >= 9.0 and s.max() <= 91.0  # 10 km/h living streets (rounding) .. 90 km/h motorway
    assert np.all(np.diff(g.node_ids) > 0)
    lon, lat = g.coords[:, 0], g.coords[:, 1]
    assert 7.34 < lon.min() and lon.max() < 7.50 and 43.70 < lat.min() and lat.max() < 43.78
    # segments are short: nothing longer than a few kilometres inside Monaco
    assert g.weight("distance").max() < 5_000


def test_monaco_oneways_respected(monaco):
    g = monaco
    arcs = set(zip(g.node_ids[g.tail].tolist(), g.node_ids[g.head].tolist(), strict=True))
    assert any((b, a) not in arcs for a, b in arcs), "a car graph with oneway streets is not symmetric"
    # Oracle straight from the file: segments of plain oneway=yes streets must exist forward; backward
    # only if some other way (one that is not oneway in that direction) joins the same two nodes.
    oneway, other = [], set()
    for w in osmium.FileProcessor(MONACO, osmium.osm.WAY).with_filter(osmium.filter.KeyFilter("highway")):
        refs = [n.ref for n in w.nodes]
        hw = w.tags.get("highway")
        if hw not in CAR.highway_speeds:
            continue
        segs = list(zip(refs, refs[1:], strict=False))
        plain = not any(k in w.tags for k in ("access", "motor_vehicle", "motorcar", "vehicle", "maxspeed"))
        if w.tags.get("oneway") == "yes" and hw in ("primary", "secondary", "residential", "tertiary") and plain:
            oneway.extend(segs)
        else:
            other.update(segs)
            other.update((b, a) for a, b in segs)
    assert len(oneway) > 100
    checked = 0
    for a, b in oneway:
        assert (a, b) in arcs
        if (b, a) not in other:
            assert (b, a) not in arcs
            checked += 1
    assert checked > 100


def test_andorra():
    g = load_osm(shared_data("osm", "andorra.osm.pbf"), profile="car-basic", progress=False)
    assert g.name == "andorra"
    assert 8_000 < g.n_nodes < 38_556
    assert g.n_arcs <= 2 * 38_991
    s = _speeds_kmh(g, 100)
    assert s.min() >= 9.0 and s.max() <= 91.0
    lon, lat = g.coords[:, 0], g.coords[:, 1]
    assert 1.40 < lon.min() and lon.max() < 1.80 and 42.40 < lat.min() and lat.max() < 42.70
    # the graph is not symmetric (oneways) but most streets are two-way
    A = g.to_scipy().astype(bool).astype(np.int8)
    asym = (A != A.T).nnz
    assert 0 < asym < 0.5 * g.n_arcs


# ---------------------------------------------------------------- turn restrictions on real extracts
CAR_CLASSES = ("motorcar", "motor_vehicle", "vehicle")
KIND_OF = {"no_left_turn": NO, "no_right_turn": NO, "no_straight_on": NO, "no_u_turn": NO, "no_entry": NO,
           "no_exit": NO, "only_left_turn": ONLY, "only_right_turn": ONLY, "only_straight_on": ONLY,
           "only_u_turn": ONLY}


def restrictions_oracle(path):
    """Turn restrictions of an extract for the car profile, straight from the file with plain pyosmium
    loops over node lists (no arrays, no graph): ({(node before, via, node after, kind)}, counts)."""
    segs = {}  # way id -> [(u, v)] directed node pairs cars may drive (both ends located)
    for w in (osmium.FileProcessor(path, osmium.osm.NODE | osmium.osm.WAY).with_locations()
              .with_filter(osmium.filter.EntityFilter(osmium.osm.WAY))):
        f, b = CAR.way_speeds(w.tags)
        if f <= 0 and b <= 0:
            continue
        nodes = [(n.ref, n.location.valid()) for n in w.nodes]
        out = []
        for (u, ok_u), (v, ok_v) in zip(nodes, nodes[1:], strict=False):
            if ok_u and ok_v and u != v:
                out += ([(u, v)] if f > 0 else []) + ([(v, u)] if b > 0 else [])
        segs[w.id] = out
    triples, counts = set(), collections.Counter()
    for r in osmium.FileProcessor(path, osmium.osm.RELATION):
        tags = {t.k: t.v for t in r.tags}
        rtype = tags.get("type", "")
        if rtype != "restriction" and not rtype.startswith("restriction:"):
            continue
        counts["relations"] += 1
        if rtype == "restriction":
            keys = [f"restriction:{c}" for c in CAR_CLASSES] + ["restriction"]
        elif rtype.split(":", 1)[1] in CAR_CLASSES:
            keys = [rtype, "restriction"]
        else:
            keys = []
        value = next((tags[k] for k in keys if tags.get(k)), None)
        if value is None:
            counts["not_for_profile"] += 1
            continue
        if any(x.strip() in CAR_CLASSES for x in tags.get("except", "").split(";")):
            counts["except_skipped"] += 1
            continue
        value = value.strip().lower()
        if value not in KIND_OF:
            counts["unknown_value"] += 1
            continue
        roles = collections.defaultdict(list)
        for m in r.members:
            roles[m.role].append((m.type, m.ref))
        if any(t == "w" for t, _ in roles["via"]):
            counts["unsupported_via_way"] += 1
            continue
        frm, to, via = roles["from"], roles["to"], roles["via"]
        if (len(via) != 1 or via[0][0] != "n" or not frm or not to or any(t != "w" for t, _ in frm + to)
                or (len(frm) > 1 and value != "no_entry") or (len(to) > 1 and value != "no_exit")):
            counts["malformed"] += 1
            continue
        v = via[0][1]
        before = [(u, len([1 for s in segs.get(w, []) if s[1] == v]) > 1)
                  for _, w in frm for (u, x) in segs.get(w, []) if x == v]
        after = [(x, len([1 for s in segs.get(w, []) if s[0] == v]) > 1)
                 for _, w in to for (y, x) in segs.get(w, []) if y == v]
        pairs = [(u, x) for u, _ in before for x, _ in after]
        if value.endswith("_u_turn"):
            pairs = [p for p in pairs if p[0] == p[1]] or pairs
        else:
            pairs = [p for p in pairs if p[0] != p[1]]
        if not pairs:
            counts["unresolved"] += 1
            continue
        counts["applied"] += 1
        counts["ambiguous"] += any(a for _, a in before + after)
        triples.update((u, v, x, KIND_OF[value]) for u, x in pairs)
    return triples, counts


@pytest.mark.slow
@pytest.mark.parametrize("name", ["monaco", "andorra", "helsinki"])
def test_restrictions_on_real_extracts(name):
    path = MONACO if name == "monaco" else str(shared_data("osm", SHARED_EXTRACTS[name]))
    t0 = time.perf_counter()
    g = load_osm(path, profile="car-basic", progress=False)
    seconds = time.perf_counter() - t0
    want, counts = restrictions_oracle(path)
    got = turn_triples(g)  # also checks head[in] == tail[out] for every pair
    assert got == want
    m = g.turns.meta
    for k in ("relations", "applied", "not_for_profile", "except_skipped", "unknown_value",
              "unsupported_via_way", "malformed", "unresolved", "ambiguous"):
        assert m[k] == counts[k], k
    assert sum(m["by_value"].values()) == m["applied"]
    assert g.turns.counts() == {"no": sum(k == NO for *_, k in want), "only": sum(k == ONLY for *_, k in want)}
    assert m.get("dropped", 0) == 0
    if name == "andorra":
        assert m["relations"] == 0  # this extract (2013) carries no restriction relation at all
    else:
        assert m["applied"] > 0 and g.turns.counts()["no"] > 0 and g.turns.counts()["only"] > 0
    if name == "helsinki":
        assert m["unresolved"] > 0  # e.g. restrictions onto ways cut off by the extract's bounding box
    print(f"{os.path.basename(path)}: {g.turns!r} {m} loaded in {seconds:.3f} s")
