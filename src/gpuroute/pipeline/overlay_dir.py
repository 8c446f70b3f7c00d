"""The overlay directory: Customizable Route Planning's stages on disk, one per command (OSRM style):
``gpuroute partition`` (the partition stage, :mod:`gpuroute.pipeline.partition`: metric-independent,
once per topology), ``gpuroute customize`` (the customize stage, :mod:`gpuroute.pipeline.customize`: a
metric, optional traffic, repeated), then queries on the saved overlay. Every artefact carries
fingerprints (:mod:`gpuroute.store`), so a stage refuses the output of a stage run on something else.

An *overlay directory* holds::

    <directory>/
        manifest.json   format "gpuroute-crp-stages": the graph spec that reopens the graph (a shipped
                        name or an absolute path), the partition's summary and the SHA-256 of its
                        cells.npy, the record of the last customization (metric, unit, traffic file,
                        seconds, the partition it was made from), and the store's ``integrity`` entry
                        (directories written before it opened without one)
        partition/      the nested partition (:meth:`gpuroute.Partition.save`, its own manifest with the
                        graph's topology fingerprint)
        overlay/        the customized overlay (:meth:`gpuroute.Overlay.save`, its own manifest with the
                        graph fingerprint and the SHA-256 of its copy of the cells)

The partition fingerprint that ties ``overlay/`` to ``partition/`` is the SHA-256 of the cells file,
recorded by both manifests (and checked against the file by both loaders): :func:`check_overlay`
refuses an overlay customized from another partition (e.g. after ``partition`` was run again with other
cell sizes). Re-running ``partition`` leaves ``overlay/`` in place (it becomes valid again only if the
new partition is the same).

Public API
----------
run_partition(graph, directory, ...)    the partition stage into ``directory/partition``, write the manifest
run_customize(directory, metric, ...)   the customize stage from the saved partition into ``directory/overlay``
check_overlay(directory)                what a query needs to know, refusing a stale customization
open_overlay(directory, graph=None)     :func:`check_overlay` + :meth:`gpuroute.Overlay.load`
save_overlay(overlay, directory)        a customized Overlay as an overlay directory (:meth:`gpuroute.Overlay.save`)
read_manifest(directory), graph_spec(directory)
check_replaceable(directory)            raise unless ``run_partition`` may write ``directory``
"""
from __future__ import annotations

import os
import time

from .. import store
from ..crp.metric import NAMED_METRICS, Profile
from ..crp.overlay import FORMAT as OVERLAY_FORMAT
from ..crp.overlay import MANIFEST as OVERLAY_MANIFEST
from ..crp.overlay import Overlay
from ..graph.errors import ParseError
from ..graph.units import Unit, parse_unit
from ..partition.multilevel import CELLS_FILE
from ..partition.multilevel import FORMAT as PARTITION_FORMAT
from ..partition.multilevel import MANIFEST as PARTITION_MANIFEST
from . import customize, partition
from .customize import metric_weight, resolve_metric_spec, unit_of

__all__ = ["run_partition", "run_customize", "check_overlay", "open_overlay", "save_overlay", "read_manifest",
           "graph_spec", "check_replaceable", "StageError", "FORMAT", "FORMAT_VERSION", "MANIFEST", "PARTITION_DIR",
           "OVERLAY_DIR"]

FORMAT = "gpuroute-crp-stages"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
PARTITION_DIR = "partition"
OVERLAY_DIR = "overlay"


class StageError(ValueError):
    """A stage cannot run on this overlay directory (not one, not partitioned or customized yet, a
    customization of another partition); the message says which command to run."""


# ------------------------------------------------------------------------------------------- helpers
def _read_json(path, what):
    try:
        return store.read_json(path)
    except ParseError as e:
        raise StageError(f"unreadable {what}: {e}") from None


def _write_manifest(directory, manifest):
    """The overlay directory's manifest, replaced atomically, with the store's ``integrity`` entry."""
    store.write_manifest(directory, manifest, atomic=True, what="overlay directory manifest")


