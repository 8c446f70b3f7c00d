"""OpenStreetMap extracts with an OSRM Lua profile: osrm-extract's pipeline, into a RoadGraph with per-turn
costs.

:func:`extract` reads an OSM file once, runs the profile (:class:`gpuroute.io.lua_profile.LuaProfile`,
batch calls) on every tagged node and every way, and builds what osrm-extract builds:

* **segments** of the ways osrm-extract keeps (``WayResult.kept``), one arc per usable direction, with
  OSRM's segment **duration** (deciseconds: ``max(1, round(10 s))``) and **weight** (``max(1, round(w *
  10**weight_precision))`` in the unit of ``properties.weight_name``, e.g. car.lua's ``routability``),
  from the way's ``duration``/``weight`` split evenly over its segments, else from its speeds and rates
  over OSRM's segment length (``greatCircleDistance``: cheap-ruler on 1e-6 degree coordinates), through
  ``process_segment`` where the profile has one;
* **obstacles** placed by ``process_node`` (traffic signals, stop and give-way signs, barriers and gates
  with their direction and duration), resolved against the kept ways;
* **turn restrictions** (``properties.use_turn_restrictions``; the profile's ``restrictions`` classes);
* **turn costs**: every turn osrm-extract forms, with its ``process_turn`` duration and weight
  (:mod:`gpuroute.io.osrm_turns`), stored as :class:`gpuroute.graph.turn_costs.TurnCosts`.

The graph's weights, in order (the first is the routing weight): ``"weight"`` (the profile's weight, unit
``<weight_name>/10^p``), ``"travel_time"`` (deciseconds), ``"distance"`` (metres, ``max(1, round(.))``).
Arc attributes: ``way_id``, ``name_id`` (into ``meta["way_names"]``: the way's name, else its ref),
``road_class`` (OSRM's road priority class, names in ``meta["road_classes"]``), ``speed_kmh``,
``length_m`` (OSRM's segment length), ``mode`` (OSRM travel mode), ``classes`` (bit ``i`` is
``meta["classes"][i]``, for ``exclude=``), ``restricted`` (``access=destination``/``private`` etc.: OSRM
lets a route start or end there and charges entering it), ``is_startpoint`` (where a waypoint may snap),
``roundabout``.

Where the result differs from osrm-extract's (see :mod:`gpuroute.io.osrm_turns` for the turns and
the measured agreement): parallel ways between two nodes are one arc (the lightest, as
``RoadGraph.from_arcs`` keeps); via-way and conditional restrictions are not read; location-dependent
data and the driving-side index are absent (``way:is_left_hand_traffic()`` is false: right-hand traffic
unless the profile or the way says otherwise); tagless nodes are not passed to ``process_node`` (OSRM's
shipped profiles read tags only). Routes on such a graph agree with ``osrm-routed`` (MLD) to the ratios the
README gives (``tests/server/test_osrm_differential_profile.py``).

Speed (this 2-core development machine): the profile runs in batches (Monaco: 27,377 ways in 0.3 s,
3,090 tagged nodes in 0.01 s); the whole extraction of Monaco takes about 4 s (reading the file 1.3 s,
the turn analysis in Python 2 s, of which the representative coordinates 0.8 s), Andorra 2 s. A native
port of car.lua was not written: the Lua runtime costs a few tenths of a second on a city and keeps every
profile, OSRM's and users', on one code path; the turn analysis, not the profile, is what a larger
extract would want compiled.
"""
from __future__ import annotations

import importlib.util
import logging
import os
import sys
from array import array
from pathlib import Path

import numpy as np

from ..graph.errors import ParseError
from ..graph.road_graph import RoadGraph, merge_parallel
from ..graph.turn_costs import TurnCosts
from ..graph.turns import TurnRestrictions
from ..graph.units import METRE, Unit
from . import osrm_geometry as geo
from .lua_profile import OBSTACLE_TYPES, ROAD_PRIORITY_CLASSES, LuaProfile

log = logging.getLogger(__name__)

__all__ = ["OSRM_PROFILES", "PROFILES_ENV", "osrm_profile_dirs", "find_osrm_profile", "resolve_lua_profile",
           "extract", "LUA_ATTR_UNITS"]

#: Profile names that run OSRM's own Lua profiles (from osrm-bindings; never copied into gpuroute).
OSRM_PROFILES = ("car", "bicycle", "foot")
#: Environment variable naming a folder of OSRM profiles (``car.lua``, ``lib/``, ...).
PROFILES_ENV = "GPUROUTE_OSRM_PROFILES"

