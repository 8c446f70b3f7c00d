"""Every tunable in one place, grouped by family (STYLE.md: tests patch these small so that tiny inputs
hit multi-block paths). ``SSSP_`` search without preprocessing, ``CELL_`` cell-local Bellman-Ford,
``SNAP_`` snapping. Each value says where it was measured (BENCHMARKS.md has the runs).
"""
from __future__ import annotations

# ------------------------------------------------------------------------------------------- SSSP_
#: Threads per block of the node-parallel GPU kernels.
SSSP_THREADS_PER_BLOCK = 256
#: Phases captured in one CUDA graph by the device-side-terminating loops whose solver sets none; the
#: host reads the termination flag once per graph replay.
SSSP_PHASES_PER_GRAPH = 64
#: Blocks per multiprocessor of the grid-stride queue kernels (selection, near-far).
SSSP_QUEUE_BLOCKS_PER_SM = 8
#: Adaptive thread creation ("Accelerating SSSP Algorithm on GPU with Adaptive Thread Creation", Alg. 4): time-switch thresholds
#: in microseconds on the mean of this and the previous phase time. None = calibrate on the device.
SSSP_ADAPTIVE_UP_US = None
SSSP_ADAPTIVE_DOWN_US = None
#: Calibrated time switch: up = this factor x the median all-node phase time the solver's probe search
#: measured; down = 330/350 x up (the paper's ratio on its Tesla K20c). Tiled NY 8x8 (H200): 1.5 beat
#: 1.2 and 3.
SSSP_ADAPTIVE_TIME_UP_FACTOR = 1.5
#: algorithm="adaptive" with no variant: "count", "time" (device clock) or "time-host" (the paper's loop).
#: "count" measured ahead of "time" on tiled NY 8x8 by 0-1 % (the same kernel elsewhere) and its phase
#: sequence does not depend on timing noise.
SSSP_ADAPTIVE_VARIANT = "count"
#: Count switch: a phase runs on the selection queue when the phase before the previous one processed
#: fewer than this fraction of n_nodes. On the GPU the queue is used only when the solver's probe
#: searches find a queue phase cheaper than an all-node phase (not on NY, BAY, tiled 4x4 on an H200;
#: yes on tiled 8x8). 8x8: 0.02 beat 0.002 and 0.0002. The CPU twin applies the same rule.
SSSP_ADAPTIVE_FRONTIER_FRACTION = 0.02
#: Near-far and delta-stepping bucket width as a multiple of the mean arc weight (both twins): 64 was
#: the best measured on NY, BAY and tiled NY (BENCHMARKS.md).
SSSP_DELTA_FACTOR = 64.0
#: Most items (source x node) per pass of the batched GPU mode (near-far) when ``batch=`` is not given;
#: the sources are split into equal passes under this bound (and under the free device memory). Measured
#: on an H100 (BENCHMARKS.md, batched section): NY/BAY 1,024 sources run fastest in passes of 342-512
#: (90M-165M items: 4,400 / 4,160 trees/s), slower at 1,024 (270M: 4,030 / 3,980) and at 128 (3,310 /
#: 2,600). 3 x 2^26 = 201M items gives NY and BAY two passes of 512 for 1,024 sources.
SSSP_BATCH_ITEMS = 3 << 26
#: Items (source x node) one batched pass may hold: distances are addressed by a 32-bit item index
#: ``s * n + v`` in the near-far kernels, so a pass must stay below 2^32 - 1 items; the memory a pass
#: takes (~20 bytes per item) bounds it further (the solver checks free device memory).
SSSP_MAX_BATCH_ITEMS = (1 << 32) - 2
#: Nodes per thread of the fused conventional step (1 or 4; see BENCHMARKS.md).
SSSP_FUSED_NODES_PER_THREAD = 1
#: Fused conventional and adaptive loops: queue CUDA-graph replay i + 1 before the host reads replay
#: i's done flag. Measured no faster on NY, BAY, tiled NY (H200).
SSSP_FUSED_PIPELINED = False
#: Hops a thread of the fused conventional step follows at once after improving a head (0 = off).
SSSP_FUSED_CHASE_DEPTH = 0
#: algorithm="auto" on the GPU: cell-local Bellman-Ford for one source when the graph has at most this
#: many nodes (None: any size; measured faster than near-far up to tiled NY 8x8, 17M nodes), else near-far.
SSSP_AUTO_CELL_MAX_NODES = None

# ------------------------------------------------------------------------------------------- CELL_
#: Cell-local Bellman-Ford: threads per block (one block per cell) and nodes per thread; the cell
#: size is their product (see BENCHMARKS.md for the sizes measured). Both twins read these.
CELL_THREADS = 256
CELL_NODES_PER_THREAD = 1  # None: the smallest for which all cells are resident at once (GPU)
#: Times a block may go over its cell again within a round, and in-arcs per node kept in registers.
CELL_REPS = 1
CELL_MAX_IN = 5
#: Loop: "async" (one persistent cooperative launch, cells relaxed as soon as they are dirty) or
#: "rounds" (one kernel per round in CUDA-graph replays); see sssp/cell_bf/cell_bf.cu.
CELL_LOOP = "async"
#: Most blocks of the asynchronous grid (None: as many as the device holds at once); a block owns
#: ceil(n_cells / blocks) cells. Tests set it small so that blocks own several cells.
CELL_ASYNC_MAX_BLOCKS = None

# ------------------------------------------------------------------------------------------- SNAP_
#: Margin, in degrees, added on every side of a lon/lat graph's bounding box before a point counts as
#: outside it (0.01 degree is about 1.1 km of latitude).
SNAP_BBOX_MARGIN_DEG = 0.01
#: The same margin for planar graphs, as a fraction of the larger side of the bounding box.
SNAP_BBOX_MARGIN_FRACTION = 0.01

