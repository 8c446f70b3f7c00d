"""GPU launchers of near-far (Davidson, Baxter, Garland, Owens, "Work-Efficient Parallel GPU Methods for
Single-Source Shortest Paths", IPDPS 2014, sec. 4), batched over many sources: the kernels are in
``near_far.cu``, the numba twin in ``cpu.py``.

The batched mode, as users call it (``sssp(graph, many_sources, algorithm="near-far")``): sources go
in passes of ``batch`` sources (items ``s * n + v``); each pass is one CUDA-graph loop. When the caller
wants NumPy results, each pass's distances are copied into page-locked (pinned) host memory on a
second stream while the next pass computes (:class:`NearFarRunner`); ``dtype="uint32"`` returns the
32-bit device distances (half the bytes; ``INF_U32`` where unreachable).
"""
from __future__ import annotations

import numpy as np

from ... import config
from ...backend.flags import DINF, FLAG_PHASES, STATS_CAP
from ...backend.kernels import cooperative_function, load_module
from ...backend.predecessors import init_distances
from ...backend.solver import GPUSolver, i32
from ..common import resolve_delta

#: Device bytes per item (source x node) of a pass: distance, two near queues, three far piles,
#: membership words (8 x 4 B), plus the pass's int64 output (8 B).
BYTES_PER_ITEM = 40


