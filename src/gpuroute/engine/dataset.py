"""Dataset directories: every stage of the routing engine built once, into one directory that
:meth:`gpuroute.engine.Engine.open` loads without building anything (``gpuroute build`` writes it,
``gpuroute serve DIR`` serves it).

Layout::

    DIR/
        manifest.json   format "gpuroute-dataset": version, the source and profile it was built from,
                        the metric, and per part its directory, what it is and its fingerprints
        graph/          the imported graph (:func:`gpuroute.save_graph`: weights, arc attributes, street
                        names, OSM node ids, turn restrictions)
        ch/             the contraction hierarchy for the routing weight (:meth:`ContractionHierarchy.save`)
        partition/      the nested partition (:meth:`gpuroute.Partition.save`)
        overlay/        the multi-level overlay customized for the routing weight (:meth:`gpuroute.Overlay.save`)
        traffic.npz     the current traffic, when the engine serving the directory was customized since it
                        was built (:class:`TrafficStore`; absent: the built metric)

The routing weight is the graph's ``travel_time`` when it has one (an OSM extract, ``ny-time``), else
its first weight (``distance`` of a DIMACS ``-d`` graph such as ``ny``; see :func:`routing_weight`), or
the one asked for. The hierarchy and the overlay share it with no turn penalties (for ``travel_time``
the overlay's metric ``"time"``, not ``"time-uturn"``; for another weight a metric of that weight's
costs, named after it), so that before any traffic update a route over the overlay and one over the
hierarchy cost the same wherever no turn restriction binds. The whole directory is written into a
temporary sibling and renamed into place: an interrupted build leaves nothing half-written, and a
directory that is not a dataset is never replaced. A source with no road to route on (an OSM extract
without a way the profile may use) is refused before anything is written.

Saved traffic. An engine opened from a dataset directory (:func:`load_dataset`, ``Engine.open(DIR)``,
``gpuroute serve DIR``) saves its overlay's metric after every successful customization
(``POST /customize``: traffic updates or a named metric) to ``DIR/traffic.npz``, replacing the previous
one atomically (:func:`gpuroute.io.atomic.atomic_file`: temporary sibling, ``fsync``, rename); the next
:func:`load_dataset` customizes the overlay with it again, so a restart keeps the traffic. The file is
an uncompressed NumPy ``.npz`` archive (``allow_pickle=False``):

* ``header``: uint8, UTF-8 JSON: ``format`` ``"gpuroute-traffic"``, ``version`` 2 (version 1 files,
  without ``arc_duration``, are read too), ``dataset`` (the
  build it belongs to: ``graph_fingerprint``, ``partition_fingerprint``, ``turns_fingerprint``,
  ``n_arcs``, ``n_turns``), ``metric`` (``name``, ``units``), ``generation`` (customizations saved since
  the build, restarts included), ``updated`` (UTC, ISO 8601), ``arrays`` (per array: ``dtype``,
  ``shape``, ``sha256`` of its bytes), ``gpuroute_version``;
* ``arc_cost``: int32 (m,), the metric's arc costs in its unit (``units``);
* ``turn_penalty``: int32 (4,), its penalty per turn type (straight, left, right, U-turn);
* ``turn_cost``: int32 (T,), its per-turn costs (only for a metric that has them: a Lua profile's);
* ``arc_duration``: int32 (m,), every arc's travel time in deciseconds, only where speed updates on a
  metric that is not a time (a Lua profile's weight, e.g. ``routability``) made them differ from the
  graph's ``travel_time`` (the overlay state's ``arc_duration``; routes report these durations).

Those are the whole :class:`gpuroute.crp.Metric` (and its travel times): the turn costs are decoded from them and the cliques
customized from those, so the restored overlay is the saved one exactly. A file that cannot be read,
is truncated, was edited (a hash differs), holds an invalid metric or was saved for another build (graph,
partition or turns differ) is refused: a warning naming the file and the reason is logged (logger
``gpuroute.engine.dataset``), the dataset loads with its built metric, and the next customization
replaces the file. Delete the file (``gpuroute customize DIR --reset``, :func:`drop_traffic`) to start
from the built metric again; ``gpuroute build`` replacing the directory drops it too. A directory the
process cannot write to is served with in-memory traffic only (as before this file existed).

Public API
----------
build_dataset(source, directory, ...)   run every stage, write the directory, return a summary
routing_weight(graph, weight=None)      the weight a dataset or an engine routes by
load_dataset(directory)                 the parts of a dataset directory, every fingerprint checked
is_dataset(path)                        whether ``path`` is a dataset directory
read_manifest(directory)                its manifest, format and version checked
TrafficStore                            the saved traffic of one loaded dataset directory
traffic_store(overlay)                  the TrafficStore of an overlay loaded by load_dataset (or None)
drop_traffic(directory)                 delete the saved traffic (the next load uses the built metric)
"""
from __future__ import annotations

import datetime
import hashlib
import json
import logging
import os
import time
import weakref
import zipfile
from dataclasses import dataclass, field

import numpy as np

