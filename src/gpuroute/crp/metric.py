"""Turns, metrics and the metric decoder of Customizable Route Planning.

Follows Delling, Kobitzsch, Werneck, "Customizing Driving Directions with GPUs" (Euro-Par 2014),
sec. 2 (the turn model and the metric decoder) and sec. 3 (the decoder is applied while aggregating
costs of the lowest level; sec. 5: only the decoder travels to the GPU on a metric change).

The project uses the arc-based turn model: a *turn* ``(a, b)`` is a transition from an in-arc ``a`` to an
out-arc ``b`` at the via node ``v = head[a] == tail[b]``.

* :class:`TurnTable` enumerates every turn of a graph once (metric-independent), grouped by in-arc in
  CSR form, each with a *type* (:data:`STRAIGHT`, :data:`LEFT`, :data:`RIGHT`, :data:`UTURN`) or
  :data:`RESTRICTED` (forbidden by the graph's turn restrictions). :meth:`TurnTable.reverse` groups the
  same turns by out-arc for backward searches.
* :class:`Profile` is a user-level description of a metric: a speed per road class and a penalty per
  turn type (in seconds), loadable from JSON.
* :class:`Metric` is a metric resolved for one graph: an integer cost per arc, a penalty per turn type
  and optionally an explicit cost per turn (the paper's "exceptional" costs).
* :func:`decode_turn_costs` is the metric decoder: the cost of taking turn ``t`` is the penalty of its
  type plus the cost of its out-arc, :data:`FORBIDDEN` for restricted turns and for the turns into a
  closed arc.
* A *closed* arc (live traffic at speed 0, OSRM's ``INVALID_SEGMENT_WEIGHT``) costs :data:`CLOSED` (the
  named :data:`gpuroute.graph.constants.INF`): no turn enters it, so the customization treats it as a
  turn restriction treats a turn and the cliques are exact shortest paths of the graph without it.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from numba import njit, prange

from ..graph.constants import INDEX_DTYPE, INF, MAX_WEIGHT, WEIGHT_DTYPE
from ..graph.turns import NO, ONLY

# ---------------------------------------------------------------------------------------------- turn kinds
#: Turn type: going on (the signed angle between the two arcs' bearings is within ``STRAIGHT_MAX_DEG``),
#: and every allowed non-U-turn of a graph without coordinates.
STRAIGHT = 0
#: Turn type: a counter-clockwise turn of more than ``STRAIGHT_MAX_DEG`` degrees.
LEFT = 1
#: Turn type: a clockwise turn of more than ``STRAIGHT_MAX_DEG`` degrees.
RIGHT = 2
#: Turn type: back to the node the in-arc came from (``head[b] == tail[a]``; includes 2-node loops).
UTURN = 3
#: A turn forbidden by the graph's turn restrictions (always :data:`FORBIDDEN`, whatever the metric).
RESTRICTED = 4
#: Number of turn types a metric prices (``STRAIGHT .. UTURN``): the length of ``Metric.turn_penalty``.
N_TURN_TYPES = 4
#: Names of the kinds, as used by :class:`Profile` and penalty dicts (``"restricted"`` is not priced).
KIND_NAMES = {STRAIGHT: "straight", LEFT: "left", RIGHT: "right", UTURN: "uturn", RESTRICTED: "restricted"}
#: Kind id by name, for the priced kinds only.
TURN_TYPE_BY_NAME = {KIND_NAMES[k]: k for k in range(N_TURN_TYPES)}
#: Largest absolute turn angle (degrees) still classified :data:`STRAIGHT`.
STRAIGHT_MAX_DEG = 30.0

#: Cost of a forbidden turn in decoded arrays (:func:`decode_turn_costs`) and, in ``Metric.turn_cost``,
#: an explicit per-turn override that closes the turn.
FORBIDDEN = -1
#: Result of :meth:`TurnTable.turn_index` for a pair of arcs that does not form a turn.
NO_TURN = -1
#: Cost of a closed arc in ``Metric.arc_cost`` (and an overlay state's ``arc_cost``): the named ``INF``
#: (int64 max). The decoder forbids every turn into it; a metric with one holds its costs as int64.
CLOSED = INF

#: The U-turn penalty of the paper's default metric (sec. 6: travel times "augmented by U-turn costs of
#: 100 s"), in seconds.
UTURN_PENALTY_S = 100.0
#: Metric names :meth:`Metric.resolve` accepts as strings.
NAMED_METRICS = ("distance", "time", "time-uturn")

KIND_DTYPE = np.uint8
OFFSET_DTYPE = np.int64


# ---------------------------------------------------------------------------------------------- geometry
def _arc_bearings(graph):
    """Bearing of every arc, radians clockwise from north (+y), float64 (m,), and a bool (m,) mask of the
    arcs whose two ends share coordinates (no direction); None, None without coordinates.

    lon/lat: the initial great-circle bearing (forward azimuth) from tail to head. Planar: the direction
    of ``(dx, dy)`` with ``y`` pointing up (north)."""
    if graph.coords is None:
        return None, None
    c = graph.coords
    t, h = graph.tail, graph.head
    if graph.is_planar:
        dx = c[h, 0] - c[t, 0]
        dy = c[h, 1] - c[t, 1]
        return np.arctan2(dx, dy), (dx == 0) & (dy == 0)
    lon1, lat1 = np.radians(c[t, 0]), np.radians(c[t, 1])
    lon2, lat2 = np.radians(c[h, 0]), np.radians(c[h, 1])
    dl = lon2 - lon1
    y = np.sin(dl) * np.cos(lat2)
    x = np.cos(lat1) * np.sin(lat2) - np.sin(lat1) * np.cos(lat2) * np.cos(dl)
    same = (c[t, 0] == c[h, 0]) & (c[t, 1] == c[h, 1])
    return np.arctan2(y, x), same


def turn_angles_deg(graph, in_arc, out_arc):
    """Signed turn angle in degrees, in ``(-180, 180]``, from arc ``in_arc`` onto arc ``out_arc``:
    bearing(out_arc) - bearing(in_arc), positive clockwise (a right turn), negative counter-clockwise
    (a left turn). NaN where either arc has no direction (both ends at one point) or the graph has no
    coordinates.

    Parameters
    ----------
    graph : RoadGraph
    in_arc, out_arc : array_like of int, shape (k,)

    Returns
    -------
    ndarray of float64, shape (k,)
    """
    in_arc = np.asarray(in_arc, dtype=np.int64)
    out_arc = np.asarray(out_arc, dtype=np.int64)
    bearing, degenerate = _arc_bearings(graph)
    if bearing is None:
        return np.full(in_arc.shape, np.nan)
    return _angles(bearing, degenerate, in_arc, out_arc)


def _angles(bearing, degenerate, in_arc, out_arc):
    d = np.degrees(bearing[out_arc] - bearing[in_arc])
    d = 180.0 - np.mod(180.0 - d, 360.0)  # wrap into (-180, 180]
    d[degenerate[in_arc] | degenerate[out_arc]] = np.nan
    return d


# ---------------------------------------------------------------------------------------------- turn table
@dataclass
class ReverseTurnTable:
    """The turns of a :class:`TurnTable` grouped by out-arc (for backward searches).

    Attributes
    ----------
    first_in : ndarray of int64, shape (m+1,)
        The turns onto arc ``b`` are ``first_in[b]:first_in[b+1]``.
    in_arc : ndarray of int32, shape (T,)
        In-arc of each of those turns.
    turn_id : ndarray of int64, shape (T,)
        Index of the turn in the forward arrays (``TurnTable.out_arc``, ``TurnTable.kind``, decoded
        costs), so one per-turn cost array serves both directions.
    """

    first_in: np.ndarray
    in_arc: np.ndarray
    turn_id: np.ndarray


@dataclass
class TurnTable:
    """Every turn of a graph with its type, grouped by in-arc (CSR): the metric-independent turn data of
    Customizable Route Planning (Delling, Kobitzsch, Werneck, "Customizing Driving Directions with
    GPUs", Euro-Par 2014, sec. 2: "each turn has a type (left turn, right turn, and so on)").

    Build one with :meth:`build`. The turns out of in-arc ``a`` are ``first[a]:first[a+1]``; they are
    all the out-arcs of the via node ``head[a]`` in arc-id order, so turn ``first[a] + i`` is onto arc
    ``first_out[head[a]] + i``.

    Attributes
    ----------
    first : ndarray of int64, shape (m+1,)
        CSR offsets by in-arc.
    out_arc : ndarray of int32, shape (T,)
        Out-arc of each turn.
    kind : ndarray of uint8, shape (T,)
        :data:`STRAIGHT`, :data:`LEFT`, :data:`RIGHT`, :data:`UTURN` or :data:`RESTRICTED`.
    """

    first: np.ndarray
    out_arc: np.ndarray
    kind: np.ndarray
    _reverse: ReverseTurnTable | None = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        self.first = np.ascontiguousarray(self.first, dtype=OFFSET_DTYPE)
        self.out_arc = np.ascontiguousarray(self.out_arc, dtype=INDEX_DTYPE)
        self.kind = np.ascontiguousarray(self.kind, dtype=KIND_DTYPE)
        f = self.first
        if f.ndim != 1 or f.size < 1 or f[0] != 0 or f[-1] != self.out_arc.size:
            raise ValueError(f"TurnTable.first must be CSR offsets from 0 to the number of turns "
                             f"{self.out_arc.size} (got shape {self.first.shape})")
        if self.kind.shape != self.out_arc.shape:
            raise ValueError(f"TurnTable.kind has shape {self.kind.shape}, expected {self.out_arc.shape}")

    # ------------------------------------------------------------------ construction
    @classmethod
    def build(cls, graph):
        """Enumerate and classify every turn of ``graph``.

        A turn ``(a, b)`` exists for every pair with ``head[a] == tail[b]`` (self-loop arcs included).
        Its kind is, in this order of precedence:

        1. :data:`RESTRICTED` if ``graph.turns`` forbids it: a ``NO`` restriction on ``(a, b)``, or an
           ``ONLY`` restriction on ``(a, b*)`` with ``b != b*`` (every other turn out of ``a``, the U-turn
           included). Where several ``ONLY`` restrictions share an in-arc, the turns onto any of their
           out-arcs stay allowed (a NO on one of them still forbids it);
        2. :data:`UTURN` if ``head[b] == tail[a]`` (2-node loops, and a self-loop followed by itself);
        3. from the geometry when the graph has coordinates: the signed angle from bearing(tail a ->
           head a) to bearing(tail b -> head b) (initial great-circle bearings for lon/lat; the ``(dx,
           dy)`` direction, y up, for planar coordinates); ``|angle| <= STRAIGHT_MAX_DEG`` (30 deg) is
           :data:`STRAIGHT`, a counter-clockwise angle :data:`LEFT`, a clockwise one :data:`RIGHT`. An
           arc whose ends share coordinates has no direction: its turns are :data:`STRAIGHT`;
        4. :data:`STRAIGHT` without coordinates.

        Parameters
        ----------
        graph : RoadGraph

        Returns
        -------
        TurnTable
            ``T = sum over arcs a of out_degree(head[a])`` turns. Vectorised NumPy: about 0.25 s for the
            2.27M turns of DIMACS NY (730,100 arcs).
        """
        first_out = graph.first_out.astype(np.int64)
        head = graph.head
        m = head.size
        deg = np.diff(first_out)
        counts = deg[head]  # turns out of each in-arc
        first = np.zeros(m + 1, dtype=OFFSET_DTYPE)
        np.cumsum(counts, out=first[1:])
        n_turns = int(first[-1])
        in_arc = np.repeat(np.arange(m, dtype=np.int64), counts)
        # turn t of in-arc a is onto first_out[head[a]] + (t - first[a])
        out_arc = np.arange(n_turns, dtype=np.int64) + np.repeat(first_out[head] - first[:-1], counts)
        kind = np.full(n_turns, STRAIGHT, dtype=KIND_DTYPE)

        bearing, degenerate = _arc_bearings(graph)
        if bearing is not None and n_turns:
            ang = _angles(bearing, degenerate, in_arc, out_arc)
            kind[ang < -STRAIGHT_MAX_DEG] = LEFT
            kind[ang > STRAIGHT_MAX_DEG] = RIGHT
        kind[head[out_arc] == graph.tail[in_arc]] = UTURN

        table = cls(first, out_arc, kind)
        if graph.turns is not None and len(graph.turns):
            table.kind[table._restricted(graph.turns)] = RESTRICTED
        return table

    def _restricted(self, restrictions):
        """Turn ids forbidden by a TurnRestrictions (see :meth:`build`)."""
        m = self.n_arcs
        t = self.turn_index(restrictions.in_arc, restrictions.out_arc)
        if (t == NO_TURN).any():  # pragma: no cover - RoadGraph validates its restrictions
            i = int(np.flatnonzero(t == NO_TURN)[0])
            raise ValueError(f"turn restriction {i} ({int(restrictions.in_arc[i])} -> "
                             f"{int(restrictions.out_arc[i])}) is not a turn of this table")
        is_only = restrictions.kind == ONLY
        forbidden = np.zeros(self.n_turns, dtype=bool)
        has_only = np.zeros(m, dtype=bool)
        has_only[restrictions.in_arc[is_only]] = True
        forbidden[:] = np.repeat(has_only, np.diff(self.first))
        forbidden[t[is_only]] = False
        forbidden[t[restrictions.kind == NO]] = True
        return forbidden

    # ------------------------------------------------------------------ properties
    @property
    def n_arcs(self) -> int:
        """Number of arcs ``m`` of the graph the table was built for."""
        return self.first.size - 1

    @property
    def n_turns(self) -> int:
        """Number of turns ``T``."""
        return self.out_arc.size

    def in_arc(self):
        """In-arc of every turn, int32 (T,) (expanded from ``first``)."""
        return np.repeat(np.arange(self.n_arcs, dtype=INDEX_DTYPE), np.diff(self.first))

    def counts(self) -> dict:
        """Number of turns of each kind, ``{"straight": int, ..., "restricted": int}``."""
        c = np.bincount(self.kind, minlength=len(KIND_NAMES))
        return {name: int(c[k]) for k, name in KIND_NAMES.items()}

    def turn_index(self, in_arc, out_arc):
        """Turn id of each ``(in_arc, out_arc)`` pair, int64 (k,); :data:`NO_TURN` where the arcs do not
        meet (``head[in_arc] != tail[out_arc]``) or an id is outside ``[0, m)``.

        The out-arcs of one in-arc are consecutive arc ids, so the lookup is ``first[a] + b -
        out_arc[first[a]]`` (O(1) per pair)."""
        a = np.atleast_1d(np.asarray(in_arc, dtype=np.int64))
        b = np.atleast_1d(np.asarray(out_arc, dtype=np.int64))
        m = self.n_arcs
        res = np.full(a.shape, NO_TURN, dtype=np.int64)
        ok = (a >= 0) & (a < m) & (b >= 0) & (b < m)
        ok[ok] &= self.first[a[ok] + 1] > self.first[a[ok]]
        idx = np.flatnonzero(ok)
        lo = self.first[a[idx]]
        t = lo + b[idx] - self.out_arc[lo]
        good = (t >= lo) & (t < self.first[a[idx] + 1])
        good[good] &= self.out_arc[t[good]] == b[idx][good]
        res[idx[good]] = t[good]
        return res

    def reverse(self):
        """The same turns grouped by out-arc (built once, then cached).

        Returns
        -------
        ReverseTurnTable
            ``first_in`` int64 (m+1,), ``in_arc`` int32 (T,), ``turn_id`` int64 (T,) (turns onto one arc
            in increasing turn id, i.e. increasing in-arc).
        """
        if self._reverse is None:
            order = np.argsort(self.out_arc, kind="stable").astype(np.int64)
            first_in = np.zeros(self.n_arcs + 1, dtype=OFFSET_DTYPE)
            np.cumsum(np.bincount(self.out_arc, minlength=self.n_arcs), out=first_in[1:])
            self._reverse = ReverseTurnTable(first_in, self.in_arc()[order], order)
        return self._reverse

    def __repr__(self):
        c = ", ".join(f"{v:,} {k}" for k, v in self.counts().items())
        return f"TurnTable({self.n_arcs:,} arcs, {self.n_turns:,} turns: {c})"


# ---------------------------------------------------------------------------------------------- profile
@dataclass
class Profile:
    """A user-level metric: a speed per road class and a penalty per turn type (the "static properties"
    a metric decoder maps to costs; Delling, Kobitzsch, Werneck, "Customizing Driving Directions with
    GPUs", Euro-Par 2014, sec. 2).

    Attributes
    ----------
    speeds_kmh : dict str -> float
        Speed in km/h (> 0, finite) per road class name (the graph's ``meta["road_classes"]``, e.g. OSM
        ``"residential"``). The key ``"default"`` gives the speed of classes not listed.
    turn_penalties_s : dict str -> float
        Seconds (>= 0, finite) per turn type name: ``"straight"``, ``"left"``, ``"right"``, ``"uturn"``;
        types not listed cost 0.
    name : str
    source : str, optional
        The file it was loaded from (:meth:`load`), named by the errors of its resolution for a graph.

    Raises
    ------
    ValueError
        A speed that is not a finite number of at least :attr:`MIN_SPEED_KMH`, a penalty that is not a
        finite number in [0, :attr:`MAX_PENALTY_S`], or an unknown turn type name (each message names
        the field, the class or type, and the value).
    """

    speeds_kmh: dict
    turn_penalties_s: dict = field(default_factory=dict)
    name: str = "profile"
    source: str | None = field(default=None, compare=False, repr=False)

    #: Key of the speed used for road classes the profile does not list.
    DEFAULT_CLASS = "default"
    #: Largest turn penalty in seconds: the largest cost, MAX_WEIGHT deciseconds.
    MAX_PENALTY_S = MAX_WEIGHT / 10.0
    #: Smallest speed in km/h: slower, one metre takes more than MAX_WEIGHT deciseconds.
    MIN_SPEED_KMH = 36.0 / MAX_WEIGHT

    def __post_init__(self):
        if not isinstance(self.speeds_kmh, Mapping) or not self.speeds_kmh:
            raise ValueError(f"profile {self.name!r}: speeds_kmh must be a non-empty dict road class -> km/h")
        if not isinstance(self.turn_penalties_s, Mapping):
            raise ValueError(f"profile {self.name!r}: turn_penalties_s must be a dict turn type -> seconds")
        speeds = {}
        for cls_name, v in self.speeds_kmh.items():
            if not _is_real(v) or not (math.isfinite(v) and v > 0):
                raise ValueError(f"profile {self.name!r}: speeds_kmh {cls_name!r} (speed of road class "
                                 f"{cls_name!r}) is {v!r}; speeds must be finite numbers > 0 km/h")
            if v < self.MIN_SPEED_KMH:
                raise ValueError(f"profile {self.name!r}: speeds_kmh {cls_name!r} (speed of road class "
                                 f"{cls_name!r}) is {v!r}; speeds must be at least {self.MIN_SPEED_KMH:.3g} km/h "
                                 f"(slower, one metre takes more than the largest cost, {MAX_WEIGHT} ds)")
            speeds[str(cls_name)] = float(v)
        pens = {}
        for kind, v in self.turn_penalties_s.items():
            if kind not in TURN_TYPE_BY_NAME:
                raise ValueError(f"profile {self.name!r}: unknown turn type {kind!r} in turn_penalties_s; "
                                 f"expected one of {list(TURN_TYPE_BY_NAME)} (restricted turns are always "
                                 "forbidden)")
            if not _is_real(v) or not (math.isfinite(v) and 0 <= v <= self.MAX_PENALTY_S):
                raise ValueError(f"profile {self.name!r}: turn_penalties_s {kind!r} (penalty of turn type "
                                 f"{kind!r}) is {v!r}; penalties must be finite numbers of seconds in [0, "
                                 f"{self.MAX_PENALTY_S:.1f}] (the largest cost, {MAX_WEIGHT} ds)")
            pens[kind] = float(v)
        self.speeds_kmh = speeds
        self.turn_penalties_s = pens
        self.name = str(self.name)
        self.source = None if self.source is None else str(self.source)

    @classmethod
    def from_dict(cls, d, *, source=None):
        """A Profile from ``{"name": ..., "speeds_kmh": {...}, "turn_penalties_s": {...}}`` (the JSON
        layout; ``name`` and ``turn_penalties_s`` optional).

        Raises
        ------
        ValueError
            Not a dict, a missing ``speeds_kmh``, an unknown key, or an invalid value.
        """
        if not isinstance(d, Mapping):
            raise ValueError(f"a profile must be a JSON object, got {type(d).__name__}")
        unknown = sorted(set(d) - {"name", "speeds_kmh", "turn_penalties_s"})
        if unknown:
            raise ValueError(f"unknown profile key(s) {unknown}; expected name, speeds_kmh, turn_penalties_s")
        if "speeds_kmh" not in d:
            raise ValueError("a profile needs 'speeds_kmh' (road class -> km/h)")
        return cls(speeds_kmh=d["speeds_kmh"], turn_penalties_s=d.get("turn_penalties_s", {}),
                   name=d.get("name", "profile"), source=source)

    @classmethod
    def load(cls, path):
        """Load a Profile from a JSON file (layout of :meth:`from_dict`).

        Raises
        ------
        OSError
            The file cannot be read.
        ValueError
            Invalid JSON (message with the path and position) or an invalid profile.
        """
        with open(path, encoding="utf-8") as f:
            text = f.read()
        try:
            d = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not valid JSON ({e})") from None
        try:
            return cls.from_dict(d, source=os.fspath(path))
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None

    def to_dict(self) -> dict:
        """The JSON layout of :meth:`from_dict`."""
        return {"name": self.name, "speeds_kmh": dict(self.speeds_kmh),
                "turn_penalties_s": dict(self.turn_penalties_s)}

    def penalties_ds(self):
        """Turn penalties in deciseconds, int32 (4,) by type ``STRAIGHT..UTURN`` (rounded to nearest)."""
        p = np.zeros(N_TURN_TYPES, dtype=np.int64)
        for kind, s in self.turn_penalties_s.items():
            p[TURN_TYPE_BY_NAME[kind]] = round(s * 10.0)
        return _check_penalties(p, f"profile {self.name!r}")


def _is_real(v):
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


# ---------------------------------------------------------------------------------------------- metric
def _check_arc_costs(a, m, what):
    """Validate a per-arc cost array: shape (m,), integral, in [1, MAX_WEIGHT] or :data:`CLOSED`; return it
    as int32, or as int64 when an arc is closed."""
    a = np.asarray(a)
    if a.shape != (m,):
        raise ValueError(f"{what} has shape {a.shape}, expected ({m},) (one cost per arc)")
    if a.dtype.kind not in "iuf":
        raise ValueError(f"{what} has dtype {a.dtype}; arc costs must be integers")
    if a.dtype.kind == "f":
        bad = ~np.isfinite(a) | (a != np.round(a))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"{what}: cost of arc {i} is {a[i]}; arc costs must be finite integers")
    closed = (a == CLOSED) if a.dtype.kind in "iu" and a.dtype.itemsize == 8 else None
    bad = (a < 1) | (a > MAX_WEIGHT)
    if closed is not None:
        bad &= ~closed
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{what}: cost of arc {i} is {a[i]}; arc costs must be integers in "
                         f"[1, {MAX_WEIGHT}] (or CLOSED={CLOSED}: the arc is closed)")
    if closed is not None and closed.any():
        return np.ascontiguousarray(a, dtype=np.int64)
    return np.ascontiguousarray(a, dtype=WEIGHT_DTYPE)


def _check_penalties(p, what):
    p = np.asarray(p)
    if p.shape != (N_TURN_TYPES,):
        raise ValueError(f"{what}: turn_penalty has shape {p.shape}, expected ({N_TURN_TYPES},) "
                         "(one per type STRAIGHT, LEFT, RIGHT, UTURN)")
    if p.dtype.kind not in "iu" and not (p.dtype.kind == "f" and np.all(np.isfinite(p) & (p == np.round(p)))):
        raise ValueError(f"{what}: turn penalties must be integers, got {p.tolist()}")
    bad = (p < 0) | (p > MAX_WEIGHT)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{what}: penalty of turn type {KIND_NAMES[k]!r} is {p[k]}; penalties must be "
                         f"integers in [0, {MAX_WEIGHT}]")
    return np.ascontiguousarray(p, dtype=WEIGHT_DTYPE)


def _penalties_from_dict(d, what):
    if not isinstance(d, Mapping):
        raise ValueError(f"{what}: penalties must be a dict turn type -> int, got {type(d).__name__}")
    p = np.zeros(N_TURN_TYPES, dtype=np.int64)
    for kind, v in d.items():
        if kind not in TURN_TYPE_BY_NAME:
            raise ValueError(f"{what}: unknown turn type {kind!r}; expected one of {list(TURN_TYPE_BY_NAME)}")
        if not isinstance(v, (int, np.integer)) or isinstance(v, (bool, np.bool_)) or v < 0 or v > MAX_WEIGHT:
            raise ValueError(f"{what}: penalty of turn type {kind!r} is {v!r}; penalties must be integers in "
                             f"[0, {MAX_WEIGHT}] (in the unit of the arc costs)")
        p[TURN_TYPE_BY_NAME[kind]] = int(v)
    return p


class Metric:
    """A metric resolved for one graph: what the metric decoder reads (Delling, Kobitzsch, Werneck,
    "Customizing Driving Directions with GPUs", Euro-Par 2014, sec. 2: "a metric decoder is a function
    that maps these properties to the cost of traversing the arc or making the turn"; exceptional costs
    "stored explicitly" are ``turn_cost``).

    Usually made by :meth:`resolve`.

    Parameters
    ----------
    arc_cost : array_like of int, shape (m,)
        Cost of traversing each arc, integers in ``[1, MAX_WEIGHT]``, in ``units``; :data:`CLOSED` (int64)
        closes the arc (no route enters it; the decoder forbids the turns into it).
    turn_penalty : array_like of int, shape (4,), optional
        Penalty of a turn of each type ``STRAIGHT, LEFT, RIGHT, UTURN`` (>= 0, in ``units``); default 0.
        :data:`RESTRICTED` turns are always forbidden.
    turn_cost : array_like of int, shape (T,), optional
        Per-turn override of the type penalty for the turns of one :class:`TurnTable`: ``>= 0`` is the
        turn's penalty, :data:`FORBIDDEN` closes the turn. A restricted turn stays forbidden.
    name : str
    units : str
        Symbol of the cost unit (``"ds"``, ``"m"``, ``"dimacs-t"``, ...; ``""`` if unknown).

    Attributes
    ----------
    arc_cost : ndarray of int32, shape (m,)
        int64 when an arc is :data:`CLOSED` (then that arc holds it).
    closed : ndarray of bool, shape (m,), or None
        The closed arcs; None when none is.
    turn_penalty : ndarray of int32, shape (4,)
    turn_cost : ndarray of int32, shape (T,), or None
    name, units : str

    Raises
    ------
    ValueError
        A cost or penalty out of range (the message names the arc, type or turn id).
    """

    def __init__(self, arc_cost, turn_penalty=None, *, turn_cost=None, name="metric", units=""):
        self.name = str(name)
        self.units = str(units)
        arc_cost = np.asarray(arc_cost)
        if arc_cost.ndim != 1:
            raise ValueError(f"metric {self.name!r}: arc_cost must be 1-D (one cost per arc), got shape "
                             f"{arc_cost.shape}")
        self.arc_cost = _check_arc_costs(arc_cost, arc_cost.shape[0], f"metric {self.name!r}: arc_cost")
        if turn_penalty is None:
            turn_penalty = np.zeros(N_TURN_TYPES, dtype=np.int64)
        self.turn_penalty = _check_penalties(turn_penalty, f"metric {self.name!r}")
        if turn_cost is not None:
            tc = np.asarray(turn_cost)
            if tc.ndim != 1 or tc.dtype.kind not in "iu":
                raise ValueError(f"metric {self.name!r}: turn_cost must be a 1-D integer array (one per "
                                 f"turn), got shape {tc.shape} dtype {tc.dtype}")
            bad = ((tc < 0) & (tc != FORBIDDEN)) | (tc > MAX_WEIGHT)
            if bad.any():
                t = int(np.flatnonzero(bad)[0])
                raise ValueError(f"metric {self.name!r}: turn_cost of turn {t} is {tc[t]}; expected an "
                                 f"integer in [0, {MAX_WEIGHT}] or FORBIDDEN={FORBIDDEN}")
            turn_cost = np.ascontiguousarray(tc, dtype=WEIGHT_DTYPE)
        self.turn_cost = turn_cost

    @property
    def n_arcs(self) -> int:
        return self.arc_cost.size

    @property
    def closed(self):
        """The closed arcs (bool (m,): ``arc_cost == CLOSED``), or None when none is."""
        if self.arc_cost.dtype != np.int64:
            return None
        return self.arc_cost == CLOSED

    def fingerprint(self) -> str:
        """SHA-256 (hex, first 16 chars) over ``arc_cost``, ``turn_penalty``, ``turn_cost`` and ``units``:
        identifies the costs (customizations made with one metric can be matched to it)."""
        h = hashlib.sha256()
        h.update(self.arc_cost.tobytes())
        h.update(self.turn_penalty.tobytes())
        h.update(b"turn_cost:" + (b"none" if self.turn_cost is None else self.turn_cost.tobytes()))
        h.update(b"units:" + self.units.encode())
        return h.hexdigest()[:16]

    def __repr__(self):
        pens = ", ".join(f"{KIND_NAMES[k]}={int(self.turn_penalty[k])}" for k in range(N_TURN_TYPES))
        extra = "" if self.turn_cost is None else f", {self.turn_cost.size:,} turn costs"
        return f"Metric({self.name!r}, {self.n_arcs:,} arcs [{self.units}], penalties {pens}{extra})"

    # ------------------------------------------------------------------ resolution
    @classmethod
    def resolve(cls, graph, metric, turns=None):
        """Resolve a metric specification for ``graph``.

        Parameters
        ----------
        graph : RoadGraph
        metric : str, Profile, Metric, array_like or tuple
            * ``"distance"``: the graph weight ``"distance"`` if present, else the arc attribute
              ``length_m`` rounded to the nearest integer (at least 1, unit ``"m"``), else the default
              weight (whatever it measures; ``units`` says which). No turn penalties.
            * ``"time"``: the weight ``"travel_time"`` if present, else the default weight. No turn
              penalties.
            * ``"time-uturn"``: ``"time"`` plus a U-turn penalty of 100 s (the paper's default metric,
              sec. 6): 1000 in deciseconds, converted through the weight's :class:`~gpuroute.graph.units.
              Unit` when it is a time of known scale (DIMACS ``dimacs-t``: 27778). When the unit is not
              a time of known scale, the weight is **assumed to be in deciseconds** (penalty 1000).
            * a :class:`Profile`: travel time in deciseconds from the arc attributes ``length_m`` and
              ``road_class`` (codes into ``graph.meta["road_classes"]``): ``ceil(length_m / (kmh / 3.6)
              * 10)``, at least 1 (computed as ``length_m * 36 / kmh``, 1e-9 ds of rounding slack);
              penalties ``round(seconds * 10)``.
            * an array (m,) of positive integer arc costs (no penalties, unit unknown), or a tuple
              ``(array, penalties)`` with ``penalties`` a dict turn type name -> int (types not listed:
              0), or ``(array, penalties, turn_cost)`` with ``turn_cost`` (T,) per turn of ``turns``.
            * a :class:`Metric` (checked against the graph and returned).
        turns : TurnTable, optional
            The turn table of ``graph``; needed only for a per-turn ``turn_cost`` (its length is checked).

        Returns
        -------
        Metric

        Raises
        ------
        ValueError
            An unknown metric name; a Profile naming a road class the graph does not have, or missing one
            of the graph's classes (without a ``"default"`` speed), or a graph without the ``length_m``
            and ``road_class`` attributes; an array of the wrong shape or with a non-positive or
            non-integral cost (naming the arc); a bad penalty (naming the type); a cost over
            ``MAX_WEIGHT``; a ``turn_cost`` without ``turns`` or of the wrong length.
        TypeError
            A specification of another type.
        """
        m = graph.n_arcs
        if isinstance(metric, Metric):
            if metric.n_arcs != m:
                raise ValueError(f"metric {metric.name!r} has {metric.n_arcs} arc costs, graph "
                                 f"{graph.name!r} has {m} arcs")
            if metric.turn_cost is not None:
                _check_turn_cost_length(metric.turn_cost, turns, metric.name)
            return metric
        if isinstance(metric, str):
            return _resolve_named(graph, metric)
        if isinstance(metric, Profile):
            return _resolve_profile(graph, metric)
        if isinstance(metric, tuple):
            if len(metric) not in (2, 3):
                raise ValueError("a metric tuple is (arc_cost, penalties) or (arc_cost, penalties, "
                                 f"turn_cost), got {len(metric)} items")
            arc = _check_arc_costs(metric[0], m, "custom metric: arc_cost")
            pens = _penalties_from_dict(metric[1], "custom metric")
            tc = None
            if len(metric) == 3:
                tc = metric[2]
                _check_turn_cost_length(np.asarray(tc), turns, "custom")
            return cls(arc, pens, turn_cost=tc, name="custom", units="")
        if isinstance(metric, (np.ndarray, list)):
            return cls(_check_arc_costs(metric, m, "custom metric: arc_cost"), name="custom", units="")
        raise TypeError(f"metric must be a name {NAMED_METRICS}, a Profile, a Metric, an array of arc costs "
                        f"or a tuple (arc_cost, penalties), got {type(metric).__name__}")


def _check_turn_cost_length(tc, turns, name):
    if turns is None:
        raise ValueError(f"metric {name!r}: a per-turn turn_cost needs the graph's TurnTable (turns=...)")
    if tc.shape != (turns.n_turns,):
        raise ValueError(f"metric {name!r}: turn_cost has shape {tc.shape}, expected ({turns.n_turns},) "
                         "(one per turn of the table)")


def _unit_symbol(graph, weight):
    u = graph.units.get(weight)
    return u.symbol if u is not None else ""


def _resolve_named(graph, name):
    if name not in NAMED_METRICS:
        raise ValueError(f"unknown metric {name!r}; expected one of {list(NAMED_METRICS)}, a Profile or "
                         "an array")
    if name == "distance":
        if "distance" in graph.weights:
            return Metric(graph.weights["distance"], name=name, units=_unit_symbol(graph, "distance"))
        if "length_m" in graph.arc_attrs:
            length = np.asarray(graph.arc_attrs["length_m"], dtype=np.float64)
            bad = ~np.isfinite(length) | (length < 0)
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise ValueError(f"graph {graph.name!r}: length_m of arc {i} is {length[i]}")
            return Metric(np.maximum(np.rint(length), 1).astype(np.int64), name=name, units="m")
        w = graph.default_weight
        return Metric(graph.weights[w], name=name, units=_unit_symbol(graph, w))
    w = "travel_time" if "travel_time" in graph.weights else graph.default_weight
    units = graph.units.get(w)
    pens = np.zeros(N_TURN_TYPES, dtype=np.int64)
    if name == "time-uturn":
        if units is not None and units.quantity == "time" and units.scale is not None:
            pens[UTURN] = max(1, round(UTURN_PENALTY_S / units.scale))
        else:  # assumed deciseconds (see Metric.resolve)
            pens[UTURN] = round(UTURN_PENALTY_S * 10)
    return Metric(graph.weights[w], pens, name=name, units=units.symbol if units is not None else "")


def _resolve_profile(graph, profile):
    what = (f"{profile.source}: " if profile.source else "") + f"profile {profile.name!r} on graph {graph.name!r}"
    missing = [k for k in ("length_m", "road_class") if k not in graph.arc_attrs]
    if missing or "road_classes" not in graph.meta:
        need = missing + ([] if "road_classes" in graph.meta else ["meta['road_classes']"])
        raise ValueError(f"{what}: the graph has no {', '.join(need)} (a Profile needs OSM-style arc "
                         "attributes length_m and road_class)")
    classes = [str(c) for c in graph.meta["road_classes"]]
    unknown = sorted(set(profile.speeds_kmh) - set(classes) - {Profile.DEFAULT_CLASS})
    if unknown:
        raise ValueError(f"{what}: unknown road class(es) {unknown}; the graph's classes are {classes}")
    default = profile.speeds_kmh.get(Profile.DEFAULT_CLASS)
    absent = [c for c in classes if c not in profile.speeds_kmh]
    if absent and default is None:
        raise ValueError(f"{what}: no speed for road class(es) {absent} (list them or give a "
                         f"{Profile.DEFAULT_CLASS!r} speed)")
    speed = np.array([profile.speeds_kmh.get(c, default) for c in classes], dtype=np.float64)
    code = np.asarray(graph.arc_attrs["road_class"]).astype(np.int64)
    bad = (code < 0) | (code >= len(classes))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{what}: road_class of arc {i} is {code[i]}, outside [0, {len(classes)})")
    length = np.asarray(graph.arc_attrs["length_m"], dtype=np.float64)
    bad = ~np.isfinite(length) | (length < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{what}: length_m of arc {i} is {length[i]}; lengths must be finite and >= 0")
    ds = length * 36.0 / speed[code]  # = length / (kmh / 3.6) * 10 deciseconds
    cost = np.maximum(np.ceil(ds - 1e-9), 1.0)
    big = cost > MAX_WEIGHT
    if big.any():
        i = int(np.flatnonzero(big)[0])
        c = classes[code[i]]
        v = profile.speeds_kmh.get(c, default)
        field_name = c if c in profile.speeds_kmh else Profile.DEFAULT_CLASS
        raise ValueError(f"{what}: travel time of arc {i} ({length[i]:.1f} m of road class {c!r} at speeds_kmh "
                         f"{field_name!r} = {v!r}) is {cost[i]:.0f} ds, over MAX_WEIGHT={MAX_WEIGHT}")
    return Metric(cost.astype(np.int64), profile.penalties_ds(), name=profile.name, units="ds")


# ---------------------------------------------------------------------------------------------- decoder
@njit(cache=True, inline="always")
def turn_cost_of(t, kind, out_arc, arc_cost, turn_penalty, turn_cost, has_override):
    """The metric decoder for one turn ``t`` (numba, inlined): :data:`FORBIDDEN` if ``kind[t]`` is
    :data:`RESTRICTED`, the override closes it or its out-arc is :data:`CLOSED`, else (override or
    ``turn_penalty[kind[t]]``) + ``arc_cost[out_arc[t]]`` as int64. The formula the GPU customization
    evaluates per turn."""
    k = kind[t]
    if k == RESTRICTED:
        return np.int64(FORBIDDEN)
    c = np.int64(arc_cost[out_arc[t]])
    if c == CLOSED:
        return np.int64(FORBIDDEN)
    if has_override:
        p = np.int64(turn_cost[t])
        if p == FORBIDDEN:
            return np.int64(FORBIDDEN)
    else:
        p = np.int64(turn_penalty[k])
    return p + c


@njit(cache=True, parallel=True)
def decode_kernel(kind, out_arc, arc_cost, turn_penalty, turn_cost, has_override):
    """Every turn through :func:`turn_cost_of`: int64 (T,) (the CPU twin of the on-the-fly decoding;
    parallel over turns)."""
    n = kind.shape[0]
    out = np.empty(n, dtype=np.int64)
    for t in prange(n):
        out[t] = turn_cost_of(t, kind, out_arc, arc_cost, turn_penalty, turn_cost, has_override)
    return out


def decode_turn_costs(metric, table):
    """The metric decoder: the cost of taking every turn of ``table`` under ``metric``.

    Delling, Kobitzsch, Werneck, "Customizing Driving Directions with GPUs" (Euro-Par 2014), sec. 2-3:
    the customization works on the expanded graph whose arcs are "the concatenation of an original turn
    and an original arc", and applies "the current metric decoder during aggregation". Turn ``t = (a,
    b)`` costs ``penalty(kind[t]) + arc_cost[b]`` (``turn_cost[t]`` replacing the type penalty where the
    metric has per-turn costs). The GPU customization does not materialise this array: it evaluates the
    same formula on the fly from the metric-independent ``table.kind``/``table.out_arc`` and the small
    per-metric data (``arc_cost`` and the 4 type penalties), so a metric change ships only those (sec. 5).
    This function is the reference (and CPU twin) of that evaluation: :func:`turn_cost_of` per turn.

    Parameters
    ----------
    metric : Metric
    table : TurnTable
        Built for the same graph (``metric.n_arcs == table.n_arcs``).

    Returns
    -------
    ndarray of int64, shape (T,)
        Cost in ``metric.units``; :data:`FORBIDDEN` (-1) for restricted (or overridden-closed) turns and
        the turns into a :data:`CLOSED` arc.

    Raises
    ------
    ValueError
        Metric and table of different graphs (arc counts differ) or a ``turn_cost`` of another length.
    """
    if metric.n_arcs != table.n_arcs:
        raise ValueError(f"metric {metric.name!r} has {metric.n_arcs} arcs but the turn table has "
                         f"{table.n_arcs}")
    if metric.turn_cost is not None:
        if metric.turn_cost.size != table.n_turns:
            raise ValueError(f"metric {metric.name!r} has {metric.turn_cost.size} turn costs but the turn "
                             f"table has {table.n_turns} turns")
        tc, has = metric.turn_cost, True
    else:
        tc, has = np.zeros(0, dtype=WEIGHT_DTYPE), False
    return decode_kernel(table.kind, table.out_arc, metric.arc_cost, metric.turn_penalty, tc, has)
