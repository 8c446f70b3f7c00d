"""The population search of the CPU CVRP (gpuroute.tours.vrp_pop): the route-exchange crossover's child equals
a plain-Python recomputation of its definition, every child is a feasible permutation of the customers, a
parent crossed with itself gives itself back, and cvrp's search through the population stays within
capacity, costed right, and optimal on tiny instances."""
from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from gpuroute.tours import vrp_pop as pop
from gpuroute.tours import vrp_sisr as sisr

cv = importlib.import_module("gpuroute.tours.cvrp")
_spec = importlib.util.spec_from_file_location("_pop_test_cvrp", Path(__file__).with_name("test_cvrp.py"))
_tc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_tc)
exact = _tc.exact  # the optimum by enumeration (test_cvrp's oracle)


class _Free:
    def budget(self, kind=None):
        return 1 << 40

    def spent(self, w):
        pass


def instance(seed, n, per_route=4):
    """Random points, rounded distances (asymmetric noise), demands 1..9, capacity for ~per_route customers."""
    rng = np.random.default_rng(seed)
    xy = rng.random((n, 2)) * 100
    c = np.rint(np.hypot(*(xy[:, None] - xy[None]).transpose(2, 0, 1)) + rng.random((n, n)) * 3)
    np.fill_diagonal(c, 0.0)
    depot = int(rng.integers(0, n))
    dem = rng.integers(1, 10, n).astype(np.float64)
    dem[depot] = 0.0
    cap = float(max(dem.max(), 5 * per_route))
    return c, dem, cap, depot


def random_solution(rng, dem, cap, depot, R, W, shuffle_routes=True):
    """A feasible solution in the padded layout: customers in random order, a new route when the next one
    does not fit; some empty routes in between (the state sisr_steps leaves)."""
    n = dem.size
    cust = [v for v in rng.permutation(n) if v != depot]
    routes, cur, ld = [], [], 0.0
    for v in cust:
        if ld + dem[v] > cap or len(cur) + 2 >= W:
            routes.append(cur)
            cur, ld = [], 0.0
        cur.append(int(v))
        ld += dem[v]
    routes.append(cur)
    if shuffle_routes:
        routes.insert(int(rng.integers(0, len(routes) + 1)), [])
    E = np.zeros((R, W), np.int64)
    lens = np.zeros(R, np.int64)
    for r, seq in enumerate(routes):
        cv._set(E, lens, r, np.array(seq, np.int64), depot)
    return E, lens, len(routes)


def routes_of(E, lens, nr):
    return [E[r, 1:lens[r] + 1].tolist() for r in range(nr)]


def oracle_child(C, dem, cap, depot, A, B, selA, selB, keep_b, prio, W):
    """SREX's child by its definition (srex_child's docstring), in plain Python."""
    keptA = [r for i, r in enumerate(A) if not selA[i]]
    whole_b = {v for i, r in enumerate(B) if selB[i] for v in r}
    whole_a = {v for r in keptA for v in r}
    child = [[v for v in r if not (keep_b and v in whole_b)] for r in keptA]
    child += [[v for v in r if not (not keep_b and v in whole_a)] for i, r in enumerate(B) if selB[i]]
    child = [r for r in child if r]
    placed = {v for r in child for v in r}
    missing = sorted((v for v in range(C.shape[0]) if v != depot and v not in placed), key=lambda v: (prio[v], v))
    for x in missing:
        best, where = C[depot, x] + C[x, depot], None
        for ri, r in enumerate(child):
            if sum(dem[v] for v in r) + dem[x] > cap or len(r) + 2 >= W:
                continue
            e = [depot] + r + [depot]
            for b in range(len(r) + 1):
                d = C[e[b], x] + C[x, e[b + 1]] - C[e[b], e[b + 1]]
                if d < best:
                    best, where = d, (ri, b)
        if where is None:
            child.append([x])
        else:
            child[where[0]].insert(where[1], x)
    return child


