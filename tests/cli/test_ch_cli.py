"""The contraction-hierarchy commands: ``contract``, ``route --ch``, ``tree``, ``table`` (called as
``main([...])``).

Hierarchies are built without a builder where the command under test is a query (the oracle
contraction ``naive_ch`` of tests/naive.py, with and without a core), saved with
:func:`gpuroute.ch.store.save_hierarchy` next to DIMACS files written to ``tmp_path``.
Oracle: ``gpuroute.sssp(graph, source, device="cpu")``.
"""
from __future__ import annotations

import json
import re

import numpy as np
import pytest
from naive import naive_ch, random_road_graph

import gpuroute
from gpuroute import INF, load_dimacs, save_graph
from gpuroute.ch import ContractionHierarchy
from gpuroute.ch.check import check_hierarchy
from gpuroute.ch.store import MANIFEST, load_hierarchy, save_hierarchy
from gpuroute.cli.common import STAGE_LINE
from gpuroute.cli.main import main


# ---------------------------------------------------------------------------------------------- helpers
def write_dimacs(g, directory, name):
    """``USA-road-d.<name>.gr`` and ``.co`` of ``g`` (distance weight) in ``directory``; returns the .gr path."""
    gr = directory / f"USA-road-d.{name}.gr"
    w = g.weight("distance")
    gr.write_text(f"p sp {g.n_nodes} {g.n_arcs}\n" + "".join(
        f"a {int(u) + 1} {int(v) + 1} {int(x)}\n" for u, v, x in zip(g.tail, g.head, w, strict=True)))
    (directory / f"USA-road-d.{name}.co").write_text(f"p aux sp co {g.n_nodes}\n" + "".join(
        f"v {i + 1} {round(x * 1e6)} {round(y * 1e6)}\n" for i, (x, y) in enumerate(g.coords)))
    return gr


# A 4-node network near (2.0 E, 1.0 N): 1 <-> 2 <-> 3 -> 4; node 4 reaches nothing.
TINY_ARCS = [(1, 2, 100), (2, 1, 100), (2, 3, 120), (3, 2, 120), (3, 4, 90)]
TINY_COORDS = [(2.000, 1.000), (2.001, 1.000), (2.002, 1.000), (2.002, 1.001)]


@pytest.fixture
def tiny(tmp_path):
    """(path of USA-road-d.TINY.gr, its graph, a saved hierarchy directory)."""
    gr = tmp_path / "USA-road-d.TINY.gr"
    gr.write_text("p sp 4 5\n" + "".join(f"a {u} {v} {w}\n" for u, v, w in TINY_ARCS))
    (tmp_path / "USA-road-d.TINY.co").write_text("p aux sp co 4\n" + "".join(
        f"v {i + 1} {round(x * 1e6)} {round(y * 1e6)}\n" for i, (x, y) in enumerate(TINY_COORDS)))
    g = load_dimacs(gr)
    d = tmp_path / "tiny.ch"
    save_hierarchy(ContractionHierarchy(naive_ch(g, order=[1, 3, 0, 2]), graph=g, weight="distance",
                                        method="sequential"), d)
    return gr, g, d


@pytest.fixture
def rand(tmp_path):
    """(path of a 25-node DIMACS graph, its graph, a saved hierarchy with a core of 3)."""
    rng = np.random.default_rng(11)
    g0, _ = random_road_graph(rng, 25, one_way=0.2, two_weights=False)
    gr = write_dimacs(g0, tmp_path, "RAND")
    g = load_dimacs(gr)
    h = naive_ch(g, order=rng.permutation(g.n_nodes), core_from=g.n_nodes - 3)
    check_hierarchy(h, g)
    d = tmp_path / "rand.ch"
    save_hierarchy(ContractionHierarchy(h, graph=g, weight="distance", method="sequential"), d)
    return gr, g, d


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
    return f"{x:.6f},{y:.6f}"


def field(text, name):
    m = re.search(rf"^{name}\s+([\d,]+)", text, re.M)
    assert m, (name, text)
    return int(m.group(1).replace(",", ""))


def snapped_nodes(text):
    nodes = [int(x) for x in re.findall(r"-> node (\d+)", text)]
    assert len(nodes) == 2, text
    return nodes


