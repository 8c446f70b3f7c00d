"""The routing service: an :class:`Engine` answering OSRM v5 ``route``, ``table`` and ``nearest``
requests with dicts shaped like osrm-backend's JSON (``docs/http.md``), over a contraction hierarchy and
OSRM-style snapping onto road segments (:mod:`gpuroute.geo.segments`).

Public API
----------
Engine
    ``Engine.open("monaco")`` (a dataset name, an OSM file, a saved graph or a RoadGraph), or
    ``Engine.open(DIR)`` on a dataset directory (``gpuroute build``, :mod:`gpuroute.engine.dataset`:
    routes over the customized overlay, turn-aware, and ``customize`` for live traffic,
    :mod:`gpuroute.engine.traffic`), then ``route``, ``table``, ``nearest``; ``capabilities`` says which
    algorithm serves which service; ``limits`` from ``config.SERVE_*``.
EngineError
    ``.code`` (an OSRM error code) and ``.message``; ``to_json()`` is the error body.
ERROR_CODES, GEOMETRIES, OVERVIEWS, ROUTE_ANNOTATIONS, TABLE_ANNOTATIONS
    The OSRM vocabulary (:mod:`gpuroute.engine.osrm`).
"""
from .engine import Engine
from .osrm import ERROR_CODES, GEOMETRIES, OVERVIEWS, ROUTE_ANNOTATIONS, TABLE_ANNOTATIONS, EngineError

__all__ = ["Engine", "EngineError", "ERROR_CODES", "GEOMETRIES", "OVERVIEWS", "ROUTE_ANNOTATIONS",
           "TABLE_ANNOTATIONS"]
