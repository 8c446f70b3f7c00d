"""Per-turn costs of a graph: the duration and weight of every turn, as a routing profile gives them.

A graph extracted with an OSRM Lua profile (:func:`gpuroute.io.load_osm` with ``profile="car"`` or a
``.lua`` file) carries one :class:`TurnCosts`: for every turn ``(a, b)`` (in-arc ``a`` ending at the via
node where out-arc ``b`` starts) the turn's duration in deciseconds and its weight in the profile's weight
unit, exactly as osrm-extract stores its turn penalties (``int(10 * duration)``, ``int(weight *
10**weight_precision)``, truncated toward zero), or :data:`FORBIDDEN` where no such turn exists (a U-turn
at an ordinary intersection, a turn through a barrier, a restricted turn, a U-turn in the middle of a
road). Obstacles at degree-2 nodes that osrm-extract compresses away (traffic signals, stop and give-way
signs, gates) are the costs of the straight-through turns there.

Turn order. Turn ``t`` of in-arc ``a`` is onto out-arc ``first_out[head[a]] + (t - first[a])`` with
``first`` the exclusive prefix sum of ``out_degree(head[a])`` over ``a``: the order of
:class:`gpuroute.crp.metric.TurnTable`, so ``Metric(arc_cost, turn_cost=turn_costs.weight)`` is the
profile's metric on the overlay. ``T = sum(out_degree[head])``.

Obstacles are kept beside the costs (node, the node a route must come from for it to apply or -1 for
any, type bits of :data:`gpuroute.io.lua_profile.OBSTACLE_TYPES`, duration and weight): they are already
in the turn costs and are stored so that a service can name them.
"""
from __future__ import annotations

import numpy as np

from .constants import MAX_WEIGHT
from .errors import GraphError

__all__ = ["TurnCosts", "FORBIDDEN", "n_turns_of", "turn_arrays"]

#: A turn that does not exist (closed): the value of ``duration`` and ``weight`` there. Equal to
#: :data:`gpuroute.crp.metric.FORBIDDEN`.
FORBIDDEN = -1

#: Obstacle arrays and their dtypes.
OBSTACLE_FIELDS = {"node": np.int32, "from_node": np.int32, "type": np.uint16, "duration": np.float32,
                   "weight": np.float32}


def n_turns_of(first_out, head):
    """Number of turns ``T = sum over arcs a of out_degree(head[a])`` of a CSR graph."""
    deg = np.diff(np.asarray(first_out, dtype=np.int64))
    return int(deg[np.asarray(head, dtype=np.int64)].sum()) if np.size(head) else 0


def turn_arrays(first_out, head):
    """``(first, in_arc, out_arc)`` of every turn in :class:`TurnCosts` order: ``first`` int64 (m+1,)
    (turns of in-arc ``a`` are ``first[a]:first[a+1]``), ``in_arc`` and ``out_arc`` int64 (T,)."""
    first_out = np.asarray(first_out, dtype=np.int64)
    head = np.asarray(head, dtype=np.int64)
    m = head.size
    counts = np.diff(first_out)[head] if m else np.zeros(0, dtype=np.int64)
    first = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(counts, out=first[1:])
    in_arc = np.repeat(np.arange(m, dtype=np.int64), counts)
    out_arc = np.arange(int(first[-1]), dtype=np.int64) + np.repeat(first_out[head] - first[:-1], counts)
    return first, in_arc, out_arc


