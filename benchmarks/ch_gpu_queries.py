"""Benchmark: GPU queries over a contraction hierarchy of NY (issue: seeds 000/003 at the hardware's limits):

* PHAST trees (one source: through ``ch.tree`` and the captured pass alone; batched x256 and x1000, uint32
  rows left on the device), with the upward pass searched and, once the hub labels exist, written from
  the sources' forward labels (``config.CH_PHAST_FROM_LABELS``); exact against Dijkstra;
* hub labels (built on the CPU, uploaded once) answering paired distances on the GPU, one warp a pair:
  queries/s at 10^4 .. 10^7 pairs (CuPy in and out, and NumPy end to end), exact against the CPU labels and
  the CH search; floors by bytes (two labels' hubs and distances a query) at the measured copy bandwidth;
* tables by labels against PHAST sweeps: 1 x 1000, 100 x 100, 1000 x 1000, and 100 x T for T up to 10,000
  (the crossover that sets ``config.CH_LABELS_TABLE_MAX_TARGETS``).

* with ``--merge`` only: PHAST's downward pass with its levels merged into phases (``config.CH_PHAST_MERGE_LEVELS``:
  one launch a level, m levels a phase, or the phase boundaries by the cost model ``config.CH_PHASE_*`` at several
  settings): one tree's captured pass, its launches and arcs, batched x256 / x1000 trees/s, exact against Dijkstra.
  Each variant runs at every pass size (``config.CH_PHAST_MERGE_MAX_K`` = 0), except "defaults" (the shipped rule:
  merged phases up to CH_PHAST_MERGE_MAX_K sources a pass, one launch a level above).

Usage (GPU machine, repo root): PYTHONPATH=src python3 benchmarks/ch_gpu_queries.py --out DIR [--merge]
Writes DIR/ch_gpu_queries.json (DIR/ch_gpu_queries_merge.json with --merge; one row per measurement, with device,
commit and date).
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import gpuroute  # noqa: E402
from gpuroute import config  # noqa: E402
from gpuroute.ch import ContractionHierarchy, query  # noqa: E402

ROWS = []


def emit(**row):
    row.update(device=DEVICE, commit=os.environ.get("GPUROUTE_COMMIT", "unknown"), date=str(dt.date.today()))
    print(json.dumps(row), flush=True)
    ROWS.append(row)


def med_gpu(fn, reps):
    """Median seconds of ``fn`` between CUDA events on the current stream, after one warm-up call."""
    import cupy as cp

    fn()
    cp.cuda.Device().synchronize()
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        cp.cuda.Device().synchronize()
        out.append(time.perf_counter() - t0)
    return float(np.median(out))


def copy_bandwidth():
    import cupy as cp

    a = cp.empty(1 << 28, dtype=cp.uint8)
    b = cp.empty_like(a)
    t = med_gpu(lambda: b.__setitem__(slice(None), a), 10)
    return 2 * a.nbytes / t


def phast_rows(ch, g, rng, reps, label):
    """PHAST one tree and batched trees, as the module doc says."""
    import cupy as cp

    src = rng.integers(0, g.n_nodes, 6)
    ref = gpuroute.sssp(g, src, device="cpu")
    eng = ch._gpu_engine()
    exact = all(np.array_equal(ch.tree(int(s), device="gpu"), ref[i]) for i, s in enumerate(src))
    exact &= bool(np.array_equal(ch.tree(src, device="gpu"), ref))
    api = [med_gpu(lambda s=int(s): ch.tree(cp.asarray(s), device="gpu"), reps) for s in src[:4]]
    graph, d, sbuf = eng._pass(1)

    def replay(s, eng=eng, graph=graph, sbuf=sbuf):
        sbuf.set(eng._source_ids(np.array([s])), stream=eng.stream)
        graph.launch(eng.stream)
        eng.stream.synchronize()

    cap = [med_gpu(lambda s=int(s): replay(s), reps) for s in src[:4]]
    prof = eng.profile(np.array([int(src[0])]))
    emit(what="PHAST one tree", upward=label, launches=int(eng.launches), api_seconds=float(np.median(api)),
         captured_pass_seconds=float(np.median(cap)), exact=bool(exact),
         profile=[(p, int(lo), int(nn), round(us, 2)) for p, lo, nn, us in prof[:4]])
    for k in (256, 1000):
        S = cp.asarray(rng.integers(0, g.n_nodes, k))
        t = med_gpu(lambda S=S: ch.tree(S, device="gpu", dtype="uint32"), 3)
        emit(what="PHAST batched trees", upward=label, sources=k, seconds=t, trees_per_s=k / t)


#: The downward pass's phase plans measured by --merge (benchmarks the cost model of ch.phast.merge_phases):
#: (name, CH_PHAST_MERGE_LEVELS, cost overrides (CH_PHASE_STEP_US, CH_PHASE_BYTES_PER_US, CH_PHASE_ITER_US)).
#: All but DEFAULTS_VARIANT run merged at every pass size (CH_PHAST_MERGE_MAX_K = 0).
DEFAULTS_VARIANT = "defaults (per level above CH_PHAST_MERGE_MAX_K)"
MERGE_VARIANTS = [("per level", 1, None), ("cost model (defaults)", 0, None), (DEFAULTS_VARIANT, 0, None),
                  ("cost step 1.5 iter 0.4", 0, (1.5, None, 0.4)), ("cost step 3.0 iter 0.4", 0, (3.0, None, 0.4)),
                  ("cost step 2.0 iter 0.1", 0, (2.0, None, 0.1)), ("cost step 2.0 iter 1.0", 0, (2.0, None, 1.0)),
                  ("m = 4", 4, None), ("m = 8", 8, None)]


def merge_rows(ch, g, rng, reps, ks=(256, 1000)):
    """PHAST with the downward pass's levels merged into phases (config.CH_PHAST_MERGE_LEVELS and the cost model
    config.CH_PHASE_*): for each of MERGE_VARIANTS, upward from the hub labels (built) and searched
    (config.CH_PHAST_FROM_LABELS off), exactness (one tree and a batch against Dijkstra), the captured pass of one
    tree (device time between CUDA events on the pass's stream, median over sources and replays), its launches and
    the downward arcs read, and batched trees/s (uint32 rows left on the device). The plans of a variant (one per
    pass size class) are made on its first calls (``first_calls_seconds``, the labels row) and kept for the other."""
    import cupy as cp

    eng = ch._gpu_engine()
    src = rng.integers(0, g.n_nodes, 4)
    ref = gpuroute.sssp(g, src, device="cpu")
    S64 = rng.integers(0, g.n_nodes, 40)
    ref64 = gpuroute.sssp(g, S64[:3], device="cpu")
    keep = (config.CH_PHAST_MERGE_LEVELS, config.CH_PHASE_STEP_US, config.CH_PHASE_BYTES_PER_US,
            config.CH_PHASE_ITER_US, config.CH_PHAST_MERGE_MAX_K)
    for (name, merge, cost), label in [(v, lab) for v in MERGE_VARIANTS for lab in ("from labels", "searched")]:
        config.CH_PHAST_FROM_LABELS = label == "from labels"
        config.CH_PHAST_MERGE_LEVELS = merge
        config.CH_PHAST_MERGE_MAX_K = keep[4] if name == DEFAULTS_VARIANT else 0
        if cost is not None:
            step, bw_, it = cost
            config.CH_PHASE_STEP_US = step
            config.CH_PHASE_BYTES_PER_US = keep[2] if bw_ is None else bw_
            config.CH_PHASE_ITER_US = it
        try:
            t0 = time.perf_counter()
            exact = all(np.array_equal(ch.tree(int(s), device="gpu"), ref[i]) for i, s in enumerate(src))
            plan_s = time.perf_counter() - t0
            exact &= bool(np.array_equal(ch.tree(S64, device="gpu")[:3], ref64))
            graph, d, sbuf = eng._pass(1)
            e0, e1 = cp.cuda.Event(), cp.cuda.Event()
            times = []
            for s in src:
                sbuf.set(eng._source_ids(np.array([s])), stream=eng.stream)
                for _ in range(3):
                    graph.launch(eng.stream)
                for _ in range(reps):
                    e0.record(eng.stream)
                    graph.launch(eng.stream)
                    e1.record(eng.stream)
                    e1.synchronize()
                    times.append(cp.cuda.get_elapsed_time(e0, e1) * 1e-3)
            row = dict(what="PHAST merged phases", variant=name, upward=label, merge=merge,
                       merge_max_k=config.CH_PHAST_MERGE_MAX_K,
                       cost=[config.CH_PHASE_STEP_US, config.CH_PHASE_BYTES_PER_US, config.CH_PHASE_ITER_US],
                       launches=int(eng.launches), down_launches=int(eng.down_launches),
                       down_arcs=int(eng.down_arcs), levels=len(eng.levels_down),
                       one_tree_pass_seconds=float(np.median(times)), exact=bool(exact),
                       first_calls_seconds=plan_s)
            for k in ks:
                S = cp.asarray(rng.integers(0, g.n_nodes, k))
                t = med_gpu(lambda S=S: ch.tree(S, device="gpu", dtype="uint32"), 3)
                row[f"x{k}_trees_per_s"] = k / t
                row[f"x{k}_down_launches"] = int(eng.down_launches)
                row[f"x{k}_down_arcs"] = int(eng.down_arcs)
            emit(**row)
        except Exception as e:  # one variant failing must not end the run
            emit(what="PHAST merged phases failed", variant=name, upward=label, error=f"{type(e).__name__}: {e}")
        finally:
            (config.CH_PHAST_MERGE_LEVELS, config.CH_PHASE_STEP_US, config.CH_PHASE_BYTES_PER_US,
             config.CH_PHASE_ITER_US, config.CH_PHAST_MERGE_MAX_K) = keep
            config.CH_PHAST_FROM_LABELS = True


def merge_summary():
    print("\nPHAST merged phases (NY; one tree: the captured pass, device us; batched: trees/s)")
    for r in ROWS:
        if r["what"] == "PHAST merged phases":
            print(f"  {r['upward']:11s} {r['variant']:48s} one tree {r['one_tree_pass_seconds'] * 1e6:7.1f} us "
                  f"({r['launches']} launches, {r['down_launches']} down, {r['down_arcs']:,} arcs)  "
                  f"x256 {r.get('x256_trees_per_s', 0):9,.0f}/s ({r.get('x256_down_launches')} down)  "
                  f"x1000 {r.get('x1000_trees_per_s', 0):9,.0f}/s ({r.get('x1000_down_launches')} down)  "
                  f"exact={r['exact']}")
        elif r["what"] == "PHAST merged phases failed":
            print(f"  FAILED {r['upward']} {r['variant']}: {r['error'][:300]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="out")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--merge", action="store_true",
                    help="only PHAST's merged downward phases (MERGE_VARIANTS), upward searched and from labels")
    args = ap.parse_args()
    import cupy as cp

    bw = copy_bandwidth()
    emit(what="copy bandwidth", bytes_per_s=bw)
    g = gpuroute.datasets.load("ny")
    t0 = time.perf_counter()
    ch = ContractionHierarchy.build(g, progress=False)
    emit(what="CU-CH build (first in process)", seconds=time.perf_counter() - t0, levels=int(ch.h.n_levels),
         core=int(ch.h.core.size))
    rng = np.random.default_rng(1)
    if args.merge:
        t0 = time.perf_counter()
        ch.hub_labels()
        emit(what="hub labels", build_seconds_cpu=time.perf_counter() - t0)
        merge_rows(ch, g, rng, args.reps)
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "ch_gpu_queries_merge.json"), "w") as f:
            json.dump(ROWS, f, indent=1)
        merge_summary()
        return
    phast_rows(ch, g, rng, args.reps, "searched")

    # ---- hub labels on the GPU
    t0 = time.perf_counter()
    lab = ch.hub_labels()
    build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    gl = ch._gpu_labels()
    upload_s = time.perf_counter() - t0
    n = g.n_nodes
    mean_label = lab.n_hubs / (2 * n)
    emit(what="hub labels", build_seconds_cpu=build_s, upload_seconds=upload_s, hubs=int(lab.n_hubs),
         mean_label=mean_label, host_bytes=int(lab.nbytes), device_bytes=int(gl.nbytes))
    phast_rows(ch, g, rng, args.reps, "from labels")
    s_chk, t_chk = rng.integers(0, n, 100000), rng.integers(0, n, 100000)
    exact_lab = np.array_equal(ch.distances(s_chk, t_chk, device="gpu"), query.distances_cpu(ch.h, s_chk, t_chk))
    exact_ch = np.array_equal(ch.distances(s_chk[:3000], t_chk[:3000], device="gpu"),
                              query.distances_cpu(ch.h, s_chk[:3000], t_chk[:3000], labels=False))
    per_query_bytes = 2 * mean_label * (4 + lab.dist.itemsize) + 2 * 8 * 2  # two labels + their node rows
    for m in (10**4, 10**5, 10**6, 10**7):
        s_d, t_d = cp.asarray(rng.integers(0, n, m)), cp.asarray(rng.integers(0, n, m))
        t_dev = med_gpu(lambda s_d=s_d, t_d=t_d: ch.distances(s_d, t_d, device="gpu"), max(3, args.reps // 4))
        s_h, t_h = s_d.get(), t_d.get()
        t_host = med_gpu(lambda s_h=s_h, t_h=t_h: ch.distances(s_h, t_h, device="gpu"), 3)
        emit(what="p2p distances, hub labels on the GPU", pairs=m, cupy_seconds=t_dev, queries_per_s=m / t_dev,
             numpy_end_to_end_seconds=t_host, numpy_queries_per_s=m / t_host,
             floor_bytes_seconds=m * per_query_bytes / bw, exact_vs_cpu_labels=bool(exact_lab),
             exact_vs_ch_search=bool(exact_ch))
    # ---- tables: labels against PHAST sweeps
    for ns, nt in ((1, 1000), (100, 100), (1000, 1000), (100, 300), (100, 1000), (100, 3000), (100, 10000)):
        S, T = cp.asarray(rng.integers(0, n, ns)), cp.asarray(rng.integers(0, n, nt))
        config.CH_LABELS_TABLE_MAX_TARGETS = 10**9
        tl = med_gpu(lambda S=S, T=T: ch.table(S, T, device="gpu"), max(3, args.reps // 4))
        a = ch.table(S, T, device="gpu").get()
        config.CH_LABELS_TABLE_MAX_TARGETS = 0
        tp = med_gpu(lambda S=S, T=T: ch.table(S, T, device="gpu"), max(3, args.reps // 4))
        b = ch.table(S, T, device="gpu").get()
        emit(what="table", sources=ns, targets=nt, labels_seconds=tl, phast_seconds=tp, equal=bool(np.array_equal(a, b)))
    config.CH_LABELS_TABLE_MAX_TARGETS = 16384
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "ch_gpu_queries.json"), "w") as f:
        json.dump(ROWS, f, indent=1)


try:
    import cupy

    DEVICE = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
except Exception:  # no GPU: the script needs one
    DEVICE = "none"

if __name__ == "__main__":
    main()
