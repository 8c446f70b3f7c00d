"""``gpuroute match`` on the shipped Monaco extract: a trace CSV (LON,LAT[,TIMESTAMP[,RADIUS]]), the text
summary and ``--json`` (the OSRM /match response, the same as :meth:`gpuroute.engine.Engine.match`), bad
input (exit 2 naming the file and line), nothing matched (exit 1)."""
import json
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("osmium")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from match_traces import make_trace  # noqa: E402

from gpuroute.cli.main import main  # noqa: E402
from gpuroute.engine import Engine  # noqa: E402


def run(capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def trace():
    eng = Engine.open("monaco")
    coords, ts, _ = make_trace(eng, np.random.default_rng(4), 5.0, 10.0, min_m=800.0, max_m=3000.0, max_points=100)
    coords = [(round(x, 7), round(y, 7)) for x, y in coords]
    return eng, coords, ts


def test_match_text_and_json(tmp_path, capsys, trace):
    eng, coords, ts = trace
    csv = tmp_path / "trace.csv"
    csv.write_text("lon,lat,t,r\n" + "".join(f"{x},{y},{t},5\n" for (x, y), t in zip(coords, ts, strict=True)))
    code, out, err = run(capsys, ["match", "--trace", str(csv)])
    assert code == 0, err
    assert f"of {len(coords)} points" in out and "matching 0:" in out and "confidence" in out
    code, out, err = run(capsys, ["match", "--trace", str(csv), "--json"])
    assert code == 0, err
    res = json.loads(out)
    want = eng.match(coords, timestamps=ts, radiuses=[5.0] * len(ts), geometries="geojson", overview="full")
    assert res["code"] == "Ok"
    assert [m["distance"] for m in res["matchings"]] == [m["distance"] for m in want["matchings"]]
    assert [tp is None for tp in res["tracepoints"]] == [tp is None for tp in want["tracepoints"]]


def test_match_bad_input(tmp_path, capsys):
    one = tmp_path / "one.csv"
    one.write_text("7.42,43.73\n")
    code, _, err = run(capsys, ["match", "--trace", str(one)])
    assert code == 2 and "at least two" in err
    assert run(capsys, ["match", "--trace", str(tmp_path / "missing.csv")])[0] == 2
    bad = tmp_path / "bad.csv"
    bad.write_text("7.42,43.73,0\n7.43,x,5\n")
    code, _, err = run(capsys, ["match", "--trace", str(bad)])
    assert code == 2 and "bad.csv:2" in err
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("7.42,43.73,0\n7.43,43.74\n")
    code, _, err = run(capsys, ["match", "--trace", str(ragged)])
    assert code == 2 and "ragged.csv:2" in err
    down = tmp_path / "down.csv"
    down.write_text("7.42,43.73,5\n7.43,43.74,3\n")
    code, _, err = run(capsys, ["match", "--trace", str(down)])
    assert code == 2 and "InvalidValue" in err and "monotonically" in err


def test_match_nothing_matched(tmp_path, capsys):
    far = tmp_path / "far.csv"
    far.write_text("0.0,0.0\n0.001,0.0\n")
    code, out, _ = run(capsys, ["match", "--trace", str(far)])
    assert code == 1 and "no match" in out
