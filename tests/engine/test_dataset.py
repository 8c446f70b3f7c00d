"""Dataset directories (``gpuroute build``, :mod:`gpuroute.engine.dataset`) and routes over the overlay
(:mod:`gpuroute.engine.traffic`): built stages load without building, routes honour turn restrictions
(against a turn-aware Dijkstra oracle), equal the hierarchy's where no restriction binds, and follow
:meth:`Engine.customize`."""
from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest

pytest.importorskip("osmium")

from phantoms import point  # noqa: E402
from turn_oracle import phantom_cost, route_arcs, turn_graph, turns_allowed  # noqa: E402

from gpuroute.cli.common import STAGE_LINE  # noqa: E402
from gpuroute.cli.main import main  # noqa: E402
from gpuroute.crp.metric import RESTRICTED  # noqa: E402
from gpuroute.engine import Engine, EngineError  # noqa: E402
from gpuroute.engine.dataset import (  # noqa: E402
    FORMAT,
    DatasetError,
    drop_traffic,
    is_dataset,
    load_dataset,
)
from gpuroute.pipeline import build_dataset  # noqa: E402

CELLS = (64, 1024)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """One build per module, through the command line: ``(directory, summary)``."""
    import contextlib
    import io

    d = tmp_path_factory.mktemp("ds") / "monaco"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["build", "monaco", "-o", str(d), "--cell-sizes", ",".join(map(str, CELLS)), "--json"]) == 0
    return d, json.loads(buf.getvalue())


@pytest.fixture(scope="module")
def dataset(built):
    return built[0]


@pytest.fixture(autouse=True)
def _built_metric(request):
    """Each test starts from the built metric: an engine opened from the directory saves its
    customizations there (DIR/traffic.npz) and the next one would restore them."""
    if "dataset" in request.fixturenames:
        drop_traffic(request.getfixturevalue("dataset"))


@pytest.fixture(scope="module")
def engines(dataset):
    e = Engine.open(dataset)
    return e, Engine(e.graph, e.ch)  # the same graph and hierarchy, routes over the hierarchy


def _pairs(e, k=30, seed=3):
    """Coordinates of k random node pairs, and of pairs on both sides of restricted turns (the midpoints
    of the turn's in- and out-arc: a route there must go round)."""
    g = e.graph
    c = g.coords
    rng = np.random.default_rng(seed)
    out = [(c[i].tolist(), c[j].tolist()) for i, j in rng.integers(0, g.n_nodes, (k, 2))]
    tr = e.overlay.turns
    in_arc = np.repeat(np.arange(g.n_arcs), np.diff(np.asarray(tr.first)))
    for t in np.flatnonzero(np.asarray(tr.kind) == RESTRICTED)[:12]:
        a, b = int(in_arc[t]), int(tr.out_arc[t])
        mid = lambda x: ((c[g.tail[x]] + c[g.head[x]]) / 2).tolist()  # noqa: E731
        out.append((mid(a), mid(b)))
    return out


def _route(e, pts):
    return e.route(pts, annotations=["nodes"], overview="false")["routes"][0]


def test_build_layout_and_manifest(dataset):
    assert is_dataset(dataset)
    man = json.loads((dataset / "manifest.json").read_text())
    assert man["format"] == FORMAT and man["version"] == 1 and man["metric"] == "time"
    assert set(man["parts"]) == {"graph", "ch", "partition", "overlay"}
    for name, part in man["parts"].items():
        assert (dataset / part["directory"]).is_dir(), name
        assert part["what"]
    assert man["parts"]["partition"]["cell_sizes"] == list(CELLS)
    assert man["parts"]["partition"]["cells_sha256"] == man["parts"]["overlay"]["cells_sha256"]
    assert not [p for p in os.listdir(dataset.parent) if p.startswith(".")]  # no temporary left behind


def test_open_loads_every_part(dataset, engines):
    e, _ = engines
    ds = load_dataset(dataset)
    assert ds.graph.fingerprint() == e.graph.fingerprint()
    assert e.graph.meta.get("way_names") and e.graph.turns is not None  # names and restrictions travelled
    assert e.overlay is not None and e.overlay.customized and e.ch.weight == "travel_time"
    caps = {c["service"]: c for c in e.capabilities}
    assert caps["route"]["algorithm"] == "crp" and caps["route"]["traffic_aware"]
    assert caps["table"]["algorithm"].startswith("crp") and caps["table"]["traffic_aware"]
    assert caps["nearest"]["algorithm"] == "segment index"
    assert e.info["capabilities"] == e.capabilities
    plain = {c["service"]: c for c in engines[1].capabilities}
    assert plain["route"]["algorithm"] == "ch" and plain["customize"]["algorithm"] == "none"


