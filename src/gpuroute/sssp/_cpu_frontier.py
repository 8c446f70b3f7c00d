"""numba CPU twins of the frontier-based GPU SSSP methods (seeds 001 and 002, delta-stepping, near-far).

Each kernel runs *the same phases with the same per-phase frontier* as the GPU method it mirrors, so the
statistics it returns (number of phases, frontier size and number of improved nodes per phase) are those of
the method itself, not of the CPU implementation. Only the bookkeeping differs: where a GPU kernel launches
one thread per node and tests a flag, the CPU twin walks a list or a heap that yields exactly the nodes whose
flag is set. Distances are exact (they equal Dijkstra's); predecessors are computed afterwards with the
canonical rule of :mod:`gpuroute.sssp._cpu` (``canonical_predecessors_many``), as for every algorithm.

Common conventions
------------------
* A *phase* is one parallel relaxation round: one launch of a relax kernel over one frontier (plus the
  kernels that decide the next frontier). ``stats["frontier"][i][p]`` is the number of nodes relaxed in
  phase ``p`` and ``stats["updated"][i][p]`` the number of distinct nodes whose tentative distance strictly
  decreased during phase ``p``.
* Relaxation inside a phase is *Jacobi style*: a frontier node relaxes its arcs with the distance it had at
  the start of the phase (the ``Ca`` array of seed 001; an explicit snapshot for delta-stepping and
  near-far, where a frontier node may be improved by another frontier node in the same phase). A GPU kernel
  reproduces these counts exactly by gathering the frontier's distances before relaxing with ``atomicMin``.
* Every loop has a proven bound (given in each kernel's docstring); exceeding it raises ``RuntimeError``.

Wrappers
--------
``selection_cpu, adaptive_cpu, martin_cpu, crauser_cpu, crauser_economic_cpu, delta_stepping_cpu,
near_far_cpu`` have the registry signature ``fn(graph, weight, sources, want_pred, variant, **opts) ->
(dist int64 (k, n), pred int32 (k, n) or None, stats)`` with ``stats = {"phases": int64 (k,),
"updated": [int64 (phases_i,)] * k, "frontier": [int64 (phases_i,)] * k, ...}``.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..graph.constants import DIST_DTYPE, INF
from ._cpu import _heap_pop, _heap_push, _relax_masked, _update_all, canonical_predecessors_many

_INF = INF

#: Martín et al. rule: Δ_i = min δ(u) over unsettled u (seed 002, §IV-D, eq. 3).
RULE_MARTIN = 0
#: Crauser et al. economic rule: Δ_i = min δ(u) + min arc weight (seed 002, §IV-C, eq. 2).
RULE_ECONOMIC = 1
#: Crauser et al. general rule: Δ_i = min (δ(u) + min out-arc weight of u) (seed 002, §IV-A/B, eq. 1).
RULE_GENERAL = 2

#: Default fractions of n for :func:`adaptive_cpu` (switch to all-node phases above ``up * n`` updated
#: nodes, back to selection phases below ``down * n``).
ADAPTIVE_UP = 0.10
ADAPTIVE_DOWN = 0.05


# --------------------------------------------------------------------------------------------- helpers
@njit(cache=True)
def _grow(a, size):
    """Return ``a`` or a copy twice as large holding its first ``size`` entries (when ``a`` is full)."""
    if size < a.shape[0]:
        return a
    b = np.empty(max(2 * a.shape[0], 16), dtype=a.dtype)
    b[:size] = a[:size]
    return b


@njit(cache=True)
def node_min_out_weight(first_out, weight):
    """Δ_node(v) = min weight of v's out-arcs, ``INF`` for a node without out-arcs (seed 002, §IV-A).

    Returns int64 (n,).
    """
    n = first_out.shape[0] - 1
    out = np.full(n, _INF, dtype=np.int64)
    for v in range(n):
        for a in range(first_out[v], first_out[v + 1]):
            if weight[a] < out[v]:
                out[v] = weight[a]
    return out


# ------------------------------------------------------------------ seed 001: selection / adaptive
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
def adaptive_one(first_out, head, weight, source, dist, up_count, down_count):
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


# ------------------------------------------------------------------ seed 002: Martín / Crauser
@njit(cache=True)
def frontier_settle_one(first_out, head, weight, rev_first_out, rev_tail, rev_arc, source, dist, rule,
                        pull, node_min, base_min):
    """Seed 002 Alg. 1-3: Martín et al. (§IV-D/E) and Crauser et al. (§IV-A-C) from ``source``.

    State: unsettled set ``U``, frontier ``F``, tentative distances δ (``dist``, filled in place).
    Initialisation: δ(s) = 0, ``F_1 = {s}``, s settled (removed from ``U``). Phase ``i`` is one iteration
    of Alg. 1's loop:

    1. relax (Alg. 2): δ(v) := min(δ(v), δ(f) + w(f, v)) for every arc (f, v) with f in ``F_i`` and v in
       ``U``. ``pull=False`` is the successor variant (each frontier node pushes along its out-arcs);
       ``pull=True`` the predecessor variant (each unsettled node scans its in-arcs for tails in ``F_i``;
       this twin visits only the unsettled nodes with at least one such in-arc, the others find nothing).
       Both give the same δ, hence identical phases and counts.
    2. minimum: Δ_i over ``U`` by ``rule``: ``RULE_MARTIN`` min δ(u) (eq. 3); ``RULE_ECONOMIC`` min δ(u) +
       ``base_min`` (eq. 2, ``base_min`` = min arc weight); ``RULE_GENERAL`` min δ(u) + ``node_min[u]``
       (eq. 1, ``node_min[u]`` = min out-arc weight of u, INF without out-arcs).
    3. update (Alg. 3): if Δ_i = ∞ the loop ends (phase i was the last). Otherwise ``F_{i+1} = {u in U :
       δ(u) <= Δ_i}`` (Martín's ``δ(u) = Δ_i`` is the same set), removed from ``U``.

    The CPU twin finds the minimum and ``F_{i+1}`` with lazy-deletion binary heaps keyed by δ and by
    δ + Δ_node instead of scanning all nodes; the sets are those of the all-node kernels.

    Bound: Δ_i is attained by some unsettled u with δ(u) <= Δ_i, so every phase but the last settles at
    least one node: at most n phases; more raises RuntimeError. Each improvement of a node comes from a
    distinct arc (the tail is relaxed once, when it is in the frontier), so each heap holds <= m entries.

    Returns
    -------
    phases : int
    updated, frontier : int64 (phases,)
        Nodes whose δ decreased in the relax step, and ``|F_i|``, per phase.
    """
    n = first_out.shape[0] - 1
    m = head.shape[0]
    dist[:] = _INF
    settled = np.zeros(n, dtype=np.bool_)
    in_f = np.zeros(n, dtype=np.bool_)
    stamp = np.full(n, -1, dtype=np.int64)
    cap = m + 1
    ad = np.empty(cap, dtype=np.int64)  # heap A: key δ(v)
    an = np.empty(cap, dtype=np.int32)
    bd = np.empty(cap, dtype=np.int64)  # heap B: key δ(v) + Δ_node(v)  (general rule only)
    bn = np.empty(cap, dtype=np.int32)
    asz = 0
    bsz = 0
    f = np.empty(n, dtype=np.int32)
    cand = np.empty(n, dtype=np.int32)
    improved = np.empty(n, dtype=np.int32)
    updated = np.zeros(n, dtype=np.int64)
    frontier = np.zeros(n, dtype=np.int64)
    dist[source] = 0
    settled[source] = True
    f[0] = source
    nf = 1
    phases = 0
    while True:
        if phases >= n:
            raise RuntimeError("Martín/Crauser SSSP exceeded n phases (each phase settles >= 1 node)")
        frontier[phases] = nf
        # ---- relax kernel (Alg. 2)
        ni = 0
        if not pull:
            for x in range(nf):
                u = f[x]
                du = dist[u]
                for a in range(first_out[u], first_out[u + 1]):
                    v = head[a]
                    if settled[v]:
                        continue
                    nd = du + weight[a]
                    if nd < dist[v]:
                        dist[v] = nd
                        if stamp[v] != phases:
                            stamp[v] = phases
                            improved[ni] = v
                            ni += 1
        else:
            for x in range(nf):
                in_f[f[x]] = True
            nc = 0
            for x in range(nf):
                u = f[x]
                for a in range(first_out[u], first_out[u + 1]):
                    v = head[a]
                    if not settled[v] and stamp[v] != phases:
                        stamp[v] = phases
                        cand[nc] = v
                        nc += 1
            for y in range(nc):
                v = cand[y]
                best = dist[v]
                for j in range(rev_first_out[v], rev_first_out[v + 1]):
                    u = rev_tail[j]
                    if in_f[u]:
                        nd = dist[u] + weight[rev_arc[j]]
                        if nd < best:
                            best = nd
                if best < dist[v]:
                    dist[v] = best
                    improved[ni] = v
                    ni += 1
            for x in range(nf):
                in_f[f[x]] = False
        updated[phases] = ni
        phases += 1
        for y in range(ni):
            v = improved[y]
            if asz >= cap:
                raise RuntimeError("heap overflow in Martín/Crauser SSSP (more than m improvements)")
            asz = _heap_push(ad, an, asz, dist[v], v)
            if rule == RULE_GENERAL and node_min[v] != _INF:
                if bsz >= cap:
                    raise RuntimeError("heap overflow in Martín/Crauser SSSP (more than m improvements)")
                bsz = _heap_push(bd, bn, bsz, dist[v] + node_min[v], v)
        # ---- minimum kernel: Δ_i
        while asz > 0 and (settled[an[0]] or ad[0] != dist[an[0]]):
            _, _, asz = _heap_pop(ad, an, asz)
        if asz == 0:
            break  # min δ over U is ∞ (for every rule, heap B is then empty too)
        if rule == RULE_MARTIN:
            delta = ad[0]
        elif rule == RULE_ECONOMIC:
            delta = _INF if base_min == _INF else ad[0] + base_min
        else:
            while bsz > 0 and (settled[bn[0]] or bd[0] != dist[bn[0]] + node_min[bn[0]]):
                _, _, bsz = _heap_pop(bd, bn, bsz)
            delta = bd[0] if bsz > 0 else _INF
        if delta == _INF:
            break
        # ---- update kernel (Alg. 3): F_{i+1} = {u in U : δ(u) <= Δ_i}
        nf = 0
        while asz > 0 and ad[0] <= delta:
            d, v, asz = _heap_pop(ad, an, asz)
            if not settled[v] and d == dist[v]:
                settled[v] = True
                f[nf] = v
                nf += 1
    return phases, updated[:phases].copy(), frontier[:phases].copy()


# ------------------------------------------------------------------ delta-stepping / near-far
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


# --------------------------------------------------------------------------------------------- wrappers
def _check_opts(name, opts, allowed=()):
    bad = sorted(set(opts) - set(allowed))
    if bad:
        raise TypeError(f"algorithm {name!r} got unexpected option(s) {bad}; it accepts {sorted(allowed)}")


def _no_variant(name, variant):
    if variant is not None:
        raise ValueError(f"algorithm {name!r} has no variants (variant must be None), got {variant!r}")


def _push_pull(name, variant):
    if variant is None:
        variant = "successor"
    if variant not in ("successor", "predecessor"):
        raise ValueError(f"algorithm {name!r} takes variant 'successor' or 'predecessor', got {variant!r}")
    return variant == "predecessor"


def _finish(graph, w, dist, sources, want_pred, stats):
    pred = None
    if want_pred:
        pred = canonical_predecessors_many(graph.rev_first_out, graph.rev_tail, graph.rev_arc, w, dist, sources)
    stats["phases"] = np.asarray(stats["phases"], dtype=np.int64)
    return dist, pred, stats


def _empty_stats(**extra):
    return dict({"phases": [], "updated": [], "frontier": []}, **extra)


def _sources(sources):
    return np.ascontiguousarray(np.atleast_1d(np.asarray(sources)).astype(np.int64))


def _run_each(graph, w, sources, want_pred, stats, extra, run_one):
    """Run ``run_one(source, dist_row)`` for every source and collect its statistics into ``stats``.

    ``run_one`` fills ``dist_row`` and returns ``(phases, updated, frontier, *more)``; ``more[j]`` is
    appended to ``stats[extra[j]]``. Returns ``(dist, pred, stats)`` as the registry wrappers do.
    """
    src = _sources(sources)
    dist = np.empty((src.size, graph.n_nodes), dtype=DIST_DTYPE)
    for i, s in enumerate(src):
        ph, upd, fr, *more = run_one(int(s), dist[i])
        stats["phases"].append(ph)
        stats["updated"].append(upd)
        stats["frontier"].append(fr)
        for key, value in zip(extra, more, strict=True):
            stats[key].append(value)
    return _finish(graph, w, dist, src, want_pred, stats)


def default_delta(graph, weight=None):
    """Default bucket width Δ for :func:`delta_stepping_cpu` and :func:`near_far_cpu`.

    ``Δ = max(1, round(32 · mean arc weight / mean out-degree))``: the warp-width heuristic used by GPU
    near-far implementations after Davidson et al. (2014). 1 for a graph without arcs.
    """
    w = graph.weight(weight)
    if w.size == 0 or graph.n_nodes == 0:
        return 1
    mean_deg = w.size / graph.n_nodes
    return max(1, int(round(32.0 * float(w.mean()) / mean_deg)))


def _run_adaptive(name, graph, weight, sources, want_pred, up_count, down_count):
    w = graph.weight(weight)
    return _run_each(graph, w, sources, want_pred, _empty_stats(selection=[]), ("selection",),
                     lambda s, row: adaptive_one(graph.first_out, graph.head, w, s, row, up_count, down_count))


def selection_cpu(graph, weight, sources, want_pred, variant, **opts):
    """Seed 001 Alg. 4 with ``sch`` fixed to true: selection phases only (Alg. 5-6), CPU twin.

    Per phase only the nodes of the read queue ``NRa`` (those updated in the previous phase) relax their
    arcs; improved heads are appended once to ``NWa`` (a ``scheduled`` flag prevents duplicates), then only
    those are updated. Same phases and per-phase counts as the conventional method (Alg. 1-3).

    Parameters
    ----------
    graph : RoadGraph
    weight : str or None
    sources : int64 (k,)
    want_pred : bool
    variant : None

    Returns
    -------
    dist : int64 (k, n)
    pred : int32 (k, n) or None
    stats : dict
        ``phases`` int64 (k,); ``updated``/``frontier``: per source, int64 per phase (nodes updated,
        ``|NRa|``); ``selection``: per source, bool per phase (all True).
    """
    _no_variant("selection", variant)
    _check_opts("selection", opts)
    return _run_adaptive("selection", graph, weight, sources, want_pred, float(graph.n_nodes + 1), -1.0)


def adaptive_cpu(graph, weight, sources, want_pred, variant, *, up=ADAPTIVE_UP, down=ADAPTIVE_DOWN, **opts):
    """Seed 001 Alg. 4: switch between selection phases (Alg. 5-6) and all-node phases (Alg. 2-3), CPU twin.

    The GPU switches on each phase's measured time against ``THR``; on the CPU the stand-in is the number
    of nodes updated in the phase: after a selection phase updating more than ``up * n`` nodes the next
    phase is all-node; after an all-node phase updating fewer than ``down * n`` nodes the next is a
    selection phase (``SWITCH_KERNEL`` rebuilds ``NRa`` from ``Ma``). Distances, phases and per-phase
    counts are identical to :func:`selection_cpu` whatever the thresholds.

    Parameters
    ----------
    graph, weight, sources, want_pred
        As :func:`selection_cpu`.
    variant : None
    up, down : float, 0 <= down <= up
        Switching thresholds as fractions of n (defaults ``ADAPTIVE_UP``, ``ADAPTIVE_DOWN``).

    Returns
    -------
    dist, pred, stats
        As :func:`selection_cpu`; ``stats["selection"]`` tells which phases ran in selection mode, and
        ``stats["up"]``, ``stats["down"]`` echo the thresholds.
    """
    _no_variant("adaptive", variant)
    _check_opts("adaptive", opts)
    up, down = float(up), float(down)
    if not (0.0 <= down <= up) or not np.isfinite(up):
        raise ValueError(f"adaptive thresholds need 0 <= down <= up < inf, got up={up}, down={down}")
    n = graph.n_nodes
    dist, pred, stats = _run_adaptive("adaptive", graph, weight, sources, want_pred, up * n, down * n)
    stats["up"], stats["down"] = up, down
    return dist, pred, stats


def _run_settle(name, graph, weight, sources, want_pred, variant, rule):
    pull = _push_pull(name, variant)
    w = graph.weight(weight)
    if pull:
        rfo, rt, ra = graph.rev_first_out, graph.rev_tail, graph.rev_arc
    else:
        rfo, rt, ra = np.zeros(1, np.int32), np.zeros(0, np.int32), np.zeros(0, np.int32)
    node_min = node_min_out_weight(graph.first_out, w) if rule == RULE_GENERAL else np.zeros(0, np.int64)
    base_min = int(w.min()) if w.size else int(INF)
    stats = _empty_stats(variant="predecessor" if pull else "successor")
    return _run_each(graph, w, sources, want_pred, stats, (),
                     lambda s, row: frontier_settle_one(graph.first_out, graph.head, w, rfo, rt, ra, s, row, rule,
                                                        pull, node_min, base_min))


def martin_cpu(graph, weight, sources, want_pred, variant, **opts):
    """Martín et al. (seed 002, §IV-D successor, §IV-E predecessor variant), CPU twin.

    Phase i: relax from the frontier ``F_i`` (push along out-arcs, or every unsettled node pulls from its
    in-arcs with tail in ``F_i``); Δ_i = min δ(u) over the unsettled set U; ``F_{i+1}`` = the unsettled
    nodes with δ = Δ_i. Stops when Δ_i = ∞. The number of phases equals the number of distinct finite
    distances.

    Parameters
    ----------
    graph, weight, sources, want_pred
        As :func:`selection_cpu`.
    variant : {None, "successor", "predecessor"}
        None means ``"successor"``.

    Returns
    -------
    dist, pred, stats
        ``stats``: ``phases``, ``updated`` (nodes whose δ decreased in the relax step), ``frontier``
        (``|F_i|``), ``variant``.

    Raises
    ------
    ValueError
        Unknown variant.
    """
    _check_opts("martin", opts)
    return _run_settle("martin", graph, weight, sources, want_pred, variant, RULE_MARTIN)


def crauser_cpu(graph, weight, sources, want_pred, variant, **opts):
    """Crauser et al., general variant (seed 002, §IV-A/B, eq. 1), CPU twin.

    As :func:`martin_cpu` but Δ_i = min over unsettled u of δ(u) + Δ_node(u), with Δ_node(u) the minimum
    out-arc weight of u (∞ without out-arcs), and ``F_{i+1}`` = every unsettled u with δ(u) <= Δ_i.

    Parameters, returns and raises: as :func:`martin_cpu`.
    """
    _check_opts("crauser", opts)
    return _run_settle("crauser", graph, weight, sources, want_pred, variant, RULE_GENERAL)


def crauser_economic_cpu(graph, weight, sources, want_pred, variant, **opts):
    """Crauser et al., economic variant (seed 002, §IV-C, eq. 2), CPU twin.

    As :func:`crauser_cpu` with Δ_i = min δ(u) + Δ_base, Δ_base the minimum weight of all arcs.

    Parameters, returns and raises: as :func:`martin_cpu`.
    """
    _check_opts("crauser-economic", opts)
    return _run_settle("crauser-economic", graph, weight, sources, want_pred, variant, RULE_ECONOMIC)


def _delta_opt(graph, weight, delta):
    if delta is None:
        return default_delta(graph, weight)
    if isinstance(delta, bool) or not float(delta).is_integer() or int(delta) < 1:
        raise ValueError(f"delta must be a positive integer (in the weight's unit), got {delta!r}")
    return int(delta)


def delta_stepping_cpu(graph, weight, sources, want_pred, variant, *, delta=None, **opts):
    """Δ-stepping (Meyer & Sanders 2003), phase-structured CPU twin.

    Each phase is one parallel relaxation round: a *light phase* relaxes the light arcs (w <= Δ) of the
    current bucket ``B[i]``; once ``B[i]`` stays empty, one *heavy phase* relaxes the heavy arcs of every
    node removed from ``B[i]`` (skipped when the graph has no heavy arc). See :func:`delta_stepping_one`.

    Parameters
    ----------
    graph, weight, sources, want_pred
        As :func:`selection_cpu`.
    variant : None
    delta : int, optional
        Bucket width in the weight's unit (default :func:`default_delta`).

    Returns
    -------
    dist, pred, stats
        ``stats``: ``phases``, ``updated``, ``frontier``, ``heavy`` (per source, bool per phase) and
        ``delta``.
    """
    _no_variant("delta-stepping", variant)
    _check_opts("delta-stepping", opts)
    d = _delta_opt(graph, weight, delta)
    w = graph.weight(weight)
    return _run_each(graph, w, sources, want_pred, _empty_stats(heavy=[], delta=d), ("heavy",),
                     lambda s, row: delta_stepping_one(graph.first_out, graph.head, w, s, row, d))


def near_far_cpu(graph, weight, sources, want_pred, variant, *, delta=None, **opts):
    """Near-far (Davidson et al. 2014), phase-structured CPU twin.

    Each phase relaxes all out-arcs of the near pile (nodes with δ below the threshold T); improved heads
    go to the next near pile (δ < T) or the far pile; when the near pile is empty, T advances by Δ and the
    far pile is split. See :func:`near_far_one`.

    Parameters and returns as :func:`delta_stepping_cpu`, except that ``delta`` is the threshold step
    and ``stats`` has no ``heavy`` (``frontier`` is the near-pile size).
    """
    _no_variant("near-far", variant)
    _check_opts("near-far", opts)
    d = _delta_opt(graph, weight, delta)
    w = graph.weight(weight)
    return _run_each(graph, w, sources, want_pred, _empty_stats(delta=d), (),
                     lambda s, row: near_far_one(graph.first_out, graph.head, w, s, row, d))
