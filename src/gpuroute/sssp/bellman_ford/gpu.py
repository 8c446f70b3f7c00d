"""GPU launchers of the Bellman-Ford family (CuPy; kernels in ``conventional.cu``, ``selection.cu`` and
``fused.cu`` beside this module): Harish & Narayanan's conventional method, selection and adaptive thread
creation as "Accelerating SSSP Algorithm on GPU with Adaptive Thread Creation" describes them (Alg. 1-6), with
the paper's own loops kept for comparison and device-side loops that never read back per phase.

Every solver takes a :class:`~gpuroute.backend.device_graph.DeviceGraph` (owned by the caller), is
built once and reused across sources. The numba twins are in ``cpu.py``; both read their options from
``options.py``.
"""
from __future__ import annotations

import numpy as np

from ... import config
from ...backend.flags import DINF, FLAG_CHANGED1, FLAG_PHASES, STATS_CAP, check_overflow
from ...backend.kernels import load_module
from ...backend.phase_loop import PhaseGraph
from ...backend.solver import GPUSolver, i32
from ...graph.constants import INF, NO_PREDECESSOR
from ..common import GPURunner
from .options import KIND_QUEUE, KIND_SCAN, adaptive_params, conventional_params


class ConventionalGPU(GPUSolver):
    """Harish & Narayanan Bellman-Ford with the paper's two kernels per phase (Adaptive Thread Creation paper, Alg. 1-3), on one
    DeviceGraph, reusable across sources.

    Parameters
    ----------
    dgraph : DeviceGraph
    want_pred : bool
        64-bit (distance, predecessor) keys when True, 32-bit distance keys otherwise.
    """

    def __init__(self, dgraph, want_pred):
        super().__init__(dgraph)
        cp = self.cp
        self.want_pred = want_pred
        mod = load_module("sssp/bellman_ford/conventional.cu")
        suf = "k64" if want_pred else "k32"
        self.k_relax = mod.get_function(f"conv_relax_{suf}")
        self.k_update = mod.get_function(f"conv_update_{suf}")
        self.k_init = mod.get_function(f"init_{suf}")
        kd = cp.uint64 if want_pred else cp.uint32
        self.ca = cp.empty(self.n, dtype=kd)
        self.ua = cp.empty(self.n, dtype=kd)
        self.ma = cp.empty(self.n, dtype=cp.uint8)
        self.grid = self.grid_n

    def _args_relax(self, parity):
        return (i32(self.n), self.fo, self.hd, self.w, self.ma, self.ca, self.ua, self.flags, i32(parity))

    def _args_update(self, parity):
        return (i32(self.n), self.ma, self.ca, self.ua, self.flags, i32(parity))

    def _init(self, source):
        with self.stream:
            self.k_init(self.grid, (self.tpb,), (i32(self.n), self.ca, self.ua, self.ma, i32(source)))
            self.flags.fill(0)
            self.flags[FLAG_CHANGED1:FLAG_CHANGED1 + 1].fill(1)

    def run(self, source, mode="graph"):
        """Distances (and predecessors) from ``source``; returns ``(dist, pred, phases)`` on the device.

        ``mode="graph"``: device-side termination, CUDA graph replays. ``mode="host"``: the paper's host
        loop, one launch pair and one flag read per phase.

        Raises
        ------
        OverflowError
            If a tentative distance would reach 2^32 - 1 (GPU keys are 32-bit distances).
        """
        self._init(source)
        max_phases = self.n + 1  # Bellman-Ford: at most n-1 improving phases, plus the one that sees none
        if mode == "graph":
            pg = self.phase_graph([(self.k_relax, self.grid, (self.tpb,), self._args_relax),
                                   (self.k_update, self.grid, (self.tpb,), self._args_update)])
            phases, host = pg.run(self.flags, max_phases)
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
        check_overflow(host)
        with self.stream:
            dist, pred = unpack_keys(self.ca, self.want_pred)
        self.stream.synchronize()
        return dist, pred, phases


