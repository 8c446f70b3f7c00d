"""Edge-list builders: NumPy, pandas, CSV, SciPy, NetworkX. Parallel arcs keep the lightest, ids renumber."""
import gzip

import numpy as np
import pytest
import scipy.sparse as sp

from gpuroute import RoadGraph
from gpuroute.graph.errors import GraphError, ParseError
from gpuroute.io.edgelist import from_dataframe, from_edgelist, from_networkx, from_scipy, read_csv


def arcs(g, w=None):
    return {(int(g.tail[a]), int(g.head[a])): int(g.weight(w)[a]) for a in range(g.n_arcs)}


def ext_arcs(g, w=None):
    ids = g.node_ids if g.node_ids is not None else g.meta["node_labels"]
    return {(ids[int(g.tail[a])], ids[int(g.head[a])]): int(g.weight(w)[a]) for a in range(g.n_arcs)}


# ---------------------------------------------------------------- numpy
def test_dense_ids_kept_and_parallel_arcs_lightest():
    g = from_edgelist([0, 0, 1, 0, 2], [1, 1, 2, 1, 2], [5, 3, 4, 9, 1])
    assert g.n_nodes == 3
    assert arcs(g) == {(0, 1): 3, (1, 2): 4}  # 3 of {5, 3, 9}; the self-loop 2->2 is dropped
    assert g.node_ids is None
    assert g.meta["parallel_arcs_dropped"] == 2 and g.meta["self_loops_dropped"] == 1


def test_scipy_csr_would_sum_duplicates_ours_does_not():
    tail, head, w = np.array([0, 0, 1]), np.array([1, 1, 2]), np.array([5, 3, 4])
    naive = sp.csr_matrix((w, (tail, head)), shape=(3, 3))
    assert naive[0, 1] == 8  # scipy sums the duplicates: a wrong shortest-path oracle
    g = from_edgelist(tail, head, w)
    assert g.to_scipy()[0, 1] == 3
    # from_scipy on a COO matrix that still holds the duplicates keeps the lightest too
    coo = sp.coo_matrix((w, (tail, head)), shape=(3, 3))
    assert coo.nnz == 3
    assert arcs(from_scipy(coo)) == {(0, 1): 3, (1, 2): 4}


def test_parallel_arcs_keep_one_real_arc():
    # The kept arc is the lightest by the primary weight with ALL its weights and attributes: distance
    # and duration of a route come from one road (main used to take each weight's own minimum: 10 and 5).
    g = from_edgelist([0, 0, 0], [1, 1, 1], {"distance": [10, 20, 10], "travel_time": [7, 5, 3]})
    assert arcs(g, "distance") == {(0, 1): 10}
    assert arcs(g, "travel_time") == {(0, 1): 7}  # the first of the two lightest, not min(7, 5, 3)
    g = RoadGraph.from_arcs(2, [0, 0], [1, 1], {"distance": [20, 10], "travel_time": [5, 7]},
                            arc_attrs={"way_id": [111, 222], "speed": [50.0, 30.0]})
    assert g.n_arcs == 1
    assert (int(g.weights["travel_time"][0]), int(g.arc_attrs["way_id"][0]), float(g.arc_attrs["speed"][0])) == (7, 222, 30.0)


def test_n_nodes_adds_isolated_nodes():
    g = from_edgelist([0], [1], [1], n_nodes=5)
    assert g.n_nodes == 5 and g.node_ids is None


def test_sparse_integer_ids_are_renumbered():
    osm = np.array([900, 17, 900, 5_000_000_000])
    g = from_edgelist(osm, np.array([17, 5_000_000_000, 5_000_000_000, 17]), [1, 2, 3, 4])
    assert g.n_nodes == 3
    assert g.node_ids.tolist() == [17, 900, 5_000_000_000]
    assert g.node_ids.dtype == np.int64
    assert ext_arcs(g) == {(900, 17): 1, (17, 5_000_000_000): 2, (900, 5_000_000_000): 3, (5_000_000_000, 17): 4}


def test_ids_with_gap_are_renumbered_without_n_nodes():
    g = from_edgelist([0, 2], [2, 5], [1, 1])
    assert g.n_nodes == 3 and g.node_ids.tolist() == [0, 2, 5]


