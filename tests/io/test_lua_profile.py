"""OSRM Lua profiles run unchanged (gpuroute.io.lua_profile).

Oracles:

* **osrm-extract itself** (26.10, from the osrm-bindings wheel that ``.ci/fetch_osrm.sh`` unpacks): a probe
  profile wraps OSRM's car.lua / bicycle.lua / foot.lua, runs under the real osrm-extract on Monaco and
  prints every way's result, every obstacle a node gets, and every turn (its fields, the obstacles
  ``obstacle_map:get(turn.from, turn.via)`` finds, its duration and weight). gpuroute's runtime must give
  the same results for every Monaco way and node, and the same turn costs on the same turn records. A
  second probe runs the same Lua in both runtimes and compares what it prints: OSRM's helper functions
  (parseDuration, canonicalizeStringList, lane strings, ...) and how values stored into result fields
  convert.
* **car.lua read by hand**: per-way, per-node and per-turn expectations derived from car.lua's tables and
  handlers (each test says which rule it checks), with the table values read from the loaded profile.

Tests that need OSRM's files skip with the reason where ``.ci/fetch_osrm.sh`` cannot provide them (OSRM's
files are never copied into this repository).
"""
from __future__ import annotations

import math
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from osrm_peer import osrm_bin_dir, osrm_profiles_dir

pytest.importorskip("lupa", reason="lupa (pip install 'gpuroute[lua]') runs the Lua profiles")

from gpuroute.extras import MissingExtraError  # noqa: E402
from gpuroute.io import lua_profile  # noqa: E402
from gpuroute.io.lua_profile import (  # noqa: E402
    OBSTACLE_DIRECTIONS,
    OBSTACLE_TYPES,
    TRAVEL_MODES,
    LuaProfileError,
    Obstacle,
    OsmRelation,
    SegmentInput,
    TurnInput,
    TurnLeg,
    UnsupportedProfileAPI,
    load_lua_profile,
)

ROOT = Path(__file__).resolve().parents[2]
MONACO = ROOT / "src" / "gpuroute" / "datasets" / "data" / "monaco.osm.pbf"
DRIVING, FERRY, INACCESSIBLE = TRAVEL_MODES["driving"], TRAVEL_MODES["ferry"], TRAVEL_MODES["inaccessible"]


# ------------------------------------------------------------------------------------------ OSRM's files
@pytest.fixture(scope="module")
def osrm_bin():
    """OSRM's bin directory (tests/osrm_peer.py; skips with the reason where the fetch fails)."""
    return osrm_bin_dir(required=False)


@pytest.fixture(scope="module")
def profiles(osrm_bin):
    """OSRM's profiles folder."""
    return osrm_profiles_dir(osrm_bin)


@pytest.fixture
def car(profiles):
    return load_lua_profile(profiles / "car.lua")


@pytest.fixture(scope="module")
def car_m(profiles):
    """car.lua, shared by the tests that only process ways (no state kept between calls)."""
    return load_lua_profile(profiles / "car.lua")


def way(profile, wid=1, **tags):
    return profile.process_way((wid, {k.replace("__", ":"): v for k, v in tags.items()}))


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


# ------------------------------------------------------------------------------------------ loading
@pytest.mark.parametrize("name", ["car", "bicycle", "foot"])
def test_osrm_profiles_load_with_their_properties(profiles, name):
    p = load_lua_profile(profiles / f"{name}.lua")
    assert p.api_version == 4 and p.lua_version >= (5, 4)
    assert p.has_way_function and p.has_node_function and p.has_turn_function
    props = p.get("properties")
    assert p.properties.weight_name == props["weight_name"]
    assert p.properties.u_turn_penalty == props["u_turn_penalty"]
    assert p.properties.use_turn_restrictions == props["use_turn_restrictions"]
    assert p.properties.continue_straight_at_waypoint == props["continue_straight_at_waypoint"]
    assert p.properties.traffic_signal_penalty == props.get("traffic_signal_penalty", 0)
    assert p.properties.max_speed_for_map_matching == pytest.approx(props["max_speed_for_map_matching"])
    # the class names and excludable sets osrm-extract reads (a Sequence's values)
    assert list(p.classes) == (p.get("classes") or [])
    assert [sorted(x) for x in p.excludable] == [sorted(d) for d in (p.get("excludable") or [])]
    assert list(p.restrictions) == p.get("restrictions") or set(p.restrictions) == set(p.get("restrictions"))


def test_car_properties_are_osrm_extracts(car):
    """car.lua: weight_name routability (weights are not durations), u-turn 20 s, no traffic signal
    property (obstacles.lua then uses 2 s), weight precision 1 -> max turn weight 3276.7."""
    pr = car.properties
    assert pr.weight_name == "routability" and not pr.fallback_to_duration
    assert pr.u_turn_penalty == 20 and pr.traffic_signal_penalty == 0
    assert pr.weight_precision == 1 and pr.max_turn_weight == pytest.approx(3276.7)
    assert car.get("turn_penalty") == 7.5 and car.get("turn_bias") == 1.075
    assert set(car.classes) == {"toll", "motorway", "ferry", "restricted", "tunnel"}
    assert set(car.excludable) == {("toll",), ("motorway",), ("ferry",)}
    assert car.relation_types == ("route",)


# ------------------------------------------------------------------------------------------ car.lua ways
def test_car_primary_default_speed_and_rate(car_m):
    """highway=primary: speeds.highway.primary km/h both ways; routability rate = speed / 3.6 (no
    penalty); guidance class primary (4), not ignorable; a start point."""
    s = car_m.get("speeds")["highway"]["primary"]
    r = way(car_m, highway="primary")
    assert (r.forward_mode, r.backward_mode) == (DRIVING, DRIVING)
    assert r.forward_speed == r.backward_speed == s
    assert r.forward_rate == pytest.approx(s / 3.6) and r.backward_rate == pytest.approx(s / 3.6)
    assert r.duration == -1 and r.weight == -1
    assert r.road_priority_class == 4 and not r.may_be_ignored and r.is_startpoint
    assert r.kept and r.forward and r.backward and not r.forward_classes


@pytest.mark.parametrize("maxspeed, kmh", [
    ("50", 50),                      # a number: km/h
    ("30 mph", 30 * 1.609),          # Measure.parse_value_speed: mph * 1.609
    ("FR:urban", 50),                # maxspeed_table_default.urban
    ("none", 140),                   # maxspeed_table.none
    ("RU:motorway", 110),            # maxspeed_table["ru:motorway"] (lower-cased)
])
def test_car_maxspeed_times_speed_reduction(car_m, maxspeed, kmh):
    """WayHandlers.maxspeed: the parsed maxspeed times speed_reduction (0.8) replaces the highway speed,
    above or below it."""
    red = car_m.get("speed_reduction")
    for hw in ("primary", "residential"):
        r = way(car_m, highway=hw, maxspeed=maxspeed)
        assert r.forward_speed == pytest.approx(kmh * red) and r.backward_speed == pytest.approx(kmh * red)
        assert r.forward_rate == pytest.approx(kmh * red / 3.6)


def test_car_oneway_rules(car_m):
    """WayHandlers.oneway: oneway=yes closes the backward direction, -1 the forward one; motorways and
    roundabouts are implied oneways (unless oneway=no)."""
    r = way(car_m, highway="residential", oneway="yes")
    assert (r.forward_mode, r.backward_mode) == (DRIVING, INACCESSIBLE) and r.forward and not r.backward
    r = way(car_m, highway="residential", oneway="-1")
    assert (r.forward_mode, r.backward_mode) == (INACCESSIBLE, DRIVING)
    r = way(car_m, highway="motorway")
    assert (r.forward_mode, r.backward_mode) == (DRIVING, INACCESSIBLE)
    assert r.forward_speed == car_m.get("speeds")["highway"]["motorway"]
    assert r.forward_classes == r.backward_classes == {"motorway"} and r.motorway_class
    r = way(car_m, highway="motorway", oneway="no")
    assert r.backward_mode == DRIVING
    r = way(car_m, highway="residential", junction="roundabout")
    assert r.roundabout and r.backward_mode == INACCESSIBLE
    r = way(car_m, highway="motorway_link")
    assert r.link_class and r.motorway_class  # stored flags; IsMotorwayClass() is false for links


