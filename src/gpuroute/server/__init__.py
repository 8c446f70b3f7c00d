"""The HTTP adapter: an OSRM v5-compatible routing server over :class:`gpuroute.engine.Engine`.

:func:`create_app` builds the Starlette application (``GET``/``POST`` ``/route/v1``, ``/table/v1``,
``/nearest/v1``, ``/trip/v1``, ``/isochrone/v1``, ``POST /customize`` and ``GET /health``, and a web
page at ``/``: :mod:`gpuroute.server.web`); :func:`warm_up` runs every service once before the server
says it is ready (:mod:`gpuroute.server.warmup`); ``gpuroute serve`` (:mod:`gpuroute.cli.serve`) runs
it under uvicorn as :mod:`gpuroute.server.http` configures it. The module :mod:`gpuroute.server.app`
documents the URL grammar, the options, the error codes, the limits and which origins may write.
Needs the ``serve`` extra (starlette, uvicorn, orjson, polyline).
"""
from __future__ import annotations

from .app import (
    DEFAULT_LIMITS,
    SERVICES,
    OSRMError,
    create_app,
    normalize_origin,
    parse_coordinates,
    parse_request,
)
from .warmup import warm_up

__all__ = ["DEFAULT_LIMITS", "SERVICES", "OSRMError", "create_app", "normalize_origin", "parse_coordinates",
           "parse_request", "warm_up"]
