"""The build pipeline (:mod:`gpuroute.pipeline`): each stage's ``run(config)`` writes what the next
stage reads (extract -> partition -> contract / customize, through their saved directories), a failing
stage leaves nothing half-built, and ``gpuroute build`` and ``Engine.open`` of a graph file go through
the stages."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from naive import random_road_graph
from scipy.sparse.csgraph import dijkstra

from gpuroute import pipeline
from gpuroute.ch.api import ContractionHierarchy
from gpuroute.crp.overlay import Overlay
from gpuroute.graph.constants import INF
from gpuroute.graph.errors import ParseError
from gpuroute.partition import Partition
from gpuroute.pipeline import contract, customize, extract, partition
from gpuroute.store import load_graph

CELLS = [16, 64]


@pytest.fixture(scope="module")
def graph():
    return random_road_graph(np.random.default_rng(7), 150)[0]


@pytest.fixture(scope="module")
def chain(graph, tmp_path_factory):
    """Each stage run on the previous stage's saved directory: ``(directory, results by stage)``."""
    d = tmp_path_factory.mktemp("stages")
    ex = extract.run(extract.ExtractConfig(graph, output=d / "graph"))
    pa = partition.run(partition.PartitionConfig(d / "graph", output=d / "partition", cell_sizes=CELLS))
    co = contract.run(contract.ContractConfig(d / "graph", weight="distance", output=d / "ch"))
    cu = customize.run(customize.CustomizeConfig(d / "graph", d / "partition", metric="distance",
                                                 output=d / "overlay"))
    return d, {"extract": ex, "partition": pa, "contract": co, "customize": cu}


def _oracle(graph, s, t):
    return dijkstra(graph.to_scipy("distance"), indices=s)[np.arange(len(s)), t]


def test_stages_are_listed_in_order():
    assert list(pipeline.STAGES) == ["extract", "partition", "contract", "customize"]
    for name, mod in pipeline.STAGES.items():
        assert mod.NAME == name and callable(mod.run)


def test_each_stage_writes_what_the_next_reads(graph, chain):
    d, res = chain
    assert res["extract"].output == str(d / "graph") and res["partition"].output == str(d / "partition")
    assert res["contract"].output == str(d / "ch") and res["customize"].output == str(d / "overlay")
    g = load_graph(d / "graph")
    assert g.fingerprint() == graph.fingerprint()
    part = Partition.load(d / "partition", graph=g)
    np.testing.assert_array_equal(part.cells, res["partition"].partition.cells)
    ch = ContractionHierarchy.load(d / "ch", graph=g)
    ov = Overlay.load(d / "overlay", graph=g)
    rng = np.random.default_rng(1)
    s, t = rng.integers(0, g.n_nodes, 40), rng.integers(0, g.n_nodes, 40)
    want = _oracle(g, s, t)
    for got in (ch.distances(s, t, device="cpu"), ov.distances(s, t)):
        got = np.asarray(got, dtype=np.float64)
        got[got >= INF] = np.inf
        np.testing.assert_array_equal(got, want)


def test_configs_name_the_files_they_read_and_write(chain):
    d, _ = chain
    cfg = customize.CustomizeConfig(d / "graph", d / "partition", traffic=d / "t.csv", output=d / "overlay")
    assert cfg.reads() == [str(d / "graph"), str(d / "partition"), str(d / "t.csv")]
    assert cfg.writes() == [str(d / "overlay")]
    assert contract.ContractConfig(d / "graph", output=d / "ch").reads() == [str(d / "graph")]
    assert partition.PartitionConfig(d / "graph").writes() == []
    assert extract.ExtractConfig("no-such-file.gr", output=d / "g").reads() == []


def test_customize_stage_applies_traffic_and_names_a_bad_row(graph, chain, tmp_path):
    d, res = chain
    csv = tmp_path / "t.csv"
    csv.write_text("arc_id,cost\n0,123456\n")
    cu = customize.run(customize.CustomizeConfig(d / "graph", d / "partition", metric="distance", traffic=csv))
    assert cu.traffic["rows"] == 1 and int(cu.overlay.arc_cost[0]) == 123456
    csv.write_text("arc_id,cost\n0,12\n1,-3\n")
    with pytest.raises(ParseError, match=r"t\.csv:3: cost '-3' of arc 1 must be positive"):
        customize.run(customize.CustomizeConfig(d / "no-graph-read-first", d / "partition", traffic=csv))
    csv.write_text(f"{graph.n_arcs},5\n")
    with pytest.raises(ParseError, match=r"t\.csv:1: arc id .* is not an arc of the graph"):
        customize.run(customize.CustomizeConfig(d / "graph", d / "partition", traffic=csv))


def test_a_stage_refuses_the_output_of_another_graph(chain):
    d, _ = chain
    other = random_road_graph(np.random.default_rng(8), 150)[0]
    with pytest.raises(ValueError, match="built for another graph"):
        customize.run(customize.CustomizeConfig(other, d / "partition"))


def _leftovers(parent):
    return sorted(p for p in os.listdir(parent) if p.startswith("."))