def test_routes_match_turn_oracle_and_ch(engines):
    e, ech = engines
    ov = e.overlay
    tg = turn_graph(ov)
    binding = equal = 0
    for pts in _pairs(e):
        r = _route(e, pts)
        rc = _route(ech, pts)
        sp = [point(e.segments.snap(*p)) for p in pts]
        want = phantom_cost(ov, sp[0], sp[1], tg)
        assert r["weight"] == pytest.approx(want * 0.1, abs=0.051), pts
        assert r["duration"] == pytest.approx(r["weight"], abs=0.051)
        assert r["weight_name"] == "travel_time"
        assert turns_allowed(ov, route_arcs(e, r)), pts
        assert r["weight"] >= rc["weight"] - 0.051
        if r["weight"] > rc["weight"] + 0.051:
            binding += 1
            assert not turns_allowed(ov, route_arcs(ech, rc))  # the hierarchy's route takes a forbidden turn
        else:
            equal += 1
            assert r["distance"] == pytest.approx(rc["distance"], abs=0.2) or r["weight"] == rc["weight"]
    assert binding >= 3 and equal >= 20


def test_customize_doubling_follows_oracle(dataset):
    e = Engine.open(dataset)
    ov = e.overlay
    g = e.graph
    c = g.coords
    rng = np.random.default_rng(11)
    changed = 0
    for i, j in rng.integers(0, g.n_nodes, (6, 2)):
        pts = [c[i].tolist(), c[j].tolist()]
        before = _route(e, pts)
        arcs = route_arcs(e, before)
        if len(arcs) < 4:
            continue
        cost = np.asarray(ov.arc_cost)
        res = e.customize([{"arc": int(a), "cost": int(2 * cost[a])} for a in arcs])
        assert res["code"] == "Ok" and res["seconds"] >= 0 and len(res["cells"]) == len(CELLS)
        after = _route(e, pts)
        sp = [point(e.segments.snap(*p)) for p in pts]
        want = phantom_cost(ov, sp[0], sp[1])
        assert after["weight"] == pytest.approx(want * 0.1, abs=0.051)
        assert after["weight"] > before["weight"] - 0.051
        if route_arcs(e, after) != arcs:
            changed += 1
        e.customize(metric="time")  # back to the built metric
        assert _route(e, pts)["weight"] == before["weight"]
    assert changed >= 1


def test_bad_updates_change_nothing(dataset):
    e = Engine.open(dataset)
    ov = e.overlay
    c = e.graph.coords
    pts = [c[10].tolist(), c[5000].tolist()]
    before = _route(e, pts)
    met = ov.metric
    m = e.graph.n_arcs
    for bad, where in (([{"arc": 0, "cost": 5}, {"arc": m, "cost": 5}], "updates[1]"),
                       ([{"arc": -1, "cost": 5}], "updates[0]"),
                       ([{"arc": 3, "cost": 0}], "updates[0]"),
                       ([{"arc": 3, "cost": float("inf")}], "updates[0]"),
                       ([{"arc": 3, "cost": float("nan")}], "updates[0]"),
                       ([{"arc": 1, "cost": 9}, {"from": 1, "to": 2, "speed_kmh": 30}], "updates[1]"),
                       ([{"arc": 1, "cost": 9}, {"arc": 2, "cost": 9, "x": 1}], "updates[1]")):
        with pytest.raises(EngineError) as ei:
            e.customize(bad)
        assert ei.value.code == "InvalidValue" and where in ei.value.message
    ids = np.asarray(e.graph.node_ids)
    a = int(np.flatnonzero(np.asarray(e.graph.arc_attrs["length_m"]) > 10)[0])
    u, v = int(ids[e.graph.tail[a]]), int(ids[e.graph.head[a]])
    for speed in (-1e-9, -5, float("inf")):  # (0 closes the arc: tests/engine/test_traffic_closures.py)
        with pytest.raises(EngineError, match="updates.0.*speed_kmh"):
            e.customize([{"from": u, "to": v, "speed_kmh": speed}])
    with pytest.raises(EngineError) as ei:
        e.customize(metric="fastest")
    assert ei.value.code == "InvalidValue"
    with pytest.raises(EngineError) as ei:
        e.customize()
    assert ei.value.code == "InvalidOptions"
    assert ov.metric is met
    assert _route(e, pts) == before
    # a good speed update: travel time from length_m, in deciseconds
    e.customize([{"from": u, "to": v, "speed_kmh": 36.0}])
    assert ov.arc_cost[a] == max(1, round(float(e.graph.arc_attrs["length_m"][a])))  # 10 m/s -> length ds