class NearFarGPU(GPUSolver):
    """Near-far (Davidson et al., IPDPS 2014) fused into ONE kernel per phase (``fq_step`` in
    near_far.cu), replayed as a CUDA graph with device-side termination; batched over up to
    ``max_sources`` sources per pass (items ``s * n + v``, a 32-bit index).

    Parameters
    ----------
    dgraph : DeviceGraph
    delta : int or float('inf')
        Threshold step in weight units (:func:`gpuroute.sssp.common.resolve_delta`); inf: no far pile (a
        Bellman-Ford work queue).
    frac : float or None
        Adaptive thread mapping: a phase whose frontier exceeds ``frac * k * n`` items runs one thread
        per item (coalesced) instead of one per queued item; None disables it.
    max_sources : int
        Sources per pass (memory: :data:`BYTES_PER_ITEM` x n x max_sources).

    Raises
    ------
    ValueError
        ``max_sources x n`` items do not fit the 32-bit item index (``config.SSSP_MAX_BATCH_ITEMS``).
    """

    phases_per_graph = 96  # a multiple of 6: queues alternate mod 2, counters rotate mod 3

    def __init__(self, dgraph, delta, frac=None, max_sources=1):
        super().__init__(dgraph)
        cp = self.cp
        n = self.n
        self.mod = load_module("sssp/buckets/near_far.cu")
        self.k_max = int(max_sources)
        total = n * self.k_max
        if total > config.SSSP_MAX_BATCH_ITEMS:
            raise ValueError(f"{self.k_max} sources x {n} nodes exceed config.SSSP_MAX_BATCH_ITEMS="
                             f"{config.SSSP_MAX_BATCH_ITEMS} items per pass (32-bit item index); use a smaller batch")
        self.delta = np.uint32(DINF if delta == float("inf") or delta >= DINF else max(1, int(delta)))
        self.frac = frac
        self.dist = cp.empty(total, dtype=cp.uint32)
        self.near0 = cp.empty(total, dtype=cp.uint32)
        self.near1 = cp.empty(total, dtype=cp.uint32)
        self.fars = [cp.empty(total if self.delta != DINF else 1, dtype=cp.uint32) for _ in range(3)]
        self.cnt = cp.zeros(8, dtype=cp.uint32)
        self.sched = cp.zeros(total, dtype=cp.uint32)
        self.infar = cp.zeros(total, dtype=cp.uint32)
        self.st = cp.zeros(4, dtype=cp.uint32)
        self.src = cp.zeros(self.k_max, dtype=cp.int32)
        self.k_step = self.mod.get_function("fq_step")
        self._graphs = {}

    def _launches(self, k):
        total = self.n * k
        thr = np.uint32(DINF if self.frac is None else min(DINF, int(self.frac * total)))
        args = (i32(self.n), np.uint32(total), self.fo, self.hd, self.w, self.dist, self.near0, self.near1,
                *self.fars, self.cnt, self.sched, self.infar, self.st, self.flags, self.stats, i32(STATS_CAP),
                self.delta, thr)
        return [(self.k_step, self.grid_q, (self.tpb,), lambda p: args + (i32(p & 1), i32(p % 3)), True)]

    def run_many(self, sources, want_pred=False, time_phases=False, dtype="int64"):
        """Distances from ``len(sources) <= max_sources`` sources in one pass. Each pass size gets its
        own captured CUDA graph (kept: a call's passes have at most two sizes, the batch and the
        remainder); a short last pass is not padded (main padded it to the full batch: a pass of 10
        sources cost as much as one of 507).

        Returns ``(dist, pred, stats)``: device arrays (k, n), ``dist`` int64 with INF or, with
        ``dtype="uint32"``, the 32-bit device distances (``DINF`` where unreachable); fresh arrays, not
        the solver's buffers."""
        if len(sources) > self.k_max:
            raise ValueError(f"at most {self.k_max} sources per pass")
        return self._run_many(sources, want_pred, time_phases, dtype, len(sources))

    def _run_many(self, sources, want_pred, time_phases, dtype, k_out):
        cp = self.cp
        k = len(sources)
        n, total = self.n, self.n * len(sources)
        with self.stream:
            self.src[:k].set(np.asarray(sources, dtype=np.int32), stream=self.stream)
            d = self.dist[:total]
        init_distances(d, self.src, n, self.stream)
        with self.stream:
            self.sched[:total].fill(0)
            self.infar[:total].fill(0)
            items = (np.arange(k, dtype=np.int64) * n + np.asarray(sources)).astype(np.uint32)
            self.near0[:k].set(items, stream=self.stream)
            self.sched[cp.asarray(items)] = 1
            self.cnt.fill(0)
            self.cnt[0:1].fill(k)
            self.st.set(np.array([self.delta, 0, self.delta, 0], dtype=np.uint32), stream=self.stream)
            self.flags.fill(0)
            self.stats.fill(0)
        # Bound: the threshold rises by delta at each split (at most max_dist / delta + 1 splits) and
        # between splits the near phases are Bellman-Ford rounds (at most n + 1 each).
        wmax = max(self.dg.max_weight, 1)
        bands = 1 if self.delta == DINF else wmax * max(n - 1, 1) // int(self.delta) + 2
        max_phases = min((n + 2) * (bands + 1), 2 ** 62)
        if k not in self._graphs:
            self._pg = None
            self._graphs[k] = self.phase_graph(self._launches(k))
        self._pg = self._graphs[k]
        phases, host, times = self.run_loop(self._launches(k), max_phases, time_phases)
        dist, pred, phases, upd = self.finish(host, phases, d.reshape(k, n)[:k_out], want_pred, dtype=dtype)
        return dist, pred, {"phases": phases, "updated": upd, "times_us": times,
                            "delta": None if self.delta == DINF else int(self.delta)}

