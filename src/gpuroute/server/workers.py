"""Several worker processes answering from one loaded dataset: ``gpuroute serve DIR --workers N``.

One Python process answers on one core at a time (its event loop and the engine's threads share the
GIL), so ``gpuroute serve`` forks worker processes, each a whole server (uvicorn: one event loop, worker
threads), the way pre-fork servers (nginx, gunicorn) and ``osrm-routed`` over ``osrm-datastore`` do.

Process model
-------------
The parent process loads the dataset, builds the application and runs the warm-up (every service compiled
and run once, :mod:`gpuroute.server.warmup`), moves its objects out of the garbage collector's generations
(``gc.freeze``), then forks the workers: a worker compiles nothing and loads nothing. Each worker runs
uvicorn (:mod:`gpuroute.server.http`: httptools on uvloop, or h11). How connections reach the workers is
``config.SERVE_DISPATCH``:

- ``"least-connections"`` (the default): the parent alone listens; it accepts each new connection and hands
  it (its file descriptor, over a Unix socket pair per worker) to the worker with the fewest open
  connections, ties taken in turn (:class:`Dispatcher`). Keep-alive clients thus spread evenly: 8
  connections over 16 workers land on 8 different workers, 32 on two each, as ``osrm-routed``'s threads
  take connections from one queue. A worker counts the connections it closed in a shared array; the parent
  counts what it handed, so a connection costs the parent one ``accept`` and one ``sendmsg``, and a request
  nothing. A connection is never handed to a dead worker (its socket pair is closed: the next one takes it).
- ``"reuseport"``: each worker accepts on its own socket bound to the same address with ``SO_REUSEPORT``;
  the kernel hashes each connection to one, busy or not (8 connections over 16 workers share a worker in
  about a third of the draws). The parent keeps every socket open: connections that reach a dead worker's
  socket wait in its queue for the replacement.

The parent supervises (:func:`serve`): a worker that dies (a crash, ``kill -9``) is replaced at once by
a new fork of the parent (warm, like the first ones); its accepted connections are lost, every other
worker goes on answering. ``SIGTERM`` or ``SIGINT`` to the parent closes the parent's sockets and sends
``SIGTERM`` to every worker: uvicorn stops accepting, answers the requests in flight and exits; the parent
returns once all have ended (``SIGKILL`` after :data:`STOP_TIMEOUT_S`, or at a second signal). A worker
exits when the parent dies (``PR_SET_PDEATHSIG``). Workers that die within :data:`FAST_DEATH_S` of their
start :data:`MAX_FAST_DEATHS` times in a row stop the server: a worker that cannot run is not forked
forever.

Every response of a worker carries ``X-Gpuroute-Worker: <pid>`` and ``X-Gpuroute-Generation: <g>`` (the
traffic generation of :class:`Board` it answers on, 0 the metric loaded at start).

Memory
------
What the parent loaded is shared by the workers copy-on-write: a page no worker writes stays one physical
page, whatever the number of workers (the graph's arrays are moreover memory-mapped from the dataset
directory, :func:`gpuroute.store.load_graph`, so they are shared with the page cache). NumPy arrays are
never written by a query; what does get copied per worker is the Python heap that reference counting
touches, per-thread query state and per-worker caches. :func:`memory_report` tells per array how much of
it a process shares (``/proc/self/pagemap``): a worker writes it on ``SIGUSR1`` when
``GPUROUTE_SERVE_MEMORY_REPORT`` names a directory (``memory-<pid>.json``).

Traffic
-------
A ``POST /customize`` received by any worker is applied once and every worker answers on the new metric
from its next request on (:class:`Board`): the customizing worker takes a lock shared by the workers,
adopts the newest published customization, customizes (the engine saves ``DIR/traffic.npz`` as with one
process, :class:`gpuroute.engine.dataset.TrafficStore`), writes the customized overlay state (costs,
turn costs, cliques, unpacking trees) into a file in ``/dev/shm`` and raises the shared generation
counter before it answers. Each worker compares that counter with its own at the start of every request
(a load of 8 bytes) and, when it moved, maps the file (no copy, nothing recomputed) and swaps its overlay
state, one reference, as a customization does: a request reads the state once at its start, so no answer
mixes two metrics, and a request that starts after a ``/customize`` was answered is answered on its
metric, whichever worker takes it. A ``/customize`` that fails (a bad update, a save that failed) changes
nothing anywhere. The time until every worker answers on a new metric is the customization's, plus
writing the state once (memory bandwidth: tens of MB on NY), plus mapping it in each worker (well under a
millisecond).

Threads, numba and the GPU
--------------------------
numba's GNU OpenMP threading layer cannot run in a forked child once the parent has used it, so
:func:`prepare` (called before anything is loaded) selects a fork-safe layer: TBB where it is installed
(``pip install tbb``; thread-safe too), else numba's workqueue, which is not thread-safe: each worker then
runs one engine thread at a time. Each worker caps numba's threads at ``cores // N`` (at least 1) so that N
workers do not oversubscribe the cores; a customization, which every worker waits for, runs on all of them.
A forked process cannot use its parent's CUDA context: with more than one worker the server runs on the CPU
(``GPUROUTE_DISABLE_GPU``); ``--workers 1`` keeps the GPU.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import mmap
import os
import select
import shutil
import signal
import socket
import struct
import sys
import tempfile
import threading
import time

import numpy as np

log = logging.getLogger("gpuroute.server")

__all__ = ["Board", "Dispatcher", "WorkerApp", "WorkerError", "available_cores", "memory_report", "numba_threads",
           "prepare", "serve", "DISPATCH_MODES", "FAST_DEATH_S", "MAX_FAST_DEATHS", "STOP_TIMEOUT_S"]

#: The values of ``config.SERVE_DISPATCH`` (see the module documentation).
DISPATCH_MODES = ("least-connections", "reuseport")
#: Seconds between the dispatcher's tries of a connection no worker took (every worker dead or its queue full).
PENDING_RETRY_S = 0.05
#: Signals that stop the server (a second one while stopping kills the workers at once).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

#: Seconds the parent waits for its workers to finish their requests after SIGTERM before it kills them.
STOP_TIMEOUT_S = 60.0
#: A worker that dies within this many seconds of its start died "fast" (see MAX_FAST_DEATHS).
FAST_DEATH_S = 5.0
#: Fast deaths in a row after which the parent stops the server instead of forking again.
MAX_FAST_DEATHS = 5
#: Where the shared customizations lie (a tmpfs), else the system's temporary directory.
SHM_ROOT = "/dev/shm"
#: Name prefix of a server's shared directory: ``gpuroute-serve-<parent pid>-<random>``.
SHM_PREFIX = "gpuroute-serve-"
#: numba threading layers that survive a fork of a process that used them.
FORK_SAFE_LAYERS = ("tbb", "workqueue")
#: Response headers of a worker.
WORKER_HEADER = b"x-gpuroute-worker"
GENERATION_HEADER = b"x-gpuroute-generation"
#: Environment variable naming a directory a worker writes its :func:`memory_report` into on SIGUSR1.
MEMORY_REPORT_ENV = "GPUROUTE_SERVE_MEMORY_REPORT"

_ALIGN = 64
_MAGIC = b"GPUROUTE-STATE\n"


class WorkerError(RuntimeError):
    """This process cannot fork workers (a GPU or numba's OpenMP threads were started before the fork)."""


def available_cores():
    """The cores this process may run on (its CPU affinity: a container's or ``taskset``'s share), else
    ``os.cpu_count()``."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def numba_threads(workers, cores=None):
    """numba threads per worker: ``cores // workers``, at least 1."""
    cores = available_cores() if cores is None else int(cores)
    return max(1, cores // max(1, int(workers)))


# ------------------------------------------------------------------------------------------------ prepare
def prepare(workers):
    """Make this process fit to fork ``workers`` workers once it has loaded the dataset; call it before
    anything is loaded (the CLI does, for ``workers > 1``).

    The GPU is switched off (``GPUROUTE_DISABLE_GPU``: a forked process cannot use its parent's CUDA
    context) and numba is told to start a fork-safe threading layer (``"forksafe"``: TBB where installed,
    else workqueue) when it starts its threads.

    Returns
    -------
    callable
        ``undo()``: puts the environment variable and numba's setting back (for a caller that does not go
        on to fork; the threading layer numba started meanwhile stays).

    Raises
    ------
    WorkerError
        A GPU was already probed usable in this process, or numba already started a threading layer that is
        not fork-safe (GNU OpenMP): the message names it.
    """
    import numba

    from ..backend import probe_gpu

    if probe_gpu.cache_info().currsize and probe_gpu()[0]:
        raise WorkerError("this process already set up the GPU, which forked workers cannot share: serve with "
                          "--workers 1")
    try:
        layer = numba.threading_layer()
    except ValueError:  # not started yet
        layer = None
    if layer is not None and layer not in FORK_SAFE_LAYERS:
        raise WorkerError(f"numba's threading layer {layer!r} was started in this process and is not fork-safe; "
                          "serve with --workers 1 (or start a new process)")
    env_before = os.environ.get("GPUROUTE_DISABLE_GPU")
    layer_before = numba.config.THREADING_LAYER
    os.environ["GPUROUTE_DISABLE_GPU"] = "1"
    probe_gpu.cache_clear()
    if layer is None:
        numba.config.THREADING_LAYER = "forksafe"

    def undo():
        if env_before is None:
            os.environ.pop("GPUROUTE_DISABLE_GPU", None)
        else:
            os.environ["GPUROUTE_DISABLE_GPU"] = env_before
        probe_gpu.cache_clear()
        numba.config.THREADING_LAYER = layer_before

    return undo


def threading_layer():
    """numba's threading layer in this process, None before it started one."""
    import numba

    try:
        return numba.threading_layer()
    except ValueError:
        return None


# ------------------------------------------------------------------------------------------------ the board
def _shm_root():
    return SHM_ROOT if os.path.isdir(SHM_ROOT) and os.access(SHM_ROOT, os.W_OK) else tempfile.gettempdir()


def _sweep(root):
    """Remove the shared directories of servers whose parent process is gone (killed with SIGKILL)."""
    try:
        names = os.listdir(root)
    except OSError:
        return
    for name in names:
        if not name.startswith(SHM_PREFIX):
            continue
        pid = name[len(SHM_PREFIX):].split("-", 1)[0]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
            continue  # alive (or not ours to signal: leave it)
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        shutil.rmtree(os.path.join(root, name), ignore_errors=True)


def _state_class():
    from ..crp.overlay import OverlayState

    return OverlayState


def state_arrays(state):
    """The arrays and fields of an overlay's customization state (``Overlay._state``) to share:
    ``(arrays, fields)``, ``arrays`` a dict name -> ndarray (the state's array fields, then ``metric.*``
    the metric's), ``fields`` plain data (``seconds``, the metric's name and units).

    Raises
    ------
    TypeError
        A field of the state or of its metric that is neither an array nor plain data (the state's layout
        changed: this function needs to learn it).
    """
    state.tree  # noqa: B018 - a tree still arriving from the GPU is waited for
    arrays, fields = {}, {}
    for slot in type(state).__slots__:
        if slot in ("metric", "_tree_wait"):
            continue
        v = getattr(state, slot)
        if isinstance(v, np.ndarray):
            arrays[slot] = v
        elif v is None or isinstance(v, (bool, int, float, str)):
            fields[slot] = v
        else:
            raise TypeError(f"overlay state field {slot!r} ({type(v).__name__}) cannot be shared between workers")
    for k, v in vars(state.metric).items():
        if isinstance(v, np.ndarray):
            arrays[f"metric.{k}"] = v
        elif v is None or isinstance(v, (bool, int, float, str)):
            fields[f"metric.{k}"] = v
        else:
            raise TypeError(f"metric field {k!r} ({type(v).__name__}) cannot be shared between workers")
    return arrays, fields


def state_from_arrays(arrays, fields, metric_class=None):
    """The overlay state :func:`state_arrays` took apart (arrays as given: no copy, nothing recomputed).

    Raises
    ------
    ValueError
        A field of the state is missing.
    """
    if metric_class is None:
        from ..crp.metric import Metric as metric_class
    cls = _state_class()
    st = cls.__new__(cls)
    met = metric_class.__new__(metric_class)
    for name, v in list(arrays.items()) + list(fields.items()):
        if name.startswith("metric."):
            setattr(met, name[7:], v)
        else:
            setattr(st, name, v)
    st.metric = met
    st._tree_wait = None
    for slot in cls.__slots__:
        if not hasattr(st, slot):
            raise ValueError(f"shared overlay state without field {slot!r}")
    return st


def _write_state(path, arrays, fields, meta):
    """Write a state file: magic, header length (8 bytes), JSON header, arrays at 64-byte offsets."""
    from numpy.lib import format as npformat

    specs, off = {}, 0
    for name, a in arrays.items():
        a = np.ascontiguousarray(a)
        arrays[name] = a
        specs[name] = {"descr": npformat.dtype_to_descr(a.dtype), "shape": list(a.shape), "offset": off,
                       "nbytes": int(a.nbytes)}
        off += -(-int(a.nbytes) // _ALIGN) * _ALIGN
    header = json.dumps({"arrays": specs, "fields": fields, **meta}).encode()
    base = -(-(len(_MAGIC) + 8 + len(header)) // 4096) * 4096
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(_MAGIC + struct.pack("<q", len(header)) + header)
        for name, a in arrays.items():
            f.seek(base + specs[name]["offset"])
            if a.nbytes:
                f.write(memoryview(a).cast("B"))
        f.truncate(base + off)
    os.replace(tmp, path)
    return base + off


def _read_state(path):
    """``(arrays, fields, meta)`` of a state file: arrays over a private (copy-on-write) mapping of it."""
    from numpy.lib import format as npformat

    with open(path, "rb") as f:
        head = f.read(len(_MAGIC) + 8)
        if head[:len(_MAGIC)] != _MAGIC:
            raise ValueError(f"{path}: not a shared overlay state")
        n = struct.unpack("<q", head[len(_MAGIC):])[0]
        meta = json.loads(f.read(n))
        base = -(-(len(_MAGIC) + 8 + n) // 4096) * 4096
        size = os.fstat(f.fileno()).st_size
        # private and writable: arrays of the same (writeable) type as the parent's, so that no numba kernel
        # is compiled again for read-only arrays; nothing writes them, so the pages stay the file's
        mm = mmap.mmap(f.fileno(), size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE) \
            if size > base else None
    arrays = {}
    for name, spec in meta.pop("arrays").items():
        dt = npformat.descr_to_dtype(spec["descr"] if isinstance(spec["descr"], str) else
                                     [tuple(x) for x in spec["descr"]])
        count = int(np.prod(spec["shape"], dtype=np.int64))
        if count == 0 or mm is None:
            arrays[name] = np.empty(spec["shape"], dt)
        else:
            arrays[name] = np.frombuffer(mm, dt, count, base + spec["offset"]).reshape(spec["shape"])
    return arrays, meta.pop("fields"), meta


class Board:
    """The overlay's customization, shared by the worker processes of one server (see the module
    documentation, Traffic).

    Made by the parent before it forks (:meth:`create`): a directory in ``/dev/shm`` with the shared
    generation counter (``epoch``: 8 bytes, mapped shared by every process), the workers' customization
    lock (``lock``, ``flock``) and the newest published state (``state-<generation>.bin``).

    Parameters
    ----------
    directory : str
    overlay : Overlay
        The engine's overlay (customized).
    store : TrafficStore, optional
        The dataset directory's saved traffic: its generation and time follow the published ones.

    Attributes
    ----------
    generation : int
        The generation this process answers on (0: the state loaded at start).
    adopted_seconds : float or None
        How long this process took to adopt the last generation (mapping the file, swapping the state).
    """

    def __init__(self, directory, overlay, store=None):
        self.directory = directory
        self.overlay = overlay
        self.store = store
        fd = os.open(os.path.join(directory, "epoch"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if os.fstat(fd).st_size < 4096:
                os.ftruncate(fd, 4096)
            self._counter = mmap.mmap(fd, 4096, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        self._lock_path = os.path.join(directory, "lock")
        self.generation = self.published()
        self.adopted_seconds = None
        self._owner = os.getpid()
        self._mutex = threading.Lock()   # adopting and publishing in this process
        self._writer = threading.Lock()  # this process's customizations, one at a time

    @classmethod
    def create(cls, overlay, store=None, root=None):
        """A new board in a new directory under ``root`` (default ``/dev/shm``, else the temporary
        directory); stale directories of dead servers there are removed first."""
        root = _shm_root() if root is None else root
        _sweep(root)
        d = tempfile.mkdtemp(prefix=f"{SHM_PREFIX}{os.getpid()}-", dir=root)
        return cls(d, overlay, store)

    def close(self):
        """Remove the directory (the parent, once every worker has ended)."""
        if os.getpid() == self._owner:
            shutil.rmtree(self.directory, ignore_errors=True)

    def published(self):
        """The newest published generation (the shared counter)."""
        return struct.unpack_from("<q", self._counter, 0)[0]

    def _path(self, g):
        return os.path.join(self.directory, f"state-{g}.bin")

    def sync(self):
        """Adopt the newest published generation if this process answers on an older one (the check: one
        8-byte load). Called at the start of every request."""
        if struct.unpack_from("<q", self._counter, 0)[0] != self.generation:
            self._adopt()

    def _adopt(self):
        with self._mutex:
            for _ in range(100):
                g = self.published()
                if g == self.generation:
                    return
                t0 = time.perf_counter()
                try:
                    arrays, fields, meta = _read_state(self._path(g))
                except FileNotFoundError:  # a newer one replaced it meanwhile: read the counter again
                    continue
                self.overlay._state = state_from_arrays(arrays, fields)
                self.generation = g
                self._follow_store(meta)
                self.adopted_seconds = time.perf_counter() - t0
                return
            raise RuntimeError(f"{self.directory}: could not read generation {self.published()}")

    def _follow_store(self, meta):
        s = self.store
        if s is not None and isinstance(meta.get("traffic"), dict):
            s.generation = int(meta["traffic"].get("generation") or 0)
            s.updated = meta["traffic"].get("updated")

    @contextlib.contextmanager
    def exclusive(self):
        """Hold the workers' customization lock (this process's threads and the other workers wait)."""
        with self._writer:
            fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)  # releases the lock (also when the process dies holding it)

    def publish(self):
        """Publish this process's overlay state as the next generation (call it holding :meth:`exclusive`):
        write it, raise the counter, drop the previous file, and answer on the shared copy from now on.

        Returns
        -------
        dict
            ``{"generation", "publish_seconds", "bytes"}``.
        """
        with self._mutex:
            t0 = time.perf_counter()
            arrays, fields = state_arrays(self.overlay._state)
            g = self.published() + 1
            s = self.store
            meta = {"generation": g, "traffic": None if s is None else {"generation": s.generation,
                                                                        "updated": s.updated}}
            path = self._path(g)
            nbytes = _write_state(path, arrays, fields, meta)
            arrays, fields, _ = _read_state(path)
            shared = state_from_arrays(arrays, fields)
            struct.pack_into("<q", self._counter, 0, g)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._path(g - 1))  # mapped ones stay readable until unmapped
            self.overlay._state = shared
            self.generation = g
            seconds = time.perf_counter() - t0
        return {"generation": g, "publish_seconds": seconds, "bytes": int(nbytes)}

    def customize(self, engine, updates=None, *, metric=None):
        """``engine.customize`` for one worker of several: under the workers' lock, on the newest published
        state, then published (:meth:`publish`) before it returns; its answer gains ``"workers":
        {"generation", "publish_seconds", "bytes"}``. Raises what ``engine.customize`` raises, and then
        publishes nothing."""
        with self.exclusive():
            self._adopt()
            before = self.overlay._state
            res = engine.customize(updates, metric=metric)
            if self.overlay._state is not before:
                res = dict(res)
                res["workers"] = self.publish()
            return res

    def info(self):
        return {"generation": self.generation, "published": self.published(), "adopted_seconds": self.adopted_seconds}


# ------------------------------------------------------------------------------------------------ the app
class WorkerApp:
    """The ASGI application of one worker: the server's application, with the board checked at the start
    of every request and the worker's pid and generation in every response's headers."""

    def __init__(self, app, board=None):
        self.app = app
        self.board = board
        self.state = app.state

    _pid = None
    _gen = None

    def _headers(self):
        pid = os.getpid()  # made before the fork: each worker learns its own on its first answer
        if self._pid is None or self._pid[0] != pid:
            self._pid = (pid, (WORKER_HEADER, str(pid).encode()))
        g = self.board.generation if self.board is not None else 0
        if self._gen is None or self._gen[0] != g:
            self._gen = (g, (GENERATION_HEADER, str(g).encode()))
        return [self._pid[1], self._gen[1]]

    def direct(self, scope):
        """The application's ``direct`` answer (a GET answered without an ASGI task, see
        :mod:`gpuroute.server.http`) on the newest traffic generation, with this worker's headers; None
        where the application has none or does not take the request."""
        direct = getattr(self.app, "direct", None)
        if direct is None:
            return None
        if self.board is not None:
            self.board.sync()
        return direct(scope, self._headers)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        board = self.board
        if board is not None:
            board.sync()
        pid = str(os.getpid()).encode()
        fast = getattr(self.app, "fast", None)
        if fast is not None and fast(scope):  # a GET of an OSRM service: the application's short path
            return await self.app.answer(scope, send, self._headers)

        async def send_with_worker(message):
            if message["type"] == "http.response.start":
                gen = str(board.generation if board is not None else 0).encode()
                message = dict(message)
                message["headers"] = [*message.get("headers", ()), (WORKER_HEADER, pid), (GENERATION_HEADER, gen)]
            await send(message)

        return await self.app(scope, receive, send_with_worker)


def _thread_cap(n):
    """A ``before`` hook for the application's worker threads: numba's threads of the calling thread set to
    ``n`` once (numba's setting is per thread)."""
    import numba

    local = threading.local()

    def before():
        if not getattr(local, "set", False):
            numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
            local.set = True

    return before


def _share_cores(workers):
    """In a worker: the CPU isochrone lattice's parts (threads of their own, not numba's) at most this
    worker's share of the cores, as :func:`_thread_cap` does for numba's threads (16 workers on 16 cores:
    one part, not ``config.SERVE_ISOCHRONE_LATTICE_THREADS`` threads each). The parts never change an
    answer (the codes are the same whatever the parts)."""
    from .. import config

    config.SERVE_ISOCHRONE_LATTICE_THREADS = min(int(config.SERVE_ISOCHRONE_LATTICE_THREADS), numba_threads(workers))


@contextlib.contextmanager
def _all_threads():
    """numba's every thread for the calling thread meanwhile (a customization: rare, and every worker waits
    for it), then back to what it was."""
    import numba

    before = numba.get_num_threads()
    numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    try:
        yield
    finally:
        numba.set_num_threads(before)


# ------------------------------------------------------------------------------------------------ memory
def _arrays_of(obj, prefix, out, seen, depth):
    if depth < 0 or id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        if obj.nbytes >= 65536:
            out.setdefault(obj.__array_interface__["data"][0], (prefix, obj))
        return
    if isinstance(obj, dict):
        items = obj.items()
    elif isinstance(obj, (list, tuple)):
        items = ((str(i), v) for i, v in enumerate(obj[:64]))
    elif type(obj).__module__.startswith("gpuroute"):
        items = list(getattr(obj, "__dict__", {}).items())
        for slot in getattr(type(obj), "__slots__", ()):
            if hasattr(obj, slot):
                items.append((slot, getattr(obj, slot)))
    else:
        return
    for k, v in items:
        _arrays_of(v, f"{prefix}.{k}", out, seen, depth - 1)


def memory_report(engine):
    """How much of each large array (>= 64 KiB) reachable from ``engine`` this process shares with others.

    Reads ``/proc/self/pagemap`` (Linux): a resident page mapped by this process only is private (a copy,
    or memory allocated here), any other resident page is shared (the parent's copy-on-write page, a file's
    page-cache page).

    Returns
    -------
    dict
        ``{"pid", "rss_mb", "pss_mb", "arrays": [{"name", "mb", "resident_mb", "private_mb"}, ...]}``
        (largest first; sizes in MiB), ``"private_mb"`` and ``"shared_mb"`` over those arrays; ``rss_mb`` and
        ``pss_mb`` from ``/proc/self/smaps_rollup``.
    """
    found = {}
    _arrays_of(engine, "engine", found, set(), 7)
    page = mmap.PAGESIZE
    rows = []
    try:
        fd = os.open("/proc/self/pagemap", os.O_RDONLY)
    except OSError as e:
        return {"pid": os.getpid(), "error": str(e)}
    try:
        for addr, (name, a) in found.items():
            first, last = addr // page, (addr + a.nbytes - 1) // page
            raw = os.pread(fd, 8 * (last - first + 1), 8 * first)
            v = np.frombuffer(raw, dtype=np.uint64)
            present = (v >> np.uint64(63)) & np.uint64(1)
            exclusive = (v >> np.uint64(56)) & np.uint64(1)
            res = int(present.sum())
            priv = int((present & exclusive).sum())
            rows.append({"name": name, "mb": a.nbytes / 2 ** 20, "resident_mb": res * page / 2 ** 20,
                         "private_mb": priv * page / 2 ** 20})
    finally:
        os.close(fd)
    rows.sort(key=lambda r: -r["mb"])
    out = {"pid": os.getpid(), **_rollup(os.getpid()), "arrays": rows,
           "private_mb": sum(r["private_mb"] for r in rows),
           "shared_mb": sum(r["resident_mb"] - r["private_mb"] for r in rows)}
    return out


def _rollup(pid):
    vals = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                k, _, rest = line.partition(":")
                if k in ("Rss", "Pss", "Private_Clean", "Private_Dirty", "Shared_Clean", "Shared_Dirty"):
                    vals[k.lower() + "_mb"] = int(rest.split()[0]) / 1024
    except OSError:
        pass
    return vals


def _memory_signal(engine):
    target = os.environ.get(MEMORY_REPORT_ENV)
    if not target:
        return

    def handler(signum, frame):
        try:
            rep = memory_report(engine)
            path = os.path.join(target, f"memory-{os.getpid()}.json")
            with open(path + ".tmp", "w") as f:
                json.dump(rep, f, indent=1)
            os.replace(path + ".tmp", path)
        except Exception:  # a diagnostic never stops a worker
            log.exception("memory report failed")

    signal.signal(signal.SIGUSR1, handler)


# ------------------------------------------------------------------------------------------------ sockets
def _reuse_port_available():
    return hasattr(socket, "SO_REUSEPORT")


def sibling(sock):
    """Another socket bound to ``sock``'s address with ``SO_REUSEPORT`` (``sock`` must have it set)."""
    s = socket.socket(sock.family, sock.type, sock.proto)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        s.bind(sock.getsockname())
    except OSError:
        s.close()
        raise
    return s


# ------------------------------------------------------------------------------------------------ dispatch
def dispatch_mode(value=None):
    """``value`` (default ``config.SERVE_DISPATCH``), checked against :data:`DISPATCH_MODES`.

    Raises
    ------
    ValueError
        Another value (named).
    """
    if value is None:
        from .. import config

        value = config.SERVE_DISPATCH
    if value not in DISPATCH_MODES:
        raise ValueError(f"config.SERVE_DISPATCH = {value!r}: expected one of {', '.join(map(repr, DISPATCH_MODES))}")
    return value


def least_loaded(open_connections, start):
    """The worker slots in the order :class:`Dispatcher` offers a connection to them: the fewest open
    connections first, ties in turn from slot ``start`` on (``start``, ``start + 1``, ..., wrapping).

    Parameters
    ----------
    open_connections : sequence of int, length n
        Open connections per worker slot.
    start : int
        The slot after the one that took the last connection.

    Returns
    -------
    list of int
        A permutation of ``range(n)``.
    """
    n = len(open_connections)
    return sorted(range(n), key=lambda i: (int(open_connections[i]), (i - start) % n))


class Dispatcher:
    """The parent's side of ``SERVE_DISPATCH = "least-connections"``: it accepts on the listening socket and
    hands each connection to the worker with the fewest open connections (:func:`least_loaded`).

    Each worker slot has a Unix socket pair (``SOCK_SEQPACKET``): the parent sends the accepted connection's
    descriptor (``SCM_RIGHTS``, :func:`socket.send_fds`) and closes its copy; the worker adopts it into its
    event loop. ``handed[i]`` (the parent's count) minus ``closed[i]`` (the worker's count of connections it
    closed, in memory shared across the fork: one writer a slot) is slot ``i``'s open connections. A slot
    whose worker died has its pair closed (a send fails: the next slot takes the connection) until
    :meth:`channel` opens one for the replacement; a connection no worker can take waits in ``pending``.

    Parameters
    ----------
    sock : socket.socket
        Listening, non-blocking.
    n : int
        Worker slots.
    """

    def __init__(self, sock, n):
        self.sock = sock
        self.n = int(n)
        self._mem = mmap.mmap(-1, 8 * self.n)  # anonymous, shared with the forked workers
        self.closed = np.frombuffer(self._mem, dtype=np.int64)
        self.handed = np.zeros(self.n, np.int64)
        self.chan = [None] * self.n
        self.next = 0
        self.pending = []
        self._warned = -1.0

    def open_connections(self):
        """(n,) int64: open connections per slot, as the parent knows them."""
        return self.handed - self.closed

    def channel(self, slot):
        """A new socket pair for the worker about to be forked into ``slot``: the parent keeps one end, the
        worker's end is returned (the parent closes it once forked). The slot starts with no connection."""
        self.drop(slot)
        kind = getattr(socket, "SOCK_SEQPACKET", socket.SOCK_DGRAM)
        mine, theirs = socket.socketpair(socket.AF_UNIX, kind)
        mine.setblocking(False)
        self.chan[slot] = mine
        self.handed[slot] = self.closed[slot]
        return theirs

    def drop(self, slot):
        """Close ``slot``'s socket pair (its worker died or is being replaced): no connection goes there."""
        ch, self.chan[slot] = self.chan[slot], None
        if ch is not None:
            ch.close()

    def pump(self):
        """Accept every waiting connection and hand each over (those no worker takes wait in ``pending``).

        Returns
        -------
        int
            Connections accepted.
        """
        k = 0
        while True:
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                break
            except OSError as e:
                if e.errno == errno.ECONNABORTED:  # the client gave up before we took it
                    continue
                now = time.monotonic()
                if now - self._warned >= 1.0:
                    self._warned = now
                    log.warning("gpuroute serve: accept failed: %s (the connections wait in the queue)", e)
                time.sleep(PENDING_RETRY_S)  # out of descriptors or memory: not a busy loop on the ready socket
                break
            k += 1
            self.pending.append(conn)
        if self.pending:
            self.hand_pending()
        return k

    def hand_pending(self):
        """Offer every waiting connection again (after a worker was replaced); those no worker takes wait on."""
        waiting, self.pending = self.pending, []
        for conn in waiting:
            if not self.hand(conn):
                self.pending.append(conn)

    def hand(self, conn):
        """Hand ``conn`` to the least loaded worker that takes it (closing the parent's copy); False where
        none does (no worker alive, every queue full)."""
        for slot in least_loaded(self.handed - self.closed, self.next):
            ch = self.chan[slot]
            if ch is None:
                continue
            try:
                socket.send_fds(ch, [b"c"], [conn.fileno()])
            except (BlockingIOError, InterruptedError):
                continue  # its queue is full: the next one
            except OSError as e:
                if e.errno not in (errno.ENOBUFS, errno.ENOMEM):
                    self.drop(slot)  # the worker's end is closed: it died
                continue
            self.handed[slot] += 1
            self.next = (slot + 1) % self.n
            conn.close()
            return True
        return False

    def close(self):
        """Close the waiting connections and every socket pair (the server is stopping)."""
        for conn in self.pending:
            conn.close()
        self.pending = []
        for slot in range(self.n):
            self.drop(slot)


def _handed_server(config, chan, on_close):
    """A ``uvicorn.Server`` that listens on nothing and serves the connections the parent's
    :class:`Dispatcher` sends over ``chan`` (one descriptor a message); ``on_close()`` is called once for
    every such connection when it ends."""
    import asyncio

    import uvicorn

    class HandedServer(uvicorn.Server):
        async def startup(self, sockets=None):
            await super().startup(sockets=[])
            loop = asyncio.get_running_loop()
            base = self.config.http_protocol_class
            cfg, server_state, app_state = self.config, self.server_state, self.lifespan.state

            class Counted(base):
                def connection_lost(self, exc):
                    try:
                        super().connection_lost(exc)
                    finally:
                        on_close()

            def factory():
                return Counted(config=cfg, server_state=server_state, app_state=app_state, _loop=loop)

            async def adopt(sock):
                try:
                    await loop.connect_accepted_socket(factory, sock)
                except OSError:
                    sock.close()
                    on_close()

            def take():
                while True:
                    try:
                        _, fds, _, _ = socket.recv_fds(chan, 1, 16)
                    except (BlockingIOError, InterruptedError):
                        return
                    except OSError:
                        fds = None
                    if not fds:  # the parent closed its end (it is stopping)
                        self._stop_taking(loop)
                        return
                    for fd in fds:
                        loop.create_task(adopt(socket.socket(fileno=fd)))

            chan.setblocking(False)
            loop.add_reader(chan.fileno(), take)
            self._taking = True

        def _stop_taking(self, loop):
            if getattr(self, "_taking", False):
                self._taking = False
                with contextlib.suppress(Exception):
                    loop.remove_reader(chan.fileno())

        async def shutdown(self, sockets=None):
            self._stop_taking(asyncio.get_running_loop())
            chan.close()  # the parent hands this worker nothing more
            await super().shutdown(sockets=sockets)

    return HandedServer(config)


# ------------------------------------------------------------------------------------------------ serve
def serve(app, sock, workers, *, log_level="warning", backlog=2048, out=None, http=None):
    """Fork ``workers`` worker processes serving ``app`` on ``sock``'s address and supervise them until
    ``SIGTERM`` or ``SIGINT`` (see the module documentation).

    Parameters
    ----------
    app : starlette.applications.Starlette
        From :func:`gpuroute.server.create_app`, warmed up (:func:`gpuroute.server.warm_up`).
    sock : socket.socket
        Bound, not listening; with ``SO_REUSEPORT`` set before it was bound (``gpuroute serve`` binds it
        so) the workers get a socket each, else they share it.
    workers : int
        At least 2.
    log_level : str
        uvicorn's.
    backlog : int
        Each socket's listen queue.
    out : file, optional
        Where the parent reports a dead worker and its replacement (default ``sys.stderr``).
    http : str, optional
        The HTTP parser of every worker (:func:`gpuroute.server.http.parser`; default ``config.SERVE_HTTP``).

    Returns
    -------
    bool
        True once every worker ended after a stop signal; False when workers kept dying at start
        (:data:`MAX_FAST_DEATHS`).

    Raises
    ------
    ValueError
        ``workers < 2``.
    WorkerError
        numba runs a threading layer that is not fork-safe in this process (see :func:`prepare`).
    """
    if int(workers) < 2:
        raise ValueError(f"workers must be at least 2 (1 is the single-process server), got {workers}")
    layer = threading_layer()
    if layer is not None and layer not in FORK_SAFE_LAYERS:
        raise WorkerError(f"numba's threading layer {layer!r} is not fork-safe: serve with --workers 1")
    engine = app.state.engine
    adapter = app.state.adapter
    overlay = getattr(engine, "overlay", None)
    board = None
    if overlay is not None and getattr(overlay, "customized", False):
        from ..engine.dataset import traffic_store

        board = Board.create(overlay, traffic_store(overlay))
    cap = adapter.before = _thread_cap(numba_threads(workers))
    if board is not None and callable(getattr(engine, "customize", None)):
        def customizer(updates=None, *, metric=None):
            cap()
            with _all_threads():
                return board.customize(engine, updates, metric=metric)

        adapter.customizer = customizer
    if layer == "workqueue":  # not thread-safe: one engine call at a time per worker
        app.state.limits["workers"] = 1
    sockets = [sock]
    dispatcher = None
    try:
        if dispatch_mode() == "least-connections":
            sock.listen(backlog)
            sock.setblocking(False)
            dispatcher = Dispatcher(sock, int(workers))
        else:
            reuse = _reuse_port_available() and sock.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT)
            if reuse:
                sockets += [sibling(sock) for _ in range(int(workers) - 1)]
            for s in sockets:
                s.listen(backlog)
        from . import http as server_http

        sup = _Supervisor(WorkerApp(app, board), engine, sockets, int(workers), log_level,
                          sys.stderr if out is None else out, server_http.parser(http), dispatcher)
        return sup.run()
    finally:
        for s in sockets[1:]:
            s.close()
        if dispatcher is not None:
            dispatcher.close()
        if board is not None:
            board.close()


class _Supervisor:
    def __init__(self, app, engine, sockets, n, log_level, out, http="h11", dispatcher=None):
        self.http = http
        self.dispatcher = dispatcher
        self.chan = None  # in a worker forked by a dispatcher: its end of the socket pair
        self.app = app
        self.engine = engine
        self.sockets = sockets
        self.n = n
        self.log_level = log_level
        self.out = out
        self.children = {}  # pid -> (slot, start time)
        self.fast = 0
        self.failed = False
        self.parent = os.getpid()

    def say(self, msg):
        with contextlib.suppress(Exception):
            print(f"gpuroute serve: {msg}", file=self.out, flush=True)

    def run(self):
        self.pipe = pipe = _SignalPipe(STOP_SIGNALS + (signal.SIGCHLD,))
        d = self.dispatcher
        try:
            if d is not None:
                pipe.watch(d.sock)
            for i in range(self.n):
                self.spawn(i)
            stopping = False
            while not stopping:
                self.reap(replace=True)
                if self.failed:
                    break
                got, ready = pipe.wait(PENDING_RETRY_S if d is not None and d.pending else 1.0)
                if ready:
                    d.pump()
                elif d is not None and d.pending:
                    d.hand_pending()
                stopping = any(g in STOP_SIGNALS for g in got)
            self.stop(pipe)
        finally:
            pipe.close()
        return not self.failed

    def spawn(self, slot):
        sys.stdout.flush()
        sys.stderr.flush()
        chan = self.dispatcher.channel(slot) if self.dispatcher is not None else None
        old = signal.pthread_sigmask(signal.SIG_BLOCK, self.pipe.sigs)  # pending in the child until it resets them
        pid = os.fork()
        if pid == 0:  # the worker: never returns into the parent's stack
            self.chan = chan
            code = 1
            try:
                code = self.child(slot)
            except BaseException:
                import traceback

                traceback.print_exc()
            finally:
                with contextlib.suppress(Exception):
                    sys.stdout.flush()
                    sys.stderr.flush()
                os._exit(code)
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
        if chan is not None:
            chan.close()
        self.children[pid] = (slot, time.monotonic())
        if self.dispatcher is not None and self.dispatcher.pending:
            self.dispatcher.hand_pending()
        return pid

    def child(self, slot):
        self.pipe.forget()
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        _die_with_parent(self.parent)
        _share_cores(self.n)
        d = self.dispatcher
        mine = None if d is not None else self.sockets[slot % len(self.sockets)]
        for s in self.sockets:
            if s is not mine:
                s.close()
        _memory_signal(self.engine)
        import uvicorn

        from . import http as server_http

        cfg = server_http.config(self.app, log_level=self.log_level, http=self.http)
        if d is None:
            server = uvicorn.Server(cfg)
            server.run(sockets=[mine])
            return 0 if server.started else 1
        for other in d.chan:  # the parent's ends: only the parent sends
            if other is not None:
                other.close()
        for conn in d.pending:
            conn.close()
        closed = d.closed

        def on_close():
            closed[slot] += 1

        server = _handed_server(cfg, self.chan, on_close)
        server.run()
        return 0 if server.started else 1

    def reap(self, replace):
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                self.children.clear()
                return
            if pid == 0:
                return
            if pid not in self.children:
                continue
            slot, t0 = self.children.pop(pid)
            if not replace:
                continue
            how = (f"was killed by signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status)
                   else f"exited with status {os.WEXITSTATUS(status)}")
            self.fast = self.fast + 1 if time.monotonic() - t0 < FAST_DEATH_S else 0
            if self.fast >= MAX_FAST_DEATHS:
                self.say(f"worker {slot} (pid {pid}) {how}; {self.fast} workers died within {FAST_DEATH_S:g} s of "
                         "their start in a row: stopping (see the errors above)")
                self.failed = True
                return
            new = self.spawn(slot)
            self.say(f"worker {slot} (pid {pid}) {how}; started worker pid {new} in its place")

    def stop(self, pipe):
        if self.dispatcher is not None:
            pipe.unwatch(self.dispatcher.sock)
        for s in self.sockets:  # no new connections once the workers close theirs
            s.close()
        if self.dispatcher is not None:
            self.dispatcher.close()
        for pid in list(self.children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while self.children and time.monotonic() < deadline:
            self.reap(replace=False)
            if not self.children:
                break
            got, _ = pipe.wait(0.2)
            if any(g in STOP_SIGNALS for g in got):
                break  # asked twice: stop now
        for pid in list(self.children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        while self.children:
            try:
                pid, _ = os.waitpid(-1, 0)
            except ChildProcessError:
                break
            self.children.pop(pid, None)


def _ignore(signum, frame):
    pass


class _SignalPipe:
    """The parent's signals ``sigs`` as bytes on a pipe (``signal.set_wakeup_fd``; the Python handler does
    nothing), polled with the dispatcher's listening socket. Whichever of the parent's threads the kernel
    delivers a signal to (numba's and the engine's threads do not block them), its number lands on the pipe."""

    def __init__(self, sigs):
        self.sigs = tuple(sigs)
        self.r, self.w = os.pipe()
        os.set_blocking(self.r, False)
        os.set_blocking(self.w, False)
        self.old = {s: signal.signal(s, _ignore) for s in self.sigs}
        self.old_fd = signal.set_wakeup_fd(self.w, warn_on_full_buffer=False)
        self.poll = select.poll()
        self.poll.register(self.r, select.POLLIN)

    def watch(self, sock):
        self.poll.register(sock.fileno(), select.POLLIN)

    def unwatch(self, sock):
        with contextlib.suppress(KeyError, ValueError, OSError):
            self.poll.unregister(sock.fileno())

    def wait(self, timeout_s):
        """``(signals, ready)``: the signal numbers received (a set, empty after ``timeout_s`` seconds without
        one) and whether a watched socket has a connection waiting."""
        got, ready = set(), False
        for fd, _ in self.poll.poll(max(0, int(timeout_s * 1000))):
            if fd != self.r:
                ready = True
                continue
            while True:
                try:
                    data = os.read(self.r, 256)
                except (BlockingIOError, InterruptedError):
                    break
                if not data:
                    break
                got.update(data)
        return got, ready

    def close(self):
        signal.set_wakeup_fd(self.old_fd)
        for s, h in self.old.items():
            signal.signal(s, h)
        os.close(self.r)
        os.close(self.w)

    def forget(self):
        """In a forked worker: the signals back to their default actions, the pipe closed."""
        signal.set_wakeup_fd(-1)
        for s in self.sigs:
            signal.signal(s, signal.SIG_DFL)
        os.close(self.r)
        os.close(self.w)


def _die_with_parent(parent):
    """Linux: SIGTERM this process when the parent dies (and at once if it already has)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(1, signal.SIGTERM, 0, 0, 0) != 0:  # PR_SET_PDEATHSIG
            return
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGTERM)

