"""Time limits of tsp and cvrp (issue 23, item 1), checked with counters, not clocks.

A fake clock (gpuroute.tours.budget.clock) advances one tick per reading; the compiled steps of the
searches are wrapped to log the work units they report. The searches must read the clock between steps
of bounded work (at most TOUR_CHECK_WORK plus one indivisible step), do no work after a reading past the
deadline, and use the time they were given. The GPU searches' host loops are checked the same way with
fake device objects (each launch "runs" for its device-clock budget): every launch gets at most the time
left, and none starts after the deadline. The first-call compilation stays outside the budget: after
warm_up(), a search compiles nothing (checked in a fresh process)."""
from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from numba import njit

from gpuroute import config
from gpuroute.tours import budget, cvrp, gpu, tsp, warm_up
from gpuroute.tours import local_search as ls

cv = importlib.import_module("gpuroute.tours.cvrp")
vg = importlib.import_module("gpuroute.tours.vrp_gpu")
sisr = importlib.import_module("gpuroute.tours.vrp_sisr")
pop = importlib.import_module("gpuroute.tours.vrp_pop")

TICK = 1e-3


class FakeClock:
    """Advances TICK a reading (and by a fake launch's device time); logs readings into ``events``."""

    def __init__(self, events):
        self.t = 100.0
        self.events = events

    def __call__(self):
        self.t += TICK
        self.events.append(("clock", self.t))
        return self.t


def wrap(monkeypatch, mod, name, events, work_of):
    real = getattr(mod, name)

    def wrapped(*args):
        out = real(*args)
        events.append(("work", name, int(work_of(out))))
        return out

    monkeypatch.setattr(mod, name, wrapped)


def last(out):
    return out[-1]


def ident(out):
    return out


def instrument(monkeypatch, events, family):
    if family == "tsp":
        for name, w in (("candidate_rows", ident), ("nearest_neighbour_steps", last), ("full_descent", last),
                        ("queue_descent", last), ("ils_round", last), ("symmetric_rows", last),
                        ("or_descent", last), ("or_ils_chains", ident), ("or_ils", last)):
            wrap(monkeypatch, ls, name, events, w)
    else:
        wrap(monkeypatch, ls, "candidate_rows", events, ident)
        for name, w in (("savings_sort_rows", ident), ("savings_merge_steps", ident), ("vrp_descent", last),
                        ("vrp_round", last)):
            wrap(monkeypatch, cv, name, events, w)
        wrap(monkeypatch, sisr, "sisr_steps", events, last)
        wrap(monkeypatch, sisr, "sisr_chains", events, ident)  # the most work of a chain (one a thread)
        wrap(monkeypatch, pop, "srex", events, last)
    clk = FakeClock(events)
    monkeypatch.setattr(budget, "clock", clk)
    return clk


def check_events(events, end, bound):
    """Work between two clock readings <= bound; none after the first reading past ``end``; the search
    read the clock until the deadline (it used its time). Returns the largest work between readings."""
    worst = 0
    acc = 0
    past = False
    reads = [t for e, *rest in events if e == "clock" for t in rest]
    for e in events:
        if e[0] == "clock":
            worst = max(worst, acc)
            acc = 0
            past = past or e[1] >= end
        else:
            assert not past, f"{e[1]} did work after the deadline had been read"
            acc += e[2]
    worst = max(worst, acc)
    assert worst <= bound, (worst, bound)
    assert reads and reads[-1] >= end - 3 * TICK, "stopped before its time"
    return worst


@pytest.fixture(autouse=True)
def _warm():
    warm_up("cpu")  # compile with the real clock (outside the fake one)