def check_child(E, lens, nr, dem, cap, depot):
    n = dem.size
    routes = routes_of(E, lens, nr)
    assert routes[-1] == [] and all(routes[:-1])
    assert sorted(v for r in routes for v in r) == [v for v in range(n) if v != depot]
    for r in range(nr):
        assert E[r, 0] == depot and E[r, lens[r] + 1] == depot
        assert dem[routes[r]].sum() <= cap
    return routes[:-1]


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("keep_b", [False, True])
def test_srex_child_equals_its_definition(seed, keep_b):
    """srex_child against the plain-Python recomputation, for random parents, random exchanged route sets
    (none, some, all) and random insertion orders; its child is a feasible permutation."""
    rng = np.random.default_rng(seed)
    n = 10 + 3 * seed
    c, dem, cap, depot = instance(seed, n, per_route=2 + seed % 5)
    W = int(np.searchsorted(np.cumsum(np.sort(np.delete(dem, depot))), cap, side="right")) + 2 - seed % 2
    R = n
    EA, la, nra = random_solution(rng, dem, cap, depot, R, W)
    EB, lb, nrb = random_solution(rng, dem, cap, depot, R, W)
    for k in range(4):
        p_sel = (0.0, 0.3, 1.0, rng.random())[k]
        selA = rng.random(nra) < p_sel
        selB = rng.random(nrb) < rng.random()
        prio = rng.random(n)
        E, lens = np.full((R, W), -7, np.int64), np.zeros(R, np.int64)
        nr, work = pop.srex_child(c, dem, cap, depot, EA, la, nra, EB, lb, nrb, selA, selB, keep_b, prio, E, lens)
        got = check_child(E, lens, nr, dem, cap, depot)
        want = oracle_child(c, dem, cap, depot, routes_of(EA, la, nra), routes_of(EB, lb, nrb), selA, selB,
                            keep_b, prio, W)
        assert got == want
        assert work > 0


@pytest.mark.parametrize("seed", range(10))
def test_srex_children_are_feasible_permutations(seed):
    """srex (the random selection around a customer) for every number of routes exchanged and both sides:
    each child holds every customer once, within capacity; crossed with itself a parent comes back."""
    rng = np.random.default_rng(100 + seed)
    n = 15 + 5 * seed
    c, dem, cap, depot = instance(100 + seed, n, per_route=2 + seed % 4)
    adj = cv.near_customers(c, depot, min(n - 2, 8), _Free())
    W = n + 1
    EA, la, nra = random_solution(rng, dem, cap, depot, n, W)
    EB, lb, nrb = random_solution(rng, dem, cap, depot, n, W)
    for nsel in range(1, 7):
        for keep_b in (False, True):
            E, lens = np.empty_like(EA), np.empty_like(la)
            nr, _ = pop.srex(c, dem, cap, depot, EA, la, nra, EB, lb, nrb, adj, nsel, keep_b, seed * 10 + nsel, E,
                             lens)
            check_child(E, lens, nr, dem, cap, depot)
            nr, _ = pop.srex(c, dem, cap, depot, EA, la, nra, EA, la, nra, adj, nsel, keep_b, nsel, E, lens)
            got = check_child(E, lens, nr, dem, cap, depot)
            assert sorted(got) == sorted(r for r in routes_of(EA, la, nra) if r)


def test_pop_applies_by_route_length(monkeypatch):
    """The population runs for at most VRP_POP_MAX_ROUTE customers a route, from VRP_POP_MIN_N customers on,
    and never with one member."""
    monkeypatch.setattr(pop, "VRP_POP_MAX_ROUTE", 8.0)
    monkeypatch.setattr(pop, "VRP_POP_SIZE", 4)
    monkeypatch.setattr(pop, "VRP_POP_MIN_N", 20)
    assert pop.pop_applies(80, 10) and not pop.pop_applies(81, 10) and not pop.pop_applies(5, 0)
    assert pop.pop_applies(20, 3) and not pop.pop_applies(19, 3)
    monkeypatch.setattr(pop, "VRP_POP_SIZE", 1)
    assert not pop.pop_applies(80, 10)