_NAMES = {v: k for k, v in ROAD_PRIORITY_CLASSES.items()}
#: ``meta["road_classes"]``: OSRM's road priority classes by code (0..31).
ROAD_CLASS_NAMES = [_NAMES.get(i, f"class{i}") for i in range(32)]

LUA_ATTR_UNITS = {
    "way_id": Unit("id", "other", None, note="OpenStreetMap way id"),
    "name_id": Unit("code", "other", None, note="index into meta['way_names'] (OSM name, else ref); -1: none"),
    "road_class": Unit("code", "other", None, note="OSRM road priority class, meta['road_classes'][code]"),
    "speed_kmh": Unit("km/h", "other", None, note="the profile's speed for this direction"),
    "length_m": METRE,
    "mode": Unit("code", "other", None, note="OSRM travel mode (gpuroute.io.lua_profile.TRAVEL_MODES)"),
    "classes": Unit("bits", "other", None, note="bit i set: the arc is of class meta['classes'][i]"),
    "restricted": Unit("flag", "other", None, note="OSRM restricted (destination/private access)"),
    "is_startpoint": Unit("flag", "other", None, note="a waypoint may snap here"),
    "roundabout": Unit("flag", "other", None, note="roundabout or circular junction"),
}


# ---------------------------------------------------------------------------------------------- profiles
def osrm_profile_dirs():
    """Folders searched for OSRM's profiles, in order: ``$GPUROUTE_OSRM_PROFILES``; the installed
    ``osrm`` package (``pip install osrm-bindings``: ``osrm/share/profiles``); ``<venv>/osrm/wheel/osrm/
    share/profiles`` (``make osrm-bin``, ``.ci/fetch_osrm.sh``); the same under this checkout's ``.venv``.
    Returns a list of ``(Path, how)``."""
    out = []
    env = os.environ.get(PROFILES_ENV)
    if env:
        out.append((Path(env), f"${PROFILES_ENV}"))
    try:
        spec = importlib.util.find_spec("osrm")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.origin:
        out.append((Path(spec.origin).parent / "share" / "profiles", "the osrm-bindings package"))
    out.append((Path(sys.prefix) / "osrm" / "wheel" / "osrm" / "share" / "profiles", "make osrm-bin (sys.prefix)"))
    root = Path(__file__).resolve().parents[3]
    out.append((root / ".venv" / "osrm" / "wheel" / "osrm" / "share" / "profiles", "make osrm-bin (checkout)"))
    return out


def find_osrm_profile(name):
    """The path of OSRM's ``<name>.lua`` (``car``, ``bicycle``, ``foot``).

    Raises
    ------
    FileNotFoundError
        None of :func:`osrm_profile_dirs` holds it (the message lists where it looked and how to get them).
    """
    tried = []
    for d, how in osrm_profile_dirs():
        p = d / f"{name}.lua"
        if p.is_file():
            return p
        tried.append(f"{d} ({how})")
    raise FileNotFoundError(
        f"profile {name!r} runs OSRM's own {name}.lua, which was not found; looked in: {'; '.join(tried)}. "
        f"Install the osrm-bindings wheel (pip install osrm-bindings), run make osrm-bin, or set "
        f"{PROFILES_ENV} to a folder of OSRM profiles; profile='car-basic' is gpuroute's native simplified car "
        "profile (no turn costs, no obstacles, no routability weight)")


def resolve_lua_profile(spec):
    """The :class:`LuaProfile` a profile specification names, or None for a native profile.

    ``spec``: a LuaProfile (returned as is), a path ending in ``.lua`` (or an existing file), or one of
    :data:`OSRM_PROFILES`.

    Raises
    ------
    FileNotFoundError
        A ``.lua`` path that does not exist; an OSRM profile that cannot be found.
    LuaProfileError, UnsupportedProfileAPI, MissingExtraError
        See :class:`LuaProfile`.
    """
    if isinstance(spec, LuaProfile):
        return spec
    if isinstance(spec, (str, os.PathLike)):
        s = os.fspath(spec)
        if s in OSRM_PROFILES:
            from ..extras import require

            require("lupa", f"profile {s!r} (OSRM's {s}.lua, run through the Lua runtime; profile='car-basic' is "
                            "gpuroute's native car profile and needs no Lua)")
            return LuaProfile(find_osrm_profile(s))
        if s.endswith(".lua") or os.path.isfile(s):
            return LuaProfile(s)
    return None