@pytest.mark.parametrize("n,limit", [(300, 0.3), (300, 0.004), (60, 0.2), (6, 0.05)])
def test_tsp_checks_its_deadline_between_bounded_work(n, limit, monkeypatch):
    """n = 300: candidate lists, nearest neighbour, queue descent with polish and ILS rounds; 0.004 s (4
    readings) stops inside the construction and still returns a tour; n = 60: the full neighbourhood
    (descents and the final polish); n = 6: restarts."""
    cap = 20_000
    monkeypatch.setattr(config, "TOUR_CHECK_WORK", cap)
    events = []
    instrument(monkeypatch, events, "tsp")
    rng = np.random.default_rng(n)
    xy = rng.random((n, 2)) * 1000
    c = np.rint(np.hypot(*(xy[:, None] - xy[None]).transpose(2, 0, 1))).astype(np.int64)
    r = tsp(c, time_limit=limit, seed=0, device="cpu")
    assert sorted(r.tour.tolist()) == list(range(n))
    assert r.cost == tsp.__globals__["tour_cost"](c, r.tour)
    t0 = next(e[1] for e in events if e[0] == "clock")
    end = t0 + limit + r.stats["warmup_seconds"]
    K = n - 1 if n <= 150 else 10
    step = ls.full_work(n) if n <= 150 else 23 * K * n + 3 * n  # one evaluation (scan) and one move
    worst = check_events(events, end, cap + step)
    assert worst > 0
    if limit > 0.1:
        assert r.stats["complete"] and r.stats["ils_iterations"] > 0


def test_tsp_cut_short_returns_a_valid_path(monkeypatch):
    """A deadline inside the nearest-neighbour start of an open path: the stops not yet placed follow in
    index order and the end stays last."""
    monkeypatch.setattr(config, "TOUR_CHECK_WORK", 500)
    events = []
    instrument(monkeypatch, events, "tsp")
    c = np.random.default_rng(1).integers(1, 1000, (400, 400))
    r = tsp(c, start=5, end=9, time_limit=0.002, device="cpu")
    assert r.tour[0] == 5 and r.tour[-1] == 9 and sorted(r.tour.tolist()) == list(range(400))
    assert not r.stats["complete"] and r.stats["starts"] == 0


def _euclid(n, seed, asymmetric=False):
    rng = np.random.default_rng(seed)
    xy = rng.random((n, 2)) * 1000
    c = np.rint(np.hypot(*(xy[:, None] - xy[None]).transpose(2, 0, 1))).astype(np.int64)
    if asymmetric:
        c = c + rng.integers(0, 30, (n, n))
    return c


@pytest.mark.parametrize("n,asym,stall", [(25, True, 40), (200, True, 60), (300, False, 50), (6, True, 7)])
def test_tsp_stops_once_stall_kicks_bring_no_improvement(n, asym, stall, monkeypatch):
    """``stall`` (issue 20: a 25-stop /trip used its whole budget after its search had stalled): counted, not
    clocked (the fake clock above: a tick a reading, 10^4 ticks of budget). The search stops long before its
    deadline; between two readings its work stays bounded, none after the deadline. Full and candidate
    neighbourhoods (25, 200 asymmetric stops): exactly ``stall`` ILS kicks (the steps ``ils_round`` reports)
    follow the last call that improved the best tour, and the best tour is the best any call returned; the
    Or-opt search (300 symmetric) stops after a round of kicks without improvement, of at least ``stall``
    kicks; restarts (6 stops) likewise. Without ``stall`` the same search runs to its deadline."""
    cap = 20_000
    monkeypatch.setattr(config, "TOUR_CHECK_WORK", cap)
    c = _euclid(n, n, asym)
    limit = 10.0  # 10^4 readings: never reached here
    calls = []
    real = ls.ils_round

    def spy(*args):
        out = real(*args)
        calls.append((args[2], out[1], out[4]))  # the cost it started from, the cost it returned, its steps
        return out

    events = []
    instrument(monkeypatch, events, "tsp")
    monkeypatch.setattr(ls, "ils_round", spy)
    r = tsp(c, time_limit=limit, seed=1, device="cpu", stall=stall)
    assert sorted(r.tour.tolist()) == list(range(n))
    assert r.stats["stalled"] and r.stats["complete"]
    t0 = next(e[1] for e in events if e[0] == "clock")
    reads = [e[1] for e in events if e[0] == "clock"]
    assert reads[-1] < t0 + limit / 10  # stopped early
    worst = acc = 0
    for e in events:
        if e[0] == "clock":
            worst, acc = max(worst, acc), 0
        elif e[1] in ("full_descent", "queue_descent", "ils_round", "candidate_rows", "or_descent", "or_ils",
                      "or_ils_chains", "nearest_neighbour_steps", "symmetric_rows"):
            acc += e[2]
    K = n - 1 if n <= 150 else 10
    assert max(worst, acc) <= cap + (ls.full_work(n) if n <= 150 else 23 * K * n + 3 * n)
    if n >= 8 and n <= 150 or (n > 150 and asym):
        assert calls
        best = calls[0][0]
        last_better = -1
        for i, (c0, c1, _) in enumerate(calls):
            assert c0 == best  # every call starts from the best tour so far
            if c1 < best - 0.5:
                last_better, best = i, c1
        assert sum(s for _, _, s in calls[last_better + 1:]) == stall
        assert r.cost == pytest.approx(tsp.__globals__["tour_cost"](c, r.tour))
        assert r.cost <= best + 0.5
    else:
        assert r.stats["ils_iterations"] >= stall
    # the same search without ``stall`` uses its time (a shorter limit: the fake clock's reads)
    events.clear()
    r2 = tsp(c, time_limit=0.3, seed=1, device="cpu")
    assert not r2.stats["stalled"]
    t0 = next(e[1] for e in events if e[0] == "clock")
    assert [e[1] for e in events if e[0] == "clock"][-1] >= t0 + 0.3 - 3 * TICK


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "10"])
def test_stall_must_be_a_positive_integer(bad):
    with pytest.raises(ValueError, match="stall"):
        tsp(_euclid(10, 0), time_limit=0.05, device="cpu", stall=bad)


