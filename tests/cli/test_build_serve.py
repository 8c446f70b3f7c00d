"""``gpuroute build`` / ``gpuroute serve`` / :meth:`Engine.open` on graphs without travel times (issue 18,
item 4), the one stderr line naming the routing weight, ``--weight``, and what a length-weight engine
reports as duration (null, never the length); stage progress lines of ``build``.

Oracle: scipy's Dijkstra on the graph's own arc list for the route weights; the routing weight's unit for
the reported ``weight`` and ``distance``.
"""
from __future__ import annotations

import argparse
import json
import re

import numpy as np
import pytest
from scipy.sparse.csgraph import dijkstra

from gpuroute.cli.common import weight_line
from gpuroute.cli.main import main
from gpuroute.engine import Engine, EngineError
from gpuroute.engine.dataset import is_dataset, load_dataset
from gpuroute.graph import units as U
from gpuroute.pipeline import build_dataset
from gpuroute.pipeline.customize import routing_weight

K = 9  # a K x K grid of streets, 0.001 degree apart (~111 m), both directions
LON0, LAT0, STEP = 2.0, 1.0, 0.001


def _grid_arcs():
    rng = np.random.default_rng(5)
    out = []
    for r in range(K):
        for c in range(K):
            v = r * K + c + 1
            for dr, dc in ((0, 1), (1, 0)):
                if r + dr < K and c + dc < K:
                    u = (r + dr) * K + (c + dc) + 1
                    d = int(1100 + rng.integers(0, 60))  # dimacs-d: ~0.1 m
                    t = int(d * rng.choice([1.0, 1.5, 2.5]))
                    out += [(v, u, d, t), (u, v, d, t)]
    return out


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    """``USA-road-d.GRID.gr`` (distance) and ``USA-road-t.GRID.gr`` (travel time) sharing ``.co``."""
    d = tmp_path_factory.mktemp("grid")
    arcs = _grid_arcs()
    for letter, j in (("d", 2), ("t", 3)):
        (d / f"USA-road-{letter}.GRID.gr").write_text(
            f"p sp {K * K} {len(arcs)}\n" + "".join(f"a {a[0]} {a[1]} {a[j]}\n" for a in arcs))
    (d / "USA-road-d.GRID.co").write_text(
        f"p aux sp co {K * K}\n" + "".join(f"v {r * K + c + 1} {round((LON0 + c * STEP) * 1e6)} "
                                           f"{round((LAT0 + r * STEP) * 1e6)}\n" for r in range(K) for c in range(K)))
    return d / "USA-road-d.GRID.gr", d / "USA-road-t.GRID.gr"


def _oracle(g, weight, s, t):
    return dijkstra(g.to_scipy(weight), indices=[s])[0, t]


def _node_at(r, c):
    return [LON0 + c * STEP, LAT0 + r * STEP]


# ---------------------------------------------------------------------------------------- the default weight
def test_routing_weight_default_and_errors(grid):
    from gpuroute import open_graph

    gd, gt = open_graph(str(grid[0])), open_graph(str(grid[1]))
    assert gd.weight_names == ["distance"] and routing_weight(gd) == "distance"
    assert routing_weight(gt) == "travel_time"
    with pytest.raises(KeyError, match=r"no weight 'travel_time'; it has \['distance'\]"):
        routing_weight(gd, "travel_time")


