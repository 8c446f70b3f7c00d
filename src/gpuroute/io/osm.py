"""OpenStreetMap extracts (``.osm.pbf``, ``.osm``, ``.osm.bz2``...) to a road graph, with routing profiles.

Profiles. ``"car"``, ``"bicycle"`` and ``"foot"`` are OSRM's own ``car.lua``, ``bicycle.lua`` and
``foot.lua`` (profile API 4), run unchanged through gpuroute's Lua runtime
(:mod:`gpuroute.io.lua_profile`, :mod:`gpuroute.io.lua_extract`): the graph then carries OSRM's segment
durations and weights, obstacles and the cost of every turn (:class:`gpuroute.graph.TurnCosts`). A path
to any ``.lua`` file runs that profile the same way. OSRM's files are never copied into gpuroute: they
come from the ``osrm-bindings`` wheel (``pip install osrm-bindings``, or ``make osrm-bin`` into the
venv, or ``$GPUROUTE_OSRM_PROFILES``), and lupa runs them (``pip install 'gpuroute[lua]'``).

``"car-basic"`` (:data:`CAR`) is gpuroute's native profile, no Lua needed: OSRM 5.x's car speeds and
access rules, simplified. What it lacks next to car.lua: turn costs (car.lua's turn penalty by angle,
its oncoming-traffic penalty, the 20 s U-turn penalty), traffic-signal, stop, give-way and gate delays
and barriers, ``routability`` (it routes by duration and drops destination/private access instead of
penalising entry), ``construction``, tracks with an access tag, ferries and movable bridges,
surface/tracktype/smoothness speeds, width/height/weight limits, side-road and lane penalties, hov and
toll handling, ``oneway:motorcar``, and the service-road subtypes. The shipped ``monaco`` dataset is a
``car-basic`` graph. Every OSM node used by a routable way becomes a
graph node, and every consecutive node pair of such a way becomes one arc per allowed direction. Each
arc carries its OSM way id, road class, speed, exact length and street name as arc attributes, and turn
restriction relations (``type=restriction``, via a node) become the graph's
:class:`~gpuroute.graph.turns.TurnRestrictions`.

Reading needs pyosmium (``pip install gpuroute[osm]``); it is imported only when a file is loaded.
"""
from __future__ import annotations

import logging
import os
import re
from array import array
from dataclasses import dataclass, field

import numpy as np

from ..geo import EARTH_RADIUS_M as EARTH_RADIUS_M  # re-exported: the radius OSM lengths use
from ..geo import haversine_m
from ..graph.errors import GraphError, ParseError
from ..graph.road_graph import RoadGraph, merge_parallel
from ..graph.turns import NO, ONLY, TurnRestrictions
from ..graph.units import METRE, Unit

log = logging.getLogger(__name__)

#: Turn restriction values (OSM ``restriction=*``) and their kind: a forbidden turn or the only turn.
RESTRICTION_KINDS = {
    "no_left_turn": NO, "no_right_turn": NO, "no_straight_on": NO, "no_u_turn": NO, "no_entry": NO,
    "no_exit": NO, "only_left_turn": ONLY, "only_right_turn": ONLY, "only_straight_on": ONLY,
    "only_u_turn": ONLY,
}
_U_TURNS = frozenset({"no_u_turn", "only_u_turn"})

#: Units of the arc attributes :func:`load_osm` attaches.
OSM_ATTR_UNITS = {
    "way_id": Unit("id", "other", None, note="OpenStreetMap way id"),
    "road_class": Unit("code", "other", None, note="index into meta['road_classes'] (the highway=* value)"),
    "speed_kmh": Unit("km/h", "other", None, note="speed used for travel_time, kilometres per hour"),
    "length_m": METRE,
    "name_id": Unit("code", "other", None, note="index into meta['way_names'] (OSM name, else ref); -1: none"),
}

_MPH = 1.609344
_NUM_RE = re.compile(r"\s*(\d+(?:[.,]\d+)?)")
_ZONE_RE = re.compile(r"[a-z]{2}(?:-[a-z]+)?:([a-z_]+)")