def test_stall_is_refused_by_the_gpu_search(monkeypatch):
    """No option accepted and ignored: the GPU's chains have no stall bound, so a search that would run there
    refuses it (the trip service passes none when its tour runs on the GPU)."""
    api = importlib.import_module("gpuroute.tours.api")
    monkeypatch.setattr(api, "resolve_device", lambda *a, **k: "gpu")
    with pytest.raises(ValueError, match="stall is not implemented by the GPU"):
        tsp(_euclid(20, 0, True), time_limit=0.05, device="gpu", stall=50)


@pytest.mark.parametrize("n,limit", [(120, 0.3), (60, 0.003)])
def test_cvrp_checks_its_deadline_between_bounded_work(n, limit, monkeypatch):
    cap_work = 20_000
    monkeypatch.setattr(config, "TOUR_CHECK_WORK", cap_work)
    monkeypatch.setattr(pop, "VRP_POP_SIZE", 4)
    monkeypatch.setattr(pop, "VRP_POP_STALL", 0.0)  # ~8 customers a route: vrp_pop's population from the start
    events = []
    instrument(monkeypatch, events, "cvrp")
    rng = np.random.default_rng(n)
    xy = rng.random((n, 2)) * 1000
    c = np.rint(np.hypot(*(xy[:, None] - xy[None]).transpose(2, 0, 1))).astype(np.int64)
    dem = rng.integers(1, 10, n)
    dem[0] = 0
    r = cvrp(c, dem, 40, time_limit=limit, seed=0, device="cpu")
    flat = np.sort(np.concatenate(r.routes))
    assert flat.tolist() == list(range(1, n)) and all(dem[x].sum() <= 40 for x in r.routes)
    t0 = next(e[1] for e in events if e[0] == "clock")
    end = t0 + limit + r.stats["warmup_seconds"]
    N = n - 1
    step = cv.vrp_eval_work(N, N + 1) + 4 * N * 40  # one evaluation, a ruin of <= 40 customers, a savings row
    check_events(events, end, cap_work + step)
    if limit > 0.1:
        assert r.stats["complete"] and r.stats["iterations"] > 0
        assert r.stats["generations"] > 0  # the population's crossovers ran


@njit
def _first_order(near, depot, n, max_remove, out, seed):
    np.random.seed(seed)
    return cv.ruin_order(near, depot, n, max_remove, out)


