"""gpuroute: exact route planning on road networks, GPU for every heavy phase, numba CPU twin.

Public API
----------
RoadGraph, GraphError, ParseError, INF, NO_PREDECESSOR
    Graph model and named sentinels (:mod:`gpuroute.graph`).
load_dimacs, load_metis, load_osm, open_graph, save_graph, load_graph
    Loaders and the graph store (:mod:`gpuroute.io`).
datasets
    Shipped real networks (``datasets.load("ny" | "ny-time" | "monaco")``) and ``datasets.tile``.
sssp, sssp_full
    One-to-all shortest paths, every algorithm on CPU and GPU (:mod:`gpuroute.sssp`).
shortest_path, PathResult, extract_path, nearest_node, nearest_nodes, OutOfBoundsError
    Point-to-point queries (Dijkstra, bidirectional, A*) and snapping (:mod:`gpuroute.paths`).
gpu_available, resolve_device, GPUUnavailableError
    Device selection (:mod:`gpuroute.backend`).
"""
from . import config, datasets
from .backend import GPUUnavailableError, gpu_available, resolve_device
from .graph import INF, NO_PREDECESSOR, GraphError, ParseError, RoadGraph
from .io import load_dimacs, load_graph, load_metis, load_osm, open_graph, save_graph
from .paths import OutOfBoundsError, PathResult, extract_path, nearest_node, nearest_nodes, shortest_path
from .sssp import ALGORITHMS, sssp, sssp_full

__version__ = "0.1.0"

__all__ = ["RoadGraph", "GraphError", "ParseError", "INF", "NO_PREDECESSOR", "config", "datasets",
           "load_dimacs", "load_metis", "load_osm", "load_graph", "save_graph", "open_graph",
           "sssp", "sssp_full", "ALGORITHMS", "shortest_path", "PathResult", "extract_path", "nearest_node",
           "nearest_nodes", "OutOfBoundsError", "gpu_available", "resolve_device", "GPUUnavailableError",
           "__version__"]
