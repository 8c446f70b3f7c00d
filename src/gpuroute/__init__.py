"""gpuroute: exact route planning on road networks, GPU for every heavy phase, numba CPU twin.

Public API
----------
RoadGraph, TurnRestrictions, Unit, GraphError, ParseError, INF, INF_U32, NO_PREDECESSOR
    Graph model, units and named sentinels (:mod:`gpuroute.graph`).
open_graph
    A shipped dataset name, a file or a saved graph directory.
load_dimacs, load_metis, load_osm, load_tntp, save_graph, load_graph
    Loaders and the graph store (:mod:`gpuroute.io`).
datasets
    Shipped real networks (``datasets.load("ny" | "ny-time" | "monaco")``) and ``datasets.tile``.
sssp, sssp_full, SSSPQuery, ALGORITHMS
    One-to-all shortest paths, every algorithm on CPU and GPU (:mod:`gpuroute.sssp`).
shortest_path, PathResult, extract_path, path_arcs, path_length
    Point-to-point queries (:mod:`gpuroute.query`).
nearest_node, nearest_nodes, haversine_m, OutOfBoundsError, SnapError
    Geometry and snapping (:mod:`gpuroute.geo`).
DeviceGraph, gpu_available, resolve_device, GPUUnavailableError
    The GPU: explicit device-resident graphs and device selection (:mod:`gpuroute.backend`).
Partition
    Nested multi-level partitions (KaHIP or inertial flow) (:mod:`gpuroute.partition`).
Overlay, Metric, Profile, TurnTable
    Customizable Route Planning: overlay, metrics and turns, customization, traffic updates, turn-aware
    queries (:mod:`gpuroute.crp`).
accessibility
    pandana-style aggregations and nearest POIs of every node, travel-time matrices and isochrones of many
    origins (:mod:`gpuroute.accessibility`); their scale-out over Dask is :mod:`gpuroute.distributed`.
"""
from . import accessibility, config, datasets
from .backend import GPUUnavailableError, gpu_available, resolve_device
from .backend.device_graph import DeviceGraph
from .crp import Metric, Overlay, Profile, TurnTable
from .geo import OutOfBoundsError, SnapError, haversine_m, nearest_node, nearest_nodes
from .graph import INF, INF_U32, NO_PREDECESSOR, GraphError, ParseError, RoadGraph, TurnRestrictions, Unit
from .io import load_dimacs, load_graph, load_metis, load_osm, load_tntp, save_graph
from .opener import open_graph
from .partition import Partition
from .query import PathResult, extract_path, path_arcs, path_length, shortest_path
from .sssp import ALGORITHMS, SSSPQuery, sssp, sssp_full

__version__ = "0.2.0"

__all__ = ["accessibility", "RoadGraph", "TurnRestrictions", "Unit", "GraphError", "ParseError", "INF", "INF_U32", "NO_PREDECESSOR",
           "config", "datasets", "open_graph", "load_dimacs", "load_metis", "load_osm", "load_tntp", "load_graph",
           "save_graph", "sssp", "sssp_full", "SSSPQuery", "ALGORITHMS", "shortest_path", "PathResult",
           "extract_path", "path_arcs", "path_length", "nearest_node", "nearest_nodes", "haversine_m",
           "OutOfBoundsError", "SnapError", "DeviceGraph", "gpu_available", "resolve_device", "GPUUnavailableError",
           "Partition", "Overlay", "Metric", "Profile", "TurnTable",
           "__version__"]
