"""Readers and writers of road networks. External ids (DIMACS 1-based, OSM ids) live here only."""
from .dimacs import load_dimacs, matching_co_path, read_dimacs_co, read_dimacs_gr

__all__ = ["load_dimacs", "read_dimacs_gr", "read_dimacs_co", "matching_co_path"]
