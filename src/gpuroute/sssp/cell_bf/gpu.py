"""GPU launcher (CuPy) of cell-local Bellman-Ford (``cell_bf.cu``; method and proof in its header); the
numba twin is ``cpu.py``, the cells come from :mod:`gpuroute.partition.cells`."""
from __future__ import annotations

import logging

import numpy as np

from ... import config
from ...backend.flags import FLAG_OVERFLOW, STATS_CAP, check_overflow
from ...backend.kernels import cooperative_function, load_module, resident_blocks
from ...backend.predecessors import canonical_predecessors
from ...backend.solver import GPUSolver, i32
from ...partition.cells import layout
from ..common import GPURunner
from .options import cell_params

log = logging.getLogger(__name__)

#: Threads an SM holds (sm_80/sm_90).
THREADS_PER_SM = 2048


def in_slots(lay, max_in):
    """Pack the internal in-arcs of every node into ``max_in`` register slots, slot-major.

    Returns ``(pu, pw, ofo, otl, ow)``: ``pu`` uint16 (max_in * n,) tail inside the cell, ``pw`` int32
    (max_in * n,) weight, unused slots ``(the node itself, 0)``; in-arcs beyond ``max_in`` as a CSR
    ``ofo`` int32 (n + 1,), ``otl`` uint16, ``ow`` int32.
    """
    n = lay.rank.size
    S = lay.cell_size
    deg = np.diff(lay.rfo)
    v = np.repeat(np.arange(n, dtype=np.int64), deg)
    k = np.arange(lay.rtl.size, dtype=np.int64) - lay.rfo[v]
    pu = np.tile((np.arange(n, dtype=np.int64) % S).astype(np.uint16), max_in).reshape(max_in, n)
    pw = np.zeros((max_in, n), dtype=np.int32)
    sel = k < max_in
    pu[k[sel], v[sel]] = lay.rtl[sel]
    pw[k[sel], v[sel]] = lay.rw[sel]
    ofo = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.bincount(v[~sel], minlength=n), out=ofo[1:])
    return pu.ravel(), pw.ravel(), ofo, lay.rtl[~sel].copy(), lay.rw[~sel].copy()


