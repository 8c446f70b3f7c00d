"""The trip service (OSRM ``/trip/v1``) past validation: the cost matrix between the snapped waypoints
(:func:`gpuroute.engine.algorithms.table_search`'s many-to-many, the table service's search), the visiting
order (:func:`gpuroute.tours.tsp_exact` up to ``config.TOUR_EXACT_MAX_N`` stops, else
:func:`gpuroute.tours.tsp`), then the route through the waypoints in that order (the route service, with
``continue_straight=False``, through the same phantoms on the same metric snapshot).

Past ``config.TOUR_EXACT_MAX_N`` stops, when the tour search will run on the GPU (``tsp``'s
``device="auto"`` rule), the matrix is asked for on the device (``many_to_many(..., on_device=True)``): the
hierarchy's GPU table hands its CuPy cost matrix straight to :func:`gpuroute.tours.tsp`, which checks and
searches it there; only the order comes back (issue 23). On the CPU, or from the overlay's table, it is a
NumPy matrix as before.
"""
from __future__ import annotations

import math

import numpy as np

from ... import config
from ...backend import get_array_module, resolve_device
from ..algorithms import metric_snapshot, table_search
from ..osrm import EngineError
from .route import route

__all__ = ["trip", "tour", "tour_on_device"]


def tour_on_device(n):
    """True when :func:`tour` of ``n`` stops will search on the GPU (past ``config.TOUR_EXACT_MAX_N`` stops,
    from ``config.TOUR_GPU_AUTO_MIN_N``, a GPU usable): the trip then asks for its matrix on the device."""
    return n > config.TOUR_EXACT_MAX_N and resolve_device(
        "auto", gpu_implemented=n >= config.TOUR_GPU_AUTO_MIN_N) == "gpu"


def trip(engine, phantoms, params, *, exclusion=None):
    """The OSRM trip answer (see :meth:`gpuroute.engine.Engine.trip`).

    The coordinates are snapped once (``phantoms``) and the metric read once
    (:func:`gpuroute.engine.algorithms.metric_snapshot`): the matrix and the legs search that one snapshot,
    so a ``/customize`` landing during the request changes neither, and the legs are the route service's
    through ``phantoms`` in the trip's order (:meth:`gpuroute.geo.segments.PhantomSet.take`), nothing
    snapped, checked or resolved again.

    Parameters
    ----------
    engine : Engine
    phantoms : PhantomSet
        The snapped coordinates (n >= 2 points), in input order.
    params : gpuroute.engine.params.TripParams
        The checked record (``roundtrip``, ``source``, ``destination``, ``time_limit`` and the route options
        of the legs: ``steps``, ``annotations``, ``geometries``, ``overview``).
    exclusion : Exclusion, optional
        The resolved ``exclude=`` / avoids (:mod:`gpuroute.engine.exclude`) of the matrix and the legs.

    Returns
    -------
    dict
        ``{"code": "Ok", "trips": [route], "waypoints": [...]}`` (waypoints in input order, each with
        ``waypoint_index`` and ``trips_index``).

    Raises
    ------
    EngineError
        ``NoTrips`` (no trip reaches every waypoint), and the route's errors.
    """
    p = params
    n = phantoms.n_points
    snap = metric_snapshot(engine, exclusion)  # one metric for the matrix and the legs
    search = table_search(engine, exclusion, snap)
    cost = search.many_to_many(phantoms, phantoms, on_device=tour_on_device(n)).cost
    order = tour(cost, p.roundtrip, p.source == "first", p.destination == "last", p.time_limit)
    try:
        res = route(engine, phantoms.take(p.leg_points(order)), steps=p.steps, annotations=p.annotations,
                    geometries=p.geometries, overview=p.overview, continue_straight=False, exclusion=exclusion,
                    snap=snap)
    except EngineError as e:
        if e.code == "NoRoute":
            raise EngineError("NoTrips", "No trip visiting all destinations possible.") from None
        raise
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)
    waypoints = []
    for i in range(n):
        wp = dict(res["waypoints"][int(position[i])])
        wp["waypoint_index"] = int(position[i])
        wp["trips_index"] = 0
        waypoints.append(wp)
    return {"code": "Ok", "trips": res["routes"], "waypoints": waypoints}


