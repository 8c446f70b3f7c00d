"""Benchmark: gpuroute's tour searches side by side with the peers (issue 23, item 4), in one process, one
after the other on the same machine, every solver on the SAME integer matrix.

* CVRP (CVRPLIB X instances, Uchoa et al. 2017): ``gpuroute.cvrp(..., device="gpu")`` and
  ``device="cpu"``; **PyVRP** (``pyvrp.solve`` on a ``ProblemData`` built from our matrix, ``MaxRuntime(T)``,
  fixed seed; the wheel carried, 0.14, runs an iterated local search, not the HGS of earlier releases: the
  version is recorded);
  **OR-Tools** routing (PATH_CHEAPEST_ARC start, GUIDED_LOCAL_SEARCH, time limit T, the matrix and the
  demands registered as C++ transit matrix / vector; deterministic, no seed).
* TSP (TSPLIB instances in VRPLIB form): ``gpuroute.tsp(..., device="gpu"/"cpu")`` and **LKH-3** through
  ``elkai`` (its LKH-3.0.8 core, fed the explicit ``FULL_MATRIX``, with ``RUNS = 1``, ``TIME_LIMIT = T``
  and ``SEED``, in a fresh child process per call; ``--lkh-runs K``: K runs with no time limit instead,
  elkai's own mode). LKH's time limit starts after its ascent (the subgradient candidate sets, O(n^2) per
  iteration: ~10 s at n = 3,038 on one core): its wall time (matrix text + solve, not the child's start) is
  what to compare.

Every peer is optional: a module that does not import is reported (``skipped`` in the JSON, a line in the
table) and the rest runs. Each time limit T of ``--limits`` (default 1,10; ``--with-60`` adds 60) runs
every solver once per seed (``--seeds``), every instance at one T before the next T. gpuroute's CPU twin
uses every core (numba; ``--numba-threads`` sets it), the peers one. gpuroute's kernels are compiled
before the first timed run (``warm_up``, then one short call per device on a slice of the first instance),
so its wall times are steady state; its first-call seconds go to ``meta.warmup``.

Rounding: X instances and these TSPLIB ones are ``EUC_2D``, ``nint(sqrt(dx^2 + dy^2))``
(:func:`gpuroute.tours.distance_matrix`). Every solver gets that int64 matrix explicitly; every solution
is re-checked here (each customer / city exactly once, capacities) and its cost recomputed on that
matrix; the gap is ``cost / best_known - 1`` against the ``.sol`` cost, whose routes / tour are also
re-costed on the matrix (``instances[*].sol_cost_on_matrix``, ``sol_consistent``).

Data: ``<name>.npz`` in ``--data-dir`` (default local_data/tours_peers: coordinates, edge weight type,
demands, capacity, depot, best known cost and routes; written by ``--prepare``, for machines without
vrplib or ../shared), else ``<name>.vrp`` + ``.sol`` in ``--cvrp-dir`` / ``--tsp-dir`` (read with
gpuroute's readers, vrplib). ``--instances`` mixes both kinds (a name is CVRP when its file says so).

Output: ``--out DIR`` gets ``tours_peers_<date>.json`` (meta: date, commit, machine; instances; skipped;
runs, each with the 1-minute load average at its start), rewritten after every run (a cut-off run leaves what
was done); a Markdown table is printed, for CVRP with issue 23's targets per row when PyVRP ran (at 10 s: a
gap <= PyVRP's; at 60 s up to 401 stops: <= 1 %); ``--report FILE`` prints it again from a JSON.

``--variant NAME:KEY=VALUE,...`` (repeatable) adds the CVRP solver ``gpuroute-cpu-NAME``: gpuroute's CPU
search with those ``SISR_*`` constants of ``gpuroute.tours.vrp_sisr`` (``POP_*``: of ``gpuroute.tours.vrp_pop``)
set for its runs (``--variant pen:PEN=1``, ``--variant chain:POP_SIZE=1``), its own column and target verdict,
to compare settings in the same run (``--variant indep:CHAINS_SYNC=0``: independent SISR chains). ``--chains K``:
gpuroute's CPU CVRP search (and its variants) with ``cvrp(..., chains=K)`` (default: one chain a numba thread;
``--jobs`` runs give each worker one thread, so one chain). ``--report a.json,b.json`` merges several results
into one table (PyVRP's runs from one, ours from another).

``--instances X:1001`` names every X instance up to 1,001 stops found in --data-dir / --cvrp-dir
(``X:167-401``: a size range). ``--jobs J`` deals the instances to J child processes (each one after the
other, every solver on one thread) and merges their JSONs: a many-core host runs the whole X set in minutes.

Usage (repo root)::

    python3 benchmarks/tours_peers.py --prepare            # here: write local_data/tours_peers/*.npz
    PYTHONPATH=src python3 benchmarks/tours_peers.py --quick --out out   # ~1 min on 2 CPU cores
    python3 benchmarks/tours_peers.py --prepare --instances X:1001        # the npz of every X instance
    # issue 23's CVRP comparison, 16 cores (~7 min): every X instance at 10 s against PyVRP, then 60 s
    python3 benchmarks/tours_peers.py --instances X:1001 --solvers gpuroute-cpu,pyvrp --limits 10 --jobs 16
    python3 benchmarks/tours_peers.py --instances X:167-401 --solvers gpuroute-cpu --limits 60 --jobs 16
    # GPU machine (no network; carry .whl/peers and local_data/tours_peers): the peers' wheels (cp312,
    # vrplib included: install them in a pip call of their own, not with .whl/*.whl, which has vrplib too)
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \\
      .whl/peers/*.whl && PYTHONPATH=src:/tmp/site python3 benchmarks/tours_peers.py --out $OUT
"""
from __future__ import annotations

