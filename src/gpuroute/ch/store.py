"""Save and load a contraction hierarchy as a directory of ``.npy`` arrays plus ``manifest.json`` (OSRM
style: the files carry the format version and the fingerprints of the graph and weight the hierarchy was
built from, and are written atomically).

Layout (format ``"gpuroute-ch"``, version :data:`gpuroute.ch.hierarchy.FORMAT_VERSION`)::

    <directory>/
        manifest.json       format, version, n_nodes, method, weight, params, stats, graph_fingerprint,
                            weight_fingerprint, graph (name and source, to reopen it), files (dtype,
                            shape, sha256 of each), created, gpuroute_version, integrity
        rank.npy ...        one file per array of Hierarchy.ARRAYS (see :mod:`gpuroute.ch.hierarchy`); the
                            int64 weights and core distances as int32 where every value fits
                            (:data:`NARROWED`; INF in core distances as :data:`CORE_INF32`), widened on
                            load; a gpuroute before that refuses such a file, naming its dtype

Integrity, as for every saved artefact (:mod:`gpuroute.store`, which writes and checks it): ``manifest["integrity"]`` holds the SHA-256 of
every other manifest field and ``files`` the SHA-256 of every array file, so the hashes cover every byte
of the saved hierarchy. :func:`load_hierarchy` recomputes all of them before it builds anything and
raises :class:`~gpuroute.graph.errors.ParseError` naming what differs (a missing, added or changed file,
an edited manifest field). They detect accidental or careless edits; they are not a signature.

Permissions follow the umask (directory ``0o777 & ~umask``, files ``0o666 & ~umask``); see
:mod:`gpuroute.store.atomic`.

Public API
----------
save_hierarchy(ch, directory)            write (atomic; replaces only a saved hierarchy)
load_hierarchy(directory, graph=None)    read and verify; with ``graph``, check it is the one built from
open_hierarchy(directory, graph=None)    load together with its graph (reopened from the manifest)
read_manifest(directory)                 the checked manifest (format, version, integrity)
graph_spec(directory)                    the dataset name or source path that reopens its graph
check_replaceable(directory)             raise unless ``directory`` may be written by save_hierarchy
"""
from __future__ import annotations

import os

import numpy as np

from .. import store
from ..graph.constants import INDEX_DTYPE, INF
from ..graph.errors import ParseError
from ..store.graph import FORMAT as GRAPH_FORMAT
from .hierarchy import FORMAT_VERSION, Hierarchy

__all__ = ["save_hierarchy", "load_hierarchy", "open_hierarchy", "read_manifest", "graph_spec", "check_replaceable",
           "FORMAT", "MANIFEST", "FORMAT_VERSION"]

FORMAT = "gpuroute-ch"
MANIFEST = store.MANIFEST
INTEGRITY = store.INTEGRITY
#: Other formats, named in messages.
_OTHER = {GRAPH_FORMAT: "a saved graph"}

#: dtype of every array (the arc arrays' lengths come from the CSR offsets, the core's from ``core``).
DTYPES = {name: np.dtype(np.int64) if name in ("core_dist", "up_weight", "down_weight") else np.dtype(INDEX_DTYPE)
          for name in Hierarchy.ARRAYS}
#: The int64 arrays saved as int32 where every value fits (:func:`gpuroute.store.narrowest`; issue 20: no int64
#: file for int32 values) and widened back to int64 on load (:func:`narrow_array`, :func:`widen_array`).
NARROWED = ("core_dist", "up_weight", "down_weight")
#: An int32 ``core_dist`` file holds INF (an unreachable core pair) as this value; a core with a finite
#: distance this large is saved as int64.
CORE_INF32 = int(np.iinfo(np.int32).max)


def narrow_array(name, a):
    """The array ``name`` of a hierarchy as saved: :data:`NARROWED` arrays in int32 where every value fits
    (``core_dist``'s INF as :data:`CORE_INF32`), the others as they are."""
    if name not in NARROWED:
        return a
    if name != "core_dist":
        return store.narrowest(a, ("int32",))
    a = np.asarray(a)
    finite = a[a != INF]
    if finite.size and (int(finite.min()) < int(np.iinfo(np.int32).min) or int(finite.max()) >= CORE_INF32):
        return a
    return np.where(a == INF, CORE_INF32, a).astype(np.int32)