def test_car_access_no_official_yes(car_m):
    """access_tags_hierarchy motorcar > motor_vehicle > vehicle > access: access=no and motorcar=official
    are blacklisted and not 'restricted' (the way is dropped); motorcar=yes reopens access=no."""
    for tags in ({"access": "no"}, {"access": "no", "motorcar": "official"}, {"motorcar": "official"},
                 {"motor_vehicle": "agricultural"}, {"access": "yes", "vehicle": "no"}):
        r = way(car_m, highway="residential", **tags)
        assert (r.forward_mode, r.backward_mode) == (INACCESSIBLE, INACCESSIBLE) and not r.kept, tags
    r = way(car_m, highway="residential", access="no", motorcar="yes")
    assert r.kept and r.forward_speed == car_m.get("speeds")["highway"]["residential"]


@pytest.mark.parametrize("value", ["destination", "private", "delivery", "customers"])
def test_car_restricted_access_is_kept_with_the_restricted_class(car_m, value):
    """restricted_access_tag_list on a restricted_highway_whitelist road: driveable (both directions),
    marked restricted (the penalty is paid on entering, in process_turn) and in class 'restricted'; a start
    point, except highway=service with access=private (service_access_tag_blacklist)."""
    r = way(car_m, highway="residential", access=value)
    assert r.kept and (r.forward_mode, r.backward_mode) == (DRIVING, DRIVING)
    assert r.forward_restricted and r.backward_restricted
    assert r.forward_classes == r.backward_classes == {"restricted"} and r.is_startpoint
    r = way(car_m, highway="service", access=value)
    assert r.kept and r.forward_restricted and r.is_startpoint == (value != "private")
    # highway=track is not on the whitelist: the same value is then just blacklisted
    r = way(car_m, highway="track", access=value)
    assert not r.kept


def test_car_tracks_need_an_access_tag(car_m):
    """highway=track has no entry in speeds: without an access tag the way gets no speed (dropped); with
    a whitelisted (or any non-blacklisted) access tag it gets default_speed; tracktype caps it."""
    assert not way(car_m, highway="track").kept
    d = car_m.get("default_speed")
    for tags in ({"access": "yes"}, {"motor_vehicle": "permissive"}, {"access": "unknown_value"}):
        r = way(car_m, highway="track", **tags)
        assert r.kept and r.forward_speed == r.backward_speed == d, tags
        assert r.road_priority_class == 16 and r.may_be_ignored  # bike_path in guidance.lua
    r = way(car_m, highway="track", access="yes", tracktype="grade5", smoothness="very_horrible")
    assert r.forward_speed == min(d, car_m.get("tracktype_speeds")["grade5"],
                                  car_m.get("smoothness_speeds")["very_horrible"]) < d


def test_car_construction_and_blocked_ways(car_m):
    """blocked_ways: highway=construction, construction=* outside construction_whitelist, proposed roads,
    reversible oneways, impassable, areas; avoid_ways: steps. Whitelisted construction values pass."""
    for tags in ({"highway": "construction"}, {"highway": "primary", "construction": "yes"},
                 {"highway": "proposed", "proposed": "primary"}, {"highway": "primary", "oneway": "reversible"},
                 {"highway": "primary", "impassable": "yes"}, {"highway": "primary", "area": "yes"},
                 {"highway": "steps"}, {"highway": "footway"}):
        assert not way(car_m, **tags).kept, tags
    for value in ("minor", "widening", "no"):
        assert way(car_m, highway="primary", construction=value).kept
    assert way(car_m, highway="tertiary", proposed="secondary").kept


@pytest.mark.parametrize("service, penalty, priority", [
    (None, 1.0, 12),               # highway=service: alley class
    ("parking_aisle", 0.5, 12),    # service_penalties + parking_class -> alley
    ("driveway", 0.5, 12),
    ("alley", 0.5, 12),
    ("drive-through", 0.5, 12),
])
def test_car_service_subtypes(car_m, service, penalty, priority):
    """highway=service: speeds.highway.service; service_penalties scale the rate, not the speed."""
    s = car_m.get("speeds")["highway"]["service"]
    tags = {"highway": "service"} | ({"service": service} if service else {})
    r = car_m.process_way((1, tags))
    assert r.forward_speed == s and r.forward_rate == pytest.approx(s * penalty / 3.6)
    assert r.road_priority_class == priority and r.may_be_ignored


def test_car_service_emergency_access_is_forbidden(car_m):
    assert not way(car_m, highway="service", service="emergency_access").kept


def test_car_ferries(car_m):
    """WayHandlers.ferries: route=ferry is mode ferry at route_speeds.ferry; a valid duration tag is the
    whole way's duration (parseDuration, seconds) and, with routability, its weight too; class ferry; not
    a start point (mode is not default_mode)."""
    fs = car_m.get("route_speeds")["ferry"]
    r = way(car_m, route="ferry", duration="00:30")
    assert (r.forward_mode, r.backward_mode) == (FERRY, FERRY)
    assert r.forward_speed == fs and r.duration == 1800 and r.weight == 1800
    assert r.forward_classes == r.backward_classes == {"ferry"} and not r.is_startpoint and r.kept
    assert way(car_m, route="ferry", duration="PT1H15M").duration == 4500
    r = way(car_m, route="ferry", duration="about an hour")   # durationIsValid false: speed only
    assert r.duration == -1 and r.forward_speed == fs and r.kept
    assert not way(car_m, route="bus").kept


def test_car_surface_lanes_and_classes(car_m):
    """surface_speeds cap the speed; one lane on a two-way road halves the rate (width penalty); toll=yes
    is class toll; ref lists are canonicalised ("a;b" -> "a; b")."""
    s = car_m.get("speeds")["highway"]["primary"]
    r = way(car_m, highway="primary", surface="gravel")
    assert r.forward_speed == min(s, car_m.get("surface_speeds")["gravel"])
    r = way(car_m, highway="primary", lanes="1")
    assert r.forward_speed == s and r.forward_rate == pytest.approx(s * 0.5 / 3.6)
    r = way(car_m, highway="primary", lanes="1", oneway="yes")
    assert r.forward_rate == pytest.approx(s / 3.6)
    r = way(car_m, highway="primary", toll="yes", name="Boulevard X", ref="D6007;E80", tunnel="yes")
    assert r.forward_classes == r.backward_classes == {"toll", "tunnel"}
    assert r.name == "Boulevard X" and r.forward_ref == r.backward_ref == "D6007; E80"
    r = way(car_m, highway="primary", oneway="yes", destination="Nice;Menton", turn__lanes="left|through")
    assert r.destinations == "Nice, Menton" and r.turn_lanes_forward == "left|through"
    r = way(car_m, highway="residential", maxheight="1.8")   # below vehicle_height (2.0 m)
    assert not r.kept