import argparse
import datetime as dt
import importlib
import json
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from gpuroute.tours import tour_cost  # noqa: E402
from gpuroute.tours.tsplib import distance_matrix  # noqa: E402

DEFAULT_CVRP = ("X-n101-k25", "X-n200-k36", "X-n303-k21", "X-n411-k19", "X-n502-k39", "X-n701-k44",
                "X-n783-k48", "X-n979-k58")
DEFAULT_TSP = ("pr1002", "pcb3038")
QUICK = ("X-n101-k25", "X-n200-k36", "pr1002")
SOLVERS = {"cvrp": ("gpuroute-gpu", "gpuroute-cpu", "pyvrp", "ortools"),
           "tsp": ("gpuroute-gpu", "gpuroute-cpu", "lkh")}
#: the module each peer needs (a missing one skips that peer)
PEER_MODULES = {"pyvrp": "pyvrp", "ortools": "ortools.constraint_solver.pywrapcp", "lkh": "elkai"}
#: OR-Tools needs a fleet size: ceil(total demand / capacity) * ORTOOLS_FLEET_FACTOR + 1 vehicles (the
#: others get n - 1, i.e. free); unused vehicles cost nothing
ORTOOLS_FLEET_FACTOR = 1.3


# ----------------------------------------------------------------------------------------------------
# instances

class Instance:
    """One instance: ``costs`` int64 (n, n) and, for CVRP, ``demands`` int64 (n,), ``capacity``, ``depot``;
    ``best_known`` (the .sol cost) and ``best_solution`` (CVRP: list of routes, TSP: tour; 0-based)."""

    def __init__(self, name, kind, coords, ewt, best_known, best_solution, demands=None, capacity=None, depot=0,
                 source=""):
        self.name, self.kind, self.coords, self.ewt = name, kind, np.asarray(coords, np.float64), ewt
        self.costs = distance_matrix(self.coords, ewt)
        self.best_known, self.best_solution = best_known, best_solution
        self.demands = None if demands is None else np.asarray(demands, np.int64)
        self.capacity, self.depot, self.source = capacity, int(depot), source
        self.n = self.costs.shape[0]

    def solution_cost(self, sol):
        """Cost on ``costs`` of a CVRP route list (depot excluded) or a closed TSP tour."""
        if self.kind == "tsp":
            return int(tour_cost(self.costs, np.asarray(sol, np.int64)))
        from gpuroute.tours.cvrp import vrp_cost

        return int(vrp_cost(self.costs, [np.asarray(r, np.int64) for r in sol if len(r)], self.depot))

    def check(self, sol):
        """'' when ``sol`` is a valid solution, else what is wrong."""
        if self.kind == "tsp":
            t = np.asarray(sol, np.int64)
            return "" if np.array_equal(np.sort(t), np.arange(self.n)) else "not a permutation of the cities"
        flat = np.sort(np.concatenate([np.asarray(r, np.int64) for r in sol] or [np.empty(0, np.int64)]))
        want = np.array([v for v in range(self.n) if v != self.depot], np.int64)
        if not np.array_equal(flat, want):
            return "customers not each visited exactly once"
        over = [i for i, r in enumerate(sol) if len(r) and self.demands[np.asarray(r, np.int64)].sum() > self.capacity]
        return f"routes over capacity: {over[:5]}" if over else ""

    def record(self):
        sol_cost = self.solution_cost(self.best_solution) if self.best_solution is not None else None
        return {"name": self.name, "kind": self.kind, "n": self.n, "edge_weight_type": self.ewt,
                "capacity": self.capacity, "best_known": self.best_known, "sol_cost_on_matrix": sol_cost,
                "sol_consistent": None if sol_cost is None else sol_cost == self.best_known,
                "sol_valid": None if self.best_solution is None else self.check(self.best_solution) == "",
                "source": self.source}


def _routes_from_flat(flat):
    out, cur = [], []
    for v in np.asarray(flat, np.int64).tolist():
        if v < 0:
            out.append(cur)
            cur = []
        else:
            cur.append(v)
    return out


def _read_vrp(path):
    """An :class:`Instance` from a VRPLIB ``.vrp`` (+ ``.sol``), read with vrplib as gpuroute's readers do."""
    import vrplib

    path = Path(path)
    raw = vrplib.read_instance(str(path), compute_edge_weights=False)
    kind = str(raw.get("type", "")).upper()
    ewt = str(raw.get("edge_weight_type", "EUC_2D")).upper()
    sol = path.with_suffix(".sol")
    s = vrplib.read_solution(str(sol)) if sol.exists() else None
    bks = int(s["cost"]) if s is not None and "cost" in s else None
    if kind == "TSP":
        from gpuroute.tours import read_tsplib

        t = read_tsplib(path)
        inst = Instance(path.stem, "tsp", t.coords, t.edge_weight_type, t.best_cost,
                        None if t.best_tour is None else t.best_tour, source=str(path))
        assert np.array_equal(inst.costs, t.costs), f"{path}: matrix differs from read_tsplib's"
        return inst
    if kind != "CVRP":
        raise ValueError(f"{path}: TYPE {kind!r} is neither TSP nor CVRP")
    from gpuroute.tours.cvrp import read_cvrplib

    costs, dem, cap, depot, bks2 = read_cvrplib(path)
    routes = [list(map(int, r)) for r in s["routes"]] if s is not None else None
    inst = Instance(path.stem, "cvrp", raw["node_coord"], ewt, bks, routes, dem, cap, depot, source=str(path))
    assert np.array_equal(inst.costs, costs), f"{path}: matrix differs from read_cvrplib's"
    assert bks == bks2
    return inst