def widen_array(name, a):
    """The inverse of :func:`narrow_array` for an array read back (one in its saved dtype is returned as is)."""
    if name not in NARROWED or a.dtype == DTYPES[name] or a.dtype.kind not in "iu" or \
            not np.can_cast(a.dtype, DTYPES[name]):
        return a
    w = a.astype(DTYPES[name])
    if name == "core_dist" and a.dtype == np.int32:
        w[a == CORE_INF32] = INF
    return w


def _file(name):
    return f"{name}.npy"


def _plain(value, what):
    """``value`` as plain JSON values; TypeError naming the hierarchy's ``what`` when JSON cannot hold it."""
    return store.plain(value, f"hierarchy's {what}")


def _graph_entry(graph):
    """``{"name", "source"}`` of the graph, so that the CLI can reopen it (a relative source path that
    exists is made absolute)."""
    if graph is None:
        return {"name": None, "source": None}
    source = graph.meta.get("source")
    if isinstance(source, (str, os.PathLike)):
        source = os.fspath(source)
        if os.path.exists(source):
            source = os.path.abspath(source)
    else:
        source = None
    return {"name": graph.name, "source": source}


def check_replaceable(directory):
    """Refuse to write over anything but a saved hierarchy (or an empty directory).

    Raises
    ------
    FileExistsError
        ``directory`` is a file or a link, or a non-empty directory that is not a saved hierarchy (a saved
        graph, or anything without a ``gpuroute-ch`` manifest): it is not replaced, so that no unrelated
        data is deleted.
    """
    return store.check_replaceable(directory, (FORMAT,), "a saved hierarchy", names=_OTHER)


def save_hierarchy(ch, directory):
    """Write a :class:`~gpuroute.ch.api.ContractionHierarchy` to ``directory`` atomically.

    Everything is written into a temporary sibling directory, then renamed into place
    (:func:`gpuroute.store.atomic_directory`): an error at any point leaves ``directory`` as it was
    and no temporary behind. An existing saved hierarchy there is replaced; anything else is refused.

    Parameters
    ----------
    ch : ContractionHierarchy
        Its arrays (``ch.h``), ``method``, ``weight``, ``params``, ``stats`` (numpy values become JSON
        numbers and lists), fingerprints, and its graph's name and ``meta["source"]`` are saved.
    directory : str or path-like

    Returns
    -------
    str
        The absolute path written.

    Raises
    ------
    FileExistsError
        ``directory`` is a file, or a non-empty directory that is not a saved hierarchy.
    TypeError
        ``params`` or ``stats`` hold something JSON cannot (e.g. tuple keys).
    OSError
        Writing failed (nothing is left half-written).
    """
    from .. import __version__

    directory = check_replaceable(directory)
    h = ch.h
    params = _plain(ch.params, "params")
    stats = _plain(ch.stats, "stats")
    with store.atomic_directory(directory) as tmp:
        files = store.write_arrays(tmp, {_file(name): narrow_array(name, a) for name, a in h.arrays().items()})
        manifest = {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "n_nodes": int(h.n_nodes),
            "method": ch.method,
            "weight": ch.weight,
            "params": params,
            "stats": stats,
            "graph_fingerprint": ch.graph_fingerprint,
            "weight_fingerprint": ch.weight_fingerprint,
            "graph": _graph_entry(ch.graph),
            "files": files,
            "created": store.manifest.now(),
            "gpuroute_version": __version__,
        }
        store.write_manifest(tmp, manifest, what="hierarchy's manifest")
    return directory