# ------------------------------------------------------------------------------------------ car.lua nodes
@pytest.mark.parametrize("tags, expected", [
    ({"barrier": "gate"}, [("gate", "both", 60.0)]),                 # barrier_penalties.gate
    ({"barrier": "lift_gate"}, [("gate", "both", 60.0)]),
    ({"barrier": "bollard"}, [("barrier", "none", 0.0)]),           # not whitelisted: impassable
    ({"barrier": "bollard", "bollard": "rising"}, []),
    ({"barrier": "border_control"}, []),                               # barrier_whitelist
    ({"barrier": "kerb", "kerb": "lowered"}, []),
    ({"barrier": "height_restrictor", "maxheight": "1.9"}, [("barrier", "none", 0.0)]),
    ({"barrier": "height_restrictor", "maxheight": "3"}, []),
    ({"access": "no"}, [("barrier", "none", 0.0)]),                  # blacklisted, not restricted
    ({"access": "private", "barrier": "gate"}, []),                  # an access tag skips the barrier
    ({"highway": "traffic_signals"}, [("traffic_signals", "none", 2.0)]),
    ({"highway": "traffic_signals", "traffic_signals:direction": "forward"},
     [("traffic_signals", "forward", 2.0)]),
    ({"highway": "traffic_signals", "direction": "backward"}, [("traffic_signals", "backward", 2.0)]),
    ({"highway": "stop"}, [("stop", "none", 2.0)]),
    ({"highway": "stop", "stop": "minor", "direction": "forward"}, [("stop_minor", "forward", 2.0)]),
    ({"highway": "give_way"}, [("give_way", "none", 1.0)]),
    ({"highway": "crossing"}, [("crossing", "none", 0.0)]),
    ({"highway": "mini_roundabout"}, [("mini_roundabout", "none", 0.0)]),
    ({"amenity": "bench"}, []),
])
def test_car_node_obstacles(car, tags, expected):
    """car.lua's process_node and lib/obstacles.lua: barriers, gates (60 s), signals (2 s without
    properties.traffic_signal_penalty), stop (2 s) / stop=minor, give_way (1 s), with direction tags."""
    n = car.process_node((7, tags, 7.42, 43.73))
    assert [(o.type, o.direction, o.duration) for o in n.obstacles] == expected
    assert n.barrier == any(t == "barrier" for t, _, _ in expected)
    assert len(car.obstacle_map) == len(expected)


# ------------------------------------------------------------------------------------------ car.lua turns
def car_turn_duration(angle, *, roads=3, u_turn=False, lhd=False, roundabout=False, mode_change=False):
    """car.lua's process_turn, by hand: a sigmoid of the angle up to turn_penalty 7.5 s (turn_bias 1.075
    favours the near side), +2 s times a sigmoid when crossing oncoming traffic at a junction, +20 s for a
    u-turn; nothing for a 2-road node without a mode change or u-turn."""
    if not (roads > 2 or mode_change or u_turn):
        return 0.0
    tb = 1 / 1.075 if lhd else 1.075
    if angle >= 0:
        d = 7.5 / (1 + math.exp(-((13 / tb) * angle / 180 - 6.5 * tb)))
    else:
        d = 7.5 / (1 + math.exp(-((13 * tb) * -angle / 180 - 6.5 / tb)))
    crosses = angle > 0 if lhd else angle < 0
    if crosses and not u_turn and roads > 2 and not roundabout:
        d += 2.0 / (1 + math.exp(-(13 * abs(angle) / 180 - 3.25)))
    if u_turn:
        d += 20
    return d


@pytest.mark.parametrize("angle", [0.0, 20.0, 45.0, 90.0, 135.0, 170.0, -20.0, -45.0, -90.0, -135.0, -170.0])
@pytest.mark.parametrize("lhd", [False, True])
def test_car_turn_penalty_by_angle(car, angle, lhd):
    car.prepare_obstacles([])
    d, w = car.process_turn(TurnInput(angle=angle, number_of_roads=3, is_left_hand_driving=lhd))
    assert d == pytest.approx(car_turn_duration(angle, lhd=lhd), abs=1e-12) and w == d


def test_car_turn_special_cases(car):
    car.prepare_obstacles([])
    # u-turn: the sigmoid at 180 degrees + u_turn_penalty, no oncoming term
    d, w = car.process_turn(TurnInput(angle=180.0, is_u_turn=True, number_of_roads=3))
    assert d == pytest.approx(car_turn_duration(180.0, u_turn=True)) and d > 27 and w == d
    # a node with two roads: no turn cost, unless the mode changes
    assert car.process_turn(TurnInput(angle=-60.0, number_of_roads=2)) == (0.0, 0.0)
    d, _ = car.process_turn(TurnInput(angle=-60.0, number_of_roads=2, target_mode=FERRY))
    assert d == pytest.approx(car_turn_duration(-60.0, roads=2, mode_change=True))
    # leaving a roundabout: no oncoming-traffic term
    d, _ = car.process_turn(TurnInput(angle=-90.0, number_of_roads=3, source_is_roundabout=True))
    assert d == pytest.approx(car_turn_duration(-90.0, roundabout=True))
    # number_of_roads from the legs: right + left + 2 - u-turn
    legs = (TurnLeg(speed=30), TurnLeg(speed=50))
    d, _ = car.process_turn(TurnInput(angle=-90.0, roads_on_the_left=legs))
    assert d == pytest.approx(car_turn_duration(-90.0, roads=4))
    # entering a restricted road (access=private...): the weight is max_turn_weight, not the duration
    d, w = car.process_turn(TurnInput(angle=45.0, number_of_roads=3, target_restricted=True))
    assert d == pytest.approx(car_turn_duration(45.0)) and w == pytest.approx(car.properties.max_turn_weight)
    d, w = car.process_turn(TurnInput(angle=45.0, number_of_roads=3, source_restricted=True,
                                      target_restricted=True))
    assert w == d
    with pytest.raises(ValueError, match="number_of_roads"):
        car.process_turn(TurnInput(angle=0.0, number_of_roads=5, roads_on_the_left=legs))


def test_car_turn_obstacles_and_their_directions(car):
    """Obstacles at the turn's via node add their duration (car.lua loops over obstacle_map:get(from,
    via)); a forward signal applies coming from the node before it on the way, a backward one from the node
    after it (osrm-extract's ObstacleMap::preProcess); a gate costs 60 s."""
    car.process_nodes([(2, {"highway": "traffic_signals", "traffic_signals:direction": "forward"}),
                       (12, {"highway": "traffic_signals", "direction": "backward"}),
                       (22, {"barrier": "gate"}),
                       (32, {"highway": "traffic_signals"})])
    car.prepare_obstacles([[1, 2, 3], [11, 12, 13], [21, 22, 23], [31, 32, 33]])
    plain = car_turn_duration(0.0, roads=2)

    def d(frm, via, to):
        return car.process_turn(TurnInput.fake(frm, via, to, TurnLeg(distance=50), TurnLeg(distance=50)))[0]

    assert d(1, 2, 3) == pytest.approx(plain + 2) and d(3, 2, 1) == pytest.approx(plain)
    assert d(13, 12, 11) == pytest.approx(plain + 2) and d(11, 12, 13) == pytest.approx(plain)
    assert d(21, 22, 23) == d(23, 22, 21) == pytest.approx(60)
    assert d(31, 32, 33) == d(33, 32, 31) == pytest.approx(2)
    # a junction turn through the signal pays both
    dur, _ = car.process_turn(TurnInput(angle=-90.0, number_of_roads=3, from_=31, via=32, to=99))
    assert dur == pytest.approx(car_turn_duration(-90.0) + 2)
    assert car.obstacle_map.any(1, 2, ["traffic_signals"]) and not car.obstacle_map.any(3, 2)
    assert car.obstacle_map.nodes() == [2, 12, 22, 32]
    # the map prepared again directly (not through prepare_obstacles) is the one the next turns see
    car.obstacle_map.add_from(41, 42, Obstacle("give_way", "none", 1.0))
    car.obstacle_map.prepare([[1, 2, 3]])
    assert d(41, 42, 43) == pytest.approx(1) and d(43, 42, 41) == 0
    assert d(13, 12, 11) == 0  # no kept way through node 12 now: its directional signal applies nowhere