def test_string_labels():
    g = from_edgelist(["b", "a", "c"], ["a", "c", "b"], [1, 2, 3])
    assert g.node_ids is None
    assert g.meta["node_labels"] == ["a", "b", "c"]
    assert ext_arcs(g) == {("b", "a"): 1, ("a", "c"): 2, ("c", "b"): 3}


def test_explicit_node_ids_define_order_and_isolated_nodes():
    g = from_edgelist([30, 10], [10, 20], [4, 6], node_ids=[30, 20, 10, 40])
    assert g.n_nodes == 4 and g.node_ids.tolist() == [30, 20, 10, 40]
    assert arcs(g) == {(0, 2): 4, (2, 1): 6}
    with pytest.raises(GraphError, match="head of arc 0 is 99, which is not in node_ids"):
        from_edgelist([30], [99], [1], node_ids=[30, 20])
    with pytest.raises(GraphError, match="repeated"):
        from_edgelist([30], [20], [1], node_ids=[30, 20, 30])


def test_node_ids_none_requires_internal_ids():
    with pytest.raises(GraphError, match="outside the node range"):
        from_edgelist([0, 7], [1, 2], [1, 1], node_ids=None, n_nodes=3)
    with pytest.raises(GraphError, match="integer ids"):
        from_edgelist(["a"], ["b"], [1], node_ids=None)


def test_undirected():
    g = from_edgelist([0, 1], [1, 2], [3, 4], directed=False)
    assert arcs(g) == {(0, 1): 3, (1, 0): 3, (1, 2): 4, (2, 1): 4}


@pytest.mark.parametrize("w, match", [([1, 0], "positive"), ([1, -2], "positive"), ([1, 1.5], "integral"),
                                      ([1, np.nan], "finite"), ([1, 2**31], "MAX_WEIGHT")])
def test_bad_weights_name_the_arc(w, match):
    with pytest.raises(GraphError, match=f"arc 1 .*{match}|{match}") as ei:
        from_edgelist([0, 1], [1, 2], w)
    assert "arc 1" in str(ei.value)


def test_length_mismatch():
    with pytest.raises(GraphError, match="shape"):
        from_edgelist([0, 1], [1, 2], [1, 2, 3])


# ---------------------------------------------------------------- pandas
def test_from_dataframe():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"u": [10, 20, 10], "v": [20, 30, 20], "len": [5.0, 6.0, 2.0], "secs": [9, 9, 9]})
    g = from_dataframe(df, "u", "v", weights={"distance": "len", "travel_time": "secs"}, units={"distance": "m"})
    assert g.node_ids.tolist() == [10, 20, 30]
    assert ext_arcs(g, "distance") == {(10, 20): 2, (20, 30): 6}
    assert g.units["distance"].symbol == "m" and g.units["distance"].quantity == "length"
    with pytest.raises(KeyError, match="column 'nope' not in the data frame"):
        from_dataframe(df, "u", "nope", weights="len")


# ---------------------------------------------------------------- csv
CSV = "source,target,distance,travel_time\n1,2,10,3\n2,3,20,4\n\n1,2,7,9\n"


def test_read_csv(tmp_path):
    p = tmp_path / "e.csv"
    p.write_text(CSV)
    g = read_csv(p, weights=("distance", "travel_time"))
    assert g.name == "e"
    assert g.node_ids.tolist() == [1, 2, 3]
    assert ext_arcs(g, "distance") == {(1, 2): 7, (2, 3): 20}
    assert ext_arcs(g, "travel_time") == {(1, 2): 9, (2, 3): 4}  # the kept (1,2) arc is the 7-m one
    gz = tmp_path / "e.csv.gz"
    gz.write_bytes(gzip.compress(CSV.encode()))
    assert read_csv(gz).fingerprint() == read_csv(p).fingerprint()


def test_read_csv_labels(tmp_path):
    p = tmp_path / "l.csv"
    p.write_text("from;to;w\nA;B;1\nB;C;2.0\n")
    g = read_csv(p, "from", "to", "w", delimiter=";")
    assert g.meta["node_labels"] == ["A", "B", "C"]
    assert ext_arcs(g) == {("A", "B"): 1, ("B", "C"): 2}


