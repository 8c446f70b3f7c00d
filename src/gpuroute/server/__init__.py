"""The HTTP adapter: an OSRM v5-compatible routing server over :class:`gpuroute.engine.Engine`.

:func:`create_app` builds the Starlette application (``GET``/``POST`` ``/route/v1``, ``/table/v1``,
``/nearest/v1`` and ``GET /health``, and a web page at ``/``: :mod:`gpuroute.server.web`); ``gpuroute
serve`` (:mod:`gpuroute.cli.serve`) runs it under uvicorn. The module :mod:`gpuroute.server.app` documents the URL grammar, the options, the error codes
and the limits. Needs the ``serve`` extra (starlette, uvicorn, orjson, polyline).
"""
from __future__ import annotations

from .app import DEFAULT_LIMITS, SERVICES, OSRMError, create_app, parse_coordinates, parse_request

__all__ = ["DEFAULT_LIMITS", "SERVICES", "OSRMError", "create_app", "parse_coordinates", "parse_request"]
