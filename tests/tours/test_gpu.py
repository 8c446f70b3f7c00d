"""GPU twin of the tour local search (gpuroute.tours.gpu, local_search.cu) against the CPU twin
(gpuroute.tours.local_search): the same best move (delta bit for bit, same tie-breaking), the same descent,
batched descents equal to one-by-one ones, ILS chains equal to a CPU replay, valid tsp(device="gpu")
tours. The host-side parts (the move ranks that carry the CPU's tie order, double-bridge cut points, the
exact-sums test) and device selection without a GPU run everywhere."""
from __future__ import annotations

import numpy as np
import pytest

import gpuroute.backend as backend
from gpuroute import config
from gpuroute.backend import GPUUnavailableError, gpu_available
from gpuroute.tours import gpu, tour_cost, tsp
from gpuroute.tours import local_search as ls

needs_gpu = pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")


def all_moves(n):
    """Every move of the CPU twin's full neighbourhood (local_search module docstring), plain Python."""
    for i in range(n):
        for j in range(i + 2, n):
            yield ls.TWO_OPT, i, j, -1
    for i in range(n):
        for j in range(i + 1, n):
            if not (n == 3 and i == 0 and j == 2):  # the same exchange as (0, 1) on a 3-cycle
                yield ls.SWAP, i, j, -1
    for L in range(1, ls.MAX_SEG + 1):
        for i in range(n - L + 1):
            j = i + L - 1
            for k in range(n):
                if i <= k <= j or k == (i - 1) % n:
                    continue
                if L == 1:
                    yield ls.RELOCATE, i, j, k
                else:
                    yield ls.OR_OPT, i, j, k
                    yield ls.OR_OPT_REV, i, j, k


def cpu_state(c, p):
    n = len(p)
    pos = np.empty(n, np.int64)
    fwd = np.empty(n)
    bwd = np.empty(n)
    ls.prefix_sums(c, p, pos, fwd, bwd)
    return pos, fwd, bwd


def cpu_best(c, p):
    p = np.asarray(p, np.int64)
    pos, fwd, bwd = cpu_state(c, p)
    d, t, i, j, k = ls.best_move(c, np.ascontiguousarray(c.T), p, pos, fwd, bwd, np.empty((len(p), 0), np.int64))
    return float(d), int(t), int(i), int(j), int(k)


def keyed_best(c, p):
    """The GPU's reduction rule on the CPU: the smallest (delta, i, move_rank) over every move, deltas
    from the CPU's delta functions (exact for the integer costs used here)."""
    n = len(p)
    p = np.asarray(p, np.int64)
    _, fwd, bwd = cpu_state(c, p)
    best = None
    for t, i, j, k in all_moves(n):
        if t == ls.TWO_OPT:
            d = ls.delta_two_opt(c, p, fwd, bwd, i, j)
        elif t == ls.SWAP:
            d = ls.delta_swap(c, p, i, j)
        else:
            d = ls.delta_or_opt(c, p, fwd, bwd, i, j, k, t == ls.OR_OPT_REV)
        key = (d, i, gpu.move_rank(n, t, i, j, k))
        if best is None or key < best[0]:
            best = (key, (float(d), t, i, j, k))
    return best[1]


def matrix(rng, n, kind):
    if kind == "float":
        return rng.random((n, n)) * 100.0  # the left-to-right scan (bitwise the CPU's prefix sums)
    if kind == "int":
        return rng.integers(0, 1000, (n, n)).astype(np.float64)  # the chunked exact scan
    return rng.integers(0, 3, (n, n)).astype(np.float64)  # "ties": many equal deltas