class SelectionGPU(GPUSolver):
    """Selection (Adaptive Thread Creation paper, Alg. 5-6) and adaptive-by-count (device-side switching on frontier size).

    ``adaptive=True``: each phase the device picks the thread mapping for the next relax: one thread
    per node (the conventional mapping) when the frontier exceeds ``frac * n`` (default 0.05), else one
    thread per queued node, on the paper's two-kernel phase. ``algorithm="adaptive", variant="count"``
    runs :class:`AdaptiveFusedGPU` instead (one fused kernel per phase).
    """

    def __init__(self, dgraph, adaptive=False, frac=None):
        super().__init__(dgraph)
        cp = self.cp
        self.mod = load_module("sssp/bellman_ford/selection.cu")
        conv = load_module("sssp/bellman_ford/conventional.cu")
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
        return (i32(self.n), self.fo, self.hd, self.w, self.ma, self.ca, self.ua, self.q0, self.q1, self.cnt,
                self.sched, self.flags, self.stats, i32(STATS_CAP), i32(par))

    def _a_update(self, par):
        return (i32(self.n), self.ma, self.ca, self.ua, self.q0, self.q1, self.cnt, self.sched, self.flags,
                i32(par), self.frac)

    def launches(self):
        ls = []
        if self.adaptive:
            ls.append((self.k_all, self.grid_n, (self.tpb,), self._a_relax))
        ls += [(self.k_relax, self.grid_q, (self.tpb,), self._a_relax),
               (self.k_update, self.grid_q, (self.tpb,), self._a_update)]
        return ls

    def init(self, source):
        with self.stream:
            self.k_init(self.grid_n, (self.tpb,), (i32(self.n), self.ca, self.ua, self.ma, i32(source)))
            self.sched.fill(0)
            self.flags.fill(0)
            self.stats.fill(0)
            self.q0[0:1].fill(source)
            self.cnt.fill(0)
            self.cnt[0:1].fill(1)

    def run(self, source, want_pred=False, time_phases=False):
        self.init(source)
        phases, host, times = self.run_loop(self.launches(), self.n + 1, time_phases)
        d, p, ph, upd = self.finish(host, phases, self.ca, want_pred)
        return d, p, {"phases": ph, "updated": upd, "times_us": times}


class AdaptiveTimeGPU(SelectionGPU):
    """Adaptive thread creation exactly as Adaptive Thread Creation paper, Alg. 4: the host times every phase and switches
    between selection phases and conventional all-node phases when the mean of this and the previous
    phase time crosses ``up_us`` (selection -> all-node) or ``down_us`` (all-node -> selection).

    The paper's thresholds (350/330 us on a Tesla K20c) do not transfer: by default both are calibrated
    on the GPU at hand from the measured time of an all-node phase (``up = t_all``,
    ``down = 0.94 * t_all``, the paper's ratio).
    """

    def __init__(self, dgraph, up_us=None, down_us=None):
        super().__init__(dgraph)
        conv = load_module("sssp/bellman_ford/conventional.cu")
        self.c_relax = conv.get_function("conv_relax_k32")
        self.c_update = conv.get_function("conv_update_k32")
        self.k_switch = self.mod.get_function("switch_build_queue")
        up_us = config.SSSP_ADAPTIVE_UP_US if up_us is None else up_us
        down_us = config.SSSP_ADAPTIVE_DOWN_US if down_us is None else down_us
        self.t_all_us = None
        if up_us is None or down_us is None:
            self.t_all_us = t_all = self.calibrate()
            up_us = t_all if up_us is None else up_us
            down_us = 0.94 * t_all if down_us is None else down_us
        if up_us < 0 or down_us < 0 or down_us > up_us:
            raise ValueError(f"need 0 <= down_us <= up_us, got up_us={up_us}, down_us={down_us}")
        self.up_us, self.down_us = float(up_us), float(down_us)

    def _all_phase(self):
        self.c_relax(self.grid_n, (self.tpb,), (i32(self.n), self.fo, self.hd, self.w, self.ma, self.ca, self.ua,
                                                 self.flags, i32(-1)))
        self.c_update(self.grid_n, (self.tpb,), (i32(self.n), self.ma, self.ca, self.ua, self.flags, i32(-1)))

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
                updated.append(-1)  # not counted in all-node phases (the paper's point)
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
                    self.k_switch(self.grid_n, (self.tpb,), (i32(self.n), self.ma, self.q0 if par == 0 else self.q1,
                                                             self.cnt[par:par + 1]))
        else:
            raise RuntimeError("adaptive loop did not converge within n + 2 phases")
        host = self.flags.get(stream=self.stream)
        d, p, _, _ = self.finish(host, 0, self.ca, want_pred)
        return d, p, {"phases": len(times), "updated": np.asarray(updated), "times_us": np.asarray(times),
                      "selection_phase": np.asarray(modes), "up_us": self.up_us, "down_us": self.down_us}


