"""RoadGraph: a directed road network as CSR arrays (RoutingKit style: an arc's id is its position).

Forward CSR: ``first_out`` (n+1,), ``head`` (m,), and the derived ``tail`` (m,). Reverse CSR (built
lazily): ``rev_first_out`` (n+1,), ``rev_tail`` (m,) the tail of each incoming arc, and ``rev_arc`` (m,)
the forward arc id of each incoming arc, so a weight array indexed by arc id serves both directions.
"""
from __future__ import annotations

import hashlib
from collections.abc import Mapping

import numpy as np

from .constants import INDEX_DTYPE, MAX_WEIGHT, WEIGHT_DTYPE
from .errors import GraphError
from .turn_costs import TurnCosts
from .turns import TurnRestrictions
from .units import STANDARD_UNITS, Unit, parse_unit

#: Coordinate systems a RoadGraph knows: lon/lat degrees (WGS84) or planar x/y in an unstated unit.
COORD_SYSTEMS = ("lonlat", "planar")


def _as_attr_array(name, a, m):
    """Validate one arc attribute: a numeric or boolean array of one value per arc."""
    a = np.asarray(a)
    if a.shape != (m,):
        raise GraphError(f"arc attribute {name!r} has shape {a.shape}, expected ({m},) (one value per arc)")
    if a.dtype.kind not in "biuf":
        raise GraphError(f"arc attribute {name!r} has dtype {a.dtype}; arc attributes must be numeric "
                         "(store codes and keep their labels in meta)")
    return np.ascontiguousarray(a)


def _check_coords(coords, n, coord_system):
    coords = np.ascontiguousarray(coords, dtype=np.float64)
    if coords.shape != (n, 2):
        raise GraphError(f"coords has shape {coords.shape}, expected ({n}, 2)")
    bad = ~np.isfinite(coords).all(axis=1)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise GraphError(f"coords of node {i} are {coords[i].tolist()}: coordinates must be finite")
    if coord_system == "lonlat" and n:
        bad = (np.abs(coords[:, 0]) > 180) | (np.abs(coords[:, 1]) > 90)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise GraphError(f"coords of node {i} are lon={coords[i, 0]}, lat={coords[i, 1]}: a lon/lat graph needs "
                             "longitude in [-180, 180] and latitude in [-90, 90] (pass coord_system='planar' "
                             "for x/y coordinates)")
    return coords


def _as_weight_array(name, w, m, tail=None, head=None):
    """Validate one weight array (positive integers within int32) and return it as WEIGHT_DTYPE."""
    w = np.asarray(w)
    if w.shape != (m,):
        raise GraphError(f"weight {name!r} has shape {w.shape}, expected ({m},) (one value per arc)")
    if w.dtype.kind == "b" or w.dtype.kind not in "iuf":
        raise GraphError(f"weight {name!r} has dtype {w.dtype}; weights must be integers")

    def where(i):
        s = f"arc {i}"
        if tail is not None:
            s += f" ({int(tail[i])} -> {int(head[i])})"
        return s

    if w.dtype.kind == "f":
        bad = ~np.isfinite(w)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise GraphError(f"weight {name!r} of {where(i)} is {w[i]}: weights must be finite")
        frac = w != np.round(w)
        if frac.any():
            i = int(np.flatnonzero(frac)[0])
            raise GraphError(
                f"weight {name!r} of {where(i)} is {w[i]}: weights must be integral "
                "(scale to an integer unit, e.g. decimetres or deciseconds)"
            )
    if m:
        neg = w < 1
        if neg.any():
            i = int(np.flatnonzero(neg)[0])
            raise GraphError(
                f"weight {name!r} of {where(i)} is {w[i]}: weights must be positive integers "
                "(negative weights are not allowed; round zero-length arcs up to 1 unit)"
            )
        big = w > MAX_WEIGHT
        if big.any():
            i = int(np.flatnonzero(big)[0])
            raise GraphError(f"weight {name!r} of {where(i)} is {w[i]}: larger than MAX_WEIGHT={MAX_WEIGHT}")
    return np.ascontiguousarray(w, dtype=WEIGHT_DTYPE)


