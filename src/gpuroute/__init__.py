"""gpuroute: exact route planning on road networks, GPU for every heavy phase, numba CPU twin.

Public API
----------
RoadGraph, GraphError, ParseError, INF, NO_PREDECESSOR
    Graph model and named sentinels (:mod:`gpuroute.graph`).
load_dimacs, ...
    Loaders (:mod:`gpuroute.io`).
datasets
    Shipped real networks (``datasets.load("ny" | "ny-time" | "monaco")``) and ``datasets.tile``.
sssp, sssp_full
    One-to-all shortest paths, every algorithm on CPU and GPU (:mod:`gpuroute.sssp`).
shortest_path, extract_path, nearest_node
    Point-to-point queries and helpers (:mod:`gpuroute.paths`).
gpu_available, resolve_device, GPUUnavailableError
    Device selection (:mod:`gpuroute.backend`).
"""
from . import datasets
from .backend import GPUUnavailableError, gpu_available, resolve_device
from .graph import INF, NO_PREDECESSOR, GraphError, ParseError, RoadGraph
from .io import load_dimacs
from .sssp import sssp, sssp_full

__version__ = "0.1.0"

__all__ = ["RoadGraph", "GraphError", "ParseError", "INF", "NO_PREDECESSOR", "load_dimacs", "datasets",
           "sssp", "sssp_full", "gpu_available", "resolve_device", "GPUUnavailableError", "__version__"]
