"""Snapping points to network nodes (the ``route`` command's default; OSRM-style snapping onto segments
comes with the service layer).

By default a point snaps only to nodes of the graph's largest strongly connected component, as OSRM's
``snapping=default`` does: a point that lands next to a tiny disconnected piece of an OSM extract (a
parking aisle, a road cut by the extract's border) would otherwise give "no route". ``snapping="any"``
considers every node. ``radius`` bounds the snap distance.
"""
from __future__ import annotations

import numpy as np

from .. import config
from ..graph.constants import INDEX_DTYPE

#: Accepted values of ``snapping``.
SNAPPING = ("default", "any")


class OutOfBoundsError(ValueError):
    """A query point lies outside the graph's bounding box (expanded by a small margin).

    Attributes
    ----------
    bbox : tuple of float
        ``(min_x, min_y, max_x, max_y)`` of the expanded box (lon/lat degrees or planar units).
    """

    def __init__(self, message, bbox):
        super().__init__(message)
        self.bbox = tuple(float(b) for b in bbox)


class SnapError(ValueError):
    """No node to snap to within the radius (OSRM's ``NoSegment``).

    Attributes
    ----------
    index : int
        Position of the point in the query.
    distance : float
        Distance to the nearest allowed node (metres, or planar units).
    """

    def __init__(self, message, index, distance):
        super().__init__(message)
        self.index = int(index)
        self.distance = float(distance)


def largest_scc_mask(graph):
    """Boolean (n,) mask of the largest strongly connected component (ties: the one with the smallest
    node id), computed once per graph (:meth:`RoadGraph.derived`)."""

    def build():
        import scipy.sparse as sp
        from scipy.sparse.csgraph import connected_components

        n = graph.n_nodes
        if n == 0:
            return np.zeros(0, dtype=bool)
        a = sp.csr_matrix((np.ones(graph.n_arcs, dtype=np.int8), graph.head, graph.first_out), shape=(n, n))
        _, labels = connected_components(a, directed=True, connection="strong")
        sizes = np.bincount(labels)
        return labels == int(np.argmax(sizes))

    return graph.derived(("largest_scc",), build)


class Snapper:
    """A k-d tree over a graph's nodes (all, or the largest strongly connected component) and the graph's
    expanded bounding box. Built once per (graph, snapping) by :meth:`of`.

    lon/lat graphs: the tree holds 3-D unit vectors, so the Euclidean nearest neighbour is the
    great-circle nearest one (no projection error); planar graphs: x/y, Euclidean.
    """

    def __init__(self, graph, snapping="default"):
        from scipy.spatial import cKDTree

        if snapping not in SNAPPING:
            raise ValueError(f"snapping must be one of {SNAPPING}, got {snapping!r}")
        xy = graph.coords
        self.planar = graph.is_planar
        lo, hi = xy.min(axis=0), xy.max(axis=0)
        margin = (config.SNAP_BBOX_MARGIN_FRACTION * float(np.max(hi - lo)) if self.planar
                  else config.SNAP_BBOX_MARGIN_DEG)
        self.bbox = (lo[0] - margin, lo[1] - margin, hi[0] + margin, hi[1] + margin)
        self.candidates = (np.arange(graph.n_nodes, dtype=np.int64) if snapping == "any"
                           else np.flatnonzero(largest_scc_mask(graph)))
        pts = xy[self.candidates]
        from . import unit_vectors

        self.tree = cKDTree(pts if self.planar else unit_vectors(pts[:, 0], pts[:, 1]))

    @classmethod
    def of(cls, graph, snapping="default"):
        return graph.derived(("snapper", snapping), lambda: cls(graph, snapping))


def _require_coords(graph, what):
    if graph.coords is None:
        raise ValueError(f"{what} needs node coordinates, but graph {graph.name!r} has none "
                         "(load it with coordinates, e.g. a DIMACS .co file)")


