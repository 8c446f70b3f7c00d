"""TNTP loader: metadata and header checks, integer weights from decimal columns (scale recorded in the
unit), zero values raised to one step, errors naming file:line and quoting the field, the real Chicago
network checked against an independent parse.

Every test here fails on e21572d, where ``gpuroute.io.tntp`` does not exist.
"""
import gzip
import time

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import LineBudget, shared_data
from scipy.sparse.csgraph import dijkstra

from gpuroute.graph import units
from gpuroute.graph.errors import ParseError
from gpuroute.io import load_tntp
from gpuroute.io.tntp import matching_node_path, read_tntp_net, read_tntp_nodes

# 5 nodes; node 5 is in the metadata and the node file but in no link. Link 1->2 appears twice (the
# second is slower and longer: dropped). Link 3->4 is a zone connector with a zero free-flow time.
NET = """<NUMBER OF ZONES> 1
<NUMBER OF NODES> 5
<FIRST THRU NODE> 2
<NUMBER OF LINKS> 6
<END OF METADATA>


~ init_node\tterm_node\tcapacity\tlength\tfree_flow_time\tb\tpower\tspeed\ttoll\tlink_type\t;
\t1\t2\t1800.5\t0.45\t1.903\t0.15\t4\t25\t0\t1\t;
\t2\t3\t900\t1.5\t2.5\t0.15\t4\t25\t0\t2\t;
\t3\t4\t100000\t0.02\t0\t0.15\t4\t25\t0\t3\t;
\t4\t1\t900\t2\t3.25\t0.15\t4\t25\t0\t2\t;
\t1\t2\t500\t0.9\t4\t0.15\t4\t25\t0\t2\t;
\t2\t1\t900\t0.45\t1.9\t0.15\t4\t25\t0\t1\t;
"""
NODES = "Node\tX\tY\t;\n1\t712475\t1855780\t;\n2\t713275\t1850580\t;\n3\t715275\t1847980\t;\n" \
        "4\t713675\t1844580\t;\n5\t0\t0\t;\n"


def write(tmp_path, name, text, gz=False, bom=False):
    p = tmp_path / name
    data = (b"\xef\xbb\xbf" if bom else b"") + text.encode()
    p.write_bytes(gzip.compress(data) if gz else data)
    return str(p)


def arcs(g, w=None):
    return {(int(g.node_ids[g.tail[a]]), int(g.node_ids[g.head[a]])): int(g.weight(w)[a]) for a in range(g.n_arcs)}


# ---------------------------------------------------------------- a valid network
def test_valid_network(tmp_path):
    """Every rule of a valid file: nodes from the metadata (isolated node kept), ids, weights scaled by
    the smallest exact power of ten (recorded in the unit), zero raised to one step and counted,
    parallel links reduced to one real link, capacity and link_type kept, planar coordinates."""
    p = write(tmp_path, "Tiny_net.tntp", NET)
    write(tmp_path, "Tiny_node.tntp", NODES)
    g = load_tntp(p)
    assert g.name == "Tiny"
    assert g.n_nodes == 5 and g.node_ids.tolist() == [1, 2, 3, 4, 5]
    assert g.out_degree()[4] == 0 and g.in_degree()[4] == 0  # node 5: isolated, kept
    assert g.weight_names == ["free_flow_time", "length"]
    # free_flow_time has 3 decimals (1.903) -> x1000; length has 2 (0.45, 0.02) -> x100
    assert arcs(g, "free_flow_time") == {(1, 2): 1903, (2, 3): 2500, (3, 4): 1, (4, 1): 3250, (2, 1): 1900}
    assert arcs(g, "length") == {(1, 2): 45, (2, 3): 150, (3, 4): 2, (4, 1): 200, (2, 1): 45}
    ft, ln = g.units["free_flow_time"], g.units["length"]
    assert (ft.symbol, ft.quantity) == ("min/1000", "time") and ft.scale == pytest.approx(0.06)
    assert (ln.symbol, ln.quantity) == ("mi/100", "length") and ln.scale == pytest.approx(16.09344)
    assert ln.scale == units.scaled(units.MILE, 100).scale
    assert "assumed" in ft.note and "assumed" in ln.note
    assert g.meta["weight_scale"] == {"free_flow_time": 1000, "length": 100}
    assert g.meta["zero_weights_raised"] == {"free_flow_time": 1, "length": 0}
    assert g.meta["weights_rounded"] == {"free_flow_time": 0, "length": 0}
    assert g.meta["units_source"] == {"time": "assumed", "length": "assumed"}
    assert (g.meta["zones"], g.meta["first_thru_node"]) == (1, 2)
    assert g.meta["parallel_arcs_dropped"] == 1
    a12 = int(np.flatnonzero((g.tail == 0) & (g.head == 1))[0])
    assert g.arc_attrs["capacity"].dtype == np.float64 and g.arc_attrs["capacity"][a12] == 1800.5  # the kept link's
    assert g.arc_attrs["link_type"].dtype == np.int64 and g.arc_attrs["link_type"][a12] == 1
    assert g.attr_units["capacity"].symbol == "veh/h"
    assert g.coord_system == "planar"
    np.testing.assert_array_equal(g.coords[0], [712475, 1855780])
    assert g.meta["nodes_source"].endswith("Tiny_node.tntp")