def test_a_pending_ruin_step_resumes_across_calls():
    """vrp_round with a budget of one evaluation a call: a step is kept pending and finished over
    several calls (before, a step longer than a call's budget was abandoned every time and the search
    stalled); the steps equal the CPU replay (vrp_steps) of the ruin lists they drew."""
    rng = np.random.default_rng(3)
    n = 40
    c = rng.integers(1, 100, (n, n)).astype(np.float64)
    np.fill_diagonal(c, 0.0)
    dem = np.r_[0.0, rng.integers(1, 5, n - 1).astype(np.float64)]
    near = cv.near_customers(c, 0, 10, _Free())
    E, lens, nr = cv.pack_routes(cv.savings(c, dem, 20.0, 0, near), 0, n, n + 1)
    R, W = E.shape
    bufs = np.empty(R), np.empty((R, W)), np.empty((R, W)), np.empty((R, W))
    _, nr, cost, _, _ = cv.vrp_descent(c, dem, 20.0, E, lens, nr, 0, *bufs, 0.5, 10_000, 1 << 40)
    qE, ql, qst = np.empty_like(E), np.empty_like(lens), np.zeros(3, np.int64)
    cur = (E, lens, nr, cost)
    orders = []
    steps = calls = 0
    while steps < 30:
        seed = 100 + calls
        if qst[0] == 0:  # this call starts a step: its list is the first draw after the seed
            out = np.empty(6, np.int64)
            _first_order(near, 0, n, 6, out, seed)
            orders.append(out)
        res = cv.vrp_round(c, dem, 20.0, *cur[:3], 0, cur[3], near, 6, 0.5, 10_000, 1, seed, 1, qE, ql, qst)
        cur = res[:4]
        steps += res[6]
        calls += 1
    assert calls > 2 * steps  # the steps spanned several calls each
    want = cv.vrp_steps(c, dem, 20.0, E, lens, nr, 0, cost, np.array(orders), 0.5, 10_000)
    assert cur[3] == want[3] and cur[2] == want[2]
    assert np.array_equal(cur[0][:cur[2]], want[0][:want[2]])
    assert want[3] < cost  # some step improved (the comparison is not between two unchanged starts)


class _Free:
    def budget(self, kind=None):
        return 1 << 40

    def spent(self, w):
        pass


# ---------------------------------------------------------------------------- GPU host loops, faked
class FakeDevice:
    """Logs launches: ("launch", name, budget_s, time left at the launch); a launch with a budget
    advances the fake clock by its budget (the device runs until its stop time)."""

    def __init__(self, clk, events, end):
        self.clk, self.events, self.end = clk, events, end
        self.sms = 2
        self.last_complete = np.ones(1, bool)

    def run(self, name, budget_s, spend=None):
        left = self.end - self.clk.t
        self.events.append(("launch", name, budget_s, left))
        if budget_s is not None:
            self.clk.t += budget_s if spend is None else min(spend, budget_s)


class FakeTourSearch(FakeDevice):
    def __init__(self, C, clk, events, end):
        super().__init__(clk, events, end)
        self.C = C
        self.n = C.shape[0]

    def set_candidates(self, K, nbr=None):
        self.events.append(("launch", "set_candidates", None, self.end - self.clk.t))

    def _costs(self, P):
        return np.array([ls.tour_cost(self.C, p.astype(np.int64)) for p in P])

    def cand_descent_batch(self, P, eps=0.0, max_moves=None, active=None, polish=True, budget_s=None):
        self.run("cand_descent_batch", budget_s, spend=0.01)
        P = np.asarray(P)
        return P.copy(), self._costs(P), np.zeros(len(P), np.int64)

    def local_search(self, p, eps=0.0, max_moves=None, budget_s=None):
        self.run("local_search", budget_s, spend=0.01)
        return np.asarray(p).copy(), float(ls.tour_cost(self.C, np.asarray(p, np.int64))), 0

    def local_search_batch(self, P, eps=0.0, max_moves=None):
        self.run("local_search_batch", None)
        self.clk.t += TICK
        return np.asarray(P).copy(), self._costs(P), np.zeros(len(P), np.int64)

    def ils_start(self, P, costs):
        self.cur = np.asarray(P).copy()
        self.cost = np.asarray(costs, float).copy()

    def cand_ils_round(self, cuts, eps, max_moves, budget_s=None):
        self.run("ils_round", budget_s, spend=0.005)
        return self.cost.copy()

    ils_round = cand_ils_round

    def ils_copy(self, src, dst):
        pass

    def ils_broadcast(self, best):
        pass

    def ils_result(self, b):
        return self.cur[b].copy(), 0, 0, 0


