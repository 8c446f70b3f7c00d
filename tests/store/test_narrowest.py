"""Saved arrays in their narrowest exact dtype (issue 20, dataset weight): :func:`gpuroute.store.narrowest`
narrows integers only where every value fits; an overlay saves its costs, a hierarchy its weights and core
distances (INF through a named int32 sentinel) as int32 where they fit, and both load back the int64 arrays
they saved (the same routes and tables)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from naive import random_road_graph

from gpuroute import store
from gpuroute.crp.overlay import Overlay
from gpuroute.partition import Partition


@pytest.mark.parametrize("values, want", [
    ([0, 5, -7, 2**31 - 1, -(2**31)], "int32"),  # the int32 range, both ends included
    ([0, 2**31], "int64"),  # one value past it: kept
    ([-(2**31) - 1], "int64"),
    ([], "int32"),
])
def test_narrowest_keeps_every_value(values, want):
    a = np.array(values, dtype=np.int64)
    got = store.narrowest(a)
    assert got.dtype == np.dtype(want)
    np.testing.assert_array_equal(got.astype(np.int64), a)
    if want == "int64":
        assert got is a


def test_narrowest_leaves_other_arrays_alone():
    f = np.array([0.5, 1e12])
    assert store.narrowest(f) is f  # floats never narrow (a float32 is not exact)
    s = np.array([1, 2], dtype=np.int16)
    assert store.narrowest(s) is s  # already narrower than the candidates
    u = np.array([0, 2**32 - 1], dtype=np.uint64)
    assert store.narrowest(u) is u  # past int32
    assert store.narrowest(np.array([3], np.uint64), ("int8", "int32")).dtype == np.int8


def test_an_overlay_saves_int32_costs_and_loads_its_state_back(tmp_path):
    rng = np.random.default_rng(4)
    g = random_road_graph(rng, 150)[0]
    ov = Overlay.build(g, Partition.build(g, cell_sizes=(16, 64)))
    ov.customize("distance")
    st = ov._need_state()
    ov.save(tmp_path / "ov")
    d = tmp_path / "ov" / "overlay"
    man = json.loads((d / "manifest.json").read_text())
    for name in ("arc_cost", "turn_cost"):
        assert np.load(d / f"{name}.npy").dtype == np.int32, name
        assert man["files"][name]["dtype"] == "int32"
    back = Overlay.load(tmp_path / "ov", g)._need_state()
    for name in ("arc_cost", "turn_cost", "clique"):
        a, b = getattr(back, name), getattr(st, name)
        assert a.dtype == np.int64 and b.dtype == np.int64
        np.testing.assert_array_equal(a, b, err_msg=name)
    s, t = rng.integers(0, g.n_nodes, 40), rng.integers(0, g.n_nodes, 40)
    np.testing.assert_array_equal(Overlay.load(tmp_path / "ov", g).distances(s, t), ov.distances(s, t))


def test_a_hierarchy_saves_int32_weights_and_loads_them_as_int64(tmp_path):
    from gpuroute.ch.api import ContractionHierarchy
    from gpuroute.ch.store import NARROWED
    from gpuroute.graph.constants import INF

    rng = np.random.default_rng(9)
    g = random_road_graph(rng, 200)[0]
    ch = ContractionHierarchy.build(g, "distance", progress=False)
    ch.save(tmp_path / "ch")
    man = json.loads((tmp_path / "ch" / "manifest.json").read_text())
    assert (ch.h.core_dist == INF).any()  # unreachable core pairs: saved as CORE_INF32, read back as INF
    for name in ("up_weight", "down_weight", "core_dist"):
        assert np.load(tmp_path / "ch" / f"{name}.npy").dtype == np.int32, name
        assert man["files"][f"{name}.npy"]["dtype"] == "int32"
    back = ContractionHierarchy.load(tmp_path / "ch", graph=g)
    for name in ch.h.ARRAYS:
        a, b = getattr(back.h, name), getattr(ch.h, name)
        assert a.dtype == b.dtype, name
        np.testing.assert_array_equal(a, b, err_msg=name)
    assert set(NARROWED) <= set(ch.h.ARRAYS)
    s, t = rng.integers(0, g.n_nodes, 30), rng.integers(0, g.n_nodes, 30)
    np.testing.assert_array_equal(back.table(s, t), ch.table(s, t))


def test_core_distances_keep_inf_through_int32():
    from gpuroute.ch.store import CORE_INF32, narrow_array, widen_array
    from gpuroute.graph.constants import INF

    d = np.array([[0, 5, INF], [INF, 0, 2**31 - 2], [7, INF, 0]], dtype=np.int64)
    saved = narrow_array("core_dist", d)
    assert saved.dtype == np.int32 and int(saved[0, 2]) == CORE_INF32
    back = widen_array("core_dist", saved)
    assert back.dtype == np.int64
    np.testing.assert_array_equal(back, d)
    big = d.copy()
    big[1, 2] = CORE_INF32  # a finite distance the sentinel would take: kept int64
    assert narrow_array("core_dist", big) is big
    assert widen_array("core_dist", big) is big
    w = np.array([1, 2**31], dtype=np.int64)
    assert narrow_array("up_weight", w) is w
    assert narrow_array("up_head", np.arange(3, dtype=np.int32)).dtype == np.int32  # not a narrowed array
