"""Save and load a RoadGraph as a directory of ``.npy`` arrays plus ``manifest.json`` (OSRM style: the
files carry a format version and the graph's fingerprint, and are written atomically).

Layout (version 2)::

    <directory>/
        manifest.json       format, version, name, units, coord_system, meta, fingerprint, files
                            (dtype, shape, sha256 of each), attributes, turns, integrity
        first_out.npy       int32 (n_nodes + 1,)
        head.npy            int32 (n_arcs,)
        weight-0.npy ...    int32 (n_arcs,), one per weight, in the graph's order (names and units
                            in the manifest's ``weights`` list)
        attr-0.npy ...      (n_arcs,), one per arc attribute, in the graph's order, in its own dtype
                            (names and units in the manifest's ``attributes`` list)
        coords.npy          float64 (n_nodes, 2)   (only if the graph has coordinates)
        node_ids.npy        int64 (n_nodes,)       (only if the graph has external ids)
        turns-in_arc.npy    int32 (k,)             (these three only if ``graph.turns`` is not None;
        turns-out_arc.npy   int32 (k,)              the restrictions' meta is in the manifest's
        turns-kind.npy      int8 (k,)               ``turns`` entry)
        turn_costs-*.npy    duration, weight int32 (T,); obstacle-node, -from_node int32, -type uint16,
                            -duration, -weight float32 (only if ``graph.turn_costs`` is not None; the
                            meta is in the manifest's ``turn_costs`` entry)

Units are stored as :meth:`Unit.to_json <gpuroute.graph.units.Unit.to_json>` dicts.

Integrity. ``manifest["integrity"]`` holds the SHA-256 of every other manifest field (its canonical
JSON: sorted keys, no spaces) and a ``content`` hash over those. The ``files`` field records the
SHA-256 of every array file, so the manifest's hashes cover every byte of the saved graph. By default
:func:`load_graph` recomputes all of them (reading each array file once) and raises
:class:`~gpuroute.graph.errors.ParseError` naming the manifest and what differs: an edited
``coords.npy``, reversed ``node_ids.npy``, a changed unit, name or ``coord_system``. The hashes
detect accidental or careless edits; they are not a signature (whoever edits the manifest can
recompute them).

Version 1 (``weights``, ``coords``, ``node_ids`` only; units as strings or Unit dicts; no
``integrity``) is still read: its fingerprint (CSR and weights) and any recorded file checksums are
checked, its other manifest fields cannot be.

Permissions follow the umask (directory ``0o777 & ~umask``, files ``0o666 & ~umask``), as for any
file a program creates with ``open``; see :mod:`gpuroute.store.atomic`. The manifest, hashes and array
files are written and checked by :mod:`gpuroute.store.manifest`, as for every saved artefact.
"""
from __future__ import annotations

import os
import re

from ..graph.errors import GraphError, ParseError
from ..graph.road_graph import RoadGraph
from ..graph.turn_costs import OBSTACLE_FIELDS, TurnCosts
from ..graph.turns import TurnRestrictions
from . import manifest as _m
from .atomic import atomic_directory
from .manifest import HASH_ALGORITHM, INTEGRITY, MANIFEST, manifest_integrity, verify_integrity

__all__ = ["save_graph", "load_graph", "read_manifest", "verify_manifest", "manifest_integrity", "FORMAT", "VERSION",
           "READABLE_VERSIONS", "MANIFEST", "INTEGRITY", "HASH_ALGORITHM", "TURN_FILES", "TURN_COST_FILES"]

FORMAT = "gpuroute-graph"
#: Version written by :func:`save_graph`.
VERSION = 2
#: Versions :func:`load_graph` reads.
READABLE_VERSIONS = (1, 2)
#: Array files of ``graph.turns``, by TurnRestrictions attribute.
TURN_FILES = {"in_arc": "turns-in_arc.npy", "out_arc": "turns-out_arc.npy", "kind": "turns-kind.npy"}
#: Array files of ``graph.turn_costs``: the per-turn costs, then the obstacle fields.
TURN_COST_FILES = {"duration": "turn_costs-duration.npy", "weight": "turn_costs-weight.npy",
                   **{f"obstacle_{k}": f"turn_costs-obstacle-{k}.npy" for k in OBSTACLE_FIELDS}}


