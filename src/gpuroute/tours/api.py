"""Public tour API: :func:`tsp` (closed tours and open paths on an asymmetric cost matrix).

The search is the seed's scheme (Brodtkorb, Hagen, Schulz, Hasle, "GPU computing in discrete
optimization. Part I", EURO J. Transp. Logist. 2013): best-improvement local search that evaluates a
whole neighbourhood and applies the best move (:func:`gpuroute.tours.local_search.best_move`), inside an
iterated local search (several starts, double-bridge perturbations, accept if not worse). CPU twin:
:mod:`gpuroute.tours.local_search` (numba); GPU twin: :mod:`gpuroute.tours.gpu` (``local_search.cu``),
the same moves, deltas and tie-breaking, with many ILS chains at once (``device="gpu"``). A symmetric matrix
above 150 stops gets the CPU's Or-opt search (:func:`_search_or`: an LK-style depth-4 move, don't-look bits,
local segment kicks undone in O(touched)), which ``device="auto"`` prefers to the GPU.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numba
import numpy as np

from .. import config
from ..backend import get_array_module, is_cupy_array, resolve_device
from . import budget
from . import local_search as ls
from .budget import Deadline, Pacer, check_time_limit

__all__ = ["TourResult", "tsp", "tour_cost", "check_stop_id", "FULL_NEIGHBOURHOOD_MAX_N", "CANDIDATES"]

#: up to this many stops the local search scans the full O(n^2) neighbourhood; above it, candidate lists
FULL_NEIGHBOURHOOD_MAX_N = 150
#: candidate-list width above :data:`FULL_NEIGHBOURHOOD_MAX_N`
CANDIDATES = 10
#: positions spanned by a double bridge: on the GPU ILS_WINDOW (one in eight ten times as many), on the
#: CPU ten times ILS_WINDOW (what the CPU loop did before its rounds were paced, measured no worse); the
#: whole tour up to 100 stops
ILS_WINDOW = 50


@dataclass
class TourResult:
    """A tour or path found by :func:`tsp`.

    Attributes
    ----------
    tour : numpy.ndarray
        int64 (n,): the stops in visiting order, each exactly once. A closed tour starts at stop 0 (or at
        ``start`` when ``start == end``); its return arc ``tour[-1] -> tour[0]`` is implied.
    cost : int or float
        Cost recomputed from the input matrix (an ``int`` for an integer matrix); for a closed tour it
        includes the return arc.
    closed : bool
        True for a roundtrip, False for an open path.
    trace : list of (float, float)
        (seconds since the call, first-call compilation left out; best cost so far) each time the best
        improved, for plots.
    device : str
        "cpu" or "gpu": where the search ran.
    stats : dict
        n, starts, ils_iterations, improvements (perturbations that lowered the cost), moves applied,
        neighbourhood ("full": the seed's best-improvement over all moves, on the CPU n <= 150, on the GPU
        with ``TOUR_GPU_NEIGHBOURHOOD = "full"`` or under 8 stops; "candidates:K": queue-driven descent
        over K-nearest candidate lists; "or-opt:K": the Or-opt search of a symmetric matrix, whose stats
        also give its chains), rounds, complete (False when the time limit cut the start's
        descent or the final polish short: the tour need not be a local minimum), warmup_seconds
        (first-call compilation, outside the time limit), seconds (of the time limit used); on the GPU
        also chains (:func:`gpuroute.tours.gpu.search`).
    """

    tour: np.ndarray
    cost: float
    closed: bool
    trace: list = field(default_factory=list)
    device: str = "cpu"
    stats: dict = field(default_factory=dict)


def tour_cost(costs, tour, closed=True):
    """Cost of visiting ``tour`` (int (m,)) over ``costs`` ((n, n), NumPy or CuPy); ``closed`` adds the
    return arc.

    Summed in the matrix's dtype (exact for integer matrices); returns a Python int or float. A CuPy
    matrix is gathered and summed on the device (the tour goes up, one scalar comes back).
    """
    xp = get_array_module(costs)
    costs = xp.asarray(costs)
    t = xp.asarray(np.asarray(tour.get() if is_cupy_array(tour) else tour, dtype=np.int64))
    if t.size == 0:
        return 0
    s = costs[t[:-1], t[1:]].sum()
    if closed and t.size > 1:
        s = s + costs[t[-1], t[0]]
    return s.item()


def _validate_device(c):
    """:func:`_validate` of a CuPy matrix on the device: a few reductions, scalars back (two indices and a
    value when an entry is bad), never the matrix."""
    import cupy as cp

    if c.ndim != 2 or c.shape[0] != c.shape[1]:
        raise ValueError(f"costs must be a square (n, n) matrix, got shape {c.shape}")
    if c.shape[0] < 1:
        raise ValueError("costs must have at least one stop (n >= 1)")
    if not (np.issubdtype(c.dtype, np.integer) or np.issubdtype(c.dtype, np.floating)):
        raise TypeError(f"costs must be an integer or float matrix, got dtype {c.dtype}")

    def first(mask, what):
        i, j = (int(v) for v in cp.argwhere(mask)[0].get())
        return f"costs must be {what}; costs[{i}, {j}] = {c[i, j].item()}"

    if np.issubdtype(c.dtype, np.floating) and not math.isfinite(float(abs(c).max())):  # NaN or inf when one is
        raise ValueError(first(~cp.isfinite(c), "finite") + " (an unreachable stop?)")
    if c.min().item() < 0:
        raise ValueError(first(c < 0, "non-negative"))
    return c


def _validate(costs):
    if is_cupy_array(costs):
        return _validate_device(costs)
    c = np.asarray(costs)
    if c.ndim != 2 or c.shape[0] != c.shape[1]:
        raise ValueError(f"costs must be a square (n, n) matrix, got shape {c.shape}")
    if c.shape[0] < 1:
        raise ValueError("costs must have at least one stop (n >= 1)")
    if not (np.issubdtype(c.dtype, np.integer) or np.issubdtype(c.dtype, np.floating)):
        raise TypeError(f"costs must be an integer or float matrix, got dtype {c.dtype}")
    if np.issubdtype(c.dtype, np.floating) and not np.isfinite(c).all():
        bad = np.argwhere(~np.isfinite(c))[0]
        raise ValueError(f"costs must be finite; costs[{bad[0]}, {bad[1]}] = {c[bad[0], bad[1]]} "
                         "(an unreachable stop?)")
    if (c < 0).any():
        bad = np.argwhere(c < 0)[0]
        raise ValueError(f"costs must be non-negative; costs[{bad[0]}, {bad[1]}] = {c[bad[0], bad[1]]}")
    return c


def check_stop_id(name, v, n):
    """``v`` as a stop index in ``[0, n)`` (None passes through); ValueError naming ``name`` and the value,
    TypeError for a non-integer."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{name} must be a stop index (int) or None, got {v!r}")
    if not 0 <= int(v) < n:
        raise ValueError(f"{name}={v} is out of range for {n} stops (0..{n - 1})")
    return int(v)