def merge_parallel(tail, head, weight):
    """The one merge rule of :meth:`RoadGraph.from_arcs`: self-loops dropped, each group of parallel arcs
    ``(u, v)`` represented by ONE real arc, the lightest by ``weight`` (ties: the first in input order).

    Parameters
    ----------
    tail, head : ndarray of int, shape (m,)
    weight : ndarray, shape (m,)
        The primary weight.

    Returns
    -------
    kept : ndarray of int64
        Input positions of the kept arcs, sorted by (tail, head).
    rep : ndarray of int64, shape (m,)
        For every input arc, the input position of the arc that represents its group; -1 for self-loops.
    """
    m = tail.size
    rep = np.full(m, -1, dtype=np.int64)
    pos = np.flatnonzero(tail != head)
    order = pos[np.lexsort((pos, weight[pos], head[pos], tail[pos]))]  # lightest first, then input order
    if order.size == 0:
        return order, rep
    t, h = tail[order], head[order]
    new = np.ones(order.size, dtype=bool)
    new[1:] = (t[1:] != t[:-1]) | (h[1:] != h[:-1])
    kept = order[new]
    rep[order] = kept[np.cumsum(new) - 1]
    return kept, rep


class RoadGraph:
    """A directed road network in CSR form with named integer weights.

    Build one with :meth:`from_arcs` (which validates, drops self-loops and reduces parallel arcs to the
    lightest) or with a loader from :mod:`gpuroute.io`. The constructor itself takes arrays that are
    already in CSR order and checks them.

    Parameters
    ----------
    first_out : array_like of int, shape (n_nodes + 1,)
        CSR offsets: the arcs leaving node ``u`` are ``first_out[u]:first_out[u+1]``.
    head : array_like of int, shape (n_arcs,)
        Head node of each arc.
    weights : mapping str -> array_like of int, shape (n_arcs,)
        Named positive integer weights (e.g. ``"distance"``, ``"travel_time"``). The first is the
        default metric.
    units : mapping str -> Unit or str, optional
        Unit of each weight (:class:`gpuroute.graph.units.Unit`, or a known symbol such as ``"m"``,
        ``"ds"``; other strings become units of unknown scale). Default: the standard unit of the
        weight's name (``distance``: metres, ``travel_time``: deciseconds), else none.
    coords : array_like of float, shape (n_nodes, 2), optional
        Longitude and latitude of each node in degrees (WGS84), or planar x/y (see ``coord_system``).
        Checked on construction: finite, and for ``"lonlat"`` inside [-180, 180] x [-90, 90].
    name : str
        Human-readable name (e.g. ``"USA-road-d.NY"``, ``"ny-tiled-8x8"``).
    node_ids : array_like of int64, shape (n_nodes,), optional
        External id of each internal node (e.g. DIMACS 1-based ids, OSM node ids).
    coord_system : {"lonlat", "planar"}
        How to read ``coords`` (METIS ``.xyz`` and TNTP graphs are planar).
    meta : dict, optional
        Provenance: source files, arcs dropped during cleaning, ...
    arc_attrs : mapping str -> array_like, shape (n_arcs,), optional
        Numeric arc attributes beside the weights (OSM: ``way_id``, ``road_class``, ``speed_kmh``,
        ``length_m``; TNTP: ``capacity``). Units of attributes go in ``attr_units``.
    attr_units : mapping str -> Unit or str, optional
    turns : TurnRestrictions, optional
        Turn restrictions per (in-arc, out-arc) pair (see :mod:`gpuroute.graph.turns`).
    turn_costs : TurnCosts, optional
        Duration and weight of every turn (:mod:`gpuroute.graph.turn_costs`; a graph extracted with an
        OSRM Lua profile has them), in the turn order of :class:`gpuroute.crp.metric.TurnTable`.

    Raises
    ------
    GraphError
        If offsets are not monotone, a head is out of range, a weight is not a positive integer
        within ``MAX_WEIGHT``, coordinates are not finite or not lon/lat, an attribute has the wrong
        shape, a turn restriction names arcs that do not meet, or the turn costs are not one per turn.
    """

    def __init__(self, first_out, head, weights, *, units=None, coords=None, name="graph", node_ids=None,
                 coord_system="lonlat", meta=None, arc_attrs=None, attr_units=None, turns=None, turn_costs=None):
        first_out = np.ascontiguousarray(first_out, dtype=np.int64)
        head = np.asarray(head)
        if first_out.ndim != 1 or first_out.size < 1:
            raise GraphError("first_out must be a 1-D array of n_nodes + 1 offsets")
        n = first_out.size - 1
        m = head.size
        if n >= np.iinfo(INDEX_DTYPE).max or m >= np.iinfo(INDEX_DTYPE).max:
            raise GraphError(f"{n} nodes / {m} arcs exceed the int32 id space")
        if first_out[0] != 0 or first_out[-1] != m:
            raise GraphError(f"first_out must start at 0 and end at n_arcs={m} (got {first_out[0]}..{first_out[-1]})")
        if n and np.any(np.diff(first_out) < 0):
            raise GraphError("first_out must be non-decreasing")
        if m:
            hmin, hmax = int(head.min()), int(head.max())
            if hmin < 0 or hmax >= n:
                i = int(np.flatnonzero((head < 0) | (head >= n))[0])
                raise GraphError(f"head of arc {i} is {int(head[i])}, outside the node range [0, {n})")
        self.first_out = first_out.astype(INDEX_DTYPE)
        self.head = np.ascontiguousarray(head, dtype=INDEX_DTYPE)
        self.tail = np.repeat(np.arange(n, dtype=INDEX_DTYPE), np.diff(first_out))
        if not isinstance(weights, Mapping):
            weights = {"weight": weights}
        if not weights:
            raise GraphError("a RoadGraph needs at least one weight")
        self.weights = {str(k): _as_weight_array(k, v, m, self.tail, self.head) for k, v in weights.items()}
        units = dict(units or {})
        self.units = {k: parse_unit(units[k]) if k in units else STANDARD_UNITS.get(k, parse_unit(""))
                      for k in self.weights}
        if coord_system not in COORD_SYSTEMS:
            raise GraphError(f"coord_system must be one of {COORD_SYSTEMS}, got {coord_system!r}")
        if coords is not None:
            coords = _check_coords(coords, n, coord_system)
        self.coords = coords
        self.coord_system = coord_system
        self.arc_attrs = {str(k): _as_attr_array(k, v, m) for k, v in (arc_attrs or {}).items()}
        clash = set(self.arc_attrs) & set(self.weights)
        if clash:
            raise GraphError(f"{sorted(clash)} is both a weight and an arc attribute")
        attr_units = dict(attr_units or {})
        self.attr_units = {k: parse_unit(attr_units.get(k)) for k in self.arc_attrs}
        if turns is not None:
            if not isinstance(turns, TurnRestrictions):
                raise GraphError(f"turns must be a TurnRestrictions, got {type(turns).__name__}")
            turns.validate(self.tail, self.head)
        self.turns = turns
        if turn_costs is not None:
            if not isinstance(turn_costs, TurnCosts):
                raise GraphError(f"turn_costs must be a TurnCosts, got {type(turn_costs).__name__}")
            turn_costs.validate(self.first_out, self.head, n)
        self.turn_costs = turn_costs
        self._derived = {}
        if node_ids is not None:
            node_ids = np.ascontiguousarray(node_ids, dtype=np.int64)
            if node_ids.shape != (n,):
                raise GraphError(f"node_ids has shape {node_ids.shape}, expected ({n},)")
        self.node_ids = node_ids
        self.name = name
        self.meta = dict(meta or {})
        self._rev = None

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_arcs(cls, n_nodes, tail, head, weights, *, units=None, coords=None, name="graph", node_ids=None,
                  coord_system="lonlat", meta=None, arc_attrs=None, attr_units=None, turns=None):
        """Build a RoadGraph from an arc list, cleaning it the way road data needs.

        Self-loops are dropped and parallel arcs ``(u, v)`` are reduced to ONE real arc: the lightest by
        the primary (first) weight, ties broken by input order. The kept arc keeps all its weights and
        attributes, so a route's distance and duration always come from the same road (shortest paths
        by the primary weight are exact; another weight is the kept arc's, not the smallest of the
        group). ``scipy.sparse.csr_matrix`` would *sum* duplicates instead.

        Parameters
        ----------
        n_nodes : int
        tail, head : array_like of int, shape (m,)
            0-based node ids of each arc.
        weights : array_like, shape (m,), or mapping name -> array_like, shape (m,)
            Positive integer weights (a bare array is named ``"weight"``).
        units, coords, name, node_ids, coord_system, meta, attr_units
            As for :class:`RoadGraph`.
        arc_attrs : mapping str -> array_like, shape (m,), optional
            Attributes of the input arcs (kept with their arc).
        turns : TurnRestrictions, optional
            Restrictions whose arc ids are *input positions* (``0 .. m-1``); they are mapped to the kept
            arcs, and a restriction through a dropped arc is dropped (counted in its ``meta``).

        Returns
        -------
        RoadGraph
            ``meta`` gains ``self_loops_dropped`` and ``parallel_arcs_dropped``.

        Raises
        ------
        GraphError
            If an id is outside ``[0, n_nodes)``, arrays disagree in length, or a weight is invalid
            (the message names the arc's position in the input).
        """
        n = int(n_nodes)
        if n < 0:
            raise GraphError(f"n_nodes must be >= 0, got {n}")
        tail = np.asarray(tail)
        head = np.asarray(head)
        if tail.shape != head.shape or tail.ndim != 1:
            raise GraphError(f"tail and head must be 1-D arrays of equal length (got {tail.shape}, {head.shape})")
        for nm, a in (("tail", tail), ("head", head)):
            if a.size and a.dtype.kind not in "iu":
                if a.dtype.kind == "f" and np.all(a == np.round(a)):
                    continue
                raise GraphError(f"{nm} ids must be integers (dtype {a.dtype})")
        tail = tail.astype(np.int64)
        head = head.astype(np.int64)
        m = tail.size
        for nm, a in (("tail", tail), ("head", head)):
            bad = (a < 0) | (a >= n)
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise GraphError(f"{nm} of arc {i} is {int(a[i])}, outside the node range [0, {n})")
        if not isinstance(weights, Mapping):
            weights = {"weight": weights}
        ws = {str(k): _as_weight_array(k, v, m, tail, head) for k, v in weights.items()}
        if not ws:
            raise GraphError("a RoadGraph needs at least one weight")
        attrs = {str(k): _as_attr_array(k, v, m) for k, v in (arc_attrs or {}).items()}
        pos, _ = merge_parallel(tail, head, next(iter(ws.values())))
        n_loops = int(np.count_nonzero(tail == head))
        n_par = int(m - n_loops - pos.size)
        tail, head = tail[pos], head[pos]
        ws = {k: v[pos] for k, v in ws.items()}
        attrs = {k: v[pos] for k, v in attrs.items()}
        if turns is not None:
            arc_map = np.full(m, -1, dtype=np.int64)
            arc_map[pos] = np.arange(pos.size, dtype=np.int64)
            bad = (turns.in_arc >= m) | (turns.out_arc >= m) | (turns.in_arc < 0) | (turns.out_arc < 0)
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise GraphError(f"turn restriction {i} names an arc outside the input positions [0, {m})")
            turns = turns.remap(arc_map)
        first_out = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(tail, minlength=n), out=first_out[1:])
        meta = dict(meta or {})
        meta.update(self_loops_dropped=n_loops, parallel_arcs_dropped=n_par)
        return cls(first_out, head, ws, units=units, coords=coords, name=name, node_ids=node_ids,
                   coord_system=coord_system, meta=meta, arc_attrs=attrs, attr_units=attr_units, turns=turns)

    # ------------------------------------------------------------------ basic properties
    @property
    def n_nodes(self) -> int:
        """Number of nodes ``n``."""
        return self.first_out.size - 1

    @property
    def n_arcs(self) -> int:
        """Number of arcs ``m`` (after cleaning)."""
        return self.head.size

    @property
    def weight_names(self):
        """Names of the weights, the default (first) one first."""
        return list(self.weights)

    @property
    def default_weight(self) -> str:
        return next(iter(self.weights))

    def weight(self, name=None):
        """Return the weight array (int32, shape (n_arcs,)) of ``name`` (default: the first weight).

        Raises
        ------
        KeyError
            If the graph has no weight of that name (the message lists the ones it has).
        """
        if name is None:
            name = self.default_weight
        try:
            return self.weights[name]
        except KeyError:
            raise KeyError(f"graph {self.name!r} has no weight {name!r}; it has {self.weight_names}") from None

    def out_degree(self):
        """Out-degree of every node, int32 (n_nodes,)."""
        return np.diff(self.first_out).astype(INDEX_DTYPE)

    def in_degree(self):
        """In-degree of every node, int32 (n_nodes,)."""
        return np.bincount(self.head, minlength=self.n_nodes).astype(INDEX_DTYPE)

    # ------------------------------------------------------------------ reverse CSR
    def _build_reverse(self):
        order = np.argsort(self.head, kind="stable").astype(INDEX_DTYPE)
        rev_first_out = np.zeros(self.n_nodes + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.head, minlength=self.n_nodes), out=rev_first_out[1:])
        self._rev = (rev_first_out.astype(INDEX_DTYPE), self.tail[order], order)

    @property
    def rev_first_out(self):
        """Reverse CSR offsets, int32 (n_nodes + 1,): arcs entering ``v`` are ``rev_first_out[v]:rev_first_out[v+1]``."""
        if self._rev is None:
            self._build_reverse()
        return self._rev[0]

    @property
    def rev_tail(self):
        """Tail node of each incoming arc in reverse-CSR order, int32 (n_arcs,)."""
        if self._rev is None:
            self._build_reverse()
        return self._rev[1]

    @property
    def rev_arc(self):
        """Forward arc id of each incoming arc in reverse-CSR order, int32 (n_arcs,)."""
        if self._rev is None:
            self._build_reverse()
        return self._rev[2]

    def reverse(self):
        """The transposed graph (every arc u->v becomes v->u), same weights, attributes and coordinates
        (turn restrictions and turn costs do not carry over to the transposed graph)."""
        return RoadGraph.from_arcs(self.n_nodes, self.head, self.tail, self.weights, units=self.units,
                                   coords=self.coords, name=self.name + "-reversed", node_ids=self.node_ids,
                                   coord_system=self.coord_system, meta=self.meta, arc_attrs=self.arc_attrs,
                                   attr_units=self.attr_units)

    def derived(self, key, build):
        """A structure derived from this graph's arrays (k-d tree, largest component, cell layout, A*
        factor), built once by ``build()`` and kept here: the one place CPU-side derived data lives
        (GPU buffers are owned by :class:`gpuroute.backend.device_graph.DeviceGraph` instead). The
        arrays of a RoadGraph are treated as immutable; :meth:`clear_derived` drops the cache."""
        try:
            return self._derived[key]
        except KeyError:
            value = self._derived[key] = build()
            return value

    def clear_derived(self):
        """Forget every derived structure (call after changing arrays in place)."""
        self._derived.clear()

    def unit(self, weight=None) -> Unit:
        """The :class:`~gpuroute.graph.units.Unit` of a weight (default: the first)."""
        self.weight(weight)
        return self.units[self.default_weight if weight is None else weight]

    @property
    def is_planar(self) -> bool:
        """True for planar x/y coordinates (METIS ``.xyz``, TNTP), False for lon/lat."""
        return self.coord_system == "planar"

    # ------------------------------------------------------------------ interop
    def to_scipy(self, weight=None):
        """The graph as a ``scipy.sparse.csr_matrix`` (n, n) of int64 weights.

        Parallel arcs were already reduced, so this matrix is a correct oracle for shortest paths
        (building one from raw arcs would sum duplicates).
        """
        import scipy.sparse as sp

        w = self.weight(weight).astype(np.int64)
        return sp.csr_matrix((w, self.head, self.first_out), shape=(self.n_nodes, self.n_nodes))

    def fingerprint(self) -> str:
        """SHA-256 (hex, first 16 chars) over the CSR arrays, weights and turn costs (where the graph has
        them): identifies the routing content
        (:func:`gpuroute.store.save_graph` records a second hash over every array and manifest field)."""
        h = hashlib.sha256()
        for a in (self.first_out, self.head, *[self.weights[k] for k in sorted(self.weights)]):
            h.update(np.ascontiguousarray(a).tobytes())
        h.update(",".join(sorted(self.weights)).encode())
        if getattr(self, "turn_costs", None) is not None:  # graphs without turn costs hash as before
            h.update(b"turn_costs:" + self.turn_costs.fingerprint_bytes())
        return h.hexdigest()[:16]

    def __repr__(self):
        ws = ", ".join(f"{k} [{u.symbol}]" if u.symbol else k for k, u in self.units.items())
        return f"RoadGraph({self.name!r}, n_nodes={self.n_nodes:,}, n_arcs={self.n_arcs:,}, weights: {ws})"
