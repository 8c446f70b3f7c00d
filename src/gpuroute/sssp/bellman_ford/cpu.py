"""Bellman-Ford family on the CPU (numba twins of ``gpu.py``): Harish & Narayanan's conventional method,
selection and adaptive thread creation, as "Accelerating SSSP Algorithm on GPU with Adaptive Thread
Creation" runs them: Alg. 1-3 (conventional), 5-6 (selection), 4 (adaptive).

Each twin runs the same phases as its GPU method with Jacobi-style relaxation (a node relaxes with the
distance it had at the phase start), so its statistics are those of the method, deterministic.
Distances are exact; predecessors follow the canonical rule (:mod:`gpuroute.sssp.dijkstra`).
"""
from __future__ import annotations

import time

import numpy as np
from numba import njit, objmode

from ...graph.constants import INF
from ..common import cpu_predecessors, run_each
from .options import KIND_QUEUE, KIND_SCAN, KIND_SCAN_BUILD, adaptive_params, conventional_params

_INF = INF


@njit(cache=True)
def _relax_masked(first_out, head, weight, ma, ca, ua, select, nra, nr, sched, nwa):
    """Harish & Narayanan relax step (Adaptive Thread Creation paper): every ``v`` with ``Ma[v]`` clears it and relaxes its
    out-arcs with ``Ca[v]`` into ``Ua``.

    ``select=False``: RELAX_KERNEL (Alg. 2) over all nodes ``0 .. nr-1`` (``nr = n``; ``nra``, ``sched``,
    ``nwa`` unused). ``select=True``: SELECT_RELAX_KERNEL (Alg. 5) over the read queue ``nra[:nr]``; a
    head whose ``Ua`` strictly decreased is appended to ``nwa`` unless its ``sched`` flag is already set
    (the flag is then set). Returns the number of nodes appended to ``nwa`` (0 without ``select``).
    """
    nw = 0
    for x in range(nr):
        v = nra[x] if select else x
        if ma[v]:
            ma[v] = False
            dv = ca[v]
            for a in range(first_out[v], first_out[v + 1]):
                h = head[a]
                nd = dv + weight[a]
                if nd < ua[h]:
                    ua[h] = nd
                    if select and not sched[h]:
                        sched[h] = True
                        nwa[nw] = h
                        nw += 1
    return nw


@njit(cache=True)
def _update_all(ma, ca, ua):
    """Seed 001 Alg. 3 (UPDATE_KERNEL) over all n nodes; returns the number of nodes updated."""
    c = 0
    for v in range(ma.shape[0]):
        if ca[v] > ua[v]:
            ca[v] = ua[v]
            ma[v] = True
            c += 1
        ua[v] = ca[v]
    return c


@njit(cache=True)
def conventional_one(first_out, head, weight, source, dist):
    """Harish & Narayanan's method run on the CPU (Adaptive Thread Creation paper, Alg. 1-3): the conventional all-node
    phase loop with mask ``Ma``, cost ``Ca`` and update ``Ua`` arrays. Returns the number of phases.

    ``dist`` (int64 (n,)) is filled in place. The loop is bounded by n phases (Bellman-Ford's bound).
    """
    n = first_out.shape[0] - 1
    ca = dist
    ca[:] = _INF
    ua = np.full(n, _INF, dtype=np.int64)
    ma = np.zeros(n, dtype=np.bool_)
    ca[source] = 0
    ua[source] = 0
    ma[source] = True
    no_queue = np.empty(0, dtype=np.int32)
    no_flags = np.empty(0, dtype=np.bool_)
    phases = 0
    changed = True
    while changed and phases <= n:
        phases += 1
        _relax_masked(first_out, head, weight, ma, ca, ua, False, no_queue, n, no_flags, no_queue)  # Alg. 2
        changed = _update_all(ma, ca, ua) > 0  # UPDATE_KERNEL (Alg. 3)
    return phases


@njit(cache=True)
def _select_update(ma, ca, ua, sched, nra, nr):
    """Seed 001 Alg. 6 (SELECT_UPDATE_KERNEL) over ``nra[:nr]`` (also clears ``scheduled``).

    Returns the number of nodes updated.
    """
    c = 0
    for x in range(nr):
        v = nra[x]
        sched[v] = False
        if ca[v] > ua[v]:
            ca[v] = ua[v]
            ma[v] = True
            c += 1
    return c


