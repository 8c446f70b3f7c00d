"""GPU twin of the tour local search (kernels in ``local_search.cu``; CPU twin :mod:`.local_search`).

Brodtkorb, Hagen, Schulz, Hasle, "GPU computing in discrete optimization. Part I" (EURO J. Transp.
Logist. 2013), "Programming example in CUDA" and "Profiling the local search example": the whole
neighbourhood of the current tour is evaluated in parallel, reduced to the best move, the move is applied,
and the loop runs until no move improves. Here the move is applied on the device too, and the host is
not involved per move.

Same state, moves, deltas and tie-breaking as the CPU twin's :func:`~.local_search.best_move` (2-opt with
the reversed segment's cost from prefix sums, Or-opt of 2-3 stops both ways, swap, relocate over a float64
asymmetric matrix): the GPU reduces on the key ``(delta, i, rank)`` with the rank of
:func:`move_rank`, which orders each row's moves as the CPU visits them, and the deltas are computed with
the CPU's operations in the CPU's order (no multiplication, so no FMA contraction), over prefix sums
summed left to right as the CPU does (or in any order when the costs are integers whose sums are exact).
So GPU and CPU find the same best move, bit for bit, and the same descent.

Three ways to run a descent:

* one tour, the whole GPU (:meth:`GPUTourSearch.local_search`): per move one launch of ``ls_eval`` (rows
  over many blocks, each writes its best key) and one of ``ls_finish`` (one block: reduce the block keys,
  apply, rebuild arcs and prefix sums); ``TOUR_GPU_GRAPH_MOVES`` moves are one CUDA graph replayed until
  the device's done flag is set: 2 graph launches (~0.8 us each) per move and one host read per graph.
* many tours, a block each (:meth:`GPUTourSearch.local_search_batch`, kernel ``ls_batch``): every descent
  in one launch, a persistent loop per block: 1 launch and 1 host sync for all the descents.
* iterated local search (:func:`search`, kernel ``ls_ils``): B chains (a block each); one launch runs
  ``iters`` steps per chain (double bridge from host-drawn cut points, descent, accept if not worse)
  within the time left (read on the device clock: a step still running at the limit is abandoned and
  rejected), then the host reads the B costs (one sync per round, none per move or per step) and copies
  the best chain over the others.

Candidate lists (``neighbourhood="candidates"``, the default of :func:`search`; kernels ``ls_cand_batch``,
``ls_cand_ils``): the CPU twin's fast descent :func:`~.local_search.local_search_queue` on the device, one
block per tour or chain. Each stop keeps its K nearest stops (:func:`~.local_search.candidate_lists`); a
FIFO queue holds the stops whose arcs changed; for the stop popped, the block evaluates the 23 moves of
:func:`~.local_search._pair_best` for each of its K candidates in parallel (one thread a move), reduces on
``(delta, CPU order)`` and applies the best move if it gains more than ``eps``, pushing the stops whose
arcs changed. Same moves, deltas (bit for bit) and order as the CPU, so the same descent, and the same
ILS chain as :func:`~.local_search.ils_round` given the same double-bridge cut points. O(K) moves a stop
instead of O(n^2) a move: many more ILS steps a second. Chains run independently; every
``TOUR_GPU_CAND_SYNC_ROUNDS`` rounds the best chain is copied over the worst half.

Bytes per evaluation (the two-number method): for each first index i the moves read rows p[i-1], p[i],
p[i+1], p[i+2] of ``c`` and p[i], p[i+1], p[i+2] of ``c`` transposed (each ~8n bytes, L1-resident
while the block sweeps the row) plus p, arc, fwd, bwd (~28n bytes): ~84 n^2 bytes, 84 MB at n = 1,000,
~29 us at 2.9 TB/s (the matrices, 16 MB, stay in the 50 MB L2, so L2 bandwidth is the real ceiling).
"""
from __future__ import annotations

import math

import numpy as np

from .. import config
from ..backend import is_cupy_array, resolve_device
from ..backend.flags import N_FLAGS
from . import local_search as ls
from .budget import device_budget_ns

__all__ = ["GPUTourSearch", "move_rank", "move_from_rank", "exact_sums", "threads_per_row",
           "double_bridge_cuts", "apply_double_bridge", "candidate_slot", "CAND_SLOTS", "worst_half", "search",
           "NEIGHBOURHOODS", "warm_up", "candidate_rows_xp", "closed_cost"]

#: neighbourhoods of the GPU search: the seed's full best-improvement scan, or candidate lists
NEIGHBOURHOODS = ("candidates", "full")

_CU = "tours/local_search.cu"


# ------------------------------------------------------------------------------------ pure host helpers
def move_rank(n, t, i, j, k):
    """Rank of move ``(t, i, j, k)`` within its row ``i`` (the tie-break after delta and i; mirrors the
    encoding in ``local_search.cu``): the order in which the CPU twin's ``_row_best`` visits the row.

    2-opt: ``j``; swap: ``n + j``; a segment ``p[i..j]`` of L stops inserted after ``k``:
    ``2n + 4n (L - 1) + 2n [k > j] + n [reversed] + k``.

    Raises
    ------
    ValueError
        Unknown move type.
    """
    if t == ls.TWO_OPT:
        return j
    if t == ls.SWAP:
        return n + j
    if t not in (ls.OR_OPT, ls.OR_OPT_REV, ls.RELOCATE):
        raise ValueError(f"unknown move type {t}")
    L = j - i + 1
    return 2 * n + 4 * n * (L - 1) + 2 * n * int(k > j) + n * int(t == ls.OR_OPT_REV) + k