def test_gzip_auto_node_file_and_names(tmp_path):
    """``node_path="auto"`` finds ``X_node.tntp[.gz]`` beside ``X_net.tntp[.gz]``; gzip is read."""
    p = write(tmp_path, "Gz_net.tntp.gz", NET, gz=True)
    nodes = write(tmp_path, "Gz_node.tntp.gz", NODES, gz=True)
    assert matching_node_path(p) == nodes
    assert matching_node_path(write(tmp_path, "other.tntp", NET)) is None
    g = load_tntp(p)
    assert g.name == "Gz" and g.coords is not None and g.meta["nodes_source"] == nodes
    h = load_tntp(p, node_path=None)
    assert h.coords is None and h.n_nodes == 5
    assert h.fingerprint() == g.fingerprint()
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_tntp(p, node_path=tmp_path / "absent_node.tntp")


def test_utf8_bom_accepted(tmp_path):
    """A UTF-8 BOM at the start of the net or node file is not part of the first line."""
    p = write(tmp_path, "B_net.tntp", NET, bom=True)
    write(tmp_path, "B_node.tntp", NODES, bom=True)
    g = load_tntp(p)
    assert g.n_nodes == 5 and g.meta["zones"] == 1 and g.coords is not None


def test_weights_option_and_single_weight(tmp_path):
    p = write(tmp_path, "W_net.tntp", NET)
    g = load_tntp(p, weights={"distance": "length"}, node_path=None)
    assert g.weight_names == ["distance"] and g.units["distance"].symbol == "mi/100"
    g = load_tntp(p, weights="length", node_path=None)
    assert g.weight_names == ["length"]
    with pytest.raises(ParseError, match="no column 'toll_2'") as ei:
        load_tntp(p, weights=("toll_2",), node_path=None)
    assert ei.value.line == 8  # the header row


# ---------------------------------------------------------------- units
def test_units_from_caller_and_metadata(tmp_path):
    """The caller's unit wins; else a ``<... UNITS>`` metadata line; else miles / minutes, assumed."""
    p = write(tmp_path, "U_net.tntp", NET)
    g = load_tntp(p, length_unit="km", time_unit=units.SECOND, node_path=None)
    assert g.units["length"].symbol == "km/100" and g.units["length"].scale == pytest.approx(10.0)
    assert g.units["free_flow_time"].symbol == "s/1000" and g.units["free_flow_time"].scale == pytest.approx(0.001)
    assert g.meta["units_source"] == {"time": "given by the caller", "length": "given by the caller"}
    meta_units = NET.replace("<END OF METADATA>", "<LENGTH UNITS> feet\n<TIME UNITS> hours\n<END OF METADATA>")
    q = write(tmp_path, "M_net.tntp", meta_units)
    g = load_tntp(q, node_path=None)
    assert g.units["length"].symbol == "ft/100" and g.units["length"].scale == pytest.approx(0.003048)
    assert g.units["free_flow_time"].symbol == "h/1000" and "line 6" in g.units["free_flow_time"].note
    assert g.meta["units_source"]["length"] == "metadata"
    bad = write(tmp_path, "X_net.tntp", NET.replace("<END OF METADATA>", "<LENGTH UNITS> furlongs\n<END OF METADATA>"))
    with pytest.raises(ParseError, match="furlongs.*not a known length unit") as ei:
        load_tntp(bad, node_path=None)
    assert ei.value.line == 5
    assert load_tntp(bad, node_path=None, length_unit="mi").units["length"].symbol == "mi/100"
    with pytest.raises(ValueError, match="length_unit='min' is not a known length unit"):
        load_tntp(p, length_unit="min", node_path=None)


