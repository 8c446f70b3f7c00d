"""RPHAST on the GPU (kernels in ``rphast.cu``): one-to-many distances from any number of sources to the
targets of a :class:`~gpuroute.ch.rphast.TargetSelection` (Delling, Goldberg, Werneck, "Faster Batched
Shortest Paths in Road Networks", ATMOS 2011). The CPU twin, with the same signature and the same results,
is :func:`gpuroute.ch.rphast.rphast_cpu`.

The selection is uploaded once (cached on it): the restricted CSR (32-bit) with
its depths merged into phases (``config.CH_RPHAST_MERGE_LEVELS``: m consecutive depths, or
0: the boundaries by the cost model of :func:`gpuroute.ch.phast.merge_phases`, as PHAST's downward pass, one
layout per pass-size class, powers of two);
:meth:`~gpuroute.ch.rphast.TargetSelection.merged`: fewer dependent steps for a few more arcs), the selected
core columns of the core distances, the targets' restricted ids. Each source's upward distances come from its
forward hub label on the device (once ``ContractionHierarchy.hub_labels()`` built them, 32-bit label
distances: one launch, nothing computed on the host) or from upward searches on the host (numba, uploaded as
entries). A pass of ``k`` sources is either one persistent kernel (``k <= config.CH_RPHAST_PERSISTENT_MAX_K``,
off by default until timed: fill, upward, core step, every phase and the target gather with a grid barrier
between them; a cooperative launch, so every block is resident) or a CUDA graph of one launch per phase
(captured once per pass size). Everything of a pass (uploads, launches, the result's copy) runs on the
selection's own non-blocking stream: it is ordered with nothing else, so nothing of a pass may go to CuPy's
current stream.
"""
from __future__ import annotations

import logging
import threading
import weakref

import numpy as np

from .. import config
from ..backend import kernels
from ..backend.flags import DINF, check_overflow
from ..graph.constants import INF
from .api import node_ids
from .phast import phase_cost
from .phast_gpu import balanced_passes, to_u32
from .rphast import label_rids, resolve_upward, upward_entries

__all__ = ["rphast_gpu", "device_selection", "DeviceSelection"]

_KERNEL = "ch/rphast.cu"
log = logging.getLogger(__name__)


class _PersistentFailed(RuntimeError):
    """The persistent pass did not launch (its kernel is switched off for this selection)."""


class _DeviceLabels:
    """Hub labels on the device for the upward pass: the rows, hubs and 32-bit distances (shared with a
    :class:`~gpuroute.ch.labels_gpu.GPUHubLabels`) and ``cstart`` int64 (n,), the first core hub of each
    forward label."""

    def __init__(self, lab, c, gpu_labels=None):
        import cupy as cp

        from .labels_gpu import GPUHubLabels

        gl = gpu_labels if gpu_labels is not None else GPUHubLabels(lab)
        self.gl = gl
        n = int(lab.node.shape[0]) - 1
        starts = np.asarray(lab.node[:, 0], dtype=np.int64)
        is_core = np.concatenate(([0], np.cumsum(np.asarray(lab.hub[:starts[-1]]) >= n - c, dtype=np.int64)))
        self.core_len = is_core[starts[1:]] - is_core[starts[:-1]]  # core hubs of each forward label
        self.cstart = cp.asarray(starts[1:] - self.core_len)
        self.node_lid = np.asarray(lab.node_lid, dtype=np.int64)


_LABELS = weakref.WeakKeyDictionary()  # HubLabels -> _DeviceLabels with its own upload (no gpu_labels given)


def _device_labels(lab, c, gpu_labels):
    """The labels' device arrays: kept on ``gpu_labels`` when given (freed with it), else per ``lab``."""
    if gpu_labels is not None:
        got = getattr(gpu_labels, "_rphast", None)
        if got is None or got[0] is not lab:
            gpu_labels._rphast = got = (lab, _DeviceLabels(lab, c, gpu_labels))
        return got[1]
    got = _LABELS.get(lab)
    if got is None:
        got = _LABELS[lab] = _DeviceLabels(lab, c)
    return got


