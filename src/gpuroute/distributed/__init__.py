"""Scale-out with Dask: many-to-many tables and accessibility over the GPUs of one machine
(``dask_cuda.LocalCUDACluster``) or of many (any ``distributed.Client``).

Public API
----------
connect(scheduler)
    A Client for an address, ``"local"`` (a CPU ``LocalCluster``) or ``"local-cuda"`` (one worker per
    GPU), as a context manager.
table(client, ch, sources, targets, *, block=...)
    Equal to ``ch.table(sources, targets)``: the hierarchy scattered once per worker, blocks of sources
    as tasks, gathered (or written per block as ``.npy``/Parquet with ``out=``).
aggregate(client, index, node_ids, values, radius, ...), nearest_pois(client, index, poi_node_ids, radius, k)
    :mod:`gpuroute.accessibility` split by blocks of point nodes.

Needs ``dask`` and ``distributed`` (``pip install 'gpuroute[dask]'``), imported on first use; ``import
gpuroute.distributed`` works without them.
"""
from __future__ import annotations

from .api import SCHEDULERS, Shipped, aggregate, connect, nearest_pois, table

__all__ = ["connect", "table", "aggregate", "nearest_pois", "SCHEDULERS", "Shipped"]
