"""Many origins: travel-time matrices as long DataFrames (``from_id``, ``to_id``, ``travel_time``: the
layout r5py's ``TravelTimeMatrix`` returns), streamed in blocks of origins so that the whole matrix never
has to fit in (device or host) memory, and isochrones of many origins in one GeoDataFrame.

A block is one many-to-many table: the hierarchy's (:meth:`gpuroute.ch.ContractionHierarchy.table`:
batched PHAST on the GPU, CH buckets on the CPU), or, for a bare graph on the CPU, one Dijkstra tree per
origin (:func:`gpuroute.sssp`) read at the destinations.
"""
from __future__ import annotations

import os

import numpy as np

from .. import config
from ..backend import resolve_device
from ..extras import require
from ..graph.constants import INF
from ..graph.units import QUANTITY_UNITS, factor_to
from .api import frame_xy, is_frame, resolve_nodes
from .index import AccessIndex

UNITS = ("native", *QUANTITY_UNITS)


def _points(ix, pts, what, snapping):
    """``(nodes int64 (k,), ids (k,))``: node ids are their own ids; a frame's ids are its ``id`` column
    (r5py's convention) or else its index."""
    nodes = resolve_nodes(ix, pts, what, snapping)
    if is_frame(pts):
        ids = np.asarray(pts["id"]) if "id" in pts.columns else np.asarray(pts.index)
    else:
        ids = nodes
    return nodes, ids


def _factor(ix, unit):
    """Multiplier from the weight's unit to ``unit``."""
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {UNITS}, got {unit!r}")
    if unit == "native":
        return 1.0
    if ix.graph is None:
        raise ValueError("unit conversion needs the graph's units; the hierarchy was loaded without its graph")
    return factor_to(ix.graph.units[ix.weight], unit, f"unit={unit!r} ({ix.weight!r})")


def _table_block(ix, src, dst, dev):
    if dev == "gpu" or ix.ch is not None:
        return np.asarray(ix.hierarchy(dev).table(src, dst, device=dev), dtype=np.int64)
    from ..sssp import sssp

    d = sssp(ix.graph, src, weight=ix.weight, algorithm="dijkstra", device="cpu")
    return np.asarray(d, dtype=np.int64).reshape(src.size, -1)[:, dst]


def travel_time_blocks(index, origins, destinations=None, *, weight=None, device="auto", block=None, unit="native",
                       cutoff=None, dropna=False, snapping="default"):
    """Yield the travel-time matrix as long DataFrames, one per block of origins (see
    :func:`travel_time_matrix` for the parameters).

    Yields
    ------
    pandas.DataFrame
        ``from_id``, ``to_id``, ``travel_time`` (float64; NaN where unreachable or beyond ``cutoff``), rows
        origin-major in the order given.
    """
    for _, df in _blocks(index, origins, destinations, weight, device, block, unit, cutoff, dropna, snapping):
        yield df