def save_graph(graph, directory, *, checksums=True):
    """Write ``graph`` to ``directory`` atomically (a directory of ``.npy`` files + ``manifest.json``).

    Everything is written into a temporary sibling directory, which is then renamed into place (see
    :func:`gpuroute.store.atomic_directory`). If ``directory`` already holds a saved graph it is
    replaced: the old directory is first renamed aside, the new one renamed in, and only then is the
    old one deleted (if the second rename fails the old one is put back). An error at any point leaves
    ``directory`` as it was and no temporary directory behind. The directory gets mode
    ``0o777 & ~umask`` and its files ``0o666 & ~umask``.

    Parameters
    ----------
    graph : RoadGraph
        Its CSR arrays, weights (with units), arc attributes (with units), coordinates, node ids,
        turn restrictions (arrays and meta), turn costs (arrays, obstacles and meta), name, ``coord_system`` and ``meta`` are saved.
    directory : str or path-like
        Target directory; its parent is created if needed.
    checksums : bool
        Ignored since format version 2 (kept so that old calls work): the SHA-256 of every array file
        and of every manifest field is always recorded.

    Returns
    -------
    str
        The absolute path of the written directory.

    Raises
    ------
    FileExistsError
        ``directory`` exists and is a file, or a non-empty directory without a ``manifest.json`` (it
        is not replaced, so that no unrelated data is deleted).
    TypeError
        ``graph.meta`` (or the turns' meta) has keys JSON cannot hold (e.g. tuples).
    OSError
        Writing failed (nothing is left half-written).
    """
    del checksums  # always recorded since version 2
    directory = _m.check_replaceable(directory, (FORMAT,), "a saved gpuroute graph")
    from .. import __version__

    with atomic_directory(directory) as tmp:
        arrays = {"first_out.npy": graph.first_out, "head.npy": graph.head}
        weights = []
        for i, k in enumerate(graph.weights):
            fname = f"weight-{i}.npy"
            arrays[fname] = graph.weights[k]
            weights.append({"name": k, "unit": graph.units[k].to_json(), "file": fname})
        attributes = []
        for i, k in enumerate(getattr(graph, "arc_attrs", None) or {}):
            fname = f"attr-{i}.npy"
            arrays[fname] = graph.arc_attrs[k]
            attributes.append({"name": k, "unit": graph.attr_units[k].to_json(), "file": fname})
        if graph.coords is not None:
            arrays["coords.npy"] = graph.coords
        if graph.node_ids is not None:
            arrays["node_ids.npy"] = graph.node_ids
        turns = getattr(graph, "turns", None)
        turns_entry = None
        if turns is not None:
            for attr, fname in TURN_FILES.items():
                arrays[fname] = getattr(turns, attr)
            turns_entry = {"files": dict(TURN_FILES), "meta": turns.meta}
        tc = getattr(graph, "turn_costs", None)
        tc_entry = None
        if tc is not None:
            arrays[TURN_COST_FILES["duration"]] = tc.duration
            arrays[TURN_COST_FILES["weight"]] = tc.weight
            for k in OBSTACLE_FIELDS:
                arrays[TURN_COST_FILES[f"obstacle_{k}"]] = tc.obstacles[k]
            tc_entry = {"files": dict(TURN_COST_FILES), "meta": tc.meta}
        files = _m.write_arrays(tmp, arrays)
        manifest = {
            "format": FORMAT,
            "version": VERSION,
            "name": graph.name,
            "n_nodes": graph.n_nodes,
            "n_arcs": graph.n_arcs,
            "weights": weights,
            "attributes": attributes,
            "turns": turns_entry,
            "coord_system": graph.coord_system,
            "has_coords": graph.coords is not None,
            "has_node_ids": graph.node_ids is not None,
            "meta": graph.meta,
            "fingerprint": graph.fingerprint(),
            "files": files,
            "created": _m.now(),
            "gpuroute_version": __version__,
        }
        if tc_entry is not None:  # graphs without turn costs keep the manifest fields they always had
            manifest["turn_costs"] = tc_entry
        # hashed exactly as a reader gets the values back from the JSON text
        _m.write_manifest(tmp, manifest, what="graph's manifest")
    return directory