@pytest.mark.parametrize("failing", ["partition", "contract", "customize"])
def test_a_failing_stage_leaves_nothing_half_built(graph, tmp_path, monkeypatch, failing):
    target = {"partition": (Partition, "save"), "contract": (ContractionHierarchy, "build"),
              "customize": (Overlay, "customize")}[failing]

    def boom(*a, **k):
        raise OSError(f"{failing} failed (simulated)")

    out = tmp_path / "data"
    monkeypatch.setattr(*target, boom)
    with pytest.raises(OSError, match=f"{failing} failed"):
        pipeline.build_dataset(graph, out, cell_sizes=CELLS)
    assert not out.exists() and _leftovers(tmp_path) == []
    monkeypatch.undo()
    pipeline.build_dataset(graph, out, cell_sizes=CELLS)
    before = {p: os.path.getmtime(out / p / "manifest.json") for p in ("graph", "ch", "partition", "overlay")}
    monkeypatch.setattr(*target, boom)
    with pytest.raises(OSError, match=f"{failing} failed"):  # a failed rebuild keeps the previous dataset
        pipeline.build_dataset(graph, out, cell_sizes=CELLS)
    assert {p: os.path.getmtime(out / p / "manifest.json") for p in before} == before
    assert _leftovers(tmp_path) == []


def test_a_failing_stage_run_alone_leaves_nothing(graph, tmp_path, monkeypatch):
    monkeypatch.setattr(Overlay, "_save_files", lambda self, d: (_ for _ in ()).throw(OSError("disk full")))
    with pytest.raises(OSError, match="disk full"):
        customize.run(customize.CustomizeConfig(graph, Partition.build(graph, cell_sizes=CELLS), metric="distance",
                                                output=tmp_path / "overlay"))
    assert os.listdir(tmp_path) == []
    (tmp_path / "photos").mkdir()
    (tmp_path / "photos" / "a.jpg").write_bytes(b"x")
    for cfg, mod in ((partition.PartitionConfig(graph, output=tmp_path / "photos"), partition),
                     (contract.ContractConfig(graph, output=tmp_path / "photos"), contract),
                     (extract.ExtractConfig(graph, output=tmp_path / "photos"), extract)):
        with pytest.raises(FileExistsError, match="not replacing it"):
            mod.run(cfg)
    assert os.listdir(tmp_path / "photos") == ["a.jpg"]


def _spy(monkeypatch):
    calls = []
    for name, mod in pipeline.STAGES.items():
        real = mod.run

        def run(config, _real=real, _name=name):
            calls.append(_name)
            return _real(config)

        monkeypatch.setattr(mod, "run", run)
    return calls


def test_cli_build_and_engine_open_go_through_the_stages(graph, tmp_path, monkeypatch, capsys):
    from gpuroute.cli.main import main
    from gpuroute.engine import Engine
    from gpuroute.store import save_graph

    src = save_graph(graph, tmp_path / "g")
    calls = _spy(monkeypatch)
    assert main(["build", src, "-o", str(tmp_path / "data"), "--cell-sizes", "16,64"]) == 0
    assert calls == ["extract", "contract", "partition", "customize"]
    calls.clear()
    e = Engine.open(src)  # a graph without turn costs: extract and contract, in memory
    assert calls == ["extract", "contract"] and e.overlay is None
    assert not (tmp_path / "g" / "ch").exists()


def test_build_in_memory_and_its_options(graph, tmp_path):
    from gpuroute.pipeline.build import BuildConfig, run

    b = run(BuildConfig(graph, weight="distance", overlay=True, cell_sizes=CELLS))
    assert b.ch.weight == "distance" and b.overlay is not None and list(b.partition.cell_sizes) == CELLS
    assert b.summary["directory"] is None and "save" not in b.summary["seconds"] and os.listdir(tmp_path) == []
    b = run(BuildConfig(graph))  # no turn costs: no overlay in memory
    assert b.overlay is None and b.weight == "travel_time"
    with pytest.raises(ValueError, match="overlay=False builds in memory only"):
        run(BuildConfig(graph, output=tmp_path / "d", overlay=False))
    with pytest.raises(KeyError, match="no weight 'time'"):
        run(BuildConfig(graph, output=tmp_path / "d", weight="time"))
    assert os.listdir(tmp_path) == []


def test_extract_with_an_osrm_lua_profile_feeds_the_overlay(tmp_path):
    """The extract stage runs an OSRM Lua profile (through :mod:`gpuroute.io.lua_profile`); its turn costs
    go through the saved graph to the next stages, and an in-memory build then customizes the overlay
    with them (the profile's weight)."""
    pytest.importorskip("lupa")
    lua = Path(__file__).resolve().parents[1] / "data" / "gpuroute_car.lua"
    ex = extract.run(extract.ExtractConfig("monaco", profile=lua, output=tmp_path / "g"))
    assert ex.profile == str(lua) and ex.graph.turn_costs is not None
    from gpuroute.pipeline.build import BuildConfig, run

    b = run(BuildConfig(tmp_path / "g"))
    assert b.graph.turn_costs is not None and b.weight == "weight" and b.overlay is not None
    assert b.metric == b.graph.turn_costs.meta.get("weight_name", "weight")
    with pytest.raises(ValueError, match="applies to OpenStreetMap files"):
        extract.run(extract.ExtractConfig(tmp_path / "g", profile=lua))