# ---------------------------------------------------------------------------------------------- reading
class _WayNodes:
    """A way's nodes as ``(id, lon, lat)`` for ``way:get_nodes()`` (lon/lat None where missing)."""

    __slots__ = ("_refs", "_x", "_y")

    def __init__(self, refs, x, y):
        self._refs, self._x, self._y = refs, x, y

    def __len__(self):
        return len(self._refs)

    def __iter__(self):
        for r, x, y in zip(self._refs, self._x, self._y, strict=True):
            ok = abs(x) <= 1_800_000_000 and abs(y) <= 900_000_000
            yield (int(r), x / 1e7 if ok else None, y / 1e7 if ok else None)


def _read(path, relation_types, progress):
    from ..extras import require

    osmium = require("osmium", "reading OpenStreetMap files")
    nodes, ways, relations = [], [], []
    refs, xs, ys, starts = array("q"), array("q"), array("q"), array("q", [0])
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(desc=f"reading {os.path.basename(path)}", unit=" ways", delay=2.0, leave=False)
    rtypes = set(relation_types)
    try:
        fp = (osmium.FileProcessor(path, osmium.osm.NODE | osmium.osm.WAY | osmium.osm.RELATION)
              .with_locations().with_filter(osmium.filter.EmptyTagFilter()))
        for o in fp:
            if o.is_node():
                loc = o.location
                ok = loc.valid()
                nodes.append((o.id, {t.k: t.v for t in o.tags}, loc.lon if ok else None, loc.lat if ok else None))
            elif o.is_way():
                for nd in o.nodes:
                    refs.append(nd.ref)
                    loc = nd.location
                    xs.append(loc.x)
                    ys.append(loc.y)
                starts.append(len(refs))
                ways.append((o.id, {t.k: t.v for t in o.tags}))
                if bar is not None and len(ways) % 1024 == 0:
                    bar.update(1024)
            else:
                rtype = o.tags.get("type", "")
                if rtype == "restriction" or rtype.startswith("restriction:") or rtype in rtypes:
                    relations.append((o.id, {t.k: t.v for t in o.tags}, [(m.type, m.ref, m.role) for m in o.members]))
    except RuntimeError as e:  # libosmium reports unreadable input this way
        raise ParseError(path, None, f"cannot read OSM file: {e}") from None
    finally:
        if bar is not None:
            bar.close()
    return (nodes, ways, relations, np.frombuffer(refs, dtype=np.int64), np.frombuffer(xs, dtype=np.int64),
            np.frombuffer(ys, dtype=np.int64), np.frombuffer(starts, dtype=np.int64))


def _lane_count(s):
    """OSRM's ``laneStringToDescription`` size: the lanes of a ``turn:lanes`` string, 0 when a token is
    not one OSRM knows."""
    if not s:
        return 0
    known = {"none", "through", "sharp_left", "left", "slight_left", "slight_right", "right", "sharp_right",
             "reverse", "merge_to_left", "merge_to_right"}
    lanes = s.split("|")
    for lane in lanes:
        for tok in lane.split(";"):
            if tok and tok not in known:
                return 0
    return len(lanes)


class _RestrictionProfile:
    """What :func:`gpuroute.io.osm.parse_restriction` reads of a profile."""

    def __init__(self, classes):
        self.restriction_classes = tuple(classes)


