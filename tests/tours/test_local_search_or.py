"""The Or-opt search of symmetric matrices (issue 23: TSP <= 1 % at 1 s): the LK-style depth-3 move
``or_step``, its don't-look-bit descent, the segment kick and the ILS that undoes a rejected step from its
reversal log. Oracles: the tour's cost recomputed from the matrix (every reported gain or delta equals the
change of the tour's length), a brute-force scan of all 2-opt moves, the TSPLIB optimum of pr1002."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from gpuroute import config
from gpuroute.tours import budget, tour_cost, tsp, tsplib
from gpuroute.tours import local_search as ls

TSP_DIR = Path(__file__).resolve().parents[1] / "data" / "vrp"


def euclid(n, seed, integral=False):
    rng = np.random.default_rng(seed)
    xy = rng.random((n, 2)) * 1000
    c = np.hypot(*(xy[:, None] - xy[None]).transpose(2, 0, 1))
    return np.rint(c) if integral else c


def state(n, seed):
    tour = np.random.default_rng(seed).permutation(n).astype(np.int64)
    pos = np.empty(n, np.int64)
    pos[tour] = np.arange(n)
    return tour, pos


def check_state(tour, pos):
    n = tour.size
    assert sorted(tour.tolist()) == list(range(n))
    assert (pos[tour] == np.arange(n)).all()


def arcs(t):
    """The undirected arcs of the closed tour ``t``."""
    return {frozenset((int(t[i]), int(t[(i + 1) % t.size]))) for i in range(t.size)}


def log_state():
    return np.empty((ls.OR_LOG_CAP, 2), np.int64), np.zeros(1, np.int64)


@pytest.mark.parametrize("seed", range(6))
def test_or_step_gain_is_the_cost_change(seed):
    """Every or_step, from every stop of random tours: the gain it
    reports is the tour's cost before less after (0.0 with the tour exactly as it was), the tour stays a
    permutation with its position index, and the touched stops include every stop whose arcs changed;
    moves of 1 to 4 reversals occur."""
    rng = np.random.default_rng(seed)
    levels = set()
    for trial in range(15):
        n = int(rng.integers(8, 60))
        c = euclid(n, 1000 * seed + trial, integral=bool(trial % 2))
        nbr = ls.candidate_lists(c, min(8, n - 1))
        tour, pos = state(n, trial)
        log, lgs = log_state()
        scratch, tch = np.empty((3 * ls.OR_DEPTH, 5)), np.empty(2 * ls.OR_DEPTH + 2, np.int64)
        for t1 in rng.permutation(n):
            before = tour.copy()
            cost0 = ls.tour_cost(c, tour)
            lgs[0] = 0
            g, m, _ = ls.or_step(c, tour, pos, nbr, int(t1), 1e-9, log, lgs, scratch, tch)
            check_state(tour, pos)
            assert cost0 - ls.tour_cost(c, tour) == pytest.approx(g, abs=1e-7)
            if g == 0.0:
                assert m == 0 and (tour == before).all() and lgs[0] == 0
                continue
            assert g > 0 and m % 2 == 0 and 4 <= m <= 2 * ls.OR_DEPTH + 2 and lgs[0] == m // 2 - 1
            levels.add(m)
            changed = set().union(*(arcs(before) ^ arcs(tour)))
            assert changed <= set(tch[:m].tolist())
    assert {4, 6, 8, 10} <= levels


def test_or_descent_ends_2_opt_optimal_and_reports_its_gain():
    """With full candidate lists, the descent's local minimum has no improving 2-opt move (brute force over
    every pair of arcs), and its summed gain is the cost change."""
    n = 70
    c = euclid(n, 7)
    nbr = ls.candidate_lists(c, n - 1)
    tour, pos = state(n, 7)
    cost0 = ls.tour_cost(c, tour)
    queue, inq, qs = tour.copy(), np.ones(n, np.bool_), np.array([0, n, 0], np.int64)
    log, lgs = log_state()
    st, gain, work = ls.or_descent(c, tour, pos, nbr, 1e-9, queue, inq, qs, log, lgs, False, 1 << 60)
    assert st == 0 and qs[1] == 0 and qs[2] > 0 and work > 0
    check_state(tour, pos)
    assert cost0 - ls.tour_cost(c, tour) == pytest.approx(gain, rel=1e-12)
    for i in range(n):
        for j in range(i + 2, n if i > 0 else n - 1):
            a, b, e, d = tour[i], tour[i + 1], tour[j], tour[(j + 1) % n]
            assert c[a, e] + c[b, d] - c[a, b] - c[e, d] >= -1e-9, (i, j)


def test_segment_kick_delta_and_undo():
    """The kick's delta is the cost change; replaying its log backwards restores the tour exactly."""
    for trial in range(40):
        n = 30 + trial
        c = euclid(n, trial)
        tour, pos = state(n, trial)
        orig = tour.copy()
        log, lgs = log_state()
        tch = np.empty(8, np.int64)
        cost0 = ls.tour_cost(c, tour)
        delta, work = ls.segment_kick(c, tour, pos, 6, log, lgs, tch)
        check_state(tour, pos)
        assert ls.tour_cost(c, tour) - cost0 == pytest.approx(delta, abs=1e-9) and lgs[0] == 3 and work > 0
        assert not (tour == orig).all()
        while lgs[0] > 0:
            lgs[0] -= 1
            ls.reverse_positions(tour, pos, log[lgs[0], 0], log[lgs[0], 1])
        assert (tour == orig).all()