def read_manifest(directory):
    """Read ``directory/manifest.json`` and check its format, version, required entries and the hashes of
    its fields (not the array files: :func:`load_hierarchy` checks those).

    Returns
    -------
    dict

    Raises
    ------
    FileNotFoundError
        ``directory`` does not exist.
    ParseError
        Naming the manifest: missing, not JSON (with its line), not a saved hierarchy (a saved graph is
        named as such), another format version, a required entry missing, a field edited after saving.
    """
    manifest = store.read_manifest(directory, format=FORMAT, versions=(FORMAT_VERSION,),
                                   required=("n_nodes", "weight", "graph_fingerprint", "weight_fingerprint", "files"),
                                   what="saved contraction hierarchy",
                                   names={GRAPH_FORMAT: "a saved graph, not a contraction hierarchy"},
                                   remedy="rebuild the hierarchy (gpuroute contract)")
    mpath = os.path.join(os.fspath(directory), MANIFEST)
    n = manifest["n_nodes"]
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ParseError(mpath, None, f"malformed 'n_nodes' entry {n!r}")
    return manifest


def _check_arrays(arrays, n, directory):
    """dtype and shape of every array against ``n`` (the arc arrays' lengths from the CSR offsets, the
    core distances' from ``core``); ParseError naming the array file."""
    def bad(name, msg):
        raise ParseError(os.path.join(directory, _file(name)), None, msg)

    for name, a in arrays.items():
        if a.dtype != DTYPES[name]:
            bad(name, f"dtype {a.dtype}, a hierarchy's {name} is {DTYPES[name]}")
    want = {"rank": (n,), "order": (n,), "level": (n,), "up_first_out": (n + 1,), "down_first_out": (n + 1,)}
    for name, shape in want.items():
        if arrays[name].shape != shape:
            bad(name, f"shape {arrays[name].shape}, expected {shape} for n_nodes={n}")
    core = arrays["core"]
    if core.ndim != 1:
        bad("core", f"shape {core.shape}, expected one dimension")
    c = core.size
    if arrays["core_dist"].shape != (c, c):
        bad("core_dist", f"shape {arrays['core_dist'].shape}, expected ({c}, {c}) for a core of {c} nodes")
    for side, cols in (("up", ("head", "weight", "mid", "arc")), ("down", ("tail", "weight", "mid", "arc"))):
        fo = arrays[f"{side}_first_out"]
        if fo[0] != 0 or np.any(np.diff(fo) < 0):
            bad(f"{side}_first_out", f"offsets must start at 0 and not decrease (first {int(fo[0])})")
        m = int(fo[-1])
        for col in cols:
            a = arrays[f"{side}_{col}"]
            if a.shape != (m,):
                bad(f"{side}_{col}", f"shape {a.shape}, expected ({m},): {side}_first_out ends at {m}")


