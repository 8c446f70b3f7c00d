"""Benchmark suite: the weight of a built dataset -- on disk, at start-up, in memory (issue 20, deliverables
4 and 6; the table's rows "dataset on disk", "start to first answer" and "resident memory").

For each extract (the shipped Monaco; Andorra from the shared data, ``../shared/data/osm``) built with OSRM's
own car.lua (``gpuroute build X.osm.pbf --profile car.lua -o DIR``; the profile from
``$GPUROUTE_OSRM_PROFILES`` or the osrm-bindings wheel, ``bash .ci/fetch_osrm.sh``), in fresh processes:

* ``answers``: the SHA-256 of the body of each of a fixed set of requests (every service, options that select
  other paths; :func:`child_answers`) and one digest over them: a change that keeps the answers keeps it.
* ``build``: the seconds of ``gpuroute build`` and of each of its stages (the manifest's ``seconds``).
* ``disk``: bytes on disk per part (``graph/``, ``ch/``, ``partition/``, ``overlay/``) and per array: its
  dtype, shape, value range and the narrowest integer dtype that holds its values exactly, and the seconds
  ``np.load`` takes (page cache warm: the start of a server that was started before).
* ``parts``: per part the seconds its loader takes (:func:`gpuroute.engine.dataset.load_dataset`'s
  ``seconds``) against the seconds to recompute it from its inputs (the build's stage time), and the
  services that read it: every request of the server's warm-up (every service, both isochrone metrics,
  a customization) answered in-process with the engine's hierarchy wrapped so that any attribute read of
  it is recorded per service (a part no service reads is dead weight).
* ``start``: ``gpuroute serve DIR --workers 1 --port P`` until its first ``/route`` answers 200, wall and
  CPU seconds of the server process (median of ``--repeat`` starts; numba's cache warm: one start runs first and is not counted), and where that time
  goes: imports, ``Engine.open``, the application, the warm-up per service, measured in one child process
  that does what ``serve`` does, with its ``cProfile`` (top functions by cumulative time) and
  ``python -X importtime`` (the modules that cost most, and the total of ``import gpuroute``).
* ``memory``: RSS, PSS and USS (``/proc/PID/smaps_rollup``, MiB; USS: the pages only that process maps, what one
  more forked worker adds) of the one process of ``--workers 1`` and of the parent and each worker of ``--workers 2``, after each answered a few ``/route``, ``/table`` and
  ``/nearest``.

Usage (from the repo root; ~2 minutes per extract on a 2-core machine):
    .venv/bin/python benchmarks/dataset_weight.py --label before
    .venv/bin/python benchmarks/dataset_weight.py --label after [--extracts monaco andorra] [--repeat 3]
    .venv/bin/python benchmarks/dataset_weight.py --dataset DIR ...   # an existing dataset directory only
    .venv/bin/python benchmarks/dataset_weight.py --ab /tmp/before/src DIR_BEFORE DIR_AFTER --repeat 5
        # starts of a copy of the tree before a change and of this one, interleaved (a shared machine's load
        # hits both alike)

Writes OUT/dataset_weight_<date>_<label>_<commit>.json (default OUT: benchmarks/results) and prints a
Markdown summary. Datasets are built under out/dataset_weight/<label>/ (rebuilt on every run).
"""
from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
PY = sys.executable
WORK = ROOT / "out" / "dataset_weight"


# ---------------------------------------------------------------------------------------------- context
def commit():
    try:
        c = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                           check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return c + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def cpu_model():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def extract_path(name):
    """The PBF of an extract: the shipped one, else the shared data's (``$GPUROUTE_SHARED_DATA``, else
    ``../shared/data`` beside the checkout, as the tests read it); None where absent."""
    shared = Path(os.environ.get("GPUROUTE_SHARED_DATA") or ROOT.parent / "shared" / "data")
    for p in (ROOT / "src" / "gpuroute" / "datasets" / "data" / f"{name}.osm.pbf", shared / "osm" / f"{name}.osm.pbf"):
        if p.is_file():
            return p
    return None


def car_profile():
    from gpuroute.io.lua_extract import find_osrm_profile

    return find_osrm_profile("car")  # FileNotFoundError saying how to get it