def test_car_stop_sign_heuristics(car):
    """A stop without direction at a 2-road node is skipped when the source road is under 20 m and the
    target over 20 m; stop=minor only counts when entering by the slower road (entering_by_minor_road)."""
    car.process_nodes([(5, {"highway": "stop"}), (6, {"highway": "stop", "stop": "minor"})])
    car.prepare_obstacles([])
    near = TurnInput.fake(4, 5, 7, TurnLeg(distance=10), TurnLeg(distance=30))
    far = TurnInput.fake(4, 5, 7, TurnLeg(distance=30), TurnLeg(distance=30))
    assert car.process_turn(near)[0] == 0 and car.process_turn(far)[0] == pytest.approx(2)
    minor = TurnInput(angle=0.0, number_of_roads=3, from_=1, via=6, to=2, source_speed=30, target_speed=50)
    major = TurnInput(angle=0.0, number_of_roads=3, from_=1, via=6, to=2, source_speed=50, target_speed=30,
                      roads_on_the_right=(TurnLeg(speed=20),))
    assert car.process_turn(minor)[0] == pytest.approx(car_turn_duration(0.0) + 2)
    assert car.process_turn(major)[0] == pytest.approx(car_turn_duration(0.0))


def test_turns_need_the_obstacle_map(car):
    with pytest.raises(RuntimeError, match="prepare_obstacles"):
        car.process_turn(TurnInput(angle=0.0))


def test_bicycle_turns_signals_and_duration_fallback(profiles):
    """bicycle.lua: angle^2 penalty with turn_bias, +traffic_signal_penalty when turn.has_traffic_light
    (computed from the signal placed by result.traffic_lights); weight_name duration, so osrm-extract
    makes the weight the duration (the profile's mode_change_penalty on the weight is discarded)."""
    bike = load_lua_profile(profiles / "bicycle.lua")
    n = bike.process_node((9, {"highway": "traffic_signals"}))
    assert [(o.type, o.direction, o.duration) for o in n.obstacles] == [("traffic_signals", "both", 2.0)]
    bike.prepare_obstacles([])
    d, w = bike.process_turn(TurnInput(angle=90.0, from_=8, via=9, to=10, number_of_roads=3))
    assert d == pytest.approx(1.0 * 6 / 1.4 + 2) and w == d
    d, w = bike.process_turn(TurnInput(angle=-45.0, number_of_roads=3, source_mode=TRAVEL_MODES["cycling"],
                                       target_mode=TRAVEL_MODES["pushing_bike"]))
    assert d == pytest.approx(0.25 * 6 * 1.4) and w == d


# ------------------------------------------------------------------------------------------ user profiles
TRUCK = """
api_version = 4
package.path = "{profiles}/?.lua;" .. package.path
local car = require("car")

function setup()
  local profile = car.setup()
  profile.vehicle_height = 4.0
  profile.vehicle_weight = 20000
  profile.vehicle_max_speed = 80
  profile.properties.u_turn_penalty = 60
  return profile
end

return {{setup = setup, process_way = car.process_way, process_node = car.process_node,
         process_turn = car.process_turn}}
"""


def test_a_truck_profile_built_on_car_lua(profiles, car_m, tmp_path):
    """A user's profile that requires OSRM's car.lua and changes its vehicle: height, weight and speed
    limits apply to the truck only; its u-turn penalty too."""
    truck = load_lua_profile(write(tmp_path / "truck.lua", TRUCK.format(profiles=profiles)))
    assert way(truck, highway="motorway").forward_speed == 80
    assert way(car_m, highway="motorway").forward_speed == 90
    for tags in ({"maxheight": "3.5"}, {"maxweight": "7.5"}):
        assert not way(truck, highway="primary", **tags).kept and way(car_m, highway="primary", **tags).kept
    truck.prepare_obstacles([])
    d, _ = truck.process_turn(TurnInput(angle=180.0, is_u_turn=True, number_of_roads=3))
    assert d == pytest.approx(car_turn_duration(180.0, u_turn=True) - 20 + 60)


MINIMAL = """
api_version = 4

function setup()
  return {properties = {weight_name = "distance", weight_precision = 2}}
end

function process_way(profile, way, result, relations)
  if way:get_value_by_key("highway") then
    result.forward_mode = mode.driving
    result.backward_mode = mode.driving
    result.forward_speed = 36
    result.backward_speed = 36
    result.forward_rate = 1
    result.backward_rate = 1
    result.name = "n" .. way:size() .. (way:is_closed() and "c" or "o")
    local first = way:get_nodes()[1]
    result.ref = string.format("%d@%.7f", first:id(), first:location():lat())
  end
end

-- segments heading north take twice as long; the weight adds a metre per 100 m
function process_segment(profile, segment)
  if segment.target.lat > segment.source.lat then
    segment.duration = segment.duration * 2
  end
  segment.weight = segment.duration + segment.distance / 100
end

return {setup = setup, process_way = process_way, process_segment = process_segment}
"""


def test_a_minimal_profile_with_segments(tmp_path):
    p = load_lua_profile(write(tmp_path / "minimal.lua", MINIMAL))
    assert p.properties.weight_name == "distance" and p.properties.weight_multiplier == 100
    assert not p.has_turn_function and not p.has_node_function
    r = p.process_way((5, {"highway": "road"}, [(1, 7.0, 43.5), (2, 7.1, 43.6), (1, 7.0, 43.5)]))
    assert r.name == "n3c" and r.forward_ref == "1@43.5000000" and r.kept
    assert p.process_node((1, {"barrier": "gate"})).obstacles == ()      # no process_node: nothing
    p.prepare_obstacles([])
    assert p.process_turn(TurnInput(angle=90.0, number_of_roads=4)) == (0.0, 0.0)
    d, w = p.process_segments([
        SegmentInput(7.0, 43.5, 7.0, 43.501, distance=111.2, weight=11.0, duration=11.0),       # north
        SegmentInput(7.0, 43.501, 7.0, 43.5, distance=111.2, weight=11.0, duration=11.0),       # south
        # 4e-8 degrees north: osrm-extract's coordinates are rounded to 1e-6, so not north
        SegmentInput(7.0, 43.5000001, 7.0, 43.50000014, distance=0.01, weight=1.0, duration=1.0),
    ])
    assert list(d) == [22.0, 11.0, 1.0] and w == pytest.approx([22 + 1.112, 11 + 1.112, 1 + 0.0001])
    with pytest.raises(LuaProfileError, match="gave none"):
        p.process_way((6, {"highway": "road"}))   # the profile asks for nodes the loader did not give


def test_a_profile_without_functions_gives_osrm_extracts_defaults(tmp_path):
    """No process_way: every field keeps ExtractionWay::clear()'s value (the way is not kept)."""
    p = load_lua_profile(write(tmp_path / "empty.lua", "api_version = 4\nreturn {setup = function() return {} end}\n"))
    r = p.process_way((3, {"highway": "primary"}))
    assert (r.forward_mode, r.forward_speed, r.forward_rate, r.duration, r.weight) == (0, -1, -1, -1, -1)
    assert r.is_startpoint and r.road_priority_class == 31 and r.name == "" and not r.kept
    assert p.properties == lua_profile.ProfileProperties() and p.classes == () and p.get("speeds") is None


