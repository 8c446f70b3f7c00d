"""``gpuroute serve DIR --workers 2`` (issue 20): worker processes forked after the load answer as one
process does, switch to a new metric together after a ``/customize`` with no answer mixing two metrics, a
worker killed with SIGKILL is replaced while the other goes on answering, and SIGTERM answers the request
in flight and stops every process. The oracle is the single-process engine on the same Monaco dataset
directory (in this process, through the same HTTP application).

One server for the module (its start -- load and warm-up -- is most of this file's time); the tests run in
file order and the last one stops it. :class:`gpuroute.server.workers.Board` is also checked in this process
(publish and adopt between two engines)."""
from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("osmium")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("orjson")
pytest.importorskip("httpx")
if not sys.platform.startswith("linux"):
    pytest.skip("worker processes are forked, with SO_REUSEPORT (Linux)", allow_module_level=True)

with warnings.catch_warnings():  # starlette's note about httpx2
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

from gpuroute.engine import Engine  # noqa: E402
from gpuroute.engine.dataset import traffic_store  # noqa: E402
from gpuroute.pipeline import build_dataset  # noqa: E402
from gpuroute.server import create_app  # noqa: E402
from gpuroute.server import workers as W  # noqa: E402

SRC = Path(__file__).resolve().parents[2] / "src"
START_DEADLINE_S = 900  # a guard against a hung start, not a measurement


# ------------------------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    d = tmp_path_factory.mktemp("ds") / "monaco"
    build_dataset("monaco", d, cell_sizes=(64, 1024))
    return d


class Server:
    def __init__(self, proc, port):
        self.proc, self.port, self.lines = proc, port, []

    def conn(self):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)

    def stderr(self):
        return "\n".join(self.lines)


