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


def steps(c, dem, cap, depot, st, adj, temp, iters, seed, near=0, pen=0.0):
    return sisr.sisr_steps(c, dem, cap, depot, st["E"], st["lens"], st["load"], st["rcost"], st["rt"], st["ps"],
                           st["st_"], st["cost"], st["bestE"], st["bestl"], adj, temp, iters, 1 << 40, seed,
                           sisr.SISR_CBAR, sisr.SISR_LMAX, sisr.SISR_BLINK, sisr.SISR_SPLIT, near, pen)


def routes_of(E, lens, nr):
    return [E[r, 1:lens[r] + 1].tolist() for r in range(nr)]


def check_state(c, dem, cap, depot, st, pen=0.0):
    """The oracle: everything recomputed from the routes (``pen``: the current solution's cost includes
    ``pen`` per unit of load above ``cap``; without it, no route above ``cap``). Returns whether the current
    solution is within capacity."""
    E, lens, nr = st["E"], st["lens"], int(st["st_"][0])
    n = c.shape[0]
    routes = routes_of(E, lens, nr)
    assert sorted(v for r in routes for v in r) == [v for v in range(n) if v != depot]
    over = sum(max(0.0, dem[r].sum() - cap) for r in routes)
    for r in range(nr):
        assert E[r, 0] == depot and E[r, lens[r] + 1] == depot
        assert pen > 0 or dem[routes[r]].sum() <= cap
        assert st["load"][r] == pytest.approx(dem[routes[r]].sum())
        assert st["rcost"][r] == pytest.approx(cv.vrp_cost(c, [routes[r]], depot))
        for t, v in enumerate(routes[r], start=1):
            assert st["rt"][v] == r and st["ps"][v] == t
    assert st["rt"][depot] == -1
    assert st["cost"][0] == pytest.approx(cv.vrp_cost(c, routes, depot) + pen * over)
    best = routes_of(st["bestE"], st["bestl"], int(st["st_"][1]))
    assert sorted(v for r in best for v in r) == [v for v in range(n) if v != depot]
    assert all(dem[r].sum() <= cap for r in best)
    assert st["cost"][1] == pytest.approx(cv.vrp_cost(c, best, depot))
    assert over > 0 or st["cost"][1] <= st["cost"][0] + 1e-9
    return over == 0


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("temp", [0.0, 5.0, 1e9])
@pytest.mark.parametrize("near, pen", [(0, 0.0), (3, 0.0), (0, 2.0), (4, 0.5)])
def test_state_equals_its_recomputation_after_every_step(seed, temp, near, pen):
    """temp 0: only improvements accepted (a rejected step must undo exactly); 1e9: every step accepted
    (routes emptied and opened); in between: both. ``near``: insertion into the routes of the nearest
    customers; ``pen``: routes above capacity allowed at this cost a unit (the best stays within)."""
    n = 8 + 4 * seed
    c, dem, cap, depot = instance(seed, n, asym=seed % 2 == 0)
    adj = cv.near_customers(c, depot, min(n - 2, 6), _Free())
    st = start(c, dem, cap, depot)
    check_state(c, dem, cap, depot, st, pen)
    seen, moved = [], []
    for k in range(60):
        before = routes_of(st["E"], st["lens"], int(st["st_"][0])), float(st["cost"][0])
        s, acc, imp, feas, work = steps(c, dem, cap, depot, st, adj, temp, 1, 1000 * seed + k, near, pen)
        assert s == 1 and work > 0
        within = check_state(c, dem, cap, depot, st, pen)
        assert feas == int(within)
        if not acc:
            assert routes_of(st["E"], st["lens"], int(st["st_"][0])) == before[0]
            assert st["cost"][0] == before[1]
        elif temp == 0.0:
            assert st["cost"][0] < before[1]
        moved.append(float(st["cost"][0]))
        if within:
            seen.append(float(st["cost"][0]))
    assert st["cost"][1] == pytest.approx(min(seen + [st["cost"][1]]))
    if temp == 1e9:
        assert len(set(moved)) > 1  # it moved


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("near, pen", [(0, 0.0), (2, 0.0), (0, 1000.0)])
def test_finds_the_optimum_of_tiny_instances(seed, near, pen):
    """SISR alone (no descent), cooling from a hot start: its best equals the enumerated optimum (also
    with insertion into the nearest customers' routes only, and with overloads allowed at a cost)."""
    n = 4 + seed % 4  # 3..6 customers
    c, dem, cap, depot = instance(100 + seed, n, asym=True)
    adj = cv.near_customers(c, depot, n - 2, _Free())
    st = start(c, dem, cap, depot)
    for k, temp in enumerate(np.geomspace(20.0, 0.01, 40)):
        steps(c, dem, cap, depot, st, adj, float(temp), 50, seed * 100 + k, near, pen)
    check_state(c, dem, cap, depot, st, pen)
    assert st["cost"][1] == exact(c.astype(np.int64), dem.astype(np.int64), cap, depot)