class DeviceSelection:
    """A :class:`~gpuroute.ch.rphast.TargetSelection` on the GPU, with its passes (see the module doc).

    Parameters
    ----------
    sel : TargetSelection

    Raises
    ------
    OverflowError
        A weight or core distance of the selection that does not fit 32 bits.
    GPUUnavailableError
        Without a usable GPU.
    """

    def __init__(self, sel):
        import cupy as cp

        from ..backend import resolve_device

        resolve_device("gpu")
        self.cp = cp
        self.sel = sel
        self.R, self.c, self.t = sel.n_restricted, sel.c, int(sel.targets.size)
        self.cb = int(sel.core_sel.size)
        self.merge = int(config.CH_RPHAST_MERGE_LEVELS)
        # m = 0: phases by the cost model with this launcher's lanes, one layout per pass-size class (_use)
        self._cost = phase_cost(lanes_max_k=config.CH_RPHAST_LANES_MAX_K, max_lanes=config.CH_RPHAST_MAX_LANES)
        self._layouts = {}  # pass-size class -> (levels, fo_host, n_arcs, fo, tl, w)
        self._use(1)
        D = to_u32(sel.core_dist_sel, "a core distance") if self.c else np.zeros(1, dtype=np.uint32)
        self.csel = cp.asarray(sel.core_sel.astype(np.int32)) if self.cb else cp.zeros(1, dtype=np.int32)
        self.D = cp.asarray(np.ascontiguousarray(D).ravel())
        self.trid = cp.asarray(sel.target_rid.astype(np.int32)) if self.t else cp.zeros(1, dtype=np.int32)
        self.flags = cp.zeros(8, dtype=cp.int32)
        self.bar = cp.zeros(2, dtype=cp.uint32)
        self.tpb = int(config.CH_RPHAST_THREADS)
        if self.tpb % 32:
            raise ValueError(f"config.CH_RPHAST_THREADS must be a multiple of 32, got {self.tpb}")
        mod = kernels.load_module(_KERNEL)
        self.k = {name: mod.get_function(name) for name in (
            "rph_up_noncore_labels", "rph_up_noncore_entries", "rph_up_core_labels", "rph_up_core_entries",
            "rph_level", "rph_out", "rph_fill_rows")}
        self.k_pass = {}
        for name in ("rph_pass_labels", "rph_pass_entries"):
            fn, why = kernels.cooperative_function(_KERNEL, name)
            self.k_pass[name] = fn
            self.why_not_persistent = why
        self.sms = int(kernels.multiprocessors())
        self._lidr = None  # (labels, device lidr)
        self._graphs = {}  # (kind, k, labels) -> (graph, d, out, input buffers)
        self._lv_cache = {}  # k -> (level table on the device, levels)
        self._blocks = {}  # (kernel, k, ns, block cap) -> blocks of the persistent pass
        self.last_blocks = None  # the grid of the last persistent pass
        self._plans = {}  # k -> plan(k)
        self.lock = threading.RLock()
        cp.cuda.Device().synchronize()
        self.stream = cp.cuda.Stream(non_blocking=True)
        self.launches = 0

    # ------------------------------------------------------------------ plans
    def _use(self, k):
        """Point the sweep's arrays (``levels``, ``fo_host``, ``n_arcs``, ``fo``, ``tl``, ``w``) at the layout for passes
        of ``k`` sources: with ``config.CH_RPHAST_MERGE_LEVELS = 0`` the cost model's phases for ``k`` rounded up to a
        power of two (at most 1024; each uploaded once), else the one layout of m depths a phase. A pass size keeps
        its class, so every cache keyed by the pass size (plans, level tables, graphs) stays consistent."""
        cp = self.cp
        kp = min(1 << (int(k) - 1).bit_length(), 1024) if self.merge == 0 else 1
        got = self._layouts.get(kp)
        if got is None:
            lb, fo, tl, w = self.sel.merged(self.merge, kp, self._cost)
            if fo[-1] >= 2**31:
                raise OverflowError("the merged sweep has 2^31 arcs or more; lower config.CH_RPHAST_MERGE_LEVELS")
            w = to_u32(w, "a hierarchy arc weight")
            levels = [(int(a), int(b)) for a, b in zip(lb[:-1], lb[1:], strict=True)]
            got = self._layouts[kp] = (levels, fo, int(tl.size), cp.asarray(fo.astype(np.int32)),
                                       cp.asarray(tl.astype(np.int32)) if tl.size else cp.zeros(1, dtype=np.int32),
                                       cp.asarray(w) if w.size else cp.zeros(1, dtype=np.uint32))
            cp.cuda.Device().synchronize()  # uploaded before a pass on the selection's own stream reads them
        self.levels, self.fo_host, self.n_arcs, self.fo, self.tl, self.w = got

    def plan(self, k):
        """The levels of a pass of ``k`` sources: rows ``(lo, hi, lg)``, ``2**lg`` lanes per (node, source)
        item: for ``k < config.CH_RPHAST_LANES_MAX_K``, the power of two at least the level's mean in-degree
        (at most ``config.CH_RPHAST_MAX_LANES``), else 1."""
        most = min(32, max(1, int(config.CH_RPHAST_MAX_LANES)))
        key = (k, int(config.CH_RPHAST_LANES_MAX_K), most)
        if key in self._plans:
            return self._plans[key]
        rows = []
        for lo, hi in self.levels:
            lg = 0
            if k < int(config.CH_RPHAST_LANES_MAX_K) and hi > lo:
                mean = (int(self.fo_host[hi]) - int(self.fo_host[lo])) / (hi - lo)
                while (1 << lg) < mean and (2 << lg) <= most:
                    lg += 1
            rows.append((lo, hi, lg))
        self._plans[key] = rows
        return rows

    def persistent_blocks(self, k, kernel, ns=1):
        """Grid of the persistent pass: enough blocks for the widest phase, at most what is resident at once
        (``resident_blocks`` x multiprocessors) and ``config.CH_RPHAST_PERSISTENT_MAX_BLOCKS`` (if > 0)."""
        tpb = self.tpb
        widest = max([(hi - lo) * k << lg for lo, hi, lg in self.plan(k)] + [self.t * k, 1])
        core_chunks = k * -(-self.cb // tpb) * ns if self.cb else 0
        need = max(-(-widest // tpb), core_chunks, 1)
        cap = kernels.resident_blocks(kernel, tpb) * self.sms
        lim = int(config.CH_RPHAST_PERSISTENT_MAX_BLOCKS)
        if lim > 0:
            cap = min(cap, lim)
        if cap < 1:
            raise RuntimeError("the persistent RPHAST kernel fits no block on a multiprocessor")
        return max(1, min(need, cap))

    # ------------------------------------------------------------------ inputs
    def _labels_inputs(self, lab, gpu_labels, sources):
        with self.stream:  # uploads ordered before the passes that read them (on this non-blocking stream)
            dl = _device_labels(lab, self.c, gpu_labels)
            if self._lidr is None or self._lidr[0] is not lab:
                self._lidr = (lab, self.cp.asarray(label_rids(self.sel, lab)))
        slid = dl.node_lid[sources].astype(np.int32)
        return dl, self._lidr[1], slid

    @staticmethod
    def _slices(most):
        """``(es, ns)``: core entries per slice of the core step (``config.CH_RPHAST_CORE_SLICE``) and slices per
        source for at most ``most`` core entries a source."""
        es = max(1, int(config.CH_RPHAST_CORE_SLICE))
        return es, max(1, -(-int(most) // es))

    def _entries(self, h, sources, upward):
        """Host upward entries, per source non-core then core: ``(first int64 (2k+1,), erid int32, edist
        uint32)``."""
        offsets, e_rid, e_dist = upward_entries(h, self.sel, sources, upward)
        k = int(sources.size)
        src = np.repeat(np.arange(k, dtype=np.int64), np.diff(offsets))
        core = e_rid < self.c
        o = np.lexsort((core, src))
        first = np.empty(2 * k + 1, dtype=np.int64)
        first[0::2] = offsets
        first[1::2] = offsets[1:] - np.bincount(src[core], minlength=k)
        return first, e_rid[o].astype(np.int32), to_u32(e_dist[o], "an upward distance")

    # ------------------------------------------------------------------ launches
    def _args_up(self, kind, inputs):
        if kind == "labels":
            dl, lidr, slid = inputs
            gl = dl.gl
            return (gl.node, slid, dl.cstart, gl.hub, gl.dist, lidr)
        return inputs

    def _launch_pass(self, kind, k, inputs, d, out, es, ns):
        """One persistent kernel for the whole pass."""
        i32 = np.int32
        lv, n_levels = self._lv(k)
        name = "rph_pass_labels" if kind == "labels" else "rph_pass_entries"
        fn = self.k_pass[name]
        key = (name, k, ns, int(config.CH_RPHAST_PERSISTENT_MAX_BLOCKS), int(config.CH_RPHAST_MAX_LANES),
               int(config.CH_RPHAST_LANES_MAX_K))
        blocks = self._blocks.get(key)
        if blocks is None:
            blocks = self._blocks[key] = self.persistent_blocks(k, fn, ns)
        try:
            # on the pass's stream: CuPy launches on the current one (the legacy default stream unless set), which a
            # non-blocking stream is not ordered with: the flags' reset, the inputs' uploads, the result's copy and
            # the CUDA events around the pass (benchmarks/rphast.py) would all race with the kernel
            with self.stream:
                fn((blocks,), (self.tpb,), (i32(self.R), i32(k), i32(n_levels), lv, self.fo, self.tl, self.w,
                                            i32(self.cb), self.csel, self.D, i32(es), i32(ns), i32(self.t), self.trid,
                                            *self._args_up(kind, inputs), d, out, self.flags, self.bar))
        except Exception as e:  # e.g. the cooperative grid does not fit: passes as captured graphs from now on
            self.k_pass[name] = None
            self.why_not_persistent = f"{type(e).__name__}: {e}"
            log.warning("RPHAST: the persistent pass failed to launch (%s); running captured graphs",
                        self.why_not_persistent)
            raise _PersistentFailed from e
        self.launches = 1
        self.last_blocks = blocks

    def _launch_phases(self, kind, k, inputs, d, out, es, ns):
        """One launch per phase and level (captured by the caller)."""
        i32 = np.int32
        tpb = self.tpb
        n_launch = 0
        m = self.R * k
        self.k["rph_fill_rows"]((max(1, min(-(-m // tpb), 65535)),), (tpb,), (np.uint64(m), d))
        up = self._args_up(kind, inputs)
        nc_name = "rph_up_noncore_labels" if kind == "labels" else "rph_up_noncore_entries"
        self.k[nc_name]((k,), (128,), (i32(k), *up, d))
        n_launch += 2
        if self.cb:
            units = k * -(-self.cb // tpb) * ns
            name = "rph_up_core_labels" if kind == "labels" else "rph_up_core_entries"
            self.k[name]((units,), (tpb,), (i32(k), i32(self.cb), self.csel, self.D, i32(es), i32(ns), *up, d,
                                            self.flags))
            n_launch += 1
        for lo, hi, lg in self.plan(k):
            threads = (hi - lo) * k << lg
            self.k["rph_level"]((-(-threads // tpb),), (tpb,), (i32(lo), i32(hi), i32(k), i32(lg), self.fo, self.tl,
                                                                self.w, d, self.flags))
            n_launch += 1
        if self.t:
            self.k["rph_out"]((-(-(self.t * k) // tpb),), (tpb,), (i32(self.t), i32(k), self.trid, d, out))
            n_launch += 1
        self.launches = n_launch

    def persistent(self, k, kind):
        """Whether a pass of ``k`` sources runs as one persistent kernel."""
        name = "rph_pass_labels" if kind == "labels" else "rph_pass_entries"
        return self.k_pass[name] is not None and k <= int(config.CH_RPHAST_PERSISTENT_MAX_K)

    def _graph(self, kind, k, inputs, es, ns):
        """The captured pass of ``k`` sources: ``(graph, d, out, buffers)``. Its input buffers (the sources'
        label ids; or entry arrays with room for at least this call's entries) are set before each replay;
        one pass size is kept at a time (its rows are freed with it)."""
        cp = self.cp
        key = (kind, k, id(inputs[0]) if kind == "labels" else None, es, ns)
        got = self._graphs.get(key)
        if got is not None and (kind == "labels" or got[3][1].size >= inputs[1].size):
            return got
        self._graphs.clear()
        with self.stream:
            d = cp.empty(self.R * k, dtype=cp.uint32)
            out = cp.empty(max(self.t * k, 1), dtype=cp.uint32)
            if kind == "labels":
                bufs = (inputs[0], inputs[1], cp.zeros(k, dtype=cp.int32))
            else:
                cap = max(int(inputs[1].size) * 2, 1024)
                bufs = (cp.zeros(2 * k + 1, dtype=cp.int64), cp.zeros(cap, dtype=cp.int32),
                        cp.zeros(cap, dtype=cp.uint32))
        s = self.stream
        with s:
            s.begin_capture()
            self._launch_phases(kind, k, bufs, d, out, es, ns)
            graph = s.end_capture()
        self._graphs[key] = (graph, d, out, bufs)
        return self._graphs[key]

    def _lv(self, k):
        """The level table of a persistent pass of ``k`` sources on the device, (L, 3) int32 (cached)."""
        key = (k, int(config.CH_RPHAST_LANES_MAX_K), int(config.CH_RPHAST_MAX_LANES))
        got = self._lv_cache.get(key)
        if got is None:
            rows = np.asarray(self.plan(k), dtype=np.int32).reshape(-1, 3)
            with self.stream:
                dev = self.cp.asarray(rows.ravel()) if rows.size else self.cp.zeros(3, dtype=self.cp.int32)
            got = self._lv_cache[key] = (dev, int(rows.shape[0]))
        return got

    def prepare(self, h, sources, upward, gpu_labels, out_rows):
        """One pass over ``sources`` (at most a pass's worth, validated ids): its inputs computed and put on
        the device; returns a callable that enqueues the pass on :attr:`stream`, writing ``out_rows`` (k, t)
        uint32 (DINF where unreachable). The callable may be called again (same sources, same result: the
        benchmark times it between CUDA events)."""
        cp = self.cp
        upward, lab = resolve_upward(h, upward)
        kind = "labels" if upward == "labels" and lab.dist.dtype == np.int32 else "entries"
        kk = int(sources.size)
        self._use(kk)
        if kind == "labels":
            inputs = self._labels_inputs(lab, gpu_labels, sources)
        else:
            inputs = self._entries(h, sources, "labels" if upward == "labels" else "search")
        self.kind = kind
        if kind == "labels":
            most = int(inputs[0].core_len[np.asarray(inputs[2], dtype=np.int64)].max())
        else:
            most = int((inputs[0][2::2] - inputs[0][1::2]).max())
        es, ns = self._slices(most)
        if self.persistent(kk, kind):
            with self.stream:
                if kind == "labels":
                    dev = (inputs[0], inputs[1], cp.asarray(inputs[2]))
                else:
                    dev = tuple(cp.asarray(a) for a in inputs)
                d = cp.empty(self.R * kk, dtype=cp.uint32)
            return lambda: self._launch_pass(kind, kk, dev, d, out_rows, es, ns)
        graph, d, out, bufs = self._graph(kind, kk, inputs, es, ns)
        with self.stream:
            if kind == "labels":
                bufs[2].set(inputs[2], stream=self.stream)
            else:
                m = int(inputs[1].size)
                bufs[0].set(inputs[0], stream=self.stream)
                bufs[1][:m].set(inputs[1], stream=self.stream)
                bufs[2][:m].set(inputs[2], stream=self.stream)

        def launch():
            graph.launch(self.stream)
            with self.stream:
                out_rows[...] = out[:kk * self.t].reshape(kk, self.t)
        return launch

    def run(self, h, sources, upward="auto", gpu_labels=None, to_host=True):
        """Distances (k, t) from ``sources`` (validated node ids, int64) to the selection's targets: int64
        with INF, NumPy when ``to_host``, else CuPy. One caller at a time."""
        cp = self.cp
        resolve_upward(h, upward)  # an unknown value or missing labels raise before anything runs
        k_all = int(sources.size)
        with self.lock:
            if k_all == 0 or self.t == 0:
                res = np.full((k_all, self.t), INF, dtype=np.int64)
                return res if to_host else cp.asarray(res)
            per = balanced_passes(k_all, int(config.CH_RPHAST_BATCH_ITEMS) // max(self.R, 1))
            with self.stream:
                out32 = cp.empty((k_all, self.t), dtype=cp.uint32)
                self.flags.fill(0)
            for lo in range(0, k_all, per):
                args = (h, sources[lo:lo + per], upward, gpu_labels, out32[lo:lo + per])
                try:
                    self.prepare(*args)()
                except _PersistentFailed:
                    self.prepare(*args)()  # the persistent kernel is off now: the captured graph
                self.stream.synchronize()  # the pass's inputs and rows are reused or freed next
            host = self.flags.get(stream=self.stream)
            self.stream.synchronize()
            check_overflow(host)
            if to_host:
                x = out32.get(stream=self.stream)
                self.stream.synchronize()
                return np.where(x == DINF, INF, x.astype(np.int64))
            from ..backend.predecessors import widen

            res = widen(out32, self.stream)
            self.stream.synchronize()
            return res


def device_selection(sel):
    """The :class:`DeviceSelection` of ``sel`` (uploaded on first use, kept on ``sel``)."""
    got = sel._device.get("gpu")
    if got is None:
        got = sel._device["gpu"] = DeviceSelection(sel)
    return got


def rphast_gpu(h, selection, sources, *, upward="auto", gpu_labels=None, to_host=None):
    """One-to-many distances from each source to the selection's targets by RPHAST on the GPU (see the
    module doc); the twin of :func:`gpuroute.ch.rphast.rphast_cpu`, equal to it.

    Parameters
    ----------
    h : Hierarchy
    selection : TargetSelection
        Built from ``h``.
    sources : array_like of int, shape (k,)
        NumPy or CuPy.
    upward : {"auto", "search", "labels"}
        ``"labels"`` (and ``"auto"`` once the labels exist) reads the forward labels on the device when
        their distances are 32-bit; otherwise the entries come from the host.
    gpu_labels : GPUHubLabels, optional
        The labels already on the device (``ContractionHierarchy._gpu_labels()``), to avoid a second upload.
    to_host : bool, optional
        NumPy result; default: NumPy for NumPy sources, CuPy for CuPy sources.

    Returns
    -------
    ndarray int64, shape (k, t)
        ``INF`` where unreachable.

    Raises
    ------
    GPUUnavailableError
        Without a usable GPU.
    IndexError
        A source outside ``[0, n)``.
    ValueError
        A selection of another hierarchy; an unknown ``upward``; ``"labels"`` before the labels exist.
    OverflowError
        A weight, core distance or distance that does not fit the GPU's 32 bits.
    """
    from ..backend import is_cupy_array, resolve_device

    resolve_device("gpu")
    selection.check(h)
    want_cupy = is_cupy_array(sources)
    s, _ = node_ids(h.n_nodes, sources, "sources")
    return device_selection(selection).run(h, s, upward, gpu_labels, to_host=(not want_cupy) if to_host is None
                                           else bool(to_host))
