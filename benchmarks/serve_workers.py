"""Benchmark: ``gpuroute serve DIR --workers N`` (issue 20): the memory its processes share, and the time
until every worker answers on a new metric after a ``POST /customize``.

For each dataset (``monaco``, and ``ny-time`` with ``--ny``; built once with ``gpuroute build NAME -o
out/serve_bench/workers/NAME``):

* starts ``python -m gpuroute.cli serve DIR --workers N --port P`` (a fresh copy of the dataset's traffic:
  ``DIR/traffic.npz`` is deleted first) with ``GPUROUTE_SERVE_MEMORY_REPORT`` set;
* memory: sends ``--requests`` routes and a few tables over connections that reach every worker, then reads
  RSS and PSS of the parent and of each worker (``/proc/PID/smaps_rollup``) and has each worker write its
  :func:`gpuroute.server.workers.memory_report` (``SIGUSR1``): per array of the engine, MiB resident and
  MiB private to the worker (not shared with the parent or the page cache);
* switch: one keep-alive connection pinned to each worker; ``--rounds`` times: ``POST /customize``
  (alternately a traffic update of ``--arcs`` arcs, their costs doubled, and a whole metric, ``distance``
  then ``time``), then at once one small route on every pinned connection (one thread each). Recorded: the
  customization's own seconds and the publication's (from its answer), the time the ``/customize`` took,
  and the time from sending it until the last worker answered on the new generation
  (``X-Gpuroute-Generation``), with the same routes' latency without a switch as a baseline.

Usage (from the repo root):
    .venv/bin/python benchmarks/serve_workers.py [--workers 2] [--ny] [--rounds 10] [--out benchmarks/results]
Writes OUT/serve_workers_<date>_<commit>.json and prints Markdown tables. The server is stopped on exit.
"""
from __future__ import annotations

import argparse
import datetime as dt
import http.client
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from serve import commit, cpu_model, free_port, pss_mb, start, stop, stop_all, wait_ready  # noqa: E402

CACHE = ROOT / "out" / "serve_bench" / "workers"


def build(name):
    d = CACHE / name
    if not (d / "manifest.json").exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "gpuroute.cli", "build", name, "-o", str(d)], check=True,
                       env=env(), stdout=subprocess.DEVNULL)
    (d / "traffic.npz").unlink(missing_ok=True)
    return d


def env(**extra):
    return dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""), **extra)


def get(conn, path, method="GET", body=None):
    headers = {"Content-Type": "application/json"} if body is not None else {}
    conn.request(method, path, body=body, headers=headers)
    r = conn.getresponse()
    data = r.read()
    return r.status, int(r.getheader("X-Gpuroute-Worker") or 0), int(r.getheader("X-Gpuroute-Generation") or 0), data


def pinned(port, workers, tries=500):
    """One keep-alive connection per worker: ``{pid: connection}``."""
    out = {}
    for _ in range(tries):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        _, pid, _, _ = get(c, "/health")
        if pid in out:
            c.close()
        else:
            out[pid] = c
        if len(out) == workers:
            return out
    raise RuntimeError(f"only {len(out)} of {workers} workers reached")


def children(pid):
    out = []
    for t in os.listdir(f"/proc/{pid}/task"):
        out += [int(c) for c in Path(f"/proc/{pid}/task/{t}/children").read_text().split()]
    return out


def coords(ds_graph, idx):
    c = ds_graph.coords
    return ";".join(f"{c[i, 0]:.6f},{c[i, 1]:.6f}" for i in idx)