def _spec_of(spec, graph):
    """What reopens the graph: an existing path made absolute, else the name as given (a shipped
    dataset); without ``spec``, the graph's name when it is a shipped dataset, else its recorded source."""
    from .. import datasets

    if spec is not None:
        spec = os.fspath(spec)
        return os.path.abspath(spec) if os.path.exists(spec) else spec
    if graph.name in datasets.names():
        return graph.name
    source = graph.meta.get("source") if isinstance(graph.meta, dict) else None
    if isinstance(source, (str, os.PathLike)) and os.path.exists(source):
        return os.path.abspath(os.fspath(source))
    return None


def _cells_sha256(manifest, key):
    files = manifest.get("files") if isinstance(manifest, dict) else None
    rec = files.get(key) if isinstance(files, dict) else None
    sha = rec.get("sha256") if isinstance(rec, dict) else None
    return sha if isinstance(sha, str) else None


def check_replaceable(directory):
    """Refuse to write a partition into anything but an overlay directory (or a new or empty one).

    Returns
    -------
    str
        The absolute path.

    Raises
    ------
    FileExistsError
        ``directory`` is a file or a link, or a non-empty directory without a ``gpuroute-crp-stages``
        manifest that holds anything but ``partition/``, ``overlay/`` and hidden entries (what an
        interrupted :func:`run_partition` leaves): nothing unrelated is overwritten.
    """
    # no manifest but only what an interrupted run_partition leaves (partition/ is guarded by Partition.save)
    return store.check_replaceable(
        directory, (FORMAT,), "an overlay directory",
        allow=lambda entries: all(e in (PARTITION_DIR, OVERLAY_DIR) or e.startswith(".") for e in entries),
        refusal="not writing into it")


def read_manifest(directory):
    """The manifest of an overlay directory.

    Raises
    ------
    FileNotFoundError
        ``directory`` does not exist.
    StageError
        Not an overlay directory (no or another manifest, another format version).
    """
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"{directory}: no such directory (make it with gpuroute partition GRAPH -o "
                                f"{directory})")
    path = os.path.join(directory, MANIFEST)
    m = _read_json(path, "manifest")
    if m is None:
        raise StageError(f"{directory}: not an overlay directory (no {MANIFEST}; make one with gpuroute partition "
                         f"GRAPH -o {directory})")
    fmt = m.get("format") if isinstance(m, dict) else type(m).__name__
    if fmt != FORMAT:
        what = {PARTITION_FORMAT: "a saved partition", OVERLAY_FORMAT: "a saved overlay"}.get(fmt)
        parent = os.path.dirname(os.path.abspath(directory))
        parent_man = _read_json(os.path.join(parent, MANIFEST), "manifest") if what else None
        if isinstance(parent_man, dict) and parent_man.get("format") == FORMAT:
            raise StageError(f"{directory}: {what} inside the overlay directory {parent}; give {parent}")
        raise StageError(f"{directory}: {what or f'format {fmt!r}'}, not an overlay directory (format "
                         f"{FORMAT!r}, made by gpuroute partition)")
    if m.get("version") != FORMAT_VERSION:
        raise StageError(f"{path}: format version {m.get('version')!r}, this gpuroute reads {FORMAT_VERSION}; "
                         "run gpuroute partition again")
    if store.INTEGRITY in m:  # overlay directories written before the store recorded it open without
        try:
            store.verify_integrity(m, path, remedy="run gpuroute partition and customize again")
        except ParseError as e:
            raise StageError(str(e)) from None
    return m


def graph_spec(directory):
    """The shipped name or absolute path recorded by :func:`run_partition` (what reopens the graph).

    Raises
    ------
    FileNotFoundError
        The recorded path is gone (or no spec was recorded).
    StageError
        See :func:`read_manifest`.
    """
    m = read_manifest(directory)
    g = m.get("graph") if isinstance(m.get("graph"), dict) else {}
    spec = g.get("spec")
    if not isinstance(spec, str):
        raise FileNotFoundError(f"{directory}: no graph recorded (name {g.get('name')!r}); give the graph explicitly")
    if os.path.isabs(spec) and not os.path.exists(spec):
        raise FileNotFoundError(f"{directory}: cannot reopen the graph it was partitioned from ({spec}: no such "
                                "file); give the graph explicitly")
    return spec