def test_engine_open_distance_graph_reports_no_duration(grid):
    """Before: ``Engine.open`` of a distance-only graph raised "has no weight 'travel_time'". Now it routes
    by distance; the duration is null (never the length in disguise), weight and distance are metres."""
    e = Engine.open(str(grid[0]))
    assert e.weight == "distance" and not e.has_durations
    g = e.graph
    a, b = _node_at(0, 0), _node_at(K - 1, K - 1)
    r = e.route([a, b], steps=True, annotations=True)["routes"][0]
    want_m = _oracle(g, "distance", 0, K * K - 1) * U.DIMACS_DISTANCE.scale
    assert r["duration"] is None and r["legs"][0]["duration"] is None
    assert r["weight_name"] == "distance" and r["weight"] == pytest.approx(want_m, abs=0.11)
    assert r["distance"] == pytest.approx(want_m, rel=0.02)  # haversine of the geometry vs DIMACS lengths
    leg = r["legs"][0]
    assert all(s["duration"] is None for s in leg["steps"])
    assert set(leg["annotation"]["duration"]) == {None} and set(leg["annotation"]["speed"]) == {None}
    json.dumps(r, allow_nan=False)  # valid JSON: null, no NaN
    with pytest.raises(EngineError) as ei:
        e.table([a, b])
    assert ei.value.code == "InvalidOptions" and "annotations=distance" in ei.value.message
    t = e.table([a, b], annotations="distance")
    assert t["distances"][0][1] == pytest.approx(want_m, rel=0.02) and "durations" not in t
    # a weight the graph has not: refused naming the ones it has
    with pytest.raises(KeyError, match=r"has no weight 'travel_time'; it has \['distance'\]"):
        Engine.open(str(grid[0]), weight="travel_time")


def test_engine_time_graph_durations_from_the_weight(grid):
    e = Engine.open(str(grid[1]))
    assert e.weight == "travel_time" and e.has_durations
    r = e.route([_node_at(0, 0), _node_at(K - 1, K - 1)])["routes"][0]
    want_s = _oracle(e.graph, "travel_time", 0, K * K - 1) * U.DIMACS_TIME.scale
    assert r["duration"] == pytest.approx(want_s, abs=0.11) and r["weight"] == r["duration"]


# ---------------------------------------------------------------------------------------- build
def test_build_distance_graph_default_weight(grid, tmp_path, capsys):
    """``gpuroute build`` of a DIMACS distance graph (as ``gpuroute build -o x.ds`` of ``ny``): before, exit 2
    "has no weight 'travel_time'"; now a dataset routed by distance, one line naming the weight and the
    companion with travel times, one line per stage start and end."""
    out = tmp_path / "g.ds"
    assert main(["build", str(grid[0]), "-o", str(out), "--cell-sizes", "16"]) == 0
    err = capsys.readouterr().err
    assert "routing by weight 'distance' [dimacs-d]" in err
    assert f"for travel times use {grid[1]}" in err
    for st in ("import", "contract", "partition", "customize", "save"):
        assert re.search(rf"^gpuroute build: {st} \.\.\.$", err, re.M), st
        assert re.search(rf"^gpuroute build: {st} done in [\d.]+ s$", err, re.M), st
    man = json.loads((out / "manifest.json").read_text())
    assert man["weight"] == "distance" and man["metric"] == "distance"
    assert man["parts"]["ch"]["weight"] == "distance" and "distance" in man["parts"]["overlay"]["what"]
    ds = load_dataset(out)
    assert ds.ch.weight == "distance" and ds.overlay.metric.name == "distance"
    e = Engine.open(out)
    assert e.weight == "distance"
    a, b = _node_at(1, 1), _node_at(K - 2, K - 3)
    over = e.route([a, b])["routes"][0]
    ch_only = Engine(e.graph, e.ch).route([a, b])["routes"][0]
    assert over["duration"] is None and over["weight_name"] == "distance"
    assert over["weight"] == pytest.approx(ch_only["weight"], abs=0.11)  # overlay and hierarchy agree
    with pytest.raises(ValueError, match="contracted for 'distance', not 'travel_time'"):
        Engine.open(out, weight="travel_time")