def check_launches(events, end):
    for e in events:
        if e[0] == "launch":
            _, name, budget_s, left = e
            assert left > 0 or name == "set_candidates", f"{name} launched after the deadline"
            if budget_s is not None:
                assert budget_s <= left + 1e-12, (name, budget_s, left)


@pytest.mark.parametrize("hood,n", [("candidates", 300), ("full", 40), ("full", 6)])
def test_gpu_tsp_host_loop_gives_every_launch_the_time_left(hood, n, monkeypatch):
    """gpu.search with a fake device: the start descent, every ILS round and the final polish get a
    device-clock budget no larger than the time left, nothing starts after the deadline, and the search
    returns within a few host steps of it (before, the start descent and the final polish had no budget
    and the candidate lists were built in one uninterruptible call)."""
    monkeypatch.setattr(config, "TOUR_CHECK_WORK", 20_000)
    events = []
    clk = instrument(monkeypatch, events, "tsp")
    limit = 0.25
    dl = budget.Deadline(limit)
    end = dl.end
    monkeypatch.setattr(gpu, "GPUTourSearch", lambda C: FakeTourSearch(C, clk, events, end))
    C = np.random.default_rng(n).integers(1, 100, (n, n)).astype(np.float64)
    tour, cost, trace, stats = gpu.search(C, 0, -1, deadline=dl, rng=np.random.default_rng(0), eps=0.5,
                                          max_moves=1000, window=0, neighbourhood=hood)
    assert sorted(tour.tolist()) == list(range(n))
    check_launches(events, end)
    check_events([e for e in events if e[0] != "launch"], end, 20_000 + 23 * 10 * n + 3 * n)
    assert clk.t <= end + 5 * TICK
    assert stats["rounds"] > 0
    names = [e[1] for e in events if e[0] == "launch"]
    if hood == "candidates":
        assert names[-1] == "cand_descent_batch"  # the final polish, with a budget
        assert all(e[2] is not None for e in events if e[0] == "launch" and e[1] == "cand_descent_batch")


class FakeVRPSearch(FakeDevice):
    def __init__(self, C, dem, cap, depot, R, W, clk, events, end):
        super().__init__(clk, events, end)
        self.C, self.depot, self.N, self.R, self.W = C, depot, C.shape[0] - 1, R, W

    def _cost(self, E, lens, nr):
        return float(cv.vrp_cost(self.C, [E[r, 1:lens[r] + 1] for r in range(nr)], self.depot))

    def local_search(self, E, lens, nr, eps=0.0, max_moves=None, budget_s=None):
        self.run("local_search", budget_s, spend=0.01)
        self.last_complete = True
        return E, lens, nr, self._cost(E, lens, nr), 0

    def chains_start(self, E, lens, nr, cost, B):
        self.best = (E, lens, nr, cost)
        self.B = B

    def chains_round(self, orders, eps, max_moves, budget_s=None):
        assert orders.shape[0] == self.B and orders.dtype == np.int32
        self.run("chains_round", budget_s, spend=0.005)
        return np.full(self.B, self.best[3])

    def chains_copy(self, src, dst):
        pass

    def chain_result(self, b):
        return self.best + (0, 0, 0)


def test_gpu_cvrp_host_loop_gives_every_launch_the_time_left(monkeypatch):
    monkeypatch.setattr(config, "TOUR_CHECK_WORK", 20_000)
    events = []
    clk = instrument(monkeypatch, events, "cvrp")
    limit = 0.2
    dl = budget.Deadline(limit)
    end = dl.end
    monkeypatch.setattr(vg, "GPUVRPSearch", lambda *a: FakeVRPSearch(*a, clk, events, end))
    rng = np.random.default_rng(5)
    n = 50
    C = rng.integers(1, 100, (n, n)).astype(np.float64)
    np.fill_diagonal(C, 0.0)
    dem = np.r_[0.0, rng.integers(1, 5, n - 1).astype(np.float64)]
    near = cv.near_customers(C, 0, 10, _Free())
    E, lens, nr = cv.pack_routes(cv.savings(C, dem, 15.0, 0, near), 0, n, n + 1)
    E2, lens2, nr2, trace, stats = vg.search(C, dem, 15.0, 0, E, lens, nr, near, deadline=dl,
                                             rng=np.random.default_rng(0), eps=0.5, max_moves=1000, chains=4)
    check_launches(events, end)
    assert clk.t <= end + 5 * TICK and stats["rounds"] > 0 and stats["chains"] == 4
    assert [e[1] for e in events if e[0] == "launch"][0] == "local_search"


