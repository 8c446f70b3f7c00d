"""CVRP on the GPU (issue 23, item 2): the kernel's move numbering and work items checked on the CPU
(ranks in the CPU twin's order of evaluation, an emulation of the kernel's items equal to best_vrp_move
move for move, the host's ruin lists), then on a GPU (marked gpu): the same best move as the CPU twin
(delta bit for bit, ties broken alike), the same descent, chains equal to a CPU replay, valid cvrp
results, launches that stop at their device-clock budget."""
from __future__ import annotations

import importlib

import numpy as np
import pytest

from gpuroute import config
from gpuroute.backend import gpu_available
from gpuroute.tours import cvrp

cv = importlib.import_module("gpuroute.tours.cvrp")
vg = importlib.import_module("gpuroute.tours.vrp_gpu")

needs_gpu = pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")


def sibling(name):
    """A test module beside this one (the suite imports test files by path, not as a package)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(f"_tours_{name}", Path(__file__).with_name(f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def random_state(rng, n, depot, n_routes):
    cust = [v for v in range(n) if v != depot]
    rng.shuffle(cust)
    cuts = sorted(rng.choice(np.arange(1, len(cust)), n_routes - 1, replace=False).tolist())
    return [cust[i:j] for i, j in zip([0] + cuts, cuts + [len(cust)], strict=True)]


def instance(seed, kind, n=None):
    """A random CVRP state: ``kind`` "ties" (costs 0..2, many equal deltas), "int" or "float"."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 13)) if n is None else n
    depot = int(rng.integers(0, n))
    if kind == "ties":
        c = rng.integers(0, 3, (n, n)).astype(np.float64)
    elif kind == "int":
        c = rng.integers(0, 100, (n, n)).astype(np.float64)
    else:
        c = rng.random((n, n)) * 10
    np.fill_diagonal(c, 0.0)
    dem = rng.integers(1, 5, n).astype(np.float64) if kind != "float" else rng.random(n) * 3 + 0.5
    dem[depot] = 0
    routes = random_state(rng, n, depot, int(rng.integers(1, min(5, n - 1) + 1)))
    cap = float(max(dem[r].sum() for r in routes) + rng.integers(0, 4))
    W = n + 1 + int(rng.integers(0, 3))
    E, lens, nr = cv.pack_routes(routes, depot, n, W)
    return c, dem, cap, depot, E, lens, nr


def state(c, dem, E, lens, nr):
    R, W = E.shape
    load, fwd, bwd, dcum = np.empty(R), np.empty((R, W)), np.empty((R, W)), np.empty((R, W))
    cv.refresh(c, dem, E, lens, nr, load, fwd, bwd, dcum)
    return load, fwd, bwd, dcum


def cpu_best(c, dem, cap, E, lens, nr):
    out = cv.best_vrp_move(c, dem, cap, E, lens, nr, *state(c, dem, E, lens, nr))
    return (float(out[0]),) + tuple(int(v) for v in out[1:])


def row_moves(lens, nr, r1):
    """Every move of route r1 in the order the CPU's _row visits them (feasible or not)."""
    m1 = int(lens[r1])
    for a in range(1, m1 + 1):
        for r2 in range(nr):
            m2 = int(lens[r2])
            if r2 != r1:
                for b in range(m2 + 1):
                    yield cv.RELOCATE, r1, a, r2, b, -1
                if r2 > r1:
                    for b in range(1, m2 + 1):
                        yield cv.SWAP, r1, a, r2, b, -1
            else:
                for b in range(m1 + 1):
                    if b not in (a, a - 1):
                        yield cv.RELOCATE, r1, a, r1, b, -1
                for b in range(a + 1, m1 + 1):
                    yield cv.SWAP, r1, a, r1, b, -1
    for r2 in range(r1 + 1, nr):
        for a in range(m1 + 1):
            for b in range(int(lens[r2]) + 1):
                yield cv.TWO_OPT_STAR, r1, a, r2, b, -1
    for a in range(m1 - 1):
        for b in range(a + 2, m1 + 1):
            yield cv.TWO_OPT, r1, a, r1, b, -1
    for L in (2, 3):
        for s in range(1, m1 - L + 2):
            for k in range(m1 + 1):
                if not s - 1 <= k <= s + L - 1:
                    yield cv.OR_OPT, r1, s, r1, s + L - 1, k
                    yield cv.OR_OPT_REV, r1, s, r1, s + L - 1, k


