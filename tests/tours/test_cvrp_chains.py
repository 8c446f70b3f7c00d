"""Several SISR chains at once in the CPU CVRP search (``cvrp(..., chains=K)``), under a counted budget: every
compiled call gets the same work units and the clock advances a fixed step a call, not with real time (so a run
is a function of its seeds). The oracle of K independent chains is the K single-chain runs on the chains' own
seeds (``chain_seeds``): the chains' answer is the best of theirs, exactly."""
from __future__ import annotations

import importlib

import numba
import numpy as np
import pytest

from gpuroute import config
from gpuroute.tours import budget, cvrp, warm_up

cv = importlib.import_module("gpuroute.tours.cvrp")
sisr = importlib.import_module("gpuroute.tours.vrp_sisr")

WORK = 3000  # work units of each compiled call (each chain's, with chains)
STEP = 1e-3  # seconds the counted clock advances a call


@pytest.fixture
def counted(monkeypatch):
    """A counted budget: the clock stands still between calls and advances STEP a compiled call; every call
    gets WORK units until the deadline. Returns the log of the parallel kernel's calls: (chains, whether
    every chain starts the call from the same current cost)."""
    warm_up("cpu")  # compile with the real clock
    t = [100.0]

    class Counted:
        def __init__(self, deadline, *args, **kwargs):
            self.deadline = deadline

        def budget(self, kind="work", reserve=0.0):
            return WORK if self.deadline.end - reserve - t[0] > 0 else 0

        def spent(self, work):
            t[0] += STEP

    monkeypatch.setattr(budget, "clock", lambda: t[0])
    monkeypatch.setattr(cv, "Pacer", Counted)
    calls = []
    real = sisr.sisr_chains

    def spy(*args):
        calls.append((args[4].shape[0], bool((args[11][:, 0] == args[11][0, 0]).all())))
        return real(*args)

    monkeypatch.setattr(sisr, "sisr_chains", spy)
    return calls


def instance(n, seed, cap):
    rng = np.random.default_rng(seed)
    xy = rng.random((n, 2)) * 1000
    c = np.rint(np.hypot(*(xy[:, None] - xy[None]).transpose(2, 0, 1))).astype(np.int64)
    if seed % 2:
        c = c + rng.integers(0, 40, (n, n))  # asymmetric
    dem = rng.integers(1, 10, n)
    dem[0] = 0
    return c, dem, cap


def valid(r, c, dem, cap):
    flat = np.sort(np.concatenate(r.routes))
    assert flat.tolist() == list(range(1, c.shape[0])), "every customer exactly once"
    assert all(dem[x].sum() <= cap for x in r.routes)
    assert r.cost == cv.vrp_cost(c, r.routes)


def routes(r):
    return [x.tolist() for x in r.routes]


@pytest.mark.parametrize("n,seed,cap,K", [(45, 0, 30, 3), (60, 1, 80, 2)])
def test_independent_chains_return_the_best_of_their_single_chains(n, seed, cap, K, counted, monkeypatch):
    """No polish reserve (the annealing runs to the deadline, so nothing runs after the chains): K
    independent chains answer exactly the best of the K one-chain runs on ``chain_seeds(seed, K)``."""
    monkeypatch.setattr(config, "TOUR_POLISH_RESERVE", 0.0)
    monkeypatch.setattr(sisr, "SISR_CHAINS_SYNC", 0.0)
    c, dem, cap = instance(n, seed, cap)
    r = cvrp(c, dem, cap, time_limit=0.15, seed=seed, device="cpu", chains=K)
    valid(r, c, dem, cap)
    assert r.stats["chains"] == K and counted and {k for k, _ in counted} == {K}
    calls = len(counted)
    singles = [cvrp(c, dem, cap, time_limit=0.15, seed=s, device="cpu", chains=1)
               for s in cv.chain_seeds(seed, K)]
    assert len(counted) == calls  # the one-chain runs made no parallel call
    best = min(singles, key=lambda x: x.cost)
    assert r.cost == best.cost and routes(r) == routes(best)
    assert r.stats["iterations"] == sum(x.stats["iterations"] for x in singles)