# ---------------------------------------------------------------------------- compilation outside
def test_warm_up_compiles_everything_a_search_uses():
    """In a fresh process: after warm_up("cpu"), tsp and cvrp (every code path: full and candidate
    neighbourhoods, restarts, open paths, integer and float matrices, the savings start, ruin & recreate)
    add no signature to any numba kernel, i.e. compile nothing inside a time limit."""
    code = textwrap.dedent("""
        import importlib, numpy as np
        from numba.core.registry import CPUDispatcher
        from gpuroute.tours import cvrp, tsp, warm_up
        mods = [importlib.import_module("gpuroute.tours." + m) for m in ("local_search", "cvrp", "vrp_sisr",
                                                                     "vrp_pop")]
        def sigs():
            return {(m.__name__, k): len(v.signatures) for m in mods for k, v in vars(m).items()
                    if isinstance(v, CPUDispatcher)}
        warm_up("cpu")
        before = sigs()
        rng = np.random.default_rng(0)
        for n in (3, 6, 40, 200):
            c = rng.integers(1, 100, (n, n))
            tsp(c, time_limit=0.05, seed=0, device="cpu")
            tsp(c + c.T, time_limit=0.05, seed=0, device="cpu")  # symmetric: the Or-opt search above 150
            tsp(c.astype(np.float32), start=0, end=n - 1, time_limit=0.05, seed=0, device="cpu")
            dem = rng.integers(1, 5, n); dem[0] = 0
            cvrp(c, dem, 10, time_limit=0.05, seed=0, device="cpu")
            cvrp(c * 0.5, dem * 1.5, 10.0, time_limit=0.05, seed=0, device="cpu")
        after = sigs()
        new = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
        assert not new, new
        print("OK", len(before))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0 and "OK" in out.stdout, out.stderr[-3000:]


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), "1", True, None])
def test_time_limit_must_be_positive(bad):
    c = np.ones((5, 5))
    with pytest.raises(ValueError, match="time_limit must be a finite number of seconds > 0"):
        tsp(c, time_limit=bad)
    with pytest.raises(ValueError, match="time_limit must be a finite number of seconds > 0"):
        cvrp(c, [0, 1, 1, 1, 1], 5, time_limit=bad)


# ---------------------------------------------------------------------------- a matrix on the device
def _emulator():
    spec = importlib.util.spec_from_file_location("_tl_cuda_emu", Path(__file__).with_name("cuda_emu.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class FakeDeviceMatrixSearch(FakeTourSearch):
    """FakeTourSearch on a (fake) CuPy matrix: the real GPUTourSearch.candidates_paced (its chunks of rows
    sorted with the fake CuPy, the deadline read between them) and a nearest-neighbour launch with a
    device-clock budget."""

    candidates_paced = gpu.GPUTourSearch.candidates_paced
    _check_K = gpu.GPUTourSearch._check_K

    def __init__(self, C, host, cp, clk, events, end):
        super().__init__(host, clk, events, end)
        self.cp, self.c, self.ct = cp, C, cp.ascontiguousarray(C.T)
        self.stream = cp.cuda.Stream()
        self.nbr = None

    def nearest_neighbour(self, first, last, budget_s=None):
        self.run("nearest_neighbour", budget_s, spend=0.01)
        return ls.nearest_neighbour_tour(self.C, first, last), True


@pytest.mark.parametrize("limit", [0.25, 0.004])
def test_gpu_tsp_on_a_device_matrix_checks_its_deadline(limit, monkeypatch):
    """gpu.search on a CuPy matrix (issue 23, item 3): the candidate lists sorted on the device by chunks
    of at most TOUR_GPU_CAND_SORT_KEYS keys with a deadline check between chunks, the start launched with
    the time left, every later launch as on the host path; 0.004 s stops inside the lists and still
    returns a tour."""
    emu = _emulator()
    emu.install(monkeypatch)
    cp = emu.fake_cupy()
    monkeypatch.setattr(config, "TOUR_CHECK_WORK", 20_000)
    n = 300
    monkeypatch.setattr(config, "TOUR_GPU_CAND_SORT_KEYS", 20 * n)
    events = []
    clk = instrument(monkeypatch, events, "tsp")
    real_rows = gpu.candidate_rows_xp

    def rows(xp, c, ct, K, lo, hi):
        out = real_rows(xp, c, ct, K, lo, hi)
        events.append(("work", "candidate_rows_xp", (hi - lo) * c.shape[0]))
        return out

    monkeypatch.setattr(gpu, "candidate_rows_xp", rows)
    dl = budget.Deadline(limit)
    end = dl.end
    host = np.random.default_rng(n).integers(1, 100, (n, n)).astype(np.float64)
    C = cp.asarray(host)
    monkeypatch.setattr(gpu, "GPUTourSearch", lambda M: FakeDeviceMatrixSearch(M, host, cp, clk, events, end))
    tour, cost, trace, stats = gpu.search(C, 0, -1, deadline=dl, rng=np.random.default_rng(0), eps=0.5,
                                          max_moves=1000, window=0, neighbourhood="candidates")
    assert sorted(tour.tolist()) == list(range(n)) and cost == ls.tour_cost(host, tour)
    check_launches(events, end)
    worst = check_events([e for e in events if e[0] != "launch"], end, 20 * n + 23 * 10 * n + 3 * n)
    assert worst > 0 and clk.t <= end + 5 * TICK
    names = [e[1] for e in events if e[0] == "launch"]
    if limit > 0.1:
        assert names[0] == "nearest_neighbour" and stats["rounds"] > 0
    else:
        assert "nearest_neighbour" not in names and stats["starts"] == 0


def test_gpu_cvrp_checks_its_deadline_between_bounded_work(monkeypatch):
    """cvrp(device="gpu") end to end with a fake device: the host's start (near lists, savings) reads the
    clock between bounded work as on the CPU, and every launch gets at most the time left."""
    import gpuroute.backend as backend
    from gpuroute.tours import warmup

    emu = _emulator()
    monkeypatch.setattr(backend, "probe_gpu", lambda: (True, ""))
    monkeypatch.setattr(warmup, "_done", set(warmup._done) | {("cvrp", "gpu")})  # no device to compile on
    cap_work = 20_000
    monkeypatch.setattr(config, "TOUR_CHECK_WORK", cap_work)
    events = []
    clk = instrument(monkeypatch, events, "cvrp")
    limit = 0.2
    ends = []
    made = []

    class Recorded(budget.Deadline):
        def __init__(self, *a):
            super().__init__(*a)
            made.append(self)

    monkeypatch.setattr(cv, "Deadline", Recorded)

    def fake(*a):
        ends.append(made[0].end)  # the deadline, first-call compilation excluded
        g = FakeVRPSearch(*a, clk, events, made[0].end)
        g.cp = emu.fake_cupy()  # the device's free memory (vrp_gpu._chains)
        return g

    fake.chain_bytes = vg.GPUVRPSearch.chain_bytes
    monkeypatch.setattr(vg, "GPUVRPSearch", fake)
    n = 120
    rng = np.random.default_rng(n)
    xy = rng.random((n, 2)) * 1000
    c = np.rint(np.hypot(*(xy[:, None] - xy[None]).transpose(2, 0, 1))).astype(np.int64)
    dem = rng.integers(1, 10, n)
    dem[0] = 0
    r = cvrp(c, dem, 40, time_limit=limit, seed=0, device="gpu")
    assert r.device == "gpu" and ends, "the device search did not run"
    flat = np.sort(np.concatenate(r.routes))
    assert flat.tolist() == list(range(1, n)) and all(dem[x].sum() <= 40 for x in r.routes)
    end = made[0].end
    check_launches(events, end)
    N = n - 1
    check_events([e for e in events if e[0] != "launch"], end, cap_work + cv.vrp_eval_work(N, N + 1) + 4 * N * 40)
    assert clk.t <= end + 5 * TICK and r.stats["rounds"] > 0
