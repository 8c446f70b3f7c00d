"""``open_graph``: a road graph from a shipped dataset name, a file, or a saved graph directory.

This module sits above both :mod:`gpuroute.io` (files) and :mod:`gpuroute.datasets` (shipped networks,
which load through ``io``), so that neither of the two imports the other's caller: ``io`` knows paths
only, ``datasets`` knows its names, and this function knows both.
"""
from __future__ import annotations

import os

from . import datasets
from .io import open_graph as _open_path

__all__ = ["open_graph"]


def open_graph(spec, **kwargs):
    """Open a road graph from a shipped dataset name, a file, or a saved graph directory.

    Parameters
    ----------
    spec : str or path-like
        Checked in this order: an existing path (a file or a saved graph directory, opened by
        :func:`gpuroute.io.open_graph`, which picks the loader from the file ending); otherwise a name
        from :func:`gpuroute.datasets.names` (``"ny"``, ``"ny-time"``, ``"monaco"``), loaded with
        :func:`gpuroute.datasets.load`.
    **kwargs
        Passed to the file's loader (e.g. ``profile="car"`` for OSM, ``mmap=False`` for a store).
        A dataset name takes none.

    Returns
    -------
    RoadGraph

    Raises
    ------
    FileNotFoundError
        ``spec`` is neither an existing path nor a dataset name (the one-line message lists the
        names), or is a directory without ``manifest.json``.
    TypeError
        Loader options given with a dataset name.
    ValueError
        An existing file whose ending is not recognised (the message lists the endings).
    ParseError
        The file is malformed (see the loaders in :mod:`gpuroute.io`).
    """
    path = os.fspath(spec)
    if os.path.exists(path):
        return _open_path(path, **kwargs)
    if path in datasets.names():
        if kwargs:
            raise TypeError(f"shipped dataset {path!r} takes no loader options (got {sorted(kwargs)})")
        return datasets.load(path)
    raise FileNotFoundError(f"{path!r} is neither an existing file or directory nor a shipped dataset "
                            f"(datasets: {', '.join(datasets.names())})")