# ------------------------------------------------------------------------------------------- CH_
#: CU-CH (Karimi, Koppelman, Michael, ICS '19, Algorithm 1): the selection fraction C (the top C x |V_l|
#: nodes by score are candidates of an iteration) and the cutoff K (contraction stops below K nodes;
#: the rest becomes a complete core graph by all-pairs shortest paths). The paper's values.
CH_SELECTION_FRACTION = 0.3
CH_CORE_CUTOFF = 1025
#: Luby rounds of CU-CH's SELECT step (the paper: two).
CH_LUBY_ROUNDS = 2
#: Sequential CH (Geisberger, Sanders, Schultes, Delling, WEA 2008): witness searches stop after this
#: many settled nodes or this many hops (a stopped search adds the shortcut: always correct).
CH_WITNESS_SETTLE_LIMIT = 500
CH_WITNESS_HOP_LIMIT = 5
#: Sequential CH priority = ED x edge difference + DN x deleted neighbours + DEPTH x search-space depth.
CH_PRIORITY_EDGE_DIFF = 2
CH_PRIORITY_DELETED = 1
CH_PRIORITY_DEPTH = 1
#: PHAST on the GPU: most items (source x node) of one batched pass (the distance rows are node-major,
#: 4 bytes per item, plus the pass's output); sources are split into equal passes under this bound, itself at
#: most a 32nd of the device's memory. 2**29 (2 GiB of rows: NY 2,000 sources a pass) measured 203k trees/s on
#: the H100 against 182k at 2**28 and 171k at 2**27 (x4000; BENCHMARKS.md): a pass pays its top levels' launches
#: once for all its sources.
CH_PHAST_BATCH_ITEMS = 1 << 29
#: Threads per block of the PHAST level kernels.
CH_PHAST_THREADS = 256
#: PHAST on the GPU: in-arcs a thread of the per-level pull (thread per node and source) loads at once: 4
#: (``ph_level4``: four tail distances in flight) or 1 (``ph_level``: one dependent tail id -> distance chain
#: per arc). H100, NY x1000 (2**27 items): 151k -> 165k trees/s.
CH_PHAST_LEVEL_UNROLL = 4
#: PHAST on the GPU: levels whose nodes average at least CH_PHAST_DEEP_DEGREE in-arcs (the top levels, fed by the
#: core) load CH_PHAST_DEEP_UNROLL in-arcs at once (8 or 16: ``ph_level8`` / ``ph_level16``; 0: as every level).
#: H100, NY x1000: 168k -> 174k trees/s with 8 at 16 (16, or a threshold of 8, no better).
CH_PHAST_DEEP_UNROLL = 8
CH_PHAST_DEEP_DEGREE = 16
#: PHAST on the GPU: a pass's rows are not filled with DINF where no pull needs it: from hub labels only the core's
#: rows are, the labels set a bit per item below the core and the downward pulls read their own row where it is set;
#: pulled level by level, the upward pass starts each item at 0 (its source) or DINF (``GPUHierarchy._start_mode``).
#: False: every row filled first, as before. H100, NY from labels: x1000 188k -> 258k trees/s (BENCHMARKS.md).
CH_PHAST_NO_FILL = True
#: PHAST on the GPU: for fewer than 32 sources, a level whose nodes average at least this many in-arcs
#: (the top levels of a hierarchy) runs a warp per node instead of a thread per node.
CH_PHAST_WARP_DEGREE = 8
#: PHAST on the GPU, one source: the upward pass is one block searching the upward search space
#: (label-correcting rounds over a frontier) instead of a pull launch per level over every node.
CH_PHAST_UP_SEARCH = True
#: PHAST on the GPU: once the hierarchy's hub labels exist (``ContractionHierarchy.hub_labels()``), the upward
#: pass writes the sources' forward labels into the rows (one launch) instead of searching.
CH_PHAST_FROM_LABELS = True
#: PHAST on the GPU: the downward pass's levels merged into phases (ch.phast.merge_phases: in-arcs extended through
#: the phase, so its nodes run in parallel in one launch; the same distances): 0 the phase boundaries by the cost
#: model below, for each pass size; m >= 1 m consecutive levels a phase (1: one launch a level, the sweep as it was).
#: H100, NY one tree (labels upward): one launch a level 144.4 us (52 down launches), the cost model 53.7 us (8);
#: batches of 256 and 1,000 run faster a launch a level (CH_PHAST_MERGE_MAX_K below; BENCHMARKS.md).
CH_PHAST_MERGE_LEVELS = 0
#: PHAST on the GPU: merged phases (CH_PHAST_MERGE_LEVELS 0 or m >= 2) only for passes of at most this many sources;
#: a larger pass runs one launch a level (as CH_PHAST_MERGE_LEVELS = 1): it is bandwidth-bound, and the merged arcs
#: (1.34-1.83x the bytes on NY) cost more than the launches they save. 0: no bound. The measured bracket (H100, NY,
#: BENCHMARKS.md): merged wins at 1 source (53.7 vs 144.4 us a tree), per level at 256 and 1,000 (133,484 / 146,893
#: vs 120,316 / 131,439 trees/s); the crossover between 16 and 256 is not measured.
CH_PHAST_MERGE_MAX_K = 16
#: PHAST on the GPU, merged phases: for passes of fewer than CH_PHAST_LANES_MAX_K sources, a phase's (node, source)
#: item gets the power of two lanes (at most CH_PHAST_MAX_LANES) at least the phase's mean in-degree (rph_level).
CH_PHAST_LANES_MAX_K = 32
CH_PHAST_MAX_LANES = 32
#: The cost model of merged phases (PHAST's downward pass and RPHAST's sweep, ch.phast.merge_phases): a phase costs
#: CH_PHASE_STEP_US (a dependent launch in a captured graph; H100 ~2.5 us) plus the larger of its bytes over
#: CH_PHASE_BYTES_PER_US and its longest item's arcs at CH_PHASE_ITER_US a lane-iteration (an L2 round trip in
#: a dependent load chain); the phase boundaries minimise the modelled total (dynamic programming over the levels).
#: CH_PHASE_MAX_LEVELS: most levels a phase (0: no limit). Fitted to the H100's RPHAST passes on NY x 1,000 (m = 1 / 4
#: depths a phase, 1 and 16 sources: 132.6 / 53.4 and 157.6 / 105.6 us measured; the model with these values says
#: 150 / 53 and 165 / 106); benchmarks/ch_gpu_queries.py and benchmarks/rphast.py sweep them.
CH_PHASE_STEP_US = 2.0
CH_PHASE_BYTES_PER_US = 2.5e6
CH_PHASE_ITER_US = 0.4
CH_PHASE_MAX_LEVELS = 0
#: Hub labels on the GPU (``ch/labels_gpu.py``, once ``ContractionHierarchy.hub_labels()`` built them): a GPU
#: table with at most this many targets is answered by label merges (one warp a pair: cost ~ |S| x |T|)
#: instead of PHAST sweeps (cost ~ |S| x n); paired distances always use the labels. NY on an H100: labels
#: win up to 100 x 10,000 (1.15 vs 2.04 ms), so the crossover is near 20,000 targets.
CH_LABELS_TABLE_MAX_TARGETS = 16384
#: RPHAST on the GPU (``ch/rphast_gpu.py``): most items (source x restricted node) of one pass; sources are split
#: into equal passes under this bound.
CH_RPHAST_BATCH_ITEMS = 1 << 26
#: Threads per block of the RPHAST kernels (a multiple of 32).
CH_RPHAST_THREADS = 256
#: RPHAST on the GPU: a pass of at most this many sources is one persistent kernel (grid barriers between its
#: phases and levels; a cooperative launch) instead of a CUDA graph of one launch per phase and level. 0: always
#: the graph. Off until measured: the persistent pass's first H100 timings (~11-12 us for 1 x 1000) timed only
#: the host's launch call (the kernel ran on another stream than the CUDA events, and its result was copied
#: before it ended: inexact); the graph is exact and measured (1 x 1000, m = 4: 55.3 us device, 143.6 us end to
#: end; BENCHMARKS.md). Set it to 8 if benchmarks/rphast.py's persistent device time beats the graph's.
CH_RPHAST_PERSISTENT_MAX_K = 0
#: Most blocks of the persistent RPHAST pass (fewer: a cheaper grid barrier, less parallelism a level); 0: as
#: many as the widest phase fills and the multiprocessors hold at once.
CH_RPHAST_PERSISTENT_MAX_BLOCKS = 0
#: RPHAST on the GPU: for passes of fewer than this many sources, a level's (node, source) item gets the power
#: of two lanes (at most a warp) at least the level's mean in-degree; from this many on, one thread an item.
CH_RPHAST_LANES_MAX_K = 32
#: RPHAST on the GPU: most lanes (a power of two, at most 32) of one (node, source) item; fewer lanes, fewer
#: threads a level (a smaller grid, a cheaper barrier) for more arcs a lane.
CH_RPHAST_MAX_LANES = 32
#: RPHAST on the GPU: consecutive depths of the restricted sweep merged into one phase (TargetSelection.merged:
#: in-arcs extended through the phase, so its nodes run in parallel): ceil(L / m) dependent steps instead of L, for
#: more arcs (DIMACS NY, 1,000 targets: m = 4, 13 steps for 1.7x the arcs; m = 8, 7 steps for 2.7x). 1: off.
#: H100, NY 1 x 1000, the captured graph: m = 4 55.3 us device, m = 1 133.9 us.
#: 0: the phase boundaries by the cost model (CH_PHASE_*, planned per pass-size class: NY x 1,000, one source: 4 phases
#: for 3.9x the arcs, modelled 31 us against m = 4's 53). Set back to 4 if benchmarks/rphast.py's graph pass at m=0 is
#: slower than at m=4 for 1 x 1000 or 16 x 1000.
CH_RPHAST_MERGE_LEVELS = 0
#: RPHAST on the GPU: core entries (of one source) per unit of the core step (each unit: a chunk of columns x this
#: many entries, then atomicMin), so that a source's 50-350 core entries spread over several blocks.
CH_RPHAST_CORE_SLICE = 16
#: ``ContractionHierarchy.table`` on the GPU, once the hub labels exist (RPHAST's upward pass then runs on the
#: device; without them its upward searches run on the host and full PHAST sweeps are kept), runs RPHAST (before
#: label merges) for at most ``CH_RPHAST_TABLE_MAX_TARGETS`` targets and at least ``CH_RPHAST_TABLE_MIN_SOURCES``
#: sources. NY x 1,000 targets on an H100 (benchmarks/rphast.py, the selection kept: medians of repeated calls),
#: labels / RPHAST / PHAST sweeps: 1 source 0.116 / 0.217 / 0.417 ms, 16: 0.131 / 0.265 / 0.428, 256: 0.370 /
#: 0.490 / 1.751, 1000: 1.085 / 1.013 / 5.735: RPHAST wins from 1,000 sources on (not measured between 256 and
#: 1,000). A target set not kept first pays its selection (on the CPU, ~35 ms for NY x 1,000 targets: the
#: benchmark's "selection" row). ``ContractionHierarchy.select_targets`` keeps the last ``CH_RPHAST_SELECTIONS``
#: target sets' selections.
CH_RPHAST_TABLE_MAX_TARGETS = 4096
CH_RPHAST_TABLE_MIN_SOURCES = 1000
CH_RPHAST_SELECTIONS = 8

