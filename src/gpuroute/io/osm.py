"""OpenStreetMap extracts (``.osm.pbf``, ``.osm``, ``.osm.bz2``...) to a road graph, with routing profiles.

The car profile follows OSRM's ``profiles/car.lua`` (OSRM 5.x), simplified: no turn costs, barriers,
traffic signals, surface/smoothness limits, ferries or turn restrictions. Every OSM node used by a
routable way becomes a graph node, and every consecutive node pair of such a way becomes one arc per
allowed direction.

Reading needs pyosmium (``pip install gpuroute[osm]``); it is imported only when a file is loaded.
"""
from __future__ import annotations

import logging
import os
import re
from array import array
from dataclasses import dataclass, field

import numpy as np

from ..graph.errors import GraphError, ParseError
from ..graph.road_graph import RoadGraph

log = logging.getLogger(__name__)

#: Earth radius used for haversine distances, metres (the value OSRM uses).
EARTH_RADIUS_M = 6372797.560856

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


#: OSRM 5.x car profile, simplified (speeds in km/h).
CAR = Profile(
    name="car",
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
)

#: Routing profiles by name (add foot / bike here).
PROFILES = {"car": CAR}


def _import_osmium():
    try:
        import osmium
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("reading OpenStreetMap files needs pyosmium: pip install gpuroute[osm]") from e
    return osmium


def haversine_m(lon1, lat1, lon2, lat2):
    """Great-circle distance in metres between arrays of points given in degrees (float64)."""
    lon1, lat1, lon2, lat2 = (np.radians(np.asarray(a, dtype=np.float64)) for a in (lon1, lat1, lon2, lat2))
    s = np.sin((lat2 - lat1) / 2) ** 2 + np.cos(lat1) * np.cos(lat2) * np.sin((lon2 - lon1) / 2) ** 2
    return 2 * EARTH_RADIUS_M * np.arcsin(np.sqrt(np.minimum(s, 1.0)))


def _read_ways(path, profile, progress):
    """One pass over the file: node refs, fixed-point locations and speeds of every routable way."""
    osmium = _import_osmium()
    refs, xs, ys = array("q"), array("q"), array("q")
    starts, fwd, bwd = array("q", [0]), array("d"), array("d")
    n_highway = 0
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(desc=f"reading {os.path.basename(path)}", unit=" ways", delay=2.0, leave=False)
    try:
        fp = (osmium.FileProcessor(path, osmium.osm.NODE | osmium.osm.WAY)
              .with_locations()
              .with_filter(osmium.filter.EntityFilter(osmium.osm.WAY))
              .with_filter(osmium.filter.KeyFilter("highway")))
        for w in fp:
            n_highway += 1
            if bar is not None and n_highway % 1024 == 0:
                bar.update(1024)
            f, b = profile.way_speeds(w.tags)
            if f <= 0 and b <= 0:
                continue
            for nd in w.nodes:
                refs.append(nd.ref)
                xs.append(nd.x)
                ys.append(nd.y)
            starts.append(len(refs))
            fwd.append(f)
            bwd.append(b)
    except RuntimeError as e:  # libosmium reports unreadable input this way
        raise ParseError(path, None, f"cannot read OSM file: {e}") from None
    finally:
        if bar is not None:
            bar.close()
    return (np.frombuffer(refs, dtype=np.int64), np.frombuffer(xs, dtype=np.int64),
            np.frombuffer(ys, dtype=np.int64), np.frombuffer(starts, dtype=np.int64),
            np.frombuffer(fwd, dtype=np.float64), np.frombuffer(bwd, dtype=np.float64), n_highway)


def load_osm(path, *, profile="car", name=None, progress=True):
    """Load an OpenStreetMap extract as a directed road graph for one routing profile.

    Parameters
    ----------
    path : str or path-like
        ``.osm.pbf`` (or any format libosmium reads: ``.osm``, ``.osm.bz2``, ...).
    profile : str or Profile
        A name in :data:`PROFILES` (``"car"``) or a :class:`Profile`.
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
        * ``"distance"`` in metres: haversine length (radius 6372797.56 m), ``max(1, round(.))``.

        Parallel arcs (two ways joining the same nodes) keep the smallest value of each weight.
        Segments touching a node whose location is missing from the extract are dropped and counted in
        ``meta["segments_missing_location"]``.

    Raises
    ------
    ImportError
        pyosmium is not installed.
    FileNotFoundError
        The file does not exist.
    KeyError
        Unknown profile name (the message lists the known ones).
    ParseError
        libosmium cannot read the file (corrupt or truncated data), naming the file.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such file")
    if isinstance(profile, str):
        if profile not in PROFILES:
            raise KeyError(f"unknown profile {profile!r}; known profiles: {sorted(PROFILES)}")
        profile = PROFILES[profile]
    log.info("reading %s (profile %s)", path, profile.name)
    refs, xs, ys, starts, fwd, bwd, n_highway = _read_ways(path, profile, progress)
    n_ways = fwd.size
    lengths = np.diff(starts)
    way_of = np.repeat(np.arange(n_ways, dtype=np.int64), lengths)
    valid = (np.abs(xs) <= 1_800_000_000) & (np.abs(ys) <= 900_000_000)
    first = np.zeros(refs.size, dtype=bool)
    first[starts[:-1][lengths > 0]] = True
    # Segment i joins positions i and i+1 of the same way.
    seg = ~first[1:] & valid[:-1] & valid[1:] if refs.size else np.zeros(0, dtype=bool)
    n_missing = int((~first[1:] & ~(valid[:-1] & valid[1:])).sum()) if refs.size else 0
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
    fs, bs = fwd[sw], bwd[sw]
    fo, bo = fs > 0, bs > 0
    tail = np.concatenate([a[fo], b[bo]])
    head = np.concatenate([b[fo], a[bo]])
    d = np.concatenate([dist[fo], dist[bo]])
    speed = np.concatenate([fs[fo], bs[bo]])
    with np.errstate(divide="ignore"):
        tt = np.maximum(1, np.rint(d * 36.0 / speed)).astype(np.int64)  # m / (km/h) -> deciseconds
    dd = np.maximum(1, np.rint(d)).astype(np.int64)
    gname = name or re.sub(r"(\.osm)?(\.pbf|\.bz2|\.gz|\.o5m)?$", "", os.path.basename(path)) or "osm"
    meta = {"source": path, "format": "osm", "profile": profile.name, "highway_ways": n_highway,
            "routable_ways": int(n_ways), "segments": int(i.size),
            "segments_missing_location": n_missing}
    log.info("%s: %d routable ways, %d nodes, %d arcs before cleaning", path, n_ways, node_ids.size, tail.size)
    try:
        return RoadGraph.from_arcs(node_ids.size, tail, head, {"travel_time": tt, "distance": dd},
                                   units={"travel_time": "ds", "distance": "m"},
                                   coords=np.column_stack([lon, lat]), name=gname, node_ids=node_ids,
                                   coord_system="lonlat", meta=meta)
    except GraphError as e:  # pragma: no cover - the arrays are built valid above
        raise ParseError(path, None, str(e)) from None

