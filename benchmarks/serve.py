"""Benchmark suite: the HTTP service under load on loopback, ``gpuroute serve`` side by side with
``osrm-routed --algorithm ch`` on the same extract and machine, in one run (issue 12).

For each graph (Monaco; Andorra too with ``--full``):

* gpuroute: ``python -m gpuroute.cli serve PBF --threads T`` (one uvicorn process: one asyncio event loop
  with h11, plus at most T worker threads running the engine and the JSON encoding).
* OSRM: ``osrm-extract -p car.lua`` (OSRM's own car profile), ``osrm-contract``, ``osrm-routed --algorithm
  ch -t T`` (cached under ``out/serve_bench/osrm/``). The two profiles differ (OSRM's car.lua has turn and
  traffic-signal penalties, other speeds and access rules): durations are compared as context only.

Each server is driven by the same request mix from an asyncio load generator in this process (N concurrent
clients, each on its own keep-alive connection; N = 1, 8, 32 by default; a fixed request count per level,
bounded in time): ``GET /route/v1/driving/{a};{b}?overview=simplified&steps=false`` between random node
coordinates of the graph (the same pairs for both servers) and ``GET /table/v1/driving/{100 coordinates}``
(100 x 100 durations; the URL is ~2 kB, under both servers' limits, so both get the same GET).
Recorded per server, service and N: p50/p95/p99/max latency (ms), throughput (req/s), errors (any non-200
or transport error; the first is logged; must be 0), the server's CPU seconds and the load generator's
(this process; it shares the cores with the server), RSS of the server before/after each level and its
peak (VmHWM). ``--workers N`` is passed to ``gpuroute serve`` (issue 20: N worker processes); the server's CPU
is then summed over its processes and each level records RSS and PSS (``/proc/PID/smaps_rollup``) per
process (``processes_mem``, ``tree_pss_mb``). With ``--big-table K`` (default 3 with --full), K 1000 x 1000 tables one at a time. A
sample of routes and one table are then compared between the two servers (duration within 5%).

Load generators (``--client``): ``raw`` (the default: a minimal HTTP/1.1 keep-alive GET client on asyncio
streams) or ``httpx`` (httpx.AsyncClient). httpx costs ~1-3 ms of client CPU per request on the cores the
server runs on: on a 2-core machine it caps osrm-routed's /route at ~200-500 req/s where the raw client
measures ~1,700, so its numbers say more about httpx than about the servers.

``--dataset`` (issue 19) serves what users run instead: ``gpuroute build X.osm.pbf --profile <OSRM's car.lua>
-o DIR`` then ``gpuroute serve DIR`` (turn-aware routes over the overlay; the dataset is rebuilt on every run,
under out/serve_bench/dataset/), against ``osrm-extract -p car.lua``, ``osrm-partition``, ``osrm-customize``,
``osrm-routed --algorithm mld`` (cached under out/serve_bench/osrm_mld/), both with the same unmodified car.lua
of the osrm-bindings wheel (.ci/fetch_osrm.sh). Extracts: the shipped Monaco, Andorra and Helsinki from the
shared data. Requests: ``/route/v1/driving/a;b?overview=full`` between random snappable points (inside
segments of the dataset's snapping index, as tests/server/test_osrm_differential_profile.py picks them) at 1
and 4 clients, ``/table/v1/driving/<100 coordinates>`` at 1 client; the same requests to both servers.
Recorded as above (server CPU ms per request from /proc, p50 latency, ...); HTTP 400 NoRoute/NoSegment answers
are counted apart (``no_route``) and are not failures. A sample of 200 routes (duration and distance) and one
table are compared (within 1 %). The requests are written next to the result (``.requests.json.gz``);
``--requests-from EARLIER.json`` sends the same ones again and adds a before -> now table.

``/trip`` (``--dataset``): ``--trips N`` (default 20; 10 with --quick) trips of each of ``--trip-sizes K ...``
(default 12) random snappable points (drawn as the routes' and tables', from a second random stream of the
seed, so the routes and tables of a seed stay what they were), ``/trip/v1/driving/<K coordinates>?roundtrip=
true&source=any&destination=any`` (OSRM's defaults, overview=simplified, no steps) at one client, the same
requests in the same order to both servers; rows ``trip K`` (p50/p95 latency, server CPU ms per request, as
the others). Agreement: each trip's total duration (``trips[0].duration``), gpuroute / osrm-routed, per
size: the ratio's distribution (each trip's: ``ratios``) and the share where ours is not longer
(``ours_le_theirs``, 0.05 s slack for OSRM's rounding; ``ours_le_theirs_01pct``: nor by 0.1 %). OSRM brute-forces the order up to 10 stops (exact on its matrix) and uses farthest
insertion past 10, gpuroute is exact up to ``config.TOUR_EXACT_MAX_N`` (12) and searches past it: at 12
stops ours should be <= theirs wherever the two matrices agree (the route agreement says how closely they
do). An earlier ``--requests-from`` file without trips gets them drawn as above. A last table (and
``side_by_side`` in the JSON) puts each gpuroute row over osrm-routed's of the same graph, round, service and
clients: p50, server CPU per request and throughput ratios.

``--variant NAME [key=value ...]`` (repeatable, with ``--dataset``) measures several gpuroute servers in the
same run instead of this tree's ``gpuroute serve``: ``src=DIR`` a copy of ``src/`` (an earlier commit: ``git
archive COMMIT src | tar -x -C DIR``), ``http=h11|httptools`` (``gpuroute serve --http``),
``server=granian`` (the same application under granian's ASGI server, ``serve:granian_app``), ``set=NAME=VALUE``
(``gpuroute.config`` constants, e.g. ``set=SERVE_INLINE_ROUTE_MAX_COORDS=0``). ``--rounds R`` measures
osrm-routed and every variant R times, alternating (a shared machine's load moves between rounds). Each
variant's answers to a sample (routes with and without steps, nearest, tables) are compared byte for byte with
the first variant's (``identical`` in the JSON; a difference fails the run); each variant's trips are compared with
osrm-routed's as above (``trip K duration, NAME`` in ``agreement``: their orders may differ by the tour search).

Usage (from the repo root):
    .venv/bin/python benchmarks/serve.py --quick          # Monaco, fewer requests, under ~2 minutes
    .venv/bin/python benchmarks/serve.py --full           # Monaco and Andorra, 2,000 routes per level
    .venv/bin/python benchmarks/serve.py [--clients 1 8 32] [--routes N] [--tables N] [--threads T]
        [--client raw|httpx] [--no-osrm] [--osrm-bin DIR] [--out benchmarks/results]
    .venv/bin/python benchmarks/serve.py --dataset --label before      # ~6 minutes on 2 cores
    .venv/bin/python benchmarks/serve.py --dataset --label after \
        --requests-from benchmarks/results/serve_dataset_<date>_before_<commit>.json
    .venv/bin/python benchmarks/serve.py --dataset --graphs Monaco Andorra --rounds 3 \
        --variant before src=DIR --variant httptools http=httptools --variant granian server=granian
    .venv/bin/python benchmarks/serve.py --dataset --graphs Monaco Andorra --clients 1 4 --routes 1000 \
        --tables 10 --trips 20 --trip-sizes 4 12 25 --rounds 2       # issue 20's 2-core targets, ~3 minutes
Writes OUT/serve_cpu_<date>[_quick][_httpx].json and prints Markdown tables (--dataset:
OUT/serve_dataset_<date>[_<label>]_<commit>[_quick].json, .md with the tables, .requests.json.gz). Exits 1 if
gpuroute answered anything but 200 (--dataset: anything but 200 or a NoRoute/NoSegment 400; the JSON is written
first); OSRM errors are reported, not fatal. Both servers are stopped on exit (try/finally, atexit, SIGTERM,
and PR_SET_PDEATHSIG on Linux).
"""
from __future__ import annotations

import argparse
import asyncio
import atexit
import datetime as dt
import glob
import json
import os
import platform
import signal
import socket
import stat
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
# a variant's copy of src/ (--variant NAME src=DIR): the launcher and granian's application import from it
sys.path.insert(0, os.environ.get("GPUROUTE_BENCH_SRC") or str(ROOT / "src"))

CACHE = ROOT / "out" / "serve_bench"
OSRM_WHEELS = ROOT / "local_data" / "osrm"
OSM_DIRS = [ROOT / "shared" / "data" / "osm", ROOT / ".." / "shared" / "data" / "osm",
            Path("/work/shared/data/osm")]
ROUTE_QUERY = "overview=simplified&steps=false"
_PROCS = []  # every server started, stopped by stop_all()


# ------------------------------------------------------------------------------------------------ host
def commit():
    if os.environ.get("GPUROUTE_COMMIT"):
        return os.environ["GPUROUTE_COMMIT"]
    try:
        return subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True).strip()
    except Exception:
        return "unknown"


def loadavg():
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        return list(os.getloadavg())


def versions():
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for p in ("gpuroute", "uvicorn", "starlette", "h11", "anyio", "orjson", "httpx", "numpy", "uvloop",
              "httptools", "granian"):
        try:
            out[p] = version(p)
        except PackageNotFoundError:
            out[p] = None
    import gpuroute

    out["gpuroute"] = getattr(gpuroute, "__version__", out["gpuroute"])  # the dist metadata can be stale
    return out


def dirty():
    """Files under src/ that differ from the commit (the run measured the working tree)."""
    try:
        return subprocess.check_output(["git", "status", "--porcelain", "--", "src"], cwd=ROOT, text=True).split("\n")[:-1]
    except Exception:
        return None