@njit(cache=True)
def paper_adaptive_one(first_out, head, weight, source, dist, up_count, down_count):
    """Seed 001 Alg. 4 (with Alg. 2-3 and 5-6) from ``source``; ``dist`` (int64 (n,)) is filled in place.

    Phase ``p`` runs in one of two modes, with the same frontier (the nodes whose ``Ma`` flag is set,
    i.e. the nodes updated in phase ``p - 1``; phase 1 relaxes the source):

    * selection mode (``sch = true``; Alg. 5 then Alg. 6): ``SELECT_RELAX`` over the read queue ``NRa``:
      each ``v`` with ``Ma[v]`` clears it and relaxes its out-arcs with ``Ca[v]`` into ``Ua``; a head whose
      ``Ua`` strictly decreased is appended to the write queue ``NWa`` unless its ``scheduled`` flag is
      already set. Then ``NRa := NWa``, ``NWa := empty`` and ``SELECT_UPDATE`` over ``NRa``: clear
      ``scheduled``, and where ``Ca > Ua`` set ``Ca := Ua`` and ``Ma := true``.
    * all-node mode (``sch = false``; Alg. 2 then Alg. 3): the conventional Harish & Narayanan phase over
      all n nodes (``RELAX_KERNEL`` then ``UPDATE_KERNEL``, which also resets ``Ua := Ca``).

    Both modes update exactly the same nodes, so the phases and per-phase counts do not depend on the
    switching. Switching (Alg. 4, lines 17 and 27): the GPU compares each phase's wall time with ``THR``;
    this CPU twin uses the number ``c`` of nodes updated in the phase instead (a count is deterministic
    and is what the time stands for): after a selection phase with ``c > up_count`` the next phase is
    all-node; after an all-node phase with ``c < down_count`` the next is a selection phase, and
    ``SWITCH_KERNEL`` first rebuilds ``NRa`` from ``Ma``. ``up_count > n`` gives the pure selection method
    (Alg. 5-6 only).

    Bound: a node updated in phase ``p`` got a value that is the length of a ``p``-arc walk shorter than
    every walk of fewer arcs; with positive weights such a walk is a simple path, so ``p <= n - 1`` and
    the loop stops after at most ``n`` phases (the last one updates nothing). More raises RuntimeError.

    Returns
    -------
    phases : int
    updated, frontier : int64 (phases,)
        Nodes updated (= ``|NWa|``) and nodes relaxed (= ``|NRa|``, the number of ``Ma`` flags) per phase.
    selection : bool (phases,)
        Whether the phase ran in selection mode.
    """
    n = first_out.shape[0] - 1
    ca = dist
    ca[:] = _INF
    ua = np.full(n, _INF, dtype=np.int64)
    ma = np.zeros(n, dtype=np.bool_)
    sched = np.zeros(n, dtype=np.bool_)
    nra = np.empty(n, dtype=np.int32)
    nwa = np.empty(n, dtype=np.int32)
    updated = np.zeros(n, dtype=np.int64)
    frontier = np.zeros(n, dtype=np.int64)
    selection = np.zeros(n, dtype=np.bool_)
    ca[source] = 0
    ua[source] = 0
    ma[source] = True
    nra[0] = source
    nr = 1
    sch = True
    count = 1  # number of Ma flags set = frontier of the next phase
    phases = 0
    while count > 0:
        if phases >= n:
            raise RuntimeError("selection/adaptive SSSP exceeded n phases (cannot happen with positive weights)")
        frontier[phases] = count
        selection[phases] = sch
        if sch:
            nw = _relax_masked(first_out, head, weight, ma, ca, ua, True, nra, nr, sched, nwa)  # Alg. 5
            # NRa := NWa, NWa := empty (Alg. 4, line 12)
            nra, nwa = nwa, nra
            nr = nw
            c = _select_update(ma, ca, ua, sched, nra, nr)  # Alg. 6
        else:
            _relax_masked(first_out, head, weight, ma, ca, ua, False, nra, n, sched, nwa)  # Alg. 2
            c = _update_all(ma, ca, ua)  # UPDATE_KERNEL (Alg. 3)
        updated[phases] = c
        phases += 1
        count = c
        if sch:
            if c > up_count:
                sch = False
        elif c < down_count:
            sch = True
            # SWITCH_KERNEL (Alg. 4, line 29): NRa := {v : Ma[v]}
            nr = 0
            for v in range(n):
                if ma[v]:
                    nra[nr] = v
                    nr += 1
    return phases, updated[:phases].copy(), frontier[:phases].copy(), selection[:phases].copy()

@njit(cache=True)
def _now_ns():
    with objmode(t="int64"):
        t = time.perf_counter_ns()
    return t