# ------------------------------------------------------------------------------------ host side (CPU)
@pytest.mark.parametrize("seed", range(8))
def test_vrp_move_rank_follows_the_cpu_order_and_decodes(seed):
    """vrp_move_rank increases strictly along each row's CPU order of evaluation (so the smallest rank
    among equal deltas is the CPU's first), and vrp_move_from_rank inverts it."""
    c, dem, cap, depot, E, lens, nr = instance(seed, "int", n=6 + seed)
    W = E.shape[1]
    for r1 in range(nr):
        prev = -1
        for t, _, a, r2, b, k in row_moves(lens, nr, r1):
            rk = cv.vrp_move_rank(nr, W, t, a, r2, b, k)
            assert rk > prev, (t, a, r2, b, k)
            prev = rk
            assert cv.vrp_move_from_rank(nr, W, r1, rk) == (t, r1, a, r2, b, k)
    with pytest.raises(ValueError, match="unknown move type"):
        cv.vrp_move_rank(nr, W, 9, 1, 0, 0, -1)


@pytest.mark.parametrize("kind", ["ties", "int", "float"])
def test_kernel_items_emulated_equal_best_vrp_move(kind):
    """The kernel's work items (vrp_items), each looping its moves as eval_item does, reduced on
    (delta, r1, rank): the CPU's best_vrp_move, tie-breaks included (many ties with costs 0..2)."""
    for seed in range(60):
        c, dem, cap, depot, E, lens, nr = instance(1000 + seed, kind)
        want = cpu_best(c, dem, cap, E, lens, nr)
        got = cv.emulate_best_vrp_move(c, dem, cap, E, lens, nr, *state(c, dem, E, lens, nr))
        if want[1] == -1:
            assert got[1] == -1 and got[0] == np.inf
        else:
            assert got == want, seed


def test_vrp_items_cover_each_move_once():
    c, dem, cap, depot, E, lens, nr = instance(7, "int", n=11)
    items = list(cv.vrp_items(lens, nr))
    N = int(lens[:nr].sum())
    kinds = [it[0] for it in items]
    assert kinds.count("A") == N * nr and kinds.count("C") <= N + nr
    assert kinds == sorted(kinds)  # A, B, C, D in item order
    assert len(set(items)) == len(items)


def test_ruin_orders_lists_a_customer_and_its_neighbours():
    rng = np.random.default_rng(4)
    n, depot = 30, 3
    c = rng.integers(1, 100, (n, n)).astype(np.float64)

    class Free:
        def budget(self, kind=None):
            return 1 << 40

        def spent(self, w):
            pass

    near = cv.near_customers(c, depot, 8, Free())
    assert (near[np.arange(n) != depot] != depot).all()
    orders = cv.ruin_orders(rng, near, depot, n, 6, (5, 7))
    assert orders.shape == (5, 7, 6) and orders.dtype == np.int32
    for row in orders.reshape(-1, 6):
        k = int((row >= 0).sum())
        assert 2 <= k <= 6 and (row[k:] == -1).all() and len(set(row[:k].tolist())) == k
        assert depot not in row[:k].tolist()
        seed = [v for v in row[:k] if set(row[:k].tolist()) - {v} <= set(near[v, :k - 1].tolist())]
        assert seed, row  # one of them is the customer whose nearest make up the rest


def test_explicit_ruin_recreate_inserts_cheapest_feasible():
    """ruin_recreate with a given list: the customers leave their routes and come back one by one, each
    at the cheapest position of a route with room (ties: lowest route, then position), checked against a
    loop over every position."""
    c, dem, cap, depot, E, lens, nr = instance(11, "ties", n=12)
    order = np.array([v for v in range(12) if v != depot][:4] + [-1], np.int64)
    routes = [E[r, 1:lens[r] + 1].tolist() for r in range(nr)]
    for x in order[:4]:
        for r in routes:
            if x in r:
                r.remove(x)
    routes = [r for r in routes if r] + [[]]
    for x in order[:4]:
        best = None
        for ri, r in enumerate(routes):
            if sum(dem[v] for v in r) + dem[x] > cap:
                continue
            ext = [depot] + r + [depot]
            for b in range(len(r) + 1):
                d = c[ext[b], x] + c[x, ext[b + 1]] - c[ext[b], ext[b + 1]]
                if best is None or d < best[0]:
                    best = (d, ri, b)
        routes[best[1]].insert(best[2], int(x))
        routes = [r for r in routes if r] + [[]]
    E2, l2 = E.copy(), lens.copy()
    nr2, work = cv.ruin_recreate(c, dem, cap, E2, l2, nr, depot, order)
    assert [E2[r, 1:l2[r] + 1].tolist() for r in range(nr2)] == routes
    assert work > 0