# Sydney_net.tntp of the TransportationNetworks collection, as published: the units are stated only in
# the <ORIGINAL HEADER> line, and the link rows have no closing ';' (each ends with a tab).
SYDNEY_LIKE = (
    "<NUMBER OF ZONES> 1\t\t\t\t\t\n<NUMBER OF NODES> 3\t\t\t\t\t\n<FIRST THRU NODE> 2\t\t\t\t\t\n"
    "<NUMBER OF LINKS> 3\n"
    "<ORIGINAL HEADER>~\tfrom\tto\ttotal capacity\tlength (km)\tfftt (min)\talpha\tbeta\tff speed (km/h)\t"
    "critical speed (km/h)\tlanes\t\n"
    "<END OF METADATA>\t\t\t\t\t\n\t\t\t\t\t\n\n"
    "~\tinit_node\tterm_node\tcapacity\tlength\tfree_flow_time\tb\tpower\tspeed\tcritical_speed\tlanes\t;\n"
    "\t1\t2\t2880\t0.904\t2.26\t0.25\t4\t24\t19.2\t2\t\n"
    "\t2\t3\t2880\t0.027\t0.07\t0.25\t4\t24\t19.2\t2\t\n"
    "\t3\t1\t2880\t1.5\t3.75\t0.25\t4\t24\t19.2\t2\t\n"
)


def test_rows_without_semicolon_as_published(tmp_path):
    """Link rows with and without the closing ';' are both read (Sydney's have none), also mixed."""
    g = load_tntp(write(tmp_path, "Syd_net.tntp", SYDNEY_LIKE), node_path=None)
    assert arcs(g, "length") == {(1, 2): 904, (2, 3): 27, (3, 1): 1500}
    assert arcs(g, "free_flow_time") == {(1, 2): 226, (2, 3): 7, (3, 1): 375}
    mixed = "<END OF METADATA>\n" + HEAD + ROW + "2 1 100 2 3 0.15 4 25 0 1\n" + "1 3 100 4 5 0.15 4 25 0 1;\n"
    g = load_tntp(write(tmp_path, "mixed_net.tntp", mixed), node_path=None)
    assert arcs(g, "length") == {(1, 2): 1, (2, 1): 2, (1, 3): 4}
    # a row that is neither (a stray token after the ';') is still an error at its line
    bad = "<END OF METADATA>\n" + HEAD + "1 2 100 1 1 0.15 4 25 0 1 ; 7\n"
    with pytest.raises(ParseError, match="'1 ; 7'|fields|not a number") as ei:
        load_tntp(write(tmp_path, "bad_net.tntp", bad), node_path=None)
    assert ei.value.line == 3


