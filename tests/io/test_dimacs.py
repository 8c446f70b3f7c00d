"""DIMACS 9 loader: malformed input names the file and line; a valid file round-trips."""
import gzip
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from conftest import LineBudget, shared_data

from gpuroute import datasets
from gpuroute.graph.errors import ParseError
from gpuroute.io.dimacs import load_dimacs, matching_co_path, read_dimacs_co, read_dimacs_gr

GOOD_GR = """c tiny test graph
p sp 4 5
a 1 2 7
a 2 3 5
a 3 4 2
a 1 2 9
a 4 1 1
"""


GOOD_CO = """c coordinates
p aux sp co 4
v 1 -74000000 40700000
v 2 -73990000 40710000
v 3 -73980000 40720000
v 4 -73970000 40730000
"""


def write(tmp_path, name, text, gz=False):
    p = tmp_path / name
    data = text.encode()
    p.write_bytes(gzip.compress(data) if gz else data)
    return str(p)


def expect_parse_error(path, line, match, reader=read_dimacs_gr):
    with pytest.raises(ParseError, match=match) as ei:
        reader(path)
    assert ei.value.path == path
    assert ei.value.line == line
    assert str(ei.value).startswith(f"{path}:{line}:" if line is not None else f"{path}:")
    return ei.value


def test_valid_file_round_trip(tmp_path):
    p = write(tmp_path, "tiny.gr", GOOD_GR)
    n, u, v, w = read_dimacs_gr(p)
    assert n == 4
    assert u.tolist() == [0, 1, 2, 0, 3]
    assert v.tolist() == [1, 2, 3, 1, 0]
    assert w.tolist() == [7, 5, 2, 9, 1]
    g = load_dimacs(p, co_path=None)
    assert g.n_nodes == 4 and g.n_arcs == 4  # the parallel arc 1->2 (weight 9) is dropped
    assert g.meta["parallel_arcs_dropped"] == 1
    assert g.weight("distance")[g.first_out[0]] == 7  # the lighter of 7 and 9
    assert g.node_ids.tolist() == [1, 2, 3, 4]
    assert g.name == "tiny"


def test_valid_gzip_with_coords(tmp_path):
    p = write(tmp_path, "tiny.gr.gz", GOOD_GR, gz=True)
    write(tmp_path, "tiny.co", GOOD_CO)
    g = load_dimacs(p)
    assert g.name == "tiny"
    np.testing.assert_allclose(g.coords[0], [-74.0, 40.7])
    np.testing.assert_allclose(g.coords[3], [-73.97, 40.73])


def test_co_matching_time_graph_uses_distance_coords(tmp_path):
    t = write(tmp_path, "USA-road-t.XX.gr.gz", GOOD_GR, gz=True)
    co = write(tmp_path, "USA-road-d.XX.co.gz", GOOD_CO, gz=True)
    assert matching_co_path(t) == co
    g = load_dimacs(t)
    assert g.weight_names == ["travel_time"]
    assert g.meta["coords_source"] == co
    assert g.coords is not None and g.coords.shape == (4, 2)
    # nothing beside an unrelated file
    other = write(tmp_path, "other.gr", GOOD_GR)
    assert matching_co_path(other) is None


@pytest.mark.parametrize(
    "text, line, match",
    [
        ("p sp x 5\na 1 2 3\n", 1, "bad header"),
        ("c only comments\n", None, "no 'p' header"),
        ("p sp 4 3\na 1 2 3\na 2 3 4\n", 1, "announces 3 arcs but the file has 2"),
        ("p sp 4 1\na 1 2 3\na 2 3 4\n", 1, "announces 1 arcs but the file has 2"),
        ("c x\np sp 4 2\na 1 2 3\na 2 3 1.5\n", 4, "not an integer"),
        ("p sp 4 2\na 1 2 3\na 2 3 x7\n", 3, "not an integer"),
        ("p sp 4 3\na 1 2 3\na 2 3 -4\na 3 4 1\n", 3, "not a positive integer"),
        ("p sp 4 2\na 1 2 3\na 2 3 0\n", 3, "not a positive integer"),
        ("p sp 4 2\na 1 2 3\na 2 5 1\n", 3, "head id 5 outside 1..4"),
        ("p sp 4 2\na 0 2 3\na 2 3 1\n", 2, "tail id 0 outside 1..4"),
        ("p sp 4 3\na 1 2 3\na 2 3\na 3 4 1\n", 3, "expected 3 fields after 'a', got 2"),
        ("p sp 4 2\na 1 2 3 4\na 2 3 1\n", 2, "expected 3 fields after 'a', got 4"),
        ("p sp 4 1\na 1 2 3000000000\n", 2, "weight 3000000000 exceeds int32"),
        ("p sp 4 1\na 1 2 99999999999999999999999\n", 2, "weight 99999999999999999999999 exceeds int32"),
        ("a 1 2 3\np sp 4 1\n", 1, "before the 'p' header"),
        ("p sp 4 1\np sp 4 1\na 1 2 3\n", 2, "second 'p' header"),
        ("p sp 4 1\nx 1 2 3\n", 2, "unexpected line"),
    ],
)
def test_malformed_gr(tmp_path, text, line, match):
    p = write(tmp_path, "bad.gr", text)
    expect_parse_error(p, line, match)
    # the loader never returns a half-loaded graph: it raises the same error
    with pytest.raises(ParseError, match=match):
        load_dimacs(p, co_path=None)


