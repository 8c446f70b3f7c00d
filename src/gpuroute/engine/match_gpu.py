"""The GPU twin of /match's bounded transition searches (:func:`gpuroute.engine.match_hmm.transitions`; kernel in
``match_search.cu``): the same jobs, the same ``out`` (float64 route lengths, m; inf where no route within the
bound and ``lmax``) and ``ok``, bit for bit.

The CPU twin's :func:`~gpuroute.engine.match_hmm._search` (OSRM's ``getNetworkDistance`` with its weight bound) is
a turn-expanded Dijkstra on arcs from one source candidate's options until every target candidate of its pair is
final, its bound is passed or its routes run past ``lmax``; a batch of traces has hundreds of thousands of such
searches, each settling ~100 arcs. Here:

1. **One GPU thread per job** (kernel ``match_search``): the CPU twin's sequential loop, the same lazy binary heap
   (:func:`gpuroute.graph.heap.heap_push` / ``heap_pop``: the same sift order, so equal labels settle in the same
   order and the same target wins a tie), the same float64 operations each rounded on its own (``__dmul_rn`` /
   ``__dadd_rn``: no fused multiply-add), writing the job's row of ``out``. Only the lengths are made here: the
   matched legs' routes rerun the CPU twin's search (:func:`gpuroute.engine.match_hmm.leg_chunk`), which explores
   in this same order.
2. **Per-thread scratch**: the search's records (label, route length, the last target option on the arc) in an
   open-addressing hash table of ``H`` slots keyed by arc (linear probing over an int32 key array; at most ``H /
   2`` records), its heap in ``H`` slots of (label, record), the launch's heaps interleaved (slot ``j`` of search ``t``
   at ``j * n + t``: a warp's reads of the top slots are one transaction): memory grows with the search, not with the graph
   (the CPU twin's arrays are O(arcs) a worker). A search whose table or heap fills stops with a status; the
   driver (:func:`_run_rounds`) runs the searches that stopped again with four times the room, up to
   :data:`gpuroute.config.SERVE_MATCH_GPU_MAX_HASH_SLOTS`; one that still does not fit runs on the CPU twin (as do its
   ``ok``: a CPU heap that ran full is the caller's, as on the CPU). Searches run in launches whose scratch fits
   :data:`gpuroute.config.SERVE_MATCH_GPU_SCRATCH_BYTES`.
3. **The network on the device**: the turn-expanded metric (``first``, ``out_arc``, ``tcost``, ``cost``,
   ``length``) is uploaded once per metric snapshot (the arrays' identity: a traffic ``/customize`` makes a new
   snapshot, whose arrays are uploaded on their first use; the last :data:`_KEEP` kept).

:func:`transitions` runs the kernel on the GPU; :func:`_emulate` runs the same per-thread loop (numba, one job
after another) over the same flat arrays, so the CPU tests check this twin's algorithm and layout (and
tests/engine/test_match_gpu.py also runs ``match_search.cu`` itself, compiled for the host, behind this module's
launcher).
"""
from __future__ import annotations

import threading
import time

import numpy as np
from numba import njit

from .. import config
from ..crp.many_to_many_gpu import hash_find
from ..graph.heap import heap_pop, heap_push
from .match_hmm import transition_chunk

__all__ = ["transitions", "gpu_backend", "usable", "release", "totals", "DEVICES"]

#: Kernel file (relative to the package root).
KERNELS = "engine/match_search.cu"
#: ``config.SERVE_MATCH_TRANSITIONS_DEVICE``'s values.
DEVICES = ("auto", "cpu", "gpu")
#: Search status: done; the hash table was full; the heap was full.
_OK, _HASH_FULL, _HEAP_FULL = 0, 1, 2
#: Bytes per hash slot: key 4, record 16 (label, length), target row 4, heap 12 (key 8, record 4).
_SLOT_BYTES = 36
#: Device copies of the last few networks kept (one per metric snapshot).
_KEEP = 4


# ------------------------------------------------------------------------------------------ emulation
# match_search.cu's kernel, statement for statement, over the same flat arrays; one "thread" (job) after another.


@njit(cache=True, inline="always")
def _next(oarc, r0, r, a):
    """``ms_next``: the next target option row below ``r`` (down to ``r0``) on arc ``a``, or -1."""
    for q in range(r - 1, r0 - 1, -1):
        if oarc[q] == a:
            return q
    return -1