# ------------------------------------------------------------------------------------------- CRP_
#: Customizable Route Planning (Delling, Kobitzsch, Werneck, Euro-Par 2014, sec. 2): the most nodes per
#: cell of each level of the nested partition, finest first (gpuroute.partition.Partition).
CRP_CELL_SIZES = (256, 4096, 65536)
#: Partitioner of Partition.build: "kahip" (KaHIP's kaffpa, pip install kahip) or "inertial" (inertial
#: flow on the coordinates). kahip: fewer boundary arcs on level 0 and in total on every graph measured,
#: in fewer cells (NY, strong: 18,934 / 2,566 / 216 arcs in 1,092 / 69 / 5 cells; inertial: 21,734 /
#: 2,706 / 212 in 1,570 / 99 / 6; Monaco, Andorra, Helsinki alike; benchmarks/partition.py), and it
#: needs no coordinates.
CRP_PARTITION_METHOD = "kahip"
#: kaffpa's preconfiguration for method="kahip": "fast", "eco" or "strong". strong: fewest level-0 boundary
#: arcs on every graph measured (NY: 18,934 vs 20,510 eco, 22,600 fast) for 42 s vs 8 s and 2 s on NY
#: (2 CPU cores); a partition is built once per topology (metric-independent), so quality wins.
CRP_KAHIP_MODE = "strong"
#: Keep, per cell and entry point, the shortest-path tree customization computes (2 bytes per vertex when
#: a cell has fewer than 65,535 search-graph edges, else 4): path unpacking then walks parents instead of
#: searching every clique arc's cell (NY: ~30 searches of a route replaced by parent walks). Costs memory
#: (entries x vertices per cell: ~30 MB on NY) and customization writes.
CRP_KEEP_TREES = True
#: GPU customization (gpuroute.crp.customize_gpu; Delling, Kobitzsch, Werneck, Euro-Par 2014, sec. 3):
#: shared memory per block for one work unit's int64 distances (vertices x entry points; 24 KiB = 3,072
#: distances, no opt-in needed, several blocks per Hopper multiprocessor). A cell with more vertices than
#: fit runs in global scratch.
CRP_GPU_SMEM_BYTES = 24 * 1024
#: Threads per block of the GPU customization's Bellman-Ford kernel. NY on an H100 (benchmarks/crp_gpu.py
#: sweep, 128/256/512 threads x 24/48/96 KiB): 512 threads and 24 KiB fastest (6.8 ms vs 12.7 ms at 256
#: and 48 KiB): small units, many warps per multiprocessor.
CRP_GPU_THREADS = 512
#: Most entry points per GPU work unit (a cell's entry points are split into units of at most this many).
CRP_GPU_MAX_GROUP = 64
#: A level with few cells (the upper levels) is split into about this many work units, so its few big
#: cells still spread over every multiprocessor.
CRP_GPU_TARGET_UNITS = 2048
#: Relax, in each Bellman-Ford round of the GPU customization, only the vertices one of whose in-neighbours
#: improved in the round before (two flags per vertex in shared memory); False relaxes every vertex.
CRP_GPU_FRONTIER = True
#: GPU customization: every level whose cells fit the push kernel runs it (``crp_push_level`` in crp/customize.cu:
#: the block's threads stride over the cell's edges, each edge read once a round -- coalesced -- and relaxed for
#: all the unit's entry points by a shared-memory atomicMin) instead of the pull kernel (a thread per (vertex,
#: entry point) walking its in-edges: one latency-bound load chain per thread, the edges re-read per entry point).
#: The rule (gpuroute.crp.customize_gpu.push_fits): every cell of the level has at most CRP_GPU_PUSH_SMEM_BYTES / 8
#: search-graph vertices (and at most 65,536); a level with a bigger cell keeps the pull kernel. This setting
#: only narrows it: None, no cell-count limit (the default); an int n, push only on levels with fewer than n cells
#: (100: session 23's first rule, the paper's (sec. 3) switch to its global implementation under 100 cells);
#: 0, the pull kernel everywhere (the way before). NY KaHIP 1,092/69/5 cells, metric distance, H100 device time
#: (BENCHMARKS.md, "CRP customization's upper levels by a push Bellman-Ford kernel"): pull 4,418 us, push under
#: 100 cells 3,676, push on every level 2,972 (level 0: 3,045 -> 2,358 us); with 256:32 mezzanine levels
#: 2,068 / 1,320 / 1,192 us.
CRP_GPU_PUSH_MAX_CELLS = None
#: Push kernel: shared memory for one unit's int64 distances (the block holds 15/8 of it: distances, int32 tree
#: edges, three frontier flag rows); the rest of the multiprocessor's 256 KiB stays L1 for the cell's edges.
CRP_GPU_PUSH_SMEM_BYTES = 24 * 1024
#: Push kernel: threads per block of a level (gpuroute.crp.customize_gpu.push_threads), at least this many ...
CRP_GPU_PUSH_THREADS = 512
#: ... doubled, up to this many (and what the compiled kernel allows), while the level's cells average at least
#: one stride of the doubled block (2 x threads x CRP_GPU_PUSH_UNROLL edges): a bigger block pays only where its
#: extra threads get edges. NY (edges a cell 2,078 / 6,019 / 22,658): 512 / 512 / 1,024 threads at unroll 8.
#: H100, push on levels 1-2, device us of levels 1 / 2: unroll 4: 512 threads 344 / 266, 1,024 316 / 203;
#: unroll 8: 512 266 / 236, 1,024 296 / 193 (the rule picks the faster of each; 256 threads slower: 435 / 456).
#: Level 0 (2,078 edges a cell) was measured at 512 only. CRP_GPU_PUSH_THREADS = 1024: 1,024 on every level.
CRP_GPU_PUSH_MAX_THREADS = 1024
#: Push kernel: a level is split into about this many work units of about equal work (a unit's entry points
#: share each edge read; a cell with many edges gets fewer entry points a unit).
CRP_GPU_PUSH_TARGET_UNITS = 256
#: Push kernel: edges each thread loads (independent, coalesced) before relaxing them, so that a round over a
#: big cell's edges (from L2) keeps several loads in flight per warp (compiled in: -DCRP_PUSH_UNROLL; 8 is the
#: module's own build, other values compile a second one). H100, NY, push on levels 1-2, device us of levels
#: 1 / 2 at 512 threads: unroll 1 289 / 484, 4 344 / 266, 8 266 / 236.
CRP_GPU_PUSH_UNROLL = 8
#: Push kernel on a level whose cells exceed CRP_GPU_PUSH_SMEM_BYTES / 8 vertices (it runs the pull kernel
#: otherwise): such a level runs the push kernel anyway with this many bytes of distances a unit where its cells fit
#: them and the device allows the block's 15/8 of it (gpuroute.crp.customize_gpu.push_items_of; H100: at most
#: 227 KiB a block, so up to ~121 KiB here). The top level of tiled 8x8 NY is such a level: 16 cells of 2,424-3,204
#: search-graph vertices (273k-394k edges, 390-780 entry points a cell), the largest 132 over the default 3,072:
#: H100, 96 KiB, that level 248 -> 22 ms (pull -> push), the whole customization 398 -> 173 ms, cliques equal
#: (BENCHMARKS.md; benchmarks/crp_multi_gpu.py runs both ways). 0: off (the pull kernel on such levels).
CRP_GPU_PUSH_BIG_SMEM_BYTES = 96 * 1024
#: Traffic updates (Overlay.update, gpuroute.crp.state_buffers): a recycled buffer of the customized state
#: (host or device copy) is brought up to date range by range while the ranges to copy are at most this
#: fraction of the array; above it, one whole copy.
CRP_UPDATE_FULL_FRACTION = 0.5
#: Traffic updates copy only the ranges they change (True). False: every update copies the whole state, the
#: GPU's device copy included, and copies back every clique and tree (the way before; kept so that
#: benchmarks/crp_gpu.py compares the two in one run).
CRP_UPDATE_DIRTY_RANGES = True
#: GPU traffic updates: the dirty cells of a level are split into about this many work units of their own
#: (CustomizationPlan's units are sized for all of a level's cells: 5 dirty cells of NY's level 1 are ~100
#: blocks sweeping several entry points each per Bellman-Ford round); 0: the level's own units. Measured on
#: the H100 (BENCHMARKS.md, "CRP updates copy only what they change"): the level's own units were as fast or
#: faster on NY at 1,000 random arcs and 5 km / 2 km discs, so 0 is the default.
CRP_UPDATE_TARGET_UNITS = 0
#: GPU traffic updates: threads per block of the Bellman-Ford kernel (at least CRP_GPU_THREADS; capped by what
#: the compiled kernel allows): a few dirty cells leave most multiprocessors' warp slots empty. 0:
#: CRP_GPU_THREADS (the default: 1,024 measured no faster on the H100, see CRP_UPDATE_TARGET_UNITS).
CRP_UPDATE_THREADS = 0
#: Mezzanine levels (Delling, Kobitzsch, Werneck, Euro-Par 2014, sec. 3; gpuroute.crp.customize.CustomizationPlan):
#: finer nested levels whose cliques are computed first and used only to customize the level above (queries
#: never see them; same cliques). Keyed by the cell size of a partition level: the sizes of the mezzanine
#: levels inserted under that level, e.g. ``{256: (32,)}`` (the paper's 32-node phantom level) or
#: ``{256: (32,), 4096: (1024,)}``; a level whose size is not a key gets none. Built by
#: ``Partition.refine`` (kaffpa on each cell) when an Overlay is built. ``{}``: off.
CRP_MEZZANINE = {}
#: The mezzanine levels a build gives the overlay of a graph of at least CRP_MEZZANINE_AUTO_MIN_NODES nodes
#: where CRP_MEZZANINE is ``{}`` and KaHIP imports (``gpuroute build``, ``gpuroute customize``, the pipeline's
#: customize stage; gpuroute.crp.customize.build_mezzanine): the paper's 32-node level under the 256-node cells.
#: They are saved with the overlay (``mezzanine.npy``) and loaded with it. NY (H100, BENCHMARKS.md "CRP
#: customization with mezzanine levels"): a customization 2.65 -> ~1.0 ms on the device, the trees copied back
#: 29.5 -> 6.4 MB, the build +2-3 s (kaffpa "fast" on every 256-node cell). ``{}``: off.
CRP_MEZZANINE_AUTO = {256: (32,)}
CRP_MEZZANINE_AUTO_MIN_NODES = 100_000
#: kaffpa's preconfiguration for the mezzanine levels (NY, 32 under 256 on 2 cores: "fast" 3 s and 87,080
#: mezzanine boundary arcs, "strong" 61 s and 81,174).
CRP_MEZZANINE_KAHIP_MODE = "fast"
#: Customize the lowest level with microinstructions (Euro-Par 2014 sec. 4: contraction simulated once,
#: triples executed per metric, one GPU thread each) when that level is a mezzanine level (the paper: they pay
#: for cells up to ~32 nodes); False: Dijkstra (CPU) / Bellman-Ford (GPU) there too.
CRP_MICROCODE = True
#: Microinstructions: shared memory per block for the packed cells' int64 memory arrays (cells are packed
#: while their arrays fit; at most 128 KiB: 14-bit positions).
CRP_MICRO_SMEM_BYTES = 24 * 1024
#: Microinstructions: threads per block (one instruction each per layer, strided).
CRP_MICRO_THREADS = 256
#: Multi-GPU customization (gpuroute.crp.customize_multi; Euro-Par 2014 sec. 5): the default split level is the
#: highest query level with at least this many cells per part (the paper's top level where it has enough
#: cells to balance; NY's 5 top cells split over 2 GPUs, over 4 the split moves down to its 69 level-1 cells).
CRP_MULTI_CELLS_PER_PART = 2
#: The overlay's many-to-many with device="auto" (the engine's tables, trips, /match's table path): "cpu" or
#: "gpu". Measured on the 16-core H100 host (2026-11-26, Monaco car.lua, benchmarks/crp_table_gpu.py): the CPU twin
#: took 1.5 / 2.3 / 3.7 / 8.1 ms for 10 / 25 / 100 / 300 points square against the GPU twin's 5.3 / 8.7 / 13.3 /
#: 20.9 ms; the GPU won only on a 64-core host at 100 x 100 (Andorra 10.7 vs 20.3 ms) and lost there at 1000 x 1000:
#: one GPU thread per search does not beat the cores, so auto is the CPU.
CRP_TABLE_AUTO_DEVICE = "cpu"
#: GPU many-to-many table (gpuroute.crp.many_to_many_gpu, one thread per search): threads per block of the
#: search kernels (small blocks spread a table of few points over many multiprocessors).
CRP_TABLE_GPU_THREADS = 32
#: Hash-table slots of one search's records in an overlay's first table (a power of two, 48 bytes each; at most
#: half of them used: a search whose table fills runs again with four times as many, up to 2 x arcs, which
#: cannot fill; the overlay's next tables start with the room the last one ended with).
CRP_TABLE_GPU_HASH_SLOTS = 1 << 14
#: Most bytes of per-search scratch (hash tables, heaps, output slices) of one launch: the searches of a table
#: run in batches that fit.
CRP_TABLE_GPU_SCRATCH_BYTES = 2 << 30
#: The CPU many-to-many (gpuroute.crp.many_to_many) keeps its graph-sized scratch (search records, tree node
#: numbers: 72 bytes an arc a chunk; bucket offsets: 24) between tables, up to this many bytes in all (Monaco with
#: 2 threads: 5 MB); made per table, its first touch (page faults, filling) took 1.1 ms of a 4 x 4 table's 2.2 ms
#: on Monaco with car.lua (2-core CI machine, 2026-11-26; BENCHMARKS.md, issue 20, helper TABLE, session 25).
CRP_TABLE_SCRATCH_KEEP_BYTES = 256 << 20

