"""The CPU CVRP search by string removals (gpuroute.tours.vrp_sisr): after every step the state (routes,
loads, route costs, positions, the current and best cost) equals its recomputation from the routes, a
rejected step leaves the solution exactly as it was, and on tiny instances the best solution found is the
optimum found by enumeration."""
from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from gpuroute.tours import vrp_sisr as sisr

cv = importlib.import_module("gpuroute.tours.cvrp")
_spec = importlib.util.spec_from_file_location("_sisr_test_cvrp", Path(__file__).with_name("test_cvrp.py"))
_tc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_tc)
exact = _tc.exact  # the optimum by enumeration (test_cvrp's oracle)


def instance(seed, n, asym=True):
    rng = np.random.default_rng(seed)
    xy = rng.random((n, 2)) * 100
    c = np.hypot(*(xy[:, None] - xy[None]).transpose(2, 0, 1))
    if asym:
        c = c + rng.random((n, n)) * 5
    c = np.rint(c)
    np.fill_diagonal(c, 0.0)
    depot = int(rng.integers(0, n))
    dem = rng.integers(1, 10, n).astype(np.float64)
    dem[depot] = 0.0
    cap = float(max(dem.max(), dem.sum() // int(rng.integers(2, 6))))
    return c, dem, cap, depot


def start(c, dem, cap, depot):
    """One customer a route (the state sisr_steps takes), its arrays filled by sisr_init."""
    n = c.shape[0]
    cust = [v for v in range(n) if v != depot]
    E, lens, nr = cv.pack_routes([[v] for v in cust], depot, n, n + 1)
    R = E.shape[0]
    st = dict(E=E, lens=lens, load=np.empty(R), rcost=np.empty(R), rt=np.empty(n, np.int64),
              ps=np.empty(n, np.int64))
    cur = sisr.sisr_init(c, dem, E, lens, nr, st["load"], st["rcost"], st["rt"], st["ps"])
    st.update(st_=np.array([nr, nr], np.int64), cost=np.array([cur, cur]), bestE=E.copy(), bestl=lens.copy())
    return st


def steps(c, dem, cap, depot, st, adj, temp, iters, seed):
    return sisr.sisr_steps(c, dem, cap, depot, st["E"], st["lens"], st["load"], st["rcost"], st["rt"], st["ps"],
                           st["st_"], st["cost"], st["bestE"], st["bestl"], adj, temp, iters, 1 << 40, seed,
                           sisr.SISR_CBAR, sisr.SISR_LMAX, sisr.SISR_BLINK, sisr.SISR_SPLIT)


def routes_of(E, lens, nr):
    return [E[r, 1:lens[r] + 1].tolist() for r in range(nr)]


def check_state(c, dem, cap, depot, st):
    """The oracle: everything recomputed from the routes."""
    E, lens, nr = st["E"], st["lens"], int(st["st_"][0])
    n = c.shape[0]
    routes = routes_of(E, lens, nr)
    assert sorted(v for r in routes for v in r) == [v for v in range(n) if v != depot]
    for r in range(nr):
        assert E[r, 0] == depot and E[r, lens[r] + 1] == depot
        assert dem[routes[r]].sum() <= cap
        assert st["load"][r] == pytest.approx(dem[routes[r]].sum())
        assert st["rcost"][r] == pytest.approx(cv.vrp_cost(c, [routes[r]], depot))
        for t, v in enumerate(routes[r], start=1):
            assert st["rt"][v] == r and st["ps"][v] == t
    assert st["rt"][depot] == -1
    assert st["cost"][0] == pytest.approx(cv.vrp_cost(c, routes, depot))
    best = routes_of(st["bestE"], st["bestl"], int(st["st_"][1]))
    assert sorted(v for r in best for v in r) == [v for v in range(n) if v != depot]
    assert all(dem[r].sum() <= cap for r in best)
    assert st["cost"][1] == pytest.approx(cv.vrp_cost(c, best, depot))
    assert st["cost"][1] <= st["cost"][0] + 1e-9


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("temp", [0.0, 5.0, 1e9])
def test_state_equals_its_recomputation_after_every_step(seed, temp):
    """temp 0: only improvements accepted (a rejected step must undo exactly); 1e9: every step accepted
    (routes emptied and opened); in between: both."""
    n = 8 + 4 * seed
    c, dem, cap, depot = instance(seed, n, asym=seed % 2 == 0)
    adj = cv.near_customers(c, depot, min(n - 2, 6), _Free())
    st = start(c, dem, cap, depot)
    check_state(c, dem, cap, depot, st)
    seen = []
    for k in range(60):
        before = routes_of(st["E"], st["lens"], int(st["st_"][0])), float(st["cost"][0])
        s, acc, imp, work = steps(c, dem, cap, depot, st, adj, temp, 1, 1000 * seed + k)
        assert s == 1 and work > 0
        check_state(c, dem, cap, depot, st)
        if not acc:
            assert routes_of(st["E"], st["lens"], int(st["st_"][0])) == before[0]
            assert st["cost"][0] == before[1]
        elif temp == 0.0:
            assert st["cost"][0] < before[1]
        seen.append(float(st["cost"][0]))
    assert st["cost"][1] == pytest.approx(min(seen + [st["cost"][1]]))
    if temp == 1e9:
        assert len(set(seen)) > 1  # it moved


@pytest.mark.parametrize("seed", range(8))
def test_finds_the_optimum_of_tiny_instances(seed):
    """SISR alone (no descent), cooling from a hot start: its best equals the enumerated optimum."""
    n = 4 + seed % 4  # 3..6 customers
    c, dem, cap, depot = instance(100 + seed, n, asym=True)
    adj = cv.near_customers(c, depot, n - 2, _Free())
    st = start(c, dem, cap, depot)
    for k, temp in enumerate(np.geomspace(20.0, 0.01, 40)):
        steps(c, dem, cap, depot, st, adj, float(temp), 50, seed * 100 + k)
    check_state(c, dem, cap, depot, st)
    assert st["cost"][1] == exact(c.astype(np.int64), dem.astype(np.int64), cap, depot)


def test_budget_bounds_a_call():
    """A call stops at its work budget (checked before each step): a budget of 1 does one step."""
    c, dem, cap, depot = instance(3, 40)
    adj = cv.near_customers(c, depot, 10, _Free())
    st = start(c, dem, cap, depot)
    s, _, _, w = sisr.sisr_steps(c, dem, cap, depot, st["E"], st["lens"], st["load"], st["rcost"], st["rt"],
                                 st["ps"], st["st_"], st["cost"], st["bestE"], st["bestl"], adj, 1.0, 1000, 1, 7,
                                 sisr.SISR_CBAR, sisr.SISR_LMAX, sisr.SISR_BLINK, sisr.SISR_SPLIT)
    assert s == 1 and w > 0


class _Free:
    def budget(self, kind=None):
        return 1 << 40

    def spent(self, w):
        pass