# ---------------------------------------------------------------------------------------------- route --ch
def test_route_ch_matches_dijkstra(rand, capsys):
    gr, g, d = rand
    dist = gpuroute.sssp(g, np.arange(g.n_nodes), device="cpu")
    rng = np.random.default_rng(0)
    reachable = 0
    for s, t in rng.integers(0, g.n_nodes, size=(12, 2)):
        if s == t or g.coords[s].tolist() == g.coords[t].tolist():
            continue
        rc, out, err = run(capsys, ["route", "--ch", d, "--from", at(g, s), "--to", at(g, t), "--snapping", "any"])
        src, dst = snapped_nodes(out)
        if dist[src, dst] == INF:
            assert rc == 1 and "unreachable" in out
            continue
        assert rc == 0, err
        reachable += 1
        assert field(out, "distance") == dist[src, dst]
        assert re.search(r"^search\s+ch on cpu", out, re.M), out
        assert str(gr) not in err
    assert reachable >= 5


def test_route_ch_json_path_sums_to_distance(rand, capsys):
    gr, g, d = rand
    dist = gpuroute.sssp(g, np.arange(g.n_nodes), device="cpu")
    s, t = np.unravel_index(np.argmax(np.where(dist < INF, dist, -1)), dist.shape)  # the longest route
    rc, out, err = run(capsys, ["route", "--ch", d, "--graph", gr, "--from", at(g, s), "--to", at(g, t),
                                "--snapping", "any", "--json"])
    assert rc == 0, err
    fc = json.loads(out)
    line = next(f for f in fc["features"] if f["geometry"]["type"] == "LineString")
    p = line["properties"]
    assert (p["source"], p["target"], p["distance"], p["method"]) == (s, t, dist[s, t], "ch")
    coords = line["geometry"]["coordinates"]
    assert len(coords) == p["arcs"] + 1 >= 3
    node_at = {tuple(np.round(c, 6)): v for v, c in enumerate(g.coords)}
    nodes = [node_at[tuple(np.round(c, 6))] for c in coords]
    w = g.weight("distance")
    total = 0
    for u, v in zip(nodes, nodes[1:], strict=False):
        a = [k for k in range(g.first_out[u], g.first_out[u + 1]) if g.head[k] == v]
        assert a, (u, v)
        total += int(w[a[0]])
    assert total == dist[s, t]


def test_route_ch_unreachable_exit_code_1(tiny, capsys):
    gr, g, d = tiny
    rc, out, err = run(capsys, ["route", "--ch", d, "--from", "2.002,1.001", "--to", "2.0,1.0", "--snapping", "any"])
    assert rc == 1 and "no route" in err and "unreachable" in out
    rc, out, err = run(capsys, ["route", "--ch", d, "--from", "2.0,1.0", "--to", "2.002,1.001", "--snapping", "any"])
    assert rc == 0, err
    assert field(out, "distance") == 100 + 120 + 90


def test_route_ch_of_another_graph_refused(tiny, rand, capsys):
    gr, g, d = tiny
    other, og, _ = rand
    rc, out, err = run(capsys, ["route", "--ch", d, "--graph", other, "--from", at(og, 0), "--to", at(og, 1)])
    assert_one_line_error(rc, out, err, "does not belong to this graph", g.fingerprint(), og.fingerprint())
    # the recorded source changed since the hierarchy was built
    gr.write_text("p sp 4 5\n" + "".join(f"a {u} {v} {w + 1}\n" for u, v, w in TINY_ARCS))
    rc, out, err = run(capsys, ["route", "--ch", d, "--from", "2.0,1.0", "--to", "2.002,1.0"])
    assert_one_line_error(rc, out, err, "built from another graph", g.fingerprint())
    # ... or is gone
    gr.unlink()
    rc, out, err = run(capsys, ["route", "--ch", d, "--from", "2.0,1.0", "--to", "2.002,1.0"])
    assert_one_line_error(rc, out, err, "cannot reopen the graph", "--graph")


