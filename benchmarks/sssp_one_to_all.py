"""Benchmark suite: one-to-all SSSP on real and tiled road networks and on seed 002's random graphs.

Side by side in one run: scipy's Dijkstra (parallel arcs removed), our numba CPU Dijkstra, and every
GPU method (seed 001: conventional as the seed runs it and with our device-side loop, selection,
adaptive by time and by count; seed 002: Martin, Crauser general/economic, successor/predecessor;
near-far as a CUDA-graph loop and as one persistent kernel; batched near-far).

Each GPU time is the median over several sources of one ``gpuroute.sssp`` call with CuPy sources
(results stay on the device), after a warm-up call. Floors (METHOD.md's two numbers) are written
next to each time: the bytes the method must move at the measured copy bandwidth, and its phase count
x the measured per-phase synchronisation cost.

Usage (GPU machine, from the repo root):
    PYTHONPATH=src python3 benchmarks/sssp_one_to_all.py --out OUTDIR [--quick]
Writes OUTDIR/sssp_one_to_all.json, OUTDIR/phase_stats_ny.png and prints Markdown rows for
BENCHMARKS.md.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import gpuroute  # noqa: E402
from gpuroute import RoadGraph  # noqa: E402


def commit():
    if os.environ.get("GPUROUTE_COMMIT"):
        return os.environ["GPUROUTE_COMMIT"]
    try:
        return subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True).strip()
    except Exception:
        return os.environ.get("GPUROUTE_COMMIT", "unknown")


def find_bay():
    for p in (ROOT / "local_data/USA-road-d.BAY.gr.gz", ROOT.parent / "shared/data/dimacs9/USA-road-d.BAY.gr.gz"):
        if p.exists():
            return p
    return None


def seed002_graph(n, seed=0):
    """Seed 002's setting: every node gets 7 random predecessors (in-degree 7), weights 1..10."""
    rng = np.random.default_rng(seed)
    head = np.repeat(np.arange(n, dtype=np.int64), 7)
    tail = rng.integers(0, n, head.size)
    w = rng.integers(1, 11, head.size)
    return RoadGraph.from_arcs(n, tail, head, {"distance": w}, name=f"random-deg7-{n // 2**20}x2^20")


class Timer:
    def __init__(self, cp):
        self.cp = cp

    def gpu(self, fn, reps):
        cp = self.cp
        ts = []
        for _ in range(reps):
            cp.cuda.Device().synchronize()
            t = time.perf_counter()
            fn()
            cp.cuda.Device().synchronize()
            ts.append(time.perf_counter() - t)
        return float(np.median(ts)) * 1e3, ts


def measure_copy_bandwidth(cp):
    a = cp.empty(1 << 28, dtype=cp.uint8)
    b = cp.empty_like(a)
    b[...] = a
    cp.cuda.Device().synchronize()
    ts = []
    for _ in range(10):
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        e0.record()
        b[...] = a
        e1.record()
        e1.synchronize()
        ts.append(cp.cuda.get_elapsed_time(e0, e1) * 1e-3)
    return 2 * a.nbytes / float(np.median(ts))  # bytes read + written per second


def measure_phase_costs(cp):
    """Per-phase synchronisation floors: an empty kernel replayed in a CUDA graph, a host launch plus
    a flag read back (seed 001's loop), and one round of the persistent kernel (a path graph: one node
    per round, so the time per round is the barrier + dependent-latency floor)."""
    from gpuroute.backend.kernels import load_module

    mod = load_module("sssp/settle/settle.cu")
    k = mod.get_function("min_out_weight")  # any cheap kernel; n = 0 makes it empty
    dummy = cp.zeros(4, dtype=cp.int32)
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        s.begin_capture()
        for _ in range(256):
            k((1,), (32,), (np.int32(0), dummy, dummy, dummy))
        g = s.end_capture()
    g.launch(s)
    s.synchronize()
    t = time.perf_counter()
    for _ in range(20):
        g.launch(s)
    s.synchronize()
    graph_launch_us = (time.perf_counter() - t) / (20 * 256) * 1e6
    flag = cp.zeros(1, dtype=cp.int32)
    t = time.perf_counter()
    for _ in range(500):
        with s:
            k((1,), (32,), (np.int32(0), dummy, dummy, dummy))
            flag.get(stream=s)
    host_phase_us = (time.perf_counter() - t) / 500 * 1e6
    n = 200_000
    path = RoadGraph.from_arcs(n, np.arange(n - 1), np.arange(1, n), {"distance": np.ones(n - 1, np.int64)})
    src = cp.asarray([0])
    gpuroute.sssp(path, src, algorithm="near-far", device="gpu", delta=2**30)
    cp.cuda.Device().synchronize()
    t = time.perf_counter()
    gpuroute.sssp(path, src, algorithm="near-far", device="gpu", delta=2**30)
    cp.cuda.Device().synchronize()
    persistent_round_us = (time.perf_counter() - t) / n * 1e6
    return {"graph_launch_us": graph_launch_us, "host_phase_us": host_phase_us,
            "persistent_round_us": persistent_round_us}