def test_budget_bounds_a_call():
    """A call stops at its work budget (checked before each step): a budget of 1 does one step."""
    c, dem, cap, depot = instance(3, 40)
    adj = cv.near_customers(c, depot, 10, _Free())
    st = start(c, dem, cap, depot)
    s, _, _, _, w = sisr.sisr_steps(c, dem, cap, depot, st["E"], st["lens"], st["load"], st["rcost"],
                                    st["rt"], st["ps"], st["st_"], st["cost"], st["bestE"], st["bestl"], adj,
                                    1.0, 1000, 1, 7, sisr.SISR_CBAR, sisr.SISR_LMAX, sisr.SISR_BLINK,
                                    sisr.SISR_SPLIT, sisr.SISR_NEAR, 0.0)
    assert s == 1 and w > 0


class _Free:
    def budget(self, kind=None):
        return 1 << 40

    def spent(self, w):
        pass


def test_overload_penalty_and_its_adaptation():
    """The start's penalty is SISR_PEN * mean arc / mean customer demand (0: none); it grows while fewer
    than SISR_FEASIBLE of the steps end within capacity and shrinks otherwise; 0 stays 0."""
    dem = np.array([0.0, 2.0, 4.0, 6.0])
    old = sisr.SISR_PEN
    try:
        sisr.SISR_PEN = 0.0
        assert sisr.overload_penalty(10.0, dem, 0) == 0.0
        sisr.SISR_PEN = 2.0
        assert sisr.overload_penalty(10.0, dem, 0) == pytest.approx(2.0 * 10.0 / 4.0)
        assert sisr.overload_penalty(10.0, np.zeros(4), 0) == 0.0
    finally:
        sisr.SISR_PEN = old
    low = int(sisr.SISR_FEASIBLE * 100) - 1
    assert sisr.adapt_penalty(5.0, low, 100) == pytest.approx(5.0 * sisr.SISR_PEN_STEP)
    assert sisr.adapt_penalty(5.0, 100, 100) == pytest.approx(5.0 / sisr.SISR_PEN_STEP)
    assert sisr.adapt_penalty(0.0, 0, 100) == 0.0
    assert sisr.adapt_penalty(5.0, 0, 0) == 5.0


@pytest.mark.parametrize("seed", range(4))
def test_cvrp_with_overloads_and_near_routes_is_within_capacity_and_optimal(monkeypatch, seed):
    """cvrp's CPU search with overloaded routes allowed and insertion into near routes only: its answer
    is within capacity, costed right, and the enumerated optimum on tiny instances."""
    monkeypatch.setattr(sisr, "SISR_PEN", 1.0)
    monkeypatch.setattr(sisr, "SISR_NEAR", 2)
    n = 5 + seed % 3
    c, dem, cap, depot = instance(300 + seed, n, asym=True)
    res = cv.cvrp(c.astype(np.int64), dem.astype(np.int64), cap, depot=depot, time_limit=0.3, seed=seed,
                  device="cpu")
    assert sorted(int(v) for r in res.routes for v in r) == [v for v in range(n) if v != depot]
    assert all(dem[r].sum() <= cap for r in res.routes)
    assert res.cost == cv.vrp_cost(c.astype(np.int64), res.routes, depot)
    assert res.cost == exact(c.astype(np.int64), dem.astype(np.int64), cap, depot)


def test_temperature_unit_against_its_definition(monkeypatch):
    """SISR_TSCALE 0: cost / arcs; 1: the mean cost over ordered pairs of distinct customers (the depot's
    row and column left out), recomputed by a loop; times SISR_LONG_HEAT from SISR_LONG_ROUTE customers a
    route on (8 customers: 2 routes of 4, 1 route of 8); anything else refused naming the value."""
    c, dem, cap, depot = instance(5, 9, asym=True)
    monkeypatch.setattr(sisr, "SISR_LONG_ROUTE", 8.0)
    monkeypatch.setattr(sisr, "SISR_LONG_HEAT", 3.0)
    monkeypatch.setattr(sisr, "SISR_TSCALE", 0)
    assert sisr.temperature_unit(c, depot, 120.0, 10, 2) == 12.0
    assert sisr.temperature_unit(c, depot, 120.0, 9, 1) == pytest.approx(3.0 * 120.0 / 9)
    monkeypatch.setattr(sisr, "SISR_TSCALE", 1)
    cu = [v for v in range(9) if v != depot]
    pairs = [c[u, v] for u in cu for v in cu if u != v]
    assert sisr.temperature_unit(c, depot, 120.0, 10, 2) == pytest.approx(sum(pairs) / len(pairs))
    assert sisr.temperature_unit(c, depot, 120.0, 9, 1) == pytest.approx(3.0 * sum(pairs) / len(pairs))
    monkeypatch.setattr(sisr, "SISR_TSCALE", 2)
    with pytest.raises(ValueError, match="SISR_TSCALE must be 0 or 1, got 2"):
        sisr.temperature_unit(c, depot, 120.0, 10, 2)