__all__ = ["FORMAT", "FORMAT_VERSION", "MANIFEST", "METRIC", "WEIGHT", "DatasetError", "Dataset", "build_dataset",
           "load_dataset", "is_dataset", "read_manifest", "open_source", "routing_weight", "metric_name",
           "check_routable", "profile_metric", "TRAFFIC", "TRAFFIC_FORMAT", "TRAFFIC_VERSION", "TrafficError",
           "TrafficSaveError", "TrafficStore", "traffic_store", "drop_traffic"]

log = logging.getLogger(__name__)

FORMAT = "gpuroute-dataset"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
#: The routing weight when the graph has it (else the graph's first weight, see :func:`routing_weight`).
WEIGHT = "travel_time"
#: The overlay metric customized at build time for :data:`WEIGHT` (the same travel times, no turn
#: penalties); another routing weight gets a metric named after it (:func:`metric_name`).
METRIC = "time"
#: Cell sizes of the partition when none are given (finest level first).
DEFAULT_CELL_SIZES = (256, 4096, 65536)
#: File endings read as OpenStreetMap (they take the profile).
OSM_ENDINGS = (".pbf", ".osm", ".osm.bz2", ".osm.gz", ".o5m")
#: The saved traffic in a dataset directory (see the module docstring and :class:`TrafficStore`).
TRAFFIC = "traffic.npz"
TRAFFIC_FORMAT = "gpuroute-traffic"
TRAFFIC_VERSION = 2
#: Traffic file versions this gpuroute reads (1: before ``arc_duration``; its durations are the graph's).
TRAFFIC_READS = (1, 2)
#: The arrays of a traffic file besides its ``header`` (``turn_cost`` only for a metric that has them,
#: ``arc_duration`` only where speed updates changed travel times apart from the costs; version 2).
TRAFFIC_ARRAYS = ("arc_cost", "turn_penalty", "turn_cost", "arc_duration")

PARTS = {
    "graph": "the imported road graph (gpuroute.save_graph): weights, arc attributes, street names, OSM node "
             "ids, turn restrictions",
    "ch": "contraction hierarchy for the weight {weight} (route fallback, table, isochrone)",
    "partition": "nested multi-level partition (Customizable Route Planning, metric-independent)",
    "overlay": "multi-level overlay customized for the metric {metric!r} ({weight}, no turn penalties): "
               "turn-aware routes, live traffic",
}


class DatasetError(ValueError):
    """Not a dataset directory, another format version, or a part that does not match the manifest."""


@dataclass
class Dataset:
    """The loaded parts of a dataset directory.

    Attributes
    ----------
    directory : str
        Absolute path.
    graph : RoadGraph
    ch : ContractionHierarchy
        For the routing weight (``ch.weight``, the manifest's ``weight``).
    overlay : Overlay
        Customized (for the manifest's ``metric`` as built, or what was saved since).
    manifest : dict
    profile : str
    seconds : dict
        Load time of each part (``traffic``: reading and applying the saved traffic).
    traffic : TrafficStore or None
        The saved traffic: whether it was restored, and where the next customization is saved.
    """

    directory: str
    graph: object
    ch: object
    overlay: object
    manifest: dict
    profile: str = "car-basic"
    seconds: dict = field(default_factory=dict)
    traffic: object = None


def _now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _sha_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise DatasetError(f"{path}: unreadable ({' '.join(str(e).split())})") from None


def is_dataset(path):
    """True when ``path`` is a directory with a ``gpuroute-dataset`` manifest (any version)."""
    try:
        p = os.fspath(path)
    except TypeError:
        return False
    if not os.path.isdir(p):
        return False
    try:
        m = _read_json(os.path.join(p, MANIFEST))
    except DatasetError:
        return False
    return isinstance(m, dict) and m.get("format") == FORMAT


def read_manifest(directory):
    """The manifest of a dataset directory.

    Raises
    ------
    FileNotFoundError
        No such directory.
    DatasetError
        No manifest, another format, another version.
    """
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"{directory}: no such directory (make it with gpuroute build GRAPH -o {directory})")
    path = os.path.join(directory, MANIFEST)
    m = _read_json(path)
    if not isinstance(m, dict) or m.get("format") != FORMAT:
        raise DatasetError(f"{directory}: not a dataset directory (no {FORMAT!r} {MANIFEST}; make one with gpuroute "
                           f"build GRAPH -o {directory})")
    if m.get("version") != FORMAT_VERSION:
        raise DatasetError(f"{path}: format version {m.get('version')!r}, this gpuroute reads {FORMAT_VERSION}; run "
                           "gpuroute build again")
    return m


