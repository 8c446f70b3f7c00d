"""Dataset directories, the opening side: the :class:`Dataset` the engine reads, every part checked
against the manifest, and the traffic a served engine saves there. The build side -- every stage run
once into the directory (``gpuroute build``) -- is :mod:`gpuroute.pipeline.build`;
:meth:`gpuroute.engine.Engine.open` loads the directory without building anything and ``gpuroute serve
DIR`` serves it.

Layout::

    DIR/
        manifest.json   format "gpuroute-dataset": version, the source and profile it was built from,
                        the metric, and per part its directory, what it is and its fingerprints
        graph/          the imported graph (:func:`gpuroute.save_graph`: weights, arc attributes, street
                        names, OSM node ids, turn restrictions)
        ch/             the contraction hierarchy for the routing weight (:meth:`ContractionHierarchy.save`);
                        absent where the overlay answers every service (see "Versions" below)
        partition/      the nested partition (:meth:`gpuroute.Partition.save`)
        overlay/        the multi-level overlay customized for the routing weight (:meth:`gpuroute.Overlay.save`)
        traffic.npz     the current traffic, when the engine serving the directory was customized since it
                        was built (:class:`TrafficStore`; absent: the built metric)

The routing weight is the graph's ``travel_time`` when it has one (an OSM extract, ``ny-time``), else
its first weight (``distance`` of a DIMACS ``-d`` graph such as ``ny``; see
:func:`gpuroute.pipeline.customize.routing_weight`), or the one asked for. The hierarchy and the
overlay share it with no turn penalties (for ``travel_time`` the overlay's metric ``"time"``, not
``"time-uturn"``; for another weight a metric of that weight's costs, named after it), so that before
any traffic update a route over the overlay and one over the hierarchy cost the same wherever no turn
restriction binds. :mod:`gpuroute.pipeline.build` writes the whole directory into a temporary sibling
and renames it into place: a failing stage leaves nothing half-built, and a directory that is not a
dataset is never replaced.

Saved traffic. An engine opened from a dataset directory (:func:`load_dataset`, ``Engine.open(DIR)``,
``gpuroute serve DIR``) saves its overlay's metric after every successful customization
(``POST /customize``: traffic updates or a named metric) to ``DIR/traffic.npz``, replacing the previous
one atomically (:func:`gpuroute.store.atomic_file`: temporary sibling, ``fsync``, rename); the next
:func:`load_dataset` customizes the overlay with it again, so a restart keeps the traffic. The file is
an uncompressed NumPy ``.npz`` archive (``allow_pickle=False``):

* ``header``: uint8, UTF-8 JSON: ``format`` ``"gpuroute-traffic"``, ``version`` 3 (version 1 files,
  without ``arc_duration``, and version 2 files are read too), ``dataset`` (the
  build it belongs to: ``graph_fingerprint``, ``partition_fingerprint``, ``turns_fingerprint``,
  ``n_arcs``, ``n_turns``), ``metric`` (``name``, ``units``), ``generation`` (customizations saved since
  the build, restarts included), ``updated`` (UTC, ISO 8601), ``arrays`` (per array: ``dtype``,
  ``shape``; versions 1 and 2 also a ``sha256`` of its bytes, checked on load), ``gpuroute_version``.
  Version 3 relies on the CRC-32 the ZIP archive keeps of every member (``header`` included), checked as
  each member is read: a damaged byte is refused as in versions 1 and 2, without hashing every array
  twice on the ``POST /customize`` path;
* ``arc_cost``: int32 (m,), the metric's arc costs in its unit (``units``);
* ``turn_penalty``: int32 (4,), its penalty per turn type (straight, left, right, U-turn);
* ``turn_cost``: int32 (T,), its per-turn costs (only for a metric that has them: a Lua profile's);
* ``arc_duration``: int32 (m,), every arc's travel time in deciseconds, only where speed updates on a
  metric that is not a time (a Lua profile's weight, e.g. ``routability``) made them differ from the
  graph's ``travel_time`` (the overlay state's ``arc_duration``; routes report these durations).

Those are the whole :class:`gpuroute.crp.Metric` (and its travel times): the turn costs are decoded from them and the cliques
customized from those, so the restored overlay is the saved one exactly. A file that cannot be read,
is truncated, was damaged (a CRC-32 or, in versions 1 and 2, a SHA-256 differs), holds an invalid metric or was saved for another build (graph,
partition or turns differ) is refused: a warning naming the file and the reason is logged (logger
``gpuroute.engine.dataset``), the dataset loads with its built metric, and the next customization
replaces the file. Delete the file (``gpuroute customize DIR --reset``, :func:`drop_traffic`) to start
from the built metric again; ``gpuroute build`` replacing the directory drops it too. A directory the
process cannot write to is served with in-memory traffic only (as before this file existed).

Manifests written since the store (:mod:`gpuroute.store`) carry its ``integrity`` entry, checked on load;
directories built before open without it.

Versions. A manifest's ``version`` is the oldest format that describes the directory, so that a gpuroute as
old as that reads it: **1** -- every part above; **2** -- the ``ch`` part may be absent: a graph with per-turn
costs (an OSM extract read with a Lua profile such as OSRM's car.lua) is served by its overlay alone (routes,
tables, trips, isochrones: :func:`gpuroute.engine.algorithms.table_search` takes the hierarchy only for a
graph without turn costs), so ``gpuroute build`` neither contracts nor stores it (issue 20: it was 22 of the
25 MB of a Monaco dataset, 1.2 s of its build). A dataset with a hierarchy is still written as version 1.
:attr:`gpuroute.engine.Engine.ch` contracts a missing hierarchy in memory on first use (a caller that
asks for it -- ``Engine(e.graph, e.ch)`` -- gets the one the build would have stored). This gpuroute reads
:data:`FORMAT_READS`; a newer version is refused, naming it.

Public API
----------
load_dataset(directory)                 the parts of a dataset directory, every fingerprint checked
is_dataset(path)                        whether ``path`` is a dataset directory
read_manifest(directory)                its manifest, format and version checked
TrafficStore                            the saved traffic of one loaded dataset directory
traffic_store(overlay)                  the TrafficStore of an overlay loaded by load_dataset (or None)
drop_traffic(directory)                 delete the saved traffic (the next load uses the built metric)
"""
from __future__ import annotations

