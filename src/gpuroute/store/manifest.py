"""Manifests and fingerprints: what every saved artefact of gpuroute writes beside its arrays (OSRM style:
each file carries its format, version and fingerprints).

A saved artefact is a directory of ``.npy`` arrays plus ``manifest.json``: ``format`` and ``version``
name the layout, ``files`` records per array file its ``dtype``, ``shape`` and ``sha256``, and
``integrity`` holds the SHA-256 of every other manifest field (its canonical JSON: sorted keys, no
spaces) plus a ``content`` hash over those, so the manifest's hashes cover every byte saved. A reader
recomputes them and raises :class:`~gpuroute.graph.errors.ParseError` naming the manifest or the array
file and what differs. The hashes detect accidental or careless edits; they are not a signature
(whoever edits the manifest can recompute them).

Public API
----------
MANIFEST, INTEGRITY, HASH_ALGORITHM     file name, manifest key of the field hashes, their algorithm
json_default(o), plain(value, what)     numpy values as plain JSON values
sha256_bytes(data), sha256_file(path)   hex SHA-256 of bytes / of a file's bytes
sha256_arrays(*arrays, layout=False)    hex SHA-256 of arrays' bytes (with ``layout``: dtype and shape too)
manifest_integrity(manifest)            the ``integrity`` entry of a manifest
verify_integrity(manifest, mpath, ...)  check the fields against ``integrity`` (ParseError naming them)
write_array(path, array)                one ``.npy`` (fsync-ed); returns its ``files`` record
write_arrays(directory, arrays)         several; returns the ``files`` mapping
write_manifest(directory, manifest)     ``manifest.json`` (plain JSON, ``integrity`` added; atomic option)
read_json(path)                         a JSON file (None when absent; ParseError naming the line)
manifest_format(directory)              the ``format`` of a directory's manifest, or None (never raises)
read_manifest(directory, format=...)    read and check format, version, required entries, integrity
check_file(directory, fname, ...)       an array file's SHA-256 against its record (ParseError naming it)
load_array(directory, fname, ...)       an array file, checked against its record (dtype, shape, SHA-256)
check_replaceable(directory, formats)   refuse to replace anything but a saved artefact of those formats
"""
from __future__ import annotations

import datetime
import hashlib
import json
import os

import numpy as np

from ..graph.errors import ParseError
from .atomic import atomic_file

__all__ = ["MANIFEST", "INTEGRITY", "HASH_ALGORITHM", "json_default", "plain", "canonical_json", "now",
           "sha256_bytes", "sha256_file", "sha256_arrays", "manifest_integrity", "verify_integrity",
           "write_array", "write_arrays", "write_manifest", "read_json", "manifest_format", "read_manifest",
           "check_file", "load_array", "check_replaceable"]

MANIFEST = "manifest.json"
#: Manifest key holding the hashes of every other manifest field.
INTEGRITY = "integrity"
HASH_ALGORITHM = "sha256"


def json_default(o):
    """``json.dump``'s ``default``: numpy scalars and arrays as numbers and lists, sets and tuples as
    lists, anything else as its ``str``."""
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


def plain(value, what="manifest"):
    """``value`` as the plain JSON values a reader gets back (numpy scalars and arrays become numbers and
    lists).

    Raises
    ------
    TypeError
        JSON cannot hold it (e.g. tuple keys); the message names ``what``.
    """
    try:
        return json.loads(json.dumps(value, default=json_default))
    except (TypeError, ValueError) as e:
        raise TypeError(f"the {what} cannot be saved as JSON: {e}") from None