@njit(cache=True, inline="always")
def _insert(hkey, rec, rtm, x, a):
    """``ms_insert``: a new record for arc ``a`` at the free slot ``-1 - x``."""
    x = -1 - x
    hkey[x] = a
    rec[2 * x] = np.inf
    rec[2 * x + 1] = 0.0
    rtm[x] = -1
    return x


@njit(cache=True)
def _emu_search(items, H, job_s, job_pair, pair_t0, pair_t1, pair_bound, pair_lmax, pair_off, pair_s0,
                ostart, oarc, ofrac, ocand, first, out_arc, tcost, cost, length, minpen,
                hkey, rec, rtm, hk, hv, best, out, work, status):
    """``match_search``: slot ``i`` runs job ``items[i]`` on scratch ``[i * H, (i + 1) * H)``."""
    lim = H >> 1
    n = items.size
    for i in range(n):
        k = items[i]
        base = i * H
        hks = hk.reshape(H, n)[:, i]  # the search's heap, (label, record local index): slot j at j * n + i
        hvs = hv.reshape(H, n)[:, i]
        p = job_pair[k]
        s = job_s[k]
        t0 = pair_t0[p]
        t1 = pair_t1[p]
        nt = t1 - t0
        bound = pair_bound[p]
        lmax = pair_lmax[p]
        ob = pair_off[p] + (s - pair_s0[p]) * nt
        for j in range(nt):
            best[ob + j] = np.inf
            out[ob + j] = np.inf
        used = 0
        stat = _OK
        pops = 0
        turns = 0
        r0 = ostart[t0]
        r1 = ostart[t1]
        for r in range(r0, r1):
            a = oarc[r]
            x = hash_find(hkey, base, H, a)
            if x < 0:
                if used >= lim:
                    stat = _HASH_FULL
                    break
                x = _insert(hkey, rec, rtm, x, a)
                used += 1
            rtm[x] = r
        if stat == _OK:
            for q in range(ostart[s], ostart[s + 1]):
                a = oarc[q]
                fa = ofrac[q]
                x = hash_find(hkey, base, H, a)
                r = rtm[x] if x >= 0 else -1
                while r >= 0:
                    if ofrac[r] >= fa:
                        j = ocand[r] - t0
                        v = (ofrac[r] - fa) * cost[a]
                        if v < best[ob + j]:
                            best[ob + j] = v
                            out[ob + j] = (ofrac[r] - fa) * length[a]
                    r = _next(oarc, r0, r, a)
        size = 0
        if stat == _OK:
            for q in range(ostart[s], ostart[s + 1]):
                a = oarc[q]
                d = (1.0 - ofrac[q]) * cost[a]
                x = hash_find(hkey, base, H, a)
                cur = rec[2 * x] if x >= 0 else np.inf
                if d < cur:
                    if x < 0:
                        if used >= lim:
                            stat = _HASH_FULL
                            break
                        x = _insert(hkey, rec, rtm, x, a)
                        used += 1
                    rec[2 * x] = d
                    rec[2 * x + 1] = (1.0 - ofrac[q]) * length[a]
                    if size >= H:
                        stat = _HEAP_FULL
                        break
                    size = heap_push(hks, hvs, size, d, x - base)
        worst = 0.0
        dirty = True
        while stat == _OK and size > 0:
            d, xl, size = heap_pop(hks, hvs, size)
            x = base + xl
            pops += 1
            if d > rec[2 * x]:
                continue
            if d > bound:
                break
            if dirty:
                worst = 0.0
                for j in range(nt):
                    if best[ob + j] > worst:
                        worst = best[ob + j]
                dirty = False
            if d + minpen >= worst:
                break
            if rec[2 * x + 1] > lmax:
                continue
            ax = hkey[x]
            for e in range(first[ax], first[ax + 1]):
                tc = tcost[e]
                if tc < 0:
                    continue
                turns += 1
                y = out_arc[e]
                nd = d + tc
                z = hash_find(hkey, base, H, y)
                r = rtm[z] if z >= 0 else -1
                while r >= 0:
                    j = ocand[r] - t0
                    v = nd - cost[y] + ofrac[r] * cost[y]
                    if v < best[ob + j]:
                        best[ob + j] = v
                        out[ob + j] = rec[2 * x + 1] + ofrac[r] * length[y]
                        dirty = True
                    r = _next(oarc, r0, r, y)
                cur = rec[2 * z] if z >= 0 else np.inf
                if nd < cur:
                    if z < 0:
                        if used >= lim:
                            stat = _HASH_FULL
                            break
                        z = _insert(hkey, rec, rtm, z, y)
                        used += 1
                    rec[2 * z] = nd
                    rec[2 * z + 1] = rec[2 * x + 1] + length[y]
                    if size >= H:
                        stat = _HEAP_FULL
                        break
                    size = heap_push(hks, hvs, size, nd, z - base)
        for j in range(nt):
            if not (best[ob + j] <= bound and out[ob + j] <= lmax):
                out[ob + j] = np.inf
        work[2 * i] = pops
        work[2 * i + 1] = turns
        status[i] = stat


