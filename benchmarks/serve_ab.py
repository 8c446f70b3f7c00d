"""Benchmark suite: server CPU per ``GET /route`` and one-client latency of several servers, started one after
the other in alternating rounds on the same dataset (issue 20, deliverable 3: a before -> after of the request
path, side by side with osrm-routed).

Each server (a shell command with ``{port}``, e.g. ``gpuroute serve DIR --workers 1 --port {port}`` under
another ``PYTHONPATH``, or ``osrm-routed --algorithm mld -t 1 -p {port} X.osrm``) is started, waited for (its
first ``/route`` answered 200), sent ``--warm`` routes, then ``--n`` routes one at a time on one keep-alive
connection (reopened where the server closes it, as osrm-routed does every few hundred requests). Recorded per
server and round: the CPU of the server's process tree (utime + stime from ``/proc``, clock ticks) per
request, the median and p99 wall time of a request seen by the client, the client's own CPU per request,
non-200 answers, and the load average. The requests are ``/route/v1/driving/{a};{b}?{query}`` of an earlier
``benchmarks/serve.py --dataset`` run's random snappable points (its ``.requests.json.gz``).

A shared machine's load moves between rounds: compare the servers within a round, and the medians over
rounds; the CPU per request is the number to read (the wall time also holds the scheduler's delays).

Usage (from the repo root):
    .venv/bin/python benchmarks/serve_ab.py --n 3000 --rounds 3 --json OUT.json \\
        "osrm=.venv/osrm/wheel/osrm/bin/osrm-routed --algorithm mld -t 1 -i 127.0.0.1 -p {port} X.osrm" \\
        "before=PYTHONPATH=/tmp/before/src .venv/bin/python -m gpuroute.cli serve DIR --workers 1 --port {port}" \\
        "after=PYTHONPATH=src .venv/bin/python -m gpuroute.cli serve DIR --workers 1 --port {port}"
"""
from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REQUESTS = ROOT / "benchmarks" / "results" / "serve_dataset_2026-11-26_before_75fde7b.requests.json.gz"
TICK = os.sysconf("SC_CLK_TCK")


def tree_pids(pid):
    """``pid`` and its descendants (``/proc/PID/task/PID/children``)."""
    out = [pid]
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        kids = []
    for k in kids:
        out += tree_pids(int(k))
    return out


def cpu_s(pid):
    """utime + stime (s) of ``pid``'s process tree."""
    total = 0
    for p in tree_pids(pid):
        try:
            f = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(f[11]) + int(f[12])
        except OSError:
            pass
    return total / TICK


class Client:
    """One keep-alive HTTP/1.1 connection, reopened where the server closes it."""

    def __init__(self, port):
        self.port = port
        self.sock = None
        self.buf = b""

    def _open(self):
        self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=60)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def get(self, path):
        """``(status, body)``."""
        for attempt in (0, 1):
            if self.sock is None:
                self._open()
            try:
                return self._get(path)
            except OSError:
                self.close()
                if attempt:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _get(self, path):
        self.sock.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
        data = self.buf
        while True:
            i = data.find(b"\r\n\r\n")
            if i >= 0:
                head = data[:i].lower()
                j = head.find(b"content-length:")
                end = head.find(b"\r\n", j)
                n = int(head[j + 15:end if end > 0 else None])
                if len(data) >= i + 4 + n:
                    self.buf = data[i + 4 + n:]
                    return int(data[9:12]), data[i + 4:i + 4 + n]
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionResetError("closed by the server")
            data += chunk

    def close(self):
        if self.sock is not None:
            self.sock.close()
        self.sock = None


def wait_ready(port, path, proc, limit=900.0):
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < limit:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited {proc.returncode}")
        c = Client(port)
        try:
            if c.get(path)[0] == 200:
                return time.perf_counter() - t0
        except OSError:
            pass
        finally:
            c.close()
        time.sleep(0.05)
    raise TimeoutError(f"no answer on port {port} in {limit} s")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(name, cmd, paths, warm, log_dir):
    port = free_port()
    log = open(Path(log_dir) / f"serve_ab_{name}.log", "w")  # noqa: SIM115 - closed below
    p = subprocess.Popen(cmd.format(port=port), shell=True, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log,
                         start_new_session=True)
    try:
        start_s = wait_ready(port, paths[0], p)
        c = Client(port)
        for q in paths[:warm]:
            c.get(q)
        c0, k0 = cpu_s(p.pid), time.process_time()
        lat, bad = [], 0
        for q in paths:
            t = time.perf_counter()
            status, _ = c.get(q)
            lat.append(time.perf_counter() - t)
            bad += status != 200
        c1, k1 = cpu_s(p.pid), time.process_time()
        c.close()
    finally:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
        log.close()
    lat.sort()
    n = len(paths)
    return {"server_cpu_ms": (c1 - c0) * 1e3 / n, "p50_ms": statistics.median(lat) * 1e3,
            "p99_ms": lat[min(n - 1, int(0.99 * n))] * 1e3, "client_cpu_ms": (k1 - k0) * 1e3 / n, "non200": bad,
            "requests": n, "first_answer_s": start_s, "loadavg": list(os.getloadavg())}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("servers", nargs="+", metavar="NAME=COMMAND")
    ap.add_argument("--n", type=int, default=3000, help="routes per server and round")
    ap.add_argument("--warm", type=int, default=100, help="routes sent first, not counted")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--graph", default="Monaco")
    ap.add_argument("--query", default="overview=full")
    ap.add_argument("--requests", default=str(REQUESTS))
    ap.add_argument("--json", default=None)
    ap.add_argument("--log-dir", default=str(ROOT / "out"))
    args = ap.parse_args()
    servers = [s.split("=", 1) for s in args.servers]
    if any(len(s) != 2 or not s[0] for s in servers):
        sys.exit("each server is NAME=COMMAND")
    routes = json.loads(gzip.decompress(Path(args.requests).read_bytes()))[args.graph]["routes"]
    paths = [f"/route/v1/driving/{r}?{args.query}" for r in routes[:args.n]]
    Path(args.log_dir).mkdir(parents=True, exist_ok=True)
    res = {name: [] for name, _ in servers}
    for rnd in range(args.rounds):
        for name, cmd in servers:
            row = measure(name, cmd, paths, args.warm, args.log_dir)
            res[name].append(row)
            print(f"round {rnd} {name:12s} server CPU {row['server_cpu_ms']:.3f} ms/request  p50 {row['p50_ms']:.3f} "
                  f"ms  p99 {row['p99_ms']:.3f} ms  non-200 {row['non200']}  load {row['loadavg'][0]:.1f}", flush=True)
    summary = {name: {"server_cpu_ms": statistics.median(r["server_cpu_ms"] for r in rows),
                      "p50_ms": statistics.median(r["p50_ms"] for r in rows)} for name, rows in res.items()}
    for name, s in summary.items():
        print(f"median {name:12s} server CPU {s['server_cpu_ms']:.3f} ms/request  p50 {s['p50_ms']:.3f} ms")
    if args.json:
        out = {"date": dt.date.today().isoformat(), "host": os.uname().nodename, "cpus": os.cpu_count(),
               "graph": args.graph, "query": args.query, "servers": dict(servers), "rounds": res, "median": summary}
        Path(args.json).write_text(json.dumps(out, indent=1))
    if any(r["non200"] for rows in res.values() for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
