"""Stage ``partition``: the nested multi-level partition of a graph (OSRM's ``osrm-partition``;
metric-independent, once per topology).

Reads the graph (in memory, or a saved graph directory) and writes the partition where the config says
(:meth:`gpuroute.Partition.save`: atomic, with the graph's topology fingerprint and the cells' SHA-256).

Public API
----------
PartitionConfig               graph, cell sizes, method, seed, output (the partition directory, optional)
run(config) -> Partitioned    the partition (and where it was written)
default_cell_sizes(graph)     the levels when none are given
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

from .contract import file_path, graph_of

__all__ = ["NAME", "PartitionConfig", "Partitioned", "run", "default_cell_sizes", "DEFAULT_CELL_SIZES"]

NAME = "partition"
#: Cell sizes of the partition when none are given (finest level first).
DEFAULT_CELL_SIZES = (256, 4096, 65536)


def default_cell_sizes(graph):
    """The partition levels of ``graph`` when none are given: :data:`DEFAULT_CELL_SIZES` below its node
    count (at least one level)."""
    return [c for c in DEFAULT_CELL_SIZES if c < graph.n_nodes] or [max(2, graph.n_nodes // 4)]


@dataclass
class PartitionConfig:
    """What the partition stage reads and writes.

    Attributes
    ----------
    graph : RoadGraph, str or path-like
        Read: the graph, or its saved directory (the extract stage's output).
    output : str or path-like, optional
        Written: the partition directory (new, empty, or a saved partition to replace). None: in memory.
    cell_sizes : sequence of int, optional
        Largest cell size of each level, finest first (default :data:`gpuroute.config.CRP_CELL_SIZES`;
        a dataset build passes :func:`default_cell_sizes`, the levels smaller than the graph).
    method, seed
        See :meth:`gpuroute.Partition.build`.
    """

    graph: object
    output: object = None
    cell_sizes: object = None
    method: object = None
    seed: int = 0

    def reads(self):
        return [p for p in (file_path(self.graph),) if p]

    def writes(self):
        return [p for p in (file_path(self.output),) if p]


@dataclass
class Partitioned:
    """The partition stage's output: ``partition`` (Partition), ``graph`` (the RoadGraph read), ``output``
    (the directory written, or None), ``seconds`` (partitioning) and ``save_seconds``."""

    partition: object
    graph: object
    output: object
    seconds: float
    save_seconds: float = 0.0


def run(config):
    """Partition the graph and save the partition where ``config.output`` says.

    Parameters
    ----------
    config : PartitionConfig

    Returns
    -------
    Partitioned

    Raises
    ------
    FileExistsError
        ``output`` holds something that is not a saved partition (checked before any work).
    ValueError, ImportError
        See :meth:`gpuroute.Partition.build`.
    """
    from .. import store
    from ..partition import Partition
    from ..partition.multilevel import FORMAT

    if config.output is not None:
        store.check_replaceable(config.output, (FORMAT,), "a saved partition")
    g = graph_of(config.graph)
    sizes = None if config.cell_sizes is None else [int(c) for c in config.cell_sizes]
    t0 = time.perf_counter()
    part = Partition.build(g, cell_sizes=sizes, method=config.method, seed=config.seed)
    secs = time.perf_counter() - t0
    out, save_s = None, 0.0
    if config.output is not None:
        t0 = time.perf_counter()
        out = part.save(config.output)
        save_s = time.perf_counter() - t0
    return Partitioned(part, g, out, secs, save_s)


def load(path, graph):
    """A Partition as it is; a path: the saved partition there, checked to belong to ``graph``."""
    from ..partition import Partition

    if isinstance(path, Partition):
        return path
    return Partition.load(os.fspath(path), graph=graph)
