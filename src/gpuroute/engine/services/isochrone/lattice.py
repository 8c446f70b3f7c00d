"""The isochrone lattice and its fields: the reachable pieces of road sampled every cell and marked, the
distance field of each contour (CPU numba twins and the GPU kernels of ``isochrone.cu``, equal bit for bit),
steps 2 and 3 of :mod:`gpuroute.engine.services.isochrone`.
"""
from __future__ import annotations

import math
import os
import threading

import numpy as np
from numba import njit

from .... import config
from .search import search_cpu, search_turns

#: Field code of a lattice point beyond reach of every mark.
FAR = 255
#: Most cells of the band's half-width (``reach / cell`` stays below 14, so codes fit a byte).
_MAX_RATIO = 12.0
_DEG = math.pi / 180.0


# ----------------------------------------------------------------------------------- lattice
class Lattice:
    """The lattice of one request: square cells of ``cell`` metres, lattice point ``(x, y)`` (column,
    row of the window) at ``((i0 + x + 0.5) * cell, (j0 + y + 0.5) * cell)`` metres in the origin's
    equirectangular frame.

    Attributes
    ----------
    cell, r, reach, level : float
        Cell size, band half-width, reach of the field, traced level (metres).
    m : int
        Lattice offsets within reach per axis.
    i0, j0, W, H : int
        Window origin (cells) and size.
    windows : ndarray int64, shape (K, 4)
        Per contour ``(x0, y0, x1, y1)``: the part of the window its marks and band can touch.
    code_of : ndarray uint8, shape (2 m^2 + 1,)
        Code of a squared lattice distance (itself, or ``FAR`` beyond reach).
    val : ndarray float64, shape (256,)
        Field value (metres) of a code (``2 * reach`` for ``FAR``).
    kin : int
        Largest code below the level (inside: ``code <= kin``).
    nc : int
        Codes the tracer tells apart (``FAR`` reads as ``nc - 1``).
    tt : ndarray float64, shape (nc * nc,)
        Where the level crosses a lattice edge whose ends have codes ``a`` and ``b``: ``tt[a * nc + b]``
        of the way from ``a``.
    """

    __slots__ = ("cell", "r", "reach", "level", "m", "i0", "j0", "W", "H", "windows", "code_of", "val", "kin", "nc",
                 "tt")


