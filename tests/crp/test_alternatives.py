"""Via-node alternatives on the overlay (:mod:`gpuroute.crp.alternatives`) against scipy's Dijkstra on the
turn-expanded graph, on random graphs with turn costs and restrictions, before and after a traffic update:
every alternative is a real path (allowed turns, its cost the sum of its turn costs), both halves through
its via arc are shortest paths, its stretch and its sharing with the shortest route and the alternatives
before it are within the bounds, the T-test's subpath around the via is a shortest path and spans T on
each side (or reaches the path's end), no two are the same, and they come in cost order."""
from __future__ import annotations

import numpy as np
import pytest
from crp_oracle import PEN, with_restrictions
from naive import random_road_graph
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import dijkstra
from turn_oracle import turn_graph, turns_allowed

from gpuroute import INF, Overlay, Partition, config
from gpuroute.crp import phantom_search as ps
from gpuroute.crp.alternatives import alternatives, settings, t_window


def _overlay(seed, n=160):
    rng = np.random.default_rng(seed)
    g, _ = random_road_graph(rng, n, one_way=0.2)
    g = with_restrictions(g, rng, 12)
    ov = Overlay.build(g, Partition.build(g, cell_sizes=(8, 32, 96), seed=seed))
    ov.customize((rng.integers(5, 60, g.n_arcs), PEN))
    return rng, g, ov


def _distances(ov, starts, costs, scale, reverse=False):
    """Labels (``1 / scale`` units, float64 (m,), inf unreached) of every arc's end from the start arcs at
    their costs (forward), or from every arc's end to the start arcs (``reverse``: costs are offsets added
    at the end, may be negative)."""
    rows, cols, w, _ = turn_graph(ov)
    m = ov.graph.n_arcs
    shift = 1.0 - min(0.0, float(np.min(costs)))  # keeps every super edge positive
    if reverse:
        rows, cols = cols, rows
    g = csr_matrix((np.concatenate([w * scale, np.asarray(costs, dtype=np.float64) + shift]),
                    (np.concatenate([rows, np.full(len(starts), m)]), np.concatenate([cols, starts]))),
                   shape=(m + 1, m + 1))
    return dijkstra(g, indices=m)[:m] - shift


def _check(ov, st, res, sa, sc, da, dc, main, scale, stretch, sharing, alpha):
    turns_ok = 0
    df = _distances(ov, sa, sc, scale)
    db = _distances(ov, da, dc, scale, reverse=True)
    best = np.min([df[b] + c for b, c in zip(da.tolist(), dc.tolist(), strict=True)])
    assert res.best == best
    union = set(main.tolist())
    seen = [tuple(main.tolist())]
    arc_cost = np.asarray(ov.arc_cost, dtype=np.int64)
    last = -1
    for alt in res.routes:
        arcs = alt.arcs
        assert arcs[0] == sa[alt.seed] and arcs[-1] == da[alt.target]
        assert turns_allowed(ov, arcs.tolist())
        tid = ov.turns.turn_index(arcs[:-1], arcs[1:])
        cum = sc[alt.seed] + scale * np.concatenate([[0], np.cumsum(np.asarray(ov.turn_cost)[tid])])
        assert alt.cost == cum[-1] + dc[alt.target]  # the cost is the path's (Dijkstra re-cost)
        assert alt.cost >= last
        last = alt.cost
        assert alt.cost <= best * (1 + stretch)  # bounded stretch
        iv = alt.via
        assert cum[iv] == df[arcs[iv]]  # source -> via is a shortest path
        assert alt.cost - cum[iv] == db[arcs[iv]]  # via -> target is one
        pieces = arc_cost[arcs] * scale
        pieces[0] = sc[alt.seed]
        pieces[-1] += dc[alt.target]
        shared = sum(int(p) for a, p in zip(arcs.tolist(), pieces.tolist(), strict=True) if a in union)
        assert alt.shared == shared and shared <= sharing * best  # limited sharing
        x, y = alt.test
        T = alpha * best
        assert x <= iv <= y and x < y
        assert x == 0 or cum[iv] - cum[x] >= T
        assert y == arcs.size - 1 or cum[y] - cum[iv] >= T
        d = _distances(ov, np.array([arcs[x]]), np.array([0.0]), scale)  # the T-test's subpath is a shortest path
        assert d[arcs[y]] == cum[y] - cum[x]
        turns_ok += 1
        assert tuple(arcs.tolist()) not in seen
        seen.append(tuple(arcs.tolist()))
        union |= set(arcs.tolist())
    return turns_ok


def _case(rng, g, ov, scale):
    m = g.n_arcs
    sa = np.unique(rng.integers(0, m, int(rng.integers(1, 3)))).astype(np.int64)
    da = np.setdiff1d(np.unique(rng.integers(0, m, int(rng.integers(1, 3)))), sa).astype(np.int64)
    sc = (rng.random(sa.size) * arc_cost_of(ov, sa) * scale).astype(np.int64)
    dc = -(rng.random(da.size) * arc_cost_of(ov, da) * scale).astype(np.int64)
    return sa, sc, da, dc


def arc_cost_of(ov, arcs):
    return np.asarray(ov.arc_cost, dtype=np.float64)[arcs]