def _blocks(index, origins, destinations, weight, device, block, unit, cutoff, dropna, snapping):
    """``(first origin's position, DataFrame)`` per block."""
    pd = require("pandas", "accessibility travel-time matrices")

    ix = AccessIndex(index, weight)
    o_nodes, o_ids = _points(ix, origins, "origins", snapping)
    if destinations is None:
        d_nodes, d_ids = o_nodes, o_ids
    else:
        d_nodes, d_ids = _points(ix, destinations, "destinations", snapping)
    f = _factor(ix, unit)
    dev = resolve_device(device)
    if block is None:
        block = max(1, int(config.ACCESS_MATRIX_BLOCK_ITEMS) // max(d_nodes.size, 1))
    block = int(block)
    if block < 1:
        raise ValueError(f"block must be >= 1 origins, got {block}")
    if cutoff is not None and not (isinstance(cutoff, (int, float, np.number)) and cutoff >= 0):
        raise ValueError(f"cutoff must be a number >= 0 (in unit {unit!r}), got {cutoff!r}")
    for lo in range(0, o_nodes.size, block):
        src = o_nodes[lo:lo + block]
        d = _table_block(ix, src, d_nodes, dev)
        t = d.astype(np.float64) * f
        t[d == INF] = np.nan
        if cutoff is not None:
            t[t > cutoff] = np.nan
        df = pd.DataFrame({"from_id": np.repeat(o_ids[lo:lo + block], d_nodes.size),
                           "to_id": np.tile(d_ids, src.size), "travel_time": t.ravel()})
        if dropna:
            df = df[df["travel_time"].notna()].reset_index(drop=True)
        yield lo, df


def travel_time_matrix(index, origins, destinations=None, *, weight=None, device="auto", block=None, unit="native",
                       cutoff=None, dropna=False, snapping="default", out=None):
    """Travel times (or distances) from every origin to every destination as a long DataFrame, as r5py's
    ``TravelTimeMatrix``.

    Parameters
    ----------
    index : RoadGraph or ContractionHierarchy
    origins, destinations : array_like of int or (Geo)DataFrame
        Node ids, or points snapped to their nearest nodes; a frame's ids are its ``id`` column (else its
        index). ``destinations=None``: the origins.
    weight : str, optional
    device : {"auto", "cpu", "gpu"}
        The GPU builds a hierarchy from a bare graph once (kept on the graph).
    block : int, optional
        Origins per block (default: ``config.ACCESS_MATRIX_BLOCK_ITEMS`` cells a block).
    unit : {"native", "s", "min", "h", "m", "km"}
        ``travel_time``'s unit: the weight's own, or converted by its scale (r5py reports minutes).
    cutoff : float, optional
        Times above it become NaN (in ``unit``).
    dropna : bool
        Drop the unreachable (NaN) pairs.
    snapping : {"default", "any"}
    out : str, optional
        A directory: write each block as ``block_<first origin>.parquet`` (pyarrow) instead of returning
        the concatenation, and return the list of paths.

    Returns
    -------
    pandas.DataFrame or list of str

    Raises
    ------
    ValueError
        Bad ``unit``, ``block``, ``cutoff``; a frame without points.
    IndexError
        A node id outside the graph.
    ImportError
        (:class:`gpuroute.extras.MissingExtraError`) without pandas; ``out`` without pyarrow.
    """
    pd = require("pandas", "accessibility.travel_time_matrix")

    blocks = _blocks(index, origins, destinations, weight, device, block, unit, cutoff, dropna, snapping)
    if out is None:
        frames = [df for _, df in blocks]
        if not frames:
            return pd.DataFrame({"from_id": [], "to_id": [], "travel_time": np.zeros(0)})
        return pd.concat(frames, ignore_index=True)
    from ..store.atomic import atomic_file

    os.makedirs(out, exist_ok=True)
    paths = []
    for lo, df in blocks:
        p = os.path.join(os.path.abspath(out), f"block_{lo:09d}.parquet")
        with atomic_file(p, "wb") as f:
            df.to_parquet(f, index=False)
        paths.append(p)
    return paths


def isochrones(engine, origins, contours, *, metric="duration", ids=None, **options):
    """Isochrones of many origins (:meth:`gpuroute.engine.Engine.isochrone` for each: one bounded
    one-to-all search and one raster of polygons per origin) in one GeoDataFrame.

    Parameters
    ----------
    engine : gpuroute.engine.Engine
    origins : sequence of (lon, lat), (k, 2) array, or (Geo)DataFrame of points
    contours : float or sequence of float
        Seconds (``metric="duration"``) or metres (``"distance"``).
    metric : {"duration", "distance"}
    ids : sequence, optional
        One id per origin (default: a frame's ``id`` column or index, else 0 .. k-1).
    **options
        Passed to ``Engine.isochrone`` (``polygons``, ``denoise``, ``generalize``, ``radiuses``, ...).

    Returns
    -------
    geopandas.GeoDataFrame (EPSG:4326), or a pandas DataFrame of shapely geometries without geopandas
        One row per (origin, contour): ``origin_id``, ``contour``, ``metric``, ``geometry``.

    Raises
    ------
    gpuroute.engine.EngineError
        As ``Engine.isochrone`` (naming the bad origin's position in ``origin``).

    Notes
    -----
    The searches run one origin at a time, each as ``Engine.isochrone`` runs it: on an engine with an
    overlay (a dataset directory, or an extract read with a Lua profile) the turn-aware search on its
    current metric (turn costs, restrictions, traffic), else the hierarchy's bounded ``within``; batching
    them as PHAST trees (one pass for many origins) is left to a follow-up.
    """
    pd = require("pandas", "accessibility.isochrones")
    shapely_geometry = require("shapely.geometry", "accessibility.isochrones")

    from ..engine.osrm import EngineError

    if is_frame(origins):
        x, y = frame_xy(origins, "origins")
        if ids is None:
            ids = np.asarray(origins["id"]) if "id" in origins.columns else np.asarray(origins.index)
    else:
        xy = np.asarray(origins, dtype=np.float64).reshape(-1, 2)
        x, y = xy[:, 0], xy[:, 1]
    ids = np.arange(x.size) if ids is None else np.asarray(ids)
    if ids.size != x.size:
        raise ValueError(f"ids must hold one id per origin: {x.size} origins, {ids.size} ids")
    rows = []
    for i in range(x.size):
        try:
            fc = engine.isochrone((float(x[i]), float(y[i])), contours, metric=metric, **options)
        except EngineError as e:
            raise EngineError(e.code, f"origin {i} ({x[i]}, {y[i]}): {e.message}") from e
        for feat in fc["features"]:
            rows.append({"origin_id": ids[i], "contour": feat["properties"]["contour"], "metric": metric,
                         "geometry": shapely_geometry.shape(feat["geometry"])})
    df = pd.DataFrame(rows, columns=["origin_id", "contour", "metric", "geometry"])
    try:
        import geopandas as gpd
    except ImportError:  # pragma: no cover - geopandas is optional
        return df
    return gpd.GeoDataFrame(df, geometry="geometry", crs="EPSG:4326")

