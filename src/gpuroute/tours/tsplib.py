"""TSPLIB instances: reading (``vrplib``) and TSPLIB's distance rules.

Distance functions follow Reinelt, "TSPLIB 95" (the format documentation), section 2: ``EUC_2D``
(Euclidean, rounded to the nearest integer), ``CEIL_2D`` (rounded up), ``ATT`` (pseudo-Euclidean) and
``GEO`` (geographical, coordinates DDD.MM degrees and minutes, earth radius 6378.388 km). ``GEO``
truncates the degrees (as Concorde does and TSPLIB's published optima assume).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["TSPInstance", "read_tsplib", "distance_matrix", "euc_2d", "ceil_2d", "att", "geo", "nint",
           "EDGE_WEIGHT_TYPES"]


def nint(x):
    """TSPLIB's ``nint``: round half up, ``(int)(x + 0.5)``; int64 array."""
    return np.floor(np.asarray(x, dtype=np.float64) + 0.5).astype(np.int64)


def _diff(xy):
    xy = np.asarray(xy, dtype=np.float64)
    if xy.ndim != 2 or xy.shape[1] < 2:
        raise ValueError(f"coordinates must be (n, 2), got shape {xy.shape}")
    dx = xy[:, None, 0] - xy[None, :, 0]
    dy = xy[:, None, 1] - xy[None, :, 1]
    return dx, dy


def euc_2d(xy):
    """EUC_2D: ``nint(sqrt(dx^2 + dy^2))``. ``xy`` float (n, 2); int64 (n, n)."""
    dx, dy = _diff(xy)
    return nint(np.sqrt(dx * dx + dy * dy))


def ceil_2d(xy):
    """CEIL_2D: ``ceil(sqrt(dx^2 + dy^2))``; int64 (n, n)."""
    dx, dy = _diff(xy)
    return np.ceil(np.sqrt(dx * dx + dy * dy)).astype(np.int64)


def att(xy):
    """ATT pseudo-Euclidean: ``r = sqrt((dx^2 + dy^2) / 10)``, ``t = nint(r)``, ``t + 1`` if ``t < r``
    else ``t``; int64 (n, n)."""
    dx, dy = _diff(xy)
    r = np.sqrt((dx * dx + dy * dy) / 10.0)
    t = nint(r)
    return np.where(t < r, t + 1, t).astype(np.int64)


def geo(xy):
    """GEO: ``xy[:, 0]`` latitude, ``xy[:, 1]`` longitude as DDD.MM; int64 (n, n) kilometres,
    ``(int)(RRR * acos(0.5 ((1 + q1) q2 - (1 - q1) q3)) + 1)`` with ``PI = 3.141592``, RRR = 6378.388."""
    xy = np.asarray(xy, dtype=np.float64)
    pi = 3.141592
    deg = np.trunc(xy)
    mins = xy - deg
    rad = pi * (deg + 5.0 * mins / 3.0) / 180.0
    lat, lon = rad[:, 0], rad[:, 1]
    q1 = np.cos(lon[:, None] - lon[None, :])
    q2 = np.cos(lat[:, None] - lat[None, :])
    q3 = np.cos(lat[:, None] + lat[None, :])
    arg = np.clip(0.5 * ((1.0 + q1) * q2 - (1.0 - q1) * q3), -1.0, 1.0)
    d = (6378.388 * np.arccos(arg) + 1.0).astype(np.int64)
    np.fill_diagonal(d, 0)
    return d


EDGE_WEIGHT_TYPES = {"EUC_2D": euc_2d, "CEIL_2D": ceil_2d, "ATT": att, "GEO": geo}


def distance_matrix(xy, edge_weight_type):
    """The TSPLIB matrix for coordinates ``xy`` (n, 2) under ``edge_weight_type``; int64 (n, n).

    Raises ``ValueError`` for a type not in :data:`EDGE_WEIGHT_TYPES`.
    """
    fn = EDGE_WEIGHT_TYPES.get(str(edge_weight_type).upper())
    if fn is None:
        raise ValueError(f"unsupported EDGE_WEIGHT_TYPE {edge_weight_type!r}; "
                         f"supported: {sorted(EDGE_WEIGHT_TYPES)}")
    d = fn(xy)
    np.fill_diagonal(d, 0)
    return d


@dataclass
class TSPInstance:
    """A TSPLIB instance: ``costs`` int64 (n, n), ``coords`` float (n, 2), and the best known tour
    (int64 (n,), 0-based, or None) and its cost (or None) from the ``.sol``/``.opt.tour`` beside it."""

    name: str
    costs: np.ndarray
    coords: np.ndarray
    edge_weight_type: str
    best_tour: np.ndarray | None = None
    best_cost: int | None = None
    optimal: bool | None = None


def read_tsplib(path):
    """Read a TSPLIB/VRPLIB-style TSP instance (``.tsp`` or ``.vrp``) with ``vrplib`` and build its matrix.

    The best known tour is read from ``<stem>.sol`` (VRPLIB: one route over stops 1..n-1, stop 0
    implied first) or ``<stem>.opt.tour`` (TSPLIB TOUR_SECTION, 1-based) when present.

    Raises ``ImportError`` without ``vrplib`` (``pip install gpuroute[tours]``), ``ValueError`` for an
    unsupported edge weight type.
    """
    from ..extras import require

    vrplib = require("vrplib", "read_tsplib")
    path = Path(path)
    inst = vrplib.read_instance(str(path), compute_edge_weights=False)
    ewt = str(inst.get("edge_weight_type", "")).upper()
    xy = np.asarray(inst["node_coord"], dtype=np.float64)
    costs = distance_matrix(xy, ewt)
    best_tour = best_cost = optimal = None
    sol = path.with_suffix(".sol")
    opt = path.with_suffix(".opt.tour")
    if sol.exists():
        s = vrplib.read_solution(str(sol))
        best_tour = np.array([0] + list(s["routes"][0]), np.int64)
        best_cost = int(s["cost"]) if "cost" in s else None
        optimal = bool(s.get("optimal", False)) if "optimal" in s else None
    elif opt.exists():
        lines = opt.read_text().split("TOUR_SECTION", 1)[1].split()
        ids = []
        for tok in lines:
            v = int(tok)
            if v == -1:
                break
            ids.append(v - 1)
        best_tour = np.array(ids, np.int64)
        idx = best_tour
        best_cost = int(costs[idx, np.roll(idx, -1)].sum())
        optimal = True
    return TSPInstance(name=str(inst.get("name", path.stem)), costs=costs, coords=xy, edge_weight_type=ewt,
                       best_tour=best_tour, best_cost=best_cost, optimal=optimal)