def read_manifest(directory):
    """Read and check ``directory/manifest.json`` (format, version, required entries; not the hashes,
    see :func:`verify_manifest`).

    Returns
    -------
    dict
        The manifest.

    Raises
    ------
    FileNotFoundError
        ``directory`` does not exist.
    ParseError
        Naming the manifest: it is missing, is not valid JSON (with its line), is not a gpuroute graph,
        has an unsupported version, or lacks a required entry.
    """
    m = _m.read_manifest(directory, format=FORMAT, versions=READABLE_VERSIONS,
                         required=("weights", "fingerprint", "files"), what="saved gpuroute graph",
                         remedy="save the graph again", integrity=False)
    if m["version"] >= 2 and INTEGRITY not in m:
        raise ParseError(os.path.join(os.fspath(directory), MANIFEST), None, f"no {INTEGRITY!r} entry")
    return m


def verify_manifest(manifest, mpath):
    """Check a version-2 manifest's fields against the hashes under ``integrity``.

    Parameters
    ----------
    manifest : dict
        As returned by :func:`read_manifest`.
    mpath : str
        The manifest's path (for the error message).

    Raises
    ------
    ParseError
        Naming ``mpath`` and the fields that were changed, added or removed after saving, or a
        malformed ``integrity`` entry.
    """
    verify_integrity(manifest, mpath, remedy="re-save the graph instead of editing it")


_BLAME = (
    (re.compile(r"^coords"), lambda m, man: "coords.npy"),
    (re.compile(r"^node_ids"), lambda m, man: "node_ids.npy"),
    (re.compile(r"^first_out|exceed the int32 id space"), lambda m, man: "first_out.npy"),
    (re.compile(r"^head of arc"), lambda m, man: "head.npy"),
    (re.compile(r"^weight '([^']*)'"), lambda m, man: _file_of(man.get("weights"), m.group(1))),
    (re.compile(r"^arc attribute '([^']*)'"), lambda m, man: _file_of(man.get("attributes"), m.group(1))),
    (re.compile(r"^turn restriction"), lambda m, man: TURN_FILES["in_arc"]),
    (re.compile(r"^turn costs"), lambda m, man: TURN_COST_FILES["duration"]),
)


def _file_of(entries, name):
    for e in entries or ():
        if isinstance(e, dict) and e.get("name") == name:
            return e.get("file")
    return None


def _blame(message, manifest):
    """The array file a RoadGraph/TurnRestrictions error message is about (None if unknown)."""
    for rx, f in _BLAME:
        m = rx.search(message)
        if m:
            return f(m, manifest)
    return None