# ---------------------------------------------------------------------------------------------- extract
def extract(path, profile, *, name=None, progress=True, _debug=None):
    """Read an OSM file with an OSRM Lua profile (see the module docstring).

    Parameters
    ----------
    path : str
    profile : LuaProfile
        Loaded (a fresh one: its obstacle map and relations are filled here).
    name : str, optional
    progress : bool

    Returns
    -------
    RoadGraph
        With ``turn_costs`` and ``meta`` (``profile``, ``profile_path``, ``weight_name``,
        ``weight_precision``, ``classes``, ``excludable`` (the profile's ``excludable`` class sets, each
        sorted: the ``exclude=`` combinations it declares), ``road_classes``, ``way_names``, counts).

    Raises
    ------
    ParseError
        Unreadable OSM data.
    LuaProfileError
        The profile raised (naming file and line).
    """
    from .osm import resolve_restrictions

    props = profile.properties
    mult = props.weight_multiplier
    nodes, ways, relations, refs, xs, ys, starts = _read(path, profile.relation_types, progress)
    profile.set_relations([r for r in relations if r[1].get("type", "") in profile.relation_types])
    profile.process_nodes(nodes)
    lens = np.diff(starts)
    way_in = [(w[0], w[1], _WayNodes(refs[starts[i]:starts[i + 1]], xs[starts[i]:starts[i + 1]],
                                     ys[starts[i]:starts[i + 1]])) for i, w in enumerate(ways)]
    results = profile.process_ways(way_in)
    del way_in
    kept = [i for i, r in enumerate(results) if r.kept and lens[i] >= 2]
    profile.prepare_obstacles(refs[starts[i]:starts[i + 1]].tolist() for i in kept)

    # ---------------------------------------------------------------- per kept way
    kw = len(kept)
    class_names = list(profile.classes)
    for i in kept:
        for c in sorted(results[i].forward_classes | results[i].backward_classes):
            if c not in class_names:
                class_names.append(c)
    if len(class_names) > 8:
        raise ValueError(f"{path}: the profile sets {len(class_names)} classes ({class_names}); osrm-extract "
                         "allows at most 8")
    cbit = {c: 1 << k for k, c in enumerate(class_names)}
    names, name_code = [], {}
    skeys, skey_code = [], {}
    plain, plain_code = [], {}

    def code(table, codes, v):
        c = codes.get(v)
        if c is None:
            c = codes[v] = len(table)
            table.append(v)
        return c

    W = {k: np.zeros(kw, dtype=dt) for k, dt in (
        ("fwd", bool), ("bwd", bool), ("split", bool), ("fdur", np.float64), ("bdur", np.float64),
        ("fdur_edge", bool), ("bdur_edge", bool), ("fwgt", np.float64), ("bwgt", np.float64),
        ("fwgt_edge", bool), ("bwgt_edge", bool), ("fmode", np.uint8), ("bmode", np.uint8),
        ("fspeed", np.float32), ("bspeed", np.float32), ("frestr", bool), ("brestr", bool),
        ("fcls", np.uint8), ("bcls", np.uint8), ("fname", np.int32), ("bname", np.int32), ("name", np.int32),
        ("label", np.int32), ("roundabout", bool), ("circular", bool), ("startpoint", bool), ("lhd", bool),
        ("mwc", bool), ("link", bool), ("ign", bool), ("prio", np.int16), ("lanes", np.int16),
        ("htc", np.int16), ("atc", np.int16), ("way_id", np.int64))}
    for j, i in enumerate(kept):
        r = results[i]
        n_edges = int(lens[i]) - 1
        fwd = (r.forward_speed > 0 or r.forward_rate > 0 or r.duration > 0 or r.weight > 0) and r.forward_mode != 0
        bwd = (r.backward_speed > 0 or r.backward_rate > 0 or r.duration > 0 or r.weight > 0) and r.backward_mode != 0
        lf, lb = _lane_count(r.turn_lanes_forward), _lane_count(r.turn_lanes_backward)
        split = fwd and bwd and (props.force_split_edges or r.forward_rate != r.backward_rate
                                 or r.forward_speed != r.backward_speed or r.forward_mode != r.backward_mode
                                 or r.turn_lanes_forward != r.turn_lanes_backward
                                 or r.forward_classes != r.backward_classes or r.forward_ref != r.backward_ref)
        W["fwd"][j], W["bwd"][j], W["split"][j] = fwd, bwd, split
        for side, speed, rate in (("f", r.forward_speed, r.forward_rate), ("b", r.backward_speed, r.backward_rate)):
            if r.duration >= 0:
                W[side + "dur"][j], W[side + "dur_edge"][j] = r.duration / n_edges, True
            else:
                W[side + "dur"][j] = speed / 3.6
            if props.fallback_to_duration:
                W[side + "wgt"][j], W[side + "wgt_edge"][j] = W[side + "dur"][j], W[side + "dur_edge"][j]
            elif r.weight >= 0:
                W[side + "wgt"][j], W[side + "wgt_edge"][j] = r.weight / n_edges, True
            else:
                W[side + "wgt"][j] = rate
        W["fmode"][j], W["bmode"][j] = r.forward_mode, r.backward_mode
        W["fspeed"][j], W["bspeed"][j] = r.forward_speed, r.backward_speed
        W["frestr"][j], W["brestr"][j] = r.forward_restricted, r.backward_restricted
        W["fcls"][j] = sum(cbit[c] for c in r.forward_classes)
        W["bcls"][j] = sum(cbit[c] for c in r.backward_classes)
        W["fname"][j] = code(skeys, skey_code, (r.name, r.destinations, r.forward_ref, r.pronunciation, r.exits))
        W["bname"][j] = code(skeys, skey_code, (r.name, r.destinations, r.backward_ref, r.pronunciation, r.exits))
        W["name"][j] = code(plain, plain_code, r.name) if r.name else -1
        label = r.name or r.forward_ref or r.backward_ref
        W["label"][j] = code(names, name_code, label) if label else -1
        W["roundabout"][j], W["circular"][j], W["startpoint"][j] = r.roundabout, r.circular, r.is_startpoint
        W["lhd"][j] = r.is_left_hand_driving
        W["mwc"][j], W["link"][j], W["ign"][j] = r.motorway_class, r.link_class, r.may_be_ignored
        W["prio"][j] = r.road_priority_class
        W["lanes"][j] = max(lf + lb, r.num_lanes)
        W["htc"][j], W["atc"][j] = r.highway_turn_classification, r.access_turn_classification
        W["way_id"][j] = r.id

    # ---------------------------------------------------------------- segments (one per OSRM edge)
    kept_a = np.asarray(kept, dtype=np.int64)
    seg_way = np.repeat(np.arange(kw, dtype=np.int64), lens[kept_a] - 1) if kw else np.zeros(0, np.int64)
    first_ref = starts[kept_a] if kw else np.zeros(0, np.int64)
    off = np.arange(seg_way.size, dtype=np.int64) - np.repeat(np.cumsum(lens[kept_a] - 1) - (lens[kept_a] - 1), lens[kept_a] - 1)
    pa = first_ref[seg_way] + off
    pb = pa + 1
    valid_loc = (np.abs(xs) <= 1_800_000_000) & (np.abs(ys) <= 900_000_000)
    ok = valid_loc[pa] & valid_loc[pb] if pa.size else np.zeros(0, dtype=bool)
    n_missing = int((~ok).sum())
    pa, pb, seg_way = pa[ok], pb[ok], seg_way[ok]
    fx = geo.fixed_from_e7(xs)
    fy = geo.fixed_from_e7(ys)
    dist = geo.distance_m_array(fx[pa], fy[pa], fx[pb], fy[pb])

    def seg_values(side, which):
        val = W[side + which][seg_way]
        by_edge = W[side + which + "_edge"][seg_way]
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(by_edge, val, np.where(val > 0, dist / np.where(val > 0, val, 1.0), np.inf))

    f_on, b_on, split = W["fwd"][seg_way], W["bwd"][seg_way], W["split"][seg_way]
    fd, fw = seg_values("f", "dur"), seg_values("f", "wgt")
    bd, bw = seg_values("b", "dur"), seg_values("b", "wgt")
    if profile.has_segment_function:
        fd, fw, bd, bw = _process_segments(profile, fx, fy, pa, pb, dist, fd, fw, bd, bw, f_on, b_on, split, seg_way, W)

    def rnd(x):
        x = np.where(np.isfinite(x), x, 2.0e9)
        return np.maximum(1, np.floor(x + 0.5)).astype(np.int64)

    # arcs: forward (way order) then backward; a non-split two-way segment is one OSRM edge both ways
    fo_, bo_ = f_on, b_on
    a_ref, b_ref = refs[pa], refs[pb]
    s_idx = np.arange(pa.size, dtype=np.int64)
    same_edge_b = bo_ & fo_ & ~split  # backward arc of the forward OSRM edge
    arc_seg = np.concatenate([s_idx[fo_], s_idx[bo_]])
    arc_back = np.concatenate([np.zeros(int(fo_.sum()), bool), np.ones(int(bo_.sum()), bool)])
    arc_fedge = np.concatenate([np.ones(int(fo_.sum()), bool), same_edge_b[bo_]])  # of OSRM's forward edge
    dur_s = np.where(arc_back & ~arc_fedge, bd[arc_seg], fd[arc_seg])
    wgt_s = np.where(arc_back & ~arc_fedge, bw[arc_seg], fw[arc_seg])
    if props.fallback_to_duration:
        wgt_s = dur_s
    duration = rnd(dur_s * 10.0)
    weight = rnd(wgt_s * mult)
    node_ids, inv = np.unique(np.concatenate([a_ref, b_ref]), return_inverse=True)
    ia, ib = inv[:pa.size], inv[pa.size:]
    tail = np.where(arc_back, ib[arc_seg], ia[arc_seg])
    head = np.where(arc_back, ia[arc_seg], ib[arc_seg])
    aw = seg_way[arc_seg]
    length = dist[arc_seg]
    # per-arc OSRM edge data (the backward side of a split or backward-only way: its backward fields)
    bside = arc_back & ~arc_fedge
    mode = np.where(bside, W["bmode"][aw], W["fmode"][aw])
    restricted = np.where(bside, W["brestr"][aw], W["frestr"][aw])
    classes = np.where(bside, W["bcls"][aw], W["fcls"][aw])
    name_key = np.where(bside, W["bname"][aw], W["fname"][aw])
    speed = np.where(arc_back, W["bspeed"][aw], W["fspeed"][aw])

    # parallel arcs and self-loops: RoadGraph.from_arcs's rule, by the routing weight; graph arc i is input
    # arc kept_pos[i]
    kept_pos, rep = merge_parallel(tail, head, weight)
    # OSRM's flags after its duplicate removal: one edge both ways (not split), else one-way edges, split
    # where the other direction exists
    n = node_ids.size
    key_t, key_h = tail[kept_pos], head[kept_pos]
    fkey = key_t * n + key_h
    srt = np.argsort(fkey)
    rev = np.full(kept_pos.size, -1, dtype=np.int64)
    if fkey.size:
        rkey = key_h * n + key_t
        p = np.minimum(np.searchsorted(fkey[srt], rkey), fkey.size - 1)
        rev = np.where(fkey[srt][p] == rkey, kept_pos[srt][p], -1)
    seg_k = arc_seg[kept_pos]
    one_edge = (rev >= 0) & (seg_k == np.where(rev >= 0, arc_seg[np.maximum(rev, 0)], -1)) & ~split[seg_k]
    flag_bidir = np.zeros(tail.size, dtype=bool)
    flag_split = np.zeros(tail.size, dtype=bool)
    flag_bidir[kept_pos] = one_edge
    flag_split[kept_pos] = (rev >= 0) & ~one_edge
    keys = {}
    key_id = np.zeros(tail.size, dtype=np.int32)
    rc = (W["mwc"], W["link"], W["ign"], W["prio"], W["lanes"])
    for a in kept_pos.tolist():
        w = aw[a]
        k = (tuple(int(x[w]) for x in rc), bool(flag_bidir[a]), bool(flag_split[a]), bool(W["roundabout"][w]),
             bool(W["circular"][w]), bool(W["startpoint"][w]), bool(restricted[a]), int(name_key[a]),
             int(classes[a]), int(mode[a]), bool(W["lhd"][w]))
        key_id[a] = keys.setdefault(k, len(keys))

    attrs = {"way_id": W["way_id"][aw], "name_id": W["label"][aw], "road_class": W["prio"][aw].astype(np.int8),
             "speed_kmh": speed.astype(np.float32), "length_m": length, "mode": mode.astype(np.uint8),
             "classes": classes.astype(np.uint8), "restricted": restricted.astype(bool),
             "is_startpoint": W["startpoint"][aw].astype(bool),
             "roundabout": (W["roundabout"][aw] | W["circular"][aw]).astype(bool)}
    coords = _coords_of(node_ids, refs, fx, fy, valid_loc)
    dd = np.maximum(1, np.rint(length)).astype(np.int64)
    # turn restrictions
    rprof = _RestrictionProfile(profile.restrictions if props.use_turn_restrictions else ())
    rel = [r for r in relations if r[1].get("type", "") == "restriction" or r[1].get("type", "").startswith("restriction:")]
    in_pos, out_pos, kind, tmeta = resolve_restrictions(rel, rprof, node_ids, tail, head, aw, W["way_id"])
    if in_pos.size:
        in_pos, out_pos = rep[in_pos], rep[out_pos]
        keep = (in_pos >= 0) & (out_pos >= 0)
        tmeta["dropped"] += int((~keep).sum())
        key = np.unique(np.stack([in_pos[keep], out_pos[keep], kind[keep]]), axis=1)
        in_pos, out_pos, kind = key[0], key[1], key[2].astype(np.int8)
    turns = TurnRestrictions(in_pos, out_pos, kind, meta=tmeta)
    gname = name or _graph_name(path)
    meta = {"source": path, "format": "osm", "profile": _profile_name(profile), "profile_path": str(profile.path),
            "profile_engine": "lua", "weight_name": props.weight_name, "weight_precision": int(props.weight_precision),
            "u_turn_penalty_s": props.u_turn_penalty,
            "continue_straight_at_waypoint": bool(props.continue_straight_at_waypoint), "classes": class_names,
            "excludable": [sorted(set(x)) for x in profile.excludable], "road_classes": ROAD_CLASS_NAMES,
            "way_names": names, "highway_ways": int(sum(1 for w in ways if "highway" in w[1])),
            "routable_ways": kw, "segments": int(pa.size), "segments_missing_location": n_missing,
            "ways_missing_nodes": int(sum(1 for i in kept if not valid_loc[starts[i]:starts[i + 1]].all())),
            "nodes_missing_location": int(np.unique(refs[~valid_loc]).size) if refs.size else 0}
    units = {"weight": Unit(f"{props.weight_name}/{10 ** props.weight_precision:g}",
                            "time" if props.weight_name == "duration" else "other",
                            10.0 ** -props.weight_precision,
                            note=f"OSRM weight {props.weight_name!r} of profile {meta['profile']!r}"),
             "travel_time": "ds", "distance": "m"}
    g = RoadGraph.from_arcs(n, tail, head, {"weight": weight, "travel_time": duration, "distance": dd}, units=units,
                            coords=coords, name=gname, node_ids=node_ids, coord_system="lonlat", meta=meta,
                            arc_attrs=attrs, attr_units=LUA_ATTR_UNITS, turns=turns)
    # arc order of the graph: from_arcs keeps merge_parallel's kept positions, sorted by (tail, head)
    info = _arc_info(kept_pos, key_id, name_key, W, aw, restricted, mode, duration, weight, length)
    from .osrm_turns import compute_turn_costs

    obits, oany = _obstacle_bits(profile, node_ids)
    via = {int(v) for v in np.unique(g.head[g.turns.in_arc])} if len(g.turns) else set()
    forbidden = set()
    if len(g.turns):
        fi, fo = g.turns.forbidden_pairs(g.first_out, g.head)
        forbidden = set(zip(fi.tolist(), fo.tolist(), strict=True))
    fixed_nodes = np.column_stack([np.rint(coords[:, 0] * 1e6), np.rint(coords[:, 1] * 1e6)]).astype(np.int64)
    costs, tmeta2 = compute_turn_costs(g, info, profile, osm_ids=node_ids, fixed=fixed_nodes,
                                       obstacles={"bits": obits, "any": oany}, via_nodes=via,
                                       forbidden_pairs=forbidden, debug=_debug)
    obst = _obstacle_arrays(profile, node_ids)
    tc = TurnCosts(costs.duration, costs.weight, obstacles=obst,
                   meta={"weight_name": props.weight_name, "weight_precision": int(props.weight_precision),
                         "profile": meta["profile"], **tmeta2})
    g = RoadGraph(g.first_out, g.head, g.weights, units=g.units, coords=g.coords, name=g.name, node_ids=g.node_ids,
                  coord_system=g.coord_system, meta=g.meta, arc_attrs=g.arc_attrs, attr_units=g.attr_units,
                  turns=g.turns, turn_costs=tc)
    log.info("%s: %d kept ways, %d nodes, %d arcs, %d turns (%d evaluated by process_turn, %d compressed nodes)",
             path, kw, g.n_nodes, g.n_arcs, len(tc), tmeta2["turns_evaluated"], tmeta2["compressed_nodes"])
    return g


