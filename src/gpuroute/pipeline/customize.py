"""Stage ``customize``: a multi-level overlay customized for a metric (OSRM's ``osrm-customize``; fast,
repeated), optionally with traffic applied.

Reads the graph and its partition (in memory, or the partition stage's saved directory, checked to
belong to the graph) and writes the customized overlay where the config says (``overlay/`` of an overlay
or dataset directory: :meth:`gpuroute.Overlay._save_files`, atomic, with the graph, partition and
metric fingerprints). Also the metric vocabulary a build and the engine share: the routing weight of a
graph, the overlay metric of that weight, a Lua profile's metric with its turn costs, and traffic CSV
files.

Public API
----------
CustomizeConfig                 graph, partition, metric or weight, traffic, device, output
run(config) -> Customized       the customized overlay (and where it was written)
routing_weight(graph, weight)   the weight a dataset (and an engine) routes by
metric_name(weight, graph)      the overlay metric's name for that weight
metric_of(graph, weight)        the overlay metric for that weight
profile_metric(graph, which)    a Lua profile's metric: arc costs and per-turn costs
resolve_metric_spec(spec)       a metric name, a Profile, or a profile JSON file loaded
metric_weight(metric)           the graph weight a named metric reads
read_traffic(path, n_arcs)      a traffic CSV of ``arc_id,cost`` rows
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass

import numpy as np

from ..crp.metric import CLOSED
from ..graph.errors import ParseError
from .contract import file_path, graph_of

__all__ = ["NAME", "CustomizeConfig", "Customized", "run", "routing_weight", "metric_name", "metric_of",
           "profile_metric", "resolve_metric_spec", "metric_weight", "read_traffic", "unit_of", "WEIGHT", "METRIC",
           "METRIC_WEIGHTS", "MAX_TRAFFIC_COST"]

NAME = "customize"
#: The routing weight when the graph has it (else the graph's first weight, see :func:`routing_weight`).
WEIGHT = "travel_time"
#: The overlay metric customized for :data:`WEIGHT` (the same travel times, no turn penalties); another
#: routing weight gets a metric named after it (:func:`metric_name`).
METRIC = "time"
#: The graph weight each named metric reads (for the companion rule of :func:`gpuroute.datasets.for_weight`).
METRIC_WEIGHTS = {"distance": "distance", "time": "travel_time", "time-uturn": "travel_time"}
#: Largest traffic cost :meth:`gpuroute.Overlay.update` takes.
MAX_TRAFFIC_COST = int(np.iinfo(np.int32).max)
#: A traffic CSV's cost that closes the arc (:data:`gpuroute.crp.metric.CLOSED`).
CLOSED_WORD = "closed"


# ------------------------------------------------------------------------------------------- metrics
def profile_metric(graph, which="weight", *, turns=None):
    """The overlay metric of a graph extracted with a Lua profile: arc costs and per-turn costs.

    Parameters
    ----------
    graph : RoadGraph
        With ``turn_costs`` (:func:`gpuroute.io.load_osm` with a Lua profile).
    which : {"weight", "duration"}
        ``"weight"``: the profile's weight (``graph.weights["weight"]`` + ``turn_costs.weight``, named after
        ``weight_name``, e.g. ``"routability"``); ``"duration"``: travel times in deciseconds + turn
        durations (named ``"duration"``).
    turns : TurnTable, optional
        Checked against the costs' length when given.

    Returns
    -------
    Metric

    Raises
    ------
    ValueError
        A graph without turn costs, or an unknown ``which``.
    """
    from ..crp.metric import Metric

    tc = getattr(graph, "turn_costs", None)
    if tc is None:
        raise ValueError(f"graph {graph.name!r} has no turn costs (extract it with a Lua profile)")
    if which == "weight":
        arc, tcost = graph.weight("weight"), tc.weight
        name = str(tc.meta.get("weight_name") or graph.meta.get("weight_name") or "weight")
        units = graph.units["weight"].symbol
    elif which == "duration":
        arc, tcost, name, units = graph.weight("travel_time"), tc.duration, "duration", "ds"
    else:
        raise ValueError(f"which must be 'weight' or 'duration', got {which!r}")
    if turns is not None and turns.n_turns != len(tc):
        raise ValueError(f"graph {graph.name!r}: {len(tc)} turn costs for {turns.n_turns} turns")
    return Metric(arc, turn_cost=tcost, name=name, units=units)


def routing_weight(graph, weight=None):
    """The weight a dataset (and an :class:`~gpuroute.engine.Engine`) routes by.

    Parameters
    ----------
    graph : RoadGraph
    weight : str, optional
        Asked for; default: ``weight`` for a graph extracted with a Lua profile (the profile's
        ``weight_name``, e.g. car.lua's ``routability``, with its turn costs), else ``travel_time`` when
        the graph has it, else the graph's first weight (``distance`` on a DIMACS ``-d`` graph such as ``ny``,
        ``free_flow_time`` on a TNTP network).

    Returns
    -------
    str

    Raises
    ------
    KeyError
        ``weight`` is not a weight of the graph (the message lists those it has), or the graph has none.
    """
    if weight is None:
        if getattr(graph, "turn_costs", None) is not None and "weight" in graph.weights:
            return "weight"  # a Lua profile's graph: its weight_name (e.g. routability), turn costs with it
        if WEIGHT in graph.weights:
            return WEIGHT
        if not graph.weight_names:
            raise KeyError(f"graph {graph.name!r} has no weight to route by")
        return graph.weight_names[0]
    if weight not in graph.weights:
        raise KeyError(f"graph {graph.name!r} has no weight {weight!r}; it has {graph.weight_names}")
    return weight


def metric_name(weight, graph=None):
    """The name of the overlay metric a dataset customizes for ``weight``: ``"time"`` for
    ``travel_time`` (as :meth:`gpuroute.crp.Metric.resolve` names it), the profile's ``weight_name`` for
    the ``weight`` of a graph with turn costs, else the weight's name."""
    if graph is not None and getattr(graph, "turn_costs", None) is not None and weight == "weight":
        return str(graph.turn_costs.meta.get("weight_name") or graph.meta.get("weight_name") or "weight")
    return METRIC if weight == WEIGHT else str(weight)


