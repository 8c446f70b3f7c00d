"""Every saved artefact goes through the store (:mod:`gpuroute.store`): each manifest carries the
store's ``integrity`` entry and per-array SHA-256, so an edited field or a corrupted array is named on
load; artefacts saved before the store recorded ``integrity`` (overlays, overlay and dataset
directories) still open."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
from naive import random_road_graph

from gpuroute import store
from gpuroute.ch.api import ContractionHierarchy
from gpuroute.crp.overlay import Overlay
from gpuroute.engine.dataset import DatasetError, load_dataset
from gpuroute.graph.errors import ParseError
from gpuroute.partition import Partition
from gpuroute.pipeline import build_dataset
from gpuroute.pipeline.overlay_dir import StageError, check_overlay, run_customize, run_partition


@pytest.fixture(scope="module")
def graph():
    return random_road_graph(np.random.default_rng(11), 120)[0]


@pytest.fixture(scope="module")
def built(graph, tmp_path_factory):
    d = tmp_path_factory.mktemp("ds") / "data"
    build_dataset(graph, d, cell_sizes=[16, 64])
    return d


def _edit(path, fn):
    m = json.loads(path.read_text())
    fn(m)
    path.write_text(json.dumps(m))


def _has_integrity(directory):
    m = json.loads((directory / "manifest.json").read_text())
    return m.get(store.INTEGRITY) == store.manifest_integrity(m)


def test_every_part_of_a_dataset_carries_the_store_integrity(built):
    for sub in ("", "graph", "ch", "partition", "overlay"):
        assert _has_integrity(built / sub if sub else built), sub


def test_dataset_manifest_edit_is_named(built, tmp_path):
    import shutil

    d = tmp_path / "copy"
    shutil.copytree(built, d)
    _edit(d / "manifest.json", lambda m: m.__setitem__("metric", "distance"))
    with pytest.raises(DatasetError, match="edited after saving: field 'metric' changed"):
        load_dataset(d)


def test_dataset_without_integrity_still_opens(built, tmp_path):
    """A dataset directory built before the store (no ``integrity`` in its manifest or its overlay's)."""
    import shutil

    d = tmp_path / "old"
    shutil.copytree(built, d)
    for sub in ("", "overlay"):
        _edit(d / sub / "manifest.json", lambda m: m.pop(store.INTEGRITY))
    ds = load_dataset(d)
    assert ds.graph.n_nodes == 120 and ds.overlay.metric is not None


def test_overlay_manifest_edit_and_corrupted_array_are_named(built, graph, tmp_path):
    import shutil

    d = tmp_path / "ov"
    shutil.copytree(built / "overlay", d)
    Overlay.load(d, graph=graph)
    raw = bytearray((d / "clique.npy").read_bytes())
    raw[-1] ^= 0x01
    (d / "clique.npy").write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="clique.npy"):
        Overlay.load(d, graph=graph)
    shutil.rmtree(d)
    shutil.copytree(built / "overlay", d)
    _edit(d / "manifest.json", lambda m: m["metric"].__setitem__("units", "s"))
    with pytest.raises(ParseError, match="edited after saving: field 'metric' changed") as ei:
        Overlay.load(d, graph=graph)
    assert ei.value.path == str(d / "manifest.json")


def test_partition_and_hierarchy_name_a_corrupted_array(built, graph, tmp_path):
    import shutil

    for sub, load, fname in (("partition", lambda p: Partition.load(p, graph=graph), "cells.npy"),
                             ("ch", lambda p: ContractionHierarchy.load(p, graph=graph), "rank.npy")):
        d = tmp_path / sub
        shutil.copytree(built / sub, d)
        raw = bytearray((d / fname).read_bytes())
        raw[-1] ^= 0x01
        (d / fname).write_bytes(bytes(raw))
        with pytest.raises(ParseError, match=f"checksum of {fname} does not match"):
            load(d)


def test_overlay_directory_manifest(graph, tmp_path):
    d = tmp_path / "crp"
    run_partition(graph, d, cell_sizes=[16, 64])
    assert _has_integrity(d)
    run_customize(d, "distance", graph=graph)
    assert _has_integrity(d) and _has_integrity(d / "overlay")
    assert check_overlay(d)["metric"] == "distance"
    _edit(d / "manifest.json", lambda m: m["customization"].__setitem__("metric", "time"))
    with pytest.raises(StageError, match="edited after saving: field 'customization' changed"):
        check_overlay(d)
    _edit(d / "manifest.json", lambda m: (m["customization"].__setitem__("metric", "distance"),
                                          m.pop(store.INTEGRITY)))
    assert check_overlay(d)["metric"] == "distance"  # written before the store: opens without integrity


def test_distributed_table_manifest(graph, tmp_path):
    pytest.importorskip("distributed")
    from distributed import Client, LocalCluster

    import gpuroute.distributed as gd

    ch = ContractionHierarchy.build(graph, "distance", progress=False)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        recs = gd.table(client, ch, np.arange(5), np.arange(4), block=2, device="cpu", out=str(tmp_path / "t"))
    man = json.loads((tmp_path / "t" / "manifest.json").read_text())
    assert man[store.INTEGRITY] == store.manifest_integrity(man)
    assert [r["sha256"] for r in man["blocks"]] == [store.sha256_file(r["path"]) for r in recs]
    assert not [p for p in os.listdir(tmp_path / "t") if p.startswith(".")]
