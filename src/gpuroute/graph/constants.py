"""Named sentinels and dtypes shared by every module (STYLE.md convention 1)."""
from __future__ import annotations

import numpy as np

#: dtype of node ids, arc ids and CSR offsets inside gpuroute.
INDEX_DTYPE = np.int32
#: dtype of arc weights (positive integers in the weight's unit).
WEIGHT_DTYPE = np.int32
#: dtype of distances returned by every shortest-path function.
DIST_DTYPE = np.int64
#: Distance of a node that cannot be reached from the source(s).
INF = np.iinfo(np.int64).max
#: Distance of an unreachable node in 32-bit results (``dtype="uint32"``): 2^32 - 1, the GPU kernels'
#: own sentinel, so a 32-bit result needs no conversion.
INF_U32 = np.iinfo(np.uint32).max
#: Predecessor of the source itself and of unreachable nodes.
NO_PREDECESSOR = -1
#: Largest weight a single arc may carry (so that a sum of two never overflows int64 and GPU
#: 32-bit tentative distances stay exact for paths of many arcs).
MAX_WEIGHT = np.iinfo(np.int32).max
