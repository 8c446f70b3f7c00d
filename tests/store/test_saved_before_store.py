"""Directories saved by gpuroute before the store (``data/before_store``: written by the code of commit
8359be5 -- ``gpuroute.io.store``, ``gpuroute.crp.stages``, ``gpuroute.engine.dataset.build_dataset`` --
from a 40-node random graph, then one traffic update saved by a served engine) still open with every
check: a saved graph, a dataset directory with its saved traffic, and an overlay directory, which the
stages can then write again."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from gpuroute import store
from gpuroute.engine import Engine
from gpuroute.engine.dataset import load_dataset
from gpuroute.pipeline.overlay_dir import check_overlay, open_overlay, run_customize
from gpuroute.store import load_graph

DATA = Path(__file__).resolve().parent / "data" / "before_store"


@pytest.fixture
def saved(tmp_path):
    d = tmp_path / "before_store"
    shutil.copytree(DATA, d)
    return d


def test_the_fixture_predates_the_store():
    for sub in ("dataset", "dataset/overlay", "crp"):
        assert store.INTEGRITY not in json.loads((DATA / sub / "manifest.json").read_text()), sub


def test_saved_graph_opens(saved):
    g = load_graph(saved / "graph")
    assert g.n_nodes == 40 and g.fingerprint() == load_graph(saved / "dataset" / "graph").fingerprint()


def test_dataset_and_its_saved_traffic_open(saved):
    ds = load_dataset(saved / "dataset")
    assert ds.traffic.restored and ds.traffic.refused is None and ds.traffic.generation == 1
    assert int(ds.overlay.arc_cost[1]) == 999  # the saved traffic update
    e = Engine.open(saved / "dataset")
    assert e.overlay is not None and e.ch.weight == ds.ch.weight


def test_overlay_directory_opens_and_is_written_again(saved):
    g = load_graph(saved / "graph")
    info = check_overlay(saved / "crp")
    assert info["metric"] == "distance"
    ov, _ = open_overlay(saved / "crp", graph=g)
    rng = np.random.default_rng(0)
    s, t = rng.integers(0, 40, 10), rng.integers(0, 40, 10)
    before = ov.distances(s, t)
    run_customize(saved / "crp", "distance", graph=g)  # the stage rewrites it with the store's integrity
    man = json.loads((saved / "crp" / "manifest.json").read_text())
    assert man[store.INTEGRITY] == store.manifest_integrity(man)
    np.testing.assert_array_equal(open_overlay(saved / "crp", graph=g)[0].distances(s, t), before)
