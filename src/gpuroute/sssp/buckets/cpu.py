"""Bucket family on the CPU (numba twins): Δ-stepping (Meyer & Sanders, "Δ-stepping: a parallelizable
shortest path algorithm", J. Algorithms 2003) and near-far (Davidson, Baxter, Garland, Owens,
"Work-Efficient Parallel GPU Methods for Single-Source Shortest Paths", IPDPS 2014, sec. 4), the latter
the twin of the GPU kernels in ``near_far.cu``.

Each kernel runs *the same phases with the same per-phase frontier* as the method it mirrors, so the
statistics are those of the method. A *phase* is one parallel relaxation round; ``updated[p]`` counts the
distinct nodes whose tentative distance strictly decreased in phase ``p`` and ``frontier[p]`` the nodes
relaxed. Relaxation inside a phase is Jacobi style (a frontier node relaxes with the distance it had at
the phase start). Both twins use one bucket width, :func:`gpuroute.sssp.common.mean_weight_delta`
(``config.SSSP_DELTA_FACTOR`` x the mean arc weight). Every loop has a proven bound (in each kernel's
docstring); exceeding it raises ``RuntimeError``.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ...graph.constants import INF
from ..common import cpu_predecessors, resolve_delta, run_each

_INF = INF


@njit(cache=True)
def _grow(a, size):
    """Return ``a`` or a copy twice as large holding its first ``size`` entries (when ``a`` is full)."""
    if size < a.shape[0]:
        return a
    b = np.empty(max(2 * a.shape[0], 16), dtype=a.dtype)
    b[:size] = a[:size]
    return b


@njit(cache=True)
def _relax_phase(first_out, head, weight, w_range, nodes, snap, nf, dist, stamp, phase, thr, near_stamp,
                 near, nn, in_pile, pile, npile):
    """One Jacobi-style relaxation phase, shared by Δ-stepping and near-far.

    Every ``nodes[x]`` (``x < nf``) relaxes its arcs of weight ``w_lo <= w <= w_hi`` for
    ``w_range = (w_lo, w_hi)``, or all its arcs for ``w_range`` None, with the distance ``snap[x]`` it had
    at the phase start. An improved head ``v`` is counted once (``stamp[v] = phase``);
    if its new δ is below ``thr`` it is appended to ``near[nn:]`` (once per phase, via ``near_stamp``),
    otherwise to ``pile[npile:]`` (once, via the persistent flag ``in_pile``). A negative ``thr`` sends
    every head to the pile (``near`` and ``near_stamp`` are then unused).

    Returns ``(ni, nn, npile)``: the number of improved nodes and the new lengths of both lists.
    """
    ni = 0
    for x in range(nf):
        u = nodes[x]
        du = snap[x]
        for a in range(first_out[u], first_out[u + 1]):
            w = weight[a]
            if w_range is not None and (w < w_range[0] or w > w_range[1]):
                continue
            v = head[a]
            nd = du + w
            if nd < dist[v]:
                dist[v] = nd
                if stamp[v] != phase:
                    stamp[v] = phase
                    ni += 1
                if nd < thr:
                    if near_stamp[v] != phase:
                        near_stamp[v] = phase
                        near[nn] = v
                        nn += 1
                elif not in_pile[v]:
                    in_pile[v] = True
                    pile[npile] = v
                    npile += 1
    return ni, nn, npile


@njit(cache=True)
def _delta_phase(first_out, head, weight, delta, light, nodes, snap, nf, dist, stamp, in_p, plist, npend,
                 updated, frontier, heavy, phase):
    """One Δ-stepping phase: ``nodes[:nf]`` relax their light (``w <= Δ``) or heavy (``w > Δ``) arcs.

    ``nodes[x]`` relaxes with the distance ``snap[x]`` it had at the phase start (Jacobi style). Every
    improved head joins the pending list ``plist`` (once, via ``in_p``). Records the phase's frontier
    size, kind and number of improved nodes at index ``phase`` of ``frontier``, ``heavy`` and
    ``updated`` (grown as needed). Returns ``(npend, updated, frontier, heavy)``.
    """
    updated = _grow(updated, phase)
    frontier = _grow(frontier, phase)
    heavy = _grow(heavy, phase)
    frontier[phase] = nf
    heavy[phase] = not light
    w_lo, w_hi = (np.int64(0), np.int64(delta)) if light else (np.int64(delta) + 1, _INF)
    no_list = np.empty(0, dtype=np.int32)
    ni, _, npend = _relax_phase(first_out, head, weight, (w_lo, w_hi), nodes, snap, nf, dist, stamp, phase,
                                np.int64(-1), stamp, no_list, 0, in_p, plist, npend)
    updated[phase] = ni
    return npend, updated, frontier, heavy


@njit(cache=True)
def delta_stepping_one(first_out, head, weight, source, dist, delta):
    """Δ-stepping (Meyer & Sanders 2003) from ``source``; ``dist`` (int64 (n,)) is filled in place.

    Bucket ``B[j]`` holds the pending nodes with ``floor(δ/Δ) = j``; light arcs have ``w <= Δ``, heavy
    arcs ``w > Δ``. Epoch for the smallest non-empty bucket ``i``, with ``R = {}``:

    * light phases, repeated while ``B[i]`` is non-empty: frontier ``F = B[i]``; ``B[i] := {}``,
      ``R := R ∪ F``; every ``v`` in F relaxes its light arcs with its distance at the phase start;
      every improved head (re-)enters the bucket of its new distance (it may be ``B[i]`` again).
    * one heavy phase (only if the graph has a heavy arc at all): frontier ``R`` (now final) relaxes its
      heavy arcs; improved heads enter their buckets (all > i).

    The buckets are realised as one list of pending nodes (a node appears once; its bucket is computed
    from its current δ), so a stale bucket entry can never occur. The run ends when no node is pending.

    Bound: within an epoch, a light-phase frontier node (after the first phase) was improved in the
    previous phase; a chain of strict improvements with positive weights visits distinct nodes, so an
    epoch has at most n light phases. Each processed bucket contains the final distance of a node
    (its smallest pending δ is final), so there are at most n epochs: at most n (n + 1) phases in all.
    Exceeding either count raises RuntimeError.

    Returns
    -------
    phases : int
    updated, frontier : int64 (phases,)
    heavy : bool (phases,)
        True for the heavy phase of an epoch.
    """
    n = first_out.shape[0] - 1
    m = head.shape[0]
    has_heavy = False
    for a in range(m):
        if weight[a] > delta:
            has_heavy = True
            break
    dist[:] = _INF
    in_p = np.zeros(n, dtype=np.bool_)
    plist = np.empty(n, dtype=np.int32)
    in_r = np.zeros(n, dtype=np.bool_)
    rlist = np.empty(n, dtype=np.int32)
    f = np.empty(n, dtype=np.int32)
    snap = np.empty(n, dtype=np.int64)
    stamp = np.full(n, -1, dtype=np.int64)
    updated = np.zeros(64, dtype=np.int64)
    frontier = np.zeros(64, dtype=np.int64)
    heavy = np.zeros(64, dtype=np.bool_)
    dist[source] = 0
    in_p[source] = True
    plist[0] = source
    npend = 1
    phases = 0
    epochs = 0
    while npend > 0:
        epochs += 1
        if epochs > n:
            raise RuntimeError("delta-stepping exceeded n buckets (each holds a distinct final distance)")
        i = dist[plist[0]] // delta
        for x in range(1, npend):
            b = dist[plist[x]] // delta
            if b < i:
                i = b
        nr = 0
        light = 0
        while True:
            # F = B[i]; B[i] := {}; R := R ∪ F
            nf = 0
            k = 0
            for x in range(npend):
                v = plist[x]
                if dist[v] // delta == i:
                    f[nf] = v
                    snap[nf] = dist[v]
                    nf += 1
                    in_p[v] = False
                    if not in_r[v]:
                        in_r[v] = True
                        rlist[nr] = v
                        nr += 1
                else:
                    plist[k] = v
                    k += 1
            npend = k
            if nf == 0:
                break
            light += 1
            if light > n:
                raise RuntimeError("delta-stepping exceeded n light phases in one bucket")
            npend, updated, frontier, heavy = _delta_phase(first_out, head, weight, delta, True, f, snap, nf, dist,
                                                           stamp, in_p, plist, npend, updated, frontier, heavy,
                                                           phases)
            phases += 1
        if has_heavy:
            # R is final (no arc can improve it), so its snapshot is its current δ
            for x in range(nr):
                snap[x] = dist[rlist[x]]
            npend, updated, frontier, heavy = _delta_phase(first_out, head, weight, delta, False, rlist, snap, nr,
                                                           dist, stamp, in_p, plist, npend, updated, frontier,
                                                           heavy, phases)
            phases += 1
        for x in range(nr):
            in_r[rlist[x]] = False
    return phases, updated[:phases].copy(), frontier[:phases].copy(), heavy[:phases].copy()


@njit(cache=True)
def near_far_one(first_out, head, weight, source, dist, delta):
    """Near-far (Davidson et al. 2014) from ``source``; ``dist`` (int64 (n,)) is filled in place.

    Threshold ``T`` starts at Δ; the near pile starts as ``{s}``, the far pile empty. A phase relaxes
    *all* out-arcs of the near pile (each node with its distance at the phase start); an improved head
    with new δ < T goes to the next near pile (once), one with δ >= T to the far pile (once; a set).
    When the near pile is empty, the far pile is split: entries with δ < T were already processed in the
    near pile and are dropped; ``T`` advances by Δ — repeatedly, while no far node lies below it, done in
    one step as ``T = (floor(min δ / Δ) + 1) Δ`` — and the far nodes with δ < T form the new near pile.
    The split is not a phase (it relaxes nothing). The run ends when both piles are empty.

    Bound: as for Δ-stepping, one threshold band has at most n phases (a chain of strict improvements
    visits distinct nodes), and each band contains the final distance of the far pile's minimum, so there
    are at most n bands. Exceeding either count raises RuntimeError.

    Returns
    -------
    phases : int
    updated, frontier : int64 (phases,)
        Nodes improved, and near-pile size, per phase.
    """
    n = first_out.shape[0] - 1
    dist[:] = _INF
    near = np.empty(n, dtype=np.int32)
    nxt = np.empty(n, dtype=np.int32)
    snap = np.empty(n, dtype=np.int64)
    far = np.empty(n, dtype=np.int32)
    in_far = np.zeros(n, dtype=np.bool_)
    stamp = np.full(n, -1, dtype=np.int64)
    near_stamp = np.full(n, -1, dtype=np.int64)
    updated = np.zeros(64, dtype=np.int64)
    frontier = np.zeros(64, dtype=np.int64)
    dist[source] = 0
    near[0] = source
    nn = 1
    nfar = 0
    thr = np.int64(delta)
    phases = 0
    bands = 1
    while True:
        rounds = 0
        while nn > 0:
            rounds += 1
            if rounds > n:
                raise RuntimeError("near-far exceeded n phases in one threshold band")
            updated = _grow(updated, phases)
            frontier = _grow(frontier, phases)
            frontier[phases] = nn
            for x in range(nn):
                snap[x] = dist[near[x]]
            ni, nx, nfar = _relax_phase(first_out, head, weight, None, near, snap, nn, dist, stamp,
                                        phases, thr, near_stamp, nxt, 0, in_far, far, nfar)
            updated[phases] = ni
            phases += 1
            near, nxt = nxt, near
            nn = nx
        # ---- split the far pile
        k = 0
        mn = _INF
        for x in range(nfar):
            v = far[x]
            if dist[v] < thr:
                in_far[v] = False
            else:
                far[k] = v
                k += 1
                if dist[v] < mn:
                    mn = dist[v]
        nfar = k
        if nfar == 0:
            break
        bands += 1
        if bands > n:
            raise RuntimeError("near-far exceeded n threshold bands (each holds a distinct final distance)")
        thr = thr + delta
        if mn >= thr:
            thr = (mn // delta + 1) * delta
        k = 0
        for x in range(nfar):
            v = far[x]
            if dist[v] < thr:
                in_far[v] = False
                near[nn] = v
                nn += 1
            else:
                far[k] = v
                k += 1
        nfar = k
    return phases, updated[:phases].copy(), frontier[:phases].copy()


def delta_stepping_cpu(graph, weight, sources, want_pred, variant, opts):
    """Δ-stepping, phase-structured (:func:`delta_stepping_one`): light phases per bucket, then one heavy
    phase. ``params["delta"]``: the bucket width used; ``extra["heavy"]``: per phase, whether it was the
    heavy phase of its bucket."""
    d = resolve_delta(graph, weight, opts["delta"], opts["delta_factor"])
    if d == float("inf"):
        raise ValueError("delta-stepping needs a finite delta")
    w = graph.weight(weight)

    def one(s, row):
        ph, upd, fr, heavy = delta_stepping_one(graph.first_out, graph.head, w, s, row, d)
        return {"phases": ph, "updated": upd, "frontier": fr, "heavy": heavy}

    dist, runs = run_each(graph, w, sources, one)
    return dist, cpu_predecessors(graph, w, dist, sources, want_pred), runs, {"delta": d}


def near_far_cpu(graph, weight, sources, want_pred, variant, opts):
    """Near-far, phase-structured (:func:`near_far_one`); ``frontier`` is the near-pile size. The GPU-only
    options (``batch``, ``frac``, ``loop``) change nothing here; ``delta=inf`` runs a plain work queue
    (one band)."""
    d = resolve_delta(graph, weight, opts["delta"], opts["delta_factor"])
    w = graph.weight(weight)
    step = np.iinfo(np.int64).max // 4 if d == float("inf") else d

    def one(s, row):
        ph, upd, fr = near_far_one(graph.first_out, graph.head, w, s, row, step)
        return {"phases": ph, "updated": upd, "frontier": fr}

    dist, runs = run_each(graph, w, sources, one)
    params = {"delta": None if d == float("inf") else d, "batch": 1, "loop": "phases", "frac": opts["frac"]}
    return dist, cpu_predecessors(graph, w, dist, sources, want_pred), runs, params