class TurnCosts:
    """Duration and weight of every turn of one graph (see the module docstring for the order).

    Parameters
    ----------
    duration : array_like of int, shape (T,)
        Deciseconds, >= 0, or :data:`FORBIDDEN`.
    weight : array_like of int, shape (T,)
        The profile's weight unit (``10**-weight_precision`` of ``meta["weight_name"]``), >= 0, or
        :data:`FORBIDDEN` (exactly where ``duration`` is).
    obstacles : mapping str -> array_like, optional
        ``node``, ``from_node`` (int32, -1: from any side), ``type`` (uint16 bits), ``duration`` (s) and
        ``weight`` (float32), one entry per obstacle; node ids are the graph's (dense) ids.
    meta : dict, optional
        ``weight_name``, ``weight_precision``, ``profile``, counts.

    Raises
    ------
    GraphError
        Arrays of other shapes or dtypes, a cost out of ``[0, MAX_WEIGHT]`` that is not FORBIDDEN, or
        FORBIDDEN in one array and not the other (naming the turn).
    """

    def __init__(self, duration, weight, *, obstacles=None, meta=None):
        d = np.asarray(duration)
        w = np.asarray(weight)
        for name, a in (("duration", d), ("weight", w)):
            if a.ndim != 1 or a.dtype.kind not in "iu":
                raise GraphError(f"turn costs: {name} must be a 1-D integer array (one per turn), got shape "
                                 f"{a.shape} dtype {a.dtype}")
        if d.shape != w.shape:
            raise GraphError(f"turn costs: duration has shape {d.shape} but weight {w.shape}")
        for name, a in (("duration", d), ("weight", w)):
            bad = ((a < 0) & (a != FORBIDDEN)) | (a > MAX_WEIGHT)
            if bad.any():
                t = int(np.flatnonzero(bad)[0])
                raise GraphError(f"turn costs: {name} of turn {t} is {int(a[t])}; expected [0, {MAX_WEIGHT}] "
                                 f"or FORBIDDEN={FORBIDDEN}")
        odd = (d == FORBIDDEN) != (w == FORBIDDEN)
        if odd.any():
            t = int(np.flatnonzero(odd)[0])
            raise GraphError(f"turn costs: turn {t} is FORBIDDEN in one of duration/weight only "
                             f"({int(d[t])}, {int(w[t])})")
        self.duration = np.ascontiguousarray(d, dtype=np.int32)
        self.weight = np.ascontiguousarray(w, dtype=np.int32)
        obs = dict(obstacles or {})
        self.obstacles = {}
        k = None
        for name, dt in OBSTACLE_FIELDS.items():
            a = np.ascontiguousarray(obs.get(name, np.zeros(0, dtype=dt)), dtype=dt)
            if a.ndim != 1 or (k is not None and a.size != k):
                raise GraphError(f"turn costs: obstacle field {name!r} has shape {a.shape}, expected ({k},)")
            k = a.size
            self.obstacles[name] = a
        unknown = set(obs) - set(OBSTACLE_FIELDS)
        if unknown:
            raise GraphError(f"turn costs: unknown obstacle fields {sorted(unknown)}; known: {list(OBSTACLE_FIELDS)}")
        self.meta = dict(meta or {})

    def __len__(self):
        return int(self.duration.size)

    @property
    def forbidden(self):
        """bool (T,): the turns that do not exist."""
        return self.duration == FORBIDDEN

    def validate(self, first_out, head, n_nodes=None):
        """Check the length against a graph (``T = sum(out_degree[head])``) and the obstacle nodes.

        Raises
        ------
        GraphError
            Another number of turns, or an obstacle node outside ``[0, n_nodes)``.
        """
        t = n_turns_of(first_out, head)
        if t != len(self):
            raise GraphError(f"turn costs hold {len(self)} turns but the graph has {t} (sum of out-degrees of "
                             "the arcs' heads); turn costs are computed for one graph's CSR order")
        if n_nodes is not None and self.obstacles["node"].size:
            for name in ("node", "from_node"):
                a = self.obstacles[name]
                bad = (a >= n_nodes) | (a < (0 if name == "node" else -1))
                if bad.any():
                    i = int(np.flatnonzero(bad)[0])
                    raise GraphError(f"turn costs: obstacle {i} has {name} {int(a[i])}, outside [0, {n_nodes})")

    def fingerprint_bytes(self):
        """Bytes that identify the costs (hashed into :meth:`RoadGraph.fingerprint`)."""
        return self.duration.tobytes() + self.weight.tobytes()

    def __eq__(self, other):
        return (isinstance(other, TurnCosts) and np.array_equal(self.duration, other.duration)
                and np.array_equal(self.weight, other.weight)
                and all(np.array_equal(self.obstacles[k], other.obstacles[k]) for k in OBSTACLE_FIELDS))

    def __repr__(self):
        n = len(self)
        closed = int(self.forbidden.sum())
        return (f"TurnCosts({n:,} turns, {closed:,} forbidden, {self.obstacles['node'].size:,} obstacles, "
                f"weight {self.meta.get('weight_name', '?')!r})")
