"""Benchmark: GPU queries over a contraction hierarchy of NY (issue: seeds 000/003 at the hardware's limits):

* PHAST trees (one source: through ``ch.tree`` and the captured pass alone; batched x256 and x1000, uint32
  rows left on the device), with the upward pass searched and, once the hub labels exist, written from
  the sources' forward labels (``config.CH_PHAST_FROM_LABELS``); exact against Dijkstra;
* hub labels (built on the CPU, uploaded once) answering paired distances on the GPU, one warp a pair:
  queries/s at 10^4 .. 10^7 pairs (CuPy in and out, and NumPy end to end), exact against the CPU labels and
  the CH search; floors by bytes (two labels' hubs and distances a query) at the measured copy bandwidth;
* tables by labels against PHAST sweeps: 1 x 1000, 100 x 100, 1000 x 1000, and 100 x T for T up to 10,000
  (the crossover that sets ``config.CH_LABELS_TABLE_MAX_TARGETS``).

Usage (GPU machine, repo root): PYTHONPATH=src python3 benchmarks/ch_gpu_queries.py --out DIR
Writes DIR/ch_gpu_queries.json (one row per measurement, with device, commit and date).
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="out")
    ap.add_argument("--reps", type=int, default=20)
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
