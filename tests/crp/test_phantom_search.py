"""The overlay's one-search-per-leg query (:mod:`gpuroute.crp.phantom_search`): seeded arcs with start costs
to target arcs with offsets, the cost of EACH target against scipy's Dijkstra on the turn-expanded graph
(a target's cost taken from the turns into it, never from a seed), the paths unpacked and re-priced, on
random graphs with turn costs and restrictions, before and after a traffic update."""
from __future__ import annotations

import numpy as np
import pytest
from crp_oracle import PEN, with_restrictions
from naive import random_road_graph
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import dijkstra
from turn_oracle import turn_graph, turns_allowed

from gpuroute import INF, Overlay, Partition
from gpuroute.crp import phantom_search as ps


def target_oracle(ov, seeds, seed_cost, targets, offsets, scale):
    """Per target: min over the allowed turns ``p -> b`` of ``dist(p) + scale * turn`` (+ offset), ``dist``
    the multi-source distances from the seeds (each at its cost); INF where no turn reaches it."""
    rows, cols, w, _ = turn_graph(ov)
    m = ov.graph.n_arcs
    start = {}
    for a, c in zip(seeds.tolist(), seed_cost.tolist(), strict=True):
        start[a] = min(c, start.get(a, c))
    sa = np.array(list(start), dtype=np.int64)
    sc = np.array([start[a] for a in sa], dtype=np.float64)
    # the spare state m is the super source; +1 keeps a zero start cost in the matrix
    g = csr_matrix((np.concatenate([w * scale, sc + 1.0]), (np.concatenate([rows, np.full(sa.size, m)]),
                                                            np.concatenate([cols, sa]))), shape=(m + 1, m + 1))
    d = dijkstra(g, indices=m)
    d[:m] -= 1.0
    out = np.full(targets.size, INF, dtype=np.int64)
    for j, b in enumerate(targets.tolist()):
        into = cols == b
        v = d[rows[into]] + w[into] * scale
        v = v[np.isfinite(v)]
        if v.size:
            out[j] = int(v.min()) + int(offsets[j])
    return out


def check_path(ov, st, q, res, j, seeds, targets):
    """Target ``j``'s unpacked path leaves by its seed's arc, ends on the target's arc, takes allowed turns
    only and costs what the search says."""
    arcs = res.unpack(q, st, j)
    assert arcs[0] == seeds[res.seed[j]] and arcs[-1] == targets[j]
    assert arcs.size >= 2 and turns_allowed(ov, arcs.tolist())
    tid = ov.turns.turn_index(arcs[:-1], arcs[1:])
    paid = int(ov.turn_cost[tid].sum())
    assert res.paid(j) == paid
    assert res.label[j] == res.seed_cost[res.seed[j]] + res.scale * paid


def _overlay(seed, n=50, k=10):
    rng = np.random.default_rng(seed)
    g, _ = random_road_graph(rng, n, one_way=0.3)
    g = with_restrictions(g, rng, k)
    ov = Overlay.build(g, Partition.build(g, cell_sizes=(5, 15, 35), seed=seed))
    ov.customize((rng.integers(1, 60, g.n_arcs), PEN))
    return rng, g, ov


def _case(rng, g, n_seeds, n_targets, scale):
    m = g.n_arcs
    seeds = rng.integers(0, m, n_seeds).astype(np.int64)
    seed_cost = rng.integers(0, 40 * scale, n_seeds).astype(np.int64)
    targets = rng.integers(0, m, n_targets).astype(np.int64)
    if rng.random() < 0.5:  # a seed's arc also a target (the same-arc "behind" case: leave and come back)
        targets[0] = seeds[0]
    offsets = -rng.integers(0, 30 * scale, n_targets).astype(np.int64)
    return seeds, seed_cost, targets, offsets


