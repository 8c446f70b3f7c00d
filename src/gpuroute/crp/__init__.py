"""Customizable Route Planning (Delling, Kobitzsch, Werneck, "Customizing Driving Directions with GPUs",
Euro-Par 2014): the metric-independent turn table, metrics and the metric decoder (:mod:`.metric`), the
overlay topology (:mod:`.topology`), customization (:mod:`.customize`, CPU twin), queries
(:mod:`.search`) and the facade that ties them together (:mod:`.overlay`).

Public API
----------
Overlay, OverlayQuery
    Build (topology), customize (a metric), update (traffic), route, distances, save/load.
TurnTable, ReverseTurnTable, Profile, Metric, decode_turn_costs, turn_angles_deg
STRAIGHT, LEFT, RIGHT, UTURN, RESTRICTED, FORBIDDEN, CLOSED, NO_TURN, KIND_NAMES (from :mod:`.metric`)
"""
from .metric import (
    CLOSED,
    FORBIDDEN,
    KIND_NAMES,
    LEFT,
    NO_TURN,
    RESTRICTED,
    RIGHT,
    STRAIGHT,
    UTURN,
    Metric,
    Profile,
    ReverseTurnTable,
    TurnTable,
    decode_turn_costs,
    turn_angles_deg,
)
from .overlay import Overlay, OverlayQuery

__all__ = ["Overlay", "OverlayQuery", "TurnTable", "ReverseTurnTable", "Profile", "Metric", "decode_turn_costs", "turn_angles_deg",
           "STRAIGHT", "LEFT", "RIGHT", "UTURN", "RESTRICTED", "FORBIDDEN", "CLOSED", "NO_TURN", "KIND_NAMES"]
