"""Turn restrictions stored per (in-arc, out-arc) pair: the arc-based turn model of Customizable
Route Planning (Delling, Goldberg, Pajor, Werneck, "Customizable Route Planning in Road Networks",
Transportation Science 2017, sec. 2; used by Delling, Kobitzsch, Werneck, "Customizing Driving
Directions with GPUs", Euro-Par 2014, sec. 2), where a turn is a transition between two arcs that
meet at a node.

A restriction is ``(in_arc, out_arc, kind)``: ``in_arc`` ends at the via node where ``out_arc``
starts. ``kind`` is :data:`NO` (this turn is forbidden, OSM ``no_*``) or :data:`ONLY` (from
``in_arc`` this is the only allowed turn, OSM ``only_*``). Searches do not read them yet; CRP will.
"""
from __future__ import annotations

import numpy as np

from .constants import INDEX_DTYPE
from .errors import GraphError

#: A forbidden turn (OSM ``no_left_turn``, ``no_u_turn``, ...).
NO = 0
#: The only allowed turn out of ``in_arc`` (OSM ``only_straight_on``, ...).
ONLY = 1
KIND_NAMES = {NO: "no", ONLY: "only"}


class TurnRestrictions:
    """Turn restrictions of one graph, as arrays (an arc id is its position in the graph's CSR).

    Parameters
    ----------
    in_arc, out_arc : array_like of int, shape (k,)
        Arc ids; ``head[in_arc] == tail[out_arc]`` (the via node) for every restriction.
    kind : array_like of int, shape (k,)
        :data:`NO` or :data:`ONLY`.
    meta : dict, optional
        Provenance and counts (e.g. ``{"relations": ..., "unsupported_via_way": ...}``).

    Raises
    ------
    GraphError
        Arrays of different shapes or a kind other than NO/ONLY (checked against a graph by
        :meth:`validate`).
    """

    def __init__(self, in_arc, out_arc, kind, *, meta=None):
        self.in_arc = np.ascontiguousarray(in_arc, dtype=INDEX_DTYPE)
        self.out_arc = np.ascontiguousarray(out_arc, dtype=INDEX_DTYPE)
        self.kind = np.ascontiguousarray(kind, dtype=np.int8)
        if not (self.in_arc.ndim == 1 and self.in_arc.shape == self.out_arc.shape == self.kind.shape):
            raise GraphError(f"turn restriction arrays must be 1-D of one length (got {self.in_arc.shape}, "
                             f"{self.out_arc.shape}, {self.kind.shape})")
        bad = (self.kind != NO) & (self.kind != ONLY)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise GraphError(f"turn restriction {i} has kind {int(self.kind[i])}; expected {NO} (no) or {ONLY} (only)")
        self.meta = dict(meta or {})

    @classmethod
    def empty(cls, meta=None):
        z = np.zeros(0, dtype=INDEX_DTYPE)
        return cls(z, z, np.zeros(0, dtype=np.int8), meta=meta)

    def __len__(self):
        return int(self.in_arc.size)

    def counts(self) -> dict:
        """``{"no": int, "only": int}``."""
        return {name: int(np.count_nonzero(self.kind == k)) for k, name in KIND_NAMES.items()}

    def validate(self, tail, head):
        """Check arc ids against a graph's ``tail``/``head`` arrays (shape (m,)).

        Raises
        ------
        GraphError
            An arc id outside ``[0, m)``, or a pair whose arcs do not meet (``head[in] != tail[out]``),
            naming the restriction's position.
        """
        m = head.size
        for nm, a in (("in_arc", self.in_arc), ("out_arc", self.out_arc)):
            bad = (a < 0) | (a >= m)
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise GraphError(f"turn restriction {i}: {nm} {int(a[i])} is outside the arc range [0, {m})")
        if len(self):
            apart = head[self.in_arc] != tail[self.out_arc]
            if apart.any():
                i = int(np.flatnonzero(apart)[0])
                raise GraphError(f"turn restriction {i}: in_arc {int(self.in_arc[i])} ends at node "
                                 f"{int(head[self.in_arc[i]])} but out_arc {int(self.out_arc[i])} starts at "
                                 f"{int(tail[self.out_arc[i]])}")

    def remap(self, arc_map):
        """Restrictions with arc ids mapped through ``arc_map`` (int array, old id -> new id, -1 =
        dropped); a restriction with a dropped arc is dropped (counted in ``meta["dropped"]``)."""
        arc_map = np.asarray(arc_map)
        i, o = arc_map[self.in_arc], arc_map[self.out_arc]
        keep = (i >= 0) & (o >= 0)
        meta = dict(self.meta)
        dropped = int((~keep).sum())
        if dropped:
            meta["dropped"] = int(meta.get("dropped", 0)) + dropped
        return TurnRestrictions(i[keep], o[keep], self.kind[keep], meta=meta)

    def forbidden_pairs(self, first_out, head):
        """Every forbidden turn as ``(in_arc, out_arc)`` int32 arrays: the ``no`` pairs, plus, for each
        ``only`` pair, every other out-arc of its via node (U-turn onto the reverse arc included)."""
        ins = [self.in_arc[self.kind == NO]]
        outs = [self.out_arc[self.kind == NO]]
        for a_in, a_out in zip(self.in_arc[self.kind == ONLY], self.out_arc[self.kind == ONLY], strict=True):
            via = head[a_in]
            others = np.arange(first_out[via], first_out[via + 1], dtype=INDEX_DTYPE)
            others = others[others != a_out]
            ins.append(np.full(others.size, a_in, dtype=INDEX_DTYPE))
            outs.append(others)
        i = np.concatenate(ins).astype(INDEX_DTYPE)
        o = np.concatenate(outs).astype(INDEX_DTYPE)
        if i.size:
            key = np.unique(i.astype(np.int64) << 32 | o.astype(np.int64))
            i, o = (key >> 32).astype(INDEX_DTYPE), (key & 0xFFFFFFFF).astype(INDEX_DTYPE)
        return i, o

    def __eq__(self, other):
        return (isinstance(other, TurnRestrictions) and np.array_equal(self.in_arc, other.in_arc)
                and np.array_equal(self.out_arc, other.out_arc) and np.array_equal(self.kind, other.kind))

    def __repr__(self):
        c = self.counts()
        return f"TurnRestrictions({len(self)}: {c['no']} no, {c['only']} only)"
