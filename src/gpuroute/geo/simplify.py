"""Douglas-Peucker line simplification: the one implementation in gpuroute (issue 19).

Douglas and Peucker, "Algorithms for the reduction of the number of points required to represent a
digitized line or its caricature", Cartographica 10(2), 1973.

Tolerance semantics (every caller): points are planar ``x, y`` in **metres** (lon/lat callers project
first with :func:`gpuroute.geo.segments.local_xy`, the equirectangular frame centred on the first point,
which is exact enough for route and isochrone geometry at city scale). A span ``i .. j`` keeps its
interior point farthest from the *segment* ``[p_i, p_j]`` (distance to the segment, clamped to its ends;
to ``p_i`` when the two ends coincide; the first such point on ties) iff that distance is strictly
greater than the tolerance, and recurses on both halves; otherwise every interior point of the span is
dropped. Tolerance 0 keeps every point that is off the segment by any amount.

The recursion runs on an explicit stack (numba: no recursive njit functions), so the kernels here may be
called from other cached kernels.

Public API
----------
douglas_peucker_keep, dp_span, dp_rings, simplify_lonlat
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .segments import local_xy


@njit(cache=True)
def dp_span(x, y, lo, hi, last, tol2, keep, stack):
    """Douglas-Peucker of one span: marks ``keep[p] = True`` for the interior points kept.

    The span is the polyline ``p_lo, p_lo+1, ..., p_hi-1`` closed by the point ``x[last], y[last]``
    (``last == hi`` for an open polyline; ``last`` = the ring start to close a ring whose closing vertex is
    implicit). Interior positions are ``lo < p < hi``; the two ends are not marked.

    Parameters
    ----------
    x, y : float64 (n,)
        Planar coordinates, metres.
    lo, hi, last : int
        Positions into ``x, y`` (``lo < hi``; ``last`` stands in for position ``hi``).
    tol2 : float
        The tolerance squared (metres²).
    keep : bool (n,)
        Receives the kept interior points (others are left as they are).
    stack : int64 (>= 2 * (hi - lo + 1),)
        Scratch space.
    """
    stack[0] = lo
    stack[1] = hi
    top = 2
    while top > 0:
        top -= 2
        i = stack[top]
        j = stack[top + 1]
        if j - i < 2:
            continue
        ax = x[i]
        ay = y[i]
        jj = last if j == hi else j
        dx = x[jj] - ax
        dy = y[jj] - ay
        ll = dx * dx + dy * dy
        best = -1.0
        m = -1
        for p in range(i + 1, j):
            px = x[p] - ax
            py = y[p] - ay
            if ll > 0.0:
                t = (px * dx + py * dy) / ll
                if t < 0.0:
                    t = 0.0
                elif t > 1.0:
                    t = 1.0
                px -= t * dx
                py -= t * dy
            d = px * px + py * py
            if d > best:
                best = d
                m = p
        if best > tol2:
            keep[m] = True
            stack[top] = i
            stack[top + 1] = m
            stack[top + 2] = m
            stack[top + 3] = j
            top += 4


@njit(cache=True)
def douglas_peucker_keep(x, y, tolerance):
    """Douglas-Peucker on an open planar polyline: the boolean mask of the points kept.

    Parameters
    ----------
    x, y : float64 (k,)
        Planar coordinates, metres.
    tolerance : float
        Metres (see the module docstring); ``>= 0``.

    Returns
    -------
    bool ndarray (k,)
        First and last point always kept (for ``k >= 1``).
    """
    k = x.size
    keep = np.zeros(k, dtype=np.bool_)
    if k == 0:
        return keep
    keep[0] = True
    keep[k - 1] = True
    if k > 2:
        stack = np.empty(2 * (k + 1), dtype=np.int64)
        dp_span(x, y, 0, k - 1, k - 1, tolerance * tolerance, keep, stack)
    return keep


@njit(cache=True)
def dp_rings(x, y, off, kept_ring, anchor, tol, keep):
    """Douglas-Peucker between consecutive anchors of closed rings.

    Ring ``r`` is the vertices ``off[r] .. off[r+1]-1``; its closing vertex is its start (implicit). Each
    ring with ``kept_ring[r]`` is cut at its anchors (``anchor[off[r]]`` should be set: the ring start is
    always a cut) and every piece, from one anchor to the next (the last back to the start), is simplified
    with :func:`dp_span`; anchors are always kept. Rings not kept are left untouched in ``keep``.

    Parameters
    ----------
    x, y : float64 (nv,)
        Planar coordinates, metres.
    off : int64 (R + 1,)
    kept_ring : bool (R,)
    anchor : bool (nv,)
    tol : float
        Metres.
    keep : bool (nv,)
        Receives the vertices kept.
    """
    longest = 0
    for r in range(off.shape[0] - 1):
        longest = max(longest, off[r + 1] - off[r])
    stack = np.empty(2 * (longest + 2), dtype=np.int64)
    tol2 = tol * tol
    for r in range(off.shape[0] - 1):
        if not kept_ring[r]:
            continue
        a = off[r]
        n = off[r + 1] - a
        prev = 0
        for k in range(1, n + 1):
            if k < n and not anchor[a + k]:
                continue
            keep[a + prev] = True
            # span prev .. k (k == n: the ring start again)
            dp_span(x, y, a + prev, a + k, a + k if k < n else a, tol2, keep, stack)
            prev = k


def simplify_lonlat(lonlat, tolerance_m):
    """Douglas-Peucker simplification of a lon/lat polyline, tolerance in metres.

    Projects with :func:`gpuroute.geo.segments.local_xy` centred on the first point, keeps with
    :func:`douglas_peucker_keep`, then drops consecutive duplicate points.

    Parameters
    ----------
    lonlat : array_like float64, shape (k, 2)
        Degrees (WGS84), longitude first.
    tolerance_m : float
        Metres, ``>= 0``.

    Returns
    -------
    ndarray float64 (j, 2)
        The kept points, first and last always (inputs of at most 2 points come back unchanged).

    Raises
    ------
    ValueError
        If ``tolerance_m`` is negative or not finite.
    """
    tol = float(tolerance_m)
    if not (tol >= 0.0 and np.isfinite(tol)):
        raise ValueError(f"simplification tolerance must be a finite number of metres >= 0, got {tolerance_m!r}")
    pts = np.asarray(lonlat, dtype=np.float64).reshape(-1, 2)
    if pts.shape[0] <= 2:
        return pts
    x, y = local_xy(pts[:, 0], pts[:, 1], float(pts[0, 0]), float(pts[0, 1]))
    out = pts[douglas_peucker_keep(np.ascontiguousarray(x), np.ascontiguousarray(y), tol)]
    new = np.ones(out.shape[0], dtype=bool)
    new[1:] = np.any(out[1:] != out[:-1], axis=1)
    return out[new] if new.sum() >= 2 else out[[0, -1]]


__all__ = ["douglas_peucker_keep", "dp_span", "dp_rings", "simplify_lonlat"]
