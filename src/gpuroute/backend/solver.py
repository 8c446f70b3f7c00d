"""GPUSolver: what every GPU SSSP solver shares (stream, flag words, per-phase statistics and device
timestamps, grid sizes, the captured phase loop, and turning 32-bit device distances into results)."""
from __future__ import annotations

import numpy as np

from .. import config
from .flags import STATS_CAP, check_overflow
from .kernels import multiprocessors
from .phase_loop import PhaseGraph, run_phase_loop
from .predecessors import canonical_predecessors, widen


def i32(x):
    """A kernel argument as ``numpy.int32``."""
    return np.int32(x)


class GPUSolver:
    """Base of the GPU solvers: built once per (DeviceGraph, options), reused across sources.

    Parameters
    ----------
    dgraph : DeviceGraph
        The device-resident graph and weight (owned by the caller).

    Attributes
    ----------
    flags : cupy int32 (N_FLAGS,)
        Device flag words (:mod:`gpuroute.backend.flags`).
    stats : cupy uint32 (STATS_CAP,)
        Per-phase counts written by the kernels.
    ts : cupy uint64 (STATS_CAP,)
        ``%globaltimer`` at each phase start (kernels that stamp).
    stream : cupy.cuda.Stream
        The solver's stream (blocking: ordered with the legacy default stream that uploads use).
    """

    #: Phases captured in one CUDA graph (None: ``config.SSSP_PHASES_PER_GRAPH``).
    phases_per_graph = None
    #: Queue the next CUDA-graph replay before checking the last one (see PhaseGraph.run).
    pipelined = False
    #: Whether the kernels stamp ``ts`` at each phase start (device-clock phase times).
    device_ts = False

    def __init__(self, dgraph):
        import cupy as cp

        self.cp = cp
        self.dg = dgraph
        self.n = dgraph.n_nodes
        self.fo, self.hd, self.w = dgraph.csr
        self.flags = cp.zeros(8, dtype=cp.int32)
        self.stats = cp.zeros(STATS_CAP, dtype=cp.uint32)
        self.ts = cp.zeros(STATS_CAP, dtype=cp.uint64)
        self.tpb = config.SSSP_THREADS_PER_BLOCK
        self.grid_n = ((self.n + self.tpb - 1) // self.tpb,)
        self.sms = multiprocessors()
        self.grid_q = (max(1, min(self.grid_n[0], self.sms * config.SSSP_QUEUE_BLOCKS_PER_SM)),)
        self.stream = cp.cuda.Stream(non_blocking=False)
        self._pg = None

    def phase_graph(self, launches):
        """The captured CUDA graph of this solver's phase loop (captured on first use)."""
        if self._pg is None:
            self._pg = PhaseGraph(self.stream, launches, self.phases_per_graph or config.SSSP_PHASES_PER_GRAPH)
        return self._pg

    def run_loop(self, launches, max_phases, time_phases=False):
        """Run the phase loop (CUDA-graph replays; see :func:`~gpuroute.backend.phase_loop.run_phase_loop`).
        Returns ``(phases, host flags, times_us or None)``."""
        graph = None if (time_phases and not self.device_ts) else self.phase_graph(launches)
        return run_phase_loop(self.stream, self.flags, launches, max_phases, graph=graph, time_phases=time_phases,
                              device_ts=self.ts if self.device_ts else None, pipelined=self.pipelined)

    def finish(self, host, phases, dist32, want_pred, limit="2^32 - 2", dtype="int64"):
        """Results of one run: ``(dist, pred int32 or None, phases, updated per phase)``; ``dist`` is a
        fresh device array: int64 with ``INF`` (``dtype="int64"``) or the 32-bit device distances with
        ``DINF`` (``dtype="uint32"``).

        Raises
        ------
        OverflowError, RuntimeError
            See :func:`~gpuroute.backend.flags.check_overflow`.
        """
        check_overflow(host, limit)
        if dtype == "uint32":
            with self.stream:
                dist = dist32.copy()
        else:
            dist = widen(dist32, self.stream)
        pred = canonical_predecessors(self.dg, dist32, self.stream) if want_pred else None
        updated = self.stats[: min(phases, STATS_CAP)].get(stream=self.stream).astype(np.int64)
        self.stream.synchronize()
        return dist, pred, phases, updated
