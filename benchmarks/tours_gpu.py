"""Benchmark: the GPU twin of the tour local search (gpuroute.tours.gpu, local_search.cu) against the numba
CPU twin on every core (Brodtkorb et al. 2013, "GPU computing in discrete optimization. Part I": evaluate
the whole neighbourhood in parallel, reduce to the best move; their warning: measure against good CPU
code). Prints one JSON line per measurement and writes them to ``--out``.

Sections (``--sections``, default ``eval,descent,tsp``):

* ``eval``: one evaluation of the whole neighbourhood at n = ``--n`` (1,000) on a random float matrix
  and a random tour: the ``ls_eval`` kernel alone (CUDA events, state already on the device), the
  whole GPU ``best_move`` (upload the tour, arcs + prefix sums, evaluate, reduce, read back), and the CPU
  twin's ``best_move`` (numba, ``prange`` over the first index, every core); both must find the same move.
  With the model: bytes per evaluation (~84 n^2, see gpuroute.tours.gpu) at 2.9 TB/s, and 2 launches
  per move (~0.8 us each in a CUDA graph).
* ``descent``: a descent to a local minimum from a random tour at n = ``--n``: the whole-GPU
  loop (CUDA graph of evaluate + reduce/apply, device done flag) against the CPU twin's ``local_search``
  (same moves: the final tours must be equal); then the batched mode: B double-bridged copies of that
  local minimum descended at once (one block each, one launch) against the CPU twin on the first few.
* ``tsp``: ``tsp(costs, time_limit=--time, device=...)`` on TSPLIB instances (``--instances``, default
  pr1002,pcb1173,u2152,pcb3038) for ``--devices`` (gpu,cpu): gap to the best known tour.
* ``limits`` (issue 23): wall time against the time limit, ``tsp`` on ``--instances`` and ``cvrp`` on
  ``--cvrp-instances`` at each of ``--limits`` (0.05,0.2,1) for ``--devices``; put it first in
  ``--sections`` to see the first call of the process too (its compilation, reported apart as
  ``warmup_s``). Each row: ``wall_s``, ``warmup_s``, ``over_s = wall - warmup - limit`` and whether it is
  within 5 % + 50 ms.
* ``cvrp_eval``: one evaluation of the whole CVRP neighbourhood (``vrp_eval`` + ``vrp_finish``) on the
  savings start of the first ``--cvrp-instances`` instance, GPU against the CPU twin's ``best_vrp_move``
  (numba, every core; the same move), and the descent from that start (whole GPU against CPU; equal).
* ``cvrp``: ``cvrp(costs, demands, capacity, time_limit=--cvrp-time, device=...)`` on CVRPLIB X instances
  (``--cvrp-instances``) for ``--devices``: gap to the best known solution, rounds, chains; the rows to
  set ``config.TOUR_CVRP_GPU_AUTO_MIN_N`` from (the smallest n where the GPU's gap wins).

Data: ``--data-dir`` (default $GPUROUTE_TSP_DIR or /work/shared/data/vrp/TSP) holds ``<name>.vrp`` +
``<name>.sol`` (read with vrplib) or ``<name>.npz`` (coordinates, edge weight type, best known cost:
``--prepare DIR`` writes them from the .vrp/.sol files, for machines without vrplib, e.g. the GPU
machine: ``--prepare local_data/TSP`` here, carry ``local_data/TSP``).

Profiling one evaluation launch with Nsight Compute (``--ncu``: builds the state, runs ``--ncu-warmup``
launches of ``ls_eval``, then exactly one more, and exits)::

    ncu --kernel-name ls_eval --launch-skip 3 --launch-count 1 --set full \\
        python3 benchmarks/tours_gpu.py --ncu --n 1000

Usage (GPU machine, repo root)::

    PYTHONPATH=src python3 benchmarks/tours_gpu.py --data-dir local_data/TSP --out OUT/tours_gpu.jsonl
    PYTHONPATH=src python3 benchmarks/tours_gpu.py --sections limits,cvrp_eval,cvrp \
        --data-dir local_data/TSP --cvrp-dir local_data/CVRP --out OUT/tours_gpu_cvrp.jsonl

(``--prepare DIR --cvrp-prepare DIR2`` here writes the ``.npz`` files of both sets.)
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

from gpuroute import config  # noqa: E402
from gpuroute.tours import local_search as ls  # noqa: E402
from gpuroute.tours import tour_cost, tsp  # noqa: E402
from gpuroute.tours.tsplib import distance_matrix  # noqa: E402

HBM_BYTES_PER_S = 2.9e12
GRAPH_LAUNCH_US = 0.8
LAUNCH_US = 6.0


def commit():
    if os.environ.get("GPUROUTE_COMMIT"):
        return os.environ["GPUROUTE_COMMIT"]
    try:
        return subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True).strip()
    except Exception:
        return "unknown"


class Out:
    """JSON lines to stdout and to a file."""

    def __init__(self, path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.f = open(self.path, "w")

    def __call__(self, row):
        line = json.dumps(row, default=float)
        print(line, flush=True)
        self.f.write(line + "\n")
        self.f.flush()


def load_instance(data_dir, name):
    """(costs int64 (n, n), best known cost or None) from ``<name>.npz`` or ``<name>.vrp`` (+ .sol)."""
    d = Path(data_dir)
    if (d / f"{name}.npz").exists():
        z = np.load(d / f"{name}.npz")
        best = int(z["best_cost"]) if int(z["best_cost"]) >= 0 else None
        return distance_matrix(z["coords"], str(z["edge_weight_type"])), best
    from gpuroute.tours import read_tsplib

    inst = read_tsplib(d / f"{name}.vrp")
    return inst.costs, inst.best_cost


def prepare(data_dir, names, dest):
    """Write ``dest/<name>.npz`` (coords, edge weight type, best known cost) for machines without vrplib."""
    from gpuroute.tours import read_tsplib

    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    for name in names:
        inst = read_tsplib(Path(data_dir) / f"{name}.vrp")
        np.savez_compressed(dest / f"{name}.npz", coords=inst.coords, edge_weight_type=inst.edge_weight_type,
                            best_cost=-1 if inst.best_cost is None else inst.best_cost)
        assert np.array_equal(load_instance(dest, name)[0], inst.costs)
        print(f"wrote {dest / (name + '.npz')} (n={inst.costs.shape[0]}, best known {inst.best_cost})")


def load_cvrp(data_dir, name):
    """(costs int64 (n, n), demands int64 (n,), capacity, depot, best known or None) from ``<name>.npz``
    or ``<name>.vrp`` (+ .sol)."""
    d = Path(data_dir)
    if (d / f"{name}.npz").exists():
        z = np.load(d / f"{name}.npz")
        xy = z["coords"]
        costs = np.floor(np.sqrt(((xy[:, None, :] - xy[None, :, :]) ** 2).sum(-1)) + 0.5).astype(np.int64)
        bks = int(z["best_cost"]) if int(z["best_cost"]) >= 0 else None
        return costs, z["demands"], int(z["capacity"]), int(z["depot"]), bks
    from gpuroute.tours.cvrp import read_cvrplib

    return read_cvrplib(d / f"{name}.vrp")


def prepare_cvrp(data_dir, names, dest):
    """Write ``dest/<name>.npz`` (coords, demands, capacity, depot, best known) of X instances."""
    import vrplib

    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    for name in names:
        path = Path(data_dir) / f"{name}.vrp"
        inst = vrplib.read_instance(str(path), compute_edge_weights=False)
        sol = path.with_suffix(".sol")
        bks = int(vrplib.read_solution(str(sol))["cost"]) if sol.exists() else -1
        np.savez_compressed(dest / f"{name}.npz", coords=np.asarray(inst["node_coord"], np.float64),
                            demands=np.asarray(inst["demand"], np.int64), capacity=int(inst["capacity"]),
                            depot=int(inst["depot"][0]), best_cost=bks)
        assert np.array_equal(load_cvrp(dest, name)[0], load_cvrp(data_dir, name)[0])
        print(f"wrote {dest / (name + '.npz')}")


def section_limits(a, out):
    """Wall time against the time limit (the first call of the process included, compilation apart)."""
    from gpuroute.tours import cvrp

    within = lambda wall, warm, lim: wall - warm <= 1.05 * lim + 0.05  # noqa: E731
    for dev in a.devices.split(","):
        for name in a.instances.split(","):
            costs, _ = load_instance(a.data_dir, name)
            for lim in (float(v) for v in a.limits.split(",")):
                t = time.perf_counter()
                r = tsp(costs, time_limit=lim, seed=0, device=dev)
                el = time.perf_counter() - t
                w = r.stats.get("warmup_seconds", 0.0)
                out({"section": "limits", "solver": "tsp", "instance": name, "n": costs.shape[0], "device": r.device,
                     "time_limit_s": lim, "wall_s": el, "warmup_s": w, "over_s": el - w - lim,
                     "within": within(el, w, lim), "complete": r.stats.get("complete")})
        for name in a.cvrp_instances.split(","):
            costs, dem, cap, depot, _ = load_cvrp(a.cvrp_dir, name)
            for lim in (float(v) for v in a.limits.split(",")):
                t = time.perf_counter()
                r = cvrp(costs, dem, cap, depot=depot, time_limit=lim, seed=0, device=dev)
                el = time.perf_counter() - t
                w = r.stats.get("warmup_seconds", 0.0)
                out({"section": "limits", "solver": "cvrp", "instance": name, "n": costs.shape[0],
                     "device": r.device, "time_limit_s": lim, "wall_s": el, "warmup_s": w,
                     "over_s": el - w - lim, "within": within(el, w, lim), "complete": r.stats.get("complete")})


def section_cvrp_eval(a, out):
    import importlib

    cv = importlib.import_module("gpuroute.tours.cvrp")
    vg = importlib.import_module("gpuroute.tours.vrp_gpu")
    name = a.cvrp_instances.split(",")[0]
    costs, dem, cap, depot, _ = load_cvrp(a.cvrp_dir, name)
    n = costs.shape[0]
    C = costs.astype(np.float64)
    np.fill_diagonal(C, 0.0)
    dem = dem.astype(np.float64)

    class Free:
        def budget(self, kind=None):
            return 1 << 40

        def spent(self, w):
            pass

    init = cv.savings_full(C, dem, float(cap), depot, Free())
    fit = int(np.searchsorted(np.cumsum(np.sort(np.delete(dem, depot))), cap, side="right"))
    W = min(n - 1, max(fit, max(r.size for r in init))) + 2
    E, lens, nr = cv.pack_routes(init, depot, n, W)
    R = E.shape[0]
    bufs = np.empty(R), np.empty((R, W)), np.empty((R, W)), np.empty((R, W))
    cv.refresh(C, dem, E, lens, nr, *bufs)
    cpu = cv.best_vrp_move(C, dem, float(cap), E, lens, nr, *bufs)
    cpu_s = median_s(lambda: cv.best_vrp_move(C, dem, float(cap), E, lens, nr, *bufs), a.reps)
    g = vg.GPUVRPSearch(C, dem, cap, depot, R, W)
    got = g.best_move(E, lens, nr)
    gpu_s = median_s(lambda: g.best_move(E, lens, nr), a.reps)
    same = got == ((float(cpu[0]),) + tuple(int(v) for v in cpu[1:]))
    out({"section": "cvrp_eval", "instance": name, "n": n, "routes": nr - 1, "width": W,
         "items": (n - 1) * nr + (n - 1 + nr) * nr + (n - 1 + nr) + 2 * (n - 1), "gpu_best_move_s": gpu_s,
         "cpu_best_move_s": cpu_s, "speedup": cpu_s / gpu_s, "same_move": same, "cpu_threads": os.cpu_count()})
    eps = 0.5
    t = time.perf_counter()
    Eg, lg, nrg, cg, mg = g.local_search(E, lens, nr, eps)
    gd = time.perf_counter() - t
    Ec, lc = E.copy(), lens.copy()
    t = time.perf_counter()
    nrc, cc, mc = cv.vrp_local_search(C, dem, float(cap), Ec, lc, nr, depot, *bufs, eps, 50 * n + 1000)
    cd = time.perf_counter() - t
    out({"section": "cvrp_descent", "instance": name, "n": n, "moves": mg, "gpu_s": gd, "cpu_s": cd,
         "speedup": cd / gd, "equal": bool(mg == mc and cg == cc and nrg == nrc)})


def section_cvrp(a, out):
    from gpuroute.tours import cvrp
    from gpuroute.tours.cvrp import vrp_cost

    first = load_cvrp(a.cvrp_dir, a.cvrp_instances.split(",")[0])
    for dev in a.devices.split(","):  # compile, caches
        cvrp(first[0][:60, :60], first[1][:60], first[2], time_limit=0.2, seed=0, device=dev)
    for name in a.cvrp_instances.split(","):
        costs, dem, cap, depot, bks = load_cvrp(a.cvrp_dir, name)
        for dev in a.devices.split(","):
            for seed in range(a.seeds):
                t = time.perf_counter()
                r = cvrp(costs, dem, cap, depot=depot, time_limit=a.cvrp_time, seed=seed, device=dev)
                el = time.perf_counter() - t
                flat = np.sort(np.concatenate(r.routes))
                ok = (flat.tolist() == [v for v in range(costs.shape[0]) if v != depot]
                      and all(dem[x].sum() <= cap for x in r.routes) and r.cost == vrp_cost(costs, r.routes, depot))
                out({"section": "cvrp", "instance": name, "n": costs.shape[0], "device": r.device, "seed": seed,
                     "time_limit_s": a.cvrp_time, "wall_s": el, "cost": r.cost, "best_known": bks, "valid": ok,
                     "gap_pct": 100.0 * (r.cost / bks - 1) if bks else None, "stats": r.stats,
                     "trace": [[round(t, 4), v] for t, v in r.trace]})


def cpu_state(c, p):
    n = p.shape[0]
    pos = np.empty(n, np.int64)
    fwd = np.empty(n)
    bwd = np.empty(n)
    ls.prefix_sums(c, p, pos, fwd, bwd)
    return pos, fwd, bwd


def median_s(fn, reps):
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts))


def section_eval(a, out, cp, gpu):
    import numba

    n = a.n
    rng = np.random.default_rng(0)
    c = rng.random((n, n)) * 1000.0
    p = rng.permutation(n).astype(np.int64)
    pos, fwd, bwd = cpu_state(c, p)
    ct = np.ascontiguousarray(c.T)
    full = np.empty((n, 0), np.int64)
    cpu_move = ls.best_move(c, ct, p, pos, fwd, bwd, full)  # compile / warm
    cpu_s = median_s(lambda: ls.best_move(c, ct, p, pos, fwd, bwd, full), a.reps)
    cpu_prep_s = median_s(lambda: ls.prefix_sums(c, p, pos, fwd, bwd), a.reps)
    g = gpu.GPUTourSearch(c)
    gpu_move = g.best_move(p)
    g.set_tour(p)
    for _ in range(3):
        g.launch_eval()
    ev0, ev1 = cp.cuda.Event(), cp.cuda.Event()
    times = []
    for _ in range(a.reps):
        ev0.record(g.stream)
        g.launch_eval()
        ev1.record(g.stream)
        ev1.synchronize()
        times.append(cp.cuda.get_elapsed_time(ev0, ev1) * 1e3)
    eval_us = float(np.median(times))
    ev0.record(g.stream)
    g.launch_finish()
    ev1.record(g.stream)
    ev1.synchronize()
    finish_us = cp.cuda.get_elapsed_time(ev0, ev1) * 1e3
    bm_s = median_s(lambda: g.best_move(p), a.reps)
    moves = n * (n - 1) // 2 + n * (n - 3) // 2 + 5 * n * n
    bytes_model = 84 * n * n
    out({"section": "eval", "n": n, "matrix": "random float64", "moves_evaluated_approx": moves,
         "equal": tuple(gpu_move) == tuple(float(x) if i == 0 else int(x) for i, x in enumerate(cpu_move)),
         "gpu_move": list(gpu_move), "cpu_move": [float(cpu_move[0])] + [int(x) for x in cpu_move[1:]],
         "gpu_eval_kernel_us": eval_us, "gpu_eval_grid": g.grid, "gpu_threads": g.threads,
         "gpu_tpr": g.tpr, "gpu_finish_kernel_us_noapply": finish_us, "gpu_best_move_roundtrip_us": bm_s * 1e6,
         "cpu_best_move_us": cpu_s * 1e6, "cpu_prefix_sums_us": cpu_prep_s * 1e6,
         "cpu_threads": numba.get_num_threads(), "speedup_kernel_vs_cpu": cpu_s * 1e6 / eval_us,
         "model_bytes_per_eval": bytes_model, "model_bw_us_at_2p9TBs": bytes_model / HBM_BYTES_PER_S * 1e6,
         "model_eval_moves_per_s": moves / (eval_us * 1e-6),
         "launches_per_move": 2, "model_launch_us_per_move_graph": 2 * GRAPH_LAUNCH_US,
         "model_launch_us_per_move_plain": 2 * LAUNCH_US})


def section_descent(a, out, cp, gpu):
    n = a.n
    rng = np.random.default_rng(1)
    c = rng.random((n, n)) * 1000.0
    full = np.empty((n, 0), np.int64)
    eps = 1e-9 * 1000.0 * n
    p0 = rng.permutation(n).astype(np.int64)
    g = gpu.GPUTourSearch(c)
    g.local_search(p0, eps, 5)  # capture the graph
    t = time.perf_counter()
    gt, gc, gm = g.local_search(p0, eps)
    g_s = time.perf_counter() - t
    q = p0.copy()
    ls.local_search(c, q.copy(), full, eps, 3)  # compile
    t = time.perf_counter()
    cc, cm = ls.local_search(c, q, full, eps, 50 * n + 1000)
    c_s = time.perf_counter() - t
    K = int(config.TOUR_GPU_GRAPH_MOVES)
    out({"section": "descent", "mode": "one tour, whole GPU (CUDA graph of ls_eval + ls_finish)", "n": n,
         "start": "random tour", "gpu_s": g_s, "gpu_moves": gm, "gpu_us_per_move": g_s / max(gm, 1) * 1e6,
         "cpu_s": c_s, "cpu_moves": cm, "cpu_us_per_move": c_s / max(cm, 1) * 1e6,
         "gpu_cost": gc, "cpu_cost": cc, "equal_tours": gt.tolist() == q.tolist(),
         "graph_moves": K, "host_syncs": -(-(gm + 1) // K)})
    # batched: B double-bridged copies of the local minimum, one block each
    B = g.sms * 2
    cuts = gpu.double_bridge_cuts(rng, n, (B,), 50)
    P = np.stack([gpu.apply_double_bridge(gt, *cuts[b]) for b in range(B)])
    g.local_search_batch(P[:2], eps)  # warm
    t = time.perf_counter()
    tours, costs, moves = g.local_search_batch(P, eps)
    b_s = time.perf_counter() - t
    k = min(B, a.cpu_batch)
    t = time.perf_counter()
    same = 0
    for b in range(k):
        q = P[b].astype(np.int64)
        ls.local_search(c, q, full, eps, 50 * n + 1000)
        same += int(q.tolist() == tours[b].tolist())
    cb_s = (time.perf_counter() - t) / k
    out({"section": "descent", "mode": "batched (ls_batch: one block per tour, one launch)", "n": n, "tours": B,
         "start": "double bridge (window 50) of the local minimum", "gpu_s": b_s,
         "gpu_moves_total": int(moves.sum()), "gpu_moves_per_s": float(moves.sum()) / b_s,
         "gpu_descents_per_s": B / b_s, "cpu_s_per_descent": cb_s, "cpu_descents_per_s": 1.0 / cb_s,
         "cpu_checked": k, "cpu_equal": same})


def section_tsp(a, out):
    warm, _ = load_instance(a.data_dir, a.instances.split(",")[0])
    for dev in a.devices.split(","):  # compile, caches, graph capture
        for _ in range(2):
            tsp(warm[:300, :300], time_limit=0.3, seed=0, device=dev)
    for name in a.instances.split(","):
        costs, best = load_instance(a.data_dir, name)
        n = costs.shape[0]
        for dev in a.devices.split(","):
            for seed in range(a.seeds):
                t = time.perf_counter()
                r = tsp(costs, time_limit=a.time, seed=seed, device=dev)
                el = time.perf_counter() - t
                ok = sorted(r.tour.tolist()) == list(range(n)) and r.cost == tour_cost(costs, r.tour)
                out({"section": "tsp", "instance": name, "n": n, "device": r.device, "seed": seed,
                     "time_limit_s": a.time, "wall_s": el, "cost": r.cost, "best_known": best, "valid": ok,
                     "gap_pct": 100.0 * (r.cost / best - 1) if best else None, "stats": r.stats,
                     "trace": [[round(t, 4), v] for t, v in r.trace]})


def ncu_mode(a, cp, gpu):
    rng = np.random.default_rng(0)
    n = a.n
    c = rng.random((n, n)) * 1000.0
    g = gpu.GPUTourSearch(c)
    g.set_tour(rng.permutation(n))
    for _ in range(a.ncu_warmup):
        g.launch_eval()
    g.launch_eval()  # the profiled launch: --launch-skip <ncu_warmup> --launch-count 1
    g.stream.synchronize()
    print(f"ran {a.ncu_warmup} + 1 launches of ls_eval (n={n}, grid={g.grid}, threads={g.threads}, tpr={g.tpr}); "
          f"profile with: ncu --kernel-name ls_eval --launch-skip {a.ncu_warmup} --launch-count 1 "
          f"python3 benchmarks/tours_gpu.py --ncu --n {n}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sections", default="eval,descent,tsp")
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--cpu-batch", type=int, default=8, help="batched section: tours the CPU twin replays")
    ap.add_argument("--instances", default="pr1002,pcb1173,u2152,pcb3038")
    ap.add_argument("--devices", default="gpu,cpu")
    ap.add_argument("--time", type=float, default=1.0)
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--data-dir", default=os.environ.get("GPUROUTE_TSP_DIR", "/work/shared/data/vrp/TSP"))
    ap.add_argument("--out", default=None)
    ap.add_argument("--prepare", default=None, metavar="DIR", help="write <name>.npz of --instances to DIR, exit")
    ap.add_argument("--ncu", action="store_true", help="run --ncu-warmup + 1 launches of ls_eval, exit")
    ap.add_argument("--ncu-warmup", type=int, default=3)
    ap.add_argument("--limits", default="0.05,0.2,1")
    ap.add_argument("--cvrp-instances", default="X-n101-k25,X-n200-k36,X-n303-k21,X-n502-k39,X-n701-k44,X-n979-k58")
    ap.add_argument("--cvrp-time", type=float, default=10.0)
    ap.add_argument("--cvrp-dir", default=os.environ.get("GPUROUTE_CVRP_DIR", "/work/shared/data/vrp/CVRP"))
    ap.add_argument("--cvrp-prepare", default=None, metavar="DIR", help="write <name>.npz of --cvrp-instances")
    a = ap.parse_args(argv)
    if a.prepare or a.cvrp_prepare:
        if a.prepare:
            prepare(a.data_dir, a.instances.split(","), a.prepare)
        if a.cvrp_prepare:
            prepare_cvrp(a.cvrp_dir, a.cvrp_instances.split(","), a.cvrp_prepare)
        return
    secs = a.sections.split(",")
    cp = gpu = None
    name = None
    if a.ncu or "eval" in secs or "descent" in secs or "cvrp_eval" in secs or "gpu" in a.devices.split(","):
        import cupy as cp

        from gpuroute.tours import gpu

        props = cp.cuda.runtime.getDeviceProperties(0)
        name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    if a.ncu:
        ncu_mode(a, cp, gpu)
        return
    date = dt.date.today().isoformat()
    out = Out(a.out or ROOT / "benchmarks" / "results" / f"tours_gpu_{date}.jsonl")
    out({"section": "meta", "date": date, "commit": commit(), "gpu": name, "cpu": platform.processor(),
         "cpus": os.cpu_count(), "args": vars(a)})
    if secs and secs[0] == "limits":  # first: the process's first calls, compilation included
        section_limits(a, out)
    if "eval" in secs:
        section_eval(a, out, cp, gpu)
    if "descent" in secs:
        section_descent(a, out, cp, gpu)
    if "tsp" in secs:
        section_tsp(a, out)
    if "limits" in secs[1:]:
        section_limits(a, out)
    if "cvrp_eval" in secs:
        section_cvrp_eval(a, out)
    if "cvrp" in secs:
        section_cvrp(a, out)
    print(f"wrote {out.path}")


if __name__ == "__main__":
    main()
