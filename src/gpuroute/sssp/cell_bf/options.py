"""Options record of cell-local Bellman-Ford, shared by both twins."""
from __future__ import annotations

from ... import config
from ..common import Option, Spec

CELL_BF = Spec(
    "cell-bf",
    options=(
        Option("threads", None, "threads per block, one block per cell: a multiple of 32 in [32, 1024] "
                                "(default config.CELL_THREADS); the cell size is threads x nodes_per_thread"),
        Option("nodes_per_thread", None, "1 .. 16 (default config.CELL_NODES_PER_THREAD; None there: the "
                                         "smallest, up to 4, for which every cell is resident on the GPU)"),
        Option("order", None, "how nodes are grouped into cells: 'grow' (default) or 'hilbert' "
                              "(gpuroute.partition.cells.node_order)"),
        Option("reps", None, "GPU: passes a block may make over its cell within one round "
                             "(default config.CELL_REPS)", gpu_only=True),
        Option("max_in", None, "GPU: in-arc slots per node kept in registers (default config.CELL_MAX_IN)",
               gpu_only=True),
        Option("loop", None, "GPU: 'async' (one persistent cooperative launch) or 'rounds' (default "
                             "config.CELL_LOOP); the CPU twin runs rounds", gpu_only=True),
        Option("rounds_per_graph", None, "GPU: rounds per CUDA graph, a multiple of 6 (default 48)",
               gpu_only=True),
        Option("pipelined", None, "GPU: queue the next graph replay before checking the last", gpu_only=True),
    ),
    params=("cell_size", "threads", "nodes_per_thread", "order", "n_cells", "loop"),
    extra=("local_iterations", "critical_iterations"),
    doc="cell-local Bellman-Ford: a thread block per cell runs to local convergence in shared memory, "
        "boundary arcs relaxed into other cells, asynchronously in one persistent launch or in rounds",
)


def cell_params(opts, n_nodes, resident_npt=None):
    """Threads, nodes per thread and cell size from the options (both twins).

    ``resident_npt``: the GPU's choice when ``nodes_per_thread`` and the config leave it open (the
    smallest for which all cells are resident); the CPU uses 1 then.

    Raises
    ------
    ValueError
        ``threads`` not a multiple of 32 in [32, 1024], ``nodes_per_thread`` outside [1, 16], an unknown
        order.
    """
    threads = int(opts["threads"] or config.CELL_THREADS)
    if threads % 32 or not 32 <= threads <= 1024:
        raise ValueError(f"threads must be a multiple of 32 in [32, 1024], got {threads}")
    npt = opts["nodes_per_thread"] or config.CELL_NODES_PER_THREAD
    if npt is None:
        npt = resident_npt(threads) if resident_npt is not None else 1
    npt = int(npt)
    if not 1 <= npt <= 16:
        raise ValueError(f"nodes_per_thread must be in [1, 16], got {npt}")
    if opts["order"] not in (None, "grow", "hilbert"):
        raise ValueError(f"order must be 'grow' or 'hilbert', got {opts['order']!r}")
    return {"cell_size": threads * npt, "threads": threads, "nodes_per_thread": npt,
            "order": opts["order"] or "grow"}
