"""METIS / DIMACS 10 loader: formats, weights from coordinates, errors naming file:line, real file."""
import gzip
import tracemalloc

import numpy as np
import pytest
from conftest import LineBudget, shared_data

from gpuroute.graph.errors import ParseError
from gpuroute.io.metis import load_metis, read_metis, read_xyz

# path 1-2-3 plus edge 1-3 and an isolated vertex 4
UNWEIGHTED = """% a comment
4 3
2 3
1 3
% comment between vertex lines
1 2

"""
XYZ = "0 0 0\n3 4 0\n0 0.2 0\n9 9 0\n"


def write(tmp_path, name, text, gz=False):
    p = tmp_path / name
    data = text.encode()
    p.write_bytes(gzip.compress(data) if gz else data)
    return str(p)


def arcs(g, w=None):
    return {(int(g.tail[a]), int(g.head[a])): int(g.weight(w)[a]) for a in range(g.n_arcs)}


def test_unweighted_with_xyz_gives_rounded_lengths(tmp_path):
    p = write(tmp_path, "t.graph", UNWEIGHTED)
    write(tmp_path, "t.xyz", XYZ)
    g = load_metis(p)
    assert g.n_nodes == 4 and g.n_arcs == 6
    assert g.weight_names == ["length"] and g.units["length"].symbol == "xyz" and g.units["length"].scale is None
    assert g.coord_system == "planar"
    assert arcs(g) == {(0, 1): 5, (1, 0): 5, (0, 2): 1, (2, 0): 1, (1, 2): 5, (2, 1): 5}  # 0.2 rounds up to 1
    assert g.node_ids.tolist() == [1, 2, 3, 4]
    assert g.out_degree()[3] == 0
    np.testing.assert_allclose(g.coords[1], [3, 4])


def test_length_scale(tmp_path):
    p = write(tmp_path, "t.graph", UNWEIGHTED)
    write(tmp_path, "t.xyz.gz", XYZ, gz=True)
    g = load_metis(p, length_scale=10)
    assert arcs(g)[(0, 1)] == 50 and arcs(g)[(0, 2)] == 2
    assert g.units["length"].symbol == "0.1 xyz"


def test_unweighted_without_xyz_gives_hops(tmp_path):
    p = write(tmp_path, "t.graph", UNWEIGHTED)
    g = load_metis(p)
    assert g.weight_names == ["hops"]
    assert set(arcs(g).values()) == {1}
    assert g.coords is None


def test_edge_weights_fmt_001_and_vertex_weights_011(tmp_path):
    p = write(tmp_path, "w.graph", "3 2 1\n2 7\n1 7 3 4\n2 4\n")
    write(tmp_path, "w.xyz", "0 0\n1 1\n2 2\n")
    g = load_metis(p)
    assert g.weight_names == ["weight"]
    assert arcs(g) == {(0, 1): 7, (1, 0): 7, (1, 2): 4, (2, 1): 4}
    p2 = write(tmp_path, "v.graph", "3 2 011 2\n5 6 2 7\n1 1 1 7 3 4\n9 9 2 4\n")
    g2 = load_metis(p2, xyz_path=None)
    assert arcs(g2) == arcs(g)
    n, tail, head, w, fmt = read_metis(p2)
    assert fmt == "011" and w.tolist() == [7, 7, 4, 4]


def test_crlf_and_gzip(tmp_path):
    p = write(tmp_path, "c.graph.gz", UNWEIGHTED.replace("\n", "\r\n"), gz=True)
    g = load_metis(p, xyz_path=None)
    assert g.n_nodes == 4 and g.n_arcs == 6
    assert g.name == "c"


@pytest.mark.parametrize(
    "text, line, match",
    [
        ("4 three\n", 1, "bad header"),
        ("% nothing\n", None, "no header"),
        ("3 2 2\n2\n1 3\n2\n", 1, "fmt '2'"),
        ("3 3\n2\n1 3\n2\n", 1, "announces 3 edges"),
        ("3 1\n2\n1 3\n2\n", 1, "announces 1 edges"),
        ("3 2\n2\n1 4\n2\n", 3, "neighbour id 4 outside 1..3"),
        ("3 2\n2\n1 0\n2\n", 3, "neighbour id 0 outside 1..3"),
        ("3 2\n2\n1 3\n", 4, "announces 3 vertex lines but the file ends after 2"),
        ("3 2\n2\n1 3\n2\n1\n", 5, "more vertex lines"),
        ("3 2\n2\n1 3.5\n2\n", 3, "'3.5' is not a non-negative integer"),
        ("3 2\n2\n1 -3\n2\n", 3, "'-3' is not a non-negative integer"),
        ("3 2\n2\n2 3\n2\n", 3, "lists itself"),
        ("3 2 1\n2 5\n1 5 3\n2 1\n", 3, "fields do not fit fmt '001'"),
        ("3 2 1\n2 5\n1 5 3 0\n2 0\n", 3, "edge weight 0 is not a positive integer"),
        # 1 lists 2 twice but 2 lists 1 once (4 lists 3 twice): degree sum is right, adjacency is not
        ("4 4\n2 2\n1 3\n2 4\n3 3\n", 2, "vertex 1 lists neighbour 2 2 time\\(s\\), but vertex 2's line "
                                         "\\(line 3\\) lists 1 1 time"),
        ("3 2\n2 2\n1 3\n\n", 3, "vertex 2 lists neighbour 3, but vertex 3's line \\(line 4\\) does not list 2"),
        ("3 2\n2 3\n1\n2\n", 2, "vertex 1 lists neighbour 3, but vertex 3's line \\(line 4\\) does not list 1"),
        ("3 2 1\n2 5\n1 6 3 4\n2 4\n", 2, "edge 1-2 has weight 5 here, but vertex 2's line \\(line 3\\)"),
    ],
)
def test_malformed_graph(tmp_path, text, line, match):
    p = write(tmp_path, "bad.graph", text)
    with pytest.raises(ParseError, match=match) as ei:
        load_metis(p, xyz_path=None)
    assert ei.value.path == p
    assert ei.value.line == line