# ------------------------------------------------------------------------------------------ backends
class _Emulated:
    """The kernel as the numba loop above, NumPy arrays: the CPU tests' view of the GPU twin."""

    device = "emulated"
    xp = np

    def upload(self, x):
        return np.ascontiguousarray(x)

    def host(self, x):
        return np.asarray(x)

    def search(self, items, H, args, scratch, out):
        _emu_search(items, H, *args[:17], float(args[17]), *scratch, *out)

    def timer(self):
        return _WallTimer()


class _WallTimer:
    def __init__(self):
        self.t = time.perf_counter()

    def seconds(self):
        return time.perf_counter() - self.t


class _EventTimer:
    """Seconds between two CUDA events on the current stream (the kernels' own time)."""

    def __init__(self, cp):
        self.a = cp.cuda.Event()
        self.b = cp.cuda.Event()
        self.cp = cp
        self.a.record()

    def seconds(self):
        self.b.record()
        self.b.synchronize()
        return self.cp.cuda.get_elapsed_time(self.a, self.b) / 1e3


class _Device:
    """The kernel of ``match_search.cu`` on the GPU (CuPy)."""

    device = "gpu"

    def __init__(self):
        from ..backend import resolve_device
        from ..backend.kernels import load_module

        resolve_device("gpu")  # GPUUnavailableError, with the reason, before CuPy is imported
        import cupy as cp

        self.xp = cp
        self.k = {"match_search": load_module(KERNELS).get_function("match_search")}
        self.threads = int(config.SERVE_MATCH_GPU_THREADS)
        props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
        self.name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])

    def upload(self, x):
        return self.xp.ascontiguousarray(self.xp.asarray(x))

    def host(self, x):
        return self.xp.asnumpy(x)

    def search(self, items, H, args, scratch, out):
        n = int(items.size)
        tb = self.threads
        grid = max(1, -(-n // tb))
        self.k["match_search"]((grid,), (tb,), (np.int64(n), items, np.int64(H), *args[:17], np.float64(args[17]),
                                                 *scratch, *out))

    def timer(self):
        return _EventTimer(self.xp)


_lock = threading.Lock()
_device = None
#: Device copies of the networks (``id(tcost) -> (tcost, arrays)``, the last :data:`_KEEP`): a metric snapshot's
#: arrays are the same objects for as long as the snapshot lives (``services.match._turn_metric``'s cache).
_dev_net = {}


def gpu_backend():
    """The GPU backend of :func:`transitions` (made once per process: the kernel compiled).

    Raises
    ------
    GPUUnavailableError
        Without a usable GPU (CuPy and a CUDA device).
    """
    global _device
    with _lock:
        if _device is None:
            _device = _Device()
        return _device


def usable(device="auto"):
    """Whether the GPU twin runs for ``device`` (``"auto"``: where CuPy and a CUDA device are usable; ``"cpu"``:
    never; ``"gpu"``: always, else :class:`~gpuroute.backend.GPUUnavailableError`).

    Raises
    ------
    ValueError
        ``device`` not one of :data:`DEVICES`.
    GPUUnavailableError
        ``"gpu"`` without a usable GPU.
    """
    from ..backend import resolve_device

    if device not in DEVICES:
        raise ValueError(f"config.SERVE_MATCH_TRANSITIONS_DEVICE must be one of {DEVICES}, got {device!r}")
    return resolve_device(device) == "gpu"


def release():
    """Drop the device copies of the networks (their GPU memory returns to CuPy's pool). Safe without a GPU."""
    with _lock:
        _dev_net.clear()


def _net_arrays(kern, net):
    """``((first, out_arc, tcost, cost, length), uploaded)`` of ``net`` on the device, uploaded once per network
    (emulation: the host arrays, never kept)."""
    first, out_arc, tcost, cost, length, _ = net
    if kern.device == "gpu":
        with _lock:
            hit = _dev_net.get(id(tcost))
            if hit is not None and hit[0] is tcost and hit[1] is cost and hit[2] is length:
                return hit[3], False
    up = kern.upload
    arr = (up(np.asarray(first, np.int64)), up(np.asarray(out_arc, np.int32)), up(np.asarray(tcost, np.float64)),
           up(np.asarray(cost, np.float64)), up(np.asarray(length, np.float64)))
    if kern.device == "gpu":
        with _lock:
            if len(_dev_net) >= _KEEP:
                _dev_net.pop(next(iter(_dev_net)))
            _dev_net[id(tcost)] = (tcost, cost, length, arr)
    return arr, True


def _pow2(x):
    return 1 << max(0, int(x - 1).bit_length())


def _run_rounds(kern, n_jobs, H0, Hmax, run):
    """Run ``run(items, H) -> status`` over every job, in launches whose scratch fits the budget, again with four
    times the room for the jobs whose search stopped; returns the jobs still stopped at ``Hmax`` (int64), the
    number of rounds and of launches, and the room the last round had."""
    pending = np.arange(n_jobs, dtype=np.int64)
    H = min(H0, Hmax)
    rounds = launches = 0
    while pending.size:
        rounds += 1
        per = max(1, int(config.SERVE_MATCH_GPU_SCRATCH_BYTES) // (H * _SLOT_BYTES))
        per = -(-pending.size // -(-pending.size // per))  # launches of equal size
        left = []
        for i in range(0, pending.size, per):
            chunk = pending[i:i + per]
            status = run(chunk, H)
            launches += 1
            bad = status != _OK
            if bad.any():
                left.append(chunk[bad])
        pending = np.concatenate(left) if left else pending[:0]
        if not pending.size or H >= Hmax:
            break
        H = min(Hmax, 4 * H)
    return pending, rounds, launches, H


def _transitions(kern, jobs, opts, net, out, ok, stats=None):
    t_all = time.perf_counter()
    job_s = jobs[0]
    J = int(job_s.size)
    ok[:] = True
    if J == 0:
        return out
    xp = kern.xp
    ostart, oarc, ofrac = opts
    m = int(net[3].size)
    t0 = time.perf_counter()
    d_net, uploaded = _net_arrays(kern, net)
    up = kern.upload
    d_jobs = tuple(up(np.asarray(x, np.int64 if x.dtype.kind in "iu" else np.float64)) for x in jobs)
    counts = np.diff(ostart)
    ocand = np.repeat(np.arange(counts.size, dtype=np.int32), counts)
    d_opts = (up(np.asarray(ostart, np.int64)), up(np.asarray(oarc, np.int32)), up(np.asarray(ofrac, np.float64)),
              up(ocand))
    d_best = xp.empty(out.size, np.float64)
    d_out = xp.empty(out.size, np.float64)
    args = d_jobs + d_opts + d_net + (float(net[5]),)
    upload_s = time.perf_counter() - t0
    Hmax = _pow2(max(int(config.SERVE_MATCH_GPU_MAX_HASH_SLOTS), 2))
    H0 = _pow2(max(int(config.SERVE_MATCH_GPU_HASH_SLOTS), 2))
    work = np.zeros(2, dtype=np.int64)
    kernel_s = [0.0]

    def run(chunk, H):
        n = chunk.size
        scratch = (xp.full(n * H, -1, np.int32), xp.empty(2 * n * H, np.float64), xp.empty(n * H, np.int32),
                   xp.empty(n * H, np.float64), xp.empty(n * H, np.int32))
        w = xp.zeros(2 * n, np.int64)
        status = xp.zeros(n, np.int32)
        items = up(chunk)
        timer = kern.timer()
        kern.search(items, H, args, scratch, (d_best, d_out, w, status))
        kernel_s[0] += timer.seconds()
        work[:] += kern.host(w.reshape(n, 2).sum(axis=0))
        return kern.host(status)

    left, rounds, launches, H_last = _run_rounds(kern, J, H0, Hmax, run)
    t0 = time.perf_counter()
    out[:] = kern.host(d_out)
    down_s = time.perf_counter() - t0
    if left.size:  # searches that did not fit the largest room: the CPU twin's (its ok too)
        from .match_hmm import new_scratch

        sc = new_scratch(1, m)
        sub = (np.ascontiguousarray(jobs[0][left]), np.ascontiguousarray(jobs[1][left])) + tuple(jobs[2:])
        sub_ok = np.ones(left.size, dtype=np.bool_)
        transition_chunk(0, left.size, 1, sub, opts, net, out, sub_ok, tuple(x[0] for x in sc))
        ok[left] = sub_ok
    st = {"device": kern.device, "jobs": J, "rounds": rounds, "launches": launches, "hash_slots": (H0, H_last),
          "cpu_jobs": int(left.size), "pops": int(work[0]), "turns": int(work[1]), "kernel_s": kernel_s[0],
          "upload_s": upload_s, "download_s": down_s, "total_s": time.perf_counter() - t_all,
          "net_uploads": int(uploaded)}
    if getattr(kern, "name", None):
        st["device_name"] = kern.name
    with _lock:
        for key in _SUMMED:
            _TOTALS[key] = _TOTALS.get(key, 0) + st[key]
        _TOTALS["calls"] = _TOTALS.get("calls", 0) + 1
    if stats is not None:
        stats.update(st)
    return out


#: What :func:`totals` sums over the calls.
_SUMMED = ("jobs", "launches", "cpu_jobs", "pops", "turns", "kernel_s", "upload_s", "download_s", "total_s",
           "net_uploads")
_TOTALS = {}


def totals(reset=False):
    """The sums over every call of this process since the last reset (:func:`transitions`' ``stats`` keys
    ``jobs``, ``launches``, ``cpu_jobs``, ``pops``, ``turns``, ``kernel_s``, ``upload_s``, ``download_s``,
    ``total_s``, ``net_uploads``, and ``calls``): what the benchmarks report. ``reset``: start again from zero after."""
    with _lock:
        out = dict(_TOTALS)
        if reset:
            _TOTALS.clear()
    return out


# ------------------------------------------------------------------------------------------ entry points
def transitions(jobs, opts, net, out, ok, *, stats=None, backend=None):
    """:func:`gpuroute.engine.match_hmm.transitions` on the GPU: the same jobs and arrays, the same ``out`` and
    ``ok`` bit for bit (see the module docstring).

    Parameters
    ----------
    jobs : tuple
        ``(job_s, job_pair, pair_t0, pair_t1, pair_bound, pair_lmax, pair_off, pair_s0)``: int64 (J,) twice,
        int64 (P,) twice, float64 (P,) (metric units) and float64 (P,) (m), int64 (P,) twice.
    opts : tuple
        ``(ostart, oarc, ofrac)``: the candidates' options (int64 (C + 1,), int64 (R,), float64 (R,)).
    net : tuple
        ``(first, out_arc, tcost, cost, length, minpen)`` as the CPU twin's (arc ids below 2**31).
    out : float64 ndarray
        Written: job ``k``'s row at ``pair_off[p] + (s - pair_s0[p]) * nt`` (m; inf where no route).
    ok : bool ndarray (J,)
        Written: False where job ``k``'s search ran out of the CPU twin's heap (as the CPU twin's).
    stats : dict, optional
        Filled with ``jobs``, ``rounds``, ``launches``, ``hash_slots`` (first and last round), ``cpu_jobs``
        (searches run on the CPU twin), ``pops`` and ``turns`` (heap pops and turns relaxed, summed), ``net_uploads``
        (1 where the network was uploaded: its metric snapshot's first use),
        ``kernel_s`` (CUDA events around the launches), ``upload_s``, ``download_s``, ``total_s``, ``device_name``.
    backend : optional
        What runs the kernel: :func:`gpu_backend` (the default), or the numba emulation (the tests').

    Returns
    -------
    out

    Raises
    ------
    GPUUnavailableError
        Without a usable GPU (CuPy and a CUDA device).
    """
    return _transitions(gpu_backend() if backend is None else backend, jobs, opts, net, out, ok, stats)


def _emulate(jobs, opts, net, out, ok, *, stats=None):
    """:func:`transitions`' algorithm and array layout run by the numba emulation of its kernel (CPU, one search
    after another): what the CPU tests check the GPU twin with. ``stats["device"]`` is ``"emulated"``."""
    return _transitions(_Emulated(), jobs, opts, net, out, ok, stats)