@njit(cache=True)
def adaptive_one(first_out, head, weight, source, dist, timed, thr, up_ns, down_ns):
    """Adaptive thread creation (Adaptive Thread Creation paper, Alg. 4) with the switch rules of the GPU's fused step
    (``fa_step`` in ``fused.cu``), Jacobi style; ``dist`` (int64 (n,)) is filled in place.

    Phase ``p`` processes the pending nodes (``Ua < Ca``): all nodes are scanned (kind ``KIND_SCAN``),
    scanned while the next phase's queue is built (``KIND_SCAN_BUILD``), or only the queue that phase
    ``p - 1`` built is walked (``KIND_QUEUE``); every kind processes the same nodes, so distances, phases
    and counts do not depend on the switching. Phase ``p + 1`` runs on the queue iff phase ``p`` built
    it; phase 0 runs on the queue (the source) and builds. Whether phase ``p`` builds:

    * count switch (``timed`` False): phase ``p - 1`` processed fewer than ``thr`` nodes;
    * time switch (``timed`` True): the paper's rule on the mean duration of phases ``p - 2`` and
      ``p - 1`` (this CPU's clock): in the queue regime stop building when it exceeds ``up_ns``, in the
      all-node regime start building when it drops below ``down_ns``; a regime is held 4 phases.

    Bound: at most ``n`` phases process a node (a simple-path argument, as Bellman-Ford); more raises
    RuntimeError.

    Returns
    -------
    phases : int
    processed : int64 (phases,)
        Nodes processed per phase.
    kinds : int8 (phases,)
        The kind each phase ran (0 all-node, 1 all-node building the queue, 2 queue).
    """
    n = first_out.shape[0] - 1
    ca = dist
    ca[:] = _INF
    ua = np.full(n, _INF, dtype=np.int64)
    ua[source] = 0
    stamp = np.full(n, -1, dtype=np.int64)
    q = np.empty(max(n, 1), dtype=np.int32)
    qn = np.empty(max(n, 1), dtype=np.int32)
    pend = np.empty(max(n, 1), dtype=np.int32)
    snap = np.empty(max(n, 1), dtype=np.int64)
    processed = np.zeros(n + 1, dtype=np.int64)
    kinds = np.zeros(n + 1, dtype=np.int8)
    starts = np.zeros(n + 2, dtype=np.int64)
    q[0] = source
    nq = 1
    on_queue = True
    bflag = True  # time switch: phase 0 builds (the paper starts with selection)
    since = 0
    prev = 1
    p = 0
    while prev > 0:
        if p > n:
            raise RuntimeError("adaptive SSSP exceeded n + 1 phases (cannot happen with positive weights)")
        starts[p] = _now_ns() if timed else 0
        build = bflag if timed else prev < thr
        kind = KIND_QUEUE if on_queue else (KIND_SCAN_BUILD if build else KIND_SCAN)
        kinds[p] = kind
        if timed:  # the lead of phase p decides phase p + 1's build flag
            nb = bflag
            since += 1
            if p >= 2 and since >= 4:
                mean = (starts[p] - starts[p - 2]) // 2
                if bflag and mean > up_ns:
                    nb = False
                elif (not bflag) and mean < down_ns:
                    nb = True
            if nb != bflag:
                since = 0
            bflag_next = nb
        else:
            bflag_next = bflag
        # the pending nodes of this phase, with their distances at the phase start
        npend = 0
        if kind == KIND_QUEUE:
            for i in range(nq):
                v = q[i]
                if ua[v] < ca[v]:
                    pend[npend] = v
                    snap[npend] = ua[v]
                    npend += 1
        else:
            for v in range(n):
                if ua[v] < ca[v]:
                    pend[npend] = v
                    snap[npend] = ua[v]
                    npend += 1
        nqn = 0
        builds = kind == KIND_SCAN_BUILD or (kind == KIND_QUEUE and build)
        for i in range(npend):
            v = pend[i]
            d = snap[i]
            ca[v] = d
            for a in range(first_out[v], first_out[v + 1]):
                h = head[a]
                nd = d + weight[a]
                if nd < ua[h]:
                    ua[h] = nd
                    if builds and stamp[h] != p:
                        stamp[h] = p
                        qn[nqn] = h
                        nqn += 1
        processed[p] = npend
        prev = npend
        on_queue = builds
        if builds:
            q, qn = qn, q
            nq = nqn
        bflag = bflag_next
        p += 1
    # p counts the phases that ran, the last one processing nothing
    return p, processed[:p].copy(), kinds[:p].copy()


