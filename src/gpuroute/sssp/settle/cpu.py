"""Settling family on the CPU (numba twins of ``gpu.py``): Martín et al. and Crauser et al. as
Ortega-Arranz, Torres, Llanos, Gonzalez-Escribano, "A New GPU-based Approach to the Shortest Path Problem"
, sec. IV, describe them: each phase relaxes from the frontier, takes a minimum over the
unsettled nodes by the rule, and settles every node within the bound.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ...graph.constants import INF
from ...graph.heap import heap_pop, heap_push
from ..common import cpu_predecessors, run_each
from .options import RULE_ECONOMIC, RULE_GENERAL, RULE_MARTIN, RULES, is_pull

_INF = INF


@njit(cache=True)
def node_min_out_weight(first_out, weight):
    """Δ_node(v) = min weight of v's out-arcs, ``INF`` for a node without out-arcs (Ortega-Arranz et al., §IV-A).

    Returns int64 (n,).
    """
    n = first_out.shape[0] - 1
    out = np.full(n, _INF, dtype=np.int64)
    for v in range(n):
        for a in range(first_out[v], first_out[v + 1]):
            if weight[a] < out[v]:
                out[v] = weight[a]
    return out


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
       (eq. 1, ``node_min[u]`` = min out-arc weight of u, INF without out-arcs). The rule numbers are the
       GPU kernel's (``settle.cu``).
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
            asz = heap_push(ad, an, asz, dist[v], v)
            if rule == RULE_GENERAL and node_min[v] != _INF:
                if bsz >= cap:
                    raise RuntimeError("heap overflow in Martín/Crauser SSSP (more than m improvements)")
                bsz = heap_push(bd, bn, bsz, dist[v] + node_min[v], v)
        # ---- minimum kernel: Δ_i
        while asz > 0 and (settled[an[0]] or ad[0] != dist[an[0]]):
            _, _, asz = heap_pop(ad, an, asz)
        if asz == 0:
            break  # min δ over U is ∞ (for every rule, heap B is then empty too)
        if rule == RULE_MARTIN:
            delta = ad[0]
        elif rule == RULE_ECONOMIC:
            delta = _INF if base_min == _INF else ad[0] + base_min
        else:
            while bsz > 0 and (settled[bn[0]] or bd[0] != dist[bn[0]] + node_min[bn[0]]):
                _, _, bsz = heap_pop(bd, bn, bsz)
            delta = bd[0] if bsz > 0 else _INF
        if delta == _INF:
            break
        # ---- update kernel (Alg. 3): F_{i+1} = {u in U : δ(u) <= Δ_i}
        nf = 0
        while asz > 0 and ad[0] <= delta:
            d, v, asz = heap_pop(ad, an, asz)
            if not settled[v] and d == dist[v]:
                settled[v] = True
                f[nf] = v
                nf += 1
    return phases, updated[:phases].copy(), frontier[:phases].copy()


def settle_cpu(name):
    """The registry's CPU entry of ``name`` (martin, crauser, crauser-economic)."""
    rule = RULES[name]

    def run(graph, weight, sources, want_pred, variant, opts):
        pull = is_pull(name, variant)
        w = graph.weight(weight)
        if pull:
            rfo, rt, ra = graph.rev_first_out, graph.rev_tail, graph.rev_arc
        else:
            rfo, rt, ra = np.zeros(1, np.int32), np.zeros(0, np.int32), np.zeros(0, np.int32)
        node_min = node_min_out_weight(graph.first_out, w) if rule == RULE_GENERAL else np.zeros(0, np.int64)
        base_min = int(w.min()) if w.size else int(INF)

        def one(s, row):
            ph, upd, fr = frontier_settle_one(graph.first_out, graph.head, w, rfo, rt, ra, s, row, rule, pull,
                                              node_min, base_min)
            return {"phases": ph, "updated": upd, "frontier": fr}

        dist, runs = run_each(graph, w, sources, one)
        return dist, cpu_predecessors(graph, w, dist, sources, want_pred), runs, {"rule": rule}

    run.__doc__ = f"Seed 002 sec. IV, {name}, on the CPU: see :func:`frontier_settle_one`."
    return run


__all__ = ["RULE_MARTIN", "RULE_GENERAL", "RULE_ECONOMIC", "frontier_settle_one", "node_min_out_weight",
           "settle_cpu"]
