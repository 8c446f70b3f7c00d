"""The public sssp() over every registered algorithm x variant on the CPU (the GPU twins are in
test_sssp_gpu.py), and the rule behind algorithm="auto"."""
from __future__ import annotations

import numpy as np
import pytest

import gpuroute
from gpuroute import RoadGraph
from gpuroute.sssp.api import ALGORITHMS, auto_algorithm

CASES = sorted({(a.name, v) for a in ALGORITHMS.values() for v in a.variants}, key=lambda c: (c[0], str(c[1])))


def _graph(seed, n=200):
    rng = np.random.default_rng(seed)
    m = 3 * n
    return RoadGraph.from_arcs(n, rng.integers(0, n, m), rng.integers(0, n, m), {"distance": rng.integers(1, 50, m)})


@pytest.mark.parametrize("alg,variant", CASES)
def test_every_algorithm_equals_dijkstra_on_cpu(alg, variant):
    g = _graph(3)
    ref_d, ref_p = gpuroute.sssp(g, [0, 5], algorithm="dijkstra", device="cpu", return_predecessors=True)
    d, p = gpuroute.sssp(g, [0, 5], algorithm=alg, variant=variant, device="cpu", return_predecessors=True)
    np.testing.assert_array_equal(d, ref_d)
    np.testing.assert_array_equal(p, ref_p)


def test_scalar_source_gives_1d():
    g = _graph(4)
    d = gpuroute.sssp(g, 3, device="cpu")
    assert d.shape == (g.n_nodes,) and d[3] == 0


def test_unknown_variant_rejected():
    with pytest.raises(ValueError, match="variant"):
        gpuroute.sssp(_graph(1), 0, algorithm="martin", variant="sideways", device="cpu")


def test_auto_rule():
    small = _graph(2)
    assert auto_algorithm(small.n_nodes, "cpu") == "dijkstra"
    assert auto_algorithm(small.n_nodes, "gpu", 1) == "cell-bf"
    assert auto_algorithm(small.n_nodes, "gpu", 64) == "near-far"


def test_unknown_option_is_an_error_listing_the_accepted_ones():
    with pytest.raises(TypeError, match=r"unexpected option\(s\) \['cell_size'\].*threads"):
        gpuroute.sssp(_graph(1), 0, algorithm="cell-bf", device="cpu", cell_size=256)
    with pytest.raises(TypeError, match="up"):  # main's CPU adaptive took up=/down= (fractions of n)
        gpuroute.sssp(_graph(1), 0, algorithm="adaptive", device="cpu", up=0.1)