# ------------------------------------------------------------------------------------------- SERVE_
#: The OSRM-compatible service (gpuroute.engine and its HTTP server): most coordinates of one /route
#: request (osrm-routed's --max-viaroute-size default), most cells (sources x destinations) of one /table
#: request (osrm-routed's --max-table-size is 100 coordinates, i.e. 10,000 cells), most results of one
#: /nearest request (its --max-nearest-size default).
SERVE_MAX_LOCATIONS_ROUTE = 500
SERVE_MAX_LOCATIONS_TABLE = 10000
SERVE_MAX_LOCATIONS_NEAREST = 100
#: Most alternative routes one /route request may ask for (osrm-routed's --max-alternatives default): the one
#: limit of the HTTP server and the Python API (gpuroute.engine.params.RouteParams; /health reports it).
SERVE_MAX_ALTERNATIVES = 3
#: Via-node alternative routes (gpuroute.crp.alternatives; Abraham, Delling, Goldberg, Werneck, "Alternative
#: routes in road networks", JEA 2013): an alternative costs at most (1 + STRETCH) x the shortest route (OSRM
#: MLD's 25 %), shares at most SHARING of the shortest route's cost with it and the alternatives chosen before
#: (OSRM MLD: 85 % of its edges; the paper's gamma 0.8), and passes the T-test with T = ALPHA x the shortest
#: route's cost around its via arc (local optimality; the paper's and OSRM CH's 0.25). At most CANDIDATES
#: via paths are unpacked and tested per request (OSRM MLD: 2 x the alternatives asked).
SERVE_ALTERNATIVES_STRETCH = 0.25
SERVE_ALTERNATIVES_SHARING = 0.80
SERVE_ALTERNATIVES_ALPHA = 0.25
SERVE_ALTERNATIVES_CANDIDATES = 12
#: overview=simplified: Douglas-Peucker tolerance in metres (a route drawn at street zoom loses nothing
#: visible; OSRM picks a zoom-dependent tolerance instead).
SERVE_SIMPLIFY_TOLERANCE_M = 3.0

