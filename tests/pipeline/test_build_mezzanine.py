"""A dataset build gives a large graph's overlay the mezzanine levels of ``config.CRP_MEZZANINE_AUTO``
(Delling, Kobitzsch, Werneck, Euro-Par 2014, sec. 3) and saves them with it: ``Engine.open`` customizes on
the same plan without kaffpa, and every clique and route equals the overlay built without them (the
oracle: the same dataset built with the auto levels off, and Dijkstra)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from naive import random_road_graph
from scipy.sparse.csgraph import dijkstra

from gpuroute import config
from gpuroute.engine import Engine
from gpuroute.partition import Partition
from gpuroute.pipeline import build_dataset

pytest.importorskip("kahip")
CELLS = [16, 64]


def test_dataset_saves_and_opens_its_mezzanine_levels(tmp_path, monkeypatch):
    g = random_road_graph(np.random.default_rng(11), 300)[0]
    monkeypatch.setattr(config, "CRP_MEZZANINE", {})
    monkeypatch.setattr(config, "CRP_MEZZANINE_AUTO", {16: (4,)})
    monkeypatch.setattr(config, "CRP_MEZZANINE_AUTO_MIN_NODES", g.n_nodes)
    build_dataset(g, tmp_path / "mz", cell_sizes=CELLS, weight="distance")
    monkeypatch.setattr(config, "CRP_MEZZANINE_AUTO_MIN_NODES", g.n_nodes + 1)  # below the bound: none
    build_dataset(g, tmp_path / "plain", cell_sizes=CELLS, weight="distance")
    man = json.loads((tmp_path / "mz" / "overlay" / "manifest.json").read_text())
    assert man["mezzanine"]["cell_sizes"] == [4, 16, 64] and (tmp_path / "mz" / "overlay" / "mezzanine.npy").is_file()
    assert json.loads((tmp_path / "plain" / "overlay" / "manifest.json").read_text())["mezzanine"] is None

    monkeypatch.setattr(Partition, "refine", lambda *a, **k: pytest.fail("kaffpa ran on open"))
    e_mz, e_plain = Engine.open(tmp_path / "mz"), Engine.open(tmp_path / "plain")
    assert not e_mz.overlay._plan.identity and e_plain.overlay._plan.identity
    np.testing.assert_array_equal(e_mz.overlay._state.clique, e_plain.overlay._state.clique)
    e_mz.overlay.customize("distance", device="cpu")  # customized again on the loaded plan
    np.testing.assert_array_equal(e_mz.overlay._state.clique, e_plain.overlay._state.clique)
    d = dijkstra(g.to_scipy("distance"), indices=[0, 7])
    checked = 0
    for s_i, s in enumerate([0, 7]):
        for t in np.flatnonzero(np.isfinite(d[s_i]))[::7]:
            assert e_mz.overlay.route(s, int(t)).distance == int(d[s_i, t])
            checked += 1
    assert checked > 20
