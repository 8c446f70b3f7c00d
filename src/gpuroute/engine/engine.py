"""``Engine``: one road graph, its contraction hierarchy and its segment index, answering OSRM v5
services (``route``, ``table``, ``nearest``) as plain dicts shaped like osrm-backend's JSON
(``docs/http.md``). The HTTP server serialises these dicts; Python callers use them directly.

Routes run between *phantom nodes* (:class:`gpuroute.geo.segments.Phantom`): a coordinate is snapped onto
the nearest road segment, and a route starts or ends at that point. With source phantom on arc ``a`` at
fraction ``fa`` and target phantom on arc ``b`` at fraction ``fb`` (fractions along each arc), the cost is

    (1 - fa) * w(a) + d_CH(head(a), tail(b)) + fb * w(b)

minimised over the usable arcs of both phantoms (forward and reverse of a two-way street), and, when both
sit on the same arc with the target ahead (``fa <= fb``), ``(fb - fa) * w(a)`` (the route never leaves the
arc). Durations, distances and weights of partial arcs are fraction-weighted (linear along an arc, as
OSRM's). With ``continue_straight`` (the car default) a route leaves an intermediate waypoint on the arc
it arrived on (no U-turn at waypoints); the legs are chosen jointly by a dynamic program over the arcs of
each waypoint, so the total is exact under that constraint.
"""
from __future__ import annotations

import math
import os
import sys
import threading

import numpy as np

from .. import config
from ..backend import resolve_device
from ..extras import require
from ..geo import haversine_m
from ..geo.segments import APPROACHES, NoSegment, SegmentIndex, check_bearing, local_xy
from ..graph.constants import INF
from .exclude import excluder
from .exclude import resolve as resolve_exclude
from .legs import (
    MODIFIERS,
    STEP_TYPES,
    intersections,
    leg_pieces,
    maneuvers,
    round_floats,
    summary_ids,
    turn_sums,
)
from .osrm import (
    GEOMETRIES,
    OVERVIEWS,
    ROUTE_ANNOTATIONS,
    TABLE_ANNOTATIONS,
    EngineError,
    encode_geometries,
    encode_geometry,
    matrix_array,
    matrix_or_none,
    round1,
    simplify,
    waypoint,
    waypoints,
)
from .table import overlay_matrices, overlay_snapshot
from .table_combine import combine
from .traffic import TrafficRouter

#: File endings read as OpenStreetMap (they take the ``profile``).
OSM_ENDINGS = (".pbf", ".osm", ".osm.bz2", ".osm.gz", ".o5m")
#: Empty arrays the leg kernels take where a leg has no path or the engine no such costs.
_NO_ARCS = np.zeros(0, dtype=np.int64)
_NO_COSTS = np.zeros(0, dtype=np.float64)


def _osrm_list(value, k, what):
    """A per-coordinate option list (or None) of length ``k``; InvalidOptions otherwise."""
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
        raise EngineError("InvalidOptions", f"{what} must be a list with one entry per coordinate")
    if len(value) != k:
        raise EngineError("InvalidOptions",
                          f"Number of elements in {what} size {len(value)} does not match coordinate size {k}")
    return list(value)