def canonical_json(value) -> bytes:
    """The bytes a manifest value is hashed as: JSON with sorted keys and no whitespace."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      default=json_default).encode("ascii")


def now():
    """The current UTC time, ISO 8601 to the second (the manifests' ``created``)."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def sha256_bytes(data) -> str:
    """Hex SHA-256 of ``data`` (bytes)."""
    return hashlib.sha256(data).hexdigest()


def sha256_file(path) -> str:
    """Hex SHA-256 of a file's bytes, read once in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def sha256_arrays(*arrays, layout=False) -> str:
    """Hex SHA-256 of arrays' C-ordered bytes, in order; with ``layout`` each array's dtype and shape
    are hashed before its bytes (so that reinterpreted bytes differ)."""
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        if layout:
            h.update(str(a.dtype).encode())
            h.update(str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()


def manifest_integrity(manifest) -> dict:
    """The ``integrity`` entry of a manifest: the SHA-256 of each field but ``integrity`` itself.

    Parameters
    ----------
    manifest : dict
        Plain JSON values (as read back from ``manifest.json``).

    Returns
    -------
    dict
        ``{"algorithm": "sha256", "fields": {key: hex}, "content": hex}``; ``content`` hashes the
        ``fields`` mapping, so it identifies the whole saved artefact (every array file's hash is in its
        ``files`` field).
    """
    fields = {k: sha256_bytes(canonical_json(v)) for k, v in manifest.items() if k != INTEGRITY}
    return {"algorithm": HASH_ALGORITHM, "fields": fields, "content": sha256_bytes(canonical_json(fields))}


def verify_integrity(manifest, mpath, *, remedy="save it again instead of editing it"):
    """Check a manifest's fields against the hashes under ``integrity``.

    Parameters
    ----------
    manifest : dict
    mpath : str
        The manifest's path (for the message).
    remedy : str
        What the message tells the user to do instead.

    Raises
    ------
    ParseError
        Naming ``mpath`` and the fields changed, added or removed after saving (``"edited after saving:
        field 'name' changed"``), a malformed ``integrity`` entry, or an edited ``content`` hash.
    """
    rec = manifest.get(INTEGRITY)
    if (not isinstance(rec, dict) or rec.get("algorithm") != HASH_ALGORITHM
            or not isinstance(rec.get("fields"), dict)):
        raise ParseError(mpath, None, f"malformed {INTEGRITY!r} entry (expected algorithm {HASH_ALGORITHM!r} "
                                      "and the hash of every field)")
    cur = manifest_integrity(manifest)
    want, got = rec["fields"], cur["fields"]
    problems = []
    for kind, keys in (("changed", sorted(k for k in got if k in want and got[k] != want[k])),
                       ("added", sorted(k for k in got if k not in want)),
                       ("removed", sorted(k for k in want if k not in got))):
        if keys:
            problems.append(f"field{'s' if len(keys) > 1 else ''} {', '.join(map(repr, keys))} {kind}")
    if problems:
        raise ParseError(mpath, None, f"edited after saving: {'; '.join(problems)} (the SHA-256 recorded under "
                                      f"{INTEGRITY!r} differs); {remedy}")
    if rec.get("content") != cur["content"]:
        raise ParseError(mpath, None, f"the {INTEGRITY!r} entry was edited after saving (its content hash "
                                      "does not match its field hashes)")


# ---------------------------------------------------------------------------------------------- write
def write_array(path, array):
    """Write one array as ``path`` (``np.save``, no pickle, C order), flushed and ``fsync``-ed.

    Meant for a file inside a temporary directory of :func:`gpuroute.store.atomic_directory` (not yet
    visible under its final name); for a single visible file use :func:`gpuroute.store.write_npy_atomic`.

    Returns
    -------
    dict
        Its ``files`` record: ``{"dtype", "shape", "sha256"}``.
    """
    a = np.ascontiguousarray(array)
    with open(path, "wb") as f:
        np.save(f, a, allow_pickle=False)
        f.flush()
        os.fsync(f.fileno())
    return {"dtype": str(a.dtype), "shape": list(a.shape), "sha256": sha256_file(path)}


def narrowest(array, dtypes=("int32",)):
    """``array`` in the first of ``dtypes`` narrower than its own that holds every value exactly, else
    ``array`` itself: what a saved artefact stores where its reader widens on load anyway (issue 20: no
    int64 file for int32 values). Only integer arrays narrow; the check is over the values, so a sentinel
    out of the narrow range (e.g. INF) keeps the array as it is.

    Parameters
    ----------
    array : ndarray
    dtypes : sequence of dtype-like
        Integer candidates, in the order tried.

    Returns
    -------
    ndarray
        A narrowed copy, or ``array``.
    """
    a = np.asarray(array)
    if a.dtype.kind not in "iu":
        return a
    lo = int(a.min()) if a.size else 0
    hi = int(a.max()) if a.size else 0
    for t in map(np.dtype, dtypes):
        if t.kind in "iu" and t.itemsize < a.dtype.itemsize:
            info = np.iinfo(t)
            if info.min <= lo and hi <= info.max:
                return a.astype(t)
    return a


def write_arrays(directory, arrays):
    """Write ``{file name: array}`` into ``directory`` (:func:`write_array`).

    Returns
    -------
    dict
        ``{file name: {"dtype", "shape", "sha256"}}``: the manifest's ``files`` field.
    """
    return {fname: write_array(os.path.join(directory, fname), a) for fname, a in arrays.items()}


def write_manifest(directory, manifest, *, integrity=True, atomic=False, what="manifest"):
    """Write ``directory/manifest.json``: ``manifest`` as plain JSON values, with its ``integrity`` entry
    (unless ``integrity=False``), indented, flushed and ``fsync``-ed.

    Parameters
    ----------
    directory : str
    manifest : dict
    integrity : bool
        Add (replace) the ``integrity`` entry, computed over the values as a reader gets them back.
    atomic : bool
        Replace an existing manifest atomically (:func:`gpuroute.store.atomic_file`); without it the
        file is written in place (inside a temporary directory that is renamed as a whole).
    what : str
        Named by the TypeError.

    Returns
    -------
    dict
        The manifest as written.

    Raises
    ------
    TypeError
        JSON cannot hold a value (e.g. tuple keys).
    OSError
        Writing failed (with ``atomic``, the previous manifest is unchanged).
    """
    m = plain({k: v for k, v in manifest.items() if k != INTEGRITY}, what)
    if integrity:
        m[INTEGRITY] = manifest_integrity(m)
    path = os.path.join(os.fspath(directory), MANIFEST)
    if atomic:
        with atomic_file(path, "w") as f:
            json.dump(m, f, indent=1)
            f.write("\n")
    else:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(m, f, indent=1)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
    return m


# ---------------------------------------------------------------------------------------------- read
def read_json(path):
    """A JSON file's value; None when the file does not exist.

    Raises
    ------
    ParseError
        Naming the file: invalid JSON (with its line), not UTF-8, unreadable.
    """
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except json.JSONDecodeError as e:
        raise ParseError(path, e.lineno, f"invalid JSON ({e.msg})") from None
    except UnicodeDecodeError:
        raise ParseError(path, None, "not UTF-8 text") from None
    except OSError as e:
        raise ParseError(path, None, f"unreadable ({' '.join(str(e).split())})") from None


def manifest_format(directory):
    """The ``format`` of ``directory/manifest.json``; None when there is none or it cannot be read (never
    raises)."""
    try:
        m = read_json(os.path.join(os.fspath(directory), MANIFEST))
    except (ParseError, TypeError):
        return None
    return m.get("format") if isinstance(m, dict) else None


def read_manifest(directory, *, format, versions, required=(), what="saved artefact", names=None,
                  remedy="save it again", integrity=True):
    """Read ``directory/manifest.json`` and check its format, version, required entries and (with
    ``integrity``) the hashes of its fields; not the array files (:func:`load_array` checks those).

    Parameters
    ----------
    directory : str or path-like
    format : str
        The expected ``format``.
    versions : sequence of int
        The versions this gpuroute reads.
    required : sequence of str
        Entries that must be there.
    what : str
        What the artefact is called in messages (``"saved contraction hierarchy"``).
    names : dict, optional
        Other formats by what the message says of them (``{"gpuroute-graph": "a saved graph, not a
        contraction hierarchy"}``).
    remedy : str
        What a message about another version or an edited field tells the user to do.
    integrity : bool
        Check the ``integrity`` entry (required then).

    Returns
    -------
    dict

    Raises
    ------
    FileNotFoundError
        ``directory`` does not exist.
    ParseError
        Naming the manifest: missing, not JSON (with its line), another format (a known one named),
        another version, a required entry missing, a field edited after saving.
    """
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"{directory}: no such directory")
    mpath = os.path.join(directory, MANIFEST)
    m = read_json(mpath)
    if m is None:
        raise ParseError(mpath, None, f"missing: {directory} is not a {what}")
    fmt = m.get("format") if isinstance(m, dict) else type(m).__name__
    if fmt != format:
        other = (names or {}).get(fmt)
        raise ParseError(mpath, None, f"format is {fmt!r}, expected {format!r}" + (f" ({other})" if other else ""))
    version = m.get("version")
    if isinstance(version, bool) or version not in tuple(versions):
        reads = ", ".join(map(str, versions))
        raise ParseError(mpath, None, f"format version {version!r}: this gpuroute reads version"
                                      f"{'s' if len(versions) > 1 else ''} {reads} only; {remedy}")
    for key in tuple(required) + ((INTEGRITY,) if integrity else ()):
        if key not in m:
            raise ParseError(mpath, None, f"no {key!r} entry")
    if integrity:
        verify_integrity(m, mpath, remedy=remedy)
    files = m.get("files", {})
    if not isinstance(files, dict) or not all(isinstance(v, dict) for v in files.values()):
        raise ParseError(mpath, None, "malformed 'files' entry (expected a mapping file name -> dtype, shape, sha256)")
    return m


def check_file(directory, fname, manifest, *, blame=None):
    """Check an array file's SHA-256 against ``manifest["files"][fname]["sha256"]``.

    Parameters
    ----------
    directory : str
    fname : str
    manifest : dict
    blame : str, optional
        The path the error names (default: the manifest's).

    Raises
    ------
    ParseError
        ``"checksum of <fname> does not match: the file hashes to sha256 ..., the manifest records ..."``
        (the file changed, truncated or damaged after saving); no sha256 recorded; the file is missing.
    """
    mpath = os.path.join(directory, MANIFEST)
    where = blame or mpath
    rec = (manifest.get("files") or {}).get(fname)
    want = rec.get("sha256") if isinstance(rec, dict) else None
    if want is None:
        raise ParseError(mpath, None, f"no sha256 recorded for {fname}")
    p = os.path.join(directory, fname)
    if not os.path.exists(p):
        raise ParseError(mpath, None, f"lists {fname}, which is missing from {directory}")
    got = sha256_file(p)
    if got != want:
        raise ParseError(where, None, f"checksum of {fname} does not match: the file hashes to sha256 {got[:16]}..., "
                                      f"the manifest records {str(want)[:16]}... (the file was changed or damaged "
                                      "after saving)")


def load_array(directory, fname, manifest, *, mmap=False, check_hash=True):
    """One array file of a saved artefact, checked against its ``files`` record.

    Parameters
    ----------
    directory : str
    fname : str
    manifest : dict
    mmap : bool
        Memory-map it read-only (``np.load(mmap_mode="r")``).
    check_hash : bool
        Check its SHA-256 (:func:`check_file`; after its dtype and shape, each named apart).

    Returns
    -------
    ndarray

    Raises
    ------
    ParseError
        Naming the manifest: the file is not listed, missing, of another dtype or shape, or its checksum
        differs; naming the file: not a readable ``.npy`` array.
    """
    mpath = os.path.join(directory, MANIFEST)
    files = manifest.get("files") or {}
    p = os.path.join(directory, fname)
    if fname not in files or not isinstance(files[fname], dict):
        raise ParseError(mpath, None, f"{fname} is not listed under 'files'")
    if not os.path.exists(p):
        raise ParseError(mpath, None, f"lists {fname}, which is missing from {directory}")
    want = files[fname]
    check_hash = check_hash and want.get("sha256") is not None
    try:
        a = np.load(p, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        if check_hash:
            check_file(directory, fname, manifest)  # a damaged file is named as changed
        raise ParseError(p, None, f"not a readable .npy array ({e})") from None
    if str(a.dtype) != want.get("dtype", str(a.dtype)) or list(a.shape) != want.get("shape", list(a.shape)):
        raise ParseError(mpath, None, f"{fname} is {a.dtype}{list(a.shape)}, the manifest says "
                                      f"{want.get('dtype')}{want.get('shape')}")
    if check_hash:
        check_file(directory, fname, manifest)
    return a


# ---------------------------------------------------------------------------------------------- replace
def check_replaceable(directory, formats, what, *, names=None, allow=None, refusal="not replacing it"):
    """Refuse to write over anything but a saved artefact of one of ``formats`` (or an empty or new
    directory): nothing unrelated is ever deleted by an atomic replace.

    Parameters
    ----------
    directory : str or path-like
    formats : collection of str
        Manifest formats that may be replaced.
    what : str
        What may be replaced, for the message (``"a saved hierarchy"``).
    names : dict, optional
        Other formats by name, for the message (``{"gpuroute-graph": "a saved graph"}``).
    allow : callable, optional
        ``allow(entries)`` -> True: a directory without a manifest whose entries may be replaced anyway
        (e.g. what an interrupted stage leaves).
    refusal : str
        How the message ends (``"not writing into it"`` for a directory written into, not replaced).

    Returns
    -------
    str
        The absolute path (no trailing separator).

    Raises
    ------
    FileExistsError
        ``directory`` is a file or a link, or a non-empty directory that is not ``what``.
    """
    directory = os.path.abspath(os.fspath(directory)).rstrip(os.sep)
    if not os.path.lexists(directory):
        return directory
    if os.path.islink(directory) or not os.path.isdir(directory):
        raise FileExistsError(f"{directory}: exists and is not a directory; {refusal}")
    entries = os.listdir(directory)
    if not entries:
        return directory
    fmt = manifest_format(directory)
    if fmt in formats:
        return directory
    if allow is not None and fmt is None and not os.path.exists(os.path.join(directory, MANIFEST)) and allow(entries):
        return directory
    other = (names or {}).get(fmt)
    raise FileExistsError(f"{directory}: a non-empty directory that is " + (other or f"not {what} (no "
                          f"{' or '.join(map(repr, sorted(formats)))} {MANIFEST})") + f"; {refusal}")