CARDINAL = """
api_version = 4
package.path = "{profiles}/?.lua;" .. package.path
local car = require("car")
function setup()
  local profile = car.setup()
  profile.cardinal_directions = true
  return profile
end
return {{setup = setup, process_way = car.process_way, process_node = car.process_node,
         process_turn = car.process_turn}}
"""


def test_route_relations_give_cardinal_directions(profiles, tmp_path):
    """car.lua with cardinal_directions: Relations.process_way_refs reads the way's route relations
    (relations:get_relations, rel:get_role, rel:get_value_by_key) and a super-relation's role."""
    p = load_lua_profile(write(tmp_path / "cardinal.lua", CARDINAL.format(profiles=profiles)))
    p.set_relations([
        OsmRelation(5, {"type": "route", "route": "road", "ref": "A8", "direction": "north"}, [("w", 10, "")]),
        OsmRelation(6, {"type": "route", "route": "road", "ref": "A8"}, [("w", 11, "")]),
        OsmRelation(7, {"type": "route"}, [("r", 6, "south")]),
    ])
    assert way(p, 10, highway="primary", ref="A8").forward_ref == "A8 $north"
    r = way(p, 11, highway="primary", ref="A8")
    assert r.forward_ref == r.backward_ref == "A8 $south"
    assert way(p, 12, highway="primary", ref="A8").forward_ref == "A8"
    with pytest.raises(ValueError, match="member type"):
        p.set_relations([(1, {}, [("x", 1, "")])])


def test_large_relation_and_obstacle_sets_cross_in_chunks(profiles, tmp_path, monkeypatch):
    """Relations and obstacles go to Lua in chunks under the stack limit (made small here): all arrive."""
    monkeypatch.setattr(lua_profile, "_MAX_FLAT", 30)
    p = load_lua_profile(write(tmp_path / "cardinal.lua", CARDINAL.format(profiles=profiles)))
    rels = [OsmRelation(100 + i, {"type": "route", "route": "road", "ref": f"R{i}", "direction": "east"},
                        [("w", 1000 + i, "")]) for i in range(40)]
    p.set_relations(rels)
    assert [way(p, 1000 + i, highway="primary", ref=f"R{i}").forward_ref for i in range(40)] == [
        f"R{i} $east" for i in range(40)]
    p.process_nodes([(i, {"barrier": "gate"}) for i in range(50)])
    p.prepare_obstacles([])
    d, _ = p.process_turns([TurnInput.fake(1000, i, 1001, TurnLeg(), TurnLeg()) for i in range(50)])
    assert list(d) == [60.0] * 50


def test_batches_equal_single_calls(car_m, monkeypatch):
    """process_ways in chunks (LUA_BATCH made small) gives what one call per way gives."""
    rng = np.random.default_rng(0)
    hw = ["primary", "residential", "service", "track", "motorway", "footway", "construction"]
    extra = [{}, {"oneway": "yes"}, {"access": "private"}, {"maxspeed": "30"}, {"name": "X", "ref": "a;b"},
             {"access": "yes"}, {"toll": "yes"}]
    ways = [(i, {"highway": hw[rng.integers(len(hw))]} | extra[rng.integers(len(extra))]) for i in range(60)]
    single = [car_m.process_way(w) for w in ways]
    monkeypatch.setattr(lua_profile, "LUA_BATCH", 7)
    assert car_m.process_ways(ways) == single
    assert car_m.process_ways(iter(ways)) == single and car_m.process_ways([]) == []


# ------------------------------------------------------------------------------------------ errors
def test_a_syntax_error_names_file_and_line(tmp_path):
    f = write(tmp_path / "broken.lua", """
        api_version = 4
        function setup()
          return {properties = {weight_name = 'duration'}
        end
        """)
    with pytest.raises(LuaProfileError) as e:
        load_lua_profile(f)
    assert e.value.path == str(f.resolve()) and e.value.line == 4 and str(f.resolve()) in str(e.value)


@pytest.mark.parametrize("where, line", [("top", 2), ("setup", 4), ("way", 8)])
def test_a_runtime_error_names_file_and_line(tmp_path, where, line):
    f = write(tmp_path / "raising.lua", f"""
        api_version = 4
        if "{where}" == "top" then error("top-level failure") end
        function setup()
          if "{where}" == "setup" then local t = nil; return t.x end
          return {{}}
        end
        function process_way(profile, way, result)
          if "{where}" == "way" then result.name = way:get_value_by_key("name"):upper() end
        end
        return {{setup = setup, process_way = process_way}}
        """)
    with pytest.raises(LuaProfileError) as e:
        p = load_lua_profile(f)
        p.process_ways([(41, {}), (42, {"highway": "x"})])
    assert e.value.path == str(f.resolve()) and e.value.line == line, (str(e.value), e.value.traceback)
    assert f"{f.resolve()}, line {line}" in str(e.value)
    if where == "way":
        assert "way 41" in str(e.value) and "process_way" in str(e.value)


def test_an_error_in_a_required_library_names_that_file(tmp_path):
    write(tmp_path / "lib" / "helpers.lua", """
        local H = {}
        function H.speed(highway) return highway .. nil end
        return H
        """)
    f = write(tmp_path / "p.lua", """
        api_version = 4
        local H = require("lib/helpers")
        function setup() return {} end
        function process_way(profile, way, result) result.forward_speed = H.speed("x") end
        return {setup = setup, process_way = process_way}
        """)
    with pytest.raises(LuaProfileError) as e:
        load_lua_profile(f).process_way((3, {}))
    assert e.value.path == str((tmp_path / "lib" / "helpers.lua").resolve()) and e.value.line == 2


def test_a_syntax_error_in_a_required_library_names_that_file(tmp_path):
    write(tmp_path / "lib" / "broken.lua", """
        local B = {}
        function B.f( return 1 end
        return B
        """)
    f = write(tmp_path / "p.lua", """
        api_version = 4
        local B = require("lib/broken")
        function setup() return {} end
        return {setup = setup}
        """)
    with pytest.raises(LuaProfileError) as e:
        load_lua_profile(f)
    assert e.value.path == str((tmp_path / "lib" / "broken.lua").resolve()) and e.value.line == 2


UNSUPPORTED = {
    "raster": ("raster", """
        api_version = 4
        function setup()
          return {raster_source = raster:load("x.asc", 0, 1, 0, 1, 0.1, 0.1)}
        end
        return {setup = setup}
        """, 3),
    "area_manager": ("area_manager", """
        api_version = 4
        function setup()
          area_manager:init('visgraph+dijkstra')
          return {}
        end
        return {setup = setup}
        """, 3),
    "v1 properties": ("the global 'properties'", """
        api_version = 4
        properties.weight_name = 'duration'
        function setup() return {} end
        return {setup = setup}
        """, 2),
}


@pytest.mark.parametrize("name", sorted(UNSUPPORTED))
def test_unsupported_apis_are_refused_by_name(tmp_path, name):
    api, text, line = UNSUPPORTED[name]
    f = write(tmp_path / "u.lua", text)
    with pytest.raises(UnsupportedProfileAPI) as e:
        load_lua_profile(f)
    assert e.value.api.startswith(api) and api in str(e.value) and "not supported" in str(e.value)
    assert e.value.path == str(f.resolve()) and e.value.line == line


def test_other_api_versions_are_refused(tmp_path, profiles):
    with pytest.raises(UnsupportedProfileAPI, match="version 2"):
        load_lua_profile(profiles / "rasterbot.lua")          # OSRM's raster example (API version 2)
    f = write(tmp_path / "v0.lua", "function way_function(way, result) end\n")
    with pytest.raises(UnsupportedProfileAPI, match="no api_version") as e:
        load_lua_profile(f)
    assert e.value.api == "api_version 0"