def _one_entry(value, what):
    """``/nearest`` options: a one-entry list, or the entry itself (a radius, an approach, a bearing pair)."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        single_bearing = (what == "bearings" and len(value) == 2
                          and all(isinstance(x, (int, float, np.number)) for x in value))
        if not single_bearing:
            return _osrm_list(value, 1, what)
    return [value]


class Engine:
    """Answers OSRM v5 ``route``, ``table`` and ``nearest`` requests, and isochrones, on one road graph.

    Build with :meth:`open` (a shipped dataset name, an OSM file, a saved graph or a RoadGraph), or from
    parts with the constructor. Thread-safe: the hierarchy and the segment index are read-only, each
    thread gets its own point-to-point query object, and table queries (numba-parallel) take a lock.

    Parameters
    ----------
    graph : RoadGraph
        lon/lat coordinates; ``travel_time`` (or a time-valued routing weight) for durations; street names
        from ``graph.meta["way_names"]`` and the arc attribute ``name_id`` when present. A graph with
        no time at all (a DIMACS ``-d`` or other length-only graph) is served too: its routes report
        ``duration`` as None (JSON ``null``), never the length, and a table of durations is refused
        (see :attr:`has_durations`).
    ch : ContractionHierarchy
        Built on ``graph`` for the routing weight.
    profile : str
        The profile name (``"car"``), reported in :attr:`info`.
    segments : SegmentIndex, optional
        Default: ``SegmentIndex.of(graph)`` (largest strongly connected component).
    distance_ch : ContractionHierarchy, optional
        A hierarchy of ``graph`` for a length weight (metres), used by :meth:`isochrone` with
        ``metric="distance"`` when the routing weight is a time (without it such isochrones search the
        graph's length weight by a bounded Dijkstra on the CPU).
    overlay : Overlay, optional
        A customized multi-level overlay of ``graph`` (a dataset directory's, :meth:`open`): routes are
        then answered over it (turn-aware, following :meth:`customize`), see
        :mod:`gpuroute.engine.traffic` and :attr:`capabilities`.

    Attributes
    ----------
    graph, ch, segments, profile, distance_ch, overlay
    weight : str
        The routing weight (``ch.weight``).
    has_durations : bool
        Whether the engine knows travel times: from the graph's ``travel_time`` weight, else the routing
        weight when it is a time, else the graph's first time weight of known scale (TNTP's
        ``free_flow_time`` when routing by ``length``). Without them route, leg and step ``duration``
        (and the ``duration`` and ``speed`` annotations) are None, a table asked for durations is
        refused (``InvalidOptions``) and so is an isochrone by duration.
    limits : dict
        ``max_locations_route`` (coordinates of one route), ``max_locations_table`` (cells of one
        table: sources x destinations), ``max_locations_nearest`` (results of one nearest),
        ``max_locations_trip`` (coordinates of one trip), from ``config.SERVE_MAX_LOCATIONS_*``;
        ``max_isochrone_contours``, ``max_isochrone_duration_s`` and
        ``max_isochrone_distance_m`` (one isochrone), from ``config.SERVE_ISOCHRONE_MAX_*``.

    Raises
    ------
    ValueError
        A graph without lon/lat coordinates.
    """

    def __init__(self, graph, ch, *, profile="car", segments=None, distance_ch=None, overlay=None):
        g = graph
        self.graph = g
        self.ch = ch
        self.distance_ch = distance_ch
        self.overlay = overlay
        self._traffic = TrafficRouter(graph, overlay) if overlay is not None else None
        self.profile = str(profile)
        self.weight = ch.weight if ch.weight is not None else g.default_weight
        self.segments = segments if segments is not None else SegmentIndex.of(g)
        self.limits = {"max_locations_route": int(config.SERVE_MAX_LOCATIONS_ROUTE),
                       "max_locations_table": int(config.SERVE_MAX_LOCATIONS_TABLE),
                       "max_locations_nearest": int(config.SERVE_MAX_LOCATIONS_NEAREST),
                       "max_locations_trip": int(config.SERVE_MAX_LOCATIONS_TRIP),
                       "max_isochrone_contours": int(config.SERVE_ISOCHRONE_MAX_CONTOURS),
                       "max_isochrone_duration_s": float(config.SERVE_ISOCHRONE_MAX_DURATION_S),
                       "max_isochrone_distance_m": float(config.SERVE_ISOCHRONE_MAX_DISTANCE_M)}
        self._tail = g.tail.astype(np.int64)
        self._head = g.head.astype(np.int64)
        w = g.weight(self.weight)
        self._w = w.astype(np.float64)
        unit = g.units[self.weight]
        self._w_scale = float(unit.scale) if unit.scale else 1.0  # weight unit -> OSRM weight (s or m)
        self._w_is_time = unit.quantity == "time"
        if "travel_time" in g.weights and g.units["travel_time"].quantity == "time":
            self._dur = g.weight("travel_time").astype(np.float64) * float(g.units["travel_time"].scale or 0.1)
        elif self._w_is_time:
            self._dur = self._w * self._w_scale
        else:  # another time weight of known scale, else none: durations are null, never the lengths
            tw = next((k for k in g.weight_names if g.units[k].quantity == "time" and g.units[k].scale), None)
            self._dur = None if tw is None else g.weight(tw).astype(np.float64) * float(g.units[tw].scale)
        self.has_durations = self._dur is not None
        # per-turn costs of a graph extracted with a Lua profile (added to the legs' duration and weight)
        self._tc = getattr(g, "turn_costs", None)
        self.weight_name = self.weight
        if self._tc is not None:
            from ..graph.turn_costs import turn_arrays

            self._t_first = turn_arrays(g.first_out, g.head)[0]
            self._fo = g.first_out.astype(np.int64)
            if self.weight == "weight":
                self.weight_name = str(self._tc.meta.get("weight_name") or g.meta.get("weight_name") or "weight")
        # durations are the routing weight itself (then tables need no path unpacking)
        self._dur_is_weight = self._w_is_time and (self.weight == "travel_time" or "travel_time" not in g.weights)
        if "length_m" in g.arc_attrs:
            self._len = np.asarray(g.arc_attrs["length_m"], dtype=np.float64)
        elif "distance" in g.weights and g.units["distance"].quantity == "length":
            self._len = g.weight("distance").astype(np.float64) * float(g.units["distance"].scale or 1.0)
        else:
            c = g.coords
            self._len = haversine_m(c[self._tail, 0], c[self._tail, 1], c[self._head, 0], c[self._head, 1])
        nid = g.arc_attrs.get("name_id")
        self._names = list(g.meta.get("way_names") or [])
        self._name_id = (np.asarray(nid, dtype=np.int64) if nid is not None and self._names
                         else np.full(g.n_arcs, -1, dtype=np.int64))
        self._node_ids = (np.asarray(g.node_ids, dtype=np.int64) if g.node_ids is not None
                          else np.arange(g.n_nodes, dtype=np.int64))
        c = g.coords
        lat_t = c[self._tail, 1]
        dx = (np.mod(c[self._head, 0] - c[self._tail, 0] + 180.0, 360.0) - 180.0) * np.cos(np.radians(lat_t))
        dy = c[self._head, 1] - lat_t
        self._bearing = np.mod(np.degrees(np.arctan2(dx, dy)), 360.0)
        # distinct neighbours of each node (a junction has three or more)
        lo, hi = np.minimum(self._tail, self._head), np.maximum(self._tail, self._head)
        pairs = np.unique(lo * g.n_nodes + hi)
        self._degree = (np.bincount(pairs // g.n_nodes, minlength=g.n_nodes)
                        + np.bincount(pairs % g.n_nodes, minlength=g.n_nodes))
        self._fingerprint = g.fingerprint()
        self._coords_f64 = np.ascontiguousarray(g.coords, dtype=np.float64)  # (n, 2) lon/lat, the legs' points
        # the CSR of both directions, int64, for the steps' intersections
        self._fo_all = np.asarray(g.first_out, dtype=np.int64)
        self._rfo = np.asarray(g.rev_first_out, dtype=np.int64)
        self._rev_tail = np.asarray(g.rev_tail, dtype=np.int64)
        self._local = threading.local()
        # the many-to-many query runs numba-parallel: one at a time (numba's workqueue threading layer
        # aborts on concurrent parallel calls; with omp or tbb this costs nothing, it uses every core anyway)
        self._table_lock = threading.Lock()
        # per-metric-state caches of the table service (gpuroute.engine.table) and exclude= (engine.exclude)
        self._table_pristine = {}
        self._along_cache = {}
        self._excluder = None

    # ------------------------------------------------------------------ lifetime
    def close(self):
        """Release every GPU object the engine made: the hierarchies' device copies and hub labels
        (:meth:`gpuroute.ch.ContractionHierarchy.release`), the overlay's GPU customizer
        (:meth:`gpuroute.crp.Overlay.release`), the isochrone drawers, then CuPy's cached blocks. The engine
        stays usable: a later GPU query or customization makes what it needs again. Idempotent; also
        ``with Engine.open(...) as eng:``."""
        for ch in (self.ch, self.distance_ch):
            if ch is not None:
                ch.release()
        if self.overlay is not None:
            self.overlay.release()
        self._iso_gpu = {}
        cp = sys.modules.get("cupy")
        if cp is not None:  # only where CuPy was imported: closing never starts CUDA
            cp.get_default_memory_pool().free_all_blocks()
            cp.get_default_pinned_memory_pool().free_all_blocks()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    # ------------------------------------------------------------------ construction
    @classmethod
    def open(cls, spec, *, profile=None, weight=None):
        """Load a dataset directory, or load a graph, contract it for ``weight`` and index its segments; a
        graph read with a Lua profile (turn costs: OSRM's car.lua, bicycle.lua, foot.lua or the user's) is
        also partitioned and its overlay customized in memory
        (:func:`gpuroute.engine.dataset.build_overlay`), so that every service pays the profile's turn
        costs as with a dataset directory (saving nothing: ``gpuroute build`` keeps it for the next start).

        Parameters
        ----------
        spec : str, path-like or RoadGraph
            A dataset directory (``gpuroute build GRAPH -o DIR``, :mod:`gpuroute.engine.dataset`: graph,
            hierarchy and customized overlay are loaded, nothing is built, and routes run over the
            overlay), a shipped dataset name (``"monaco"``), an OSM extract (``.osm.pbf``, read with
            ``profile``), another graph file or a saved graph directory (:func:`gpuroute.open_graph`),
            or a RoadGraph.
        profile : str, path-like or None
            Routing profile of an OSM file: ``"car"`` (default; OSRM's car.lua through the Lua runtime),
            ``"bicycle"``, ``"foot"``, a ``.lua`` file, or ``"car-basic"`` (gpuroute's native profile); see
            :func:`gpuroute.io.load_osm`. A shipped OSM dataset name without a profile is the shipped
            graph (``car-basic``); with one, its OSM file read with that profile. A dataset directory
            reports the profile it was built with.
        weight : str, optional
            The routing weight. Default: a dataset directory's own; else ``"travel_time"`` when the graph
            has it (fastest routes, as OSRM's car profile), else the graph's first weight
            (:func:`gpuroute.engine.dataset.routing_weight`: ``distance`` on ``ny``).

        Returns
        -------
        Engine

        Raises
        ------
        FileNotFoundError
            ``spec`` is neither a file, a directory nor a dataset name.
        KeyError
            Unknown profile or weight.
        ValueError
            A profile for a source that is not OpenStreetMap; a graph the engine cannot serve
            (see :class:`Engine`); a dataset directory with a ``weight`` other than its hierarchy's, or
            whose parts do not match its manifest (:class:`gpuroute.engine.dataset.DatasetError`).
        """
        from ..ch.api import ContractionHierarchy
        from ..graph.road_graph import RoadGraph
        from .dataset import (
            build_overlay,
            check_routable,
            is_dataset,
            load_dataset,
            open_source,
            routing_weight,
        )

        if not isinstance(spec, RoadGraph) and is_dataset(spec):
            ds = load_dataset(spec)
            if weight is not None and weight != ds.ch.weight:
                raise ValueError(f"{ds.directory}: a dataset contracted for {ds.ch.weight!r}, not {weight!r}")
            return cls(ds.graph, ds.ch, profile=ds.profile, overlay=ds.overlay)
        g = open_source(spec, profile)
        check_routable(g, None if isinstance(spec, RoadGraph) else os.fspath(spec))
        weight = routing_weight(g, weight)  # KeyError naming the weights the graph has
        ch = ContractionHierarchy.build(g, weight, progress=False)
        label = g.meta.get("profile") if g.meta.get("format") == "osm" else profile
        overlay = None
        if getattr(g, "turn_costs", None) is not None:  # a Lua profile's turn costs: the overlay, as a dataset
            overlay = build_overlay(g, weight)[1]
        return cls(g, ch, profile=str(label or "car"), overlay=overlay)

    @property
    def info(self):
        """What the engine serves: graph name, sizes, profile, weight, limits (plain data).

        ``metric`` is the overlay's current metric (None without an overlay); ``traffic`` the saved
        traffic of an engine opened from a dataset directory
        (:meth:`gpuroute.engine.dataset.TrafficStore.info`: ``file``, ``persist``, ``restored`` -- the
        traffic saved before the last start was applied --, ``refused``, ``generation``, ``updated``), None
        for an engine built from a graph. ``exclude``: the graph's ``classes``, the ``excludable``
        combinations ``exclude=`` takes, whether the engine ``supported`` them (an overlay and declared
        combinations), the combinations ``cached`` and counters
        (:meth:`gpuroute.engine.exclude.Excluder.info`)."""
        from .dataset import traffic_store

        g = self.graph
        store = traffic_store(self.overlay) if self._traffic is not None else None
        return {"graph": g.name, "nodes": int(g.n_nodes), "arcs": int(g.n_arcs), "segments": self.segments.n_segments,
                "profile": self.profile, "weight": self.weight, "limits": dict(self.limits),
                "fingerprint": self._fingerprint, "capabilities": self.capabilities,
                "metric": None if self._traffic is None else self._traffic.snapshot().name,
                "traffic": None if store is None else store.info(), "exclude": excluder(self).info()}

    @property
    def capabilities(self):
        """Which algorithm answers which service, on which device, and whether it follows traffic
        (:meth:`customize`): a list of ``{"service", "algorithm", "device", "traffic_aware", "turn_aware",
        "exclude", "note"}`` dicts (``exclude``: the service takes ``exclude=``: an overlay and a profile that
        declares combinations, :mod:`gpuroute.engine.exclude`).

        ``route``: ``"crp"`` (the customized overlay, turn restrictions honoured) when the engine has an
        overlay, else ``"ch"``. ``table`` and ``trip``'s matrix: with an overlay, its many-to-many
        (:mod:`gpuroute.engine.table`: turn costs, restrictions, the current metric), except while that
        metric is exactly the hierarchy's with every turn free (then the hierarchy's table, the same
        costs, on the GPU where one is usable); without an overlay the hierarchy's. ``nearest``: the
        segment index (every segment, as OSRM's). ``isochrone``: with an overlay, a turn-aware search on its current metric (CPU), else the
        hierarchy (not turn-aware, the dataset's metric). ``customize``: the overlay's
        customization (cells re-customized bottom-up; on the GPU where one is usable,
        :mod:`gpuroute.crp.customize_gpu`), only with an overlay.
        """
        from ..backend import gpu_available

        try:
            gpu = bool(gpu_available())
        except Exception:  # no CUDA at all
            gpu = False
        ov = self._traffic is not None
        ch_dev = "gpu" if gpu else "cpu"
        out = [{"service": "route", "algorithm": "crp" if ov else "ch", "device": "cpu", "traffic_aware": ov,
                "turn_aware": ov,
                "note": ("multi-level overlay between the snapped phantom nodes, follows /customize" if ov else
                         "contraction hierarchy between the snapped phantom nodes (no turn restrictions); "
                         "build a dataset with gpuroute build for turn-aware routes and traffic")},
               {"service": "table", "algorithm": "crp many-to-many (buckets)" if ov else "ch (many-to-many)",
                "device": "cpu" if ov else ch_dev, "traffic_aware": ov, "turn_aware": ov,
                "note": ("the overlay's current metric, turn costs and restrictions (the hierarchy's table on the "
                         f"{ch_dev} while the metric is the built one with every turn free)" if ov else
                         "contraction hierarchy between the snapped phantom nodes (no turn restrictions)")},
               {"service": "nearest", "algorithm": "segment index", "device": "cpu", "traffic_aware": False,
                "turn_aware": False, "note": "k-d tree of segment samples, exact"}]
        if callable(getattr(self, "isochrone", None)) and ov:
            from .isochrone_turns import live_quantity

            live = live_quantity(self.graph, self.overlay)
            out.append({"service": "isochrone",
                        "algorithm": "turn-aware bounded Dijkstra on arcs, lattice field, marching squares",
                        "device": "cpu", "traffic_aware": True, "turn_aware": True,
                        "note": "routes as /route drives them, turn restrictions honoured: duration on the "
                                "overlay's current metric when it is a time, else the live travel times (speed "
                                f"updates of /customize) and the graph's turn durations (current metric: {live}); "
                                "distance on the current metric when it is a length, else the graph's lengths"})
        elif callable(getattr(self, "isochrone", None)):
            iso_dev = ch_dev if str(config.SERVE_ISOCHRONE_DEVICE) != "cpu" else "cpu"
            out.append({"service": "isochrone", "algorithm": "bounded Dijkstra / PHAST, lattice field, marching squares",
                        "device": iso_dev, "traffic_aware": False, "turn_aware": False,
                        "note": "the metric the dataset was built with; search and field on the device, polygons "
                                "on the CPU"})
        out.append({"service": "trip", "algorithm": "table + gpuroute.tours (exact up to "
                                                    f"{int(config.TOUR_EXACT_MAX_N)} stops), then route",
                    "device": "cpu" if ov else ch_dev, "traffic_aware": ov, "turn_aware": ov,
                    "note": "the order from the table service's matrix; the legs routed as route's "
                            "(continue_straight=false)"})
        out.append({"service": "customize", "algorithm": "crp customization" if ov else "none", "device": ch_dev,
                    "traffic_aware": ov, "turn_aware": ov,
                    "note": ("traffic updates re-customize only the cells holding the arcs; a metric all cells"
                             if ov else "needs an overlay: gpuroute build GRAPH -o DIR, then serve DIR")})
        can_exclude = excluder(self).info()["supported"]
        for row in out:
            row["exclude"] = bool(can_exclude and row["service"] != "customize")
        return out

    def _query(self):
        q = getattr(self._local, "query", None)
        if q is None:
            q = self._local.query = self.ch.query()
        return q

    # ------------------------------------------------------------------ validation and snapping
    def _coords(self, coords):
        """Validated coordinates as a list of (lon, lat) floats: InvalidOptions when not a list,
        InvalidValue naming the first bad coordinate."""
        if coords is None or isinstance(coords, (str, bytes)) or not hasattr(coords, "__len__"):
            raise EngineError("InvalidOptions", "coordinates must be a list of [lon, lat] pairs")
        out = []
        for i, c in enumerate(coords):
            try:
                if isinstance(c, (str, bytes)) or len(c) != 2:
                    raise TypeError
                lon, lat = float(c[0]), float(c[1])
            except (TypeError, ValueError):
                raise EngineError("InvalidValue", f"Invalid coordinate value at index {i}: {c!r} is not a "
                                  "[lon, lat] pair") from None
            if not (math.isfinite(lon) and math.isfinite(lat) and -180.0 <= lon <= 180.0 and -90.0 <= lat <= 90.0):
                raise EngineError("InvalidValue", f"Invalid coordinate value at index {i}: ({lon}, {lat}) is not "
                                  "a longitude in [-180, 180] and a latitude in [-90, 90]")
            out.append((lon, lat))
        return out

    def _snap(self, coords, radiuses, bearings, approaches, segments=None):
        """Phantoms of validated coordinates; InvalidOptions for bad per-coordinate options, NoSegment.

        All coordinates are snapped together (:meth:`SegmentIndex.snap_batch`, on ``segments``, default
        :attr:`segments`); errors are those of snapping one coordinate after the other: the first
        coordinate with a bad option or no segment."""
        k = len(coords)
        radiuses = _osrm_list(radiuses, k, "radiuses")
        bearings = _osrm_list(bearings, k, "bearings")
        approaches = _osrm_list(approaches, k, "approaches")
        stop, err = k, None
        rs = bs = aps = None
        if radiuses is not None or bearings is not None or approaches is not None:
            rs, bs, aps = [], [], []
            for i in range(k):
                try:
                    r, b, a = self._snap_options(i, radiuses, bearings, approaches)
                except EngineError as e:
                    stop, err = i, e
                    break
                rs.append(r)
                bs.append(b)
                aps.append(a)
        c = np.asarray(coords[:stop], dtype=np.float64).reshape(stop, 2)
        try:
            out = (segments or self.segments).snap_batch(c[:, 0], c[:, 1], radiuses=rs, bearings=bs, approaches=aps)
        except NoSegment as e:
            raise EngineError("NoSegment", f"Could not find a matching segment for coordinate {e.index}"
                              + (f" ({str(e).split(': ', 1)[1]})" if ": " in str(e) else "")) from None
        if err is not None:
            raise err
        return out

    @staticmethod
    def _snap_options(i, radiuses, bearings, approaches):
        """Checked ``(radius, bearing, approach)`` of coordinate ``i``; InvalidOptions naming it."""
        r = None if radiuses is None else radiuses[i]
        if isinstance(r, str) and r == "unlimited":
            r = None
        if r is not None:
            try:
                r = float(r)
            except (TypeError, ValueError):
                r = -1.0
            if not r >= 0:
                raise EngineError("InvalidOptions", f"radius of coordinate {i} must be a number of metres >= 0 "
                                  f"or 'unlimited', got {radiuses[i]!r}")
        b = None if bearings is None else bearings[i]
        try:
            b = check_bearing(b, i)
        except ValueError as e:
            raise EngineError("InvalidOptions", str(e)) from None
        a = None if approaches is None else approaches[i]
        if a is not None and a not in APPROACHES:
            raise EngineError("InvalidOptions", f"approach of coordinate {i} must be one of {APPROACHES}, "
                              f"got {a!r}")
        return r, b, a

    @staticmethod
    def _choice(value, allowed, what):
        if value is False and "false" in allowed:
            value = "false"
        if value not in allowed:
            raise EngineError("InvalidOptions", f"{what} must be one of {', '.join(allowed)}, got {value!r}")
        return value

    @staticmethod
    def _annotation_set(annotations, allowed, what="annotations"):
        if annotations is None or annotations is False:
            return ()
        if annotations is True:
            return tuple(allowed)
        if isinstance(annotations, str):
            if annotations in ("true", "false"):
                return tuple(allowed) if annotations == "true" else ()
            annotations = [a for a in annotations.split(",") if a]
        try:
            names = tuple(annotations)
        except TypeError:
            raise EngineError("InvalidOptions", f"{what} must be true, false or a list of {allowed}") from None
        bad = [a for a in names if a not in allowed]
        if bad:
            raise EngineError("InvalidOptions", f"unknown {what} {bad[0]!r}; allowed: {', '.join(allowed)}")
        return tuple(a for a in allowed if a in names)

    # ------------------------------------------------------------------ route
    def route(self, coords, *, alternatives=False, steps=False, annotations=False, geometries="polyline",
              overview="simplified", radiuses=None, bearings=None, approaches=None, continue_straight=None,
              exclude=None, avoid_polygons=None, avoid_ways=None):
        """OSRM ``/route/v1``: the fastest route through the coordinates in order.

        Parameters
        ----------
        coords : sequence of (lon, lat), length 2 .. ``limits["max_locations_route"]``
        alternatives : bool or int
            Accepted; one route is returned (OSRM returns "up to" that many).
        steps : bool
            Turn-by-turn steps per leg.
        annotations : bool, str or sequence of str
            ``True`` (all), or some of ``duration``, ``distance``, ``datasources``, ``nodes``, ``weight``,
            ``speed``; per leg, one value per geometry segment (``nodes``: one per coordinate, OSM ids).
        geometries : {"polyline", "polyline6", "geojson"}
        overview : {"simplified", "full", "false"} (or False)
            ``simplified``: Douglas-Peucker with ``config.SERVE_SIMPLIFY_TOLERANCE_M``.
        radiuses, bearings, approaches : sequence, one entry per coordinate, optional
            See :meth:`gpuroute.geo.segments.SegmentIndex.nearest` (``None`` entries: no constraint;
            a radius may be ``"unlimited"``).
        continue_straight : bool, optional
            No U-turn at intermediate waypoints (None: the profile's ``continue_straight_at_waypoint`` for a
            graph read with a Lua profile, else the car default, True).
        exclude : str or sequence of str, optional
            Classes of road the route avoids (OSRM's ``exclude``: ``"motorway"``, ``["toll"]``; one of the
            combinations the profile declares, ``graph.meta["excludable"]``): no excluded arc is entered and
            waypoints snap to arcs that are not excluded (:mod:`gpuroute.engine.exclude`; needs an overlay).
        avoid_polygons : dict or shapely Polygon / MultiPolygon, optional
            An area to avoid (a GeoJSON Polygon or MultiPolygon, lon/lat): every arc whose segment
            intersects it (inside, crossing or touching) is excluded as ``exclude``'s classes are
            (:mod:`gpuroute.engine.avoid`; with ``exclude``: the union).
        avoid_ways : sequence of int, optional
            OSM way ids whose arcs are excluded likewise.

        Returns
        -------
        dict
            ``{"code": "Ok", "routes": [route], "waypoints": [...]}``: route with ``geometry`` (unless
            ``overview="false"``), ``legs``, ``weight_name``, ``weight``, ``duration`` (s), ``distance``
            (m); each leg ``steps``, ``summary`` (the two streets with the longest distance on the leg,
            in route order), ``weight``, ``duration``, ``distance`` and ``annotation`` when asked.

        Raises
        ------
        EngineError
            ``InvalidOptions`` (fewer than two coordinates, an unknown option value, option lists of
            the wrong length), ``InvalidValue`` (a bad coordinate), ``TooBig`` (too many coordinates),
            ``NoSegment`` (a coordinate with no segment to snap to), ``NoRoute`` (no route through the
            waypoints); for ``exclude``: ``InvalidValue`` (a combination the profile does not declare),
            ``NotImplemented`` (an engine without an overlay); for the avoids: ``InvalidValue`` naming
            ``avoid_polygons`` or ``avoid_ways`` (not a valid (Multi)Polygon, over a limit, an unknown way).
        """
        # before the coordinates, as osrm-routed's CheckAlgorithms
        ex = resolve_exclude(self, exclude, avoid_polygons, avoid_ways)
        coords = self._coords(coords)
        if len(coords) < 2:
            raise EngineError("InvalidOptions", "Number of coordinates needs to be at least two.")
        mx = self.limits["max_locations_route"]
        if mx > 0 and len(coords) > mx:
            raise EngineError("TooBig", f"Number of entries {len(coords)} is higher than current maximum ({mx})")
        if not isinstance(alternatives, (bool, int, np.integer)) or alternatives < 0:
            raise EngineError("InvalidOptions", f"alternatives must be true, false or a number >= 0, "
                              f"got {alternatives!r}")
        if not isinstance(steps, (bool, np.bool_)):
            raise EngineError("InvalidOptions", f"steps must be true or false, got {steps!r}")
        geometries = self._choice(geometries, GEOMETRIES, "geometries")
        overview = self._choice(overview, OVERVIEWS, "overview")
        ann = self._annotation_set(annotations, ROUTE_ANNOTATIONS)
        if continue_straight is None:  # the profile's default (OSRM: continue_straight_at_waypoint), else car's
            continue_straight = bool(self.graph.meta.get("continue_straight_at_waypoint", True))
        if not isinstance(continue_straight, (bool, np.bool_)):
            raise EngineError("InvalidOptions", f"continue_straight must be true, false or default, "
                              f"got {continue_straight!r}")
        phantoms = self._snap(coords, radiuses, bearings, approaches, None if ex is None else ex.segments())
        snap = None
        if self._traffic is not None:  # over the overlay: turn-aware, its current metric (one snapshot)
            plan, snap = self._traffic.plan(phantoms, bool(continue_straight), None if ex is None else ex.snapshot())
        else:
            plan = self._plan(phantoms, bool(continue_straight))
        legs, points = [], []
        tot_w = tot_d = tot_l = 0.0
        for i, (dep, arr, path) in enumerate(plan):
            leg = self._leg(phantoms[i], phantoms[i + 1], dep, arr, path, snap)
            legs.append(self._leg_json(leg, phantoms[i + 1], steps, ann, geometries))
            tot_w += leg["weight_sum"] + leg["turn_weight"]
            tot_d = None if leg["duration"] is None or tot_d is None else \
                tot_d + leg["duration_sum"] + leg["turn_duration"]
            tot_l += leg["distance_sum"]
            points.append(leg["points"] if i == 0 else leg["points"][1:])
        route = {}
        if overview != "false":
            pts = np.concatenate(points)
            if overview == "simplified":
                pts = simplify(pts, config.SERVE_SIMPLIFY_TOLERANCE_M)
            route["geometry"] = encode_geometry(pts, geometries)
        weight_name = self.weight_name if snap is None or snap.name == "time" else snap.name
        route.update(legs=legs, weight_name=weight_name, weight=round1(tot_w * self._w_scale),
                     duration=None if tot_d is None else round1(tot_d), distance=round1(tot_l))
        return {"code": "Ok", "routes": [route], "waypoints": waypoints(phantoms, self._fingerprint)}

    def _plan(self, phantoms, continue_straight):
        """The arcs each leg leaves and enters by, and the path between: a list of
        ``((arc, fraction), (arc, fraction), path)`` per leg, ``path`` a PathResult or None (same arc).
        Raises EngineError NoRoute.

        Per leg ONE many-to-many call on the hierarchy between the distinct nodes of the options (the
        departure arcs' heads, the arrival arcs' tails; :meth:`_leg_costs`), the dynamic program over the
        options' costs, then one path unpacking (``q.route``) per leg, for the winning pair only (counted
        in :data:`gpuroute.crp.phantom_search.SEARCHES` as ``"ch_table"`` and ``"ch_unpack"``)."""
        from ..crp.phantom_search import SEARCHES

        head, tail = self._head, self._tail
        opts = [p.all_arcs for p in phantoms]
        arr = [np.asarray(o, dtype=np.float64).reshape(-1, 2) for o in opts]
        costs, same = [], []
        for i in range(len(phantoms) - 1):
            c, s = self._leg_costs(arr[i][:, 0].astype(np.int64), arr[i][:, 1], arr[i + 1][:, 0].astype(np.int64),
                                   arr[i + 1][:, 1])
            costs.append(c)
            same.append(s)
        # dynamic program over the arcs of each waypoint: best[o] = cost of arriving on option o
        best = np.zeros(len(opts[0]))
        back, arrived = [], []
        free = not continue_straight
        for i, c in enumerate(costs):
            arrived.append(best)
            if i == 0 or not free:
                dep = best  # leave on the arc arrived on (the first waypoint: any arc)
            else:
                dep = np.full(best.size, best.min())  # a U-turn at the waypoint is allowed
            tot = dep[:, None] + c
            arg = np.argmin(tot, axis=0)
            back.append(arg)
            best = tot[arg, np.arange(tot.shape[1])]
        if not np.isfinite(best).any():
            raise EngineError("NoRoute", "Impossible route between points")
        plan = []
        q = self._query()
        o = int(np.argmin(best))  # the arc the last leg arrives on
        for i in range(len(costs) - 1, -1, -1):
            d = int(back[i][o])  # the arc leg i leaves waypoint i on
            a, fa = opts[i][d]
            b, fb = opts[i + 1][o]
            path = None
            if not same[i][d, o]:  # the winning pair's path, unpacked (the only search of the leg past its table)
                SEARCHES.add("ch_unpack")
                path = q.route(int(head[a]), int(tail[b]))
            plan.append(((a, fa), (b, fb), path))
            o = int(np.argmin(arrived[i])) if (free and i > 0) else d  # the arc leg i - 1 arrives on
        plan.reverse()
        return plan

    def _leg_costs(self, a, fa, b, fb):
        """Routing-weight costs (float64 (len(a), len(b)), inf unreachable) of every (departure option,
        arrival option) pair of one leg, from ONE many-to-many call on the hierarchy between the distinct
        departure heads and arrival tails: ``(1 - fa) w(a) + d(head a, tail b) + fb w(b)``, or, for a
        target ahead on the departure arc (``a == b``, ``fa <= fb``), ``(fb - fa) w(a)`` (never beaten by
        leaving the arc, which costs at least ``(1 - fa + fb) w(a)``); and that same-arc mask (bool, same
        shape). ``a``/``b`` int64 arc ids, ``fa``/``fb`` float64 fractions."""
        from ..crp.phantom_search import SEARCHES

        w, head, tail = self._w, self._head, self._tail
        us, si = np.unique(head[a], return_inverse=True)
        ut, ti = np.unique(tail[b], return_inverse=True)
        SEARCHES.add("ch_table")
        # a handful of nodes: this thread's query object's serial table (the bucket table's passes over
        # every node, and a parallel launch under the table lock, cost more than its few searches)
        d = self._query().table(us, ut)
        d = np.where(d >= INF, math.inf, d.astype(np.float64))
        c = ((1.0 - fa) * w[a])[:, None] + d[si.ravel()][:, ti.ravel()] + (fb * w[b])[None, :]
        same = (a[:, None] == b[None, :]) & (fa[:, None] <= fb[None, :])
        c = np.where(same, ((fb[None, :] - fa[:, None]) * w[a][:, None]), c)
        return c, same

    def _leg(self, pa, pb, dep, arr, path, snap=None):
        """The pieces of one leg (:func:`gpuroute.engine.legs.leg_pieces`, one compiled pass): ``arcs``,
        ``frac`` (of each arc covered), ``points`` (pieces + 1, lon/lat), per-piece ``weight`` (the engine's
        weight unit), ``duration`` (s; None without durations) and ``distance`` (m) with their sums
        (``weight_sum``, ``duration_sum``, ``distance_sum``), and the turns taken (``turn_weight``,
        ``turn_duration``: :func:`gpuroute.engine.legs.turn_sums`). Zero-length partial pieces are dropped.

        Over the overlay (``snap``, the route's metric snapshot) weights come from the snapshot's
        fraction-weighted arc costs, and durations too when its metric is a time; else from the engine's
        arrays. Turns: those between the departure arc, the path's arcs and the arrival arc (none when the
        leg stays on one arc), from the snapshot (its decoded turn cost less the out-arc's cost) when the
        route ran over the overlay, else from the graph's turn costs; durations from the snapshot when its
        metric is a time, else from the graph's turn costs (deciseconds)."""
        (a, fa), (b, fb) = dep, arr
        start, end = pa.point_of(a), pb.point_of(b)  # the phantom's or a tie's segment
        if path is None:
            mid = nodes = _NO_ARCS
        else:
            mid = np.ascontiguousarray(path.arcs, dtype=np.int64)
            nodes = np.ascontiguousarray(path.nodes, dtype=np.int64)
        if snap is not None:
            wcost, wf = snap.cost, snap.scale / self._w_scale
            dcost, df = ((snap.cost, snap.scale) if snap.is_time
                         else (self._dur if snap.duration is None else snap.duration, 1.0))  # live durations
        else:
            wcost, wf = self._w, 1.0
            dcost, df = self._dur, 1.0
        has_dur = dcost is not None
        arcs, frac, pts, w, d, ln, w_sum, d_sum, l_sum = leg_pieces(
            int(a), float(fa), int(b), float(fb), mid, nodes, path is not None, float(start[0]), float(start[1]),
            float(end[0]), float(end[1]), self._coords_f64, wcost, float(wf), dcost if has_dur else _NO_COSTS,
            float(df), has_dur, self._len)
        tw = td = 0.0
        if self._tc is not None and path is not None:
            seq = np.empty(mid.size + 2, dtype=np.int64)
            seq[0], seq[-1] = a, b
            seq[1:-1] = mid
            if snap is not None:
                td, tw = turn_sums(seq, self._t_first, self._fo, self._head, True, bool(snap.is_time),
                                   snap.turn_cost, snap.cost, float(snap.scale / self._w_scale), float(snap.scale),
                                   self._tc.duration, self._tc.weight)
            else:
                td, tw = turn_sums(seq, self._t_first, self._fo, self._head, False, False, _NO_ARCS, _NO_COSTS,
                                   1.0, 1.0, self._tc.duration, self._tc.weight)
        return {"arcs": arcs, "frac": frac, "points": pts, "weight": w, "duration": d if has_dur else None,
                "distance": ln, "weight_sum": w_sum, "duration_sum": d_sum, "distance_sum": l_sum,
                "turn_weight": float(tw), "turn_duration": float(td), "start": pa, "end": pb}

    def _name(self, arc):
        k = int(self._name_id[arc])
        return self._names[k] if 0 <= k < len(self._names) else ""

    def _summary(self, leg):
        """The names of the two streets with the longest distance on the leg, in route order."""
        return ", ".join(self._names[i] for i in summary_ids(self._name_id[leg["arcs"]], leg["distance"]).tolist())

    def _leg_json(self, leg, end, steps, ann, geometries):
        tw, td = leg["turn_weight"], leg["turn_duration"]
        out = {"steps": self._steps(leg, end, geometries) if steps else [], "summary": self._summary(leg),
               "weight": round1((leg["weight_sum"] + tw) * self._w_scale),
               "duration": None if leg["duration"] is None else round1(leg["duration_sum"] + td),
               "distance": round1(leg["distance_sum"])}
        if ann:  # one value per piece, from the leg's arrays (rounded as round() rounds each)
            a = {}
            dist, dur = leg["distance"], leg["duration"]
            if "distance" in ann:
                a["distance"] = round_floats(dist, 6)
            if "duration" in ann:
                a["duration"] = [None] * int(dist.size) if dur is None else round_floats(dur, 1)
            if "datasources" in ann:
                a["datasources"] = [0] * int(dist.size)
            if "nodes" in ann:
                arcs = leg["arcs"]
                nodes = np.concatenate([self._tail[arcs[:1]], self._head[arcs]])
                a["nodes"] = self._node_ids[nodes].tolist()
            if "weight" in ann:
                a["weight"] = round_floats(leg["weight"] * self._w_scale, 1)
            if "speed" in ann and dur is None:
                a["speed"] = [None] * int(dist.size)
            elif "speed" in ann:
                with np.errstate(divide="ignore", invalid="ignore"):
                    sp = np.where(dur > 0, dist / np.where(dur > 0, dur, 1.0), 0.0)
                a["speed"] = round_floats(sp, 1)
            if "datasources" in ann:
                a["metadata"] = {"datasource_names": ["gpuroute"]}
            out["annotation"] = a
        return out

    # ------------------------------------------------------------------ steps
    def _steps(self, leg, end, geometries):
        """The steps of a leg (OSRM's step objects) from its arrays: the maneuvers, each step's sums and the
        intersections in compiled passes (:func:`gpuroute.engine.legs.maneuvers`,
        :func:`gpuroute.engine.legs.intersections`), the values rounded as ``round`` rounds them."""
        arcs, pts = leg["arcs"], leg["points"]
        head, tail = self._head, self._tail
        dur = leg["duration"]
        starts, kinds, mods, sums, i_first, i_at = maneuvers(
            arcs, self._bearing, self._name_id, head, tail, self._degree, leg["weight"],
            dur if dur is not None else leg["distance"], leg["distance"])
        flat = round_floats(pts.ravel(), 6)
        loc = [flat[i:i + 2] for i in range(0, len(flat), 2)]
        b_int = (np.rint(self._bearing[arcs]).astype(np.int64) % 360).tolist()
        # the intersections: at the tail of piece j, arrived from piece j - 1's tail, left to piece j's head
        first, bearings, entry, in_pos, out_pos = intersections(
            tail[arcs[i_at]], tail[arcs[i_at - 1]], head[arcs[i_at]], self._fo_all, head, self._rfo, self._rev_tail,
            self._coords_f64)
        first, bearings, entry = first.tolist(), bearings.tolist(), entry.tolist()
        in_pos, out_pos, at = in_pos.tolist(), out_pos.tolist(), i_at.tolist()
        inter_all = [{"location": loc[j], "bearings": bearings[first[r]:first[r + 1]],
                      "entry": entry[first[r]:first[r + 1]], "in": in_pos[r], "out": out_pos[r]}
                     for r, j in enumerate(at)]
        i_first = i_first.tolist()
        bounds = starts.tolist() + [int(arcs.size)]
        w_scale = self._w_scale
        sums = sums.tolist()
        geoms = encode_geometries(pts, bounds[:-1], [b + 1 for b in bounds[1:]], geometries)
        steps = []
        for s, (kind, mod) in enumerate(zip(kinds.tolist(), mods.tolist(), strict=True)):
            j0 = bounds[s]
            b_after = b_int[j0]
            if kind == 0:  # depart
                b_before = 0
                inter = [{"location": loc[0], "bearings": [b_after], "entry": [True], "out": 0}]
            else:
                b_before = b_int[j0 - 1]
                inter = []
            inter += inter_all[i_first[s]:i_first[s + 1]]
            man = {"bearing_after": b_after, "bearing_before": b_before, "location": loc[j0], "type": STEP_TYPES[kind]}
            if mod >= 0:
                man["modifier"] = MODIFIERS[mod]
            w, d, ln = sums[s]
            steps.append({"geometry": geoms[s], "maneuver": man,
                          "mode": "driving", "driving_side": "right", "name": self._name(arcs[j0]),
                          "intersections": inter, "weight": round1(w * w_scale),
                          "duration": None if dur is None else round1(d), "distance": round1(ln)})
        bearing = self._bearing[arcs]
        # arrive: the side of the street the destination lies on
        b_last = float(bearing[-1])
        px, py = local_xy(end.input_lon, end.input_lat, end.lon, end.lat)
        side = math.sin(math.radians(b_last)) * float(py) - math.cos(math.radians(b_last)) * float(px)
        amod = "straight" if end.distance < 1.0 else ("right" if side < 0 else "left")
        bb = int(round(b_last)) % 360
        steps.append({"geometry": encode_geometry(pts[-1:].repeat(2, axis=0), geometries),
                      "maneuver": {"bearing_after": 0, "bearing_before": bb, "location": loc[-1], "type": "arrive",
                                   "modifier": amod},
                      "mode": "driving", "driving_side": "right", "name": self._name(arcs[-1]),
                      "intersections": [{"location": loc[-1], "bearings": [(bb + 180) % 360], "entry": [True],
                                         "in": 0}],
                      "weight": 0.0, "duration": None if leg["duration"] is None else 0.0, "distance": 0.0})
        return steps

    # ------------------------------------------------------------------ table
    def _indices(self, idx, k, what):
        if idx is None or (isinstance(idx, str) and idx == "all"):
            return np.arange(k, dtype=np.int64)
        if isinstance(idx, (int, np.integer)):
            idx = [idx]
        try:
            vals = [int(v) if not isinstance(v, bool) and float(v) == int(v) else None for v in idx]
        except (TypeError, ValueError):
            vals = [None]
        if not vals or any(v is None for v in vals):
            raise EngineError("InvalidValue", f"{what} must be a non-empty list of coordinate indices, got {idx!r}")
        bad = [v for v in vals if not 0 <= v < k]
        if bad:
            raise EngineError("InvalidValue", f"{what} index {bad[0]} is outside the {k} coordinates [0, {k - 1}]")
        return np.asarray(vals, dtype=np.int64)

    def _options(self, phantoms):
        """Per phantom, its usable arcs (ties included) padded to the most of any (at least two): ``arcs``
        int64 (k, o) (-1 unused) and ``frac``."""
        k = len(phantoms)
        fw = np.array([p.forward_arc for p in phantoms], dtype=np.int64).reshape(k)
        rv = np.array([p.reverse_arc for p in phantoms], dtype=np.int64).reshape(k)
        f = np.array([p.fraction for p in phantoms], dtype=np.float64).reshape(k)
        tied = [i for i, p in enumerate(phantoms) if p.ties]
        o = max([2] + [len(phantoms[i].all_arcs) for i in tied])
        arcs = np.full((k, o), -1, dtype=np.int64)
        frac = np.zeros((k, o))
        # a phantom's own arcs first (forward at f, reverse at 1 - f; Phantom.arcs), then its ties'
        has_f, has_r = fw >= 0, rv >= 0
        arcs[:, 0] = np.where(has_f, fw, rv)
        frac[:, 0] = np.where(has_f, f, np.where(has_r, 1.0 - f, 0.0))
        both = has_f & has_r
        arcs[:, 1] = np.where(both, rv, -1)
        frac[:, 1] = np.where(both, 1.0 - f, 0.0)
        for i in tied:
            for j, (a, fr) in enumerate(phantoms[i].all_arcs):
                arcs[i, j], frac[i, j] = a, fr
        return arcs, frac

    def table(self, coords, *, sources=None, destinations=None, annotations=("duration",), radiuses=None,
              bearings=None, approaches=None, fallback_speed=None, scale_factor=None, matrices="lists",
              exclude=None, avoid_polygons=None, avoid_ways=None):
        """OSRM ``/table/v1``: durations (and distances) of the fastest routes between sources and
        destinations (``exclude``, ``avoid_polygons``, ``avoid_ways``: as :meth:`route`'s; each cell is then
        the route with that exclude, over the overlay's many-to-many on the excluded customization).

        Parameters
        ----------
        coords : sequence of (lon, lat)
        sources, destinations : sequence of int, optional
            Coordinate indices (default: all, or ``"all"``).
        annotations : str or sequence of {"duration", "distance"}
            (``"duration,distance"`` accepted.)
        radiuses, bearings, approaches : sequence, one entry per coordinate, optional
        fallback_speed : float, optional
            For pairs without a route, the crow-fly distance between the input coordinates at this speed
            (m/s), listed in ``fallback_speed_cells``.
        scale_factor : float, optional
            Multiplies the durations.
        matrices : {"lists", "arrays"}
            ``"lists"``: the matrices as nested lists of floats; ``"arrays"``: as C-contiguous float64
            ndarrays (|sources|, |destinations|) with NaN where no route exists, the same values
            (:func:`gpuroute.engine.osrm.matrix_array`; no million-element lists: orjson writes them
            with ``OPT_SERIALIZE_NUMPY``, NaN as ``null``, as the HTTP server does).

        Returns
        -------
        dict
            ``{"code": "Ok", "durations": [[s]], "distances": [[m]], "sources": [...], "destinations": [...]}``
            rounded to 0.1, with ``None`` (JSON ``null``) where no route exists; the matrices only as asked.

        Raises
        ------
        EngineError
            ``InvalidOptions`` (unknown annotation, option lists of the wrong length), ``InvalidValue``
            (a bad coordinate, source or destination index, fallback speed or scale factor), ``TooBig``
            (more than ``limits["max_locations_table"]`` cells), ``NoSegment``; ``exclude`` as :meth:`route`.

        Notes
        -----
        Costs come from one many-to-many query on the hierarchy between the nodes at the ends of the
        phantoms' arcs, plus the partial arcs, minimised over each phantom's (up to two) arcs; the
        same-arc case is exact. A matrix of a quantity other than the routing weight (distances; durations
        when routing by distance) unpacks the chosen path of each cell (one CH query per distinct node
        pair).
        """
        ex = resolve_exclude(self, exclude, avoid_polygons, avoid_ways)
        coords = self._coords(coords)
        k = len(coords)
        if k < 1:
            raise EngineError("InvalidOptions", "Number of coordinates needs to be at least one.")
        src = self._indices(sources, k, "sources")
        dst = self._indices(destinations, k, "destinations")
        mx = self.limits["max_locations_table"]
        if mx > 0 and src.size * dst.size > mx:
            raise EngineError("TooBig", f"Too many table coordinates: {src.size} x {dst.size} = "
                              f"{src.size * dst.size} cells, the maximum is {mx}")
        ann = self._annotation_set(annotations, TABLE_ANNOTATIONS)
        as_matrix = matrix_or_none if self._choice(matrices, ("lists", "arrays"), "matrices") == "lists" else matrix_array
        if not ann:
            raise EngineError("InvalidOptions", "annotations must name duration and/or distance")
        for what, v in (("fallback_speed", fallback_speed), ("scale_factor", scale_factor)):
            if v is not None:
                try:
                    ok = float(v) > 0 and math.isfinite(float(v))
                except (TypeError, ValueError):
                    ok = False
                if not ok:
                    raise EngineError("InvalidValue", f"{what} must be a number > 0, got {v!r}")
        phantoms = self._snap(coords, radiuses, bearings, approaches, None if ex is None else ex.segments())
        need_dur = "duration" in ann
        need_len = "distance" in ann
        if need_dur and self._dur is None:
            raise EngineError("InvalidOptions", f"graph {self.graph.name!r} has no travel times (the routing weight "
                              f"{self.weight!r} is a {self.graph.units[self.weight].quantity}): ask "
                              "annotations=distance, or serve a graph with travel times")
        sp, tp = [phantoms[i] for i in src], [phantoms[j] for j in dst]
        snap = overlay_snapshot(self) if ex is None else ex.snapshot()
        if snap is not None:  # the overlay's many-to-many: turn costs, restrictions, traffic
            cost, dur, length = overlay_matrices(self, snap, sp, tp, need_dur, need_len)
            reach = np.isfinite(cost)
        else:
            cost, choice = self._cost_matrix(sp, tp)
            reach = np.isfinite(cost)
            dur = cost * self._w_scale if (need_dur and self._dur_is_weight) else None
            length = None
            if (need_dur and dur is None) or need_len:
                d2, l2 = self._unpack_cells(sp, tp, reach, choice)
                dur = d2 if dur is None else dur
                length = l2
        fb_cells = []
        if fallback_speed is not None and not reach.all():
            rows, cols = np.nonzero(~reach)
            c = np.asarray(coords)
            crow = haversine_m(c[src[rows], 0], c[src[rows], 1], c[dst[cols], 0], c[dst[cols], 1])
            if dur is not None:
                dur = dur.copy()
                dur[rows, cols] = crow / float(fallback_speed)
            if length is not None:
                length = length.copy()
                length[rows, cols] = crow
            fb_cells = [[int(r), int(c_)] for r, c_ in zip(rows, cols, strict=True)]
        out = {"code": "Ok"}
        if need_dur:
            if scale_factor is not None:
                dur = dur * float(scale_factor)
            out["durations"] = as_matrix(dur)
        if need_len:
            out["distances"] = as_matrix(length)
        if fb_cells:
            out["fallback_speed_cells"] = fb_cells
        used = sorted(set(src.tolist()) | set(dst.tolist()))
        wps = dict(zip(used, waypoints([phantoms[i] for i in used], self._fingerprint), strict=True))
        given = set()

        def wp(i):  # one waypoint per coordinate, copied where the coordinate comes again
            w = wps[i]
            if i not in given:
                given.add(i)
                return w
            return {**w, "location": list(w["location"])}

        out["sources"] = [wp(i) for i in src.tolist()]
        out["destinations"] = [wp(j) for j in dst.tolist()]
        return out

    def _cost_matrix(self, sp, tp):
        """Routing-weight costs (|S|, |T|) float64 (inf unreachable) between phantoms, and the choice of
        each cell: ``(source option, target option, same_arc)`` as int arrays.

        One many-to-many query on the hierarchy between the distinct nodes at the ends of the phantoms'
        arcs, then, per pair of options (source arc ``a``, target arc ``b``), ``rest of a + d(head a,
        tail b) + start of b`` or the same-arc distance, minimised over the pairs. Where the hierarchy's
        table runs on the GPU the combination runs there too (:func:`gpuroute.engine.table_combine.combine`;
        only the (|S|, |T|) results come back).
        """
        w, head, tail = self._w, self._head, self._tail
        sa, sf = self._options(sp)
        ta, tf = self._options(tp)
        sv, tv = sa >= 0, ta >= 0
        s_node = np.where(sv, head[np.maximum(sa, 0)], 0)
        t_node = np.where(tv, tail[np.maximum(ta, 0)], 0)
        s_cost = np.where(sv, (1.0 - sf) * w[np.maximum(sa, 0)], math.inf)
        t_cost = np.where(tv, tf * w[np.maximum(ta, 0)], math.inf)
        # options another option of the same phantom dominates leave the node table (not the same-arc case)
        s_node, s_cost = _prune_options(sa, s_node, s_cost, tail, w)
        t_node, t_cost = _prune_options(ta, t_node, t_cost, head, w)
        us, s_inv = np.unique(s_node, return_inverse=True)
        ut, t_inv = np.unique(t_node, return_inverse=True)
        s_inv = s_inv.reshape(s_node.shape)
        t_inv = t_inv.reshape(t_node.shape)
        xp = np
        ids_s, ids_t = us, ut
        if resolve_device("auto") == "gpu":
            import cupy as xp

            ids_s, ids_t = xp.asarray(us), xp.asarray(ut)
        # one table at a time per engine, the phantom step included: on the GPU the hierarchy's node table
        # lives in the engine's buffers until the step has read it
        with self._table_lock:
            d = xp.asarray(self.ch.table(ids_s, ids_t)).astype(xp.float64)
            d[d >= float(INF)] = math.inf
            best, so, to, same_won = combine(d, s_inv.astype(np.int64), t_inv.astype(np.int64), s_cost, t_cost, sa,
                                             ta, sf, tf, w[np.maximum(sa, 0)].astype(np.float64))
        return best, (so, to, same_won)

    def _unpack_cells(self, sp, tp, reach, choice):
        """Durations (s) and distances (m) of the chosen route of every reachable cell, by unpacking the
        CH path between the phantoms' arcs (one query per distinct node pair)."""
        so, to, is_same = choice
        sa, sf = self._options(sp)
        ta, tf = self._options(tp)
        dur = np.full(reach.shape, math.inf)
        length = np.full(reach.shape, math.inf)
        q = self._query()
        arc_dur = self._dur if self._dur is not None else np.zeros_like(self._len)  # durations then unused
        cache = {}
        for i, j in zip(*np.nonzero(reach), strict=True):
            a, fa = int(sa[i, so[i, j]]), float(sf[i, so[i, j]])
            b, fb = int(ta[j, to[i, j]]), float(tf[j, to[i, j]])
            if is_same[i, j]:
                dur[i, j] = (fb - fa) * arc_dur[a]
                length[i, j] = (fb - fa) * self._len[a]
                continue
            key = (int(self._head[a]), int(self._tail[b]))
            mid = cache.get(key)
            if mid is None:
                r = q.route(*key)
                arcs = np.asarray(r.arcs, dtype=np.int64)
                mid = cache[key] = (float(arc_dur[arcs].sum()), float(self._len[arcs].sum()))
            dur[i, j] = (1.0 - fa) * arc_dur[a] + mid[0] + fb * arc_dur[b]
            length[i, j] = (1.0 - fa) * self._len[a] + mid[1] + fb * self._len[b]
        return dur, length

    # ------------------------------------------------------------------ trip
    def trip(self, coords, *, roundtrip=True, source="any", destination="any", steps=False, annotations=False,
             geometries="polyline", overview="simplified", radiuses=None, bearings=None, approaches=None,
             time_limit=None, exclude=None, avoid_polygons=None, avoid_ways=None):
        """OSRM ``/trip/v1``: the fastest order to visit every coordinate (a travelling salesman tour over
        the engine's duration table), routed (``exclude``, ``avoid_polygons``, ``avoid_ways``: as
        :meth:`route`'s, for the table and the legs).

        Parameters
        ----------
        coords : sequence of (lon, lat), length 2 .. ``limits["max_locations_trip"]``
        roundtrip : bool
            True: the trip returns to its first waypoint (the last leg closes the tour).
        source : {"any", "first"}
            ``"first"``: the trip starts at the first coordinate.
        destination : {"any", "last"}
            ``"last"``: the last coordinate is visited last (before returning, on a roundtrip).
        steps, annotations, geometries, overview, radiuses, bearings, approaches
            As :meth:`route` (per-coordinate options in the input order).
        time_limit : float, optional
            Seconds the tour search may take past ``config.TOUR_EXACT_MAX_N`` coordinates (default:
            ``config.SERVE_TRIP_TIME_PER_STOP_S`` x n, clamped to [``SERVE_TRIP_TIME_MIN_S``,
            ``SERVE_TRIP_TIME_MAX_S``]); up to ``TOUR_EXACT_MAX_N`` the order is exact (Held–Karp, about a
            millisecond) and no search runs, the limit is only checked.

        Returns
        -------
        dict
            ``{"code": "Ok", "trips": [route], "waypoints": [...]}``: one trip, a route object as
            :meth:`route`'s (``legs`` in visiting order; a roundtrip has one leg per coordinate, the last
            back to the first waypoint); ``waypoints`` in input order, each with ``trips_index`` (0) and
            ``waypoint_index`` (its position in the trip).

        Raises
        ------
        EngineError
            ``InvalidOptions`` (fewer than two coordinates, an unknown option value), ``InvalidValue`` (a
            bad coordinate or time limit), ``TooBig`` (too many coordinates), ``NoSegment``,
            ``NotImplemented`` (``roundtrip=False`` without ``source="first"`` and ``destination="last"``,
            as OSRM), ``NoTrips`` (no trip reaches every waypoint).

        Notes
        -----
        OSRM's semantics (``plugins/trip.cpp``): a roundtrip starts at the first coordinate, or at the last
        with ``destination="last"`` alone; with ``source="first"`` and ``destination="last"`` the trip
        goes from the first to the last coordinate (then back to the first on a roundtrip). The cost
        matrix is the table of routing weights between the snapped waypoints (:meth:`table`'s); the tour
        is exact up to ``config.TOUR_EXACT_MAX_N`` coordinates (:func:`gpuroute.tours.tsp_exact`; of the
        optimal orders the lexicographically smallest), past it it comes from :func:`gpuroute.tours.tsp`
        (OSRM: brute force up to 10 coordinates, farthest insertion above). The trip is then routed as :meth:`route` with ``continue_straight=False`` through the
        waypoints in that order, so every leg is the table's cell and the trip's weight is the tour's
        cost. On an engine with an overlay (a dataset directory) the legs follow the overlay's current
        metric while the order follows the hierarchy's table.
        """
        ex = resolve_exclude(self, exclude, avoid_polygons, avoid_ways)
        coords = self._coords(coords)
        n = len(coords)
        if n < 2:
            raise EngineError("InvalidOptions", "Number of coordinates needs to be at least two.")
        mx = self.limits.get("max_locations_trip", 0)
        if mx and mx > 0 and n > mx:
            raise EngineError("TooBig", f"Number of entries {n} is higher than current maximum ({mx})")
        if isinstance(roundtrip, str) and roundtrip in ("true", "false"):
            roundtrip = roundtrip == "true"
        if not isinstance(roundtrip, (bool, np.bool_)):
            raise EngineError("InvalidOptions", f"roundtrip must be true or false, got {roundtrip!r}")
        source = self._choice(source, ("any", "first"), "source")
        destination = self._choice(destination, ("any", "last"), "destination")
        fixed_start, fixed_end = source == "first", destination == "last"
        if not roundtrip and not (fixed_start and fixed_end):
            raise EngineError("NotImplemented", "roundtrip=false needs source=first and destination=last")
        if time_limit is not None:  # None: the size-scaled budget of _tour
            try:
                ok = (not isinstance(time_limit, (bool, str)) and float(time_limit) > 0
                      and math.isfinite(float(time_limit)))
            except (TypeError, ValueError):
                ok = False
            if not ok:
                raise EngineError("InvalidValue",
                                  f"time_limit must be a number of seconds > 0, got {time_limit!r}")
            time_limit = float(time_limit)
        radiuses = _osrm_list(radiuses, n, "radiuses")
        bearings = _osrm_list(bearings, n, "bearings")
        approaches = _osrm_list(approaches, n, "approaches")
        phantoms = self._snap(coords, radiuses, bearings, approaches, None if ex is None else ex.segments())
        snap = overlay_snapshot(self) if ex is None else ex.snapshot()
        cost = (self._cost_matrix(phantoms, phantoms)[0] if snap is None
                else overlay_matrices(self, snap, phantoms, phantoms)[0])
        order = self._tour(cost, roundtrip, fixed_start, fixed_end, time_limit)

        def pick(v):
            if v is None:
                return None
            out = [v[i] for i in order]
            return out + [v[order[0]]] if roundtrip else out

        try:
            res = self.route(pick(coords), steps=steps, annotations=annotations, geometries=geometries,
                             overview=overview, radiuses=pick(radiuses), bearings=pick(bearings),
                             approaches=pick(approaches), continue_straight=False, exclude=exclude,
                             avoid_polygons=avoid_polygons, avoid_ways=avoid_ways)
        except EngineError as e:
            if e.code == "NoRoute":
                raise EngineError("NoTrips", "No trip visiting all destinations possible.") from None
            raise
        position = np.empty(n, dtype=np.int64)
        position[order] = np.arange(n)
        waypoints = []
        for i in range(n):
            wp = dict(res["waypoints"][int(position[i])])
            wp["waypoint_index"] = int(position[i])
            wp["trips_index"] = 0
            waypoints.append(wp)
        return {"code": "Ok", "trips": res["routes"], "waypoints": waypoints}

    @staticmethod
    def _tour(cost, roundtrip, fixed_start, fixed_end, time_limit=None):
        """The visiting order (int list, each index once) of a trip on a cost matrix (inf: unreachable);
        EngineError NoTrips when every order needs an unreachable leg.

        Up to ``config.TOUR_EXACT_MAX_N`` stops the order is optimal (:func:`gpuroute.tours.tsp_exact`,
        which avoids unreachable legs whenever an order can); past it :func:`gpuroute.tours.tsp` searches
        for ``time_limit`` seconds (None: ``SERVE_TRIP_TIME_PER_STOP_S`` x n, clamped to
        [``SERVE_TRIP_TIME_MIN_S``, ``SERVE_TRIP_TIME_MAX_S``])."""
        n = cost.shape[0]
        finite = np.isfinite(cost)
        if roundtrip and not finite.all():  # a tour returns everywhere: every pair must be reachable
            raise EngineError("NoTrips", "No trip visiting all destinations possible.")
        if fixed_start and fixed_end:  # first .. last (a roundtrip then returns: a constant last leg)
            start, end = 0, n - 1
        elif fixed_end and roundtrip:  # OSRM: a roundtrip with only destination=last starts there
            start = end = n - 1
        else:
            start = end = None
        if n <= config.TOUR_EXACT_MAX_N:
            from ..tours import tsp_exact

            res = tsp_exact(cost, start=start, end=end, roundtrip=bool(roundtrip))
            if not math.isfinite(res.cost):
                raise EngineError("NoTrips", "No trip visiting all destinations possible.")
            return [int(v) for v in res.tour]
        from ..tours import tsp

        if time_limit is None:
            time_limit = min(max(config.SERVE_TRIP_TIME_PER_STOP_S * n, config.SERVE_TRIP_TIME_MIN_S),
                             config.SERVE_TRIP_TIME_MAX_S)
        big = (float(cost[finite].max()) if finite.any() else 1.0) * (n + 1) + 1.0
        m = np.where(finite, cost, big)
        np.fill_diagonal(m, 0.0)
        res = tsp(m, start=start, end=end, time_limit=time_limit, seed=0)
        order = [int(v) for v in np.asarray(res.tour, dtype=np.int64)]
        if sorted(order) != list(range(n)):
            raise RuntimeError(f"the tour search returned {order!r}, not an order of {n} stops")
        if start is not None and start == end and order[0] != start:  # a closed tour from ``start``
            k = order.index(start)
            order = order[k:] + order[:k]
        if start is not None and start != end and (order[0] != start or order[-1] != end):
            raise RuntimeError(f"the tour search returned {order!r}, not a path from {start} to {end}")
        legs = list(zip(order[:-1], order[1:], strict=True)) + ([(order[-1], order[0])] if roundtrip else [])
        if any(not finite[a, b] for a, b in legs):
            raise EngineError("NoTrips", "No trip visiting all destinations possible.")
        return order

    # ------------------------------------------------------------------ customize (live traffic)
    def customize(self, updates=None, *, metric=None):
        """Live traffic: new costs for some arcs, or a new metric, applied to the overlay atomically
        (:meth:`gpuroute.engine.traffic.TrafficRouter.customize`); routes started afterwards follow it.

        Parameters
        ----------
        updates : list of dict, optional
            ``{"arc": id, "cost": c}`` (``c`` in the current metric's unit: deciseconds for ``"time"``,
            metres for ``"distance"``; rounded to an integer >= 1) or ``{"from": osm_node_id, "to":
            osm_node_id, "speed_kmh": v}`` (OSRM's traffic CSV semantics: the arc between two consecutive
            OSM nodes in that direction; travel time ``length_m / v``, in deciseconds; on a Lua profile's
            weight such as ``routability`` also an optional ``"rate"``, the weight set as osrm-customize's
            ``--segment-speed-file`` does: :meth:`gpuroute.engine.traffic.TrafficRouter.parse_updates`).
            An arc listed twice takes its last cost.
        metric : {"time", "distance", "time-uturn"}, optional
            Re-customize every cell for this metric (traffic updates made before are dropped). On a graph
            read with a Lua profile: the profile's ``weight_name`` (e.g. ``"routability"``: weights with
            turn weights), ``"duration"`` (travel times with turn durations) or ``"distance"``
            (:meth:`gpuroute.engine.traffic.TrafficRouter.metric_names`).

        Returns
        -------
        dict
            ``{"code": "Ok", "seconds": s, "cells": [cells re-customized per level], "metric": name,
            "arcs": arcs changed, "saved": {"file", "generation", "updated", "seconds"} or None}`` (``saved``:
            see Notes).

        Raises
        ------
        EngineError
            ``NotImplemented`` (no overlay: a graph opened without a dataset directory),
            ``InvalidOptions`` (neither or both of ``updates`` and ``metric``, updates not a list),
            ``InvalidValue`` naming the first bad update (unknown arc id or node pair, a cost or speed
            that is not finite and > 0) or an unknown metric. Nothing changes on any error: every update is
            validated before the overlay is touched, and the overlay swaps metrics as one reference.
        OSError
            :class:`gpuroute.engine.dataset.TrafficSaveError`: the traffic could not be saved (disk full,
            ...; the message names the file); the customization was undone, the previous file is intact.

        Notes
        -----
        Routes, tables, trips and isochrones follow the new metric (see :attr:`capabilities`).

        An engine opened from a dataset directory (:meth:`open`) saves the overlay's metric after each
        successful customization to ``DIR/traffic.npz`` (atomic replace; :class:`gpuroute.engine.dataset.
        TrafficStore`), and the next :meth:`open` of the directory applies it again, so a restart keeps
        the traffic (``info["traffic"]`` says whether it did). A failed customization writes nothing. An
        engine built from a graph (or given an overlay of its own) has no directory to write to: its
        traffic lives in memory only (``saved`` None), as does that of a dataset directory the process
        cannot write to. ``gpuroute customize DIR --reset`` (or deleting the file) drops the saved traffic.
        """
        from .dataset import traffic_store

        if self._traffic is None:
            raise EngineError("NotImplemented", "this engine has no overlay to customize: build a dataset with "
                                                "`gpuroute build GRAPH -o DIR` and open (or serve) DIR")
        store = traffic_store(self.overlay)
        return self._traffic.customize(updates, metric, persist=None if store is None else store.save)

    def warm_customize(self):
        """Run the kernels of :meth:`customize` once without changing the metric (the server's warm-up:
        :meth:`gpuroute.engine.traffic.TrafficRouter.warm`); False without an overlay (nothing to warm)."""
        if self._traffic is None:
            return False
        self._traffic.warm()
        return True

    # ------------------------------------------------------------------ nearest
    def nearest(self, coord, *, number=1, radiuses=None, bearings=None, approaches=None, exclude=None):
        """OSRM ``/nearest/v1``: the ``number`` nearest road segments of one coordinate, as OSRM's nearest
        among every segment, those of small strongly connected components included (routes, tables, trips
        and isochrones snap to the largest component, :attr:`segments`). ``exclude``: as :meth:`route`'s
        (segments whose directions are all excluded are skipped, an excluded direction is not listed).

        Parameters
        ----------
        coord : (lon, lat)
        number : int
            1 .. ``limits["max_locations_nearest"]``.
        radiuses, bearings, approaches : one-entry sequences (or the entry itself), optional

        Returns
        -------
        dict
            ``{"code": "Ok", "waypoints": [...]}``, nearest first, each with ``nodes`` (the segment's two
            OSM node ids), ``hint``, ``distance``, ``name``, ``location``.

        Raises
        ------
        EngineError
            ``InvalidValue`` (bad coordinate), ``InvalidOptions`` (bad number or option), ``TooBig``
            (``number`` over the limit), ``NoSegment``.
        """
        ex = resolve_exclude(self, exclude)
        if coord is not None and len(coord) == 1 and not isinstance(coord[0], (int, float, np.number)):
            coord = coord[0]  # [[lon, lat]] as the URL parser may give it
        (lon, lat), = self._coords([coord])
        if isinstance(number, bool) or not isinstance(number, (int, np.integer)) or number < 1:
            raise EngineError("InvalidOptions", f"number must be an integer >= 1, got {number!r}")
        mx = self.limits["max_locations_nearest"]
        if mx > 0 and number > mx:
            raise EngineError("TooBig", f"Number of results {number} is higher than current maximum ({mx})")

        radiuses = _one_entry(radiuses, "radiuses")
        bearings = _one_entry(bearings, "bearings")
        approaches = _one_entry(approaches, "approaches")
        # OSRM's nearest: every segment, small components included (routes snap to the largest one)
        index = self.segments if self.segments.component == "any" else SegmentIndex.of(self.graph, "any")
        if ex is not None:
            index = ex.segments("any")
        found = self._snap([(lon, lat)], radiuses, bearings, approaches, index)  # validates, maps NoSegment
        if number > 1:
            r = None if radiuses is None or radiuses[0] in (None, "unlimited") else float(radiuses[0])
            b = None if bearings is None else check_bearing(bearings[0])
            found = index.nearest(lon, lat, number, radius=r, bearing=b,
                                          approach=None if approaches is None else approaches[0])
        ids = self._node_ids
        return {"code": "Ok",
                "waypoints": [waypoint(p, self._fingerprint, nodes=(ids[p.u], ids[p.v])) for p in found]}

    # ------------------------------------------------------------------ isochrone
    def isochrone(self, coord, contours, *, metric="duration", polygons=True, denoise=1.0, generalize=None,
                  colors=None, radiuses=None, bearings=None, approaches=None, coordinates="lists", exclude=None,
                  avoid_polygons=None, avoid_ways=None):
        """Isochrones (OSRM issue #401): the area reachable from one coordinate within each contour, as a
        GeoJSON FeatureCollection shaped like Valhalla's and Mapbox's isochrone answers.

        Parameters
        ----------
        coord : (lon, lat)
            The origin, snapped onto a road segment as a route's first waypoint (the rest of its arc
            counts: the origin reaches the arc's head after ``(1 - fraction)`` of the arc's cost).
        contours : float or sequence of float
            Seconds (``metric="duration"``) or metres (``metric="distance"``); each > 0, at most
            ``limits["max_isochrone_contours"]`` of them, none above ``limits["max_isochrone_duration_s"]``
            (or ``max_isochrone_distance_m``).
        metric : {"duration", "distance"}
            ``"duration"``: the travel time of the fastest routes (the routing weight when it is a time,
            else the graph's ``travel_time``); ``"distance"``: the length of the shortest routes (a
            hierarchy of a length weight: the routing weight, or ``distance_ch``; else a bounded Dijkstra
            over the graph's length weight; no turn costs nor restrictions). On an engine with an
            overlay (a dataset directory) the routes are those ``/route`` drives, turn restrictions
            honoured: ``"duration"`` on the overlay's current metric when it is a time (its arc and turn
            costs: it follows :meth:`customize`), else on the graph's travel times with the graph's turn
            durations (a Lua profile's) and the turns the profile closes forbidden; ``"distance"`` on
            lengths without turn costs (the overlay's current metric when it is a length, else the
            graph's length weight).
        polygons : bool
            True: each contour's geometry is a ``Polygon`` (or ``MultiPolygon``) with holes; False: its
            rings as a ``LineString`` (one ring) or ``MultiLineString`` (outer rings, then holes).
        denoise : float in [0, 1]
            Drop the parts of a contour whose area is below ``denoise`` times its largest part's
            (Valhalla's and Mapbox's meaning: 1 keeps the largest part only, 0 keeps every part).
        generalize : float, optional
            Douglas-Peucker tolerance in metres of the rings (default
            ``config.SERVE_ISOCHRONE_GENERALIZE_M``; 0: none). Above the buffer radius, roads at the
            edge may fall outside their polygon.
        colors : sequence of str, optional
            One hex colour per contour (``"ff0000"`` or ``"#ff0000"``), reported as ``properties.color``.
        radiuses, bearings, approaches : one-entry sequences (or the entry itself), optional
            As :meth:`nearest`.
        exclude : str or sequence of str, optional
            As :meth:`route`'s: the origin snaps to an arc that is not excluded and no route of the contours
            enters an excluded arc (an engine with an overlay: its turn-aware search with every turn into an
            excluded arc forbidden, :mod:`gpuroute.engine.exclude`).
        avoid_polygons, avoid_ways : optional
            As :meth:`route`'s (their arcs are excluded as ``exclude``'s).
        coordinates : {"lists", "arrays"}
            ``"lists"``: each ring's positions a list of ``[lon, lat]`` lists (plain data); ``"arrays"``:
            one float64 array (k, 2) per ring where the checked fast path drew the polygons (the HTTP
            layer's orjson writes them as the same JSON without building tens of thousands of Python
            lists, and the garbage collections they trigger).

        Returns
        -------
        dict
            ``{"code": "Ok", "type": "FeatureCollection", "features": [...], "waypoints": [origin]}``, one
            Feature per contour, largest first, each ``{"type": "Feature", "properties": {"contour":
            value (s or m, as given), "metric": metric, "color": "#rrggbb" (when given)}, "geometry":
            ...}``; positions ``[lon, lat]`` in degrees rounded to 6 decimals; ``waypoints`` holds the
            snapped origin (an OSRM waypoint object).

        Raises
        ------
        EngineError
            ``InvalidOptions`` (no contours, an unknown metric, a distance metric without a length
            weight, bad ``polygons``/``denoise``/``generalize``/``colors`` or per-coordinate options),
            ``InvalidValue`` (a bad coordinate, a contour that is not a number > 0), ``TooBig`` (too many
            contours, a contour over the limit), ``NoSegment``.

        Notes
        -----
        Construction (:mod:`gpuroute.engine.isochrone`). One bounded search from the head of each usable
        arc of the snapped origin, bounded by the largest contour minus the partial arc, gives the cost
        ``d(v)`` of every node reachable within it (CPU: a bounded Dijkstra, or, past
        ``config.SERVE_ISOCHRONE_DIJKSTRA_FRACTION`` of the nodes, the hierarchy's bounded PHAST; GPU:
        a PHAST pass whose rows stay on the device). For a contour ``C`` the reachable network is then:
        every arc ``u -> v`` with ``d(u) <= C``, cut at the fraction ``min(1, (C - d(u)) / c(u -> v))``
        of its length from ``u`` (arcs are straight segments, costs linear along them, as in routing),
        and, on the origin's arcs, the piece from the origin to ``min(1, fraction + C / c)``. With an
        overlay the search is a turn-aware bounded Dijkstra on arcs on the CPU
        (:mod:`gpuroute.engine.isochrone_turns`) from the origin's arcs (their rest paid, then their
        allowed turns), and ``d(u)`` is replaced by each arc's own entry cost (standing at ``u`` having
        turned into the arc): an arc behind a forbidden turn is cut where the detour leaves it. These
        pieces are drawn in the equirectangular frame centred on the origin (metres,
        :data:`gpuroute.geo.EARTH_RADIUS_M`) on one lattice for all contours (square cells of
        ``config.SERVE_ISOCHRONE_CELL_M``, default half the buffer radius, coarser beyond
        ``config.SERVE_ISOCHRONE_MAX_CELLS`` cells): sampled every cell, the distance of every lattice
        point to the nearest sample's point is the field (on the GPU where ``config.SERVE_ISOCHRONE_DEVICE``
        allows), each contour's field is raised to the next larger one's (so contours nest), and
        marching squares trace where it equals ``config.SERVE_ISOCHRONE_BUFFER_M`` metres (the band's
        half-width; at least one cell). Holes smaller than ``config.SERVE_ISOCHRONE_MAX_HOLE_M2`` square
        metres (4 ha: city blocks) are filled, parts dropped by ``denoise`` (and parts lying in a part
        the next larger contour drops), rings simplified by ``generalize`` (Douglas-Peucker between
        anchors that keep the runs two contours share identical), positions rounded to 6 decimals; the
        result is checked (valid polygons, each contour inside the next larger one) and, where the check
        is not sure, drawn by GEOS as before (Douglas-Peucker ring by ring, GEOS's topology-keeping one
        where that is invalid, each contour clipped to the next larger one, snap-rounding). Every
        reachable road is inside its contour's polygon (up to ``generalize``); a point of the polygon is
        at most the band's half-width plus about a cell from a reachable road, or inside a filled hole.
        Needs shapely >= 2 (the ``serve`` extra).
        """
        ex = resolve_exclude(self, exclude, avoid_polygons, avoid_ways)
        try:
            shapely = require("shapely", "isochrones")
        except ImportError as e:
            raise EngineError("NotImplemented", str(e)) from None
        if metric not in ("duration", "distance"):
            raise EngineError("InvalidOptions", f"metric must be duration or distance, got {metric!r}")
        values = self._contours(contours, metric)
        if not isinstance(polygons, (bool, np.bool_)):
            raise EngineError("InvalidOptions", f"polygons must be true or false, got {polygons!r}")
        if coordinates not in ("lists", "arrays"):
            raise EngineError("InvalidOptions", f"coordinates must be lists or arrays, got {coordinates!r}")
        denoise = self._number(denoise, "denoise", 0.0, 1.0)
        generalize = self._number(config.SERVE_ISOCHRONE_GENERALIZE_M if generalize is None else generalize,
                                  "generalize", 0.0, math.inf)
        colors = self._colors(colors, len(values))
        met = self._isochrone_metric(metric)
        if ex is not None:
            met = ex.isochrone_metric(met)
        if coord is not None and len(coord) == 1 and not isinstance(coord[0], (int, float, np.number)):
            coord = coord[0]
        (lon, lat), = self._coords([coord])
        origin, = self._snap([(lon, lat)], _one_entry(radiuses, "radiuses"), _one_entry(bearings, "bearings"),
                             _one_entry(approaches, "approaches"), None if ex is None else ex.segments())
        from . import isochrone as iso

        ranked = sorted(range(len(values)), key=lambda k: -values[k])
        req = iso.Request(met, self._head, origin.arcs, [values[i] / met.scale for i in ranked], origin.lon,
                          origin.lat)
        gpu = self._isochrone_gpu(met)
        if gpu is not None:
            codes, lattice = gpu.codes(req)
        else:
            codes, lattice = iso.codes_cpu(self._isochrone_arrays(), met, req)
        geoms, _ = iso.geometries(shapely, codes, lattice, len(values), denoise, generalize, origin.lon, origin.lat,
                                  polygons, coordinates == "arrays")
        features = []
        for i, geom in zip(ranked, geoms, strict=True):
            props = {"contour": values[i], "metric": metric}
            if colors is not None:
                props["color"] = colors[i]
            features.append({"type": "Feature", "properties": props, "geometry": geom})
        return {"code": "Ok", "type": "FeatureCollection", "features": features,
                "waypoints": [waypoint(origin, self._fingerprint)]}

    def _contours(self, contours, metric):
        """Validated contour values (floats, in the caller's order)."""
        if isinstance(contours, (int, float, np.number)) and not isinstance(contours, bool):
            contours = [contours]
        if contours is None or isinstance(contours, (str, bytes)) or not hasattr(contours, "__len__") \
                or len(contours) == 0:
            raise EngineError("InvalidOptions", "contours must be a non-empty list of "
                              + ("seconds" if metric == "duration" else "metres"))
        mx = self.limits.get("max_isochrone_contours", 0)
        if mx and len(contours) > mx:
            raise EngineError("TooBig", f"Number of contours {len(contours)} is higher than current maximum ({mx})")
        unit = "s" if metric == "duration" else "m"
        top = self.limits.get("max_isochrone_duration_s" if metric == "duration" else "max_isochrone_distance_m", 0)
        out = []
        for k, v in enumerate(contours):
            try:
                x = float(v) if not isinstance(v, (bool, str, bytes)) else math.nan
            except (TypeError, ValueError):
                x = math.nan
            if not (x > 0 and math.isfinite(x)):
                raise EngineError("InvalidValue", f"contour {k} must be a number of {unit} > 0, got {v!r}")
            if top and x > top:
                raise EngineError("TooBig", f"contour {k} of {x:g} {unit} is higher than current maximum "
                                  f"({top:g} {unit})")
            out.append(x)
        return out

    @staticmethod
    def _number(v, what, lo, hi):
        try:
            x = float(v) if not isinstance(v, (bool, str, bytes)) else math.nan
        except (TypeError, ValueError):
            x = math.nan
        if not lo <= x <= hi:
            raise EngineError("InvalidOptions", f"{what} must be a number in [{lo:g}, {hi:g}], got {v!r}")
        return x

    @staticmethod
    def _colors(colors, k):
        if colors is None:
            return None
        if isinstance(colors, str):
            colors = colors.split(",")
        colors = _osrm_list(colors, k, "colors")
        out = []
        for col in colors:
            h = col[1:] if isinstance(col, str) and col.startswith("#") else col
            if not (isinstance(h, str) and len(h) == 6 and all(ch in "0123456789abcdefABCDEF" for ch in h)):
                raise EngineError("InvalidOptions", f"colors must be hex colours rrggbb, got {col!r}")
            out.append("#" + h.lower())
        return out

    def _isochrone_metric(self, metric):
        """The :class:`gpuroute.engine.isochrone.Metric` of ``"duration"`` or ``"distance"`` (cached per
        weight); InvalidOptions naming why when the engine cannot search it. With an overlay: the
        turn-aware metric of :class:`gpuroute.engine.isochrone_turns.OverlayMetrics` (the overlay's
        current one where it is of that quantity)."""
        from .isochrone import Metric

        if self._traffic is not None:
            om = getattr(self, "_iso_overlay", None)
            if om is None:
                from .isochrone_turns import OverlayMetrics

                om = self._iso_overlay = OverlayMetrics(self.graph, self._traffic)  # a race builds two, harmlessly
            return om.get(metric)
        g = self.graph
        quantity = "time" if metric == "duration" else "length"
        unit = g.units[self.weight]
        cache = getattr(self, "_iso_metrics", None)
        if cache is None:
            cache = self._iso_metrics = {}  # a race builds a metric twice, harmlessly
        if unit.quantity == quantity:
            ch, name = self.ch, self.weight
        elif metric == "distance" and self.distance_ch is not None:
            ch, name = self.distance_ch, self.distance_ch.weight
        else:
            ch = None
            names = [k for k in g.weights if g.units[k].quantity == quantity]
            if metric == "duration" and "travel_time" in names:
                names = ["travel_time"]
            if not names:
                raise EngineError("InvalidOptions", f"metric={metric} needs a {quantity} weight; graph "
                                  f"{g.name!r} has only {', '.join(sorted(g.weights))} and the engine has no "
                                  f"hierarchy for {'durations' if metric == 'duration' else 'distances'}")
            name = names[0]
        key = (name, ch is not None)
        if key not in cache:
            w = self._w if ch is self.ch and name == self.weight else g.weight(name).astype(np.float64)
            scale = self._w_scale if ch is self.ch and name == self.weight else float(g.units[name].scale or 1.0)
            if ch is not None:
                csr = (np.asarray(g.first_out, dtype=np.int64), np.asarray(g.head, dtype=np.int32),
                       np.asarray(g.weight(name), dtype=np.int64))
                cache[key] = Metric(name, w, scale, csr=csr, ch=ch)
            else:
                csr = g.to_scipy(name).astype(np.float64)

                def search(source, bound, csr=csr):
                    from scipy.sparse.csgraph import dijkstra

                    d = dijkstra(csr, indices=source, limit=bound)
                    nodes = np.flatnonzero(d <= bound)
                    return nodes, d[nodes]

                cache[key] = Metric(name, w, scale, search=search)
        return cache[key]

    def _isochrone_arrays(self):
        """``(first_out int64, head int64, tail int64, lon float64, lat float64)`` of the graph (cached)."""
        arr = getattr(self, "_iso_arrays", None)
        if arr is None:
            g = self.graph
            c = np.asarray(g.coords, dtype=np.float64)
            arr = self._iso_arrays = (np.asarray(g.first_out, dtype=np.int64), self._head, self._tail,
                                      np.ascontiguousarray(c[:, 0]), np.ascontiguousarray(c[:, 1]))
        return arr

    def _isochrone_gpu(self, met):
        """The GPU drawer of a metric (:class:`gpuroute.engine.isochrone.IsochroneGPU`, built once), or None
        where isochrones run on the CPU (``config.SERVE_ISOCHRONE_DEVICE``; no hierarchy; no GPU)."""
        if met.ch is None:
            return None
        dev = resolve_device(str(config.SERVE_ISOCHRONE_DEVICE))
        if dev != "gpu":
            return None
        cache = getattr(self, "_iso_gpu", None)
        if cache is None:
            cache = self._iso_gpu = {}
        from .isochrone import BUILD_LOCK, IsochroneGPU

        with BUILD_LOCK:
            if met.name not in cache:
                cache[met.name] = IsochroneGPU(self._isochrone_arrays(), met)
        return cache[met.name]

    def __repr__(self):
        g = self.graph
        return (f"Engine({g.name!r}, profile={self.profile!r}, weight={self.weight!r}, nodes={g.n_nodes:,}, "
                f"segments={self.segments.n_segments:,})")


__all__ = ["Engine", "EngineError", "OSM_ENDINGS"]


def _prune_options(arcs, node, cost, far_end, w):
    """Options of a phantom that another option of the same phantom dominates, dropped from the node table:
    option ``o`` (arc ``a``, reaching ``node[o]`` at ``cost[o]``) is dominated by ``o2`` when ``node[o2]``
    is the other end of ``a`` (``far_end[a]``: the tail for a source, the head for a target) and
    ``cost[o2] + w[a] <= cost[o]``: by the triangle inequality over ``a`` no route through ``o`` is shorter
    than through ``o2``. A coordinate snapped onto a junction is the common case: its arcs leaving the node
    (source) or entering it (target) are all dominated by the arcs ending (starting) there at cost 0, so
    its options need one node of the table instead of one per arc. Dominated options keep their arc for
    the same-arc case; their node becomes the dominating one and their cost +inf.

    Returns
    -------
    (node int64 (k, o), cost float64 (k, o)) new arrays.
    """
    node = node.copy()
    cost = cost.copy()
    ok = arcs >= 0
    if not ok.any():
        return node, cost
    a = np.maximum(arcs, 0)
    end = far_end[a]
    wa = w[a].astype(np.float64)
    # dom[i, o, o2]: o2 dominates o
    dom = (ok[:, :, None] & ok[:, None, :] & (wa[:, :, None] > 0) & (node[:, None, :] == end[:, :, None])
           & (cost[:, None, :] + wa[:, :, None] <= cost[:, :, None]))
    o = np.arange(arcs.shape[1])
    dom[:, o, o] = False
    hit = dom.any(axis=2)
    if hit.any():
        first = np.argmax(dom, axis=2)
        rows, cols = np.nonzero(hit)
        node[rows, cols] = node[rows, first[rows, cols]]
        cost[rows, cols] = math.inf
    return node, cost
