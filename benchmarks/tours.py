"""Benchmark: TSP tours on TSPLIB instances -- our CPU iterated local search against LKH (``elkai``)
and OR-Tools routing (guided local search), same time limit, gap to the best known tour.

Also times one evaluation of the whole neighbourhood (:func:`gpuroute.tours.best_move`, the step the
GPU twin will take over, Brodtkorb et al. 2013) at n = 1,000 on this machine's CPU, every core, so the
GPU speed-up is measured against the good CPU code.

Peers:
* ``ours``: ``gpuroute.tours.tsp(costs, time_limit=T, seed=s)`` (numba, warmed up first).
* ``lkh``: elkai 2 (LKH) with ``RUNS = 1`` and ``TIME_LIMIT = T`` passed to LKH; LKH's ascent for
  its candidate sets is not covered by LKH's time limit, so its wall time can exceed T (reported).
* ``ortools``: routing model over the full matrix, PATH_CHEAPEST_ARC start, GUIDED_LOCAL_SEARCH,
  time limit T (skipped if ``ortools`` is not installed).

CVRP section (``--sections cvrp``): CVRPLIB X instances (distances nint of Euclidean, the X set's
convention), gap to the best-known solution, same time limit:
* ``ours``: ``gpuroute.tours.cvrp(costs, demands, capacity, time_limit=T, seed=s)`` (numba, warmed up).
* ``pyvrp``: PyVRP's ``solve`` (hybrid genetic search) with ``MaxRuntime(T)`` on a model built from the
  same integer matrix (skipped if ``pyvrp`` is not installed). Both costs are recomputed from the matrix.

Usage (repo root):
    .venv/bin/python benchmarks/tours.py [--instances pr1002,pcb1173,u2152,pcb3038] [--time 1]
        [--seeds 1] [--peers ours,lkh,ortools] [--out benchmarks/results/tours_cpu_<date>.json]
        [--sections tsp,cvrp] [--cvrp-instances X-n101-k25,X-n200-k36,X-n411-k19] [--cvrp-time 2]
        [--cvrp-peers ours,pyvrp]
Prints Markdown tables.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from gpuroute.tours import cvrp, read_tsplib, tour_cost, tsp  # noqa: E402
from gpuroute.tours import local_search as ls  # noqa: E402
from gpuroute.tours.cvrp import read_cvrplib, vrp_cost  # noqa: E402

DATA = Path(os.environ.get("GPUROUTE_TSP_DIR", "/work/shared/data/vrp/TSP"))
CVRP_DATA = Path(os.environ.get("GPUROUTE_CVRP_DIR", "/work/shared/data/vrp/CVRP"))


def commit():
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    except OSError:
        return None


def run_ours(costs, T, seed):
    t = time.perf_counter()
    r = tsp(costs, time_limit=T, seed=seed)
    return r.tour, time.perf_counter() - t, {"stats": r.stats, "trace": r.trace}


def run_lkh(costs, T, seed):
    import elkai
    from elkai import _elkai  # elkai's own extension: the public wrapper has no time limit

    n = costs.shape[0]
    params = f"RUNS = 1\nTIME_LIMIT = {T}\nSEED = {seed + 1}\nPROBLEM_FILE = :stdin:\n"
    rows = "\n".join(" ".join(map(str, r)) for r in costs.tolist())
    prob = (f"TYPE : TSP\nDIMENSION : {n}\nEDGE_WEIGHT_TYPE : EXPLICIT\nEDGE_WEIGHT_FORMAT : FULL_MATRIX\n"
            f"EDGE_WEIGHT_SECTION\n{rows}\n")
    t = time.perf_counter()
    sol = _elkai.solve_problem(params, prob)
    el = time.perf_counter() - t
    return np.array(sol, np.int64) - 1, el, {"elkai": getattr(elkai, "__version__", "2.x")}


def run_ortools(costs, T, seed):
    from ortools.constraint_solver import pywrapcp, routing_enums_pb2

    n = costs.shape[0]
    mgr = pywrapcp.RoutingIndexManager(n, 1, 0)
    model = pywrapcp.RoutingModel(mgr)
    if hasattr(model, "RegisterTransitMatrix"):  # the matrix lives in C++: no Python call per arc
        cb = model.RegisterTransitMatrix(costs.tolist())
    else:
        cl = costs.tolist()
        cb = model.RegisterTransitCallback(lambda a, b: cl[mgr.IndexToNode(a)][mgr.IndexToNode(b)])
    model.SetArcCostEvaluatorOfAllVehicles(cb)
    prm = pywrapcp.DefaultRoutingSearchParameters()
    prm.first_solution_strategy = routing_enums_pb2.FirstSolutionStrategy.PATH_CHEAPEST_ARC
    prm.local_search_metaheuristic = routing_enums_pb2.LocalSearchMetaheuristic.GUIDED_LOCAL_SEARCH
    prm.time_limit.FromMilliseconds(int(T * 1000))
    t = time.perf_counter()
    sol = model.SolveWithParameters(prm)
    el = time.perf_counter() - t
    if sol is None:
        return None, el, {"error": f"no solution within the time limit (status {model.status()})"}
    idx = model.Start(0)
    tour = []
    while not model.IsEnd(idx):
        tour.append(mgr.IndexToNode(idx))
        idx = sol.Value(model.NextVar(idx))
    return np.array(tour, np.int64), el, {}


PEERS = {"ours": run_ours, "lkh": run_lkh, "ortools": run_ortools}


def run_cvrp_ours(costs, dem, cap, depot, T, seed):
    t = time.perf_counter()
    r = cvrp(costs, dem, cap, depot=depot, time_limit=T, seed=seed)
    return r.routes, time.perf_counter() - t, {"stats": r.stats}


def run_cvrp_pyvrp(costs, dem, cap, depot, T, seed):
    import pyvrp
    from pyvrp.stop import MaxRuntime

    n = costs.shape[0]
    cust = [v for v in range(n) if v != depot]
    order = [depot] + cust  # PyVRP location index -> our stop
    m = pyvrp.Model()
    locs = [m.add_location(x=0, y=0) for _ in order]  # PyVRP 0.14: locations apart from depots/clients
    m.add_vehicle_type(num_available=len(cust), capacity=int(cap), start_depot=m.add_depot(locs[0]),
                       end_depot=None)
    for i, v in enumerate(cust):
        m.add_client(locs[i + 1], delivery=int(dem[v]))
    cl = costs.tolist()
    for i, a in enumerate(locs):
        for j, b in enumerate(locs):
            if i != j:
                m.add_edge(a, b, distance=int(cl[order[i]][order[j]]))
    t = time.perf_counter()
    res = m.solve(stop=MaxRuntime(T), seed=seed, display=False)
    el = time.perf_counter() - t
    # a route is a list of activities; a client activity's idx counts clients only (0-based)
    routes = [np.array([cust[x.idx] for x in r if x.is_client()], np.int64) for r in res.best.routes()]
    return routes, el, {"feasible": bool(res.best.is_feasible()), "pyvrp_cost": res.cost()}


CVRP_PEERS = {"ours": run_cvrp_ours, "pyvrp": run_cvrp_pyvrp}


def cvrp_section(a):
    """Rows of the CVRP table: every instance x peer x seed."""
    c0, d0, q0, dep0, _ = read_cvrplib(CVRP_DATA / "X-n101-k25.vrp")
    for _ in range(2):  # numba compile / cache load
        cvrp(c0, d0, q0, depot=dep0, time_limit=0.2, seed=0)
    rows = []
    for name in a.cvrp_instances.split(","):
        costs, dem, cap, depot, bks = read_cvrplib(CVRP_DATA / f"{name}.vrp")
        n = costs.shape[0]
        for peer in a.cvrp_peers.split(","):
            for seed in range(a.seeds):
                try:
                    routes, el, extra = CVRP_PEERS[peer](costs, dem, cap, depot, a.cvrp_time, seed)
                except ImportError as e:
                    rows.append({"instance": name, "n": n, "peer": peer, "error": f"not installed: {e}"})
                    break
                flat = sorted(np.concatenate(routes).tolist()) if routes else []
                ok = flat == [v for v in range(n) if v != depot] and all(dem[r].sum() <= cap for r in routes)
                cost = vrp_cost(costs, routes, depot) if ok else None
                row = {"instance": name, "n": n, "peer": peer, "seed": seed, "time_limit_s": a.cvrp_time,
                       "wall_s": el, "cost": cost, "best_known": bks, "valid": ok, "routes": len(routes),
                       "gap_pct": 100.0 * (cost / bks - 1) if ok else None}
                row.update(extra)
                rows.append(row)
                gap = "none (invalid)" if row["gap_pct"] is None else f"{row['gap_pct']:.2f}%"
                print(f"{name} {peer} seed={seed}: gap {gap} wall {el:.2f}s", flush=True)
    return rows


def print_table(rows, what):
    print(f"\n{what}\n\n| instance | n | peer | limit s | wall s | gap % |\n|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['instance']} | {r['n']} | {r['peer']} | | | {r['error']} |")
            continue
        gap = "invalid" if r["gap_pct"] is None else f"{r['gap_pct']:.2f}"
        print(f"| {r['instance']} | {r['n']} | {r['peer']} | {r['time_limit_s']:g} | {r['wall_s']:.2f} | "
              f"{gap} |")


def neighbourhood_timing(n=1000, reps=20):
    """Seconds per full-neighbourhood best_move (O(n^2), parallel) and per candidate-list one."""
    rng = np.random.default_rng(0)
    c = rng.random((n, n)) * 1000
    p = rng.permutation(n).astype(np.int64)
    pos = np.empty(n, np.int64)
    fwd = np.empty(n)
    bwd = np.empty(n)
    ls.prefix_sums(c, p, pos, fwd, bwd)
    ct = np.ascontiguousarray(c.T)
    import numba

    out = {"n": n, "numba_threads": numba.get_num_threads(), "moves_full": int(n * (n - 1) / 2 + n * (n - 3) / 2 + 5 * n * n)}
    for name, nbr in (("full", np.empty((n, 0), np.int64)), ("candidates10", ls.candidate_lists(c, 10))):
        ls.best_move(c, ct, p, pos, fwd, bwd, nbr)
        t = time.perf_counter()
        for _ in range(reps):
            ls.best_move(c, ct, p, pos, fwd, bwd, nbr)
        out[f"{name}_s"] = (time.perf_counter() - t) / reps
    return out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--instances", default="pr1002,pcb1173,u2152,pcb3038")
    ap.add_argument("--time", type=float, default=1.0)
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--peers", default="ours,lkh,ortools")
    ap.add_argument("--out", default=None)
    ap.add_argument("--sections", default="tsp,cvrp")
    ap.add_argument("--cvrp-instances", default="X-n101-k25,X-n200-k36,X-n411-k19")
    ap.add_argument("--cvrp-time", type=float, default=2.0)
    ap.add_argument("--cvrp-peers", default="ours,pyvrp")
    a = ap.parse_args(argv)
    sections = a.sections.split(",")
    cvrp_rows = cvrp_section(a) if "cvrp" in sections else []
    if "tsp" not in sections:
        date = dt.date.today().isoformat()
        out = Path(a.out) if a.out else ROOT / "benchmarks" / "results" / f"tours_cvrp_cpu_{date}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        doc = {"date": date, "commit": commit(), "machine": platform.processor() or platform.machine(),
               "cpus": os.cpu_count(), "args": vars(a), "cvrp_rows": cvrp_rows}
        out.write_text(json.dumps(doc, indent=1, default=float))
        print_table(cvrp_rows, "CVRP (CVRPLIB X, gap to best known)")
        print(f"wrote {out}")
        return
    # compile / load numba's cache for every path before timing (twice: the first call may spend its
    # time limit compiling the descent and never reach the perturbation loop)
    warm = read_tsplib(DATA / "pr1002.vrp").costs[:300, :300]
    for _ in range(2):
        tsp(np.ones((12, 12), np.int64), time_limit=0.05, seed=0)
        tsp(warm, time_limit=0.2, seed=0)
    rows = []
    for name in a.instances.split(","):
        inst = read_tsplib(DATA / f"{name}.vrp")
        n = inst.costs.shape[0]
        for peer in a.peers.split(","):
            for seed in range(a.seeds):
                try:
                    tour, el, extra = PEERS[peer](inst.costs, a.time, seed)
                except ImportError as e:
                    rows.append({"instance": name, "n": n, "peer": peer, "error": f"not installed: {e}"})
                    break
                ok = tour is not None and sorted(tour.tolist()) == list(range(n))
                cost = tour_cost(inst.costs, tour) if ok else None
                row = {"instance": name, "n": n, "peer": peer, "seed": seed, "time_limit_s": a.time,
                       "wall_s": el, "cost": cost, "best_known": inst.best_cost,
                       "best_known_optimal": inst.optimal, "valid": ok,
                       "gap_pct": 100.0 * (cost / inst.best_cost - 1) if ok else None}
                row.update({k: v for k, v in extra.items() if k != "trace"})
                if "trace" in extra:
                    row["trace"] = [[round(t, 4), v] for t, v in extra["trace"]]
                rows.append(row)
                gap = "none (no valid tour)" if row["gap_pct"] is None else f"{row['gap_pct']:.2f}%"
                print(f"{name} {peer} seed={seed}: gap {gap} wall {el:.2f}s", flush=True)
    hood = neighbourhood_timing()
    date = dt.date.today().isoformat()
    out = Path(a.out) if a.out else ROOT / "benchmarks" / "results" / f"tours_cpu_{date}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {"date": date, "commit": commit(), "machine": platform.processor() or platform.machine(),
           "cpus": os.cpu_count(), "args": vars(a), "rows": rows, "neighbourhood_eval": hood,
           "cvrp_rows": cvrp_rows}
    out.write_text(json.dumps(doc, indent=1, default=float))
    print("\n| instance | n | peer | limit s | wall s | gap % |\n|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['instance']} | {r['n']} | {r['peer']} | | | {r['error']} |")
            continue
        gap = "no tour" if r["gap_pct"] is None else f"{r['gap_pct']:.2f}"
        print(f"| {r['instance']} | {r['n']} | {r['peer']} | {r['time_limit_s']:g} | {r['wall_s']:.2f} | "
              f"{gap} |")
    print(f"\nfull-neighbourhood best_move at n={hood['n']}: {hood['full_s'] * 1e3:.2f} ms "
          f"({os.cpu_count()} cpus); candidate lists (K=10): {hood['candidates10_s'] * 1e3:.3f} ms")
    if cvrp_rows:
        print_table(cvrp_rows, "CVRP (CVRPLIB X, gap to best known)")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