def cpu_model():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def rss_mb(pid):
    """(VmRSS, VmHWM) of a process in MiB (psutil is not needed: /proc)."""
    vals = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(("VmRSS:", "VmHWM:")):
                k, v = line.split(":", 1)
                vals[k] = int(v.split()[0]) / 1024
    except OSError:
        return None, None
    return vals.get("VmRSS"), vals.get("VmHWM")


def cpu_s(pid):
    """User + system CPU seconds of a process (all its threads)."""
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def children_of(pid):
    """The live child processes of ``pid`` (gpuroute serve --workers N: its workers)."""
    out = []
    try:
        for t in os.listdir(f"/proc/{pid}/task"):
            out += [int(c) for c in Path(f"/proc/{pid}/task/{t}/children").read_text().split()]
    except OSError:
        pass
    return out


def tree_cpu_s(pid):
    """CPU seconds of ``pid`` and its live children (a server's workers)."""
    return cpu_s(pid) + sum(cpu_s(c) for c in children_of(pid))


def pss_mb(pid):
    """(Rss, Pss) of a process in MiB from /proc/PID/smaps_rollup (Pss: shared pages divided among the
    processes that map them)."""
    vals = {}
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            k, _, v = line.partition(":")
            if k in ("Rss", "Pss"):
                vals[k] = int(v.split()[0]) / 1024
    except OSError:
        return None, None
    return vals.get("Rss"), vals.get("Pss")


def tree_memory(pid):
    """``{"processes": [{"pid", "role", "rss_mb", "pss_mb"}], "rss_mb", "pss_mb"}`` over ``pid`` and its
    children (RSS summed counts shared pages once per process; PSS summed counts them once)."""
    procs = [{"pid": p, "role": "parent" if p == pid else "worker", **dict(zip(("rss_mb", "pss_mb"), pss_mb(p), strict=True))}
             for p in [pid, *children_of(pid)]]
    return {"processes": procs, "rss_mb": sum(x["rss_mb"] or 0 for x in procs),
            "pss_mb": sum(x["pss_mb"] or 0 for x in procs)}


def threads_of(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return None


# ------------------------------------------------------------------------------------------------ processes
def _pdeathsig():
    """In the child: SIGTERM it when this process dies (Linux), so no server outlives a killed benchmark."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


#: ``--client-cpus``: the CPUs the servers run on (every other CPU of this process's); None: not pinned.
SERVER_CPUS = None


def _server_preexec():
    _pdeathsig()
    if SERVER_CPUS:
        os.sched_setaffinity(0, SERVER_CPUS)


def pin(client_cpus):
    """``--client-cpus LIST``: this process (the load generator) on ``LIST`` ("15", "14-15", "0,8"), every
    server started after on the other CPUs this process may use; returns the servers' core count."""
    global SERVER_CPUS
    mine = sorted(os.sched_getaffinity(0))
    want = set()
    for part in client_cpus.split(","):
        a, _, b = part.partition("-")
        try:
            want |= set(range(int(a), int(b or a) + 1))
        except ValueError:
            raise SystemExit(f"--client-cpus {client_cpus}: expected CPU numbers like 15, 14-15 or 0,8") from None
    if not want <= set(mine) or not set(mine) - want:
        raise SystemExit(f"--client-cpus {client_cpus}: must be some, not all, of this process's CPUs {mine}")
    SERVER_CPUS = sorted(set(mine) - want)
    os.sched_setaffinity(0, want)
    return len(SERVER_CPUS)


def usable_cores():
    """The cores the servers may use: ``--client-cpus``' rest, else this process's CPU affinity."""
    if SERVER_CPUS:
        return len(SERVER_CPUS)
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def start(cmd, log_path, env=None):
    log = open(log_path, "wb")
    p = subprocess.Popen([str(c) for c in cmd], stdout=log, stderr=subprocess.STDOUT, env=env,
                         preexec_fn=_server_preexec if sys.platform.startswith("linux") else None)
    log.close()
    _PROCS.append(p)
    return p


def stop(p):
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def stop_all():
    for p in list(_PROCS):
        try:
            stop(p)
        except Exception:
            pass
        _PROCS.remove(p)


def _on_sigterm(signum, frame):
    raise SystemExit(128 + signum)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(p, port, path, log_path, timeout=120.0):
    """Block until GET path answers (any HTTP status), or raise with the server's log."""
    import http.client

    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        if p.poll() is not None:
            raise RuntimeError(f"server exited {p.returncode} before answering: "
                               f"{Path(log_path).read_text(errors='replace')[-1500:]}")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", path)
            c.getresponse().read()
            c.close()
            return time.perf_counter() - t0
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"server on port {port} did not answer within {timeout:.0f} s: "
                       f"{Path(log_path).read_text(errors='replace')[-1500:]}")


# ------------------------------------------------------------------------------------------------ OSRM
def osrm_bin(arg):
    """(directory of the osrm-* binaries, profiles directory, note) or (None, None, why not); as crp.py."""
    import zipfile

    cands = [arg, os.environ.get("OSRM_BIN"), str(ROOT / ".venv" / "osrm" / "wheel" / "osrm" / "bin")]  # .ci/fetch_osrm.sh
    cands += sorted(glob.glob(str(OSRM_WHEELS / "wheel" / "osrm" / "bin")))
    wheels = sorted(glob.glob(str(OSRM_WHEELS / "osrm_bindings-*.whl")))
    if wheels and not (OSRM_WHEELS / "wheel" / "osrm" / "bin").exists():
        with zipfile.ZipFile(wheels[-1]) as z:
            z.extractall(OSRM_WHEELS / "wheel")
        cands.append(str(OSRM_WHEELS / "wheel" / "osrm" / "bin"))
    w = __import__("shutil").which("osrm-routed")
    if w:
        cands.append(os.path.dirname(w))
    need = ("osrm-extract", "osrm-contract", "osrm-routed")
    for c in cands:
        if c and all(os.path.exists(os.path.join(c, n)) for n in need):
            for f in glob.glob(os.path.join(c, "osrm-*")):
                os.chmod(f, os.stat(f).st_mode | stat.S_IXUSR)
            prof = next((p for p in (Path(c).parent / "share" / "profiles",
                                     Path(c).parent.parent / "share" / "osrm" / "profiles",
                                     Path(c).parent / "profiles") if (p / "car.lua").exists()), None)
            try:
                r = subprocess.run([os.path.join(c, "osrm-routed"), "--version"], capture_output=True, text=True,
                                   timeout=30)
            except Exception as e:
                return None, None, f"osrm-routed in {c} does not run: {type(e).__name__}: {e}"
            if r.returncode != 0:
                return None, None, f"osrm-routed in {c} does not run (exit {r.returncode}): {r.stderr[-300:]}"
            if prof is None:
                return None, None, f"osrm binaries in {c} run, no car.lua next to them"
            return c, prof, f"osrm {r.stdout.strip()} from {c}"
    return None, None, ("no osrm-extract/osrm-contract/osrm-routed: pip download --no-deps --only-binary=:all: "
                        "--python-version 3.12 --platform manylinux_2_28_x86_64 osrm-bindings -d local_data/osrm")


def osrm_prepare(bindir, prof, pbf, name, cores, algorithm="ch"):
    """Extract (car.lua) + contract (``algorithm="ch"``) or + partition + customize (``"mld"``), cached by the
    PBF's size and mtime; (base .osrm path, info)."""
    if algorithm not in ("ch", "mld"):
        raise ValueError(f"algorithm must be 'ch' or 'mld', got {algorithm!r}")
    work = CACHE / ("osrm" if algorithm == "ch" else "osrm_mld") / name
    work.mkdir(parents=True, exist_ok=True)
    src = work / Path(pbf).name
    base = work / (src.name.split(".")[0] + ".osrm")
    st = os.stat(pbf)
    stamp = work / "stamp.json"
    key = {"pbf": str(pbf), "size": st.st_size, "mtime": st.st_mtime, "profile": str(Path(prof) / "car.lua"),
           "bin": str(bindir)}
    done = base.with_suffix(".osrm.hsgr" if algorithm == "ch" else ".osrm.cell_metrics")
    if stamp.exists() and json.loads(stamp.read_text()).get("key") == key and done.exists():
        return base, dict(json.loads(stamp.read_text())["info"], cached=True)
    __import__("shutil").copyfile(pbf, src)
    info = {}
    steps = [("extract", [Path(bindir) / "osrm-extract", "-p", Path(prof) / "car.lua", "-t", cores, src])]
    if algorithm == "ch":
        steps.append(("contract", [Path(bindir) / "osrm-contract", "-t", cores, base]))
    else:
        steps += [("partition", [Path(bindir) / "osrm-partition", "-t", cores, base]),
                  ("customize", [Path(bindir) / "osrm-customize", "-t", cores, base])]
    for what, cmd in steps:
        t = time.perf_counter()
        r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=1200)
        (work / f"{what}.log").write_text(r.stdout + r.stderr)
        if r.returncode != 0:
            raise RuntimeError(f"osrm-{what} exited {r.returncode}: {(r.stdout + r.stderr)[-600:]}")
        info[f"osrm_{what}_s"] = round(time.perf_counter() - t, 3)
    stamp.write_text(json.dumps({"key": key, "info": info}))
    return base, dict(info, cached=False)