def move_from_rank(n, i, r):
    """The move ``(t, i, j, k)`` of rank ``r`` in row ``i`` (inverse of :func:`move_rank`)."""
    if r < n:
        return ls.TWO_OPT, i, r, -1
    if r < 2 * n:
        return ls.SWAP, i, r - n, -1
    q = r - 2 * n
    L = q // (4 * n) + 1
    q -= 4 * n * (L - 1)
    q -= 2 * n * (q // (2 * n))
    rev, k = divmod(q, n)
    t = ls.RELOCATE if L == 1 else (ls.OR_OPT_REV if rev else ls.OR_OPT)
    return t, i, i + L - 1, k


def exact_sums(C):
    """True when every entry of ``C`` is an integer and ``4 n max|C| < 2^53``: every sum and difference
    of prefix sums is then exact in float64, so the device may scan in any order (32 chunks per warp)
    and still match the CPU's left-to-right sums bit for bit."""
    C = np.asarray(C, dtype=np.float64)
    if C.size == 0:
        return True
    m = float(np.abs(C).max())
    return bool(np.all(C == np.rint(C))) and 4.0 * C.shape[0] * m < 2.0 ** 53


def _device_checks(cp, c):
    """``(finite, exact)`` of a device matrix in one pass each: every entry finite, and
    :func:`exact_sums`' rule (integers, ``4 n max|C| < 2^53``)."""
    if c.size == 0:
        return True, True
    m = float(abs(c).max())  # NaN or inf when an entry is
    if not math.isfinite(m):
        return False, False
    return True, bool((c == c.round()).all()) and 4.0 * c.shape[0] * m < 2.0 ** 53


def candidate_rows_xp(xp, c, ct, K, lo, hi):
    """Rows ``lo..hi-1`` of the candidate lists of :func:`~.local_search.candidate_lists` with array module
    ``xp`` (NumPy or CuPy, where ``c`` lives): the K stops v != u nearest to each stop u by ``min(c[u, v],
    c[v, u])``, ties to the lower stop index (a stable sort of each row; ``+ 0.0`` makes -0.0 and 0.0 one
    key, as the CPU's comparisons do). ``ct`` is ``c`` transposed (C-contiguous). int32 (hi - lo, K) in
    ``xp``; a sort of ``(hi - lo) * n`` keys on the device, nothing copied to the host."""
    key = xp.minimum(c[lo:hi], ct[lo:hi]) + 0.0
    r = xp.arange(hi - lo)
    key[r, r + lo] = xp.inf  # never u itself (K <= n - 1 and every other key is finite)
    order = xp.argsort(key, axis=1) if xp is not np else np.argsort(key, axis=1, kind="stable")
    return order[:, :K].astype(xp.int32)


def closed_cost(C, p):
    """Closed-tour cost of ``p`` (int (n,)) over ``C`` (NumPy: summed left to right as
    :func:`~.local_search.tour_cost`; CuPy: gathered and summed on the device, one scalar back)."""
    if not is_cupy_array(C):
        return float(ls.tour_cost(C, np.asarray(p, np.int64)))
    import cupy as cp

    q = cp.asarray(np.asarray(p, np.int64))
    return float(C[q, cp.roll(q, -1)].sum())


def threads_per_row(n, threads):
    """Threads sharing one first index i: a power of two, 32 <= tpr <= threads, the smallest >= n (so a
    block sweeps ``threads // tpr`` rows at once when n is small)."""
    tpr = 32
    while tpr < n and tpr < threads:
        tpr *= 2
    return min(tpr, threads)


def double_bridge_cuts(rng, n, shape, window):
    """Cut points of double bridges as :func:`~.local_search.double_bridge` draws them: int32
    ``shape + (3,)`` rows ``(a, m, e)``, ``1 < a < m < e <= n - 1``, inside a stretch of ``w`` positions
    after position 0 where ``w`` is ``window`` (every 8th on average ten times that; ``window <= 0``: the
    whole tour). Needs n >= 8.

    Raises
    ------
    ValueError
        n < 8 (no room for a double bridge).
    """
    if n < 8:
        raise ValueError(f"a double bridge needs at least 8 stops, got {n}")
    shape = tuple(shape)
    if window <= 0 or window >= n - 1:
        w = np.full(shape, n - 1, np.int64)
    else:
        wide = rng.random(shape) < 0.125
        w = np.where(wide, min(n - 1, 10 * window), window).astype(np.int64)
    start = 1 + rng.integers(0, n - w, size=shape)  # the stretch is p[start .. start + w - 1]
    x = rng.integers(1, w[..., None], size=shape + (3,))  # three of 1..w-1
    bad = (x[..., 0] == x[..., 1]) | (x[..., 1] == x[..., 2]) | (x[..., 0] == x[..., 2])
    while bad.any():
        x[bad] = rng.integers(1, w[bad][:, None], size=(int(bad.sum()), 3))
        bad = (x[..., 0] == x[..., 1]) | (x[..., 1] == x[..., 2]) | (x[..., 0] == x[..., 2])
    x.sort(axis=-1)
    return (x + start[..., None]).astype(np.int32)


def apply_double_bridge(p, a, m, e):
    """``p[:a] + p[m:e] + p[a:m] + p[e:]`` (the index map of the ``ls_ils`` kernel; ``a == 0``: ``p``)."""
    p = np.asarray(p)
    if a == 0:
        return p.copy()
    return np.concatenate([p[:a], p[m:e], p[a:m], p[e:]])


#: moves evaluated per (stop, candidate) pair by the candidate-list kernels (local_search._pair_best)
CAND_SLOTS = 23


def candidate_slot(n, x, y, slot):
    """Move number ``slot`` (0..22) of the pair of positions ``(x, y)`` as the ``cand_slot`` device function
    of ``local_search.cu`` numbers them (the order of the CPU twin's ``_pair_best``): ``(t, i, j, k)``, or
    None when the slot holds no legal move. A stop's moves are keyed ``q * CAND_SLOTS + slot`` (q: the
    candidate's index) and the smallest ``(delta, key)`` is the CPU's pick.

    Raises
    ------
    ValueError
        ``slot`` outside 0..22.
    """
    if not 0 <= slot < CAND_SLOTS:
        raise ValueError(f"slot must be in 0..{CAND_SLOTS - 1}, got {slot}")
    if slot == 0:
        return (ls.TWO_OPT, x, y, -1) if y >= x + 2 else None
    if slot == 1:
        i, j = x - 1, (y - 1 if y > 0 else n - 1)
        return (ls.TWO_OPT, i, j, -1) if i >= 0 and j >= i + 2 else None
    if slot == 2:
        return (ls.TWO_OPT, y, x, -1) if x >= y + 2 else None
    if slot < 5:
        s = (x + 1) % n if slot == 3 else (x - 1) % n
        return None if s == y else (ls.SWAP, min(s, y), max(s, y), -1)
    q = slot - 5
    if q < 2:
        L, side, h, rev = 1, 0, q, 0
    else:
        q -= 2
        L = 2 + q // 8
        q -= 8 * (L - 2)
        side, h, rev = q // 4, (q // 2) % 2, q % 2
    s0 = y if side == 0 else y - L + 1
    e0 = s0 + L - 1
    if s0 < 0 or e0 >= n:
        return None
    k = x if h == 0 else (x - 1) % n
    if s0 <= k <= e0 or k == (s0 - 1) % n:
        return None
    t = ls.RELOCATE if L == 1 else (ls.OR_OPT_REV if rev else ls.OR_OPT)
    return t, s0, e0, k


def worst_half(costs, best):
    """Chains to overwrite with chain ``best`` at a chain sync: the ``B // 2`` costliest (ties to the higher
    index), never ``best`` itself. int64 array."""
    costs = np.asarray(costs, np.float64)
    B = costs.size
    order = np.lexsort((np.arange(B), costs))  # by cost, then index
    out = order[B - B // 2:]
    return out[out != best].astype(np.int64)


# ------------------------------------------------------------------------------------------ the device
class GPUTourSearch:
    """A cost matrix on the GPU with the buffers of the local search (single tour, batched, ILS).

    Parameters
    ----------
    costs : array_like or cupy.ndarray, float64 (n, n)
        ``costs[u, v]`` is the cost of the arc u -> v (asymmetric allowed), finite, n >= 3. A host matrix
        is uploaded as float64; a CuPy matrix stays where it is (used in place when it is C-contiguous
        float64, never written, never copied to the host: issue 23's matrix straight from the GPU table).
        Plus its transpose on the device (2 * 8 n^2 bytes of device memory in all). The candidate lists
        and the nearest-neighbour start of a CuPy matrix are made on the device too
        (:meth:`candidates_paced`, :meth:`nearest_neighbour`).
    threads : int, optional
        Threads per block (default ``config.TOUR_GPU_THREADS``): a power of two, 64..1024.
    cand_threads : int, optional
        Threads per block of the candidate-list kernels (default ``config.TOUR_GPU_CAND_THREADS``): a power
        of two, 64..1024.

    Raises
    ------
    ValueError
        Non-square, n < 3, non-finite costs, bad ``threads``.
    GPUUnavailableError
        Without a usable GPU.
    """

    def __init__(self, costs, threads=None, cand_threads=None):
        resolve_device("gpu")
        import cupy as cp

        from ..backend.kernels import load_module, multiprocessors

        on_device = is_cupy_array(costs)
        C = costs if on_device else np.ascontiguousarray(costs, dtype=np.float64)
        if C.ndim != 2 or C.shape[0] != C.shape[1]:
            raise ValueError(f"costs must be a square (n, n) matrix, got shape {C.shape}")
        n = C.shape[0]
        if n < 3:
            raise ValueError(f"the GPU local search needs at least 3 stops, got {n}")
        threads = int(config.TOUR_GPU_THREADS if threads is None else threads)
        cand_threads = int(config.TOUR_GPU_CAND_THREADS if cand_threads is None else cand_threads)
        for name, v in (("threads", threads), ("cand_threads", cand_threads)):
            if v < 64 or v > 1024 or v & (v - 1):
                raise ValueError(f"{name} per block must be a power of two in 64..1024, got {v}")
        self.cand_threads = cand_threads
        #: the host matrix (None when the matrix came as a CuPy array: it is never copied to the host)
        self._host = None if on_device else C
        self._nbr_host = None
        self.K = 0
        self.nbr = None
        self.cp = cp
        self.n = n
        self.threads = threads
        self.tpr = threads_per_row(n, threads)
        rows = threads // self.tpr
        self.sms = multiprocessors()
        cap = int(config.TOUR_GPU_EVAL_MAX_BLOCKS) or self.sms * int(config.TOUR_GPU_EVAL_BLOCKS_PER_SM)
        self.grid = max(1, min(-(-n // rows), cap))
        self.stream = cp.cuda.Stream(non_blocking=False)
        with self.stream:
            self.c = cp.ascontiguousarray(C, dtype=cp.float64) if on_device else cp.asarray(C)
            # the checks on the device, on the copy it needs anyway (on the host they were 3/4 of the set-up:
            # 52 ms of a 3,038-stop matrix; issue 23's time limits)
            finite, exact = (bool(x) for x in _device_checks(cp, self.c))
        if not finite:
            with self.stream:
                i, j = (int(v) for v in cp.argwhere(~cp.isfinite(self.c))[0].get())  # two indices back
            raise ValueError(f"costs must be finite; costs[{i}, {j}] = {float(self.c[i, j])}")
        self.exact = int(exact)
        with self.stream:
            self.ct = cp.ascontiguousarray(self.c.T)
            self.p = cp.zeros(n, dtype=cp.int32)
            self.s = cp.zeros(n, dtype=cp.int32)
            self.arc = cp.zeros(n, dtype=cp.float64)
            self.fwd = cp.zeros(n, dtype=cp.float64)
            self.bwd = cp.zeros(n, dtype=cp.float64)
            self.blk_d = cp.zeros(self.grid, dtype=cp.float64)
            self.blk_i = cp.zeros(self.grid, dtype=cp.int32)
            self.blk_r = cp.zeros(self.grid, dtype=cp.int32)
            self.flags = cp.zeros(N_FLAGS, dtype=cp.int32)
            self.ctl = cp.zeros(2, dtype=cp.int32)  # max_moves, apply
            self.ctl_d = cp.zeros(1, dtype=cp.float64)  # eps
            self.best_d = cp.zeros(1, dtype=cp.float64)
            self.best_m = cp.zeros(4, dtype=cp.int32)
            self.cost = cp.zeros(1, dtype=cp.float64)
            self.stop_at = cp.zeros(1, dtype=cp.uint64)  # device-clock end of the single-tour descent
            self.ils_stop = cp.zeros(1, dtype=cp.uint64)  # ... and of an ILS round (ls_set_stop)
            self.timed_out = cp.zeros(1, dtype=cp.int32)
        mod = load_module(_CU)
        self.k_state = mod.get_function("ls_state")
        self.k_eval = mod.get_function("ls_eval")
        self.k_finish = mod.get_function("ls_finish")
        self.k_batch = mod.get_function("ls_batch")
        self.k_ils = mod.get_function("ls_ils")
        self.k_broadcast = mod.get_function("ls_broadcast")
        self.k_cand_batch = mod.get_function("ls_cand_batch")
        self.k_cand_ils = mod.get_function("ls_cand_ils")
        self.k_set_stop = mod.get_function("ls_set_stop")
        self.k_nearest = mod.get_function("ls_nearest")
        self._graph = None
        self._batch = None
        #: complete[b]: the last descent of tour b ended by itself (not cut by its budget_s)
        self.last_complete = np.ones(1, bool)
        self.stream.synchronize()

    # ---------------------------------------------------------------- single tour
    def _tour32(self, p):
        p = np.asarray(p)
        if p.shape != (self.n,):
            raise ValueError(f"a tour must have shape ({self.n},), got {p.shape}")
        if not np.array_equal(np.sort(p), np.arange(self.n)):
            raise ValueError("a tour must be a permutation of 0..n-1")
        return p.astype(np.int32)

    def _args_state(self, budget_ns=0):
        return (np.int32(self.n), self.c, self.p, self.arc, self.fwd, self.bwd, np.int32(self.exact), self.cost,
                np.uint64(budget_ns), self.stop_at, self.timed_out)

    def _args_eval(self, _parity=0):
        return (np.int32(self.n), self.c, self.ct, self.p, self.arc, self.fwd, self.bwd, np.int32(self.tpr), self.flags,
                self.blk_d, self.blk_i, self.blk_r)

    def _args_finish(self, _parity=0):
        return (np.int32(self.n), np.int32(self.grid), self.c, self.p, self.s, self.arc, self.fwd, self.bwd,
                np.int32(self.exact), self.blk_d, self.blk_i, self.blk_r, self.ctl, self.ctl_d, self.flags,
                self.best_d, self.best_m, self.cost, self.stop_at, self.timed_out)

    def set_tour(self, p, eps=0.0, max_moves=0, apply=False, budget_s=None):
        """Upload the tour ``p`` (int (n,), a permutation), reset the flags and build its arcs and prefix
        sums on the device (``ls_state``); asynchronous on :attr:`stream`. ``budget_s``: the descent that
        follows stops that many seconds later on the device clock (None: no limit)."""
        p32 = self._tour32(p)
        self.p.set(p32, stream=self.stream)
        self.ctl.set(np.array([max_moves, 1 if apply else 0], np.int32), stream=self.stream)
        self.ctl_d.set(np.array([eps], np.float64), stream=self.stream)
        with self.stream:
            self.flags.fill(0)
            self.k_state((1,), (self.threads,), self._args_state(device_budget_ns(budget_s)))

    def launch_eval(self):
        """One launch of the neighbourhood evaluation (``ls_eval``) on the current state (asynchronous;
        the kernel the ``--ncu`` mode of benchmarks/tours_gpu.py profiles)."""
        with self.stream:
            self.k_eval((self.grid,), (self.threads,), self._args_eval())

    def launch_finish(self):
        """One launch of ``ls_finish`` (reduce the evaluation's block keys; apply when set_tour asked)."""
        with self.stream:
            self.k_finish((1,), (self.threads,), self._args_finish())

    def read_best(self):
        """The last reduced best move ``(delta, type, i, j, k)`` (waits for the stream)."""
        d = self.best_d.get(stream=self.stream)
        m = self.best_m.get(stream=self.stream)
        self.stream.synchronize()
        return float(d[0]), int(m[0]), int(m[1]), int(m[2]), int(m[3])

    def best_move(self, p):
        """The best move of the whole neighbourhood of tour ``p``, as the CPU twin's
        :func:`~.local_search.best_move` (full neighbourhood) returns it.

        Parameters
        ----------
        p : int array (n,)
            A closed tour (permutation of 0..n-1).

        Returns
        -------
        (delta, move_type, i, j, k) : (float, int, int, int, int)
            Equal to the CPU's (delta bit for bit, ties broken the same way).

        Raises
        ------
        ValueError
            ``p`` is not a permutation of 0..n-1.
        """
        self.set_tour(p)
        self.launch_eval()
        self.launch_finish()
        return self.read_best()

    def _phase_graph(self):
        if self._graph is None:
            from ..backend.phase_loop import PhaseGraph

            launches = [(self.k_eval, (self.grid,), (self.threads,), self._args_eval),
                        (self.k_finish, (1,), (self.threads,), self._args_finish)]
            self._graph = PhaseGraph(self.stream, launches, int(config.TOUR_GPU_GRAPH_MOVES))
        return self._graph

    def local_search(self, p, eps=0.0, max_moves=None, budget_s=None):
        """Best-improvement descent of one tour on the whole GPU (``ls_eval`` + ``ls_finish`` per move,
        a CUDA graph of ``TOUR_GPU_GRAPH_MOVES`` moves replayed until the device's done flag), as the CPU
        twin's :func:`~.local_search.local_search` with the full neighbourhood: the same moves, so the
        same final tour.

        Parameters
        ----------
        p : int array (n,)
            Start tour (not changed).
        eps : float
            A move is applied when its delta is below ``-eps``.
        max_moves : int, optional
            Most moves (default ``50 n + 1000``).
        budget_s : float, optional
            Seconds on the device clock: no move is applied after that (the device's ``ls_finish`` reads
            the clock before each move), the tour reached is returned and ``last_complete[0]`` is False.

        Returns
        -------
        (tour, cost, moves) : (int64 (n,), float, int)
            ``cost`` is the closed-tour cost summed on the device as the CPU's ``tour_cost`` sums it.
        """
        max_moves = 50 * self.n + 1000 if max_moves is None else int(max_moves)
        self.set_tour(p, eps, max_moves, apply=True, budget_s=budget_s)
        moves = 0
        if max_moves > 0:
            moves, _ = self._phase_graph().run(self.flags, max_moves + 1)
        tour = self.p.get(stream=self.stream).astype(np.int64)
        cost = float(self.cost.get(stream=self.stream)[0])
        timed_out = int(self.timed_out.get(stream=self.stream)[0])
        self.stream.synchronize()
        self.last_complete = np.array([not timed_out])
        return tour, cost, int(moves)

    # ---------------------------------------------------------------- many tours
    def _batch_bufs(self, B):
        if self._batch is None or self._batch["B"] != B:
            cp = self.cp
            n = self.n
            self._batch = None  # free the old buffers first
            with self.stream:
                self._batch = {
                    "B": B,
                    "P": cp.zeros((B, n), dtype=cp.int32), "S": cp.zeros((B, n), dtype=cp.int32),
                    "ARC": cp.zeros((B, n), dtype=cp.float64), "FWD": cp.zeros((B, n), dtype=cp.float64),
                    "BWD": cp.zeros((B, n), dtype=cp.float64), "cost": cp.zeros(B, dtype=cp.float64),
                    "moves": cp.zeros(B, dtype=cp.int32), "improved": cp.zeros(B, dtype=cp.int32),
                    "steps": cp.zeros(B, dtype=cp.int32),
                    "CUR": cp.zeros((B, n), dtype=cp.int32),
                    "POS": cp.zeros((B, n), dtype=cp.int32), "QUEUE": cp.zeros((B, n), dtype=cp.int32),
                    "INQ": cp.zeros((B, n), dtype=cp.int32), "COMPLETE": cp.zeros(B, dtype=cp.int32),
                }
        return self._batch

    def _tours32(self, P):
        P = np.asarray(P)
        if P.ndim != 2 or P.shape[1] != self.n or P.shape[0] < 1:
            raise ValueError(f"tours must have shape (B, {self.n}) with B >= 1, got {P.shape}")
        bad = np.flatnonzero((np.sort(P, axis=1) != np.arange(self.n)).any(axis=1))
        if bad.size:
            raise ValueError(f"tour {bad[0]} is not a permutation of 0..n-1")
        return np.ascontiguousarray(P, dtype=np.int32)

    def local_search_batch(self, P, eps=0.0, max_moves=None):
        """Descents of B tours at once, one block per tour, each a persistent loop on the device
        (``ls_batch``: one launch, one host sync for all of them). Tour b's result equals
        :meth:`local_search` of ``P[b]`` (and the CPU twin's).

        Parameters
        ----------
        P : int array (B, n)
            Start tours (not changed).
        eps, max_moves
            As :meth:`local_search` (per tour).

        Returns
        -------
        (tours, costs, moves) : (int64 (B, n), float64 (B,), int64 (B,))
        """
        max_moves = 50 * self.n + 1000 if max_moves is None else int(max_moves)
        P32 = self._tours32(P)
        B = P32.shape[0]
        bb = self._batch_bufs(B)
        bb["P"].set(P32, stream=self.stream)
        with self.stream:
            self.k_batch((B,), (self.threads,),
                         (np.int32(self.n), np.int32(B), self.c, self.ct, bb["P"], bb["S"], bb["ARC"], bb["FWD"], bb["BWD"],
                          np.int32(self.exact), np.float64(eps), np.int32(max_moves), np.int32(self.tpr), bb["cost"],
                          bb["moves"]))
        tours = bb["P"].get(stream=self.stream).astype(np.int64)
        costs = bb["cost"].get(stream=self.stream)
        moves = bb["moves"].get(stream=self.stream).astype(np.int64)
        self.stream.synchronize()
        return tours, costs, moves

    # ---------------------------------------------------------------- iterated local search
    def ils_start(self, P, costs):
        """Load B chains (tours ``P`` (B, n), each a local minimum, and their costs) for :meth:`ils_round`."""
        P32 = self._tours32(P)
        bb = self._batch_bufs(P32.shape[0])
        bb["CUR"].set(P32, stream=self.stream)
        bb["cost"].set(np.asarray(costs, np.float64), stream=self.stream)
        with self.stream:
            bb["moves"].fill(0)
            bb["improved"].fill(0)
            bb["steps"].fill(0)

    def ils_round(self, cuts, eps, max_moves, budget_s=None):
        """One launch of ``ls_ils``: ``cuts.shape[1]`` double-bridge steps per chain (int32 (B, iters, 3)
        from :func:`double_bridge_cuts`). ``budget_s``: every chain stops that many seconds after the
        launch (one device-clock time for all blocks, ``ls_set_stop``), abandoning and rejecting the step
        under way (None: no limit). Returns the chains' costs (float64 (B,)): the one host sync of the
        round."""
        bb = self._batch
        B, iters = int(cuts.shape[0]), int(cuts.shape[1])
        if bb is None or bb["B"] != B:
            raise ValueError("ils_round before ils_start with the same number of chains")
        with self.stream:
            cuts_d = self.cp.asarray(np.ascontiguousarray(cuts, dtype=np.int32))
            self.k_set_stop((1,), (32,), (np.uint64(device_budget_ns(budget_s)), self.ils_stop))
            self.k_ils((B,), (self.threads,),
                       (np.int32(self.n), np.int32(B), np.int32(iters), self.c, self.ct, bb["CUR"], bb["cost"], bb["P"], bb["S"],
                        bb["ARC"], bb["FWD"], bb["BWD"], cuts_d, np.int32(self.exact), np.float64(eps),
                        np.int32(max_moves), np.int32(self.tpr), self.ils_stop, bb["moves"], bb["improved"], bb["steps"]))
        costs = bb["cost"].get(stream=self.stream)
        self.stream.synchronize()
        return costs

    def ils_broadcast(self, best):
        """Copy chain ``best``'s tour and cost over every other chain (asynchronous)."""
        bb = self._batch
        B = bb["B"]
        with self.stream:
            self.k_broadcast(((self.n + 255) // 256, B), (256,), (np.int32(self.n), np.int32(B), np.int32(best), bb["CUR"],
                                                                   bb["cost"]))

    def ils_copy(self, src, dst):
        """Copy chain ``src``'s tour and cost over the chains ``dst`` (int array; asynchronous)."""
        bb = self._batch
        dst = np.asarray(dst, np.int64)
        if dst.size == 0:
            return
        with self.stream:
            d = self.cp.asarray(dst)
            bb["CUR"][d] = bb["CUR"][int(src)]
            bb["cost"][d] = bb["cost"][int(src)]

    # ---------------------------------------------------------------- candidate lists
    def _check_K(self, K):
        K = int(K)
        if not 1 <= K <= self.n - 1:
            raise ValueError(f"candidates per stop must be in 1..{self.n - 1}, got {K}")
        return K

    def candidates_paced(self, K, deadline):
        """The K-nearest candidate lists made on the device (:func:`candidate_rows_xp`: the CPU twin's
        lists, entry for entry) by chunks of ``TOUR_GPU_CAND_SORT_KEYS`` keys (whole rows), each chunk
        synchronised and the deadline checked before the next; kept for the candidate kernels. No host
        copy of the matrix or of the lists.

        Parameters
        ----------
        K : int
            Candidates per stop, 1..n-1.
        deadline : gpuroute.tours.budget.Deadline

        Returns
        -------
        cupy.ndarray or None
            int32 (n, K) on the device, or None when the deadline passed first (nothing kept).

        Raises
        ------
        ValueError
            K not in 1..n-1.
        """
        K = self._check_K(K)
        cp, n = self.cp, self.n
        rows = max(1, int(config.TOUR_GPU_CAND_SORT_KEYS) // n)
        with self.stream:
            out = cp.empty((n, K), dtype=cp.int32)
        for lo in range(0, n, rows):
            if deadline.left() <= 0:
                return None
            hi = min(n, lo + rows)
            with self.stream:
                out[lo:hi] = candidate_rows_xp(cp, self.c, self.ct, K, lo, hi)
            self.stream.synchronize()
        self.nbr, self.K, self._nbr_host = out, K, None
        return out

    def nearest_neighbour(self, first, last, budget_s=None):
        """The nearest-neighbour start tour on the device (kernel ``ls_nearest``): the CPU twin's
        :func:`~.local_search.nearest_neighbour_tour` stop for stop (ties to the lowest index), with
        :func:`~.local_search.nearest_neighbour_paced`'s rule when ``budget_s`` (device-clock seconds,
        None: no limit) runs out first: the stops not yet placed follow in index order, ``last`` still
        last. One launch, one block; the tour (n int32) comes back, the matrix does not.

        Returns
        -------
        (tour, complete) : (int64 (n,), bool)

        Raises
        ------
        ValueError
            ``first`` or ``last`` out of range.
        """
        n = self.n
        if not 0 <= int(first) < n or not -1 <= int(last) < n:
            raise ValueError(f"first={first}, last={last} out of range for {n} stops")
        cp = self.cp
        with self.stream:
            p = cp.zeros(n, dtype=cp.int32)
            used = cp.zeros(n, dtype=cp.int32)
            placed = cp.zeros(1, dtype=cp.int32)
            self.k_nearest((1,), (self.threads,), (np.int32(n), self.c, np.int32(first), np.int32(last), p, used,
                                                   np.uint64(device_budget_ns(budget_s)), placed))
        m = int(placed.get(stream=self.stream)[0])
        tour = p.get(stream=self.stream).astype(np.int64)
        self.stream.synchronize()
        limit = n - 1 if last >= 0 and last != first else n
        if m >= limit:
            return tour, True
        u = used.get(stream=self.stream).astype(bool)
        self.stream.synchronize()
        rest = np.flatnonzero(~u)
        tour[m:m + rest.size] = rest
        return tour, False

    def set_candidates(self, K, nbr=None):
        """Build the K-nearest candidate lists on the host (:func:`~.local_search.candidate_lists`, the CPU
        twin's; on the device with :func:`candidate_rows_xp` when the matrix came as a CuPy array), or take
        ``nbr`` (int64 (n, K), built so by the caller), and upload them (int32 (n, K)). Returns them
        (int64 (n, K) on the host; a CuPy int32 (n, K) for a CuPy matrix's own lists).

        Raises
        ------
        ValueError
            K not in 1..n-1; ``nbr`` of another shape.
        """
        K = self._check_K(K)
        if nbr is not None and np.shape(nbr) != (self.n, K):
            raise ValueError(f"candidate lists must have shape ({self.n}, {K}), got {np.shape(nbr)}")
        if nbr is None and self._host is None:
            if self.K != K:
                with self.stream:
                    self.nbr = candidate_rows_xp(self.cp, self.c, self.ct, K, 0, self.n)
                self.K, self._nbr_host = K, None
            return self.nbr
        if self.K != K or nbr is not None:
            nbr = ls.candidate_lists(self._host, K) if nbr is None else np.asarray(nbr, np.int64)
            with self.stream:
                self.nbr = self.cp.asarray(nbr.astype(np.int32))
            self.K = K
            self._nbr_host = nbr
        return self._nbr_host

    def _need_candidates(self):
        if self.nbr is None:
            raise ValueError("set_candidates(K) first")

    def cand_descent_batch(self, P, eps=0.0, max_moves=None, active=None, polish=True, budget_s=None):
        """Candidate-list descents of B tours at once, one block each (``ls_cand_batch``): tour b's result
        equals the CPU twin's ``local_search_queue(c, P[b], nbr, eps, max_moves, active, polish)`` with
        the lists of :meth:`set_candidates`.

        Parameters
        ----------
        P : int array (B, n)
            Start tours (not changed).
        eps, max_moves
            As :meth:`local_search` (per tour).
        active : int array (m,), optional
            Stops seeding the queue, in order (default: every stop, 0..n-1, as ``tsp`` seeds the CPU's).
        polish : bool
            Refill an empty queue from the best move of the whole candidate neighbourhood until none
            improves (the result is then a local minimum of that neighbourhood).
        budget_s : float, optional
            Seconds on the device clock per block (read before each move): a descent still running then
            stops with the tour reached, and ``last_complete[b]`` is False (None: no limit).

        Returns
        -------
        (tours, costs, moves) : (int64 (B, n), float64 (B,), int64 (B,))

        Raises
        ------
        ValueError
            Before :meth:`set_candidates`; a tour not a permutation; an active stop out of range.
        """
        self._need_candidates()
        max_moves = 50 * self.n + 1000 if max_moves is None else int(max_moves)
        act = np.arange(self.n) if active is None else np.asarray(active).ravel()
        if act.size and (act.min() < 0 or act.max() >= self.n):
            raise ValueError(f"active stops must be in 0..{self.n - 1}")
        P32 = self._tours32(P)
        B = P32.shape[0]
        bb = self._batch_bufs(B)
        bb["P"].set(P32, stream=self.stream)
        with self.stream:
            act_d = self.cp.asarray(np.concatenate([act, [0]]).astype(np.int32))  # never empty
            self.k_cand_batch((B,), (self.cand_threads,),
                              (np.int32(self.n), np.int32(B), self.c, self.nbr, np.int32(self.K), bb["P"], bb["POS"], bb["S"],
                               bb["ARC"], bb["FWD"], bb["BWD"], bb["QUEUE"], bb["INQ"], np.int32(self.exact),
                               np.float64(eps), np.int32(max_moves), np.int32(1 if polish else 0), act_d,
                               np.int32(act.size), bb["cost"], bb["moves"], np.uint64(device_budget_ns(budget_s)),
                               bb["COMPLETE"]))
        tours = bb["P"].get(stream=self.stream).astype(np.int64)
        costs = bb["cost"].get(stream=self.stream)
        moves = bb["moves"].get(stream=self.stream).astype(np.int64)
        complete = bb["COMPLETE"].get(stream=self.stream).astype(bool)
        self.stream.synchronize()
        self.last_complete = complete
        return tours, costs, moves

    def cand_ils_round(self, cuts, eps, max_moves, budget_s=None):
        """:meth:`ils_round` with the candidate-list descent (``ls_cand_ils``): per chain and step a double
        bridge at the host's cut points, the CPU twin's queue descent seeded with the six stops around the
        cuts (no polish), accept if not worse -- :func:`~.local_search.ils_round` step for step. Load the
        chains with :meth:`ils_start`. Returns the chains' costs (float64 (B,))."""
        self._need_candidates()
        bb = self._batch
        B, iters = int(cuts.shape[0]), int(cuts.shape[1])
        if bb is None or bb["B"] != B:
            raise ValueError("cand_ils_round before ils_start with the same number of chains")
        with self.stream:
            cuts_d = self.cp.asarray(np.ascontiguousarray(cuts, dtype=np.int32))
            self.k_set_stop((1,), (32,), (np.uint64(device_budget_ns(budget_s)), self.ils_stop))
            self.k_cand_ils((B,), (self.cand_threads,),
                            (np.int32(self.n), np.int32(B), np.int32(iters), self.c, self.nbr, np.int32(self.K), bb["CUR"],
                             bb["cost"], bb["P"], bb["POS"], bb["S"], bb["ARC"], bb["FWD"], bb["BWD"], bb["QUEUE"],
                             bb["INQ"], cuts_d, np.int32(self.exact), np.float64(eps), np.int32(max_moves), self.ils_stop,
                             bb["moves"], bb["improved"], bb["steps"]))
        costs = bb["cost"].get(stream=self.stream)
        self.stream.synchronize()
        return costs

    def ils_result(self, b):
        """Chain b's tour (int64 (n,)) and the chains' totals since :meth:`ils_start`: moves, improving
        steps, completed steps."""
        bb = self._batch
        tour = bb["CUR"][b].get(stream=self.stream).astype(np.int64)
        moves, improved, steps = (int(bb[k].get(stream=self.stream).astype(np.int64).sum())
                                  for k in ("moves", "improved", "steps"))
        self.stream.synchronize()
        return tour, moves, improved, steps


def _starts(rng, B, n, first, last):
    """B random tours with ``first`` in front and ``last`` (if >= 0) at the end."""
    mid = np.array([v for v in range(n) if v != first and v != last], np.int64)
    body = rng.permuted(np.tile(mid, (B, 1)), axis=1)
    cols = [np.full((B, 1), first, np.int64), body]
    if last >= 0:
        cols.append(np.full((B, 1), last, np.int64))
    return np.concatenate(cols, axis=1)


def search(C, first, last, *, deadline, rng, eps, max_moves, window, chains=None, neighbourhood=None,
           candidates=None):
    """The GPU iterated local search behind ``tsp(device="gpu")`` on the closed-tour matrix ``C``.

    Nearest-neighbour start, descended on the device; then B chains (``chains``), one block each, start
    from that local minimum; a round is one launch of ``iters`` double-bridge steps per chain (accepted
    when not worse), then the host reads the B costs. ``iters`` adapts towards ``TOUR_GPU_ROUND_S`` seconds
    a round (and B * iters stays under 2^18, bounding the host's draw of cut points).

    Time: every step is bounded (:mod:`gpuroute.tours.budget`). The candidate lists and the
    nearest-neighbour start are built on the host by paced chunks; the start descent and every round get
    the time left as a device-clock budget (each block reads the clock before each move, so a launch ends
    within one move of it; an ILS step still running is abandoned and rejected, the start descent keeps
    the tour reached); the host checks the deadline between launches. The last
    ``TOUR_POLISH_RESERVE`` of the time limit is left to the final polish of the best tour.
    Under 8 stops (no room for a double bridge): rounds of B random starts, full descents (tiny).

    A CuPy ``C`` never comes to the host (issue 23: the matrix straight from the GPU table): the device
    object is made first, on it in place; the candidate lists are sorted on the device by chunks of rows
    (:meth:`GPUTourSearch.candidates_paced`, the deadline checked between chunks), the nearest-neighbour
    start is a kernel with the time left as its device-clock budget (:meth:`GPUTourSearch.nearest_neighbour`);
    only tours, costs and the chains' counts come back, as on the host path.

    * ``neighbourhood="candidates"`` (default, ``TOUR_GPU_NEIGHBOURHOOD``): the CPU twin's queue-driven
      candidate-list descent (K = ``candidates``, default ``TOUR_GPU_CANDIDATES``, at most n - 1) on the
      device (``ls_cand_batch`` with polish for the start, ``ls_cand_ils`` for the chains); chains run
      independently and every ``TOUR_GPU_CAND_SYNC_ROUNDS`` rounds the best chain is copied over the worst
      half (:func:`worst_half`); the best tour is polished at the end, so it is a local minimum of the
      candidate neighbourhood (time allowing). B defaults to ``TOUR_GPU_CAND_CHAINS_PER_SM`` per
      multiprocessor.
    * ``neighbourhood="full"``: Brodtkorb et al.'s best-improvement over the whole neighbourhood (the start
      on the whole GPU, :meth:`GPUTourSearch.local_search`; chains by ``ls_ils``); the best chain is
      copied over the others every round. B defaults to ``TOUR_GPU_CHAINS_PER_SM`` per multiprocessor.

    Parameters
    ----------
    C : float64 (n, n), NumPy or CuPy
        Closed-tour costs (gpuroute.tours.api reduces open paths to closed tours), n >= 4.
    first, last : int
        The start tour's first stop and, if >= 0, last stop.
    deadline : gpuroute.tours.budget.Deadline
        The end of the search.
    rng : numpy.random.Generator
    eps : float
        Improvement threshold of moves and of acceptance.
    max_moves : int
        Most moves per descent.
    window : int
        Double-bridge stretch (0: the whole tour).
    chains : int, optional
    neighbourhood : {"candidates", "full"}, optional
    candidates : int, optional
        Candidate-list width K.

    Returns
    -------
    (tour, cost, trace, stats) : (int64 (n,), float, list of (s, cost), dict)
        The best tour found, its closed cost over ``C``, the improvements, and counts (starts,
        ils_iterations, improvements, moves, chains, rounds, neighbourhood: "full" or "candidates:K",
        complete: False when the time ran out before the start descent or the final polish ended).

    Raises
    ------
    ValueError
        Unknown neighbourhood.
    """
    hood = config.TOUR_GPU_NEIGHBOURHOOD if neighbourhood is None else neighbourhood
    if hood not in NEIGHBOURHOODS:
        raise ValueError(f"neighbourhood must be one of {NEIGHBOURHOODS}, got {hood!r}")
    from .budget import Pacer

    n = C.shape[0]
    dl = deadline
    cand = hood == "candidates" and n >= 8
    K = min(int(config.TOUR_GPU_CANDIDATES if candidates is None else candidates), n - 1)
    stats = {"starts": 0, "ils_iterations": 0, "improvements": 0, "moves": 0, "chains": 0, "rounds": 0,
             "neighbourhood": f"candidates:{K}" if cand else "full", "complete": False}
    if is_cupy_array(C):  # on the device already: no upload, lists and start made there
        g = GPUTourSearch(C)
        nbr = g.candidates_paced(K, dl) if cand else None
        left = dl.left()
        p0, built = (g.nearest_neighbour(first, last, budget_s=left) if (nbr is not None or not cand) and left > 0
                     else (None, False))
    else:
        g = None
        pace = Pacer(dl)
        nbr = ls.candidate_lists_paced(C, K, pace) if cand else None
        p0, built = ls.nearest_neighbour_paced(C, first, last, pace) if nbr is not None or not cand else (None, False)
    if p0 is None:  # out of time while building the candidate lists: the stops in index order
        mid = [v for v in range(n) if v != first and v != last]
        p0 = np.array([first] + mid + ([last] if last >= 0 else []), np.int64)
    setup_s = 0.0 if g is not None else 8.0 * n * n / float(config.TOUR_GPU_SETUP_BYTES_PER_S)
    if not built or dl.left() < setup_s:  # no time for the device's set-up: the tour built so far
        stats["setup_skipped"] = bool(built)
        c0 = closed_cost(C, p0)
        return p0, c0, [(dl.elapsed(), c0)], stats
    if g is None:
        g = GPUTourSearch(C)
    per_sm = config.TOUR_GPU_CAND_CHAINS_PER_SM if cand else config.TOUR_GPU_CHAINS_PER_SM
    B = int(chains) if chains else g.sms * int(per_sm)
    stats["chains"] = B
    trace = []
    left = dl.left()
    if left <= 0:
        c0 = closed_cost(C, p0)
        return p0, c0, [(dl.elapsed(), c0)], stats
    if cand and not is_cupy_array(C):  # (a CuPy matrix's lists are on the device already)
        g.set_candidates(K, nbr)
    if cand:
        tours, costs, mv = g.cand_descent_batch(p0[None, :], eps, max_moves, polish=True, budget_s=left)
        best_p, best_c, moves = tours[0], float(costs[0]), int(mv[0])
    else:
        best_p, best_c, moves = g.local_search(p0, eps, max_moves, budget_s=left)
    complete = bool(g.last_complete[0])
    stats["starts"] = 1
    stats["moves"] = moves
    trace.append((dl.elapsed(), best_c))
    if not complete:
        return best_p, best_c, trace, stats
    if n < 8:  # restarts (tiny descents)
        while dl.left() > 0:
            tours, costs, mv = g.local_search_batch(_starts(rng, B, n, first, last), eps, max_moves)
            stats["starts"] += B
            stats["rounds"] += 1
            stats["moves"] += int(mv.sum())
            b = int(np.argmin(costs))
            if costs[b] < best_c - eps:
                best_p, best_c = tours[b], float(costs[b])
                stats["improvements"] += 1
                trace.append((dl.elapsed(), best_c))
        stats["complete"] = True
        return best_p, best_c, trace, stats
    g.ils_start(np.tile(best_p, (B, 1)), np.full(B, best_c))
    iters = 1
    max_iters = max(1, min(1 << 12, (1 << 18) // B))
    reserve = float(config.TOUR_POLISH_RESERVE) * dl.limit if cand else 0.0
    target = min(float(config.TOUR_GPU_ROUND_S), 0.1 * dl.limit)
    sync = max(1, int(config.TOUR_GPU_CAND_SYNC_ROUNDS))
    best_b = 0
    run = g.cand_ils_round if cand else g.ils_round
    while (left := dl.left() - reserve) > 0:
        t_round = dl.elapsed()
        cuts = double_bridge_cuts(rng, n, (B, iters), window)
        left = dl.left() - reserve
        if left <= 0:
            break
        costs = run(cuts, eps, max_moves, budget_s=left)
        el = dl.elapsed() - t_round
        stats["rounds"] += 1
        best_b = int(np.argmin(costs))
        if costs[best_b] < best_c - eps:
            trace.append((dl.elapsed(), float(costs[best_b])))
        best_c = float(costs[best_b])  # accepted steps may rise by eps: the chain's cost, as the CPU's ILS
        if B > 1:
            if not cand:
                g.ils_broadcast(best_b)
            elif stats["rounds"] % sync == 0:
                g.ils_copy(best_b, worst_half(costs, best_b))
        if el < 0.5 * target and iters < max_iters:
            iters *= 2
        elif el > 2 * target and iters > 1:
            iters //= 2
    tour, mv, imp, steps = g.ils_result(best_b)
    stats["moves"] += mv
    stats["improvements"] += imp
    stats["ils_iterations"] = steps
    stats["complete"] = True
    if cand and (left := dl.left()) > 0:  # a local minimum of the candidate neighbourhood (the queue misses
        # some moves), time allowing
        tours, costs, mv = g.cand_descent_batch(tour[None, :], eps, max_moves, active=np.empty(0, np.int64),
                                                polish=True, budget_s=left)
        tour, best_c = tours[0], float(costs[0])
        stats["moves"] += int(mv[0])
        stats["complete"] = bool(g.last_complete[0])
    elif cand:
        stats["complete"] = False
    return tour, best_c, trace, stats


def warm_up():
    """Compile ``local_search.cu`` and CuPy's helper kernels, create the CUDA context and run every
    kernel and method of :class:`GPUTourSearch` once on a 12-stop instance (see
    :mod:`gpuroute.tours.warmup`).

    Raises
    ------
    GPUUnavailableError
        Without a usable GPU.
    """
    rng = np.random.default_rng(0)
    n = 12
    C = rng.integers(1, 100, (n, n)).astype(np.float64)
    g = GPUTourSearch(C)
    p = np.arange(n)
    g.best_move(p)
    g.local_search(p, 0.5, budget_s=10.0)
    P = np.stack([p, p[::-1].copy()])
    g.local_search_batch(P, 0.5)
    g.set_candidates(3)
    tours, costs, _ = g.cand_descent_batch(P, 0.5, budget_s=10.0)
    g.ils_start(tours, costs)
    cuts = double_bridge_cuts(rng, n, (2, 2), 0)
    g.cand_ils_round(cuts, 0.5, 100, budget_s=10.0)
    g.ils_round(cuts, 0.5, 100, budget_s=10.0)
    g.ils_copy(0, np.array([1]))
    g.ils_broadcast(0)
    g.ils_result(0)


def warm_up_device_matrix(dtype=np.float64):
    """Compile CuPy's kernels of ``tsp`` on a CuPy matrix of ``dtype`` (its checks on the device, the
    closed-tour reductions, the candidate lists sorted on the device, ``ls_nearest``) on a 12-stop
    instance, before a time limit runs (see :mod:`gpuroute.tours.warmup`).

    Raises
    ------
    GPUUnavailableError
        Without a usable GPU.
    """
    resolve_device("gpu")
    import cupy as cp

    from . import api
    from .budget import Deadline

    n = 12
    c = cp.asarray(np.random.default_rng(0).integers(1, 100, (n, n)).astype(dtype))
    api._validate(c)
    float(abs(c).max())
    api.tour_cost(c, np.arange(n))
    for start, end in ((None, None), (0, None), (None, n - 1), (0, n - 1)):
        C = api._reduce_to_closed(c, start, end)[0]
    g = GPUTourSearch(C)
    g.candidates_paced(3, Deadline(10.0))
    g.nearest_neighbour(0, n - 1, budget_s=10.0)
    g.nearest_neighbour(0, -1, budget_s=1e-9)
    closed_cost(C, np.arange(n))