@pytest.mark.parametrize("budget_units", [1, 300, 20_000, 400_000])
def test_or_ils_keeps_its_cost_and_budget(budget_units):
    """or_ils: the cost it returns is the tour's, never above the start; its work stays within the
    budget plus one step and that step's undo (the bound the time limit rests on)."""
    n, K, seg = 200, 8, 10
    c = euclid(n, 11, integral=True)
    nbr = ls.candidate_lists(c, K)
    tour, pos = state(n, 11)
    queue, inq, qs = tour.copy(), np.ones(n, np.bool_), np.array([0, n, 0], np.int64)
    log, lgs = log_state()
    ls.or_descent(c, tour, pos, nbr, 0.5, queue, inq, qs, log, lgs, False, 1 << 60)
    cost0 = ls.tour_cost(c, tour)
    cost, steps, acc, moves, work = ls.or_ils(c, tour, pos, cost0, nbr, 0.5, seg, 3, budget_units)
    check_state(tour, pos)
    assert cost == ls.tour_cost(c, tour) and cost <= cost0 and steps >= 1
    tries = 5 * 3 * (ls.OR_DEPTH - 1)  # tentative moves of one or_step, at most
    step = tries * (K + n // 2 + 1) + 3 * 2 * seg + 6  # candidates and reversals of one or_step, one kick
    assert work <= budget_units + 2 * step
    if budget_units >= 400_000:
        assert acc > 0 and cost < cost0


def test_symmetric_rows_finds_any_asymmetric_pair():
    n = 75  # three tiles of 32 rows, the last partial
    c = euclid(n, 3)
    assert ls.symmetric_rows(c, 0, n) == (True, n * n)
    rng = np.random.default_rng(0)
    for _ in range(30):
        u, v = rng.choice(n, 2, replace=False)
        d = c.copy()
        d[u, v] += 1.0
        ok = all(ls.symmetric_rows(d, lo, min(n, lo + 20))[0] for lo in range(0, n, 20))
        assert not ok


def test_tsp_picks_or_opt_for_symmetric_matrices_only():
    c = euclid(300, 4, integral=True)
    r = tsp(c, time_limit=0.2, seed=0, device="cpu")
    assert r.stats["neighbourhood"] == "or-opt:10" and r.stats["ils_iterations"] > 0
    assert sorted(r.tour.tolist()) == list(range(300)) and r.cost == tour_cost(c, r.tour)
    a = c.copy()
    a[5, 9] += 1
    assert tsp(a, time_limit=0.1, seed=0, device="cpu").stats["neighbourhood"] == "candidates:10"
    # an open path reduces to an asymmetric closed tour: the 2-opt / Or-opt search
    assert tsp(c, start=0, time_limit=0.1, seed=0, device="cpu").stats["neighbourhood"] == "candidates:10"


def test_or_opt_tsp_reaches_one_per_cent_on_pr1002(monkeypatch):
    """pr1002 (optimum 259045) within 1 % under a fake clock (5 ms a reading: the same work on a loaded CI
    machine as on a quiet one) and 0.5 s; two chains, whatever the machine's thread count."""
    inst = tsplib.read_tsplib(TSP_DIR / "pr1002.vrp")
    t = [100.0]

    def fake_clock():
        t[0] += 0.005
        return t[0]

    monkeypatch.setattr(budget, "clock", fake_clock)
    monkeypatch.setattr(config, "TOUR_CPU_CHAINS", 2)
    r = tsp(inst.costs, time_limit=0.5, seed=0, device="cpu")
    assert r.stats["neighbourhood"] == "or-opt:10" and r.stats["chains"] == 2 and r.stats["complete"]
    assert sorted(r.tour.tolist()) == list(range(1002)) and r.cost == tour_cost(inst.costs, r.tour)
    assert r.cost <= 1.01 * inst.best_cost, r.cost / inst.best_cost


@pytest.mark.parametrize("chains", [1, 2])
def test_or_opt_tsp_checks_its_deadline_between_bounded_work(chains, monkeypatch):
    """The Or-opt search under the fake clock of test_time_limits (a tick a reading, the work of every
    compiled step logged): bounded work between two readings, none after the deadline, the time used;
    one chain (no parallel region) and two."""
    spec = importlib.util.spec_from_file_location("_time_limits", Path(__file__).with_name("test_time_limits.py"))
    tl = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tl)
    cap = 20_000
    monkeypatch.setattr(config, "TOUR_CHECK_WORK", cap)
    monkeypatch.setattr(config, "TOUR_CPU_CHAINS", chains)
    events = []
    tl.instrument(monkeypatch, events, "tsp")
    n, limit = 400, 0.3
    c = euclid(n, 9, integral=True)
    r = tsp(c, time_limit=limit, seed=0, device="cpu")
    assert sorted(r.tour.tolist()) == list(range(n)) and r.cost == tour_cost(c, r.tour)
    assert r.stats["neighbourhood"] == "or-opt:10" and r.stats["chains"] == chains
    assert r.stats["complete"] and r.stats["rounds"] > 0
    t0 = next(e[1] for e in events if e[0] == "clock")
    names = {e[1] for e in events if e[0] == "work"}
    assert {"symmetric_rows", "or_descent", "or_ils" if chains == 1 else "or_ils_chains"} <= names
    step = 2 * (5 * 3 * ls.OR_DEPTH * (10 + n // 2 + 1) + 6 * 30)  # one or_step and one kick, and their undo
    assert tl.check_events(events, t0 + limit + r.stats["warmup_seconds"], cap + step) > 0


def test_auto_sends_a_symmetric_matrix_to_the_cpu_or_opt_search(monkeypatch):
    """device="auto" where it would pick the GPU (a usable GPU faked, TOUR_GPU_AUTO_MIN_N lowered): a
    symmetric matrix runs the CPU's Or-opt search and never warms the GPU up; an asymmetric one still goes
    to the GPU search."""
    from gpuroute.tours import api, gpu
    from gpuroute.tours import warmup as wu

    calls = []
    real = wu.warm_up_tsp
    monkeypatch.setattr(api, "resolve_device", lambda device, gpu_implemented=True: "gpu" if gpu_implemented else "cpu")
    monkeypatch.setattr(config, "TOUR_GPU_AUTO_MIN_N", 200)
    monkeypatch.setattr(wu, "warm_up_tsp", lambda dev="cpu", device_matrix=None: calls.append(dev) or real("cpu"))

    class GPUSearch(Exception):
        pass

    def fake_search(*args, **kwargs):
        raise GPUSearch

    monkeypatch.setattr(gpu, "search", fake_search)
    c = euclid(300, 5, integral=True)
    r = tsp(c, time_limit=0.1, seed=0)
    assert r.device == "cpu" and r.stats["neighbourhood"] == "or-opt:10" and "gpu" not in calls
    assert r.cost == tour_cost(c, r.tour)
    a = c.copy()
    a[3, 7] += 1
    with pytest.raises(GPUSearch):
        tsp(a, time_limit=0.1, seed=0)
    assert calls[-1] == "gpu"
    with pytest.raises(GPUSearch):  # asked for: the GPU whatever the matrix
        tsp(c, time_limit=0.1, seed=0, device="gpu")
