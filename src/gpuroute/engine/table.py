"""The table service's search over the customized overlay: turn-aware and traffic-aware matrices for
:meth:`gpuroute.engine.Engine.table` and :meth:`~gpuroute.engine.Engine.trip`.

Which search answers a table (:func:`overlay_snapshot`):

* the overlay's many-to-many (:func:`gpuroute.crp.many_to_many.table`, OSRM's MLD buckets) whenever the
  engine has an overlay whose current metric is not the hierarchy's: turn costs or restrictions (a graph
  read with a Lua profile, OSM turn restrictions, a U-turn penalty), or costs changed by ``/customize``;
* the contraction hierarchy's many-to-many otherwise (no overlay, or an overlay whose metric is exactly
  the hierarchy's weight with every turn allowed at no penalty: the two give the same costs, and the
  hierarchy's runs on the GPU).

Reported quantities are those a route between the same points reports (:meth:`Engine.route`): durations
(s) are the snapshot's costs when its metric is a time (its turn costs less the out-arc's cost for the
turns, on a graph with turn costs), else the graph's travel times and turn durations; distances (m) the
arcs' lengths; both summed along the weight-optimal path of each cell, with the partial end arcs.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["overlay_snapshot", "overlay_matrices"]


def overlay_snapshot(engine):
    """The metric snapshot (:class:`gpuroute.engine.traffic.Snapshot`) a table must be searched on with the
    overlay, or None when the hierarchy answers it exactly (see the module docstring)."""
    tr = engine._traffic
    if tr is None:
        return None
    snap = tr.snapshot()
    st = snap.state
    cache = engine._table_pristine
    key = id(st)
    ok = cache.get(key)
    if ok is None or ok[0] is not st:
        pristine = False
        if engine._tc is None and engine.ch.weight in engine.graph.weights:
            ch_w = np.asarray(engine.graph.weight(engine.ch.weight), dtype=np.int64)
            arc = np.asarray(st.arc_cost, dtype=np.int64)
            if np.array_equal(arc, ch_w):
                out = np.asarray(tr.overlay.turns.out_arc, dtype=np.int64)
                pristine = bool(np.array_equal(np.asarray(st.turn_cost, dtype=np.int64), arc[out]))
        cache.clear()  # one entry: the current state
        cache[key] = ok = (st, pristine)
    return None if ok[1] else snap


def _along(engine, snap, need_dur, need_len):
    """The ``along`` quantities of :func:`gpuroute.crp.many_to_many.table`: ``[(per_arc, per_turn)]`` for
    durations (s) when asked and known, then distances (m) when asked. The per-arc and per-turn durations of
    a metric are made once per metric snapshot (the last few kept: one per customization state), not per
    request."""
    out = []
    if need_dur:
        cache = engine._along_cache
        hit = cache.get(id(snap))
        if hit is None or hit[0] is not snap:
            if len(cache) >= _ALONG_SNAPSHOTS:
                cache.clear()
            hit = cache[id(snap)] = (snap, _durations_along(engine, snap))
        out.append(hit[1])
    if need_len:
        out.append((np.ascontiguousarray(engine._len, dtype=np.float64), None))
    return out


#: Metric snapshots whose per-arc and per-turn durations :func:`_along` keeps.
_ALONG_SNAPSHOTS = 4


def _durations_along(engine, snap):
    """``(per_arc, per_turn)`` durations (s) of ``snap``'s metric (see :func:`_along`)."""
    if snap.is_time:
        per_arc = snap.cost * snap.scale
        per_turn = None
        if engine._tc is not None:
            out_arc = np.asarray(engine._traffic.overlay.turns.out_arc, dtype=np.int64)
            per_turn = np.maximum(snap.turn_cost.astype(np.float64) - snap.cost[out_arc], 0.0) * snap.scale
    else:  # the state's live travel times (speed updates), else the graph's
        per_arc = engine._dur if snap.duration is None else snap.duration
        per_turn = (None if engine._tc is None
                    else np.maximum(engine._tc.duration.astype(np.float64), 0.0) * 0.1)
    return np.ascontiguousarray(per_arc, dtype=np.float64), per_turn


def overlay_matrices(engine, snap, sp, tp, need_dur=False, need_len=False):
    """Costs, durations and distances between phantoms over the overlay snapshot ``snap``.

    Parameters
    ----------
    engine : Engine
    snap : Snapshot
        From :func:`overlay_snapshot` (not None).
    sp, tp : list of Phantom
        Sources and targets.
    need_dur, need_len : bool
        Sum durations (s) / distances (m) along each cell's chosen path.

    Returns
    -------
    (cost, duration, distance)
        float64 (|S|, |T|) each: the cost in the engine's weight unit (inf: no path), durations and
        distances (None where not asked; inf where no path).
    """
    from ..crp.many_to_many import table

    sa, sf = engine._options(sp)
    ta, tf = engine._options(tp)
    along = _along(engine, snap, need_dur, need_len)
    # numba-parallel kernels: one table at a time per engine (numba's workqueue threading layer aborts on
    # concurrent parallel calls; with omp or tbb this costs nothing, a table uses every core anyway)
    with engine._table_lock:
        res = table(engine._traffic.overlay, sa, sf, ta, tf, state=snap.state, along=along)
    cost = res.cost * (snap.scale / engine._w_scale)
    k = 0
    dur = length = None
    if need_dur:
        dur = res.along[k]
        k += 1
    if need_len:
        length = res.along[k]
    for x in (dur, length):
        if x is not None:
            x[~np.isfinite(res.cost)] = math.inf
    return cost, dur, length