def test_metric_switch(dataset):
    e = Engine.open(dataset)
    ov = e.overlay
    c = e.graph.coords
    pts = [c[100].tolist(), c[9000].tolist()]
    t = _route(e, pts)
    res = e.customize(metric="distance")
    assert res["cells"] == [int(x) for x in ov.n_cells] and res["metric"] == "distance"
    d = _route(e, pts)
    assert d["weight_name"] == "distance"
    sp = [point(e.segments.snap(*p)) for p in pts]
    assert d["weight"] == pytest.approx(phantom_cost(ov, sp[0], sp[1]), abs=0.51)
    assert d["distance"] <= t["distance"] + 0.5
    with pytest.raises(EngineError, match="time metric"):  # speeds need a time metric
        ids = np.asarray(e.graph.node_ids)
        e.customize([{"from": int(ids[e.graph.tail[0]]), "to": int(ids[e.graph.head[0]]), "speed_kmh": 30}])
    e.customize(metric="time-uturn")
    assert _route(e, pts)["weight_name"] == "time-uturn"
    e.customize(metric="time")
    assert _route(e, pts)["weight"] == t["weight"]


def test_without_overlay_not_implemented(engines):
    with pytest.raises(EngineError) as ei:
        engines[1].customize([{"arc": 0, "cost": 1}])
    assert ei.value.code == "NotImplemented" and "gpuroute build" in ei.value.message


def test_build_refuses_and_checks(tmp_path, dataset):
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("x")
    with pytest.raises(FileExistsError):
        build_dataset("monaco", other)
    assert (other / "keep.txt").read_text() == "x"
    with pytest.raises((DatasetError, FileNotFoundError)):
        load_dataset(tmp_path / "nothing")
    with pytest.raises(DatasetError):
        load_dataset(other)
    # a manifest that does not match its graph is refused
    bad = tmp_path / "bad"
    import shutil

    shutil.copytree(dataset, bad)
    man = json.loads((bad / "manifest.json").read_text())
    man["parts"]["graph"]["fingerprint"] = "0" * 16
    (bad / "manifest.json").write_text(json.dumps(man))
    with pytest.raises(DatasetError, match="edited after saving: field 'parts' changed"):  # the store's integrity
        Engine.open(bad)
    man.pop("integrity")  # a manifest written before the store recorded integrity: the fingerprint refuses it
    (bad / "manifest.json").write_text(json.dumps(man))
    with pytest.raises(DatasetError, match="fingerprint"):
        Engine.open(bad)


def test_cli_build(tmp_path, capsys, built):
    out, s = built
    assert s["cell_sizes"] == list(CELLS) and set(s["seconds"]) >= {"import", "contract", "partition", "customize"}
    assert s["directory"] == str(out) and is_dataset(out)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "f").write_text("x")
    assert main(["build", "monaco", "-o", str(bad)]) == 2
    assert "not a dataset directory" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------- issue 18, item 5
def _pbf(path, nodes, ways):
    """A small PBF written with pyosmium: ``nodes`` {id: (lon, lat)}, ``ways`` [(id, [node ids], tags)]."""
    import osmium

    w = osmium.SimpleWriter(str(path))
    try:
        for i, (x, y) in sorted(nodes.items()):
            w.add_node(osmium.osm.mutable.Node(id=i, location=osmium.osm.Location(x, y), version=1))
        for i, refs, tags in ways:
            w.add_way(osmium.osm.mutable.Way(id=i, nodes=refs, tags=tags, version=1))
    finally:
        w.close()
    return path


GRID_NODES = {r * 5 + c + 1: (7.0 + 0.001 * c, 43.0 + 0.001 * r) for r in range(5) for c in range(5)}


