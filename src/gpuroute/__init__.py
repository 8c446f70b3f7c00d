"""gpuroute: exact route planning on road networks, GPU for every heavy phase, numba CPU twin.

Public API
----------
RoadGraph, TurnRestrictions, Unit, GraphError, ParseError, INF, INF_U32, NO_PREDECESSOR
    Graph model, units and named sentinels (:mod:`gpuroute.graph`).
open_graph
    A shipped dataset name, a file or a saved graph directory.
load_dimacs, load_metis, load_osm, load_tntp, save_graph, load_graph
    Loaders and the graph store (:mod:`gpuroute.io`).
config
    Every tunable, grouped by family (:mod:`gpuroute.config`).
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
ContractionHierarchy
    Contraction hierarchies (CU-CH on the GPU or sequential), queries, PHAST trees, tables (:mod:`gpuroute.ch`).
Engine
    The routing service behind ``gpuroute serve``: OSRM v5 route, table, nearest, trip, isochrone and
    customize over a dataset (:mod:`gpuroute.engine`).
tours, tsp, cvrp
    Tours on a cost matrix: TSP and CVRP by GPU/CPU local search (:mod:`gpuroute.tours`).
accessibility
    pandana-style aggregations and nearest POIs of every node, travel-time matrices and isochrones of many
    origins (:mod:`gpuroute.accessibility`); their scale-out over Dask is :mod:`gpuroute.distributed`.
"""
from . import accessibility, config, datasets, tours
from .backend import GPUUnavailableError, gpu_available, resolve_device
from .backend.device_graph import DeviceGraph
from .ch import ContractionHierarchy
from .crp import Metric, Overlay, Profile, TurnTable
from .engine import Engine
from .geo import OutOfBoundsError, SnapError, haversine_m, nearest_node, nearest_nodes
from .graph import INF, INF_U32, NO_PREDECESSOR, GraphError, ParseError, RoadGraph, TurnRestrictions, Unit
from .io import load_dimacs, load_graph, load_metis, load_osm, load_tntp, save_graph
from .opener import open_graph
from .partition import Partition
from .query import PathResult, extract_path, path_arcs, path_length, shortest_path
from .sssp import ALGORITHMS, SSSPQuery, sssp, sssp_full
from .tours import cvrp, tsp

__version__ = "0.2.0"

__all__ = ["accessibility", "RoadGraph", "TurnRestrictions", "Unit", "GraphError", "ParseError", "INF", "INF_U32", "NO_PREDECESSOR",
           "config", "datasets", "open_graph", "load_dimacs", "load_metis", "load_osm", "load_tntp", "load_graph",
           "save_graph", "sssp", "sssp_full", "SSSPQuery", "ALGORITHMS", "shortest_path", "PathResult",
           "extract_path", "path_arcs", "path_length", "nearest_node", "nearest_nodes", "haversine_m",
           "OutOfBoundsError", "SnapError", "DeviceGraph", "gpu_available", "resolve_device", "GPUUnavailableError",
           "Partition", "Overlay", "Metric", "Profile", "TurnTable", "ContractionHierarchy", "Engine", "tours", "tsp",
           "cvrp",
           "__version__"]