# ------------------------------------------------------------------------------------------------ clients
class RawClient:
    """Minimal HTTP/1.1 GET client on asyncio streams: one keep-alive connection per concurrent client,
    Content-Length or chunked bodies, reconnect when the server closes (osrm-routed closes a keep-alive
    connection after a number of requests)."""

    def __init__(self, port, n):
        self.port = port
        self.free = [None] * n  # connections, None = not open yet

    async def get(self, path):
        conn = self.free.pop()
        try:
            for attempt in (0, 1):
                fresh = conn is None
                if fresh:
                    conn = await asyncio.open_connection("127.0.0.1", self.port)
                r, w = conn
                try:
                    w.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n\r\n".encode("latin-1"))
                    status, body, close = await self._read(r)
                except Exception as e:
                    w.close()
                    conn = None
                    if fresh or attempt or not isinstance(e, (ConnectionError, asyncio.IncompleteReadError)):
                        raise
                    continue  # a reused connection the server had closed: once more on a new one
                if close:
                    w.close()
                    conn = None
                return status, body
        finally:
            self.free.append(conn)

    @staticmethod
    async def _read(r):
        line = await r.readline()
        if not line:
            raise ConnectionError("connection closed")
        status = int(line.split()[1])
        length, chunked, close = None, False, False
        while True:
            h = await r.readline()
            if h in (b"\r\n", b"\n", b""):
                break
            k, _, v = h.decode("latin-1").partition(":")
            k, v = k.strip().lower(), v.strip().lower()
            if k == "content-length":
                length = int(v)
            elif k == "transfer-encoding" and "chunked" in v:
                chunked = True
            elif k == "connection" and v == "close":
                close = True
        if chunked:
            parts = []
            while True:
                size = int((await r.readline()).split(b";")[0], 16)
                if size == 0:
                    await r.readline()
                    break
                parts.append(await r.readexactly(size))
                await r.readline()
            body = b"".join(parts)
        elif length is not None:
            body = await r.readexactly(length)
        else:
            body, close = await r.read(), True
        return status, body, close

    async def aclose(self):
        for c in self.free:
            if c is not None:
                c[1].close()


class HttpxClient:
    def __init__(self, port, n):
        import httpx

        self.c = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=120.0,
                                   limits=httpx.Limits(max_connections=n, max_keepalive_connections=n))

    async def get(self, path):
        r = await self.c.get(path)
        return r.status_code, r.content

    async def aclose(self):
        await self.c.aclose()


def make_client(kind, port, n):
    return RawClient(port, n) if kind == "raw" else HttpxClient(port, n)


async def drive(kind, port, paths, n_clients, time_limit):
    """Send ``paths`` (GET) with ``n_clients`` concurrent clients, each taking the next path when its last
    answer is in, until all are sent or ``time_limit`` seconds have passed. Latencies in seconds of the
    answered requests, wall seconds, errors, the first error, and how many of the errors were a routing
    refusal (HTTP 400 with code NoRoute or NoSegment: an answer, not a server fault)."""
    client = make_client(kind, port, n_clients)
    lat = []
    errors = [0]
    refused = [0]
    first = [None]
    nxt = [0]
    t0 = time.perf_counter()
    deadline = t0 + time_limit

    async def worker():
        while nxt[0] < len(paths) and time.perf_counter() < deadline:
            i = nxt[0]
            nxt[0] += 1
            t = time.perf_counter()
            try:
                status, body = await client.get(paths[i])
            except Exception as e:
                status, body = None, f"{type(e).__name__}: {e}".encode()
            lat.append(time.perf_counter() - t)
            if status != 200:
                errors[0] += 1
                if status == 400 and (b'"NoRoute"' in body or b'"NoSegment"' in body):
                    refused[0] += 1
                elif first[0] is None:
                    first[0] = f"request {i} ({paths[i][:120]}...): HTTP {status}: {body[:300]!r}"

    try:
        await asyncio.gather(*(worker() for _ in range(n_clients)))
    finally:
        await client.aclose()
    return np.array(lat), time.perf_counter() - t0, errors[0], first[0], refused[0]


async def fetch_json(kind, port, paths):
    client = make_client(kind, port, 1)
    out = []
    try:
        for p in paths:
            status, body = await client.get(p)
            out.append(json.loads(body) if status == 200 else None)
    finally:
        await client.aclose()
    return out


async def fetch_raw(kind, port, paths):
    """``(status, body bytes)`` of each GET, one after the other."""
    client = make_client(kind, port, 1)
    out = []
    try:
        for p in paths:
            out.append(await client.get(p))
    finally:
        await client.aclose()
    return out


# ------------------------------------------------------------------------------------------------ variants
def parse_variant(words):
    """``--variant NAME [key=value ...]``: a gpuroute server to measure. Keys: ``src`` (a copy of ``src/`` to
    run, e.g. the commit before a change: ``git archive HEAD src | tar -x -C DIR``), ``http`` (``gpuroute
    serve --http``), ``server`` (``gpuroute``, the default, or ``granian``: the same application under
    granian's ASGI server with ``--workers``' count of its worker processes, each loading the dataset),
    ``set`` (``CONFIG_NAME=VALUE[,...]``: gpuroute.config constants set before the server starts)."""
    name, *rest = words
    v = {"name": name, "src": None, "http": None, "server": "gpuroute", "set": {}}
    for w in rest:
        k, sep, val = w.partition("=")
        if not sep or k not in v or k == "name":
            raise SystemExit(f"--variant {name}: {w!r} is not key=value with key src, http, server or set")
        if k == "set":
            for item in val.split(","):
                ck, sep2, cv = item.partition("=")
                if not sep2:
                    raise SystemExit(f"--variant {name}: set={val!r}: expected NAME=VALUE[,NAME=VALUE]")
                v["set"][ck] = json.loads(cv) if cv[:1] in "-0123456789[{tfn\"" else cv
        elif k == "src":
            v["src"] = str(Path(val).resolve())
            if not (Path(v["src"]) / "gpuroute" / "__init__.py").is_file():
                raise SystemExit(f"--variant {name}: src={val}: no gpuroute package there")
        else:
            v[k] = val
    if v["server"] not in ("gpuroute", "granian"):
        raise SystemExit(f"--variant {name}: server={v['server']!r}: expected gpuroute or granian")
    return v


def variant_env(v):
    src = v["src"] or str(ROOT / "src")
    return dict(os.environ, PYTHONPATH=src + os.pathsep + os.environ.get("PYTHONPATH", ""), GPUROUTE_BENCH_SRC=src)


