"""The nearest service (OSRM ``/nearest/v1``) past validation: the ``number`` nearest segments of one
snapped coordinate, among every segment (small strongly connected components included, as osrm-routed's
nearest; routes, tables, trips and isochrones snap to the largest component).
"""
from __future__ import annotations

import numpy as np

from ..osrm import waypoints

__all__ = ["nearest", "segment_index"]


def segment_index(engine, exclusion=None):
    """The segment index ``/nearest`` snaps on: every segment (``component="any"``), those of ``exclusion``'s
    usable arcs when given, less the arcs live traffic closed."""
    from ...geo.segments import SegmentIndex

    idx = engine._snap_index(exclusion, "any")  # without the arcs live traffic closed
    if idx is not None:
        return idx
    return engine.segments if engine.segments.component == "any" else SegmentIndex.of(engine.graph, "any")


def nearest(engine, index, found, *, number, radius=None, bearing=None, approach=None):
    """The OSRM nearest answer.

    Parameters
    ----------
    engine : Engine
    index : SegmentIndex
        :func:`segment_index`'s.
    found : PhantomSet
        The coordinate snapped on ``index`` (one point; its input coordinate is the query's).
    number : int
        Validated, >= 1.
    radius : float or None
        Metres (validated).
    bearing : (float, float) or None
        Validated.
    approach : {"unrestricted", "curb"} or None

    Returns
    -------
    dict
        ``{"code": "Ok", "waypoints": [...]}``, nearest first, each with ``nodes`` (the segment's two OSM
        node ids), ``hint``, ``distance``, ``name``, ``location``.
    """
    if number > 1:
        found = index.nearest_checked(float(found.input_lon[0]), float(found.input_lat[0]), number, radius=radius,
                                      bearing=bearing, approach="unrestricted" if approach is None else approach)
    seg = found.segment[found.first]
    ids = engine._node_ids
    nodes = ids[index.u[seg]], ids[index.v[seg]]
    return {"code": "Ok", "waypoints": waypoints(found, engine._fingerprint, engine._names,
                                                 nodes=np.column_stack(nodes))}
