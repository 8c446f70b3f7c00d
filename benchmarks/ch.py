"""Benchmark suite: contraction hierarchies (build, PHAST trees, point-to-point, tables) side by side with
the peers in one run on one machine: our sequential CH, CU-CH's CPU twin and CU-CH on the GPU,
RoutingKit's CCH (``pyroutingkit``; preprocessing, customization, p2p, 1xN, many-to-many), scipy's
Dijkstra, and our best search without preprocessing (cell-bf).

Floors next to each GPU time (METHOD.md): PHAST moves at least the downward and upward arcs (tail +
weight, 8 B each) and one distance read per arc plus one write per node per tree, at the measured copy
bandwidth; and it has one kernel per level (the measured replay cost of a kernel in a CUDA graph).

Usage (GPU machine, from the repo root; pyroutingkit from the carried wheels):
    PYTHONPATH=src python3 benchmarks/ch.py --out OUTDIR [--graphs NY "NY tiled 8x8"] [--skip-sequential]
Writes OUTDIR/ch.json, OUTDIR/cuch_iterations_<graph>.png, OUTDIR/phast_levels_<graph>.png and prints
Markdown rows for BENCHMARKS.md.
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
from gpuroute import config  # noqa: E402
from gpuroute.ch import ContractionHierarchy  # noqa: E402


def commit():
    if os.environ.get("GPUROUTE_COMMIT"):
        return os.environ["GPUROUTE_COMMIT"]
    try:
        return subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True).strip()
    except Exception:
        return "unknown"


def med(fn, reps=5, sync=None):
    ts = []
    for _ in range(reps):
        if sync:
            sync()
        t = time.perf_counter()
        fn()
        if sync:
            sync()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts)) * 1e3


def load(name):
    if name == "NY":
        return gpuroute.datasets.load("ny")
    if name == "NY time":
        return gpuroute.datasets.load("ny-time")
    if name == "BAY":
        return gpuroute.load_dimacs(ROOT / "local_data" / "USA-road-d.BAY.gr.gz")
    if name.startswith("NY tiled"):
        k = int(name.split()[-1].split("x")[0])
        return gpuroute.datasets.tile(gpuroute.datasets.load("ny"), k, k)
    raise ValueError(name)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "out"))
    ap.add_argument("--graphs", nargs="*", default=["NY"])
    ap.add_argument("--skip-sequential", action="store_true")
    ap.add_argument("--quick", action="store_true", help="only the GPU-built CU-CH and the GPU queries")
    ap.add_argument("--pairs", type=int, default=2000)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    import cupy as cp
    from scipy.sparse.csgraph import dijkstra as scipy_dijkstra

    sync = cp.cuda.Device().synchronize
    dev = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    a = cp.empty(1 << 28, dtype=cp.uint8)
    b = cp.empty_like(a)
    b[...] = a
    sync()
    t = time.perf_counter()
    for _ in range(10):
        b[...] = a
    sync()
    bw = 2 * a.nbytes * 10 / (time.perf_counter() - t)
    del a, b
    print(f"# device {dev}; copy {bw / 1e12:.2f} TB/s; {os.cpu_count()} CPU cores", flush=True)
    results = {"device": dev, "commit": commit(), "date": dt.date.today().isoformat(), "copy_Bps": bw, "rows": []}
    rows = results["rows"]

    def row(graph, what, value, unit, **kw):
        r = {"graph": graph, "what": what, "value": value, "unit": unit, **kw}
        rows.append(r)
        extra = "".join(f" | {k} {v}" for k, v in kw.items())
        print(f"| {graph} | {what} | {value:,.3f} {unit}{extra} |", flush=True)

    rng = np.random.default_rng(3)
    for gname in args.graphs:
        g = load(gname)
        n = g.n_nodes
        print(f"\n## {gname}: n={n:,}, m={g.n_arcs:,}", flush=True)
        big = n > 2_000_000
        # ---------------------------------------------------------------- builds
        hs = {}
        ContractionHierarchy.build(gpuroute.RoadGraph.from_arcs(3, [0, 1], [1, 2], {"w": [1, 1]}), method="cu-ch",
                                   device="gpu")  # compile
        for label, kw in (("CU-CH (GPU)", {"method": "cu-ch", "device": "gpu"}),
                          ("CU-CH (CPU twin)", {"method": "cu-ch", "device": "cpu", "progress": False}),
                          ("sequential CH (CPU)", {"method": "sequential", "device": "cpu", "progress": False})):
            if big and "CPU" in label and "GPU" not in label:
                continue
            if (args.skip_sequential or args.quick) and label.startswith("sequential"):
                continue
            if args.quick and "CPU twin" in label:
                continue
            t = time.perf_counter()
            ch = ContractionHierarchy.build(g, **kw)
            sec = time.perf_counter() - t
            h = ch.h
            hs[label] = ch
            row(gname, f"build {label}", sec * 1e3, "ms", shortcuts=h.n_shortcuts, levels=h.n_levels,
                core=int(h.core.size), up=h.n_up, down=h.n_down)
            if label == "CU-CH (GPU)":
                results[f"cuch_stats_{gname}"] = {k: v for k, v in ch.stats.items()
                                                  if isinstance(v, (list, int, float, str))}
        if "CU-CH (GPU)" in hs and "CU-CH (CPU twin)" in hs:
            same = all(np.array_equal(getattr(hs["CU-CH (GPU)"].h, k), getattr(hs["CU-CH (CPU twin)"].h, k))
                       for k in hs["CU-CH (GPU)"].h.ARRAYS)
            row(gname, "CU-CH GPU hierarchy == CPU twin's", float(same), "bool")
        # ---------------------------------------------------------------- peers
        src = rng.integers(0, n, 1000)
        ref = gpuroute.sssp(g, src[:4], device="cpu")
        csr = g.to_scipy()
        row(gname, "scipy dijkstra, one tree", med(lambda csr=csr, s0=int(src[0]): scipy_dijkstra(csr, indices=s0), 3), "ms")
        s_one = cp.asarray(src[:1])
        gpuroute.sssp(g, s_one, algorithm="cell-bf", device="gpu")
        row(gname, "cell-bf (GPU, no preprocessing), one tree",
            med(lambda g=g, s1=s_one: gpuroute.sssp(g, s1, algorithm="cell-bf", device="gpu"), 9, sync), "ms")
        rk = None
        try:
            import pyroutingkit as prk

            if g.coords is not None:
                t = time.perf_counter()
                rk = prk.CCH()
                rk.build_topology(g.tail.astype(np.uint32), g.head.astype(np.uint32),
                                  g.coords[:, 1].astype(np.float32), g.coords[:, 0].astype(np.float32), n)
                t_top = time.perf_counter() - t
                w = g.weight().astype(np.uint32)
                t = time.perf_counter()
                rk.customize_weights(w)
                t_cus = time.perf_counter() - t
                row(gname, "RoutingKit CCH topology (CPU)", t_top * 1e3, "ms")
                row(gname, "RoutingKit CCH customization (CPU)", t_cus * 1e3, "ms")
        except Exception as e:
            print("RoutingKit unavailable:", e, flush=True)
        # ---------------------------------------------------------------- queries per hierarchy
        for label, ch in hs.items():
            tag = f"[{label}]"
            ok_tree = bool(np.array_equal(ch.tree(src[:4], device="cpu"), ref))
            t_cpu = med(lambda ch=ch, s0=int(src[0]): ch.tree(s0, device="cpu"), 5)
            row(gname, f"PHAST one tree, CPU {tag}", t_cpu, "ms", exact=ok_tree)
            try:
                eng = ch._gpu_engine()
                s1 = cp.asarray(src[:1])
                ch.tree(s1, device="gpu")
                t1 = med(lambda ch=ch, s1=s1: ch.tree(s1, device="gpu"), 21, sync)
                ok = bool(np.array_equal(ch.tree(src[:4], device="gpu"), ref))
                ok = ok and all(np.array_equal(ch.tree(int(x), device="gpu"), ref[i]) for i, x in enumerate(src[:4]))
                h = ch.h
                m_arcs = h.n_up + h.n_down
                floor_b = (m_arcs * 12 + n * 4) / bw * 1e3
                row(gname, f"PHAST one tree, GPU {tag}", t1, "ms", exact=ok, levels=eng.n_levels,
                    launches=eng.launches, bytes_floor_ms=round(floor_b, 4),
                    sync_floor_ms=round(eng.launches * 0.8e-3, 4))
                t_graph = med(lambda eng=eng, s0=src[:1]: eng._run(s0), 21, sync)
                row(gname, f"PHAST one tree, GPU, the captured pass alone {tag}", t_graph, "ms")
                config.CH_PHAST_UP_SEARCH = False  # the upward pass as a pull launch per level, to compare
                eng._passes.clear()
                t_lv = med(lambda eng=eng, s0=src[:1]: eng._run(s0), 21, sync)
                row(gname, f"PHAST one tree, GPU, captured pass, upward pass per level {tag}", t_lv, "ms",
                    launches=eng.launches)
                config.CH_PHAST_UP_SEARCH = True
                eng._passes.clear()
                eng._run(src[:1])
                prof = eng.profile(src[:1])
                prof = eng.profile(src[:1])
                results[f"phast_levels_{gname}_{label}"] = prof
                plot_levels(prof, gname, label, args.out)
                for k in (256, 1000):
                    sk = cp.asarray(rng.integers(0, n, k))
                    ch.tree(sk, device="gpu")
                    tk = med(lambda ch=ch, sk=sk: ch.tree(sk, device="gpu", dtype="uint32"), 5, sync)
                    row(gname, f"PHAST batched x{k}, GPU, uint32 on the device {tag}", k / (tk / 1e3), "trees/s",
                        us_per_tree=round(tk * 1e3 / k, 2))
            except Exception as e:
                row(gname, f"PHAST GPU {tag} failed: {type(e).__name__}: {e}", 0.0, "")
            # point-to-point
            pairs_s = rng.integers(0, n, args.pairs)
            pairs_t = rng.integers(0, n, args.pairs)
            ch.route(int(pairs_s[0]), int(pairs_t[0]))
            t = time.perf_counter()
            for s_, t_ in zip(pairs_s[:500], pairs_t[:500], strict=True):
                ch.route(int(s_), int(t_))
            row(gname, f"p2p route with path, CPU, Python API {tag}", (time.perf_counter() - t) / 500 * 1e6, "us")
            ch.distances(pairs_s[:10], pairs_t[:10], device="cpu")
            tq = med(lambda ch=ch, ps=pairs_s, pt=pairs_t: ch.distances(ps, pt, device="cpu"), 3)
            row(gname, f"p2p distances batched, CPU {os.cpu_count()} cores {tag}", args.pairs / (tq / 1e3), "queries/s")
            try:
                import numba

                nt = numba.get_num_threads()
                numba.set_num_threads(2)
                tq = med(lambda ch=ch, ps=pairs_s, pt=pairs_t: ch.distances(ps, pt, device="cpu"), 3)
                numba.set_num_threads(nt)
                row(gname, f"p2p distances batched, CPU 2 threads {tag}", args.pairs / (tq / 1e3), "queries/s")
            except Exception as e:
                print("2-thread row failed:", e)
            if not big:  # hub labels (opt in): their build, then the same p2p rows
                t = time.perf_counter()
                lab = ch.hub_labels()
                row(gname, f"hub labels build, CPU {os.cpu_count()} cores {tag}", (time.perf_counter() - t) * 1e3, "ms",
                    MB=round(sum(getattr(a, "nbytes", 0) for a in vars(lab).values()) / 2**20, 1))
                ch.route(int(pairs_s[0]), int(pairs_t[0]))
                t = time.perf_counter()
                for s_, t_ in zip(pairs_s[:500], pairs_t[:500], strict=True):
                    ch.route(int(s_), int(t_))
                row(gname, f"p2p route with path, CPU, Python API, hub labels {tag}",
                    (time.perf_counter() - t) / 500 * 1e6, "us")
                big_s, big_t = rng.integers(0, n, 200000), rng.integers(0, n, 200000)
                import numba

                nt = numba.get_num_threads()
                numba.set_num_threads(2)
                tq = med(lambda ch=ch, ps=big_s, pt=big_t: ch.distances(ps, pt, device="cpu"), 3)
                numba.set_num_threads(nt)
                row(gname, f"p2p distances batched, CPU 2 threads, hub labels {tag}", 200000 / (tq / 1e3), "queries/s")
            try:
                gs, gt = rng.integers(0, n, 10000), rng.integers(0, n, 10000)
                ch.distances(gs[:8], gt[:8], device="gpu")
                tg = med(lambda ch=ch, gs=gs, gt=gt: ch.distances(gs, gt, device="gpu"), 3, sync)
                okg = bool(np.array_equal(ch.distances(pairs_s, pairs_t, device="gpu"),
                                          ch.distances(pairs_s, pairs_t, device="cpu")))
                row(gname, f"p2p distances batched x10000, GPU (PHAST passes) {tag}", 10000 / (tg / 1e3), "queries/s",
                    same_as_cpu=okg)
            except Exception as e:
                row(gname, f"p2p distances GPU {tag} failed: {type(e).__name__}: {e}", 0.0, "")
            d_ref = np.array([gpuroute.sssp(g, int(s_), device="cpu")[t_] for s_, t_ in zip(pairs_s[:3], pairs_t[:3],
                                                                                             strict=True)])
            ok = bool(np.array_equal(ch.distances(pairs_s[:3], pairs_t[:3], device="cpu"), d_ref))
            row(gname, f"p2p distances exact {tag}", float(ok), "bool")
            # tables
            for ns in (1000, 10000) if not big else (1000,):
                S = rng.integers(0, n, ns)
                T = rng.integers(0, n, ns)
                try:
                    ch.table(cp.asarray(S[:8]), cp.asarray(T[:8]), device="gpu")
                    tt = med(lambda ch=ch, S=S, T=T: ch.table(cp.asarray(S), cp.asarray(T), device="gpu",
                                                              dtype="uint32"), 3, sync)
                    row(gname, f"table {ns}x{ns}, GPU {tag}", tt, "ms")
                except Exception as e:
                    row(gname, f"table GPU {tag} failed: {type(e).__name__}: {e}", 0.0, "")
                if ns == 1000:
                    ch.table(S[:4], T[:4], device="cpu")  # numba compiles on the first call of a fresh machine
                    tc = med(lambda ch=ch, S=S, T=T: ch.table(S, T, device="cpu"), 1)
                    row(gname, f"table {ns}x{ns}, CPU {tag}", tc, "ms")
            break_after_first = big
            if break_after_first:
                break
        if rk is not None:
            s_ = int(src[0])
            t_ = int(src[1])
            rk.query(s_, t_)
            t = time.perf_counter()
            for i in range(500):
                rk.query(int(pairs_s[i]), int(pairs_t[i]))
            row(gname, "RoutingKit CCH p2p with path (CPU)", (time.perf_counter() - t) / 500 * 1e6, "us")
            S = rng.integers(0, n, 1000).astype(np.uint32)
            T = rng.integers(0, n, 1000).astype(np.uint32)
            t = time.perf_counter()
            rk.distances_many_to_many(S[:1], T)
            row(gname, "RoutingKit CCH 1x1000 (CPU)", (time.perf_counter() - t) * 1e3, "ms")
            t = time.perf_counter()
            rk.distances_many_to_many(S, T)
            row(gname, "RoutingKit CCH 1000x1000 (CPU)", (time.perf_counter() - t) * 1e3, "ms")
        with open(os.path.join(args.out, "ch.json"), "w") as f:
            json.dump(results, f, indent=1, default=float)
        plots(results, gname, hs, args.out)
    print("\nDone.")


def plot_levels(prof, gname, label, out):
    """Per-launch PHAST times of one tree (the paper's Fig. 12): up levels, the core, down levels."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception:
        return
    fig, ax = plt.subplots(figsize=(8, 3))
    colors = {"up": "tab:blue", "core": "tab:red", "down": "tab:green"}
    for i, (phase, _, _nodes, us) in enumerate(prof):
        ax.bar(i, us, color=colors[phase.split("-")[0]])
    ax.set_xlabel("launch (up levels, core, down levels)")
    ax.set_ylabel("us")
    ax.set_title(f"{gname} [{label}]: PHAST one tree, time per launch (total {sum(p[3] for p in prof):.0f} us)")
    fig.tight_layout()
    fig.savefig(os.path.join(out, f"phast_levels_{gname.replace(' ', '_')}_{label.split()[0]}.png"), dpi=100)


def plots(results, gname, hs, out):
    """CU-CH per iteration (the paper's Fig. 5-6): nodes contracted, shortcuts, time per step."""
    ch = hs.get("CU-CH (GPU)") or hs.get("CU-CH (CPU twin)")
    if ch is None:
        return
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception:
        return
    st = ch.stats
    keys = [k for k, v in st.items() if isinstance(v, list) and v and isinstance(v[0], (int, float))]
    if not keys:
        return
    fig, ax = plt.subplots(len(keys), 1, figsize=(8, 2.0 * len(keys)), sharex=True)
    ax = np.atleast_1d(ax)
    for a, k in zip(ax, keys, strict=True):
        a.plot(st[k], lw=1)
        a.set_ylabel(k, fontsize=7)
        a.set_yscale("symlog")
    ax[-1].set_xlabel("iteration")
    ax[0].set_title(f"{gname}: CU-CH per iteration ({ch.stats.get('device')})")
    fig.tight_layout()
    fig.savefig(os.path.join(out, f"cuch_iterations_{gname.replace(' ', '_')}.png"), dpi=100)


if __name__ == "__main__":
    main()
