"""Benchmark suite: start to first answer of ``gpuroute serve DIR`` on a built dataset, phase by phase (issue 20:
"start to first answer on a built dataset <= 1 s").

Each start runs ``gpuroute serve DIR --workers N --port P`` as a fresh process with numba's cache filled
(``--cache-dir``: the one ``gpuroute build`` / ``gpuroute warmup`` filled; default ``NUMBA_CACHE_DIR`` or numba's
own) and records, per phase, the wall seconds since the process was started and the CPU seconds spent so far:

* from the server's own stamps (``GPUROUTE_START_TRACE``, :func:`gpuroute.cli.warmup.start_stamp`; the CPU is
  the serving parent's ``process_time``): ``cli`` (interpreter up, command line parsed), ``bound`` (the port
  bound), ``imports`` (the server's modules imported), ``cache_checked`` (the kernel modules imported, numba's
  cache looked up), ``loaded`` (``Engine.open``), ``app`` (the application built), ``warmed`` (every service answered once; per service its
  wall and CPU seconds), ``serving`` (uvicorn or the workers' fork next);
* seen from outside (the CPU is the whole process tree's, ``/proc/PID/stat``, 10 ms ticks): ``forked`` (the
  parent has its N workers; N > 1), ``listening`` (a TCP connection is accepted by the kernel), ``health``
  (``GET /health`` answers 200: every service ready), ``first_route`` (a ``GET /route`` answers 200).

``--importtime`` adds one start under ``python -X importtime`` (not counted: the option slows imports) and
lists the modules with the largest cumulative and own import times; ``--profile`` one start under cProfile
(``--workers 1``; stopped with SIGTERM after its first answer) with the functions of largest cumulative time.
``--src LABEL=PATH`` (repeatable) runs the same starts of other source trees (``PYTHONPATH``), interleaved with
each other, for a before / after comparison under the same load; each tree needs its own filled cache entries
(``gpuroute warmup DIR --cache-dir D`` run with that tree: numba keys its cache by source file).

Usage (from the repo root):
    .venv/bin/python -m gpuroute.cli build monaco -o /tmp/monaco.ds --cache-dir /tmp/numba-cache
    .venv/bin/python benchmarks/serve_start.py /tmp/monaco.ds --cache-dir /tmp/numba-cache --workers 1 2 \\
        --repeat 3 --importtime --out benchmarks/results/serve_start_<date>_<label>.json
    .venv/bin/python benchmarks/serve_start.py DIR --src before=/tmp/before/src --src after=src ...

Writes the JSON to ``--out`` (default ``benchmarks/results/serve_start_<date>_<label>_<commit>.json``) and prints
a Markdown table of the medians.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dataset_weight import (  # noqa: E402 - the helpers of the dataset-weight suite
    ROOT,
    children_of,
    commit,
    cpu_model,
    cpu_s,
    free_port,
    get,
    route_path,
)

PY = sys.executable
TRACE_ENV = "GPUROUTE_START_TRACE"  # gpuroute.cli.warmup.START_TRACE_ENV (not imported: the tree under test may differ)
#: The phases in the order a start passes them (stamped by the server, then seen from outside).
SERVER_PHASES = ("cli", "bound", "imports", "cache_checked", "loaded", "app", "warmed", "serving")
CLIENT_PHASES = ("forked", "listening", "health", "first_route")
#: Modules whose cumulative import time is listed apart (what a start may import without needing it first).
WATCHED = ("numpy", "numba", "scipy", "scipy.sparse", "scipy.sparse.csgraph", "scipy.spatial", "cupy", "llvmlite",
           "uvicorn", "starlette", "orjson", "uvloop", "httptools", "gpuroute.engine", "gpuroute.server.app",
           "gpuroute.tours", "gpuroute.crp", "gpuroute.ch", "gpuroute.engine.services.match",
           "gpuroute.engine.match_hmm", "gpuroute.backend", "gpuroute.partition", "gpuroute.accessibility")


def tree_cpu(pid):
    """CPU seconds of ``pid`` and its live children (user + system, 10 ms ticks); None once it is gone."""
    try:
        return cpu_s(pid) + sum(cpu_s(c) for c in children_of(pid))
    except (OSError, IndexError, ValueError):
        return None


def connects(port):
    """Whether the kernel accepts a TCP connection on the port (the socket listens)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