def test_truncated_gzip(tmp_path):
    data = gzip.compress(("100 99\n" + "\n".join(f"{i}" for i in range(1, 101)) + "\n").encode())
    p = tmp_path / "cut.graph.gz"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(ParseError, match="truncated or corrupt gzip") as ei:
        load_metis(str(p))
    assert ei.value.path == str(p)


@pytest.mark.parametrize(
    "text, line, match",
    [
        ("0 0 0\n1 1 0\n", 3, "2 coordinate lines but the graph has 4"),
        ("0 0 0\n1 1\n2 2 0\n3 3 0\n", 2, "expected 3 fields like line 1, got 2"),
        ("0 0 0\n1 x 0\n2 2 0\n3 3 0\n", 2, "is not 3 numbers"),
        ("0 0 0\n1 1 0\n2 inf 0\n3 3 0\n", 3, "finite"),
        ("0\n1\n2\n3\n", 1, "expected 'x y \\[z\\]'"),
    ],
)
def test_malformed_xyz(tmp_path, text, line, match):
    p = write(tmp_path, "t.graph", UNWEIGHTED)
    x = write(tmp_path, "t.xyz", text)
    with pytest.raises(ParseError, match=match) as ei:
        load_metis(p)
    assert (ei.value.path, ei.value.line) == (x, line)


def test_read_xyz_two_columns(tmp_path):
    x = write(tmp_path, "p.xyz", "1 2\n3 4\n\n")
    assert read_xyz(x).tolist() == [[1, 2], [3, 4]]


def test_luxembourg():
    g = load_metis(shared_data("dimacs10", "luxembourg.osm.graph.gz"))
    assert g.n_nodes == 114599
    assert g.n_arcs == 2 * 119666  # no self-loops or parallel edges in the file
    assert g.coords.shape == (114599, 2)
    w = g.weight("length")
    assert w.min() >= 1
    # undirected: the arc set and its weights are symmetric
    A = g.to_scipy("length")
    assert (A != A.T).nnz == 0
    # median street segment is tens of units long (units ~ 1e-5 degree), not 1 and not thousands
    assert 5 < np.median(w) < 500


# ---------------------------------------------------------------- findings (each failed on e21572d)
def test_header_counts_beyond_int32_rejected_at_the_header(tmp_path):
    """``n`` (or ``2 m``) beyond the int32 ids is reported at the header line before anything of that
    size exists (e21572d reported it at the end of the file as missing vertex lines): little memory, and
    a few thousand Python lines at most (~2,600 measured, imports included), where anything that walks the
    announced vertices would run millions."""
    p = write(tmp_path, "huge.graph", "% huge\n3000000000 1\n2\n1\n")
    tracemalloc.start()
    try:
        with LineBudget(50_000), pytest.raises(ParseError, match="announces 3000000000 vertices, more than int32") as ei:
            load_metis(p, xyz_path=None)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert ei.value.line == 2 and peak < 8 * 2**20
    p = write(tmp_path, "many.graph", "2 1500000000\n2\n1\n")
    with pytest.raises(ParseError, match="3000000000 arcs \\(2 x 1500000000 edges\\)") as ei:
        read_metis(p)
    assert ei.value.line == 1


@pytest.mark.parametrize(
    "text, line, match",
    [
        ("3 2 1\n2 99999999999999999999\n1 99999999999999999999 3 4\n2 4\n", 2,
         "edge weight 99999999999999999999 is not a positive integer"),
        # guard (held on e21572d): a weight beyond int32 but within int64
        ("3 2 1\n2 5\n1 5 3 3000000000\n2 3000000000\n", 3, "edge weight 3000000000 is not a positive"),
        ("3 2\n2\n1 99999999999999999999\n2\n", 3, "neighbour id 99999999999999999999 outside 1..3"),
        ("3 2 1\n2 5\n1 5 3 007\n2 4\n", 3, "edge 2-3 has weight 007 here"),
    ],
)
def test_values_quoted_as_written(tmp_path, text, line, match):
    """Messages quote the file's field, not the int64 value numpy clamped it to (e21572d reported
    ``edge weight 9223372036854775807``)."""
    p = write(tmp_path, "big.graph", text)
    with pytest.raises(ParseError, match=match) as ei:
        read_metis(p)
    assert (ei.value.path, ei.value.line) == (p, line)
    assert "9223372036854775807" not in str(ei.value)


def test_utf8_bom_accepted(tmp_path):
    """A UTF-8 BOM before the header (or the first coordinate line) used to be a 'bad header'."""
    bom = b"\xef\xbb\xbf"
    (tmp_path / "b.graph").write_bytes(bom + UNWEIGHTED.replace("% a comment\n", "").encode())
    (tmp_path / "b.xyz").write_bytes(bom + XYZ.encode())
    g = load_metis(str(tmp_path / "b.graph"))
    assert g.n_nodes == 4 and g.n_arcs == 6 and g.weight_names == ["length"]
    np.testing.assert_allclose(g.coords[1], [3, 4])
    (tmp_path / "c.graph.gz").write_bytes(gzip.compress(bom + b"% c\n2 1\n2\n1\n"))
    assert read_metis(str(tmp_path / "c.graph.gz"))[0] == 2