@pytest.mark.parametrize("seed", range(4))
def test_alternatives_admissible(seed):
    rng, g, ov = _overlay(seed)
    q = ov.query()
    stretch, sharing, alpha = (float(config.SERVE_ALTERNATIVES_STRETCH), float(config.SERVE_ALTERNATIVES_SHARING),
                               float(config.SERVE_ALTERNATIVES_ALPHA))
    found = 0
    for update in (False, True):
        if update:  # traffic: the alternatives follow the new state
            arcs = rng.integers(0, g.n_arcs, 40)
            ov.update(arcs, rng.integers(1, 200, arcs.size))
        st = ov._state
        for trial in range(8):
            scale = (1, ps.SCALE)[trial % 2]
            sa, sc, da, dc = _case(rng, g, ov, scale)
            if da.size == 0:
                continue
            res = ps.search(q, st, sa, sc, da, dc, every_target=False, scale=scale)
            j = int(np.argmin(res.cost))
            if res.cost[j] >= INF:
                continue
            main = res.unpack(q, st, j)
            alt = alternatives(q, st, sa, sc, da, dc, k=3, main_arcs=main, scale=scale)
            assert alt.best == res.cost[j]
            found += _check(ov, st, alt, sa, sc, da, dc, main, scale, stretch, sharing, alpha)
            assert (q._R[0::8] == INF).all() and (q._R[1::8] == INF).all() and (q._R[2::8] == -1).all()
    assert found > 0  # the graphs have alternatives: the checks above ran


def test_bounds_given_are_kept_and_k_caps():
    """The bounds given are the bounds kept (each alternative within its call's stretch and sharing), ``k``
    caps the count, and the first alternative of ``k=5`` is that of ``k=1`` (chosen in cost order)."""
    rng, g, ov = _overlay(7)
    q = ov.query()
    st = ov._state
    n_loose = 0
    for _ in range(10):
        sa, sc, da, dc = _case(rng, g, ov, 1)
        if da.size == 0:
            continue
        strict = alternatives(q, st, sa, sc, da, dc, k=5, stretch=0.1, sharing=0.5, alpha=0.4, scale=1)
        loose = alternatives(q, st, sa, sc, da, dc, k=5, stretch=0.5, sharing=0.9, alpha=0.1, candidates=64, scale=1)
        one = alternatives(q, st, sa, sc, da, dc, k=1, stretch=0.5, sharing=0.9, alpha=0.1, candidates=64, scale=1)
        assert len(one.routes) == min(1, len(loose.routes))
        if one.routes:
            assert one.routes[0].arcs.tolist() == loose.routes[0].arcs.tolist()
        assert alternatives(q, st, sa, sc, da, dc, k=0, scale=1).routes == []
        n_loose += len(loose.routes)
        for r in strict.routes:
            assert r.cost <= strict.best * 1.1 and r.shared <= 0.5 * strict.best
        for r in loose.routes:
            assert r.cost <= loose.best * 1.5 and r.shared <= 0.9 * loose.best
        assert len(loose.routes) <= 5 and len(strict.routes) <= 5
    assert n_loose > 0


def test_bad_input():
    _, g, ov = _overlay(1, n=40)
    q = ov.query()
    st = ov._state
    with pytest.raises(ValueError, match="both a seed and a target"):
        alternatives(q, st, [1, 2], [0, 0], [2], [0])
    with pytest.raises(IndexError, match="target_arcs"):
        alternatives(q, st, [1], [0], [g.n_arcs], [0])
    with pytest.raises(ValueError, match="one cost per arc"):
        alternatives(q, st, [1], [0, 1], [3], [0])


@pytest.mark.parametrize("dtype", [np.int64, np.float64])
def test_t_window_is_the_papers_window(dtype):
    """The T-test's ends (shared by the CH and overlay alternatives) against the definition written with NumPy:
    the last position at least T before the via (else 0), the first at least T after it (else the last)."""
    rng = np.random.default_rng(5)
    for _ in range(200):
        k = int(rng.integers(1, 12))
        cum = np.cumsum(rng.integers(0, 9, k)).astype(dtype)
        iv = int(rng.integers(0, k))
        T = float(rng.integers(0, 30)) + (0.5 if dtype is np.float64 else 0.0)
        before = np.flatnonzero(cum[iv] - cum[:iv + 1] >= T)
        after = np.flatnonzero(cum[iv:] - cum[iv] >= T)
        want = (int(before[-1]) if before.size else 0, iv + int(after[0]) if after.size else k - 1)
        assert tuple(int(v) for v in t_window(cum, iv, T)) == want


def test_settings_defaults_and_given(monkeypatch):
    monkeypatch.setattr(config, "SERVE_ALTERNATIVES_STRETCH", 0.4)
    monkeypatch.setattr(config, "SERVE_ALTERNATIVES_CANDIDATES", 7)
    assert settings() == (0.4, float(config.SERVE_ALTERNATIVES_SHARING), float(config.SERVE_ALTERNATIVES_ALPHA), 7)
    assert settings(0.1, 0.2, 0.3, "5") == (0.1, 0.2, 0.3, 5)