# ------------------------------------------------------------------------------------ host side (CPU)
@pytest.mark.parametrize("n", [3, 4, 5, 6, 7, 9, 12])
def test_move_rank_is_a_bijection_and_the_cpu_tie_order(n):
    """move_rank numbers each row's moves uniquely below 14n and move_from_rank inverts it; with many
    ties, the smallest (delta, i, rank) is exactly the CPU's best_move: the rank carries the CPU's order."""
    seen = set()
    for t, i, j, k in all_moves(n):
        r = gpu.move_rank(n, t, i, j, k)
        assert 0 <= r < 14 * n and (i, r) not in seen
        seen.add((i, r))
        assert gpu.move_from_rank(n, i, r) == (t, i, j, k)
    rng = np.random.default_rng(n)
    for _ in range(25):
        c = matrix(rng, n, "ties")
        p = rng.permutation(n).astype(np.int64)
        assert keyed_best(c, p) == cpu_best(c, p)


def test_double_bridge_cuts_replace_three_arcs():
    rng = np.random.default_rng(7)
    for n, window in ((8, 0), (9, 50), (60, 5), (300, 50), (300, 0)):
        cuts = gpu.double_bridge_cuts(rng, n, (4, 50), window)
        assert cuts.shape == (4, 50, 3) and cuts.dtype == np.int32
        a, m, e = cuts[..., 0], cuts[..., 1], cuts[..., 2]
        assert (a >= 2).all() and (a < m).all() and (m < e).all() and (e <= n - 1).all()
        if 0 < window < n - 1:
            assert (e - a <= min(n - 1, 10 * window) - 2).all()
        p = rng.permutation(n)
        arcs = set(zip(p, np.roll(p, -1), strict=True))
        for a0, m0, e0 in cuts.reshape(-1, 3)[:40]:
            q = gpu.apply_double_bridge(p, a0, m0, e0)
            assert sorted(q.tolist()) == list(range(n)) and q[0] == p[0]
            assert len(arcs - set(zip(q, np.roll(q, -1), strict=True))) == 3
    assert np.array_equal(gpu.apply_double_bridge(np.arange(9), 0, 0, 0), np.arange(9))
    with pytest.raises(ValueError, match="at least 8 stops"):
        gpu.double_bridge_cuts(rng, 7, (1, 1), 0)


def test_exact_sums_and_threads_per_row():
    assert gpu.exact_sums(np.array([[0.0, 3.0], [7.0, 0.0]]))
    assert not gpu.exact_sums(np.array([[0.0, 0.5], [7.0, 0.0]]))
    assert not gpu.exact_sums(np.full((4, 4), 2.0 ** 51))
    assert [gpu.threads_per_row(n, 256) for n in (3, 32, 33, 100, 1000)] == [32, 32, 64, 128, 256]
    assert gpu.threads_per_row(1000, 64) == 64


@pytest.mark.gpu
@needs_gpu
def test_device_checks_equal_the_host_rule():
    """The set-up's checks on the device (finite entries, exact_sums' rule) equal the host ones, and a
    non-finite matrix is still refused naming the entry."""
    import cupy as cp

    rng = np.random.default_rng(4)
    ints = rng.integers(0, 1000, (50, 50)).astype(np.float64)
    cases = [ints, ints + 0.5, np.full((6, 6), 2.0 ** 51), rng.uniform(0, 9, (7, 7)), np.zeros((3, 3))]
    for C in cases:
        assert gpu._device_checks(cp, cp.asarray(C)) == (True, gpu.exact_sums(C))
    for v in (np.nan, np.inf, -np.inf):
        C = ints.copy()
        C[3, 7] = v
        assert gpu._device_checks(cp, cp.asarray(C))[0] is False
        with pytest.raises(ValueError, match=r"costs\[3, 7\]"):
            gpu.GPUTourSearch(C)


