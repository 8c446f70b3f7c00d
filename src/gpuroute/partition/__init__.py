"""Partitions of a road graph: cell layouts (contiguous cells of close nodes, internal and boundary
arcs) used by cell-local Bellman-Ford, and the nested multi-level partition of Customizable Route
Planning (:class:`Partition`: Delling, Kobitzsch, Werneck, "Customizing Driving Directions with GPUs",
Euro-Par 2014, sec. 2; built with KaHIP or inertial flow)."""
from .cells import CellLayout, build_cells, hilbert_index, layout, node_order
from .multilevel import Partition

__all__ = ["CellLayout", "Partition", "build_cells", "hilbert_index", "layout", "node_order"]
