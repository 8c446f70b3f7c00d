"""What the command modules share: errors reported in one line, argument parsing of points, loading a
graph (with the companion rule and a progress spinner), one stderr line per long stage, the line naming
the routing weight, and text formatting."""
from __future__ import annotations

import argparse
import contextlib
import itertools
import logging
import math
import os
import re
import sys
import threading
import time

log = logging.getLogger("gpuroute.cli")

EXIT_OK = 0
EXIT_NO_ROUTE = 1
EXIT_BAD_INPUT = 2

#: Graph used when none is named.
DEFAULT_GRAPH = "ny"

#: ``--metric`` -> weight name.
METRICS = {"distance": "distance", "time": "travel_time"}

DEVICES = ("auto", "cpu", "gpu")


class CLIError(Exception):
    """Bad input that the CLI reports in one line on stderr with exit code 2."""


class UsageError(Exception):
    """An argparse error, reported in one line instead of argparse's usage block."""


class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(f"{self.prog}: error: {message} (see '{self.prog} --help')")


def parse_point(text):
    """Parse ``"X,Y"`` (``LON,LAT`` in degrees on lon/lat graphs, planar ``X,Y`` on planar ones) into a
    tuple of two finite floats; the range check needs the graph (:func:`check_point`).

    Raises
    ------
    argparse.ArgumentTypeError
        Not two comma-separated finite numbers.
    """
    parts = text.split(",")
    try:
        # ASCII only: float() also reads other scripts' digits ("٩.5"), which no coordinate uses
        if len(parts) != 2 or not text.isascii():
            raise ValueError
        x, y = float(parts[0]), float(parts[1])
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected LON,LAT in degrees (e.g. -73.9855,40.7580) or X,Y on a planar graph, got {text!r}") from None
    if not (math.isfinite(x) and math.isfinite(y)):
        raise argparse.ArgumentTypeError(f"{text!r} is not a position: both numbers must be finite")
    return x, y


def check_point(graph, point, opt):
    """Range-check a parsed point against the graph's coordinate system.

    Raises
    ------
    CLIError
        A lon/lat graph and a point outside [-180, 180] x [-90, 90].
    """
    x, y = point
    if not graph.is_planar and (abs(x) > 180 or abs(y) > 90):
        raise CLIError(f"{opt} {x:g},{y:g} is not a position: longitude must be in [-180, 180] and latitude in "
                       f"[-90, 90] (graph {graph.name!r} is lon/lat)")


def join_coordinate_args(argv):
    """Let ``--from -73.98,40.75`` work: argparse would take a value starting with '-' for an option."""
    out = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("--from", "--to") and i + 1 < len(argv) and re.match(r"^-[\d.]", argv[i + 1]):
            out.append(f"{a}={argv[i + 1]}")
            i += 2
            continue
        out.append(a)
        i += 1
    return out


def one_line(msg):
    return " ".join(str(msg).split())


def fmt_int(x):
    return f"{int(x):,}"


def fmt_num(x):
    x = float(x)
    return f"{int(x):,}" if x == int(x) else f"{x:,.1f}"


def fmt_ms(seconds):
    return f"{seconds * 1e3:,.1f} ms"


def id_label(graph):
    fmt = str(graph.meta.get("format", "")).lower()
    if fmt.startswith("dimacs"):
        return "DIMACS id"
    if "osm" in fmt or "pbf" in fmt:
        return "OSM id"
    return "external id"


def external_id(graph, node):
    return int(graph.node_ids[node]) if graph.node_ids is not None else int(node)


def describe_node(graph, node):
    s = f"node {int(node)}"
    if graph.node_ids is not None:
        s += f" ({id_label(graph)} {external_id(graph, node)})"
    return s


def stderr_is_tty():
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


@contextlib.contextmanager
def progress(desc, delay=2.0):
    """A tqdm spinner on stderr for a step that may take a while.

    Shown only when stderr is a terminal and only once the step has run ``delay`` seconds; it is cleared
    when the step ends, so stdout (``--json``) and captured stderr never see it.
    """
    if not stderr_is_tty():
        yield
        return
    from tqdm import tqdm

    bar = tqdm(total=None, desc=desc, file=sys.stderr, delay=delay, leave=False,
               bar_format="{desc} [{elapsed}]")
    stop = threading.Event()
    shown = []

    def spin():
        t0 = time.monotonic()
        for ch in itertools.cycle("|/-\\"):
            if stop.wait(0.125):
                return
            if time.monotonic() - t0 >= delay:
                bar.set_description_str(f"{desc} {ch}", refresh=False)
                bar.refresh()
                shown.append(True)

    th = threading.Thread(target=spin, name="gpuroute-progress", daemon=True)
    th.start()
    try:
        yield
    finally:
        stop.set()
        th.join()
        if shown:
            bar.clear()  # refresh() does not mark the bar as printed, so close() alone would leave it
        bar.close()