def test_units_from_original_header(tmp_path):
    """Units stated in the column names of ``<ORIGINAL HEADER>`` (Sydney: ``length (km)``, ``fftt (min)``)
    are read, and the unit's note says where they came from; a ``<... UNITS>`` line still wins."""
    g = load_tntp(write(tmp_path, "Syd_net.tntp", SYDNEY_LIKE), node_path=None)
    ln, ft = g.units["length"], g.units["free_flow_time"]
    assert ln.symbol == "km/1000" and ln.scale == pytest.approx(1.0)  # 0.904 km -> 904 steps of 1 m
    assert g.weight("length").astype(float) @ np.ones(g.n_arcs) * ln.scale == pytest.approx((0.904 + 0.027 + 1.5) * 1000)
    assert ft.symbol == "min/100" and ft.scale == pytest.approx(0.6)
    assert "<ORIGINAL HEADER>" in ln.note and "line 5" in ln.note and "'length (km)'" in ln.note
    assert "'fftt (min)'" in ft.note and "assumed" not in ln.note and "states no unit" not in ln.note
    assert g.meta["units_source"] == {"time": "metadata", "length": "metadata"}
    # other spellings of the collection: Anaheim (ft, 'Free Flow Time (min)'), Chicago-Sketch ('length
    # (miles)', 'fftt(min)' without a space)
    for header, sym, scale in (("~ \tTail\tHead\tCapacity (veh/h)\tLength (ft)\tFree Flow Time (min)\tB\tPower\t"
                                "Speed (ft/min) \tToll \tType\t;", "ft/1000", 0.0003048),
                               ("~\ttail node\thead node\tcapacity (veh/h)\tlength (miles)\tfftt(min)\tB\tPower\t"
                                "speed limit (mph)\ttoll (cents)\tlink type\t", "mi/1000", 1.609344),
                               ("~ from to capacity length (m) fftt (h) b power speed critical_speed lanes", "m/1000",
                                0.001)):
        text = SYDNEY_LIKE.replace(SYDNEY_LIKE.split("\n")[4], "<ORIGINAL HEADER>" + header)
        g = load_tntp(write(tmp_path, "O_net.tntp", text), node_path=None)
        assert (g.units["length"].symbol, g.units["length"].scale) == (sym, pytest.approx(scale))
        assert g.units["free_flow_time"].quantity == "time"
    # the header row itself may state the unit too
    text = SYDNEY_LIKE.replace("\tlength\tfree_flow_time\t", "\tlength (km)\tfree_flow_time (min)\t")
    text = text.replace(SYDNEY_LIKE.split("\n")[4] + "\n", "")
    g = load_tntp(write(tmp_path, "H_net.tntp", text), node_path=None)
    assert g.units["length"].scale == pytest.approx(1.0) and "header row" in g.units["length"].note
    assert g.meta["units_source"]["length"] == "header row"
    # an explicit <LENGTH UNITS> line wins over the column name; the caller over both
    text = SYDNEY_LIKE.replace("<END OF METADATA>", "<LENGTH UNITS> mi\n<END OF METADATA>")
    g = load_tntp(write(tmp_path, "L_net.tntp", text), node_path=None)
    assert g.units["length"].symbol == "mi/1000"
    g = load_tntp(write(tmp_path, "C_net.tntp", SYDNEY_LIKE), node_path=None, length_unit="m")
    assert g.units["length"].symbol == "m/1000"
    # an unknown stated unit is an error at its line, naming it
    text = SYDNEY_LIKE.replace("length (km)", "length (furlongs)")
    with pytest.raises(ParseError, match="'furlongs'.*not a known length unit") as ei:
        load_tntp(write(tmp_path, "F_net.tntp", text), node_path=None)
    assert ei.value.line == 5


# ---------------------------------------------------------------- scaling
def net_with(lengths, times=None):
    rows = "".join(f"{i + 1} {i + 2} 100 {ln} {t} 0.15 4 25 0 1 ;\n"
                   for i, (ln, t) in enumerate(zip(lengths, times or ["1"] * len(lengths), strict=True)))
    return f"<NUMBER OF LINKS> {len(lengths)}\n<END OF METADATA>\n~ init_node term_node capacity length " \
           f"free_flow_time b power speed toll link_type ;\n{rows}"


@pytest.mark.parametrize(
    "lengths, factor, expected",
    [
        (["3", "10", "7.0"], 1, [3, 10, 7]),                  # integers (7.0 too) stay x1
        (["0.5", "1.25", "2"], 100, [50, 125, 200]),          # 2 decimals -> x100
        (["0.001", "0.45", "9.99"], 1000, [1, 450, 9990]),    # 3 decimals -> x1000, 0.001 stays >= 1
        (["0.0004", "1"], 10000, [4, 10000]),                 # a tiny value: x10^4, never rounded to 0
        (["1.5e-3", "2"], 10000, [15, 20000]),                # exponent notation counts its decimals
        (["0", "0.25"], 100, [1, 25]),                        # zero -> 1 step (counted), not 0
    ],
)
def test_auto_scale_smallest_exact_power_of_ten(tmp_path, lengths, factor, expected):
    p = write(tmp_path, "s_net.tntp", net_with(lengths))
    g = load_tntp(p, weights="length", node_path=None)
    assert g.meta["weight_scale"]["length"] == factor
    order = np.argsort(g.tail)
    assert g.weight("length")[order].tolist() == expected
    assert g.units["length"].symbol == ("mi" if factor == 1 else f"mi/{factor}")
    assert g.units["length"].scale == pytest.approx(1609.344 / factor)
    assert g.meta["zero_weights_raised"]["length"] == lengths.count("0")