def _graph_name(path):
    import re

    return re.sub(r"(\.osm)?(\.pbf|\.bz2|\.gz|\.o5m)?$", "", os.path.basename(path)) or "osm"


def _profile_name(profile):
    """``"car"`` (``"bicycle"``, ``"foot"``) for OSRM's own file of that name, else the profile's path."""
    p = Path(profile.path)
    if p.stem in OSRM_PROFILES:
        try:
            if find_osrm_profile(p.stem).resolve() == p.resolve():
                return p.stem
        except FileNotFoundError:
            pass
    return str(p)


def _coords_of(node_ids, refs, fx, fy, valid):
    idx = np.flatnonzero(valid)
    r = refs[idx]
    order = np.argsort(r, kind="stable")
    pos = idx[order][np.searchsorted(r[order], node_ids)]
    return np.column_stack([fx[pos] / 1e6, fy[pos] / 1e6])


def _arc_info(kept_pos, key_id, name_key, W, aw, restricted, mode, duration, weight, length):
    from .osrm_turns import ArcInfo

    order = kept_pos
    w = aw[order]
    mwc, link = W["mwc"][w], W["link"][w]
    return ArcInfo(key=key_id[order], name_key=name_key[order], name=W["name"][w], restricted=restricted[order],
                   roundabout=W["roundabout"][w], circular=W["circular"][w], lhd=W["lhd"][w],
                   motorway=mwc & ~link, link=link, motorway_class=mwc, ignorable=W["ign"][w], mode=mode[order],
                   priority=W["prio"][w], lanes=W["lanes"][w], htc=W["htc"][w], atc=W["atc"][w],
                   duration=duration[order], weight=weight[order], length=length[order])


