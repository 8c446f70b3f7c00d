"""Save and load a RoadGraph as a directory of ``.npy`` arrays plus ``manifest.json`` (OSRM style: the
files carry a format version and the graph's fingerprint, and are written atomically).

Layout (version 1)::

    <directory>/
        manifest.json       format, version, name, units, coord_system, meta, fingerprint, per-file sha256
        first_out.npy       int32 (n_nodes + 1,)
        head.npy            int32 (n_arcs,)
        weight-0.npy ...    int32 (n_arcs,), one per weight, in the graph's order (names in the manifest)
        coords.npy          float64 (n_nodes, 2)   (only if the graph has coordinates)
        node_ids.npy        int64 (n_nodes,)       (only if the graph has external ids)
"""
from __future__ import annotations

import datetime
import hashlib
import json
import os
import shutil
import tempfile

import numpy as np

from ..graph.errors import GraphError, ParseError
from ..graph.road_graph import RoadGraph

FORMAT = "gpuroute-graph"
VERSION = 1
MANIFEST = "manifest.json"


def _json_default(o):
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.bool_):
        return bool(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    return str(o)


def _sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _save_array(path, a):
    with open(path, "wb") as f:
        np.save(f, np.ascontiguousarray(a), allow_pickle=False)
        f.flush()
        os.fsync(f.fileno())


def _fsync_dir(path):
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - e.g. platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def save_graph(graph, directory, *, checksums=True):
    """Write ``graph`` to ``directory`` atomically (a directory of ``.npy`` files + ``manifest.json``).

    Everything is written into a temporary sibling directory, which is then renamed into place. If
    ``directory`` already holds a saved graph it is replaced: the old directory is first renamed aside,
    the new one renamed in, and only then is the old one deleted (if the second rename fails the old one
    is put back). An error at any point leaves ``directory`` as it was and no temporary directory behind.

    Parameters
    ----------
    graph : RoadGraph
    directory : str or path-like
        Target directory; its parent is created if needed.
    checksums : bool
        Record the SHA-256 of every array file in the manifest (checked by
        ``load_graph(..., check_files=True)``).

    Returns
    -------
    str
        The absolute path of the written directory.

    Raises
    ------
    FileExistsError
        ``directory`` exists and is a file, or a non-empty directory without a ``manifest.json`` (it
        is not replaced, so that no unrelated data is deleted).
    OSError
        Writing failed (nothing is left half-written).
    """
    directory = os.path.abspath(os.fspath(directory)).rstrip(os.sep)
    parent, base = os.path.split(directory)
    if os.path.lexists(directory):
        if not os.path.isdir(directory) or os.path.islink(directory):
            raise FileExistsError(f"{directory}: exists and is not a directory; not replacing it")
        if os.listdir(directory) and not os.path.exists(os.path.join(directory, MANIFEST)):
            raise FileExistsError(f"{directory}: a non-empty directory that is not a saved gpuroute graph "
                                  f"(no {MANIFEST}); not replacing it")
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{base}.tmp-", dir=parent)
    try:
        arrays = {"first_out.npy": graph.first_out, "head.npy": graph.head}
        weights = []
        for i, k in enumerate(graph.weights):
            fname = f"weight-{i}.npy"
            arrays[fname] = graph.weights[k]
            weights.append({"name": k, "unit": graph.units[k].to_json(), "file": fname})
        if graph.coords is not None:
            arrays["coords.npy"] = graph.coords
        if graph.node_ids is not None:
            arrays["node_ids.npy"] = graph.node_ids
        files = {}
        for fname, a in arrays.items():
            p = os.path.join(tmp, fname)
            _save_array(p, a)
            files[fname] = {"dtype": str(np.asarray(a).dtype), "shape": list(np.shape(a))}
            if checksums:
                files[fname]["sha256"] = _sha256_file(p)
        from .. import __version__

        manifest = {
            "format": FORMAT,
            "version": VERSION,
            "name": graph.name,
            "n_nodes": graph.n_nodes,
            "n_arcs": graph.n_arcs,
            "weights": weights,
            "coord_system": graph.coord_system,
            "has_coords": graph.coords is not None,
            "has_node_ids": graph.node_ids is not None,
            "meta": graph.meta,
            "fingerprint": graph.fingerprint(),
            "files": files,
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "gpuroute_version": __version__,
        }
        with open(os.path.join(tmp, MANIFEST), "w", encoding="utf-8") as f:
            json.dump(manifest, f, indent=1, default=_json_default)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        _fsync_dir(tmp)
        if os.path.lexists(directory):
            old = tempfile.mkdtemp(prefix=f".{base}.old-", dir=parent)
            os.rmdir(old)  # only reserve a unique name
            os.rename(directory, old)
            try:
                os.rename(tmp, directory)
            except BaseException:
                os.rename(old, directory)
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, directory)
        _fsync_dir(parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return directory


def read_manifest(directory):
    """Read and check ``directory/manifest.json``.

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
        or has an unsupported version.
    """
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"{directory}: no such directory")
    mpath = os.path.join(directory, MANIFEST)
    if not os.path.exists(mpath):
        raise ParseError(mpath, None, f"missing: {directory} is not a saved gpuroute graph")
    try:
        with open(mpath, encoding="utf-8") as f:
            manifest = json.load(f)
    except json.JSONDecodeError as e:
        raise ParseError(mpath, e.lineno, f"invalid JSON ({e.msg})") from None
    except UnicodeDecodeError:
        raise ParseError(mpath, None, "not UTF-8 text") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        got = manifest.get("format") if isinstance(manifest, dict) else type(manifest).__name__
        raise ParseError(mpath, None, f"format is {got!r}, expected {FORMAT!r}")
    if manifest.get("version") != VERSION:
        raise ParseError(mpath, None, f"version {manifest.get('version')!r} is not supported "
                                      f"(this gpuroute reads version {VERSION})")
    for key in ("weights", "fingerprint", "files"):
        if key not in manifest:
            raise ParseError(mpath, None, f"no {key!r} entry")
    return manifest