# ---------------------------------------------------------------------------------------------- disk
def narrowest(a):
    """The narrowest integer dtype holding every value of integer array ``a`` exactly (None: not integers)."""
    import numpy as np

    if a.dtype.kind not in "iu":
        return None
    if a.size == 0:
        return "int8"
    lo, hi = int(a.min()), int(a.max())
    for t in ("int8", "int16", "int32", "int64"):
        info = np.iinfo(t)
        if info.min <= lo and hi <= info.max:
            return t
    return str(a.dtype)


def disk(directory):
    """Bytes per part and per array file (dtype, shape, range, narrowest dtype, np.load seconds)."""
    import numpy as np

    directory = Path(directory)
    parts, arrays = {}, []
    for p in sorted(directory.rglob("*")):
        if not p.is_file():
            continue
        rel = p.relative_to(directory)
        part = rel.parts[0] if len(rel.parts) > 1 else "."
        parts[part] = parts.get(part, 0) + p.stat().st_size
        if p.suffix == ".npy":
            t0 = time.perf_counter()
            a = np.load(p, allow_pickle=False)
            secs = time.perf_counter() - t0
            row = {"file": str(rel), "bytes": p.stat().st_size, "dtype": str(a.dtype), "shape": list(a.shape),
                   "load_s": secs, "narrowest": narrowest(a)}
            if a.dtype.kind in "iuf" and a.size:
                row["min"], row["max"] = float(a.min()), float(a.max())
            arrays.append(row)
    return {"total_bytes": sum(parts.values()), "parts": parts, "arrays": arrays}