def _reduce_to_closed(c, start, end):
    """Closed-tour matrix and mode for the requested closed tour / open path (float64 copy, in ``c``'s
    array module: a CuPy matrix stays on the device)."""
    C = c.astype(np.float64, copy=True)
    n = C.shape[0]
    if start is None and end is None:
        return C, "closed", 0, -1
    if start is not None and end is not None and start == end:
        return C, "closed", start, -1
    if end is None:  # from start, end anywhere: the arc back into start is free
        C[:, start] = 0.0
        return C, "from", start, -1
    if start is None:  # anywhere to end: the arc out of end is free
        C[end, :] = 0.0
        return C, "to", end, -1
    # start -> end: the arc end -> start is free and forced (every other arc out of end / into start
    # costs more than any tour, so no improving move breaks it)
    big = float(n) * float(C.max()) + 1.0
    C[end, :] = big
    C[:, start] = big
    C[end, start] = 0.0
    return C, "path", start, end


def _orient(p, mode, first, last):
    """Rotate the closed tour ``p`` into the requested order."""
    p = np.asarray(p, dtype=np.int64)
    if mode == "to":
        r = (int(np.flatnonzero(p == first)[0]) + 1) % p.size  # end must come last
    else:
        r = int(np.flatnonzero(p == first)[0])
    return np.roll(p, -r)