def metric_of(graph, weight):
    """The overlay metric of ``weight``: the profile's metric (arc and turn costs) for the ``weight`` of
    a graph with turn costs, the named ``"time"`` for ``travel_time``, else its arc costs."""
    if getattr(graph, "turn_costs", None) is not None and weight in ("weight", "travel_time"):
        return profile_metric(graph, "weight" if weight == "weight" else "duration")
    if weight == WEIGHT:
        return METRIC
    from ..crp.metric import Metric

    unit = graph.units.get(weight)
    return Metric(graph.weight(weight), name=metric_name(weight), units=getattr(unit, "symbol", "") or "")


def resolve_metric_spec(spec):
    """A metric name (``"distance"``, ``"time"``, ``"time-uturn"``) as it is, a :class:`Profile` as it is,
    or a path to a profile JSON file loaded (:meth:`Profile.load`).

    Raises
    ------
    ValueError
        Neither a metric name nor an existing file; an invalid profile (naming the file).
    """
    from ..crp.metric import NAMED_METRICS, Profile

    if isinstance(spec, Profile) or spec in NAMED_METRICS:
        return spec
    if isinstance(spec, (str, os.PathLike)) and os.path.isfile(spec):
        return Profile.load(spec)
    raise ValueError(f"metric {os.fspath(spec)!r} is neither a metric name ({', '.join(NAMED_METRICS)}) nor a "
                     "profile JSON file")


def metric_weight(metric):
    """The graph weight a named metric reads (``"distance"`` or ``"travel_time"``); None for a Profile or
    anything else (they read arc attributes, or bring their costs)."""
    return METRIC_WEIGHTS.get(metric) if isinstance(metric, str) else None


def unit_of(graph, metric):
    """The :class:`Unit` of a customized metric: the graph weight's own unit when one has its symbol."""
    from ..crp.overlay import metric_unit

    symbol = getattr(metric, "units", "") or ""
    w = metric_weight(getattr(metric, "name", None))
    u = graph.units.get(w) if w is not None else None
    if u is not None and u.symbol == symbol:
        return u
    return metric_unit(graph, metric)



