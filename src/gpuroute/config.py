"""Tunables in one place (STYLE.md: tests patch these small so tiny inputs hit multi-block paths)."""
from __future__ import annotations

#: Threads per block of the node-parallel GPU kernels.
THREADS_PER_BLOCK = 256
#: Phases captured in one CUDA graph by the device-side-terminating loops; the host reads the
#: termination flag once per graph replay.
PHASES_PER_GRAPH = 64
#: Upper bound on phases of any Bellman-Ford style loop, as a multiple of n_nodes (a proven bound is
#: n_nodes - 1 phases for Bellman-Ford; this is a guard against bugs, never reached on valid input).
MAX_PHASE_FACTOR = 1
#: Adaptive thread creation (seed 001, Alg. 4): thresholds in microseconds on the mean of this and
#: the previous phase time. None = calibrate on the device when the solver is built.
ADAPTIVE_UP_US = None
ADAPTIVE_DOWN_US = None
#: Calibrated time switch (variant "time"): up = this factor x the median all-node phase time that
#: the solver's probe search measured on the GPU at hand; down = 330/350 x up (the seed's ratio on its
#: Tesla K20c). Measured on tiled NY 8x8 (H200): 1.5 beat 1.2 and 3 (BENCHMARKS.md).
ADAPTIVE_TIME_UP_FACTOR = 1.5
#: algorithm="adaptive" with no variant on the GPU: "count", "time" (device clock) or "time-host".
#: "count" measured ahead of "time" on tiled NY 8x8 by 0-1 % (the same kernel elsewhere) and its
#: phase sequence does not depend on timing noise.
ADAPTIVE_VARIANT = "count"
#: Count switch (variant "count"): a phase runs on the selection queue when the phase before the
#: previous one processed fewer than this fraction of n_nodes. Both switches use the queue only when
#: the solver's probe searches find a queue phase cheaper than an all-node phase on this GPU and graph
#: (not on NY, BAY or tiled NY 4x4 on an H200: there a queue phase is a longer dependent memory chain
#: than a scan of all nodes; yes on tiled NY 8x8). Measured on 8x8: 0.02 beat 0.002 and 0.0002.
ADAPTIVE_FRONTIER_FRACTION = 0.02
#: Near-far threshold step as a multiple of the mean arc weight (None = 64, the best measured on NY,
#: BAY and tiled NY; see BENCHMARKS.md).
DELTA_FACTOR = None
#: Number of sources processed together by the batched GPU mode.
BATCH_SOURCES = 64
#: Blocks per multiprocessor of the grid-stride queue kernels (selection, near-far).
QUEUE_BLOCKS_PER_SM = 8
#: Most (source, node) items one batched pass may hold. Passes of 2^27 items and more were seen to
#: raise the overflow flag on an H200 (not yet explained), so batches are capped below that.
MAX_BATCH_ITEMS = 1 << 26
#: Nodes per thread of the fused conventional step (1 or 4; see BENCHMARKS.md).
FUSED_NODES_PER_THREAD = 1
#: Fused conventional and adaptive loops: queue CUDA-graph replay i + 1 before the host reads replay
#: i's done flag (the GPU then never idles for the host's check between replays of 96 phases, but
#: runs one replay of no-op phases after the end). Measured no faster on NY, BAY, tiled NY (H200).
FUSED_PIPELINED = False
#: Hops a thread of the fused conventional step follows at once after improving a head (0 = off).
FUSED_CHASE_DEPTH = 0
#: algorithm="auto" on the GPU: cell-local Bellman-Ford for one source when the graph has at most this
#: many nodes (None: any size; measured faster than near-far up to tiled NY 8x8, 17M nodes), else near-far.
AUTO_CELL_MAX_NODES = None
#: Cell-local Bellman-Ford: threads per block (one block per cell) and nodes per thread; the cell
#: size is their product (see BENCHMARKS.md for the sizes measured).
CELL_THREADS = 256
CELL_NODES_PER_THREAD = 1  # None: the smallest for which all cells are resident at once
#: Cell-local Bellman-Ford: times a block may go over its cell again within a round, and in-arcs per
#: node kept in registers (see sssp/cells.cu).
CELL_REPS = 1
CELL_MAX_IN = 5
#: Cell-local Bellman-Ford loop: "async" (one persistent cooperative launch, cells relaxed as soon as
#: they are dirty) or "rounds" (one kernel per round in CUDA-graph replays); see sssp/cells.cu.
CELL_LOOP = "async"
#: Most blocks of the asynchronous cell-bf grid (None: as many as the device holds at once); a block
#: owns ceil(n_cells / blocks) cells. Tests set it small so that blocks own several cells.
CELL_ASYNC_MAX_BLOCKS = None