def load_graph(directory, mmap=True, *, verify=True, check_files=False):
    """Load a graph written by :func:`save_graph`.

    Parameters
    ----------
    directory : str or path-like
    mmap : bool
        Memory-map the arrays (``np.load(mmap_mode="r")``) instead of reading them. ``head``, the
        weights, ``coords`` and ``node_ids`` then stay file-backed and read-only (RoadGraph keeps int32 /
        float64 / int64 arrays without copying). ``first_out`` is copied (RoadGraph validates it as
        int64) and ``tail`` is derived in memory, so about ``4 * (n_nodes + n_arcs)`` bytes are
        allocated either way.
    verify : bool
        Recompute the fingerprint and compare it with the manifest's (reads every array once).
    check_files : bool
        Also compare each file's SHA-256 with the manifest (reads every file once more).

    Returns
    -------
    RoadGraph

    Raises
    ------
    FileNotFoundError
        ``directory`` does not exist.
    ParseError
        Naming the manifest (or the bad array file): see :func:`read_manifest`; a listed file is
        missing, unreadable, or of the wrong dtype/shape; a checksum or the fingerprint differs; the
        arrays do not form a valid graph.
    """
    directory = os.fspath(directory)
    manifest = read_manifest(directory)
    mpath = os.path.join(directory, MANIFEST)
    files = manifest["files"]

    def load(fname):
        p = os.path.join(directory, fname)
        if fname not in files:
            raise ParseError(mpath, None, f"{fname} is not listed under 'files'")
        if not os.path.exists(p):
            raise ParseError(mpath, None, f"lists {fname}, which is missing from {directory}")
        if check_files and "sha256" in files[fname] and _sha256_file(p) != files[fname]["sha256"]:
            raise ParseError(mpath, None, f"checksum of {fname} does not match: the file was changed or damaged")
        try:
            a = np.load(p, mmap_mode="r" if mmap else None, allow_pickle=False)
        except (ValueError, OSError, EOFError) as e:
            raise ParseError(p, None, f"not a readable .npy array ({e})") from None
        want = files[fname]
        if str(a.dtype) != want.get("dtype", str(a.dtype)) or list(a.shape) != want.get("shape", list(a.shape)):
            raise ParseError(mpath, None, f"{fname} is {a.dtype}{list(a.shape)}, the manifest says "
                                          f"{want.get('dtype')}{want.get('shape')}")
        return a

    try:
        weights = {w["name"]: load(w["file"]) for w in manifest["weights"]}
        units = {w["name"]: w.get("unit", "") for w in manifest["weights"]}
    except (KeyError, TypeError):
        raise ParseError(mpath, None, "malformed 'weights' entry") from None
    coords = load("coords.npy") if manifest.get("has_coords", "coords.npy" in files) else None
    node_ids = load("node_ids.npy") if manifest.get("has_node_ids", "node_ids.npy" in files) else None
    try:
        g = RoadGraph(load("first_out.npy"), load("head.npy"), weights, units=units, coords=coords,
                      name=manifest.get("name", os.path.basename(directory)), node_ids=node_ids,
                      coord_system=manifest.get("coord_system", "lonlat"), meta=manifest.get("meta") or {})
    except GraphError as e:
        raise ParseError(mpath, None, f"the arrays do not form a valid graph: {e}") from None
    if verify:
        fp = g.fingerprint()
        if fp != manifest["fingerprint"]:
            raise ParseError(mpath, None, f"fingerprint mismatch: the arrays hash to {fp}, the manifest says "
                                          f"{manifest['fingerprint']} (files changed or mixed up)")
    return g
