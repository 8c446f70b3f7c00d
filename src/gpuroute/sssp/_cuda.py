"""GPU launchers (CuPy) for the SSSP kernels in the ``.cu`` files beside this module.

Device arrays of a graph are uploaded once per (graph, weight) and cached on the graph object.
Phase loops never read back per phase: a CUDA graph of ``config.PHASES_PER_GRAPH`` phases is captured
once and replayed; the kernels of a phase return at once after the loop has converged (device-side
termination), and the host reads one flag per replay. ``mode="host"`` runs the loop as seed 001 does
(launch, then read the "changed" flag back after every phase) for comparison.
"""
from __future__ import annotations

import numpy as np

from .. import config
from ..backend import load_cuda_module
from ..graph.constants import INF, NO_PREDECESSOR

FLAG_CHANGED0, FLAG_CHANGED1, FLAG_DONE, FLAG_PHASES, FLAG_OVERFLOW = range(5)
N_FLAGS = 8


def device_graph(graph, weight):
    """Upload (once) and return the device CSR arrays ``(first_out, head, weight)`` as int32 CuPy arrays."""
    import cupy as cp

    cache = graph.__dict__.setdefault("_device_cache", {})
    key = ("fwd", weight)
    if key not in cache:
        cache[key] = (cp.asarray(graph.first_out), cp.asarray(graph.head), cp.asarray(graph.weight(weight)))
        cp.cuda.Device().synchronize()
    return cache[key]


def device_reverse_graph(graph, weight):
    """Upload (once) and return the reverse CSR ``(rev_first_out, rev_tail, rev_weight)`` on the device."""
    import cupy as cp

    cache = graph.__dict__.setdefault("_device_cache", {})
    key = ("rev", weight)
    if key not in cache:
        w = graph.weight(weight)[graph.rev_arc]
        cache[key] = (cp.asarray(graph.rev_first_out), cp.asarray(graph.rev_tail), cp.asarray(w))
        cp.cuda.Device().synchronize()
    return cache[key]


def unpack_keys(keys, want_pred):
    """Device keys -> (dist int64 with INF, pred int32 with NO_PREDECESSOR or None)."""
    import cupy as cp

    if keys.dtype == cp.uint64:
        d = (keys >> 32).astype(cp.int64)
        pred = (keys & 0xFFFFFFFF).astype(cp.uint32).view(cp.int32) if want_pred else None
    else:
        d = keys.astype(cp.int64)
        pred = None
    dist = cp.where(d == 0xFFFFFFFF, INF, d)
    if pred is not None:
        pred = cp.where(d == 0xFFFFFFFF, NO_PREDECESSOR, pred).astype(cp.int32)
    return dist, pred


class PhaseGraph:
    """A CUDA graph of ``n_phases`` phases, each a list of ``(kernel, grid, block, args_fn(parity))``
    (or ``(kernel, grid, block, args_fn(phase_index), True)`` for kernels that rotate state mod 3).

    Replay it until ``flags[FLAG_DONE]`` is set; :meth:`run` bounds the number of replays so that a
    bug can never hang the host (the bound is passed by the caller from the algorithm's own proof).
    """

    def __init__(self, stream, phase_launches, n_phases):
        import cupy as cp

        self.stream = stream
        self.n_phases = n_phases
        with stream:
            stream.begin_capture()
            for p in range(n_phases):
                for launch in phase_launches:
                    kern, grid, block, args_fn = launch[:4]
                    raw = len(launch) > 4 and launch[4]  # args_fn takes the phase index, not its parity
                    kern(grid, block, args_fn(p if raw else p & 1))
            self.graph = stream.end_capture()
        self._cp = cp

    def run(self, flags, max_phases, pipelined=False):
        """Replay until done; returns the number of phases the kernels counted. Raises RuntimeError if
        ``max_phases`` is exceeded (impossible for valid input: a guard against bugs).

        ``pipelined``: replay i + 1 is queued before the host waits for replay i's flags (copied into
        pinned memory), so the GPU never idles for the host's check; after the loop is done the extra
        replay's kernels return at once."""
        replays = 0
        limit = max_phases // self.n_phases + 2
        if pipelined:
            return self._run_pipelined(flags, limit)
        while True:
            self.graph.launch(self.stream)
            replays += 1
            self.stream.synchronize()
            host = flags.get(stream=self.stream)  # one device->host read per replay
            if host[FLAG_DONE]:
                return int(host[FLAG_PHASES]), host
            if replays >= limit:
                raise RuntimeError(f"phase loop did not converge within {max_phases} phases")

    def _run_pipelined(self, flags, limit):
        cp = self._cp
        if getattr(self, "_pinned", None) is None or self._pinned[0].size != flags.size:
            self._pinned = []
            for _ in range(2):
                mem = cp.cuda.alloc_pinned_memory(flags.nbytes)
                self._pinned.append(np.frombuffer(mem, dtype=flags.dtype, count=flags.size))
            self._events = [cp.cuda.Event(block=False, disable_timing=True) for _ in range(2)]

        def launch(i):
            self.graph.launch(self.stream)
            flags.get(stream=self.stream, out=self._pinned[i & 1])
            self._events[i & 1].record(self.stream)

        launch(0)
        for replays in range(1, limit + 1):
            launch(replays)  # queued before looking at the previous replay's flags
            self._events[(replays - 1) & 1].synchronize()
            host = self._pinned[(replays - 1) & 1]
            if host[FLAG_DONE]:
                self.stream.synchronize()
                return int(host[FLAG_PHASES]), host.copy()
        raise RuntimeError(f"phase loop did not converge within {limit * self.n_phases} phases")


