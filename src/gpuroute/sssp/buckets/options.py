"""Options records of the bucket family (near-far, Δ-stepping), shared by both twins."""
from __future__ import annotations

from ..common import Option, Spec

_DELTA = (
    Option("delta", None, "bucket width / threshold step in the weight's unit (a positive integer; inf: no far "
                          "pile, a plain work queue)"),
    Option("delta_factor", None, "the width as a multiple of the mean arc weight when delta is None (default "
                                 "config.SSSP_DELTA_FACTOR = 64)"),
)
NEAR_FAR = Spec(
    "near-far",
    options=_DELTA + (
        Option("batch", None, "sources per GPU pass (default: measured best for the graph size, see "
                              "gpuroute.sssp.buckets.gpu.auto_batch)", gpu_only=True),
        Option("frac", None, "GPU adaptive thread mapping: a phase whose frontier exceeds frac x items runs "
                             "one thread per item", gpu_only=True),
        Option("loop", "graph", "GPU loop: 'graph' (one fused kernel per phase, CUDA-graph replays) or "
                                "'persistent' (one cooperative launch)", gpu_only=True),
    ),
    params=("delta", "batch", "loop", "frac"),
    doc="near-far (Davidson et al. 2014): one fused kernel per phase, batched over many sources",
)
DELTA_STEPPING = Spec("delta-stepping", options=_DELTA, params=("delta",), extra=("heavy",),
                      doc="delta-stepping (Meyer & Sanders 2003), CPU")
