"""The current traffic survives a restart: every successful customization of an engine opened from a
dataset directory is saved to ``DIR/traffic.npz`` (atomically), and :func:`load_dataset` /
:meth:`Engine.open` apply it again -- exactly (arc costs, turn costs, cliques and the routes of the
customized engine are the oracle). A damaged, truncated, edited or foreign traffic file is refused with a
warning naming it and the dataset keeps its built metric; a customization that fails writes nothing; a
save that fails leaves the previous file (and the previous metric in memory)."""
from __future__ import annotations

import json
import logging
import os
import shutil
import threading

import numpy as np
import pytest

pytest.importorskip("osmium")

from gpuroute.cli.main import main  # noqa: E402
from gpuroute.crp.metric import Metric  # noqa: E402
from gpuroute.engine import Engine, EngineError  # noqa: E402
from gpuroute.engine.dataset import TRAFFIC, drop_traffic, load_dataset  # noqa: E402
from gpuroute.pipeline import build_dataset  # noqa: E402

CELLS = (64, 1024)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    d = tmp_path_factory.mktemp("ds") / "monaco"
    build_dataset("monaco", d, cell_sizes=CELLS)
    return d


@pytest.fixture
def dataset(built, tmp_path):
    """A private copy of the built dataset (hard links: its files are only ever replaced, never
    rewritten in place), so that the traffic one test saves does not reach another."""
    d = tmp_path / "monaco"
    shutil.copytree(built, d, copy_function=os.link)
    return d


def _state(ov):
    st = ov._need_state()
    return st.arc_cost, st.turn_cost, st.clique


def _same_overlay(a, b):
    for x, y in zip(_state(a), _state(b), strict=True):
        np.testing.assert_array_equal(x, y)
    assert a.metric.name == b.metric.name and a.metric.units == b.metric.units
    np.testing.assert_array_equal(a.metric.turn_penalty, b.metric.turn_penalty)


def _pairs(e, k=12, seed=7):
    c = e.graph.coords
    rng = np.random.default_rng(seed)
    return [[c[i].tolist(), c[j].tolist()] for i, j in rng.integers(0, e.graph.n_nodes, (k, 2))]


def _routes(e, pairs):
    out = []
    for pts in pairs:
        r = e.route(pts, annotations=["nodes", "duration"], overview="false")["routes"][0]
        out.append((r["weight"], r["duration"], r["weight_name"], r["legs"][0]["annotation"]["nodes"]))
    return out


def _doubled_route(e, pts):
    """Updates doubling the cost of every arc of the route between ``pts``."""
    r = e.route(pts, annotations=["nodes"], overview="false")["routes"][0]
    nodes = r["legs"][0]["annotation"]["nodes"]
    g = e.graph
    ids = np.asarray(g.node_ids)
    pos = {int(x): i for i, x in enumerate(ids)}
    cost = np.asarray(e.overlay.arc_cost)
    ups = []
    for u, v in zip(nodes[:-1], nodes[1:], strict=True):
        a, b = pos[u], pos[v]
        arcs = np.flatnonzero(np.asarray(g.head)[g.first_out[a]:g.first_out[a + 1]] == b) + g.first_out[a]
        ups += [{"arc": int(x), "cost": int(2 * cost[x])} for x in arcs]
    return ups


def test_traffic_is_restored_exactly(dataset):
    """Updates, then a named metric, then updates on it: each time a fresh engine on the directory has the
    customized engine's arc costs, turn costs and cliques, and answers its routes."""
    built = Engine.open(dataset)
    e = Engine.open(dataset)
    pairs = _pairs(e)
    base = _routes(built, pairs)
    assert e.info["traffic"]["restored"] is False and e.info["traffic"]["generation"] == 0
    assert not (dataset / TRAFFIC).exists()

    res = e.customize(_doubled_route(e, pairs[0]) + _doubled_route(e, pairs[1]))
    assert res["saved"]["generation"] == 1 and res["saved"]["file"] == str(dataset / TRAFFIC)
    ids = np.asarray(e.graph.node_ids)
    length = np.asarray(e.graph.arc_attrs["length_m"])
    a = int(np.flatnonzero(length > 30)[0])
    e.customize([{"from": int(ids[e.graph.tail[a]]), "to": int(ids[e.graph.head[a]]), "speed_kmh": 9}])
    want = _routes(e, pairs)
    assert want != base  # the traffic changed some route: the comparison below can fail
    r = Engine.open(dataset)
    _same_overlay(e.overlay, r.overlay)
    assert _routes(r, pairs) == want
    t = r.info["traffic"]
    assert t["restored"] is True and t["generation"] == 2 and t["refused"] is None and t["updated"]
    assert r.info["metric"] == "time"
    assert not (np.asarray(r.overlay.arc_cost) == np.asarray(built.overlay.arc_cost)).all()

    for name in ("time-uturn", "distance"):
        e.customize(metric=name)
        e.customize(_doubled_route(e, pairs[2]))
        r = Engine.open(dataset)
        _same_overlay(e.overlay, r.overlay)
        assert _routes(r, pairs) == _routes(e, pairs)
        assert r.info["metric"] == name and r.info["traffic"]["restored"] is True

    e.customize(metric="time")  # the built metric again (saved as such)
    r = Engine.open(dataset)
    _same_overlay(built.overlay, r.overlay)
    assert _routes(r, pairs) == base