def test_no_device_set_up_the_time_left_cannot_pay_for(monkeypatch):
    """With less time left than the estimated set-up (the matrix copied to the device), the GPU search
    returns the nearest-neighbour tour it built and never constructs the device search (issue 23: 3,038
    stops at 0.05 s overran by 88 ms)."""
    from gpuroute.tours.budget import Deadline

    def boom(*a, **k):
        raise AssertionError("the device set-up started")

    monkeypatch.setattr(gpu, "GPUTourSearch", boom)
    monkeypatch.setattr(config, "TOUR_GPU_SETUP_BYTES_PER_S", 1.0)  # any set-up takes longer than any limit
    rng = np.random.default_rng(2)
    xy = rng.uniform(0, 1000, (40, 2))
    C = np.rint(np.hypot(*(xy[:, None, :] - xy[None, :, :]).transpose(2, 0, 1)))
    p, cost, _, st = gpu.search(C, 0, -1, deadline=Deadline(5.0), rng=rng, eps=0.5, max_moves=1000, window=0)
    assert st["setup_skipped"] is True and sorted(p.tolist()) == list(range(40))
    assert cost == pytest.approx(ls.tour_cost(C, p))


def test_device_gpu_without_a_gpu_raises_and_auto_falls_back(monkeypatch):
    monkeypatch.setattr(backend, "probe_gpu", lambda: (False, "no GPU in this test"))
    monkeypatch.setattr(config, "TOUR_GPU_AUTO_MIN_N", 4)
    c = np.random.default_rng(0).integers(1, 50, (9, 9))
    with pytest.raises(GPUUnavailableError, match="device='gpu' was asked for but no GPU in this test"):
        tsp(c, device="gpu")
    with pytest.raises(GPUUnavailableError, match="no GPU in this test"):
        gpu.GPUTourSearch(c)
    r = tsp(c, device="auto", time_limit=0.05, seed=0)
    assert r.device == "cpu" and sorted(r.tour.tolist()) == list(range(9))


def slot_delta(c, p, fwd, bwd, mv):
    t, i, j, k = mv
    if t == ls.TWO_OPT:
        return ls.delta_two_opt(c, p, fwd, bwd, i, j)
    if t == ls.SWAP:
        return ls.delta_swap(c, p, i, j)
    return ls.delta_or_opt(c, p, fwd, bwd, i, j, k, t == ls.OR_OPT_REV)


@pytest.mark.parametrize("n", [3, 4, 5, 8, 13, 30])
def test_candidate_slots_carry_the_cpu_pair_order(n):
    """The candidate kernels' move numbering (gpu.candidate_slot, the table of local_search.cu): for every
    stop, the smallest (delta, q * 23 + slot) over its candidates' slots is the move the CPU twin's
    _pair_best loop of local_search_queue picks (with many ties, so the order matters), and every slot move
    is legal (its delta equals the cost change of applying it)."""
    rng = np.random.default_rng(50 + n)
    K = min(5, n - 1)
    for _ in range(6):
        c = matrix(rng, n, "ties")
        nbr = ls.candidate_lists(c, K)
        p = rng.permutation(n).astype(np.int64)
        pos, fwd, bwd = cpu_state(c, p)
        for u in range(n):
            x = int(pos[u])
            best = np.array([np.inf, -1, -1, -1, -1])
            key = None
            for q in range(K):
                y = int(pos[nbr[u, q]])
                if y == x:
                    continue
                ls._pair_best(c, p, fwd, bwd, x, y, best)
                for slot in range(gpu.CAND_SLOTS):
                    mv = gpu.candidate_slot(n, x, y, slot)
                    if mv is None:
                        continue
                    d = slot_delta(c, p, fwd, bwd, mv)
                    if key is None or (d, q * gpu.CAND_SLOTS + slot) < key[0]:
                        key = ((d, q * gpu.CAND_SLOTS + slot), mv)
                    if slot % 4 == 0:  # spot-check legality: the delta is the cost change
                        r = p.copy()
                        ls.apply_move(r, *mv)
                        assert sorted(r.tolist()) == list(range(n))
                        assert ls.tour_cost(c, r) - ls.tour_cost(c, p) == pytest.approx(d, abs=1e-9)
            if key is None:
                assert best[0] == np.inf
            else:
                assert (key[0][0], *key[1]) == (best[0], *best[1:].astype(int))
    with pytest.raises(ValueError, match="slot"):
        gpu.candidate_slot(9, 0, 3, 23)


