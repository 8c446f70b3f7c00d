"""GeoJSON of routes (RFC 7946): the path as a LineString and the snapped endpoints as Points."""
from __future__ import annotations

import numpy as np


def _r(x):
    return round(float(x), 7)


def route_feature_collection(graph, result, endpoints, *, properties=None):
    """A FeatureCollection of one route.

    Parameters
    ----------
    graph : RoadGraph
        With coordinates (lon/lat; planar coordinates are written as they are).
    result : PathResult
    endpoints : sequence of 2 dicts
        Per endpoint: ``node`` (int), ``query`` ([x, y]), ``offset`` (snap distance), optional ``name``.
    properties : dict, optional
        Extra properties of the LineString (times, device, ...).

    Returns
    -------
    dict
        ``features``: the LineString (when reachable: the route's cost in the weight's integer unit under
        ``"duration"`` for a time weight, ``"distance"`` for a length, ``"cost"`` otherwise, as OSRM
        names them; unit, quantity, weight, arcs, nodes, source/target node and external id, method,
        device, the unit's human reading ``approx`` and ``si``, the cost in seconds or metres to 10
        significant digits (no float noise such as ``191.70000000000002``)) and two Points (role,
        node, id, query, snap offset).
    """
    ext = (lambda v: int(graph.node_ids[v])) if graph.node_ids is not None else int
    unit = result.unit
    features = []
    reachable = result.reachable
    if reachable:
        line = [[_r(x), _r(y)] for x, y in graph.coords[np.asarray(result.nodes)]]
        if len(line) == 1:  # source == target: a LineString needs two positions
            line = line * 2
        src, dst = int(endpoints[0]["node"]), int(endpoints[1]["node"])
        key = "duration" if unit.is_duration else ("distance" if unit.is_distance else "cost")
        props = {"graph": graph.name, "weight": result.weight, "unit": unit.symbol, "quantity": unit.quantity,
                 key: int(result.distance), "arcs": int(len(result.arcs)), "nodes": int(len(result.nodes)),
                 "source": src, "target": dst, "source_id": ext(src), "target_id": ext(dst),
                 "method": result.method, "device": result.device, "settled": int(result.settled)}
        reading = unit.describe(int(result.distance))
        if reading:
            props["approx"] = reading.lstrip("~")
        if unit.scale is not None:
            props["si"] = float(f"{float(result.distance) * unit.scale:.10g}")  # metres or seconds, no float noise
        props.update(properties or {})
        features.append({"type": "Feature", "geometry": {"type": "LineString", "coordinates": line},
                         "properties": props})
    for role, e in zip(("source", "target"), endpoints, strict=True):
        v = int(e["node"])
        x, y = graph.coords[v]
        props = {"role": role, "node": v, "id": ext(v), "query": list(e["query"]),
                 "snap_offset_m" if not graph.is_planar else "snap_offset": round(float(e["offset"]), 2)}
        if e.get("name"):
            props["name"] = e["name"]
        features.append({"type": "Feature", "geometry": {"type": "Point", "coordinates": [_r(x), _r(y)]},
                         "properties": props})
    return {"type": "FeatureCollection", "features": features,
            "properties": {"graph": graph.name, "reachable": bool(reachable)}}