# ------------------------------------------------------------------------------------------- partition
def run_partition(graph, directory, *, spec=None, cell_sizes=None, method=None, seed=0):
    """Partition ``graph`` and write ``directory``'s first artefacts: ``partition/`` and the manifest.

    Parameters
    ----------
    graph : RoadGraph
    directory : str or path-like
        New, empty, or an overlay directory (its partition is replaced; an ``overlay/`` already there is
        kept and refused by queries unless the new partition is the same).
    spec : str, optional
        What reopens the graph (a shipped name or a path, made absolute); default: the graph's name if
        it is a shipped dataset, else its recorded source.
    cell_sizes, method, seed
        See :meth:`gpuroute.Partition.build`.

    Returns
    -------
    dict
        ``directory``, ``graph`` (name, spec, nodes, arcs), ``method``, ``seed``, ``cell_sizes``,
        ``n_cells``, ``boundary_arcs`` (per level), ``seconds`` (partitioning), ``save_seconds``.

    Raises
    ------
    FileExistsError
        See :func:`check_replaceable` (checked before any work).
    ValueError, ImportError
        See :meth:`gpuroute.Partition.build`.
    """
    directory = check_replaceable(directory)
    old = None
    if os.path.isfile(os.path.join(directory, MANIFEST)):
        old = read_manifest(directory)
    os.makedirs(directory, exist_ok=True)
    pdir = os.path.join(directory, PARTITION_DIR)
    res = partition.run(partition.PartitionConfig(graph, output=pdir, cell_sizes=cell_sizes, method=method,
                                                  seed=seed))
    part, seconds = res.partition, res.seconds
    t0 = time.perf_counter()
    pman = _read_json(os.path.join(pdir, PARTITION_MANIFEST), "partition manifest")
    boundary = [int(x) for x in part.meta.get("boundary_arcs", part.boundary_arcs(graph))]
    summary = {
        "directory": directory,
        "graph": {"name": graph.name, "spec": _spec_of(spec, graph), "nodes": int(graph.n_nodes),
                  "arcs": int(graph.n_arcs), "fingerprint": graph.fingerprint(),
                  "topology_fingerprint": part.fingerprint},
        "method": part.method, "seed": int(seed), "cell_sizes": list(part.cell_sizes),
        "n_cells": list(part.n_cells), "boundary_arcs": boundary, "seconds": seconds,
    }
    manifest = {
        "format": FORMAT, "version": FORMAT_VERSION, "graph": summary["graph"],
        "partition": {"directory": PARTITION_DIR, "cells_sha256": _cells_sha256(pman, CELLS_FILE),
                      **{k: summary[k] for k in ("method", "seed", "cell_sizes", "n_cells", "boundary_arcs",
                                                 "seconds")}, "created": store.manifest.now()},
        # the last customization stays recorded: check_overlay compares it with the new partition
        "customization": old.get("customization") if isinstance(old, dict) else None,
    }
    _write_manifest(directory, manifest)
    summary["save_seconds"] = time.perf_counter() - t0 + res.save_seconds
    return summary