def load(name, a):
    """The instance ``name``: ``--data-dir/<name>.npz`` if there, else ``<name>.vrp`` in --cvrp-dir or
    --tsp-dir. Raises FileNotFoundError naming the paths tried."""
    npz = Path(a.data_dir) / f"{name}.npz"
    if npz.exists():
        z = np.load(npz)
        kind = str(z["kind"])
        bks = int(z["best_cost"]) if int(z["best_cost"]) >= 0 else None
        if kind == "tsp":
            best = z["best_tour"] if z["best_tour"].size else None
            return Instance(name, "tsp", z["coords"], str(z["edge_weight_type"]), bks, best, source=str(npz))
        best = _routes_from_flat(z["best_routes"]) if z["best_routes"].size else None
        return Instance(name, "cvrp", z["coords"], str(z["edge_weight_type"]), bks, best, z["demands"],
                        int(z["capacity"]), int(z["depot"]), source=str(npz))
    tried = [npz]
    for d in (a.cvrp_dir, a.tsp_dir):
        p = Path(d) / f"{name}.vrp"
        tried.append(p)
        if p.exists():
            return _read_vrp(p)
    raise FileNotFoundError(f"instance {name!r}: none of {', '.join(map(str, tried))} exists")


def prepare(names, a):
    """Write ``--data-dir/<name>.npz`` for each instance (from the .vrp/.sol files) and check it loads to the
    same matrix."""
    dest = Path(a.data_dir)
    dest.mkdir(parents=True, exist_ok=True)
    for name in names:
        src = None
        for d in (a.cvrp_dir, a.tsp_dir):
            if (Path(d) / f"{name}.vrp").exists():
                src = Path(d) / f"{name}.vrp"
                break
        if src is None:
            raise FileNotFoundError(f"instance {name!r}: no {name}.vrp in {a.cvrp_dir} or {a.tsp_dir}")
        inst = _read_vrp(src)
        fields = {"kind": inst.kind, "coords": inst.coords, "edge_weight_type": inst.ewt,
                  "best_cost": -1 if inst.best_known is None else inst.best_known}
        if inst.kind == "tsp":
            fields["best_tour"] = np.asarray(inst.best_solution if inst.best_solution is not None else [], np.int64)
        else:
            flat = [v for r in (inst.best_solution or []) for v in list(r) + [-1]]
            fields.update(demands=inst.demands, capacity=inst.capacity, depot=inst.depot,
                          best_routes=np.asarray(flat, np.int64))
        tmp = dest / f".{name}.tmp.npz"
        np.savez_compressed(tmp, **fields)
        os.replace(tmp, dest / f"{name}.npz")
        back = load(name, argparse.Namespace(data_dir=dest, cvrp_dir="", tsp_dir=""))
        assert np.array_equal(back.costs, inst.costs) and back.best_known == inst.best_known
        r = inst.record()
        print(f"wrote {dest / (name + '.npz')}: {inst.kind} n={inst.n} best known {inst.best_known}, "
              f".sol re-costed on the matrix {r['sol_cost_on_matrix']} ({'equal' if r['sol_consistent'] else 'DIFFERS'})")


# ----------------------------------------------------------------------------------------------------
# solvers: each returns a dict with at least "solution" (routes or tour) and "objective" (the solver's own
# cost, or None) and may add solver-specific fields

def _gpuroute(inst, T, device, seed, chains=None):
    if inst.kind == "tsp":
        from gpuroute.tours import tsp

        r = tsp(inst.costs, time_limit=T, seed=seed, device=device)
        sol = r.tour
    else:
        from gpuroute.tours import cvrp

        kw = {"chains": chains} if chains else {}  # --chains: the CPU search's SISR chains
        r = cvrp(inst.costs, inst.demands, inst.capacity, depot=inst.depot, time_limit=T, seed=seed, device=device,
                 **kw)
        sol = [x.tolist() for x in r.routes]
    keep = ("routes", "starts", "iterations", "ils_iterations", "improvements", "moves", "chains", "rounds",
            "complete", "neighbourhood", "warmup_seconds", "seconds")
    return {"solution": sol, "objective": r.cost, "device": r.device,
            "stats": {k: v for k, v in r.stats.items() if k in keep}}


def _pyvrp(inst, T, seed):
    import pyvrp
    from pyvrp.stop import MaxRuntime

    n, dep = inst.n, inst.depot
    D = np.ascontiguousarray(inst.costs, dtype=np.int64)
    custs = [v for v in range(n) if v != dep]
    locs = [pyvrp.Location(x=float(x), y=float(y)) for x, y in inst.coords[:, :2]]
    data = pyvrp.ProblemData(
        locations=locs, clients=[pyvrp.Client(location=v, delivery=[int(inst.demands[v])]) for v in custs],
        depots=[pyvrp.Depot(location=dep)],
        vehicle_types=[pyvrp.VehicleType(num_available=len(custs), capacity=[int(inst.capacity)])],
        distance_matrices=[D], duration_matrices=[D])
    t = time.perf_counter()
    res = pyvrp.solve(data, stop=MaxRuntime(T), seed=seed, display=False)
    solve_s = time.perf_counter() - t
    routes = [_pyvrp_route(r, custs, data.num_depots) for r in res.best.routes()]
    return {"solution": routes, "objective": int(res.cost()) if res.is_feasible() else None,
            "feasible": bool(res.is_feasible()), "solve_s": solve_s, "iterations": int(res.num_iterations),
            "fleet": len(custs)}


