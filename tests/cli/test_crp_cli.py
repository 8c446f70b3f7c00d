"""The Customizable Route Planning stages on the command line: ``partition``, ``customize`` (metrics,
traffic), ``route --overlay`` (called as ``main([...])``), on the shipped Monaco extract (it has turn
restrictions) with small cells (64 / 1024 nodes).

Oracles: a naive turn-aware Dijkstra on arcs (:func:`naive.turn_aware_distances`, restricted turns taken
from the graph's restrictions) with the metric's arc costs, for the metric ``time`` (no penalties) and
with traffic; scipy's Dijkstra on ``travel_time`` as a lower bound (restrictions only remove paths); the
library (:meth:`gpuroute.Overlay.route`) for the same nodes.
"""
from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest
from naive import random_road_graph, scipy_dijkstra, turn_aware_distances

import gpuroute
from gpuroute import INF, Overlay, Partition
from gpuroute.cli.common import STAGE_LINE
from gpuroute.cli.main import main
from gpuroute.crp import Profile

SIZES = "64,1024"


def run(capsys, argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def assert_one_line_error(rc, out, err, *needles):
    assert rc == 2, (rc, out, err)
    assert out == ""
    assert "Traceback" not in err
    # one error line; before it only the lines of the stages that ran (gpuroute X: loading ny ... / done in 1.2 s)
    lines = [ln for ln in err.strip().splitlines() if not STAGE_LINE.match(ln)]
    assert len(lines) == 1 and err.strip().splitlines()[-1] == lines[0], err
    for n in needles:
        assert n.lower() in lines[0].lower(), (n, lines[0])
    return lines[0]


def at(g, v):
    x, y = g.coords[v]
    return f"{x:.7f},{y:.7f}"


def field(text, name):
    m = re.search(rf"^{name}\s+([\d,]+)", text, re.M)
    assert m, (name, text)
    return int(m.group(1).replace(",", ""))


def snapped_nodes(text):
    nodes = [int(x) for x in re.findall(r"-> node (\d+)", text)]
    assert len(nodes) == 2, text
    return nodes


def oracle(g, s, arc_cost):
    """Turn-aware distances from ``s`` with ``arc_cost`` and no penalties: a turn costs its out-arc,
    a restricted turn is never taken."""
    forbidden = set()
    if g.turns is not None:
        fi, fo = g.turns.forbidden_pairs(g.first_out, g.head)
        forbidden = set(zip(fi.tolist(), fo.tolist(), strict=True))
    arc_cost = [int(x) for x in arc_cost]
    d = turn_aware_distances(g, s, arc_cost, lambda a, b: None if (a, b) in forbidden else arc_cost[b])
    return np.array([INF if x is None else x for x in d], dtype=np.int64)


def files(d):
    """Every file under ``d`` with its bytes (what is on disk)."""
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def monaco(tmp_path_factory):
    """(graph, an overlay directory with the partition only); tests copy the directory."""
    g = gpuroute.datasets.load("monaco")
    d = tmp_path_factory.mktemp("crp") / "monaco.crp"
    rc = main(["partition", "monaco", "-o", str(d), "--cell-sizes", SIZES, "--json"])
    assert rc == 0
    return g, d


@pytest.fixture
def crp(monaco, tmp_path, capsys):
    g, d = monaco
    capsys.readouterr()
    mine = tmp_path / "monaco.crp"
    shutil.copytree(d, mine)
    return g, mine


def route(capsys, d, g, s, t, *extra):
    return run(capsys, ["route", "--overlay", d, "--from", at(g, s), "--to", at(g, t), "--snapping", "any", *extra])


# ---------------------------------------------------------------------------------------------- the pipeline
def test_partition_customize_route_match_the_oracles(crp, capsys):
    g, d = crp
    rc, out, err = run(capsys, ["partition", "monaco", "-o", d, "--cell-sizes", SIZES])  # same seed: same cells
    assert rc == 0, err
    assert re.search(r"^level 0\s+[\d,]+ cells of at most 64 nodes, [\d,]+ boundary arcs", out, re.M), out
    assert re.search(r"^level 1\s+[\d,]+ cells of at most 1,024 nodes", out, re.M), out
    part = Partition.load(d / "partition", graph=g)
    assert part.cell_sizes == (64, 1024)
    assert field(out, "level 0") == part.n_cells[0]
    rc, out, err = run(capsys, ["customize", d, "--metric", "time"])
    assert rc == 0, err
    assert re.search(r"^customize\s+[\d,.]+ ms: level 0 [\d,.]+ ms, level 1 [\d,.]+ ms$", out, re.M), out
    ov = Overlay.load(d / "overlay", graph=g)
    assert ov.metric.name == "time"
    np.testing.assert_array_equal(ov.arc_cost, g.weight("travel_time"))
    rng = np.random.default_rng(7)
    sources = rng.integers(0, g.n_nodes, 3)
    plain = scipy_dijkstra(g, sources, weight="travel_time")
    checked = 0
    for i, s in enumerate(sources):
        exp = oracle(g, int(s), g.weight("travel_time"))
        for t in rng.integers(0, g.n_nodes, 3):
            rc, out, err = route(capsys, d, g, s, t)
            src, dst = snapped_nodes(out)
            if src != s or exp[dst] == INF:
                continue
            assert rc == 0, err
            got = field(out, "duration")
            assert got == ov.route(src, dst).distance == exp[dst]
            assert got >= plain[i, dst]
            assert re.search(r"^search\s+crp on cpu", out, re.M), out
            checked += 1
            last = (src, dst, got)
    assert checked >= 5
    # GeoJSON: the same answer, method crp, the metric and its unit
    src, dst, want = last
    rc, out, err = route(capsys, d, g, src, dst, "--json")
    assert rc == 0, err
    line = next(f for f in json.loads(out)["features"] if f["geometry"]["type"] == "LineString")
    p = line["properties"]
    assert (p["duration"], p["method"], p["weight"], p["unit"], p["device"]) == (want, "crp", "time", "ds", "cpu")
    assert "distance" not in p  # a time is reported as a duration, as OSRM names it
    assert p["arcs"] + 1 == len(line["geometry"]["coordinates"])


def test_profile_metric_equals_the_library(crp, capsys, tmp_path):
    g, d = crp
    prof = tmp_path / "car.json"
    prof.write_text(json.dumps({"name": "car", "speeds_kmh": {"default": 30, "primary": 60},
                                "turn_penalties_s": {"uturn": 60, "left": 4}}))
    rc, out, err = run(capsys, ["customize", d, "--metric", prof, "--json"])
    assert rc == 0, err
    s = json.loads(out)
    assert s["metric"] == {"name": "car", "unit": "ds", "spec": str(prof)}
    assert len(s["level_seconds"]) == 2 and s["traffic"] is None
    ref = Overlay.build(g, Partition.load(d / "partition", graph=g))
    ref.customize(Profile.load(prof))
    for a, b in ((10, 9000), (15000, 300), (9000, 12)):
        rc, out, err = route(capsys, d, g, a, b)
        src, dst = snapped_nodes(out)
        exp = ref.route(src, dst).distance
        assert "metric car [ds]" in out
        if exp == INF:
            assert rc == 1 and "unreachable" in out
            continue
        assert rc == 0, err
        assert field(out, "duration") == exp


# ---------------------------------------------------------------------------------------------- traffic
def test_traffic_changes_the_answer_and_a_bad_row_changes_nothing(crp, capsys, tmp_path):
    g, d = crp
    assert run(capsys, ["customize", d, "--metric", "time"])[0] == 0
    w = g.weight("travel_time").astype(np.int64)
    s, t = 12, 9000
    res = Overlay.load(d / "overlay", graph=g).route(s, t)
    assert 0 < res.distance < INF and res.arcs.size > 4
    a = int(res.arcs[res.arcs.size // 2])
    csv = tmp_path / "traffic.csv"
    csv.write_text(f"arc_id,cost\n# doubled\n\n{a},{2 * int(w[a])}\n")
    rc, out, err = run(capsys, ["customize", d, "--metric", "time", "--traffic", csv])
    assert rc == 0, err
    assert re.search(r"^traffic\s+1 rows, 1 arcs", out, re.M), out
    w2 = w.copy()
    w2[a] *= 2
    exp = oracle(g, s, w2)
    assert exp[t] > res.distance  # the doubled arc lies on the only shortest route ...
    rc, out, err = route(capsys, d, g, s, t)
    assert rc == 0, err
    assert snapped_nodes(out) == [s, t]
    assert field(out, "duration") == exp[t]  # ... and the overlay's answer follows it
    man = json.loads((d / "manifest.json").read_text())
    assert man["customization"]["traffic"]["file"] == str(csv)
    before = files(d)
    bad = tmp_path / "bad.csv"
    for rows, needle in ((f"{a},5\n{a},fast\n", "bad.csv:2: cost 'fast'"),
                         (f"arc_id,cost\n{a},5\n{g.n_arcs},5\n", f"bad.csv:3: arc id {g.n_arcs} is not an arc"),
                         (f"{a},nan\n", "bad.csv:1: cost 'nan'"),
                         (f"{a},5\n{a},-3\n", "bad.csv:2: cost '-3'"),
                         (f"{a},inf\n", "not finite"),
                         (f"{a};5\n{a},5\n", "bad.csv:1: expected arc_id,cost")):
        bad.write_text(rows)
        rc, out, err = run(capsys, ["customize", d, "--metric", "time", "--traffic", bad])
        assert_one_line_error(rc, out, err, needle)
        assert files(d) == before  # the previous customization stays, manifest included
    rc, out, err = route(capsys, d, g, s, t)
    assert rc == 0 and field(out, "duration") == exp[t]


# ---------------------------------------------------------------------------------------------- fingerprints
def test_customization_of_another_partition_is_refused(crp, capsys):
    g, d = crp
    assert run(capsys, ["customize", d, "--metric", "distance"])[0] == 0
    rc, out, err = route(capsys, d, g, 10, 9000)
    assert rc == 0, err
    rc, out, err = run(capsys, ["partition", "monaco", "-o", d, "--cell-sizes", "32,512", "--method", "inertial"])
    assert rc == 0, err
    rc, out, err = route(capsys, d, g, 10, 9000)
    assert_one_line_error(rc, out, err, "customized from another partition", f"gpuroute customize {d}")
    rc, out, err = run(capsys, ["customize", d, "--metric", "distance"])
    assert rc == 0, err
    rc, out, err = route(capsys, d, g, 10, 9000)
    assert rc == 0, err
    assert "distance" in out and "metric distance [m]" in out


def test_partition_of_another_graph_is_refused(crp, capsys):
    g, d = crp
    assert run(capsys, ["customize", d, "--metric", "time"])[0] == 0
    before = files(d / "overlay")
    other, _ = random_road_graph(np.random.default_rng(3), 60)
    Partition.build(other, cell_sizes=(8, 32), method="inertial").save(d / "partition")
    rc, out, err = run(capsys, ["customize", d, "--metric", "time"])
    assert_one_line_error(rc, out, err, "built for another graph", "monaco")
    assert files(d / "overlay") == before
    rc, out, err = route(capsys, d, g, 10, 9000)
    assert_one_line_error(rc, out, err, "customized from another partition")


# ---------------------------------------------------------------------------------------------- bad input
def test_bad_inputs(crp, capsys, tmp_path):
    g, d = crp
    pts = ["--from", at(g, 10), "--to", at(g, 9000)]
    rc, out, err = run(capsys, ["route", "--overlay", d, *pts])
    assert_one_line_error(rc, out, err, "not customized yet", "gpuroute customize")
    rc, out, err = run(capsys, ["customize", tmp_path / "nothing", "--metric", "time"])
    assert_one_line_error(rc, out, err, "no such directory")
    rc, out, err = run(capsys, ["customize", d, "--metric", "speed"])
    assert_one_line_error(rc, out, err, "'speed' is neither a metric name")
    rc, out, err = run(capsys, ["customize", d / "partition", "--metric", "time"])
    assert_one_line_error(rc, out, err, "a saved partition inside the overlay directory")
    rc, out, err = run(capsys, ["customize", d, "--metric", "time", "--traffic", tmp_path / "none.csv"])
    assert_one_line_error(rc, out, err, "none.csv")
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    rc, out, err = run(capsys, ["partition", "monaco", "-o", other])
    assert_one_line_error(rc, out, err, "not an overlay directory", "not writing into it")
    assert (other / "notes.txt").read_text() == "keep me"
    rc, out, err = run(capsys, ["partition", "monaco", "-o", d, "--cell-sizes", "64,big"])
    assert_one_line_error(rc, out, err, "--cell-sizes", "64,big")
    assert run(capsys, ["customize", d, "--metric", "time"])[0] == 0
    rc, out, err = run(capsys, ["route", "--overlay", d / "overlay", *pts])
    assert_one_line_error(rc, out, err, f"give {d}")
    rc, out, err = run(capsys, ["route", "--overlay", d, "--metric", "distance", *pts])
    assert_one_line_error(rc, out, err, "customized for 'time'")
    rc, out, err = run(capsys, ["route", "--overlay", d, "--method", "dijkstra", *pts])
    assert_one_line_error(rc, out, err, "does not apply with --overlay")
    rc, out, err = run(capsys, ["route", "--overlay", d, "--ch", d, *pts])
    assert_one_line_error(rc, out, err, "--ch or --overlay")
    rc, out, err = run(capsys, ["route", "--overlay", d, "--from", "7.0,40.0", "--to", at(g, 1)])
    assert_one_line_error(rc, out, err, "outside the bounding box")


def test_long_stages_print_one_line_at_start_and_end(crp, capsys, tmp_path):
    """``partition``, ``customize`` and ``contract`` used to be silent for tens of seconds on NY: now one stderr
    line when each stage starts and one when it ends, with its time (stdout keeps the summary or JSON)."""
    g, d = crp
    rc, out, err = run(capsys, ["customize", d, "--metric", "time", "--json"])
    assert rc == 0, err
    json.loads(out)
    lines = err.strip().splitlines()
    assert lines[0] == "gpuroute customize: loading monaco ..."
    assert re.fullmatch(r"gpuroute customize: loading monaco done in [\d.]+ s", lines[1])
    assert lines[2] == f"gpuroute customize: customizing monaco for time and saving {d} ..."
    assert re.fullmatch(rf"gpuroute customize: customizing monaco for time and saving {re.escape(str(d))} done in "
                        r"[\d.]+ s", lines[3])
    out_dir = tmp_path / "again.crp"
    rc, out, err = run(capsys, ["partition", "monaco", "-o", out_dir, "--cell-sizes", SIZES])
    assert rc == 0, err
    assert re.search(rf"^gpuroute partition: partitioning monaco and saving {re.escape(str(out_dir))} done in [\d.]+ s$",
                     err, re.M), err
    rc, out, err = run(capsys, ["contract", "monaco", "-o", tmp_path / "m.ch", "--device", "cpu"])
    assert rc == 0, err
    for what in ("loading monaco", r"contracting monaco for travel_time \(cu-ch on cpu\)", "saving .*m\\.ch"):
        assert re.search(rf"^gpuroute contract: {what} \.\.\.$", err, re.M), (what, err)
        assert re.search(rf"^gpuroute contract: {what} done in [\d.]+ s$", err, re.M), (what, err)
    assert re.search(r"^saved\s+.*m\.ch$", out, re.M)  # the summary stays on stdout
