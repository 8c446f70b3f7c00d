"""The table service (OSRM ``/table/v1``) past validation: one many-to-many search between the sources'
and the destinations' phantoms (:func:`gpuroute.engine.algorithms.table_search`: the overlay's, turn-aware
and on the current metric, else the hierarchy's), the fallback speed for unreachable cells, and the OSRM
answer built from the matrices.
"""
from __future__ import annotations

import numpy as np

from ...geo import haversine_m
from ..algorithms import table_search
from ..osrm import matrix_array, matrix_or_none, waypoints

__all__ = ["table"]


def table(engine, phantoms, *, sources, destinations, annotations, fallback_speed=None, scale_factor=None,
          matrices="lists", exclusion=None):
    """The OSRM table answer.

    Parameters
    ----------
    engine : Engine
    phantoms : PhantomSet
        Every coordinate of the request, snapped.
    sources, destinations : ndarray int64
        Validated coordinate indices.
    annotations : tuple of str
        Validated: some of ``"duration"``, ``"distance"`` (the engine has durations when asked).
    fallback_speed, scale_factor : float or None
        Validated numbers > 0.
    matrices : {"lists", "arrays"}
        :func:`gpuroute.engine.osrm.matrix_or_none` or :func:`gpuroute.engine.osrm.matrix_array`.
    exclusion : Exclusion, optional
        Resolved ``exclude=`` / avoids: the overlay's many-to-many on its snapshot.

    Returns
    -------
    dict
        ``{"code": "Ok", "durations", "distances", "sources", "destinations"[, "fallback_speed_cells"]}``.
    """
    src, dst = sources, destinations
    need_dur = "duration" in annotations
    need_len = "distance" in annotations
    as_matrix = matrix_or_none if matrices == "lists" else matrix_array
    res = table_search(engine, exclusion).many_to_many(phantoms.take(src), phantoms.take(dst), need_dur=need_dur,
                                                       need_len=need_len)
    dur, length = res.duration, res.distance
    reach = np.isfinite(res.cost)
    fb_cells = []
    if fallback_speed is not None and not reach.all():
        rows, cols = np.nonzero(~reach)
        lon, lat = phantoms.input_lon, phantoms.input_lat
        crow = haversine_m(lon[src[rows]], lat[src[rows]], lon[dst[cols]], lat[dst[cols]])
        if dur is not None:
            dur = dur.copy()
            dur[rows, cols] = crow / float(fallback_speed)
        if length is not None:
            length = length.copy()
            length[rows, cols] = crow
        fb_cells = np.column_stack((rows, cols)).tolist()
    out = {"code": "Ok"}
    if need_dur:
        if scale_factor is not None:
            dur = dur * float(scale_factor)
        out["durations"] = as_matrix(dur)
    if need_len:
        out["distances"] = as_matrix(length)
    if fb_cells:
        out["fallback_speed_cells"] = fb_cells
    used = sorted(set(src.tolist()) | set(dst.tolist()))
    wps = dict(zip(used, waypoints(phantoms, engine._fingerprint, engine._names, used), strict=True))
    given = set()

    def wp(i):  # one waypoint per coordinate, copied where the coordinate comes again
        w = wps[i]
        if i not in given:
            given.add(i)
            return w
        return {**w, "location": list(w["location"])}

    out["sources"] = [wp(i) for i in src.tolist()]
    out["destinations"] = [wp(j) for j in dst.tolist()]
    return out
