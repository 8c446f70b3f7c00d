"""Tests of the ``gpuroute`` command line (:mod:`gpuroute.cli.main`), called as ``main([...])``.

Oracle: ``gpuroute.sssp(graph, source, device="cpu")`` on the nodes the CLI reports as snapped. Fast tests
use a 4-node DIMACS pair written to ``tmp_path``; the tests marked ``slow`` load the shipped NY network
(each ``main`` call loads it once, ~1-2 s).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import gpuroute
from gpuroute import INF, datasets
from gpuroute.backend import probe_gpu
from gpuroute.cli.common import STAGE_LINE
from gpuroute.cli.main import main
from gpuroute.cli.route import LANDMARKS
from gpuroute.geo import nearest_node

NY_GR = Path(datasets.DATA_DIR) / "USA-road-d.NY.gr.gz"
TIMES_SQUARE = "-73.9855,40.7580"
BROOKLYN_BRIDGE = "-73.9969,40.7061"

# ---------------------------------------------------------------------------------------------- helpers
# A 4-node network near (2.0 E, 1.0 N): 1 <-> 2 <-> 3 -> 4, plus a self-loop at 1 and a heavier
# parallel arc 1 -> 2 (both dropped at load). Node 4 reaches nothing; {1, 2, 3} is strongly connected.
TINY_ARCS_D = [(1, 2, 100), (2, 1, 100), (2, 3, 120), (3, 2, 120), (3, 4, 90), (1, 1, 5), (1, 2, 150)]
TINY_ARCS_T = [(1, 2, 30), (2, 1, 30), (2, 3, 50), (3, 2, 50), (3, 4, 20), (1, 1, 2), (1, 2, 10)]
TINY_COORDS = [(2.000, 1.000), (2.001, 1.000), (2.002, 1.000), (2.002, 1.001)]


def _lonlat(i):
    """``--from``/``--to`` argument at tiny node ``i`` (1-based DIMACS id)."""
    lon, lat = TINY_COORDS[i - 1]
    return f"{lon},{lat}"


@pytest.fixture
def tiny(tmp_path):
    """Paths of USA-road-d.TINY.gr and USA-road-t.TINY.gr (sharing USA-road-d.TINY.co)."""
    def gr(arcs):
        return "p sp 4 %d\n" % len(arcs) + "".join(f"a {u} {v} {w}\n" for u, v, w in arcs)

    d = tmp_path / "USA-road-d.TINY.gr"
    t = tmp_path / "USA-road-t.TINY.gr"
    d.write_text("c tiny test graph\n" + gr(TINY_ARCS_D))
    t.write_text(gr(TINY_ARCS_T))
    co = "p aux sp co 4\n" + "".join(
        f"v {i + 1} {round(lon * 1e6)} {round(lat * 1e6)}\n" for i, (lon, lat) in enumerate(TINY_COORDS))
    (tmp_path / "USA-road-d.TINY.co").write_text(co)
    return d, t


@pytest.fixture(scope="module")
def ny():
    return datasets.load("ny")


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


def snapped_nodes(text):
    """Internal ids of the (source, target) nodes from the text output of ``route``."""
    nodes = [int(x) for x in re.findall(r"-> node (\d+)", text)]
    assert len(nodes) == 2, text
    return nodes


def field(text, name):
    m = re.search(rf"^{name}\s+([\d,]+)", text, re.M)
    assert m, (name, text)
    return int(m.group(1).replace(",", ""))


def linestring(fc):
    lines = [f for f in fc["features"] if f["geometry"]["type"] == "LineString"]
    assert len(lines) == 1
    return lines[0]


def check_geojson(fc):
    """Structural GeoJSON (RFC 7946) checks on a route FeatureCollection."""
    assert fc["type"] == "FeatureCollection"
    for f in fc["features"]:
        assert f["type"] == "Feature"
        assert isinstance(f["properties"], dict)
        g = f["geometry"]
        if g["type"] == "Point":
            assert len(g["coordinates"]) == 2
        else:
            assert g["type"] == "LineString"
            assert len(g["coordinates"]) >= 2
            assert all(len(p) == 2 for p in g["coordinates"])
    points = [f for f in fc["features"] if f["geometry"]["type"] == "Point"]
    assert [p["properties"]["role"] for p in points] == ["source", "target"]
    return points


# ---------------------------------------------------------------------------------------------- route on NY
@pytest.mark.slow
def test_route_ny_text_matches_sssp(ny, capsys):
    rc, out, err = run(capsys, ["route", "--graph", "ny", "--from", TIMES_SQUARE, "--to", BROOKLYN_BRIDGE])
    assert rc == 0, err
    s, t = snapped_nodes(out)
    assert (s, t) == (nearest_node(ny, -73.9855, 40.7580)[0],
                      nearest_node(ny, -73.9969, 40.7061)[0])
    assert field(out, "distance") == gpuroute.sssp(ny, s, device="cpu")[t]
    assert "km" in out  # DIMACS ~0.1 m unit also shown as km
    arcs = field(out, "arcs")
    assert re.search(rf"^path\s+{arcs + 1:,} nodes", out, re.M)
    assert f"DIMACS id {s + 1}" in out and f"DIMACS id {t + 1}" in out


@pytest.mark.slow
def test_route_ny_file_json_matches_sssp(ny, capsys):
    rc, out, err = run(capsys, ["route", "--graph", NY_GR, "--from", TIMES_SQUARE, "--to", BROOKLYN_BRIDGE,
                                "--json", "--method", "astar"])
    assert rc == 0, err
    fc = json.loads(out)
    points = check_geojson(fc)
    line = linestring(fc)
    p = line["properties"]
    s, t = p["source"], p["target"]
    assert (points[0]["properties"]["node"], points[1]["properties"]["node"]) == (s, t)
    assert p["distance"] == gpuroute.sssp(ny, s, device="cpu")[t]
    assert p["unit"] == ny.units["distance"].symbol == "dimacs-d" and p["quantity"] == "length"
    assert len(line["geometry"]["coordinates"]) == p["arcs"] + 1
    np.testing.assert_allclose(line["geometry"]["coordinates"][0], ny.coords[s], atol=1e-6)
    np.testing.assert_allclose(line["geometry"]["coordinates"][-1], ny.coords[t], atol=1e-6)
    assert (p["source_id"], p["target_id"]) == (s + 1, t + 1)
    assert set(p["time_ms"]) >= {"load", "snap", "query"}


@pytest.mark.slow
def test_route_without_arguments_uses_ny_landmarks(ny, capsys):
    rc, out, err = run(capsys, ["route"])
    assert rc == 0, err
    for name, _, _ in LANDMARKS:
        assert name in out
    s, t = snapped_nodes(out)
    d = field(out, "distance")
    assert 0 < d == gpuroute.sssp(ny, s, device="cpu")[t]


# ---------------------------------------------------------------------------------------------- route on a tiny graph
def test_route_tiny_json_and_metrics(tiny, capsys):
    d_path, _ = tiny
    rc, out, err = run(capsys, ["route", "--graph", d_path, "--from", _lonlat(1), "--to", _lonlat(4), "--json",
                                "--snapping", "any"])  # node 4 is outside the largest component {1, 2, 3}
    assert rc == 0, err
    fc = json.loads(out)
    check_geojson(fc)
    p = linestring(fc)["properties"]
    assert (p["source"], p["target"], p["distance"], p["arcs"]) == (0, 3, 100 + 120 + 90, 3)
    assert len(linestring(fc)["geometry"]["coordinates"]) == p["arcs"] + 1
    # --metric time on a USA-road-d file loads the USA-road-t file beside it (the lighter parallel arc)
    rc, out, err = run(capsys, ["route", "--graph", d_path, "--from", _lonlat(1), "--to", _lonlat(4),
                                "--metric", "time", "--method", "dijkstra", "--snapping", "any"])
    assert rc == 0, err
    assert "USA-road-t.TINY" in out and "travel_time" in out
    assert field(out, "duration") == 10 + 50 + 20  # a time metric is reported as a duration
    assert "dimacs-t (~0.3 s)" in out  # 80 steps of ~0.0036 s


def test_route_default_snapping_avoids_pieces_that_cannot_be_left(tiny, capsys):
    """Section 4: a point next to a node outside the largest strongly connected component (node 4, a dead
    end) snapped there on main and gave "no route"; it now snaps to node 3 and routes (OSRM's default)."""
    d_path, _ = tiny
    rc, out, err = run(capsys, ["route", "--graph", d_path, "--from", _lonlat(4), "--to", _lonlat(1)])
    assert rc == 0, err
    assert snapped_nodes(out) == [2, 0]
    assert field(out, "distance") == 120 + 100


def test_route_unreachable_exit_code_1(tiny, capsys):
    d_path, _ = tiny
    rc, out, err = run(capsys, ["route", "--graph", d_path, "--from", _lonlat(4), "--to", _lonlat(1),
                                "--snapping", "any"])
    assert rc == 1
    assert "no route" in err and "Traceback" not in err
    assert "unreachable" in out
    rc, out, err = run(capsys, ["route", "--graph", d_path, "--from", _lonlat(4), "--to", _lonlat(1), "--json",
                                "--snapping", "any"])
    assert rc == 1
    fc = json.loads(out)
    check_geojson(fc)
    assert not [f for f in fc["features"] if f["geometry"]["type"] == "LineString"]
    assert fc["properties"]["reachable"] is False


# ---------------------------------------------------------------------------------------------- errors
def test_missing_file(tmp_path, capsys):
    missing = tmp_path / "missing.gr"
    rc, out, err = run(capsys, ["route", "--graph", missing, "--from", "2,1", "--to", "2.001,1"])
    assert_one_line_error(rc, out, err, "missing.gr")
    rc, out, err = run(capsys, ["info", missing])
    assert_one_line_error(rc, out, err, "missing.gr")


def test_unknown_graph_name_lists_shipped_names(capsys):
    rc, out, err = run(capsys, ["info", "atlantis"])
    assert_one_line_error(rc, out, err, "atlantis", *datasets.names())
    rc, out, err = run(capsys, ["sssp", "atlantis", "--source", "0"])
    assert_one_line_error(rc, out, err, "atlantis", *datasets.names())


def test_point_outside_bbox(tiny, capsys):
    d_path, _ = tiny
    rc, out, err = run(capsys, ["route", "--graph", d_path, "--from", "10,10", "--to", _lonlat(2)])
    assert_one_line_error(rc, out, err, "--from", "outside", "bounding box")
    # LAT,LON instead of LON,LAT: say so
    rc, out, err = run(capsys, ["route", "--graph", d_path, "--from", _lonlat(1), "--to", "1.0,2.001"])
    assert_one_line_error(rc, out, err, "--to", "outside", "swap")


@pytest.mark.parametrize("bad", ["abc", "1,2,3", "1;2", "-73.9", "200,10", "10,95", "nan,1", "", "-73.98,٤0.75"])
def test_bad_lonlat_syntax(bad, capsys):
    rc, out, err = run(capsys, ["route", "--from", bad, "--to", "-73.98,40.75"])
    assert_one_line_error(rc, out, err, "--from")


def test_from_without_to(capsys):
    rc, out, err = run(capsys, ["route", "--from", "-73.98,40.75"])
    assert_one_line_error(rc, out, err, "--to")


def test_gpu_unavailable(tiny, capsys, monkeypatch):
    d_path, _ = tiny
    monkeypatch.setenv("GPUROUTE_DISABLE_GPU", "1")
    probe_gpu.cache_clear()
    try:
        rc, out, err = run(capsys, ["sssp", d_path, "--source", "0", "--device", "gpu"])
        assert_one_line_error(rc, out, err, "gpu")
        rc, out, err = run(capsys, ["route", "--graph", d_path, "--from", _lonlat(1), "--to", _lonlat(2),
                                    "--device", "gpu"])
        assert_one_line_error(rc, out, err, "gpu")
    finally:
        monkeypatch.delenv("GPUROUTE_DISABLE_GPU")
        probe_gpu.cache_clear()


def test_help_and_no_command(capsys):
    assert main(["--help"]) == 0
    assert "route" in capsys.readouterr().out
    assert main([]) == 2
    assert main(["frobnicate"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) >= 1


# ---------------------------------------------------------------------------------------------- info
@pytest.mark.slow
def test_info_ny_counts(ny, capsys):
    rc, out, err = run(capsys, ["info", "ny"])
    assert rc == 0, err
    assert field(out, "nodes") == ny.n_nodes
    assert field(out, "arcs") == ny.n_arcs
    assert f"{ny.meta['parallel_arcs_dropped']:,} parallel arcs" in out
    assert re.search(r"^strongly connected\s+1 component, largest 264,346 nodes", out, re.M)


def test_info_tiny(tiny, capsys):
    d_path, _ = tiny
    rc, out, err = run(capsys, ["info", d_path])
    assert rc == 0, err
    g = gpuroute.load_dimacs(d_path)
    assert field(out, "nodes") == g.n_nodes == 4
    assert field(out, "arcs") == g.n_arcs == 5
    assert "1 self-loops, 1 parallel arcs" in out
    assert "0: 1  1: 1  2: 2  3: 0  4: 0  5+: 0" in out
    assert re.search(r"^strongly connected\s+2 components, largest 3 nodes", out, re.M)
    assert re.search(r"^weakly connected\s+1 component, largest 4 nodes", out, re.M)
    assert "length [dimacs-d]: min 90, median 100 (~10 m), mean 106.0, max 120" in out
    assert "turn restrictions   none" in out


# ---------------------------------------------------------------------------------------------- sssp
@pytest.mark.slow
def test_sssp_output_ny(ny, tmp_path, capsys):
    f = tmp_path / "dist.npy"
    rc, out, err = run(capsys, ["sssp", "ny", "--source", "42", "--output", f])
    assert rc == 0, err
    got = np.load(f)
    assert got.dtype == np.int64
    expect = gpuroute.sssp(ny, 42, device="cpu")
    np.testing.assert_array_equal(got, expect)
    assert re.search(rf"^reached\s+{ny.n_nodes:,} of {ny.n_nodes:,}", out, re.M)
    assert f"{int(expect.max()):,}" in out  # eccentricity
    assert not list(tmp_path.glob(".gpuroute-*"))  # no temporary file left


@pytest.mark.parametrize("algorithm", ["dijkstra", "bellman-ford"])
def test_sssp_tiny_source_id_and_unreachable(tiny, tmp_path, capsys, algorithm):
    d_path, _ = tiny
    g = gpuroute.load_dimacs(d_path)
    f = tmp_path / "d.npy"
    rc, out, err = run(capsys, ["sssp", d_path, "--source-id", "1", "--algorithm", algorithm, "--device", "cpu",
                                "--output", f])
    assert rc == 0, err
    np.testing.assert_array_equal(np.load(f), gpuroute.sssp(g, 0, device="cpu"))
    np.testing.assert_array_equal(np.load(f), [0, 100, 220, 310])
    rc, out, err = run(capsys, ["sssp", d_path, "--source", "3", "--output", f])
    assert rc == 0, err
    assert list(np.load(f)) == [INF, INF, INF, 0]
    assert re.search(r"^reached\s+1 of 4", out, re.M)


def test_sssp_bad_source(tiny, capsys):
    d_path, _ = tiny
    rc, out, err = run(capsys, ["sssp", d_path, "--source", "4"])
    assert_one_line_error(rc, out, err, "--source 4")
    rc, out, err = run(capsys, ["sssp", d_path, "--source-id", "99"])
    assert_one_line_error(rc, out, err, "99")


# ---------------------------------------------------------------------------------------------- section 2 and 4 findings
def test_route_planar_graph_takes_x_y(tmp_path, capsys):
    """Planar graphs (METIS .xyz) take X,Y points: main rejected both X,Y (out of lon/lat range) and
    LON,LAT (outside the bounding box)."""
    (tmp_path / "p.graph").write_text("3 2\n2\n1 3\n2\n")
    (tmp_path / "p.xyz").write_text("1000 2000 0\n1000 2300 0\n1400 2300 0\n")
    rc, out, err = run(capsys, ["route", "--graph", tmp_path / "p.graph", "--from", "1001,1999", "--to", "1399,2301"])
    assert rc == 0, err
    assert snapped_nodes(out) == [0, 2]
    assert field(out, "distance") == 300 + 400
    assert "units away" in out  # planar snap distances are not metres
    rc, out, err = run(capsys, ["route", "--graph", tmp_path / "p.graph", "--from", "5000,5000", "--to", "1399,2301"])
    assert_one_line_error(rc, out, err, "--from", "bounding box", "(x 996")


def test_lonlat_range_checked_for_lonlat_graphs(tiny, capsys):
    d_path, _ = tiny
    rc, out, err = run(capsys, ["route", "--graph", d_path, "--from", "200,1", "--to", _lonlat(1)])
    assert_one_line_error(rc, out, err, "--from", "longitude")


def test_huge_dimacs_header_is_one_line_exit_2(tmp_path, capsys):
    """Section 4: a header ``p sp 3000000000 1`` allocated 22 GiB and the CLI printed a traceback with
    exit 1 (the "no route" code) on main."""
    bad = tmp_path / "huge.gr"
    bad.write_text("p sp 3000000000 1\na 1 2 5\n")
    rc, out, err = run(capsys, ["info", bad])
    assert_one_line_error(rc, out, err, "huge.gr")


def test_unexpected_failure_is_one_line_exit_2(tiny, capsys, monkeypatch):
    """Every CLI failure, not only the expected kinds, is one line with exit 2 (-v keeps the traceback)."""
    import gpuroute.graph.stats as stats

    def boom(graph):
        raise MemoryError("cannot allocate")

    monkeypatch.setattr(stats, "graph_stats", boom)
    d_path, _ = tiny
    rc, out, err = run(capsys, ["info", d_path])
    assert_one_line_error(rc, out, err, "out of memory")


def test_sssp_output_directory_named_not_a_temporary_file(tiny, tmp_path, capsys):
    """Section 4: ``--output DIR`` reported the temporary file's path on main."""
    d_path, _ = tiny
    rc, out, err = run(capsys, ["sssp", d_path, "--source", "0", "--output", tmp_path])
    line = assert_one_line_error(rc, out, err, "is a directory", str(tmp_path))
    assert ".gpuroute-" not in line and ".tmp" not in line
    rc, out, err = run(capsys, ["sssp", d_path, "--source", "0", "--output", tmp_path / "nope" / "d.npy"])
    assert_one_line_error(rc, out, err, "does not exist")


def test_sssp_output_follows_the_umask(tiny, tmp_path, capsys):
    """Section 4: files were created 0600 (mkstemp) whatever the umask on main."""
    import os

    d_path, _ = tiny
    old = os.umask(0o022)
    try:
        rc, out, err = run(capsys, ["sssp", d_path, "--source", "0", "--output", tmp_path / "d.npy"])
    finally:
        os.umask(old)
    assert rc == 0, err
    assert (tmp_path / "d.npy").stat().st_mode & 0o777 == 0o644


def test_route_reports_compilation_apart_from_the_query(tiny, capsys):
    """Section 4: numba's first-call compilation (3.7-5.3 s on a cold cache) was reported as query time."""
    d_path, _ = tiny
    rc, out, err = run(capsys, ["route", "--graph", d_path, "--from", _lonlat(1), "--to", _lonlat(3), "--json"])
    assert rc == 0, err
    t = linestring(json.loads(out))["properties"]["time_ms"]
    assert set(t) == {"load", "snap", "compile", "query", "total"}
    rc, out, err = run(capsys, ["route", "--graph", d_path, "--from", _lonlat(1), "--to", _lonlat(3)])
    assert re.search(r"^time\s+.*compile [\d,.]+, query [\d,.]+\)", out, re.M)


@pytest.mark.slow
def test_osm_time_is_a_duration_and_info_counts_restrictions(capsys):
    """Section 2: an OSM travel time printed as ``distance 1,918 ds`` on main; it is a duration with a
    reading, and ``info`` reports the turn restrictions and units."""
    rc, out, err = run(capsys, ["route", "--graph", "monaco", "--from", "7.4246,43.7384", "--to", "7.4201,43.7311",
                                "--device", "cpu"])
    assert rc == 0, err
    assert re.search(r"^duration\s+[\d,]+ ds \(\d+ min \d\d s\)", out, re.M), out
    rc, out, err = run(capsys, ["info", "monaco"])
    assert rc == 0, err
    g = datasets.load("monaco")
    c = g.turns.counts()
    assert re.search(rf"^turn restrictions\s+{len(g.turns)} \({c['no']} no, {c['only']} only\)", out, re.M), out
    assert re.search(r"^weight travel_time\s+time \[ds\]", out, re.M)
    assert re.search(r"^weight distance\s+length \[m\]", out, re.M)
    rc, out, err = run(capsys, ["info", "ny"])
    assert "dimacs-d" in out and "0.1 m" in out  # the DIMACS unit explained


def test_make_demo_installs_what_the_readme_examples_need():
    """Section 4: `make demo` installed the package without the `osm` extra that the README's
    `--graph monaco` example needs, and the README never said how to reach the command in .venv."""
    root = Path(__file__).resolve().parents[2]
    make = (root / "Makefile").read_text()
    installed = re.search(r"^\$\(VENV\)/\.installed:.*?\n((?:\t.*\n)+)", make, re.M).group(1)
    assert re.search(r"\[[^\]]*\bosm\b[^\]]*\]", installed), installed
    readme = (root / "README.md").read_text()
    assert ".venv/bin/gpuroute" in readme and "--graph monaco" in readme


# ---------------------------------------------------------------------------------------------- issue 18, minors
@pytest.mark.parametrize("radius", ["-5", "nan", "-0.1", "-inf"])
def test_route_radius_must_not_be_negative(tiny, capsys, radius):
    """``--radius -5`` was accepted; now exit 2 naming the value."""
    d_path, _ = tiny
    rc, out, err = run(capsys, ["route", "--graph", d_path, "--from", _lonlat(1), "--to", _lonlat(3),
                                f"--radius={radius}"])
    assert_one_line_error(rc, out, err, f"--radius {radius}", ">= 0")


def test_route_radius_zero_and_positive(tiny, capsys):
    d_path, _ = tiny
    rc, out, err = run(capsys, ["route", "--graph", d_path, "--from", _lonlat(1), "--to", _lonlat(3),
                                "--radius", "500"])
    assert rc == 0, err
    rc, out, err = run(capsys, ["route", "--graph", d_path, "--from", "2.0004,1.0", "--to", _lonlat(3),
                                "--radius", "0"])  # 44 m from node 1: outside a radius of 0
    assert rc == 2 and "--from 2.0004,1" in err


def test_route_json_time_is_a_duration_without_float_noise(tiny, capsys):
    """``route --json --metric time`` put the duration under ``"distance"``; now ``"duration"`` (as OSRM), and
    ``si`` carries no float noise (``191.70000000000002``)."""
    d_path, _ = tiny
    rc, out, err = run(capsys, ["route", "--graph", d_path, "--from", _lonlat(1), "--to", _lonlat(4), "--json",
                                "--metric", "time", "--method", "dijkstra", "--snapping", "any"])
    assert rc == 0, err
    p = linestring(json.loads(out))["properties"]
    assert p["duration"] == 10 + 50 + 20 and "distance" not in p and p["quantity"] == "time"
    assert p["si"] == 0.288 == round(80 * 0.0036, 10)  # 80 * 0.0036 is 0.28800000000000003 in floats
    rc, out, err = run(capsys, ["route", "--graph", d_path, "--from", _lonlat(1), "--to", _lonlat(4), "--json",
                                "--snapping", "any"])
    p = linestring(json.loads(out))["properties"]
    assert p["distance"] == 310 and "duration" not in p
    assert p["si"] == 31.0 and repr(p["si"]) == "31.0"  # 310 * 0.1 is 31.000000000000004 in floats
