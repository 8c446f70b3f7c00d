"""Optional dependencies: one table of which pip extra brings which module, and :func:`require`, the one
way gpuroute imports an optional module, so that a missing one is reported as the extra to install.

``pip install 'gpuroute[NAME]'`` for each NAME in ``pyproject.toml``'s ``[project.optional-dependencies]``;
``make demo`` installs ``osm``, ``crp`` and ``serve``.
"""
from __future__ import annotations

import importlib

#: module (top-level import name) -> (PyPI distribution, the gpuroute extra that brings it)
EXTRAS = {
    "cupy": ("cupy-cuda13x", "gpu"),
    "osmium": ("osmium", "osm"),
    "kahip": ("kahip", "crp"),
    "pandas": ("pandas", "accessibility"),
    "shapely": ("shapely", "serve"),
    "geopandas": ("geopandas", "geo"),
    "matplotlib": ("matplotlib", "plot"),
    "pyarrow": ("pyarrow", "dask"),
    "dask": ("dask", "dask"),
    "distributed": ("distributed", "dask"),
    "vrplib": ("vrplib", "tours"),
    "networkx": ("networkx", "io"),
    "starlette": ("starlette", "serve"),
    "uvicorn": ("uvicorn", "serve"),
    "orjson": ("orjson", "serve"),
    "polyline": ("polyline", "serve"),
    "lupa": ("lupa", "lua"),
}


class MissingExtraError(ImportError):
    """An optional dependency is not installed; the message names the package and the extra to install.

    Attributes
    ----------
    module : str
        The import name that failed.
    extra : str
        The gpuroute extra that brings it (``pip install 'gpuroute[extra]'``).
    """

    def __init__(self, module, extra, what, cause=None):
        dist = EXTRAS.get(module, (module, extra))[0]
        super().__init__(f"{what} needs {dist}, which is not installed: pip install 'gpuroute[{extra}]' "
                         f"(or pip install {dist})" + (f" [{cause}]" if cause else ""), name=module)
        self.module, self.extra = module, extra


def require(module, what):
    """Import an optional module, or raise :class:`MissingExtraError` naming the extra to install.

    Parameters
    ----------
    module : str
        A dotted import name whose top-level package is in :data:`EXTRAS` (e.g. ``"pandas"``,
        ``"shapely.geometry"``, ``"matplotlib.pyplot"``).
    what : str
        What needs it, for the message (e.g. ``"accessibility.travel_time_matrix"``).

    Returns
    -------
    module
        The imported module.

    Raises
    ------
    MissingExtraError
        (an ``ImportError``) when the module cannot be imported.
    KeyError
        ``module``'s top-level package is not in :data:`EXTRAS` (a programming error).
    """
    top = module.split(".", 1)[0]
    _, extra = EXTRAS[top]
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingExtraError(top, extra, what, cause=str(e)) from e
