"""The oracle of alternative routes on a turn-aware engine (from the route objects alone: their ``nodes``
annotation gives their arcs): scipy's Dijkstra on the turn-expanded graph of the request's metric snapshot. Every
alternative is a real path whose weight is the sum of its fraction-weighted arc costs and turn costs; it is at most
``1 + stretch`` times the main route's weight, shares at most ``sharing`` of the main route's cost with it and the
alternatives before it, splits into two shortest paths at some arc whose T-window (``T = alpha`` times the main
route's cost each side) is a shortest path; no two routes are the same. Used by tests/engine/test_alternatives.py
and tests/server/test_alternatives_osrm.py."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import dijkstra
from turn_oracle import route_arcs

from gpuroute import config
from gpuroute.engine.params import RouteParams

STRETCH = float(config.SERVE_ALTERNATIVES_STRETCH)
SHARING = float(config.SERVE_ALTERNATIVES_SHARING)
ALPHA = float(config.SERVE_ALTERNATIVES_ALPHA)


def t_window(cum, iv, T):
    """The T-test's ends by the paper's definition (sec. 3.1), the oracle: the last position at least ``T``
    before the via ``iv`` (else 0), the first at least ``T`` after it (else the last)."""
    before = np.flatnonzero(cum[iv] - cum[:iv + 1] >= T)
    after = np.flatnonzero(cum[iv:] - cum[iv] >= T)
    return (int(before[-1]) if before.size else 0), (iv + int(after[0]) if after.size else cum.size - 1)


def dist_from(n, rows, cols, w, starts, costs):
    """Labels from a super source (state ``n``) with edges to ``starts`` at ``costs`` (may be negative)."""
    costs = np.asarray(costs, dtype=np.float64)
    shift = 1.0 - min(0.0, float(costs.min()))
    g = csr_matrix((np.concatenate([w, costs + shift]), (np.concatenate([rows, np.full(len(starts), n)]),
                                                         np.concatenate([cols, starts]))), shape=(n + 1, n + 1))
    return dijkstra(g, indices=n)[:n] - shift


class TurnOracle:
    """The turn-expanded graph of a metric snapshot (states: arcs, labels at an arc's end)."""

    def __init__(self, e, snap):
        tr = e.overlay.turns
        m = e.graph.n_arcs
        tc = np.asarray(snap.turn_cost, dtype=np.float64)
        in_arc = np.repeat(np.arange(m), np.diff(np.asarray(tr.first)))
        ok = tc >= 0
        self.n, self.rows, self.cols, self.w = m, in_arc[ok], np.asarray(tr.out_arc)[ok], tc[ok]
        self.c = np.asarray(snap.cost, dtype=np.float64)
        self.turns, self.tc, self.scale = tr, tc, float(snap.scale)

    def cum(self, arcs, start):
        """Labels at the end of each arc of a path leaving ``arcs[0]`` at cost ``start``."""
        t = self.turns.turn_index(arcs[:-1], arcs[1:])
        assert (t >= 0).all() and (self.tc[t] >= 0).all()  # allowed turns only
        return start + np.concatenate([[0.0], np.cumsum(self.tc[t])])

    def forward(self, arcs, costs):
        return dist_from(self.n, self.rows, self.cols, self.w, arcs, costs)

    def backward(self, arcs, offsets):
        return dist_from(self.n, self.cols, self.rows, self.w, arcs, offsets)


def snap_options(e, coords):
    ph = e._snap(RouteParams.from_kwargs(coords))
    return [dict(zip(ph.options(i)[0].tolist(), ph.options(i)[1].tolist(), strict=True)) for i in range(2)]


def check_alternatives(e, coords, res, oracle, n_min=0):
    """The module's checks of one answer over a turn-aware engine (see the module notes); returns how many
    alternatives it had."""
    routes = res["routes"]
    src, dst = snap_options(e, coords)
    c = oracle.c
    df = oracle.forward(list(src), [(1 - f) * c[a] for a, f in src.items()])
    db = oracle.backward(list(dst), [-(1 - f) * c[b] for b, f in dst.items()])
    paths, costs = [], []
    for r in routes:
        arcs = np.asarray(route_arcs(e, r), dtype=np.int64)
        a, b = int(arcs[0]), int(arcs[-1])
        cum = oracle.cum(arcs, (1 - src[a]) * c[a])
        cost = cum[-1] - (1 - dst[b]) * c[b]
        assert r["weight"] == pytest.approx(cost * oracle.scale, abs=0.051)  # the weight is the path's cost
        paths.append(arcs)
        costs.append((cost, cum, a, b))
    best = costs[0][0]
    assert best == pytest.approx(min(df[b] - (1 - f) * c[b] for b, f in dst.items()), abs=1e-6)  # main: optimal
    union = set(paths[0].tolist())
    for k in range(1, len(routes)):
        arcs, (cost, cum, a, b) = paths[k], costs[k]
        assert routes[k]["weight"] >= routes[k - 1]["weight"]
        assert cost <= best * (1 + STRETCH) + 1e-6  # bounded stretch
        pieces = c[arcs].copy()
        pieces[0] = (1 - src[a]) * c[a]
        pieces[-1] = dst[b] * c[b]
        assert sum(p for x, p in zip(arcs.tolist(), pieces.tolist(), strict=True) if x in union) <= SHARING * best + 1e-6
        # a via: both halves shortest paths, and its T-window a shortest path
        vias = [i for i in range(arcs.size) if abs(cum[i] - df[arcs[i]]) < 1e-3 and abs(cost - cum[i] - db[arcs[i]]) < 1e-3]
        assert vias, "not a concatenation of two shortest paths"
        T = ALPHA * best
        ok = False
        for iv in vias:
            x, y = t_window(cum, iv, T)
            d = oracle.forward([int(arcs[x])], [0.0])
            if x < y and abs(d[arcs[y]] - (cum[y] - cum[x])) < 1e-6:
                ok = True
                break
        assert ok, "no via whose T-window is a shortest path"
        union |= set(arcs.tolist())
    assert len({tuple(p.tolist()) for p in paths}) == len(paths)  # no two the same
    return len(routes) - 1
