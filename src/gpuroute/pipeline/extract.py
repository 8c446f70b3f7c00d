"""Stage ``extract``: the road graph a build starts from (OSRM's ``osrm-extract``).

Reads a source -- an OSM extract through a profile (gpuroute's native ``car-basic``, or an OSRM Lua
profile run unchanged through :mod:`gpuroute.io.lua_profile`), a shipped dataset name, another graph
file or a saved graph directory, or a RoadGraph already in memory -- and, when the config names an
output, writes the graph there (:func:`gpuroute.store.save_graph`: atomic, with a manifest).

Public API
----------
ExtractConfig                 source, profile, output (the graph directory written, optional)
run(config) -> Extracted      the graph (and where it was written)
open_source(spec, profile)    the graph of a source (no checks)
check_routable(graph, source) refuse a graph with nothing to route on, naming the source
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

__all__ = ["NAME", "ExtractConfig", "Extracted", "run", "open_source", "check_routable", "OSM_ENDINGS"]

NAME = "extract"
#: File endings read as OpenStreetMap (they take the profile).
OSM_ENDINGS = (".pbf", ".osm", ".osm.bz2", ".osm.gz", ".o5m")


@dataclass
class ExtractConfig:
    """What the extract stage reads and writes.

    Attributes
    ----------
    source : str, path-like or RoadGraph
        Read: see :func:`open_source`.
    profile : str, path-like or None
        For an OSM extract: ``"car"`` (default; OSRM's car.lua), ``"bicycle"``, ``"foot"``, a ``.lua``
        path, or ``"car-basic"`` (see :func:`gpuroute.io.load_osm`).
    output : str or path-like, optional
        Written: the graph directory (:func:`gpuroute.store.save_graph`; new, empty, or a saved graph to
        replace). None: the graph stays in memory.
    require_coords : bool
        Refuse a graph without coordinates (a dataset needs lon/lat nodes).
    """

    source: object
    profile: object = None
    output: object = None
    require_coords: bool = False

    def reads(self):
        """The files this stage reads (empty for a graph in memory or a shipped name)."""
        if hasattr(self.source, "n_nodes"):
            return []
        p = os.fspath(self.source)
        return [os.path.abspath(p)] if os.path.exists(p) else []

    def writes(self):
        """The files this stage writes."""
        return [] if self.output is None else [os.path.abspath(os.fspath(self.output))]


@dataclass
class Extracted:
    """The extract stage's output.

    Attributes
    ----------
    graph : RoadGraph
    spec : str or None
        What reopens the source (an existing path made absolute, or a shipped name); None for a graph
        given in memory.
    profile : str or None
        The profile the graph was read with (an OSM extract: the graph's own record; else the one given).
    output : str or None
        The graph directory written.
    seconds : float
    """

    graph: object
    spec: object
    profile: object
    output: object
    seconds: float


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


def run(config):
    """Read the source, check it can be routed on, and write the graph where ``config.output`` says.

    Parameters
    ----------
    config : ExtractConfig

    Returns
    -------
    Extracted

    Raises
    ------
    FileNotFoundError
        See :func:`open_source`.
    ValueError
        A profile for a source that is not OpenStreetMap; a graph without coordinates
        (``require_coords``); a graph with nothing to route on (:func:`check_routable`); a Lua profile
        that does not parse or raises (naming the profile file and line). Nothing is written.
    FileExistsError
        ``output`` holds something that is not a saved graph (nothing is written).
    """
    from ..store import check_replaceable, save_graph
    from ..store.graph import FORMAT as GRAPH_FORMAT

    source = config.source
    in_memory = hasattr(source, "n_nodes")
    if config.output is not None:  # refuse before the (slow) extraction
        check_replaceable(config.output, (GRAPH_FORMAT,), "a saved gpuroute graph")
    t0 = time.perf_counter()
    g = open_source(source, config.profile)
    if config.require_coords and g.coords is None:
        raise ValueError(f"graph {g.name!r} has no coordinates: a dataset needs lon/lat nodes")
    check_routable(g, None if in_memory else os.fspath(source))
    spec = None
    if not in_memory:
        spec = os.fspath(source)
        spec = os.path.abspath(spec) if os.path.exists(spec) else spec
    profile = str(g.meta.get("profile") or config.profile or "car-basic") if g.meta.get("format") == "osm" else \
        (None if config.profile is None else str(config.profile))
    out = None
    if config.output is not None:
        out = save_graph(g, config.output)
    return Extracted(g, spec, profile, out, time.perf_counter() - t0)