def lattice(ext):
    """The lattice of a request from the pieces' extents.

    Parameters
    ----------
    ext : ndarray float64, shape (K, 4)
        Per contour ``(xmin, ymin, xmax, ymax)`` of its pieces' end points (metres; ``+inf, -inf`` when
        it has none), largest contour first.

    Returns
    -------
    Lattice
    """
    r = float(config.SERVE_ISOCHRONE_BUFFER_M)
    cell = float(config.SERVE_ISOCHRONE_CELL_M or 0.5 * r)
    cell = max(cell, r / _MAX_RATIO)
    big = ext[0]
    if config.SERVE_ISOCHRONE_MAX_CELLS and np.isfinite(big).all():
        w = float(big[2] - big[0]) + 2.0 * r + 8.0 * cell
        h = float(big[3] - big[1]) + 2.0 * r + 8.0 * cell
        cell = max(cell, math.sqrt(w * h / float(config.SERVE_ISOCHRONE_MAX_CELLS)))
        r = max(r, cell)
    reach = r + 1.5 * cell
    m = int(reach // cell)
    lat = Lattice()
    lat.cell, lat.r, lat.reach, lat.m = cell, r, reach, m
    lat.level = r + 1e-3 * cell
    d2 = np.arange(2 * m * m + 1)
    ok = np.sqrt(d2) * cell <= reach
    lat.code_of = np.where(ok, d2, FAR).astype(np.uint8)
    val = np.full(256, 2.0 * reach)
    val[:d2.size] = np.where(ok, np.sqrt(d2) * cell, 2.0 * reach)
    lat.val = val
    lat.kin = int(np.flatnonzero(val < lat.level).max())
    # the crossing's fraction along a lattice edge from its end codes (codes above nc - 2 read as nc - 1)
    nc = d2.size + 1
    z = np.append(val[:d2.size], 2.0 * reach)
    with np.errstate(divide="ignore", invalid="ignore"):
        tt = (lat.level - z[:, None]) / (z[None, :] - z[:, None])
    lat.nc, lat.tt = nc, np.ascontiguousarray(np.nan_to_num(tt, nan=0.0, posinf=0.0, neginf=0.0).ravel())
    margin = m + 2
    fin = np.isfinite(ext).all(axis=1)
    if not fin.any():
        lat.i0 = lat.j0 = 0
        lat.W = lat.H = 1
        lat.windows = np.zeros((ext.shape[0], 4), dtype=np.int64)
        return lat
    lo = np.floor(ext[fin, :2].min(axis=0) / cell).astype(np.int64) - margin
    hi = np.floor(ext[fin, 2:].max(axis=0) / cell).astype(np.int64) + margin + 1
    lat.i0, lat.j0 = int(lo[0]), int(lo[1])
    lat.W, lat.H = int(hi[0] - lo[0]), int(hi[1] - lo[1])
    win = np.zeros((ext.shape[0], 4), dtype=np.int64)
    for q in np.flatnonzero(fin):
        a = np.floor(ext[q, :2] / cell).astype(np.int64) - margin - lo
        b = np.floor(ext[q, 2:] / cell).astype(np.int64) + margin + 1 - lo
        win[q] = [max(a[0], 0), max(a[1], 0), min(b[0], lat.W), min(b[1], lat.H)]
    lat.windows = win
    return lat


# ----------------------------------------------------------------------------------- scratch
class _Scratch(threading.local):
    """Per-thread grow-only buffers (fresh pages cost more than the work on them)."""

    def __init__(self):
        self.bufs = {}

    def get(self, name, size, dtype):
        a = self.bufs.get(name)
        if a is None or a.size < size or a.dtype != dtype:
            a = np.empty(max(size, 1024), dtype=dtype)
            self.bufs[name] = a
        return a[:size]


lattice_scratch = _Scratch()
_POOL = []


def thread_pool():
    """The worker threads of the isochrone checks and of the CPU lattice's parts (created on first use)."""
    if not _POOL:
        with BUILD_LOCK:
            if not _POOL:
                from concurrent.futures import ThreadPoolExecutor

                workers = max(int(config.SERVE_ISOCHRONE_CHECK_THREADS), int(config.SERVE_ISOCHRONE_LATTICE_THREADS) - 1, 1)
                _POOL.append(ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gpuroute-isochrone"))
    return _POOL[0]
#: Held while a GPU drawer is built (one per engine and metric).
BUILD_LOCK = threading.Lock()


def _forget_pool():
    """In a forked child (a served worker): the parent's worker threads do not exist there, and its pool
    would take jobs and never run them; the child's first :func:`thread_pool` starts its own."""
    _POOL.clear()


os.register_at_fork(after_in_child=_forget_pool)


def scratch(name, shape, dtype):
    """A per-thread buffer of ``shape`` (contents undefined)."""
    size = int(np.prod(shape))
    return lattice_scratch.get(name, size, np.dtype(dtype)).reshape(shape)


# ----------------------------------------------------------------------------------- pieces
@njit(cache=True, inline="always")
def _local(lon, lat, lon0, lat0, kx, ky):
    """East/north metres of a point in the frame of ``(lon0, lat0)`` (as :func:`gpuroute.geo.local_xy`)."""
    t = lon - lon0 + 180.0
    if 0.0 <= t < 360.0:
        md = t  # what fmod returns there, exactly
    else:
        md = np.fmod(t, 360.0)
        if md < 0.0:
            md += 360.0
    return (md - 180.0) * kx, (lat - lat0) * ky


@njit(cache=True, inline="always")
def _reach(lo, budget, wa):
    """How far along an arc of cost ``wa`` a piece from fraction ``lo`` gets: ``min(1, lo + budget / c)``."""
    if wa > 0.0:
        return min(1.0, lo + max(budget, 0.0) * (1.0 / wa))
    return 1.0


@njit(cache=True, inline="always")
def _piece(tx, ty, hx, hy, lo, budget, wa):
    """End points of the reachable piece of an arc: from fraction ``lo`` to ``min(1, lo + budget / c)``."""
    hi = _reach(lo, budget, wa)
    dx = hx - tx
    dy = hy - ty
    return tx + lo * dx, ty + lo * dy, tx + hi * dx, ty + hi * dy


@njit(cache=True, inline="always")
def _sample_count(x0, y0, x1, y1, cell):
    """Samples of a piece every cell (both ends included) and the step (cells)."""
    p0x = x0 / cell
    p0y = y0 / cell
    sx = x1 / cell - p0x
    sy = y1 / cell - p0y
    n = int(math.ceil(math.sqrt(sx * sx + sy * sy))) + 1
    den = float(max(n - 1, 1))
    return p0x, p0y, sx / den, sy / den, n


@njit(cache=True, nogil=True)
def _pieces(mode, nodes, dist, first_out, head, lon, lat, w, o_arc, o_frac, o_tail, o_head, cus, lon0, lat0, kx,
            ky, ext, marked, cell, i0, j0, tail, by_arc, i_lo=0, i_hi=-1):
    """Visit every reachable piece of every contour: ``mode`` 0 grows ``ext`` (K, 4) by its end points
    (metres), ``mode`` 1 marks its samples in ``marked`` (K, H, W), ``mode`` 2 lists it as a row ``(q,
    arc, lo, hi)`` of ``ext`` (rows, 4) (fractions of the arc from its tail). ``by_arc``: ``nodes`` are
    arcs and ``dist`` their entry costs (the arc from its tail ``tail[arc]`` on), else nodes and their
    costs (every arc out of the node). Items ``i_lo:i_hi`` only (the searched ones, then the origin's
    arcs; ``i_hi`` -1: to the end). Returns the number of pieces."""
    K = cus.shape[0]
    n = nodes.shape[0]
    count = 0
    end = n + o_arc.shape[0] if i_hi < 0 else i_hi
    for i in range(i_lo, end):
        if i < n:
            du = dist[i]
            if by_arc:
                a0 = nodes[i]
                a1 = a0 + 1
                u = tail[a0]
            else:
                u = nodes[i]
                a0 = first_out[u]
                a1 = first_out[u + 1]
            lo = 0.0
        else:
            a0 = o_arc[i - n]
            a1 = a0 + 1
            u = o_tail[i - n]
            du = 0.0
            lo = o_frac[i - n]
        tx, ty = _local(lon[u], lat[u], lon0, lat0, kx, ky)
        for a in range(a0, a1):
            v = head[a] if i < n else o_head[i - n]
            hx, hy = _local(lon[v], lat[v], lon0, lat0, kx, ky)
            for q in range(K):
                if du > cus[q]:
                    break  # contours run largest first
                budget = cus[q] - du if i < n else cus[q]
                count += 1
                if mode == 2:
                    r = count - 1
                    ext[r, 0] = q
                    ext[r, 1] = a
                    ext[r, 2] = lo
                    ext[r, 3] = _reach(lo, budget, w[a])
                    continue
                x0, y0, x1, y1 = _piece(tx, ty, hx, hy, lo, budget, w[a])
                if mode == 0:
                    ext[q, 0] = min(ext[q, 0], min(x0, x1))
                    ext[q, 1] = min(ext[q, 1], min(y0, y1))
                    ext[q, 2] = max(ext[q, 2], max(x0, x1))
                    ext[q, 3] = max(ext[q, 3], max(y0, y1))
                else:
                    p0x, p0y, sx, sy, n_s = _sample_count(x0, y0, x1, y1, cell)
                    for k in range(n_s):
                        ix = int(math.floor(p0x + k * sx)) - i0
                        iy = int(math.floor(p0y + k * sy)) - j0
                        marked[q, iy, ix] = 1
    return count


#: ``tail`` of :func:`_pieces` where the items are nodes.
_NO_TAIL = np.zeros(1, dtype=np.int64)


def _parts(n, work):
    """Item ranges ``[(lo, hi), ...]`` of ``n`` items split for the lattice's threads: one range when the
    work (items, or lattice points) is below ``config.SERVE_ISOCHRONE_PARALLEL_WORK`` or one thread is
    configured."""
    k = int(config.SERVE_ISOCHRONE_LATTICE_THREADS)
    if k <= 1 or work < int(config.SERVE_ISOCHRONE_PARALLEL_WORK) or n < 2 * k:
        return [(0, n)]
    e = np.linspace(0, n, k + 1).astype(np.int64)
    return [(int(e[i]), int(e[i + 1])) for i in range(k)]


def _run(fn, jobs):
    """``fn(*job)`` for every job: the first in this thread, the others on :func:`thread_pool` (numba code
    without the GIL), all finished on return."""
    futs = [thread_pool().submit(fn, *j) for j in jobs[1:]]
    try:
        fn(*jobs[0])
    finally:
        for f in futs:
            f.result()


def extent_cpu(args, K, tail=None):
    """Per contour ``(xmin, ymin, xmax, ymax)`` (metres) of its pieces' end points: ``ext`` (K, 4).
    ``args``: what :func:`piece_args` returns first; ``tail`` (int64 (m,)) where its items are arcs.
    Large requests in parts on the worker threads (minima and maxima: the same result)."""
    n = args[0].shape[0] + args[7].shape[0]
    parts = _parts(n, n)
    ext = np.empty((len(parts), K, 4))
    ext[:, :, :2] = np.inf
    ext[:, :, 2:] = -np.inf
    dummy = np.zeros((1, 1, 1), dtype=np.uint8)
    tl = _NO_TAIL if tail is None else tail

    def job(p, lo, hi):
        _pieces(0, *args, ext[p], dummy, 1.0, 0, 0, tl, tail is not None, lo, hi)

    _run(job, [(p, lo, hi) for p, (lo, hi) in enumerate(parts)])
    out = ext[0]
    if len(parts) > 1:
        out = np.concatenate([ext[:, :, :2].min(axis=0), ext[:, :, 2:].max(axis=0)], axis=1)
    return out


def mark_cpu(args, lat, marked, tail=None):
    """Mark the samples of every piece in ``marked`` (K, H, W) uint8 (zeroed by the caller); ``args`` and
    ``tail`` as :func:`extent_cpu`. Large requests in parts on the worker threads (every store writes 1:
    the same marks whichever thread stores first)."""
    n = args[0].shape[0] + args[7].shape[0]
    tl = _NO_TAIL if tail is None else tail

    def job(lo, hi):
        _pieces(1, *args, np.zeros((marked.shape[0], 4)), marked, lat.cell, lat.i0, lat.j0, tl, tail is not None,
                lo, hi)

    _run(job, _parts(n, n))


@njit(cache=True, nogil=True)
def _field_rows(marked, windows, m, hsq, has, y_lo, y_hi):
    """First pass of :func:`_field` on rows ``y_lo:y_hi`` of every contour: ``has[q, y]`` (a mark in the
    row) and ``hsq[q, y]`` (the nearest mark along the row, ``dx^2`` within ``m``, else 0x3FFF)."""
    K = marked.shape[0]
    big = np.uint16(0x3FFF)
    for q in range(K):
        x0, y0, x1, y1 = windows[q, 0], windows[q, 1], windows[q, 2], windows[q, 3]
        for y in range(y_lo, y_hi):
            has[q, y] = False
            if y < y0 or y >= y1:
                continue
            row = marked[q, y]
            for x in range(x0, x1):
                if row[x]:
                    has[q, y] = True
                    break
            if not has[q, y]:
                continue
            # the nearest mark to the left, then to the right (two sweeps): dx^2 within m, else big
            h = hsq[q, y]
            last = -(1 << 30)
            for x in range(x0, x1):
                if row[x] != 0:
                    last = x
                h[x] = min(x - last, m + 1)
            last = 1 << 30
            for x in range(x1 - 1, x0 - 1, -1):
                if row[x] != 0:
                    last = x
                d = min(int(h[x]), last - x)
                h[x] = d * d if d <= m else big


@njit(cache=True, nogil=True)
def _field_cols(windows, m, code_of, codes, hsq, has, y_lo, y_hi):
    """Second pass of :func:`_field` on rows ``y_lo:y_hi`` of every contour (largest first: a contour's
    codes are raised to the larger one's of the same point)."""
    K, H, W = codes.shape
    big = np.uint16(0x3FFF)
    n_code = code_of.shape[0]
    acc = np.empty(W, dtype=np.uint16)
    for q in range(K):
        x0, y0, x1, y1 = windows[q, 0], windows[q, 1], windows[q, 2], windows[q, 3]
        cq = codes[q]
        for y in range(y_lo, y_hi):
            out = cq[y]
            near = False
            if y0 <= y < y1:
                for yy in range(max(y - m, y0), min(y + m + 1, y1)):
                    near |= has[q, yy]
            if not near:
                out[:] = FAR
                continue
            for x in range(x0, x1):
                acc[x] = big
            for dy in range(-m, m + 1):
                yy = y + dy
                if yy < y0 or yy >= y1 or not has[q, yy]:
                    continue
                c = np.uint16(dy * dy)
                hr = hsq[q, yy]
                for x in range(x0, x1):
                    acc[x] = min(acc[x], np.uint16(hr[x] + c))
            out[:x0] = FAR
            out[x1:] = FAR
            for x in range(x0, x1):
                s2 = acc[x]
                code = code_of[s2] if s2 < n_code else np.uint8(FAR)
                if q > 0:
                    code = max(code, codes[q - 1, y, x])
                out[x] = code


def _field(marked, windows, m, code_of, codes, hsq, has, bands=((0, -1),)):
    """Codes (K, H, W) uint8 of the field of every contour (see the module doc), raised to the next
    larger contour's; ``hsq`` (K, H, W) uint16 and ``has`` (K, H) bool scratch. Rows of a window with no
    mark within ``m`` rows are beyond reach (FAR) without a pass; the passes are branch-free
    (vectorised). ``bands``: row ranges (``-1``: to the last row), the first pass of every band, then the
    second (the rows a band reads from its neighbours are complete), on the worker threads when several."""
    H = marked.shape[1]
    jobs = [(lo, H if hi < 0 else hi) for lo, hi in bands]
    _run(lambda lo, hi: _field_rows(marked, windows, m, hsq, has, lo, hi), jobs)
    _run(lambda lo, hi: _field_cols(windows, m, code_of, codes, hsq, has, lo, hi), jobs)


def field_cpu(marked, lat, codes):
    """Fill ``codes`` (K, H, W) uint8 from ``marked`` (see :func:`_field`); large lattices in bands of rows
    on the worker threads."""
    K = marked.shape[0]
    hsq = scratch("hsq", (K, lat.H, lat.W), np.uint16)
    has = scratch("has", (K, lat.H), np.bool_)
    _field(marked, lat.windows, lat.m, lat.code_of, codes, hsq, has, _parts(lat.H, K * lat.H * lat.W))


def piece_args(graph_arrays, metric, req):
    """Search a request and return what :func:`extent_cpu` and :func:`mark_cpu` read: ``(args, tail)``,
    ``args`` the items (nodes and their costs, :func:`search_cpu`; or, with ``metric.turns``, arcs and
    their entry costs, :func:`gpuroute.engine.services.isochrone.search.search_turns`) and the arrays of the
    pieces, ``tail`` the graph's ``tail`` where the items are arcs, else None.

    Parameters
    ----------
    graph_arrays : (first_out int64 (n+1,), head int64 (m,), tail int64 (m,), lon float64 (n,), lat float64 (n,))
    metric : Metric
    req : Request
    """
    fo, head, tail, lon, lat_ = graph_arrays
    if metric.turns is not None:
        items, cost = search_turns(metric, req)
    else:
        items, cost = search_cpu(metric, req)
    args = (items, cost, fo, head, lon, lat_, metric.w, req.o_arc, req.o_frac, tail[req.o_arc], head[req.o_arc],
            req.cus, req.lon0, req.lat0, req.kx, req.ky)
    return args, (tail if metric.turns is not None else None)


def pieces_cpu(graph_arrays, metric, req):
    """The reachable pieces of road of every contour of a request, as the lattice marks them.

    Parameters
    ----------
    graph_arrays, metric, req
        As :func:`piece_args`.

    Returns
    -------
    q : ndarray int64, shape (p,)
        The contour (index into ``req.cus``, largest first).
    arc : ndarray int64, shape (p,)
    lo, hi : ndarray float64, shape (p,)
        The piece runs from fraction ``lo`` to ``hi`` of the arc from its tail.
    """
    args, tail = piece_args(graph_arrays, metric, req)
    items, K = args[0], req.cus.size
    per = np.ones(items.size, dtype=np.int64) if tail is not None else np.diff(graph_arrays[0])[items]
    rows = np.empty((K * (int(per.sum()) + req.o_arc.size), 4))
    k = _pieces(2, *args, rows, np.zeros((1, 1, 1), dtype=np.uint8), 1.0, 0, 0, _NO_TAIL if tail is None else tail,
                tail is not None)
    rows = rows[:k]
    return rows[:, 0].astype(np.int64), rows[:, 1].astype(np.int64), rows[:, 2].copy(), rows[:, 3].copy()


def codes_cpu(graph_arrays, metric, req):
    """The lattice and field codes (K, H, W) uint8 of a request on the CPU.

    Parameters
    ----------
    graph_arrays, metric, req
        As :func:`piece_args`.

    Returns
    -------
    codes : ndarray uint8, shape (K, H, W)
        A per-thread buffer: valid until this thread's next request.
    lat : Lattice
    """
    args, tail = piece_args(graph_arrays, metric, req)
    K = req.cus.size
    ext = extent_cpu(args, K, tail)
    lat = lattice(ext)
    marked = scratch("marked", (K, lat.H, lat.W), np.uint8)
    marked.fill(0)
    mark_cpu(args, lat, marked, tail)
    codes = scratch("codes", (K, lat.H, lat.W), np.uint8)
    field_cpu(marked, lat, codes)
    return codes, lat


def _key(v):
    """The kernels' monotone int64 key of doubles (``iso_key`` in isochrone.cu)."""
    b = np.asarray(v, dtype=np.float64).view(np.int64)
    return np.where(b >= 0, b, b ^ np.int64(0x7FFFFFFFFFFFFFFF))


def _unkey(k):
    """The doubles of int64 keys (the inverse of :func:`_key`)."""
    k = np.asarray(k, dtype=np.int64)
    return np.where(k >= 0, k, k ^ np.int64(0x7FFFFFFFFFFFFFFF)).view(np.float64)


class IsochroneGPU:
    """The lattice and field codes of isochrones on the GPU (kernels in ``isochrone.cu``), for one graph
    and metric: arcs (tail, head, cost) and node positions on the device; the search is a PHAST pass of
    the metric's hierarchy over the origin's heads (rows left on the device), or, for a metric with
    ``turns`` (an engine with an overlay), the CPU's turn-aware search
    (:func:`gpuroute.engine.services.isochrone.search.search_turns`) whose arcs' entry costs are scattered
    into a per-arc array on the device (``by_arc``: the kernels read an arc's entry cost where they read its
    tail's cost; the touched entries are reset to +inf after the request).

    Parameters
    ----------
    graph_arrays : as :func:`codes_cpu`
    metric : Metric
        With a hierarchy, or with ``turns``.

    Raises
    ------
    GPUUnavailableError
        Without a usable GPU.
    """

    def __init__(self, graph_arrays, metric):
        import cupy as cp

        from ....backend import resolve_device
        from ....backend.kernels import load_module

        resolve_device("gpu")
        self.cp = cp
        fo, head, tail, lon, lat = graph_arrays
        self.n, self.m = lon.shape[0], head.shape[0]
        self.metric = metric
        self.tail = cp.asarray(tail.astype(np.int32))
        self.head = cp.asarray(head.astype(np.int32))
        self.lon = cp.asarray(np.ascontiguousarray(lon, dtype=np.float64))
        self.lat = cp.asarray(np.ascontiguousarray(lat, dtype=np.float64))
        self.w = cp.asarray(np.ascontiguousarray(metric.w, dtype=np.float64))
        self.by_arc = metric.turns is not None
        self.head_host = head
        mod = load_module("engine/services/isochrone/isochrone.cu")
        self.k_best = mod.get_function("iso_best")
        self.k_extent = mod.get_function("iso_extent")
        self.k_mark = mod.get_function("iso_mark")
        self.k_hpass = mod.get_function("iso_hpass")
        self.k_vpass = mod.get_function("iso_vpass")
        if self.by_arc:
            self.best = cp.full(self.m, np.inf, dtype=cp.float64)  # +inf between requests
        else:
            self.best = cp.empty(self.n, dtype=cp.float64)
        self.stream = cp.cuda.Stream(non_blocking=True)
        self.lock = threading.Lock()
        self.tpb = int(config.SERVE_ISOCHRONE_GPU_THREADS)
        self._bufs = {}
        self._scattered = None  # the arcs whose entry costs are in best (by_arc), reset after the request
        cp.cuda.Device().synchronize()

    def _buf(self, name, size, dtype):
        a = self._bufs.get(name)
        if a is None or a.size < size:
            with self.stream:
                a = self.cp.empty(max(int(size), 1024), dtype=dtype)
            self._bufs[name] = a
        return a[:size]

    def codes(self, req, metric=None):
        """``(codes (K, H, W) uint8 NumPy (a per-thread buffer), lattice)`` of a request, as
        :func:`codes_cpu` computes them (bit for bit). ``metric``: a metric with ``turns`` of the same
        graph that replaces the drawer's (``/customize`` built it; its arc costs are uploaded), else the
        drawer's own."""
        cp = self.cp
        K = int(req.cus.size)
        n, m = self.n, self.m
        rows = None
        met = self.metric if metric is None else metric
        arcs = entry = None
        if self.by_arc:
            arcs, entry = search_turns(met, req)
        elif req.heads:  # PHAST from the heads, rows left on the device (CuPy sources), (k, n) or (n,)
            rows = self.metric.ch.tree(cp.asarray(np.asarray(req.heads, dtype=np.int64)), device="gpu")
            rows = cp.ascontiguousarray(rows, dtype=cp.int64).reshape(-1)
        with self.lock, self.stream:
            try:
                return self._codes(req, K, n, m, met, rows, arcs, entry)
            finally:
                if self._scattered is not None:
                    self.best[self._scattered] = np.inf  # +inf again for the next request
                    self._scattered = None

    def _codes(self, req, K, n, m, met, rows, arcs, entry):
        """:meth:`codes` under the drawer's lock and on its stream."""
        cp = self.cp
        i32, i64, f64 = np.int32, np.int64, np.float64
        tpb = self.tpb
        if self.by_arc:
            if met is not self.metric:
                if met.w is not self.metric.w:
                    self.w.set(np.ascontiguousarray(met.w, dtype=np.float64), stream=self.stream)
                self.metric = met
            self._scattered = cp.asarray(arcs)
            self.best[self._scattered] = cp.asarray(entry)
        elif rows is not None:
            self.k_best(((n + tpb - 1) // tpb,), (tpb,),
                        (i32(n), i32(len(req.heads)), rows, cp.asarray(np.asarray(req.bounds, dtype=np.int64)),
                         cp.asarray(np.asarray(req.offs, dtype=np.float64)), self.best))
        else:
            self.best.fill(np.inf)
        cus = cp.asarray(req.cus)
        o_arc = cp.asarray(req.o_arc.astype(np.int32))
        o_frac = cp.asarray(req.o_frac)
        items = m + int(req.o_arc.size)
        ext0 = np.tile(_key([np.inf, np.inf, -np.inf, -np.inf]), K)
        ext = cp.asarray(ext0)
        blocks = (items + tpb - 1) // tpb
        common = (self.tail, self.head, self.lon, self.lat, self.w, self.best, cus, o_arc, o_frac,
                  f64(req.lon0), f64(req.lat0), f64(req.kx), f64(req.ky))
        by_arc = i32(1 if self.by_arc else 0)
        self.k_extent((blocks,), (tpb,), (i32(m), i32(req.o_arc.size), i32(K)) + common + (ext, by_arc))
        ext_host = _unkey(ext.get(stream=self.stream)).reshape(K, 4)
        lat = lattice(ext_host)
        H, W = lat.H, lat.W
        marked = self._buf("marked", K * H * W, cp.uint8)
        marked.fill(0)
        self.k_mark((blocks,), (tpb,), (i32(m), i32(req.o_arc.size), i32(K)) + common
                    + (f64(lat.cell), i64(lat.i0), i64(lat.j0), i32(W), i32(H), marked, by_arc))
        hsq = self._buf("hsq", H * W, cp.uint16)
        dcodes = self._buf("codes", K * H * W, cp.uint8)
        code_of = cp.asarray(lat.code_of)
        for q in range(K):
            x0, y0, x1, y1 = (int(v) for v in lat.windows[q])
            if x1 > x0 and y1 > y0:
                pts = (x1 - x0) * (y1 - y0)
                self.k_hpass(((pts + tpb - 1) // tpb,), (tpb,),
                             (i32(W), i32(x0), i32(y0), i32(x1), i32(y1), i32(lat.m), marked[q * H * W:], hsq))
            self.k_vpass(((W * H + tpb - 1) // tpb,), (tpb,),
                         (i32(q), i32(W), i32(H), i32(x0), i32(y0), i32(x1), i32(y1), i32(lat.m), code_of,
                          i32(lat.code_of.size), hsq, dcodes))
        codes = scratch("codes", (K, H, W), np.uint8)
        dcodes.get(stream=self.stream, out=codes.reshape(-1))
        self.stream.synchronize()
        return codes, lat


__all__ = ["FAR", "Lattice", "lattice", "scratch", "codes_cpu", "piece_args", "pieces_cpu", "extent_cpu",
           "mark_cpu", "field_cpu", "IsochroneGPU", "BUILD_LOCK"]