def test_malformed_gr_in_gzip_reports_same_line(tmp_path):
    p = write(tmp_path, "bad.gr.gz", "p sp 3 2\na 1 2 3\na 2 4 1\n", gz=True)
    expect_parse_error(p, 3, "head id 4 outside 1..3")


def test_truncated_gzip(tmp_path):
    full = gzip.compress(("p sp 3 200\n" + "a 1 2 3\n" * 200).encode())
    p = tmp_path / "cut.gr.gz"
    p.write_bytes(full[: len(full) // 2])
    with pytest.raises(ParseError, match="truncated or corrupt gzip") as ei:
        read_dimacs_gr(str(p))
    assert ei.value.path == str(p)


def test_gz_name_but_not_gzip(tmp_path):
    p = write(tmp_path, "plain.gr.gz", GOOD_GR)
    expect_parse_error(p, 1, "not a gzip file")


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        read_dimacs_gr(str(tmp_path / "absent.gr"))


def test_co_duplicate_id(tmp_path):
    p = write(tmp_path, "dup.co", "p aux sp co 3\nv 1 1 1\nv 2 2 2\nv 2 3 3\n")
    expect_parse_error(p, 4, "node id 2 appears twice", reader=read_dimacs_co)


@pytest.mark.parametrize(
    "text, line, match, n_nodes",
    [
        ("p aux sp co 3\nv 1 1 1\nv 2 2 2\n", 1, "announces 3 nodes but the file has 2", None),
        ("p aux sp co 2\nv 1 1 1\nv 3 2 2\n", 3, "node id 3 outside 1..2", None),
        ("p aux sp co 2\nv 1 1 1\nv 2 2 2\n", 1, "for 2 nodes but the graph has 5", 5),
        ("p aux sp co 2\nv 1 1 1\nv 2 200000000 2\n", 3, "outside", None),
        ("p aux sp co 2\nv 1 1 1\nv 2 2.5 2\n", 3, "not an integer", None),
        ("p sp 2 2\nv 1 1 1\n", 1, "bad header", None),
    ],
)
def test_malformed_co(tmp_path, text, line, match, n_nodes):
    p = write(tmp_path, "bad.co", text)
    with pytest.raises(ParseError, match=match) as ei:
        read_dimacs_co(p, n_nodes=n_nodes)
    assert (ei.value.path, ei.value.line) == (p, line)


def test_co_for_wrong_graph_is_reported_by_loader(tmp_path):
    p = write(tmp_path, "g.gr", GOOD_GR)
    write(tmp_path, "g.co", "p aux sp co 3\nv 1 1 1\nv 2 2 2\nv 3 3 3\n")
    with pytest.raises(ParseError, match="graph has 4"):
        load_dimacs(p)


def test_crlf_line_endings(tmp_path):
    p = write(tmp_path, "crlf.gr", GOOD_GR.replace("\n", "\r\n"))
    n, u, v, w = read_dimacs_gr(p)
    assert n == 4 and w.tolist() == [7, 5, 2, 9, 1]


def test_real_rome99():
    g = load_dimacs(shared_data("dimacs9", "rome99.gr.gz"))
    assert g.n_nodes == 3353
    assert g.n_arcs + g.meta["parallel_arcs_dropped"] + g.meta["self_loops_dropped"] == 8870
    assert g.weight().min() >= 1


# ---------------------------------------------------------------- findings (each failed on e21572d)
def test_header_node_count_beyond_int32_rejected_before_allocating(tmp_path):
    """``p sp 3000000000 1`` used to pass the reader and make the loader allocate ~22 GiB (first_out,
    node_ids) before RoadGraph's own check: now a ParseError at the header line, in little memory and a
    few thousand Python lines at most (~1,700 measured, imports included), where anything that walks the
    announced nodes would run millions."""
    p = write(tmp_path, "huge.gr", "c huge header\np sp 3000000000 1\na 1 2 3\n")
    tracemalloc.start()
    try:
        with LineBudget(50_000):
            with pytest.raises(ParseError, match="announces 3000000000 nodes, more than int32") as ei:
                read_dimacs_gr(p)
            assert ei.value.line == 2
            with pytest.raises(ParseError, match="3000000000 nodes"):
                load_dimacs(p, co_path=None)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * 2**20
    co = write(tmp_path, "huge.co", "p aux sp co 3000000000\nv 1 1 1\n")
    with pytest.raises(ParseError, match="3000000000 nodes, more than int32") as ei:
        read_dimacs_co(co)
    assert ei.value.line == 1
    # the largest count RoadGraph can hold is not rejected by this check (the arc count check follows)
    ok = write(tmp_path, "edge.gr", "p sp 2147483646 2\na 1 2 3\n")
    expect_parse_error(ok, 1, "announces 2 arcs but the file has 1")


def test_arc_count_checked_before_arrays_of_that_size(tmp_path):
    """A header announcing 2e9 arcs over a one-arc file fails on the count, allocating nothing of that
    size (this already held on e21572d; kept as a guard)."""
    p = write(tmp_path, "many.gr", "p sp 3 2000000000\na 1 2 3\n")
    tracemalloc.start()
    with pytest.raises(ParseError, match="announces 2000000000 arcs but the file has 1"):
        load_dimacs(p, co_path=None)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 8 * 2**20


@pytest.mark.parametrize(
    "text, line, match",
    [
        ("p sp 3 1\na 1 2 99999999999999999999\n", 2, "weight 99999999999999999999 exceeds int32"),
        ("p sp 3 1\na 99999999999999999999 2 5\n", 2, "tail id 99999999999999999999 outside 1..3"),
        ("p sp 3 1\na 1 -99999999999999999999 5\n", 2, "head id -99999999999999999999 outside 1..3"),
        ("p sp 3 2\na 1 2 5\na 2 3 -99999999999999999999\n", 3, "weight -99999999999999999999 is not a positive"),
        # guards (these held on e21572d): the literal int64 max is a value like any other, not the fast
        # parser's end marker, and a '+' sign or leading zeros do not shift the fields
        ("p sp 3 2\na 1 2 9223372036854775807\na 2 3\n", 3, "expected 3 fields after 'a', got 2"),
        ("p sp 3 1\na 1 2 9223372036854775807\n", 2, "weight 9223372036854775807 exceeds int32"),
        ("p sp 3 1\na 1 2 +0007\na\n", 3, "expected 3 fields"),
    ],
)
def test_out_of_range_values_quoted_as_written(tmp_path, text, line, match):
    """Messages quote the file's field, not the int64 value numpy clamped it to (e21572d reported
    ``weight 9223372036854775807`` for ``99999999999999999999``)."""
    p = write(tmp_path, "big.gr", text)
    err = expect_parse_error(p, line, match)
    if "9223372036854775807" not in text:
        assert "9223372036854775807" not in str(err)


def test_co_values_quoted_as_written(tmp_path):
    p = write(tmp_path, "big.co", "p aux sp co 2\nv 1 1 1\nv 2 99999999999999999999 2\n")
    with pytest.raises(ParseError, match="99999999999999999999 2 \\(millionths") as ei:
        read_dimacs_co(p)
    assert ei.value.line == 3
    p = write(tmp_path, "bigid.co", "p aux sp co 2\nv 1 1 1\nv 77777777777777777777 2 2\n")
    with pytest.raises(ParseError, match="node id 77777777777777777777 outside 1..2"):
        read_dimacs_co(p)


def test_utf8_bom_accepted(tmp_path):
    """A UTF-8 BOM before the first line (Windows editors write one) was an 'unexpected line'."""
    bom = b"\xef\xbb\xbf"
    gr = tmp_path / "bom.gr"
    gr.write_bytes(bom + GOOD_GR.encode())
    co = tmp_path / "bom.co"
    co.write_bytes(bom + GOOD_CO.encode())
    n, u, v, w = read_dimacs_gr(str(gr))
    assert n == 4 and w.tolist() == [7, 5, 2, 9, 1]
    g = load_dimacs(str(gr))
    np.testing.assert_allclose(g.coords[0], [-74.0, 40.7])
    gz = tmp_path / "bomz.gr.gz"
    gz.write_bytes(gzip.compress(bom + b"p sp 2 1\na 1 2 3\n"))
    assert read_dimacs_gr(str(gz))[0] == 2
    # a BOM elsewhere than the start is still an error, at its line
    mid = write(tmp_path, "mid.gr", "p sp 2 1\n\ufeffa 1 2 3\n")
    expect_parse_error(mid, 2, "unexpected line")


@pytest.mark.slow
def test_real_ny_distance_and_time():
    """The real USA-road NY pair the package ships (the same bytes as the shared data's ``dimacs9/``):
    header counts against the file, coordinates."""
    d = Path(datasets.DATA_DIR) / "USA-road-d.NY.gr.gz"
    t = Path(datasets.DATA_DIR) / "USA-road-t.NY.gr.gz"
    n, u, v, w = read_dimacs_gr(d)
    assert (n, u.size) == (264346, 733846) and (w.min(), w.max()) == (1, 36946)
    g = load_dimacs(d)
    assert g.n_nodes == 264346 and g.n_arcs + g.meta["parallel_arcs_dropped"] == 733846
    assert g.coords.shape == (264346, 2)
    assert -74.51 < g.coords[:, 0].min() and g.coords[:, 0].max() < -73.49
    gt = load_dimacs(t)
    assert gt.weight_names == ["travel_time"] and gt.n_nodes == g.n_nodes and gt.coords is not None