# ------------------------------------------------------------------------------------ device
def gpu_search(c, dem, cap, depot, E, **kw):
    return vg.GPUVRPSearch(c, dem, cap, depot, E.shape[0], E.shape[1], **kw)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("threads,max_blocks", [(64, 3), (256, 0)])
@pytest.mark.parametrize("kind", ["ties", "int", "float"])
def test_gpu_best_move_equals_cpu(kind, threads, max_blocks, monkeypatch):
    """vrp_eval + vrp_finish give the CPU's best_vrp_move (delta bit for bit, the same move among ties);
    64 threads and 3 blocks make small inputs take the grid-stride paths."""
    monkeypatch.setattr(config, "TOUR_GPU_EVAL_MAX_BLOCKS", max_blocks)
    for seed in range(25):
        c, dem, cap, depot, E, lens, nr = instance(2000 + seed, kind)
        g = gpu_search(c, dem, cap, depot, E, threads=threads)
        want = cpu_best(c, dem, cap, E, lens, nr)
        got = g.best_move(E, lens, nr)
        if want[1] == -1:
            assert got[1] == -1 and got[0] == np.inf
        else:
            assert got == want, seed


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("kind", ["int", "float"])
@pytest.mark.parametrize("n", [6, 30, 120])
def test_gpu_descent_equals_cpu(n, kind):
    rng = np.random.default_rng(n + len(kind))
    c, dem, cap, depot, E, lens, nr = instance(3000 + n, kind, n=n)
    eps = 0.5 if kind == "int" else 1e-9
    g = gpu_search(c, dem, cap, depot, E)
    E2, l2, nr2, cost, moves = g.local_search(E, lens, nr, eps)
    Ec, lc = E.copy(), lens.copy()
    nrc, cc, mc = cv.vrp_local_search(c, dem, cap, Ec, lc, nr, depot, *state(c, dem, Ec, lc, nr), eps, 50 * n + 1000)
    assert g.last_complete and nr2 == nrc and moves == mc and cost == cc
    assert np.array_equal(l2[:nr2], lc[:nrc])
    assert all(np.array_equal(E2[r, :l2[r] + 2], Ec[r, :lc[r] + 2]) for r in range(nr2))
    # a move cap stops both twins at the same solution
    E3, l3, nr3, _, m3 = g.local_search(E, lens, nr, eps, max_moves=2)
    Ec, lc = E.copy(), lens.copy()
    nrc, _, _ = cv.vrp_local_search(c, dem, cap, Ec, lc, nr, depot, *state(c, dem, Ec, lc, nr), eps, 2)
    assert m3 == min(2, moves) and nr3 == nrc and np.array_equal(l3[:nr3], lc[:nrc])
    del rng


@pytest.mark.gpu
@needs_gpu
def test_gpu_descent_out_of_time_keeps_a_valid_solution():
    c, dem, cap, depot, E, lens, nr = instance(5, "int", n=80)
    g = gpu_search(c, dem, cap, depot, E)
    E2, l2, nr2, cost, moves = g.local_search(E, lens, nr, 0.5, budget_s=1e-9)
    assert not g.last_complete and moves == 0
    routes = [E2[r, 1:l2[r] + 1] for r in range(nr2)]
    assert sorted(np.concatenate(routes).tolist()) == sorted(v for v in range(80) if v != depot)
    assert cost == cv.vrp_cost(c, routes, depot)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("kind,budget", [("int", None), ("float", None), ("int", 600.0)])