def test_worst_half_never_overwrites_the_best():
    costs = np.array([5.0, 1.0, 9.0, 9.0, 3.0, 7.0])
    assert sorted(gpu.worst_half(costs, 1).tolist()) == [2, 3, 5]
    assert gpu.worst_half(np.array([2.0]), 0).size == 0
    assert 0 not in gpu.worst_half(np.full(4, 1.0), 0).tolist()


# ------------------------------------------------------------------------------------ device
@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("threads,max_blocks", [(64, 3), (256, 0)])
@pytest.mark.parametrize("kind", ["float", "int", "ties"])
@pytest.mark.parametrize("n", [3, 4, 5, 6, 7, 8, 13, 64, 300])
def test_best_move_equals_cpu(n, kind, threads, max_blocks, monkeypatch):
    """One evaluation + reduction on the GPU gives the CPU's (delta, type, i, j, k), delta bit for bit;
    64 threads and a 3-block grid make small inputs take the multi-row and grid-stride paths."""
    monkeypatch.setattr(config, "TOUR_GPU_EVAL_MAX_BLOCKS", max_blocks)
    rng = np.random.default_rng(1000 * n + len(kind) + threads)
    c = matrix(rng, n, kind)
    g = gpu.GPUTourSearch(c, threads=threads)
    assert g.exact == (kind != "float")
    for _ in range(4 if n >= 64 else 8):
        p = rng.permutation(n)
        assert g.best_move(p) == cpu_best(c, p)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("kind", ["float", "int"])
@pytest.mark.parametrize("n", [5, 8, 40, 300])
def test_descent_equals_cpu_and_ends_at_a_local_minimum(n, kind):
    rng = np.random.default_rng(n + 7 * len(kind))
    c = matrix(rng, n, kind)
    eps = 0.5 if kind == "int" else 1e-9
    g = gpu.GPUTourSearch(c)
    p = rng.permutation(n).astype(np.int64)
    tour, cost, moves = g.local_search(p, eps)
    q = p.copy()
    cpu_cost, cpu_moves = ls.local_search(c, q, np.empty((n, 0), np.int64), eps, 50 * n + 1000)
    assert tour.tolist() == q.tolist() and moves == cpu_moves and cost == cpu_cost
    assert sorted(tour.tolist()) == list(range(n))
    assert cost == pytest.approx(tour_cost(c, tour), rel=1e-12, abs=1e-9)
    if kind == "int":
        assert cost == tour_cost(c, tour)
    assert cpu_best(c, tour)[0] >= -eps
    # a move cap stops both twins at the same tour
    tour3, _, m3 = g.local_search(p, eps, max_moves=3)
    q = p.copy()
    ls.local_search(c, q, np.empty((n, 0), np.int64), eps, 3)
    assert m3 == min(3, moves) and tour3.tolist() == q.tolist()


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("n,threads", [(7, 64), (50, 64), (130, 256)])
def test_batch_equals_one_by_one(n, threads):
    rng = np.random.default_rng(n)
    c = matrix(rng, n, "float")
    g = gpu.GPUTourSearch(c, threads=threads)
    P = np.stack([rng.permutation(n) for _ in range(5)])
    tours, costs, moves = g.local_search_batch(P, 1e-9)
    assert tours.shape == (5, n) and costs.shape == (5,) and moves.shape == (5,)
    for b in range(5):
        t1, c1, m1 = g.local_search(P[b], 1e-9)
        assert tours[b].tolist() == t1.tolist() and costs[b] == c1 and moves[b] == m1
        q = P[b].astype(np.int64)
        cc, _ = ls.local_search(c, q, np.empty((n, 0), np.int64), 1e-9, 50 * n + 1000)
        assert tours[b].tolist() == q.tolist() and costs[b] == cc


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("kind,budget", [("float", None), ("int", None), ("int", 600.0)])
def test_ils_round_equals_a_cpu_replay(kind, budget):
    """ls_ils: each chain's double bridges (from the host's cut points), descents and acceptances, replayed
    on the CPU twin, give the same tours and costs (a generous device-clock budget changes nothing); then
    the broadcast copies the best chain."""
    n, B, iters = 40, 4, 3
    rng = np.random.default_rng(3 + len(kind))
    c = matrix(rng, n, kind)
    eps = 0.5 if kind == "int" else 1e-9
    g = gpu.GPUTourSearch(c, threads=64)
    P = np.stack([rng.permutation(n) for _ in range(B)])
    starts, costs0, _ = g.local_search_batch(P, eps)
    g.ils_start(starts, costs0)
    cuts = gpu.double_bridge_cuts(rng, n, (B, iters), 10)
    cuts[1, 1] = 0  # a == 0: no perturbation (a plain descent of the local minimum: no move)
    costs = g.ils_round(cuts, eps, 50 * n + 1000, budget_s=budget)
    full = np.empty((n, 0), np.int64)
    for b in range(B):
        cur, cc = starts[b].copy(), costs0[b]
        for it in range(iters):
            q = gpu.apply_double_bridge(cur, *cuts[b, it]).astype(np.int64)
            qc, _ = ls.local_search(c, q, full, eps, 50 * n + 1000)
            if qc <= cc + eps:
                cur, cc = q, qc
        tour, _, _, steps = g.ils_result(b)
        assert tour.tolist() == cur.tolist() and costs[b] == cc and steps == B * iters
        assert costs[b] == pytest.approx(tour_cost(c, tour), rel=1e-12, abs=1e-9)
    best = int(np.argmin(costs))
    g.ils_broadcast(best)
    want = g.ils_result(best)[0]
    for b in range(B):
        assert g.ils_result(b)[0].tolist() == want.tolist()


