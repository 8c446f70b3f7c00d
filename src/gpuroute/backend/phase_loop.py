"""Phase loops without a host round trip per phase: CUDA graphs of many phases with device-side
termination, and per-phase times from the device clock.

A phase is a list of launches ``(kernel, grid, block, args_fn)``; ``args_fn(parity)`` gives the
arguments of phase ``p`` from ``p & 1``, or, for launches given as ``(kernel, grid, block, args_fn,
True)``, from ``p`` itself (kernels that rotate state mod 3). The kernels of a phase return at once
after the loop has converged (they read :data:`~gpuroute.backend.flags.FLAG_DONE`), so a graph of
``n_phases`` phases can be replayed until the host sees the flag: one read-back per replay.
"""
from __future__ import annotations

import numpy as np

from .flags import FLAG_DONE, FLAG_PHASES, STATS_CAP


def _args(launch, p):
    raw = len(launch) > 4 and launch[4]
    return launch[3](p if raw else p & 1)


class PhaseGraph:
    """A CUDA graph of ``n_phases`` phases, captured once on ``stream`` and replayed until done.

    Parameters
    ----------
    stream : cupy.cuda.Stream
    phase_launches : list of tuple
        The launches of one phase (see the module doc).
    n_phases : int
        Phases per graph (a multiple of the period of any rotating state: 2, 3 or 6).
    """

    def __init__(self, stream, phase_launches, n_phases):
        import cupy as cp

        self.stream = stream
        self.n_phases = n_phases
        with stream:
            stream.begin_capture()
            for p in range(n_phases):
                for launch in phase_launches:
                    kern, grid, block = launch[:3]
                    kern(grid, block, _args(launch, p))
            self.graph = stream.end_capture()
        self._cp = cp
        self._pinned = None

    def run(self, flags, max_phases, pipelined=False):
        """Replay until ``flags[FLAG_DONE]`` is set; returns ``(phases counted by the kernels, host
        copy of the flags)``.

        ``pipelined``: replay i + 1 is queued before the host waits for replay i's flags (copied into
        pinned memory), so the GPU never idles for the host's check; the extra replay's kernels return
        at once once the loop is done.

        Raises
        ------
        RuntimeError
            More than ``max_phases`` phases (impossible for valid input: a guard against bugs; the
            bound comes from the algorithm's own proof).
        """
        limit = max_phases // self.n_phases + 2
        if pipelined:
            return self._run_pipelined(flags, limit)
        for _ in range(limit):
            self.graph.launch(self.stream)
            self.stream.synchronize()
            host = flags.get(stream=self.stream)  # one device->host read per replay
            if host[FLAG_DONE]:
                return int(host[FLAG_PHASES]), host
        raise RuntimeError(f"phase loop did not converge within {max_phases} phases")

    def _run_pipelined(self, flags, limit):
        cp = self._cp
        if self._pinned is None or self._pinned[0].size != flags.size:
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


def run_phase_loop(stream, flags, launches, max_phases, *, graph=None, time_phases=False, device_ts=None,
                   pipelined=False):
    """Run a phase loop; returns ``(phases, host flags, times_us or None)``.

    Parameters
    ----------
    stream, flags
        The solver's stream and device flag words.
    launches : list
        One phase's launches.
    max_phases : int
        The algorithm's proven bound on phases (a guard).
    graph : PhaseGraph, optional
        The captured loop to replay (None: run phase by phase with CUDA events, ``time_phases``).
    time_phases : bool
        Per-phase times in microseconds: from the start stamps the kernels write into ``device_ts``
        with the device clock (the loop is unchanged), or, when ``device_ts`` is None, one phase per
        step with CUDA events around it (the paper's measurement, host round trip per phase).
    device_ts : cupy.ndarray of uint64, optional
        The stamps buffer of kernels that record ``%globaltimer`` at each phase start.
    pipelined : bool
        See :meth:`PhaseGraph.run`.
    """
    if graph is not None and (not time_phases or device_ts is not None):
        phases, host = graph.run(flags, max_phases, pipelined)
        times = None
        if time_phases:
            k = min(phases + 1, STATS_CAP)
            stamps = device_ts[:k].get(stream=stream).astype(np.int64)
            stream.synchronize()
            times = np.diff(stamps) / 1e3
        return phases, host, times
    import cupy as cp

    times = []
    ev0, ev1 = cp.cuda.Event(), cp.cuda.Event()
    p = 0
    while True:
        ev0.record(stream)
        with stream:
            for launch in launches:
                kern, grid, block = launch[:3]
                kern(grid, block, _args(launch, p))
        ev1.record(stream)
        ev1.synchronize()
        host = flags.get(stream=stream)
        if host[FLAG_DONE]:
            return int(host[FLAG_PHASES]), host, np.asarray(times)
        times.append(cp.cuda.get_elapsed_time(ev0, ev1) * 1e3)
        p += 1
        if p > max_phases + 2:
            raise RuntimeError(f"phase loop did not converge within {max_phases} phases")
