"""Oracles and helpers shared by the overlay tests (tests/crp): the turn-aware Dijkstra oracle on an
overlay's current costs, path re-pricing, random turn restrictions."""
from __future__ import annotations

import numpy as np
from naive import turn_aware_distances

from gpuroute import INF, RoadGraph, TurnRestrictions
from gpuroute.crp import FORBIDDEN, RESTRICTED

PEN = {"straight": 0, "left": 7, "right": 3, "uturn": 40}


def oracle(ov, s):
    """Distances from ``s`` by the naive turn-aware Dijkstra on the overlay's current costs, with the
    restricted turns taken from the graph's restrictions (independently of the turn table)."""
    g = ov.graph
    forbidden = set()
    if g.turns is not None:
        fi, fo = g.turns.forbidden_pairs(g.first_out, g.head)
        forbidden = set(zip(fi.tolist(), fo.tolist(), strict=True))
    tr = ov.turns
    tc = ov.turn_cost

    def cost(a, b):
        if (a, b) in forbidden:
            return None
        t = int(tr.turn_index([a], [b])[0])
        assert t >= 0
        c = int(tc[t])
        return None if c == FORBIDDEN else c

    d = turn_aware_distances(g, s, ov.arc_cost, cost)
    return np.array([INF if x is None else x for x in d], dtype=np.int64)


def assert_path_ok(ov, s, t, res):
    g = ov.graph
    if res.distance == INF:
        assert res.nodes.size == 0
        return
    assert res.nodes[0] == s and res.nodes[-1] == t
    a = res.arcs.astype(np.int64)
    if s == t:
        assert res.distance == 0 and a.size == 0
        return
    assert (g.tail[a] == res.nodes[:-1]).all() and (g.head[a] == res.nodes[1:]).all()
    total = int(ov.arc_cost[a[0]])
    if a.size > 1:
        tid = ov.turns.turn_index(a[:-1], a[1:])
        assert (tid >= 0).all()
        assert (ov.turns.kind[tid] != RESTRICTED).all()
        assert (ov.turn_cost[tid] != FORBIDDEN).all()
        total += int(ov.turn_cost[tid].sum())
    assert total == res.distance


def with_restrictions(g, rng, k):
    """``g`` with ``k`` random NO restrictions and at most one ONLY per in-arc (arc ids are positions)."""
    a = np.arange(g.n_arcs)
    ins, outs, kinds = [], [], []
    used = set()
    for x in rng.permutation(a)[: 3 * k]:
        v = g.head[x]
        cand = np.arange(g.first_out[v], g.first_out[v + 1])
        if cand.size == 0 or x in used:
            continue
        used.add(int(x))
        ins.append(int(x))
        outs.append(int(rng.choice(cand)))
        kinds.append(1 if len(kinds) % 4 == 3 else 0)
        if len(ins) == k:
            break
    turns = TurnRestrictions(ins, outs, kinds)
    return RoadGraph(g.first_out, g.head, g.weights, units=g.units, coords=g.coords, name=g.name + "-restricted",
                     coord_system=g.coord_system, turns=turns)


def assert_all_pairs_exact(ov, sources=None):
    n = ov.graph.n_nodes
    sources = range(n) if sources is None else sources
    for s in sources:
        exp = oracle(ov, s)
        got = ov.distances(np.full(n, s), np.arange(n))
        np.testing.assert_array_equal(got, exp, err_msg=f"source {s}")
        for t in range(0, n, max(1, n // 7)):
            res = ov.route(s, t)
            assert res.distance == exp[t]
            assert_path_ok(ov, s, t, res)