# -------------------------------------------------------------------------------- SERVE_DISPATCH
#: How ``gpuroute serve --workers N`` (N > 1) spreads connections over its workers
#: (gpuroute.server.workers): "least-connections" (the parent accepts each connection and hands it to the
#: worker with the fewest open connections, ties in turn: keep-alive clients spread evenly whatever their
#: number) or "reuseport" (every worker accepts on its own ``SO_REUSEPORT`` socket: the kernel hashes each
#: connection to one, busy or not).
SERVE_DISPATCH = "least-connections"

# ------------------------------------------------------------------------------------ SERVE_HTTP_
#: The HTTP/1.1 server under ``gpuroute serve`` (gpuroute.server.http): "httptools" (uvicorn with the
#: httptools parser on the uvloop event loop, ``pip install 'gpuroute[serve]'``), "h11" (uvicorn's
#: pure-Python parser on asyncio), or "auto": httptools where httptools and uvloop import, else h11.
#: Both answer an over-long URL 414 and over-long headers 431 (OSRM's JSON).
SERVE_HTTP = "auto"
#: Short requests are answered on the worker's event loop, the others in a worker thread (the hand-off costs
#: ~90-100 us of CPU a request: anyio's thread, two loop wake-ups; an engine call holds the GIL, so the
#: thread shields the loop's other connections only between its compiled kernels). Short: a /route of at most
#: SERVE_INLINE_ROUTE_MAX_COORDS coordinates without alternatives, a /nearest of at most
#: SERVE_INLINE_NEAREST_MAX_NUMBER results, a /table of at most SERVE_INLINE_TABLE_MAX_CELLS cells (sources x
#: destinations); none with exclude, avoid_polygons or avoid_ways (the first request of a kind customizes the
#: overlay); /trip, /isochrone and /customize always go to a thread. The rule keeps one inline request
#: under ~1 ms (p99) on the 2-core CI machine (Monaco, car.lua; benchmarks/request_path.py --sizes): a route of
#: 2 / 4 / 6 coordinates 0.34 / 0.72 / 1.08 ms p50 (p99 0.52 / 0.93 / 1.31), with steps and annotations 0.79
#: (1.27), nearest number=100 0.43 (0.63); a table costs 2.5 ms already at 2 x 2 (its parallel kernels' fixed
#: cost), 3.7 ms at 10 x 10: tables go to a thread (0). Only with gpuroute's Engine (another engine's cost is
#: unknown) and only while no thread of the process runs an engine call (numba's workqueue threading layer is
#: not thread-safe); an inline request is not cut by the timeout. 0: never.
SERVE_INLINE_ROUTE_MAX_COORDS = 4
SERVE_INLINE_NEAREST_MAX_NUMBER = 100
SERVE_INLINE_TABLE_MAX_CELLS = 0
#: Segment snapping (gpuroute.geo.segments): sample points are placed along every segment at most this
#: many metres apart (both ends always); the k-d tree holds the samples, and a point's candidate segments
#: are those with a sample within (best distance + half this spacing), so the result is exact.
SERVE_SEGMENT_SAMPLE_SPACING_M = 25.0
#: Segment snapping: the side (metres, at the dataset's mid latitude) of the cells of the uniform lon/lat grid
#: that lists the segments passing through each cell; a request's coordinates take their candidate segments
#: from it (one compiled call per request). Larger when the grid would have more than
#: SERVE_SEGMENT_GRID_CELLS_PER_SEGMENT cells per segment (a sparse network's memory).
SERVE_SEGMENT_GRID_CELL_M = 25.0
SERVE_SEGMENT_GRID_CELLS_PER_SEGMENT = 4.0
#: exclude= (gpuroute.engine.exclude): how many exclude combinations keep their customization of the
#: current metric (least recently used dropped first; each costs one customization's memory: cliques,
#: trees, turn costs). A /customize makes every kept one stale: it is customized again on its next use.
SERVE_EXCLUDE_CACHE = 4
#: avoid_polygons= / avoid_ways= (gpuroute.engine.avoid): per request, at most this many polygons, this
#: many positions over all their rings, this many OSM way ids (over: InvalidValue naming the field; 0: no
#: limit); and how many avoided-arc sets keep their customization and snapping index (least recently used
#: dropped first, apart from SERVE_EXCLUDE_CACHE's combinations; 0: none kept).
SERVE_AVOID_MAX_POLYGONS = 16
SERVE_AVOID_MAX_VERTICES = 2000
SERVE_AVOID_MAX_WAYS = 500
SERVE_AVOID_CACHE = 4
#: depart_at= (gpuroute.engine.timeslots): how many time-profile slot metrics keep their customization
#: (least recently used dropped first; slots with the same rows share one; with exclude= or avoids a (slot,
#: exclusion) pair is one entry). Each costs one customization's memory (cliques, trees, turn and arc
#: costs: TimeSlots.info()["bytes_per_metric"]; Monaco ~1.6 MiB). A /customize makes every kept one
#: stale: it is customized again on its next use. 0: none kept (every request customizes).
SERVE_DEPART_CACHE = 8