def test_scale_too_fine_for_int32_rounds_but_never_to_zero(tmp_path):
    """9 decimals on a value of 100 would exceed int32: the largest power that fits is used (x10^7),
    the smallest positive value still >= 1, and the rounded values are counted."""
    p = write(tmp_path, "f_net.tntp", net_with(["100.123456789", "0.000000123"]))
    g = load_tntp(p, weights="length", node_path=None)
    assert g.meta["weight_scale"]["length"] == 10**7
    assert sorted(g.weight("length").tolist()) == [1, 1001234568]
    assert g.meta["weights_rounded"]["length"] == 2
    # no power of ten keeps both 5e8 and 1e-9 (which needs x10^9): an error quoting both fields
    p = write(tmp_path, "g_net.tntp", net_with(["500000000.5", "0.000000001"]))
    with pytest.raises(ParseError, match="500000000.5 cannot be an int32 weight.*0.000000001 \\(line 5\\)") as ei:
        load_tntp(p, weights="length", node_path=None)
    assert ei.value.line == 4


def test_explicit_scale(tmp_path):
    p = write(tmp_path, "e_net.tntp", net_with(["0.45", "2"], ["1.903", "3"]))
    g = load_tntp(p, scale={"free_flow_time": 60}, node_path=None)
    assert g.meta["weight_scale"] == {"free_flow_time": 60, "length": 100}
    assert g.units["free_flow_time"].symbol == "min/60" and g.units["free_flow_time"].scale == pytest.approx(1.0)
    assert sorted(g.weight("free_flow_time").tolist()) == [114, 180]  # 1.903 min = 114.18 s -> 114
    assert g.meta["weights_rounded"]["free_flow_time"] == 1
    with pytest.raises(ParseError, match="length 0.45 x 1 rounds to 0") as ei:
        load_tntp(write(tmp_path, "z_net.tntp", net_with(["0.45", "2"])), scale=1, node_path=None)
    assert ei.value.line == 4
    with pytest.raises(ParseError, match="length 3000000 x 1000 exceeds int32") as ei:
        load_tntp(write(tmp_path, "b_net.tntp", net_with(["1", "3000000"])), scale=1000, node_path=None)
    assert ei.value.line == 5
    with pytest.raises(ValueError, match="positive number"):
        load_tntp(p, scale=0, node_path=None)
    with pytest.raises(ValueError, match="not weights"):
        load_tntp(p, scale={"toll": 10}, node_path=None)


def test_value_beyond_int32_quoted_as_written(tmp_path):
    """A length too large for any weight is reported with the file's own text."""
    p = write(tmp_path, "o_net.tntp", net_with(["99999999999999999999", "1"]))
    with pytest.raises(ParseError, match="length 99999999999999999999 x 1 exceeds int32") as ei:
        load_tntp(p, weights="length", node_path=None)
    assert ei.value.line == 4


# ---------------------------------------------------------------- malformed net files
HEAD = "~ init_node term_node capacity length free_flow_time b power speed toll link_type ;\n"
ROW = "1 2 100 1 1 0.15 4 25 0 1 ;\n"