import json
import logging
import os
import time
import weakref
import zipfile
from dataclasses import dataclass, field

import numpy as np

from .. import store

__all__ = ["FORMAT", "FORMAT_VERSION", "FORMAT_READS", "OPTIONAL_PARTS", "format_version", "MANIFEST", "PARTS", "DatasetError", "Dataset", "load_dataset", "is_dataset",
           "read_manifest", "TRAFFIC", "TRAFFIC_FORMAT", "TRAFFIC_VERSION", "TrafficError", "TrafficSaveError",
           "TrafficStore", "traffic_store", "drop_traffic"]

log = logging.getLogger(__name__)

FORMAT = "gpuroute-dataset"
#: The newest format version this gpuroute writes (see "Versions" in the module docstring).
FORMAT_VERSION = 2
#: The versions it reads.
FORMAT_READS = (1, 2)
#: Parts a dataset of version 2 may lack (see "Versions").
OPTIONAL_PARTS = ("ch",)
MANIFEST = store.MANIFEST
#: The saved traffic in a dataset directory (see the module docstring and :class:`TrafficStore`).
TRAFFIC = "traffic.npz"
TRAFFIC_FORMAT = "gpuroute-traffic"
TRAFFIC_VERSION = 3
#: Traffic file versions this gpuroute reads (1: before ``arc_duration``, its durations are the graph's;
#: 1 and 2: a SHA-256 per array in the header; 3: the archive members' CRC-32 only).
TRAFFIC_READS = (1, 2, 3)
#: The arrays of a traffic file besides its ``header`` (``turn_cost`` only for a metric that has them,
#: ``arc_duration`` only where speed updates changed travel times apart from the costs; version 2).
TRAFFIC_ARRAYS = ("arc_cost", "turn_penalty", "turn_cost", "arc_duration")
# ``arc_cost`` is int32, or int64 where live traffic closed arcs (their cost gpuroute.crp.metric.CLOSED; a
# gpuroute that predates closures refuses such a file -- the cost is out of its range -- and starts from the
# built metric rather than reopen the roads).

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


def format_version(parts):
    """The version a manifest with these ``parts`` (names) is written as: 1 with every part of
    :data:`PARTS`, 2 without an optional one (see "Versions" in the module docstring)."""
    return 1 if set(PARTS) <= set(parts) else FORMAT_VERSION


