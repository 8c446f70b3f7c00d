"""Shipped real road networks (see ATTRIBUTION.md), ``tile()`` for scale proxies, and the rule that
finds the companion graph carrying another metric (the DIMACS distance and time graphs are separate
files). ``datasets`` loads through :mod:`gpuroute.io`; ``io`` never imports ``datasets``."""
from __future__ import annotations

import logging
import os
import re

from .tile import tile

__all__ = ["DATASETS", "DATA_DIR", "names", "path_of", "load", "tile", "for_weight", "COMPANIONS"]

log = logging.getLogger(__name__)

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")

#: name -> (loader kind, file, description)
DATASETS = {
    "ny": ("dimacs", "USA-road-d.NY.gr.gz", "USA-road-d.NY: New York City, distance (DIMACS 9, TIGER/Line)"),
    "ny-time": ("dimacs", "USA-road-t.NY.gr.gz", "USA-road-t.NY: New York City, travel time (DIMACS 9)"),
    "monaco": ("osm", "monaco.osm.pbf", "Monaco OpenStreetMap extract (2016-03-05), car-basic profile, ODbL"),
}


def names():
    """Names accepted by :func:`load`."""
    return list(DATASETS)


def path_of(name):
    """Absolute path of a shipped dataset's main file. Raises KeyError for an unknown name."""
    if name not in DATASETS:
        raise KeyError(f"unknown dataset {name!r}; shipped datasets: {names()}")
    return os.path.join(DATA_DIR, DATASETS[name][1])


def load(name):
    """Load a shipped road network.

    Parameters
    ----------
    name : {"ny", "ny-time", "monaco"}

    Returns
    -------
    RoadGraph
        ``ny``: 264,346 nodes, 730,100 arcs after dropping 3,746 parallel arcs, weight ``distance`` in
        DIMACS units (~0.1 m), lon/lat coordinates. ``ny-time``: same network, weight ``travel_time``
        (DIMACS time units). ``monaco``: OSM, gpuroute's native ``car-basic`` profile, ``travel_time`` (ds)
        and ``distance`` (m); for OSRM's car.lua read the file with ``load_osm(path_of("monaco"),
        profile="car")``.

    Raises
    ------
    KeyError
        Unknown name (the message lists the shipped ones).
    """
    kind, fname, _ = DATASETS[name] if name in DATASETS else (None, None, None)
    path = path_of(name)
    if kind == "dimacs":
        from ..io.dimacs import load_dimacs

        g = load_dimacs(path)
    else:
        from ..io.osm import load_osm

        g = load_osm(path, profile="car-basic")
    g.name = name
    return g


#: Shipped datasets that hold the other metric of the same network: (dataset, wanted weight) -> dataset.
COMPANIONS = {
    ("ny", "travel_time"): "ny-time",
    ("ny-time", "distance"): "ny",
}


def for_weight(spec, weight):
    """The graph to open so that it carries ``weight``: ``ny`` + ``travel_time`` -> ``ny-time`` (and back);
    a DIMACS ``USA-road-d.X.gr[.gz]`` file + ``travel_time`` -> the ``USA-road-t.X`` file beside it (and
    back) when it exists; otherwise ``spec`` itself.

    Parameters
    ----------
    spec : str
        A dataset name or a path.
    weight : str or None
        The weight wanted (None: ``spec``).
    """
    if weight is None:
        return spec
    if (spec, weight) in COMPANIONS:
        other = COMPANIONS[spec, weight]
        log.info("weight %s: opening %r instead of %r", weight, other, spec)
        return other
    letter = {"distance": "d", "travel_time": "t"}.get(weight)
    d, base = os.path.split(os.fspath(spec))
    m = re.match(r"^USA-road-([dt])\.(.+\.gr(\.gz)?)$", base)
    if letter and m and m.group(1) != letter and os.path.isfile(spec):
        sibling = os.path.join(d, f"USA-road-{letter}.{m.group(2)}")
        if os.path.isfile(sibling):
            log.info("weight %s: opening %s instead of %s", weight, sibling, spec)
            return sibling
    return spec