def test_route_ch_bad_inputs(tiny, capsys, tmp_path):
    gr, g, d = tiny
    pts = ["--from", "2.0,1.0", "--to", "2.002,1.0"]
    rc, out, err = run(capsys, ["route", "--ch", tmp_path / "nothing", *pts])
    assert_one_line_error(rc, out, err, "no such directory")
    rc, out, err = run(capsys, ["route", "--ch", d, "--method", "dijkstra", *pts])
    assert_one_line_error(rc, out, err, "--method dijkstra does not apply with --ch")
    rc, out, err = run(capsys, ["route", "--ch", d, "--metric", "time", *pts])
    assert_one_line_error(rc, out, err, "--metric time", "built for 'distance'")
    save_graph(g, tmp_path / "saved-graph")
    rc, out, err = run(capsys, ["route", "--ch", tmp_path / "saved-graph", *pts])
    assert_one_line_error(rc, out, err, "a saved graph, not a contraction hierarchy")
    w = np.load(d / "up_weight.npy")
    w[0] += 1
    np.save(d / "up_weight.npy", w)
    rc, out, err = run(capsys, ["route", "--ch", d, *pts])
    assert_one_line_error(rc, out, err, "checksum of up_weight.npy does not match")


# ---------------------------------------------------------------------------------------------- tree
def test_tree_matches_dijkstra(rand, capsys, tmp_path):
    gr, g, d = rand
    f = tmp_path / "d.npy"
    for s in range(0, g.n_nodes, 6):
        rc, out, err = run(capsys, ["tree", "--ch", d, "--source", s, "--device", "cpu", "--output", f])
        assert rc == 0, err
        got = np.load(f)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, gpuroute.sssp(g, s, device="cpu"))
        assert re.search(rf"^reached\s+{int((got < INF).sum())} of {g.n_nodes}", out, re.M)
        assert re.search(r"^algorithm\s+phast on cpu", out, re.M)
    assert not list(tmp_path.glob(".d.npy.*"))


def test_tree_source_id_and_errors(tiny, capsys, tmp_path):
    gr, g, d = tiny
    f = tmp_path / "t.npy"
    rc, out, err = run(capsys, ["tree", "--ch", d, "--source-id", "1", "--device", "cpu", "--output", f])
    assert rc == 0, err
    np.testing.assert_array_equal(np.load(f), [0, 100, 220, 310])
    rc, out, err = run(capsys, ["tree", "--ch", d, "--source", "3", "--device", "cpu"])
    assert rc == 0, err
    assert re.search(r"^reached\s+1 of 4", out, re.M)
    rc, out, err = run(capsys, ["tree", "--ch", d, "--source", "4"])
    assert_one_line_error(rc, out, err, "--source 4 is outside")
    rc, out, err = run(capsys, ["tree", "--ch", d, "--source-id", "99"])
    assert_one_line_error(rc, out, err, "99")
    rc, out, err = run(capsys, ["tree", "--ch", d, "--source", "0", "--output", tmp_path])
    assert_one_line_error(rc, out, err, "is a directory")


# ---------------------------------------------------------------------------------------------- table
def test_table_npy_and_csv_match_dijkstra(rand, capsys, tmp_path):
    gr, g, d = rand
    src = np.array([0, 5, 9, 17, 5], dtype=np.int32)
    np.save(tmp_path / "s.npy", src)
    tgt = [3, 8, 0, 24]
    (tmp_path / "t.csv").write_text("lon,lat\n" + "".join(f"{at(g, v)}\n" for v in tgt) + "\n")
    f = tmp_path / "m.npy"
    rc, out, err = run(capsys, ["table", "--ch", d, "--sources", tmp_path / "s.npy", "--targets", tmp_path / "t.csv",
                                "--snapping", "any", "--device", "cpu", "--output", f])
    assert rc == 0, err
    got = np.load(f)
    assert got.dtype == np.int64 and got.shape == (5, 4)
    want = gpuroute.sssp(g, src, device="cpu")[:, tgt]
    np.testing.assert_array_equal(got, want)
    assert re.search(r"^table\s+5 x 4 on cpu", out, re.M)
    n_reach = int((want < INF).sum())
    assert re.search(rf"^reachable\s+{n_reach} of 20 pairs", out, re.M)
    assert f"max {int(want[want < INF].max()):,}" in out