# ------------------------------------------------------------------------------------------- traffic
def read_traffic(path, n_arcs=None):
    """Arc ids and costs of a traffic CSV file: one ``arc_id,cost`` row per line.

    Blank lines and lines starting with ``#`` are skipped; the first other line may be a header (it is
    skipped when neither field is a number nor ``closed``). Arc ids are the graph's arc positions
    (``0 .. m - 1``); costs are in the metric's unit, positive and finite, rounded to the nearest integer
    (at least 1), or the word ``closed`` (any case): the arc is closed, its cost
    :data:`gpuroute.crp.metric.CLOSED` (OSRM's speed 0 in a segment-speed file: no route enters it). An
    arc listed twice takes its last cost.

    Parameters
    ----------
    path : str or path-like
    n_arcs : int, optional
        The graph's arc count: ids at or over it are refused.

    Returns
    -------
    (ndarray of int64 (k,), ndarray of int64 (k,))
        Arc ids and costs (:data:`gpuroute.crp.metric.CLOSED` for ``closed``).

    Raises
    ------
    ParseError
        Naming the file and line: not two comma-separated fields, an arc id that is not a non-negative
        integer or not an arc of the graph, a cost that is not a number (nor ``closed``), not finite, not
        positive (0 is refused: write ``closed`` to close an arc) or over 2^31 - 1; a file with no row.
    OSError
        The file cannot be read.
    """
    path = os.fspath(path)
    ids, costs = [], []
    first = True
    if os.path.isdir(path):
        raise ParseError(path, None, "is a directory, not a traffic CSV file")
    with open(path, encoding="utf-8") as f:
        try:
            for i, raw in enumerate(f, start=1):
                line = raw.strip()
                if not line or line.startswith("#"):
                    continue
                parts = [p.strip() for p in line.split(",")]
                if first and len(parts) == 2 and not any(_is_number(p) or p.lower() == CLOSED_WORD for p in parts):
                    first = False
                    continue  # a header such as arc_id,cost
                first = False
                if len(parts) != 2:
                    raise ParseError(path, i, f"expected arc_id,cost (two comma-separated fields), got {line[:60]!r}")
                a, c = parts
                try:
                    arc = int(a)
                except ValueError:
                    raise ParseError(path, i, f"arc id {a[:30]!r} is not an integer") from None
                if arc < 0 or (n_arcs is not None and arc >= n_arcs):
                    raise ParseError(path, i, f"arc id {arc} is not an arc of the graph "
                                              + (f"(ids 0 .. {n_arcs - 1})" if n_arcs is not None else "(negative)"))
                if c.lower() == CLOSED_WORD:
                    ids.append(arc)
                    costs.append(CLOSED)
                    continue
                try:
                    x = float(c)
                except ValueError:
                    raise ParseError(path, i, f"cost {c[:30]!r} of arc {arc} is not a number nor "
                                              f"{CLOSED_WORD!r}") from None
                if not math.isfinite(x):
                    raise ParseError(path, i, f"cost {c[:30]!r} of arc {arc} is not finite")
                if x <= 0:
                    raise ParseError(path, i, f"cost {c[:30]!r} of arc {arc} must be positive (write "
                                              f"{CLOSED_WORD!r} to close the arc)")
                cost = max(1, math.floor(x + 0.5))
                if cost > MAX_TRAFFIC_COST:
                    raise ParseError(path, i, f"cost {c[:30]!r} of arc {arc} is over {MAX_TRAFFIC_COST}")
                ids.append(arc)
                costs.append(cost)
        except UnicodeDecodeError:
            raise ParseError(path, None, "not UTF-8 text (expected a CSV of arc_id,cost rows)") from None
    if not ids:
        raise ParseError(path, None, "holds no arc_id,cost row")
    return np.asarray(ids, dtype=np.int64), np.asarray(costs, dtype=np.int64)


def _is_number(s):
    try:
        float(s)
    except ValueError:
        return False
    return True