def _pyvrp_route(route, custs, num_depots):
    """Our stop indices of a PyVRP route: 0.14 iterates activities (``idx``: the client's position in the
    clients list); earlier releases have ``visits()`` (location indices, depots first)."""
    if hasattr(route, "visits"):
        return [custs[v - num_depots] for v in route.visits()]
    return [custs[act.idx] for act in route if act.is_client()]


def _ortools(inst, T, seed):
    from ortools.constraint_solver import pywrapcp, routing_enums_pb2

    n = inst.n
    kmin = int(math.ceil(float(inst.demands.sum()) / float(inst.capacity)))
    V = int(math.ceil(kmin * ORTOOLS_FLEET_FACTOR)) + 1
    t = time.perf_counter()
    manager = pywrapcp.RoutingIndexManager(n, V, inst.depot)
    routing = pywrapcp.RoutingModel(manager)
    arc = routing.RegisterTransitMatrix(inst.costs.tolist())
    routing.SetArcCostEvaluatorOfAllVehicles(arc)
    dem = routing.RegisterUnaryTransitVector(inst.demands.tolist())
    routing.AddDimensionWithVehicleCapacity(dem, 0, [int(inst.capacity)] * V, True, "Capacity")
    p = pywrapcp.DefaultRoutingSearchParameters()
    p.first_solution_strategy = routing_enums_pb2.FirstSolutionStrategy.PATH_CHEAPEST_ARC
    p.local_search_metaheuristic = routing_enums_pb2.LocalSearchMetaheuristic.GUIDED_LOCAL_SEARCH
    p.time_limit.FromMilliseconds(int(round(T * 1000)))
    model_s = time.perf_counter() - t
    t = time.perf_counter()
    sol = routing.SolveWithParameters(p)
    solve_s = time.perf_counter() - t
    if sol is None:
        return {"solution": None, "objective": None, "status": int(routing.status()), "model_s": model_s,
                "solve_s": solve_s, "fleet": V}
    routes = []
    for v in range(V):
        idx = sol.Value(routing.NextVar(routing.Start(v)))
        r = []
        while not routing.IsEnd(idx):
            r.append(manager.IndexToNode(idx))
            idx = sol.Value(routing.NextVar(idx))
        if r:
            routes.append(r)
    return {"solution": routes, "objective": int(sol.ObjectiveValue()), "status": int(routing.status()),
            "model_s": model_s, "solve_s": solve_s, "fleet": V, "fleet_lower_bound": kmin}


#: run in a fresh process per call: elkai's LKH keeps global state between calls in one process (a
#: second call on the same matrix came back in less than the first one's ascent, with its tour)
_LKH_CHILD = r"""
import json, sys, time
import numpy as np
from elkai import _elkai
costs = np.load(sys.argv[1])
params = sys.argv[2]
t = time.perf_counter()
n = costs.shape[0]
sym = bool(np.array_equal(costs, costs.T))
text = ("TYPE : " + ("TSP" if sym else "ATSP") + "\nDIMENSION : " + str(n) + "\nEDGE_WEIGHT_TYPE : EXPLICIT\n"
        "EDGE_WEIGHT_FORMAT : FULL_MATRIX\nEDGE_WEIGHT_SECTION\n"
        + "\n".join(" ".join(map(str, r)) for r in costs.tolist()) + "\nEOF\n")
prep = time.perf_counter() - t
t = time.perf_counter()
tour = _elkai.solve_problem(params, text)
solve = time.perf_counter() - t
print(json.dumps({"tour": [int(v) for v in tour], "prep_s": prep, "solve_s": solve}))
"""


def _lkh(inst, T, seed, runs=0, timeout=None):
    """LKH-3 (elkai's core) on the explicit FULL_MATRIX (elkai's LKH reads no other explicit format), in a
    child process. ``runs`` = 0: ``RUNS = 1``, ``TIME_LIMIT = T`` (LKH-3 counts it from the start of the
    run, after the ascent; ``TOTAL_TIME_LIMIT``, counted from the start, returns no tour at all when the
    ascent outlasts it); else ``RUNS = runs`` and no time limit."""
    import tempfile

    import elkai

    if not hasattr(getattr(elkai, "_elkai", None), "solve_problem"):
        raise RuntimeError("elkai._elkai.solve_problem is missing (elkai < 2?): cannot pass LKH parameters")
    params = f"PROBLEM_FILE = :stdin:\nTRACE_LEVEL = 0\nSEED = {seed + 1}\n"
    params += f"RUNS = {int(runs)}\n" if runs else f"RUNS = 1\nTIME_LIMIT = {T:g}\n"
    with tempfile.TemporaryDirectory() as d:
        mat = Path(d) / "costs.npy"
        np.save(mat, np.ascontiguousarray(inst.costs))
        p = subprocess.run([sys.executable, "-c", _LKH_CHILD, str(mat), params], capture_output=True, text=True,
                           timeout=timeout)
    lines = p.stdout.strip().splitlines()
    if p.returncode != 0 or not lines:
        raise RuntimeError(f"LKH child exited {p.returncode}: {(p.stderr or p.stdout)[-300:]}")
    r = json.loads(lines[-1])
    tour = [v - 1 for v in r["tour"]]  # LKH numbers the cities from 1
    if not tour:
        raise RuntimeError("LKH returned no tour")
    return {"solution": tour, "objective": None, "wall_s": r["prep_s"] + r["solve_s"], "prep_s": r["prep_s"],
            "solve_s": r["solve_s"], "lkh_params": params.strip().replace("\n", "; ")}


