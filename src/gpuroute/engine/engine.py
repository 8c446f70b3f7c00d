"""``Engine``: one road graph, its contraction hierarchy and its segment index, answering OSRM v5
services (``route``, ``table``, ``nearest``) as plain dicts shaped like osrm-backend's JSON
(``docs/http.md``). The HTTP server serialises these dicts; Python callers use them directly.

Routes run between *phantom nodes* (a :class:`gpuroute.geo.segments.PhantomSet`): a coordinate is snapped onto
the nearest road segment, and a route starts or ends at that point. With source phantom on arc ``a`` at
fraction ``fa`` and target phantom on arc ``b`` at fraction ``fb`` (fractions along each arc), the cost is

    (1 - fa) * w(a) + d_CH(head(a), tail(b)) + fb * w(b)

minimised over the usable arcs of both phantoms (forward and reverse of a two-way street), and, when both
sit on the same arc with the target ahead (``fa <= fb``), ``(fb - fa) * w(a)`` (the route never leaves the
arc). Durations, distances and weights of partial arcs are fraction-weighted (linear along an arc, as
OSRM's). With ``continue_straight`` (the car default) a route leaves an intermediate waypoint on the arc
it arrived on (no U-turn at waypoints); the legs are chosen jointly by a dynamic program over the arcs of
each waypoint, so the total is exact under that constraint.

The class is a facade: each public method checks its arguments into a parameter record
(:mod:`gpuroute.engine.params`), snaps them once into a PhantomSet and hands them to one service module
(:mod:`gpuroute.engine.services`), which searches through :mod:`gpuroute.engine.algorithms`.
"""
from __future__ import annotations

import sys
import threading

import numpy as np

from ..extras import require
from ..geo import haversine_m
from ..geo.segments import NoSegment, SegmentIndex
from . import algorithms
from .exclude import excluder
from .exclude import resolve as resolve_exclude
from .osrm import EngineError
from .params import (
    APPROACHES,
    CustomizeParams,
    IsochroneParams,
    MatchParams,
    NearestParams,
    RouteParams,
    TableParams,
    TripParams,
    Waypoints,
    default_limits,
)
from .services import customize as _customize
from .services import isochrone as _isochrone
from .services import match as _match
from .services import nearest as _nearest
from .services import route as _route
from .services import table as _table
from .services import trip as _trip
from .timeslots import departure
from .traffic import TrafficRouter

#: File endings read as OpenStreetMap (they take the ``profile``).
OSM_ENDINGS = (".pbf", ".osm", ".osm.bz2", ".osm.gz", ".o5m")


