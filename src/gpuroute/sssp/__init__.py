"""Single-source shortest paths without preprocessing (CPU Dijkstra and the GPU methods of seeds 001/002)."""
from .api import ALGORITHMS, SSSPResult, sssp, sssp_full

__all__ = ["sssp", "sssp_full", "SSSPResult", "ALGORITHMS"]
