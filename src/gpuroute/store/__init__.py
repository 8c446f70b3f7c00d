"""One artefact store: every saved thing of gpuroute (a graph, a contraction hierarchy, a partition, an
overlay, an overlay or dataset directory, distributed outputs, saved traffic) is written and read through
it (issue 19; OSRM: files that carry a fingerprint, swapped in atomically).

Modules
-------
atomic      a file or a directory appears complete under its final name, or not at all (temporary
            sibling, ``fsync``, rename; permissions follow the umask)
manifest    ``manifest.json``: format, version, per-array SHA-256 (``files``), the hash of every field
            (``integrity``); reading checks them and names the file that differs
graph       the saved graph (:func:`save_graph`, :func:`load_graph`): the first artefact, the one the
            others are fingerprinted against

Each artefact's own layout stays beside the object it saves (``ch/store.py``,
:meth:`gpuroute.Partition.save`, :meth:`gpuroute.Overlay.save`, :mod:`gpuroute.pipeline`,
:mod:`gpuroute.engine.dataset`); the writing, hashing and checking is here.

Public API
----------
atomic_file, atomic_directory, write_npy_atomic, fsync_directory, temp_sibling
MANIFEST, INTEGRITY, manifest_integrity, verify_integrity, read_manifest, write_manifest, write_array,
write_arrays, load_array, check_file, check_replaceable, read_json, manifest_format, sha256_file,
sha256_bytes, sha256_arrays, plain, json_default, narrowest
save_graph, load_graph
"""
from __future__ import annotations

from .atomic import atomic_directory, atomic_file, fsync_directory, temp_sibling, write_npy_atomic
from .graph import load_graph, save_graph
from .manifest import (
    INTEGRITY,
    MANIFEST,
    check_file,
    check_replaceable,
    json_default,
    load_array,
    manifest_format,
    manifest_integrity,
    narrowest,
    plain,
    read_json,
    read_manifest,
    sha256_arrays,
    sha256_bytes,
    sha256_file,
    verify_integrity,
    write_array,
    write_arrays,
    write_manifest,
)

__all__ = ["atomic_file", "atomic_directory", "write_npy_atomic", "fsync_directory", "temp_sibling", "MANIFEST",
           "INTEGRITY", "manifest_integrity", "verify_integrity", "read_manifest", "write_manifest", "write_array",
           "write_arrays", "load_array", "check_file", "check_replaceable", "read_json", "manifest_format",
           "sha256_file", "sha256_bytes", "sha256_arrays", "plain", "json_default", "narrowest", "save_graph",
           "load_graph"]