def _variant_module(key):
    """The module of a variant's constant: gpuroute.tours.vrp_pop for ``VRP_POP_*``, else vrp_sisr."""
    from gpuroute.tours import vrp_pop, vrp_sisr

    return vrp_pop if key.startswith("VRP_POP_") else vrp_sisr


def parse_variants(specs):
    """``--variant NAME:KEY=VALUE,...`` -> {"gpuroute-cpu-NAME": {"SISR_KEY": value}}: gpuroute's CPU CVRP
    search with these constants of :mod:`gpuroute.tours.vrp_sisr` set for its runs (one more solver column);
    a key ``POP_*`` (or ``VRP_POP_*``) names a constant of :mod:`gpuroute.tours.vrp_pop` (``POP_SIZE=1``: one
    annealing chain, no population). Raises ValueError naming the spec and the key when a key is not such a
    constant or a value not a number."""
    from gpuroute.tours import vrp_pop, vrp_sisr

    out = {}
    for spec in specs:
        name, sep, body = spec.partition(":")
        if not sep or not name or not body:
            raise ValueError(f"--variant {spec!r}: expected NAME:KEY=VALUE[,KEY=VALUE...]")
        sets = {}
        for kv in body.split(","):
            k, eq, v = kv.partition("=")
            u = k.strip().upper()
            if u.startswith(("POP_", "VRP_POP_")):
                key = "VRP_POP_" + u.removeprefix("VRP_").removeprefix("POP_")
            else:
                key = "SISR_" + u.removeprefix("SISR_")
            if not eq or not hasattr(_variant_module(key), key):
                raise ValueError(f"--variant {spec!r}: {k!r} is not a constant of gpuroute.tours.vrp_sisr or "
                                 f"vrp_pop (known: {sorted(x[5:] for x in dir(vrp_sisr) if x.startswith('SISR_'))}"
                                 f" + {sorted(x[4:] for x in dir(vrp_pop) if x.startswith('VRP_POP_'))})")
            try:
                sets[key] = type(getattr(_variant_module(key), key))(float(v))
            except ValueError:
                raise ValueError(f"--variant {spec!r}: {k}={v!r} is not a number") from None
        out[f"gpuroute-cpu-{name}"] = sets
    return out


def _variant(sets, chains=None):
    """gpuroute-cpu with the constants ``sets`` of vrp_sisr / vrp_pop set during the call (restored after)."""
    def run(inst, T, seed):
        old = {k: getattr(_variant_module(k), k) for k in sets}
        try:
            for k, v in sets.items():
                setattr(_variant_module(k), k, v)
            return _gpuroute(inst, T, "cpu", seed, **({"chains": chains} if chains else {}))
        finally:
            for k, v in old.items():
                setattr(_variant_module(k), k, v)
    return run


def solver_fn(name, a):
    variants = parse_variants(getattr(a, "variant", None) or [])
    chains = getattr(a, "chains", 0) or None
    if name in variants:
        return _variant(variants[name], chains)
    if name == "gpuroute-gpu":
        return lambda inst, T, seed: _gpuroute(inst, T, "gpu", seed)
    if name == "gpuroute-cpu":
        return lambda inst, T, seed: _gpuroute(inst, T, "cpu", seed, **({"chains": chains} if chains else {}))
    if name == "pyvrp":
        return _pyvrp
    if name == "ortools":
        return _ortools
    if name == "lkh":
        return lambda inst, T, seed: _lkh(inst, T, seed, a.lkh_runs, a.lkh_timeout)
    raise ValueError(f"unknown solver {name!r}; known: {sorted(set(sum(SOLVERS.values(), ())))}")


def availability(solvers):
    """{solver: reason} for the solvers that cannot run here (a module that does not import, no GPU)."""
    out = {}
    for s in solvers:
        if s in PEER_MODULES:
            try:
                importlib.import_module(PEER_MODULES[s])
            except Exception as e:  # ImportError, or a shared library that fails to load
                out[s] = f"{PEER_MODULES[s]} does not import ({type(e).__name__}: {e})"
        elif s == "gpuroute-gpu":
            from gpuroute.backend import probe_gpu

            ok, why = probe_gpu()
            if not ok:
                out[s] = f"no usable GPU: {why}"
    return out


def warm_gpuroute(instances, devices):
    """Compile gpuroute's kernels for each device and run one short call on a slice of the first instance of
    each kind (caches, GPU state); returns {device: seconds}."""
    from gpuroute.tours import cvrp, tsp, warm_up

    out = {}
    for dev in devices:
        t = time.perf_counter()
        warm_up(dev)
        for inst in instances:
            m = min(inst.n, 120)
            if inst.kind == "tsp":
                tsp(inst.costs[:m, :m], time_limit=0.2, seed=0, device=dev)
            elif inst.depot < m:
                cvrp(inst.costs[:m, :m], inst.demands[:m], inst.capacity, depot=inst.depot, time_limit=0.2, seed=0,
                     device=dev)
        out[dev] = time.perf_counter() - t
    return out


