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
import importlib
import sys
import types

# Every public name is imported on first use (PEP 562): ``import gpuroute`` costs a few milliseconds, and
# a program -- ``gpuroute serve`` above all (issue 20: start to first answer) -- imports only the modules
# it runs (the engine needs neither the accessibility, tours, sssp nor partition families to answer).
#: public name -> (module, attribute; None: the module itself)
_LAZY = {
    "accessibility": (".accessibility", None), "config": (".config", None), "datasets": (".datasets", None),
    "tours": (".tours", None),
    "GPUUnavailableError": (".backend", "GPUUnavailableError"), "gpu_available": (".backend", "gpu_available"),
    "resolve_device": (".backend", "resolve_device"), "DeviceGraph": (".backend.device_graph", "DeviceGraph"),
    "ContractionHierarchy": (".ch", "ContractionHierarchy"),
    **{n: (".crp", n) for n in ("Metric", "Overlay", "Profile", "TurnTable")},
    "Engine": (".engine", "Engine"),
    **{n: (".geo", n) for n in ("OutOfBoundsError", "SnapError", "haversine_m", "nearest_node", "nearest_nodes")},
    **{n: (".graph", n) for n in ("INF", "INF_U32", "NO_PREDECESSOR", "GraphError", "ParseError", "RoadGraph",
                                  "TurnRestrictions", "Unit")},
    **{n: (".io", n) for n in ("load_dimacs", "load_graph", "load_metis", "load_osm", "load_tntp", "save_graph")},
    "open_graph": (".opener", "open_graph"),
    "Partition": (".partition", "Partition"),
    **{n: (".query", n) for n in ("PathResult", "extract_path", "path_arcs", "path_length", "shortest_path")},
    **{n: (".sssp", n) for n in ("ALGORITHMS", "SSSPQuery", "sssp", "sssp_full")},
    "cvrp": (".tours", "cvrp"), "tsp": (".tours", "tsp"),
}


def __getattr__(name):
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'gpuroute' has no attribute {name!r}")
    module = importlib.import_module(target[0], __name__)
    if target[1] is None:  # a submodule: importing it made it an attribute of the package
        return module
    value = globals()[name] = getattr(module, target[1])
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


class _Package(types.ModuleType):
    """``gpuroute`` itself: importing the subpackage ``gpuroute.sssp`` binds it to the name ``sssp`` on its
    parent, which would shadow the public function :func:`gpuroute.sssp` (an eager import rebound it
    afterwards); the binding is skipped, the subpackage stays in ``sys.modules``."""

    def __setattr__(self, name, value):
        if name == "sssp" and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


__version__ = "0.2.0"

__all__ = ["accessibility", "RoadGraph", "TurnRestrictions", "Unit", "GraphError", "ParseError", "INF", "INF_U32", "NO_PREDECESSOR",
           "config", "datasets", "open_graph", "load_dimacs", "load_metis", "load_osm", "load_tntp", "load_graph",
           "save_graph", "sssp", "sssp_full", "SSSPQuery", "ALGORITHMS", "shortest_path", "PathResult",
           "extract_path", "path_arcs", "path_length", "nearest_node", "nearest_nodes", "haversine_m",
           "OutOfBoundsError", "SnapError", "DeviceGraph", "gpu_available", "resolve_device", "GPUUnavailableError",
           "Partition", "Overlay", "Metric", "Profile", "TurnTable", "ContractionHierarchy", "Engine", "tours", "tsp",
           "cvrp",
           "__version__"]