# ------------------------------------------------------------------------------- SERVE_ISOCHRONE_
#: Isochrones (Engine.isochrone, GET /isochrone/v1): most contours of one request (Valhalla's and
#: Mapbox's limit is 4), the largest duration contour in seconds (2 h) and the largest distance contour
#: in metres (100 km).
SERVE_ISOCHRONE_MAX_CONTOURS = 4
SERVE_ISOCHRONE_MAX_DURATION_S = 7200.0
SERVE_ISOCHRONE_MAX_DISTANCE_M = 100000.0
#: Half-width in metres of the band drawn around every reachable piece of road: the polygon of a
#: contour is the union of these bands (street scale: a lane plus the kerb and the houses along it).
SERVE_ISOCHRONE_BUFFER_M = 25.0
#: Holes (unreachable areas enclosed by the reachable network) smaller than this many square metres
#: are filled: city blocks disappear, parks and unreachable districts stay (4 ha: a 200 m x 200 m block).
SERVE_ISOCHRONE_MAX_HOLE_M2 = 40000.0
#: Default Douglas-Peucker tolerance in metres of the polygons' rings (``generalize``); kept below the
#: buffer so that every reachable road stays inside its polygon.
SERVE_ISOCHRONE_GENERALIZE_M = 5.0
#: Cell size in metres of the raster the isochrone polygons are traced on (0: half the buffer radius).
SERVE_ISOCHRONE_CELL_M = 0.0
#: Most cells of that raster (the largest contour's bounding box): larger areas get coarser cells, and
#: a band at least one cell wide, so the raster's resolution follows the contour's size (0: no limit).
#: 250k: full resolution (12.5 m) up to about 6 km x 6 km (5 min in New York), 30 m cells and a 30 m band
#: for the 15 km of 10 min. The work after the field (tracing, simplification, checks, GeoJSON) grows
#: with the rings' length, about 1 / cell: on DIMACS NY, 5 and 10 min, 2 cores, it took 6.6 ms (p50) at
#: 250k, 7.8 ms at 400k, 12.4 ms at 500k and 25 ms at 1.5M (the former default); the polygons at 250k
#: cover 11 % more than at 1.5M (median; the wider band joins parts and closes holes).
SERVE_ISOCHRONE_MAX_CELLS = 250000
#: The CPU search of an isochrone: a bounded Dijkstra over the graph from each of the origin's heads, given
#: up for the hierarchy's bounded PHAST (a sweep over every node) once it has settled this fraction of the
#: graph's nodes (at least SERVE_ISOCHRONE_DIJKSTRA_MIN_NODES). Where the two cost the same on DIMACS NY
#: (264k nodes, 2 cores): PHAST 3.2 ms; Dijkstra 0.29 ms for 1.5k settled nodes (5 min), 1.45 ms for 8.8k
#: (10 min), 16.4 ms for 86k (30 min), so about 19k nodes, 7 % of the graph.
SERVE_ISOCHRONE_DIJKSTRA_FRACTION = 0.07
SERVE_ISOCHRONE_DIJKSTRA_MIN_NODES = 2000
#: Where isochrone lattices are drawn: "auto" (the GPU when one is usable and the metric has a hierarchy:
#: a PHAST pass whose rows stay on the device, then marks and field there; or, on an engine with an
#: overlay, the CPU's turn-aware search whose arcs' entry costs are scattered to the device, then extent,
#: marks and field there), "gpu" or "cpu". Checked on the
#: H100 (2026-11-23): the GPU drawer equals the CPU twin (tests/engine/test_isochrone.py, gpu marker); NY,
#: 5 and 10 min: engine p50 11 ms on the GPU against 23.5 ms on the CPU path.
SERVE_ISOCHRONE_DEVICE = "auto"
#: Threads per block of the isochrone kernels (engine/services/isochrone/isochrone.cu).
SERVE_ISOCHRONE_GPU_THREADS = 256
#: Worker threads (shared by all requests) that check the contours' nesting beside their validity.
SERVE_ISOCHRONE_CHECK_THREADS = 4
#: Parts (threads, the request's own included) of the CPU lattice's extent, marks and field of a large
#: request (at least SERVE_ISOCHRONE_PARALLEL_WORK pieces' items, or lattice points for the field); the
#: parts run on the same worker threads (the pool holds max(this - 1, SERVE_ISOCHRONE_CHECK_THREADS)). 1: in
#: the request's thread. The codes are the same whatever the parts.
SERVE_ISOCHRONE_LATTICE_THREADS = 4
SERVE_ISOCHRONE_PARALLEL_WORK = 20000

# ------------------------------------------------------------------------------------ SERVE_TRIP_
#: Most coordinates of one /trip request (osrm-routed's --max-trip-size default); a roundtrip is routed
#: through one more waypoint (back to its first), so this stays below SERVE_MAX_LOCATIONS_ROUTE.
SERVE_MAX_LOCATIONS_TRIP = 100
#: /match (map matching, gpuroute.engine.services.match): most trace coordinates of one request (osrm-routed's
#: --max-matching-size default; /health reports it as max_locations_map_matching).
SERVE_MAX_LOCATIONS_MAP_MATCHING = 100
#: /match: the GPS standard deviation (m) of a point without a radiuses entry (OSRM's DEFAULT_GPS_PRECISION,
#: 5 m since OSRM 5.x; it was 4.07 m before). Its candidates lie within 3 sigma.
SERVE_MATCH_SIGMA_M = 5.0
#: /match: the largest speed (m/s) between two timestamped points (OSRM's max_speed_for_map_matching of car.lua,
#: 180 km/h), where the graph's meta has none.
SERVE_MATCH_MAX_SPEED_MS = 50.0
#: /match: most candidates on either side of one transition many-to-many search; the steps of a trace (and of
#: the traces of Engine.match_many) are gathered into searches of up to this many sources and targets.
SERVE_MATCH_TABLE_CANDIDATES = 128
#: /match: how transitions are computed (gpuroute.engine.services.match.TRANSITIONS): "search" (a bounded
#: turn-expanded Dijkstra per source candidate, numba-parallel over every step of every trace: OSRM's bounded
#: network distance), "table" (the engine's many-to-many, the overlay's CPU or GPU twin, gathered as above), or
#: "auto" (the searches, on every device: measured on the 16-core H100 host, 2026-11-26, Monaco with car.lua, a
#: 100-point trace took 9.2 ms with the searches and 124 ms with the GPU many-to-many, 300 traces 1.6 s and 15 s;
#: BENCHMARKS.md, "Map matching"). Both give the same tables (tests/engine/test_match.py).
SERVE_MATCH_TRANSITIONS = "auto"
#: /match: the bounded transition searches of one call run on every core from this many searches (one per
#: source candidate and step) on; fewer run on one thread. Measured on the 2-core CI machine (2026-11-26, Monaco
#: with car.lua, sigma 10 m, 5 s): a 5-point trace (44 searches) 0.60 ms on one thread, 0.55 ms on both; 100
#: points (852) 3.6 and 2.9 ms (the workers' scratch is kept between calls; allocated per call, it ate the gain:
#: 4.2 and 4.1 ms, and the threshold was 4,000).
SERVE_MATCH_PARALLEL_JOBS = 64
#: /match: where a batch's bounded transition searches run (gpuroute.engine.match_gpu, the GPU twin of
#: match_hmm.transitions: one GPU thread per search, the same tables bit for bit): "auto" (the GPU where CuPy and a
#: CUDA device are usable), "cpu" or "gpu". Only the batched pipeline's batches (the Viterbi pass that would search
#: its own tables: services.match._lazy) take it: every step's table of the batch on the GPU, then the Viterbi over
#: them; a single trace stays on the CPU. A request's device="cpu" keeps the CPU's. "cpu" by default: on the H100
#: host (16 cores) 1,000 Monaco traces batched took 0.561 s with the GPU's tables against 0.569 s with the CPU's
#: lazy pass, the same bytes (the kernel 115 ms for 461,235 searches; copies and the host's table plumbing the
#: rest; BENCHMARKS.md, "Map matching: the transition searches on the GPU").
SERVE_MATCH_TRANSITIONS_DEVICE = "cpu"
#: ... only for a batch of at least this many traces (with candidates); fewer stay on the CPU (a lone trace's searches
#: on the GPU are a launch and copies for ~1 ms of CPU work: not measured; with one numba thread every call's pass
#: would otherwise qualify).
SERVE_MATCH_GPU_MIN_TRACES = 32
#: The GPU transition searches: threads per block.
SERVE_MATCH_GPU_THREADS = 64
#: ... hash-table slots of one search's records in the first round (a power of two, 36 bytes each with its heap; at
#: most half used); a search whose table or heap fills runs again with four times as many, up to
#: SERVE_MATCH_GPU_MAX_HASH_SLOTS, past which it runs on the CPU twin. Monaco with car.lua, 7,939 searches of 12
#: traces (sigma 5-20 m, 1-10 s; 195 heap pops a search on average): 15 % of them fill 1,024 slots, 0.3 % 2,048,
#: none 4,096 (tests/engine/test_match_gpu.py's traces, 2026-11-27).
SERVE_MATCH_GPU_HASH_SLOTS = 1 << 11
SERVE_MATCH_GPU_MAX_HASH_SLOTS = 1 << 16
#: ... most bytes of per-search scratch of one launch (the searches of a batch run in launches that fit: 4 GiB is
#: 58,000 searches at 2,048 slots, a batch of 128 traces of Monaco's benchmark in one launch).
SERVE_MATCH_GPU_SCRATCH_BYTES = 4 << 30
#: Up to TOUR_EXACT_MAX_N stops a /trip order is exact (gpuroute.tours.tsp_exact, no time limit); past it
#: the tour search (gpuroute.tours.tsp) of a request that gives no time limit may take
#: SERVE_TRIP_TIME_PER_STOP_S x n seconds, clamped to [SERVE_TRIP_TIME_MIN_S, SERVE_TRIP_TIME_MAX_S] (a
#: caller's time_limit wins). Measured on Monaco /trip cost matrices (2-core CI machine, 5 random stop sets
#: a size, gap to the optimum, else to the best of a 2 s run): 1 ms a stop leaves 0 % up to 50 stops, 0.46 %
#: (mean) at 75 and 1.37 % at 100 (2 ms a stop: 0.31 % and 0.94 %); under ~10 ms the search could be cut
#: before its first descent ended (gaps of 40-190 % at 5 ms), hence the 20 ms floor.
SERVE_TRIP_TIME_PER_STOP_S = 0.001
SERVE_TRIP_TIME_MIN_S = 0.02
SERVE_TRIP_TIME_MAX_S = 0.2
#: ... and within that budget it stops once SERVE_TRIP_STALL_KICKS_PER_STOP x n ILS kicks in a row have not improved
#: the tour (gpuroute.tours.tsp's ``stall``; CPU searches; not with a caller's time_limit). Measured on the 40
#: 25-stop trips of benchmarks/serve.py (Monaco, Andorra; 2-core CI machine, 2026-11-26, 3 repetitions): with the
#: 25 ms budget alone the search ran ~240-310 kicks and always ended at the best tour of two 1 s runs; a bound of
#: 2n or 3n kicks missed it on one trip (+0.35 %), 4n-6n never, 5n at 10 ms of CPU instead of 18-23 ms. At 50 and
#: 100 stops the budget ends the search first (~130 and ~65 kicks): the bound changes nothing there.
SERVE_TRIP_STALL_KICKS_PER_STOP = 5

