"""OSRM Lua profiles (profile API version 4), run unchanged through a Lua binding (``lupa``).

A user brings the ``car.lua`` / ``bicycle.lua`` / ``foot.lua`` of OSRM (or their own variant of it);
:class:`LuaProfile` runs it in a fresh Lua state with the globals, objects and helper functions that
``osrm-extract`` gives a profile (OSRM 26.10, ``src/extractor/scripting_environment_lua.cpp``), and hands
the loader plain Python records. Lua 5.5 (the version osrm-extract 26.10 embeds) where lupa provides it,
else Lua 5.4. Install with ``pip install 'gpuroute[lua]'``.

Usage (what the OSM loader does, in osrm-extract's order)::

    profile = load_lua_profile("car.lua")            # runs the file and setup()
    profile.set_relations(relations)                  # the relations of profile.relation_types, once
    nodes = profile.process_nodes(osm_nodes)          # NodeResult per node; fills profile.obstacle_map
    ways = profile.process_ways(osm_ways)             # WayResult per way
    kept = [w for w in ways if w.kept]                # osrm-extract's ExtractorCallbacks filter
    profile.prepare_obstacles(node_lists_of_kept_ways)
    durations, weights = profile.process_turns(turns)  # per turn, TurnInput records
    durations, weights = profile.process_segments(segments)   # if profile.has_segment_function

API
---
``load_lua_profile(path) -> LuaProfile`` (same as ``LuaProfile(path)``), then on the profile:

``properties``
    :class:`ProfileProperties`, osrm-extract's view of ``setup().properties`` (``weight_name``,
    ``u_turn_penalty``, ``traffic_signal_penalty``, ``left_hand_driving``, ``weight_precision``, ...).
``classes``, ``excludable``, ``restrictions``, ``relation_types``, ``suffix_list``
    The string lists osrm-extract reads from the profile table.
``get(key)``
    Any entry of the profile table (``setup()``'s return) as Python data, e.g. ``get("turn_penalty")``.
``process_node(node)`` / ``process_nodes(nodes)`` -> :class:`NodeResult` (list)
    ``node``: ``(id, tags, lon, lat)`` (:class:`OsmNode` or a plain tuple); ``tags`` a mapping of str.
``process_way(way)`` / ``process_ways(ways)`` -> :class:`WayResult` (list)
    ``way``: ``(id, tags[, nodes[, left_hand_traffic]])`` (:class:`OsmWay` or a plain tuple).
``set_relations(relations)``
    ``relations``: :class:`OsmRelation` records ``(id, tags, members)``, ``members`` a sequence of
    ``(type, ref, role)`` with ``type`` ``"n"``/``"w"``/``"r"`` (pyosmium's letters) or ``"node"`` ...
``prepare_obstacles(way_node_lists)``
    Resolves directional obstacles as osrm-extract's ``ObstacleMap::preProcess`` does; needed before
    turns.
``process_turn(turn)`` -> ``(duration, weight)``; ``process_turns(turns)`` -> two float64 arrays
    ``turn``: :class:`TurnInput`.
``process_segment(segment)`` -> ``(duration, weight)``; ``process_segments(segments)`` -> two arrays
    ``segment``: :class:`SegmentInput`.

Batch calls run one Lua call per :data:`LUA_BATCH` records: the inputs cross as flat arguments, the
results come back as flat values, and no Lua object is created from Python per record.

What the loader supplies, and how osrm-extract computes it
-----------------------------------------------------------
Nodes
    Every node with tags. osrm-extract also calls ``process_node`` for tagless nodes
    (``call_tagless_node_function`` is true for every API version 4 profile, as the C++ never reads that
    property from the profile table); skipping them changes nothing for OSRM's shipped profiles, which
    look at tags only. ``lon``/``lat`` in degrees (pyosmium's ``location.lon``/``lat``); ``None`` for an
    invalid location.
Ways
    ``nodes``: the way's node ids, or ``(id, lon, lat)`` triples (only read if the profile calls
    ``way:get_nodes()``, ``way:size()`` or ``way:is_closed()``; osrm-extract 26.10 gives every node ref
    its location); ``left_hand_traffic``: osrm-extract 26.10's driving-side index for the way
    (``way:is_left_hand_traffic()``, car.lua's fallback when neither ``driving_side`` nor the profile says),
    ``False`` by default (right-hand traffic, e.g. all of Europe but the UK, Ireland, Malta, Cyprus).
    :attr:`WayResult.kept` is osrm-extract's filter of the results (``ExtractorCallbacks::ProcessWay``);
    a kept way's segments get durations ``duration / (n - 1)`` each when ``duration > 0``, else
    ``length / (speed / 3.6)``; weights likewise from ``weight`` / ``rate`` (metres per weight unit), or
    equal to durations when ``properties.weight_name == "duration"`` (``fallback_to_duration``). OSRM
    rounds each segment to ``max(1, round(10 * s))`` deciseconds and
    ``max(1, round(weight * 10**weight_precision))``.
Obstacles
    Collected in :attr:`LuaProfile.obstacle_map` while nodes are processed (``obstacle_map:add``,
    ``result.barrier``, ``result.traffic_lights``). :meth:`LuaProfile.prepare_obstacles` then gives each
    ``forward``/``backward`` obstacle the node before/after it on every kept way through it (OSM node
    ids, the way's own order); ``none``/``both`` apply from every side. Nodes with a ``barrier`` or a
    ``mini_roundabout``/``turning_loop``/``turning_circle`` obstacle are not compressed by osrm-extract.
Turns (:class:`TurnInput`, osrm-extract's ``EdgeBasedGraphFactory`` fills ``ExtractionTurn``)
    ``angle``: degrees, ``180 - a`` where ``a = (b_in - b_out + 540) mod 360`` is OSRM's turn angle
    at ``via`` (``b_in`` the compass bearing of travel arriving at ``via``, ``b_out`` leaving it; 180 =
    straight, 90 = right, 270 = left, 0 = u-turn), so **positive = a right turn, negative = left**,
    0 = straight. osrm-extract takes both bearings towards "representative" coordinates along the roads
    and merges dual carriageways first (``intersection/intersection_analysis.cpp``,
    ``coordinate_extractor.cpp``); ``is_u_turn``: ``a`` is 0 (turning back onto the incoming road);
    ``from``, ``via``,
    ``to``: OSM ids of the node before ``via`` on the incoming way, ``via`` and the node after it on the
    outgoing way (the geometry neighbours; obstacles are looked up with them); ``number_of_roads``: the
    roads (edges of either direction) at ``via``, the incoming one included (OSRM:
    ``len(roads_on_the_right) + len(roads_on_the_left) + 2 - is_u_turn``; defaults to that when legs
    are given); ``roads_on_the_right``/``left``: the other roads in turn-angle order from the u-turn
    (right = angles between the u-turn and the turn; for a u-turn every other road is on the right);
    ``is_left_hand_driving``: the incoming way's ``WayResult.is_left_hand_driving``; ``source_*`` /
    ``target_*``: the incoming / outgoing edge's way results (``restricted`` is that direction's
    ``*_restricted``, ``mode`` its ``*_mode``, ``is_motorway`` = ``motorway_class and not link_class``,
    ``is_link``, ``number_of_lanes``, ``priority_class`` from the road classification, ``speed`` =
    ``int(36 * length_m / duration_ds)`` km/h of the whole compressed edge, ``is_roundabout`` its
    ``roundabout`` flag). ``has_traffic_light`` is computed here: a ``traffic_signals`` obstacle at
    ``via`` when coming from ``from``. For a degree-2 node that osrm-extract compresses away but which
    carries obstacles, it calls ``process_turn`` with a "fake" turn: ``angle`` 180 (from a turn angle of
    0), ``number_of_roads`` 2, both modes driving, no legs but ``source_road``/``target_road``, and adds
    the result to the compressed edge (:meth:`TurnInput.fake`).
    :meth:`LuaProfile.process_turn` returns what osrm-extract keeps: ``weight = duration`` when
    ``weight_name == "duration"``, else ``min(weight, properties.max_turn_weight)``; ``duration`` at least
    -3276.7 s. OSRM then stores ``int(10 * duration)`` and ``int(weight * 10**weight_precision)``
    (truncated toward zero, 16-bit). A profile without ``process_turn`` gives ``(0, 0)``.
Segments (:class:`SegmentInput`, after the ways: ``ExtractionContainers::PrepareEdges``)
    Source and target coordinates (swapped for a backward-only segment), rounded by osrm-extract to 1e-6
    degrees (done here); distance in metres; the segment's weight and duration before rounding.

Not supported (refused by name, at load time where the profile touches it then, else at first use)
---------------------------------------------------------------------------------------------------
* profile API versions 0 to 3 (``api_version`` must be 4; with them their entry points such as
  ``way_function`` and ``source_function``), and the v0/v1 globals ``properties`` and ``vector``;
* ``raster`` (raster sources: ``raster:load`` / ``query`` / ``interpolate``), e.g. OSRM's ``rasterbot.lua``;
* ``area_manager`` (pedestrian area meshing, ``foot_area.lua``; ``process_relation`` is never called, as
  in osrm-extract without area meshing);
* location-dependent data (``--location-dependent-data``): ``get_location_tag(key)`` answers as
  osrm-extract 26.10 does without that option: with ``key`` itself (a quirk of its binding; OSRM's
  profiles then fall back to their defaults, as ``"maxheight"`` is no number and ``"driving_side"``
  neither ``"left"`` nor ``"right"``);
* OSM metadata: ``version()`` is 0 (osrm-extract without ``--with-osm-metadata``);
* ``obstacle_map:get`` / ``any`` outside ``process_turn`` / ``process_segment`` (osrm-extract raises
  there too: the map is sorted only after extraction); ``obstacle_map:add`` outside ``process_node``.

Values stored into result fields convert as osrm-extract's sol2 bindings convert them (checked against
the osrm-extract 26.10 binary): numbers into strings, numeric strings into numbers, anything else into 0,
an empty string or ``false``; integers round half away from zero and wrap to their C++ width
(``num_lanes = 300`` is 44). Writing a field osrm-extract's objects do not have, or a read-only one,
raises (as there). ``setup().properties``: integer ones (penalties, ``weight_precision``) round like
that; a value of the wrong type, which osrm-extract silently ignores, is refused.

Errors
------
:class:`LuaProfileError` for a profile that does not parse or raises (``path``, ``line``, the Lua
message and traceback; a syntax error or a runtime error in a ``require``d library names that file);
:class:`UnsupportedProfileAPI` (a subclass) for the above; :class:`~gpuroute.extras.MissingExtraError`
without lupa.

Not thread-safe: use one :class:`LuaProfile` per thread (osrm-extract keeps one Lua state per thread).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import Iterable, Mapping, NamedTuple, Sequence

import numpy as np

from ..extras import MissingExtraError, require

__all__ = ["LuaProfile", "load_lua_profile", "LuaProfileError", "UnsupportedProfileAPI",
           "ProfileProperties", "OsmNode", "OsmWay", "OsmRelation", "Obstacle", "NodeResult",
           "WayResult", "TurnLeg", "TurnInput", "SegmentInput", "ObstacleMap", "TRAVEL_MODES",
           "ROAD_PRIORITY_CLASSES", "OBSTACLE_TYPES", "OBSTACLE_DIRECTIONS", "parse_duration",
           "duration_is_valid", "LUA_BATCH"]

#: Records per Lua call in the batch methods (inputs and results cross as flat Lua varargs).
LUA_BATCH = 2048
#: At most this many values per Lua call (Lua's stack holds 1,000,000).
_MAX_FLAT = 200_000

#: OSRM's travel modes (``mode.*`` in a profile, ``include/extractor/travel_mode.hpp``).
TRAVEL_MODES = {"inaccessible": 0, "driving": 1, "cycling": 2, "walking": 3, "ferry": 4, "train": 5,
                "pushing_bike": 6, "steps_up": 8, "steps_down": 9, "river_up": 10, "river_down": 11,
                "route": 12}
#: OSRM's road priority classes (``road_priority_class.*``, ``include/extractor/road_classification.hpp``).
ROAD_PRIORITY_CLASSES = {"motorway": 0, "motorway_link": 1, "trunk": 2, "trunk_link": 3, "primary": 4,
                         "primary_link": 5, "secondary": 6, "secondary_link": 7, "tertiary": 8,
                         "tertiary_link": 9, "main_residential": 10, "side_residential": 11, "alley": 12,
                         "parking": 13, "link_road": 14, "unclassified": 15, "bike_path": 16,
                         "foot_path": 18, "connectivity": 31}
#: Obstacle types and their bits (``obstacle_type.*``, ``include/extractor/obstacles.hpp``).
OBSTACLE_TYPES = {"none": 0x0, "barrier": 0x1, "traffic_signals": 0x2, "stop": 0x4, "give_way": 0x8,
                  "crossing": 0x10, "traffic_calming": 0x20, "mini_roundabout": 0x40, "turning_loop": 0x80,
                  "turning_circle": 0x100, "stop_minor": 0x200, "gate": 0x400}
#: Obstacle directions (``obstacle_direction.*``): relative to the direction of the way through the node.
OBSTACLE_DIRECTIONS = {"none": 0, "forward": 1, "backward": 2, "both": 3}
_TYPE_NAMES = {v: k for k, v in OBSTACLE_TYPES.items()}
_DIRECTION_NAMES = {v: k for k, v in OBSTACLE_DIRECTIONS.items()}
_ITEM_TYPES = {"n": 1, "node": 1, "w": 2, "way": 2, "r": 3, "relation": 3}
#: ``TurnPenalty`` is a 16-bit count of deciseconds / weight units.
_MAX_TURN_PENALTY = 32767
_RUNTIME = Path(__file__).with_name("lua_profile_runtime.lua")
_UNSUPPORTED = "gpuroute-unsupported: "


# ---------------------------------------------------------------------------------------------- errors
class LuaProfileError(RuntimeError):
    """A Lua profile failed: it does not parse, it raised, or it broke a rule of osrm-extract's API.

    Attributes
    ----------
    path : str or None
        The file where it happened (the profile or a library it ``require``s), when known.
    line : int or None
        The line in that file.
    lua_message : str
        Lua's own message (it starts with ``file:line:`` where Lua knows them).
    traceback : str
        Lua's stack traceback (empty for a syntax error).
    profile : str
        The profile file that was loaded.
    """

    def __init__(self, message, *, profile, path=None, line=None, lua_message="", traceback=""):
        super().__init__(message)
        self.profile, self.path, self.line = profile, path, line
        self.lua_message, self.traceback = lua_message, traceback


class UnsupportedProfileAPI(LuaProfileError):
    """The profile uses a part of OSRM's profile API that gpuroute cannot run faithfully.

    Attributes
    ----------
    api : str
        What is not supported (e.g. ``"raster (...)"``).
    """

    def __init__(self, message, *, api, **kw):
        super().__init__(message, **kw)
        self.api = api


# ---------------------------------------------------------------------------------------------- records
class OsmNode(NamedTuple):
    """A node for :meth:`LuaProfile.process_node`: OSM id, tags (str -> str), location in degrees."""
    id: int
    tags: Mapping[str, str]
    lon: float | None = None
    lat: float | None = None


class OsmWay(NamedTuple):
    """A way for :meth:`LuaProfile.process_way`.

    ``nodes``: its node ids or ``(id, lon, lat)`` triples (read only when the profile asks);
    ``left_hand_traffic``: the driving-side index's answer for the way (osrm-extract 26.10's
    ``way:is_left_hand_traffic()``).
    """
    id: int
    tags: Mapping[str, str]
    nodes: Sequence[int] = ()
    left_hand_traffic: bool = False


class OsmRelation(NamedTuple):
    """A relation for :meth:`LuaProfile.set_relations`; ``members``: ``(type, ref, role)`` triples."""
    id: int
    tags: Mapping[str, str]
    members: Sequence[tuple] = ()


class Obstacle(NamedTuple):
    """An obstacle at a node (``Obstacle`` in osrm-extract).

    ``type``: a key of :data:`OBSTACLE_TYPES`; ``direction``: of :data:`OBSTACLE_DIRECTIONS`, relative to
    the way through the node; ``duration``: seconds added to a turn through it; ``weight``: weight units
    (car.lua adds durations only). Both are C++ floats (float32 values).
    """
    type: str
    direction: str
    duration: float = 0.0
    weight: float = 0.0


@dataclass(frozen=True, slots=True)
class NodeResult:
    """What ``process_node`` did with a node: the obstacles it placed there (in order).

    ``result.barrier = true`` is a ``barrier`` obstacle (direction ``both``); ``result.traffic_lights``
    a ``traffic_signals`` one with ``properties.traffic_signal_penalty`` as duration.
    """
    id: int
    obstacles: tuple[Obstacle, ...] = ()

    @property
    def barrier(self) -> bool:
        """Whether a ``barrier`` obstacle is at the node (osrm-extract lets no route pass it)."""
        return any(o.type == "barrier" for o in self.obstacles)

    @property
    def traffic_signals(self) -> bool:
        """Whether a ``traffic_signals`` obstacle is at the node (in some direction)."""
        return any(o.type == "traffic_signals" for o in self.obstacles)


@dataclass(frozen=True, slots=True)
class WayResult:
    """``process_way``'s result: every field osrm-extract reads from ``ExtractionWay``.

    Unset fields keep osrm-extract's defaults (``ExtractionWay::clear``): speeds, rates, duration and
    weight -1, modes 0 (inaccessible), strings empty, ``is_startpoint`` true, road priority class 31.

    Attributes
    ----------
    id : int
        The OSM way id.
    forward_mode, backward_mode : int
        Travel modes (:data:`TRAVEL_MODES`); 0: not usable in that direction.
    forward_speed, backward_speed : float
        km/h.
    forward_rate, backward_rate : float
        Weight rate: metres per weight unit (weight of a segment = length / rate).
    duration, weight : float
        Of the whole way (seconds / weight units) when > 0, e.g. a ferry's ``duration`` tag.
    name, forward_ref, backward_ref, pronunciation, destinations, exits : str
    turn_lanes_forward, turn_lanes_backward : str
    roundabout, circular, is_startpoint, forward_restricted, backward_restricted, is_left_hand_driving : bool
    highway_turn_classification, access_turn_classification : int
        4-bit user classes for turn functions.
    motorway_class, link_class, may_be_ignored : bool
        ``result.road_classification``'s flags as stored (osrm-extract's ``IsMotorwayClass()``, which a
        profile reads as ``road_classification.motorway_class``, is ``motorway_class and not link_class``;
        ``IsRampClass()`` is both).
    road_priority_class, num_lanes : int
        ``result.road_classification``'s priority (:data:`ROAD_PRIORITY_CLASSES`) and lane count.
    forward_classes, backward_classes : frozenset of str
        The class names set true (``exclude=`` classes; ``profile.classes``).
    """
    id: int
    forward_mode: int
    backward_mode: int
    forward_speed: float
    backward_speed: float
    forward_rate: float
    backward_rate: float
    duration: float
    weight: float
    name: str
    forward_ref: str
    backward_ref: str
    pronunciation: str
    destinations: str
    exits: str
    turn_lanes_forward: str
    turn_lanes_backward: str
    roundabout: bool
    circular: bool
    is_startpoint: bool
    forward_restricted: bool
    backward_restricted: bool
    is_left_hand_driving: bool
    highway_turn_classification: int
    access_turn_classification: int
    motorway_class: bool
    link_class: bool
    may_be_ignored: bool
    road_priority_class: int
    num_lanes: int
    forward_classes: frozenset = frozenset()
    backward_classes: frozenset = frozenset()
    #: ``properties.weight_name == "duration"`` of the profile that made it (weights follow durations)
    fallback_to_duration: bool = field(default=True, repr=False)

    @property
    def forward(self) -> bool:
        """Usable in the way's direction (osrm-extract's ``in_forward_direction``)."""
        return self.forward_mode != 0 and (self.forward_speed > 0 or self.forward_rate > 0
                                           or self.duration > 0 or self.weight > 0)

    @property
    def backward(self) -> bool:
        """Usable against the way's direction (osrm-extract's ``in_backward_direction``)."""
        return self.backward_mode != 0 and (self.backward_speed > 0 or self.backward_rate > 0
                                            or self.duration > 0 or self.weight > 0)

    @property
    def kept(self) -> bool:
        """Whether osrm-extract keeps the way (``ExtractorCallbacks::ProcessWay``'s two checks): a
        speed or duration in some usable direction, and unless weights fall back to durations, a rate
        or weight too. (It also drops ways of fewer than two nodes.)"""
        if ((self.forward_mode == 0 or self.forward_speed <= 0)
                and (self.backward_mode == 0 or self.backward_speed <= 0) and self.duration <= 0):
            return False
        if (not self.fallback_to_duration
                and (self.forward_mode == 0 or self.forward_rate <= 0)
                and (self.backward_mode == 0 or self.backward_rate <= 0) and self.weight <= 0):
            return False
        return True

    @property
    def road_classification(self) -> dict:
        """``result.road_classification`` as a dict."""
        return {"motorway_class": self.motorway_class, "link_class": self.link_class,
                "may_be_ignored": self.may_be_ignored, "road_priority_class": self.road_priority_class,
                "num_lanes": self.num_lanes}


@dataclass(frozen=True, slots=True)
class TurnLeg:
    """One road at a turn's intersection (``ExtractionTurnLeg``): ``speed`` km/h (int), ``distance`` m."""
    is_restricted: bool = False
    is_motorway: bool = False
    is_link: bool = False
    number_of_lanes: int = 0
    highway_turn_classification: int = 0
    access_turn_classification: int = 0
    speed: int = 0
    distance: float = 0.0
    priority_class: int = ROAD_PRIORITY_CLASSES["connectivity"]
    is_incoming: bool = False
    is_outgoing: bool = False


@dataclass(frozen=True, slots=True)
class TurnInput:
    """A turn for :meth:`LuaProfile.process_turn` (``ExtractionTurn``; see the module docstring for how
    osrm-extract computes each field).

    ``angle``: degrees, positive = right, negative = left (``180 -`` OSRM's turn angle); ``from_``,
    ``via``, ``to``: OSM node ids (``turn.from`` in Lua); ``number_of_roads`` ``None``: computed from
    the legs.
    """
    angle: float
    from_: int = 0
    via: int = 0
    to: int = 0
    number_of_roads: int | None = None
    is_u_turn: bool = False
    is_left_hand_driving: bool = False
    source_restricted: bool = False
    source_mode: int = TRAVEL_MODES["driving"]
    source_is_motorway: bool = False
    source_is_link: bool = False
    source_number_of_lanes: int = 0
    source_highway_turn_classification: int = 0
    source_access_turn_classification: int = 0
    source_speed: int = 0
    source_priority_class: int = ROAD_PRIORITY_CLASSES["connectivity"]
    source_is_roundabout: bool = False
    target_restricted: bool = False
    target_mode: int = TRAVEL_MODES["driving"]
    target_is_motorway: bool = False
    target_is_link: bool = False
    target_number_of_lanes: int = 0
    target_highway_turn_classification: int = 0
    target_access_turn_classification: int = 0
    target_speed: int = 0
    target_priority_class: int = ROAD_PRIORITY_CLASSES["connectivity"]
    target_is_roundabout: bool = False
    source_road: TurnLeg = TurnLeg(is_incoming=True)
    target_road: TurnLeg = TurnLeg(is_outgoing=True)
    roads_on_the_right: tuple[TurnLeg, ...] = ()
    roads_on_the_left: tuple[TurnLeg, ...] = ()

    def roads(self) -> int:
        """``number_of_roads`` as osrm-extract computes it from the legs (or the one given)."""
        computed = len(self.roads_on_the_right) + len(self.roads_on_the_left) + 2 - bool(self.is_u_turn)
        return computed if self.number_of_roads is None else int(self.number_of_roads)

    @classmethod
    def fake(cls, from_, via, to, source_road: TurnLeg, target_road: TurnLeg) -> "TurnInput":
        """osrm-extract's turn at a compressed degree-2 node with obstacles (``graph_compressor.cpp``):
        angle 180, two roads, no u-turn, right-hand driving, both sides driving, unrestricted, one lane,
        speed and priority 0."""
        return cls(angle=180.0, from_=from_, via=via, to=to, number_of_roads=2, source_number_of_lanes=1,
                   target_number_of_lanes=1, source_priority_class=0, target_priority_class=0,
                   source_road=source_road, target_road=target_road)


@dataclass(frozen=True, slots=True)
class SegmentInput:
    """A segment for :meth:`LuaProfile.process_segment` (``ExtractionSegment``): coordinates in degrees
    (rounded to 1e-6 as osrm-extract does), ``distance`` metres, ``weight`` / ``duration`` (s) of the
    segment, and its edge flags."""
    source_lon: float
    source_lat: float
    target_lon: float
    target_lat: float
    distance: float
    weight: float
    duration: float
    forward: bool = True
    backward: bool = True
    is_split: bool = False
    roundabout: bool = False
    circular: bool = False
    startpoint: bool = True
    restricted: bool = False
    highway_turn_classification: int = 0
    access_turn_classification: int = 0
    motorway_class: bool = False
    link_class: bool = False
    may_be_ignored: bool = False
    road_priority_class: int = ROAD_PRIORITY_CLASSES["connectivity"]
    num_lanes: int = 0


@dataclass(frozen=True, slots=True)
class ProfileProperties:
    """osrm-extract's ``ProfileProperties`` as read from ``setup().properties`` (OSRM's defaults where
    the profile sets nothing).

    ``traffic_signal_penalty`` and ``u_turn_penalty`` are seconds, kept by osrm-extract as whole
    deciseconds of the integer the profile gives; ``max_speed_for_map_matching`` m/s;
    ``weight_multiplier`` = ``10 ** weight_precision``; ``max_turn_weight`` = 32767 / weight_multiplier.
    """
    weight_name: str = "duration"
    traffic_signal_penalty: float = 0.0
    u_turn_penalty: float = 0.0
    max_speed_for_map_matching: float = 180 / 3.6
    max_collapse_distance: float = 30.0
    continue_straight_at_waypoint: bool = True
    use_turn_restrictions: bool = False
    left_hand_driving: bool = False
    weight_precision: int = 1
    force_split_edges: bool = False
    call_tagless_node_function: bool = True
    area_walking_speed: float = 1.4
    area_emit_visibility_graph: bool = False

    @property
    def fallback_to_duration(self) -> bool:
        """Turn and way weights are the durations (``weight_name == "duration"``)."""
        return self.weight_name == "duration"

    @property
    def weight_multiplier(self) -> float:
        return 10.0 ** self.weight_precision

    @property
    def max_turn_weight(self) -> float:
        return _MAX_TURN_PENALTY / self.weight_multiplier


# ---------------------------------------------------------------------------------------------- durations
# osrm-extract's durationIsValid / parseDuration (include/extractor/extraction_helper_functions.hpp): a
# Boost.Spirit X3 grammar, PEG semantics (the first alternative that matches wins, no backtracking into
# it); all arithmetic in 32-bit unsigned.
_U32 = 0xFFFFFFFF


def _uint(s, i, lo=1, hi=None):
    j, n, v = i, len(s), 0
    while j < n and "0" <= s[j] <= "9" and (hi is None or j - i < hi):
        v = v * 10 + (ord(s[j]) - 48)
        if v > _U32:
            return None
        j += 1
    return (v, j) if j - i >= lo else None


def _osm_time(s, i):
    a = _uint(s, i, 1, 2)
    if a is None:
        return None
    h, j = a
    if j < len(s) and s[j] == ":":
        b = _uint(s, j + 1, 1, 2)
        if b is not None:
            m, k = b
            if k < len(s) and s[k] == ":":
                c = _uint(s, k + 1, 1, 2)
                if c is not None and c[1] == len(s):
                    return (h * 3600 + m * 60 + c[0]) & _U32, c[1]
            if k == len(s):
                return (h * 3600 + m * 60) & _U32, k
    if j == len(s):
        return (h * 60) & _U32, j
    return None


def _two(s, i, limit):
    r = _uint(s, i, 2, 2)
    return r if r is not None and r[0] < limit else None


def _time_or_datetime(s, i):
    # alternative_time: 'T' hh mm ss
    if i < len(s) and s[i] == "T":
        h = _two(s, i + 1, 24)
        m = h and _two(s, h[1], 60)
        sec = m and _two(s, m[1], 60)
        if sec:
            return (h[0] * 3600 + m[0] * 60 + sec[0]) & _U32, sec[1]
        # extended_time: 'T' hh ':' mm ':' ss
        h = _two(s, i + 1, 24)
        if h and h[1] < len(s) and s[h[1]] == ":":
            m = _two(s, h[1] + 1, 60)
            if m and m[1] < len(s) and s[m[1]] == ":":
                sec = _two(s, m[1] + 1, 60)
                if sec:
                    return (h[0] * 3600 + m[0] * 60 + sec[0]) & _U32, sec[1]
    # date_time_duration: -(uint 'D') >> -('T' >> -(uint 'H') >> -(uint 'M') >> -(uint 'S'))
    days, j = 0, i
    d = _uint(s, j)
    if d and d[1] < len(s) and s[d[1]] in "Dd":
        days, j = (d[0] * 86400) & _U32, d[1] + 1
    t = 0
    if j < len(s) and s[j] == "T":
        j += 1
        for unit, mult in (("Hh", 3600), ("Mm", 60), ("Ss", 1)):
            u = _uint(s, j)
            if u and u[1] < len(s) and s[u[1]] in unit:
                t, j = (t + u[0] * mult) & _U32, u[1] + 1
    return (days + t) & _U32, j


def _iso_period(s):
    r = _osm_time(s, 0)
    if r is not None:
        return r[0]
    if s.startswith("P"):
        w = _uint(s, 1)
        if w and w[1] < len(s) and s[w[1]] in "Ww" and w[1] + 1 == len(s):
            return (w[0] * 604800) & _U32
        v, j = _time_or_datetime(s, 1)
        if j == len(s):
            return v
    return None


def duration_is_valid(s: str) -> bool:
    """osrm-extract's ``durationIsValid``: ``"H:M:S"``, ``"H:M"``, ``"M"`` (1-2 digits each) or an
    ISO 8601 period (``PnW``, ``PnDTnHnMnS``, ``PThhmmss``, ``PThh:mm:ss``)."""
    return bool(s) and _iso_period(s) is not None


def parse_duration(s: str) -> int:
    """osrm-extract's ``parseDuration``: seconds (32-bit unsigned), 4294967295 for an invalid string."""
    v = _iso_period(s) if s else None
    return _U32 if v is None else v


# ---------------------------------------------------------------------------------------------- obstacles
class ObstacleMap:
    """osrm-extract's ``ObstacleMap``, keyed by OSM node ids: the obstacles at each node, each with the
    node a route must come from for it to apply (``None``: from anywhere).

    :meth:`add` records what ``process_node`` placed; :meth:`prepare` resolves directional obstacles
    against the kept ways (``ObstacleMap::preProcess`` + ``fixupNodes``); :meth:`get` / :meth:`any`
    answer like the Lua ``obstacle_map:get`` / ``any``.
    """

    def __init__(self):
        self._pending: list[tuple[int, Obstacle]] = []
        self._extra: list[tuple[int, int | None, Obstacle]] = []
        self._at: dict[int, list[tuple[int | None, Obstacle]]] | None = None
        self._generation = 0

    def add(self, node_id: int, obstacle: Obstacle) -> None:
        """An obstacle at ``node_id`` (``obstacle_map:add``): directional ones are resolved by
        :meth:`prepare`."""
        self._pending.append((int(node_id), obstacle))
        self._at = None

    def add_from(self, from_id: int | None, node_id: int, obstacle: Obstacle) -> None:
        """An obstacle at ``node_id`` that applies when coming from ``from_id`` (``None``: any)."""
        self._extra.append((int(node_id), None if from_id is None else int(from_id), obstacle))
        self._at = None

    def __len__(self):
        return len(self._pending) + len(self._extra)

    @property
    def prepared(self) -> bool:
        return self._at is not None

    def prepare(self, way_node_lists: Iterable[Sequence[int]]) -> None:
        """Give each ``forward`` (``backward``) obstacle the node before (after) it on every kept way
        through it, in the way's order, as osrm-extract does (a way through the node twice counts
        twice; the first occurrence decides). ``none`` and ``both`` apply from every side.

        Parameters
        ----------
        way_node_lists : iterable of sequences of int
            The node ids of each way osrm-extract keeps (:attr:`WayResult.kept`), in file order.
        """
        directional = {n for n, o in self._pending if o.direction in ("forward", "backward")}
        at: dict[int, list] = {}
        resolved = []
        if directional:
            occurrences: dict[int, list] = {}
            for nodes in way_node_lists:
                nodes = list(nodes)
                for nid in nodes:
                    if nid in directional:
                        occurrences.setdefault(nid, []).append(nodes)
            for nid, o in self._pending:
                if o.direction not in ("forward", "backward"):
                    continue
                fwd = o.direction == "forward"
                for nodes in occurrences.get(nid, ()):
                    lo, hi = (1, len(nodes)) if fwd else (0, len(nodes) - 1)
                    for k in range(lo, hi):
                        if nodes[k] == nid:
                            resolved.append((nid, nodes[k - 1] if fwd else nodes[k + 1], o))
                            break
        for nid, o in self._pending:
            if o.direction not in ("forward", "backward"):
                at.setdefault(nid, []).append((None, o))
        for nid, frm, o in chain(resolved, self._extra):
            at.setdefault(nid, []).append((frm, o))
        self._at = at
        self._generation += 1

    def _entries(self):
        if self._at is None:
            raise RuntimeError("ObstacleMap.prepare() has not run since the last add")
        return self._at

    def get(self, from_id: int | None, node_id: int, types: Iterable[str] | None = None) -> list[Obstacle]:
        """The obstacles at ``node_id`` met when coming from ``from_id`` (``None``: all of them), of
        the given types (default: all)."""
        mask = 0xFFFF if types is None else sum(OBSTACLE_TYPES[t] for t in set(types))
        return [o for f, o in self._entries().get(int(node_id), ())
                if (from_id is None or f is None or f == from_id) and OBSTACLE_TYPES[o.type] & mask]

    def any(self, from_id: int | None, node_id: int, types: Iterable[str] | None = None) -> bool:
        return bool(self.get(from_id, node_id, types))

    def nodes(self) -> list[int]:
        """The node ids with obstacles (after :meth:`prepare`)."""
        return sorted(self._entries())

    def _flat(self):
        out = []
        for nid, entries in self._entries().items():
            for frm, o in entries:
                out += (nid, frm, OBSTACLE_TYPES[o.type], OBSTACLE_DIRECTIONS[o.direction], o.duration,
                        o.weight)
        return out


# ---------------------------------------------------------------------------------------------- the profile
def _lround6(x):
    # osrm-extract's toFixed: lround(x * 1e6) (half away from zero), back to degrees
    return _llround(x * 1e6) / 1e6


def _llround(x):
    # C's llround: to the nearest integer, halves away from zero
    if not math.isfinite(x):
        return 0
    return int(math.copysign(math.floor(abs(x) + 0.5), x))


def _to_python(v, depth=0):
    if depth > 32 or not hasattr(v, "items"):
        return v
    items = list(v.items())
    keys = [k for k, _ in items]
    if keys and all(isinstance(k, int) for k in keys) and sorted(keys) == list(range(1, len(keys) + 1)):
        return [_to_python(x, depth + 1) for _, x in sorted(items)]
    return {k: _to_python(x, depth + 1) for k, x in items}


class LuaProfile:
    """An OSRM profile (API version 4) loaded from a Lua file; see the module docstring.

    Parameters
    ----------
    path : str or os.PathLike
        The profile (``car.lua``, ...). Its folder goes first on ``package.path``, as osrm-extract does
        (so ``require("lib/set")`` finds ``<folder>/lib/set.lua``).

    Raises
    ------
    FileNotFoundError
        No such file.
    LuaProfileError
        The file does not parse, raises while loading or in ``setup()``, returns no function table or
        ``setup()`` returns no table; the message names the file and line.
    UnsupportedProfileAPI
        ``api_version`` is not 4, or the file or ``setup()`` uses an unsupported API (by name).
    MissingExtraError
        lupa is not installed (``pip install 'gpuroute[lua]'``).
    """

    def __init__(self, path):
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"Lua profile {self.path}: no such file")
        self.path = self.path.resolve()
        try:
            lupa = require("lupa.lua55", "gpuroute.io.lua_profile (running OSRM Lua profiles)")
        except MissingExtraError:
            lupa = require("lupa.lua54", "gpuroute.io.lua_profile (running OSRM Lua profiles)")
        self._lupa = lupa
        self.lua = lupa.LuaRuntime(register_eval=False, register_builtins=False)
        self.lua.globals().python = None
        self.lua_version = self.lua.lua_version
        self._batch_ways: list = []
        self._batch_turns: list = []
        self.obstacle_map = ObstacleMap()
        self._uploaded = None
        callbacks = self.lua.table_from({
            "duration_is_valid": duration_is_valid,
            "parse_duration": parse_duration,
            "way_nodes": self._way_nodes,
            "turn_legs": self._turn_legs,
        })
        self._rt = self.lua.execute(_RUNTIME.read_text(), callbacks, name="=gpuroute-lua-runtime")
        rt = self._rt
        self._drivers = {k: rt[k] for k in ("process_nodes", "process_ways", "process_turns",
                                            "process_segments", "clear_obstacles", "add_obstacles",
                                            "clear_relations", "add_relations")}
        self._make_leg, self._list = rt["make_leg"], rt["list"]

        ret = rt["load"](str(self.path), str(self.path.parent))
        if not ret[0]:
            self._raise(ret[1], None)
        api_version, functions = ret[1], ret[2]
        self.api_version = int(api_version)
        if self.api_version != 4:
            raise UnsupportedProfileAPI(
                f"Lua profile {self.path}: profile API version {self.api_version} is not supported "
                f"(gpuroute runs api_version = 4 profiles, OSRM's current API"
                + ("; the file sets no api_version, which osrm-extract reads as 0" if api_version == 0
                   else "") + ")",
                api=f"api_version {self.api_version}", profile=str(self.path), path=str(self.path))
        ret = rt["setup"](functions)
        if not ret[0]:
            self._raise(ret[1], None)
        _, self._table, has_node, has_way, has_turn, has_segment = ret
        self.has_node_function, self.has_way_function = bool(has_node), bool(has_way)
        self.has_turn_function, self.has_segment_function = bool(has_turn), bool(has_segment)
        for name in ("process_node", "process_way", "process_turn", "process_segment"):
            f = functions[name]
            if f is not None and self._lupa.lua_type(f) != "function":
                raise LuaProfileError(f"Lua profile {self.path}: the function table's {name} is a "
                                      f"{self._lupa.lua_type(f) or type(f).__name__}, not a function",
                                      profile=str(self.path), path=str(self.path))
        self.properties = self._read_properties()
        rt["set_traffic_signal_penalty"](self.properties.traffic_signal_penalty)
        rt["set_turn_properties"](self.properties.fallback_to_duration, self.properties.max_turn_weight)
        self.classes = tuple(self._string_list("classes"))
        self.excludable = tuple(tuple(x) for x in self._string_lists("excludable"))
        self.suffix_list = tuple(self._string_list("suffix_list"))
        self.restrictions = tuple(self._string_list("restrictions"))
        self.relation_types = tuple(self._string_list("relation_types"))

    def __repr__(self):
        return (f"LuaProfile({str(self.path)!r}, weight_name={self.properties.weight_name!r}, "
                f"lua={self.lua_version[0]}.{self.lua_version[1]})")

    # ------------------------------------------------------------------ errors
    def _raise(self, err, what):
        msg, src, line, tb = err[1], err[2], err[3], err[4]
        msg = str(msg)
        path = None
        if isinstance(src, str) and src.startswith("@"):
            path = src[1:]
        m = re.search(r"error loading module '[^']*' from file '([^']+)':\s*\S*?:(\d+):", msg)
        if m:  # a library that does not parse: require's message names it (the frame is the require)
            path, line = m.group(1), int(m.group(2))
        if not line:
            # a syntax error: Lua's "chunk:line: message" (the chunk name may be shortened with "...")
            m = re.match(r"^(.*?):(\d+): ", msg)
            if m:
                line = int(m.group(2))
                head = m.group(1)
                path = str(self.path) if (head.lstrip(".") and str(self.path).endswith(head.lstrip(".")))\
                    else head
        line = int(line) if line else None
        where = f"{path}, line {line}" if path and line else (path or str(self.path))
        ctx = f" ({what})" if what else ""
        kw = dict(profile=str(self.path), path=path, line=line, lua_message=msg,
                  traceback=str(tb) if tb else "")
        i = msg.find(_UNSUPPORTED)
        if i >= 0:
            api = msg[i + len(_UNSUPPORTED):]
            api = api.split(" is not supported", 1)[0]
            raise UnsupportedProfileAPI(f"Lua profile {self.path}: {where}{ctx}: "
                                        f"{msg[i + len(_UNSUPPORTED):]}", api=api, **kw)
        if msg.startswith("gpuroute-class: "):
            raise LuaProfileError(f"Lua profile {self.path}{ctx}: {msg[len('gpuroute-class: '):]}", **kw)
        raise LuaProfileError(f"Lua profile error at {where}{ctx}: {msg}", **kw)

    # ------------------------------------------------------------------ the profile table
    def get(self, key: str):
        """The profile table's (``setup()``'s return) entry ``key`` as Python data (tables become lists
        or dicts; ``None`` if absent)."""
        return _to_python(self._table[key])

    def _read_properties(self):
        props = self._table["properties"]
        if props is None or self._lupa.lua_type(props) != "table":
            return ProfileProperties()
        kw = {}

        def bad(key, v, what):
            # osrm-extract silently keeps its default for a value of another type; say so instead
            return LuaProfileError(f"Lua profile {self.path}: properties.{key} = {v!r} is not {what} "
                                   f"(osrm-extract would ignore it and keep its default)",
                                   profile=str(self.path), path=str(self.path))

        def num(key, integral=False):
            v = props[key]
            if v is None:
                return None
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise bad(key, v, "a number")
            # sol2 reads an integer property as llround(value)
            return _llround(v) if integral else v

        w = props["weight_name"]
        if w is not None:
            if not isinstance(w, str):
                raise bad("weight_name", w, "a string")
            kw["weight_name"] = w
        for key in ("traffic_signal_penalty", "u_turn_penalty"):
            v = num(key, integral=True)
            if v is not None:
                kw[key] = float(v)  # kept as int(10 * v) deciseconds
        for key in ("max_speed_for_map_matching", "max_collapse_distance", "area_walking_speed"):
            v = num(key)
            if v is not None:
                kw[key] = float(v)
        v = num("weight_precision", integral=True)
        if v is not None:
            kw["weight_precision"] = int(v)
        for key in ("continue_straight_at_waypoint", "use_turn_restrictions", "left_hand_driving",
                    "force_split_edges", "area_emit_visibility_graph"):
            v = props[key]
            if v is not None:
                if not isinstance(v, bool):
                    raise bad(key, v, "a boolean")
                kw[key] = v
        return ProfileProperties(**kw)

    def _string_list(self, name, table=None):
        t = self._table[name] if table is None else table
        if t is None:
            return []
        if self._lupa.lua_type(t) != "table":
            raise LuaProfileError(f"Lua profile {self.path}: profile.{name} must be a table",
                                  profile=str(self.path), path=str(self.path))
        out = []
        for k, v in t.items():
            # osrm-extract's GetSetOrSequenceValue: a Sequence's values, a Set's keys
            out.append(v if isinstance(v, str) else k)
        return [str(x) for x in out]

    def _string_lists(self, name):
        t = self._table[name]
        if t is None:
            return []
        out = []
        for k, inner in t.items():
            if self._lupa.lua_type(inner) != "table":
                raise LuaProfileError(f"Lua profile {self.path}: Expected a sub-table at {name}[{k}]",
                                      profile=str(self.path), path=str(self.path))
            out.append(self._string_list(name, inner))
        return out

    # ------------------------------------------------------------------ relations
    def set_relations(self, relations: Iterable) -> None:
        """The relations ``relations:get_relations(obj)`` / ``relations:relation(id)`` answer from:
        osrm-extract keeps those whose ``type`` tag is in :attr:`relation_types` (pass those, once,
        before processing nodes and ways).

        Parameters
        ----------
        relations : iterable of OsmRelation or (id, tags, members)
            ``members``: ``(type, ref, role)``, ``type`` one of ``"n"``, ``"w"``, ``"r"`` (or ``"node"``,
            ``"way"``, ``"relation"``, or osmium's item type numbers 1, 2, 3).

        Raises
        ------
        ValueError
            A member type that is none of those (naming the relation).
        """
        chunks, flat = [], []
        for rel in relations:
            rid, tags, members = rel[0], rel[1], rel[2] if len(rel) > 2 else ()
            tags = dict(tags)
            flat += (int(rid), len(tags))
            flat.extend(chain.from_iterable((str(k), str(v)) for k, v in tags.items()))
            members = list(members)
            flat.append(len(members))
            for m in members:
                t = m[0]
                code = t if t in (1, 2, 3) else _ITEM_TYPES.get(str(t).lower())
                if code is None:
                    raise ValueError(f"relation {rid}: member type {t!r} is none of n, w, r")
                flat += (code, int(m[1]), str(m[2]) if len(m) > 2 and m[2] is not None else "")
            if len(flat) > _MAX_FLAT:
                chunks.append(flat)
                flat = []
        chunks.append(flat)
        # checked first, applied whole
        self._drivers["clear_relations"]()
        for c in chunks:
            self._drivers["add_relations"](*c)

    # ------------------------------------------------------------------ nodes
    def process_node(self, node) -> NodeResult:
        """Run ``process_node`` on one node; see :meth:`process_nodes`."""
        return self.process_nodes([node])[0]

    def process_nodes(self, nodes: Iterable) -> list[NodeResult]:
        """Run ``process_node(profile, node, result, relations)`` on each node, in order.

        Parameters
        ----------
        nodes : iterable of OsmNode or (id, tags[, lon, lat])
            ``tags``: a mapping (or pairs) of str; ``lon``, ``lat``: degrees or ``None``.

        Returns
        -------
        list of NodeResult
            One per node; the obstacles are also added to :attr:`obstacle_map`.

        Raises
        ------
        LuaProfileError
            The profile raised (file, line and the node id in the message).
        """
        out: list[NodeResult] = []
        if not self.has_node_function:
            return [NodeResult(int(n[0])) for n in nodes]
        it = iter(nodes)
        while True:
            chunk = []
            flat = []
            for n in it:
                chunk.append(n)
                tags = n[1] if isinstance(n[1], Mapping) else dict(n[1])
                lon = n[2] if len(n) > 2 else None
                lat = n[3] if len(n) > 3 else None
                flat += (n[0], lon, lat, len(tags))
                flat.extend(chain.from_iterable(tags.items()))
                if len(chunk) >= LUA_BATCH or len(flat) > _MAX_FLAT:
                    break
            if not chunk:
                return out
            ret = self._drivers["process_nodes"](*flat)
            if ret is not True and not ret[0]:
                self._raise(ret[1], f"process_node, node {ret[2]}")
            vals = () if ret is True else ret[1:]
            found: dict[int, list] = {}
            for k in range(0, len(vals), 5):
                ob = Obstacle(_TYPE_NAMES[vals[k + 1]], _DIRECTION_NAMES[vals[k + 2]], vals[k + 3], vals[k + 4])
                found.setdefault(vals[k], []).append(ob)
            for b, n in enumerate(chunk):
                obs = found.get(b)
                nid = int(n[0])
                if obs:
                    for ob in obs:
                        self.obstacle_map.add(nid, ob)
                    out.append(NodeResult(nid, tuple(obs)))
                else:
                    out.append(NodeResult(nid))

    # ------------------------------------------------------------------ ways
    def _way_nodes(self, b):
        w = self._batch_ways[b]
        nodes = w[2] if len(w) > 2 else ()
        if len(nodes) == 0:
            raise ValueError(f"way {w[0]}: the profile asks for the way's nodes (way:get_nodes(), size() or "
                             "is_closed()) and the loader gave none (OsmWay.nodes)")
        flat = []
        for x in nodes:
            if isinstance(x, (tuple, list)):
                lon = x[1] if len(x) > 1 and x[1] is not None else False
                lat = x[2] if len(x) > 2 and x[2] is not None else False
                flat += (int(x[0]), lon, lat)
            else:
                flat += (int(x), False, False)
        return self.lua.table_from(flat)

    def process_way(self, way) -> WayResult:
        """Run ``process_way`` on one way; see :meth:`process_ways`."""
        return self.process_ways([way])[0]

    def process_ways(self, ways: Iterable) -> list[WayResult]:
        """Run ``process_way(profile, way, result, relations)`` on each way, in order.

        Parameters
        ----------
        ways : iterable of OsmWay or (id, tags[, nodes[, left_hand_traffic]])
            ``tags``: a mapping (or pairs) of str; ``nodes``: node ids or ``(id, lon, lat)`` (read only if
            the profile asks).

        Returns
        -------
        list of WayResult
            One per way (also for ways the profile ignores: see :attr:`WayResult.kept`).

        Raises
        ------
        LuaProfileError
            The profile raised (file, line and the way id in the message), asked for the nodes of a way
            given without them, or set a class name with characters other than [A-Za-z0-9] (as
            osrm-extract refuses).
        """
        out: list[WayResult] = []
        fallback = self.properties.fallback_to_duration
        it = iter(ways)
        empty = frozenset()
        while True:
            chunk = []
            flat = []
            for w in it:
                chunk.append(w)
                tags = w[1] if isinstance(w[1], Mapping) else dict(w[1])
                flat += (w[0], bool(w[3]) if len(w) > 3 else False, len(tags))
                flat.extend(chain.from_iterable(tags.items()))
                if len(chunk) >= LUA_BATCH or len(flat) > _MAX_FLAT:
                    break
            if not chunk:
                return out
            if not self.has_way_function:
                out += [WayResult(int(w[0]), 0, 0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, *([""] * 8),
                                  False, False, True, False, False, False, 0, 0, False, False, False, 31, 0,
                                  fallback_to_duration=fallback) for w in chunk]
                continue
            self._batch_ways = chunk
            try:
                ret = self._drivers["process_ways"](*flat)
            finally:
                self._batch_ways = []
            if not ret[0]:
                self._raise(ret[1], f"process_way, way {ret[2]}")
            vals = ret
            for b, w in enumerate(chunk):
                k = 1 + 31 * b
                v = vals[k:k + 31]
                fc, bc = v[29], v[30]
                out.append(WayResult(int(w[0]), *v[:29],
                                     frozenset(fc.split(",")) if fc else empty,
                                     frozenset(bc.split(",")) if bc else empty,
                                     fallback_to_duration=fallback))

    # ------------------------------------------------------------------ obstacles
    def prepare_obstacles(self, way_node_lists: Iterable[Sequence[int]]) -> None:
        """Resolve the obstacles' directions against the kept ways (:meth:`ObstacleMap.prepare`) and
        make the map available to ``obstacle_map:get`` / ``any`` in ``process_turn``. Call it after all
        nodes (and before turns); again after adding more obstacles."""
        self.obstacle_map.prepare(way_node_lists)
        self._upload_obstacles()

    def _upload_obstacles(self):
        m = self.obstacle_map
        if self._uploaded is not None and self._uploaded[0] is m and self._uploaded[1] == m._generation:
            return
        flat = m._flat()
        self._drivers["clear_obstacles"]()
        step = _MAX_FLAT // 6 * 6
        for i in range(0, len(flat), step):
            self._drivers["add_obstacles"](*flat[i:i + step])
        self._uploaded = (m, m._generation)

    # ------------------------------------------------------------------ turns
    def _leg(self, leg: TurnLeg):
        return self._make_leg(bool(leg.is_restricted), bool(leg.is_motorway), bool(leg.is_link),
                              int(leg.number_of_lanes), int(leg.highway_turn_classification),
                              int(leg.access_turn_classification), int(leg.speed), float(leg.distance),
                              int(leg.priority_class), bool(leg.is_incoming), bool(leg.is_outgoing))

    def _turn_legs(self, b, which):
        t = self._batch_turns[b]
        if which == 0:
            return self._leg(t.source_road)
        if which == 1:
            return self._leg(t.target_road)
        legs = t.roads_on_the_right if which == 2 else t.roads_on_the_left
        return self._list(*[self._leg(x) for x in legs])

    def process_turn(self, turn: TurnInput) -> tuple[float, float]:
        """Run ``process_turn`` on one turn; see :meth:`process_turns`."""
        d, w = self.process_turns([turn])
        return float(d[0]), float(w[0])

    def process_turns(self, turns: Iterable[TurnInput]) -> tuple[np.ndarray, np.ndarray]:
        """Run ``process_turn(profile, turn)`` on each turn.

        Parameters
        ----------
        turns : iterable of TurnInput

        Returns
        -------
        durations, weights : ndarray of float64, shape (n,)
            Seconds and weight units, after osrm-extract's post-processing (module docstring).

        Raises
        ------
        RuntimeError
            :meth:`prepare_obstacles` has not run.
        ValueError
            ``number_of_roads`` given and unequal to the legs' count.
        LuaProfileError
            The profile raised (file, line and the turn's index in the message).
        """
        if not self.obstacle_map.prepared:
            raise RuntimeError(f"Lua profile {self.path}: call prepare_obstacles() before process_turn "
                               "(osrm-extract sorts its obstacle map after reading every node)")
        self._upload_obstacles()
        durations, weights = [], []
        it = iter(turns)
        base = 0
        while True:
            chunk = []
            flat = []
            for t in it:
                chunk.append(t)
                n_roads = t.roads()
                if (t.number_of_roads is not None and (t.roads_on_the_right or t.roads_on_the_left)
                        and n_roads != len(t.roads_on_the_right) + len(t.roads_on_the_left) + 2
                        - bool(t.is_u_turn)):
                    raise ValueError(f"turn {base + len(chunk) - 1}: number_of_roads={t.number_of_roads} "
                                     f"but {len(t.roads_on_the_right)} roads on the right and "
                                     f"{len(t.roads_on_the_left)} on the left")
                flat += (float(t.angle), n_roads, bool(t.is_u_turn), bool(t.is_left_hand_driving),
                         int(t.from_), int(t.via), int(t.to),
                         bool(t.source_restricted), int(t.source_mode), bool(t.source_is_motorway),
                         bool(t.source_is_link), int(t.source_number_of_lanes),
                         int(t.source_highway_turn_classification), int(t.source_access_turn_classification),
                         int(t.source_speed), int(t.source_priority_class), bool(t.source_is_roundabout),
                         bool(t.target_restricted), int(t.target_mode), bool(t.target_is_motorway),
                         bool(t.target_is_link), int(t.target_number_of_lanes),
                         int(t.target_highway_turn_classification), int(t.target_access_turn_classification),
                         int(t.target_speed), int(t.target_priority_class), bool(t.target_is_roundabout))
                if len(chunk) >= LUA_BATCH:
                    break
            if not chunk:
                break
            self._batch_turns = chunk
            try:
                ret = self._drivers["process_turns"](*flat)
            finally:
                self._batch_turns = []
            if not ret[0]:
                self._raise(ret[1], f"process_turn, turn {base + ret[2]}")
            durations += ret[1::2]
            weights += ret[2::2]
            base += len(chunk)
        return np.asarray(durations, dtype=np.float64), np.asarray(weights, dtype=np.float64)

    # ------------------------------------------------------------------ segments
    def process_segment(self, segment: SegmentInput) -> tuple[float, float]:
        """Run ``process_segment`` on one segment; see :meth:`process_segments`."""
        d, w = self.process_segments([segment])
        return float(d[0]), float(w[0])

    def process_segments(self, segments: Iterable[SegmentInput]) -> tuple[np.ndarray, np.ndarray]:
        """Run ``process_segment(profile, segment)`` on each segment (the input's duration and weight
        come back unchanged where the profile has no such function).

        Returns
        -------
        durations, weights : ndarray of float64, shape (n,)
            Seconds and weight units; osrm-extract then stores ``max(1, round(10 * duration))``
            deciseconds and ``max(1, round(weight * weight_multiplier))``.

        Raises
        ------
        LuaProfileError
            The profile raised (file, line and the segment's index in the message).
        """
        if self.obstacle_map.prepared:
            self._upload_obstacles()
        durations, weights = [], []
        it = iter(segments)
        base = 0
        while True:
            flat = []
            n = 0
            for s in it:
                n += 1
                flat += (_lround6(s.source_lon), _lround6(s.source_lat), _lround6(s.target_lon),
                         _lround6(s.target_lat), float(s.distance), float(s.weight), float(s.duration),
                         bool(s.forward), bool(s.backward), bool(s.is_split), bool(s.roundabout),
                         bool(s.circular), bool(s.startpoint), bool(s.restricted),
                         int(s.highway_turn_classification), int(s.access_turn_classification),
                         bool(s.motorway_class), bool(s.link_class), bool(s.may_be_ignored),
                         int(s.road_priority_class), int(s.num_lanes))
                if n >= LUA_BATCH:
                    break
            if not n:
                break
            ret = self._drivers["process_segments"](*flat)
            if not ret[0]:
                self._raise(ret[1], f"process_segment, segment {base + ret[2]}")
            durations += ret[1::2]
            weights += ret[2::2]
            base += n
        return np.asarray(durations, dtype=np.float64), np.asarray(weights, dtype=np.float64)


def load_lua_profile(path) -> LuaProfile:
    """Load an OSRM Lua profile (API version 4): :class:`LuaProfile` ``(path)``."""
    return LuaProfile(path)