class ConventionalFusedGPU(GPUSolver):
    """Harish & Narayanan (Adaptive Thread Creation paper, Alg. 1-3) with UPDATE of phase p fused into RELAX of phase p + 1:
    one kernel per phase (``fc_step1``: one thread per node; ``fc_step``: one per 4 nodes),
    fire-and-forget atomicMin, replayed as a CUDA graph with device-side termination. At most the
    paper's phases, half its launches and no read-back per phase.

    Parameters
    ----------
    dgraph : DeviceGraph
    nodes_per_thread : {1, 4}, optional
        Default ``config.SSSP_FUSED_NODES_PER_THREAD``.
    chase : int, optional
        Hops a thread follows after improving a head (``fc_step1`` only; default
        ``config.SSSP_FUSED_CHASE_DEPTH``).
    pipelined : bool, optional
        Queue the next CUDA-graph replay before the host checks the last one's done flag (default
        ``config.SSSP_FUSED_PIPELINED``).

    Raises
    ------
    ValueError
        ``nodes_per_thread`` not 1 or 4, or a negative ``chase``.
    """

    phases_per_graph = 96

    def __init__(self, dgraph, nodes_per_thread=None, chase=None, pipelined=None):
        super().__init__(dgraph)
        self.mod = load_module("sssp/bellman_ford/fused.cu")
        self.pipelined = config.SSSP_FUSED_PIPELINED if pipelined is None else bool(pipelined)
        self.chase = int(config.SSSP_FUSED_CHASE_DEPTH if chase is None else chase)
        if self.chase < 0:
            raise ValueError(f"chase must be >= 0, got {self.chase}")
        cp = self.cp
        n = self.n
        self.npt = config.SSSP_FUSED_NODES_PER_THREAD if nodes_per_thread is None else int(nodes_per_thread)
        if self.npt not in (1, 4):
            raise ValueError(f"nodes_per_thread must be 1 or 4, got {self.npt}")
        self.nq = (n + 3) // 4
        self.ca = cp.empty(4 * self.nq, dtype=cp.uint32)
        self.ua = cp.empty(4 * self.nq, dtype=cp.uint32)
        self.changed = cp.zeros(3, dtype=cp.uint32)
        self.pc = cp.zeros(2, dtype=cp.uint32)
        self.k_step = self.mod.get_function("fc_step" if self.npt == 4 else "fc_step1")
        items = self.nq if self.npt == 4 else n
        self.grid_f = (max(1, min((items + self.tpb - 1) // self.tpb, self.sms * 16)),)
        self.device_ts = self.npt == 1

    def launches(self):
        args = (i32(self.nq if self.npt == 4 else self.n), self.fo, self.hd, self.w, self.ca, self.ua, self.changed, self.flags, self.pc,
                self.stats, i32(STATS_CAP))
        extra = () if self.npt == 4 else (i32(self.chase), self.ts)
        return [(self.k_step, self.grid_f, (self.tpb,), lambda p: args + (i32(p & 1), i32(p % 3)) + extra, True)]

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
        phases, host, times = self.run_loop(self.launches(), self.n + 2, time_phases)
        d, p, ph, upd = self.finish(host, phases, self.ca[: self.n], want_pred)
        return d, p, {"phases": ph, "updated": upd, "times_us": times}




class AdaptiveFusedGPU(GPUSolver):
    """Adaptive thread creation (Adaptive Thread Creation paper, Alg. 4) on the fused conventional step with device-side
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
    dgraph : DeviceGraph
    switch : {"count", "time"}
        ``"count"``: phase p builds the queue (and phase p + 1 runs on it) when phase p - 1 processed
        fewer than ``frac * n`` nodes (the frontier counted on the device). ``"time"``: the paper's
        rule on phase times measured on the device with ``%globaltimer``: in the queue regime switch
        to all-node phases when the mean of the last two phase times exceeds ``up_us``; in the
        all-node regime switch to the queue when it drops below ``down_us``.
    frac : float, optional
        Count switch: frontier fraction (default ``config.SSSP_ADAPTIVE_FRONTIER_FRACTION`` when the
        calibration finds queue phases cheaper, else 0); 0 = always all-node (``fc_step1`` alone);
        1 = every phase on the queue.
    up_us, down_us : float, optional
        Time switch thresholds in microseconds (defaults ``config.SSSP_ADAPTIVE_UP_US`` /
        ``config.SSSP_ADAPTIVE_DOWN_US``; None = calibrated: ``up`` = ``config.SSSP_ADAPTIVE_TIME_UP_FACTOR`` x
        ``t_all_us``, ``down`` = 330/350 x ``up`` (the paper's ratio), or both 0 when queue phases are not
        cheaper). ``down_us = 0``: the queue regime is never entered (``fc_step1`` alone).
    pipelined : bool, optional
        Queue the next CUDA-graph replay before the host checks the last one's done flag (default
        ``config.SSSP_FUSED_PIPELINED``).

    Raises
    ------
    ValueError
        ``frac`` outside [0, 1], ``down_us > up_us``, a negative threshold or an unknown ``switch``.
    TypeError
        An option of the other switch.
    """

    phases_per_graph = 96

    device_ts = True

    def __init__(self, dgraph, switch="count", frac=None, up_us=None, down_us=None, pipelined=None):
        super().__init__(dgraph)
        self.mod = load_module("sssp/bellman_ford/fused.cu")
        self.pipelined = config.SSSP_FUSED_PIPELINED if pipelined is None else bool(pipelined)
        cp = self.cp
        n = self.n
        if switch not in ("count", "time"):
            raise ValueError(f"switch must be 'count' or 'time', got {switch!r}")
        adaptive_params({"frac": frac, "up_us": up_us, "down_us": down_us}, switch, n, 1.0, 0.5)  # option errors first
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
        self.grid_f = (max(1, min((n + self.tpb - 1) // self.tpb, self.sms * 16)),)
        self.thr = np.uint32(0)
        self.t_all_us = self.t_queue_us = None
        self.up_us = self.down_us = None
        self._plain = False
        self._fa_graph = None
        opts = {"frac": frac, "up_us": up_us, "down_us": down_us}
        need = (frac is None) if switch == "count" else (
            (config.SSSP_ADAPTIVE_UP_US if up_us is None else up_us) is None
            or (config.SSSP_ADAPTIVE_DOWN_US if down_us is None else down_us) is None)
        if need:
            self.t_all_us, self.t_queue_us = self.calibrate()
        self.params = adaptive_params(opts, switch, n, self.t_all_us, self.t_queue_us)
        self.frac, self.up_us, self.down_us = self.params["frac"], self.params["up_us"], self.params["down_us"]
        if switch == "count":
            self.thr = np.uint32(min(int(np.ceil(self.frac * n)), 2**32 - 1))
            self._plain = self.thr == 0
        else:
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
        return (i32(self.n), self.fo, self.hd, self.w, self.ca, self.ua, self.changed, self.flags, self.pc,
                self.stats, i32(STATS_CAP))

    def _fa_launches(self):
        base = self._base_args()
        tail = (self.q0, self.q1, self.qcnt, self.ast, self.sched, self.cfg, self.ts, self.tring, self.pmode)

        def args(p):
            return base + (i32(p & 1), i32(p % 3)) + tail

        return [(self.k_fa, self.grid_f, (self.tpb,), args, True)]

    def launches(self):
        if self._plain:  # no phase can use the queue: the all-node fused step itself
            base = self._base_args()
            return [(self.k_all, self.grid_f, (self.tpb,),
                     lambda p: base + (i32(p & 1), i32(p % 3), i32(0), self.ts), True)]
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
                    self.ast[0:1].fill(1)  # starts in the queue regime, as the paper starts with selection
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
        all 0 when the solver ran fc_step1 alone), ``times_us`` (per-phase times from the device clock
        when ``time_phases``), ``up_us``/``down_us`` (time switch), ``t_all_us``/``t_queue_us`` (the
        calibration's phase times, when it ran)."""
        self._reset(source, queue_regime=True, plain=self._plain)
        phases, host, times = self.run_loop(self.launches(), self.n + 2, time_phases)
        d, p, ph, upd = self.finish(host, phases, self.ca, want_pred)
        st = {"phases": ph, "updated": upd, "times_us": times, "t_all_us": self.t_all_us,
              "t_queue_us": self.t_queue_us}
        if self._plain:  # fc_step1 alone: every phase scans all nodes
            st["modes"] = np.zeros(min(ph, STATS_CAP), dtype=np.int8)
            st["queue_phases"] = 0
        else:
            modes = self.pmode[: min(ph, STATS_CAP)].get(stream=self.stream).astype(np.int8)
            st["modes"] = modes
            st["queue_phases"] = int(np.count_nonzero(modes == 2))
        if self.switch == "time":
            st["up_us"], st["down_us"] = self.up_us, self.down_us
        return d, p, st


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


# --------------------------------------------------------------------------------------------- registry
def conventional_gpu(dgraph, variant, opts):
    """Solver for ``algorithm="conventional"`` on the GPU (see :data:`options.CONVENTIONAL`)."""
    params = conventional_params(opts)
    if params["mode"] == "fused":
        solver = ConventionalFusedGPU(dgraph, nodes_per_thread=params["nodes_per_thread"], chase=params["chase"],
                                      pipelined=opts["pipelined"])

        def one(s, want_pred, phase_times):
            d, p, st = solver.run(s, want_pred, phase_times)
            return d, p, {"phases": st["phases"], "updated": st["updated"], "times_us": st["times_us"]}

        return GPURunner(solver, params, one)
    solvers = {}

    def one(s, want_pred, phase_times):
        if want_pred not in solvers:  # 64-bit keys (distance, predecessor) only when asked
            solvers[want_pred] = ConventionalGPU(dgraph, want_pred)
        d, p, ph = solvers[want_pred].run(s, mode=params["mode"])
        return d, p, {"phases": ph}

    return GPURunner(None, params, one)


def selection_gpu(dgraph, variant, opts):
    """Solver for ``algorithm="selection"`` on the GPU (Adaptive Thread Creation paper, Alg. 5-6)."""
    solver = SelectionGPU(dgraph)

    def one(s, want_pred, phase_times):
        d, p, st = solver.run(s, want_pred, phase_times)
        return d, p, {"phases": st["phases"], "updated": st["updated"], "times_us": st["times_us"]}

    return GPURunner(solver, {}, one)


def adaptive_gpu(dgraph, variant, opts):
    """Solver for ``algorithm="adaptive"`` on the GPU: variants ``count`` / ``time`` run the fused step
    with the switch on the device (:class:`AdaptiveFusedGPU`), ``time-host`` the paper's own loop
    (:class:`AdaptiveTimeGPU`)."""
    variant = config.SSSP_ADAPTIVE_VARIANT if variant is None else variant
    if variant == "time-host":
        if opts["frac"] is not None:
            raise TypeError("frac= is an option of the count switch (variant='count')")
        solver = AdaptiveTimeGPU(dgraph, up_us=opts["up_us"], down_us=opts["down_us"])
        params = {"switch": "time-host", "frac": None, "up_us": solver.up_us, "down_us": solver.down_us,
                  "t_all_us": solver.t_all_us, "t_queue_us": None}

        def one(s, want_pred, phase_times):
            d, p, st = solver.run(s, want_pred)
            modes = np.where(st["selection_phase"] == 1, KIND_QUEUE, KIND_SCAN).astype(np.int8)
            return d, p, {"phases": st["phases"], "updated": st["updated"], "times_us": st["times_us"],
                          "modes": modes, "queue_phases": int(np.count_nonzero(modes == KIND_QUEUE))}

        return GPURunner(solver, params, one)
    solver = AdaptiveFusedGPU(dgraph, switch=variant, frac=opts["frac"], up_us=opts["up_us"],
                              down_us=opts["down_us"], pipelined=opts["pipelined"])

    def one(s, want_pred, phase_times):
        d, p, st = solver.run(s, want_pred, phase_times)
        return d, p, {k: st[k] for k in ("phases", "updated", "times_us", "modes", "queue_phases")}

    return GPURunner(solver, solver.params, one)