def test_gpu_chains_equal_a_cpu_replay(kind, budget):
    """vrp_ils: each chain's ruin & recreate (host lists), descents and acceptances, replayed with the CPU
    twin (vrp_steps), give the same solutions and costs (a generous budget changes nothing); chains_copy
    then copies the best over others."""
    n, B, iters = 40, 4, 3
    c, dem, cap, depot, E, lens, nr = instance(50 + len(kind), kind, n=n)
    eps = 0.5 if kind == "int" else 1e-9
    rng = np.random.default_rng(9)
    g = gpu_search(c, dem, cap, depot, E, threads=64)
    E0, l0, nr0, cost0, _ = g.local_search(E, lens, nr, eps)

    class Free:
        def budget(self, kind=None):
            return 1 << 40

        def spent(self, w):
            pass

    near = cv.near_customers(c, depot, 8, Free())
    g.chains_start(E0, l0, nr0, cost0, B)
    orders = cv.ruin_orders(rng, near, depot, n, 6, (B, iters))
    orders[1, 1] = -1  # no perturbation: a descent of the local minimum (no move)
    costs = g.chains_round(orders, eps, 50 * n + 1000, budget_s=budget)
    for b in range(B):
        want = cv.vrp_steps(c, dem, cap, E0, l0, nr0, depot, cost0, orders[b].astype(np.int64), eps, 50 * n + 1000)
        Eb, lb, nrb, cb, _, _, steps = g.chain_result(b)
        assert costs[b] == want[3] == cb and nrb == want[2] and steps == B * iters
        assert np.array_equal(lb[:nrb], want[1][:nrb])
        assert all(np.array_equal(Eb[r, :lb[r] + 2], want[0][r, :lb[r] + 2]) for r in range(nrb))
    best = int(np.argmin(costs))
    g.chains_copy(best, [v for v in range(B) if v != best])
    for b in range(B):
        assert g.chain_result(b)[3] == costs[best]


@pytest.mark.gpu
@needs_gpu
def test_gpu_chains_out_of_time_keep_their_solutions():
    n, B = 60, 4
    c, dem, cap, depot, E, lens, nr = instance(77, "int", n=n)
    g = gpu_search(c, dem, cap, depot, E, threads=64)
    E0, l0, nr0, cost0, _ = g.local_search(E, lens, nr, 0.5)
    g.chains_start(E0, l0, nr0, cost0, B)
    near = np.array([[(v + q) % n for q in range(1, 6)] for v in range(n)])
    near[near == depot] = (depot + 6) % n
    orders = cv.ruin_orders(np.random.default_rng(0), near, depot, n, 5, (B, 8))
    costs = g.chains_round(orders, 0.5, 50 * n + 1000, budget_s=1e-9)
    for b in range(B):
        Eb, lb, nrb, cb, _, _, steps = g.chain_result(b)
        routes = [Eb[r, 1:lb[r] + 1] for r in range(nrb)]
        assert cb == costs[b] == cv.vrp_cost(c, routes, depot) <= cost0
        assert steps < B * 8


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("seed", range(6))
def test_cvrp_on_the_gpu(seed, monkeypatch):
    """cvrp(device="gpu") on tiny instances: a valid solution of the optimal cost (the exact oracle of
    test_cvrp); device="auto" picks the GPU between TOUR_CVRP_GPU_AUTO_MIN_N and _MAX_N stops."""
    t = sibling("test_cvrp")
    check_routes, exact, tiny = t.check_routes, t.exact, t.tiny
    c, dem, cap, depot = tiny(seed, 3 + seed)
    r = cvrp(c, dem, cap, depot=depot, time_limit=0.3, seed=seed, device="gpu")
    assert r.device == "gpu"
    check_routes(r, c, dem, cap, depot)
    assert r.cost == exact(c, dem, cap, depot)
    monkeypatch.setattr(config, "TOUR_CVRP_GPU_AUTO_MIN_N", 3)
    monkeypatch.setattr(config, "TOUR_CVRP_GPU_AUTO_MAX_N", 800)  # a window holding the instance: the GPU
    assert cvrp(c, dem, cap, depot=depot, time_limit=0.1, seed=seed).device == "gpu"
    monkeypatch.setattr(config, "TOUR_CVRP_GPU_AUTO_MAX_N", 2)  # above the window: the CPU
    assert cvrp(c, dem, cap, depot=depot, time_limit=0.1, seed=seed).device == "cpu"


@pytest.mark.gpu
@needs_gpu
def test_cvrp_x_instance_on_the_gpu():
    t = sibling("test_cvrp")
    CVRP_DIR, check_routes = t.CVRP_DIR, t.check_routes
    c, dem, cap, depot, bks = cv.read_cvrplib(CVRP_DIR / "X-n101-k25.vrp")
    r = cvrp(c, dem, cap, depot=depot, time_limit=2.0, seed=0, device="gpu")
    check_routes(r, c, dem, cap, depot)
    assert bks <= r.cost < 1.05 * bks and r.stats["rounds"] > 0 and r.stats["complete"]