#: The form of the stage lines :func:`stage` and ``gpuroute build`` print on stderr (a tool reading stderr can
#: tell them from the one error line, which starts ``gpuroute <command>: error:``).
STAGE_LINE = re.compile(r"^gpuroute [a-z]+: (?!error: |warning: ).+ (\.\.\.|done in [0-9.]+ s|done in [0-9]+ min [0-9]{2} s)$")


@contextlib.contextmanager
def stage(prog, what):
    """One line on stderr when a long stage starts and one when it ends, with its time, as OSRM logs its
    stages (``gpuroute build: contract ...`` / ``gpuroute build: contract done in 29.1 s``). Always
    shown (stdout stays the command's answer); a failure prints nothing here (the command's error line
    says what failed)."""
    print(f"{prog}: {what} ...", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    yield
    print(f"{prog}: {what} done in {fmt_seconds(time.perf_counter() - t0)}", file=sys.stderr, flush=True)


def fmt_seconds(seconds):
    """``"0.42 s"``, ``"29.1 s"``, ``"2 min 05 s"``."""
    s = float(seconds)
    if s < 10:
        return f"{s:.2f} s"
    if s < 60:
        return f"{s:.1f} s"
    m, r = divmod(round(s), 60)
    return f"{m} min {r:02d} s"


def weight_line(units, weight, spec=None):
    """The line a serving command prints about the weight it routes by: its unit and whether routes
    will carry durations, with the companion graph that has travel times when there is one
    (``ny`` -> ``ny-time``, :func:`gpuroute.datasets.for_weight`) and the graph's other weights.

    ``units`` maps each weight of the graph, in order, to its :class:`~gpuroute.graph.units.Unit`.
    """
    from .. import datasets

    unit = units.get(weight)
    s = f"routing by weight {weight!r}" + (f" [{unit.symbol}]" if unit is not None and unit.symbol else "")
    # as the engine reads durations: travel_time, the routing weight, or another time weight of known scale
    has_time = (unit is not None and unit.quantity == "time") or any(
        u.quantity == "time" and (u.scale or w == "travel_time") for w, u in units.items())
    if unit is not None and unit.quantity == "time":
        s += ", a travel time"
    elif unit is not None and unit.quantity == "length":
        s += ", a length (shortest routes)"
    if not has_time:
        s += "; the graph has no travel times, so routes report no duration (null)"
        other = datasets.for_weight(spec, "travel_time") if isinstance(spec, str) else spec
        if isinstance(spec, str) and other != spec:
            s += f"; for travel times use {other}"
    others = [w for w in units if w != weight]
    if others:
        s += f" (other weights: {', '.join(others)}; --weight NAME)"
    return s


def load(spec, weight=None):
    """Open a graph by dataset name or path (:func:`gpuroute.open_graph`), the companion graph when it
    carries ``weight`` (:func:`gpuroute.datasets.for_weight`); returns ``(graph, seconds)``.

    Raises
    ------
    CLIError
        Unknown name or missing file (one line, listing the shipped graphs).
    """
    from .. import datasets
    from ..opener import open_graph

    spec = datasets.for_weight(spec, weight)
    looks_like_name = not any(c in spec for c in "/\\.")
    t0 = time.perf_counter()
    try:
        with progress(f"loading {spec}"):
            graph = open_graph(spec)
    except KeyError as e:
        msg = one_line(e.args[0] if e.args else e)
        names = datasets.names()
        if not all(n in msg for n in names):
            msg += f"; shipped graphs: {', '.join(names)}"
        raise CLIError(msg) from e
    except FileNotFoundError as e:
        msg = f"{e.strerror}: {e.filename}" if e.filename and e.strerror else one_line(e)
        names = datasets.names()
        if looks_like_name and not all(n in msg for n in names):
            msg += f" (not a file; shipped graphs: {', '.join(names)})"
        raise CLIError(msg) from e
    dt = time.perf_counter() - t0
    log.info("loaded %r in %.3f s", graph, dt)
    return graph, dt


def pick_weight(graph, metric):
    """Weight name for ``--metric`` (None: the graph's default weight)."""
    if metric is None:
        return graph.default_weight
    want = METRICS[metric]
    if want not in graph.weights:
        raise CLIError(f"graph {graph.name!r} has no {metric} weight ({want!r}); it has {graph.weight_names}")
    return want


def check_device(device):
    """Fail fast (before loading) when ``--device gpu`` cannot be honoured."""
    if device == "gpu":
        from ..backend import resolve_device

        resolve_device("gpu")


def graph_line(graph, weight=None):
    s = f"{graph.name} ({fmt_int(graph.n_nodes)} nodes, {fmt_int(graph.n_arcs)} arcs"
    if weight is not None:
        unit = graph.units[weight]
        s += f"; weight {weight}" + (f" [{unit.symbol}]" if unit.symbol else "")
    return s + ")"


def print_rows(rows, out=None):
    out = out or sys.stdout
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}", file=out)