def run_one(inst, solver, fn, T, seed):
    row = {"instance": inst.name, "kind": inst.kind, "n": inst.n, "solver": solver, "time_limit_s": T, "seed": seed,
           "best_known": inst.best_known, "load1": os.getloadavg()[0]}
    t = time.perf_counter()
    try:
        r = fn(inst, T, seed)
    except Exception as e:  # a peer's failure is a row, not the end of the benchmark
        row.update(wall_s=time.perf_counter() - t, error=f"{type(e).__name__}: {e}")
        return row
    row["wall_s"] = time.perf_counter() - t
    if "wall_s" in r:  # the solver's own wall time (LKH: without its child process's start)
        row["outer_wall_s"] = row["wall_s"]
        row["wall_s"] = r.pop("wall_s")
    sol = r.pop("solution")
    if sol is None:
        row.update(error="no solution", **r)
        return row
    bad = inst.check(sol)
    cost = inst.solution_cost(sol) if not bad else None
    row.update(valid=not bad, problem=bad or None, cost=cost,
               objective_matches=None if r.get("objective") is None or cost is None else r["objective"] == cost,
               gap_pct=None if cost is None or not inst.best_known else 100.0 * (cost / inst.best_known - 1.0),
               routes=len([x for x in sol if len(x)]) if inst.kind == "cvrp" else None, **r)
    return row


# ----------------------------------------------------------------------------------------------------
# machine, output

def commit():
    if os.environ.get("GPUROUTE_COMMIT"):
        return os.environ["GPUROUTE_COMMIT"]
    try:
        return subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                                       stderr=subprocess.DEVNULL).strip()
    except Exception:
        return "unknown"


def machine():
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gpu = None
    try:
        gpu = subprocess.check_output(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                                       "--format=csv,noheader"], text=True, stderr=subprocess.DEVNULL,
                                      timeout=30).strip() or None
    except Exception:
        pass
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = None
    versions = {}
    from importlib import metadata

    for pkg in ("numpy", "numba", "cupy-cuda13x", "cupy-cuda12x", "cupy", "pyvrp", "ortools", "elkai", "vrplib",
                "protobuf"):
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    try:
        import numba

        threads = numba.get_num_threads()
    except Exception:
        threads = None
    return {"host": platform.node(), "nproc": os.cpu_count(), "cpus_usable": affinity, "cpu_model": cpu,
            "gpu": gpu, "python": platform.python_version(), "numba_threads": threads, "versions": versions}


def write_json(path, doc):
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=lambda v: v.item() if hasattr(v, "item") else str(v)))
    os.replace(tmp, path)


def cell(rows):
    """'gap % (wall s)', means over the seeds, of one solver's runs at one instance and T."""
    ok = [r for r in rows if r.get("gap_pct") is not None]
    if not ok:
        return f"error ({(rows[0].get('error') or rows[0].get('problem') or 'no gap')[:40]})" if rows else ""
    gap = float(np.mean([r["gap_pct"] for r in ok]))
    wall = float(np.mean([r["wall_s"] for r in ok]))
    return f"{gap:.2f} % ({wall:.1f} s)"


def target(rk, name, n, T, solver):
    """Issue 23's CVRP targets for one row: at T = 10 s a mean gap <= PyVRP's (same run); at T = 60 s and
    n <= 401 stops (400 customers) a mean gap <= 1 %. 'met ...' / 'MISSED ...', or '' when neither applies."""
    def gap(s):
        g = [r["gap_pct"] for r in rk if (r["instance"], r["time_limit_s"], r["solver"]) == (name, T, s)
             and r.get("gap_pct") is not None]
        return float(np.mean(g)) if g else None

    ours, peer = gap(solver), gap("pyvrp")
    if T == 10 and ours is not None and peer is not None:
        return f"{'met' if ours <= peer else 'MISSED'} (<= PyVRP {peer:.2f} %)"
    if T == 60 and n <= 401 and ours is not None:
        return f"{'met' if ours <= 1.0 else 'MISSED'} (<= 1 %)"
    return ""


def table(doc):
    lines = []
    runs = doc["runs"]
    for kind in ("cvrp", "tsp"):
        rk = [r for r in runs if r["kind"] == kind]
        if not rk:
            continue
        solvers = [s for s in doc["meta"]["solvers"][kind]]
        ours = [s for s in solvers if s.startswith("gpuroute")] if kind == "cvrp" and "pyvrp" in solvers else []
        verdicts = {s: [] for s in ours}
        lines.append(f"\n### {kind.upper()}: gap to best known (mean wall time)\n")
        extra = [f"target ({s})" for s in ours]
        lines.append("| instance | n | T (s) | " + " | ".join(solvers + extra) + " |")
        lines.append("|---|---:|---:|" + "---:|" * len(solvers) + "---|" * len(extra))
        order = {r["name"]: i for i, r in enumerate(doc["instances"])}
        keys = sorted({(r["instance"], r["n"], r["time_limit_s"]) for r in rk}, key=lambda k: (order[k[0]], k[2]))
        for name, n, T in keys:
            cells = []
            for s in solvers:
                rs = [r for r in rk if (r["instance"], r["time_limit_s"], r["solver"]) == (name, T, s)]
                cells.append(cell(rs) if rs else ("skipped" if s in doc["skipped"] else ""))
            for s in ours:
                v = target(rk, name, n, T, s)
                cells.append(v)
                if v:
                    verdicts[s].append(v.startswith("met"))
            lines.append(f"| {name} | {n} | {T:g} | " + " | ".join(cells) + " |")
        for s in ours:
            if verdicts[s]:
                lines.append(f"\n{s}: issue 23's CVRP targets met on {sum(verdicts[s])} of {len(verdicts[s])} rows")
    if doc["skipped"]:
        lines.append("")
    lines += [f"skipped {s}: {why}" for s, why in doc["skipped"].items()]
    return "\n".join(lines)