@pytest.mark.parametrize(
    "text, line, match",
    [
        # header counts against the file
        ("<NUMBER OF NODES> 2\n<NUMBER OF LINKS> 2\n<END OF METADATA>\n" + HEAD + ROW, 2,
         "<NUMBER OF LINKS> is 2 but the file has 1 link rows"),
        ("<NUMBER OF NODES> 3000000000\n<NUMBER OF LINKS> 1\n<END OF METADATA>\n" + HEAD + ROW, 1,
         "3000000000 nodes, more than int32"),
        ("<NUMBER OF NODES> twelve\n<END OF METADATA>\n" + HEAD + ROW, 1, "not a non-negative integer"),
        ("<NUMBER OF LINKS> 1\n<NUMBER OF LINKS> 1\n<END OF METADATA>\n" + HEAD + ROW, 2, "given twice"),
        # metadata block structure
        ("<NUMBER OF LINKS> 1\n" + HEAD + ROW, 3, "inside the metadata block opened on line 1"),
        ("<NUMBER OF LINKS> 0\n", 1, "without <END OF METADATA>"),
        ("<END OF METADATA>\n" + HEAD + ROW + "<NUMBER OF NODES> 2\n", 4, "metadata line after"),
        ("<NUMBER OF LINKS 1\n<END OF METADATA>\n", 1, "bad metadata line"),
        # link rows
        ("<END OF METADATA>\n" + HEAD + ROW + "2 1 100 1 1 0.15 4 25 0 ;\n", 4,
         "9 fields, expected 10 as in the header row \\(line 2\\)"),
        ("<END OF METADATA>\n" + HEAD + "1 2 100 1.0.1 1 0.15 4 25 0 1 ;\n", 3, "length is '1.0.1', not a number"),
        ("<END OF METADATA>\n" + HEAD + "1 2 100 1 1 0.15 4 fast 0 1 ;\n", 3, "speed is 'fast', not a number"),
        ("<END OF METADATA>\n" + HEAD + "1 2 100 1 1e999 0.15 4 25 0 1 ;\n", 3, "'1e999', not a finite number"),
        ("<END OF METADATA>\n" + HEAD + ROW + "2 1 100 -0.5 1 0.15 4 25 0 1 ;\n", 4,
         "length is -0.5: negative length is not allowed"),
        ("<END OF METADATA>\n" + HEAD + ROW + "2 1 100 1 -2 0.15 4 25 0 1 ;\n", 4, "negative free_flow_time"),
        # node ids
        ("<NUMBER OF NODES> 2\n<END OF METADATA>\n" + HEAD + ROW + "2 3 100 1 1 0.15 4 25 0 1 ;\n", 5,
         "term_node 3 outside 1..2 \\(<NUMBER OF NODES> on line 1\\)"),
        ("<END OF METADATA>\n" + HEAD + "1.5 2 100 1 1 0.15 4 25 0 1 ;\n", 3, "init_node is '1.5', not a positive"),
        ("<END OF METADATA>\n" + HEAD + "0 2 100 1 1 0.15 4 25 0 1 ;\n", 3, "init_node 0 is outside"),
        ("<END OF METADATA>\n" + HEAD + "1 99999999999999999999 100 1 1 0.15 4 25 0 1 ;\n", 3,
         "term_node 99999999999999999999 is outside"),
    ],
)
def test_malformed_net(tmp_path, text, line, match):
    p = write(tmp_path, "bad_net.tntp", text)
    with pytest.raises(ParseError, match=match) as ei:
        load_tntp(p)
    assert ei.value.path == p and ei.value.line == line
    assert str(ei.value).startswith(f"{p}:{line}:")


def test_header_node_count_rejected_before_allocating(tmp_path):
    """<NUMBER OF NODES> far beyond int32: rejected at its line at once, with little memory and a few
    thousand Python lines at most (~3,000 measured, imports included), where anything that walks the
    announced nodes would run millions."""
    import tracemalloc

    p = write(tmp_path, "huge_net.tntp", "<NUMBER OF NODES> 3000000000\n<END OF METADATA>\n" + HEAD + ROW)
    tracemalloc.start()
    try:
        with LineBudget(50_000), pytest.raises(ParseError, match="int32") as ei:
            load_tntp(p)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert ei.value.line == 1
    assert peak < 8 * 2**20


def test_no_metadata_no_header(tmp_path):
    """A bare list of link rows: standard column order; nodes are the ids in use (external ids kept)."""
    p = write(tmp_path, "bare.tntp", "1 20 100 1.5 2 0.15 4 25 0 1 ;\n20 7 100 2 1 0.15 4 25 0 1 ;\n")
    g = load_tntp(p)
    assert g.name == "bare" and g.node_ids.tolist() == [1, 7, 20]
    assert arcs(g, "length") == {(1, 20): 15, (20, 7): 20}
    p = write(tmp_path, "short.tntp", "1 2 100 1 ;\n")
    with pytest.raises(ParseError, match="no column 'free_flow_time'"):
        load_tntp(p)