# ---------------------------------------------------------------------------------------------- build
def build(pbf, profile, out):
    if out.exists():
        import shutil

        shutil.rmtree(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    subprocess.run([PY, "-m", "gpuroute.cli", "build", str(pbf), "--profile", str(profile), "-o", str(out)],
                   check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    man = json.loads((out / "manifest.json").read_text())
    return {"wall_s": wall, "stages_s": man.get("seconds", {}), "format_version": man.get("version")}


# ---------------------------------------------------------------------------------------------- parts (child)
class Spy:
    """Wraps an object; records the names of the attributes read through it (in ``log``)."""

    def __init__(self, obj, log):
        object.__setattr__(self, "_obj", obj)
        object.__setattr__(self, "_log", log)

    def __getattr__(self, name):
        self._log.append(name)
        return getattr(self._obj, name)


def child_parts(directory):
    """Per part: load seconds, recompute seconds, and the services that read it (JSON on stdout)."""
    import numpy as np  # noqa: F401

    from gpuroute.engine import Engine
    from gpuroute.engine.dataset import load_dataset, read_manifest
    from gpuroute.server import create_app
    from gpuroute.server.app import parse_request
    from gpuroute.server.warmup import TRIP_STOPS, _requests, off_network_point, warm_points

    man = read_manifest(directory)
    ds = load_dataset(directory)
    load_s = dict(ds.seconds)
    # recompute: each stage from its inputs, as the build ran it (the hierarchy once more here: a build
    # without it records no contract time)
    recompute = dict(man.get("seconds") or {})
    if "contract" not in recompute:
        from gpuroute.ch import ContractionHierarchy

        t0 = time.perf_counter()
        ContractionHierarchy.build(ds.graph, man["weight"], progress=False)
        recompute["contract"] = time.perf_counter() - t0
    eng = Engine.open(directory)
    log = []
    has_ch = "_ch" in vars(eng) or "ch" in vars(eng)
    key = "_ch" if "_ch" in vars(eng) else "ch"
    before = vars(eng).get(key)
    if before is not None:
        vars(eng)[key] = Spy(before, log)
    app = create_app(eng, warm_up=False, allow_customize=True)
    server = app.state.adapter
    pts = warm_points(eng, TRIP_STOPS)
    readers = {}
    for service, coords, options in _requests(server.services, pts, server.limits, off_network_point(eng)):
        n0 = len(log)
        status, _ = server.work(parse_request(service, "bench", coords, options, server.limits))
        assert status == 200, (service, options, status)
        after = vars(eng).get(key)
        if len(log) > n0 or (before is None and after is not None):
            readers.setdefault(service, sorted(set(log[n0:])) or ["(built on demand)"])
    n0 = len(log)
    eng.warm_customize()
    if len(log) > n0:
        readers["customize"] = sorted(set(log[n0:]))
    print(json.dumps({"load_s": load_s, "recompute_s": recompute, "ch_readers": readers, "engine_has_ch_slot": has_ch,
                      "ch_loaded_at_open": before is not None}))


# ---------------------------------------------------------------------------------------------- answers (child)
def child_answers(directory, n=40):
    """SHA-256 of the body of each of a fixed set of requests (the warm-up's, then ``n`` routes with steps
    and annotations, ``n // 4`` tables, trips and isochrones between nodes drawn with a fixed seed), answered
    in-process through the server's path (JSON on stdout): two builds or two versions of the code answer
    alike when the digests are equal."""
    import hashlib

    import numpy as np

    from gpuroute.engine import Engine
    from gpuroute.server import create_app
    from gpuroute.server.app import parse_request
    from gpuroute.server.warmup import TRIP_STOPS, _requests, off_network_point, warm_points

    eng = Engine.open(directory)
    app = create_app(eng, warm_up=False, allow_customize=True)
    server = app.state.adapter
    reqs = list(_requests(server.services, warm_points(eng, TRIP_STOPS), server.limits, off_network_point(eng)))
    c = np.asarray(eng.graph.coords, dtype=np.float64)
    rng = np.random.default_rng(20)

    def pts(k):
        return ";".join(f"{c[i, 0]:.6f},{c[i, 1]:.6f}" for i in rng.integers(0, len(c), k))

    for _ in range(n):
        reqs.append(("route", pts(2), {"steps": "true", "annotations": "true", "overview": "full"}))
    for _ in range(n // 4):
        reqs.append(("route", pts(3), {"alternatives": "true", "continue_straight": "false"}))
        reqs.append(("table", pts(12), {"annotations": "duration,distance"}))
        reqs.append(("trip", pts(6), {}))
        reqs.append(("nearest", pts(1), {"number": "3"}))
        reqs.append(("isochrone", pts(1), {"contours_minutes": "2,4"}))
    out, h = [], hashlib.sha256()
    for service, coords, options in reqs:
        status, body = server.work(parse_request(service, "bench", coords, options, server.limits))
        d = hashlib.sha256(bytes(body)).hexdigest()
        out.append([service, status, d[:16]])
        h.update(f"{service} {status} {d}\n".encode())
    print(json.dumps({"requests": len(out), "digest": h.hexdigest(), "answers": out,
                      "status_counts": {str(k): sum(1 for r in out if r[1] == k) for k in {r[1] for r in out}}}))


# ---------------------------------------------------------------------------------------------- start (child)
def self_rss_mb():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return None


def child_start(directory, prof_out):
    """What ``gpuroute serve DIR`` does before it listens, timed, under cProfile, with the process's RSS
    after each step (JSON on stdout)."""
    import cProfile
    import pstats

    rss = {"python": self_rss_mb()}
    t_all = time.perf_counter()
    pr = cProfile.Profile()
    pr.enable()
    t0 = time.perf_counter()
    import uvicorn  # noqa: F401

    from gpuroute.engine import Engine
    from gpuroute.server import create_app, warm_up
    t_import = time.perf_counter() - t0
    rss["imports"] = self_rss_mb()
    t0 = time.perf_counter()
    eng = Engine.open(directory)
    t_open = time.perf_counter() - t0
    rss["open"] = self_rss_mb()
    t0 = time.perf_counter()
    app = create_app(eng, warm_up=True)
    t_app = time.perf_counter() - t0
    t0 = time.perf_counter()
    report = warm_up(app)
    t_warm = time.perf_counter() - t0
    rss["warm_up"] = self_rss_mb()
    pr.disable()
    total = time.perf_counter() - t_all
    pr.dump_stats(prof_out)
    import io

    buf = io.StringIO()
    st = pstats.Stats(prof_out, stream=buf)
    st.sort_stats("cumulative").print_stats(30)
    top = [line.rstrip() for line in buf.getvalue().splitlines() if line.strip()][-31:]
    print(json.dumps({"import_s": t_import, "open_s": t_open, "app_s": t_app, "warm_s": t_warm,
                      "warm_services_s": report["services"], "total_s": total, "rss_mb_after": rss,
                      "profile_top": top}))


def import_time():
    """``python -X importtime`` of what ``serve`` imports before it opens the dataset: total seconds of
    ``import gpuroute`` and of the whole, and the 15 modules with the largest cumulative times."""
    code = "import uvicorn, gpuroute.cli.serve, gpuroute.engine, gpuroute.server"
    t0 = time.perf_counter()
    r = subprocess.run([PY, "-X", "importtime", "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    wall = time.perf_counter() - t0
    rows = []
    for line in r.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        head, cum_us, name = line.split("|", 2)
        rows.append((name.strip(), int(head.split(":", 1)[1]), int(cum_us)))
    by = {name: cum for name, _, cum in rows}
    top = sorted(rows, key=lambda r: -r[1])[:15]
    heavy = {m: by[m] / 1e6 for m in ("numba", "scipy.sparse", "scipy.sparse.csgraph", "gpuroute.partition",
                                      "gpuroute.accessibility", "gpuroute.tours", "gpuroute.crp", "gpuroute.ch")
             if m in by}
    return {"wall_s": wall, "gpuroute_s": by.get("gpuroute", 0) / 1e6, "heavy_s": heavy,
            "top_self": [{"module": n, "self_s": s / 1e6, "cumulative_s": c / 1e6} for n, s, c in top],
            "modules": len(rows)}


# ---------------------------------------------------------------------------------------------- serve
def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port, path, timeout=2.0):
    """HTTP status of a GET (None: no connection)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
            data = b""
            while b"\r\n" not in data:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
            while chunk:
                chunk = s.recv(65536)
            return int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else None
    except OSError:
        return None


def children_of(pid):
    out = []
    try:
        for t in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):
                out += [int(c) for c in Path(f"/proc/{pid}/task/{t}/children").read_text().split()]
    except OSError:
        pass
    return out


def cpu_s(pid):
    """User + system CPU seconds of a process (and its waited-for children) from /proc/PID/stat: on a
    shared machine a start's CPU time moves far less with the load than its wall time."""
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in f[11:15]) / os.sysconf("SC_CLK_TCK")


def mem_mb(pid):
    """(Rss, Pss, Uss) MiB from /proc/PID/smaps_rollup; Uss: the pages this process alone maps
    (``Private_Clean + Private_Dirty``), what one more forked worker adds."""
    rss = pss = uss = 0.0
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Rss:"):
            rss = int(line.split()[1]) / 1024
        elif line.startswith("Pss:"):
            pss = int(line.split()[1]) / 1024
        elif line.startswith(("Private_Clean:", "Private_Dirty:")):
            uss += int(line.split()[1]) / 1024
    return round(rss, 1), round(pss, 1), round(uss, 1)


class Server:
    def __init__(self, directory, workers, src=None):
        """``gpuroute serve DIR --workers N`` on a free port; ``src``: another source tree to run
        (``PYTHONPATH``), for an interleaved comparison."""
        self.port = free_port()
        env = dict(os.environ)
        if src is not None:
            env["PYTHONPATH"] = str(src)
        self.t0 = time.perf_counter()
        self.p = subprocess.Popen([PY, "-m", "gpuroute.cli", "serve", str(directory), "--workers", str(workers),
                                   "--port", str(self.port)], cwd=ROOT, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True, env=env)

    def first_answer(self, path, limit=180.0):
        while time.perf_counter() - self.t0 < limit:
            if self.p.poll() is not None:
                raise RuntimeError(f"gpuroute serve exited {self.p.returncode}: {self.p.stderr.read()[-2000:]}")
            if get(self.port, path, timeout=5.0) == 200:
                return time.perf_counter() - self.t0
            time.sleep(0.01)
        raise TimeoutError(f"no answer in {limit} s")

    def stop(self):
        self.p.terminate()
        try:
            self.p.wait(20)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        return self.p.stderr.read()


def route_path(directory):
    import numpy as np

    from gpuroute.store import load_graph

    c = np.asarray(load_graph(Path(directory) / "graph").coords)
    a, b = c[len(c) // 3], c[2 * len(c) // 3]
    pts = [c[i] for i in np.linspace(0, len(c) - 1, 10).astype(int)]
    coords = ";".join(f"{x:.6f},{y:.6f}" for x, y in pts)
    return (f"/route/v1/driving/{a[0]:.6f},{a[1]:.6f};{b[0]:.6f},{b[1]:.6f}", f"/table/v1/driving/{coords}",
            f"/nearest/v1/driving/{a[0]:.6f},{a[1]:.6f}")


def start_times(directory, repeat):
    route, _, _ = route_path(directory)
    times, cpu = [], []
    for i in range(repeat + 1):  # the first start warms numba's cache and the page cache: not counted
        s = Server(directory, 1)
        try:
            t = s.first_answer(route)
            c = cpu_s(s.p.pid)
        finally:
            s.stop()
        if i:
            times.append(t)
            cpu.append(c)
    return {"runs_s": times, "median_s": statistics.median(times), "cpu_s": cpu, "median_cpu_s": statistics.median(cpu)}


def interleaved(pairs, rounds):
    """Start to first ``/route`` and RSS/PSS of one process, alternating between ``pairs`` (``label ->
    (source tree or None, dataset directory)``) for ``rounds`` rounds after one uncounted round, so that
    both sides see the same load of a shared machine."""
    out = {k: {"runs_s": [], "cpu_s": [], "rss_pss_mb": []} for k in pairs}
    for i in range(rounds + 1):
        for label, (src, directory) in pairs.items():
            route, table, near = route_path(directory)
            s = Server(directory, 1, src)
            try:
                t = s.first_answer(route)
                c = cpu_s(s.p.pid)
                for p in (route, table, near):
                    assert get(s.port, p, timeout=30.0) == 200, p
                m = mem_mb(s.p.pid)
            finally:
                s.stop()
            if i:
                out[label]["runs_s"].append(t)
                out[label]["cpu_s"].append(c)
                out[label]["rss_pss_mb"].append(m)
    for r in out.values():
        r["median_s"] = statistics.median(r["runs_s"])
        r["median_cpu_s"] = statistics.median(r["cpu_s"])
        r["median_rss_mb"] = statistics.median(m[0] for m in r["rss_pss_mb"])
        r["median_pss_mb"] = statistics.median(m[1] for m in r["rss_pss_mb"])
    return out


def memory(directory):
    paths = route_path(directory)
    out = {}
    for workers in (1, 2):
        s = Server(directory, workers)
        try:
            s.first_answer(paths[0])
            for _ in range(6 * workers):
                for p in paths:
                    assert get(s.port, p, timeout=30.0) == 200, p
            kids = children_of(s.p.pid)
            out[f"workers_{workers}"] = {"parent": mem_mb(s.p.pid), "workers": [mem_mb(k) for k in kids]}
        finally:
            s.stop()
    return out


# ---------------------------------------------------------------------------------------------- main
def run_child(args, *extra):
    r = subprocess.run([PY, __file__, *args], capture_output=True, text=True, cwd=ROOT)
    if r.returncode:
        raise RuntimeError(f"{args}: exit {r.returncode}\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def measure(directory, repeat):
    res = {"directory": str(directory), "disk": disk(directory)}
    res["answers"] = run_child(["--child-answers", str(directory)])
    print(f"  answers: {res['answers']['requests']} requests, digest {res['answers']['digest'][:16]}", flush=True)
    print(f"  disk: {res['disk']['total_bytes'] / 1e6:.2f} MB", flush=True)
    res["parts"] = run_child(["--child-parts", str(directory)])
    print(f"  parts: load {res['parts']['load_s']}  readers of ch: {res['parts']['ch_readers']}", flush=True)
    res["imports"] = import_time()
    prof = WORK / f"start_{Path(directory).name}.prof"
    res["start_breakdown"] = run_child(["--child-start", str(directory), str(prof)])
    b = res["start_breakdown"]
    print(f"  start in-process: import {b['import_s']:.2f} s, open {b['open_s']:.2f} s, warm {b['warm_s']:.2f} s",
          flush=True)
    res["start"] = start_times(directory, repeat)
    print(f"  start to first /route: {res['start']['median_s']:.2f} s ({res['start']['runs_s']})", flush=True)
    res["memory"] = memory(directory)
    print(f"  memory: {res['memory']}", flush=True)
    return res


def summary_md(doc):
    lines = ["| extract | on disk (MB) | ch/ (MB) | build (s) | load (s) | imports (s) | open (s) | warm-up (s) | "
             "start to first /route (s) | RSS / PSS 1 process (MiB) | PSS parent / worker (worker USS), 2 workers (MiB) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in doc["extracts"].items():
        d, p, b, m = r["disk"], r["parts"], r["start_breakdown"], r["memory"]
        one = m["workers_1"]["parent"]
        two = m["workers_2"]
        w = two["workers"][0] if two["workers"] else (0, 0, 0)
        lines.append(f"| {name} | {d['total_bytes'] / 1e6:.2f} | {d['parts'].get('ch', 0) / 1e6:.2f} | "
                     f"{r['build']['wall_s']:.1f} | {sum(p['load_s'].values()):.3f} | {b['import_s']:.2f} | "
                     f"{b['open_s']:.2f} | {b['warm_s']:.2f} | {r['start']['median_s']:.2f} | "
                     f"{one[0]:.0f} / {one[1]:.0f} | {two['parent'][1]:.0f} / {w[1]:.0f} ({w[2]:.0f}) |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--label", default="run")
    ap.add_argument("--extracts", nargs="+", default=["monaco", "andorra"])
    ap.add_argument("--dataset", nargs="*", default=None, help="measure these dataset directories (no build)")
    ap.add_argument("--repeat", type=int, default=3, help="starts counted (after one uncounted)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--child-parts", help=argparse.SUPPRESS)
    ap.add_argument("--child-start", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--child-answers", help=argparse.SUPPRESS)
    ap.add_argument("--ab", nargs=3, metavar=("SRC", "DIR_A", "DIR_B"),
                    help="only: interleaved starts of SRC (another checkout's src/, e.g. a copy of the tree before "
                         "a change) serving DIR_A and of this checkout serving DIR_B (--repeat rounds)")
    args = ap.parse_args(argv)
    if args.child_parts:
        return child_parts(args.child_parts)
    if args.child_start:
        return child_start(*args.child_start)
    if args.child_answers:
        return child_answers(args.child_answers)
    if args.ab:
        src, a, b = args.ab
        doc = {"suite": "dataset_weight_ab", "label": args.label, "commit": commit(),
               "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
               "machine": {"cpu": cpu_model(), "cores": os.cpu_count(), "loadavg_start": os.getloadavg()},
               "a": {"src": src, "dataset": a}, "b": {"src": str(ROOT / "src"), "dataset": b}}
        doc["start"] = interleaved({"a": (src, a), "b": (None, b)}, args.repeat)
        doc["machine"]["loadavg_end"] = os.getloadavg()
        path = Path(args.out) / (f"dataset_weight_ab_{dt.date.today().isoformat()}_{args.label}_"
                                 f"{doc['commit'].replace('+', '_')}.json")
        path.write_text(json.dumps(doc, indent=1))
        for k in ("a", "b"):
            r = doc["start"][k]
            print(f"{k}: {doc[k]['dataset']}: start to first /route {r['median_s']:.2f} s (runs "
                  f"{', '.join(f'{x:.2f}' for x in r['runs_s'])}), CPU {r['median_cpu_s']:.2f} s, RSS {r['median_rss_mb']:.0f} MiB, "
                  f"PSS {r['median_pss_mb']:.0f} MiB")
        print(f"written {path}")
        return 0
    doc = {"suite": "dataset_weight", "label": args.label, "commit": commit(),
           "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "machine": {
               "cpu": cpu_model(), "cores": os.cpu_count(), "python": platform.python_version(),
               "loadavg_start": os.getloadavg()}, "extracts": {}}
    if args.dataset:
        todo = [(Path(d).name, None, Path(d)) for d in args.dataset]
    else:
        prof = car_profile()
        doc["profile"] = str(prof)
        todo = []
        for name in args.extracts:
            pbf = extract_path(name)
            if pbf is None:
                print(f"{name}: no extract (looked in src/gpuroute/datasets/data and ../shared/data/osm); skipped")
                continue
            todo.append((name, pbf, WORK / args.label / f"{name}_car"))
    for name, pbf, directory in todo:
        print(f"{name}:", flush=True)
        info = {}
        if pbf is not None:
            info = build(pbf, doc["profile"], directory)
            print(f"  build: {info['wall_s']:.1f} s {info['stages_s']}", flush=True)
        res = measure(directory, args.repeat)
        res["build"] = info or {"wall_s": float("nan"), "stages_s": {}}
        doc["extracts"][name] = res
    doc["machine"]["loadavg_end"] = os.getloadavg()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"dataset_weight_{dt.date.today().isoformat()}_{args.label}_{doc['commit'].replace('+', '_')}.json"
    path.write_text(json.dumps(doc, indent=1))
    print(summary_md(doc))
    print(f"written {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