def expand(name, a):
    """``X:<max n>`` (``X:<min n>-<max n>``): every CVRPLIB X instance of at most (and at least) that many
    stops (depot included) in --data-dir or --cvrp-dir, by size; any other name: itself."""
    if not name.startswith("X:"):
        return [name]
    low, _, top = name[2:].rpartition("-")
    low, top = int(low or 0), int(top)
    found = {p.stem for d in (a.data_dir, a.cvrp_dir) for p in Path(d).glob("X-n*-k*.*")
             if p.suffix in (".npz", ".vrp")}
    sized = sorted((int(nm.split("-")[1][1:]), nm) for nm in found)
    return [nm for size, nm in sized if low <= size <= top]


def merge(docs):
    """One result document of several (``--report a.json,b.json``): the first one's meta with the solvers of
    all (in order of appearance), instances by name (first record kept), every run, every skipped solver."""
    doc = json.loads(json.dumps(docs[0]))
    for d in docs[1:]:
        for kind, ss in d["meta"]["solvers"].items():
            have = doc["meta"]["solvers"].setdefault(kind, [])
            have += [x for x in ss if x not in have]
        names = {r["name"] for r in doc["instances"]}
        doc["instances"] += [r for r in d["instances"] if r["name"] not in names]
        doc["runs"] += d["runs"]
        doc["skipped"].update(d["skipped"])
    return doc