@dataclass(frozen=True)
class Profile:
    """Which OSM ways a vehicle may use, in which directions, and how fast (km/h).

    Attributes
    ----------
    name : str
    highway_speeds : dict str -> float
        Default speed (km/h) of each routable ``highway=*`` value; other values are not routable.
    access_tags : tuple of str
        Access keys, most specific first; the first one present on a way decides.
    access_blacklist : frozenset of str
        Access values that close a way (``no``, ``private``, ...).
    maxspeed_table : dict str -> float
        Symbolic ``maxspeed`` values (lower case, e.g. ``"de:rural"``, ``"none"``) in km/h; 0 means
        "use the highway default".
    maxspeed_table_default : dict str -> float
        Fallback for ``XX:zone`` values by zone (``urban``, ``rural``, ``trunk``, ``motorway``).
    speed_reduction : float
        Factor applied to a tagged ``maxspeed`` (OSRM: 0.8, as traffic rarely runs at the limit).
    implied_oneway : frozenset of str
        ``highway`` values that are one-way unless tagged ``oneway=no``.
    forbidden : dict str -> frozenset of str
        Tag values that exclude a way (``area=yes``, ``service=emergency_access``, ...).
    obey_oneway : bool
        Honour ``oneway=*`` and implied one-ways (False for a profile that may go both ways).
    restriction_classes : tuple of str
        Vehicle classes whose turn restrictions apply, most specific first (OSRM car:
        ``motorcar, motor_vehicle, vehicle``): ``restriction:<class>=*`` overrides ``restriction=*``,
        and ``except=<class>`` exempts the profile. Empty: the profile ignores turn restrictions.
    """

    name: str
    highway_speeds: dict
    access_tags: tuple = ("motorcar", "motor_vehicle", "vehicle", "access")
    access_blacklist: frozenset = frozenset()
    maxspeed_table: dict = field(default_factory=dict)
    maxspeed_table_default: dict = field(default_factory=dict)
    speed_reduction: float = 1.0
    implied_oneway: frozenset = frozenset()
    forbidden: dict = field(default_factory=dict)
    obey_oneway: bool = True
    restriction_classes: tuple = ("motorcar", "motor_vehicle", "vehicle")

    @property
    def road_classes(self):
        """The routable ``highway`` values in a fixed order: ``road_class`` code ``i`` is
        ``road_classes[i]`` (list of str)."""
        return list(self.highway_speeds)

    def parse_maxspeed(self, value):
        """A ``maxspeed`` tag value in km/h (0 when absent or not understood).

        Numbers (``"50"``, ``"50 km/h"``, ``"30 mph"``), symbolic values (``"none"``, ``"DE:urban"``,
        ``"FR:rural"``, via :attr:`maxspeed_table`, then :attr:`maxspeed_table_default` by zone).
        """
        if not value:
            return 0.0
        s = value.strip().lower()
        mt = _NUM_RE.match(s)
        if mt:
            v = float(mt.group(1).replace(",", "."))
            if "mph" in s or "mp/h" in s:
                v *= _MPH
            return v
        if s in self.maxspeed_table:
            return float(self.maxspeed_table[s])
        mt = _ZONE_RE.fullmatch(s)
        if mt:
            return float(self.maxspeed_table_default.get(mt.group(1), 0.0))
        return 0.0

    def way_speeds(self, tags):
        """Forward and backward speed (km/h) of a way; 0 means that direction is closed.

        Parameters
        ----------
        tags : mapping-like with ``.get(key)``
            The way's tags (a pyosmium TagList or a dict).

        Returns
        -------
        (float, float)
            Speed along the way's node order and against it. ``(0, 0)``: not routable.
        """
        highway = tags.get("highway")
        default = self.highway_speeds.get(highway)
        if default is None:
            return 0.0, 0.0
        for key, values in self.forbidden.items():
            if tags.get(key) in values:
                return 0.0, 0.0
        for key in self.access_tags:
            a = tags.get(key)
            if a is not None:
                if a in self.access_blacklist:
                    return 0.0, 0.0
                break
        oneway = tags.get("oneway")
        if oneway in ("reversible", "alternating"):
            return 0.0, 0.0
        ms = self.parse_maxspeed(tags.get("maxspeed"))
        fwd_ms = self.parse_maxspeed(tags.get("maxspeed:forward")) or ms
        bwd_ms = self.parse_maxspeed(tags.get("maxspeed:backward")) or ms
        fwd = fwd_ms * self.speed_reduction if fwd_ms > 0 else float(default)
        bwd = bwd_ms * self.speed_reduction if bwd_ms > 0 else float(default)
        if self.obey_oneway:
            if oneway == "-1":
                fwd = 0.0
            elif oneway in ("yes", "1", "true"):
                bwd = 0.0
            elif oneway != "no" and (highway in self.implied_oneway
                                     or tags.get("junction") in ("roundabout", "circular")):
                bwd = 0.0
        return fwd, bwd