def run_dataset(name, args):
    from gpuroute.engine import Engine

    d = build(name)
    eng = Engine.open(d)
    g = eng.graph
    rng = np.random.default_rng(7)
    n = g.n_nodes
    routes = [f"/route/v1/driving/{coords(g, p)}?overview=false" for p in rng.integers(0, n, (args.requests, 2))]
    tables = [f"/table/v1/driving/{coords(g, rng.integers(0, n, 25))}" for _ in range(4)]
    probe = f"/route/v1/driving/{coords(g, [n // 7, n // 7 + 1])}?overview=false"
    arcs = rng.choice(g.n_arcs, args.arcs, replace=False)
    base_cost = np.asarray(eng.overlay.arc_cost)
    del eng

    reports = Path(tempfile.mkdtemp(prefix="gpuroute-memory-"))
    port = free_port()
    logp = CACHE / f"serve_workers_{name}.log"
    t0 = time.perf_counter()
    p = start([sys.executable, "-m", "gpuroute.cli", "serve", d, "--port", port, "--workers", args.workers],
              logp, env=env(GPUROUTE_SERVE_MEMORY_REPORT=str(reports)))
    out = {"dataset": name, "nodes": int(n), "arcs": int(g.n_arcs)}
    try:
        wait_ready(p, port, "/health", logp, timeout=900)
        out["startup_s"] = time.perf_counter() - t0
        conns = pinned(port, args.workers)
        # memory: every worker serves routes and tables first
        for c in conns.values():
            for path in routes[: len(routes) // args.workers] + tables:
                get(c, path)
        procs = [p.pid, *children(p.pid)]
        out["memory"] = [{"pid": q, "role": "parent" if q == p.pid else "worker",
                          **dict(zip(("rss_mb", "pss_mb"), pss_mb(q), strict=True))} for q in procs]
        for q in procs[1:]:
            os.kill(q, signal.SIGUSR1)
        t = time.monotonic()
        while len(list(reports.glob("memory-*.json"))) < len(procs) - 1 and time.monotonic() - t < 60:
            time.sleep(0.1)
        out["arrays"] = {int(f.stem.split("-")[1]): json.loads(f.read_text()) for f in reports.glob("memory-*.json")}
        # baseline: the probe route on every pinned connection at once, no switch
        out["baseline_ms"] = [1e3 * x for x in [all_workers(conns, probe, None)[0] for _ in range(args.rounds)]]
        rounds = []
        gen = 0
        for k in range(args.rounds):
            if k % 2 == 0:
                factor = 2 if (k // 2) % 2 == 0 else 1
                body = {"updates": [{"arc": int(a), "cost": int(factor * base_cost[a])} for a in arcs]}
                kind = f"update {args.arcs} arcs"
            else:
                body = {"metric": "distance" if (k // 2) % 2 == 0 else "time"}
                kind = f"metric {body['metric']}"
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
            t_send = time.perf_counter()
            status, _, _, data = get(c, "/customize", "POST", json.dumps(body))
            t_done = time.perf_counter()
            c.close()
            res = json.loads(data)
            assert status == 200, res
            gen = res["workers"]["generation"]
            last, gens = all_workers(conns, probe, t_send)
            assert all(x == gen for x in gens), (gen, gens)
            rounds.append({"kind": kind, "generation": gen, "customize_s": res["seconds"],
                           "publish_s": res["workers"]["publish_seconds"], "state_mb": res["workers"]["bytes"] / 2 ** 20,
                           "saved_s": (res.get("saved") or {}).get("seconds"), "answer_ms": 1e3 * (t_done - t_send),
                           "all_workers_ms": 1e3 * last})
        out["rounds"] = rounds
    finally:
        stop(p)
    return out


def all_workers(conns, path, t_send):
    """The probe on every pinned connection at once: (seconds from ``t_send`` -- or from the start -- until
    the last answer, generations answered on)."""
    res = {}
    t_start = time.perf_counter() if t_send is None else t_send

    def one(pid, c):
        _, _, g, _ = get(c, path)
        res[pid] = (time.perf_counter() - t_start, g)

    th = [threading.Thread(target=one, args=kv) for kv in conns.items()]
    for t in th:
        t.start()
    for t in th:
        t.join()
    return max(v[0] for v in res.values()), [v[1] for v in res.values()]


def markdown(res):
    lines = []
    for r in res["datasets"]:
        lines += [f"### {r['dataset']} ({r['nodes']:,} nodes, {r['arcs']:,} arcs), {res['workers']} workers", "",
                  "| process | RSS MiB | PSS MiB |", "|---|---:|---:|"]
        lines += [f"| {m['role']} {m['pid']} | {m['rss_mb']:.0f} | {m['pss_mb']:.0f} |" for m in r["memory"]]
        lines += ["", "| worker: largest arrays | MiB | resident | private (copied) |", "|---|---:|---:|---:|"]
        for pid, rep in sorted(r["arrays"].items()):
            for a in rep["arrays"][:8]:
                lines.append(f"| {pid} {a['name']} | {a['mb']:.1f} | {a['resident_mb']:.1f} | {a['private_mb']:.1f} |")
            lines.append(f"| {pid} all arrays >= 64 KiB | | {rep['shared_mb'] + rep['private_mb']:.1f} | "
                         f"{rep['private_mb']:.1f} |")
        lines += ["", "| /customize | customization ms | publish ms | state MiB | answer ms | all workers on it ms |",
                  "|---|---:|---:|---:|---:|---:|"]
        for k in r["rounds"]:
            lines.append(f"| {k['kind']} | {1e3 * k['customize_s']:.1f} | {1e3 * k['publish_s']:.1f} | "
                         f"{k['state_mb']:.1f} | {k['answer_ms']:.1f} | {k['all_workers_ms']:.1f} |")
        b = np.median(r["baseline_ms"])
        lines += ["", f"Baseline (the probe route on every worker at once, no switch): median {b:.1f} ms.", ""]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--ny", action="store_true", help="ny-time too (built once, ~40 s on 2 cores)")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--arcs", type=int, default=100, help="arcs of a traffic update")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = ap.parse_args()
    res = {"benchmark": "serve_workers", "date": dt.date.today().isoformat(), "commit": commit(),
           "host": {"hostname": platform.node(), "cpu": cpu_model(), "cores": os.cpu_count()},
           "workers": args.workers, "config": vars(args), "datasets": []}
    try:
        for name in ["monaco"] + (["ny-time"] if args.ny else []):
            print(f"## {name}", flush=True)
            res["datasets"].append(run_dataset(name, args))
    finally:
        stop_all()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"serve_workers_{res['date']}_{res['commit']}.json"
    path.write_text(json.dumps(res, indent=1, default=float) + "\n")
    md = markdown(res)
    path.with_suffix(".md").write_text(md + "\n")
    print(f"wrote {path}\n\n{md}")


if __name__ == "__main__":
    main()