def open_source(spec, profile=None):
    """The graph a build starts from: a RoadGraph as it is, a shipped dataset name, an OSM extract read
    with ``profile``, or any other graph file or saved graph (:func:`gpuroute.open_graph`).

    Parameters
    ----------
    spec : str, path-like or RoadGraph
    profile : str, path-like or None
        For an OSM extract: ``"car"`` (default; OSRM's car.lua), ``"bicycle"``, ``"foot"``, a ``.lua``
        path, or ``"car-basic"`` (see :func:`gpuroute.io.load_osm`). For a shipped OSM dataset name
        (``"monaco"``): None gives the shipped graph (``car-basic``), a profile reads its OSM file with it.

    Raises
    ------
    FileNotFoundError
        Neither a file, a directory nor a dataset name.
    ValueError
        A profile for a source that is not OpenStreetMap (a DIMACS graph, a saved graph, a RoadGraph).
    """
    from .. import datasets
    from ..graph.road_graph import RoadGraph
    from ..io.osm import load_osm
    from ..opener import open_graph

    if isinstance(spec, RoadGraph):
        if profile is not None:
            raise ValueError(f"profile {profile!r} applies to OpenStreetMap files; graph {spec.name!r} is already "
                             "built")
        return spec
    path = os.fspath(spec)
    if not os.path.exists(path) and path in datasets.names():
        if profile is None:
            return open_graph(path)
        if datasets.DATASETS[path][0] != "osm":
            raise ValueError(f"shipped dataset {path!r} is not OpenStreetMap; profile {profile!r} needs an OSM file")
        g = load_osm(datasets.path_of(path), profile=profile, progress=False)
        g.name = path
        return g
    if path.lower().endswith(OSM_ENDINGS):
        return open_graph(path, profile="car" if profile is None else profile)
    if profile is not None:
        raise ValueError(f"{path}: profile {profile!r} applies to OpenStreetMap files (.osm.pbf, .osm, ...), "
                         "not to this graph")
    return open_graph(path)


def profile_metric(graph, which="weight", *, turns=None):
    """The overlay metric of a graph extracted with a Lua profile: arc costs and per-turn costs.

    Parameters
    ----------
    graph : RoadGraph
        With ``turn_costs`` (:func:`gpuroute.io.load_osm` with a Lua profile).
    which : {"weight", "duration"}
        ``"weight"``: the profile's weight (``graph.weights["weight"]`` + ``turn_costs.weight``, named after
        ``weight_name``, e.g. ``"routability"``); ``"duration"``: travel times in deciseconds + turn
        durations (named ``"duration"``).
    turns : TurnTable, optional
        Checked against the costs' length when given.

    Returns
    -------
    Metric

    Raises
    ------
    ValueError
        A graph without turn costs, or an unknown ``which``.
    """
    from ..crp.metric import Metric

    tc = getattr(graph, "turn_costs", None)
    if tc is None:
        raise ValueError(f"graph {graph.name!r} has no turn costs (extract it with a Lua profile)")
    if which == "weight":
        arc, tcost = graph.weight("weight"), tc.weight
        name = str(tc.meta.get("weight_name") or graph.meta.get("weight_name") or "weight")
        units = graph.units["weight"].symbol
    elif which == "duration":
        arc, tcost, name, units = graph.weight("travel_time"), tc.duration, "duration", "ds"
    else:
        raise ValueError(f"which must be 'weight' or 'duration', got {which!r}")
    if turns is not None and turns.n_turns != len(tc):
        raise ValueError(f"graph {graph.name!r}: {len(tc)} turn costs for {turns.n_turns} turns")
    return Metric(arc, turn_cost=tcost, name=name, units=units)


def routing_weight(graph, weight=None):
    """The weight a dataset (and an :class:`~gpuroute.engine.Engine`) routes by.

    Parameters
    ----------
    graph : RoadGraph
    weight : str, optional
        Asked for; default: ``weight`` for a graph extracted with a Lua profile (the profile's
        ``weight_name``, e.g. car.lua's ``routability``, with its turn costs), else ``travel_time`` when
        the graph has it, else the graph's first weight (``distance`` on a DIMACS ``-d`` graph such as ``ny``,
        ``free_flow_time`` on a TNTP network).

    Returns
    -------
    str

    Raises
    ------
    KeyError
        ``weight`` is not a weight of the graph (the message lists those it has), or the graph has none.
    """
    if weight is None:
        if getattr(graph, "turn_costs", None) is not None and "weight" in graph.weights:
            return "weight"  # a Lua profile's graph: its weight_name (e.g. routability), turn costs with it
        if WEIGHT in graph.weights:
            return WEIGHT
        if not graph.weight_names:
            raise KeyError(f"graph {graph.name!r} has no weight to route by")
        return graph.weight_names[0]
    if weight not in graph.weights:
        raise KeyError(f"graph {graph.name!r} has no weight {weight!r}; it has {graph.weight_names}")
    return weight


def metric_name(weight, graph=None):
    """The name of the overlay metric a dataset customizes for ``weight``: ``"time"`` for
    ``travel_time`` (as :meth:`gpuroute.crp.Metric.resolve` names it), the profile's ``weight_name`` for
    the ``weight`` of a graph with turn costs, else the weight's name."""
    if graph is not None and getattr(graph, "turn_costs", None) is not None and weight == "weight":
        return str(graph.turn_costs.meta.get("weight_name") or graph.meta.get("weight_name") or "weight")
    return METRIC if weight == WEIGHT else str(weight)


def _metric_of(graph, weight):
    """The overlay metric of ``weight``: the profile's metric (arc and turn costs) for the ``weight`` of
    a graph with turn costs, the named ``"time"`` for ``travel_time``, else its arc costs."""
    if getattr(graph, "turn_costs", None) is not None and weight in ("weight", "travel_time"):
        return profile_metric(graph, "weight" if weight == "weight" else "duration")
    if weight == WEIGHT:
        return METRIC
    from ..crp.metric import Metric

    unit = graph.units.get(weight)
    return Metric(graph.weight(weight), name=metric_name(weight), units=getattr(unit, "symbol", "") or "")