#: gpuroute's native car profile ``"car-basic"``: OSRM 5.x's car speeds and access rules, simplified
#: (km/h; what it lacks next to OSRM's car.lua: see the module docstring).
CAR = Profile(
    name="car-basic",
    highway_speeds={
        "motorway": 90, "motorway_link": 45,
        "trunk": 85, "trunk_link": 40,
        "primary": 65, "primary_link": 30,
        "secondary": 55, "secondary_link": 25,
        "tertiary": 40, "tertiary_link": 20,
        "unclassified": 25, "residential": 25,
        "living_street": 10, "service": 15,
    },
    access_tags=("motorcar", "motor_vehicle", "vehicle", "access"),
    access_blacklist=frozenset({"no", "private", "agricultural", "forestry", "emergency", "psv", "customers",
                                "delivery"}),
    maxspeed_table={
        "at:rural": 100, "at:trunk": 100, "be:motorway": 120, "ch:rural": 80, "ch:trunk": 100,
        "ch:motorway": 120, "cz:trunk": 0, "cz:motorway": 0, "de:living_street": 7, "de:rural": 100,
        "de:motorway": 0, "dk:rural": 80, "fr:rural": 80, "gb:nsl_single": 60 * _MPH,
        "gb:nsl_dual": 70 * _MPH, "gb:motorway": 70 * _MPH, "uk:nsl_single": 60 * _MPH,
        "uk:nsl_dual": 70 * _MPH, "uk:motorway": 70 * _MPH, "nl:rural": 80, "nl:trunk": 100,
        "no:rural": 80, "no:motorway": 110, "pl:rural": 100, "pl:motorway": 140, "ro:trunk": 100,
        "ru:living_street": 20, "ru:urban": 60, "ru:motorway": 110, "ua:urban": 60,
        "none": 140, "walk": 5,
    },
    maxspeed_table_default={"urban": 50, "rural": 90, "trunk": 110, "motorway": 130},
    speed_reduction=0.8,
    implied_oneway=frozenset({"motorway"}),
    forbidden={"area": frozenset({"yes"}), "impassable": frozenset({"yes"}),
               "status": frozenset({"impassable"}), "service": frozenset({"emergency_access"})},
    restriction_classes=("motorcar", "motor_vehicle", "vehicle"),
)

#: gpuroute's native routing profiles by name (no Lua needed); ``"car"``, ``"bicycle"`` and ``"foot"``
#: are OSRM's Lua profiles (:data:`gpuroute.io.lua_extract.OSRM_PROFILES`).
PROFILES = {"car-basic": CAR}


def _import_osmium():
    from ..extras import require

    return require("osmium", "reading OpenStreetMap files")


@dataclass
class _Extract:
    """What one pass over an OSM file keeps: routable ways (node refs, fixed-point locations, speeds,
    ids, road classes) and the turn restriction relations."""

    refs: np.ndarray        # int64 (total refs,): node ids of every routable way, way after way
    xs: np.ndarray          # int64: fixed-point longitude (1e-7 degree) of each ref; invalid if missing
    ys: np.ndarray          # int64: fixed-point latitude
    starts: np.ndarray      # int64 (n_ways + 1,): way i's refs are refs[starts[i]:starts[i+1]]
    fwd: np.ndarray         # float64 (n_ways,): km/h along the node order (0: closed)
    bwd: np.ndarray         # float64 (n_ways,): km/h against it
    way_ids: np.ndarray     # int64 (n_ways,): OSM way ids
    road_class: np.ndarray  # int8 (n_ways,): index into profile.road_classes
    name_id: np.ndarray     # int32 (n_ways,): index into names (-1: the way has neither name nor ref)
    names: list             # str: the distinct way names, in order of first appearance
    n_highway: int          # highway=* ways seen, routable or not
    relations: list         # (relation id, tags dict, [(member type, ref, role), ...]) of type=restriction*