def nearest_nodes(graph, lons, lats, *, snapping="default", radius=None):
    """Snap many points to their nearest graph nodes.

    Parameters
    ----------
    graph : RoadGraph
        Must have coordinates. lon/lat graphs: points in degrees, nearest by great-circle distance;
        planar graphs (``graph.is_planar``): x/y, Euclidean.
    lons, lats : array_like of float, shape (k,)
        Longitudes and latitudes (or x and y); broadcast together.
    snapping : {"default", "any"}
        ``"default"``: only nodes of the largest strongly connected component (every snapped pair is
        then connected both ways); ``"any"``: every node.
    radius : float, optional
        Largest allowed snap distance (metres, or planar units); None: no limit.

    Returns
    -------
    nodes : ndarray int32, shape (k,)
    offsets : ndarray float64, shape (k,)
        Distance from each point to its node: great-circle metres (lon/lat) or planar units.

    Raises
    ------
    ValueError
        No coordinates or no nodes, a non-finite coordinate, an unknown ``snapping``.
    OutOfBoundsError
        A point outside the graph's bounding box expanded by ``config.SNAP_BBOX_MARGIN_DEG`` degrees
        (``SNAP_BBOX_MARGIN_FRACTION`` of the box for planar graphs); the message gives point and box.
    SnapError
        The nearest allowed node of a point is farther than ``radius``.
    """
    from . import haversine_m, unit_vectors

    _require_coords(graph, "nearest_nodes")
    if graph.n_nodes == 0:
        raise ValueError(f"graph {graph.name!r} has no nodes to snap to")
    x, y = np.broadcast_arrays(np.asarray(lons, dtype=np.float64), np.asarray(lats, dtype=np.float64))
    x = np.atleast_1d(x).ravel()
    y = np.atleast_1d(y).ravel()
    bad = ~(np.isfinite(x) & np.isfinite(y))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"point {i} ({x[i]}, {y[i]}) has a non-finite coordinate")
    s = Snapper.of(graph, snapping)
    x0, y0, x1, y1 = s.bbox
    out = (x < x0) | (x > x1) | (y < y0) | (y > y1)
    if out.any():
        i = int(np.flatnonzero(out)[0])
        names = ("x", "y") if s.planar else ("lon", "lat")
        raise OutOfBoundsError(
            f"point {i} ({names[0]}={x[i]}, {names[1]}={y[i]}) lies outside graph {graph.name!r}'s bounding "
            f"box {names[0]} [{x0:.6f}, {x1:.6f}] x {names[1]} [{y0:.6f}, {y1:.6f}] (margin included)",
            s.bbox)
    if s.planar:
        offsets, idx = s.tree.query(np.column_stack((x, y)))
        offsets = np.asarray(offsets, dtype=np.float64)
        nodes = s.candidates[idx]
    else:
        _, idx = s.tree.query(unit_vectors(x, y))
        nodes = s.candidates[idx]
        c = graph.coords[nodes]
        offsets = haversine_m(x, y, c[:, 0], c[:, 1])
    offsets = np.asarray(offsets, dtype=np.float64)
    if radius is not None:
        far = offsets > float(radius)
        if far.any():
            i = int(np.flatnonzero(far)[0])
            unit = "units" if s.planar else "m"
            raise SnapError(f"point {i} ({x[i]}, {y[i]}): the nearest {'routable ' if snapping == 'default' else ''}"
                            f"node is {offsets[i]:,.1f} {unit} away, beyond the radius {float(radius):,.1f} {unit}",
                            i, offsets[i])
    return np.asarray(nodes, dtype=INDEX_DTYPE), offsets


def nearest_node(graph, lon, lat, *, snapping="default", radius=None):
    """Snap one point to its nearest graph node: ``(node, offset)`` (see :func:`nearest_nodes`).

    Raises
    ------
    ValueError, OutOfBoundsError, SnapError
        As :func:`nearest_nodes`.
    """
    if np.ndim(lon) or np.ndim(lat):
        raise ValueError("nearest_node takes one point; use nearest_nodes for arrays")
    nodes, offs = nearest_nodes(graph, [lon], [lat], snapping=snapping, radius=radius)
    return int(nodes[0]), float(offs[0])
