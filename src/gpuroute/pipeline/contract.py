"""Stage ``contract``: the contraction hierarchy of a graph for one weight (OSRM's ``osrm-contract``).

Reads the graph (in memory, or a saved graph directory) and writes the hierarchy where the config says
(:func:`gpuroute.ch.store.save_hierarchy`: atomic, with the graph's and the weight's fingerprints).

Public API
----------
ContractConfig               graph, weight, output (the hierarchy directory written, optional)
run(config) -> Contracted    the hierarchy (and where it was written)
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

__all__ = ["NAME", "ContractConfig", "Contracted", "run", "graph_of"]

NAME = "contract"


def graph_of(graph):
    """A RoadGraph as it is; a path: the saved graph there (:func:`gpuroute.store.load_graph`, checked)."""
    if hasattr(graph, "n_nodes"):
        return graph
    from ..store import load_graph

    return load_graph(graph)


def file_path(x):
    return None if x is None or hasattr(x, "n_nodes") else os.path.abspath(os.fspath(x))


@dataclass
class ContractConfig:
    """What the contract stage reads and writes.

    Attributes
    ----------
    graph : RoadGraph, str or path-like
        Read: the graph, or its saved directory (the extract stage's output).
    weight : str, optional
        The weight contracted (default :func:`gpuroute.pipeline.customize.routing_weight`).
    output : str or path-like, optional
        Written: the hierarchy directory (new, empty, or a saved hierarchy to replace). None: in memory.
    """

    graph: object
    weight: object = None
    output: object = None

    def reads(self):
        return [p for p in (file_path(self.graph),) if p]

    def writes(self):
        return [p for p in (file_path(self.output),) if p]


@dataclass
class Contracted:
    """The contract stage's output: ``ch`` (ContractionHierarchy), ``weight``, ``output`` (the directory
    written, or None), ``seconds`` (contraction) and ``save_seconds``."""

    ch: object
    weight: str
    output: object
    seconds: float
    save_seconds: float = 0.0


def run(config):
    """Contract the graph for the weight and save the hierarchy where ``config.output`` says.

    Parameters
    ----------
    config : ContractConfig

    Returns
    -------
    Contracted

    Raises
    ------
    KeyError
        The weight is not a weight of the graph (the message lists those it has).
    FileExistsError
        ``output`` holds something that is not a saved hierarchy (checked before any work).
    ParseError
        A saved graph directory that does not load (naming the file).
    """
    from ..ch.api import ContractionHierarchy
    from ..ch.store import check_replaceable, save_hierarchy
    from .customize import routing_weight

    if config.output is not None:
        check_replaceable(config.output)
    g = graph_of(config.graph)
    weight = routing_weight(g, config.weight)
    t0 = time.perf_counter()
    ch = ContractionHierarchy.build(g, weight, progress=False)
    secs = time.perf_counter() - t0
    out, save_s = None, 0.0
    if config.output is not None:
        t0 = time.perf_counter()
        out = save_hierarchy(ch, config.output)
        save_s = time.perf_counter() - t0
    return Contracted(ch, weight, out, secs, save_s)