@pytest.mark.gpu
@needs_gpu
def test_ils_round_out_of_time_keeps_local_minima():
    """A budget of 1 ns: the chains stop at their first clock reading past it, abandoning the step under
    way; every chain still holds a local minimum no worse than before, with its cost."""
    n, B, iters = 60, 4, 8
    rng = np.random.default_rng(21)
    c = matrix(rng, n, "int")
    g = gpu.GPUTourSearch(c, threads=64)
    starts, costs0, _ = g.local_search_batch(np.stack([rng.permutation(n) for _ in range(B)]), 0.5)
    g.ils_start(starts, costs0)
    costs = g.ils_round(gpu.double_bridge_cuts(rng, n, (B, iters), 10), 0.5, 50 * n + 1000, budget_s=1e-9)
    steps = g.ils_result(0)[3]
    assert steps < B * iters
    for b in range(B):
        tour = g.ils_result(b)[0]
        assert sorted(tour.tolist()) == list(range(n))
        assert costs[b] == tour_cost(c, tour) <= costs0[b]
        assert cpu_best(c, tour)[0] > -0.5


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("hood", ["full", "candidates"])
@pytest.mark.parametrize("n", [4, 6, 9, 60])
@pytest.mark.parametrize("variant", ["closed", "start", "end", "both"])
def test_tsp_on_the_gpu_returns_valid_tours(n, variant, hood, monkeypatch):
    monkeypatch.setattr(config, "TOUR_GPU_NEIGHBOURHOOD", hood)
    rng = np.random.default_rng(10 * n + len(variant))
    c = rng.integers(1, 100, (n, n))
    s, e = {"closed": (None, None), "start": (n // 2, None), "end": (None, n - 1), "both": (n - 1, 0)}[variant]
    r = tsp(c, start=s, end=e, time_limit=0.2, seed=1, device="gpu")
    assert r.device == "gpu" and r.tour.dtype == np.int64
    assert sorted(r.tour.tolist()) == list(range(n))
    assert r.cost == tour_cost(c, r.tour, r.closed) and isinstance(r.cost, int)
    cand = hood == "candidates" and n >= 8
    K = min(config.TOUR_GPU_CANDIDATES, n - 1)
    assert r.trace[-1][1] == r.cost and r.stats["neighbourhood"] == (f"candidates:{K}" if cand else "full")
    if s is not None:
        assert r.tour[0] == s
    if e is not None:
        assert r.tour[-1] == e
    if variant == "closed":
        assert r.tour[0] == 0
        if cand:  # a local minimum of the candidate neighbourhood
            assert cpu_best_candidates(c.astype(np.float64), r.tour, ls.candidate_lists(c.astype(np.float64), K))[0] > -0.5
        else:  # a local minimum of the full neighbourhood
            assert cpu_best(c.astype(np.float64), r.tour)[0] > -0.5


def cpu_best_candidates(c, p, nbr):
    p = np.asarray(p, np.int64)
    pos, fwd, bwd = cpu_state(c, p)
    return ls.best_move(c, c, p, pos, fwd, bwd, nbr)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("threads", [64, 256])
@pytest.mark.parametrize("kind", ["float", "int", "ties"])
@pytest.mark.parametrize("n,K", [(8, 7), (40, 5), (200, 10)])
def test_candidate_descent_equals_cpu(n, K, kind, threads):
    """ls_cand_batch: each block's queue-driven candidate descent ends at the CPU twin's
    local_search_queue tour, cost (bit for bit) and move count, with and without polish, seeded with every
    stop or a few; 64 threads make the 23 K moves of a stop take several passes."""
    rng = np.random.default_rng(n + 100 * K + len(kind) + threads)
    c = matrix(rng, n, kind)
    eps = 1e-9 if kind == "float" else 0.5
    g = gpu.GPUTourSearch(c, cand_threads=threads)
    nbr = g.set_candidates(K)
    assert np.array_equal(nbr, ls.candidate_lists(c, K))
    P = np.stack([rng.permutation(n) for _ in range(4)])
    for polish, active in ((True, None), (False, None), (False, rng.integers(0, n, 6)), (True, np.empty(0, np.int64))):
        tours, costs, moves = g.cand_descent_batch(P, eps, active=active, polish=polish)
        act = np.arange(n) if active is None else active.astype(np.int64)
        for b in range(len(P)):
            q = P[b].astype(np.int64)
            cc, mv = ls.local_search_queue(c, q, nbr, eps, 50 * n + 1000, act, polish)
            assert tours[b].tolist() == q.tolist() and costs[b] == cc and moves[b] == mv
            if polish:
                assert cpu_best_candidates(c, tours[b], nbr)[0] >= -eps
    # a move cap stops both twins at the same tour
    tours, _, moves = g.cand_descent_batch(P[:1], eps, max_moves=3)
    q = P[0].astype(np.int64)
    ls.local_search_queue(c, q, nbr, eps, 3, np.arange(n), True)
    assert tours[0].tolist() == q.tolist() and moves[0] <= 3


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("kind,budget", [("float", None), ("int", None), ("int", 600.0)])
def test_candidate_ils_round_equals_a_cpu_replay(kind, budget):
    """ls_cand_ils: each chain's double bridges (host cut points), candidate descents seeded with the six
    stops around the cuts, and acceptances, replayed with the CPU twin (local_search_queue, as ils_round
    does), give the same tours and costs; ils_copy then copies the best over the worst half."""
    n, B, iters, K = 60, 4, 4, 8
    rng = np.random.default_rng(30 + len(kind))
    c = matrix(rng, n, kind)
    eps = 0.5 if kind == "int" else 1e-9
    g = gpu.GPUTourSearch(c, cand_threads=64)
    nbr = g.set_candidates(K)
    starts, costs0, _ = g.cand_descent_batch(np.stack([rng.permutation(n) for _ in range(B)]), eps)
    g.ils_start(starts, costs0)
    cuts = gpu.double_bridge_cuts(rng, n, (B, iters), 10)
    cuts[2, 1] = 0  # a == 0: no perturbation, an empty queue
    costs = g.cand_ils_round(cuts, eps, 50 * n + 1000, budget_s=budget)
    for b in range(B):
        cur, cc = starts[b].copy(), costs0[b]
        for it in range(iters):
            a, m, e = (int(v) for v in cuts[b, it])
            q = gpu.apply_double_bridge(cur, a, m, e).astype(np.int64)
            act = np.array([cur[a - 1], cur[a], cur[m - 1], cur[m], cur[e - 1], cur[e % n]]) if a else np.empty(0)
            qc, _ = ls.local_search_queue(c, q, nbr, eps, 50 * n + 1000, act.astype(np.int64), False)
            if qc <= cc + eps:
                cur, cc = q, qc
        tour, _, _, steps = g.ils_result(b)
        assert tour.tolist() == cur.tolist() and costs[b] == cc and steps == B * iters
        assert costs[b] == pytest.approx(tour_cost(c, tour), rel=1e-12, abs=1e-9)
    best = int(np.argmin(costs))
    worst = gpu.worst_half(costs, best)
    g.ils_copy(best, worst)
    want = g.ils_result(best)[0]
    for b in worst:
        assert g.ils_result(int(b))[0].tolist() == want.tolist()



@pytest.mark.gpu
@needs_gpu
def test_start_descents_stop_at_their_device_budget():
    """Issue 23: the start descent of gpu.search is bounded. With a 1 ns budget the candidate descent and
    the whole-GPU descent stop before their first move (last_complete False) and return the start tour
    and its cost; with a generous budget they equal the unbounded descent."""
    n = 300
    rng = np.random.default_rng(23)
    c = matrix(rng, n, "int")
    g = gpu.GPUTourSearch(c)
    g.set_candidates(10)
    P = np.stack([rng.permutation(n) for _ in range(3)])
    tours, costs, moves = g.cand_descent_batch(P, 0.5, budget_s=1e-9)
    assert not g.last_complete.any() and (moves == 0).all() and np.array_equal(tours, P)
    assert costs.tolist() == [tour_cost(c, p) for p in P]
    want = g.cand_descent_batch(P, 0.5)
    got = g.cand_descent_batch(P, 0.5, budget_s=600.0)
    assert g.last_complete.all() and np.array_equal(got[0], want[0]) and np.array_equal(got[2], want[2])
    tour, cost, mv = g.local_search(P[0], 0.5, budget_s=1e-9)
    assert not g.last_complete[0] and mv == 0 and tour.tolist() == P[0].tolist() and cost == tour_cost(c, P[0])
    tour2, _, mv2 = g.local_search(P[0], 0.5, budget_s=600.0)
    tour3, _, mv3 = g.local_search(P[0], 0.5)
    assert g.last_complete[0] and mv2 == mv3 > 0 and tour2.tolist() == tour3.tolist()


@pytest.mark.gpu
@needs_gpu
def test_warm_up_runs_once_and_a_gpu_search_follows():
    """warm_up("gpu") compiles and runs every GPU tour kernel once (a kernel that fails to build or launch
    fails here, not inside a time limit); later warm-ups are free, and a search after it is complete."""
    from gpuroute.tours import warm_up, warmup

    warm_up("gpu")
    assert {("tsp", "gpu"), ("cvrp", "gpu")} <= warmup._done
    assert warmup.warm_up_tsp("gpu") == 0.0 and warmup.warm_up_cvrp("gpu") == 0.0
    c = np.random.default_rng(2).integers(1, 1000, (200, 200))
    r = tsp(c, time_limit=0.2, seed=0, device="gpu")
    assert r.device == "gpu" and r.stats["complete"] and sorted(r.tour.tolist()) == list(range(200))