def bytes_floor(method, g, phases, relaxations):
    """Fewest bytes a method must move (see BENCHMARKS.md for the model)."""
    n, m = g.n_nodes, g.n_arcs
    graph_once = 4 * (n + 1) + 8 * m + 4 * n  # CSR + weights read once, distances written once
    if method.startswith("conventional") or method.startswith("adaptive"):
        return max(graph_once, phases * 9 * n)  # every phase: Ma (1 B) + Ca/Ua (8 B) per node
    if method.startswith(("martin", "crauser")):
        return max(graph_once, phases * 6 * n)  # every phase: U, F and dist per node
    return graph_once + 12 * relaxations


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "out"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sources", type=int, default=5)
    ap.add_argument("--only", nargs="*", default=None, help="run only the graphs whose name contains one of these")
    ap.add_argument("--json-name", default="sssp_one_to_all.json")
    ap.add_argument("--random-sizes", type=int, nargs="*", default=[1, 4],
                    help="seed 002 random graphs of k x 2^20 nodes (the paper goes to 11)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    import cupy as cp
    from scipy.sparse.csgraph import dijkstra as scipy_dijkstra

    dev = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    timer = Timer(cp)
    bw = measure_copy_bandwidth(cp)
    costs = measure_phase_costs(cp)
    print(f"# device {dev}; copy {bw / 1e12:.2f} TB/s; graph launch {costs['graph_launch_us']:.2f} us; "
          f"host phase {costs['host_phase_us']:.1f} us; persistent round {costs['persistent_round_us']:.2f} us",
          flush=True)

    graphs = [("NY", lambda: gpuroute.datasets.load("ny"))]
    bay = find_bay()
    if bay:
        graphs.append(("BAY", lambda: gpuroute.load_dimacs(bay)))
    if not args.quick:
        for k in args.random_sizes:
            graphs.append((f"random deg7 {k}x2^20", lambda k=k: seed002_graph(k * 2**20)))
        graphs.append(("NY tiled 4x4", lambda: gpuroute.datasets.tile(gpuroute.datasets.load("ny"), 4, 4)))
        graphs.append(("NY tiled 8x8", lambda: gpuroute.datasets.tile(gpuroute.datasets.load("ny"), 8, 8)))

    if args.only:
        graphs = [gr for gr in graphs if any(o.lower() in gr[0].lower() for o in args.only)]
    methods = [
        ("conventional (seed host loop)", "conventional", None, {"mode": "host"}),
        ("conventional (device loop)", "conventional", None, {"mode": "graph"}),
        ("conventional (fused device loop)", "conventional", None, {"mode": "fused"}),
        ("conventional (fused, 4 nodes/thread)", "conventional", None, {"mode": "fused", "nodes_per_thread": 4}),
        ("selection", "selection", None, {}),
        ("adaptive (time, seed host loop)", "adaptive", "time-host", {}),
        ("adaptive (time, device clock)", "adaptive", "time", {}),
        ("adaptive (count, device)", "adaptive", "count", {}),
        ("martin succ", "martin", "successor", {}),
        ("martin pred", "martin", "predecessor", {}),
        ("crauser succ", "crauser", "successor", {}),
        ("crauser pred", "crauser", "predecessor", {}),
        ("crauser-economic succ", "crauser-economic", "successor", {}),
        ("crauser-economic pred", "crauser-economic", "predecessor", {}),
        ("near-far (fused, delta=8 mean w)", "near-far", None, {"delta_factor": 8}),
        ("near-far (fused, delta=64 mean w)", "near-far", None, {"delta_factor": 64}),
        ("near-far (fused, delta=512 mean w)", "near-far", None, {"delta_factor": 512}),
        ("work queue (fused, delta=inf)", "near-far", None, {"delta": float("inf")}),
        ("work queue (fused, adaptive map)", "near-far", None, {"delta": float("inf"), "frac": 0.02}),
        ("near-far (persistent, 8 mean w)", "near-far", None, {"loop": "persistent", "delta_factor": 8}),
        ("cell-bf (async, 256 threads/cell)", "cell-bf", None, {"loop": "async"}),
        ("cell-bf (async, 512 threads/cell)", "cell-bf", None, {"loop": "async", "threads": 512}),
        ("cell-bf (rounds, 256 threads/cell)", "cell-bf", None, {"loop": "rounds"}),
    ]
    rows = []
    results = {"device": dev, "commit": commit(), "date": dt.date.today().isoformat(), "copy_Bps": bw,
               "phase_costs": costs, "rows": rows}
    rng = np.random.default_rng(1)
    for gname, make in graphs:
        t = time.perf_counter()
        g = make()
        print(f"\n## {gname}: n={g.n_nodes:,} m={g.n_arcs:,} (built in {time.perf_counter() - t:.1f}s)", flush=True)
        big = g.n_nodes > 2_000_000
        is_random = gname.startswith("random")
        srcs = rng.integers(0, g.n_nodes, args.sources if not big else 2)
        # CPU references
        ref = gpuroute.sssp(g, srcs[:1], device="cpu")[0]
        csr = g.to_scipy()
        t = time.perf_counter()
        scipy_dijkstra(csr, indices=int(srcs[0]))
        scipy_ms = (time.perf_counter() - t) * 1e3
        t = time.perf_counter()
        gpuroute.sssp(g, int(srcs[0]), device="cpu")
        cpu_ms = (time.perf_counter() - t) * 1e3
        rows.append({"graph": gname, "method": "scipy dijkstra (CPU)", "ms": scipy_ms})
        rows.append({"graph": gname, "method": "gpuroute dijkstra (CPU, numba)", "ms": cpu_ms})
        print(f"scipy {scipy_ms:.1f} ms, cpu dijkstra {cpu_ms:.1f} ms", flush=True)
        n_reach = int((ref < gpuroute.INF).sum())
        for label, alg, var, opts in methods:
            if alg in ("martin",) and (big or g.n_nodes > 400_000) and not is_random:
                continue  # Martin settles ~one distance value per phase: ~n phases on road graphs
            if alg.startswith("crauser") and big and not is_random:
                continue
            if alg == "conventional" and opts.get("mode") == "host" and big:
                pass
            try:
                src0 = cp.asarray(srcs[:1])
                res = gpuroute.sssp_full(g, src0, algorithm=alg, variant=var, device="gpu", **opts)  # warm-up
                d0 = res.dist.get()[0]
                ok = bool(np.array_equal(d0, ref))
                per = []
                nsrc = 1 if (big or alg in ("martin", "crauser-economic") or "host" in label) else len(srcs)
                for s in srcs[:nsrc]:
                    sc = cp.asarray([int(s)])
                    ms, _ = timer.gpu(lambda sc=sc, g=g, alg=alg, var=var, opts=opts: gpuroute.sssp_full(g, sc, algorithm=alg, variant=var,
                                                                        device="gpu", **opts), 1)
                    per.append(ms)
                r2 = res
                phases = int(np.asarray(r2.stats["phases"]).ravel()[0])
                relax = None
                upd = r2.stats.get("updated")
                if upd is not None and upd[0] is not None and np.all(np.asarray(upd[0]) >= 0):
                    relax = int(np.asarray(upd[0]).sum() * g.n_arcs / max(g.n_nodes, 1))
                ms = float(np.median(per))
                floor_b = bytes_floor(label, g, phases, relax or g.n_arcs)
                bytes_ms = floor_b / bw * 1e3
                if "async" in label:  # one launch for the whole search, then one read-back
                    sync_ms = costs["host_phase_us"] / 1e3
                elif "persistent" in label:
                    sync_ms = phases * costs["persistent_round_us"] / 1e3
                elif "host" in label:
                    sync_ms = phases * costs["host_phase_us"] / 1e3
                else:
                    nk = 3 if alg in ("martin", "crauser", "crauser-economic") or label.startswith("adaptive (") else (
                        1 if alg in ("near-far", "cell-bf") or "fused" in label else 2)
                    sync_ms = phases * nk * costs["graph_launch_us"] / 1e3
                row = {"graph": gname, "method": label, "ms": ms, "phases": phases, "exact": ok,
                       "bytes_floor_ms": bytes_ms, "sync_floor_ms": sync_ms, "reached": n_reach,
                       "delta": r2.stats["params"].get("delta"),
                       "queue_phases": (r2.stats["extra"].get("queue_phases") or [None])[0],
                       "params": {k: v for k, v in r2.stats["params"].items() if isinstance(v, (int, float, str))}}
                rows.append(row)
                qp = row["queue_phases"]
                print(f"{label:32s} {ms:10.2f} ms  phases {phases:8d}  floors: bytes {bytes_ms:.3f} ms, "
                      f"sync {sync_ms:.2f} ms  exact={ok}" + (f"  queue phases {qp}" if qp is not None else ""),
                      flush=True)
            except Exception as e:  # report and go on: one failing method must not hide the others
                rows.append({"graph": gname, "method": label, "error": f"{type(e).__name__}: {e}"})
                print(f"{label:32s} ERROR {type(e).__name__}: {e}", flush=True)
        # batched: many sources per pass
        bconf = [(128, 64), (256, 64), (512, 64), (None, None)] if not big else [(16, 8)]
        for batch, fac in bconf:
            try:
                kb = (batch or 512) * (2 if not big else 1)
                sb = cp.asarray(rng.integers(0, g.n_nodes, kb))
                bo = {"batch": batch, "delta_factor": fac} if batch else {}  # None: algorithm="auto"'s choice
                gpuroute.sssp(g, sb[:batch], algorithm="near-far", device="gpu", **bo)
                ms, _ = timer.gpu(lambda bo=bo, sb=sb, g=g: gpuroute.sssp(g, sb, algorithm="near-far", device="gpu", **bo), 1)
                chk = gpuroute.sssp(g, sb[:batch], algorithm="near-far", device="gpu", **bo).get()[0]
                okb = bool(np.array_equal(chk, gpuroute.sssp(g, int(sb[0].get()), device="cpu")))
                tps = kb / (ms / 1e3)
                label = f"near-far batched x{batch} (delta={fac} mean w)" if batch else "near-far batched (auto)"
                rows.append({"graph": gname, "method": label, "ms": ms, "sources": kb, "trees_per_s": tps, "exact": okb})
                print(f"{label:40s} {ms:10.2f} ms for {kb} sources: {tps:,.0f} trees/s exact={okb}", flush=True)
            except Exception as e:
                rows.append({"graph": gname, "method": f"near-far batched x{batch}", "error": str(e)})
                print(f"batched x{batch} ERROR {type(e).__name__}: {e}", flush=True)
        if gname == "NY":
            # launch-shape sweep of the fused kernel (METHOD.md: find out why a time misses its floor)
            from gpuroute import config
            from gpuroute.sssp.api import release
            keep = config.SSSP_QUEUE_BLOCKS_PER_SM
            sweep = {}
            for bps in (1, 2, 4, 8, 16):
                config.SSSP_QUEUE_BLOCKS_PER_SM = bps
                release(g)
                for lab, o in (("inf", {"delta": float("inf")}), ("64", {"delta_factor": 64})):
                    sc = cp.asarray([int(srcs[0])])
                    gpuroute.sssp_full(g, sc, algorithm="near-far", device="gpu", **o)
                    ms = float(np.median([timer.gpu(lambda sc=sc, o=o, g=g: gpuroute.sssp_full(
                        g, sc, algorithm="near-far", device="gpu", **o), 1)[0] for _ in range(3)]))
                    sweep[f"bps={bps} delta={lab}"] = ms
                    print(f"  sweep blocks/SM={bps:<3d} delta={lab:<4s} {ms:8.2f} ms", flush=True)
            config.SSSP_QUEUE_BLOCKS_PER_SM = keep
            release(g)
            results["launch_sweep_ny"] = sweep
            try:
                plot_phase_stats(g, int(srcs[0]), os.path.join(args.out, "phase_stats_ny.png"), results)
            except Exception as e:
                print("plot failed:", e)
        del g
        cp.get_default_memory_pool().free_all_blocks()
        with open(os.path.join(args.out, args.json_name), "w") as f:
            json.dump(results, f, indent=1, default=float)
    print("\nDone.")


def plot_phase_stats(g, source, path, results):
    """Seed 001 Fig. 4/6 for NY: updated nodes and time per phase, conventional vs selection vs adaptive."""
    import cupy as cp
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    series = {}
    for label, alg, var in (("selection", "selection", None), ("adaptive (time, device clock)", "adaptive", "time"),
                            ("conventional (fused)", "conventional", None), ("work queue (fused)", "near-far", None)):
        opts = {"delta": float("inf")} if alg == "near-far" else {}
        r = gpuroute.sssp_full(g, cp.asarray([source]), algorithm=alg, variant=var, device="gpu",
                               phase_times=True, **opts)
        upd = np.asarray(r.stats["updated"][0])
        tms = np.asarray(r.stats["times_us"][0])
        series[label] = {"updated": upd.tolist(), "times_us": tms.tolist()}
        ax[0].plot(np.arange(len(upd)), np.where(upd >= 0, upd, np.nan), label=label, lw=0.8)
        ax[1].plot(np.arange(len(tms)), tms, label=label, lw=0.8)
    ax[0].set_yscale("log")
    ax[0].set_ylabel("updated nodes")
    ax[1].set_yscale("log")
    ax[1].set_ylabel("phase time (us)")
    ax[1].set_xlabel("phase")
    ax[0].legend()
    ax[0].set_title(f"USA-road-d.NY, source {source}: per-phase statistics (seed 001 Fig. 4/6)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    results["phase_stats_ny"] = series


if __name__ == "__main__":
    main()