def tsp(costs, *, start=None, end=None, time_limit=1.0, device="auto", seed=None, starts=None, stall=None):
    """Shortest closed tour or open path through every stop of an asymmetric cost matrix.

    Iterated local search. Neighbourhoods: 2-opt with the asymmetric cost of the reversed segment,
    Or-opt of 2-3 stops in either orientation, swap, relocate. Up to
    :data:`FULL_NEIGHBOURHOOD_MAX_N` stops, each descent is Brodtkorb et al. (2013)'s best-improvement
    scheme (evaluate the whole neighbourhood, reduce to the best move, apply, until a local minimum);
    above it, a queue-driven descent over K-nearest candidate lists (the same moves and delta functions,
    the fast CPU reference). Starts: nearest neighbour, then random ones (while under 20 % of the time
    limit); then double-bridge perturbations on stretches of the tour (:data:`ILS_WINDOW`), accepted when
    not worse, until ``time_limit``. A **symmetric** closed-tour matrix above
    :data:`FULL_NEIGHBOURHOOD_MAX_N` stops (checked exactly, in the time limit) gets the CPU's Or-opt
    search instead (:func:`_search_or`): an LK-style sequential move of depth 4 (2-opt, 3-opt and Or-opt
    moves with or without reversal; :func:`gpuroute.tours.local_search.or_step`) with don't-look bits,
    then an ILS of local segment kicks, each repaired around the stops it touched and undone from its
    reversal log when worse (O(touched) a kick), ``config.TOUR_CPU_CHAINS`` chains on the numba threads.
    Open paths reduce to asymmetric matrices and keep the search above. On the GPU
    (:func:`gpuroute.tours.gpu.search`):
    many ILS chains (a block each) run double bridges in parallel; by default (``TOUR_GPU_NEIGHBOURHOOD =
    "candidates"``) every descent is the CPU's candidate-list descent (``TOUR_GPU_CANDIDATES`` nearest
    stops) run on the device, whatever n; with "full", the full best-improvement scheme.

    The time limit is kept: the search checks its deadline between steps of bounded work
    (:mod:`gpuroute.tours.budget`; candidate lists, the nearest-neighbour start, every descent and every
    ILS round included), so it returns within about one such step (a few ms) of ``time_limit``; a search
    cut short returns the best tour so far (at worst the start tour, which need not be a local minimum).
    Compilation is not counted: the first call in a process first compiles, or loads from the numba /
    CuPy caches, every kernel it uses (:func:`gpuroute.tours.warm_up`; 0.2 s from a warm numba cache,
    ~11 s cold on a 2-core machine, more with a GPU's context and NVRTC) and reports those seconds in
    ``stats["warmup_seconds"]``; call ``gpuroute.tours.warm_up()`` at start-up to pay it there.

    Parameters
    ----------
    costs : array_like or cupy.ndarray, (n, n), integer or float
        ``costs[u, v]`` is the cost (seconds, metres, ...) of going from stop u to stop v; finite and
        non-negative; the diagonal is ignored. Need not be symmetric. A CuPy matrix (e.g. the
        hierarchy's GPU table, ``gpuroute.engine.algorithms.CH.many_to_many(..., on_device=True)``, as
        the trip service passes it) is checked and searched on the device and never copied to the host
        when the search runs on the GPU (issue 23: only tours, costs and counts come back); with
        ``device="cpu"``, with ``"auto"`` below ``config.TOUR_GPU_AUTO_MIN_N`` stops, or up to 3 stops it
        is copied to the host once, after the checks. ``device="auto"`` decides as for a host matrix.
    start, end : int or None
        None/None: closed tour (roundtrip), rotated to start at stop 0. ``start=s``: open path from s,
        ending anywhere. ``end=e``: open path ending at e. ``start=s, end=e``, s != e: open path s -> e;
        s == e: closed tour starting at s.
    time_limit : float
        Seconds of search (> 0), from the call to the return, compilation excluded (see above).
    device : {"auto", "cpu", "gpu"}
        "auto": the GPU when one is usable and n >= ``config.TOUR_GPU_AUTO_MIN_N``, except for a symmetric
        host matrix (closed tour, checked in the time limit), which goes to the CPU's Or-opt search (it
        beat the GPU's chains at 1 s: BENCHMARKS.md "TSP: the Or-opt ILS on the CPU"); else the CPU. Up to
        3 stops are enumerated on the CPU whatever the device.
    seed : int or None
        Seed of the random starts and perturbations (None: fresh entropy).
    starts : int or None
        Number of starts (the first is nearest-neighbour, the rest random; a later one only while under
        20 % of the time limit is used). None: 1 for the Or-opt search (a random start's descent costs
        more than it brings there), 4 otherwise. Unused on the GPU, whose chains start as
        :func:`gpuroute.tours.gpu.search` says.
    stall : int or None
        Stop early once this many ILS kicks (perturbation and repair steps; a random restart below 8 stops)
        in a row have not improved the best tour (``time_limit`` stays the bound); None: search until
        ``time_limit``. Counted in steps of at most ``stall // 4`` kicks (a step that improved starts the
        count again), and per round of chains on the Or-opt search (its kicks a round: the most one chain
        ran). CPU searches only: with the GPU search it is refused (ValueError).

    Returns
    -------
    TourResult

    Raises
    ------
    ValueError
        Non-square, empty, non-finite or negative matrix (the entry named); start/end out of range; bad
        device; ``time_limit`` not a finite number > 0; ``stall`` not an integer >= 1, or given to the GPU
        search.
    TypeError
        Non-numeric matrix or non-integer stop ids.
    GPUUnavailableError
        ``device="gpu"`` without CuPy and a usable CUDA GPU (the message says why).
    """
    if device not in ("auto", "cpu", "gpu"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'gpu', got {device!r}")
    time_limit = check_time_limit(time_limit)
    if stall is not None and (isinstance(stall, bool) or not isinstance(stall, (int, np.integer)) or stall < 1):
        raise ValueError(f"stall must be an integer >= 1 (kicks without improvement) or None, got {stall!r}")
    dl = Deadline(time_limit)
    from .warmup import warm_up_tsp

    warm = 0.0
    if is_cupy_array(costs) and costs.ndim == 2 and costs.shape[0] == costs.shape[1]:
        tw = budget.clock()
        n = costs.shape[0]
        if resolve_device(device, gpu_implemented=n >= config.TOUR_GPU_AUTO_MIN_N) == "gpu" and n > 3:
            # CuPy compiles the kernels of the checks on the device at their first use: before them,
            # outside the budget (the warm-up call below is then free)
            warm_up_tsp("gpu", device_matrix=costs.dtype)
        else:  # the CPU search (or the enumeration of up to 3 stops) reads the host matrix: one copy
            costs = costs.get()
        warm = budget.clock() - tw
        dl.extend(warm)
    c = _validate(costs)
    n = c.shape[0]
    start = check_stop_id("start", start, n)
    end = check_stop_id("end", end, n)
    closed = start is None and end is None or (start is not None and start == end)
    integral = np.issubdtype(c.dtype, np.integer)
    # first-call costs (CuPy import and CUDA context in resolve_device, compilation): outside the budget
    tw = budget.clock()
    dev = resolve_device(device, gpu_implemented=n >= config.TOUR_GPU_AUTO_MIN_N)
    warm_up_tsp("cpu")
    w = budget.clock() - tw
    dl.extend(w)
    warm += w
    C = None
    symmetric = None  # not checked yet
    if device == "auto" and dev == "gpu" and n > FULL_NEIGHBOURHOOD_MAX_N and not is_cupy_array(c):
        # a symmetric (closed-tour) host matrix goes to the CPU's Or-opt search (faster to <= 1 % at 1 s
        # than the GPU's chains, BENCHMARKS.md "TSP: the Or-opt ILS on the CPU")
        C, mode, first, last = _reduce_to_closed(c, start, end)
        symmetric = _symmetric_paced(C, Pacer(dl))
        if symmetric:
            dev = "cpu"
    if stall is not None and dev == "gpu" and n > 3:
        raise ValueError("stall is not implemented by the GPU tour search (device='gpu', or 'auto' from "
                         f"{config.TOUR_GPU_AUTO_MIN_N} stops with a GPU): pass stall=None there")
    tw = budget.clock()
    on_device = is_cupy_array(c) and dev == "gpu" and n > 3
    warm_up_tsp(dev if n > 3 else "cpu", device_matrix=c.dtype if on_device else None)
    w = budget.clock() - tw
    dl.extend(w)
    warm += w
    if C is None:  # (a device matrix: after the warm-up, which compiles CuPy's kernels of the reduction)
        C, mode, first, last = _reduce_to_closed(c, start, end)
    if n <= 3:
        return _tiny(c, C, mode, first, last, closed, dl, warm)

    rng = np.random.default_rng(seed)
    eps = 0.5 if integral else 1e-9 * max(1.0, float(abs(c).max())) * n
    max_moves = 50 * n + 1000
    if dev == "gpu":
        from . import gpu

        best_p, _, trace, gst = gpu.search(C, first, last, deadline=dl, rng=rng, eps=eps, max_moves=max_moves,
                                           window=0 if n <= 100 else ILS_WINDOW)
        stats = {"n": n, "starts": gst["starts"], "ils_iterations": gst["ils_iterations"],
                 "improvements": gst["improvements"], "moves": gst["moves"], "neighbourhood": gst["neighbourhood"],
                 "chains": gst["chains"], "rounds": gst["rounds"], "complete": gst["complete"],
                 "setup_skipped": gst.get("setup_skipped", False), "warmup_seconds": warm}
        return _result(c, best_p, mode, first, last, closed, integral, trace, stats, dl, "gpu")
    best_p, trace, stats = _search_cpu(C, first, last, dl, rng, eps, max_moves, starts, symmetric, stall)
    stats["warmup_seconds"] = warm
    return _result(c, best_p, mode, first, last, closed, integral, trace, stats, dl, "cpu")


def _search_cpu(C, first, last, dl, rng, eps, max_moves, starts, symmetric=None, stall=None):
    """The CPU iterated local search of :func:`tsp` on the closed-tour matrix ``C`` (float64 (n, n),
    n >= 4) under the deadline ``dl``, stopping early after ``stall`` kicks without improvement (None: never);
    above :data:`FULL_NEIGHBOURHOOD_MAX_N` stops a symmetric ``C`` goes to :func:`_search_or` (``symmetric``:
    whether it is, None when not checked yet). Returns (tour, trace, stats); ``stats["stalled"]``: the search
    stopped on ``stall``."""
    n = C.shape[0]
    full_hood = n <= FULL_NEIGHBOURHOOD_MAX_N
    K = n - 1 if full_hood else CANDIDATES
    hood = "full" if full_hood else f"candidates:{K}"
    pace = Pacer(dl)
    stats = {"n": n, "starts": 0, "ils_iterations": 0, "improvements": 0, "moves": 0, "neighbourhood": hood,
             "complete": False}
    trace = []
    nbr = ls.candidate_lists_paced(C, K, pace)
    p0, built = ls.nearest_neighbour_paced(C, first, last, pace) if nbr is not None else (None, False)
    if p0 is None:  # out of time while building the candidate lists: the stops in index order
        mid = [v for v in range(n) if v != first and v != last]
        p0 = np.array([first] + mid + ([last] if last >= 0 else []), np.int64)
    if not built:
        return p0, [(dl.elapsed(), ls.tour_cost(C, p0))], stats
    if not full_hood:
        sym = _symmetric_paced(C, pace) if symmetric is None else symmetric
        if sym is None:  # out of time while checking
            return p0, [(dl.elapsed(), ls.tour_cost(C, p0))], stats
        if sym:
            return _search_or(C, first, dl, pace, rng, eps, nbr, p0, 1 if starts is None else starts, stats, stall)
    starts = 4 if starts is None else starts
    ct = np.ascontiguousarray(C.T) if full_hood else C
    everyone = np.arange(n, dtype=np.int64)
    pos = np.empty(n, np.int64)
    fwd = np.empty(n)
    bwd = np.empty(n)
    queue = np.empty(n, np.int64)
    inq = np.zeros(n, np.bool_)
    qs = np.zeros(3, np.int64)

    def descend(p, reserve=0.0):
        """Descent of ``p`` in place under the pacer (until the deadline less ``reserve``); returns (cost,
        moves, complete)."""
        if full_hood:
            moves = 0
            while (b := pace.budget("full_descent", reserve)) > 0:
                st, cst, mv, w = ls.full_descent(C, ct, p, eps, max_moves - moves, b)
                moves += mv
                pace.spent(w)
                if st == 0:
                    return cst, moves, True
            return ls.tour_cost(C, p), moves, False
        ls.queue_init(C, p, pos, fwd, bwd, queue, inq, qs, everyone)
        while (b := pace.budget("queue_descent", reserve)) > 0:
            st, w = ls.queue_descent(C, p, pos, fwd, bwd, nbr, eps, max_moves, queue, inq, qs, True, b)
            pace.spent(w)
            if st == 0:
                return ls.tour_cost(C, p), int(qs[2]), True
        return ls.tour_cost(C, p), int(qs[2]), False

    def random_start():
        mid = np.array([v for v in range(n) if v != first and v != last], np.int64)
        rng.shuffle(mid)
        return np.concatenate([[first], mid] + ([[last]] if last >= 0 else [])).astype(np.int64)

    best_p, best_c = None, np.inf
    complete = False
    for s in range(max(1, int(starts))):
        if s > 0 and (dl.left() < 0.8 * dl.limit or not complete):
            break
        p = p0 if s == 0 else random_start()
        cst, mv, done = descend(p)
        stats["moves"] += mv
        stats["starts"] += 1
        if cst < best_c - eps or best_p is None:
            best_p, best_c, complete = p.copy(), cst, done
            trace.append((dl.elapsed(), cst))
        if not done:
            break

    rounds = 0
    reserve = float(config.TOUR_POLISH_RESERVE) * dl.limit if full_hood else 0.0  # for the final polish
    left = stall  # kicks left without an improvement (None: no bound)
    chunk = 1 << 30 if stall is None else max(1, stall // 4)
    stats["stalled"] = False
    while complete and (b := pace.budget("ils_round", reserve)) > 0:
        if left is not None and left <= 0:
            stats["stalled"] = True
            break
        if n < 8:  # too small for a double bridge: random restarts (tiny descents)
            q = random_start()
            qc, mv, done = descend(q, reserve)
            stats["moves"] += mv
            stats["ils_iterations"] += 1
            better = done and qc < best_c - eps
            if better:
                best_p, best_c = q, qc
                stats["improvements"] += 1
                trace.append((dl.elapsed(), qc))
            if left is not None:
                left = stall if better else left - 1
            continue
        window = 0 if n <= 100 else min(n - 1, 10 * ILS_WINDOW)
        q, qc, acc, mv, steps, w = ls.ils_round(C, best_p, best_c, nbr, window, eps, max_moves,
                                                chunk if left is None else min(chunk, left),
                                                int(rng.integers(0, 2**31 - 1)), b)
        pace.spent(w)
        rounds += 1
        stats["ils_iterations"] += steps
        stats["improvements"] += acc
        stats["moves"] += mv
        better = qc < best_c - eps
        if better:
            trace.append((dl.elapsed(), qc))
        if left is not None:
            left = stall if better else left - steps
        best_p, best_c = q, qc
    if full_hood and complete:  # end in a local minimum of the full neighbourhood, time allowing
        _, mv, complete = descend(best_p)
        stats["moves"] += mv
    stats["complete"] = bool(complete)
    stats["rounds"] = rounds
    return best_p, trace, stats


def _symmetric_paced(C, pace):
    """Whether ``C`` is symmetric, by chunks of rows under the pacer (:func:`~.local_search.symmetric_rows`,
    ``n`` units a row; stops at the first chunk that is not). None when the deadline passed first."""
    n = C.shape[0]
    row = 0
    while row < n:
        b = pace.budget("symmetric_rows")
        if b <= 0:
            return None
        hi = min(n, row + max(1, b // n))
        ok, w = ls.symmetric_rows(C, row, hi)
        pace.spent(w)
        if not ok:
            return False
        row = hi
    return True


def _search_or(C, first, dl, pace, rng, eps, nbr, p0, starts, stats, stall=None):
    """The CPU search of :func:`tsp` on a symmetric closed-tour matrix ``C`` (float64 (n, n), n > 150):
    :func:`~.local_search.or_descent` (the LK-style depth-4 move :func:`~.local_search.or_step`, don't-look
    bits) from the nearest-neighbour tour ``p0`` (and ``starts - 1`` random tours while under 20 % of the
    time), then rounds of :func:`~.local_search.or_ils_chains` (segment kicks repaired around the 6 stops
    they touch), every chain of a round starting from the best tour so far, until the deadline. Returns
    (tour, trace, stats)."""
    n = C.shape[0]
    K = nbr.shape[1]
    stats["neighbourhood"] = f"or-opt:{K}"
    seg = max(1, min(int(config.TOUR_OR_SEGMENT), (n - 4) // 4))
    queue = np.empty(n, np.int64)
    inq = np.zeros(n, np.bool_)
    qs = np.zeros(3, np.int64)
    log = np.empty((ls.OR_LOG_CAP, 2), np.int64)
    lgs = np.zeros(1, np.int64)
    trace = []

    def descend(p):
        """:func:`or_descent` of ``p`` in place from every stop; returns (pos, cost, moves, complete)."""
        pos = np.empty(n, np.int64)
        pos[p] = np.arange(n)
        queue[:] = p
        inq[:] = True
        qs[:] = (0, n, 0)
        lgs[0] = 0
        while (b := pace.budget("or_descent")) > 0:
            st, _, w = ls.or_descent(C, p, pos, nbr, eps, queue, inq, qs, log, lgs, False, b)
            pace.spent(w)
            if st == 0:
                return pos, ls.tour_cost(C, p), int(qs[2]), True
        return pos, ls.tour_cost(C, p), int(qs[2]), False

    best_p, best_pos, best_c = None, None, np.inf
    complete = False
    for s in range(max(1, int(starts))):
        if s > 0 and (dl.left() < 0.8 * dl.limit or not complete):
            break
        if s == 0:
            p = p0
        else:
            mid = np.array([v for v in range(n) if v != first], np.int64)
            rng.shuffle(mid)
            p = np.concatenate([[first], mid]).astype(np.int64)
        pos, cst, mv, done = descend(p)
        stats["moves"] += mv
        stats["starts"] += 1
        if cst < best_c - eps or best_p is None:
            best_p, best_pos, best_c, complete = p.copy(), pos, cst, done
            trace.append((dl.elapsed(), cst))
        if not done:
            break
    m = int(config.TOUR_CPU_CHAINS) or numba.get_num_threads()
    tours = np.empty((m, n), np.int64)
    poss = np.empty((m, n), np.int64)
    costs = np.empty(m)
    out = np.zeros((m, 4), np.int64)
    rounds = 0
    left = stall  # kicks left without an improvement (None: no bound), counted per round
    stats["stalled"] = False
    while complete and (b := pace.budget("or_ils")) > 0:
        if left is not None and left <= 0:
            stats["stalled"] = True
            break
        tours[:] = best_p
        poss[:] = best_pos
        costs[:] = best_c
        seeds = rng.integers(0, 2**31 - 1, m).astype(np.int64)
        if m == 1:  # no parallel region (its start can cost more than a round on a loaded machine)
            costs[0], *res = ls.or_ils(C, tours[0], poss[0], costs[0], nbr, eps, seg, seeds[0], b)
            out[0] = res
            pace.spent(res[-1])
        else:
            pace.spent(ls.or_ils_chains(C, tours, poss, costs, nbr, eps, seg, seeds, b, out))
        rounds += 1
        stats["ils_iterations"] += int(out[:, 0].sum())
        stats["improvements"] += int(out[:, 1].sum())
        stats["moves"] += int(out[:, 2].sum())
        k = int(np.argmin(costs))
        better = costs[k] < best_c - eps
        if better:
            trace.append((dl.elapsed(), float(costs[k])))
        if left is not None:
            left = stall if better else left - int(out[:, 0].max())
        best_p, best_pos, best_c = tours[k].copy(), poss[k].copy(), float(costs[k])
    stats["complete"] = bool(complete)
    stats["rounds"] = rounds
    stats["chains"] = m
    return best_p, trace, stats


def _result(c, best_p, mode, first, last, closed, integral, trace, stats, dl, device):
    """The :class:`TourResult` of the closed tour ``best_p``: oriented, its cost recomputed over ``c``."""
    tour = _orient(best_p, mode, first, last)
    if mode == "path" and tour[-1] != last:  # cannot happen: the forced arc is never broken
        raise RuntimeError("internal error: the path's end moved")
    cost = tour_cost(c, tour, closed)
    scale = (lambda v: int(round(v))) if integral else float
    trace = [(t, scale(v)) for t, v in trace]
    if not trace or trace[-1][1] != cost:
        trace.append((dl.elapsed(), cost))
    stats = dict(stats, seconds=dl.elapsed())
    return TourResult(tour=tour, cost=cost, closed=closed, trace=trace, device=device, stats=stats)


def _tiny(c, C, mode, first, last, closed, dl, warm):
    """n <= 3: enumerate."""
    import itertools

    n = c.shape[0]
    best, bc = None, np.inf
    for perm in itertools.permutations(range(n)):
        p = np.array(perm, np.int64)
        if p[0] != first:
            continue
        v = ls.tour_cost(C, p)
        if v < bc:
            best, bc = p, v
    tour = _orient(best, mode, first, last)
    cost = tour_cost(c, tour, closed)
    el = dl.elapsed()
    return TourResult(tour=tour, cost=cost, closed=closed, trace=[(el, cost)], device="cpu",
                      stats={"n": n, "starts": 1, "ils_iterations": 0, "improvements": 0, "moves": 0,
                             "neighbourhood": "enumeration", "complete": True, "warmup_seconds": warm,
                             "seconds": el})
