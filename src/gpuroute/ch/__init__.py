"""Contraction hierarchies: built on the GPU (CU-CH: Karimi, Koppelman, Michael, "GPU Road Network Graph
Contraction and SSSP Query", ICS '19) or sequentially on the CPU (Geisberger, Sanders, Schultes, Delling,
"Contraction Hierarchies", WEA 2008), with point-to-point queries, PHAST trees (Delling, Goldberg,
Nowatzyk, Werneck, IPDPS 2011), bounded one-to-all and many-to-many tables.

Layout: ``hierarchy.py`` (the arrays), ``api.py`` (``ContractionHierarchy``), ``sequential.py``
(Geisberger et al.), ``cuch.py`` (CU-CH, numba twin) and ``cuch_gpu.py`` + ``cuch.cu`` (CU-CH on the GPU),
``query.py`` (point-to-point), ``phast.py`` (CPU trees, bounded, tables) and ``phast_gpu.py`` +
``phast.cu`` (GPU), ``store.py`` (save / load), ``check.py`` (``check_hierarchy``).
"""
from .api import METHODS, ContractionHierarchy
from .hierarchy import Hierarchy

__all__ = ["ContractionHierarchy", "Hierarchy", "METHODS"]
