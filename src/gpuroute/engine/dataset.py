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

The routing weight is the graph's ``travel_time`` when it has one (an OSM extract, ``ny-time``), else
its first weight (``distance`` of a DIMACS ``-d`` graph such as ``ny``; see :func:`routing_weight`), or
the one asked for. The hierarchy and the overlay share it with no turn penalties (for ``travel_time``
the overlay's metric ``"time"``, not ``"time-uturn"``; for another weight a metric of that weight's
costs, named after it), so that before any traffic update a route over the overlay and one over the
hierarchy cost the same wherever no turn restriction binds. The whole directory is written into a
temporary sibling and renamed into place: an interrupted build leaves nothing half-written, and a
directory that is not a dataset is never replaced. A source with no road to route on (an OSM extract
without a way the profile may use) is refused before anything is written.

Public API
----------
build_dataset(source, directory, ...)   run every stage, write the directory, return a summary
routing_weight(graph, weight=None)      the weight a dataset or an engine routes by
load_dataset(directory)                 the parts of a dataset directory, every fingerprint checked
is_dataset(path)                        whether ``path`` is a dataset directory
read_manifest(directory)                its manifest, format and version checked
"""
from __future__ import annotations

import datetime
import hashlib
import json
import os
import time
from dataclasses import dataclass, field

__all__ = ["FORMAT", "FORMAT_VERSION", "MANIFEST", "METRIC", "WEIGHT", "DatasetError", "Dataset", "build_dataset",
           "load_dataset", "is_dataset", "read_manifest", "open_source", "routing_weight", "metric_name",
           "check_routable", "profile_metric"]

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
        Load time of each part.
    """

    directory: str
    graph: object
    ch: object
    overlay: object
    manifest: dict
    profile: str = "car-basic"
    seconds: dict = field(default_factory=dict)


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
        cell_sizes = [c for c in DEFAULT_CELL_SIZES if c < g.n_nodes] or [max(2, g.n_nodes // 4)]
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
    """The parts of a dataset directory, each checked against the manifest.

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
    return Dataset(directory, g, ch, ov, man, profile=str(man.get("profile") or "car-basic"), seconds=secs)