@pytest.fixture(scope="module")
def server(dataset):
    """``gpuroute serve DATASET --workers 2 --port 0`` in a subprocess, up once /health answers 200."""
    env = dict(os.environ, PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("GPUROUTE_DISABLE_GPU", None)
    proc = subprocess.Popen([sys.executable, "-m", "gpuroute.cli", "serve", str(dataset), "--workers", "2",
                             "--port", "0"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    srv = Server(proc, None)
    found = threading.Event()

    def read():
        for line in proc.stderr:
            srv.lines.append(line.rstrip())
            if srv.port is None and " on http://127.0.0.1:" in line:
                srv.port = int(line.split(" on http://127.0.0.1:")[1].split()[0].rstrip("/"))
                found.set()
        found.set()

    threading.Thread(target=read, daemon=True).start()
    t0 = time.monotonic()
    try:
        while True:
            assert proc.poll() is None, f"the server exited {proc.returncode}:\n{srv.stderr()}"
            assert time.monotonic() - t0 < START_DEADLINE_S, f"the server did not start:\n{srv.stderr()}"
            if srv.port is not None:
                try:
                    c = srv.conn()
                    c.request("GET", "/health")
                    if c.getresponse().status == 200:
                        c.close()
                        break
                except OSError:
                    pass
            time.sleep(0.2)
        yield srv
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _oracle(dataset, metric=None):
    """A single-process engine on the dataset (its customizations not saved) and its HTTP client."""
    e = Engine.open(dataset)
    traffic_store(e.overlay).persist = False
    if metric is not None:
        e.customize(metric=metric)
    return e, TestClient(create_app(e))


@pytest.fixture(scope="module")
def oracles(server, dataset):
    """Single-process answers for the built metric ("time") and for "distance" (opened after the server
    loaded: nothing it reads is changed)."""
    return {"time": _oracle(dataset), "distance": _oracle(dataset, "distance")}


def _coords(e, idx):
    c = e.graph.coords
    return ";".join(f"{c[i, 0]:.7f},{c[i, 1]:.7f}" for i in idx)


def _paths(e):
    n = e.graph.n_nodes
    rng = np.random.default_rng(20)
    far = [0, n // 2, n - 1]
    out = [f"/route/v1/driving/{_coords(e, far)}?steps=true&annotations=true&overview=full",
           f"/route/v1/driving/{_coords(e, far[:2])}?alternatives=true&geometries=geojson"]
    out += [f"/route/v1/driving/{_coords(e, p)}" for p in rng.integers(0, n, (4, 2))]
    out.append(f"/table/v1/driving/{_coords(e, rng.integers(0, n, 7))}?annotations=duration,distance")
    out.append(f"/nearest/v1/driving/{_coords(e, [n // 3])}?number=3")
    return out


def _get(conn, path):
    """``(status, worker pid, generation, body)`` over a keep-alive connection."""
    conn.request("GET", path)
    r = conn.getresponse()
    body = json.loads(r.read())
    return r.status, int(r.getheader("X-Gpuroute-Worker")), int(r.getheader("X-Gpuroute-Generation")), body


def _each_worker(srv, path, want=2, tries=400):
    """``{pid: (status, generation, body)}``: one answer of each worker, asking over new connections (the
    kernel spreads them over the workers' sockets) until ``want`` pids answered."""
    seen = {}
    for _ in range(tries):
        c = srv.conn()
        try:
            status, pid, gen, body = _get(c, path)
        finally:
            c.close()
        seen.setdefault(pid, (status, gen, body))
        if len(seen) >= want:
            return seen
    raise AssertionError(f"only workers {sorted(seen)} answered {tries} new connections")


def _children(pid):
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(d.name))
            except (OSError, IndexError, ValueError):
                pass
    return sorted(out)


class Load:
    """Threads, each on its own keep-alive connection (pinned to one worker), sending ``path`` until stopped;
    connections are opened (and their worker learnt) until every worker has at least ``per_worker``. Every
    answer is recorded as ``(connection, pid, generation, status, body, sent, answered)`` (monotonic times),
    every failure as ``(connection, pid of its worker, error)``."""

    def __init__(self, srv, path, per_worker=2, workers=2, tries=400):
        self.srv, self.path = srv, path
        self.stop = threading.Event()
        self.rows, self.errors = [], []
        self.conns, self.pid = [], {}
        count = {}
        for _ in range(tries):
            c = srv.conn()
            status, pid, _, _ = _get(c, path)
            if count.get(pid, 0) >= per_worker:
                c.close()
            else:
                count[pid] = count.get(pid, 0) + 1
                self.pid[len(self.conns)] = pid
                self.conns.append(c)
            if len(count) >= workers and min(count.values()) >= per_worker:
                break
        else:
            raise AssertionError(f"connections reached only workers {count}")
        self.threads = [threading.Thread(target=self.run, args=(i,), daemon=True) for i in range(len(self.conns))]

    def run(self, i):
        c = self.conns[i]
        try:
            while not self.stop.is_set():
                t0 = time.monotonic()
                status, pid, gen, body = _get(c, self.path)
                self.rows.append((i, pid, gen, status, body, t0, time.monotonic()))
        except (OSError, http.client.HTTPException) as e:
            self.errors.append((i, self.pid[i], repr(e)))
        finally:
            c.close()

    def count(self, pred):
        return sum(1 for r in list(self.rows) if pred(r))

    def wait(self, pred, k, what):
        t0 = time.monotonic()
        while self.count(pred) < k:
            assert time.monotonic() - t0 < 300, f"no {k} answers {what}: {self.errors}"
            time.sleep(0.02)

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(120)


# ------------------------------------------------------------------------------------------------ tests
def test_two_workers_answer_as_one_process(server, oracles):
    e, client = oracles["time"]
    assert "2 worker processes" in server.stderr()
    for path in _paths(e):
        want = client.get(path)
        got = _each_worker(server, path)
        for pid, (status, gen, body) in got.items():
            assert (status, gen) == (want.status_code, 0), (pid, path, body)
            assert body == want.json(), (pid, path)
    workers = _children(server.proc.pid)
    assert len(workers) == 2 and set(got) == set(workers)


def test_keep_alive_connections_spread_evenly_over_the_workers(server, oracles):
    """The parent hands each new connection to the worker with the fewest open ones (``SERVE_DISPATCH``'s
    default): four keep-alive connections held open land two on each worker (the kernel's SO_REUSEPORT hash
    splits them 2:2 in only 6 of 16 draws)."""
    e, client = oracles["time"]
    path = f"/route/v1/driving/{_coords(e, [2, e.graph.n_nodes // 2])}?overview=false"
    want = client.get(path).json()
    time.sleep(0.5)  # the earlier tests' closed connections counted by their workers (not a measurement)
    conns = [server.conn() for _ in range(4)]
    try:
        pids = []
        for c in conns:
            status, pid, _, body = _get(c, path)
            assert status == 200 and body == want
            pids.append(pid)
        for c in conns:  # every connection stays with its worker
            assert _get(c, path)[1] == pids[conns.index(c)]
    finally:
        for c in conns:
            c.close()
    assert sorted(pids.count(p) for p in set(pids)) == [2, 2], pids
    assert set(pids) == set(_children(server.proc.pid))


def test_customize_switches_every_worker_and_no_answer_mixes_metrics(server, oracles):
    e, client = oracles["time"]
    n = e.graph.n_nodes
    path = f"/route/v1/driving/{_coords(e, [0, n // 2, n - 1])}?overview=false"
    old, new = client.get(path).json(), oracles["distance"][1].get(path).json()
    assert old != new and old["code"] == new["code"] == "Ok"
    load = Load(server, path)
    with load:
        load.wait(lambda r: True, 8, "before /customize")
        c = server.conn()
        t_sent = time.monotonic()
        c.request("POST", "/customize", body=json.dumps({"metric": "distance"}),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        res = json.loads(r.read())
        t_done = time.monotonic()
        c.close()
        assert r.status == 200 and res["metric"] == "distance", res
        assert res["workers"]["generation"] == 1 and res["workers"]["bytes"] > 0
        # every connection (so every worker) answers a few requests started after the answer
        for i in range(len(load.conns)):
            load.wait(lambda row, i=i: row[0] == i and row[5] > t_done, 3, f"of thread {i} after /customize")
    assert not load.errors, load.errors
    pids = set()
    for _, pid, gen, status, body, t0, t1 in load.rows:
        assert status == 200
        assert body in (old, new), "an answer of neither metric (a mix)"
        if t0 > t_done:
            assert body == new and gen == 1, (pid, gen)
            pids.add(pid)
        if t1 < t_sent:
            assert body == old and gen == 0, (pid, gen)
    # every worker answers on the new metric, the pinned connections' and new ones alike
    for pid, (status, gen, body) in _each_worker(server, path).items():
        assert (status, gen, body) == (200, 1, new), pid
    assert pids == set(load.pid.values()) == set(_children(server.proc.pid))


def test_a_refused_customize_changes_nothing_anywhere(server, oracles):
    e, client = oracles["distance"]
    path = f"/route/v1/driving/{_coords(e, [5, e.graph.n_nodes - 5])}?overview=false"
    want = client.get(path).json()
    c = server.conn()
    for bad in ({"metric": "fastest"}, {"updates": [{"arc": 0, "cost": 7}, {"arc": e.graph.n_arcs, "cost": 7}]}):
        c.request("POST", "/customize", body=json.dumps(bad), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        assert r.status == 400 and json.loads(r.read())["code"] == "InvalidValue"
    c.close()
    for pid, (status, gen, body) in _each_worker(server, path).items():
        assert (status, gen, body) == (200, 1, want), pid


def test_a_killed_worker_is_replaced_and_the_other_keeps_answering(server, oracles):
    e, client = oracles["distance"]
    path = f"/route/v1/driving/{_coords(e, [3, e.graph.n_nodes // 3])}?overview=false"
    want = client.get(path).json()
    before = _children(server.proc.pid)
    assert len(before) == 2
    load = Load(server, path)
    assert set(load.pid.values()) == set(before)
    victim, survivor = before
    with load:
        load.wait(lambda r: True, 8, "before the kill")
        n_kill = load.count(lambda r: True)
        os.kill(victim, signal.SIGKILL)
        load.wait(lambda r: r[1] == survivor, load.count(lambda r: r[1] == survivor) + 20, "of the other worker")
    assert all(pid == victim for _, pid, _ in load.errors), load.errors  # only the killed worker's connections
    assert all(r[3] == 200 and r[4] == want for r in load.rows), "an answer other than the oracle's"
    assert load.count(lambda r: True) > n_kill
    t0 = time.monotonic()
    while True:  # the parent forks a replacement
        now = _children(server.proc.pid)
        if len(now) == 2 and victim not in now:
            break
        assert time.monotonic() - t0 < 120, f"no replacement: {now}\n{server.stderr()}"
        time.sleep(0.05)
    replacement = next(p for p in now if p != survivor)
    got = _each_worker(server, path)
    assert set(got) == {survivor, replacement}
    assert got[replacement] == (200, 1, want)  # it took the published traffic
    t0 = time.monotonic()
    while f"(pid {victim}) was killed by signal 9" not in server.stderr():  # the parent says so
        assert time.monotonic() - t0 < 60, server.stderr()
        time.sleep(0.05)


def test_sigterm_answers_the_request_in_flight_and_stops_every_process(server, oracles):
    e, client = oracles["distance"]
    c = e.graph.coords
    body = json.dumps({"coordinates": [[float(c[1, 0]), float(c[1, 1])], [float(c[-2, 0]), float(c[-2, 1])]],
                       "overview": "false"}).encode()
    want = client.post("/route/v1/driving", content=body, headers={"Content-Type": "application/json"}).json()
    workers = _children(server.proc.pid)
    s = socket.create_connection(("127.0.0.1", server.port), timeout=120)
    s.sendall(f"POST /route/v1/driving HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nContent-Type: application/json\r\n"
              f"Content-Length: {len(body)}\r\nExpect: 100-continue\r\n\r\n".encode())
    got = b""
    while b"\r\n\r\n" not in got:  # the worker's application is reading the body: the request is in flight
        chunk = s.recv(4096)
        assert chunk, got
        got += chunk
    assert got.startswith(b"HTTP/1.1 100"), got
    server.proc.send_signal(signal.SIGTERM)
    s.sendall(body)
    f = s.makefile("rb")
    r = http.client.HTTPResponse(s)
    r.fp = f
    r.begin()
    assert r.status == 200 and json.loads(r.read()) == want
    s.close()
    assert server.proc.wait(120) == 0, server.stderr()
    for pid in workers:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2], pid
    assert not list(Path(W._shm_root()).glob(f"{W.SHM_PREFIX}{server.proc.pid}-*"))  # the shared state is gone
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", server.port), timeout=5).close()


# ------------------------------------------------------------------------------------------------ in process
def test_board_publishes_and_adopts_a_state_without_copying(dataset, tmp_path, oracles, monkeypatch):
    """Two engines on one board: what one customizes and publishes, the other adopts (same arrays, mapped
    from the shared file, writeable as the loaded ones, so that numba compiles nothing for them), and
    answers as a single engine with that metric does."""
    import numba.core.dispatcher as nd

    a, b = Engine.open(dataset), Engine.open(dataset)
    for e in (a, b):
        traffic_store(e.overlay).persist = False
    board_a = W.Board.create(a.overlay, root=str(tmp_path))
    board_b = W.Board(board_a.directory, b.overlay)
    try:
        assert board_b.generation == 0
        res = board_a.customize(a, metric="distance")
        assert res["workers"]["generation"] == board_a.published() == 1
        st_b0 = b.overlay._state
        board_b.sync()
        assert board_b.generation == 1 and b.overlay._state is not st_b0
        arrays_a, fields_a = W.state_arrays(a.overlay._state)
        arrays_b, fields_b = W.state_arrays(b.overlay._state)
        assert fields_a == fields_b and arrays_a.keys() == arrays_b.keys()
        for k, v in arrays_b.items():
            assert v.dtype == arrays_a[k].dtype and np.array_equal(v, arrays_a[k]), k
            if v.size:
                assert v.flags.writeable and v.flags.c_contiguous and v.base is not None, k
        n = b.graph.n_nodes
        paths = [f"/route/v1/driving/{_coords(b, [0, n // 2, n - 1])}?steps=true&annotations=true",
                 f"/table/v1/driving/{_coords(b, range(1, n, n // 6))}?annotations=duration,distance",
                 f"/trip/v1/driving/{_coords(b, range(2, n, n // 5))}",
                 f"/isochrone/v1/driving/{_coords(b, [n // 3])}?contours_minutes=2"]
        want = {p: oracles["distance"][1].get(p).json() for p in paths}  # compiles what a loaded state needs
        compiled = []
        orig = nd.Dispatcher._compile_for_args

        def counting(self, *args, **kws):
            compiled.append(self.py_func.__qualname__)
            return orig(self, *args, **kws)

        monkeypatch.setattr(nd.Dispatcher, "_compile_for_args", counting)
        client = TestClient(create_app(b))
        assert {p: client.get(p).json() for p in paths} == want
        assert not compiled, compiled
        monkeypatch.undo()
        with pytest.raises(Exception) as err:  # a refused customization publishes nothing
            board_b.customize(b, metric="fastest")
        assert getattr(err.value, "code", None) == "InvalidValue" and board_a.published() == 1
    finally:
        board_a.close()
    assert not os.path.exists(board_a.directory)


def test_bind_for_workers_refuses_a_port_another_server_shares(capsys):
    """``--workers`` binds with SO_REUSEPORT, yet a port another SO_REUSEPORT server listens on is refused."""
    from gpuroute.cli.common import CLIError
    from gpuroute.cli.serve import bind

    other = socket.socket()
    other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    other.bind(("127.0.0.1", 0))
    other.listen(1)
    port = other.getsockname()[1]
    try:
        with pytest.raises(CLIError, match=f"port {port} is already in use"):
            bind("127.0.0.1", port, reuse_port=True)
    finally:
        other.close()
    s = bind("127.0.0.1", 0, reuse_port=True)
    try:
        assert s.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT) == 1
        t = W.sibling(s)  # a worker's own socket on the same port
        assert t.getsockname() == s.getsockname()
        t.close()
    finally:
        s.close()


def test_workers_option_is_checked(capsys):
    from gpuroute.cli.main import main

    assert main(["serve", "--workers", "0", "--port", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--workers 0" in err[0], err
    assert W.numba_threads(2, cores=16) == 8 and W.numba_threads(32, cores=16) == 1


def test_least_loaded_orders_by_open_connections_then_in_turn():
    assert W.least_loaded([0, 0, 0, 0], 0) == [0, 1, 2, 3]
    assert W.least_loaded([0, 0, 0, 0], 2) == [2, 3, 0, 1]
    assert W.least_loaded([1, 0, 2, 0], 0) == [1, 3, 0, 2]
    assert W.least_loaded([1, 0, 2, 0], 2) == [3, 1, 0, 2]


def _take(end):
    """The connections handed over ``end`` (a worker's end of its socket pair) so far, as sockets."""
    end.setblocking(False)
    out = []
    while True:
        try:
            _, fds, _, _ = socket.recv_fds(end, 1, 4)
        except BlockingIOError:
            return out
        out += [socket.socket(fileno=fd) for fd in fds]


def test_dispatcher_hands_connections_to_the_least_loaded_live_worker():
    """The parent's side of the dispatch, in process: three slots with socket pairs, clients connecting."""
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(64)
    lsock.setblocking(False)
    d = W.Dispatcher(lsock, 3)
    ends = [d.channel(i) for i in range(3)]
    clients, held = [], []

    def connect(k):
        for _ in range(k):
            clients.append(socket.create_connection(lsock.getsockname(), timeout=10))
        got = 0
        for _ in range(200):  # until the kernel queued them all
            got += d.pump()
            if got >= k:
                return
            time.sleep(0.01)
        raise AssertionError(f"{got} of {k} connections accepted")

    try:
        connect(6)
        taken = [_take(e) for e in ends]
        held += sum(taken, [])
        assert [len(t) for t in taken] == [2, 2, 2] and list(d.open_connections()) == [2, 2, 2]
        # a handed connection is the client's: bytes cross it
        clients[0].sendall(b"x")
        assert any(c.recv(1, socket.MSG_PEEK) == b"x" for c in held if c.getsockname() == clients[0].getpeername())
        d.closed[1] += 2  # slot 1's worker closed both of its connections
        connect(2)
        assert [len(_take(e)) for e in ends] == [0, 2, 0]
        ends[0].close()  # slot 0's worker died: the next least loaded takes its share
        connect(3)
        assert d.chan[0] is None and sorted(len(_take(e)) for e in ends[1:]) == [1, 2]
        for e in ends[1:]:
            e.close()
        connect(1)  # no worker alive: the connection waits
        assert len(d.pending) == 1
        ends[2] = d.channel(2)  # a replacement
        assert d.open_connections()[2] == 0
        d.hand_pending()
        assert not d.pending and len(_take(ends[2])) == 1
    finally:
        d.close()
        for c in clients + held:
            c.close()
        ends[2].close()
        lsock.close()


def test_dispatch_mode_is_checked():
    assert W.dispatch_mode() in W.DISPATCH_MODES
    with pytest.raises(ValueError, match="SERVE_DISPATCH = 'fastest'"):
        W.dispatch_mode("fastest")


def test_dispatcher_out_of_descriptors_waits_without_spinning(monkeypatch, caplog):
    """accept failing with EMFILE: the connections stay in the kernel's queue, one warning a second, a pause
    before the next try (the listening socket stays readable: no busy loop)."""
    import errno as errno_mod

    class Full:
        calls = 0

        def accept(self):
            Full.calls += 1
            raise OSError(errno_mod.EMFILE, "Too many open files")

    slept = []
    monkeypatch.setattr(W.time, "sleep", slept.append)
    d = W.Dispatcher(Full(), 2)
    with caplog.at_level("WARNING", logger="gpuroute.server"):
        assert d.pump() == 0 and d.pump() == 0
    assert Full.calls == 2 and slept == [W.PENDING_RETRY_S] * 2 and not d.pending
    assert sum("accept failed" in r.getMessage() for r in caplog.records) == 1
    d.close()


@pytest.mark.parametrize("cores,workers,configured,want", [(16, 16, 4, 1), (16, 2, 4, 4), (16, 8, 4, 2), (2, 2, 1, 1)])
def test_a_worker_draws_the_isochrone_lattice_on_its_share_of_the_cores(monkeypatch, cores, workers, configured,
                                                                      want):
    """Each forked worker caps the CPU lattice's parts (threads of their own) at its share of the cores, as
    numba's threads are capped: 16 workers on 16 cores draw in one part each, not 4 threads each."""
    from gpuroute import config

    monkeypatch.setattr(config, "SERVE_ISOCHRONE_LATTICE_THREADS", configured)
    monkeypatch.setattr(W, "available_cores", lambda: cores)
    W._share_cores(workers)
    assert config.SERVE_ISOCHRONE_LATTICE_THREADS == want
