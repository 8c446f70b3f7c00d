"""Partitions of a road graph: cell layouts (contiguous cells of close nodes, internal and boundary
arcs) used by cell-local Bellman-Ford, and the ground Customizable Route Planning's multi-level
partition will build on."""
from .cells import CellLayout, build_cells, hilbert_index, layout, node_order

__all__ = ["CellLayout", "build_cells", "hilbert_index", "layout", "node_order"]
