"""Every stage in order -- extract, contract, partition, customize -- into one dataset directory that
:meth:`gpuroute.engine.Engine.open` loads without building anything (``gpuroute build`` writes it,
``gpuroute serve DIR`` serves it), or in memory (``Engine.open`` of an OSM extract or a graph file).

Layout of a dataset directory (read by :mod:`gpuroute.engine.dataset`)::

    DIR/
        manifest.json   format "gpuroute-dataset": version, the source and profile it was built from,
                        the metric, per part its directory, what it is and its fingerprints, the
                        seconds of each stage, and the store's ``integrity`` entry
        graph/          the extract stage's output (:func:`gpuroute.store.save_graph`)
        ch/             the contract stage's output, for the routing weight; not made where the overlay
                        answers every service (:func:`needs_hierarchy`: a graph with turn costs)
        partition/      the partition stage's output
        overlay/        the customize stage's output, for the routing weight's metric (no turn penalties;
                        a Lua profile's turn costs)
        time_profile.csv  with ``time_profile``: the time profile ``depart_at`` reads
                        (:func:`gpuroute.engine.timeslots.store_profile`)

Each stage runs with its output inside a temporary sibling of ``DIR`` that is renamed into place only
when every stage succeeded (:func:`gpuroute.store.atomic_directory`): a failing stage leaves nothing
half-built, and a directory that is not a dataset is never replaced.

Public API
----------
BuildConfig                      source, output (None: in memory), profile, weight, cell sizes, ...
run(config) -> Built             graph, hierarchy, partition, overlay and the summary
needs_hierarchy(graph, overlay)  whether the contract stage runs
build_dataset(source, directory, ...)   ``run`` with the keywords of a call; returns the summary
build_overlay(graph, weight, ...)       the partition and customize stages in memory
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from . import contract, customize, extract, partition

__all__ = ["BuildConfig", "Built", "run", "build_dataset", "build_overlay", "needs_hierarchy", "STAGES", "SKIPPED"]

#: The stages a build runs, in order, by the names its progress reports (``import`` is the extract stage).
STAGES = ("import", "contract", "partition", "customize", "save")
#: Why a stage did not run (``summary["skipped"]``).
SKIPPED = {"contract": "the overlay answers every service of a graph with turn costs (no hierarchy is read); "
                       "gpuroute.engine.Engine.ch contracts it on demand"}


def needs_hierarchy(graph, overlay):
    """Whether a build contracts the graph (the contract stage): always without an overlay; with one, only
    for a graph without per-turn costs. With a Lua profile's turn costs every service searches the
    overlay (:func:`gpuroute.engine.algorithms.table_search` and ``route_search``; isochrones, trips and
    exclusions too), so the hierarchy would only be carried (issue 20: 22 of a Monaco dataset's 25 MB)."""
    return not overlay or getattr(graph, "turn_costs", None) is None


@dataclass
class BuildConfig:
    """What a build reads and writes.

    Attributes
    ----------
    source : str, path-like or RoadGraph
        See :func:`gpuroute.pipeline.extract.open_source`. A dataset needs lon/lat coordinates and at
        least one arc.
    output : str or path-like, optional
        The dataset directory (new, empty, or a dataset directory, replaced only when the build succeeds).
        None: everything stays in memory.
    profile : str, path-like or None
        Routing profile of an OSM extract (recorded in the manifest): OSRM's ``car`` (default),
        ``bicycle``, ``foot``, a ``.lua`` file, or ``car-basic``.
    weight : str, optional
        The routing weight (the hierarchy's and the overlay's); default
        :func:`gpuroute.pipeline.customize.routing_weight`.
    cell_sizes : sequence of int, optional
        Largest cell size of each partition level, finest first (default
        :func:`gpuroute.pipeline.partition.default_cell_sizes`).
    method, seed
        See :meth:`gpuroute.Partition.build`.
    overlay : bool, optional
        Partition and customize. Default: always for a dataset directory; in memory only for a graph
        with turn costs (a Lua profile's: every service pays them over the overlay).
    time_profile : str or path-like, optional
        A time profile (CSV or Parquet, :mod:`gpuroute.engine.timeslots`) stored in the dataset directory as
        ``time_profile.csv`` (:func:`gpuroute.engine.timeslots.store_profile`'s file; ``Engine.open(DIR)``
        loads it): read before the first stage, checked fully against the built dataset before the
        directory is renamed into place (a bad profile: nothing is written). Needs ``output``.
    progress : callable, optional
        ``progress(stage, None)`` when each stage of :data:`STAGES` starts and ``progress(stage,
        seconds)`` when it ends (the CLI prints one line each, as OSRM logs its stages).
    """

    source: object
    output: object = None
    profile: object = None
    weight: object = None
    cell_sizes: object = None
    method: object = None
    seed: int = 0
    overlay: object = None
    progress: object = None
    time_profile: object = None

    def writes(self):
        return [] if self.output is None else [os.path.abspath(os.fspath(self.output))]


@dataclass
class Built:
    """What a build made: ``graph``, ``ch``, ``partition`` and ``overlay`` (None where not built: ``ch``
    where :func:`needs_hierarchy` is False),
    ``weight``, ``metric`` (the overlay metric's name), ``profile`` (as recorded), ``summary`` (see
    :func:`build_dataset`)."""

    graph: object
    ch: object
    partition: object
    overlay: object
    weight: str
    metric: str
    profile: object
    summary: dict = field(default_factory=dict)


def _reporter(progress):
    if progress is None:
        return lambda stage, seconds=None: None
    return lambda stage, seconds=None: progress(stage, seconds)


def run(config):
    """Run every stage (extract, contract, partition, customize) and, with ``config.output``, write the
    dataset directory.

    Parameters
    ----------
    config : BuildConfig

    Returns
    -------
    Built

    Raises
    ------
    FileExistsError
        ``output`` holds something that is not a dataset (checked before any work).
    KeyError
        ``weight`` is not a weight of the graph (the message lists those it has).
    ValueError
        A graph without coordinates (a dataset), or with no arc to route on (an OSM extract without a
        way the profile may use: the message names the file and counts the ways); ``overlay=False`` with
        an output; nothing is written.
    FileNotFoundError
        See :func:`gpuroute.pipeline.extract.open_source`, :meth:`gpuroute.Partition.build`.
    """
    from .. import store
    from ..engine.dataset import FORMAT

    directory = None
    if config.output is not None:
        if config.overlay is not None and not config.overlay:
            raise ValueError(f"{os.fspath(config.output)}: a dataset directory holds the overlay (partition and "
                             "customize); overlay=False builds in memory only")
        directory = store.check_replaceable(config.output, (FORMAT,), "a dataset directory")
    if config.time_profile is not None:
        if directory is None:
            raise ValueError("time_profile is stored in a dataset directory: give an output")
        from ..engine.timeslots import TimeProfile

        TimeProfile.read(os.fspath(config.time_profile))  # a bad file fails before any stage runs
    if directory is None:
        return _run(config, None)
    with store.atomic_directory(directory) as tmp:
        built = _run(config, tmp)
    built.summary["directory"] = directory
    return built


def _run(config, tmp):
    """The stages, each writing its part into ``tmp`` (None: in memory), then the dataset manifest."""
    say = _reporter(config.progress)
    secs = {}
    t_all = time.perf_counter()

    def part(name):
        return None if tmp is None else os.path.join(tmp, name)

    say("import")
    try:
        ex = extract.run(extract.ExtractConfig(config.source, config.profile, output=part("graph"),
                                               require_coords=tmp is not None))
    except ValueError as e:
        if tmp is None or "nothing to route on" not in str(e):
            raise
        raise ValueError(f"{e}; no dataset written") from None
    g = ex.graph
    weight = customize.routing_weight(g, config.weight)  # KeyError naming the weights there are
    metric = customize.metric_name(weight, g)
    secs["import"] = time.perf_counter() - t_all
    say("import", secs["import"])
    want_overlay = config.overlay if config.overlay is not None else \
        (tmp is not None or getattr(g, "turn_costs", None) is not None)
    ch, skipped = None, {}
    if needs_hierarchy(g, want_overlay):
        say("contract")
        t0 = time.perf_counter()
        ch = contract.run(contract.ContractConfig(g, weight, output=part("ch"))).ch
        secs["contract"] = time.perf_counter() - t0
        say("contract", secs["contract"])
    else:
        skipped["contract"] = SKIPPED["contract"]
    part_, ov, info = None, None, None
    if want_overlay:
        say("partition")
        t0 = time.perf_counter()
        sizes = config.cell_sizes if config.cell_sizes is not None else partition.default_cell_sizes(g)
        part_ = partition.run(partition.PartitionConfig(g, output=part("partition"), cell_sizes=sizes,
                                                        method=config.method, seed=config.seed)).partition
        secs["partition"] = time.perf_counter() - t0
        say("partition", secs["partition"])
        say("customize")
        t0 = time.perf_counter()
        cu = customize.run(customize.CustomizeConfig(g, part_, weight=weight, output=part("overlay")))
        ov, info = cu.overlay, cu.info
        secs["customize"] = time.perf_counter() - t0
        say("customize", secs["customize"])
    summary = {"directory": None, "graph": _graph_summary(g), "weight": weight, "metric": metric,
               "unit": g.units[weight].to_json(), "weights": {w: g.units[w].to_json() for w in g.weight_names},
               "cell_sizes": [] if part_ is None else list(part_.cell_sizes),
               "n_cells": [] if part_ is None else [int(x) for x in part_.n_cells], "seconds": secs,
               "skipped": skipped}
    if tmp is not None:
        say("save")
        t0 = time.perf_counter()
        _write_dataset_manifest(tmp, ex, g, ch, part_, ov, info, weight, metric, config.seed, secs)
        if config.time_profile is not None:  # checked against what was built; inside the directory's temporary
            summary["time_profile"] = _store_time_profile(tmp, config.time_profile, g, ch, ov, weight, ex.profile)
        secs["save"] = time.perf_counter() - t0
        say("save", secs["save"])
    summary["total_seconds"] = time.perf_counter() - t_all
    return Built(g, ch, part_, ov, weight, metric, ex.profile, summary)


def _store_time_profile(tmp, source, g, ch, ov, weight, profile):
    """Check ``source`` against an engine over the built parts and write it as ``tmp/time_profile.csv``; its
    :meth:`gpuroute.engine.timeslots.TimeProfile.info`."""
    from ..engine import Engine
    from ..engine.timeslots import STORED, profile_bytes

    eng = Engine(g, ch, profile=str(profile or "car"), overlay=ov, weight=weight)
    prof, text = profile_bytes(source, eng)
    path = os.path.join(tmp, STORED)
    with open(path, "wb") as f:  # the whole directory is renamed into place (or removed) afterwards
        f.write(text)
    return {**prof.info(), "file": STORED}


def _graph_summary(g):
    gsum = {"name": g.name, "nodes": int(g.n_nodes), "arcs": int(g.n_arcs), "fingerprint": g.fingerprint()}
    for key in ("ways_missing_nodes", "segments_missing_location"):
        if key in (g.meta or {}):
            gsum[key] = int(g.meta[key])
    return gsum


def _write_dataset_manifest(tmp, ex, g, ch, part, ov, info, weight, metric, seed, secs):
    from .. import store
    from ..engine.dataset import FORMAT, PARTS, format_version

    pman = store.read_json(os.path.join(tmp, "partition", store.MANIFEST)) or {}
    om = store.read_json(os.path.join(tmp, "overlay", store.MANIFEST)) or {}
    parts = {
        "graph": {"directory": "graph", "what": PARTS["graph"], "name": g.name,
                  "nodes": int(g.n_nodes), "arcs": int(g.n_arcs), "fingerprint": g.fingerprint()},
        "ch": None if ch is None else {
            "directory": "ch", "what": PARTS["ch"].format(weight=weight), "weight": weight, "method": ch.method,
            "graph_fingerprint": ch.graph_fingerprint, "weight_fingerprint": ch.weight_fingerprint},
        "partition": {"directory": "partition", "what": PARTS["partition"], "method": part.method,
                      "seed": int(seed), "cell_sizes": list(part.cell_sizes),
                      "n_cells": [int(x) for x in part.n_cells],
                      "cells_sha256": store.sha256_file(os.path.join(tmp, "partition", "cells.npy")),
                      "fingerprint": pman.get("fingerprint") if isinstance(pman, dict) else None},
        "overlay": {"directory": "overlay", "what": PARTS["overlay"].format(weight=weight, metric=metric),
                    "metric": metric, "units": ov.metric.units,
                    "cells_sha256": store.sha256_file(os.path.join(tmp, "overlay", "cells.npy")),
                    "metric_fingerprint": (om.get("metric") or {}).get("fingerprint"),
                    "partition_fingerprint": om.get("partition_fingerprint"),
                    "customize_seconds": info["seconds"]},
    }
    parts = {k: v for k, v in parts.items() if v is not None}
    manifest = {"format": FORMAT, "version": format_version(parts), "created": store.manifest.now(),
                "source": ex.spec, "profile": ex.profile, "metric": metric, "weight": weight, "parts": parts,
                "seconds": secs}
    store.write_manifest(tmp, manifest, what="dataset manifest")


def build_dataset(source, directory, *, profile=None, weight=None, cell_sizes=None, method=None, seed=0,
                  progress=None, time_profile=None):
    """Run every stage -- import (extract), contract, partition, customize -- into one dataset directory
    (:func:`run` with a :class:`BuildConfig`).

    Parameters
    ----------
    source, directory, profile, weight, cell_sizes, method, seed, progress, time_profile
        See :class:`BuildConfig` (``directory`` is its ``output``).

    Returns
    -------
    dict
        ``directory``, ``graph`` (name, nodes, arcs, fingerprint; for an OSM extract also
        ``ways_missing_nodes`` and ``segments_missing_location``, ways cut short because the file lacks
        some of their nodes), ``weight`` and ``unit`` (its :class:`~gpuroute.graph.units.Unit` as a dict),
        ``weights`` (every weight of the graph -> its unit as a dict), ``metric``, ``cell_sizes``,
        ``n_cells``, ``seconds`` per stage (``import``, ``contract``, ``partition``, ``customize``,
        ``save``), ``skipped`` (a stage that did not run -> why: ``contract`` for a graph with turn costs,
        :func:`needs_hierarchy`), ``total_seconds`` and, with ``time_profile``, ``time_profile`` (the stored
        profile's summary, ``file`` relative to the directory).

    Raises
    ------
    See :func:`run`.
    """
    cfg = BuildConfig(source, os.path.abspath(os.fspath(directory)), profile=profile, weight=weight,
                      cell_sizes=cell_sizes, method=method, seed=seed, progress=progress, time_profile=time_profile)
    return run(cfg).summary


def build_overlay(graph, weight, *, cell_sizes=None, method=None, seed=0):
    """The partition and the customized overlay of ``graph`` for ``weight``, in memory (the partition and
    customize stages; with a Lua profile's turn costs, the profile's metric: turn-aware routes).

    Returns
    -------
    (Partition, Overlay, dict)
        The overlay customized; the dict is :meth:`gpuroute.crp.Overlay.customize`'s report.
    """
    sizes = cell_sizes if cell_sizes is not None else partition.default_cell_sizes(graph)
    p = partition.run(partition.PartitionConfig(graph, cell_sizes=sizes, method=method, seed=seed)).partition
    cu = customize.run(customize.CustomizeConfig(graph, p, weight=weight))
    return p, cu.overlay, cu.info
