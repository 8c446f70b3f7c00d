"""GPU twin of the CVRP local search (kernels in ``vrp.cu``; CPU twin :mod:`.cvrp`).

Brodtkorb, Hagen, Schulz, Hasle, "GPU computing in discrete optimization. Part I" (EURO J. Transp.
Logist. 2013), the VRP part: the whole neighbourhood of the current solution -- relocate, swap and 2-opt*
between routes under capacity, relocate, swap, 2-opt and Or-opt (2-3 customers, both orientations) within
a route -- is evaluated in parallel and reduced to the best feasible move, which is applied on the device;
the loop runs until no move improves.

Same state (padded routes ``E``, ``lens``, ``nr``; prefix sums and loads filled left to right as the CPU's
``refresh``), moves, deltas (the CPU's operations in its order) and tie-breaking as
:func:`~.cvrp.best_vrp_move`: the device reduces on the key ``(delta, r1, rank)`` with the rank of
:func:`~.cvrp.vrp_move_rank`, which numbers each first route's moves in the order the CPU visits them, so
GPU and CPU pick the same best move, bit for bit, and make the same descent. The evaluation is split into
work items (:func:`~.cvrp.vrp_items`; :func:`~.cvrp.emulate_best_vrp_move` replays the kernel's items
on the CPU, the test of the decomposition without a GPU).

Two ways to run:

* one solution, the whole GPU (:meth:`GPUVRPSearch.local_search`): per move one launch of ``vrp_eval``
  (items over many blocks, each writes its best key) and one of ``vrp_finish`` (one block: reduce, apply,
  refresh); ``TOUR_GPU_GRAPH_MOVES`` moves are one CUDA graph replayed until the device's done flag.
* chains (:meth:`GPUVRPSearch.chains_round`, kernel ``vrp_ils``): B chains, a block each; one launch runs
  ``iters`` steps per chain -- ruin & recreate with host-drawn lists (:func:`~.cvrp.ruin_orders`: a
  customer, its nearest customers, in random order; cheapest feasible reinsertion), the block's descent,
  accept if not worse -- within the time left (device clock); :func:`~.cvrp.vrp_steps` is the same chain
  on the CPU.

Device memory: the matrix (8 n^2 bytes) and, per chain, two solutions' routes and the prefix sums:
about ``32 R W + 16 (N + R)`` bytes with ``R = N + 1`` rows of width ``W``; the chains are capped to
``TOUR_VRP_GPU_MEMORY_FRACTION`` of the free memory.
"""
from __future__ import annotations

import importlib

import numpy as np

from .. import config
from ..backend import resolve_device
from ..backend.flags import N_FLAGS
from .budget import device_budget_ns

__all__ = ["GPUVRPSearch", "search", "warm_up"]

_CU = "tours/vrp.cu"
cv = importlib.import_module("gpuroute.tours.cvrp")  # the package's function cvrp shadows the module