def test_table_bad_files(tiny, capsys, tmp_path):
    gr, g, d = tiny
    ok = tmp_path / "ok.npy"
    np.save(ok, np.array([0, 1]))
    (tmp_path / "bad.csv").write_text("lon,lat\n2.0,1.0\n2.001;1.0\n")
    rc, out, err = run(capsys, ["table", "--ch", d, "--sources", tmp_path / "bad.csv", "--targets", ok])
    assert_one_line_error(rc, out, err, "bad.csv:3", "expected LON,LAT")
    np.save(tmp_path / "far.npy", np.array([0, 4]))
    rc, out, err = run(capsys, ["table", "--ch", d, "--sources", ok, "--targets", tmp_path / "far.npy"])
    assert_one_line_error(rc, out, err, "--targets", "entry 1 is node 4, outside")
    np.save(tmp_path / "float.npy", np.array([0.5]))
    rc, out, err = run(capsys, ["table", "--ch", d, "--sources", tmp_path / "float.npy", "--targets", ok])
    assert_one_line_error(rc, out, err, "integer node ids")
    (tmp_path / "away.csv").write_text("2.0,1.0\n50.0,1.0\n")
    rc, out, err = run(capsys, ["table", "--ch", d, "--sources", tmp_path / "away.csv", "--targets", ok])
    assert_one_line_error(rc, out, err, "away.csv:2", "bounding box")
    rc, out, err = run(capsys, ["table", "--ch", d, "--sources", tmp_path / "missing.csv", "--targets", ok])
    assert_one_line_error(rc, out, err, "missing.csv: no such file")


# ---------------------------------------------------------------------------------------------- contract
@pytest.mark.parametrize("method, extra", [("sequential", []), ("cu-ch", ["-K", "6", "-C", "0.5"])])
def test_contract_builds_a_valid_hierarchy(rand, capsys, tmp_path, method, extra):
    gr, g, _ = rand
    d = tmp_path / f"{method}.ch"
    rc, out, err = run(capsys, ["contract", gr, "-o", d, "--method", method, "--device", "cpu", "-v", *extra])
    assert rc == 0, err
    ch = load_hierarchy(d, graph=g)
    assert ch.method == method and ch.weight == "distance"
    check_hierarchy(ch, samples=g.n_nodes)
    assert field(out, "nodes") == g.n_nodes
    assert field(out, "shortcuts") == ch.h.n_shortcuts
    assert field(out, "levels") == ch.h.n_levels
    assert field(out, "core") == ch.h.core.size
    assert re.search(rf"^method\s+{method} on cpu", out, re.M)
    assert re.search(r"^time\s+build [\d.,]+ ms", out, re.M)
    if method == "cu-ch":
        assert ch.params["K"] == 6 and ch.params["C"] == 0.5
        n_it = field(out, "iterations")
        assert n_it == ch.stats["iterations"]
        assert len(re.findall(r"gpuroute.cli INFO: iteration \d+: overlay_nodes=", err)) == n_it  # -v
    # and the saved hierarchy answers queries
    f = tmp_path / "t.npy"
    rc, out, err = run(capsys, ["tree", "--ch", d, "--source", "2", "--device", "cpu", "--output", f])
    assert rc == 0, err
    np.testing.assert_array_equal(np.load(f), gpuroute.sssp(g, 2, device="cpu"))


def test_contract_bad_inputs(tiny, capsys, tmp_path):
    gr, g, d = tiny
    rc, out, err = run(capsys, ["contract", gr, "-o", tmp_path / "x", "--method", "sequential", "-K", "5"])
    assert_one_line_error(rc, out, err, "-K and -C are options of --method cu-ch")
    save_graph(g, tmp_path / "g")
    rc, out, err = run(capsys, ["contract", gr, "-o", tmp_path / "g", "--method", "sequential"])
    assert_one_line_error(rc, out, err, "a saved graph; not replacing it")
    rc, out, err = run(capsys, ["contract", gr, "-o", tmp_path / "x", "--weight", "nope", "--method", "sequential"])
    assert_one_line_error(rc, out, err, "has no weight 'nope'")
    rc, out, err = run(capsys, ["contract", gr, "-o", tmp_path / "x", "--weight", "distance", "--metric", "time"])
    assert rc == 2 and "not allowed with argument" in err
    # an existing hierarchy is replaced
    rc, out, err = run(capsys, ["contract", gr, "-o", d, "--method", "sequential"])
    assert rc == 0, err
    assert load_hierarchy(d, graph=g).method == "sequential"
    assert (d / MANIFEST).exists()