class NearFarPersistentGPU(GPUSolver):
    """Near-far in one persistent launch (software grid barrier between rounds), batched over up to
    ``max_sources`` sources: distances of ``k`` sources come from one pass (items ``s * n + v``).

    The launch is cooperative (all blocks resident, so the barrier cannot deadlock); where CuPy cannot
    launch cooperatively, the grid is one block per multiprocessor.
    """

    def __init__(self, dgraph, delta, max_sources=1, threads=512):
        super().__init__(dgraph)
        cp = self.cp
        n = self.n
        self.k_max = int(max_sources)
        total = n * self.k_max
        if total > config.SSSP_MAX_BATCH_ITEMS:
            raise ValueError(f"{self.k_max} sources x {n} nodes exceed the 32-bit item space; use fewer sources")
        if delta == float("inf") or delta >= DINF:
            raise ValueError("loop='persistent' needs a finite delta (< 2^32 - 1)")
        self.delta = np.uint32(delta)
        self.dist = cp.empty(total, dtype=cp.uint32)
        self.near0 = cp.empty(total, dtype=cp.uint32)
        self.near1 = cp.empty(total, dtype=cp.uint32)
        self.far0 = cp.empty(total, dtype=cp.uint32)
        self.far1 = cp.empty(total, dtype=cp.uint32)
        self.cnt = cp.zeros(8, dtype=cp.uint32)
        self.sched = cp.zeros(total, dtype=cp.uint32)
        self.infar = cp.zeros(total, dtype=cp.uint32)
        self.bar = cp.zeros(2, dtype=cp.uint32)
        self.src = cp.zeros(self.k_max, dtype=cp.int32)
        self.threads = threads
        self.k_run, why = cooperative_function("sssp/buckets/near_far.cu", "nf_persistent")
        if self.k_run is not None:
            self.grid = (self.sms * 2,)
            self.cooperative = True
        else:  # no cooperative launch through this CuPy: one block per SM (all resident in practice)
            self.k_run = load_module("sssp/buckets/near_far.cu").get_function("nf_persistent")
            self.grid = (self.sms,)
            self.cooperative = False

    def run_many(self, sources, want_pred=False, time_phases=False, dtype="int64"):
        """As :meth:`NearFarGPU.run_many` (no per-phase times: one launch)."""
        k = len(sources)
        if k > self.k_max:
            raise ValueError(f"at most {self.k_max} sources per pass")
        n = self.n
        total = n * k
        with self.stream:
            self.src[:k].set(np.asarray(sources, dtype=np.int32), stream=self.stream)
            d = self.dist[:total]
        init_distances(d, self.src, n, self.stream)
        with self.stream:
            self.sched[:total].fill(0)
            self.infar[:total].fill(0)
            self.near0[:k].set((np.arange(k, dtype=np.int64) * n + np.asarray(sources)).astype(np.uint32),
                               stream=self.stream)
            self.cnt.fill(0)
            self.cnt[0:1].fill(k)
            self.bar.fill(0)
            self.flags.fill(0)
            self.stats.fill(0)
            wmax = max(self.dg.max_weight, 1)
            max_rounds = (n + 2) * (wmax * max(n - 1, 1) // int(self.delta) + 2) * 2
            max_rounds = min(max_rounds, 2 ** 62)
            self.k_run(self.grid, (self.threads,),
                       (i32(n), i32(k), self.fo, self.hd, self.w, d, self.near0, self.near1, self.far0, self.far1,
                        self.cnt, self.sched, self.infar, self.bar, self.flags, self.stats, i32(STATS_CAP),
                        self.delta, self.delta, np.int64(max_rounds)))
        host = self.flags.get(stream=self.stream)
        self.stream.synchronize()
        dist, pred, phases, upd = self.finish(host, int(host[FLAG_PHASES]), d.reshape(k, n), want_pred, dtype=dtype)
        return dist, pred, {"phases": phases, "updated": upd, "times_us": None, "delta": int(self.delta),
                            "cooperative": self.cooperative}


def auto_batch(n_nodes, n_sources, max_items=None):
    """Sources per pass when ``batch`` is not given: at most ``config.SSSP_BATCH_ITEMS`` items per pass
    (the measured best, BENCHMARKS.md), what the 32-bit item index allows and ``max_items`` (free device
    memory), balanced so that every pass holds about the same number of sources (1,030 NY sources: 2
    passes of 515, not 761 + 269)."""
    k = max(int(n_sources), 1)
    cap = min(int(config.SSSP_BATCH_ITEMS), int(config.SSSP_MAX_BATCH_ITEMS))
    if max_items is not None:
        cap = min(cap, int(max_items))
    per = max(1, cap // max(n_nodes, 1))
    passes = -(-k // per)
    return -(-k // passes)


class NearFarRunner:
    """Near-far over any number of sources, in passes; the registry's GPU entry of ``near-far``.

    Parameters
    ----------
    dgraph : DeviceGraph
    opts : dict
        ``NEAR_FAR.parse(...)`` output.
    """

    def __init__(self, dgraph, opts):
        self.dg = dgraph
        self.opts = opts
        self.delta = resolve_delta(dgraph.graph, dgraph.weight_name, opts["delta"], opts["delta_factor"])
        if opts["loop"] not in ("graph", "persistent"):
            raise ValueError(f"loop must be 'graph' or 'persistent', got {opts['loop']!r}")
        if opts["batch"] is not None and (isinstance(opts["batch"], bool) or int(opts["batch"]) < 1):
            raise ValueError(f"batch must be a positive integer, got {opts['batch']!r}")
        self._solvers = {}

    def _solver(self, batch):
        key = (batch, self.opts["loop"])
        if key not in self._solvers:
            self._solvers.clear()  # one pass size at a time: the buffers of another are freed
            if self.opts["loop"] == "graph":
                self._solvers[key] = NearFarGPU(self.dg, self.delta, self.opts["frac"], max_sources=batch)
            else:
                self._solvers[key] = NearFarPersistentGPU(self.dg, self.delta, max_sources=batch)
            self.dg.graph  # noqa: B018 - the solver keeps the DeviceGraph alive
        return self._solvers[key]

    def params(self, batch):
        return {"delta": None if self.delta == float("inf") else int(self.delta), "batch": batch,
                "loop": self.opts["loop"], "frac": self.opts["frac"]}

    def batch_for(self, k):
        """The pass size for ``k`` sources: the caller's ``batch``, else :func:`auto_batch` within half the
        free device memory (:data:`BYTES_PER_ITEM` per item)."""
        b = self.opts["batch"]
        if b is not None:
            return max(1, min(int(b), k))
        import cupy as cp

        free, _ = cp.cuda.runtime.memGetInfo()
        return auto_batch(self.dg.n_nodes, k, max_items=free // 2 // BYTES_PER_ITEM)

    def solve(self, sources, want_pred, phase_times, dtype="int64", to_host=False):
        """Distances (and canonical predecessors) from every source: ``(dist, pred, runs, params)``.

        ``to_host``: return NumPy arrays in page-locked host memory, each pass's results copied on a
        second stream while the next pass computes (at most two passes' device results alive).
        Otherwise CuPy arrays (k, n).
        """
        import cupy as cp

        k = int(sources.size)
        n = self.dg.n_nodes
        batch = self.batch_for(k)
        solver = self._solver(batch)
        np_dtype = np.uint32 if dtype == "uint32" else np.int64
        runs = []
        if to_host:
            import cupyx

            dist = cupyx.empty_pinned((k, n), dtype=np_dtype)
            pred = cupyx.empty_pinned((k, n), dtype=np.int32) if want_pred else None
            copy = cp.cuda.Stream(non_blocking=True)
            inflight = []
        else:
            dist = cp.empty((k, n), dtype=np_dtype)
            pred = cp.empty((k, n), dtype=cp.int32) if want_pred else None
        for lo in range(0, k, batch):
            chunk = [int(s) for s in sources[lo:lo + batch]]
            d, p, st = solver.run_many(chunk, want_pred, phase_times, dtype=dtype)
            hi = lo + len(chunk)
            if to_host:
                ev = cp.cuda.Event(disable_timing=True)
                ev.record(solver.stream)
                copy.wait_event(ev)
                d.get(stream=copy, out=dist[lo:hi], blocking=False)
                if want_pred:
                    p.get(stream=copy, out=pred[lo:hi], blocking=False)
                done = cp.cuda.Event(disable_timing=True)
                done.record(copy)
                inflight.append((done, d, p))
                while len(inflight) > 1:  # keep at most two passes' device results alive
                    e, *_ = inflight.pop(0)
                    e.synchronize()
            else:
                dist[lo:hi] = d
                if want_pred:
                    pred[lo:hi] = p
            for _ in chunk:
                runs.append({"phases": st["phases"], "updated": st["updated"], "times_us": st["times_us"]})
        if to_host:
            copy.synchronize()
        elif k:
            solver.stream.synchronize()
        return dist, pred, runs, self.params(batch)


def near_far_gpu(dgraph, variant, opts):
    """The registry's GPU entry of ``near-far``."""
    return NearFarRunner(dgraph, opts)