def _read_extract(path, profile, progress):
    """One pass over the file: routable ways with their node locations, and restriction relations."""
    osmium = _import_osmium()
    refs, xs, ys = array("q"), array("q"), array("q")
    starts, fwd, bwd = array("q", [0]), array("d"), array("d")
    way_ids, road_class, name_id = array("q"), array("b"), array("i")
    names, name_code = [], {}
    class_code = {h: i for i, h in enumerate(profile.road_classes)}
    relations = []
    n_highway = 0
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(desc=f"reading {os.path.basename(path)}", unit=" ways", delay=2.0, leave=False)
    try:
        fp = (osmium.FileProcessor(path, osmium.osm.NODE | osmium.osm.WAY | osmium.osm.RELATION)
              .with_locations()
              .with_filter(osmium.filter.EntityFilter(osmium.osm.WAY | osmium.osm.RELATION))
              .with_filter(osmium.filter.KeyFilter("highway", "type")))
        for o in fp:
            if o.is_relation():
                rtype = o.tags.get("type", "")
                if rtype == "restriction" or rtype.startswith("restriction:"):
                    relations.append((o.id, {t.k: t.v for t in o.tags},
                                      [(m.type, m.ref, m.role) for m in o.members]))
                continue
            if "highway" not in o.tags:
                continue
            n_highway += 1
            if bar is not None and n_highway % 1024 == 0:
                bar.update(1024)
            f, b = profile.way_speeds(o.tags)
            if f <= 0 and b <= 0:
                continue
            for nd in o.nodes:
                refs.append(nd.ref)
                xs.append(nd.x)
                ys.append(nd.y)
            starts.append(len(refs))
            fwd.append(f)
            bwd.append(b)
            way_ids.append(o.id)
            road_class.append(class_code[o.tags.get("highway")])
            nm = (o.tags.get("name") or o.tags.get("ref") or "").strip()
            if nm:
                code = name_code.get(nm)
                if code is None:
                    code = name_code[nm] = len(names)
                    names.append(nm)
                name_id.append(code)
            else:
                name_id.append(-1)
    except RuntimeError as e:  # libosmium reports unreadable input this way
        raise ParseError(path, None, f"cannot read OSM file: {e}") from None
    finally:
        if bar is not None:
            bar.close()
    return _Extract(np.frombuffer(refs, dtype=np.int64), np.frombuffer(xs, dtype=np.int64),
                    np.frombuffer(ys, dtype=np.int64), np.frombuffer(starts, dtype=np.int64),
                    np.frombuffer(fwd, dtype=np.float64), np.frombuffer(bwd, dtype=np.float64),
                    np.frombuffer(way_ids, dtype=np.int64), np.frombuffer(road_class, dtype=np.int8),
                    np.frombuffer(name_id, dtype=np.int32), names, n_highway, relations)


#: Counters of :func:`parse_restriction` outcomes other than a usable restriction (see load_osm).
RESTRICTION_COUNTERS = ("not_for_profile", "except_skipped", "unknown_value", "unsupported_via_way",
                        "malformed", "unresolved")


