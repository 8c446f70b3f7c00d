"""Readers and writers of road networks. External ids (DIMACS 1-based, OSM ids) live here only.

Loaders
-------
load_dimacs          DIMACS 9 ``.gr`` (+ ``.co``)
load_metis           METIS / DIMACS 10 ``.graph`` (+ ``.xyz``)
load_osm             OpenStreetMap ``.osm.pbf`` with a routing profile (:data:`PROFILES`)
from_edgelist, from_dataframe, read_csv, from_scipy, from_networkx
                     edge lists in memory or in a CSV file
save_graph, load_graph
                     a directory of ``.npy`` arrays + ``manifest.json`` (memory-mapped on load)
open_graph           any of the above, chosen from a dataset name or the path
"""
from __future__ import annotations

import os

from .dimacs import load_dimacs, matching_co_path, read_dimacs_co, read_dimacs_gr
from .edgelist import from_dataframe, from_edgelist, from_networkx, from_scipy, read_csv
from .metis import load_metis, read_metis, read_xyz
from .osm import PROFILES, Profile, load_osm
from .store import MANIFEST, load_graph, read_manifest, save_graph

__all__ = ["load_dimacs", "read_dimacs_gr", "read_dimacs_co", "matching_co_path",
           "load_metis", "read_metis", "read_xyz",
           "load_osm", "PROFILES", "Profile",
           "from_edgelist", "from_dataframe", "read_csv", "from_scipy", "from_networkx",
           "save_graph", "load_graph", "read_manifest",
           "open_graph"]

#: File name endings open_graph recognises, and the loader each one selects.
SUFFIXES = {
    ".gr": "dimacs", ".gr.gz": "dimacs",
    ".graph": "metis", ".graph.gz": "metis",
    ".osm.pbf": "osm", ".pbf": "osm", ".osm": "osm", ".osm.bz2": "osm",
    ".csv": "csv", ".csv.gz": "csv",
}


def _kind_of(path):
    low = os.path.basename(path).lower()
    for suf in sorted(SUFFIXES, key=len, reverse=True):
        if low.endswith(suf):
            return SUFFIXES[suf]
    return None


def open_graph(spec, **kwargs):
    """Open a road graph from a shipped dataset name, a file, or a saved graph directory.

    Parameters
    ----------
    spec : str or path-like
        Checked in this order: an existing directory with ``manifest.json`` (:func:`load_graph`); an
        existing file, by its ending: ``.gr[.gz]`` (:func:`load_dimacs`), ``.graph[.gz]``
        (:func:`load_metis`), ``.osm.pbf``/``.pbf``/``.osm[.bz2]`` (:func:`load_osm`), ``.csv[.gz]``
        (:func:`read_csv`); otherwise a name from :func:`gpuroute.datasets.names`.
    **kwargs
        Passed to the chosen loader (e.g. ``profile="car"`` for OSM, ``mmap=False`` for a store).

    Returns
    -------
    RoadGraph

    Raises
    ------
    FileNotFoundError
        ``spec`` is neither an existing path nor a dataset name (the one-line message lists the names),
        or is a directory without ``manifest.json``.
    TypeError
        Loader options given with a dataset name.
    ValueError
        An existing file whose ending is not recognised (the message lists the endings).
    ParseError
        The file is malformed (see the loaders).
    """
    from .. import datasets

    path = os.fspath(spec)
    if os.path.isdir(path):
        if not os.path.exists(os.path.join(path, MANIFEST)):
            raise FileNotFoundError(f"{path}: a directory without {MANIFEST}, not a saved gpuroute graph")
        return load_graph(path, **kwargs)
    if os.path.isfile(path):
        kind = _kind_of(path)
        loader = {"dimacs": load_dimacs, "metis": load_metis, "osm": load_osm, "csv": read_csv}.get(kind)
        if loader is None:
            raise ValueError(f"{path}: unknown file type; expected one of {', '.join(SUFFIXES)} "
                             f"or a saved graph directory")
        return loader(path, **kwargs)
    if path in datasets.names():
        if kwargs:
            raise TypeError(f"shipped dataset {path!r} takes no loader options (got {sorted(kwargs)})")
        return datasets.load(path)
    raise FileNotFoundError(f"{path!r} is neither an existing file or directory nor a shipped dataset "
                            f"(datasets: {', '.join(datasets.names())})")