def _grid_ways(tags):
    ways = [(100 + r, [r * 5 + c + 1 for c in range(5)], tags) for r in range(5)]
    return ways + [(200 + c, [r * 5 + c + 1 for r in range(5)], tags) for c in range(5)]


def test_build_refuses_a_pbf_without_car_roads(tmp_path, capsys):
    """Before: exit 0 and a dataset that ``serve`` then refuses. Now: exit 2, one line naming the file and
    what was missing, and nothing written."""
    pbf = _pbf(tmp_path / "paths.osm.pbf", GRID_NODES, _grid_ways({"highway": "footway"}))
    out = tmp_path / "paths.ds"
    assert main(["build", str(pbf), "-o", str(out), "--profile", "car-basic"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("gpuroute build: error: ") and str(pbf) in err[-1]
    assert all(STAGE_LINE.match(ln) for ln in err[:-1]), err  # one error line, after the stage that ran
    assert "no way the 'car-basic' profile may use (10 highway=* ways, 0 routable)" in err[-1]
    assert not out.exists() and sorted(os.listdir(tmp_path)) == ["paths.osm.pbf"]  # nothing half-written
    # no highway at all, and a way whose every node is missing from the file
    pbf = _pbf(tmp_path / "cut.osm.pbf", {1: (7.0, 43.0)}, [(1, [11, 12, 13], {"highway": "primary"}),
                                                            (2, [1], {"building": "yes"})])
    with pytest.raises(ValueError, match=r"cut\.osm\.pbf: nothing to route on: .*1 routable, 1 of them with nodes "
                                         r"missing from the file"):
        build_dataset(str(pbf), tmp_path / "cut.ds", profile="car-basic")
    assert not (tmp_path / "cut.ds").exists()


def test_ways_with_missing_nodes_are_counted_and_reported(tmp_path, capsys):
    """A way cut by the extract (nodes 98, 99 absent) is counted in the graph's meta and in the build's
    output, instead of being dropped silently."""
    from gpuroute.io.osm import load_osm

    ways = _grid_ways({"highway": "residential"}) + [(300, [25, 99, 98], {"highway": "residential"}),
                                                     (301, [1, 97], {"highway": "service"})]
    pbf = _pbf(tmp_path / "cut.osm.pbf", GRID_NODES, ways)
    g = load_osm(pbf, profile="car-basic", progress=False)
    assert g.meta["ways_missing_nodes"] == 2 and g.meta["nodes_missing_location"] == 3
    assert g.meta["segments_missing_location"] == 3  # 25-99, 99-98, 1-97
    assert g.meta["routable_ways"] == 12
    out = tmp_path / "cut.ds"
    assert main(["build", str(pbf), "-o", str(out), "--cell-sizes", "8", "--json", "--profile", "car-basic"]) == 0
    cap = capsys.readouterr()
    s = json.loads(cap.out)
    assert s["graph"]["ways_missing_nodes"] == 2 and s["graph"]["segments_missing_location"] == 3
    assert re.search(r"warning: 2 routable ways of .*cut\.osm\.pbf have nodes missing from the file", cap.err)
    assert main(["build", str(pbf), "-o", str(out), "--cell-sizes", "8", "--profile", "car-basic"]) == 0
    assert re.search(r"^incomplete\s+2 ways with nodes missing from the file \(3 segments dropped\)$",
                     capsys.readouterr().out, re.M)


def test_engine_open_refuses_a_pbf_without_car_roads(tmp_path):
    """``gpuroute serve`` of such a file (Engine.open): the same message, naming the file (before: "graph 'p'
    has no segment to snap to")."""
    pbf = _pbf(tmp_path / "p.osm.pbf", GRID_NODES, _grid_ways({"highway": "cycleway"}))
    with pytest.raises(ValueError, match=r"p\.osm\.pbf: nothing to route on: no way the 'car-basic' profile may use"):
        Engine.open(str(pbf), profile="car-basic")


def test_a_profile_for_a_built_graph_is_refused(tmp_path, dataset):
    """A profile applies to OpenStreetMap files: given with another source it is refused, not ignored."""
    with pytest.raises(ValueError, match="'ny' is not OpenStreetMap; profile 'car' needs an OSM file"):
        build_dataset("ny", tmp_path / "x", profile="car")
    with pytest.raises(ValueError, match="applies to OpenStreetMap files"):
        Engine.open(load_dataset(dataset).graph, profile="car")
    assert not (tmp_path / "x").exists()