# ------------------------------------------------------------------------------------------- customize
def run_customize(directory, metric, *, graph=None, spec=None, traffic=None, device="auto"):
    """Customize the overlay of ``directory`` for ``metric`` (then apply ``traffic``) and save it as
    ``directory/overlay`` (atomically: on any error the previous customization stays).

    Parameters
    ----------
    directory : str or path-like
        An overlay directory (:func:`run_partition`).
    metric : str or Profile
        ``"distance"``, ``"time"``, ``"time-uturn"``, a :class:`Profile` or a profile JSON path
        (:func:`resolve_metric_spec`).
    graph : RoadGraph, optional
        Default: reopened from the manifest (for ``"time"`` on ``ny``, ``ny-time``: the graph that
        carries the metric's weight, :func:`gpuroute.datasets.for_weight`).
    spec : str, optional
        What reopens ``graph`` for queries (a shipped name or a path, made absolute); default: the spec
        opened, or the graph's name if it is a shipped dataset, else its recorded source.
    traffic : str or path-like, optional
        A CSV of ``arc_id,cost`` rows (:func:`read_traffic`), applied with :meth:`gpuroute.Overlay.update`.
    device : {"auto", "cpu", "gpu"}
        See :meth:`gpuroute.Overlay.customize`.

    Returns
    -------
    dict
        ``directory``, ``graph`` (name, nodes, arcs), ``metric`` (name, unit, spec), ``n_cells``,
        ``seconds`` and ``level_seconds`` (customization), ``traffic`` (None, or file, rows, arcs,
        ``cells`` re-customized per level, ``seconds``, ``level_seconds``), ``build_seconds``
        (topology), ``save_seconds``, ``partition_sha256``.

    Raises
    ------
    StageError, FileNotFoundError
        Not an overlay directory, or its graph cannot be reopened.
    ParseError
        A bad traffic row (file and line named); nothing is written.
    ValueError
        The partition in ``directory`` belongs to another graph; an invalid metric.
    FileExistsError
        ``directory/overlay`` holds something that is not a saved overlay.
    """
    from .. import datasets
    from ..opener import open_graph

    directory = os.path.abspath(os.fspath(directory))
    man = read_manifest(directory)
    met = resolve_metric_spec(metric)
    if isinstance(met, str):
        spec_text = met
    elif isinstance(metric, (str, os.PathLike)):  # a profile file
        spec_text = os.path.abspath(os.fspath(metric))
    else:
        spec_text = None
    if traffic is not None:
        customize.read_traffic(traffic)  # syntax first: fail before the (slower) graph and customization
    odir = os.path.join(directory, OVERLAY_DIR)
    if os.path.lexists(odir):
        om = _read_json(os.path.join(odir, OVERLAY_MANIFEST), "overlay manifest") if os.path.isdir(odir) else None
        if not isinstance(om, dict) or om.get("format") != OVERLAY_FORMAT:
            raise FileExistsError(f"{odir}: exists and is not a saved overlay; not replacing it")
    if graph is None:
        spec = datasets.for_weight(graph_spec(directory), metric_weight(met))
        graph = open_graph(spec)
    pdir = os.path.join(directory, PARTITION_DIR)
    cu = customize.run(customize.CustomizeConfig(graph, pdir, metric=met, traffic=traffic, device=device,
                                                 output=odir))
    ov, info, upd, build_s = cu.overlay, cu.info, cu.traffic, cu.build_seconds
    pman = _read_json(os.path.join(pdir, PARTITION_MANIFEST), "partition manifest")
    psha = _cells_sha256(pman, CELLS_FILE)
    t0 = time.perf_counter()
    om = _read_json(os.path.join(odir, OVERLAY_MANIFEST), "overlay manifest")
    unit = unit_of(graph, ov.metric)
    name = getattr(ov.metric, "name", None)
    record = {
        "directory": OVERLAY_DIR, "metric": name, "metric_spec": spec_text,
        "profile": met.to_dict() if isinstance(met, Profile) else None, "unit": unit.to_json(),
        "metric_fingerprint": (om.get("metric") or {}).get("fingerprint"),
        "graph": {"name": graph.name, "spec": _spec_of(spec, graph),
                  "fingerprint": graph.fingerprint()},
        "partition_sha256": psha, "seconds": info["seconds"], "level_seconds": info["level_seconds"],
        "traffic": upd, "created": store.manifest.now(),
    }
    man["customization"] = record
    _write_manifest(directory, man)
    save_s = time.perf_counter() - t0 + cu.save_seconds
    return {"directory": directory, "graph": {"name": graph.name, "nodes": int(graph.n_nodes),
                                              "arcs": int(graph.n_arcs)},
            "metric": {"name": name, "unit": unit.symbol, "spec": spec_text}, "n_cells": list(ov.n_cells),
            "seconds": info["seconds"], "level_seconds": list(info["level_seconds"]), "traffic": upd,
            "build_seconds": build_s, "save_seconds": save_s, "partition_sha256": psha}