# ---------------------------------------------------------------- node files
@pytest.mark.parametrize(
    "nodes, where, line, match",
    [
        # a link (net line 10: 2 -> 3) uses node 3, which the node file does not list
        ("node x y\n1 0 0\n2 1 1\n4 2 2\n5 3 3\n", "net", 10, "term_node 3 is an unknown node"),
        ("node x y\n1 0 0\n2 1 1\n3 2 2\n4 2 2\n5 3 3\n9 1 1\n", "node", 7, "node id 9 outside 1..5"),
        ("node x y\n1 0 0\n2 1 1\n3 2 2\n2 2 2\n4 2 2\n5 3 3\n", "node", 5, "node id 2 appears twice \\(first on line 3\\)"),
        ("Node X Y ;\n1 0 0 ;\n2 1 1\n", "node", 3, "does not end with ';'"),
        ("node x y\n1 0 0\n2 1 1 7\n", "node", 3, "3 fields, expected 3|4 fields, expected 3"),
        ("node x y\n1 0 0\n2 1 abc\n", "node", 3, "y is 'abc', not a number"),
        ("node x y\n1 0 0\n2 1 nan\n", "node", 3, "not a number"),
        ("node x y\n1 0 0\n2 1 1\n3 2 2\n4 2 2\n", "node", None, "no coordinates for node 5"),
        ("name east north\n1 0 0\n", "node", 1, "does not name node, x and y"),
    ],
)
def test_malformed_node_file(tmp_path, nodes, where, line, match):
    p = write(tmp_path, "N_net.tntp", NET)
    q = write(tmp_path, "N_node.tntp", nodes)
    with pytest.raises(ParseError, match=match) as ei:
        load_tntp(p)
    assert ei.value.path == (p if where == "net" else q)
    assert ei.value.line == line


def test_coordinates_planar_unless_clearly_degrees(tmp_path):
    p = write(tmp_path, "C_net.tntp", NET)
    lonlat = "node x y ;\n" + "".join(f"{i} -96.7704{i}19 43.6128{i}79 ;\n" for i in range(1, 6))
    write(tmp_path, "C_node.tntp", lonlat)
    g = load_tntp(p)
    assert g.coord_system == "lonlat" and g.coords[0, 0] == pytest.approx(-96.7704119)
    assert load_tntp(p, coord_system="planar").coord_system == "planar"
    # small planar grid values inside the degree range but without degree precision: planar
    write(tmp_path, "C_node.tntp", "node x y\n" + "".join(f"{i} {i} {2 * i}\n" for i in range(1, 6)))
    assert load_tntp(p).coord_system == "planar"
    # a lon/lat header decides; values outside the range are then an error
    write(tmp_path, "C_node.tntp", "node lon lat\n" + "".join(f"{i} {i} {2 * i}\n" for i in range(1, 6)))
    assert load_tntp(p).coord_system == "lonlat"
    q = write(tmp_path, "C_node.tntp", "node x y\n1 0 0\n2 1 1\n3 200 1\n4 1 1\n5 1 1\n")
    with pytest.raises(ParseError, match="outside \\[-180, 180\\]") as ei:
        load_tntp(p, coord_system="lonlat")
    assert (ei.value.path, ei.value.line) == (q, 4)
    with pytest.raises(ValueError, match="coord_system"):
        load_tntp(p, coord_system="utm")


def test_read_functions(tmp_path):
    p = write(tmp_path, "R_net.tntp", NET)
    net = read_tntp_net(p)
    assert net.columns[:5] == ["init_node", "term_node", "capacity", "length", "free_flow_time"]
    assert net.header_line == 8 and net.lines.tolist() == [9, 10, 11, 12, 13, 14]
    assert net.tail.tolist() == [1, 2, 3, 4, 1, 2] and net.n_nodes == 5
    assert net.text(0, 4) == "1.903"
    q = write(tmp_path, "R_node.tntp", NODES)
    nodes = read_tntp_nodes(q)
    assert nodes.ids.tolist() == [1, 2, 3, 4, 5] and not nodes.lonlat and nodes.lines[0] == 2
    # older spelling of the columns (tab separated, with spaces in the names)
    old = NET.replace("~ init_node\tterm_node\tcapacity\tlength\tfree_flow_time\tb\tpower\tspeed\ttoll\tlink_type\t;",
                      "~ \tInit node \tTerm node \tCapacity \tLength \tFree Flow Time \tB\tPower\tSpeed limit \tToll "
                      "\tType\t;")
    assert read_tntp_net(write(tmp_path, "O_net.tntp", old)).columns == list(read_tntp_net(p).columns)


# ---------------------------------------------------------------- the real Chicago network