# ------------------------------------------------------------------------------------- SERVE_WEB_
#: The web page at / (gpuroute.server.web): where the fetched third-party JavaScript (Leaflet,
#: leaflet-routing-machine; ``make web-assets``) lies. None: the environment variable
#: GPUROUTE_WEB_ASSETS, else ``web/`` under the running Python's prefix (``.venv/web`` for the project's
#: venv), else ``.venv/web`` beside the source checkout.
SERVE_WEB_ASSETS = None
#: Most road segments (node pairs, both directions as one) GET /network draws: a larger graph is thinned
#: to its most important roads (road class, else speed, then length). Monaco has ~14,000; 60,000 lines
#: stay smooth in Leaflet's canvas renderer and are a ~3 MB answer (~1 MB gzipped).
SERVE_WEB_MAX_EDGES = 60000
#: Traffic from the page: most arc updates one POST /customize of the page carries (each ~25 bytes of
#: JSON: 20,000 stay well under the 1 MiB default body limit).
SERVE_WEB_UPDATES_PER_POST = 20000

# ------------------------------------------------------------------------------------------- TOUR_
#: GPU tour local search (gpuroute.tours.gpu, local_search.cu): threads per block of the neighbourhood
#: evaluation, the single-tour reduce-and-apply block and the one-block-per-tour batched descent (a power
#: of two, 64..1024). Not yet tuned on a device.
TOUR_GPU_THREADS = 256
#: Single-tour evaluation grid: at most this many blocks per multiprocessor (one wave at 256 threads);
#: TOUR_GPU_EVAL_MAX_BLOCKS > 0 caps the grid outright (tests set it small so rows are grid-strided).
TOUR_GPU_EVAL_BLOCKS_PER_SM = 8
TOUR_GPU_EVAL_MAX_BLOCKS = 0
#: Moves (evaluate + reduce/apply launch pairs) captured in one CUDA graph of the single-tour descent;
#: the host reads the device 'done' flag once per replay.
TOUR_GPU_GRAPH_MOVES = 16
#: Chains of the GPU iterated local search per multiprocessor (one block each; 2 x 85 registers x 256
#: threads stay resident together on an H100 SM).
TOUR_GPU_CHAINS_PER_SM = 2
#: Target seconds of one GPU ILS round (one launch of ls_ils, then a host read of the chain costs): the
#: double-bridge steps per chain and round double or halve towards it (never above a tenth of the time
#: limit).
TOUR_GPU_ROUND_S = 0.02
#: Neighbourhood of the GPU TSP search (gpuroute.tours.gpu.search): "candidates" (the CPU twin's
#: queue-driven descent over K-nearest candidate lists, ls_cand_ils) or "full" (the seed's best-improvement
#: scan of every move, ls_ils).
TOUR_GPU_NEIGHBOURHOOD = "candidates"
#: Candidate-list width K of the GPU "candidates" neighbourhood (the CPU's is 10; capped at n - 1).
TOUR_GPU_CANDIDATES = 10
#: Threads per block of the candidate-list kernels (ls_cand_batch, ls_cand_ils; power of two, 64..1024):
#: one thread per move of the stop popped (23 per candidate: 230 at K = 10). Not yet tuned on a device.
TOUR_GPU_CAND_THREADS = 256
#: Chains of the candidate-list GPU ILS per multiprocessor (one block each). Not yet tuned on a device.
TOUR_GPU_CAND_CHAINS_PER_SM = 4
#: The GPU tour search's set-up (the (n, n) float64 matrix copied to the device, and its checks there) is
#: estimated at n^2 * 8 bytes over this rate: with less time left than that, ``tsp(device="gpu")`` returns
#: the tour it has instead of starting a set-up the time limit cannot pay for (H100, pageable copies:
#: ~15 ms for 3,038 stops).
TOUR_GPU_SETUP_BYTES_PER_S = 4e9
#: Candidate lists of a matrix that is already on the device (tsp on a CuPy matrix) are sorted on the device
#: by chunks of whole rows of about this many keys; the deadline is checked between chunks. Not tuned.
TOUR_GPU_CAND_SORT_KEYS = 1 << 22
#: Candidate-list GPU ILS: every this many rounds the best chain is copied over the worst half (the
#: chains run independently in between).
TOUR_GPU_CAND_SYNC_ROUNDS = 8
#: tsp(device="auto") runs on the GPU from this many stops (when a GPU is usable). Set from
#: benchmarks/tours_gpu.py on the H100 (2026-11-23, 1 s limit, candidate-list ILS chains on the GPU against
#: the CPU twin's candidate-list ILS): gap pr1002 0.47 vs 1.35 %, pcb1173 0.93 vs 1.86 %, u2152 1.70 vs
#: 2.47 %, pcb3038 2.73 vs 2.46 %; below 1,000 stops not measured, so the CPU keeps them.
TOUR_GPU_AUTO_MIN_N = 1000
#: Time limits of tsp / cvrp (gpuroute.tours.budget): most work units (about one delta evaluation each)
#: a compiled call may do between two deadline checks, whatever the measured rate (a few ms on one core).
TOUR_CHECK_WORK = 2_000_000
#: ... target seconds of one compiled call at the measured work rate (capped by the time left) ...
TOUR_CHECK_SLICE_S = 0.01
#: ... and the budget of the first call, before a rate is known.
TOUR_CHECK_FIRST_WORK = 100_000
#: Fraction of the time limit kept for the final polish of the best tour (a local minimum of the whole
#: neighbourhood: the CPU's full neighbourhood up to 150 stops, the GPU's candidate lists).
TOUR_POLISH_RESERVE = 0.02
#: CPU TSP on a symmetric matrix above 150 stops (gpuroute.tours.local_search.or_ils): ILS chains run at once,
#: one a numba thread (0: numba.get_num_threads()), each from the best tour of the last round ...
TOUR_CPU_CHAINS = 0
#: ... and the most stops of each of the two stretches a segment kick swaps (a local double bridge).
TOUR_OR_SEGMENT = 30
#: CPU CVRP (gpuroute.tours.cvrp, device="cpu"): SISR chains run at once, one a numba thread, the best
#: solution kept (0: numba.get_num_threads(); cvrp(chains=K) overrides it; 1: one chain on one thread) ...
TOUR_CVRP_CPU_CHAINS = 0
#: ... fewer when their state (about 24 R W bytes a chain: the padded routes, R ~ customers, W the longest
#: route that fits) would take more than this many bytes in all.
TOUR_CVRP_CPU_CHAINS_BYTES = 1 << 30
#: GPU CVRP (gpuroute.tours.vrp_gpu, vrp.cu): threads per block of the neighbourhood evaluation, the
#: reduce-and-apply block and the one-block-per-chain ruin-and-recreate kernel (power of two, 64..1024).
TOUR_VRP_GPU_THREADS = 256
#: GPU CVRP: chains (one block each) per multiprocessor; fewer when their state does not fit in
#: TOUR_VRP_GPU_MEMORY_FRACTION of the free device memory.
TOUR_VRP_GPU_CHAINS_PER_SM = 2
TOUR_VRP_GPU_MEMORY_FRACTION = 0.5
#: GPU CVRP: every this many rounds the best chain is copied over the worst half.
TOUR_VRP_GPU_SYNC_ROUNDS = 4
#: cvrp(device="auto") runs on the GPU for this many stops (depot included) up to TOUR_CVRP_GPU_AUTO_MAX_N,
#: when a GPU is usable. Measured (H100, 2026-11-26, benchmarks/tours_gpu.py --sections cvrp, 10 s, one
#: seed; BENCHMARKS.md): the GPU chains beat the CPU twin (16 cores) on X-n303 (0.51 vs 1.27 %), X-n502
#: (0.15 vs 0.33 %) and X-n701 (1.71 vs 1.80 %), and lost on X-n200 (2.11 vs 2.03 %) and X-n979 (2.33 vs
#: 2.02 %). Since the CPU search is SISR (tours/vrp_sisr.py), one core of the H100 host matched or beat those GPU
#: numbers (same 10 s, one seed, 2026-11-26): X-n303 0.48 %, X-n701 1.11 %, lost only on X-n502 (0.26 vs 0.15 %),
#: so the window is empty (auto = the CPU) until a run of several seeds shows the GPU ahead somewhere.
TOUR_CVRP_GPU_AUTO_MIN_N = 1
TOUR_CVRP_GPU_AUTO_MAX_N = 0
#: Engine.trip orders up to this many stops exactly (Held-Karp, gpuroute.tours.tsp_exact; osrm-routed
#: brute-forces up to 10), the tour search past it. Measured (numba, 2-core CI machine, closed tour):
#: 0.11 ms at 10 stops, 0.25 ms at 11, 0.6 ms at 12, 1.4 ms at 13, 3.8 ms at 14 (x ~2.3 a stop); the
#: iterated local search needs ~10 ms for these sizes. At most 16 (tsp_exact's MAX_N).
TOUR_EXACT_MAX_N = 12