def load_hierarchy(directory, graph=None):
    """Load a hierarchy written by :func:`save_hierarchy`.

    Every check runs before anything is returned (never a half-read hierarchy): the manifest's format,
    version and field hashes; the set of array files (none missing, none added); each file's SHA-256;
    each array's dtype and shape against ``n_nodes`` and the CSR offsets; with ``graph``, the graph's
    and the weight's fingerprints.

    Parameters
    ----------
    directory : str or path-like
    graph : RoadGraph, optional
        The graph the hierarchy was built from (needed for paths and predecessors).

    Returns
    -------
    ContractionHierarchy
        With ``graph`` attached (or None), ``weight``, ``method``, ``params``, ``stats`` and the saved
        fingerprints.

    Raises
    ------
    FileNotFoundError
        ``directory`` does not exist.
    ParseError
        Naming the manifest or the array file: see :func:`read_manifest`; a file missing, not listed,
        changed after saving (checksum), unreadable, or of the wrong dtype or shape.
    ValueError
        ``graph`` is not the graph (or does not carry the weight) the hierarchy was built from; the
        message names what differs and both fingerprints.
    """
    from .api import ContractionHierarchy, weight_fingerprint_of

    directory = os.fspath(directory)
    manifest = read_manifest(directory)
    mpath = os.path.join(directory, MANIFEST)
    files = manifest["files"]
    expected = {_file(k) for k in Hierarchy.ARRAYS}
    present = set(os.listdir(directory)) - {MANIFEST}
    def listed(names):
        return ", ".join(sorted(names)) + (" are" if len(names) > 1 else " is")

    if expected - set(files):
        raise ParseError(mpath, None, f"'files' does not list {', '.join(sorted(expected - set(files)))}")
    if set(files) - expected:
        raise ParseError(mpath, None, f"'files' lists {listed(set(files) - expected)} not an array of a hierarchy")
    if expected - present:
        raise ParseError(mpath, None, f"{listed(expected - present)} missing from {directory} (a truncated "
                                      "directory?)")
    if present - expected:
        raise ParseError(mpath, None, f"{listed(present - expected)} in {directory} but not listed under 'files': "
                                      "added after saving; remove it or rebuild the hierarchy")
    # hashes first: a damaged file is reported as changed, not as whatever np.load makes of it
    for fname in sorted(expected):
        store.check_file(directory, fname, manifest)
    arrays = {}
    for name in Hierarchy.ARRAYS:
        p = os.path.join(directory, _file(name))
        try:
            arrays[name] = np.load(p, allow_pickle=False)
        except (ValueError, OSError, EOFError) as e:
            raise ParseError(p, None, f"not a readable .npy array ({e})") from None
        arrays[name] = widen_array(name, arrays[name])  # saved narrowed (exact: every value fitted)
    n = manifest["n_nodes"]
    _check_arrays(arrays, n, directory)
    h = Hierarchy(**arrays)
    weight = manifest["weight"]
    if graph is not None:
        problems = []
        gfp = graph.fingerprint()
        if gfp != manifest["graph_fingerprint"]:
            problems.append(f"built from another graph (graph fingerprint {manifest['graph_fingerprint']}; "
                            f"the given graph {graph.name!r} has {gfp})")
        if weight not in graph.weights:
            problems.append(f"built for weight {weight!r}, which the given graph {graph.name!r} does not have "
                            f"(it has {', '.join(graph.weights)})")
        else:
            wfp = weight_fingerprint_of(graph, weight)
            if wfp != manifest["weight_fingerprint"]:
                problems.append(f"built for another weight {weight!r} (weight fingerprint "
                                f"{manifest['weight_fingerprint']}; the given graph's is {wfp})")
        if graph.n_nodes != n and not problems:
            problems.append(f"it has {n} nodes, the given graph {graph.n_nodes}")
        if problems:
            raise ValueError(f"{directory}: the hierarchy does not belong to this graph: {'; '.join(problems)}")
    return ContractionHierarchy(h, graph=graph, weight=weight, method=manifest.get("method"),
                                params=manifest.get("params"), stats=manifest.get("stats"),
                                graph_fingerprint=manifest["graph_fingerprint"],
                                weight_fingerprint=manifest["weight_fingerprint"])


def open_hierarchy(directory, graph=None):
    """Load a saved hierarchy together with its graph.

    Parameters
    ----------
    directory : str or path-like
    graph : RoadGraph, str or path-like, optional
        The graph, or what :func:`gpuroute.opener.open_graph` opens. Default: reopened from the manifest
        (a shipped dataset by its recorded name, else the recorded source file).

    Returns
    -------
    ContractionHierarchy
        With its graph, checked to be the one it was built from (:func:`load_hierarchy`).

    Raises
    ------
    FileNotFoundError
        The graph cannot be reopened (no recorded source, or the source is gone); the message says so.
    ParseError, ValueError
        See :func:`load_hierarchy`.
    """
    from ..opener import open_graph

    if graph is None:
        graph = graph_spec(directory)
    if not hasattr(graph, "fingerprint"):
        graph = open_graph(graph)
    return load_hierarchy(directory, graph=graph)


def graph_spec(directory):
    """What reopens the graph a saved hierarchy was built from: the shipped dataset's name, or the
    recorded source path.

    Raises
    ------
    FileNotFoundError
        Neither is usable (the message names the recorded name and source).
    ParseError
        See :func:`read_manifest`.
    """
    from .. import datasets

    manifest = read_manifest(directory)
    entry = manifest.get("graph") if isinstance(manifest.get("graph"), dict) else {}
    name, source = entry.get("name"), entry.get("source")
    if isinstance(name, str) and name in datasets.names():
        return name
    if isinstance(source, str) and os.path.exists(source):
        return source
    raise FileNotFoundError(f"{directory}: cannot reopen the graph the hierarchy was built from (name {name!r}, "
                            f"source {source!r}: "
                            + ("no such file" if source else "no source recorded") + "); give the graph explicitly")
