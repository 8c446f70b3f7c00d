"""Tours on a cost matrix: TSP closed tours and open paths, and capacitated vehicle routing (CVRP), by
best-improvement local search inside an iterated local search (Brodtkorb, Hagen, Schulz, Hasle, "GPU computing in discrete optimization. Part
I", EURO J. Transp. Logist. 2013).

Layout: ``local_search.py`` (numba CPU twin: delta functions, :func:`best_move` over the whole
neighbourhood, descent, perturbation), ``api.py`` (:func:`tsp`, :class:`TourResult`), ``tsplib.py``
(TSPLIB reading and distance rules), ``cvrp.py`` (:func:`cvrp`: savings start, relocate / swap / 2-opt* /
intra-route 2-opt and Or-opt under capacity, ruin and recreate; CVRPLIB reading), ``vrp_sisr.py`` (the
CPU's CVRP search: string removals, greedy insertion with blinks, simulated annealing), ``gpu.py`` +
``local_search.cu`` (the GPU twin of the TSP local search: the whole neighbourhood evaluated and reduced
to the CPU's best move on the device, descents of one tour or of many at once, GPU iterated local search),
``vrp_gpu.py`` + ``vrp.cu`` (the GPU twin of the CVRP local search: the between- and within-route
neighbourhoods in one evaluation reduced to the CPU's best feasible move, ruin-and-recreate chains),
``exact.py`` (:func:`tsp_exact`: Held–Karp, the optimal tour of up to 16 stops, unreachable legs
allowed), ``budget.py`` (time limits: a deadline checked between steps of bounded work), ``warmup.py``
(:func:`warm_up`: compile every kernel before a time limit runs).
"""
from .api import TourResult, tour_cost, tsp
from .cvrp import VRPResult, cvrp
from .exact import tsp_exact
from .local_search import MOVE_NAMES, best_move
from .tsplib import TSPInstance, distance_matrix, read_tsplib
from .warmup import warm_up

__all__ = ["tsp", "tsp_exact", "TourResult", "tour_cost", "best_move", "MOVE_NAMES", "read_tsplib", "distance_matrix",
           "TSPInstance", "cvrp", "VRPResult", "warm_up"]
