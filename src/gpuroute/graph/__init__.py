"""Graph model: :class:`RoadGraph` (CSR forward + reverse, named weights with units, arc attributes,
coordinates, turn restrictions, per-turn costs) and the named sentinels.

Public API
----------
RoadGraph, TurnRestrictions, TurnCosts, Unit
INF, INF_U32, NO_PREDECESSOR, MAX_WEIGHT, INDEX_DTYPE, WEIGHT_DTYPE, DIST_DTYPE
GraphError, ParseError
units (module): METRE, DECISECOND, DIMACS_DISTANCE, ..., parse_unit
"""
from . import units
from .constants import DIST_DTYPE, INDEX_DTYPE, INF, INF_U32, MAX_WEIGHT, NO_PREDECESSOR, WEIGHT_DTYPE
from .errors import GraphError, ParseError
from .road_graph import COORD_SYSTEMS, RoadGraph
from .turn_costs import TurnCosts
from .turns import TurnRestrictions
from .units import STANDARD_UNITS, Unit, parse_unit

__all__ = ["RoadGraph", "TurnRestrictions", "TurnCosts", "Unit", "parse_unit", "units", "GraphError", "ParseError", "INF", "INF_U32",
           "NO_PREDECESSOR", "MAX_WEIGHT", "INDEX_DTYPE", "WEIGHT_DTYPE", "DIST_DTYPE", "STANDARD_UNITS",
           "COORD_SYSTEMS"]