def test_per_turn_costs_are_restored(dataset):
    """A metric with per-turn costs (a Lua profile's kind) keeps them through a restart."""
    e = Engine.open(dataset)
    ov = e.overlay
    rng = np.random.default_rng(2)
    tc = rng.integers(0, 40, ov.turns.n_turns).astype(np.int32)
    ov.customize(Metric(np.asarray(ov.arc_cost), turn_cost=tc, name="time", units="ds"))
    e.customize([{"arc": 5, "cost": 77}, {"arc": 900, "cost": 3}])
    r = Engine.open(dataset)
    _same_overlay(ov, r.overlay)
    np.testing.assert_array_equal(r.overlay.metric.turn_cost, tc)
    pairs = _pairs(e, k=6)
    assert _routes(r, pairs) == _routes(e, pairs)


def _saved(dataset):
    e = Engine.open(dataset)
    e.customize(_doubled_route(e, _pairs(e)[0]))
    return (dataset / TRAFFIC).read_bytes()


def _rewrite(path, edit):
    """Load a traffic file, let ``edit(header, arrays)`` change it, save it with consistent hashes."""
    import hashlib

    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    header = json.loads(bytes(arrays.pop("header")).decode())
    edit(header, arrays)
    for k, a in arrays.items():
        header["arrays"][k] = {"dtype": str(a.dtype), "shape": list(a.shape),
                               "sha256": hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()}
    with open(path, "wb") as f:
        np.savez(f, header=np.frombuffer(json.dumps(header).encode(), np.uint8), **arrays)


def _zero_cost(header, arrays):
    arrays["arc_cost"] = arrays["arc_cost"].copy()
    arrays["arc_cost"][3] = 0


def _other_graph(header, arrays):
    header["dataset"]["graph_fingerprint"] = "0" * 16


def _short(header, arrays):
    arrays["arc_cost"] = arrays["arc_cost"][:-1]


