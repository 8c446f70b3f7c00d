"""GPU launchers for the frontier-based methods in ``frontier.cu`` (CuPy).

Each solver is built once per (graph, weight) and reused across sources; its phase loop is a CUDA
graph of many phases replayed until the device sets the done flag (see :class:`._cuda.PhaseGraph`),
except :class:`NearFarPersistentGPU` (one persistent cooperative launch for the whole search) and the
seed-faithful host loops (``AdaptiveTimeGPU``, ``mode="host"``).
"""
from __future__ import annotations

import numpy as np

from .. import config
from ..backend import load_cuda_module
from ..graph.constants import INF
from ._cuda import (
    FLAG_DONE,
    FLAG_OVERFLOW,
    FLAG_PHASES,
    N_FLAGS,
    PhaseGraph,
    device_graph,
    device_reverse_graph,
)

STATS_CAP = 1 << 20
F_MODE, F_FARPAR = 5, 6
DINF = 0xFFFFFFFF


def _i32(x):
    return np.int32(x)


class _Base:
    phases_per_graph = None

    def __init__(self, graph, weight):
        import cupy as cp

        self.cp = cp
        self.graph = graph
        self.weight = weight
        self.n = graph.n_nodes
        self.fo, self.hd, self.w = device_graph(graph, weight)
        self.mod = load_cuda_module("sssp/frontier.cu")
        self.flags = cp.zeros(N_FLAGS, dtype=cp.int32)
        self.stats = cp.zeros(STATS_CAP, dtype=cp.uint32)
        self.ts = cp.zeros(STATS_CAP, dtype=cp.uint64)  # %globaltimer at each phase start (kernels that stamp)
        self.tpb = config.THREADS_PER_BLOCK
        self.grid_n = ((self.n + self.tpb - 1) // self.tpb,)
        sms = cp.cuda.Device().attributes["MultiProcessorCount"]
        self.grid_q = (max(1, min(self.grid_n[0], sms * config.QUEUE_BLOCKS_PER_SM)),)
        self.stream = cp.cuda.Stream(non_blocking=False)  # orders with the legacy default stream (uploads, allocations)
        self._pg = None
        self.k_pred = self.mod.get_function("canonical_pred")

    def _phase_graph(self, launches):
        if self._pg is None:
            self._pg = PhaseGraph(self.stream, launches, self.phases_per_graph or config.PHASES_PER_GRAPH)
        return self._pg

    def _finish(self, host, phases, dist_dev, want_pred, sources_dev=None, k=1):
        """Check flags, convert 32-bit distances to int64 (INF) and compute canonical predecessors."""
        cp = self.cp
        if host[FLAG_OVERFLOW] == 1:
            raise OverflowError("a tentative distance reached 2^32-1: GPU distances are 32-bit; use device='cpu'")
        if host[FLAG_OVERFLOW] == 2:
            raise RuntimeError("persistent kernel hit its round bound (a bug: please report)")
        with self.stream:
            d64 = dist_dev.astype(cp.int64)
            dist = cp.where(d64 == DINF, INF, d64)
            pred = None
            if want_pred:
                rfo, rtl, rw = device_reverse_graph(self.graph, self.weight)
                pred = cp.empty(dist_dev.size, dtype=cp.int32)
                total = dist_dev.size
                self.k_pred(((total + self.tpb - 1) // self.tpb,), (self.tpb,),
                            (np.uint64(total), _i32(self.n), rfo, rtl, rw, dist_dev.ravel(), pred))
                pred = pred.reshape(dist_dev.shape)
            updated = self.stats[: min(phases, STATS_CAP)].get(stream=self.stream).astype(np.int64)
        self.stream.synchronize()
        return dist, pred, phases, updated

    pipelined = False  # see PhaseGraph.run

    def run_phase_loop(self, launches, max_phases, time_phases=False, device_ts=False):
        """Run the loop: CUDA-graph replays (default) or, with ``time_phases``, per-phase times in
        microseconds (seed 001 Fig. 6): from the start stamps the kernels write into ``self.ts`` with the
        device clock when ``device_ts`` (the loop is unchanged), else one phase per step with CUDA events
        around it."""
        if not time_phases or device_ts:
            phases, host = self._phase_graph(launches).run(self.flags, max_phases, self.pipelined)
            times = None
            if time_phases:
                k = min(phases + 1, STATS_CAP)
                stamps = self.ts[:k].get(stream=self.stream).astype(np.int64)
                self.stream.synchronize()
                times = np.diff(stamps) / 1e3
            return phases, host, times
        cp = self.cp
        times = []
        ev0, ev1 = cp.cuda.Event(), cp.cuda.Event()
        p = 0
        while True:
            ev0.record(self.stream)
            with self.stream:
                for launch in launches:
                    kern, grid, block, args_fn = launch[:4]
                    kern(grid, block, args_fn(p if len(launch) > 4 and launch[4] else p & 1))
            ev1.record(self.stream)
            ev1.synchronize()
            host = self.flags.get(stream=self.stream)
            if host[FLAG_DONE]:
                return int(host[FLAG_PHASES]), host, np.asarray(times)
            times.append(cp.cuda.get_elapsed_time(ev0, ev1) * 1e3)
            p += 1
            if p > max_phases + 2:
                raise RuntimeError(f"phase loop did not converge within {max_phases} phases")


class SelectionGPU(_Base):
    """Selection (seed 001 Alg. 5-6) and adaptive-by-count (device-side switching on frontier size).

    ``adaptive=True``: each phase the device picks the thread mapping for the next relax: one thread
    per node (the conventional mapping) when the frontier exceeds ``frac * n`` (default 0.05), else one
    thread per queued node, on the seed's two-kernel phase. ``algorithm="adaptive", variant="count"``
    runs :class:`AdaptiveFusedGPU` instead (one fused kernel per phase).
    """

    def __init__(self, graph, weight, adaptive=False, frac=None):
        super().__init__(graph, weight)
        cp = self.cp
        conv = load_cuda_module("sssp/conventional.cu")
        self.k_init = conv.get_function("init_k32")
        self.k_relax = self.mod.get_function("sel_relax")
        self.k_update = self.mod.get_function("sel_update")
        self.k_all = self.mod.get_function("ad_relax_all")
        self.adaptive = adaptive
        self.frac = np.float32((0.05 if frac is None else frac) if adaptive else 0.0)
        n = self.n
        self.ca = cp.empty(n, dtype=cp.uint32)
        self.ua = cp.empty(n, dtype=cp.uint32)
        self.ma = cp.empty(n, dtype=cp.uint8)
        self.q0 = cp.empty(n, dtype=cp.uint32)
        self.q1 = cp.empty(n, dtype=cp.uint32)
        self.cnt = cp.zeros(4, dtype=cp.uint32)
        self.sched = cp.zeros(n, dtype=cp.uint32)

    def _a_relax(self, par):
        return (_i32(self.n), self.fo, self.hd, self.w, self.ma, self.ca, self.ua, self.q0, self.q1, self.cnt,
                self.sched, self.flags, self.stats, _i32(STATS_CAP), _i32(par))

    def _a_update(self, par):
        return (_i32(self.n), self.ma, self.ca, self.ua, self.q0, self.q1, self.cnt, self.sched, self.flags,
                _i32(par), self.frac)

    def launches(self):
        ls = []
        if self.adaptive:
            ls.append((self.k_all, self.grid_n, (self.tpb,), self._a_relax))
        ls += [(self.k_relax, self.grid_q, (self.tpb,), self._a_relax),
               (self.k_update, self.grid_q, (self.tpb,), self._a_update)]
        return ls

    def init(self, source):
        with self.stream:
            self.k_init(self.grid_n, (self.tpb,), (_i32(self.n), self.ca, self.ua, self.ma, _i32(source)))
            self.sched.fill(0)
            self.flags.fill(0)
            self.stats.fill(0)
            self.q0[0:1].fill(source)
            self.cnt.fill(0)
            self.cnt[0:1].fill(1)

    def run(self, source, want_pred=False, time_phases=False):
        self.init(source)
        phases, host, times = self.run_phase_loop(self.launches(), self.n + 1, time_phases)
        d, p, ph, upd = self._finish(host, phases, self.ca, want_pred)
        return d, p, {"phases": ph, "updated": upd, "times_us": times}


class AdaptiveTimeGPU(SelectionGPU):
    """Adaptive thread creation exactly as seed 001 Alg. 4: the host times every phase and switches
    between selection phases and conventional all-node phases when the mean of this and the previous
    phase time crosses ``up_us`` (selection -> all-node) or ``down_us`` (all-node -> selection).

    The seed's thresholds (350/330 us on a Tesla K20c) do not transfer: by default both are calibrated
    on the GPU at hand from the measured time of an all-node phase (``up = t_all``,
    ``down = 0.94 * t_all``, the seed's ratio).
    """

    def __init__(self, graph, weight, up_us=None, down_us=None):
        super().__init__(graph, weight)
        conv = load_cuda_module("sssp/conventional.cu")
        self.c_relax = conv.get_function("conv_relax_k32")
        self.c_update = conv.get_function("conv_update_k32")
        self.k_switch = self.mod.get_function("switch_build_queue")
        up_us = config.ADAPTIVE_UP_US if up_us is None else up_us
        down_us = config.ADAPTIVE_DOWN_US if down_us is None else down_us
        if up_us is None or down_us is None:
            t_all = self.calibrate()
            up_us = t_all if up_us is None else up_us
            down_us = 0.94 * t_all if down_us is None else down_us
        self.up_us, self.down_us = float(up_us), float(down_us)

    def _all_phase(self):
        self.c_relax(self.grid_n, (self.tpb,), (_i32(self.n), self.fo, self.hd, self.w, self.ma, self.ca, self.ua,
                                                 self.flags, _i32(-1)))
        self.c_update(self.grid_n, (self.tpb,), (_i32(self.n), self.ma, self.ca, self.ua, self.flags, _i32(-1)))

    def calibrate(self, reps=20):
        """Median time (us) of one all-node phase (relax + update, empty mask) on this GPU."""
        cp = self.cp
        self.init(0)
        with self.stream:
            self.ma.fill(0)
        ev0, ev1 = cp.cuda.Event(), cp.cuda.Event()
        ts = []
        for _ in range(reps):
            ev0.record(self.stream)
            with self.stream:
                self._all_phase()
            ev1.record(self.stream)
            ev1.synchronize()
            ts.append(cp.cuda.get_elapsed_time(ev0, ev1) * 1e3)
        return float(np.median(ts))

    def run(self, source, want_pred=False, time_phases=True):
        cp = self.cp
        self.init(source)
        ev0, ev1 = cp.cuda.Event(), cp.cuda.Event()
        sch, par, prev = True, 0, None
        times, updated, modes = [], [], []
        host_cnt = np.zeros(4, dtype=np.uint32)
        for _ in range(self.n + 2):
            ev0.record(self.stream)
            with self.stream:
                if sch:
                    self.k_relax(self.grid_q, (self.tpb,), self._a_relax(par))
                    self.k_update(self.grid_q, (self.tpb,), self._a_update(par))
                else:
                    self.flags[0:1].fill(0)
                    self._all_phase()
            ev1.record(self.stream)
            ev1.synchronize()
            dt = cp.cuda.get_elapsed_time(ev0, ev1) * 1e3
            times.append(dt)
            modes.append(1 if sch else 0)
            if sch:
                self.stream.synchronize()
                self.cnt.get(out=host_cnt, stream=self.stream)
                par ^= 1
                cur = int(host_cnt[par])
                updated.append(cur)
                if cur == 0:
                    break
            else:
                self.stream.synchronize()
                f = self.flags[0:1].get(stream=self.stream)
                updated.append(-1)  # not counted in all-node phases (the seed's point)
                if f[0] == 0:
                    break
            mean = dt if prev is None else 0.5 * (dt + prev)
            prev = dt
            if sch and mean > self.up_us:
                sch = False
            elif not sch and mean < self.down_us:
                sch = True
                with self.stream:
                    self.cnt[par:par + 1].fill(0)
                    self.k_switch(self.grid_n, (self.tpb,), (_i32(self.n), self.ma, self.q0 if par == 0 else self.q1,
                                                             self.cnt[par:par + 1]))
        else:
            raise RuntimeError("adaptive loop did not converge within n + 2 phases")
        host = self.flags.get(stream=self.stream)
        d, p, _, _ = self._finish(host, 0, self.ca, want_pred)
        return d, p, {"phases": len(times), "updated": np.asarray(updated), "times_us": np.asarray(times),
                      "selection_phase": np.asarray(modes), "up_us": self.up_us, "down_us": self.down_us}


class DijkstraFrontierGPU(_Base):
    """Martin et al. (kind 0) and Crauser et al. general (1) / economic (2); successor or predecessor
    variant (seed 002 sec. IV). A phase: relax from the frontier F, minimum reduction over the
    unsettled set U, update (settle every node within the bound)."""

    phases_per_graph = 256

    def __init__(self, graph, weight, kind, variant="successor"):
        super().__init__(graph, weight)
        cp = self.cp
        if variant not in ("successor", "predecessor"):
            raise ValueError(f"variant must be 'successor' or 'predecessor', got {variant!r}")
        self.kind, self.variant = kind, variant
        n = self.n
        self.dist = cp.empty(n, dtype=cp.uint32)
        self.U = cp.empty(n, dtype=cp.uint8)
        self.F = cp.empty(n, dtype=cp.uint8)
        self.red = cp.empty(2, dtype=cp.uint32)
        self.minw = cp.empty(n, dtype=cp.uint32)
        self.mod.get_function("min_out_weight")(self.grid_n, (self.tpb,), (_i32(n), self.fo, self.w, self.minw))
        self.gmin = np.uint32(int(graph.weight(weight).min()) if graph.n_arcs else 0)
        self.k_init = self.mod.get_function("init_dist")
        if variant == "successor":
            self.k_relax = self.mod.get_function("dk_relax_succ")
            self.rel_arrays = (self.fo, self.hd, self.w)
        else:
            self.k_relax = self.mod.get_function("dk_relax_pred")
            self.rel_arrays = device_reverse_graph(graph, weight)
        self.k_min = self.mod.get_function("dk_min")
        self.k_update = self.mod.get_function("dk_update")
        self.src = cp.zeros(1, dtype=cp.int32)

    def launches(self):
        n = _i32(self.n)
        return [
            (self.k_relax, self.grid_n, (self.tpb,),
             lambda p: (n, *self.rel_arrays, self.U, self.F, self.dist, self.red, self.flags, _i32(p))),
            (self.k_min, self.grid_n, (self.tpb,),
             lambda p: (n, self.U, self.dist, self.minw, self.red, self.flags, _i32(p), _i32(self.kind))),
            (self.k_update, self.grid_n, (self.tpb,),
             lambda p: (n, self.U, self.F, self.dist, self.red, self.flags, self.stats, _i32(STATS_CAP), _i32(p),
                        _i32(self.kind), self.gmin)),
        ]

    def run(self, source, want_pred=False, time_phases=False):
        with self.stream:
            self.src.fill(source)
            self.k_init(self.grid_n, (self.tpb,), (np.uint64(self.n), self.dist, self.src, _i32(self.n)))
            self.U.fill(1)
            self.U[source:source + 1].fill(0)
            self.F.fill(0)
            self.F[source:source + 1].fill(1)
            self.flags.fill(0)
            self.stats.fill(0)
        phases, host, times = self.run_phase_loop(self.launches(), self.n + 1, time_phases)
        d, p, ph, upd = self._finish(host, phases, self.dist, want_pred)
        return d, p, {"phases": ph, "updated": upd, "times_us": times}


class ConventionalFusedGPU(_Base):
    """Harish & Narayanan (seed 001 Alg. 1-3) with UPDATE of phase p fused into RELAX of phase p + 1:
    one kernel per phase (``fc_step1``: one thread per node; ``fc_step``: one per 4 nodes),
    fire-and-forget atomicMin, replayed as a CUDA graph with device-side termination. At most the
    seed's phases, half its launches and no read-back per phase.

    Parameters
    ----------
    graph : RoadGraph
    weight : str
    nodes_per_thread : {1, 4}, optional
        Default ``config.FUSED_NODES_PER_THREAD``.
    chase : int, optional
        Hops a thread follows after improving a head (``fc_step1`` only; default
        ``config.FUSED_CHASE_DEPTH``).
    pipelined : bool, optional
        Queue the next CUDA-graph replay before the host checks the last one's done flag (default
        ``config.FUSED_PIPELINED``).

    Raises
    ------
    ValueError
        ``nodes_per_thread`` not 1 or 4, or a negative ``chase``.
    """

    phases_per_graph = 96

    def __init__(self, graph, weight, nodes_per_thread=None, chase=None, pipelined=None):
        super().__init__(graph, weight)
        self.pipelined = config.FUSED_PIPELINED if pipelined is None else bool(pipelined)
        self.chase = int(config.FUSED_CHASE_DEPTH if chase is None else chase)
        if self.chase < 0:
            raise ValueError(f"chase must be >= 0, got {self.chase}")
        cp = self.cp
        n = self.n
        self.npt = config.FUSED_NODES_PER_THREAD if nodes_per_thread is None else int(nodes_per_thread)
        if self.npt not in (1, 4):
            raise ValueError(f"nodes_per_thread must be 1 or 4, got {self.npt}")
        self.nq = (n + 3) // 4
        self.ca = cp.empty(4 * self.nq, dtype=cp.uint32)
        self.ua = cp.empty(4 * self.nq, dtype=cp.uint32)
        self.changed = cp.zeros(3, dtype=cp.uint32)
        self.pc = cp.zeros(2, dtype=cp.uint32)
        self.k_step = self.mod.get_function("fc_step" if self.npt == 4 else "fc_step1")
        sms = cp.cuda.Device().attributes["MultiProcessorCount"]
        items = self.nq if self.npt == 4 else n
        self.grid_f = (max(1, min((items + self.tpb - 1) // self.tpb, sms * 16)),)

    def launches(self):
        args = (_i32(self.nq if self.npt == 4 else self.n), self.fo, self.hd, self.w, self.ca, self.ua, self.changed, self.flags, self.pc,
                self.stats, _i32(STATS_CAP))
        extra = () if self.npt == 4 else (_i32(self.chase), self.ts)
        return [(self.k_step, self.grid_f, (self.tpb,), lambda p: args + (_i32(p & 1), _i32(p % 3)) + extra, True)]

    def run(self, source, want_pred=False, time_phases=False):
        with self.stream:
            self.ca.fill(DINF)
            self.ua.fill(DINF)
            self.ua[source:source + 1].fill(0)
            self.changed.fill(0)
            self.changed[2:3].fill(1)
            self.pc.fill(0)
            self.flags.fill(0)
            self.stats.fill(0)
        phases, host, times = self.run_phase_loop(self.launches(), self.n + 2, time_phases,
                                                  device_ts=self.npt == 1)
        d, p, ph, upd = self._finish(host, phases, self.ca[: self.n], want_pred)
        return d, p, {"phases": ph, "updated": upd, "times_us": times}


class AdaptiveFusedGPU(_Base):
    """Adaptive thread creation (seed 001 Alg. 4) on the fused conventional step with device-side
    switching (``fa_step`` in frontier.cu): a phase runs one thread per node (fc_step1's loop), one
    thread per node that also builds the next phase's queue, or one thread per queued node (selection,
    Alg. 5-6); one kernel per phase, CUDA-graph replays, device-side termination, no host round trip
    per phase.

    Calibration (at construction, on this GPU and graph): two probe searches of one CUDA-graph replay
    each, one held in the queue regime and one in the all-node regime, give the median phase time of
    each (``t_queue_us``, ``t_all_us``). When a queue phase is not cheaper than an all-node phase
    (measured on an H200 for NY, BAY and tiled NY 4x4: a scan of up to 4M nodes costs no more than the
    queue phase's chain of dependent memory accesses), no phase uses the queue and the solver runs the
    all-node step ``fc_step1`` alone. The probes cost two graph replays (~1 ms on NY, ~5 ms on tiled NY 8x8).

    Parameters
    ----------
    graph : RoadGraph
    weight : str
    switch : {"count", "time"}
        ``"count"``: phase p builds the queue (and phase p + 1 runs on it) when phase p - 1 processed
        fewer than ``frac * n`` nodes (the frontier counted on the device). ``"time"``: the seed's
        rule on phase times measured on the device with ``%globaltimer``: in the queue regime switch
        to all-node phases when the mean of the last two phase times exceeds ``up_us``; in the
        all-node regime switch to the queue when it drops below ``down_us``.
    frac : float, optional
        Count switch: frontier fraction (default ``config.ADAPTIVE_FRONTIER_FRACTION`` when the
        calibration finds queue phases cheaper, else 0); 0 = always all-node (``fc_step1`` alone);
        1 = every phase on the queue.
    up_us, down_us : float, optional
        Time switch thresholds in microseconds (defaults ``config.ADAPTIVE_UP_US`` /
        ``config.ADAPTIVE_DOWN_US``; None = calibrated: ``up`` = ``config.ADAPTIVE_TIME_UP_FACTOR`` x
        ``t_all_us``, ``down`` = 330/350 x ``up`` (the seed's ratio), or both 0 when queue phases are not
        cheaper). ``down_us = 0``: the queue regime is never entered (``fc_step1`` alone).
    pipelined : bool, optional
        Queue the next CUDA-graph replay before the host checks the last one's done flag (default
        ``config.FUSED_PIPELINED``).

    Raises
    ------
    ValueError
        ``frac`` outside [0, 1], ``down_us > up_us``, a negative threshold or an unknown ``switch``.
    TypeError
        An option of the other switch.
    """

    phases_per_graph = 96

    def __init__(self, graph, weight, switch="count", frac=None, up_us=None, down_us=None, pipelined=None):
        super().__init__(graph, weight)
        self.pipelined = config.FUSED_PIPELINED if pipelined is None else bool(pipelined)
        cp = self.cp
        n = self.n
        if switch not in ("count", "time"):
            raise ValueError(f"switch must be 'count' or 'time', got {switch!r}")
        if switch == "time" and frac is not None:
            raise TypeError("frac= is an option of the count switch (variant='count')")
        if switch == "count" and (up_us is not None or down_us is not None):
            raise TypeError("up_us=/down_us= are options of the time switch (variant='time')")
        self.switch = switch
        self.ca = cp.empty(n, dtype=cp.uint32)
        self.ua = cp.empty(n, dtype=cp.uint32)
        self.q0 = cp.empty(max(n, 1), dtype=cp.uint32)
        self.q1 = cp.empty(max(n, 1), dtype=cp.uint32)
        self.qcnt = cp.zeros(3, dtype=cp.uint32)
        self.ast = cp.zeros(5, dtype=cp.uint32)
        self.tring = cp.zeros(4, dtype=cp.uint64)
        self.cfg = cp.zeros(4, dtype=cp.uint64)  # up (ns), down (ns), time switch on, count threshold
        self.pmode = cp.zeros(STATS_CAP, dtype=cp.uint8)
        self.sched = cp.zeros(n, dtype=cp.uint32)
        self.changed = cp.zeros(3, dtype=cp.uint32)
        self.pc = cp.zeros(2, dtype=cp.uint32)
        self.k_fa = self.mod.get_function("fa_step")
        self.k_all = self.mod.get_function("fc_step1")
        sms = cp.cuda.Device().attributes["MultiProcessorCount"]
        self.grid_f = (max(1, min((n + self.tpb - 1) // self.tpb, sms * 16)),)
        self.thr = np.uint32(0)
        self.t_all_us = self.t_queue_us = None
        self.up_us = self.down_us = None
        self._plain = False
        self._fa_graph = None
        need = (frac is None) if switch == "count" else (
            (config.ADAPTIVE_UP_US if up_us is None else up_us) is None
            or (config.ADAPTIVE_DOWN_US if down_us is None else down_us) is None)
        if need:
            self.t_all_us, self.t_queue_us = self.calibrate()
        queue_pays = self.t_all_us is None or self.t_queue_us < self.t_all_us
        if switch == "count":
            f = (config.ADAPTIVE_FRONTIER_FRACTION if queue_pays else 0.0) if frac is None else float(frac)
            if not 0.0 <= f <= 1.0:
                raise ValueError(f"frac must be in [0, 1], got {f}")
            self.frac = f
            self.thr = np.uint32(min(int(np.ceil(f * n)), 2**32 - 1))
            self._plain = self.thr == 0
        else:
            self.frac = None
            up = config.ADAPTIVE_UP_US if up_us is None else up_us
            down = config.ADAPTIVE_DOWN_US if down_us is None else down_us
            if up is None or down is None:
                cal_up = config.ADAPTIVE_TIME_UP_FACTOR * self.t_all_us if queue_pays else 0.0
                up = cal_up if up is None else up
                down = ((330.0 / 350.0) * up if queue_pays else 0.0) if down is None else down
            if up < 0 or down < 0 or down > up:
                raise ValueError(f"need 0 <= down_us <= up_us, got up_us={up}, down_us={down}")
            self.up_us, self.down_us = float(up), float(down)
            self._plain = self.down_us == 0.0
        self._set_cfg(self.up_us or 0.0, self.down_us or 0.0, switch == "time", int(self.thr))
        if not self._plain and self._fa_graph is not None:
            self._pg = self._fa_graph  # the probes' phase graph is the solver's own (same kernels, buffers)

    def _set_cfg(self, up_us, down_us, timed, thr=0):
        """The switch parameters, in device memory (read by the captured kernels at every phase)."""
        big = 2**62
        host = np.array([min(round(up_us * 1e3), big), min(round(down_us * 1e3), big), int(timed), int(thr)],
                        dtype=np.uint64)
        self.cfg.set(host, stream=self.stream)
        self.stream.synchronize()

    def _base_args(self):
        """The leading arguments shared by fc_step1 and fa_step."""
        return (_i32(self.n), self.fo, self.hd, self.w, self.ca, self.ua, self.changed, self.flags, self.pc,
                self.stats, _i32(STATS_CAP))

    def _fa_launches(self):
        base = self._base_args()
        tail = (self.q0, self.q1, self.qcnt, self.ast, self.sched, self.cfg, self.ts, self.tring, self.pmode)

        def args(p):
            return base + (_i32(p & 1), _i32(p % 3)) + tail

        return [(self.k_fa, self.grid_f, (self.tpb,), args, True)]

    def launches(self):
        if self._plain:  # no phase can use the queue: the all-node fused step itself
            base = self._base_args()
            return [(self.k_all, self.grid_f, (self.tpb,),
                     lambda p: base + (_i32(p & 1), _i32(p % 3), _i32(0), self.ts), True)]
        return self._fa_launches()

    def _reset(self, source, queue_regime=True, plain=False):
        with self.stream:
            self.ca.fill(DINF)
            self.ua.fill(DINF)
            self.ua[source:source + 1].fill(0)
            if not plain:  # the queue state (fc_step1 has none)
                self.q0[0:1].fill(source)
                self.qcnt.fill(0)
                self.qcnt[0:1].fill(1)
                self.ast.fill(0)
                if queue_regime:  # phase 0 runs on the queue (the source alone) and the time switch
                    self.ast[0:1].fill(1)  # starts in the queue regime, as the seed starts with selection
                    self.ast[2:3].fill(1)
                self.tring.fill(0)
                self.sched.fill(0)
            self.changed.fill(0)
            self.changed[2:3].fill(1)
            self.pc.fill(0)
            self.flags.fill(0)
            self.stats.fill(0)

    def calibrate(self):
        """Median phase time (us) of the all-node and of the queue regime on this GPU and graph:
        ``(t_all_us, t_queue_us)``. Each is one CUDA-graph replay (96 phases) of a search from a probe
        node, held in that regime (time switch with thresholds that never fire)."""
        if self._fa_graph is None:
            self._fa_graph = PhaseGraph(self.stream, self._fa_launches(), self.phases_per_graph)
        out = []
        for queue_regime in (False, True):
            # queue regime: up = "never" keeps it; all-node regime: down = 0 never enters the queue
            self._set_cfg(float(2**62) / 1e3 if queue_regime else 0.0, 0.0, True)
            best = None
            for probe in (self.n // 2, self.n // 3, self.n // 5, 0):
                self._reset(probe, queue_regime)
                self._fa_graph.graph.launch(self.stream)
                self.stream.synchronize()
                ph = min(int(self.flags.get()[FLAG_PHASES]), self.phases_per_graph)  # phases stamped
                # durations of phases 1 .. ph - 2 (phase 0 starts the search, phase ph - 1 may be the last)
                dts = np.diff(self.ts[:ph].get().astype(np.int64))[1:] / 1e3
                if best is None or dts.size > best.size:
                    best = dts
                if dts.size >= 16:
                    break
            out.append(float(np.median(best)) if best is not None and best.size else float("inf"))
        return out[0], out[1]

    def run(self, source, want_pred=False, time_phases=False):
        """Distances (and canonical predecessors) from ``source``: ``(dist, pred, stats)``.

        ``stats``: ``phases``, ``updated`` (nodes processed per phase), ``queue_phases`` (phases that
        ran on the queue), ``modes`` (per phase: 0 all-node, 1 all-node building the queue, 2 queue;
        None when the solver ran fc_step1 alone), ``times_us`` (per-phase times from the device clock
        when ``time_phases``), ``up_us``/``down_us`` (time switch), ``t_all_us``/``t_queue_us`` (the
        calibration's phase times, when it ran)."""
        self._reset(source, queue_regime=True, plain=self._plain)
        phases, host, times = self.run_phase_loop(self.launches(), self.n + 2, time_phases, device_ts=True)
        d, p, ph, upd = self._finish(host, phases, self.ca, want_pred)
        st = {"phases": ph, "updated": upd, "times_us": times, "t_all_us": self.t_all_us,
              "t_queue_us": self.t_queue_us}
        if self._plain:
            st["modes"] = None
            st["queue_phases"] = 0
        else:
            modes = self.pmode[: min(ph, STATS_CAP)].get(stream=self.stream).astype(np.int8)
            st["modes"] = modes
            st["queue_phases"] = int(np.count_nonzero(modes == 2))
        if self.switch == "time":
            st["up_us"], st["down_us"] = self.up_us, self.down_us
        return d, p, st


def default_delta(graph, weight, factor=None):
    """Near-far threshold step: ``factor`` x the mean arc weight (``config.DELTA_FACTOR``, default 64)."""
    f = config.DELTA_FACTOR if factor is None else factor
    f = 64.0 if f is None else f
    w = graph.weight(weight)
    return max(1, int(round(float(w.mean()) * f))) if w.size else 1


class NearFarGPU(_Base):
    """Near-far (Davidson et al., IPDPS 2014) fused into ONE kernel per phase (``fq_step`` in
    frontier.cu), replayed as a CUDA graph with device-side termination; batched over up to
    ``max_sources`` sources per pass (items ``s * n + v``).

    Parameters
    ----------
    delta : int, float('inf') or None
        Threshold step in weight units; None: :func:`default_delta`; inf: no far pile (a Bellman-Ford
        work queue).
    frac : float or None
        Adaptive thread mapping: a phase whose frontier exceeds ``frac * k * n`` items runs one thread
        per item (coalesced) instead of one per queued item; None disables it.
    max_sources : int
        Sources per pass (memory: ~24 bytes x n x max_sources).
    """

    phases_per_graph = 96  # a multiple of 6: queues alternate mod 2, counters rotate mod 3

    def __init__(self, graph, weight, delta=None, frac=None, max_sources=1):
        super().__init__(graph, weight)
        cp = self.cp
        n = self.n
        self.k_max = int(max_sources)
        total = n * self.k_max
        if total > config.MAX_BATCH_ITEMS:
            raise ValueError(f"{self.k_max} sources x {n} nodes exceed config.MAX_BATCH_ITEMS="
                             f"{config.MAX_BATCH_ITEMS} items per pass; use a smaller batch")
        if delta is None:
            delta = default_delta(graph, weight)
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
        self.k_init = self.mod.get_function("init_dist")
        self.k_step = self.mod.get_function("fq_step")
        self._k = None
        self._graphs = {}

    def _launches(self, k):
        total = self.n * k
        thr = np.uint32(DINF if self.frac is None else min(DINF, int(self.frac * total)))
        args = (_i32(self.n), np.uint32(total), self.fo, self.hd, self.w, self.dist, self.near0, self.near1,
                *self.fars, self.cnt, self.sched, self.infar, self.st, self.flags, self.stats, _i32(STATS_CAP),
                self.delta, thr)
        return [(self.k_step, self.grid_q, (self.tpb,), lambda p: args + (_i32(p & 1), _i32(p % 3)), True)]

    def run_many(self, sources, want_pred=False, time_phases=False):
        """Distances from ``len(sources) <= max_sources`` sources in one pass (padded to max_sources
        by repeating the last source, so one captured CUDA graph serves every pass)."""
        k_req = len(sources)
        if k_req > self.k_max:
            raise ValueError(f"at most {self.k_max} sources per pass")
        if k_req < self.k_max and self.k_max > 1:
            sources = list(sources) + [sources[-1]] * (self.k_max - k_req)
            d, p, st = self._run_many(sources, want_pred, time_phases)
            return d[:k_req], (p[:k_req] if p is not None else None), st
        return self._run_many(sources, want_pred, time_phases)

    def _run_many(self, sources, want_pred=False, time_phases=False):
        cp = self.cp
        k = len(sources)
        n, total = self.n, self.n * len(sources)
        with self.stream:
            self.src[:k].set(np.asarray(sources, dtype=np.int32), stream=self.stream)
            d = self.dist[:total]
            self.k_init(((total + self.tpb - 1) // self.tpb,), (self.tpb,), (np.uint64(total), d, self.src, _i32(n)))
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
        wmax = int(self.graph.weight(self.weight).max()) if self.graph.n_arcs else 1
        bands = 1 if self.delta == DINF else wmax * max(n - 1, 1) // int(self.delta) + 2
        max_phases = min((n + 2) * (bands + 1), 2 ** 62)
        if k not in self._graphs:
            self._pg = None
            self._graphs[k] = self._phase_graph(self._launches(k))
        self._pg = self._graphs[k]
        phases, host, times = self.run_phase_loop(self._launches(k), max_phases, time_phases)
        dist, pred, phases, upd = self._finish(host, phases, d.reshape(k, n), want_pred)
        return dist, pred, {"phases": phases, "updated": upd, "times_us": times,
                            "delta": None if self.delta == DINF else int(self.delta)}

    def run(self, source, want_pred=False, time_phases=False):
        d, p, st = self.run_many([source], want_pred, time_phases)
        return d[0], (p[0] if p is not None else None), st


class NearFarPersistentGPU(_Base):
    """Near-far in one persistent launch (software grid barrier between rounds), batched over up to
    ``max_sources`` sources: distances of ``k`` sources come from one pass (items ``s * n + v``).

    The launch is cooperative (all blocks resident, so the barrier cannot deadlock); where CuPy cannot
    launch cooperatively, the grid is one block per multiprocessor.
    """

    def __init__(self, graph, weight, delta=None, max_sources=1, threads=512):
        super().__init__(graph, weight)
        cp = self.cp
        n = self.n
        self.k_max = int(max_sources)
        total = n * self.k_max
        if total >= 2 ** 32 - 1:
            raise ValueError(f"{self.k_max} sources x {n} nodes exceed the 32-bit item space; use fewer sources")
        self.delta = np.uint32(default_delta(graph, weight) if delta is None else delta)
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
        self.k_init = self.mod.get_function("init_dist")
        self.threads = threads
        sms = cp.cuda.Device().attributes["MultiProcessorCount"]
        try:
            coop = load_cuda_module("sssp/frontier.cu", cooperative=True)
            self.k_run = coop.get_function("nf_persistent")
            self.grid = (sms * 2,)
            self.cooperative = True
        except Exception:  # cooperative launch not available through this CuPy: one block per SM
            self.k_run = self.mod.get_function("nf_persistent")
            self.grid = (sms,)
            self.cooperative = False

    def run_many(self, sources, want_pred=False):
        k = len(sources)
        if k > self.k_max:
            raise ValueError(f"at most {self.k_max} sources per pass")
        n = self.n
        total = n * k
        with self.stream:
            self.src[:k].set(np.asarray(sources, dtype=np.int32), stream=self.stream)
            d = self.dist[:total]
            self.k_init(((total + self.tpb - 1) // self.tpb,), (self.tpb,), (np.uint64(total), d, self.src, _i32(n)))
            self.sched[:total].fill(0)
            self.infar[:total].fill(0)
            self.near0[:k].set((np.arange(k, dtype=np.int64) * n + np.asarray(sources)).astype(np.uint32),
                               stream=self.stream)
            self.cnt.fill(0)
            self.cnt[0:1].fill(k)
            self.bar.fill(0)
            self.flags.fill(0)
            self.stats.fill(0)
            wmax = int(self.graph.weight(self.weight).max()) if self.graph.n_arcs else 1
            max_rounds = (n + 2) * (wmax * max(n - 1, 1) // int(self.delta) + 2) * 2
            max_rounds = min(max_rounds, 2 ** 62)
            self.k_run(self.grid, (self.threads,),
                       (_i32(n), _i32(k), self.fo, self.hd, self.w, d, self.near0, self.near1, self.far0, self.far1,
                        self.cnt, self.sched, self.infar, self.bar, self.flags, self.stats, _i32(STATS_CAP),
                        self.delta, self.delta, np.int64(max_rounds)))
        host = self.flags.get(stream=self.stream)
        self.stream.synchronize()
        dist, pred, phases, upd = self._finish(host, int(host[FLAG_PHASES]), d.reshape(k, n), want_pred)
        return dist, pred, {"phases": phases, "updated": upd, "delta": int(self.delta),
                            "cooperative": self.cooperative}

    def run(self, source, want_pred=False, time_phases=False):
        d, p, st = self.run_many([source], want_pred)
        return d[0], (p[0] if p is not None else None), st