class GPUVRPSearch:
    """A CVRP instance on the GPU with the buffers of one whole-GPU solution and of B chains.

    Parameters
    ----------
    costs : array_like, float64 (n, n)
        Arc costs (asymmetric allowed), zero diagonal, finite.
    demands : array_like, float64 (n,)
        Demands (the depot's 0).
    capacity : float
    depot : int
    R, W : int
        Rows and width of the padded route arrays (as :func:`~.cvrp.pack_routes`; R >= the routes + 1).
    threads : int, optional
        Threads per block (default ``config.TOUR_VRP_GPU_THREADS``; a power of two, 64..1024).

    Raises
    ------
    ValueError
        Bad shapes or ``threads``.
    GPUUnavailableError
        Without a usable GPU.
    """

    def __init__(self, costs, demands, capacity, depot, R, W, threads=None):
        resolve_device("gpu")
        import cupy as cp

        from ..backend.kernels import load_module, multiprocessors

        C = np.ascontiguousarray(costs, dtype=np.float64)
        if C.ndim != 2 or C.shape[0] != C.shape[1] or C.shape[0] < 2:
            raise ValueError(f"costs must be a square (n, n) matrix with n >= 2, got shape {C.shape}")
        n = C.shape[0]
        dem = np.ascontiguousarray(demands, dtype=np.float64)
        if dem.shape != (n,):
            raise ValueError(f"demands must have shape ({n},), got {dem.shape}")
        threads = int(config.TOUR_VRP_GPU_THREADS if threads is None else threads)
        if threads < 64 or threads > 1024 or threads & (threads - 1):
            raise ValueError(f"threads per block must be a power of two in 64..1024, got {threads}")
        self.cp = cp
        self.n, self.N, self.R, self.W = n, n - 1, int(R), int(W)
        self.cap, self.depot, self.threads = float(capacity), int(depot), threads
        self.sms = multiprocessors()
        self.grid = max(1, self.sms * int(config.TOUR_GPU_EVAL_BLOCKS_PER_SM))
        if int(config.TOUR_GPU_EVAL_MAX_BLOCKS):
            self.grid = min(self.grid, int(config.TOUR_GPU_EVAL_MAX_BLOCKS))
        self.stream = cp.cuda.Stream(non_blocking=False)
        with self.stream:
            self.c = cp.asarray(C)
            self.dem = cp.asarray(dem)
            self.one = self._sol_bufs(1)
            self.blk_d = cp.zeros(self.grid, dtype=cp.float64)
            self.blk_r = cp.zeros(self.grid, dtype=cp.int32)
            self.blk_k = cp.zeros(self.grid, dtype=cp.int64)
            self.flags = cp.zeros(N_FLAGS, dtype=cp.int32)
            self.ctl = cp.zeros(2, dtype=cp.int32)  # max_moves, apply
            self.ctl_d = cp.zeros(1, dtype=cp.float64)  # eps
            self.best_d = cp.zeros(1, dtype=cp.float64)
            self.best_m = cp.zeros(6, dtype=cp.int32)
            self.cost = cp.zeros(1, dtype=cp.float64)
            self.stop_at = cp.zeros(1, dtype=cp.uint64)
            self.timed_out = cp.zeros(1, dtype=cp.int32)
            self.chains_stop = cp.zeros(1, dtype=cp.uint64)  # the common end of a chains round
        mod = load_module(_CU)
        self.k_state = mod.get_function("vrp_state")
        self.k_eval = mod.get_function("vrp_eval")
        self.k_finish = mod.get_function("vrp_finish")
        self.k_ils = mod.get_function("vrp_ils")
        self.k_set_stop = mod.get_function("vrp_set_stop")
        self._graph = None
        self._chains = None
        #: the last descent ended by itself (not cut by its budget_s)
        self.last_complete = True
        self.stream.synchronize()

    # ---------------------------------------------------------------- buffers
    @staticmethod
    def chain_bytes(N, R, W):
        """Device bytes of one chain (working solution + current solution + marks)."""
        return 4 * R * W * 2 + 24 * R * W + 8 * R + 12 * R + 16 * (N + R) + 4 * (R + 1) + 8 * W + 4 * (N + 1)

    def _sol_bufs(self, B):
        cp = self.cp
        R, W, N = self.R, self.W, self.N
        return {"B": B, "E": cp.zeros((B, R, W), cp.int32), "L": cp.zeros((B, R), cp.int32),
                "NR": cp.zeros(B, cp.int32), "LOAD": cp.zeros((B, R), cp.float64),
                "FWD": cp.zeros((B, R, W), cp.float64), "BWD": cp.zeros((B, R, W), cp.float64),
                "DCUM": cp.zeros((B, R, W), cp.float64), "CR": cp.zeros((B, N), cp.int32),
                "CA": cp.zeros((B, N), cp.int32), "XR": cp.zeros((B, N + R), cp.int32),
                "XA": cp.zeros((B, N + R), cp.int32), "OFF": cp.zeros((B, R + 1), cp.int32),
                "SCR": cp.zeros((B, 2 * W), cp.int32)}

    @staticmethod
    def _sol_args(sb):
        return tuple(sb[k] for k in ("E", "L", "NR", "LOAD", "FWD", "BWD", "DCUM", "CR", "CA", "XR", "XA", "OFF",
                                     "SCR"))

    def _dims(self):
        return (np.int32(self.n), np.int32(self.N), np.int32(self.R), np.int32(self.W))

    def _check(self, E, lens, nr):
        E = np.asarray(E)
        lens = np.asarray(lens)
        if E.shape != (self.R, self.W) or lens.shape != (self.R,):
            raise ValueError(f"routes must have shapes ({self.R}, {self.W}) and ({self.R},), got {E.shape}, "
                             f"{lens.shape}")
        if not 1 <= int(nr) <= self.R:
            raise ValueError(f"nr must be in 1..{self.R}, got {nr}")
        return np.ascontiguousarray(E, np.int32), np.ascontiguousarray(lens, np.int32)

    # ---------------------------------------------------------------- one solution, the whole GPU
    def _args_state(self, budget_ns=0):
        return self._dims() + (self.c, self.dem) + self._sol_args(self.one) + (
            self.cost, np.uint64(budget_ns), self.stop_at, self.timed_out)

    def _args_eval(self, _parity=0):
        return self._dims() + (self.c, self.dem, np.float64(self.cap)) + self._sol_args(self.one) + (
            self.flags, self.blk_d, self.blk_r, self.blk_k)

    def _args_finish(self, _parity=0):
        return self._dims() + (np.int32(self.depot), np.int32(self.grid), self.c, self.dem) + self._sol_args(self.one) + (
            self.blk_d, self.blk_r, self.blk_k, self.ctl, self.ctl_d, self.flags, self.best_d, self.best_m,
            self.cost, self.stop_at, self.timed_out)

    def set_solution(self, E, lens, nr, eps=0.0, max_moves=0, apply=False, budget_s=None):
        """Upload a solution (``E`` int (R, W), ``lens`` int (R,), ``nr``: as :func:`~.cvrp.pack_routes`
        makes them), reset the flags and refresh its state on the device (``vrp_state``); asynchronous.
        ``budget_s``: the descent that follows stops that many seconds later (device clock)."""
        E32, L32 = self._check(E, lens, nr)
        sb = self.one
        sb["E"][0].set(E32, stream=self.stream)
        sb["L"][0].set(L32, stream=self.stream)
        sb["NR"].set(np.array([nr], np.int32), stream=self.stream)
        self.ctl.set(np.array([max_moves, 1 if apply else 0], np.int32), stream=self.stream)
        self.ctl_d.set(np.array([eps], np.float64), stream=self.stream)
        with self.stream:
            self.flags.fill(0)
            self.k_state((1,), (self.threads,), self._args_state(device_budget_ns(budget_s)))

    def best_move(self, E, lens, nr):
        """The best feasible move of the whole neighbourhood, as :func:`~.cvrp.best_vrp_move` returns it:
        ``(delta, t, r1, a, r2, b, k)`` (delta bit for bit; ``inf`` and type -1 when no move is feasible).

        Raises
        ------
        ValueError
            Bad shapes.
        """
        self.set_solution(E, lens, nr)
        with self.stream:
            self.k_eval((self.grid,), (self.threads,), self._args_eval())
            self.k_finish((1,), (self.threads,), self._args_finish())
        d = self.best_d.get(stream=self.stream)
        m = self.best_m.get(stream=self.stream)
        self.stream.synchronize()
        return (float(d[0]),) + tuple(int(v) for v in m)

    def _phase_graph(self):
        if self._graph is None:
            from ..backend.phase_loop import PhaseGraph

            launches = [(self.k_eval, (self.grid,), (self.threads,), self._args_eval),
                        (self.k_finish, (1,), (self.threads,), self._args_finish)]
            self._graph = PhaseGraph(self.stream, launches, int(config.TOUR_GPU_GRAPH_MOVES))
        return self._graph

    def _read_one(self):
        sb = self.one
        E = sb["E"][0].get(stream=self.stream).astype(np.int64)
        lens = sb["L"][0].get(stream=self.stream).astype(np.int64)
        nr = int(sb["NR"].get(stream=self.stream)[0])
        cost = float(self.cost.get(stream=self.stream)[0])
        timed_out = int(self.timed_out.get(stream=self.stream)[0])
        self.stream.synchronize()
        return E, lens, nr, cost, timed_out

    def local_search(self, E, lens, nr, eps=0.0, max_moves=None, budget_s=None):
        """Best-improvement descent of one solution on the whole GPU (``vrp_eval`` + ``vrp_finish`` a move,
        a CUDA graph of ``TOUR_GPU_GRAPH_MOVES`` moves replayed until the device's done flag), as
        :func:`~.cvrp.vrp_local_search`: the same moves, so the same final solution.

        Parameters
        ----------
        E, lens, nr
            The start (not changed).
        eps : float
            A move is applied when its delta is below ``-eps``.
        max_moves : int, optional
            Most moves (default ``50 n + 1000``).
        budget_s : float, optional
            Seconds on the device clock: no move is applied after that (read before each), and
            :attr:`last_complete` is then False.

        Returns
        -------
        (E, lens, nr, cost, moves) : (int64 (R, W), int64 (R,), int, float, int)
            ``cost`` summed on the device as :func:`~.cvrp.route_costs_total` sums it.
        """
        max_moves = 50 * self.n + 1000 if max_moves is None else int(max_moves)
        self.set_solution(E, lens, nr, eps, max_moves, apply=True, budget_s=budget_s)
        moves = 0
        if max_moves > 0:
            moves, _ = self._phase_graph().run(self.flags, max_moves + 1)
        E, lens, nr, cost, timed_out = self._read_one()
        self.last_complete = not timed_out
        return E, lens, nr, cost, int(moves)

    # ---------------------------------------------------------------- chains
    def chains_start(self, E, lens, nr, cost, B):
        """Load B chains, each with the solution (E, lens, nr) of cost ``cost`` (a local minimum)."""
        E32, L32 = self._check(E, lens, nr)
        cp = self.cp
        if self._chains is None or self._chains["B"] != B:
            self._chains = None
            with self.stream:
                ch = self._sol_bufs(B)
                ch.update(CE=cp.zeros((B, self.R, self.W), cp.int32), CL=cp.zeros((B, self.R), cp.int32),
                          CNR=cp.zeros(B, cp.int32), ccost=cp.zeros(B, cp.float64),
                          MARK=cp.zeros((B, self.n), cp.int32), moves=cp.zeros(B, cp.int32),
                          improved=cp.zeros(B, cp.int32), steps=cp.zeros(B, cp.int32))
            self._chains = ch
        ch = self._chains
        with self.stream:
            ch["CE"][:] = cp.asarray(E32)[None]
            ch["CL"][:] = cp.asarray(L32)[None]
            ch["CNR"].fill(int(nr))
            ch["ccost"].fill(float(cost))
            for k in ("moves", "improved", "steps"):
                ch[k].fill(0)

    def chains_round(self, orders, eps, max_moves, budget_s=None):
        """One launch of ``vrp_ils``: ``orders.shape[1]`` steps per chain (int32 (B, iters, kmax) ruin lists
        from :func:`~.cvrp.ruin_orders`). ``budget_s``: every chain stops that many seconds after the
        launch (one device-clock time for all blocks, ``vrp_set_stop``), abandoning and rejecting the step
        under way. Returns the chains' costs (float64 (B,)): the one host sync of the round."""
        ch = self._chains
        orders = np.ascontiguousarray(orders, dtype=np.int32)
        if ch is None or orders.ndim != 3 or orders.shape[0] != ch["B"]:
            raise ValueError("chains_round before chains_start with as many chains as rows of orders")
        B, iters, kmax = orders.shape
        with self.stream:
            od = self.cp.asarray(orders)
            self.k_set_stop((1,), (32,), (np.uint64(device_budget_ns(budget_s)), self.chains_stop))
            self.k_ils((B,), (self.threads,),
                       self._dims() + (np.int32(self.depot), np.int32(B), np.int32(iters), np.int32(kmax), self.c, self.dem,
                                       np.float64(self.cap)) + self._sol_args(ch) + (
                           ch["CE"], ch["CL"], ch["CNR"], ch["ccost"], ch["MARK"], od, np.float64(eps),
                           np.int32(max_moves), self.chains_stop, ch["moves"], ch["improved"], ch["steps"]))
        costs = ch["ccost"].get(stream=self.stream)
        self.stream.synchronize()
        return costs

    def chains_copy(self, src, dst):
        """Copy chain ``src``'s current solution and cost over the chains ``dst`` (asynchronous)."""
        ch = self._chains
        dst = np.asarray(dst, np.int64)
        if dst.size == 0:
            return
        with self.stream:
            d = self.cp.asarray(dst)
            for k in ("CE", "CL", "CNR", "ccost"):
                ch[k][d] = ch[k][int(src)]

    def chain_result(self, b):
        """Chain b's current solution ``(E, lens, nr, cost)`` and the chains' totals since
        :meth:`chains_start`: moves, improving steps, completed steps."""
        ch = self._chains
        E = ch["CE"][b].get(stream=self.stream).astype(np.int64)
        lens = ch["CL"][b].get(stream=self.stream).astype(np.int64)
        nr = int(ch["CNR"][b].get(stream=self.stream))
        cost = float(ch["ccost"][b].get(stream=self.stream))
        tot = [int(ch[k].get(stream=self.stream).astype(np.int64).sum()) for k in ("moves", "improved", "steps")]
        self.stream.synchronize()
        return E, lens, nr, cost, tot[0], tot[1], tot[2]