@pytest.mark.parametrize(
    "text, line, match",
    [
        ("source,target\n1,2\n", 1, "no column 'distance'"),
        ("source,target,distance\n1,2,3\n2,3\n", 3, "2 fields, expected 3"),
        ("source,target,distance\n1,2,3\n\n2,3,x\n", 4, "'distance' is 'x'"),
        ("source,target,distance\n1,2,3\n2,3,0\n", 3, "'distance' is '0'"),
        ("source,target,distance\n1,2,-1\n", 2, "'distance' is '-1'"),
        ("source,target,distance\n1,2,2.5\n", 2, "'distance' is '2.5'"),
        ("source,target,distance\n1,,2\n", 2, "empty 'target'"),
        ("", None, "empty file"),
    ],
)
def test_read_csv_errors(tmp_path, text, line, match):
    p = tmp_path / "bad.csv"
    p.write_text(text)
    with pytest.raises(ParseError, match=match) as ei:
        read_csv(p)
    assert ei.value.path == str(p) and ei.value.line == line


# ---------------------------------------------------------------- scipy
def test_from_scipy():
    m = sp.csr_matrix(np.array([[0, 4, 0], [0, 0, 2], [7, 0, 0]]))
    g = from_scipy(m, "distance", unit="m")
    assert arcs(g) == {(0, 1): 4, (1, 2): 2, (2, 0): 7}
    assert g.units["distance"].symbol == "m" and g.units["distance"].quantity == "length"
    assert (g.to_scipy() != m).nnz == 0
    dense = from_scipy(np.array([[0, 4], [1, 0]]))
    assert arcs(dense) == {(0, 1): 4, (1, 0): 1}


def test_from_scipy_explicit_zero_and_shape():
    m = sp.csr_matrix((np.array([0, 3]), np.array([1, 0]), np.array([0, 1, 2])), shape=(2, 2))
    assert m.nnz == 2  # the zero is stored
    with pytest.raises(GraphError, match=r"\(0, 1\) is an explicit zero"):
        from_scipy(m)
    m.eliminate_zeros()
    assert arcs(from_scipy(m)) == {(1, 0): 3}
    with pytest.raises(GraphError, match="square"):
        from_scipy(sp.csr_matrix((2, 3)))


# ---------------------------------------------------------------- networkx
def test_from_networkx_digraph_graph_multidigraph():
    nx = pytest.importorskip("networkx")
    D = nx.DiGraph()
    D.add_edge(0, 1, weight=3)
    D.add_edge(1, 2, weight=4)
    D.add_node(3)
    g = from_networkx(D)
    assert g.n_nodes == 4 and g.node_ids is None
    assert arcs(g) == {(0, 1): 3, (1, 2): 4}

    U = nx.Graph()
    U.add_edge("x", "y", length=5)
    g = from_networkx(U, weight="length")
    assert g.meta["node_labels"] == ["x", "y"]
    assert ext_arcs(g) == {("x", "y"): 5, ("y", "x"): 5}

    M = nx.MultiDiGraph()
    M.add_edge(100, 200, weight=9)
    M.add_edge(100, 200, weight=2)
    M.add_edge(200, 100, weight=6)
    M.nodes[100].update(x=7.0, y=43.0)
    M.nodes[200].update(x=7.1, y=43.1)
    g = from_networkx(M)
    assert g.node_ids.tolist() == [100, 200]
    assert ext_arcs(g) == {(100, 200): 2, (200, 100): 6}
    np.testing.assert_allclose(g.coords, [[7.0, 43.0], [7.1, 43.1]])


def test_from_networkx_tuple_nodes_and_missing_weight():
    nx = pytest.importorskip("networkx")
    G = nx.grid_2d_graph(2, 2)  # nodes are tuples
    g = from_networkx(G, default=1)
    assert g.n_nodes == 4 and g.n_arcs == 8
    assert all(isinstance(x, tuple) for x in g.meta["node_labels"])
    assert ((0, 0), (0, 1)) in ext_arcs(g)
    with pytest.raises(GraphError, match="has no attribute 'weight'"):
        from_networkx(G)