# ------------------------------------------------------------------------------------------- queries
def check_overlay(directory):
    """What a query on ``directory`` needs, after checking that its customization was made from its
    partition (the cells' SHA-256 recorded by ``overlay/`` and ``partition/``).

    Returns
    -------
    dict
        ``overlay`` (the ``overlay/`` path), ``graph_spec`` (what reopens the customized graph, or None),
        ``metric`` (name), ``unit`` (:class:`~gpuroute.Unit`), ``partition_sha256``.

    Raises
    ------
    FileNotFoundError
        No such directory.
    StageError
        Not an overlay directory, not customized yet, or customized from another partition.
    """
    directory = os.fspath(directory)
    man = read_manifest(directory)
    odir = os.path.join(directory, OVERLAY_DIR)
    om = _read_json(os.path.join(odir, OVERLAY_MANIFEST), "overlay manifest") if os.path.isdir(odir) else None
    if om is None:
        raise StageError(f"{directory}: not customized yet (run gpuroute customize {directory} --metric "
                         f"{'|'.join(NAMED_METRICS)}|PROFILE)")
    if not isinstance(om, dict) or om.get("format") != OVERLAY_FORMAT:
        raise StageError(f"{odir}: not a saved overlay")
    pman = _read_json(os.path.join(directory, PARTITION_DIR, PARTITION_MANIFEST), "partition manifest")
    psha = _cells_sha256(pman, CELLS_FILE) if isinstance(pman, dict) and pman.get("format") == PARTITION_FORMAT \
        else None
    if psha is None:
        raise StageError(f"{directory}: no saved partition in {os.path.join(directory, PARTITION_DIR)} (run gpuroute "
                         f"partition GRAPH -o {directory})")
    osha = _cells_sha256(om, "cells")
    if osha != psha:
        raise StageError(f"{odir}: customized from another partition (cells sha256 {str(osha)[:16]}..., the "
                         f"partition in {directory} has {psha[:16]}...); run gpuroute customize {directory} again")
    rec = man.get("customization") if isinstance(man.get("customization"), dict) else {}
    same = rec.get("metric_fingerprint") == (om.get("metric") or {}).get("fingerprint")
    metric = (om.get("metric") or {}).get("name")
    unit = Unit.from_json(rec["unit"]) if same and rec.get("unit") else parse_unit(None)
    spec = (rec.get("graph") or {}).get("spec") if same else None
    if not (isinstance(spec, str) and (not os.path.isabs(spec) or os.path.exists(spec))):
        spec = _overlay_graph_spec(om)
    return {"overlay": odir, "graph_spec": spec, "metric": metric, "unit": unit, "partition_sha256": psha}


def _overlay_graph_spec(om):
    from .. import datasets

    g = om.get("graph") if isinstance(om.get("graph"), dict) else {}
    name, source = g.get("name"), g.get("source")
    if isinstance(name, str) and name in datasets.names():
        return name
    if isinstance(source, str) and os.path.exists(source):
        return source
    return None


def open_overlay(directory, graph=None):
    """The customized overlay of ``directory`` (:func:`check_overlay`, then :meth:`gpuroute.Overlay.load`).

    Parameters
    ----------
    directory : str or path-like
    graph : RoadGraph, optional
        Default: reopened from the record of the customization.

    Returns
    -------
    (Overlay, dict)
        The overlay and :func:`check_overlay`'s answer.

    Raises
    ------
    FileNotFoundError, StageError
        See :func:`check_overlay`; the graph cannot be reopened.
    ValueError
        ``graph`` is another graph than the one customized, or a file was changed (see
        :meth:`gpuroute.Overlay.load`).
    """
    info = check_overlay(directory)
    if graph is None:
        if info["graph_spec"] is None:
            raise FileNotFoundError(f"{directory}: cannot reopen the graph the overlay was customized for; give "
                                    "the graph explicitly")
        from ..opener import open_graph

        graph = open_graph(info["graph_spec"])
    return Overlay.load(info["overlay"], graph=graph), info


