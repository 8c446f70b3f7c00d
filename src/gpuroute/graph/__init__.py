"""Graph model: :class:`RoadGraph` (CSR forward + reverse, named weights, coordinates) and sentinels."""
from .constants import DIST_DTYPE, INDEX_DTYPE, INF, MAX_WEIGHT, NO_PREDECESSOR, WEIGHT_DTYPE
from .errors import GraphError, ParseError
from .road_graph import STANDARD_UNITS, RoadGraph

__all__ = ["RoadGraph", "GraphError", "ParseError", "INF", "NO_PREDECESSOR", "MAX_WEIGHT",
           "INDEX_DTYPE", "WEIGHT_DTYPE", "DIST_DTYPE", "STANDARD_UNITS"]