def default_cell_sizes(graph):
    """The partition levels of a dataset of ``graph`` when none are given: :data:`DEFAULT_CELL_SIZES`
    below its node count (at least one level)."""
    return [c for c in DEFAULT_CELL_SIZES if c < graph.n_nodes] or [max(2, graph.n_nodes // 4)]


def build_overlay(graph, weight, *, cell_sizes=None, method=None, seed=0):
    """The partition and the customized overlay of ``graph`` for ``weight``, in memory: what
    :func:`build_dataset`'s partition and customize stages make (with a Lua profile's turn costs, the
    profile's metric: turn-aware routes), and what :meth:`gpuroute.engine.Engine.open` builds for an OSM
    extract read with a Lua profile.

    Parameters
    ----------
    graph : RoadGraph
    weight : str
        The routing weight (:func:`routing_weight`).
    cell_sizes : sequence of int, optional
        Default :func:`default_cell_sizes`.
    method, seed
        As :meth:`gpuroute.partition.Partition.build`.

    Returns
    -------
    (Partition, Overlay, dict)
        The overlay customized; the dict is :meth:`gpuroute.crp.Overlay.customize`'s report.
    """
    from ..crp.overlay import Overlay
    from ..partition import Partition

    part = Partition.build(graph, cell_sizes=[int(c) for c in (cell_sizes or default_cell_sizes(graph))],
                           method=method, seed=seed)
    ov = Overlay.build(graph, part)
    return part, ov, ov.customize(_metric_of(graph, weight))


def check_routable(graph, source=None):
    """Refuse a graph with nothing to route on, naming the source and what it lacked.

    Raises
    ------
    ValueError
        ``graph`` has no arc: ``"<source>: nothing to route on: no way the 'car' profile may use (12
        highway=* ways, 0 routable)"`` for an OSM extract (also counting the ways with nodes missing
        from the file), ``"... no arcs (n nodes)"`` otherwise.
    """
    if graph.n_arcs > 0:
        return
    where = source if isinstance(source, str) else f"graph {graph.name!r}"
    meta = graph.meta or {}
    if meta.get("format") == "osm":
        what = (f"no way the {meta.get('profile', 'car')!r} profile may use ({meta.get('highway_ways', 0):,} "
                f"highway=* ways, {meta.get('routable_ways', 0):,} routable")
        missing = int(meta.get("ways_missing_nodes", 0) or 0)
        if missing:
            what += f", {missing:,} of them with nodes missing from the file"
        what += ")"
    else:
        what = f"no arcs ({graph.n_nodes:,} nodes)"
    raise ValueError(f"{where}: nothing to route on: {what}")


def _check_target(directory):
    """Refuse to replace anything but a dataset directory (or an empty one)."""
    if not os.path.lexists(directory):
        return
    if os.path.islink(directory) or not os.path.isdir(directory):
        raise FileExistsError(f"{directory}: exists and is not a directory; not writing a dataset there")
    if os.listdir(directory) and not is_dataset(directory):
        raise FileExistsError(f"{directory}: a non-empty directory that is not a dataset directory (no {FORMAT!r} "
                              f"{MANIFEST}); not replacing it")


def build_dataset(source, directory, *, profile=None, weight=None, cell_sizes=None, method=None, seed=0,
                  progress=None):
    """Run every stage -- import, contract, partition, customize -- into one dataset directory.

    Parameters
    ----------
    source : str, path-like or RoadGraph
        See :func:`open_source`. The graph needs lon/lat coordinates and at least one arc.
    directory : str or path-like
        New, empty, or a dataset directory (replaced only when the build succeeds).
    profile : str, path-like or None
        Routing profile of an OSM extract (see :func:`open_source`; recorded in the manifest, the engine
        reports it): OSRM's ``car`` (default), ``bicycle``, ``foot``, a ``.lua`` file, or ``car-basic``.
        A graph extracted with a Lua profile routes by the profile's weight with its turn costs: the
        overlay is customized with them (turn-aware routes), the hierarchy has the arc weights only.
    weight : str, optional
        The routing weight (the hierarchy's and the overlay's); default :func:`routing_weight`:
        ``travel_time`` when the graph has it, else its first weight.
    cell_sizes : sequence of int, optional
        Largest cell size of each partition level, finest first (default :data:`DEFAULT_CELL_SIZES`, cut
        to the levels smaller than the graph).
    method, seed
        See :meth:`gpuroute.Partition.build`.
    progress : callable, optional
        ``progress(stage, None)`` when each stage (``import``, ``contract``, ``partition``,
        ``customize``, ``save``) starts and ``progress(stage, seconds)`` when it ends (the CLI prints
        one line each, as OSRM logs its stages).

    Returns
    -------
    dict
        ``directory``, ``graph`` (name, nodes, arcs, fingerprint; for an OSM extract also
        ``ways_missing_nodes`` and ``segments_missing_location``, ways cut short because the file lacks
        some of their nodes), ``weight`` and ``unit`` (its :class:`~gpuroute.graph.units.Unit` as a dict),
        ``weights`` (every weight of the graph -> its unit as a dict), ``metric``, ``cell_sizes``, ``n_cells``, ``seconds`` per stage (``import``, ``contract``,
        ``partition``, ``customize``, ``save``) and ``total_seconds``.

    Raises
    ------
    FileExistsError
        ``directory`` holds something that is not a dataset (checked before any work).
    KeyError
        ``weight`` is not a weight of the graph (the message lists those it has).
    ValueError
        A graph without coordinates, or with no arc to route on (an OSM extract without a way the
        profile may use: the message names the file and counts the ways); nothing is written.
    FileNotFoundError
        See :func:`open_source`, :meth:`gpuroute.Partition.build`.
    """
    from ..ch.api import ContractionHierarchy
    from ..crp.overlay import Overlay
    from ..io.atomic import atomic_directory
    from ..io.store import save_graph
    from ..partition import Partition

    directory = os.path.abspath(os.fspath(directory))
    _check_target(directory)
    say = _stage_reporter(progress)
    secs = {}
    t_all = time.perf_counter()
    say("import")
    t0 = time.perf_counter()
    g = open_source(source, profile)
    if g.coords is None:
        raise ValueError(f"graph {g.name!r} has no coordinates: a dataset needs lon/lat nodes")
    try:
        check_routable(g, None if hasattr(source, "n_nodes") else os.fspath(source))
    except ValueError as e:
        raise ValueError(f"{e}; no dataset written") from None
    weight = routing_weight(g, weight)  # KeyError naming the weights there are
    metric = metric_name(weight, g)
    prof_name = str(g.meta.get("profile") or profile or "car-basic") if g.meta.get("format") == "osm" else \
        (None if profile is None else str(profile))
    secs["import"] = time.perf_counter() - t0
    say("import", secs["import"])
    if cell_sizes is None:
        cell_sizes = default_cell_sizes(g)
    cell_sizes = [int(c) for c in cell_sizes]
    say("contract")
    t0 = time.perf_counter()
    ch = ContractionHierarchy.build(g, weight, progress=False)
    secs["contract"] = time.perf_counter() - t0
    say("contract", secs["contract"])
    say("partition")
    t0 = time.perf_counter()
    part = Partition.build(g, cell_sizes=cell_sizes, method=method, seed=seed)
    secs["partition"] = time.perf_counter() - t0
    say("partition", secs["partition"])
    say("customize")
    t0 = time.perf_counter()
    ov = Overlay.build(g, part)
    info = ov.customize(_metric_of(g, weight))
    secs["customize"] = time.perf_counter() - t0
    say("customize", secs["customize"])
    say("save")
    t0 = time.perf_counter()
    spec = None
    if not hasattr(source, "n_nodes"):
        spec = os.fspath(source)
        spec = os.path.abspath(spec) if os.path.exists(spec) else spec
    with atomic_directory(directory) as tmp:
        save_graph(g, os.path.join(tmp, "graph"))
        ch.save(os.path.join(tmp, "ch"))
        part.save(os.path.join(tmp, "partition"))
        ov._save_files(os.path.join(tmp, "overlay"))
        om = _read_json(os.path.join(tmp, "overlay", MANIFEST)) or {}
        pman = _read_json(os.path.join(tmp, "partition", MANIFEST)) or {}
        manifest = {
            "format": FORMAT, "version": FORMAT_VERSION, "created": _now(),
            "source": spec, "profile": prof_name, "metric": metric, "weight": weight,
            "parts": {
                "graph": {"directory": "graph", "what": PARTS["graph"], "name": g.name,
                          "nodes": int(g.n_nodes), "arcs": int(g.n_arcs), "fingerprint": g.fingerprint()},
                "ch": {"directory": "ch", "what": PARTS["ch"].format(weight=weight), "weight": weight,
                       "method": ch.method,
                       "graph_fingerprint": ch.graph_fingerprint, "weight_fingerprint": ch.weight_fingerprint},
                "partition": {"directory": "partition", "what": PARTS["partition"], "method": part.method,
                              "seed": int(seed), "cell_sizes": list(part.cell_sizes),
                              "n_cells": [int(x) for x in part.n_cells],
                              "cells_sha256": _sha_file(os.path.join(tmp, "partition", "cells.npy")),
                              "fingerprint": (pman.get("fingerprint") if isinstance(pman, dict) else None)},
                "overlay": {"directory": "overlay", "what": PARTS["overlay"].format(weight=weight, metric=metric),
                            "metric": metric,
                            "units": ov.metric.units, "cells_sha256": _sha_file(os.path.join(tmp, "overlay",
                                                                                             "cells.npy")),
                            "metric_fingerprint": (om.get("metric") or {}).get("fingerprint"),
                            "partition_fingerprint": om.get("partition_fingerprint"),
                            "customize_seconds": info["seconds"]},
            },
            "seconds": secs,
        }
        with open(os.path.join(tmp, MANIFEST), "w", encoding="utf-8") as f:
            json.dump(manifest, f, indent=1)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
    secs["save"] = time.perf_counter() - t0
    say("save", secs["save"])
    gsum = {"name": g.name, "nodes": int(g.n_nodes), "arcs": int(g.n_arcs), "fingerprint": g.fingerprint()}
    for key in ("ways_missing_nodes", "segments_missing_location"):
        if key in (g.meta or {}):
            gsum[key] = int(g.meta[key])
    unit = g.units[weight]
    return {"directory": directory, "graph": gsum, "weight": weight, "metric": metric, "unit": unit.to_json(),
            "weights": {w: g.units[w].to_json() for w in g.weight_names},
            "cell_sizes": list(part.cell_sizes), "n_cells": [int(x) for x in part.n_cells], "seconds": secs,
            "total_seconds": time.perf_counter() - t_all}


def _stage_reporter(progress):
    """``say(stage, seconds=None)`` calling ``progress(stage, seconds)`` (None: no progress)."""
    if progress is None:
        return lambda stage, seconds=None: None
    return lambda stage, seconds=None: progress(stage, seconds)


def load_dataset(directory):
    """The parts of a dataset directory, each checked against the manifest, and its saved traffic.

    The overlay is customized with ``DIR/traffic.npz`` when that file is there and valid (the traffic a
    served engine saved, see the module docstring; ``dataset.traffic.restored``); a file that is not
    (unreadable, truncated, edited, saved for another build) is refused with a warning logged naming it
    and the reason (``dataset.traffic.refused``), and the overlay keeps the built metric. The overlay is
    registered with its :class:`TrafficStore` (:func:`traffic_store`), so that an engine on it saves its
    customizations there.

    Returns
    -------
    Dataset

    Raises
    ------
    FileNotFoundError
        No such directory.
    DatasetError
        Not a dataset directory, another version, a part missing or built from another graph or
        partition (named).
    ValueError
        A part's own files were changed (their loaders check their SHA-256).
    """
    from ..ch.api import ContractionHierarchy
    from ..crp.overlay import Overlay
    from ..io.store import load_graph

    directory = os.path.abspath(os.fspath(directory))
    man = read_manifest(directory)
    parts = man.get("parts") if isinstance(man.get("parts"), dict) else {}
    for name in PARTS:
        sub = (parts.get(name) or {}).get("directory")
        if not isinstance(sub, str) or os.path.basename(sub) != sub or not os.path.isdir(os.path.join(directory, sub)):
            raise DatasetError(f"{directory}: part {name!r} is missing (run gpuroute build again)")
    secs = {}
    t0 = time.perf_counter()
    g = load_graph(os.path.join(directory, parts["graph"]["directory"]))
    if g.fingerprint() != parts["graph"].get("fingerprint"):
        raise DatasetError(f"{directory}: graph/ is not the graph the dataset was built from (fingerprint differs)")
    secs["graph"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    ch = ContractionHierarchy.load(os.path.join(directory, parts["ch"]["directory"]), graph=g)
    secs["ch"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    pcells = os.path.join(directory, parts["partition"]["directory"], "cells.npy")
    ocells = os.path.join(directory, parts["overlay"]["directory"], "cells.npy")
    if not (os.path.isfile(pcells) and os.path.isfile(ocells)) or _sha_file(pcells) != _sha_file(ocells):
        raise DatasetError(f"{directory}: overlay/ was not customized from partition/ (cells differ)")
    ov = Overlay.load(os.path.join(directory, parts["overlay"]["directory"]), graph=g)
    secs["overlay"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    store = TrafficStore(directory, ov, parts["graph"]["fingerprint"])
    store.restore(ov)  # the saved traffic, if any and valid (else a warning; the built metric stays)
    _STORES[ov] = store
    secs["traffic"] = time.perf_counter() - t0
    return Dataset(directory, g, ch, ov, man, profile=str(man.get("profile") or "car-basic"), seconds=secs,
                   traffic=store)


# ---------------------------------------------------------------------------------------------- traffic
class TrafficError(DatasetError):
    """A traffic file that cannot be applied: unreadable, truncated, edited, an invalid metric, or saved
    for another build of the dataset (the message names the file and the reason)."""


class TrafficSaveError(OSError):
    """Saving the traffic failed (the message names the file); the customization was undone."""


#: The TrafficStore of each overlay :func:`load_dataset` loaded (weak: it goes with its overlay).
_STORES = weakref.WeakKeyDictionary()


def traffic_store(overlay):
    """The :class:`TrafficStore` of an overlay loaded by :func:`load_dataset`; None for any other overlay
    (built or loaded from a graph: it has no dataset directory to save its traffic in)."""
    try:
        return _STORES.get(overlay)
    except TypeError:  # not weak-referenceable: not one of ours
        return None


def _array_sha(a):
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


class TrafficStore:
    """The saved traffic of one loaded dataset directory: ``DIR/traffic.npz`` (format in the module
    docstring), written after every successful customization and applied by :func:`load_dataset`.

    Parameters
    ----------
    directory : str
        The dataset directory (absolute).
    overlay : Overlay
        Its loaded overlay (its partition and turns identify the build the traffic belongs to).
    graph_fingerprint : str
        The graph's fingerprint (the manifest's, checked against the graph by :func:`load_dataset`).

    Attributes
    ----------
    path : str
        ``DIR/traffic.npz``.
    identity : dict
        ``graph_fingerprint``, ``partition_fingerprint``, ``turns_fingerprint``, ``n_arcs``, ``n_turns``:
        a traffic file with other values is refused.
    persist : bool
        Whether customizations are saved: False where the process cannot write to ``DIR`` (then the
        traffic lives in memory only).
    restored : bool
        A saved traffic file was applied at load.
    refused : str or None
        Why a traffic file present at load was not applied (it names the file).
    generation : int
        Customizations saved since the build, those before restarts included (0: none).
    updated : str or None
        When the last one was saved (UTC, ISO 8601).
    """

    def __init__(self, directory, overlay, graph_fingerprint):
        from ..crp.overlay import arrays_sha  # the overlay manifest's turns fingerprint

        self.directory = os.path.abspath(os.fspath(directory))
        self.path = os.path.join(self.directory, TRAFFIC)
        self.identity = {"graph_fingerprint": str(graph_fingerprint),
                         "partition_fingerprint": overlay.partition_fingerprint,
                         "turns_fingerprint": arrays_sha(overlay.turns.out_arc, overlay.turns.kind),
                         "n_arcs": int(overlay.graph.n_arcs), "n_turns": int(overlay.turns.n_turns)}
        self.persist = os.access(self.directory, os.W_OK)
        self.restored = False
        self.refused = None
        self.generation = 0
        self.updated = None

    def info(self):
        """``{"file", "persist", "restored", "refused", "generation", "updated"}`` (plain data)."""
        return {"file": self.path, "persist": self.persist, "restored": self.restored, "refused": self.refused,
                "generation": self.generation, "updated": self.updated}

    # ------------------------------------------------------------------ read
    def read(self):
        """The saved metric and the file's header, every check passed.

        Returns
        -------
        (Metric, dict, ndarray or None) or None
            The metric, the header, and the arcs' travel times (int64 (m,), deciseconds; None: the
            graph's); None when there is no traffic file.

        Raises
        ------
        TrafficError
            Naming the file: unreadable or truncated (not a ``.npz`` archive, a member cut short), another
            format or version, saved for another build (which fingerprint differs), an array missing, of
            another dtype or shape, or whose SHA-256 differs from the header's, or an invalid metric (e.g. an
            arc cost of 0).
        """
        from ..crp.metric import Metric

        path = self.path
        if not os.path.lexists(path):
            return None
        try:
            z = np.load(path, allow_pickle=False)
            if not hasattr(z, "files"):
                raise TrafficError(f"{path}: not a traffic file (a single .npy array, not a .npz archive)")
            with z:
                if "header" not in z.files:
                    raise TrafficError(f"{path}: not a traffic file (no header)")
                header = json.loads(np.asarray(z["header"], dtype=np.uint8).tobytes().decode("utf-8"))
                if not isinstance(header, dict) or header.get("format") != TRAFFIC_FORMAT:
                    raise TrafficError(f"{path}: not a {TRAFFIC_FORMAT!r} file")
                if header.get("version") not in TRAFFIC_READS:
                    raise TrafficError(f"{path}: format version {header.get('version')!r}, this gpuroute reads "
                                       f"versions {', '.join(map(str, TRAFFIC_READS))}")
                saved = header.get("dataset") if isinstance(header.get("dataset"), dict) else {}
                for key, have in self.identity.items():
                    if saved.get(key) != have:
                        raise TrafficError(f"{path}: saved for another build of the dataset ({key} "
                                           f"{saved.get(key)!r}, this dataset {have!r})")
                specs = header.get("arrays") if isinstance(header.get("arrays"), dict) else {}
                known = TRAFFIC_ARRAYS if header.get("version") >= 2 else TRAFFIC_ARRAYS[:3]
                unknown = sorted(set(specs) - set(known))
                if unknown or not {"arc_cost", "turn_penalty"} <= set(specs):
                    raise TrafficError(f"{path}: the header lists arrays {sorted(specs)}; expected arc_cost, "
                                       f"turn_penalty and optionally {' and '.join(known[2:])}")
                arrays = {}
                for name, spec in specs.items():
                    if name not in z.files:
                        raise TrafficError(f"{path}: array {name!r} is missing")
                    a = z[name]
                    if not isinstance(spec, dict) or str(a.dtype) != spec.get("dtype") or \
                            list(a.shape) != spec.get("shape"):
                        raise TrafficError(f"{path}: array {name!r} is {a.dtype}{list(a.shape)}, the header says "
                                           f"{spec.get('dtype') if isinstance(spec, dict) else None}"
                                           f"{spec.get('shape') if isinstance(spec, dict) else None}")
                    if _array_sha(a) != spec.get("sha256"):
                        raise TrafficError(f"{path}: array {name!r} was changed or damaged after saving (its "
                                           "SHA-256 differs from the header's)")
                    arrays[name] = a
        except TrafficError:
            raise
        except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as e:
            raise TrafficError(f"{path}: unreadable or truncated ({' '.join(str(e).split()) or type(e).__name__})") \
                from None
        met = header.get("metric") if isinstance(header.get("metric"), dict) else {}
        name, units = met.get("name"), met.get("units", "")
        if not isinstance(name, str) or not isinstance(units, str):
            raise TrafficError(f"{path}: the header's metric has no name or units")
        try:
            metric = Metric(arrays["arc_cost"], arrays["turn_penalty"], turn_cost=arrays.get("turn_cost"), name=name,
                            units=units)
        except ValueError as e:
            raise TrafficError(f"{path}: not a valid metric ({e})") from None
        if metric.n_arcs != self.identity["n_arcs"] or (metric.turn_cost is not None
                                                        and metric.turn_cost.size != self.identity["n_turns"]):
            raise TrafficError(f"{path}: {metric.n_arcs} arc costs for {self.identity['n_arcs']} arcs")
        dur = arrays.get("arc_duration")
        if dur is not None:
            if dur.dtype.kind not in "iu" or dur.shape != (self.identity["n_arcs"],):
                raise TrafficError(f"{path}: arc_duration is {dur.dtype}{list(dur.shape)}, expected integers "
                                   f"({self.identity['n_arcs']},)")
            if dur.size and int(dur.min()) <= 0:
                i = int(np.argmin(dur))
                raise TrafficError(f"{path}: arc_duration[{i}] = {int(dur[i])} is not a positive travel time")
            dur = dur.astype(np.int64)
        return metric, header, dur

    def restore(self, overlay):
        """Customize ``overlay`` with the saved traffic when there is a valid traffic file; otherwise log a
        warning naming the file and the reason (the overlay keeps its metric: a customization is applied
        whole or not at all).

        Returns
        -------
        bool
            Whether the traffic was applied (also in :attr:`restored`; the reason otherwise in
            :attr:`refused`).
        """
        try:
            got = self.read()
            if got is None:
                return False
            metric, header, durations = got
            try:
                overlay.customize(metric, durations=durations)
            except ValueError as e:
                raise TrafficError(f"{self.path}: the saved metric does not customize this overlay ({e})") from None
        except TrafficError as e:
            self.refused = f"{e}; the dataset's built metric is used (the next customization replaces the file)"
            log.warning("%s", self.refused)
            return False
        self.restored = True
        gen = header.get("generation")
        self.generation = int(gen) if isinstance(gen, int) and not isinstance(gen, bool) and gen >= 0 else 0
        self.updated = header.get("updated") if isinstance(header.get("updated"), str) else None
        log.info("%s: traffic restored (metric %r, generation %d, saved %s)", self.path, metric.name, self.generation,
                 self.updated)
        return True

    # ------------------------------------------------------------------ write
    def save(self, overlay):
        """Save ``overlay``'s current metric as the directory's traffic, replacing the previous file
        atomically (:func:`gpuroute.io.atomic.atomic_file`: a crash leaves the previous file or, where there
        was none, no file; never a part of one). Called by :meth:`gpuroute.engine.traffic.TrafficRouter.
        customize` under its lock, after the new metric is in place.

        Returns
        -------
        dict or None
            ``{"file", "generation", "updated", "seconds"}`` (``seconds``: the time the save took); None where
            :attr:`persist` is False (nothing written).

        Raises
        ------
        TrafficSaveError
            Writing or renaming failed (the message names the file); the previous file is unchanged and no
            temporary is left behind.
        """
        if not self.persist:
            return None
        from .. import __version__
        from ..io.atomic import atomic_file

        t0 = time.perf_counter()
        st = overlay._need_state()  # one state: its metric and its travel times
        met = st.metric
        arrays = {"arc_cost": np.ascontiguousarray(met.arc_cost, dtype=np.int32),
                  "turn_penalty": np.ascontiguousarray(met.turn_penalty, dtype=np.int32)}
        if met.turn_cost is not None:
            arrays["turn_cost"] = np.ascontiguousarray(met.turn_cost, dtype=np.int32)
        dur = st.arc_duration  # live travel times apart from the costs (speed updates)
        if dur is not None:
            arrays["arc_duration"] = np.ascontiguousarray(dur, dtype=np.int32)
        gen = self.generation + 1
        now = _now()
        header = {"format": TRAFFIC_FORMAT, "version": TRAFFIC_VERSION, "dataset": self.identity,
                  "metric": {"name": str(met.name), "units": str(met.units)}, "generation": gen, "updated": now,
                  "arrays": {k: {"dtype": str(a.dtype), "shape": list(a.shape), "sha256": _array_sha(a)}
                             for k, a in arrays.items()},
                  "gpuroute_version": __version__}
        raw = np.frombuffer(json.dumps(header, sort_keys=True).encode("utf-8"), dtype=np.uint8)
        try:
            with atomic_file(self.path, "wb") as f:
                np.savez(f, header=raw, **arrays)
        except OSError as e:
            raise TrafficSaveError(f"{self.path}: could not save the traffic ({' '.join(str(e).split())}); the "
                                   "customization was undone") from e
        self.generation, self.updated = gen, now
        return {"file": self.path, "generation": gen, "updated": now, "seconds": time.perf_counter() - t0}


def drop_traffic(directory):
    """Delete the saved traffic of a dataset directory: the next :func:`load_dataset` (``gpuroute serve
    DIR``) starts from the built metric. An engine serving the directory keeps its traffic in memory and
    saves it again on its next customization (stop it first, or customize it back to the built metric).

    Returns
    -------
    bool
        Whether a traffic file was deleted (False: there was none).

    Raises
    ------
    FileNotFoundError, DatasetError
        Not a dataset directory (see :func:`read_manifest`).
    """
    from ..io.atomic import fsync_directory

    directory = os.path.abspath(os.fspath(directory))
    read_manifest(directory)
    try:
        os.unlink(os.path.join(directory, TRAFFIC))
    except FileNotFoundError:
        return False
    fsync_directory(directory)
    return True