@pytest.mark.parametrize("text, match", [
    ("api_version = 4\n", "function table"),
    ("api_version = 4\nreturn {}\n", "setup"),
    ("api_version = 4\nreturn {setup = function() return 1 end}\n", "must return a table"),
    ("api_version = 4\nreturn {setup = function() return {properties = {u_turn_penalty = 'x'}} end}\n",
     "u_turn_penalty"),
])
def test_malformed_profiles(tmp_path, text, match):
    with pytest.raises(LuaProfileError, match=match):
        load_lua_profile(write(tmp_path / "m.lua", text))


def test_misuse_inside_the_functions_is_refused(tmp_path):
    f = write(tmp_path / "misuse.lua", """
        api_version = 4
        function setup() return {} end
        function process_way(profile, way, result)
          local h = way:get_value_by_key("highway")
          if h == "a" then obstacle_map:get(1, 2) end
          if h == "b" then result.forward_classes["no-dash"] = true end
          if h == "c" then result.speed = 5 end
        end
        return {setup = setup, process_way = process_way}
        """)
    p = load_lua_profile(f)
    with pytest.raises(LuaProfileError, match="obstacle_map:get") as e:
        p.process_way((1, {"highway": "a"}))
    assert e.value.line == 5
    with pytest.raises(LuaProfileError, match="Invalid class name no-dash"):
        p.process_way((1, {"highway": "b"}))
    with pytest.raises(LuaProfileError, match="ResultWay has no writable field 'speed'") as e:
        p.process_way((1, {"highway": "c"}))
    assert e.value.line == 7
    with pytest.raises(FileNotFoundError):
        load_lua_profile(tmp_path / "absent.lua")


