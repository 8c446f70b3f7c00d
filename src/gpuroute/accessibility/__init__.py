"""Accessibility analytics (pandana's queries, without a precompute step) and many-origin travel times.

Public API
----------
aggregate(index, node_ids, values, radius, *, type, decay, device)
    For every node, an aggregate (sum, mean, count, std, min, max; flat, linear or exponential decay) of
    the values placed within a network radius of it (:mod:`.api`).
nearest_pois(index, poi_node_ids, radius, k, *, device)
    For every node, the distances and ids of its k nearest points of interest within a radius.
travel_time_matrix(index, origins, destinations, ...), travel_time_blocks(...)
    Many-to-many travel times as a long DataFrame (``from_id``, ``to_id``, ``travel_time``, as r5py
    returns them), streamed in blocks of origins (:mod:`.matrix`).
isochrones(engine, origins, contours, ...)
    Isochrone polygons of many origins in one GeoDataFrame (:mod:`.matrix`).
accessibility_map, travel_time_histogram
    Matplotlib PNGs (:mod:`.plot`).
TYPES, DECAY_NAMES, EMPTY, NO_POI, STRATEGIES
    The accepted names and the named fills.

``index`` is a :class:`~gpuroute.graph.RoadGraph` or a :class:`~gpuroute.ch.ContractionHierarchy` built
from it; radii and travel times are in the weight's unit. Nothing here imports pandas, CuPy or matplotlib
until a function needs it. Scale-out over a Dask cluster: :mod:`gpuroute.distributed`.
"""
from __future__ import annotations

from .api import DECAY_NAMES, EMPTY, NO_POI, STRATEGIES, TYPES, aggregate, nearest_pois
from .index import AccessIndex, reverse_hierarchy
from .matrix import isochrones, travel_time_blocks, travel_time_matrix
from .plot import accessibility_map, travel_time_histogram

__all__ = ["aggregate", "nearest_pois", "travel_time_matrix", "travel_time_blocks", "isochrones",
           "accessibility_map", "travel_time_histogram", "AccessIndex", "reverse_hierarchy", "TYPES",
           "DECAY_NAMES", "EMPTY", "NO_POI", "STRATEGIES"]