def load_graph(directory, mmap=True, *, verify=True, check_files=False):
    """Load a graph written by :func:`save_graph` (format version 2, or version 1).

    Parameters
    ----------
    directory : str or path-like
    mmap : bool
        Memory-map the arrays (``np.load(mmap_mode="r")``) instead of reading them. ``head``, the
        weights, the arc attributes, ``coords``, ``node_ids`` and the turn arrays then stay file-backed
        and read-only (RoadGraph keeps their dtypes without copying). ``first_out`` is copied
        (RoadGraph validates it as int64) and ``tail`` is derived in memory, so about
        ``4 * (n_nodes + n_arcs)`` bytes are allocated either way.
    verify : bool
        Check the saved graph's integrity (default). Version 2: every manifest field against the hashes
        under ``integrity``, and every array file against its SHA-256 in ``files`` (each file is read
        once more; the page cache makes that cheap next to building the graph). Version 1: the
        fingerprint over the CSR arrays and weights, and any recorded file checksums.
    check_files : bool
        Check the array files' SHA-256 even when ``verify=False`` (with ``verify=True`` they are
        checked anyway).

    Returns
    -------
    RoadGraph
        With ``arc_attrs``, ``attr_units``, ``turns`` and ``turn_costs`` as saved (version 1: none).

    Raises
    ------
    FileNotFoundError
        ``directory`` does not exist.
    ParseError
        Naming the manifest: see :func:`read_manifest` and :func:`verify_manifest`; a listed file is
        missing or of the wrong dtype/shape; a file's checksum or the fingerprint differs. Naming the
        array file: it is not a readable ``.npy`` array, or its values do not form a valid graph (e.g.
        ``coords.npy`` with a longitude outside [-180, 180]; RoadGraph's GraphError is turned into
        this).
    """
    directory = os.fspath(directory)
    manifest = read_manifest(directory)
    mpath = os.path.join(directory, MANIFEST)
    version = manifest["version"]
    files = manifest["files"]
    if verify and version >= 2:
        verify_manifest(manifest, mpath)
    check_hashes = verify or check_files

    def load(fname):
        return _m.load_array(directory, fname, manifest, mmap=mmap,
                             check_hash=check_hashes and files.get(fname, {}).get("sha256") is not None)

    if check_hashes and version >= 2:
        for fname, rec in files.items():
            if rec.get("sha256") is None:
                raise ParseError(mpath, None, f"no sha256 recorded for {fname}")

    def entries(key):
        try:
            out = [(e["name"], e.get("unit", ""), e["file"]) for e in manifest.get(key) or []]
        except (KeyError, TypeError, AttributeError):
            raise ParseError(mpath, None, f"malformed {key!r} entry") from None
        return out

    weights, units = {}, {}
    for name, unit, fname in entries("weights"):
        weights[name], units[name] = load(fname), unit
    arc_attrs, attr_units = {}, {}
    for name, unit, fname in entries("attributes"):
        arc_attrs[name], attr_units[name] = load(fname), unit
    coords = load("coords.npy") if manifest.get("has_coords", "coords.npy" in files) else None
    node_ids = load("node_ids.npy") if manifest.get("has_node_ids", "node_ids.npy" in files) else None
    turns_entry = manifest.get("turns")
    turn_files = None
    if turns_entry is not None:
        try:
            turn_files = [turns_entry["files"][k] for k in TURN_FILES]
            turn_meta = dict(turns_entry.get("meta") or {})
        except (KeyError, TypeError, AttributeError, ValueError):
            raise ParseError(mpath, None, "malformed 'turns' entry (expected files in_arc, out_arc, kind "
                                          "and a meta mapping)") from None
    tc_entry = manifest.get("turn_costs")
    tc_files = None
    if tc_entry is not None:
        try:
            tc_files = {k: tc_entry["files"][k] for k in TURN_COST_FILES}
            tc_meta = dict(tc_entry.get("meta") or {})
        except (KeyError, TypeError, AttributeError, ValueError):
            raise ParseError(mpath, None, "malformed 'turn_costs' entry (expected files "
                                          f"{', '.join(TURN_COST_FILES)} and a meta mapping)") from None
    try:
        turns = None
        if turn_files is not None:
            turns = TurnRestrictions(*(load(f) for f in turn_files), meta=turn_meta)
        turn_costs = None
        if tc_files is not None:
            turn_costs = TurnCosts(load(tc_files["duration"]), load(tc_files["weight"]),
                                   obstacles={k: load(tc_files[f"obstacle_{k}"]) for k in OBSTACLE_FIELDS},
                                   meta=tc_meta)
        g = RoadGraph(load("first_out.npy"), load("head.npy"), weights, units=units, coords=coords,
                      name=manifest.get("name", os.path.basename(directory)), node_ids=node_ids,
                      coord_system=manifest.get("coord_system", "lonlat"), meta=manifest.get("meta") or {},
                      arc_attrs=arc_attrs, attr_units=attr_units, turns=turns, turn_costs=turn_costs)
    except ParseError:
        raise
    except (ValueError, TypeError) as e:  # GraphError is a ValueError; a malformed unit raises either
        fname = _blame(str(e), manifest) if isinstance(e, GraphError) else None
        where = os.path.join(directory, fname) if fname else mpath
        raise ParseError(where, None, f"the arrays and fields listed in {mpath} do not form a valid graph: "
                                      f"{e}") from None
    if verify and version < 2:
        fp = g.fingerprint()
        if fp != manifest["fingerprint"]:
            raise ParseError(mpath, None, f"fingerprint mismatch: the arrays hash to {fp}, the manifest says "
                                          f"{manifest['fingerprint']} (files changed or mixed up)")
    return g