def _obstacle_bits(profile, node_ids):
    n = node_ids.size
    bits = np.zeros(n, dtype=np.int64)
    anyo = np.zeros(n, dtype=bool)
    for nid in profile.obstacle_map.nodes():
        k = int(np.searchsorted(node_ids, nid))
        if k < n and node_ids[k] == nid:
            anyo[k] = True
            for o in profile.obstacle_map.get(None, nid):
                bits[k] |= OBSTACLE_TYPES[o.type]
    return bits, anyo


def _obstacle_arrays(profile, node_ids):
    n = node_ids.size
    out = {k: [] for k in ("node", "from_node", "type", "duration", "weight")}
    for nid, entries in profile.obstacle_map._entries().items():
        k = int(np.searchsorted(node_ids, nid))
        if k >= n or node_ids[k] != nid:
            continue
        for frm, o in entries:
            f = -1
            if frm is not None:
                j = int(np.searchsorted(node_ids, frm))
                if j >= n or node_ids[j] != frm:
                    continue
                f = j
            out["node"].append(k)
            out["from_node"].append(f)
            out["type"].append(OBSTACLE_TYPES[o.type])
            out["duration"].append(o.duration)
            out["weight"].append(o.weight)
    return out


def _process_segments(profile, fx, fy, pa, pb, dist, fd, fw, bd, bw, f_on, b_on, split, seg_way, W):
    from .lua_profile import SegmentInput

    recs, where = [], []
    for s in range(pa.size):
        w = seg_way[s]
        rc = dict(motorway_class=bool(W["mwc"][w]), link_class=bool(W["link"][w]), may_be_ignored=bool(W["ign"][w]),
                  road_priority_class=int(W["prio"][w]), num_lanes=int(W["lanes"][w]),
                  highway_turn_classification=int(W["htc"][w]), access_turn_classification=int(W["atc"][w]),
                  roundabout=bool(W["roundabout"][w]), circular=bool(W["circular"][w]),
                  startpoint=bool(W["startpoint"][w]))
        a, b = (fx[pa[s]] / 1e6, fy[pa[s]] / 1e6), (fx[pb[s]] / 1e6, fy[pb[s]] / 1e6)
        if f_on[s]:
            recs.append(SegmentInput(a[0], a[1], b[0], b[1], float(dist[s]), float(fw[s]), float(fd[s]),
                                     forward=True, backward=bool(b_on[s] and not split[s]), is_split=bool(split[s]),
                                     restricted=bool(W["frestr"][w]), **rc))
            where.append((s, 0))
        if b_on[s] and (split[s] or not f_on[s]):
            recs.append(SegmentInput(b[0], b[1], a[0], a[1], float(dist[s]), float(bw[s]), float(bd[s]),
                                     forward=True, backward=False, is_split=bool(split[s]),
                                     restricted=bool(W["brestr"][w]), **rc))
            where.append((s, 1))
    d, w = profile.process_segments(recs)
    fd, fw, bd, bw = fd.copy(), fw.copy(), bd.copy(), bw.copy()
    for (s, side), x, y in zip(where, d.tolist(), w.tolist(), strict=True):
        if side == 0:
            fd[s], fw[s] = x, y
        else:
            bd[s], bw[s] = x, y
    return fd, fw, bd, bw