def serve_command(directory, workers, port, cache_dir, prefix=()):
    cmd = [PY, *prefix, "-m", "gpuroute.cli", "serve", str(directory), "--workers", str(workers), "--port",
           str(port)]
    if cache_dir:
        cmd += ["--cache-dir", str(cache_dir)]
    return cmd


def env_for(src, trace=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(src) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop(TRACE_ENV, None)
    if trace is not None:
        env[TRACE_ENV] = str(trace)
    return env


def one_start(directory, workers, route, *, src, cache_dir, limit=180.0, poll=0.005, prefix=(), keep_stderr=False,
              stop=signal.SIGTERM):
    """One start of ``gpuroute serve``: ``{"phases": {phase: {"wall_s", "cpu_s"}}, "warm_services": {service:
    [wall, cpu]}, "tree_cpu_s", "stderr"}`` (wall seconds since the process was started; see the module
    documentation for the phases and their CPU). The server is stopped (``stop``, SIGTERM) after its first
    answer."""
    tmp = Path(tempfile.mkdtemp(prefix="serve_start_"))
    trace, err = tmp / "trace.jsonl", tmp / "stderr.txt"
    port = free_port()
    phases = {}
    with open(err, "w") as ef:
        t0 = time.monotonic()
        p = subprocess.Popen(serve_command(directory, workers, port, cache_dir, prefix), cwd=ROOT,
                             stdout=subprocess.DEVNULL, stderr=ef, env=env_for(src, trace))
        try:
            while "first_route" not in phases:
                now = time.monotonic()
                if now - t0 > limit:
                    raise TimeoutError(f"no /route answer within {limit} s")
                if p.poll() is not None:
                    raise RuntimeError(f"gpuroute serve exited {p.returncode}: {err.read_text()[-2000:]}")
                if workers > 1 and "forked" not in phases and len(children_of(p.pid)) >= workers:
                    phases["forked"] = {"wall_s": now - t0, "cpu_s": tree_cpu(p.pid)}
                if "listening" not in phases:
                    if connects(port):
                        phases["listening"] = {"wall_s": time.monotonic() - t0, "cpu_s": tree_cpu(p.pid)}
                elif "health" not in phases:
                    if get(port, "/health", timeout=30.0) == 200:
                        phases["health"] = {"wall_s": time.monotonic() - t0, "cpu_s": tree_cpu(p.pid)}
                        continue
                elif get(port, route, timeout=30.0) == 200:
                    phases["first_route"] = {"wall_s": time.monotonic() - t0, "cpu_s": tree_cpu(p.pid)}
                    continue
                time.sleep(poll)
            tree = tree_cpu(p.pid)
            per_process = {str(q): cpu_s(q) for q in [p.pid, *children_of(p.pid)]}
        finally:
            p.send_signal(stop)
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    warm, compiled = {}, None
    for line in trace.read_text().splitlines() if trace.exists() else ():
        rec = json.loads(line)
        if rec["pid"] != p.pid or rec["phase"] in phases:
            continue
        phases[rec["phase"]] = {"wall_s": rec["monotonic"] - t0, "cpu_s": rec["cpu"]}
        if rec["phase"] == "warmed":
            cpu = rec.get("services_cpu") or {}
            warm = {k: [v, cpu.get(k)] for k, v in (rec.get("services") or {}).items()}
            compiled = rec.get("compiled")
    stderr = err.read_text()
    for f in (trace, err):
        f.unlink(missing_ok=True)
    tmp.rmdir()
    out = {"phases": phases, "warm_services": warm, "compiled": compiled, "tree_cpu_s": tree,
           "process_cpu_s": per_process}
    if keep_stderr:
        out["stderr"] = stderr
    else:
        out["stderr_tail"] = stderr[-600:]
    return out


def importtime(directory, route, *, src, cache_dir, top=25):
    """One start under ``python -X importtime`` (``--workers 1``): the modules with the largest cumulative and
    own import times, the watched modules' cumulative times, and the number of modules imported."""
    r = one_start(directory, 1, route, src=src, cache_dir=cache_dir, prefix=("-X", "importtime"), keep_stderr=True)
    rows = []
    for line in r.pop("stderr").splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        head, cum_us, name = line.split("|", 2)
        rows.append((name.rstrip(), int(head.split(":", 1)[1]), int(cum_us)))
    by = {name.strip(): cum for name, _, cum in rows}
    first_level = [r for r in rows if not r[0].startswith("  ")]  # imported by no other module: a program's own
    return {"modules": len(rows), "total_s": sum(c for _, _, c in first_level) / 1e6,
            "watched_s": {m: by[m] / 1e6 for m in WATCHED if m in by},
            "top_cumulative": [{"module": n.strip(), "depth": (len(n) - len(n.lstrip())) // 2, "cumulative_s": c / 1e6}
                               for n, _, c in sorted(rows, key=lambda r: -r[2])[:top]],
            "top_self": [{"module": n.strip(), "self_s": s / 1e6}
                         for n, s, _ in sorted(rows, key=lambda r: -r[1])[:top]],
            "top_level": [{"module": n.strip(), "cumulative_s": c / 1e6}
                          for n, _, c in sorted(first_level, key=lambda r: -r[2])[:top]],
            "phases": r["phases"]}


def profile(directory, route, *, src, cache_dir, top=40):
    """One start under cProfile (``--workers 1``), stopped after its first answer: the ``top`` functions by
    cumulative time (pstats' text lines)."""
    import io
    import pstats

    with tempfile.TemporaryDirectory(prefix="serve_start_prof_") as d:
        prof = Path(d) / "serve.prof"
        # SIGINT: uvicorn re-raises the signal it stopped on, and serve returns normally from a KeyboardInterrupt
        # only (SIGTERM would kill the process before cProfile writes)
        r = one_start(directory, 1, route, src=src, cache_dir=cache_dir, prefix=("-m", "cProfile", "-o", str(prof)),
                      stop=signal.SIGINT)
        if not prof.exists():
            return {"error": "no profile written (the server did not exit normally)", "stderr_tail": r["stderr_tail"]}
        buf = io.StringIO()
        pstats.Stats(str(prof), stream=buf).sort_stats("cumulative").print_stats(top)
    return {"phases": r["phases"], "top_cumulative": [ln.rstrip() for ln in buf.getvalue().splitlines() if ln.strip()]}


def summarize(runs):
    """Per variant and worker count, per phase: median and range of wall and CPU seconds."""
    out = {}
    for r in runs:
        out.setdefault(r["variant"], {}).setdefault(str(r["workers"]), []).append(r)
    summary = {}
    for variant, by_w in out.items():
        for w, rs in by_w.items():
            ph = {}
            for name in SERVER_PHASES + CLIENT_PHASES:
                walls = [x["phases"][name]["wall_s"] for x in rs if name in x["phases"]]
                cpus = [x["phases"][name]["cpu_s"] for x in rs if name in x["phases"]
                        and x["phases"][name]["cpu_s"] is not None]
                if walls:
                    ph[name] = {"wall_s": statistics.median(walls), "wall_range": [min(walls), max(walls)],
                                "cpu_s": statistics.median(cpus) if cpus else None}
            services = {}
            for x in rs:
                for k, (wall, cpu) in x["warm_services"].items():
                    services.setdefault(k, ([], []))
                    services[k][0].append(wall)
                    if cpu is not None:
                        services[k][1].append(cpu)
            summary.setdefault(variant, {})[w] = {
                "starts": len(rs), "phases": ph,
                "warm_services": {k: {"wall_s": statistics.median(a), "cpu_s": statistics.median(b) if b else None}
                                  for k, (a, b) in services.items()},
                "tree_cpu_s": statistics.median(x["tree_cpu_s"] for x in rs if x["tree_cpu_s"] is not None)}
    return summary


def markdown(summary):
    lines = []
    for variant, by_w in summary.items():
        for w, s in by_w.items():
            lines.append(f"\n**{variant}, --workers {w}** ({s['starts']} starts; medians; CPU: the parent's at the "
                         "server's stamps, the process tree's from `forked` on)\n")
            lines.append("| phase | wall s since start | CPU s so far |")
            lines.append("|---|---:|---:|")
            for name, v in s["phases"].items():
                cpu = "" if v["cpu_s"] is None else f"{v['cpu_s']:.3f}"
                lines.append(f"| {name} | {v['wall_s']:.3f} [{v['wall_range'][0]:.3f}-{v['wall_range'][1]:.3f}] | "
                             f"{cpu} |")
            if s["warm_services"]:
                lines.append("\nwarm-up per service, wall / CPU s: " + ", ".join(
                    f"{k} {v['wall_s']:.3f} / {'-' if v['cpu_s'] is None else format(v['cpu_s'], '.3f')}"
                    for k, v in s["warm_services"].items()))
    return "\n".join(lines)


def loadavg():
    try:
        return os.getloadavg()
    except OSError:
        return None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset", help="a dataset directory (gpuroute build)")
    ap.add_argument("--workers", type=int, nargs="+", default=[1], metavar="N",
                    help="worker counts to start, interleaved (default 1)")
    ap.add_argument("--repeat", type=int, default=3, help="counted starts per worker count and tree (default 3)")
    ap.add_argument("--discard", type=int, default=1,
                    help="starts run first and not counted (page cache, numba's cache files; default 1)")
    ap.add_argument("--cache-dir", default=os.environ.get("NUMBA_CACHE_DIR"), metavar="DIR",
                    help="numba's cache (gpuroute serve --cache-dir; default NUMBA_CACHE_DIR, else numba's own)")
    ap.add_argument("--src", action="append", default=None, metavar="LABEL=PATH",
                    help="a source tree to start (PYTHONPATH), repeatable; default this repository's src")
    ap.add_argument("--importtime", action="store_true", help="one more start under python -X importtime")
    ap.add_argument("--profile", action="store_true", help="one more start under cProfile (--workers 1)")
    ap.add_argument("--route", default=None, metavar="PATH",
                    help="the first request (default a /route between two nodes of the dataset)")
    ap.add_argument("--label", default="dev")
    ap.add_argument("--out", default=None, metavar="FILE", help="the JSON written")
    args = ap.parse_args(argv)
    if args.repeat < 1 or args.discard < 0 or min(args.workers) < 1:
        ap.error("--repeat >= 1, --discard >= 0 and --workers >= 1 expected")
    directory = Path(args.dataset).resolve()
    if not (directory / "manifest.json").exists():
        ap.error(f"{directory}: not a dataset directory (no manifest.json; gpuroute build GRAPH -o DIR makes one)")
    variants = {}
    for item in args.src or [f"tree={ROOT / 'src'}"]:
        label, sep, path = item.partition("=")
        if not sep or not Path(path).is_dir():
            ap.error(f"--src {item!r}: expected LABEL=PATH of a source folder")
        variants[label] = Path(path).resolve()
    route = args.route or route_path(directory)[0]
    doc = {"suite": "serve_start", "date": str(dt.date.today()), "commit": os.environ.get("GPUROUTE_COMMIT") or commit(),
           "label": args.label, "host": platform.node(), "cpu": cpu_model(), "cores": os.cpu_count(),
           "affinity": len(os.sched_getaffinity(0)), "dataset": str(directory), "cache_dir": args.cache_dir,
           "route": route, "variants": {k: str(v) for k, v in variants.items()}, "loadavg_before": loadavg(),
           "runs": [], "discarded": []}
    for i in range(args.discard + args.repeat):
        for w in args.workers:
            for label, src in variants.items():
                r = one_start(directory, w, route, src=src, cache_dir=args.cache_dir)
                fr = r["phases"].get("first_route", {})
                done = sum((r["compiled"] or {}).values())
                print(f"[{'discarded' if i < args.discard else i - args.discard}] {label} --workers {w}: first /route "
                      f"{fr.get('wall_s', float('nan')):.3f} s wall, tree CPU {r['tree_cpu_s']:.2f} s, {done} functions "
                      f"compiled (load {os.getloadavg()[0]:.1f})", file=sys.stderr, flush=True)
                # the discarded starts are kept apart: the first start after a build may compile what the build's
                # warm-up did not (its "compiled" counts)
                doc["runs" if i >= args.discard else "discarded"].append(
                    dict(r, variant=label, workers=w, round=i - args.discard))
    if args.importtime:
        doc["importtime"] = {label: importtime(directory, route, src=src, cache_dir=args.cache_dir)
                             for label, src in variants.items()}
    if args.profile:
        doc["profile"] = {label: profile(directory, route, src=src, cache_dir=args.cache_dir)
                          for label, src in variants.items()}
    doc["loadavg_after"] = loadavg()
    doc["summary"] = summarize(doc["runs"])
    out = Path(args.out) if args.out else (ROOT / "benchmarks" / "results" /
                                           f"serve_start_{doc['date']}_{args.label}_{doc['commit']}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1))
    print(markdown(doc["summary"]))
    for label, it in (doc.get("importtime") or {}).items():
        print(f"\n{label}: python -X importtime, {it['modules']} modules, {it['total_s']:.3f} s in all; watched: "
              + ", ".join(f"{k} {v:.3f}" for k, v in it["watched_s"].items()))
        print("  top level: " + ", ".join(f"{m['module']} {m['cumulative_s']:.3f}" for m in it["top_level"][:12]))
    print(f"\nwritten {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