DAMAGE = {
    "truncated": lambda p, good: p.write_bytes(good[: len(good) // 2]),
    "empty": lambda p, good: p.write_bytes(b""),
    "garbage": lambda p, good: p.write_bytes(b"PK\x03\x04" + bytes(range(256)) * 8),
    "flipped-byte": lambda p, good: p.write_bytes(good[:-300] + bytes([good[-300] ^ 0xFF]) + good[-299:]),
    "a .npy, not a .npz": lambda p, good: np.save(open(p, "wb"), np.arange(5)),  # noqa: SIM115
    "zero arc cost": lambda p, good: _rewrite(p, _zero_cost),
    "other graph": lambda p, good: _rewrite(p, _other_graph),
    "arc count": lambda p, good: _rewrite(p, _short),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damaged_traffic_is_refused(dataset, damage, caplog):
    reference = Engine.open(dataset).overlay  # the built metric
    good = _saved(dataset)
    path = dataset / TRAFFIC
    DAMAGE[damage](path, good)
    with caplog.at_level(logging.WARNING, logger="gpuroute"):
        e = Engine.open(dataset)
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any(str(path) in m for m in warned), warned
    _same_overlay(reference, e.overlay)
    t = e.info["traffic"]
    assert t["restored"] is False and t["refused"] and str(path) in t["refused"]
    # the refused file stays until the next customization replaces it
    e.customize([{"arc": 1, "cost": 5}])
    assert Engine.open(dataset).overlay.arc_cost[1] == 5


def test_traffic_of_another_partition_is_refused(dataset, tmp_path, caplog):
    """The same graph and arc count, another partition: refused (never applied to the wrong cells)."""
    reference = Engine.open(dataset).overlay
    other = tmp_path / "other"
    build_dataset("monaco", other, cell_sizes=(128,))
    e = Engine.open(other)
    e.customize(_doubled_route(e, _pairs(e)[0]))
    shutil.copyfile(other / TRAFFIC, dataset / TRAFFIC)
    with caplog.at_level(logging.WARNING, logger="gpuroute"):
        ds = load_dataset(dataset)
    assert any(str(dataset / TRAFFIC) in r.getMessage() and "partition" in r.getMessage() for r in caplog.records)
    _same_overlay(reference, ds.overlay)
    assert ds.traffic.restored is False


def test_failed_customize_writes_nothing(dataset):
    e = Engine.open(dataset)
    path = dataset / TRAFFIC
    m = e.graph.n_arcs
    bad = ([{"arc": m, "cost": 5}], [{"arc": 0, "cost": 0}], [{"arc": 1, "cost": 2}, {"arc": "x", "cost": 2}])
    for updates in bad:
        with pytest.raises(EngineError):
            e.customize(updates)
    with pytest.raises(EngineError):
        e.customize(metric="fastest")
    assert not path.exists()
    e.customize([{"arc": 2, "cost": 9}])
    good = path.read_bytes()
    met = e.overlay.metric
    for updates in bad:
        with pytest.raises(EngineError):
            e.customize(updates)
    with pytest.raises(EngineError):
        e.customize(metric="fastest")
    assert path.read_bytes() == good and e.overlay.metric is met
    assert sorted(os.listdir(dataset)) == sorted(["ch", "graph", "manifest.json", "overlay", "partition", TRAFFIC])


def test_failed_http_customize_writes_nothing(dataset):
    pytest.importorskip("starlette")
    pytest.importorskip("httpx")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient
    from gpuroute.server import create_app

    e = Engine.open(dataset)
    path = dataset / TRAFFIC
    with TestClient(create_app(e, allow_customize=True)) as client:
        r = client.post("/customize", json={"updates": [{"arc": 0, "cost": 7}, {"arc": -1, "cost": 7}]})
        assert r.status_code == 400
        assert not path.exists()
        assert client.post("/customize", json={"updates": [{"arc": 0, "cost": 7}]}).status_code == 200
        good = path.read_bytes()
        assert client.post("/customize", json={"metric": "fastest"}).status_code == 400
        assert path.read_bytes() == good
        h = client.get("/health").json()["engine"]
        assert h["metric"] == "time" and h["traffic"]["generation"] == 1 and h["traffic"]["file"] == str(path)


def test_a_failed_save_keeps_the_previous_file_and_metric(dataset, monkeypatch):
    """The rename of the new file fails: the previous file is intact, no temporary is left, and the
    engine keeps the previous metric (memory and disk agree)."""
    import gpuroute.store.atomic as atomic

    e = Engine.open(dataset)
    path = dataset / TRAFFIC
    e.customize([{"arc": 2, "cost": 9}])
    good = path.read_bytes()
    met = e.overlay.metric
    costs = np.asarray(e.overlay.arc_cost).copy()

    def fail(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "replace", fail)
    with pytest.raises(OSError, match=TRAFFIC):
        e.customize([{"arc": 3, "cost": 11}])
    with pytest.raises(OSError, match=TRAFFIC):
        e.customize(metric="distance")
    monkeypatch.undo()
    assert path.read_bytes() == good
    assert sorted(os.listdir(dataset)) == sorted(["ch", "graph", "manifest.json", "overlay", "partition", TRAFFIC])
    assert e.overlay.metric is met and (np.asarray(e.overlay.arc_cost) == costs).all()
    assert e.info["traffic"]["generation"] == 1
    e.customize([{"arc": 3, "cost": 11}])  # works again: the same cells customized on the restored state
    _same_overlay(e.overlay, Engine.open(dataset).overlay)


def test_concurrent_customizations_end_as_saved(dataset):
    e = Engine.open(dataset)
    errors = []

    def worker(k):
        try:
            for i in range(4):
                e.customize([{"arc": 10 * k + i, "cost": 100 + k}])
        except Exception as x:  # pragma: no cover - reported below
            errors.append(x)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    r = Engine.open(dataset)
    _same_overlay(e.overlay, r.overlay)
    assert r.info["traffic"]["generation"] == 12


def test_engine_from_a_graph_saves_nothing(dataset):
    e = Engine.open(dataset)
    plain = Engine(e.graph, e.ch, overlay=e.overlay.__class__.load(dataset / "overlay", graph=e.graph))
    res = plain.customize([{"arc": 4, "cost": 8}])
    assert res["saved"] is None and plain.info["traffic"] is None
    assert not (dataset / TRAFFIC).exists()


def test_read_only_directory_customizes_in_memory(dataset, monkeypatch):
    """A directory the server may not write to: customizations work in memory, nothing is written, and
    info says the traffic is not saved."""
    os.chmod(dataset, 0o555)
    try:
        if hasattr(os, "geteuid") and os.geteuid() == 0:  # root writes anyway: answer as for another user
            real = os.access
            monkeypatch.setattr(os, "access", lambda p, mode, **k: False if mode & os.W_OK and
                                os.path.realpath(p) == os.path.realpath(dataset) else real(p, mode, **k))
        e = Engine.open(dataset)
        assert e.info["traffic"]["persist"] is False
        res = e.customize([{"arc": 4, "cost": 8}])
        assert res["saved"] is None and e.overlay.arc_cost[4] == 8
        assert not (dataset / TRAFFIC).exists()
    finally:
        os.chmod(dataset, 0o755)


def test_reset(dataset, capsys, tmp_path):
    e = Engine.open(dataset)
    built = np.asarray(e.overlay.arc_cost).copy()
    e.customize([{"arc": 4, "cost": int(built[4]) + 8}])
    assert main(["customize", str(dataset), "--reset"]) == 0
    assert str(dataset / TRAFFIC) in capsys.readouterr().out
    assert not (dataset / TRAFFIC).exists()
    r = Engine.open(dataset)
    assert r.info["traffic"]["restored"] is False and (np.asarray(r.overlay.arc_cost) == built).all()
    assert main(["customize", str(dataset), "--reset"]) == 0
    assert "no saved traffic" in capsys.readouterr().out
    other = tmp_path / "plain"
    other.mkdir()
    assert main(["customize", str(other), "--reset"]) == 2
    assert "not a dataset directory" in capsys.readouterr().err
    assert main(["customize", str(dataset), "--reset", "--metric", "time"]) == 2
    assert "--reset" in capsys.readouterr().err
    assert drop_traffic(dataset) is False


def _flip_in_arc_cost(path):
    """Flip one byte inside the stored ``arc_cost`` member's array data (the ZIP entry keeps its CRC-32)."""
    import zipfile

    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("arc_cost.npy")
    raw = bytearray(path.read_bytes())
    # local file header: 30 bytes + name + extra; then the .npy (its own header, then the data)
    name_len, extra_len = int.from_bytes(raw[info.header_offset + 26:info.header_offset + 28], "little"), \
        int.from_bytes(raw[info.header_offset + 28:info.header_offset + 30], "little")
    start = info.header_offset + 30 + name_len + extra_len
    raw[start + info.file_size - 5] ^= 0x01  # in the last arc cost, past the .npy header
    path.write_bytes(bytes(raw))


def test_saved_file_is_version_3_without_array_hashes(dataset):
    from gpuroute.engine.dataset import TRAFFIC_VERSION

    _saved(dataset)
    with np.load(dataset / TRAFFIC, allow_pickle=False) as z:
        header = json.loads(bytes(z["header"]).decode())
    assert header["version"] == TRAFFIC_VERSION == 3
    assert all(set(spec) == {"dtype", "shape"} for spec in header["arrays"].values()), header["arrays"]


def test_damaged_array_byte_is_refused_as_damaged(dataset, caplog):
    """Version 3 keeps no SHA-256: the member's CRC-32 catches a flipped data byte, reported as damage
    (not as an unreadable file) and naming the file."""
    reference = Engine.open(dataset).overlay
    _saved(dataset)
    path = dataset / TRAFFIC
    _flip_in_arc_cost(path)
    with caplog.at_level(logging.WARNING, logger="gpuroute"):
        e = Engine.open(dataset)
    refused = e.info["traffic"]["refused"]
    assert refused and refused.startswith(f"{path}: damaged after saving"), refused  # the file, then why
    assert "CRC-32" in refused and "unreadable" not in refused, refused
    _same_overlay(reference, e.overlay)


def _as_version_2(header, arrays):
    header["version"] = 2  # _rewrite writes a SHA-256 per array, as versions 1 and 2 did


def test_version_2_file_still_restores_and_its_hashes_are_checked(dataset):
    e = Engine.open(dataset)
    e.customize(_doubled_route(e, _pairs(e)[0]))
    path = dataset / TRAFFIC
    _rewrite(path, _as_version_2)
    r = Engine.open(dataset)
    assert r.info["traffic"]["restored"] is True
    _same_overlay(e.overlay, r.overlay)

    def wrong_hash(header, arrays):
        header["version"] = 2

    _rewrite(path, wrong_hash)
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    header = json.loads(bytes(arrays.pop("header")).decode())
    header["arrays"]["arc_cost"]["sha256"] = "0" * 64
    with open(path, "wb") as f:
        np.savez(f, header=np.frombuffer(json.dumps(header).encode(), np.uint8), **arrays)
    t = Engine.open(dataset).info["traffic"]
    assert t["restored"] is False and "SHA-256" in t["refused"] and str(path) in t["refused"]