def test_without_lupa_the_extra_is_named(monkeypatch, tmp_path):
    f = write(tmp_path / "p.lua", "api_version = 4\n")
    for name in [k for k in sys.modules if k == "lupa" or k.startswith("lupa.")]:
        monkeypatch.delitem(sys.modules, name)
    for name in ("lupa", "lupa.lua55", "lupa.lua54"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(MissingExtraError) as e:
        load_lua_profile(f)
    assert "lupa" in str(e.value) and "pip install 'gpuroute[lua]'" in str(e.value)


def test_obstacle_map_prepare_follows_way_order():
    """ObstacleMap.prepare as osrm-extract's preProcess: the preceding (forward) / following (backward)
    node on each way; a way through the node twice gives the first occurrence twice."""
    m = lua_profile.ObstacleMap()
    fwd, bwd = Obstacle("stop", "forward", 2.0), Obstacle("give_way", "backward", 1.0)
    m.add(5, fwd)
    m.add(5, bwd)
    m.add(9, Obstacle("traffic_signals", "both", 2.0))
    m.prepare([[4, 5, 6], [7, 5], [5, 8, 5]])
    assert m.get(4, 5) == [fwd] and m.get(7, 5) == [fwd] and m.get(6, 5) == [bwd]
    # the closed way [5, 8, 5] is listed for both of its 5s; each time the first 5 after its first node
    # (forward: the last one, after 8) and the first 5 before its last node (backward: the first one)
    assert m.get(8, 5) == [fwd, fwd, bwd, bwd]
    assert len(m.get(None, 5)) == 7 and m.get(1, 9) == [Obstacle("traffic_signals", "both", 2.0)]
    assert m.get(4, 5, ["give_way"]) == [] and m.any(6, 5, ["give_way"])


# ------------------------------------------------------------------------------------------ vs osrm-extract
PROBE = r"""
-- runs an OSRM profile under osrm-extract and prints what it did
api_version = 4
package.path = "{profiles}/?.lua;" .. package.path
local inner = require("{target}")

local function esc(s)
  return (string.gsub(s, "[%c\\]", function(c) return string.format("\\%03d", c:byte()) end))
end
local function v2s(v)
  if type(v) == "string" then return "s:" .. esc(v) end
  if type(v) == "number" then
    return (math.type(v) == "integer" and "i:" or "f:") .. string.format("%.17g", v)
  end
  return tostring(v)
end
local function emit(...)
  local t = table.pack(...)
  for i = 2, t.n do t[i] = v2s(t[i]) end
  io.write(table.concat(t, "\t", 1, t.n), "\n")
end

local real_map = obstacle_map
obstacle_map = setmetatable({{}}, {{__index = function(_, k)
  if k == "add" then
    return function(_, node, ob)
      emit("N", node:id(), ob.type, ob.direction, ob.duration, ob.weight)
      return real_map:add(node, ob)
    end
  end
  return function(_, ...) return real_map[k](real_map, ...) end
end}})

local function classes(c)
  local names = {{}}
  for k, v in pairs(c) do if v then names[#names + 1] = k end end
  table.sort(names)
  return table.concat(names, ",")
end

local FIELDS = {{"forward_mode", "backward_mode", "forward_speed", "backward_speed", "forward_rate",
  "backward_rate", "duration", "weight", "name", "forward_ref", "backward_ref", "pronunciation",
  "destinations", "exits", "turn_lanes_forward", "turn_lanes_backward", "roundabout", "circular",
  "is_startpoint", "forward_restricted", "backward_restricted", "is_left_hand_driving",
  "highway_turn_classification", "access_turn_classification"}}
local RC = {{"motorway_class", "link_class", "may_be_ignored", "road_priority_class", "num_lanes"}}

local function process_way(profile, way, result, relations)
  inner.process_way(profile, way, result, relations)
  local out = {{}}
  for i, k in ipairs(FIELDS) do out[i] = result[k] end
  for _, k in ipairs(RC) do out[#out + 1] = result.road_classification[k] end
  out[#out + 1] = classes(result.forward_classes)
  out[#out + 1] = classes(result.backward_classes)
  emit("W", way:id(), table.unpack(out))
end

local function process_node(profile, node, result, relations)
  local proxy = setmetatable({{}}, {{__newindex = function(_, k, v)
    if v ~= false and v ~= nil then emit("R", node:id(), k, v) end
    result[k] = v
  end}})
  return inner.process_node(profile, node, proxy, relations)
end

local LEG = {{"is_restricted", "is_motorway", "is_link", "number_of_lanes", "highway_turn_classification",
  "access_turn_classification", "speed", "distance", "priority_class", "is_incoming", "is_outgoing"}}
local TURN = {{"angle", "number_of_roads", "is_u_turn", "is_left_hand_driving", "from", "via", "to",
  "source_restricted", "source_mode", "source_is_motorway", "source_is_link", "source_number_of_lanes",
  "source_highway_turn_classification", "source_access_turn_classification", "source_speed",
  "source_priority_class", "source_is_roundabout",
  "target_restricted", "target_mode", "target_is_motorway", "target_is_link", "target_number_of_lanes",
  "target_highway_turn_classification", "target_access_turn_classification", "target_speed",
  "target_priority_class", "target_is_roundabout", "has_traffic_light"}}

local function process_turn(profile, turn)
  local out = {{}}
  local function put(v) out[#out + 1] = v end
  local function leg(l) for _, k in ipairs(LEG) do put(l[k]) end end
  for _, k in ipairs(TURN) do put(turn[k]) end
  local obs = real_map:get(turn.from, turn.via)
  put(#obs)
  for _, o in ipairs(obs) do put(o.type) put(o.direction) put(o.duration) put(o.weight) end
  leg(turn.source_road)
  leg(turn.target_road)
  for _, side in ipairs({{turn.roads_on_the_right, turn.roads_on_the_left}}) do
    put(#side)
    for _, l in ipairs(side) do leg(l) end
  end
  inner.process_turn(profile, turn)
  emit("T", turn.duration, turn.weight, table.unpack(out))
end

return {{setup = inner.setup, process_way = process_way, process_node = process_node,
        process_turn = process_turn}}
"""

WAY_FIELDS = [f for f in lua_profile.WayResult.__dataclass_fields__ if f not in ("id", "fallback_to_duration")]
TURN_FIELDS = ["angle", "number_of_roads", "is_u_turn", "is_left_hand_driving", "from_", "via", "to"] + [
    f"{side}_{k}" for side in ("source", "target") for k in (
        "restricted", "mode", "is_motorway", "is_link", "number_of_lanes", "highway_turn_classification",
        "access_turn_classification", "speed", "priority_class", "is_roundabout")]
_TYPE_NAMES = {v: k for k, v in OBSTACLE_TYPES.items()}
_DIR_NAMES = {v: k for k, v in OBSTACLE_DIRECTIONS.items()}


def _decode(x):
    if x in ("true", "false"):
        return x == "true"
    if x == "nil":
        return None
    kind, v = x[:2], x[2:]
    if kind == "i:":
        return int(v)
    if kind == "f:":
        return float(v)
    if kind == "s:":
        return re.sub(r"\\(\d{3})", lambda m: chr(int(m.group(1))), v)
    raise ValueError(x)


def _run_extract(osrm_bin, profile, cwd):
    pbf = cwd / "monaco.osm.pbf"
    if not pbf.exists():
        pbf.symlink_to(MONACO)
    r = subprocess.run([str(osrm_bin / "osrm-extract"), "-p", str(profile), str(pbf), "-t", "1"],
                       capture_output=True, text=True, timeout=300, cwd=cwd)
    assert r.returncode == 0, f"osrm-extract failed:\n{(r.stdout + r.stderr)[-2000:]}"
    return r.stdout


@pytest.fixture(scope="module")
def monaco():
    """Monaco's ways (id, tags, (node, lon, lat)...) and tagged nodes, read with pyosmium."""
    osmium = pytest.importorskip("osmium", reason="pyosmium reads the Monaco extract")
    ways, nodes = [], []

    class Reader(osmium.SimpleHandler):
        def node(self, n):
            if len(n.tags):
                nodes.append((n.id, {t.k: t.v for t in n.tags}, n.location.lon, n.location.lat))

        def way(self, w):
            ways.append((w.id, {t.k: t.v for t in w.tags},
                         [(r.ref, r.location.lon, r.location.lat) for r in w.nodes]))

    Reader().apply_file(str(MONACO), locations=True)
    return ways, nodes


@pytest.mark.slow
@pytest.mark.parametrize("target", ["car", "bicycle", "foot"])
def test_monaco_equals_osrm_extract(osrm_bin, profiles, monaco, tmp_path, target):
    """Every Monaco way's result, every obstacle of every tagged node, and the cost of every turn
    osrm-extract forms, as the real osrm-extract 26.10 computes them with OSRM's unmodified profile."""
    probe = write(tmp_path / "probe.lua", PROBE.format(profiles=profiles, target=target))
    out = _run_extract(osrm_bin, probe, tmp_path)
    W, N, T = {}, {}, []
    for line in out.splitlines():
        f = line.split("\t")
        if f[0] == "W":
            W[_decode(f[1])] = [_decode(x) for x in f[2:]]
        elif f[0] == "N":
            N.setdefault(_decode(f[1]), []).append(tuple(_decode(x) for x in f[2:]))
        elif f[0] == "R":
            nid, key, value = _decode(f[1]), _decode(f[2]), _decode(f[3])
            N.setdefault(nid, []).append((key, value))
        elif f[0] == "T":
            T.append([_decode(x) for x in f[1:]])
    ways, nodes = monaco
    assert len(W) == len(ways) and T

    prof = load_lua_profile(profiles / f"{target}.lua")
    # ways: every field osrm-extract's ResultWay shows (road_classification.motorway_class is its getter)
    results = prof.process_ways(ways)
    bad = []
    for r in results:
        got = [getattr(r, k) for k in WAY_FIELDS]
        got[WAY_FIELDS.index("motorway_class")] = r.motorway_class and not r.link_class
        got[-2:] = [",".join(sorted(got[-2])), ",".join(sorted(got[-1]))]
        exp = W[r.id]
        if got != exp or [type(x) for x in got] != [type(x) for x in exp]:
            bad.append((r.id, [(k, a, b) for k, a, b in zip(WAY_FIELDS, got, exp, strict=True) if a != b]))
    assert not bad, f"{len(bad)} of {len(ways)} ways differ, e.g. {bad[:3]}"
    assert sum(r.kept for r in results) > 1000

    # nodes: obstacle_map:add calls, and result.barrier / result.traffic_lights as osrm-extract turns them
    # into obstacles (traffic signals take properties.traffic_signal_penalty)
    tsp = prof.properties.traffic_signal_penalty
    expected = {}
    for nid, entries in N.items():
        for e in entries:
            if e[0] == "traffic_lights" and (e[1] is True or type(e[1]) is int):
                e = (OBSTACLE_TYPES["traffic_signals"], 3 if e[1] is True else e[1], tsp, 0.0)
            elif e[0] == "barrier" and e[1] is True:
                e = (OBSTACLE_TYPES["barrier"], 3, 0.0, 0.0)
            elif isinstance(e[0], str):
                continue
            expected.setdefault(nid, []).append((_TYPE_NAMES[e[0]], _DIR_NAMES[e[1]], e[2], e[3]))
    got = {n.id: list(n.obstacles) for n in prof.process_nodes(nodes) if n.obstacles}
    assert got == {k: [Obstacle(*o) for o in v] for k, v in expected.items()}

    # turns: the records osrm-extract formed (its internal node ids), with the obstacles it found at
    # (from, via) placed under a via id of their own
    prof.obstacle_map = lua_profile.ObstacleMap()
    turns, want, has_light, places = [], [], [], {}
    for f in T:
        duration, weight = f[0], f[1]
        vals = dict(zip(TURN_FIELDS, f[2:2 + 27], strict=True))
        has_light.append(f[2 + 27])
        k = 2 + 28
        obs = []
        for _ in range(f[k]):
            obs.append(Obstacle(_TYPE_NAMES[f[k + 1]], _DIR_NAMES[f[k + 2]], f[k + 3], f[k + 4]))
            k += 4
        k += 1
        legs = []
        for _ in range(2):
            legs.append(TurnLeg(*f[k:k + 11]))
            k += 11
        sides = []
        for _ in range(2):
            n = f[k]
            sides.append(tuple(TurnLeg(*f[k + 1 + 11 * i:k + 12 + 11 * i]) for i in range(n)))
            k += 1 + 11 * n
        assert k == len(f)
        key = (vals["from_"], vals["via"], tuple(obs))
        if key not in places:
            places[key] = len(places) + 1
            for o in obs:
                prof.obstacle_map.add_from(None, places[key], o)
        vals["via"] = places[key]
        turns.append(TurnInput(**vals, source_road=legs[0], target_road=legs[1],
                               roads_on_the_right=sides[0], roads_on_the_left=sides[1]))
        # osrm-extract's post-processing (Sol2ScriptingEnvironment::ProcessTurn)
        if prof.properties.fallback_to_duration:
            weight = duration
        else:
            weight = min(weight, prof.properties.max_turn_weight)
        want.append((max(duration, -3276.7), weight))
    prof.prepare_obstacles([])
    d, w = prof.process_turns(turns)
    want = np.array(want)
    assert np.array_equal(d, want[:, 0]) and np.array_equal(w, want[:, 1])
    lights = [any(o.type == "traffic_signals" for o in prof.obstacle_map.get(t.from_, t.via)) for t in turns]
    assert lights == has_light
    assert any(t.number_of_roads > 2 for t in turns) and any(x != 0 for x in d)


API_PROBE = r"""
api_version = 4
local once = {}
local function first(name) if once[name] then return false end once[name] = true return true end
local function out(...)
  local t = table.pack(...)
  for i = 2, t.n do t[i] = tostring(t[i]) .. "|" .. tostring(math.type(t[i])) end
  print(table.concat(t, "\t", 1, t.n))
end

function setup()
  for _, s in ipairs(@DURATIONS@) do out("D", s, durationIsValid(s), parseDuration(s)) end
  out("C", canonicalizeStringList("a;b; c;  d;\tdd", ";"), canonicalizeStringList("x,y,,z", ","),
      canonicalizeStringList("a%b", "%"))
  out("L", trimLaneString("||left|through", 2, 0), trimLaneString("left|through||", 0, 2),
      trimLaneString("|left", 1, 1), trimLaneString("|", 1, 0), trimLaneString("ab|", 0, 2))
  out("A", applyAccessTokens("left|through|through|right", "yes|yes|no|yes"), applyAccessTokens("a|b", "yes"),
      applyAccessTokens("", ""), applyAccessTokens("a||b", "yes|yes|yes"), applyAccessTokens("a|b|", "no|yes|yes"))
  out("K", constants.max_turn_weight, constants.precision, mode.ferry, mode.route, road_priority_class.parking,
      obstacle_type.gate, obstacle_type.stop_minor, obstacle_direction.both, traffic_lights.direction_reverse,
      item_type.way, is_true("yes"), is_true(nil), is_false("0"), is_false("off"))
  return {properties = {weight_name = "routability", traffic_signal_penalty = 2.5}}
end

function process_node(profile, node, result, relations)
  if first("node") then
    out("N", node:version(), node:type(), pcall(function() return result.barrier end) == false,
        pcall(function() result.foo = 1 end) == false, node:get_location_tag("driving_side"))
  end
end

function process_way(profile, way, result, relations)
  if way:get_value_by_key("highway") then
    result.forward_mode = mode.driving; result.backward_mode = mode.driving
    result.forward_speed = 30; result.backward_speed = 30; result.forward_rate = 5; result.backward_rate = 5
  end
  if not first("way") then return end
  local rc = result.road_classification
  out("WL", way:get_location_tag("maxheight"))
  out("W0", result.name, result.ref, result.forward_ref, result.duration, result.weight, result.foo,
      rc.motorway_class, rc.road_priority_class, rc.num_lanes, result.is_startpoint, result.circular,
      way:version(), way:type(), way:get_value_by_key("nonexistent", "dflt"),
      way:get_value_by_key("nonexistent", ""), way:is_left_hand_traffic())
  local function try(f) local ok = pcall(f) return ok end
  out("W1", try(function() result.foo = 1 end), try(function() return way.foo end))
  result.forward_speed = "65"; out("W2", result.forward_speed)
  result.forward_speed = "abc"; out("W3", result.forward_speed)
  result.forward_speed = 65; out("W4", result.forward_speed)
  result.duration = true; out("W5", result.duration)
  rc.num_lanes = 300; out("W6", rc.num_lanes)
  rc.num_lanes = 2.5; out("W7", rc.num_lanes)
  rc.num_lanes = -1; out("W8", rc.num_lanes)
  rc.road_priority_class = 40; out("W9", rc.road_priority_class)
  rc.road_priority_class = "4"; out("W10", rc.road_priority_class)
  result.forward_mode = 17; out("W11", result.forward_mode)
  result.forward_mode = 2.5; out("W12", result.forward_mode)
  result.forward_mode = mode.driving
  result.name = 12; out("W13", result.name)
  result.name = 1.5; out("W14", result.name)
  result.name = true; out("W15", "[" .. result.name .. "]")
  result.name = "x"; result.name = nil; out("W16", "[" .. result.name .. "]")
  result.ref = "r1"; out("W17", result.forward_ref, result.backward_ref, result.ref)
  result.backward_ref = "r2"; out("W18", result.ref, result.backward_ref)
  result.roundabout = 1; out("W19", result.roundabout)
  result.roundabout = nil; out("W20", result.roundabout)
  result.highway_turn_classification = 20; out("W21", result.highway_turn_classification)
  result.forward_classes["tunnel"] = 1; out("W22", result.forward_classes["tunnel"])
  rc.motorway_class = true; rc.link_class = true; out("W23", rc.motorway_class, rc.link_class)
  rc.link_class = false; out("W24", rc.motorway_class)
  rc.motorway_class = false
  result.forward_classes["tunnel"] = nil
  out("W25", #way:get_nodes() > 1, way:get_nodes()[1]:location():valid(), type(way:get_nodes()[1]:id()))
end

function process_turn(profile, turn)
  if first("turn") then
    local function try(f) local ok = pcall(f) return ok end
    print()  -- osrm-extract's progress percentages end without a newline
    out("T1", turn.foo, try(function() turn.foo = 1 end), try(function() turn.angle = 5 end))
    turn.duration = "3"; out("T2", turn.duration)
    local o = Obstacle.new(obstacle_type.stop, obstacle_direction.forward, 0.1, 0)
    out("T3", o.duration, o.weight, o.type, o.direction, try(function() o.duration = 3 end))
    local b = Obstacle.new(obstacle_type.barrier)
    out("T4", b.direction, b.duration)
  end
  turn.duration = 1.25
  turn.weight = 40000
end

return {setup = setup, process_node = process_node, process_way = process_way, process_turn = process_turn}
"""
DURATIONS = ["00:30", "1:5", "5", "05", "005", "90", "120", "1:00:00", "24:00", "PT1H30M", "PT10H", "PT1230",
             "PT013000", "PT01:30:00", "PT102030S", "P2W", "P1D", "P1DT2H", "P", "PT", "", " 1:00", "PT1h2m3s",
             "P1W2D", "PT25:00:00", "PT240000", "T1H", "PT1.5H", "1:60", "99:99", "99:99:99",
             "PT99999999999H", "P1DT", "p1d", "PT0M", "1:2:3:4", "P99999W", "PT24:00:00", "PT23:59:59"]


@pytest.mark.slow
def test_api_semantics_equal_osrm_extract(osrm_bin, monaco, tmp_path, capfd):
    """One probe profile, run by osrm-extract and by gpuroute's runtime, prints the same: OSRM's helper
    functions (durations, string lists, lane strings), its enums and constants, and how values stored
    into results, nodes, turns and obstacles convert (read back through the same objects)."""
    lua_list = "{" + ", ".join('"' + s.replace("\\", "\\\\") + '"' for s in DURATIONS) + "}"
    probe = write(tmp_path / "api.lua", API_PROBE.replace("@DURATIONS@", lua_list))
    osrm = [x for x in _run_extract(osrm_bin, probe, tmp_path).splitlines() if re.match(r"^[A-Z][A-Z0-9]*\t", x)]
    capfd.readouterr()
    p = load_lua_profile(probe)
    assert p.properties.traffic_signal_penalty == 3           # llround(2.5), as osrm-extract reads it
    ways, nodes = monaco
    p.process_nodes(nodes[:1])
    p.process_ways([w for w in ways if "highway" in w[1]][:1])
    p.prepare_obstacles([])
    d, w = p.process_turns([TurnInput(angle=0.0), TurnInput(angle=10.0)])
    ours = [x for x in capfd.readouterr().out.splitlines() if re.match(r"^[A-Z][A-Z0-9]*\t", x)]
    assert len(osrm) == len(DURATIONS) + 4 + 1 + 27 + 4, "\n".join(osrm[len(DURATIONS):])
    assert ours == osrm
    assert list(d) == [1.25, 1.25] and list(w) == [3276.7, 3276.7]   # capped at max_turn_weight
