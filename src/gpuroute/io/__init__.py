"""Readers and writers of road networks. External ids (DIMACS 1-based, OSM ids) live here only.

Loaders
-------
load_dimacs          DIMACS 9 ``.gr`` (+ ``.co``)
load_metis           METIS / DIMACS 10 ``.graph`` (+ ``.xyz``)
load_tntp            TNTP (Transportation Networks for Research) ``_net.tntp`` (+ ``_node.tntp``)
load_osm             OpenStreetMap ``.osm.pbf`` with a routing profile: OSRM's Lua profiles run unchanged
                     (``"car"``, ``"bicycle"``, ``"foot"``, any ``.lua``: :mod:`.lua_extract`, with turn
                     costs) or the native ``"car-basic"`` (:data:`PROFILES`)
from_edgelist, from_dataframe, read_csv, from_scipy, from_networkx
                     edge lists in memory or in a CSV file
save_graph, load_graph
                     a directory of ``.npy`` arrays + ``manifest.json`` (memory-mapped on load; the code is
                     :mod:`gpuroute.store.graph`, exported here beside the other readers)
open_graph           any of the above, chosen from the path (an existing file or store directory)

This package reads files only: it does not know the shipped datasets (``gpuroute.datasets`` builds on
it, not the other way round). :func:`gpuroute.opener.open_graph` adds the dataset names on top.
"""
from __future__ import annotations

import os

from ..store.graph import MANIFEST, load_graph, read_manifest, save_graph
from .dimacs import load_dimacs, matching_co_path, read_dimacs_co, read_dimacs_gr
from .edgelist import from_dataframe, from_edgelist, from_networkx, from_scipy, read_csv
from .metis import load_metis, read_metis, read_xyz
from .osm import PROFILES, Profile, load_osm
from .tntp import load_tntp, read_tntp_net, read_tntp_nodes

__all__ = ["load_dimacs", "read_dimacs_gr", "read_dimacs_co", "matching_co_path",
           "load_metis", "read_metis", "read_xyz",
           "load_tntp", "read_tntp_net", "read_tntp_nodes",
           "load_osm", "PROFILES", "Profile",
           "from_edgelist", "from_dataframe", "read_csv", "from_scipy", "from_networkx",
           "save_graph", "load_graph", "read_manifest",
           "open_graph"]

#: File name endings open_graph recognises, and the loader each one selects.
SUFFIXES = {
    ".gr": "dimacs", ".gr.gz": "dimacs",
    ".graph": "metis", ".graph.gz": "metis",
    "_net.tntp": "tntp", "_net.tntp.gz": "tntp", ".tntp": "tntp", ".tntp.gz": "tntp",
    ".osm.pbf": "osm", ".pbf": "osm", ".osm": "osm", ".osm.bz2": "osm",
    ".csv": "csv", ".csv.gz": "csv",
}

_LOADERS = {"dimacs": load_dimacs, "metis": load_metis, "tntp": load_tntp, "osm": load_osm, "csv": read_csv}


def _kind_of(path):
    low = os.path.basename(path).lower()
    for suf in sorted(SUFFIXES, key=len, reverse=True):
        if low.endswith(suf):
            return SUFFIXES[suf]
    return None


def open_graph(path, **kwargs):
    """Open a road graph from a file or a saved graph directory, choosing the loader from the path.

    Parameters
    ----------
    path : str or path-like
        An existing directory with ``manifest.json`` (:func:`load_graph`), or an existing file, by its
        ending: ``.gr[.gz]`` (:func:`load_dimacs`), ``.graph[.gz]`` (:func:`load_metis`),
        ``_net.tntp[.gz]`` / ``.tntp[.gz]`` (:func:`load_tntp`), ``.osm.pbf``/``.pbf``/``.osm[.bz2]``
        (:func:`load_osm`), ``.csv[.gz]`` (:func:`read_csv`). Shipped dataset names are not paths:
        :func:`gpuroute.open_graph` (``gpuroute.opener``) resolves those.
    **kwargs
        Passed to the chosen loader (e.g. ``profile="car"`` for OSM, ``mmap=False`` for a store).

    Returns
    -------
    RoadGraph

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist, is neither a file nor a directory, or is a directory without
        ``manifest.json`` (a one-line message naming the path).
    ValueError
        An existing file whose ending is not recognised (the message lists the endings).
    ParseError
        The file is malformed (see the loaders).
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        if not os.path.exists(os.path.join(path, MANIFEST)):
            raise FileNotFoundError(f"{path}: a directory without {MANIFEST}, not a saved gpuroute graph")
        return load_graph(path, **kwargs)
    if os.path.isfile(path):
        loader = _LOADERS.get(_kind_of(path))
        if loader is None:
            raise ValueError(f"{path}: unknown file type; expected one of {', '.join(SUFFIXES)} "
                             f"or a saved graph directory")
        return loader(path, **kwargs)
    raise FileNotFoundError(f"{path!r} is neither an existing file nor a saved graph directory")
