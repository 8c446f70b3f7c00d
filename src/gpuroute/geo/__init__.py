"""Geometry: one Earth radius, one haversine, and snapping points onto the network.

Every great-circle length in gpuroute (OSM arc lengths, A* potentials, snap distances, tiling) uses
:data:`EARTH_RADIUS_M` through :func:`haversine_m` (NumPy) or its numba twin
:func:`gpuroute.geo.kernels.gc_metres` (``gc_metres_pairs`` for arrays). Every line simplification uses
the one Douglas-Peucker of :mod:`gpuroute.geo.simplify` (tolerance in metres).

Public API
----------
EARTH_RADIUS_M, haversine_m, unit_vectors
nearest_node, nearest_nodes, Snapper, OutOfBoundsError, SnapError, SNAPPING (from :mod:`.snap`)
"""
from __future__ import annotations

import numpy as np

#: Mean Earth radius in metres (IUGG R1), used by every great-circle length in gpuroute.
EARTH_RADIUS_M = 6371008.8


def haversine_m(lon1, lat1, lon2, lat2):
    """Great-circle distance in metres (haversine, :data:`EARTH_RADIUS_M`).

    Parameters
    ----------
    lon1, lat1, lon2, lat2 : float or array_like of float
        Degrees (WGS84); broadcast together.

    Returns
    -------
    float64 ndarray (broadcast shape) or float
    """
    p1 = np.radians(lat1)
    p2 = np.radians(lat2)
    dl = np.radians(np.subtract(lon2, lon1))
    a = np.sin(0.5 * (p2 - p1)) ** 2 + np.cos(p1) * np.cos(p2) * np.sin(0.5 * dl) ** 2
    return 2.0 * EARTH_RADIUS_M * np.arcsin(np.sqrt(np.minimum(a, 1.0)))


#: The same function under the name the path helpers used (``gpuroute.paths.great_circle_m``).
great_circle_m = haversine_m


def unit_vectors(lon, lat):
    """3-D unit vectors (k, 3) of lon/lat points in degrees: the Euclidean nearest neighbour among them is
    the great-circle nearest one (the chord grows monotonically with the arc)."""
    lo = np.radians(lon)
    la = np.radians(lat)
    c = np.cos(la)
    if lo.ndim != 1 or la.shape != lo.shape:  # scalars, other shapes: as column_stack lays them out
        return np.column_stack((c * np.cos(lo), c * np.sin(lo), np.sin(la)))
    out = np.empty((lo.size, 3))  # the columns computed contiguous (the same ufunc loops), then placed
    out[:, 0] = c * np.cos(lo)
    out[:, 1] = c * np.sin(lo)
    out[:, 2] = np.sin(la)
    return out


from .snap import SNAPPING, OutOfBoundsError, SnapError, Snapper, nearest_node, nearest_nodes  # noqa: E402

__all__ = ["EARTH_RADIUS_M", "haversine_m", "great_circle_m", "unit_vectors", "nearest_node", "nearest_nodes",
           "Snapper", "OutOfBoundsError", "SnapError", "SNAPPING"]