def parse_restriction(tags, members, profile=CAR):
    """Read one OSM restriction relation for a profile (no graph needed).

    Parameters
    ----------
    tags : mapping str -> str
        The relation's tags (``type`` must be ``restriction`` or ``restriction:<class>``).
    members : iterable of (str, int, str)
        ``(type, ref, role)`` of each member: type ``"n"``, ``"w"`` or ``"r"``.
    profile : Profile

    Returns
    -------
    tuple
        ``(value, from_ways, via_node, to_ways)`` for a restriction that applies to ``profile``
        (``value`` a key of :data:`RESTRICTION_KINDS`, ``from_ways``/``to_ways`` tuples of way ids,
        ``via_node`` a node id); or ``(reason, None, None, None)`` with ``reason`` one of
        :data:`RESTRICTION_COUNTERS` except ``"unresolved"``, checked in this order:

        * ``not_for_profile``: no value applies to the profile (e.g. only ``restriction:hgv``, or
          ``type=restriction:bus``; also every relation when ``profile.restriction_classes`` is empty);
        * ``except_skipped``: ``except=*`` lists one of the profile's classes;
        * ``unknown_value``: a value that is not in :data:`RESTRICTION_KINDS`;
        * ``unsupported_via_way``: a ``via`` member is a way (not supported yet);
        * ``malformed``: not exactly one ``via`` node, no ``from``/``to`` way, a ``from``/``to``
          member that is not a way, several ``from`` ways (allowed for ``no_entry`` only) or several
          ``to`` ways (``no_exit`` only).
    """
    classes = tuple(profile.restriction_classes)
    if not classes:
        return "not_for_profile", None, None, None
    rtype = tags.get("type", "")
    value = None
    if rtype == "restriction":
        for c in classes:  # most specific first
            value = tags.get(f"restriction:{c}")
            if value:
                break
        value = value or tags.get("restriction")
    elif rtype.startswith("restriction:") and rtype[len("restriction:"):] in classes:
        value = tags.get(rtype) or tags.get("restriction")
    if not value:
        return "not_for_profile", None, None, None
    exempt = {v.strip() for v in tags.get("except", "").split(";")}
    if exempt & set(classes):
        return "except_skipped", None, None, None
    value = value.strip().lower()
    if value not in RESTRICTION_KINDS:
        return "unknown_value", None, None, None
    from_ways, to_ways, via_nodes = [], [], []
    bad = False
    for mtype, ref, role in members:
        if role == "via":
            if mtype == "w":
                return "unsupported_via_way", None, None, None
            if mtype == "n":
                via_nodes.append(int(ref))
            else:
                bad = True
        elif role in ("from", "to"):
            if mtype != "w":
                bad = True
            else:
                (from_ways if role == "from" else to_ways).append(int(ref))
    if (bad or len(via_nodes) != 1 or not from_ways or not to_ways
            or (len(from_ways) > 1 and value != "no_entry") or (len(to_ways) > 1 and value != "no_exit")):
        return "malformed", None, None, None
    return value, tuple(from_ways), via_nodes[0], tuple(to_ways)


def resolve_restrictions(relations, profile, node_ids, arc_tail, arc_head, arc_way, way_ids):
    """Turn restriction relations into (in, out) pairs of input arc positions.

    Returns ``(in_pos, out_pos, kind, meta)``: int64, int64, int8 arrays and the counts (see load_osm).
    """
    counts = dict.fromkeys(RESTRICTION_COUNTERS, 0)
    by_value = {}
    n_ambiguous = 0
    way_index = {int(w): i for i, w in enumerate(way_ids.tolist())}
    order = np.argsort(arc_way, kind="stable")
    way_first = np.searchsorted(arc_way[order], np.arange(way_ids.size + 1))
    ins, outs, kinds = [], [], []
    for _rid, tags, members in relations:
        value, from_ways, via, to_ways = parse_restriction(tags, members, profile)
        if from_ways is None:
            counts[value] += 1
            continue
        k = int(np.searchsorted(node_ids, via))
        if k >= node_ids.size or node_ids[k] != via:
            counts["unresolved"] += 1
            continue

        def arcs_at(ways, end, k=k):
            found, ambiguous = [], False
            for w in ways:
                i = way_index.get(w)
                if i is None:
                    continue
                a = order[way_first[i]:way_first[i + 1]]
                a = a[end[a] == k]
                ambiguous |= a.size > 1
                found.append(a)
            return (np.concatenate(found) if found else np.zeros(0, dtype=np.int64)), ambiguous

        a_in, amb_in = arcs_at(from_ways, arc_head)   # arcs of the from way(s) ending at via
        a_out, amb_out = arcs_at(to_ways, arc_tail)   # arcs of the to way(s) starting at via
        pi, po = np.repeat(a_in, a_out.size), np.tile(a_out, a_in.size)
        u_turn = arc_head[po] == arc_tail[pi]
        if value in _U_TURNS:
            if u_turn.any():
                pi, po = pi[u_turn], po[u_turn]
        else:
            pi, po = pi[~u_turn], po[~u_turn]
        if pi.size == 0:
            counts["unresolved"] += 1
            continue
        n_ambiguous += bool(amb_in or amb_out)
        by_value[value] = by_value.get(value, 0) + 1
        ins.append(pi)
        outs.append(po)
        kinds.append(np.full(pi.size, RESTRICTION_KINDS[value], dtype=np.int8))
    def cat(xs, dt):
        return np.concatenate(xs).astype(dt) if xs else np.zeros(0, dtype=dt)

    in_pos, out_pos, kind = cat(ins, np.int64), cat(outs, np.int64), cat(kinds, np.int8)
    meta = {"relations": len(relations), "applied": int(sum(by_value.values())),
            "by_value": dict(sorted(by_value.items())), **counts, "ambiguous": n_ambiguous,
            "pairs": int(in_pos.size), "dropped": 0}
    return in_pos, out_pos, kind, meta