# ------------------------------------------------------------------------------------------- the stage
@dataclass
class CustomizeConfig:
    """What the customize stage reads and writes.

    Attributes
    ----------
    graph : RoadGraph, str or path-like
        Read: the graph, or its saved directory (the extract stage's output).
    partition : Partition, str or path-like
        Read: the partition, or its saved directory (the partition stage's output; checked to belong to
        the graph).
    metric : str, Profile, Metric, path-like or None
        ``"distance"``, ``"time"``, ``"time-uturn"``, a :class:`~gpuroute.crp.Profile`, a profile JSON
        file (:func:`resolve_metric_spec`) or a :class:`~gpuroute.crp.Metric`; None: the metric of the
        routing weight (:func:`metric_of`).
    weight : str, optional
        The routing weight when ``metric`` is None (default :func:`routing_weight`).
    traffic : str or path-like, optional
        Read: a CSV of ``arc_id,cost`` rows (:func:`read_traffic`), applied after customizing
        (:meth:`gpuroute.Overlay.update`).
    device : {"auto", "cpu", "gpu"}
        See :meth:`gpuroute.Overlay.customize`.
    output : str or path-like, optional
        Written: the overlay directory (``overlay/`` of an overlay or dataset directory; new, empty, or a
        saved overlay to replace). None: in memory.
    """

    graph: object
    partition: object
    metric: object = None
    weight: object = None
    traffic: object = None
    device: str = "auto"
    output: object = None

    def reads(self):
        return [p for p in (file_path(self.graph), file_path(self.partition) if isinstance(self.partition, (str, os.PathLike))
                            else None, file_path(self.traffic)) if p]

    def writes(self):
        return [p for p in (file_path(self.output),) if p]


@dataclass
class Customized:
    """The customize stage's output.

    Attributes
    ----------
    overlay : Overlay
        Customized (and updated with the traffic).
    metric : str, Profile or Metric
        The metric customized (resolved).
    info : dict
        :meth:`gpuroute.Overlay.customize`'s report (``seconds``, ``level_seconds``).
    traffic : dict or None
        ``file``, ``rows``, ``arcs``, ``cells`` re-customized per level, ``seconds``, ``level_seconds``.
    output : str or None
        The overlay directory written.
    build_seconds, save_seconds : float
        Building the topology; saving.
    """

    overlay: object
    metric: object
    info: dict
    traffic: object
    output: object
    build_seconds: float
    save_seconds: float = 0.0


def check_output(directory):
    """Refuse to replace anything but a saved overlay (or an empty or new directory).

    Raises
    ------
    FileExistsError
        ``directory`` exists and is not a saved overlay.
    """
    from .. import store
    from ..crp.overlay import FORMAT

    try:
        return store.check_replaceable(directory, (FORMAT,), "a saved overlay")
    except FileExistsError:
        raise FileExistsError(f"{os.path.abspath(os.fspath(directory))}: exists and is not a saved overlay; not "
                              "replacing it") from None


def run(config):
    """Customize the overlay of the graph and partition for the metric, apply the traffic, and save it
    where ``config.output`` says.

    Parameters
    ----------
    config : CustomizeConfig

    Returns
    -------
    Customized

    Raises
    ------
    ParseError
        A bad traffic row (file and line named; checked before the graph is read); a saved graph or
        partition that does not load.
    ValueError
        The partition belongs to another graph; an invalid metric.
    FileExistsError
        ``output`` holds something that is not a saved overlay (checked before any work).
    """
    from ..crp.customize import build_mezzanine
    from ..crp.overlay import Overlay
    from .partition import load as load_partition

    ids = costs = None
    if config.traffic is not None:
        ids, costs = read_traffic(config.traffic)  # syntax first: fail before the (slower) graph and customization
    if config.output is not None:
        check_output(config.output)
    g = graph_of(config.graph)
    part = load_partition(config.partition, g)
    if ids is not None and (ids >= g.n_arcs).any():  # name the line: read again with the arc count
        read_traffic(config.traffic, g.n_arcs)
    met = config.metric
    if met is None:
        met = metric_of(g, routing_weight(g, config.weight))
    elif not hasattr(met, "arc_cost"):
        met = resolve_metric_spec(met)
    t0 = time.perf_counter()
    ov = Overlay.build(g, part, mezzanine=build_mezzanine(g, part))
    build_s = time.perf_counter() - t0
    info = ov.customize(met, device=config.device)
    upd = None
    if ids is not None:
        u = ov.update(ids, costs, device=config.device)
        upd = {"file": os.path.abspath(os.fspath(config.traffic)), "rows": int(ids.size),
               "arcs": int(np.unique(ids).size), "cells": u["cells"], "seconds": u["seconds"],
               "level_seconds": u["level_seconds"]}
    out, save_s = None, 0.0
    if config.output is not None:
        t0 = time.perf_counter()
        out = os.path.abspath(ov._save_files(config.output))
        save_s = time.perf_counter() - t0
    return Customized(ov, met, info, upd, out, build_s, save_s)
