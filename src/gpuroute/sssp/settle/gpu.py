"""GPU launchers of the settling family (kernels in ``settle.cu``): Martín et al. and Crauser et al. as
Ortega-Arranz et al., "A New GPU-based Approach to the Shortest Path Problem" , sec. IV, run
them, three kernels per phase replayed as a CUDA graph with device-side termination."""
from __future__ import annotations

import numpy as np

from ...backend.flags import STATS_CAP
from ...backend.kernels import load_module
from ...backend.solver import GPUSolver, i32
from ..common import GPURunner
from .options import RULES, is_pull


class DijkstraFrontierGPU(GPUSolver):
    """Martín et al. and Crauser et al. general / economic (``rule``: :data:`~.options.RULE_MARTIN`,
    ``RULE_GENERAL``, ``RULE_ECONOMIC``, the numbers of ``settle.cu``); successor or predecessor variant
    (Ortega-Arranz et al., sec. IV). A phase: relax from the frontier F, minimum reduction over the unsettled set U,
    update (settle every node within the bound)."""

    phases_per_graph = 256

    def __init__(self, dgraph, kind, variant="successor"):
        super().__init__(dgraph)
        cp = self.cp
        self.mod = load_module("sssp/settle/settle.cu")
        self.k_init = load_module("backend/predecessors.cu").get_function("init_dist")
        if variant not in ("successor", "predecessor"):
            raise ValueError(f"variant must be 'successor' or 'predecessor', got {variant!r}")
        self.kind, self.variant = kind, variant
        n = self.n
        self.dist = cp.empty(n, dtype=cp.uint32)
        self.U = cp.empty(n, dtype=cp.uint8)
        self.F = cp.empty(n, dtype=cp.uint8)
        self.red = cp.empty(2, dtype=cp.uint32)
        self.minw = cp.empty(n, dtype=cp.uint32)
        self.mod.get_function("min_out_weight")(self.grid_n, (self.tpb,), (i32(n), self.fo, self.w, self.minw))
        self.gmin = np.uint32(dgraph.min_weight)
        if variant == "successor":
            self.k_relax = self.mod.get_function("dk_relax_succ")
            self.rel_arrays = (self.fo, self.hd, self.w)
        else:
            self.k_relax = self.mod.get_function("dk_relax_pred")
            self.rel_arrays = dgraph.reverse()
        self.k_min = self.mod.get_function("dk_min")
        self.k_update = self.mod.get_function("dk_update")
        self.src = cp.zeros(1, dtype=cp.int32)

    def launches(self):
        n = i32(self.n)
        return [
            (self.k_relax, self.grid_n, (self.tpb,),
             lambda p: (n, *self.rel_arrays, self.U, self.F, self.dist, self.red, self.flags, i32(p))),
            (self.k_min, self.grid_n, (self.tpb,),
             lambda p: (n, self.U, self.dist, self.minw, self.red, self.flags, i32(p), i32(self.kind))),
            (self.k_update, self.grid_n, (self.tpb,),
             lambda p: (n, self.U, self.F, self.dist, self.red, self.flags, self.stats, i32(STATS_CAP), i32(p),
                        i32(self.kind), self.gmin)),
        ]

    def run(self, source, want_pred=False, time_phases=False):
        with self.stream:
            self.src.fill(source)
            self.k_init(self.grid_n, (self.tpb,), (np.uint64(self.n), self.dist, self.src, i32(self.n)))
            self.U.fill(1)
            self.U[source:source + 1].fill(0)
            self.F.fill(0)
            self.F[source:source + 1].fill(1)
            self.flags.fill(0)
            self.stats.fill(0)
        phases, host, times = self.run_loop(self.launches(), self.n + 1, time_phases)
        d, p, ph, upd = self.finish(host, phases, self.dist, want_pred)
        return d, p, {"phases": ph, "updated": upd, "times_us": times}


def settle_gpu(name):
    """The registry's GPU entry of ``name`` (martin, crauser, crauser-economic)."""
    rule = RULES[name]

    def make(dgraph, variant, opts):
        solver = DijkstraFrontierGPU(dgraph, rule, "predecessor" if is_pull(name, variant) else "successor")

        def one(s, want_pred, phase_times):
            d, p, st = solver.run(s, want_pred, phase_times)
            return d, p, {"phases": st["phases"], "updated": st["updated"], "times_us": st["times_us"]}

        return GPURunner(solver, {"rule": rule}, one)

    return make