@njit(cache=True)
def probe_phase_ns(first_out, head, weight, n_reps):
    """Median CPU time (ns) of an all-node scan and of a one-node queue phase on this graph (the
    calibration of the time switch, as the GPU's probe searches measure ``t_all`` / ``t_queue``)."""
    n = first_out.shape[0] - 1
    ca = np.full(n, _INF, dtype=np.int64)
    ua = np.full(n, _INF, dtype=np.int64)
    t_all = np.empty(n_reps, dtype=np.int64)
    t_q = np.empty(n_reps, dtype=np.int64)
    seen = 0  # returned, so the scans are not optimised away
    for r in range(n_reps):
        t0 = _now_ns()
        for v in range(n):
            if ua[v] < ca[v]:
                seen += 1
        t1 = _now_ns()
        if n and ua[0] < ca[0]:
            seen += 1
        t2 = _now_ns()
        t_all[r] = t1 - t0
        t_q[r] = t2 - t1
    return np.median(t_all), np.median(t_q), seen


# --------------------------------------------------------------------------------------------- registry
def conventional_cpu(graph, weight, sources, want_pred, variant, opts):
    """Seed 001 Alg. 1-3 (Harish & Narayanan) on the CPU: see :func:`conventional_one`. The GPU-only
    options (``mode``, ``nodes_per_thread``, ``chase``, ``pipelined``) change nothing here."""
    params = conventional_params(opts)
    w = graph.weight(weight)
    dist, runs = run_each(graph, w, sources, lambda s, row: {
        "phases": conventional_one(graph.first_out, graph.head, w, s, row)})
    return dist, cpu_predecessors(graph, w, dist, sources, want_pred), runs, params


def selection_cpu(graph, weight, sources, want_pred, variant, opts):
    """Seed 001 Alg. 4 with ``sch`` fixed to true: selection phases only (Alg. 5-6). Per phase only the
    nodes of the read queue ``NRa`` (those updated in the previous phase) relax their arcs; improved heads
    are appended once to ``NWa``. ``updated``/``frontier``: per phase, nodes updated and ``|NRa|``."""
    w = graph.weight(weight)
    big = float(graph.n_nodes + 1)

    def one(s, row):
        ph, upd, fr, _ = paper_adaptive_one(graph.first_out, graph.head, w, s, row, big, -1.0)
        return {"phases": ph, "updated": upd, "frontier": fr}

    dist, runs = run_each(graph, w, sources, one)
    return dist, cpu_predecessors(graph, w, dist, sources, want_pred), runs, {}


def adaptive_cpu(graph, weight, sources, want_pred, variant, opts):
    """Adaptive thread creation (Adaptive Thread Creation paper, Alg. 4) on the CPU with the GPU's switch rules and options
    (:func:`adaptive_one`): ``variant`` "count" (``frac``), "time" / "time-host" (``up_us``,
    ``down_us``, phases timed with this CPU's clock; both variants are one loop here). Thresholds left
    None are calibrated on this CPU as the GPU calibrates on its device: a queue phase is cheaper than
    a scan of all nodes, so ``frac`` = ``config.SSSP_ADAPTIVE_FRONTIER_FRACTION`` and ``up`` =
    ``config.SSSP_ADAPTIVE_TIME_UP_FACTOR`` x the all-node time, ``down`` = 330/350 x ``up``.

    ``updated``: nodes processed per phase; ``extra["modes"]``: the kind each phase ran (0 all-node,
    1 all-node building the queue, 2 queue); ``extra["queue_phases"]``.
    """
    w = graph.weight(weight)
    fo, hd = graph.first_out, graph.head
    t_all, t_q, _ = probe_phase_ns(fo, hd, w, 5)
    params = adaptive_params(opts, variant, graph.n_nodes, t_all_us=float(t_all) / 1e3, t_queue_us=float(t_q) / 1e3)
    timed = params["switch"] != "count"
    thr = int(np.ceil(params["frac"] * graph.n_nodes)) if not timed else 0
    up = int(round((params["up_us"] or 0.0) * 1e3))
    down = int(round((params["down_us"] or 0.0) * 1e3))

    def one(s, row):
        ph, proc, kinds = adaptive_one(fo, hd, w, s, row, timed, thr, up, down)
        return {"phases": ph, "updated": proc, "modes": kinds, "queue_phases": int(np.count_nonzero(kinds == KIND_QUEUE))}

    dist, runs = run_each(graph, w, sources, one)
    return dist, cpu_predecessors(graph, w, dist, sources, want_pred), runs, params