@pytest.mark.parametrize("sync", [0.0, 0.1])
def test_chains_are_deterministic_for_a_seed_and_K_whatever_the_threads(sync, counted, monkeypatch):
    """Same seed and K: the same answer, on 2 numba threads or 1 (each chain seeds its thread's random
    state every call); the best is at most chain 0's (the one-chain run on ``seed``), with the polish."""
    monkeypatch.setattr(sisr, "SISR_CHAINS_SYNC", sync)
    c, dem, cap = instance(50, 3, 25)
    kw = dict(time_limit=0.12, seed=7, device="cpu", chains=3)
    a = cvrp(c, dem, cap, **kw)
    valid(a, c, dem, cap)
    # with sync, chains go on from the same solution now and then (after the first call, where all start
    # from the savings start; before the polish, from whose result all start again); independent ones do not
    assert any(same for _, same in counted[1:len(counted) // 2]) == (sync > 0)
    was = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        b = cvrp(c, dem, cap, **kw)
    finally:
        numba.set_num_threads(was)
    c2 = cvrp(c, dem, cap, **kw)
    assert routes(a) == routes(b) == routes(c2) and a.cost == b.cost == c2.cost
    assert a.stats["iterations"] == b.stats["iterations"]
    if sync == 0.0:
        one = cvrp(c, dem, cap, **dict(kw, chains=1))
        assert a.cost <= one.cost


def test_one_chain_runs_on_this_thread_as_before(counted, monkeypatch):
    """chains=1 never enters the parallel kernel and is what config.TOUR_CVRP_CPU_CHAINS = 1 gives (the
    answer of the tree before chains, same seed, was checked against it by hand: BENCHMARKS.md)."""
    c, dem, cap = instance(40, 5, 30)
    a = cvrp(c, dem, cap, time_limit=0.1, seed=3, device="cpu", chains=1)
    monkeypatch.setattr(config, "TOUR_CVRP_CPU_CHAINS", 1)
    b = cvrp(c, dem, cap, time_limit=0.1, seed=3, device="cpu")
    assert not counted
    assert routes(a) == routes(b) and a.stats["chains"] == b.stats["chains"] == 1
    monkeypatch.setattr(config, "TOUR_CVRP_CPU_CHAINS", 0)  # 0: one a numba thread
    assert cvrp(c, dem, cap, time_limit=0.05, seed=3, device="cpu").stats["chains"] == numba.get_num_threads()
    monkeypatch.setattr(config, "TOUR_CVRP_CPU_CHAINS_BYTES", 1)  # no room for a second chain's state
    assert cvrp(c, dem, cap, time_limit=0.05, seed=3, device="cpu", chains=4).stats["chains"] == 1


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "2", np.float64(3.0)])
def test_bad_chains_are_refused(bad):
    c, dem, cap = instance(12, 0, 30)
    with pytest.raises(ValueError, match=r"chains must be an integer >= 1 .* got "):
        cvrp(c, dem, cap, time_limit=0.05, device="cpu", chains=bad)


def test_bad_config_chains_and_gpu_chains_are_refused(monkeypatch):
    c, dem, cap = instance(12, 0, 30)
    monkeypatch.setattr(config, "TOUR_CVRP_CPU_CHAINS", -1)
    with pytest.raises(ValueError, match=r"config.TOUR_CVRP_CPU_CHAINS must be an integer >= 0.*-1"):
        cvrp(c, dem, cap, time_limit=0.05, device="cpu")
    monkeypatch.setattr(config, "TOUR_CVRP_CPU_CHAINS", 0)
    monkeypatch.setattr(cv, "resolve_device", lambda *a, **k: "gpu")
    with pytest.raises(ValueError, match=r"chains=2 is the CPU search's"):
        cvrp(c, dem, cap, time_limit=0.05, device="gpu", chains=2)


def test_the_benchmark_passes_chains_and_merges_reports(monkeypatch):
    """benchmarks/tours_peers.py: ``--chains K`` reaches cvrp's ``chains`` (plain and variant solvers; 0: not
    passed), ``--variant x:CHAINS_SYNC=0`` sets the sync, and ``--report a,b`` merges the runs of both."""
    import argparse
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("_bench_tours_peers_chains",
                                                  Path(__file__).parents[2] / "benchmarks" / "tours_peers.py")
    tp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tp)
    seen = []
    monkeypatch.setattr(tp, "_gpuroute", lambda inst, T, dev, seed, **kw: seen.append(
        (kw, sisr.SISR_CHAINS_SYNC)))
    for chains in (0, 3):
        a = argparse.Namespace(chains=chains, variant=["indep:CHAINS_SYNC=0"])
        tp.solver_fn("gpuroute-cpu", a)(None, 1.0, 0)
        tp.solver_fn("gpuroute-cpu-indep", a)(None, 1.0, 0)
    sync = sisr.SISR_CHAINS_SYNC
    assert seen == [({}, sync), ({}, 0.0), ({"chains": 3}, sync), ({"chains": 3}, 0.0)]
    doc = lambda s, i: {"meta": {"solvers": {"cvrp": [s]}}, "instances": [{"name": i}],  # noqa: E731
                        "runs": [{"solver": s, "instance": i}], "skipped": {}}
    m = tp.merge([doc("pyvrp", "X-a"), doc("gpuroute-cpu", "X-a"), doc("gpuroute-cpu", "X-b")])
    assert m["meta"]["solvers"]["cvrp"] == ["pyvrp", "gpuroute-cpu"]
    assert [r["name"] for r in m["instances"]] == ["X-a", "X-b"] and len(m["runs"]) == 3