def _independent_parse(path):
    """Chicago's links parsed with plain Python: {(u, v): (fft_literal, length_literal)}, counts."""
    meta, links = {}, []
    with gzip.open(path, "rt") as f:
        for raw in f:
            s = raw.strip()
            if s.startswith("<"):
                tag, _, val = s[1:].partition(">")
                meta[tag.strip()] = val.strip()
            elif s and not s.startswith("~"):
                toks = s.rstrip(";").split()
                links.append((int(toks[0]), int(toks[1]), toks[4], toks[3]))
    return meta, links


def _decimals(lit):
    return len(lit.split(".")[1].rstrip("0")) if "." in lit else 0


@pytest.mark.slow
def test_chicago_regional():
    """ChicagoRegional: counts from the file's metadata, weights and units, and shortest paths on the
    loaded graph equal those on an independently parsed arc list."""
    net_path = shared_data("tntp", "ChicagoRegional_net.tntp.gz")
    node_path = shared_data("tntp", "ChicagoRegional_node.tntp.gz")
    t0 = time.perf_counter()
    g = load_tntp(net_path)
    seconds = time.perf_counter() - t0
    meta, links = _independent_parse(net_path)
    n, m = int(meta["NUMBER OF NODES"]), int(meta["NUMBER OF LINKS"])
    assert (n, m) == (12982, 39018) and len(links) == m
    assert g.n_nodes == n and g.node_ids.tolist() == list(range(1, n + 1))
    assert g.n_arcs + g.meta["parallel_arcs_dropped"] + g.meta["self_loops_dropped"] == m
    with gzip.open(node_path, "rt") as f:
        node_rows = [ln.split() for ln in f if ln.strip()][1:]
    assert len(node_rows) == n and g.coords.shape == (n, 2) and g.coord_system == "planar"
    assert g.coords[n - 1].tolist() == [float(node_rows[-1][1]), float(node_rows[-1][2])]
    used = {u for u, _, _, _ in links} | {v for _, v, _, _ in links}
    assert len(used) == 12979 and int(((g.out_degree() + g.in_degree()) == 0).sum()) == n - len(used)
    assert (g.meta["zones"], g.meta["first_thru_node"]) == (int(meta["NUMBER OF ZONES"]), int(meta["FIRST THRU NODE"]))

    # scale: the smallest power of ten that keeps every value exact, recorded in the unit
    f_t = 10 ** max(_decimals(t) for _, _, t, _ in links)
    f_l = 10 ** max(_decimals(ln) for _, _, _, ln in links)
    assert (f_t, f_l) == (1000, 100)
    assert g.meta["weight_scale"] == {"free_flow_time": f_t, "length": f_l}
    ft, ln = g.units["free_flow_time"], g.units["length"]
    assert (ft.symbol, ft.quantity, ft.scale) == ("min/1000", "time", pytest.approx(60 / 1000))
    assert (ln.symbol, ln.quantity, ln.scale) == ("mi/100", "length", pytest.approx(1609.344 / 100))
    zeros = sum(float(t) == 0 for _, _, t, _ in links)
    assert zeros == 3650 and g.meta["zero_weights_raised"]["free_flow_time"] == zeros
    assert g.weight("free_flow_time").min() == 1 and g.weight("length").min() >= 1

    # independent arc list: lightest free-flow time per (u, v), its length with it
    best = {}
    for u, v, t, length in links:
        wt = max(1, round(float(t) * f_t))
        wl = max(1, round(float(length) * f_l))
        if u != v and ((u, v) not in best or wt < best[(u, v)][0]):
            best[(u, v)] = (wt, wl)
    rows = np.array([u - 1 for u, v in best]), np.array([v - 1 for u, v in best])
    ref_t = sp.csr_matrix((np.array([w[0] for w in best.values()]), rows), shape=(n, n))
    ref_l = sp.csr_matrix((np.array([w[1] for w in best.values()]), rows), shape=(n, n))
    sources = [0, 1790, 5000, 12981]
    for weight, ref in (("free_flow_time", ref_t), ("length", ref_l)):
        got = dijkstra(g.to_scipy(weight), indices=sources)
        want = dijkstra(ref, indices=sources)
        np.testing.assert_array_equal(got, want)
        assert np.isfinite(got).sum() > len(sources) * 12000  # the network is (nearly) strongly connected
    print(f"ChicagoRegional load_tntp: {seconds:.3f} s")