def test_build_weight_option(grid, tmp_path, capsys):
    bad = tmp_path / "bad.ds"
    assert main(["build", str(grid[0]), "-o", str(bad), "--weight", "travel_time"]) == 2
    err = capsys.readouterr().err
    assert "no weight 'travel_time'" in err and "'distance'" in err and len(err.strip().splitlines()) >= 1
    assert not bad.exists()
    out = tmp_path / "t.ds"
    assert main(["build", str(grid[1]), "-o", str(out), "--cell-sizes", "16", "--weight", "travel_time",
                 "--json"]) == 0
    cap = capsys.readouterr()
    s = json.loads(cap.out)  # stdout is the JSON alone: progress went to stderr
    assert s["weight"] == "travel_time" and s["metric"] == "time" and s["unit"]["symbol"] == "dimacs-t"
    assert "routing by weight 'travel_time' [dimacs-t], a travel time" in cap.err
    assert is_dataset(out)


def test_build_dataset_reports_stages(grid, tmp_path):
    seen = []
    build_dataset(str(grid[1]), tmp_path / "p.ds", cell_sizes=[16], progress=lambda st, sec: seen.append((st, sec)))
    starts = [st for st, sec in seen if sec is None]
    ends = [st for st, sec in seen if sec is not None]
    assert starts == ends == ["import", "contract", "partition", "customize", "save"]
    assert all(sec >= 0 for _, sec in seen if sec is not None)


# ---------------------------------------------------------------------------------------- serve
def _serve(monkeypatch, argv):
    uvicorn = pytest.importorskip("uvicorn")
    pytest.importorskip("starlette")
    from gpuroute.cli import serve
    from gpuroute.server import http as server_http

    ran = {}
    assert uvicorn  # serve runs uvicorn through gpuroute.server.http.run (on a socket it bound first)
    monkeypatch.setattr(server_http, "run", lambda app, sock, **kw: ran.update(app=app, **kw) or True)
    p = argparse.ArgumentParser()
    serve.add_parser(p.add_subparsers(), argparse.ArgumentParser(add_help=False))
    args = p.parse_args(["serve", *argv])
    args.verbose = 0
    args.workers = 1  # one process: --workers N > 1 would start numba's fork-safe threading layer in this one
    assert serve.run(args) == 0
    return ran["app"].state.engine


def test_serve_distance_graph(grid, monkeypatch, capsys):
    """``gpuroute serve`` of a DIMACS distance graph: before, "has no weight 'travel_time'"; now served by
    distance with the line naming the weight and the graph with travel times."""
    e = _serve(monkeypatch, [str(grid[0]), "--port", "0"])
    assert e.weight == "distance"
    err = capsys.readouterr().err
    line = next(ln for ln in err.splitlines() if "routing by weight" in ln)
    assert line.startswith("gpuroute serve: routing by weight 'distance' [dimacs-d], a length")
    assert "no duration" in line and f"for travel times use {grid[1]}" in line
    e = _serve(monkeypatch, [str(grid[1]), "--port", "0"])
    assert e.weight == "travel_time"
    assert "routing by weight 'travel_time' [dimacs-t], a travel time" in capsys.readouterr().err


def test_serve_weight_option(grid, monkeypatch, capsys):
    pytest.importorskip("uvicorn")
    assert main(["serve", str(grid[0]), "--weight", "travel_time"]) == 2
    assert "no weight 'travel_time'" in capsys.readouterr().err


def test_weight_line_suggests_the_companion():
    """``gpuroute serve ny``: the line names ``ny-time`` for travel times (the shipped companion)."""
    line = weight_line({"distance": U.DIMACS_DISTANCE}, "distance", "ny")
    assert "'distance' [dimacs-d], a length" in line and "for travel times use ny-time" in line
    line = weight_line({"travel_time": U.DECISECOND, "distance": U.METRE}, "distance", "monaco")
    assert "no duration" not in line and "other weights: travel_time" in line
    tntp = {"free_flow_time": U.scaled(U.MINUTE, 100), "length": U.scaled(U.KILOMETRE, 1000)}
    assert "no duration" not in weight_line(tntp, "length", "x_net.tntp")  # durations from the time column