class CellBFGPU(GPUSolver):
    """Cell-local Bellman-Ford on one (graph, weight), reusable across sources.

    One thread block of ``threads`` threads per cell of ``nodes_per_thread * threads`` nodes; one kernel
    per round, replayed as a CUDA graph with device-side termination.

    Parameters
    ----------
    dgraph : DeviceGraph
    threads : int, optional
        Threads per block (default ``config.CELL_THREADS``), a multiple of 32, at most 1024.
    nodes_per_thread : int, optional
        1 .. 16; default ``config.CELL_NODES_PER_THREAD``, or when that is None the smallest (up to 4)
        for which every cell's block is resident at once.
    order : {"grow", "hilbert"}, optional
        How nodes are grouped into cells (:func:`gpuroute.partition.cells.node_order`).
    reps : int, optional
        Times a block may go over its cell again within one round when another block lowered one of its
        nodes meanwhile (default ``config.CELL_REPS``; 1 = once per round).
    max_in : int, optional
        In-arc slots per node a thread keeps in registers (default ``config.CELL_MAX_IN``); more in-arcs
        are read from shared memory.
    rounds_per_graph : int, optional
        Rounds captured in one CUDA graph (a multiple of 6; default 48).
    loop : {"async", "rounds"}, optional
        ``"rounds"``: one kernel per round (``cb_round``), CUDA-graph replays, device-side termination.
        ``"async"``: one cooperative launch for the whole search (``cb_persistent``): a cell is relaxed
        again as soon as another block dirties it, no rounds. Default ``config.CELL_LOOP``. Where the
        device cannot launch the persistent grid, or its activation guard trips, the search runs (again)
        in rounds.
    pipelined : bool, optional
        Queue the next graph replay before checking the last one's flags (default False: measured no
        faster on NY and BAY, where a replay of no-op rounds costs about what the host check does).

    Raises
    ------
    ValueError
        For out-of-range sizes, or cells whose in-arcs beyond the register slots overflow 48 KiB of
        shared memory.
    """

    phases_per_graph = 48  # a multiple of 6: the round parity alternates mod 2, changed[] rotates mod 3

    def __init__(self, dgraph, threads=None, nodes_per_thread=None, order=None, reps=None, max_in=None,
                 rounds_per_graph=None, pipelined=None, loop=None):
        if rounds_per_graph is not None:
            if rounds_per_graph < 6 or rounds_per_graph % 6:
                raise ValueError(f"rounds_per_graph must be a positive multiple of 6, got {rounds_per_graph}")
            self.phases_per_graph = int(rounds_per_graph)
        if pipelined is not None:
            self.pipelined = bool(pipelined)
        super().__init__(dgraph)
        cp = self.cp
        sms = self.sms

        def resident_npt(threads):  # smallest cell size for which all cells are resident at once
            per = max(1, THREADS_PER_SM // threads)
            npt = 1
            while npt < 4 and -(-self.n // (npt * threads)) > sms * per:
                npt += 1
            return npt

        params = cell_params({"threads": threads, "nodes_per_thread": nodes_per_thread, "order": order},
                             self.n, resident_npt)
        self.threads, self.npt, self.cell_size = params["threads"], params["nodes_per_thread"], params["cell_size"]
        self.order = params["order"]
        per_sm = max(1, THREADS_PER_SM // self.threads)
        self.reps = int(config.CELL_REPS if reps is None else reps)
        self.max_in = int(config.CELL_MAX_IN if max_in is None else max_in)
        if self.reps < 1 or not 1 <= self.max_in <= 16:
            raise ValueError(f"reps must be >= 1 and max_in in [1, 16], got {self.reps}, {self.max_in}")
        lay = layout(dgraph.graph, dgraph.weight_name, self.cell_size, order)
        self.layout = lay
        self.n_cells = lay.n_cells

        def upload():
            slots = in_slots(lay, self.max_in)
            ofo = slots[2]
            starts = np.minimum(np.arange(self.n_cells + 1, dtype=np.int64) * self.cell_size, self.n)
            max_over = int(np.diff(ofo[starts]).max()) if self.n_cells else 0
            arrays = slots + (lay.xfo, lay.xhd, lay.xw, lay.rank.astype(np.int32))
            return tuple(cp.asarray(x) for x in arrays), max_over

        self.dev, max_over = dgraph.extra(("cells", self.cell_size, order, self.max_in), upload)
        self.smem = 4 * self.cell_size + 6 * max_over + 4
        if self.smem > 48 * 1024:
            raise ValueError(f"cells of {self.cell_size} nodes need {self.smem} bytes of shared memory: raise max_in "
                             "or use smaller cells")
        minb = int(min(per_sm, max(1, -(-self.n_cells // sms))))
        opts = (f"-DCB_NPT={self.npt}", f"-DCB_MAXIN={self.max_in}", f"-DCB_T={self.threads}", f"-DCB_MINB={minb}")
        mod = load_module("sssp/cell_bf/cell_bf.cu", opts)
        self.loop = config.CELL_LOOP if loop is None else loop
        if self.loop not in ("async", "rounds"):
            raise ValueError(f"loop must be 'async' or 'rounds', got {self.loop!r}")
        self.k_persist = None
        if self.loop == "async":
            self._setup_async(sms, per_sm, opts)
        self.k_round = mod.get_function("cb_round")
        self.k_init = mod.get_function("cb_init")
        self.k_output = mod.get_function("cb_output")
        n = self.n
        self.dist = cp.empty(max(n, 1), dtype=cp.uint32)
        self.lastd = cp.empty(max(n, 1), dtype=cp.uint32)
        self.dirty = cp.zeros(max(self.n_cells, 1), dtype=cp.uint32)
        self.changed = cp.zeros(3, dtype=cp.uint32)
        self.pc = cp.zeros(2, dtype=cp.uint32)
        self.prof = None  # set to a uint64 array of 8 * STATS_CAP to profile rounds (see cells.cu)

    def _setup_async(self, sms, per_sm, opts):
        """Compile the persistent kernel and size its grid: every block must be resident (cooperative
        launch), so the grid is min(n_cells, blocks the device holds at once); each block then owns
        ceil(n_cells / grid) cells."""
        cp = self.cp
        k, why = cooperative_function("sssp/cell_bf/cell_bf.cu", "cb_persistent", opts)
        if k is None:  # no cooperative launch through this CuPy/driver: rounds
            self.async_error = why
            self.loop = "rounds"
            return
        per = min(per_sm, resident_blocks(k, self.threads, self.smem))
        if per == 0:
            self.loop = "rounds"
            return
        self.k_persist = k
        cap = per * sms if config.CELL_ASYNC_MAX_BLOCKS is None else min(per * sms, int(config.CELL_ASYNC_MAX_BLOCKS))
        self.grid_async = int(max(1, min(self.n_cells, cap)))
        self.cells_per_block = -(-self.n_cells // self.grid_async)
        self.work = cp.zeros(1, dtype=cp.uint32)
        self.counters = cp.zeros(4, dtype=cp.uint64)

    def _run_async(self, source_new):
        """One persistent launch; returns ``(activations, host flags)``, or None when the launch or the
        activation guard failed (the caller then runs in rounds)."""
        pu, pw, ofo, otl, ow, xfo, xhd, xw, _ = self.dev
        n = self.n
        max_acts = np.uint64((n + 1) * self.cells_per_block)
        self._init(source_new)
        with self.stream:
            self.work.fill(1)
            self.counters.fill(0)
            try:
                self.k_persist((self.grid_async,), (self.threads,),
                               (i32(n), i32(self.n_cells), i32(self.cell_size), pu, pw, ofo, otl, ow, xfo, xhd, xw,
                                self.dist, self.lastd, self.dirty, self.flags, self.work, self.counters, max_acts),
                               shared_mem=self.smem)
            except Exception as e:  # e.g. the grid does not fit (cooperative launch too large): rounds from now on
                self.async_error = str(e)
                self.loop = "rounds"
                return None
            host = self.flags.get(stream=self.stream)
            cnt = self.counters.get(stream=self.stream)
        self.stream.synchronize()
        if host[FLAG_OVERFLOW] == 2:
            log.warning("cell-bf: the asynchronous kernel's activation guard tripped; running in rounds")
            return None
        self.last_counters = cnt
        return int(cnt[0]), host

    def _init(self, source_new):
        """Start a search from ``source_new`` (renumbered id): cb_init on the solver's stream."""
        total = max(self.n, self.n_cells, 8)
        with self.stream:
            self.k_init(((total + 255) // 256,), (256,),
                        (i32(self.n), i32(self.n_cells), i32(self.cell_size), self.dist, self.lastd, self.dirty,
                         self.flags, self.changed, self.pc, i32(source_new)))

    def launches(self):
        pu, pw, ofo, otl, ow, xfo, xhd, xw, _ = self.dev
        args = (i32(self.n), i32(self.cell_size), pu, pw, ofo, otl, ow, xfo, xhd, xw, self.dist, self.lastd,
                self.dirty, self.flags, self.stats, i32(STATS_CAP), i32(self.reps), self.changed, self.pc)
        prof = (self.prof if self.prof is not None else np.uint64(0),)
        smem = self.smem

        def round_kernel(grid, block, a):
            self.k_round(grid, block, a, shared_mem=smem)

        return [(round_kernel, (self.n_cells,), (self.threads,),
                 lambda p: args + (i32(p & 1), i32(p % 3)) + prof, True)]

    def run(self, source, want_pred=False, time_phases=False, dtype="int64"):
        """Distances (and canonical predecessors) from ``source``.

        Returns ``(dist, pred, stats)``: CuPy int64 (n,) with ``INF`` (``dtype="uint32"``: the 32-bit
        distances with ``DINF``), int32 (n,) or None, and a dict
        with ``phases`` (rounds; with ``loop="async"`` the number of cell activations), ``updated``
        (nodes written back per round; async: one total), ``times_us`` (``time_phases`` runs in rounds),
        ``loop`` (the loop that ran).

        Raises
        ------
        OverflowError
            If a finite distance would reach 2^31 - 1 (this kernel's saturating 32-bit arithmetic).
        """
        n = self.n
        rank_dev = self.dev[-1]
        source_new = int(self.layout.rank[source])
        res = None
        if self.loop == "async" and not time_phases:
            res = self._run_async(source_new)
        asynchronous = res is not None
        if asynchronous:
            phases, host = res
            times = None
        else:
            with self.stream:
                self.stats.fill(0)
            self._init(source_new)
            phases, host, times = self.run_loop(self.launches(), n + 2, time_phases)
        check_overflow(host, "2^31 - 2 (cell-bf's in-block arithmetic; other GPU algorithms reach 2^32 - 2)")
        cp = self.cp
        pred = None
        with self.stream:  # back to the caller's node order: int64 with INF and/or the 32-bit distances
            wide = dtype != "uint32"
            dist = cp.empty(n, dtype=cp.int64) if wide else None
            d32 = cp.empty(n, dtype=cp.uint32) if (want_pred or not wide) else None
            self.k_output(((n + 255) // 256,), (256,),
                          (i32(n), rank_dev, self.dist, dist if wide else np.uint64(0),
                           d32 if d32 is not None else np.uint64(0)))
            if not wide:
                dist = d32
            if want_pred:
                pred = canonical_predecessors(self.dg, d32, self.stream)
            if asynchronous:  # no rounds: all write-backs in one entry
                updated = self.last_counters[1:2].astype(np.int64)
            else:
                updated = self.stats[: min(phases, STATS_CAP)].get(stream=self.stream).astype(np.int64)
        self.stream.synchronize()
        return dist, pred, {"phases": phases, "updated": updated, "times_us": times, "cell_size": self.cell_size,
                            "n_cells": self.n_cells, "loop": "async" if asynchronous else "rounds"}


def cell_bf_gpu(dgraph, variant, opts):
    """The registry's GPU entry of ``cell-bf``."""
    solver = CellBFGPU(dgraph, threads=opts["threads"], nodes_per_thread=opts["nodes_per_thread"],
                       order=opts["order"], reps=opts["reps"], max_in=opts["max_in"],
                       rounds_per_graph=opts["rounds_per_graph"], pipelined=opts["pipelined"], loop=opts["loop"])
    params = {"cell_size": solver.cell_size, "threads": solver.threads, "nodes_per_thread": solver.npt,
              "order": solver.order, "n_cells": solver.n_cells, "loop": solver.loop}

    def one(s, want_pred, phase_times, dtype="int64"):
        d, p, st = solver.run(s, want_pred, phase_times, dtype)
        params["loop"] = st["loop"]  # the loop that ran (async falls back to rounds where it cannot run)
        return d, p, {"phases": st["phases"], "updated": st["updated"], "times_us": st["times_us"]}

    return GPURunner(solver, params, one, takes_dtype=True)
