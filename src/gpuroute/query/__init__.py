"""Point-to-point queries and paths: ``shortest_path`` (Dijkstra, bidirectional Dijkstra, A* on the
CPU; a GPU one-to-all search followed along its tree), ``PathResult``, and path helpers.

Snapping lives in :mod:`gpuroute.geo` (``nearest_node``, ``nearest_nodes``).
"""
from .p2p import METHODS, PathResult, shortest_path
from .paths import extract_path, path_arcs, path_length

__all__ = ["shortest_path", "PathResult", "METHODS", "extract_path", "path_arcs", "path_length"]