def tour(cost, roundtrip, fixed_start, fixed_end, time_limit=None):
    """The visiting order (int list, each index once) of a trip on a cost matrix (inf: unreachable);
    EngineError NoTrips when every order needs an unreachable leg.

    Up to ``config.TOUR_EXACT_MAX_N`` stops the order is optimal (:func:`gpuroute.tours.tsp_exact`,
    which avoids unreachable legs whenever an order can); past it :func:`gpuroute.tours.tsp` searches
    for ``time_limit`` seconds (None: ``SERVE_TRIP_TIME_PER_STOP_S`` x n, clamped to
    [``SERVE_TRIP_TIME_MIN_S``, ``SERVE_TRIP_TIME_MAX_S``], and on the CPU no longer than until
    ``SERVE_TRIP_STALL_KICKS_PER_STOP`` x n kicks in a row have not improved the tour: ``tsp``'s ``stall``).

    ``cost`` is float64 (n, n), NumPy or CuPy: a CuPy matrix is completed on the device (unreachable cells
    made dear, the diagonal zeroed) and handed to :func:`gpuroute.tours.tsp` there; a few scalars and the
    legs' reachability (n booleans) come back, never the matrix (up to ``TOUR_EXACT_MAX_N`` stops, where
    the exact search runs on the host, it is copied: at most 12 x 12 values)."""
    n = cost.shape[0]
    xp = get_array_module(cost)
    if xp is not np and n <= config.TOUR_EXACT_MAX_N:
        cost = cost.get()
        xp = np
    finite = xp.isfinite(cost)
    if roundtrip and not bool(finite.all()):  # a tour returns everywhere: every pair must be reachable
        raise EngineError("NoTrips", "No trip visiting all destinations possible.")
    if fixed_start and fixed_end:  # first .. last (a roundtrip then returns: a constant last leg)
        start, end = 0, n - 1
    elif fixed_end and roundtrip:  # OSRM: a roundtrip with only destination=last starts there
        start = end = n - 1
    else:
        start = end = None
    if n <= config.TOUR_EXACT_MAX_N:
        from ...tours import tsp_exact

        res = tsp_exact(cost, start=start, end=end, roundtrip=bool(roundtrip))
        if not math.isfinite(res.cost):
            raise EngineError("NoTrips", "No trip visiting all destinations possible.")
        return [int(v) for v in res.tour]
    from ...tours import tsp

    stall = None
    if time_limit is None:
        time_limit = min(max(config.SERVE_TRIP_TIME_PER_STOP_S * n, config.SERVE_TRIP_TIME_MIN_S),
                         config.SERVE_TRIP_TIME_MAX_S)
        if not tour_on_device(n):  # the CPU search: stop once it stalls (the GPU's chains have no such bound)
            stall = max(1, int(config.SERVE_TRIP_STALL_KICKS_PER_STOP * n))
    big = (float(cost[finite].max()) if bool(finite.any()) else 1.0) * (n + 1) + 1.0
    m = xp.where(finite, cost, big)
    xp.fill_diagonal(m, 0.0)
    res = tsp(m, start=start, end=end, time_limit=time_limit, seed=0, stall=stall)
    order = [int(v) for v in np.asarray(res.tour, dtype=np.int64)]
    if sorted(order) != list(range(n)):
        raise RuntimeError(f"the tour search returned {order!r}, not an order of {n} stops")
    if start is not None and start == end and order[0] != start:  # a closed tour from ``start``
        k = order.index(start)
        order = order[k:] + order[:k]
    if start is not None and start != end and (order[0] != start or order[-1] != end):
        raise RuntimeError(f"the tour search returned {order!r}, not a path from {start} to {end}")
    a = order + [order[0]] if roundtrip else order
    if not bool(finite[xp.asarray(np.array(a[:-1])), xp.asarray(np.array(a[1:]))].all()):  # every leg reachable
        raise EngineError("NoTrips", "No trip visiting all destinations possible.")
    return order