# ------------------------------------------------------------------------------------------- save
def _check_save_target(directory):
    """Refuse to replace anything but an overlay directory, a saved overlay of the older single-directory
    layout (``Overlay.save`` before the two were one), or a new or empty directory."""
    store.check_replaceable(directory, (FORMAT, OVERLAY_FORMAT), "an overlay directory")


def save_overlay(overlay, directory, *, spec=None):
    """Write a customized :class:`~gpuroute.Overlay` as an overlay directory: the layout ``gpuroute
    partition`` and ``gpuroute customize`` write (``manifest.json``, ``partition/``, ``overlay/``), so
    that :meth:`gpuroute.Overlay.load`, :func:`open_overlay`, ``gpuroute customize DIR`` and ``gpuroute
    route --overlay DIR`` read it. The whole directory is written into a temporary sibling and renamed
    into place.

    Parameters
    ----------
    overlay : Overlay
        Customized.
    directory : str or path-like
        New, empty, an overlay directory, or a saved overlay of the older single-directory layout
        (replaced); anything else is refused.
    spec : str, optional
        What reopens the graph (a shipped name or a path, made absolute); default: the graph's name if it
        is a shipped dataset, else its recorded source.

    Returns
    -------
    str
        The absolute path.

    Raises
    ------
    RuntimeError
        The overlay is not customized.
    FileExistsError
        ``directory`` holds something else (checked before anything is written).
    """
    directory = os.path.abspath(os.fspath(directory)).rstrip(os.sep)
    overlay._need_state()
    _check_save_target(directory)
    graph, part = overlay.graph, overlay.partition
    met = overlay.metric
    gsum = {"name": graph.name, "spec": _spec_of(spec, graph), "nodes": int(graph.n_nodes),
            "arcs": int(graph.n_arcs), "fingerprint": graph.fingerprint(), "topology_fingerprint": part.fingerprint}
    boundary = part.meta.get("boundary_arcs") if isinstance(part.meta, dict) else None
    if boundary is None:
        boundary = part.boundary_arcs(graph)
    with store.atomic_directory(directory) as tmp:
        pdir = os.path.join(tmp, PARTITION_DIR)
        part.save(pdir)
        odir = os.path.join(tmp, OVERLAY_DIR)
        overlay._save_files(odir)
        pman = _read_json(os.path.join(pdir, PARTITION_MANIFEST), "partition manifest")
        om = _read_json(os.path.join(odir, OVERLAY_MANIFEST), "overlay manifest")
        psha = _cells_sha256(pman, CELLS_FILE)
        name = getattr(met, "name", None)
        manifest = {
            "format": FORMAT, "version": FORMAT_VERSION, "graph": gsum,
            "partition": {"directory": PARTITION_DIR, "cells_sha256": psha, "method": part.method,
                          "seed": (part.meta or {}).get("seed"), "cell_sizes": list(part.cell_sizes),
                          "n_cells": [int(x) for x in part.n_cells], "boundary_arcs": [int(x) for x in boundary],
                          "seconds": (part.meta or {}).get("seconds"), "created": store.manifest.now()},
            "customization": {
                "directory": OVERLAY_DIR, "metric": name,
                "metric_spec": name if name in NAMED_METRICS else None, "profile": None,
                "unit": unit_of(graph, met).to_json(),
                "metric_fingerprint": (om.get("metric") or {}).get("fingerprint"),
                "graph": {"name": graph.name, "spec": gsum["spec"], "fingerprint": gsum["fingerprint"]},
                "partition_sha256": psha, "seconds": None, "level_seconds": [], "traffic": None,
                "created": store.manifest.now(), "saved_by": "Overlay.save"},
        }
        store.write_manifest(tmp, manifest, what="overlay directory manifest")
    return directory
