"""The short parse of the commonest request, ``GET /route/v1/{profile}/{lon,lat;lon,lat...}[.json]?{query}``:
the query string parsed once, its coordinates on each request (issue 20, deliverable 3).

A client sends the same options on every request (``overview=full&steps=false``, say) with other
coordinates. :class:`RouteTemplates` keeps, per ``(profile, query string, number of coordinates)``, the
:class:`~gpuroute.server.parse.ServiceCall` the general parse (:meth:`gpuroute.server.app._Server.target`
and :meth:`~gpuroute.server.app._Server.call`: :func:`~gpuroute.server.parse.parse_request`, the record's
checks) made of the first such request, and answers the next ones with that record and their own
coordinates, plain decimals read by ``float`` (correctly rounded, as the general grammar's
:func:`~gpuroute.server.parse.coordinate_array` reads them) and checked by the same function
(:func:`gpuroute.engine.params.check_coordinates`). The record is then the one the general parse makes:
the options kept (:data:`TEMPLATE_OPTIONS`) are checked against nothing but their own values and the
number of coordinates (no radius, bearing, approach, hint or avoid, whose checks read the coordinates or
their count per item). Anything else -- another URL shape, a number that is not plain decimal, a
percent sign, a coordinate out of range, an error of any kind -- is left to the general parse (``None``),
which answers it as before: the fast path only ever answers what the general one answers the same way
(``tests/server/test_fastpath.py`` compares their bytes on random requests).
"""
from __future__ import annotations

import re

from ..engine.params import check_coordinates
from .parse import OSRMError, ServiceCall, parse_query

__all__ = ["RouteTemplates", "TEMPLATE_OPTIONS", "MAX_TEMPLATES"]

#: The ``/route`` options a template keeps: values checked on their own (the record's value does not depend
#: on the coordinates').
TEMPLATE_OPTIONS = frozenset({"alternatives", "steps", "annotations", "geometries", "overview", "continue_straight",
                              "generate_hints", "skip_waypoints"})
#: Most templates kept per server (distinct profile, query string and coordinate count); past it, new
#: shapes take the general parse.
MAX_TEMPLATES = 256

# plain decimals only (no sign but '-', no exponent: an 'e' could be read as a format suffix by the
# general grammar), so that the path's coordinates and ``.json`` split one way only
_NUM = rb"-?[0-9]{1,3}(?:\.[0-9]{1,17})?"
_PATH = re.compile(rb"/route/v1/([A-Za-z0-9_\-]{1,64})/(" + _NUM + rb"," + _NUM + rb"(?:;" + _NUM + rb"," + _NUM
                   + rb")*)(?:\.json)?")


#: A template entry for a query string with other options than :data:`TEMPLATE_OPTIONS` (never templated).
_GENERAL = object()


class RouteTemplates:
    """``/route`` records by query string (see the module notes); one per :class:`~gpuroute.server.app._Server`.

    Parameters
    ----------
    server : gpuroute.server.app._Server
        Its general parse makes each template (``target`` and ``call``).
    """

    def __init__(self, server):
        self.server = server
        self.templates = {}
        self._limits = dict(server.limits)  # what the templates were checked against

    def call(self, scope):
        """The :class:`~gpuroute.server.parse.ServiceCall` of a ``GET`` request's ``scope`` (ASGI: ``raw_path``,
        ``query_string``), the general parse's, or None where the general parse is to take the request (any
        other shape, any error: it raises them)."""
        raw = scope.get("raw_path")
        if not raw or not raw.startswith(b"/route/v1/"):
            return None
        m = _PATH.fullmatch(raw)
        if m is None:
            return None
        text = m.group(2).decode("ascii")
        n = text.count(";") + 1
        key = (m.group(1), scope.get("query_string") or b"", n)
        if self.server.limits != self._limits:  # the limits changed: every template is checked again
            self.templates.clear()
            self._limits = dict(self.server.limits)
        t = self.templates.get(key)
        if t is None:
            t = self._template(key, scope)
        if t is None or t is _GENERAL:
            return None
        try:  # plain decimals (the pattern's): Python's float() reads them as the general grammar's array does
            # (both correctly rounded); checked by the general parse's own function, the same values and errors
            coords = check_coordinates([item.split(",") for item in text.split(";")])
        except Exception:  # a value out of range: the general parse names it
            return None
        p = t.params
        # the template's record with these coordinates (a frozen record's fields, set past its guard)
        q = object.__new__(type(p))
        d = q.__dict__
        d.update(p.__dict__)
        d["coords"] = coords
        return ServiceCall(t.service, t.profile, q, t.generate_hints, t.skip_waypoints)

    def _template(self, key, scope):
        """The general parse's call of a first request of its shape, kept when its options are all
        :data:`TEMPLATE_OPTIONS`; None when the request errs or has other options."""
        _, query, _ = key
        if len(self.templates) >= MAX_TEMPLATES:
            return None
        try:
            options = parse_query(query.decode("latin-1"))
            if not set(options) <= TEMPLATE_OPTIONS:  # options of the coordinates': the general parse's, always
                self.templates[key] = _GENERAL
                return None
            call = self.server.call(*self.server.target(scope))
        except OSRMError:
            return None
        if call.service != "route" or call.params.n != key[2]:
            return None
        self.templates[key] = call
        return call