def run_jobs(names, limits, a, argv):
    """--jobs J: the instances dealt to J child processes of this script (largest first, round robin), each
    writing its own JSON; merged into one (meta of the first child, every child's runs, meta.jobs)."""
    import tempfile

    argv = list(sys.argv[1:] if argv is None else argv)
    drop = {"--instances", "--jobs", "--out", "--tag"}
    rest, skip = [], False
    for x in argv:
        if skip:
            skip = False
            continue
        if x in drop:
            skip = True
            continue
        if x.split("=", 1)[0] in drop:
            continue
        rest.append(x)
    if not a.numba_threads:
        rest += ["--numba-threads", "1"]
    order = sorted(names, key=lambda nm: -int(nm.split("-")[1][1:]) if nm.startswith("X-n") else 0)
    parts = [order[k::a.jobs] for k in range(a.jobs) if order[k::a.jobs]]
    tmp = Path(tempfile.mkdtemp(prefix="tours_peers_jobs_"))
    procs = [subprocess.Popen([sys.executable, str(Path(__file__).resolve()), *rest, "--instances", ",".join(p),
                               "--out", str(tmp / f"job{k}")], stdout=open(tmp / f"job{k}.log", "w"),
                              stderr=subprocess.STDOUT) for k, p in enumerate(parts)]
    print(f"{len(names)} instances in {len(procs)} jobs; logs in {tmp}", flush=True)
    codes = [p.wait() for p in procs]
    docs = [json.loads(f.read_text()) for k in range(len(parts)) for f in sorted((tmp / f"job{k}").glob("*.json"))]
    if not docs:
        raise SystemExit(f"no job wrote a result (exit codes {codes}); logs in {tmp}")
    doc = docs[0]
    doc["instances"] = [r for d in docs for r in d["instances"]]
    doc["runs"] = [r for d in docs for r in d["runs"]]
    doc["skipped"] = {k: v for d in docs for k, v in d["skipped"].items()}
    doc["meta"].update(jobs=a.jobs, job_exit_codes=codes, args=vars(a), limits=limits,
                       planned_search_s=sum(d["meta"]["planned_search_s"] for d in docs),
                       total_s=max(d["meta"].get("total_s", 0.0) for d in docs))
    date = dt.date.today().isoformat()
    path = Path(a.out) / f"tours_peers_{date}{'_' + a.tag if a.tag else ''}.json"
    write_json(path, doc)
    print(table(doc))
    print(f"\nwrote {path}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--instances", default=None,
                    help="comma-separated instance names, CVRP and TSP mixed; X:<n> (X:<m>-<n>): every X instance "
                         "of at most n (at least m) stops (default: "
                         f"{','.join(DEFAULT_CVRP + DEFAULT_TSP)})")
    ap.add_argument("--problems", default="cvrp,tsp", help="restrict to these kinds (cvrp, tsp)")
    ap.add_argument("--solvers", default=None,
                    help="comma-separated subset of gpuroute-gpu,gpuroute-cpu,pyvrp,ortools,lkh (default: all)")
    ap.add_argument("--limits", default=None, help="time limits T in seconds, comma-separated (default 1,10)")
    ap.add_argument("--with-60", action="store_true", help="add T = 60 s to --limits")
    ap.add_argument("--seeds", type=int, default=1, help="seeds S..S+K-1 per solver and T (S: --first-seed)")
    ap.add_argument("--first-seed", type=int, default=0, help="the first seed S (default 0)")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME:KEY=VALUE,...",
                    help="CVRP: one more solver, gpuroute-cpu-NAME, with these SISR_* constants of "
                         "gpuroute.tours.vrp_sisr (e.g. pen:PEN=1,NEAR=10); repeatable")
    ap.add_argument("--lkh-runs", type=int, default=0,
                    help="LKH: K runs with no time limit (elkai's mode) instead of RUNS=1 + TIME_LIMIT=T")
    ap.add_argument("--chains", type=int, default=0,
                    help="CVRP: SISR chains of gpuroute's CPU search (cvrp's chains=; default 0: its own default, "
                         "one a numba thread)")
    ap.add_argument("--numba-threads", type=int, default=0,
                    help="threads of gpuroute's CPU twin (numba; default: all cores; the peers use one)")
    ap.add_argument("--lkh-timeout", type=float, default=600.0, help="LKH: kill its child process after this")
    ap.add_argument("--tag", default="", help="suffix of the JSON name: tours_peers_<date>_<tag>.json")
    ap.add_argument("--quick", action="store_true", help=f"defaults {','.join(QUICK)} at T = 1 (a smoke test)")
    ap.add_argument("--data-dir", default=str(ROOT / "local_data" / "tours_peers"))
    ap.add_argument("--cvrp-dir", default=os.environ.get("GPUROUTE_CVRP_DIR", "/work/shared/data/vrp/CVRP"))
    ap.add_argument("--tsp-dir", default=os.environ.get("GPUROUTE_TSP_DIR", "/work/shared/data/vrp/TSP"))
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"), help="directory for the JSON")
    ap.add_argument("--jobs", type=int, default=1,
                    help="instances in this many worker processes at once (each: its instances one after the other, "
                         "every solver on one thread; numba threads 1 unless --numba-threads); one merged JSON")
    ap.add_argument("--report", default=None,
                    help="print the tables of this result JSON (several, comma-separated: merged), then exit")
    ap.add_argument("--prepare", action="store_true",
                    help="write --data-dir/<name>.npz of the default, quick and --instances sets, then exit")
    a = ap.parse_args(argv)
    # --quick changes the defaults only: an explicit --instances / --limits still applies
    if a.chains < 0:
        ap.error(f"--chains must be >= 0 (0: gpuroute's default), got {a.chains}")
    if a.report:
        print(table(merge([json.loads(Path(f).read_text()) for f in a.report.split(",")])))
        return
    names = a.instances.split(",") if a.instances else list(QUICK if a.quick else DEFAULT_CVRP + DEFAULT_TSP)
    names = [x for nm in names for x in expand(nm, a)]
    limits = [float(v) for v in (a.limits or ("1" if a.quick else "1,10")).split(",")] + ([60.0] if a.with_60 else [])
    if not all(math.isfinite(T) and T > 0 for T in limits):
        ap.error(f"--limits: every time limit must be a number > 0, got {limits}")
    if a.prepare:
        extra = names if a.instances else []
        prepare(list(dict.fromkeys(list(DEFAULT_CVRP + DEFAULT_TSP + QUICK) + extra)), a)
        return
    if a.jobs > 1:
        return run_jobs(names, limits, a, argv)
    if a.numba_threads:
        import numba

        numba.set_num_threads(a.numba_threads)
    kinds = a.problems.split(",")
    bad = [k for k in kinds if k not in SOLVERS]
    if bad:
        ap.error(f"--problems: unknown kind(s) {bad}; known: cvrp, tsp")
    wanted = a.solvers.split(",") if a.solvers else sorted(set(sum(SOLVERS.values(), ())))
    try:
        variants = list(parse_variants(a.variant))
    except ValueError as e:
        ap.error(str(e))
    for s in wanted:
        solver_fn(s, a)  # unknown names fail here, before any work
    instances = [inst for inst in (load(nm, a) for nm in names) if inst.kind in kinds]
    kinds_here = [k for k in ("cvrp", "tsp") if any(i.kind == k for i in instances)]
    solvers = {k: [s for s in SOLVERS[k] if s in wanted] + (variants if k == "cvrp" else [])
               for k in kinds_here}
    skipped = availability(sorted(set(sum(solvers.values(), []))))
    date = dt.date.today().isoformat()
    path = Path(a.out) / f"tours_peers_{date}{'_' + a.tag if a.tag else ''}.json"
    planned = sum(T * a.seeds for inst in instances for T in limits
                  for s in solvers[inst.kind] if s not in skipped)
    doc = {"meta": {"date": date, "commit": commit(), "machine": machine(), "args": vars(a), "limits": limits,
                    "solvers": solvers, "ortools_fleet_factor": ORTOOLS_FLEET_FACTOR,
                    "planned_search_s": planned, "warmup": {}},
           "instances": [inst.record() for inst in instances], "skipped": skipped, "runs": []}
    print(f"{len(instances)} instances, T = {limits}, solvers {solvers}; skipped: {skipped or 'none'}; "
          f"planned search time {planned:.0f} s (+ setup, LKH ascent, warm-up)", flush=True)
    for r in doc["instances"]:
        if r["sol_consistent"] is False:
            print(f"WARNING {r['name']}: .sol cost {r['best_known']} != its routes on the matrix "
                  f"{r['sol_cost_on_matrix']}", flush=True)
    write_json(path, doc)
    devs = [d for d, s in (("cpu", "gpuroute-cpu"), ("gpu", "gpuroute-gpu"))
            if any(x.startswith(s) for v in solvers.values() for x in v) and s not in skipped]
    if devs:
        firsts = [next(i for i in instances if i.kind == k) for k in kinds_here]
        doc["meta"]["warmup"] = warm_gpuroute(firsts, devs)
        print(f"gpuroute warm-up: {doc['meta']['warmup']}", flush=True)
    t0 = time.perf_counter()
    for T in limits:  # every instance at the first T first: a run cut off at the end loses the longest T
        for inst in instances:
            for s in solvers[inst.kind]:
                if s in skipped:
                    continue
                fn = solver_fn(s, a)
                for seed in range(a.first_seed, a.first_seed + a.seeds):
                    row = run_one(inst, s, fn, T, seed)
                    doc["runs"].append(row)
                    write_json(path, doc)
                    print(json.dumps({k: row.get(k) for k in ("instance", "solver", "time_limit_s", "seed", "cost",
                                                              "gap_pct", "wall_s", "valid", "error")},
                                     default=float), flush=True)
    doc["meta"]["total_s"] = time.perf_counter() - t0
    write_json(path, doc)
    print(table(doc))
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