class ConventionalGPU:
    """Harish & Narayanan Bellman-Ford (seed 001 Alg. 1-3) on one graph/weight, reusable across sources.

    Parameters
    ----------
    graph : RoadGraph
    weight : str
    want_pred : bool
        64-bit (distance, predecessor) keys when True, 32-bit distance keys otherwise.
    """

    def __init__(self, graph, weight, want_pred):
        import cupy as cp

        self.cp = cp
        self.n = graph.n_nodes
        self.want_pred = want_pred
        self.fo, self.hd, self.w = device_graph(graph, weight)
        mod = load_cuda_module("sssp/conventional.cu")
        suf = "k64" if want_pred else "k32"
        self.k_relax = mod.get_function(f"conv_relax_{suf}")
        self.k_update = mod.get_function(f"conv_update_{suf}")
        self.k_init = mod.get_function(f"init_{suf}")
        kd = cp.uint64 if want_pred else cp.uint32
        self.ca = cp.empty(self.n, dtype=kd)
        self.ua = cp.empty(self.n, dtype=kd)
        self.ma = cp.empty(self.n, dtype=cp.uint8)
        self.flags = cp.zeros(N_FLAGS, dtype=cp.int32)
        self.tpb = config.THREADS_PER_BLOCK
        self.grid = ((self.n + self.tpb - 1) // self.tpb,)
        self.stream = cp.cuda.Stream(non_blocking=False)  # orders with the legacy default stream (uploads, allocations)
        self._graph = None

    def _args_relax(self, parity):
        return (np.int32(self.n), self.fo, self.hd, self.w, self.ma, self.ca, self.ua, self.flags, np.int32(parity))

    def _args_update(self, parity):
        return (np.int32(self.n), self.ma, self.ca, self.ua, self.flags, np.int32(parity))

    def _init(self, source):
        with self.stream:
            self.k_init(self.grid, (self.tpb,), (np.int32(self.n), self.ca, self.ua, self.ma, np.int32(source)))
            self.flags.fill(0)
            self.flags[FLAG_CHANGED1] = 1

    def run(self, source, mode="graph"):
        """Distances (and predecessors) from ``source``; returns ``(dist, pred, phases)`` on the device.

        ``mode="graph"``: device-side termination, CUDA graph replays. ``mode="host"``: the seed's host
        loop, one launch pair and one flag read per phase.

        Raises
        ------
        OverflowError
            If a tentative distance would reach 2^32 - 1 (GPU keys are 32-bit distances).
        """
        self._init(source)
        max_phases = self.n + 1  # Bellman-Ford: at most n-1 improving phases, plus the one that sees none
        if mode == "graph":
            if self._graph is None:
                self._graph = PhaseGraph(self.stream, [
                    (self.k_relax, self.grid, (self.tpb,), self._args_relax),
                    (self.k_update, self.grid, (self.tpb,), self._args_update),
                ], config.PHASES_PER_GRAPH)
            phases, host = self._graph.run(self.flags, max_phases)
        elif mode == "host":
            phases = 0
            with self.stream:
                while True:
                    self.flags[0:1].fill(0)
                    self.k_relax(self.grid, (self.tpb,), self._args_relax(-1))
                    self.k_update(self.grid, (self.tpb,), self._args_update(-1))
                    phases += 1
                    self.stream.synchronize()  # the flag is read after this phase's kernels finished
                    host_flag = self.flags[0:1].get(stream=self.stream)
                    if host_flag[0] == 0 or phases > max_phases:
                        break
            host = self.flags.get(stream=self.stream)
        else:
            raise ValueError(f"mode must be 'graph' or 'host', got {mode!r}")
        if host[FLAG_OVERFLOW]:
            raise OverflowError("a tentative distance reached 2^32-1: GPU distances are 32-bit; use device='cpu'")
        with self.stream:
            dist, pred = unpack_keys(self.ca, self.want_pred)
        self.stream.synchronize()
        return dist, pred, phases