@pytest.mark.parametrize("seed", range(4))
def test_cvrp_through_the_population_is_valid_and_optimal_on_tiny_instances(monkeypatch, seed):
    """cvrp's CPU search with the population forced on (short generations so that several run): the answer
    is within capacity, costed right, and the enumerated optimum; generations ran."""
    monkeypatch.setattr(pop, "VRP_POP_MAX_ROUTE", 1e9)
    monkeypatch.setattr(pop, "VRP_POP_MIN_N", 1)
    monkeypatch.setattr(pop, "VRP_POP_STALL", 0.0)
    monkeypatch.setattr(pop, "VRP_POP_SIZE", 3)
    monkeypatch.setattr(pop, "VRP_POP_CHILD", 0.05)
    n = 6 + seed % 2
    c, dem, cap, depot = instance(400 + seed, n, per_route=2)
    res = cv.cvrp(c.astype(np.int64), dem.astype(np.int64), cap, depot=depot, time_limit=0.5, seed=seed,
                  device="cpu")
    assert sorted(int(v) for r in res.routes for v in r) == [v for v in range(n) if v != depot]
    assert all(dem[r].sum() <= cap for r in res.routes)
    assert res.cost == cv.vrp_cost(c.astype(np.int64), res.routes, depot)
    assert res.cost == exact(c.astype(np.int64), dem.astype(np.int64), cap, depot)
    assert res.stats["generations"] > 0 and res.stats["complete"]


def test_cvrp_population_on_a_larger_instance_is_feasible(monkeypatch):
    """40 customers, ~3 a route: the population's best is a feasible permutation costed right."""
    monkeypatch.setattr(pop, "VRP_POP_SIZE", 4)
    monkeypatch.setattr(pop, "VRP_POP_CHILD", 0.05)
    monkeypatch.setattr(pop, "VRP_POP_STALL", 0.0)
    c, dem, cap, depot = instance(7, 41, per_route=3)
    assert pop.pop_applies(40, 10)
    res = cv.cvrp(c.astype(np.int64), dem.astype(np.int64), cap, depot=depot, time_limit=0.4, seed=1,
                  device="cpu")
    assert sorted(int(v) for r in res.routes for v in r) == [v for v in range(41) if v != depot]
    assert all(dem[r].sum() <= cap for r in res.routes)
    assert res.cost == cv.vrp_cost(c.astype(np.int64), res.routes, depot)
    assert res.stats["generations"] > 0
    assert sisr.SISR_PEN == 0.0  # the members and children never go above capacity


@pytest.mark.parametrize("seed", range(3))
def test_cvrp_population_after_a_stall(monkeypatch, seed):
    """With VRP_POP_STALL > 0 one chain runs first and the population starts once it has found nothing new
    for that share of the time (on a tiny instance it finds the optimum early, then stalls): the stalled
    chain's best is a member, so the answer is still the enumerated optimum."""
    monkeypatch.setattr(pop, "VRP_POP_MAX_ROUTE", 1e9)
    monkeypatch.setattr(pop, "VRP_POP_MIN_N", 1)
    monkeypatch.setattr(pop, "VRP_POP_STALL", 0.1)
    monkeypatch.setattr(pop, "VRP_POP_SIZE", 4)
    monkeypatch.setattr(pop, "VRP_POP_CHILD", 0.05)
    n = 6
    c, dem, cap, depot = instance(500 + seed, n, per_route=2)
    res = cv.cvrp(c.astype(np.int64), dem.astype(np.int64), cap, depot=depot, time_limit=0.5, seed=seed,
                  device="cpu")
    assert res.stats["population_start"] > 0 and res.stats["generations"] > 0
    assert res.cost == cv.vrp_cost(c.astype(np.int64), res.routes, depot)
    assert res.cost == exact(c.astype(np.int64), dem.astype(np.int64), cap, depot)