@dataclass
class Dataset:
    """The loaded parts of a dataset directory.

    Attributes
    ----------
    directory : str
        Absolute path.
    graph : RoadGraph
    ch : ContractionHierarchy or None
        For the routing weight (``ch.weight``, the manifest's ``weight``); None where the directory has none
        (version 2: the overlay answers every service).
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

    @property
    def weight(self):
        """The routing weight (the manifest's ``weight``; the hierarchy's in a manifest without one)."""
        w = self.manifest.get("weight")
        if isinstance(w, str):
            return w
        return None if self.ch is None else self.ch.weight


def _read_json(path):
    try:
        return store.read_json(path)
    except ValueError as e:  # ParseError naming the file (and line)
        raise DatasetError(f"unreadable: {e}") from None


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
    if m.get("version") not in FORMAT_READS:
        raise DatasetError(f"{path}: format version {m.get('version')!r}, this gpuroute reads versions "
                           f"{', '.join(map(str, FORMAT_READS))}; run gpuroute build again")
    if store.INTEGRITY in m:  # datasets built before the store recorded it open without
        try:
            store.verify_integrity(m, path, remedy="run gpuroute build again")
        except ValueError as e:
            raise DatasetError(str(e)) from None
    return m


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
    from ..store import load_graph

    directory = os.path.abspath(os.fspath(directory))
    man = read_manifest(directory)
    parts = man.get("parts") if isinstance(man.get("parts"), dict) else {}
    optional = OPTIONAL_PARTS if man.get("version") >= 2 else ()
    for name in PARTS:
        if name in optional and name not in parts:
            continue
        sub = (parts.get(name) or {}).get("directory")
        if not isinstance(sub, str) or os.path.basename(sub) != sub or not os.path.isdir(os.path.join(directory, sub)):
            raise DatasetError(f"{directory}: part {name!r} is missing (run gpuroute build again)")
    secs = {}
    t0 = time.perf_counter()
    g = load_graph(os.path.join(directory, parts["graph"]["directory"]))
    if g.fingerprint() != parts["graph"].get("fingerprint"):
        raise DatasetError(f"{directory}: graph/ is not the graph the dataset was built from (fingerprint differs)")
    secs["graph"] = time.perf_counter() - t0
    ch = None
    if "ch" in parts:
        t0 = time.perf_counter()
        ch = ContractionHierarchy.load(os.path.join(directory, parts["ch"]["directory"]), graph=g)
        secs["ch"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    pcells = os.path.join(directory, parts["partition"]["directory"], "cells.npy")
    ocells = os.path.join(directory, parts["overlay"]["directory"], "cells.npy")
    if not (os.path.isfile(pcells) and os.path.isfile(ocells)) or store.sha256_file(pcells) != store.sha256_file(ocells):
        raise DatasetError(f"{directory}: overlay/ was not customized from partition/ (cells differ)")
    ov = Overlay.load(os.path.join(directory, parts["overlay"]["directory"]), graph=g)
    secs["overlay"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    saved = TrafficStore(directory, ov, parts["graph"]["fingerprint"])
    saved.restore(ov)  # the saved traffic, if any and valid (else a warning; the built metric stays)
    _STORES[ov] = saved
    secs["traffic"] = time.perf_counter() - t0
    return Dataset(directory, g, ch, ov, man, profile=str(man.get("profile") or "car-basic"), seconds=secs,
                   traffic=saved)


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
    return store.sha256_arrays(a)


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
            another dtype or shape, a member whose CRC-32 differs from the archive's (damaged), or (versions 1
            and 2) whose SHA-256 differs from the header's, or an invalid metric (e.g. an arc cost of 0).
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
                    if header.get("version") < 3 and _array_sha(a) != spec.get("sha256"):
                        raise TrafficError(f"{path}: array {name!r} was changed or damaged after saving (its "
                                           "SHA-256 differs from the header's)")
                    arrays[name] = a
        except TrafficError:
            raise
        except zipfile.BadZipFile as e:
            if "CRC" in str(e):  # zipfile checks each member's CRC-32 as it is read to its end
                raise TrafficError(f"{path}: damaged after saving ({' '.join(str(e).split())}: a member's bytes "
                                   "differ from the CRC-32 the archive recorded)") from None
            raise TrafficError(f"{path}: unreadable or truncated ({' '.join(str(e).split()) or type(e).__name__})") \
                from None
        except (OSError, ValueError, EOFError, KeyError) as e:
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
        atomically (:func:`gpuroute.store.atomic_file`: a crash leaves the previous file or, where there
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

        t0 = time.perf_counter()
        st = overlay._need_state()  # one state: its metric and its travel times
        met = st.metric
        # int32, or int64 where an arc is closed (its cost CLOSED, the named INF: Metric reads it back)
        arrays = {"arc_cost": np.ascontiguousarray(met.arc_cost, dtype=np.int64 if met.closed is not None else np.int32),
                  "turn_penalty": np.ascontiguousarray(met.turn_penalty, dtype=np.int32)}
        if met.turn_cost is not None:
            arrays["turn_cost"] = np.ascontiguousarray(met.turn_cost, dtype=np.int32)
        dur = st.arc_duration  # live travel times apart from the costs (speed updates)
        if dur is not None:
            arrays["arc_duration"] = np.ascontiguousarray(dur, dtype=np.int32)
        gen = self.generation + 1
        now = store.manifest.now()
        header = {"format": TRAFFIC_FORMAT, "version": TRAFFIC_VERSION, "dataset": self.identity,
                  "metric": {"name": str(met.name), "units": str(met.units)}, "generation": gen, "updated": now,
                  # no hash of its own: the archive's CRC-32 of each member (written by np.savez as it
                  # streams the bytes) is checked by zipfile when the member is read back
                  "arrays": {k: {"dtype": str(a.dtype), "shape": list(a.shape)} for k, a in arrays.items()},
                  "gpuroute_version": __version__}
        raw = np.frombuffer(json.dumps(header, sort_keys=True).encode("utf-8"), dtype=np.uint8)
        try:
            with store.atomic_file(self.path, "wb") as f:
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
    directory = os.path.abspath(os.fspath(directory))
    read_manifest(directory)
    try:
        os.unlink(os.path.join(directory, TRAFFIC))
    except FileNotFoundError:
        return False
    store.fsync_directory(directory)
    return True