# ------------------------------------------------------------------------------------------- ACCESS_
#: Accessibility (gpuroute.accessibility), CPU: private accumulators of the "points" formulation may take
#: this many bytes in all (one set per thread: 24 bytes a node for aggregate, 16 k for k nearest POIs);
#: fewer chunks than threads when they would not fit.
ACCESS_CPU_MAX_ACC_BYTES = 1 << 30
#: Parallel chunks of the CPU "points" formulation (None: one per thread within the budget above). Tests set
#: 1 to fold the points in the GPU's order.
ACCESS_CPU_CHUNKS = None
#: strategy="auto" on the CPU, aggregate: search from the distinct point nodes (reverse graph) while they are
#: at most this fraction of the nodes, else from every node (forward graph). Both settle the same balls, so
#: the searches are as many as the nodes they start from: the points win below ~n (NY, 2 km, 83k distinct
#: point nodes: 3x faster than from every node); near n the points' private accumulators cost a merge.
ACCESS_CPU_NODES_FRACTION = 0.9
#: The same for nearest_pois, whose search from a node stops past its k-th POI (so from every node wins
#: when POIs are dense): NY, 2 km, k=10, 2 cores: points 0.24 / 0.57 / 1.29 / 3.39 s and nodes 7.0 / 3.8
#: / 1.5 / 0.53 s for 3k / 10k / 30k / 100k POIs; the crossover near 0.1 n.
ACCESS_CPU_NEAREST_NODES_FRACTION = 0.1
#: GPU method: "ball" (bounded searches on the reverse graph, a thread block per point node: work in
#: proportion to the balls), "phast" (PHAST trees of the reverse hierarchy: full sweeps, better when a radius
#: covers much of the graph), "auto" ("ball" when the graph is at hand). H100, NY, 2 km, 10,000 points:
#: "phast" 129 ms (CPU twin on 16 cores: 85 ms); "ball" not yet measured.
ACCESS_GPU_METHOD = "auto"
#: "ball": threads per search block, resident search blocks per multiprocessor, the bytes their n-word
#: arrays may take in all (20 bytes x n per block), and the (node, distance, point) entries of one chunk of
#: balls (12 bytes each, plus their sort).
ACCESS_GPU_BALL_THREADS = 256
ACCESS_GPU_BALL_BLOCKS_PER_SM = 4
ACCESS_GPU_BALL_BYTES = 1 << 31
ACCESS_GPU_BALL_ITEMS = 1 << 26
#: "phast": most distances (point nodes x nodes, 4 bytes each) of one block of PHAST trees folded at once.
ACCESS_GPU_BLOCK_ITEMS = 1 << 27
#: GPU: threads per block of the fold kernels (a thread per node).
ACCESS_GPU_THREADS = 256
#: Travel-time matrices: most cells (origins x destinations) of one streamed block.
ACCESS_MATRIX_BLOCK_ITEMS = 1 << 24

# ------------------------------------------------------------------------------------------- DIST_
#: gpuroute.distributed: sources per task when block= is not given (a task is one ch.table call on a worker).
DIST_TABLE_BLOCK = 2048
#: gpuroute.distributed.aggregate / nearest_pois: point nodes per task when block= is not given.
DIST_ACCESS_BLOCK = 4096