def output_path(path):
    """Check ``--output`` before any work: a file path in an existing directory.

    Raises
    ------
    CLIError
        The path is a directory, or its directory does not exist.
    """
    full = os.path.abspath(path)
    if os.path.isdir(full):
        raise CLIError(f"--output {path} is a directory; give a file name such as {os.path.join(path, 'dist.npy')}")
    d = os.path.dirname(full)
    if not os.path.isdir(d):
        raise CLIError(f"cannot write {full}: directory {d} does not exist")
    return full


def open_ch(directory, graph_spec=None):
    """Open a saved hierarchy and its graph for the ``--ch`` commands (route, tree, table).

    The graph is ``graph_spec`` (a name or path, as ``--graph`` takes it) or the one recorded in the
    hierarchy's manifest (:func:`gpuroute.ch.store.graph_spec`); it is opened by
    :func:`gpuroute.cli.common.load` with the hierarchy's weight (the companion rule applies) and the
    hierarchy is checked to belong to it (:func:`gpuroute.ch.store.load_hierarchy`).

    Returns
    -------
    (ContractionHierarchy, RoadGraph, float)
        The hierarchy with its graph, the graph, and the seconds both took to load.

    Raises
    ------
    CLIError
        The recorded graph cannot be reopened (the message asks for ``--graph``).
    FileNotFoundError, ParseError, ValueError
        No such directory; a damaged or edited hierarchy; a hierarchy of another graph or weight.
    """
    from ..ch.store import graph_spec as recorded_graph
    from ..ch.store import load_hierarchy, read_manifest

    t0 = time.perf_counter()
    weight = read_manifest(directory)["weight"]
    if graph_spec is None:
        try:
            graph_spec = recorded_graph(directory)
        except FileNotFoundError as e:
            raise CLIError(f"{e} (--graph PATH)") from e
    graph, _ = load(graph_spec, weight)
    with progress(f"loading the hierarchy {directory}"):
        ch = load_hierarchy(directory, graph=graph)
    dt = time.perf_counter() - t0
    log.info("loaded %r with %r in %.3f s", ch, graph, dt)
    return ch, graph, dt


def depart_at_arg(text):
    """``--depart-at``: the departure time as the HTTP API's ``depart_at`` reads it
    (:func:`gpuroute.engine.timeslots.parse_depart_at`: ISO 8601, e.g. ``2026-11-26T08:00`` -- wall-clock time
    in the time profile's zone -- or ``2026-11-26T08:00+01:00``, or ``now``); a datetime.

    Raises
    ------
    argparse.ArgumentTypeError
        Not an ISO 8601 date and time (the engine's message, naming the value).
    """
    from ..engine.osrm import EngineError
    from ..engine.timeslots import parse_depart_at

    try:
        return parse_depart_at(text)
    except EngineError as e:
        raise argparse.ArgumentTypeError(e.message) from None


def open_engine(spec, *, time_profile=None, depart_at=None, weight=None):
    """:meth:`gpuroute.engine.Engine.open` for the commands that answer through the engine (``trip``, ``route
    --alternatives/--depart-at``): ``time_profile`` (``--time-profile FILE``) overrides the one a dataset
    directory stores (``gpuroute timeprofile DIR FILE``); returns ``(engine, seconds)``.

    Raises
    ------
    CLIError
        A graph or dataset that cannot be opened, a bad ``--time-profile`` (naming the file and line), or
        ``depart_at`` given and no time profile (neither given nor stored).
    """
    from ..engine import Engine, EngineError

    t0 = time.perf_counter()
    try:
        with progress(f"opening {spec}"):
            engine = Engine.open(spec, weight=weight, time_profile=False if time_profile is not None else None)
    except KeyError as e:
        raise CLIError(one_line(e.args[0] if e.args else e)) from None
    except FileNotFoundError as e:
        raise CLIError(f"{e.strerror}: {e.filename}" if e.filename and e.strerror else one_line(e)) from None
    if time_profile is not None:
        try:
            engine.set_time_profile(time_profile)
        except (OSError, ValueError, EngineError) as e:  # TimeProfileError names the file and line
            raise CLIError(f"--time-profile: {one_line(e)}") from None
    if depart_at is not None and engine.info.get("time_profile") is None:
        raise CLIError("--depart-at needs a time profile: --time-profile FILE, or one stored in the dataset "
                       "directory (gpuroute timeprofile DIR FILE)")
    return engine, time.perf_counter() - t0