# ---------------------------------------------------------------- findings (each failed on e21572d unless noted)
@pytest.mark.parametrize(
    "tail, head, where",
    [
        ([0, 1, 2], [1.0, np.nan, 0.0], "head of arc 1 is nan"),
        ([0.0, np.inf], [1, 0], "tail of arc 1 is inf"),
        ([0, 1], [0.5, 1.0], "head of arc 0 is 0.5"),
        (np.array(["a", None], dtype=object), np.array(["b", "a"], dtype=object), "tail of arc 1 is None"),
        (np.array(["a", "b"], dtype=object), np.array(["b", float("nan")], dtype=object), "head of arc 1 is nan"),
    ],
)
def test_nan_inf_fractional_ids_rejected(tail, head, where):
    """A NaN id used to become a node of its own (and NaN breaking the label sort made 0 and 0.0 two
    nodes); an infinite or fractional float id became a label. Now: GraphError naming arc and column."""
    with pytest.raises(GraphError, match=where):
        from_edgelist(tail, head, np.ones(len(tail), dtype=np.int64))


def test_whole_float_ids_are_the_integer_nodes():
    g = from_edgelist(np.array([0, 1, 2]), np.array([1.0, 2.0, 0.0]), [1, 2, 3])
    assert g.n_nodes == 3 and g.node_ids is None
    assert arcs(g) == {(0, 1): 1, (1, 2): 2, (2, 0): 3}
    with pytest.raises(GraphError, match="node_ids of entry 1 is nan"):
        from_edgelist([0], [1], [1], node_ids=np.array([0.0, np.nan]))


def test_from_dataframe_missing_ids_name_row_and_column():
    """e21572d built 5 nodes [0, 1, 2, nan, 0.0] from this frame; now the row and column are named."""
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"u": [0, 1, 2], "v": [1.0, np.nan, 0.0], "w": [1, 1, 1]})
    with pytest.raises(GraphError, match="column 'v' of row 1 is nan"):
        from_dataframe(df, "u", "v", "w")
    df = pd.DataFrame({"u": [0, 1, 2], "v": [1.0, np.inf, 0.0], "w": [1, 1, 1]})
    with pytest.raises(GraphError, match="column 'v' of row 1 is inf"):
        from_dataframe(df, "u", "v", "w")
    df = pd.DataFrame({"u": pd.array([10, None, 30], dtype="Int64"), "v": [20, 30, 10], "w": [1, 1, 1]})
    with pytest.raises(GraphError, match="column 'u' of row 1 is (<NA>|nan)"):
        from_dataframe(df, "u", "v", "w")
    df = pd.DataFrame({"u": ["a", None], "v": ["b", "a"], "w": [1, 1]})
    with pytest.raises(GraphError, match="column 'u' of row 1 is (None|nan)"):
        from_dataframe(df, "u", "v", "w")
    # whole floats (what a NaN-free float column holds) are the integer ids
    df = pd.DataFrame({"u": [0, 1, 2], "v": [1.0, 2.0, 0.0], "w": [1, 1, 1]})
    assert from_dataframe(df, "u", "v", "w").n_nodes == 3


def test_read_csv_numeric_ids(tmp_path):
    """"0" and "0.0" are one node (e21572d: two string labels); "nan" / "2.5" ids are errors."""
    p = tmp_path / "f.csv"
    p.write_text("source,target,distance\n0,1.0,3\n1,0,4\n")
    g = read_csv(p)
    assert g.n_nodes == 2 and arcs(g) == {(0, 1): 3, (1, 0): 4} and "node_labels" not in g.meta
    for bad, line in (("0,nan,3", 2), ("0,1,3\n1,2.5,3", 3), ("0,1,3\ninf,1,3", 3)):
        p.write_text("source,target,distance\n" + bad + "\n")
        with pytest.raises(ParseError, match="node ids must be integers") as ei:
            read_csv(p)
        assert ei.value.line == line


def test_read_csv_bom_and_literal_weights(tmp_path):
    """Guards (these held on e21572d too): a UTF-8 BOM before the header is not part of the first column
    name, and an out-of-range weight is quoted as written."""
    p = tmp_path / "b.csv"
    p.write_bytes(b"\xef\xbb\xbf" + CSV.encode())
    assert read_csv(p, weights=("distance", "travel_time")).n_arcs == 2
    gz = tmp_path / "b.csv.gz"
    gz.write_bytes(gzip.compress(b"\xef\xbb\xbf" + CSV.encode()))
    assert read_csv(gz).n_arcs == 2
    for w in ("3000000000", "99999999999999999999"):
        p.write_text(f"source,target,distance\n1,2,{w}\n")
        with pytest.raises(ParseError, match=f"'distance' is '{w}'"):
            read_csv(p)