def variant_command(v, ds, port, threads, workers, cores):
    """``(command, env)`` that starts variant ``v`` on ``ds``."""
    env = variant_env(v)
    if v["server"] == "granian":
        n = workers or cores
        env.update(GPUROUTE_BENCH_DATASET=str(ds), GPUROUTE_BENCH_SET=json.dumps(v["set"]),
                   NUMBA_NUM_THREADS=str(max(1, cores // n)), NUMBA_THREADING_LAYER="workqueue")
        env["PYTHONPATH"] += os.pathsep + str(ROOT / "benchmarks")
        return [sys.executable, "-m", "granian", "--interface", "asgi", "--host", "127.0.0.1", "--port", port,
                "--workers", n, "--loop", "uvloop", "--no-ws", "--log-level", "warning", "--factory",
                "serve:granian_app"], env
    cmd = [sys.executable, Path(__file__).resolve(), "--launch", json.dumps(v["set"]), "serve", ds, "--port", port,
           "--threads", threads, "--max-table-size", 1000, *(["--workers", workers] if workers else []),
           *(["--http", v["http"]] if v["http"] else [])]
    return cmd, env


def granian_app():
    """The application a ``server=granian`` variant serves (granian's ``--factory serve:granian_app``): the
    dataset ``$GPUROUTE_BENCH_DATASET`` opened, ``--max-table-size 1000``, warmed up, as ``gpuroute serve``
    builds it (each granian worker process loads its own copy: granian forks no loaded parent)."""
    import gc

    import gpuroute.config as cfg
    from gpuroute.engine import Engine
    from gpuroute.server import create_app, warm_up

    for k, val in json.loads(os.environ.get("GPUROUTE_BENCH_SET") or "{}").items():
        setattr(cfg, k, val)
    eng = Engine.open(os.environ["GPUROUTE_BENCH_DATASET"])
    eng.limits["max_locations_table"] = 1000 ** 2
    app = create_app(eng, limits={"max_locations_table": 1000 ** 2}, allow_customize=False, warm_up=True)
    warm_up(app)
    gc.collect()
    gc.freeze()
    return app


def identity_paths(req, n_routes):
    """The requests whose answers are compared byte for byte between variants: routes (overview=full, and
    with steps and annotations), nearest, tables."""
    routes = req["routes"][:n_routes]
    return ([f"/route/v1/driving/{c}?{DATASET_ROUTE_QUERY}" for c in routes]
            + [f"/route/v1/driving/{c}?overview=full&steps=true&annotations=true" for c in routes[:50]]
            + [f"/route/v1/driving/{c}?overview=simplified&geometries=geojson" for c in routes[50:100]]
            + [f"/nearest/v1/driving/{c.split(';')[0]}?number=3" for c in routes[:50]]
            + [f"/table/v1/driving/{c}" for c in req["tables"][:3]])


# ------------------------------------------------------------------------------------------------ requests
def fmt(c):
    return f"{c[0]:.6f},{c[1]:.6f}"


def make_requests(coords, rng, n_routes, n_tables, table_n, n_big):
    """The same request paths for both servers: routes, tables (table_n x table_n), big tables (1000^2)."""
    pairs = rng.integers(0, len(coords), size=(n_routes, 2))
    routes = [f"/route/v1/driving/{fmt(coords[a])};{fmt(coords[b])}?{ROUTE_QUERY}" for a, b in pairs]
    tables = ["/table/v1/driving/" + ";".join(fmt(coords[i]) for i in rng.choice(len(coords), table_n, replace=False))
              for _ in range(n_tables)]
    big = ["/table/v1/driving/" + ";".join(fmt(coords[i]) for i in rng.choice(len(coords), 1000, replace=False))
           for _ in range(n_big)]
    return routes, tables, big


def stats(lat, wall, n_clients):
    if lat.size == 0:
        return {}
    ms = lat * 1e3
    return {"n": int(lat.size), "p50_ms": float(np.percentile(ms, 50)), "p95_ms": float(np.percentile(ms, 95)),
            "p99_ms": float(np.percentile(ms, 99)), "max_ms": float(ms.max()), "mean_ms": float(ms.mean()),
            "wall_s": wall, "throughput_rps": lat.size / wall}


def bench_server(name, proc, port, kind, levels, routes, tables, big, time_limit, warmup, table_levels=None,
                 trips=None):
    """Every (service, clients) level on one running server (tables at ``table_levels``, default ``levels``;
    ``trips``: {service name: paths}, each at one client); a list of result rows."""
    rows = []
    pid = proc.pid
    trips = trips or {}
    # warm up: the first requests build per-thread query objects, fill caches, open connections
    asyncio.run(drive(kind, port, routes[:warmup], min(8, max(levels)), time_limit))
    asyncio.run(drive(kind, port, tables[:2], 2, time_limit))
    for paths in trips.values():
        asyncio.run(drive(kind, port, paths[:2], 1, time_limit))
    for service, paths, lv in (("route", routes, levels),
                               (f"table {tables_size(tables)}", tables, table_levels or levels),
                               *((s, paths, [1]) for s, paths in trips.items())):
        for n in lv:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited {proc.returncode} during the benchmark")
            rss0, _ = rss_mb(pid)
            la0 = loadavg()
            c0, g0 = tree_cpu_s(pid), time.process_time()
            lat, wall, errors, first, refused = asyncio.run(drive(kind, port, paths, n, time_limit))
            c1, g1 = tree_cpu_s(pid), time.process_time()
            rss1, hwm = rss_mb(pid)
            mem = tree_memory(pid)
            r = {"server": name, "service": service, "clients": n, **stats(lat, wall, n), "errors": errors,
                 "no_route": refused, "first_error": first, "sent": int(lat.size), "planned": len(paths),
                 "truncated_by_time": int(lat.size) < len(paths), "server_cpu_s": c1 - c0,
                 "loadgen_cpu_s": g1 - g0, "rss_before_mb": rss0, "rss_after_mb": rss1, "rss_peak_mb": hwm,
                 "server_threads": threads_of(pid), "loadavg_before": la0, "loadavg_after": loadavg(),
                 "server_processes": len(mem["processes"]), "tree_rss_mb": mem["rss_mb"], "tree_pss_mb": mem["pss_mb"],
                 "processes_mem": mem["processes"]}
            r["server_cpu_ms_per_req"] = 1e3 * r["server_cpu_s"] / max(1, r["sent"])
            rows.append(r)
            print(f"  {name:9s} {service:14s} N={n:<3d} p50 {r.get('p50_ms', 0):8.2f} ms  p99 {r.get('p99_ms', 0):8.2f}"
                  f" ms  {r.get('throughput_rps', 0):8.1f} req/s  errors {errors}  rss {rss1:.0f} MiB  pss "
                  f"{mem['pss_mb']:.0f} MiB over {len(mem['processes'])} process(es)  cpu "
                  f"{r['server_cpu_ms_per_req']:.2f} ms/req", flush=True)
            if first:
                print(f"    first error: {first}", flush=True)
    for i, p in enumerate(big):
        lat, wall, errors, first, _ = asyncio.run(drive(kind, port, [p], 1, time_limit))
        r = {"server": name, "service": "table 1000x1000", "clients": 1, "request": i, **stats(lat, wall, 1),
             "errors": errors, "first_error": first, "sent": int(lat.size), "planned": 1,
             "rss_after_mb": rss_mb(pid)[0], "rss_peak_mb": rss_mb(pid)[1]}
        rows.append(r)
        print(f"  {name:9s} table 1000x1000 #{i}: {r.get('p50_ms', float('nan')):.0f} ms  errors {errors}", flush=True)
        if first:
            print(f"    first error: {first}", flush=True)
    return rows


def tables_size(tables):
    n = tables[0].count(";") + 1 if tables else 0
    return f"{n}x{n}"


def route_durations(answers):
    return np.array([a["routes"][0]["duration"] if a and a.get("code") == "Ok" and a.get("routes") else np.nan
                     for a in answers])


def compare(ours, theirs):
    """Durations of ours / OSRM's: fraction within 1% and 5%, median, quartiles and p10/p90 of the ratio; how
    many pairs only one side answered."""
    ours, theirs = np.asarray(ours, float).ravel(), np.asarray(theirs, float).ravel()
    one_side = int(np.sum(np.isfinite(ours) != np.isfinite(theirs)))
    ok = np.isfinite(ours) & np.isfinite(theirs) & (theirs > 1.0)  # > 1 s: skip (near-)identical points
    if not ok.any():
        return {"n": 0, "n_total": int(ours.size), "only_one_side": one_side}
    r = ours[ok] / theirs[ok]
    return {"n": int(ok.sum()), "n_total": int(ours.size), "only_one_side": one_side,
            "within_1pct": float(np.mean(np.abs(r - 1) <= 0.01)), "within_5pct": float(np.mean(np.abs(r - 1) <= 0.05)),
            "ratio_p10": float(np.percentile(r, 10)), "ratio_p25": float(np.percentile(r, 25)),
            "ratio_median": float(np.median(r)), "ratio_p75": float(np.percentile(r, 75)),
            "ratio_p90": float(np.percentile(r, 90))}


# ------------------------------------------------------------------------------------------------ graphs
def graph(name):
    """(node coordinates (n, 2) lon/lat, PBF path)."""
    import gpuroute

    if name == "Monaco":
        g = gpuroute.datasets.load("monaco")
        return np.asarray(g.coords), Path(g.meta["source"])
    pbf = next((d / f"{name.lower()}.osm.pbf" for d in OSM_DIRS if (d / f"{name.lower()}.osm.pbf").exists()), None)
    if pbf is None:
        raise FileNotFoundError(f"{name}: no {name.lower()}.osm.pbf in {[str(d) for d in OSM_DIRS]}")
    g = gpuroute.load_osm(pbf, progress=False, name=name)
    return np.asarray(g.coords), pbf


# ------------------------------------------------------------------------------------------------ report
def markdown(res):
    lines = [f"Host: {res['host']['cpu']} ({res['host']['cores']} cores), load average "
             f"{res['loadavg_before']} -> {res['loadavg_after']}; commit {res['commit']}; client "
             f"{res['config']['client']}; gpuroute {res['config']['threads']} worker threads, osrm-routed "
             f"-t {res['config']['osrm_threads']}.", "",
             "| graph | server | service | N | p50 ms | p95 ms | p99 ms | req/s | errors | server CPU ms/req "
             "| loadgen CPU s | RSS MiB before -> after (peak) |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for gname, gres in res["graphs"].items():
        for r in gres.get("rows", []):
            if r["service"] == "table 1000x1000":
                continue
            rss = f"{r['rss_before_mb']:.0f} -> {r['rss_after_mb']:.0f} ({r['rss_peak_mb']:.0f})"
            trunc = "*" if r.get("truncated_by_time") else ""
            lines.append(f"| {gname} | {r['server']} | {r['service']} | {r['clients']} | {r['p50_ms']:.2f} | "
                         f"{r['p95_ms']:.2f} | {r['p99_ms']:.2f} | {r['throughput_rps']:.1f}{trunc} | "
                         f"{r['errors']} | {r['server_cpu_ms_per_req']:.2f} | {r['loadgen_cpu_s']:.1f} | {rss} |")
    if any(r.get("truncated_by_time") for g in res["graphs"].values() for r in g.get("rows", [])):
        lines += ["", f"\\* stopped by the time limit ({res['config']['time_limit_per_level_s']:.0f} s per level) "
                      "before all requests were sent."]
    big = [(g, r) for g, gres in res["graphs"].items() for r in gres.get("rows", []) if r["service"] == "table 1000x1000"]
    if big:
        lines += ["", "| graph | server | table 1000x1000, one at a time: ms (each) | errors |", "|---|---|---|---:|"]
        for gname in res["graphs"]:
            for srv in ("gpuroute", "osrm-ch"):
                rs = [r for g, r in big if g == gname and r["server"] == srv]
                if rs:
                    each = ", ".join(f"{r.get('p50_ms', float('nan')):.0f}" for r in rs)
                    lines.append(f"| {gname} | {srv} | {each} | {sum(r['errors'] for r in rs)} |")
    agree = [(g, gres["agreement"]) for g, gres in res["graphs"].items() if gres.get("agreement")]
    if agree:
        lines += ["", "Durations gpuroute / osrm-routed (different profiles: context, not a test):", "",
                  "| graph | what | pairs | within 5% | ratio p25 / median / p75 |", "|---|---|---:|---:|---|"]
        for gname, a in agree:
            for what, c in a.items():
                if c.get("n"):
                    lines.append(f"| {gname} | {what} | {c['n']} | {100 * c['within_5pct']:.0f}% | "
                                 f"{c['ratio_p25']:.3f} / {c['ratio_median']:.3f} / {c['ratio_p75']:.3f} |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------ dataset mode
DATASET_GRAPHS = ["Monaco", "Andorra", "Helsinki"]
DATASET_ROUTE_QUERY = "overview=full"


def find_pbf(name):
    """The OSM extract of a graph name: the shipped Monaco, else NAME.osm.pbf (as spelled or lower case) in the
    shared data folders."""
    if name.lower() == "monaco":
        return ROOT / "src" / "gpuroute" / "datasets" / "data" / "monaco.osm.pbf"
    for d in OSM_DIRS:
        for f in (f"{name}.osm.pbf", f"{name.lower()}.osm.pbf"):
            if (d / f).is_file():
                return (d / f).resolve()
    raise FileNotFoundError(f"{name}: no {name}.osm.pbf in {[str(d) for d in OSM_DIRS]}")


def file_sha256(path):
    import hashlib

    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def gpuroute_env():
    return dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))


def gpuroute_build(pbf, lua, name, env=None):
    """``gpuroute build PBF --profile LUA -o out/serve_bench/dataset/NAME``, rebuilt on every run (the dataset is
    part of the code under test); (directory, build info)."""
    ds = CACHE / "dataset" / name
    ds.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "gpuroute.cli", "build", str(pbf), "--profile", str(lua), "-o", str(ds), "--json"]
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env or gpuroute_env(), timeout=1200)
    wall = time.perf_counter() - t
    (CACHE / f"gpuroute_build_{name}.log").write_text(r.stdout + r.stderr)
    if r.returncode != 0:
        raise RuntimeError(f"gpuroute build exited {r.returncode}: {(r.stdout + r.stderr)[-1500:]}")
    summary = next((json.loads(line) for line in reversed(r.stdout.splitlines()) if line.startswith("{")), {})
    g = summary.get("graph", {})
    return ds, {"build_wall_s": round(wall, 3), "build_stage_s": summary.get("seconds"), "nodes": g.get("nodes"),
                "arcs": g.get("arcs"), "fingerprint": g.get("fingerprint"), "weight": summary.get("weight"),
                "cell_sizes": summary.get("cell_sizes")}


def snappable_points(ds, k, rng):
    """``k`` (lon, lat) points inside random segments of the dataset's snapping index (the largest component;
    segments of 5 m or more, 20..80 % along), as tests/server/test_osrm_differential_profile.py picks them."""
    import gc

    from gpuroute.engine import Engine

    eng = Engine.open(ds)
    s = eng.segments
    ok = np.flatnonzero(s.length_m >= 5.0)
    pick = rng.choice(ok, k)
    f = rng.uniform(0.2, 0.8, k)
    lon = s.lon_u[pick] + f * (s.lon_v[pick] - s.lon_u[pick])
    lat = s.lat_u[pick] + f * (s.lat_v[pick] - s.lat_u[pick])
    del eng, s
    gc.collect()
    return np.column_stack([lon, lat])


def dataset_requests(pts, n_routes, n_tables, table_n):
    """Coordinate strings (``lon,lat;lon,lat;...``, 1e-6 degrees) of the routes (2 points) and the tables
    (``table_n`` points) from ``2 n_routes + n_tables table_n`` points."""
    c = [fmt(p) for p in pts]
    routes = [f"{c[2 * i]};{c[2 * i + 1]}" for i in range(n_routes)]
    o = 2 * n_routes
    tables = [";".join(c[o + j * table_n:o + (j + 1) * table_n]) for j in range(n_tables)]
    return {"routes": routes, "tables": tables}


TRIP_QUERY = "roundtrip=true&source=any&destination=any"
#: osrm-routed orders a trip by brute force up to this many stops (exact on its matrix), by farthest insertion past
OSRM_TRIP_EXACT_MAX_N = 10
#: seconds a trip of ours may exceed OSRM's and still count as not longer (OSRM rounds durations to 0.1 s)
TRIP_SLACK_S = 0.05


def trip_points(ds, sizes, n_trips, seed):
    """{size: (n_trips * size, 2) lon/lat}: snappable points (:func:`snappable_points`) of each trip size, each
    from its own random stream of ``seed`` (a size's trips do not depend on the other sizes, and the routes and
    tables drawn from ``seed`` stay what they were)."""
    return {k: snappable_points(ds, n_trips * k, np.random.default_rng([seed, 1, k])) for k in sizes}


def trip_requests(pts_by_size, n_trips):
    """{str(size): [coordinate string (``lon,lat;...``, 1e-6 degrees) of each of ``n_trips`` trips]}: trip j of
    size k is the points ``j k .. (j + 1) k - 1`` of ``pts_by_size[k]``; ValueError when a size has too few."""
    out = {}
    for k, pts in pts_by_size.items():
        if len(pts) < n_trips * k:
            raise ValueError(f"trip size {k}: {len(pts)} points, {n_trips} trips need {n_trips * k}")
        c = [fmt(p) for p in pts[:n_trips * k]]
        out[str(k)] = [";".join(c[j * k:(j + 1) * k]) for j in range(n_trips)]
    return out


def trip_paths(req, sizes, n_trips):
    """{"trip K": [GET path, ...]} of ``req["trips"]`` (the same order for both servers)."""
    return {f"trip {k}": [f"/trip/v1/driving/{c}?{TRIP_QUERY}" for c in req["trips"][str(k)][:n_trips]]
            for k in sizes}


def trip_duration(answer):
    """``trips[0].duration`` (s) of a /trip answer, NaN for None (no 200) or a non-Ok answer."""
    if answer and answer.get("code") == "Ok" and answer.get("trips"):
        return float(answer["trips"][0]["duration"])
    return float("nan")


def trip_agreement(ours, theirs, size):
    """Total trip durations, gpuroute's / osrm-routed's answers to the same trips of ``size`` stops:
    :func:`compare`'s fields, plus ``ours_le_theirs`` (share of the trips where ours is not longer, within
    :data:`TRIP_SLACK_S`), ``ours_le_theirs_01pct`` (not longer by more than 0.1 % either: the two matrices
    differ by about that much, see the route agreement), ``ratios`` (each trip's, in request order; None where
    not compared), ``ratio_min`` / ``ratio_max``, the sums of both sides' durations over the compared
    trips (``ours_total_s``, ``theirs_total_s``) and ``osrm_order`` (how osrm-routed orders this size)."""
    o = np.array([trip_duration(a) for a in ours])
    t = np.array([trip_duration(a) for a in theirs])
    if o.shape != t.shape:
        raise ValueError(f"{o.size} answers of ours, {t.size} of osrm-routed: the same requests expected")
    r = compare(o, t)
    ok = np.isfinite(o) & np.isfinite(t) & (t > 1.0)
    if ok.any():
        q = o[ok] / t[ok]
        r.update(ours_le_theirs=float(np.mean(o[ok] <= t[ok] + TRIP_SLACK_S)),
                 ours_le_theirs_01pct=float(np.mean(o[ok] <= 1.001 * t[ok] + TRIP_SLACK_S)), ratio_min=float(q.min()),
                 ratio_max=float(q.max()), ours_total_s=float(o[ok].sum()), theirs_total_s=float(t[ok].sum()))
    r["ratios"] = [float(o[i] / t[i]) if ok[i] else None for i in range(o.size)]
    r["osrm_order"] = "brute force" if size <= OSRM_TRIP_EXACT_MAX_N else "farthest insertion"
    return r


def load_requests(path):
    """The requests of an earlier ``--dataset`` run (its JSON, or the ``.requests.json.gz`` next to it): {graph:
    {"routes": [...], "tables": [...], "pbf_sha256": ...}} and the earlier result (or None)."""
    import gzip

    path = Path(path)
    read = lambda f: json.loads(gzip.decompress(f.read_bytes()) if f.suffix == ".gz" else f.read_text())  # noqa: E731
    data = read(path)
    if "requests_file" in data:
        prev = data
        data = read(path.parent / data["requests_file"])
    else:
        prev = None
    return data, prev


def side_by_side(res):
    """Each gpuroute row over osrm-routed's row of the same graph, round, service and clients: [{graph, round,
    server, service, clients, p50, cpu (server CPU ms per request), rps}] (ratios, ours / theirs)."""
    out = []
    for gname, gres in res["graphs"].items():
        rows = gres.get("rows", [])
        osrm = {(r.get("round", 0), r["service"], r["clients"]): r for r in rows if r["server"] == "osrm-mld"}
        for r in rows:
            o = osrm.get((r.get("round", 0), r["service"], r["clients"]))
            if r["server"] == "osrm-mld" or o is None or not r.get("n") or not o.get("n"):
                continue
            div = lambda a, b: a / b if b else float("nan")  # noqa: E731
            out.append({"graph": gname, "round": r.get("round", 0), "server": r["server"], "service": r["service"],
                        "clients": r["clients"], "p50": div(r["p50_ms"], o["p50_ms"]),
                        "cpu": div(r["server_cpu_ms_per_req"], o["server_cpu_ms_per_req"]),
                        "rps": div(r["throughput_rps"], o["throughput_rps"])})
    return out


def dataset_markdown(res, prev=None):
    c = res["config"]
    lines = [f"Host: {res['host']['cpu']} ({res['host']['cores']} cores), load average {res['loadavg_before']} -> "
             f"{res['loadavg_after']}; commit {res['commit']}{' (src modified)' if res.get('src_changes') else ''}; "
             f"{res['date']}; gpuroute serve --threads {c['threads']}, osrm-routed --algorithm mld -t "
             f"{c['osrm_threads']}; both with OSRM's car.lua.", "",
             "| graph | round | server | service | clients | requests | p50 ms | p95 ms | req/s | server CPU ms/req "
             "| errors (of which NoRoute) |",
             "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for gname, gres in res["graphs"].items():
        for r in gres.get("rows", []):
            trunc = "*" if r.get("truncated_by_time") else ""
            lines.append(f"| {gname} | {r.get('round', 0) + 1} | {r['server']} | {r['service']} | {r['clients']} | "
                         f"{r['sent']}{trunc} | "
                         f"{r.get('p50_ms', float('nan')):.2f} | {r.get('p95_ms', float('nan')):.2f} | "
                         f"{r.get('throughput_rps', float('nan')):.1f} | {r['server_cpu_ms_per_req']:.2f} | "
                         f"{r['errors']} ({r.get('no_route', 0)}) |")
    if any(r.get("truncated_by_time") for g in res["graphs"].values() for r in g.get("rows", [])):
        lines += ["", f"\\* stopped by the time limit ({c['time_limit_per_level_s']:.0f} s per level) before all "
                      "requests were sent."]
    agree = [(g, gres["agreement"]) for g, gres in res["graphs"].items() if gres.get("agreement")]
    if agree:
        lines += ["", "gpuroute / osrm-routed MLD on the same requests (same car.lua):", "",
                  "| graph | what | pairs | only one side answers | within 1% | within 5% | ratio p10 / median / p90 |",
                  "|---|---|---:|---:|---:|---:|---|"]
        for gname, a in agree:
            for what, x in a.items():
                if x.get("n") and not what.startswith("trip "):
                    lines.append(f"| {gname} | {what} | {x['n']} | {x.get('only_one_side', 0)} | "
                                 f"{100 * x['within_1pct']:.1f}% | {100 * x['within_5pct']:.1f}% | "
                                 f"{x['ratio_p10']:.4f} / {x['ratio_median']:.4f} / {x['ratio_p90']:.4f} |")
    trips = [(g, w, x) for g, a in agree for w, x in a.items() if w.startswith("trip ") and x.get("n")]
    if trips:
        lines += ["", f"/trip total duration (trips[0].duration), gpuroute / osrm-routed, the same trips "
                      f"({c.get('trip_query', TRIP_QUERY)}): gpuroute orders exactly up to 12 stops "
                      "(TOUR_EXACT_MAX_N), osrm-routed by brute force up to 10, farthest insertion past:", "",
                  "| graph | trip | osrm-routed's order | trips | only one side answers | ours <= theirs | ours <= "
                  "1.001 x theirs | within 1% | ratio min / p10 / median / p90 / max | sum ours / theirs |",
                  "|---|---|---|---:|---:|---:|---:|---:|---|---|"]
        for gname, what, x in trips:
            lines.append(f"| {gname} | {what.removesuffix(' duration')} | {x['osrm_order']} | {x['n']} | "
                         f"{x.get('only_one_side', 0)} | {100 * x['ours_le_theirs']:.0f}% | "
                         f"{100 * x['ours_le_theirs_01pct']:.0f}% | "
                         f"{100 * x['within_1pct']:.0f}% | {x['ratio_min']:.4f} / {x['ratio_p10']:.4f} / "
                         f"{x['ratio_median']:.4f} / {x['ratio_p90']:.4f} / {x['ratio_max']:.4f} | "
                         f"{x['ours_total_s'] / x['theirs_total_s']:.4f} |")
    ratios = side_by_side(res)
    if ratios:
        lines += ["", "gpuroute / osrm-routed, the same round (p50 latency, server CPU per request: < 1 is ours "
                      "faster; throughput: > 1 is ours faster):", "",
                  "| graph | round | server | service | clients | p50 | CPU ms/req | req/s |",
                  "|---|---:|---|---|---:|---:|---:|---:|"]
        for x in ratios:
            lines.append(f"| {x['graph']} | {x['round'] + 1} | {x['server']} | {x['service']} | {x['clients']} | "
                         f"{x['p50']:.2f} | {x['cpu']:.2f} | {x['rps']:.2f} |")
    if prev:
        key = lambda g, r: (g, r["server"], r["service"], r["clients"])  # noqa: E731
        old = {key(g, r): r for g, gres in prev["graphs"].items() for r in gres.get("rows", [])}
        lines += ["", f"Before ({prev['commit']}, {prev['date']}) -> now ({res['commit']}, {res['date']}), the same "
                      "requests:", "",
                  "| graph | server | service | clients | server CPU ms/req before -> now | p50 ms before -> now |",
                  "|---|---|---|---:|---|---|"]
        for gname, gres in res["graphs"].items():
            for r in gres.get("rows", []):
                o = old.get(key(gname, r))
                if o:
                    lines.append(f"| {gname} | {r['server']} | {r['service']} | {r['clients']} | "
                                 f"{o['server_cpu_ms_per_req']:.2f} -> {r['server_cpu_ms_per_req']:.2f} | "
                                 f"{o.get('p50_ms', float('nan')):.2f} -> {r.get('p50_ms', float('nan')):.2f} |")
    return "\n".join(lines)


def main_dataset(args):
    """``--dataset``: what users run. gpuroute: ``gpuroute build X.osm.pbf --profile <OSRM's car.lua>`` then
    ``gpuroute serve DIR``; OSRM: ``osrm-extract -p car.lua``, ``osrm-partition``, ``osrm-customize``,
    ``osrm-routed --algorithm mld``. ``/route`` (two coordinates, overview=full) at ``--clients`` (default 1 4),
    ``/table`` 100 x 100 at 1 client."""
    cores = usable_cores()
    threads = args.threads or cores
    osrm_threads = args.osrm_threads or cores
    graphs = args.graphs or (["Monaco"] if args.quick else DATASET_GRAPHS)
    levels = args.clients or [1, 4]
    table_levels = args.table_clients or [1]
    n_routes = args.routes or (300 if args.quick else 2000)  # CPU time comes in 10 ms ticks: ~100 per level
    n_tables = args.tables or (10 if args.quick else 50)
    time_limit = args.time_limit or (15.0 if args.quick else 40.0)
    n_trips = args.trips if args.trips is not None else (10 if args.quick else 20)
    trip_sizes = (args.trip_sizes or [12]) if n_trips else []
    reuse, prev = load_requests(args.requests_from) if args.requests_from else (None, None)
    variants = [parse_variant(w) for w in args.variant or []]
    if len({v["name"] for v in variants}) < len(variants) or any(v["name"] == "osrm-mld" for v in variants):
        sys.exit("--variant names must differ (and not be osrm-mld)")

    signal.signal(signal.SIGTERM, _on_sigterm)
    atexit.register(stop_all)
    CACHE.mkdir(parents=True, exist_ok=True)
    bindir, prof, note = osrm_bin(args.osrm_bin)
    if bindir is None:
        sys.exit(f"--dataset needs OSRM (its car.lua builds both datasets): {note}")
    missing = [t for t in ("osrm-partition", "osrm-customize") if not (Path(bindir) / t).exists()]
    if missing:
        sys.exit(f"--dataset needs {', '.join(missing)} next to osrm-routed in {bindir}")
    lua = Path(prof) / "car.lua"
    print(f"osrm: {note}\nprofile: {lua}", flush=True)

    res = {"benchmark": "serve_dataset", "date": dt.date.today().isoformat(), "commit": commit(),
           "src_changes": dirty(), "label": args.label, "mode": "quick" if args.quick else "dataset",
           "host": {"hostname": platform.node(), "cpu": cpu_model(), "cores": cores, "platform": platform.platform(),
                    "server_cpus": SERVER_CPUS, "client_cpus": sorted(os.sched_getaffinity(0)) if SERVER_CPUS else None},
           "versions": versions(), "loadavg_before": loadavg(),
           "config": {"graphs": graphs, "route_clients": levels, "table_clients": table_levels,
                      "routes_per_level": n_routes, "tables_per_level": n_tables, "table_size": args.table_size,
                      "trips_per_size": n_trips, "trip_sizes": trip_sizes, "trip_clients": [1] if trip_sizes else [],
                      "trip_query": TRIP_QUERY, "time_limit_per_level_s": time_limit, "client": args.client, "threads": threads,
                      "workers": args.workers, "variants": variants, "rounds": args.rounds,
                      "osrm_threads": osrm_threads, "seed": args.seed, "route_query": DATASET_ROUTE_QUERY,
                      "profile": str(lua), "profile_sha256": file_sha256(lua),
                      "requests_from": str(args.requests_from) if args.requests_from else None,
                      "gpuroute_server": f"python -m gpuroute.cli build PBF --profile car.lua -o DIR; python -m "
                                         f"gpuroute.cli serve DIR --threads {threads} --max-table-size 1000"
                                         + (f" --workers {args.workers}" if args.workers else ""),
                      "osrm_server": f"osrm-extract -p car.lua; osrm-partition; osrm-customize; osrm-routed "
                                     f"--algorithm mld -t {osrm_threads} --max-table-size 1000",
                      "measure": "server CPU = utime + stime of the server process and its worker processes "
                                 "(/proc/PID/stat, all threads) over a level / requests sent; memory: RSS and PSS "
                                 "(/proc/PID/smaps_rollup) per process; latency from the load generator in this "
                                 "process (it shares the cores)",
                      "load_generator": f"{args.client} in the benchmark process, asyncio, one keep-alive "
                                        "connection per client"},
           "peers": {"osrm": note}, "graphs": {}}
    requests = {}
    failed = []
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = "_".join(x for x in ("serve_dataset", res["date"], args.label, res["commit"],
                                "quick" if args.quick else "") if x)
    def run_osrm(c, rnd):
        base, info = osrm_prepare(bindir, prof, c.pbf, c.gname, osrm_threads, algorithm="mld")
        port = free_port()
        logp = CACHE / f"osrm_mld_{c.gname}.log"
        p = start([Path(bindir) / "osrm-routed", "--algorithm", "mld", "-i", "127.0.0.1", "-p", port,
                   "-t", osrm_threads, "--max-table-size", 1000, base], logp)
        try:
            ready = wait_ready(p, port, "/nearest/v1/driving/0,0", logp)
            c.gres["servers"]["osrm-mld"] = {"startup_s": ready, **info, "rss_idle_mb": rss_mb(p.pid)[0],
                                           "pid_threads": threads_of(p.pid)}
            print(f"  osrm-routed up in {ready:.1f} s (port {port}; {info})", flush=True)
            rows = bench_server("osrm-mld", p, port, args.client, levels, c.routes, c.tables, [],
                                time_limit, warmup=min(100, len(c.routes)), table_levels=table_levels,
                                trips=c.trips)
            c.gres["rows"] += [dict(r, round=rnd) for r in rows]
            if "osrm" not in c.answers:
                c.answers["osrm"] = asyncio.run(fetch_json(args.client, port, c.sample + c.tables[:1]))
                c.trip_answers["osrm"] = {s: asyncio.run(fetch_json(args.client, port, ps)) for s, ps in c.trips.items()}
        finally:
            stop(p)

    def run_gpuroute(c, v, rnd):
        name = v["name"] if variants else "gpuroute"
        port = free_port()
        logp = CACHE / f"gpuroute_dataset_{c.gname}_{name}.log"
        cmd, env = variant_command(v, c.ds, port, threads, args.workers, cores)
        p = start(cmd, logp, env=env)
        try:
            ready = wait_ready(p, port, "/health", logp, timeout=300)
            c.gres["servers"][name] = {"startup_s": ready, "pid_threads": threads_of(p.pid),
                                     "rss_idle_mb": rss_mb(p.pid)[0], "idle_memory": tree_memory(p.pid),
                                     "variant": v, "command": [str(x) for x in cmd]}
            print(f"  {name} up in {ready:.1f} s (port {port})", flush=True)
            rows = bench_server(name, p, port, args.client, levels, c.routes, c.tables, [],
                                time_limit, warmup=min(100, len(c.routes)), table_levels=table_levels,
                                trips=c.trips)
            c.gres["rows"] += [dict(r, round=rnd) for r in rows]
            if "gpuroute" not in c.answers:
                c.answers["gpuroute"] = asyncio.run(fetch_json(args.client, port, c.sample + c.tables[:1]))
                c.trip_answers["gpuroute"] = {s: asyncio.run(fetch_json(args.client, port, ps))
                                              for s, ps in c.trips.items()}
                c.trip_answers[("variant", name)] = c.trip_answers["gpuroute"]
            elif ("variant", name) not in c.trip_answers:  # every variant's trips: their totals differ by the search
                c.trip_answers[("variant", name)] = {s: asyncio.run(fetch_json(args.client, port, ps))
                                                     for s, ps in c.trips.items()}
            if c.same and name not in c.bodies:
                c.bodies[name] = asyncio.run(fetch_raw(args.client, port, c.same))
        finally:
            stop(p)
        for r in c.gres["rows"]:
            if r["server"] == name and r.get("round") == rnd and r["errors"] > r.get("no_route", 0):
                failed.append(f"{c.gname}: {name} {r['service']} N={r['clients']}: {r['errors']} errors "
                              f"({r.get('no_route', 0)} NoRoute); first: {r['first_error']}")

    try:
        for gname in graphs:
            print(f"## {gname}", flush=True)
            pbf = find_pbf(gname)
            sha = file_sha256(pbf)
            gres = res["graphs"][gname] = {"pbf": str(pbf), "pbf_sha256": sha, "rows": [], "servers": {}}
            ds, binfo = gpuroute_build(pbf, lua, gname, env=variant_env(variants[0]) if variants else None)
            gres["gpuroute_build"] = binfo
            print(f"  gpuroute build: {binfo}", flush=True)
            if reuse is not None:
                if gname not in reuse:
                    raise KeyError(f"{args.requests_from} has no requests for {gname}")
                req = reuse[gname]
                if req.get("pbf_sha256") != sha:
                    print(f"  WARNING: {pbf} differs from the file the requests were made for", flush=True)
            else:
                rng = np.random.default_rng(args.seed)
                pts = snappable_points(ds, 2 * n_routes + n_tables * args.table_size, rng)
                req = dict(dataset_requests(pts, n_routes, n_tables, args.table_size), pbf_sha256=sha)
            have = req.get("trips") or {}
            draw = [k for k in trip_sizes if len(have.get(str(k), ())) < n_trips]
            if draw:  # a fresh run, or an earlier run's file without (enough of) these trips
                if reuse is not None:
                    print(f"  {args.requests_from} has fewer than {n_trips} trips of {draw} stops: drawn from seed "
                          f"{args.seed}", flush=True)
                req = dict(req, trips={**have, **trip_requests(trip_points(ds, draw, n_trips, args.seed), n_trips)})
            requests[gname] = req
            routes = [f"/route/v1/driving/{c}?{DATASET_ROUTE_QUERY}" for c in req["routes"][:n_routes]]
            tables = [f"/table/v1/driving/{c}" for c in req["tables"][:n_tables]]
            sample = routes[:args.agree]
            answers = {}
            same = identity_paths(req, args.agree) if variants else []
            bodies = {}

            c = types.SimpleNamespace(gname=gname, pbf=pbf, ds=ds, gres=gres, routes=routes, tables=tables,
                                      sample=sample, answers=answers, same=same, bodies=bodies,
                                      trips=trip_paths(req, trip_sizes, n_trips), trip_answers={})
            for rnd in range(args.rounds):
                print(f"  round {rnd + 1} of {args.rounds} (load average {loadavg()})", flush=True)
                run_osrm(c, rnd)
                for v in (variants or [parse_variant(["gpuroute"])]):
                    run_gpuroute(c, v, rnd)
            if bodies:
                first = next(iter(bodies))
                ident = gres["identical"] = {"reference": first, "requests": len(same)}
                for name, got in bodies.items():
                    diff = [same[i] for i, (a, b) in enumerate(zip(got, bodies[first], strict=True)) if a != b]
                    ident[name] = {"identical": len(same) - len(diff), "differ": diff[:5]}
                print(f"  byte-identical answers: {json.dumps(ident)}", flush=True)
                for name, x in ident.items():
                    if isinstance(x, dict) and x["differ"]:
                        failed.append(f"{gname}: {name} answered {len(same) - x['identical']} of {len(same)} "
                                      f"requests differently from {first}: {x['differ'][:2]}")

            ours, theirs = answers["gpuroute"], answers["osrm"]
            field = lambda a, k: np.array([x["routes"][0][k] if x and x.get("code") == "Ok" and x.get("routes")  # noqa: E731
                                           else np.nan for x in a])
            agree = {"route duration": compare(field(ours[:-1], "duration"), field(theirs[:-1], "duration")),
                     "route distance": compare(field(ours[:-1], "distance"), field(theirs[:-1], "distance"))}
            if ours[-1] and theirs[-1]:
                to = lambda a: np.array([[np.nan if x is None else x for x in row] for row in a["durations"]])  # noqa: E731
                agree[f"table {tables_size(tables)} durations"] = compare(to(ours[-1]), to(theirs[-1]))
            for k in trip_sizes:
                agree[f"trip {k} duration"] = trip_agreement(c.trip_answers["gpuroute"][f"trip {k}"],
                                                             c.trip_answers["osrm"][f"trip {k}"], k)
                for key, got in c.trip_answers.items():  # with --variant: each variant's (the first's is the above)
                    if isinstance(key, tuple) and len(c.trip_answers) > 3:
                        agree[f"trip {k} duration, {key[1]}"] = trip_agreement(got[f"trip {k}"],
                                                                              c.trip_answers["osrm"][f"trip {k}"], k)
            gres["agreement"] = agree
            print(f"  agreement: {json.dumps(agree)}", flush=True)
    finally:
        stop_all()
        res["loadavg_after"] = loadavg()
        res["failed"] = failed
        req_path = out / f"{stem}.requests.json.gz"
        if reuse is None and requests:
            req_path.write_bytes(__import__("gzip").compress(json.dumps(requests).encode(), mtime=0))
            res["requests_file"] = req_path.name
        elif reuse is not None:
            res["requests_file"] = str(Path(os.path.relpath(Path(args.requests_from).parent, out)) /
                                       (prev or {}).get("requests_file", Path(args.requests_from).name))
        res["side_by_side"] = side_by_side(res)
        path = out / f"{stem}.json"
        path.write_text(json.dumps(res, indent=1, default=float) + "\n")
        md = dataset_markdown(res, prev) if any(g.get("rows") for g in res["graphs"].values()) else ""
        if md:
            path.with_suffix(".md").write_text(md + "\n")
        print(f"\nwrote {path}" + (f", {path.with_suffix('.md').name}" if md else "") +
              (f", {req_path.name}" if reuse is None and requests else "") + "\n")
        print(md)
    if failed:
        print("\nFAILED: gpuroute answered errors:\n  " + "\n  ".join(failed), file=sys.stderr)
        sys.exit(1)


# ------------------------------------------------------------------------------------------------ main
def launch(argv):
    """``serve.py --launch JSON ARGS...``: set the gpuroute.config constants of JSON, then run ``gpuroute
    ARGS`` (a ``set=`` variant's server)."""
    import gpuroute.config as cfg
    from gpuroute.cli.main import main as cli

    for k, val in json.loads(argv[0]).items():
        if not hasattr(cfg, k):
            sys.exit(f"gpuroute.config has no {k}")
        setattr(cfg, k, val)
    sys.exit(cli(argv[1:]))


def main():
    if sys.argv[1:2] == ["--launch"]:
        return launch(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="Monaco, 500 routes and 20 tables per level (~1-2 min)")
    mode.add_argument("--full", action="store_true", help="Monaco and Andorra, 2,000 routes and 100 tables per "
                                                          "level, 3 tables 1000x1000")
    ap.add_argument("--dataset", action="store_true",
                    help="serve built datasets: gpuroute build --profile car.lua + serve DIR against osrm-extract "
                         "car.lua + partition + customize + osrm-routed --algorithm mld (Monaco, Andorra, Helsinki;"
                         " with --quick Monaco only)")
    ap.add_argument("--requests-from", default=None,
                    help="--dataset: send the requests of this earlier --dataset result JSON (before/after)")
    ap.add_argument("--label", default="", help="--dataset: a word in the output's name (before, after)")
    ap.add_argument("--table-clients", nargs="+", type=int, default=None, help="--dataset: table levels (1)")
    ap.add_argument("--variant", nargs="+", action="append", default=None, metavar="NAME [KEY=VALUE]",
                    help="--dataset: a gpuroute server to measure, repeatable (default: gpuroute serve of this "
                         "tree): keys src=DIR (a copy of src/), http=h11|httptools, server=gpuroute|granian, "
                         "set=CONFIG=VALUE[,...]; the answers of a sample are compared byte for byte with the "
                         "first variant's")
    ap.add_argument("--rounds", type=int, default=1,
                    help="--dataset: measure osrm-routed and every variant this many times, alternating")
    ap.add_argument("--graphs", nargs="+", default=None, help="Monaco, Andorra (--dataset: Helsinki too)")
    ap.add_argument("--clients", nargs="+", type=int, default=None, help="default 1 8 32 (--dataset: 1 4)")
    ap.add_argument("--routes", type=int, default=None, help="route requests per level")
    ap.add_argument("--tables", type=int, default=None, help="table requests per level")
    ap.add_argument("--table-size", type=int, default=100)
    ap.add_argument("--trips", type=int, default=None,
                    help="--dataset: /trip requests per size, at one client (default 20; --quick 10; 0: none)")
    ap.add_argument("--trip-sizes", nargs="+", type=int, default=None, metavar="K",
                    help="--dataset: stops per /trip request, one level each (default 12; 2..100, each once)")
    ap.add_argument("--big-table", type=int, default=None, help="1000x1000 tables (one at a time) per server")
    ap.add_argument("--threads", type=int, default=None, help="gpuroute worker threads (default: cores)")
    ap.add_argument("--workers", type=int, default=None,
                    help="gpuroute serve --workers N (default: none given, the server's default: the cores); "
                         "server CPU and memory are then summed over its processes")
    ap.add_argument("--osrm-threads", type=int, default=None, help="osrm-routed -t (default: cores)")
    ap.add_argument("--client", choices=("raw", "httpx"), default="raw")
    ap.add_argument("--client-cpus", default=None, metavar="LIST",
                    help="the load generator on these CPUs (e.g. 15), every server on the others (default: unpinned)")
    ap.add_argument("--time-limit", type=float, default=None, help="seconds per level at most")
    ap.add_argument("--agree", type=int, default=200, help="routes compared between the servers")
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--no-osrm", action="store_true")
    ap.add_argument("--osrm-bin", default=None)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = ap.parse_args()
    if args.client_cpus:
        pin(args.client_cpus)
    if args.dataset:
        if args.full or args.big_table or args.no_osrm:
            ap.error("--dataset runs its own set (--quick: Monaco only); --full, --big-table and --no-osrm do "
                     "not apply")
        if args.trips is not None and args.trips < 0:
            ap.error(f"--trips {args.trips}: expected 0 or more")
        bad = [k for k in args.trip_sizes or [] if not 2 <= k <= 100]
        if bad or len(set(args.trip_sizes or [])) < len(args.trip_sizes or []):
            ap.error(f"--trip-sizes {' '.join(map(str, args.trip_sizes))}: each size once, 2..100 stops (both "
                     f"servers' --max-trip-size)" + (f"; {bad[0]} is not" if bad else ""))
        return main_dataset(args)
    if (args.requests_from or args.label or args.table_clients or args.variant or args.rounds != 1
            or args.trips is not None or args.trip_sizes):
        ap.error("--requests-from, --label, --table-clients, --variant, --rounds, --trips and --trip-sizes go with "
                 "--dataset")
    args.clients = args.clients or [1, 8, 32]

    cores = usable_cores()
    threads = args.threads or cores
    osrm_threads = args.osrm_threads or cores
    graphs = args.graphs or (["Monaco", "Andorra"] if args.full else ["Monaco"])
    n_routes = args.routes or (500 if args.quick else 2000)
    n_tables = args.tables or (20 if args.quick else 100)
    n_big = args.big_table if args.big_table is not None else (3 if args.full else 0)
    time_limit = args.time_limit or (10.0 if args.quick else 60.0)

    signal.signal(signal.SIGTERM, _on_sigterm)
    atexit.register(stop_all)
    CACHE.mkdir(parents=True, exist_ok=True)

    res = {"benchmark": "serve", "date": dt.date.today().isoformat(), "commit": commit(), "src_changes": dirty(),
           "mode": "quick" if args.quick else "full" if args.full else "custom",
           "host": {"hostname": platform.node(), "cpu": cpu_model(), "cores": cores,
                    "platform": platform.platform()},
           "versions": versions(), "loadavg_before": loadavg(),
           "config": {"graphs": graphs, "clients": args.clients, "routes_per_level": n_routes,
                      "tables_per_level": n_tables, "table_size": args.table_size, "big_tables": n_big,
                      "time_limit_per_level_s": time_limit, "client": args.client, "threads": threads,
                      "workers": args.workers,
                      "osrm_threads": osrm_threads, "seed": args.seed, "route_query": ROUTE_QUERY,
                      "gpuroute_server": f"python -m gpuroute.cli serve PBF --threads {threads} --max-table-size "
                                         "1000: one uvicorn process (asyncio + h11 event loop) and at most "
                                         f"{threads} engine worker threads",
                      "osrm_server": f"osrm-routed --algorithm ch -t {osrm_threads} --max-table-size 1000 "
                                     "(extract with OSRM's car.lua, contract)",
                      "load_generator": f"{args.client} in the benchmark process, asyncio, one keep-alive "
                                        "connection per client; it shares the machine's cores with the server"},
           "peers": {}, "graphs": {}}
    if args.no_osrm:
        bindir, prof, note = None, None, "skipped (--no-osrm)"
    else:
        bindir, prof, note = osrm_bin(args.osrm_bin)
        if bindir is None:
            note = f"skipped: {note}"
    res["peers"]["osrm"] = note
    print(f"osrm: {note}", flush=True)

    failed = []
    try:
        for gname in graphs:
            print(f"## {gname}", flush=True)
            rng = np.random.default_rng(args.seed)
            coords, pbf = graph(gname)
            routes, tables, big = make_requests(coords, rng, n_routes, n_tables, args.table_size, n_big)
            gres = res["graphs"][gname] = {"pbf": str(pbf), "nodes": int(len(coords)), "rows": [], "servers": {}}
            sample = routes[:args.agree]
            answers = {}

            # gpuroute
            port = free_port()
            logp = CACHE / f"gpuroute_{gname}.log"
            env = dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
            p = start([sys.executable, "-m", "gpuroute.cli", "serve", pbf, "--port", port, "--threads", threads,
                       "--max-table-size", 1000, *(["--workers", args.workers] if args.workers else [])], logp,
                      env=env)
            try:
                ready = wait_ready(p, port, "/health", logp)
                gres["servers"]["gpuroute"] = {"startup_s": ready, "pid_threads": threads_of(p.pid),
                                               "rss_idle_mb": rss_mb(p.pid)[0]}
                print(f"  gpuroute up in {ready:.1f} s (port {port})", flush=True)
                gres["rows"] += bench_server("gpuroute", p, port, args.client, args.clients, routes, tables, big,
                                             time_limit, warmup=min(200, n_routes))
                answers["gpuroute"] = asyncio.run(fetch_json(args.client, port, sample + tables[:1]))
            finally:
                stop(p)
            bad = [r for r in gres["rows"] if r["server"] == "gpuroute" and r["errors"]]
            if bad:
                failed.append(f"{gname}: gpuroute {bad[0]['service']} N={bad[0]['clients']}: {bad[0]['errors']} "
                              f"errors; first: {bad[0]['first_error']}")

            # osrm-routed
            if bindir:
                base, info = osrm_prepare(bindir, prof, pbf, gname, osrm_threads)
                port = free_port()
                logp = CACHE / f"osrm_{gname}.log"
                p = start([Path(bindir) / "osrm-routed", "--algorithm", "ch", "-i", "127.0.0.1", "-p", port,
                           "-t", osrm_threads, "--max-table-size", 1000, base], logp)
                try:
                    ready = wait_ready(p, port, "/nearest/v1/driving/0,0", logp)
                    gres["servers"]["osrm-ch"] = {"startup_s": ready, **info, "rss_idle_mb": rss_mb(p.pid)[0],
                                                  "pid_threads": threads_of(p.pid)}
                    print(f"  osrm-routed up in {ready:.1f} s (port {port}; {info})", flush=True)
                    gres["rows"] += bench_server("osrm-ch", p, port, args.client, args.clients, routes, tables, big,
                                                 time_limit, warmup=min(200, n_routes))
                    answers["osrm"] = asyncio.run(fetch_json(args.client, port, sample + tables[:1]))
                finally:
                    stop(p)
                ours, theirs = answers["gpuroute"], answers["osrm"]
                agree = {"route duration": compare(route_durations(ours[:-1]), route_durations(theirs[:-1]))}
                if ours[-1] and theirs[-1]:
                    to = lambda a: np.array([[np.nan if x is None else x for x in row] for row in a["durations"]])  # noqa: E731
                    agree[f"table {tables_size(tables)} durations"] = compare(to(ours[-1]), to(theirs[-1]))
                gres["agreement"] = agree
                print(f"  agreement: {agree}", flush=True)
    finally:
        stop_all()
        res["loadavg_after"] = loadavg()
        res["failed"] = failed
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        suffix = ("_quick" if args.quick else "") + ("_httpx" if args.client == "httpx" else "")
        path = out / f"serve_cpu_{res['date']}{suffix}.json"
        path.write_text(json.dumps(res, indent=1, default=float) + "\n")
        print(f"\nwrote {path}\n")
        if any(g.get("rows") for g in res["graphs"].values()):
            print(markdown(res))
    if failed:
        print("\nFAILED: gpuroute answered errors:\n  " + "\n  ".join(failed), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