def _chains(g, B):
    """Chains: ``B`` if given, else ``TOUR_VRP_GPU_CHAINS_PER_SM`` a multiprocessor, capped by memory."""
    if B:
        return int(B)
    B = g.sms * int(config.TOUR_VRP_GPU_CHAINS_PER_SM)
    free = g.cp.cuda.Device().mem_info[0]
    per = GPUVRPSearch.chain_bytes(g.N, g.R, g.W)
    return max(1, min(B, int(free * float(config.TOUR_VRP_GPU_MEMORY_FRACTION)) // per))


def search(C, dem, cap, depot, E, lens, nr, near, *, deadline, rng, eps, max_moves, chains=None):
    """The GPU search behind ``cvrp(device="gpu")`` from the packed start (E, lens, nr).

    The start's descent on the whole GPU (:meth:`GPUVRPSearch.local_search`, device-clock budget: the
    time left); then B chains (a block each, ``chains`` or ``TOUR_VRP_GPU_CHAINS_PER_SM`` a
    multiprocessor, fewer if their memory does not fit) start from that local minimum; a round is one
    launch of ``iters`` ruin-and-recreate steps per chain (the host draws the lists,
    :func:`~.cvrp.ruin_orders`), each step accepted when not worse, with the time left as its device-clock
    budget (a step still running then is abandoned); the host reads the B costs; every
    ``TOUR_VRP_GPU_SYNC_ROUNDS`` rounds the best chain is copied over the worst half. ``iters`` adapts
    towards ``TOUR_GPU_ROUND_S`` a round. Every launch ends within about one neighbourhood evaluation of
    its budget, so the search ends within about one round's host work of the deadline.

    Parameters
    ----------
    C : float64 (n, n)
        Costs with a zero diagonal.
    dem : float64 (n,)
    cap : float
    depot : int
    E, lens, nr
        The start, as :func:`~.cvrp.pack_routes` makes it.
    near : int64 (n, K)
        Nearest customers of each customer (the ruin lists).
    deadline : gpuroute.tours.budget.Deadline
    rng : numpy.random.Generator
    eps : float
        Improvement threshold of moves and of acceptance.
    max_moves : int
        Most moves a descent.
    chains : int, optional

    Returns
    -------
    (E, lens, nr, trace, stats)
        The best solution (int64 arrays), the improvements ``(seconds, cost)``, and counts (moves,
        iterations: steps completed, improvements, chains, rounds, complete).
    """
    from .gpu import worst_half

    dl = deadline
    n = C.shape[0]
    N = n - 1
    R, W = E.shape
    stats = {"moves": 0, "iterations": 0, "improvements": 0, "chains": 0, "rounds": 0, "complete": False}
    g = GPUVRPSearch(C, dem, cap, depot, R, W)
    left = dl.left()
    if left <= 0:
        cost = cv.vrp_cost(C, [E[r, 1:lens[r] + 1] for r in range(nr)], depot)
        return E, lens, nr, [(dl.elapsed(), cost)], stats
    E, lens, nr, best_c, mv = g.local_search(E, lens, nr, eps, max_moves, budget_s=left)
    stats["moves"] = mv
    trace = [(dl.elapsed(), best_c)]
    if not g.last_complete or N < 2:
        stats["complete"] = bool(g.last_complete)
        return E, lens, nr, trace, stats
    stats["complete"] = True
    B = _chains(g, chains)
    stats["chains"] = B
    g.chains_start(E, lens, nr, best_c, B)
    max_remove = max(2, min(N, 4 + N // 10, near.shape[1] + 1))
    iters = 1
    max_iters = max(1, min(1 << 10, (1 << 16) // B))
    target = min(float(config.TOUR_GPU_ROUND_S), 0.1 * dl.limit)
    sync = max(1, int(config.TOUR_VRP_GPU_SYNC_ROUNDS))
    best_b = 0
    while dl.left() > 0:
        t_round = dl.elapsed()
        orders = cv.ruin_orders(rng, near, depot, n, max_remove, (B, iters))
        left = dl.left()
        if left <= 0:
            break
        costs = g.chains_round(orders, eps, max_moves, budget_s=left)
        el = dl.elapsed() - t_round
        stats["rounds"] += 1
        best_b = int(np.argmin(costs))
        if costs[best_b] < best_c - eps:
            trace.append((dl.elapsed(), float(costs[best_b])))
            best_c = float(costs[best_b])
        if B > 1 and stats["rounds"] % sync == 0:
            g.chains_copy(best_b, worst_half(costs, best_b))
        if el < 0.5 * target and iters < max_iters:
            iters *= 2
        elif el > 2 * target and iters > 1:
            iters //= 2
    E, lens, nr, _, mv, imp, steps = g.chain_result(best_b)
    stats["moves"] += mv
    stats["improvements"] = imp
    stats["iterations"] = steps
    return E, lens, nr, trace, stats


def warm_up():
    """Compile ``vrp.cu`` and CuPy's helper kernels, create the CUDA context and run every kernel and
    method of :class:`GPUVRPSearch` once on an 8-stop instance (see :mod:`gpuroute.tours.warmup`).

    Raises
    ------
    GPUUnavailableError
        Without a usable GPU.
    """
    rng = np.random.default_rng(0)
    n = 8
    C = rng.integers(1, 100, (n, n)).astype(np.float64)
    np.fill_diagonal(C, 0.0)
    dem = np.r_[0.0, rng.integers(1, 5, n - 1).astype(np.float64)]
    E, lens, nr = cv.pack_routes([np.array([v]) for v in range(1, n)], 0, n, n + 1)
    g = GPUVRPSearch(C, dem, 8.0, 0, n, n + 1)
    g.best_move(E, lens, nr)
    E, lens, nr, cost, _ = g.local_search(E, lens, nr, 0.5, budget_s=10.0)
    g.chains_start(E, lens, nr, cost, 2)
    near = np.zeros((n, 3), np.int64)
    near[1:] = [[(v % (n - 1)) + 1, ((v + 1) % (n - 1)) + 1, ((v + 2) % (n - 1)) + 1] for v in range(1, n)]
    g.chains_round(cv.ruin_orders(rng, near, 0, n, 3, (2, 2)), 0.5, 100, budget_s=10.0)
    g.chains_copy(0, [1])
    g.chain_result(0)