@pytest.mark.parametrize("seed", range(6))
def test_every_target_exact_and_paths_real(seed):
    rng, g, ov = _overlay(seed)
    q = ov.query()
    for update in (False, True):
        if update:  # traffic: the search follows the new state
            arcs = rng.integers(0, g.n_arcs, 15)
            ov.update(arcs, rng.integers(1, 200, arcs.size))
        st = ov._state
        for trial in range(8):
            scale = (1, 1024)[trial % 2]
            seeds, seed_cost, targets, offsets = _case(rng, g, int(rng.integers(1, 5)), int(rng.integers(1, 6)),
                                                       scale)
            res = ps.search(q, st, seeds, seed_cost, targets, offsets, every_target=True, scale=scale)
            want = target_oracle(ov, seeds, seed_cost, targets, offsets, scale)
            np.testing.assert_array_equal(res.cost, want)
            assert not res.overflow
            for j in np.flatnonzero(want < INF):
                check_path(ov, st, q, res, j, seeds, targets)
            assert (res.seed[want >= INF] == -1).all() and all(res.chain(j) is None for j in np.flatnonzero(want >= INF))


@pytest.mark.parametrize("seed", range(4))
def test_best_target_exact_and_bounded(seed):
    rng, g, ov = _overlay(seed + 10)
    q = ov.query()
    st = ov._state
    for _ in range(10):
        seeds, seed_cost, targets, offsets = _case(rng, g, int(rng.integers(1, 4)), int(rng.integers(1, 6)), 1024)
        want = target_oracle(ov, seeds, seed_cost, targets, offsets, 1024)
        full = ps.search(q, st, seeds, seed_cost, targets, offsets, every_target=True)
        res = ps.search(q, st, seeds, seed_cost, targets, offsets, every_target=False)
        assert res.cost.min() == want.min()
        assert (res.cost >= want).all()  # the others: real paths or INF
        assert res.settled <= full.settled
        for j in np.flatnonzero(res.cost < INF):
            check_path(ov, st, q, res, j, seeds, targets)
        if want.min() < INF:  # a bound just above the best still finds the best
            b = ps.search(q, st, seeds, seed_cost, targets, offsets, every_target=False, bound=int(want.min()) + 1)
            assert b.cost.min() == want.min()


def test_buffers_put_back_for_the_next_query():
    """The search leaves its records as it found them: a point-to-point query after it is exact."""
    rng, g, ov = _overlay(3)
    q = ov.query()
    seeds, seed_cost, targets, offsets = _case(rng, g, 3, 4, 1024)
    ps.search(q, ov._state, seeds, seed_cost, targets, offsets)
    assert (q._R[1::8] == INF).all() and (q._R[0::8] == INF).all() and (q._R[2::8] == -1).all()
    a, b = int(seeds[0]), int(targets[-1])
    dist, _ = q.route_arcs([a], [0], [b], [0])
    want = target_oracle(ov, np.array([a]), np.array([0]), np.array([b]), np.array([0]), 1)[0]
    assert dist == want or a == b


def test_overflow_is_reported():
    rng, g, ov = _overlay(1)
    q = ov.query()
    seeds = np.arange(3, dtype=np.int64)
    res = ps.search(q, ov._state, seeds, np.full(3, ps.LABEL_LIMIT - 1), np.array([g.n_arcs - 1]), np.array([0]),
                    scale=1 << 40)
    assert res.overflow
    assert (q._R[0::8] == INF).all()


def test_bad_input_and_counter():
    rng, g, ov = _overlay(2)
    q = ov.query()
    st = ov._state
    m = g.n_arcs
    with pytest.raises(IndexError, match=r"target_arcs\[1\] = -1"):
        ps.search(q, st, [0], [0], [1, -1], [0, 0])
    with pytest.raises(IndexError, match=rf"seed_arcs\[0\] = {m}"):
        ps.search(q, st, [m], [0], [1], [0])
    with pytest.raises(ValueError, match="one cost per arc"):
        ps.search(q, st, [0, 1], [0], [1], [0])
    with pytest.raises(ValueError, match="scale"):
        ps.search(q, st, [0], [0], [1], [0], scale=0)
    with ps.SEARCHES.counting() as c:
        res = ps.search(q, st, [0], [0], [1, 2], [0, 0])
        for j in np.flatnonzero(res.cost < INF):
            res.unpack(q, st, j)
    assert c["overlay_search"] == 1 and c["overlay_unpack"] == int((res.cost < INF).sum())
    if (res.cost >= INF).any():
        with pytest.raises(ValueError, match="not reached"):
            res.unpack(q, st, int(np.flatnonzero(res.cost >= INF)[0]))