#: :meth:`Engine.run`'s method per parameter record type.
_RUNNERS = {RouteParams: "_run_route", TableParams: "_run_table", TripParams: "_run_trip", NearestParams: "_run_nearest",
            IsochroneParams: "_run_isochrone", CustomizeParams: "_run_customize", MatchParams: "_run_match"}


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
    ch : ContractionHierarchy or None
        Built on ``graph`` for the routing weight. None: contracted from ``graph`` for ``weight`` the first
        time a search needs it (:attr:`ch`; a dataset directory built for a turn-aware metric stores none:
        its overlay answers every service, :mod:`gpuroute.engine.dataset`).
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
    weight : str, optional
        The routing weight; needed only with ``ch=None`` (default there:
        :func:`gpuroute.pipeline.customize.routing_weight`); with a hierarchy it must be the hierarchy's.

    Attributes
    ----------
    graph, segments, profile, distance_ch, overlay
    ch : ContractionHierarchy
        The hierarchy for the routing weight: the one given, else contracted on first access (once, under a
        lock; :meth:`gpuroute.ch.ContractionHierarchy.build` as the build's contract stage runs it, so it is
        the hierarchy a build would have stored).
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
        ``max_alternatives`` (``alternatives`` of one route), from ``config.SERVE_MAX_ALTERNATIVES``;
        ``max_isochrone_contours``, ``max_isochrone_duration_s`` and
        ``max_isochrone_distance_m`` (one isochrone), from ``config.SERVE_ISOCHRONE_MAX_*``.

    Raises
    ------
    ValueError
        A graph without lon/lat coordinates.
    """

    def __init__(self, graph, ch, *, profile="car", segments=None, distance_ch=None, overlay=None, weight=None):
        g = graph
        self.graph = g
        self._ch = ch
        self._ch_lock = threading.Lock()
        self.distance_ch = distance_ch
        self.overlay = overlay
        self._traffic = TrafficRouter(graph, overlay) if overlay is not None else None
        self.profile = str(profile)
        if ch is None:
            if weight is None:
                from ..pipeline.customize import routing_weight

                weight = routing_weight(g)
            self.weight = str(weight)
        else:
            self.weight = ch.weight if ch.weight is not None else g.default_weight
            if weight is not None and weight != self.weight:
                raise ValueError(f"a hierarchy contracted for {self.weight!r}, not {weight!r}")
        self.segments = segments if segments is not None else SegmentIndex.of(g)
        self.limits = default_limits()  # config.SERVE_*; the records apply them (gpuroute.engine.params)
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
        # per-metric-state caches of the table search (gpuroute.engine.algorithms) and exclude= (engine.exclude)
        self._table_pristine = {}
        self._along_cache = {}
        self._excluder = None
        self._time_slots = None  # depart_at= (gpuroute.engine.timeslots): set_time_profile

    # ------------------------------------------------------------------ lifetime
    def close(self):
        """Release every GPU object the engine made: the hierarchies' device copies and hub labels
        (:meth:`gpuroute.ch.ContractionHierarchy.release`), the overlay's GPU customizer
        (:meth:`gpuroute.crp.Overlay.release`), the isochrone drawers, then CuPy's cached blocks. The engine
        stays usable: a later GPU query or customization makes what it needs again. Idempotent; also
        ``with Engine.open(...) as eng:``."""
        for ch in (self._ch, self.distance_ch):  # a hierarchy not contracted yet has nothing to release
            if ch is not None:
                ch.release()
        if self.overlay is not None:
            self.overlay.release()
        self._iso_gpu = {}
        mg = sys.modules.get("gpuroute.engine.match_gpu")
        if mg is not None:  # /match's GPU transition searches: the networks' device copies
            mg.release()
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
    def open(cls, spec, *, profile=None, weight=None, time_profile=None):
        """Load a dataset directory, or load a graph, contract it for ``weight`` and index its segments; a
        graph read with a Lua profile (turn costs: OSRM's car.lua, bicycle.lua, foot.lua or the user's) is
        also partitioned and its overlay customized in memory (the build pipeline without an output,
        :func:`gpuroute.pipeline.build.run`), so that every service pays the profile's turn
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
            (:func:`gpuroute.pipeline.customize.routing_weight`: ``distance`` on ``ny``).
        time_profile : str or path-like, optional
            A time profile (CSV or Parquet) for ``depart_at=``: :meth:`set_time_profile`. Default: the one
            stored in a dataset directory (``DIR/time_profile.csv``, :func:`gpuroute.engine.timeslots.store_profile`,
            ``gpuroute timeprofile DIR FILE``), if any; one given here overrides it (the stored one is not read);
            False: none (not even the stored one).

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
            whose parts do not match its manifest (:class:`gpuroute.engine.dataset.DatasetError`); a bad time
            profile (:class:`gpuroute.engine.timeslots.TimeProfileError`, naming the file and line).
        """
        eng = cls._open(spec, profile=profile, weight=weight)
        if time_profile is None:  # a dataset directory's stored profile (gpuroute timeprofile DIR FILE), if any
            from .timeslots import stored_profile_of

            time_profile = stored_profile_of(spec)
        if time_profile is not None and time_profile is not False:
            eng.set_time_profile(time_profile)
        return eng

    @classmethod
    def _open(cls, spec, *, profile=None, weight=None):
        from ..graph.road_graph import RoadGraph
        from ..pipeline import build
        from .dataset import is_dataset, load_dataset

        if not isinstance(spec, RoadGraph) and is_dataset(spec):
            ds = load_dataset(spec)
            if weight is not None and weight != ds.weight:
                raise ValueError(f"{ds.directory}: a dataset contracted for {ds.weight!r}, not {weight!r}")
            return cls(ds.graph, ds.ch, profile=ds.profile, overlay=ds.overlay, weight=ds.weight)
        # extract, contract and (a Lua profile's turn costs: as a dataset) partition + customize, in memory
        b = build.run(build.BuildConfig(spec, profile=profile, weight=weight))
        g = b.graph
        label = g.meta.get("profile") if g.meta.get("format") == "osm" else profile
        return cls(g, b.ch, profile=str(label or "car"), overlay=b.overlay, weight=b.weight)

    def set_time_profile(self, profile):
        """Load the time profile that ``depart_at=`` reads (:mod:`gpuroute.engine.timeslots`: the format,
        the slot-at-departure model, how live traffic composes with it, the cache), replacing the one loaded;
        None unloads it. The slot metrics cached for the previous profile are dropped with it.

        Parameters
        ----------
        profile : str, path-like, TimeProfile or None
            A ``.csv`` file (``.parquet`` with pandas and pyarrow), or a profile read already.

        Returns
        -------
        dict or None
            The profile's :meth:`gpuroute.engine.timeslots.TimeSlots.info`.

        Raises
        ------
        FileNotFoundError
        gpuroute.engine.timeslots.TimeProfileError
            A bad file, or a row whose road class, way or arc is not in the graph (naming file and line);
            the profile loaded before stays.
        EngineError
            ``NotImplemented``: an engine without an overlay (a dataset directory is needed).
        """
        from .timeslots import load

        slots = load(self, profile)
        self._time_slots = slots  # one reference: a request reads the old or the new one
        return None if slots is None else slots.info()

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
                "traffic": None if store is None else store.info(), "exclude": excluder(self).info(),
                "time_profile": None if self._time_slots is None else self._time_slots.info()}

    @property
    def capabilities(self):
        """Which algorithm answers which service, on which device, and whether it follows traffic
        (:meth:`customize`): a list of ``{"service", "algorithm", "device", "traffic_aware", "turn_aware",
        "exclude", "note"}`` dicts (``exclude``: the service takes ``exclude=``: an overlay and a profile that
        declares combinations, :mod:`gpuroute.engine.exclude`).

        ``route``: ``"crp"`` (the customized overlay, turn restrictions honoured) when the engine has an
        overlay, else ``"ch"``. ``table`` and ``trip``'s matrix: with an overlay, its many-to-many
        (:func:`gpuroute.engine.algorithms.table_search`: turn costs, restrictions, the current metric), except while that
        metric is exactly the hierarchy's with every turn free (then the hierarchy's table, the same
        costs, on the GPU where one is usable); without an overlay the hierarchy's. ``nearest``: the
        segment index (every segment, as OSRM's). ``isochrone``: with an overlay, a turn-aware search on its current metric (CPU; the lattice on the GPU where one is usable), else the
        hierarchy (not turn-aware, the dataset's metric). ``customize``: the overlay's
        customization (cells re-customized bottom-up; on the GPU where one is usable,
        :mod:`gpuroute.crp.customize_gpu`), only with an overlay.
        """
        return algorithms.capabilities(self)

    @property
    def ch(self):
        """The contraction hierarchy for the routing weight (see the class's attributes): contracted here on
        first access when the engine was made without one."""
        ch = self._ch
        if ch is None:
            with self._ch_lock:
                ch = self._ch
                if ch is None:
                    from ..ch.api import ContractionHierarchy

                    ch = self._ch = ContractionHierarchy.build(self.graph, self.weight, progress=False)
        return ch

    @ch.setter
    def ch(self, ch):
        with self._ch_lock:
            self._ch = ch

    def _query(self):
        q = getattr(self._local, "query", None)
        if q is None:
            q = self._local.query = self.ch.query()
        return q

    # ------------------------------------------------------------------ validation and snapping
    def _snap(self, p, radiuses=None, bearings=None, approaches=None, segments=None):
        """The :class:`gpuroute.geo.segments.PhantomSet` of a checked record's coordinates
        (:mod:`gpuroute.engine.params`) on ``segments`` (default :attr:`segments`): its sentinel arrays go to
        :meth:`SegmentIndex.snap_checked` as they are (radius ``inf``, NaN bearing rows), nothing is checked
        again. EngineError ``NoSegment`` naming the first coordinate without a segment.

        ``p`` may also be a list of (lon, lat) with ``radiuses``, ``bearings`` and ``approaches`` as the
        services take them (for callers outside a request: tests, tools): they are checked first
        (:meth:`gpuroute.engine.params.Waypoints.from_kwargs`)."""
        if not isinstance(p, Waypoints):
            p = Waypoints.from_kwargs(p, radiuses=radiuses, bearings=bearings, approaches=approaches)
        elif radiuses is not None or bearings is not None or approaches is not None:
            raise TypeError("a parameter record carries its own radiuses, bearings and approaches")
        curb = None if p.approaches is None else p.approaches == APPROACHES.index("curb")
        try:
            return (segments or self.segments).snap_checked(p.coords[:, 0], p.coords[:, 1], radius=p.radiuses,
                                                            bearing=p.bearings, curb=curb)
        except NoSegment as e:
            raise EngineError("NoSegment", f"Could not find a matching segment for coordinate {e.index}"
                              + (f" ({str(e).split(': ', 1)[1]})" if ": " in str(e) else "")) from None

    def _snap_index(self, ex=None, component=None):
        """The segment index a request snaps on: ``ex``'s (an exclusion) or None (:attr:`segments`), without
        the arcs live traffic closed (:meth:`gpuroute.engine.traffic.TrafficRouter.open_segments`: OSRM
        snaps on no closed direction)."""
        tr = self._traffic
        comp = self.segments.component if component is None else component
        idx = None if tr is None else tr.open_segments(comp, None if ex is None else ex.excluded,
                                                        None if ex is None else ex.key)
        if idx is not None:
            return idx
        return None if ex is None else ex.segments(component)

    def run(self, p):
        """Answer a checked parameter record (:mod:`gpuroute.engine.params`: what :meth:`route`,
        :meth:`table`, :meth:`trip`, :meth:`nearest`, :meth:`isochrone` and :meth:`customize` build from
        their arguments, and the HTTP server from a URL), its arguments not checked again.

        Parameters
        ----------
        p : RouteParams, TableParams, TripParams, NearestParams, IsochroneParams or CustomizeParams
            Made by its ``from_kwargs`` (with this engine's :attr:`limits`, or the server's).

        Returns
        -------
        dict
            The service's answer (see its method).

        Raises
        ------
        TypeError
            ``p`` is no parameter record.
        EngineError
            ``InvalidValue`` for ``snapping="any"`` or ``fallback_coordinate="snapped"`` (not supported), and
            the service's own errors (see its method).
        """
        name = _RUNNERS.get(type(p))  # one dict per process, not per request
        fn = None if name is None else getattr(self, name)
        if fn is None:
            raise TypeError(f"Engine.run takes a parameter record of gpuroute.engine.params, not {type(p).__name__}")
        if getattr(p, "snapping", "default") != "default":
            raise EngineError("InvalidValue", "snapping=any is not supported by this engine")
        if getattr(p, "fallback_coordinate", "input") != "input":
            raise EngineError("InvalidValue", "fallback_coordinate=snapped is not supported by this engine")
        if isinstance(p, CustomizeParams):
            return fn(p)
        return fn(p, resolve_exclude(self, p.exclude, p.avoid_polygons, p.avoid_ways))  # the dataset's classes, ways

    # ------------------------------------------------------------------ route
    def route(self, coords, *, alternatives=False, steps=False, annotations=False, geometries="polyline",
              overview="simplified", radiuses=None, bearings=None, approaches=None, continue_straight=None,
              exclude=None, avoid_polygons=None, avoid_ways=None, depart_at=None, leg_parts="objects"):
        """OSRM ``/route/v1``: the fastest route through the coordinates in order.

        Parameters
        ----------
        coords : sequence of (lon, lat), length 2 .. ``limits["max_locations_route"]``
        alternatives : bool or int
            0 .. ``limits["max_alternatives"]`` (``config.SERVE_MAX_ALTERNATIVES``, the HTTP server's limit
            too); ``True`` is 1 (OSRM's). For two coordinates, up to that many via-node alternatives follow
            the shortest route in ``routes`` (ascending weight; OSRM's "up to": bounded stretch, limited
            sharing, local optimality, ``config.SERVE_ALTERNATIVES_*``; :mod:`gpuroute.crp.alternatives`,
            :mod:`gpuroute.ch.alternatives`), on the same metric (traffic, ``exclude``, avoids) as it; with
            more coordinates only the shortest route, as OSRM's.
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
        depart_at : str or datetime.datetime, optional
            The departure time (ISO 8601, with or without an offset; without one: local time in the time
            profile's zone): the route runs on the metric of the time profile's slot containing it, for the
            whole route (slot-at-departure, :mod:`gpuroute.engine.timeslots`; :meth:`set_time_profile`).
        leg_parts : {"objects", "json"}
            Each leg's ``steps`` and ``annotation`` as Python lists and dicts, or (``"json"``, orjson >= 3.10) as
            ``orjson.Fragment`` of their JSON text, the bytes orjson writes for the objects (a JSON writer's
            answer without the objects: :func:`gpuroute.engine.services.route.leg_parts`).

        Returns
        -------
        dict
            ``{"code": "Ok", "routes": [route, alternative, ...], "waypoints": [...]}``: each route with
            ``geometry`` (unless ``overview="false"``), ``legs``, ``weight_name``, ``weight``, ``duration``
            (s), ``distance`` (m); each leg ``steps``, ``summary`` (the two streets with the longest distance on the leg,
            in route order), ``weight``, ``duration``, ``distance`` and ``annotation`` when asked.

        Raises
        ------
        EngineError
            ``InvalidOptions`` (fewer than two coordinates, an unknown option value, option lists of
            the wrong length), ``InvalidValue`` (a bad coordinate), ``TooBig`` (too many coordinates, more
            alternatives than ``limits["max_alternatives"]``),
            ``NoSegment`` (a coordinate with no segment to snap to), ``NoRoute`` (no route through the
            waypoints); for ``exclude``: ``InvalidValue`` (a combination the profile does not declare),
            ``NotImplemented`` (an engine without an overlay); for the avoids: ``InvalidValue`` naming
            ``avoid_polygons`` or ``avoid_ways`` (not a valid (Multi)Polygon, over a limit, an unknown way).
        """
        ex = resolve_exclude(self, exclude, avoid_polygons, avoid_ways)  # first, as osrm-routed's CheckAlgorithms
        return self._run_route(RouteParams.from_kwargs(
            coords, limits=self.limits, alternatives=alternatives, steps=steps, annotations=annotations,
            geometries=geometries, overview=overview, radiuses=radiuses, bearings=bearings, approaches=approaches,
            continue_straight=continue_straight, exclude=exclude, avoid_polygons=avoid_polygons,
            avoid_ways=avoid_ways, depart_at=depart_at, leg_parts=leg_parts), ex)

    def _run_route(self, p, ex):
        """:meth:`route` of a checked :class:`~gpuroute.engine.params.RouteParams` and its resolved exclusion
        (:meth:`run`)."""
        ex = departure(self, p, ex)  # depart_at: the slot's metric (InvalidValue: no profile, off its calendar)
        continue_straight = p.continue_straight
        if continue_straight is None:  # the profile's default (OSRM: continue_straight_at_waypoint), else car's
            continue_straight = bool(self.graph.meta.get("continue_straight_at_waypoint", True))
        phantoms = self._snap(p, segments=self._snap_index(ex))
        return _route.route(self, phantoms, steps=p.steps, annotations=p.annotations, geometries=p.geometries,
                            overview=p.overview, continue_straight=bool(continue_straight), exclusion=ex,
                            alternatives=p.alternatives, leg_parts=p.leg_parts)

    # ------------------------------------------------------------------ table
    def table(self, coords, *, sources=None, destinations=None, annotations=("duration",), radiuses=None,
              bearings=None, approaches=None, fallback_speed=None, scale_factor=None, matrices="lists",
              exclude=None, avoid_polygons=None, avoid_ways=None, depart_at=None):
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
        depart_at : str or datetime.datetime, optional
            As :meth:`route`'s: every cell on the departure slot's metric.

        Returns
        -------
        dict
            ``{"code": "Ok", "durations": [[s]], "distances": [[m]], "sources": [...], "destinations": [...]}``
            rounded to 0.1, with ``None`` (JSON ``null``) where no route exists; the matrices only as asked.

        Raises
        ------
        EngineError
            ``InvalidOptions`` (unknown annotation, option lists of the wrong length, a source or destination
            index outside the coordinates, as osrm-routed), ``InvalidValue`` (a bad coordinate, fallback
            speed or scale factor), ``TooBig``
            (more than ``limits["max_locations_table"]`` cells), ``NoSegment``; ``exclude`` as :meth:`route`.

        Notes
        -----
        Costs come from one many-to-many query on the hierarchy between the nodes at the ends of the
        phantoms' arcs, plus the partial arcs, minimised over each phantom's (up to two) arcs; the
        same-arc case is exact. A matrix of a quantity other than the routing weight (distances; durations
        when routing by distance) unpacks the chosen path of each cell (one CH query per distinct node
        pair).
        """
        ex = resolve_exclude(self, exclude, avoid_polygons, avoid_ways)  # first, as osrm-routed's CheckAlgorithms
        return self._run_table(TableParams.from_kwargs(
            coords, limits=self.limits, sources=sources, destinations=destinations, annotations=annotations,
            radiuses=radiuses, bearings=bearings, approaches=approaches, fallback_speed=fallback_speed,
            scale_factor=scale_factor, matrices=matrices, exclude=exclude, avoid_polygons=avoid_polygons,
            avoid_ways=avoid_ways, depart_at=depart_at), ex)

    def _run_table(self, p, ex):
        """:meth:`table` of a checked :class:`~gpuroute.engine.params.TableParams` and its resolved exclusion
        (:meth:`run`)."""
        ex = departure(self, p, ex)
        if "duration" in p.annotations and self._dur is None:  # the dataset's quantities
            raise EngineError("InvalidOptions", f"graph {self.graph.name!r} has no travel times (the routing weight "
                              f"{self.weight!r} is a {self.graph.units[self.weight].quantity}): ask "
                              "annotations=distance, or serve a graph with travel times")
        phantoms = self._snap(p, segments=self._snap_index(ex))
        return _table.table(self, phantoms, sources=p.source_indices(), destinations=p.destination_indices(),
                            annotations=p.annotations, fallback_speed=p.fallback_speed, scale_factor=p.scale_factor,
                            matrices=p.matrices, exclusion=ex)

    # ------------------------------------------------------------------ trip
    def trip(self, coords, *, roundtrip=True, source="any", destination="any", steps=False, annotations=False,
             geometries="polyline", overview="simplified", radiuses=None, bearings=None, approaches=None,
             time_limit=None, exclude=None, avoid_polygons=None, avoid_ways=None, depart_at=None):
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
            ``SERVE_TRIP_TIME_MAX_S``], the search stopping sooner once ``SERVE_TRIP_STALL_KICKS_PER_STOP`` x n
            kicks in a row have not improved the tour); up to ``TOUR_EXACT_MAX_N`` the order is exact (Held–Karp, about a
            millisecond) and no search runs, the limit is only checked.
        depart_at : str or datetime.datetime, optional
            As :meth:`route`'s: the matrix and every leg on the departure slot's metric.

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
        (OSRM: brute force up to 10 coordinates, farthest insertion above). The trip is then routed as
        :meth:`route` with ``continue_straight=False`` through the waypoints in that order, so every leg is
        the table's cell and the trip's weight is the tour's cost. Each coordinate is snapped once (the
        legs reuse its phantoms) and the matrix and the legs search one metric snapshot
        (:func:`gpuroute.engine.algorithms.metric_snapshot`: the overlay's metric when the request starts,
        or the exclusion's), so a :meth:`customize` landing meanwhile changes neither.
        """
        ex = resolve_exclude(self, exclude, avoid_polygons, avoid_ways)  # first, as osrm-routed's CheckAlgorithms
        return self._run_trip(TripParams.from_kwargs(
            coords, limits=self.limits, roundtrip=roundtrip, source=source, destination=destination, steps=steps,
            annotations=annotations, geometries=geometries, overview=overview, radiuses=radiuses, bearings=bearings,
            approaches=approaches, time_limit=time_limit, exclude=exclude, avoid_polygons=avoid_polygons,
            avoid_ways=avoid_ways, depart_at=depart_at), ex)

    def _run_trip(self, p, ex):
        """:meth:`trip` of a checked :class:`~gpuroute.engine.params.TripParams` and its resolved exclusion
        (:meth:`run`)."""
        ex = departure(self, p, ex)
        if not p.roundtrip and not (p.source == "first" and p.destination == "last"):
            raise EngineError("NotImplemented", "roundtrip=false needs source=first and destination=last")
        phantoms = self._snap(p, segments=self._snap_index(ex))  # once: the legs take them
        return _trip.trip(self, phantoms, p, exclusion=ex)

    # ------------------------------------------------------------------ match
    def match(self, coords, *, timestamps=None, radiuses=None, bearings=None, gaps="split", tidy=False, steps=False,
              annotations=False, geometries="polyline", overview="simplified", exclude=None, avoid_polygons=None,
              avoid_ways=None, device="auto"):
        """OSRM ``/match/v1``: the roads a GPS trace most likely followed (map matching by a hidden Markov
        model, Newson and Krumm 2009, as osrm-backend: :mod:`gpuroute.engine.services.match`).

        Parameters
        ----------
        coords : sequence of (lon, lat), length 2 .. ``limits["max_locations_map_matching"]``
            The trace, in order.
        timestamps : sequence of int, optional
            Seconds (UNIX time), one per coordinate, non-decreasing: they bound the distance between two
            points (180 km/h, or the profile's ``max_speed_for_map_matching``) and, with ``gaps="split"``,
            split the trace where two points are more than 10 median sampling steps apart.
        radiuses : sequence of float, optional
            Each point's GPS standard deviation in metres (> 0; default ``config.SERVE_MATCH_SIGMA_M``, 5 m):
            its candidates are the road segments within 3.5 of them.
        bearings : sequence of (value, range) or None, optional
            As :meth:`route`'s: candidates keep the directions within range.
        gaps : {"split", "ignore"}
        tidy : bool
            Drop points until 15 m and 5 s have run up since the last one kept (OSRM's tidy); dropped points
            are ``None`` in ``tracepoints``.
        steps, annotations, geometries, overview
            As :meth:`route`'s, for each matching's route.
        exclude, avoid_polygons, avoid_ways : optional
            As :meth:`route`'s: candidates and routes avoid those arcs.
        device : {"auto", "cpu", "gpu"}
            Of the transition many-to-many searches (:meth:`gpuroute.engine.algorithms.CRP.many_to_many`).

        Returns
        -------
        dict
            ``{"code": "Ok", "matchings": [...], "tracepoints": [...]}``: each matching a route object as
            :meth:`route`'s (one leg per pair of consecutive matched points) plus ``confidence`` (0..1);
            ``tracepoints`` one per input coordinate, a waypoint object with ``matchings_index``,
            ``waypoint_index`` (its place among the matching's waypoints) and ``alternatives_count``, or
            ``None`` for a point not matched (an outlier, or one tidy dropped).

        Raises
        ------
        EngineError
            ``InvalidOptions`` (fewer than two coordinates, lists of another length, ``gaps`` not
            split/ignore, an unknown option value), ``InvalidValue`` (a bad coordinate, timestamps that are
            not non-decreasing integers >= 0, a radius not > 0), ``TooBig`` (too many coordinates),
            ``NoSegment`` (no point has a road within 3.5 sigma), ``NoMatch`` (no two consecutive points could
            be matched); ``exclude`` and the avoids as :meth:`route`'s.
        """
        ex = resolve_exclude(self, exclude, avoid_polygons, avoid_ways)  # first, as osrm-routed's CheckAlgorithms
        return self._run_match(MatchParams.from_kwargs(
            coords, limits=self.limits, timestamps=timestamps, radiuses=radiuses, bearings=bearings, gaps=gaps,
            tidy=tidy, steps=steps, annotations=annotations, geometries=geometries, overview=overview,
            exclude=exclude, avoid_polygons=avoid_polygons, avoid_ways=avoid_ways), ex, device=device)

    def _run_match(self, p, ex, device="auto"):
        """:meth:`match` of a checked :class:`~gpuroute.engine.params.MatchParams` and its resolved exclusion
        (:meth:`run`)."""
        return _match.match(self, p, _match.candidate_index(self, ex), exclusion=ex, device=device)

    def match_many(self, traces, *, device="auto", **options):
        """:meth:`match` of many traces in one call: the transition searches of all their steps in one parallel
        kernel (each worker on its own scratch), the legs of all their matchings in one pass on threads
        (:mod:`gpuroute.engine.services.match`), the same answers as one :meth:`match` after the other.

        Parameters
        ----------
        traces : sequence of dict
            Each ``{"coords": [...], "timestamps": [...], "radiuses": [...], "bearings": [...]}`` (only
            ``coords`` required).
        device : {"auto", "cpu", "gpu"}
        **options
            The other keywords of :meth:`match` (``gaps``, ``tidy``, ``steps``, ``annotations``,
            ``geometries``, ``overview``, ``exclude``, ``avoid_polygons``, ``avoid_ways``), for every trace.

        Returns
        -------
        list of dict
            One answer per trace, in order; a trace that cannot be matched gets ``{"code": "NoMatch" or
            "NoSegment", "message": ...}`` in its place.

        Raises
        ------
        EngineError
            A trace's bad input (as :meth:`match`; the message names the trace's index); nothing is matched
            then.
        """
        ex = resolve_exclude(self, options.get("exclude"), options.get("avoid_polygons"), options.get("avoid_ways"))

        def parse(i, tr):
            if not isinstance(tr, dict) or "coords" not in tr or set(tr) - {"coords", "timestamps", "radiuses",
                                                                             "bearings"}:
                raise EngineError("InvalidOptions", f"trace {i} must be a dict with coords (and optionally "
                                  "timestamps, radiuses, bearings)")
            try:
                return MatchParams.from_kwargs(tr["coords"], limits=self.limits, timestamps=tr.get("timestamps"),
                                               radiuses=tr.get("radiuses"), bearings=tr.get("bearings"), **options)
            except EngineError as e:
                raise EngineError(e.code, f"trace {i}: {e.message}") from None

        # checked in order by the service, batch by batch beside the solving of the first batches
        traces = traces if isinstance(traces, (list, tuple)) else list(traces)
        return _match.match_many(self, traces, _match.candidate_index(self, ex), exclusion=ex, device=device,
                                 parse=parse)

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
            A speed (or rate) of 0, or ``"cost": "closed"``, closes the arc (cost
            :data:`gpuroute.crp.CLOSED`: no route, table, trip or isochrone enters it, no waypoint snaps to
            it); a later positive cost or speed reopens it. An arc listed twice takes its last cost.
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
        return self._run_customize(CustomizeParams.from_kwargs(updates, metric=metric))

    def _run_customize(self, p, ex=None):
        """:meth:`customize` of a checked :class:`~gpuroute.engine.params.CustomizeParams` (:meth:`run`)."""
        return _customize.customize(self, p.updates, metric=p.metric)

    def warm_customize(self):
        """Run the kernels of :meth:`customize` once without changing the metric (the server's warm-up:
        :meth:`gpuroute.engine.traffic.TrafficRouter.warm`); False without an overlay (nothing to warm)."""
        return _customize.warm(self)

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
        ex = resolve_exclude(self, exclude)  # first, as osrm-routed's CheckAlgorithms
        return self._run_nearest(NearestParams.from_kwargs(coord, limits=self.limits, number=number, radiuses=radiuses,
                                                           bearings=bearings, approaches=approaches, exclude=exclude),
                                 ex)

    def _run_nearest(self, p, ex):
        """:meth:`nearest` of a checked :class:`~gpuroute.engine.params.NearestParams` and its resolved
        exclusion (:meth:`run`)."""
        # OSRM's nearest: every segment, small components included (routes snap to the largest one)
        index = _nearest.segment_index(self, ex)
        found = self._snap(p, segments=index)  # maps NoSegment
        (r,), (b,), (a,) = (v if v is not None else [None] for v in p.snap_options())
        return _nearest.nearest(self, index, found, number=p.number, radius=r, bearing=b, approach=a)

    # ------------------------------------------------------------------ isochrone
    def isochrone(self, coord, contours, *, metric="duration", polygons=True, denoise=1.0, generalize=None,
                  colors=None, radiuses=None, bearings=None, approaches=None, coordinates="lists", exclude=None,
                  avoid_polygons=None, avoid_ways=None, depart_at=None):
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
        depart_at : str or datetime.datetime, optional
            As :meth:`route`'s: ``metric="duration"`` on the departure slot's travel times (a distance does
            not depend on the time of day).
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
        Construction (:mod:`gpuroute.engine.services.isochrone`). One bounded search from the head of each usable
        arc of the snapped origin, bounded by the largest contour minus the partial arc, gives the cost
        ``d(v)`` of every node reachable within it (CPU: a bounded Dijkstra, or, past
        ``config.SERVE_ISOCHRONE_DIJKSTRA_FRACTION`` of the nodes, the hierarchy's bounded PHAST; GPU:
        a PHAST pass whose rows stay on the device). For a contour ``C`` the reachable network is then:
        every arc ``u -> v`` with ``d(u) <= C``, cut at the fraction ``min(1, (C - d(u)) / c(u -> v))``
        of its length from ``u`` (arcs are straight segments, costs linear along them, as in routing),
        and, on the origin's arcs, the piece from the origin to ``min(1, fraction + C / c)``. With an
        overlay the search is a turn-aware bounded Dijkstra on arcs on the CPU
        (:func:`gpuroute.engine.services.isochrone.search.search_turns`; the lattice then drawn on the GPU where
        one is usable) from the origin's arcs (their rest paid, then their
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
        ex = resolve_exclude(self, exclude, avoid_polygons, avoid_ways)  # first, as osrm-routed's CheckAlgorithms
        return self._run_isochrone(IsochroneParams.from_kwargs(
            coord, contours, limits=self.limits, metric=metric, polygons=polygons, denoise=denoise,
            generalize=generalize, colors=colors, radiuses=radiuses, bearings=bearings, approaches=approaches,
            coordinates=coordinates, exclude=exclude, avoid_polygons=avoid_polygons, avoid_ways=avoid_ways,
            depart_at=depart_at), ex)

    def _run_isochrone(self, p, ex):
        """:meth:`isochrone` of a checked :class:`~gpuroute.engine.params.IsochroneParams` and its resolved
        exclusion (:meth:`run`)."""
        ex = departure(self, p, ex)
        try:
            shapely = require("shapely", "isochrones")
        except ImportError as e:
            raise EngineError("NotImplemented", str(e)) from None
        values, metric, polygons, coordinates = p.contours.tolist(), p.metric, p.polygons, p.coordinates
        denoise, generalize, colors = p.denoise, p.generalize, p.colors
        met = _isochrone.metric_of(self, metric)  # InvalidOptions where the dataset has no such weight
        if ex is not None:
            met = ex.isochrone_metric(met)
        origin = self._snap(p, segments=self._snap_index(ex))
        return _isochrone.isochrone(self, origin, met, values, metric=metric, polygons=polygons, denoise=denoise,
                                    generalize=generalize, colors=colors, coordinates=coordinates, shapely=shapely)

    def __repr__(self):
        g = self.graph
        return (f"Engine({g.name!r}, profile={self.profile!r}, weight={self.weight!r}, nodes={g.n_nodes:,}, "
                f"segments={self.segments.n_segments:,})")


__all__ = ["Engine", "EngineError", "OSM_ENDINGS"]

