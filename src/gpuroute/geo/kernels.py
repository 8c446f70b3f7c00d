"""numba kernels of :mod:`gpuroute.geo`: great-circle and planar lengths (one Earth radius)."""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from . import EARTH_RADIUS_M

_DEG = math.pi / 180.0


@njit(cache=True)
def gc_metres(lon1, lat1, lon2, lat2):
    """Great-circle distance in metres between two lon/lat points in degrees (haversine formula,
    :data:`gpuroute.geo.EARTH_RADIUS_M`): the numba twin of :func:`gpuroute.geo.haversine_m`, and the one
    compiled haversine in gpuroute (the same bits from Python, from :func:`gc_metres_pairs` and inside any
    kernel).

    Parameters
    ----------
    lon1, lat1, lon2, lat2 : float
        Degrees (WGS84).

    Returns
    -------
    float
        Metres.
    """
    p1 = lat1 * _DEG
    p2 = lat2 * _DEG
    s1 = math.sin(0.5 * (p2 - p1))
    s2 = math.sin(0.5 * (lon2 - lon1) * _DEG)
    a = s1 * s1 + math.cos(p1) * math.cos(p2) * (s2 * s2)
    return 2.0 * EARTH_RADIUS_M * math.asin(math.sqrt(min(a, 1.0)))


@njit(cache=True)
def gc_metres_pairs(lon1, lat1, lon2, lat2):
    """:func:`gc_metres` of every pair ``i`` of four float64 (c,) arrays (degrees): float64 (c,) metres."""
    out = np.empty(lon1.size)
    for i in range(lon1.size):
        out[i] = gc_metres(lon1[i], lat1[i], lon2[i], lat2[i])
    return out


@njit(cache=True, inline="always")
def point_distance(x1, y1, x2, y2, planar):
    if planar:
        return math.hypot(x2 - x1, y2 - y1)
    return gc_metres(x1, y1, x2, y2)


@njit(cache=True)
def arc_lengths(tail, head, x, y, planar):
    """Straight-line length of every arc, float64 (m,): great-circle metres, or planar units."""
    m = tail.shape[0]
    out = np.empty(m, dtype=np.float64)
    for a in range(m):
        u = tail[a]
        v = head[a]
        out[a] = point_distance(x[u], y[u], x[v], y[v], planar)
    return out


@njit(cache=True)
def min_weight_per_length(tail, head, weight, x, y, planar):
    """``min over arcs with length > 0 of weight / length`` (float64; ``inf`` if no such arc)."""
    best = np.inf
    for a in range(tail.shape[0]):
        u = tail[a]
        v = head[a]
        d = point_distance(x[u], y[u], x[v], y[v], planar)
        if d > 0.0:
            r = weight[a] / d
            if r < best:
                best = r
    return best