def load_osm(path, *, profile="car", name=None, progress=True):
    """Load an OpenStreetMap extract as a directed road graph for one routing profile.

    Parameters
    ----------
    path : str or path-like
        ``.osm.pbf`` (or any format libosmium reads: ``.osm``, ``.osm.bz2``, ...).
    profile : str, path-like, Profile or LuaProfile
        ``"car"``, ``"bicycle"``, ``"foot"`` (OSRM's Lua profiles), a path to a ``.lua`` profile, a
        :class:`gpuroute.io.lua_profile.LuaProfile`: the graph is built as osrm-extract builds it
        (:func:`gpuroute.io.lua_extract.extract`: weights ``weight``, ``travel_time``, ``distance``,
        per-turn costs in ``turn_costs``; see that module for the arc attributes). A name in
        :data:`PROFILES` (``"car-basic"``) or a :class:`Profile`: gpuroute's native profile, described
        below.
    name : str, optional
        Graph name; default: the file name without ``.osm.pbf`` / ``.pbf`` / ``.osm``.
    progress : bool
        Show a tqdm bar (counting ``highway=*`` ways) if reading takes more than about 2 s.

    Returns
    -------
    RoadGraph
        Nodes: every OSM node that ends a kept segment (consecutive node pair of a routable way), in
        increasing OSM id order; ``node_ids`` (int64) holds the OSM ids and ``coords`` (n, 2) their
        longitude and latitude in degrees (``coord_system="lonlat"``). Arcs: one per segment and allowed
        direction. Weights, in this order (the first is the default metric, as OSRM routes by duration):

        * ``"travel_time"`` in deciseconds: ``max(1, round(length / speed))``, speed from the
          profile (a tagged ``maxspeed`` x 0.8, else the highway class default);
        * ``"distance"`` in metres: haversine length (:func:`gpuroute.geo.haversine_m`, the one
          Earth radius :data:`gpuroute.geo.EARTH_RADIUS_M` = 6,371,008.8 m), ``max(1, round(.))``.

        Arc attributes (``arc_attrs``, units in ``attr_units``, see :data:`OSM_ATTR_UNITS`):

        * ``"way_id"`` int64: the OSM way the segment belongs to;
        * ``"road_class"`` int8: code of the way's ``highway`` value, ``meta["road_classes"][code]``
          (the profile's routable values in a fixed order);
        * ``"speed_kmh"`` float32: the speed in km/h used for ``travel_time``;
        * ``"length_m"`` float64: the haversine length in metres before rounding;
        * ``"name_id"`` int32: the way's street name as an index into ``meta["way_names"]`` (list of
          str, distinct names in order of first appearance): the OSM ``name`` tag, else ``ref``
          (e.g. ``"A8"``); -1 where the way has neither. Present only when at least one routable way
          has a name or ref (``meta["way_names"]`` is then non-empty); the service layer reads a
          missing attribute as "no names".

        Parallel arcs (two ways joining the same nodes in the same direction) become ONE arc, the
        lightest by travel time (ties: the way read first), which keeps both weights and all
        attributes of that way. Segments touching a node whose location is missing from the extract
        (a way cut by the extract's boundary without its nodes) are dropped and counted in
        ``meta["segments_missing_location"]``; the routable ways with such nodes in
        ``meta["ways_missing_nodes"]`` and the distinct missing nodes in ``meta["nodes_missing_location"]``
        (also logged as a warning).

        ``turns`` is a :class:`~gpuroute.graph.turns.TurnRestrictions` (possibly empty) built from the
        restriction relations that apply to the profile (:func:`parse_restriction`), each resolved to
        ``(in_arc, out_arc)`` pairs: ``in_arc`` an arc of a ``from`` way that ends at the ``via`` node,
        ``out_arc`` an arc of a ``to`` way that starts there, ``kind`` NO (``no_*``) or ONLY
        (``only_*``). OSM wants ``from``/``to`` ways to end at the via node; where one passes through
        it, both of its arcs there qualify and every pair is kept (counted in ``meta["ambiguous"]``),
        except that for values other than ``no_u_turn``/``only_u_turn`` a pair that turns back onto
        the same node pair (a U-turn) is dropped, and for those two values only such U-turn pairs are
        kept when there are any. ``no_entry`` may have several ``from`` ways and ``no_exit`` several
        ``to`` ways (every combination). A pair on an arc that was merged into a parallel arc is moved
        to the kept arc (the same turn between the same nodes). ``turns.meta`` counts, per relation
        (``relations`` = their sum): ``applied`` (with ``by_value``, e.g. ``{"no_left_turn": 2}``),
        ``not_for_profile``, ``except_skipped``, ``unknown_value``, ``unsupported_via_way``,
        ``malformed`` (see :func:`parse_restriction`), and ``unresolved`` (the via node is not a graph
        node, or no arc of a from way ends there / of a to way starts there, e.g. a footway or a
        oneway leading away); plus ``ambiguous`` and ``pairs``. ``turns.counts()`` gives the pairs by
        kind.

        ``meta`` also holds ``road_classes``, ``way_names``, ``source``, ``profile``, ``highway_ways``
        (``highway=*`` ways read), ``routable_ways`` (those the profile may use), ``segments`` and the
        cleaning counts of :meth:`RoadGraph.from_arcs`. A file without a routable way gives a graph
        with no arcs (:func:`gpuroute.pipeline.build_dataset` refuses it, naming the counts).

    Raises
    ------
    ImportError
        pyosmium is not installed (:class:`gpuroute.extras.MissingExtraError`; also lupa for a Lua
        profile).
    FileNotFoundError
        The file does not exist; a ``.lua`` profile that does not exist; OSRM's profiles not found for
        ``"car"``/``"bicycle"``/``"foot"`` (the message says where it looked and how to get them).
    KeyError
        Unknown profile name (the message lists the known ones).
    ParseError
        libosmium cannot read the file (corrupt or truncated data), naming the file.
    LuaProfileError
        A Lua profile that does not parse or raises (naming its file and line); an unsupported profile
        API (:class:`gpuroute.io.lua_profile.UnsupportedProfileAPI`, by name).
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such file")
    _import_osmium()
    if not isinstance(profile, Profile):
        from .lua_extract import OSRM_PROFILES, extract, resolve_lua_profile

        if isinstance(profile, os.PathLike):
            profile = os.fspath(profile)
        if isinstance(profile, str) and profile in PROFILES:
            profile = PROFILES[profile]
        else:
            if isinstance(profile, str) and profile not in OSRM_PROFILES and not profile.endswith(".lua") \
                    and not os.path.isfile(profile):
                raise KeyError(f"unknown profile {profile!r}; known profiles: {sorted(PROFILES) + list(OSRM_PROFILES)} "
                               "or a path to an OSRM .lua profile")
            lua = resolve_lua_profile(profile)
            if lua is None:
                raise TypeError(f"profile must be a name, a .lua path, a Profile or a LuaProfile, got "
                                f"{type(profile).__name__}")
            log.info("reading %s (Lua profile %s)", path, lua.path)
            return extract(path, lua, name=name, progress=progress)
    log.info("reading %s (profile %s)", path, profile.name)
    ex = _read_extract(path, profile, progress)
    refs, xs, ys, starts = ex.refs, ex.xs, ex.ys, ex.starts
    n_ways = ex.fwd.size
    lengths = np.diff(starts)
    way_of = np.repeat(np.arange(n_ways, dtype=np.int64), lengths)
    valid = (np.abs(xs) <= 1_800_000_000) & (np.abs(ys) <= 900_000_000)
    first = np.zeros(refs.size, dtype=bool)
    first[starts[:-1][lengths > 0]] = True
    # Segment i joins positions i and i+1 of the same way.
    seg = ~first[1:] & valid[:-1] & valid[1:] if refs.size else np.zeros(0, dtype=bool)
    n_missing = int((~first[1:] & ~(valid[:-1] & valid[1:])).sum()) if refs.size else 0
    # ways with nodes the file does not hold (an extract cut without complete ways): counted, not silent
    ways_missing = int(np.unique(way_of[~valid]).size)
    nodes_missing = int(np.unique(refs[~valid]).size)
    if ways_missing:
        log.warning("%s: %d routable ways reference %d nodes missing from the file; %d of their segments are "
                    "dropped (meta['ways_missing_nodes'])", path, ways_missing, nodes_missing, n_missing)
    i = np.flatnonzero(seg)
    a_ref, b_ref = refs[i], refs[i + 1]
    sw = way_of[i]
    pos = np.concatenate([i, i + 1])
    node_ids, idx = np.unique(refs[pos], return_index=True)
    lon = xs[pos[idx]] / 1e7
    lat = ys[pos[idx]] / 1e7
    a = np.searchsorted(node_ids, a_ref)
    b = np.searchsorted(node_ids, b_ref)
    dist = haversine_m(lon[a], lat[a], lon[b], lat[b])
    fs, bs = ex.fwd[sw], ex.bwd[sw]
    fo, bo = fs > 0, bs > 0
    tail = np.concatenate([a[fo], b[bo]])
    head = np.concatenate([b[fo], a[bo]])
    arc_way = np.concatenate([sw[fo], sw[bo]])  # index of each arc's way
    d = np.concatenate([dist[fo], dist[bo]])
    speed = np.concatenate([fs[fo], bs[bo]])
    with np.errstate(divide="ignore"):
        tt = np.maximum(1, np.rint(d * 36.0 / speed)).astype(np.int64)  # m / (km/h) -> deciseconds
    dd = np.maximum(1, np.rint(d)).astype(np.int64)
    attrs = {"way_id": ex.way_ids[arc_way], "road_class": ex.road_class[arc_way],
             "speed_kmh": speed.astype(np.float32), "length_m": d}
    if ex.names:  # ways without any name or ref (hand-made extracts) add no attribute
        attrs["name_id"] = ex.name_id[arc_way]
    in_pos, out_pos, kind, tmeta = resolve_restrictions(ex.relations, profile, node_ids, tail, head, arc_way,
                                                         ex.way_ids)
    if in_pos.size:
        # A restriction names its ways; after parallel arcs merge, the same turn between the same nodes
        # goes through the kept arc, so point the pair there instead of letting from_arcs drop it.
        _, rep = merge_parallel(tail, head, tt)
        in_pos, out_pos = rep[in_pos], rep[out_pos]
        keep = (in_pos >= 0) & (out_pos >= 0)  # a self-loop segment is dropped, its pairs with it
        tmeta["dropped"] += int((~keep).sum())
        key = np.unique(np.stack([in_pos[keep], out_pos[keep], kind[keep]]), axis=1)
        in_pos, out_pos, kind = key[0], key[1], key[2].astype(np.int8)
    turns = TurnRestrictions(in_pos, out_pos, kind, meta=tmeta)
    gname = name or re.sub(r"(\.osm)?(\.pbf|\.bz2|\.gz|\.o5m)?$", "", os.path.basename(path)) or "osm"
    meta = {"source": path, "format": "osm", "profile": profile.name, "highway_ways": ex.n_highway,
            "routable_ways": int(n_ways), "segments": int(i.size),
            "segments_missing_location": n_missing, "ways_missing_nodes": ways_missing,
            "nodes_missing_location": nodes_missing, "road_classes": profile.road_classes,
            "way_names": list(ex.names)}
    log.info("%s: %d routable ways, %d nodes, %d arcs before cleaning, %d turn restriction pairs", path, n_ways,
             node_ids.size, tail.size, len(turns))
    try:
        return RoadGraph.from_arcs(node_ids.size, tail, head, {"travel_time": tt, "distance": dd},
                                   units={"travel_time": "ds", "distance": "m"},
                                   coords=np.column_stack([lon, lat]), name=gname, node_ids=node_ids,
                                   coord_system="lonlat", meta=meta, arc_attrs=attrs,
                                   attr_units=OSM_ATTR_UNITS, turns=turns)
    except GraphError as e:  # pragma: no cover - the arrays are built valid above
        raise ParseError(path, None, str(e)) from None
